/*
 * runtime/ops/fused_q.c — QConv and QMatMul (runtime/ops/fused_q.h) by the
 * reference kernels: the exact integer product (ConvInteger's and
 * MatMulInteger's kernels), then the requantization below, element by
 * element. The reference evaluator and artifacts whose node oneDNN cannot
 * take run this; the compiled path runs oneDNN's int8 primitives.
 */
#include <math.h>
#include <string.h>

#include "fused_int.h"
#include "fused_q.h"
#include "k_elementwise.h"
#include "k_linalg.h"
#include "linalg_int.h"

kn_dtype kn_q_out_dtype(int64_t onnx_elem)
{
    switch (onnx_elem) {
    case 1: return KN_F32;
    case 2: return KN_U8;
    case 3: return KN_I8;
    default: return KN_DT_UNDEFINED;
    }
}

int64_t kn_q_onnx_elem(kn_dtype dt)
{
    return dt == KN_F32 ? 1 : dt == KN_U8 ? 2 : dt == KN_I8 ? 3 : 0;
}

static bool zp_fits(kn_dtype dt, int64_t zp)
{
    return dt == KN_U8 ? zp >= 0 && zp <= 255 : dt == KN_I8 ? zp >= -128 && zp <= 127 : zp == 0;
}

const char *kn_q_check_zero_points(kn_dtype x_dt, int64_t x_zp, kn_dtype y_dt, int64_t y_zp)
{
    if (x_dt != KN_F32 && !zp_fits(x_dt, x_zp)) return "x_zero_point is outside the range of X's type";
    if (!zp_fits(y_dt, y_zp)) return "y_zero_point is outside the range of the output's type (0 for f32)";
    return NULL;
}

/* Checks what both ops share: dtypes of X, W, B, R and S, and S's and B's
 * counts against the `chans` output channels. */
static int check_q_inputs(const kn_opdesc *d, const kn_tensor *const *in, int64_t chans, kn_dtype *out_dt)
{
    const kn_tensor *x = kn_op_input(d, in, KN_Q_X), *w = kn_op_input(d, in, KN_Q_W);
    const kn_tensor *b = kn_op_input(d, in, KN_Q_B), *s = kn_op_input(d, in, KN_Q_S);
    if (!x || !w || !s) return kn_op_error(d, KN_ERR_INVALID, "input X, W or S is missing");
    bool dyn = x->dtype == KN_F32 && d->op == KN_OP_QMatMul;
    if ((x->dtype != KN_U8 && x->dtype != KN_I8 && !dyn) || w->dtype != KN_I8)
        return kn_op_error(d, KN_ERR_INVALID, "X must be u8 or s8 (f32: QMatMul's dynamic form) and W s8 (got %s and %s)",
                           kn_dtype_name(x->dtype), kn_dtype_name(w->dtype));
    int64_t ns = kn_tensor_numel(s);
    if (s->dtype != KN_F32 || (ns != 1 && ns != chans))
        return kn_op_error(d, KN_ERR_INVALID, "S must be f32 with 1 or %lld values (got %s, %lld)", (long long)chans,
                           kn_dtype_name(s->dtype), (long long)ns);
    if (b && (b->dtype != KN_F32 || kn_tensor_numel(b) != chans))
        return kn_op_error(d, KN_ERR_INVALID, "B must be f32 with %lld values", (long long)chans);
    *out_dt = kn_q_out_dtype(kn_op_attr_int(d, "y_dtype", 1));
    if (dyn && *out_dt != KN_F32) return kn_op_error(d, KN_ERR_INVALID, "the dynamic form (X f32) has an f32 output");
    if (*out_dt == KN_DT_UNDEFINED)
        return kn_op_error(d, KN_ERR_INVALID, "y_dtype %lld: expected 1 (f32), 2 (u8) or 3 (s8)",
                           (long long)kn_op_attr_int(d, "y_dtype", 1));
    const char *bad = kn_q_check_zero_points(x->dtype, kn_op_attr_int(d, "x_zero_point", 0), *out_dt,
                                             kn_op_attr_int(d, "y_zero_point", 0));
    if (bad) return kn_op_error(d, KN_ERR_INVALID, "%s", bad);
    return KN_OK;
}

