/*
 * runtime/kernels/x86/bf16_attention_avx512.c — the compiled Attention
 * path's bf16 table (runtime/src/attention.h) for nodes autocast marked
 * (kiln compile --precision bf16|mixed), on AVX-512F + AVX512-BF16:
 *   pack_q   the task's scaled Q rows rounded to bf16 pairs, in place;
 *   pack_kt  a block of keys rounded to bf16 pairs and transposed as
 *            32-bit words (16 x 16, the f32 table's transpose): word
 *            (p, j) holds key j's elements 2p and 2p + 1, the operand
 *            layout of vdpbf16ps;
 *   scores   4 query rows x 48 keys per step as the f32 table's, each
 *            step a pair of head dims: vdpbf16ps multiplies the bf16 pairs
 *            exactly and adds both products to the f32 accumulators, so
 *            a step does twice the f32 kernel's work for the same loads;
 *   softmax_step, pv  the f32 table's (attention_avx512.h): PyTorch's
 *            autocast keeps softmax in f32, and P.V in f32 costs as much
 *            as the scores did before and keeps the weights exact.
 * Rounding is round-to-nearest-even (vcvtne2ps2bf16, which also treats
 * denormal inputs as 0); the rounding of Q after the scale is what a bf16
 * q * scale gives, and exact for the usual power-of-two scales.
 */
#include <stdint.h>

#include "attention.h"
#include "attention_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)

#define AVX512BF16 __attribute__((target("avx512f,avx512bf16,avx2,fma")))

/* The 32 floats at x (lanes past nf zero) as 16 words of bf16 pairs:
 * word w = (x[2w] low, x[2w + 1] high). */
AVX512BF16 KN_ATTN512_INLINE __m512 pairs32(const float *x, int64_t nf)
{
    __m512 lo = _mm512_maskz_loadu_ps(kn_attn512_lanes(nf), x);
    __m512 hi = _mm512_maskz_loadu_ps(kn_attn512_lanes(nf - 16), x + 16);
    /* elements 0..15 of the result come from the second operand */
    return (__m512)_mm512_cvtne2ps_pbh(hi, lo);
}

AVX512BF16 static void pack_q_bf16(float *q, int64_t n, int64_t D)
{
    const int64_t Dp = (D + 1) / 2;
    for (int64_t r = 0; r < n; r++) {
        float *row = q + r * D;
        /* in place and in order: the words of a chunk land at or before
         * the floats it was read from, never on floats still to be read */
        for (int64_t p = 0; p < Dp; p += 16) {
            __m512 w = pairs32(row + 2 * p, D - 2 * p);
            _mm512_mask_storeu_ps(row + p, kn_attn512_lanes(Dp - p), w);
        }
    }
}

AVX512BF16 static void pack_kt_bf16(const float *k, int64_t ldr, int64_t n, int64_t D, float *kt, int64_t ldk)
{
    const int64_t n8 = (n + 7) / 8 * 8, Dp = (D + 1) / 2;
    for (int64_t j = 0; j < n8; j += 16) {
        int64_t nj = n - j < 16 ? n - j : 16;
        __mmask16 mj = kn_attn512_lanes(n8 - j); /* up to the block's end rounded to 8 */
        for (int64_t p = 0; p < Dp; p += 16) {
            __m512 r[16];
            KN_ATTN512_UNROLL for (int i = 0; i < 16; i++)
                r[i] = i < nj ? pairs32(k + (j + i) * ldr + 2 * p, D - 2 * p) : _mm512_setzero_ps();
            kn_attn512_transpose16(r);
            int64_t np = Dp - p < 16 ? Dp - p : 16;
            KN_ATTN512_UNROLL for (int i = 0; i < 16; i++) /* a constant count: r stays in registers */
                if (i < np) _mm512_mask_storeu_ps(kt + (p + i) * ldk + j, mj, r[i]);
        }
    }
}

/* s[r][0 .. 16 nv) for the 4 rows over Dp pairs, the last vector of keys
 * masked by mk. */
AVX512BF16 KN_ATTN512_INLINE void scores_tile(const int nv, const float *q, int64_t D, int64_t Dp, const float *kt,
                                   int64_t ldk, float *s, __mmask16 mk)
{
    __m512 acc[4][3];
    KN_ATTN512_UNROLL for (int r = 0; r < 4; r++)
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t p = 0; p < Dp; p++, kt += ldk) {
        __m512bh kv[3];
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++)
            kv[c] = (__m512bh)(c == nv - 1 ? _mm512_maskz_loadu_ps(mk, kt + 16 * c) : _mm512_loadu_ps(kt + 16 * c));
        KN_ATTN512_UNROLL for (int r = 0; r < 4; r++) {
            /* the row's pair p, its bits broadcast as they are */
            __m512bh b = (__m512bh)_mm512_set1_ps(q[r * D + p]);
            KN_ATTN512_UNROLL for (int c = 0; c < nv; c++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], b, kv[c]);
        }
    }
    KN_ATTN512_UNROLL for (int r = 0; r < 4; r++)
        KN_ATTN512_UNROLL for (int c = 0; c < nv; c++) {
            if (c == nv - 1) _mm512_mask_storeu_ps(s + r * ldk + 16 * c, mk, acc[r][c]);
            else _mm512_storeu_ps(s + r * ldk + 16 * c, acc[r][c]);
        }
}

AVX512BF16 static void scores_bf16(const float *q, int64_t D, const float *kt, int64_t ldk, int64_t n, float *s)
{
    const int64_t Dp = (D + 1) / 2;
    int64_t j = 0;
    for (; j + 48 <= n; j += 48) scores_tile(3, q, D, Dp, kt + j, ldk, s + j, 0xFFFF);
    int64_t left = n - j; /* a multiple of 8 below 48 */
    __mmask16 mk = kn_attn512_lanes(left - (left - 1) / 16 * 16);
    if (left > 32) scores_tile(3, q, D, Dp, kt + j, ldk, s + j, mk);
    else if (left > 16) scores_tile(2, q, D, Dp, kt + j, ldk, s + j, mk);
    else if (left > 0) scores_tile(1, q, D, Dp, kt + j, ldk, s + j, mk);
}

const kn_attn_kern kn_attn_kern_avx512_bf16 = {.isa = "avx512-bf16",
                                               .impl = "kiln attention:avx512-bf16",
                                               .pack_q = pack_q_bf16,
                                               .pack_kt = pack_kt_bf16,
                                               .scores = scores_bf16,
                                               .softmax_step = kn_attn_softmax_step_avx512,
                                               .pv = kn_attn_pv_avx512,
                                               .scale = kn_attn_scale_avx512};

#else

const kn_attn_kern kn_attn_kern_avx512_bf16 = {.isa = "avx512-bf16", .impl = "kiln attention:avx512-bf16"};

#endif
