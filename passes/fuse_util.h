/*
 * passes/fuse_util.h — what the fusion passes (fuse_conv.c, fuse_matmul.c)
 * share: growing a chain of post-operations (activations, one residual Add)
 * behind a Conv or a matrix product, folding a constant bias Add into a
 * per-channel bias, and replacing the chain by one kiln-domain fused node
 * (runtime/ops/fused_int.h).
 *
 *     kn_fuse_chain ch;
 *     kn_fuse_begin(&ch, conv, "Conv");
 *     kn_fuse_take_bias(ctx, &ch, 1, O, old_bias);  // Add of a per-channel constant
 *     kn_fuse_take_posts(ctx, &ch);                 // Relu, Clip, ..., residual Add
 *     if (ch.n_nodes > 1) kn_fuse_commit(ctx, &ch, KN_OP_FusedConv, ins, 2, ...);
 *
 * Every condition that stops a chain early is recorded with kn_pass_remark
 * ("Conv 'c12' + Relu 'r12': Conv output has 2 users").
 */
#ifndef KILN_PASSES_FUSE_UTIL_H
#define KILN_PASSES_FUSE_UTIL_H

#include "fused_int.h"
#include "pass.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Nodes one chain may replace: the head, up to KN_FUSE_MAX_BIAS_ADDS bias
 * Adds and KN_FUSED_MAX_POST post-ops. */
#define KN_FUSE_MAX_BIAS_ADDS 3
#define KN_FUSE_MAX_NODES (1 + KN_FUSE_MAX_BIAS_ADDS + KN_FUSED_MAX_POST)

typedef struct kn_fuse_chain {
    kn_node *head;                        /* the Conv / MatMul / Gemm */
    const char *what;                     /* its name in remarks: "Conv" */
    kn_node *nodes[KN_FUSE_MAX_NODES];    /* head, then every node taken */
    int n_nodes;
    kn_value *out;                        /* the chain's result so far */
    kn_value *bias;                       /* the fused bias (a constant), or NULL */
    kn_value *residual;                   /* input R, or NULL */
    kn_abi_post post[KN_FUSED_MAX_POST];
    int n_post;
} kn_fuse_chain;

/* Starts a chain at head (its output 0). */
void kn_fuse_begin(kn_fuse_chain *ch, kn_node *head, const char *what);

/* True if the output of the chain may be extended into `next`: next is its
 * only user and it is no graph output. Otherwise records a remark naming
 * next (not for a fork after an activation, the usual end of a chain). */
bool kn_fuse_can_extend(kn_pass_ctx *ctx, const kn_fuse_chain *ch, const kn_node *next);

/* Takes Adds of a constant that varies only along `axis` of the output
 * (a channel bias: [O,1,1], [1,O,1,1], [O] on the last axis, a scalar) into
 * the chain's bias: a new [count] constant holding old_bias (may be NULL)
 * plus the addends. Only before any post-op. */
int kn_fuse_take_bias(kn_pass_ctx *ctx, kn_graph *g, kn_fuse_chain *ch, int axis, int64_t count,
                      kn_value *old_bias);

/* The post-op an activation node u becomes (Relu, Clip with constant
 * bounds, LeakyRelu, Sigmoid, Tanh, HardSwish, Gelu); false with *why set
 * for anything else. */
bool kn_fuse_post_of(const kn_node *u, kn_abi_post *p, const char **why);

/* Takes activations and one residual Add (an addend of the output's shape
 * and dtype) while the chain has room. */
void kn_fuse_take_posts(kn_pass_ctx *ctx, kn_fuse_chain *ch);

/* Replaces the chain by one node of op (domain "kiln") named like the head,
 * with inputs ins[0..n_ins) then the chain's bias and residual, the head's
 * attributes but those named in drop (NULL-terminated, may be NULL), and
 * post_ops/post_alpha/post_beta. The chain's result value keeps its name
 * and users. */
int kn_fuse_commit(kn_pass_ctx *ctx, kn_graph *g, kn_fuse_chain *ch, kn_op op, kn_value *const *ins, int n_ins,
                   const char *const *drop);

/* Replaces nodes[0..n_nodes) (head first, each read only by the next) by
 * one node of op (its domain's opset declared) named like the head, at the
 * head's place, with inputs ins, the head's attributes but those named in
 * drop, and output `out` (keeping its name and users). NULL when out of
 * memory (kn_last_error says so). */
kn_node *kn_fuse_replace(kn_pass_ctx *ctx, kn_graph *g, kn_node *head, kn_node *const *nodes, int n_nodes,
                         kn_value *out, kn_op op, kn_value *const *ins, int n_ins, const char *const *drop);

/* Writes post_ops/post_alpha/post_beta of n from post[0..np) (none if np 0). */
int kn_fuse_set_posts(kn_node *n, const kn_abi_post *post, int np);

/* Adds list attribute `name` of kind with np elements of elem bytes, in the
 * model's arena (*out_items: where to write them); NULL when out of memory. */
kn_attr *kn_fuse_add_list(kn_node *n, const char *name, kn_attr_kind kind, int np, size_t elem, void **out_items);

#ifdef __cplusplus
}
#endif
#endif
