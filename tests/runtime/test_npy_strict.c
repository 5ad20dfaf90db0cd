/* Unit tests of the strict .npy reader and the safe writer (runtime/src/npy.c):
 * the header dict is parsed as a grammar, sizes are checked exactly and
 * without overflow, only regular files are read, and the writer's temporary
 * file never follows a planted symlink. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiln/npy.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

/* A version 1.0 .npy image of header hdr followed by dlen bytes of data
 * (0, 1, 2, ...), in buf; returns its length. */
static size_t make_npy(unsigned char *buf, size_t cap, const char *hdr, size_t dlen)
{
    size_t hl = strlen(hdr);
    assert_true(10 + hl + dlen <= cap);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hl & 0xff);
    buf[9] = (unsigned char)(hl >> 8);
    memcpy(buf + 10, hdr, hl);
    for (size_t i = 0; i < dlen; i++) buf[10 + hl + i] = (unsigned char)i;
    return 10 + hl + dlen;
}

/* Parses hdr + dlen data bytes and expects status want and, if msg is not
 * NULL, exactly that message. */
static void expect_parse(const char *hdr, size_t dlen, int want, const char *msg)
{
    unsigned char buf[1024];
    size_t n = make_npy(buf, sizeof buf, hdr, dlen);
    kn_tensor t;
    int st = kn_npy_parse(buf, n, "h.npy", &t);
    if (st != want) fail_msg("header %s: status %d, want %d (%s)", hdr, st, want, kn_last_error());
    if (msg) assert_string_equal(kn_last_error(), msg);
    if (st == KN_OK) kn_tensor_free(&t);
}

static void test_header_key_inside_a_string(void **state)
{
    (void)state;
    /* a search for "'shape':" found the one inside the extra key's value
     * and read this file as 2x3 floats */
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'x': \"'shape': (2, 3)\", 'shape': (6,), }\n", 24,
                 KN_ERR_INVALID, "h.npy: malformed .npy header: unknown key 'x'");
    expect_parse("{'descr': '<f4', 'note': 'shape', 'fortran_order': False, 'shape': (6,)}\n", 24, KN_ERR_INVALID,
                 "h.npy: malformed .npy header: unknown key 'note'");
}

static void test_header_keys_exactly_once(void **state)
{
    (void)state;
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (6,)}\n", 8, KN_ERR_INVALID,
                 "h.npy: malformed .npy header: key 'shape' given twice");
    expect_parse("{'descr': '<f4', 'shape': (2,)}\n", 8, KN_ERR_INVALID,
                 "h.npy: malformed .npy header: no 'fortran_order' key");
    expect_parse("{'descr': '<f4', 'fortran_order': False}\n", 8, KN_ERR_INVALID,
                 "h.npy: malformed .npy header: no 'shape' key");
    expect_parse("{}\n", 0, KN_ERR_INVALID, "h.npy: malformed .npy header: no 'descr' key");
}

static void test_header_syntax(void **state)
{
    (void)state;
    /* "(3)" is the int 3 in Python, not a tuple */
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}\n", 12, KN_ERR_INVALID, NULL);
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}\n", 12, KN_ERR_INVALID, NULL);
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} junk\n", 12, KN_ERR_INVALID,
                 "h.npy: malformed .npy header: unexpected bytes after the dict at byte 56 of the header");
    expect_parse("{'descr': '<f4', 'fortran_order': False 'shape': (3,)}\n", 12, KN_ERR_INVALID,
                 "h.npy: malformed .npy header: expected ',' or '}' at byte 40 of the header");
    expect_parse("{'descr': <f4, 'fortran_order': False, 'shape': (3,)}\n", 12, KN_ERR_INVALID, NULL);
    expect_parse("{'descr': '<f4', 'fortran_order': 0, 'shape': (3,)}\n", 12, KN_ERR_INVALID, NULL);
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (3,", 12, KN_ERR_INVALID, NULL);
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': [3]}\n", 12, KN_ERR_INVALID, NULL);
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (03,)}\n", 12, KN_ERR_INVALID, NULL);
    expect_parse("{'descr': '<f4', 'fortran_order': True, 'shape': (3,)}\n", 12, KN_ERR_UNSUPPORTED,
                 "h.npy: Fortran-order arrays are not supported; save with C order");
    expect_parse("{'descr': '<c8', 'fortran_order': False, 'shape': (3,)}\n", 24, KN_ERR_UNSUPPORTED,
                 "h.npy: numpy dtype '<c8' is not supported");
    expect_parse("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}\n", 12, KN_ERR_UNSUPPORTED,
                 "h.npy: structured numpy dtypes are not supported");
    /* what numpy writes, and what a Python dict literal may also look like */
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n", 24, KN_OK, NULL);
    expect_parse("{\"shape\": (2,3), \"descr\": \"<i2\", \"fortran_order\": False}\n", 12, KN_OK, NULL);
    expect_parse("{'descr': '|u1', 'fortran_order': False, 'shape': ()}\n", 1, KN_OK, NULL);
    expect_parse("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 5)}\n", 0, KN_OK, NULL);
}

