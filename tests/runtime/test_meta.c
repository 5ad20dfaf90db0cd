/*
 * tests/runtime/test_meta.c — the serialized forms an artifact carries:
 * kn_meta (write → read round trip with every field; every truncation and
 * random byte flips are refused without a crash — run it under ASan), node
 * attributes of every kind, the profiling records (steps and arena buffers,
 * checked against the arena and the step count), the FNV-1a hash and CPU feature detection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kiln/abi.h"
#include "kiln/status.h"
#include "opdesc.h"

static kn_abi_tensor tensor(const char *name, kn_dtype dt, int rank, const int64_t *dims)
{
    kn_abi_tensor t = {.name = name, .dtype = dt, .rank = rank};
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= (t.dims[i] = dims[i]);
    t.nbytes = rank < 0 ? 0 : (int64_t)kn_dtype_nbytes(dt, (size_t)n);
    return t;
}

/* A meta that uses every field, with an attribute blob for its opnode. */
typedef struct fixture {
    kn_meta m;
    kn_abi_tensor in[2], out[1], op_in[2], op_out[1];
    kn_abi_dnnl dnnl[2];
    kn_abi_opnode op[1];
    kn_abi_step steps[3];
    kn_abi_buffer buffers[2];
    unsigned char *attrs;
    size_t attrs_len;
} fixture;

static void make_meta(fixture *f)
{
    memset(f, 0, sizeof *f);
    static const int64_t d_img[4] = {1, 3, 8, 8}, d_vec[2] = {1, 10}, d_4[1] = {4};
    f->in[0] = tensor("image", KN_F32, 4, d_img);
    f->in[0].dim_names[0] = "batch";
    f->in[1] = tensor("mask", KN_BOOL, 2, d_vec);
    f->out[0] = tensor("logits", KN_F16, 2, d_vec);
    f->out[0].dim_names[0] = "batch";
    f->out[0].dim_names[1] = "classes";
    f->op_in[0] = tensor("t0", KN_F32, 1, d_4);
    f->op_in[1] = tensor(NULL, KN_DT_UNDEFINED, -1, NULL); /* omitted optional input */
    f->op_out[0] = tensor("t1", KN_I64, 1, d_4);
    for (int i = 0; i < 2; i++) {
        kn_abi_dnnl *d = &f->dnnl[i];
        d->kind = i ? KN_DNNL_MATMUL : KN_DNNL_CONV;
        d->n_post = 2;
        d->post[0] = (kn_abi_post){KN_POST_CLIP, 0.0f, 6.0f};
        d->post[1] = (kn_abi_post){KN_POST_SUM, 1.0f, 0.0f};
        d->src = f->in[0];
        d->wei = tensor("w", KN_F32, 4, (int64_t[]){16, 3, 3, 3});
        d->dst = tensor("y", KN_F32, 4, (int64_t[]){1, 16, 8, 8});
        d->trans_a = i, d->trans_b = 1 - i;
        d->alpha = 0.5f;
        d->groups = 1;
        d->spatial = 2;
        if (!i) d->src_layout = KN_LAYOUT_NATIVE, d->post_layout = KN_LAYOUT_NATIVE;
        for (int k = 0; k < 3; k++) {
            d->strides[k] = 1 + k;
            d->dilations[k] = 2 + k;
            d->pads_begin[k] = 3 + k;
            d->pads_end[k] = 4 + k;
        }
        d->wei_ref = (kn_abi_ref){KN_LOC_WEIGHTS, 0, 64};
        d->alg = i ? KN_POOLING_AVG_EXCLUDE_PAD : KN_POOLING_MAX;
        for (int k = 0; k < 3; k++) d->kernel[k] = 5 + k + i;
        d->bias_ref = (kn_abi_ref){KN_LOC_ARENA, 0, 128};
    }
    kn_attr a[2] = {{.name = "alpha", .kind = KN_ATTR_FLOAT, .f = 0.25f},
                    {.name = "axes", .kind = KN_ATTR_INTS, .n = 2, .ints = (int64_t[]){0, -1}}};
    assert_int_equal(kn_attrs_write(a, 2, &f->attrs, &f->attrs_len), 0);
    f->op[0] = (kn_abi_opnode){.op = KN_OP_NonZero, .n_inputs = 2, .n_outputs = 1, .n_captures = 1, .opset = 13, .name = "nz",
                               .op_type = "NonZero", .inputs = f->op_in, .outputs = f->op_out,
                               .attrs = f->attrs, .attrs_len = (int64_t)f->attrs_len};
    f->m = (kn_meta){.model_hash = 0x1122334455667788ull, .cpu_features = KN_CPU_AVX2 | KN_CPU_FMA,
                     .name = "net", .target = "x86-64-v3", .kiln_version = "0.1.0",
                     .n_inputs = 2, .n_outputs = 1, .inputs = f->in, .outputs = f->out,
                     .arena_bytes = 4096, .intermediate_bytes = 8192, .weights_bytes = 1 << 20,
                     .weights_file = "net.weights", .weights_hash = 0xdeadbeefcafef00dull,
                     .n_dnnl = 2, .n_opnodes = 1, .dnnl = f->dnnl, .opnodes = f->op};
    f->steps[0] = (kn_abi_step){"conv_1", "Conv", 221184, 1000, 4096, 1};
    f->steps[1] = (kn_abi_step){"nz", "NonZero", 4, 32, 32, -1};
    f->steps[2] = (kn_abi_step){"(outputs)", "Copy", 0, 20, 20, -1};
    f->buffers[0] = (kn_abi_buffer){"y", 0, 4096, 0, 1};
    f->buffers[1] = (kn_abi_buffer){"t <&> \"1\"", 64, 64, 2, 2};
    f->m.n_steps = 3, f->m.steps = f->steps;
    f->m.n_buffers = 2, f->m.buffers = f->buffers;
}

