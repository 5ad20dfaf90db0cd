/*
 * tests/codegen/test_parallel.c — generated loops on the session's threads
 * (codegen/cpu/par.c, kn_rt_parallel_for): a model with large elementwise
 * (broadcast), Transpose, pooling, Softmax (over channels' rows and over
 * attention heads), ReduceMean, Concat, Slice, Pad, Resize, LayerNorm,
 * ArgMax, Gather, BatchNormalization (parameters cut with the channels)
 * and Softmax over 197 tokens (a prime: units of 22 rows and a tail of 21)
 * nodes, and elementwise nodes over an image's 3 channels (cut along
 * [360, 112] views of their elements, the per-channel one along the 3), is compiled (poolings that oneDNN does not take: it runs the
 * others); `--report` says each of them is parallel; outputs are bitwise identical at 1, 2 and 4 threads (also
 * after switching counts on one session) and match the reference evaluator.
 * A small node, and a MaxPool asked for its Indices, stay on one thread.
 */
#include <fcntl.h>
#include <math.h>
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
#include "eval.h"
#include "kiln/kiln.h"
#include "text.h"

static const char *const k_model =
    "kiln-ir v1\n"
    "opset \"\" 17\n"
    "graph main(%x: f32[1,64,32,32], %t: f32[1,128,256], %ls: f32[256], %lb: f32[256], %emb: f32[300,512],\n"
    "           %idx: i64[1,128], %att: f32[1,4,128,128], %small: f32[1,8,16], %v: f32[1,197,192],\n"
    "           %img: f32[1,3,120,112]) {\n"
    "  %bias = const f32[64,1,1] [BIAS]\n"
    "  %b64 = const f32[64] [BIAS]\n"
    "  %a: f32[1,64,32,32] = Add(%x, %bias) #\"add\"\n"
    "  %r: f32[1,64,32,32] = Relu(%a) #\"relu\"\n"
    "  %tr: f32[1,64,32,32] = Transpose(%r) {perm=[0,1,3,2]} #\"transpose\"\n"
    "  %mp: f32[1,64,16,16] = MaxPool(%tr) {kernel_shape=[2,2], strides=[2,2], auto_pad=\"SAME_UPPER\"} "
    "#\"maxpool\"\n"
    "  %gp: f32[1,64,1,1] = GlobalMaxPool(%r) #\"gmp\"\n"
    "  %sm: f32[1,64,32,32] = Softmax(%tr) {axis=-1} #\"softmax\"\n"
    "  %rm: f32[1,64,32,1] = ReduceMean(%sm) {axes=[3], keepdims=1} #\"reducemean\"\n"
    "  %cat: f32[1,64,64,32] = Concat(%sm, %tr) {axis=2} #\"concat\"\n"
    "  %st = const i64[1] [1]\n"
    "  %en = const i64[1] [60]\n"
    "  %ax = const i64[1] [2]\n"
    "  %sl: f32[1,64,59,32] = Slice(%cat, %st, %en, %ax) #\"slice\"\n"
    "  %pads = const i64[8] [0, 0, 1, 2, 0, 0, 2, 1]\n"
    "  %pd: f32[1,64,35,35] = Pad(%tr, %pads) #\"pad\"\n"
    "  %sc = const f32[4] [1.0, 1.0, 2.0, 2.0]\n"
    "  %rs: f32[1,64,64,64] = Resize(%tr, _, %sc) {mode=\"nearest\"} #\"resize\"\n"
    "  %ln: f32[1,128,256] = LayerNormalization(%t, %ls, %lb) {axis=-1} #\"layernorm\"\n"
    "  %th: f32[1,128,256] = Tanh(%ln) #\"tanh\"\n"
    "  %mu: f32[1,128,256] = Mul(%ln, %th) #\"mul\"\n"
    "  %am: i64[1,128] = ArgMax(%mu) {axis=-1, keepdims=0} #\"argmax\"\n"
    "  %ga: f32[1,128,512] = Gather(%emb, %idx) {axis=0} #\"gather\"\n"
    "  %as: f32[1,4,128,128] = Softmax(%att) {axis=-1} #\"attn_softmax\"\n"
    "  %ss: f32[1,8,16] = Softmax(%small) {axis=-1} #\"small_softmax\"\n"
    "  %bvar = const f32[64] [POS]\n"
    "  %bn: f32[1,64,32,32] = BatchNormalization(%x, %bvar, %b64, %b64, %bvar) #\"batchnorm\"\n"
    "  %mq: f32[1,64,16,16], %mi: i64[1,64,16,16] = MaxPool(%tr) {kernel_shape=[2,2], strides=[2,2]} #\"maxpool_idx\"\n"
    "  %vs: f32[1,197,192] = Softmax(%v) {axis=-1} #\"prime_softmax\"\n"
    "  %half = const f32[] [0.5]\n"
    "  %mean = const f32[1,3,1,1] [0.25, -0.5, 1.0]\n"
    "  %ic: f32[1,3,120,112] = Sub(%img, %half) #\"img_sub\"\n"
    "  %iq: f32[1,3,120,112] = Mul(%ic, %img) #\"img_mul\"\n"
    "  %in: f32[1,3,120,112] = Sub(%iq, %mean) #\"img_norm\"\n"
    "  return %mp, %gp, %rm, %sl, %pd, %rs, %mu, %am, %ga, %as, %ss, %bn, %mq, %mi, %vs, %in\n"
    "}\n";

