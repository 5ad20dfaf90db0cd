/* Unit tests of codegen/cpu/lower_movement.c: each case builds a one-node
 * model, lowers the node by hand into an LLVM function with the node
 * signature of cg.h (inputs/outputs as user buffers, constants in a weights
 * blob), optimizes it (O3, host CPU), runs it with MCJIT and compares with
 * the reference evaluator byte for byte (data movement is exact), checking
 * that nothing is written past the output. Runtime indices out of range must
 * give KN_ERR_INVALID and leave the output untouched. Set
 * KILN_TEST_DUMP_IR=1 to print each optimized module. (The harness follows
 * tests/codegen/test_lower_reduce.c.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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
        switch (t->dtype) {
        case KN_F32: ((float *)t->data)[i] = r; break;
        case KN_F64: ((double *)t->data)[i] = r; break;
        case KN_I32: ((int32_t *)t->data)[i] = (int32_t)lrintf(r); break;
        case KN_I64: ((int64_t *)t->data)[i] = (int64_t)lrintf(r); break;
        case KN_BOOL: ((uint8_t *)t->data)[i] = r > 0; break;
        case KN_F16: case KN_BF16: kn_store_f64(t->dtype, t->data, (size_t)i, r); break; /* no NaN payloads */
        default: /* any bit pattern moves the same */
            for (size_t b = 0; b < kn_dtype_size(t->dtype); b++) {
                rnd(c);
                ((uint8_t *)t->data)[(size_t)i * kn_dtype_size(t->dtype) + b] = (uint8_t)(c->seed >> 16);
            }
            break;
        }
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

/* Data movement is exact: every byte must match, and the byte past the end
 * must be untouched. */
static void check_exact(const kn_tensor *ref, const unsigned char *got, int out_index)
{
    if (ref->nbytes && memcmp(ref->data, got, ref->nbytes)) {
        for (size_t i = 0; i < ref->nbytes; i++)
            if (((const unsigned char *)ref->data)[i] != got[i])
                fail_msg("output %d byte %zu: got 0x%02x, expected 0x%02x", out_index, i, got[i],
                         ((const unsigned char *)ref->data)[i]);
    }
    if (got[ref->nbytes] != 0xcd) fail_msg("output %d: wrote past the end", out_index);
}

/* Infers, evaluates with the reference, lowers, JITs, runs and compares.
 * Returns the lowering's status (KN_ERR_UNSUPPORTED: nothing was run). */
static int tc_run_ex(tc *c, bool expect_bad)
{
    kn_graph *g = c->m->graph;
    if (kn_graph_infer(g)) fail_msg("inference: %s", kn_last_error());
    kn_tensor ref[4] = {{0}};
    int rst = kn_eval_model(c->m, c->n_rt, c->rt_names, c->rt, ref);
    if (expect_bad) {
        if (!rst) fail_msg("the reference accepted bad indices");
        for (int i = 0; i < c->n->n_outputs; i++) {
            int64_t nel = kn_cg_numel(c->n->outputs[i]);
            ref[i].nbytes = kn_dtype_nbytes(c->n->outputs[i]->dtype, (size_t)nel);
        }
    } else if (rst) {
        fail_msg("reference: %s", kn_last_error());
    }

    jit_node j;
    int st = jit_lower(&j, c->m, c->ins, c->n_ins, c->n, jit_find(kn_cg_lower_movement, c->n->op));
    if (st == KN_OK) {
        void *inputs[4], *outputs[4] = {0};
        for (int i = 0; i < c->n_rt; i++) inputs[i] = c->rt[i].data;
        for (int i = 0; i < c->n->n_outputs; i++) {
            outputs[i] = malloc(ref[i].nbytes + 1);
            assert_non_null(outputs[i]);
            memset(outputs[i], 0xcd, ref[i].nbytes + 1);
        }
        kn_error_clear();
        int rc = jit_call(&j, inputs, outputs);
        for (int i = 0; i < c->n->n_outputs; i++) {
            if (expect_bad) {
                if (rc != KN_ERR_INVALID) fail_msg("bad indices: status %d, expected %d", rc, KN_ERR_INVALID);
                if (!strstr(kn_last_error(), "node 'n0'") || !strstr(kn_last_error(), "out of range"))
                    fail_msg("bad indices: message '%s' does not name the node", kn_last_error());
                unsigned char *o = outputs[i];
                for (size_t k = 0; k <= ref[i].nbytes; k++)
                    if (o[k] != 0xcd) fail_msg("bad indices: output written at byte %zu", k);
            } else {
                assert_int_equal(rc, 0);
                check_exact(&ref[i], outputs[i], i);
            }
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

static int tc_run(tc *c) { return tc_run_ex(c, false); }

/* Runs c and requires that the node was generated (not left to the runtime). */
static void gen(tc *c) { assert_int_equal(tc_run(c), KN_OK); }

#define D(...) ((const int64_t[]){__VA_ARGS__})

static void test_copies(void **state)
{
    (void)state;
    static const kn_dtype dts[] = {KN_F32, KN_U8, KN_F16, KN_I64, KN_BOOL};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        tc *c = tc_new(13);
        tc_input(c, dts[i], 3, D(2, 3, 5), -3, 3);
        tc_const(c, KN_I64, 1, D(2), 0, 0, D(6, -1));
        tc_node(c, KN_OP_Reshape, 1);
        gen(c);
    }
    tc *c = tc_new(13);
    tc_input(c, KN_F32, 4, D(2, 3, 4, 5), -3, 3);
    tc_node(c, KN_OP_Flatten, 1);
    tc_int(c, "axis", 2);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_I32, 2, D(7, 9), -30, 30);
    tc_node(c, KN_OP_Identity, 1);
    gen(c);
    /* inference Dropout with its mask */
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(4, 6), -3, 3);
    tc_node(c, KN_OP_Dropout, 2);
    gen(c);
    /* packed 4-bit types are the runtime's */
    c = tc_new(21);
    tc_input(c, KN_INT4, 1, D(8), 0, 0);
    tc_node(c, KN_OP_Identity, 1);
    assert_int_equal(tc_run(c), KN_ERR_UNSUPPORTED);
}

