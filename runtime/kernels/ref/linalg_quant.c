/*
 * Reference kernels for the ONNX quantization ops: QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
 * ConvInteger and QLinearConv. See k_linalg.h.
 *
 * Rounding is half to even (rint under the default rounding mode), as ONNX
 * specifies. Quantized operands are widened to int32 with their zero point
 * already subtracted, so the integer cores never see zero points; sums are
 * kept in int64 and wrapped to int32 at the end (what numpy's int32 does).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_linalg.h"

/* Saturation bounds of a quantized dtype; false if it is not one. */
static bool q_range(kn_dtype dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case KN_U8: *lo = 0, *hi = 255; return true;
    case KN_I8: *lo = -128, *hi = 127; return true;
    case KN_U16: *lo = 0, *hi = 65535; return true;
    case KN_I16: *lo = -32768, *hi = 32767; return true;
    case KN_UINT4: *lo = 0, *hi = 15; return true;
    case KN_INT4: *lo = -8, *hi = 7; return true;
    case KN_I32: *lo = INT32_MIN, *hi = INT32_MAX; return true;
    default: return false;
    }
}

/* round_half_even(v) + zp, saturated to [lo, hi]; NaN quantizes to zp. */
static int64_t q_saturate(double v, int64_t zp, int64_t lo, int64_t hi)
{
    double r = (v != v ? 0.0 : rint(v)) + (double)zp;
    if (r <= (double)lo) return lo;
    if (r >= (double)hi) return hi;
    return (int64_t)r;
}

