/*
 * tests/runtime/test_winograd.c — Winograd F(4x4, 3x3) and F(2x2, 3x3)
 * convolutions (runtime/kernels/x86/f32_winograd_3x3_avx2_avx512.c) against a naive double-precision
 * convolution:
 * image sizes that are and are not multiples of the 4x4 tile, batches,
 * channel counts, bias given as a constant or per run, every post-op it
 * takes (ReLU, leaky ReLU, clip, residual sum before or after an
 * activation, in place), 1 and 2 threads bitwise equal, in each activation
 * layout it takes (nChw8c, nChw16c, NHWC); which records it
 * refuses and which tile its cost model picks for ResNet-50's layers; and
 * the oneDNN wrapper (dnnl.c) choosing it for a record between
 * two blocked activations, and not when the record asks for direct
 * convolution. Also dnnl.c's other algorithm for blocked activations,
 * im2col + a 1x1 convolution for small output images: which records take
 * it, and that it gives oneDNN's direct results.
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

#define CONV_TEST_SEED 777
#include "conv_testutil.h"
#include "test_skip.h"

static bool cpu_has_avx2(void)
{
    uint64_t need = KN_CPU_AVX2 | KN_CPU_FMA;
    return (kn_cpu_features() & need) == need;
}

typedef struct wcase {
    int64_t N, C, O, H, W;
    bool bias, const_bias;
    int n_post;
    kn_abi_post post[4];
} wcase;

/* The record of a 3x3, stride-1, pad-1 conv; weights blob: [64 bytes][w][b]. */
static void make_record(const wcase *c, kn_abi_dnnl *r)
{
    memset(r, 0, sizeof *r);
    r->kind = KN_DNNL_CONV;
    r->groups = 1;
    r->spatial = 2;
    r->alpha = 1.0f;
    kn_abi_tensor *ts[3] = {&r->src, &r->wei, &r->dst};
    int64_t dims[3][4] = {{c->N, c->C, c->H, c->W}, {c->O, c->C, 3, 3}, {c->N, c->O, c->H, c->W}};
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
    for (int i = 0; i < 2; i++) r->strides[i] = r->dilations[i] = r->pads_begin[i] = r->pads_end[i] = 1;
    r->n_post = c->n_post;
    memcpy(r->post, c->post, sizeof r->post);
    r->wei_ref.loc = KN_LOC_WEIGHTS;
    r->wei_ref.offset = 64;
    r->bias_ref.loc = c->const_bias ? KN_LOC_WEIGHTS : KN_LOC_ARENA;
    r->bias_ref.offset = 64 + r->wei.nbytes;
    r->src_layout = r->dst_layout = KN_LAYOUT_NATIVE;
    bool sum = false;
    for (int i = 0; i < c->n_post; i++) sum |= c->post[i].kind == KN_POST_SUM;
    r->post_layout = sum ? KN_LAYOUT_NATIVE : KN_LAYOUT_PLAIN;
}

/* Naive convolution on plain NCHW, then the post-ops. */
static void conv_ref(const wcase *c, const float *x, const float *w, const float *b, const float *res, float *y)
{
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t oy = 0; oy < c->H; oy++)
                for (int64_t ox = 0; ox < c->W; ox++) {
                    double acc = b ? b[o] : 0.0;
                    for (int64_t ci = 0; ci < c->C; ci++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++) {
                                int64_t iy = oy - 1 + ky, ix = ox - 1 + kx;
                                if (iy < 0 || iy >= c->H || ix < 0 || ix >= c->W) continue;
                                acc += (double)x[((n * c->C + ci) * c->H + iy) * c->W + ix] *
                                       w[((o * c->C + ci) * 3 + ky) * 3 + kx];
                            }
                    int64_t i = ((n * c->O + o) * c->H + oy) * c->W + ox;
                    float v = (float)acc;
                    for (int p = 0; p < c->n_post; p++) v = post1(&c->post[p], v, res ? res[i] : 0.f);
                    y[i] = v;
                }
}

