/*
 * Plain C reference kernels for AffineGrid, DeformConv and TfIdfVectorizer
 * (see k_misc2.h). Arithmetic is done in double through kn_load_f64 /
 * kn_store_f64 so one loop serves every floating dtype.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_misc2.h"

/* ---- AffineGrid ------------------------------------------------------------------------ */

/* Normalized coordinate of pixel i of a dim of size n (torch's convention:
 * corners at ±1 when aligned, pixel centres otherwise). */
static double grid_coord(int64_t i, int64_t n, bool align)
{
    if (align) return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

int kn_k_affine_grid(const kn_tensor *theta, int s, const int64_t *size, bool align_corners, kn_tensor *out)
{
    if (s < 2 || s > 3 || theta->rank != 3 || theta->dims[1] != s || theta->dims[2] != s + 1)
        return kn_error(KN_ERR_INVALID, "theta must have shape (N, %d, %d)", s, s + 1);
    int64_t N = theta->dims[0], npts = 1;
    for (int d = 0; d < s; d++) npts *= size[d];
    if (out->rank != s + 2 || out->dims[0] != N || kn_tensor_numel(out) != N * npts * s)
        return kn_error(KN_ERR_INTERNAL, "affine grid output has the wrong shape");
    size_t o = 0;
    for (int64_t n = 0; n < N; n++) {
        size_t tb = (size_t)(n * s * (s + 1));
        for (int64_t p = 0; p < npts; p++) {
            /* v = (x, y[, z], 1): v[c] is the coordinate of spatial dim s-1-c. */
            double v[4];
            int64_t rem = p;
            for (int d = s - 1; d >= 0; d--) {
                v[s - 1 - d] = grid_coord(rem % size[d], size[d], align_corners);
                rem /= size[d];
            }
            v[s] = 1.0;
            for (int r = 0; r < s; r++) {
                double acc = 0;
                for (int c = 0; c <= s; c++) acc += kn_load_f64(theta->dtype, theta->data, tb + (size_t)(r * (s + 1) + c)) * v[c];
                kn_store_f64(out->dtype, out->data, o++, acc);
            }
        }
    }
    return KN_OK;
}

/* ---- DeformConv ------------------------------------------------------------------------ */

/* Bilinear (multilinear) sample of one channel plane (s dims `in`, values at
 * x->data from element `base`) at fractional position pos; points outside
 * the plane count as zero. */
static double sample_plane(const kn_tensor *x, size_t base, int s, const int64_t *in, const double *pos)
{
    int64_t lo[KN_MAX_RANK];
    double fr[KN_MAX_RANK];
    for (int d = 0; d < s; d++) {
        if (!isfinite(pos[d]) || pos[d] <= -1.0 || pos[d] >= (double)in[d]) return 0.0;
        double f = floor(pos[d]);
        lo[d] = (int64_t)f;
        fr[d] = pos[d] - f;
    }
    double acc = 0;
    for (int corner = 0; corner < (1 << s); corner++) {
        double wgt = 1.0;
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < s && inside; d++) {
            int bit = (corner >> d) & 1;
            int64_t idx = lo[d] + bit;
            if (idx < 0 || idx >= in[d]) inside = false;
            wgt *= bit ? fr[d] : 1.0 - fr[d];
            off = off * in[d] + idx;
        }
        if (inside && wgt != 0.0) acc += wgt * kn_load_f64(x->dtype, x->data, base + (size_t)off);
    }
    return acc;
}

