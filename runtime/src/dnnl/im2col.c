/*
 * runtime/src/dnnl/im2col.c — a convolution with a small output image
 * between two blocked activations as im2col + oneDNN's 1x1 kernel: its
 * input patches copied into the session's scratch buffer, then one 1x1
 * convolution over them (a row of conv.c's table of algorithms).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "bigmem.h"
#include "dnnl_int.h"
/* Largest column buffer (ResNet-50 at batch 8 needs 14.5 MB). */
#define IM2COL_MAX_BYTES (INT64_C(256) << 20)

/* The patch copy of a 2-D conv whose activations are in a channel-blocked
 * layout [N][C/b][H][W][b]. The columns are the 1x1 convolution's src
 * [N][K/b][OH*OW][b], K = kh * kw * C in the order (tap, channel block):
 * block j holds channels (j % (C/b)) * b .. of tap j / (C/b). */
struct im2col {
    int64_t N, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, b;
    float *wei; /* [O][K] in that order: the 1x1 convolution's weights */
};

typedef struct im2col_run {
    const struct im2col *g;
    const float *src;
    float *col;
} im2col_run;

/* Column blocks [lo, hi) of the flattened (image, tap, channel block). */
static int im2col_chunk(void *args, int64_t lo, int64_t hi)
{
    const im2col_run *r = args;
    const struct im2col *g = r->g;
    int64_t cb = g->C / g->b, taps = g->KH * g->KW, plane = g->H * g->W * g->b, M = g->OH * g->OW;
    size_t vec = (size_t)g->b * sizeof(float);
    for (int64_t it = lo; it < hi; it++) {
        int64_t n = it / (taps * cb), tap = it / cb % taps, j = it % cb;
        int64_t kh = tap / g->KW, kw = tap % g->KW;
        const float *x = r->src + (n * cb + j) * plane;
        float *out = r->col + it * M * g->b;
        for (int64_t oh = 0; oh < g->OH; oh++) {
            int64_t ih = oh * g->sh - g->ph + kh * g->dh;
            for (int64_t ow = 0; ow < g->OW; ow++, out += g->b) {
                int64_t iw = ow * g->sw - g->pw + kw * g->dw;
                if (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W) memcpy(out, x + (ih * g->W + iw) * g->b, vec);
                else memset(out, 0, vec);
            }
        }
    }
    return KN_OK;
}

static void im2col_free(void *state)
{
    struct im2col *g = state;
    if (!g) return;
    kn_big_free(g->wei);
    free(g);
}

/* A 2-D conv, one group, not 1x1 stride 1, with constant weights, between
 * two activations in the session's blocked layout (nChw8c or nChw16c: not
 * channels-last, where oneDNN's brgconv kernels keep up with it), unless
 * the record asks for direct convolution; not when its columns would pass
 * IM2COL_MAX_BYTES. */
static bool im2col_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    if (!kn_dnnl_own_algo_allowed(rec) || rec->spatial != 2 || rec->groups != 1 || rec->wei_ref.loc != KN_LOC_WEIGHTS ||
        rec->src.rank != 4 || rec->dst.rank != 4 || rec->wei.rank != 4)
        return false;
    int64_t b = kn_dnnl_native_block(s);
    if (b != 8 && b != 16) return false;
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0], KH = rec->wei.dims[2],
            KW = rec->wei.dims[3], OH = rec->dst.dims[2], OW = rec->dst.dims[3];
    bool pointwise = KH == 1 && KW == 1 && rec->strides[0] == 1 && rec->strides[1] == 1;
    int64_t K = C * KH * KW, M = OH * OW, col;
    return !pointwise && C % b == 0 && O % b == 0 && !__builtin_mul_overflow(N * M, K, &col) &&
           col <= IM2COL_MAX_BYTES / (int64_t)sizeof(float);
}

/* Small output images only (the tuning table's im2col_max_pixels): oneDNN's
 * direct kernel blocks along the output width and is slow on 7- or
 * 14-pixel rows, not on larger ones. */
static bool im2col_worth(kn_dnnl_session *s, const kn_abi_dnnl *rec, int threads)
{
    (void)s, (void)threads;
    const kn_tuning *t = kn_config_tuning();
    int64_t pixels = rec->dst.dims[2] * rec->dst.dims[3];
    return pixels <= (kn_dnnl_thin_dim(rec) == 1 ? t->thin_im2col_max_pixels : t->im2col_max_pixels);
}

/* Builds p as im2col + oneDNN's 1x1 kernel; KN_ERR_UNSUPPORTED (p
 * untouched) when oneDNN has no optimized 1x1 kernel for it. */
