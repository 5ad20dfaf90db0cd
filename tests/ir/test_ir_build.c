/* Unit tests of IR construction (ir/graph.c): models, values, nodes, users
 * lists, rewiring helpers, attributes and topological sorting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir.h"

static kn_tensor *mk_f32(int rank, const int64_t *dims, const float *vals)
{
    kn_tensor *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_int_equal(kn_tensor_alloc(t, KN_F32, rank, dims), KN_OK);
    if (vals) memcpy(t->data, vals, t->nbytes);
    return t;
}

static bool has_use(const kn_value *v, const kn_node *n, int i)
{
    for (int k = 0; k < v->n_users; k++)
        if (v->users[k].node == n && v->users[k].index == i) return true;
    return false;
}

static void test_model_create(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    assert_non_null(m);
    assert_non_null(m->graph);
    assert_string_equal(m->graph->name, "main");
    assert_null(m->graph->parent);
    assert_int_equal(m->graph->n_nodes, 0);
    assert_int_equal(kn_model_opset(m, ""), 0);
    assert_int_equal(kn_model_set_opset(m, "ai.onnx", 17), KN_OK);
    assert_int_equal(kn_model_opset(m, ""), 17);
    assert_int_equal(kn_model_set_opset(m, "", 18), KN_OK);
    assert_int_equal(m->n_opsets, 1);
    assert_int_equal(kn_model_opset(m, "ai.onnx"), 18);
    assert_int_equal(kn_model_set_opset(m, "com.microsoft", 1), KN_OK);
    assert_int_equal(kn_model_opset(m, "com.microsoft"), 1);
    assert_int_equal(kn_model_opset(m, "kiln"), 0);
    kn_model_free(m);
    kn_model_free(NULL);
}

static void test_inputs_constants_nodes(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    kn_shape s = {2, {1, 8}, {NULL, NULL}};
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, &s);
    assert_non_null(x);
    assert_true(x->flags & KN_VALUE_GRAPH_INPUT);
    assert_int_equal(g->n_inputs, 1);
    assert_ptr_equal(g->inputs[0], x);
    assert_int_equal(x->shape.rank, 2);
    assert_int_equal(x->shape.dims[1], 8);

    int64_t d[1] = {8};
    kn_value *b = kn_graph_add_constant(g, "b", mk_f32(1, d, NULL));
    assert_non_null(b);
    assert_non_null(b->const_data);
    assert_int_equal(b->dtype, KN_F32);
    assert_int_equal(b->shape.rank, 1);
    assert_null(b->producer);
    assert_int_not_equal(b->id, x->id);

    kn_value *ins[2] = {x, b};
    kn_node *add = kn_node_create(g, KN_OP_Add, "add0", 2, ins, 1);
    assert_non_null(add);
    assert_string_equal(add->op_type, "Add");
    assert_string_equal(add->domain, "");
    assert_string_equal(add->outputs[0]->name, "add0:0");
    assert_ptr_equal(add->outputs[0]->producer, add);
    assert_int_equal(add->outputs[0]->producer_index, 0);
    assert_int_equal(x->n_users, 1);
    assert_true(has_use(x, add, 0));
    assert_true(has_use(b, add, 1));

    kn_node *relu = kn_node_create(g, KN_OP_Relu, NULL, 1, &add->outputs[0], 1);
    assert_non_null(relu);
    assert_true(strlen(relu->name) > 0);
    assert_string_not_equal(relu->name, add->name);
    assert_int_equal(g->n_nodes, 2);
    assert_int_equal(kn_graph_add_output(g, relu->outputs[0]), KN_OK);
    assert_true(relu->outputs[0]->flags & KN_VALUE_GRAPH_OUTPUT);

    /* names are unique within a graph */
    assert_null(kn_graph_add_input(g, "x", KN_F32, &s));
    assert_non_null(strstr(kn_last_error(), "'x' is defined more than once"));
    assert_ptr_equal(kn_graph_lookup(g, "add0:0"), add->outputs[0]);
    assert_null(kn_graph_lookup(g, "nope"));

    /* named outputs, with an omitted optional one; unknown op types are kept */
    const char *names[2] = {"d", NULL};
    kn_node *drop = kn_node_create_named(g, "Dropout", "ai.onnx", "drop", 1, &x, 2, names);
    assert_non_null(drop);
    assert_int_equal(drop->op, KN_OP_Dropout);
    assert_string_equal(drop->domain, "");
    assert_null(drop->outputs[1]);
    const char *onames[1] = {"o"};
    kn_node *odd = kn_node_create_named(g, "NoSuchOp", "com.example", "odd", 1, &x, 1, onames);
    assert_non_null(odd);
    assert_int_equal(odd->op, KN_OP_UNKNOWN);
    assert_null(kn_node_create_named(g, "Relu", "", "dup", 1, &x, 1, names));
    assert_non_null(strstr(kn_last_error(), "'d' is defined more than once"));
    kn_model_free(m);
}

