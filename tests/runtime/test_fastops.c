/*
 * tests/runtime/test_fastops.c — the f32 fast paths of runtime kernels in
 * compiled artifacts (runtime/src/fastops.c) against the reference kernels
 * they stand in for: Sigmoid over sizes with and without an 8-lane tail,
 * Softmax along the last axis and along an inner axis (columns in blocks
 * of 8 and a tail, several parallel units), Concat of several inputs along
 * an inner and the outer axis with runs that straddle the parallel pieces;
 * Resize on groups of image planes, bit for bit; each at 1 and 2 threads;
 * Add/Sub/Mul/Div and a Transpose that keeps the innermost dim, bit for
 * bit; Resize of a channels-last image, bit for bit the NCHW result;
 * kn_op_alloc_output's places in the arena. Without AVX2 and FMA, Sigmoid and Softmax must
 * decline (KN_ERR_UNSUPPORTED), as must every path without a session.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fastops.h"
#include "k_elementwise.h"
#include "k_linalg.h"
#include "k_movement.h"
#include "rt_internal.h"

static uint32_t g_seed = 777;
static float frand(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 4096.0f - 8.0f; /* [-8, 8): exp over a wide range */
}

static kn_tensor make(int rank, const int64_t *dims, bool fill)
{
    kn_tensor t;
    memset(&t, 0, sizeof t);
    assert_int_equal(kn_tensor_alloc(&t, KN_F32, rank, dims), KN_OK);
    float *p = t.data;
    for (int64_t i = 0; fill && i < kn_tensor_numel(&t); i++) p[i] = frand();
    return t;
}

static bool avx2(void)
{
    uint64_t f = kn_cpu_features();
    return (f & KN_CPU_AVX2) && (f & KN_CPU_FMA);
}

/* Largest |a - b| / (|b| + tiny) over n floats. */
static double rel_err(const float *a, const float *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + 1e-30);
        if (!(e <= worst)) worst = e; /* NaN too */
    }
    return worst;
}

static void test_sigmoid(void **st)
{
    (void)st;
    const int64_t sizes[] = {1, 7, 8, 4097, 40000};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int threads = 1; threads <= 2; threads++) {
            kn_tensor x = make(1, &sizes[s], true), y = make(1, &sizes[s], false), want = make(1, &sizes[s], false);
            kn_unary_params p = {0};
            assert_int_equal(kn_k_unary(KN_UN_SIGMOID, &p, &x, &want), KN_OK);
            kn_op_session os = {.threads = threads};
            int rc = kn_fast_sigmoid(&os, &x, &y);
            if (!avx2()) {
                assert_int_equal(rc, KN_ERR_UNSUPPORTED);
            } else {
                assert_int_equal(rc, KN_OK);
                assert_true(rel_err(y.data, want.data, sizes[s]) < 1e-6);
                assert_string_equal(os.impl, "kiln sigmoid:avx2");
            }
            assert_int_equal(kn_fast_sigmoid(NULL, &x, &y), KN_ERR_UNSUPPORTED);
            kn_tensor_free(&x), kn_tensor_free(&y), kn_tensor_free(&want);
        }
}

static void test_softmax(void **st)
{
    (void)st;
    /* [outer, mid, inner]: rows (inner 1), columns with a tail and several units */
    const int64_t shapes[][3] = {{5, 19, 1}, {300, 16, 1}, {2, 16, 84}, {1, 4, 3150}, {3, 1, 5}, {2, 7, 130}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int threads = 1; threads <= 2; threads++) {
            kn_tensor x = make(3, shapes[s], true), y = make(3, shapes[s], false), want = make(3, shapes[s], false);
            int64_t n = kn_tensor_numel(&x);
            assert_int_equal(kn_k_softmax(&x, shapes[s][0], shapes[s][1], shapes[s][2], KN_K_SOFTMAX, &want), KN_OK);
            kn_op_session os = {.threads = threads};
            int rc = kn_fast_softmax(&os, &x, shapes[s][0], shapes[s][1], shapes[s][2], &y);
            if (!avx2()) {
                assert_int_equal(rc, KN_ERR_UNSUPPORTED);
            } else {
                assert_int_equal(rc, KN_OK);
                assert_true(rel_err(y.data, want.data, n) < 1e-5);
            }
            /* a split that does not match the tensor */
            assert_int_equal(kn_fast_softmax(&os, &x, shapes[s][0] + 1, shapes[s][1], shapes[s][2], &y),
                             KN_ERR_UNSUPPORTED);
            kn_tensor_free(&x), kn_tensor_free(&y), kn_tensor_free(&want);
        }
}

