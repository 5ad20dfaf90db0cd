/*
 * runtime/kernels/x86/f32_conv1x1_avx512.c — 1x1 convolutions (any stride, no padding) on
 * channels-last (NHWC) activations by kiln's own AVX-512 kernel
 * (f32_gemm_8x32_avx512.c), with the bias, the post-ops and the residual sum applied as
 * each block is stored.
 *
 * In NHWC such a convolution is a matrix product: dst[P x O] = src[P x C]
 * . W^T, P = N * OH * OW output pixels, each row of src the input pixel
 * under an output pixel. oneDNN 2.6's brgconv_1x1 kernel does as well at
 * batch 1, but with a residual sum at batch 8 it takes 1.6-2.2x as long as
 * without (ResNet-50's 56x56 layers: 3.8 ms against 2.2 on 2 threads;
 * onnxruntime 2.3); this kernel reads the residual as it stores each block,
 * where the block's lines are about to be written anyway (2.7 ms).
 *
 * Rows come in lines: with stride 1 all the pixels are one line (the input
 * pixels are evenly spaced, C floats apart), with a larger stride each
 * output row is one (its input pixels are stride * C floats apart). A line
 * is cut into blocks of up to 8 rows, the kernel's; blocks in groups.
 * Work items are (group of blocks, pair of 16-column panels), groups
 * first: consecutive items of a thread reuse the group's src rows (in L1),
 * and with one group (few pixels: batch 1, small images) the threads split
 * the columns, so that each reads its share of the weights once. Like
 * Winograd's products, the first row blocks of an item prefetch the next
 * item's weights.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fused_int.h"
#include "f32_gemm_avx512.h"
#include "rt_internal.h"
#include "bigmem.h"

/* Rows per group: enough for the weights of a panel pair (in L1/L2) to
 * serve many rows, few enough that a large image has many groups per
 * thread. Up to ONE_GROUP_ROWS rows are one group, so that the weights
 * stream from memory once (BERT's 128 rows at batch 1: two groups were 4%
 * slower on 2 threads). */
#define GROUP_ROWS 64
#define ONE_GROUP_ROWS 256

/* K is cut in parts of at most K_PART when a group has several row blocks:
 * a part of a panel pair (K_PART x 32 floats, 32 KB) then stays in L1 while
 * every block of the group uses it, where a whole pair (BERT's 3072 x 32:
 * 384 KB) came from L2 once per block; the partial sums wait in a block
 * aside (at most ACC_ROWS rows of 32 floats on the stack). */
#define K_PART 256
#define ACC_ROWS 256

struct kn_pw {
    int64_t C, O;      /* input and output channels */
    int64_t H, W;      /* input image */
    int64_t OH, OW;    /* output image */
    int64_t sh, sw;    /* strides */
    int64_t len;       /* pixels per line: all (stride 1) or OW */
    int64_t lines;     /* 1 (stride 1) or N * OH */
    int rows;          /* rows per block (kn_gemm512_row_block) */
    int64_t per_line;  /* blocks per line */
    int64_t group;     /* blocks per group */
    int64_t panels;    /* 16-column panels: O / 16 rounded up */
    int tail;          /* columns of the last panel when O is not a multiple of 16 (a matmul's); else 0 */
    int64_t kparts;    /* parts K is cut in (1: whole) */
    float *wei;        /* [panels][C][16], zeros past O */
    const float *bias; /* [O], constant (or NULL: per run, or none) */
    float *bias_pad;   /* the constant bias padded to panels * 16 (a tail), owned */
    bool has_bias, has_sum;
    int n_post;
    kn_abi_post post[4];
    kn_gemm512_epi epi; /* the post-ops (bias and residual set per block) */
};

/* The post-ops the kernel applies: its epilogue's (residual included). */
static bool posts_supported(const kn_abi_dnnl *rec) { return kn_gemm512_posts_supported(rec->post, rec->n_post, true); }

