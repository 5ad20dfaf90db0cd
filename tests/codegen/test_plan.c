/* Unit tests of the static memory plan (codegen/cpu/plan.c): locations of
 * inputs, outputs and constants, arena reuse along a chain, aliasing of
 * reshape-like ops, fused ops written over their dying residual (in
 * place), and that no two values alive at the same time share arena bytes
 * otherwise. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cg.h"
#include "fused_int.h"
#include "text.h"

static kn_model *new_model(void)
{
    kn_model *m = kn_model_create();
    assert_non_null(m);
    assert_int_equal(kn_model_set_opset(m, "", 17), 0);
    return m;
}

static kn_value *input(kn_model *m, const char *name, int64_t n)
{
    kn_shape s = {.rank = 1, .dims = {n}};
    kn_value *v = kn_graph_add_input(m->graph, name, KN_F32, &s);
    assert_non_null(v);
    return v;
}

static kn_value *constant(kn_model *m, const char *name, kn_dtype dt, int64_t n, const void *data)
{
    kn_tensor *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(kn_tensor_alloc(t, dt, 1, &n), 0);
    if (data) memcpy(t->data, data, t->nbytes);
    kn_value *v = kn_graph_add_constant(m->graph, name, t);
    assert_non_null(v);
    return v;
}

static kn_node *unary(kn_model *m, kn_op op, const char *name, kn_value *x)
{
    kn_node *n = kn_node_create(m->graph, op, name, 1, &x, 1);
    assert_non_null(n);
    return n;
}

/* True if fused node n writes its output over a, its residual (in place). */
static bool written_over(const kn_plan *p, const kn_node *n, const kn_value *a)
{
    bool takes_residual = n->op == KN_OP_FusedConv || n->op == KN_OP_FusedMatMul || n->op == KN_OP_QConv ||
                          n->op == KN_OP_QMatMul;
    return takes_residual && kn_node_input(n, KN_FUSED_RESIDUAL) == a &&
           p->where[n->outputs[0]->id].offset == p->where[a->id].offset;
}

/* Every pair of arena values whose live ranges overlap must not share bytes. */
static void check_no_overlap(const kn_graph *g, const kn_plan *p)
{
    int nn = g->n_nodes;
    for (int i = 0; i < nn; i++)
        for (int k = 0; k < g->nodes[i]->n_outputs; k++) {
            const kn_value *a = g->nodes[i]->outputs[k];
            if (!a || p->where[a->id].loc != KN_LOC_ARENA) continue;
            assert_int_equal(p->where[a->id].offset % 64, 0);
            for (int j = i + 1; j < nn; j++)
                for (int l = 0; l < g->nodes[j]->n_outputs; l++) {
                    const kn_value *b = g->nodes[j]->outputs[l];
                    if (!b || p->where[b->id].loc != KN_LOC_ARENA) continue;
                    if (p->where[a->id].offset == p->where[b->id].offset && kn_plan_is_alias(p, g->nodes[j]))
                        continue;
                    /* in place: b is written over a, its residual, which no later node reads */
                    if (written_over(p, g->nodes[j], a)) {
                        for (int u = j + 1; u < nn; u++)
                            for (int q = 0; q < g->nodes[u]->n_inputs; q++)
                                if (g->nodes[u]->inputs[q] == a) fail_msg("'%s' is read after '%s' took its bytes",
                                                                          a->name, b->name);
                        continue;
                    }
                    /* a is alive at node j if a user of a (or of its aliases) comes at or after j */
                    bool alive = false;
                    for (int u = j; u < nn && !alive; u++)
                        for (int q = 0; q < g->nodes[u]->n_inputs; q++) {
                            const kn_value *in = g->nodes[u]->inputs[q];
                            if (in && p->where[in->id].loc == KN_LOC_ARENA &&
                                p->where[in->id].offset == p->where[a->id].offset && in->id != b->id &&
                                (in == a || (in->producer && kn_plan_is_alias(p, in->producer))))
                                alive = true;
                        }
                    if (!alive) continue;
                    int64_t a0 = p->where[a->id].offset, b0 = p->where[b->id].offset;
                    int64_t a1 = a0 + (int64_t)kn_dtype_nbytes(a->dtype, (size_t)kn_cg_numel(a));
                    int64_t b1 = b0 + (int64_t)kn_dtype_nbytes(b->dtype, (size_t)kn_cg_numel(b));
                    if (a0 < b1 && b0 < a1) fail_msg("'%s' and '%s' overlap while both alive", a->name, b->name);
                }
        }
}