/* Checks the shapes of the DeformConv operands against each other and p. */
static int deform_check(const kn_tensor *x, const kn_tensor *w, const kn_tensor *offset, const kn_tensor *b,
                        const kn_tensor *mask, const kn_deform_params *p, const kn_tensor *out, int64_t K)
{
    int s = p->s;
    int64_t N = x->dims[0], C = x->dims[1], OC = w->dims[0];
    if (p->group <= 0 || p->offset_group <= 0 || C % p->group || OC % p->group || C % p->offset_group)
        return kn_error(KN_ERR_INVALID, "group %lld / offset_group %lld do not divide %lld input / %lld output channels",
                        (long long)p->group, (long long)p->offset_group, (long long)C, (long long)OC);
    if (w->rank != s + 2 || w->dims[1] * p->group != C)
        return kn_error(KN_ERR_INVALID, "W must have shape (M, C/group, k...) with C = %lld", (long long)C);
    if (offset->rank != s + 2 || offset->dims[0] != N || offset->dims[1] != p->offset_group * K * s)
        return kn_error(KN_ERR_INVALID, "offset must have shape (N, %lld, out...)", (long long)(p->offset_group * K * s));
    if (out->rank != s + 2 || out->dims[0] != N || out->dims[1] != OC)
        return kn_error(KN_ERR_INTERNAL, "deform conv output has the wrong shape");
    for (int d = 0; d < s; d++)
        if (offset->dims[2 + d] != out->dims[2 + d])
            return kn_error(KN_ERR_INVALID, "offset spatial dim %d is %lld, output's is %lld", d,
                            (long long)offset->dims[2 + d], (long long)out->dims[2 + d]);
    if (b && (b->rank != 1 || b->dims[0] != OC)) return kn_error(KN_ERR_INVALID, "B must have shape (%lld)", (long long)OC);
    if (mask) {
        bool ok = mask->rank == s + 2 && mask->dims[0] == N && mask->dims[1] == p->offset_group * K;
        for (int d = 0; ok && d < s; d++) ok = mask->dims[2 + d] == out->dims[2 + d];
        if (!ok) return kn_error(KN_ERR_INVALID, "mask must have shape (N, %lld, out...)", (long long)(p->offset_group * K));
    }
    return KN_OK;
}

