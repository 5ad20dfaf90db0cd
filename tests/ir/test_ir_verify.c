/* Unit tests of kn_graph_verify (ir/verify.c): one test per invariant, each
 * checking that a broken graph is refused with a message naming the node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir.h"

#define assert_error_contains(st, text)                                                   \
    do {                                                                                  \
        assert_int_not_equal((st), KN_OK);                                                \
        if (!strstr(kn_last_error(), (text)))                                             \
            fail_msg("error \"%s\" does not contain \"%s\"", kn_last_error(), (text));     \
    } while (0)

/* x → Relu "a" → Neg "b" → output */
typedef struct chain {
    kn_model *m;
    kn_graph *g;
    kn_value *x;
    kn_node *a, *b;
} chain;

static chain make_chain(void)
{
    chain c;
    c.m = kn_model_create();
    c.g = c.m->graph;
    kn_shape s = {1, {4}, {NULL}};
    c.x = kn_graph_add_input(c.g, "x", KN_F32, &s);
    c.a = kn_node_create(c.g, KN_OP_Relu, "a", 1, &c.x, 1);
    c.b = kn_node_create(c.g, KN_OP_Neg, "b", 1, &c.a->outputs[0], 1);
    kn_graph_add_output(c.g, c.b->outputs[0]);
    return c;
}

static void test_valid(void **state)
{
    (void)state;
    chain c = make_chain();
    assert_int_equal(kn_graph_verify(c.g), KN_OK);
    kn_model_free(c.m);
}

static void test_use_before_definition(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_node *t = c.g->nodes[0];
    c.g->nodes[0] = c.g->nodes[1];
    c.g->nodes[1] = t;
    assert_error_contains(kn_graph_verify(c.g), "node 'b' (Neg): input 0 'a:0' is used before it is defined (by node 'a')");
    kn_model_free(c.m);
}

static void test_value_of_other_graph(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_model *other = kn_model_create();
    kn_value *y = kn_graph_add_input(other->graph, "y", KN_F32, NULL);
    kn_node_set_input(c.b, 0, y);
    assert_error_contains(kn_graph_verify(c.g), "node 'b' (Neg): input 0 'y' is not defined in graph 'main'");
    kn_node_set_input(c.b, 0, c.a->outputs[0]);
    kn_model_free(other);
    kn_model_free(c.m);
}

static void test_two_producers(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_node *d = kn_node_create(c.g, KN_OP_Abs, "d", 1, &c.x, 1);
    d->outputs[0] = c.a->outputs[0];
    assert_error_contains(kn_graph_verify(c.g), "node 'd' (Abs): output 0 'a:0' is also produced by node 'a'");
    kn_model_free(c.m);

    /* a rewrite gave a a new output but b still reads the old one */
    c = make_chain();
    kn_value *nv = kn_graph_new_value(c.g, "fresh", KN_F32, NULL);
    nv->producer = c.a;
    c.a->outputs[0] = nv;
    assert_error_contains(kn_graph_verify(c.g), "node 'b' (Neg): input 0 'a:0' names node 'a' as its producer, which does not output it");
    kn_model_free(c.m);
}

static void test_users_list(void **state)
{
    (void)state;
    chain c = make_chain();
    c.x->n_users = 0; /* forget a's use of x */
    assert_error_contains(kn_graph_verify(c.g),
                          "node 'a' (Relu): input 0 'x' appears 0 times in the value's users list, expected once");
    c.x->n_users = 1;
    c.x->users[0].index = 3; /* a use that names an input slot a does not have */
    assert_error_contains(kn_graph_verify(c.g), "is listed as user 0 of value 'x' but its input 3 is not that value");
    kn_model_free(c.m);
}