static void test_data_size(void **state)
{
    (void)state;
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n", 20, KN_ERR_INVALID,
                 "h.npy: file holds 20 data bytes, shape needs 6 elements of 4 bytes");
    /* bytes after the data: not what numpy writes, and not silently ignored */
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n", 28, KN_ERR_INVALID,
                 "h.npy: file holds 28 data bytes, shape needs 6 elements of 4 bytes");
    /* 2^32 * 2^32 * 2^2 wraps to 0 in 64 bits: it must not pass for 0 bytes */
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4)}\n", 0,
                 KN_ERR_INVALID, "h.npy: the shape's element count overflows");
    expect_parse("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}\n", 0, KN_ERR_INVALID,
                 NULL);
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}\n", 0, KN_ERR_INVALID,
                 NULL);
}

static void test_big_endian(void **state)
{
    (void)state;
    unsigned char buf[256];
    size_t n = make_npy(buf, sizeof buf, "{'descr': '>u2', 'fortran_order': False, 'shape': (2,)}\n", 4);
    kn_tensor t;
    assert_int_equal(kn_npy_parse(buf, n, "be.npy", &t), KN_OK);
    assert_int_equal(((uint16_t *)t.data)[0], 0x0001);
    assert_int_equal(((uint16_t *)t.data)[1], 0x0203);
    kn_tensor_free(&t);
}

/* A fresh private folder for the file tests. */
static char *tmp_dir(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/kiln_npy_strict_XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static void test_read_not_regular(void **state)
{
    (void)state;
    char *dir = tmp_dir(), fifo[128], msg[256];
    kn_tensor t;
    assert_int_equal(kn_npy_read(dir, &t), KN_ERR_INVALID);
    snprintf(msg, sizeof msg, "%s: is a directory, not a regular .npy file", dir);
    assert_string_equal(kn_last_error(), msg);
    /* a FIFO with no writer: opening it for reading used to wait forever */
    snprintf(fifo, sizeof fifo, "%s/x.npy", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(kn_npy_read(fifo, &t), KN_ERR_INVALID);
    snprintf(msg, sizeof msg, "%s: is a FIFO, not a regular .npy file", fifo);
    assert_string_equal(kn_last_error(), msg);
    assert_int_equal(kn_npy_read("/dev/null", &t), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "/dev/null: is a device, not a regular .npy file");
    unlink(fifo);
    rmdir(dir);
}

static void test_write_ignores_planted_symlink(void **state)
{
    (void)state;
    char *dir = tmp_dir(), path[128], victim[128], link[160];
    snprintf(path, sizeof path, "%s/y.npy", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    assert_non_null(f);
    fputs("precious", f);
    fclose(f);
    /* the name the writer used to open with fopen (path.tmp.<pid>) */
    snprintf(link, sizeof link, "%s.tmp.%d", path, (int)getpid());
    assert_int_equal(symlink(victim, link), 0);
    kn_tensor t, u;
    int64_t dims[1] = {3};
    assert_int_equal(kn_tensor_alloc(&t, KN_F32, 1, dims), KN_OK);
    for (int i = 0; i < 3; i++) ((float *)t.data)[i] = (float)i + 0.5f;
    assert_int_equal(kn_npy_write(path, &t), KN_OK);
    char got[32] = {0};
    f = fopen(victim, "r");
    assert_non_null(f);
    assert_true(fread(got, 1, sizeof got - 1, f) > 0);
    fclose(f);
    assert_string_equal(got, "precious");
    struct stat sb;
    assert_int_equal(lstat(path, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(kn_npy_read(path, &u), KN_OK);
    assert_memory_equal(u.data, t.data, 12);
    kn_tensor_free(&t);
    kn_tensor_free(&u);
    /* nothing else left in the folder: the temporary was renamed */
    assert_int_equal(unlink(link), 0);
    assert_int_equal(unlink(victim), 0);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_key_inside_a_string), cmocka_unit_test(test_header_keys_exactly_once),
        cmocka_unit_test(test_header_syntax),              cmocka_unit_test(test_data_size),
        cmocka_unit_test(test_big_endian),                 cmocka_unit_test(test_read_not_regular),
        cmocka_unit_test(test_write_ignores_planted_symlink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
