/*
 * tests/runtime/test_pointwise.c — 1x1 convolutions by kiln's AVX-512
 * kernel (runtime/kernels/x86/f32_conv1x1_avx512.c) against a naive double-precision product
 * on NHWC: pixel counts that fill and do not fill its row blocks and row
 * groups, strides 1 and 2 (also unequal, and images that the stride does not
 * divide), output channels in whole and odd panel pairs, any input
 * channel count, a constant and a per-run bias, every post-op it takes
 * (ReLU, leaky ReLU, clip, residual sum before or after an activation, in
 * place), 1 and 2 threads bitwise equal; which records it refuses and which
 * it takes over from oneDNN; and the oneDNN wrapper (dnnl.c) running such a
 * record by it between two NHWC activations, and not when the record asks
 * for oneDNN's direct kernel. And matmuls by constant weights through the
 * same kernel (2-D and batched A, B transposed or not, bias, GELU, the
 * residual sum, N not a multiple of 16), which it refuses, and the matmul
 * it takes over.
 * Skipped on CPUs without AVX-512F (the kernel is not used there).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../runtime/src/rt_internal.h"

#define CONV_TEST_SEED 4242
#include "conv_testutil.h"
#include "test_skip.h"

static bool cpu_has_avx512(void) { return (kn_cpu_features() & KN_CPU_AVX512F) != 0; }

typedef struct pcase {
    int64_t N, C, O, H, W;
    int64_t sh, sw; /* strides; 0: 1 */
    bool bias, const_bias;
    int n_post;
    kn_abi_post post[4];
} pcase;

static bool has_sum(const pcase *c)
{
    for (int i = 0; i < c->n_post; i++)
        if (c->post[i].kind == KN_POST_SUM) return true;
    return false;
}

static int64_t sh(const pcase *c) { return c->sh ? c->sh : 1; }
static int64_t sw(const pcase *c) { return c->sw ? c->sw : 1; }
static int64_t oh(const pcase *c) { return (c->H - 1) / sh(c) + 1; }
static int64_t ow(const pcase *c) { return (c->W - 1) / sw(c) + 1; }

/* The record of a 1x1 conv between NHWC activations (the session's layout
 * on AVX-512); weights blob: [64 bytes][w][b]. */
static void make_record(const pcase *c, kn_abi_dnnl *r)
{
    memset(r, 0, sizeof *r);
    r->kind = KN_DNNL_CONV;
    r->groups = 1;
    r->spatial = 2;
    r->alpha = 1.0f;
    kn_abi_tensor *ts[3] = {&r->src, &r->wei, &r->dst};
    int64_t dims[3][4] = {{c->N, c->C, c->H, c->W}, {c->O, c->C, 1, 1}, {c->N, c->O, oh(c), ow(c)}};
    for (int t = 0; t < 3; t++) {
        ts[t]->dtype = KN_F32;
        ts[t]->rank = 4;
        int64_t n = 1;
        for (int i = 0; i < 4; i++) ts[t]->dims[i] = dims[t][i], n *= dims[t][i];
        ts[t]->nbytes = n * 4;
    }
    if (c->bias) {
        r->bias.dtype = KN_F32;
        r->bias.rank = 1;
        r->bias.dims[0] = c->O;
        r->bias.nbytes = c->O * 4;
    }
    r->strides[0] = sh(c), r->strides[1] = sw(c), r->dilations[0] = r->dilations[1] = 1;
    r->n_post = c->n_post;
    memcpy(r->post, c->post, sizeof r->post);
    r->wei_ref.loc = KN_LOC_WEIGHTS;
    r->wei_ref.offset = 64;
    r->bias_ref.loc = c->const_bias ? KN_LOC_WEIGHTS : KN_LOC_ARENA;
    r->bias_ref.offset = 64 + r->wei.nbytes;
    r->src_layout = r->dst_layout = KN_LAYOUT_NATIVE;
    r->post_layout = has_sum(c) ? KN_LAYOUT_NATIVE : KN_LAYOUT_PLAIN;
}

