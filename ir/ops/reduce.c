/*
 * Type and shape inference of the 'reduce' family (see ir/ops.h): Reduce*,
 * ArgMax, ArgMin, CumSum, TopK, the ops that reduce, scan or rank along
 * axes.
 *
 * Execution lives in runtime/ops/reduce*.c (kn_exec_reduce). The attribute
 * and shape rules are the runtime's (reduce_int.h), called here with the
 * node's descriptor, so inference and execution cannot disagree on them.
 */
#include <string.h>

#include "../eval.h"
#include "reduce_int.h"

static void reduced_shape(const kn_shape *x, uint32_t mask, bool keepdims, kn_shape *out)
{
    int src[KN_MAX_RANK];
    memset(out, 0, sizeof *out);
    out->rank = kn_rd_reduced_dims(x->rank, x->dims, mask, keepdims, out->dims, src);
    for (int i = 0; i < out->rank; i++) out->sym[i] = src[i] >= 0 ? x->sym[src[i]] : NULL;
}

/* ---- Reduce* -------------------------------------------------------------- */

/* Axes only known at run time: every dim is either kept or 1. */
static void set_runtime_axes_shape(kn_node *n, const kn_value *x, bool keepdims)
{
    kn_shape s = kn_shape_unknown();
    if (keepdims) {
        s.rank = x->shape.rank;
        for (int i = 0; i < s.rank; i++) s.dims[i] = x->shape.dims[i] == 1 ? 1 : -1;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
}

static int infer_reduce(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_node_prepare(n, 1, KN_RD_MAX_OUTPUTS, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    kn_value *av = kn_node_input(n, 1);
    bool keepdims = kn_op_attr_int(&d, "keepdims", 1) != 0;
    if (x->shape.rank < 0) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 0, x->dtype, &u);
        return KN_OK;
    }
    int64_t axes[KN_RD_MAX_AXES];
    int cnt = kn_rd_reduce_axes(&d, av ? av->const_data : NULL, av != NULL, axes);
    if (cnt == -1) return KN_ERR_INVALID;
    if (cnt == -2) {
        set_runtime_axes_shape(n, x, keepdims);
        return KN_OK;
    }
    uint32_t mask;
    int st = kn_rd_axes_mask(&d, axes, cnt, x->shape.rank, &mask);
    if (st) return st;
    kn_shape s;
    reduced_shape(&x->shape, mask, keepdims, &s);
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

/* ---- ArgMax / ArgMin -------------------------------------------------------- */

static int infer_arg(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_node_prepare(n, 1, KN_RD_MAX_OUTPUTS, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    if (x->shape.rank < 0) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 0, KN_I64, &u);
        return KN_OK;
    }
    int a;
    int st = kn_op_axis(&d, kn_op_attr_int(&d, "axis", 0), x->shape.rank, &a);
    if (st) return st;
    kn_shape s;
    reduced_shape(&x->shape, 1u << a, kn_op_attr_int(&d, "keepdims", 1) != 0, &s);
    kn_infer_set_shape(n, 0, KN_I64, &s);
    return KN_OK;
}

/* ---- CumSum ------------------------------------------------------------------ */

static int infer_cumsum(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    return kn_node_prepare(n, 2, KN_RD_MAX_OUTPUTS, &d, has) ? KN_ERR_INVALID : kn_infer_same_as_input(n, 0);
}

/* ---- TopK -------------------------------------------------------------------- */

static int infer_topk(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_node_prepare(n, 1, KN_RD_MAX_OUTPUTS, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    kn_value *kv = kn_node_input(n, 1);
    kn_shape s = x->shape;
    if (s.rank >= 0) {
        int a;
        int st = kn_op_axis(&d, kn_op_attr_int(&d, "axis", -1), s.rank, &a);
        if (st) return st;
        int64_t k = kn_rd_topk_k(&d, kv ? kv->const_data : NULL, kv != NULL);
        if (k == -1 && (kv == NULL || kv->const_data))
            return kn_node_error(n, KN_ERR_INVALID, "k must be a non-negative integer");
        s.dims[a] = k >= 0 ? k : -1;
        s.sym[a] = NULL;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    kn_infer_set_shape(n, 1, KN_I64, &s);
    return KN_OK;
}

/* ---- the family table (execution: kn_exec_reduce) ----------------------------- */

const kn_op_impl kn_ops_reduce[] = {
    {KN_OP_ReduceSum, infer_reduce},
    {KN_OP_ReduceMean, infer_reduce},
    {KN_OP_ReduceMax, infer_reduce},
    {KN_OP_ReduceMin, infer_reduce},
    {KN_OP_ReduceProd, infer_reduce},
    {KN_OP_ReduceL1, infer_reduce},
    {KN_OP_ReduceL2, infer_reduce},
    {KN_OP_ReduceLogSum, infer_reduce},
    {KN_OP_ReduceLogSumExp, infer_reduce},
    {KN_OP_ReduceSumSquare, infer_reduce},
    {KN_OP_ArgMax, infer_arg},
    {KN_OP_ArgMin, infer_arg},
    {KN_OP_CumSum, infer_cumsum},
    {KN_OP_TopK, infer_topk},
    {KN_OP_UNKNOWN, NULL},
};
