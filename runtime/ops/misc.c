/*
 * Execution of the 'misc' ops (see opdesc.h): losses
 * (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), window generators
 * (Hann, Hamming, Blackman), CenterCropPad, ReverseSequence, GridSample,
 * NonMaxSuppression, RNN/GRU/LSTM, DFT, STFT, MelWeightMatrix here;
 * AffineGrid, DeformConv and TfIdfVectorizer in misc2.c, whose functions
 * this file's table lists. Kernels are in runtime/kernels; the attribute
 * and shape rules (misc_int.h) are shared with the family's type inference
 * in the IR.
 */
#include <string.h>
#include <strings.h>

#include "misc_int.h"
#include "rnn.h"

/* Fails naming the node if one of its first k inputs is missing (an empty
 * name in the model), so no function below dereferences a NULL input. */
static int need_inputs(const kn_opdesc *d, const kn_tensor *const *in, int k)
{
    for (int i = 0; i < k; i++)
        if (i >= d->n_inputs || !in[i]) return kn_op_error(d, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

/* ---- losses --------------------------------------------------------------------------- */

int kn_misc_loss_reduction(const kn_opdesc *d, kn_loss_reduction *out)
{
    const char *r = kn_op_attr_string(d, "reduction", "mean");
    if (!strcmp(r, "none")) *out = KN_LOSS_NONE;
    else if (!strcmp(r, "sum")) *out = KN_LOSS_SUM;
    else if (!strcmp(r, "mean")) *out = KN_LOSS_MEAN;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown reduction '%s'", r);
    return KN_OK;
}

/* NLL of log-probabilities lp (the input itself, or SCE's log-softmax). */
static int run_nll(const kn_opdesc *d, const kn_tensor *lp, const kn_tensor *target, const kn_tensor *weight,
                   kn_tensor *out)
{
    kn_loss_reduction red;
    int st = kn_misc_loss_reduction(d, &red);
    if (st) return st;
    if (!kn_dtype_info(target->dtype)->is_integer)
        return kn_op_error(d, KN_ERR_INVALID, "target must be integer, got %s", kn_dtype_name(target->dtype));
    const kn_attr *ii = kn_op_attr(d, "ignore_index");
    if (red == KN_LOSS_NONE) st = kn_tensor_alloc(out, lp->dtype, target->rank, target->dims);
    else st = kn_tensor_alloc(out, lp->dtype, 0, NULL);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_nll_loss(lp, target, weight, ii != NULL, ii ? ii->i : 0, red, out));
}

static int exec_nll(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 2)) return KN_ERR_INVALID;
    return run_nll(d, in[0], in[1], kn_op_input(d, in, 2), &out[0]);
}

static int exec_sce(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 2)) return KN_ERR_INVALID;
    kn_tensor lp = {0};
    int st = kn_tensor_alloc(&lp, in[0]->dtype, in[0]->rank, in[0]->dims);
    if (!st) st = kn_k_log_softmax_axis1(in[0], &lp);
    if (st) {
        kn_tensor_free(&lp);
        return kn_op_fail(d, st);
    }
    st = run_nll(d, &lp, in[1], kn_op_input(d, in, 2), &out[0]);
    if (!st && kn_op_has_output(d, 1)) out[1] = lp;
    else kn_tensor_free(&lp);
    return st;
}

/* ---- windows -------------------------------------------------------------------------- */

static kn_window_kind window_kind(kn_op op)
{
    return op == KN_OP_HannWindow ? KN_WINDOW_HANN : op == KN_OP_HammingWindow ? KN_WINDOW_HAMMING
                                                                              : KN_WINDOW_BLACKMAN;
}

static int exec_window(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 1)) return KN_ERR_INVALID;
    if (kn_tensor_numel(in[0]) != 1) return kn_op_error(d, KN_ERR_INVALID, "size must be a scalar");
    int64_t len = kn_load_i64(in[0]->dtype, in[0]->data, 0);
    if (len < 0) return kn_op_error(d, KN_ERR_INVALID, "size %lld is negative", (long long)len);
    int st = kn_tensor_alloc(&out[0], (kn_dtype)kn_op_attr_int(d, "output_datatype", KN_F32), 1, &len);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_window(window_kind(d->op), kn_op_attr_int(d, "periodic", 1) != 0, &out[0]));
}


/* ---- CenterCropPad / ReverseSequence ---------------------------------------------------- */

/* Output dims of CenterCropPad: x's dims with the listed axes set from the
 * shape input. Fails naming the node on a bad axis or negative size. */
