/* Reference kernels for reductions, ArgMax/ArgMin, CumSum and TopK (k_reduce.h). */
#include "k_reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_util.h"

/* Splits x's shape around `axis` into outer × n × inner. */
static void split_axis(const kn_tensor *x, int axis, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++) *outer *= x->dims[i];
    for (int i = axis + 1; i < x->rank; i++) *inner *= x->dims[i];
    *n = x->dims[axis];
}

static int check_axis(const kn_tensor *x, int axis, const char *what)
{
    if (axis < 0 || axis >= x->rank)
        return kn_error(KN_ERR_INVALID, "%s: axis %d out of range for rank %d", what, axis, x->rank);
    if (kn_tensor_numel(x) < 0) return kn_error(KN_ERR_INVALID, "%s: invalid input shape", what);
    return KN_OK;
}

/* Element strides mapping an index of x to the flat offset of its reduced
 * output (0 along reduced axes); returns the output element count. */
static int64_t reduced_strides(const kn_tensor *x, uint32_t mask, int64_t *st)
{
    int64_t s = 1;
    for (int i = x->rank - 1; i >= 0; i--) {
        if (mask & (1u << i)) {
            st[i] = 0;
        } else {
            st[i] = s;
            s *= x->dims[i];
        }
    }
    return s;
}

/* Integer accumulation keeps int64 sums and products exact; unsigned
 * arithmetic makes overflow wrap (like numpy) instead of being UB. */
static bool int_path(kn_reduce_op op, kn_dtype dt)
{
    if (kn_k_is_float(dt)) return false;
    return op == KN_REDUCE_SUM || op == KN_REDUCE_PROD || op == KN_REDUCE_MAX ||
           op == KN_REDUCE_MIN || op == KN_REDUCE_L1 || op == KN_REDUCE_SUMSQ;
}

static int reduce_int(kn_reduce_op op, const kn_tensor *x, const int64_t *st, kn_tensor *out,
                      int64_t nout)
{
    uint64_t *acc = malloc((size_t)(nout ? nout : 1) * sizeof *acc);
    if (!acc) return kn_error(KN_ERR_NOMEM, "reduce: out of memory");
    int64_t init = op == KN_REDUCE_PROD ? 1 : op == KN_REDUCE_MAX ? INT64_MIN
                                          : op == KN_REDUCE_MIN ? INT64_MAX : 0;
    for (int64_t o = 0; o < nout; o++) acc[o] = (uint64_t)init;
    if (kn_tensor_numel(x) > 0) {
        kn_index it;
        kn_index_init(&it, x->rank, x->dims);
        size_t i = 0;
        do {
            int64_t o = kn_index_offset(&it, st);
            int64_t v = kn_load_i64(x->dtype, x->data, i++);
            switch (op) {
            case KN_REDUCE_PROD: acc[o] *= (uint64_t)v; break;
            case KN_REDUCE_MAX: if (v > (int64_t)acc[o]) acc[o] = (uint64_t)v; break;
            case KN_REDUCE_MIN: if (v < (int64_t)acc[o]) acc[o] = (uint64_t)v; break;
            case KN_REDUCE_L1: acc[o] += (uint64_t)(v < 0 ? -(uint64_t)v : (uint64_t)v); break;
            case KN_REDUCE_SUMSQ: acc[o] += (uint64_t)v * (uint64_t)v; break;
            default: acc[o] += (uint64_t)v; break;
            }
        } while (kn_index_next(&it));
    }
    for (int64_t o = 0; o < nout; o++) kn_store_i64(out->dtype, out->data, (size_t)o, (int64_t)acc[o]);
    free(acc);
    return KN_OK;
}

/* Folds one value into a floating accumulator. NaN wins for max/min, as in
 * numpy. LogSumExp's pass 2 subtracts the per-output maximum `m`. */
static double fold(kn_reduce_op op, double a, double v, double m)
{
    switch (op) {
    case KN_REDUCE_PROD: return a * v;
    case KN_REDUCE_MAX: return (v > a || isnan(v)) && !isnan(a) ? v : a;
    case KN_REDUCE_MIN: return (v < a || isnan(v)) && !isnan(a) ? v : a;
    case KN_REDUCE_L1: return a + fabs(v);
    case KN_REDUCE_L2:
    case KN_REDUCE_SUMSQ: return a + v * v;
    case KN_REDUCE_LOGSUMEXP: return isinf(m) ? a : a + exp(v - m);
    default: return a + v;
    }
}

static double finish(kn_reduce_op op, double a, double m, int64_t count)
{
    switch (op) {
    case KN_REDUCE_MEAN: return count ? a / (double)count : NAN;
    case KN_REDUCE_L2: return sqrt(a);
    case KN_REDUCE_LOGSUM: return log(a);
    case KN_REDUCE_LOGSUMEXP: return isinf(m) ? m : m + log(a);
    default: return a;
    }
}

