/*
 * k_nn.h — reference kernels of the "nn" family: convolution, pooling,
 * normalization, LRN, unpooling, RoI pooling, Col2Im.
 *
 * Kernels take kn_tensor operands and plain parameters; they never see the
 * IR. The caller (ir/ops/nn.c) validates attributes, computes output shapes
 * and allocates every output tensor (zero-filled) before calling; the kernel
 * only fills it. Tensors are N x C x spatial... (NCHW-style) row-major.
 * Floating dtypes (f32, f64, f16, bf16) are accepted; f32 (and f64 for Conv)
 * have direct paths, the others are widened to double. Pooling also accepts
 * integer dtypes.
 *
 *     kn_nn_window w = {.nsp = 2, .kernel = {3, 3}, .strides = {1, 1},
 *                       .dilations = {1, 1}, .pads = {1, 1, 1, 1}};
 *     int st = kn_k_conv(&x, &wt, NULL, &w, 1, &y);   // y already allocated
 */
#ifndef KILN_K_NN_H
#define KILN_K_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_NN_MAXSP (KN_MAX_RANK - 2) /* most spatial axes a kernel handles */

/* A sliding window over the spatial axes. pads holds nsp begin pads followed
 * by nsp end pads (ONNX order). Every field must be filled by the caller. */
typedef struct kn_nn_window {
    int nsp;
    int64_t kernel[KN_NN_MAXSP];
    int64_t strides[KN_NN_MAXSP];
    int64_t dilations[KN_NN_MAXSP];
    int64_t pads[2 * KN_NN_MAXSP];
} kn_nn_window;

typedef enum kn_pool_kind { KN_POOL_MAX = 0, KN_POOL_AVG = 1, KN_POOL_LP = 2 } kn_pool_kind;

/* Y = conv(X, W) + B. X: N x C x in..., W: M x C/group x k..., B: M or NULL,
 * Y: N x M x out... (allocated). */
int kn_k_conv(const kn_tensor *x, const kn_tensor *w, const kn_tensor *b,
              const kn_nn_window *win, int64_t group, kn_tensor *y);

/* Transposed convolution: X: N x C x in..., W: C x M/group x k..., B: M or
 * NULL. Y (N x M x out..., allocated) receives every X*W tap whose output
 * position (i*stride + k*dilation - pad_begin) falls inside it. */
int kn_k_conv_transpose(const kn_tensor *x, const kn_tensor *w, const kn_tensor *b,
                        const kn_nn_window *win, int64_t group, kn_tensor *y);

/* Pooling over windows of X into Y (N x C x out..., allocated). For MAX,
 * `indices` (i64, same shape as Y, or NULL) receives the flat index of the
 * max into X (row-major, or column-major over the spatial axes if
 * storage_order is 1). For AVG, count_include_pad counts padding taps in the
 * divisor. For LP, p is the norm's order. */
int kn_k_pool(const kn_tensor *x, const kn_nn_window *win, kn_pool_kind kind,
              bool count_include_pad, double p, int storage_order, kn_tensor *y,
              kn_tensor *indices);

/* Global pooling: Y is N x C x 1 x ... x 1 (allocated). */
int kn_k_global_pool(const kn_tensor *x, kn_pool_kind kind, double p, kn_tensor *y);

/* Inference batch norm: Y = (X - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c]. */
int kn_k_batchnorm(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *bias,
                   const kn_tensor *mean, const kn_tensor *var, double eps, kn_tensor *y);

/* Training batch norm: statistics over N and spatial axes. Y normalized with
 * the batch statistics; running_mean/var (either may be NULL) =
 * mean*momentum + batch*(1-momentum) (batch variance is the biased one). */
int kn_k_batchnorm_train(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *bias,
                         const kn_tensor *mean, const kn_tensor *var, double eps,
                         double momentum, kn_tensor *y, kn_tensor *running_mean,
                         kn_tensor *running_var);

/* Layer norm over axes [axis, rank). scale/bias (bias may be NULL) broadcast
 * to X's shape from axis on. mean/invstd (may be NULL) have X's shape with
 * the normalized axes set to 1 and are in their own (stash) dtype. */
int kn_k_layernorm(const kn_tensor *x, int axis, const kn_tensor *scale, const kn_tensor *bias,
                   double eps, kn_tensor *y, kn_tensor *mean, kn_tensor *invstd);

/* Instance norm: statistics per (n, c) over spatial axes; scale/bias per c. */
int kn_k_instancenorm(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *bias,
                      double eps, kn_tensor *y);

/* Group norm: statistics per (n, group); scale/bias have num_groups entries
 * (per_channel false, opset 18) or C entries (per_channel true, opset 21). */
