/*
 * runtime/kernels/x86/f32_gemm_8x32_avx512.c — the AVX-512 register-blocked
 * f32 matrix-product kernel: a block of up to 8 rows by 32 columns (two
 * 16-column panels) of C = A B over the whole K, then the epilogue (bias,
 * post-ops, residual) and the store. Its callers: Winograd's products
 * (f32_winograd_3x3_avx2_avx512.c), the 1x1 convolutions and matmuls
 * (f32_conv1x1_avx512.c) and the expansion of the 1x1 + depthwise pair
 * (f32_expand_dw_avx512.c).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "f32_gemm_avx512.h"

int kn_gemm512_row_block(int64_t rows)
{
    int best = KN_GEMM512_ROWS;
    for (int r = KN_GEMM512_ROWS - 1; r >= KN_GEMM512_MIN_ROWS; r--)
        if ((rows + r - 1) / r * r < (rows + best - 1) / best * best) best = r;
    return best;
}

bool kn_gemm512_posts_supported(const kn_abi_post *post, int n, bool sum_ok)
{
    if (n < 0 || n > 4) return false;
    for (int i = 0; i < n; i++) {
        int k = post[i].kind;
        if (k != KN_POST_NONE && k != KN_POST_RELU && k != KN_POST_LEAKY_RELU && k != KN_POST_CLIP &&
            !(k == KN_POST_SUM && sum_ok) && k != KN_POST_GELU_ERF && k != KN_POST_SIGMOID && k != KN_POST_SWISH &&
            k != KN_POST_HARDSWISH)
            return false;
    }
    return true;
}

void kn_gemm512_clamp(kn_gemm512_epi *e)
{
    float lo = -INFINITY, hi = INFINITY;
    e->clamp = e->sum_clamp = false;
    bool sum = e->n_post > 0 && e->post[0].kind == KN_POST_SUM;
    for (int i = sum; i < e->n_post; i++) {
        const kn_abi_post *p = &e->post[i];
        float a = p->kind == KN_POST_RELU ? 0.0f : p->alpha, b = p->kind == KN_POST_RELU ? INFINITY : p->beta;
        if (p->kind == KN_POST_NONE) continue;
        if ((p->kind != KN_POST_RELU && p->kind != KN_POST_CLIP) || !(a <= b)) return;
        lo = lo < a ? a : lo > b ? b : lo;
        hi = hi < a ? a : hi > b ? b : hi;
    }
    e->clamp = !sum, e->sum_clamp = sum, e->lo = lo, e->hi = hi;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* erf(x) to about 1e-7: Eigen's rational approximation on [-4, 4] (erf is
 * +-1 to float precision beyond), the generated code's (fast_erff in
 * codegen/cpu/lower_elementwise.c). */
KN_TARGET_AVX512 static inline __m512 erf512(__m512 x)
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
KN_TARGET_AVX512 static inline __m512 posts512(const kn_gemm512_epi *e, __m512 x, const float *res)
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
        case KN_POST_HARDSWISH: /* x clip(x / 6 + 1/2, 0, 1) */
            x = _mm512_mul_ps(x, _mm512_min_ps(_mm512_max_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 6.0f),
                                                                             _mm512_set1_ps(0.5f)),
                                                             _mm512_setzero_ps()),
                                               _mm512_set1_ps(1.0f)));
            break;
        case KN_POST_SWISH: /* x / (1 + exp(-x)) */
            x = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), kn_exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
            break;
        case KN_POST_SIGMOID: /* 1 / (1 + exp(-x)) */
            x = _mm512_div_ps(_mm512_set1_ps(1.0f),
                              _mm512_add_ps(_mm512_set1_ps(1.0f), kn_exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
            break;
        case KN_POST_GELU_ERF: /* x/2 (1 + erf(x / sqrt 2)) */
            x = _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)),
                              _mm512_add_ps(_mm512_set1_ps(1.0f),
                                            erf512(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)))));
            break;
        default: break;
        }
    }
    return x;
}

KN_TARGET_AVX512 void kn_gemm512_posts(const kn_gemm512_epi *e, int rows, int np, const float *acc, float *out,
                                       int64_t ldo, const float *res, int64_t ldr)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < np; j++) {
            int64_t at = j * KN_GEMM512_COLS;
            const float *r = res ? res + i * ldr + at : NULL;
            _mm512_storeu_ps(out + i * ldo + at, posts512(e, _mm512_loadu_ps(acc + i * 2 * KN_GEMM512_COLS + at), r));
        }
}

