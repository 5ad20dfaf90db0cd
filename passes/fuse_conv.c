/*
 * passes/fuse_conv.c — Conv + bias Add + activations + residual Add → one
 * kiln::FusedConv (runtime/ops/fused_int.h), which the cpu backend runs as
 * one oneDNN convolution with post-ops instead of a convolution and a
 * generated loop per elementwise op. ConvTranspose chains become
 * kiln::FusedConvTranspose the same way (one oneDNN deconvolution, its
 * bias and post-ops applied in one pass: runtime/src/dnnl/deconv.c): every
 * step is elementwise on the output, so it commutes with nothing the
 * transposed convolution does differently.
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

/* The output channel count of a Conv (W is [O, C/g, k..]) or a
 * ConvTranspose (W is [C, O/g, k..]), or -1. */
static int64_t out_channels(const kn_node *n)
{
    const kn_value *w = kn_node_input(n, 1);
    if (!w || w->shape.rank < 3) return -1;
    if (n->op == KN_OP_Conv) return w->shape.dims[0];
    int64_t g = kn_attr_int(n, "group", 1);
    return w->shape.dims[1] >= 0 && g >= 1 ? w->shape.dims[1] * g : -1;
}

static int fuse_one(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, bool *out_changed)
{
    kn_value *y = n->outputs[0], *b = kn_node_input(n, 2);
    const char *what = n->op == KN_OP_Conv ? "Conv" : "ConvTranspose";
    if (!y || y->dtype != KN_F32) {
        if (y && y->n_users > 0 && y->dtype != KN_DT_UNDEFINED)
            kn_pass_remark(ctx, "%s '%s': dtype %s; only f32 is fused", what, n->name, kn_dtype_name(y->dtype));
        return KN_OK;
    }
    int64_t O = out_channels(n);
    kn_fuse_chain ch;
    kn_fuse_begin(&ch, n, what);
    int st = kn_fuse_take_bias(ctx, g, &ch, 1, O, b);
    if (st) return st;
    kn_fuse_take_posts(ctx, &ch);
    if (ch.n_nodes == 1) return KN_OK;
    kn_value *ins[2] = {kn_node_input(n, 0), kn_node_input(n, 1)};
    *out_changed = true;
    return kn_fuse_commit(ctx, g, &ch, n->op == KN_OP_Conv ? KN_OP_FusedConv : KN_OP_FusedConvTranspose, ins, 2,
                          NULL);
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
        if ((g->nodes[i]->op == KN_OP_Conv || g->nodes[i]->op == KN_OP_ConvTranspose) && g->nodes[i]->n_outputs == 1)
            heads[nh++] = g->nodes[i];
    int st = KN_OK;
    for (int i = 0; i < nh && !st; i++) st = fuse_one(ctx, g, heads[i], out_changed);
    free(heads);
    if (!st && *out_changed) st = kn_pass_finish(g);
    return st;
}
