/*
 * runtime/kernels/x86/f32_expand_dw_avx512.c — a 1x1 convolution and the depthwise convolution
 * that alone reads its output, run as one AVX-512 kernel on NHWC
 * activations: the expansion and depthwise halves of MobileNet's inverted
 * residual blocks.
 *
 * Run apart, the 1x1 convolution writes its wide output to memory (six
 * times the block's input: 37 MB for MobileNetV2's 16 -> 96 layer at 112x112,
 * batch 8) and the depthwise convolution reads it back; both are bound by
 * memory, not by their arithmetic. Here each thread expands the input rows
 * that one output row of the depthwise convolution needs into a ring of KH
 * rows that stays in its L2 cache (KH x (W + pads) x E floats: 131 KB for
 * that layer), then computes the depthwise output row from the ring. Each
 * input row is expanded once per run of consecutive output rows; a thread
 * that starts a new run (a new image, or a new chunk of rows) expands the
 * rows its first output row shares with the previous one again, KH - stride
 * rows.
 *
 * The expansion is a matrix product [W x C] . [C x E] per row (f32_gemm_8x32_avx512.c),
 * with the 1x1 convolution's bias and post-ops applied as it stores into the
 * ring; the ring's pad columns stay zero, and rows above or below the image
 * read a row of zeros, so that the depthwise loop has no edge cases. The
 * depthwise output is computed in blocks of 8 pixels by 16 channels, with
 * its own bias, post-ops and residual sum.
 *
 * dnnl.c pairs two records into this kernel when the session's meta proves
 * that nothing else reads the 1x1 convolution's output (session.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "fused_int.h"
#include "f32_gemm_avx512.h"
#include "rt_internal.h"

/* Largest depthwise window: KH x KW weights of a 16-channel vector stay in
 * L1, the ring holds KH rows. */
#define XDW_MAX_KERNEL 7
/* Depthwise output pixels per block: 8 accumulators of 16 channels. */
#define XDW_PIXELS 8

struct kn_xdw {
    int64_t N, C, E, H, W; /* the 1x1 convolution: [N, H, W, C] -> [N, H, W, E] */
    int64_t KH, KW, sh, sw, pt, pl, OH, OW;
    int64_t Wp;            /* ring row width in pixels: pl + W + right pad */
    int rows;              /* row block of the expansion (kn_gemm512_row_block) */
    float *w1;             /* [E/16][C][16] */
    float *wd;             /* [KH][KW][E] */
    const float *b1, *b2;  /* constant biases, or NULL (per run, or none) */
    bool has_b1, has_b2, has_sum;
    kn_abi_post post1[4], post2[4];
    kn_gemm512_epi epi1, epi2; /* their post-ops (bias and residual set per use) */
    float *zero;           /* Wp x E zeros: the rows outside the image */
    float *ring;           /* per worker: KH rows of Wp x E floats */
    int slots;             /* workers the ring has room for */
};

static bool posts_ok(const kn_abi_post *p, int n, bool sum_ok)
{
    if (n < 0 || n > 4) return false;
    for (int i = 0; i < n; i++) {
        int k = p[i].kind;
        if (k != KN_POST_NONE && k != KN_POST_RELU && k != KN_POST_LEAKY_RELU && k != KN_POST_CLIP &&
            !(k == KN_POST_SUM && sum_ok) && k != KN_POST_GELU_ERF)
            return false;
    }
    return true;
}

static bool static_dims(const kn_abi_tensor *t)
{
    for (int d = 0; d < t->rank && d < 8; d++)
        if (t->dim_sym[d] || t->dims[d] < 1) return false;
    return t->slot == 0;
}

static bool has_bias(const kn_abi_dnnl *rec) { return !(rec->bias.rank == 0 && rec->bias.nbytes == 0); }

