/*
 * Op definitions of the 'misc' family (see ir/ops.h): losses
 * (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), window generators
 * (Hann, Hamming, Blackman), and the other rare ops, each calling the plain
 * C kernels of runtime/kernels/misc.c.
 */
#include <string.h>
#include <strings.h>

#include "../eval.h"
#include "k_misc.h"

/* Fails naming the node if one of its first k inputs is missing (an empty
 * name in the model), so no definition below dereferences a NULL input. */
static int need_inputs(const kn_node *n, int k)
{
    for (int i = 0; i < k; i++)
        if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

static int node_fail(const kn_node *n, int st)
{
    if (st) kn_error_prefix("node '%s' (%s): ", n->name, n->op_type);
    return st;
}

static int infer_same0(kn_node *n)
{
    return need_inputs(n, 2) ? KN_ERR_INVALID : kn_infer_same_as_input(n, 0);
}

/* ---- losses --------------------------------------------------------------------------- */

static int loss_reduction(const kn_node *n, kn_loss_reduction *out)
{
    const char *r = kn_attr_string(n, "reduction", "mean");
    if (!strcmp(r, "none")) *out = KN_LOSS_NONE;
    else if (!strcmp(r, "sum")) *out = KN_LOSS_SUM;
    else if (!strcmp(r, "mean")) *out = KN_LOSS_MEAN;
    else return kn_node_error(n, KN_ERR_INVALID, "unknown reduction '%s'", r);
    return KN_OK;
}

static int infer_loss(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_loss_reduction red;
    int st = loss_reduction(n, &red);
    if (st) return st;
    kn_value *x = n->inputs[0], *t = n->inputs[1];
    if (red == KN_LOSS_NONE) kn_infer_set_shape(n, 0, x->dtype, &t->shape);
    else kn_infer_set(n, 0, x->dtype, 0, NULL);
    if (n->n_outputs > 1) kn_infer_set_shape(n, 1, x->dtype, &x->shape);
    return KN_OK;
}

/* NLL of log-probabilities lp (the input itself, or SCE's log-softmax). */
static int run_nll(const kn_node *n, const kn_tensor *lp, const kn_tensor *target, const kn_tensor *weight,
                   kn_tensor *out)
{
    kn_loss_reduction red;
    int st = loss_reduction(n, &red);
    if (st) return st;
    if (!kn_dtype_info(target->dtype)->is_integer)
        return kn_node_error(n, KN_ERR_INVALID, "target must be integer, got %s", kn_dtype_name(target->dtype));
    const kn_attr *ii = kn_node_attr(n, "ignore_index");
    if (red == KN_LOSS_NONE) st = kn_tensor_alloc(out, lp->dtype, target->rank, target->dims);
    else st = kn_tensor_alloc(out, lp->dtype, 0, NULL);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_nll_loss(lp, target, weight, ii != NULL, ii ? ii->i : 0, red, out));
}

static int eval_nll(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)ctx;
    return run_nll(n, in[0], in[1], kn_node_input(n, 2) ? in[2] : NULL, &out[0]);
}

static int eval_sce(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)ctx;
    kn_tensor lp = {0};
    int st = kn_tensor_alloc(&lp, in[0]->dtype, in[0]->rank, in[0]->dims);
    if (!st) st = kn_k_log_softmax_axis1(in[0], &lp);
    if (st) {
        kn_tensor_free(&lp);
        return node_fail(n, st);
    }
    st = run_nll(n, &lp, in[1], kn_node_input(n, 2) ? in[2] : NULL, &out[0]);
    if (!st && n->n_outputs > 1 && n->outputs[1]) out[1] = lp;
    else kn_tensor_free(&lp);
    return st;
}

/* ---- windows -------------------------------------------------------------------------- */

static kn_window_kind window_kind(kn_op op)
{
    return op == KN_OP_HannWindow ? KN_WINDOW_HANN : op == KN_OP_HammingWindow ? KN_WINDOW_HAMMING
                                                                              : KN_WINDOW_BLACKMAN;
}

static int infer_window(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_dtype dt = (kn_dtype)kn_attr_int(n, "output_datatype", KN_F32);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output_datatype %d", (int)dt);
    int64_t len = -1;
    const kn_tensor *c = n->inputs[0]->const_data;
    if (c && kn_tensor_numel(c) == 1) len = kn_load_i64(c->dtype, c->data, 0);
    kn_infer_set(n, 0, dt, 1, &len);
    return KN_OK;
}

