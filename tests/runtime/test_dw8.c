/*
 * tests/runtime/test_dw8.c — kiln's int8 depthwise 3x3 kernel
 * (runtime/kernels/x86/u8_dw3x3_avx512.c) against a reference in double
 * precision of what the record means (QLinearConv's arithmetic:
 * y = sat(round(scale * (sum (x - zx) w + bias)) + zy), ReLU / Clip in
 * output units before the zero point): strides 1 and 2, pads 0, 1 and
 * asymmetric, odd and even heights (the last row of a pair alone), widths
 * of 1 and more, channel counts that fill no 64-channel chunk (8, 16, 40,
 * 96, 144) and several chunks, batch 2, u8 and s8 output, zero points at
 * 0 and inside the range, per-channel and per-tensor scales, no bias, a
 * clamp that saturation alone would not give. Every output byte is within
 * one step of the reference, and at least 99.5% equal to it; 1, 2 and 3
 * threads give the same bytes. Records it refuses: a 5x5 window, dilation,
 * s8 input, a residual sum, a leaky ReLU, stride 3, a scale that could take a
 * scaled sum out of int32 (create: unsupported). Skipped on CPUs without
 * AVX-512 VNNI (the refusal checked).
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

static bool cpu_has_vnni(void)
{
    uint32_t need = KN_CPU_AVX512F | KN_CPU_AVX512BW | KN_CPU_AVX512VNNI;
    return (kn_cpu_features() & need) == need;
}

typedef struct dcase {
    int64_t N, C, H, W, stride, pt, pl, pb, pr;
    int zx, zy;
    bool s8_out, per_channel, bias;
    int n_post;
    kn_abi_post post[2];
} dcase;

static int64_t out_dim(int64_t in, int64_t pb, int64_t pe, int64_t s) { return (in + pb + pe - 3) / s + 1; }

static void make_record(const dcase *c, kn_abi_dnnl *r)
{
    memset(r, 0, sizeof *r);
    int64_t OH = out_dim(c->H, c->pt, c->pb, c->stride), OW = out_dim(c->W, c->pl, c->pr, c->stride);
    r->kind = KN_DNNL_CONV;
    r->spatial = 2;
    r->groups = (int32_t)c->C;
    r->n_scale = c->per_channel ? (int32_t)c->C : 1;
    r->src = (kn_abi_tensor){.dtype = KN_U8, .rank = 4, .dims = {c->N, c->C, c->H, c->W}};
    r->wei = (kn_abi_tensor){.dtype = KN_I8, .rank = 4, .dims = {c->C, 1, 3, 3}, .nbytes = c->C * 9};
    r->dst = (kn_abi_tensor){.dtype = c->s8_out ? KN_I8 : KN_U8, .rank = 4, .dims = {c->N, c->C, OH, OW}};
    if (c->bias) r->bias = (kn_abi_tensor){.dtype = KN_F32, .rank = 1, .dims = {c->C}, .nbytes = c->C * 4};
    for (int i = 0; i < 2; i++) r->strides[i] = c->stride, r->dilations[i] = 1;
    r->pads_begin[0] = c->pt, r->pads_begin[1] = c->pl, r->pads_end[0] = c->pb, r->pads_end[1] = c->pr;
    r->wei_ref.loc = r->bias_ref.loc = r->scale_ref.loc = KN_LOC_WEIGHTS;
    r->src_layout = r->dst_layout = KN_LAYOUT_NATIVE;
    r->src_zp = c->zx, r->dst_zp = c->zy;
    r->n_post = c->n_post;
    memcpy(r->post, c->post, sizeof c->post);
}

typedef struct data {
    uint8_t *x, *y, *y2;
    int8_t *w;
    float *b, *s;
    double *ref;
    size_t nx, ny;
} data;

static void make_data(const dcase *c, const kn_abi_dnnl *r, data *d, unsigned seed)
{
    srand(seed);
    d->nx = (size_t)(c->N * c->H * c->W * c->C), d->ny = (size_t)(r->dst.dims[0] * r->dst.dims[2] * r->dst.dims[3] * c->C);
    d->x = malloc(d->nx), d->y = malloc(d->ny), d->y2 = malloc(d->ny);
    d->w = malloc((size_t)c->C * 9), d->b = malloc((size_t)c->C * 4), d->s = malloc((size_t)c->C * 4);
    d->ref = malloc(d->ny * sizeof(double));
    assert_non_null(d->x), assert_non_null(d->y), assert_non_null(d->y2), assert_non_null(d->w);
    assert_non_null(d->b), assert_non_null(d->s), assert_non_null(d->ref);
    for (size_t i = 0; i < d->nx; i++) d->x[i] = (uint8_t)(rand() % 256);
    for (int64_t i = 0; i < c->C * 9; i++) d->w[i] = (int8_t)(rand() % 255 - 127);
    for (int64_t o = 0; o < c->C; o++) {
        d->b[o] = (float)(rand() % 20001 - 10000);
        /* an output that spans about 100-400 steps over the inputs' range */
        d->s[o] = (float)((100 + rand() % 300) / (9.0 * 64 * 128));
    }
    /* the reference, NHWC */
    int64_t OH = r->dst.dims[2], OW = r->dst.dims[3];
    double qmin = c->s8_out ? -128 : 0, qmax = qmin + 255;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t ch = 0; ch < c->C; ch++) {
                    double acc = 0;
                    for (int kh = 0; kh < 3; kh++)
                        for (int kw = 0; kw < 3; kw++) {
                            int64_t iy = oy * c->stride - c->pt + kh, ix = ox * c->stride - c->pl + kw;
                            if (iy < 0 || iy >= c->H || ix < 0 || ix >= c->W) continue; /* x = zx: no share */
                            int xv = d->x[((n * c->H + iy) * c->W + ix) * c->C + ch];
                            acc += (double)(xv - c->zx) * d->w[ch * 9 + kh * 3 + kw];
                        }
                    double v = d->s[c->per_channel ? ch : 0] * (acc + (c->bias ? d->b[ch] : 0.0));
                    for (int p = 0; p < c->n_post; p++) {
                        if (c->post[p].kind == KN_POST_RELU) v = v < 0 ? 0 : v;
                        if (c->post[p].kind == KN_POST_CLIP)
                            v = v < c->post[p].alpha ? c->post[p].alpha : v > c->post[p].beta ? c->post[p].beta : v;
                    }
                    v = nearbyint(v + c->zy);
                    d->ref[((n * OH + oy) * OW + ox) * c->C + ch] = v < qmin ? qmin : v > qmax ? qmax : v;
                }
}

