/*
 * tests/frontend/test_export.c — the ONNX writer (onnx_export.h): models of
 * the ONNX node suite that hold every attribute kind kiln imports
 * (subgraphs of If/Loop/Scan, tensors, strings, lists) survive
 * import → export → import: same nodes, attributes, interface and constants,
 * and a second export is byte-identical to the first. Plus the atomic
 * write: a failed save leaves nothing behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx_export.h"
#include "onnx_import.h"
#include "test_skip.h"

static const char *const k_models[] = {
    "test_if",                                /* GRAPH attributes, outer-scope values */
    "test_loop11",                            /* GRAPH body with loop-carried values */
    "test_scan9_sum",                         /* INTS attributes and a body */
    "test_constantofshape_float_ones",        /* a TENSOR attribute */
    "test_resize_upsample_scales_nearest",    /* STRING attributes, omitted optional inputs */
    "test_cast_FLOAT_to_FLOAT16",             /* an INT attribute, f16 */
    "test_split_variable_parts_1d_opset18",   /* several outputs */
    "test_lstm_defaults",                     /* omitted optional inputs and outputs */
    "test_dequantizelinear_axis",             /* per-axis quantization parameters */
};

static void same_graph(const kn_graph *a, const kn_graph *b)
{
    assert_int_equal(a->n_nodes, b->n_nodes);
    assert_int_equal(a->n_inputs, b->n_inputs);
    assert_int_equal(a->n_outputs, b->n_outputs);
    for (int i = 0; i < a->n_inputs; i++) {
        assert_string_equal(a->inputs[i]->name, b->inputs[i]->name);
        assert_int_equal(a->inputs[i]->dtype, b->inputs[i]->dtype);
        assert_int_equal(a->inputs[i]->shape.rank, b->inputs[i]->shape.rank);
        for (int d = 0; d < a->inputs[i]->shape.rank; d++) {
            assert_int_equal(a->inputs[i]->shape.dims[d], b->inputs[i]->shape.dims[d]);
            const char *sa = a->inputs[i]->shape.sym[d], *sb = b->inputs[i]->shape.sym[d];
            assert_true((!sa && !sb) || (sa && sb && !strcmp(sa, sb)));
        }
    }
    for (int i = 0; i < a->n_outputs; i++) assert_string_equal(a->outputs[i]->name, b->outputs[i]->name);
    for (int k = 0; k < a->n_nodes; k++) {
        const kn_node *x = a->nodes[k], *y = b->nodes[k];
        assert_string_equal(x->name, y->name);
        assert_string_equal(x->op_type, y->op_type);
        assert_int_equal(x->n_inputs, y->n_inputs);
        assert_int_equal(x->n_outputs, y->n_outputs);
        for (int i = 0; i < x->n_inputs; i++)
            assert_true((!x->inputs[i] && !y->inputs[i]) ||
                        (x->inputs[i] && y->inputs[i] && !strcmp(x->inputs[i]->name, y->inputs[i]->name)));
        assert_int_equal(x->n_attrs, y->n_attrs);
        for (int j = 0; j < x->n_attrs; j++) {
            const kn_attr *p = &x->attrs[j], *q = kn_node_attr(y, p->name);
            assert_non_null(q);
            assert_int_equal(p->kind, q->kind);
            if (p->kind == KN_ATTR_GRAPH) same_graph(p->g, q->g);
            if (p->kind == KN_ATTR_TENSOR) {
                assert_int_equal(p->t->nbytes, q->t->nbytes);
                assert_memory_equal(p->t->data, q->t->data, p->t->nbytes);
            }
        }
    }
}

static void test_round_trip(void **state)
{
    (void)state;
    const char *suite = getenv("KILN_NODE_SUITE");
    if (!suite || !*suite) KN_SKIP("KILN_NODE_SUITE is not set (no onnx package with its node suite)");
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s/model.onnx", suite, k_models[i]);
        kn_model *a = NULL, *b = NULL, *c = NULL;
        if (kn_onnx_load_file(path, &a)) {
            print_message("%s\n", kn_last_error());
            fail();
        }
        uint8_t *bytes1 = NULL, *bytes2 = NULL;
        size_t len1 = 0, len2 = 0;
        assert_int_equal(kn_onnx_save_bytes(a, &bytes1, &len1), KN_OK);
        if (kn_onnx_load_bytes(bytes1, len1, NULL, &b)) {
            print_message("%s: re-import: %s\n", k_models[i], kn_last_error());
            fail();
        }
        same_graph(a->graph, b->graph);
        assert_int_equal(kn_model_opset(a, ""), kn_model_opset(b, ""));
        assert_int_equal(kn_onnx_save_bytes(b, &bytes2, &len2), KN_OK);
        assert_int_equal(len1, len2);
        assert_memory_equal(bytes1, bytes2, len1);
        assert_int_equal(kn_onnx_load_bytes(bytes2, len2, NULL, &c), KN_OK);
        free(bytes1), free(bytes2);
        kn_model_free(a), kn_model_free(b), kn_model_free(c);
    }
}

