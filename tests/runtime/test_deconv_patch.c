/*
 * tests/runtime/test_deconv_patch.c — the transposed convolution whose
 * kernel equals its stride (kernels/x86/f32_deconv_patch_avx512.c) against
 * a plain loop: 2x2, 3x3 and 2x1 kernels; channels-last dst stored by the
 * product itself (kw O a multiple of 16) and through the block (other
 * widths), NCHW dst; bias, ReLU, Sigmoid, a residual (in place too);
 * widths that leave a partial block of pixels; 1 and 2 threads bitwise
 * equal. And which records it refuses: padding, a stride other than the
 * kernel, groups, a residual it cannot store. Then the kernel at run-time
 * shapes (runtime/src/convt.c): a node's NCHW input at two image sizes
 * against the plain C kernel, with the post-ops in the epilogue or left to
 * the caller, and the nodes it leaves to the plain kernel. Skipped without
 * AVX-512F.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../runtime/src/convt.h"
#include "../../runtime/src/rt_internal.h"
#include "test_skip.h"

typedef struct pcase {
    int64_t N, C, H, W, O, kh, kw;
    bool dst_nhwc, bias;
    int n_post;
    kn_abi_post post[4];
} pcase;

static uint32_t g_seed = 7;
static float frand(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *rand_buf(int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

static void record(const pcase *c, kn_abi_dnnl *r)
{
    memset(r, 0, sizeof *r);
    r->kind = KN_DNNL_DECONV;
    r->spatial = 2;
    r->groups = 1;
    r->src = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {c->N, c->C, c->H, c->W}};
    r->wei = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {c->C, c->O, c->kh, c->kw}};
    r->dst = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {c->N, c->O, c->H * c->kh, c->W * c->kw}};
    r->dst.nbytes = c->N * c->O * c->H * c->kh * c->W * c->kw * 4;
    if (c->bias) r->bias = (kn_abi_tensor){.dtype = KN_F32, .rank = 1, .dims = {c->O}, .nbytes = c->O * 4};
    r->strides[0] = c->kh, r->strides[1] = c->kw;
    r->dilations[0] = r->dilations[1] = 1;
    r->wei_ref.loc = r->bias_ref.loc = KN_LOC_WEIGHTS;
    r->n_post = c->n_post;
    memcpy(r->post, c->post, sizeof r->post);
}

static float post(const pcase *c, float v, float res)
{
    for (int i = 0; i < c->n_post; i++) switch (c->post[i].kind) {
        case KN_POST_RELU: v = v > 0 ? v : 0; break;
        case KN_POST_SIGMOID: v = 1.0f / (1.0f + expf(-v)); break;
        case KN_POST_SUM: v += res; break;
        default: break;
        }
    return v;
}

/* dst (in c's layout) from src NHWC by the definition. */
static void reference(const pcase *c, const float *src, const float *w, const float *b, const float *res,
                      float *dst)
{
    int64_t OH = c->H * c->kh, OW = c->W * c->kw;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++)
                for (int64_t o = 0; o < c->O; o++) {
                    int64_t y = oy / c->kh, i = oy % c->kh, x = ox / c->kw, j = ox % c->kw;
                    double acc = b ? b[o] : 0;
                    for (int64_t ch = 0; ch < c->C; ch++)
                        acc += (double)src[((n * c->H + y) * c->W + x) * c->C + ch] *
                               w[((ch * c->O + o) * c->kh + i) * c->kw + j];
                    int64_t at = c->dst_nhwc ? ((n * OH + oy) * OW + ox) * c->O + o
                                             : ((n * c->O + o) * OH + oy) * OW + ox;
                    dst[at] = post(c, (float)acc, res ? res[at] : 0);
                }
}

