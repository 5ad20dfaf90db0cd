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

const kn_op_impl kn_ops_misc[] = {
    {KN_OP_NegativeLogLikelihoodLoss, infer_loss, eval_nll},
    {KN_OP_SoftmaxCrossEntropyLoss, infer_loss, eval_sce},
    {KN_OP_HannWindow, infer_window, eval_window},
    {KN_OP_HammingWindow, infer_window, eval_window},
    {KN_OP_BlackmanWindow, infer_window, eval_window},
    {KN_OP_UNKNOWN, NULL, NULL},
};
