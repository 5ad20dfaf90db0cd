/* The fusion passes (passes/fuse_conv.c, passes/fuse_matmul.c): golden text
 * IR before/after, the near misses they must not fuse with the remark each
 * writes, and the reference evaluator agreeing on the graph before and after
 * fusion on random inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "eval.h"
#include "pass.h"
#include "text.h"

/* ---- helpers ---------------------------------------------------------------------- */

static kn_model *parse_flags(const char *text, unsigned flags)
{
    kn_model *m = NULL;
    if (kn_ir_parse_ex(text, "test.kir", flags, &m)) fail_msg("parse: %s", kn_last_error());
    assert_int_equal(kn_graph_toposort(m->graph), KN_OK);
    if (kn_graph_infer(m->graph)) fail_msg("infer: %s", kn_last_error());
    return m;
}

static void run_passes(kn_model *m, const char *passes, kn_pass_log *log)
{
    kn_pipeline_opts po = {.passes = passes, .verify_each = true};
    if (kn_pass_run_pipeline(m, &po, log)) fail_msg("pipeline: %s", kn_last_error());
}

/* True if the value name starting at p ("%name") occurs elsewhere in text. */
static bool name_used_elsewhere(const char *text, const char *p, size_t len)
{
    for (const char *q = text; (q = strstr(q, "%")); q++) {
        if (q == p) continue;
        if (!strncmp(q, p, len) && !(q[len] == '.' || q[len] == '_' || (q[len] >= '0' && q[len] <= '9') ||
                                      (q[len] >= 'a' && q[len] <= 'z') || (q[len] >= 'A' && q[len] <= 'Z')))
            return true;
    }
    return false;
}

/* The printed model without the lines of constants nothing reads: a pass
 * leaves a folded bias addend unread, and whether the value list still holds
 * it is the business of value compaction, not of fusion. */
static char *print_live(const kn_model *m)
{
    char *text = NULL;
    assert_int_equal(kn_ir_print_string(m, NULL, &text), KN_OK);
    char *out = calloc(1, strlen(text) + 1);
    assert_non_null(out);
    size_t o = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        const char *pct = memchr(line, '%', len);
        bool is_const = pct && (strstr(line, " = const ") || strstr(line, " = init ")) &&
                        strstr(line, " = ") < line + len;
        size_t nlen = 0;
        while (pct && pct[nlen] && pct[nlen] != ' ') nlen++;
        if (!(is_const && !name_used_elsewhere(text, pct, nlen))) {
            memcpy(out + o, line, len);
            o += len;
        }
        line += len;
    }
    free(text);
    return out;
}

/* Runs passes on before; the live text must equal after and the remarks
 * must be exactly `remarks` (NULL-terminated); the result must print the
 * same after a parse round trip. */
static void golden(const char *before, const char *passes, const char *after, const char *const *remarks)
{
    kn_model *m = parse_flags(before, 0);
    kn_pass_log log = {0};
    run_passes(m, passes, &log);
    char *got = print_live(m);
    if (strcmp(got, after)) fail_msg("after %s:\n%s\nexpected:\n%s", passes, got, after);
    int n = 0;
    while (remarks && remarks[n]) n++;
    if (log.n_remarks != n) {
        kn_pass_log_print_remarks(&log, stderr);
        fail_msg("%d remarks, expected %d", log.n_remarks, n);
    }
    for (int i = 0; i < n; i++) assert_string_equal(log.remarks[i].text, remarks[i]);
    kn_model *again = parse_flags(got, 0);
    char *twice = print_live(again);
    assert_string_equal(twice, got);
    free(twice);
    kn_model_free(again);
    free(got);
    kn_pass_log_free(&log);
    kn_model_free(m);
}

/* ---- golden tests ------------------------------------------------------------------ */

