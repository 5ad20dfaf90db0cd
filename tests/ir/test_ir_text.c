/* Tests of the IR text form (ir/text_print.c, ir/text_parse.c): round trips
 * of hand-built models, exactness of every attribute kind, constant
 * summaries, parser errors with line:column, and the golden files of
 * tests/ir/golden (each is its own expected output). */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_files.h"

#include "ir.h"
#include "text.h"

static char *print_str(const kn_model *m, int64_t max_inline)
{
    kn_ir_print_opts o = kn_ir_print_defaults();
    o.max_inline_elems = max_inline;
    char *s = NULL;
    if (kn_ir_print_string(m, &o, &s)) fail_msg("print failed: %s", kn_last_error());
    return s;
}

/* print(parse(print(m))) == print(m); returns the parsed model. */
static kn_model *round_trip(const kn_model *m)
{
    char *a = print_str(m, -1);
    kn_model *m2 = NULL;
    if (kn_ir_parse(a, "roundtrip", &m2)) fail_msg("parse failed: %s\n--- text:\n%s", kn_last_error(), a);
    char *b = print_str(m2, -1);
    if (strcmp(a, b)) fail_msg("round trip differs:\n--- first:\n%s\n--- second:\n%s", a, b);
    free(a);
    free(b);
    return m2;
}

static kn_tensor *mk_tensor(kn_dtype dt, int rank, const int64_t *dims, const void *data)
{
    kn_tensor *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_int_equal(kn_tensor_alloc(t, dt, rank, dims), KN_OK);
    if (data) memcpy(t->data, data, t->nbytes);
    return t;
}

static kn_attr *add_attr(kn_node *n, const char *name, kn_attr_kind k)
{
    kn_attr *a = kn_node_add_attr(n, name, k);
    assert_non_null(a);
    return a;
}

/* A model using every attribute kind, a subgraph with an outer reference,
 * symbolic dims, omitted inputs/outputs and an initializer-input. */
static kn_model *build_rich_model(void)
{
    kn_model *m = kn_model_create();
    kn_arena *ar = &m->arena;
    kn_model_set_opset(m, "", 17);
    kn_model_set_opset(m, "com.microsoft", 1);
    m->ir_version = 9;
    m->producer_name = "unit \"test\"";
    m->producer_version = "0.1";
    kn_graph *g = m->graph;
    kn_shape s = {2, {-1, 4}, {"batch", NULL}};
    kn_value *x = kn_graph_add_input(g, "x", KN_F32, &s);
    kn_shape s2 = {1, {-1}, {NULL}};
    kn_value *c = kn_graph_add_input(g, "onnx::cond", KN_BOOL, &s2);
    float wdata[4] = {0.1f, -2.5f, 1e-45f, 3.0e38f};
    int64_t d4[1] = {4};
    kn_value *w = kn_graph_add_constant(g, "w", mk_tensor(KN_F32, 1, d4, wdata));
    w->flags |= KN_VALUE_INITIALIZER;

    kn_value *ins[3] = {x, w, NULL};
    kn_node *n = kn_node_create(g, KN_OP_Gemm, "gemm 0", 3, ins, 1);
    n->outputs[0]->dtype = KN_F32;
    n->outputs[0]->shape = s;
    add_attr(n, "i", KN_ATTR_INT)->i = INT64_MIN;
    add_attr(n, "f", KN_ATTR_FLOAT)->f = 0.1f;
    kn_attr *a = add_attr(n, "s", KN_ATTR_STRING);
    a->s = kn_arena_memdup(ar, "a\0b\"\\\n\xc3\xa9", 9);
    a->s_len = 8;
    a = add_attr(n, "t", KN_ATTR_TENSOR);
    int64_t i64s[3] = {1, -1, 0};
    int64_t d3[1] = {3};
    a->t = kn_model_adopt_tensor(m, mk_tensor(KN_I64, 1, d3, i64s));
    a = add_attr(n, "fs", KN_ATTR_FLOATS);
    static float fs[3] = {1.0f, -0.0f, 1.17549435e-38f};
    a->floats = fs, a->n = 3;
    a = add_attr(n, "is", KN_ATTR_INTS);
    static int64_t is[2] = {INT64_MAX, 0};
    a->ints = is, a->n = 2;
    a = add_attr(n, "ss", KN_ATTR_STRINGS);
    static const char *ss[2] = {"", "x y"};
    a->strings = ss, a->n = 2;
    a = add_attr(n, "ts", KN_ATTR_TENSORS);
    static kn_tensor *ts[1];
    uint16_t h = kn_f32_to_f16(0.333f);
    ts[0] = kn_model_adopt_tensor(m, mk_tensor(KN_F16, 0, NULL, &h));
    a->tensors = ts, a->n = 1;
    add_attr(n, "empty_ints", KN_ATTR_INTS);

    kn_node *iff = kn_node_create(g, KN_OP_If, "if", 1, &c, 2);
    kn_node_set_input(iff, 0, c);
    iff->outputs[1] = NULL;
    kn_graph *br = kn_graph_create_sub(g, "then");
    br->parent_node = iff;
    add_attr(iff, "then_branch", KN_ATTR_GRAPH)->g = br;
    kn_value *bins[2] = {n->outputs[0], x};
    kn_node *add = kn_node_create(br, KN_OP_Add, "inner", 2, bins, 1);
    kn_graph_add_output(br, add->outputs[0]);
    kn_graph *e1 = kn_graph_create_sub(g, "e1");
    kn_value *e1in = kn_graph_add_input(e1, "e1_in", KN_I64, NULL);
    kn_graph_add_output(e1, e1in);
    a = add_attr(iff, "graphs", KN_ATTR_GRAPHS);
    static kn_graph *gs[1];
    gs[0] = e1;
    a->graphs = gs, a->n = 1;
    kn_graph_add_output(g, iff->outputs[0]);
    kn_graph_add_output(g, w);
    return m;
}

