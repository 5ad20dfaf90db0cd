/*
 * tests/runtime/conv_testutil.h — helpers shared by the tests of kiln's own
 * convolution kernels (test_winograd.c, test_pointwise.c): seeded random
 * data, 64-byte aligned buffers, a post-op on one value, and the largest
 * error relative to the largest expected value.
 *
 * Include after <cmocka.h> and rt_internal.h, with CONV_TEST_SEED defined
 * (each test file its own data).
 */
#ifndef KILN_TESTS_CONV_TESTUTIL_H
#define KILN_TESTS_CONV_TESTUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static uint32_t g_seed = CONV_TEST_SEED;

/* Uniform in [-1, 1), from a linear congruential generator. */
static float frand(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *alloc_f(int64_t n)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 64, (size_t)(n > 0 ? n : 1) * sizeof(float)), 0);
    return p;
}

static float *rand_f(int64_t n)
{
    float *p = alloc_f(n);
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* Post-op p on v (res: the residual at its place). */
static float post1(const kn_abi_post *p, float v, float res)
{
    switch (p->kind) {
    case KN_POST_RELU: return v > 0 ? v : 0;
    case KN_POST_LEAKY_RELU: return v > 0 ? v : v * p->alpha;
    case KN_POST_CLIP: return v < p->alpha ? p->alpha : v > p->beta ? p->beta : v;
    case KN_POST_SUM: return v + res;
    case KN_POST_SIGMOID: return (float)(1.0 / (1.0 + exp(-(double)v)));
    case KN_POST_SWISH: return (float)(v / (1.0 + exp(-(double)v)));
    case KN_POST_HARDSWISH: {
        double g = (double)v / 6.0 + 0.5;
        return (float)((double)v * (g < 0 ? 0 : g > 1 ? 1 : g));
    }
    default: return v;
    }
}

/* Largest |got - want| relative to the largest |want|. */
static double rel_err(const float *got, const float *want, int64_t n)
{
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= e)) e = d; /* NaN counts */
        if (fabs(want[i]) > m) m = fabs(want[i]);
    }
    return m > 0 ? e / m : e;
}

#endif