bool kn_pw_supported(const kn_abi_dnnl *rec)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (!(kn_cpu_features() & KN_CPU_AVX512F)) return false;
    if (rec->kind != KN_DNNL_CONV || rec->spatial != 2 || rec->groups != 1) return false;
    if (rec->src.rank != 4 || rec->wei.rank != 4 || rec->dst.rank != 4) return false;
    if (rec->wei.dims[2] != 1 || rec->wei.dims[3] != 1) return false;
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0];
    if (N < 1 || C < 1 || O < KN_GEMM512_COLS || O % KN_GEMM512_COLS || rec->wei.dims[1] != C ||
        rec->dst.dims[1] != O || rec->dst.dims[0] != N)
        return false;
    for (int i = 0; i < 2; i++) {
        int64_t in = rec->src.dims[2 + i], s = rec->strides[i];
        if (s < 1 || rec->dilations[i] != 1 || rec->pads_begin[i] != 0 || rec->pads_end[i] != 0 || in < 1 ||
            rec->dst.dims[2 + i] != (in - 1) / s + 1)
            return false;
    }
    return rec->wei_ref.loc == KN_LOC_WEIGHTS && posts_supported(rec);
#else
    (void)rec;
    return false;
#endif
}

/* A kernel for rows of C floats in lines as w's geometry says, O outputs,
 * the filter element (output o, input c) at g[o * so + c * sc]; `what`
 * names the op in errors. */
static int pw_make(kn_pw *w, const kn_abi_dnnl *rec, const unsigned char *weights, int64_t so, int64_t sc,
                   const char *what, kn_pw **out)
{
    int64_t all = w->len * w->lines;
    w->rows = kn_gemm512_row_block(w->len < GROUP_ROWS ? w->len : GROUP_ROWS);
    w->per_line = (w->len + w->rows - 1) / w->rows;
    w->group = all <= ONE_GROUP_ROWS ? w->per_line * w->lines : GROUP_ROWS / w->rows;
    w->n_post = rec->n_post;
    memcpy(w->post, rec->post, sizeof w->post);
    w->has_sum = kn_fused_has_sum(w->post, w->n_post);
    w->epi = (kn_gemm512_epi){.post = w->post, .n_post = w->n_post};
    kn_gemm512_clamp(&w->epi);
    w->has_bias = !(rec->bias.rank == 0 && rec->bias.nbytes == 0);
    /* the artifact loader checked each ref's bytes against the weights blob */
    const char *bad = NULL;
    if (!weights) bad = "no weights were given";
    else if (rec->wei_ref.offset < 0 || rec->wei.nbytes != w->O * w->C * (int64_t)sizeof(float))
        bad = "the weights have the wrong size";
    else if (w->has_bias && rec->bias.nbytes != w->O * (int64_t)sizeof(float)) bad = "the bias has the wrong size";
    if (bad) {
        int st = kn_error(KN_ERR_INVALID, "%s: %s (weights %lld bytes, bias %lld, for %lld x %lld)", what, bad,
                          (long long)rec->wei.nbytes, (long long)rec->bias.nbytes, (long long)w->O, (long long)w->C);
        free(w);
        return st;
    }
    w->kparts = w->group > 1 && w->group * w->rows <= ACC_ROWS ? (w->C + K_PART - 1) / K_PART : 1;
    w->panels = (w->O + KN_GEMM512_COLS - 1) / KN_GEMM512_COLS;
    w->tail = (int)(w->O % KN_GEMM512_COLS);
    size_t bytes = (size_t)(w->panels * KN_GEMM512_COLS) * (size_t)w->C * sizeof(float);
    if (!(w->wei = kn_big_alloc(bytes)) ||
        (w->tail && w->has_bias && !(w->bias_pad = calloc((size_t)(w->panels * KN_GEMM512_COLS), sizeof(float))))) {
        kn_pw_free(w);
        return kn_error(KN_ERR_NOMEM, "%s: out of memory for %zu bytes of weights", what, bytes);
    }
    memset(w->wei, 0, bytes);
    const float *g = (const float *)(weights + rec->wei_ref.offset);
    for (int64_t o = 0; o < w->O; o++)
        for (int64_t c = 0; c < w->C; c++)
            w->wei[((o / KN_GEMM512_COLS) * w->C + c) * KN_GEMM512_COLS + o % KN_GEMM512_COLS] = g[o * so + c * sc];
    if (w->has_bias && rec->bias_ref.loc == KN_LOC_WEIGHTS) w->bias = (const float *)(weights + rec->bias_ref.offset);
    if (w->bias_pad) memcpy(w->bias_pad, w->bias, (size_t)w->O * sizeof(float)); /* a tail's bias is constant */
    *out = w;
    return KN_OK;
}

