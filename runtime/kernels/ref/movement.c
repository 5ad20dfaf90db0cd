/*
 * Reference kernels for data movement (see k_movement.h): transpose, concat,
 * slice, gather/scatter families, expand, tile, pad. They copy elements by
 * byte size so one loop serves every dtype; only scatter reductions look at
 * values.
 */
#include "k_movement.h"

#include <math.h>
#include <string.h>

/* Bytes per element, refusing packed 4-bit types that cannot be moved one
 * element at a time. */
static int elem_size(const kn_tensor *t, size_t *out_es)
{
    size_t es = kn_dtype_size(t->dtype);
    if (!es)
        return kn_error(KN_ERR_UNSUPPORTED, "dtype %s is not supported by data-movement kernels",
                        kn_dtype_name(t->dtype));
    *out_es = es;
    return KN_OK;
}

/* Constant sizes let the compiler turn each memcpy into one load/store. */
static inline void copy_elem(char *dst, const char *src, size_t es)
{
    switch (es) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es); break;
    }
}

static int64_t prod(const int64_t *d, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= d[i];
    return p;
}

static bool is_index_dtype(kn_dtype dt) { return dt == KN_I32 || dt == KN_I64; }

/* Element i of an index tensor, made non-negative against `dim`; an error
 * naming the value when it falls outside [-dim, dim). */
static int load_index(const kn_tensor *ind, size_t i, int64_t dim, int64_t *out)
{
    int64_t v = kn_load_i64(ind->dtype, ind->data, i);
    int64_t w = v < 0 ? v + dim : v;
    if (w < 0 || w >= dim)
        return kn_error(KN_ERR_INVALID, "index %lld is out of range for an axis of size %lld",
                        (long long)v, (long long)dim);
    *out = w;
    return KN_OK;
}

static int check_indices(const kn_tensor *ind)
{
    if (!is_index_dtype(ind->dtype))
        return kn_error(KN_ERR_INVALID, "indices must be int32 or int64, got %s", kn_dtype_name(ind->dtype));
    return KN_OK;
}

int kn_k_transpose(const kn_tensor *x, const int *perm, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(x, &es);
    if (st) return st;
    int r = x->rank;
    int64_t xs[KN_MAX_RANK], ps[KN_MAX_RANK];
    kn_shape_strides(r, x->dims, xs);
    for (int k = 0; k < r; k++) {
        if (perm[k] < 0 || perm[k] >= r || out->dims[k] != x->dims[perm[k]])
            return kn_error(KN_ERR_INTERNAL, "transpose: output shape does not match the permutation");
        ps[k] = xs[perm[k]];
    }
    if (kn_tensor_numel(out) == 0) return KN_OK;
    kn_index it;
    kn_index_init(&it, r, out->dims);
    char *dst = out->data;
    const char *src = x->data;
    do {
        copy_elem(dst, src + (size_t)kn_index_offset(&it, ps) * es, es);
        dst += es;
    } while (kn_index_next(&it));
    return KN_OK;
}

int kn_k_concat(int n, const kn_tensor *const *xs, int axis, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(out, &es);
    if (st) return st;
    int64_t outer = prod(out->dims, 0, axis);
    char *dst = out->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int i = 0; i < n; i++) {
            const kn_tensor *x = xs[i];
            size_t chunk = (size_t)prod(x->dims, axis, x->rank) * es;
            if (!chunk) continue;
            memcpy(dst, (const char *)x->data + (size_t)o * chunk, chunk);
            dst += chunk;
        }
    }
    return KN_OK;
}

