/* kiln::FusedConv / kiln::FusedMatMul / kiln::FusedElementwise compiled
 * for the cpu backend: small models are fused by the passes, compiled (each
 * FusedConv/FusedMatMul must become one oneDNN primitive with post-ops, each
 * FusedElementwise one generated loop, not a runtime kernel call), run
 * through libkiln_rt and compared with the reference evaluator on the
 * unfused graph (1e-4 relative: oneDNN sums in another order, and oneDNN and
 * the generated code use their own activations). */
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
#include "pass.h"
#include "text.h"

static char g_dir[256];

static int setup_dir(void **state)
{
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/kiln-test-fused-XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char p[600];
    const char *files[] = {"m.so", "report.txt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, files[i]);
        unlink(p);
    }
    rmdir(g_dir);
    return 0;
}

static uint32_t g_seed = 5;
static float rnd(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 65536.0f * 2.0f - 1.0f;
}

/* Compiles m with --report into g_dir/m.so; every fused node must be
 * lowered to oneDNN, or be generated code for FusedElementwise. */
static void compile_checked(kn_model *m, const char *so, int layout)
{
    char report[600];
    snprintf(report, sizeof report, "%s/report.txt", g_dir);
    fflush(stdout);
    int saved = dup(1), fd = open(report, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 1);
    close(fd);
    kn_compile_opts o = {.output = so, .opt_level = 3, .target = "native", .report = true, .layout = layout};
    int st = kn_compile_cpu(m, &o);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    if (st) fail_msg("compile: %s", kn_last_error());
    FILE *f = fopen(report, "r");
    assert_non_null(f);
    char line[512];
    int fused = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "FusedElementwise")) {
            fused++;
            if (!strstr(line, "generated")) fail_msg("a FusedElementwise is not generated code: %s", line);
            continue;
        }
        if (!strstr(line, "FusedConv") && !strstr(line, "FusedMatMul")) continue;
        fused++;
        if (!strstr(line, "oneDNN")) fail_msg("a fused node is not a oneDNN primitive: %s", line);
    }
    fclose(f);
    assert_true(fused > 0);
}

/* Runs the artifact at 1 and 2 threads; every output must match ref. */
static void run_compare(const char *so, const void *const *ins, const kn_tensor *ref, int n_out)
{
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    void *outs[4];
    if (kn_artifact_open(so, &art)) fail_msg("open: %s", kn_last_error());
    if (kn_session_create(art, &s)) fail_msg("session: %s", kn_last_error());
    for (int threads = 1; threads <= 2; threads++) {
        assert_int_equal(kn_session_set_threads(s, threads), KN_OK);
        for (int o = 0; o < n_out; o++) outs[o] = calloc(1, ref[o].nbytes + 1);
        if (kn_session_run(s, (const void **)ins, outs)) fail_msg("run: %s", kn_last_error());
        for (int o = 0; o < n_out; o++) {
            const float *r = ref[o].data, *g = outs[o];
            for (int64_t k = 0; k < kn_tensor_numel(&ref[o]); k++)
                if (!(fabsf(r[k] - g[k]) <= 1e-4f * fmaxf(1.0f, fabsf(r[k]))))
                    fail_msg("%d threads, output %d element %lld: reference %.9g, compiled %.9g", threads, o,
                             (long long)k, r[k], g[k]);
            free(outs[o]);
        }
    }
    kn_session_free(s);
    kn_artifact_close(art);
}

/* The whole check for one model text (constants are placeholders, filled
 * with random values; scalars stay) after `passes`. */
