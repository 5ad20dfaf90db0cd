/*
 * tests/runtime/test_qstem.c — kiln's int8 first-convolution kernel
 * (runtime/kernels/x86/u8_stem_avx512.c) against a reference in double of
 * QLinearConv's arithmetic (y = sat(round(scale * (sum (x - zx) w + bias))
 * + zy), ReLU / Clip in output units before the zero point): 1, 3 and 4
 * input channels (u8, plain NCHW), 16, 32, 48 and 64 output channels (NHWC),
 * windows 1x1, 3x3, 5x5, 3x5, 7x7 (two dwords a row), strides 1 and 2,
 * no, symmetric and asymmetric padding (edge pixels both sides, the last
 * pixels of a row whose last dword would pass its end), rows that leave
 * every tail block size, batch 2, u8 and s8 output, zero points at 0 and
 * inside the range, per-channel and per-tensor scales, no bias, a clamp
 * narrower than the type. Every output within one step of the reference
 * and 99.5% equal; 1, 2 and 3 threads the same bytes; the input ends
 * where an unreadable page begins, so that a read past it fails the test
 * (a window's last dword reaches up to 3 bytes beyond the window). Records
 * it refuses:
 * 5 channels, a 9x9 window, s8 input, a residual sum, a float record.
 * Skipped on CPUs without AVX-512 VNNI.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../runtime/src/rt_internal.h"
#include "test_skip.h"

static bool cpu_has_vnni(void)
{
    uint32_t need = KN_CPU_AVX512F | KN_CPU_AVX512BW | KN_CPU_AVX512VNNI;
    return (kn_cpu_features() & need) == need;
}

typedef struct qcase {
    int64_t N, C, O, H, W, KH, KW, s, pt, pl, pb, pr;
    int zx, zy;
    bool s8_out, per_channel, bias;
    int n_post;
    kn_abi_post post[2];
} qcase;

static int64_t oh(const qcase *c) { return (c->H + c->pt + c->pb - c->KH) / c->s + 1; }
static int64_t ow(const qcase *c) { return (c->W + c->pl + c->pr - c->KW) / c->s + 1; }

static void make_record(const qcase *c, kn_abi_dnnl *r)
{
    memset(r, 0, sizeof *r);
    r->kind = KN_DNNL_CONV;
    r->spatial = 2;
    r->groups = 1;
    r->n_scale = c->per_channel ? (int32_t)c->O : 1;
    r->src = (kn_abi_tensor){.dtype = KN_U8, .rank = 4, .dims = {c->N, c->C, c->H, c->W}};
    r->wei = (kn_abi_tensor){.dtype = KN_I8, .rank = 4, .dims = {c->O, c->C, c->KH, c->KW},
                             .nbytes = c->O * c->C * c->KH * c->KW};
    r->dst = (kn_abi_tensor){.dtype = c->s8_out ? KN_I8 : KN_U8, .rank = 4, .dims = {c->N, c->O, oh(c), ow(c)}};
    if (c->bias) r->bias = (kn_abi_tensor){.dtype = KN_F32, .rank = 1, .dims = {c->O}, .nbytes = c->O * 4};
    r->strides[0] = r->strides[1] = c->s;
    r->dilations[0] = r->dilations[1] = 1;
    r->pads_begin[0] = c->pt, r->pads_begin[1] = c->pl, r->pads_end[0] = c->pb, r->pads_end[1] = c->pr;
    r->wei_ref.loc = r->bias_ref.loc = r->scale_ref.loc = KN_LOC_WEIGHTS;
    r->src_layout = KN_LAYOUT_PLAIN, r->dst_layout = KN_LAYOUT_NATIVE;
    r->src_zp = c->zx, r->dst_zp = c->zy;
    r->n_post = c->n_post;
    memcpy(r->post, c->post, sizeof c->post);
}

/* n bytes ending where a PROT_NONE page begins; free with guard_free. */
static uint8_t *guard_alloc(size_t n, size_t *total)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = (n + pg - 1) / pg * pg;
    *total = body + pg;
    uint8_t *m = mmap(NULL, *total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    assert_int_equal(mprotect(m + body, pg, PROT_NONE), 0);
    return m + body - n;
}

static void guard_free(uint8_t *p, size_t n, size_t total)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    munmap(p + n - (total - pg), total);
}