/* the nodes expected to be parallel, and one that is too small */
static const char *const k_parallel[] = {"add", "relu", "transpose", "maxpool", "gmp", "softmax", "reducemean",
                                         "concat", "slice", "pad", "resize", "layernorm", "tanh", "mul",
                                         "argmax", "gather", "attn_softmax", "batchnorm",
                                         "prime_softmax", "img_sub", "img_mul", "img_norm"};

#define N_IN 10
#define N_OUT 16

static uint32_t g_seed = 777;
static float frand(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* k_model with BIAS and POS replaced by 64 values each (positive for POS). */
static char *model_text(void)
{
    char vals[2][64 * 16], *at[2] = {vals[0], vals[1]};
    for (int i = 0; i < 64; i++) {
        at[0] += sprintf(at[0], "%s%.3f", i ? ", " : "", (i % 9) * 0.25 - 1.0);
        at[1] += sprintf(at[1], "%s%.3f", i ? ", " : "", (i % 7) * 0.5 + 0.25);
    }
    char *text = malloc(strlen(k_model) + 8 * sizeof vals[0]), *out = text;
    for (const char *p = k_model; *p;) {
        int k = !strncmp(p, "BIAS", 4) ? 0 : !strncmp(p, "POS", 3) ? 1 : -1;
        if (k < 0) {
            *out++ = *p++;
            continue;
        }
        out += sprintf(out, "%s", vals[k]);
        p += k ? 3 : 4;
    }
    *out = '\0';
    return text;
}

/* Compiles m with --report captured into *out_report (malloc'd). */
static void compile_reported(kn_model *m, const char *so, char **out_report)
{
    char path[] = "/tmp/kiln-par-report.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    kn_compile_opts o = {.output = so, .opt_level = 3, .target = "native", .name = "par", .report = true};
    int st = kn_compile_cpu(m, &o);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    if (st) fprintf(stderr, "%s\n", kn_last_error());
    assert_int_equal(st, KN_OK);
    off_t len = lseek(fd, 0, SEEK_END);
    char *rep = calloc((size_t)len + 1, 1);
    assert_int_equal(pread(fd, rep, (size_t)len, 0), len);
    close(fd);
    unlink(path);
    *out_report = rep;
}

/* The report's line for node `name` says "generated, parallel". */
static bool reported_parallel(const char *report, const char *name)
{
    size_t len = strlen(name);
    for (const char *l = report; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, name, len) || l[len] != ' ') continue;
        const char *end = strchr(l, '\n');
        const char *hit = strstr(l, "generated, parallel");
        return hit && (!end || hit < end);
    }
    return false;
}

static void run_at(kn_session *s, int threads, kn_tensor *ins, void **outs)
{
    assert_int_equal(kn_session_set_threads(s, threads), KN_OK);
    const void *in[N_IN];
    for (int i = 0; i < N_IN; i++) in[i] = ins[i].data;
    int st = kn_session_run(s, in, outs);
    if (st) fprintf(stderr, "%s\n", kn_last_error());
    assert_int_equal(st, KN_OK);
}

