/*
 * Op definitions of the 'misc' family (see ir/ops.h): losses
 * (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), window generators
 * (Hann, Hamming, Blackman), and the other rare ops, each calling the plain
 * C kernels of runtime/kernels/misc.c.
 */
#include <string.h>

#include "../eval.h"
#include "k_misc.h"

static int node_fail(const kn_node *n, int st)
{
    if (st) kn_error_prefix("node '%s' (%s): ", n->name, n->op_type);
    return st;
}

static int infer_same0(kn_node *n) { return kn_infer_same_as_input(n, 0); }

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
    (void)ctx;
    return run_nll(n, in[0], in[1], kn_node_input(n, 2) ? in[2] : NULL, &out[0]);
}

static int eval_sce(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
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
    {KN_OP_UNKNOWN, NULL, NULL},
};
