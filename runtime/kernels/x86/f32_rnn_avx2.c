/*
 * runtime/kernels/x86/f32_rnn_avx2.c — the recurrent layers' kernels
 * (runtime/src/rnn.h) for AVX2+FMA: the input projection (6 rows x 16
 * columns, register-blocked), the recurrent product of one h row by a
 * block's gates (up to 4 panels of 16 columns), and the gates' activations
 * 8 lanes at a time (an LSTM's and a linear_before_reset GRU's cell with
 * the default activations whole, in registers). kn_rnn_kern_avx512 is the same with the projection by
 * AVX-512's 8x32 kernel (f32_gemm_8x32_avx512.c), the recurrent products of 3 or 4 gates on 16
 * lanes (several batch rows in one pass over R) and the rows' cells on 16 lanes.
 *
 * exp is Cephes' expf (range reduction by ln 2 in two parts, a degree-5
 * polynomial; about 1 ulp on [-87, 88]), sigmoid 1 / (1 + exp(-x)) with
 * the reciprocal to 2e-7 (recip8), tanh Eigen's rational approximation
 * (tanh8): within a few ulp, so that a layer's
 * outputs stay within 1e-5 relative of the reference kernel's (double)
 * after a hundred steps. The rare activations (Softplus) run the reference
 * kernel's formula element by element.
 */
#include <stdint.h>

#include "f32_exp_avx2.h"
#include "f32_gemm_avx512.h"
#include "rnn.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* ---- activations ------------------------------------------------------------------------- */

AVX2 INLINE __m256 exp8(__m256 x) { return kn_exp256(x); }

/* 1 / d by the 12-bit estimate and one Newton step (about 2e-7 relative,
 * d >= 1 here): a third of a division's time, which the gates' activations
 * would otherwise spend most of theirs on. */
AVX2 INLINE __m256 recip8(__m256 d)
{
    __m256 r = _mm256_rcp_ps(d);
    return _mm256_mul_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(2.0f)));
}

AVX2 INLINE __m256 sigmoid8(__m256 x)
{
    return recip8(_mm256_add_ps(_mm256_set1_ps(1.0f), exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

/* tanh as Eigen's rational approximation (odd degree 13 over even degree
 * 6, on x clamped to +-7.9053, where tanh is 1 to float precision): a
 * third of exp's cost plus a division; |x| < 4e-4 returns x itself. */
static const float k_tanh_a[7] = {-2.76076847742355e-16f, 2.00018790482477e-13f, -8.60467152213735e-11f,
                                  5.12229709037114e-08f,  1.48572235717979e-05f, 6.37261928875436e-04f,
                                  4.89352455891786e-03f};
static const float k_tanh_b[4] = {1.19825839466702e-06f, 1.18534705686654e-04f, 2.26843463243900e-03f,
                                  4.89352518554385e-03f};

AVX2 INLINE __m256 tanh8(__m256 x)
{
    const float *a = k_tanh_a, *b = k_tanh_b;
    __m256 c = _mm256_set1_ps(7.90531110763549805f);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_sub_ps(_mm256_setzero_ps(), c)), c);
    __m256 x2 = _mm256_mul_ps(xc, xc), p = _mm256_set1_ps(a[0]), q = _mm256_set1_ps(b[0]);
#pragma GCC unroll 8
    for (int i = 1; i < 7; i++) p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(a[i]));
#pragma GCC unroll 8
    for (int i = 1; i < 4; i++) q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(b[i]));
    __m256 r = _mm256_div_ps(_mm256_mul_ps(p, xc), q);
    __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(0.0004f), _CMP_LT_OQ);
    return _mm256_blendv_ps(r, x, tiny);
}

