/* Reference kernels for the rarer ops of the 'misc' family (k_misc.h). */
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

/* ---- windows -------------------------------------------------------------------------- */

int kn_k_window(kn_window_kind kind, bool periodic, kn_tensor *out)
{
    int64_t n = kn_tensor_numel(out);
    double den = (double)(periodic ? n : n - 1);
    for (int64_t i = 0; i < n; i++) {
        double a = 2 * M_PI * (double)i / den, v;
        if (kind == KN_WINDOW_HANN) v = 0.5 - 0.5 * cos(a);
        else if (kind == KN_WINDOW_HAMMING) v = 25.0 / 46.0 - (21.0 / 46.0) * cos(a);
        else v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
        /* A one-point symmetric window divides 0 by 0; torch gives 1. */
        if (den == 0) v = 1.0;
        kn_store_f64(out->dtype, out->data, (size_t)i, v);
    }
    return KN_OK;
}

/* ---- crops, reversals, sampling ----------------------------------------------------------- */

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

/* Reflects x into [lo, hi] by folding at the borders (as ONNX's reference). */
static double gs_reflect(double x, double lo, double hi)
{
    double rng = hi - lo;
    if (rng <= 0 || !isfinite(x)) return lo;
    /* Parity of the number of folds decides which border the rest is measured from. */
    if (x < lo) {
        double dx = lo - x, n = floor(dx / rng), r = dx - n * rng;
        return fmod(n, 2.0) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, n = floor(dx / rng), r = dx - n * rng;
        return fmod(n, 2.0) == 0 ? hi - r : lo + r;
    }
    return x;
}

