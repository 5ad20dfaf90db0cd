/* Unit tests of the 'reduce' op family through the reference evaluator
 * (inference in ir/ops/reduce*.c, execution in runtime/ops/reduce*.c):
 * reductions, ArgMax ties, TopK, Range, NonZero, and the error for an
 * out-of-range axis; and through the runtime alone (kn_op_exec with a
 * hand-built descriptor, as a compiled artifact calls it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eval.h"
#include "ir.h"

/* A one-node model: inputs x0..x{n-1} (given as tensors), n_out outputs. */
typedef struct one_node {
    kn_model *m;
    kn_node *node;
} one_node;

static one_node make_model(kn_op op, int opset, int n_in, const kn_tensor *ins, int n_out)
{
    one_node r = {kn_model_create(), NULL};
    assert_non_null(r.m);
    assert_int_equal(kn_model_set_opset(r.m, "", opset), 0);
    kn_value *vals[8];
    for (int i = 0; i < n_in; i++) {
        char name[8];
        snprintf(name, sizeof name, "x%d", i);
        kn_shape s = {.rank = ins[i].rank};
        memcpy(s.dims, ins[i].dims, sizeof s.dims);
        vals[i] = kn_graph_add_input(r.m->graph, name, ins[i].dtype, &s);
        assert_non_null(vals[i]);
    }
    r.node = kn_node_create(r.m->graph, op, "n0", n_in, vals, n_out);
    assert_non_null(r.node);
    for (int i = 0; i < n_out; i++) assert_int_equal(kn_graph_add_output(r.m->graph, r.node->outputs[i]), 0);
    return r;
}

static void set_int_attr(kn_node *n, const char *name, int64_t v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INT);
    assert_non_null(a);
    a->i = v;
}

/* Runs the model (after inference) on ins; outs get the results. */
static int run(one_node *r, int n_in, const kn_tensor *ins, kn_tensor *outs)
{
    const char *names[8] = {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"};
    int st = kn_graph_infer(r->m->graph);
    if (st) return st;
    kn_eval_options o = {0};
    o.check_infer = 1;
    return kn_eval_model_opts(r->m, n_in, names, ins, outs, &o);
}

static kn_tensor f32_tensor(int rank, const int64_t *dims, const float *v)
{
    kn_tensor t;
    assert_int_equal(kn_tensor_alloc(&t, KN_F32, rank, dims), 0);
    if (v) memcpy(t.data, v, t.nbytes);
    return t;
}

static kn_tensor i64_tensor(int rank, const int64_t *dims, const int64_t *v)
{
    kn_tensor t;
    assert_int_equal(kn_tensor_alloc(&t, KN_I64, rank, dims), 0);
    if (v) memcpy(t.data, v, t.nbytes);
    return t;
}

static const float k_x23[6] = {1, 2, 3, 4, 5, 6}; /* [[1,2,3],[4,5,6]] */

static void check_reduce(kn_op op, int64_t axis, int keepdims, int out_rank, const int64_t *out_dims,
                         const float *want, int n_want)
{
    int64_t d[2] = {2, 3}, one = 1;
    kn_tensor ins[2] = {f32_tensor(2, d, k_x23), i64_tensor(1, &one, &axis)};
    one_node r = make_model(op, 18, 2, ins, 1);
    set_int_attr(r.node, "keepdims", keepdims);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 2, ins, out), 0);
    assert_int_equal(out[0].rank, out_rank);
    for (int i = 0; i < out_rank; i++) assert_int_equal(out[0].dims[i], out_dims[i]);
    for (int i = 0; i < n_want; i++) assert_float_equal(((float *)out[0].data)[i], want[i], 1e-5);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&ins[0]);
    kn_tensor_free(&ins[1]);
    kn_model_free(r.m);
}

static void test_reduce_keepdims(void **state)
{
    (void)state;
    check_reduce(KN_OP_ReduceSum, 1, 1, 2, (int64_t[]){2, 1}, (float[]){6, 15}, 2);
    check_reduce(KN_OP_ReduceMean, 0, 1, 2, (int64_t[]){1, 3}, (float[]){2.5f, 3.5f, 4.5f}, 3);
    check_reduce(KN_OP_ReduceMax, 1, 1, 2, (int64_t[]){2, 1}, (float[]){3, 6}, 2);
    check_reduce(KN_OP_ReduceL2, 1, 1, 2, (int64_t[]){2, 1}, (float[]){3.7416574f, 8.7749643f}, 2);
}