AVX2 static void act_avx2(kn_rnn_act a, float alpha, float beta, float *x, int n)
{
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta), zero = _mm256_setzero_ps(),
           one = _mm256_set1_ps(1.0f);
    for (int i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i), r;
        switch (a) {
        case KN_ACT_SIGMOID: r = sigmoid8(v); break;
        case KN_ACT_TANH: r = tanh8(v); break;
        case KN_ACT_RELU: r = _mm256_max_ps(v, zero); break;
        case KN_ACT_AFFINE: r = _mm256_fmadd_ps(va, v, vb); break;
        case KN_ACT_LEAKYRELU:
            r = _mm256_blendv_ps(_mm256_mul_ps(va, v), v, _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
            break;
        case KN_ACT_THRESHOLDEDRELU: r = _mm256_and_ps(v, _mm256_cmp_ps(v, va, _CMP_GT_OQ)); break;
        case KN_ACT_SCALEDTANH: r = _mm256_mul_ps(va, tanh8(_mm256_mul_ps(vb, v))); break;
        case KN_ACT_HARDSIGMOID: r = _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_fmadd_ps(va, v, vb))); break;
        case KN_ACT_ELU:
            r = _mm256_blendv_ps(_mm256_mul_ps(va, _mm256_sub_ps(exp8(v), one)), v, _mm256_cmp_ps(v, zero, _CMP_GE_OQ));
            break;
        case KN_ACT_SOFTSIGN:
            r = _mm256_div_ps(v, _mm256_add_ps(one, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v)));
            break;
        default:
            for (int l = 0; l < 8; l++) x[i + l] = (float)kn_k_rnn_act(a, x[i + l], alpha, beta);
            continue;
        }
        _mm256_storeu_ps(x + i, r);
    }
}

/* The LSTM cell of 8 units (lstm16's half): x = gate pre-activations
 * i, o, f, c at a stride of 16 floats. */
AVX2 INLINE void lstm8(const float *x, float *c, const float *pe, int64_t ps, __m256 lo, __m256 hi, bool clip,
                       bool input_forget, float *h)
{
    __m256 gi = _mm256_loadu_ps(x), go = _mm256_loadu_ps(x + 16), gf = _mm256_loadu_ps(x + 32),
           gc = _mm256_loadu_ps(x + 48), cp = _mm256_loadu_ps(c);
    if (pe) {
        gi = _mm256_fmadd_ps(_mm256_loadu_ps(pe), cp, gi);
        gf = _mm256_fmadd_ps(_mm256_loadu_ps(pe + 2 * ps), cp, gf);
    }
    if (clip) {
        gi = _mm256_min_ps(_mm256_max_ps(gi, lo), hi);
        gf = _mm256_min_ps(_mm256_max_ps(gf, lo), hi);
        gc = _mm256_min_ps(_mm256_max_ps(gc, lo), hi);
    }
    /* input_forget: 1 - sigmoid(i) as sigmoid(-i), which keeps its digits near 1 */
    gf = sigmoid8(input_forget ? _mm256_sub_ps(_mm256_setzero_ps(), gi) : gf);
    gi = sigmoid8(gi);
    __m256 cn = _mm256_fmadd_ps(gf, cp, _mm256_mul_ps(gi, tanh8(gc)));
    _mm256_storeu_ps(c, cn);
    if (pe) go = _mm256_fmadd_ps(_mm256_loadu_ps(pe + ps), cn, go);
    if (clip) go = _mm256_min_ps(_mm256_max_ps(go, lo), hi);
    _mm256_storeu_ps(h, _mm256_mul_ps(sigmoid8(go), tanh8(cn)));
}

AVX2 static void lstm16_avx2(const float *acc, float *c, const float *peep, int64_t peep_stride, float clip,
                             bool input_forget, float *h)
{
    __m256 lo = _mm256_set1_ps(-clip), hi = _mm256_set1_ps(clip);
    bool cl = clip > 0;
    for (int half = 0; half < 2; half++)
        lstm8(acc + 8 * half, c + 8 * half, peep ? peep + 8 * half : NULL, peep_stride, lo, hi, cl, input_forget,
              h + 8 * half);
}

/* The GRU cell of 8 units (gru16's half), linear_before_reset: x = z, r and
 * the h gate's recurrent part at a stride of 16 floats; as gru_block in
 * rnn.c composes it: 1 - z as sigmoid(-z), which keeps its digits near 1. */
