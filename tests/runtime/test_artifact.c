/*
 * tests/runtime/test_artifact.c — loading and running artifacts without the
 * compiler: descriptors are made by hand here (static artifacts) or written
 * as C, with their meta printed as a byte array, and built into a .so with
 * the system's cc (shared artifacts). The "model" computes
 * y = LeakyRelu(x + 1, alpha 0.5): the add is "generated code" writing the
 * arena, the LeakyRelu runs through kn_rt_opnode_exec like a runtime-kernel
 * node. Every refusal at open and at run is checked for its message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <unistd.h>

#include "kiln/kiln.h"
#include "opdesc.h"
#include "test_skip.h"

#define N 4

/* ---- a hand-made model ------------------------------------------------------ */

typedef struct model_opts {
    uint64_t cpu_features;
    const char *weights_file;
    uint64_t weights_hash;
    const char *op_type; /* of opnode 0 */
    int64_t embedded_weights; /* bytes, when weights_file is NULL */
    const kn_abi_dnnl *dnnl;  /* one record, or NULL */
} model_opts;

static kn_abi_tensor f32_1x4(const char *name)
{
    return (kn_abi_tensor){.name = name, .dtype = KN_F32, .rank = 2, .dims = {1, N}, .nbytes = 4 * N};
}

/* Meta of: input x f32[1,4], output y f32[1,4], arena 64 bytes;
 * opnode 0 LeakyRelu(alpha 0.5) f32[1,4] → f32[1,4];
 * opnode 1 NonZero f32[1,4] → i64[2,4] (as if the compiler assumed no zeros). */
static void model_meta(const model_opts *o, unsigned char **bytes, size_t *len)
{
    static kn_abi_tensor x, y, t0, t1, nz;
    x = f32_1x4("x");
    y = f32_1x4("y");
    t0 = f32_1x4("t0");
    t1 = f32_1x4("t1");
    nz = (kn_abi_tensor){.name = "nz_out", .dtype = KN_I64, .rank = 2, .dims = {2, N}, .nbytes = 8 * 2 * N};
    kn_attr alpha = {.name = "alpha", .kind = KN_ATTR_FLOAT, .f = 0.5f};
    unsigned char *attrs;
    size_t attrs_len;
    assert_int_equal(kn_attrs_write(&alpha, 1, &attrs, &attrs_len), 0);
    const char *op_type = o && o->op_type ? o->op_type : "LeakyRelu";
    kn_abi_opnode ops[2] = {
        {.op = KN_OP_LeakyRelu, .n_inputs = 1, .n_outputs = 1, .opset = 16, .name = "leaky", .op_type = op_type,
         .inputs = &t0, .outputs = &t1, .attrs = attrs, .attrs_len = (int64_t)attrs_len},
        {.op = KN_OP_NonZero, .n_inputs = 1, .n_outputs = 1, .opset = 13, .name = "nz", .op_type = "NonZero",
         .inputs = &t0, .outputs = &nz},
    };
    kn_meta m = {.model_hash = 42, .cpu_features = o ? o->cpu_features : 0, .name = "tiny",
                 .target = "x86-64", .kiln_version = "0.1.0", .n_inputs = 1, .n_outputs = 1,
                 .inputs = &x, .outputs = &y, .arena_bytes = 64, .intermediate_bytes = 64,
                 .weights_bytes = o && o->weights_file ? 4 * N : o ? o->embedded_weights : 0,
                 .n_dnnl = o && o->dnnl ? 1 : 0, .dnnl = o ? (kn_abi_dnnl *)o->dnnl : NULL,
                 .weights_file = o ? o->weights_file : NULL, .weights_hash = o ? o->weights_hash : 0,
                 .n_opnodes = 2, .opnodes = ops};
    assert_int_equal(kn_meta_write(&m, bytes, len), 0);
    free(attrs);
}

/* What generated code would do: t = x + 1 (or + weights) in the arena, then
 * the LeakyRelu node through the runtime. */
static int run_leaky(kn_exec *ex, char *arena, const char *weights, void *const *inputs, void *const *outputs)
{
    const float *x = inputs[0];
    float *t = (float *)arena;
    for (int i = 0; i < N; i++) t[i] = x[i] + (weights ? ((const float *)weights)[i] : 1.0f);
    const void *in[1] = {t};
    void *out[1] = {outputs[0]};
    return kn_rt_opnode_exec(ex, 0, in, out);
}