static int eval_window(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)ctx;
    if (kn_tensor_numel(in[0]) != 1) return kn_node_error(n, KN_ERR_INVALID, "size must be a scalar");
    int64_t len = kn_load_i64(in[0]->dtype, in[0]->data, 0);
    if (len < 0) return kn_node_error(n, KN_ERR_INVALID, "size %lld is negative", (long long)len);
    int st = kn_tensor_alloc(&out[0], (kn_dtype)kn_attr_int(n, "output_datatype", KN_F32), 1, &len);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_window(window_kind(n->op), kn_attr_int(n, "periodic", 1) != 0, &out[0]));
}


/* ---- CenterCropPad / ReverseSequence ---------------------------------------------------- */

/* Output dims of CenterCropPad: x's dims with the listed axes set from the
 * shape input. Fails naming the node on a bad axis or negative size. */
static int ccp_dims(const kn_node *n, int rank, const int64_t *xdims, const kn_tensor *shape, int64_t *dims)
{
    const int64_t *axes;
    int na = kn_attr_ints(n, "axes", &axes);
    int64_t cnt = kn_tensor_numel(shape);
    if (!kn_dtype_info(shape->dtype)->is_integer || shape->rank != 1)
        return kn_node_error(n, KN_ERR_INVALID, "shape must be a 1-D integer tensor");
    if (cnt != (na ? na : rank))
        return kn_node_error(n, KN_ERR_INVALID, "shape has %lld entries for %d axes", (long long)cnt, na ? na : rank);
    memcpy(dims, xdims, sizeof *dims * (size_t)rank);
    for (int i = 0; i < cnt; i++) {
        int a = na ? kn_norm_axis(axes[i], rank) : i;
        if (a < 0) return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
        dims[a] = kn_load_i64(shape->dtype, shape->data, (size_t)i);
        if (dims[a] < 0) return kn_node_error(n, KN_ERR_INVALID, "target size %lld is negative", (long long)dims[a]);
    }
    return KN_OK;
}

static int infer_ccp(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *sv = n->inputs[1];
    kn_shape s = x->shape;
    if (s.rank >= 0 && sv->const_data) {
        int st = ccp_dims(n, s.rank, x->shape.dims, sv->const_data, s.dims);
        if (st) return st;
        for (int i = 0; i < s.rank; i++)
            if (s.dims[i] != x->shape.dims[i]) s.sym[i] = NULL;
    } else if (s.rank >= 0) {
        for (int i = 0; i < s.rank; i++) {
            s.dims[i] = -1;
            s.sym[i] = NULL;
        }
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

static int eval_ccp(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)ctx;
    int64_t dims[KN_MAX_RANK];
    int st = ccp_dims(n, in[0]->rank, in[0]->dims, in[1], dims);
    if (st) return st;
    st = kn_tensor_alloc(&out[0], in[0]->dtype, in[0]->rank, dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_center_crop_pad(in[0], &out[0]));
}

static int eval_revseq(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)ctx;
    int rank = in[0]->rank;
    int64_t ba = kn_attr_int(n, "batch_axis", 1), ta = kn_attr_int(n, "time_axis", 0);
    int b = kn_norm_axis(ba, rank), t = kn_norm_axis(ta, rank);
    if (b < 0 || t < 0 || b == t)
        return kn_node_error(n, KN_ERR_INVALID, "batch_axis %lld / time_axis %lld invalid for rank %d",
                             (long long)ba, (long long)ta, rank);
    int st = kn_tensor_alloc(&out[0], in[0]->dtype, rank, in[0]->dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_reverse_sequence(in[0], in[1], b, t, &out[0]));
}

/* ---- GridSample ------------------------------------------------------------------------------ */