AVX2 INLINE void gru8(const float *x, const float *xh, const float *hp, __m256 lo, __m256 hi, bool clip, float *h)
{
    __m256 gz = _mm256_loadu_ps(x), gr = _mm256_loadu_ps(x + 16), rh = _mm256_loadu_ps(x + 32);
    if (clip) {
        gz = _mm256_min_ps(_mm256_max_ps(gz, lo), hi);
        gr = _mm256_min_ps(_mm256_max_ps(gr, lo), hi);
    }
    __m256 zc = sigmoid8(_mm256_sub_ps(_mm256_setzero_ps(), gz)), z = sigmoid8(gz), r = sigmoid8(gr);
    __m256 c = _mm256_add_ps(_mm256_loadu_ps(xh), _mm256_mul_ps(r, rh));
    if (clip) c = _mm256_min_ps(_mm256_max_ps(c, lo), hi);
    c = tanh8(c);
    _mm256_storeu_ps(h, _mm256_add_ps(_mm256_mul_ps(zc, c), _mm256_mul_ps(z, _mm256_loadu_ps(hp))));
}

AVX2 static void gru16_avx2(const float *acc, const float *xh, const float *hp, float clip, float *h)
{
    __m256 lo = _mm256_set1_ps(-clip), hi = _mm256_set1_ps(clip);
    for (int half = 0; half < 2; half++)
        gru8(acc + 8 * half, xh + 8 * half, hp + 8 * half, lo, hi, clip > 0, h + 8 * half);
}

/* ---- the input projection ------------------------------------------------------------------ */

/* Rows [0, R) of one 16-column panel over the whole K; R constant when inlined. */
AVX2 INLINE void gemm_rows(const int R, const float *A, int64_t lda, int64_t K, const float *p, const float *bias,
                           float *C, int64_t ldc)
{
    __m256 c[6][2];
    __m256 b0 = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps(),
           b1 = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) c[r][0] = b0, c[r][1] = b1;
    for (int64_t k = 0; k < K; k++) {
        __m256 w0 = _mm256_load_ps(p + k * KN_RNN_LANES), w1 = _mm256_load_ps(p + k * KN_RNN_LANES + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m256 a = _mm256_broadcast_ss(A + r * lda + k);
            c[r][0] = _mm256_fmadd_ps(a, w0, c[r][0]);
            c[r][1] = _mm256_fmadd_ps(a, w1, c[r][1]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(C + r * ldc, c[r][0]);
        _mm256_storeu_ps(C + r * ldc + 8, c[r][1]);
    }
}

AVX2 static void gemm_avx2(const float *A, int64_t lda, int64_t M, int64_t K, const float *P, int64_t np,
                           const float *bias, float *C, int64_t ldc)
{
    for (int64_t j = 0; j < np; j++) {
        const float *p = P + j * K * KN_RNN_LANES, *bj = bias ? bias + j * KN_RNN_LANES : NULL;
        float *cj = C + j * KN_RNN_LANES;
        int64_t m = 0;
        for (; m + 6 <= M; m += 6) gemm_rows(6, A + m * lda, lda, K, p, bj, cj + m * ldc, ldc);
        switch (M - m) {
        case 5: gemm_rows(5, A + m * lda, lda, K, p, bj, cj + m * ldc, ldc); break;
        case 4: gemm_rows(4, A + m * lda, lda, K, p, bj, cj + m * ldc, ldc); break;
        case 3: gemm_rows(3, A + m * lda, lda, K, p, bj, cj + m * ldc, ldc); break;
        case 2: gemm_rows(2, A + m * lda, lda, K, p, bj, cj + m * ldc, ldc); break;
        case 1: gemm_rows(1, A + m * lda, lda, K, p, bj, cj + m * ldc, ldc); break;
        default: break;
        }
    }
}

/* The same by AVX-512's 8x32 kernel, two panels at a time. */
static void gemm_avx512(const float *A, int64_t lda, int64_t M, int64_t K, const float *P, int64_t np,
                        const float *bias, float *C, int64_t ldc)
{
    for (int64_t j = 0; j < np; j += 2) {
        int n = np - j >= 2 ? 2 : 1;
        const float *p = P + j * K * KN_RNN_LANES;
        kn_gemm512_epi e = {.bias = bias ? bias + j * KN_RNN_LANES : NULL};
        for (int64_t m = 0; m < M; m += KN_GEMM512_ROWS) {
            int rows = M - m >= KN_GEMM512_ROWS ? KN_GEMM512_ROWS : (int)(M - m);
            kn_gemm512_rows(rows, n, A + m * lda, lda, p, K * KN_RNN_LANES, K, p, C + m * ldc + j * KN_RNN_LANES,
                            ldc, bias ? &e : NULL);
        }
    }
}

/* ---- the recurrent product ------------------------------------------------------------------- */

/* acc[0..16 NP) += sum_k h[k] P[k ldp ..]. With one or two panels, U
 * independent sets of accumulators over interleaved k (added in a fixed
 * order at the end) keep the FMA units busy: 2 NP accumulators alone wait
 * on each FMA's latency. */
/* R's rows are prefetched this many k ahead: the product streams R from L2
 * (or L3), and the hardware's prefetch alone left an H=128 GRU 13% slower
 * (8 and 16 rows ahead measured alike on Zen 3, 32 worse). */
enum { PF_ROWS = 8 };

AVX2 INLINE void gemv_np(const int NP, const float *h, int64_t K, const float *P, int64_t ldp, float *acc)
{
    enum { MAXV = 8 };
    const int V = 2 * NP, U = NP == 1 ? 4 : NP == 2 ? 2 : 1;
    __m256 c[4][MAXV];
#pragma GCC unroll 8
    for (int u = 0; u < U; u++) {
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) c[u][v] = u ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + 8 * v);
    }
    int64_t k = 0;
    for (; k + U <= K; k += U) {
#pragma GCC unroll 8
        for (int u = 0; u < U; u++) {
            __m256 hk = _mm256_broadcast_ss(h + k + u);
            const float *row = P + (k + u) * ldp;
#pragma GCC unroll 4
            for (int v = 0; v < NP; v++) _mm_prefetch((const char *)(row + PF_ROWS * ldp + 16 * v), _MM_HINT_T0);
#pragma GCC unroll 8
            for (int v = 0; v < V; v++) c[u][v] = _mm256_fmadd_ps(hk, _mm256_load_ps(row + 8 * v), c[u][v]);
        }
    }
    for (; k < K; k++) {
        __m256 hk = _mm256_broadcast_ss(h + k);
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) c[0][v] = _mm256_fmadd_ps(hk, _mm256_load_ps(P + k * ldp + 8 * v), c[0][v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; v++) {
        __m256 s = c[0][v];
#pragma GCC unroll 8
        for (int u = 1; u < U; u++) s = _mm256_add_ps(s, c[u][v]);
        _mm256_storeu_ps(acc + 8 * v, s);
    }
}