static void check_passes(const char *text, const char *passes, int want_fused)
{
    kn_model *m = NULL;
    if (kn_ir_parse_ex(text, "test.kir", KN_IR_PARSE_PLACEHOLDERS, &m)) fail_msg("parse: %s", kn_last_error());
    assert_int_equal(kn_graph_toposort(m->graph), KN_OK);
    assert_int_equal(kn_graph_infer(m->graph), KN_OK);
    for (int i = 0; i < m->graph->n_values; i++) {
        kn_tensor *t = m->graph->values[i]->const_data;
        if (t && t->dtype == KN_F32 && kn_tensor_numel(t) > 1)
            for (int64_t k = 0; k < kn_tensor_numel(t); k++) ((float *)t->data)[k] = rnd();
    }
    int n_in = m->graph->n_inputs, n_out = m->graph->n_outputs;
    assert_true(n_in <= 4 && n_out <= 4);
    kn_tensor in[4] = {0}, ref[4] = {0};
    const char *names[4];
    const void *ins[4];
    for (int i = 0; i < n_in; i++) {
        kn_value *v = m->graph->inputs[i];
        names[i] = v->name;
        assert_int_equal(kn_tensor_alloc(&in[i], v->dtype, v->shape.rank, v->shape.dims), KN_OK);
        for (int64_t k = 0; k < kn_tensor_numel(&in[i]); k++) ((float *)in[i].data)[k] = rnd();
        ins[i] = in[i].data;
    }
    if (kn_eval_model(m, n_in, names, in, ref)) fail_msg("eval: %s", kn_last_error());

    kn_pass_log log = {0};
    kn_pipeline_opts po = {.passes = passes, .verify_each = true};
    if (kn_pass_run_pipeline(m, &po, &log)) fail_msg("passes: %s", kn_last_error());
    kn_pass_log_free(&log);
    int fused = 0;
    for (int i = 0; i < m->graph->n_nodes; i++)
        fused += m->graph->nodes[i]->op == KN_OP_FusedConv || m->graph->nodes[i]->op == KN_OP_FusedMatMul ||
                 m->graph->nodes[i]->op == KN_OP_FusedElementwise;
    assert_int_equal(fused, want_fused);

    /* a new file each time: dlopen hands back a library still open under the same name */
    static int n_so;
    char so[600];
    snprintf(so, sizeof so, "%s/m%d.so", g_dir, n_so++);
    /* activations between convolutions in oneDNN's layout (auto), then plain */
    for (int layout = KN_CG_LAYOUT_AUTO; layout <= KN_CG_LAYOUT_NCHW; layout++) {
        compile_checked(m, so, layout);
        run_compare(so, ins, ref, n_out);
        unlink(so);
    }
    for (int o = 0; o < n_out; o++) kn_tensor_free(&ref[o]);
    for (int i = 0; i < n_in; i++) kn_tensor_free(&in[i]);
    kn_model_free(m);
}

static void check_model(const char *text, int want_fused)
{
    check_passes(text, "fuse-conv,fuse-matmul", want_fused);
}

/* ResNet's block tail (3x3 conv + bias + residual + Relu), a 1x1 conv (the
 * matmul path) + bias + Relu, a depthwise conv + Relu6 (Clip), and HardSwish. */
static void test_conv_bias_relu_residual(void **state)
{
    (void)state;
    check_model("kiln-ir v1\nopset \"\" 17\n"
                "graph main(%x: f32[1,8,10,10], %s: f32[1,16,10,10]) {\n"
                "  %w = const f32[16,8,3,3] {... fnv1a=0}\n"
                "  %b = const f32[1,16,1,1] {... fnv1a=0}\n"
                "  %w1 = const f32[16,16,1,1] {... fnv1a=0}\n"
                "  %b1 = const f32[16,1,1] {... fnv1a=0}\n"
                "  %wd = const f32[16,1,3,3] {... fnv1a=0}\n"
                "  %bd = const f32[16] {... fnv1a=0}\n"
                "  %lo = const f32[] [0.0]\n"
                "  %hi = const f32[] [0.5]\n"
                "  %c: f32[1,16,10,10] = Conv(%x, %w) {pads=[1,1,1,1]} #\"c\"\n"
                "  %a: f32[1,16,10,10] = Add(%c, %b) #\"a\"\n"
                "  %r: f32[1,16,10,10] = Add(%s, %a) #\"res\"\n"
                "  %y: f32[1,16,10,10] = Relu(%r) #\"relu\"\n"
                "  %p: f32[1,16,10,10] = Conv(%y, %w1) #\"pw\"\n"
                "  %pa: f32[1,16,10,10] = Add(%p, %b1) #\"pa\"\n"
                "  %pr: f32[1,16,10,10] = Relu(%pa) #\"prelu\"\n"
                "  %d: f32[1,16,5,5] = Conv(%pr, %wd, %bd) {group=16, pads=[1,1,1,1], strides=[2,2]} #\"dw\"\n"
                "  %k: f32[1,16,5,5] = Clip(%d, %lo, %hi) #\"relu6\"\n"
                "  %h: f32[1,16,5,5] = HardSwish(%k) #\"hs\"\n"
                "  return %h, %y\n}\n",
                3);
}

/* Two ResNet bottleneck blocks (the first with a strided 1x1 downsample):
 * every activation between them stays in oneDNN's layout, residuals too,
 * and the last block writes its output plain. */
