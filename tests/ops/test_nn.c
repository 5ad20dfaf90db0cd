/* Unit tests of the 'nn' op family (ir/ops/nn.c, runtime/ops/nn*.c,
 * runtime/kernels/nn*.c) through the reference evaluator: hand-checked Conv,
 * grouped/padded Conv, the blocked f32 Conv against a naive loop, MaxPool
 * with indices, BatchNormalization, LayerNormalization, and the error for a
 * bad weight; and the runtime's exec functions called directly on a
 * descriptor with no IR (as compiled artifacts call them), including
 * attributes that went through kn_attrs_write/kn_attrs_read. */
#include <math.h>
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

/* A one-node model: inputs x0..x{n-1} (shaped like the given tensors). */
typedef struct one_node {
    kn_model *m;
    kn_node *node;
} one_node;

static one_node make_model(kn_op op, const char *name, int n_in, const kn_tensor *ins, int n_out)
{
    one_node r = {kn_model_create(), NULL};
    assert_non_null(r.m);
    assert_int_equal(kn_model_set_opset(r.m, "", 18), 0);
    kn_value *vals[8];
    for (int i = 0; i < n_in; i++) {
        char vname[8];
        snprintf(vname, sizeof vname, "x%d", i);
        kn_shape s = {.rank = ins[i].rank};
        memcpy(s.dims, ins[i].dims, sizeof s.dims);
        vals[i] = kn_graph_add_input(r.m->graph, vname, ins[i].dtype, &s);
        assert_non_null(vals[i]);
    }
    r.node = kn_node_create(r.m->graph, op, name, n_in, vals, n_out);
    assert_non_null(r.node);
    for (int i = 0; i < n_out; i++) assert_int_equal(kn_graph_add_output(r.m->graph, r.node->outputs[i]), 0);
    return r;
}

static void set_int(kn_node *n, const char *name, int64_t v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INT);
    assert_non_null(a);
    a->i = v;
}

static void set_float(kn_node *n, const char *name, float v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_FLOAT);
    assert_non_null(a);
    a->f = v;
}

static void set_ints(kn_node *n, const char *name, int count, const int64_t *v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INTS);
    assert_non_null(a);
    a->n = count;
    a->ints = kn_arena_memdup(&n->graph->model->arena, v, sizeof(int64_t) * (size_t)count);
    assert_non_null(a->ints);
}

/* Infers, then evaluates with the infer/eval agreement check on. */
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

static void expect_f32(const kn_tensor *t, int n, const float *want, float tol)
{
    assert_int_equal(t->dtype, KN_F32);
    assert_int_equal(kn_tensor_numel(t), n);
    for (int i = 0; i < n; i++)
        if (fabsf(((const float *)t->data)[i] - want[i]) > tol)
            fail_msg("element %d: got %g, want %g", i, ((const float *)t->data)[i], want[i]);
}

static void free_all(kn_tensor *t, int n)
{
    for (int i = 0; i < n; i++) kn_tensor_free(&t[i]);
}

static void test_conv_small(void **state)
{
    (void)state;
    /* X = 0..8 as 3x3, W = 2x2 ones, B = 1: each output is a 2x2 window sum + 1. */
    float x[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8}, w[4] = {1, 1, 1, 1}, b[1] = {1};
    kn_tensor ins[3] = {f32_tensor(4, (int64_t[]){1, 1, 3, 3}, x), f32_tensor(4, (int64_t[]){1, 1, 2, 2}, w),
                        f32_tensor(1, (int64_t[]){1}, b)};
    one_node r = make_model(KN_OP_Conv, "conv0", 3, ins, 1);
    kn_tensor out[1] = {{0}};
    if (run(&r, 3, ins, out)) fail_msg("%s", kn_last_error());
    assert_int_equal(out[0].rank, 4);
    assert_int_equal(out[0].dims[2], 2);
    assert_int_equal(out[0].dims[3], 2);
    expect_f32(&out[0], 4, (const float[]){9, 13, 21, 25}, 0);
    free_all(out, 1);
    free_all(ins, 3);
    kn_model_free(r.m);
}

