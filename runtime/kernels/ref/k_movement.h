/*
 * k_movement.h — reference kernels for shape and data-movement ops
 * (transpose, concat, slice, gather/scatter families, expand, tile, pad,
 * resize). They work on element size, not on dtype, wherever they only move
 * bytes; packed 4-bit types are refused with KN_ERR_UNSUPPORTED.
 *
 * Every kernel writes into an output tensor the caller has already allocated
 * with the right dtype and shape (the shape rules live with the op
 * definitions in ir/ops/movement.c). Indices that come from input data are
 * checked; a bad one is a KN_ERR_INVALID with a message (no node name: the
 * caller adds it).
 *
 *     kn_tensor y;                      // dims = x dims permuted by perm
 *     kn_tensor_alloc(&y, x.dtype, x.rank, ydims);
 *     int st = kn_k_transpose(&x, perm, &y);
 */
#ifndef KILN_K_MOVEMENT_H
#define KILN_K_MOVEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[i0..] = x[i_perm^-1...]: out->dims[k] == x->dims[perm[k]]. */
int kn_k_transpose(const kn_tensor *x, const int *perm, kn_tensor *out);

/* Concatenates n tensors of equal rank and dtype along axis into out. */
int kn_k_concat(int n, const kn_tensor *const *xs, int axis, kn_tensor *out);

/* out[j] = x[starts + j * steps] per axis; out->dims are the counts.
 * starts/steps must already be clamped so that every read is in range. */
int kn_k_slice(const kn_tensor *x, const int64_t *starts, const int64_t *steps, kn_tensor *out);

/* Gather along axis; indices (int32/int64) may be negative (counted from the end). */
int kn_k_gather(const kn_tensor *data, const kn_tensor *indices, int axis, kn_tensor *out);
int kn_k_gather_elements(const kn_tensor *data, const kn_tensor *indices, int axis, kn_tensor *out);
int kn_k_gather_nd(const kn_tensor *data, const kn_tensor *indices, int batch_dims, kn_tensor *out);

typedef enum kn_reduction {
    KN_REDUCE_NONE = 0,
    KN_REDUCE_ADD,
    KN_REDUCE_MUL,
    KN_REDUCE_MAX,
    KN_REDUCE_MIN,
} kn_reduction;

/* out (same shape and dtype as data) = data with updates scattered in. */
int kn_k_scatter_elements(const kn_tensor *data, const kn_tensor *indices, const kn_tensor *updates,
                          int axis, kn_reduction red, kn_tensor *out);
int kn_k_scatter_nd(const kn_tensor *data, const kn_tensor *indices, const kn_tensor *updates,
                    kn_reduction red, kn_tensor *out);

/* Broadcasts x (numpy rules) to out's shape. */
int kn_k_expand(const kn_tensor *x, kn_tensor *out);

/* Repeats x along each axis: out->dims[i] must be a multiple of x->dims[i]. */
int kn_k_tile(const kn_tensor *x, kn_tensor *out);

typedef enum kn_pad_mode {
    KN_PAD_CONSTANT = 0,
    KN_PAD_REFLECT,
    KN_PAD_EDGE,
    KN_PAD_WRAP,
} kn_pad_mode;

/* Pads (or, for negative pads, crops) x: out->dims[i] = x->dims[i] +
 * pads[i] + pads[rank + i]. `value` (constant mode) is one element of x's
 * dtype, or NULL for zero. Reflect/edge/wrap need non-empty source axes. */
int kn_k_pad(const kn_tensor *x, const int64_t *pads, kn_pad_mode mode, const void *value,
             kn_tensor *out);

typedef enum kn_resize_mode { KN_RESIZE_NEAREST = 0, KN_RESIZE_LINEAR, KN_RESIZE_CUBIC } kn_resize_mode;

typedef enum kn_resize_coord {
    KN_COORD_HALF_PIXEL = 0,
    KN_COORD_HALF_PIXEL_SYMMETRIC,
    KN_COORD_PYTORCH_HALF_PIXEL,
    KN_COORD_ALIGN_CORNERS,
    KN_COORD_ASYMMETRIC,
    KN_COORD_TF_CROP_AND_RESIZE,
} kn_resize_coord;

typedef enum kn_resize_nearest {
    KN_NEAREST_ROUND_PREFER_FLOOR = 0,
    KN_NEAREST_ROUND_PREFER_CEIL,
    KN_NEAREST_FLOOR,
    KN_NEAREST_CEIL,
    KN_NEAREST_SIMPLE, /* Upsample / Resize-10: floor when upsampling, ceil when downsampling */
} kn_resize_nearest;

typedef struct kn_resize_params {
    kn_resize_mode mode;
    kn_resize_coord coord;
    kn_resize_nearest nearest;
    double cubic_a;           /* -0.75 by default */
    bool exclude_outside;
    bool antialias;           /* linear/cubic only: widen the filter when downsampling */
    double extrapolation;     /* tf_crop_and_resize: value outside the crop */
    double scales[KN_MAX_RANK]; /* per axis; out dim / in dim when sizes were given */
    double roi[2 * KN_MAX_RANK]; /* starts then ends, normalized; tf_crop_and_resize only */
    /* Output rows [rows[0], rows[1]) of axis 1 only, the rest of out left as
     * it is (both 0: all of it): for a channels-last f32 image, N and C not
     * resized (kn_fast_resize splits one across threads); else
     * KN_ERR_UNSUPPORTED, nothing written. */
    int64_t rows[2];
} kn_resize_params;

/* Resizes x into out (out->dims are the output sizes). Numeric dtypes;
 * computed in double and stored with a C cast. */
int kn_k_resize(const kn_tensor *x, const kn_resize_params *p, kn_tensor *out);

/* Training-mode Dropout: out = mask ? x / (1 - ratio) : 0 with mask drawn
 * as numpy's RandomState(seed).uniform(0, 1, shape) >= ratio, so results
 * match the ONNX reference bit for bit. Float dtypes; mask (bool, same
 * shape) may be NULL. ratio in [0, 1). */
int kn_k_dropout_train(const kn_tensor *x, double ratio, uint32_t seed, kn_tensor *out, kn_tensor *mask);

#ifdef __cplusplus
}
#endif
#endif
