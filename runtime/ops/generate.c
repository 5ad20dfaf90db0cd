/*
 * Execution of the 'generate' ops (see opdesc.h): the tensors made from a
 * shape or from positions rather than computed from an input's values:
 * Shape, Size, ConstantOfShape, Range, EyeLike, Trilu, OneHot. Kernels are
 * in runtime/kernels/ref/generate.c; the attribute and shape rules
 * (generate_int.h) are shared with the family's type inference in the IR
 * (ir/ops/generate.c).
 */
#include <math.h>
#include <string.h>

#include "generate_int.h"
#include "k_generate.h"

/* ---- Shape / Size ------------------------------------------------------------------- */

void kn_gen_shape_window(const kn_opdesc *d, int rank, int64_t *s, int64_t *e)
{
    *s = kn_op_attr_int(d, "start", 0);
    *e = kn_op_attr_int(d, "end", rank);
    if (*s < 0) *s += rank;
    if (*e < 0) *e += rank;
    *s = *s < 0 ? 0 : *s > rank ? rank : *s;
    *e = *e < 0 ? 0 : *e > rank ? rank : *e;
    if (*e < *s) *e = *s;
}

static int exec_shape(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    int64_t s, e;
    kn_gen_shape_window(d, in[0]->rank, &s, &e);
    int64_t len = e - s;
    int st = kn_tensor_alloc(&out[0], KN_I64, 1, &len);
    if (st) return kn_op_fail(d, st);
    for (int64_t i = 0; i < len; i++) ((int64_t *)out[0].data)[i] = in[0]->dims[s + i];
    return KN_OK;
}

static int exec_size(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    int st = kn_tensor_alloc(&out[0], KN_I64, 0, NULL);
    if (st) return kn_op_fail(d, st);
    *(int64_t *)out[0].data = kn_tensor_numel(in[0]);
    return KN_OK;
}

/* ---- ConstantOfShape ------------------------------------------------------------------ */

const kn_tensor *kn_gen_cos_value(const kn_opdesc *d)
{
    const kn_attr *a = kn_op_attr(d, "value");
    return a && a->kind == KN_ATTR_TENSOR ? a->t : NULL;
}

int kn_gen_read_shape(const kn_opdesc *d, const kn_tensor *t, int64_t *dims)
{
    int64_t cnt = kn_tensor_numel(t);
    if (!kn_dtype_info(t->dtype)->is_integer || t->rank > 1 || cnt < 0 || cnt > KN_MAX_RANK) {
        kn_op_error(d, KN_ERR_INVALID, "shape must be a 1-D integer tensor of at most %d entries", KN_MAX_RANK);
        return -1;
    }
    for (int64_t i = 0; i < cnt; i++) {
        dims[i] = kn_load_i64(t->dtype, t->data, (size_t)i);
        if (dims[i] < 0) {
            kn_op_error(d, KN_ERR_INVALID, "shape entry %lld is negative (%lld)", (long long)i, (long long)dims[i]);
            return -1;
        }
    }
    return (int)cnt;
}

static int exec_constantofshape(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    const kn_tensor *v = kn_gen_cos_value(d);
    if (v && (kn_tensor_numel(v) != 1 || kn_dtype_size(v->dtype) == 0))
        return kn_op_error(d, KN_ERR_INVALID, "value must be a one-element tensor");
    int64_t dims[KN_MAX_RANK];
    int r = kn_gen_read_shape(d, in[0], dims);
    if (r < 0) return KN_ERR_INVALID;
    int st = kn_tensor_alloc(&out[0], v ? v->dtype : KN_F32, r, dims);
    if (st) return kn_op_fail(d, st);
    if (!v) return KN_OK;
    size_t esz = kn_dtype_size(v->dtype);
    int64_t cnt = kn_tensor_numel(&out[0]);
    for (int64_t i = 0; i < cnt; i++) memcpy((char *)out[0].data + (size_t)i * esz, v->data, esz);
    return KN_OK;
}

/* ---- Range ---------------------------------------------------------------------------- */