static int run_nonzero(kn_exec *ex, char *arena, const char *weights, void *const *inputs, void *const *outputs)
{
    (void)weights;
    (void)outputs;
    const void *in[1] = {inputs[0]};
    void *out[1] = {arena};
    return kn_rt_opnode_exec(ex, 1, in, out);
}

static kn_artifact_desc make_desc(const unsigned char *meta, size_t len, kn_abi_run_fn run)
{
    return (kn_artifact_desc){KN_ABI_MAGIC, KN_ABI_VERSION, meta, len, NULL, 0, run, NULL, 0};
}

static void expect_leaky(const float *x, const float *y, const float *add)
{
    for (int i = 0; i < N; i++) {
        float t = x[i] + (add ? add[i] : 1.0f);
        assert_true(y[i] == (t < 0 ? 0.5f * t : t));
    }
}

/* ---- dynamic dims ------------------------------------------------------------- */

/* Meta of y = LeakyRelu(x + 1) with x, y f32[batch, 2], batch from 1 to 4
 * (--max batch=4): the arena value t0 and the opnode's tensors follow batch. */
static void dyn_meta(unsigned char **bytes, size_t *len)
{
    static kn_abi_tensor x, y, t0, t1;
    static kn_abi_sym sym = {"batch", 4, 1, 1, 0};
    kn_abi_tensor row = {.dtype = KN_F32, .rank = 2, .dims = {4, 2}, .nbytes = 32, .dim_sym = {1}, .dim_a = {1}};
    x = y = t0 = t1 = row;
    x.name = "x", y.name = "y", t0.name = "t0", t1.name = "t1";
    kn_attr alpha = {.name = "alpha", .kind = KN_ATTR_FLOAT, .f = 0.5f};
    unsigned char *attrs;
    size_t attrs_len;
    assert_int_equal(kn_attrs_write(&alpha, 1, &attrs, &attrs_len), 0);
    kn_abi_opnode op = {.op = KN_OP_LeakyRelu, .n_inputs = 1, .n_outputs = 1, .opset = 16, .name = "leaky",
                        .op_type = "LeakyRelu", .inputs = &t0, .outputs = &t1, .attrs = attrs,
                        .attrs_len = (int64_t)attrs_len};
    kn_meta m = {.name = "dyn", .target = "x86-64", .kiln_version = "0.1.0", .n_inputs = 1, .n_outputs = 1,
                 .inputs = &x, .outputs = &y, .arena_bytes = 64, .intermediate_bytes = 64, .n_opnodes = 1,
                 .opnodes = &op, .n_syms = 1, .syms = &sym};
    assert_int_equal(kn_meta_write(&m, bytes, len), 0);
    free(attrs);
}

/* What generated code in rows would do: x + 1 for the batch of this run. */
static int run_dyn(kn_exec *ex, char *arena, const char *weights, void *const *inputs, void *const *outputs)
{
    (void)weights;
    int64_t n = kn_rt_sym(ex, 0);
    const float *x = inputs[0];
    float *t = (float *)arena;
    for (int64_t i = 0; i < 2 * n; i++) t[i] = x[i] + 1.0f;
    const void *in[1] = {t};
    void *out[1] = {outputs[0]};
    return kn_rt_opnode_exec(ex, 0, in, out);
}

static void expect_error(int st, const char *text)
{
    assert_int_not_equal(st, 0);
    if (!strstr(kn_last_error(), text)) fail_msg("'%s' lacks '%s'", kn_last_error(), text);
}

/* The batch comes from the input (run_tensors) or kn_session_set_dim (raw
 * runs); the runtime kernel sees the run's shape; values outside 1..4, and
 * unknown names, are refused; a refused run keeps the set value. */
