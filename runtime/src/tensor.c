/* Tensor allocation and shared index arithmetic behind kiln/tensor.h. */
#include "kiln/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kiln/status.h"

int64_t kn_shape_numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0) return -1;
        if (dims[i] != 0 && n > INT64_MAX / dims[i]) return -1;
        n *= dims[i];
    }
    return n;
}

int kn_tensor_alloc(kn_tensor *out, kn_dtype dt, int rank, const int64_t *dims)
{
    memset(out, 0, sizeof *out);
    if (rank < 0 || rank > KN_MAX_RANK)
        return kn_error(KN_ERR_UNSUPPORTED, "tensor rank %d exceeds kiln's maximum of %d", rank, KN_MAX_RANK);
    if (!kn_dtype_valid(dt)) return kn_error(KN_ERR_UNSUPPORTED, "dtype %d cannot be computed on", (int)dt);
    int64_t n = kn_shape_numel(rank, dims);
    if (n < 0) {
        char buf[160];
        return kn_error(KN_ERR_INVALID, "invalid tensor shape %s", kn_shape_str(rank, dims, buf, sizeof buf));
    }
    /* 2^40 bytes is far past anything this reference path should hold. */
    if ((uint64_t)n > ((uint64_t)1 << 40) / 8)
        return kn_error(KN_ERR_NOMEM, "tensor of %lld elements is too large", (long long)n);
    size_t nbytes = kn_dtype_nbytes(dt, (size_t)n);
    void *data = calloc(1, nbytes ? nbytes : 1);
    if (!data) return kn_error(KN_ERR_NOMEM, "out of memory allocating %zu bytes", nbytes);
    out->dtype = dt;
    out->rank = rank;
    for (int i = 0; i < rank; i++) out->dims[i] = dims[i];
    out->data = data;
    out->nbytes = nbytes;
    out->own = KN_OWNED;
    return KN_OK;
}

int kn_tensor_copy(kn_tensor *out, const kn_tensor *src)
{
    int st = kn_tensor_alloc(out, src->dtype, src->rank, src->dims);
    if (st) return st;
    if (src->nbytes) memcpy(out->data, src->data, src->nbytes < out->nbytes ? src->nbytes : out->nbytes);
    return KN_OK;
}

void kn_tensor_free(kn_tensor *t)
{
    if (!t) return;
    if (t->own == KN_OWNED) free(t->data);
    else if (t->own == KN_MMAPPED && t->map_base) munmap(t->map_base, t->map_len);
    memset(t, 0, sizeof *t);
}

int kn_tensor_view(kn_tensor *out, const kn_tensor *src, int rank, const int64_t *dims)
{
    if (kn_shape_numel(rank, dims) != kn_tensor_numel(src))
        return kn_error(KN_ERR_INVALID, "view changes the element count");
    memset(out, 0, sizeof *out);
    out->dtype = src->dtype;
    out->rank = rank;
    for (int i = 0; i < rank; i++) out->dims[i] = dims[i];
    out->data = src->data;
    out->nbytes = src->nbytes;
    out->own = KN_BORROWED;
    return KN_OK;
}

void kn_shape_strides(int rank, const int64_t *dims, int64_t *out_strides)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        out_strides[i] = s;
        s *= dims[i];
    }
}

char *kn_shape_str(int rank, const int64_t *dims, char *buf, size_t len)
{
    if (!len) return buf;
    buf[0] = '\0';
    if (rank == 0) {
        snprintf(buf, len, "scalar");
        return buf;
    }
    size_t used = 0;
    for (int i = 0; i < rank && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "x" : "", (long long)dims[i]);
    return buf;
}

int kn_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                       int *out_rank, int64_t *out_dims)
{
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
        int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da != db && da != 1 && db != 1) {
            char sa[160], sb[160];
            return kn_error(KN_ERR_INVALID, "shapes %s and %s cannot be broadcast",
                            kn_shape_str(ra, a, sa, sizeof sa), kn_shape_str(rb, b, sb, sizeof sb));
        }
        out_dims[i] = da == 1 ? db : da;
    }
    *out_rank = r;
    return KN_OK;
}

void kn_broadcast_strides(int r, const int64_t *dims, int out_rank, const int64_t *out_dims,
                          int64_t *out_strides)
{
    int64_t s = 1;
    for (int i = out_rank - 1; i >= 0; i--) {
        int j = i - (out_rank - r);
        if (j < 0 || dims[j] == 1 || out_dims[i] == 1) {
            out_strides[i] = 0;
        } else {
            out_strides[i] = s;
        }
        if (j >= 0) s *= dims[j];
    }
}

void kn_index_init(kn_index *it, int rank, const int64_t *dims)
{
    it->rank = rank;
    for (int i = 0; i < rank; i++) {
        it->dims[i] = dims[i];
        it->idx[i] = 0;
    }
}

bool kn_index_next(kn_index *it)
{
    for (int i = it->rank - 1; i >= 0; i--) {
        if (++it->idx[i] < it->dims[i]) return true;
        it->idx[i] = 0;
    }
    return false;
}

int kn_norm_axis(int64_t axis, int rank)
{
    if (axis < -rank || axis >= rank) return -1;
    return (int)(axis < 0 ? axis + rank : axis);
}
