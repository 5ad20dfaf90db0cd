/*
 * quant/quantize.h — graph rewrites into kiln's one quantized form:
 * QuantizeLinear → DequantizeLinear pairs (ONNX semantics), which run today
 * as runtime kernels (fake quantization, correct but slow) and which the
 * lowering pass turns into integer kernels where it recognizes
 * DQ → Conv/MatMul/Gemm (+bias, relu, residual) → Q.
 *
 *     kn_model *m = ...imported, inferred...;
 *     kn_quant_prepare(m);                         // the passes calibration saw
 *     kn_calib_table t; kn_calib_table_read("t.json", &t);
 *     kn_quant_opts o = {.table = &t};
 *     if (kn_quantize_static(m, &o)) ...kn_last_error()...
 *
 * Placement follows onnxruntime's static QDQ quantizer:
 *   - kn_quant_select() names the activations to calibrate: every float
 *     input and output of the ops in KN_QUANT_OPS, except an output that
 *     the integer kernel computes internally: a Conv/MatMul/Gemm/Add output
 *     read only by a Relu or Clip (fused activation), or a Conv/MatMul/Gemm
 *     output read only by an Add (bias or residual sum).
 *   - static: each of those activations T gets T → Q → DQ, and its readers
 *     (nodes left in float excepted) read the DQ; a graph output keeps its
 *     float value. Conv weights become s8 per output channel, MatMul/Gemm
 *     weights s8 per tensor (per output channel with per_channel), stored as
 *     s8 constants + DequantizeLinear; Conv/Gemm biases int32 with scale
 *     x_scale * w_scale, zero point 0 (+ DequantizeLinear). Weights are only
 *     quantized where the activation input is.
 *   - dynamic: MatMul/Gemm with a constant 2-D weight: s8 per output
 *     channel weights + DequantizeLinear, and the activation input
 *     DynamicQuantizeLinear → DequantizeLinear (u8, per tensor, at run time).
 * Per-channel parameters need opset >= 13 (DequantizeLinear's axis); on an
 * older model weights are quantized per tensor.
 */
#ifndef KILN_QUANT_QUANTIZE_H
#define KILN_QUANT_QUANTIZE_H

#include <stdbool.h>

#include "ir.h"
#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The graph passes that run before calibration and before quantization, so
 * that both see the same graph and the same tensor names (BatchNorm folded
 * into the convolutions, as onnxruntime's quantizer expects). */
#define KN_QUANT_PREPASSES "fold-constants,fold-shapes,freeze,simplify,cse,fold-batchnorm,dce"

/* The op types whose inputs and outputs static quantization covers. */
#define KN_QUANT_OPS "Conv, ConvTranspose, MatMul, Gemm, Add, Mul, Concat, MaxPool, AveragePool, GlobalAveragePool, Relu, Clip, LeakyRelu, Sigmoid"

typedef struct kn_quant_opts {
    const kn_calib_table *table; /* static: the calibration table */
    bool per_channel;            /* MatMul/Gemm weights per output channel (Conv: always) */
    int weight_max;              /* weights in [-weight_max, weight_max]: 127, or 63 (7 bits); 0: 127 */
    int n_keep;                  /* nodes left in float: node names or op types */
    const char *const *keep;
} kn_quant_opts;

/* Toposorts m's main graph and runs KN_QUANT_PREPASSES on it. */
int kn_quant_prepare(kn_model *m);

/* True if node n is left in float by keep[0..n_keep) (its name or op type). */
bool kn_quant_is_kept(const kn_node *n, int n_keep, const char *const *keep);

/* KN_OK if every keep[i] names a node or an op type of g; otherwise an
 * error naming the first that does not (a typo would silently keep
 * nothing in float). */
int kn_quant_check_keep(const kn_graph *g, int n_keep, const char *const *keep);

/* The activations static quantization covers, in graph order (graph
 * inputs, then node outputs in node order). *out_vals is malloc'd. */
int kn_quant_select(const kn_graph *g, int n_keep, const char *const *keep, kn_value ***out_vals, int *out_n);

/* Static int8: QDQ on every activation of o->table (each name must be a
 * float value of the graph, else an error naming it), weights and biases as
 * above. Leaves the graph toposorted and inferred. */
int kn_quantize_static(kn_model *m, const kn_quant_opts *o);

/* Dynamic int8 (o->table unused). Leaves the graph toposorted and inferred. */
int kn_quantize_dynamic(kn_model *m, const kn_quant_opts *o);

#ifdef __cplusplus
}
#endif
#endif