static void run_case(const pcase *c, bool in_place)
{
    kn_abi_dnnl r;
    record(c, &r);
    assert_true(kn_pdc_supported(&r, c->dst_nhwc));
    int64_t nsrc = c->N * c->H * c->W * c->C, ndst = r.dst.nbytes / 4;
    float *src = rand_buf(nsrc), *w = rand_buf(c->C * c->O * c->kh * c->kw), *b = rand_buf(c->O);
    float *res = rand_buf(ndst), *want = malloc(sizeof(float) * (size_t)ndst);
    float *got[2] = {malloc(sizeof(float) * (size_t)ndst), malloc(sizeof(float) * (size_t)ndst)};
    bool sum = false;
    for (int i = 0; i < c->n_post; i++) sum |= c->post[i].kind == KN_POST_SUM;
    reference(c, src, w, c->bias ? b : NULL, sum ? res : NULL, want);
    kn_pdc *k = NULL;
    assert_int_equal(kn_pdc_create(&r, w, c->bias ? b : NULL, c->dst_nhwc, &k), KN_OK);
    for (int t = 0; t < 2; t++) {
        const float *rs = NULL;
        if (sum && in_place) memcpy(got[t], res, sizeof(float) * (size_t)ndst), rs = got[t];
        else if (sum) rs = res;
        assert_int_equal(kn_pdc_exec(k, src, got[t], rs, t + 1), KN_OK);
        for (int64_t i = 0; i < ndst; i++)
            if (fabsf(got[t][i] - want[i]) > 1e-5f * (1 + fabsf(want[i])))
                fail_msg("%d threads, C %lld O %lld k %lldx%lld %s: element %lld is %g, expected %g", t + 1,
                         (long long)c->C, (long long)c->O, (long long)c->kh, (long long)c->kw,
                         c->dst_nhwc ? "NHWC" : "NCHW", (long long)i, got[t][i], want[i]);
    }
    assert_memory_equal(got[0], got[1], sizeof(float) * (size_t)ndst);
    kn_pdc_free(k);
    free(src), free(w), free(b), free(res), free(want), free(got[0]), free(got[1]);
}

static bool have_avx512(void) { return (kn_cpu_features() & KN_CPU_AVX512F) != 0; }

static void test_direct_nhwc(void **state)
{
    (void)state;
    if (!have_avx512()) KN_SKIP("the patch kernel needs AVX-512F");
    /* kw O = 32 and 16: the product stores into the patches itself */
    pcase c = {.N = 1, .C = 16, .H = 5, .W = 11, .O = 16, .kh = 2, .kw = 2, .dst_nhwc = true, .bias = true,
               .n_post = 1, .post = {{KN_POST_RELU, 0, 0}}};
    run_case(&c, false);
    c = (pcase){.N = 2, .C = 24, .H = 3, .W = 9, .O = 8, .kh = 3, .kw = 2, .dst_nhwc = true, .bias = true};
    run_case(&c, false);
    /* a residual, apart and in place */
    c = (pcase){.N = 1, .C = 7, .H = 4, .W = 13, .O = 16, .kh = 2, .kw = 2, .dst_nhwc = true, .bias = false,
                .n_post = 2, .post = {{KN_POST_SUM, 0, 0}, {KN_POST_RELU, 0, 0}}};
    run_case(&c, false);
    run_case(&c, true);
}

static void test_blocked(void **state)
{
    (void)state;
    if (!have_avx512()) KN_SKIP("the patch kernel needs AVX-512F");
    /* DBNet's last layer: 16 -> 1 channel, 2x2, a Sigmoid, NCHW out */
    pcase c = {.N = 1, .C = 16, .H = 6, .W = 21, .O = 1, .kh = 2, .kw = 2, .dst_nhwc = false, .bias = true,
               .n_post = 1, .post = {{KN_POST_SIGMOID, 0, 0}}};
    run_case(&c, false);
    c = (pcase){.N = 2, .C = 5, .H = 3, .W = 7, .O = 3, .kh = 2, .kw = 1, .dst_nhwc = false, .bias = true};
    run_case(&c, false);
    c = (pcase){.N = 1, .C = 9, .H = 4, .W = 10, .O = 5, .kh = 3, .kw = 3, .dst_nhwc = true, .bias = true,
                .n_post = 1, .post = {{KN_POST_RELU, 0, 0}}};
    run_case(&c, false);
}

