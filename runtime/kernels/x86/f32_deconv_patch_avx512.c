/*
 * runtime/kernels/x86/f32_deconv_patch_avx512.c — a transposed convolution
 * whose kernel equals its stride (kh x kw, stride kh x kw, no padding, no
 * dilation, one group: the 2x2 stride-2 upsampling of detectors' heads) on
 * AVX-512, channels-last in.
 *
 * Such a layer writes each input pixel's own kh x kw patch of the output
 * and nothing else: out[y kh + i][x kw + j][o] = b[o] + sum_c in[y][x][c]
 * W[c][o][i][j]. So it is one product, the pixels of an input row (rows
 * of C floats, NHWC) by W packed as [C][kh kw O] columns, and a scatter of
 * each result row into its patch. oneDNN 2.6 runs it as its convolution's
 * backward-data kernel with the bias and activation in a second pass: 32
 * GFLOP/s for 16 -> 16 channels on Zen 4, and 2.7 GFLOP/s (5.2 ms for a
 * 640x640 map) for 16 -> 1, where this kernel is bound by memory.
 *
 * The product is the 8 x 32 kernel of f32_gemm_8x32_avx512.c with its
 * epilogue (bias, post-ops, residual). Two ways to store:
 *  - direct, when dst is NHWC and kw O is a multiple of 16: for each patch
 *    row i the columns (j, o) are kw O consecutive floats of output row
 *    y kh + i, and consecutive pixels are kw O floats apart: the kernel
 *    stores there itself, residual included;
 *  - through a block of up to 8 result rows on the stack, then copied into
 *    the patches (NHWC: kw O floats per patch row; NCHW: kw floats per
 *    channel and patch row). No residual there (the record goes to oneDNN).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "f32_gemm_avx512.h"
#include "fused_int.h"
#include "rt_internal.h"

/* Columns (kh kw O) of the blocked way: a block of 8 result rows stays on
 * the stack. */
#define PDC_MAX_COLS 512

struct kn_pdc {
    int64_t N, C, H, W, O, kh, kw;
    bool dst_nhwc, direct;
    int64_t cols, panels; /* kh kw O, and that in 16-column panels (padded) */
    float *b;             /* [panels][C][16], column (i, j, o) at (i kw + j) O + o */
    float *bias;          /* per column, padded: b[o] */
    kn_abi_post post[4];
    int n_post;
    kn_gemm512_epi epi;
};

static bool direct_store(const kn_abi_dnnl *rec, bool dst_nhwc)
{
    return dst_nhwc && (rec->wei.dims[3] * rec->wei.dims[1]) % KN_GEMM512_COLS == 0;
}

bool kn_pdc_supported(const kn_abi_dnnl *rec, bool dst_nhwc)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (!(kn_cpu_features() & KN_CPU_AVX512F)) return false;
    if (rec->kind != KN_DNNL_DECONV || rec->spatial != 2 || rec->groups != 1) return false;
    if (rec->src.rank != 4 || rec->wei.rank != 4 || rec->dst.rank != 4 || rec->src.dtype != KN_F32 ||
        rec->wei.dtype != KN_F32 || rec->dst.dtype != KN_F32)
        return false;
    int64_t C = rec->src.dims[1], O = rec->wei.dims[1];
    if (C < 1 || O < 1 || rec->wei.dims[0] != C || rec->dst.dims[1] != O || rec->dst.dims[0] != rec->src.dims[0])
        return false;
    for (int i = 0; i < 2; i++) {
        int64_t k = rec->wei.dims[2 + i];
        if (k < 1 || rec->strides[i] != k || rec->dilations[i] != 1 || rec->pads_begin[i] != 0 ||
            rec->pads_end[i] != 0 || rec->dst.dims[2 + i] != rec->src.dims[2 + i] * k)
            return false;
    }
    bool direct = direct_store(rec, dst_nhwc);
    if (!direct && rec->wei.dims[2] * rec->wei.dims[3] * O > PDC_MAX_COLS) return false;
    bool no_bias = rec->bias.rank == 0 && rec->bias.nbytes == 0;
    bool bias_ok = no_bias || (rec->bias.rank == 1 && rec->bias.dims[0] == O && rec->bias_ref.loc == KN_LOC_WEIGHTS);
    return rec->wei_ref.loc == KN_LOC_WEIGHTS && bias_ok && kn_gemm512_posts_supported(rec->post, rec->n_post, direct);
#else
    (void)rec, (void)dst_nhwc;
    return false;
#endif
}

void kn_pdc_free(kn_pdc *k)
{
    if (!k) return;
    kn_big_free(k->b);
    free(k->bias);
    free(k);
}

