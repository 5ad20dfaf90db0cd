/*
 * Generator and shape-info ops of the 'reduce' family: Shape, Size,
 * ConstantOfShape, Range, EyeLike, Trilu, OneHot, NonZero, Compress, Unique.
 * The kn_ops_reduce table in reduce.c lists the functions defined here.
 */
#include <math.h>
#include <string.h>

#include "../eval.h"
#include "k_misc.h"

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

static void set_1d(kn_node *n, int i, kn_dtype dt, int64_t len)
{
    kn_shape s = {.rank = 1, .dims = {len}};
    kn_infer_set_shape(n, i, dt, &s);
}

/* Integer value of a one-element tensor; fails naming the node otherwise. */
static int scalar_int(const kn_node *n, const kn_tensor *t, const char *what, int64_t *out)
{
    if (!t || kn_tensor_numel(t) != 1)
        return kn_node_error(n, KN_ERR_INVALID, "%s must hold exactly one element", what);
    if (kn_dtype_info(t->dtype)->is_float) {
        double d = kn_load_f64(t->dtype, t->data, 0);
        if (!isfinite(d) || fabs(d) > 9e18) return kn_node_error(n, KN_ERR_INVALID, "%s is not finite", what);
        *out = (int64_t)d;
    } else {
        *out = kn_load_i64(t->dtype, t->data, 0);
    }
    return KN_OK;
}

/* ---- Shape / Size ------------------------------------------------------------------- */

/* The [start, end) window of Shape (opset 15), clamped to [0, rank]. */
static void shape_window(const kn_node *n, int rank, int64_t *s, int64_t *e)
{
    *s = kn_attr_int(n, "start", 0);
    *e = kn_attr_int(n, "end", rank);
    if (*s < 0) *s += rank;
    if (*e < 0) *e += rank;
    *s = *s < 0 ? 0 : *s > rank ? rank : *s;
    *e = *e < 0 ? 0 : *e > rank ? rank : *e;
    if (*e < *s) *e = *s;
}

int kn_rg_infer_shape(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    int rank = n->inputs[0]->shape.rank;
    int64_t s = 0, e = -1;
    if (rank >= 0) shape_window(n, rank, &s, &e);
    set_1d(n, 0, KN_I64, rank >= 0 ? e - s : -1);
    return KN_OK;
}

int kn_rg_eval_shape(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)c;
    int64_t s, e;
    shape_window(n, in[0]->rank, &s, &e);
    int64_t len = e - s;
    int st = kn_tensor_alloc(&out[0], KN_I64, 1, &len);
    if (st) return node_fail(n, st);
    for (int64_t i = 0; i < len; i++) ((int64_t *)out[0].data)[i] = in[0]->dims[s + i];
    return KN_OK;
}

int kn_rg_infer_size(kn_node *n)
{
    kn_infer_set(n, 0, KN_I64, 0, NULL);
    return KN_OK;
}

int kn_rg_eval_size(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)c;
    int st = kn_tensor_alloc(&out[0], KN_I64, 0, NULL);
    if (st) return node_fail(n, st);
    *(int64_t *)out[0].data = kn_tensor_numel(in[0]);
    return KN_OK;
}

/* ---- ConstantOfShape ------------------------------------------------------------------ */

static const kn_tensor *cos_value(const kn_node *n)
{
    const kn_attr *a = kn_node_attr(n, "value");
    return a && a->kind == KN_ATTR_TENSOR ? a->t : NULL;
}

/* Reads a shape tensor (1-D integers, each >= 0); returns its length or -1. */
static int read_shape(const kn_node *n, const kn_tensor *t, int64_t *dims)
{
    int64_t cnt = kn_tensor_numel(t);
    if (!kn_dtype_info(t->dtype)->is_integer || t->rank > 1 || cnt < 0 || cnt > KN_MAX_RANK) {
        kn_node_error(n, KN_ERR_INVALID, "shape must be a 1-D integer tensor of at most %d entries", KN_MAX_RANK);
        return -1;
    }
    for (int64_t i = 0; i < cnt; i++) {
        dims[i] = kn_load_i64(t->dtype, t->data, (size_t)i);
        if (dims[i] < 0) {
            kn_node_error(n, KN_ERR_INVALID, "shape entry %lld is negative (%lld)", (long long)i, (long long)dims[i]);
            return -1;
        }
    }
    return (int)cnt;
}