static void transpose_case(kn_dtype dt, int rank, const int64_t *dims, const int64_t *perm)
{
    tc *c = tc_new(13);
    tc_input(c, dt, rank, dims, -50, 50);
    tc_node(c, KN_OP_Transpose, 1);
    if (perm) tc_ints(c, "perm", rank, perm);
    gen(c);
}

static void test_transpose(void **state)
{
    (void)state;
    transpose_case(KN_F32, 4, D(2, 3, 4, 5), D(0, 2, 3, 1));
    transpose_case(KN_F32, 4, D(2, 3, 4, 5), D(0, 3, 1, 2));
    transpose_case(KN_I64, 3, D(3, 4, 5), NULL);
    transpose_case(KN_F16, 4, D(2, 3, 4, 8), D(1, 0, 2, 3));
    transpose_case(KN_U8, 4, D(2, 3, 4, 8), D(0, 2, 1, 3));
    transpose_case(KN_I16, 2, D(17, 33), D(1, 0));
    transpose_case(KN_F64, 1, D(9), D(0));
    transpose_case(KN_F32, 5, D(1, 2, 1, 3, 4), D(4, 2, 0, 3, 1));
    /* big enough to be walked in blocks, with ragged edges and without */
    transpose_case(KN_F32, 3, D(3, 40, 24), D(0, 2, 1));
    transpose_case(KN_U8, 4, D(2, 19, 5, 35), D(0, 2, 3, 1));
    transpose_case(KN_F64, 4, D(2, 32, 3, 16), D(0, 2, 3, 1));
    transpose_case(KN_F16, 4, D(2, 16, 17, 18), D(3, 1, 0, 2));
}

