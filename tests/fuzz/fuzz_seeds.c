/*
 * tests/fuzz/fuzz_seeds.c — writes seed inputs for fuzz_meta and
 * fuzz_attrs: serialized kn_meta and attribute blobs made by the writers
 * the compiler uses (kn_meta_write, kn_attrs_write), so that the fuzzers
 * start from well-formed records of every kind instead of guessing magic
 * numbers and layouts. Generated at build time, never committed.
 *
 * Usage: fuzz_seeds meta|attrs DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/abi.h"
#include "kiln/status.h"
#include "opdesc.h"
#include "subgraph.h"

static int write_file(const char *dir, const char *name, const unsigned char *bytes, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len || fclose(f)) {
        fprintf(stderr, "fuzz_seeds: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

static kn_abi_tensor abi_tensor(const char *name, kn_dtype dt, int rank, const int64_t *dims)
{
    kn_abi_tensor t = {.name = name, .dtype = dt, .rank = rank};
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= (t.dims[i] = dims[i]);
    t.nbytes = rank < 0 ? 0 : (int64_t)kn_dtype_nbytes(dt, (size_t)n);
    return t;
}

/* body(a) = (a + k) * outer: a constant, a capture, two nodes. */
typedef struct body {
    kn_sg_value values[5];
    kn_tensor k;
    const kn_tensor *consts[1];
    int32_t const_ids[1], captures[1], inputs[1], outputs[1];
    int32_t add_io[3], mul_io[3];
    kn_sg_node nodes[2];
    kn_sg g;
} body;

static int make_body(body *b)
{
    memset(b, 0, sizeof *b);
    static const char *const names[5] = {"a", "k", "outer", "s", "o"};
    for (int i = 0; i < 5; i++) b->values[i] = (kn_sg_value){.name = names[i], .dtype = KN_F32, .rank = 1, .dims = {2}};
    int64_t two = 2;
    if (kn_tensor_alloc(&b->k, KN_F32, 1, &two)) return 1;
    ((float *)b->k.data)[0] = 1.0f, ((float *)b->k.data)[1] = 2.0f;
    b->consts[0] = &b->k;
    b->const_ids[0] = 1, b->captures[0] = 2, b->inputs[0] = 0, b->outputs[0] = 4;
    b->add_io[0] = 0, b->add_io[1] = 1, b->add_io[2] = 3;
    b->mul_io[0] = 3, b->mul_io[1] = 2, b->mul_io[2] = 4;
    b->nodes[0] = (kn_sg_node){.desc = {.op = KN_OP_Add, .name = "add0", .op_type = "Add", .domain = "", .opset = 17,
                                        .n_inputs = 2, .n_outputs = 1},
                               .inputs = b->add_io, .outputs = b->add_io + 2};
    b->nodes[1] = (kn_sg_node){.desc = {.op = KN_OP_Mul, .name = "mul0", .op_type = "Mul", .domain = "", .opset = 17,
                                        .n_inputs = 2, .n_outputs = 1},
                               .inputs = b->mul_io, .outputs = b->mul_io + 2};
    b->g = (kn_sg){.name = "body", .n_values = 5, .values = b->values, .n_consts = 1, .const_ids = b->const_ids,
                   .consts = b->consts, .n_captures = 1, .captures = b->captures, .n_inputs = 1, .n_outputs = 1,
                   .inputs = b->inputs, .outputs = b->outputs, .n_nodes = 2, .nodes = b->nodes};
    return 0;
}

static int write_attrs(const char *dir, const char *name, const kn_attr *a, int n, unsigned char **out, size_t *out_len)
{
    unsigned char *bytes = NULL;
    size_t len = 0;
    if (kn_attrs_write(a, n, &bytes, &len)) {
        fprintf(stderr, "fuzz_seeds: %s: %s\n", name, kn_last_error());
        return 1;
    }
    int st = write_file(dir, name, bytes, len);
    if (out) *out = bytes, *out_len = len;
    else free(bytes);
    return st;
}