int kn_rg_infer_constantofshape(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    const kn_tensor *v = cos_value(n);
    kn_dtype dt = v ? v->dtype : KN_F32;
    kn_value *sv = n->inputs[0];
    kn_shape s = kn_shape_unknown();
    if (sv->const_data) {
        int r = read_shape(n, sv->const_data, s.dims);
        if (r < 0) return KN_ERR_INVALID;
        s.rank = r;
    } else if (sv->shape.rank == 1 && sv->shape.dims[0] >= 0 && sv->shape.dims[0] <= KN_MAX_RANK) {
        s.rank = (int)sv->shape.dims[0];
        for (int i = 0; i < s.rank; i++) s.dims[i] = -1;
    }
    kn_infer_set_shape(n, 0, dt, &s);
    return KN_OK;
}

int kn_rg_eval_constantofshape(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)c;
    const kn_tensor *v = cos_value(n);
    if (v && (kn_tensor_numel(v) != 1 || kn_dtype_size(v->dtype) == 0))
        return kn_node_error(n, KN_ERR_INVALID, "value must be a one-element tensor");
    int64_t dims[KN_MAX_RANK];
    int r = read_shape(n, in[0], dims);
    if (r < 0) return KN_ERR_INVALID;
    int st = kn_tensor_alloc(&out[0], v ? v->dtype : KN_F32, r, dims);
    if (st) return node_fail(n, st);
    if (!v) return KN_OK;
    size_t esz = kn_dtype_size(v->dtype);
    int64_t cnt = kn_tensor_numel(&out[0]);
    for (int64_t i = 0; i < cnt; i++) memcpy((char *)out[0].data + (size_t)i * esz, v->data, esz);
    return KN_OK;
}

/* ---- Range ---------------------------------------------------------------------------- */

/* Element count of Range: max(ceil((limit - start) / delta), 0). */
static int range_count(const kn_node *n, const kn_tensor *const *in, int64_t *out_n)
{
    for (int i = 0; i < 3; i++)
        if (kn_tensor_numel(in[i]) != 1)
            return kn_node_error(n, KN_ERR_INVALID, "input %d must be a scalar", i);
    kn_dtype dt = in[0]->dtype;
    if (kn_dtype_info(dt)->is_float) {
        double s = kn_load_f64(dt, in[0]->data, 0), l = kn_load_f64(in[1]->dtype, in[1]->data, 0);
        double d = kn_load_f64(in[2]->dtype, in[2]->data, 0);
        double cnt = ceil((l - s) / d);
        if (d == 0 || !isfinite(cnt)) return kn_node_error(n, KN_ERR_INVALID, "delta is zero or the range is not finite");
        if (cnt > 1e12) return kn_node_error(n, KN_ERR_INVALID, "range of %g elements is too large", cnt);
        *out_n = cnt > 0 ? (int64_t)cnt : 0;
        return KN_OK;
    }
    int64_t s = kn_load_i64(dt, in[0]->data, 0), l = kn_load_i64(in[1]->dtype, in[1]->data, 0);
    int64_t d = kn_load_i64(in[2]->dtype, in[2]->data, 0);
    if (d == 0) return kn_node_error(n, KN_ERR_INVALID, "delta is zero");
    /* Computed in double to dodge int64 overflow of l - s; exact for sane sizes. */
    double cnt = ceil(((double)l - (double)s) / (double)d);
    if (cnt > 1e12) return kn_node_error(n, KN_ERR_INVALID, "range of %g elements is too large", cnt);
    *out_n = cnt > 0 ? (int64_t)cnt : 0;
    return KN_OK;
}