static void test_dynamic_dims(void **state)
{
    (void)state;
    unsigned char *meta;
    size_t len;
    dyn_meta(&meta, &len);
    kn_artifact_desc d = make_desc(meta, len, run_dyn);
    kn_artifact *a;
    kn_session *s;
    assert_int_equal(kn_artifact_from_descriptor(&d, NULL, &a), 0);
    assert_int_equal(kn_session_create(a, &s), 0);
    kn_tensor x, y;
    assert_int_equal(kn_tensor_alloc(&x, KN_F32, 2, (int64_t[]){3, 2}), 0);
    float *xv = x.data;
    for (int i = 0; i < 6; i++) xv[i] = (float)i - 3.0f;
    assert_int_equal(kn_session_run_tensors(s, 1, &x, 1, &y), 0);
    assert_int_equal(y.rank, 2);
    assert_int_equal(y.dims[0], 3);
    expect_leaky(xv, y.data, NULL);
    expect_leaky(xv + 2, (float *)y.data + 2, NULL); /* elements 2..5 */
    kn_tensor_free(&y);
    kn_tensor x5;
    assert_int_equal(kn_tensor_alloc(&x5, KN_F32, 2, (int64_t[]){5, 2}), 0);
    expect_error(kn_session_run_tensors(s, 1, &x5, 1, &y),
                 "input 'x': dim 0 (batch) is 5, the artifact was compiled for at most 4");
    kn_tensor_free(&x5);
    /* raw buffers: the set batch, not the buffers' capacity, decides what is written */
    expect_error(kn_session_set_dim(s, "batch", 5), "dynamic dim 'batch' set to 5, the artifact was compiled for 1 to 4");
    expect_error(kn_session_set_dim(s, "batch", 0), "set to 0");
    expect_error(kn_session_set_dim(s, "seq", 2), "the artifact has no dynamic dim named 'seq'");
    assert_int_equal(kn_session_set_dim(s, "batch", 2), 0);
    x.nbytes = 8; /* dims [3,2] in 8 bytes: refused after the batch was read from it */
    expect_error(kn_session_run_tensors(s, 1, &x, 1, &y), "holds 8 bytes, expected 24");
    x.nbytes = 24;
    float out[8];
    for (int i = 0; i < 8; i++) out[i] = 99.0f;
    const void *in[1] = {xv};
    void *outs[1] = {out};
    assert_int_equal(kn_session_run(s, in, outs), 0);
    expect_leaky(xv, out, NULL);
    for (int i = 4; i < 8; i++) assert_true(out[i] == 99.0f);
    kn_tensor_free(&x);
    kn_session_free(s);
    kn_artifact_close(a);
    free(meta);
}

/* ---- static artifacts --------------------------------------------------------- */