static void test_concat(void **st)
{
    (void)st;
    /* along the channels of a batch of 3 (runs of 20x700 floats, 64 KiB
     * pieces cut through them), and along the outer axis */
    const int64_t c[3] = {5, 1, 9};
    for (int axis = 0; axis < 2; axis++)
        for (int threads = 1; threads <= 2; threads++) {
            kn_tensor xs[3];
            const kn_tensor *px[3];
            int64_t od[4] = {axis ? 3 : 0, axis ? 0 : 4, 20, 700};
            for (int i = 0; i < 3; i++) {
                int64_t d[4] = {axis ? 3 : c[i], axis ? c[i] : 4, 20, 700};
                xs[i] = make(4, d, true);
                px[i] = &xs[i];
                od[axis] += c[i];
            }
            kn_tensor y = make(4, od, false), want = make(4, od, false);
            assert_int_equal(kn_k_concat(3, px, axis, &want), KN_OK);
            kn_op_session os = {.threads = threads};
            assert_int_equal(kn_fast_concat(&os, 3, px, axis, &y), KN_OK);
            assert_memory_equal(y.data, want.data, (size_t)kn_tensor_numel(&y) * sizeof(float));
            /* an input of another dtype */
            xs[1].dtype = KN_I32;
            assert_int_equal(kn_fast_concat(&os, 3, px, axis, &y), KN_ERR_UNSUPPORTED);
            xs[1].dtype = KN_F32;
            for (int i = 0; i < 3; i++) kn_tensor_free(&xs[i]);
            kn_tensor_free(&y), kn_tensor_free(&want);
        }
}

/* A tensor of `es`-byte elements (f32 or u8) filled with its byte index. */
static kn_tensor make_bytes(int rank, const int64_t *dims, size_t es)
{
    kn_tensor t;
    memset(&t, 0, sizeof t);
    assert_int_equal(kn_tensor_alloc(&t, es == 1 ? KN_U8 : KN_F32, rank, dims), KN_OK);
    for (size_t i = 0; i < t.nbytes; i++) ((unsigned char *)t.data)[i] = (unsigned char)(i * 7 + 3);
    return t;
}

/* Channels-last Concats and Splits, one short run per pixel (rows cut in
 * parallel units): runs of 16, 5 and 3 floats (64, 20 and 12 bytes: the
 * 32- and 4-byte pieces) and of 16, 5 and 3 bytes (the byte tail), on 1
 * and 2 threads, bit for bit the reference kernels'. */
