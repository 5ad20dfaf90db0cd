/* Reference kernels of the 'misc' family (k_misc.h): the losses,
 * CenterCropPad, ReverseSequence, TfIdfVectorizer. */
#include "k_misc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_util.h"

/* ---- losses --------------------------------------------------------------------------- */

int kn_k_nll_loss(const kn_tensor *x, const kn_tensor *target, const kn_tensor *weight,
                  bool has_ignore, int64_t ignore_index, kn_loss_reduction red, kn_tensor *out)
{
    if (x->rank < 2 || target->rank != x->rank - 1)
        return kn_error(KN_ERR_INVALID, "loss: input rank %d and target rank %d do not fit (N, C, ...) / (N, ...)",
                        x->rank, target->rank);
    if (target->dims[0] != x->dims[0])
        return kn_error(KN_ERR_INVALID, "loss: target batch %lld differs from input batch %lld",
                        (long long)target->dims[0], (long long)x->dims[0]);
    for (int i = 2; i < x->rank; i++)
        if (target->dims[i - 1] != x->dims[i])
            return kn_error(KN_ERR_INVALID, "loss: target dim %d is %lld, input has %lld", i - 1,
                            (long long)target->dims[i - 1], (long long)x->dims[i]);
    int64_t N = x->dims[0], C = x->dims[1], D = 1;
    for (int i = 2; i < x->rank; i++) D *= x->dims[i];
    if (weight && (weight->rank != 1 || weight->dims[0] != C))
        return kn_error(KN_ERR_INVALID, "loss: weight must have shape (%lld)", (long long)C);
    double sum = 0, wsum = 0;
    for (int64_t nn = 0; nn < N; nn++)
        for (int64_t d = 0; d < D; d++) {
            size_t ti = (size_t)(nn * D + d);
            int64_t t = kn_load_i64(target->dtype, target->data, ti);
            double l = 0, w = 0;
            if (!(has_ignore && t == ignore_index)) {
                if (t < 0 || t >= C)
                    return kn_error(KN_ERR_INVALID, "loss: target %lld is outside [0, %lld)", (long long)t, (long long)C);
                w = weight ? kn_load_f64(weight->dtype, weight->data, (size_t)t) : 1.0;
                l = -kn_load_f64(x->dtype, x->data, (size_t)((nn * C + t) * D + d)) * w;
            }
            if (red == KN_LOSS_NONE) kn_store_f64(out->dtype, out->data, ti, l);
            sum += l;
            wsum += w;
        }
    if (red == KN_LOSS_SUM) kn_store_f64(out->dtype, out->data, 0, sum);
    if (red == KN_LOSS_MEAN) kn_store_f64(out->dtype, out->data, 0, sum / wsum);
    return KN_OK;
}

int kn_k_log_softmax_axis1(const kn_tensor *x, kn_tensor *out)
{
    if (x->rank < 2) return kn_error(KN_ERR_INVALID, "log-softmax: rank %d, expected >= 2", x->rank);
    int64_t N = x->dims[0], C = x->dims[1], D = 1;
    for (int i = 2; i < x->rank; i++) D *= x->dims[i];
    for (int64_t nn = 0; nn < N; nn++)
        for (int64_t d = 0; d < D; d++) {
            double m = -INFINITY, s = 0;
            for (int64_t c = 0; c < C; c++) {
                double v = kn_load_f64(x->dtype, x->data, (size_t)((nn * C + c) * D + d));
                if (v > m) m = v;
            }
            for (int64_t c = 0; c < C; c++)
                s += exp(kn_load_f64(x->dtype, x->data, (size_t)((nn * C + c) * D + d)) - m);
            double ls = m + log(s);
            for (int64_t c = 0; c < C; c++) {
                size_t k = (size_t)((nn * C + c) * D + d);
                kn_store_f64(out->dtype, out->data, k, kn_load_f64(x->dtype, x->data, k) - ls);
            }
        }
    return KN_OK;
}

/* ---- crops and reversals ------------------------------------------------------------------- */

int kn_k_center_crop_pad(const kn_tensor *x, kn_tensor *out)
{
    int st = kn_k_need_bytes(x, "CenterCropPad");
    if (st) return st;
    if (out->rank != x->rank || out->dtype != x->dtype)
        return kn_error(KN_ERR_INTERNAL, "CenterCropPad: output rank/dtype differs from input");
    int64_t off[KN_MAX_RANK], xs[KN_MAX_RANK];
    for (int i = 0; i < x->rank; i++) {
        int64_t d = x->dims[i] - out->dims[i];
        off[i] = d >= 0 ? d / 2 : -((-d) / 2);
    }
    kn_shape_strides(x->rank, x->dims, xs);
    if (kn_tensor_numel(out) <= 0) return KN_OK;
    size_t esz = kn_dtype_size(x->dtype), o = 0;
    kn_index it;
    kn_index_init(&it, out->rank, out->dims);
    do {
        int64_t src = 0;
        bool inside = true;
        for (int i = 0; i < x->rank && inside; i++) {
            int64_t j = it.idx[i] + off[i];
            inside = j >= 0 && j < x->dims[i];
            src += j * xs[i];
        }
        if (inside) kn_k_copy_elem(x, (size_t)src, out, o, esz);
        o++;
    } while (kn_index_next(&it));
    return KN_OK;
}

int kn_k_reverse_sequence(const kn_tensor *x, const kn_tensor *lens, int batch_axis, int time_axis,
                          kn_tensor *out)
{
    int st = kn_k_need_bytes(x, "ReverseSequence");
    if (st) return st;
    if (batch_axis < 0 || batch_axis >= x->rank || time_axis < 0 || time_axis >= x->rank || batch_axis == time_axis)
        return kn_error(KN_ERR_INVALID, "ReverseSequence: bad batch_axis %d / time_axis %d", batch_axis, time_axis);
    if (kn_tensor_numel(lens) != x->dims[batch_axis])
        return kn_error(KN_ERR_INVALID, "ReverseSequence: sequence_lens has %lld entries, batch is %lld",
                        (long long)kn_tensor_numel(lens), (long long)x->dims[batch_axis]);
    for (int64_t b = 0; b < x->dims[batch_axis]; b++) {
        int64_t l = kn_load_i64(lens->dtype, lens->data, (size_t)b);
        if (l < 0 || l > x->dims[time_axis])
            return kn_error(KN_ERR_INVALID, "ReverseSequence: sequence length %lld outside [0, %lld]",
                            (long long)l, (long long)x->dims[time_axis]);
    }
    int64_t xs[KN_MAX_RANK];
    kn_shape_strides(x->rank, x->dims, xs);
    if (kn_tensor_numel(x) <= 0) return KN_OK;
    size_t esz = kn_dtype_size(x->dtype), o = 0;
    kn_index it;
    kn_index_init(&it, x->rank, x->dims);
    do {
        int64_t l = kn_load_i64(lens->dtype, lens->data, (size_t)it.idx[batch_axis]);
        int64_t t = it.idx[time_axis];
        int64_t src = (int64_t)o + (t < l ? (l - 1 - 2 * t) * xs[time_axis] : 0);
        kn_k_copy_elem(x, (size_t)src, out, o, esz);
        o++;
    } while (kn_index_next(&it));
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
