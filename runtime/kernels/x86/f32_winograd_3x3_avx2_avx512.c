/*
 * runtime/kernels/x86/f32_winograd_3x3_avx2_avx512.c — 3x3, stride-1 convolutions by Winograd's minimal
 * filtering algorithm F(mxm, 3x3), m = 4 or 2 (Lavin and Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2016), for x86-64 CPUs with
 * AVX2+FMA: oneDNN 2.6 has no Winograd kernel for them, nor for AMD's
 * AVX-512 CPUs (its own runs only on Intel's AVX-512 cores).
 *
 * Each m x m block ("tile") of the output is computed from an a x a block
 * of the input, a = m + 2: with d the input block, g the 3x3 filter and the
 * constant matrices B, G and A of the variant,
 *
 *     Y = A^T [ (G g G^T) (.) (B^T d B) ] A        ((.): elementwise)
 *
 * and summing over input channels turns the elementwise products into a^2
 * independent matrix products, one per position p of the a x a block:
 *
 *     M[p] (tiles x O) = V[p] (tiles x C) . U[p] (C x O)
 *
 * F(4x4): 36 * C * O multiply-adds per 16 outputs instead of 16 * 9 * C * O,
 * 4x fewer; F(2x2): 16 per 4 outputs, 2.25x fewer. U is the transformed
 * filter, made once at creation: a^2/9 times the filter's bytes (4x for
 * F(4x4)), and at batch 1 the products are too small to reuse it much, so
 * that streaming U from memory can cost more than the multiply-adds saved.
 * kn_wino_tile weighs both per layer (see there) and picks F(4x4), F(2x2)
 * or neither (oneDNN's direct kernel).
 *
 * A run has three phases, each a parallel loop on the session's threads:
 *  1. input transform: V[p][t][c] = (B^T d B)[p] for each tile t and
 *     channel c, 8 channels at a time (an AVX2 vector), or 16 on AVX-512
 *     CPUs when the channels fill whole vectors (f32_winograd_xform.inc, written
 *     once for both widths). src and dst are in the layout oneDNN's
 *     convolutions exchange on this CPU: nChw8c (AVX2), nChw16c or NHWC
 *     (AVX-512); the layout only changes where a pixel's channels are;
 *  2. the a^2 products, by a 6x16 register-blocked FMA kernel, or on
 *     AVX-512 CPUs an (up to 8)x32 one (twice the FLOPs per instruction;
 *     f32_gemm_8x32_avx512.c, shared with f32_conv1x1_avx512.c) whose row
 *     block is sized to the tiles and which prefetches the next item's U
 *     while it computes;
 *  3. output transform A^T m A, then bias, the post-ops (ReLU, leaky ReLU, SiLU,
 *     HardSwish, clip, residual sum, in the record's order) and the store into dst.
 * On AVX-512 CPUs, a layer whose U is small (the tuning table's wino_block_max_u) runs instead in
 * blocks of tiles, each block through the three phases on one worker, its
 * V and M in that worker's L2 cache (block_chunk).
 *
 * Accuracy: F(4x4) uses the points 0, +-1, +-2 (the usual choice); its
 * error is a few float ulps of the larger terms, about 5e-6 relative on
 * ResNet-style layers, where direct convolution and F(2x2) give about 1e-7.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "fused_int.h"
#include "config.h"
#include "f32_exp_avx2.h"
#include "f32_gemm_avx512.h"
#include "rt_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WINO_X86 1
#define AVX2 __attribute__((target("avx2,fma")))
#else
#define WINO_X86 0
#endif

enum { MAX_ALPHA = 6, ROWS = 6 };

struct kn_wino {
    int m, alpha, npos;  /* output tile m x m, input block alpha x alpha, alpha^2 products */
    int blk;             /* activations' channel block: 8 or 16 (nChw8c, nChw16c), 0: NHWC */
    bool avx512;         /* the products by the AVX-512 kernel */
    bool wide;           /* the transforms by 16-lane vectors (the channels fill them) */
    int64_t N, C, O, H, W;
    int64_t th, tw, T;   /* tiles down, across, in all (N * th * tw) */
    int rows;            /* tiles per row block of the products (row_block) */
    int64_t tb;          /* tiles per block of a blocked run (0: none; see kn_wino_exec) */
    float *U;            /* [npos][O/16][C][16] */
    bool view;           /* a kn_wino_view: U is its creator's */
    const float *bias;   /* [O], constant (or NULL: per run, or none) */
    bool has_bias, has_sum;
    int n_post;
    kn_abi_post post[4];
};