static bool same_shape(const kn_tensor *a, const kn_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

int kn_k_qparam_layout(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *zp, int axis,
                       int64_t block_size, kn_k_qlayout *out)
{
    char bx[128], bs[128];
    memset(out, 0, sizeof *out);
    int64_t sn = kn_tensor_numel(scale);
    if (zp && kn_tensor_numel(zp) != sn)
        return kn_error(KN_ERR_INVALID, "zero point shape %s does not match scale shape %s",
                        kn_shape_str(zp->rank, zp->dims, bx, sizeof bx),
                        kn_shape_str(scale->rank, scale->dims, bs, sizeof bs));
    if (!kn_dtype_info(scale->dtype)->is_float)
        return kn_error(KN_ERR_INVALID, "scale has dtype %s, expected a float type", kn_dtype_name(scale->dtype));
    if (block_size <= 0 && sn == 1 && scale->rank <= 1) return KN_OK; /* per tensor */
    int a = kn_norm_axis(axis, x->rank);
    if (a < 0) return kn_error(KN_ERR_INVALID, "axis %d is out of range for rank %d", axis, x->rank);
    out->dim = x->dims[a];
    out->inner = kn_shape_numel(x->rank - a - 1, x->dims + a + 1);
    if (block_size > 0) {
        out->kind = 2;
        out->block = block_size;
        out->n_blocks = (out->dim + block_size - 1) / block_size;
        bool ok = scale->rank == x->rank && (!zp || same_shape(zp, scale));
        for (int i = 0; ok && i < x->rank; i++)
            ok = scale->dims[i] == (i == a ? out->n_blocks : x->dims[i]);
        if (!ok)
            return kn_error(KN_ERR_INVALID, "blocked scale shape %s does not fit input %s with block size %lld",
                            kn_shape_str(scale->rank, scale->dims, bs, sizeof bs),
                            kn_shape_str(x->rank, x->dims, bx, sizeof bx), (long long)block_size);
        return KN_OK;
    }
    if (scale->rank != 1 || scale->dims[0] != out->dim)
        return kn_error(KN_ERR_INVALID, "per-axis scale shape %s does not match input %s along axis %d",
                        kn_shape_str(scale->rank, scale->dims, bs, sizeof bs),
                        kn_shape_str(x->rank, x->dims, bx, sizeof bx), a);
    out->kind = 1;
    return KN_OK;
}

/* Index into scale / zero point for element i of x. */
static inline int64_t q_index(const kn_k_qlayout *L, int64_t i)
{
    if (L->kind == 0) return 0;
    int64_t a = (i / L->inner) % L->dim;
    if (L->kind == 1) return a;
    int64_t outer = i / (L->inner * L->dim), in = i % L->inner;
    return (outer * L->n_blocks + a / L->block) * L->inner + in;
}

int kn_k_quantize(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *zp, int axis,
                  int64_t block_size, kn_tensor *y)
{
    int64_t lo, hi;
    if (!q_range(y->dtype, &lo, &hi))
        return kn_error(KN_ERR_UNSUPPORTED, "quantizing to %s is not supported", kn_dtype_name(y->dtype));
    if (zp && zp->dtype != y->dtype)
        return kn_error(KN_ERR_INVALID, "zero point dtype %s differs from output dtype %s",
                        kn_dtype_name(zp->dtype), kn_dtype_name(y->dtype));
    kn_k_qlayout L;
    int st = kn_k_qparam_layout(x, scale, zp, axis, block_size, &L);
    if (st) return st;
    int64_t n = kn_tensor_numel(x);
    if (n != kn_tensor_numel(y)) return kn_error(KN_ERR_INTERNAL, "QuantizeLinear output has the wrong size");
    for (int64_t i = 0; i < n; i++) {
        int64_t q = q_index(&L, i);
        /* Divide in float32 like the ONNX reference, so ties round the same way. */
        float v = (float)kn_load_f64(x->dtype, x->data, (size_t)i) /
                  (float)kn_load_f64(scale->dtype, scale->data, (size_t)q);
        int64_t z = zp ? kn_load_i64(zp->dtype, zp->data, (size_t)q) : 0;
        kn_store_i64(y->dtype, y->data, (size_t)i, q_saturate(v, z, lo, hi));
    }
    return KN_OK;
}

int kn_k_dequantize(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *zp, int axis,
                    int64_t block_size, kn_tensor *y)
{
    int64_t lo, hi;
    if (!q_range(x->dtype, &lo, &hi))
        return kn_error(KN_ERR_UNSUPPORTED, "dequantizing %s is not supported", kn_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return kn_error(KN_ERR_INVALID, "zero point dtype %s differs from input dtype %s",
                        kn_dtype_name(zp->dtype), kn_dtype_name(x->dtype));
    if (!kn_dtype_info(y->dtype)->is_float)
        return kn_error(KN_ERR_INVALID, "DequantizeLinear output must be a float type");
    kn_k_qlayout L;
    int st = kn_k_qparam_layout(x, scale, zp, axis, block_size, &L);
    if (st) return st;
    int64_t n = kn_tensor_numel(x);
    if (n != kn_tensor_numel(y)) return kn_error(KN_ERR_INTERNAL, "DequantizeLinear output has the wrong size");
    for (int64_t i = 0; i < n; i++) {
        int64_t q = q_index(&L, i);
        int64_t z = zp ? kn_load_i64(zp->dtype, zp->data, (size_t)q) : 0;
        float v = (float)(kn_load_i64(x->dtype, x->data, (size_t)i) - z) *
                  (float)kn_load_f64(scale->dtype, scale->data, (size_t)q);
        kn_store_f64(y->dtype, y->data, (size_t)i, v);
    }
    return KN_OK;
}

int kn_k_dynamic_quantize(const kn_tensor *x, kn_tensor *y, kn_tensor *y_scale, kn_tensor *y_zp)
{
    if (x->dtype != KN_F32 || y->dtype != KN_U8 || y_scale->dtype != KN_F32 || y_zp->dtype != KN_U8)
        return kn_error(KN_ERR_INVALID, "DynamicQuantizeLinear needs f32 input (got %s)", kn_dtype_name(x->dtype));
    int64_t n = kn_tensor_numel(x);
    if (n != kn_tensor_numel(y) || kn_tensor_numel(y_scale) != 1 || kn_tensor_numel(y_zp) != 1)
        return kn_error(KN_ERR_INTERNAL, "DynamicQuantizeLinear outputs have the wrong size");
    const float *xs = x->data;
    /* The range always includes 0 so that 0 is exactly representable. */
    float mn = 0.0f, mx = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (xs[i] < mn) mn = xs[i];
        if (xs[i] > mx) mx = xs[i];
    }
    /* An all-zero input gets scale 1 (as onnxruntime does) rather than 0/0. */
    float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
    uint8_t *ys = y->data;
    ((float *)y_scale->data)[0] = scale;
    float zf = 0.0f - mn / scale;
    zf = !(zf >= 0.0f) ? 0.0f : zf > 255.0f ? 255.0f : zf; /* NaN (infinite range) → 0 */
    int64_t zp = (int64_t)rintf(zf);
    ((uint8_t *)y_zp->data)[0] = (uint8_t)zp;
    for (int64_t i = 0; i < n; i++) ys[i] = (uint8_t)q_saturate(xs[i] / scale, zp, 0, 255);
    return KN_OK;
}

/* ---- integer matrix products ------------------------------------------------ */

/* Widens t to int32 and subtracts zp, which is a scalar or one value per
 * (i / div) % mod (a row of A, or a column of B). NULL on bad zp/memory. */
static int32_t *widen(const kn_tensor *t, const kn_tensor *zp, int64_t div, int64_t mod, const char *what)
{
    int64_t n = kn_tensor_numel(t), zn = zp ? kn_tensor_numel(zp) : 0;
    if (zp && zn != 1 && zn != mod) {
        char b[128];
        kn_error(KN_ERR_INVALID, "%s zero point of shape %s must be a scalar or have %lld elements", what,
                 kn_shape_str(zp->rank, zp->dims, b, sizeof b), (long long)mod);
        return NULL;
    }
    if (zp && !kn_dtype_info(zp->dtype)->is_integer) {
        kn_error(KN_ERR_INVALID, "%s zero point has dtype %s", what, kn_dtype_name(zp->dtype));
        return NULL;
    }
    if (!kn_dtype_info(t->dtype)->is_integer || kn_dtype_size(t->dtype) > 2) {
        kn_error(KN_ERR_UNSUPPORTED, "%s has dtype %s, expected an 8- or 16-bit integer", what,
                 kn_dtype_name(t->dtype));
        return NULL;
    }
    int32_t *w = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!w) {
        kn_error(KN_ERR_NOMEM, "out of memory widening %s", what);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t z = !zp ? 0 : kn_load_i64(zp->dtype, zp->data, zn == 1 ? 0 : (size_t)((i / div) % mod));
        w[i] = (int32_t)(kn_load_i64(t->dtype, t->data, (size_t)i) - z);
    }
    return w;
}