static void assert_tensor_eq(const kn_abi_tensor *a, const kn_abi_tensor *b)
{
    if (a->name) assert_string_equal(a->name, b->name);
    else assert_null(b->name);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->rank, b->rank);
    assert_memory_equal(a->dims, b->dims, sizeof a->dims);
    for (int i = 0; i < 8; i++) {
        if (a->dim_names[i]) assert_string_equal(a->dim_names[i], b->dim_names[i]);
        else assert_null(b->dim_names[i]);
    }
    assert_int_equal(a->nbytes, b->nbytes);
    assert_int_equal(a->slot, b->slot);
    assert_memory_equal(a->dim_sym, b->dim_sym, sizeof a->dim_sym);
    assert_memory_equal(a->dim_a, b->dim_a, sizeof a->dim_a);
}

static void test_meta_round_trip(void **state)
{
    (void)state;
    fixture f;
    make_meta(&f);
    unsigned char *bytes;
    size_t len;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    kn_meta r;
    assert_int_equal(kn_meta_read(bytes, len, &r), 0);
    assert_true(r.model_hash == f.m.model_hash && r.cpu_features == f.m.cpu_features);
    assert_string_equal(r.name, "net");
    assert_string_equal(r.target, "x86-64-v3");
    assert_string_equal(r.kiln_version, "0.1.0");
    assert_int_equal(r.n_inputs, 2);
    assert_int_equal(r.n_outputs, 1);
    for (int i = 0; i < 2; i++) assert_tensor_eq(&f.in[i], &r.inputs[i]);
    assert_tensor_eq(&f.out[0], &r.outputs[0]);
    assert_int_equal(r.arena_bytes, 4096);
    assert_int_equal(r.intermediate_bytes, 8192);
    assert_int_equal(r.weights_bytes, 1 << 20);
    assert_string_equal(r.weights_file, "net.weights");
    assert_true(r.weights_hash == f.m.weights_hash);
    assert_int_equal(r.n_dnnl, 2);
    for (int i = 0; i < 2; i++) {
        const kn_abi_dnnl *a = &f.dnnl[i], *b = &r.dnnl[i];
        assert_int_equal(a->kind, b->kind);
        assert_int_equal(b->n_post, 2);
        assert_memory_equal(a->post, b->post, sizeof a->post);
        assert_tensor_eq(&a->src, &b->src);
        assert_tensor_eq(&a->wei, &b->wei);
        assert_tensor_eq(&a->bias, &b->bias);
        assert_tensor_eq(&a->dst, &b->dst);
        assert_int_equal(a->trans_a, b->trans_a);
        assert_int_equal(a->trans_b, b->trans_b);
        assert_true(a->alpha == b->alpha);
        assert_int_equal(a->groups, b->groups);
        assert_int_equal(a->spatial, b->spatial);
        assert_memory_equal(a->strides, b->strides, sizeof a->strides);
        assert_memory_equal(a->dilations, b->dilations, sizeof a->dilations);
        assert_memory_equal(a->pads_begin, b->pads_begin, sizeof a->pads_begin);
        assert_memory_equal(a->pads_end, b->pads_end, sizeof a->pads_end);
        assert_int_equal(a->src_layout, b->src_layout);
        assert_int_equal(a->dst_layout, b->dst_layout);
        assert_int_equal(a->post_layout, b->post_layout);
        assert_int_equal(a->alg, b->alg);
        assert_memory_equal(a->kernel, b->kernel, sizeof a->kernel);
        assert_true(a->wei_ref.loc == b->wei_ref.loc && a->wei_ref.offset == b->wei_ref.offset);
        assert_true(a->bias_ref.loc == b->bias_ref.loc && a->bias_ref.offset == b->bias_ref.offset);
    }
    assert_int_equal(r.n_opnodes, 1);
    const kn_abi_opnode *o = &r.opnodes[0];
    assert_int_equal(o->op, KN_OP_NonZero);
    assert_int_equal(o->opset, 13);
    assert_string_equal(o->name, "nz");
    assert_string_equal(o->op_type, "NonZero");
    assert_int_equal(o->n_inputs, 2);
    assert_int_equal(o->n_outputs, 1);
    assert_int_equal(o->n_captures, 1);
    for (int i = 0; i < 2; i++) assert_tensor_eq(&f.op_in[i], &o->inputs[i]);
    assert_tensor_eq(&f.op_out[0], &o->outputs[0]);
    assert_int_equal(o->attrs_len, (int64_t)f.attrs_len);
    assert_memory_equal(o->attrs, f.attrs, f.attrs_len);
    assert_int_equal(o->compute, 0);
    assert_int_equal(r.n_steps, 3);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(r.steps[i].name, f.steps[i].name);
        assert_string_equal(r.steps[i].op_type, f.steps[i].op_type);
        assert_int_equal(r.steps[i].flops, f.steps[i].flops);
        assert_int_equal(r.steps[i].bytes_read, f.steps[i].bytes_read);
        assert_int_equal(r.steps[i].bytes_written, f.steps[i].bytes_written);
        assert_int_equal(r.steps[i].dnnl, f.steps[i].dnnl);
    }
    assert_int_equal(r.n_buffers, 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(r.buffers[i].name, f.buffers[i].name);
        assert_int_equal(r.buffers[i].offset, f.buffers[i].offset);
        assert_int_equal(r.buffers[i].nbytes, f.buffers[i].nbytes);
        assert_int_equal(r.buffers[i].first_step, f.buffers[i].first_step);
        assert_int_equal(r.buffers[i].last_step, f.buffers[i].last_step);
    }
    /* and it serializes back to the same bytes */
    unsigned char *again;
    size_t again_len;
    assert_int_equal(kn_meta_write(&r, &again, &again_len), 0);
    assert_int_equal(again_len, len);
    assert_memory_equal(again, bytes, len);
    free(again);
    kn_meta_free(&r);
    free(bytes);
    free(f.attrs);
}