bool kn_wino_supported(const kn_abi_dnnl *rec)
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
    if (N < 1 || H < 1 || W < 1 || C < 8 || C % 8 || O < KN_GEMM512_COLS || O % KN_GEMM512_COLS ||
        rec->wei.dims[1] != C || rec->dst.dims[1] != O || rec->dst.dims[0] != N || rec->dst.dims[2] != H ||
        rec->dst.dims[3] != W)
        return false;
    if (rec->wei_ref.loc != KN_LOC_WEIGHTS) return false;
    for (int i = 0; i < rec->n_post; i++) {
        int k = rec->post[i].kind;
        if (k != KN_POST_NONE && k != KN_POST_RELU && k != KN_POST_LEAKY_RELU && k != KN_POST_CLIP &&
            k != KN_POST_SUM && k != KN_POST_SWISH && k != KN_POST_HARDSWISH)
            return false;
    }
    return true;
#else
    (void)rec;
    return false;
#endif
}

/* Winograd only when it takes at most the tuning table's share of direct's
 * time (wino_min_gain); its rates (config.c) are per thread: the product
 * kernel, oneDNN's direct 3x3 kernel and the transforms' traffic scale with
 * threads; streaming U from memory does not (the cores share it), nor does
 * the direct kernel's streaming of its filter.
 *
 * A run in blocks of tiles (AVX-512): with a transformed filter this small
 * (the table's wino_block_max_u; ResNet's 64-channel layers: 590 KB), each
 * worker takes blocks of tiles through all three phases, with V and M for
 * one block (wino_block_vm_bytes) in its own part of the scratch, so that
 * they stay in its L2 cache instead of going to memory and back between
 * the phases (the rest of the model evicts them from L3 between runs).
 * ResNet-50's 56x56 layers on 2 threads: 2.0-2.2 ms instead of 3.5-3.6 at
 * batch 8, where the phases over all tiles wait on memory, and 0.21
 * instead of 0.20-0.33 ms at batch 1. A larger U would be read again for
 * every block. */

static bool cpu_avx512(void) { return (kn_cpu_features() & KN_CPU_AVX512F) != 0; }


static double max_d(double a, double b) { return a > b ? a : b; }

/* Tiles per row block of the product kernel for T tiles: the AVX2 kernel's
 * 6, or on AVX-512 gemm512's choice. */
static int row_block(int64_t T, bool avx512) { return avx512 ? kn_gemm512_row_block(T) : ROWS; }

/* Tiles per block of a blocked run, or 0 (see kn_wino_exec). */
static int64_t blocked_tiles(const kn_wino *w)
{
    const kn_tuning *t = kn_config_tuning();
    int64_t ubytes = (int64_t)w->npos * w->C * w->O * (int64_t)sizeof(float);
    if (!w->avx512 || ubytes > t->wino_block_max_u) return 0;
    int64_t tb = t->wino_block_vm_bytes / (w->npos * (w->C + w->O) * (int64_t)sizeof(float));
    return tb < KN_GEMM512_ROWS ? 0 : tb;
}

/* Estimated seconds of a run of F(m x m) on rec with `threads` threads. */
static double wino_cost(const kn_abi_dnnl *rec, const kn_wino_rates *r, int m, int threads)
{
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0], H = rec->src.dims[2],
            W = rec->src.dims[3];
    double npos = (double)(m + 2) * (m + 2);
    double T = (double)N * (double)((H + m - 1) / m) * (double)((W + m - 1) / m);
    int kr = row_block((int64_t)T, cpu_avx512());
    double rows = (double)(((int64_t)T + kr - 1) / kr * kr);
    double gemm = 2.0 * npos * rows * (double)C * (double)O / (r->gemm * threads);
    double ubytes = npos * (double)C * (double)O * 4.0;
    double xform = 2.0 * npos * T * (double)(C + O) * 4.0 / (r->xform * threads);
    return max_d(gemm, ubytes / r->u) + xform;
}