int kn_pw_create(const kn_abi_dnnl *rec, const unsigned char *weights, kn_pw **out)
{
    *out = NULL;
    if (!kn_pw_supported(rec))
        return kn_error(KN_ERR_UNSUPPORTED, "1x1 convolution: not one the AVX-512 kernel runs");
    kn_pw *w = calloc(1, sizeof *w);
    if (!w) return kn_error(KN_ERR_NOMEM, "out of memory");
    w->C = rec->src.dims[1], w->O = rec->wei.dims[0];
    w->H = rec->src.dims[2], w->W = rec->src.dims[3], w->OH = rec->dst.dims[2], w->OW = rec->dst.dims[3];
    w->sh = rec->strides[0], w->sw = rec->strides[1];
    bool one_line = w->sh == 1 && w->sw == 1;
    w->len = one_line ? rec->src.dims[0] * w->OH * w->OW : w->OW;
    w->lines = one_line ? 1 : rec->src.dims[0] * w->OH;
    return pw_make(w, rec, weights, w->C, 1, "1x1 convolution", out); /* the filter is [O][C] */
}

/* A matmul record it runs: plain row-major operands, A [.., M, K] not
 * transposed, B a constant [K, N] matrix (or [N, K] with trans_b) shared by
 * every batch, so that the product is one [rows, K] x [K, N]; no scale; a
 * bias of N values; N at least 16. Where N is not a multiple of 16 (an
 * ImageNet classifier's 1000), the last panel is computed aside and its
 * columns copied: then no residual, and a constant bias or none. Sets
 * *rows and *K. */
static bool matmul_shape(const kn_abi_dnnl *rec, int64_t *rows, int64_t *K)
{
    const kn_abi_tensor *a = &rec->src, *b = &rec->wei, *d = &rec->dst;
    if (rec->kind != KN_DNNL_MATMUL || rec->trans_a || rec->alpha != 1.0f) return false;
    if (a->rank < 2 || a->rank > 8 || b->rank < 2 || b->rank > 8 || d->rank != a->rank) return false;
    for (int i = 0; i < b->rank - 2; i++)
        if (b->dims[i] != 1) return false;
    int64_t k = a->dims[a->rank - 1], n = d->dims[d->rank - 1], r = 1;
    int64_t bk = b->dims[b->rank - (rec->trans_b ? 1 : 2)], bn = b->dims[b->rank - (rec->trans_b ? 2 : 1)];
    if (k < 1 || bk != k || bn != n || n < KN_GEMM512_COLS) return false;
    bool has_bias = !(rec->bias.rank == 0 && rec->bias.nbytes == 0);
    if (n % KN_GEMM512_COLS &&
        (kn_fused_has_sum(rec->post, rec->n_post) || (has_bias && rec->bias_ref.loc != KN_LOC_WEIGHTS)))
        return false;
    for (int i = 0; i < a->rank - 1; i++) {
        if (a->dims[i] != d->dims[i] || a->dims[i] < 1) return false;
        r *= a->dims[i];
    }
    if (!(rec->bias.rank == 0 && rec->bias.nbytes == 0) && rec->bias.nbytes != n * (int64_t)sizeof(float))
        return false;
    *rows = r, *K = k;
    return rec->wei_ref.loc == KN_LOC_WEIGHTS && posts_supported(rec);
}

