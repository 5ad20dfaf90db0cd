/*
 * tests/runtime/test_stem.c — kiln's first-convolution kernel
 * (runtime/kernels/x86/f32_stem_avx512.c) against a naive convolution in
 * double: 1, 3 and 4 input channels (plain NCHW), 16, 32, 48 and 64 output
 * channels (NHWC), windows 1x1 to 7x7 (also KH != KW), strides 1 and 2,
 * no, symmetric, asymmetric and wide padding, widths whose rows leave
 * every tail block size and edge pixels on both sides, batch 2, a
 * constant, a per-run or no bias, the post-ops (ReLU, Clip, HardSwish,
 * Swish, Sigmoid, LeakyReLU, GELU), within 1e-5 relative; 1, 2 and 3
 * threads bitwise equal. Records it refuses: 5 input channels, 8 output
 * channels, stride 3, dilation, a residual sum, groups, an int8 record.
 * Skipped on CPUs without AVX-512F (the refusal checked).
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
#include "test_skip.h"

static bool cpu_has_avx512(void) { return (kn_cpu_features() & KN_CPU_AVX512F) != 0; }

enum { BIAS_NONE, BIAS_CONST, BIAS_RUN };

typedef struct scase {
    int64_t N, C, O, H, W, KH, KW, s, pt, pl, pb, pr;
    int bias;
    int n_post;
    kn_abi_post post[2];
} scase;

static int64_t oh(const scase *c) { return (c->H + c->pt + c->pb - c->KH) / c->s + 1; }
static int64_t ow(const scase *c) { return (c->W + c->pl + c->pr - c->KW) / c->s + 1; }

/* The record, and the weights blob it points into: W at 0, the bias after. */
static unsigned char *make_record(const scase *c, kn_abi_dnnl *r, unsigned seed)
{
    memset(r, 0, sizeof *r);
    r->kind = KN_DNNL_CONV;
    r->spatial = 2;
    r->groups = 1;
    r->src = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {c->N, c->C, c->H, c->W}};
    int64_t nw = c->O * c->C * c->KH * c->KW;
    r->wei = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {c->O, c->C, c->KH, c->KW}, .nbytes = nw * 4};
    r->dst = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {c->N, c->O, oh(c), ow(c)}};
    if (c->bias != BIAS_NONE) r->bias = (kn_abi_tensor){.dtype = KN_F32, .rank = 1, .dims = {c->O}, .nbytes = c->O * 4};
    r->strides[0] = r->strides[1] = c->s;
    r->dilations[0] = r->dilations[1] = 1;
    r->pads_begin[0] = c->pt, r->pads_begin[1] = c->pl, r->pads_end[0] = c->pb, r->pads_end[1] = c->pr;
    r->wei_ref = (kn_abi_ref){.loc = KN_LOC_WEIGHTS, .offset = 0};
    r->bias_ref = (kn_abi_ref){.loc = c->bias == BIAS_CONST ? KN_LOC_WEIGHTS : KN_LOC_ARENA, .offset = nw * 4};
    r->src_layout = KN_LAYOUT_PLAIN, r->dst_layout = KN_LAYOUT_NATIVE;
    r->n_post = c->n_post;
    memcpy(r->post, c->post, sizeof c->post);
    float *blob = malloc((size_t)(nw + c->O) * 4);
    assert_non_null(blob);
    srand(seed);
    for (int64_t i = 0; i < nw + c->O; i++) blob[i] = (float)(rand() % 2001 - 1000) / 1000.0f;
    return (unsigned char *)blob;
}

static double post_ref(const kn_abi_post *p, double v)
{
    switch (p->kind) {
    case KN_POST_RELU: return v < 0 ? 0 : v;
    case KN_POST_CLIP: return v < p->alpha ? p->alpha : v > p->beta ? p->beta : v;
    case KN_POST_LEAKY_RELU: return v < 0 ? v * p->alpha : v;
    case KN_POST_HARDSWISH: {
        double g = v / 6 + 0.5;
        return v * (g < 0 ? 0 : g > 1 ? 1 : g);
    }
    case KN_POST_SWISH: return v / (1 + exp(-v));
    case KN_POST_SIGMOID: return 1 / (1 + exp(-v));
    case KN_POST_GELU_ERF: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
    default: return v;
    }
}