static void test_refusals(void **state)
{
    (void)state;
    if (!have_avx512()) KN_SKIP("the patch kernel needs AVX-512F");
    pcase c = {.N = 1, .C = 16, .H = 4, .W = 4, .O = 3, .kh = 2, .kw = 2, .dst_nhwc = true, .bias = true};
    kn_abi_dnnl r;
    record(&c, &r);
    assert_true(kn_pdc_supported(&r, true));
    kn_abi_dnnl bad = r;
    bad.pads_begin[0] = 1;
    assert_false(kn_pdc_supported(&bad, true));
    bad = r;
    bad.strides[1] = 1;
    assert_false(kn_pdc_supported(&bad, true));
    bad = r;
    bad.groups = 2;
    assert_false(kn_pdc_supported(&bad, true));
    bad = r; /* a residual where the block stores (kw O = 6) */
    bad.n_post = 1;
    bad.post[0] = (kn_abi_post){KN_POST_SUM, 0, 0};
    assert_false(kn_pdc_supported(&bad, true));
    bad.post[0] = (kn_abi_post){KN_POST_TANH, 0, 0};
    assert_false(kn_pdc_supported(&bad, true));
    bad = r;
    bad.wei_ref.loc = KN_LOC_ARENA;
    assert_false(kn_pdc_supported(&bad, true));
}

/* A tensor over data (not owned). */
static kn_tensor view(int rank, const int64_t *dims, float *data)
{
    kn_tensor t = {.dtype = KN_F32, .rank = rank, .data = data};
    memcpy(t.dims, dims, sizeof(int64_t) * (size_t)rank);
    t.nbytes = sizeof(float) * (size_t)kn_tensor_numel(&t);
    return t;
}

static void test_run_time_shapes(void **state)
{
    (void)state;
    if (!have_avx512()) KN_SKIP("the patch kernel needs AVX-512F");
    /* the artifact's weights: W [C=6][O=4][2][2] then the bias */
    enum { C = 6, O = 4, K = 2, NW = C * O * K * K };
    float *blob = rand_buf(NW + O);
    int64_t wd[4] = {C, O, K, K}, bd[1] = {O};
    kn_tensor w = view(4, wd, blob), b = view(1, bd, blob + NW);
    kn_op_session os = {.threads = 2, .weights = (const unsigned char *)blob, .weights_len = sizeof(float) * (NW + O)};
    kn_nn_window win = {.nsp = 2, .kernel = {K, K}, .strides = {K, K}, .dilations = {1, 1}};
    kn_abi_post relu = {KN_POST_RELU, 0, 0}, tanh_ = {KN_POST_TANH, 0, 0};
    int64_t sizes[3][2] = {{3, 5}, {4, 9}, {3, 5}}; /* the weights packed at the first size serve the second */
    for (int s = 0; s < 3; s++) {
        int64_t H = sizes[s][0], W = sizes[s][1], xd[4] = {1, C, H, W}, yd[4] = {1, O, H * K, W * K};
        float *xs = rand_buf(C * H * W);
        kn_tensor x = view(4, xd, xs), want, got;
        assert_int_equal(kn_tensor_alloc(&want, KN_F32, 4, yd), KN_OK);
        assert_int_equal(kn_tensor_alloc(&got, KN_F32, 4, yd), KN_OK);
        assert_int_equal(kn_k_conv_transpose(&x, &w, &b, &win, 1, &want), KN_OK);
        /* Relu in the epilogue; Tanh is not there: bias only, the caller's */
        bool done = false;
        const kn_abi_post *post = s == 2 ? &tanh_ : &relu;
        assert_int_equal(kn_convt_fast(&os, &x, &w, &b, post, 1, &win, 1, &got, &done, 0), KN_OK);
        assert_int_equal(done, s != 2);
        assert_string_equal(os.impl, "kiln patch deconv:avx512");
        const float *g = got.data, *r = want.data;
        for (int64_t i = 0; i < kn_tensor_numel(&got); i++) {
            float e = s == 2 ? r[i] : r[i] > 0 ? r[i] : 0;
            if (fabsf(g[i] - e) > 1e-5f * (1 + fabsf(e)))
                fail_msg("%lldx%lld: element %lld is %g, expected %g", (long long)H, (long long)W, (long long)i, g[i], e);
        }
        kn_tensor_free(&want), kn_tensor_free(&got), free(xs);
    }
    /* left to the plain kernel: padding, weights that are not the
     * artifact's constants */
    int64_t xd[4] = {1, C, 3, 3}, yd[4] = {1, O, 6, 6};
    float *xs = rand_buf(C * 9), *ys = rand_buf(O * 36), *copy = malloc(sizeof(float) * NW);
    memcpy(copy, blob, sizeof(float) * NW);
    kn_tensor x = view(4, xd, xs), y = view(4, yd, ys), wc = view(4, wd, copy);
    bool done;
    kn_nn_window padded = win;
    padded.pads[0] = padded.pads[2] = 1;
    assert_int_equal(kn_convt_fast(&os, &x, &w, &b, NULL, 0, &padded, 1, &y, &done, 0), KN_ERR_UNSUPPORTED);
    assert_int_equal(kn_convt_fast(&os, &x, &wc, &b, NULL, 0, &win, 1, &y, &done, 0), KN_ERR_UNSUPPORTED);
    assert_int_equal(kn_convt_fast(&os, &x, &w, &b, NULL, 0, &win, 2, &y, &done, 0), KN_ERR_UNSUPPORTED);
    if (os.free_state) os.free_state(os.state);
    free(xs), free(ys), free(copy), free(blob);
}