/* out (int32, matmul shape of a, b) = A @ B over the widened operands. */
static int imatmul(const kn_tensor *a, const kn_tensor *b, const int32_t *A, const int32_t *B,
                   int32_t *out, int64_t out_numel)
{
    int r;
    int64_t od[KN_MAX_RANK];
    int st = kn_k_matmul_shape(a->rank, a->dims, b->rank, b->dims, &r, od);
    if (st) return st;
    if (kn_shape_numel(r, od) != out_numel) return kn_error(KN_ERR_INTERNAL, "output has the wrong size");
    int64_t M = a->rank >= 2 ? a->dims[a->rank - 2] : 1, K = a->dims[a->rank - 1];
    int64_t N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
    int ba = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
    int nb = r - (a->rank >= 2) - (b->rank >= 2);
    int64_t sa[KN_MAX_RANK], sb[KN_MAX_RANK];
    kn_broadcast_strides(ba, a->dims, nb, od, sa);
    kn_broadcast_strides(bb, b->dims, nb, od, sb);
    int64_t nbatch = kn_shape_numel(nb, od);
    int64_t *acc = malloc(sizeof(int64_t) * (size_t)(N ? N : 1));
    if (!acc) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_index it;
    kn_index_init(&it, nb, od);
    for (int64_t t = 0; t < nbatch; t++, kn_index_next(&it)) {
        const int32_t *Ab = A + kn_index_offset(&it, sa) * M * K, *Bb = B + kn_index_offset(&it, sb) * K * N;
        int32_t *Ob = out + t * M * N;
        for (int64_t i = 0; i < M; i++) {
            memset(acc, 0, sizeof(int64_t) * (size_t)N);
            for (int64_t k = 0; k < K; k++) {
                int64_t av = Ab[i * K + k];
                const int32_t *brow = Bb + k * N;
                for (int64_t j = 0; j < N; j++) acc[j] += av * brow[j];
            }
            for (int64_t j = 0; j < N; j++) Ob[i * N + j] = (int32_t)(uint32_t)(uint64_t)acc[j];
        }
    }
    free(acc);
    return KN_OK;
}