/* Naive 1x1 conv on NHWC (y[p][o] = sum_c x[under p][c] w[o][c] + b[o]),
 * then the post-ops. */
static void conv_ref(const pcase *c, const float *x, const float *w, const float *b, const float *res, float *y)
{
    int64_t P = c->N * oh(c) * ow(c);
    for (int64_t p = 0; p < P; p++)
        for (int64_t o = 0; o < c->O; o++) {
            int64_t n = p / (oh(c) * ow(c)), y0 = p / ow(c) % oh(c), x0 = p % ow(c);
            const float *xp = x + ((n * c->H + y0 * sh(c)) * c->W + x0 * sw(c)) * c->C;
            double acc = b ? b[o] : 0.0;
            for (int64_t ci = 0; ci < c->C; ci++) acc += (double)xp[ci] * w[o * c->C + ci];
            float v = (float)acc;
            for (int i = 0; i < c->n_post; i++) v = post1(&c->post[i], v, res ? res[p * c->O + o] : 0.f);
            y[p * c->O + o] = v;
        }
}

/* Runs c through kn_pw at 1 and 2 threads (bitwise equal), against the
 * naive product; with a residual also in place (dst holding it). */
static void run_case(const pcase *c)
{
    if (!cpu_has_avx512()) KN_SKIP("kiln's 1x1 kernel needs AVX-512F, which this CPU (or KILN_CPU_MASK) lacks");
    kn_abi_dnnl r;
    make_record(c, &r);
    int64_t P = c->N * oh(c) * ow(c), nx = c->N * c->H * c->W * c->C, ny = P * c->O, nw = c->O * c->C;
    float *blob = rand_f(16 + nw + c->O), *x = rand_f(nx), *res = rand_f(ny);
    const float *w = blob + 16, *b = c->bias ? blob + 16 + nw : NULL;
    bool sum = has_sum(c);
    float *want = alloc_f(ny), *y1 = alloc_f(ny), *y2 = alloc_f(ny);
    conv_ref(c, x, w, b, sum ? res : NULL, want);

    assert_true(kn_pw_supported(&r));
    kn_pw *k;
    int st = kn_pw_create(&r, (const unsigned char *)blob, &k);
    if (st) print_error("%s\n", kn_last_error());
    assert_int_equal(st, KN_OK);
    const float *run_bias = c->const_bias ? NULL : b;
    assert_int_equal(kn_pw_exec(k, x, run_bias, y1, sum ? res : NULL, 1), KN_OK);
    assert_int_equal(kn_pw_exec(k, x, run_bias, y2, sum ? res : NULL, 2), KN_OK);
    assert_memory_equal(y1, y2, (size_t)ny * sizeof(float));
    double e = rel_err(y1, want, ny);
    if (!(e < 1e-5))
        print_error("1x1 %lldx%lldx%lldx%lld -> %lld: relative error %.3g\n", (long long)c->N, (long long)c->C,
                    (long long)c->H, (long long)c->W, (long long)c->O, e);
    assert_true(e < 1e-5);
    if (sum) { /* in place: dst holds the residual */
        memcpy(y1, res, (size_t)ny * sizeof(float));
        assert_int_equal(kn_pw_exec(k, x, run_bias, y1, y1, 2), KN_OK);
        assert_memory_equal(y1, y2, (size_t)ny * sizeof(float));
    }
    kn_pw_free(k);
    free(blob), free(x), free(res), free(want), free(y1), free(y2);
}

static const kn_abi_post RELU = {KN_POST_RELU, 0, 0}, SUM = {KN_POST_SUM, 0, 0};

