/*
 * k_generate.h — plain C reference kernels of the 'generate' family (Range,
 * EyeLike, Trilu, OneHot; Shape, Size and ConstantOfShape need none). They
 * take kn_tensor and plain parameters (no IR) and fill an output the caller
 * allocated.
 */
#ifndef KILN_K_GENERATE_H
#define KILN_K_GENERATE_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = start + i * delta for every element of the preallocated 1-D out
 * (integers computed exactly in int64, floats in double). */
int kn_k_range(double fstart, double fdelta, int64_t istart, int64_t idelta, kn_tensor *out);

/* Ones on the k-th diagonal of the preallocated 2-D out, zeros elsewhere. */
int kn_k_eyelike(int64_t k, kn_tensor *out);

/* Copies x into out (same shape) keeping the upper (or lower) triangle of
 * the last two dims relative to diagonal k, zeroing the rest. */
int kn_k_trilu(const kn_tensor *x, int64_t k, bool upper, kn_tensor *out);

/* One-hot: out has indices' shape with `depth` inserted at `axis` and
 * values' dtype; entries are values[1] at the index and values[0] elsewhere.
 * Negative indices count from depth; out-of-range ones give an all-off row. */
int kn_k_onehot(const kn_tensor *indices, int64_t depth, const kn_tensor *values, int axis,
                kn_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