static void test_concat_split(void **state)
{
    (void)state;
    for (int axis = -3; axis < 3; axis++) {
        tc *c = tc_new(13);
        tc_input(c, KN_F32, 3, D(2, 3, 4), -3, 3);
        int64_t d2[3] = {2, 3, 4};
        d2[(axis + 3) % 3] = 5;
        tc_input(c, KN_F32, 3, d2, -3, 3);
        tc_input(c, KN_F32, 3, D(2, 3, 4), -3, 3);
        int64_t d3[3] = {2, 3, 4};
        d3[(axis + 3) % 3] = 1;
        tc_input(c, KN_F32, 3, d3, -3, 3);
        tc_node(c, KN_OP_Concat, 1);
        tc_int(c, "axis", axis);
        gen(c);
    }
    tc *c = tc_new(13);
    tc_input(c, KN_I8, 2, D(3, 7), -3, 3);
    tc_input(c, KN_I8, 2, D(3, 0), -3, 3);
    tc_input(c, KN_I8, 2, D(3, 2), -3, 3);
    tc_node(c, KN_OP_Concat, 1);
    tc_int(c, "axis", 1);
    gen(c);
    /* uneven split given as an input (opset 13), equal parts, attribute (opset 11) */
    c = tc_new(13);
    tc_input(c, KN_I32, 3, D(2, 10, 3), -50, 50);
    tc_const(c, KN_I64, 1, D(3), 0, 0, D(2, 5, 3));
    tc_node(c, KN_OP_Split, 3);
    tc_int(c, "axis", 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(4, 12), -3, 3);
    tc_node(c, KN_OP_Split, 3);
    tc_int(c, "axis", -1);
    gen(c);
    c = tc_new(11);
    tc_input(c, KN_F16, 3, D(6, 2, 3), -3, 3);
    tc_node(c, KN_OP_Split, 2);
    tc_ints(c, "split", 2, D(1, 5));
    gen(c);
}

static void slice_case(kn_dtype dt, int rank, const int64_t *dims, int n, const int64_t *starts, const int64_t *ends,
                       const int64_t *axes, const int64_t *steps)
{
    tc *c = tc_new(13);
    tc_input(c, dt, rank, dims, -50, 50);
    int64_t dn = n;
    tc_const(c, KN_I64, 1, &dn, 0, 0, starts);
    tc_const(c, KN_I64, 1, &dn, 0, 0, ends);
    if (axes || steps) {
        if (axes) tc_const(c, KN_I64, 1, &dn, 0, 0, axes);
        else c->ins[c->n_ins++] = NULL;
    }
    if (steps) tc_const(c, KN_I64, 1, &dn, 0, 0, steps);
    tc_node(c, KN_OP_Slice, 1);
    gen(c);
}

static void test_slice(void **state)
{
    (void)state;
    slice_case(KN_F32, 3, D(4, 5, 6), 2, D(1, 0), D(3, -1), D(0, 2), NULL);
    slice_case(KN_F32, 3, D(4, 5, 6), 3, D(0, 1, 2), D(4, 5, 6), NULL, NULL);
    slice_case(KN_I64, 2, D(8, 9), 2, D(-1, 7), D(-100, 0), D(0, 1), D(-1, -2));
    slice_case(KN_U8, 2, D(8, 9), 1, D(1), D(1000), D(-1), D(3));
    slice_case(KN_F16, 4, D(2, 3, 8, 8), 2, D(2, 2), D(6, 6), D(2, 3), D(1, 1));
    slice_case(KN_I32, 2, D(5, 5), 1, D(4), D(2), D(0), NULL); /* empty */
    /* attributes before opset 10 */
    tc *c = tc_new(9);
    tc_input(c, KN_F32, 2, D(6, 7), -3, 3);
    tc_node(c, KN_OP_Slice, 1);
    tc_ints(c, "starts", 2, D(1, -3));
    tc_ints(c, "ends", 2, D(4, 100));
    gen(c);
}

static void test_gather(void **state)
{
    (void)state;
    /* constant indices: a scalar, an even sequence, an arbitrary list with negatives */
    tc *c = tc_new(13);
    tc_input(c, KN_F32, 3, D(4, 5, 6), -3, 3);
    tc_const(c, KN_I64, 0, NULL, 0, 0, D(-2));
    tc_node(c, KN_OP_Gather, 1);
    tc_int(c, "axis", 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_I16, 2, D(10, 3), -3, 3);
    tc_const(c, KN_I64, 1, D(3), 0, 0, D(1, 4, 7));
    tc_node(c, KN_OP_Gather, 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_F32, 3, D(2, 9, 4), -3, 3);
    tc_const(c, KN_I32, 2, D(2, 3), 0, 0, NULL);
    int32_t *iv = c->ins[1]->const_data->data;
    int32_t vals[6] = {0, -1, 3, 8, -9, 2};
    memcpy(iv, vals, sizeof vals);
    tc_node(c, KN_OP_Gather, 1);
    tc_int(c, "axis", -2);
    gen(c);
    /* runtime indices, int32 and int64, with negatives */
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(7, 16), -3, 3);
    kn_tensor *ind = tc_input(c, KN_I32, 2, D(2, 3), -6.4f, 6.4f);
    (void)ind;
    tc_node(c, KN_OP_Gather, 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_U8, 3, D(2, 3, 5), -3, 3);
    tc_input(c, KN_I64, 1, D(4), -4.4f, 4.4f);
    tc_node(c, KN_OP_Gather, 1);
    tc_int(c, "axis", 2);
    gen(c);
    /* an out-of-range runtime index: status, nothing written */
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(5, 4), -3, 3);
    kn_tensor *bad = tc_input(c, KN_I64, 1, D(3), 0, 4);
    ((int64_t *)bad->data)[1] = 5;
    tc_node(c, KN_OP_Gather, 1);
    assert_int_equal(tc_run_ex(c, true), KN_OK);
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(5, 4), -3, 3);
    bad = tc_input(c, KN_I32, 1, D(3), 0, 4);
    ((int32_t *)bad->data)[2] = -6;
    tc_node(c, KN_OP_Gather, 1);
    assert_int_equal(tc_run_ex(c, true), KN_OK);
}