int kn_k_slice(const kn_tensor *x, const int64_t *starts, const int64_t *steps, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(x, &es);
    if (st) return st;
    if (kn_tensor_numel(out) == 0) return KN_OK;
    int r = x->rank;
    int64_t xs[KN_MAX_RANK], ss[KN_MAX_RANK], base = 0;
    kn_shape_strides(r, x->dims, xs);
    for (int k = 0; k < r; k++) {
        /* First and last reads along the axis must be inside x. */
        int64_t last = starts[k] + (out->dims[k] - 1) * steps[k];
        if (starts[k] < 0 || starts[k] >= x->dims[k] || last < 0 || last >= x->dims[k])
            return kn_error(KN_ERR_INTERNAL, "slice: read outside the input on axis %d", k);
        base += starts[k] * xs[k];
        ss[k] = steps[k] * xs[k];
    }
    /* the innermost run copied whole: the trailing axes taken whole with
     * step 1, and the step-1 axis before them (a Split's piece of each row) */
    int outer = r;
    size_t run = 1;
    while (outer > 0 && steps[outer - 1] == 1 && out->dims[outer - 1] == x->dims[outer - 1])
        run *= (size_t)out->dims[--outer];
    if (outer > 0 && steps[outer - 1] == 1) run *= (size_t)out->dims[--outer];
    char *dst = out->data;
    const char *src = x->data;
    if (outer == 0) {
        memcpy(dst, src + (size_t)base * es, run * es);
        return KN_OK;
    }
    kn_index it;
    kn_index_init(&it, outer, out->dims);
    do {
        const char *from = src + (size_t)(base + kn_index_offset(&it, ss)) * es;
        if (run == 1) copy_elem(dst, from, es);
        else memcpy(dst, from, run * es);
        dst += run * es;
    } while (kn_index_next(&it));
    return KN_OK;
}

int kn_k_gather(const kn_tensor *data, const kn_tensor *indices, int axis, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(data, &es);
    if (st || (st = check_indices(indices))) return st;
    int64_t outer = prod(data->dims, 0, axis), n = data->dims[axis];
    size_t inner = (size_t)prod(data->dims, axis + 1, data->rank) * es;
    int64_t ni = kn_tensor_numel(indices);
    /* Validate every index first so a bad one fails before any copying. */
    for (int64_t j = 0; j < ni; j++) {
        int64_t v = 0;
        if ((st = load_index(indices, (size_t)j, n, &v))) return st;
    }
    char *dst = out->data;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < ni; j++) {
            int64_t v = 0;
            load_index(indices, (size_t)j, n, &v);
            if (inner) memcpy(dst, (const char *)data->data + ((size_t)(o * n + v)) * inner, inner);
            dst += inner;
        }
    }
    return KN_OK;
}

int kn_k_gather_elements(const kn_tensor *data, const kn_tensor *indices, int axis, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(data, &es);
    if (st || (st = check_indices(indices))) return st;
    int r = data->rank;
    if (indices->rank != r) return kn_error(KN_ERR_INVALID, "indices rank %d differs from data rank %d", indices->rank, r);
    for (int k = 0; k < r; k++)
        if (k != axis && indices->dims[k] > data->dims[k])
            return kn_error(KN_ERR_INVALID, "indices dim %d (%lld) exceeds data dim (%lld)", k,
                            (long long)indices->dims[k], (long long)data->dims[k]);
    if (kn_tensor_numel(indices) == 0) return KN_OK;
    int64_t ds[KN_MAX_RANK];
    kn_shape_strides(r, data->dims, ds);
    kn_index it;
    kn_index_init(&it, r, indices->dims);
    size_t j = 0;
    char *dst = out->data;
    do {
        int64_t v = 0;
        if ((st = load_index(indices, j, data->dims[axis], &v))) return st;
        int64_t off = kn_index_offset(&it, ds) + (v - it.idx[axis]) * ds[axis];
        copy_elem(dst + j * es, (const char *)data->data + (size_t)off * es, es);
        j++;
    } while (kn_index_next(&it));
    return KN_OK;
}

/* Offset (in elements) of the slice that index tuple `t` (k entries at
 * element `first` of indices) selects in data, whose leading axes from
 * `axis0` it addresses. */
