/*
 * runtime/ops/nn_int.h — shape and attribute logic of the 'nn' ops, shared by
 * their execution (runtime/ops/nn.c) and their type/shape inference
 * (ir/ops/nn.c, which calls these with a descriptor the IR builds from the
 * node).
 *
 * Each "geometry" function works on plain dims arrays where -1 means
 * unknown: inference passes the IR shapes, execution the actual tensors'
 * dims (all known), so the two always agree. Errors name the node through
 * kn_op_error(). Private to kiln: not part of the runtime's public API.
 *
 *     kn_nn_window w;
 *     int64_t group, od[KN_MAX_RANK];
 *     if (kn_nn_conv_geometry(d, x->rank, x->dims, w->dims, &w, &group, od)) ...
 */
#ifndef KILN_RUNTIME_OPS_NN_INT_H
#define KILN_RUNTIME_OPS_NN_INT_H

#include "k_nn.h"
#include "opdesc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True for the float dtypes the nn kernels accept. */
bool kn_nn_is_float(kn_dtype dt);

/* Conv: output dims od of X (rank, xd) by W (wd; NULL if unknown); fills the
 * window (auto_pad resolved into pads) and the group count. */
int kn_nn_conv_geometry(const kn_opdesc *d, int rank, const int64_t *xd, const int64_t *wd,
                        kn_nn_window *w, int64_t *group, int64_t *od);

/* ConvTranspose: as kn_nn_conv_geometry (W is C x M/group x k...). */
int kn_nn_convt_geometry(const kn_opdesc *d, int rank, const int64_t *xd, const int64_t *wd,
                         kn_nn_window *w, int64_t *group, int64_t *od);

/* MaxPool/AveragePool/LpPool: output dims od of X (rank, xd). */
int kn_nn_pool_geometry(const kn_opdesc *d, int rank, const int64_t *xd, kn_nn_window *w, int64_t *od);

/* MaxUnpool: `nat` is the shape the pooling attributes imply (the space the
 * indices address); od is the output_shape tensor's value when os is
 * non-NULL, else nat. */
int kn_nn_unpool_geometry(const kn_opdesc *d, int rank, const int64_t *xd, const kn_tensor *os,
                          int64_t *nat, int64_t *od);

/* MaxRoiPool/RoiAlign: output dims R x C x oh x ow from X (xr, xd) and the
 * rois (rr, rd; -1 ranks = unknown), rois having `cols` columns. */
int kn_nn_roi_geometry(const kn_opdesc *d, int xr, const int64_t *xd, int rr, const int64_t *rd, int cols,
                       int64_t oh, int64_t ow, int64_t *od);
/* MaxRoiPool's pooled_shape attribute. */
int kn_nn_roipool_size(const kn_opdesc *d, int64_t *oh, int64_t *ow);

/* Col2Im: output rank and dims N x C x image... from the input (xr, xd) and
 * the image_shape/block_shape tensors; fills the window. */
int kn_nn_col2im_geometry(const kn_opdesc *d, int xr, const int64_t *xd, const kn_tensor *img,
                          const kn_tensor *blk, kn_nn_window *w, int *out_rank, int64_t *od);

/* Global pooling: od = xd with the spatial dims (from axis 2 on) set to 1. */
void kn_nn_global_dims(int rank, const int64_t *xd, int64_t *od);

/* LayerNormalization: the normalized axis (from the 'axis' attribute) and
 * the dims md of the Mean/InvStdDev outputs (xd up to axis, then 1s). */
int kn_nn_layernorm_geometry(const kn_opdesc *d, int rank, const int64_t *xd, int *axis, int64_t *md);

/* Attention: the problem's dims (-1 where unknown) from Q, K, V and
 * past_key's (pr < 0: absent) ranks and dims and the q_num_heads /
 * kv_num_heads attributes; the output dims: Y (yrank 3 or 4), present_key,
 * present_value and qk (all rank 4). */
int kn_nn_attention_geometry(const kn_opdesc *d, int qr, const int64_t *qd, int kr, const int64_t *kd, int vr,
                             const int64_t *vd, int pr, const int64_t *pd, kn_attn_dims *dm, int *yrank,
                             int64_t *yd, int64_t *pkd, int64_t *pvd, int64_t *qkd);

/* RotaryEmbedding: X's heads (H), the rotated width (rot) and whether X is
 * 3-D, checked against X's dims (-1 where unknown). */
int kn_nn_rotary_geometry(const kn_opdesc *d, int xr, const int64_t *xd, int64_t *H, int64_t *rot, bool *three_d);

/* LayerNormalization's stash_type as a float dtype (def if absent/not float). */
kn_dtype kn_nn_stash_dtype(const kn_opdesc *d, kn_dtype def);

#ifdef __cplusplus
}
#endif
#endif