static void test_parallel_bitwise(void **state)
{
    (void)state;
    char *text = model_text();
    kn_model *m = NULL;
    int st = kn_ir_parse(text, "par.kir", &m);
    if (st) fprintf(stderr, "%s\n", kn_last_error());
    assert_int_equal(st, KN_OK);
    free(text);
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);

    /* inputs, in graph order */
    kn_tensor ins[N_IN];
    const char *names[N_IN];
    for (int i = 0; i < N_IN; i++) {
        const kn_value *v = m->graph->inputs[i];
        names[i] = v->name;
        assert_int_equal(kn_tensor_alloc(&ins[i], v->dtype, v->shape.rank, v->shape.dims), KN_OK);
        size_t n = ins[i].nbytes / kn_dtype_nbytes(v->dtype, 1);
        for (size_t k = 0; k < n; k++) {
            if (v->dtype == KN_I64) ((int64_t *)ins[i].data)[k] = (int64_t)((k * 131) % 300);
            else ((float *)ins[i].data)[k] = frand() * 4.0f;
        }
    }
    kn_tensor ref[N_OUT];
    memset(ref, 0, sizeof ref);
    assert_int_equal(kn_eval_model(m, N_IN, names, ins, ref), KN_OK);

    char dir[] = "/tmp/kiln-par.XXXXXX", so[256];
    assert_non_null(mkdtemp(dir));
    snprintf(so, sizeof so, "%s/par.so", dir);
    char *report = NULL;
    compile_reported(m, so, &report);
    for (size_t i = 0; i < sizeof k_parallel / sizeof *k_parallel; i++) {
        if (!reported_parallel(report, k_parallel[i])) fprintf(stderr, "not parallel: %s\n%s", k_parallel[i], report);
        assert_true(reported_parallel(report, k_parallel[i]));
    }
    assert_false(reported_parallel(report, "small_softmax"));
    assert_false(reported_parallel(report, "maxpool_idx")); /* flat indices into the whole input */
    free(report);
    kn_model_free(m);

    kn_artifact *art = NULL;
    assert_int_equal(kn_artifact_open(so, &art), KN_OK);
    kn_session *s = NULL;
    assert_int_equal(kn_session_create(art, &s), KN_OK);
    void *outs[3][N_OUT];
    static const int threads[3] = {1, 2, 4};
    for (int t = 0; t < 3; t++) {
        for (int k = 0; k < N_OUT; k++) outs[t][k] = calloc(ref[k].nbytes, 1);
        run_at(s, threads[t], ins, outs[t]);
    }
    for (int k = 0; k < N_OUT; k++) {
        assert_memory_equal(outs[0][k], outs[1][k], ref[k].nbytes);
        assert_memory_equal(outs[0][k], outs[2][k], ref[k].nbytes);
    }
    /* back to 1 thread, then 2 again: still the same bytes */
    run_at(s, 1, ins, outs[1]);
    run_at(s, 2, ins, outs[2]);
    for (int k = 0; k < N_OUT; k++) {
        assert_memory_equal(outs[0][k], outs[1][k], ref[k].nbytes);
        assert_memory_equal(outs[0][k], outs[2][k], ref[k].nbytes);
    }
    /* and what they computed is right */
    for (int k = 0; k < N_OUT; k++) {
        if (ref[k].dtype == KN_I64) {
            assert_memory_equal(outs[0][k], ref[k].data, ref[k].nbytes);
            continue;
        }
        const float *got = outs[0][k], *want = ref[k].data;
        for (size_t e = 0; e < ref[k].nbytes / sizeof(float); e++) {
            if (fabsf(got[e] - want[e]) > 1e-4f + 1e-4f * fabsf(want[e]))
                fail_msg("output %d element %zu: %g, reference %g", k, e, got[e], want[e]);
        }
    }
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < N_OUT; k++) free(outs[t][k]);
    for (int k = 0; k < N_OUT; k++) kn_tensor_free(&ref[k]);
    for (int i = 0; i < N_IN; i++) kn_tensor_free(&ins[i]);
    kn_session_free(s);
    kn_artifact_close(art);
    unlink(so);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_parallel_bitwise)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
