/* Unit tests of the elementwise kernels and op definitions: broadcasting,
 * hand-checked values of a few ops, f16/bf16 rounding, error messages; and
 * the ops run through the runtime alone (kn_op_exec with a hand-built
 * descriptor, as a compiled artifact calls them). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "eval.h"
#include "ir.h"
#include "k_elementwise.h"

/* A borrowed tensor over caller data. */
static kn_tensor view(kn_dtype dt, void *data, int rank, const int64_t *dims)
{
    kn_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
    t.data = data;
    t.nbytes = kn_dtype_nbytes(dt, (size_t)kn_shape_numel(rank, dims));
    return t;
}

/* Runs a binary kernel on freshly allocated output; asserts success. */
static kn_tensor run_binary(kn_binary_op op, const kn_tensor *a, const kn_tensor *b)
{
    kn_tensor out;
    const kn_tensor *in[2] = {a, b};
    assert_int_equal(kn_k_broadcast_alloc(2, in, kn_k_binary_out_dtype(op, a->dtype), &out), KN_OK);
    int st = kn_k_binary(op, a, b, &out);
    if (st) fail_msg("%s", kn_last_error());
    return out;
}

static void test_broadcast_row(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    kn_tensor ta = view(KN_F32, a, 2, (int64_t[]){2, 3}), tb = view(KN_F32, b, 1, (int64_t[]){3});
    kn_tensor y = run_binary(KN_BIN_ADD, &ta, &tb);
    assert_int_equal(y.rank, 2);
    assert_int_equal(y.dims[0], 2);
    assert_int_equal(y.dims[1], 3);
    const float want[6] = {11, 22, 33, 14, 25, 36};
    for (int i = 0; i < 6; i++) assert_true(((float *)y.data)[i] == want[i]);
    kn_tensor_free(&y);
}

static void test_broadcast_both_sides(void **state)
{
    (void)state;
    /* 2x1x4 against 3x1 → 2x3x4; y[i][j][k] = a[i][k] * b[j] */
    int32_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[3] = {1, 10, 100};
    kn_tensor ta = view(KN_I32, a, 3, (int64_t[]){2, 1, 4}), tb = view(KN_I32, b, 2, (int64_t[]){3, 1});
    kn_tensor y = run_binary(KN_BIN_MUL, &ta, &tb);
    assert_int_equal(y.rank, 3);
    assert_int_equal(kn_tensor_numel(&y), 24);
    const int32_t *p = y.data;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) assert_int_equal(p[(i * 3 + j) * 4 + k], a[i * 4 + k] * b[j]);
    kn_tensor_free(&y);
}

static void test_broadcast_scalar_and_empty(void **state)
{
    (void)state;
    double s = 2.0, x[4] = {1, 2, 3, 4};
    kn_tensor ts = view(KN_F64, &s, 0, NULL), tx = view(KN_F64, x, 2, (int64_t[]){2, 2});
    kn_tensor y = run_binary(KN_BIN_SUB, &ts, &tx);
    for (int i = 0; i < 4; i++) assert_true(((double *)y.data)[i] == 2.0 - x[i]);
    kn_tensor_free(&y);
    /* a zero-sized axis broadcasts to an empty result */
    kn_tensor te = view(KN_F64, NULL, 2, (int64_t[]){0, 1}), trow = view(KN_F64, x, 1, (int64_t[]){2});
    y = run_binary(KN_BIN_ADD, &te, &trow);
    assert_int_equal(y.dims[0], 0);
    assert_int_equal(y.dims[1], 2);
    kn_tensor_free(&y);
}

static void test_shape_mismatch_message(void **state)
{
    (void)state;
    float a[6] = {0}, b[4] = {0};
    kn_tensor ta = view(KN_F32, a, 2, (int64_t[]){2, 3}), tb = view(KN_F32, b, 1, (int64_t[]){4});
    kn_tensor out;
    const kn_tensor *in[2] = {&ta, &tb};
    assert_int_equal(kn_k_broadcast_alloc(2, in, KN_F32, &out), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "2x3 and 4 cannot be broadcast"));
    /* a wrongly shaped output is refused, not overrun */
    assert_int_equal(kn_tensor_alloc(&out, KN_F32, 1, (int64_t[]){3}), KN_OK);
    assert_int_equal(kn_k_binary(KN_BIN_ADD, &ta, &ta, &out), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "output shape 3 is not the broadcast shape 2x3"));
    /* dtypes must agree */
    int32_t c[6] = {0};
    kn_tensor tc = view(KN_I32, c, 2, (int64_t[]){2, 3});
    assert_int_equal(kn_k_binary(KN_BIN_ADD, &ta, &tc, &out), KN_ERR_INVALID);
    kn_tensor_free(&out);
}

