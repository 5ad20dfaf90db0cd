/* Unit tests of the 'misc' family (inference in ir/ops/misc*.c, execution in
 * runtime/ops/misc*.c): AffineGrid, DeformConv and TfIdfVectorizer through
 * the reference evaluator (small hand-computed cases, and errors naming the
 * node for inconsistent inputs or attributes); windows, losses and missing
 * inputs through the runtime alone (kn_op_exec with a hand-built
 * descriptor, as a compiled artifact calls it). */
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

typedef struct one_node {
    kn_model *m;
    kn_node *node;
} one_node;

static one_node make_model(kn_op op, int opset, int n_in, const kn_tensor *ins)
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
    r.node = kn_node_create(r.m->graph, op, "n0", n_in, vals, 1);
    assert_non_null(r.node);
    assert_int_equal(kn_graph_add_output(r.m->graph, r.node->outputs[0]), 0);
    return r;
}

static void set_ints(kn_node *n, const char *name, int cnt, const int64_t *v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INTS);
    assert_non_null(a);
    a->n = cnt;
    a->ints = kn_arena_memdup(&n->graph->model->arena, v, sizeof(int64_t) * (size_t)cnt);
    assert_non_null(a->ints);
}

static void set_int(kn_node *n, const char *name, int64_t v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INT);
    assert_non_null(a);
    a->i = v;
}

static void set_string(kn_node *n, const char *name, const char *s)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_STRING);
    assert_non_null(a);
    a->s = kn_arena_strdup(&n->graph->model->arena, s);
    a->s_len = strlen(s);
}

static int run(one_node *r, int n_in, const kn_tensor *ins, kn_tensor *outs)
{
    const char *names[8] = {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"};
    int st = kn_graph_infer(r->m->graph);
    if (st) return st;
    kn_eval_options o = {0};
    o.check_infer = 1;
    return kn_eval_model_opts(r->m, n_in, names, ins, outs, &o);
}

static kn_tensor tensor(kn_dtype dt, int rank, const int64_t *dims, const void *v)
{
    kn_tensor t;
    assert_int_equal(kn_tensor_alloc(&t, dt, rank, dims), 0);
    if (v) memcpy(t.data, v, t.nbytes);
    return t;
}

static void free_all(one_node *r, int n, kn_tensor *ts)
{
    for (int i = 0; i < n; i++) kn_tensor_free(&ts[i]);
    kn_model_free(r->m);
}

static void test_affine_grid_identity(void **state)
{
    (void)state;
    float theta[6] = {1, 0, 0, 0, 1, 0};
    int64_t td[3] = {1, 2, 3}, four = 4, size[4] = {1, 1, 2, 2};
    kn_tensor ins[2] = {tensor(KN_F32, 3, td, theta), tensor(KN_I64, 1, &four, size)};
    one_node r = make_model(KN_OP_AffineGrid, 20, 2, ins);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 2, ins, out), 0);
    assert_int_equal(out[0].rank, 4);
    assert_int_equal(out[0].dims[3], 2);
    const float want[8] = {-0.5f, -0.5f, 0.5f, -0.5f, -0.5f, 0.5f, 0.5f, 0.5f}; /* (x, y) per pixel */
    for (int i = 0; i < 8; i++) assert_float_equal(((float *)out[0].data)[i], want[i], 1e-6);
    kn_tensor_free(&out[0]);
    free_all(&r, 2, ins);
}

static void test_affine_grid_bad_theta_names_node(void **state)
{
    (void)state;
    int64_t td[3] = {1, 3, 4}, four = 4, size[4] = {1, 1, 2, 2};
    kn_tensor ins[2] = {tensor(KN_F32, 3, td, NULL), tensor(KN_I64, 1, &four, size)};
    one_node r = make_model(KN_OP_AffineGrid, 20, 2, ins);
    kn_tensor out[1] = {{0}};
    assert_int_not_equal(run(&r, 2, ins, out), 0);
    assert_non_null(strstr(kn_last_error(), "n0"));
    kn_tensor_free(&out[0]);
    free_all(&r, 2, ins);
}

static void test_deform_conv_zero_offset_is_conv(void **state)
{
    (void)state;
    float x[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, w[4] = {1, 1, 1, 1};
    int64_t xd[4] = {1, 1, 3, 3}, wd[4] = {1, 1, 2, 2}, od[4] = {1, 8, 2, 2};
    kn_tensor ins[3] = {tensor(KN_F32, 4, xd, x), tensor(KN_F32, 4, wd, w), tensor(KN_F32, 4, od, NULL)};
    one_node r = make_model(KN_OP_DeformConv, 19, 3, ins);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 3, ins, out), 0);
    const float want[4] = {8, 12, 20, 24};
    for (int i = 0; i < 4; i++) assert_float_equal(((float *)out[0].data)[i], want[i], 1e-6);
    kn_tensor_free(&out[0]);
    free_all(&r, 3, ins);
}

static void test_deform_conv_bad_offset_names_node(void **state)
{
    (void)state;
    int64_t xd[4] = {1, 1, 3, 3}, wd[4] = {1, 1, 2, 2}, od[4] = {1, 6, 2, 2};
    kn_tensor ins[3] = {tensor(KN_F32, 4, xd, NULL), tensor(KN_F32, 4, wd, NULL), tensor(KN_F32, 4, od, NULL)};
    one_node r = make_model(KN_OP_DeformConv, 19, 3, ins);
    kn_tensor out[1] = {{0}};
    assert_int_not_equal(run(&r, 3, ins, out), 0);
    assert_non_null(strstr(kn_last_error(), "n0"));
    kn_tensor_free(&out[0]);
    free_all(&r, 3, ins);
}

