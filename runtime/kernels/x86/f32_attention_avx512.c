/*
 * runtime/kernels/x86/f32_attention_avx512.c — the compiled Attention
 * path's kernels (runtime/src/attention.h) for AVX-512F, the AVX2 ones
 * (f32_attention_avx2.c) at 16 lanes:
 *   scores   4 query rows x 48 keys per step (12 accumulators, enough
 *            independent FMAs to cover their latency on both FMA ports;
 *            the 8 of a 4 x 32 tile leave the ports idle part of the time),
 *            against the key block transposed, so each step is three loads,
 *            four broadcasts and twelve FMAs;
 *   pack_kt  a block of keys transposed 16 x 16 in registers;
 *   softmax_step  the mask added, the row's maximum, and exp(s - m) 16 lanes
 *            at a time (the AVX2 kernel's Cephes expf, the power of two
 *            applied by vscalefps);
 *   pv       4 output rows x 64 columns per pass over the block's V rows
 *            (BERT's and most models' head size in one pass).
 * Every tail (keys, head size, value size) is one masked vector: AVX-512's
 * masks cost nothing on loads and stores, so there are no scalar loops.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attention.h"
#include "attention_avx512.h"
#include "f32_gemm_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* exp(x) for x <= 0 (scores minus their maximum): below -87 the result is
 * 0, so masked keys weigh nothing. */
KN_ATTN512_TARGET KN_ATTN512_INLINE __m512 exp16(__m512 x) { return kn_exp512(x); }

/* s[r][0 .. 16 nv) for the 4 rows: nv vectors of keys, the last masked by
 * mk (loads of masked lanes read nothing, stores leave them). */
KN_ATTN512_TARGET KN_ATTN512_INLINE void scores_tile(const int nv, const float *q, int64_t D, const float *kt, int64_t ldk, float *s,
                               __mmask16 mk)
{
    __m512 acc[4][3];
    KN_ATTN512_UNROLL for (int r = 0; r < 4; r++)
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d++, kt += ldk) {
        __m512 kv[3];
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++)
            kv[c] = c == nv - 1 ? _mm512_maskz_loadu_ps(mk, kt + 16 * c) : _mm512_loadu_ps(kt + 16 * c);
        KN_ATTN512_UNROLL for (int r = 0; r < 4; r++) {
            __m512 b = _mm512_set1_ps(q[r * D + d]);
            KN_ATTN512_UNROLL for (int c = 0; c < nv; c++) acc[r][c] = _mm512_fmadd_ps(b, kv[c], acc[r][c]);
        }
    }
    KN_ATTN512_UNROLL for (int r = 0; r < 4; r++)
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++) {
            if (c == nv - 1) _mm512_mask_storeu_ps(s + r * ldk + 16 * c, mk, acc[r][c]);
            else _mm512_storeu_ps(s + r * ldk + 16 * c, acc[r][c]);
        }
}

KN_ATTN512_TARGET static void scores_avx512(const float *q, int64_t D, const float *kt, int64_t ldk, int64_t n, float *s)
{
    int64_t j = 0;
    for (; j + 48 <= n; j += 48) scores_tile(3, q, D, kt + j, ldk, s + j, 0xFFFF);
    int64_t left = n - j; /* a multiple of 8 below 48 */
    __mmask16 mk = kn_attn512_lanes(left - (left - 1) / 16 * 16);
    if (left > 32) scores_tile(3, q, D, kt + j, ldk, s + j, mk);
    else if (left > 16) scores_tile(2, q, D, kt + j, ldk, s + j, mk);
    else if (left > 0) scores_tile(1, q, D, kt + j, ldk, s + j, mk);
}

/* Rows 0 .. 15 of r (16 lanes each) transposed in place: r[i] lane c
 * becomes r[c] lane i. Three rounds: pairs of rows interleaved, then
 * 4 x 4 blocks within each 128-bit lane, then the 128-bit lanes moved. */
