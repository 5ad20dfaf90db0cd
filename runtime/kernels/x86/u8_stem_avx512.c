/*
 * runtime/kernels/x86/u8_stem_avx512.c — an int8 network's first
 * convolution: u8 input of 1-4 channels in plain NCHW (the quantized
 * image, as the compiler leaves a model's input), s8 weights, 16-64 output
 * channels requantized to u8 or s8 in NHWC, windows up to 7x7, stride 1
 * or 2, on AVX-512 VNNI.
 *
 * One window row of one channel is KW consecutive bytes of an input row,
 * so VPDPBUSD takes it as ceil(KW / 4) dwords broadcast straight from the
 * input (1 for a 3x3 window, 2 for 7x7), each against a filter vector of
 * 16 output channels by the same 4 taps (the bytes past KW have zero
 * weights). oneDNN's jit_int8 kernel ran MobileNetV2-qdq's stem (3 -> 32,
 * 3x3, stride 2, 224x224) at 0.14 ms on one thread of the AMX Xeon, 6% of
 * the model on two. A block holds up to 24/V output pixels of a row (V
 * vectors of 16 output channels each); a pixel whose window, or its last
 * dword, reaches past the left or right edge of its row gathers its window
 * rows into patches padded with the input's zero point, and rows outside
 * the image read a row of zero-point bytes, so that the zero point's share
 * of the sum is the same constant everywhere (-zx sum(w) per channel, as
 * in u8_dw3x3_avx512.c). Requantization is float on 256-bit halves, as
 * there, in oneDNN's order: y = sat(round((float(acc - zx sum(w)) + bias)
 * scale + zy)), then the post-ops' clamp. (The depthwise kernel's single
 * multiply-add, scale acc + offset, left 323 of MobileNetV2-qdq's 1000
 * logits 1-2 steps from the all-oneDNN run's here, the first layer's
 * roundings carried through the network; in this order they are the same
 * bits.)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "rt_internal.h"

enum { Q_STEM_ACC = 24, Q_STEM_MAX_C = 4, Q_STEM_MAX_K = 7, Q_STEM_ROW = 8 };

struct kn_qstem {
    int64_t N, C, H, W, O, KH, KW, sh, sw, pt, pl, OH, OW;
    int V, D;               /* O / 16; dwords per window row of a channel */
    bool s8_out;
    uint8_t zx;
    int8_t lo, hi;          /* the post-ops' clamp in output bytes */
    int8_t *w;              /* [C][KH][D][V][16 lanes x 4 bytes] */
    int32_t *comp;          /* [O]: -zx sum(w), the zero point's share */
    float *bias, *scale;    /* [O] */
    float zy;
    uint8_t *pad;           /* W + 8 bytes of zx: the rows outside the image */
};

bool kn_qstem_supported(const kn_abi_dnnl *rec)
{
    if (!kn_q8_record_ok(rec) || rec->groups != 1) return false;
    int64_t C = rec->src.dims[1], O = rec->wei.dims[0], KH = rec->wei.dims[2], KW = rec->wei.dims[3];
    if (C < 1 || C > Q_STEM_MAX_C || rec->wei.dims[1] != C || O % 16 || O > 64 || KH > Q_STEM_MAX_K ||
        KW > Q_STEM_MAX_K || rec->wei.nbytes != O * C * KH * KW)
        return false;
    for (int i = 0; i < 2; i++) {
        int64_t k = i ? KW : KH, in = rec->src.dims[2 + i], s = rec->strides[i];
        int64_t pb = rec->pads_begin[i], pe = rec->pads_end[i];
        if ((s != 1 && s != 2) || rec->dilations[i] != 1 || pb < 0 || pb >= k || pe < 0 || pe >= k ||
            in + pb + pe < k || rec->dst.dims[2 + i] != (in + pb + pe - k) / s + 1)
            return false;
    }
    return true;
}

void kn_qstem_free(kn_qstem *k)
{
    if (!k) return;
    kn_big_free(k->w);
    kn_big_free(k->comp);
    kn_big_free(k->bias);
    kn_big_free(k->scale);
    kn_big_free(k->pad);
    free(k);
}

