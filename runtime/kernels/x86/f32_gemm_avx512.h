/*
 * runtime/kernels/x86/f32_gemm_avx512.h — the AVX-512 register-blocked
 * matrix-product kernel (f32_gemm_8x32_avx512.c) shared by Winograd's
 * products, the 1x1 convolutions and the 1x1 + depthwise pair, and the
 * short inline helpers of its epilogue that those kernels use too.
 *
 * One call computes a block of up to 8 rows by 32 columns (two 16-column
 * panels) of C = A B over the whole K: A row-major (lda floats between
 * rows), B packed as [panel][K][16]. Then an optional epilogue (bias, the
 * post-ops of a fused convolution, the residual) and the store.
 *
 * The helpers compile for AVX-512 whatever the translation unit's flags
 * (KN_TARGET_AVX512), and are called only where the CPU has AVX-512F.
 */
#ifndef KILN_KERNELS_X86_F32_GEMM_AVX512_H
#define KILN_KERNELS_X86_F32_GEMM_AVX512_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "kiln/abi.h"

/* Rows and columns of the kernel's block; a panel of B is KN_GEMM512_COLS wide. */
enum { KN_GEMM512_ROWS = 8, KN_GEMM512_MIN_ROWS = 5, KN_GEMM512_COLS = 16 };

/* Rows per row block for `rows` rows: the 5..8 that wastes fewest rows in
 * the last block (7 for ResNet's 49 and 196 Winograd tiles, where 8 wastes
 * 1/8 of the work). */
static inline int kn_gemm512_row_block(int64_t rows)
{
    int best = KN_GEMM512_ROWS;
    for (int r = KN_GEMM512_ROWS - 1; r >= KN_GEMM512_MIN_ROWS; r--)
        if ((rows + r - 1) / r * r < (rows + best - 1) / best * best) best = r;
    return best;
}

/* What happens to a block between the accumulators and the store: the bias
 * (per column, at this block's columns), then the post-ops in order (SUM:
 * + the residual at the element's place, ldr floats between rows). */
typedef struct kn_gemm512_epi {
    const float *bias;
    const kn_abi_post *post;
    int n_post;
    const float *res;
    int64_t ldr;
    /* the post-ops are a clamp to [lo, hi] (none, ReLU, Clip, or a chain of
     * them; kn_gemm512_clamp): one max and one min per vector instead of a
     * switch per post-op and vector, which costs a product over few input
     * channels a third of its speed */
    bool clamp;
    float lo, hi;
} kn_gemm512_epi;

/* Sets e->clamp, lo and hi from the post-ops: clamping [lo, hi] to [a, b]
 * gives the interval of the two clamps in a row. */
static inline void kn_gemm512_clamp(kn_gemm512_epi *e)
{
    float lo = -INFINITY, hi = INFINITY;
    e->clamp = false;
    for (int i = 0; i < e->n_post; i++) {
        const kn_abi_post *p = &e->post[i];
        float a = p->kind == KN_POST_RELU ? 0.0f : p->alpha, b = p->kind == KN_POST_RELU ? INFINITY : p->beta;
        if (p->kind == KN_POST_NONE) continue;
        if ((p->kind != KN_POST_RELU && p->kind != KN_POST_CLIP) || !(a <= b)) return;
        lo = lo < a ? a : lo > b ? b : lo;
        hi = hi < a ? a : hi > b ? b : hi;
    }
    e->clamp = true, e->lo = lo, e->hi = hi;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define KN_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* erf(x) to about 1e-7: Eigen's rational approximation on [-4, 4] (erf is
 * +-1 to float precision beyond), the generated code's (fast_erff in
 * codegen/cpu/lower_elementwise.c). */
KN_TARGET_AVX512 static inline __m512 kn_gemm512_erf(__m512 x)
{
    static const float a[] = {-2.72614225801306e-10f, 2.77068142495902e-08f, -2.10102402082508e-06f,
                              -5.69250639462346e-05f, -7.34990630326855e-04f, -2.95459980854025e-03f,
                              -1.60960333262415e-02f};
    static const float b[] = {-1.45660718464996e-05f, -2.13374055278905e-04f, -1.68282697438203e-03f,
                              -7.37332916720468e-03f, -1.42647390514189e-02f};
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-4.0f)), _mm512_set1_ps(4.0f));
    __m512 x2 = _mm512_mul_ps(xc, xc), p = _mm512_set1_ps(a[0]), q = _mm512_set1_ps(b[0]);
    for (int i = 1; i < 7; i++) p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(a[i]));
    for (int i = 1; i < 5; i++) q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(b[i]));
    return _mm512_div_ps(_mm512_mul_ps(p, xc), q);
}

/* The post-ops on one vector; res: the residual at its place. */
KN_TARGET_AVX512 static inline __m512 kn_gemm512_posts(const kn_gemm512_epi *e, __m512 x, const float *res)
{
    for (int i = 0; i < e->n_post; i++) {
        const kn_abi_post *p = &e->post[i];
        switch (p->kind) {
        case KN_POST_RELU: x = _mm512_max_ps(x, _mm512_setzero_ps()); break;
        case KN_POST_LEAKY_RELU:
            x = _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), x,
                                   _mm512_set1_ps(p->alpha));
            break;
        case KN_POST_CLIP:
            x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(p->alpha)), _mm512_set1_ps(p->beta));
            break;
        case KN_POST_SUM: x = _mm512_add_ps(x, _mm512_loadu_ps(res)); break;
        case KN_POST_GELU_ERF: /* x/2 (1 + erf(x / sqrt 2)) */
            x = _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)),
                              _mm512_add_ps(_mm512_set1_ps(1.0f),
                                            kn_gemm512_erf(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)))));
            break;
        default: break;
        }
    }
    return x;
}

/* out[i][0..16 np] = epi(sum_k a[i lda + k] * b[k][..]) for i < rows
 * (1..KN_GEMM512_ROWS): a at `rows` consecutive rows of A, b at np (1 or 2)
 * panels of B `next` floats apart, over the whole K; then the epilogue e
 * (NULL: none) and the store, ldo floats between rows of out. pf: where
 * to prefetch K lines from into L1 while it computes (b itself: nowhere
 * new; see f32_gemm_8x32_avx512.c). Only where the CPU has AVX-512F. */
__attribute__((visibility("hidden"))) void kn_gemm512_rows(int rows, int np, const float *a, int64_t lda,
                                                           const float *b, int64_t next, int64_t K, const float *pf,
                                                           float *out, int64_t ldo, const kn_gemm512_epi *e);

#endif /* x86-64 */
#endif
