/*
 * k_reduce.h — plain C reference kernels for reductions and their friends:
 * Reduce*, ArgMax/ArgMin, CumSum, TopK.
 *
 * Kernels take kn_tensor and plain parameters (no IR). The caller allocates
 * every output with its final shape; a kernel only checks that the sizes
 * agree and fills the data. Floating inputs accumulate in double, integer
 * inputs in int64 (so int64 sums stay exact).
 *
 *     kn_tensor y;  // dims {2, 1} for x of dims {2, 3} reduced over axis 1
 *     kn_tensor_alloc(&y, x.dtype, 2, (int64_t[]){2, 1});
 *     int st = kn_k_reduce(KN_REDUCE_SUM, &x, 1u << 1, &y);
 */
#ifndef KILN_K_REDUCE_H
#define KILN_K_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_reduce_op {
    KN_REDUCE_SUM,
    KN_REDUCE_MEAN,
    KN_REDUCE_MAX,
    KN_REDUCE_MIN,
    KN_REDUCE_PROD,
    KN_REDUCE_L1,
    KN_REDUCE_L2,
    KN_REDUCE_LOGSUM,
    KN_REDUCE_LOGSUMEXP,
    KN_REDUCE_SUMSQ,
} kn_reduce_op;

/* Reduces x over the axes whose bit is set in `mask` into out, which must
 * hold exactly the product of the kept dims (with or without the size-1
 * axes of keepdims) elements of any numeric dtype. An empty reduction gives
 * the identity (0 for sums, 1 for products, -inf/+inf for max/min). */
int kn_k_reduce(kn_reduce_op op, const kn_tensor *x, uint32_t mask, kn_tensor *out);

/* Index (int64) of the largest (is_max) or smallest element along `axis`;
 * ties give the first index, or the last if select_last. out (KN_I64) holds
 * numel(x) / dims[axis] elements. Fails if dims[axis] is 0. */
int kn_k_argreduce(const kn_tensor *x, int axis, bool is_max, bool select_last, kn_tensor *out);

/* Cumulative sum along `axis`; out has x's dtype and shape. */
int kn_k_cumsum(const kn_tensor *x, int axis, bool exclusive, bool reverse, kn_tensor *out);

/* The k largest (or smallest) elements along `axis`, sorted, ties broken by
 * the lower index. values (x's dtype) and indices (KN_I64) have x's shape
 * with dims[axis] = k; 0 <= k <= dims[axis]. */
int kn_k_topk(const kn_tensor *x, int axis, int64_t k, bool largest, kn_tensor *values,
              kn_tensor *indices);

#ifdef __cplusplus
}
#endif
#endif