/* ResNet's tail of a block: Conv, channel bias, residual Add, Relu. */
static void test_conv_bias_residual_relu(void **state)
{
    (void)state;
    golden("kiln-ir v1\n"
           "opset \"\" 17\n"
           "graph main(%x: f32[1,2,4,4], %s: f32[1,3,4,4]) {\n"
           "  %w = const f32[3,2,1,1] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]\n"
           "  %bias = const f32[3,1,1] [0.5, -1.0, 0.25]\n"
           "  %c: f32[1,3,4,4] = Conv(%x, %w, _) {kernel_shape=[1,1]} #\"c1\"\n"
           "  %b: f32[1,3,4,4] = Add(%c, %bias) #\"a1\"\n"
           "  %r: f32[1,3,4,4] = Add(%s, %b) #\"res\"\n"
           "  %y: f32[1,3,4,4] = Relu(%r) #\"r1\"\n"
           "  return %y\n"
           "}\n",
           "fuse-conv",
           "kiln-ir v1\n"
           "opset \"\" 17\n"
           "opset \"kiln\" 1\n"
           "graph main(%x: f32[1,2,4,4], %s: f32[1,3,4,4]) {\n"
           "  %w = const f32[3,2,1,1] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]\n"
           "  %c1.bias = const f32[3] [0.5, -1.0, 0.25]\n"
           "  %y: f32[1,3,4,4] = kiln::FusedConv(%x, %w, %c1.bias, %s) {kernel_shape=[1,1], post_ops=[\"Add\", "
           "\"Relu\"], post_alpha=[0.0, 0.0], post_beta=[0.0, 0.0]} #\"c1\"\n"
           "  return %y\n"
           "}\n",
           NULL);
}

/* A Conv's own bias and an Add of a scalar sum into one bias; Clip (Relu6)
 * keeps its bounds. */
static void test_conv_bias_sum_clip(void **state)
{
    (void)state;
    golden("kiln-ir v1\n"
           "opset \"\" 17\n"
           "graph main(%x: f32[1,2,3,3]) {\n"
           "  %w = const f32[2,1,1,1] [1.0, -1.0]\n"
           "  %b0 = const f32[2] [1.0, 2.0]\n"
           "  %k = const f32[] [0.5]\n"
           "  %lo = const f32[] [0.0]\n"
           "  %hi = const f32[] [6.0]\n"
           "  %c: f32[1,2,3,3] = Conv(%x, %w, %b0) {group=2, kernel_shape=[1,1]} #\"dw\"\n"
           "  %b: f32[1,2,3,3] = Add(%k, %c) #\"a1\"\n"
           "  %y: f32[1,2,3,3] = Clip(%b, %lo, %hi) #\"relu6\"\n"
           "  return %y\n"
           "}\n",
           "fuse-conv",
           "kiln-ir v1\n"
           "opset \"\" 17\n"
           "opset \"kiln\" 1\n"
           "graph main(%x: f32[1,2,3,3]) {\n"
           "  %w = const f32[2,1,1,1] [1.0, -1.0]\n"
           "  %dw.bias = const f32[2] [1.5, 2.5]\n"
           "  %y: f32[1,2,3,3] = kiln::FusedConv(%x, %w, %dw.bias) {group=2, kernel_shape=[1,1], post_ops=[\"Clip\"], "
           "post_alpha=[0.0], post_beta=[6.0]} #\"dw\"\n"
           "  return %y\n"
           "}\n",
           NULL);
}

/* Each near miss leaves the graph as it was (but for what did fuse) and says
 * why. */