/* Where element (n, c, pixel i) of an NCHW tensor is in layout blk: nChw8c
 * or nChw16c (blk 8 or 16, C a multiple of it) or NHWC (blk 0). */
static int64_t layout_off(int blk, int64_t n, int64_t c, int64_t i, int64_t C, int64_t HW)
{
    if (!blk) return (n * HW + i) * C + c;
    return ((n * (C / blk) + c / blk) * HW + i) * blk + c % blk;
}
static void to_layout(int blk, const float *x, float *out, int64_t N, int64_t C, int64_t HW)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < HW; i++) out[layout_off(blk, n, c, i, C, HW)] = x[(n * C + c) * HW + i];
}
static void from_layout(int blk, const float *x, float *out, int64_t N, int64_t C, int64_t HW)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < HW; i++) out[(n * C + c) * HW + i] = x[layout_off(blk, n, c, i, C, HW)];
}

/* Runs c through kn_wino with output tile `tile` on activations in layout
 * blk (layout_off) at 1 and 2 threads (bitwise equal) and checks it against
 * the naive convolution. at: the case whose shape the filter is transformed
 * for, c's a view of it (kn_wino_view: a node whose spatial dims vary); NULL:
 * c itself. */
static void run_tile_at(const wcase *c, int tile, int blk, const wcase *at)
{
    if (!cpu_has_avx2()) KN_SKIP("kiln's Winograd products need AVX2, which this CPU (or KILN_CPU_MASK) lacks");
    kn_abi_dnnl r;
    make_record(at ? at : c, &r);
    int64_t HW = c->H * c->W, nx = c->N * c->C * HW, ny = c->N * c->O * HW, nw = c->O * c->C * 9;
    float *blob = rand_f(16 + nw + c->O), *x = rand_f(nx), *res = rand_f(ny);
    for (int64_t i = 0; i < nw; i++) blob[16 + i] *= 0.2f; /* keep values O(1) */
    const float *w = blob + 16, *b = c->bias ? blob + 16 + nw : NULL;
    bool sum = false;
    for (int i = 0; i < c->n_post; i++) sum |= c->post[i].kind == KN_POST_SUM;
    float *want = alloc_f(ny), *xb = alloc_f(nx), *resb = alloc_f(ny), *y1 = alloc_f(ny), *y2 = alloc_f(ny),
          *got = alloc_f(ny);
    conv_ref(c, x, w, b, sum ? res : NULL, want);
    to_layout(blk, x, xb, c->N, c->C, HW);
    to_layout(blk, res, resb, c->N, c->O, HW);

    assert_true(kn_wino_supported(&r));
    kn_wino *k, *made = NULL;
    int st = kn_wino_create(&r, (const unsigned char *)blob, tile, blk, &k);
    if (st) print_error("%s\n", kn_last_error());
    assert_int_equal(st, KN_OK);
    if (at) {
        made = k;
        assert_int_equal(kn_wino_view(made, c->N, c->H, c->W, &k), KN_OK);
    }
    float *scratch = alloc_f((int64_t)(kn_wino_scratch_bytes(k) / sizeof(float)) + 16);
    const float *run_bias = c->const_bias ? NULL : b;
    assert_int_equal(kn_wino_exec(k, xb, run_bias, y1, sum ? resb : NULL, scratch, 1), KN_OK);
    assert_int_equal(kn_wino_exec(k, xb, run_bias, y2, sum ? resb : NULL, scratch, 2), KN_OK);
    assert_memory_equal(y1, y2, (size_t)ny * sizeof(float));
    from_layout(blk, y1, got, c->N, c->O, HW);
    double e = rel_err(got, want, ny);
    if (!(e < 2e-5))
        print_error("F(%dx%d) %lldx%lldx%lldx%lld -> %lld, layout %d: relative error %.3g\n", tile, tile,
                    (long long)c->N, (long long)c->C, (long long)c->H, (long long)c->W, (long long)c->O, blk, e);
    assert_true(e < 2e-5);
    if (sum) { /* in place: dst holds the residual */
        memcpy(y1, resb, (size_t)ny * sizeof(float));
        assert_int_equal(kn_wino_exec(k, xb, run_bias, y1, y1, scratch, 2), KN_OK);
        assert_memory_equal(y1, y2, (size_t)ny * sizeof(float));
    }
    kn_wino_free(k);
    kn_wino_free(made);
    free(blob), free(x), free(res), free(want), free(xb), free(resb), free(y1), free(y2), free(got), free(scratch);
}

