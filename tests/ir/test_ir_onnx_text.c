/* The text form on real models: every ONNX backend node-test model that the
 * importer accepts is verified, printed in full, parsed back and printed
 * again, and the two texts must be identical. Skipped (passes) when the
 * onnx package's test data is not installed. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "ir.h"
#include "onnx_import.h"
#include "text.h"
#include "test_skip.h"

/* The node suite of the venv's onnx package: KILN_NODE_SUITE, which
 * tests/CMakeLists.txt asks the venv's Python for (no Python version is
 * written down anywhere). */
static const char *node_dir(char *buf, size_t len)
{
    const char *dir = getenv("KILN_NODE_SUITE");
    snprintf(buf, len, "%s", dir ? dir : "");
    return buf;
}

static char *print_all(const kn_model *m)
{
    kn_ir_print_opts o = kn_ir_print_defaults();
    o.max_inline_elems = -1;
    char *s = NULL;
    if (kn_ir_print_string(m, &o, &s)) fail_msg("print failed: %s", kn_last_error());
    return s;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_node_models_round_trip(void **state)
{
    (void)state;
    char dir[4096];
    DIR *d = opendir(node_dir(dir, sizeof dir));
    if (!d) KN_SKIP("no ONNX node suite at '%s' (KILN_NODE_SUITE; run scripts/install-deps)", dir);
    char **names = NULL;
    int n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            names = realloc(names, sizeof *names * (size_t)cap);
            assert_non_null(names);
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    int imported = 0, verified = 0, failures = 0;
    for (int i = 0; i < n; i++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s/model.onnx", dir, names[i]);
        kn_model *m = NULL;
        if (kn_onnx_load_file(path, &m)) goto next; /* the importer's own tests cover this */
        imported++;
        if (kn_graph_verify(m->graph)) {
            print_message("%s: verify: %s\n", names[i], kn_last_error());
            failures++;
        } else {
            verified++;
        }
        char *a = print_all(m);
        kn_model *m2 = NULL;
        if (kn_ir_parse(a, names[i], &m2)) {
            print_message("%s: parse: %s\n", names[i], kn_last_error());
            failures++;
        } else {
            char *b = print_all(m2);
            if (strcmp(a, b)) {
                print_message("%s: printed text changes on a round trip\n", names[i]);
                failures++;
            }
            free(b);
            kn_model_free(m2);
        }
        free(a);
    next:
        kn_model_free(m);
        free(names[i]);
    }
    free(names);
    print_message("%d node models imported, %d verified, %d failures\n", imported, verified, failures);
    assert_int_equal(failures, 0);
    /* onnx 1.15's suite has 1252 cases, about 1180 of which import: an
     * importer that refuses most of them must not pass as "no failures" */
    assert_true(n > 1200);
    assert_true(imported > 1100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_models_round_trip),
    };
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