static void test_gather_elements(void **state)
{
    (void)state;
    for (int axis = 0; axis < 3; axis++) {
        tc *c = tc_new(13);
        tc_input(c, KN_F32, 3, D(4, 5, 6), -3, 3);
        int64_t id[3] = {3, 4, 5};
        id[axis] = 7;
        tc_input(c, axis == 1 ? KN_I32 : KN_I64, 3, id, -3.4f, 3.4f);
        tc_node(c, KN_OP_GatherElements, 1);
        tc_int(c, "axis", axis);
        gen(c);
    }
    tc *c = tc_new(13);
    tc_input(c, KN_F32, 2, D(3, 3), -3, 3);
    kn_tensor *bad = tc_input(c, KN_I64, 2, D(2, 2), 0, 2);
    ((int64_t *)bad->data)[3] = 3;
    tc_node(c, KN_OP_GatherElements, 1);
    tc_int(c, "axis", 1);
    assert_int_equal(tc_run_ex(c, true), KN_OK);
}

static void test_expand_tile(void **state)
{
    (void)state;
    tc *c = tc_new(13);
    tc_input(c, KN_F32, 2, D(3, 1), -3, 3);
    tc_const(c, KN_I64, 1, D(3), 0, 0, D(2, 3, 4));
    tc_node(c, KN_OP_Expand, 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_I8, 3, D(1, 4, 1), -3, 3);
    tc_const(c, KN_I64, 1, D(3), 0, 0, D(3, 1, 5));
    tc_node(c, KN_OP_Expand, 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_I64, 1, D(5), -3, 3);
    tc_const(c, KN_I64, 1, D(2), 0, 0, D(4, 1));
    tc_node(c, KN_OP_Expand, 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(2, 3), -3, 3);
    tc_const(c, KN_I64, 1, D(2), 0, 0, D(2, 3));
    tc_node(c, KN_OP_Tile, 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_F16, 3, D(2, 1, 3), -3, 3);
    tc_const(c, KN_I64, 1, D(3), 0, 0, D(1, 4, 2));
    tc_node(c, KN_OP_Tile, 1);
    gen(c);
}

static void pad_case(int opset, kn_dtype dt, int rank, const int64_t *dims, const int64_t *pads, const char *mode,
                     const double *value)
{
    tc *c = tc_new(opset);
    tc_input(c, dt, rank, dims, -50, 50);
    if (opset >= 11) {
        int64_t np = 2 * rank;
        tc_const(c, KN_I64, 1, &np, 0, 0, pads);
        if (value) {
            tc_const(c, dt, 0, NULL, 0, 0, NULL);
            kn_store_f64(dt, c->ins[c->n_ins - 1]->const_data->data, 0, *value);
        }
    }
    tc_node(c, KN_OP_Pad, 1);
    if (opset < 11) {
        tc_ints(c, "pads", 2 * rank, pads);
        if (value) tc_float(c, "value", (float)*value);
    }
    if (mode) tc_str(c, "mode", mode);
    gen(c);
}