static void test_round_trip_rich(void **state)
{
    (void)state;
    kn_model *m = build_rich_model();
    assert_int_equal(kn_graph_verify(m->graph), KN_OK);
    kn_model *m2 = round_trip(m);
    assert_int_equal(kn_graph_verify(m2->graph), KN_OK);

    /* the parsed model has the same structure and exact values */
    kn_graph *g = m2->graph;
    assert_int_equal(m2->ir_version, 9);
    assert_string_equal(m2->producer_name, "unit \"test\"");
    assert_int_equal(kn_model_opset(m2, "com.microsoft"), 1);
    assert_int_equal(g->n_inputs, 2);
    assert_string_equal(g->inputs[0]->shape.sym[0], "batch");
    assert_int_equal(g->inputs[0]->shape.dims[1], 4);
    assert_string_equal(g->inputs[1]->name, "onnx::cond");
    kn_value *w = kn_graph_lookup(g, "w");
    assert_non_null(w->const_data);
    assert_true(w->flags & KN_VALUE_INITIALIZER);
    assert_memory_equal(w->const_data->data, m->graph->values[2]->const_data->data, 16);
    kn_node *n = g->nodes[0];
    assert_string_equal(n->name, "gemm 0");
    assert_null(n->inputs[2]);
    assert_int_equal(n->n_attrs, 9);
    assert_int_equal(kn_attr_int(n, "i", 0), INT64_MIN);
    assert_true(kn_attr_float(n, "f", 0) == 0.1f);
    const kn_attr *s = kn_node_attr(n, "s");
    assert_int_equal(s->s_len, 8);
    assert_memory_equal(s->s, "a\0b\"\\\n\xc3\xa9", 8);
    const float *fl;
    assert_int_equal(kn_attr_floats(n, "fs", &fl), 3);
    assert_true(signbit(fl[1]));
    assert_true(fl[2] == 1.17549435e-38f);
    assert_int_equal(kn_node_attr(n, "empty_ints")->kind, KN_ATTR_INTS);
    assert_int_equal(kn_node_attr(n, "empty_ints")->n, 0);
    assert_int_equal(kn_node_attr(n, "ts")->tensors[0]->dtype, KN_F16);
    kn_node *iff = g->nodes[1];
    assert_null(iff->outputs[1]);
    const kn_attr *tb = kn_node_attr(iff, "then_branch");
    assert_ptr_equal(tb->g->parent, g);
    assert_ptr_equal(tb->g->parent_node, iff);
    /* the subgraph's reference resolves to the outer value itself */
    assert_ptr_equal(tb->g->nodes[0]->inputs[0], n->outputs[0]);
    assert_int_equal(n->outputs[0]->n_users, 1);
    kn_model_free(m2);
    kn_model_free(m);
}