static void test_meta_empty(void **state)
{
    (void)state;
    kn_meta m = {0}, r;
    unsigned char *bytes;
    size_t len;
    assert_int_equal(kn_meta_write(&m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), 0);
    assert_int_equal(r.n_inputs, 0);
    assert_null(r.name);
    kn_meta_free(&r);
    kn_meta_free(&r); /* zeroed: a second free is harmless */
    free(bytes);
}

/* Every prefix of a valid blob, in a buffer of exactly that size so that
 * ASan sees any read past `len`. */
static void test_meta_truncations(void **state)
{
    (void)state;
    fixture f;
    make_meta(&f);
    unsigned char *bytes;
    size_t len;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    for (size_t n = 0; n < len; n++) {
        unsigned char *cut = malloc(n ? n : 1);
        assert_non_null(cut);
        memcpy(cut, bytes, n);
        kn_meta r;
        kn_error_clear();
        assert_int_not_equal(kn_meta_read(cut, n, &r), 0);
        assert_true(strstr(kn_last_error(), "malformed meta") != NULL);
        assert_null(r.inputs);
        free(cut);
    }
    /* a byte too many is refused too */
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, bytes, len);
    longer[len] = 0;
    kn_meta r;
    assert_int_not_equal(kn_meta_read(longer, len + 1, &r), 0);
    assert_non_null(strstr(kn_last_error(), "unexpected bytes"));
    free(longer);
    free(bytes);
    free(f.attrs);
}

static void test_meta_byte_flips(void **state)
{
    (void)state;
    fixture f;
    make_meta(&f);
    unsigned char *bytes;
    size_t len;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    unsigned char *bad = malloc(len);
    unsigned seed = 12345;
    int refused = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(bad, bytes, len);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % len;
            seed = seed * 1103515245u + 12345u;
            /* alternate random bytes and the values most likely to break
             * lengths and counts */
            static const unsigned char nasty[] = {0xff, 0x7f, 0x80, 0x00, 0x01};
            bad[at] = iter & 1 ? (unsigned char)(seed >> 16) : nasty[(seed >> 16) % 5];
        }
        kn_meta r;
        kn_error_clear();
        if (kn_meta_read(bad, len, &r) == 0) {
            kn_meta_free(&r); /* a flip in a hash or a name is still well-formed */
        } else {
            assert_true(kn_last_error()[0] != '\0');
            refused++;
        }
    }
    assert_true(refused > 10000);
    free(bad);
    free(bytes);
    free(f.attrs);
}

/* The smallest records, many of them: the parser's block must still fit. */
static void test_meta_many_small_records(void **state)
{
    (void)state;
    enum { K = 3000 };
    kn_abi_opnode *ops = calloc(K, sizeof *ops);
    kn_abi_tensor *ins = calloc(K, sizeof *ins);
    assert_true(ops && ins);
    for (int i = 0; i < K; i++) {
        ops[i] = (kn_abi_opnode){.op = 1, .name = "", .op_type = ""};
        ins[i] = (kn_abi_tensor){.name = "", .dtype = KN_U8, .rank = 0, .nbytes = 1};
    }
    kn_meta m = {.n_opnodes = K, .opnodes = ops, .n_inputs = K, .inputs = ins}, r;
    unsigned char *bytes;
    size_t len;
    assert_int_equal(kn_meta_write(&m, &bytes, &len), 0);
    if (kn_meta_read(bytes, len, &r)) fail_msg("%s", kn_last_error());
    assert_int_equal(r.n_opnodes, K);
    assert_string_equal(r.opnodes[K - 1].name, "");
    kn_meta_free(&r);
    free(bytes);
    free(ops);
    free(ins);
}