static void test_bottleneck_blocks(void **state)
{
    (void)state;
    check_model("kiln-ir v1\nopset \"\" 17\n"
                "graph main(%x: f32[1,16,8,8]) {\n"
                "  %w1 = const f32[16,16,1,1] {... fnv1a=0}\n"
                "  %w2 = const f32[16,16,3,3] {... fnv1a=0}\n"
                "  %w3 = const f32[32,16,1,1] {... fnv1a=0}\n"
                "  %wd = const f32[32,16,1,1] {... fnv1a=0}\n"
                "  %v1 = const f32[16,32,1,1] {... fnv1a=0}\n"
                "  %v2 = const f32[16,16,3,3] {... fnv1a=0}\n"
                "  %v3 = const f32[32,16,1,1] {... fnv1a=0}\n"
                "  %b16 = const f32[16] {... fnv1a=0}\n"
                "  %b32 = const f32[32] {... fnv1a=0}\n"
                "  %x0: f32[1,16,8,8] = Relu(%x) #\"stem\"\n"
                "  %a1: f32[1,16,8,8] = Conv(%x0, %w1, %b16) #\"b0c1\"\n"
                "  %r1: f32[1,16,8,8] = Relu(%a1) #\"b0r1\"\n"
                "  %a2: f32[1,16,4,4] = Conv(%r1, %w2, %b16) {pads=[1,1,1,1], strides=[2,2]} #\"b0c2\"\n"
                "  %r2: f32[1,16,4,4] = Relu(%a2) #\"b0r2\"\n"
                "  %a3: f32[1,32,4,4] = Conv(%r2, %w3, %b32) #\"b0c3\"\n"
                "  %d: f32[1,32,4,4] = Conv(%x0, %wd, %b32) {strides=[2,2]} #\"b0down\"\n"
                "  %s0: f32[1,32,4,4] = Add(%a3, %d) #\"b0add\"\n"
                "  %o0: f32[1,32,4,4] = Relu(%s0) #\"b0out\"\n"
                "  %c1: f32[1,16,4,4] = Conv(%o0, %v1, %b16) #\"b1c1\"\n"
                "  %q1: f32[1,16,4,4] = Relu(%c1) #\"b1r1\"\n"
                "  %c2: f32[1,16,4,4] = Conv(%q1, %v2, %b16) {pads=[1,1,1,1]} #\"b1c2\"\n"
                "  %q2: f32[1,16,4,4] = Relu(%c2) #\"b1r2\"\n"
                "  %c3: f32[1,32,4,4] = Conv(%q2, %v3, %b32) #\"b1c3\"\n"
                "  %s1: f32[1,32,4,4] = Add(%o0, %c3) #\"b1add\"\n"
                "  %o1: f32[1,32,4,4] = Relu(%s1) #\"b1out\"\n"
                "  %y: f32[1,32,1,1] = GlobalAveragePool(%o1) #\"gap\"\n"
                "  return %y\n}\n",
                6); /* 7 convs; the downsample (bias only) stays a Conv */
}

/* Fused ops that the memory plan writes over their residual, which dies
 * there (in place): a conv whose residual comes from a generated op (plain
 * NCHW) while its output, read only by a conv, stays in oneDNN's layout (the
 * runtime reorders the residual into dst from a copy), and a MatMul. */
static void test_in_place_residuals(void **state)
{
    (void)state;
    check_model("kiln-ir v1\nopset \"\" 17\n"
                "graph main(%x: f32[1,16,8,8], %v: f32[1,6,16]) {\n"
                "  %w = const f32[16,16,3,3] {... fnv1a=0}\n"
                "  %b = const f32[16] {... fnv1a=0}\n"
                "  %w2 = const f32[32,16,1,1] {... fnv1a=0}\n"
                "  %wm = const f32[16,16] {... fnv1a=0}\n"
                "  %e: f32[1,16,8,8] = Sigmoid(%x) #\"e\"\n"
                "  %c: f32[1,16,8,8] = Conv(%x, %w, %b) {pads=[1,1,1,1]} #\"c\"\n"
                "  %s: f32[1,16,8,8] = Add(%c, %e) #\"s\"\n"
                "  %r: f32[1,16,8,8] = Relu(%s) #\"r\"\n"
                "  %c2: f32[1,32,8,8] = Conv(%r, %w2) #\"c2\"\n"
                "  %h: f32[1,6,16] = Sigmoid(%v) #\"h\"\n"
                "  %m: f32[1,6,16] = MatMul(%v, %wm) #\"m\"\n"
                "  %a: f32[1,6,16] = Add(%m, %h) #\"a\"\n"
                "  %o: f32[1,6,16] = Mul(%a, %a) #\"o\"\n"
                "  return %c2, %o\n}\n",
                2);
}

