/* Observers with known answers: min/max exact, percentile clips outliers,
 * entropy/mse inside [min, max], order independence and merge. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compare.h"
#include "observer.h"

static uint64_t g_seed = 0x1234567;
static float uniform(float lo, float hi)
{
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
    return lo + (hi - lo) * (float)((g_seed >> 11) * (1.0 / 9007199254740992.0));
}
static float normal(void)
{
    float u = uniform(1e-7f, 1), v = uniform(0, 1);
    return sqrtf(-2 * logf(u)) * cosf(6.2831853f * v);
}

static void test_minmax_exact(void **state)
{
    (void)state;
    kn_observer *o = kn_observer_create();
    float x[1000];
    for (int i = 0; i < 1000; i++) x[i] = uniform(-0.5f, 3.0f);
    x[17] = -0.5f, x[400] = 2.75f;
    kn_observer_add(o, x, 1000);
    float lo, hi, mn = x[0], mx = x[0];
    for (int i = 0; i < 1000; i++) mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
    kn_observer_range(o, KN_CALIB_MINMAX, 0, false, &lo, &hi);
    assert_true(lo == mn && hi == mx);
    assert_int_equal(o->count, 1000);
    assert_true(kn_observer_hist_range(o) == 4.0); /* smallest power of two above 3 */
    uint64_t total = 0;
    for (int i = 0; i < KN_OBS_BINS; i++) total += o->bins[i];
    assert_int_equal(total, 1000);
    kn_observer_free(o);
}

static void test_nonfinite_ignored(void **state)
{
    (void)state;
    kn_observer *o = kn_observer_create();
    float x[4] = {1, NAN, INFINITY, -2};
    kn_observer_add(o, x, 4);
    assert_int_equal(o->count, 2);
    assert_int_equal(o->nonfinite, 2);
    assert_true(o->min == -2 && o->max == 1);
    kn_observer_free(o);
}

static void test_percentile_clips_outliers(void **state)
{
    (void)state;
    kn_observer *o = kn_observer_create();
    enum { N = 200000 };
    float *x = malloc(sizeof *x * N);
    for (int i = 0; i < N; i++) x[i] = uniform(0, 1);
    x[5] = 1000, x[99] = 900; /* 2 in 200000 = 0.001%: inside the 99.999 clip */
    kn_observer_add(o, x, N);
    float lo, hi;
    kn_observer_range(o, KN_CALIB_PERCENTILE, 99.99, false, &lo, &hi);
    assert_true(hi <= 2.0f); /* one bin of R/1024 = 1 above the bulk */
    assert_true(lo >= 0.0f);
    kn_observer_range(o, KN_CALIB_MINMAX, 0, false, &lo, &hi);
    assert_true(hi == 1000);
    free(x);
    kn_observer_free(o);
}

static void test_entropy_and_mse_clip_gaussian_tails(void **state)
{
    (void)state;
    kn_observer *o = kn_observer_create();
    enum { N = 100000 };
    float *x = malloc(sizeof *x * N);
    for (int i = 0; i < N; i++) x[i] = normal();
    x[0] = 60; /* one far outlier */
    kn_observer_add(o, x, N);
    float lo, hi;
    kn_observer_range(o, KN_CALIB_ENTROPY, 0, true, &lo, &hi);
    print_message("entropy [%g, %g]\n", lo, hi);
    assert_true(hi > 2 && hi < 30);
    assert_true(lo < -2 && lo >= (float)o->min);
    /* one outlier at 60 in 1e5: clipping it all the way costs more than the
     * rounding noise it saves, so MSE clips it only part of the way;
     * without it, MSE clips the Gaussian's tail a little */
    kn_observer_range(o, KN_CALIB_MSE, 0, true, &lo, &hi);
    print_message("mse with outlier [%g, %g]\n", lo, hi);
    assert_true(hi > 30 && hi <= 60);
    kn_observer_reset(o);
    kn_observer_add(o, x + 1, N - 1);
    kn_observer_range(o, KN_CALIB_MSE, 0, true, &lo, &hi);
    print_message("mse [%g, %g] of [%g, %g]\n", lo, hi, o->min, o->max);
    assert_true(hi > 2.5 && hi <= (float)o->max);
    assert_true(lo == -hi || lo == (float)o->min);
    kn_observer_range(o, KN_CALIB_PERCENTILE, 99.9, true, &lo, &hi);
    print_message("p99.9 [%g, %g]\n", lo, hi);
    assert_true(hi > 3.2 && hi < 3.4); /* |N(0,1)|'s 99.9% point is 3.29; bins of 1/256 */
    free(x);
    kn_observer_free(o);
}