/* One pass over x folding into acc; with m == NULL the pass is a plain fold. */
static void fold_pass(kn_reduce_op op, const kn_tensor *x, const int64_t *st, double *acc,
                      const double *m)
{
    if (kn_tensor_numel(x) <= 0) return;
    kn_index it;
    kn_index_init(&it, x->rank, x->dims);
    size_t i = 0;
    do {
        int64_t o = kn_index_offset(&it, st);
        double v = kn_load_f64(x->dtype, x->data, i++);
        acc[o] = fold(op, acc[o], v, m ? m[o] : 0.0);
    } while (kn_index_next(&it));
}

static int reduce_float(kn_reduce_op op, const kn_tensor *x, const int64_t *st, kn_tensor *out,
                        int64_t nout, int64_t count)
{
    size_t n = (size_t)(nout ? nout : 1);
    double *acc = malloc(n * sizeof *acc), *m = NULL;
    if (!acc) return kn_error(KN_ERR_NOMEM, "reduce: out of memory");
    double init = op == KN_REDUCE_PROD ? 1.0 : op == KN_REDUCE_MAX ? -INFINITY
                                       : op == KN_REDUCE_MIN ? INFINITY : 0.0;
    if (op == KN_REDUCE_LOGSUMEXP) {
        /* Subtracting the maximum first keeps exp() from overflowing. */
        m = malloc(n * sizeof *m);
        if (!m) {
            free(acc);
            return kn_error(KN_ERR_NOMEM, "reduce: out of memory");
        }
        for (int64_t o = 0; o < nout; o++) m[o] = -INFINITY;
        fold_pass(KN_REDUCE_MAX, x, st, m, NULL);
        init = 0.0;
    }
    for (int64_t o = 0; o < nout; o++) acc[o] = init;
    fold_pass(op, x, st, acc, m);
    for (int64_t o = 0; o < nout; o++)
        kn_store_f64(out->dtype, out->data, (size_t)o, finish(op, acc[o], m ? m[o] : 0.0, count));
    free(acc);
    free(m);
    return KN_OK;
}

int kn_k_reduce(kn_reduce_op op, const kn_tensor *x, uint32_t mask, kn_tensor *out)
{
    int64_t st[KN_MAX_RANK];
    if (x->rank < 0 || x->rank > KN_MAX_RANK || kn_tensor_numel(x) < 0)
        return kn_error(KN_ERR_INVALID, "reduce: invalid input shape");
    int64_t nout = reduced_strides(x, mask, st);
    if (kn_tensor_numel(out) != nout)
        return kn_error(KN_ERR_INTERNAL, "reduce: output holds %lld elements, expected %lld",
                        (long long)kn_tensor_numel(out), (long long)nout);
    int64_t count = 1;
    for (int i = 0; i < x->rank; i++)
        if (mask & (1u << i)) count *= x->dims[i];
    if (int_path(op, x->dtype)) return reduce_int(op, x, st, out, nout);
    return reduce_float(op, x, st, out, nout, count);
}

static bool is_nan_at(const kn_tensor *x, size_t i)
{
    return kn_k_is_float(x->dtype) && isnan(kn_load_f64(x->dtype, x->data, i));
}

int kn_k_argreduce(const kn_tensor *x, int axis, bool is_max, bool select_last, kn_tensor *out)
{
    int st = check_axis(x, axis, is_max ? "ArgMax" : "ArgMin");
    if (st) return st;
    int64_t outer, n, inner;
    split_axis(x, axis, &outer, &n, &inner);
    if (n == 0 && outer * inner > 0)
        return kn_error(KN_ERR_INVALID, "%s: cannot reduce an empty axis %d",
                        is_max ? "ArgMax" : "ArgMin", axis);
    if (out->dtype != KN_I64 || kn_tensor_numel(out) != outer * inner)
        return kn_error(KN_ERR_INTERNAL, "ArgMax/ArgMin: output must be i64 of %lld elements",
                        (long long)(outer * inner));
    int64_t *y = out->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            size_t base = (size_t)(o * n * inner + i);
            int64_t best = 0;
            bool best_nan = is_nan_at(x, base);
            for (int64_t j = 1; j < n; j++) {
                size_t at = base + (size_t)(j * inner);
                /* NaN wins ArgMax and ArgMin alike (numpy's argmax/argmin):
                 * the first one, or the last with select_last_index */
                bool nan = is_nan_at(x, at);
                int c = nan || best_nan ? nan - best_nan : kn_k_cmp_elems(x, at, base + (size_t)(best * inner));
                if (!is_max && !nan && !best_nan) c = -c;
                if (c > 0 || (c == 0 && select_last)) best = j, best_nan = nan;
            }
            y[o * inner + i] = best;
        }
    }
    return KN_OK;
}

