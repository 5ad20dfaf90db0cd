/*
 * runtime/src/winograd.c — 3x3, stride-1 convolutions by Winograd's minimal
 * filtering algorithm F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2016), for AVX2+FMA CPUs, where oneDNN
 * has no Winograd kernel (its own needs AVX-512).
 *
 * Each 4x4 block ("tile") of the output is computed from a 6x6 block of the
 * input: with d the input block, g the 3x3 filter and the constant matrices
 * B, G and A below,
 *
 *     Y = A^T [ (G g G^T) (.) (B^T d B) ] A        ((.): elementwise)
 *
 * and summing over input channels turns the elementwise products into 36
 * independent matrix products, one per position a of the 6x6 block:
 *
 *     M[a] (tiles x O) = V[a] (tiles x C) . U[a] (C x O)
 *
 * 36 * C * O multiply-adds per 16 outputs instead of 16 * 9 * C * O: 4x
 * fewer (less where the tiles overhang the image). U is the transformed
 * filter, computed once at creation (36/9 = 4x the filter's bytes).
 *
 * A run has three phases, each a parallel loop on the session's threads:
 *  1. input transform: V[a][t][c] = (B^T d B)[a] for each tile t and
 *     channel c (8 channels at a time: the nChw8c blocks of oneDNN's AVX2
 *     layout, which is what src and dst are in);
 *  2. the 36 products, by a 6x16 register-blocked FMA kernel;
 *  3. output transform A^T m A, then bias, the post-ops (ReLU, leaky ReLU,
 *     clip, residual sum, in the record's order) and the store into dst.
 *
 * Accuracy: the transforms use the points 0, +-1, +-2 (the usual choice);
 * the error is a few float ulps of the larger terms, about 1e-6 relative on
 * ResNet-style layers, where direct convolution gives about 1e-7.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WINO_X86 1
#define AVX2 __attribute__((target("avx2,fma")))
#else
#define WINO_X86 0
#endif

enum { ALPHA = 6, NPOS = ALPHA * ALPHA, TILE = 4, ROWS = 6, COLS = 16 };

struct kn_wino {
    int64_t N, C, O, H, W;
    int64_t th, tw, T;   /* tiles down, across, in all (N * th * tw) */
    float *U;            /* [NPOS][O/16][C][16] */
    const float *bias;   /* [O], constant (or NULL: per run, or none) */
    bool has_bias;
    int n_post;
    kn_abi_post post[4];
};

/* Whether rec is a convolution this file runs (layouts are the caller's
 * business: src, dst and residual must be nChw8c). */
bool kn_wino_supported(const kn_abi_dnnl *rec, int64_t min_tiles)
{
#if WINO_X86
    uint64_t need = KN_CPU_AVX2 | KN_CPU_FMA;
    if ((kn_cpu_features() & need) != need) return false;
    if (rec->kind != KN_DNNL_CONV || rec->spatial != 2 || rec->groups != 1) return false;
    if (rec->src.rank != 4 || rec->wei.rank != 4 || rec->dst.rank != 4) return false;
    if (rec->wei.dims[2] != 3 || rec->wei.dims[3] != 3) return false;
    for (int i = 0; i < 2; i++)
        if (rec->strides[i] != 1 || rec->dilations[i] != 1 || rec->pads_begin[i] != 1 || rec->pads_end[i] != 1)
            return false;
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0], H = rec->src.dims[2],
            W = rec->src.dims[3];
    if (C % 8 || O % COLS || rec->wei.dims[1] != C || rec->dst.dims[1] != O || rec->dst.dims[0] != N ||
        rec->dst.dims[2] != H || rec->dst.dims[3] != W)
        return false;
    if (rec->wei_ref.loc != KN_LOC_WEIGHTS) return false;
    for (int i = 0; i < rec->n_post; i++) {
        int k = rec->post[i].kind;
        if (k != KN_POST_NONE && k != KN_POST_RELU && k != KN_POST_LEAKY_RELU && k != KN_POST_CLIP &&
            k != KN_POST_SUM)
            return false;
    }
    int64_t tiles = N * ((H + TILE - 1) / TILE) * ((W + TILE - 1) / TILE);
    return tiles >= min_tiles;
#else
    (void)rec, (void)min_tiles;
    return false;
#endif
}

size_t kn_wino_scratch_bytes(const kn_wino *w)
{
    return (size_t)NPOS * (size_t)w->T * (size_t)(w->C + w->O) * sizeof(float);
}