static int tuple_offset(const kn_tensor *indices, size_t first, int k, const kn_tensor *data, int axis0,
                        const int64_t *ds, int64_t *out_off)
{
    int64_t off = 0;
    for (int j = 0; j < k; j++) {
        int64_t v = 0;
        int st = load_index(indices, first + (size_t)j, data->dims[axis0 + j], &v);
        if (st) return st;
        off += v * ds[axis0 + j];
    }
    *out_off = off;
    return KN_OK;
}

int kn_k_gather_nd(const kn_tensor *data, const kn_tensor *indices, int batch_dims, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(data, &es);
    if (st || (st = check_indices(indices))) return st;
    int b = batch_dims, ri = indices->rank;
    int k = ri >= 1 ? (int)indices->dims[ri - 1] : -1;
    if (ri < 1 || b < 0 || b >= ri || k < 0 || b + k > data->rank)
        return kn_error(KN_ERR_INVALID, "gather_nd: bad indices shape for batch_dims %d", b);
    int64_t batch = prod(data->dims, 0, b);
    int64_t ntup = prod(indices->dims, b, ri - 1);
    int64_t slice = prod(data->dims, b + k, data->rank);
    int64_t bstride = prod(data->dims, b, data->rank);
    int64_t ds[KN_MAX_RANK];
    kn_shape_strides(data->rank, data->dims, ds);
    char *dst = out->data;
    for (int64_t bi = 0; bi < batch; bi++) {
        for (int64_t t = 0; t < ntup; t++) {
            int64_t off = 0;
            st = tuple_offset(indices, (size_t)((bi * ntup + t) * k), k, data, b, ds, &off);
            if (st) return st;
            size_t bytes = (size_t)slice * es;
            if (bytes) memcpy(dst, (const char *)data->data + (size_t)(bi * bstride + off) * es, bytes);
            dst += bytes;
        }
    }
    return KN_OK;
}

/* dst[di] = red(dst[di], src[si]) in the dtype's own arithmetic class. */
static void reduce_elem(kn_dtype dt, size_t es, void *dst, size_t di, const void *src, size_t si,
                        kn_reduction red)
{
    if (red == KN_REDUCE_NONE) {
        copy_elem((char *)dst + di * es, (const char *)src + si * es, es);
        return;
    }
    const kn_dtype_traits *tr = kn_dtype_info(dt);
    if (tr->is_float) {
        double a = kn_load_f64(dt, dst, di), b = kn_load_f64(dt, src, si), r = a;
        switch (red) {
        case KN_REDUCE_ADD: r = a + b; break;
        case KN_REDUCE_MUL: r = a * b; break;
        case KN_REDUCE_MAX: r = b > a ? b : a; break;
        case KN_REDUCE_MIN: r = b < a ? b : a; break;
        default: break;
        }
        kn_store_f64(dt, dst, di, r);
    } else if (!tr->is_signed && tr->bits == 64) {
        uint64_t a = kn_load_u64(dt, dst, di), b = kn_load_u64(dt, src, si), r = a;
        switch (red) {
        case KN_REDUCE_ADD: r = a + b; break;
        case KN_REDUCE_MUL: r = a * b; break;
        case KN_REDUCE_MAX: r = b > a ? b : a; break;
        case KN_REDUCE_MIN: r = b < a ? b : a; break;
        default: break;
        }
        kn_store_u64(dt, dst, di, r);
    } else {
        /* Wrap-around, as the integer types themselves would. */
        int64_t a = kn_load_i64(dt, dst, di), b = kn_load_i64(dt, src, si), r = a;
        switch (red) {
        case KN_REDUCE_ADD: r = (int64_t)((uint64_t)a + (uint64_t)b); break;
        case KN_REDUCE_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
        case KN_REDUCE_MAX: r = b > a ? b : a; break;
        case KN_REDUCE_MIN: r = b < a ? b : a; break;
        default: break;
        }
        kn_store_i64(dt, dst, di, r);
    }
}