static void check_case(const scase *c, unsigned seed)
{
    kn_abi_dnnl r;
    unsigned char *blob = make_record(c, &r, seed);
    assert_true(kn_stem_supported(&r));
    const float *w = (const float *)blob, *b = w + c->O * c->C * c->KH * c->KW;
    size_t nx = (size_t)(c->N * c->C * c->H * c->W), ny = (size_t)(c->N * oh(c) * ow(c) * c->O);
    float *x = malloc(nx * 4), *y = malloc(ny * 4), *y2 = malloc(ny * 4);
    assert_non_null(x), assert_non_null(y), assert_non_null(y2);
    for (size_t i = 0; i < nx; i++) x[i] = (float)(rand() % 2001 - 1000) / 500.0f;
    kn_stem *k = NULL;
    assert_int_equal(kn_stem_create(&r, blob, &k), KN_OK);
    const float *run_bias = c->bias == BIAS_RUN ? b : NULL;
    for (int threads = 1; threads <= 3; threads++) {
        memset(threads == 1 ? y : y2, 0xff, ny * 4);
        assert_int_equal(kn_stem_exec(k, x, run_bias, threads == 1 ? y : y2, threads), KN_OK);
        if (threads > 1) assert_memory_equal(y, y2, ny * 4);
    }
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t oy = 0; oy < oh(c); oy++)
            for (int64_t ox = 0; ox < ow(c); ox++)
                for (int64_t o = 0; o < c->O; o++) {
                    double acc = c->bias != BIAS_NONE ? b[o] : 0.0;
                    for (int64_t ci = 0; ci < c->C; ci++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                int64_t iy = oy * c->s - c->pt + kh, ix = ox * c->s - c->pl + kw;
                                if (iy < 0 || iy >= c->H || ix < 0 || ix >= c->W) continue;
                                acc += (double)x[((n * c->C + ci) * c->H + iy) * c->W + ix] *
                                       w[((o * c->C + ci) * c->KH + kh) * c->KW + kw];
                            }
                    for (int i = 0; i < c->n_post; i++) acc = post_ref(&c->post[i], acc);
                    float got = y[((n * oh(c) + oy) * ow(c) + ox) * c->O + o];
                    if (!(fabs(got - acc) <= 1e-5 * (1 + fabs(acc))))
                        fail_msg("C %lld O %lld %lldx%lld stride %lld: (%lld, %lld, %lld, %lld) is %g, the reference %g",
                                 (long long)c->C, (long long)c->O, (long long)c->KH, (long long)c->KW, (long long)c->s,
                                 (long long)n, (long long)oy, (long long)ox, (long long)o, got, acc);
                }
    kn_stem_free(k);
    free(x), free(y), free(y2), free(blob);
}

static void test_shapes(void **state)
{
    (void)state;
    if (!cpu_has_avx512()) KN_SKIP("kiln's stem kernel needs AVX-512F, which this CPU (or KILN_CPU_MASK) lacks");
    const int64_t chans[] = {1, 3, 4}, outs[] = {16, 32, 48, 64};
    unsigned seed = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int64_t s = 1; s <= 2; s++) {
                /* MobileNet's stem: 3x3, pad 1; 61 columns leave every tail */
                scase c = {.N = 1, .C = chans[i], .O = outs[j], .H = 9, .W = 61, .KH = 3, .KW = 3, .s = s,
                           .pt = 1, .pl = 1, .pb = 1, .pr = 1, .bias = BIAS_CONST};
                check_case(&c, seed++);
                /* ResNet's: 7x7, pad 3 (edge pixels on both sides) */
                c.KH = c.KW = 7, c.pt = c.pl = c.pb = c.pr = 3, c.W = 23, c.H = 8, c.bias = BIAS_NONE;
                check_case(&c, seed++);
            }
    /* no padding, asymmetric padding, KH != KW, a 1x1 window, batch 2,
     * widths narrower than a window's reach past both edges */
    scase c = {.N = 2, .C = 3, .O = 32, .H = 7, .W = 40, .KH = 3, .KW = 3, .s = 2, .bias = BIAS_RUN};
    check_case(&c, seed++);
    c.pt = 0, c.pl = 1, c.pb = 1, c.pr = 0;
    check_case(&c, seed++);
    c.KH = 5, c.KW = 3, c.pt = 2, c.pb = 2, c.pl = c.pr = 1, c.s = 1;
    check_case(&c, seed++);
    c.KH = c.KW = 1, c.pt = c.pl = c.pb = c.pr = 0;
    check_case(&c, seed++);
    c.KH = c.KW = 7, c.pt = c.pl = c.pb = c.pr = 3, c.W = 3, c.H = 4, c.s = 2, c.O = 16;
    check_case(&c, seed++);
}