static void test_meta_write_refuses_inconsistent(void **state)
{
    (void)state;
    kn_meta m = {.n_inputs = 2};
    unsigned char *bytes = (unsigned char *)1;
    size_t len = 1;
    assert_int_equal(kn_meta_write(&m, &bytes, &len), KN_ERR_INVALID);
    assert_null(bytes);
    assert_int_equal(len, 0);
    /* more captures than inputs */
    fixture f;
    make_meta(&f);
    f.op[0].n_captures = 3;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "opnode 0 ('nz'): inconsistent counts"));
    free(f.attrs);
}

/* Expects f's meta to serialize but be refused on reading with `text`. */
static void expect_refused(fixture *f, const char *text)
{
    unsigned char *bytes;
    size_t len;
    kn_meta r;
    assert_int_equal(kn_meta_write(&f->m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
    if (!strstr(kn_last_error(), text)) fail_msg("'%s' lacks '%s'", kn_last_error(), text);
    free(bytes);
}

/* Expects f's meta to serialize and read back. */
static void expect_accepted(fixture *f)
{
    unsigned char *bytes;
    size_t len;
    kn_meta r;
    assert_int_equal(kn_meta_write(&f->m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_OK);
    kn_meta_free(&r);
    free(bytes);
}

static void test_meta_read_rejects_bad_values(void **state)
{
    (void)state;
    fixture f;
    make_meta(&f);
    unsigned char *bytes;
    size_t len;
    kn_meta r;
    f.in[0].nbytes += 4; /* size disagrees with dtype and dims */
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "input 0"));
    assert_non_null(strstr(kn_last_error(), "nbytes"));
    free(bytes);
    f.in[0].nbytes -= 4;
    f.out[0].rank = 9;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "rank 9"));
    free(bytes);
    f.out[0].rank = 2;
    f.m.weights_file = "../etc/passwd";
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "not a plain file name"));
    free(bytes);
    f.m.weights_file = "net.weights";
    /* a layout the runtime does not know, and oneDNN's layout for a matmul */
    f.dnnl[0].dst_layout = 7;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "activation layout 7"));
    free(bytes);
    f.dnnl[0].dst_layout = KN_LAYOUT_PLAIN;
    f.dnnl[1].src_layout = KN_LAYOUT_NATIVE;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "activation layout 1"));
    free(bytes);
    /* a pooling in oneDNN's layout is fine; an unknown pooling algorithm is not */
    f.dnnl[1].src_layout = KN_LAYOUT_PLAIN;
    f.dnnl[0].kind = KN_DNNL_POOL;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_OK);
    kn_meta_free(&r);
    free(bytes);
    f.dnnl[0].alg = 3;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "pooling algorithm 3"));
    free(bytes);
    /* a binary op: Mul and Add only */
    f.dnnl[0].kind = KN_DNNL_BINARY;
    f.dnnl[0].alg = KN_BINARY_ADD;
    expect_accepted(&f);
    f.dnnl[0].alg = 2;
    expect_refused(&f, "binary algorithm 2");
    free(f.attrs);
}

/* kn_abi_opnode.compute (ABI 10): bf16 on an Attention node round-trips;
 * on another op, or another dtype, the meta is refused. */
static void test_meta_opnode_compute(void **state)
{
    (void)state;
    fixture f;
    make_meta(&f);
    unsigned char *bytes;
    size_t len;
    kn_meta r;
    f.op[0].op = KN_OP_Attention, f.op[0].op_type = "Attention", f.op[0].compute = KN_BF16;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_OK);
    assert_int_equal(r.opnodes[0].compute, KN_BF16);
    kn_meta_free(&r);
    free(bytes);
    f.op[0].compute = KN_F16;
    expect_refused(&f, "compute dtype");
    f.op[0].op = KN_OP_NonZero, f.op[0].op_type = "NonZero", f.op[0].compute = KN_BF16;
    expect_refused(&f, "bf16 is for Attention");
    free(f.attrs);
}

/* kn_abi_opnode.nhwc (ABI 13, ALL in 14): channels-last bits on a
 * convolution round-trip, ALL alone on Concat, Split, Resize and binary ops;
 * unknown bits, or bits on another op, are refused. */