static void test_concat_split_short_runs(void **st)
{
    (void)st;
    const int64_t c[3] = {16, 5, 3};
    for (size_t es = 1; es <= 4; es += 3)
        for (int threads = 1; threads <= 2; threads++) {
            kn_op_session os = {.threads = threads};
            kn_tensor xs[3];
            const kn_tensor *px[3];
            int64_t od[4] = {2, 30, 41, 0};
            for (int i = 0; i < 3; i++) {
                int64_t d[4] = {2, 30, 41, c[i]};
                xs[i] = make_bytes(4, d, es);
                px[i] = &xs[i];
                od[3] += c[i];
            }
            kn_tensor y = make_bytes(4, od, es), want = make_bytes(4, od, es);
            assert_int_equal(kn_k_concat(3, px, 3, &want), KN_OK);
            assert_int_equal(kn_fast_concat(&os, 3, px, 3, &y), KN_OK);
            assert_string_equal(os.impl, "kiln concat");
            assert_memory_equal(y.data, want.data, y.nbytes);
            /* and back: the pieces of the concatenation, along the last
             * axis and along axis 1 (runs of 41 x 24 elements) */
            int64_t starts[4] = {0}, steps[4] = {1, 1, 1, 1};
            for (int axis = 1; axis <= 3; axis += 2)
                for (int i = 0, at = 0; i < 3; at += (int)c[i], i++) {
                    int64_t pd[4] = {od[0], od[1], od[2], od[3]};
                    pd[axis] = axis == 3 ? c[i] : c[i] + 1;
                    int64_t from = axis == 3 ? at : at / 2;
                    kn_tensor piece = make_bytes(4, pd, es), ref = make_bytes(4, pd, es);
                    memset(starts, 0, sizeof starts);
                    starts[axis] = from;
                    assert_int_equal(kn_k_slice(&y, starts, steps, &ref), KN_OK);
                    os.impl = NULL;
                    assert_int_equal(kn_fast_split(&os, &y, axis, from, &piece), KN_OK);
                    assert_string_equal(os.impl, "kiln split");
                    assert_memory_equal(piece.data, ref.data, piece.nbytes);
                    /* past the end of the axis, and a piece of another shape: declined */
                    assert_int_equal(kn_fast_split(&os, &y, axis, od[axis] - pd[axis] + 1, &piece),
                                     KN_ERR_UNSUPPORTED);
                    piece.dims[axis == 3 ? 1 : 3]++;
                    assert_int_equal(kn_fast_split(&os, &y, axis, from, &piece), KN_ERR_UNSUPPORTED);
                    piece.dims[axis == 3 ? 1 : 3]--;
                    kn_tensor_free(&piece), kn_tensor_free(&ref);
                }
            for (int i = 0; i < 3; i++) kn_tensor_free(&xs[i]);
            kn_tensor_free(&y), kn_tensor_free(&want);
        }
}

/* Add, Sub, Mul, Div of f32 tensors of one shape, and by a single value:
 * bit for bit the reference's (double rounded to float is the float
 * operation for these four); a broadcast other than a single value
 * declines. */
static void test_binary(void **st)
{
    (void)st;
    const kn_binary_op ops[] = {KN_BIN_ADD, KN_BIN_SUB, KN_BIN_MUL, KN_BIN_DIV};
    int64_t d[3] = {3, 17, 1001}, one = 1, row[3] = {1, 1, 1001};
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
        for (int scalar = 0; scalar < 2; scalar++) {
            kn_tensor a = make(3, d, true), b = scalar ? make(1, &one, true) : make(3, d, true);
            kn_tensor y = make(3, d, false), want = make(3, d, false);
            assert_int_equal(kn_k_binary(ops[o], &a, &b, &want), KN_OK);
            kn_op_session os = {.threads = 2};
            assert_int_equal(kn_fast_binary(&os, ops[o], &a, &b, &y), KN_OK);
            assert_memory_equal(y.data, want.data, (size_t)kn_tensor_numel(&y) * sizeof(float));
            kn_tensor r = make(3, row, true); /* a row broadcast: the reference's */
            assert_int_equal(kn_fast_binary(&os, ops[o], &a, &r, &y), KN_ERR_UNSUPPORTED);
            kn_tensor_free(&a), kn_tensor_free(&b), kn_tensor_free(&y), kn_tensor_free(&want), kn_tensor_free(&r);
        }
}

/* Transpose of the outer dims (the innermost moves whole), against the
 * reference bit for bit, on 1 thread and 2 (one thread too: the reference
 * kernel's element-by-element walk took 10x as long on YOLOv8n's DFL
 * transpose); moving the innermost dim declines. */
static void test_transpose(void **st)
{
    (void)st;
    int64_t xd[4] = {2, 4, 16, 300}, yd[4] = {16, 2, 4, 300};
    int perm[4] = {2, 0, 1, 3}, inner[4] = {0, 1, 3, 2};
    kn_tensor x = make(4, xd, true), want = make(4, yd, false);
    assert_int_equal(kn_k_transpose(&x, perm, &want), KN_OK);
    for (int threads = 1; threads <= 2; threads++) {
        kn_tensor y = make(4, yd, false);
        kn_op_session os = {.threads = threads};
        assert_int_equal(kn_fast_transpose(&os, &x, perm, &y), KN_OK);
        assert_memory_equal(y.data, want.data, (size_t)kn_tensor_numel(&y) * sizeof(float));
        assert_int_equal(kn_fast_transpose(&os, &x, inner, &y), KN_ERR_UNSUPPORTED);
        kn_tensor_free(&y);
    }
    kn_tensor_free(&x), kn_tensor_free(&want);
}

