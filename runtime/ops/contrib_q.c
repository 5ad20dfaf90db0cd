/*
 * Execution of the com.microsoft quantization ops that onnxruntime's
 * quantizer writes (QOperator format and quantize_dynamic): QLinearAdd,
 * QLinearMul, QLinearConcat, QLinearGlobalAveragePool, QLinearSigmoid,
 * QLinearLeakyRelu, QGemm, MatMulIntegerToFloat, DynamicQuantizeMatMul and
 * DynamicQuantizeLSTM (onnxruntime's docs/ContribOperators.md).
 *
 * These are the reference kernels: the evaluator calls them, and a compiled
 * artifact calls them for a node no pass lowered (passes/lower_qdq.c
 * rewrites most of them into DequantizeLinear → float op → QuantizeLinear
 * first, so that its integer lowering sees them). The arithmetic follows
 * onnxruntime's CPU kernels (MLAS): requantization multipliers are formed
 * in float32 (a_scale / c_scale, ...), products of zero-point-shifted
 * integers are exact, results round half to even and saturate. Where
 * onnxruntime uses a 256-entry lookup table (Sigmoid, LeakyRelu, Concat's
 * requantization) the value is computed as the table would hold it:
 * dequantize, apply in float, quantize.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_linalg.h"
#include "opdesc.h"

/* ---- helpers ---------------------------------------------------------------- */

static bool q8(kn_dtype dt) { return dt == KN_U8 || dt == KN_I8; }

/* round half to even, + zp, saturated to dt's range (u8 or s8). */
static int64_t requant(float v, int64_t zp, kn_dtype dt)
{
    float r = (v != v ? 0.0f : rintf(v)) + (float)zp;
    float lo = dt == KN_U8 ? 0.0f : -128.0f, hi = dt == KN_U8 ? 255.0f : 127.0f;
    return (int64_t)(r < lo ? lo : r > hi ? hi : r);
}

static int64_t ld_i(const kn_tensor *t, int64_t i) { return kn_load_i64(t->dtype, t->data, (size_t)i); }

/* A per-tensor or per-index parameter: element i (or 0 if it has one). */
static float par_f(const kn_tensor *t, int64_t i)
{
    return (float)kn_load_f64(t->dtype, t->data, kn_tensor_numel(t) == 1 ? 0 : (size_t)i);
}
static int64_t par_i(const kn_tensor *t, int64_t i)
{
    return !t ? 0 : kn_load_i64(t->dtype, t->data, kn_tensor_numel(t) == 1 ? 0 : (size_t)i);
}

/* Checks that inputs in req (a -1 terminated list) are present, that the
 * scales (in scales[], -1 terminated) are f32 with one value, and zero
 * points (zps[]) have one value and the 8-bit dtype of their data. */
static int check_q(const kn_opdesc *d, const kn_tensor *const *in, const int *req, const int *scales,
                   const int *zps, const int *zp_of)
{
    for (int k = 0; req[k] >= 0; k++)
        if (!kn_op_input(d, in, req[k])) return kn_op_error(d, KN_ERR_INVALID, "input %d is missing", req[k]);
    for (int k = 0; scales[k] >= 0; k++) {
        const kn_tensor *s = kn_op_input(d, in, scales[k]);
        if (s && (s->dtype != KN_F32 || kn_tensor_numel(s) != 1))
            return kn_op_error(d, KN_ERR_UNSUPPORTED, "input %d (a scale) must be one f32 value", scales[k]);
    }
    for (int k = 0; zps[k] >= 0; k++) {
        const kn_tensor *z = kn_op_input(d, in, zps[k]);
        const kn_tensor *x = zp_of[k] >= 0 ? kn_op_input(d, in, zp_of[k]) : NULL;
        if (!z) continue;
        if (kn_tensor_numel(z) != 1 || !q8(z->dtype) || (x && x->dtype != z->dtype))
            return kn_op_error(d, KN_ERR_UNSUPPORTED, "input %d (a zero point) must be one u8 or s8 value of its "
                               "data's dtype", zps[k]);
    }
    return KN_OK;
}

