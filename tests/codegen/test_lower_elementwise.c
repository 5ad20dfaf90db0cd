/* Unit tests of codegen/cpu/lower_elementwise.c: each case builds a one-node
 * model, lowers the node by hand into an LLVM function with the node
 * signature of cg.h (runtime inputs/outputs as user buffers, constants in a
 * weights blob), optimizes it (O3, host CPU), runs it with MCJIT and compares
 * with the reference evaluator (the runtime kernels) element by element,
 * |got - want| <= atol + rtol * |want| as ONNX and numpy compare (f32/f64
 * rtol 1e-5, f16/bf16 a few of their ulps), NaN where the reference has
 * NaN; exactly where the op is exact (rounding, sign, min/max, clip,
 * selection, casts), and integers and bools always exactly. Set KILN_TEST_DUMP_IR=1 to
 * print each optimized module. */
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

#define MAX_IN 6

/* ---- a one-node model ----------------------------------------------------------- */

typedef struct tc {
    kn_model *m;
    kn_node *n;
    kn_value *ins[MAX_IN];
    int n_ins;
    kn_tensor rt[MAX_IN]; /* runtime input data */
    const char *rt_names[MAX_IN];
    int n_rt;
    uint32_t seed;
} tc;

static float rnd01(tc *c)
{
    c->seed = c->seed * 1664525u + 1013904223u;
    return (float)((c->seed >> 8) & 0xffff) / 65536.0f;
}

/* Element i of t set from the double v (integers rounded, bools v > 0). */
static void put(kn_tensor *t, int64_t i, double v)
{
    if (t->dtype == KN_BOOL) ((uint8_t *)t->data)[i] = v > 0;
    else if (kn_dtype_info(t->dtype)->is_float) kn_store_f64(t->dtype, t->data, (size_t)i, v);
    else kn_store_i64(t->dtype, t->data, (size_t)i, (int64_t)llrint(v));
}

static void fill(tc *c, kn_tensor *t, float lo, float hi, const double *vals)
{
    int64_t n = kn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) put(t, i, vals ? vals[i] : lo + rnd01(c) * (hi - lo));
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

/* A runtime input: random in [lo, hi], or vals (one per element) if given. */
static void tc_input(tc *c, kn_dtype dt, int rank, const int64_t *dims, float lo, float hi, const double *vals)
{
    static const char *names[] = {"x0", "x1", "x2", "x3", "x4", "x5"};
    assert_true(c->n_rt < MAX_IN && c->n_ins < MAX_IN);
    kn_tensor *t = &c->rt[c->n_rt];
    assert_int_equal(kn_tensor_alloc(t, dt, rank, dims), 0);
    fill(c, t, lo, hi, vals);
    kn_shape s = {.rank = rank};
    memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
    c->rt_names[c->n_rt] = names[c->n_rt];
    c->ins[c->n_ins++] = kn_graph_add_input(c->m->graph, names[c->n_rt], dt, &s);
    assert_non_null(c->ins[c->n_ins - 1]);
    c->n_rt++;
}

/* A constant input (random in [lo, hi] unless vals). */
static void tc_const(tc *c, kn_dtype dt, int rank, const int64_t *dims, float lo, float hi, const double *vals)
{
    kn_tensor *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(kn_tensor_alloc(t, dt, rank, dims), 0);
    fill(c, t, lo, hi, vals);
    c->ins[c->n_ins] = kn_graph_add_constant(c->m->graph, NULL, t);
    assert_non_null(c->ins[c->n_ins]);
    c->n_ins++;
}

static void tc_absent(tc *c) { c->ins[c->n_ins++] = NULL; }

static void tc_node(tc *c, kn_op op)
{
    c->n = kn_node_create(c->m->graph, op, "n0", c->n_ins, c->ins, 1);
    assert_non_null(c->n);
    assert_int_equal(kn_graph_add_output(c->m->graph, c->n->outputs[0]), 0);
}

static void tc_int(tc *c, const char *name, int64_t v) { kn_node_add_attr(c->n, name, KN_ATTR_INT)->i = v; }
static void tc_float(tc *c, const char *name, float v) { kn_node_add_attr(c->n, name, KN_ATTR_FLOAT)->f = v; }
static void tc_str(tc *c, const char *name, const char *v)
{
    kn_attr *a = kn_node_add_attr(c->n, name, KN_ATTR_STRING);
    a->s = kn_arena_strdup(&c->m->arena, v);
    a->s_len = strlen(v);
}

/* ---- lowering and running ---------------------------------------------------------- */

/* Set by a test to check every element within 1e-5 of its own magnitude
 * plus 1e-37 (for subnormals) instead of the default absolute part. */
