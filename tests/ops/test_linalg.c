/* Unit tests of the linalg kernels and op definitions: hand-checked matrix
 * products (broadcasting, 1-D operands, transposes), the blocked float32 GEMM
 * against a naive loop, softmax family, einsum, Det, quantization round
 * trips and rounding, integer products and convolution, error messages; and
 * the runtime's exec functions (runtime/ops/linalg.c) called directly on a
 * descriptor with no IR, as compiled artifacts call them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "eval.h"
#include "ir.h"
#include "k_linalg.h"

/* A borrowed tensor over caller data. */
static kn_tensor view(kn_dtype dt, void *data, int rank, const int64_t *dims)
{
    kn_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    t.data = data;
    t.nbytes = kn_dtype_nbytes(dt, (size_t)kn_shape_numel(rank, dims));
    return t;
}

static kn_tensor run_matmul(const kn_tensor *a, const kn_tensor *b)
{
    int r;
    int64_t d[KN_MAX_RANK];
    kn_tensor y;
    assert_int_equal(kn_k_matmul_shape(a->rank, a->dims, b->rank, b->dims, &r, d), KN_OK);
    assert_int_equal(kn_tensor_alloc(&y, a->dtype, r, d), KN_OK);
    if (kn_k_matmul(a, b, &y)) fail_msg("%s", kn_last_error());
    return y;
}

static void test_matmul_2d_and_1d(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12}, v[3] = {1, 0, -1};
    kn_tensor ta = view(KN_F32, a, 2, (int64_t[]){2, 3}), tb = view(KN_F32, b, 2, (int64_t[]){3, 2});
    kn_tensor y = run_matmul(&ta, &tb);
    assert_int_equal(y.rank, 2);
    const float want[4] = {58, 64, 139, 154};
    for (int i = 0; i < 4; i++) assert_true(((float *)y.data)[i] == want[i]);
    kn_tensor_free(&y);

    /* [2,3] @ [3] → [2]; [3] @ [3,2] → [2]; [3] @ [3] → scalar */
    kn_tensor tv = view(KN_F32, v, 1, (int64_t[]){3});
    y = run_matmul(&ta, &tv);
    assert_int_equal(y.rank, 1);
    assert_true(((float *)y.data)[0] == -2 && ((float *)y.data)[1] == -2);
    kn_tensor_free(&y);
    y = run_matmul(&tv, &tb);
    assert_int_equal(y.rank, 1);
    assert_true(((float *)y.data)[0] == -4 && ((float *)y.data)[1] == -4);
    kn_tensor_free(&y);
    y = run_matmul(&tv, &tv);
    assert_int_equal(y.rank, 0);
    assert_true(((float *)y.data)[0] == 2);
    kn_tensor_free(&y);
}

static void test_matmul_broadcast_int(void **state)
{
    (void)state;
    /* a [2,1,2,2] @ b [3,2,2] → [2,3,2,2]; b[j] = j*I, so y[i][j] = j * a[i] */
    int32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[12] = {0, 0, 0, 0, 1, 0, 0, 1, 2, 0, 0, 2};
    kn_tensor ta = view(KN_I32, a, 4, (int64_t[]){2, 1, 2, 2}), tb = view(KN_I32, b, 3, (int64_t[]){3, 2, 2});
    kn_tensor y = run_matmul(&ta, &tb);
    assert_int_equal(y.rank, 4);
    assert_int_equal(y.dims[0], 2);
    assert_int_equal(y.dims[1], 3);
    const int32_t *p = y.data;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) assert_int_equal(p[(i * 3 + j) * 4 + k], j * a[i * 4 + k]);
    kn_tensor_free(&y);
    /* int32 products wrap like two's complement instead of being UB */
    int32_t big[2] = {INT32_MAX, 2}, two[2] = {2, 0};
    kn_tensor tbig = view(KN_I32, big, 1, (int64_t[]){2}), ttwo = view(KN_I32, two, 1, (int64_t[]){2});
    y = run_matmul(&tbig, &ttwo);
    assert_int_equal(((int32_t *)y.data)[0], -2);
    kn_tensor_free(&y);
}