/* The better tile by the cost model, and its estimated seconds. */
static int best_tile(const kn_abi_dnnl *rec, const kn_wino_rates *r, int threads, double *cost)
{
    double c4 = wino_cost(rec, r, 4, threads), c2 = wino_cost(rec, r, 2, threads);
    *cost = c4 <= c2 ? c4 : c2;
    return c4 <= c2 ? 4 : 2;
}

int kn_wino_best_tile(const kn_abi_dnnl *rec, int threads)
{
    if (!kn_wino_supported(rec)) return 0;
    double cost;
    return best_tile(rec, &kn_config_tuning()->wino, threads < 1 ? 1 : threads, &cost);
}

int kn_wino_tile(const kn_abi_dnnl *rec, int threads)
{
    if (!kn_wino_supported(rec)) return 0;
    if (threads < 1) threads = 1;
    const kn_tuning *t = kn_config_tuning();
    const kn_wino_rates *r = &t->wino;
    double C = (double)rec->src.dims[1], O = (double)rec->wei.dims[0];
    double direct = 2.0 * 9.0 * (double)rec->src.dims[0] * C * O * (double)rec->src.dims[2] *
                    (double)rec->src.dims[3] / (r->direct * threads);
    if (r->wdirect > 0) direct += 9.0 * C * O * 4.0 / r->wdirect;
    double cost;
    int m = best_tile(rec, r, threads, &cost);
    return cost <= t->wino_min_gain * direct ? m : 0;
}

int kn_wino_tile_of(const kn_wino *w) { return w->m; }

size_t kn_wino_scratch_bytes(const kn_wino *w)
{
    return (size_t)w->npos * (size_t)w->T * (size_t)(w->C + w->O) * sizeof(float);
}

/* U[p] = G g G^T for every (o, c), in double, stored [p][o/16][c][o%16]. */
static void transform_filter(const float *g, int m, int64_t O, int64_t C, float *U)
{
    static const double G4[6][3] = {
        {1.0 / 4, 0, 0},
        {-1.0 / 6, -1.0 / 6, -1.0 / 6},
        {-1.0 / 6, 1.0 / 6, -1.0 / 6},
        {1.0 / 24, 1.0 / 12, 1.0 / 6},
        {1.0 / 24, -1.0 / 12, 1.0 / 6},
        {0, 0, 1},
    };
    static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    const double(*G)[3] = m == 4 ? G4 : G2;
    int a = m + 2;
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++) {
            const float *k = g + (o * C + c) * 9;
            double t[MAX_ALPHA][3]; /* G g */
            for (int i = 0; i < a; i++)
                for (int j = 0; j < 3; j++) t[i][j] = G[i][0] * k[j] + G[i][1] * k[3 + j] + G[i][2] * k[6 + j];
            for (int i = 0; i < a; i++)
                for (int j = 0; j < a; j++) {
                    double u = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
                    U[(((int64_t)(i * a + j) * (O / KN_GEMM512_COLS) + o / KN_GEMM512_COLS) * C + c) * KN_GEMM512_COLS +
                      o % KN_GEMM512_COLS] = (float)u;
                }
        }
}