/* U[a] = G g G^T for every (o, c), in double, stored [a][o/16][c][o%16]. */
static void transform_filter(const float *g, int64_t O, int64_t C, float *U)
{
    static const double G[ALPHA][3] = {
        {1.0 / 4, 0, 0},
        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
        {1.0 / 24, 1.0 / 12, 1.0 / 6},
        {1.0 / 24, -1.0 / 12, 1.0 / 6},
        {0, 0, 1},
    };
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++) {
            const float *k = g + (o * C + c) * 9;
            double t[ALPHA][3]; /* G g */
            for (int i = 0; i < ALPHA; i++)
                for (int j = 0; j < 3; j++) t[i][j] = G[i][0] * k[j] + G[i][1] * k[3 + j] + G[i][2] * k[6 + j];
            for (int i = 0; i < ALPHA; i++)
                for (int j = 0; j < ALPHA; j++) {
                    double u = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
                    U[(((int64_t)(i * ALPHA + j) * (O / COLS) + o / COLS) * C + c) * COLS + o % COLS] = (float)u;
                }
        }
}

int kn_wino_create(const kn_abi_dnnl *rec, const unsigned char *weights, kn_wino **out)
{
    *out = NULL;
    if (!kn_wino_supported(rec, 1)) return kn_error(KN_ERR_UNSUPPORTED, "Winograd: not a 3x3 stride-1 convolution");
    kn_wino *w = calloc(1, sizeof *w);
    if (!w) return kn_error(KN_ERR_NOMEM, "out of memory");
    w->N = rec->src.dims[0], w->C = rec->src.dims[1], w->O = rec->wei.dims[0];
    w->H = rec->src.dims[2], w->W = rec->src.dims[3];
    w->th = (w->H + TILE - 1) / TILE, w->tw = (w->W + TILE - 1) / TILE;
    w->T = w->N * w->th * w->tw;
    w->n_post = rec->n_post;
    memcpy(w->post, rec->post, sizeof w->post);
    int64_t wbytes = w->O * w->C * 9 * (int64_t)sizeof(float);
    if (rec->wei_ref.offset < 0 || rec->wei.nbytes != wbytes) {
        free(w);
        return kn_error(KN_ERR_INVALID, "Winograd: weights of %lld bytes, expected %lld", (long long)rec->wei.nbytes,
                        (long long)wbytes);
    }
    size_t ubytes = (size_t)NPOS * (size_t)w->O * (size_t)w->C * sizeof(float);
    if (posix_memalign((void **)&w->U, 64, ubytes)) {
        free(w);
        return kn_error(KN_ERR_NOMEM, "out of memory for %zu bytes of Winograd filters", ubytes);
    }
    transform_filter((const float *)(weights + rec->wei_ref.offset), w->O, w->C, w->U);
    w->has_bias = !(rec->bias.rank == 0 && rec->bias.nbytes == 0);
    if (w->has_bias && rec->bias_ref.loc == KN_LOC_WEIGHTS) w->bias = (const float *)(weights + rec->bias_ref.offset);
    *out = w;
    return KN_OK;
}

void kn_wino_free(kn_wino *w)
{
    if (!w) return;
    free(w->U);
    free(w);
}

#if WINO_X86

/* One run's pointers, shared by the phases' chunks. */
typedef struct wino_run {
    const kn_wino *w;
    const float *src, *bias, *res;
    float *dst, *V, *M;
} wino_run;

