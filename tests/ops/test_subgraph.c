/* Unit tests of graphs in the runtime's form (runtime/ops/subgraph.h): a
 * graph attribute written by kn_attrs_write and read back by kn_attrs_read
 * runs to the same result as the original; damaged bytes (every truncation,
 * an index out of range, a value read before it is defined, an unknown op)
 * are refused with a message saying what is wrong, and so are graphs the
 * writer is handed with a value defined twice or a node of the wrong arity; a capture that no
 * enclosing scope provides is an error naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opdesc.h"
#include "subgraph.h"

/* body(a) = (a + k) * outer, with k = [1, 2] a constant and `outer` a capture:
 * values 0 a (input), 1 k (constant), 2 outer (capture), 3 s, 4 o. */
enum { V_A, V_K, V_OUTER, V_S, V_O, N_VALUES };

typedef struct fixture {
    kn_sg_value values[N_VALUES];
    kn_tensor k;
    const kn_tensor *consts[1];
    int32_t const_ids[1], captures[1], inputs[1], outputs[1];
    int32_t add_in[2], add_out[1], mul_in[2], mul_out[1];
    kn_sg_node nodes[2];
    kn_sg g;
    kn_attr attrs[2];
} fixture;

static void make_fixture(fixture *f)
{
    memset(f, 0, sizeof *f);
    static const char *const names[N_VALUES] = {"a", "k", "outer", "s", "o"};
    for (int i = 0; i < N_VALUES; i++)
        f->values[i] = (kn_sg_value){.name = names[i], .dtype = KN_F32, .rank = 1, .dims = {2}};
    int64_t two = 2;
    assert_int_equal(kn_tensor_alloc(&f->k, KN_F32, 1, &two), 0);
    ((float *)f->k.data)[0] = 1.0f;
    ((float *)f->k.data)[1] = 2.0f;
    f->consts[0] = &f->k;
    f->const_ids[0] = V_K;
    f->captures[0] = V_OUTER;
    f->inputs[0] = V_A;
    f->outputs[0] = V_O;
    f->add_in[0] = V_A, f->add_in[1] = V_K, f->add_out[0] = V_S;
    f->mul_in[0] = V_S, f->mul_in[1] = V_OUTER, f->mul_out[0] = V_O;
    f->nodes[0] = (kn_sg_node){.desc = {.op = KN_OP_Add, .name = "add0", .op_type = "Add", .domain = "", .opset = 17,
                                        .n_inputs = 2, .n_outputs = 1},
                               .inputs = f->add_in, .outputs = f->add_out};
    f->nodes[1] = (kn_sg_node){.desc = {.op = KN_OP_Mul, .name = "mul0", .op_type = "Mul", .domain = "", .opset = 17,
                                        .n_inputs = 2, .n_outputs = 1},
                               .inputs = f->mul_in, .outputs = f->mul_out};
    f->g = (kn_sg){.name = "body", .n_values = N_VALUES, .values = f->values, .n_consts = 1,
                   .const_ids = f->const_ids, .consts = f->consts, .n_captures = 1, .captures = f->captures,
                   .n_inputs = 1, .n_outputs = 1, .inputs = f->inputs, .outputs = f->outputs, .n_nodes = 2,
                   .nodes = f->nodes};
    f->attrs[0] = (kn_attr){.name = "body", .kind = KN_ATTR_GRAPH, .sg = &f->g};
    f->attrs[1] = (kn_attr){.name = "num_scan_inputs", .kind = KN_ATTR_INT, .i = 3};
}