static void test_static_run(void **state)
{
    (void)state;
    unsigned char *meta;
    size_t len;
    model_meta(NULL, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, run_leaky);
    kn_artifact *a;
    assert_int_equal(kn_artifact_from_descriptor(&d, NULL, &a), 0);
    assert_ptr_equal(kn_artifact_descriptor(a), &d);
    assert_int_equal(kn_artifact_num_inputs(a), 1);
    assert_int_equal(kn_artifact_num_outputs(a), 1);
    kn_io_info info;
    assert_int_equal(kn_artifact_input_info(a, 0, &info), 0);
    assert_string_equal(info.name, "x");
    assert_int_equal(info.dtype, KN_F32);
    assert_int_equal(info.rank, 2);
    assert_int_equal(info.dims[1], N);
    assert_int_equal(info.nbytes, 4 * N);
    assert_int_equal(kn_artifact_output_info(a, 0, &info), 0);
    assert_string_equal(info.name, "y");
    assert_int_equal(kn_artifact_output_info(a, 1, &info), KN_ERR_INVALID);
    assert_int_equal(kn_artifact_find_input(a, "x"), 0);
    assert_int_equal(kn_artifact_find_output(a, "y"), 0);
    assert_int_equal(kn_artifact_find_input(a, "y"), -1);

    kn_session *s;
    assert_int_equal(kn_session_create(a, &s), 0);
    assert_int_equal(kn_session_set_threads(s, 4), 0);
    assert_int_equal(kn_session_set_threads(s, 0), KN_ERR_INVALID);
    float x[N] = {1, -3, 0, -1.5f}, y[N] = {0};
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(kn_session_run(s, in, out), 0);
    expect_leaky(x, y, NULL);

    kn_tensor tin = {.dtype = KN_F32, .rank = 2, .dims = {1, N}, .data = x, .nbytes = sizeof x};
    kn_tensor tout[1];
    assert_int_equal(kn_session_run_tensors(s, 1, &tin, 1, tout), 0);
    assert_int_equal(tout[0].rank, 2);
    expect_leaky(x, tout[0].data, NULL);
    kn_tensor_free(&tout[0]);

    kn_tensor wrong = tin;
    wrong.dims[1] = 5;
    assert_int_equal(kn_session_run_tensors(s, 1, &wrong, 1, tout), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "input 'x': expected f32[1,4], got f32[1,5]");
    assert_null(tout[0].data);
    wrong = tin;
    wrong.dtype = KN_I32;
    assert_int_equal(kn_session_run_tensors(s, 1, &wrong, 1, tout), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "input 'x': expected f32[1,4], got i32[1,4]");
    wrong = tin;
    wrong.rank = 1;
    wrong.dims[0] = 4;
    assert_int_equal(kn_session_run_tensors(s, 1, &wrong, 1, tout), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "input 'x': expected f32[1,4], got f32[4]");
    assert_int_equal(kn_session_run_tensors(s, 0, NULL, 1, tout), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "given 0 inputs and 1 outputs, the model has 1 and 1"));
    const void *null_in[1] = {NULL};
    assert_int_equal(kn_session_run(s, null_in, out), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "input 'x': NULL buffer");

    /* the thread policy: both values taken, runs the same either way, any
     * other value refused; KILN_THREADS sets a new session's */
    assert_int_equal(kn_session_set_thread_policy(s, KN_THREADS_FIXED), 0);
    assert_int_equal(kn_session_run(s, in, out), 0);
    expect_leaky(x, y, NULL);
    assert_int_equal(kn_session_set_thread_policy(s, (kn_thread_policy)7), KN_ERR_INVALID);
    assert_string_equal(kn_last_error(), "kn_session_set_thread_policy: unknown policy 7");
    assert_int_equal(kn_session_set_thread_policy(s, KN_THREADS_ADAPTIVE), 0);
    for (int i = 0; i < 40; i++) {
        memset(y, 0, sizeof y);
        assert_int_equal(kn_session_run(s, in, out), 0);
        expect_leaky(x, y, NULL);
    }
    kn_session_free(s);
    setenv("KILN_THREADS", "sometimes", 1);
    assert_int_equal(kn_session_create(a, &s), KN_ERR_INVALID);
    assert_null(s);
    assert_non_null(strstr(kn_last_error(), "KILN_THREADS='sometimes': not a thread policy (adaptive, fixed)"));
    setenv("KILN_THREADS", "fixed", 1);
    assert_int_equal(kn_session_create(a, &s), 0);
    assert_true(s != NULL);
    unsetenv("KILN_THREADS");

    kn_session_free(s);
    kn_artifact_close(a);
    free(meta);
    assert_string_equal(kn_runtime_version(), "0.1.0");
    assert_int_equal(kn_runtime_abi_version(), KN_ABI_VERSION);
}

static void test_data_dependent_shape_refused(void **state)
{
    (void)state;
    unsigned char *meta;
    size_t len;
    model_meta(NULL, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, run_nonzero);
    kn_artifact *a;
    kn_session *s;
    assert_int_equal(kn_artifact_from_descriptor(&d, NULL, &a), 0);
    assert_int_equal(kn_session_create(a, &s), 0);
    float x[N] = {1, 2, 3, 4}, y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(kn_session_run(s, in, out), 0); /* four non-zeros: the recorded shape */
    x[1] = 0;
    x[3] = 0;
    assert_int_equal(kn_session_run(s, in, out), KN_ERR_UNSUPPORTED);
    assert_non_null(strstr(kn_last_error(), "node 'nz' (NonZero): output 0 is i64[2,2], but the artifact was "
                                            "compiled for i64[2,4]"));
    kn_session_free(s);
    kn_artifact_close(a);
    free(meta);
}

static void expect_open_error(const kn_artifact_desc *d, const char *dir, int code, const char *text)
{
    kn_artifact *a = (kn_artifact *)1;
    kn_error_clear();
    assert_int_equal(kn_artifact_from_descriptor(d, dir, &a), code);
    assert_null(a);
    if (!strstr(kn_last_error(), text)) fail_msg("message '%s' lacks '%s'", kn_last_error(), text);
}

