/*
 * runtime/ops/vision_int.h — private to the 'vision' family: the attribute and
 * shape rules that both its execution (runtime/ops/vision.c) and its type/shape
 * inference (ir/ops/vision.c, through a descriptor the IR builds per node)
 * need, so each rule exists once. Errors name the node through
 * kn_op_error().
 */
#ifndef KILN_RUNTIME_VISION_INT_H
#define KILN_RUNTIME_VISION_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "k_vision.h"
#include "opdesc.h"

/* GridSample's mode and padding_mode. */
int kn_vis_gs_params(const kn_opdesc *d, kn_gs_mode *mode, kn_gs_pad *pad);
/* AffineGrid: reads the size input (N, C, H, W) or (N, C, D, H, W) into
 * dims; *s = spatial rank. */
int kn_vis_ag_size(const kn_opdesc *d, const kn_tensor *size, int64_t *dims, int *s);
/* DeformConv: fills p from the attributes for spatial rank s and kernel
 * dims kd (from W, -1 where unknown). */
int kn_vis_dc_params(const kn_opdesc *d, int s, const int64_t *kd, kn_deform_params *p);
/* Output spatial dim i of a DeformConv over an input dim of size len (-1
 * if unknown). */
int64_t kn_vis_dc_out_dim(const kn_deform_params *p, int i, int64_t len);

#endif
