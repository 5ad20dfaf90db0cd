/*
 * runtime/kernels/x86/f32_sigmoid_softmax_avx2.c — Sigmoid and Softmax on
 * 8 lanes (AVX2 + FMA), for the runtime kernels of compiled artifacts
 * (runtime/src/fastops.c): a detector's class scores and box distributions
 * whose size varies at run time are not generated loops, and the reference
 * kernels, which compute in double, took 4.7 of YOLOv8n's 28 ms at 320x480.
 *
 * exp is kn_exp256 (f32_exp_avx2.h, about 1 ulp, clamped to [-87, 88]: the
 * terms it cannot represent come out as e^-87 instead of 0, which changes
 * a softmax's sum by less than its rounding). Tails take expf.
 */
#include <math.h>
#include <stdint.h>

#include "f32_exp_avx2.h"
#include "rt_internal.h"

/* Columns [c0, c1) of a [mid, inner] slice one at a time (the tails, and
 * CPUs without AVX2). */
static void columns_scalar(const float *x, float *y, int64_t mid, int64_t inner, int64_t c0, int64_t c1)
{
    for (int64_t c = c0; c < c1; c++) {
        float m = x[c], s = 0;
        for (int64_t k = 1; k < mid; k++) m = x[k * inner + c] > m ? x[k * inner + c] : m;
        for (int64_t k = 0; k < mid; k++) s += y[k * inner + c] = expf(x[k * inner + c] - m);
        for (int64_t k = 0; k < mid; k++) y[k * inner + c] *= 1.0f / s;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)

#define KN_TARGET_AVX2 __attribute__((target("avx2,fma")))

KN_TARGET_AVX2 void kn_sigmoid256(const float *x, float *y, int64_t n)
{
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(y + i, _mm256_div_ps(one, _mm256_add_ps(one, kn_exp256(_mm256_sub_ps(zero, v)))));
    }
    for (; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

/* One row of `mid` contiguous floats. */
KN_TARGET_AVX2 void kn_softmax256_row(const float *x, float *y, int64_t mid)
{
    float mx = -INFINITY;
    int64_t i = 0;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= mid; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    for (int k = 0; k < 8; k++) mx = lanes[k] > mx ? lanes[k] : mx;
    for (; i < mid; i++) mx = x[i] > mx ? x[i] : mx;
    __m256 m = _mm256_set1_ps(mx), vs = _mm256_setzero_ps();
    float sum = 0;
    for (i = 0; i + 8 <= mid; i += 8) {
        __m256 e = kn_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(y + i, e);
        vs = _mm256_add_ps(vs, e);
    }
    for (; i < mid; i++) sum += y[i] = expf(x[i] - mx);
    _mm256_storeu_ps(lanes, vs);
    for (int k = 0; k < 8; k++) sum += lanes[k];
    __m256 r = _mm256_set1_ps(1.0f / sum);
    for (i = 0; i + 8 <= mid; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), r));
    for (; i < mid; i++) y[i] *= 1.0f / sum;
}

/* Columns [i0, i1) of one [mid, inner] slice, each a softmax over its mid
 * floats `inner` apart: 8 columns at a time, three passes down them. */
KN_TARGET_AVX2 void kn_softmax256_columns(const float *x, float *y, int64_t mid, int64_t inner, int64_t i0,
                                          int64_t i1)
{
    int64_t c = i0;
    for (; c + 8 <= i1; c += 8) {
        __m256 m = _mm256_loadu_ps(x + c), s = _mm256_setzero_ps();
        for (int64_t k = 1; k < mid; k++) m = _mm256_max_ps(m, _mm256_loadu_ps(x + k * inner + c));
        for (int64_t k = 0; k < mid; k++) {
            __m256 e = kn_exp256(_mm256_sub_ps(_mm256_loadu_ps(x + k * inner + c), m));
            _mm256_storeu_ps(y + k * inner + c, e);
            s = _mm256_add_ps(s, e);
        }
        __m256 r = _mm256_div_ps(_mm256_set1_ps(1.0f), s);
        for (int64_t k = 0; k < mid; k++)
            _mm256_storeu_ps(y + k * inner + c, _mm256_mul_ps(_mm256_loadu_ps(y + k * inner + c), r));
    }
    columns_scalar(x, y, mid, inner, c, i1);
}

#else /* other CPUs: fastops.c never calls them (no AVX2), but they link */

void kn_sigmoid256(const float *x, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

void kn_softmax256_row(const float *x, float *y, int64_t mid) { kn_softmax256_columns(x, y, mid, 1, 0, 1); }

void kn_softmax256_columns(const float *x, float *y, int64_t mid, int64_t inner, int64_t i0, int64_t i1)
{
    columns_scalar(x, y, mid, inner, i0, i1);
}

#endif