static void test_arity(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_node *add = kn_node_create(c.g, KN_OP_Add, "add", 1, &c.x, 1);
    assert_error_contains(kn_graph_verify(c.g), "node 'add' (Add): has 1 inputs, expected 2 to 2");
    kn_node_remove(add);
    kn_value *ins[3] = {c.x, NULL, NULL};
    kn_node *conv = kn_node_create(c.g, KN_OP_Conv, "conv", 3, ins, 1);
    assert_error_contains(kn_graph_verify(c.g), "node 'conv' (Conv): required input 1 is missing");
    kn_node_remove(conv);
    kn_node *split = kn_node_create(c.g, KN_OP_Relu, "two_out", 1, &c.x, 2);
    assert_error_contains(kn_graph_verify(c.g), "node 'two_out' (Relu): has 2 outputs, expected 1 to 1");
    kn_node_remove(split);
    /* variadic ops accept any count above the minimum */
    kn_value *many[5] = {c.x, c.x, c.x, c.x, c.x};
    kn_node_create(c.g, KN_OP_Concat, "cat", 5, many, 1);
    assert_int_equal(kn_graph_verify(c.g), KN_OK);
    kn_model_free(c.m);
}

static void test_invalid_dtype(void **state)
{
    (void)state;
    chain c = make_chain();
    c.a->outputs[0]->dtype = (kn_dtype)99;
    assert_error_contains(kn_graph_verify(c.g), "value 'a:0' has invalid dtype 99");
    c.a->outputs[0]->dtype = KN_F32;
    c.a->outputs[0]->shape.rank = 12;
    assert_error_contains(kn_graph_verify(c.g), "value 'a:0' has invalid rank 12");
    kn_model_free(c.m);
}

static void test_removed_producer(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_node_remove(c.a); /* b still reads a's output */
    assert_error_contains(kn_graph_verify(c.g), "node 'b' (Neg): input 0 'a:0' is produced by node 'a', which was removed");
    kn_model_free(c.m);

    c = make_chain();
    kn_value_replace_uses(c.a->outputs[0], c.x);
    kn_node_remove(c.b); /* the graph output is now never computed */
    assert_error_contains(kn_graph_verify(c.g), "graph 'main': output 0 'b:0' is never computed");
    kn_model_free(c.m);
}

static void test_orphan_value(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_value *o = kn_graph_new_value(c.g, "orphan", KN_F32, NULL);
    kn_node_set_input(c.b, 0, o);
    assert_error_contains(kn_graph_verify(c.g), "input 0 'orphan' is neither a graph input, a constant nor a node output");
    kn_model_free(c.m);
}

static void test_duplicate_node_name(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_node_create(c.g, KN_OP_Abs, "a", 1, &c.x, 1);
    assert_error_contains(kn_graph_verify(c.g), "node 'a' (");
    assert_error_contains(kn_graph_verify(c.g), "node name is used more than once in graph 'main'");
    kn_model_free(c.m);
}