static void test_float_exactness(void **state)
{
    (void)state;
    /* random-ish bit patterns of every finite float class survive the trip */
    kn_model *m = kn_model_create();
    enum { N = 64 };
    float vals[N];
    uint32_t u = 12345;
    for (int i = 0; i < N; i++) {
        u = u * 1664525u + 1013904223u;
        uint32_t bits = u;
        if (((bits >> 23) & 0xff) == 0xff) bits &= ~(1u << 30); /* no inf/nan */
        memcpy(&vals[i], &bits, 4);
    }
    int64_t d[1] = {N};
    kn_graph_add_constant(m->graph, "c", mk_tensor(KN_F32, 1, d, vals));
    double dv[3] = {0.1, 1.0 / 3.0, 5e-324};
    int64_t d3[1] = {3};
    kn_graph_add_constant(m->graph, "d", mk_tensor(KN_F64, 1, d3, dv));
    kn_model *m2 = round_trip(m);
    assert_memory_equal(kn_graph_lookup(m2->graph, "c")->const_data->data, vals, sizeof vals);
    assert_memory_equal(kn_graph_lookup(m2->graph, "d")->const_data->data, dv, sizeof dv);
    kn_model_free(m2);
    kn_model_free(m);
}

static void test_summary_and_placeholders(void **state)
{
    (void)state;
    kn_model *m = kn_model_create();
    int64_t d[2] = {20, 20};
    kn_tensor *t = mk_tensor(KN_F32, 2, d, NULL);
    ((float *)t->data)[7] = 1.0f;
    kn_graph_add_constant(m->graph, "big", t);
    kn_graph_add_output(m->graph, kn_graph_lookup(m->graph, "big"));
    char *text = NULL;
    assert_int_equal(kn_ir_print_string(m, NULL, &text), KN_OK);
    assert_non_null(strstr(text, "%big = const f32[20,20] {... fnv1a="));

    kn_model *m2 = NULL;
    assert_int_not_equal(kn_ir_parse(text, "s.kir", &m2), KN_OK);
    assert_null(m2);
    assert_non_null(strstr(kn_last_error(), "s.kir:3:27: constant data was printed as a summary"));

    assert_int_equal(kn_ir_parse_ex(text, "s.kir", KN_IR_PARSE_PLACEHOLDERS, &m2), KN_OK);
    kn_tensor *p = kn_graph_lookup(m2->graph, "big")->const_data;
    assert_int_equal(p->rank, 2);
    assert_int_equal(p->dims[1], 20);
    assert_true(((float *)p->data)[7] == 0.0f);
    /* same structure; only the hash differs */
    char *text2 = print_str(m2, KN_IR_INLINE_DEFAULT);
    assert_int_equal(strlen(text2), strlen(text));
    assert_string_not_equal(text2, text);
    /* the same content always gives the same hash */
    char *text3 = print_str(m, KN_IR_INLINE_DEFAULT);
    assert_string_equal(text3, text);
    free(text);
    free(text2);
    free(text3);
    kn_model_free(m2);
    kn_model_free(m);
}

static void test_print_graph_and_file(void **state)
{
    (void)state;
    kn_model *m = build_rich_model();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kn_graph *br = kn_node_attr(m->graph->nodes[1], "then_branch")->g;
    assert_int_equal(kn_ir_print_graph(br, NULL, 2, f), KN_OK);
    fclose(f);
    assert_string_equal(buf, "  graph then() {\n    %inner:0 = Add(%\"gemm 0:0\", %x) #\"inner\"\n"
                             "    return %inner:0\n  }\n");
    free(buf);

    char path[] = "/tmp/kiln_ir_text_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_int_equal(kn_ir_print_ex(m, NULL, f), KN_OK);
    fclose(f);
    kn_model *m2 = NULL;
    assert_int_equal(kn_ir_parse_file(path, 0, &m2), KN_OK);
    assert_int_equal(m2->graph->n_nodes, 2);
    kn_model_free(m2);
    remove(path);
    assert_int_equal(kn_ir_parse_file("/nonexistent/x.kir", 0, &m2), KN_ERR_IO);
    assert_non_null(strstr(kn_last_error(), "/nonexistent/x.kir: cannot open"));
    kn_model_free(m);
}