/* acc (i32, channel c of element i at (i / inner) % chans) → out, as
 * fused_q.h says; xs: the dynamic quantization's scale (0: static). */
static int requantize(const kn_opdesc *d, const kn_tensor *const *in, const kn_tensor *acc, int64_t chans,
                      int64_t inner, float xs, kn_tensor *out)
{
    kn_abi_post post[KN_FUSED_MAX_POST];
    int np, st = kn_fused_posts(d, post, &np);
    if (st) return st;
    const kn_tensor *r = kn_op_input(d, in, KN_Q_R), *b = kn_op_input(d, in, KN_Q_B), *s = kn_op_input(d, in, KN_Q_S);
    bool sum = kn_fused_has_sum(post, np);
    if (sum != (r != NULL))
        return kn_op_error(d, KN_ERR_INVALID, sum ? "post_ops adds a residual but input R is missing"
                                                  : "input R is given but post_ops has no 'Add'");
    bool r_ok = xs != 0 ? r && r->dtype == KN_F32 : r && (r->dtype == KN_U8 || r->dtype == KN_I8);
    if (r && (!r_ok || r->rank != out->rank || memcmp(r->dims, out->dims, sizeof(int64_t) * (size_t)out->rank)))
        return kn_op_error(d, KN_ERR_INVALID, "residual R must have the output's shape and be %s",
                           xs != 0 ? "f32" : "u8 or s8");
    int64_t n = kn_tensor_numel(out), ns = kn_tensor_numel(s);
    const float *sv = s->data, *bv = b ? b->data : NULL;
    const int32_t *av = acc->data;
    float *v = out->dtype == KN_F32 ? out->data : NULL;
    kn_tensor tmp = {0};
    if (!v) {
        if ((st = kn_tensor_alloc(&tmp, KN_F32, out->rank, out->dims))) return kn_op_fail(d, st);
        v = tmp.data;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t c = (i / inner) % chans;
        float sc = sv[ns == 1 ? 0 : c];
        if (xs != 0) v[i] = xs * sc * (float)av[i] + (bv ? bv[c] : 0.0f); /* dynamic: B in real units */
        else v[i] = sc * ((float)av[i] + (bv ? bv[c] : 0.0f));
    }
    kn_tensor vt = {.dtype = KN_F32, .rank = out->rank, .data = v, .nbytes = (size_t)n * sizeof(float)};
    memcpy(vt.dims, out->dims, sizeof(int64_t) * (size_t)out->rank);
    for (int k = 0; k < np && !st; k++) {
        if (post[k].kind != KN_POST_SUM) {
            st = kn_fused_apply_post(&post[k], NULL, &vt); /* as FusedConv runs them */
            continue;
        }
        for (int64_t i = 0; i < n; i++)
            v[i] += post[k].alpha * ((float)kn_load_f64(r->dtype, r->data, (size_t)i) - post[k].beta);
    }
    if (!st && out->dtype != KN_F32) {
        int64_t zp = kn_op_attr_int(d, "y_zero_point", 0), lo = out->dtype == KN_U8 ? 0 : -128;
        int64_t hi = out->dtype == KN_U8 ? 255 : 127;
        for (int64_t i = 0; i < n; i++) {
            float q = nearbyintf(v[i]) + (float)zp;
            int64_t qi = !(q >= (float)lo) ? lo : q > (float)hi ? hi : (int64_t)q;
            kn_store_i64(out->dtype, out->data, (size_t)i, qi);
        }
    }
    kn_tensor_free(&tmp);
    return st ? kn_op_fail(d, st) : KN_OK;
}

/* The zero point of X as a scalar tensor of X's dtype (in *buf). */
static kn_tensor x_zero_point(const kn_opdesc *d, const kn_tensor *x, int8_t *buf)
{
    int64_t z = kn_op_attr_int(d, "x_zero_point", 0);
    kn_tensor t = {.dtype = x->dtype, .rank = 0, .data = buf, .nbytes = 1};
    *buf = (int8_t)(x->dtype == KN_U8 ? (int8_t)(uint8_t)z : (int8_t)z);
    return t;
}