/* If whose then-branch adds an outer value x and the outer "late" value. */
static void test_subgraphs(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_value *cond = kn_graph_add_input(c.g, "cond", KN_BOOL, NULL);
    kn_node *iff = kn_node_create(c.g, KN_OP_If, "if", 1, &cond, 1);
    kn_graph *br = kn_graph_create_sub(c.g, "then");
    br->parent_node = iff;
    kn_attr *at = kn_node_add_attr(iff, "then_branch", KN_ATTR_GRAPH);
    at->g = br;
    kn_value *ins[2] = {c.x, c.a->outputs[0]};
    kn_node *add = kn_node_create(br, KN_OP_Add, "inner_add", 2, ins, 1);
    kn_graph_add_output(br, add->outputs[0]);
    assert_int_equal(kn_graph_verify(c.g), KN_OK);
    assert_int_equal(kn_graph_verify(br), KN_OK); /* a subgraph alone sees its outer scope */

    /* an outer value computed after the If is not available inside it */
    kn_node *late = kn_node_create(c.g, KN_OP_Abs, "late", 1, &c.x, 1);
    kn_node_set_input(add, 1, late->outputs[0]);
    assert_error_contains(kn_graph_verify(c.g),
                          "node 'if' (If), attribute 'then_branch': node 'inner_add' (Add): input 1 'late:0' is used before it is defined");
    kn_node_set_input(add, 1, c.x);

    /* errors inside a body are prefixed with the owning node */
    kn_node_create(br, KN_OP_Mul, "bad", 1, &c.x, 1);
    assert_error_contains(kn_graph_verify(c.g), "node 'if' (If), attribute 'then_branch': node 'bad' (Mul): has 1 inputs");
    kn_node_remove(br->nodes[1]);

    /* a value of a sibling graph is out of scope */
    kn_graph *other = kn_graph_create_sub(c.g, "else");
    other->parent_node = iff;
    at = kn_node_add_attr(iff, "else_branch", KN_ATTR_GRAPH);
    at->g = other;
    kn_node *use = kn_node_create(other, KN_OP_Neg, "sibling_use", 1, &add->outputs[0], 1);
    kn_graph_add_output(other, use->outputs[0]);
    assert_error_contains(kn_graph_verify(c.g), "node 'sibling_use' (Neg): input 0 'inner_add:0' is not defined in graph 'else'");

    /* a subgraph whose parent pointer is wrong */
    kn_node_set_input(use, 0, c.x);
    assert_int_equal(kn_graph_verify(c.g), KN_OK);
    other->parent = br;
    assert_error_contains(kn_graph_verify(c.g), "subgraph 'else' of attribute 'else_branch' does not have graph 'main' as its parent");
    kn_model_free(c.m);
}

static void test_constant_mismatch(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_tensor *t = calloc(1, sizeof *t);
    int64_t d[1] = {4};
    assert_int_equal(kn_tensor_alloc(t, KN_F32, 1, d), KN_OK);
    kn_value *k = kn_graph_add_constant(c.g, "k", t);
    assert_int_equal(kn_graph_verify(c.g), KN_OK);
    k->dtype = KN_I64;
    assert_error_contains(kn_graph_verify(c.g), "constant 'k' is typed i64 rank 1 but its data is f32 rank 1");
    kn_model_free(c.m);
}

static void test_qparams(void **state)
{
    (void)state;
    chain c = make_chain();
    kn_qparams q = {NULL, NULL, -1, 0};
    c.a->outputs[0]->q = &q;
    assert_error_contains(kn_graph_verify(c.g), "value 'a:0' has quantization parameters without a scale");
    kn_tensor scale = {0}, zp = {0};
    int64_t two = 2;
    assert_int_equal(kn_tensor_alloc(&scale, KN_F32, 0, NULL), KN_OK);
    assert_int_equal(kn_tensor_alloc(&zp, KN_I8, 1, &two), KN_OK);
    q.scale = &scale;
    assert_int_equal(kn_graph_verify(c.g), KN_OK);
    q.zero_point = &zp;
    assert_error_contains(kn_graph_verify(c.g), "value 'a:0' has 2 zero points for 1 scales");
    q.zero_point = NULL;
    c.a->outputs[0]->shape = (kn_shape){1, {4}, {NULL}};
    q.axis = 1;
    assert_error_contains(kn_graph_verify(c.g), "value 'a:0' has quantization axis 1 / block size 0 outside its rank 1");
    c.a->outputs[0]->q = NULL;
    kn_tensor_free(&scale);
    kn_tensor_free(&zp);
    kn_model_free(c.m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_use_before_definition),
        cmocka_unit_test(test_value_of_other_graph),
        cmocka_unit_test(test_two_producers),
        cmocka_unit_test(test_users_list),
        cmocka_unit_test(test_arity),
        cmocka_unit_test(test_invalid_dtype),
        cmocka_unit_test(test_removed_producer),
        cmocka_unit_test(test_orphan_value),
        cmocka_unit_test(test_duplicate_node_name),
        cmocka_unit_test(test_subgraphs),
        cmocka_unit_test(test_constant_mismatch),
        cmocka_unit_test(test_qparams),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