/* ---- random graphs ------------------------------------------------------ */

static uint32_t rnd(uint32_t *r)
{
    *r = *r * 1664525u + 1013904223u;
    return *r >> 8;
}

/* Fills g with n random nodes over its visible values, random attributes of
 * every kind, and (depth permitting) If nodes with random bodies. */
static void random_graph(kn_graph *g, uint32_t *r, int n, int depth)
{
    kn_arena *ar = &g->model->arena;
    static const kn_op ops[] = {KN_OP_Add, KN_OP_Relu, KN_OP_Concat, KN_OP_Clip, KN_OP_Split, KN_OP_Dropout};
    kn_value *pool[64];
    int np = 0;
    /* visible values: g's and its ancestors', except the outputs of the
     * node that holds each subgraph (they do not exist yet inside it) */
    const kn_node *owner = NULL;
    for (const kn_graph *s = g; s && np < 32; owner = s->parent_node, s = s->parent)
        for (int i = 0; i < s->n_values && np < 32; i++)
            if ((!owner || s->values[i]->producer != owner) &&
                (!s->values[i]->producer || s->values[i]->producer->outputs[s->values[i]->producer_index] == s->values[i]))
                pool[np++] = s->values[i];
    if (!np) pool[np++] = kn_graph_add_input(g, NULL, KN_F32, NULL);
    for (int k = 0; k < n; k++) {
        kn_op op = ops[rnd(r) % 6];
        int nin = op == KN_OP_Concat ? 1 + (int)(rnd(r) % 4) : op == KN_OP_Add ? 2 : op == KN_OP_Clip ? 3 : 1;
        int nout = op == KN_OP_Split ? 1 + (int)(rnd(r) % 3) : op == KN_OP_Dropout ? 2 : 1;
        kn_value *ins[4];
        for (int i = 0; i < nin; i++) ins[i] = (op == KN_OP_Clip && i && rnd(r) % 2) ? NULL : pool[rnd(r) % (unsigned)np];
        kn_node *nd = kn_node_create(g, op, NULL, nin, ins, nout);
        assert_non_null(nd);
        if (op == KN_OP_Dropout && rnd(r) % 2) nd->outputs[1] = NULL;
        for (int i = 0; i < nout; i++) {
            kn_value *v = nd->outputs[i];
            if (!v) continue;
            if (rnd(r) % 2) {
                v->dtype = (kn_dtype)(1 + rnd(r) % 13);
                if (!kn_dtype_info(v->dtype)->name) v->dtype = KN_I64;
                v->shape.rank = (int)(rnd(r) % 4);
                for (int j = 0; j < v->shape.rank; j++) {
                    v->shape.dims[j] = rnd(r) % 3 ? (int64_t)(rnd(r) % 100) : -1;
                    if (v->shape.dims[j] < 0 && rnd(r) % 2) v->shape.sym[j] = rnd(r) % 2 ? "batch" : "seq len";
                }
            }
            if (np < 64) pool[np++] = v;
        }
        char name[32];
        for (int a = (int)(rnd(r) % 4); a > 0; a--) {
            snprintf(name, sizeof name, "a%d", a);
            kn_attr *at = kn_node_add_attr(nd, name, (kn_attr_kind)(1 + rnd(r) % 8));
            uint32_t bits = rnd(r) * 2654435761u;
            switch (at->kind) {
            case KN_ATTR_FLOAT: memcpy(&at->f, &bits, 4); if (isnan(at->f)) at->f = 0.5f; break;
            case KN_ATTR_INT: at->i = (int64_t)bits - (1ll << 31); break;
            case KN_ATTR_STRING: at->s = "s\x01\"", at->s_len = 3; break;
            case KN_ATTR_TENSOR: {
                int64_t d[1] = {(int64_t)(rnd(r) % 5)};
                at->t = kn_model_adopt_tensor(g->model, mk_tensor(KN_I32, 1, d, NULL));
                break;
            }
            case KN_ATTR_GRAPH:
                if (depth > 0) {
                    at->g = kn_graph_create_sub(g, "body");
                    at->g->parent_node = nd;
                    random_graph(at->g, r, 3, depth - 1);
                    kn_graph_add_output(at->g, at->g->nodes[at->g->n_nodes - 1]->outputs[0]);
                } else {
                    at->kind = KN_ATTR_INTS;
                }
                break;
            case KN_ATTR_FLOATS:
                at->n = (int)(rnd(r) % 3);
                at->floats = kn_arena_alloc(ar, sizeof(float) * 3);
                for (int j = 0; j < at->n; j++) at->floats[j] = (float)rnd(r) / 7.0f;
                break;
            case KN_ATTR_INTS:
                at->n = (int)(rnd(r) % 3);
                at->ints = kn_arena_alloc(ar, sizeof(int64_t) * 3);
                for (int j = 0; j < at->n; j++) at->ints[j] = (int64_t)rnd(r) - 5000000;
                break;
            default: at->kind = KN_ATTR_STRINGS; break;
            }
        }
    }
    kn_graph_add_output(g, pool[np - 1]);
}

