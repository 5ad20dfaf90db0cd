/*
 * tests/runtime/test_config.c — the tuning table and the overrides of
 * runtime/src/config.c: every row named and either measured (it says on
 * which machine) or inheriting, figure for figure, from a measured row;
 * cpuid family and model map to the rows (AVX2 whenever AVX-512F is
 * absent or masked off); KILN_TUNE_FAMILY picks a row and KILN_CONV_ALGO an
 * algorithm, and a value that is neither is refused by name; the cost
 * model reads the row in force.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../runtime/src/config.h"
#include "../../runtime/src/rt_internal.h"

/* The figures of a row: everything after its three names. */
static int figures_cmp(const kn_tuning *a, const kn_tuning *b)
{
    size_t off = offsetof(kn_tuning, wino);
    return memcmp((const char *)a + off, (const char *)b + off, sizeof *a - off);
}

static void test_rows(void **st)
{
    (void)st;
    int measured = 0;
    for (int f = 0; f < KN_FAMILY_COUNT; f++) {
        const kn_tuning *t = kn_config_row(f);
        assert_non_null(t);
        assert_non_null(t->name);
        /* measured, or inheriting: never both, never neither */
        assert_true((t->measured_on != NULL) != (t->inherits != NULL));
        if (t->measured_on) {
            measured++;
            assert_true(strlen(t->measured_on) > 0);
            continue;
        }
        const kn_tuning *from = NULL;
        for (int g = 0; g < KN_FAMILY_COUNT; g++)
            if (!strcmp(kn_config_row(g)->name, t->inherits)) from = kn_config_row(g);
        assert_non_null(from);
        assert_non_null(from->measured_on);
        assert_int_equal(figures_cmp(t, from), 0);
    }
    assert_true(measured >= 2);
    assert_null(kn_config_row(KN_FAMILY_COUNT));
    assert_null(kn_config_row((kn_cpu_family)-1));
    /* every threshold set (a zero would silently switch a rule off) */
    for (int f = 0; f < KN_FAMILY_COUNT; f++) {
        const kn_tuning *t = kn_config_row(f);
        assert_true(t->wino.gemm > 0 && t->wino.direct > 0 && t->wino.xform > 0 && t->wino.u > 0);
        assert_true(t->wino_min_gain > 0 && t->wino_min_gain <= 1);
        assert_true(t->pw_min_sum_bytes > 0 && t->pw_max_pixels > 0 && t->pw_min_filter_bytes > 0);
        assert_true(t->pw_matmul_min_filter_bytes > 0 && t->im2col_max_pixels > 0 && t->xdw_min_bytes > 0);
        assert_true(t->wino_block_max_u > 0 && t->wino_block_vm_bytes > 0);
        /* 0 is a figure here: im2col never takes a width-1 conv (the 1-D form does) */
        assert_true(t->thin_min_height > 0 && t->thin_im2col_max_pixels >= 0);
    }
}

