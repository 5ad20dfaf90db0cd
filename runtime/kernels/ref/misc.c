/* Reference kernels for generator ops and the rarer 'misc' ops (k_misc.h). */
#include "k_misc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_float(kn_dtype dt) { return kn_dtype_info(dt)->is_float; }

/* Copies element si of src to element di of dst (same byte-sized dtype). */
static void copy_elem(const kn_tensor *src, size_t si, kn_tensor *dst, size_t di, size_t esz)
{
    memcpy((char *)dst->data + di * esz, (const char *)src->data + si * esz, esz);
}

static int need_bytes(const kn_tensor *t, const char *what)
{
    if (kn_dtype_size(t->dtype) == 0)
        return kn_error(KN_ERR_UNSUPPORTED, "%s: dtype %s is not supported", what, kn_dtype_name(t->dtype));
    return KN_OK;
}

/* ---- generators -------------------------------------------------------------- */

int kn_k_range(double fstart, double fdelta, int64_t istart, int64_t idelta, kn_tensor *out)
{
    int64_t n = kn_tensor_numel(out);
    bool flt = is_float(out->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (flt) kn_store_f64(out->dtype, out->data, (size_t)i, fstart + (double)i * fdelta);
        else kn_store_i64(out->dtype, out->data, (size_t)i, (int64_t)((uint64_t)istart + (uint64_t)i * (uint64_t)idelta));
    }
    return KN_OK;
}

int kn_k_eyelike(int64_t k, kn_tensor *out)
{
    if (out->rank != 2) return kn_error(KN_ERR_INVALID, "EyeLike: output must be 2-D, got rank %d", out->rank);
    int64_t r = out->dims[0], c = out->dims[1];
    for (int64_t i = 0; i < r; i++) {
        int64_t j = i + k;
        if (j >= 0 && j < c) kn_store_i64(out->dtype, out->data, (size_t)(i * c + j), 1);
    }
    return KN_OK;
}

int kn_k_trilu(const kn_tensor *x, int64_t k, bool upper, kn_tensor *out)
{
    if (x->rank < 2) return kn_error(KN_ERR_INVALID, "Trilu: input rank %d, expected >= 2", x->rank);
    int st = need_bytes(x, "Trilu");
    if (st) return st;
    size_t esz = kn_dtype_size(x->dtype);
    int64_t r = x->dims[x->rank - 2], c = x->dims[x->rank - 1];
    int64_t total = kn_tensor_numel(x);
    if (total <= 0) return KN_OK;
    int64_t mats = total / (r * c);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) {
                bool keep = upper ? j - i >= k : j - i <= k;
                if (keep) copy_elem(x, (size_t)((m * r + i) * c + j), out, (size_t)((m * r + i) * c + j), esz);
            }
    return KN_OK;
}

int kn_k_onehot(const kn_tensor *indices, int64_t depth, const kn_tensor *values, int axis,
                kn_tensor *out)
{
    if (kn_tensor_numel(values) != 2)
        return kn_error(KN_ERR_INVALID, "OneHot: values must hold 2 elements (off, on)");
    int st = need_bytes(values, "OneHot");
    if (st) return st;
    size_t esz = kn_dtype_size(values->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= indices->dims[i];
    for (int i = axis; i < indices->rank; i++) inner *= indices->dims[i];
    if (kn_tensor_numel(out) != outer * depth * inner || out->dtype != values->dtype)
        return kn_error(KN_ERR_INTERNAL, "OneHot: output has the wrong size");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t i = 0; i < inner; i++)
                copy_elem(values, 0, out, (size_t)((o * depth + d) * inner + i), esz);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            size_t k = (size_t)(o * inner + i);
            int64_t v = kn_load_i64(indices->dtype, indices->data, k); /* floats truncate, saturating */
            if (v < 0) v += depth;
            if (v < 0 || v >= depth) continue;
            copy_elem(values, 1, out, (size_t)((o * depth + v) * inner + i), esz);
        }
    return KN_OK;
}

/* ---- data-dependent shapes ------------------------------------------------------ */

static bool nonzero_at(const kn_tensor *x, size_t i)
{
    if (is_float(x->dtype)) return kn_load_f64(x->dtype, x->data, i) != 0.0;
    return kn_load_i64(x->dtype, x->data, i) != 0;
}