int kn_misc_ccp_dims(const kn_opdesc *d, int rank, const int64_t *xdims, const kn_tensor *shape, int64_t *dims)
{
    const int64_t *axes;
    int na = kn_op_attr_ints(d, "axes", &axes);
    int64_t cnt = kn_tensor_numel(shape);
    if (!kn_dtype_info(shape->dtype)->is_integer || shape->rank != 1)
        return kn_op_error(d, KN_ERR_INVALID, "shape must be a 1-D integer tensor");
    if (cnt != (na ? na : rank))
        return kn_op_error(d, KN_ERR_INVALID, "shape has %lld entries for %d axes", (long long)cnt, na ? na : rank);
    memcpy(dims, xdims, sizeof *dims * (size_t)rank);
    for (int i = 0; i < cnt; i++) {
        int a = na ? kn_norm_axis(axes[i], rank) : i;
        if (a < 0) return kn_op_error(d, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
        dims[a] = kn_load_i64(shape->dtype, shape->data, (size_t)i);
        if (dims[a] < 0) return kn_op_error(d, KN_ERR_INVALID, "target size %lld is negative", (long long)dims[a]);
    }
    return KN_OK;
}

static int exec_ccp(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 2)) return KN_ERR_INVALID;
    int64_t dims[KN_MAX_RANK];
    int st = kn_misc_ccp_dims(d, in[0]->rank, in[0]->dims, in[1], dims);
    if (st) return st;
    st = kn_tensor_alloc(&out[0], in[0]->dtype, in[0]->rank, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_center_crop_pad(in[0], &out[0]));
}

static int exec_revseq(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 2)) return KN_ERR_INVALID;
    int rank = in[0]->rank;
    int64_t ba = kn_op_attr_int(d, "batch_axis", 1), ta = kn_op_attr_int(d, "time_axis", 0);
    int b = kn_norm_axis(ba, rank), t = kn_norm_axis(ta, rank);
    if (b < 0 || t < 0 || b == t)
        return kn_op_error(d, KN_ERR_INVALID, "batch_axis %lld / time_axis %lld invalid for rank %d",
                             (long long)ba, (long long)ta, rank);
    int st = kn_tensor_alloc(&out[0], in[0]->dtype, rank, in[0]->dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_reverse_sequence(in[0], in[1], b, t, &out[0]));
}

/* ---- GridSample ------------------------------------------------------------------------------ */

int kn_misc_gs_params(const kn_opdesc *d, kn_gs_mode *mode, kn_gs_pad *pad)
{
    const char *m = kn_op_attr_string(d, "mode", d->opset >= 20 ? "linear" : "bilinear");
    const char *p = kn_op_attr_string(d, "padding_mode", "zeros");
    if (!strcmp(m, "nearest")) *mode = KN_GS_NEAREST;
    else if (!strcmp(m, "linear") || !strcmp(m, "bilinear")) *mode = KN_GS_LINEAR;
    else if (!strcmp(m, "cubic") || !strcmp(m, "bicubic")) *mode = KN_GS_CUBIC;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown mode '%s'", m);
    if (!strcmp(p, "zeros")) *pad = KN_GS_ZEROS;
    else if (!strcmp(p, "border")) *pad = KN_GS_BORDER;
    else if (!strcmp(p, "reflection")) *pad = KN_GS_REFLECTION;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown padding_mode '%s'", p);
    return KN_OK;
}

static int exec_gridsample(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 2)) return KN_ERR_INVALID;
    kn_gs_mode mode;
    kn_gs_pad pad;
    int st = kn_misc_gs_params(d, &mode, &pad);
    if (st) return st;
    const kn_tensor *x = in[0], *g = in[1];
    if (x->rank < 3 || g->rank != x->rank || g->dims[x->rank - 1] != x->rank - 2 || g->dims[0] != x->dims[0])
        return kn_op_error(d, KN_ERR_INVALID, "grid must have shape (N, ..., %d) for X of rank %d", x->rank - 2, x->rank);
    int64_t dims[KN_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 2; i < x->rank; i++) dims[i] = g->dims[i - 1];
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_grid_sample(x, g, mode, pad, kn_op_attr_int(d, "align_corners", 0) != 0, &out[0]));
}

/* ---- NonMaxSuppression ------------------------------------------------------------------------- */