static void test_integer_div_mod_pow(void **state)
{
    (void)state;
    int32_t a[4] = {7, -7, 7, -7}, b[4] = {2, 2, -2, -2};
    kn_tensor ta = view(KN_I32, a, 1, (int64_t[]){4}), tb = view(KN_I32, b, 1, (int64_t[]){4});
    kn_tensor y = run_binary(KN_BIN_DIV, &ta, &tb);
    const int32_t div[4] = {3, -3, -3, 3}; /* truncation toward zero */
    assert_memory_equal(y.data, div, sizeof div);
    kn_tensor_free(&y);
    y = run_binary(KN_BIN_MOD, &ta, &tb);
    const int32_t mod[4] = {1, 1, -1, -1}; /* sign of the divisor */
    assert_memory_equal(y.data, mod, sizeof mod);
    kn_tensor_free(&y);
    y = run_binary(KN_BIN_FMOD, &ta, &tb);
    const int32_t fmod_[4] = {1, -1, 1, -1}; /* sign of the dividend */
    assert_memory_equal(y.data, fmod_, sizeof fmod_);
    kn_tensor_free(&y);
    /* division by zero gives 0 rather than trapping */
    int32_t z[4] = {0};
    kn_tensor tz = view(KN_I32, z, 1, (int64_t[]){4});
    y = run_binary(KN_BIN_DIV, &ta, &tz);
    assert_memory_equal(y.data, z, sizeof z);
    kn_tensor_free(&y);
    /* int64 base, float exponent: computed in double, truncated back */
    int64_t base[3] = {2, 3, -2};
    float ex[3] = {10, 0.5f, 3};
    kn_tensor tbase = view(KN_I64, base, 1, (int64_t[]){3}), tex = view(KN_F32, ex, 1, (int64_t[]){3});
    y = run_binary(KN_BIN_POW, &tbase, &tex);
    const int64_t pw[3] = {1024, 1, -8};
    assert_memory_equal(y.data, pw, sizeof pw);
    kn_tensor_free(&y);
}

static void test_bitshift_and_compare(void **state)
{
    (void)state;
    uint8_t a[3] = {1, 0x80, 0xff}, s[3] = {7, 1, 8};
    kn_tensor ta = view(KN_U8, a, 1, (int64_t[]){3}), ts = view(KN_U8, s, 1, (int64_t[]){3});
    kn_tensor y = run_binary(KN_BIN_SHL, &ta, &ts);
    const uint8_t shl[3] = {0x80, 0x00, 0x00};
    assert_memory_equal(y.data, shl, sizeof shl);
    kn_tensor_free(&y);
    uint64_t big[2] = {UINT64_MAX, 1}, one[1] = {2};
    kn_tensor tb = view(KN_U64, big, 1, (int64_t[]){2}), to = view(KN_U64, one, 1, (int64_t[]){1});
    y = run_binary(KN_BIN_GT, &tb, &to); /* u64 compares unsigned */
    assert_int_equal(y.dtype, KN_BOOL);
    const uint8_t gt[2] = {1, 0};
    assert_memory_equal(y.data, gt, sizeof gt);
    kn_tensor_free(&y);
}

