/* The pass manager: pipelines, --passes lists, --print-after, --verify-each
 * and statistics, on a small graph with dead nodes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pass.h"
#include "text.h"

/* %dead1 and %dead2 feed nothing; %b feeds the output. */
static const char *const k_model = "kiln-ir v1\n"
                                   "opset \"\" 17\n"
                                   "graph main(%a: f32[2,3]) {\n"
                                   "  %b: f32[2,3] = Relu(%a) #\"live\"\n"
                                   "  %dead1: f32[2,3] = Neg(%a) #\"d1\"\n"
                                   "  %dead2: f32[2,3] = Abs(%dead1) #\"d2\"\n"
                                   "  return %b\n"
                                   "}\n";

static kn_model *parse(void)
{
    kn_model *m = NULL;
    assert_int_equal(kn_ir_parse(k_model, "test.kir", &m), KN_OK);
    assert_int_equal(kn_graph_toposort(m->graph), KN_OK);
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    return m;
}

static void test_dce_removes_dead_chain(void **state)
{
    (void)state;
    kn_model *m = parse();
    kn_pass_log log = {0};
    kn_pipeline_opts po = {.opt_level = 3, .passes = "dce", .verify_each = true};
    assert_int_equal(kn_pass_run_pipeline(m, &po, &log), KN_OK);
    assert_int_equal(m->graph->n_nodes, 1);
    assert_string_equal(m->graph->nodes[0]->name, "live");
    assert_int_equal(log.n_stats, 1);
    assert_string_equal(log.stats[0].pass, "dce");
    assert_int_equal(log.stats[0].nodes_before, 3);
    assert_int_equal(log.stats[0].nodes_after, 1);
    assert_int_equal(log.stats[0].rewrites, 2);
    kn_pass_log_free(&log);
    kn_model_free(m);
}

static void test_print_after(void **state)
{
    (void)state;
    kn_model *m = parse();
    kn_pass_log log = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    kn_pipeline_opts po = {.passes = "dce,dce", .print_after = "dce", .print_to = f};
    assert_int_equal(kn_pass_run_pipeline(m, &po, &log), KN_OK);
    fclose(f);
    /* printed after each run; the second run found nothing to do */
    assert_non_null(strstr(buf, "; IR after pass 'dce'\n"));
    assert_non_null(strstr(buf, "; IR after pass 'dce' (unchanged)\n"));
    assert_null(strstr(buf, "Neg("));
    assert_non_null(strstr(buf, "Relu(%a)"));
    assert_int_equal(log.stats[0].runs, 2);
    free(buf);
    kn_pass_log_free(&log);
    kn_model_free(m);
}

static void test_unknown_pass_names_it(void **state)
{
    (void)state;
    kn_model *m = parse();
    kn_pass_log log = {0};
    kn_pipeline_opts po = {.passes = "dce,frobnicate"};
    assert_int_equal(kn_pass_run_pipeline(m, &po, &log), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "unknown pass 'frobnicate'"));
    /* nothing ran: the list is checked before the first pass */
    assert_int_equal(m->graph->n_nodes, 3);
    kn_pipeline_opts bad_print = {.passes = "dce", .print_after = "nope"};
    assert_int_equal(kn_pass_run_pipeline(m, &bad_print, &log), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "--print-after: unknown pass 'nope'"));
    kn_pipeline_opts bad_level = {.opt_level = 7};
    assert_int_equal(kn_pass_run_pipeline(m, &bad_level, &log), KN_ERR_INVALID);
    kn_pass_log_free(&log);
    kn_model_free(m);
}

static void test_remarks_and_table(void **state)
{
    (void)state;
    int n = 0;
    const kn_pass_info *t = kn_pass_table(&n);
    assert_true(n >= 1);
    for (int i = 0; i < n; i++) {
        assert_ptr_equal(kn_pass_find(t[i].name), &t[i]);
        assert_non_null(t[i].summary);
    }
    kn_pass_log log = {0};
    kn_pass_ctx ctx = {.log = &log, .pass = "fuse-test"};
    kn_pass_remark(&ctx, "Conv '%s' + Relu '%s': Conv output has %d users", "c12", "r12", 2);
    assert_int_equal(log.n_remarks, 1);
    assert_string_equal(log.remarks[0].text, "Conv 'c12' + Relu 'r12': Conv output has 2 users");
    assert_string_equal(log.remarks[0].pass, "fuse-test");
    kn_pass_log_free(&log);
    assert_int_equal(log.n_remarks, 0);
}

