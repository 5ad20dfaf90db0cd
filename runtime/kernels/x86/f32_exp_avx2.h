/*
 * runtime/kernels/x86/f32_exp_avx2.h — exp(x) on 8 lanes for the AVX2
 * kernels (the recurrent layers' gates, attention's softmax, Winograd's
 * SiLU): Cephes' expf, range reduction by ln 2 in two parts and a degree-5
 * polynomial, about 1 ulp on [-87, 88]; x is clamped to that range (below
 * -87 the result is exp(-87), not 0: callers that need 0 mask it).
 * kn_exp512 (f32_gemm_avx512.h) is the same on 16 lanes.
 */
#ifndef KILN_KERNELS_X86_F32_EXP_AVX2_H
#define KILN_KERNELS_X86_F32_EXP_AVX2_H

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) __m256 kn_exp256(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

#endif /* x86-64 */
#endif
