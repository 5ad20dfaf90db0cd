/* Unit tests of codegen/cpu/lower_reduce.c: each case builds a one-node
 * model, lowers the node by hand into an LLVM function with the node
 * signature of cg.h (inputs/outputs as user buffers, constants in a weights
 * blob), optimizes it (O3, host CPU), runs it with MCJIT and compares with
 * the reference evaluator: floats within 1e-5 of the output's magnitude
 * (NaN where the reference has NaN), integers exactly. Set
 * KILN_TEST_DUMP_IR=1 to print each optimized module. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cg.h"
#include "jit_harness.h"
#include "eval.h"

/* ---- a one-node model ----------------------------------------------------------- */

typedef struct tc {
    kn_model *m;
    kn_node *n;
    kn_value *ins[8];
    int n_ins;
    kn_tensor rt[4]; /* runtime input data */
    const char *rt_names[4];
    int n_rt;
    uint32_t seed;
} tc;

static float rnd(tc *c)
{
    c->seed = c->seed * 1664525u + 1013904223u;
    return (float)((c->seed >> 8) & 0xffff) / 65536.0f * 6.0f - 3.0f;
}

static void fill(tc *c, kn_tensor *t, float lo, float hi)
{
    int64_t n = kn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        float r = (rnd(c) + 3.0f) / 6.0f * (hi - lo) + lo;
        if (kn_dtype_info(t->dtype)->is_float) kn_store_f64(t->dtype, t->data, (size_t)i, r);
        else kn_store_i64(t->dtype, t->data, (size_t)i, (int64_t)lrintf(r));
    }
}

static tc *tc_new(int opset)
{
    tc *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->m = kn_model_create();
    assert_non_null(c->m);
    c->seed = 12345;
    assert_int_equal(kn_model_set_opset(c->m, "", opset), 0);
    return c;
}

/* A runtime input with random values in [lo, hi]. */
static kn_tensor *tc_input(tc *c, kn_dtype dt, int rank, const int64_t *dims, float lo, float hi)
{
    static const char *names[] = {"x0", "x1", "x2", "x3"};
    kn_tensor *t = &c->rt[c->n_rt];
    assert_int_equal(kn_tensor_alloc(t, dt, rank, dims), 0);
    fill(c, t, lo, hi);
    kn_shape s = {.rank = rank};
    memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
    c->rt_names[c->n_rt] = names[c->n_rt];
    c->ins[c->n_ins++] = kn_graph_add_input(c->m->graph, names[c->n_rt], dt, &s);
    assert_non_null(c->ins[c->n_ins - 1]);
    c->n_rt++;
    return t;
}

/* A constant input: random in [lo, hi] unless ints is given (i64 values). */
static void tc_const(tc *c, kn_dtype dt, int rank, const int64_t *dims, float lo, float hi, const int64_t *ints)
{
    kn_tensor *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(kn_tensor_alloc(t, dt, rank, dims), 0);
    if (ints) memcpy(t->data, ints, t->nbytes);
    else fill(c, t, lo, hi);
    c->ins[c->n_ins] = kn_graph_add_constant(c->m->graph, NULL, t);
    assert_non_null(c->ins[c->n_ins]);
    c->n_ins++;
}

static void tc_axes(tc *c, int n, const int64_t *axes)
{
    int64_t d = n;
    tc_const(c, KN_I64, 1, &d, 0, 0, axes);
}

static void tc_node(tc *c, kn_op op, int n_out)
{
    c->n = kn_node_create(c->m->graph, op, "n0", c->n_ins, c->ins, n_out);
    assert_non_null(c->n);
    for (int i = 0; i < n_out; i++) assert_int_equal(kn_graph_add_output(c->m->graph, c->n->outputs[i]), 0);
}

static void tc_int(tc *c, const char *name, int64_t v) { kn_node_add_attr(c->n, name, KN_ATTR_INT)->i = v; }
static void tc_float(tc *c, const char *name, float v) { kn_node_add_attr(c->n, name, KN_ATTR_FLOAT)->f = v; }
static void tc_str(tc *c, const char *name, const char *v)
{
    kn_attr *a = kn_node_add_attr(c->n, name, KN_ATTR_STRING);
    a->s = kn_arena_strdup(&c->m->arena, v);
    a->s_len = strlen(v);
}
static void tc_ints(tc *c, const char *name, int n, const int64_t *v)
{
    kn_attr *a = kn_node_add_attr(c->n, name, KN_ATTR_INTS);
    a->n = n;
    a->ints = kn_arena_memdup(&c->m->arena, v, sizeof *v * (size_t)n);
}

