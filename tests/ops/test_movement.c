/* Unit tests of the 'movement' op family (inference in ir/ops/movement.c,
 * execution in runtime/ops/movement*.c) through the reference evaluator:
 * Reshape 0/-1, Transpose, Slice with a negative step, Gather with negative
 * indices, Concat, Pad reflect, Resize nearest, static shape inference from
 * constants, and the error for an out-of-range index; and through the
 * runtime alone (kn_op_exec with a hand-built descriptor, as a compiled
 * artifact calls it): unwanted outputs, serialized attributes, missing
 * inputs. */
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
    int n_rt; /* runtime inputs (the others are constants) */
} one_node;

/* A one-node model: inputs x0..x{n-1}; those with is_const[i] become
 * constants (copies of ins[i]) so inference sees their values. */
static one_node make_model(kn_op op, int opset, int n_in, const kn_tensor *ins, const int *is_const, int n_out)
{
    one_node r = {kn_model_create(), NULL, 0};
    assert_non_null(r.m);
    assert_int_equal(kn_model_set_opset(r.m, "", opset), 0);
    kn_value *vals[8];
    for (int i = 0; i < n_in; i++) {
        char name[8];
        snprintf(name, sizeof name, "x%d", i);
        if (is_const && is_const[i]) {
            kn_tensor *t = malloc(sizeof *t);
            assert_non_null(t);
            assert_int_equal(kn_tensor_copy(t, &ins[i]), 0);
            vals[i] = kn_graph_add_constant(r.m->graph, name, t);
        } else {
            kn_shape s = {.rank = ins[i].rank};
            memcpy(s.dims, ins[i].dims, sizeof s.dims);
            vals[i] = kn_graph_add_input(r.m->graph, name, ins[i].dtype, &s);
            r.n_rt = i + 1;
        }
        assert_non_null(vals[i]);
    }
    r.node = kn_node_create(r.m->graph, op, "mv0", n_in, vals, n_out);
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

static void set_ints_attr(kn_model *m, kn_node *n, const char *name, int cnt, const int64_t *v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INTS);
    assert_non_null(a);
    a->n = cnt;
    a->ints = kn_arena_memdup(&m->arena, v, sizeof(int64_t) * (size_t)cnt);
    assert_non_null(a->ints);
}

static void set_string_attr(kn_model *m, kn_node *n, const char *name, const char *s)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_STRING);
    assert_non_null(a);
    a->s = kn_arena_strdup(&m->arena, s);
    a->s_len = strlen(s);
}

/* Infers, then runs with the runtime inputs (a prefix of ins), checking that
 * inference agrees with what eval computed. */
