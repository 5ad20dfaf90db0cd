/*
 * runtime/ops/fused_q.h — kiln's integer ops (domain "kiln"), written by
 * passes/lower_qdq.c from DequantizeLinear → Conv/MatMul/Gemm (+ bias,
 * activations, a residual Add) → QuantizeLinear groups, and run by the cpu
 * backend as one oneDNN int8 primitive (codegen/cpu/lower_dnnl.c).
 *
 *   QConv(X, W, B?, R?, S)     Conv's attributes
 *   QMatMul(X, W, B?, R?, S)   X [.., M, K] x W [K, N]
 *
 * X is u8 or s8, W is s8 with zero point 0; B (f32, one value per output
 * channel: O for QConv, N for QMatMul) is in accumulator units; S (f32) is
 * one scale or one per output channel. With acc the exact integer product
 * sum(X - x_zero_point) * W, each output element is
 *
 *     v = S[c] * (acc + B[c])            then post_ops in order:
 *         "Relu", "Clip", ... (fused_int.h; bounds in output units)
 *         "Add": v += post_alpha * (R - post_beta)   (R u8 or s8)
 *     Y = saturate(nearbyint(v) + y_zero_point)     Y u8 or s8
 *     Y = v                                          Y f32
 *
 * Dynamic quantization (QMatMul only): with X f32 the op first quantizes X
 * as DynamicQuantizeLinear does (u8 per tensor: scale xs, zero point xz
 * from X's range), then
 *
 *     v = xs * S[c] * acc + B[c]          (B in real units), post_ops
 *     Y = v                               (Y f32; a residual R is f32 too:
 *                                          "Add" adds post_alpha * R)
 *
 * which is oneDNN's int8 convolution and matmul with output scales S, a
 * source zero point, a sum post-op with scale and zero point, and a
 * destination zero point. Attributes: x_zero_point (int), y_zero_point
 * (int), y_dtype (int: ONNX element type, 1 f32, 2 u8, 3 s8), post_ops,
 * post_alpha, post_beta.
 *
 * A quantized model's numbers map onto it as
 *     S[c] = x_scale * w_scale[c] / y_scale     (y_scale 1 for f32 Y)
 *     B[c] = bias[c] / (x_scale * w_scale[c])
 *     "Add": post_alpha = r_scale / y_scale, post_beta = r_zero_point
 *
 * Private to kiln: not part of the runtime's public API.
 */
#ifndef KILN_RUNTIME_OPS_FUSED_Q_H
#define KILN_RUNTIME_OPS_FUSED_Q_H

#include <stdint.h>

#include "kiln/abi.h"
#include "opdesc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Input indices of QConv and QMatMul. */
enum { KN_Q_X = 0, KN_Q_W = 1, KN_Q_B = 2, KN_Q_R = 3, KN_Q_S = 4 };

/* The output dtype named by y_dtype (ONNX element type); KN_DT_UNDEFINED if
 * it is not f32, u8 or s8. */
kn_dtype kn_q_out_dtype(int64_t onnx_elem);
/* The ONNX element type of a KN dtype (1 f32, 2 u8, 3 s8); 0 otherwise. */
int64_t kn_q_onnx_elem(kn_dtype dt);
/* NULL if the zero points fit their tensors' types (x_zero_point in X's,
 * y_zero_point in Y's, 0 for an f32 Y; X f32: the dynamic form, none);
 * else what is wrong. */
const char *kn_q_check_zero_points(kn_dtype x_dt, int64_t x_zp, kn_dtype y_dt, int64_t y_zp);

#ifdef __cplusplus
}
#endif
#endif