bool kn_pw_matmul_supported(const kn_abi_dnnl *rec)
{
    int64_t rows, K;
    return (kn_cpu_features() & KN_CPU_AVX512F) && matmul_shape(rec, &rows, &K);
}

int kn_pw_create_matmul(const kn_abi_dnnl *rec, const unsigned char *weights, kn_pw **out)
{
    *out = NULL;
    int64_t rows, K;
    if (!(kn_cpu_features() & KN_CPU_AVX512F) || !matmul_shape(rec, &rows, &K))
        return kn_error(KN_ERR_UNSUPPORTED, "matmul: not one the AVX-512 kernel runs");
    kn_pw *w = calloc(1, sizeof *w);
    if (!w) return kn_error(KN_ERR_NOMEM, "out of memory");
    w->C = K, w->O = rec->dst.dims[rec->dst.rank - 1];
    w->sh = w->sw = 1;
    w->len = rows, w->lines = 1;
    /* B [K][N]: (o, c) at c * N + o; with trans_b [N][K]: at o * K + c */
    return rec->trans_b ? pw_make(w, rec, weights, K, 1, "matmul", out)
                        : pw_make(w, rec, weights, 1, w->O, "matmul", out);
}

void kn_pw_free(kn_pw *w)
{
    if (!w) return;
    kn_big_free(w->wei);
    free(w->bias_pad);
    free(w);
}

#if defined(__x86_64__) && defined(__GNUC__)

typedef struct pw_run {
    const kn_pw *w;
    const float *src, *bias, *res;
    float *dst;
    int64_t len, per_line; /* this run's pixels per line and blocks per line (a matmul's rows may be fewer) */
} pw_run;

/* Block b's rows (returned), its first output pixel p0 and the offset in
 * src of that pixel's input pixel a0. */
static inline int pw_block(const pw_run *r, int64_t b, int64_t *p0, int64_t *a0)
{
    const kn_pw *w = r->w;
    int64_t line = b / r->per_line, x0 = b % r->per_line * w->rows;
    *p0 = line * w->len + x0;
    /* its input pixel: p0 itself with stride 1, else (n, oy * sh, x0 * sw) */
    int64_t in0 = w->lines == 1 ? *p0 : ((line / w->OH * w->H + line % w->OH * w->sh) * w->W + x0 * w->sw);
    *a0 = in0 * w->C;
    return r->len - x0 < w->rows ? (int)(r->len - x0) : w->rows;
}

/* A block of the pair that ends with the short panel (N not a multiple of
 * 16; no residual then): the pair's first panel, if it has two, straight
 * into dst, the short one into a block aside, then its real columns into
 * dst, so that dst is never written past N. a, B, kn, pf, npf and cin as
 * kn_gemm512_rows_acc's (cin NULL: from the bias, whole K); pad: the
 * pair's part of the padded bias, or NULL where the bias is in cin. */
KN_TARGET_AVX512 static void pw_short_pair(const kn_pw *w, int rows, int np, const float *a, int64_t lda,
                                           const float *B, int64_t kn, const float *pf, int64_t npf,
                                           const float *cin, int64_t ldc, float *d, kn_gemm512_epi e,
                                           const float *pad)
{
    int64_t step = w->C * KN_GEMM512_COLS, at = (np - 1) * KN_GEMM512_COLS;
    if (np == 2) kn_gemm512_rows_acc(rows, 1, a, lda, B, step, kn, pf, npf, cin, ldc, d, w->O, &e);
    float aside[KN_GEMM512_ROWS * KN_GEMM512_COLS];
    e.bias = pad ? pad + at : NULL;
    kn_gemm512_rows_acc(rows, 1, a, lda, B + at * w->C, step, kn, pf, 0, cin ? cin + at : NULL, ldc, aside,
                        KN_GEMM512_COLS, &e);
    for (int i = 0; i < rows; i++)
        memcpy(d + i * w->O + at, aside + i * KN_GEMM512_COLS, (size_t)w->tail * sizeof(float));
}