static int gs_params(const kn_node *n, kn_gs_mode *mode, kn_gs_pad *pad)
{
    const char *m = kn_attr_string(n, "mode", kn_node_opset(n) >= 20 ? "linear" : "bilinear");
    const char *p = kn_attr_string(n, "padding_mode", "zeros");
    if (!strcmp(m, "nearest")) *mode = KN_GS_NEAREST;
    else if (!strcmp(m, "linear") || !strcmp(m, "bilinear")) *mode = KN_GS_LINEAR;
    else if (!strcmp(m, "cubic") || !strcmp(m, "bicubic")) *mode = KN_GS_CUBIC;
    else return kn_node_error(n, KN_ERR_INVALID, "unknown mode '%s'", m);
    if (!strcmp(p, "zeros")) *pad = KN_GS_ZEROS;
    else if (!strcmp(p, "border")) *pad = KN_GS_BORDER;
    else if (!strcmp(p, "reflection")) *pad = KN_GS_REFLECTION;
    else return kn_node_error(n, KN_ERR_INVALID, "unknown padding_mode '%s'", p);
    return KN_OK;
}

static int infer_gridsample(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_gs_mode mode;
    kn_gs_pad pad;
    int st = gs_params(n, &mode, &pad);
    if (st) return st;
    kn_value *x = n->inputs[0], *g = n->inputs[1];
    kn_shape s = kn_shape_unknown();
    if (x->shape.rank >= 0 && g->shape.rank >= 0) {
        if (x->shape.rank != g->shape.rank || x->shape.rank < 3)
            return kn_node_error(n, KN_ERR_INVALID, "X rank %d and grid rank %d must be equal and >= 3",
                                 x->shape.rank, g->shape.rank);
        s = x->shape;
        for (int i = 2; i < s.rank; i++) {
            s.dims[i] = g->shape.dims[i - 1];
            s.sym[i] = g->shape.sym[i - 1];
        }
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

static int eval_gridsample(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)ctx;
    kn_gs_mode mode;
    kn_gs_pad pad;
    int st = gs_params(n, &mode, &pad);
    if (st) return st;
    const kn_tensor *x = in[0], *g = in[1];
    if (x->rank < 3 || g->rank != x->rank || g->dims[x->rank - 1] != x->rank - 2 || g->dims[0] != x->dims[0])
        return kn_node_error(n, KN_ERR_INVALID, "grid must have shape (N, ..., %d) for X of rank %d", x->rank - 2, x->rank);
    int64_t dims[KN_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 2; i < x->rank; i++) dims[i] = g->dims[i - 1];
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_grid_sample(x, g, mode, pad, kn_attr_int(n, "align_corners", 0) != 0, &out[0]));
}

/* ---- NonMaxSuppression ------------------------------------------------------------------------- */

static int infer_nms(kn_node *n)
{
    int64_t dims[2] = {-1, 3};
    kn_infer_set(n, 0, KN_I64, 2, dims);
    return KN_OK;
}

static int eval_nms(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)ctx;
    const kn_tensor *mo = kn_node_input(n, 2) ? in[2] : NULL;
    const kn_tensor *iou = kn_node_input(n, 3) ? in[3] : NULL;
    const kn_tensor *sth = kn_node_input(n, 4) ? in[4] : NULL;
    int64_t max_out = mo && kn_tensor_numel(mo) > 0 ? kn_load_i64(mo->dtype, mo->data, 0) : 0;
    double iou_thr = iou && kn_tensor_numel(iou) > 0 ? kn_load_f64(iou->dtype, iou->data, 0) : 0.0;
    bool has_sth = sth && kn_tensor_numel(sth) > 0;
    double s_thr = has_sth ? kn_load_f64(sth->dtype, sth->data, 0) : 0.0;
    return node_fail(n, kn_k_nms(in[0], in[1], max_out, iou_thr, has_sth, s_thr,
                                 kn_attr_int(n, "center_point_box", 0) != 0, &out[0]));
}

/* ---- RNN / GRU / LSTM ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    kn_rnn_act act;
    int n_params; /* alpha, then beta, consumed from the attribute lists */
    double alpha, beta;
} k_acts[] = {
    {"Tanh", KN_ACT_TANH, 0, 0, 0},           {"Sigmoid", KN_ACT_SIGMOID, 0, 0, 0},
    {"Relu", KN_ACT_RELU, 0, 0, 0},           {"Affine", KN_ACT_AFFINE, 2, 1, 0},
    {"LeakyRelu", KN_ACT_LEAKYRELU, 1, 0.01, 0}, {"ThresholdedRelu", KN_ACT_THRESHOLDEDRELU, 1, 1, 0},
    {"ScaledTanh", KN_ACT_SCALEDTANH, 2, 1, 1}, {"HardSigmoid", KN_ACT_HARDSIGMOID, 2, 0.2, 0.5},
    {"Elu", KN_ACT_ELU, 1, 1, 0},             {"Softsign", KN_ACT_SOFTSIGN, 0, 0, 0},
    {"Softplus", KN_ACT_SOFTPLUS, 0, 0, 0},
};