/* Pool: unigrams 1, 2, 3 and the bigram (1, 2). */
static one_node tfidf_model(const kn_tensor *x, int n_idx)
{
    one_node r = make_model(KN_OP_TfIdfVectorizer, 9, 1, x);
    set_string(r.node, "mode", "TF");
    set_int(r.node, "min_gram_length", 1);
    set_int(r.node, "max_gram_length", 2);
    set_int(r.node, "max_skip_count", 0);
    set_ints(r.node, "pool_int64s", 5, (int64_t[]){1, 2, 3, 1, 2});
    set_ints(r.node, "ngram_counts", 2, (int64_t[]){0, 3});
    set_ints(r.node, "ngram_indexes", n_idx, (int64_t[]){0, 1, 2, 3});
    return r;
}

static void test_tfidf_counts(void **state)
{
    (void)state;
    int64_t xv[4] = {1, 2, 1, 3}, four = 4;
    kn_tensor ins[1] = {tensor(KN_I64, 1, &four, xv)};
    one_node r = tfidf_model(ins, 4);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, 1, ins, out), 0);
    const float want[4] = {2, 1, 1, 1};
    assert_int_equal(out[0].dims[0], 4);
    for (int i = 0; i < 4; i++) assert_float_equal(((float *)out[0].data)[i], want[i], 1e-6);
    kn_tensor_free(&out[0]);
    free_all(&r, 1, ins);
}

static void test_tfidf_too_few_indexes_names_node(void **state)
{
    (void)state;
    int64_t xv[4] = {1, 2, 1, 3}, four = 4;
    kn_tensor ins[1] = {tensor(KN_I64, 1, &four, xv)};
    one_node r = tfidf_model(ins, 2);
    kn_tensor out[1] = {{0}};
    assert_int_not_equal(run(&r, 1, ins, out), 0);
    assert_non_null(strstr(kn_last_error(), "n0"));
    kn_tensor_free(&out[0]);
    free_all(&r, 1, ins);
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

static void test_exec_window_without_ir(void **state)
{
    (void)state;
    int64_t four = 4;
    kn_tensor size = tensor(KN_I64, 0, NULL, &four);
    const kn_tensor *in[1] = {&size};
    kn_opdesc desc = rt_desc(KN_OP_HannWindow, 17, 1, 1, NULL, NULL, 0);
    kn_exec_fn f = kn_op_exec(KN_OP_HannWindow);
    assert_non_null(f);
    kn_tensor out[1] = {{0}};
    int st = f(&desc, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_int_equal(out[0].dtype, KN_F32);
    assert_int_equal(out[0].dims[0], 4);
    const float want[4] = {0, 0.5f, 1, 0.5f}; /* periodic */
    for (int i = 0; i < 4; i++) assert_float_equal(((float *)out[0].data)[i], want[i], 1e-6);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&size);
}

/* SoftmaxCrossEntropyLoss keeps its log-probabilities when output 1 is not wanted. */
static void test_exec_sce_unwanted_output(void **state)
{
    (void)state;
    int64_t xd[2] = {1, 2}, one = 1, t0 = 0;
    const float x[2] = {0, 0};
    kn_tensor ins[2] = {tensor(KN_F32, 2, xd, x), tensor(KN_I64, 1, &one, &t0)};
    const kn_tensor *in[2] = {&ins[0], &ins[1]};
    const bool has[2] = {true, false};
    kn_opdesc desc = rt_desc(KN_OP_SoftmaxCrossEntropyLoss, 13, 2, 2, has, NULL, 0);
    kn_tensor out[2];
    memset(out, 0, sizeof out);
    int st = kn_op_exec(KN_OP_SoftmaxCrossEntropyLoss)(&desc, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_int_equal(out[0].rank, 0);
    assert_float_equal(((float *)out[0].data)[0], 0.69314718f, 1e-6);
    assert_null(out[1].data);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&ins[0]);
    kn_tensor_free(&ins[1]);
}

/* in[] holds only n_inputs entries; a required input past them is an error
 * naming the node, not a read out of bounds. */
static void test_exec_missing_inputs_name_node(void **state)
{
    (void)state;
    int64_t two = 2;
    kn_tensor x = tensor(KN_F32, 1, &two, NULL);
    const kn_tensor *in[1] = {&x};
    kn_tensor out[3];
    memset(out, 0, sizeof out);
    const kn_op ops[] = {KN_OP_RNN, KN_OP_LSTM, KN_OP_STFT, KN_OP_MelWeightMatrix, KN_OP_AffineGrid,
                         KN_OP_DeformConv, KN_OP_NonMaxSuppression, KN_OP_GridSample, KN_OP_TfIdfVectorizer};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int n_in = ops[i] == KN_OP_TfIdfVectorizer ? 0 : 1;
        kn_opdesc desc = rt_desc(ops[i], 20, n_in, 1, NULL, NULL, 0);
        assert_int_not_equal(kn_op_exec(ops[i])(&desc, in, out), 0);
        char want[96];
        snprintf(want, sizeof want, "node 'r' (%s): required input %d is missing", kn_op_type_name(ops[i]), n_in);
        if (!strstr(kn_last_error(), want)) fail_msg("%s", kn_last_error());
        assert_null(out[0].data);
    }
    kn_tensor_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_affine_grid_identity),
        cmocka_unit_test(test_affine_grid_bad_theta_names_node),
        cmocka_unit_test(test_deform_conv_zero_offset_is_conv),
        cmocka_unit_test(test_deform_conv_bad_offset_names_node),
        cmocka_unit_test(test_tfidf_counts),
        cmocka_unit_test(test_tfidf_too_few_indexes_names_node),
        cmocka_unit_test(test_exec_window_without_ir),
        cmocka_unit_test(test_exec_sce_unwanted_output),
        cmocka_unit_test(test_exec_missing_inputs_name_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
