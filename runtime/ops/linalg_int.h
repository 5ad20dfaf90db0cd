/*
 * runtime/ops/linalg_int.h — attribute logic of the 'linalg' ops shared by
 * their execution (runtime/ops/linalg.c) and their type/shape inference
 * (ir/ops/linalg.c, which calls these with a descriptor the IR builds from
 * the node), so opset-dependent defaults are decided in one place.
 * Shape arithmetic is in the kernels' *_shape helpers (k_linalg.h). Private
 * to kiln: not part of the runtime's public API.
 *
 *     int64_t axis = kn_linalg_softmax_axis(d);   // 1 before opset 13, else -1
 */
#ifndef KILN_RUNTIME_OPS_LINALG_INT_H
#define KILN_RUNTIME_OPS_LINALG_INT_H

#include "k_linalg.h"
#include "opdesc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax/LogSoftmax/Hardmax: the 'axis' attribute with its opset-dependent
 * default. Before opset 13 the ops flatten the input to 2-D at axis. */
int64_t kn_linalg_softmax_axis(const kn_opdesc *d);

/* QuantizeLinear's output dtype: the zero point's (zp_dt, if defined), else
 * the 'output_dtype' attribute (opset 21), else u8. Not checked for validity. */
kn_dtype kn_linalg_quant_out_dtype(const kn_opdesc *d, kn_dtype zp_dt);

/* DequantizeLinear's output dtype: the 'output_dtype' attribute if set (it
 * must name a float dtype), else scale_dt. */
int kn_linalg_dequant_out_dtype(const kn_opdesc *d, kn_dtype scale_dt, kn_dtype *out_dt);

/* ConvInteger/QLinearConv geometry from the attributes; kernel dims default
 * to the weight's (w_dims, NULL if unknown → -1). */
int kn_linalg_conv_params(const kn_opdesc *d, int nsp, const int64_t *w_dims, kn_k_conv_params *p);

#ifdef __cplusplus
}
#endif
#endif