static int copy_into(const kn_tensor *data, kn_tensor *out)
{
    if (out->nbytes != data->nbytes || out->dtype != data->dtype)
        return kn_error(KN_ERR_INTERNAL, "scatter: output does not match data");
    if (data->nbytes) memcpy(out->data, data->data, data->nbytes);
    return KN_OK;
}

int kn_k_scatter_elements(const kn_tensor *data, const kn_tensor *indices, const kn_tensor *updates,
                          int axis, kn_reduction red, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(data, &es);
    if (st || (st = check_indices(indices)) || (st = copy_into(data, out))) return st;
    int r = data->rank;
    if (indices->rank != r || updates->rank != r || updates->dtype != data->dtype)
        return kn_error(KN_ERR_INVALID, "data, indices and updates must have the same rank (and updates data's dtype)");
    for (int k = 0; k < r; k++) {
        if (updates->dims[k] != indices->dims[k])
            return kn_error(KN_ERR_INVALID, "updates and indices shapes differ on axis %d", k);
        if (k != axis && indices->dims[k] > data->dims[k])
            return kn_error(KN_ERR_INVALID, "indices dim %d (%lld) exceeds data dim (%lld)", k,
                            (long long)indices->dims[k], (long long)data->dims[k]);
    }
    if (kn_tensor_numel(indices) == 0) return KN_OK;
    int64_t ds[KN_MAX_RANK];
    kn_shape_strides(r, data->dims, ds);
    kn_index it;
    kn_index_init(&it, r, indices->dims);
    size_t j = 0;
    do {
        int64_t v = 0;
        if ((st = load_index(indices, j, data->dims[axis], &v))) return st;
        int64_t off = kn_index_offset(&it, ds) + (v - it.idx[axis]) * ds[axis];
        reduce_elem(data->dtype, es, out->data, (size_t)off, updates->data, j, red);
        j++;
    } while (kn_index_next(&it));
    return KN_OK;
}

int kn_k_scatter_nd(const kn_tensor *data, const kn_tensor *indices, const kn_tensor *updates,
                    kn_reduction red, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(data, &es);
    if (st || (st = check_indices(indices)) || (st = copy_into(data, out))) return st;
    int ri = indices->rank;
    int k = ri ? (int)indices->dims[ri - 1] : -1;
    if (ri < 1 || k < 0 || k > data->rank || updates->dtype != data->dtype)
        return kn_error(KN_ERR_INVALID, "scatter_nd: bad indices shape");
    /* updates must be indices.shape[:-1] + data.shape[k:]. */
    int ur = ri - 1 + data->rank - k;
    bool ok = updates->rank == ur;
    for (int i = 0; ok && i < ri - 1; i++) ok = updates->dims[i] == indices->dims[i];
    for (int i = k; ok && i < data->rank; i++) ok = updates->dims[ri - 1 + i - k] == data->dims[i];
    if (!ok) return kn_error(KN_ERR_INVALID, "scatter_nd: updates shape does not match indices and data");
    int64_t nupd = prod(indices->dims, 0, ri - 1);
    int64_t slice = prod(data->dims, k, data->rank);
    int64_t ds[KN_MAX_RANK];
    kn_shape_strides(data->rank, data->dims, ds);
    for (int64_t u = 0; u < nupd; u++) {
        int64_t off = 0;
        if ((st = tuple_offset(indices, (size_t)(u * k), k, data, 0, ds, &off))) return st;
        for (int64_t e = 0; e < slice; e++)
            reduce_elem(data->dtype, es, out->data, (size_t)(off + e), updates->data, (size_t)(u * slice + e), red);
    }
    return KN_OK;
}