/* Rows (M) and columns (N) of the matrices of a matmul. */
static void mat_mn(const kn_tensor *a, const kn_tensor *b, int64_t *M, int64_t *K, int64_t *N)
{
    *M = a->rank >= 2 ? a->dims[a->rank - 2] : 1;
    *K = a->rank >= 1 ? a->dims[a->rank - 1] : 1;
    *N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
}

int kn_k_matmul_integer(const kn_tensor *a, const kn_tensor *b, const kn_tensor *a_zp,
                        const kn_tensor *b_zp, kn_tensor *out)
{
    if (out->dtype != KN_I32) return kn_error(KN_ERR_INTERNAL, "MatMulInteger output must be i32");
    if (a->rank < 1 || b->rank < 1) return kn_error(KN_ERR_INVALID, "MatMulInteger operands must have rank >= 1");
    int64_t M, K, N;
    mat_mn(a, b, &M, &K, &N);
    int32_t *A = widen(a, a_zp, K ? K : 1, M, "A"), *B = A ? widen(b, b_zp, 1, N, "B") : NULL;
    int st = (A && B) ? imatmul(a, b, A, B, out->data, kn_tensor_numel(out)) : KN_ERR_INVALID;
    free(A);
    free(B);
    return st;
}

/* Reads a per-tensor or per-index (count n) float parameter at index i. */
static float qparam_f(const kn_tensor *t, int64_t i)
{
    return (float)kn_load_f64(t->dtype, t->data, kn_tensor_numel(t) == 1 ? 0 : (size_t)i);
}
static int64_t qparam_i(const kn_tensor *t, int64_t i)
{
    return !t ? 0 : kn_load_i64(t->dtype, t->data, kn_tensor_numel(t) == 1 ? 0 : (size_t)i);
}

/* Checks that a scale / zero point has 1 or n elements. */
static int check_count(const kn_tensor *t, int64_t n, const char *what)
{
    int64_t c = kn_tensor_numel(t);
    if (c == 1 || c == n) return KN_OK;
    return kn_error(KN_ERR_INVALID, "%s has %lld elements, expected 1 or %lld", what, (long long)c, (long long)n);
}

int kn_k_qlinear_matmul(const kn_tensor *a, const kn_tensor *a_scale, const kn_tensor *a_zp,
                        const kn_tensor *b, const kn_tensor *b_scale, const kn_tensor *b_zp,
                        const kn_tensor *y_scale, const kn_tensor *y_zp, kn_tensor *out)
{
    int64_t lo, hi, M, K, N;
    if (!q_range(out->dtype, &lo, &hi) || out->dtype == KN_I32)
        return kn_error(KN_ERR_UNSUPPORTED, "QLinearMatMul output dtype %s", kn_dtype_name(out->dtype));
    if (a->rank < 1 || b->rank < 1) return kn_error(KN_ERR_INVALID, "QLinearMatMul operands must have rank >= 1");
    mat_mn(a, b, &M, &K, &N);
    int st = check_count(a_scale, M, "a_scale");
    if (!st) st = check_count(b_scale, N, "b_scale");
    if (!st) st = check_count(y_scale, N, "y_scale");
    if (!st && y_zp) st = check_count(y_zp, N, "y_zero_point");
    if (st) return st;
    int64_t n = kn_tensor_numel(out);
    int32_t *A = widen(a, a_zp, K ? K : 1, M, "a"), *B = A ? widen(b, b_zp, 1, N, "b") : NULL;
    int32_t *acc = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!A || !B) st = KN_ERR_INVALID;
    else if (!acc) st = kn_error(KN_ERR_NOMEM, "out of memory");
    else st = imatmul(a, b, A, B, acc, n);
    for (int64_t e = 0; !st && e < n; e++) {
        int64_t j = e % N, i = (e / N) % M;
        /* The multiplier is formed in float32 and applied in double, like the ONNX reference. */
        float mult = qparam_f(a_scale, i) * qparam_f(b_scale, j) / qparam_f(y_scale, j);
        kn_store_i64(out->dtype, out->data, (size_t)e,
                     q_saturate((double)acc[e] * (double)mult, qparam_i(y_zp, j), lo, hi));
    }
    free(A);
    free(B);
    free(acc);
    return st;
}

