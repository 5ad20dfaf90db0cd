/* The memory plan (codegen/cpu/plan.c) keeps its arena within
 * KN_MAX_TENSOR_BYTES (issue 14): values each under the limit that are
 * alive together and would take the arena over it (or, summed, past
 * INT64_MAX) are refused with a message naming the node, never given
 * wrapped offsets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cg.h"

/* x[n] f32 → a, b, c = Relu chain, all read by y = Sum(a, b, c): a, b and
 * c are alive together. */
static kn_model *three_live(int64_t n)
{
    kn_model *m = kn_model_create();
    assert_non_null(m);
    assert_int_equal(kn_model_set_opset(m, "", 17), KN_OK);
    kn_shape s = kn_shape_unknown();
    kn_shape_set(&s, 1, &n);
    kn_value *x = kn_graph_add_input(m->graph, "x", KN_F32, &s);
    kn_node *a = kn_node_create(m->graph, KN_OP_Relu, "a", 1, &x, 1);
    kn_node *b = kn_node_create(m->graph, KN_OP_Relu, "b", 1, &a->outputs[0], 1);
    kn_node *c = kn_node_create(m->graph, KN_OP_Relu, "c", 1, &b->outputs[0], 1);
    kn_value *abc[3] = {a->outputs[0], b->outputs[0], c->outputs[0]};
    kn_node *y = kn_node_create(m->graph, KN_OP_Sum, "y", 3, abc, 1);
    assert_non_null(y);
    assert_int_equal(kn_graph_add_output(m->graph, y->outputs[0]), KN_OK);
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    return m;
}

static void test_arena_over_limit(void **state)
{
    (void)state;
    /* 3 * 2^60 bytes each: one fits, two would be 1.5 * 2^62, three 2^63 + 2^60 (past INT64_MAX) */
    kn_model *m = three_live((int64_t)3 << 58);
    kn_plan p;
    assert_int_equal(kn_plan_build(m->graph, &p), KN_ERR_UNSUPPORTED);
    assert_string_equal(kn_last_error(), "node 'b' (Relu): output 'b:0' (3458764513820540928 bytes) would take the "
                                         "arena past kiln's limit of 2^62 bytes");
    kn_model_free(m);

    m = three_live(1 << 10); /* the same graph at a sane size plans */
    assert_int_equal(kn_plan_build(m->graph, &p), KN_OK);
    assert_true(p.arena_bytes >= 3 * 4096);
    kn_plan_free(&p);
    kn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_over_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