static void test_max_nan_and_unary(void **state)
{
    (void)state;
    float a[3] = {1, NAN, -3}, b[3] = {2, 0, -4};
    kn_tensor ta = view(KN_F32, a, 1, (int64_t[]){3}), tb = view(KN_F32, b, 1, (int64_t[]){3});
    kn_tensor y = run_binary(KN_BIN_MAX, &ta, &tb);
    const float *p = y.data;
    assert_true(p[0] == 2 && isnan(p[1]) && p[2] == -3);
    kn_tensor_free(&y);

    float r[6] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.6f};
    const float want[6] = {0, 2, 2, -0.0f, -2, 3}; /* half to even */
    kn_tensor tr = view(KN_F32, r, 1, (int64_t[]){6});
    assert_int_equal(kn_tensor_alloc(&y, KN_F32, 1, (int64_t[]){6}), KN_OK);
    assert_int_equal(kn_k_unary(KN_UN_ROUND, NULL, &tr, &y), KN_OK);
    for (int i = 0; i < 6; i++) assert_true(((float *)y.data)[i] == want[i]);
    kn_tensor_free(&y);

    int8_t s[3] = {-128, -5, 7};
    kn_tensor tsg = view(KN_I8, s, 1, (int64_t[]){3});
    assert_int_equal(kn_tensor_alloc(&y, KN_I8, 1, (int64_t[]){3}), KN_OK);
    assert_int_equal(kn_k_unary(KN_UN_ABS, NULL, &tsg, &y), KN_OK);
    const int8_t ab[3] = {-128, 5, 7}; /* wraps like numpy */
    assert_memory_equal(y.data, ab, sizeof ab);
    kn_tensor_free(&y);

    /* a float-only op refuses integers with a message */
    assert_int_equal(kn_tensor_alloc(&y, KN_I8, 1, (int64_t[]){3}), KN_OK);
    assert_int_equal(kn_k_unary(KN_UN_SQRT, NULL, &tsg, &y), KN_ERR_UNSUPPORTED);
    assert_non_null(strstr(kn_last_error(), "i8"));
    kn_tensor_free(&y);
}

static void test_clip_where(void **state)
{
    (void)state;
    int64_t x[4] = {-10, 0, 5, 100}, lo = -1, hi = 6;
    kn_tensor tx = view(KN_I64, x, 1, (int64_t[]){4});
    kn_tensor tlo = view(KN_I64, &lo, 0, NULL), thi = view(KN_I64, &hi, 0, NULL);
    kn_tensor y;
    assert_int_equal(kn_tensor_alloc(&y, KN_I64, 1, (int64_t[]){4}), KN_OK);
    assert_int_equal(kn_k_clip(&tx, &tlo, &thi, &y), KN_OK);
    const int64_t cl[4] = {-1, 0, 5, 6};
    assert_memory_equal(y.data, cl, sizeof cl);
    assert_int_equal(kn_k_clip(&tx, NULL, &thi, &y), KN_OK);
    const int64_t cl2[4] = {-10, 0, 5, 6};
    assert_memory_equal(y.data, cl2, sizeof cl2);
    kn_tensor_free(&y);

    uint8_t c[2] = {1, 0};
    int16_t a[4] = {1, 2, 3, 4}, b = -1;
    kn_tensor tc = view(KN_BOOL, c, 2, (int64_t[]){2, 1}), ta = view(KN_I16, a, 2, (int64_t[]){2, 2}),
              tb = view(KN_I16, &b, 0, NULL);
    const kn_tensor *in[3] = {&tc, &ta, &tb};
    assert_int_equal(kn_k_broadcast_alloc(3, in, KN_I16, &y), KN_OK);
    assert_int_equal(kn_k_where(&tc, &ta, &tb, &y), KN_OK);
    const int16_t wh[4] = {1, 2, -1, -1};
    assert_memory_equal(y.data, wh, sizeof wh);
    kn_tensor_free(&y);
}