static void test_conv_group_padding(void **state)
{
    (void)state;
    /* Two channels, group 2, 3x3 kernels, pads 1: channel 0 uses the identity
     * kernel (center 1), channel 1 a box of ones (sum of the 3x3 neighbourhood). */
    float x[8] = {1, 2, 3, 4, /* channel 1: */ 10, 20, 30, 40};
    float w[18] = {0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    kn_tensor ins[2] = {f32_tensor(4, (int64_t[]){1, 2, 2, 2}, x), f32_tensor(4, (int64_t[]){2, 1, 3, 3}, w)};
    one_node r = make_model(KN_OP_Conv, "conv_g", 2, ins, 1);
    set_int(r.node, "group", 2);
    set_ints(r.node, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    kn_tensor out[1] = {{0}};
    if (run(&r, 2, ins, out)) fail_msg("%s", kn_last_error());
    expect_f32(&out[0], 8, (const float[]){1, 2, 3, 4, 100, 100, 100, 100}, 0);
    free_all(out, 1);
    free_all(ins, 2);
    kn_model_free(r.m);
}

/* Naive direct convolution (2-D, NCHW) for checking the im2col + GEMM path. */
static void naive_conv(const float *x, const float *w, const float *b, int N, int C, int H, int W, int M,
                       int KH, int KW, int G, int s, int d, int p, int OH, int OW, float *y)
{
    int cg = C / G, mg = M / G;
    for (int n = 0; n < N; n++)
        for (int m = 0; m < M; m++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double acc = b[m];
                    int g = m / mg;
                    for (int c = 0; c < cg; c++)
                        for (int kh = 0; kh < KH; kh++)
                            for (int kw = 0; kw < KW; kw++) {
                                int ih = oh * s - p + kh * d, iw = ow * s - p + kw * d;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                acc += (double)x[((n * C + g * cg + c) * H + ih) * W + iw] *
                                       w[((m * cg + c) * KH + kh) * KW + kw];
                            }
                    y[((n * M + m) * OH + oh) * OW + ow] = (float)acc;
                }
}

/* Conv through the evaluator against naive_conv for one configuration. */
static void check_conv_case(int N, int C, int H, int W, int M, int K, int G, int S, int D, int P)
{
    const int OH = (H + 2 * P - D * (K - 1) - 1) / S + 1, OW = (W + 2 * P - D * (K - 1) - 1) / S + 1;
    float *x = malloc(sizeof(float) * N * C * H * W), *w = malloc(sizeof(float) * M * (C / G) * K * K);
    float *b = malloc(sizeof(float) * M), *want = malloc(sizeof(float) * N * M * OH * OW);
    assert_non_null(x);
    assert_non_null(w);
    assert_non_null(b);
    assert_non_null(want);
    unsigned seed = 12345;
    for (int i = 0; i < N * C * H * W; i++) x[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0xff) / 64.0f - 2;
    for (int i = 0; i < M * (C / G) * K * K; i++) w[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0xff) / 128.0f - 1;
    for (int i = 0; i < M; i++) b[i] = (float)i * 0.25f;
    naive_conv(x, w, b, N, C, H, W, M, K, K, G, S, D, P, OH, OW, want);
    kn_tensor ins[3] = {f32_tensor(4, (int64_t[]){N, C, H, W}, x), f32_tensor(4, (int64_t[]){M, C / G, K, K}, w),
                        f32_tensor(1, (int64_t[]){M}, b)};
    one_node r = make_model(KN_OP_Conv, "conv_big", 3, ins, 1);
    set_int(r.node, "group", G);
    set_ints(r.node, "strides", 2, (const int64_t[]){S, S});
    set_ints(r.node, "dilations", 2, (const int64_t[]){D, D});
    set_ints(r.node, "pads", 4, (const int64_t[]){P, P, P, P});
    kn_tensor out[1] = {{0}};
    if (run(&r, 3, ins, out)) fail_msg("%s", kn_last_error());
    assert_int_equal(out[0].dims[2], OH);
    assert_int_equal(out[0].dims[3], OW);
    expect_f32(&out[0], N * M * OH * OW, want, 2e-3f);
    free_all(out, 1);
    free_all(ins, 3);
    kn_model_free(r.m);
    free(x);
    free(w);
    free(b);
    free(want);
}

static void test_conv_matches_naive(void **state)
{
    (void)state;
    /* Odd sizes so the 4x8 GEMM blocks have remainders in both directions. */
    check_conv_case(2, 6, 9, 11, 10, 3, 2, 2, 2, 2);
    /* Large enough (576-row im2col, 70 output rows) to be split into tiles. */
    check_conv_case(1, 64, 70, 64, 5, 3, 1, 1, 1, 1);
    /* 1x1, stride 1, no padding: the GEMM reads X directly. */
    check_conv_case(1, 7, 5, 6, 9, 1, 1, 1, 1, 0);
}

static void test_maxpool_indices(void **state)
{
    (void)state;
    float x[16] = {1, 5, 2, 0, 3, 4, 8, 7, 0, 0, 1, 1, 9, 0, 1, 2};
    kn_tensor ins[1] = {f32_tensor(4, (int64_t[]){1, 1, 4, 4}, x)};
    one_node r = make_model(KN_OP_MaxPool, "pool0", 1, ins, 2);
    set_ints(r.node, "kernel_shape", 2, (const int64_t[]){2, 2});
    set_ints(r.node, "strides", 2, (const int64_t[]){2, 2});
    kn_tensor out[2] = {{0}, {0}};
    if (run(&r, 1, ins, out)) fail_msg("%s", kn_last_error());
    expect_f32(&out[0], 4, (const float[]){5, 8, 9, 2}, 0);
    assert_int_equal(out[1].dtype, KN_I64);
    const int64_t want_idx[4] = {1, 6, 12, 15};
    for (int i = 0; i < 4; i++) assert_int_equal(((int64_t *)out[1].data)[i], want_idx[i]);
    free_all(out, 2);
    free_all(ins, 1);
    kn_model_free(r.m);
}

static void test_batchnorm(void **state)
{
    (void)state;
    float x[4] = {1, 2, 3, 4}, sc[2] = {2, 0.5f}, bi[2] = {1, -1}, mean[2] = {1, 4}, var[2] = {4, 0.25f};
    const int64_t c2[1] = {2};
    kn_tensor ins[5] = {f32_tensor(4, (int64_t[]){1, 2, 1, 2}, x), f32_tensor(1, c2, sc), f32_tensor(1, c2, bi),
                        f32_tensor(1, c2, mean), f32_tensor(1, c2, var)};
    one_node r = make_model(KN_OP_BatchNormalization, "bn0", 5, ins, 1);
    set_float(r.node, "epsilon", 0.0f);
    kn_tensor out[1] = {{0}};
    if (run(&r, 5, ins, out)) fail_msg("%s", kn_last_error());
    /* c0: (x-1)/2*2+1; c1: (x-4)/0.5*0.5-1 */
    expect_f32(&out[0], 4, (const float[]){1, 2, -2, -1}, 1e-6f);
    free_all(out, 1);
    free_all(ins, 5);
    kn_model_free(r.m);
}

static void test_layernorm(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 2, 2, 2}, sc[3] = {1, 2, 3}, bi[3] = {0, 0, 1};
    kn_tensor ins[3] = {f32_tensor(2, (int64_t[]){2, 3}, x), f32_tensor(1, (int64_t[]){3}, sc),
                        f32_tensor(1, (int64_t[]){3}, bi)};
    one_node r = make_model(KN_OP_LayerNormalization, "ln0", 3, ins, 3);
    set_float(r.node, "epsilon", 0.0f);
    kn_tensor out[3] = {{0}, {0}, {0}};
    if (run(&r, 3, ins, out)) fail_msg("%s", kn_last_error());
    /* Row 0: mean 2, var 2/3 → inv std sqrt(1.5). Row 1 is constant: var 0 with
     * eps 0 gives inf * 0; use only row 0's values and the Mean output. */
    float is = sqrtf(1.5f);
    const float *y = out[0].data;
    assert_true(fabsf(y[0] - (-is)) < 1e-5f);
    assert_true(fabsf(y[1] - 0.0f) < 1e-5f);
    assert_true(fabsf(y[2] - (3 * is + 1)) < 1e-5f);
    assert_int_equal(out[1].rank, 2);
    assert_int_equal(out[1].dims[1], 1);
    assert_true(fabsf(((float *)out[1].data)[0] - 2.0f) < 1e-6f);
    assert_true(fabsf(((float *)out[1].data)[1] - 2.0f) < 1e-6f);
    assert_true(fabsf(((float *)out[2].data)[0] - is) < 1e-5f);
    free_all(out, 3);
    free_all(ins, 3);
    kn_model_free(r.m);
}

static void test_conv_bad_weight(void **state)
{
    (void)state;
    /* X has 3 channels; W claims 2 input channels per group with group 1. */
    kn_tensor ins[2] = {f32_tensor(4, (int64_t[]){1, 3, 5, 5}, NULL), f32_tensor(4, (int64_t[]){4, 2, 3, 3}, NULL)};
    one_node r = make_model(KN_OP_Conv, "conv_bad", 2, ins, 1);
    kn_tensor out[1] = {{0}};
    int st = run(&r, 2, ins, out);
    assert_int_equal(st, KN_ERR_INVALID);
    const char *msg = kn_last_error();
    if (!strstr(msg, "conv_bad") || !strstr(msg, "input channels")) fail_msg("unexpected message: %s", msg);
    /* The evaluator alone (no infer) must refuse too, not crash. */
    kn_eval_options o = {0};
    const char *names[2] = {"x0", "x1"};
    st = kn_eval_model_opts(r.m, 2, names, ins, out, &o);
    assert_int_equal(st, KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "conv_bad"));
    free_all(ins, 2);
    kn_model_free(r.m);
}