static void test_meta_opnode_nhwc(void **state)
{
    (void)state;
    fixture f;
    make_meta(&f);
    unsigned char *bytes;
    size_t len;
    kn_meta r;
    /* a FusedConv with a residual (input 3; no bias) */
    kn_abi_tensor ins[4] = {f.op_in[0], f.op_in[0], f.op_in[1], f.op_in[0]};
    f.op[0].op = KN_OP_FusedConv, f.op[0].op_type = "FusedConv";
    f.op[0].inputs = ins, f.op[0].n_inputs = 4, f.op[0].n_captures = 0;
    f.op[0].nhwc = KN_OPNODE_NHWC_SRC | KN_OPNODE_NHWC_DST | KN_OPNODE_NHWC_RES;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    assert_int_equal(kn_meta_read(bytes, len, &r), KN_OK);
    assert_int_equal(r.opnodes[0].nhwc, 7);
    kn_meta_free(&r);
    free(bytes);
    /* the residual in another layout than the output, or a residual bit without one */
    f.op[0].nhwc = KN_OPNODE_NHWC_SRC | KN_OPNODE_NHWC_DST;
    expect_refused(&f, "the residual's layout is not the output's");
    f.op[0].n_inputs = 2, f.op[0].nhwc = KN_OPNODE_NHWC_RES;
    expect_refused(&f, "the residual's layout is not the output's");
    f.op[0].inputs = f.op_in, f.op[0].n_captures = 1;
    f.op[0].nhwc = 16;
    expect_refused(&f, "NHWC bits 0x10");
    f.op[0].nhwc = KN_OPNODE_NHWC_ALL; /* not on a convolution */
    expect_refused(&f, "Concat, Split, Resize and binary ops only");
    static const struct {
        kn_op op;
        const char *type;
    } agnostic[] = {{KN_OP_Concat, "Concat"}, {KN_OP_Split, "Split"}, {KN_OP_Resize, "Resize"}, {KN_OP_Add, "Add"},
                    {KN_OP_Sub, "Sub"},       {KN_OP_Mul, "Mul"},     {KN_OP_Div, "Div"}};
    for (size_t k = 0; k < sizeof agnostic / sizeof *agnostic; k++) {
        f.op[0].op = agnostic[k].op, f.op[0].op_type = agnostic[k].type, f.op[0].nhwc = KN_OPNODE_NHWC_ALL;
        expect_accepted(&f);
        f.op[0].nhwc = KN_OPNODE_NHWC_ALL | KN_OPNODE_NHWC_SRC; /* ALL goes alone */
        expect_refused(&f, "NHWC bits 0x9");
        f.op[0].nhwc = KN_OPNODE_NHWC_SRC;
        expect_refused(&f, "for convolutions and poolings only");
    }
    f.op[0].op = KN_OP_Relu, f.op[0].op_type = "Relu", f.op[0].nhwc = KN_OPNODE_NHWC_ALL;
    expect_refused(&f, "Concat, Split, Resize and binary ops only");
    f.op[0].op = KN_OP_NonZero, f.op[0].op_type = "NonZero", f.op[0].nhwc = KN_OPNODE_NHWC_SRC;
    expect_refused(&f, "for convolutions and poolings only");
    /* a ConvTranspose: input and output, never a residual */
    f.op[0].op = KN_OP_ConvTranspose, f.op[0].op_type = "ConvTranspose";
    f.op[0].nhwc = KN_OPNODE_NHWC_SRC | KN_OPNODE_NHWC_DST;
    expect_accepted(&f);
    f.op[0].nhwc = KN_OPNODE_NHWC_RES;
    expect_refused(&f, "for convolutions and poolings only");
    free(f.attrs);
}

/* What a profiler indexes with is range-checked: buffers inside the arena,
 * their steps inside [0, n_steps) and in order, named steps, no negative counts. */
static void test_meta_profile_records(void **state)
{
    (void)state;
    fixture f;
    make_meta(&f);
    f.buffers[0].nbytes = 4097; /* one byte past the 4096-byte arena */
    expect_refused(&f, "buffer 0: [0, +4097) outside the arena");
    f.buffers[0].nbytes = 4096;
    f.buffers[1].offset = -64;
    expect_refused(&f, "buffer 1");
    f.buffers[1].offset = 64;
    f.buffers[1].last_step = 3;
    expect_refused(&f, "buffer 1: steps 2..3 outside [0, 3)");
    f.buffers[1].last_step = 2;
    f.buffers[0].first_step = 2;
    expect_refused(&f, "buffer 0: steps 2..1");
    f.buffers[0].first_step = 0;
    f.steps[1].flops = -1;
    expect_refused(&f, "step 1: negative count");
    f.steps[1].flops = 4;
    f.steps[2].name = NULL;
    expect_refused(&f, "step 2: no name or op type");
    f.steps[2].name = "(outputs)";
    f.steps[0].dnnl = 2; /* the meta has records 0 and 1 */
    expect_refused(&f, "step 0: oneDNN record 2 of 2");
    f.steps[0].dnnl = -2;
    expect_refused(&f, "step 0: oneDNN record -2 of 2");
    f.steps[0].dnnl = 1;
    f.m.n_steps = 2; /* buffer 1 lives in step 2, which no longer exists */
    expect_refused(&f, "buffer 1: steps 2..2 outside [0, 2)");
    f.m.n_steps = 3;
    f.m.steps = NULL;
    unsigned char *bytes;
    size_t len;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), KN_ERR_INVALID);
    free(f.attrs);
}