/* ---- lowering and running ---------------------------------------------------------- */

static void check_close(const kn_tensor *ref, const void *got, int out_index)
{
    int64_t n = kn_tensor_numel(ref);
    if (!kn_dtype_info(ref->dtype)->is_float) {
        if (memcmp(ref->data, got, ref->nbytes)) fail_msg("output %d: integer results differ", out_index);
        return;
    }
    /* Per element, |got - want| <= atol + rtol * |want| as ONNX and numpy
     * compare (a tolerance scaled by the output's largest value let small
     * outputs be anything). f32/f64: rtol 1e-5, with an absolute part for
     * sums that cancel; f16/bf16: one unit in the last place, since float
     * accumulation may round the other way than the reference's double. */
    double rtol = ref->dtype == KN_F16 ? 1e-3 : ref->dtype == KN_BF16 ? 8e-3 : 1e-5;
    double atol = rtol;
    for (int64_t i = 0; i < n; i++) {
        double r = kn_load_f64(ref->dtype, ref->data, (size_t)i), g = kn_load_f64(ref->dtype, got, (size_t)i);
        double tol = atol + rtol * fabs(r);
        bool ok = isnan(r) ? isnan(g) : isinf(r) ? g == r : fabs(r - g) <= tol;
        if (!ok) fail_msg("output %d element %lld: got %.9g, expected %.9g (tol %g)", out_index, (long long)i, g, r, tol);
    }
}

/* Infers, evaluates with the reference, lowers, JITs, runs and compares.
 * Returns the lowering's status (KN_ERR_UNSUPPORTED: nothing was run). */
static int tc_run(tc *c)
{
    kn_graph *g = c->m->graph;
    if (kn_graph_infer(g)) fail_msg("inference: %s", kn_last_error());
    kn_tensor ref[4] = {{0}};
    if (kn_eval_model(c->m, c->n_rt, c->rt_names, c->rt, ref)) fail_msg("reference: %s", kn_last_error());

    jit_node j;
    int st = jit_lower(&j, c->m, c->ins, c->n_ins, c->n, jit_find(kn_cg_lower_reduce, c->n->op));
    if (st == KN_OK) {
        void *inputs[4], *outputs[4] = {0};
        for (int i = 0; i < c->n_rt; i++) inputs[i] = c->rt[i].data;
        for (int i = 0; i < c->n->n_outputs; i++) {
            outputs[i] = malloc(ref[i].nbytes + 1);
            assert_non_null(outputs[i]);
            memset(outputs[i], 0xcd, ref[i].nbytes + 1);
        }
        assert_int_equal(jit_call(&j, inputs, outputs), 0);
        for (int i = 0; i < c->n->n_outputs; i++) {
            check_close(&ref[i], outputs[i], i);
            free(outputs[i]);
        }
    }
    jit_free(&j);
    for (int i = 0; i < 4; i++) kn_tensor_free(&ref[i]);
    for (int i = 0; i < c->n_rt; i++) kn_tensor_free(&c->rt[i]);
    kn_model_free(c->m);
    free(c);
    return st;
}

/* Runs c and requires that the node was generated (not left to the runtime). */
static void gen(tc *c) { assert_int_equal(tc_run(c), KN_OK); }

#define D(...) ((const int64_t[]){__VA_ARGS__})

static void softmax_case(kn_op op, int opset, int rank, const int64_t *dims, int64_t axis, bool has_axis, kn_dtype dt);

/* ---- Reduce* ------------------------------------------------------------------------- */

static void reduce_case(kn_op op, kn_dtype dt, int rank, const int64_t *dims, int na, const int64_t *axes, int keep,
                        float lo, float hi)
{
    tc *c = tc_new(18);
    tc_input(c, dt, rank, dims, lo, hi);
    if (na >= 0) tc_axes(c, na, axes);
    tc_node(c, op, 1);
    tc_int(c, "keepdims", keep);
    gen(c);
}