static void free_data(data *d)
{
    free(d->x), free(d->y), free(d->y2), free(d->w), free(d->b), free(d->s), free(d->ref);
}

static void check_case(const dcase *c, unsigned seed)
{
    kn_abi_dnnl r;
    make_record(c, &r);
    assert_true(kn_dw8_supported(&r));
    data d;
    make_data(c, &r, &d, seed);
    kn_dw8 *k = NULL;
    assert_int_equal(kn_dw8_create(&r, d.w, c->bias ? d.b : NULL, d.s, &k), KN_OK);
    size_t equal = 0;
    for (int threads = 1; threads <= 3; threads++) {
        memset(d.y2, 0xa5, d.ny);
        assert_int_equal(kn_dw8_exec(k, d.x, threads == 1 ? d.y : d.y2, threads), KN_OK);
        if (threads > 1) assert_memory_equal(d.y, d.y2, d.ny);
    }
    for (size_t i = 0; i < d.ny; i++) {
        double got = c->s8_out ? (double)(int8_t)d.y[i] : (double)d.y[i];
        if (fabs(got - d.ref[i]) > 1)
            fail_msg("C %lld H %lld W %lld stride %lld: element %zu is %g, the reference %g", (long long)c->C,
                     (long long)c->H, (long long)c->W, (long long)c->stride, i, got, d.ref[i]);
        equal += got == d.ref[i];
    }
    if ((double)equal < 0.995 * (double)d.ny)
        fail_msg("C %lld H %lld stride %lld: only %zu of %zu outputs equal the reference", (long long)c->C,
                 (long long)c->H, (long long)c->stride, equal, d.ny);
    kn_dw8_free(k);
    free_data(&d);
}

static const kn_abi_post RELU = {KN_POST_RELU, 0.f, 0.f};