bool kn_xdw_supported(const kn_abi_dnnl *pw, const kn_abi_dnnl *dw)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (!(kn_cpu_features() & KN_CPU_AVX512F)) return false;
    if (pw->kind != KN_DNNL_CONV || dw->kind != KN_DNNL_CONV || pw->spatial != 2 || dw->spatial != 2) return false;
    const kn_abi_tensor *ts[] = {&pw->src, &pw->wei, &pw->dst, &dw->src, &dw->wei, &dw->dst};
    for (int i = 0; i < 6; i++)
        if (ts[i]->rank != 4 || ts[i]->dtype != KN_F32 || !static_dims(ts[i])) return false;
    /* the 1x1 convolution: stride 1, no padding, no residual */
    int64_t N = pw->src.dims[0], C = pw->src.dims[1], H = pw->src.dims[2], W = pw->src.dims[3];
    int64_t E = pw->wei.dims[0];
    if (pw->groups != 1 || pw->wei.dims[1] != C || pw->wei.dims[2] != 1 || pw->wei.dims[3] != 1) return false;
    if (E < KN_GEMM512_COLS || E % KN_GEMM512_COLS) return false;
    for (int i = 0; i < 2; i++)
        if (pw->strides[i] != 1 || pw->dilations[i] != 1 || pw->pads_begin[i] || pw->pads_end[i]) return false;
    const int64_t pd[4] = {N, E, H, W};
    for (int i = 0; i < 4; i++)
        if (pw->dst.dims[i] != pd[i] || dw->src.dims[i] != pd[i]) return false;
    /* the depthwise convolution: one channel per group, no dilation */
    int64_t KH = dw->wei.dims[2], KW = dw->wei.dims[3];
    if (dw->groups != E || dw->wei.dims[0] != E || dw->wei.dims[1] != 1 || KH > XDW_MAX_KERNEL ||
        KW > XDW_MAX_KERNEL)
        return false;
    if (dw->dst.dims[0] != N || dw->dst.dims[1] != E) return false;
    for (int i = 0; i < 2; i++) {
        int64_t k = i ? KW : KH, in = i ? W : H, s = dw->strides[i];
        int64_t pb = dw->pads_begin[i], pe = dw->pads_end[i];
        if (s < 1 || s > XDW_MAX_KERNEL || dw->dilations[i] != 1 || pb < 0 || pe < 0 || pb >= k || pe >= k ||
            in + pb + pe < k || dw->dst.dims[2 + i] != (in + pb + pe - k) / s + 1)
            return false;
    }
    if (pw->wei_ref.loc != KN_LOC_WEIGHTS || dw->wei_ref.loc != KN_LOC_WEIGHTS) return false;
    if (pw->wei.nbytes != E * C * 4 || dw->wei.nbytes != E * KH * KW * 4) return false;
    if ((has_bias(pw) && pw->bias.nbytes != E * 4) || (has_bias(dw) && dw->bias.nbytes != E * 4)) return false;
    return posts_ok(pw->post, pw->n_post, false) && posts_ok(dw->post, dw->n_post, true);
#else
    (void)pw, (void)dw;
    return false;
#endif
}

