/*
 * Op definitions of the 'reduce' family (see ir/ops.h): Reduce*, ArgMax,
 * ArgMin, CumSum, TopK here; the generator and shape-info ops (Shape, Size,
 * ConstantOfShape, Range, EyeLike, Trilu, OneHot, NonZero, Compress, Unique)
 * in reduce_gen.c, whose functions this file's table lists.
 */
#include <string.h>

#include "../eval.h"
#include "k_reduce.h"

/* Defined in reduce_gen.c. */
int kn_rg_infer_shape(kn_node *n);
int kn_rg_eval_shape(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_size(kn_node *n);
int kn_rg_eval_size(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_constantofshape(kn_node *n);
int kn_rg_eval_constantofshape(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_range(kn_node *n);
int kn_rg_eval_range(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_eyelike(kn_node *n);
int kn_rg_eval_eyelike(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_trilu(kn_node *n);
int kn_rg_eval_trilu(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_onehot(kn_node *n);
int kn_rg_eval_onehot(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_nonzero(kn_node *n);
int kn_rg_eval_nonzero(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_compress(kn_node *n);
int kn_rg_eval_compress(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_rg_infer_unique(kn_node *n);
int kn_rg_eval_unique(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);

/* Adds the node's name to a kernel's message. */
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

/* Reads up to `max` integers of an integer tensor; -1 with an error naming
 * the node if it is not integer or too long. */
static int read_ints(const kn_node *n, const kn_tensor *t, const char *what, int64_t *out, int max)
{
    const kn_dtype_traits *ti = kn_dtype_info(t->dtype);
    int64_t cnt = kn_tensor_numel(t);
    if (!ti->is_integer || cnt < 0) {
        kn_node_error(n, KN_ERR_INVALID, "%s must be an integer tensor, got %s", what,
                      kn_dtype_name(t->dtype));
        return -1;
    }
    if (cnt > max) {
        kn_node_error(n, KN_ERR_INVALID, "%s has %lld entries, at most %d allowed", what,
                      (long long)cnt, max);
        return -1;
    }
    for (int64_t i = 0; i < cnt; i++) out[i] = kn_load_i64(t->dtype, t->data, (size_t)i);
    return (int)cnt;
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

/* Turns an axes list into a bit mask over `rank` axes. An empty list reduces
 * every axis, or none with noop_with_empty_axes. */
static int axes_mask(const kn_node *n, const int64_t *axes, int count, int rank, uint32_t *out)
{
    *out = 0;
    if (count == 0) {
        if (!kn_attr_int(n, "noop_with_empty_axes", 0)) *out = rank ? (1u << rank) - 1 : 0;
        return KN_OK;
    }
    for (int i = 0; i < count; i++) {
        int a = kn_norm_axis(axes[i], rank);
        if (a < 0)
            return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                                 (long long)axes[i], rank);
        *out |= 1u << a;
    }
    return KN_OK;
}

/* Axes from the attribute (older opsets) or from input 1. Returns the count,
 * -1 on error, or -2 when input 1 is given but not known (inference only). */
static int reduce_axes(const kn_node *n, const kn_tensor *axes_in, bool have_input, int64_t *axes)
{
    if (have_input) {
        if (!axes_in) return -2;
        return read_ints(n, axes_in, "axes", axes, KN_MAX_RANK * 4);
    }
    const int64_t *a;
    int cnt = kn_attr_ints(n, "axes", &a);
    if (cnt > KN_MAX_RANK * 4) {
        kn_node_error(n, KN_ERR_INVALID, "%d axes given", cnt);
        return -1;
    }
    if (cnt) memcpy(axes, a, sizeof *a * (size_t)cnt);
    return cnt;
}

/* The reduced shape of x: reduced axes become 1 (keepdims) or vanish. */
static void reduced_shape(const kn_shape *x, uint32_t mask, bool keepdims, kn_shape *out)
{
    int r = 0;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < x->rank; i++) {
        if (mask & (1u << i)) {
            if (!keepdims) continue;
            out->dims[r] = 1;
            out->sym[r++] = NULL;
        } else {
            out->dims[r] = x->dims[i];
            out->sym[r++] = x->sym[i];
        }
    }
    out->rank = r;
}

static int infer_reduce(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    kn_value *av = kn_node_input(n, 1);
    bool keepdims = kn_attr_int(n, "keepdims", 1) != 0;
    if (x->shape.rank < 0) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 0, x->dtype, &u);
        return KN_OK;
    }
    int64_t axes[KN_MAX_RANK * 4];
    int cnt = reduce_axes(n, av ? av->const_data : NULL, av != NULL, axes);
    if (cnt == -1) return KN_ERR_INVALID;
    if (cnt == -2) {
        /* Axes only known at run time: every dim is either kept or 1. */
        kn_shape s = kn_shape_unknown();
        if (keepdims) {
            s.rank = x->shape.rank;
            for (int i = 0; i < s.rank; i++) s.dims[i] = x->shape.dims[i] == 1 ? 1 : -1;
        }
        kn_infer_set_shape(n, 0, x->dtype, &s);
        return KN_OK;
    }
    uint32_t mask;
    int st = axes_mask(n, axes, cnt, x->shape.rank, &mask);
    if (st) return st;
    kn_shape s;
    reduced_shape(&x->shape, mask, keepdims, &s);
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

static int eval_reduce(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)ctx;
    const kn_tensor *x = in[0];
    bool have_input = kn_node_input(n, 1) != NULL;
    int64_t axes[KN_MAX_RANK * 4];
    int cnt = reduce_axes(n, have_input ? in[1] : NULL, have_input, axes);
    if (cnt < 0) return cnt == -2 ? kn_node_error(n, KN_ERR_INVALID, "axes input missing") : KN_ERR_INVALID;
    uint32_t mask;
    int st = axes_mask(n, axes, cnt, x->rank, &mask);
    if (st) return st;
    kn_shape xs = {.rank = x->rank}, ys;
    memcpy(xs.dims, x->dims, sizeof xs.dims);
    reduced_shape(&xs, mask, kn_attr_int(n, "keepdims", 1) != 0, &ys);
    st = kn_tensor_alloc(&out[0], x->dtype, ys.rank, ys.dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_reduce(reduce_kind(n->op), x, mask, &out[0]));
}

/* ---- ArgMax / ArgMin -------------------------------------------------------- */

static int infer_arg(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    if (x->shape.rank < 0) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 0, KN_I64, &u);
        return KN_OK;
    }
    int64_t axis = kn_attr_int(n, "axis", 0);
    int a = kn_norm_axis(axis, x->shape.rank);
    if (a < 0)
        return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                             (long long)axis, x->shape.rank);
    kn_shape s;
    reduced_shape(&x->shape, 1u << a, kn_attr_int(n, "keepdims", 1) != 0, &s);
    kn_infer_set_shape(n, 0, KN_I64, &s);
    return KN_OK;
}

static int eval_arg(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)ctx;
    const kn_tensor *x = in[0];
    int64_t axis = kn_attr_int(n, "axis", 0);
    int a = kn_norm_axis(axis, x->rank);
    if (a < 0)
        return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                             (long long)axis, x->rank);
    kn_shape xs = {.rank = x->rank}, ys;
    memcpy(xs.dims, x->dims, sizeof xs.dims);
    reduced_shape(&xs, 1u << a, kn_attr_int(n, "keepdims", 1) != 0, &ys);
    int st = kn_tensor_alloc(&out[0], KN_I64, ys.rank, ys.dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_argreduce(x, a, n->op == KN_OP_ArgMax,
                                       kn_attr_int(n, "select_last_index", 0) != 0, &out[0]));
}

/* ---- CumSum ------------------------------------------------------------------ */

static int infer_cumsum(kn_node *n)
{
    return need_inputs(n, 2) ? KN_ERR_INVALID : kn_infer_same_as_input(n, 0);
}

static int eval_cumsum(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)ctx;
    const kn_tensor *x = in[0];
    int64_t axis;
    if (!in[1] || read_ints(n, in[1], "axis", &axis, 1) != 1)
        return kn_node_error(n, KN_ERR_INVALID, "axis must be a scalar integer tensor");
    int a = kn_norm_axis(axis, x->rank);
    if (a < 0)
        return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                             (long long)axis, x->rank);
    int st = kn_tensor_alloc(&out[0], x->dtype, x->rank, x->dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_cumsum(x, a, kn_attr_int(n, "exclusive", 0) != 0,
                                    kn_attr_int(n, "reverse", 0) != 0, &out[0]));
}