/* Reads the attributes of an RNN/GRU/LSTM node into p. */
static int rnn_params(const kn_node *n, kn_rnn_params *p)
{
    memset(p, 0, sizeof *p);
    p->kind = n->op == KN_OP_RNN ? KN_RNN_SIMPLE : n->op == KN_OP_GRU ? KN_RNN_GRU : KN_RNN_LSTM;
    p->hidden = kn_attr_int(n, "hidden_size", -1);
    /* Without the attribute, R (num_directions, G*hidden, hidden) still says it. */
    kn_value *rv = kn_node_input(n, 2);
    if (!kn_node_attr(n, "hidden_size") && rv && rv->shape.rank == 3) p->hidden = rv->shape.dims[2];
    const char *dir = kn_attr_string(n, "direction", "forward");
    if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) p->num_dir = 1;
    else if (!strcmp(dir, "bidirectional")) p->num_dir = 2;
    else return kn_node_error(n, KN_ERR_INVALID, "unknown direction '%s'", dir);
    p->reverse = !strcmp(dir, "reverse");
    p->layout = (int)kn_attr_int(n, "layout", 0);
    p->linear_before_reset = kn_attr_int(n, "linear_before_reset", 0) != 0;
    p->input_forget = kn_attr_int(n, "input_forget", 0) != 0;
    p->clip = kn_attr_float(n, "clip", 0);
    int per = p->kind == KN_RNN_SIMPLE ? 1 : p->kind == KN_RNN_GRU ? 2 : 3;
    static const kn_rnn_act defaults[3] = {KN_ACT_SIGMOID, KN_ACT_TANH, KN_ACT_TANH};
    const kn_attr *acts = kn_node_attr(n, "activations");
    int nacts = acts && acts->kind == KN_ATTR_STRINGS ? acts->n : 0;
    if (nacts && nacts != per * p->num_dir)
        return kn_node_error(n, KN_ERR_INVALID, "%d activations given, expected %d", nacts, per * p->num_dir);
    const float *al, *be;
    int nal = kn_attr_floats(n, "activation_alpha", &al), nbe = kn_attr_floats(n, "activation_beta", &be);
    int ia = 0, ib = 0;
    for (int d = 0; d < p->num_dir; d++)
        for (int k = 0; k < per; k++) {
            p->act[d][k] = p->kind == KN_RNN_SIMPLE ? KN_ACT_TANH : defaults[k];
            if (!nacts) continue;
            const char *name = acts->strings[d * per + k];
            size_t e = 0;
            while (e < sizeof k_acts / sizeof k_acts[0] && strcasecmp(k_acts[e].name, name)) e++;
            if (e == sizeof k_acts / sizeof k_acts[0])
                return kn_node_error(n, KN_ERR_UNSUPPORTED, "activation '%s' is not supported", name);
            p->act[d][k] = k_acts[e].act;
            p->alpha[d][k] = k_acts[e].alpha;
            p->beta[d][k] = k_acts[e].beta;
            if (k_acts[e].n_params >= 1 && ia < nal) p->alpha[d][k] = al[ia++];
            if (k_acts[e].n_params >= 2 && ib < nbe) p->beta[d][k] = be[ib++];
        }
    return KN_OK;
}