/* Dynamic values (slot > 0): an output and an opnode tensor round-trip;
 * inputs, oneDNN tensors, slots beyond the count, sizes and bad dims do not. */
static void test_meta_dynamic_slots(void **state)
{
    (void)state;
    fixture f;
    make_meta(&f);
    unsigned char *bytes;
    size_t len;
    kn_meta r;
    f.m.n_slots = 2;
    f.out[0] = (kn_abi_tensor){.name = "idx", .dtype = KN_I64, .rank = 2, .dims = {1, -1}, .slot = 2};
    f.op_out[0] = f.out[0];
    f.op_in[0] = (kn_abi_tensor){.name = "t0", .dtype = KN_DT_UNDEFINED, .rank = -1, .slot = 1};
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    if (kn_meta_read(bytes, len, &r)) fail_msg("%s", kn_last_error());
    assert_int_equal(r.n_slots, 2);
    assert_tensor_eq(&f.out[0], &r.outputs[0]);
    assert_tensor_eq(&f.op_in[0], &r.opnodes[0].inputs[0]);
    assert_tensor_eq(&f.op_out[0], &r.opnodes[0].outputs[0]);
    kn_meta_free(&r);
    free(bytes);
    static const struct {
        int which; /* 0: output slot 3; 1: input dynamic; 2: sized; 3: dim -2; 4: oneDNN src dynamic */
        const char *text;
    } bad[] = {{0, "slot 3, but the artifact has 2"}, {1, "cannot be dynamic"}, {2, "static size"},
               {3, "dim -2"}, {4, "cannot be dynamic"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        fixture g;
        make_meta(&g);
        g.m.n_slots = 2;
        g.out[0] = (kn_abi_tensor){.name = "idx", .dtype = KN_I64, .rank = 2, .dims = {1, -1}, .slot = 2};
        switch (bad[k].which) {
        case 0: g.out[0].slot = 3; break;
        case 1: g.in[1].slot = 1; break;
        case 2: g.out[0].nbytes = 16; break;
        case 3: g.out[0].dims[1] = -2; break;
        default: g.dnnl[0].src.slot = 1; break;
        }
        assert_int_equal(kn_meta_write(&g.m, &bytes, &len), 0);
        assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
        if (!strstr(kn_last_error(), bad[k].text)) fail_msg("case %zu: '%s' lacks '%s'", k, kn_last_error(), bad[k].text);
        free(bytes);
        free(g.attrs);
    }
    free(f.attrs);
}

/* Dynamic dims (--max): symbols (one set by the data, from_data) and affine
 * dims round-trip; a dim that names a missing symbol, has no coefficient or
 * would go negative below the maximum, a symbol without a maximum and one
 * whose from_data is neither 0 nor 1, are refused. */
static void dyn_meta(fixture *f, kn_abi_sym *syms)
{
    make_meta(f);
    syms[0] = (kn_abi_sym){"batch", 8, 1, 1, 0};
    syms[1] = (kn_abi_sym){"seq", 4, 1, 1, 1}; /* set by the data (the packed tokens' kind) */
    f->m.n_syms = 2;
    f->m.syms = syms;
    static const int64_t d_img[4] = {8, 3, 8, 8}, d_out[2] = {16, 10};
    f->in[0] = tensor("image", KN_F32, 4, d_img);
    f->in[0].dim_sym[0] = 1, f->in[0].dim_a[0] = 1;
    f->out[0] = tensor("logits", KN_F16, 2, d_out); /* 2*batch rows */
    f->out[0].dim_sym[0] = 1, f->out[0].dim_a[0] = 2;
    f->op_in[0].dim_sym[0] = 2, f->op_in[0].dim_a[0] = 1; /* dims {4}: seq */
}

static void test_meta_dynamic_dims(void **state)
{
    (void)state;
    fixture f;
    kn_abi_sym syms[2];
    dyn_meta(&f, syms);
    unsigned char *bytes;
    size_t len;
    kn_meta r;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), 0);
    if (kn_meta_read(bytes, len, &r)) fail_msg("%s", kn_last_error());
    assert_int_equal(r.n_syms, 2);
    assert_string_equal(r.syms[1].name, "seq");
    assert_int_equal(r.syms[0].max, 8);
    assert_int_equal(r.syms[0].from_data, 0);
    assert_int_equal(r.syms[1].from_data, 1);
    assert_tensor_eq(&f.in[0], &r.inputs[0]);
    assert_tensor_eq(&f.out[0], &r.outputs[0]);
    assert_tensor_eq(&f.op_in[0], &r.opnodes[0].inputs[0]);
    kn_meta_free(&r);
    free(bytes);
    free(f.attrs);
    static const struct {
        int which;
        const char *text;
    } bad[] = {{0, "follows symbol 3 (the artifact has 2)"}, {1, "coefficient 0"},
               {2, "dim 0: 4 at the maximum with coefficient 1"}, {3, "no name or maximum 0"},
               {4, "follows symbol 1"}, {5, "from_data 2 (0 or 1)"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        fixture g;
        dyn_meta(&g, syms);
        switch (bad[k].which) {
        case 0: g.in[0].dim_sym[0] = 3; break;
        case 1: g.in[0].dim_a[0] = 0; break;
        case 2: g.op_in[0].dim_sym[0] = 1; break; /* 4 - 1 * (8 - 1) < 0 */
        case 3: syms[1].max = 0; break;
        case 5: syms[1].from_data = 2; break;
        default: g.in[0].dim_sym[5] = 1, g.in[0].dim_a[5] = 1; break; /* beyond the rank */
        }
        assert_int_equal(kn_meta_write(&g.m, &bytes, &len), 0);
        assert_int_equal(kn_meta_read(bytes, len, &r), KN_ERR_INVALID);
        if (!strstr(kn_last_error(), bad[k].text)) fail_msg("case %zu: '%s' lacks '%s'", k, kn_last_error(), bad[k].text);
        free(bytes);
        free(g.attrs);
        syms[1].max = 4, syms[1].from_data = 1;
    }
    dyn_meta(&f, syms);
    f.m.n_syms = KN_MAX_SYMS + 1;
    assert_int_equal(kn_meta_write(&f.m, &bytes, &len), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "dynamic dims"));
    free(f.attrs);
}