int kn_qstem_create(const kn_abi_dnnl *rec, const int8_t *w, const float *bias, const float *scales, kn_qstem **out)
{
    *out = NULL;
    if (!kn_qstem_supported(rec))
        return kn_error(KN_ERR_UNSUPPORTED, "int8 stem convolution: not one the AVX-512 VNNI kernel runs");
    if (!w || !scales) return kn_error(KN_ERR_INVALID, "int8 stem convolution: no weights or scales were given");
    kn_qstem *k = calloc(1, sizeof *k);
    if (!k) return kn_error(KN_ERR_NOMEM, "out of memory");
    k->N = rec->src.dims[0], k->C = rec->src.dims[1], k->H = rec->src.dims[2], k->W = rec->src.dims[3];
    k->O = rec->wei.dims[0], k->KH = rec->wei.dims[2], k->KW = rec->wei.dims[3];
    k->sh = rec->strides[0], k->sw = rec->strides[1], k->pt = rec->pads_begin[0], k->pl = rec->pads_begin[1];
    k->OH = rec->dst.dims[2], k->OW = rec->dst.dims[3];
    k->V = (int)(k->O / 16), k->D = (int)((k->KW + 3) / 4);
    k->s8_out = rec->dst.dtype == KN_I8;
    k->zx = (uint8_t)rec->src_zp;
    size_t nw = (size_t)(k->C * k->KH * k->D * k->O * 4);
    k->w = kn_big_alloc(nw);
    k->comp = kn_big_alloc((size_t)k->O * sizeof(int32_t));
    k->bias = kn_big_alloc((size_t)k->O * sizeof(float));
    k->scale = kn_big_alloc((size_t)k->O * sizeof(float));
    k->pad = kn_big_alloc((size_t)(k->W + Q_STEM_ROW));
    if (!k->w || !k->comp || !k->bias || !k->scale || !k->pad) {
        kn_qstem_free(k);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    memset(k->pad, k->zx, (size_t)(k->W + Q_STEM_ROW));
    memset(k->w, 0, nw);
    int64_t taps = k->C * k->KH * k->KW;
    for (int64_t o = 0; o < k->O; o++) {
        const int8_t *f = w + o * taps; /* [C][KH][KW] */
        int64_t sum = 0;
        for (int64_t t = 0; t < taps; t++) sum += f[t];
        /* [C][KH][D][V][16][4]: byte b of dword d in window row (c, kh) is tap kw = 4 d + b */
        for (int64_t ckh = 0; ckh < k->C * k->KH; ckh++)
            for (int64_t kw = 0; kw < k->KW; kw++)
                k->w[(((ckh * k->D + kw / 4) * k->V + o / 16) * 16 + o % 16) * 4 + kw % 4] = f[ckh * k->KW + kw];
        double sc = scales[rec->n_scale == 1 ? 0 : o], bi = bias ? bias[o] : 0.0;
        double off = sc * (bi - (double)k->zx * (double)sum) + rec->dst_zp;
        /* a sum (at most taps x 255 x 128) that leaves int32 once scaled
         * would convert to INT_MIN: such a layer is oneDNN's */
        if (!isfinite(sc) || !isfinite(off) || fabs(sc) * (double)taps * 255 * 128 + fabs(off) >= 2e9) {
            kn_qstem_free(k);
            return kn_error(KN_ERR_UNSUPPORTED, "int8 stem convolution: channel %lld: scale %g, bias %g",
                            (long long)o, sc, bi);
        }
        k->comp[o] = (int32_t)(-(int64_t)k->zx * sum);
        k->bias[o] = bias ? bias[o] : 0.f, k->scale[o] = (float)sc;
    }
    k->zy = (float)rec->dst_zp;
    kn_q8_byte_clamp(rec, &k->lo, &k->hi);
    *out = k;
    return KN_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#define KN_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx512vl,avx2,fma")))

typedef struct qstem_run {
    const kn_qstem *k;
    const uint8_t *src;
    uint8_t *dst;
    int64_t parts;
} qstem_run;

/* Requantizes P pixels' V vectors and stores them at out (O bytes apart). */
KN_TARGET_VNNI static inline __attribute__((always_inline)) void qstem_store(const kn_qstem *k, const int V,
                                                                            const int P, const __m512i *acc,
                                                                            uint8_t *out)
{
    __m128i lo = _mm_set1_epi8((char)k->lo), hi = _mm_set1_epi8((char)k->hi);
#pragma GCC unroll 24
    for (int i = 0; i < P * V; i++) {
        int v = i % V;
        const float *sc = k->scale + 16 * v, *bi = k->bias + 16 * v;
        __m512i a = _mm512_add_epi32(acc[i], _mm512_loadu_si512(k->comp + 16 * v));
        __m256 zy = _mm256_set1_ps(k->zy);
        /* float on 256-bit halves (u8_dw3x3_avx512.c says why) */
        __m256 f0 = _mm256_cvtepi32_ps(_mm512_castsi512_si256(a));
        __m256 f1 = _mm256_cvtepi32_ps(_mm512_extracti64x4_epi64(a, 1));
        f0 = _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(f0, _mm256_loadu_ps(bi)), _mm256_loadu_ps(sc)), zy);
        f1 = _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(f1, _mm256_loadu_ps(bi + 8)), _mm256_loadu_ps(sc + 8)), zy);
        __m512i r = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_cvtps_epi32(f0)), _mm256_cvtps_epi32(f1), 1);
        __m128i y;
        if (k->s8_out)
            y = _mm_min_epi8(_mm_max_epi8(_mm512_cvtsepi32_epi8(r), lo), hi);
        else
            y = _mm_min_epu8(_mm_max_epu8(_mm512_cvtusepi32_epi8(_mm512_max_epi32(r, _mm512_setzero_si512())), lo),
                             hi);
        _mm_storeu_si128((__m128i *)(out + (i / V) * k->O + 16 * v), y);
    }
}