static int infer_rnn(kn_node *n)
{
    if (need_inputs(n, 3)) return KN_ERR_INVALID;
    kn_rnn_params p;
    int st = rnn_params(n, &p);
    if (st) return st;
    kn_value *x = n->inputs[0];
    kn_shape y = kn_shape_unknown(), h = kn_shape_unknown();
    if (x->shape.rank == 3) {
        int64_t T = x->shape.dims[p.layout ? 1 : 0], B = x->shape.dims[p.layout ? 0 : 1];
        y.rank = 4;
        h.rank = 3;
        int64_t yd[4] = {T, p.num_dir, B, p.hidden}, ydb[4] = {B, T, p.num_dir, p.hidden};
        int64_t hd[3] = {p.num_dir, B, p.hidden}, hdb[3] = {B, p.num_dir, p.hidden};
        memcpy(y.dims, p.layout ? ydb : yd, sizeof yd);
        memcpy(h.dims, p.layout ? hdb : hd, sizeof hd);
    }
    kn_infer_set_shape(n, 0, x->dtype, &y);
    kn_infer_set_shape(n, 1, x->dtype, &h);
    kn_infer_set_shape(n, 2, x->dtype, &h);
    return KN_OK;
}

static int eval_rnn(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 3)) return KN_ERR_INVALID;
    (void)ctx;
    kn_rnn_params p;
    int st = rnn_params(n, &p);
    if (st) return st;
    const kn_tensor *x = in[0];
    if (x->rank != 3) return kn_node_error(n, KN_ERR_INVALID, "X rank %d, expected 3", x->rank);
    if (!kn_node_attr(n, "hidden_size") && in[2]->rank == 3) p.hidden = in[2]->dims[2];
    if (p.hidden <= 0) return kn_node_error(n, KN_ERR_INVALID, "hidden_size must be positive");
    int64_t T = x->dims[p.layout ? 1 : 0], B = x->dims[p.layout ? 0 : 1];
    int64_t yd[4] = {T, p.num_dir, B, p.hidden}, ydb[4] = {B, T, p.num_dir, p.hidden};
    int64_t hd[3] = {p.num_dir, B, p.hidden}, hdb[3] = {B, p.num_dir, p.hidden};
    kn_tensor *outs[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n->n_outputs && i < 3; i++) {
        if (!n->outputs[i]) continue;
        st = i == 0 ? kn_tensor_alloc(&out[0], x->dtype, 4, p.layout ? ydb : yd)
                    : kn_tensor_alloc(&out[i], x->dtype, 3, p.layout ? hdb : hd);
        if (st) return node_fail(n, st);
        outs[i] = &out[i];
    }
    const kn_tensor *opt[8] = {0};
    for (int i = 3; i < n->n_inputs && i < 8; i++) opt[i] = kn_node_input(n, i) ? in[i] : NULL;
    bool lstm = p.kind == KN_RNN_LSTM;
    return node_fail(n, kn_k_rnn(&p, x, in[1], in[2], opt[3], opt[4], opt[5], lstm ? opt[6] : NULL,
                                 lstm ? opt[7] : NULL, outs[0], outs[1], lstm ? outs[2] : NULL));
}

/* ---- DFT / STFT / MelWeightMatrix ---------------------------------------------------------- */

/* Integer scalar of an optional input; `def` when absent, -2 when present but
 * not known (inference), -1 with an error when malformed. */
static int64_t opt_scalar(const kn_node *n, const kn_tensor *t, bool present, int64_t def, const char *what)
{
    if (!present) return def;
    if (!t) return -2;
    if (kn_tensor_numel(t) != 1) {
        kn_node_error(n, KN_ERR_INVALID, "%s must be a scalar", what);
        return -1;
    }
    return kn_load_i64(t->dtype, t->data, 0); /* floats truncate, saturating */
}

/* DFT's axis: an input from opset 20 (default -2), an attribute before (default 1). */
static int dft_axis(const kn_node *n, const kn_tensor *axis_t, bool present, int rank, int *out)
{
    int64_t a = kn_node_opset(n) >= 20 ? -2 : kn_attr_int(n, "axis", 1);
    if (present) {
        if (!axis_t) return 1; /* unknown */
        if (kn_tensor_numel(axis_t) != 1) return kn_node_error(n, KN_ERR_INVALID, "axis must be a scalar");
        a = kn_load_i64(axis_t->dtype, axis_t->data, 0);
    }
    int na = kn_norm_axis(a, rank);
    if (na < 0 || na == rank - 1)
        return kn_node_error(n, KN_ERR_INVALID, "axis %lld is invalid for rank %d (the last axis holds re/im)", (long long)a, rank);
    *out = na;
    return KN_OK;
}