/* ---- integer convolution ------------------------------------------------------ */

int kn_k_conv_out_dims(kn_k_conv_params *p, const int64_t *in, int64_t *out)
{
    for (int d = 0; d < p->nsp; d++) {
        int64_t k = p->kernel[d], s = p->strides[d], dl = p->dilations[d];
        if (k < 1 || s < 1 || dl < 1)
            return kn_error(KN_ERR_INVALID, "kernel %lld, stride %lld and dilation %lld must be >= 1 (axis %d)",
                            (long long)k, (long long)s, (long long)dl, d);
        /* Bounds that keep the window arithmetic below far from int64 overflow. */
        const int64_t big = (int64_t)1 << 31;
        if (k > big || s > big || dl > big || p->pad_begin[d] > big || p->pad_end[d] > big)
            return kn_error(KN_ERR_INVALID, "kernel, stride, dilation or padding too large on spatial axis %d", d);
        int64_t ext = dl * (k - 1) + 1;
        if (p->auto_pad == KN_K_PAD_VALID) p->pad_begin[d] = p->pad_end[d] = 0;
        if (in[d] < 0) {
            out[d] = -1;
            continue;
        }
        if (p->auto_pad == KN_K_PAD_SAME_UPPER || p->auto_pad == KN_K_PAD_SAME_LOWER) {
            out[d] = (in[d] + s - 1) / s;
            int64_t total = (out[d] - 1) * s + ext - in[d];
            if (total < 0) total = 0;
            int64_t small = total / 2;
            p->pad_begin[d] = p->auto_pad == KN_K_PAD_SAME_UPPER ? small : total - small;
            p->pad_end[d] = total - p->pad_begin[d];
            continue;
        }
        if (p->pad_begin[d] < 0 || p->pad_end[d] < 0)
            return kn_error(KN_ERR_INVALID, "negative padding on spatial axis %d", d);
        int64_t span = in[d] + p->pad_begin[d] + p->pad_end[d];
        if (span < ext)
            return kn_error(KN_ERR_INVALID, "kernel extent %lld exceeds padded input %lld on spatial axis %d",
                            (long long)ext, (long long)span, d);
        out[d] = (span - ext) / s + 1;
    }
    return KN_OK;
}

/* Geometry shared by the integer convolution loops. */
typedef struct conv_geo {
    int64_t N, C, M, cg, mg;
    int64_t ipix, opix, kpix;
    int64_t idims[KN_MAX_RANK], odims[KN_MAX_RANK], istr[KN_MAX_RANK];
} conv_geo;

static int conv_geometry(const kn_tensor *x, const kn_tensor *w, const kn_k_conv_params *p,
                         const kn_tensor *out, conv_geo *g)
{
    int nsp = x->rank - 2;
    if (x->rank < 3 || w->rank != x->rank || p->nsp != nsp)
        return kn_error(KN_ERR_INVALID, "input rank %d and weight rank %d do not fit a convolution", x->rank, w->rank);
    g->N = x->dims[0], g->C = x->dims[1], g->M = w->dims[0], g->cg = w->dims[1];
    if (p->group < 1 || g->C != g->cg * p->group || g->M % p->group)
        return kn_error(KN_ERR_INVALID, "%lld input channels, %lld weight channels per group, %lld outputs, group %lld",
                        (long long)g->C, (long long)g->cg, (long long)g->M, (long long)p->group);
    g->mg = g->M / p->group;
    for (int d = 0; d < nsp; d++)
        if (w->dims[2 + d] != p->kernel[d])
            return kn_error(KN_ERR_INVALID, "kernel_shape does not match the weight on spatial axis %d", d);
    memcpy(g->idims, x->dims + 2, sizeof(int64_t) * (size_t)nsp);
    int64_t od[KN_MAX_RANK];
    kn_k_conv_params q = *p;
    int st = kn_k_conv_out_dims(&q, g->idims, od);
    if (st) return st;
    if (out->rank != x->rank || out->dims[0] != g->N || out->dims[1] != g->M)
        return kn_error(KN_ERR_INTERNAL, "convolution output was allocated with the wrong shape");
    for (int d = 0; d < nsp; d++) {
        if (out->dims[2 + d] != od[d]) return kn_error(KN_ERR_INTERNAL, "convolution output has the wrong shape");
        g->odims[d] = od[d];
    }
    kn_shape_strides(nsp, g->idims, g->istr);
    g->ipix = kn_shape_numel(nsp, g->idims);
    g->opix = kn_shape_numel(nsp, g->odims);
    g->kpix = kn_shape_numel(nsp, p->kernel);
    return KN_OK;
}