AVX2 static void gemv_avx2(const float *h, int64_t K, const float *P, int64_t ldp, int np, float *acc)
{
    switch (np) {
    case 1: gemv_np(1, h, K, P, ldp, acc); break;
    case 2: gemv_np(2, h, K, P, ldp, acc); break;
    case 3: gemv_np(3, h, K, P, ldp, acc); break;
    default: gemv_np(4, h, K, P, ldp, acc); break;
    }
}

/* Several batch rows' recurrent products, R read once for all of them: a
 * row's accumulators add in k order as gemv_np's do with 3 or 4 panels
 * (one accumulator per 16 columns; an 8-lane FMA is a 16-lane one's half),
 * so each row's result is gemv's bit for bit. At batch 8 the step read R 8
 * times: the audio model's layers at 1.5-1.8x onnxruntime. */
#define AVX512 __attribute__((target("avx512f,avx2,fma")))

AVX512 INLINE void gemv512_rows(const int R, const int NP, const bool PF, const float *const *h, int64_t K,
                                const float *P, int64_t ldp, float *const *acc)
{
    __m512 c[KN_RNN_ROWS][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
#pragma GCC unroll 4
        for (int v = 0; v < NP; v++) c[r][v] = _mm512_loadu_ps(acc[r] + 16 * v);
    }
    for (int64_t k = 0; k < K; k++) {
        const float *row = P + k * ldp;
        __m512 w[4];
#pragma GCC unroll 4
        for (int v = 0; v < NP; v++) {
            if (PF) _mm_prefetch((const char *)(row + PF_ROWS * ldp + 16 * v), _MM_HINT_T0);
            w[v] = _mm512_load_ps(row + 16 * v);
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512 hk = _mm512_set1_ps(h[r][k]);
#pragma GCC unroll 4
            for (int v = 0; v < NP; v++) c[r][v] = _mm512_fmadd_ps(hk, w[v], c[r][v]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
#pragma GCC unroll 4
        for (int v = 0; v < NP; v++) _mm512_storeu_ps(acc[r] + 16 * v, c[r][v]);
    }
}

#define GEMV_ROWS_NP(R, PF)                                                                                            \
    (np == 3 ? gemv512_rows(R, 3, PF, h, K, P, ldp, acc) : gemv512_rows(R, 4, PF, h, K, P, ldp, acc))

AVX512 INLINE void gemv_rows512(const bool PF, int rows, const float *const *h, int64_t K, const float *P,
                                int64_t ldp, int np, float *const *acc)
{
    switch (rows) {
    case 1: GEMV_ROWS_NP(1, PF); break;
    case 2: GEMV_ROWS_NP(2, PF); break;
    case 3: GEMV_ROWS_NP(3, PF); break;
    default: GEMV_ROWS_NP(4, PF); break;
    }
}

AVX512 static void gemv_rows_avx512(int rows, const float *const *h, int64_t K, const float *P, int64_t ldp, int np,
                                    float *const *acc)
{
    gemv_rows512(true, rows, h, K, P, ldp, np, acc);
}

AVX512 static void gemv_rows_avx512_nopf(int rows, const float *const *h, int64_t K, const float *P, int64_t ldp,
                                         int np, float *const *acc)
{
    gemv_rows512(false, rows, h, K, P, ldp, np, acc);
}

/* The cells of a 16-unit block on 16 lanes (kn_rnn_kern.lstm16_rows and
 * gru16_rows): lstm8 and gru8 above, whole. The same formulas; the
 * reciprocal's estimate has 14 bits instead of 12 before its Newton step. */
AVX512 INLINE __m512 sigmoid16(__m512 x)
{
    __m512 d = _mm512_add_ps(_mm512_set1_ps(1.0f), kn_exp512(_mm512_sub_ps(_mm512_setzero_ps(), x)));
    __m512 r = _mm512_rcp14_ps(d);
    return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}

AVX512 INLINE __m512 tanh16(__m512 x)
{
    const float *a = k_tanh_a, *b = k_tanh_b; /* tanh8's */
    __m512 c = _mm512_set1_ps(7.90531110763549805f);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_sub_ps(_mm512_setzero_ps(), c)), c);
    __m512 x2 = _mm512_mul_ps(xc, xc), p = _mm512_set1_ps(a[0]), q = _mm512_set1_ps(b[0]);
#pragma GCC unroll 8
    for (int i = 1; i < 7; i++) p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(a[i]));