/* ---- QLinearAdd, QLinearMul --------------------------------------------------------- */

static int exec_qlinear_binary(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out, bool mul)
{
    static const int req[] = {0, 1, 3, 4, 6, -1}, sc[] = {1, 4, 6, -1}, zp[] = {2, 5, 7, -1}, zof[] = {0, 3, 0};
    int st = check_q(d, in, req, sc, zp, zof);
    if (st) return st;
    const kn_tensor *a = in[0], *b = in[3], *az = kn_op_input(d, in, 2), *bz = kn_op_input(d, in, 5),
                    *cz = kn_op_input(d, in, 7);
    if (!q8(a->dtype) || a->dtype != b->dtype)
        return kn_op_error(d, KN_ERR_INVALID, "A and B have dtypes %s and %s; expected one 8-bit type",
                           kn_dtype_name(a->dtype), kn_dtype_name(b->dtype));
    int r;
    int64_t dims[KN_MAX_RANK], sa[KN_MAX_RANK], sb[KN_MAX_RANK];
    if (kn_broadcast_shape(a->rank, a->dims, b->rank, b->dims, &r, dims)) return kn_op_fail(d, KN_ERR_INVALID);
    if ((st = kn_tensor_alloc(&out[0], a->dtype, r, dims))) return kn_op_fail(d, st);
    kn_broadcast_strides(a->rank, a->dims, r, dims, sa);
    kn_broadcast_strides(b->rank, b->dims, r, dims, sb);
    float as = par_f(in[1], 0), bs = par_f(in[4], 0), cs = par_f(in[6], 0);
    int64_t za = par_i(az, 0), zb = par_i(bz, 0), zc = par_i(cz, 0);
    /* MLAS: the multipliers in float32, the sum (or product) in float */
    float ra = as / cs, rb = bs / cs, rab = as * bs / cs;
    int64_t n = kn_tensor_numel(&out[0]);
    kn_index it;
    kn_index_init(&it, r, dims);
    for (int64_t e = 0; e < n; e++, kn_index_next(&it)) {
        int64_t x = ld_i(a, kn_index_offset(&it, sa)) - za, y = ld_i(b, kn_index_offset(&it, sb)) - zb;
        float v = mul ? (float)(x * y) * rab : (float)x * ra + (float)y * rb;
        kn_store_i64(a->dtype, out[0].data, (size_t)e, requant(v, zc, a->dtype));
    }
    return KN_OK;
}

static int exec_qlinear_add(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_qlinear_binary(d, in, out, false);
}

static int exec_qlinear_mul(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_qlinear_binary(d, in, out, true);
}

/* ---- QLinearConcat ---------------------------------------------------------------- */

/* Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per tensor. */
static int exec_qlinear_concat(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    int nt = (d->n_inputs - 2) / 3;
    if (d->n_inputs < 5 || (d->n_inputs - 2) % 3)
        return kn_op_error(d, KN_ERR_INVALID, "%d inputs; expected Y_scale, Y_zero_point and triples "
                           "(X, X_scale, X_zero_point)", d->n_inputs);
    const kn_tensor *ys = kn_op_input(d, in, 0), *yz = kn_op_input(d, in, 1), *x0 = kn_op_input(d, in, 2);
    if (!ys || !yz || !x0) return kn_op_error(d, KN_ERR_INVALID, "Y_scale, Y_zero_point or X0 is missing");
    kn_dtype dt = yz->dtype;
    if (!q8(dt) || ys->dtype != KN_F32 || kn_tensor_numel(ys) != 1 || kn_tensor_numel(yz) != 1)
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "Y_scale/Y_zero_point must be one f32 and one 8-bit value");
    int64_t axis = kn_op_attr_int(d, "axis", 0);
    if (axis < 0) axis += x0->rank;
    if (axis < 0 || axis >= x0->rank)
        return kn_op_error(d, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                           (long long)kn_op_attr_int(d, "axis", 0), x0->rank);
    int64_t dims[KN_MAX_RANK];
    memcpy(dims, x0->dims, sizeof(int64_t) * (size_t)x0->rank);
    dims[axis] = 0;
    for (int t = 0; t < nt; t++) {
        const kn_tensor *x = kn_op_input(d, in, 2 + 3 * t), *s = kn_op_input(d, in, 3 + 3 * t),
                        *z = kn_op_input(d, in, 4 + 3 * t);
        if (!x || !s) return kn_op_error(d, KN_ERR_INVALID, "tensor %d or its scale is missing", t);
        if (x->dtype != dt || x->rank != x0->rank || s->dtype != KN_F32 || kn_tensor_numel(s) != 1 ||
            (z && (z->dtype != dt || kn_tensor_numel(z) != 1)))
            return kn_op_error(d, KN_ERR_INVALID, "tensor %d: dtype, rank or quantization parameters differ from "
                               "Y's", t);
        for (int i = 0; i < x->rank; i++)
            if (i != axis && x->dims[i] != x0->dims[i])
                return kn_op_error(d, KN_ERR_INVALID, "tensor %d: dim %d is %lld, not %lld", t, i,
                                   (long long)x->dims[i], (long long)x0->dims[i]);
        dims[axis] += x->dims[axis];
    }
    int st = kn_tensor_alloc(&out[0], dt, x0->rank, dims);
    if (st) return kn_op_fail(d, st);
    int64_t outer = kn_shape_numel((int)axis, dims), inner = kn_shape_numel(x0->rank - (int)axis - 1, dims + axis + 1);
    float ysc = par_f(ys, 0);
    int64_t yzp = par_i(yz, 0), off = 0;
    for (int t = 0; t < nt; t++) {
        const kn_tensor *x = in[2 + 3 * t], *z = kn_op_input(d, in, 4 + 3 * t);
        float xs = par_f(in[3 + 3 * t], 0);
        int64_t xz = par_i(z, 0), span = x->dims[axis] * inner;
        bool same = xs == ysc && xz == yzp; /* onnxruntime copies these */
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < span; k++) {
                int64_t v = ld_i(x, o * span + k);
                if (!same) v = requant((float)(v - xz) * xs / ysc, yzp, dt);
                kn_store_i64(dt, out[0].data, (size_t)(o * dims[axis] * inner + off + k), v);
            }
        off += span;
    }
    return KN_OK;
}

/* ---- QLinearGlobalAveragePool ------------------------------------------------------- */

static int exec_qlinear_gap(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    static const int req[] = {0, 1, 3, -1}, sc[] = {1, 3, -1}, zp[] = {2, 4, -1}, zof[] = {0, 0, -1};
    int st = check_q(d, in, req, sc, zp, zof);
    if (st) return st;
    const kn_tensor *x = in[0];
    bool last = kn_op_attr_int(d, "channels_last", 0) != 0;
    if (!q8(x->dtype) || x->rank < 3)
        return kn_op_error(d, KN_ERR_INVALID, "X must be 8-bit of rank >= 3 (got %s, rank %d)",
                           kn_dtype_name(x->dtype), x->rank);
    int64_t dims[KN_MAX_RANK];
    for (int i = 0; i < x->rank; i++) dims[i] = 1;
    int cax = last ? x->rank - 1 : 1;
    dims[0] = x->dims[0];
    dims[cax] = x->dims[cax];
    if ((st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims))) return kn_op_fail(d, st);
    int64_t N = x->dims[0], C = x->dims[cax], NC = N * C, S = NC ? kn_tensor_numel(x) / NC : 0;
    int64_t xz = par_i(kn_op_input(d, in, 2), 0), yz = par_i(kn_op_input(d, in, 4), 0);
    /* MLAS requantizes (sum - x_zp * S) by x_scale / (y_scale * S) */
    float scale = par_f(in[1], 0) / (par_f(in[3], 0) * (float)S);
    for (int64_t b = 0; b < N; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t sum = 0;
            for (int64_t s = 0; s < S; s++)
                sum += ld_i(x, last ? (b * S + s) * C + c : (b * C + c) * S + s);
            kn_store_i64(x->dtype, out[0].data, (size_t)(b * C + c), requant((float)(sum - xz * S) * scale, yz,
                                                                               x->dtype));
        }
    return KN_OK;
}