static void test_set_input_and_replace_uses(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, NULL);
    kn_value *y = kn_graph_add_input(g, "y", KN_F32, NULL);
    kn_value *ins[2] = {x, x};
    kn_node *mul = kn_node_create(g, KN_OP_Mul, "mul", 2, ins, 1);
    kn_node *neg = kn_node_create(g, KN_OP_Neg, "neg", 1, &x, 1);
    kn_graph_add_output(g, x);
    assert_int_equal(x->n_users, 3);

    kn_node_set_input(mul, 1, y);
    assert_int_equal(x->n_users, 2);
    assert_true(has_use(y, mul, 1));
    assert_false(has_use(x, mul, 1));
    assert_ptr_equal(mul->inputs[1], y);

    kn_node_set_input(mul, 0, NULL);
    assert_null(mul->inputs[0]);
    assert_int_equal(x->n_users, 1);
    kn_node_set_input(mul, 0, x);

    kn_value_replace_uses(x, y);
    assert_int_equal(x->n_users, 0);
    assert_int_equal(y->n_users, 3);
    assert_ptr_equal(mul->inputs[0], y);
    assert_ptr_equal(neg->inputs[0], y);
    assert_ptr_equal(g->outputs[0], y);
    assert_true(y->flags & KN_VALUE_GRAPH_OUTPUT);
    kn_model_free(m);
}

static void test_node_remove(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, NULL);
    kn_node *a = kn_node_create(g, KN_OP_Relu, "a", 1, &x, 1);
    kn_node *b = kn_node_create(g, KN_OP_Neg, "b", 1, &x, 1);
    kn_node *c = kn_node_create(g, KN_OP_Abs, "c", 1, &a->outputs[0], 1);
    kn_graph_add_output(g, c->outputs[0]);
    assert_int_equal(x->n_users, 2);

    kn_node_remove(b);
    assert_int_equal(g->n_nodes, 2);
    assert_ptr_equal(g->nodes[0], a);
    assert_ptr_equal(g->nodes[1], c);
    assert_int_equal(x->n_users, 1);
    assert_true(has_use(x, a, 0));

    /* bypass a, then remove it */
    kn_value_replace_uses(a->outputs[0], x);
    kn_node_remove(a);
    assert_int_equal(g->n_nodes, 1);
    assert_ptr_equal(c->inputs[0], x);
    assert_int_equal(x->n_users, 1);
    assert_int_equal(kn_graph_verify(g), KN_OK);
    kn_model_free(m);
}

static void test_attributes(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, NULL);
    kn_node *n = kn_node_create(g, KN_OP_Conv, "conv", 1, &x, 1);
    kn_attr *a = kn_node_add_attr(n, "group", KN_ATTR_INT);
    a->i = 4;
    a = kn_node_add_attr(n, "alpha", KN_ATTR_FLOAT);
    a->f = 0.5f;
    a = kn_node_add_attr(n, "auto_pad", KN_ATTR_STRING);
    a->s = "SAME_UPPER";
    a->s_len = 10;
    static int64_t ks[2] = {3, 3};
    a = kn_node_add_attr(n, "kernel_shape", KN_ATTR_INTS);
    a->ints = ks;
    a->n = 2;
    assert_null(kn_node_add_attr(n, "group", KN_ATTR_INT));
    assert_non_null(strstr(kn_last_error(), "node 'conv' (Conv): attribute 'group' given more than once"));

    assert_int_equal(kn_attr_int(n, "group", 1), 4);
    assert_int_equal(kn_attr_int(n, "missing", 7), 7);
    assert_true(kn_attr_float(n, "alpha", 0) == 0.5f);
    assert_true(kn_attr_float(n, "group", 0) == 4.0f);
    assert_string_equal(kn_attr_string(n, "auto_pad", "NOTSET"), "SAME_UPPER");
    assert_string_equal(kn_attr_string(n, "group", "dflt"), "dflt");
    const int64_t *v;
    assert_int_equal(kn_attr_ints(n, "kernel_shape", &v), 2);
    assert_int_equal(v[1], 3);
    assert_int_equal(kn_attr_ints(n, "strides", &v), 0);
    assert_null(v);
    kn_model_set_opset(m, "", 13);
    assert_int_equal(kn_node_opset(n), 13);
    kn_model_free(m);
}