/* acc[o] += wv * x[o*stride - pad + k*dilation] for one kernel position k,
 * over every output position whose input position is inside the image: the
 * outer output dims are walked with a counter, the last one as one
 * contiguous run whose valid range is computed up front. */
static void conv_accumulate(const conv_geo *g, const kn_k_conv_params *p, const int32_t *xp, int64_t wv,
                            const int64_t *kidx, int64_t *acc)
{
    int last = p->nsp - 1;
    int64_t ow_n = g->odims[last], iw = g->idims[last], s = p->strides[last];
    int64_t shift = kidx[last] * p->dilations[last] - p->pad_begin[last]; /* input col = ow*s + shift */
    int64_t lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
    int64_t hi = iw - 1 - shift < 0 ? 0 : (iw - 1 - shift) / s + 1;
    if (hi > ow_n) hi = ow_n;
    if (lo >= hi) return;
    int64_t rows = g->opix / ow_n, o[KN_MAX_RANK] = {0};
    for (int64_t r = 0; r < rows; r++) {
        int64_t xoff = shift;
        bool inside = true;
        for (int d = 0; d < last && inside; d++) {
            int64_t pos = o[d] * p->strides[d] - p->pad_begin[d] + kidx[d] * p->dilations[d];
            inside = pos >= 0 && pos < g->idims[d];
            xoff += pos * g->istr[d];
        }
        if (inside) {
            int64_t *ar = acc + r * ow_n;
            if (s == 1)
                for (int64_t ow = lo; ow < hi; ow++) ar[ow] += wv * xp[xoff + ow];
            else
                for (int64_t ow = lo; ow < hi; ow++) ar[ow] += wv * xp[xoff + ow * s];
        }
        for (int d = last - 1; d >= 0; d--) {
            if (++o[d] < g->odims[d]) break;
            o[d] = 0;
        }
    }
}

/* acc (one output plane of batch n, channel m) = bias + the convolution. */
static void conv_plane(const conv_geo *g, const kn_k_conv_params *p, const int32_t *X, const int32_t *W,
                       int64_t n, int64_t m, int64_t bias, int64_t *acc)
{
    for (int64_t i = 0; i < g->opix; i++) acc[i] = bias;
    if (g->opix == 0) return;
    int64_t grp = m / g->mg;
    for (int64_t c = 0; c < g->cg; c++) {
        const int32_t *xp = X + (n * g->C + grp * g->cg + c) * g->ipix;
        const int32_t *wr = W + (m * g->cg + c) * g->kpix;
        int64_t kidx[KN_MAX_RANK] = {0};
        for (int64_t kp = 0; kp < g->kpix; kp++) {
            if (wr[kp]) conv_accumulate(g, p, xp, wr[kp], kidx, acc);
            for (int d = p->nsp - 1; d >= 0; d--) {
                if (++kidx[d] < p->kernel[d]) break;
                kidx[d] = 0;
            }
        }
    }
}