/* ---- QLinearSigmoid, QLinearLeakyRelu ---------------------------------------------- */

static int exec_qlinear_lut(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out, bool sigmoid)
{
    static const int req[] = {0, 1, 3, -1}, sc[] = {1, 3, -1}, zp[] = {2, 4, -1}, zof[] = {0, 0, -1};
    int st = check_q(d, in, req, sc, zp, zof);
    if (st) return st;
    const kn_tensor *x = in[0];
    if (!q8(x->dtype)) return kn_op_error(d, KN_ERR_INVALID, "X has dtype %s; expected u8 or s8", kn_dtype_name(x->dtype));
    if ((st = kn_tensor_alloc(&out[0], x->dtype, x->rank, x->dims))) return kn_op_fail(d, st);
    float xs = par_f(in[1], 0), ys = par_f(in[3], 0), alpha = kn_op_attr_float(d, "alpha", 0.01f);
    int64_t xz = par_i(kn_op_input(d, in, 2), 0), yz = par_i(kn_op_input(d, in, 4), 0);
    /* the table onnxruntime builds: one entry per 8-bit value */
    int64_t table[256];
    for (int q = 0; q < 256; q++) {
        int64_t xv = x->dtype == KN_U8 ? q : q - 128;
        float v = (float)(xv - xz) * xs;
        v = sigmoid ? 1.0f / (1.0f + expf(-v)) : v >= 0 ? v : v * alpha;
        table[q] = requant(v / ys, yz, x->dtype);
    }
    int64_t n = kn_tensor_numel(x);
    for (int64_t e = 0; e < n; e++) {
        int64_t v = ld_i(x, e);
        kn_store_i64(x->dtype, out[0].data, (size_t)e, table[x->dtype == KN_U8 ? v : v + 128]);
    }
    return KN_OK;
}

static int exec_qlinear_sigmoid(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_qlinear_lut(d, in, out, true);
}

static int exec_qlinear_leaky_relu(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_qlinear_lut(d, in, out, false);
}

/* ---- QGemm ----------------------------------------------------------------------- */

/* Y = alpha * a_scale * b_scale[n] * ((A - a_zp)(B - b_zp[n]) + C), C int32
 * broadcast to [M, N]; quantized with y_scale / y_zero_point when given,
 * else f32. */