int kn_rg_infer_range(kn_node *n)
{
    if (need_inputs(n, 3)) return KN_ERR_INVALID;
    int64_t len = -1;
    const kn_tensor *c[3];
    bool all = true;
    for (int i = 0; i < 3; i++) {
        c[i] = n->inputs[i]->const_data;
        all = all && c[i];
    }
    if (all && range_count(n, c, &len)) return KN_ERR_INVALID;
    set_1d(n, 0, n->inputs[0]->dtype, len);
    return KN_OK;
}

int kn_rg_eval_range(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 3)) return KN_ERR_INVALID;
    (void)c;
    int64_t len;
    int st = range_count(n, in, &len);
    if (st) return st;
    st = kn_tensor_alloc(&out[0], in[0]->dtype, 1, &len);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_range(kn_load_f64(in[0]->dtype, in[0]->data, 0),
                                   kn_load_f64(in[2]->dtype, in[2]->data, 0),
                                   kn_load_i64(in[0]->dtype, in[0]->data, 0),
                                   kn_load_i64(in[2]->dtype, in[2]->data, 0), &out[0]));
}

/* ---- EyeLike / Trilu ----------------------------------------------------------------- */

static kn_dtype eyelike_dtype(const kn_node *n, kn_dtype in_dt)
{
    int64_t dt = kn_attr_int(n, "dtype", 0);
    return dt ? (kn_dtype)dt : in_dt;
}

int kn_rg_infer_eyelike(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    kn_dtype dt = eyelike_dtype(n, x->dtype);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %d is not supported", (int)dt);
    if (x->shape.rank >= 0 && x->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected 2", x->shape.rank);
    kn_infer_set_shape(n, 0, dt, &x->shape);
    return KN_OK;
}

int kn_rg_eval_eyelike(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)c;
    if (in[0]->rank != 2) return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected 2", in[0]->rank);
    int st = kn_tensor_alloc(&out[0], eyelike_dtype(n, in[0]->dtype), 2, in[0]->dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_eyelike(kn_attr_int(n, "k", 0), &out[0]));
}

int kn_rg_infer_trilu(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    if (x->shape.rank >= 0 && x->shape.rank < 2)
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected at least 2", x->shape.rank);
    return kn_infer_same_as_input(n, 0);
}

int kn_rg_eval_trilu(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)c;
    int64_t k = 0;
    if (kn_node_input(n, 1) && scalar_int(n, in[1], "k", &k)) return KN_ERR_INVALID;
    if (in[0]->rank < 2) return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected at least 2", in[0]->rank);
    int st = kn_tensor_alloc(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_trilu(in[0], k, kn_attr_int(n, "upper", 1) != 0, &out[0]));
}

/* ---- OneHot ------------------------------------------------------------------------- */

int kn_rg_infer_onehot(kn_node *n)
{
    if (need_inputs(n, 3)) return KN_ERR_INVALID;
    kn_value *idx = n->inputs[0], *dv = n->inputs[1], *vals = n->inputs[2];
    kn_shape s = kn_shape_unknown();
    if (idx->shape.rank >= 0 && idx->shape.rank < KN_MAX_RANK) {
        int r = idx->shape.rank + 1;
        int64_t axis = kn_attr_int(n, "axis", -1);
        int a = kn_norm_axis(axis, r);
        if (a < 0) return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, r);
        int64_t depth = -1;
        if (dv->const_data && scalar_int(n, dv->const_data, "depth", &depth)) return KN_ERR_INVALID;
        s.rank = r;
        for (int i = 0, j = 0; i < r; i++) {
            s.dims[i] = i == a ? depth : idx->shape.dims[j];
            s.sym[i] = i == a ? NULL : idx->shape.sym[j];
            if (i != a) j++;
        }
    }
    kn_infer_set_shape(n, 0, vals->dtype, &s);
    return KN_OK;
}