static bool g_strict;

/* Ops whose result is exactly determined (no rounding of a formula), so
 * generated code and the reference kernel must agree bit for bit (but for
 * NaN payloads): a tolerance would let ties rounded the wrong way, or a
 * clip bound off by an ulp, pass. */
static bool op_is_exact(kn_op op)
{
    switch (op) {
    case KN_OP_Abs: case KN_OP_Neg: case KN_OP_Sign: case KN_OP_Ceil: case KN_OP_Floor: case KN_OP_Round:
    case KN_OP_Relu: case KN_OP_Max: case KN_OP_Min: case KN_OP_Clip: case KN_OP_Where: case KN_OP_Cast:
    case KN_OP_CastLike: case KN_OP_ThresholdedRelu:
        return true;
    default:
        return false;
    }
}

/* Why per element: a tolerance scaled by the output's largest value let
 * everything through once the special values (+-3.4e38) were among the
 * outputs; a wrong rounding of 2.5 passed with a tolerance of 3.4e33. */
static void check_close(const kn_tensor *ref, const void *got, kn_op op, const char *what)
{
    int64_t n = kn_tensor_numel(ref);
    if (!kn_dtype_info(ref->dtype)->is_float) {
        for (int64_t i = 0; i < n; i++) {
            int64_t r = kn_load_i64(ref->dtype, ref->data, (size_t)i), g = kn_load_i64(ref->dtype, got, (size_t)i);
            if (ref->dtype == KN_BOOL) g = ((const uint8_t *)got)[i]; /* must be exactly 0/1 */
            if (r != g) fail_msg("%s element %lld: got %lld, expected %lld", what, (long long)i, (long long)g, (long long)r);
        }
        return;
    }
    bool exact = op_is_exact(op);
    double rtol = ref->dtype == KN_F16 ? 2e-3 : ref->dtype == KN_BF16 ? 1.6e-2 : 1e-5;
    double atol = g_strict ? 1e-37 : ref->dtype == KN_F16 ? 1e-3 : ref->dtype == KN_BF16 ? 1e-2 : 1e-6;
    for (int64_t i = 0; i < n; i++) {
        double r = kn_load_f64(ref->dtype, ref->data, (size_t)i), g = kn_load_f64(ref->dtype, got, (size_t)i);
        double t = exact ? 0 : atol + rtol * fabs(r);
        bool ok = isnan(r) ? isnan(g) : isinf(r) ? g == r : fabs(r - g) <= t;
        if (!ok) fail_msg("%s element %lld: got %.9g, expected %.9g (tol %g)", what, (long long)i, g, r, t);
    }
}
static int tc_run(tc *c)
{
    kn_graph *g = c->m->graph;
    if (kn_graph_infer(g)) fail_msg("inference (%s): %s", c->n->op_type, kn_last_error());
    kn_tensor ref[4] = {{0}};
    if (kn_eval_model(c->m, c->n_rt, c->rt_names, c->rt, ref)) fail_msg("reference (%s): %s", c->n->op_type, kn_last_error());

    jit_node j;
    int st = jit_lower(&j, c->m, c->ins, c->n_ins, c->n, jit_find(kn_cg_lower_elementwise, c->n->op));
    if (st == KN_OK) {
        void *inputs[MAX_IN], *outputs[4] = {0};
        for (int i = 0; i < c->n_rt; i++) inputs[i] = c->rt[i].data;
        for (int i = 0; i < c->n->n_outputs; i++) {
            outputs[i] = malloc(ref[i].nbytes + 1);
            assert_non_null(outputs[i]);
            memset(outputs[i], 0xcd, ref[i].nbytes + 1);
        }
        assert_int_equal(jit_call(&j, inputs, outputs), 0);
        for (int i = 0; i < c->n->n_outputs; i++) {
            if (((unsigned char *)outputs[i])[ref[i].nbytes] != 0xcd) fail_msg("%s wrote past its output", c->n->op_type);
            check_close(&ref[i], outputs[i], c->n->op, c->n->op_type);
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
static void gen(tc *c)
{
    const char *op = c->n->op_type;
    int st = tc_run(c);
    if (st != KN_OK) fail_msg("%s was not generated (status %d: %s)", op, st, kn_last_error());
}

#define D(...) ((const int64_t[]){__VA_ARGS__})
#define V(...) ((const double[]){__VA_ARGS__})

static const double k_special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1.5, -2.5,
                                   2.5, 80, -80, 100, -100, 3.4e38, -3.4e38, 1e-3, -1e-3, 7, -7, 0.25, 12, 1e-40, -1e-40};
#define N_SPECIAL ((int64_t)(sizeof k_special / sizeof *k_special))

/* ---- unary ------------------------------------------------------------------------------ */

typedef struct un_case {
    kn_op op;
    float lo, hi;
} un_case;

static const un_case k_unary[] = {
    {KN_OP_Abs, -3, 3}, {KN_OP_Neg, -3, 3}, {KN_OP_Sign, -3, 3}, {KN_OP_Ceil, -3, 3}, {KN_OP_Floor, -3, 3},
    {KN_OP_Round, -3, 3}, {KN_OP_Sqrt, 0, 9}, {KN_OP_Reciprocal, 0.5f, 3}, {KN_OP_Exp, -10, 10},
    {KN_OP_Log, 0.01f, 100}, {KN_OP_Sin, -6, 6}, {KN_OP_Cos, -6, 6}, {KN_OP_Tan, -1.5f, 1.5f},
    {KN_OP_Asin, -1, 1}, {KN_OP_Acos, -1, 1}, {KN_OP_Atan, -5, 5}, {KN_OP_Sinh, -5, 5}, {KN_OP_Cosh, -5, 5},
    {KN_OP_Asinh, -5, 5}, {KN_OP_Acosh, 1, 9}, {KN_OP_Atanh, -0.99f, 0.99f}, {KN_OP_Erf, -3, 3},
    {KN_OP_IsNaN, -3, 3}, {KN_OP_IsInf, -3, 3}, {KN_OP_Relu, -3, 3}, {KN_OP_LeakyRelu, -3, 3},
    {KN_OP_Sigmoid, -20, 20}, {KN_OP_HardSigmoid, -5, 5}, {KN_OP_HardSwish, -5, 5}, {KN_OP_Tanh, -5, 5},
    {KN_OP_Gelu, -6, 6}, {KN_OP_Softplus, -20, 20}, {KN_OP_Softsign, -5, 5}, {KN_OP_Elu, -4, 4},
    {KN_OP_Selu, -4, 4}, {KN_OP_Celu, -4, 4}, {KN_OP_Mish, -8, 8}, {KN_OP_ThresholdedRelu, -3, 3},
    {KN_OP_Shrink, -3, 3},
};

static void unary_case(kn_op op, kn_dtype dt, int rank, const int64_t *dims, float lo, float hi, const double *vals)
{
    tc *c = tc_new(20);
    tc_input(c, dt, rank, dims, lo, hi, vals);
    tc_node(c, op);
    gen(c);
}

static void test_unary_float(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof k_unary / sizeof *k_unary; k++) {
        const un_case *u = &k_unary[k];
        unary_case(u->op, KN_F32, 2, D(3, 37), u->lo, u->hi, NULL);
        unary_case(u->op, KN_F64, 1, D(50), u->lo, u->hi, NULL);
        unary_case(u->op, KN_F16, 2, D(2, 9), u->lo, u->hi, NULL);
        unary_case(u->op, KN_BF16, 1, D(17), u->lo, u->hi, NULL);
        unary_case(u->op, KN_F32, 0, D(0), u->lo, u->hi, NULL); /* a scalar */
        unary_case(u->op, KN_F32, 2, D(0, 3), u->lo, u->hi, NULL); /* empty */
    }
}

/* NaN, infinities, signed zeros, huge values: the kernels' NaN rules and
 * the formulas' tails (sigmoid, softplus, gelu). */
static void test_unary_special(void **state)
{
    (void)state;
    static const kn_op ops[] = {KN_OP_Abs, KN_OP_Neg, KN_OP_Sign, KN_OP_Ceil, KN_OP_Floor, KN_OP_Round,
                                KN_OP_Exp, KN_OP_IsNaN, KN_OP_IsInf, KN_OP_Relu, KN_OP_LeakyRelu,
                                KN_OP_Sigmoid, KN_OP_HardSigmoid, KN_OP_HardSwish, KN_OP_Tanh, KN_OP_Gelu,
                                KN_OP_Softplus, KN_OP_Softsign, KN_OP_Elu, KN_OP_Selu, KN_OP_Celu,
                                KN_OP_ThresholdedRelu, KN_OP_Shrink, KN_OP_Erf, KN_OP_Log, KN_OP_Mish};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
        unary_case(ops[k], KN_F32, 1, D(N_SPECIAL), 0, 0, k_special);
        unary_case(ops[k], KN_F64, 1, D(N_SPECIAL), 0, 0, k_special);
    }
    /* the tails relative to their own size */
    static const double tail[] = {-5, -6, -7, -8, -9, -10, -12, -15};
    static const kn_op tops[] = {KN_OP_Gelu, KN_OP_Sigmoid, KN_OP_Softplus};
    for (size_t k = 0; k < sizeof tops / sizeof *tops; k++) unary_case(tops[k], KN_F32, 1, D(8), 0, 0, tail);
}

