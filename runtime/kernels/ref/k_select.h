/*
 * k_select.h — plain C reference kernels of the 'select' family: NonZero,
 * Compress, Unique. Their output shape depends on the data, so each kernel
 * allocates its outputs (owned by the caller afterwards, freed by it on
 * failure too).
 *
 *     kn_tensor idx = {0};
 *     int st = kn_k_nonzero(&x, &idx);   // idx: i64 [rank, count]
 */
#ifndef KILN_K_SELECT_H
#define KILN_K_SELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocates out (i64 [rank, count]) with the indices of the non-zero
 * elements of x in row-major order. */
int kn_k_nonzero(const kn_tensor *x, kn_tensor *out);

/* Allocates out with the slices of x along `axis` (the flattened x if axis
 * is -1) whose entry in the 1-D condition is true. */
int kn_k_compress(const kn_tensor *x, const kn_tensor *cond, int axis, kn_tensor *out);

/* Unique elements (axis -1: of the flattened x) or unique slices along axis.
 * Allocates out[0] = Y, out[1] = first-occurrence indices, out[2] = inverse
 * indices, out[3] = counts (i64). sorted: ascending; else in order of first
 * occurrence. */
int kn_k_unique(const kn_tensor *x, int axis, bool sorted, kn_tensor out[4]);

#ifdef __cplusplus
}
#endif
#endif