int kn_xdw_create(const kn_abi_dnnl *pw, const kn_abi_dnnl *dw, const unsigned char *weights, kn_xdw **out)
{
    *out = NULL;
    if (!kn_xdw_supported(pw, dw))
        return kn_error(KN_ERR_UNSUPPORTED, "1x1 + depthwise convolution: not a pair the AVX-512 kernel runs");
    if (!weights) return kn_error(KN_ERR_INVALID, "1x1 + depthwise convolution: no weights were given");
    kn_xdw *x = calloc(1, sizeof *x);
    if (!x) return kn_error(KN_ERR_NOMEM, "out of memory");
    x->N = pw->src.dims[0], x->C = pw->src.dims[1], x->H = pw->src.dims[2], x->W = pw->src.dims[3];
    x->E = pw->wei.dims[0];
    x->KH = dw->wei.dims[2], x->KW = dw->wei.dims[3];
    x->sh = dw->strides[0], x->sw = dw->strides[1];
    x->pt = dw->pads_begin[0], x->pl = dw->pads_begin[1];
    x->OH = dw->dst.dims[2], x->OW = dw->dst.dims[3];
    x->Wp = x->pl + x->W + dw->pads_end[1];
    x->rows = kn_gemm512_row_block(x->W < KN_GEMM512_ROWS ? KN_GEMM512_ROWS : x->W);
    x->has_b1 = has_bias(pw), x->has_b2 = has_bias(dw);
    memcpy(x->post1, pw->post, sizeof x->post1);
    memcpy(x->post2, dw->post, sizeof x->post2);
    x->epi1 = (kn_gemm512_epi){.post = x->post1, .n_post = pw->n_post};
    x->epi2 = (kn_gemm512_epi){.post = x->post2, .n_post = dw->n_post};
    kn_gemm512_clamp(&x->epi1);
    kn_gemm512_clamp(&x->epi2);
    x->has_sum = kn_fused_has_sum(dw->post, dw->n_post);
    size_t w1 = (size_t)(x->E * x->C), wd = (size_t)(x->E * x->KH * x->KW), zero = (size_t)(x->Wp * x->E);
    if (!(x->w1 = kn_big_alloc(w1 * sizeof(float))) ||
        posix_memalign((void **)&x->wd, 64, wd * sizeof(float)) ||
        posix_memalign((void **)&x->zero, 64, zero * sizeof(float))) {
        kn_xdw_free(x);
        return kn_error(KN_ERR_NOMEM, "1x1 + depthwise convolution: out of memory for its weights");
    }
    /* the 1x1 filter [E][C] into 16-column panels; the depthwise [E][1][KH][KW] tap-major */
    const float *g1 = (const float *)(weights + pw->wei_ref.offset);
    for (int64_t e = 0; e < x->E; e++)
        for (int64_t c = 0; c < x->C; c++)
            x->w1[((e / KN_GEMM512_COLS) * x->C + c) * KN_GEMM512_COLS + e % KN_GEMM512_COLS] = g1[e * x->C + c];
    const float *gd = (const float *)(weights + dw->wei_ref.offset);
    for (int64_t e = 0; e < x->E; e++)
        for (int64_t t = 0; t < x->KH * x->KW; t++) x->wd[t * x->E + e] = gd[e * x->KH * x->KW + t];
    memset(x->zero, 0, zero * sizeof(float));
    if (x->has_b1 && pw->bias_ref.loc == KN_LOC_WEIGHTS) x->b1 = (const float *)(weights + pw->bias_ref.offset);
    if (x->has_b2 && dw->bias_ref.loc == KN_LOC_WEIGHTS) x->b2 = (const float *)(weights + dw->bias_ref.offset);
    int st = kn_xdw_reserve(x, 1);
    if (st) {
        kn_xdw_free(x);
        return st;
    }
    *out = x;
    return KN_OK;
}

static size_t ring_floats(const kn_xdw *x) { return (size_t)(x->KH * x->Wp * x->E); }

int kn_xdw_reserve(kn_xdw *x, int threads)
{
    if (threads <= x->slots) return KN_OK;
    size_t n = ring_floats(x) * (size_t)threads;
    float *r = NULL;
    if (posix_memalign((void **)&r, 64, n * sizeof(float)))
        return kn_error(KN_ERR_NOMEM, "1x1 + depthwise convolution: out of memory for %d rings", threads);
    /* the pad columns are never written: zero once */
    memset(r, 0, n * sizeof(float));
    free(x->ring);
    x->ring = r;
    x->slots = threads;
    return KN_OK;
}

void kn_xdw_free(kn_xdw *x)
{
    if (!x) return;
    kn_big_free(x->w1);
    free(x->wd);
    free(x->zero);
    free(x->ring);
    free(x);
}

#if defined(__x86_64__) && defined(__GNUC__)

typedef struct xdw_run {
    const kn_xdw *x;
    const float *src, *b1, *b2, *res;
    float *dst;
    int64_t units; /* the parallel loop's units: runs of output rows */
} xdw_run;

/* Each chunk of the parallel loop expands KH - stride rows that its
 * neighbour expands too: with fewer than this many output rows per chunk
 * (batch 1), the loop gets one chunk per thread instead of four. */
#define XDW_CHUNK_ROWS 16

/* One input row (W pixels of C floats) expanded into a ring row at its
 * first real pixel (E floats apart). */