static void test_reduce_negative_axis_no_keepdims(void **state)
{
    (void)state;
    check_reduce(KN_OP_ReduceSum, -1, 0, 1, (int64_t[]){2}, (float[]){6, 15}, 2);
    check_reduce(KN_OP_ReduceProd, -2, 0, 1, (int64_t[]){3}, (float[]){4, 10, 18}, 3);
    check_reduce(KN_OP_ReduceMin, -2, 0, 1, (int64_t[]){3}, (float[]){1, 2, 3}, 3);
    check_reduce(KN_OP_ReduceLogSumExp, -1, 0, 1, (int64_t[]){2}, (float[]){3.4076059f, 6.4076059f}, 2);
}

static void test_reduce_empty_set(void **state)
{
    (void)state;
    /* Reducing an axis of size 0 gives the identity: 0 for sums, +inf for min. */
    int64_t d[2] = {2, 0}, one = 1, axis = 1;
    kn_tensor ins[2] = {f32_tensor(2, d, NULL), i64_tensor(1, &one, &axis)};
    one_node r = make_model(KN_OP_ReduceSum, 18, 2, ins, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 2, ins, out), 0);
    assert_int_equal(out[0].dims[0], 2);
    assert_int_equal(out[0].dims[1], 1);
    assert_float_equal(((float *)out[0].data)[1], 0.0f, 0);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&ins[0]);
    kn_tensor_free(&ins[1]);
    kn_model_free(r.m);
}

static void check_argmax(int select_last, int64_t want0, int64_t want1)
{
    int64_t d[2] = {2, 3};
    const float v[6] = {5, 1, 5, 2, 7, 7};
    kn_tensor x = f32_tensor(2, d, v);
    one_node r = make_model(KN_OP_ArgMax, 13, 1, &x, 1);
    set_int_attr(r.node, "axis", 1);
    set_int_attr(r.node, "keepdims", 0);
    set_int_attr(r.node, "select_last_index", select_last);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 1, &x, out), 0);
    assert_int_equal(out[0].dtype, KN_I64);
    assert_int_equal(out[0].rank, 1);
    assert_int_equal(((int64_t *)out[0].data)[0], want0);
    assert_int_equal(((int64_t *)out[0].data)[1], want1);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&x);
    kn_model_free(r.m);
}

static void test_argmax_ties(void **state)
{
    (void)state;
    check_argmax(0, 0, 1);
    check_argmax(1, 2, 2);
}

static void test_topk(void **state)
{
    (void)state;
    int64_t d[2] = {2, 4}, one = 1, k = 2;
    const float v[8] = {3, 1, 3, 2, 0, -1, 4, 4};
    kn_tensor ins[2] = {f32_tensor(2, d, v), i64_tensor(1, &one, &k)};
    one_node r = make_model(KN_OP_TopK, 11, 2, ins, 2);
    kn_tensor out[2] = {{0}};
    assert_int_equal(run(&r, 2, ins, out), 0);
    const float wv[4] = {3, 3, 4, 4};
    const int64_t wi[4] = {0, 2, 2, 3}; /* ties: lower index first */
    assert_int_equal(out[0].dims[1], 2);
    for (int i = 0; i < 4; i++) {
        assert_float_equal(((float *)out[0].data)[i], wv[i], 0);
        assert_int_equal(((int64_t *)out[1].data)[i], wi[i]);
    }
    kn_tensor_free(&out[0]);
    kn_tensor_free(&out[1]);
    /* smallest */
    kn_model_free(r.m);
    r = make_model(KN_OP_TopK, 11, 2, ins, 2);
    set_int_attr(r.node, "largest", 0);
    assert_int_equal(run(&r, 2, ins, out), 0);
    const int64_t ws[4] = {1, 3, 1, 0};
    for (int i = 0; i < 4; i++) assert_int_equal(((int64_t *)out[1].data)[i], ws[i]);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&out[1]);
    kn_tensor_free(&ins[0]);
    kn_tensor_free(&ins[1]);
    kn_model_free(r.m);
}