/* kn_op_alloc_output: an output with a place in the arena of exactly its
 * bytes gets a borrowed view of it (zero-filled only when asked); one of
 * other bytes, one without a place, one outside the node's output array and
 * every output without a session are allocated as before. */
static void test_alloc_output(void **st)
{
    (void)st;
    float arena[24];
    int64_t d6[2] = {2, 3}, d4[2] = {2, 2};
    kn_tensor outs[2];
    memset(outs, 0, sizeof outs);
    void *dest[2] = {arena, NULL};
    size_t bytes[2] = {sizeof(float) * 6, 0};
    kn_op_session os = {.threads = 1, .outs = outs, .out_dest = dest, .out_dest_bytes = bytes, .n_outs = 2};
    kn_opdesc d;
    memset(&d, 0, sizeof d);
    d.name = "n", d.op_type = "Concat", d.sess = &os;
    for (int i = 0; i < 24; i++) arena[i] = 7.0f;
    assert_int_equal(kn_op_alloc_output(&d, &outs[0], KN_F32, 2, d6, false), KN_OK);
    assert_ptr_equal(outs[0].data, arena);
    assert_int_equal(outs[0].own, KN_BORROWED);
    assert_int_equal(outs[0].nbytes, sizeof(float) * 6);
    assert_true(arena[0] == 7.0f && arena[5] == 7.0f);
    assert_int_equal(kn_op_alloc_output(&d, &outs[0], KN_F32, 2, d6, true), KN_OK);
    assert_true(arena[0] == 0.0f && arena[5] == 0.0f && arena[6] == 7.0f);
    kn_tensor_free(&outs[0]); /* borrowed: the arena stays */
    assert_true(arena[6] == 7.0f);
    assert_int_equal(kn_op_alloc_output(&d, &outs[0], KN_F32, 2, d4, false), KN_OK); /* other bytes */
    assert_ptr_not_equal(outs[0].data, arena);
    assert_int_equal(outs[0].own, KN_OWNED);
    kn_tensor_free(&outs[0]);
    assert_int_equal(kn_op_alloc_output(&d, &outs[1], KN_F32, 2, d6, false), KN_OK); /* no place */
    assert_int_equal(outs[1].own, KN_OWNED);
    kn_tensor_free(&outs[1]);
    kn_tensor other;
    assert_int_equal(kn_op_alloc_output(&d, &other, KN_F32, 2, d6, false), KN_OK); /* not an output */
    assert_int_equal(other.own, KN_OWNED);
    kn_tensor_free(&other);
    d.sess = NULL;
    assert_int_equal(kn_op_alloc_output(&d, &outs[0], KN_F32, 2, d6, false), KN_OK);
    assert_int_equal(outs[0].own, KN_OWNED);
    kn_tensor_free(&outs[0]);
}

/* The resizes both Resize tests run: nearest 2x (the row and column
 * repeats), nearest by 1.5, linear by 2 and cubic by 3. */
static const struct {
    kn_resize_mode mode;
    kn_resize_coord coord;
    double s;
} RESIZES[] = {{KN_RESIZE_NEAREST, KN_COORD_ASYMMETRIC, 2.0},
               {KN_RESIZE_NEAREST, KN_COORD_HALF_PIXEL, 1.5},
               {KN_RESIZE_LINEAR, KN_COORD_HALF_PIXEL, 2.0},
               {KN_RESIZE_CUBIC, KN_COORD_ALIGN_CORNERS, 3.0}};
enum { N_RESIZES = sizeof RESIZES / sizeof *RESIZES };

/* Resize on groups of planes against the reference over the whole tensor,
 * bit for bit, each of RESIZES, over 2 x 5 planes (uneven groups). */