KN_ATTN512_TARGET KN_ATTN512_INLINE void transpose16(__m512 r[16])
{
    __m512 t[16], u[16];
    KN_ATTN512_UNROLL for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* u[4g + c] holds, in 128-bit lane L, column 4L + c of rows 4g .. 4g+3 */
    KN_ATTN512_UNROLL for (int g = 0; g < 16; g += 4) {
        u[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
        u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    KN_ATTN512_UNROLL for (int c = 0; c < 4; c++) {
        __m512 x0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), x1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        __m512 y0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        __m512 y1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_f32x4(x0, y0, 0x88);      /* column c: lane 0 of every u */
        r[4 + c] = _mm512_shuffle_f32x4(x1, y1, 0x88);  /* column 4 + c: lane 1 */
        r[8 + c] = _mm512_shuffle_f32x4(x0, y0, 0xDD);  /* column 8 + c: lane 2 */
        r[12 + c] = _mm512_shuffle_f32x4(x1, y1, 0xDD); /* column 12 + c: lane 3 */
    }
}

KN_ATTN512_TARGET void kn_attn512_transpose16(__m512 r[16])
{
    transpose16(r);
}

/* kt[d ldk + j] = k[j ldr + d] for nd <= 16 head dims and nj <= 16 keys,
 * keys nj .. 15 zero; only the keys in mj are stored (kt's rows end at
 * the block's key count rounded up to 8, which may fall inside these 16). */
KN_ATTN512_TARGET KN_ATTN512_INLINE void pack16(const float *k, int64_t ldr, int nj, int nd, float *kt, int64_t ldk, __mmask16 mj)
{
    __m512 r[16];
    __mmask16 md = kn_attn512_lanes(nd);
    KN_ATTN512_UNROLL for (int i = 0; i < 16; i++) r[i] = i < nj ? _mm512_maskz_loadu_ps(md, k + i * ldr) : _mm512_setzero_ps();
    transpose16(r);
    KN_ATTN512_UNROLL for (int d = 0; d < 16; d++) /* a constant count: r stays in registers */
        if (d < nd) _mm512_mask_storeu_ps(kt + d * ldk, mj, r[d]);
}

KN_ATTN512_TARGET static void pack_kt_avx512(const float *k, int64_t ldr, int64_t n, int64_t D, float *kt, int64_t ldk)
{
    int64_t n8 = (n + 7) / 8 * 8;
    for (int64_t j = 0; j < n8; j += 16) {
        int nj = n - j < 16 ? (int)(n - j) : 16;
        __mmask16 mj = kn_attn512_lanes(n8 - j);
        int64_t d = 0;
        if (nj == 16 && mj == 0xFFFF)
            for (; d + 16 <= D; d += 16) pack16(k + j * ldr + d, ldr, 16, 16, kt + d * ldk + j, ldk, 0xFFFF);
        for (; d < D; d += 16) /* the tails: a short head size, the last keys */
            pack16(k + j * ldr + d, ldr, nj, D - d < 16 ? (int)(D - d) : 16, kt + d * ldk + j, ldk, mj);
    }
}

KN_ATTN512_TARGET float kn_attn_softmax_step_avx512(float *s, const float *add, int64_t n, float *m)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 vmax = ninf;
    __mmask16 nan = 0;
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 mk = kn_attn512_lanes(n - j);
        __m512 x = _mm512_mask_loadu_ps(ninf, mk, s + j); /* masked lanes are -inf: no effect on the max */
        if (add) {
            x = _mm512_add_ps(x, _mm512_mask_loadu_ps(_mm512_setzero_ps(), mk, add + j));
            _mm512_mask_storeu_ps(s + j, mk, x);
        }
        vmax = _mm512_max_ps(vmax, x);
        nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    }
    if (nan || isnan(*m)) return *m = NAN;
    float mx = _mm512_reduce_max_ps(vmax);
    mx = *m > mx ? *m : mx;
    if (mx == -INFINITY) {
        memset(s, 0, (size_t)n * sizeof *s);
        return 0;
    }
    __m512 vm = _mm512_set1_ps(mx), acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 mk = kn_attn512_lanes(n - j);
        /* masked lanes load -inf, so their exp is 0 and adds nothing */
        __m512 e = exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, mk, s + j), vm));
        _mm512_mask_storeu_ps(s + j, mk, e);
        acc = _mm512_add_ps(acc, e);
    }
    *m = mx;
    return _mm512_reduce_add_ps(acc);
}

