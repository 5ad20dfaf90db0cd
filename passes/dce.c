/*
 * passes/dce.c — dead-code elimination: removes every node none of whose
 * outputs is read by a node or is a graph output, then forgets the values
 * nothing refers to any more (outputs of removed nodes, unused constants).
 * ONNX ops have no side effects, so an unread result is never needed.
 */
#include "pass.h"

static bool node_is_dead(const kn_node *n)
{
    for (int k = 0; k < n->n_outputs; k++) {
        const kn_value *v = n->outputs[k];
        if (v && (v->n_users > 0 || (v->flags & KN_VALUE_GRAPH_OUTPUT))) return false;
    }
    return true;
}

int kn_pass_dce(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    /* Reverse topological order: removing a node can only make its
     * producers dead, and those come earlier, so one sweep finds all. */
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        kn_node *n = g->nodes[i];
        if (!node_is_dead(n)) continue;
        kn_node_remove(n);
        ctx->rewrites++;
        *out_changed = true;
    }
    int before = g->n_values;
    int st = kn_graph_compact_values(g);
    if (g->n_values != before) *out_changed = true;
    return st;
}