#pragma GCC unroll 8
    for (int i = 1; i < 4; i++) q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(b[i]));
    __m512 r = _mm512_div_ps(_mm512_mul_ps(p, xc), q);
    __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(x), _mm512_set1_ps(0.0004f), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(tiny, r, x);
}

AVX512 INLINE __m512 clamp16(__m512 x, __m512 lo, __m512 hi) { return _mm512_min_ps(_mm512_max_ps(x, lo), hi); }

AVX512 static void lstm16_avx512(const float *acc, float *c, const float *pe, int64_t ps, float clip,
                                 bool input_forget, float *h)
{
    __m512 lo = _mm512_set1_ps(-clip), hi = _mm512_set1_ps(clip);
    bool cl = clip > 0;
    __m512 gi = _mm512_loadu_ps(acc), go = _mm512_loadu_ps(acc + 16), gf = _mm512_loadu_ps(acc + 32),
           gc = _mm512_loadu_ps(acc + 48), cp = _mm512_loadu_ps(c);
    if (pe) {
        gi = _mm512_fmadd_ps(_mm512_loadu_ps(pe), cp, gi);
        gf = _mm512_fmadd_ps(_mm512_loadu_ps(pe + 2 * ps), cp, gf);
    }
    if (cl) gi = clamp16(gi, lo, hi), gf = clamp16(gf, lo, hi), gc = clamp16(gc, lo, hi);
    gf = sigmoid16(input_forget ? _mm512_sub_ps(_mm512_setzero_ps(), gi) : gf);
    gi = sigmoid16(gi);
    __m512 cn = _mm512_fmadd_ps(gf, cp, _mm512_mul_ps(gi, tanh16(gc)));
    _mm512_storeu_ps(c, cn);
    if (pe) go = _mm512_fmadd_ps(_mm512_loadu_ps(pe + ps), cn, go);
    if (cl) go = clamp16(go, lo, hi);
    _mm512_storeu_ps(h, _mm512_mul_ps(sigmoid16(go), tanh16(cn)));
}