static void run_tile(const wcase *c, int tile, int blk) { run_tile_at(c, tile, blk, NULL); }

/* Both tiles in each layout (nChw16c only where the channels fill its
 * blocks: elsewhere kn_wino_create must refuse it). */
static void run_case(const wcase *c)
{
    static const int blks[] = {8, 16, 0};
    for (size_t i = 0; i < sizeof blks / sizeof *blks; i++) {
        if (blks[i] && (c->C % blks[i] || c->O % blks[i])) {
            if (!cpu_has_avx2()) continue;
            kn_abi_dnnl r;
            make_record(c, &r);
            kn_wino *k = NULL;
            assert_int_equal(kn_wino_create(&r, NULL, 4, blks[i], &k), KN_ERR_UNSUPPORTED);
            assert_null(k);
            continue;
        }
        run_tile(c, 4, blks[i]);
        run_tile(c, 2, blks[i]);
    }
}

static const kn_abi_post RELU = {KN_POST_RELU, 0, 0}, SUM = {KN_POST_SUM, 0, 0};

static void test_exact_tiles(void **st)
{
    (void)st;
    wcase c = {.N = 1, .C = 16, .O = 16, .H = 8, .W = 8, .bias = true, .const_bias = true, .n_post = 1,
               .post = {RELU}};
    run_case(&c);
}

static void test_partial_tiles_batch(void **st)
{
    (void)st;
    /* 13x7: the last tile row and column overhang; batch 2 */
    wcase c = {.N = 2, .C = 8, .O = 32, .H = 13, .W = 7, .bias = true, .const_bias = true};
    run_case(&c);
}

static void test_resnet_layer(void **st)
{
    (void)st;
    wcase c = {.N = 1, .C = 64, .O = 64, .H = 56, .W = 56, .bias = true, .const_bias = true, .n_post = 1,
               .post = {RELU}};
    run_case(&c);
}

/* On AVX-512 CPUs, a filter this small runs in blocks of 56 tiles (F(4x4))
 * taken through all phases by one worker: 144 tiles make 3 blocks, run
 * blocked on 1 thread and by phases on 2 (fewer than 2 blocks per
 * thread), so run_tile's bitwise comparison checks that both ways agree;
 * the residual sum in place too. */
static void test_blocked_run(void **st)
{
    (void)st;
    wcase c = {.N = 1, .C = 16, .O = 16, .H = 48, .W = 48, .bias = true, .const_bias = true, .n_post = 2,
               .post = {SUM, RELU}};
    run_case(&c);
}

static void test_tiny_image(void **st)
{
    (void)st;
    /* 1x2 and 3x3 images: fewer pixels than one tile */
    wcase c = {.N = 3, .C = 24, .O = 16, .H = 1, .W = 2};
    run_case(&c);
    wcase d = {.N = 1, .C = 8, .O = 48, .H = 3, .W = 3, .bias = true, .const_bias = true};
    run_case(&d);
}

static void test_bias_per_run(void **st)
{
    (void)st;
    wcase c = {.N = 1, .C = 32, .O = 16, .H = 10, .W = 9, .bias = true, .const_bias = false};
    run_case(&c);
}

