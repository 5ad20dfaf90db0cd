/* Unit tests of runtime/ basics: dtypes, tensors, broadcasting, .npy I/O. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kiln/dtype.h"
#include "kiln/npy.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

static void test_f16_round_trip(void **state)
{
    (void)state;
    assert_int_equal(kn_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(kn_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(kn_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(kn_f32_to_f16(1e6f), 0x7c00);             /* overflow → inf */
    assert_int_equal(kn_f32_to_f16(5.9604645e-8f), 0x0001);    /* smallest subnormal */
    assert_true(kn_f16_to_f32(0x0001) == 5.9604644775390625e-8f);
    /* 1 + 2^-11 is halfway between 1 and the next half: ties to even (1.0) */
    assert_int_equal(kn_f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);
    assert_int_equal(kn_f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);
    for (uint32_t h = 0; h < 0x7c00; h++) assert_int_equal(kn_f32_to_f16(kn_f16_to_f32((uint16_t)h)), h);
}

static void test_bf16(void **state)
{
    (void)state;
    assert_int_equal(kn_f32_to_bf16(1.0f), 0x3f80);
    assert_true(kn_bf16_to_f32(0x3f80) == 1.0f);
    assert_int_equal(kn_f32_to_bf16(1.00390625f), 0x3f80); /* tie → even */
    assert_int_equal(kn_f32_to_bf16(1.01171875f), 0x3f82);
}

static void test_dtype_traits(void **state)
{
    (void)state;
    assert_string_equal(kn_dtype_name(KN_F32), "f32");
    assert_int_equal(kn_dtype_from_name("bf16"), KN_BF16);
    assert_int_equal(kn_dtype_nbytes(KN_INT4, 3), 2);
    assert_int_equal(kn_dtype_size(KN_I64), 8);
    assert_false(kn_dtype_valid(KN_STRING));
    assert_false(kn_dtype_valid(999));
    uint8_t packed[2] = {0};
    kn_store_i64(KN_INT4, packed, 0, -3);
    kn_store_i64(KN_INT4, packed, 1, 7);
    kn_store_i64(KN_INT4, packed, 2, -8);
    assert_int_equal(kn_load_i64(KN_INT4, packed, 0), -3);
    assert_int_equal(kn_load_i64(KN_INT4, packed, 1), 7);
    assert_int_equal(kn_load_i64(KN_INT4, packed, 2), -8);
}

static void test_broadcast(void **state)
{
    (void)state;
    int64_t a[3] = {2, 1, 4}, b[2] = {3, 1}, out[KN_MAX_RANK];
    int r = 0;
    assert_int_equal(kn_broadcast_shape(3, a, 2, b, &r, out), KN_OK);
    assert_int_equal(r, 3);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 3);
    assert_int_equal(out[2], 4);
    int64_t s[3];
    kn_broadcast_strides(2, b, 3, out, s);
    assert_int_equal(s[0], 0);
    assert_int_equal(s[1], 1);
    assert_int_equal(s[2], 0);
    int64_t c[1] = {5};
    assert_int_equal(kn_broadcast_shape(3, a, 1, c, &r, out), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "shapes 2x1x4 and 5 cannot be broadcast");
}

static void test_tensor_alloc_errors(void **state)
{
    (void)state;
    kn_tensor t;
    int64_t bad[2] = {3, -1};
    assert_int_equal(kn_tensor_alloc(&t, KN_F32, 2, bad), KN_ERR_INVALID);
    int64_t huge[2] = {INT64_MAX / 2, 4};
    assert_int_not_equal(kn_tensor_alloc(&t, KN_F32, 2, huge), KN_OK);
    int64_t ok[2] = {2, 3};
    assert_int_equal(kn_tensor_alloc(&t, KN_F32, 2, ok), KN_OK);
    assert_int_equal(t.nbytes, 24);
    kn_tensor_free(&t);
}

static void test_npy_round_trip(void **state)
{
    (void)state;
    char path[] = "/tmp/kiln_npy_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    kn_dtype types[] = {KN_F32, KN_F64, KN_F16, KN_I8, KN_U8, KN_I16, KN_U16, KN_I32, KN_U32, KN_I64, KN_U64, KN_BOOL};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        kn_tensor t, u;
        int64_t dims[3] = {2, 3, 4};
        assert_int_equal(kn_tensor_alloc(&t, types[k], 3, dims), KN_OK);
        for (size_t i = 0; i < 24; i++) kn_store_i64(t.dtype, t.data, i, (int64_t)(i % 2));
        assert_int_equal(kn_npy_write(path, &t), KN_OK);
        assert_int_equal(kn_npy_read(path, &u), KN_OK);
        assert_int_equal(u.dtype, t.dtype);
        assert_int_equal(u.rank, 3);
        assert_memory_equal(u.dims, dims, sizeof dims);
        assert_memory_equal(u.data, t.data, t.nbytes);
        kn_tensor_free(&t);
        kn_tensor_free(&u);
    }
    /* a scalar */
    kn_tensor s, s2;
    assert_int_equal(kn_tensor_alloc(&s, KN_F32, 0, NULL), KN_OK);
    ((float *)s.data)[0] = 2.5f;
    assert_int_equal(kn_npy_write(path, &s), KN_OK);
    assert_int_equal(kn_npy_read(path, &s2), KN_OK);
    assert_int_equal(s2.rank, 0);
    assert_true(((float *)s2.data)[0] == 2.5f);
    kn_tensor_free(&s);
    kn_tensor_free(&s2);
    unlink(path);
}

static void test_npy_errors(void **state)
{
    (void)state;
    kn_tensor t;
    assert_int_equal(kn_npy_parse("hello world", 11, "x.npy", &t), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "x.npy: not a .npy file (bad magic)");
    const char trunc[] = "\x93NUMPY\x01\x00\x40\x00{'descr'";
    assert_int_equal(kn_npy_parse(trunc, sizeof trunc - 1, "t.npy", &t), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "t.npy: truncated .npy header");
    char buf[128];
    const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 4), }         \n";
    size_t hl = strlen(hdr);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)hl;
    buf[9] = 0;
    memcpy(buf + 10, hdr, hl);
    memset(buf + 10 + hl, 0, 8); /* only 2 of 16 floats present */
    assert_int_equal(kn_npy_parse(buf, 10 + hl + 8, "short.npy", &t), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "short.npy: file holds 8 data bytes, shape needs 16 elements of 4 bytes");
    assert_int_equal(kn_npy_read("/nonexistent/x.npy", &t), KN_ERR_IO);
    /* Fortran order would be read with its axes reversed: refused, with the fix */
    const char *fhdr = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }          \n";
    size_t fl = strlen(fhdr);
    buf[8] = (char)fl;
    memcpy(buf + 10, fhdr, fl);
    memset(buf + 10 + fl, 0, 16);
    assert_int_equal(kn_npy_parse(buf, 10 + fl + 16, "f.npy", &t), KN_ERR_UNSUPPORTED);
    assert_string_equal(kn_last_error(), "f.npy: Fortran-order arrays are not supported; save with C order");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_round_trip), cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_dtype_traits),   cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_tensor_alloc_errors), cmocka_unit_test(test_npy_round_trip),
        cmocka_unit_test(test_npy_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