static void test_reduce_layouts(void **state)
{
    (void)state;
    static const kn_op ops[] = {KN_OP_ReduceSum, KN_OP_ReduceMean, KN_OP_ReduceMax, KN_OP_ReduceMin,
                                KN_OP_ReduceProd, KN_OP_ReduceL1, KN_OP_ReduceL2, KN_OP_ReduceLogSum,
                                KN_OP_ReduceLogSumExp, KN_OP_ReduceSumSquare};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        bool prod = ops[k] == KN_OP_ReduceProd, lg = ops[k] == KN_OP_ReduceLogSum;
        float lo = prod ? 0.5f : lg ? 0.1f : -3, hi = prod ? 1.5f : 3;
        reduce_case(ops[k], KN_F32, 2, D(4, 100), 1, D(-1), 0, lo, hi);        /* last axis: vector rows */
        reduce_case(ops[k], KN_F32, 3, D(3, 37, 5), 1, D(1), 1, lo, hi);       /* middle axis: row buffer */
        reduce_case(ops[k], KN_F32, 3, D(2, 3, 40), 2, D(0, 2), 0, lo, hi);    /* two reduced groups */
        reduce_case(ops[k], KN_F32, 3, D(6, 1, 7), 1, D(0), 1, lo, hi);        /* first axis */
        reduce_case(ops[k], KN_F32, 2, D(5, 9), 0, NULL, 0, lo, hi);           /* all axes */
        reduce_case(ops[k], KN_F64, 2, D(3, 50), 1, D(1), 1, lo, hi);
    }
}

static void test_reduce_ints_and_attrs(void **state)
{
    (void)state;
    reduce_case(KN_OP_ReduceSum, KN_I32, 2, D(3, 70), 1, D(1), 0, -50, 50);
    reduce_case(KN_OP_ReduceSum, KN_I64, 3, D(3, 4, 5), 1, D(1), 0, -50, 50);
    reduce_case(KN_OP_ReduceMax, KN_I64, 2, D(3, 70), 1, D(1), 1, -50, 50);
    reduce_case(KN_OP_ReduceMin, KN_I32, 2, D(9, 3), 1, D(0), 1, -50, 50);
    reduce_case(KN_OP_ReduceSumSquare, KN_I32, 2, D(4, 33), 1, D(1), 1, -50, 50);
    reduce_case(KN_OP_ReduceL1, KN_I64, 2, D(4, 33), 1, D(0), 1, -50, 50);
    reduce_case(KN_OP_ReduceProd, KN_I32, 2, D(4, 5), 1, D(1), 1, -3, 3);
    /* axes as an attribute (opset 13 ReduceMax, opset 11 ReduceSum) */
    tc *c = tc_new(13);
    tc_input(c, KN_F32, 3, D(2, 3, 4), -3, 3);
    tc_node(c, KN_OP_ReduceMax, 1);
    tc_ints(c, "axes", 2, D(0, -1));
    gen(c);
    c = tc_new(11);
    tc_input(c, KN_F32, 3, D(2, 3, 4), -3, 3);
    tc_node(c, KN_OP_ReduceSum, 1);
    tc_ints(c, "axes", 1, D(1));
    tc_int(c, "keepdims", 0);
    gen(c);
    /* noop_with_empty_axes: no reduction at all */
    static const kn_op noop[] = {KN_OP_ReduceSum, KN_OP_ReduceL2, KN_OP_ReduceMean};
    for (int k = 0; k < 3; k++) {
        c = tc_new(18);
        tc_input(c, KN_F32, 2, D(3, 4), -3, 3);
        tc_node(c, noop[k], 1);
        tc_int(c, "noop_with_empty_axes", 1);
        gen(c);
    }
    /* an empty reduction: identities and NaN means */
    reduce_case(KN_OP_ReduceSum, KN_F32, 2, D(3, 0), 1, D(1), 1, -3, 3);
    reduce_case(KN_OP_ReduceMean, KN_F32, 2, D(3, 0), 1, D(1), 1, -3, 3);
    reduce_case(KN_OP_ReduceMax, KN_F32, 2, D(0, 4), 1, D(0), 0, -3, 3);
    /* axes known only at run time → left to the runtime */
    c = tc_new(18);
    tc_input(c, KN_F32, 2, D(3, 4), -3, 3);
    tc_input(c, KN_I64, 1, D(1), 1, 1);
    tc_node(c, KN_OP_ReduceSum, 1);
    c->n->outputs[0]->shape = (kn_shape){0};
    assert_int_equal(tc_run(c), KN_ERR_UNSUPPORTED);
}