static void test_matmul_shape_errors(void **state)
{
    (void)state;
    int r;
    int64_t d[KN_MAX_RANK];
    assert_int_equal(kn_k_matmul_shape(2, (int64_t[]){2, 3}, 2, (int64_t[]){4, 5}, &r, d), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "inner"));
    assert_int_equal(kn_k_matmul_shape(3, (int64_t[]){2, 2, 3}, 3, (int64_t[]){3, 3, 5}, &r, d), KN_ERR_INVALID);
    assert_int_equal(kn_k_matmul_shape(0, NULL, 1, (int64_t[]){3}, &r, d), KN_ERR_INVALID);
    /* unknown dims pass through */
    assert_int_equal(kn_k_matmul_shape(3, (int64_t[]){-1, 4, -1}, 2, (int64_t[]){7, 5}, &r, d), KN_OK);
    assert_int_equal(r, 3);
    assert_true(d[0] == -1 && d[1] == 4 && d[2] == 5);
}

/* The blocked GEMM against a naive double loop, across block edges and all
 * four transpose combinations, with each micro-kernel. */
static void test_sgemm_blocked(void **state)
{
    (void)state;
    const int64_t M = 37, N = 530, K = 300;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N);
    assert_true(A && B && C);
    srand(7);
    for (int64_t i = 0; i < M * K; i++) A[i] = (float)(rand() % 200 - 100) / 37.0f;
    for (int64_t i = 0; i < K * N; i++) B[i] = (float)(rand() % 200 - 100) / 41.0f;
    for (int t = 0; t < 8; t++) {
        bool ta = t & 1, tb = t & 2;
        /* the second round forces the portable micro-kernel */
        if (t == 4) setenv("KILN_SGEMM_GENERIC", "1", 1);
        for (int64_t i = 0; i < M * N; i++) C[i] = 1.0f;
        int64_t lda = ta ? M : K, ldb = tb ? K : N;
        assert_int_equal(kn_k_sgemm(M, N, K, 0.5f, A, lda, ta, B, ldb, tb, C, N), KN_OK);
        for (int64_t i = 0; i < M; i += 5)
            for (int64_t j = 0; j < N; j += 7) {
                double s = 0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
                double want = 1.0 + 0.5 * s;
                assert_true(fabs(C[i * N + j] - want) <= 1e-3 * (1 + fabs(want)));
            }
    }
    unsetenv("KILN_SGEMM_GENERIC");
    free(A);
    free(B);
    free(C);
}

/* Splitting a product over threads must not change a single bit. */
static void test_sgemm_threads_bitwise(void **state)
{
    (void)state;
    const int64_t M = 100, N = 1000, K = 256;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C1 = calloc((size_t)(M * N), sizeof(float)), *C3 = calloc((size_t)(M * N), sizeof(float));
    assert_true(A && B && C1 && C3);
    for (int64_t i = 0; i < M * K; i++) A[i] = sinf((float)i);
    for (int64_t i = 0; i < K * N; i++) B[i] = cosf((float)i * 0.7f);
    setenv("KILN_NUM_THREADS", "1", 1);
    assert_int_equal(kn_k_sgemm(M, N, K, 1.0f, A, K, false, B, N, false, C1, N), KN_OK);
    setenv("KILN_NUM_THREADS", "3", 1);
    assert_int_equal(kn_k_sgemm(M, N, K, 1.0f, A, K, false, B, N, false, C3, N), KN_OK);
    unsetenv("KILN_NUM_THREADS");
    assert_memory_equal(C1, C3, sizeof(float) * (size_t)(M * N));
    free(A);
    free(B);
    free(C1);
    free(C3);
}