static void test_range(void **state)
{
    (void)state;
    int64_t s = 10, l = 3, dl = -3;
    kn_tensor ins[3] = {i64_tensor(0, NULL, &s), i64_tensor(0, NULL, &l), i64_tensor(0, NULL, &dl)};
    one_node r = make_model(KN_OP_Range, 11, 3, ins, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 3, ins, out), 0);
    assert_int_equal(out[0].rank, 1);
    assert_int_equal(out[0].dims[0], 3);
    const int64_t want[3] = {10, 7, 4};
    for (int i = 0; i < 3; i++) assert_int_equal(((int64_t *)out[0].data)[i], want[i]);
    kn_tensor_free(&out[0]);
    for (int i = 0; i < 3; i++) kn_tensor_free(&ins[i]);
    kn_model_free(r.m);
}

static void test_nonzero(void **state)
{
    (void)state;
    int64_t d[2] = {2, 2};
    const float v[4] = {1, 0, 0, 3};
    kn_tensor x = f32_tensor(2, d, v);
    one_node r = make_model(KN_OP_NonZero, 13, 1, &x, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 1, &x, out), 0);
    assert_int_equal(out[0].dims[0], 2);
    assert_int_equal(out[0].dims[1], 2);
    const int64_t want[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) assert_int_equal(((int64_t *)out[0].data)[i], want[i]);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&x);
    kn_model_free(r.m);
}

static void test_axis_out_of_range_names_node(void **state)
{
    (void)state;
    int64_t d[2] = {2, 3}, one = 1, axis = 2;
    kn_tensor ins[2] = {f32_tensor(2, d, k_x23), i64_tensor(1, &one, &axis)};
    /* Axes as a run-time input: inference cannot see it, evaluation must fail cleanly. */
    one_node r = make_model(KN_OP_ReduceSum, 13, 2, ins, 1);
    kn_tensor out[1] = {{0}};
    assert_int_not_equal(run(&r, 2, ins, out), 0);
    assert_non_null(strstr(kn_last_error(), "node 'n0' (ReduceSum)"));
    assert_non_null(strstr(kn_last_error(), "axis 2"));
    assert_null(out[0].data);
    kn_model_free(r.m);
    /* Attribute axis: caught by inference already. */
    r = make_model(KN_OP_ArgMin, 13, 1, ins, 1);
    set_int_attr(r.node, "axis", -3);
    assert_int_not_equal(run(&r, 1, ins, out), 0);
    assert_non_null(strstr(kn_last_error(), "node 'n0' (ArgMin)"));
    kn_tensor_free(&ins[0]);
    kn_tensor_free(&ins[1]);
    kn_model_free(r.m);
}

static void test_cumsum_exclusive_reverse(void **state)
{
    (void)state;
    int64_t d = 4, ax = 0;
    const float v[4] = {1, 2, 3, 4};
    kn_tensor ins[2] = {f32_tensor(1, &d, v), i64_tensor(0, NULL, &ax)};
    one_node r = make_model(KN_OP_CumSum, 14, 2, ins, 1);
    set_int_attr(r.node, "exclusive", 1);
    set_int_attr(r.node, "reverse", 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 2, ins, out), 0);
    const float want[4] = {9, 7, 4, 0};
    for (int i = 0; i < 4; i++) assert_float_equal(((float *)out[0].data)[i], want[i], 0);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&ins[0]);
    kn_tensor_free(&ins[1]);
    kn_model_free(r.m);
}