/* Item `it` (blocks [b0, b1) times the panel pair from panel q) with K in
 * w->kparts parts: each part over every block, partial sums aside in acc,
 * the epilogue with the last. While a part runs, each block prefetches a
 * share of the next part's panels (after the last part, of the next
 * item's first). */
KN_TARGET_AVX512 static void pw_item_parts(const pw_run *r, int64_t it, int64_t hi, int64_t b0, int64_t b1, int64_t q,
                                           float *acc)
{
    const kn_pw *w = r->w;
    int64_t panels = w->panels, pairs = (panels + 1) / 2, K = w->C, step = K * KN_GEMM512_COLS;
    int64_t kc = (K + w->kparts - 1) / w->kparts;
    int np = q + 1 < panels ? 2 : 1;
    bool short_pair = w->tail && q + np == panels;
    const float *B = w->wei + q * step;
    /* the pair's bias, padded when it ends with the short panel */
    const float *bias = !r->bias ? NULL : short_pair ? w->bias_pad + q * KN_GEMM512_COLS : r->bias + q * KN_GEMM512_COLS;
    kn_gemm512_epi first = {.bias = bias};
    int64_t nq = (it + 1) % pairs * 2;
    for (int64_t part = 0; part < w->kparts; part++) {
        int64_t k0 = part * kc, kn = K - k0 < kc ? K - k0 : kc;
        bool last = part + 1 == w->kparts;
        /* the next part's panels: this pair's, or the next item's unless it
         * is the next group's first (read at this group's start) */
        const float *next = last ? w->wei + nq * step : B + (k0 + kc) * KN_GEMM512_COLS;
        int next_panels = !last ? np : it + 1 >= hi || nq == 0 ? 0 : nq + 1 < panels ? 2 : 1;
        /* the next part's lines of each panel, a share of them per block */
        int64_t nb = b1 - b0, per_panel = next_panels ? (nb + next_panels - 1) / next_panels : 1;
        int64_t share = (kc + per_panel - 1) / per_panel;
        for (int64_t b = b0; b < b1; b++) {
            int64_t p0, a0, panel = (b - b0) / per_panel, from = (b - b0) % per_panel * share;
            int rows = pw_block(r, b, &p0, &a0);
            const float *a = r->src + a0 + k0, *Bk = B + k0 * KN_GEMM512_COLS;
            int64_t npf = panel < next_panels && from < kc ? (kc - from < share ? kc - from : share) : 0;
            npf = npf < kn ? npf : kn;
            const float *pf = npf ? next + panel * step + from * KN_GEMM512_COLS : Bk;
            float *ab = acc + (b - b0) * w->rows * 2 * KN_GEMM512_COLS;
            const float *cin = part ? ab : NULL;
            int64_t lda = w->sw * K, lacc = 2 * KN_GEMM512_COLS;
            if (!last) {
                kn_gemm512_rows_acc(rows, np, a, lda, Bk, step, kn, pf, npf, cin, lacc, ab, lacc,
                                    part ? NULL : &first);
                continue;
            }
            kn_gemm512_epi e = w->epi;
            e.bias = NULL; /* in the partial sums since the first part */
            e.res = r->res ? r->res + p0 * w->O + q * KN_GEMM512_COLS : NULL, e.ldr = w->O;
            float *d = r->dst + p0 * w->O + q * KN_GEMM512_COLS;
            if (short_pair) pw_short_pair(w, rows, np, a, lda, Bk, kn, pf, npf, cin, lacc, d, e, NULL);
            else kn_gemm512_rows_acc(rows, np, a, lda, Bk, step, kn, pf, npf, cin, lacc, d, w->O, &e);
        }
    }
}

