/*
 * tests/test_skip.h — skips that ctest reports as skips.
 *
 * cmocka's skip() ends a test as "skipped" but the executable still exits 0,
 * so ctest showed "Passed" for a run that did none of its work (AVX-512
 * kernels on an AVX2 CPU, a missing compiler or Python). A test that cannot
 * do some of its work says why with KN_SKIP (ends the cmocka test) or
 * KN_SKIP_PART (notes it and carries on with what it can check), and main
 * returns kn_test_status(...): the failure count if any test failed, else
 * KN_TEST_SKIP when anything was skipped, which tests/CMakeLists.txt sets as
 * every unit test's SKIP_RETURN_CODE. The "SKIP: reason" lines are what
 * `make test`'s summary (tests/lib/summary.sh) prints for skipped tests.
 *
 *     if (!cpu_has_avx512()) KN_SKIP("the CPU (or KILN_CPU_MASK) has no AVX-512F");
 *     ...
 *     return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
 */
#ifndef KILN_TEST_SKIP_H
#define KILN_TEST_SKIP_H

#include <stdio.h>

#define KN_TEST_SKIP 77

static int kn_test_skipped;

/* Notes a skipped part (printf-style reason) without ending the test. */
#define KN_SKIP_PART(...)                                                                                              \
    do {                                                                                                               \
        kn_test_skipped++;                                                                                             \
        fprintf(stderr, "SKIP: " __VA_ARGS__);                                                                         \
        fputc('\n', stderr);                                                                                           \
    } while (0)

/* Notes the reason and ends the current cmocka test as skipped. */
#define KN_SKIP(...)                                                                                                   \
    do {                                                                                                               \
        KN_SKIP_PART(__VA_ARGS__);                                                                                     \
        skip();                                                                                                        \
    } while (0)

/* main's exit status: failures first, then whether anything was skipped. */
static inline int kn_test_status(int failed) { return failed ? failed : kn_test_skipped ? KN_TEST_SKIP : 0; }

#endif