static void test_unique_unsorted(void **state)
{
    (void)state;
    int64_t d = 6;
    const float v[6] = {2, 1, 1, 3, 4, 3};
    kn_tensor x = f32_tensor(1, &d, v);
    one_node r = make_model(KN_OP_Unique, 11, 1, &x, 4);
    set_int_attr(r.node, "sorted", 0);
    kn_tensor out[4] = {{0}};
    assert_int_equal(run(&r, 1, &x, out), 0);
    const float wy[4] = {2, 1, 3, 4};
    const int64_t wi[4] = {0, 1, 3, 4}, winv[6] = {0, 1, 1, 2, 3, 2}, wc[4] = {1, 2, 2, 1};
    assert_int_equal(out[0].dims[0], 4);
    for (int i = 0; i < 4; i++) {
        assert_float_equal(((float *)out[0].data)[i], wy[i], 0);
        assert_int_equal(((int64_t *)out[1].data)[i], wi[i]);
        assert_int_equal(((int64_t *)out[3].data)[i], wc[i]);
    }
    for (int i = 0; i < 6; i++) assert_int_equal(((int64_t *)out[2].data)[i], winv[i]);
    for (int i = 0; i < 4; i++) kn_tensor_free(&out[i]);
    kn_tensor_free(&x);
    kn_model_free(r.m);
}

static void test_topk_k_too_large(void **state)
{
    (void)state;
    int64_t d = 3, one = 1, k = 4;
    const float v[3] = {1, 2, 3};
    kn_tensor ins[2] = {f32_tensor(1, &d, v), i64_tensor(1, &one, &k)};
    one_node r = make_model(KN_OP_TopK, 11, 2, ins, 2);
    kn_tensor out[2] = {{0}};
    assert_int_not_equal(run(&r, 2, ins, out), 0);
    assert_non_null(strstr(kn_last_error(), "node 'n0' (TopK)"));
    assert_null(out[0].data);
    assert_null(out[1].data);
    kn_tensor_free(&ins[0]);
    kn_tensor_free(&ins[1]);
    kn_model_free(r.m);
}

static void test_nll_target_out_of_range(void **state)
{
    (void)state;
    int64_t xd[2] = {2, 3}, td = 2;
    const float v[6] = {-1, -2, -3, -4, -5, -6};
    const int64_t t[2] = {1, 7};
    kn_tensor ins[2] = {f32_tensor(2, xd, v), i64_tensor(1, &td, t)};
    one_node r = make_model(KN_OP_NegativeLogLikelihoodLoss, 13, 2, ins, 1);
    kn_tensor out[1] = {{0}};
    assert_int_not_equal(run(&r, 2, ins, out), 0);
    assert_non_null(strstr(kn_last_error(), "node 'n0' (NegativeLogLikelihoodLoss)"));
    assert_non_null(strstr(kn_last_error(), "target 7"));
    kn_model_free(r.m);
    /* In range: mean of -x[n, t[n]] = (2 + 4) / 2 after fixing the target. */
    ((int64_t *)ins[1].data)[1] = 0;
    r = make_model(KN_OP_NegativeLogLikelihoodLoss, 13, 2, ins, 1);
    assert_int_equal(run(&r, 2, ins, out), 0);
    assert_float_equal(*(float *)out[0].data, 3.0f, 1e-6);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&ins[0]);
    kn_tensor_free(&ins[1]);
    kn_model_free(r.m);
}

/* ---- the runtime alone: a descriptor and kn_op_exec, no IR ---------------- */

/* A descriptor of node "r" as a compiled artifact would carry it. */
static kn_opdesc rt_desc(kn_op op, int64_t opset, int n_in, int n_out, const bool *has, const kn_attr *attrs,
                         int n_attrs)
{
    return (kn_opdesc){.op = op, .name = "r", .op_type = kn_op_type_name(op), .domain = "", .opset = opset,
                       .n_inputs = n_in, .n_outputs = n_out, .has_output = has, .attrs = attrs,
                       .n_attrs = n_attrs};
}