static void test_gemm_transposes_bias(void **state)
{
    (void)state;
    /* transA of [[1,2],[3,4]]; transB of [[1,0],[0,1],[2,3]] (stored [N=3, K=2]) */
    float a[4] = {1, 2, 3, 4}, bt[6] = {1, 0, 0, 1, 2, 3}, c[3] = {10, 20, 30};
    kn_tensor ta = view(KN_F32, a, 2, (int64_t[]){2, 2}), tb = view(KN_F32, bt, 2, (int64_t[]){3, 2});
    kn_tensor tc = view(KN_F32, c, 1, (int64_t[]){3}), y;
    assert_int_equal(kn_tensor_alloc(&y, KN_F32, 2, (int64_t[]){2, 3}), KN_OK);
    /* op(A) = [[1,3],[2,4]], op(B) = [[1,0,2],[0,1,3]] → [[1,3,11],[2,4,16]] */
    assert_int_equal(kn_k_gemm(&ta, &tb, &tc, true, true, 2.0, 0.5, &y), KN_OK);
    const float want[6] = {2 + 5, 6 + 10, 22 + 15, 4 + 5, 8 + 10, 32 + 15};
    for (int i = 0; i < 6; i++) assert_true(((float *)y.data)[i] == want[i]);
    kn_tensor_free(&y);
    /* the same in f64 goes through the generic path */
    double ad[4] = {1, 2, 3, 4}, bd[6] = {1, 0, 0, 1, 2, 3}, cd[3] = {10, 20, 30};
    kn_tensor tad = view(KN_F64, ad, 2, (int64_t[]){2, 2}), tbd = view(KN_F64, bd, 2, (int64_t[]){3, 2});
    kn_tensor tcd = view(KN_F64, cd, 1, (int64_t[]){3});
    assert_int_equal(kn_tensor_alloc(&y, KN_F64, 2, (int64_t[]){2, 3}), KN_OK);
    assert_int_equal(kn_k_gemm(&tad, &tbd, &tcd, true, true, 2.0, 0.5, &y), KN_OK);
    for (int i = 0; i < 6; i++) assert_true(((double *)y.data)[i] == want[i]);
    kn_tensor_free(&y);
    /* a bias that cannot broadcast is an error, not a crash */
    float bad[2] = {0, 0};
    kn_tensor tbad = view(KN_F32, bad, 1, (int64_t[]){2});
    assert_int_equal(kn_tensor_alloc(&y, KN_F32, 2, (int64_t[]){2, 3}), KN_OK);
    assert_int_equal(kn_k_gemm(&ta, &tb, &tbad, true, true, 1.0, 1.0, &y), KN_ERR_INVALID);
    kn_tensor_free(&y);
}

static void test_softmax_family(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, -1, 1000, 1000};
    kn_tensor tx = view(KN_F32, x, 2, (int64_t[]){2, 3}), y;
    assert_int_equal(kn_tensor_alloc(&y, KN_F32, 2, tx.dims), KN_OK);
    assert_int_equal(kn_k_softmax(&tx, 2, 3, 1, KN_K_SOFTMAX, &y), KN_OK);
    const float *p = y.data;
    for (int r = 0; r < 2; r++) assert_true(fabsf(p[3 * r] + p[3 * r + 1] + p[3 * r + 2] - 1.0f) < 1e-6f);
    assert_true(p[2] > p[1] && p[1] > p[0]);
    assert_true(fabsf(p[4] - 0.5f) < 1e-6f); /* large inputs do not overflow */
    assert_int_equal(kn_k_softmax(&tx, 2, 3, 1, KN_K_LOGSOFTMAX, &y), KN_OK);
    assert_true(fabsf(p[4] - logf(0.5f)) < 1e-6f);
    /* along axis 0 of [2,3]: outer 1, n 2, inner 3; first max wins for hardmax */
    float h[6] = {1, 5, 2, 1, 0, 7};
    kn_tensor th = view(KN_F32, h, 2, (int64_t[]){2, 3});
    assert_int_equal(kn_k_softmax(&th, 1, 2, 3, KN_K_HARDMAX, &y), KN_OK);
    const float want[6] = {1, 1, 0, 0, 0, 1};
    for (int i = 0; i < 6; i++) assert_true(p[i] == want[i]);
    kn_tensor_free(&y);
}

static kn_tensor run_einsum(const char *eq, int n, const kn_tensor *const *in)
{
    int ranks[4], r;
    const int64_t *dims[4];
    int64_t d[KN_MAX_RANK];
    for (int i = 0; i < n; i++) ranks[i] = in[i]->rank, dims[i] = in[i]->dims;
    if (kn_k_einsum_shape(eq, n, ranks, dims, &r, d)) fail_msg("%s", kn_last_error());
    kn_tensor y;
    assert_int_equal(kn_tensor_alloc(&y, in[0]->dtype, r, d), KN_OK);
    if (kn_k_einsum(eq, n, in, &y)) fail_msg("%s", kn_last_error());
    return y;
}