static void check_case(const qcase *c, unsigned seed)
{
    kn_abi_dnnl r;
    make_record(c, &r);
    assert_true(kn_qstem_supported(&r));
    srand(seed);
    int64_t taps = c->C * c->KH * c->KW, OH = oh(c), OW = ow(c);
    size_t nx = (size_t)(c->N * c->H * c->W * c->C), ny = (size_t)(c->N * OH * OW * c->O);
    size_t xtotal;
    uint8_t *x = guard_alloc(nx, &xtotal), *y = malloc(ny), *y2 = malloc(ny);
    int8_t *w = malloc((size_t)(c->O * taps));
    float *b = malloc((size_t)c->O * 4), *sc = malloc((size_t)c->O * 4);
    assert_non_null(x), assert_non_null(y), assert_non_null(y2), assert_non_null(w), assert_non_null(b);
    assert_non_null(sc);
    for (size_t i = 0; i < nx; i++) x[i] = (uint8_t)(rand() % 256);
    for (int64_t i = 0; i < c->O * taps; i++) w[i] = (int8_t)(rand() % 255 - 127);
    for (int64_t o = 0; o < c->O; o++) {
        b[o] = (float)(rand() % 20001 - 10000);
        sc[o] = (float)((100 + rand() % 300) / ((double)taps * 64 * 128));
    }
    kn_qstem *k = NULL;
    assert_int_equal(kn_qstem_create(&r, w, c->bias ? b : NULL, sc, &k), KN_OK);
    for (int threads = 1; threads <= 3; threads++) {
        memset(threads == 1 ? y : y2, 0xa5, ny);
        assert_int_equal(kn_qstem_exec(k, x, threads == 1 ? y : y2, threads), KN_OK);
        if (threads > 1) assert_memory_equal(y, y2, ny);
    }
    double qmin = c->s8_out ? -128 : 0, qmax = qmin + 255;
    size_t equal = 0;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t o = 0; o < c->O; o++) {
                    double acc = 0;
                    for (int64_t ci = 0; ci < c->C; ci++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                int64_t iy = oy * c->s - c->pt + kh, ix = ox * c->s - c->pl + kw;
                                if (iy < 0 || iy >= c->H || ix < 0 || ix >= c->W) continue;
                                acc += (double)(x[((n * c->C + ci) * c->H + iy) * c->W + ix] - c->zx) *
                                       w[((o * c->C + ci) * c->KH + kh) * c->KW + kw];
                            }
                    double v = sc[c->per_channel ? o : 0] * (acc + (c->bias ? b[o] : 0.0));
                    for (int p = 0; p < c->n_post; p++) {
                        if (c->post[p].kind == KN_POST_RELU) v = v < 0 ? 0 : v;
                        if (c->post[p].kind == KN_POST_CLIP)
                            v = v < c->post[p].alpha ? c->post[p].alpha : v > c->post[p].beta ? c->post[p].beta : v;
                    }
                    v = nearbyint(v + c->zy);
                    v = v < qmin ? qmin : v > qmax ? qmax : v;
                    size_t at = (size_t)(((n * OH + oy) * OW + ox) * c->O + o);
                    double got = c->s8_out ? (double)(int8_t)y[at] : (double)y[at];
                    if (fabs(got - v) > 1)
                        fail_msg("C %lld O %lld %lldx%lld stride %lld: (%lld, %lld, %lld, %lld) is %g, the reference %g",
                                 (long long)c->C, (long long)c->O, (long long)c->KH, (long long)c->KW, (long long)c->s,
                                 (long long)n, (long long)oy, (long long)ox, (long long)o, got, v);
                    equal += got == v;
                }
    if ((double)equal < 0.995 * (double)ny)
        fail_msg("C %lld O %lld: only %zu of %zu outputs equal the reference", (long long)c->C, (long long)c->O, equal,
                 ny);
    kn_qstem_free(k);
    guard_free(x, nx, xtotal);
    free(y), free(y2), free(w), free(b), free(sc);
}

