/* The calibration table: a byte-exact round trip and strict refusals that
 * name the file and the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "table.h"

static void make(kn_calib_table *t)
{
    memset(t, 0, sizeof *t);
    t->model_hash = 0x0123456789abcdefull;
    t->method = KN_CALIB_PERCENTILE;
    t->percentile = 99.999;
    t->samples = 12;
    kn_calib_table_add_keep(t, "conv_1");
    kn_calib_table_add_keep(t, "Sigmoid");
    kn_calib_entry e = {.name = "x", .min = -1.5f, .max = 2.25f, .scale = 0.0147058824f, .zero_point = 102,
                        .dtype = KN_U8, .count = 1000, .bins = 2048, .range = 4};
    kn_calib_table_add(t, &e);
    kn_calib_entry f = {.name = "a\"b\\c/d", .min = 0, .max = 1e-30f, .scale = 3.92156886e-33f, .zero_point = 0,
                        .dtype = KN_U8, .count = 7, .bins = 2048, .range = 0};
    kn_calib_table_add(t, &f);
}

static void test_round_trip(void **state)
{
    (void)state;
    kn_calib_table t, u;
    make(&t);
    char path[] = "/tmp/kiln_test_table_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(kn_calib_table_write(path, &t), KN_OK);
    assert_int_equal(kn_calib_table_read(path, &u), KN_OK);
    assert_true(u.model_hash == t.model_hash && u.method == t.method && u.percentile == t.percentile);
    assert_int_equal(u.n_tensors, 2);
    assert_int_equal(u.n_keep, 2);
    assert_string_equal(u.tensors[1].name, "a\"b\\c/d");
    assert_true(u.tensors[0].scale == t.tensors[0].scale && u.tensors[0].min == t.tensors[0].min);
    assert_true(u.tensors[1].max == 1e-30f);
    assert_int_equal(u.tensors[0].zero_point, 102);
    char *a, *b;
    assert_int_equal(kn_calib_table_format(&t, &a), KN_OK);
    assert_int_equal(kn_calib_table_format(&u, &b), KN_OK);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "\"model_hash\": \"0123456789abcdef\""));
    free(a), free(b);
    unlink(path);
    kn_calib_table_free(&t);
    kn_calib_table_free(&u);
}

/* Replaces the first `from` in the formatted table with `to` and parses. */
static void expect_refusal(const char *from, const char *to, const char *msg_part)
{
    kn_calib_table t, u;
    make(&t);
    char *text;
    assert_int_equal(kn_calib_table_format(&t, &text), KN_OK);
    char *at = strstr(text, from);
    assert_non_null(at);
    size_t n = strlen(text) + strlen(to) + 1;
    char *bad = malloc(n);
    snprintf(bad, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    int st = kn_calib_table_parse(bad, strlen(bad), "bad.json", &u);
    if (st == KN_OK || !strstr(kn_last_error(), msg_part) || !strstr(kn_last_error(), "bad.json"))
        fail_msg("for '%s' -> '%s': status %d, message '%s', wanted '%s'", from, to, st, kn_last_error(), msg_part);
    free(bad), free(text);
    kn_calib_table_free(&t);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_refusal("\"kiln-calib\"", "\"other\"", "format");
    expect_refusal("\"version\": 1", "\"version\": 2", "version");
    expect_refusal("\"version\": 1", "\"version\": 1.5", "version");
    expect_refusal("0123456789abcdef", "0123", "model_hash");
    expect_refusal("\"method\"", "\"method\": \"minmax\", \"method\"", "appears twice");
    expect_refusal("\"method\": \"percentile\"", "\"method\": \"magic\"", "method: unknown");
    expect_refusal("\"scale\": 0.0147058824", "\"scale\": -1", "tensors.x.scale");
    expect_refusal("\"scale\": 0.0147058824", "\"scale\": \"1\"", "tensors.x.scale: expected a number");
    expect_refusal("\"zero_point\": 102", "\"zero_point\": 300", "tensors.x.zero_point");
    expect_refusal("\"dtype\": \"u8\"", "\"dtype\": \"f32\"", "tensors.x.dtype");
    expect_refusal("\"min\": -1.5", "\"min\": 5", "tensors.x.min");
    expect_refusal("\"min\": -1.5, ", "", "tensors.x.min: missing");
    expect_refusal("\"bins\": 2048", "\"bins\": 2048, \"extra\": 1", "tensors.x.hist.extra: unknown field");
    expect_refusal("\"samples\"", "\"sample\"", "unknown field");
    expect_refusal("\"keep_float\": [\"conv_1\"", "\"keep_float\": [1", "keep_float[0]");
    expect_refusal("\"tensors\": {", "\"tensors\": {\"x\": {}, ", "appears twice");
    expect_refusal("\n}\n", "\n", "line");
    expect_refusal("\"per_channel\": false", "\"per_channel\": 0", "per_channel");
    expect_refusal("\"min\": -1.5", "\"min\": 1e999", "tensors.x.min");
}

/* Random byte edits and truncations of a valid table: refused or read,
 * never a crash (run under the sanitizers by make test-asan). */
static void test_mutations(void **state)
{
    (void)state;
    kn_calib_table t, u;
    make(&t);
    char *text;
    assert_int_equal(kn_calib_table_format(&t, &text), KN_OK);
    size_t n = strlen(text);
    char *buf = malloc(n + 1);
    uint64_t seed = 42;
    static const char k_bytes[] = "{}[]\",:0123456789.eE-+ntfu\\\x01\x80 ";
    for (int i = 0; i < 20000; i++) {
        memcpy(buf, text, n + 1);
        size_t len = n;
        for (int k = 0; k < 1 + i % 3; k++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            buf[seed % n] = k_bytes[(seed >> 32) % (sizeof k_bytes - 1)];
        }
        if (i % 5 == 0) len = (size_t)((seed >> 20) % n);
        if (kn_calib_table_parse(buf, len, "m.json", &u) == KN_OK) kn_calib_table_free(&u);
    }
    free(buf);
    free(text);
    kn_calib_table_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