static void test_shapes(void **st)
{
    (void)st;
    /* one row block, one panel */
    pcase a = {.N = 1, .C = 16, .O = 16, .H = 2, .W = 3, .bias = true, .const_bias = true};
    run_case(&a);
    /* rows that fill no row block or group evenly (3 x 7 x 9 = 189 pixels);
     * an odd count of panels (48 channels: a pair, then one alone); an odd
     * count of input channels */
    pcase b = {.N = 3, .C = 17, .O = 48, .H = 7, .W = 9, .bias = true, .const_bias = true, .n_post = 1,
               .post = {RELU}};
    run_case(&b);
    /* ResNet-50's 14x14 expansion layer */
    pcase c = {.N = 1, .C = 256, .O = 1024, .H = 14, .W = 14, .bias = true, .const_bias = true, .n_post = 1,
               .post = {RELU}};
    run_case(&c);
    /* a single input channel, no bias */
    pcase d = {.N = 2, .C = 1, .O = 32, .H = 5, .W = 5};
    run_case(&d);
    /* K in parts (over 256 input channels, several row blocks per group):
     * 600 channels in 3 parts, one group of 100 pixels, the residual sum
     * (also in place); 300 channels in 2 parts over 400 pixels, groups of
     * 64 rows, a per-run bias */
    pcase e = {.N = 1, .C = 600, .O = 48, .H = 10, .W = 10, .bias = true, .const_bias = true, .n_post = 2,
               .post = {SUM, RELU}};
    run_case(&e);
    pcase f = {.N = 1, .C = 300, .O = 32, .H = 20, .W = 20, .bias = true};
    run_case(&f);
}

static void test_strides(void **st)
{
    (void)st;
    /* ResNet-50's downsampling layer at 28x28, with its residual sum */
    pcase a = {.N = 2, .C = 256, .O = 512, .H = 28, .W = 28, .sh = 2, .sw = 2, .bias = true, .const_bias = true,
               .n_post = 2, .post = {SUM, RELU}};
    run_case(&a);
    /* odd images (the stride leaves their last row and column out), unequal
     * strides, lines shorter than a row block */
    pcase b = {.N = 3, .C = 20, .O = 48, .H = 9, .W = 11, .sh = 2, .sw = 3, .bias = true, .const_bias = true};
    run_case(&b);
    pcase c = {.N = 1, .C = 32, .O = 16, .H = 7, .W = 30, .sh = 3, .sw = 1, .n_post = 1, .post = {RELU}};
    run_case(&c);
    /* K in parts over lines of a strided convolution (10 lines of 7 pixels) */
    pcase d = {.N = 2, .C = 520, .O = 64, .H = 9, .W = 13, .sh = 2, .sw = 2, .bias = true, .const_bias = true,
               .n_post = 1, .post = {RELU}};
    run_case(&d);
}

static void test_bias_per_run(void **st)
{
    (void)st;
    pcase c = {.N = 1, .C = 40, .O = 64, .H = 6, .W = 11, .bias = true, .const_bias = false};
    run_case(&c);
}

static void test_post_ops(void **st)
{
    (void)st;
    kn_abi_post leaky = {KN_POST_LEAKY_RELU, 0.1f, 0}, clip = {KN_POST_CLIP, 0.0f, 6.0f};
    pcase a = {.N = 2, .C = 24, .O = 80, .H = 9, .W = 8, .bias = true, .const_bias = true, .n_post = 1,
               .post = {leaky}};
    run_case(&a);
    pcase b = a;
    b.post[0] = clip;
    run_case(&b);
    /* ResNet's order: residual sum, then ReLU */
    pcase s = a;
    s.n_post = 2, s.post[0] = SUM, s.post[1] = RELU;
    run_case(&s);
    /* activation first, then the sum, then a clip */
    pcase t = a;
    t.n_post = 3, t.post[0] = RELU, t.post[1] = SUM, t.post[2] = clip;
    run_case(&t);
}