static void test_einsum(void **state)
{
    (void)state;
    double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12}, sq[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    kn_tensor ta = view(KN_F64, a, 2, (int64_t[]){2, 3}), tb = view(KN_F64, b, 2, (int64_t[]){3, 2});
    kn_tensor ts = view(KN_F64, sq, 2, (int64_t[]){3, 3});
    const kn_tensor *ab[2] = {&ta, &tb}, *s1[1] = {&ts}, *a1[1] = {&ta};
    kn_tensor y = run_einsum("ij,jk", 2, ab); /* implicit output "ik" */
    assert_int_equal(y.rank, 2);
    assert_true(((double *)y.data)[0] == 58 && ((double *)y.data)[3] == 154);
    kn_tensor_free(&y);
    y = run_einsum("ii->i", 1, s1);
    assert_true(((double *)y.data)[0] == 1 && ((double *)y.data)[1] == 5 && ((double *)y.data)[2] == 9);
    kn_tensor_free(&y);
    y = run_einsum("ii", 1, s1); /* trace */
    assert_int_equal(y.rank, 0);
    assert_true(((double *)y.data)[0] == 15);
    kn_tensor_free(&y);
    y = run_einsum("...j->j...", 1, a1);
    assert_int_equal(y.dims[0], 3);
    assert_true(((double *)y.data)[1] == 4);
    kn_tensor_free(&y);
    y = run_einsum("i j -> ", 1, a1);
    assert_true(((double *)y.data)[0] == 21);
    kn_tensor_free(&y);
    /* float32 two-operand einsums take the transpose+GEMM path: check one
     * with batch, free and contracted labels in scrambled orders */
    float x[2 * 3 * 4], z[4 * 2 * 5];
    for (int i = 0; i < 24; i++) x[i] = (float)(i % 7) - 3;
    for (int i = 0; i < 40; i++) z[i] = (float)(i % 5) - 2;
    kn_tensor tx = view(KN_F32, x, 3, (int64_t[]){2, 3, 4}), tz = view(KN_F32, z, 3, (int64_t[]){4, 2, 5});
    const kn_tensor *xz[2] = {&tx, &tz};
    y = run_einsum("bik,kbj->jbi", 2, xz);
    assert_int_equal(y.rank, 3);
    assert_true(y.dims[0] == 5 && y.dims[1] == 2 && y.dims[2] == 3);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 5; j++) {
                float want = 0;
                for (int k = 0; k < 4; k++) want += x[(b * 3 + i) * 4 + k] * z[(k * 2 + b) * 5 + j];
                assert_true(((float *)y.data)[(j * 2 + b) * 3 + i] == want);
            }
    kn_tensor_free(&y);
    int ranks[2] = {2, 2};
    const int64_t *dims[2] = {ta.dims, ta.dims};
    int r;
    int64_t d[KN_MAX_RANK];
    assert_int_equal(kn_k_einsum_shape("ij,jk->ik", 2, ranks, dims, &r, d), KN_ERR_INVALID);
    assert_int_equal(kn_k_einsum_shape("ij->iz", 1, ranks, dims, &r, d), KN_ERR_INVALID);
    assert_int_equal(kn_k_einsum_shape("i#", 1, ranks, dims, &r, d), KN_ERR_INVALID);
}

static void test_det(void **state)
{
    (void)state;
    float m[2 * 9] = {2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 1, 0, 1, 0, 0, 0, 0, 1};
    kn_tensor tm = view(KN_F32, m, 3, (int64_t[]){2, 3, 3}), y;
    assert_int_equal(kn_tensor_alloc(&y, KN_F32, 1, (int64_t[]){2}), KN_OK);
    assert_int_equal(kn_k_det(&tm, &y), KN_OK);
    assert_true(fabsf(((float *)y.data)[0] - 24) < 1e-5f);
    assert_true(fabsf(((float *)y.data)[1] + 1) < 1e-6f);
    kn_tensor_free(&y);
}