/* MobileNetV2's narrow blocks: 24-channel activations between convolutions
 * (oneDNN's layout where it does not pad them: NHWC, nChw8c; plain in
 * nChw16c), a depthwise conv and a residual among them. */
static void test_narrow_channels(void **state)
{
    (void)state;
    check_model("kiln-ir v1\nopset \"\" 17\n"
                "graph main(%x: f32[1,16,9,9]) {\n"
                "  %w1 = const f32[24,16,1,1] {... fnv1a=0}\n"
                "  %b1 = const f32[24] {... fnv1a=0}\n"
                "  %w2 = const f32[72,24,1,1] {... fnv1a=0}\n"
                "  %wd = const f32[72,1,3,3] {... fnv1a=0}\n"
                "  %w3 = const f32[24,72,1,1] {... fnv1a=0}\n"
                "  %w4 = const f32[8,24,1,1] {... fnv1a=0}\n"
                "  %a: f32[1,24,9,9] = Conv(%x, %w1, %b1) #\"project\"\n"
                "  %e: f32[1,72,9,9] = Conv(%a, %w2) #\"expand\"\n"
                "  %er: f32[1,72,9,9] = Relu(%e) #\"erelu\"\n"
                "  %d: f32[1,72,9,9] = Conv(%er, %wd) {group=72, pads=[1,1,1,1]} #\"dw\"\n"
                "  %dr: f32[1,72,9,9] = Relu(%d) #\"drelu\"\n"
                "  %p: f32[1,24,9,9] = Conv(%dr, %w3) #\"project2\"\n"
                "  %s: f32[1,24,9,9] = Add(%p, %a) #\"res\"\n"
                "  %y: f32[1,8,9,9] = Conv(%s, %w4) #\"head\"\n"
                "  return %y\n}\n",
                3);
}

/* Poolings between convolutions run by oneDNN in the convolutions' layout:
 * ResNet's stem (3x3 stride-2 MaxPool, padded), a ceil-mode MaxPool (extra
 * padding at the end), AveragePool with and without the padding counted,
 * and the GlobalAveragePool head. */
static void test_poolings(void **state)
{
    (void)state;
    check_model("kiln-ir v1\nopset \"\" 17\n"
                "graph main(%x: f32[1,3,20,20]) {\n"
                "  %w1 = const f32[16,3,3,3] {... fnv1a=0}\n"
                "  %b1 = const f32[16] {... fnv1a=0}\n"
                "  %w2 = const f32[16,16,1,1] {... fnv1a=0}\n"
                "  %w3 = const f32[32,16,1,1] {... fnv1a=0}\n"
                "  %c1: f32[1,16,20,20] = Conv(%x, %w1, %b1) {pads=[1,1,1,1]} #\"stem\"\n"
                "  %r1: f32[1,16,20,20] = Relu(%c1) #\"stem_relu\"\n"
                "  %m1: f32[1,16,10,10] = MaxPool(%r1) {kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]} #\"mp\"\n"
                "  %c2: f32[1,16,10,10] = Conv(%m1, %w2) #\"c2\"\n"
                "  %m2: f32[1,16,4,4] = MaxPool(%c2) {kernel_shape=[3,3], strides=[3,3], ceil_mode=1} #\"mp_ceil\"\n"
                "  %a1: f32[1,16,4,4] = AveragePool(%m2) {kernel_shape=[3,3], pads=[1,1,1,1], count_include_pad=1} "
                "#\"avg_incl\"\n"
                "  %a2: f32[1,16,4,4] = AveragePool(%a1) {kernel_shape=[3,3], pads=[1,1,1,1]} #\"avg_excl\"\n"
                "  %c3: f32[1,32,4,4] = Conv(%a2, %w3) #\"c3\"\n"
                "  %g: f32[1,32,1,1] = GlobalAveragePool(%c3) #\"gap\"\n"
                "  return %g, %m1\n}\n",
                1);
}