static void test_conv_near_misses(void **state)
{
    (void)state;
    static const char *const remarks[] = {
        "Conv 'c1' + Relu 'r1': Conv output has 2 users",
        "Conv 'c2' + Clip 'clip2': Clip's bounds are not f32 scalar constants",
        "Conv 'c3' + Add 'a3': the addend f32 [1,1,2,2] is neither a constant with one value per channel nor a "
        "residual of the output's f32 [1,2,2,2]",
        "Conv 'c4' + Relu 'r4': Conv output is a graph output",
        "Conv 'c5' + LeakyRelu 't5': 4 post-ops fused already (the most one primitive takes)",
        "Conv 'c6' + Add 'a6b': a residual Add is fused already (oneDNN takes one sum)",
        NULL,
    };
    golden("kiln-ir v1\n"
           "opset \"\" 17\n"
           "graph main(%x: f32[1,1,2,2], %lo: f32, %s: f32[1,2,2,2]) {\n"
           "  %w = const f32[2,1,1,1] [1.0, 2.0]\n"
           "  %hi = const f32[] [6.0]\n"
           "  %odd = const f32[1,1,2,2] [1.0, 2.0, 3.0, 4.0]\n"
           "  %c1: f32[1,2,2,2] = Conv(%x, %w) #\"c1\"\n"
           "  %r1: f32[1,2,2,2] = Relu(%c1) #\"r1\"\n"
           "  %n1: f32[1,2,2,2] = Neg(%c1) #\"n1\"\n"
           "  %c2: f32[1,2,2,2] = Conv(%x, %w) #\"c2\"\n"
           "  %k2: f32[1,2,2,2] = Clip(%c2, %lo, %hi) #\"clip2\"\n"
           "  %c3: f32[1,2,2,2] = Conv(%x, %w) #\"c3\"\n"
           "  %a3: f32[1,2,2,2] = Add(%c3, %odd) #\"a3\"\n"
           "  %c4: f32[1,2,2,2] = Conv(%x, %w) #\"c4\"\n"
           "  %r4: f32[1,2,2,2] = Relu(%c4) #\"r4\"\n"
           "  %c5: f32[1,2,2,2] = Conv(%x, %w) #\"c5\"\n"
           "  %t1: f32[1,2,2,2] = Relu(%c5) #\"t1\"\n"
           "  %t2: f32[1,2,2,2] = Sigmoid(%t1) #\"t2\"\n"
           "  %t3: f32[1,2,2,2] = Tanh(%t2) #\"t3\"\n"
           "  %t4: f32[1,2,2,2] = HardSwish(%t3) #\"t4\"\n"
           "  %t5: f32[1,2,2,2] = LeakyRelu(%t4) {alpha=0.5} #\"t5\"\n"
           "  %c6: f32[1,2,2,2] = Conv(%x, %w) #\"c6\"\n"
           "  %a6: f32[1,2,2,2] = Add(%c6, %s) #\"a6\"\n"
           "  %a6b: f32[1,2,2,2] = Add(%a6, %s) #\"a6b\"\n"
           "  return %r1, %n1, %k2, %a3, %c4, %r4, %t5, %a6b\n"
           "}\n",
           "fuse-conv",
           "kiln-ir v1\n"
           "opset \"\" 17\n"
           "opset \"kiln\" 1\n"
           "graph main(%x: f32[1,1,2,2], %lo: f32, %s: f32[1,2,2,2]) {\n"
           "  %w = const f32[2,1,1,1] [1.0, 2.0]\n"
           "  %hi = const f32[] [6.0]\n"
           "  %odd = const f32[1,1,2,2] [1.0, 2.0, 3.0, 4.0]\n"
           "  %c1: f32[1,2,2,2] = Conv(%x, %w) #\"c1\"\n"
           "  %r1: f32[1,2,2,2] = Relu(%c1) #\"r1\"\n"
           "  %n1: f32[1,2,2,2] = Neg(%c1) #\"n1\"\n"
           "  %c2: f32[1,2,2,2] = Conv(%x, %w) #\"c2\"\n"
           "  %k2: f32[1,2,2,2] = Clip(%c2, %lo, %hi) #\"clip2\"\n"
           "  %c3: f32[1,2,2,2] = Conv(%x, %w) #\"c3\"\n"
           "  %a3: f32[1,2,2,2] = Add(%c3, %odd) #\"a3\"\n"
           "  %c4: f32[1,2,2,2] = Conv(%x, %w) #\"c4\"\n"
           "  %r4: f32[1,2,2,2] = Relu(%c4) #\"r4\"\n"
           "  %t4: f32[1,2,2,2] = kiln::FusedConv(%x, %w) {post_ops=[\"Relu\", \"Sigmoid\", \"Tanh\", \"HardSwish\"], "
           "post_alpha=[0.0, 0.0, 0.0, 0.0], post_beta=[0.0, 0.0, 0.0, 0.0]} #\"c5\"\n"
           "  %t5: f32[1,2,2,2] = LeakyRelu(%t4) {alpha=0.5} #\"t5\"\n"
           "  %a6: f32[1,2,2,2] = kiln::FusedConv(%x, %w, _, %s) {post_ops=[\"Add\"], post_alpha=[0.0], "
           "post_beta=[0.0]} #\"c6\"\n"
           "  %a6b: f32[1,2,2,2] = Add(%a6, %s) #\"a6b\"\n"
           "  return %r1, %n1, %k2, %a3, %c4, %r4, %t5, %a6b\n"
           "}\n",
           remarks);
}