static void test_quantize_round_trip(void **state)
{
    (void)state;
    /* round half to even, saturation, zero point */
    float x[6] = {0.5f, 1.5f, 2.5f, -3.0f, 1000.0f, -1000.0f}, s = 1.0f;
    uint8_t zp = 10;
    kn_tensor tx = view(KN_F32, x, 1, (int64_t[]){6}), ts = view(KN_F32, &s, 0, NULL);
    kn_tensor tz = view(KN_U8, &zp, 0, NULL), q, back;
    assert_int_equal(kn_tensor_alloc(&q, KN_U8, 1, tx.dims), KN_OK);
    assert_int_equal(kn_k_quantize(&tx, &ts, &tz, 1, 0, &q), KN_OK);
    const uint8_t want[6] = {10, 12, 12, 7, 255, 0};
    for (int i = 0; i < 6; i++) assert_int_equal(((uint8_t *)q.data)[i], want[i]);
    kn_tensor_free(&q);

    /* per-axis int8: quantize then dequantize recovers values to within scale/2 */
    float v[6] = {-1.0f, 0.3f, 0.9f, 10.0f, -7.5f, 3.3f}, sc[2] = {0.01f, 0.1f};
    int8_t z2[2] = {0, -3};
    kn_tensor tv = view(KN_F32, v, 2, (int64_t[]){2, 3}), tsc = view(KN_F32, sc, 1, (int64_t[]){2});
    kn_tensor tz2 = view(KN_I8, z2, 1, (int64_t[]){2});
    assert_int_equal(kn_tensor_alloc(&q, KN_I8, 2, tv.dims), KN_OK);
    assert_int_equal(kn_k_quantize(&tv, &tsc, &tz2, 0, 0, &q), KN_OK);
    assert_int_equal(kn_tensor_alloc(&back, KN_F32, 2, tv.dims), KN_OK);
    assert_int_equal(kn_k_dequantize(&q, &tsc, &tz2, 0, 0, &back), KN_OK);
    for (int i = 0; i < 6; i++) assert_true(fabsf(((float *)back.data)[i] - v[i]) <= sc[i / 3] / 2 + 1e-6f);
    kn_tensor_free(&back);
    /* a per-axis scale of the wrong length is rejected */
    float sc3[3] = {1, 1, 1};
    kn_tensor tsc3 = view(KN_F32, sc3, 1, (int64_t[]){3});
    assert_int_equal(kn_k_quantize(&tv, &tsc3, NULL, 0, 0, &q), KN_ERR_INVALID);
    kn_tensor_free(&q);

    /* dynamic quantization covers 0 and maps the range onto 0..255 */
    float dx[4] = {-1.0f, 0.0f, 1.0f, 2.0f};
    kn_tensor tdx = view(KN_F32, dx, 1, (int64_t[]){4}), y, ys, yz;
    assert_int_equal(kn_tensor_alloc(&y, KN_U8, 1, tdx.dims), KN_OK);
    assert_int_equal(kn_tensor_alloc(&ys, KN_F32, 0, NULL), KN_OK);
    assert_int_equal(kn_tensor_alloc(&yz, KN_U8, 0, NULL), KN_OK);
    assert_int_equal(kn_k_dynamic_quantize(&tdx, &y, &ys, &yz), KN_OK);
    assert_true(fabsf(((float *)ys.data)[0] - 3.0f / 255) < 1e-7f);
    assert_int_equal(((uint8_t *)yz.data)[0], 85);
    assert_int_equal(((uint8_t *)y.data)[0], 0);
    assert_int_equal(((uint8_t *)y.data)[3], 255);
    kn_tensor_free(&y);
    kn_tensor_free(&ys);
    kn_tensor_free(&yz);
}