int kn_wino_create(const kn_abi_dnnl *rec, const unsigned char *weights, int tile, int block, kn_wino **out)
{
    *out = NULL;
    if (!kn_wino_supported(rec) || (tile != 2 && tile != 4))
        return kn_error(KN_ERR_UNSUPPORTED, "Winograd: not a 3x3 stride-1 convolution it runs (tile %d)", tile);
    if ((block != 0 && block != 8 && block != 16) || (block && (rec->src.dims[1] % block || rec->wei.dims[0] % block)))
        return kn_error(KN_ERR_UNSUPPORTED, "Winograd: no layout with channel block %d for %lld -> %lld channels",
                        block, (long long)rec->src.dims[1], (long long)rec->wei.dims[0]);
    kn_wino *w = calloc(1, sizeof *w);
    if (!w) return kn_error(KN_ERR_NOMEM, "out of memory");
    w->m = tile, w->alpha = tile + 2, w->npos = w->alpha * w->alpha;
    w->blk = block;
    w->avx512 = cpu_avx512();
    w->wide = w->avx512 && block != 8 && rec->src.dims[1] % 16 == 0 && rec->wei.dims[0] % 16 == 0;
    w->N = rec->src.dims[0], w->C = rec->src.dims[1], w->O = rec->wei.dims[0];
    w->H = rec->src.dims[2], w->W = rec->src.dims[3];
    w->th = (w->H + tile - 1) / tile, w->tw = (w->W + tile - 1) / tile;
    w->T = w->N * w->th * w->tw;
    w->rows = row_block(w->T, w->avx512);
    w->tb = blocked_tiles(w);
    w->n_post = rec->n_post;
    memcpy(w->post, rec->post, sizeof w->post);
    w->has_sum = kn_fused_has_sum(w->post, w->n_post);
    /* the artifact loader checked each ref's bytes against the weights blob */
    int64_t wbytes = w->O * w->C * 9 * (int64_t)sizeof(float);
    w->has_bias = !(rec->bias.rank == 0 && rec->bias.nbytes == 0);
    const char *bad = NULL;
    if (!weights) bad = "no weights were given";
    else if (rec->wei_ref.offset < 0 || rec->wei.nbytes != wbytes) bad = "the weights have the wrong size";
    else if (w->has_bias && rec->bias.nbytes != w->O * (int64_t)sizeof(float)) bad = "the bias has the wrong size";
    if (bad) {
        int st = kn_error(KN_ERR_INVALID, "Winograd: %s (weights %lld bytes, bias %lld, for %lld x %lld x 3 x 3)", bad,
                          (long long)rec->wei.nbytes, (long long)rec->bias.nbytes, (long long)w->O, (long long)w->C);
        free(w);
        return st;
    }
    size_t ubytes = (size_t)w->npos * (size_t)w->O * (size_t)w->C * sizeof(float);
    if (!(w->U = kn_big_alloc(ubytes))) {
        free(w);
        return kn_error(KN_ERR_NOMEM, "out of memory for %zu bytes of Winograd filters", ubytes);
    }
    transform_filter((const float *)(weights + rec->wei_ref.offset), tile, w->O, w->C, w->U);
    if (w->has_bias && rec->bias_ref.loc == KN_LOC_WEIGHTS) w->bias = (const float *)(weights + rec->bias_ref.offset);
    *out = w;
    return KN_OK;
}

int kn_wino_view(const kn_wino *w, int64_t N, int64_t H, int64_t W, kn_wino **out)
{
    *out = NULL;
    if (!w || N < 1 || H < 1 || W < 1) return kn_error(KN_ERR_INVALID, "Winograd: a view at %lldx%lldx%lld",
                                                       (long long)N, (long long)H, (long long)W);
    kn_wino *v = malloc(sizeof *v);
    if (!v) return kn_error(KN_ERR_NOMEM, "out of memory");
    *v = *w;
    v->view = true;
    v->N = N, v->H = H, v->W = W;
    v->th = (H + w->m - 1) / w->m, v->tw = (W + w->m - 1) / w->m;
    v->T = N * v->th * v->tw;
    v->rows = row_block(v->T, v->avx512);
    *out = v;
    return KN_OK;
}

void kn_wino_free(kn_wino *w)
{
    if (!w) return;
    if (!w->view) kn_big_free(w->U);
    free(w);
}

#if WINO_X86

/* One run's pointers, shared by the phases' chunks: V and M hold tiles
 * [t0, t0 + tn), the products in row blocks of `rows` tiles. */
typedef struct wino_run {
    const kn_wino *w;
    const float *src, *bias, *res;
    float *dst, *V, *M;
    int64_t t0, tn;
    int rows;
} wino_run;

/* Where channels lanes*b.. of pixel 0 of image n are, in an activation of
 * ch channels, and (*pix) the distance from one pixel's to the next's. */
static int64_t vec_base(const kn_wino *w, int64_t ch, int64_t n, int64_t b, int64_t lanes, int64_t *pix)
{
    if (!w->blk) { /* NHWC */
        *pix = ch;
        return n * w->H * w->W * ch + b * lanes;
    }
    int64_t per = w->blk / lanes; /* vectors per block */
    *pix = w->blk;
    return (n * (ch / w->blk) + b / per) * w->H * w->W * w->blk + b % per * lanes;
}