static void test_half_rounding(void **state)
{
    (void)state;
    assert_int_equal(kn_k_f64_to_f16(1.0), 0x3c00);
    assert_int_equal(kn_k_f64_to_f16(65504.0), 0x7bff);
    assert_int_equal(kn_k_f64_to_f16(65520.0), 0x7c00); /* rounds to inf */
    assert_int_equal(kn_k_f64_to_f16(-2.0), 0xc000);
    assert_int_equal(kn_k_f64_to_f16(1.0 + ldexp(1, -11)), 0x3c00);                   /* tie → even */
    assert_int_equal(kn_k_f64_to_f16(1.0 + ldexp(1, -11) + ldexp(1, -40)), 0x3c01);   /* no double rounding */
    assert_int_equal(kn_k_f64_to_f16(ldexp(1, -24)), 0x0001);                         /* smallest subnormal */
    assert_int_equal(kn_k_f64_to_bf16(1.0 + ldexp(1, -8)), 0x3f80);                   /* tie → even */
    assert_int_equal(kn_k_f64_to_bf16(1.0 + ldexp(1, -8) + ldexp(1, -30)), 0x3f81);
    assert_true(isnan(kn_bf16_to_f32(kn_k_f64_to_bf16(NAN))));

    /* Cast f32 → f16 → f32 round trip of exactly representable values, and
     * Cast f32 → bf16 rounding to nearest even, as ONNX's reference and
     * test data do since onnx 1.16 (1.15 truncated) */
    float x[4] = {0.5f, -1.25f, 1024.0f, 1.0f + 0x1.8p-8f};
    kn_tensor tx = view(KN_F32, x, 1, (int64_t[]){4});
    kn_tensor h, back, bf;
    assert_int_equal(kn_tensor_alloc(&h, KN_F16, 1, (int64_t[]){4}), KN_OK);
    assert_int_equal(kn_tensor_alloc(&back, KN_F32, 1, (int64_t[]){4}), KN_OK);
    assert_int_equal(kn_tensor_alloc(&bf, KN_BF16, 1, (int64_t[]){4}), KN_OK);
    assert_int_equal(kn_k_cast(&tx, &h), KN_OK);
    assert_int_equal(kn_k_cast(&h, &back), KN_OK);
    for (int i = 0; i < 3; i++) assert_true(((float *)back.data)[i] == x[i]);
    assert_int_equal(kn_k_cast(&tx, &bf), KN_OK);
    assert_int_equal(((uint16_t *)bf.data)[3], 0x3f81); /* 1 + 0.75 ulp rounds up */
    kn_tensor_free(&h);
    kn_tensor_free(&back);
    kn_tensor_free(&bf);

    /* float → int truncates, anything → bool is != 0 */
    double d[4] = {-2.7, 2.7, 0.0, NAN};
    kn_tensor td = view(KN_F64, d, 1, (int64_t[]){4}), ti, tbo;
    assert_int_equal(kn_tensor_alloc(&ti, KN_I32, 1, (int64_t[]){4}), KN_OK);
    assert_int_equal(kn_tensor_alloc(&tbo, KN_BOOL, 1, (int64_t[]){4}), KN_OK);
    assert_int_equal(kn_k_cast(&td, &ti), KN_OK);
    assert_int_equal(kn_k_cast(&td, &tbo), KN_OK);
    assert_int_equal(((int32_t *)ti.data)[0], -2);
    assert_int_equal(((int32_t *)ti.data)[1], 2);
    const uint8_t bo[4] = {1, 1, 0, 1};
    assert_memory_equal(tbo.data, bo, sizeof bo);
    kn_tensor_free(&ti);
    kn_tensor_free(&tbo);
}

/* Through the IR: inference keeps symbolic dims, eval runs the kernel, and a
 * bad broadcast is reported with the node's name. */