static void test_integer_products(void **state)
{
    (void)state;
    /* (a - [1,2] per row) @ (b - [0,1] per column) */
    uint8_t a[4] = {2, 3, 4, 5}, b[4] = {1, 2, 3, 4}, azp[2] = {1, 2}, bzp[2] = {0, 1};
    kn_tensor ta = view(KN_U8, a, 2, (int64_t[]){2, 2}), tb = view(KN_U8, b, 2, (int64_t[]){2, 2});
    kn_tensor tza = view(KN_U8, azp, 1, (int64_t[]){2}), tzb = view(KN_U8, bzp, 1, (int64_t[]){2}), y;
    assert_int_equal(kn_tensor_alloc(&y, KN_I32, 2, (int64_t[]){2, 2}), KN_OK);
    assert_int_equal(kn_k_matmul_integer(&ta, &tb, &tza, &tzb, &y), KN_OK);
    /* A' = [[1,2],[2,3]], B' = [[1,1],[3,3]] */
    const int32_t want[4] = {7, 7, 11, 11};
    for (int i = 0; i < 4; i++) assert_int_equal(((int32_t *)y.data)[i], want[i]);
    kn_tensor_free(&y);

    /* ConvInteger: 1x1x3x3 input, 2x2 kernel of ones, x_zp 1, pads 1 on top/left */
    uint8_t x[9] = {2, 2, 2, 2, 2, 2, 2, 2, 2}, w[4] = {1, 1, 1, 1}, xz = 1;
    kn_tensor tx = view(KN_U8, x, 4, (int64_t[]){1, 1, 3, 3}), tw = view(KN_U8, w, 4, (int64_t[]){1, 1, 2, 2});
    kn_tensor txz = view(KN_U8, &xz, 0, NULL);
    kn_k_conv_params p = {.nsp = 2, .group = 1, .kernel = {2, 2}, .strides = {1, 1}, .dilations = {1, 1},
                          .pad_begin = {1, 1}, .pad_end = {0, 0}};
    int64_t od[2];
    assert_int_equal(kn_k_conv_out_dims(&p, tx.dims + 2, od), KN_OK);
    assert_true(od[0] == 3 && od[1] == 3);
    assert_int_equal(kn_tensor_alloc(&y, KN_I32, 4, (int64_t[]){1, 1, 3, 3}), KN_OK);
    assert_int_equal(kn_k_conv_integer(&tx, &tw, &txz, NULL, NULL, &p, &y), KN_OK);
    const int32_t wc[9] = {1, 2, 2, 2, 4, 4, 2, 4, 4};
    for (int i = 0; i < 9; i++) assert_int_equal(((int32_t *)y.data)[i], wc[i]);
    kn_tensor_free(&y);
    /* a kernel bigger than the padded input is an error */
    kn_k_conv_params big = p;
    big.kernel[0] = 9;
    assert_int_equal(kn_k_conv_out_dims(&big, tx.dims + 2, od), KN_ERR_INVALID);
}

/* Through the IR: a mismatched inner dim is reported with the node's name by
 * inference and by evaluation, and a good graph evaluates. */
static void test_graph_matmul_errors(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    assert_non_null(m);
    kn_model_set_opset(m, "", 17);
    kn_graph *g = m->graph;
    kn_shape sa = {2, {-1, 3}, {"batch", NULL}}, sb = {2, {4, 5}, {NULL, NULL}};
    kn_value *ins[2] = {kn_graph_add_input(g, "a", KN_F32, &sa), kn_graph_add_input(g, "b", KN_F32, &sb)};
    kn_node *n = kn_node_create(g, KN_OP_MatMul, "proj_7", 2, ins, 1);
    assert_non_null(n);
    kn_graph_add_output(g, n->outputs[0]);
    assert_int_not_equal(kn_graph_infer(g), KN_OK);
    assert_non_null(strstr(kn_last_error(), "proj_7"));
    assert_non_null(strstr(kn_last_error(), "inner"));
    kn_model_free(m);

    m = kn_model_create();
    kn_model_set_opset(m, "", 17);
    g = m->graph;
    kn_shape sb2 = {2, {3, 2}, {NULL, NULL}};
    kn_value *ok[2] = {kn_graph_add_input(g, "a", KN_F32, &sa), kn_graph_add_input(g, "b", KN_F32, &sb2)};
    n = kn_node_create(g, KN_OP_MatMul, "mm", 2, ok, 1);
    kn_graph_add_output(g, n->outputs[0]);
    assert_int_equal(kn_graph_infer(g), KN_OK);
    assert_int_equal(n->outputs[0]->shape.rank, 2);
    assert_string_equal(n->outputs[0]->shape.sym[0], "batch");
    assert_int_equal(n->outputs[0]->shape.dims[1], 2);
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    kn_tensor t[2] = {view(KN_F32, a, 2, (int64_t[]){2, 3}), view(KN_F32, b, 2, (int64_t[]){3, 2})};
    const char *names[2] = {"a", "b"};
    kn_tensor out[1];
    memset(out, 0, sizeof out);
    int st = kn_eval_model(m, 2, names, t, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_true(((float *)out[0].data)[3] == 154);
    kn_tensor_free(&out[0]);
    kn_model_free(m);
}

/* Evaluates a one-node graph with one f32 input x; returns the output. */
static kn_tensor eval_one(kn_model *m, kn_node *n, kn_tensor *x)
{
    kn_graph_add_output(m->graph, n->outputs[0]);
    if (kn_graph_infer(m->graph)) fail_msg("%s", kn_last_error());
    const char *names[1] = {"x"};
    kn_tensor out[1];
    memset(out, 0, sizeof out);
    if (kn_eval_model(m, 1, names, x, out)) fail_msg("%s", kn_last_error());
    return out[0];
}

/* Softmax before opset 13 flattens to 2-D at axis; from 13 it uses one axis. */
static void test_graph_softmax_opsets(void **state)
{
    (void)state;
    float x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int legacy = 0; legacy < 2; legacy++) {
        kn_model *m = kn_model_create();
        assert_non_null(m);
        kn_model_set_opset(m, "", legacy ? 11 : 13);
        kn_shape sx = {3, {2, 2, 2}, {NULL, NULL, NULL}};
        kn_value *in = kn_graph_add_input(m->graph, "x", KN_F32, &sx);
        kn_node *n = kn_node_create(m->graph, KN_OP_Softmax, "sm", 1, &in, 1);
        kn_attr *a = kn_node_add_attr(n, "axis", KN_ATTR_INT);
        a->i = 1;
        kn_tensor tx = view(KN_F32, x, 3, (int64_t[]){2, 2, 2});
        kn_tensor y = eval_one(m, n, &tx);
        const float *p = y.data;
        if (legacy) { /* rows of 4: [0..3] and [4..7] each sum to 1 */
            assert_true(fabsf(p[0] + p[1] + p[2] + p[3] - 1.0f) < 1e-6f);
            assert_true(fabsf(p[3] / p[0] - expf(3.0f)) < 1e-3f);
        } else { /* pairs along axis 1: (x[0], x[2]), (x[1], x[3]), ... */
            assert_true(fabsf(p[0] + p[2] - 1.0f) < 1e-6f);
            assert_true(fabsf(p[5] + p[7] - 1.0f) < 1e-6f);
        }
        kn_tensor_free(&y);
        kn_model_free(m);
    }
}