static void test_static_refusals(void **state)
{
    (void)state;
    unsigned char *meta;
    size_t len;
    model_meta(NULL, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, run_leaky);
    d.magic = 0x12345678;
    expect_open_error(&d, NULL, KN_ERR_INVALID, "static artifact: bad descriptor magic 0x12345678");
    d = make_desc(meta, len, run_leaky);
    d.abi_version = 1;
    char want[160]; /* the current version, whatever it is */
    snprintf(want, sizeof want, "static artifact: was built for kiln ABI v1; this runtime reads v%u: recompile it",
             KN_ABI_VERSION);
    expect_open_error(&d, NULL, KN_ERR_UNSUPPORTED, want);
    d = make_desc(meta, len - 1, run_leaky);
    expect_open_error(&d, NULL, KN_ERR_INVALID, "static artifact: malformed meta: ");
    d = make_desc(meta, len, NULL);
    expect_open_error(&d, NULL, KN_ERR_INVALID, "no meta or no run function");
    free(meta);

    model_opts o = {.op_type = "NoSuchOp"};
    model_meta(&o, &meta, &len);
    d = make_desc(meta, len, run_leaky);
    expect_open_error(&d, NULL, KN_ERR_UNSUPPORTED, "node 'leaky' (NoSuchOp): this libkiln_rt has no kernel");
    free(meta);
}

static void test_embedded_weights(void **state)
{
    (void)state;
    static _Alignas(64) const float w[2 * N] = {1, 2, 3, 4, -100, -100, -100, -100};
    model_opts o = {.embedded_weights = 4 * N, .weights_hash = kn_weights_hash(w, 4 * N)};
    unsigned char *meta;
    size_t len;
    model_meta(&o, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, run_leaky);
    d.weights = (const unsigned char *)w;
    d.weights_len = 4 * N - 1;
    expect_open_error(&d, NULL, KN_ERR_INVALID, "static artifact: embedded weights hold 15 bytes, the model needs 16");
    d.weights_len = 4 * N;
    d.weights = (const unsigned char *)w + 4;
    expect_open_error(&d, NULL, KN_ERR_INVALID, "static artifact: embedded weights are not 64-byte aligned");
    d.weights = (const unsigned char *)w;
    kn_artifact *a;
    kn_session *s;
    assert_int_equal(kn_artifact_from_descriptor(&d, NULL, &a), 0);
    assert_int_equal(kn_session_create(a, &s), 0);
    float x[N] = {-2, -3, -4, 1}, y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(kn_session_run(s, in, out), 0);
    expect_leaky(x, y, w);
    kn_session_free(s);
    kn_artifact_close(a);
    free(meta);

    /* a oneDNN record whose constant weights lie past the end */
    kn_abi_dnnl rec = {.kind = KN_DNNL_MATMUL, .alpha = 1,
                       .src = {.dtype = KN_F32, .rank = 2, .dims = {1, 2}, .nbytes = 8},
                       .wei = {.dtype = KN_F32, .rank = 2, .dims = {2, 2}, .nbytes = 16},
                       .dst = {.dtype = KN_F32, .rank = 2, .dims = {1, 2}, .nbytes = 8},
                       .wei_ref = {KN_LOC_WEIGHTS, 0, 8}};
    o.dnnl = &rec;
    model_meta(&o, &meta, &len);
    d = make_desc(meta, len, run_leaky);
    d.weights = (const unsigned char *)w;
    d.weights_len = sizeof w;
    expect_open_error(&d, NULL, KN_ERR_INVALID,
                      "static artifact: oneDNN record 0: weight (offset 8, 16 bytes) lies outside the 16 bytes of "
                      "weights");
    free(meta);
}

static void test_cpu_refusal(void **state)
{
    (void)state;
    unsigned char *meta;
    size_t len;
    model_opts o = {.cpu_features = 1ull << 40};
    model_meta(&o, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, run_leaky);
    expect_open_error(&d, NULL, KN_ERR_UNSUPPORTED,
                      "static artifact: needs feature bit 40 which this CPU lacks; recompile with --target native");
    free(meta);
    /* pretend to be an AVX2 machine */
    setenv("KILN_CPU_MASK", "0x1f", 1);
    o.cpu_features = KN_CPU_AVX2 | KN_CPU_AVX512F | KN_CPU_AVX512BW;
    model_meta(&o, &meta, &len);
    d = make_desc(meta, len, run_leaky);
    if (kn_cpu_features() & KN_CPU_AVX2)
        expect_open_error(&d, NULL, KN_ERR_UNSUPPORTED,
                          "static artifact: needs AVX512F, AVX512BW which this CPU lacks; recompile with --target "
                          "x86-64-v3 or native");
    unsetenv("KILN_CPU_MASK");
    free(meta);
}

/* ---- files ------------------------------------------------------------------------ */

