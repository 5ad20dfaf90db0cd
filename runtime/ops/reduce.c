/*
 * Execution of the 'reduce' ops (see opdesc.h): Reduce*, ArgMax, ArgMin,
 * CumSum, TopK: the ops that reduce, scan or rank along axes. Kernels are in
 * runtime/kernels; the attribute and shape rules (reduce_int.h) are shared
 * with the family's type inference in the IR.
 */
#include <string.h>

#include "k_reduce.h"
#include "reduce_int.h"

/* True if optional input i is given. */
static bool has_input(const kn_opdesc *d, const kn_tensor *const *in, int i)
{
    return i < d->n_inputs && in[i];
}

/* ---- helpers shared with inference (reduce_int.h) ---------------------------- */

int kn_rd_read_ints(const kn_opdesc *d, const kn_tensor *t, const char *what, int64_t *out, int max)
{
    const kn_dtype_traits *ti = kn_dtype_info(t->dtype);
    int64_t cnt = kn_tensor_numel(t);
    if (!ti->is_integer || cnt < 0) {
        kn_op_error(d, KN_ERR_INVALID, "%s must be an integer tensor, got %s", what, kn_dtype_name(t->dtype));
        return -1;
    }
    if (cnt > max) {
        kn_op_error(d, KN_ERR_INVALID, "%s has %lld entries, at most %d allowed", what, (long long)cnt, max);
        return -1;
    }
    for (int64_t i = 0; i < cnt; i++) out[i] = kn_load_i64(t->dtype, t->data, (size_t)i);
    return (int)cnt;
}

int kn_rd_axes_mask(const kn_opdesc *d, const int64_t *axes, int count, int rank, uint32_t *out)
{
    *out = 0;
    if (count == 0) {
        if (!kn_op_attr_int(d, "noop_with_empty_axes", 0)) *out = rank ? (1u << rank) - 1 : 0;
        return KN_OK;
    }
    for (int i = 0; i < count; i++) {
        int a;
        int st = kn_op_axis(d, axes[i], rank, &a);
        if (st) return st;
        *out |= 1u << a;
    }
    return KN_OK;
}

int kn_rd_reduce_axes(const kn_opdesc *d, const kn_tensor *axes_in, bool have_input, int64_t *axes)
{
    if (have_input) {
        if (!axes_in) return -2;
        return kn_rd_read_ints(d, axes_in, "axes", axes, KN_RD_MAX_AXES);
    }
    const int64_t *a;
    int cnt = kn_op_attr_ints(d, "axes", &a);
    if (cnt > KN_RD_MAX_AXES) {
        kn_op_error(d, KN_ERR_INVALID, "%d axes given", cnt);
        return -1;
    }
    if (cnt) memcpy(axes, a, sizeof *a * (size_t)cnt);
    return cnt;
}

int kn_rd_reduced_dims(int rank, const int64_t *dims, uint32_t mask, bool keepdims, int64_t *out_dims,
                       int *out_src)
{
    int r = 0;
    for (int i = 0; i < rank; i++) {
        bool reduced = (mask & (1u << i)) != 0;
        if (reduced && !keepdims) continue;
        if (out_src) out_src[r] = reduced ? -1 : i;
        out_dims[r++] = reduced ? 1 : dims[i];
    }
    return r;
}

int64_t kn_rd_topk_k(const kn_opdesc *d, const kn_tensor *kt, bool have_input)
{
    if (!have_input) return kn_op_attr_int(d, "k", -1);
    if (!kt) return -2;
    int64_t k;
    if (kn_rd_read_ints(d, kt, "k", &k, 1) != 1) return -1;
    return k;
}

/* ---- Reduce* -------------------------------------------------------------- */

static kn_reduce_op reduce_kind(kn_op op)
{
    switch (op) {
    case KN_OP_ReduceMean: return KN_REDUCE_MEAN;
    case KN_OP_ReduceMax: return KN_REDUCE_MAX;
    case KN_OP_ReduceMin: return KN_REDUCE_MIN;
    case KN_OP_ReduceProd: return KN_REDUCE_PROD;
    case KN_OP_ReduceL1: return KN_REDUCE_L1;
    case KN_OP_ReduceL2: return KN_REDUCE_L2;
    case KN_OP_ReduceLogSum: return KN_REDUCE_LOGSUM;
    case KN_OP_ReduceLogSumExp: return KN_REDUCE_LOGSUMEXP;
    case KN_OP_ReduceSumSquare: return KN_REDUCE_SUMSQ;
    default: return KN_REDUCE_SUM;
    }
}

