/* Unit tests of the size limit of inference (ir/infer.c, issue 14): a static
 * shape whose element or byte count overflows int64_t, or is over
 * KN_MAX_TENSOR_BYTES, is refused with a message naming the node and the
 * value, instead of reaching the memory plan and the header as a wrapped
 * size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir.h"

static kn_model *new_model(void)
{
    kn_model *m = kn_model_create();
    assert_non_null(m);
    assert_int_equal(kn_model_set_opset(m, "", 17), KN_OK);
    return m;
}

static kn_value *input(kn_model *m, kn_dtype dt, int rank, const int64_t *dims)
{
    kn_shape s = kn_shape_unknown();
    kn_shape_set(&s, rank, dims);
    kn_value *v = kn_graph_add_input(m->graph, "x", dt, &s);
    assert_non_null(v);
    return v;
}

/* y = Expand(x[1, 4] f32, shape) with shape a constant. */
static kn_model *expand_to(int n, const int64_t *shape)
{
    kn_model *m = new_model();
    kn_value *in[2] = {input(m, KN_F32, 2, (const int64_t[]){1, 4}), NULL};
    kn_tensor *t = calloc(1, sizeof *t);
    assert_non_null(t);
    int64_t len = n;
    assert_int_equal(kn_tensor_alloc(t, KN_I64, 1, &len), KN_OK);
    memcpy(t->data, shape, sizeof *shape * (size_t)n);
    in[1] = kn_graph_add_constant(m->graph, "shape", t);
    assert_non_null(in[1]);
    kn_node *e = kn_node_create(m->graph, KN_OP_Expand, "e", 2, in, 1);
    assert_non_null(e);
    assert_int_equal(kn_graph_add_output(m->graph, e->outputs[0]), KN_OK);
    return m;
}

static void test_shape_nbytes(void **state)
{
    (void)state;
    kn_shape s = kn_shape_unknown();
    kn_shape_set(&s, 2, (const int64_t[]){(int64_t)1 << 30, (int64_t)1 << 30});
    assert_int_equal(kn_shape_nbytes(KN_F32, &s), (int64_t)1 << 62); /* exactly the limit */
    kn_shape_set(&s, 2, (const int64_t[]){((int64_t)1 << 30) + 1, (int64_t)1 << 30});
    assert_int_equal(kn_shape_nbytes(KN_F32, &s), -1); /* just over it */
    kn_shape_set(&s, 2, (const int64_t[]){(int64_t)1 << 31, (int64_t)1 << 31});
    assert_int_equal(kn_shape_nbytes(KN_F32, &s), -1); /* 2^64 bytes: would wrap to 0 */
    assert_int_equal(kn_shape_nbytes(KN_U8, &s), (int64_t)1 << 62); /* 2^62 one-byte elements: the limit */
    kn_shape_set(&s, 1, (const int64_t[]){3});
    assert_int_equal(kn_shape_nbytes(KN_INT4, &s), 2); /* packed, rounded up */
    kn_shape_set(&s, 1, (const int64_t[]){INT64_MAX}); /* 2^63 - 1 nibbles: n * 4 bits would overflow */
    assert_int_equal(kn_shape_nbytes(KN_INT4, &s), (int64_t)1 << 62);
    assert_int_equal(kn_shape_nbytes(KN_F32, &s), -1);
    s.dims[0] = -1;
    assert_int_equal(kn_shape_nbytes(KN_F32, &s), -1); /* not static */
}

static void test_input_over_limit(void **state)
{
    (void)state;
    kn_model *m = new_model();
    kn_node *r = kn_node_create(m->graph, KN_OP_Relu, "r", 1,
                                (kn_value *[]){input(m, KN_F32, 2, (const int64_t[]){(int64_t)1 << 31, (int64_t)1 << 31})}, 1);
    assert_non_null(r);
    assert_int_equal(kn_graph_infer(m->graph), KN_ERR_UNSUPPORTED);
    assert_string_equal(kn_last_error(), "graph input 'x' has shape 2147483648x2147483648 (f32), over kiln's limit of "
                                         "2^62 bytes per tensor");
    kn_model_free(m);
}

static void test_expand_over_limit(void **state)
{
    (void)state;
    kn_model *m = expand_to(2, (const int64_t[]){(int64_t)1 << 62, 4});
    assert_int_equal(kn_graph_infer(m->graph), KN_ERR_UNSUPPORTED);
    assert_string_equal(kn_last_error(), "node 'e' (Expand): output 0 'e:0' has shape 4611686018427387904x4 (f32), "
                                         "whose element count does not fit in 64 bits");
    kn_model_free(m);

    m = expand_to(3, (const int64_t[]){(int64_t)1 << 40, (int64_t)1 << 20, 4});
    assert_int_equal(kn_graph_infer(m->graph), KN_ERR_UNSUPPORTED);
    assert_string_equal(kn_last_error(), "node 'e' (Expand): output 0 'e:0' has shape 1099511627776x1048576x4 (f32), "
                                         "over kiln's limit of 2^62 bytes per tensor");
    kn_model_free(m);

    m = expand_to(2, (const int64_t[]){(int64_t)1 << 20, 4}); /* big but countable: fine */
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    assert_int_equal(m->graph->outputs[0]->shape.dims[0], (int64_t)1 << 20);
    kn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_nbytes),
        cmocka_unit_test(test_input_over_limit),
        cmocka_unit_test(test_expand_over_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