/* P output pixels into out, the first one's window starting at column x0
 * (stride S): rows[c KH + kh] is window row kh's input row of channel c
 * (the zero-point row outside the image); every pixel's window lies inside
 * its row with room for the last dword. */
KN_TARGET_VNNI static inline __attribute__((always_inline)) void qstem_block(const kn_qstem *k, const int V,
                                                                            const int P, const int S,
                                                                            const uint8_t *const *rows, int64_t x0,
                                                                            uint8_t *out)
{
    __m512i acc[Q_STEM_ACC];
#pragma GCC unroll 24
    for (int i = 0; i < P * V; i++) acc[i] = _mm512_setzero_si512();
    const __m512i *wt = (const __m512i *)k->w;
    for (int64_t ckh = 0; ckh < k->C * k->KH; ckh++) {
        const uint8_t *row = rows[ckh] + x0;
        for (int d = 0; d < k->D; d++, wt += V) {
            const uint8_t *x = row + 4 * d;
            __asm__("" : "+r"(x)); /* as f32_stem_avx512.c: no scalar reuse across dwords */
            __m512i w[4];
#pragma GCC unroll 4
            for (int v = 0; v < V; v++) w[v] = _mm512_load_si512(wt + v);
#pragma GCC unroll 24
            for (int p = 0; p < P; p++) {
                int32_t dw;
                memcpy(&dw, x + p * S, 4);
                __m512i b = _mm512_set1_epi32(dw);
#pragma GCC unroll 4
                for (int v = 0; v < V; v++) acc[p * V + v] = _mm512_dpbusd_epi32(acc[p * V + v], b, w[v]);
            }
        }
    }
    qstem_store(k, V, P, acc, out);
}

/* One pixel whose window, or its last dword, reaches past its row's ends:
 * its window rows gathered into zero-point-padded patches. */