/* dst[n, m, o...] (int32, wrapping) = conv of the widened operands + bias[m]. */
static int conv_int_core(const kn_tensor *x, const kn_tensor *w, const kn_tensor *x_zp, const kn_tensor *w_zp,
                         const kn_tensor *bias, const kn_k_conv_params *p, const kn_tensor *out, int32_t *dst)
{
    conv_geo g;
    int st = conv_geometry(x, w, p, out, &g);
    if (st) return st;
    if (x_zp && kn_tensor_numel(x_zp) != 1)
        return kn_error(KN_ERR_UNSUPPORTED, "x zero point must be a scalar (per-tensor)");
    if (bias && (bias->dtype != KN_I32 || kn_tensor_numel(bias) != g.M))
        return kn_error(KN_ERR_INVALID, "bias must be i32 with %lld elements", (long long)g.M);
    int32_t *X = widen(x, x_zp, 1, 1, "x");
    int64_t per_m = g.cg * g.kpix;
    int32_t *W = X ? widen(w, w_zp, per_m > 0 ? per_m : 1, g.M, "w") : NULL;
    int64_t *acc = W ? malloc(sizeof(int64_t) * (size_t)(g.opix ? g.opix : 1)) : NULL;
    if (!acc) {
        st = !X || !W ? KN_ERR_INVALID : kn_error(KN_ERR_NOMEM, "out of memory");
        free(X);
        free(W);
        return st;
    }
    const int32_t *bv = bias ? bias->data : NULL;
    for (int64_t n = 0; n < g.N; n++)
        for (int64_t m = 0; m < g.M; m++) {
            conv_plane(&g, p, X, W, n, m, bv ? bv[m] : 0, acc);
            int32_t *o = dst + (n * g.M + m) * g.opix;
            for (int64_t i = 0; i < g.opix; i++) o[i] = (int32_t)(uint32_t)(uint64_t)acc[i];
        }
    free(X);
    free(W);
    free(acc);
    return KN_OK;
}

int kn_k_conv_integer(const kn_tensor *x, const kn_tensor *w, const kn_tensor *x_zp,
                      const kn_tensor *w_zp, const kn_tensor *bias, const kn_k_conv_params *p,
                      kn_tensor *out)
{
    if (out->dtype != KN_I32) return kn_error(KN_ERR_INTERNAL, "ConvInteger output must be i32");
    return conv_int_core(x, w, x_zp, w_zp, bias, p, out, out->data);
}

int kn_k_qlinear_conv(const kn_tensor *x, const kn_tensor *x_scale, const kn_tensor *x_zp,
                      const kn_tensor *w, const kn_tensor *w_scale, const kn_tensor *w_zp,
                      const kn_tensor *y_scale, const kn_tensor *y_zp, const kn_tensor *bias,
                      const kn_k_conv_params *p, kn_tensor *out)
{
    int64_t lo, hi;
    if (!q_range(out->dtype, &lo, &hi) || out->dtype == KN_I32)
        return kn_error(KN_ERR_UNSUPPORTED, "QLinearConv output dtype %s", kn_dtype_name(out->dtype));
    if (w->rank < 1) return kn_error(KN_ERR_INVALID, "QLinearConv weight must have rank >= 1");
    int64_t M = w->dims[0];
    int st = check_count(x_scale, 1, "x_scale");
    if (!st) st = check_count(w_scale, M, "w_scale");
    if (!st) st = check_count(y_scale, 1, "y_scale");
    if (!st && y_zp) st = check_count(y_zp, 1, "y_zero_point");
    if (st) return st;
    int64_t n = kn_tensor_numel(out);
    int32_t *acc = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!acc) return kn_error(KN_ERR_NOMEM, "out of memory");
    st = conv_int_core(x, w, x_zp, w_zp, bias, p, out, acc);
    int64_t per_m = out->rank >= 2 ? kn_shape_numel(out->rank - 2, out->dims + 2) : 1;
    for (int64_t e = 0; !st && e < n; e++) {
        int64_t m = (e / (per_m ? per_m : 1)) % M;
        float mult = qparam_f(x_scale, 0) * qparam_f(w_scale, m) / qparam_f(y_scale, 0);
        kn_store_i64(out->dtype, out->data, (size_t)e,
                     q_saturate((double)acc[e] * (double)mult, qparam_i(y_zp, 0), lo, hi));
    }
    free(acc);
    return st;
}