static void test_unary_attrs(void **state)
{
    (void)state;
    tc *c = tc_new(20);
    tc_input(c, KN_F32, 2, D(4, 25), -3, 3, NULL);
    tc_node(c, KN_OP_LeakyRelu);
    tc_float(c, "alpha", 0.2f);
    gen(c);
    c = tc_new(20);
    tc_input(c, KN_F32, 2, D(4, 25), -3, 3, NULL);
    tc_node(c, KN_OP_HardSigmoid);
    tc_float(c, "alpha", 0.3f);
    tc_float(c, "beta", 0.4f);
    gen(c);
    c = tc_new(20);
    tc_input(c, KN_F32, 1, D(100), -3, 3, NULL);
    tc_node(c, KN_OP_Elu);
    tc_float(c, "alpha", 0.7f);
    gen(c);
    c = tc_new(20);
    tc_input(c, KN_F32, 1, D(100), -3, 3, NULL);
    tc_node(c, KN_OP_Celu);
    tc_float(c, "alpha", 2.0f);
    gen(c);
    c = tc_new(20);
    tc_input(c, KN_F32, 1, D(100), -3, 3, NULL);
    tc_node(c, KN_OP_Selu);
    tc_float(c, "alpha", 1.5f);
    tc_float(c, "gamma", 2.5f);
    gen(c);
    c = tc_new(20);
    tc_input(c, KN_F32, 1, D(100), -3, 3, NULL);
    tc_node(c, KN_OP_ThresholdedRelu);
    tc_float(c, "alpha", 0.5f);
    gen(c);
    c = tc_new(20);
    tc_input(c, KN_F32, 1, D(100), -3, 3, NULL);
    tc_node(c, KN_OP_Shrink);
    tc_float(c, "lambd", 1.0f);
    tc_float(c, "bias", 0.25f);
    gen(c);
    c = tc_new(20);
    tc_input(c, KN_F32, 2, D(7, 9), -8, 8, NULL);
    tc_node(c, KN_OP_Gelu);
    tc_str(c, "approximate", "tanh");
    gen(c);
    c = tc_new(20);
    tc_input(c, KN_F32, 1, D(8), -12, -5, NULL);
    tc_node(c, KN_OP_Gelu);
    tc_str(c, "approximate", "tanh");
    gen(c);
    for (int pos = 0; pos < 2; pos++)
        for (int neg = 0; neg < 2; neg++) {
            c = tc_new(20);
            tc_input(c, KN_F32, 1, D(N_SPECIAL), 0, 0, k_special);
            tc_node(c, KN_OP_IsInf);
            tc_int(c, "detect_positive", pos);
            tc_int(c, "detect_negative", neg);
            gen(c);
        }
}