/* c[r][0..16] = sum_k a[r][k] * b[k][0..16] for r < rows (a: up to 6 rows
 * of V, b: a 16-column panel of U). */
AVX2 static void gemm_6x16(const float *const a[ROWS], const float *b, int64_t K, float *const c[ROWS], int rows)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t k = 0; k < K; k++, b += KN_GEMM512_COLS) {
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
    int64_t panels = w->O / KN_GEMM512_COLS;
    for (int64_t it = lo; it < hi; it++) {
        int64_t p = it / panels, q = it % panels;
        const float *V = r->V + p * r->tn * w->C, *B = w->U + (p * panels + q) * w->C * KN_GEMM512_COLS;
        float *M = r->M + p * r->tn * w->O + q * KN_GEMM512_COLS;
        for (int64_t t0 = 0; t0 < r->tn; t0 += ROWS) {
            int rows = r->tn - t0 < ROWS ? (int)(r->tn - t0) : ROWS;
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

/* Phase 2 on AVX-512 for (position, pair of 16-column panels) items
 * [lo, hi); an odd last panel goes alone. U holds the items' panels one
 * after the other, so the next item's start right after this one's; the
 * first row blocks of an item prefetch them, one panel each. */
KN_TARGET_AVX512 static int gemm512_chunk(void *args, int64_t lo, int64_t hi)
{
    const wino_run *r = args;
    const kn_wino *w = r->w;
    int64_t panels = w->O / KN_GEMM512_COLS, pairs = (panels + 1) / 2, K = w->C;
    for (int64_t it = lo; it < hi; it++) {
        int64_t p = it / pairs, q = it % pairs * 2;
        const float *V = r->V + p * r->tn * K, *B = w->U + (p * panels + q) * K * KN_GEMM512_COLS;
        float *M = r->M + p * r->tn * w->O + q * KN_GEMM512_COLS;
        int np = q + 1 < panels ? 2 : 1;
        const float *next = B + np * K * KN_GEMM512_COLS;
        int64_t next_panels = it + 1 >= hi ? 0 : (it + 1) % pairs * 2 + 1 < panels ? 2 : 1;
        int64_t blk = 0;
        for (int64_t t0 = 0; t0 < r->tn; t0 += r->rows, blk++) {
            int rows = r->tn - t0 < r->rows ? (int)(r->tn - t0) : r->rows;
            const float *pf = blk < next_panels ? next + blk * K * KN_GEMM512_COLS : B;
            kn_gemm512_rows(rows, np, V + t0 * K, K, B, K * KN_GEMM512_COLS, K, pf, M + t0 * w->O, w->O, NULL);
        }
    }
    return KN_OK;
}

#define XF_TARGET AVX2
#define XF(name) name##_8
#define XF_V __m256
#define XF_LANES 8
#define XF_LOAD _mm256_load_ps
#define XF_STORE _mm256_store_ps
#define XF_LOADU _mm256_loadu_ps
#define XF_STOREU _mm256_storeu_ps
#define XF_ZERO _mm256_setzero_ps
#define XF_SET1 _mm256_set1_ps
#define XF_ADD _mm256_add_ps
#define XF_SUB _mm256_sub_ps
#define XF_MUL _mm256_mul_ps
#define XF_FMADD _mm256_fmadd_ps
#define XF_FNMADD _mm256_fnmadd_ps
#define XF_MAX _mm256_max_ps
#define XF_MIN _mm256_min_ps
#define XF_LEAKY(x, a)                                                                                             \
    _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(a)), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ))
#define XF_SWISH(x) _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), kn_exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))))
#include "f32_winograd_xform.inc"

#define XF_TARGET KN_TARGET_AVX512
#define XF(name) name##_16
#define XF_V __m512
#define XF_LANES 16
#define XF_LOAD _mm512_load_ps
#define XF_STORE _mm512_store_ps
#define XF_LOADU _mm512_loadu_ps
#define XF_STOREU _mm512_storeu_ps
#define XF_ZERO _mm512_setzero_ps
#define XF_SET1 _mm512_set1_ps
#define XF_ADD _mm512_add_ps
#define XF_SUB _mm512_sub_ps
#define XF_MUL _mm512_mul_ps
#define XF_FMADD _mm512_fmadd_ps
#define XF_FNMADD _mm512_fnmadd_ps
#define XF_MAX _mm512_max_ps
#define XF_MIN _mm512_min_ps
#define XF_LEAKY(x, a)                                                                                             \
    _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), x, _mm512_set1_ps(a))