/* Every -O pipeline names existing passes and keeps the graph valid; the
 * dead chain goes from -O1 on (-O0 only folds). */
static void test_default_pipelines(void **state)
{
    (void)state;
    for (int level = 0; level <= 3; level++) {
        kn_model *m = parse();
        kn_pass_log log = {0};
        kn_pipeline_opts po = {.opt_level = level, .verify_each = true};
        if (kn_pass_run_pipeline(m, &po, &log)) fail_msg("-O%d: %s", level, kn_last_error());
        assert_int_equal(m->graph->n_nodes, level == 0 ? 3 : 1);
        assert_non_null(strstr(kn_pass_default_pipeline(level), "fold-constants"));
        kn_pass_log_free(&log);
        kn_model_free(m);
    }
    assert_string_equal(kn_pass_default_pipeline(9), "");
}

/* A pass that rewires a graph output keeps the output's name. */
static void test_output_names_survive(void **state)
{
    (void)state;
    static const char *const text = "kiln-ir v1\nopset \"\" 17\n"
                                    "graph main(%a: f32[2]) {\n"
                                    "  %b: f32[2] = Exp(%a) #\"e\"\n"
                                    "  %out: f32[2] = Identity(%b) #\"id\"\n"
                                    "  return %out\n}\n";
    kn_model *m = NULL;
    assert_int_equal(kn_ir_parse(text, "t.kir", &m), KN_OK);
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    kn_pass_log log = {0};
    kn_pipeline_opts po = {.passes = "freeze,dce", .verify_each = true};
    assert_int_equal(kn_pass_run_pipeline(m, &po, &log), KN_OK);
    assert_int_equal(m->graph->n_nodes, 1);
    assert_string_equal(m->graph->outputs[0]->name, "out");
    assert_ptr_equal(m->graph->outputs[0]->producer, m->graph->nodes[0]);
    assert_ptr_equal(kn_graph_lookup(m->graph, "out"), m->graph->outputs[0]);
    assert_null(kn_graph_lookup(m->graph, "b")); /* the old value left the graph */
    kn_pass_log_free(&log);
    kn_model_free(m);
}

/* A value whose shape varies at run time (--max): Shape of it must stay a
 * node even though inference knows this compile's instance of it. */
static void test_varying_shape_not_folded(void **state)
{
    (void)state;
    static const char *const text = "kiln-ir v1\n"
                                     "opset \"\" 17\n"
                                     "graph main(%a: f32[4,3]) {\n"
                                     "  %s: i64[2] = Shape(%a) #\"shape\"\n"
                                     "  %b: f32[4,3] = Reshape(%a, %s) #\"reshape\"\n"
                                     "  return %b\n"
                                     "}\n";
    for (int varying = 0; varying < 2; varying++) {
        kn_model *m = NULL;
        assert_int_equal(kn_ir_parse(text, "varying.kir", &m), KN_OK);
        if (varying) m->graph->inputs[0]->flags |= KN_VALUE_VARYING_SHAPE;
        assert_int_equal(kn_graph_toposort(m->graph), KN_OK);
        assert_int_equal(kn_graph_infer(m->graph), KN_OK);
        kn_pass_log log = {0};
        kn_pipeline_opts po = {.opt_level = 3, .verify_each = true};
        int st = kn_pass_run_pipeline(m, &po, &log);
        if (st) fprintf(stderr, "%s\n", kn_last_error());
        assert_int_equal(st, KN_OK);
        bool has_shape = false;
        for (int i = 0; i < m->graph->n_nodes; i++) has_shape |= m->graph->nodes[i]->op == KN_OP_Shape;
        assert_int_equal(has_shape, varying);
        kn_pass_log_free(&log);
        kn_model_free(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dce_removes_dead_chain),
        cmocka_unit_test(test_print_after),
        cmocka_unit_test(test_unknown_pass_names_it),
        cmocka_unit_test(test_remarks_and_table),
        cmocka_unit_test(test_varying_shape_not_folded),
        cmocka_unit_test(test_default_pipelines),
        cmocka_unit_test(test_output_names_survive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