/* ---- TopK -------------------------------------------------------------------- */

/* k from the attribute (opset 1) or input 1; -2 if not known yet. */
static int64_t topk_k(const kn_node *n, const kn_tensor *kt, bool have_input)
{
    if (!have_input) return kn_attr_int(n, "k", -1);
    if (!kt) return -2;
    int64_t k;
    if (read_ints(n, kt, "k", &k, 1) != 1) return -1;
    return k;
}

static int infer_topk(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    kn_value *kv = kn_node_input(n, 1);
    kn_shape s = x->shape;
    if (s.rank >= 0) {
        int64_t axis = kn_attr_int(n, "axis", -1);
        int a = kn_norm_axis(axis, s.rank);
        if (a < 0)
            return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                                 (long long)axis, s.rank);
        int64_t k = topk_k(n, kv ? kv->const_data : NULL, kv != NULL);
        if (k == -1 && (kv == NULL || kv->const_data))
            return kn_node_error(n, KN_ERR_INVALID, "k must be a non-negative integer");
        s.dims[a] = k >= 0 ? k : -1;
        s.sym[a] = NULL;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    kn_infer_set_shape(n, 1, KN_I64, &s);
    return KN_OK;
}

static int eval_topk(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)ctx;
    const kn_tensor *x = in[0];
    bool have_input = kn_node_input(n, 1) != NULL;
    if (!have_input && kn_node_opset(n) >= 10) return kn_node_error(n, KN_ERR_INVALID, "input K is missing");
    int64_t k = topk_k(n, have_input ? in[1] : NULL, have_input);
    int64_t axis = kn_attr_int(n, "axis", -1);
    int a = kn_norm_axis(axis, x->rank);
    if (a < 0)
        return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                             (long long)axis, x->rank);
    if (k < 0 || k > x->dims[a])
        return kn_node_error(n, KN_ERR_INVALID, "k = %lld is outside [0, %lld]", (long long)k,
                             (long long)x->dims[a]);
    int64_t dims[KN_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[a] = k;
    kn_tensor vals = {0}, idx = {0};
    int st = kn_tensor_alloc(&vals, x->dtype, x->rank, dims);
    if (!st) st = kn_tensor_alloc(&idx, KN_I64, x->rank, dims);
    if (!st) st = kn_k_topk(x, a, k, kn_attr_int(n, "largest", 1) != 0, &vals, &idx);
    /* The outputs are handed over only when both exist, so nothing leaks. */
    if (st) {
        kn_tensor_free(&vals);
        kn_tensor_free(&idx);
        return node_fail(n, st);
    }
    out[0] = vals;
    out[1] = idx;
    return KN_OK;
}

