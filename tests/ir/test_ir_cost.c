/* Unit tests of FLOP counting (ir/cost.c) on shapes whose counts are known
 * by hand: Conv (grouped, strided, padded), ConvTranspose, MatMul (batched),
 * Gemm with transA, pooling, reductions, data movement, elementwise,
 * recurrent layers, and unknown shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir.h"

static kn_model *g_m;

static int setup(void **state)
{
    (void)state;
    g_m = kn_model_create();
    return g_m && kn_model_set_opset(g_m, "", 17) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    kn_model_free(g_m);
    return 0;
}

static kn_value *input(const char *name, int rank, const int64_t *dims)
{
    kn_shape s = {.rank = rank};
    memcpy(s.dims, dims, sizeof(int64_t) * (size_t)rank);
    kn_value *v = kn_graph_add_input(g_m->graph, name, KN_F32, &s);
    assert_non_null(v);
    return v;
}

static void set_ints(kn_node *n, const char *name, int cnt, const int64_t *v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INTS);
    assert_non_null(a);
    a->n = cnt;
    a->ints = kn_arena_memdup(&g_m->arena, v, sizeof(int64_t) * (size_t)cnt);
}

static void set_int(kn_node *n, const char *name, int64_t v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INT);
    assert_non_null(a);
    a->i = v;
}

/* Creates a node and infers its output shape. */
static kn_node *node(kn_op op, const char *name, int n_in, kn_value **ins)
{
    kn_node *n = kn_node_create(g_m->graph, op, name, n_in, ins, 1);
    assert_non_null(n);
    return n;
}

static void infer(void) { assert_int_equal(kn_graph_infer(g_m->graph), 0); }

/* ResNet-50's first layer: 7x7/2, 3->64, 224x224 -> 112x112, pads 3. */
static void test_conv(void **state)
{
    (void)state;
    kn_value *ins[2] = {input("x", 4, (int64_t[]){1, 3, 224, 224}), input("w", 4, (int64_t[]){64, 3, 7, 7})};
    kn_node *n = node(KN_OP_Conv, "conv", 2, ins);
    set_ints(n, "strides", 2, (int64_t[]){2, 2});
    set_ints(n, "pads", 4, (int64_t[]){3, 3, 3, 3});
    infer();
    /* 2 * (64*112*112 outputs) * (3*7*7 MACs each) = 236,027,904 */
    assert_true(kn_node_flops(n) == 2.0 * 64 * 112 * 112 * 3 * 7 * 7);
    assert_true(kn_node_flops(n) == 236027904.0);
}

/* A fused conv counts its product, the bias and one op per post-op per
 * output: Conv 3x3 64->64 on 8x8 + bias + Relu + residual Add. */