KN_TARGET_AVX512 static void expand_row(const xdw_run *r, const float *in, float *out)
{
    const kn_xdw *x = r->x;
    int64_t C = x->C, E = x->E, panels = E / KN_GEMM512_COLS;
    for (int64_t q = 0; q < panels; q += 2) {
        int np = q + 1 < panels ? 2 : 1;
        const float *B = x->w1 + q * C * KN_GEMM512_COLS;
        kn_gemm512_epi e = x->epi1;
        e.bias = r->b1 ? r->b1 + q * KN_GEMM512_COLS : NULL;
        /* the first two row blocks prefetch the next pair's panels */
        const float *next = q + 2 < panels ? B + 2 * C * KN_GEMM512_COLS : x->w1;
        int64_t b = 0;
        for (int64_t x0 = 0; x0 < x->W; x0 += x->rows, b++) {
            int rows = x->W - x0 < x->rows ? (int)(x->W - x0) : x->rows;
            const float *pf = b < 2 ? next + b * C * KN_GEMM512_COLS : B;
            kn_gemm512_rows(rows, np, in + x0 * C, C, B, C * KN_GEMM512_COLS, C, pf, out + x0 * E + q * KN_GEMM512_COLS,
                            E, &e);
        }
    }
}

/* R output pixels (R constant when inlined) by 16 channels at column c of
 * the depthwise convolution: rp[kh] the ring rows at the block's first
 * window, step floats between the windows of consecutive pixels. The R
 * accumulators are named, so that they stay in registers. */
#define DW_PIXEL(i)                                                                                                \
    do {                                                                                                           \
        if (R > i) a##i = _mm512_fmadd_ps(_mm512_loadu_ps(row + i * step), wv, a##i);                             \
    } while (0)
#define DW_EACH(expr)                                                                                              \
    do {                                                                                                           \
        DW_STORE(0, expr);                                                                                         \
        DW_STORE(1, expr);                                                                                         \
        DW_STORE(2, expr);                                                                                         \
        DW_STORE(3, expr);                                                                                         \
        DW_STORE(4, expr);                                                                                         \
        DW_STORE(5, expr);                                                                                         \
        DW_STORE(6, expr);                                                                                         \
        DW_STORE(7, expr);                                                                                         \
    } while (0)
#define DW_STORE(i, expr)                                                                                          \
    do {                                                                                                           \
        if (R > i) {                                                                                               \
            __m512 v = a##i;                                                                                       \
            _mm512_storeu_ps(out + i * E + c, (expr));                                                             \
        }                                                                                                          \
    } while (0)