static void test_post_ops(void **st)
{
    (void)st;
    kn_abi_post leaky = {KN_POST_LEAKY_RELU, 0.1f, 0}, clip = {KN_POST_CLIP, 0.0f, 6.0f};
    wcase a = {.N = 1, .C = 16, .O = 16, .H = 12, .W = 12, .bias = true, .const_bias = true, .n_post = 1,
               .post = {leaky}};
    run_case(&a);
    wcase b = a;
    b.post[0] = clip;
    run_case(&b);
    /* ResNet's order: residual sum, then ReLU */
    wcase s = a;
    s.n_post = 2, s.post[0] = SUM, s.post[1] = RELU;
    run_case(&s);
    /* activation first, then the sum, then a clip */
    wcase t = a;
    t.n_post = 3, t.post[0] = RELU, t.post[1] = SUM, t.post[2] = clip;
    run_case(&t);
    /* YOLOv8's SiLU, alone and before a residual sum */
    wcase u = a;
    u.post[0] = (kn_abi_post){KN_POST_SWISH, 0, 0};
    run_case(&u);
    u.n_post = 2, u.post[1] = SUM;
    run_case(&u);
    /* MobileNetV3's HardSwish */
    u.n_post = 1, u.post[0] = (kn_abi_post){KN_POST_HARDSWISH, 0, 0};
    run_case(&u);
}

/* A filter transformed at one shape runs at others through views: smaller,
 * larger (more tiles than it was made for), another batch; with a residual
 * and a bias given per run, in NHWC (what dynconv.c uses) and nChw16c. */
static void test_views(void **st)
{
    (void)st;
    wcase at = {.N = 1, .C = 16, .O = 32, .H = 13, .W = 17, .bias = true, .n_post = 2, .post = {SUM, RELU}};
    wcase small = at, big = at;
    small.N = 2, small.H = 6, small.W = 9;
    big.H = 30, big.W = 22;
    for (int tile = 2; tile <= 4; tile += 2) {
        run_tile_at(&small, tile, 0, &at);
        run_tile_at(&big, tile, 0, &at);
        run_tile_at(&big, tile, 16, &at);
    }
}

static void test_refusals(void **st)
{
    (void)st;
    wcase c = {.N = 1, .C = 16, .O = 16, .H = 8, .W = 8};
    kn_abi_dnnl base, r;
    make_record(&c, &base);
    r = base;
    assert_int_equal(kn_wino_supported(&r), cpu_has_avx2());
    r = base, r.strides[0] = 2;
    assert_false(kn_wino_supported(&r));
    r = base, r.dilations[1] = 2;
    assert_false(kn_wino_supported(&r));
    r = base, r.pads_end[1] = 0;
    assert_false(kn_wino_supported(&r));
    r = base, r.groups = 2;
    assert_false(kn_wino_supported(&r));
    r = base, r.wei.dims[2] = r.wei.dims[3] = 5;
    assert_false(kn_wino_supported(&r));
    r = base, r.src.dims[1] = r.wei.dims[1] = 12; /* channels not a multiple of 8 */
    assert_false(kn_wino_supported(&r));
    r = base, r.wei.dims[0] = r.dst.dims[1] = 24; /* outputs not a multiple of 16 */
    assert_false(kn_wino_supported(&r));
    r = base, r.wei_ref.loc = KN_LOC_ARENA; /* weights given per run */
    assert_false(kn_wino_supported(&r));
    r = base, r.n_post = 1, r.post[0].kind = KN_POST_GELU_ERF;
    assert_false(kn_wino_supported(&r));
    r = base, r.n_post = 1, r.post[0].kind = KN_POST_SIGMOID;
    assert_false(kn_wino_supported(&r));
    kn_wino *k = (kn_wino *)&base; /* must be set to NULL */
    r = base, r.strides[0] = 2;
    assert_int_equal(kn_wino_create(&r, NULL, 4, 8, &k), KN_ERR_UNSUPPORTED);
    assert_null(k);
    assert_int_equal(kn_wino_create(&base, NULL, 3, 8, &k), KN_ERR_UNSUPPORTED); /* no F(3x3) */
    assert_null(k);
    if (cpu_has_avx2()) {
        assert_int_equal(kn_wino_create(&base, NULL, 4, 32, &k), KN_ERR_UNSUPPORTED); /* no such layout */
        assert_null(k);
    }
    if (!cpu_has_avx2()) {
        KN_SKIP_PART("the damaged-record checks need kiln's AVX2 Winograd kernel, which this CPU (or "
                     "KILN_CPU_MASK) lacks");
        return;
    }
    /* damaged records: named, nothing read */
    assert_int_equal(kn_wino_create(&base, NULL, 4, 8, &k), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "no weights were given"));
    float *blob = rand_f(16 + 16 * 16 * 9 + 16);
    r = base, r.wei.nbytes -= 4;
    assert_int_equal(kn_wino_create(&r, (const unsigned char *)blob, 4, 0, &k), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "the weights have the wrong size"));
    r = base, r.bias.rank = 1, r.bias.dims[0] = 16, r.bias.nbytes = 8;
    assert_int_equal(kn_wino_create(&r, (const unsigned char *)blob, 4, 0, &k), KN_ERR_INVALID);
    assert_non_null(strstr(kn_last_error(), "the bias has the wrong size"));
    assert_null(k);
    free(blob);
}