/* SiLU as exporters write it, Mul(x, Sigmoid(x)), is one Swish post-op; a
 * residual Add after an activation stays an Add (oneDNN's optimized
 * convolutions take a sum only before activations); a Sigmoid read twice
 * is no SiLU. */
static void test_conv_swish(void **state)
{
    (void)state;
    static const char *const remarks[] = {
        "Conv 'c1' + Add 'a1': a residual after an activation makes oneDNN run its reference convolution",
        "Conv 'c2' + Sigmoid 's2': Conv output has 2 users",
        NULL,
    };
    golden("kiln-ir v1\n"
           "opset \"\" 17\n"
           "graph main(%x: f32[1,2,2,2]) {\n"
           "  %w = const f32[2,2,1,1] [1.0, 2.0, 3.0, 4.0]\n"
           "  %c1: f32[1,2,2,2] = Conv(%x, %w) #\"c1\"\n"
           "  %s1: f32[1,2,2,2] = Sigmoid(%c1) #\"s1\"\n"
           "  %m1: f32[1,2,2,2] = Mul(%s1, %c1) #\"m1\"\n"
           "  %a1: f32[1,2,2,2] = Add(%m1, %x) #\"a1\"\n"
           "  %c2: f32[1,2,2,2] = Conv(%x, %w) #\"c2\"\n"
           "  %s2: f32[1,2,2,2] = Sigmoid(%c2) #\"s2\"\n"
           "  %m2: f32[1,2,2,2] = Mul(%c2, %s2) #\"m2\"\n"
           "  return %a1, %m2, %s2\n"
           "}\n",
           "fuse-conv",
           "kiln-ir v1\n"
           "opset \"\" 17\n"
           "opset \"kiln\" 1\n"
           "graph main(%x: f32[1,2,2,2]) {\n"
           "  %w = const f32[2,2,1,1] [1.0, 2.0, 3.0, 4.0]\n"
           "  %m1: f32[1,2,2,2] = kiln::FusedConv(%x, %w) {post_ops=[\"Swish\"], post_alpha=[0.0], post_beta=[0.0]} "
           "#\"c1\"\n"
           "  %a1: f32[1,2,2,2] = Add(%m1, %x) #\"a1\"\n"
           "  %c2: f32[1,2,2,2] = Conv(%x, %w) #\"c2\"\n"
           "  %s2: f32[1,2,2,2] = Sigmoid(%c2) #\"s2\"\n"
           "  %m2: f32[1,2,2,2] = Mul(%c2, %s2) #\"m2\"\n"
           "  return %a1, %m2, %s2\n"
           "}\n",
           remarks);
}

/* Bias Adds in a row sum into one bias, at most KN_FUSE_MAX_BIAS_ADDS of
 * them; the chain stops at the next one, which says why. */