#define DW_KEEP(i)                                                                                                 \
    do {                                                                                                           \
        if (R > i) _mm512_storeu_ps(acc[i], a##i);                                                                 \
    } while (0)
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void dw_block(const int R, const kn_xdw *x,
                                                                            const float *b2, const float *const *rp,
                                                                            int64_t step, int64_t c, float *out,
                                                                            const float *res)
{
    int64_t E = x->E;
    __m512 a0 = b2 ? _mm512_loadu_ps(b2 + c) : _mm512_setzero_ps();
    __m512 a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (int64_t kh = 0; kh < x->KH; kh++) {
        const float *w = x->wd + kh * x->KW * E + c;
        for (int64_t kw = 0; kw < x->KW; kw++) {
            const float *row = rp[kh] + c + kw * E;
            __m512 wv = _mm512_load_ps(w + kw * E);
            DW_PIXEL(0);
            DW_PIXEL(1);
            DW_PIXEL(2);
            DW_PIXEL(3);
            DW_PIXEL(4);
            DW_PIXEL(5);
            DW_PIXEL(6);
            DW_PIXEL(7);
        }
    }
    const kn_gemm512_epi *e = &x->epi2;
    if (e->clamp) {
        __m512 lo = _mm512_set1_ps(e->lo), hi = _mm512_set1_ps(e->hi);
        DW_EACH(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
    } else if (e->n_post > 0) {
        float acc[KN_GEMM512_ROWS][2 * KN_GEMM512_COLS];
        DW_KEEP(0);
        DW_KEEP(1);
        DW_KEEP(2);
        DW_KEEP(3);
        DW_KEEP(4);
        DW_KEEP(5);
        DW_KEEP(6);
        DW_KEEP(7);
        kn_gemm512_posts(e, R, 1, acc[0], out + c, E, res ? res + c : NULL, E);
    } else {
        DW_EACH(v);
    }
}
#undef DW_PIXEL
#undef DW_EACH
#undef DW_KEEP
#undef DW_STORE

/* One output row of the depthwise convolution from the KH ring rows rp. */
KN_TARGET_AVX512 static void dw_row(const xdw_run *r, const float *const *rp, float *out, const float *res)
{
    const kn_xdw *x = r->x;
    int64_t E = x->E, step = x->sw * E;
    for (int64_t ox = 0; ox < x->OW; ox += XDW_PIXELS) {
        int n = x->OW - ox < XDW_PIXELS ? (int)(x->OW - ox) : XDW_PIXELS;
        const float *at[XDW_MAX_KERNEL];
        for (int64_t kh = 0; kh < x->KH; kh++) at[kh] = rp[kh] + ox * step;
        float *o = out + ox * E;
        const float *rs = res ? res + ox * E : NULL;
        for (int64_t c = 0; c < E; c += KN_GEMM512_COLS) {
#define CASE(R)                                                                                                    \
    case R: dw_block(R, x, r->b2, at, step, c, o, rs); break
            switch (n) {
                CASE(1);
                CASE(2);
                CASE(3);
                CASE(4);
                CASE(5);
                CASE(6);
                CASE(7);
                CASE(8);
            default: break;
            }
#undef CASE
        }
    }
}

/* Output rows of units [lo, hi) of the N x OH, on the calling worker's
 * ring. */
KN_TARGET_AVX512 static int xdw_chunk(void *args, int64_t lo, int64_t hi)
{
    const xdw_run *r = args;
    const kn_xdw *x = r->x;
    int64_t all = x->N * x->OH;
    lo = lo * all / r->units, hi = hi * all / r->units;
    int worker = kn_rt_parallel_worker();
    if (worker < 0 || worker >= x->slots)
        return kn_error(KN_ERR_INTERNAL, "1x1 + depthwise convolution: worker %d of %d", worker, x->slots);
    int64_t E = x->E, row = x->Wp * E;
    float *ring = x->ring + (size_t)worker * ring_floats(x);
    int64_t image = -1, next = 0; /* the next input row not yet in the ring */
    for (int64_t u = lo; u < hi; u++) {
        int64_t n = u / x->OH, oy = u % x->OH, iy0 = oy * x->sh - x->pt;
        if (n != image) image = n, next = 0;
        int64_t from = iy0 > next ? iy0 : next, to = iy0 + x->KH < x->H ? iy0 + x->KH : x->H;
        for (int64_t iy = from < 0 ? 0 : from; iy < to; iy++)
            expand_row(r, r->src + (n * x->H + iy) * x->W * x->C, ring + iy % x->KH * row + x->pl * E);
        if (to > next) next = to;
        const float *rp[XDW_MAX_KERNEL];
        for (int64_t kh = 0; kh < x->KH; kh++) {
            int64_t iy = iy0 + kh;
            rp[kh] = iy >= 0 && iy < x->H ? ring + iy % x->KH * row : x->zero;
        }
        int64_t o = (n * x->OH + oy) * x->OW * E;
        dw_row(r, rp, r->dst + o, r->res ? r->res + o : NULL);
    }
    return KN_OK;
}

int kn_xdw_exec(const kn_xdw *x, const float *src, const float *b1, const float *b2, float *dst,
                const float *residual, int threads)
{
    if (x->has_sum && !residual)
        return kn_error(KN_ERR_INVALID, "1x1 + depthwise convolution: the sum post-op has no input");
    xdw_run r = {.x = x,
                 .src = src,
                 .b1 = x->b1 ? x->b1 : x->has_b1 ? b1 : NULL,
                 .b2 = x->b2 ? x->b2 : x->has_b2 ? b2 : NULL,
                 .res = x->has_sum ? residual : NULL,
                 .dst = dst};
    if ((x->has_b1 && !r.b1) || (x->has_b2 && !r.b2))
        return kn_error(KN_ERR_INVALID, "1x1 + depthwise convolution: no bias given");
    if (threads > x->slots) threads = x->slots;
    int64_t rows = x->N * x->OH;
    r.units = threads > 1 && rows < (int64_t)threads * 4 * XDW_CHUNK_ROWS ? threads : rows;
    return kn_rt_parallel_for_threads(threads, xdw_chunk, &r, r.units);
}

#else

int kn_xdw_exec(const kn_xdw *x, const float *src, const float *b1, const float *b2, float *dst,
                const float *residual, int threads)
{
    (void)x, (void)src, (void)b1, (void)b2, (void)dst, (void)residual, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "1x1 + depthwise convolution: needs an x86-64 CPU with AVX-512");
}

#endif