int kn_pdc_create(const kn_abi_dnnl *rec, const float *w, const float *bias, bool dst_nhwc, kn_pdc **out)
{
    *out = NULL;
    if (!kn_pdc_supported(rec, dst_nhwc) || !w)
        return kn_error(KN_ERR_UNSUPPORTED, "transposed convolution: not one the patch kernel runs");
    kn_pdc *k = calloc(1, sizeof *k);
    if (!k) return kn_error(KN_ERR_NOMEM, "out of memory");
    k->N = rec->src.dims[0], k->C = rec->src.dims[1], k->H = rec->src.dims[2], k->W = rec->src.dims[3];
    k->O = rec->wei.dims[1], k->kh = rec->wei.dims[2], k->kw = rec->wei.dims[3];
    k->dst_nhwc = dst_nhwc;
    k->direct = direct_store(rec, dst_nhwc);
    k->cols = k->kh * k->kw * k->O;
    k->panels = (k->cols + KN_GEMM512_COLS - 1) / KN_GEMM512_COLS;
    size_t padded = (size_t)(k->panels * KN_GEMM512_COLS);
    if (!(k->b = kn_big_alloc(padded * (size_t)k->C * sizeof(float))) ||
        !(k->bias = calloc(padded, sizeof(float)))) {
        kn_pdc_free(k);
        return kn_error(KN_ERR_NOMEM, "out of memory for a transposed convolution's packed weights");
    }
    memset(k->b, 0, padded * (size_t)k->C * sizeof(float));
    /* ONNX's W[c][o][i][j] to column (i kw + j) O + o of row c, in panels */
    for (int64_t c = 0; c < k->C; c++)
        for (int64_t o = 0; o < k->O; o++)
            for (int64_t i = 0; i < k->kh; i++)
                for (int64_t j = 0; j < k->kw; j++) {
                    int64_t col = (i * k->kw + j) * k->O + o;
                    k->b[(col / KN_GEMM512_COLS * k->C + c) * KN_GEMM512_COLS + col % KN_GEMM512_COLS] =
                        w[((c * k->O + o) * k->kh + i) * k->kw + j];
                }
    for (int64_t col = 0; col < k->cols; col++) k->bias[col] = bias ? bias[col % k->O] : 0.0f;
    k->n_post = rec->n_post;
    memcpy(k->post, rec->post, sizeof k->post);
    k->epi = (kn_gemm512_epi){.bias = k->bias, .post = k->post, .n_post = k->n_post};
    kn_gemm512_clamp(&k->epi);
    *out = k;
    return KN_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)

typedef struct pdc_run {
    const kn_pdc *k;
    int64_t H, W; /* the run's input image */
    const float *src, *res;
    float *dst;
} pdc_run;

/* The columns [p0, p0 + np panels) of R result rows for the R pixels at a. */
KN_TARGET_AVX512 static void product(const kn_pdc *k, const kn_gemm512_epi *e, int R, int64_t p0, int np,
                                     const float *a, float *out, int64_t ldo)
{
    const float *b = k->b + p0 * k->C * KN_GEMM512_COLS;
    kn_gemm512_rows(R, np, a, k->C, b, k->C * KN_GEMM512_COLS, k->C, b, out, ldo, e);
}

/* The post-ops over the n floats at p, in place: the blocked way applies
 * them after the copy into the patches, on whole vectors of outputs (its
 * result rows have kh kw O columns, 4 for DBNet's last layer: a Sigmoid
 * per 16-lane vector there would do 4 times the work). */
KN_TARGET_AVX512 static void posts_in_place(const kn_pdc *k, float *p, int64_t n)
{
    int64_t i = 0;
    for (; i + KN_GEMM512_COLS <= n; i += KN_GEMM512_COLS) kn_gemm512_posts(&k->epi, 1, 1, p + i, p + i, 0, NULL, 0);
    if (i < n) {
        float t[2 * KN_GEMM512_COLS] = {0};
        memcpy(t, p + i, sizeof(float) * (size_t)(n - i));
        kn_gemm512_posts(&k->epi, 1, 1, t, t, 0, NULL, 0);
        memcpy(p + i, t, sizeof(float) * (size_t)(n - i));
    }
}