static void test_graph_add(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    assert_non_null(m);
    kn_model_set_opset(m, "", 17);
    kn_graph *g = m->graph;
    kn_shape sx = {2, {-1, 3}, {"batch", NULL}}, sy = {2, {1, 3}, {NULL, NULL}};
    kn_value *ins[2] = {kn_graph_add_input(g, "x", KN_F32, &sx), kn_graph_add_input(g, "y", KN_F32, &sy)};
    kn_node *n = kn_node_create(g, KN_OP_Add, "add0", 2, ins, 1);
    assert_non_null(n);
    kn_graph_add_output(g, n->outputs[0]);
    assert_int_equal(kn_graph_infer(g), KN_OK);
    kn_value *o = n->outputs[0];
    assert_int_equal(o->dtype, KN_F32);
    assert_int_equal(o->shape.rank, 2);
    assert_true(o->shape.dims[0] < 0);
    assert_string_equal(o->shape.sym[0], "batch");
    assert_int_equal(o->shape.dims[1], 3);

    float x[6] = {1, 2, 3, 4, 5, 6}, y[3] = {1, 1, 1};
    kn_tensor t[2] = {view(KN_F32, x, 2, (int64_t[]){2, 3}), view(KN_F32, y, 2, (int64_t[]){1, 3})};
    const char *names[2] = {"x", "y"};
    kn_tensor out[1];
    memset(out, 0, sizeof out);
    int st = kn_eval_model(m, 2, names, t, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_true(((float *)out[0].data)[5] == 7.0f);
    kn_tensor_free(&out[0]);
    kn_model_free(m);

    /* static shapes that cannot broadcast: inference names the node */
    m = kn_model_create();
    kn_model_set_opset(m, "", 17);
    g = m->graph;
    kn_shape a = {1, {3}, {NULL}}, b = {1, {4}, {NULL}};
    kn_value *bad[2] = {kn_graph_add_input(g, "a", KN_F32, &a), kn_graph_add_input(g, "b", KN_F32, &b)};
    n = kn_node_create(g, KN_OP_Mul, "mul0", 2, bad, 1);
    kn_graph_add_output(g, n->outputs[0]);
    assert_int_not_equal(kn_graph_infer(g), KN_OK);
    assert_non_null(strstr(kn_last_error(), "mul0"));
    assert_non_null(strstr(kn_last_error(), "broadcast"));
    kn_model_free(m);
}

/* Builds a model at `opset` whose graph is one node of op on inputs named
 * x (and y) typed like t[]; the caller adds attributes, then infers. */
static void make_node1(int opset, kn_op op, kn_node **out_node, kn_model **out_m, int n_in, const kn_tensor *t)
{
    kn_model *m = kn_model_create();
    kn_model_set_opset(m, "", opset);
    kn_value *ins[2];
    const char *names[2] = {"x", "y"};
    for (int i = 0; i < n_in; i++) {
        kn_shape s;
        memset(&s, 0, sizeof s);
        kn_shape_set(&s, t[i].rank, t[i].dims);
        ins[i] = kn_graph_add_input(m->graph, names[i], t[i].dtype, &s);
    }
    kn_node *n = kn_node_create(m->graph, op, "n0", n_in, ins, 1);
    kn_graph_add_output(m->graph, n->outputs[0]);
    *out_node = n;
    *out_m = m;
}

static void test_legacy_attributes(void **state)
{
    (void)state;
    /* Add-6 with broadcast=1, axis=1: B (3) lines up with A's axis 1 */
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30};
    kn_tensor t[2] = {view(KN_F32, a, 3, (int64_t[]){1, 3, 2}), view(KN_F32, b, 1, (int64_t[]){3})};
    kn_node *n;
    kn_model *m;
    kn_tensor out[1];
    memset(out, 0, sizeof out);
    make_node1(6, KN_OP_Add, &n, &m, 2, t);
    kn_node_add_attr(n, "broadcast", KN_ATTR_INT)->i = 1;
    kn_node_add_attr(n, "axis", KN_ATTR_INT)->i = 1;
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    assert_int_equal(n->outputs[0]->shape.rank, 3);
    const char *names[2] = {"x", "y"};
    int st = kn_eval_model(m, 2, names, t, out);
    if (st) fail_msg("%s", kn_last_error());
    const float want[6] = {11, 12, 23, 24, 35, 36};
    for (int i = 0; i < 6; i++) assert_true(((float *)out[0].data)[i] == want[i]);
    kn_tensor_free(&out[0]);
    kn_model_free(m);

    /* Clip-6: bounds are attributes; the missing one is the float range */
    float x[3] = {-5, 0.5f, INFINITY};
    kn_tensor tx = view(KN_F32, x, 1, (int64_t[]){3});
    make_node1(6, KN_OP_Clip, &n, &m, 1, &tx);
    kn_node_add_attr(n, "min", KN_ATTR_FLOAT)->f = -1.0f;
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    st = kn_eval_model(m, 1, names, &tx, out);
    if (st) fail_msg("%s", kn_last_error());
    const float *y = out[0].data;
    assert_true(y[0] == -1.0f && y[1] == 0.5f && y[2] == 3.40282347e38f);
    kn_tensor_free(&out[0]);
    kn_model_free(m);

    /* Cast-1 names the target type */
    make_node1(1, KN_OP_Cast, &n, &m, 1, &tx);
    kn_attr *to = kn_node_add_attr(n, "to", KN_ATTR_STRING);
    to->s = "INT8";
    to->s_len = 4;
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    assert_int_equal(n->outputs[0]->dtype, KN_I8);
    to->s = "STRING";
    assert_int_equal(kn_graph_infer(m->graph), KN_ERR_UNSUPPORTED);
    kn_model_free(m);
}

/* ---- the runtime alone: a descriptor and kn_op_exec, no IR ---------------- */

/* A descriptor of node "e" as a compiled artifact would carry it. */
static kn_opdesc rt_desc(kn_op op, int64_t opset, int n_in, const kn_attr *attrs, int n_attrs)
{
    return (kn_opdesc){.op = op, .name = "e", .op_type = kn_op_type_name(op), .domain = "", .opset = opset,
                       .n_inputs = n_in, .n_outputs = 1, .attrs = attrs, .n_attrs = n_attrs};
}