KN_TARGET_VNNI static inline __attribute__((always_inline)) void qstem_edge(const kn_qstem *k, const int V,
                                                                           const uint8_t *const *rows, int64_t ox,
                                                                           uint8_t *out)
{
    uint8_t patch[Q_STEM_MAX_C * Q_STEM_MAX_K][Q_STEM_ROW];
    memset(patch, k->zx, sizeof patch);
    int64_t x0 = ox * k->sw - k->pl;
    const uint8_t *prow[Q_STEM_MAX_C * Q_STEM_MAX_K];
    for (int64_t ckh = 0; ckh < k->C * k->KH; ckh++) {
        for (int64_t kw = 0; kw < k->KW; kw++)
            if (x0 + kw >= 0 && x0 + kw < k->W) patch[ckh][kw] = rows[ckh][x0 + kw];
        prow[ckh] = patch[ckh];
    }
    qstem_block(k, V, 1, 1, prow, 0, out + ox * k->O); /* the patches start at the window */
}

KN_TARGET_VNNI static inline __attribute__((always_inline)) void qstem_row(const qstem_run *r, const int V,
                                                                          const int S, int64_t n, int64_t oy)
{
    const kn_qstem *k = r->k;
    const int PB = Q_STEM_ACC / V;
    const uint8_t *rows[Q_STEM_MAX_C * Q_STEM_MAX_K];
    int64_t iy0 = oy * k->sh - k->pt;
    for (int64_t c = 0; c < k->C; c++)
        for (int64_t kh = 0; kh < k->KH; kh++) {
            int64_t iy = iy0 + kh;
            rows[c * k->KH + kh] = iy >= 0 && iy < k->H ? r->src + ((n * k->C + c) * k->H + iy) * k->W : k->pad;
        }
    uint8_t *out = r->dst + (n * k->OH + oy) * k->OW * k->O;
    /* the pixels whose windows, and last dwords, lie inside the row: [a, b) */
    int64_t lim = k->W - 4 * k->D + k->pl;
    int64_t a = (k->pl + S - 1) / S, b = lim < 0 ? 0 : lim / S + 1;
    if (b > k->OW) b = k->OW;
    if (a > b) a = b;
    int64_t ox = 0;
    for (; ox < a; ox++) qstem_edge(k, V, rows, ox, out);
#define QSTEM_BLOCK(P) qstem_block(k, V, P, S, rows, ox * S - k->pl, out + ox * k->O)
    KN_ROW_BLOCKS(PB, ox, b, QSTEM_BLOCK);
#undef QSTEM_BLOCK
    for (; ox < k->OW; ox++) qstem_edge(k, V, rows, ox, out);
}

KN_TARGET_VNNI static int qstem_chunk(void *args, int64_t lo, int64_t hi)
{
    const qstem_run *r = args;
    const kn_qstem *k = r->k;
    int64_t all = k->N * k->OH;
    lo = lo * all / r->parts, hi = hi * all / r->parts;
    for (int64_t u = lo; u < hi; u++) {
        int64_t n = u / k->OH, oy = u % k->OH;
        switch (k->V * 2 + (int)k->sw - 1) {
        case 2: qstem_row(r, 1, 1, n, oy); break;
        case 3: qstem_row(r, 1, 2, n, oy); break;
        case 4: qstem_row(r, 2, 1, n, oy); break;
        case 5: qstem_row(r, 2, 2, n, oy); break;
        case 6: qstem_row(r, 3, 1, n, oy); break;
        case 7: qstem_row(r, 3, 2, n, oy); break;
        case 8: qstem_row(r, 4, 1, n, oy); break;
        default: qstem_row(r, 4, 2, n, oy); break;
        }
    }
    return KN_OK;
}

int kn_qstem_exec(const kn_qstem *k, const uint8_t *src, uint8_t *dst, int threads)
{
    qstem_run r = {.k = k, .src = src, .dst = dst, .parts = kn_row_bands(k->N * k->OH, threads)};
    return kn_rt_parallel_for_threads(threads, qstem_chunk, &r, r.parts);
}

#else

int kn_qstem_exec(const kn_qstem *k, const uint8_t *src, uint8_t *dst, int threads)
{
    (void)k, (void)src, (void)dst, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "int8 stem convolution: needs an x86-64 CPU with AVX-512 VNNI");
}

#endif
