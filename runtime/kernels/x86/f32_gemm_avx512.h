/*
 * runtime/kernels/x86/f32_gemm_avx512.h — the AVX-512 register-blocked
 * matrix-product kernel (f32_gemm_8x32_avx512.c) shared by Winograd's
 * products, the 1x1 convolutions and the 1x1 + depthwise pair, and the
 * helpers of its epilogue that those kernels use too (all defined there).
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

#include <stdbool.h>
#include <stdint.h>

#include "kiln/abi.h"

/* Rows and columns of the kernel's block; a panel of B is KN_GEMM512_COLS wide. */
enum { KN_GEMM512_ROWS = 8, KN_GEMM512_MIN_ROWS = 5, KN_GEMM512_COLS = 16 };

/* Rows per row block for `rows` rows: the 5..8 that wastes fewest rows in
 * the last block (7 for ResNet's 49 and 196 Winograd tiles, where 8 wastes
 * 1/8 of the work). */
__attribute__((visibility("hidden"))) int kn_gemm512_row_block(int64_t rows);

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
    /* a residual sum, then such a clamp (ResNet's blocks): in registers too */
    bool sum_clamp;
    float lo, hi;
} kn_gemm512_epi;

/* Sets e->clamp (or, after a first SUM, e->sum_clamp), lo and hi from the
 * post-ops: clamping [lo, hi] to [a, b] gives the interval of the two
 * clamps in a row. */
__attribute__((visibility("hidden"))) void kn_gemm512_clamp(kn_gemm512_epi *e);

/* True if the epilogue applies every one of the n post-ops (at most 4);
 * sum_ok: a residual (SUM) too, for a caller that stores where the
 * residual is. The list of what kn_gemm512_posts implements. */
__attribute__((visibility("hidden"))) bool kn_gemm512_posts_supported(const kn_abi_post *post, int n, bool sum_ok);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define KN_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* exp(x), Cephes' expf as the AVX2 kernels' exp8 (range reduction by ln 2
 * in two parts, a degree-5 polynomial; about 1 ulp): 0 below -87, x
 * clamped to 88 above. The epilogue's Sigmoid and the attention kernels'
 * softmax use it. */
KN_TARGET_AVX512 static inline __attribute__((always_inline)) __m512 kn_exp512(__m512 x)
{
    __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    __m512 y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    /* y * 2^fx: fx is integral and within [-126, 127], so vscalefps gives
     * what the AVX2 kernel builds from the exponent bits */
    return _mm512_maskz_scalef_ps(live, y, fx);
}

/* out[i][..] = the post-ops of e (not its bias) on acc[i][..] for a block
 * of rows x 16 np floats: acc holds 32 floats per row, out has ldo floats
 * between rows, res is the residual at the block's place (ldr floats
 * between rows; NULL without a SUM post-op) and may be out itself. The
 * kernel's epilogue below when e is not a clamp; the depthwise half of the
 * 1x1 + depthwise pair uses it too. Only where the CPU has AVX-512F. */
__attribute__((visibility("hidden"))) void kn_gemm512_posts(const kn_gemm512_epi *e, int rows, int np,
                                                            const float *acc, float *out, int64_t ldo,
                                                            const float *res, int64_t ldr);

/* out[i][0..16 np] = epi(sum_k a[i lda + k] * b[k][..]) for i < rows
 * (1..KN_GEMM512_ROWS): a at `rows` consecutive rows of A, b at np (1 or 2)
 * panels of B `next` floats apart, over the whole K; then the epilogue e
 * (NULL: none) and the store, ldo floats between rows of out. pf: where
 * to prefetch K lines from into L1 while it computes (b itself: nowhere
 * new; see f32_gemm_8x32_avx512.c). Only where the CPU has AVX-512F. */
__attribute__((visibility("hidden"))) void kn_gemm512_rows(int rows, int np, const float *a, int64_t lda,
                                                           const float *b, int64_t next, int64_t K, const float *pf,
                                                           float *out, int64_t ldo, const kn_gemm512_epi *e);

/* kn_gemm512_rows over a part of K: the accumulators start from cin (ldc
 * floats between rows) instead of the bias when cin is not NULL, and only
 * the first npf lines from pf are prefetched (0: none). A caller
 * that cuts K in parts (so that a part of the panels stays in L1 across
 * row blocks) stores the first parts raw (e with only a bias, or NULL)
 * into a block of its own and gives the last the whole epilogue. */
__attribute__((visibility("hidden"))) void kn_gemm512_rows_acc(int rows, int np, const float *a, int64_t lda,
                                                               const float *b, int64_t next, int64_t K,
                                                               const float *pf, int64_t npf, const float *cin,
                                                               int64_t ldc, float *out, int64_t ldo,
                                                               const kn_gemm512_epi *e);

#endif /* x86-64 */
#endif