/* Phase 1 for tiles x 8-channel blocks [lo, hi): V[a][t][c..c+8]. */
AVX2 static int input_chunk(void *args, int64_t lo, int64_t hi)
{
    const wino_run *r = args;
    const kn_wino *w = r->w;
    int64_t cb = w->C / 8, plane = w->H * w->W * 8, pos_stride = w->T * w->C;
    for (int64_t it = lo; it < hi; it++) {
        int64_t t = it / cb, b = it % cb;
        int64_t n = t / (w->th * w->tw), ty = t / w->tw % w->th, tx = t % w->tw;
        const float *img = r->src + (n * cb + b) * plane;
        __m256 d[ALPHA][ALPHA];
        int64_t y0 = ty * TILE - 1, x0 = tx * TILE - 1;
        for (int i = 0; i < ALPHA; i++) {
            int64_t y = y0 + i;
            for (int j = 0; j < ALPHA; j++) {
                int64_t x = x0 + j;
                d[i][j] = (y >= 0 && y < w->H && x >= 0 && x < w->W) ? _mm256_load_ps(img + (y * w->W + x) * 8)
                                                                      : _mm256_setzero_ps();
            }
        }
        /* B^T d, then (B^T d) B, the same 1-D transform on rows then columns */
        const __m256 k2 = _mm256_set1_ps(2.f), k4 = _mm256_set1_ps(4.f), k5 = _mm256_set1_ps(5.f);
        __m256 e[ALPHA][ALPHA];
#define BT(x0, x1, x2, x3, x4, x5, y0, y1, y2, y3, y4, y5)                                                          \
    do {                                                                                                           \
        y0 = _mm256_add_ps(_mm256_fnmadd_ps(k5, x2, _mm256_mul_ps(k4, x0)), x4);                                   \
        __m256 a_ = _mm256_fnmadd_ps(k4, x2, x4), b_ = _mm256_fnmadd_ps(k4, x1, x3);                               \
        y1 = _mm256_add_ps(a_, b_);                                                                                \
        y2 = _mm256_sub_ps(a_, b_);                                                                                \
        __m256 c_ = _mm256_sub_ps(x4, x2), d_ = _mm256_mul_ps(k2, _mm256_sub_ps(x3, x1));                          \
        y3 = _mm256_add_ps(c_, d_);                                                                                \
        y4 = _mm256_sub_ps(c_, d_);                                                                                \
        y5 = _mm256_add_ps(_mm256_fnmadd_ps(k5, x3, _mm256_mul_ps(k4, x1)), x5);                                   \
    } while (0)
        for (int j = 0; j < ALPHA; j++)
            BT(d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j], e[0][j], e[1][j], e[2][j], e[3][j], e[4][j],
               e[5][j]);
        float *v = r->V + t * w->C + b * 8;
        for (int i = 0; i < ALPHA; i++) {
            __m256 f[ALPHA];
            BT(e[i][0], e[i][1], e[i][2], e[i][3], e[i][4], e[i][5], f[0], f[1], f[2], f[3], f[4], f[5]);
            for (int j = 0; j < ALPHA; j++) _mm256_storeu_ps(v + (i * ALPHA + j) * pos_stride, f[j]);
        }
#undef BT
    }
    return KN_OK;
}

/* c[r][0..16] = sum_k a[r][k] * b[k][0..16] for r < rows (a: up to 6 rows
 * of V, b: a 16-column panel of U). */
AVX2 static void gemm_6x16(const float *const a[ROWS], const float *b, int64_t K, float *const c[ROWS], int rows)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t k = 0; k < K; k++, b += COLS) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), x;
        x = _mm256_broadcast_ss(a0 + k), c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a1 + k), c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a2 + k), c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a3 + k), c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a4 + k), c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a5 + k), c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
    }
    __m256 acc[ROWS][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int i = 0; i < rows; i++) {
        _mm256_storeu_ps(c[i], acc[i][0]);
        _mm256_storeu_ps(c[i] + 8, acc[i][1]);
    }
}

/* Phase 2 for (position, 16-column panel) pairs [lo, hi). */
AVX2 static int gemm_chunk(void *args, int64_t lo, int64_t hi)
{
    const wino_run *r = args;
    const kn_wino *w = r->w;
    int64_t panels = w->O / COLS;
    for (int64_t it = lo; it < hi; it++) {
        int64_t a = it / panels, p = it % panels;
        const float *V = r->V + a * w->T * w->C, *B = w->U + (a * panels + p) * w->C * COLS;
        float *M = r->M + a * w->T * w->O + p * COLS;
        for (int64_t t0 = 0; t0 < w->T; t0 += ROWS) {
            int rows = w->T - t0 < ROWS ? (int)(w->T - t0) : ROWS;
            const float *ap[ROWS];
            float *cp[ROWS];
            for (int i = 0; i < ROWS; i++) {
                int64_t t = t0 + (i < rows ? i : 0); /* rows past the end repeat row 0, unstored */
                ap[i] = V + t * w->C;
                cp[i] = M + t * w->O;
            }
            gemm_6x16(ap, B, w->C, cp, rows);
        }
    }
    return KN_OK;
}

/* The record's post-ops on one vector (sum: + the residual at the same place). */
AVX2 static __m256 apply_posts(const kn_wino *w, __m256 x, const float *res)
{
    for (int i = 0; i < w->n_post; i++) {
        const kn_abi_post *p = &w->post[i];
        switch (p->kind) {
        case KN_POST_RELU: x = _mm256_max_ps(x, _mm256_setzero_ps()); break;
        case KN_POST_LEAKY_RELU: {
            __m256 neg = _mm256_mul_ps(x, _mm256_set1_ps(p->alpha));
            x = _mm256_blendv_ps(x, neg, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
            break;
        }
        case KN_POST_CLIP:
            x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(p->alpha)), _mm256_set1_ps(p->beta));
            break;
        case KN_POST_SUM: x = _mm256_add_ps(x, _mm256_loadu_ps(res)); break;
        default: break;
        }
    }
    return x;
}