/* The cost model on ResNet-50's 3x3 stride-1 layers at batch 1, with the
 * rates of this CPU's kernels. AVX2: F(4x4) where there are many tiles,
 * F(2x2) where at 2 threads streaming F(4x4)'s 9.4 MB filter would cost
 * more than it saves, direct where even F(2x2)'s filter (16 MB) is too much
 * to stream for 16 tiles. AVX-512 (products twice as fast, and prefetching
 * U, while oneDNN's direct kernel waits on its 9.4 MB filter at 7x7):
 * F(4x4) down to 14x14, F(2x2) at 7x7. */
static void test_tile_choice(void **st)
{
    (void)st;
    if (!cpu_has_avx2()) KN_SKIP("kiln's Winograd products need AVX2, which this CPU (or KILN_CPU_MASK) lacks");
    struct {
        int64_t C, H;
        int threads, avx2, avx512;
    } want[] = {
        {64, 56, 1, 4, 4}, {64, 56, 2, 4, 4}, {128, 28, 1, 4, 4}, {128, 28, 2, 4, 4},
        {256, 14, 1, 4, 4}, {256, 14, 2, 2, 4}, {512, 7, 1, 0, 2}, {512, 7, 2, 0, 2},
    };
    bool avx512 = (kn_cpu_features() & KN_CPU_AVX512F) != 0;
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        wcase c = {.N = 1, .C = want[i].C, .O = want[i].C, .H = want[i].H, .W = want[i].H};
        kn_abi_dnnl r;
        make_record(&c, &r);
        int got = kn_wino_tile(&r, want[i].threads), tile = avx512 ? want[i].avx512 : want[i].avx2;
        if (got != tile)
            print_error("C=%lld %lldx%lld, %d threads: tile %d, expected %d\n", (long long)c.C, (long long)c.H,
                        (long long)c.H, want[i].threads, got, tile);
        assert_int_equal(got, tile);
    }
}

/* dnnl.c runs a record between two activations in the session's layout by
 * Winograd where its cost model says so, and by oneDNN when the record
 * says KN_CONV_ALGO_DIRECT; both give the same
 * result to Winograd's accuracy. */
static void test_dnnl_chooses(void **st)
{
    (void)st;
    wcase c = {.N = 1, .C = 64, .O = 64, .H = 28, .W = 28, .bias = true, .const_bias = true, .n_post = 2,
               .post = {SUM, RELU}};
    kn_abi_dnnl r, rd;
    make_record(&c, &r);
    rd = r;
    rd.conv_algo = KN_CONV_ALGO_DIRECT;
    int64_t ny = c.N * c.O * c.H * c.W, nw = c.O * c.C * 9;
    float *blob = rand_f(16 + nw + c.O), *x = rand_f(c.N * c.C * c.H * c.W), *res = rand_f(ny);
    float *ya = alloc_f(ny), *yd = alloc_f(ny);
    kn_dnnl_session *s;
    kn_dnnl_prim *pa, *pd;
    assert_int_equal(kn_dnnl_session_init(&s), KN_OK);
    assert_int_equal(kn_dnnl_prim_create(s, &r, (const unsigned char *)blob, &pa), KN_OK);
    assert_int_equal(kn_dnnl_prim_create(s, &rd, (const unsigned char *)blob, &pd), KN_OK);
    /* prims start at one thread */
    bool expect = kn_wino_tile(&r, 1) != 0 && kn_dnnl_native_block(s) >= 0;
    assert_int_equal(strncmp(kn_dnnl_prim_impl(pa), "winograd", 8) == 0, expect);
    assert_int_not_equal(strncmp(kn_dnnl_prim_impl(pd), "winograd", 8), 0);
    for (int threads = 1; threads <= 2; threads++) {
        assert_int_equal(kn_dnnl_prim_exec(s, pa, x, NULL, NULL, ya, res, threads), KN_OK);
        assert_int_equal(kn_dnnl_prim_exec(s, pd, x, NULL, NULL, yd, res, threads), KN_OK);
        double e = rel_err(ya, yd, ny);
        if (!(e < 2e-5)) print_error("Winograd vs direct: relative error %.3g\n", e);
        assert_true(e < 2e-5);
    }
    kn_dnnl_prim_free(pa);
    kn_dnnl_prim_free(pd);
    kn_dnnl_session_free(s);
    free(blob), free(x), free(res), free(ya), free(yd);
}