static int im2col_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                         dnnl_primitive_attr_t attr)
{
    if (!weights) return KN_ERR_UNSUPPORTED;
    int64_t b = kn_dnnl_native_block(s);
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0], KH = rec->wei.dims[2],
            KW = rec->wei.dims[3], OH = rec->dst.dims[2], OW = rec->dst.dims[3];
    int64_t K = C * KH * KW, M = OH * OW, col = N * M * K;
    if (rec->wei.nbytes != O * K * (int64_t)sizeof(float))
        return kn_error(KN_ERR_INVALID, "oneDNN conv: weights of %lld bytes for [%lld, %lld, %lld, %lld]",
                        (long long)rec->wei.nbytes, (long long)O, (long long)C, (long long)KH, (long long)KW);
    struct im2col *g = calloc(1, sizeof *g);
    if (!g) return kn_error(KN_ERR_NOMEM, "out of memory");
    *g = (struct im2col){.N = N, .C = C, .H = rec->src.dims[2], .W = rec->src.dims[3], .OH = OH, .OW = OW,
                         .KH = KH, .KW = KW, .sh = rec->strides[0], .sw = rec->strides[1],
                         .ph = rec->pads_begin[0], .pw = rec->pads_begin[1], .dh = rec->dilations[0],
                         .dw = rec->dilations[1], .b = b};
    g->wei = kn_big_alloc((size_t)(O * K) * sizeof(float));
    if (!g->wei) {
        free(g);
        return kn_error(KN_ERR_NOMEM, "out of memory for %lld bytes of im2col weights", (long long)(O * K * 4));
    }
    /* ONNX [O][C][KH][KW] -> [O][tap][C] */
    const float *w = (const float *)(weights + rec->wei_ref.offset);
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < KH * KW; t++) g->wei[(o * KH * KW + t) * C + c] = w[(o * C + c) * KH * KW + t];
    dnnl_dims_t xd = {N, K, M, 1}, wd = {O, K, 1, 1}, yd = {N, O, M, 1}, bd = {O}, one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t x_md, w_user, w_any, y_md, b_md;
    bool hb = kn_dnnl_has_bias(rec);
    const void *bconst = NULL;
    int st = KN_OK;
    if (hb && (st = kn_dnnl_check_tensor(&rec->bias, "conv bias", 1, 1)) == KN_OK && rec->bias.dims[0] != O)
        st = kn_error(KN_ERR_INVALID, "oneDNN conv: bias has %lld values, expected %lld", (long long)rec->bias.dims[0],
                      (long long)O);
    if (!st && hb) st = kn_dnnl_const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &bconst);
    dnnl_format_tag_t tag = kn_dnnl_native_tag(kn_dnnl_native_layout(s), 4);
    if (!st && (dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dnnl_f32, tag) ||
                dnnl_memory_desc_init_by_tag(&y_md, 4, yd, dnnl_f32, tag) ||
                dnnl_memory_desc_init_by_tag(&w_user, 4, wd, dnnl_f32, dnnl_oihw) ||
                dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
                dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a)))
        st = kn_error(KN_ERR_INTERNAL, "oneDNN: describing the im2col convolution failed");
    bool sum = false;
    dnnl_convolution_desc_t cd;
    if (!st && dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &x_md, &w_any,
                                                  hb ? &b_md : NULL, &y_md, one, zero, zero) != dnnl_success)
        st = KN_ERR_UNSUPPORTED;
    if (!st) st = kn_dnnl_set_residual_post_ops(s, p, rec, &cd, attr, &y_md, &sum);
    if (!st) st = kn_dnnl_reject_reference(s, &cd, attr);
    if (!st) st = kn_dnnl_reserve(s, 2, (size_t)col * sizeof(float));
    if (st) { /* leave p as it was: the next row builds it */
        im2col_free(g);
        if (p->m_res) dnnl_memory_destroy(p->m_res);
        p->m_res = NULL;
        kn_dnnl_run_free(&p->main_sum);
        return st;
    }
    p->state = g;
    p->has_sum = sum;
    p->has_bias = hb;
    p->bias_const = bconst;
    p->bias_arg = DNNL_ARG_BIAS;
    st = kn_dnnl_finish_prim(s, p, &cd, attr, &x_md, &w_user, hb ? &b_md : NULL, &y_md, NULL, g->wei,
                             "creating the im2col convolution");
    if (!st && p->wei_reorder) { /* reordered into wei_buf: the copy is not needed any more */
        kn_big_free(g->wei);
        g->wei = NULL;
    }
    char impl[sizeof p->impl];
    snprintf(impl, sizeof impl, "im2col %s", p->impl);
    memcpy(p->impl, impl, sizeof impl);
    return st;
}

/* Copies the patches into the session's scratch, then runs the 1x1
 * convolution over them. */
static int im2col_run_prim(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                           const void *post_src, int threads)
{
    const struct im2col *g = p->state;
    kn_dnnl_set_threads(threads);
    im2col_run r = {g, src, s->act[2]};
    int64_t blocks = g->N * g->KH * g->KW * (g->C / g->b);
    int rc = kn_rt_parallel_for_threads(threads, im2col_chunk, &r, blocks);
    return rc ? rc : kn_dnnl_exec_prim(s, p, s->act[2], wei, bias, dst, post_src, threads);
}

const kn_dnnl_algo kn_dnnl_algo_im2col = {
    .id = KN_ALGO_IM2COL,
    .dtype = KN_F32,
    .supports = im2col_supports,
    .worth = im2col_worth,
    .create = im2col_create,
    .run = im2col_run_prim,
    .free = im2col_free,
};
