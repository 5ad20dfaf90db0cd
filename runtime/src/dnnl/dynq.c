/*
 * runtime/src/dnnl/dynq.c — the dynamic int8 matmul (kiln::QMatMul with an
 * f32 X, runtime/ops/fused_q.h): before each run the f32 activations are
 * quantized as DynamicQuantizeLinear does (u8 per tensor: the range of the
 * values and 0, scale (max - min) / 255, zero point round(-min / scale)),
 * into the session's buffer. The primitive's output scales are the
 * weights' w_scale[n], fixed, and x_scale multiplies by a binary post-op
 * whose one-element operand is set at every run (run-time output scales
 * per column put oneDNN 2.6 on its int8 gemm:jit, 6.8x slower than the
 * brgemm kernels on BERT-base's projections on an AMX Xeon). The zero point
 * z enters as the bias: scale[n] * sum_k (q - z) W[k, n] = scale[n] *
 * sum_k q W[k, n] - scale[n] * z * colsum[n], scale[n] = x_scale *
 * w_scale[n], with W's column sums computed once (oneDNN's run-time zero
 * point recomputes them at every run: 0.1 ms of 1 ms for a 128x768x768
 * product).
 *
 * Bit for bit the reference kernel's numbers (kn_k_dynamic_quantize): the
 * same float formulas, the range found in parallel chunks whose results are
 * combined in order (min/max do not depend on the order anyway).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "dnnl_int.h"

enum { DYNQ_PIECE = 16384 }; /* floats per parallel unit */

/* The two loops below are worth vectorizing (a 128x768 activation is 98K
 * floats per matmul, BERT-base quantizes 10.6M per run); GCC's -O2 cost
 * model leaves them scalar, and the library's baseline is SSE2: each is
 * also compiled for AVX2 and AVX-512 (target_clones, picked by the loader
 * for this CPU; the same operations in every clone, so the same bits).
 * With SSE2 alone quantizing took 23% of the int8 BERT's time on an AMX
 * Xeon. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define DYNQ_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define DYNQ_VECTORIZE __attribute__((optimize("O3", "no-trapping-math"))) DYNQ_CLONES
#define DYNQ_RANGE_FLAGS __attribute__((optimize("O3", "no-trapping-math", "no-signed-zeros", "finite-math-only"))) DYNQ_CLONES
#elif defined(__GNUC__) && !defined(__clang__)
#define DYNQ_VECTORIZE __attribute__((optimize("O3", "no-trapping-math")))
#define DYNQ_RANGE_FLAGS __attribute__((optimize("O3", "no-trapping-math", "no-signed-zeros", "finite-math-only")))
#else
#define DYNQ_VECTORIZE
#define DYNQ_RANGE_FLAGS
#endif

typedef struct dynq_pass {
    const float *x;
    uint8_t *q;
    int64_t n;
    float *mins, *maxs; /* one per unit */
    float scale;
    float zp;
    bool avx512; /* the CPU (and KILN_CPU_MASK) allows quant_avx512 */
} dynq_pass;

/* The range of x[0..n) and 0 (NaN skipped), vectorized: GCC emits minps/
 * maxps only when told zeros' signs and NaN do not matter, so a NaN result
 * (it may order the operands its own way) is redone by range_exact. */
DYNQ_RANGE_FLAGS static void range_of(const float *x, int64_t n, float *out_min, float *out_max)
{
    float mn = 0.0f, mx = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    *out_min = mn, *out_max = mx;
}

static void range_exact(const float *x, int64_t n, float *out_min, float *out_max)
{
    float mn = 0.0f, mx = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        mn = x[i] < mn ? x[i] : mn;
        mx = x[i] > mx ? x[i] : mx;
    }
    *out_min = mn, *out_max = mx;
}

static int range_chunk(void *args, int64_t lo, int64_t hi)
{
    dynq_pass *d = args;
    for (int64_t u = lo; u < hi; u++) {
        int64_t a = u * DYNQ_PIECE, b = a + DYNQ_PIECE < d->n ? a + DYNQ_PIECE : d->n;
        range_of(d->x + a, b - a, &d->mins[u], &d->maxs[u]);
        if (isnan(d->mins[u]) || isnan(d->maxs[u])) range_exact(d->x + a, b - a, &d->mins[u], &d->maxs[u]);
    }
    return KN_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DYNQ_AVX512 1

/* quant_chunk's loop 16 lanes at a time: the same operations in the same
 * order, so the same bytes (GCC vectorizes the C loop at 256 bits with
 * spills, and the division dominates: 14% of the int8 BERT's time). The
 * tail is the C loop's. */
__attribute__((target("avx512f"))) static int64_t quant_avx512(const float *x, uint8_t *q, int64_t a, int64_t b,
                                                              float scale, float zp)
{
    const __m512 vs = _mm512_set1_ps(scale), vlo = _mm512_set1_ps(-512.0f), vhi = _mm512_set1_ps(512.0f);
    const __m512 magic = _mm512_set1_ps(12582912.0f), vz = _mm512_set1_ps(zp), zero = _mm512_setzero_ps();
    const __m512 top = _mm512_set1_ps(255.0f);
    int64_t i = a;
    for (; i + 16 <= b; i += 16) {
        __m512 r = _mm512_div_ps(_mm512_loadu_ps(x + i), vs);
        r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r); /* NaN → 0 */
        r = _mm512_min_ps(_mm512_max_ps(r, vlo), vhi);
        r = _mm512_add_ps(_mm512_sub_ps(_mm512_add_ps(r, magic), magic), vz);
        r = _mm512_min_ps(_mm512_max_ps(r, zero), top);
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(r)));
    }
    return i;
}
#endif