static int exec_qconv(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_tensor *x = kn_op_input(d, in, KN_Q_X), *w = kn_op_input(d, in, KN_Q_W);
    if (!x || !w) return kn_op_error(d, KN_ERR_INVALID, "input X or W is missing");
    if (x->rank < 3 || w->rank != x->rank)
        return kn_op_error(d, KN_ERR_INVALID, "input rank %d and weight rank %d do not fit a convolution", x->rank,
                           w->rank);
    kn_dtype ydt;
    int st = check_q_inputs(d, in, w->dims[0], &ydt);
    if (st) return st;
    kn_k_conv_params p;
    if ((st = kn_linalg_conv_params(d, x->rank - 2, w->dims, &p))) return st;
    int64_t dims[KN_MAX_RANK] = {x->dims[0], w->dims[0]};
    if ((st = kn_k_conv_out_dims(&p, x->dims + 2, dims + 2))) return kn_op_fail(d, st);
    kn_tensor acc = {0};
    int8_t zb;
    kn_tensor zp = x_zero_point(d, x, &zb);
    if ((st = kn_tensor_alloc(&acc, KN_I32, x->rank, dims)) ||
        (st = kn_k_conv_integer(x, w, &zp, NULL, NULL, &p, &acc))) {
        kn_tensor_free(&acc);
        return kn_op_fail(d, st);
    }
    int64_t inner = 1;
    for (int i = 2; i < x->rank; i++) inner *= dims[i];
    if (!(st = kn_tensor_alloc(&out[0], ydt, x->rank, dims))) st = requantize(d, in, &acc, w->dims[0], inner, 0, &out[0]);
    else st = kn_op_fail(d, st);
    kn_tensor_free(&acc);
    return st;
}

static int exec_qmatmul(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_tensor *x = kn_op_input(d, in, KN_Q_X), *w = kn_op_input(d, in, KN_Q_W);
    if (!x || !w) return kn_op_error(d, KN_ERR_INVALID, "input X or W is missing");
    if (x->rank < 2 || w->rank != 2)
        return kn_op_error(d, KN_ERR_INVALID, "X must have rank >= 2 and W rank 2 (got %d and %d)", x->rank, w->rank);
    kn_dtype ydt;
    int st = check_q_inputs(d, in, w->dims[1], &ydt);
    if (st) return st;
    int r;
    int64_t dims[KN_MAX_RANK];
    if ((st = kn_k_matmul_shape(x->rank, x->dims, w->rank, w->dims, &r, dims))) return kn_op_fail(d, st);
    kn_tensor acc = {0}, xq = {0}, xs = {0}, xz = {0}, zp;
    int8_t zb;
    int64_t one = 1;
    if (x->dtype == KN_F32) { /* the dynamic form: DynamicQuantizeLinear first */
        if ((st = kn_tensor_alloc(&xq, KN_U8, x->rank, x->dims)) || (st = kn_tensor_alloc(&xs, KN_F32, 0, &one)) ||
            (st = kn_tensor_alloc(&xz, KN_U8, 0, &one)) || (st = kn_k_dynamic_quantize(x, &xq, &xs, &xz)))
            goto done;
        x = &xq;
        zp = xz;
    } else {
        zp = x_zero_point(d, x, &zb);
    }
    if ((st = kn_tensor_alloc(&acc, KN_I32, r, dims)) || (st = kn_k_matmul_integer(x, w, &zp, NULL, &acc))) goto done;
    if (!(st = kn_tensor_alloc(&out[0], ydt, r, dims))) {
        kn_tensor_free(&xq); /* before the requantization's own buffer */
        st = requantize(d, in, &acc, w->dims[1], 1, xs.data ? ((float *)xs.data)[0] : 0, &out[0]);
        kn_tensor_free(&acc), kn_tensor_free(&xs), kn_tensor_free(&xz);
        return st;
    }
done:
    kn_tensor_free(&acc), kn_tensor_free(&xq), kn_tensor_free(&xs), kn_tensor_free(&xz);
    return kn_op_fail(d, st);
}

const kn_exec_impl kn_exec_fused_q[] = {
    {KN_OP_QConv, exec_qconv},
    {KN_OP_QMatMul, exec_qmatmul},
    {KN_OP_UNKNOWN, NULL},
};