static void test_round_trip_random(void **state)
{
    (void)state;
    for (uint32_t seed = 1; seed <= 40; seed++) {
        uint32_t r = seed;
        kn_model *m = kn_model_create();
        kn_model_set_opset(m, "", 17);
        for (int i = 0; i < 3; i++) {
            kn_shape s = {2, {-1, 4}, {"batch", NULL}};
            kn_graph_add_input(m->graph, NULL, KN_F32, &s);
        }
        random_graph(m->graph, &r, 25, 2);
        if (kn_graph_verify(m->graph)) fail_msg("seed %u: %s", seed, kn_last_error());
        kn_model *m2 = round_trip(m);
        if (kn_graph_verify(m2->graph)) fail_msg("seed %u (parsed): %s", seed, kn_last_error());
        assert_int_equal(m2->graph->n_nodes, m->graph->n_nodes);
        kn_model_free(m2);
        kn_model_free(m);
    }
}

/* ---- parser errors ------------------------------------------------------ */

typedef struct bad_case {
    const char *text;
    const char *error;
} bad_case;

#define HDR "kiln-ir v1\n"
static const bad_case k_bad[] = {
    {"", "t.kir:1:1: expected the header 'kiln-ir v1'"},
    {"kiln-ir v2\n", "t.kir:1:9: unsupported kiln-ir version 'v2' (this is v1)"},
    {HDR "opset ai 17\n", "t.kir:2:7: expected a quoted domain (\"\" for ONNX), found 'ai'"},
    {HDR "graph main(%x: f33) {\n  return\n}\n", "t.kir:2:16: unknown dtype 'f33'"},
    {HDR "graph main(%x: f32[2,-3]) {\n  return\n}\n", "t.kir:2:22: negative dimension -3"},
    {HDR "graph main(%x: f32[1,2,3,4,5,6,7,8,9]) {\n  return\n}\n", "t.kir:2:36: rank above the maximum of 8"},
    {HDR "graph main() {\n}\n", "t.kir:3:1: expected 'return' before the end of the graph, found '}'"},
    {HDR "graph main() {\n  %y = Relu(%x) #\"r\"\n  return %y\n}\n", "t.kir:3:13: value '%x' is not defined"},
    {HDR "graph main(%x) {\n  %y = Relu(%x)\n  %y = Neg(%x)\n  return %y\n}\n",
     "t.kir:4:8: node 'Neg_1' (Neg): value 'y' is defined more than once in graph 'main'"},
    {HDR "graph main(%x, %x) {\n  return\n}\n", "t.kir:2:16: value 'x' is defined more than once"},
    {HDR "graph main() {\n  %c = const f32[2] [1.0]\n  return %c\n}\n", "t.kir:3:25: 1 elements given, the shape needs 2"},
    {HDR "graph main() {\n  %c = const f32[1] [1.0, 2.0]\n  return %c\n}\n", "t.kir:3:27: more than 1 elements for a f32 tensor"},
    {HDR "graph main() {\n  %c = const i8[1] [300]\n  return %c\n}\n", "t.kir:3:21: element 300 out of range for i8"},
    {HDR "graph main() {\n  %c = const f32[100000,100000] [1.0]\n  return %c\n}\n",
     "t.kir:3:14: a f32 tensor of 10000000000 elements does not fit in the text"},
    {HDR "graph main() {\n  %c = const f32[4294967296,4294967296] {... fnv1a=0}\n  return %c\n}\n",
     "t.kir:3:14: the number of elements of this f32 tensor overflows"},
    {HDR "graph main() {\n  %c = const u4[1] [-1]\n  return %c\n}\n", "t.kir:3:21: element -1 out of range for u4"},
    {HDR "graph main() {\n  %c = const i32[1] [1.5]\n  return %c\n}\n", "t.kir:3:22: i32 element '1.5' is not an integer"},
    {HDR "graph main() {\n  %c = const f32[?] [1.0]\n  return %c\n}\n", "t.kir:3:18: expected a constant dimension, found '?'"},
    {HDR "graph main() {\n  %c = const f32 [1.0]\n  return %c\n}\n", "t.kir:3:19: expected a dimension, found '1.0'"},
    {HDR "graph main(%x) {\n  %y = Relu(%x\n  return %y\n}\n", "t.kir:4:3: expected ',', found 'return'"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) {a=1, a=2}\n  return %y\n}\n", "t.kir:3:23: attribute 'a' given twice"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) {a=[1, \"s\"]}\n  return %y\n}\n", "t.kir:3:24: list elements of different kinds"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) {a=[]}\n  return %y\n}\n",
     "t.kir:3:21: expected a list element (write an empty list as ints[], floats[], ...), found ']'"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) {a=constant}\n  return %y\n}\n", "t.kir:3:20: expected an attribute value"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) {a=\"open}\n  return %y\n}\n", "t.kir:3:20: unterminated string"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) {a=\"\\q\"}\n  return %y\n}\n", "t.kir:3:22: unknown escape '\\q' in string"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) {a=\"\\x4\"}\n  return %y\n}\n", "t.kir:3:22: expected two hex digits after \\x"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) {a=1.2.3}\n  return %y\n}\n", "t.kir:3:20: malformed number"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) #r\n  return %y\n}\n", "t.kir:3:18: expected a quoted node name after '#', found 'r'"},
    {HDR "graph main(%x) {\n  %y = Relu(%x) ; \n  return %y\n}\n", "t.kir:3:17: unexpected character ';'"},
    {HDR "graph main(%x) {\n  % = Relu(%x)\n  return %y\n}\n", "t.kir:3:3: expected a value name after '%'"},
    {HDR "graph main(%x) {\n  return %x\n}\n}\n", "t.kir:5:1: expected end of input after the main graph, found '}'"},
    {HDR "graph main(%x) {\n  %a, = Split(%x)\n  return %a\n}\n", "t.kir:3:7: expected an output (%name or _), found '='"},
    {HDR "graph main(%x) {\n  %y = If(%x) {g=graph b() {\n    return %nope\n  }}\n  return %y\n}\n",
     "t.kir:4:12: value '%nope' is not defined"},
    {HDR "graph main(%x: u8[] quant(scale=f32[] [1.0], bits=8)) {\n  return\n}\n",
     "t.kir:2:46: unknown quant parameter 'bits' (scale, zero_point, axis, block_size)"},
    {HDR "graph main(%x) {\n  [\n}\n", "t.kir:3:3: expected a statement (%name = ..., Op(...), or return), found '['"},
    {HDR "graph main(%x) {\n  %y = Relu(%x)\n  return %y", "t.kir:4:12: expected ',' or '}' after a graph output, found end of input"},
};