static int exec_nms(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 2)) return KN_ERR_INVALID;
    const kn_tensor *mo = kn_op_input(d, in, 2);
    const kn_tensor *iou = kn_op_input(d, in, 3);
    const kn_tensor *sth = kn_op_input(d, in, 4);
    int64_t max_out = mo && kn_tensor_numel(mo) > 0 ? kn_load_i64(mo->dtype, mo->data, 0) : 0;
    double iou_thr = iou && kn_tensor_numel(iou) > 0 ? kn_load_f64(iou->dtype, iou->data, 0) : 0.0;
    bool has_sth = sth && kn_tensor_numel(sth) > 0;
    double s_thr = has_sth ? kn_load_f64(sth->dtype, sth->data, 0) : 0.0;
    return kn_op_fail(d, kn_k_nms(in[0], in[1], max_out, iou_thr, has_sth, s_thr,
                                 kn_op_attr_int(d, "center_point_box", 0) != 0, &out[0]));
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
int kn_misc_rnn_params(const kn_opdesc *d, int64_t r_hidden, kn_rnn_params *p)
{
    memset(p, 0, sizeof *p);
    p->kind = d->op == KN_OP_RNN ? KN_RNN_SIMPLE : d->op == KN_OP_GRU ? KN_RNN_GRU : KN_RNN_LSTM;
    p->hidden = kn_op_attr_int(d, "hidden_size", -1);
    /* Without the attribute, R (num_directions, G*hidden, hidden) still says it. */
    if (!kn_op_attr(d, "hidden_size") && r_hidden >= 0) p->hidden = r_hidden;
    const char *dir = kn_op_attr_string(d, "direction", "forward");
    if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) p->num_dir = 1;
    else if (!strcmp(dir, "bidirectional")) p->num_dir = 2;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown direction '%s'", dir);
    p->reverse = !strcmp(dir, "reverse");
    p->layout = (int)kn_op_attr_int(d, "layout", 0);
    p->linear_before_reset = kn_op_attr_int(d, "linear_before_reset", 0) != 0;
    p->input_forget = kn_op_attr_int(d, "input_forget", 0) != 0;
    p->clip = kn_op_attr_float(d, "clip", 0);
    int per = p->kind == KN_RNN_SIMPLE ? 1 : p->kind == KN_RNN_GRU ? 2 : 3;
    static const kn_rnn_act defaults[3] = {KN_ACT_SIGMOID, KN_ACT_TANH, KN_ACT_TANH};
    const kn_attr *acts = kn_op_attr(d, "activations");
    int nacts = acts && acts->kind == KN_ATTR_STRINGS ? acts->n : 0;
    if (nacts && nacts != per * p->num_dir)
        return kn_op_error(d, KN_ERR_INVALID, "%d activations given, expected %d", nacts, per * p->num_dir);
    const float *al, *be;
    int nal = kn_op_attr_floats(d, "activation_alpha", &al), nbe = kn_op_attr_floats(d, "activation_beta", &be);
    int ia = 0, ib = 0;
    for (int dv = 0; dv < p->num_dir; dv++)
        for (int k = 0; k < per; k++) {
            p->act[dv][k] = p->kind == KN_RNN_SIMPLE ? KN_ACT_TANH : defaults[k];
            if (!nacts) continue;
            const char *name = acts->strings[dv * per + k];
            size_t e = 0;
            while (e < sizeof k_acts / sizeof k_acts[0] && strcasecmp(k_acts[e].name, name)) e++;
            if (e == sizeof k_acts / sizeof k_acts[0])
                return kn_op_error(d, KN_ERR_UNSUPPORTED, "activation '%s' is not supported", name);
            p->act[dv][k] = k_acts[e].act;
            p->alpha[dv][k] = k_acts[e].alpha;
            p->beta[dv][k] = k_acts[e].beta;
            if (k_acts[e].n_params >= 1 && ia < nal) p->alpha[dv][k] = al[ia++];
            if (k_acts[e].n_params >= 2 && ib < nbe) p->beta[dv][k] = be[ib++];
        }
    return KN_OK;
}

