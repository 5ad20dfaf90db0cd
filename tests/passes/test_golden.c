/* Golden and numerical tests of every pass.
 *
 * Each tests/passes/golden/<pass>-<case>.kir starts with
 *     // RUN: --passes a,b [--precision fp32|bf16|mixed]
 * and is run through those passes with --verify-each; the printed IR must
 * equal <pass>-<case>.expected.kir (whose leading // lines are ignored),
 * followed by the passes' remarks as "// remark: PASS: TEXT" lines.
 * KILN_UPDATE_GOLDEN=1 rewrites the expected files that differ, and those
 * cases still fail on that run (check the diff, then run again).
 *
 * The same case is then a numerical test: the reference evaluator runs the
 * graph before and after the passes on the same random inputs, and every
 * output must agree to 1e-5 (relative, absolute near zero). */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_files.h"

#include "eval.h"
#include "pass.h"
#include "text.h"

#define GOLDEN_DIR "passes/golden"
#define MAX_IO 16

static kn_model *load(const char *path, const char *text)
{
    kn_model *m = NULL;
    if (kn_ir_parse(text, path, &m)) fail_msg("%s: %s", path, kn_last_error());
    if (kn_graph_toposort(m->graph) || kn_graph_infer(m->graph)) fail_msg("%s: %s", path, kn_last_error());
    return m;
}

/* Deterministic inputs in [-2, 2) (floats) or small integers. */
static void make_inputs(const kn_graph *g, kn_tensor *in, const char **names, int *n)
{
    uint32_t seed = 12345;
    *n = 0;
    for (int i = 0; i < g->n_inputs && *n < MAX_IO; i++) {
        const kn_value *v = g->inputs[i];
        if (v->const_data) continue;
        if (v->shape.rank < 0) fail_msg("input '%s' needs a known rank for the numerical test", v->name);
        int64_t dims[KN_MAX_RANK];
        for (int d = 0; d < v->shape.rank; d++) dims[d] = v->shape.dims[d] >= 0 ? v->shape.dims[d] : 2; /* symbolic: 2 */
        kn_tensor *t = &in[*n];
        assert_int_equal(kn_tensor_alloc(t, v->dtype, v->shape.rank, dims), KN_OK);
        int64_t ne = kn_tensor_numel(t);
        for (int64_t k = 0; k < ne; k++) {
            seed = seed * 1664525u + 1013904223u;
            double r = (double)(seed >> 8) / (double)(1u << 24) * 4.0 - 2.0;
            if (v->dtype == KN_F32) ((float *)t->data)[k] = (float)r;
            else if (v->dtype == KN_F64) ((double *)t->data)[k] = r;
            else if (v->dtype == KN_I64) ((int64_t *)t->data)[k] = (int64_t)(r * 4);
            else if (v->dtype == KN_BOOL) ((unsigned char *)t->data)[k] = r > 0;
        }
        names[(*n)++] = v->name;
    }
}

static void compare_outputs(const char *path, const kn_tensor *a, const kn_tensor *b, int n)
{
    for (int i = 0; i < n; i++) {
        if (a[i].dtype != b[i].dtype || a[i].rank != b[i].rank || a[i].nbytes != b[i].nbytes)
            fail_msg("%s: output %d changed type or shape", path, i);
        if (a[i].dtype != KN_F32) {
            if (a[i].nbytes && memcmp(a[i].data, b[i].data, a[i].nbytes)) fail_msg("%s: output %d differs", path, i);
            continue;
        }
        const float *x = a[i].data, *y = b[i].data;
        for (int64_t k = 0; k < kn_tensor_numel(&a[i]); k++) {
            double tol = 1e-5 * fmax(1.0, fabs((double)x[k]));
            if (!(fabs((double)x[k] - (double)y[k]) <= tol))
                fail_msg("%s: output %d element %lld: %.9g before the passes, %.9g after", path, i, (long long)k, x[k],
                         y[k]);
        }
    }
}