/* max(ceil((limit - start) / delta), 0). */
int kn_gen_range_count(const kn_opdesc *d, const kn_tensor *const *in, int64_t *out_n)
{
    for (int i = 0; i < 3; i++)
        if (kn_tensor_numel(in[i]) != 1) return kn_op_error(d, KN_ERR_INVALID, "input %d must be a scalar", i);
    kn_dtype dt = in[0]->dtype;
    if (kn_dtype_info(dt)->is_float) {
        double s = kn_load_f64(dt, in[0]->data, 0), l = kn_load_f64(in[1]->dtype, in[1]->data, 0);
        double dl = kn_load_f64(in[2]->dtype, in[2]->data, 0);
        double cnt = ceil((l - s) / dl);
        if (dl == 0 || !isfinite(cnt))
            return kn_op_error(d, KN_ERR_INVALID, "delta is zero or the range is not finite");
        if (cnt > 1e12) return kn_op_error(d, KN_ERR_INVALID, "range of %g elements is too large", cnt);
        *out_n = cnt > 0 ? (int64_t)cnt : 0;
        return KN_OK;
    }
    int64_t s = kn_load_i64(dt, in[0]->data, 0), l = kn_load_i64(in[1]->dtype, in[1]->data, 0);
    int64_t dl = kn_load_i64(in[2]->dtype, in[2]->data, 0);
    if (dl == 0) return kn_op_error(d, KN_ERR_INVALID, "delta is zero");
    /* Computed in double to dodge int64 overflow of l - s; exact for sane sizes. */
    double cnt = ceil(((double)l - (double)s) / (double)dl);
    if (cnt > 1e12) return kn_op_error(d, KN_ERR_INVALID, "range of %g elements is too large", cnt);
    *out_n = cnt > 0 ? (int64_t)cnt : 0;
    return KN_OK;
}

static int exec_range(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 3)) return KN_ERR_INVALID;
    int64_t len;
    int st = kn_gen_range_count(d, in, &len);
    if (st) return st;
    st = kn_tensor_alloc(&out[0], in[0]->dtype, 1, &len);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_range(kn_load_f64(in[0]->dtype, in[0]->data, 0),
                                   kn_load_f64(in[2]->dtype, in[2]->data, 0),
                                   kn_load_i64(in[0]->dtype, in[0]->data, 0),
                                   kn_load_i64(in[2]->dtype, in[2]->data, 0), &out[0]));
}

/* ---- EyeLike / Trilu ----------------------------------------------------------------- */

kn_dtype kn_gen_eyelike_dtype(const kn_opdesc *d, kn_dtype in_dt)
{
    int64_t dt = kn_op_attr_int(d, "dtype", 0);
    return dt ? (kn_dtype)dt : in_dt;
}

static int exec_eyelike(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    if (in[0]->rank != 2) return kn_op_error(d, KN_ERR_INVALID, "input rank %d, expected 2", in[0]->rank);
    kn_dtype dt = kn_gen_eyelike_dtype(d, in[0]->dtype);
    /* the attribute is the model's word: check it before it sizes anything */
    if (!kn_dtype_valid(dt)) return kn_op_error(d, KN_ERR_UNSUPPORTED, "dtype %d is not supported", (int)dt);
    int st = kn_tensor_alloc(&out[0], dt, 2, in[0]->dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_eyelike(kn_op_attr_int(d, "k", 0), &out[0]));
}

static int exec_trilu(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    int64_t k = 0;
    if (d->n_inputs > 1 && in[1] && kn_op_scalar_int(d, in[1], "k", &k)) return KN_ERR_INVALID;
    if (in[0]->rank < 2)
        return kn_op_error(d, KN_ERR_INVALID, "input rank %d, expected at least 2", in[0]->rank);
    int st = kn_tensor_alloc(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_trilu(in[0], k, kn_op_attr_int(d, "upper", 1) != 0, &out[0]));
}

/* ---- OneHot ------------------------------------------------------------------------- */

static int exec_onehot(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 3)) return KN_ERR_INVALID;
    const kn_tensor *idx = in[0];
    int64_t depth;
    if (kn_op_scalar_int(d, in[1], "depth", &depth)) return KN_ERR_INVALID;
    if (depth < 0) return kn_op_error(d, KN_ERR_INVALID, "depth %lld is negative", (long long)depth);
    if (idx->rank + 1 > KN_MAX_RANK)
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "indices rank %d too large", idx->rank);
    int r = idx->rank + 1, a;
    int st = kn_op_axis(d, kn_op_attr_int(d, "axis", -1), r, &a);
    if (st) return st;
    int64_t dims[KN_MAX_RANK];
    for (int i = 0, j = 0; i < r; i++) dims[i] = i == a ? depth : idx->dims[j++];
    st = kn_tensor_alloc(&out[0], in[2]->dtype, r, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_onehot(idx, depth, in[2], a, &out[0]));
}

/* ---- the family table ---------------------------------------------------------- */

const kn_exec_impl kn_exec_generate[] = {
    {KN_OP_Shape, exec_shape},
    {KN_OP_Size, exec_size},
    {KN_OP_ConstantOfShape, exec_constantofshape},
    {KN_OP_Range, exec_range},
    {KN_OP_EyeLike, exec_eyelike},
    {KN_OP_Trilu, exec_trilu},
    {KN_OP_OneHot, exec_onehot},
    {KN_OP_UNKNOWN, NULL},
};