static int exec_qgemm(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    static const int req[] = {0, 1, 3, 4, -1}, sc[] = {1, 7, -1}, zp[] = {2, 8, -1}, zof[] = {0, -1, -1};
    int st = check_q(d, in, req, sc, zp, zof);
    if (st) return st;
    const kn_tensor *a = in[0], *b = in[3], *bs = in[4], *bz = kn_op_input(d, in, 5), *c = kn_op_input(d, in, 6),
                    *ys = kn_op_input(d, in, 7), *yz = kn_op_input(d, in, 8);
    bool ta = kn_op_attr_int(d, "transA", 0) != 0, tb = kn_op_attr_int(d, "transB", 0) != 0;
    float alpha = kn_op_attr_float(d, "alpha", 1.0f);
    if (a->rank != 2 || b->rank != 2 || !q8(a->dtype) || !q8(b->dtype))
        return kn_op_error(d, KN_ERR_INVALID, "A and B must be 2-D 8-bit matrices");
    int64_t M = a->dims[ta], K = a->dims[!ta], N = b->dims[!tb];
    if (b->dims[tb] != K)
        return kn_op_error(d, KN_ERR_INVALID, "inner dims differ: %lld and %lld", (long long)K, (long long)b->dims[tb]);
    if ((kn_tensor_numel(bs) != 1 && kn_tensor_numel(bs) != N) || (bz && kn_tensor_numel(bz) != 1 && kn_tensor_numel(bz) != N))
        return kn_op_error(d, KN_ERR_INVALID, "b_scale and b_zero_point must have 1 or N=%lld values", (long long)N);
    int64_t cs[2] = {0, 0};
    if (c) {
        if (c->dtype != KN_I32 || c->rank > 2) return kn_op_error(d, KN_ERR_INVALID, "C must be int32 of rank <= 2");
        int64_t od[2] = {M, N};
        int rr;
        int64_t bd[KN_MAX_RANK];
        if (kn_broadcast_shape(c->rank, c->dims, 2, od, &rr, bd) || rr != 2 || bd[0] != M || bd[1] != N)
            return kn_op_error(d, KN_ERR_INVALID, "C does not broadcast to [%lld, %lld]", (long long)M, (long long)N);
        kn_broadcast_strides(c->rank, c->dims, 2, od, cs);
    }
    kn_dtype dt = ys ? (yz ? yz->dtype : a->dtype) : KN_F32;
    int64_t dims[2] = {M, N};
    if ((st = kn_tensor_alloc(&out[0], dt, 2, dims))) return kn_op_fail(d, st);
    float as = par_f(in[1], 0), ysc = ys ? par_f(ys, 0) : 1.0f;
    int64_t az = par_i(kn_op_input(d, in, 2), 0), yzp = par_i(yz, 0);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            int64_t acc = 0, zb = par_i(bz, j);
            for (int64_t k = 0; k < K; k++)
                acc += (ld_i(a, ta ? k * M + i : i * K + k) - az) * (ld_i(b, tb ? j * K + k : k * N + j) - zb);
            if (c) acc += ld_i(c, i * cs[0] + j * cs[1]);
            acc = (int32_t)(uint32_t)(uint64_t)acc; /* an int32 accumulator */
            float mult = alpha * as * par_f(bs, j);
            if (ys) kn_store_i64(dt, out[0].data, (size_t)(i * N + j), requant((float)acc * (mult / ysc), yzp, dt));
            else ((float *)out[0].data)[i * N + j] = (float)acc * mult;
        }
    return KN_OK;
}

/* ---- MatMulIntegerToFloat, DynamicQuantizeMatMul ------------------------------------ */

/* y = (A - a_zp) @ (B - b_zp) * a_scale * b_scale[n] + bias[n]; a_scale
 * one value, b_scale and b_zp 1 or N values. */
static int int_matmul_to_float(const kn_opdesc *d, const kn_tensor *a, const kn_tensor *b, float as,
                               const kn_tensor *az, const kn_tensor *bs, const kn_tensor *bz, const kn_tensor *bias,
                               kn_tensor *out)
{
    if (!q8(a->dtype) || !q8(b->dtype)) return kn_op_error(d, KN_ERR_INVALID, "A and B must be 8-bit");
    int r;
    int64_t dims[KN_MAX_RANK];
    int st = kn_k_matmul_shape(a->rank, a->dims, b->rank, b->dims, &r, dims);
    if (st) return kn_op_fail(d, st);
    int64_t N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    if ((kn_tensor_numel(bs) != 1 && kn_tensor_numel(bs) != N) || (bz && kn_tensor_numel(bz) != 1 && kn_tensor_numel(bz) != N) ||
        (bias && (bias->dtype != KN_F32 || kn_tensor_numel(bias) != N)))
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "b_scale, b_zero_point and bias must have 1 (bias: N=%lld) values "
                           "or one per column", (long long)N);
    if (b->rank > 2 && (kn_tensor_numel(bs) != 1 || (bz && kn_tensor_numel(bz) != 1)))
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "per-column parameters with a batched B");
    kn_tensor acc = {0};
    if ((st = kn_tensor_alloc(&acc, KN_I32, r, dims))) return kn_op_fail(d, st);
    st = kn_k_matmul_integer(a, b, az, bz, &acc);
    if (!st) st = kn_tensor_alloc(out, KN_F32, r, dims);
    if (!st) {
        int64_t n = kn_tensor_numel(&acc);
        const int32_t *s = acc.data;
        float *y = out->data;
        for (int64_t e = 0; e < n; e++) {
            int64_t j = e % (N ? N : 1);
            y[e] = (float)s[e] * (as * par_f(bs, j)) + (bias ? ((const float *)bias->data)[j] : 0.0f);
        }
    }
    kn_tensor_free(&acc);
    return st ? kn_op_fail(d, st) : KN_OK;
}