AVX512 static void gru16_avx512(const float *acc, const float *xh, const float *hp, float clip, float *h)
{
    __m512 lo = _mm512_set1_ps(-clip), hi = _mm512_set1_ps(clip);
    bool cl = clip > 0;
    __m512 gz = _mm512_loadu_ps(acc), gr = _mm512_loadu_ps(acc + 16), rh = _mm512_loadu_ps(acc + 32);
    if (cl) gz = clamp16(gz, lo, hi), gr = clamp16(gr, lo, hi);
    __m512 zc = sigmoid16(_mm512_sub_ps(_mm512_setzero_ps(), gz)), z = sigmoid16(gz), r = sigmoid16(gr);
    __m512 c = _mm512_add_ps(_mm512_loadu_ps(xh), _mm512_mul_ps(r, rh));
    if (cl) c = clamp16(c, lo, hi);
    c = tanh16(c);
    _mm512_storeu_ps(h, _mm512_add_ps(_mm512_mul_ps(zc, c), _mm512_mul_ps(z, _mm512_loadu_ps(hp))));
}

/* One row's recurrent product of a block's 3 or 4 gates: gemv512_rows
 * for that row, its 16-lane loads a whole line each (the audio model at
 * batch 1 on the AMX Xeon: 2-3% faster than gemv_np's 8 lanes, same bits:
 * one accumulator per 16 columns in k order either way). */
AVX512 static void gemv_avx512(const float *h, int64_t K, const float *P, int64_t ldp, int np, float *acc)
{
    if (np == 3) gemv512_rows(1, 3, true, &h, K, P, ldp, &acc);
    else if (np == 4) gemv512_rows(1, 4, true, &h, K, P, ldp, &acc);
    else gemv_avx2(h, K, P, ldp, np, acc);
}

/* The same without the software prefetch of R's rows (kn_tuning.rnn_prefetch
 * false): on the AMX Xeon the four prefetches per k take load slots that
 * the hardware's own prefetch leaves idle (one row of an H=128 LSTM's R by
 * 64 columns: 1.25 -> 1.03 ns per k from L1, 1.70 -> 1.60 from L2; the
 * audio model on 1 thread 0.58 -> 0.55 ms). */
AVX512 static void gemv_avx512_nopf(const float *h, int64_t K, const float *P, int64_t ldp, int np, float *acc)
{
    if (np == 3) gemv512_rows(1, 3, false, &h, K, P, ldp, &acc);
    else if (np == 4) gemv512_rows(1, 4, false, &h, K, P, ldp, &acc);
    else gemv_avx2(h, K, P, ldp, np, acc);
}

const kn_rnn_kern kn_rnn_kern_avx2 = {"avx2",   gemm_avx2,   gemv_avx2, NULL, act_avx2,
                                      lstm16_avx2, gru16_avx2, NULL,     NULL};
const kn_rnn_kern kn_rnn_kern_avx512 = {"avx512",    gemm_avx512, gemv_avx512,   gemv_rows_avx512, act_avx2,
                                        lstm16_avx2, gru16_avx2,  lstm16_avx512, gru16_avx512};
const kn_rnn_kern kn_rnn_kern_avx512_nopf = {"avx512",    gemm_avx512,   gemv_avx512_nopf, gemv_rows_avx512_nopf,
                                             act_avx2,    lstm16_avx2,   gru16_avx2,       lstm16_avx512,
                                             gru16_avx512};

#else

const kn_rnn_kern kn_rnn_kern_avx2 = {"avx2", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
const kn_rnn_kern kn_rnn_kern_avx512 = {"avx512", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
const kn_rnn_kern kn_rnn_kern_avx512_nopf = {"avx512", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

#endif
