/*
 * runtime/ops/fused_int.h — kiln's fused ops (domain "kiln"): a convolution
 * or a matrix product followed by a short chain of post-operations, written
 * by the fusion passes (passes/fuse_conv.c, passes/fuse_matmul.c).
 *
 *   FusedConv(X, W, B?, R?)    Conv's attributes, then post_ops
 *   FusedMatMul(A, B, C?, R?)  transA, transB (2-D only), alpha; then
 *                              Y = alpha * op(A) x op(B) + C, C holding N
 *                              values ([N] or [1, N]), then post_ops
 *
 * post_ops (strings) names the steps applied in order to the result, with
 * post_alpha / post_beta (floats, one per step) as their parameters:
 *   "Add"        Y += R (the residual input, same shape as Y)
 *   "Relu", "Sigmoid", "Tanh", "HardSwish", "Gelu" (erf), "GeluTanh"
 *   "LeakyRelu"  alpha = slope
 *   "Clip"       alpha = min, beta = max (±inf: no bound)
 * At most KN_FUSED_MAX_POST steps and one "Add" (what one oneDNN primitive
 * takes). The steps map one to one onto kn_abi_post records, so the
 * reference kernel (runtime/ops/fused.c) and the oneDNN lowering
 * (codegen/cpu/lower_dnnl.c) read the same list.
 *
 *     kn_abi_post post[KN_FUSED_MAX_POST];
 *     int n;
 *     if (kn_fused_posts(d, post, &n)) return ...;   // error names the node
 *
 * Private to kiln: not part of the runtime's public API.
 */
#ifndef KILN_RUNTIME_OPS_FUSED_INT_H
#define KILN_RUNTIME_OPS_FUSED_INT_H

#include <stdbool.h>

#include "kiln/abi.h"
#include "opdesc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_FUSED_MAX_POST 4

/* Index of input R (the residual) in both fused ops. */
#define KN_FUSED_RESIDUAL 3

/* The post_ops name of a kn_abi_post kind ("Add" for KN_POST_SUM); NULL if
 * the kind has none. */
const char *kn_fused_post_name(int kind);

/* The kind named `name` in post_ops; KN_POST_NONE if unknown. */
int kn_fused_post_kind(const char *name);

/* Reads post_ops / post_alpha / post_beta of d into post (KN_FUSED_MAX_POST
 * entries); *out_n receives the count. Fails naming the node on an unknown
 * name, lists of other lengths, too many steps or more than one "Add". */
int kn_fused_posts(const kn_opdesc *d, kn_abi_post *post, int *out_n);

/* True if the list holds a KN_POST_SUM (the op then needs input R). */
bool kn_fused_has_sum(const kn_abi_post *post, int n);

#ifdef __cplusplus
}
#endif
#endif
