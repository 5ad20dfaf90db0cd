/*
 * k_misc2.h — plain C reference kernels for more rare ops of the 'misc'
 * family: AffineGrid, DeformConv and TfIdfVectorizer (integer pools).
 *
 * The caller allocates every output with its final shape; kernels check the
 * data-dependent parts (sizes, indices from attributes or inputs) and fail
 * with a message instead of reading out of bounds.
 *
 *     kn_tensor grid;   // (N, H, W, 2) for theta (N, 2, 3)
 *     int st = kn_k_affine_grid(&theta, 2, hw, align_corners, &grid);
 */
#ifndef KILN_K_MISC2_H
#define KILN_K_MISC2_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sampling grid of an affine map: theta is (N, s, s+1) for s = 2 or 3
 * spatial dims of sizes `size` (H, W or D, H, W); out is (N, size..., s)
 * holding theta · (x, y[, z], 1) with x running along the last spatial dim,
 * coordinates normalized to [-1, 1]. */
int kn_k_affine_grid(const kn_tensor *theta, int s, const int64_t *size, bool align_corners, kn_tensor *out);

typedef struct kn_deform_params {
    int s;                          /* spatial rank */
    int64_t group, offset_group;
    int64_t kernel[KN_MAX_RANK];
    int64_t pads[2 * KN_MAX_RANK];  /* begins then ends */
    int64_t strides[KN_MAX_RANK];
    int64_t dilations[KN_MAX_RANK];
} kn_deform_params;

/* Deformable convolution: x (N, C, in...), w (OC, C/group, k...), offset
 * (N, offset_group*K*s, out...), optional b (OC) and mask (N,
 * offset_group*K, out...), out (N, OC, out...) preallocated. Each kernel tap
 * samples x bilinearly (zero outside) at its regular position plus the
 * offset. */
int kn_k_deform_conv(const kn_tensor *x, const kn_tensor *w, const kn_tensor *offset, const kn_tensor *b,
                     const kn_tensor *mask, const kn_deform_params *p, kn_tensor *out);

typedef enum kn_tfidf_mode { KN_TFIDF_TF, KN_TFIDF_IDF, KN_TFIDF_TFIDF } kn_tfidf_mode;

typedef struct kn_tfidf_params {
    kn_tfidf_mode mode;
    int64_t min_gram, max_gram, max_skip;
    const int64_t *pool;    int64_t n_pool;     /* n-grams, grouped by size */
    const int64_t *counts;  int64_t n_counts;   /* start of size i+1 in pool */
    const int64_t *indexes; int64_t n_indexes;  /* output column of each n-gram */
    const float *weights;   int64_t n_weights;  /* per output column, or none */
    int64_t out_size;                           /* max(indexes) + 1 */
} kn_tfidf_params;

/* N-gram counts (weighted per mode) of the integer rows of x ([C] or
 * [B, C]) into the preallocated out ([out_size] or [B, out_size]). */
int kn_k_tfidf(const kn_tensor *x, const kn_tfidf_params *p, kn_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