static void test_exec_without_ir(void **state)
{
    (void)state;
    float a[6] = {1, -2, 3, -4, 5, -6}, b[3] = {10, 20, 30};
    kn_tensor ta = view(KN_F32, a, 2, (int64_t[]){2, 3}), tb = view(KN_F32, b, 1, (int64_t[]){3});
    const kn_tensor *in[3] = {&ta, &tb, &tb};
    kn_tensor out[1] = {{0}};
    /* a binary op broadcasting */
    kn_opdesc d = rt_desc(KN_OP_Sub, 14, 2, NULL, 0);
    int st = kn_op_exec(KN_OP_Sub)(&d, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_true(((float *)out[0].data)[5] == -36.0f);
    kn_tensor_free(&out[0]);
    /* a unary op with an attribute */
    kn_attr alpha = {.name = "alpha", .kind = KN_ATTR_FLOAT, .f = 0.5f};
    d = rt_desc(KN_OP_LeakyRelu, 16, 1, &alpha, 1);
    st = kn_op_exec(KN_OP_LeakyRelu)(&d, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_true(((float *)out[0].data)[1] == -1.0f && ((float *)out[0].data)[2] == 3.0f);
    kn_tensor_free(&out[0]);
    /* a variadic op over three inputs */
    d = rt_desc(KN_OP_Mean, 13, 3, NULL, 0);
    st = kn_op_exec(KN_OP_Mean)(&d, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_true(fabsf(((float *)out[0].data)[0] - 7.0f) < 1e-6f);
    kn_tensor_free(&out[0]);
    /* Cast with its 'to' attribute */
    kn_attr to = {.name = "to", .kind = KN_ATTR_INT, .i = KN_I32};
    d = rt_desc(KN_OP_Cast, 13, 1, &to, 1);
    st = kn_op_exec(KN_OP_Cast)(&d, in, out);
    if (st) fail_msg("%s", kn_last_error());
    assert_int_equal(out[0].dtype, KN_I32);
    assert_int_equal(((int32_t *)out[0].data)[5], -6);
    kn_tensor_free(&out[0]);
}

/* Bad attributes and missing inputs fail naming the node; nothing is left allocated. */
static void test_exec_errors(void **state)
{
    (void)state;
    int32_t a[2] = {7, 8};
    kn_tensor ta = view(KN_I32, a, 1, (int64_t[]){2});
    const kn_tensor *in[2] = {&ta, &ta};
    kn_tensor out[1] = {{0}};
    kn_attr fmod = {.name = "fmod", .kind = KN_ATTR_INT, .i = 2};
    kn_opdesc d = rt_desc(KN_OP_Mod, 13, 2, &fmod, 1);
    assert_int_equal(kn_op_exec(KN_OP_Mod)(&d, in, out), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "node 'e' (Mod): fmod must be 0 or 1, got 2"));
    assert_null(out[0].data);
    /* in[] has only n_inputs entries: a second input past them is missing, not read */
    d = rt_desc(KN_OP_Add, 14, 1, NULL, 0);
    assert_int_equal(kn_op_exec(KN_OP_Add)(&d, in, out), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "node 'e' (Add)"));
    d = rt_desc(KN_OP_Where, 16, 2, NULL, 0);
    assert_int_equal(kn_op_exec(KN_OP_Where)(&d, in, out), KN_ERR_INVALID);
    /* a float-only op on integers */
    d = rt_desc(KN_OP_Sqrt, 13, 1, NULL, 0);
    assert_int_equal(kn_op_exec(KN_OP_Sqrt)(&d, in, out), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "this op takes a floating type"));
    assert_null(out[0].data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast_row),
        cmocka_unit_test(test_broadcast_both_sides),
        cmocka_unit_test(test_broadcast_scalar_and_empty),
        cmocka_unit_test(test_shape_mismatch_message),
        cmocka_unit_test(test_integer_div_mod_pow),
        cmocka_unit_test(test_bitshift_and_compare),
        cmocka_unit_test(test_max_nan_and_unary),
        cmocka_unit_test(test_clip_where),
        cmocka_unit_test(test_half_rounding),
        cmocka_unit_test(test_graph_add),
        cmocka_unit_test(test_legacy_attributes),
        cmocka_unit_test(test_exec_without_ir),
        cmocka_unit_test(test_exec_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