/* round(x / scale) + zp saturated to u8, NaN → zp: the reference's numbers
 * (a float division, ties to even) without a libm call per element, so the
 * loop vectorizes: clamped to +-512 first, r + 1.5*2^23 - 1.5*2^23 rounds to
 * the nearest even integer in the default rounding mode. */
DYNQ_VECTORIZE static int quant_chunk(void *args, int64_t lo, int64_t hi)
{
    const dynq_pass *d = args;
    int64_t a = lo * DYNQ_PIECE, b = hi * DYNQ_PIECE < d->n ? hi * DYNQ_PIECE : d->n;
    const float *x = d->x, scale = d->scale, zp = d->zp, magic = 12582912.0f;
    uint8_t *q = d->q;
#ifdef DYNQ_AVX512
    if (d->avx512) a = quant_avx512(x, q, a, b, scale, zp);
#endif
    for (int64_t i = a; i < b; i++) {
        float r = x[i] / scale;
        r = r != r ? 0.0f : r;
        r = r < -512.0f ? -512.0f : r > 512.0f ? 512.0f : r;
        r = (r + magic) - magic + zp;
        r = r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r;
        q[i] = (uint8_t)(int32_t)r;
    }
    return KN_OK;
}

int kn_dnnl_dynq_run(kn_dnnl_session *s, kn_dnnl_prim *p, const float *x, int threads, void **out_q)
{
    kn_dnnl_dynq *dq = p->dynq;
    int64_t n = dq->n_src, units = (n + DYNQ_PIECE - 1) / DYNQ_PIECE;
    dynq_pass d = {.x = x, .q = s->act[0], .n = n, .mins = dq->part, .maxs = dq->part + units,
                   .avx512 = dq->avx512};
    int rc = kn_rt_parallel_for_threads(threads, range_chunk, &d, units);
    if (rc) return rc;
    float mn = 0.0f, mx = 0.0f;
    for (int64_t u = 0; u < units; u++) {
        mn = d.mins[u] < mn ? d.mins[u] : mn;
        mx = d.maxs[u] > mx ? d.maxs[u] : mx;
    }
    float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
    float zf = 0.0f - mn / scale;
    zf = !(zf >= 0.0f) ? 0.0f : zf > 255.0f ? 255.0f : zf;
    d.scale = scale;
    d.zp = rintf(zf);
    if ((rc = kn_rt_parallel_for_threads(threads, quant_chunk, &d, units))) return rc;
    dq->x_scale = scale;
    for (int64_t c = 0; c < dq->n_cols; c++) {
        float sc = scale * dq->wscales[dq->n_scale == 1 ? 0 : c];
        dq->bias_run[c] = (dq->bias ? dq->bias[c] : 0.0f) - sc * d.zp * (float)dq->colsum[c];
    }
    *out_q = s->act[0];
    return KN_OK;
}

int kn_dnnl_dynq_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                        dnnl_primitive_attr_t attr, int64_t n_src, int out_dim, const void *wconst,
                        const void *bconst)
{
    const void *ws;
    int st = kn_dnnl_const_ptr(&rec->scale_ref, weights, (int64_t)rec->n_scale * 4, "output scales", &ws);
    if (st) return st;
    if (!wconst || rec->wei.rank != 2 || rec->trans_b)
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN dynamic matmul: constant 2-D [K, N] weights only");
    int64_t K = rec->wei.dims[0], N = rec->wei.dims[1], units = (n_src + DYNQ_PIECE - 1) / DYNQ_PIECE;
    if (rec->n_scale != 1 && rec->n_scale != N)
        return kn_error(KN_ERR_INVALID, "oneDNN record: %d weight scales for %lld columns", rec->n_scale, (long long)N);
    kn_dnnl_dynq *dq = calloc(1, sizeof *dq);
    if (!dq) return kn_error(KN_ERR_NOMEM, "out of memory");
    p->dynq = dq;
    dq->n_src = n_src;
    dq->n_scale = rec->n_scale;
    dq->n_cols = N;
    dq->wscales = ws;
    dq->bias = bconst;
    /* decided with the session, not at every run */
    dq->avx512 = (kn_cpu_features() & KN_CPU_AVX512F) != 0;
    if (!(dq->part = calloc((size_t)(2 * units + 1), sizeof(float))) ||
        !(dq->colsum = calloc((size_t)N, sizeof(int32_t))) || !(dq->bias_run = calloc((size_t)N, sizeof(float))))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int32_t i = 0; i < rec->n_scale; i++)
        if (!isfinite(dq->wscales[i])) return kn_error(KN_ERR_INVALID, "oneDNN record: weight scale %d is not finite", i);
    const int8_t *w = wconst;
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++) dq->colsum[n] += w[k * N + n];
    /* the run's bias replaces the record's: exec binds it (p->bias_const) */
    p->bias_const = dq->bias_run;
    int mask = rec->n_scale == 1 ? 0 : 1 << out_dim;
    KN_DN(dnnl_primitive_attr_set_output_scales(attr, rec->n_scale, mask, ws), "setting the output scales");
    dnnl_dims_t one;
    for (int i = 0; i <= out_dim; i++) one[i] = 1;
    int st2 = kn_dnnl_plain_md(&dq->xs_md, out_dim + 1, one, "describing the activation scale");
    if (st2) return st2;
    KN_DN(dnnl_memory_create(&dq->m_xs, &dq->xs_md, s->engine, &dq->x_scale), "creating the activation scale memory");
    return kn_dnnl_reserve(s, 0, (size_t)n_src);
}

void kn_dnnl_dynq_free(kn_dnnl_dynq *dq)
{
    if (!dq) return;
    if (dq->m_xs) dnnl_memory_destroy(dq->m_xs);
    free(dq->colsum);
    free(dq->bias_run);
    free(dq->part);
    free(dq);
}