int kn_k_groupnorm(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *bias,
                   int64_t num_groups, double eps, bool per_channel, kn_tensor *y);

/* Local response normalization across channels. */
int kn_k_lrn(const kn_tensor *x, int64_t size, double alpha, double beta, double bias,
             kn_tensor *y);

/* Y = X / ||X||_p along axis (p is 1 or 2). */
int kn_k_lpnorm(const kn_tensor *x, int axis, int64_t p, kn_tensor *y);

/* Y = (X - mean) / sqrt(var + 1e-9) with statistics over the axes whose
 * mask bit is set (bit i = axis i). */
int kn_k_mvn(const kn_tensor *x, unsigned axes_mask, kn_tensor *y);

/* Scatters X into Y (zero-filled, allocated) at the flat indices of
 * `indices` (any integer dtype, shape of X). Out-of-range index → error. */
int kn_k_maxunpool(const kn_tensor *x, const kn_tensor *indices, kn_tensor *y);

/* Max RoI pooling: rois R x 5 (batch, x1, y1, x2, y2); Y is R x C x ph x pw. */
int kn_k_maxroipool(const kn_tensor *x, const kn_tensor *rois, double spatial_scale,
                    kn_tensor *y);

/* RoiAlign: rois R x 4 (x1, y1, x2, y2), batch_indices R (integers); Y is
 * R x C x oh x ow. mode_max selects max instead of average; half_pixel
 * shifts coordinates by -0.5. */
int kn_k_roialign(const kn_tensor *x, const kn_tensor *rois, const kn_tensor *batch_indices,
                  bool mode_max, int64_t sampling_ratio, double spatial_scale,
                  bool half_pixel, kn_tensor *y);

/* Col2Im: X is N x (C*prod(block)) x L; Y is N x C x image... (allocated);
 * win gives block (kernel), strides, dilations and pads. */
int kn_k_col2im(const kn_tensor *x, const kn_nn_window *win, kn_tensor *y);

/* RMS normalization over axes [axis, rank): Y = X / sqrt(mean(X^2) + eps) *
 * scale, scale broadcasting (numpy rules) to X's shape. */
int kn_k_rmsnorm(const kn_tensor *x, int axis, const kn_tensor *scale, double eps, kn_tensor *y);

/* ONNX Attention (opset 23/24). Q is B x Hq x Sq x D, or B x Sq x (Hq*D)
 * when three_d (K and V likewise with Hkv heads); past_key/past_value are
 * B x Hkv x P x D (Dv). T = P + Skv keys are attended. */
typedef struct kn_attn_dims {
    int64_t B, Hq, Hkv, Sq, Skv, P, D, Dv;
    bool three_d;
} kn_attn_dims;

typedef struct kn_attn_params {
    double scale;   /* applied to Q.K^T */
    double softcap; /* > 0: s = softcap * tanh(s / softcap) */
    bool causal;    /* key j is masked for query i when j > i + P */
    int qk_mode;    /* what qk receives: 0/1 the (softcapped) scores, 2 with the mask added, 3 softmax */
} kn_attn_params;

/* attn_mask (bool: false masks; float: added) broadcasts to
 * B x Hq x Sq x T on its leading axes; a last axis shorter than T is padded
 * with masked keys. nonpad (int64 B, may be NULL) masks keys j >= nonpad[b].
 * y, present_k, present_v, qk are allocated (the last three may be NULL). */
int kn_k_attention(const kn_attn_dims *dm, const kn_attn_params *pr, const kn_tensor *q,
                   const kn_tensor *k, const kn_tensor *v, const kn_tensor *mask,
                   const kn_tensor *past_k, const kn_tensor *past_v, const kn_tensor *nonpad,
                   kn_tensor *y, kn_tensor *present_k, kn_tensor *present_v, kn_tensor *qk);

/* RotaryEmbedding (opset 23). X is B x H x S x D, or B x S x (H*D) (three_d).
 * cos/sin are max_pos x R/2 indexed by pos (int B x S) or, without pos,
 * B x S x R/2. The first R (rot_dim) entries of each head are rotated, as
 * halves or as interleaved pairs. */
int kn_k_rotary(const kn_tensor *x, const kn_tensor *cosc, const kn_tensor *sinc, const kn_tensor *pos,
                int64_t H, int64_t rot_dim, bool interleaved, bool three_d, kn_tensor *y);

/* Helpers shared by the nn kernel files: a malloc'd copy of t's n elements
 * widened to double (NULL with an error on out of memory; n == 0 gives a
 * 1-element buffer), and the store back into t's dtype. */
double *kn_nn_to_f64(const kn_tensor *t);
void kn_nn_from_f64(kn_tensor *t, const double *v);

#ifdef __cplusplus
}
#endif
#endif