/* ---- attributes ----------------------------------------------------------- */

static void test_attrs_every_kind(void **state)
{
    (void)state;
    float tf[6] = {1, 2, 3, 4, 5, 6};
    uint8_t t4[2] = {0x21, 0x43}; /* four packed int4 elements */
    kn_tensor ta = {.dtype = KN_F32, .rank = 2, .dims = {2, 3}, .data = tf, .nbytes = sizeof tf};
    kn_tensor tb = {.dtype = KN_INT4, .rank = 1, .dims = {4}, .data = t4, .nbytes = 2};
    kn_tensor tc = {.dtype = KN_I64, .rank = 1, .dims = {0}};
    kn_tensor *list[3] = {&ta, &tb, &tc};
    static const char s_nul[] = {'a', 0, 'b'};
    const char *strs[3] = {"x", "", "longer string"};
    kn_attr in[] = {
        {.name = "f", .kind = KN_ATTR_FLOAT, .f = -1.5f},
        {.name = "i", .kind = KN_ATTR_INT, .i = -(1ll << 40)},
        {.name = "s", .kind = KN_ATTR_STRING, .s = s_nul, .s_len = 3},
        {.name = "t", .kind = KN_ATTR_TENSOR, .t = &ta},
        {.name = "fs", .kind = KN_ATTR_FLOATS, .n = 3, .floats = (float[]){0.5f, -0.0f, 1e30f}},
        {.name = "is", .kind = KN_ATTR_INTS, .n = 2, .ints = (int64_t[]){INT64_MIN, INT64_MAX}},
        {.name = "ss", .kind = KN_ATTR_STRINGS, .n = 3, .strings = strs},
        {.name = "ts", .kind = KN_ATTR_TENSORS, .n = 3, .tensors = list},
        {.name = "empty", .kind = KN_ATTR_INTS, .n = 0},
    };
    int n_in = (int)(sizeof in / sizeof in[0]);
    unsigned char *bytes;
    size_t len;
    assert_int_equal(kn_attrs_write(in, n_in, &bytes, &len), 0);
    kn_attr *out;
    int n;
    void *block;
    assert_int_equal(kn_attrs_read(bytes, len, &out, &n, &block), 0);
    assert_int_equal(n, n_in);
    for (int k = 0; k < n; k++) {
        assert_string_equal(out[k].name, in[k].name);
        assert_int_equal(out[k].kind, in[k].kind);
    }
    assert_true(out[0].f == -1.5f);
    assert_true(out[1].i == -(1ll << 40));
    assert_int_equal(out[2].s_len, 3);
    assert_memory_equal(out[2].s, s_nul, 3);
    assert_int_equal(out[2].s[3], 0);
    assert_int_equal(out[3].t->rank, 2);
    assert_int_equal(out[3].t->dims[1], 3);
    assert_memory_equal(out[3].t->data, tf, sizeof tf);
    assert_int_equal((uintptr_t)out[3].t->data % 64, 0);
    assert_int_equal(out[4].n, 3);
    assert_memory_equal(out[4].floats, in[4].floats, 3 * sizeof(float));
    assert_true(out[5].ints[0] == INT64_MIN && out[5].ints[1] == INT64_MAX);
    for (int k = 0; k < 3; k++) assert_string_equal(out[6].strings[k], strs[k]);
    assert_int_equal(out[7].n, 3);
    assert_int_equal(out[7].tensors[1]->dtype, KN_INT4);
    assert_int_equal(out[7].tensors[1]->nbytes, 2);
    assert_memory_equal(out[7].tensors[1]->data, t4, 2);
    assert_int_equal(out[7].tensors[2]->nbytes, 0);
    assert_int_equal(out[8].n, 0);
    /* the getters of opdesc.h work on what was read */
    kn_opdesc d = {.name = "n", .op_type = "X", .attrs = out, .n_attrs = n};
    assert_true(kn_op_attr_float(&d, "f", 0) == -1.5f);
    const int64_t *ints;
    assert_int_equal(kn_op_attr_ints(&d, "is", &ints), 2);
    kn_attrs_free(block);

    /* every truncation is refused, reading only what it was given */
    for (size_t cut = 0; cut < len; cut++) {
        unsigned char *p = malloc(cut ? cut : 1);
        memcpy(p, bytes, cut);
        assert_int_not_equal(kn_attrs_read(p, cut, &out, &n, &block), 0);
        assert_null(block);
        assert_non_null(strstr(kn_last_error(), "malformed attributes"));
        free(p);
    }
    /* random flips never crash */
    unsigned seed = 7;
    unsigned char *bad = malloc(len);
    for (int iter = 0; iter < 5000; iter++) {
        memcpy(bad, bytes, len);
        for (int k = 0; k < 3; k++) {
            seed = seed * 1103515245u + 12345u;
            bad[(seed >> 8) % len] = (unsigned char)(seed >> 20);
        }
        if (kn_attrs_read(bad, len, &out, &n, &block) == 0) kn_attrs_free(block);
    }
    free(bad);
    free(bytes);
}

