/* Profiling records of a compiled model (codegen/cpu/profile_info.c) and
 * kn_session_profile (runtime/src/profile.c): a small Conv → Relu →
 * Reshape → MatMul → Add model with an input also returned as an output is
 * compiled; its steps must be the emitted nodes plus the output copy, with
 * FLOPs and bytes from the shapes; its buffers must never overlap in both
 * place and time; a step-by-step run must give the same outputs as
 * kn_session_run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cg.h"
#include "kiln/kiln.h"
#include "kiln/profile.h"

static char g_dir[256], g_so[300];

static kn_value *constant(kn_model *m, const char *name, kn_dtype dt, int rank, const int64_t *dims)
{
    kn_tensor *t = malloc(sizeof *t);
    assert_non_null(t);
    assert_int_equal(kn_tensor_alloc(t, dt, rank, dims), 0);
    for (int64_t i = 0; i < kn_tensor_numel(t); i++) {
        if (dt == KN_F32) ((float *)t->data)[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    }
    kn_value *v = kn_graph_add_constant(m->graph, name, t);
    assert_non_null(v);
    return v;
}

static kn_node *node(kn_model *m, kn_op op, const char *name, int n_in, kn_value **ins)
{
    kn_node *n = kn_node_create(m->graph, op, name, n_in, ins, 1);
    assert_non_null(n);
    return n;
}

/* x[1,3,8,8] → conv (4 filters 3x3, pad 1) → relu → reshape [1,256] → mm
 * [256,10] → add bias → y; outputs y and x (a copy at the end of run). */
static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/kiln-test-profile-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_so, sizeof g_so, "%s/p.so", g_dir);
    kn_model *m = kn_model_create();
    kn_model_set_opset(m, "", 17);
    kn_value *x = kn_graph_add_input(m->graph, "x", KN_F32, &(kn_shape){.rank = 4, .dims = {1, 3, 8, 8}});
    kn_value *ins[2] = {x, constant(m, "w", KN_F32, 4, (int64_t[]){4, 3, 3, 3})};
    kn_node *conv = node(m, KN_OP_Conv, "conv", 2, ins);
    kn_attr *pads = kn_node_add_attr(conv, "pads", KN_ATTR_INTS);
    pads->n = 4;
    pads->ints = kn_arena_memdup(&m->arena, (int64_t[]){1, 1, 1, 1}, 4 * sizeof(int64_t));
    kn_value *c = conv->outputs[0];
    kn_value *r = node(m, KN_OP_Relu, "relu", 1, &c)->outputs[0];
    kn_tensor *shape = malloc(sizeof *shape);
    kn_tensor_alloc(shape, KN_I64, 1, (int64_t[]){2});
    ((int64_t *)shape->data)[0] = 1, ((int64_t *)shape->data)[1] = 256;
    kn_value *rs_in[2] = {r, kn_graph_add_constant(m->graph, "shape", shape)};
    kn_value *flat = node(m, KN_OP_Reshape, "reshape", 2, rs_in)->outputs[0];
    kn_value *mm_in[2] = {flat, constant(m, "w2", KN_F32, 2, (int64_t[]){256, 10})};
    kn_value *mm = node(m, KN_OP_MatMul, "mm", 2, mm_in)->outputs[0];
    kn_value *add_in[2] = {mm, constant(m, "b", KN_F32, 1, (int64_t[]){10})};
    kn_value *y = node(m, KN_OP_Add, "add", 2, add_in)->outputs[0];
    kn_graph_add_output(m->graph, y);
    kn_graph_add_output(m->graph, x);
    int st = kn_graph_infer(m->graph);
    kn_compile_opts o = {.output = g_so, .opt_level = 2, .target = "native"};
    if (!st) st = kn_compile_cpu(m, &o);
    if (st) fprintf(stderr, "compile: %s\n", kn_last_error());
    kn_model_free(m);
    return st ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(g_so);
    rmdir(g_dir);
    return 0;
}

static const kn_abi_step *find_step(const kn_meta *m, const char *name)
{
    for (int i = 0; i < m->n_steps; i++)
        if (!strcmp(m->steps[i].name, name)) return &m->steps[i];
    return NULL;
}