static char g_dir[64];

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void test_external_weights(void **state)
{
    (void)state;
    float w[N] = {0.5f, -10, 2, 3};
    model_opts o = {.weights_file = "tiny.weights", .weights_hash = kn_weights_hash(w, sizeof w)};
    unsigned char *meta;
    size_t len;
    model_meta(&o, &meta, &len);
    kn_artifact_desc d = make_desc(meta, len, run_leaky);
    unlink(tmp_path("tiny.weights"));
    expect_open_error(&d, g_dir, KN_ERR_IO, "external weights file");
    assert_non_null(strstr(kn_last_error(), "tiny.weights' cannot be opened"));
    write_file(tmp_path("tiny.weights"), w, sizeof w / 2);
    expect_open_error(&d, g_dir, KN_ERR_IO, "tiny.weights' is 8 bytes, the artifact needs 16 (truncated?)");
    float other[N] = {1, 2, 3, 4};
    write_file(tmp_path("tiny.weights"), other, sizeof other);
    expect_open_error(&d, g_dir, KN_ERR_INVALID, "tiny.weights' does not belong to this artifact");

    write_file(tmp_path("tiny.weights"), w, sizeof w);
    kn_artifact *a;
    kn_session *s;
    assert_int_equal(kn_artifact_from_descriptor(&d, g_dir, &a), 0);
    assert_int_equal(kn_session_create(a, &s), 0);
    float x[N] = {1, 2, -3, 4}, y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(kn_session_run(s, in, out), 0);
    expect_leaky(x, y, w);
    kn_session_free(s);
    kn_artifact_close(a);
    free(meta);
}

/* C source of a shared artifact with the given meta and ABI version; its
 * descriptor claims `lie` bytes of meta more than there are. */
static void write_artifact_source(const char *path, const unsigned char *meta, size_t len, unsigned abi, unsigned lie)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#include \"kiln/abi.h\"\nstatic const unsigned char meta[%zu] = {", len);
    for (size_t i = 0; i < len; i++) fprintf(f, "%s%u", i == 0 ? "\n" : i % 24 ? "," : ",\n", meta[i]);
    fprintf(f, "};\n"
               "static int run(kn_exec *ex, char *arena, const char *w, void *const *in, void *const *out) {\n"
               "    (void)w; const float *x = in[0]; float *t = (float *)arena;\n"
               "    for (int i = 0; i < %d; i++) t[i] = x[i] + 1.0f;\n"
               "    const void *ins[1] = {t}; void *outs[1] = {out[0]};\n"
               "    return kn_rt_opnode_exec(ex, 0, ins, outs);\n}\n"
               "const kn_artifact_desc kn_artifact_descriptor =\n"
               "    {KN_ABI_MAGIC, %uu, meta, sizeof meta + %uu, 0, 0, run};\n",
            N, abi, lie);
    fclose(f);
}

static int g_have_cc;

static int build_so(const char *src, const char *so)
{
    const char *root = getenv("KILN_SRC");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -O1 -I'%s/runtime/include' -o '%s' '%s'", root ? root : "..", so, src);
    return system(cmd);
}

static void expect_so_error(const char *path, int code, const char *text)
{
    kn_artifact *a = (kn_artifact *)1;
    assert_int_equal(kn_artifact_open(path, &a), code);
    assert_null(a);
    if (!strstr(kn_last_error(), text)) fail_msg("message '%s' lacks '%s'", kn_last_error(), text);
    if (!strstr(kn_last_error(), path)) fail_msg("message '%s' does not name '%s'", kn_last_error(), path);
}

typedef struct worker {
    const kn_artifact *art;
    float out[N];
    int failures;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    kn_session *s;
    if (kn_session_create(w->art, &s)) {
        w->failures = 1000;
        return NULL;
    }
    float x[N] = {0.25f, -7, 3.5f, -1};
    const void *in[1] = {x};
    for (int r = 0; r < 100; r++) {
        float y[N];
        void *out[1] = {y};
        if (kn_session_run(s, in, out)) w->failures++;
        else if (r == 0) memcpy(w->out, y, sizeof y);
        else if (memcmp(w->out, y, sizeof y)) w->failures++;
    }
    kn_session_free(s);
    return NULL;
}