static void test_pad(void **state)
{
    (void)state;
    const double v = 1.5, iv = 7;
    pad_case(13, KN_F32, 4, D(1, 2, 5, 6), D(0, 0, 1, 2, 0, 0, 2, 1), NULL, NULL);
    pad_case(13, KN_F32, 4, D(1, 2, 5, 6), D(0, 1, 1, 2, 1, 0, 2, 1), "constant", &v);
    pad_case(13, KN_I32, 2, D(5, 6), D(-1, 2, 1, -2), "constant", &iv);
    pad_case(13, KN_F32, 4, D(1, 2, 5, 6), D(0, 0, 2, 3, 0, 0, 3, 2), "reflect", NULL);
    pad_case(13, KN_U8, 3, D(2, 5, 6), D(0, 2, 3, 1, 3, 2), "edge", NULL);
    pad_case(19, KN_F16, 2, D(3, 4), D(2, 5, 4, 3), "wrap", NULL);
    pad_case(13, KN_F32, 2, D(3, 4), D(5, 5, 5, 5), "reflect", NULL); /* several reflections */
    pad_case(2, KN_F32, 2, D(3, 4), D(1, 1, 1, 1), NULL, &v);
    pad_case(13, KN_I64, 1, D(6), D(3, 4), "edge", NULL);
    pad_case(13, KN_F32, 4, D(2, 3, 4, 5), D(1, 2, 1, 2, 2, 1, 2, 1), "edge", NULL); /* 81 boxes */
    pad_case(13, KN_F32, 4, D(2, 3, 20, 24), D(0, 0, 1, 1, 0, 0, -2, 3), "reflect", NULL);
    pad_case(13, KN_I16, 3, D(0, 3, 4), D(1, 1, 1, 1, 1, 1), "constant", NULL); /* empty input */
}

static void test_depth_space(void **state)
{
    (void)state;
    const char *modes[] = {"DCR", "CRD"};
    for (int m = 0; m < 2; m++) {
        tc *c = tc_new(13);
        tc_input(c, KN_F32, 4, D(2, 8, 3, 4), -3, 3);
        tc_node(c, KN_OP_DepthToSpace, 1);
        tc_int(c, "blocksize", 2);
        tc_str(c, "mode", modes[m]);
        gen(c);
    }
    tc *c = tc_new(13);
    tc_input(c, KN_I16, 4, D(1, 3, 6, 9), -3, 3);
    tc_node(c, KN_OP_SpaceToDepth, 1);
    tc_int(c, "blocksize", 3);
    gen(c);
}

static void resize_case(kn_dtype dt, int rank, const int64_t *dims, const float *scales, const int64_t *sizes,
                        const char *coord, const char *nearest)
{
    tc *c = tc_new(13);
    tc_input(c, dt, rank, dims, -50, 50);
    c->ins[c->n_ins++] = NULL; /* roi */
    int64_t r = rank;
    if (scales) {
        tc_const(c, KN_F32, 1, &r, 0, 0, NULL);
        memcpy(c->ins[c->n_ins - 1]->const_data->data, scales, sizeof(float) * (size_t)rank);
    } else {
        c->ins[c->n_ins++] = NULL;
        tc_const(c, KN_I64, 1, &r, 0, 0, sizes);
    }
    tc_node(c, KN_OP_Resize, 1);
    tc_str(c, "mode", "nearest");
    if (coord) tc_str(c, "coordinate_transformation_mode", coord);
    if (nearest) tc_str(c, "nearest_mode", nearest);
    gen(c);
}

static void test_resize(void **state)
{
    (void)state;
    resize_case(KN_F32, 4, D(1, 2, 3, 4), (const float[]){1, 1, 2, 2}, NULL, "asymmetric", "floor");
    resize_case(KN_F32, 4, D(1, 2, 3, 4), (const float[]){1, 1, 2, 3}, NULL, NULL, NULL);
    resize_case(KN_U8, 4, D(1, 2, 8, 8), NULL, D(1, 2, 3, 5), NULL, NULL);
    resize_case(KN_F16, 4, D(1, 1, 4, 5), NULL, D(1, 1, 7, 9), "align_corners", "round_prefer_ceil");
    resize_case(KN_F32, 3, D(2, 3, 4), (const float[]){1, 1.5f, 0.5f}, NULL, "pytorch_half_pixel", "ceil");
    resize_case(KN_I32, 2, D(3, 4), NULL, D(6, 8), "half_pixel_symmetric", NULL);
    /* Upsample-9 and Resize-10: the legacy rule */
    tc *c = tc_new(9);
    tc_input(c, KN_F32, 4, D(1, 2, 3, 3), -3, 3);
    tc_const(c, KN_F32, 1, D(4), 0, 0, NULL);
    memcpy(c->ins[1]->const_data->data, (const float[]){1, 1, 2, 3}, 16);
    tc_node(c, KN_OP_Upsample, 1);
    gen(c);
    c = tc_new(10);
    tc_input(c, KN_F32, 4, D(1, 2, 6, 6), -3, 3);
    tc_const(c, KN_F32, 1, D(4), 0, 0, NULL);
    memcpy(c->ins[1]->const_data->data, (const float[]){1, 1, 0.5f, 0.6f}, 16);
    tc_node(c, KN_OP_Resize, 1);
    gen(c);
    /* linear is the runtime's */
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(3, 4), -3, 3);
    c->ins[c->n_ins++] = NULL;
    tc_const(c, KN_F32, 1, D(2), 0, 0, NULL);
    memcpy(c->ins[2]->const_data->data, (const float[]){2, 2}, 8);
    tc_node(c, KN_OP_Resize, 1);
    tc_str(c, "mode", "linear");
    assert_int_equal(tc_run(c), KN_ERR_UNSUPPORTED);
}