static void test_unary_int(void **state)
{
    (void)state;
    static const kn_op ops[] = {KN_OP_Abs, KN_OP_Neg, KN_OP_Sign, KN_OP_Relu};
    static const kn_dtype dts[] = {KN_I8, KN_U8, KN_I16, KN_U16, KN_I32, KN_U32, KN_I64, KN_U64};
    static const double edge[] = {-128, 127, 0, -1, 1, 5, -5, 100};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
            unary_case(ops[k], dts[d], 2, D(3, 11), -50, 50, NULL);
            unary_case(ops[k], dts[d], 1, D(8), 0, 0, edge);
        }
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) unary_case(KN_OP_BitwiseNot, dts[d], 1, D(40), -50, 50, NULL);
    unary_case(KN_OP_Not, KN_BOOL, 2, D(5, 7), -1, 1, NULL);
    /* integer Erf computes in double in the kernel: left to it */
    tc *c = tc_new(20);
    tc_input(c, KN_I32, 1, D(4), -3, 3, NULL);
    tc_node(c, KN_OP_Erf);
    assert_int_equal(tc_run(c), KN_ERR_UNSUPPORTED);
}

/* The vectorizable exp/tanh/erf/sigmoid, element by element, over dense
 * ranges that reach their tails. */
static void test_unary_accuracy(void **state)
{
    (void)state;
    static const struct { kn_op op; double lo, hi; } k[] = {
        {KN_OP_Exp, -87, 88.7}, {KN_OP_Tanh, -9, 9}, {KN_OP_Erf, -5, 5}, {KN_OP_Sigmoid, -87, 30},
        {KN_OP_Exp, -0.01, 0.01}, {KN_OP_Tanh, -0.01, 0.01}, {KN_OP_Erf, -0.01, 0.01},
        {KN_OP_Log, 1e-6, 1e3}, {KN_OP_Log, 0.99, 1.01}, {KN_OP_Softplus, -80, 30}, {KN_OP_Elu, -20, 1},
        {KN_OP_Elu, -0.01, 0.01}, {KN_OP_Selu, -1, 1}, {KN_OP_Celu, -0.6, 0.6}, {KN_OP_Mish, -20, 20},
    };
    enum { N = 20001 };
    static double vals[N];
    g_strict = true;
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        for (int j = 0; j < N; j++) vals[j] = k[i].lo + (k[i].hi - k[i].lo) * j / (N - 1);
        unary_case(k[i].op, KN_F32, 1, D(N), 0, 0, vals);
    }
    g_strict = false;
}