/* f16 and bf16 compute in float with conversions on load and store. */
static void test_half_types(void **state)
{
    (void)state;
    static const kn_dtype dts[] = {KN_F16, KN_BF16};
    for (int k = 0; k < 2; k++) {
        kn_dtype dt = dts[k];
        reduce_case(KN_OP_ReduceSum, dt, 2, D(4, 100), 1, D(-1), 0, -3, 3);
        reduce_case(KN_OP_ReduceMean, dt, 3, D(3, 37, 5), 1, D(1), 1, -3, 3);
        reduce_case(KN_OP_ReduceMax, dt, 3, D(2, 3, 40), 2, D(0, 2), 0, -3, 3);
        reduce_case(KN_OP_ReduceLogSumExp, dt, 2, D(4, 50), 1, D(1), 0, -3, 3);
        softmax_case(KN_OP_Softmax, 13, 2, D(4, 100), 0, false, dt);
        softmax_case(KN_OP_LogSoftmax, 13, 3, D(2, 5, 7), 1, true, dt);
        tc *c = tc_new(17);
        tc_input(c, dt, 2, D(3, 64), -3, 3);
        tc_const(c, dt, 1, D(64), 0.5f, 2, NULL);
        tc_const(c, dt, 1, D(64), -1, 1, NULL);
        tc_node(c, KN_OP_LayerNormalization, 1);
        gen(c);
        c = tc_new(19);
        tc_input(c, dt, 4, D(1, 2, 9, 9), -3, 3);
        tc_node(c, KN_OP_AveragePool, 1);
        tc_ints(c, "kernel_shape", 2, D(3, 3));
        tc_ints(c, "pads", 4, D(1, 1, 1, 1));
        gen(c);
        c = tc_new(13);
        tc_input(c, dt, 2, D(3, 20), -3, 3);
        tc_node(c, KN_OP_ArgMax, 1);
        tc_int(c, "axis", 1);
        gen(c);
    }
}

static void test_reduce_nan(void **state)
{
    (void)state;
    static const kn_op ops[] = {KN_OP_ReduceMax, KN_OP_ReduceMin, KN_OP_ReduceSum, KN_OP_ReduceLogSumExp};
    for (int k = 0; k < 4; k++)
        for (int layout = 0; layout < 2; layout++) {
            tc *c = tc_new(18);
            kn_tensor *x = tc_input(c, KN_F32, 2, D(4, 40), -3, 3);
            float *p = x->data;
            p[5] = NAN;      /* row 0, column 5 */
            p[80 + 39] = NAN; /* row 2, last column */
            p[120 + 3] = INFINITY;
            tc_axes(c, 1, layout ? D(0) : D(1));
            tc_node(c, ops[k], 1);
            gen(c);
        }
}

/* ---- ArgMax / ArgMin -------------------------------------------------------------------- */

static void test_argmax(void **state)
{
    (void)state;
    /* long rows (vector lanes, lane merge, tail), ties and NaN */
    for (int k = 0; k < 16; k++) {
        tc *c = tc_new(13);
        kn_dtype dt = k & 8 ? KN_I64 : k & 4 ? KN_F64 : KN_F32;
        kn_tensor *x = tc_input(c, dt, 2, D(5, 77), -3, 3);
        if (dt != KN_I64) {
            for (int64_t i = 0; i < kn_tensor_numel(x); i++)
                kn_store_f64(dt, x->data, (size_t)i, round(kn_load_f64(dt, x->data, (size_t)i)));
            kn_store_f64(dt, x->data, 77 + 40, NAN);
            kn_store_f64(dt, x->data, 77 + 60, NAN);
            kn_store_f64(dt, x->data, 154 + 76, NAN);
        }
        tc_node(c, k & 2 ? KN_OP_ArgMin : KN_OP_ArgMax, 1);
        tc_int(c, "axis", -1);
        tc_int(c, "select_last_index", k & 1);
        gen(c);
    }
    for (int k = 0; k < 8; k++) {
        tc *c = tc_new(13);
        kn_dtype dt = k & 4 ? KN_I32 : KN_F32;
        kn_tensor *x = tc_input(c, dt, 3, D(3, 20, k & 1 ? 4 : 1), -3, 3); /* small ints: many ties */
        if (dt == KN_F32) {
            float *p = x->data;
            for (int64_t i = 0; i < kn_tensor_numel(x); i++) p[i] = roundf(p[i]);
            p[7] = NAN;
            p[9] = NAN;
        }
        tc_node(c, k & 2 ? KN_OP_ArgMin : KN_OP_ArgMax, 1);
        tc_int(c, "axis", 1);
        tc_int(c, "select_last_index", k & 1);
        tc_int(c, "keepdims", k & 1);
        gen(c);
    }
}

