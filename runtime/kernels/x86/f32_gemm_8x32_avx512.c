/*
 * runtime/kernels/x86/f32_gemm_8x32_avx512.c — the AVX-512 register-blocked
 * f32 matrix-product kernel: a block of up to 8 rows by 32 columns (two
 * 16-column panels) of C = A B over the whole K, then the epilogue (bias,
 * post-ops, residual) and the store. Its callers: Winograd's products
 * (f32_winograd_3x3_avx2_avx512.c), the 1x1 convolutions and matmuls
 * (f32_conv1x1_avx512.c) and the expansion of the 1x1 + depthwise pair
 * (f32_expand_dw_avx512.c).
 */
#include <stdbool.h>
#include <stdint.h>

#include "f32_gemm_avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* out[i][0..16 np] = epi(sum_k a[i lda + k] * b[k][..]) for i < R: a at R
 * consecutive rows of A, b at np (1 or 2) panels of B `next` floats apart.
 * Inlined with R and np constant, so that the R x np accumulators stay in
 * registers and only the rows that exist are computed.
 *
 * B may come from memory (at batch 1 each panel serves a few row blocks
 * only), so each call also prefetches K lines from pf into L1: the caller
 * points pf at a panel of the next item while this one computes, and at b
 * otherwise (lines already there). Without it the first row block of each
 * item waits on memory: 2/3 of the kernel's speed on ResNet-50's 14x14
 * Winograd layers at batch 1, against 9/10 with it. */
#define ROW512(i)                                                                                                  \
    do {                                                                                                           \
        if (R > i) {                                                                                               \
            __m512 x_ = _mm512_set1_ps(ak[i * lda]);                                                               \
            c[i][0] = _mm512_fmadd_ps(x_, b0, c[i][0]);                                                            \
            if (np == 2) c[i][1] = _mm512_fmadd_ps(x_, b1, c[i][1]);                                               \
        }                                                                                                          \
    } while (0)
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void gemm512(const int R, const int np, const float *a,
                                                                           int64_t lda, const float *b, int64_t next,
                                                                           int64_t K, const float *pf, float *out,
                                                                           int64_t ldo, const kn_gemm512_epi *e)
{
    /* the accumulators start from the bias: one add less per vector */
    __m512 c[KN_GEMM512_ROWS][2], bias0 = _mm512_setzero_ps(), bias1 = bias0;
    if (e && e->bias) {
        bias0 = _mm512_loadu_ps(e->bias);
        if (np == 2) bias1 = _mm512_loadu_ps(e->bias + KN_GEMM512_COLS);
    }
#pragma GCC unroll 8
    for (int i = 0; i < KN_GEMM512_ROWS; i++) c[i][0] = bias0, c[i][1] = bias1;
    const float *bn = b + next;
    const bool fetch = pf != b;
    for (int64_t k = 0; k < K; k++) {
        const float *ak = a + k;
        if (fetch) _mm_prefetch((const char *)(pf + k * KN_GEMM512_COLS), _MM_HINT_T0);
        __m512 b0 = _mm512_load_ps(b + k * KN_GEMM512_COLS),
               b1 = np == 2 ? _mm512_load_ps(bn + k * KN_GEMM512_COLS) : b0;
        ROW512(0);
        ROW512(1);
        ROW512(2);
        ROW512(3);
        ROW512(4);
        ROW512(5);
        ROW512(6);
        ROW512(7);
    }
    if (e && e->clamp) {
        __m512 lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            c[i][0] = _mm512_min_ps(_mm512_max_ps(c[i][0], lo), hi);
            if (np == 2) c[i][1] = _mm512_min_ps(_mm512_max_ps(c[i][1], lo), hi);
        }
    } else if (e) {
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            const float *res = e->res ? e->res + i * e->ldr : NULL;
            c[i][0] = kn_gemm512_posts(e, c[i][0], res);
            if (np == 2) c[i][1] = kn_gemm512_posts(e, c[i][1], res ? res + KN_GEMM512_COLS : NULL);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        _mm512_storeu_ps(out + i * ldo, c[i][0]);
        if (np == 2) _mm512_storeu_ps(out + i * ldo + KN_GEMM512_COLS, c[i][1]);
    }
}
#undef ROW512

/* gemm512 with rows (1..KN_GEMM512_ROWS) and np made constants. */
KN_TARGET_AVX512 void kn_gemm512_rows(int rows, int np, const float *a, int64_t lda, const float *b, int64_t next,
                                      int64_t K, const float *pf, float *out, int64_t ldo, const kn_gemm512_epi *e)
{
#define CASE(R)                                                                                                    \
    case R:                                                                                                        \
        if (np == 2) gemm512(R, 2, a, lda, b, next, K, pf, out, ldo, e);                                           \
        else gemm512(R, 1, a, lda, b, next, K, pf, out, ldo, e);                                                   \
        break
    switch (rows) {
        CASE(1);
        CASE(2);
        CASE(3);
        CASE(4);
        CASE(5);
        CASE(6);
        CASE(7);
        CASE(8);
    default: break;
    }
#undef CASE
}

#else

void kn_gemm512_rows(int rows, int np, const float *a, int64_t lda, const float *b, int64_t next, int64_t K,
                     const float *pf, float *out, int64_t ldo, const kn_gemm512_epi *e)
{
    (void)rows, (void)np, (void)a, (void)lda, (void)b, (void)next, (void)K, (void)pf, (void)out, (void)ldo, (void)e;
}

#endif