static void test_refusals(void **st)
{
    (void)st;
    if (!cpu_has_avx512()) KN_SKIP("kiln's 1x1 kernel needs AVX-512F, which this CPU (or KILN_CPU_MASK) lacks");
    pcase c = {.N = 1, .C = 16, .O = 32, .H = 4, .W = 4};
    kn_abi_dnnl base, r;
    make_record(&c, &base);
    assert_true(kn_pw_supported(&base));
    r = base, r.wei.dims[2] = r.wei.dims[3] = 3; /* 3x3 */
    assert_false(kn_pw_supported(&r));
    r = base, r.strides[0] = 2; /* dst does not match the stride */
    assert_false(kn_pw_supported(&r));
    r = base, r.dilations[0] = 2;
    assert_false(kn_pw_supported(&r));
    r = base, r.pads_begin[1] = 1;
    assert_false(kn_pw_supported(&r));
    r = base, r.groups = 2;
    assert_false(kn_pw_supported(&r));
    r = base, r.wei.dims[0] = r.dst.dims[1] = 24; /* not whole 16-channel panels */
    assert_false(kn_pw_supported(&r));
    r = base, r.n_post = 1, r.post[0].kind = KN_POST_TANH;
    assert_false(kn_pw_supported(&r));
    r = base, r.wei_ref.loc = KN_LOC_ARENA; /* weights per run */
    assert_false(kn_pw_supported(&r));
    kn_pw *k = NULL;
    r = base, r.wei.nbytes = 8;
    assert_int_equal(kn_pw_create(&r, (const unsigned char *)&base, &k), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "the weights have the wrong size"));
    assert_null(k);
    r = base, r.strides[0] = 2;
    assert_int_equal(kn_pw_create(&r, (const unsigned char *)&base, &k), KN_ERR_UNSUPPORTED);
    assert_null(k);
}

/* ---- matmuls ---- */

typedef struct mcase {
    int rank;           /* of A and the product: 2 or 3 ([B, M, K]) */
    int64_t B, M, K, N;
    bool trans_b, bias;
    int n_post;
    kn_abi_post post[4];
} mcase;

/* The record of A [B, M, K] (or [M, K]) x a constant B [K, N] ([N, K] with
 * trans_b), a constant bias of N; weights blob: [64 bytes][b][bias]. */
static void make_mm(const mcase *c, kn_abi_dnnl *r)
{
    memset(r, 0, sizeof *r);
    r->kind = KN_DNNL_MATMUL;
    r->alpha = 1.0f;
    r->trans_b = c->trans_b;
    kn_abi_tensor *ts[3] = {&r->src, &r->wei, &r->dst};
    int64_t lead = c->rank == 3 ? 1 : 0;
    for (int t = 0; t < 3; t++) ts[t]->dtype = KN_F32;
    r->src.rank = r->dst.rank = c->rank, r->wei.rank = 2;
    if (lead) r->src.dims[0] = r->dst.dims[0] = c->B;
    r->src.dims[lead] = r->dst.dims[lead] = c->M;
    r->src.dims[lead + 1] = c->K, r->dst.dims[lead + 1] = c->N;
    r->wei.dims[0] = c->trans_b ? c->N : c->K, r->wei.dims[1] = c->trans_b ? c->K : c->N;
    int64_t rows = (lead ? c->B : 1) * c->M;
    r->src.nbytes = rows * c->K * 4, r->dst.nbytes = rows * c->N * 4, r->wei.nbytes = c->K * c->N * 4;
    if (c->bias) r->bias.dtype = KN_F32, r->bias.rank = 1, r->bias.dims[0] = c->N, r->bias.nbytes = c->N * 4;
    r->n_post = c->n_post;
    memcpy(r->post, c->post, sizeof r->post);
    r->wei_ref.loc = KN_LOC_WEIGHTS;
    r->wei_ref.offset = 64;
    r->bias_ref.loc = KN_LOC_WEIGHTS;
    r->bias_ref.offset = 64 + r->wei.nbytes;
}