static void test_bias_adds_bounded(void **state)
{
    (void)state;
    static const char *const remarks[] = {
        "Conv 'c' + Add 'a4': the addend f32 [] is neither a constant with one value per channel nor a residual "
        "of the output's f32 [1,2,1,1]",
        NULL,
    };
    golden("kiln-ir v1\n"
           "opset \"\" 17\n"
           "graph main(%x: f32[1,1,1,1]) {\n"
           "  %w = const f32[2,1,1,1] [1.0, 2.0]\n"
           "  %k = const f32[] [1.0]\n"
           "  %c: f32[1,2,1,1] = Conv(%x, %w) #\"c\"\n"
           "  %a1: f32[1,2,1,1] = Add(%c, %k) #\"a1\"\n"
           "  %a2: f32[1,2,1,1] = Add(%a1, %k) #\"a2\"\n"
           "  %a3: f32[1,2,1,1] = Add(%a2, %k) #\"a3\"\n"
           "  %a4: f32[1,2,1,1] = Add(%a3, %k) #\"a4\"\n"
           "  %y: f32[1,2,1,1] = Relu(%a4) #\"r\"\n"
           "  return %y\n"
           "}\n",
           "fuse-conv",
           "kiln-ir v1\n"
           "opset \"\" 17\n"
           "opset \"kiln\" 1\n"
           "graph main(%x: f32[1,1,1,1]) {\n"
           "  %w = const f32[2,1,1,1] [1.0, 2.0]\n"
           "  %k = const f32[] [1.0]\n"
           "  %c.bias = const f32[2] [3.0, 3.0]\n"
           "  %a3: f32[1,2,1,1] = kiln::FusedConv(%x, %w, %c.bias) #\"c\"\n"
           "  %a4: f32[1,2,1,1] = Add(%a3, %k) #\"a4\"\n"
           "  %y: f32[1,2,1,1] = Relu(%a4) #\"r\"\n"
           "  return %y\n"
           "}\n",
           remarks);
}

/* A transformer's Linear + Gelu, and Linear + residual; a MatMul whose
 * output has a second reader stays. */
static void test_matmul_bias_gelu_residual(void **state)
{
    (void)state;
    static const char *const remarks[] = {"MatMul 'mm3' + Add 'a3': MatMul output has 2 users", NULL};
    golden("kiln-ir v1\n"
           "opset \"\" 20\n"
           "graph main(%x: f32[2,3,2]) {\n"
           "  %w1 = const f32[2,4] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n"
           "  %b1 = const f32[4] [0.5, -1.0, 0.25, 1.0]\n"
           "  %w2 = const f32[4,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n"
           "  %b2 = const f32[2] [1.0, -1.0]\n"
           "  %m1: f32[2,3,4] = MatMul(%x, %w1) #\"mm1\"\n"
           "  %a1: f32[2,3,4] = Add(%b1, %m1) #\"a1\"\n"
           "  %g: f32[2,3,4] = Gelu(%a1) #\"gelu\"\n"
           "  %m2: f32[2,3,2] = MatMul(%g, %w2) #\"mm2\"\n"
           "  %a2: f32[2,3,2] = Add(%m2, %b2) #\"a2\"\n"
           "  %r2: f32[2,3,2] = Add(%a2, %x) #\"res\"\n"
           "  %m3: f32[2,3,4] = MatMul(%r2, %w1) #\"mm3\"\n"
           "  %a3: f32[2,3,4] = Add(%m3, %b1) #\"a3\"\n"
           "  %n3: f32[2,3,4] = Neg(%m3) #\"n3\"\n"
           "  return %a3, %n3\n"
           "}\n",
           "fuse-matmul",
           "kiln-ir v1\n"
           "opset \"\" 20\n"
           "opset \"kiln\" 1\n"
           "graph main(%x: f32[2,3,2]) {\n"
           "  %w1 = const f32[2,4] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n"
           "  %b1 = const f32[4] [0.5, -1.0, 0.25, 1.0]\n"
           "  %w2 = const f32[4,2] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]\n"
           "  %mm1.bias = const f32[4] [0.5, -1.0, 0.25, 1.0]\n"
           "  %mm2.bias = const f32[2] [1.0, -1.0]\n"
           "  %g: f32[2,3,4] = kiln::FusedMatMul(%x, %w1, %mm1.bias) {post_ops=[\"Gelu\"], post_alpha=[0.0], "
           "post_beta=[0.0]} #\"mm1\"\n"
           "  %r2: f32[2,3,2] = kiln::FusedMatMul(%g, %w2, %mm2.bias, %x) {post_ops=[\"Add\"], post_alpha=[0.0], "
           "post_beta=[0.0]} #\"mm2\"\n"
           "  %m3: f32[2,3,4] = MatMul(%r2, %w1) #\"mm3\"\n"
           "  %a3: f32[2,3,4] = Add(%m3, %b1) #\"a3\"\n"
           "  %n3: f32[2,3,4] = Neg(%m3) #\"n3\"\n"
           "  return %a3, %n3\n"
           "}\n",
           remarks);
}