static void test_parse_errors(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        kn_model *m = (kn_model *)1;
        int st = kn_ir_parse(k_bad[i].text, "t.kir", &m);
        if (st == KN_OK) {
            print_message("case %zu parsed but should fail:\n%s\n", i, k_bad[i].text);
            kn_model_free(m);
            bad++;
            continue;
        }
        assert_null(m);
        if (!strstr(kn_last_error(), k_bad[i].error)) {
            print_message("case %zu: error\n  \"%s\"\ndoes not contain\n  \"%s\"\n", i, kn_last_error(), k_bad[i].error);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Whitespace and comments are free; the printer normalizes them. */
static void test_parse_free_form(void **state)
{
    (void)state;
    const char *text = "// leading comment\n  kiln-ir   v1 opset \"\" 17 graph main ( %x : f32 [ 2 , n ] ) {"
                       " %y :f32[2,n]=Relu(%x)#\"r\" // trailing\n return %y }  \n";
    kn_model *m = NULL;
    if (kn_ir_parse(text, NULL, &m)) fail_msg("%s", kn_last_error());
    char *out = print_str(m, -1);
    assert_string_equal(out, "kiln-ir v1\nopset \"\" 17\ngraph main(%x: f32[2,n]) {\n"
                             "  %y: f32[2,n] = Relu(%x) #\"r\"\n  return %y\n}\n");
    free(out);
    kn_model_free(m);
    /* an omitted node name is generated */
    assert_int_equal(kn_ir_parse("kiln-ir v1 graph g(%x) { %y = Relu(%x) return %y }", NULL, &m), KN_OK);
    assert_string_equal(m->graph->nodes[0]->name, "Relu_0");
    kn_model_free(m);
}

/* ---- golden files ------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_golden(void **state)
{
    (void)state;
    char dir[4096];
    const char *src = getenv("KILN_SRC");
    snprintf(dir, sizeof dir, "%s/tests/ir/golden", src ? src : "..");
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(dir, sizeof dir, "ir/golden"); /* ctest runs in tests/ */
        d = opendir(dir);
    }
    if (!d) fail_msg("golden directory not found (set KILN_SRC)");
    char *names[256];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 256;) {
        size_t len = strlen(e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".kir")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    assert_true(n >= 5);
    for (int i = 0; i < n; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *want = kn_test_read_file(path);
        assert_non_null(want);
        kn_model *m = NULL;
        if (kn_ir_parse_file(path, 0, &m)) fail_msg("%s", kn_last_error());
        if (kn_graph_verify(m->graph)) fail_msg("%s: verify: %s", names[i], kn_last_error());
        char *got = print_str(m, KN_IR_INLINE_DEFAULT);
        if (strcmp(got, kn_test_skip_comments(want)))
            fail_msg("%s: printed text differs from the file:\n%s", names[i], got);
        /* DOT output of every golden model is balanced too */
        char *dot = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&dot, &len);
        assert_int_equal(kn_ir_write_dot(m, f), KN_OK);
        fclose(f);
        assert_non_null(strstr(dot, "digraph"));
        free(dot);
        free(got);
        free(want);
        kn_model_free(m);
        free(names[i]);
    }
}