/* [N][C][HW] <-> [N][HW][C] (to_nhwc false: back). */
static void relayout(const float *src, float *dst, int64_t N, int64_t C, int64_t HW, bool to_nhwc)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < HW; p++) {
                int64_t nchw = (n * C + c) * HW + p, nhwc = (n * HW + p) * C + c;
                if (to_nhwc) dst[nhwc] = src[nchw];
                else dst[nchw] = src[nhwc];
            }
}

/* A node whose input, output or both the compiler placed channels-last
 * (kn_opdesc.nhwc): the patch kernel (direct NHWC stores for O = 16,
 * blocked for O = 4) and the plain kernel through NCHW copies, against the
 * plain kernel on NCHW. */
static void test_run_time_nhwc(void **state)
{
    (void)state;
    enum { C = 6, K = 2, H = 3, W = 5 };
    const int outs[2] = {16, 4};
    for (int oi = 0; oi < 2; oi++) {
        int64_t O = outs[oi], NW = C * O * K * K;
        float *blob = rand_buf(NW + O);
        int64_t wd[4] = {C, O, K, K}, bd[1] = {O}, xd[4] = {1, C, H, W}, yd[4] = {1, O, H * K, W * K};
        kn_tensor w = view(4, wd, blob), b = view(1, bd, blob + NW);
        kn_nn_window win = {.nsp = 2, .kernel = {K, K}, .strides = {K, K}, .dilations = {1, 1}};
        float *xs = rand_buf(C * H * W), *xl = malloc(sizeof(float) * C * H * W);
        relayout(xs, xl, 1, C, H * W, true);
        kn_tensor x = view(4, xd, xs), want;
        assert_int_equal(kn_tensor_alloc(&want, KN_F32, 4, yd), KN_OK);
        assert_int_equal(kn_k_conv_transpose(&x, &w, &b, &win, 1, &want), KN_OK);
        float *want_l = malloc(sizeof want_l[0] * (size_t)kn_tensor_numel(&want));
        relayout(want.data, want_l, 1, O, H * K * W * K, true);
        for (int bits = 1; bits <= 3; bits++) {
            kn_tensor xin = view(4, xd, bits & KN_OPNODE_NHWC_SRC ? xl : xs), got;
            const float *expect = bits & KN_OPNODE_NHWC_DST ? want_l : want.data;
            for (int fast = 0; fast < 2; fast++) {
                if (fast && !have_avx512()) continue;
                assert_int_equal(kn_tensor_alloc(&got, KN_F32, 4, yd), KN_OK);
                kn_op_session os = {.threads = 2, .weights = (const unsigned char *)blob,
                                    .weights_len = sizeof(float) * (size_t)(NW + O)};
                bool done;
                int rc = fast ? kn_convt_fast(&os, &xin, &w, &b, NULL, 0, &win, 1, &got, &done, bits)
                              : kn_convt_reference(&xin, &w, &b, &win, 1, &got, bits);
                assert_int_equal(rc, KN_OK);
                const float *g = got.data;
                for (int64_t i = 0; i < kn_tensor_numel(&got); i++)
                    if (fabsf(g[i] - expect[i]) > 1e-5f * (1 + fabsf(expect[i])))
                        fail_msg("O %lld, NHWC bits %d, %s: element %lld is %g, expected %g", (long long)O, bits,
                                 fast ? "patch kernel" : "plain kernel", (long long)i, g[i], expect[i]);
                if (os.free_state) os.free_state(os.state);
                kn_tensor_free(&got);
            }
        }
        kn_tensor_free(&want), free(want_l), free(xs), free(xl), free(blob);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_nhwc),
        cmocka_unit_test(test_blocked),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_run_time_shapes),
        cmocka_unit_test(test_run_time_nhwc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