int kn_k_nonzero(const kn_tensor *x, kn_tensor *out)
{
    int64_t n = kn_tensor_numel(x), cnt = 0;
    if (n < 0) return kn_error(KN_ERR_INVALID, "NonZero: invalid input shape");
    for (int64_t i = 0; i < n; i++) cnt += nonzero_at(x, (size_t)i);
    /* A scalar behaves like a 1-element tensor of rank 0: the output has no rows. */
    int64_t dims[2] = {x->rank, cnt};
    int st = kn_tensor_alloc(out, KN_I64, 2, dims);
    if (st) return st;
    int64_t *y = out->data, k = 0;
    if (n == 0) return KN_OK;
    kn_index it;
    kn_index_init(&it, x->rank, x->dims);
    size_t i = 0;
    do {
        if (nonzero_at(x, i++)) {
            for (int d = 0; d < x->rank; d++) y[d * cnt + k] = it.idx[d];
            k++;
        }
    } while (kn_index_next(&it));
    return KN_OK;
}

int kn_k_compress(const kn_tensor *x, const kn_tensor *cond, int axis, kn_tensor *out)
{
    int st = need_bytes(x, "Compress");
    if (st) return st;
    if (cond->rank != 1) return kn_error(KN_ERR_INVALID, "Compress: condition must be 1-D, got rank %d", cond->rank);
    int64_t outer = 1, n, inner = 1;
    if (axis < 0) {
        n = kn_tensor_numel(x);
    } else {
        if (axis >= x->rank) return kn_error(KN_ERR_INVALID, "Compress: axis %d out of range", axis);
        for (int i = 0; i < axis; i++) outer *= x->dims[i];
        for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
        n = x->dims[axis];
    }
    int64_t m = cond->dims[0] < n ? cond->dims[0] : n, kept = 0;
    if (cond->dims[0] > n)
        return kn_error(KN_ERR_INVALID, "Compress: condition has %lld entries for %lld slices",
                        (long long)cond->dims[0], (long long)n);
    for (int64_t j = 0; j < m; j++) kept += nonzero_at(cond, (size_t)j);
    int64_t dims[KN_MAX_RANK];
    int rank = 1;
    dims[0] = kept;
    if (axis >= 0) {
        rank = x->rank;
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = kept;
    }
    st = kn_tensor_alloc(out, x->dtype, rank, dims);
    if (st) return st;
    size_t esz = kn_dtype_size(x->dtype);
    for (int64_t o = 0; o < outer; o++) {
        int64_t jo = 0;
        for (int64_t j = 0; j < m; j++) {
            if (!nonzero_at(cond, (size_t)j)) continue;
            for (int64_t i = 0; i < inner; i++)
                copy_elem(x, (size_t)((o * n + j) * inner + i), out, (size_t)((o * kept + jo) * inner + i), esz);
            jo++;
        }
    }
    return KN_OK;
}

/* Unique treats x as `m` items (elements, or slices along the axis) of
 * outer × inner elements each; items compare lexicographically. */
typedef struct uniq_ctx {
    const kn_tensor *x;
    int64_t outer, m, inner;
} uniq_ctx;

static int cmp_vals(const kn_tensor *x, size_t a, size_t b)
{
    if (is_float(x->dtype)) {
        double u = kn_load_f64(x->dtype, x->data, a), v = kn_load_f64(x->dtype, x->data, b);
        return (u > v) - (u < v);
    }
    if (x->dtype == KN_U64) {
        uint64_t u = kn_load_u64(x->dtype, x->data, a), v = kn_load_u64(x->dtype, x->data, b);
        return (u > v) - (u < v);
    }
    int64_t u = kn_load_i64(x->dtype, x->data, a), v = kn_load_i64(x->dtype, x->data, b);
    return (u > v) - (u < v);
}

static int cmp_items(const uniq_ctx *c, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < c->outer; o++)
        for (int64_t i = 0; i < c->inner; i++) {
            int r = cmp_vals(c->x, (size_t)((o * c->m + a) * c->inner + i), (size_t)((o * c->m + b) * c->inner + i));
            if (r) return r;
        }
    return 0;
}

/* Sorting item numbers by value, then by number, makes each group's first
 * entry its first occurrence. */
static int cmp_item_ids(const void *pa, const void *pb, void *arg)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    int r = cmp_items(arg, a, b);
    return r ? r : (a > b) - (a < b);
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* Writes the four Unique outputs given, for each group in output order, its
 * first item (first[g]) and size, and each item's group (group_of). */