/* Runs g on a = [3, 4] with outer = [10, -1] and checks (a + k) * outer. */
static void check_run(const kn_sg *g)
{
    int64_t two = 2;
    kn_tensor a = {0}, outer = {0}, out[1] = {{0}};
    assert_int_equal(kn_tensor_alloc(&a, KN_F32, 1, &two), 0);
    assert_int_equal(kn_tensor_alloc(&outer, KN_F32, 1, &two), 0);
    ((float *)a.data)[0] = 3, ((float *)a.data)[1] = 4;
    ((float *)outer.data)[0] = 10, ((float *)outer.data)[1] = -1;
    const char *names[1] = {"outer"};
    const kn_tensor *tensors[1] = {&outer};
    kn_sg_scope scope = {.n = 1, .names = names, .tensors = tensors};
    const kn_tensor *in[1] = {&a};
    if (kn_sg_run(g, &scope, 1, in, 1, out)) fail_msg("run: %s", kn_last_error());
    assert_int_equal(out[0].dtype, KN_F32);
    assert_int_equal(out[0].rank, 1);
    assert_int_equal(out[0].dims[0], 2);
    assert_true(((float *)out[0].data)[0] == 40.0f);
    assert_true(((float *)out[0].data)[1] == -6.0f);
    kn_tensor_free(&out[0]);
    kn_tensor_free(&a);
    kn_tensor_free(&outer);
}

static void write_fixture(fixture *f, unsigned char **bytes, size_t *len)
{
    make_fixture(f);
    if (kn_attrs_write(f->attrs, 2, bytes, len)) fail_msg("write: %s", kn_last_error());
}

static void expect_read_error(const unsigned char *bytes, size_t len, const char *want)
{
    kn_attr *attrs = NULL;
    int n = -1;
    void *block = NULL;
    assert_int_equal(kn_attrs_read(bytes, len, &attrs, &n, &block), KN_ERR_INVALID);
    assert_null(block);
    assert_null(attrs);
    if (want && !strstr(kn_last_error(), want)) fail_msg("message '%s' lacks '%s'", kn_last_error(), want);
}

/* Offset of the first input index of the node whose op_type follows `name`. */
static size_t node_input_at(const unsigned char *bytes, size_t len, const char *name, const char *op_type)
{
    size_t nl = strlen(name), ol = strlen(op_type);
    for (size_t i = 0; i + nl + 4 + ol <= len; i++)
        if (!memcmp(bytes + i, name, nl) && !memcmp(bytes + i + nl + 4, op_type, ol))
            return i + nl + 4 + ol + 4 /* empty domain */ + 8 /* opset */ + 4 /* input count */;
    fail_msg("node '%s' not found in the bytes", name);
    return 0;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void test_round_trip(void **state)
{
    (void)state;
    fixture f;
    unsigned char *bytes = NULL;
    size_t len = 0;
    write_fixture(&f, &bytes, &len);
    check_run(&f.g);
    kn_attr *attrs = NULL;
    int n = 0;
    void *block = NULL;
    if (kn_attrs_read(bytes, len, &attrs, &n, &block)) fail_msg("read: %s", kn_last_error());
    assert_int_equal(n, 2);
    assert_string_equal(attrs[0].name, "body");
    assert_int_equal(attrs[0].kind, KN_ATTR_GRAPH);
    assert_int_equal(attrs[1].i, 3);
    const kn_sg *g = attrs[0].sg;
    assert_non_null(g);
    assert_string_equal(g->name, "body");
    assert_int_equal(g->n_values, N_VALUES);
    for (int i = 0; i < N_VALUES; i++) {
        assert_string_equal(g->values[i].name, f.values[i].name);
        assert_int_equal(g->values[i].dtype, KN_F32);
        assert_int_equal(g->values[i].rank, 1);
        assert_int_equal(g->values[i].dims[0], 2);
    }
    assert_int_equal(g->n_nodes, 2);
    assert_int_equal(g->nodes[1].desc.op, KN_OP_Mul);
    assert_string_equal(g->nodes[1].desc.name, "mul0");
    assert_int_equal(g->nodes[1].desc.opset, 17);
    assert_int_equal(g->nodes[1].inputs[1], V_OUTER);
    assert_true(g->nodes[1].desc.has_output[0]);
    assert_int_equal(g->n_captures, 1);
    assert_int_equal(g->captures[0], V_OUTER);
    assert_int_equal(g->n_consts, 1);
    assert_memory_equal(g->consts[0]->data, f.k.data, 8);
    check_run(g);
    /* written again, the parsed graph gives the same bytes */
    unsigned char *again = NULL;
    size_t len2 = 0;
    if (kn_attrs_write(attrs, n, &again, &len2)) fail_msg("rewrite: %s", kn_last_error());
    assert_int_equal(len2, len);
    assert_memory_equal(again, bytes, len);
    free(again);
    kn_attrs_free(block);
    free(bytes);
    kn_tensor_free(&f.k);
}

static void test_truncated(void **state)
{
    (void)state;
    fixture f;
    unsigned char *bytes = NULL;
    size_t len = 0;
    write_fixture(&f, &bytes, &len);
    /* every proper prefix, each in a buffer of exactly that size (ASan sees overreads) */
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *p = malloc(cut + 1);
        assert_non_null(p);
        memcpy(p, bytes, cut);
        expect_read_error(p, cut, "malformed attributes");
        free(p);
    }
    expect_read_error(bytes, len - 1, "truncated at byte");
    free(bytes);
    kn_tensor_free(&f.k);
}