/* Gemm (transB, a row bias C) + Relu; a Gemm whose C is a full matrix is
 * left alone, with a remark. */
static void test_gemm(void **state)
{
    (void)state;
    static const char *const remarks[] = {"Gemm 'g2' + Relu 'r2': C is not a constant row bias with beta 1", NULL};
    golden("kiln-ir v1\n"
           "opset \"\" 17\n"
           "graph main(%x: f32[2,3], %full: f32[2,2]) {\n"
           "  %w = const f32[2,3] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]\n"
           "  %c = const f32[1,2] [0.5, -0.5]\n"
           "  %y1: f32[2,2] = Gemm(%x, %w, %c) {transB=1, alpha=0.5} #\"g1\"\n"
           "  %r1: f32[2,2] = Relu(%y1) #\"r1\"\n"
           "  %y2: f32[2,2] = Gemm(%x, %w, %full) {transB=1} #\"g2\"\n"
           "  %r2: f32[2,2] = Relu(%y2) #\"r2\"\n"
           "  return %r1, %r2\n"
           "}\n",
           "fuse-matmul",
           "kiln-ir v1\n"
           "opset \"\" 17\n"
           "opset \"kiln\" 1\n"
           "graph main(%x: f32[2,3], %full: f32[2,2]) {\n"
           "  %w = const f32[2,3] [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]\n"
           "  %c = const f32[1,2] [0.5, -0.5]\n"
           "  %r1: f32[2,2] = kiln::FusedMatMul(%x, %w, %c) {transB=1, alpha=0.5, post_ops=[\"Relu\"], "
           "post_alpha=[0.0], post_beta=[0.0]} #\"g1\"\n"
           "  %y2: f32[2,2] = Gemm(%x, %w, %full) {transB=1} #\"g2\"\n"
           "  %r2: f32[2,2] = Relu(%y2) #\"r2\"\n"
           "  return %r1, %r2\n"
           "}\n",
           remarks);
}

/* A Relu in an If branch reading the Conv's output is not the main graph's
 * to fuse: nothing changes, and there is nothing to remark. */
static void test_subgraph_reader_left_alone(void **state)
{
    (void)state;
    kn_model *m = parse_flags("kiln-ir v1\nopset \"\" 17\n"
                              "graph main(%x: f32[1,1,2,2], %cond: bool) {\n"
                              "  %w = const f32[2,1,1,1] [1.0, 2.0]\n"
                              "  %c: f32[1,2,2,2] = Conv(%x, %w) #\"c1\"\n"
                              "  %y = If(%cond) {else_branch=graph e() {\n"
                              "    %n = Neg(%c) #\"n\"\n"
                              "    return %n\n"
                              "  }, then_branch=graph t() {\n"
                              "    %r = Relu(%c) #\"r\"\n"
                              "    return %r\n"
                              "  }} #\"if\"\n"
                              "  return %y\n}\n",
                              0);
    char *before = print_live(m);
    kn_pass_log log = {0};
    run_passes(m, "fuse-conv", &log);
    char *after = print_live(m);
    assert_string_equal(after, before);
    assert_int_equal(log.n_remarks, 0);
    free(before);
    free(after);
    kn_pass_log_free(&log);
    kn_model_free(m);
}

/* -O2 and -O3 run both fusion passes. */
static void test_in_pipelines(void **state)
{
    (void)state;
    for (int lvl = 2; lvl <= 3; lvl++) {
        kn_model *m = parse_flags("kiln-ir v1\nopset \"\" 17\n"
                                  "graph main(%x: f32[1,1,2,2]) {\n"
                                  "  %w = const f32[2,1,1,1] [1.0, 2.0]\n"
                                  "  %c: f32[1,2,2,2] = Conv(%x, %w) #\"c\"\n"
                                  "  %y: f32[1,2,2,2] = Relu(%c) #\"r\"\n"
                                  "  return %y\n}\n",
                                  0);
        kn_pass_log log = {0};
        kn_pipeline_opts po = {.opt_level = lvl, .verify_each = true};
        assert_int_equal(kn_pass_run_pipeline(m, &po, &log), KN_OK);
        assert_int_equal(m->graph->n_nodes, 1);
        assert_int_equal(m->graph->nodes[0]->op, KN_OP_FusedConv);
        kn_pass_log_free(&log);
        kn_model_free(m);
    }
}