static int unique_emit(const uniq_ctx *c, int axis, int64_t ng, const int64_t *first,
                       const int64_t *counts, const int64_t *group_of, kn_tensor out[4])
{
    const kn_tensor *x = c->x;
    int64_t dims[KN_MAX_RANK];
    int rank = 1;
    dims[0] = ng;
    if (axis >= 0) {
        rank = x->rank;
        memcpy(dims, x->dims, sizeof dims);
        dims[axis] = ng;
    }
    int st = kn_tensor_alloc(&out[0], x->dtype, rank, dims);
    int64_t d1 = ng, dm = c->m;
    if (!st) st = kn_tensor_alloc(&out[1], KN_I64, 1, &d1);
    if (!st) st = kn_tensor_alloc(&out[2], KN_I64, 1, &dm);
    if (!st) st = kn_tensor_alloc(&out[3], KN_I64, 1, &d1);
    if (st) return st;
    size_t esz = kn_dtype_size(x->dtype);
    for (int64_t o = 0; o < c->outer; o++)
        for (int64_t g = 0; g < ng; g++)
            for (int64_t i = 0; i < c->inner; i++)
                copy_elem(x, (size_t)((o * c->m + first[g]) * c->inner + i), &out[0],
                          (size_t)((o * ng + g) * c->inner + i), esz);
    memcpy(out[1].data, first, sizeof *first * (size_t)ng);
    memcpy(out[2].data, group_of, sizeof *group_of * (size_t)c->m);
    memcpy(out[3].data, counts, sizeof *counts * (size_t)ng);
    return KN_OK;
}

int kn_k_unique(const kn_tensor *x, int axis, bool sorted, kn_tensor out[4])
{
    int st = need_bytes(x, "Unique");
    if (st) return st;
    uniq_ctx c = {x, 1, kn_tensor_numel(x), 1};
    if (axis >= 0) {
        if (axis >= x->rank) return kn_error(KN_ERR_INVALID, "Unique: axis %d out of range", axis);
        c.m = x->dims[axis];
        for (int i = 0; i < axis; i++) c.outer *= x->dims[i];
        for (int i = axis + 1; i < x->rank; i++) c.inner *= x->dims[i];
    }
    size_t m = (size_t)(c.m > 0 ? c.m : 1);
    int64_t *ids = malloc(m * sizeof *ids), *first = malloc(m * sizeof *first);
    int64_t *counts = malloc(m * sizeof *counts), *group_of = malloc(m * sizeof *group_of);
    int64_t *rank_of = malloc(m * sizeof *rank_of);
    if (!ids || !first || !counts || !group_of || !rank_of) {
        st = kn_error(KN_ERR_NOMEM, "Unique: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < c.m; i++) ids[i] = i;
    qsort_r(ids, (size_t)c.m, sizeof *ids, cmp_item_ids, &c);
    int64_t ng = 0;
    for (int64_t i = 0; i < c.m; i++) {
        if (i == 0 || cmp_items(&c, ids[i - 1], ids[i]) != 0) {
            first[ng] = ids[i];
            counts[ng++] = 0;
        }
        counts[ng - 1]++;
        group_of[ids[i]] = ng - 1;
    }
    if (!sorted) {
        /* Reorder the groups by first occurrence: sort the first indices, then
         * map each old group number to its new place. */
        int64_t *order = ids; /* reused: ids is no longer needed */
        memcpy(order, first, sizeof *first * (size_t)ng);
        qsort(order, (size_t)ng, sizeof *order, cmp_i64);
        int64_t *new_counts = malloc(m * sizeof *new_counts);
        if (!new_counts) {
            st = kn_error(KN_ERR_NOMEM, "Unique: out of memory");
            goto done;
        }
        for (int64_t g = 0; g < ng; g++) {
            int64_t og = group_of[order[g]];
            rank_of[og] = g;
            new_counts[g] = counts[og];
        }
        for (int64_t i = 0; i < c.m; i++) group_of[i] = rank_of[group_of[i]];
        memcpy(first, order, sizeof *first * (size_t)ng);
        memcpy(counts, new_counts, sizeof *counts * (size_t)ng);
        free(new_counts);
    }
    st = unique_emit(&c, axis, ng, first, counts, group_of, out);
done:
    free(ids);
    free(first);
    free(counts);
    free(group_of);
    free(rank_of);
    return st;
}

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
    int st = need_bytes(x, "CenterCropPad");
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
        if (inside) copy_elem(x, (size_t)src, out, o, esz);
        o++;
    } while (kn_index_next(&it));
    return KN_OK;
}

int kn_k_reverse_sequence(const kn_tensor *x, const kn_tensor *lens, int batch_axis, int time_axis,
                          kn_tensor *out)
{
    int st = need_bytes(x, "ReverseSequence");
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
        copy_elem(x, (size_t)src, out, o, esz);
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