static int exec_reduce(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    bool have = has_input(d, in, 1);
    int64_t axes[KN_RD_MAX_AXES];
    int cnt = kn_rd_reduce_axes(d, have ? in[1] : NULL, have, axes);
    if (cnt < 0) return cnt == -2 ? kn_op_error(d, KN_ERR_INVALID, "axes input missing") : KN_ERR_INVALID;
    uint32_t mask;
    int st = kn_rd_axes_mask(d, axes, cnt, x->rank, &mask);
    if (st) return st;
    int64_t dims[KN_MAX_RANK];
    int r = kn_rd_reduced_dims(x->rank, x->dims, mask, kn_op_attr_int(d, "keepdims", 1) != 0, dims, NULL);
    st = kn_tensor_alloc(&out[0], x->dtype, r, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_reduce(reduce_kind(d->op), x, mask, &out[0]));
}

/* ---- ArgMax / ArgMin -------------------------------------------------------- */

static int exec_arg(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    int a;
    int st = kn_op_axis(d, kn_op_attr_int(d, "axis", 0), x->rank, &a);
    if (st) return st;
    int64_t dims[KN_MAX_RANK];
    int r = kn_rd_reduced_dims(x->rank, x->dims, 1u << a, kn_op_attr_int(d, "keepdims", 1) != 0, dims, NULL);
    st = kn_tensor_alloc(&out[0], KN_I64, r, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_argreduce(x, a, d->op == KN_OP_ArgMax,
                                       kn_op_attr_int(d, "select_last_index", 0) != 0, &out[0]));
}

/* ---- CumSum ------------------------------------------------------------------ */

static int exec_cumsum(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    int64_t axis;
    if (kn_rd_read_ints(d, in[1], "axis", &axis, 1) != 1)
        return kn_op_error(d, KN_ERR_INVALID, "axis must be a scalar integer tensor");
    int a;
    int st = kn_op_axis(d, axis, x->rank, &a);
    if (st) return st;
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, x->dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_cumsum(x, a, kn_op_attr_int(d, "exclusive", 0) != 0,
                                    kn_op_attr_int(d, "reverse", 0) != 0, &out[0]));
}

/* ---- TopK -------------------------------------------------------------------- */

static int exec_topk(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    bool have = has_input(d, in, 1);
    if (!have && d->opset >= 10) return kn_op_error(d, KN_ERR_INVALID, "input K is missing");
    int64_t k = kn_rd_topk_k(d, have ? in[1] : NULL, have);
    int a;
    int st = kn_op_axis(d, kn_op_attr_int(d, "axis", -1), x->rank, &a);
    if (st) return st;
    if (k < 0 || k > x->dims[a])
        return kn_op_error(d, KN_ERR_INVALID, "k = %lld is outside [0, %lld]", (long long)k, (long long)x->dims[a]);
    int64_t dims[KN_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[a] = k;
    kn_tensor vals = {0}, idx = {0};
    st = kn_tensor_alloc(&vals, x->dtype, x->rank, dims);
    if (!st) st = kn_tensor_alloc(&idx, KN_I64, x->rank, dims);
    if (!st) st = kn_k_topk(x, a, k, kn_op_attr_int(d, "largest", 1) != 0, &vals, &idx);
    /* Outputs are handed over only on success and only where wanted, so
     * nothing leaks whoever the caller is. */
    if (st || !kn_op_has_output(d, 0)) kn_tensor_free(&vals);
    if (st || !kn_op_has_output(d, 1)) kn_tensor_free(&idx);
    if (st) return kn_op_fail(d, st);
    out[0] = vals;
    out[1] = idx;
    return KN_OK;
}

/* ---- the family table ---------------------------------------------------------- */

const kn_exec_impl kn_exec_reduce[] = {
    {KN_OP_ReduceSum, exec_reduce},
    {KN_OP_ReduceMean, exec_reduce},
    {KN_OP_ReduceMax, exec_reduce},
    {KN_OP_ReduceMin, exec_reduce},
    {KN_OP_ReduceProd, exec_reduce},
    {KN_OP_ReduceL1, exec_reduce},
    {KN_OP_ReduceL2, exec_reduce},
    {KN_OP_ReduceLogSum, exec_reduce},
    {KN_OP_ReduceLogSumExp, exec_reduce},
    {KN_OP_ReduceSumSquare, exec_reduce},
    {KN_OP_ArgMax, exec_arg},
    {KN_OP_ArgMin, exec_arg},
    {KN_OP_CumSum, exec_cumsum},
    {KN_OP_TopK, exec_topk},
    {KN_OP_UNKNOWN, NULL},
};