/* ---- binary and variadic ------------------------------------------------------------------ */

typedef struct shp {
    int ra;
    int64_t a[4];
    int rb;
    int64_t b[4];
} shp;

static const shp k_shapes[] = {
    {3, {2, 3, 40}, 3, {2, 3, 40}},  /* equal: one flat loop */
    {3, {2, 3, 40}, 1, {40}},        /* row vector */
    {3, {2, 1, 4}, 2, {3, 1}},       /* both broadcast */
    {0, {0}, 2, {3, 5}},             /* scalar */
    {2, {1, 1}, 2, {4, 6}},          /* ones */
    {4, {2, 3, 4, 5}, 4, {1, 3, 1, 5}},
    {2, {6, 1}, 1, {7}},             /* column against row */
};

static void binary_case(kn_op op, kn_dtype da, kn_dtype db, const shp *s, float lo, float hi, float blo, float bhi)
{
    tc *c = tc_new(20);
    tc_input(c, da, s->ra, s->a, lo, hi, NULL);
    tc_input(c, db, s->rb, s->b, blo, bhi, NULL);
    tc_node(c, op);
    gen(c);
}

static void test_binary_float(void **state)
{
    (void)state;
    static const kn_op ops[] = {KN_OP_Add, KN_OP_Sub, KN_OP_Mul, KN_OP_Div, KN_OP_Pow, KN_OP_PRelu,
                                KN_OP_Equal, KN_OP_Less, KN_OP_LessOrEqual, KN_OP_Greater, KN_OP_GreaterOrEqual,
                                KN_OP_Max, KN_OP_Min, KN_OP_Sum, KN_OP_Mean};
    static const kn_dtype dts[] = {KN_F32, KN_F64, KN_F16, KN_BF16};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
            for (size_t s = 0; s < sizeof k_shapes / sizeof *k_shapes; s++) {
                bool pw = ops[k] == KN_OP_Pow, dv = ops[k] == KN_OP_Div;
                /* a few small integers so Equal/LessOrEqual see ties */
                float lo = pw ? 0.1f : -3, hi = 3;
                if (ops[k] == KN_OP_Equal || ops[k] == KN_OP_LessOrEqual || ops[k] == KN_OP_GreaterOrEqual) {
                    tc *c = tc_new(20);
                    const shp *sh = &k_shapes[s];
                    tc_input(c, dts[d], sh->ra, sh->a, -2, 2, NULL);
                    tc_input(c, dts[d], sh->rb, sh->b, -2, 2, NULL);
                    /* round to integers for ties */
                    for (int i = 0; i < 2; i++)
                        for (int64_t j = 0; j < kn_tensor_numel(&c->rt[i]); j++)
                            put(&c->rt[i], j, round(kn_load_f64(dts[d], c->rt[i].data, (size_t)j)));
                    tc_node(c, ops[k]);
                    gen(c);
                    continue;
                }
                if (ops[k] == KN_OP_Mean && dts[d] == KN_BF16) continue; /* the kernel's (test_variadic) */
                binary_case(ops[k], dts[d], dts[d], &k_shapes[s], lo, hi, dv ? 0.5f : -2, 2);
            }
    /* Pow: integer exponent, constant 2 */
    binary_case(KN_OP_Pow, KN_F32, KN_I64, &k_shapes[1], 0.1f, 3, -3, 3);
    binary_case(KN_OP_Pow, KN_F32, KN_I32, &k_shapes[0], -3, 3, 0, 4);
    /* constant exponents with their own code, over special values */
    tc *c;
    static const double ks[] = {0, 1, 2, 3, -1, 0.5, -0.5, 4};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        for (int d = 0; d < 2; d++) {
            c = tc_new(20);
            tc_input(c, KN_F32, 2, D(3, N_SPECIAL), 0, 0, NULL);
            for (int64_t j = 0; j < 3 * N_SPECIAL; j++) put(&c->rt[0], j, j < N_SPECIAL ? k_special[j] : -3 + 6.0 * rnd01(c));
            tc_const(c, KN_F32, d, D(1), 0, 0, &ks[i]); /* a scalar, then shape [1] */
            tc_node(c, KN_OP_Pow);
            gen(c);
        }
    /* NaN and infinities through Max/Min/comparisons/Mod */
    static const kn_op sops[] = {KN_OP_Max, KN_OP_Min, KN_OP_Equal, KN_OP_Less, KN_OP_Greater, KN_OP_Add, KN_OP_Mod};
    for (size_t k = 0; k < sizeof sops / sizeof *sops; k++) {
        c = tc_new(20);
        tc_input(c, KN_F32, 1, D(N_SPECIAL), 0, 0, k_special);
        tc_input(c, KN_F32, 2, D(3, N_SPECIAL), -3, 3, NULL);
        tc_node(c, sops[k]);
        if (sops[k] == KN_OP_Mod) tc_int(c, "fmod", 1);
        gen(c);
    }
    /* Mod, both flavours */
    for (int f = 0; f < 2; f++)
        for (int sgn = 0; sgn < 2; sgn++) {
            c = tc_new(20);
            tc_input(c, KN_F32, 2, D(5, 20), -10, 10, NULL);
            tc_input(c, KN_F32, 1, D(20), sgn ? -3.0f : 0.5f, sgn ? -0.5f : 3.0f, NULL);
            tc_node(c, KN_OP_Mod);
            tc_int(c, "fmod", f);
            gen(c);
        }
    /* integer bases: integer exponents (negative ones too, wrapping
     * products) and float exponents */
    static const double pa[] = {2, -2, 3, -3, 1, -1, -1, 0, 0, 5, 7, 2, 10, -128, 1, -1};
    static const double pe[] = {3, 3, 4, 5, -2, -3, -2, 0, 3, 0, 9, 40, 20, 1, 100, 100};
    static const kn_dtype idt[] = {KN_I8, KN_U8, KN_I32, KN_U32, KN_I64, KN_U64};
    for (size_t d = 0; d < sizeof idt / sizeof *idt; d++)
        for (size_t e = 0; e < sizeof idt / sizeof *idt; e++) {
            c = tc_new(20);
            tc_input(c, idt[d], 1, D(16), 0, 0, pa);
            tc_input(c, idt[e], 1, D(16), 0, 0, pe);
            tc_node(c, KN_OP_Pow);
            gen(c);
        }
    static const double pf[] = {0.5, 2, 3.5, -1, 0, 1, 2.5, 30, 100, -0.5, 1, 2, 3, 4, NAN, INFINITY};
    for (size_t d = 0; d + 1 < sizeof idt / sizeof *idt; d++) /* all but u64 */
        for (int f = 0; f < 2; f++) {
            c = tc_new(20);
            tc_input(c, idt[d], 1, D(16), 0, 0, pa);
            tc_input(c, f ? KN_F64 : KN_F32, 1, D(16), 0, 0, pf);
            tc_node(c, KN_OP_Pow);
            gen(c);
        }
}