/* Input rows [lo, hi) of the N H rows. */
KN_TARGET_AVX512 static int pdc_rows(void *args, int64_t lo, int64_t hi)
{
    const pdc_run *r = args;
    const kn_pdc *k = r->k;
    const int64_t H = r->H, W = r->W;
    int64_t OH = H * k->kh, OW = W * k->kw, rowc = k->kw * k->O; /* floats of a patch row */
    float blk[KN_GEMM512_ROWS * PDC_MAX_COLS] __attribute__((aligned(64)));
    for (int64_t ny = lo; ny < hi; ny++) {
        int64_t n = ny / H, y = ny % H;
        const float *in = r->src + ny * W * k->C;
        for (int64_t x0 = 0; x0 < W; x0 += KN_GEMM512_ROWS) {
            int R = (int)(W - x0 < KN_GEMM512_ROWS ? W - x0 : KN_GEMM512_ROWS);
            const float *a = in + x0 * k->C;
            if (k->direct) {
                int64_t per_row = rowc / KN_GEMM512_COLS; /* panels of a patch row */
                for (int64_t i = 0; i < k->kh; i++) {
                    int64_t at = ((n * OH + y * k->kh + i) * OW + x0 * k->kw) * k->O;
                    for (int64_t p = 0; p < per_row; p += 2) {
                        int np = per_row - p >= 2 ? 2 : 1;
                        kn_gemm512_epi e = k->epi;
                        e.bias = k->bias + (i * per_row + p) * KN_GEMM512_COLS;
                        e.res = r->res ? r->res + at + p * KN_GEMM512_COLS : NULL;
                        e.ldr = rowc;
                        product(k, &e, R, i * per_row + p, np, a, r->dst + at + p * KN_GEMM512_COLS, rowc);
                    }
                }
                continue;
            }
            int64_t ldb = k->panels * KN_GEMM512_COLS;
            for (int64_t p = 0; p < k->panels; p += 2) {
                int np = k->panels - p >= 2 ? 2 : 1;
                kn_gemm512_epi e = {.bias = k->bias + p * KN_GEMM512_COLS}; /* post-ops: below */
                product(k, &e, R, p, np, a, blk + p * KN_GEMM512_COLS, ldb);
            }
            if (!k->dst_nhwc && R * k->kw <= KN_GEMM512_COLS) {
                /* NCHW: the block's R pixels are R kw consecutive floats of
                 * each channel's output row, gathered from the block at once
                 * (one scalar store per float took 1.0 of DBNet's 1.7 ms
                 * upsampling at a run-time size) */
                int32_t off[KN_GEMM512_COLS] = {0};
                for (int t = 0; t < R * k->kw; t++) off[t] = (int32_t)(t / k->kw * ldb + t % k->kw * k->O);
                __m512i vo = _mm512_loadu_si512(off);
                __mmask16 live = (__mmask16)((1u << (R * k->kw)) - 1);
                for (int64_t i = 0; i < k->kh; i++) {
                    int64_t oy = y * k->kh + i;
                    for (int64_t o = 0; o < k->O; o++) {
                        __m512i at = _mm512_add_epi32(vo, _mm512_set1_epi32((int32_t)(i * k->kw * k->O + o)));
                        __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, at, blk, 4);
                        _mm512_mask_storeu_ps(r->dst + ((n * k->O + o) * OH + oy) * OW + x0 * k->kw, live, v);
                    }
                }
                continue;
            }
            for (int x = 0; x < R; x++) {
                const float *v = blk + x * ldb;
                int64_t ox = (x0 + x) * k->kw;
                for (int64_t i = 0; i < k->kh; i++) {
                    int64_t oy = y * k->kh + i;
                    if (k->dst_nhwc) {
                        memcpy(r->dst + ((n * OH + oy) * OW + ox) * k->O, v + i * rowc, sizeof(float) * (size_t)rowc);
                        continue;
                    }
                    for (int64_t o = 0; o < k->O; o++) {
                        float *d = r->dst + ((n * k->O + o) * OH + oy) * OW + ox;
                        for (int64_t j = 0; j < k->kw; j++) d[j] = v[(i * k->kw + j) * k->O + o];
                    }
                }
            }
        }
        if (k->direct || k->n_post == 0) continue;
        /* this input row's patches: kh output rows, whole */
        if (k->dst_nhwc) posts_in_place(k, r->dst + (n * OH + y * k->kh) * OW * k->O, k->kh * OW * k->O);
        else
            for (int64_t o = 0; o < k->O; o++)
                posts_in_place(k, r->dst + ((n * k->O + o) * OH + y * k->kh) * OW, k->kh * OW);
    }
    return KN_OK;
}

int kn_pdc_exec_at(const kn_pdc *k, int64_t N, int64_t H, int64_t W, const float *src, float *dst,
                   const float *residual, int threads)
{
    if (!k || !src || !dst) return kn_error(KN_ERR_INVALID, "kn_pdc_exec: NULL argument");
    if (kn_fused_has_sum(k->post, k->n_post) && !residual)
        return kn_error(KN_ERR_INVALID, "transposed convolution: the residual add has no input");
    pdc_run r = {.k = k, .H = H, .W = W, .src = src, .res = residual, .dst = dst};
    return kn_rt_parallel_for_threads(threads, pdc_rows, &r, N * H);
}

int kn_pdc_exec(const kn_pdc *k, const float *src, float *dst, const float *residual, int threads)
{
    if (!k) return kn_error(KN_ERR_INVALID, "kn_pdc_exec: NULL argument");
    return kn_pdc_exec_at(k, k->N, k->H, k->W, src, dst, residual, threads);
}

#else

int kn_pdc_exec_at(const kn_pdc *k, int64_t N, int64_t H, int64_t W, const float *src, float *dst,
                   const float *residual, int threads)
{
    (void)k, (void)N, (void)H, (void)W, (void)src, (void)dst, (void)residual, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "transposed convolution: the patch kernel needs x86-64");
}

int kn_pdc_exec(const kn_pdc *k, const float *src, float *dst, const float *residual, int threads)
{
    (void)k, (void)src, (void)dst, (void)residual, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "transposed convolution: the patch kernel needs x86-64");
}

#endif
