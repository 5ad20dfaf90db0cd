/*
 * runtime/kernels/x86/f32_stem_avx512.c — a network's first convolution:
 * few input channels (1 to 4: an image) in plain NCHW, 16 to 64 output
 * channels in NHWC, any window up to 7x7, stride 1 or 2, on AVX-512.
 *
 * oneDNN's kernels block over input channels; with 3 of them its brgconv
 * ran MobileNetV2's stem (3 -> 32, 3x3, stride 2, 224x224) at 92 GFLOP/s
 * and YOLOv8n's and DBNet's (3 -> 16 at 640x640) at 27-37 GFLOP/s on one
 * thread of a 220 GFLOP/s Xeon: 4-5% of each model. Here the output
 * channels are the vector lanes (one to four 16-channel vectors, V) and a
 * block holds P output pixels of a row (P V accumulators, 24 at most); each
 * tap (c, kh, kw) loads its V filter vectors once and multiplies them by
 * the P pixels' inputs, broadcast straight from the NCHW rows. Pixels whose
 * window reaches past the left or right edge run one at a time, skipping
 * the taps outside; rows outside the image are skipped for the whole row.
 * Bias starts the accumulators; the post-ops are the 1x1 kernel's epilogue
 * (a clamp in registers, or kn_gemm512_posts).
 *
 * Work: the N x OH output rows in one band per thread (up to 4 per thread
 * for large images).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "f32_gemm_avx512.h"
#include "rt_internal.h"

enum { STEM_MAX_C = 4, STEM_MAX_K = 7, STEM_ACC = 24 };

struct kn_stem {
    int64_t N, C, H, W, O, KH, KW, sh, sw, pt, pl, OH, OW;
    int V;                 /* O / 16 */
    float *w;              /* [C][KH][KW][O] */
    const float *bias;     /* constant bias, or NULL (per run, or none) */
    bool has_bias;
    kn_abi_post post[4];
    kn_gemm512_epi epi;    /* the post-ops (bias: at the accumulators' start) */
};

bool kn_stem_supported(const kn_abi_dnnl *rec)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (!(kn_cpu_features() & KN_CPU_AVX512F)) return false;
    if (rec->kind != KN_DNNL_CONV || rec->spatial != 2 || rec->groups != 1 || rec->n_scale != 0) return false;
    const kn_abi_tensor *ts[] = {&rec->src, &rec->wei, &rec->dst};
    for (int i = 0; i < 3; i++)
        if (ts[i]->rank != 4 || ts[i]->dtype != KN_F32 || !kn_abi_static_dims(ts[i])) return false;
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0];
    int64_t KH = rec->wei.dims[2], KW = rec->wei.dims[3];
    if (C < 1 || C > STEM_MAX_C || rec->wei.dims[1] != C || O % 16 || O > 64 || KH > STEM_MAX_K || KW > STEM_MAX_K)
        return false;
    if (rec->dst.dims[0] != N || rec->dst.dims[1] != O) return false;
    for (int i = 0; i < 2; i++) {
        int64_t k = i ? KW : KH, in = rec->src.dims[2 + i], s = rec->strides[i];
        int64_t pb = rec->pads_begin[i], pe = rec->pads_end[i];
        if ((s != 1 && s != 2) || rec->dilations[i] != 1 || pb < 0 || pb >= k || pe < 0 || pe >= k ||
            in + pb + pe < k || rec->dst.dims[2 + i] != (in + pb + pe - k) / s + 1)
            return false;
    }
    bool has_bias = !(rec->bias.rank == 0 && rec->bias.nbytes == 0);
    if (rec->wei_ref.loc != KN_LOC_WEIGHTS || rec->wei.nbytes != O * C * KH * KW * 4 ||
        (has_bias && (rec->bias.dtype != KN_F32 || rec->bias.nbytes != O * 4)))
        return false;
    return kn_gemm512_posts_supported(rec->post, rec->n_post, false);
#else
    (void)rec;
    return false;
#endif
}

void kn_stem_free(kn_stem *k)
{
    if (!k) return;
    kn_big_free(k->w);
    free(k);
}