/* Inputs A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?. */
static int exec_matmul_integer_to_float(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    for (int i = 0; i < 4; i++)
        if (!kn_op_input(d, in, i)) return kn_op_error(d, KN_ERR_INVALID, "input %d is missing", i);
    if (kn_tensor_numel(in[2]) != 1 || in[2]->dtype != KN_F32)
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "a_scale must be one f32 value");
    const kn_tensor *az = kn_op_input(d, in, 4);
    if (az && kn_tensor_numel(az) != 1) return kn_op_error(d, KN_ERR_UNSUPPORTED, "a_zero_point must be one value");
    return int_matmul_to_float(d, in[0], in[1], par_f(in[2], 0), az, in[3], kn_op_input(d, in, 5),
                               kn_op_input(d, in, 6), &out[0]);
}

/* x quantized as DynamicQuantizeLinear does: u8, per tensor. */
static int dyn_quant(const kn_tensor *x, kn_tensor *xq, kn_tensor *xs, kn_tensor *xz)
{
    int st = kn_tensor_alloc(xq, KN_U8, x->rank, x->dims);
    if (!st) st = kn_tensor_alloc(xs, KN_F32, 0, NULL);
    if (!st) st = kn_tensor_alloc(xz, KN_U8, 0, NULL);
    if (!st) st = kn_k_dynamic_quantize(x, xq, xs, xz);
    return st;
}

/* Inputs A (f32), B, b_scale, b_zero_point?, bias?. */
static int exec_dynamic_quantize_matmul(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    for (int i = 0; i < 3; i++)
        if (!kn_op_input(d, in, i)) return kn_op_error(d, KN_ERR_INVALID, "input %d is missing", i);
    if (in[0]->dtype != KN_F32) return kn_op_error(d, KN_ERR_INVALID, "A has dtype %s; expected f32", kn_dtype_name(in[0]->dtype));
    kn_tensor q[3] = {{0}};
    int st = dyn_quant(in[0], &q[0], &q[1], &q[2]);
    if (st) st = kn_op_fail(d, st);
    else st = int_matmul_to_float(d, &q[0], in[1], par_f(&q[1], 0), &q[2], in[2], kn_op_input(d, in, 3),
                                  kn_op_input(d, in, 4), &out[0]);
    for (int i = 0; i < 3; i++) kn_tensor_free(&q[i]);
    return st;
}

/* ---- DynamicQuantizeLSTM ------------------------------------------------------------ */

/* out[rows, 4H] (+)= quant(x[rows, K]) @ (w[K, 4H] - wz) * xs * ws[col], x
 * quantized at run time per call as onnxruntime's quantized LSTM gemm does. */
static int lstm_qgemm(const float *x, int64_t rows, int64_t K, const kn_tensor *w, int64_t dir, const kn_tensor *ws,
                      const kn_tensor *wz, int64_t cols, bool accumulate, float *out)
{
    kn_tensor xt = {.dtype = KN_F32, .rank = 2, .dims = {rows, K}, .data = (void *)x,
                  .nbytes = sizeof(float) * (size_t)(rows * K)};
    kn_tensor q[3] = {{0}};
    int st = dyn_quant(&xt, &q[0], &q[1], &q[2]);
    if (st) goto done;
    float xs = par_f(&q[1], 0);
    int64_t xz = par_i(&q[2], 0), nws = kn_tensor_numel(ws), nwz = wz ? kn_tensor_numel(wz) : 0;
    const uint8_t *xq = q[0].data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t zc = !wz ? 0 : ld_i(wz, nwz == 1 ? 0 : nwz == cols ? c : dir * cols + c), acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += ((int64_t)xq[r * K + k] - xz) * (ld_i(w, (dir * K + k) * cols + c) - zc);
            float s = xs * (float)kn_load_f64(ws->dtype, ws->data, (size_t)(nws == 1 ? 0 : nws == cols ? c : dir * cols + c));
            float v = (float)acc * s;
            out[r * cols + c] = accumulate ? out[r * cols + c] + v : v;
        }
