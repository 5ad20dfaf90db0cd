/*
 * passes/normalize_qop.h — onnxruntime's QOperator nodes (QLinearConv,
 * QLinearMatMul, com.microsoft QGemm, QLinearAdd, ...) rewritten into
 * DequantizeLinear → float op → QuantizeLinear; the first phase of the
 * lower-qdq pass (passes/lower_qdq.c), not a pass of its own.
 */
#ifndef KILN_PASSES_NORMALIZE_QOP_H
#define KILN_PASSES_NORMALIZE_QOP_H

#include "pass.h"

/* Rewrites every QOperator node of g (not its subgraphs) whose parameters
 * qualify (normalize_qop.c) and leaves g sorted and inferred, its
 * constants unfolded. *out_changed: whether any node was rewritten. */
int kn_normalize_qop(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed);

#endif