static void test_exec_reduce_without_ir(void **state)
{
    (void)state;
    int64_t d[2] = {2, 3}, one = 1, axis = -1;
    kn_tensor x = f32_tensor(2, d, k_x23), axes = i64_tensor(1, &one, &axis);
    const kn_tensor *in[2] = {&x, &axes};
    kn_attr keep = {.name = "keepdims", .kind = KN_ATTR_INT, .i = 0};
    kn_opdesc desc = rt_desc(KN_OP_ReduceSum, 13, 2, 1, NULL, &keep, 1);
    kn_exec_fn f = kn_op_exec(KN_OP_ReduceSum);
    assert_non_null(f);
    kn_tensor out[1] = {{0}};
    int st = f(&desc, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_int_equal(out[0].rank, 1);
    assert_int_equal(out[0].dims[0], 2);
    assert_true(((float *)out[0].data)[0] == 6 && ((float *)out[0].data)[1] == 15);
    kn_tensor_free(&out[0]);
    /* Opset 11 takes the axes as an attribute; an ints attribute out of range names the node. */
    int64_t bad = 5;
    kn_attr attr_axes = {.name = "axes", .kind = KN_ATTR_INTS, .n = 1, .ints = &bad};
    desc = rt_desc(KN_OP_ReduceMax, 11, 1, 1, NULL, &attr_axes, 1);
    assert_int_not_equal(kn_op_exec(KN_OP_ReduceMax)(&desc, in, out), 0);
    assert_non_null(strstr(kn_last_error(), "node 'r' (ReduceMax): axis 5 is out of range"));
    assert_null(out[0].data);
    kn_tensor_free(&x);
    kn_tensor_free(&axes);
}

/* Outputs the node does not want are freed by the op, never handed over. */
static void test_exec_unwanted_outputs(void **state)
{
    (void)state;
    int64_t d = 4, kval = 2;
    const float v[4] = {3, 1, 4, 1};
    kn_tensor x = f32_tensor(1, &d, v), k = i64_tensor(1, (int64_t[]){1}, &kval);
    const kn_tensor *in[2] = {&x, &k};
    bool has_topk[2] = {false, true};
    kn_opdesc desc = rt_desc(KN_OP_TopK, 11, 2, 2, has_topk, NULL, 0);
    kn_tensor out[4];
    memset(out, 0, sizeof out);
    int st = kn_op_exec(KN_OP_TopK)(&desc, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_null(out[0].data);
    assert_int_equal(((int64_t *)out[1].data)[0], 2);
    assert_int_equal(((int64_t *)out[1].data)[1], 0);
    kn_tensor_free(&out[1]);
    bool has_unique[4] = {true, false, false, true};
    desc = rt_desc(KN_OP_Unique, 11, 1, 4, has_unique, NULL, 0);
    st = kn_op_exec(KN_OP_Unique)(&desc, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_int_equal(out[0].dims[0], 3); /* 1, 3, 4 */
    assert_null(out[1].data);
    assert_null(out[2].data);
    assert_int_equal(out[3].dims[0], 3);
    assert_int_equal(((int64_t *)out[3].data)[0], 2); /* 1 occurs twice */
    kn_tensor_free(&out[0]);
    kn_tensor_free(&out[3]);
    kn_tensor_free(&x);
    kn_tensor_free(&k);
}

/* in[] holds only n_inputs entries; a required input past them is an error,
 * not a read out of bounds. */
static void test_exec_missing_input(void **state)
{
    (void)state;
    int64_t d = 2;
    const float v[2] = {1, 2};
    kn_tensor x = f32_tensor(1, &d, v);
    const kn_tensor *in[1] = {&x};
    kn_tensor out[1] = {{0}};
    const kn_op ops[] = {KN_OP_CumSum, KN_OP_Range, KN_OP_OneHot, KN_OP_Compress};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        kn_opdesc desc = rt_desc(ops[i], 13, 1, 1, NULL, NULL, 0);
        assert_int_not_equal(kn_op_exec(ops[i])(&desc, in, out), 0);
        assert_non_null(strstr(kn_last_error(), "required input 1 is missing"));
        assert_null(out[0].data);
    }
    kn_tensor_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_keepdims),
        cmocka_unit_test(test_reduce_negative_axis_no_keepdims),
        cmocka_unit_test(test_reduce_empty_set),
        cmocka_unit_test(test_argmax_ties),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_range),
        cmocka_unit_test(test_nonzero),
        cmocka_unit_test(test_axis_out_of_range_names_node),
        cmocka_unit_test(test_cumsum_exclusive_reverse),
        cmocka_unit_test(test_unique_unsorted),
        cmocka_unit_test(test_topk_k_too_large),
        cmocka_unit_test(test_nll_target_out_of_range),
        cmocka_unit_test(test_exec_reduce_without_ir),
        cmocka_unit_test(test_exec_unwanted_outputs),
        cmocka_unit_test(test_exec_missing_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