/* x → relu ×5 → y: three intermediates alive two at a time. */
static void test_chain_reuse(void **state)
{
    (void)state;
    kn_model *m = new_model();
    kn_value *v = input(m, "x", 256);
    const char *names[] = {"r0", "r1", "r2", "r3", "r4"};
    for (int i = 0; i < 5; i++) v = unary(m, KN_OP_Relu, names[i], v)->outputs[0];
    assert_int_equal(kn_graph_add_output(m->graph, v), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    kn_plan p;
    assert_int_equal(kn_plan_build(m->graph, &p), 0);
    const kn_graph *g = m->graph;
    assert_int_equal(p.where[g->inputs[0]->id].loc, KN_LOC_INPUT);
    assert_int_equal(p.where[g->inputs[0]->id].offset, 0);
    assert_int_equal(p.where[v->id].loc, KN_LOC_OUTPUT);
    assert_int_equal(p.where[v->id].offset, 0);
    for (int i = 0; i < 4; i++) assert_int_equal(p.where[g->nodes[i]->outputs[0]->id].loc, KN_LOC_ARENA);
    assert_int_equal(p.intermediate_bytes, 4 * 1024);
    assert_int_equal(p.arena_bytes, 2 * 1024);
    check_no_overlap(g, &p);
    kn_plan_free(&p);
    kn_model_free(m);
}

/* relu → reshape (alias) → relu; a reshape that is a graph output is not an alias. */
static void test_alias(void **state)
{
    (void)state;
    kn_model *m = new_model();
    int64_t shape[2] = {8, 8};
    kn_value *x = input(m, "x", 64), *sh = constant(m, "shape", KN_I64, 2, shape);
    kn_value *a = unary(m, KN_OP_Relu, "relu0", x)->outputs[0];
    kn_value *ins[2] = {a, sh};
    kn_node *rs = kn_node_create(m->graph, KN_OP_Reshape, "reshape0", 2, ins, 1);
    kn_node *r1 = unary(m, KN_OP_Relu, "relu1", rs->outputs[0]);
    kn_node *r2 = unary(m, KN_OP_Relu, "relu2", r1->outputs[0]);
    ins[0] = r2->outputs[0];
    kn_node *rs_out = kn_node_create(m->graph, KN_OP_Reshape, "reshape1", 2, ins, 1);
    assert_int_equal(kn_graph_add_output(m->graph, rs_out->outputs[0]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    kn_plan p;
    assert_int_equal(kn_plan_build(m->graph, &p), 0);
    assert_true(kn_plan_is_alias(&p, rs));
    assert_false(kn_plan_is_alias(&p, rs_out));
    assert_false(kn_plan_is_alias(&p, r1));
    assert_int_equal(p.where[rs->outputs[0]->id].offset, p.where[a->id].offset);
    assert_int_equal(p.where[rs_out->outputs[0]->id].loc, KN_LOC_OUTPUT);
    /* a (through its alias) is read by relu1, so relu1's output needs other bytes */
    assert_int_not_equal(p.where[r1->outputs[0]->id].offset, p.where[a->id].offset);
    assert_int_equal(p.weights_bytes, 64);
    check_no_overlap(m->graph, &p);
    kn_plan_free(&p);
    kn_model_free(m);
}

/* Constants: 64-byte aligned, copied into the blob, shared data stored once;
 * an unused constant is left out; a Dropout with a mask output is no alias. */
static void test_constants_and_dropout(void **state)
{
    (void)state;
    kn_model *m = new_model();
    float w[3] = {1, 2, 3}, w2[5] = {4, 5, 6, 7, 8};
    kn_value *x = input(m, "x", 3);
    kn_value *c1 = constant(m, "c1", KN_F32, 3, w), *c2 = constant(m, "c2", KN_F32, 5, w2);
    constant(m, "unused", KN_F32, 100, NULL);
    kn_tensor *view = malloc(sizeof *view);
    assert_non_null(view);
    int64_t three = 3;
    assert_int_equal(kn_tensor_view(view, c1->const_data, 1, &three), 0);
    kn_value *c1b = kn_graph_add_constant(m->graph, "c1_again", view);
    assert_non_null(c1b);
    kn_value *ins[2] = {x, c1};
    kn_node *add = kn_node_create(m->graph, KN_OP_Add, "add0", 2, ins, 1);
    ins[0] = add->outputs[0], ins[1] = c1b;
    kn_node *add2 = kn_node_create(m->graph, KN_OP_Add, "add1", 2, ins, 1);
    kn_node *dr = kn_node_create(m->graph, KN_OP_Dropout, "drop0", 1, add2->outputs, 2);
    kn_node *r = unary(m, KN_OP_Relu, "relu0", dr->outputs[0]);
    assert_int_equal(kn_graph_add_output(m->graph, r->outputs[0]), 0);
    assert_int_equal(kn_graph_add_output(m->graph, dr->outputs[1]), 0);
    assert_int_equal(kn_graph_add_output(m->graph, c2), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    kn_plan p;
    assert_int_equal(kn_plan_build(m->graph, &p), 0);
    assert_int_equal(p.where[c1->id].loc, KN_LOC_WEIGHTS);
    assert_int_equal(p.where[c1b->id].loc, KN_LOC_WEIGHTS);
    assert_int_equal(p.where[c1b->id].offset, p.where[c1->id].offset);
    assert_int_equal(p.where[c2->id].loc, KN_LOC_WEIGHTS); /* copied to its output by run */
    assert_int_equal(p.where[c2->id].offset % 64, 0);
    assert_int_equal(p.weights_bytes, 128);
    assert_memory_equal(p.weights + p.where[c1->id].offset, w, sizeof w);
    assert_memory_equal(p.weights + p.where[c2->id].offset, w2, sizeof w2);
    assert_false(kn_plan_is_alias(&p, dr));
    assert_int_equal(p.where[dr->outputs[1]->id].loc, KN_LOC_OUTPUT);
    assert_int_equal(p.where[dr->outputs[1]->id].offset, 1);
    check_no_overlap(m->graph, &p);
    kn_plan_free(&p);
    kn_model_free(m);
}

/* A dynamic shape is refused with the value's name. */
static void test_dynamic_refused(void **state)
{
    (void)state;
    kn_model *m = new_model();
    kn_shape s = {.rank = 1, .dims = {-1}};
    kn_value *x = kn_graph_add_input(m->graph, "x", KN_F32, &s);
    assert_int_equal(kn_graph_add_output(m->graph, unary(m, KN_OP_Relu, "r", x)->outputs[0]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    kn_plan p;
    assert_int_not_equal(kn_plan_build(m->graph, &p), 0);
    assert_non_null(strstr(kn_last_error(), "'x'"));
    assert_null(p.where);
    kn_model_free(m);
}

/* A value sized by data (NonZero) and what is computed from it get session
 * slots, not arena bytes; a Reshape of it is not an alias. */
static void test_dynamic_slots(void **state)
{
    (void)state;
    kn_model *m = new_model();
    kn_value *x = input(m, "x", 6);
    kn_node *r = unary(m, KN_OP_Relu, "r", x);
    kn_node *nz = unary(m, KN_OP_NonZero, "nz", r->outputs[0]);
    kn_node *fl = unary(m, KN_OP_Flatten, "fl", nz->outputs[0]);
    kn_node *neg = unary(m, KN_OP_Neg, "neg", fl->outputs[0]);
    assert_int_equal(kn_graph_add_output(m->graph, neg->outputs[0]), 0);
    assert_int_equal(kn_graph_infer(m->graph), 0);
    kn_plan p;
    if (kn_plan_build(m->graph, &p)) fail_msg("%s", kn_last_error());
    assert_int_equal(p.n_slots, 3);
    assert_int_equal(p.where[r->outputs[0]->id].loc, KN_LOC_ARENA);
    const kn_value *dyn[3] = {nz->outputs[0], fl->outputs[0], neg->outputs[0]};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(p.where[dyn[i]->id].loc, KN_LOC_DYNAMIC);
        assert_int_equal(p.where[dyn[i]->id].offset, i);
    }
    assert_false(kn_plan_is_alias(&p, fl));
    kn_plan_free(&p);
    kn_model_free(m);
}

static kn_model *parse(const char *text)
{
    kn_model *m = NULL;
    if (kn_ir_parse_ex(text, "test.kir", KN_IR_PARSE_PLACEHOLDERS, &m)) fail_msg("parse: %s", kn_last_error());
    assert_int_equal(kn_graph_toposort(m->graph), KN_OK);
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    return m;
}

static const kn_node *node_named(const kn_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i]->name, name)) return g->nodes[i];
    fail_msg("no node '%s'", name);
    return NULL;
}

/* Whether each named node writes its output over its residual, as want[]
 * says; where it does, the residual's live range ends before the output's
 * begins (the profile's buffers). */
static void check_in_place(const kn_graph *g, const kn_plan *p, const char *const *names, const bool *want, int n)
{
    for (int i = 0; i < n; i++) {
        const kn_node *nd = node_named(g, names[i]);
        const kn_value *r = kn_node_input(nd, KN_FUSED_RESIDUAL), *y = nd->outputs[0];
        bool same = p->where[r->id].loc == KN_LOC_ARENA && p->where[y->id].loc == KN_LOC_ARENA &&
                    p->where[r->id].offset == p->where[y->id].offset;
        if (same != want[i]) fail_msg("%s: in place %d, expected %d", names[i], same, want[i]);
        if (same) assert_true(p->live_last[r->id] < p->live_first[y->id]);
    }
}

/* A fused MatMul writes its output over its residual when the residual dies
 * there (mm1 over h); not when a later node reads the residual (mm2: h2 is
 * read by n2), when the residual is also the product's operand (mm3 over
 * q), or when it is a graph input (mm4 over x). */
static void test_in_place_residual(void **state)
{
    (void)state;
    kn_model *m = parse("kiln-ir v1\nopset \"\" 20\nopset \"kiln\" 1\n"
                        "graph main(%x: f32[4,8]) {\n"
                        "  %w = const f32[8,8] {... fnv1a=0}\n"
                        "  %h: f32[4,8] = Sigmoid(%x) #\"h\"\n"
                        "  %y1: f32[4,8] = kiln::FusedMatMul(%x, %w, _, %h) {post_ops=[\"Add\"], post_alpha=[0.0], "
                        "post_beta=[0.0]} #\"mm1\"\n"
                        "  %h2: f32[4,8] = Neg(%y1) #\"h2\"\n"
                        "  %y2: f32[4,8] = kiln::FusedMatMul(%y1, %w, _, %h2) {post_ops=[\"Add\"], post_alpha=[0.0], "
                        "post_beta=[0.0]} #\"mm2\"\n"
                        "  %n2: f32[4,8] = Add(%y2, %h2) #\"n2\"\n"
                        "  %q: f32[4,8] = Neg(%n2) #\"q\"\n"
                        "  %y3: f32[4,8] = kiln::FusedMatMul(%q, %w, _, %q) {post_ops=[\"Add\"], post_alpha=[0.0], "
                        "post_beta=[0.0]} #\"mm3\"\n"
                        "  %y4: f32[4,8] = kiln::FusedMatMul(%y3, %w, _, %x) {post_ops=[\"Add\"], post_alpha=[0.0], "
                        "post_beta=[0.0]} #\"mm4\"\n"
                        "  %o: f32[4,8] = Neg(%y4) #\"o\"\n"
                        "  return %o\n}\n");
    const kn_graph *g = m->graph;
    kn_plan p;
    if (kn_plan_build(g, &p)) fail_msg("%s", kn_last_error());
    const char *names[] = {"mm1", "mm2", "mm3", "mm4"};
    bool want[] = {true, false, false, false};
    check_in_place(g, &p, names, want, 4);
    check_no_overlap(g, &p);
    kn_plan_free(&p);
    kn_model_free(m);
}

/* The integer ops too: a u8 QMatMul writes over its dying u8 residual (m1),
 * not over an s8 one (m2: the sum post-op reads dst in dst's type), nor an
 * f32 output over a u8 residual (m3). */
static void test_in_place_residual_int8(void **state)
{
    (void)state;
    const char *q = "{x_zero_point=0, y_zero_point=0, y_dtype=%d, post_ops=[\"Add\"], post_alpha=[1.0], "
                    "post_beta=[0.0]}";
    char a1[160], a3[160];
    snprintf(a1, sizeof a1, q, 2);
    snprintf(a3, sizeof a3, q, 1);
    char text[2048];
    snprintf(text, sizeof text,
             "kiln-ir v1\nopset \"\" 20\nopset \"kiln\" 1\n"
             "graph main(%%x: u8[4,8], %%r: u8[4,8], %%t: i8[4,8]) {\n"
             "  %%w = const i8[8,8] {... fnv1a=0}\n"
             "  %%s = const f32[1] {... fnv1a=0}\n"
             "  %%h: u8[4,8] = Identity(%%r) #\"h\"\n"
             "  %%hs: i8[4,8] = Identity(%%t) #\"hs\"\n"
             "  %%y1: u8[4,8] = kiln::QMatMul(%%x, %%w, _, %%h, %%s) %s #\"m1\"\n"
             "  %%y2: u8[4,8] = kiln::QMatMul(%%y1, %%w, _, %%hs, %%s) %s #\"m2\"\n"
             "  %%h3: u8[4,8] = Identity(%%y2) #\"h3\"\n"
             "  %%y3: f32[4,8] = kiln::QMatMul(%%x, %%w, _, %%h3, %%s) %s #\"m3\"\n"
             "  %%o: f32[4,8] = Neg(%%y3) #\"o\"\n"
             "  return %%o\n}\n",
             a1, a1, a3);
    kn_model *m = parse(text);
    const kn_graph *g = m->graph;
    kn_plan p;
    if (kn_plan_build(g, &p)) fail_msg("%s", kn_last_error());
    const char *names[] = {"m1", "m2", "m3"};
    bool want[] = {true, false, false};
    check_in_place(g, &p, names, want, 3);
    check_no_overlap(g, &p);
    kn_plan_free(&p);
    kn_model_free(m);
}

/* A value an If's branch reads (a capture) lives until the If: without
 * that, its bytes went to the next value while the branch still had to
 * read them (a mutation of plan.c's find_last_uses survived every test). */
static void test_capture_lives_until_if(void **state)
{
    (void)state;
    kn_model *m = parse("kiln-ir v1\nopset \"\" 17\n"
                        "graph main(%x: f32[64], %cond: bool[]) {\n"
                        "  %a: f32[64] = Relu(%x) #\"a\"\n"
                        "  %b: f32[64] = Neg(%x) #\"b\"\n"
                        "  %c: f32[64] = Neg(%b) #\"c\"\n"
                        "  %y: f32[64] = If(%cond) {then_branch=graph then_b() {\n"
                        "    %t: f32[64] = Add(%a, %c) #\"then_add\"\n"
                        "    return %t\n"
                        "  }, else_branch=graph else_b() {\n"
                        "    return %c\n"
                        "  }} #\"if0\"\n"
                        "  return %y\n}\n");
    const kn_graph *g = m->graph;
    kn_plan p;
    if (kn_plan_build(g, &p)) fail_msg("%s", kn_last_error());
    const kn_node *a = node_named(g, "a"), *b = node_named(g, "b"), *iff = node_named(g, "if0");
    int if_index = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i] == iff) if_index = i;
    assert_true(if_index >= 0);
    const kn_value *av = a->outputs[0], *bv = b->outputs[0];
    assert_int_equal(p.where[av->id].loc, KN_LOC_ARENA);
    assert_true(p.live_last[av->id] >= if_index);
    /* %b is written while %a waits for the If: they must not share bytes */
    assert_int_not_equal(p.where[bv->id].offset, p.where[av->id].offset);
    kn_plan_free(&p);
    kn_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_reuse),
        cmocka_unit_test(test_alias),
        cmocka_unit_test(test_in_place_residual),
        cmocka_unit_test(test_in_place_residual_int8),
        cmocka_unit_test(test_capture_lives_until_if),
        cmocka_unit_test(test_constants_and_dropout),
        cmocka_unit_test(test_dynamic_refused),
        cmocka_unit_test(test_dynamic_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