/* o[r][0 .. 16 nv) += sum_j p[r][j] v[j][0 .. 16 nv) for the 4 rows, the
 * last vector masked by mk. */
KN_ATTN512_TARGET KN_ATTN512_INLINE void pv_tile(const int nv, const float *p, int64_t ldp, int64_t n, const float *v, int64_t ldv,
                           float *o, int64_t ldo, __mmask16 mk)
{
    __m512 acc[4][4];
    KN_ATTN512_UNROLL for (int r = 0; r < 4; r++)
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++)
            acc[r][c] = c == nv - 1 ? _mm512_maskz_loadu_ps(mk, o + r * ldo + 16 * c)
                                    : _mm512_loadu_ps(o + r * ldo + 16 * c);
    for (int64_t j = 0; j < n; j++, v += ldv) {
        __m512 x[4];
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++)
            x[c] = c == nv - 1 ? _mm512_maskz_loadu_ps(mk, v + 16 * c) : _mm512_loadu_ps(v + 16 * c);
        KN_ATTN512_UNROLL for (int r = 0; r < 4; r++) {
            __m512 b = _mm512_set1_ps(p[r * ldp + j]);
            KN_ATTN512_UNROLL for (int c = 0; c < nv; c++) acc[r][c] = _mm512_fmadd_ps(b, x[c], acc[r][c]);
        }
    }
    KN_ATTN512_UNROLL for (int r = 0; r < 4; r++)
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++) {
            if (c == nv - 1) _mm512_mask_storeu_ps(o + r * ldo + 16 * c, mk, acc[r][c]);
            else _mm512_storeu_ps(o + r * ldo + 16 * c, acc[r][c]);
        }
}

KN_ATTN512_TARGET void kn_attn_pv_avx512(const float *p, int64_t ldp, int64_t n, const float *v, int64_t ldv, int64_t dv,
                             float *o, int64_t ldo)
{
    int64_t e = 0;
    for (; e + 64 <= dv; e += 64) pv_tile(4, p, ldp, n, v + e, ldv, o + e, ldo, 0xFFFF);
    int64_t left = dv - e;
    __mmask16 mk = kn_attn512_lanes(left - (left - 1) / 16 * 16);
    if (left > 48) pv_tile(4, p, ldp, n, v + e, ldv, o + e, ldo, mk);
    else if (left > 32) pv_tile(3, p, ldp, n, v + e, ldv, o + e, ldo, mk);
    else if (left > 16) pv_tile(2, p, ldp, n, v + e, ldv, o + e, ldo, mk);
    else if (left > 0) pv_tile(1, p, ldp, n, v + e, ldv, o + e, ldo, mk);
}

KN_ATTN512_TARGET void kn_attn_scale_avx512(float *y, const float *x, int64_t n, float a)
{
    __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 mk = kn_attn512_lanes(n - i);
        _mm512_mask_storeu_ps(y + i, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + i), va));
    }
}

const kn_attn_kern kn_attn_kern_avx512 = {.isa = "avx512",
                                          .impl = "kiln attention:avx512",
                                          .pack_kt = pack_kt_avx512,
                                          .scores = scores_avx512,
                                          .softmax_step = kn_attn_softmax_step_avx512,
                                          .pv = kn_attn_pv_avx512,
                                          .scale = kn_attn_scale_avx512};

#else

const kn_attn_kern kn_attn_kern_avx512 = {.isa = "avx512", .impl = "kiln attention:avx512"};

#endif