/* ---- the evaluator agrees before and after ------------------------------------------ */

static uint32_t g_seed = 11;
static float rnd(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 65536.0f * 4.0f - 2.0f;
}

/* Fills every constant of more than one element with random values (the
 * placeholders of the parsed text); scalars (Clip bounds) stay as written. */
static void randomize_constants(kn_model *m)
{
    for (int i = 0; i < m->graph->n_values; i++) {
        kn_tensor *t = m->graph->values[i]->const_data;
        if (!t || t->dtype != KN_F32 || kn_tensor_numel(t) <= 1) continue;
        for (int64_t k = 0; k < kn_tensor_numel(t); k++) ((float *)t->data)[k] = rnd();
    }
}

static void eval_all(kn_model *m, kn_tensor *in, const char **names, kn_tensor *out)
{
    if (kn_eval_model(m, m->graph->n_inputs, names, in, out)) fail_msg("eval: %s", kn_last_error());
}

/* Evaluates text with random weights and inputs, fuses, evaluates again:
 * every output agrees within 1e-5 (relative) and `fused` nodes were made. */
static void same_before_after(const char *text, int fused)
{
    kn_model *m = parse_flags(text, KN_IR_PARSE_PLACEHOLDERS);
    randomize_constants(m);
    int n_in = m->graph->n_inputs, n_out = m->graph->n_outputs;
    assert_true(n_in <= 4 && n_out <= 4);
    kn_tensor in[4] = {0}, ref[4] = {0}, got[4] = {0};
    const char *names[4];
    for (int i = 0; i < n_in; i++) {
        kn_value *v = m->graph->inputs[i];
        names[i] = v->name;
        assert_int_equal(kn_tensor_alloc(&in[i], v->dtype, v->shape.rank, v->shape.dims), KN_OK);
        for (int64_t k = 0; k < kn_tensor_numel(&in[i]); k++) ((float *)in[i].data)[k] = rnd();
    }
    eval_all(m, in, names, ref);
    kn_pass_log log = {0};
    run_passes(m, "fuse-conv,fuse-matmul", &log);
    int n_fused = 0;
    for (int i = 0; i < m->graph->n_nodes; i++)
        n_fused += m->graph->nodes[i]->op == KN_OP_FusedConv || m->graph->nodes[i]->op == KN_OP_FusedMatMul;
    assert_int_equal(n_fused, fused);
    eval_all(m, in, names, got);
    for (int o = 0; o < n_out; o++) {
        assert_int_equal(ref[o].rank, got[o].rank);
        int64_t n = kn_tensor_numel(&ref[o]);
        assert_int_equal(n, kn_tensor_numel(&got[o]));
        for (int64_t k = 0; k < n; k++) {
            float a = ((float *)ref[o].data)[k], b = ((float *)got[o].data)[k];
            if (!(fabsf(a - b) <= 1e-5f * fmaxf(1.0f, fabsf(a))))
                fail_msg("output %d element %lld: %.9g before fusion, %.9g after", o, (long long)k, a, b);
        }
        kn_tensor_free(&ref[o]);
        kn_tensor_free(&got[o]);
    }
    for (int i = 0; i < n_in; i++) kn_tensor_free(&in[i]);
    kn_pass_log_free(&log);
    kn_model_free(m);
}