/* ---- Softmax / LogSoftmax ---------------------------------------------------------------- */

static void softmax_case(kn_op op, int opset, int rank, const int64_t *dims, int64_t axis, bool has_axis, kn_dtype dt)
{
    tc *c = tc_new(opset);
    tc_input(c, dt, rank, dims, -10, 10);
    tc_node(c, op, 1);
    if (has_axis) tc_int(c, "axis", axis);
    gen(c);
}

static void test_softmax(void **state)
{
    (void)state;
    for (int lg = 0; lg < 2; lg++) {
        kn_op op = lg ? KN_OP_LogSoftmax : KN_OP_Softmax;
        softmax_case(op, 13, 2, D(4, 100), 0, false, KN_F32);
        softmax_case(op, 13, 3, D(2, 5, 7), 1, true, KN_F32);
        softmax_case(op, 13, 3, D(2, 5, 7), 0, true, KN_F32);
        softmax_case(op, 11, 3, D(2, 3, 4), 0, false, KN_F32); /* legacy: 2-D at axis 1 */
        softmax_case(op, 11, 3, D(2, 3, 20), 2, true, KN_F32);
        softmax_case(op, 13, 2, D(3, 33), -1, true, KN_F64);
    }
    /* wide range (exp underflows to 0 for most), and NaN/inf rows */
    for (int lg = 0; lg < 2; lg++)
        for (int axis = 0; axis < 2; axis++) {
            tc *c = tc_new(13);
            kn_tensor *x = tc_input(c, KN_F32, 2, D(6, 40), -100, 100);
            float *p = x->data;
            p[3] = NAN;
            p[40 + 7] = INFINITY;
            p[80 + 2] = -INFINITY;
            for (int i = 0; i < 40; i++) p[120 + i] = -INFINITY;
            tc_node(c, lg ? KN_OP_LogSoftmax : KN_OP_Softmax, 1);
            tc_int(c, "axis", axis);
            gen(c);
        }
}

/* ---- normalizations ------------------------------------------------------------------------ */

static void test_layernorm(void **state)
{
    (void)state;
    tc *c = tc_new(17);
    tc_input(c, KN_F32, 2, D(3, 64), -3, 3);
    tc_const(c, KN_F32, 1, D(64), 0.5f, 2, NULL);
    tc_const(c, KN_F32, 1, D(64), -1, 1, NULL);
    tc_node(c, KN_OP_LayerNormalization, 1);
    gen(c);
    c = tc_new(17);
    tc_input(c, KN_F32, 3, D(2, 3, 8), -3, 3);
    tc_const(c, KN_F32, 2, D(3, 8), 0.5f, 2, NULL);
    tc_node(c, KN_OP_LayerNormalization, 3); /* no bias; Mean and InvStdDev wanted */
    tc_int(c, "axis", -2);
    tc_float(c, "epsilon", 1e-3f);
    gen(c);
    c = tc_new(17);
    tc_input(c, KN_F64, 2, D(4, 37), -3, 3);
    tc_input(c, KN_F64, 1, D(37), 0.5f, 2);
    tc_input(c, KN_F64, 1, D(37), -1, 1);
    tc_node(c, KN_OP_LayerNormalization, 1);
    gen(c);
}