/* (block group, panel pair) items [lo, hi). */
KN_TARGET_AVX512 static int pw_chunk(void *args, int64_t lo, int64_t hi)
{
    const pw_run *r = args;
    const kn_pw *w = r->w;
    if (w->kparts > 1) {
        float acc[ACC_ROWS * 2 * KN_GEMM512_COLS] __attribute__((aligned(64)));
        int64_t pairs = (w->panels + 1) / 2, blocks = w->lines * r->per_line;
        for (int64_t it = lo; it < hi; it++) {
            int64_t b0 = it / pairs * w->group, b1 = b0 + w->group < blocks ? b0 + w->group : blocks;
            pw_item_parts(r, it, hi, b0, b1, it % pairs * 2, acc);
        }
        return KN_OK;
    }
    int64_t panels = w->panels, pairs = (panels + 1) / 2, K = w->C, blocks = w->lines * r->per_line;
    for (int64_t it = lo; it < hi; it++) {
        int64_t g = it / pairs, q = it % pairs * 2;
        int64_t b0 = g * w->group, b1 = b0 + w->group < blocks ? b0 + w->group : blocks;
        const float *B = w->wei + q * K * KN_GEMM512_COLS;
        int np = q + 1 < panels ? 2 : 1;
        /* the next item's panels, unless it is the next group's first (the same as this group's first) */
        int64_t nq = (it + 1) % pairs * 2;
        int64_t next_panels = it + 1 >= hi || nq == 0 ? 0 : nq + 1 < panels ? 2 : 1;
        const float *next = w->wei + nq * K * KN_GEMM512_COLS;
        for (int64_t b = b0; b < b1; b++) {
            int64_t p0, a0;
            int rows = pw_block(r, b, &p0, &a0);
            kn_gemm512_epi e = w->epi;
            e.bias = r->bias ? r->bias + q * KN_GEMM512_COLS : NULL;
            e.res = r->res ? r->res + p0 * w->O + q * KN_GEMM512_COLS : NULL, e.ldr = w->O;
            const float *pf = b - b0 < next_panels ? next + (b - b0) * K * KN_GEMM512_COLS : B;
            const float *a = r->src + a0;
            float *d = r->dst + p0 * w->O + q * KN_GEMM512_COLS;
            if (!w->tail || q + np < panels)
                kn_gemm512_rows(rows, np, a, w->sw * K, B, K * KN_GEMM512_COLS, K, pf, d, w->O, &e);
            else
                pw_short_pair(w, rows, np, a, w->sw * K, B, K, pf, pf != B ? K : 0, NULL, 0, d, e,
                              r->bias ? w->bias_pad + q * KN_GEMM512_COLS : NULL);
        }
    }
    return KN_OK;
}

int kn_pw_exec_rows(const kn_pw *w, int64_t rows, const float *src, const float *bias, float *dst,
                    const float *residual, int threads)
{
    if (w->has_sum && !residual) return kn_error(KN_ERR_INVALID, "1x1 convolution: the sum post-op has no input");
    pw_run r = {.w = w,
                .src = src,
                .bias = w->bias ? w->bias : w->has_bias ? bias : NULL,
                .res = w->has_sum ? residual : NULL,
                .dst = dst,
                .len = w->len,
                .per_line = w->per_line};
    if (w->has_bias && !r.bias) return kn_error(KN_ERR_INVALID, "1x1 convolution: no bias given");
    if (w->lines == 1 && rows > 0 && rows < w->len) /* a matmul's first rows: one line, fewer blocks */
        r.len = rows, r.per_line = (rows + w->rows - 1) / w->rows;
    int64_t blocks = w->lines * r.per_line, groups = (blocks + w->group - 1) / w->group;
    int64_t pairs = (w->panels + 1) / 2;
    return kn_rt_parallel_for_threads(threads, pw_chunk, &r, groups * pairs);
}

#else

int kn_pw_exec_rows(const kn_pw *w, int64_t rows, const float *src, const float *bias, float *dst,
                    const float *residual, int threads)
{
    (void)w, (void)rows, (void)src, (void)bias, (void)dst, (void)residual, (void)threads;
    return kn_error(KN_ERR_UNSUPPORTED, "1x1 convolution: needs an x86-64 CPU with AVX-512");
}

#endif

int kn_pw_exec(const kn_pw *w, const float *src, const float *bias, float *dst, const float *residual, int threads)
{
    return kn_pw_exec_rows(w, 0, src, bias, dst, residual, threads);
}