static void int_pair(kn_op op, kn_dtype dt, const double *a, const double *b, int64_t n, const char *attr, int64_t av,
                     const char *sattr, const char *sv)
{
    tc *c = tc_new(20);
    tc_input(c, dt, 1, &n, 0, 0, a);
    tc_input(c, dt, 1, &n, 0, 0, b);
    tc_node(c, op);
    if (attr) tc_int(c, attr, av);
    if (sattr) tc_str(c, sattr, sv);
    gen(c);
}

static void test_binary_int(void **state)
{
    (void)state;
    static const kn_op ops[] = {KN_OP_Add, KN_OP_Sub, KN_OP_Mul, KN_OP_Div, KN_OP_Mod, KN_OP_Max, KN_OP_Min,
                                KN_OP_Equal, KN_OP_Less, KN_OP_LessOrEqual, KN_OP_Greater, KN_OP_GreaterOrEqual,
                                KN_OP_BitwiseAnd, KN_OP_BitwiseOr, KN_OP_BitwiseXor, KN_OP_PRelu, KN_OP_Sum};
    static const kn_dtype dts[] = {KN_I8, KN_U8, KN_I16, KN_U16, KN_I32, KN_U32, KN_I64, KN_U64};
    /* divisors 0 and -1, the most negative value, wrapping products */
    static const double a[] = {7, -7, 7, -7, -128, -128, 100, 0, 5, -5, 127, 3, -100, 64, 13, -13};
    static const double b[] = {2, 2, -2, -2, -1, 1, 0, 0, 0, -1, 2, 100, 3, 4, -4, 4};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
            int_pair(ops[k], dts[d], a, b, 16, NULL, 0, NULL, NULL);
            binary_case(ops[k], dts[d], dts[d], &k_shapes[2], -50, 50, -9, 9);
            if (ops[k] == KN_OP_Mod) int_pair(ops[k], dts[d], a, b, 16, "fmod", 1, NULL, NULL);
        }
    static const kn_dtype uts[] = {KN_U8, KN_U16, KN_U32, KN_U64};
    static const double sa[] = {1, 255, 3, 7, 1, 200, 9, 1};
    static const double sb[] = {0, 1, 7, 8, 9, 63, 64, 200};
    for (size_t d = 0; d < sizeof uts / sizeof *uts; d++) {
        int_pair(KN_OP_BitShift, uts[d], sa, sb, 8, NULL, 0, "direction", "LEFT");
        int_pair(KN_OP_BitShift, uts[d], sa, sb, 8, NULL, 0, "direction", "RIGHT");
    }
    static const kn_op lops[] = {KN_OP_And, KN_OP_Or, KN_OP_Xor, KN_OP_Equal};
    for (size_t k = 0; k < sizeof lops / sizeof *lops; k++)
        for (size_t s = 0; s < sizeof k_shapes / sizeof *k_shapes; s++)
            binary_case(lops[k], KN_BOOL, KN_BOOL, &k_shapes[s], -1, 1, -1, 1);
}