static void test_scatter(void **state)
{
    (void)state;
    for (int axis = -2; axis < 2; axis++) {
        tc *c = tc_new(13);
        tc_input(c, KN_F32, 2, D(4, 5), -3, 3);
        tc_input(c, axis == 0 ? KN_I32 : KN_I64, 2, D(3, 2), -3.4f, 3.4f);
        tc_input(c, KN_F32, 2, D(3, 2), -3, 3);
        tc_node(c, KN_OP_ScatterElements, 1);
        tc_int(c, "axis", axis);
        gen(c);
    }
    /* ScatterND: whole rows, single elements, the whole tensor (k = 0) */
    tc *c = tc_new(13);
    tc_input(c, KN_I16, 3, D(4, 3, 5), -3, 3);
    kn_tensor *ind = tc_input(c, KN_I64, 2, D(2, 1), 0, 0);
    ((int64_t *)ind->data)[0] = 2;
    ((int64_t *)ind->data)[1] = -1;
    tc_input(c, KN_I16, 3, D(2, 3, 5), -3, 3);
    tc_node(c, KN_OP_ScatterND, 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_F32, 3, D(4, 3, 5), -3, 3);
    tc_input(c, KN_I32, 3, D(2, 2, 3), 0, 2.4f);
    tc_input(c, KN_F32, 2, D(2, 2), -3, 3);
    tc_node(c, KN_OP_ScatterND, 1);
    gen(c);
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(2, 3), -3, 3);
    tc_input(c, KN_I64, 1, D(0), 0, 0);
    tc_input(c, KN_F32, 2, D(2, 3), -3, 3);
    tc_node(c, KN_OP_ScatterND, 1);
    gen(c);
    /* bad indices */
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(4, 5), -3, 3);
    kn_tensor *bad = tc_input(c, KN_I64, 2, D(2, 1), 0, 3);
    ((int64_t *)bad->data)[1] = -5;
    tc_input(c, KN_F32, 2, D(2, 5), -3, 3);
    tc_node(c, KN_OP_ScatterND, 1);
    assert_int_equal(tc_run_ex(c, true), KN_OK);
    c = tc_new(13);
    tc_input(c, KN_F32, 2, D(4, 5), -3, 3);
    bad = tc_input(c, KN_I32, 2, D(2, 2), 0, 3);
    ((int32_t *)bad->data)[2] = 5;
    tc_input(c, KN_F32, 2, D(2, 2), -3, 3);
    tc_node(c, KN_OP_ScatterElements, 1);
    tc_int(c, "axis", 1);
    assert_int_equal(tc_run_ex(c, true), KN_OK);
    /* reductions are the runtime's */
    c = tc_new(18);
    tc_input(c, KN_F32, 2, D(4, 5), -3, 3);
    tc_input(c, KN_I64, 2, D(2, 1), 0, 3);
    tc_input(c, KN_F32, 2, D(2, 5), -3, 3);
    tc_node(c, KN_OP_ScatterND, 1);
    tc_str(c, "reduction", "add");
    assert_int_equal(tc_run(c), KN_ERR_UNSUPPORTED);
}

int main(void)
{
    LLVMLinkInMCJIT();
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_concat_split),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_elements),
        cmocka_unit_test(test_expand_tile),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_depth_space),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_scatter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
