/*
 * tests/runtime/test_rnn_avx512.c — the recurrent layers' projection by
 * AVX-512's 8x32 kernel (kn_rnn_kern_avx512 in
 * runtime/kernels/x86/f32_rnn_avx2.c) against a double product, on row and
 * panel counts that are not multiples of its blocks; its activations and
 * recurrent product are the AVX2 ones (test_rnn.c). Skipped without AVX-512F.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../runtime/src/rnn.h"
#include "../../runtime/src/rt_internal.h"
#include "test_skip.h"

static float *filled(size_t n, unsigned seed)
{
    float *p = NULL;
    assert_int_equal(posix_memalign((void **)&p, 64, n * sizeof *p), 0);
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f;
    return p;
}

static void test_projection(void **state)
{
    (void)state;
    if (!(kn_cpu_features() & KN_CPU_AVX512F)) KN_SKIP("the CPU (or KILN_CPU_MASK) has no AVX-512F");
    for (int64_t M = 1; M <= 19; M += 9)
        for (int64_t np = 1; np <= 3; np++) {
            const int64_t K = 29, lda = K + 1, ldc = np * 16 + 3;
            float *A = filled((size_t)(M * lda), 1), *P = filled((size_t)(np * K * 16), 2),
                  *bias = filled((size_t)np * 16, 3), *C = filled((size_t)(M * ldc), 4);
            kn_rnn_kern_avx512.gemm(A, lda, M, K, P, np, bias, C, ldc);
            for (int64_t m = 0; m < M; m++)
                for (int64_t c = 0; c < np * 16; c++) {
                    double s = bias[c];
                    for (int64_t k = 0; k < K; k++) s += (double)A[m * lda + k] * P[(c / 16) * K * 16 + k * 16 + c % 16];
                    assert_true(fabs(C[m * ldc + c] - s) <= 1e-5 * (1 + fabs(s)));
                }
            free(A), free(P), free(bias), free(C);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_projection)};
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
