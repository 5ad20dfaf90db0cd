/* Reference kernels of the 'select' family (k_select.h): NonZero,
 * Compress, Unique, which allocate their outputs. */
#include "k_select.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_util.h"

static bool nonzero_at(const kn_tensor *x, size_t i)
{
    if (kn_k_is_float(x->dtype)) return kn_load_f64(x->dtype, x->data, i) != 0.0;
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
    int st = kn_k_need_bytes(x, "Compress");
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
                kn_k_copy_elem(x, (size_t)((o * n + j) * inner + i), out, (size_t)((o * kept + jo) * inner + i), esz);
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

static int cmp_items(const uniq_ctx *c, int64_t a, int64_t b)
{
    for (int64_t o = 0; o < c->outer; o++)
        for (int64_t i = 0; i < c->inner; i++) {
            int r = kn_k_cmp_elems(c->x, (size_t)((o * c->m + a) * c->inner + i), (size_t)((o * c->m + b) * c->inner + i));
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
                kn_k_copy_elem(x, (size_t)((o * c->m + first[g]) * c->inner + i), &out[0],
                          (size_t)((o * ng + g) * c->inner + i), esz);
    memcpy(out[1].data, first, sizeof *first * (size_t)ng);
    memcpy(out[2].data, group_of, sizeof *group_of * (size_t)c->m);
    memcpy(out[3].data, counts, sizeof *counts * (size_t)ng);
    return KN_OK;
}

int kn_k_unique(const kn_tensor *x, int axis, bool sorted, kn_tensor out[4])
{
    int st = kn_k_need_bytes(x, "Unique");
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