#define XF_SWISH(x) _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), kn_exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))))
#include "f32_winograd_xform.inc"

/* Blocks of tiles [lo, hi), each through all three phases on the calling
 * worker, its V and M in that worker's part of the scratch. */
KN_TARGET_AVX512 static int block_chunk(void *args, int64_t lo, int64_t hi)
{
    const wino_run *r = args;
    const kn_wino *w = r->w;
    int worker = kn_rt_parallel_worker();
    size_t vfloats = (size_t)(w->npos * w->tb * w->C), mfloats = (size_t)(w->npos * w->tb * w->O);
    if (worker < 0 || (size_t)(worker + 1) * (vfloats + mfloats) > kn_wino_scratch_bytes(w) / sizeof(float))
        return kn_error(KN_ERR_INTERNAL, "Winograd: no scratch for worker %d", worker);
    int64_t panels = w->O / KN_GEMM512_COLS, pairs = (panels + 1) / 2;
    for (int64_t b = lo; b < hi; b++) {
        wino_run q = *r;
        q.V = r->V + (size_t)worker * (vfloats + mfloats), q.M = q.V + vfloats;
        q.t0 = b * w->tb, q.tn = w->T - q.t0 < w->tb ? w->T - q.t0 : w->tb;
        q.rows = kn_gemm512_row_block(q.tn);
        int st = w->wide ? input_chunk_16(&q, q.t0 * (w->C / 16), (q.t0 + q.tn) * (w->C / 16))
                         : input_chunk_8(&q, q.t0 * (w->C / 8), (q.t0 + q.tn) * (w->C / 8));
        if (!st) st = gemm512_chunk(&q, 0, w->npos * pairs);
        if (!st)
            st = w->wide ? output_chunk_16(&q, q.t0 * (w->O / 16), (q.t0 + q.tn) * (w->O / 16))
                         : output_chunk_8(&q, q.t0 * (w->O / 8), (q.t0 + q.tn) * (w->O / 8));
        if (st) return st;
    }
    return KN_OK;
}

int kn_wino_exec(const kn_wino *w, const float *src, const float *bias, float *dst, const float *residual,
                 float *scratch, int threads)
{
    if (w->has_sum && !residual) return kn_error(KN_ERR_INVALID, "Winograd: the sum post-op has no input");
    wino_run r = {.w = w,
                  .src = src,
                  .bias = w->bias ? w->bias : w->has_bias ? bias : NULL,
                  .res = w->has_sum ? residual : NULL,
                  .dst = dst,
                  .V = scratch,
                  .M = scratch + w->npos * w->T * w->C,
                  .t0 = 0,
                  .tn = w->T,
                  .rows = w->rows};
    if (w->has_bias && !r.bias) return kn_error(KN_ERR_INVALID, "Winograd: no bias given");
    /* in blocks where each thread gets two or more (see blocked_tiles) */
    int64_t blocks = w->tb ? (w->T + w->tb - 1) / w->tb : 0;
    if (blocks >= 2 * (int64_t)threads) return kn_rt_parallel_for_threads(threads, block_chunk, &r, blocks);
    /* 16-channel transforms where the vectors fit the layout's blocks */
    int st = w->wide ? kn_rt_parallel_for_threads(threads, input_chunk_16, &r, w->T * (w->C / 16))
                  : kn_rt_parallel_for_threads(threads, input_chunk_8, &r, w->T * (w->C / 8));
    if (!st && w->avx512)
        st = kn_rt_parallel_for_threads(threads, gemm512_chunk, &r, w->npos * ((w->O / KN_GEMM512_COLS + 1) / 2));
    else if (!st)
        st = kn_rt_parallel_for_threads(threads, gemm_chunk, &r, w->npos * (w->O / KN_GEMM512_COLS));
    if (!st && w->wide) st = kn_rt_parallel_for_threads(threads, output_chunk_16, &r, w->T * (w->O / 16));
    else if (!st) st = kn_rt_parallel_for_threads(threads, output_chunk_8, &r, w->T * (w->O / 8));
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