static void test_eval_conv_chains(void **state)
{
    (void)state;
    same_before_after("kiln-ir v1\nopset \"\" 17\n"
                      "graph main(%x: f32[1,4,7,7], %s: f32[1,8,4,4]) {\n"
                      "  %w = const f32[8,4,3,3] {... fnv1a=0}\n"
                      "  %b = const f32[8,1,1] {... fnv1a=0}\n"
                      "  %wd = const f32[8,1,3,3] {... fnv1a=0}\n"
                      "  %bd = const f32[8] {... fnv1a=0}\n"
                      "  %lo = const f32[] [0.0]\n"
                      "  %hi = const f32[] [0.5]\n"
                      "  %c: f32[1,8,4,4] = Conv(%x, %w) {pads=[1,1,1,1], strides=[2,2]} #\"c\"\n"
                      "  %a: f32[1,8,4,4] = Add(%c, %b) #\"a\"\n"
                      "  %r: f32[1,8,4,4] = Add(%a, %s) #\"res\"\n"
                      "  %y: f32[1,8,4,4] = Relu(%r) #\"relu\"\n"
                      "  %d: f32[1,8,4,4] = Conv(%y, %wd, %bd) {group=8, pads=[1,1,1,1]} #\"dw\"\n"
                      "  %k: f32[1,8,4,4] = Clip(%d, %lo, %hi) #\"clip\"\n"
                      "  %h: f32[1,8,4,4] = HardSwish(%k) #\"hs\"\n"
                      "  %e: f32[1,8,4,4] = Conv(%h, %wd) {group=8, pads=[1,1,1,1]} #\"dw2\"\n"
                      "  %l: f32[1,8,4,4] = LeakyRelu(%e) {alpha=0.2} #\"lr\"\n"
                      "  %t: f32[1,8,4,4] = Tanh(%l) #\"tanh\"\n"
                      "  %z: f32[1,8,4,4] = Sigmoid(%t) #\"sig\"\n"
                      "  %f: f32[1,8,4,4] = Conv(%z, %wd) {group=8, pads=[1,1,1,1]} #\"dw3\"\n"
                      "  %fs: f32[1,8,4,4] = Sigmoid(%f) #\"silu.sig\"\n"
                      "  %fm: f32[1,8,4,4] = Mul(%f, %fs) #\"silu\"\n"
                      "  return %fm\n}\n",
                      4);
}

static void test_eval_matmul_chains(void **state)
{
    (void)state;
    same_before_after("kiln-ir v1\nopset \"\" 20\n"
                      "graph main(%x: f32[2,5,6], %v: f32[3,6]) {\n"
                      "  %w1 = const f32[6,9] {... fnv1a=0}\n"
                      "  %b1 = const f32[9] {... fnv1a=0}\n"
                      "  %w2 = const f32[9,6] {... fnv1a=0}\n"
                      "  %b2 = const f32[1,1,6] {... fnv1a=0}\n"
                      "  %wg = const f32[4,6] {... fnv1a=0}\n"
                      "  %cg = const f32[4] {... fnv1a=0}\n"
                      "  %m1: f32[2,5,9] = MatMul(%x, %w1) #\"mm1\"\n"
                      "  %a1: f32[2,5,9] = Add(%b1, %m1) #\"a1\"\n"
                      "  %g: f32[2,5,9] = Gelu(%a1) #\"gelu\"\n"
                      "  %m2: f32[2,5,6] = MatMul(%g, %w2) #\"mm2\"\n"
                      "  %a2: f32[2,5,6] = Add(%m2, %b2) #\"a2\"\n"
                      "  %r2: f32[2,5,6] = Add(%a2, %x) #\"res\"\n"
                      "  %gm: f32[3,4] = Gemm(%v, %wg, %cg) {transB=1, alpha=0.75} #\"gemm\"\n"
                      "  %gt: f32[3,4] = Gelu(%gm) {approximate=\"tanh\"} #\"gelu_t\"\n"
                      "  return %r2, %gt\n}\n",
                      3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_bias_residual_relu),
        cmocka_unit_test(test_conv_swish),
        cmocka_unit_test(test_conv_bias_sum_clip),
        cmocka_unit_test(test_conv_near_misses),
        cmocka_unit_test(test_bias_adds_bounded),
        cmocka_unit_test(test_matmul_bias_gelu_residual),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_subgraph_reader_left_alone),
        cmocka_unit_test(test_in_pipelines),
        cmocka_unit_test(test_eval_conv_chains),
        cmocka_unit_test(test_eval_matmul_chains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