int kn_stem_create(const kn_abi_dnnl *rec, const unsigned char *weights, kn_stem **out)
{
    *out = NULL;
    if (!kn_stem_supported(rec))
        return kn_error(KN_ERR_UNSUPPORTED, "stem convolution: not one the AVX-512 kernel runs");
    if (!weights) return kn_error(KN_ERR_INVALID, "stem convolution: no weights were given");
    kn_stem *k = calloc(1, sizeof *k);
    if (!k) return kn_error(KN_ERR_NOMEM, "out of memory");
    k->N = rec->src.dims[0], k->C = rec->src.dims[1], k->H = rec->src.dims[2], k->W = rec->src.dims[3];
    k->O = rec->wei.dims[0], k->KH = rec->wei.dims[2], k->KW = rec->wei.dims[3];
    k->sh = rec->strides[0], k->sw = rec->strides[1], k->pt = rec->pads_begin[0], k->pl = rec->pads_begin[1];
    k->OH = rec->dst.dims[2], k->OW = rec->dst.dims[3];
    k->V = (int)(k->O / 16);
    int64_t taps = k->C * k->KH * k->KW;
    if (!(k->w = kn_big_alloc((size_t)(taps * k->O) * sizeof(float)))) {
        kn_stem_free(k);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    /* [O][C][KH][KW] -> [C][KH][KW][O] */
    const float *g = (const float *)(weights + rec->wei_ref.offset);
    for (int64_t o = 0; o < k->O; o++)
        for (int64_t t = 0; t < taps; t++) k->w[t * k->O + o] = g[o * taps + t];
    k->has_bias = !(rec->bias.rank == 0 && rec->bias.nbytes == 0);
    if (k->has_bias && rec->bias_ref.loc == KN_LOC_WEIGHTS) k->bias = (const float *)(weights + rec->bias_ref.offset);
    memcpy(k->post, rec->post, sizeof k->post);
    k->epi = (kn_gemm512_epi){.post = k->post, .n_post = rec->n_post};
    kn_gemm512_clamp(&k->epi);
    *out = k;
    return KN_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

typedef struct stem_run {
    const kn_stem *k;
    const float *src, *bias;
    float *dst;
    int64_t parts; /* the parallel loop's units: equal bands of the N x OH rows */
} stem_run;

/* The post-ops on P pixels' V vectors, stored at out (O floats apart). */
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void stem_store(const kn_stem *k, const int V,
                                                                             const int P, __m512 *acc, float *out)
{
    if (k->epi.clamp || k->epi.n_post == 0) {
        __m512 lo = _mm512_set1_ps(k->epi.lo), hi = _mm512_set1_ps(k->epi.hi);
#pragma GCC unroll 24
        for (int i = 0; i < P * V; i++) {
            __m512 v = acc[i];
            if (k->epi.clamp) v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
            _mm512_storeu_ps(out + (i / V) * k->O + (i % V) * 16, v);
        }
        return;
    }
    /* kn_gemm512_posts takes rows of 32 floats, two vectors at most */
    float blk[STEM_ACC][2 * 16] __attribute__((aligned(64)));
    for (int h = 0; h < V; h += 2) {
        int np = V - h < 2 ? V - h : 2;
        for (int p = 0; p < P; p++)
            for (int v = 0; v < np; v++) _mm512_store_ps(blk[p] + 16 * v, acc[p * V + h + v]);
        kn_gemm512_posts(&k->epi, P, np, &blk[0][0], out + 16 * h, k->O, NULL, 0);
    }
}

/* P output pixels of a row from ox on, all of whose windows lie inside the
 * row: rows[c * KH + kh] is input row (c, iy0 + kh), or NULL outside the
 * image. */
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void stem_block(const kn_stem *k, const int V,
                                                                             const int P, const int S,
                                                                             const float *const *rows, int64_t ox,
                                                                             const float *bias, float *out)
{
    __m512 acc[STEM_ACC];
#pragma GCC unroll 24
    for (int i = 0; i < P * V; i++) acc[i] = bias ? _mm512_loadu_ps(bias + (i % V) * 16) : _mm512_setzero_ps();
    int64_t x0 = ox * S - k->pl;
    for (int64_t c = 0; c < k->C; c++)
        for (int64_t kh = 0; kh < k->KH; kh++) {
            const float *row = rows[c * k->KH + kh];
            if (!row) continue;
            const float *wt = k->w + (c * k->KH + kh) * k->KW * k->O;
            for (int64_t kw = 0; kw < k->KW; kw++, wt += k->O) {
                __m512 w[4];
#pragma GCC unroll 4
                for (int v = 0; v < V; v++) w[v] = _mm512_loadu_ps(wt + 16 * v);
                const float *x = row + x0 + kw;
                /* hide where x points: GCC otherwise keeps the inputs a tap
                 * shares with the next ones (x[p S + kw] is x[(p + 1) S +
                 * kw - S]) in scalar registers across taps, and spills
                 * them (3x slower) */
                __asm__("" : "+r"(x));
#pragma GCC unroll 24
                for (int p = 0; p < P; p++) {
                    __m512 b = _mm512_set1_ps(x[p * S]); /* S constant: one address register */
#pragma GCC unroll 4
                    for (int v = 0; v < V; v++) acc[p * V + v] = _mm512_fmadd_ps(b, w[v], acc[p * V + v]);
                }
            }
        }
    stem_store(k, V, P, acc, out + ox * k->O);
}

/* One output pixel whose window reaches past the left or right edge: the
 * taps outside are skipped (zero padding). */
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void stem_edge(const kn_stem *k, const int V,
                                                                            const float *const *rows, int64_t ox,
                                                                            const float *bias, float *out)
{
    __m512 acc[4];
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) acc[v] = bias ? _mm512_loadu_ps(bias + 16 * v) : _mm512_setzero_ps();
    int64_t x0 = ox * k->sw - k->pl;
    for (int64_t c = 0; c < k->C; c++)
        for (int64_t kh = 0; kh < k->KH; kh++) {
            const float *row = rows[c * k->KH + kh];
            if (!row) continue;
            for (int64_t kw = 0; kw < k->KW; kw++) {
                int64_t ix = x0 + kw;
                if (ix < 0 || ix >= k->W) continue;
                const float *wt = k->w + ((c * k->KH + kh) * k->KW + kw) * k->O;
                __m512 b = _mm512_set1_ps(row[ix]);
#pragma GCC unroll 4
                for (int v = 0; v < V; v++) acc[v] = _mm512_fmadd_ps(b, _mm512_loadu_ps(wt + 16 * v), acc[v]);
            }
        }
    stem_store(k, V, 1, acc, out + ox * k->O);
}

/* Output row oy of image n; S the horizontal stride. */
KN_TARGET_AVX512 static inline __attribute__((always_inline)) void stem_row(const stem_run *r, const int V,
                                                                           const int S, int64_t n, int64_t oy)
{
    const kn_stem *k = r->k;
    const int PB = STEM_ACC / V;
    const float *rows[STEM_MAX_C * STEM_MAX_K];
    int64_t iy0 = oy * k->sh - k->pt;
    for (int64_t c = 0; c < k->C; c++)
        for (int64_t kh = 0; kh < k->KH; kh++) {
            int64_t iy = iy0 + kh;
            rows[c * k->KH + kh] = iy >= 0 && iy < k->H ? r->src + ((n * k->C + c) * k->H + iy) * k->W : NULL;
        }
    float *out = r->dst + (n * k->OH + oy) * k->OW * k->O;
    /* the pixels whose windows lie inside the row: [a, b) */
    int64_t a = (k->pl + k->sw - 1) / k->sw, b = k->W - k->KW + k->pl < 0 ? 0 : (k->W - k->KW + k->pl) / k->sw + 1;
    if (b > k->OW) b = k->OW;
    if (a > b) a = b;
    for (int64_t ox = 0; ox < a; ox++) stem_edge(k, V, rows, ox, r->bias, out);
    int64_t ox = a;
#define STEM_BLOCK(P) stem_block(k, V, P, S, rows, ox, r->bias, out)
    KN_ROW_BLOCKS(PB, ox, b, STEM_BLOCK);
#undef STEM_BLOCK
    for (ox = b; ox < k->OW; ox++) stem_edge(k, V, rows, ox, r->bias, out);
}

KN_TARGET_AVX512 static int stem_chunk(void *args, int64_t lo, int64_t hi)
{
    const stem_run *r = args;
    const kn_stem *k = r->k;
    int64_t all = k->N * k->OH;
    lo = lo * all / r->parts, hi = hi * all / r->parts;
    for (int64_t u = lo; u < hi; u++) {
        int64_t n = u / k->OH, oy = u % k->OH;
        switch (k->V * 2 + (int)k->sw - 1) {
        case 2: stem_row(r, 1, 1, n, oy); break;
        case 3: stem_row(r, 1, 2, n, oy); break;
        case 4: stem_row(r, 2, 1, n, oy); break;
        case 5: stem_row(r, 2, 2, n, oy); break;
        case 6: stem_row(r, 3, 1, n, oy); break;
        case 7: stem_row(r, 3, 2, n, oy); break;
        case 8: stem_row(r, 4, 1, n, oy); break;
        default: stem_row(r, 4, 2, n, oy); break;
        }
    }
    return KN_OK;
}

int kn_stem_exec(const kn_stem *k, const float *src, const float *bias, float *dst, int threads)
{
    stem_run r = {.k = k, .src = src, .bias = k->bias ? k->bias : k->has_bias ? bias : NULL, .dst = dst};
    if (k->has_bias && !r.bias) return kn_error(KN_ERR_INVALID, "stem convolution: no bias given");
    r.parts = kn_row_bands(k->N * k->OH, threads);
    return kn_rt_parallel_for_threads(threads, stem_chunk, &r, r.parts);
}

#else

int kn_stem_exec(const kn_stem *k, const float *src, const float *bias, float *dst, int threads)
{
    (void)k, (void)src, (void)bias, (void)dst, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "stem convolution: needs an x86-64 CPU with AVX-512");
}

#endif
