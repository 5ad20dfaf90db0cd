/* A compiled model (the bundled digits CNN: oneDNN convolutions and Gemm,
 * generated Relu/MaxPool/Softmax) run by 8 threads x 100 runs, one session
 * per thread, gives bitwise-identical outputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cg.h"
#include "kiln/kiln.h"
#include "onnx_import.h"

#define N_THREADS 8
#define N_RUNS 100

static const kn_artifact *g_art;
static float g_input[64];
static float g_expected[10];

static void *worker(void *arg)
{
    int *mismatches = arg;
    kn_session *s = NULL;
    if (kn_session_create(g_art, &s)) {
        *mismatches = -1;
        return NULL;
    }
    for (int r = 0; r < N_RUNS; r++) {
        float out[10];
        const void *in[] = {g_input};
        void *outs[] = {out};
        if (kn_session_run(s, in, outs) || memcmp(out, g_expected, sizeof out) != 0) (*mismatches)++;
    }
    kn_session_free(s);
    return NULL;
}

static void test_threads_bitwise(void **state)
{
    (void)state;
    const char *src = getenv("KILN_SRC");
    char model[4096], dir[] = "/tmp/kiln-threads.XXXXXX", so[4200];
    snprintf(model, sizeof model, "%s/samples/digits/digits.onnx", src ? src : "..");
    assert_non_null(mkdtemp(dir));
    snprintf(so, sizeof so, "%s/digits.so", dir);

    kn_model *m = NULL;
    assert_int_equal(kn_onnx_load_file(model, &m), KN_OK);
    kn_value *x = m->graph->inputs[0];
    x->shape.dims[0] = 1, x->shape.sym[0] = NULL; /* pin the batch dim */
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    kn_compile_opts o = {.output = so, .opt_level = 3, .target = "native", .name = "digits"};
    assert_int_equal(kn_compile_cpu(m, &o), KN_OK);
    kn_model_free(m);

    kn_artifact *art = NULL;
    assert_int_equal(kn_artifact_open(so, &art), KN_OK);
    g_art = art;
    for (int i = 0; i < 64; i++) g_input[i] = (float)((i * 37) % 17) / 16.0f;
    kn_session *s = NULL;
    assert_int_equal(kn_session_create(art, &s), KN_OK);
    const void *in[] = {g_input};
    void *outs[] = {g_expected};
    assert_int_equal(kn_session_run(s, in, outs), KN_OK);
    kn_session_free(s);

    pthread_t t[N_THREADS];
    int mismatches[N_THREADS] = {0};
    for (int i = 0; i < N_THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, &mismatches[i]), 0);
    for (int i = 0; i < N_THREADS; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N_THREADS; i++) assert_int_equal(mismatches[i], 0);

    kn_artifact_close(art);
    unlink(so);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads_bitwise)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
