/*
 * passes/fuse_conv.c — Conv + bias Add + activations + residual Add → one
 * kiln::FusedConv (runtime/ops/fused_int.h), which the cpu backend runs as
 * one oneDNN convolution with post-ops instead of a convolution and a
 * generated loop per elementwise op.
 *
 *   %c = Conv(%x, %w, _)            %y = kiln::FusedConv(%x, %w, %conv.bias, %s)
 *   %b = Add(%c, %bias[O,1,1])  →        {..Conv's attributes..,
 *   %a = Add(%b, %s)                      post_ops=["Add", "Relu"], ...}
 *   %y = Relu(%a)
 *
 * Conditions (each near miss is a remark): f32 Conv with a known output
 * channel count; every intermediate value has one user and is no graph
 * output; the bias addend is a constant holding one value per output
 * channel (or one value) and comes before any activation; a residual has
 * the output's shape and dtype, and there is at most one; at most
 * KN_FUSED_MAX_POST post-ops.
 *
 * Preconditions: an inferred graph in topological order; constants folded
 * (the bias must be a constant), BatchNormalization folded into the Conv
 * (fold-batchnorm) for the chains of exported CNNs to start at a Conv.
 */
#include <stdlib.h>

#include "fuse_util.h"

/* The Conv's output channel count, or -1. */
static int64_t out_channels(const kn_node *n)
{
    const kn_value *w = kn_node_input(n, 1);
    return w && w->shape.rank >= 3 ? w->shape.dims[0] : -1;
}

static int fuse_one(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, bool *out_changed)
{
    kn_value *y = n->outputs[0], *b = kn_node_input(n, 2);
    if (!y || y->dtype != KN_F32) {
        if (y && y->n_users > 0 && y->dtype != KN_DT_UNDEFINED)
            kn_pass_remark(ctx, "Conv '%s': dtype %s; only f32 is fused", n->name, kn_dtype_name(y->dtype));
        return KN_OK;
    }
    int64_t O = out_channels(n);
    kn_fuse_chain ch;
    kn_fuse_begin(&ch, n, "Conv");
    int st = kn_fuse_take_bias(ctx, g, &ch, 1, O, b);
    if (st) return st;
    kn_fuse_take_posts(ctx, &ch);
    if (ch.n_nodes == 1) return KN_OK;
    kn_value *ins[2] = {kn_node_input(n, 0), kn_node_input(n, 1)};
    *out_changed = true;
    return kn_fuse_commit(ctx, g, &ch, KN_OP_FusedConv, ins, 2, NULL);
}

int kn_pass_fuse_conv(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    /* a snapshot: fusing removes nodes and appends one */
    int count = g->n_nodes;
    kn_node **heads = malloc(sizeof *heads * (size_t)(count ? count : 1));
    if (!heads) return kn_error(KN_ERR_NOMEM, "out of memory");
    int nh = 0;
    for (int i = 0; i < count; i++)
        if (g->nodes[i]->op == KN_OP_Conv && g->nodes[i]->n_outputs == 1) heads[nh++] = g->nodes[i];
    int st = KN_OK;
    for (int i = 0; i < nh && !st; i++) st = fuse_one(ctx, g, heads[i], out_changed);
    free(heads);
    if (!st && *out_changed) st = kn_pass_finish(g);
    return st;
}