static void variadic_case(kn_op op, kn_dtype dt, int n, float lo, float hi)
{
    static const shp s[3] = {{3, {2, 3, 4}, 1, {4}}, {2, {3, 1}, 0, {0}}, {3, {2, 1, 4}, 1, {1}}};
    tc *c = tc_new(20);
    for (int i = 0; i < n; i++) {
        const shp *x = &s[i % 3];
        if (i < 3) tc_input(c, dt, x->ra, x->a, lo, hi, NULL);
        else tc_input(c, dt, x->rb, x->b, lo, hi, NULL);
    }
    tc_node(c, op);
    gen(c);
}

static void test_variadic(void **state)
{
    (void)state;
    static const kn_op ops[] = {KN_OP_Sum, KN_OP_Mean, KN_OP_Max, KN_OP_Min};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        for (int n = 1; n <= 5; n++) {
            variadic_case(ops[k], KN_F32, n, -3, 3);
            variadic_case(ops[k], KN_F64, n, -3, 3);
            if (ops[k] != KN_OP_Mean) variadic_case(ops[k], KN_I32, n, -100, 100);
        }
    variadic_case(KN_OP_Max, KN_F16, 2, -3, 3);
    for (int n = 1; n <= 4; n++) {
        variadic_case(KN_OP_Sum, KN_F16, n, -30, 30);
        variadic_case(KN_OP_Mean, KN_F16, n, -30, 30);
    }
    /* bf16 chains round every partial sum: the kernel's */
    tc *c = tc_new(20);
    for (int i = 0; i < 3; i++) tc_input(c, KN_BF16, 1, D(4), -3, 3, NULL);
    tc_node(c, KN_OP_Sum);
    assert_int_equal(tc_run(c), KN_ERR_UNSUPPORTED);
}

/* ---- Clip, Where, Cast ----------------------------------------------------------------------- */

static void test_clip(void **state)
{
    (void)state;
    static const kn_dtype dts[] = {KN_F32, KN_F64, KN_F16, KN_I8, KN_U8, KN_I32, KN_I64, KN_U64};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (int lo = 0; lo < 3; lo++)
            for (int hi = 0; hi < 3; hi++) {
                tc *c = tc_new(13);
                tc_input(c, dts[d], 2, D(4, 30), -50, 50, NULL);
                /* 0: absent, 1: constant, 2: runtime input */
                if (lo == 0 && hi != 0) tc_absent(c);
                if (lo == 1) tc_const(c, dts[d], 0, D(0), 0, 0, V(-10));
                if (lo == 2) tc_input(c, dts[d], 0, D(0), 0, 0, V(3));
                if (hi == 1) tc_const(c, dts[d], 1, D(1), 0, 0, V(20));
                if (hi == 2) tc_input(c, dts[d], 0, D(0), 0, 0, V(40));
                tc_node(c, KN_OP_Clip);
                gen(c);
            }
    tc *c = tc_new(20);
    tc_input(c, KN_F32, 1, D(N_SPECIAL), 0, 0, k_special);
    tc_const(c, KN_F32, 0, D(0), 0, 0, V(-1));
    tc_const(c, KN_F32, 0, D(0), 0, 0, V(6));
    tc_node(c, KN_OP_Clip);
    gen(c);
    /* opset 6: float attributes, defaults the float range */
    for (int a = 0; a < 3; a++) {
        c = tc_new(6);
        tc_input(c, KN_F32, 1, D(N_SPECIAL), 0, 0, k_special);
        tc_node(c, KN_OP_Clip);
        if (a & 1) tc_float(c, "min", -0.5f);
        if (a & 2) tc_float(c, "max", 6.0f);
        gen(c);
    }
}