/* Batches in any order, and merges, give the same bytes. */
static void test_order_and_merge(void **state)
{
    (void)state;
    enum { B = 5, N = 3000 };
    static float x[B][N];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) x[b][i] = normal() * (float)(1 << (3 * b)) * 0.01f;
    x[2][7] = 0; /* zeros, a negative zero, and a batch of zeros only */
    x[3][9] = -0.0f;
    static float zeros[16];
    kn_observer *a = kn_observer_create(), *c = kn_observer_create(), *m1 = kn_observer_create(),
                *m2 = kn_observer_create();
    kn_observer_add(a, zeros, 16);
    for (int b = 0; b < B; b++) kn_observer_add(a, x[b], N);
    for (int b = B - 1; b >= 0; b--) kn_observer_add(c, x[b], N);
    kn_observer_add(c, zeros, 16);
    /* c sees min/max in another order: same values */
    assert_memory_equal(a, c, sizeof *a);
    kn_observer_add(m1, x[4], N);
    kn_observer_add(m1, zeros, 16);
    kn_observer_add(m1, x[0], N);
    for (int b = 1; b < 4; b++) kn_observer_add(m2, x[b], N);
    kn_observer_merge(m1, m2);
    assert_memory_equal(a, m1, sizeof *a);
    /* merging into an empty observer */
    kn_observer *e = kn_observer_create();
    kn_observer_merge(e, a);
    assert_memory_equal(a, e, sizeof *a);
    kn_observer_free(a), kn_observer_free(c), kn_observer_free(m1), kn_observer_free(m2), kn_observer_free(e);
}

static void test_qparams(void **state)
{
    (void)state;
    float s;
    int32_t zp;
    kn_qparams_u8(0, 2.55f, &s, &zp);
    assert_float_equal(s, 0.01f, 1e-7);
    assert_int_equal(zp, 0);
    kn_qparams_u8(-1, 1, &s, &zp); /* 0 must be exact: zp = round(1 / s), s = 2/255 in float */
    assert_true(zp == 127 || zp == 128);
    assert_int_equal(kn_quantize_u8(0, s, zp), zp);
    kn_qparams_u8(0.5f, 2, &s, &zp); /* widened to include 0 */
    assert_float_equal(s, 2.0f / 255, 1e-8);
    assert_int_equal(zp, 0);
    kn_qparams_u8(0, 0, &s, &zp);
    assert_true(s == 1.0f && zp == 0);
    kn_qparams_s8(-3, 1.27f, &s);
    assert_float_equal(s, 3.0f / 127, 1e-8);
    assert_int_equal(kn_quantize_s8(-3, s), -127);
    assert_int_equal(kn_quantize_s8(100, s), 127);
    assert_int_equal(kn_quantize_u8(2.5f, 1, 0), 2); /* half to even */
    assert_int_equal(kn_quantize_u8(3.5f, 1, 0), 4);
    assert_int_equal(kn_quantize_u8(-9, 1, 3), 0);
}

static void test_metrics(void **state)
{
    (void)state;
    kn_qmetrics m;
    kn_qmetrics_init(&m);
    float a[6] = {1, 2, 3, 0.5f, 0.1f, 0.2f}, b[6] = {1, 2, 3, 0.5f, 0.6f, 0.2f};
    kn_qmetrics_add(&m, a, b, 6, 3);
    assert_float_equal(m.max_abs, 0.5, 1e-6);
    assert_float_equal(m.max_rel, 5.0, 1e-5);
    assert_true(kn_qmetrics_top1(&m) == 0.5); /* row 2: argmax 0 vs 1 */
    double sq = 10 * log10((1 + 4 + 9 + 0.25 + 0.01 + 0.04) / 0.25);
    assert_float_equal(kn_qmetrics_sqnr_db(&m), sq, 1e-3);
    assert_true(kn_qmetrics_cosine(&m) > 0.99 && kn_qmetrics_cosine(&m) < 1);
    kn_qmetrics_init(&m);
    kn_qmetrics_add(&m, a, a, 6, 0);
    assert_true(isinf(kn_qmetrics_sqnr_db(&m)));
    assert_true(kn_qmetrics_top1(&m) == -1);
    float fq[3], x[3] = {0.0f, 0.013f, 10};
    kn_fake_quant_u8(x, 3, 0.01f, 0, fq);
    assert_true(fq[0] == 0 && fabsf(fq[1] - 0.01f) < 1e-7 && fabsf(fq[2] - 2.55f) < 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minmax_exact),
        cmocka_unit_test(test_nonfinite_ignored),
        cmocka_unit_test(test_percentile_clips_outliers),
        cmocka_unit_test(test_entropy_and_mse_clip_gaussian_tails),
        cmocka_unit_test(test_order_and_merge),
        cmocka_unit_test(test_qparams),
        cmocka_unit_test(test_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