static int exec_rnn(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 3)) return KN_ERR_INVALID;
    kn_rnn_params p;
    int st = kn_misc_rnn_params(d, in[2]->rank == 3 ? in[2]->dims[2] : -1, &p);
    if (st) return st;
    const kn_tensor *x = in[0];
    if (x->rank != 3) return kn_op_error(d, KN_ERR_INVALID, "X rank %d, expected 3", x->rank);
    if (!kn_op_attr(d, "hidden_size") && in[2]->rank == 3) p.hidden = in[2]->dims[2];
    if (p.hidden <= 0) return kn_op_error(d, KN_ERR_INVALID, "hidden_size must be positive");
    int64_t T = x->dims[p.layout ? 1 : 0], B = x->dims[p.layout ? 0 : 1];
    int64_t yd[4] = {T, p.num_dir, B, p.hidden}, ydb[4] = {B, T, p.num_dir, p.hidden};
    int64_t hd[3] = {p.num_dir, B, p.hidden}, hdb[3] = {B, p.num_dir, p.hidden};
    kn_tensor *outs[3] = {NULL, NULL, NULL};
    for (int i = 0; i < d->n_outputs && i < 3; i++) {
        if (!kn_op_has_output(d, i)) continue;
        st = i == 0 ? kn_tensor_alloc(&out[0], x->dtype, 4, p.layout ? ydb : yd)
                    : kn_tensor_alloc(&out[i], x->dtype, 3, p.layout ? hdb : hd);
        if (st) return kn_op_fail(d, st);
        outs[i] = &out[i];
    }
    const kn_tensor *opt[8] = {0};
    for (int i = 3; i < d->n_inputs && i < 8; i++) opt[i] = kn_op_input(d, in, i);
    bool lstm = p.kind == KN_RNN_LSTM;
    /* compiled artifacts: kiln's packed kernel (runtime/src/rnn.c), unless it
     * declines (dtypes, KILN_RNN=ref); the reference evaluator: the plain C
     * kernel, the oracle */
    if (d->sess) {
        st = kn_rnn_fast(d->sess, &p, x, in[1], in[2], opt[3], opt[4], opt[5], lstm ? opt[6] : NULL,
                         lstm ? opt[7] : NULL, outs[0], outs[1], lstm ? outs[2] : NULL);
        if (st != KN_ERR_UNSUPPORTED) return kn_op_fail(d, st);
        d->sess->impl = NULL;
    }
    return kn_op_fail(d, kn_k_rnn(&p, x, in[1], in[2], opt[3], opt[4], opt[5], lstm ? opt[6] : NULL,
                                 lstm ? opt[7] : NULL, outs[0], outs[1], lstm ? outs[2] : NULL));
}

/* ---- DFT / STFT / MelWeightMatrix ---------------------------------------------------------- */

/* Integer scalar of an optional input; `def` when absent, -2 when present but
 * not known (inference), -1 with an error when malformed. */
int64_t kn_misc_opt_scalar(const kn_opdesc *d, const kn_tensor *t, bool present, int64_t def, const char *what)
{
    if (!present) return def;
    if (!t) return -2;
    if (kn_tensor_numel(t) != 1) {
        kn_op_error(d, KN_ERR_INVALID, "%s must be a scalar", what);
        return -1;
    }
    return kn_load_i64(t->dtype, t->data, 0); /* floats truncate, saturating */
}

/* DFT's axis: an input from opset 20 (default -2), an attribute before (default 1). */
int kn_misc_dft_axis(const kn_opdesc *d, const kn_tensor *axis_t, bool present, int rank, int *out)
{
    int64_t a = d->opset >= 20 ? -2 : kn_op_attr_int(d, "axis", 1);
    if (present) {
        if (!axis_t) return 1; /* unknown */
        if (kn_tensor_numel(axis_t) != 1) return kn_op_error(d, KN_ERR_INVALID, "axis must be a scalar");
        a = kn_load_i64(axis_t->dtype, axis_t->data, 0);
    }
    int na = kn_norm_axis(a, rank);
    if (na < 0 || na == rank - 1)
        return kn_op_error(d, KN_ERR_INVALID, "axis %lld is invalid for rank %d (the last axis holds re/im)", (long long)a, rank);
    *out = na;
    return KN_OK;
}

static int exec_dft(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 1)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    if (x->rank < 2) return kn_op_error(d, KN_ERR_INVALID, "input rank %d, expected >= 2", x->rank);
    bool has_axis = kn_op_input(d, in, 2) != NULL, has_len = kn_op_input(d, in, 1) != NULL;
    int axis;
    int st = kn_misc_dft_axis(d, has_axis ? in[2] : NULL, has_axis, x->rank, &axis);
    if (st) return st;
    bool one = kn_op_attr_int(d, "onesided", 0) != 0, inv = kn_op_attr_int(d, "inverse", 0) != 0;
    /* an inverse one-sided DFT (irfft) defaults to the even length its bins imply */
    int64_t L = kn_misc_opt_scalar(d, has_len ? in[1] : NULL, has_len, inv && one ? 2 * (x->dims[axis] - 1) : x->dims[axis],
                                   "dft_length");
    if (L <= 0) return kn_op_error(d, KN_ERR_INVALID, "dft_length %lld must be positive", (long long)L);
    /* The reference DFT is O(L^2) and its angle index j*k must fit in int64. */
    if (L > (1 << 24)) return kn_op_error(d, KN_ERR_UNSUPPORTED, "dft_length %lld is too large for the reference DFT", (long long)L);
    int64_t dims[KN_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = one && !inv ? L / 2 + 1 : L;
    dims[x->rank - 1] = one && inv ? 1 : 2;
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_dft(x, axis, L, inv, one, &out[0]));
}