/* A constant survives with its bytes; a symbolic dim with its name. */
static void test_constants_and_dims(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    kn_graph *g = m->graph;
    assert_int_equal(kn_model_set_opset(m, "", 17), KN_OK);
    kn_shape s = kn_shape_unknown();
    int64_t dims[2] = {-1, 4};
    kn_shape_set(&s, 2, dims);
    s.sym[0] = "batch";
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, &s);
    kn_tensor *t = calloc(1, sizeof *t);
    int64_t wd[1] = {4};
    assert_int_equal(kn_tensor_alloc(t, KN_I8, 1, wd), KN_OK);
    for (int i = 0; i < 4; i++) ((int8_t *)t->data)[i] = (int8_t)(i * 50 - 100);
    kn_value *w = kn_graph_add_constant(g, "w", t);
    kn_tensor *sc = calloc(1, sizeof *sc);
    assert_int_equal(kn_tensor_alloc(sc, KN_F32, 0, NULL), KN_OK);
    *(float *)sc->data = 0.5f;
    kn_value *in[2] = {w, kn_graph_add_constant(g, "w_scale", sc)};
    kn_node *dq = kn_node_create_named(g, "DequantizeLinear", "", "dq", 2, in, 1, (const char *const[]){"wf"});
    assert_non_null(dq);
    kn_value *ins[2] = {x, dq->outputs[0]};
    kn_node *add = kn_node_create_named(g, "Add", "", "add", 2, ins, 1, (const char *const[]){"y"});
    assert_int_equal(kn_graph_add_output(g, add->outputs[0]), KN_OK);
    uint8_t *bytes = NULL;
    size_t len = 0;
    assert_int_equal(kn_onnx_save_bytes(m, &bytes, &len), KN_OK);
    kn_model *b = NULL;
    if (kn_onnx_load_bytes(bytes, len, NULL, &b)) {
        print_message("%s\n", kn_last_error());
        fail();
    }
    kn_value *w2 = kn_graph_lookup_local(b->graph, "w");
    assert_non_null(w2);
    assert_non_null(w2->const_data);
    assert_int_equal(w2->const_data->dtype, KN_I8);
    assert_memory_equal(w2->const_data->data, t->data, 4);
    const kn_value *x2 = b->graph->inputs[0];
    assert_int_equal(x2->shape.rank, 2);
    assert_string_equal(x2->shape.sym[0], "batch");
    assert_int_equal(x2->shape.dims[1], 4);
    free(bytes);
    kn_model_free(b);
    kn_model_free(m);
}

/* A save that cannot complete leaves neither the file nor a temporary. */
static void test_atomic_failure(void **state)
{
    (void)state;
    char dir[] = "/tmp/kiln_export_XXXXXX";
    assert_non_null(mkdtemp(dir));
    kn_model *m = kn_model_create();
    assert_int_equal(kn_model_set_opset(m, "", 17), KN_OK);
    kn_shape s = kn_shape_unknown();
    kn_shape_set(&s, 1, (const int64_t[]){2});
    kn_value *x = kn_graph_add_input(m->graph, "x", KN_F32, &s);
    kn_node *n = kn_node_create_named(m->graph, "Relu", "", "r", 1, &x, 1, (const char *const[]){"y"});
    assert_int_equal(kn_graph_add_output(m->graph, n->outputs[0]), KN_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/missing/m.onnx", dir);
    assert_int_not_equal(kn_onnx_save_file(m, path), KN_OK);
    assert_non_null(strstr(kn_last_error(), path));
    snprintf(path, sizeof path, "%s/sub", dir); /* a folder: rename() over it fails */
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_not_equal(kn_onnx_save_file(m, path), KN_OK);
    snprintf(path, sizeof path, "%s/ok.onnx", dir);
    assert_int_equal(kn_onnx_save_file(m, path), KN_OK);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "test \"$(ls %s | tr '\\n' ' ')\" = 'ok.onnx sub '", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    kn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_constants_and_dims),
        cmocka_unit_test(test_atomic_failure),
    };
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