static void test_family_of(void **st)
{
    (void)st;
    const uint64_t avx2 = KN_CPU_AVX2 | KN_CPU_FMA, avx512 = avx2 | KN_CPU_AVX512F;
    struct {
        uint64_t features;
        kn_cpu_id id;
        kn_cpu_family want;
    } cases[] = {
        {avx512, {KN_VENDOR_AMD, 0x1a, 0x02}, KN_FAMILY_ZEN5},      /* Zen 5 */
        {avx512, {KN_VENDOR_AMD, 0x19, 0x11}, KN_FAMILY_ZEN4},      /* Genoa */
        {avx2, {KN_VENDOR_AMD, 0x19, 0x01}, KN_FAMILY_AVX2},        /* Milan: Zen 3, no AVX-512 */
        {avx2, {KN_VENDOR_AMD, 0x1a, 0x02}, KN_FAMILY_AVX2},        /* Zen 5, AVX-512 masked off */
        {avx512, {KN_VENDOR_INTEL, 6, 0x8f}, KN_FAMILY_INTEL_SPR},  /* Sapphire Rapids */
        {avx512, {KN_VENDOR_INTEL, 6, 0xcf}, KN_FAMILY_INTEL_SPR},  /* Emerald Rapids */
        {avx512, {KN_VENDOR_INTEL, 6, 0x55}, KN_FAMILY_AVX512},     /* Skylake-SP */
        {avx512, {KN_VENDOR_INTEL, 6, 0x6a}, KN_FAMILY_AVX512},     /* Ice Lake-SP */
        {avx2, {KN_VENDOR_INTEL, 6, 0x8f}, KN_FAMILY_AVX2},
        {avx512, {KN_VENDOR_OTHER, 0, 0}, KN_FAMILY_AVX512},
        {0, {KN_VENDOR_OTHER, 0, 0}, KN_FAMILY_AVX2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kn_cpu_family got = kn_config_family_of(cases[i].features, &cases[i].id);
        if (got != cases[i].want) print_error("case %zu: family %d, expected %d\n", i, got, cases[i].want);
        assert_int_equal(got, cases[i].want);
    }
    /* this machine: cpuid's vendor, and its row by its features */
    kn_cpu_id me;
    kn_cpu_ident(&me);
    unsetenv("KILN_TUNE_FAMILY");
    assert_int_equal(kn_config_family(), kn_config_family_of(kn_cpu_features(), &me));
}

static void test_overrides(void **st)
{
    (void)st;
    unsetenv("KILN_CONV_ALGO");
    unsetenv("KILN_TUNE_FAMILY");
    assert_int_equal(kn_config_check(), KN_OK);
    assert_int_equal(kn_config_conv_algo(), KN_ALGO_AUTO);
    for (int f = 0; f < KN_FAMILY_COUNT; f++) {
        setenv("KILN_TUNE_FAMILY", kn_config_row(f)->name, 1);
        assert_int_equal(kn_config_check(), KN_OK);
        assert_int_equal(kn_config_family(), f);
        assert_ptr_equal(kn_config_tuning(), kn_config_row(f));
    }
    setenv("KILN_TUNE_FAMILY", "zen9", 1);
    assert_int_equal(kn_config_check(), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "KILN_TUNE_FAMILY='zen9'"));
    unsetenv("KILN_TUNE_FAMILY");
    for (int a = 0; a < KN_ALGO_COUNT; a++) {
        setenv("KILN_CONV_ALGO", kn_config_algo_name(a), 1);
        assert_int_equal(kn_config_check(), KN_OK);
        assert_int_equal(kn_config_conv_algo(), a);
        assert_string_equal(kn_config_algo_name(a), getenv("KILN_CONV_ALGO"));
    }
    setenv("KILN_CONV_ALGO", "auto", 1);
    assert_int_equal(kn_config_conv_algo(), KN_ALGO_AUTO);
    setenv("KILN_CONV_ALGO", "fft", 1);
    assert_int_equal(kn_config_check(), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "KILN_CONV_ALGO='fft'"));
    /* and a session refuses to start with it */
    kn_dnnl_session *s = NULL;
    assert_int_equal(kn_dnnl_session_init(&s), KN_ERR_INVALID);
    assert_null(s);
    unsetenv("KILN_CONV_ALGO");
}

/* The choices read the row in force: ResNet-50's last 3x3 layer (512
 * channels, 7x7, batch 1) is not worth Winograd by the AVX2 row's rates
 * (streaming its filter costs more than the products save) and is worth
 * F(2x2) by Zen 5's (products twice as fast, direct waiting on its
 * filter); KILN_CONV_ALGO=winograd still gets a tile. */
static void test_choices_follow_row(void **st)
{
    (void)st;
    kn_abi_dnnl r;
    memset(&r, 0, sizeof r);
    r.kind = KN_DNNL_CONV, r.spatial = 2, r.groups = 1;
    int64_t sd[4] = {1, 512, 7, 7}, wd[4] = {512, 512, 3, 3};
    kn_abi_tensor *ts[3] = {&r.src, &r.wei, &r.dst};
    const int64_t *ds[3] = {sd, wd, sd};
    for (int i = 0; i < 3; i++) {
        ts[i]->dtype = KN_F32, ts[i]->rank = 4;
        memcpy(ts[i]->dims, ds[i], sizeof sd);
        ts[i]->nbytes = ds[i][0] * ds[i][1] * ds[i][2] * ds[i][3] * 4;
    }
    for (int i = 0; i < 2; i++) r.strides[i] = r.dilations[i] = r.pads_begin[i] = r.pads_end[i] = 1;
    r.wei_ref.loc = KN_LOC_WEIGHTS;
    uint64_t need = KN_CPU_AVX2 | KN_CPU_FMA;
    bool runs = (kn_cpu_features() & need) == need; /* else nothing runs Winograd: 0 everywhere */
    unsetenv("KILN_CONV_ALGO");
    setenv("KILN_TUNE_FAMILY", "avx2", 1);
    assert_int_equal(kn_wino_tile(&r, 1), 0);
    assert_int_equal(kn_wino_best_tile(&r, 1), runs ? 2 : 0);
    setenv("KILN_TUNE_FAMILY", "zen5", 1);
    assert_int_equal(kn_wino_tile(&r, 1), runs ? 2 : 0);
    unsetenv("KILN_TUNE_FAMILY");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_family_of),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_choices_follow_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
