/*
 * nn_conv.c — convolution kernels: Conv (im2col + a small register-blocked
 * GEMM, in f32 or f64), ConvTranspose and Col2Im (direct scatter loops in
 * double). Other float dtypes go through the f64 path.
 */
#if defined(__GNUC__) && !defined(__clang__)
/* The GEMM inner loops depend on vectorization, which -O2 does not fully do. */
#pragma GCC optimize("O3")
#endif

#include <stdlib.h>
#include <string.h>

#include "k_nn.h"

double *kn_nn_to_f64(const kn_tensor *t)
{
    int64_t n = kn_tensor_numel(t);
    if (n < 0) { kn_error(KN_ERR_INVALID, "bad tensor shape"); return NULL; }
    double *v = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!v) { kn_error(KN_ERR_NOMEM, "out of memory (%lld doubles)", (long long)n); return NULL; }
    if (t->dtype == KN_F64) {
        if (n) memcpy(v, t->data, (size_t)n * sizeof(double));
    } else if (t->dtype == KN_F32) {
        const float *f = t->data;
        for (int64_t i = 0; i < n; i++) v[i] = f[i];
    } else {
        for (int64_t i = 0; i < n; i++) v[i] = kn_load_f64(t->dtype, t->data, (size_t)i);
    }
    return v;
}

void kn_nn_from_f64(kn_tensor *t, const double *v)
{
    int64_t n = kn_tensor_numel(t);
    if (t->dtype == KN_F64) {
        if (n > 0) memcpy(t->data, v, (size_t)n * sizeof(double));
        return;
    }
    for (int64_t i = 0; i < n; i++) kn_store_f64(t->dtype, t->data, (size_t)i, v[i]);
}

/* Geometry of one convolution, shared by the f32 and f64 instantiations. */
typedef struct conv_geom {
    int nsp;
    int64_t N, C, M, group, Cg, Mg;
    int64_t in[KN_NN_MAXSP], out[KN_NN_MAXSP];
    int64_t in_prod, out_prod, k_prod, K; /* K = Cg * k_prod, rows of im2col */
    bool direct;                          /* 1x1, stride 1, no pad: col is X itself */
    const kn_nn_window *win;
} conv_geom;

static void conv_geom_init(conv_geom *g, const kn_tensor *x, const kn_tensor *w,
                           const kn_nn_window *win, int64_t group, const kn_tensor *y)
{
    g->nsp = win->nsp;
    g->win = win;
    g->N = x->dims[0];
    g->C = x->dims[1];
    g->M = y->dims[1];
    g->group = group;
    g->Cg = g->C / group;
    g->Mg = g->M / group;
    g->in_prod = g->out_prod = g->k_prod = 1;
    g->direct = true;
    for (int d = 0; d < g->nsp; d++) {
        g->in[d] = x->dims[2 + d];
        g->out[d] = y->dims[2 + d];
        g->in_prod *= g->in[d];
        g->out_prod *= g->out[d];
        g->k_prod *= w->dims[2 + d];
        if (w->dims[2 + d] != 1 || win->strides[d] != 1 || win->pads[d] || win->pads[g->nsp + d])
            g->direct = false;
    }
    g->K = g->Cg * g->k_prod;
}