const kn_op_impl kn_ops_reduce[] = {
    {KN_OP_ReduceSum, infer_reduce, eval_reduce},
    {KN_OP_ReduceMean, infer_reduce, eval_reduce},
    {KN_OP_ReduceMax, infer_reduce, eval_reduce},
    {KN_OP_ReduceMin, infer_reduce, eval_reduce},
    {KN_OP_ReduceProd, infer_reduce, eval_reduce},
    {KN_OP_ReduceL1, infer_reduce, eval_reduce},
    {KN_OP_ReduceL2, infer_reduce, eval_reduce},
    {KN_OP_ReduceLogSum, infer_reduce, eval_reduce},
    {KN_OP_ReduceLogSumExp, infer_reduce, eval_reduce},
    {KN_OP_ReduceSumSquare, infer_reduce, eval_reduce},
    {KN_OP_ArgMax, infer_arg, eval_arg},
    {KN_OP_ArgMin, infer_arg, eval_arg},
    {KN_OP_CumSum, infer_cumsum, eval_cumsum},
    {KN_OP_TopK, infer_topk, eval_topk},
    {KN_OP_Shape, kn_rg_infer_shape, kn_rg_eval_shape},
    {KN_OP_Size, kn_rg_infer_size, kn_rg_eval_size},
    {KN_OP_ConstantOfShape, kn_rg_infer_constantofshape, kn_rg_eval_constantofshape},
    {KN_OP_Range, kn_rg_infer_range, kn_rg_eval_range},
    {KN_OP_EyeLike, kn_rg_infer_eyelike, kn_rg_eval_eyelike},
    {KN_OP_Trilu, kn_rg_infer_trilu, kn_rg_eval_trilu},
    {KN_OP_OneHot, kn_rg_infer_onehot, kn_rg_eval_onehot},
    {KN_OP_NonZero, kn_rg_infer_nonzero, kn_rg_eval_nonzero},
    {KN_OP_Compress, kn_rg_infer_compress, kn_rg_eval_compress},
    {KN_OP_Unique, kn_rg_infer_unique, kn_rg_eval_unique},
    {KN_OP_UNKNOWN, NULL, NULL},
};