/* One blob per attribute kind, one with every kind, one with a body. */
static int attrs_seeds(const char *dir, body *b)
{
    static float fl[3] = {0.5f, -1.0f, 3.0f};
    static int64_t in[3] = {0, -1, 1LL << 40};
    static const char *st[2] = {"relu", "NOTSET"};
    int64_t dims[2] = {2, 3};
    kn_tensor t = {0};
    if (kn_tensor_alloc(&t, KN_I64, 2, dims)) return 1;
    for (int i = 0; i < 6; i++) ((int64_t *)t.data)[i] = i - 2;
    kn_tensor *ts[2] = {&t, &b->k};
    kn_attr all[] = {
        {.name = "alpha", .kind = KN_ATTR_FLOAT, .f = 0.25f},
        {.name = "axis", .kind = KN_ATTR_INT, .i = -1},
        {.name = "mode", .kind = KN_ATTR_STRING, .s = "constant", .s_len = 8},
        {.name = "value", .kind = KN_ATTR_TENSOR, .t = &t},
        {.name = "scales", .kind = KN_ATTR_FLOATS, .n = 3, .floats = fl},
        {.name = "pads", .kind = KN_ATTR_INTS, .n = 3, .ints = in},
        {.name = "activations", .kind = KN_ATTR_STRINGS, .n = 2, .strings = st},
        {.name = "tensors", .kind = KN_ATTR_TENSORS, .n = 2, .tensors = ts},
        {.name = "body", .kind = KN_ATTR_GRAPH, .sg = &b->g},
    };
    int n_all = (int)(sizeof all / sizeof all[0]), rc = 0;
    char name[64];
    for (int i = 0; i < n_all && !rc; i++) {
        snprintf(name, sizeof name, "kind_%d.bin", (int)all[i].kind);
        rc = write_attrs(dir, name, &all[i], 1, NULL, NULL);
    }
    if (!rc) rc = write_attrs(dir, "every_kind.bin", all, n_all, NULL, NULL);
    if (!rc) rc = write_attrs(dir, "empty.bin", NULL, 0, NULL, NULL);
    kn_tensor_free(&t);
    return rc;
}

/* A static model with oneDNN records, an op node, steps and buffers; and a
 * dynamic one (slots, a symbol) whose op node carries a subgraph. */