static void run_mm(const mcase *c)
{
    if (!cpu_has_avx512()) KN_SKIP("kiln's 1x1 kernel needs AVX-512F, which this CPU (or KILN_CPU_MASK) lacks");
    kn_abi_dnnl r;
    make_mm(c, &r);
    int64_t rows = (c->rank == 3 ? c->B : 1) * c->M, nw = c->K * c->N, ny = rows * c->N;
    float *blob = rand_f(16 + nw + c->N), *a = rand_f(rows * c->K), *res = rand_f(ny);
    const float *w = blob + 16, *b = c->bias ? blob + 16 + nw : NULL;
    float *want = alloc_f(ny), *y1 = alloc_f(ny), *y2 = alloc_f(ny);
    bool sum = false;
    for (int i = 0; i < c->n_post; i++) sum |= c->post[i].kind == KN_POST_SUM;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t n = 0; n < c->N; n++) {
            double acc = b ? b[n] : 0.0;
            for (int64_t k = 0; k < c->K; k++)
                acc += (double)a[i * c->K + k] * (c->trans_b ? w[n * c->K + k] : w[k * c->N + n]);
            double v = acc;
            for (int p = 0; p < c->n_post; p++)
                v = c->post[p].kind == KN_POST_GELU_ERF ? 0.5 * v * (1.0 + erf(v / sqrt(2.0)))
                                                        : post1(&c->post[p], (float)v, res[i * c->N + n]);
            want[i * c->N + n] = (float)v;
        }
    assert_true(kn_pw_matmul_supported(&r));
    kn_pw *k;
    int st = kn_pw_create_matmul(&r, (const unsigned char *)blob, &k);
    if (st) print_error("%s\n", kn_last_error());
    assert_int_equal(st, KN_OK);
    assert_int_equal(kn_pw_exec(k, a, NULL, y1, sum ? res : NULL, 1), KN_OK);
    assert_int_equal(kn_pw_exec(k, a, NULL, y2, sum ? res : NULL, 2), KN_OK);
    assert_memory_equal(y1, y2, (size_t)ny * sizeof(float));
    double e = rel_err(y1, want, ny);
    if (!(e < 1e-5)) print_error("matmul %lldx%lldx%lld: relative error %.3g\n", (long long)rows, (long long)c->K,
                                 (long long)c->N, e);
    assert_true(e < 1e-5);
    kn_pw_free(k);
    free(blob), free(a), free(res), free(want), free(y1), free(y2);
}