static void test_shared_artifact(void **state)
{
    (void)state;
    if (!g_have_cc) KN_SKIP("no working cc to build a shared artifact");
    unsigned char *meta;
    size_t len;
    model_meta(NULL, &meta, &len);
    write_artifact_source(tmp_path("tiny.c"), meta, len, KN_ABI_VERSION, 0);
    assert_int_equal(build_so(tmp_path("tiny.c"), tmp_path("tiny.so")), 0);
    kn_artifact *a;
    if (kn_artifact_open(tmp_path("tiny.so"), &a)) fail_msg("%s", kn_last_error());
    assert_int_equal(kn_artifact_num_inputs(a), 1);
    assert_int_equal(kn_artifact_find_output(a, "y"), 0);
    kn_session *s;
    assert_int_equal(kn_session_create(a, &s), 0);
    float x[N] = {-4, -1, 0, 2}, y[N];
    const void *in[1] = {x};
    void *out[1] = {y};
    assert_int_equal(kn_session_run(s, in, out), 0);
    expect_leaky(x, y, NULL);
    kn_session_free(s);

    /* one artifact, eight threads, a session each: identical bits everywhere */
    worker w[8] = {0};
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        w[i].art = a;
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(w[i].failures, 0);
        assert_memory_equal(w[i].out, w[0].out, sizeof w[0].out);
    }
    kn_artifact_close(a);

    /* the same artifact built for another ABI */
    write_artifact_source(tmp_path("v1.c"), meta, len, 1, 0);
    assert_int_equal(build_so(tmp_path("v1.c"), tmp_path("v1.so")), 0);
    char want[160];
    snprintf(want, sizeof want, "v1.so: was built for kiln ABI v1; this runtime reads v%u: recompile it",
             KN_ABI_VERSION);
    expect_so_error(tmp_path("v1.so"), KN_ERR_UNSUPPORTED, want);
    /* a meta length that runs far past the library's mapping */
    write_artifact_source(tmp_path("lie.c"), meta, len, KN_ABI_VERSION, 1u << 30);
    assert_int_equal(build_so(tmp_path("lie.c"), tmp_path("lie.so")), 0);
    expect_so_error(tmp_path("lie.so"), KN_ERR_INVALID, "lie.so: the descriptor's meta lies outside the library");
    free(meta);
}

static void test_shared_refusals(void **state)
{
    (void)state;
    if (!g_have_cc) KN_SKIP("no working cc to build a shared artifact");
    /* a shared library that is not an artifact */
    write_file(tmp_path("plain.c"), "int answer(void) { return 42; }\n", 32);
    assert_int_equal(build_so(tmp_path("plain.c"), tmp_path("plain.so")), 0);
    expect_so_error(tmp_path("plain.so"), KN_ERR_INVALID, "is not a kiln artifact");

    /* a truncated one: dlopen's own reason is passed along */
    FILE *f = fopen(tmp_path("plain.so"), "rb");
    assert_non_null(f);
    unsigned char buf[4096];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(got > 200);
    write_file(tmp_path("cut.so"), buf, 200);
    expect_so_error(tmp_path("cut.so"), KN_ERR_IO, "cut.so: cannot be loaded: ");

    /* random bytes */
    unsigned seed = 99;
    for (size_t i = 0; i < sizeof buf; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (unsigned char)(seed >> 16);
    }
    write_file(tmp_path("noise.so"), buf, sizeof buf);
    expect_so_error(tmp_path("noise.so"), KN_ERR_IO, "noise.so: cannot be loaded: ");
    expect_so_error(tmp_path("missing.so"), KN_ERR_IO, "missing.so: cannot be loaded: ");
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/kiln_test_artifact_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    write_file(tmp_path("probe.c"), "int probe;\n", 11);
    g_have_cc = build_so(tmp_path("probe.c"), tmp_path("probe.so")) == 0;
    if (!g_have_cc) fprintf(stderr, "no working cc: the shared-artifact tests are skipped\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_run),
        cmocka_unit_test(test_dynamic_dims),
        cmocka_unit_test(test_data_dependent_shape_refused),
        cmocka_unit_test(test_static_refusals),
        cmocka_unit_test(test_embedded_weights),
        cmocka_unit_test(test_cpu_refusal),
        cmocka_unit_test(test_external_weights),
        cmocka_unit_test(test_shared_artifact),
        cmocka_unit_test(test_shared_refusals),
    };
    return kn_test_status(cmocka_run_group_tests(tests, setup, teardown));
}
