/*
 * runtime/kernels/x86/f32_attention_avx2.c — the compiled Attention path's
 * kernels (runtime/src/attention.h) for AVX2+FMA:
 *   scores   4 query rows x 16 keys per step (8 accumulators), against the
 *            key block transposed (keys contiguous), so each step is two
 *            loads, four broadcasts and eight FMAs;
 *   pack_kt  a block of keys transposed 8 x 8 in registers;
 *   softmax_step  the mask added, the row's maximum, and exp(s - m) 8 lanes at a time (Cephes' expf: range reduction
 *            by ln 2 in two parts, a degree-5 polynomial, about 1 ulp on
 *            [-87, 88]; below -87 the result is 0, so masked keys weigh
 *            nothing);
 *   pv       4 output rows x 16 columns per pass over the block's V rows.
 * Row tails shorter than 8 use masked loads and stores.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention.h"
#include "f32_exp_avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* Lanes 0 .. n-1 (n < 8) set. */
AVX2 INLINE __m256i tail_mask(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AVX2 INLINE __m256 exp8(__m256 x)
{
    return _mm256_and_ps(kn_exp256(x), _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ)); /* 0 below -87 */
}

AVX2 static void scores_avx2(const float *q, int64_t D, const float *kt, int64_t ldk, int64_t n, float *s)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        const float *k = kt + j;
        for (int64_t d = 0; d < D; d++, k += ldk) {
            __m256 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8), b;
            b = _mm256_broadcast_ss(q + d);
            a00 = _mm256_fmadd_ps(b, k0, a00), a01 = _mm256_fmadd_ps(b, k1, a01);
            b = _mm256_broadcast_ss(q + D + d);
            a10 = _mm256_fmadd_ps(b, k0, a10), a11 = _mm256_fmadd_ps(b, k1, a11);
            b = _mm256_broadcast_ss(q + 2 * D + d);
            a20 = _mm256_fmadd_ps(b, k0, a20), a21 = _mm256_fmadd_ps(b, k1, a21);
            b = _mm256_broadcast_ss(q + 3 * D + d);
            a30 = _mm256_fmadd_ps(b, k0, a30), a31 = _mm256_fmadd_ps(b, k1, a31);
        }
        _mm256_storeu_ps(s + j, a00), _mm256_storeu_ps(s + j + 8, a01);
        _mm256_storeu_ps(s + ldk + j, a10), _mm256_storeu_ps(s + ldk + j + 8, a11);
        _mm256_storeu_ps(s + 2 * ldk + j, a20), _mm256_storeu_ps(s + 2 * ldk + j + 8, a21);
        _mm256_storeu_ps(s + 3 * ldk + j, a30), _mm256_storeu_ps(s + 3 * ldk + j + 8, a31);
    }
    if (j < n) { /* n is a multiple of 8: one column of 8 left */
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float *k = kt + j;
        for (int64_t d = 0; d < D; d++, k += ldk) {
            __m256 k0 = _mm256_loadu_ps(k);
            a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(q + d), k0, a0);
            a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(q + D + d), k0, a1);
            a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(q + 2 * D + d), k0, a2);
            a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(q + 3 * D + d), k0, a3);
        }
        _mm256_storeu_ps(s + j, a0), _mm256_storeu_ps(s + ldk + j, a1);
        _mm256_storeu_ps(s + 2 * ldk + j, a2), _mm256_storeu_ps(s + 3 * ldk + j, a3);
    }
}