/* Malformed attributes and data: each must be a clear error naming the node. */
static void expect_error(one_node *r, int n_in, const kn_tensor *ins, const char *needle)
{
    kn_tensor out[2] = {{0}, {0}};
    const char *names[8] = {"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"};
    kn_eval_options o = {0};
    int st = kn_graph_infer(r->m->graph);
    if (!st) st = kn_eval_model_opts(r->m, n_in, names, ins, out, &o);
    if (st == KN_OK) fail_msg("expected an error containing '%s'", needle);
    const char *msg = kn_last_error();
    if (!strstr(msg, r->node->name) || !strstr(msg, needle)) fail_msg("unexpected message: %s", msg);
    kn_model_free(r->m);
}

static void test_bad_inputs(void **state)
{
    (void)state;
    kn_tensor x = f32_tensor(4, (int64_t[]){1, 2, 4, 4}, NULL);
    kn_tensor w = f32_tensor(4, (int64_t[]){2, 2, 3, 3}, NULL);

    one_node r = make_model(KN_OP_MaxPool, "pool_nokernel", 1, &x, 1);
    expect_error(&r, 1, &x, "kernel_shape");

    kn_tensor cw[2] = {x, w};
    r = make_model(KN_OP_Conv, "conv_strides", 2, cw, 1);
    set_ints(r.node, "strides", 3, (const int64_t[]){1, 1, 1});
    expect_error(&r, 2, cw, "strides");

    r = make_model(KN_OP_Conv, "conv_big_kernel", 2, cw, 1);
    set_ints(r.node, "dilations", 2, (const int64_t[]){3, 3});
    expect_error(&r, 2, cw, "larger than the padded input");

    r = make_model(KN_OP_AveragePool, "pool_autopad", 1, &x, 1);
    set_ints(r.node, "kernel_shape", 2, (const int64_t[]){2, 2});
    kn_attr *a = kn_node_add_attr(r.node, "auto_pad", KN_ATTR_STRING);
    a->s = "SIDEWAYS";
    a->s_len = 8;
    expect_error(&r, 1, &x, "auto_pad");

    /* MaxUnpool with an index past the output. */
    float xv[1] = {1};
    int64_t iv[1] = {999};
    kn_tensor ui[2] = {f32_tensor(4, (int64_t[]){1, 1, 1, 1}, xv), {0}};
    assert_int_equal(kn_tensor_alloc(&ui[1], KN_I64, 4, (int64_t[]){1, 1, 1, 1}), 0);
    memcpy(ui[1].data, iv, sizeof iv);
    r = make_model(KN_OP_MaxUnpool, "unpool_oob", 2, ui, 1);
    set_ints(r.node, "kernel_shape", 2, (const int64_t[]){2, 2});
    set_ints(r.node, "strides", 2, (const int64_t[]){2, 2});
    expect_error(&r, 2, ui, "outside the output");

    /* BatchNormalization with a scale of the wrong length. */
    kn_tensor bn[5] = {x, f32_tensor(1, (int64_t[]){3}, NULL), f32_tensor(1, (int64_t[]){2}, NULL),
                       f32_tensor(1, (int64_t[]){2}, NULL), f32_tensor(1, (int64_t[]){2}, NULL)};
    r = make_model(KN_OP_BatchNormalization, "bn_bad", 5, bn, 1);
    expect_error(&r, 5, bn, "scale");

    free_all(ui, 2);
    free_all(bn + 1, 4);
    kn_tensor_free(&x);
    kn_tensor_free(&w);
}