static void check_numerics(const char *path, kn_model *before, kn_model *after)
{
    kn_tensor in[MAX_IO] = {{0}}, out0[MAX_IO] = {{0}}, out1[MAX_IO] = {{0}};
    const char *names[MAX_IO];
    int n_in, n_out = before->graph->n_outputs;
    assert_true(n_out <= MAX_IO);
    make_inputs(before->graph, in, names, &n_in);
    if (kn_eval_model(before, n_in, names, in, out0)) fail_msg("%s: before: %s", path, kn_last_error());
    if (kn_eval_model(after, n_in, names, in, out1)) fail_msg("%s: after: %s", path, kn_last_error());
    compare_outputs(path, out0, out1, n_out);
    for (int i = 0; i < MAX_IO; i++) kn_tensor_free(&in[i]), kn_tensor_free(&out0[i]), kn_tensor_free(&out1[i]);
}

static void run_case(void **state)
{
    const char *path = *state;
    char *text = kn_test_read_file(path);
    assert_non_null(text);
    char passes[256], precision[16] = "fp32";
    int got_args = sscanf(text, "// RUN: --passes %255s --precision %15s", passes, precision);
    if (got_args < 1) fail_msg("%s: first line must be // RUN: --passes LIST [--precision fp32|bf16|mixed]", path);
    kn_model *m = load(path, text), *orig = load(path, text);
    kn_pass_log log = {0};
    kn_pipeline_opts po = {.passes = passes, .verify_each = true};
    if (!strcmp(precision, "bf16")) po.precision = KN_PRECISION_BF16;
    else if (!strcmp(precision, "mixed")) po.precision = KN_PRECISION_MIXED;
    else if (strcmp(precision, "fp32")) fail_msg("%s: --precision %s: expected fp32, bf16 or mixed", path, precision);
    if (kn_pass_run_pipeline(m, &po, &log)) fail_msg("%s: %s", path, kn_last_error());
    char *got = NULL;
    size_t got_len = 0;
    FILE *f = open_memstream(&got, &got_len);
    assert_non_null(f);
    assert_int_equal(kn_ir_print(m, f), KN_OK);
    /* near misses are part of what a pass must get right */
    for (int i = 0; i < log.n_remarks; i++) fprintf(f, "// remark: %s: %s\n", log.remarks[i].pass, log.remarks[i].text);
    fclose(f);

    char want_path[1024];
    snprintf(want_path, sizeof want_path, "%.*s.expected.kir", (int)(strlen(path) - 4), path);
    /* Compared before any rewrite: KILN_UPDATE_GOLDEN=1 writes the new text
     * but the run that changed a file still fails, so an update can never
     * pass unreviewed (check the diff, then run again). */
    char *want = kn_test_read_file(want_path);
    bool same = want && !strcmp(kn_test_skip_comments(want), got);
    if (!same && getenv("KILN_UPDATE_GOLDEN")) {
        f = fopen(want_path, "w");
        assert_non_null(f);
        fprintf(f, "// expected output of %s (KILN_UPDATE_GOLDEN=1 regenerates)\n%s", strrchr(path, '/') + 1, got);
        fclose(f);
        fail_msg("%s: %s by KILN_UPDATE_GOLDEN=1; review the diff and run again", want_path,
                 want ? "rewritten" : "created");
    }
    if (!want) fail_msg("%s: missing (run with KILN_UPDATE_GOLDEN=1 to create it)", want_path);
    if (!same)
        fail_msg("%s: the passes printed\n%s\nbut %s expects\n%s", path, got, want_path, kn_test_skip_comments(want));
    check_numerics(path, orig, m);
    free(want);
    free(got);
    free(text);
    kn_pass_log_free(&log);
    kn_model_free(orig);
    kn_model_free(m);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void)
{
    DIR *d = opendir(GOLDEN_DIR);
    if (!d) {
        fprintf(stderr, "cannot open %s (run from tests/)\n", GOLDEN_DIR);
        return 1;
    }
    char *paths[512];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 512;) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".kir") || strstr(e->d_name, ".expected.")) continue;
        paths[n] = malloc(len + sizeof GOLDEN_DIR + 2);
        sprintf(paths[n++], "%s/%s", GOLDEN_DIR, e->d_name);
    }
    closedir(d);
    qsort(paths, (size_t)n, sizeof *paths, by_name);
    struct CMUnitTest *tests = calloc((size_t)n + 1, sizeof *tests);
    for (int i = 0; i < n; i++)
        tests[i] = (struct CMUnitTest){.name = paths[i], .test_func = run_case, .initial_state = paths[i]};
    int failed = _cmocka_run_group_tests("passes_golden", tests, (size_t)n, NULL, NULL);
    for (int i = 0; i < n; i++) free(paths[i]);
    free(tests);
    return failed;
}