static void test_subgraph_scope(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    kn_value *c = kn_graph_add_input(g, "c", KN_BOOL, NULL);
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, NULL);
    kn_node *iff = kn_node_create(g, KN_OP_If, "if", 1, &c, 1);
    kn_graph *then_g = kn_graph_create_sub(g, "then");
    assert_non_null(then_g);
    then_g->parent_node = iff;
    kn_attr *a = kn_node_add_attr(iff, "then_branch", KN_ATTR_GRAPH);
    a->g = then_g;
    assert_ptr_equal(then_g->parent, g);
    assert_ptr_equal(kn_graph_lookup(then_g, "x"), x);
    assert_null(kn_graph_lookup_local(then_g, "x"));
    /* a subgraph may define a name its parent also defines (shadowing) */
    kn_value *x2 = kn_graph_new_value(then_g, "x", KN_F32, NULL);
    assert_non_null(x2);
    assert_ptr_equal(kn_graph_lookup(then_g, "x"), x2);
    assert_ptr_equal(kn_graph_lookup(g, "x"), x);
    kn_model_free(m);
}

static void test_toposort(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, NULL);
    /* built out of order: c uses b's output, b uses a's output */
    kn_node *c = kn_node_create(g, KN_OP_Relu, "c", 1, NULL, 1);
    kn_node *b = kn_node_create(g, KN_OP_Neg, "b", 1, NULL, 1);
    kn_node *a = kn_node_create(g, KN_OP_Abs, "a", 1, &x, 1);
    kn_node *free_node = kn_node_create(g, KN_OP_Exp, "e", 1, &x, 1);
    kn_node_set_input(b, 0, a->outputs[0]);
    kn_node_set_input(c, 0, b->outputs[0]);
    kn_graph_add_output(g, c->outputs[0]);
    assert_int_not_equal(kn_graph_verify(g), KN_OK);
    assert_non_null(strstr(kn_last_error(), "node 'c' (Relu): input 0 'b:0' is used before it is defined"));

    assert_int_equal(kn_graph_toposort(g), KN_OK);
    assert_ptr_equal(g->nodes[0], a);
    assert_ptr_equal(g->nodes[1], free_node); /* file order kept where valid */
    assert_ptr_equal(g->nodes[2], b);
    assert_ptr_equal(g->nodes[3], c);
    assert_int_equal(kn_graph_verify(g), KN_OK);

    /* close a cycle: a now reads c's output */
    kn_node_set_input(a, 0, c->outputs[0]);
    assert_int_not_equal(kn_graph_toposort(g), KN_OK);
    assert_non_null(strstr(kn_last_error(), "is on a cycle or uses a value that is never computed"));
    assert_non_null(strstr(kn_last_error(), "node 'a' (Abs)"));
    kn_model_free(m);
}

/* A body that reads an outer value makes the If depend on that value's
 * producer, even though the If has no direct input from it. */
static void test_toposort_subgraph_deps(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    kn_value *c = kn_graph_add_input(g, "c", KN_BOOL, NULL);
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, NULL);
    kn_node *iff = kn_node_create(g, KN_OP_If, "if", 1, &c, 1);
    kn_node *late = kn_node_create(g, KN_OP_Neg, "late", 1, &x, 1);
    kn_graph *br = kn_graph_create_sub(g, "then");
    br->parent_node = iff;
    kn_node_add_attr(iff, "then_branch", KN_ATTR_GRAPH)->g = br;
    kn_node *use = kn_node_create(br, KN_OP_Relu, "use", 1, &late->outputs[0], 1);
    kn_graph_add_output(br, use->outputs[0]);
    kn_graph_add_output(g, iff->outputs[0]);
    assert_int_not_equal(kn_graph_verify(g), KN_OK);
    assert_int_equal(kn_graph_toposort(g), KN_OK);
    assert_ptr_equal(g->nodes[0], late);
    assert_ptr_equal(g->nodes[1], iff);
    assert_int_equal(kn_graph_verify(g), KN_OK);
    kn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_create),
        cmocka_unit_test(test_inputs_constants_nodes),
        cmocka_unit_test(test_set_input_and_replace_uses),
        cmocka_unit_test(test_node_remove),
        cmocka_unit_test(test_attributes),
        cmocka_unit_test(test_subgraph_scope),
        cmocka_unit_test(test_toposort),
        cmocka_unit_test(test_toposort_subgraph_deps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
