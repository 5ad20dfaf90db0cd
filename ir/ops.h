/*
 * ir/ops.h — the op registry.
 *
 * Ops are declared once in runtime/ops/ops.def (name, domain, arity, class,
 * opset range). Each is given its type/shape inference once, in the family
 * file ir/ops/<family>.c that owns it, by an entry of that family's
 * kn_op_impl table; it runs through its runtime/ops exec function
 * (kn_op_exec). ir/registry.c merges the family tables and checks at
 * start-up that no op is defined twice.
 *
 *     const kn_op_info *oi = kn_op_lookup("Conv", "");
 *     if (!oi || !oi->infer) ... unsupported ...
 *
 * Writing an op's inference (in its family file):
 *
 *     static int infer_relu(kn_node *n) {  // fill n->outputs[i]->dtype/shape
 *         return kn_infer_same_as_input(n, 0);
 *     }
 *     const kn_op_impl kn_ops_elementwise[] = {
 *         {KN_OP_Relu, infer_relu},
 *         {KN_OP_UNKNOWN, NULL},   // terminator
 *     };
 */
#ifndef KILN_IR_OPS_H
#define KILN_IR_OPS_H

#include "kiln/tensor.h"
#include "opdesc.h" /* kn_op, kn_attr, kn_opdesc (runtime/ops) */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_node kn_node;
typedef struct kn_eval_ctx kn_eval_ctx;

/* Fills the dtype and shape of n's outputs from its inputs and attributes
 * (constant inputs are visible through inputs[i]->const_data). Unknown dims
 * stay -1 (or symbolic); fails with a message naming the node when the
 * inputs are inconsistent. */
typedef int (*kn_infer_fn)(kn_node *n);

typedef struct kn_op_impl {
    kn_op op;
    kn_infer_fn infer;
} kn_op_impl;

typedef struct kn_op_info {
    kn_op op;
    const char *name;   /* ONNX op_type */
    const char *domain; /* "" for the default domain */
    int min_inputs, max_inputs;
    int min_outputs, max_outputs;
    int since, until;   /* the domain's opsets in which the op exists (ops.def; until 0: no end) */
    kn_infer_fn infer;  /* NULL if not defined yet */
} kn_op_info;

/* Info for an op; never NULL for op in (KN_OP_UNKNOWN, KN_OP_COUNT). */
const kn_op_info *kn_op_get(kn_op op);
/* Looks an op up by ONNX name and domain ("" and "ai.onnx" are the same);
 * NULL if kiln does not declare it. */
const kn_op_info *kn_op_lookup(const char *op_type, const char *domain);
/* The ONNX name of op ("?" for KN_OP_UNKNOWN). */
const char *kn_op_name(kn_op op);

/* The family tables (each ends with {KN_OP_UNKNOWN}). */
extern const kn_op_impl kn_ops_elementwise[]; /* unary/binary math, logic, activations, Cast, Where, Clip */
extern const kn_op_impl kn_ops_nn[];          /* Conv*, pooling, normalizations, LRN */
extern const kn_op_impl kn_ops_linalg[];      /* MatMul, Gemm, Einsum, Softmax family, quantization ops */
extern const kn_op_impl kn_ops_reduce[];      /* Reduce*, ArgMax/Min, CumSum, TopK */
extern const kn_op_impl kn_ops_generate[];    /* Shape, Size, ConstantOfShape, Range, EyeLike, Trilu, OneHot */
extern const kn_op_impl kn_ops_select[];      /* NonZero, Compress, Unique (output size is data) */
extern const kn_op_impl kn_ops_movement[];    /* shape and data-movement ops */
extern const kn_op_impl kn_ops_control[];     /* If, Loop, Scan, Constant, Identity */
extern const kn_op_impl kn_ops_vision[];      /* GridSample, AffineGrid, DeformConv, NonMaxSuppression */
extern const kn_op_impl kn_ops_signal[];      /* DFT, STFT, MelWeightMatrix, the windows */
extern const kn_op_impl kn_ops_recurrent[];   /* RNN, GRU, LSTM */
extern const kn_op_impl kn_ops_misc[];        /* the losses, CenterCropPad, ReverseSequence, TfIdfVectorizer */
extern const kn_op_impl kn_ops_fused[];       /* kiln-domain fused ops (FusedConv, FusedMatMul) */
extern const kn_op_impl kn_ops_contrib_q[];   /* com.microsoft quantization ops (QLinearAdd, QGemm, ...) */
extern const kn_op_impl kn_ops_contrib_bert[]; /* com.microsoft transformer ops (SkipLayerNormalization, Attention, ...) */

#ifdef __cplusplus
}
#endif
#endif
