/* Tests of the Graphviz DOT writer (ir/dot.c): the output is well-formed
 * (balanced braces and quotes, names escaped) and shows every node, input,
 * constant, output and subgraph. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir.h"
#include "text.h"

static char *dot_of(const kn_model *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(kn_ir_write_dot(m, f), KN_OK);
    fclose(f);
    return buf;
}

/* Braces balance outside strings, strings close, no raw newline in a string. */
static void assert_well_formed(const char *s)
{
    int depth = 0;
    bool in_str = false;
    for (const char *c = s; *c; c++) {
        if (in_str) {
            if (*c == '\\' && c[1]) c++;
            else if (*c == '"') in_str = false;
            else if (*c == '\n') fail_msg("newline inside a DOT string");
            continue;
        }
        if (*c == '"') in_str = true;
        else if (*c == '{') depth++;
        else if (*c == '}' && --depth < 0) fail_msg("unbalanced '}' in DOT output");
    }
    assert_false(in_str);
    assert_int_equal(depth, 0);
    assert_true(strncmp(s, "digraph ", 8) == 0);
}

/* When Graphviz is installed, it must accept the output. */
static void validate_with_graphviz(const char *dot)
{
    if (system("command -v dot >/dev/null 2>&1") != 0) return;
    char path[] = "/tmp/kiln_dot_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(dot, f);
    fclose(f);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "dot -Tsvg %s -o /dev/null", path);
    int rc = system(cmd);
    remove(path);
    if (rc != 0) fail_msg("graphviz rejected the output:\n%s", dot);
}

static void test_dot_output(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    kn_shape s = {2, {-1, 3}, {"batch", NULL}};
    kn_value *x = kn_graph_add_input(g, "in \"quoted\" \\ back", KN_F32, &s);
    kn_value *c = kn_graph_add_input(g, "cond", KN_BOOL, NULL);
    kn_tensor *t = calloc(1, sizeof *t);
    int64_t d[1] = {3};
    assert_int_equal(kn_tensor_alloc(t, KN_F32, 1, d), KN_OK);
    kn_value *w = kn_graph_add_constant(g, "weight", t);
    kn_value *ins[2] = {x, w};
    kn_node *add = kn_node_create(g, KN_OP_Add, "add\nnewline", 2, ins, 1);
    add->outputs[0]->dtype = KN_F32;
    add->outputs[0]->shape = s;
    kn_node *iff = kn_node_create(g, KN_OP_If, "if0", 1, &c, 1);
    kn_graph *br = kn_graph_create_sub(g, "then");
    br->parent_node = iff;
    kn_attr *a = kn_node_add_attr(iff, "then_branch", KN_ATTR_GRAPH);
    a->g = br;
    kn_node *neg = kn_node_create(br, KN_OP_Neg, "inner_neg", 1, &add->outputs[0], 1);
    kn_graph_add_output(br, neg->outputs[0]);
    kn_graph_add_output(g, iff->outputs[0]);
    kn_graph_add_output(g, add->outputs[0]);

    char *dot = dot_of(m);
    assert_well_formed(dot);
    char buf[128];
    const kn_node *nodes[3] = {add, iff, neg};
    for (int i = 0; i < 3; i++) {
        snprintf(buf, sizeof buf, "n%d [label=", nodes[i]->id);
        if (!strstr(dot, buf)) fail_msg("node %s missing:\n%s", nodes[i]->name, dot);
    }
    assert_non_null(strstr(dot, "label=\"in \\\"quoted\\\" \\\\ back\\nf32[batch,3]\""));
    assert_non_null(strstr(dot, "label=\"Add\\nadd\\nnewline\""));
    assert_non_null(strstr(dot, "label=\"weight\\nf32[3]\", shape=note"));
    assert_non_null(strstr(dot, "subgraph cluster_"));
    assert_non_null(strstr(dot, "label=\"If 'if0': then_branch\""));
    /* the outer value flows into the body: an edge from add to inner_neg */
    snprintf(buf, sizeof buf, "n%d -> n%d [label=\"f32[batch,3]\"]", add->id, neg->id);
    const char *e = strstr(dot, buf);
    assert_non_null(e);
    /* edges come after every cluster: inside one they would pull outer
     * nodes into it */
    const char *last_close = NULL;
    for (const char *p = dot; (p = strstr(p, "\n  }\n")); p++) last_close = p;
    assert_non_null(last_close);
    assert_true(e > last_close);
    snprintf(buf, sizeof buf, "v%d -> n%d [label=\"f32[3]\"]", w->id, add->id);
    assert_non_null(strstr(dot, buf));
    assert_non_null(strstr(dot, "out0_0 [label=\"if0:0\""));
    assert_non_null(strstr(dot, "out0_1 [label=\"add\\nnewline:0\""));
    validate_with_graphviz(dot);
    free(dot);
    kn_model_free(m);
}

static void test_dot_empty_model(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    char *dot = dot_of(m);
    assert_well_formed(dot);
    assert_non_null(strstr(dot, "digraph \"main\" {"));
    free(dot);
    kn_model_free(m);
    assert_int_not_equal(kn_ir_write_dot(NULL, stdout), KN_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_output),
        cmocka_unit_test(test_dot_empty_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