/* Inner dims unknown at inference: evaluation reports the mismatch by name. */
static void test_eval_matmul_mismatch(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_model_set_opset(m, "", 17);
    kn_shape s = {2, {-1, -1}, {NULL, NULL}};
    kn_value *ins[2] = {kn_graph_add_input(m->graph, "a", KN_F32, &s), kn_graph_add_input(m->graph, "b", KN_F32, &s)};
    kn_node *n = kn_node_create(m->graph, KN_OP_MatMul, "attn_scores", 2, ins, 1);
    kn_graph_add_output(m->graph, n->outputs[0]);
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    float a[6] = {0}, b[8] = {0};
    kn_tensor t[2] = {view(KN_F32, a, 2, (int64_t[]){2, 3}), view(KN_F32, b, 2, (int64_t[]){4, 2})};
    const char *names[2] = {"a", "b"};
    kn_tensor out[1];
    memset(out, 0, sizeof out);
    assert_int_not_equal(kn_eval_model(m, 2, names, t, out), KN_OK);
    assert_non_null(strstr(kn_last_error(), "attn_scores"));
    assert_non_null(strstr(kn_last_error(), "inner dimensions differ"));
    kn_model_free(m);
}

/* Prints (does not assert) the float32 GEMM speed on a BERT-sized product. */
static void test_sgemm_speed_report(void **state)
{
    (void)state;
    const int64_t M = 128, N = 768, K = 768;
    float *A = calloc((size_t)(M * K), 4), *B = calloc((size_t)(K * N), 4), *C = calloc((size_t)(M * N), 4);
    assert_true(A && B && C);
    for (int64_t i = 0; i < M * K; i++) A[i] = (float)(i % 13) * 0.1f;
    for (int64_t i = 0; i < K * N; i++) B[i] = (float)(i % 7) * 0.1f;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < 5; r++) assert_int_equal(kn_k_sgemm(M, N, K, 1.0f, A, K, false, B, N, false, C, N), KN_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("sgemm 128x768x768: %.2f GFLOP/s\n", 5 * 2.0 * M * N * K / s / 1e9);
    free(A);
    free(B);
    free(C);
}

/* ---- runtime execution without the IR ---------------------------------------- */