static void test_matmul(void **st)
{
    (void)st;
    kn_abi_post gelu = {KN_POST_GELU_ERF, 0, 0};
    /* a transformer's projection: [B, M, K] x [K, N], bias, GELU */
    mcase a = {.rank = 3, .B = 2, .M = 37, .K = 96, .N = 160, .bias = true, .n_post = 1, .post = {gelu}};
    run_mm(&a);
    /* 2-D, B transposed (Gemm's transB), residual sum then ReLU */
    mcase b = {.rank = 2, .M = 9, .K = 33, .N = 48, .trans_b = true, .bias = true, .n_post = 2,
               .post = {SUM, RELU}};
    run_mm(&b);
    /* no bias; GELU's tails (large |x|) */
    mcase c = {.rank = 2, .M = 300, .K = 256, .N = 32, .n_post = 1, .post = {gelu}};
    run_mm(&c);
    /* SiLU, and a Sigmoid after a residual sum */
    mcase d = {.rank = 2, .M = 21, .K = 40, .N = 32, .bias = true, .n_post = 1, .post = {{KN_POST_SWISH, 0, 0}}};
    run_mm(&d);
    d.n_post = 2, d.post[0] = SUM, d.post[1] = (kn_abi_post){KN_POST_SIGMOID, 0, 0};
    run_mm(&d);
    d.n_post = 1, d.post[0] = (kn_abi_post){KN_POST_HARDSWISH, 0, 0};
    run_mm(&d);
    /* N not a multiple of 16: the short last panel computed aside. An
     * ImageNet classifier (Gemm, transB, 1000 classes), one row; 33
     * columns (the short panel alone in its pair) over 19 rows with ReLU;
     * 24 (the short panel second in its pair), with and without a bias, GELU */
    mcase head = {.rank = 2, .M = 1, .K = 1280, .N = 1000, .trans_b = true, .bias = true};
    run_mm(&head);
    mcase odd = {.rank = 2, .M = 19, .K = 40, .N = 33, .bias = true, .n_post = 1, .post = {RELU}};
    run_mm(&odd);
    mcase pair = {.rank = 3, .B = 2, .M = 7, .K = 24, .N = 24, .n_post = 1, .post = {gelu}};
    run_mm(&pair);
    pair.bias = true;
    run_mm(&pair);
    /* K in parts (over 256) with the short panel: second in its pair (56
     * columns), then alone (40), with and without a bias */
    mcase kp = {.rank = 3, .B = 2, .M = 45, .K = 700, .N = 56, .trans_b = true, .bias = true, .n_post = 1,
                .post = {gelu}};
    run_mm(&kp);
    mcase kq = {.rank = 2, .M = 130, .K = 1030, .N = 40, .n_post = 1, .post = {RELU}};
    run_mm(&kq);
    kq.bias = true;
    run_mm(&kq);
    /* and whole panels with the residual, BERT's output projection's shape */
    mcase kr = {.rank = 3, .B = 1, .M = 128, .K = 3072, .N = 768, .bias = true, .n_post = 1, .post = {SUM}};
    run_mm(&kr);
}

static void test_matmul_refusals(void **st)
{
    (void)st;
    mcase c = {.rank = 3, .B = 2, .M = 8, .K = 512, .N = 512, .bias = true};
    kn_abi_dnnl base, r;
    make_mm(&c, &base);
    if (cpu_has_avx512()) assert_true(kn_pw_matmul_supported(&base));
    assert_true(kn_pw_matmul_worth(&base, 1)); /* a 1 MB filter, on any thread count */
    assert_true(kn_pw_matmul_worth(&base, 2));
    r = base, r.trans_a = 1;
    assert_false(kn_pw_matmul_supported(&r));
    r = base, r.alpha = 0.5f;
    assert_false(kn_pw_matmul_supported(&r));
    r = base, r.wei.rank = 3, r.wei.dims[0] = 2, r.wei.dims[1] = 512, r.wei.dims[2] = 512; /* weights per batch */
    assert_false(kn_pw_matmul_supported(&r));
    r = base, r.wei.dims[1] = r.dst.dims[2] = 8; /* not one whole panel */
    assert_false(kn_pw_matmul_supported(&r));
    /* a short last panel is computed aside: with no residual to read there,
     * and a bias it can pad once */
    r = base, r.wei.dims[1] = r.dst.dims[2] = 24, r.bias.dims[0] = 24, r.bias.nbytes = 24 * 4;
    if (cpu_has_avx512()) assert_true(kn_pw_matmul_supported(&r));
    r.n_post = 1, r.post[0] = SUM;
    assert_false(kn_pw_matmul_supported(&r));
    r.n_post = 0, r.bias_ref.loc = KN_LOC_ARENA;
    assert_false(kn_pw_matmul_supported(&r));
    r = base, r.wei_ref.loc = KN_LOC_ARENA;
    assert_false(kn_pw_matmul_supported(&r));
    r = base, r.n_post = 1, r.post[0].kind = KN_POST_TANH;
    assert_false(kn_pw_matmul_supported(&r));
    /* ViT-Tiny's 0.6 MB: kiln's on one thread where the tuning row says so
     * (avx512: measured faster there), oneDNN's on two; Zen 5's row keeps
     * 1 MB on any count */
    mcase small = {.rank = 2, .M = 8, .K = 192, .N = 768};
    make_mm(&small, &r);
    setenv("KILN_TUNE_FAMILY", "avx512", 1);
    assert_true(kn_pw_matmul_worth(&r, 1));
    assert_false(kn_pw_matmul_worth(&r, 2));
    mcase tiny = {.rank = 2, .M = 8, .K = 64, .N = 256}; /* 64 KB */
    kn_abi_dnnl t;
    make_mm(&tiny, &t);
    assert_false(kn_pw_matmul_worth(&t, 1));
    if (cpu_has_avx512()) {
        assert_true(kn_pw_matmul_wanted(&r, 1));
        assert_false(kn_pw_matmul_wanted(&r, 2));
    }
    setenv("KILN_TUNE_FAMILY", "zen5", 1);
    assert_false(kn_pw_matmul_worth(&r, 1));
    assert_false(kn_pw_matmul_worth(&r, 2));
    unsetenv("KILN_TUNE_FAMILY");
    kn_pw *k = NULL;
    r = base, r.trans_a = 1;
    assert_int_equal(kn_pw_create_matmul(&r, (const unsigned char *)&base, &k), KN_ERR_UNSUPPORTED);
    assert_null(k);
}