static void test_bad_index(void **state)
{
    (void)state;
    fixture f;
    unsigned char *bytes = NULL;
    size_t len = 0;
    write_fixture(&f, &bytes, &len);
    size_t at = node_input_at(bytes, len, "mul0", "Mul");
    put_u32(bytes + at, 99);
    expect_read_error(bytes, len, "graph 'body': node 1 ('mul0') reads value 99 of 5");
    put_u32(bytes + at, V_O); /* its own output */
    expect_read_error(bytes, len, "graph 'body': node 1 ('mul0') reads value 4 before it is defined");
    put_u32(bytes + at, V_S);
    at = node_input_at(bytes, len, "add0", "Add");
    memcpy(bytes + at - 16 - 3, "Axx", 3);
    expect_read_error(bytes, len, "unknown op 'Axx'");
    free(bytes);
    kn_tensor_free(&f.k);
}

static void test_writer_checks(void **state)
{
    (void)state;
    fixture f;
    make_fixture(&f);
    f.add_out[0] = V_A; /* defines the input a second time */
    unsigned char *bytes = NULL;
    size_t len = 0;
    assert_int_equal(kn_attrs_write(f.attrs, 2, &bytes, &len), KN_ERR_INVALID);
    assert_null(bytes);
    assert_non_null(strstr(kn_last_error(), "node 0 ('add0') defines value 0 twice"));
    f.add_out[0] = V_S;
    f.nodes[0].desc.n_inputs = 1; /* Add's kernel would read a second input */
    assert_int_equal(kn_attrs_write(f.attrs, 2, &bytes, &len), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "node 'add0' (Add): has 1 inputs, expected 2 to 2"));
    f.attrs[0].sg = NULL;
    assert_int_equal(kn_attrs_write(f.attrs, 2, &bytes, &len), KN_ERR_UNSUPPORTED);
    kn_tensor_free(&f.k);
}

static void test_missing_capture(void **state)
{
    (void)state;
    fixture f;
    make_fixture(&f);
    int64_t two = 2;
    kn_tensor a = {0}, out[1] = {{0}};
    assert_int_equal(kn_tensor_alloc(&a, KN_F32, 1, &two), 0);
    const kn_tensor *in[1] = {&a};
    assert_int_equal(kn_sg_run(&f.g, NULL, 1, in, 1, out), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "graph 'body': outer-scope value 'outer' is not available"));
    assert_null(out[0].data);
    assert_int_equal(kn_sg_run(&f.g, NULL, 2, in, 1, out), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "graph 'body' takes 1 inputs and gives 1 outputs, not 2 and 1"));
    kn_tensor_free(&a);
    kn_tensor_free(&f.k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_bad_index),
        cmocka_unit_test(test_writer_checks),
        cmocka_unit_test(test_missing_capture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