done:
    for (int i = 0; i < 3; i++) kn_tensor_free(&q[i]);
    return st;
}

static float sigm(float v) { return 1.0f / (1.0f + expf(-v)); }

/* Inputs X, W [dirs, in, 4H], R [dirs, H, 4H], B?, sequence_lens?,
 * initial_h?, initial_c?, P?, W_scale, W_zero_point, R_scale,
 * R_zero_point; outputs Y, Y_h, Y_c. Default activations only. */
static int exec_dynamic_quantize_lstm(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    static const int req[] = {0, 1, 2, 8, 10};
    for (int k = 0; k < 5; k++)
        if (!kn_op_input(d, in, req[k])) return kn_op_error(d, KN_ERR_INVALID, "input %d is missing", req[k]);
    const kn_tensor *X = in[0], *W = in[1], *R = in[2], *B = kn_op_input(d, in, 3), *SL = kn_op_input(d, in, 4),
                    *H0 = kn_op_input(d, in, 5), *C0 = kn_op_input(d, in, 6), *P = kn_op_input(d, in, 7);
    const kn_tensor *Ws = in[8], *Wz = kn_op_input(d, in, 9), *Rs = in[10], *Rz = kn_op_input(d, in, 11);
    int64_t H = kn_op_attr_int(d, "hidden_size", 0);
    const char *dir = kn_op_attr_string(d, "direction", "forward");
    int64_t dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    bool reverse = !strcmp(dir, "reverse");
    if (strcmp(dir, "forward") && strcmp(dir, "reverse") && dirs != 2)
        return kn_op_error(d, KN_ERR_INVALID, "direction '%s'", dir);
    if (kn_op_attr(d, "activations") || kn_op_attr_int(d, "input_forget", 0))
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "activations or input_forget other than the defaults");
    float clip = kn_op_attr_float(d, "clip", 0.0f);
    if (X->dtype != KN_F32 || X->rank != 3 || W->rank != 3 || R->rank != 3 || !q8(W->dtype) || !q8(R->dtype))
        return kn_op_error(d, KN_ERR_INVALID, "X must be f32 [seq, batch, input], W and R 8-bit of rank 3");
    int64_t S = X->dims[0], NB = X->dims[1], I = X->dims[2];
    if (H <= 0) H = R->dims[1];
    int64_t G = 4 * H;
    if (W->dims[0] != dirs || W->dims[1] != I || W->dims[2] != G || R->dims[0] != dirs || R->dims[1] != H ||
        R->dims[2] != G)
        return kn_op_error(d, KN_ERR_INVALID, "W must be [%lld, %lld, %lld] and R [%lld, %lld, %lld]", (long long)dirs,
                           (long long)I, (long long)G, (long long)dirs, (long long)H, (long long)G);
    if ((B && (B->dtype != KN_F32 || kn_tensor_numel(B) != dirs * 2 * G)) ||
        (H0 && (H0->dtype != KN_F32 || kn_tensor_numel(H0) != dirs * NB * H)) ||
        (C0 && (C0->dtype != KN_F32 || kn_tensor_numel(C0) != dirs * NB * H)) ||
        (P && (P->dtype != KN_F32 || kn_tensor_numel(P) != dirs * 3 * H)))
        return kn_op_error(d, KN_ERR_INVALID, "B, initial_h, initial_c or P has the wrong size or dtype");
    for (int64_t i = 0; SL && i < kn_tensor_numel(SL); i++)
        if (ld_i(SL, i) != S) return kn_op_error(d, KN_ERR_UNSUPPORTED, "sequence_lens shorter than the sequence");
    int64_t yd[4] = {S, dirs, NB, H}, hd[3] = {dirs, NB, H};
    int st = KN_OK;
    kn_tensor y = {0}, yh = {0}, yc = {0};
    if (!st) st = kn_tensor_alloc(&y, KN_F32, 4, yd);
    if (!st) st = kn_tensor_alloc(&yh, KN_F32, 3, hd);
    if (!st) st = kn_tensor_alloc(&yc, KN_F32, 3, hd);
    float *xg = malloc(sizeof(float) * (size_t)(S * NB * G + NB * G + 2 * NB * H + 1));
    if (!st && !xg) st = kn_error(KN_ERR_NOMEM, "out of memory");
    for (int64_t dd = 0; !st && dd < dirs; dd++) {
        float *g = xg + S * NB * G, *h = g + NB * G, *c = h + NB * H;
        bool rev = reverse || dd == 1;
        /* the input projection of every step at once */
        st = lstm_qgemm(X->data, S * NB, I, W, dd, Ws, Wz, G, false, xg);
        for (int64_t i = 0; i < NB * H; i++) {
            h[i] = H0 ? ((const float *)H0->data)[dd * NB * H + i] : 0.0f;
            c[i] = C0 ? ((const float *)C0->data)[dd * NB * H + i] : 0.0f;
        }
        const float *wb = B ? (const float *)B->data + dd * 2 * G : NULL, *p = P ? (const float *)P->data + dd * 3 * H : NULL;
        for (int64_t step = 0; !st && step < S; step++) {
            int64_t t = rev ? S - 1 - step : step;
            memcpy(g, xg + t * NB * G, sizeof(float) * (size_t)(NB * G));
            st = lstm_qgemm(h, NB, H, R, dd, Rs, Rz, G, true, g);
            for (int64_t b = 0; !st && b < NB; b++)
                for (int64_t j = 0; j < H; j++) {
                    float gi[4];
                    for (int q = 0; q < 4; q++) {
                        float v = g[b * G + q * H + j] + (wb ? wb[q * H + j] + wb[G + q * H + j] : 0.0f);
                        gi[q] = clip > 0 ? fmaxf(-clip, fminf(clip, v)) : v;
                    }
                    float cp = c[b * H + j];
                    /* gate order i, o, f, c; peepholes i, o, f */
                    float ig = sigm(gi[0] + (p ? p[j] * cp : 0.0f)), fg = sigm(gi[2] + (p ? p[2 * H + j] * cp : 0.0f));
                    float cn = fg * cp + ig * tanhf(gi[3]);
                    float og = sigm(gi[1] + (p ? p[H + j] * cn : 0.0f));
                    c[b * H + j] = cn;
                    h[b * H + j] = og * tanhf(cn);
                }
            for (int64_t i = 0; i < NB * H; i++) ((float *)y.data)[(t * dirs + dd) * NB * H + i] = h[i];
        }
        memcpy((float *)yh.data + dd * NB * H, h, sizeof(float) * (size_t)(NB * H));
        memcpy((float *)yc.data + dd * NB * H, c, sizeof(float) * (size_t)(NB * H));
    }
    free(xg);
    kn_tensor *res[3] = {&y, &yh, &yc};
    for (int i = 0; i < 3; i++) {
        if (!st && kn_op_has_output(d, i)) out[i] = *res[i];
        else kn_tensor_free(res[i]);
    }
    return st ? kn_op_fail(d, st) : KN_OK;
}

const kn_exec_impl kn_exec_contrib_q[] = {
    {KN_OP_QLinearAdd, exec_qlinear_add},
    {KN_OP_QLinearMul, exec_qlinear_mul},
    {KN_OP_QLinearConcat, exec_qlinear_concat},
    {KN_OP_QLinearGlobalAveragePool, exec_qlinear_gap},
    {KN_OP_QLinearSigmoid, exec_qlinear_sigmoid},
    {KN_OP_QLinearLeakyRelu, exec_qlinear_leaky_relu},
    {KN_OP_QGemm, exec_qgemm},
    {KN_OP_MatMulIntegerToFloat, exec_matmul_integer_to_float},
    {KN_OP_DynamicQuantizeMatMul, exec_dynamic_quantize_matmul},
    {KN_OP_DynamicQuantizeLSTM, exec_dynamic_quantize_lstm},
    {KN_OP_UNKNOWN, NULL},
};
