/* QDQ placement: which tensors calibration covers, and the static and
 * dynamic rewrites (quant/quantize.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quantize.h"
#include "text.h"

static const char *const k_cnn = "kiln-ir v1\n"
                                 "opset \"\" 17\n"
                                 "graph main(%x: f32[1,2,4,4]) {\n"
                                 "  %w1 = const f32[2,2,1,1] [1.0, 0.5, -0.25, 2.0]\n"
                                 "  %b1 = const f32[2] [0.1, -0.2]\n"
                                 "  %c1: f32[1,2,4,4] = Conv(%x, %w1, %b1) {kernel_shape=[1,1]} #\"conv1\"\n"
                                 "  %r1: f32[1,2,4,4] = Relu(%c1) #\"relu1\"\n"
                                 "  %c2: f32[1,2,4,4] = Conv(%r1, %w1, _) {kernel_shape=[1,1]} #\"conv2\"\n"
                                 "  %a: f32[1,2,4,4] = Add(%c2, %r1) #\"add\"\n"
                                 "  %r2: f32[1,2,4,4] = Relu(%a) #\"relu2\"\n"
                                 "  %s: f32[1,2,4,4] = Sigmoid(%r2) #\"sig\"\n"
                                 "  return %s\n"
                                 "}\n";

static kn_model *parse(const char *text)
{
    kn_model *m = NULL;
    assert_int_equal(kn_ir_parse(text, "test.kir", &m), KN_OK);
    assert_int_equal(kn_graph_toposort(m->graph), KN_OK);
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    return m;
}

static void expect_selected(const char *const *keep, int n_keep, const char *want)
{
    kn_model *m = parse(k_cnn);
    kn_value **v;
    int n;
    assert_int_equal(kn_quant_select(m->graph, n_keep, keep, &v, &n), KN_OK);
    char got[256] = "";
    for (int i = 0; i < n; i++) {
        strcat(got, i ? "," : "");
        strcat(got, v[i]->name);
    }
    assert_string_equal(got, want);
    free(v);
    kn_model_free(m);
}

/* Conv outputs fused into their Relu or residual Add, and the Add fused
 * into its Relu, are not quantized; graph order. */
static void test_select(void **state)
{
    (void)state;
    expect_selected(NULL, 0, "x,r1,r2,s");
    const char *keep[] = {"Sigmoid"};
    expect_selected(keep, 1, "x,r1,r2");
    const char *keep2[] = {"conv1", "conv2", "add", "relu2", "sig"};
    expect_selected(keep2, 5, "r1");
}

static const kn_node *producer_op(const kn_value *v, kn_op op)
{
    assert_non_null(v);
    assert_non_null(v->producer);
    assert_int_equal(v->producer->op, op);
    return v->producer;
}

static void table_for(kn_calib_table *t, const char *const *names, int n)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < n; i++) {
        kn_calib_entry e = {.name = (char *)names[i], .min = 0, .max = 2.55f, .scale = 0.01f, .zero_point = 0,
                            .dtype = KN_U8, .bins = KN_OBS_BINS};
        assert_int_equal(kn_calib_table_add(t, &e), KN_OK);
    }
}

static const kn_node *find(const kn_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i]->name, name)) return g->nodes[i];
    fail_msg("no node %s", name);
    return NULL;
}