static int infer_dft(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *lv = kn_node_input(n, 1), *av = kn_node_input(n, 2);
    kn_shape s = x->shape;
    if (s.rank >= 2) {
        int axis;
        int st = dft_axis(n, av ? av->const_data : NULL, av != NULL, s.rank, &axis);
        if (st == 1) {
            for (int i = 0; i < s.rank - 1; i++) s.dims[i] = -1;
        } else if (st) {
            return st;
        } else {
            int64_t L = opt_scalar(n, lv ? lv->const_data : NULL, lv != NULL, s.dims[axis], "dft_length");
            if (L == -1 && lv && lv->const_data) return KN_ERR_INVALID;
            bool one = kn_attr_int(n, "onesided", 0) != 0;
            s.dims[axis] = L < 0 ? -1 : one ? L / 2 + 1 : L;
            s.sym[axis] = NULL;
        }
        s.dims[s.rank - 1] = 2;
        s.sym[s.rank - 1] = NULL;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

static int eval_dft(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)ctx;
    const kn_tensor *x = in[0];
    if (x->rank < 2) return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected >= 2", x->rank);
    bool has_axis = kn_node_input(n, 2) != NULL, has_len = kn_node_input(n, 1) != NULL;
    int axis;
    int st = dft_axis(n, has_axis ? in[2] : NULL, has_axis, x->rank, &axis);
    if (st) return st;
    int64_t L = opt_scalar(n, has_len ? in[1] : NULL, has_len, x->dims[axis], "dft_length");
    if (L <= 0) return kn_node_error(n, KN_ERR_INVALID, "dft_length %lld must be positive", (long long)L);
    /* The reference DFT is O(L^2) and its angle index j*k must fit in int64. */
    if (L > (1 << 24)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dft_length %lld is too large for the reference DFT", (long long)L);
    bool one = kn_attr_int(n, "onesided", 0) != 0;
    int64_t dims[KN_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = one ? L / 2 + 1 : L;
    dims[x->rank - 1] = 2;
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_dft(x, axis, L, kn_attr_int(n, "inverse", 0) != 0, one, &out[0]));
}

/* STFT's frame length: input 3, else the window's length, else the signal's. */
static int64_t stft_frame_length(const kn_node *n, const kn_tensor *fl, bool has_fl, const kn_shape *wshape,
                                 int64_t sig_len)
{
    if (has_fl) return opt_scalar(n, fl, true, 0, "frame_length");
    if (wshape) return wshape->rank == 1 ? wshape->dims[0] : -1;
    return sig_len;
}

static int infer_stft(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *sv = n->inputs[1], *wv = kn_node_input(n, 2), *fv = kn_node_input(n, 3);
    kn_shape s = kn_shape_unknown();
    if (x->shape.rank == 3) {
        int64_t len = x->shape.dims[1];
        int64_t fl = stft_frame_length(n, fv ? fv->const_data : NULL, fv != NULL, wv ? &wv->shape : NULL, len);
        int64_t step = opt_scalar(n, sv->const_data, true, 0, "frame_step");
        bool one = kn_attr_int(n, "onesided", 1) != 0;
        s.rank = 4;
        s.dims[0] = x->shape.dims[0];
        s.sym[0] = x->shape.sym[0];
        s.dims[1] = fl > 0 && step > 0 && len >= fl ? 1 + (len - fl) / step : -1;
        s.dims[2] = fl > 0 ? (one ? fl / 2 + 1 : fl) : -1;
        s.dims[3] = 2;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

static int eval_stft(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)ctx;
    const kn_tensor *x = in[0];
    const kn_tensor *w = kn_node_input(n, 2) ? in[2] : NULL;
    if (x->rank != 3) return kn_node_error(n, KN_ERR_INVALID, "signal rank %d, expected 3", x->rank);
    kn_shape ws = {0};
    if (w) {
        ws.rank = w->rank;
        memcpy(ws.dims, w->dims, sizeof ws.dims);
    }
    bool has_fl = kn_node_input(n, 3) != NULL;
    int64_t fl = stft_frame_length(n, has_fl ? in[3] : NULL, has_fl, w ? &ws : NULL, x->dims[1]);
    int64_t step = opt_scalar(n, in[1], true, 0, "frame_step");
    if (fl <= 0 || step <= 0 || fl > x->dims[1])
        return kn_node_error(n, KN_ERR_INVALID, "frame_length %lld / frame_step %lld invalid for signal length %lld",
                             (long long)fl, (long long)step, (long long)x->dims[1]);
    bool one = kn_attr_int(n, "onesided", 1) != 0;
    int64_t dims[4] = {x->dims[0], 1 + (x->dims[1] - fl) / step, one ? fl / 2 + 1 : fl, 2};
    int st = kn_tensor_alloc(&out[0], x->dtype, 4, dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_stft(x, step, fl, w, one, &out[0]));
}

static int infer_mel(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_dtype dt = (kn_dtype)kn_attr_int(n, "output_datatype", KN_F32);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output_datatype %d", (int)dt);
    int64_t nb = opt_scalar(n, n->inputs[0]->const_data, true, 0, "num_mel_bins");
    int64_t dl = opt_scalar(n, n->inputs[1]->const_data, true, 0, "dft_length");
    int64_t dims[2] = {dl >= 0 ? dl / 2 + 1 : -1, nb >= 0 ? nb : -1};
    kn_infer_set(n, 0, dt, 2, dims);
    return KN_OK;
}

static int eval_mel(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 5)) return KN_ERR_INVALID;
    (void)ctx;
    for (int i = 0; i < 5; i++)
        if (kn_tensor_numel(in[i]) != 1) return kn_node_error(n, KN_ERR_INVALID, "input %d must be a scalar", i);
    int64_t nb = kn_load_i64(in[0]->dtype, in[0]->data, 0), dl = kn_load_i64(in[1]->dtype, in[1]->data, 0);
    if (nb <= 0 || dl <= 0 || nb > (1 << 20) || dl > ((int64_t)1 << 30))
        return kn_node_error(n, KN_ERR_INVALID, "num_mel_bins %lld / dft_length %lld out of range", (long long)nb, (long long)dl);
    int64_t dims[2] = {dl / 2 + 1, nb};
    int st = kn_tensor_alloc(&out[0], (kn_dtype)kn_attr_int(n, "output_datatype", KN_F32), 2, dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_mel_weight_matrix(nb, dl, kn_load_f64(in[2]->dtype, in[2]->data, 0),
                                               kn_load_f64(in[3]->dtype, in[3]->data, 0),
                                               kn_load_f64(in[4]->dtype, in[4]->data, 0), &out[0]));
}

/* Defined in ir/ops/misc2.c. */
int kn_misc2_infer_affine_grid(kn_node *n);
int kn_misc2_eval_affine_grid(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_misc2_infer_deform_conv(kn_node *n);
int kn_misc2_eval_deform_conv(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_misc2_infer_tfidf(kn_node *n);
int kn_misc2_eval_tfidf(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);

const kn_op_impl kn_ops_misc[] = {
    {KN_OP_NegativeLogLikelihoodLoss, infer_loss, eval_nll},
    {KN_OP_SoftmaxCrossEntropyLoss, infer_loss, eval_sce},
    {KN_OP_HannWindow, infer_window, eval_window},
    {KN_OP_HammingWindow, infer_window, eval_window},
    {KN_OP_BlackmanWindow, infer_window, eval_window},
    {KN_OP_CenterCropPad, infer_ccp, eval_ccp},
    {KN_OP_ReverseSequence, infer_same0, eval_revseq},
    {KN_OP_GridSample, infer_gridsample, eval_gridsample},
    {KN_OP_NonMaxSuppression, infer_nms, eval_nms},
    {KN_OP_RNN, infer_rnn, eval_rnn},
    {KN_OP_GRU, infer_rnn, eval_rnn},
    {KN_OP_LSTM, infer_rnn, eval_rnn},
    {KN_OP_DFT, infer_dft, eval_dft},
    {KN_OP_STFT, infer_stft, eval_stft},
    {KN_OP_MelWeightMatrix, infer_mel, eval_mel},
    {KN_OP_AffineGrid, kn_misc2_infer_affine_grid, kn_misc2_eval_affine_grid},
    {KN_OP_DeformConv, kn_misc2_infer_deform_conv, kn_misc2_eval_deform_conv},
    {KN_OP_TfIdfVectorizer, kn_misc2_infer_tfidf, kn_misc2_eval_tfidf},
    {KN_OP_UNKNOWN, NULL, NULL},
};