static void test_exec_without_ir(void **state)
{
    (void)state;
    /* Gemm: Y = 2 * A * B^T with A = [[1,2],[3,4]], B = I. */
    float av[4] = {1, 2, 3, 4}, bv[4] = {1, 0, 0, 1};
    kn_tensor a = view(KN_F32, av, 2, (int64_t[]){2, 2}), b = view(KN_F32, bv, 2, (int64_t[]){2, 2});
    kn_attr gattrs[2] = {{.name = "transB", .kind = KN_ATTR_INT, .i = 1},
                         {.name = "alpha", .kind = KN_ATTR_FLOAT, .f = 2.0f}};
    kn_opdesc g = {.op = KN_OP_Gemm, .name = "gemm_rt", .op_type = "Gemm", .domain = "", .opset = 13,
                   .n_inputs = 2, .n_outputs = 1, .attrs = gattrs, .n_attrs = 2};
    const kn_tensor *gin[2] = {&a, &b};
    kn_tensor out[3] = {{0}, {0}, {0}};
    if (kn_op_exec(KN_OP_Gemm)(&g, gin, out)) fail_msg("%s", kn_last_error());
    for (int i = 0; i < 4; i++) assert_float_equal(((float *)out[0].data)[i], 2 * av[i], 0);
    kn_tensor_free(&out[0]);

    /* Softmax of zeros [1,2,2]: opset 11 flattens from axis 1 (4 elements
     * share the mass), opset 13 works along the last axis (2 elements). */
    float zv[4] = {0};
    kn_tensor z = view(KN_F32, zv, 3, (int64_t[]){1, 2, 2});
    const kn_tensor *zin[1] = {&z};
    kn_opdesc sm = {.op = KN_OP_Softmax, .name = "sm_rt", .op_type = "Softmax", .domain = "", .opset = 11,
                    .n_inputs = 1, .n_outputs = 1};
    if (kn_op_exec(KN_OP_Softmax)(&sm, zin, out)) fail_msg("%s", kn_last_error());
    assert_float_equal(((float *)out[0].data)[0], 0.25f, 1e-6f);
    kn_tensor_free(&out[0]);
    sm.opset = 13;
    if (kn_op_exec(KN_OP_Softmax)(&sm, zin, out)) fail_msg("%s", kn_last_error());
    assert_float_equal(((float *)out[0].data)[0], 0.5f, 1e-6f);
    kn_tensor_free(&out[0]);

    /* DynamicQuantizeLinear with only y wanted: the others stay unallocated. */
    bool has[3] = {true, false, false};
    kn_opdesc dq = {.op = KN_OP_DynamicQuantizeLinear, .name = "dq_rt", .op_type = "DynamicQuantizeLinear",
                    .domain = "", .opset = 11, .n_inputs = 1, .n_outputs = 3, .has_output = has};
    const kn_tensor *ain[1] = {&a};
    if (kn_op_exec(KN_OP_DynamicQuantizeLinear)(&dq, ain, out)) fail_msg("%s", kn_last_error());
    assert_int_equal(out[0].dtype, KN_U8);
    assert_null(out[1].data);
    assert_null(out[2].data);
    kn_tensor_free(&out[0]);

    /* A missing operand is refused with the node's name. */
    const kn_tensor *missing[2] = {&a, NULL};
    kn_opdesc mm = {.op = KN_OP_MatMul, .name = "mm_rt", .op_type = "MatMul", .domain = "", .opset = 13,
                    .n_inputs = 2, .n_outputs = 1};
    assert_int_not_equal(kn_op_exec(KN_OP_MatMul)(&mm, missing, out), KN_OK);
    assert_non_null(strstr(kn_last_error(), "mm_rt"));
    kn_tensor_free(&out[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_2d_and_1d),
        cmocka_unit_test(test_matmul_broadcast_int),
        cmocka_unit_test(test_matmul_shape_errors),
        cmocka_unit_test(test_sgemm_blocked),
        cmocka_unit_test(test_sgemm_threads_bitwise),
        cmocka_unit_test(test_gemm_transposes_bias),
        cmocka_unit_test(test_softmax_family),
        cmocka_unit_test(test_einsum),
        cmocka_unit_test(test_det),
        cmocka_unit_test(test_quantize_round_trip),
        cmocka_unit_test(test_integer_products),
        cmocka_unit_test(test_graph_matmul_errors),
        cmocka_unit_test(test_graph_softmax_opsets),
        cmocka_unit_test(test_eval_matmul_mismatch),
        cmocka_unit_test(test_sgemm_speed_report),
        cmocka_unit_test(test_exec_without_ir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