static void test_shapes(void **state)
{
    (void)state;
    if (!cpu_has_vnni()) KN_SKIP("kiln's int8 stem kernel needs AVX-512 BW and VNNI, which this CPU (or KILN_CPU_MASK) "
                                 "lacks");
    const int64_t chans[] = {1, 3, 4}, outs[] = {16, 32, 48, 64};
    unsigned seed = 1;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            for (int64_t s = 1; s <= 2; s++) {
                /* MobileNet's stem: 3x3, pad 1; 61 columns leave every tail */
                qcase c = {.N = 1, .C = chans[i], .O = outs[j], .H = 7, .W = 61, .KH = 3, .KW = 3, .s = s, .pt = 1,
                           .pl = 1, .pb = 1, .pr = 1, .zx = 9, .per_channel = true, .bias = true, .n_post = 1,
                           .post = {{KN_POST_RELU, 0, 0}}};
                check_case(&c, seed++);
            }
    /* 5x5 by 3 channels (15 bytes a row), 3x5, 1x1; no padding and
     * asymmetric; batch 2; a narrow image */
    qcase c = {.N = 2, .C = 3, .O = 32, .H = 9, .W = 29, .KH = 5, .KW = 5, .s = 2, .pt = 2, .pl = 2, .pb = 2,
               .pr = 2, .zx = 128, .per_channel = true, .bias = true};
    check_case(&c, seed++);
    c.KH = 3, c.KW = 5, c.s = 1, c.pt = c.pb = 1;
    check_case(&c, seed++);
    c.KH = c.KW = 1, c.pt = c.pl = c.pb = c.pr = 0;
    check_case(&c, seed++);
    c.KH = c.KW = 3, c.pt = 0, c.pl = 1, c.pb = 1, c.pr = 0, c.s = 2;
    check_case(&c, seed++);
    c.W = 2, c.H = 3, c.pt = c.pl = c.pb = c.pr = 1, c.O = 16;
    check_case(&c, seed++);
    /* ResNet's 7x7 by 3 and 4 channels, pad 3: two dwords a window row */
    c.KH = c.KW = 7, c.pt = c.pl = c.pb = c.pr = 3, c.W = 30, c.H = 9, c.O = 64, c.s = 2;
    check_case(&c, seed++);
    c.C = 4, c.O = 48, c.s = 1, c.W = 13;
    check_case(&c, seed++);
}

static void test_quantization(void **state)
{
    (void)state;
    if (!cpu_has_vnni()) KN_SKIP("kiln's int8 stem kernel needs AVX-512 BW and VNNI, which this CPU (or KILN_CPU_MASK) "
                                 "lacks");
    qcase c = {.N = 1, .C = 3, .O = 32, .H = 8, .W = 20, .KH = 3, .KW = 3, .s = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1};
    const int zxs[] = {0, 128, 255};
    unsigned seed = 300;
    for (int i = 0; i < 3; i++) {
        c.zx = zxs[i], c.zy = i * 50, c.s8_out = false, c.per_channel = i != 1, c.bias = i != 2;
        check_case(&c, seed++);
        c.s8_out = true, c.zy = i * 50 - 100;
        check_case(&c, seed++);
    }
    c.s8_out = false, c.zx = 3, c.zy = 20, c.n_post = 2;
    c.post[0] = (kn_abi_post){KN_POST_RELU, 0, 0}, c.post[1] = (kn_abi_post){KN_POST_CLIP, -5.f, 60.f};
    check_case(&c, seed++);
}

static void test_refusals(void **state)
{
    (void)state;
    qcase c = {.N = 1, .C = 3, .O = 32, .H = 8, .W = 8, .KH = 3, .KW = 3, .s = 2, .pt = 1, .pl = 1, .pb = 1, .pr = 1,
               .per_channel = true};
    kn_abi_dnnl r;
    make_record(&c, &r);
    if (!cpu_has_vnni()) {
        assert_false(kn_qstem_supported(&r));
        KN_SKIP("kiln's int8 stem kernel needs AVX-512 BW and VNNI: only its refusal was checked");
    }
    assert_true(kn_qstem_supported(&r));
    kn_abi_dnnl bad = r;
    bad.src.dims[1] = bad.wei.dims[1] = 5, bad.wei.nbytes = 32 * 5 * 9;
    assert_false(kn_qstem_supported(&bad));
    bad = r, bad.wei.dims[2] = bad.wei.dims[3] = 9, bad.wei.nbytes = 32 * 3 * 81, bad.src.dims[2] = bad.src.dims[3] = 16;
    bad.pads_begin[0] = bad.pads_begin[1] = bad.pads_end[0] = bad.pads_end[1] = 4;
    assert_false(kn_qstem_supported(&bad));
    bad = r, bad.src.dtype = KN_I8;
    assert_false(kn_qstem_supported(&bad));
    bad = r, bad.n_post = 1, bad.post[0] = (kn_abi_post){KN_POST_SUM, 1, 0};
    assert_false(kn_qstem_supported(&bad));
    bad = r, bad.n_scale = 0;
    assert_false(kn_qstem_supported(&bad));
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