/* Steps: the emitted nodes in order and the output copy; the alias emits none. */
static void test_steps(void **state)
{
    (void)state;
    kn_artifact *a;
    if (kn_artifact_open(g_so, &a)) fail_msg("%s", kn_last_error());
    const kn_meta *m = kn_artifact_meta(a);
    assert_int_equal(m->n_steps, 5);
    assert_int_equal(kn_artifact_descriptor(a)->n_step_fns, 5);
    static const char *const names[] = {"conv", "relu", "mm", "add", "(outputs)"};
    for (int i = 0; i < 5; i++) assert_string_equal(m->steps[i].name, names[i]);
    assert_null(find_step(m, "reshape"));
    const kn_abi_step *conv = find_step(m, "conv"), *mm = find_step(m, "mm"), *copy = find_step(m, "(outputs)");
    assert_string_equal(conv->op_type, "Conv");
    assert_int_equal(conv->flops, 2 * 4 * 8 * 8 * (3 * 3 * 3));
    assert_int_equal(conv->bytes_read, 4 * (3 * 8 * 8 + 4 * 3 * 3 * 3));
    assert_int_equal(conv->bytes_written, 4 * 4 * 8 * 8);
    assert_int_equal(mm->flops, 2 * 10 * 256);
    assert_int_equal(find_step(m, "relu")->flops, 256);
    assert_int_equal(copy->flops, 0);
    assert_int_equal(copy->bytes_read, 4 * 3 * 8 * 8);
    kn_artifact_close(a);
}

/* Buffers: inside the arena, and no two that live at the same step share bytes. */
static void test_buffers(void **state)
{
    (void)state;
    kn_artifact *a;
    if (kn_artifact_open(g_so, &a)) fail_msg("%s", kn_last_error());
    const kn_meta *m = kn_artifact_meta(a);
    assert_true(m->n_buffers >= 3); /* conv, relu, mm outputs at least */
    for (int i = 0; i < m->n_buffers; i++) {
        const kn_abi_buffer *p = &m->buffers[i];
        assert_true(p->offset + p->nbytes <= m->arena_bytes);
        for (int j = i + 1; j < m->n_buffers; j++) {
            const kn_abi_buffer *q = &m->buffers[j];
            bool same_time = p->first_step <= q->last_step && q->first_step <= p->last_step;
            bool same_place = p->offset < q->offset + q->nbytes && q->offset < p->offset + p->nbytes;
            if (same_time && same_place) fail_msg("buffers '%s' and '%s' overlap", p->name, q->name);
        }
    }
    /* relu's output is read through the reshape alias by mm (step 2) */
    bool found = false;
    for (int i = 0; i < m->n_buffers; i++)
        if (strstr(m->buffers[i].name, "relu")) {
            assert_int_equal(m->buffers[i].first_step, 1);
            assert_int_equal(m->buffers[i].last_step, 2);
            found = true;
        }
    assert_true(found);
    kn_artifact_close(a);
}

/* A step-by-step run computes what kn_session_run computes. */
static void test_profile_run(void **state)
{
    (void)state;
    kn_artifact *a;
    kn_session *s;
    if (kn_artifact_open(g_so, &a) || kn_session_create(a, &s)) fail_msg("%s", kn_last_error());
    float x[192], y1[10], y2[10], x1[192], x2[192];
    for (int i = 0; i < 192; i++) x[i] = (float)(i % 17) / 8.0f - 1.0f;
    const void *in[1] = {x};
    void *out1[2] = {y1, x1}, *out2[2] = {y2, x2};
    memset(y2, 0, sizeof y2), memset(x2, 0, sizeof x2);
    assert_int_equal(kn_session_run(s, in, out1), 0);
    int64_t ns[5];
    if (kn_session_profile(s, in, out2, 5, ns)) fail_msg("%s", kn_last_error());
    assert_memory_equal(y1, y2, sizeof y1);
    assert_memory_equal(x, x2, sizeof x);
    int64_t total = 0;
    for (int i = 0; i < 5; i++) {
        assert_true(ns[i] >= 0);
        total += ns[i];
    }
    assert_true(total > 0);
    assert_int_equal(kn_session_profile(s, in, out2, 4, ns), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "room for 4 step times, the model has 5 steps"));
    assert_int_equal(kn_session_profile(s, NULL, out2, 5, ns), KN_ERR_INVALID);
    kn_session_free(s);
    kn_artifact_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps),
        cmocka_unit_test(test_buffers),
        cmocka_unit_test(test_profile_run),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