static void test_batchnorm(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        tc *c = tc_new(15);
        tc_input(c, k ? KN_F64 : KN_F32, 4, D(2, 3, 5, 5), -3, 3);
        tc_const(c, KN_F32, 1, D(3), 0.5f, 2, NULL);
        tc_const(c, KN_F32, 1, D(3), -1, 1, NULL);
        tc_const(c, KN_F32, 1, D(3), -1, 1, NULL);
        tc_const(c, KN_F32, 1, D(3), 0.5f, 2, NULL);
        tc_node(c, KN_OP_BatchNormalization, 1);
        tc_float(c, "epsilon", 1e-3f);
        gen(c);
    }
}

static void test_instance_group_norm(void **state)
{
    (void)state;
    tc *c = tc_new(17);
    tc_input(c, KN_F32, 4, D(2, 3, 4, 5), -3, 3);
    tc_const(c, KN_F32, 1, D(3), 0.5f, 2, NULL);
    tc_const(c, KN_F32, 1, D(3), -1, 1, NULL);
    tc_node(c, KN_OP_InstanceNormalization, 1);
    gen(c);
    c = tc_new(18); /* per-group scale/bias */
    tc_input(c, KN_F32, 4, D(2, 6, 3, 3), -3, 3);
    tc_const(c, KN_F32, 1, D(3), 0.5f, 2, NULL);
    tc_const(c, KN_F32, 1, D(3), -1, 1, NULL);
    tc_node(c, KN_OP_GroupNormalization, 1);
    tc_int(c, "num_groups", 3);
    gen(c);
    c = tc_new(21); /* per-channel scale/bias */
    tc_input(c, KN_F32, 4, D(2, 6, 3, 3), -3, 3);
    tc_const(c, KN_F32, 1, D(6), 0.5f, 2, NULL);
    tc_const(c, KN_F32, 1, D(6), -1, 1, NULL);
    tc_node(c, KN_OP_GroupNormalization, 1);
    tc_int(c, "num_groups", 2);
    gen(c);
}

static void test_lpnorm(void **state)
{
    (void)state;
    for (int k = 0; k < 4; k++) {
        tc *c = tc_new(13);
        kn_tensor *x = tc_input(c, KN_F32, 3, D(3, 4, 5), -3, 3);
        for (int i = 0; i < 5; i++) ((float *)x->data)[i] = 0; /* a zero norm */
        tc_node(c, KN_OP_LpNormalization, 1);
        tc_int(c, "axis", k & 1 ? 1 : -1);
        tc_int(c, "p", k & 2 ? 1 : 2);
        gen(c);
    }
}

/* ---- pooling ---------------------------------------------------------------------------------- */

static void test_global_pool(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        tc *c = tc_new(13);
        tc_input(c, KN_F32, 4, D(2, 3, 7, 7), -3, 3);
        tc_node(c, k ? KN_OP_GlobalMaxPool : KN_OP_GlobalAveragePool, 1);
        gen(c);
    }
}

static void pool_case(kn_op op, int rank, const int64_t *dims, const int64_t *ks, const int64_t *strides,
                      const int64_t *pads, const int64_t *dil, int ceil, int cip, const char *auto_pad)
{
    int nsp = rank - 2;
    tc *c = tc_new(19);
    tc_input(c, KN_F32, rank, dims, -3, 3);
    tc_node(c, op, 1);
    tc_ints(c, "kernel_shape", nsp, ks);
    if (strides) tc_ints(c, "strides", nsp, strides);
    if (pads) tc_ints(c, "pads", 2 * nsp, pads);
    if (dil) tc_ints(c, "dilations", nsp, dil);
    if (ceil) tc_int(c, "ceil_mode", 1);
    if (cip) tc_int(c, "count_include_pad", 1);
    if (auto_pad) tc_str(c, "auto_pad", auto_pad);
    gen(c);
}