static int run(one_node *r, const kn_tensor *ins, kn_tensor *outs)
{
    const char *names[8] = {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"};
    int st = kn_graph_infer(r->m->graph);
    if (st) return st;
    kn_eval_options o = {0};
    o.check_infer = 1;
    return kn_eval_model_opts(r->m, r->n_rt, names, ins, outs, &o);
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

static kn_tensor iota_f32(int rank, const int64_t *dims)
{
    kn_tensor t = f32_tensor(rank, dims, NULL);
    for (int64_t i = 0; i < kn_tensor_numel(&t); i++) ((float *)t.data)[i] = (float)i;
    return t;
}

static void check_out(const kn_tensor *t, int rank, const int64_t *dims, const float *want)
{
    assert_int_equal(t->dtype, KN_F32);
    assert_int_equal(t->rank, rank);
    for (int i = 0; i < rank; i++) assert_int_equal(t->dims[i], dims[i]);
    for (int64_t i = 0; i < kn_tensor_numel(t); i++) assert_float_equal(((float *)t->data)[i], want[i], 1e-6);
}

static void free_all(one_node *r, kn_tensor *ins, int n_in, kn_tensor *outs, int n_out)
{
    for (int i = 0; i < n_in; i++) kn_tensor_free(&ins[i]);
    for (int i = 0; i < n_out; i++) kn_tensor_free(&outs[i]);
    kn_model_free(r->m);
}

static void test_reshape_zero_and_minus_one(void **state)
{
    (void)state;
    int64_t d[3] = {2, 3, 4}, two = 3, shape[3] = {0, -1, 2};
    kn_tensor ins[2] = {iota_f32(3, d), i64_tensor(1, &two, shape)};
    one_node r = make_model(KN_OP_Reshape, 14, 2, ins, (int[]){0, 1}, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    /* Inference saw the constant shape: the output type is fully static. */
    const kn_shape *s = &r.node->outputs[0]->shape;
    assert_int_equal(s->rank, 3);
    assert_int_equal(s->dims[0], 2);
    assert_int_equal(s->dims[1], 6);
    assert_int_equal(s->dims[2], 2);
    float want[24];
    for (int i = 0; i < 24; i++) want[i] = (float)i;
    check_out(&out[0], 3, (int64_t[]){2, 6, 2}, want);
    free_all(&r, ins, 2, out, 1);
}

static void test_reshape_bad_count(void **state)
{
    (void)state;
    int64_t d[2] = {2, 3}, two = 2, shape[2] = {4, 2};
    kn_tensor ins[2] = {iota_f32(2, d), i64_tensor(1, &two, shape)};
    one_node r = make_model(KN_OP_Reshape, 14, 2, ins, (int[]){0, 1}, 1);
    assert_int_not_equal(kn_graph_infer(r.m->graph), 0);
    assert_non_null(strstr(kn_last_error(), "mv0"));
    free_all(&r, ins, 2, NULL, 0);
}

static void test_transpose(void **state)
{
    (void)state;
    int64_t d[3] = {2, 3, 4};
    kn_tensor ins[1] = {iota_f32(3, d)};
    one_node r = make_model(KN_OP_Transpose, 13, 1, ins, NULL, 1);
    set_ints_attr(r.m, r.node, "perm", 3, (int64_t[]){1, 2, 0});
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    float want[24];
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
            for (int i = 0; i < 2; i++) want[(j * 4 + k) * 2 + i] = (float)(i * 12 + j * 4 + k);
    check_out(&out[0], 3, (int64_t[]){3, 4, 2}, want);
    free_all(&r, ins, 1, out, 1);
}

static void test_slice_negative_step(void **state)
{
    (void)state;
    int64_t d[2] = {3, 5}, one = 1;
    /* x[:, 100:0:-2] on axis 1: start clamps to 4, so columns 4, 2. */
    kn_tensor ins[5] = {iota_f32(2, d), i64_tensor(1, &one, (int64_t[]){100}), i64_tensor(1, &one, (int64_t[]){0}),
                        i64_tensor(1, &one, (int64_t[]){-1}), i64_tensor(1, &one, (int64_t[]){-2})};
    one_node r = make_model(KN_OP_Slice, 13, 5, ins, (int[]){0, 1, 1, 1, 1}, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    check_out(&out[0], 2, (int64_t[]){3, 2}, (float[]){4, 2, 9, 7, 14, 12});
    assert_int_equal(r.node->outputs[0]->shape.dims[1], 2);
    free_all(&r, ins, 5, out, 1);
}

static void test_gather_negative_indices(void **state)
{
    (void)state;
    int64_t d[2] = {3, 2}, nd = 3;
    kn_tensor ins[2] = {iota_f32(2, d), i64_tensor(1, &nd, (int64_t[]){-1, 0, -3})};
    one_node r = make_model(KN_OP_Gather, 13, 2, ins, NULL, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    check_out(&out[0], 2, (int64_t[]){3, 2}, (float[]){4, 5, 0, 1, 0, 1});
    free_all(&r, ins, 2, out, 1);
}

static void test_gather_out_of_range_names_node(void **state)
{
    (void)state;
    int64_t d[2] = {3, 2}, nd = 2;
    kn_tensor ins[2] = {iota_f32(2, d), i64_tensor(1, &nd, (int64_t[]){1, 3})};
    one_node r = make_model(KN_OP_Gather, 13, 2, ins, NULL, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), KN_ERR_INVALID);
    const char *msg = kn_last_error();
    assert_non_null(strstr(msg, "mv0"));
    assert_non_null(strstr(msg, "index 3 is out of range"));
    assert_null(out[0].data);
    free_all(&r, ins, 2, out, 1);
}

static void test_concat(void **state)
{
    (void)state;
    int64_t a[2] = {2, 1}, b[2] = {2, 2};
    kn_tensor ins[2] = {f32_tensor(2, a, (float[]){1, 2}), f32_tensor(2, b, (float[]){3, 4, 5, 6})};
    one_node r = make_model(KN_OP_Concat, 13, 2, ins, NULL, 1);
    set_int_attr(r.node, "axis", -1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    check_out(&out[0], 2, (int64_t[]){2, 3}, (float[]){1, 3, 4, 2, 5, 6});
    free_all(&r, ins, 2, out, 1);
}

static void test_pad_reflect(void **state)
{
    (void)state;
    int64_t d[2] = {2, 3}, np = 4;
    kn_tensor ins[2] = {iota_f32(2, d), i64_tensor(1, &np, (int64_t[]){0, 2, 0, 1})};
    one_node r = make_model(KN_OP_Pad, 13, 2, ins, (int[]){0, 1}, 1);
    set_string_attr(r.m, r.node, "mode", "reflect");
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    /* Row [0 1 2] → [2 1 | 0 1 2 | 1]. */
    check_out(&out[0], 2, (int64_t[]){2, 6}, (float[]){2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4});
    free_all(&r, ins, 2, out, 1);
}

static void test_resize_nearest(void **state)
{
    (void)state;
    int64_t d[4] = {1, 1, 2, 2}, four = 4;
    kn_tensor scales;
    assert_int_equal(kn_tensor_alloc(&scales, KN_F32, 1, &four), 0);
    memcpy(scales.data, (float[]){1, 1, 2, 1.5f}, 16);
    kn_tensor ins[3] = {f32_tensor(4, d, (float[]){1, 2, 3, 4}), f32_tensor(1, (int64_t[]){0}, NULL), scales};
    one_node r = make_model(KN_OP_Resize, 13, 3, ins, (int[]){0, 1, 1}, 1);
    set_string_attr(r.m, r.node, "coordinate_transformation_mode", "asymmetric");
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    /* asymmetric + round_prefer_floor: rows 0,0,1,1; cols x/1.5 = 0, .67, 1.33 → 0, 1, 1. */
    check_out(&out[0], 4, (int64_t[]){1, 1, 4, 3}, (float[]){1, 2, 2, 1, 2, 2, 3, 4, 4, 3, 4, 4});
    free_all(&r, ins, 3, out, 1);
}

static void test_split_uneven(void **state)
{
    (void)state;
    int64_t d[1] = {5};
    kn_tensor ins[1] = {iota_f32(1, d)};
    one_node r = make_model(KN_OP_Split, 18, 1, ins, NULL, 2);
    set_int_attr(r.node, "num_outputs", 2);
    kn_tensor out[2] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    /* ceil(5 / 2) = 3, then the remainder. */
    check_out(&out[0], 1, (int64_t[]){3}, (float[]){0, 1, 2});
    check_out(&out[1], 1, (int64_t[]){2}, (float[]){3, 4});
    free_all(&r, ins, 1, out, 2);
}

static void test_scatter_nd_add(void **state)
{
    (void)state;
    int64_t d[1] = {4}, id[2] = {3, 1}, ud[1] = {3};
    kn_tensor ins[3] = {f32_tensor(1, d, (float[]){1, 2, 3, 4}), i64_tensor(2, id, (int64_t[]){1, -1, 1}),
                        f32_tensor(1, ud, (float[]){10, 20, 30})};
    one_node r = make_model(KN_OP_ScatterND, 18, 3, ins, NULL, 1);
    set_string_attr(r.m, r.node, "reduction", "add");
    kn_tensor out[1] = {{0}};
    /* Duplicate indices accumulate; -1 counts from the end. */
    assert_int_equal(run(&r, ins, out), 0);
    check_out(&out[0], 1, (int64_t[]){4}, (float[]){1, 42, 3, 24});
    free_all(&r, ins, 3, out, 1);
}

static void test_depth_to_space_crd(void **state)
{
    (void)state;
    int64_t d[4] = {1, 4, 1, 1};
    kn_tensor ins[1] = {iota_f32(4, d)};
    one_node r = make_model(KN_OP_DepthToSpace, 13, 1, ins, NULL, 1);
    set_int_attr(r.node, "blocksize", 2);
    set_string_attr(r.m, r.node, "mode", "CRD");
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    check_out(&out[0], 4, (int64_t[]){1, 1, 2, 2}, (float[]){0, 1, 2, 3});
    free_all(&r, ins, 1, out, 1);
}

static void test_reshape_runtime_shape_infers_rank(void **state)
{
    (void)state;
    int64_t d[2] = {2, 3}, three = 3;
    kn_tensor ins[2] = {iota_f32(2, d), i64_tensor(1, &three, (int64_t[]){3, 1, 2})};
    one_node r = make_model(KN_OP_Reshape, 14, 2, ins, NULL, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), 0);
    /* The shape is a runtime input: rank known from its length, dims not. */
    const kn_shape *s = &r.node->outputs[0]->shape;
    assert_int_equal(s->rank, 3);
    assert_int_equal(s->dims[0], -1);
    assert_int_equal(r.node->outputs[0]->dtype, KN_F32);
    check_out(&out[0], 3, (int64_t[]){3, 1, 2}, (float[]){0, 1, 2, 3, 4, 5});
    free_all(&r, ins, 2, out, 1);
}

static void test_pad_negative_result_error(void **state)
{
    (void)state;
    int64_t d[1] = {2}, np = 2;
    kn_tensor ins[2] = {iota_f32(1, d), i64_tensor(1, &np, (int64_t[]){-2, -1})};
    one_node r = make_model(KN_OP_Pad, 13, 2, ins, NULL, 1);
    kn_tensor out[1] = {{0}};
    assert_int_equal(run(&r, ins, out), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "node 'mv0' (Pad)"));
    assert_non_null(strstr(kn_last_error(), "negative"));
    free_all(&r, ins, 2, out, 1);
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

/* An output the node does not want is never allocated. */
static void test_exec_split_unwanted_output(void **state)
{
    (void)state;
    int64_t six = 6, three = 3;
    const int64_t parts[3] = {1, 2, 3};
    kn_tensor x = iota_f32(1, &six), sp = i64_tensor(1, &three, parts);
    const kn_tensor *in[2] = {&x, &sp};
    const bool has[3] = {true, false, true};
    kn_opdesc desc = rt_desc(KN_OP_Split, 13, 2, 3, has, NULL, 0);
    kn_exec_fn f = kn_op_exec(KN_OP_Split);
    assert_non_null(f);
    kn_tensor out[3];
    memset(out, 0, sizeof out);
    int st = f(&desc, in, out);
    if (st) fail_msg("%s", kn_last_error());
    int64_t one = 1;
    check_out(&out[0], 1, &one, (const float[]){0});
    assert_null(out[1].data);
    check_out(&out[2], 1, &three, (const float[]){3, 4, 5});
    kn_tensor_free(&out[0]);
    kn_tensor_free(&out[2]);
    kn_tensor_free(&x);
    kn_tensor_free(&sp);
}

/* Attributes that went through the artifact serialization drive the op. */
static void test_exec_transpose_serialized_attrs(void **state)
{
    (void)state;
    const int64_t perm[2] = {1, 0};
    kn_attr a = {.name = "perm", .kind = KN_ATTR_INTS, .n = 2, .ints = (int64_t *)perm};
    unsigned char *bytes = NULL;
    size_t len = 0;
    assert_int_equal(kn_attrs_write(&a, 1, &bytes, &len), 0);
    kn_attr *attrs = NULL;
    int n_attrs = 0;
    void *block = NULL;
    assert_int_equal(kn_attrs_read(bytes, len, &attrs, &n_attrs, &block), 0);
    free(bytes);
    int64_t d[2] = {2, 3}, want_d[2] = {3, 2};
    kn_tensor x = iota_f32(2, d);
    const kn_tensor *in[1] = {&x};
    kn_opdesc desc = rt_desc(KN_OP_Transpose, 13, 1, 1, NULL, attrs, n_attrs);
    kn_tensor out[1] = {{0}};
    int st = kn_op_exec(KN_OP_Transpose)(&desc, in, out);
    if (st) fail_msg("%s", kn_last_error());
    check_out(&out[0], 2, want_d, (const float[]){0, 3, 1, 4, 2, 5});
    kn_tensor_free(&out[0]);
    kn_tensor_free(&x);
    kn_attrs_free(block);
}

/* in[] holds only n_inputs entries; a required input past them is an error
 * naming the node, not a read out of bounds. */
static void test_exec_missing_inputs_name_node(void **state)
{
    (void)state;
    int64_t two = 2;
    kn_tensor x = iota_f32(1, &two);
    const kn_tensor *in[1] = {&x};
    kn_tensor out[1] = {{0}};
    const kn_op ops[] = {KN_OP_Gather, KN_OP_GatherElements, KN_OP_GatherND, KN_OP_ScatterND, KN_OP_Reshape,
                         KN_OP_Expand, KN_OP_Tile, KN_OP_Concat};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        int n_in = ops[i] == KN_OP_Concat ? 0 : 1;
        kn_opdesc desc = rt_desc(ops[i], 13, n_in, 1, NULL, NULL, 0);
        assert_int_not_equal(kn_op_exec(ops[i])(&desc, in, out), 0);
        char want[64];
        snprintf(want, sizeof want, "node 'r' (%s): ", kn_op_type_name(ops[i]));
        if (!strstr(kn_last_error(), want)) fail_msg("%s", kn_last_error());
        assert_null(out[0].data);
    }
    kn_tensor_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reshape_zero_and_minus_one),
        cmocka_unit_test(test_reshape_bad_count),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_slice_negative_step),
        cmocka_unit_test(test_gather_negative_indices),
        cmocka_unit_test(test_gather_out_of_range_names_node),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_pad_reflect),
        cmocka_unit_test(test_resize_nearest),
        cmocka_unit_test(test_split_uneven),
        cmocka_unit_test(test_scatter_nd_add),
        cmocka_unit_test(test_depth_to_space_crd),
        cmocka_unit_test(test_reshape_runtime_shape_infers_rank),
        cmocka_unit_test(test_pad_negative_result_error),
        cmocka_unit_test(test_exec_split_unwanted_output),
        cmocka_unit_test(test_exec_transpose_serialized_attrs),
        cmocka_unit_test(test_exec_missing_inputs_name_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