/* Linear + Gelu, Linear + residual, Gemm (transB, alpha) + Sigmoid. */
static void test_matmul_bias_gelu_residual(void **state)
{
    (void)state;
    check_model("kiln-ir v1\nopset \"\" 20\n"
                "graph main(%x: f32[1,6,16], %v: f32[3,16]) {\n"
                "  %w1 = const f32[16,32] {... fnv1a=0}\n"
                "  %b1 = const f32[32] {... fnv1a=0}\n"
                "  %w2 = const f32[32,16] {... fnv1a=0}\n"
                "  %b2 = const f32[16] {... fnv1a=0}\n"
                "  %wg = const f32[8,16] {... fnv1a=0}\n"
                "  %cg = const f32[8] {... fnv1a=0}\n"
                "  %m1: f32[1,6,32] = MatMul(%x, %w1) #\"mm1\"\n"
                "  %a1: f32[1,6,32] = Add(%b1, %m1) #\"a1\"\n"
                "  %g: f32[1,6,32] = Gelu(%a1) #\"gelu\"\n"
                "  %m2: f32[1,6,16] = MatMul(%g, %w2) #\"mm2\"\n"
                "  %a2: f32[1,6,16] = Add(%m2, %b2) #\"a2\"\n"
                "  %r2: f32[1,6,16] = Add(%a2, %x) #\"res\"\n"
                "  %gm: f32[3,8] = Gemm(%v, %wg, %cg) {transB=1, alpha=0.5} #\"gemm\"\n"
                "  %gs: f32[3,8] = Sigmoid(%gm) #\"sig\"\n"
                "  return %r2, %gs\n}\n",
                3);
}

/* Elementwise chains as one loop each: an attention's scale and broadcast
 * mask over [1,12,64,64] (large enough to run on both threads), Swish
 * x*Sigmoid(x) (a value read twice), unary steps with parameters
 * (LeakyRelu, HardSigmoid), Pow by 2 and a general Pow, Max/Min; and a
 * chain after a fused MatMul (which keeps its own bias and Relu). */
static void test_elementwise_chains(void **state)
{
    (void)state;
    check_passes("kiln-ir v1\nopset \"\" 17\n"
                 "graph main(%s: f32[1,12,64,64], %mask: f32[1,1,1,64], %x: f32[2,3,8], %e: f32[2,3,8]) {\n"
                 "  %c = const f32[] [8.0]\n"
                 "  %two = const f32[] [2.0]\n"
                 "  %w = const f32[8,8] {... fnv1a=0}\n"
                 "  %b = const f32[8] {... fnv1a=0}\n"
                 "  %d: f32[1,12,64,64] = Div(%s, %c) #\"scale\"\n"
                 "  %y: f32[1,12,64,64] = Add(%d, %mask) #\"mask_add\"\n"
                 "  %sg: f32[2,3,8] = Sigmoid(%x) #\"sig\"\n"
                 "  %sw: f32[2,3,8] = Mul(%x, %sg) #\"swish\"\n"
                 "  %lr: f32[2,3,8] = LeakyRelu(%sw) {alpha=0.2} #\"leaky\"\n"
                 "  %hs: f32[2,3,8] = HardSigmoid(%lr) {alpha=0.3, beta=0.4} #\"hsig\"\n"
                 "  %p2: f32[2,3,8] = Pow(%hs, %two) #\"square\"\n"
                 "  %ab: f32[2,3,8] = Abs(%e) #\"abs\"\n"
                 "  %pe: f32[2,3,8] = Pow(%ab, %x) #\"pow\"\n"
                 "  %mx: f32[2,3,8] = Max(%p2, %pe) #\"max\"\n"
                 "  %mn: f32[2,3,8] = Min(%mx, %ab) #\"min\"\n"
                 "  %m: f32[2,3,8] = MatMul(%mn, %w) #\"mm\"\n"
                 "  %mb: f32[2,3,8] = Add(%m, %b) #\"bias\"\n"
                 "  %r: f32[2,3,8] = Relu(%mb) #\"relu\"\n"
                 "  %q: f32[2,3,8] = Sub(%r, %x) #\"sub\"\n"
                 "  %o: f32[2,3,8] = Exp(%q) #\"exp\"\n"
                 "  return %y, %o\n}\n",
                 "fuse-conv,fuse-matmul,fuse-elementwise", 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_bias_relu_residual),
        cmocka_unit_test(test_bottleneck_blocks),
        cmocka_unit_test(test_matmul_bias_gelu_residual),
        cmocka_unit_test(test_in_place_residuals),
        cmocka_unit_test(test_narrow_channels),
        cmocka_unit_test(test_poolings),
        cmocka_unit_test(test_elementwise_chains),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