static void test_resize(void **st)
{
    (void)st;
    for (size_t c = 0; c < N_RESIZES; c++)
        for (int threads = 1; threads <= 2; threads++) {
            int64_t xd[4] = {2, 5, 24, 40}, od[4] = {2, 5, (int64_t)(24 * RESIZES[c].s), (int64_t)(40 * RESIZES[c].s)};
            kn_tensor x = make(4, xd, true), y = make(4, od, false), want = make(4, od, false);
            kn_resize_params p;
            memset(&p, 0, sizeof p);
            p.mode = RESIZES[c].mode, p.coord = RESIZES[c].coord, p.cubic_a = -0.75;
            p.scales[0] = p.scales[1] = 1.0, p.scales[2] = p.scales[3] = RESIZES[c].s;
            assert_int_equal(kn_k_resize(&x, &p, &want), KN_OK);
            kn_op_session os = {.threads = threads};
            int rc = kn_fast_resize(&os, &x, &p, &y);
            if (threads == 1) {
                assert_int_equal(rc, KN_ERR_UNSUPPORTED);
            } else {
                assert_int_equal(rc, KN_OK);
                assert_memory_equal(y.data, want.data, (size_t)kn_tensor_numel(&y) * sizeof(float));
            }
            kn_tensor_free(&x), kn_tensor_free(&y), kn_tensor_free(&want);
        }
}

/* A channels-last image ([N, H, W, C]: a Resize the compiler placed NHWC)
 * resized over H and W: the reference kernel's pixel path, and the fast
 * path in groups of output rows on 2 threads, each bit for bit the NCHW
 * result transposed; a range of rows outside a channels-last image is
 * refused (KN_ERR_UNSUPPORTED, so that the caller runs the whole). */
static void test_resize_nhwc(void **st)
{
    (void)st;
    int to_nhwc[4] = {0, 2, 3, 1};
    for (size_t c = 0; c < N_RESIZES; c++) {
        int64_t oh = (int64_t)(12 * RESIZES[c].s), ow = (int64_t)(20 * RESIZES[c].s);
        int64_t xd[4] = {2, 70, 12, 20}, od[4] = {2, 70, oh, ow};
        int64_t xl[4] = {2, 12, 20, 70}, ol[4] = {2, oh, ow, 70};
        kn_tensor x = make(4, xd, true), y = make(4, od, false), xn = make(4, xl, false), want = make(4, ol, false);
        kn_resize_params p;
        memset(&p, 0, sizeof p);
        p.mode = RESIZES[c].mode, p.coord = RESIZES[c].coord, p.cubic_a = -0.75;
        p.scales[0] = p.scales[1] = 1.0, p.scales[2] = p.scales[3] = RESIZES[c].s;
        assert_int_equal(kn_k_resize(&x, &p, &y), KN_OK);
        assert_int_equal(kn_k_transpose(&y, to_nhwc, &want), KN_OK);
        assert_int_equal(kn_k_transpose(&x, to_nhwc, &xn), KN_OK);
        kn_resize_params q = p;
        q.scales[1] = q.scales[2] = RESIZES[c].s, q.scales[3] = 1.0;
        kn_tensor got = make(4, ol, false);
        assert_int_equal(kn_k_resize(&xn, &q, &got), KN_OK);
        assert_memory_equal(got.data, want.data, (size_t)kn_tensor_numel(&got) * sizeof(float));
        memset(got.data, 0, got.nbytes);
        kn_op_session os = {.threads = 2};
        assert_int_equal(kn_fast_resize(&os, &xn, &q, &got), KN_OK);
        assert_memory_equal(got.data, want.data, (size_t)kn_tensor_numel(&got) * sizeof(float));
        p.rows[0] = 0, p.rows[1] = 2; /* rows of an NCHW tensor: not a channels-last image */
        assert_int_equal(kn_k_resize(&x, &p, &y), KN_ERR_UNSUPPORTED);
        q.rows[0] = 0, q.rows[1] = oh + 1; /* past its rows */
        assert_int_equal(kn_k_resize(&xn, &q, &got), KN_ERR_UNSUPPORTED);
        kn_tensor_free(&x), kn_tensor_free(&y), kn_tensor_free(&xn), kn_tensor_free(&want), kn_tensor_free(&got);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigmoid),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_alloc_output),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_concat_split_short_runs),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_resize_nhwc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