static int meta_seeds(const char *dir, body *b)
{
    static const int64_t d_img[4] = {1, 3, 8, 8}, d_vec[2] = {1, 10}, d_4[1] = {4};
    kn_abi_tensor in[2] = {abi_tensor("image", KN_F32, 4, d_img), abi_tensor("mask", KN_BOOL, 2, d_vec)};
    in[0].dim_names[0] = "batch";
    kn_abi_tensor out[1] = {abi_tensor("logits", KN_F16, 2, d_vec)};
    kn_abi_tensor op_in[2] = {abi_tensor("t0", KN_F32, 1, d_4), abi_tensor(NULL, KN_DT_UNDEFINED, -1, NULL)};
    kn_abi_tensor op_out[1] = {abi_tensor("t1", KN_I64, 1, d_4)};
    kn_abi_dnnl dnnl[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        kn_abi_dnnl *d = &dnnl[i];
        d->kind = i == 0 ? KN_DNNL_CONV : i == 1 ? KN_DNNL_MATMUL : KN_DNNL_POOL;
        d->n_post = i == 2 ? 0 : 2;
        d->post[0] = (kn_abi_post){KN_POST_CLIP, 0.0f, 6.0f};
        d->post[1] = (kn_abi_post){KN_POST_SUM, 1.0f, 0.0f};
        d->src = in[0];
        d->wei = abi_tensor("w", KN_F32, 4, (int64_t[]){16, 3, 3, 3});
        d->dst = abi_tensor("y", KN_F32, 4, (int64_t[]){1, 16, 8, 8});
        d->alpha = 1.0f, d->groups = 1, d->spatial = 2;
        for (int k = 0; k < 3; k++) d->strides[k] = d->dilations[k] = d->kernel[k] = 1;
        d->wei_ref = (kn_abi_ref){KN_LOC_WEIGHTS, 0, 64};
        d->bias_ref = (kn_abi_ref){KN_LOC_ARENA, 0, 128};
    }
    kn_attr a[2] = {{.name = "alpha", .kind = KN_ATTR_FLOAT, .f = 0.25f},
                    {.name = "axes", .kind = KN_ATTR_INTS, .n = 2, .ints = (int64_t[]){0, -1}}};
    unsigned char *attrs = NULL, *body_attrs = NULL;
    size_t attrs_len = 0, body_len = 0;
    if (kn_attrs_write(a, 2, &attrs, &attrs_len)) return 1;
    kn_attr ba[1] = {{.name = "then_branch", .kind = KN_ATTR_GRAPH, .sg = &b->g}};
    if (kn_attrs_write(ba, 1, &body_attrs, &body_len)) return free(attrs), 1;
    kn_abi_opnode op[1] = {{.op = KN_OP_NonZero, .n_inputs = 2, .n_outputs = 1, .opset = 13, .name = "nz",
                            .op_type = "NonZero", .inputs = op_in, .outputs = op_out, .attrs = attrs,
                            .attrs_len = (int64_t)attrs_len}};
    kn_abi_step steps[3] = {{"conv_1", "Conv", 221184, 1000, 4096, 0},
                            {"nz", "NonZero", 4, 32, 32, -1},
                            {"(outputs)", "Copy", 0, 20, 20, -1}};
    kn_abi_buffer buffers[2] = {{"y", 0, 4096, 0, 1}, {"t1", 64, 64, 2, 2}};
    kn_meta m = {.model_hash = 0x1122334455667788ull, .cpu_features = KN_CPU_AVX2 | KN_CPU_FMA, .name = "net",
                 .target = "x86-64-v3", .kiln_version = "0.1.0", .n_inputs = 2, .n_outputs = 1, .inputs = in,
                 .outputs = out, .arena_bytes = 4096, .intermediate_bytes = 8192, .weights_bytes = 1 << 20,
                 .weights_file = "net.weights", .weights_hash = 0xdeadbeefcafef00dull, .n_dnnl = 3,
                 .n_opnodes = 1, .dnnl = dnnl, .opnodes = op, .n_steps = 3, .steps = steps, .n_buffers = 2,
                 .buffers = buffers};
    int rc = 0;
    unsigned char *bytes = NULL;
    size_t len = 0;
    if ((rc = kn_meta_write(&m, &bytes, &len)) == 0) rc = write_file(dir, "static.bin", bytes, len);
    free(bytes);

    /* dynamic: batch is a symbol (max 4), the op node's output has a slot */
    kn_abi_sym syms[1] = {{"batch", 4, 1, 1, 0}};
    in[0].dim_sym[0] = 1, in[0].dim_a[0] = 1, in[0].dims[0] = 4, in[0].nbytes *= 4;
    op_out[0] = (kn_abi_tensor){.name = "t1", .dtype = KN_I64, .rank = 2, .dims = {1, -1}, .slot = 1};
    op[0] = (kn_abi_opnode){.op = KN_OP_If, .n_inputs = 2, .n_outputs = 1, .n_captures = 1, .opset = 13,
                            .name = "if0", .op_type = "If", .inputs = op_in, .outputs = op_out,
                            .attrs = body_attrs, .attrs_len = (int64_t)body_len};
    m.n_syms = 1, m.syms = syms, m.n_slots = 1, m.weights_file = NULL;
    if (!rc && (rc = kn_meta_write(&m, &bytes, &len)) == 0) rc = write_file(dir, "dynamic.bin", bytes, len);
    free(bytes);

    kn_meta small = {.name = "tiny", .target = "x86-64", .kiln_version = "0.1.0", .n_inputs = 1, .n_outputs = 1,
                     .inputs = in + 1, .outputs = out, .arena_bytes = 64};
    if (!rc && (rc = kn_meta_write(&small, &bytes, &len)) == 0) rc = write_file(dir, "small.bin", bytes, len);
    free(bytes);
    free(attrs), free(body_attrs);
    if (rc) fprintf(stderr, "fuzz_seeds: meta: %s\n", kn_last_error());
    return rc != 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "meta") && strcmp(argv[1], "attrs"))) {
        fprintf(stderr, "usage: fuzz_seeds meta|attrs DIR\n");
        return 2;
    }
    body b;
    if (make_body(&b)) return 1;
    int rc = !strcmp(argv[1], "meta") ? meta_seeds(argv[2], &b) : attrs_seeds(argv[2], &b);
    kn_tensor_free(&b.k);
    if (!rc) printf("fuzz_seeds: %s seeds in %s\n", argv[1], argv[2]);
    return rc;
}
