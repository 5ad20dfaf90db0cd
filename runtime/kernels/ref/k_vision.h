/*
 * k_vision.h — plain C reference kernels of the 'vision' family: GridSample,
 * AffineGrid, DeformConv, NonMaxSuppression (vision.c). The caller
 * allocates every output with its final shape, but NonMaxSuppression's,
 * whose size is data; kernels check the data-dependent parts (sizes,
 * indices) and fail with a message instead of reading out of bounds.
 *
 *     kn_tensor grid;   // (N, H, W, 2) for theta (N, 2, 3)
 *     int st = kn_k_affine_grid(&theta, 2, hw, align_corners, &grid);
 */
#ifndef KILN_K_VISION_H
#define KILN_K_VISION_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_gs_mode { KN_GS_NEAREST, KN_GS_LINEAR, KN_GS_CUBIC } kn_gs_mode;
typedef enum kn_gs_pad { KN_GS_ZEROS, KN_GS_BORDER, KN_GS_REFLECTION } kn_gs_pad;

/* GridSample: x (N, C, D1..Dk), grid (N, O1..Ok, k) with coordinates in
 * [-1, 1] ordered innermost dim first; out (N, C, O1..Ok) preallocated. */
int kn_k_grid_sample(const kn_tensor *x, const kn_tensor *grid, kn_gs_mode mode, kn_gs_pad pad,
                     bool align_corners, kn_tensor *out);

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

/* NonMaxSuppression: boxes (B, S, 4), scores (B, C, S). Allocates out
 * (i64 [count, 3] of batch, class, box). Only boxes scoring above
 * score_threshold (when has_score_threshold) are candidates; a candidate is
 * dropped when its IoU with a kept box exceeds iou_threshold. */
int kn_k_nms(const kn_tensor *boxes, const kn_tensor *scores, int64_t max_per_class,
             double iou_threshold, bool has_score_threshold, double score_threshold,
             bool center_point_box, kn_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