/* The epilogue of a block in registers c (R x np vectors): the post-ops
 * (a clamp in registers, others from a copy in L1) and the store. */
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void store512(const int R, const int np,
                                                                            __m512 (*c)[2], float *out, int64_t ldo,
                                                                            const kn_gemm512_epi *e)
{
    if (e && e->clamp) {
        __m512 lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            c[i][0] = _mm512_min_ps(_mm512_max_ps(c[i][0], lo), hi);
            if (np == 2) c[i][1] = _mm512_min_ps(_mm512_max_ps(c[i][1], lo), hi);
        }
    } else if (e && e->sum_clamp) {
        /* a residual sum, then the clamp if there is one (a NaN stays NaN
         * without, as in posts512) */
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            c[i][0] = _mm512_add_ps(c[i][0], _mm512_loadu_ps(e->res + i * e->ldr));
            if (np == 2) c[i][1] = _mm512_add_ps(c[i][1], _mm512_loadu_ps(e->res + i * e->ldr + KN_GEMM512_COLS));
        }
        if (e->lo > -INFINITY || e->hi < INFINITY) {
            __m512 lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
#pragma GCC unroll 8
            for (int i = 0; i < R; i++) {
                c[i][0] = _mm512_min_ps(_mm512_max_ps(c[i][0], lo), hi);
                if (np == 2) c[i][1] = _mm512_min_ps(_mm512_max_ps(c[i][1], lo), hi);
            }
        }
    } else if (e && e->n_post > 0) {
        /* other post-ops (a residual, GELU, LeakyReLU) from the block kept
         * in L1: their switch per post-op and vector costs more than that */
        float acc[KN_GEMM512_ROWS][2 * KN_GEMM512_COLS];
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            _mm512_storeu_ps(acc[i], c[i][0]);
            if (np == 2) _mm512_storeu_ps(acc[i] + KN_GEMM512_COLS, c[i][1]);
        }
        kn_gemm512_posts(e, R, np, acc[0], out, ldo, e->res, e->ldr);
        return;
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        _mm512_storeu_ps(out + i * ldo, c[i][0]);
        if (np == 2) _mm512_storeu_ps(out + i * ldo + KN_GEMM512_COLS, c[i][1]);
    }
}

/* The residual's lines of a block, which its epilogue will add: they were
 * written layers before and have left L2 (ResNet-50's 14x14 blocks on 1
 * thread: 0.76 -> 0.72 ms a layer). Issued before the block's products. */
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void prefetch_res(const int R, const int np,
                                                                                const kn_gemm512_epi *e)
{
    if (!e || !e->res) return;
#pragma GCC unroll 8
    for (int i = 0; i < R; i++) {
        _mm_prefetch((const char *)(e->res + i * e->ldr), _MM_HINT_T0);
        if (np == 2) _mm_prefetch((const char *)(e->res + i * e->ldr + KN_GEMM512_COLS), _MM_HINT_T0);
    }
}

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
/* One k of a block's products: B's line of each panel, then every row's
 * broadcast A element against them (ak = a + k). */
#define KSTEP512(k)                                                                                                \
    do {                                                                                                           \
        __m512 b0 = _mm512_load_ps(b + (k) * KN_GEMM512_COLS),                                                     \
               b1 = np == 2 ? _mm512_load_ps(bn + (k) * KN_GEMM512_COLS) : b0;                                     \
        ROW512(0);                                                                                                 \
        ROW512(1);                                                                                                 \
        ROW512(2);                                                                                                 \
        ROW512(3);                                                                                                 \
        ROW512(4);                                                                                                 \
        ROW512(5);                                                                                                 \
        ROW512(6);                                                                                                 \
        ROW512(7);                                                                                                 \
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
    prefetch_res(R, np, e);
    for (int64_t k = 0; k < K; k++) {
        const float *ak = a + k;
        if (fetch) _mm_prefetch((const char *)(pf + k * KN_GEMM512_COLS), _MM_HINT_T0);
        KSTEP512(k);
    }
    store512(R, np, c, out, ldo, e);
}

/* CALL(R, NP) with the row count (1..KN_GEMM512_ROWS) and the panel count
 * (1 or 2) made constants, so that each instance keeps its accumulators in
 * registers. */