int kn_k_expand(const kn_tensor *x, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(x, &es);
    if (st) return st;
    if (x->rank > out->rank) return kn_error(KN_ERR_INTERNAL, "expand: output rank below input rank");
    for (int i = 0; i < x->rank; i++) {
        int64_t d = x->dims[i], o = out->dims[out->rank - x->rank + i];
        if (d != o && d != 1) return kn_error(KN_ERR_INTERNAL, "expand: output shape is not a broadcast of the input");
    }
    if (kn_tensor_numel(out) == 0) return KN_OK;
    int64_t s[KN_MAX_RANK];
    kn_broadcast_strides(x->rank, x->dims, out->rank, out->dims, s);
    kn_index it;
    kn_index_init(&it, out->rank, out->dims);
    char *dst = out->data;
    do {
        copy_elem(dst, (const char *)x->data + (size_t)kn_index_offset(&it, s) * es, es);
        dst += es;
    } while (kn_index_next(&it));
    return KN_OK;
}

int kn_k_tile(const kn_tensor *x, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(x, &es);
    if (st) return st;
    int r = x->rank;
    if (out->rank != r) return kn_error(KN_ERR_INTERNAL, "tile: rank mismatch");
    if (kn_tensor_numel(out) == 0) return KN_OK;
    int64_t xs[KN_MAX_RANK];
    kn_shape_strides(r, x->dims, xs);
    kn_index it;
    kn_index_init(&it, r, out->dims);
    char *dst = out->data;
    do {
        int64_t off = 0;
        for (int k = 0; k < r; k++) off += (it.idx[k] % x->dims[k]) * xs[k];
        copy_elem(dst, (const char *)x->data + (size_t)off * es, es);
        dst += es;
    } while (kn_index_next(&it));
    return KN_OK;
}

/* Maps a coordinate outside [0, d) back into it for the non-constant modes. */
static int64_t pad_source(int64_t c, int64_t d, kn_pad_mode mode)
{
    if (c >= 0 && c < d) return c;
    switch (mode) {
    case KN_PAD_EDGE: return c < 0 ? 0 : d - 1;
    case KN_PAD_WRAP: return ((c % d) + d) % d;
    case KN_PAD_REFLECT: {
        if (d == 1) return 0;
        int64_t p = 2 * (d - 1);
        c = ((c % p) + p) % p;
        return c < d ? c : p - c;
    }
    default: return -1;
    }
}

int kn_k_pad(const kn_tensor *x, const int64_t *pads, kn_pad_mode mode, const void *value, kn_tensor *out)
{
    size_t es = 0;
    int st = elem_size(x, &es);
    if (st) return st;
    int r = x->rank;
    for (int k = 0; k < r; k++)
        if (out->dims[k] != x->dims[k] + pads[k] + pads[r + k])
            return kn_error(KN_ERR_INTERNAL, "pad: output shape does not match the pads");
    if (kn_tensor_numel(out) == 0) return KN_OK;
    if (mode != KN_PAD_CONSTANT && kn_tensor_numel(x) == 0)
        return kn_error(KN_ERR_INVALID, "cannot pad an empty tensor in reflect/edge/wrap mode");
    static const char zero[16];
    if (!value) value = zero;
    int64_t xs[KN_MAX_RANK];
    kn_shape_strides(r, x->dims, xs);
    kn_index it;
    kn_index_init(&it, r, out->dims);
    char *dst = out->data;
    do {
        int64_t off = 0;
        bool outside = false;
        for (int k = 0; k < r && !outside; k++) {
            int64_t c = it.idx[k] - pads[k];
            if (c < 0 || c >= x->dims[k]) {
                if (mode == KN_PAD_CONSTANT) outside = true;
                else c = pad_source(c, x->dims[k], mode);
            }
            off += c * xs[k];
        }
        copy_elem(dst, outside ? (const char *)value : (const char *)x->data + (size_t)off * es, es);
        dst += es;
    } while (kn_index_next(&it));
    return KN_OK;
}