static void test_static(void **state)
{
    (void)state;
    kn_model *m = parse(k_cnn);
    kn_calib_table t;
    const char *names[] = {"x", "r1", "r2", "s"};
    table_for(&t, names, 4);
    kn_quant_opts o = {.table = &t};
    assert_int_equal(kn_quantize_static(m, &o), KN_OK);
    const kn_graph *g = m->graph;
    const kn_node *conv1 = find(g, "conv1"), *conv2 = find(g, "conv2"), *add = find(g, "add");
    /* activation: x -> Q -> DQ -> conv1 */
    const kn_node *dq = producer_op(conv1->inputs[0], KN_OP_DequantizeLinear);
    const kn_node *q = producer_op(dq->inputs[0], KN_OP_QuantizeLinear);
    assert_string_equal(q->inputs[0]->name, "x");
    assert_int_equal(dq->inputs[0]->dtype, KN_U8);
    /* weight: s8 per output channel, axis 0; w = 2.0 is 127 */
    const kn_node *wdq = producer_op(conv1->inputs[1], KN_OP_DequantizeLinear);
    const kn_tensor *wq = wdq->inputs[0]->const_data;
    assert_non_null(wq);
    assert_int_equal(wq->dtype, KN_I8);
    assert_int_equal(kn_attr_int(wdq, "axis", -9), 0);
    const int8_t *wv = wq->data;
    assert_int_equal(wv[0], 127); /* channel 0: max |w| = 1 */
    assert_int_equal(wv[1], 64);  /* 0.5 / (1/127) = 63.5 -> 64 (half to even) */
    assert_int_equal(wv[3], 127); /* channel 1: 2.0 */
    /* bias: int32 at scale 0.01 * w_scale */
    const kn_node *bdq = producer_op(conv1->inputs[2], KN_OP_DequantizeLinear);
    const kn_tensor *bq = bdq->inputs[0]->const_data;
    assert_int_equal(bq->dtype, KN_I32);
    assert_int_equal(((const int32_t *)bq->data)[0], (int32_t)lrint(0.1 / (0.01f * (1.0f / 127))));
    /* r1 is read through its DQ by conv2 and by the residual Add */
    const kn_node *rdq = producer_op(conv2->inputs[0], KN_OP_DequantizeLinear);
    assert_ptr_equal(add->inputs[1], rdq->outputs[0]);
    producer_op(add->inputs[0], KN_OP_Conv); /* the residual sum reads conv2 itself */
    /* the graph output stays the float value */
    assert_string_equal(g->outputs[0]->name, "s");
    producer_op(g->outputs[0], KN_OP_Sigmoid);
    kn_calib_table_free(&t);
    kn_model_free(m);
}

static void test_static_keep_and_errors(void **state)
{
    (void)state;
    kn_model *m = parse(k_cnn);
    kn_calib_table t;
    const char *names[] = {"x", "r1", "r2"};
    table_for(&t, names, 3);
    const char *keep[] = {"conv2"};
    kn_quant_opts o = {.table = &t, .n_keep = 1, .keep = keep};
    assert_int_equal(kn_quantize_static(m, &o), KN_OK);
    const kn_node *conv2 = find(m->graph, "conv2");
    assert_string_equal(conv2->inputs[0]->name, "r1"); /* float, as are its weights */
    assert_null(conv2->inputs[1]->producer);
    kn_calib_table_free(&t);
    kn_model_free(m);

    m = parse(k_cnn);
    const char *bad[] = {"x", "nope"};
    table_for(&t, bad, 2);
    o = (kn_quant_opts){.table = &t};
    assert_int_not_equal(kn_quantize_static(m, &o), KN_OK);
    assert_non_null(strstr(kn_last_error(), "'nope'"));
    kn_calib_table_free(&t);
    kn_model_free(m);
}

static void test_dynamic(void **state)
{
    (void)state;
    kn_model *m = parse("kiln-ir v1\n"
                        "opset \"\" 17\n"
                        "graph main(%x: f32[2,3]) {\n"
                        "  %w = const f32[3,2] [1.0, -4.0, 0.5, 2.0, -1.0, 1.0]\n"
                        "  %y: f32[2,2] = MatMul(%x, %w) #\"mm\"\n"
                        "  return %y\n"
                        "}\n");
    kn_quant_opts o = {0};
    assert_int_equal(kn_quantize_dynamic(m, &o), KN_OK);
    const kn_node *mm = find(m->graph, "mm");
    const kn_node *dq = producer_op(mm->inputs[0], KN_OP_DequantizeLinear);
    const kn_node *dyn = producer_op(dq->inputs[0], KN_OP_DynamicQuantizeLinear);
    assert_string_equal(dyn->inputs[0]->name, "x");
    assert_ptr_equal(dq->inputs[1], dyn->outputs[1]);
    const kn_node *wdq = producer_op(mm->inputs[1], KN_OP_DequantizeLinear);
    assert_int_equal(kn_attr_int(wdq, "axis", -9), 1);
    const int8_t *wv = wdq->inputs[0]->const_data->data;
    /* column 0: max 1 -> [127, 64, -127]; column 1: max 4 -> [-127, 64, 32] */
    assert_int_equal(wv[0], 127);
    assert_int_equal(wv[1], -127);
    assert_int_equal(wv[3], 64);
    assert_int_equal(wv[5], 32);
    kn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_static),
        cmocka_unit_test(test_static_keep_and_errors),
        cmocka_unit_test(test_dynamic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