#define ROWS_DISPATCH(rows, np, CALL)                                                                             \
    switch (rows) {                                                                                                \
    case 1: np == 2 ? CALL(1, 2) : CALL(1, 1); break;                                                             \
    case 2: np == 2 ? CALL(2, 2) : CALL(2, 1); break;                                                             \
    case 3: np == 2 ? CALL(3, 2) : CALL(3, 1); break;                                                             \
    case 4: np == 2 ? CALL(4, 2) : CALL(4, 1); break;                                                             \
    case 5: np == 2 ? CALL(5, 2) : CALL(5, 1); break;                                                             \
    case 6: np == 2 ? CALL(6, 2) : CALL(6, 1); break;                                                             \
    case 7: np == 2 ? CALL(7, 2) : CALL(7, 1); break;                                                             \
    case 8: np == 2 ? CALL(8, 2) : CALL(8, 1); break;                                                             \
    default: break;                                                                                                \
    }

KN_TARGET_AVX512 void kn_gemm512_rows(int rows, int np, const float *a, int64_t lda, const float *b, int64_t next,
                                      int64_t K, const float *pf, float *out, int64_t ldo, const kn_gemm512_epi *e)
{
#define CALL(R, NP) gemm512(R, NP, a, lda, b, next, K, pf, out, ldo, e)
    ROWS_DISPATCH(rows, np, CALL)
#undef CALL
}

/* gemm512 over a part of K (kn_gemm512_rows_acc): the accumulators start
 * from cin when it is not NULL, and only the first npf k prefetch. Its own
 * function rather than flags of gemm512: with them, the whole-K instances
 * that Winograd and the recurrent layers call compiled differently and
 * measured slower (by about as much as this host's noise, 4-8%). */
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void
gemm512_part(const int R, const int np, const float *a, int64_t lda, const float *b, int64_t next, int64_t K,
             const float *pf, int64_t npf, const float *cin, int64_t ldc, float *out, int64_t ldo,
             const kn_gemm512_epi *e)
{
    __m512 c[KN_GEMM512_ROWS][2], bias0 = _mm512_setzero_ps(), bias1 = bias0;
    if (!cin && e && e->bias) {
        bias0 = _mm512_loadu_ps(e->bias);
        if (np == 2) bias1 = _mm512_loadu_ps(e->bias + KN_GEMM512_COLS);
    }
#pragma GCC unroll 8
    for (int i = 0; i < KN_GEMM512_ROWS; i++) c[i][0] = bias0, c[i][1] = bias1;
    if (cin) {
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            c[i][0] = _mm512_loadu_ps(cin + i * ldc);
            if (np == 2) c[i][1] = _mm512_loadu_ps(cin + i * ldc + KN_GEMM512_COLS);
        }
    }
    const float *bn = b + next;
    prefetch_res(R, np, e);
    for (int64_t k = 0; k < K; k++) {
        const float *ak = a + k;
        if (k < npf) _mm_prefetch((const char *)(pf + k * KN_GEMM512_COLS), _MM_HINT_T0);
        KSTEP512(k);
    }
    store512(R, np, c, out, ldo, e);
}
#undef KSTEP512
#undef ROW512

KN_TARGET_AVX512 void kn_gemm512_rows_acc(int rows, int np, const float *a, int64_t lda, const float *b,
                                          int64_t next, int64_t K, const float *pf, int64_t npf, const float *cin,
                                          int64_t ldc, float *out, int64_t ldo, const kn_gemm512_epi *e)
{
#define CALL(R, NP) gemm512_part(R, NP, a, lda, b, next, K, pf, npf, cin, ldc, out, ldo, e)
    ROWS_DISPATCH(rows, np, CALL)
#undef CALL
}
#undef ROWS_DISPATCH

#else

void kn_gemm512_rows_acc(int rows, int np, const float *a, int64_t lda, const float *b, int64_t next, int64_t K,
                         const float *pf, int64_t npf, const float *cin, int64_t ldc, float *out, int64_t ldo,
                         const kn_gemm512_epi *e)
{
    (void)rows, (void)np, (void)a, (void)lda, (void)b, (void)next, (void)K, (void)pf, (void)npf, (void)cin, (void)ldc,
        (void)out, (void)ldo, (void)e;
}

void kn_gemm512_rows(int rows, int np, const float *a, int64_t lda, const float *b, int64_t next, int64_t K,
                     const float *pf, float *out, int64_t ldo, const kn_gemm512_epi *e)
{
    (void)rows, (void)np, (void)a, (void)lda, (void)b, (void)next, (void)K, (void)pf, (void)out, (void)ldo, (void)e;
}

#endif