/* A conv record like make_record's with kernel k, stride, pad and dilation. */
static void make_conv(const wcase *c, int64_t k, int64_t stride, int64_t pad, int64_t dil, kn_abi_dnnl *r)
{
    make_record(c, r);
    int64_t OH = (c->H + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    int64_t OW = (c->W + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    r->wei.dims[2] = r->wei.dims[3] = k;
    r->wei.nbytes = c->O * c->C * k * k * 4;
    r->dst.dims[2] = OH, r->dst.dims[3] = OW;
    r->dst.nbytes = c->N * c->O * OH * OW * 4;
    r->bias_ref.offset = 64 + r->wei.nbytes;
    for (int i = 0; i < 2; i++) r->strides[i] = stride, r->pads_begin[i] = r->pads_end[i] = pad, r->dilations[i] = dil;
}

/* dnnl.c runs a conv with a small output image between two blocked
 * activations as im2col + a 1x1 convolution (not Winograd's 3x3 stride-1
 * cases, not a 1x1 stride-1 conv, not above 256 output pixels per image),
 * with the same results as oneDNN's direct kernel (the record with
 * KN_CONV_ALGO_DIRECT), the residual sum in place included; not when its
 * column buffer would be too large. */
static void test_dnnl_im2col(void **st)
{
    (void)st;
    const kn_abi_post CLIP = {KN_POST_CLIP, 0.f, 0.5f};
    struct {
        wcase c;
        int64_t k, stride, pad, dil;
        bool im2col;
    } cases[] = {
        /* ResNet's stride-2 3x3, odd image: padding on both edges */
        {{.N = 1, .C = 32, .O = 16, .H = 13, .W = 13, .bias = true, .const_bias = true, .n_post = 2,
          .post = {SUM, RELU}}, 3, 2, 1, 1, true},
        /* a 1x1 stride-2 downsample, batch 2, bias per run */
        {{.N = 2, .C = 16, .O = 32, .H = 9, .W = 9, .bias = true, .n_post = 1, .post = {CLIP}}, 1, 2, 0, 1, true},
        /* dilated 3x3 (Winograd's refusal), 7x7 output */
        {{.N = 1, .C = 16, .O = 16, .H = 7, .W = 7, .n_post = 1, .post = {RELU}}, 3, 1, 2, 2, true},
        /* 5x5 on 20x20: 400 output pixels, oneDNN's direct kernel */
        {{.N = 1, .C = 16, .O = 16, .H = 20, .W = 20}, 5, 1, 2, 1, false},
        /* 1x1 stride 1: oneDNN's own 1x1 kernel */
        {{.N = 1, .C = 16, .O = 16, .H = 7, .W = 7}, 1, 1, 0, 1, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const wcase *c = &cases[i].c;
        kn_abi_dnnl r, rd;
        make_conv(c, cases[i].k, cases[i].stride, cases[i].pad, cases[i].dil, &r);
        rd = r;
        rd.conv_algo = KN_CONV_ALGO_DIRECT;
        int64_t nw = r.wei.nbytes / 4, ny = r.dst.nbytes / 4;
        float *blob = rand_f(16 + nw + c->O), *x = rand_f(r.src.nbytes / 4), *res = rand_f(ny);
        float *ya = alloc_f(ny), *yd = alloc_f(ny);
        const float *bias = c->bias && !c->const_bias ? blob + 16 + nw : NULL;
        kn_dnnl_session *s;
        kn_dnnl_prim *pa, *pd;
        assert_int_equal(kn_dnnl_session_init(&s), KN_OK);
        assert_int_equal(kn_dnnl_prim_create(s, &r, (const unsigned char *)blob, &pa), KN_OK);
        assert_int_equal(kn_dnnl_prim_create(s, &rd, (const unsigned char *)blob, &pd), KN_OK);
        int blk = kn_dnnl_native_block(s); /* im2col takes blocked layouts only */
        bool expect = cases[i].im2col && cpu_has_avx2() && (blk == 8 || blk == 16);
        if ((strncmp(kn_dnnl_prim_impl(pa), "im2col", 6) == 0) != expect)
            print_error("case %zu: kernel '%s'\n", i, kn_dnnl_prim_impl(pa));
        assert_int_equal(strncmp(kn_dnnl_prim_impl(pa), "im2col", 6) == 0, expect);
        assert_int_not_equal(strncmp(kn_dnnl_prim_impl(pd), "im2col", 6), 0);
        bool sum = r.post_layout == KN_LAYOUT_NATIVE;
        for (int threads = 1; threads <= 2; threads++) {
            assert_int_equal(kn_dnnl_prim_exec(s, pd, x, NULL, bias, yd, res, threads), KN_OK);
            assert_int_equal(kn_dnnl_prim_exec(s, pa, x, NULL, bias, ya, res, threads), KN_OK);
            double e = rel_err(ya, yd, ny);
            if (!(e < 1e-5))
                print_error("case %zu, %d threads: im2col vs direct: relative error %.3g\n", i, threads, e);
            assert_true(e < 1e-5);
            if (sum) { /* in place: dst holds the residual */
                memcpy(ya, res, (size_t)ny * sizeof(float));
                assert_int_equal(kn_dnnl_prim_exec(s, pa, x, NULL, bias, ya, ya, threads), KN_OK);
                assert_true(rel_err(ya, yd, ny) < 1e-5);
            }
        }
        kn_dnnl_prim_free(pa);
        kn_dnnl_prim_free(pd);
        kn_dnnl_session_free(s);
        free(blob), free(x), free(res), free(ya), free(yd);
    }
    /* a batch whose columns would pass 256 MiB (100000 x 576 x 49 floats):
     * the direct kernel, no buffer of that size (created only, not run) */
    wcase big = {.N = 100000, .C = 64, .O = 64, .H = 13, .W = 13};
    kn_abi_dnnl r;
    make_conv(&big, 3, 2, 1, 1, &r);
    float *blob = rand_f(16 + 64 * 64 * 9);
    kn_dnnl_session *s;
    kn_dnnl_prim *p;
    assert_int_equal(kn_dnnl_session_init(&s), KN_OK);
    assert_int_equal(kn_dnnl_prim_create(s, &r, (const unsigned char *)blob, &p), KN_OK);
    assert_int_not_equal(strncmp(kn_dnnl_prim_impl(p), "im2col", 6), 0);
    kn_dnnl_prim_free(p);
    kn_dnnl_session_free(s);
    free(blob);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_tiles),
        cmocka_unit_test(test_partial_tiles_batch),
        cmocka_unit_test(test_resnet_layer), cmocka_unit_test(test_blocked_run),
        cmocka_unit_test(test_tiny_image),
        cmocka_unit_test(test_bias_per_run),
        cmocka_unit_test(test_post_ops),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_tile_choice),
        cmocka_unit_test(test_dnnl_chooses),
        cmocka_unit_test(test_dnnl_im2col),
    };
    return kn_test_status(cmocka_run_group_tests(tests, NULL, NULL));
}