int kn_rg_eval_onehot(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 3)) return KN_ERR_INVALID;
    (void)c;
    const kn_tensor *idx = in[0];
    int64_t depth;
    if (scalar_int(n, in[1], "depth", &depth)) return KN_ERR_INVALID;
    if (depth < 0) return kn_node_error(n, KN_ERR_INVALID, "depth %lld is negative", (long long)depth);
    if (idx->rank + 1 > KN_MAX_RANK) return kn_node_error(n, KN_ERR_UNSUPPORTED, "indices rank %d too large", idx->rank);
    int r = idx->rank + 1;
    int64_t axis = kn_attr_int(n, "axis", -1);
    int a = kn_norm_axis(axis, r);
    if (a < 0) return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, r);
    int64_t dims[KN_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) dims[i] = i == a ? depth : idx->dims[j++];
    int st = kn_tensor_alloc(&out[0], in[2]->dtype, r, dims);
    if (st) return node_fail(n, st);
    return node_fail(n, kn_k_onehot(idx, depth, in[2], a, &out[0]));
}

/* ---- NonZero / Compress / Unique ------------------------------------------------------ */

int kn_rg_infer_nonzero(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    int r = n->inputs[0]->shape.rank;
    kn_shape s = {.rank = 2, .dims = {r, -1}};
    kn_infer_set_shape(n, 0, KN_I64, &s);
    return KN_OK;
}

int kn_rg_eval_nonzero(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)c;
    return node_fail(n, kn_k_nonzero(in[0], &out[0]));
}

/* Compress's axis normalized, -1 (flatten) when absent, -2 on error. */
static int compress_axis(const kn_node *n, int rank)
{
    if (!kn_node_attr(n, "axis")) return -1;
    int64_t axis = kn_attr_int(n, "axis", 0);
    int a = rank >= 0 ? kn_norm_axis(axis, rank) : 0;
    if (a < 0) {
        kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, rank);
        return -2;
    }
    return a;
}

int kn_rg_infer_compress(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    int a = compress_axis(n, x->shape.rank);
    if (a == -2) return KN_ERR_INVALID;
    if (a == -1) {
        set_1d(n, 0, x->dtype, -1);
        return KN_OK;
    }
    kn_shape s = x->shape;
    if (s.rank >= 0) {
        s.dims[a] = -1;
        s.sym[a] = NULL;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

int kn_rg_eval_compress(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    (void)c;
    int a = compress_axis(n, in[0]->rank);
    if (a == -2) return KN_ERR_INVALID;
    return node_fail(n, kn_k_compress(in[0], in[1], a, &out[0]));
}

static int unique_axis(const kn_node *n, int rank)
{
    return compress_axis(n, rank); /* same rule: optional axis attribute */
}

int kn_rg_infer_unique(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    int a = unique_axis(n, x->shape.rank);
    if (a == -2) return KN_ERR_INVALID;
    kn_shape s = {.rank = 1, .dims = {-1}};
    int64_t items = -1;
    if (a >= 0) {
        s = x->shape;
        if (s.rank >= 0) {
            items = s.dims[a];
            s.dims[a] = -1;
            s.sym[a] = NULL;
        }
    } else if (kn_shape_is_static(&x->shape)) {
        items = kn_shape_numel(x->shape.rank, x->shape.dims);
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    if (n->n_outputs > 1) set_1d(n, 1, KN_I64, -1);
    if (n->n_outputs > 2) set_1d(n, 2, KN_I64, items);
    if (n->n_outputs > 3) set_1d(n, 3, KN_I64, -1);
    return KN_OK;
}

int kn_rg_eval_unique(kn_eval_ctx *c, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    (void)c;
    int a = unique_axis(n, in[0]->rank);
    if (a == -2) return KN_ERR_INVALID;
    kn_tensor all[4];
    memset(all, 0, sizeof all);
    int st = kn_k_unique(in[0], a, kn_attr_int(n, "sorted", 1) != 0, all);
    /* Hand over the outputs the node has; free the rest. */
    for (int i = 0; i < 4; i++) {
        if (!st && i < n->n_outputs) out[i] = all[i];
        else kn_tensor_free(&all[i]);
    }
    return node_fail(n, st);
}