/* Where it runs instead of oneDNN: a residual sum into 8 MB or more, or at
 * most 256 pixels against a filter of 1 MB or more. */
static void test_worth(void **st)
{
    (void)st;
    struct {
        pcase c;
        bool worth;
    } want[] = {
        /* ResNet-50 at batch 8: 56x56x256 with its residual (25.7 MB) */
        {{.N = 8, .C = 64, .O = 256, .H = 56, .W = 56, .n_post = 2, .post = {SUM, RELU}}, true},
        /* the same without the residual, and at batch 1 (3.2 MB) */
        {{.N = 8, .C = 64, .O = 256, .H = 56, .W = 56, .n_post = 1, .post = {RELU}}, false},
        {{.N = 1, .C = 64, .O = 256, .H = 56, .W = 56, .n_post = 2, .post = {SUM, RELU}}, false},
        /* batch 1's 14x14 and 7x7 layers (1 and 4 MB filters) */
        {{.N = 1, .C = 256, .O = 1024, .H = 14, .W = 14}, true},
        {{.N = 1, .C = 2048, .O = 512, .H = 7, .W = 7, .n_post = 1, .post = {RELU}}, true},
        /* MobileNetV2's 7x7 expansion (614 KB), and a large filter on many pixels */
        {{.N = 1, .C = 160, .O = 960, .H = 7, .W = 7}, false},
        {{.N = 8, .C = 256, .O = 1024, .H = 14, .W = 14}, false},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        kn_abi_dnnl r;
        make_record(&want[i].c, &r);
        assert_int_equal(kn_pw_worth(&r), want[i].worth);
    }
}

/* dnnl.c runs a 1x1 record between two NHWC activations by pointwise.c (on
 * an AVX-512 session, whose layout is NHWC), and by oneDNN when the record
 * asks for direct convolution: the same results to float rounding. */