/* The 8 x 8 block at k (rows ldr apart) transposed into kt (rows ldk apart). */
AVX2 INLINE void transpose8(const float *k, int64_t ldr, float *kt, int64_t ldk)
{
    __m256 r0 = _mm256_loadu_ps(k), r1 = _mm256_loadu_ps(k + ldr), r2 = _mm256_loadu_ps(k + 2 * ldr);
    __m256 r3 = _mm256_loadu_ps(k + 3 * ldr), r4 = _mm256_loadu_ps(k + 4 * ldr), r5 = _mm256_loadu_ps(k + 5 * ldr);
    __m256 r6 = _mm256_loadu_ps(k + 6 * ldr), r7 = _mm256_loadu_ps(k + 7 * ldr);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(kt, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(kt + ldk, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(kt + 2 * ldk, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(kt + 3 * ldk, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(kt + 4 * ldk, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(kt + 5 * ldk, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(kt + 6 * ldk, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(kt + 7 * ldk, _mm256_permute2f128_ps(u3, u7, 0x31));
}

AVX2 static void pack_kt_avx2(const float *k, int64_t ldr, int64_t n, int64_t D, float *kt, int64_t ldk)
{
    int64_t n8 = (n + 7) / 8 * 8, jf = n / 8 * 8, df = D / 8 * 8;
    for (int64_t j = 0; j < jf; j += 8)
        for (int64_t d = 0; d < df; d += 8) transpose8(k + j * ldr + d, ldr, kt + d * ldk + j, ldk);
    for (int64_t d = df; d < D; d++) /* the head size's tail */
        for (int64_t j = 0; j < jf; j++) kt[d * ldk + j] = k[j * ldr + d];
    for (int64_t d = 0; d < D; d++) /* the keys' tail, zero-padded to 8 */
        for (int64_t j = jf; j < n8; j++) kt[d * ldk + j] = j < n ? k[j * ldr + d] : 0.0f;
}

AVX2 INLINE float hmax(__m256 v)
{
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

AVX2 INLINE float hsum(__m256 v)
{
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

AVX2 static float softmax_step_avx2(float *s, const float *add, int64_t n, float *m)
{
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vmax = ninf, vnan = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_loadu_ps(s + j);
        if (add) _mm256_storeu_ps(s + j, x = _mm256_add_ps(x, _mm256_loadu_ps(add + j)));
        vmax = _mm256_max_ps(vmax, x);
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    __m256i mk = tail_mask(n - j);
    if (j < n) {
        __m256 x = _mm256_maskload_ps(s + j, mk);
        if (add) _mm256_maskstore_ps(s + j, mk, x = _mm256_add_ps(x, _mm256_maskload_ps(add + j, mk)));
        x = _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(mk));
        vmax = _mm256_max_ps(vmax, x);
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    }
    if (_mm256_movemask_ps(vnan) || isnan(*m)) return *m = NAN;
    float mx = hmax(vmax);
    mx = *m > mx ? *m : mx;
    if (mx == -INFINITY) {
        memset(s, 0, (size_t)n * sizeof *s);
        return 0;
    }
    __m256 vm = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
    for (j = 0; j + 8 <= n; j += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (j < n) {
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(s + j, mk), vm)), _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(s + j, mk, e);
        acc = _mm256_add_ps(acc, e);
    }
    *m = mx;
    return hsum(acc);
}

/* o[r][e..e+8) += sum_j p[r][j] v[j][e..e+8) for the 4 rows, masked by mk. */
AVX2 INLINE void pv8(const float *p, int64_t ldp, int64_t n, const float *v, int64_t ldv, float *o, int64_t ldo,
                     __m256i mk)
{
    __m256 a0 = _mm256_maskload_ps(o, mk), a1 = _mm256_maskload_ps(o + ldo, mk);
    __m256 a2 = _mm256_maskload_ps(o + 2 * ldo, mk), a3 = _mm256_maskload_ps(o + 3 * ldo, mk);
    for (int64_t j = 0; j < n; j++) {
        __m256 x = _mm256_maskload_ps(v + j * ldv, mk);
        a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), x, a0);
        a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + ldp + j), x, a1);
        a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 2 * ldp + j), x, a2);
        a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + 3 * ldp + j), x, a3);
    }
    _mm256_maskstore_ps(o, mk, a0), _mm256_maskstore_ps(o + ldo, mk, a1);
    _mm256_maskstore_ps(o + 2 * ldo, mk, a2), _mm256_maskstore_ps(o + 3 * ldo, mk, a3);
}

AVX2 static void pv_avx2(const float *p, int64_t ldp, int64_t n, const float *v, int64_t ldv, int64_t dv, float *o,
                         int64_t ldo)
{
    int64_t e = 0;
    for (; e + 16 <= dv; e += 16) {
        float *oe = o + e;
        __m256 a00 = _mm256_loadu_ps(oe), a01 = _mm256_loadu_ps(oe + 8);
        __m256 a10 = _mm256_loadu_ps(oe + ldo), a11 = _mm256_loadu_ps(oe + ldo + 8);
        __m256 a20 = _mm256_loadu_ps(oe + 2 * ldo), a21 = _mm256_loadu_ps(oe + 2 * ldo + 8);
        __m256 a30 = _mm256_loadu_ps(oe + 3 * ldo), a31 = _mm256_loadu_ps(oe + 3 * ldo + 8);
        const float *vr = v + e;
        for (int64_t j = 0; j < n; j++, vr += ldv) {
            __m256 x0 = _mm256_loadu_ps(vr), x1 = _mm256_loadu_ps(vr + 8), b;
            b = _mm256_broadcast_ss(p + j);
            a00 = _mm256_fmadd_ps(b, x0, a00), a01 = _mm256_fmadd_ps(b, x1, a01);
            b = _mm256_broadcast_ss(p + ldp + j);
            a10 = _mm256_fmadd_ps(b, x0, a10), a11 = _mm256_fmadd_ps(b, x1, a11);
            b = _mm256_broadcast_ss(p + 2 * ldp + j);
            a20 = _mm256_fmadd_ps(b, x0, a20), a21 = _mm256_fmadd_ps(b, x1, a21);
            b = _mm256_broadcast_ss(p + 3 * ldp + j);
            a30 = _mm256_fmadd_ps(b, x0, a30), a31 = _mm256_fmadd_ps(b, x1, a31);
        }
        _mm256_storeu_ps(oe, a00), _mm256_storeu_ps(oe + 8, a01);
        _mm256_storeu_ps(oe + ldo, a10), _mm256_storeu_ps(oe + ldo + 8, a11);
        _mm256_storeu_ps(oe + 2 * ldo, a20), _mm256_storeu_ps(oe + 2 * ldo + 8, a21);
        _mm256_storeu_ps(oe + 3 * ldo, a30), _mm256_storeu_ps(oe + 3 * ldo + 8, a31);
    }
    for (; e < dv; e += 8) pv8(p, ldp, n, v + e, ldv, o + e, ldo, tail_mask(dv - e < 8 ? dv - e : 8));
}

AVX2 static void scale_avx2(float *y, const float *x, int64_t n, float a)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
    if (i < n) {
        __m256i mk = tail_mask(n - i);
        _mm256_maskstore_ps(y + i, mk, _mm256_mul_ps(_mm256_maskload_ps(x + i, mk), va));
    }
}

const kn_attn_kern kn_attn_kern_avx2 = {.isa = "avx2",
                                        .impl = "kiln attention:avx2",
                                        .pack_kt = pack_kt_avx2,
                                        .scores = scores_avx2,
                                        .softmax_step = softmax_step_avx2,
                                        .pv = pv_avx2,
                                        .scale = scale_avx2};

#else

const kn_attn_kern kn_attn_kern_avx2 = {.isa = "avx2", .impl = "kiln attention:avx2"};

#endif
