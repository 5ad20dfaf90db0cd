/*
 * passes/autocast.c — mixed precision as PyTorch's autocast does it: the
 * matrix products and convolutions of an f32 graph compute in bf16 (their
 * operands rounded to bf16, the products accumulated in f32, bias, post-ops
 * and output in f32), and so do the Q.K^T products of Attention nodes
 * (PyTorch's autocast runs scaled_dot_product_attention in bf16; kiln keeps
 * the softmax, P.V and the output f32); everything else (softmax, norms,
 * reductions, exp/log, elementwise chains) stays f32.
 *
 * The pass only marks nodes (kn_node.compute = KN_BF16): the values keep
 * their f32 dtype, so inference, the reference evaluator and every other
 * pass see the f32 graph. codegen/cpu/lower_dnnl.c turns a marked node into
 * a oneDNN record with compute = KN_BF16 (kiln/abi.h): the runtime converts
 * the weights to bf16 once, when the session is created, and the
 * activations at every run. A marked Attention node's opnode record
 * carries compute = KN_BF16 (kn_abi_opnode.compute), which sends it to the
 * runtime's bf16 attention kernel (runtime/src/attention.c).
 *
 * --precision bf16 marks every candidate; --precision mixed keeps the last
 * ones f32: a product or convolution from whose output no other one can be
 * reached (the classifier of a CNN, the last projection of an encoder),
 * the layer AMP recipes leave in full precision because its output is the
 * answer; an Attention node counts as a product here, in the remark too.
 * Runs last in the pipeline (kn_pass_run_pipeline appends it), on the
 * nodes the fusions left.
 */
#include <stdlib.h>

#include "pass.h"

/* The ops autocast runs in bf16 (KN_OPF_BF16 in ops.def), when their
 * operands and output are f32. */
static bool candidate(const kn_node *n)
{
    if (!(kn_op_flags(n->op) & KN_OPF_BF16)) return false;
    if (n->op == KN_OP_Attention) { /* Q, K and V; the past KV inputs share their dtype */
        const kn_value *v = kn_node_input(n, 2);
        if (!v || v->dtype != KN_F32) return false;
    }
    const kn_value *a = kn_node_input(n, 0), *b = kn_node_input(n, 1);
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    return a && b && y && a->dtype == KN_F32 && b->dtype == KN_F32 && y->dtype == KN_F32;
}

/* feeds[v->id]: another candidate can be reached from value v. Filled in
 * reverse topological order: v feeds one when a reader is a candidate, or
 * when an output of a reader does. */
static void mark_feeding(const kn_graph *g, bool *feeds)
{
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const kn_node *n = g->nodes[i];
        for (int k = 0; k < n->n_inputs; k++) {
            const kn_value *x = n->inputs[k];
            if (!x) continue;
            bool reach = candidate(n);
            for (int o = 0; !reach && o < n->n_outputs; o++) reach = n->outputs[o] && feeds[n->outputs[o]->id];
            if (reach) feeds[x->id] = true;
        }
    }
}

int kn_pass_autocast(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    if (ctx->precision == KN_PRECISION_FP32) return KN_OK;
    bool *feeds = calloc((size_t)g->model->n_value_ids + 1, sizeof *feeds);
    if (!feeds) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (ctx->precision == KN_PRECISION_MIXED) mark_feeding(g, feeds);
    for (int i = 0; i < g->n_nodes; i++) {
        kn_node *n = g->nodes[i];
        if (!candidate(n) || n->compute == KN_BF16) continue;
        if (ctx->precision == KN_PRECISION_MIXED && !feeds[n->outputs[0]->id]) {
            kn_pass_remark(ctx, "%s '%s' stays f32: no other matrix product or convolution reads from it (mixed "
                                "keeps the last ones f32)",
                           n->op_type, n->name);
            continue;
        }
        n->compute = KN_BF16;
        ctx->rewrites++;
        *out_changed = true;
    }
    free(feeds);
    return KN_OK;
}