static void test_where(void **state)
{
    (void)state;
    static const kn_dtype dts[] = {KN_F32, KN_F64, KN_F16, KN_I8, KN_I64, KN_BOOL, KN_U16};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
        tc *c = tc_new(20);
        tc_input(c, KN_BOOL, 2, D(3, 1), -1, 1, NULL);
        tc_input(c, dts[d], 3, D(2, 1, 5), -9, 9, NULL);
        tc_input(c, dts[d], 1, D(5), -9, 9, NULL);
        tc_node(c, KN_OP_Where);
        gen(c);
        c = tc_new(20);
        tc_input(c, KN_BOOL, 2, D(4, 16), -1, 1, NULL);
        tc_input(c, dts[d], 2, D(4, 16), -9, 9, NULL);
        tc_const(c, dts[d], 0, D(0), 0, 0, V(1));
        tc_node(c, KN_OP_Where);
        gen(c);
    }
}

static void test_cast(void **state)
{
    (void)state;
    static const kn_dtype dts[] = {KN_F32, KN_F64, KN_F16, KN_BF16, KN_I8, KN_U8, KN_I16, KN_U16,
                                   KN_I32, KN_U32, KN_I64, KN_U64, KN_BOOL};
    /* fractions, ties, negatives, values past every integer range, NaN */
    static const double fv[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.7, 2.7, 0, 1, -1, 127.9, 128, 255.5, 256, -129,
                                65504, 70000, -40000, 3e9, -3e9, 1e19, -1e19, 1e30, NAN, INFINITY, -INFINITY,
                                1.00048828125, 3.14159265358979, 16777217, 0.1};
    static const double iv[] = {0, 1, -1, 127, -128, 255, 256, -32768, 65535, 65536, 16777217, -16777217,
                                2147483647, -2147483648.0, 4294967295.0, 33554435, 1e15 + 1, -1e15, 7, -7};
    for (size_t f = 0; f < sizeof dts / sizeof *dts; f++)
        for (size_t t = 0; t < sizeof dts / sizeof *dts; t++) {
            bool ff = kn_dtype_info(dts[f])->is_float;
            tc *c = tc_new(20);
            if (ff) tc_input(c, dts[f], 1, D(30), 0, 0, fv);
            else tc_input(c, dts[f], 1, D(20), 0, 0, iv);
            tc_node(c, KN_OP_Cast);
            tc_int(c, "to", dts[t]);
            int st = tc_run(c);
            /* float → u64 of negative/huge values is the kernel's own C casts */
            if (!(ff && dts[t] == KN_U64)) assert_int_equal(st, KN_OK);
        }
    /* double → f16/bf16 needs one rounding, not two: values just past a tie */
    static const double dv[] = {1.0 + 1.0 / 2048 + 1e-12, 1.0 + 1.0 / 2048 - 1e-12, 1.0 + 1.0 / 256 + 1e-12,
                                1.0 + 1.0 / 256 - 1e-12, 1.0 / 3, -1.0 / 3, 65519.99, 65520.01};
    for (int k = 0; k < 2; k++) {
        tc *c = tc_new(20);
        tc_input(c, KN_F64, 1, D(8), 0, 0, dv);
        tc_node(c, KN_OP_Cast);
        tc_int(c, "to", k ? KN_BF16 : KN_F16);
        gen(c);
    }
    tc *c = tc_new(20);
    tc_input(c, KN_F32, 2, D(3, 4), -9, 9, NULL);
    tc_input(c, KN_I32, 1, D(1), -9, 9, NULL);
    tc_node(c, KN_OP_CastLike);
    gen(c);
}

int main(void)
{
    LLVMLinkInMCJIT();
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_float),
        cmocka_unit_test(test_unary_special),
        cmocka_unit_test(test_unary_accuracy),
        cmocka_unit_test(test_unary_attrs),
        cmocka_unit_test(test_unary_int),
        cmocka_unit_test(test_binary_float),
        cmocka_unit_test(test_binary_int),
        cmocka_unit_test(test_variadic),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_where),
        cmocka_unit_test(test_cast),
    };
    /* KN_TEST_FILTER=test_unary_special runs one group of cases (make mutate) */
    const char *filter = getenv("KN_TEST_FILTER");
    if (filter && *filter) cmocka_set_test_filter(filter);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