/* A graph attribute is written from its runtime form (.sg); one without it
 * (an IR graph only) is refused, naming the attribute. */
static void test_attrs_graph_refused(void **state)
{
    (void)state;
    kn_attr a[2] = {{.name = "alpha", .kind = KN_ATTR_FLOAT}, {.name = "then_branch", .kind = KN_ATTR_GRAPH}};
    unsigned char *bytes;
    size_t len;
    assert_int_equal(kn_attrs_write(a, 2, &bytes, &len), KN_ERR_UNSUPPORTED);
    assert_non_null(strstr(kn_last_error(), "attribute 'then_branch'"));
    assert_null(bytes);
    /* none at all is fine */
    assert_int_equal(kn_attrs_write(NULL, 0, &bytes, &len), 0);
    kn_attr *out;
    int n;
    void *block;
    assert_int_equal(kn_attrs_read(bytes, len, &out, &n, &block), 0);
    assert_int_equal(n, 0);
    kn_attrs_free(block);
    free(bytes);
}

/* ---- hash and CPU ----------------------------------------------------------- */

static void test_fnv1a(void **state)
{
    (void)state;
    /* the published FNV-1a 64 test vectors, from the standard offset basis
     * (abi.h's KN_FNV_INIT lacks its last digit; any start value works) */
    const uint64_t basis = 14695981039346656037ull;
    assert_true(kn_fnv1a(KN_FNV_INIT, "", 0) == KN_FNV_INIT);
    assert_true(kn_fnv1a(basis, "a", 1) == 0xaf63dc4c8601ec8cull);
    assert_true(kn_fnv1a(basis, "foobar", 6) == 0x85944171f73967e8ull);
    /* continuing a hash equals hashing the concatenation */
    assert_true(kn_fnv1a(kn_fnv1a(KN_FNV_INIT, "foo", 3), "bar", 3) == kn_fnv1a(KN_FNV_INIT, "foobar", 6));
}

static void test_cpu_features(void **state)
{
    (void)state;
    uint64_t f = kn_cpu_features();
    /* AVX-512 extensions are reported only with AVX512F, AVX2 only with AVX */
    if (f & (KN_CPU_AVX512BW | KN_CPU_AVX512DQ | KN_CPU_AVX512VL | KN_CPU_AVX512VNNI))
        assert_true(f & KN_CPU_AVX512F);
    if (f & KN_CPU_AVX2) assert_true(f & KN_CPU_AVX);
#if defined(__AVX2__)
    assert_true(f & KN_CPU_AVX2);
#endif
    setenv("KILN_CPU_MASK", "0x3", 1);
    assert_true(kn_cpu_features() == (f & 3));
    unsetenv("KILN_CPU_MASK");
    assert_true(kn_cpu_features() == f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta_round_trip),
        cmocka_unit_test(test_meta_empty),
        cmocka_unit_test(test_meta_truncations),
        cmocka_unit_test(test_meta_byte_flips),
        cmocka_unit_test(test_meta_many_small_records),
        cmocka_unit_test(test_meta_write_refuses_inconsistent),
        cmocka_unit_test(test_meta_opnode_compute),
        cmocka_unit_test(test_meta_opnode_nhwc),
        cmocka_unit_test(test_meta_read_rejects_bad_values),
        cmocka_unit_test(test_meta_dynamic_slots),
        cmocka_unit_test(test_meta_profile_records),
        cmocka_unit_test(test_meta_dynamic_dims),
        cmocka_unit_test(test_attrs_every_kind),
        cmocka_unit_test(test_attrs_graph_refused),
        cmocka_unit_test(test_fnv1a),
        cmocka_unit_test(test_cpu_features),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