static void test_pool(void **state)
{
    (void)state;
    for (int k = 0; k < 2; k++) {
        kn_op op = k ? KN_OP_AveragePool : KN_OP_MaxPool;
        pool_case(op, 4, D(1, 2, 9, 9), D(3, 3), D(2, 2), D(1, 1, 1, 1), NULL, 0, 0, NULL);
        pool_case(op, 4, D(1, 2, 9, 9), D(3, 3), D(2, 2), D(1, 1, 1, 1), NULL, 0, 1, NULL);
        pool_case(op, 4, D(2, 3, 8, 8), D(2, 2), D(2, 2), NULL, NULL, 0, 0, NULL);
        pool_case(op, 4, D(1, 1, 10, 10), D(3, 3), D(2, 2), NULL, NULL, 1, 0, NULL);
        pool_case(op, 4, D(1, 1, 10, 10), D(3, 3), D(2, 2), NULL, NULL, 1, 1, NULL);
        pool_case(op, 4, D(1, 2, 7, 7), D(2, 2), D(1, 1), NULL, D(2, 2), 0, 0, NULL);
        pool_case(op, 4, D(1, 2, 7, 7), D(3, 3), D(2, 2), NULL, NULL, 0, 0, "SAME_UPPER");
        pool_case(op, 3, D(2, 3, 11), D(4), D(3), D(1, 2), NULL, 0, 0, NULL);
        pool_case(op, 5, D(1, 2, 4, 5, 6), D(2, 2, 2), NULL, NULL, NULL, 0, 0, NULL);
    }
    /* MaxPool with Indices (row-major and column-major), NaN taps */
    for (int k = 0; k < 3; k++) {
        tc *c = tc_new(12);
        kn_tensor *x = tc_input(c, KN_F32, k == 2 ? 5 : 4, k == 2 ? D(1, 2, 4, 5, 6) : D(2, 2, 7, 8), -3, 3);
        ((float *)x->data)[0] = NAN;
        ((float *)x->data)[20] = NAN;
        tc_node(c, KN_OP_MaxPool, 2);
        tc_ints(c, "kernel_shape", k == 2 ? 3 : 2, D(3, 3, 2));
        tc_ints(c, "strides", k == 2 ? 3 : 2, D(2, 2, 2));
        if (k < 2) tc_ints(c, "pads", 4, D(1, 1, 1, 1));
        tc_int(c, "storage_order", k == 1);
        gen(c);
    }
    /* 8-bit integer MaxPool (compared after sign/zero extension) */
    for (int k = 0; k < 2; k++) {
        tc *c = tc_new(12);
        tc_input(c, k ? KN_U8 : KN_I8, 4, D(1, 3, 9, 9), k ? 0 : -128, k ? 255 : 127);
        tc_node(c, KN_OP_MaxPool, 1);
        tc_ints(c, "kernel_shape", 2, D(3, 3));
        tc_ints(c, "strides", 2, D(2, 2));
        tc_ints(c, "pads", 4, D(1, 1, 1, 1));
        gen(c);
    }
    /* LpPool (p = 2 default, 1, 3) in 1-, 2- and 3-D; GlobalLpPool */
    pool_case(KN_OP_LpPool, 4, D(1, 2, 9, 9), D(3, 3), D(2, 2), D(1, 1, 1, 1), NULL, 0, 0, NULL);
    pool_case(KN_OP_LpPool, 3, D(2, 3, 11), D(4), D(3), D(1, 2), NULL, 0, 0, NULL);
    pool_case(KN_OP_LpPool, 5, D(1, 2, 4, 5, 6), D(2, 2, 2), NULL, NULL, NULL, 0, 0, NULL);
    for (int p = 1; p <= 3; p++) {
        tc *c = tc_new(18);
        tc_input(c, KN_F32, 4, D(1, 2, 6, 6), -3, 3);
        tc_node(c, KN_OP_LpPool, 1);
        tc_ints(c, "kernel_shape", 2, D(2, 3));
        tc_int(c, "p", p);
        gen(c);
        c = tc_new(18);
        tc_input(c, KN_F32, 4, D(2, 3, 7, 7), -3, 3);
        tc_node(c, KN_OP_GlobalLpPool, 1);
        tc_int(c, "p", p);
        gen(c);
    }
}

int main(void)
{
    LLVMLinkInMCJIT();
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_layouts),
        cmocka_unit_test(test_reduce_ints_and_attrs),
        cmocka_unit_test(test_reduce_nan),
        cmocka_unit_test(test_half_types),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_instance_group_norm),
        cmocka_unit_test(test_lpnorm),
        cmocka_unit_test(test_global_pool),
        cmocka_unit_test(test_pool),
    };
    /* KN_TEST_FILTER=test_unary_special runs one group of cases (make mutate) */
    const char *filter = getenv("KN_TEST_FILTER");
    if (filter && *filter) cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