/* STFT's frame length: input 3, else the window's length, else the signal's. */
int64_t kn_misc_stft_frame_length(const kn_opdesc *d, const kn_tensor *fl, bool has_fl, bool has_w, int w_rank,
                                  int64_t w_len, int64_t sig_len)
{
    if (has_fl) return kn_misc_opt_scalar(d, fl, true, 0, "frame_length");
    if (has_w) return w_rank == 1 ? w_len : -1;
    return sig_len;
}

static int exec_stft(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 2)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    const kn_tensor *w = kn_op_input(d, in, 2);
    if (x->rank != 3) return kn_op_error(d, KN_ERR_INVALID, "signal rank %d, expected 3", x->rank);
    bool has_fl = kn_op_input(d, in, 3) != NULL;
    int64_t fl = kn_misc_stft_frame_length(d, has_fl ? in[3] : NULL, has_fl, w != NULL, w ? w->rank : -1,
                                           w && w->rank > 0 ? w->dims[0] : -1, x->dims[1]);
    int64_t step = kn_misc_opt_scalar(d, in[1], true, 0, "frame_step");
    if (fl <= 0 || step <= 0 || fl > x->dims[1])
        return kn_op_error(d, KN_ERR_INVALID, "frame_length %lld / frame_step %lld invalid for signal length %lld",
                             (long long)fl, (long long)step, (long long)x->dims[1]);
    bool one = kn_op_attr_int(d, "onesided", 1) != 0;
    int64_t dims[4] = {x->dims[0], 1 + (x->dims[1] - fl) / step, one ? fl / 2 + 1 : fl, 2};
    int st = kn_tensor_alloc(&out[0], x->dtype, 4, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_stft(x, step, fl, w, one, &out[0]));
}

static int exec_mel(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(d, in, 5)) return KN_ERR_INVALID;
    for (int i = 0; i < 5; i++)
        if (kn_tensor_numel(in[i]) != 1) return kn_op_error(d, KN_ERR_INVALID, "input %d must be a scalar", i);
    int64_t nb = kn_load_i64(in[0]->dtype, in[0]->data, 0), dl = kn_load_i64(in[1]->dtype, in[1]->data, 0);
    if (nb <= 0 || dl <= 0 || nb > (1 << 20) || dl > ((int64_t)1 << 30))
        return kn_op_error(d, KN_ERR_INVALID, "num_mel_bins %lld / dft_length %lld out of range", (long long)nb, (long long)dl);
    int64_t dims[2] = {dl / 2 + 1, nb};
    int st = kn_tensor_alloc(&out[0], (kn_dtype)kn_op_attr_int(d, "output_datatype", KN_F32), 2, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_mel_weight_matrix(nb, dl, kn_load_f64(in[2]->dtype, in[2]->data, 0),
                                               kn_load_f64(in[3]->dtype, in[3]->data, 0),
                                               kn_load_f64(in[4]->dtype, in[4]->data, 0), &out[0]));
}

const kn_exec_impl kn_exec_misc[] = {
    {KN_OP_NegativeLogLikelihoodLoss, exec_nll},
    {KN_OP_SoftmaxCrossEntropyLoss, exec_sce},
    {KN_OP_HannWindow, exec_window},
    {KN_OP_HammingWindow, exec_window},
    {KN_OP_BlackmanWindow, exec_window},
    {KN_OP_CenterCropPad, exec_ccp},
    {KN_OP_ReverseSequence, exec_revseq},
    {KN_OP_GridSample, exec_gridsample},
    {KN_OP_NonMaxSuppression, exec_nms},
    {KN_OP_RNN, exec_rnn},
    {KN_OP_GRU, exec_rnn},
    {KN_OP_LSTM, exec_rnn},
    {KN_OP_DFT, exec_dft},
    {KN_OP_STFT, exec_stft},
    {KN_OP_MelWeightMatrix, exec_mel},
    {KN_OP_AffineGrid, kn_misc_exec_affine_grid},
    {KN_OP_DeformConv, kn_misc_exec_deform_conv},
    {KN_OP_TfIdfVectorizer, kn_misc_exec_tfidf},
    {KN_OP_UNKNOWN, NULL},
};