static void test_fused_conv(void **state)
{
    (void)state;
    kn_value *ins[4] = {input("fx", 4, (int64_t[]){1, 64, 8, 8}), input("fw", 4, (int64_t[]){64, 64, 3, 3}),
                        input("fb", 1, (int64_t[]){64}), input("fr", 4, (int64_t[]){1, 64, 8, 8})};
    kn_node *n = node(KN_OP_FusedConv, "fconv", 4, ins);
    set_ints(n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    kn_attr *p = kn_node_add_attr(n, "post_ops", KN_ATTR_STRINGS);
    assert_non_null(p);
    static const char *posts[] = {"Relu", "Add"};
    p->n = 2;
    p->strings = posts;
    infer();
    double out = 64.0 * 8 * 8;
    assert_true(kn_node_flops(n) == 2.0 * out * 64 * 9 + out * 3);
}

/* Depthwise 3x3 (group = C): one input channel per output. */
static void test_conv_grouped(void **state)
{
    (void)state;
    kn_value *ins[2] = {input("x", 4, (int64_t[]){2, 32, 10, 10}), input("w", 4, (int64_t[]){32, 1, 3, 3})};
    kn_node *n = node(KN_OP_Conv, "dw", 2, ins);
    set_int(n, "group", 32);
    infer(); /* no pads: 8x8 out */
    assert_true(kn_node_flops(n) == 2.0 * 2 * 32 * 8 * 8 * 9);
}

/* ConvTranspose: every input element scatters Cout/group * kernel MACs. */
static void test_conv_transpose(void **state)
{
    (void)state;
    kn_value *ins[2] = {input("x", 4, (int64_t[]){1, 8, 5, 5}), input("w", 4, (int64_t[]){8, 4, 3, 3})};
    kn_node *n = node(KN_OP_ConvTranspose, "up", 2, ins);
    infer();
    assert_true(kn_node_flops(n) == 2.0 * (8 * 5 * 5) * (4 * 3 * 3));
}

static void test_matmul_batched(void **state)
{
    (void)state;
    kn_value *ins[2] = {input("a", 3, (int64_t[]){12, 128, 64}), input("b", 3, (int64_t[]){12, 64, 128})};
    kn_node *n = node(KN_OP_MatMul, "mm", 2, ins);
    infer();
    assert_true(kn_node_flops(n) == 2.0 * 12 * 128 * 128 * 64);
}

/* Gemm with transA: A is [K, M], so K is A's first dim. */
static void test_gemm_trans_a(void **state)
{
    (void)state;
    kn_value *ins[2] = {input("a", 2, (int64_t[]){300, 7}), input("b", 2, (int64_t[]){300, 50})};
    kn_node *n = node(KN_OP_Gemm, "gemm", 2, ins);
    set_int(n, "transA", 1);
    infer();
    assert_true(kn_node_flops(n) == 2.0 * 7 * 50 * 300);
}

static void test_pool_reduce_movement_elementwise(void **state)
{
    (void)state;
    kn_value *x = input("x", 4, (int64_t[]){1, 4, 8, 8});
    kn_node *pool = node(KN_OP_MaxPool, "pool", 1, &x);
    set_ints(pool, "kernel_shape", 2, (int64_t[]){2, 2});
    set_ints(pool, "strides", 2, (int64_t[]){2, 2});
    kn_node *gap = node(KN_OP_GlobalAveragePool, "gap", 1, &x);
    kn_node *red = node(KN_OP_ReduceMax, "rmax", 1, &x);
    kn_node *tr = node(KN_OP_Transpose, "tr", 1, &x);
    kn_node *relu = node(KN_OP_Relu, "relu", 1, &x);
    infer();
    assert_true(kn_node_flops(pool) == 4.0 * 4 * 4 * 4); /* 64 outputs x 2x2 window */
    assert_true(kn_node_flops(gap) == 256.0);
    assert_true(kn_node_flops(red) == 256.0);
    assert_true(kn_node_flops(tr) == 0.0);
    assert_true(kn_node_flops(relu) == 256.0);
}

/* Recurrent layers: per step, batch row and direction, G*H*(I + H)
 * multiply-adds and one operation per gate value; the layout (batch first)
 * does not change it. */
static void test_recurrent(void **state)
{
    (void)state;
    /* a bidirectional LSTM: 10 steps, batch 2, input 16, hidden 8 */
    kn_value *lx[3] = {input("lx", 3, (int64_t[]){10, 2, 16}), input("lw", 3, (int64_t[]){2, 32, 16}),
                       input("lr", 3, (int64_t[]){2, 32, 8})};
    kn_node *lstm = node(KN_OP_LSTM, "lstm", 3, lx);
    set_int(lstm, "hidden_size", 8);
    kn_attr *dir = kn_node_add_attr(lstm, "direction", KN_ATTR_STRING);
    assert_non_null(dir);
    dir->s = "bidirectional";
    dir->s_len = strlen(dir->s);
    /* a GRU over batch-first input (layout 1): batch 3, 5 steps, input 4, hidden 6 */
    kn_value *gx[3] = {input("gx", 3, (int64_t[]){3, 5, 4}), input("gw", 3, (int64_t[]){1, 18, 4}),
                       input("gr", 3, (int64_t[]){1, 18, 6})};
    kn_node *gru = node(KN_OP_GRU, "gru", 3, gx);
    set_int(gru, "hidden_size", 6);
    set_int(gru, "layout", 1);
    infer();
    assert_true(kn_node_flops(lstm) == 10.0 * 2 * 2 * (2.0 * 32 * (16 + 8) + 32));
    assert_true(kn_node_flops(gru) == 5.0 * 3 * (2.0 * 18 * (4 + 6) + 18));
}

/* Attention: per head, query row and key, D + Dv multiply-adds and one
 * softmax operation; the 3-D form's heads from q_num_heads; past keys
 * count. */
static void test_attention(void **state)
{
    (void)state;
    /* 4-D: batch 2, 3 heads, 5 queries, 7 keys, D 4, Dv 6 */
    kn_value *a4[3] = {input("q4", 4, (int64_t[]){2, 3, 5, 4}), input("k4", 4, (int64_t[]){2, 3, 7, 4}),
                       input("v4", 4, (int64_t[]){2, 3, 7, 6})};
    kn_node *att4 = node(KN_OP_Attention, "att4", 3, a4);
    /* 3-D with 2 heads of 8 (GQA: one key head), and 3 past keys */
    kn_value *a3[5] = {input("q3", 3, (int64_t[]){1, 4, 16}), input("k3", 3, (int64_t[]){1, 2, 8}),
                       input("v3", 3, (int64_t[]){1, 2, 8}), NULL, input("pk", 4, (int64_t[]){1, 1, 3, 8})};
    kn_node *att3 = node(KN_OP_Attention, "att3", 5, a3);
    set_int(att3, "q_num_heads", 2);
    set_int(att3, "kv_num_heads", 1);
    infer();
    assert_true(kn_node_flops(att4) == 2.0 * 3 * 5 * 7 * (2.0 * (4 + 6) + 1));
    assert_true(kn_node_flops(att3) == 1.0 * 2 * 4 * (2 + 3) * (2.0 * (8 + 8) + 1));
}

/* A symbolic dim left unpinned: the count is unknown, not a guess. */
static void test_unknown_shape(void **state)
{
    (void)state;
    kn_shape s = {.rank = 2, .dims = {-1, 16}};
    kn_value *a = kn_graph_add_input(g_m->graph, "a", KN_F32, &s);
    kn_value *ins[2] = {a, input("b", 2, (int64_t[]){16, 8})};
    kn_node *n = node(KN_OP_MatMul, "mm", 2, ins);
    infer();
    assert_true(kn_node_flops(n) < 0);
    assert_true(kn_node_flops(NULL) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_conv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conv_grouped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fused_conv, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conv_transpose, setup, teardown),
        cmocka_unit_test_setup_teardown(test_matmul_batched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gemm_trans_a, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_reduce_movement_elementwise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recurrent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_attention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_shape, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