int kn_k_deform_conv(const kn_tensor *x, const kn_tensor *w, const kn_tensor *offset, const kn_tensor *b,
                     const kn_tensor *mask, const kn_deform_params *p, kn_tensor *out)
{
    int s = p->s;
    if (s < 1 || s > KN_MAX_RANK - 2 || x->rank != s + 2) return kn_error(KN_ERR_INVALID, "X rank %d is not 2 + %d", x->rank, s);
    int64_t K = 1, P = 1, IN = 1;
    for (int d = 0; d < s; d++) {
        K *= w->rank == s + 2 ? w->dims[2 + d] : 1;
        P *= out->dims[2 + d];
        IN *= x->dims[2 + d];
    }
    int st = deform_check(x, w, offset, b, mask, p, out, K);
    if (st) return st;
    int64_t N = x->dims[0], C = x->dims[1], OC = w->dims[0];
    int64_t cg = C / p->group, og_ = OC / p->group, cog = C / p->offset_group;
    const int64_t *in = &x->dims[2], *kd = &w->dims[2], *od = &out->dims[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < OC; m++) {
            int64_t g = m / og_;
            for (int64_t q = 0; q < P; q++) {
                int64_t oi[KN_MAX_RANK], rem = q;
                for (int d = s - 1; d >= 0; d--) {
                    oi[d] = rem % od[d];
                    rem /= od[d];
                }
                double acc = b ? kn_load_f64(b->dtype, b->data, (size_t)m) : 0.0;
                for (int64_t cl = 0; cl < cg; cl++) {
                    int64_t c = g * cg + cl, og = c / cog;
                    for (int64_t k = 0; k < K; k++) {
                        int64_t ki[KN_MAX_RANK], kr = k;
                        for (int d = s - 1; d >= 0; d--) {
                            ki[d] = kr % kd[d];
                            kr /= kd[d];
                        }
                        double pos[KN_MAX_RANK];
                        for (int d = 0; d < s; d++) {
                            size_t oo = (size_t)((((n * p->offset_group + og) * K + k) * s + d) * P + q);
                            pos[d] = (double)(-p->pads[d] + p->strides[d] * oi[d] + p->dilations[d] * ki[d]) +
                                     kn_load_f64(offset->dtype, offset->data, oo);
                        }
                        double v = sample_plane(x, (size_t)((n * C + c) * IN), s, in, pos);
                        if (v == 0.0) continue;
                        if (mask) v *= kn_load_f64(mask->dtype, mask->data, (size_t)(((n * p->offset_group + og) * K + k) * P + q));
                        acc += v * kn_load_f64(w->dtype, w->data, (size_t)((m * cg + cl) * K + k));
                    }
                }
                kn_store_f64(out->dtype, out->data, (size_t)((n * OC + m) * P + q), acc);
            }
        }
    return KN_OK;
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------- */

typedef struct ngram {
    int64_t size, start; /* n-gram's length and first item in the pool */
    int64_t col;         /* output column */
} ngram;

/* Flattens the pool into n-grams of the sizes in [min_gram, max_gram], in id
 * order; ngram_indexes maps each id (over all sizes) to an output column. */
static int tfidf_ngrams(const kn_tfidf_params *p, ngram **out, int64_t *count)
{
    *out = NULL;
    *count = 0;
    ngram *g = malloc(sizeof *g * (size_t)(p->n_pool > 0 ? p->n_pool : 1));
    if (!g) return kn_error(KN_ERR_NOMEM, "out of memory for %lld n-grams", (long long)p->n_pool);
    int64_t id = 0, cnt = 0;
    for (int64_t i = 0; i < p->n_counts; i++) {
        int64_t size = i + 1, beg = p->counts[i], end = i + 1 < p->n_counts ? p->counts[i + 1] : p->n_pool;
        if (beg < 0 || end > p->n_pool || beg > end) {
            free(g);
            return kn_error(KN_ERR_INVALID, "ngram_counts[%lld] = %lld is out of range for a pool of %lld",
                            (long long)i, (long long)beg, (long long)p->n_pool);
        }
        for (int64_t j = 0; j + size <= end - beg; j += size, id++) {
            if (size < p->min_gram || size > p->max_gram) continue;
            if (id >= p->n_indexes) {
                free(g);
                return kn_error(KN_ERR_INVALID, "ngram_indexes has %lld entries, n-gram %lld has none",
                                (long long)p->n_indexes, (long long)id);
            }
            int64_t col = p->indexes[id];
            if (col < 0 || col >= p->out_size) {
                free(g);
                return kn_error(KN_ERR_INVALID, "ngram_indexes[%lld] = %lld is out of range", (long long)id, (long long)col);
            }
            g[cnt++] = (ngram){size, beg + j, col};
        }
    }
    *out = g;
    *count = cnt;
    return KN_OK;
}

/* Output column of the n-gram of length size starting at row[0] with items
 * every `skip` apart; -1 if none. A later duplicate wins (as in the ONNX
 * reference's trie). */
static int64_t tfidf_match(const kn_tfidf_params *p, const ngram *g, int64_t ng, const kn_tensor *x, size_t row0,
                           int64_t skip, int64_t size)
{
    int64_t col = -1;
    for (int64_t i = 0; i < ng; i++) {
        if (g[i].size != size) continue;
        int64_t k = 0;
        while (k < size && kn_load_i64(x->dtype, x->data, row0 + (size_t)(k * skip)) == p->pool[g[i].start + k]) k++;
        if (k == size) col = g[i].col;
    }
    return col;
}

int kn_k_tfidf(const kn_tensor *x, const kn_tfidf_params *p, kn_tensor *out)
{
    if (x->rank != 1 && x->rank != 2) return kn_error(KN_ERR_INVALID, "X must be [C] or [B, C], got rank %d", x->rank);
    if (p->n_weights && p->n_weights < p->out_size)
        return kn_error(KN_ERR_INVALID, "%lld weights for %lld output columns", (long long)p->n_weights, (long long)p->out_size);
    int64_t B = x->rank == 2 ? x->dims[0] : 1, C = x->dims[x->rank - 1];
    if (kn_tensor_numel(out) != B * p->out_size) return kn_error(KN_ERR_INTERNAL, "tfidf output has the wrong shape");
    ngram *g;
    int64_t ng;
    int st = tfidf_ngrams(p, &g, &ng);
    if (st) return st;
    int64_t *freq = calloc((size_t)(p->out_size > 0 ? p->out_size : 1), sizeof *freq);
    if (!freq) {
        free(g);
        return kn_error(KN_ERR_NOMEM, "out of memory for %lld counts", (long long)p->out_size);
    }
    for (int64_t r = 0; r < B; r++) {
        memset(freq, 0, sizeof *freq * (size_t)p->out_size);
        /* Unigrams are counted once; longer n-grams once per skip distance. */
        int64_t first = p->min_gram > 1 ? p->min_gram : 1;
        for (int64_t skip = 1; skip <= p->max_skip + 1; skip++) {
            for (int64_t start = 0; start < C; start++)
                for (int64_t size = first; size <= p->max_gram && start + (size - 1) * skip < C; size++) {
                    int64_t col = tfidf_match(p, g, ng, x, (size_t)(r * C + start), skip, size);
                    if (col >= 0) freq[col]++;
                }
            if (first == 1) first = 2;
        }
        for (int64_t c = 0; c < p->out_size; c++) {
            double f = (double)freq[c], wgt = p->n_weights ? p->weights[c] : 1.0;
            double v = p->mode == KN_TFIDF_TF ? f : p->mode == KN_TFIDF_IDF ? (f > 0 ? wgt : 0.0) : wgt * f;
            kn_store_f64(out->dtype, out->data, (size_t)(r * p->out_size + c), v);
        }
    }
    free(freq);
    free(g);
    return KN_OK;
}
