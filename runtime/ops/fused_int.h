/*
 * runtime/ops/fused_int.h — kiln's fused ops (domain "kiln"): a convolution
 * or a matrix product followed by a short chain of post-operations, written
 * by the fusion passes (passes/fuse_conv.c, passes/fuse_matmul.c).
 *
 *   FusedConv(X, W, B?, R?)    Conv's attributes, then post_ops
 *   FusedConvTranspose(X, W, B?, R?)  ConvTranspose's attributes (B: one
 *                              value per output channel), then post_ops
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
 * A third fused op is a chain (a small DAG) of elementwise steps that the
 * cpu backend runs as one generated loop (passes/fuse_elementwise.c):
 *
 *   FusedElementwise(X0, .., Xn-1)   n <= KN_EW_MAX_INPUTS
 *     steps     (strings)  the ONNX op of each step, in order: a unary op
 *                          (kn_fused_ew_unary_ok), Add, Sub, Mul, Div,
 *                          Pow, Max, Min, or QuantizeLinear /
 *                          DequantizeLinear per tensor
 *     operands  (ints)     one per unary step, two per binary step: i >= 0
 *                          is input Xi, -k is the result of step k-1 (an
 *                          earlier step)
 *     step_alpha, step_beta, step_gamma (floats, one per step): a unary
 *                          step's parameters (kn_unary_params); a
 *                          QuantizeLinear's or DequantizeLinear's scale,
 *                          zero point and 8-bit type (ONNX element type: 2
 *                          u8, 3 s8)
 *   The output is the last step's result; numpy broadcasting applies at
 *   every step, so it has the broadcast shape of all inputs. Every input
 *   and every step but the last is read by some later step. Values are f32
 *   but for the 8-bit ones: an input that DequantizeLinear steps read (and
 *   nothing else), and a QuantizeLinear's result, which only
 *   DequantizeLinear steps of its type read, unless it is the output. So
 *   DequantizeLinear → Add → QuantizeLinear of two 8-bit tensors is one
 *   loop that writes 8-bit values (passes/fuse_elementwise.c).
 *
 *     kn_ew_program prog;
 *     if (kn_fused_ew_program(d, d->n_inputs, &prog)) return ...;
 *
 * Private to kiln: not part of the runtime's public API.
 */
#ifndef KILN_RUNTIME_OPS_FUSED_INT_H
#define KILN_RUNTIME_OPS_FUSED_INT_H

#include <stdbool.h>

#include "k_elementwise.h"
#include "kiln/abi.h"
#include "opdesc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_FUSED_MAX_POST 4

/* Index of input R (the residual) in every fused op above. */
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

/* Applies step p to y in place with the kernel the unfused op runs (r: the
 * residual of a KN_POST_SUM). */
int kn_fused_apply_post(const kn_abi_post *p, const kn_tensor *r, kn_tensor *y);

/* True if the list holds a KN_POST_SUM (the op then needs input R). */
bool kn_fused_has_sum(const kn_abi_post *post, int n);

/* True if two steps of the list use one oneDNN eltwise algorithm with
 * different parameters (LeakyRelu and Relu are both its relu). oneDNN 2.x
 * (Debian's 2.6) runs them both with the first one's: Clip(0, 6) then
 * Clip(-0.5, 1.5) clamps to [0, 6]. Every path that gives a node's
 * post-ops to oneDNN declines such a list (found by the differential
 * tester; tests/difftest/regress/). Clips have KN_FUSED_CLIP_VARIANTS
 * algorithms that compute the same (clip_v2 and
 * clip_v2_use_dst_for_bwd, which differ in the backward pass only), so two
 * clips with different bounds pass: a quantization-aware-trained residual
 * block clips to its inner and its output quantization's ranges. */
bool kn_fused_posts_collide(const kn_abi_post *post, int n);

#define KN_FUSED_CLIP_VARIANTS 2
/* Which clip algorithm post[i] (a KN_POST_CLIP) runs as: 0 for the first
 * bounds in the list, 1 for the second distinct bounds, and so on. */
int kn_fused_clip_variant(const kn_abi_post *post, int i);

/* ---- FusedElementwise ---------------------------------------------------- */

#define KN_EW_MAX_INPUTS 16
#define KN_EW_MAX_STEPS 32

typedef struct kn_ew_step {
    kn_op op;                 /* the ONNX op it stands for */
    bool binary;
    kn_unary_op un;           /* unary steps */
    kn_binary_op bin;         /* binary steps */
    kn_unary_params p;        /* QuantizeLinear/DequantizeLinear: alpha the scale, beta the zero point */
    kn_dtype q;               /* QuantizeLinear/DequantizeLinear: the 8-bit type; else KN_DT_UNDEFINED */
    int a, b;                 /* operands: >= 0 an input, < 0 -(step + 1) */
} kn_ew_step;

typedef struct kn_ew_program {
    int n_steps;
    kn_ew_step steps[KN_EW_MAX_STEPS];
    kn_dtype in_dt[KN_EW_MAX_INPUTS]; /* f32, or the 8-bit type of the DequantizeLinear steps that read it */
    kn_dtype out_dt;                  /* f32, or the last step's 8-bit type when it is a QuantizeLinear */
} kn_ew_program;

/* True if the unary op may be a step (f32 in, f32 out, parameters that
 * kn_unary_params holds). */
bool kn_fused_ew_unary_ok(kn_op op);
/* The binary kernel op of a binary step op; false if op is none. */
bool kn_fused_ew_binary(kn_op op, kn_binary_op *out);

/* Reads and checks d's program for n_inputs inputs; fails naming the node
 * (unknown step, operand out of range or not earlier, an input or a step
 * nothing reads, list lengths, a quantization's parameters, a value read
 * as f32 and as 8-bit). */
int kn_fused_ew_program(const kn_opdesc *d, int n_inputs, kn_ew_program *out);

#ifdef __cplusplus
}
#endif
#endif