int kn_k_cumsum(const kn_tensor *x, int axis, bool exclusive, bool reverse, kn_tensor *out)
{
    int st = check_axis(x, axis, "CumSum");
    if (st) return st;
    if (kn_tensor_numel(out) != kn_tensor_numel(x))
        return kn_error(KN_ERR_INTERNAL, "CumSum: output size differs from input");
    int64_t outer, n, inner;
    split_axis(x, axis, &outer, &n, &inner);
    bool flt = kn_k_is_float(x->dtype);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            double fa = 0;
            uint64_t ia = 0;
            for (int64_t jj = 0; jj < n; jj++) {
                int64_t j = reverse ? n - 1 - jj : jj;
                size_t k = (size_t)((o * n + j) * inner + i);
                double fv = flt ? kn_load_f64(x->dtype, x->data, k) : 0;
                int64_t iv = flt ? 0 : kn_load_i64(x->dtype, x->data, k);
                if (!exclusive) {
                    fa += fv;
                    ia += (uint64_t)iv;
                }
                if (flt) kn_store_f64(out->dtype, out->data, k, fa);
                else kn_store_i64(out->dtype, out->data, k, (int64_t)ia);
                if (exclusive) {
                    fa += fv;
                    ia += (uint64_t)iv;
                }
            }
        }
    }
    return KN_OK;
}

typedef struct topk_elem {
    double f;
    int64_t i;
    int64_t idx;
} topk_elem;

/* Ties (and NaN pairs) fall back to the index so the order is the spec's. */
static int by_index(const topk_elem *a, const topk_elem *b) { return (a->idx > b->idx) - (a->idx < b->idx); }
static int cmp_f_desc(const void *pa, const void *pb)
{
    const topk_elem *a = pa, *b = pb;
    if (a->f != b->f && !isnan(a->f) && !isnan(b->f)) return a->f > b->f ? -1 : 1;
    if (isnan(a->f) != isnan(b->f)) return isnan(a->f) ? -1 : 1;
    return by_index(a, b);
}
static int cmp_f_asc(const void *pa, const void *pb)
{
    const topk_elem *a = pa, *b = pb;
    if (a->f != b->f && !isnan(a->f) && !isnan(b->f)) return a->f < b->f ? -1 : 1;
    if (isnan(a->f) != isnan(b->f)) return isnan(a->f) ? 1 : -1;
    return by_index(a, b);
}
static int cmp_i_desc(const void *pa, const void *pb)
{
    const topk_elem *a = pa, *b = pb;
    if (a->i != b->i) return a->i > b->i ? -1 : 1;
    return by_index(a, b);
}
static int cmp_i_asc(const void *pa, const void *pb)
{
    const topk_elem *a = pa, *b = pb;
    if (a->i != b->i) return a->i < b->i ? -1 : 1;
    return by_index(a, b);
}

int kn_k_topk(const kn_tensor *x, int axis, int64_t k, bool largest, kn_tensor *values,
              kn_tensor *indices)
{
    int st = check_axis(x, axis, "TopK");
    if (st) return st;
    int64_t outer, n, inner;
    split_axis(x, axis, &outer, &n, &inner);
    if (k < 0 || k > n)
        return kn_error(KN_ERR_INVALID, "TopK: k = %lld is outside [0, %lld]", (long long)k, (long long)n);
    if (kn_tensor_numel(values) != outer * k * inner || kn_tensor_numel(indices) != outer * k * inner ||
        indices->dtype != KN_I64)
        return kn_error(KN_ERR_INTERNAL, "TopK: outputs have the wrong size");
    size_t esz = kn_dtype_size(x->dtype);
    if (esz == 0 || values->dtype != x->dtype)
        return kn_error(KN_ERR_UNSUPPORTED, "TopK: dtype %s is not supported", kn_dtype_name(x->dtype));
    topk_elem *e = malloc((size_t)(n ? n : 1) * sizeof *e);
    if (!e) return kn_error(KN_ERR_NOMEM, "TopK: out of memory");
    bool flt = kn_k_is_float(x->dtype);
    int (*cmp)(const void *, const void *) =
        flt ? (largest ? cmp_f_desc : cmp_f_asc) : (largest ? cmp_i_desc : cmp_i_asc);
    int64_t *yi = indices->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t j = 0; j < n; j++) {
                size_t src = (size_t)((o * n + j) * inner + i);
                e[j].f = flt ? kn_load_f64(x->dtype, x->data, src) : 0;
                e[j].i = flt ? 0 : kn_load_i64(x->dtype, x->data, src);
                e[j].idx = j;
            }
            qsort(e, (size_t)n, sizeof *e, cmp);
            for (int64_t j = 0; j < k; j++) {
                size_t src = (size_t)((o * n + e[j].idx) * inner + i);
                size_t dst = (size_t)((o * k + j) * inner + i);
                memcpy((char *)values->data + dst * esz, (const char *)x->data + src * esz, esz);
                yi[dst] = e[j].idx;
            }
        }
    }
    free(e);
    return KN_OK;
}