/* ---- runtime execution without the IR ---------------------------------------- */

static void test_exec_without_ir(void **state)
{
    (void)state;
    /* MaxPool 2x2 stride 2 over 0..15 (4x4), only Y wanted (Indices omitted). */
    float xv[16];
    for (int i = 0; i < 16; i++) xv[i] = (float)i;
    kn_tensor x = f32_tensor(4, (int64_t[]){1, 1, 4, 4}, xv);
    int64_t k2[2] = {2, 2};
    kn_attr attrs[2] = {{.name = "kernel_shape", .kind = KN_ATTR_INTS, .n = 2, .ints = k2},
                        {.name = "strides", .kind = KN_ATTR_INTS, .n = 2, .ints = k2}};
    /* Round-trip the attributes through the artifact serialization. */
    unsigned char *blob;
    size_t len;
    kn_attr *rd;
    int nrd;
    void *block;
    assert_int_equal(kn_attrs_write(attrs, 2, &blob, &len), 0);
    assert_int_equal(kn_attrs_read(blob, len, &rd, &nrd, &block), 0);
    free(blob);
    bool has[2] = {true, false};
    kn_opdesc d = {.op = KN_OP_MaxPool, .name = "pool_rt", .op_type = "MaxPool", .domain = "", .opset = 12,
                   .n_inputs = 1, .n_outputs = 2, .has_output = has, .attrs = rd, .n_attrs = nrd};
    kn_exec_fn exec = kn_op_exec(KN_OP_MaxPool);
    assert_non_null(exec);
    const kn_tensor *in[1] = {&x};
    kn_tensor out[2] = {{0}, {0}};
    if (exec(&d, in, out)) fail_msg("%s", kn_last_error());
    expect_f32(&out[0], 4, (const float[]){5, 7, 13, 15}, 0);
    assert_null(out[1].data);
    free_all(out, 2);

    /* Conv with a missing weight: refused with the node's name. */
    kn_opdesc c = {.op = KN_OP_Conv, .name = "conv_rt", .op_type = "Conv", .domain = "", .opset = 18,
                   .n_inputs = 2, .n_outputs = 1};
    const kn_tensor *cin[2] = {&x, NULL};
    kn_tensor cout[1] = {{0}};
    assert_int_not_equal(kn_op_exec(KN_OP_Conv)(&c, cin, cout), KN_OK);
    assert_non_null(strstr(kn_last_error(), "conv_rt"));
    assert_non_null(strstr(kn_last_error(), "W"));
    free_all(cout, 1);

    /* GlobalAveragePool (no attributes): the mean of 0..15. */
    kn_opdesc g = {.op = KN_OP_GlobalAveragePool, .name = "gap_rt", .op_type = "GlobalAveragePool",
                   .domain = "", .opset = 1, .n_inputs = 1, .n_outputs = 1};
    if (kn_op_exec(KN_OP_GlobalAveragePool)(&g, in, cout)) fail_msg("%s", kn_last_error());
    expect_f32(&cout[0], 1, (const float[]){7.5f}, 1e-6f);
    free_all(cout, 1);
    kn_attrs_free(block);
    kn_tensor_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_small),      cmocka_unit_test(test_conv_group_padding),
        cmocka_unit_test(test_conv_matches_naive), cmocka_unit_test(test_maxpool_indices),
        cmocka_unit_test(test_batchnorm),       cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_conv_bad_weight), cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_exec_without_ir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