static void cubic_coeffs(double x, double c[4])
{
    const double a = -0.75;
    x = fabs(x);
    c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
    c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

typedef struct gs_geom {
    int k;                        /* spatial dims */
    const int64_t *dims;          /* k spatial sizes */
    int64_t strides[KN_MAX_RANK]; /* within one (n, c) plane */
    double lo[KN_MAX_RANK], hi[KN_MAX_RANK];
    kn_gs_pad pad;
} gs_geom;

/* Maps an integer tap position along dim d to an index, or -1 for a zero. */
static int64_t gs_tap(const gs_geom *g, int d, int64_t i)
{
    int64_t n = g->dims[d];
    if (i >= 0 && i < n) return i;
    if (g->pad == KN_GS_ZEROS) return -1;
    if (g->pad == KN_GS_BORDER) return i < 0 ? 0 : n - 1;
    int64_t r = (int64_t)gs_reflect((double)i, g->lo[d], g->hi[d]);
    return r < 0 ? 0 : r >= n ? n - 1 : r;
}

/* Interpolates one plane at continuous position pos: each dim has `taps`
 * positions starting at base[d] with weights w[d][t]; sums every combination. */
static double gs_combine(const kn_tensor *x, size_t plane, const gs_geom *g, const int64_t *base,
                         double w[][4], int taps)
{
    int64_t combos = 1;
    for (int d = 0; d < g->k; d++) combos *= taps;
    double acc = 0;
    for (int64_t c = 0; c < combos; c++) {
        int64_t rem = c, off = 0;
        double wt = 1;
        bool zero = false;
        for (int d = g->k - 1; d >= 0; d--) {
            int t = (int)(rem % taps);
            rem /= taps;
            int64_t idx = gs_tap(g, d, base[d] + t);
            if (idx < 0) zero = true;
            else off += idx * g->strides[d];
            wt *= w[d][t];
        }
        if (!zero && wt != 0) acc += wt * kn_load_f64(x->dtype, x->data, plane + (size_t)off);
    }
    return acc;
}

static double gs_sample(const kn_tensor *x, size_t plane, const gs_geom *g, const double *pos, kn_gs_mode mode)
{
    int64_t base[KN_MAX_RANK];
    double w[KN_MAX_RANK][4];
    if (mode == KN_GS_NEAREST) {
        for (int d = 0; d < g->k; d++) {
            base[d] = (int64_t)pos[d];
            w[d][0] = 1;
        }
        return gs_combine(x, plane, g, base, w, 1);
    }
    for (int d = 0; d < g->k; d++) {
        double f = floor(pos[d]);
        double t = pos[d] - f;
        if (mode == KN_GS_LINEAR) {
            base[d] = (int64_t)f;
            w[d][0] = 1 - t;
            w[d][1] = t;
        } else {
            base[d] = (int64_t)f - 1;
            cubic_coeffs(t, w[d]);
        }
    }
    return gs_combine(x, plane, g, base, w, mode == KN_GS_LINEAR ? 2 : 4);
}

int kn_k_grid_sample(const kn_tensor *x, const kn_tensor *grid, kn_gs_mode mode, kn_gs_pad pad,
                     bool align_corners, kn_tensor *out)
{
    int k = x->rank - 2;
    if (k < 1 || grid->rank != k + 2 || grid->dims[k + 1] != k || grid->dims[0] != x->dims[0])
        return kn_error(KN_ERR_INVALID, "GridSample: grid must be (N, ..., %d) matching X's batch", k);
    gs_geom g = {.k = k, .dims = x->dims + 2, .pad = pad};
    kn_shape_strides(k, g.dims, g.strides);
    for (int d = 0; d < k; d++) {
        g.lo[d] = align_corners ? 0.0 : -0.5;
        g.hi[d] = align_corners ? (double)g.dims[d] - 1 : (double)g.dims[d] - 0.5;
    }
    int64_t N = x->dims[0], C = x->dims[1], plane = 1, opts = 1;
    for (int d = 0; d < k; d++) {
        plane *= g.dims[d];
        opts *= grid->dims[1 + d];
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < opts; o++) {
            double pos[KN_MAX_RANK];
            for (int d = 0; d < k; d++) {
                /* The grid's last axis lists x (innermost dim) first. */
                double v = kn_load_f64(grid->dtype, grid->data, (size_t)((n * opts + o) * k + (k - 1 - d)));
                double len = (double)g.dims[d];
                double p = align_corners ? (v + 1) / 2 * (len - 1) : ((v + 1) * len - 1) / 2;
                if (mode == KN_GS_NEAREST) p = nearbyint(p);
                if (p < g.lo[d] || p > g.hi[d]) {
                    if (pad == KN_GS_BORDER) p = p < 0 ? 0 : p > len - 1 ? len - 1 : p;
                    else if (pad == KN_GS_REFLECTION) p = gs_reflect(p, g.lo[d], g.hi[d]);
                }
                /* Far-out (or NaN) coordinates only read padding; keep them in int64 range. */
                if (!(fabs(p) < 1e9)) p = -1e9;
                pos[d] = p;
            }
            for (int64_t c = 0; c < C; c++) {
                double v = gs_sample(x, (size_t)((n * C + c) * plane), &g, pos, mode);
                kn_store_f64(out->dtype, out->data, (size_t)((n * C + c) * opts + o), v);
            }
        }
    return KN_OK;
}

/* ---- NonMaxSuppression ---------------------------------------------------------------- */

typedef struct nms_cand {
    double score;
    int64_t idx;
} nms_cand;

static int cmp_nms(const void *pa, const void *pb)
{
    const nms_cand *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Corners (ymin, xmin, ymax, xmax) of box i of batch b. */
static void nms_box(const kn_tensor *boxes, int64_t b, int64_t i, bool center, double r[4])
{
    double v[4];
    size_t base = (size_t)((b * boxes->dims[1] + i) * 4);
    for (int j = 0; j < 4; j++) v[j] = kn_load_f64(boxes->dtype, boxes->data, base + (size_t)j);
    if (center) {
        r[0] = v[1] - v[3] / 2;
        r[2] = v[1] + v[3] / 2;
        r[1] = v[0] - v[2] / 2;
        r[3] = v[0] + v[2] / 2;
    } else {
        r[0] = fmin(v[0], v[2]);
        r[2] = fmax(v[0], v[2]);
        r[1] = fmin(v[1], v[3]);
        r[3] = fmax(v[1], v[3]);
    }
}

static bool nms_suppress(const double a[4], const double b[4], double thr)
{
    double ih = fmin(a[2], b[2]) - fmax(a[0], b[0]);
    double iw = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return false;
    double inter = ih * iw;
    double a1 = (a[2] - a[0]) * (a[3] - a[1]), a2 = (b[2] - b[0]) * (b[3] - b[1]);
    double uni = a1 + a2 - inter;
    if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
    return inter / uni > thr;
}

int kn_k_nms(const kn_tensor *boxes, const kn_tensor *scores, int64_t max_per_class,
             double iou_threshold, bool has_score_threshold, double score_threshold,
             bool center_point_box, kn_tensor *out)
{
    if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 || scores->dims[0] != boxes->dims[0] ||
        scores->dims[2] != boxes->dims[1])
        return kn_error(KN_ERR_INVALID, "NonMaxSuppression: boxes must be (B, S, 4) and scores (B, C, S)");
    int64_t B = boxes->dims[0], C = scores->dims[1], S = boxes->dims[1];
    if (max_per_class < 0) max_per_class = 0;
    if (max_per_class > S) max_per_class = S;
    size_t cap = (size_t)(B * C * max_per_class);
    nms_cand *cand = malloc((size_t)(S ? S : 1) * sizeof *cand);
    int64_t *kept = malloc((size_t)(S ? S : 1) * sizeof *kept);
    int64_t *sel = malloc((cap ? cap : 1) * 3 * sizeof *sel);
    if (!cand || !kept || !sel) {
        free(cand);
        free(kept);
        free(sel);
        return kn_error(KN_ERR_NOMEM, "NonMaxSuppression: out of memory");
    }
    int64_t nsel = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t nc = 0, nk = 0;
            for (int64_t s = 0; s < S; s++) {
                double v = kn_load_f64(scores->dtype, scores->data, (size_t)((b * C + c) * S + s));
                if (has_score_threshold && !(v > score_threshold)) continue;
                cand[nc++] = (nms_cand){v, s};
            }
            qsort(cand, (size_t)nc, sizeof *cand, cmp_nms);
            for (int64_t i = 0; i < nc && nk < max_per_class; i++) {
                double bi[4], bk[4];
                nms_box(boxes, b, cand[i].idx, center_point_box, bi);
                bool keep = true;
                for (int64_t j = 0; j < nk && keep; j++) {
                    nms_box(boxes, b, kept[j], center_point_box, bk);
                    keep = !nms_suppress(bi, bk, iou_threshold);
                }
                if (!keep) continue;
                kept[nk++] = cand[i].idx;
                sel[nsel * 3] = b;
                sel[nsel * 3 + 1] = c;
                sel[nsel * 3 + 2] = cand[i].idx;
                nsel++;
            }
        }
    int64_t dims[2] = {nsel, 3};
    int st = kn_tensor_alloc(out, KN_I64, 2, dims);
    if (!st && nsel) memcpy(out->data, sel, (size_t)nsel * 3 * sizeof *sel);
    free(cand);
    free(kept);
    free(sel);
    return st;
}