/* Mutated golden texts (bytes replaced, deleted, truncated) never crash the
 * parser; whatever parses prints stably and can be verified. */
static void check_mutant(const char *text)
{
    kn_model *m = NULL;
    if (kn_ir_parse_ex(text, "mut", KN_IR_PARSE_PLACEHOLDERS, &m)) {
        assert_null(m);
        assert_true(strncmp(kn_last_error(), "mut:", 4) == 0 || strstr(kn_last_error(), "mut:"));
        return;
    }
    (void)kn_graph_verify(m->graph);
    char *a = print_str(m, -1);
    kn_model *m2 = NULL;
    if (kn_ir_parse(a, "again", &m2)) fail_msg("reprint does not parse: %s\n%s", kn_last_error(), a);
    char *b = print_str(m2, -1);
    assert_string_equal(a, b);
    free(a);
    free(b);
    kn_model_free(m2);
    kn_model_free(m);
}

static void test_mutations(void **state)
{
    (void)state;
    static const char *files[] = {"basic.kir", "attrs.kir", "subgraph.kir", "names.kir", "dtypes.kir", "quant.kir"};
    static const char alphabet[] = "%_\"{}[](),=:#?-.0129aefx\\\n /";
    const char *src = getenv("KILN_SRC");
    uint32_t rng = 7;
    for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/ir/golden/%s", src ? src : "..", files[fi]);
        char *text = kn_test_read_file(path);
        if (!text) {
            snprintf(path, sizeof path, "ir/golden/%s", files[fi]);
            text = kn_test_read_file(path);
        }
        assert_non_null(text);
        size_t n = strlen(text);
        char *mut = malloc(n + 1);
        for (int k = 0; k < 600; k++) {
            memcpy(mut, text, n + 1);
            rng = rng * 1664525u + 1013904223u;
            size_t at = (rng >> 8) % n;
            switch (k % 3) {
            case 0: mut[at] = alphabet[(rng >> 4) % (sizeof alphabet - 1)]; break;
            case 1: memmove(mut + at, mut + at + 1, n - at); break;
            default: mut[at] = 0; break;
            }
            check_mutant(mut);
        }
        free(mut);
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_rich),
        cmocka_unit_test(test_float_exactness),
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_summary_and_placeholders),
        cmocka_unit_test(test_print_graph_and_file),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_free_form),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