/* Phase 3 for tiles x 8-channel output blocks [lo, hi). */
AVX2 static int output_chunk(void *args, int64_t lo, int64_t hi)
{
    const wino_run *r = args;
    const kn_wino *w = r->w;
    int64_t ob = w->O / 8, plane = w->H * w->W * 8, pos_stride = w->T * w->O;
    const __m256 k2 = _mm256_set1_ps(2.f), k4 = _mm256_set1_ps(4.f), k8 = _mm256_set1_ps(8.f);
    for (int64_t it = lo; it < hi; it++) {
        int64_t t = it / ob, b = it % ob;
        int64_t n = t / (w->th * w->tw), ty = t / w->tw % w->th, tx = t % w->tw;
        const float *m = r->M + t * w->O + b * 8;
        __m256 e[TILE][ALPHA];
        /* A^T m (over rows), then (A^T m) A (over columns) */
#define AT(x0, x1, x2, x3, x4, x5, y0, y1, y2, y3)                                                                  \
    do {                                                                                                           \
        __m256 s12 = _mm256_add_ps(x1, x2), d12 = _mm256_sub_ps(x1, x2);                                           \
        __m256 s34 = _mm256_add_ps(x3, x4), d34 = _mm256_sub_ps(x3, x4);                                           \
        y0 = _mm256_add_ps(_mm256_add_ps(x0, s12), s34);                                                           \
        y1 = _mm256_fmadd_ps(k2, d34, d12);                                                                        \
        y2 = _mm256_fmadd_ps(k4, s34, s12);                                                                        \
        y3 = _mm256_add_ps(_mm256_fmadd_ps(k8, d34, d12), x5);                                                     \
    } while (0)
        for (int j = 0; j < ALPHA; j++) {
            __m256 x[ALPHA];
            for (int i = 0; i < ALPHA; i++) x[i] = _mm256_loadu_ps(m + (i * ALPHA + j) * pos_stride);
            AT(x[0], x[1], x[2], x[3], x[4], x[5], e[0][j], e[1][j], e[2][j], e[3][j]);
        }
        __m256 bias = r->bias ? _mm256_loadu_ps(r->bias + b * 8) : _mm256_setzero_ps();
        int64_t off0 = (n * ob + b) * plane;
        float *out = r->dst + off0;
        const float *res = r->res ? r->res + off0 : NULL;
        for (int i = 0; i < TILE; i++) {
            __m256 y[TILE];
            AT(e[i][0], e[i][1], e[i][2], e[i][3], e[i][4], e[i][5], y[0], y[1], y[2], y[3]);
            int64_t oy = ty * TILE + i;
            if (oy >= w->H) break;
            for (int j = 0; j < TILE; j++) {
                int64_t ox = tx * TILE + j;
                if (ox >= w->W) break;
                int64_t off = (oy * w->W + ox) * 8;
                __m256 v = apply_posts(w, _mm256_add_ps(y[j], bias), res ? res + off : NULL);
                _mm256_store_ps(out + off, v);
            }
        }
#undef AT
    }
    return KN_OK;
}

int kn_wino_exec(const kn_wino *w, const float *src, const float *bias, float *dst, const float *residual,
                 float *scratch, int threads)
{
    bool has_sum = false;
    for (int i = 0; i < w->n_post; i++) has_sum |= w->post[i].kind == KN_POST_SUM;
    if (has_sum && !residual) return kn_error(KN_ERR_INVALID, "Winograd: the sum post-op has no input");
    wino_run r = {.w = w,
                  .src = src,
                  .bias = w->bias ? w->bias : w->has_bias ? bias : NULL,
                  .res = has_sum ? residual : NULL,
                  .dst = dst,
                  .V = scratch,
                  .M = scratch + NPOS * w->T * w->C};
    if (w->has_bias && !r.bias) return kn_error(KN_ERR_INVALID, "Winograd: no bias given");
    int st = kn_rt_parallel_for_threads(threads, input_chunk, &r, w->T * (w->C / 8));
    if (!st) st = kn_rt_parallel_for_threads(threads, gemm_chunk, &r, NPOS * (w->O / COLS));
    if (!st) st = kn_rt_parallel_for_threads(threads, output_chunk, &r, w->T * (w->O / 8));
    return st;
}

#else

int kn_wino_exec(const kn_wino *w, const float *src, const float *bias, float *dst, const float *residual,
                 float *scratch, int threads)
{
    (void)w, (void)src, (void)bias, (void)dst, (void)residual, (void)scratch, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "Winograd: needs an x86-64 CPU with AVX2 and FMA");
}

#endif