static void test_dnnl_chooses(void **st)
{
    (void)st;
    if (!cpu_has_avx512()) KN_SKIP("kiln's 1x1 kernel needs AVX-512F, which this CPU (or KILN_CPU_MASK) lacks");
    kn_dnnl_session *s = NULL;
    assert_int_equal(kn_dnnl_session_init(&s), KN_OK);
    /* few pixels against a 1 MB filter: worth it (kn_pw_worth) */
    pcase c = {.N = 1, .C = 512, .O = 512, .H = 10, .W = 7, .bias = true, .const_bias = true, .n_post = 2,
               .post = {SUM, RELU}};
    kn_abi_dnnl r;
    make_record(&c, &r);
    if (kn_dnnl_native_block(s) != 0) { /* oneDNN held to AVX2 (nChw8c): not NHWC, so oneDNN runs it */
        kn_dnnl_prim *p = NULL;
        float *w = rand_f(16 + c.O * c.C + c.O);
        assert_int_equal(kn_dnnl_prim_create(s, &r, (const unsigned char *)w, &p), KN_OK);
        assert_null(strstr(kn_dnnl_prim_impl(p), "kiln"));
        kn_dnnl_prim_free(p);
        kn_dnnl_session_free(s);
        free(w);
        return;
    }
    int64_t P = c.H * c.W, ny = P * c.O, nw = c.O * c.C;
    float *blob = rand_f(16 + nw + c.O), *x = rand_f(P * c.C), *res = rand_f(ny), *y1 = alloc_f(ny),
          *y2 = alloc_f(ny);
    kn_dnnl_prim *own = NULL, *dnnl = NULL;
    assert_int_equal(kn_dnnl_prim_create(s, &r, (const unsigned char *)blob, &own), KN_OK);
    assert_string_equal(kn_dnnl_prim_impl(own), "kiln 1x1:avx512");
    r.conv_algo = KN_CONV_ALGO_DIRECT;
    assert_int_equal(kn_dnnl_prim_create(s, &r, (const unsigned char *)blob, &dnnl), KN_OK);
    assert_null(strstr(kn_dnnl_prim_impl(dnnl), "kiln"));
    assert_int_equal(kn_dnnl_prim_exec(s, own, x, NULL, NULL, y1, res, 2), KN_OK);
    assert_int_equal(kn_dnnl_prim_exec(s, dnnl, x, NULL, NULL, y2, res, 2), KN_OK);
    assert_true(rel_err(y1, y2, ny) < 1e-5);
    /* the residual overlapping dst other than exactly is copied aside first */
    float *buf = alloc_f(ny + 16);
    memcpy(buf + 16, res, (size_t)ny * sizeof(float));
    assert_int_equal(kn_dnnl_prim_exec(s, own, x, NULL, NULL, buf, buf + 16, 2), KN_OK);
    assert_true(rel_err(buf, y2, ny) < 1e-5);
    /* a matmul by a 1 MB constant matrix: kiln's, the same as the kernel's own run */
    mcase m = {.rank = 3, .B = 1, .M = 12, .K = 512, .N = 512, .bias = true, .n_post = 1, .post = {RELU}};
    kn_abi_dnnl mr;
    make_mm(&m, &mr);
    kn_dnnl_prim *mm = NULL;
    kn_pw *k = NULL;
    assert_int_equal(kn_dnnl_prim_create(s, &mr, (const unsigned char *)blob, &mm), KN_OK);
    assert_string_equal(kn_dnnl_prim_impl(mm), "kiln matmul:avx512");
    assert_int_equal(kn_pw_create_matmul(&mr, (const unsigned char *)blob, &k), KN_OK);
    assert_int_equal(kn_dnnl_prim_exec(s, mm, x, NULL, NULL, y1, NULL, 2), KN_OK);
    assert_int_equal(kn_pw_exec(k, x, NULL, y2, NULL, 2), KN_OK);
    assert_memory_equal(y1, y2, (size_t)(m.M * m.N) * sizeof(float));
    kn_pw_free(k);
    kn_dnnl_prim_free(mm);
    kn_dnnl_prim_free(own);
    kn_dnnl_prim_free(dnnl);
    kn_dnnl_session_free(s);
    free(blob), free(x), free(res), free(y1), free(y2), free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),   cmocka_unit_test(test_strides),      cmocka_unit_test(test_bias_per_run),
        cmocka_unit_test(test_post_ops), cmocka_unit_test(test_refusals),     cmocka_unit_test(test_worth),
        cmocka_unit_test(test_matmul),   cmocka_unit_test(test_matmul_refusals), cmocka_unit_test(test_dnnl_chooses),
    };
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