/* Instantiates im2col, the GEMM and the conv driver for element type T. */
#define KN_DEFINE_CONV(T, SFX)                                                                  \
    /* Rows of col are (c, kernel tap); columns are the output positions of                    \
     * output rows [ou0, ou0 + nou) (a row = all positions along the last axis). */            \
    static void im2col_##SFX(const conv_geom *g, const T *x, T *col, int64_t ou0, int64_t nou) \
    {                                                                                           \
        const kn_nn_window *win = g->win;                                                       \
        int nsp = g->nsp, last = nsp - 1;                                                       \
        int64_t olast = g->out[last];                                                           \
        for (int64_t row = 0; row < g->K; row++) {                                              \
            int64_t c = row / g->k_prod, kr = row % g->k_prod, k[KN_NN_MAXSP];                   \
            for (int d = nsp - 1; d >= 0; d--) {                                                \
                int64_t kd = win->kernel[d];                                                    \
                k[d] = kr % kd;                                                                 \
                kr /= kd;                                                                       \
            }                                                                                   \
            const T *xc = x + c * g->in_prod;                                                   \
            T *dst = col + row * nou * olast;                                                   \
            for (int64_t ou = ou0; ou < ou0 + nou; ou++, dst += olast) {                        \
                int64_t rem = ou, base = 0, stride_in = 1;                                      \
                bool valid = true;                                                              \
                for (int d = last - 1; d >= 0; d--) {                                           \
                    int64_t od = rem % g->out[d];                                               \
                    rem /= g->out[d];                                                           \
                    int64_t id = od * win->strides[d] - win->pads[d] + k[d] * win->dilations[d]; \
                    if (id < 0 || id >= g->in[d]) valid = false;                                \
                    stride_in *= g->in[d + 1];                                                  \
                    base += id * stride_in;                                                     \
                }                                                                               \
                if (!valid) {                                                                   \
                    memset(dst, 0, (size_t)olast * sizeof(T));                                  \
                    continue;                                                                   \
                }                                                                               \
                int64_t s = win->strides[last], off = k[last] * win->dilations[last] -          \
                                                      win->pads[last];                          \
                int64_t il = g->in[last];                                                       \
                const T *xr = xc + base;                                                        \
                for (int64_t o = 0; o < olast; o++) {                                           \
                    int64_t i = o * s + off;                                                    \
                    dst[o] = (i >= 0 && i < il) ? xr[i] : (T)0;                                 \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
                                                                                                \
    /* Y[M x P] += A[M x K] * B[K x P], row-major with row strides K, ldb and  \
     * ldy. A 4 x 8 register block                                             \
     * (GNU vector extension, so it vectorizes at any -O and any ISA level)  \
     * accumulates over the whole K so Y is touched once per block. */        \
    typedef T vec8_##SFX __attribute__((vector_size(8 * sizeof(T))));                           \
    static void gemm_##SFX(int64_t M, int64_t P, int64_t K, const T *restrict A,                \
                           const T *restrict B, int64_t ldb, T *restrict Y, int64_t ldy)        \
    {                                                                                           \
        int64_t i0 = 0;                                                                         \
        for (; i0 + 4 <= M; i0 += 4) {                                                          \
            const T *a0 = A + i0 * K, *a1 = a0 + K, *a2 = a1 + K, *a3 = a2 + K;                 \
            int64_t j0 = 0;                                                                     \
            for (; j0 + 8 <= P; j0 += 8) {                                                      \
                vec8_##SFX c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0}, bv;                          \
                const T *b = B + j0;                                                            \
                for (int64_t k = 0; k < K; k++, b += ldb) {                                     \
                    memcpy(&bv, b, sizeof bv);                                                  \
                    c0 += a0[k] * bv;                                                           \
                    c1 += a1[k] * bv;                                                           \
                    c2 += a2[k] * bv;                                                           \
                    c3 += a3[k] * bv;                                                           \
                }                                                                               \
                T *y0 = Y + i0 * ldy + j0;                                                      \
                for (int j = 0; j < 8; j++) {                                                   \
                    y0[j] += c0[j];                                                             \
                    y0[ldy + j] += c1[j];                                                       \
                    y0[2 * ldy + j] += c2[j];                                                   \
                    y0[3 * ldy + j] += c3[j];                                                   \
                }                                                                               \
            }                                                                                   \
            for (; j0 < P; j0++)                                                                \
                for (int r = 0; r < 4; r++) {                                                   \
                    const T *ar = A + (i0 + r) * K;                                             \
                    T s = 0;                                                                    \
                    for (int64_t k = 0; k < K; k++) s += ar[k] * B[k * ldb + j0];               \
                    Y[(i0 + r) * ldy + j0] += s;                                                \
                }                                                                               \
        }                                                                                       \
        for (; i0 < M; i0++) {                                                                  \
            T *yr = Y + i0 * ldy;                                                               \
            for (int64_t k = 0; k < K; k++) {                                                   \
                T a = A[i0 * K + k];                                                            \
                const T *br = B + k * ldb;                                                      \
                for (int64_t j = 0; j < P; j++) yr[j] += a * br[j];                             \
            }                                                                                   \
        }                                                                                       \
    }                                                                                           \
                                                                                                \
    /* Tiles the output positions by whole output rows so the im2col buffer      \
     * stays near 4 MiB (cache-sized, and bounded for large images). */        \
    static int conv_##SFX(const conv_geom *g, const T *x, const T *w, const T *b, T *y)         \
    {                                                                                           \
        int64_t olast = g->out[g->nsp - 1], n_outer = g->out_prod / olast;                      \
        int64_t row_bytes = g->K * olast * (int64_t)sizeof(T);                                  \
        int64_t tile = row_bytes > 0 ? ((int64_t)4 << 20) / row_bytes : n_outer;                \
        tile = tile < 1 ? 1 : tile > n_outer ? n_outer : tile;                                  \
        T *col = NULL;                                                                          \
        if (!g->direct) {                                                                       \
            size_t n = (size_t)g->K * (size_t)(tile * olast);                                   \
            col = malloc((n ? n : 1) * sizeof(T));                                              \
            if (!col)                                                                           \
                return kn_error(KN_ERR_NOMEM, "Conv: out of memory for a %lldx%lld im2col buffer", \
                                (long long)g->K, (long long)(tile * olast));                    \
        }                                                                                       \
        for (int64_t n = 0; n < g->N; n++) {                                                    \
            for (int64_t gr = 0; gr < g->group; gr++) {                                         \
                const T *xg = x + (n * g->C + gr * g->Cg) * g->in_prod;                         \
                const T *wg = w + gr * g->Mg * g->K;                                            \
                T *yg = y + (n * g->M + gr * g->Mg) * g->out_prod;                              \
                for (int64_t m = 0; m < g->Mg; m++) {                                           \
                    T bv = b ? b[gr * g->Mg + m] : (T)0;                                        \
                    for (int64_t p = 0; p < g->out_prod; p++) yg[m * g->out_prod + p] = bv;     \
                }                                                                               \
                if (g->direct) {                                                                \
                    gemm_##SFX(g->Mg, g->out_prod, g->K, wg, xg, g->out_prod, yg, g->out_prod); \
                    continue;                                                                   \
                }                                                                               \
                for (int64_t ou = 0; ou < n_outer; ou += tile) {                                \
                    int64_t nou = n_outer - ou < tile ? n_outer - ou : tile;                    \
                    im2col_##SFX(g, xg, col, ou, nou);                                          \
                    gemm_##SFX(g->Mg, nou * olast, g->K, wg, col, nou * olast, yg + ou * olast, \
                               g->out_prod);                                                    \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
        free(col);                                                                              \
        return KN_OK;                                                                           \
    }

KN_DEFINE_CONV(float, f32)
KN_DEFINE_CONV(double, f64)

int kn_k_conv(const kn_tensor *x, const kn_tensor *w, const kn_tensor *b,
              const kn_nn_window *win, int64_t group, kn_tensor *y)
{
    conv_geom g;
    conv_geom_init(&g, x, w, win, group, y);
    if (kn_tensor_numel(y) == 0) return KN_OK;
    bool same = w->dtype == x->dtype && y->dtype == x->dtype && (!b || b->dtype == x->dtype);
    if (same && x->dtype == KN_F32)
        return conv_f32(&g, x->data, w->data, b ? b->data : NULL, y->data);
    if (same && x->dtype == KN_F64)
        return conv_f64(&g, x->data, w->data, b ? b->data : NULL, y->data);
    /* Half and bfloat16 models: widen everything, compute, narrow once. */
    double *xd = kn_nn_to_f64(x), *wd = kn_nn_to_f64(w), *bd = b ? kn_nn_to_f64(b) : NULL;
    double *yd = malloc((size_t)kn_tensor_numel(y) * sizeof(double));
    int st = KN_OK;
    if (!xd || !wd || (b && !bd) || !yd)
        st = kn_error(KN_ERR_NOMEM, "Conv: out of memory");
    else if (!(st = conv_f64(&g, xd, wd, bd, yd)))
        kn_nn_from_f64(y, yd);
    free(xd);
    free(wd);
    free(bd);
    free(yd);
    return st;
}

/* Splits a flat index over `dims` into a multi-index. */
static void unflatten(int64_t flat, int nd, const int64_t *dims, int64_t *idx)
{
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = flat % dims[d];
        flat /= dims[d];
    }
}

/* Flat output index of input position `ip` plus kernel tap `kp`, or -1 when it
 * falls outside the output (cropped by pads or output_shape). */
static int64_t scatter_pos(const kn_nn_window *win, const int64_t *ip, const int64_t *kp,
                           const int64_t *out)
{
    int64_t flat = 0;
    for (int d = 0; d < win->nsp; d++) {
        int64_t o = ip[d] * win->strides[d] + kp[d] * win->dilations[d] - win->pads[d];
        if (o < 0 || o >= out[d]) return -1;
        flat = flat * out[d] + o;
    }
    return flat;
}

/* Adds one im2col-style row (input positions of one (output channel, kernel
 * tap) pair) into the output plane it scatters to. */
static void scatter_row(const kn_nn_window *win, const double *row, int64_t in_prod, const int64_t *in,
                        const int64_t *kp, const int64_t *out, double *yplane)
{
    int64_t ip[KN_NN_MAXSP] = {0};
    for (int64_t i = 0; i < in_prod; i++) {
        int64_t o = scatter_pos(win, ip, kp, out);
        if (o >= 0) yplane[o] += row[i];
        for (int d = win->nsp - 1; d >= 0 && ++ip[d] == in[d]; d--) ip[d] = 0;
    }
}

/* ConvTranspose as GEMM + col2im: col[(m, tap) x in] = W_g^T * X_g, then
 * each row is scattered into the output. Computed in double. */
int kn_k_conv_transpose(const kn_tensor *x, const kn_tensor *w, const kn_tensor *b,
                        const kn_nn_window *win, int64_t group, kn_tensor *y)
{
    int nsp = win->nsp;
    int64_t N = x->dims[0], C = x->dims[1], M = y->dims[1], Cg = C / group, Mg = M / group;
    int64_t in_prod = 1, out_prod = 1, k_prod = 1;
    for (int d = 0; d < nsp; d++) {
        in_prod *= x->dims[2 + d];
        out_prod *= y->dims[2 + d];
        k_prod *= w->dims[2 + d];
    }
    int64_t R = Mg * k_prod, ny = kn_tensor_numel(y);
    double *xd = kn_nn_to_f64(x), *wd = kn_nn_to_f64(w), *bd = b ? kn_nn_to_f64(b) : NULL;
    double *yd = calloc((size_t)(ny ? ny : 1), sizeof(double));
    double *wt = malloc((size_t)(R * Cg * group > 0 ? R * Cg * group : 1) * sizeof(double));
    double *col = malloc((size_t)(R * in_prod > 0 ? R * in_prod : 1) * sizeof(double));
    int st = KN_OK;
    if (!xd || !wd || (b && !bd) || !yd || !wt || !col) {
        st = kn_error(KN_ERR_NOMEM, "ConvTranspose: out of memory");
        goto done;
    }
    /* W is C x (Mg * taps); each group's block transposed to (Mg * taps) x Cg. */
    for (int64_t g = 0; g < group; g++)
        for (int64_t c = 0; c < Cg; c++)
            for (int64_t r = 0; r < R; r++) wt[(g * R + r) * Cg + c] = wd[(g * Cg + c) * R + r];
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < group; g++) {
            memset(col, 0, (size_t)(R * in_prod) * sizeof(double));
            gemm_f64(R, in_prod, Cg, wt + g * R * Cg, xd + (n * C + g * Cg) * in_prod, in_prod, col, in_prod);
            for (int64_t r = 0; r < R; r++) {
                int64_t kp[KN_NN_MAXSP];
                unflatten(r % k_prod, nsp, w->dims + 2, kp);
                double *yplane = yd + (n * M + g * Mg + r / k_prod) * out_prod;
                scatter_row(win, col + r * in_prod, in_prod, x->dims + 2, kp, y->dims + 2, yplane);
            }
        }
    if (bd)
        for (int64_t n = 0; n < N; n++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t p = 0; p < out_prod; p++) yd[(n * M + m) * out_prod + p] += bd[m];
    kn_nn_from_f64(y, yd);
done:
    free(xd);
    free(wd);
    free(bd);
    free(yd);
    free(wt);
    free(col);
    return st;
}

int kn_k_col2im(const kn_tensor *x, const kn_nn_window *win, kn_tensor *y)
{
    int nsp = win->nsp;
    int64_t N = y->dims[0], C = y->dims[1], k_prod = 1, img_prod = 1, nblk[KN_NN_MAXSP];
    int64_t L = 1;
    for (int d = 0; d < nsp; d++) {
        int64_t img = y->dims[2 + d];
        int64_t eff = (win->kernel[d] - 1) * win->dilations[d] + 1;
        nblk[d] = (img + win->pads[d] + win->pads[nsp + d] - eff) / win->strides[d] + 1;
        if (nblk[d] < 0) nblk[d] = 0;
        k_prod *= win->kernel[d];
        img_prod *= img;
        L *= nblk[d];
    }
    if (x->dims[1] != C * k_prod || x->dims[2] != L)
        return kn_error(KN_ERR_INVALID,
                        "Col2Im: input is %lldx%lld per image, expected %lld (C*prod(block_shape)) x %lld blocks",
                        (long long)x->dims[1], (long long)x->dims[2], (long long)(C * k_prod),
                        (long long)L);
    double *xd = kn_nn_to_f64(x);
    int64_t ny = kn_tensor_numel(y);
    double *yd = calloc((size_t)(ny ? ny : 1), sizeof(double));
    if (!xd || !yd) {
        free(xd);
        free(yd);
        return kn_error(KN_ERR_NOMEM, "Col2Im: out of memory");
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t row = 0; row < C * k_prod; row++) {
            int64_t c = row / k_prod, kp[KN_NN_MAXSP], bp[KN_NN_MAXSP];
            unflatten(row % k_prod, nsp, win->kernel, kp);
            for (int64_t l = 0; l < L; l++) {
                unflatten(l, nsp, nblk, bp);
                int64_t o = scatter_pos(win, bp, kp, y->dims + 2);
                if (o >= 0) yd[(n * C + c) * img_prod + o] += xd[(n * C * k_prod + row) * L + l];
            }
        }
    kn_nn_from_f64(y, yd);
    free(xd);
    free(yd);
    return KN_OK;
}
