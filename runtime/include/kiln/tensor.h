/*
 * kiln/tensor.h — a dense, row-major tensor and the index arithmetic that
 * every reference kernel shares (numel, strides, numpy-style broadcasting).
 *
 *     kn_tensor t = {0};
 *     int64_t dims[2] = {2, 3};
 *     if (kn_tensor_alloc(&t, KN_F32, 2, dims)) return ...;   // zero-filled
 *     ((float *)t.data)[5] = 1.0f;
 *     kn_tensor_free(&t);
 *
 * Broadcasting: kn_broadcast_shape() gives the result shape of two operands;
 * kn_broadcast_strides() gives, for an operand, the element stride along each
 * output axis (0 where the operand is broadcast), so a kernel walks the
 * output with a kn_index counter and adds up operand offsets.
 */
#ifndef KILN_TENSOR_H
#define KILN_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_MAX_RANK 8

typedef enum kn_ownership {
    KN_BORROWED = 0, /* someone else frees the data */
    KN_OWNED = 1,    /* kn_tensor_free() frees it (malloc'd) */
    KN_MMAPPED = 2,  /* kn_tensor_free() munmaps it (map_base/map_len) */
} kn_ownership;

typedef struct kn_tensor {
    kn_dtype dtype;
    int rank;
    int64_t dims[KN_MAX_RANK];
    void *data;      /* contiguous row-major elements; may be NULL if numel is 0 */
    size_t nbytes;   /* bytes at data */
    kn_ownership own;
    void *map_base;  /* for KN_MMAPPED: the mapping to release */
    size_t map_len;
} kn_tensor;

/* Product of dims (1 for rank 0). Returns -1 if a dim is negative or the
 * product overflows INT64. */
int64_t kn_shape_numel(int rank, const int64_t *dims);
static inline int64_t kn_tensor_numel(const kn_tensor *t) { return kn_shape_numel(t->rank, t->dims); }

/* Allocates zero-filled data for a tensor of the given type and shape into
 * *out (which is overwritten, not freed). Fails with KN_ERR_INVALID for bad
 * dims and KN_ERR_NOMEM if too large. The result is KN_OWNED. */
int kn_tensor_alloc(kn_tensor *out, kn_dtype dt, int rank, const int64_t *dims);

/* Deep copy of src into *out (KN_OWNED). */
int kn_tensor_copy(kn_tensor *out, const kn_tensor *src);

/* Releases owned or mmapped data and zeroes *t; borrowed data is left alone. */
void kn_tensor_free(kn_tensor *t);

/* Sets *out to a borrowed view of src's data with a new shape of equal numel. */
int kn_tensor_view(kn_tensor *out, const kn_tensor *src, int rank, const int64_t *dims);

/* Row-major element strides of a shape. */
void kn_shape_strides(int rank, const int64_t *dims, int64_t *out_strides);

/* Formats dims as "2x3x4" ("scalar" for rank 0) into buf; returns buf. */
char *kn_shape_str(int rank, const int64_t *dims, char *buf, size_t len);

/* Numpy broadcast of two shapes. Fails (KN_ERR_INVALID) if incompatible. */
int kn_broadcast_shape(int ra, const int64_t *a, int rb, const int64_t *b,
                       int *out_rank, int64_t *out_dims);

/* Strides (in elements) of an operand of shape (r, dims) when read at the
 * indices of a broadcast output of shape (out_rank, out_dims): 0 along axes
 * where the operand has size 1 or is missing. */
void kn_broadcast_strides(int r, const int64_t *dims, int out_rank, const int64_t *out_dims,
                          int64_t *out_strides);

/* A multi-index counter over a shape, in row-major order. */
typedef struct kn_index {
    int rank;
    int64_t dims[KN_MAX_RANK];
    int64_t idx[KN_MAX_RANK];
} kn_index;

void kn_index_init(kn_index *it, int rank, const int64_t *dims);
/* Advances to the next index; returns false after the last one. */
bool kn_index_next(kn_index *it);
/* Dot product of the current index with strides. */
static inline int64_t kn_index_offset(const kn_index *it, const int64_t *strides)
{
    int64_t off = 0;
    for (int i = 0; i < it->rank; i++) off += it->idx[i] * strides[i];
    return off;
}

/* Normalizes an axis in [-rank, rank) to [0, rank); -1 if out of range. */
int kn_norm_axis(int64_t axis, int rank);

#ifdef __cplusplus
}
#endif
#endif