static void test_post_ops(void **state)
{
    (void)state;
    if (!cpu_has_avx512()) KN_SKIP("kiln's stem kernel needs AVX-512F, which this CPU (or KILN_CPU_MASK) lacks");
    const kn_abi_post posts[] = {
        {KN_POST_RELU, 0, 0},       {KN_POST_CLIP, 0, 6},      {KN_POST_HARDSWISH, 0, 0},
        {KN_POST_SWISH, 0, 0},      {KN_POST_SIGMOID, 0, 0},   {KN_POST_LEAKY_RELU, 0.1f, 0},
        {KN_POST_GELU_ERF, 0, 0},
    };
    unsigned seed = 500;
    for (size_t i = 0; i < sizeof posts / sizeof *posts; i++)
        for (int64_t O = 16; O <= 64; O += 16) {
            scase c = {.N = 1, .C = 3, .O = O, .H = 6, .W = 37, .KH = 3, .KW = 3, .s = 2, .pt = 1, .pl = 1,
                       .pb = 1, .pr = 1, .bias = BIAS_CONST, .n_post = 1, .post = {posts[i]}};
            check_case(&c, seed++);
        }
    /* two clamps in a row (ReLU then Clip): one clamp in registers */
    scase c = {.N = 1, .C = 3, .O = 32, .H = 6, .W = 30, .KH = 3, .KW = 3, .s = 1, .pt = 1, .pl = 1, .pb = 1,
               .pr = 1, .bias = BIAS_CONST, .n_post = 2, .post = {{KN_POST_RELU, 0, 0}, {KN_POST_CLIP, -1, 0.5f}}};
    check_case(&c, seed++);
}

static void test_refusals(void **state)
{
    (void)state;
    scase c = {.N = 1, .C = 3, .O = 32, .H = 8, .W = 8, .KH = 3, .KW = 3, .s = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
    kn_abi_dnnl r;
    unsigned char *blob = make_record(&c, &r, 1);
    free(blob);
    if (!cpu_has_avx512()) {
        assert_false(kn_stem_supported(&r));
        KN_SKIP("kiln's stem kernel needs AVX-512F: only its refusal was checked");
    }
    assert_true(kn_stem_supported(&r));
    kn_abi_dnnl bad = r;
    bad.src.dims[1] = bad.wei.dims[1] = 5, bad.wei.nbytes = 32 * 5 * 9 * 4;
    assert_false(kn_stem_supported(&bad));
    bad = r, bad.wei.dims[0] = bad.dst.dims[1] = 8, bad.wei.nbytes = 8 * 3 * 9 * 4;
    assert_false(kn_stem_supported(&bad));
    bad = r, bad.strides[0] = bad.strides[1] = 3, bad.dst.dims[2] = bad.dst.dims[3] = 3;
    assert_false(kn_stem_supported(&bad));
    bad = r, bad.dilations[0] = 2;
    assert_false(kn_stem_supported(&bad));
    bad = r, bad.n_post = 1, bad.post[0] = (kn_abi_post){KN_POST_SUM, 1, 0};
    assert_false(kn_stem_supported(&bad));
    bad = r, bad.groups = 3, bad.wei.dims[1] = 1, bad.wei.nbytes = 32 * 9 * 4;
    assert_false(kn_stem_supported(&bad));
    bad = r, bad.n_scale = 1;
    assert_false(kn_stem_supported(&bad));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_post_ops),
        cmocka_unit_test(test_refusals),
    };
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