static void test_shapes(void **state)
{
    (void)state;
    if (!cpu_has_vnni()) KN_SKIP("kiln's int8 depthwise kernel needs AVX-512 BW and VNNI, which this CPU (or KILN_CPU_MASK) "
                                 "lacks");
    const int64_t chans[] = {8, 16, 40, 64, 96, 144, 192};
    unsigned seed = 1;
    for (size_t i = 0; i < sizeof chans / sizeof *chans; i++)
        for (int64_t stride = 1; stride <= 2; stride++) {
            dcase c = {.N = 1, .C = chans[i], .H = 9, .W = 11, .stride = stride, .pt = 1, .pl = 1, .pb = 1, .pr = 1,
                       .zx = 7, .zy = 0, .per_channel = true, .bias = true, .n_post = 1, .post = {RELU}};
            check_case(&c, seed++);
            c.H = 8, c.W = 1, c.pl = c.pr = 1; /* even height: every row in a pair; one column */
            check_case(&c, seed++);
            c.H = 5, c.W = 7, c.pt = 0, c.pl = 0, c.pb = 0, c.pr = 0; /* no padding */
            check_case(&c, seed++);
            c.pt = 0, c.pl = 1, c.pb = 1, c.pr = 0; /* asymmetric: PyTorch's "same" at stride 2 */
            check_case(&c, seed++);
        }
}

static void test_quantization(void **state)
{
    (void)state;
    if (!cpu_has_vnni()) KN_SKIP("kiln's int8 depthwise kernel needs AVX-512 BW and VNNI, which this CPU (or KILN_CPU_MASK) "
                                 "lacks");
    dcase c = {.N = 2, .C = 72, .H = 10, .W = 6, .stride = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
    /* zero points at 0 and inside, u8 and s8 out, per tensor, no bias */
    const int zxs[] = {0, 128, 255};
    unsigned seed = 100;
    for (int i = 0; i < 3; i++) {
        c.zx = zxs[i], c.zy = i * 50, c.s8_out = false, c.per_channel = i != 1, c.bias = i != 2;
        check_case(&c, seed++);
        c.s8_out = true, c.zy = i * 50 - 100;
        check_case(&c, seed++);
    }
    /* a clamp narrower than the type: ReLU6-like Clip, and ReLU with zy > 0 */
    c.s8_out = false, c.zx = 3, c.zy = 20, c.n_post = 1;
    c.post[0] = (kn_abi_post){KN_POST_CLIP, -5.f, 60.f};
    check_case(&c, seed++);
    c.n_post = 2, c.post[0] = RELU, c.post[1] = (kn_abi_post){KN_POST_CLIP, -1.f, 100.f};
    check_case(&c, seed++);
    c.stride = 2, c.s8_out = true, c.zy = -3;
    check_case(&c, seed++);
}

static void test_refusals(void **state)
{
    (void)state;
    dcase c = {.N = 1, .C = 32, .H = 8, .W = 8, .stride = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .per_channel = true};
    kn_abi_dnnl r;
    make_record(&c, &r);
    if (!cpu_has_vnni()) {
        assert_false(kn_dw8_supported(&r));
        KN_SKIP("kiln's int8 depthwise kernel needs AVX-512 BW and VNNI: only its refusal was checked");
    }
    assert_true(kn_dw8_supported(&r));
    kn_abi_dnnl bad = r;
    bad.wei.dims[2] = bad.wei.dims[3] = 5, bad.wei.nbytes = 32 * 25;
    assert_false(kn_dw8_supported(&bad));
    bad = r, bad.dilations[0] = 2;
    assert_false(kn_dw8_supported(&bad));
    bad = r, bad.src.dtype = KN_I8;
    assert_false(kn_dw8_supported(&bad));
    bad = r, bad.n_post = 1, bad.post[0] = (kn_abi_post){KN_POST_SUM, 1.f, 0.f};
    assert_false(kn_dw8_supported(&bad));
    bad = r, bad.n_post = 1, bad.post[0] = (kn_abi_post){KN_POST_LEAKY_RELU, 0.1f, 0.f};
    assert_false(kn_dw8_supported(&bad));
    bad = r, bad.strides[0] = bad.strides[1] = 3;
    assert_false(kn_dw8_supported(&bad));
    /* a scale so large that a sum, scaled, could leave int32 before the
     * conversion */
    int8_t w[32 * 9];
    float s[32];
    for (int i = 0; i < 32 * 9; i++) w[i] = (int8_t)(i % 7 - 3);
    for (int i = 0; i < 32; i++) s[i] = i == 5 ? 1e5f : 1.f;
    kn_dw8 *k = (kn_dw8 *)1;
    assert_int_equal(kn_dw8_create(&r, w, NULL, s, &k), KN_ERR_UNSUPPORTED);
    assert_null(k);
    kn_error_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_quantization),
        cmocka_unit_test(test_refusals),
    };
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
