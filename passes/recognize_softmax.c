/*
 * passes/recognize_softmax.c — a decomposed softmax becomes one Softmax.
 *
 *   m = ReduceMax(x, [a], keepdims=1)    e = Exp(Sub(x, m))
 *   s = ReduceSum(e, [a], keepdims=1)    y = Div(e, s)
 *
 * → Softmax(x, axis=a). Before opset 13 Softmax flattens x to 2-D at the
 * axis, which equals the one-axis softmax only when a is the last axis; the
 * rewrite then requires that. m, the Sub's output and s must be read only
 * inside the pattern; e only by the ReduceSum and the Div.
 */
#include <string.h>

#include "match.h"

/* The single axis of a Reduce* node (attribute or input 1), normalized; -1 if not exactly one. */
static int one_axis(const kn_node *r, int rank)
{
    int64_t axes[KN_MAX_RANK];
    const int64_t *a;
    int n = kn_attr_ints(r, "axes", &a);
    if (n > 0) memcpy(axes, a, sizeof *a * (size_t)n);
    else if (kn_node_input(r, 1)) n = kn_pm_const_ints(r->inputs[1], axes, KN_MAX_RANK);
    if (n != 1 || kn_attr_int(r, "keepdims", 1) != 1) return -1;
    int64_t ax = axes[0] < 0 ? axes[0] + rank : axes[0];
    return ax >= 0 && ax < rank ? (int)ax : -1;
}

/* e's two readers: the ReduceSum and the Div (as dividend). */
static bool sum_and_div(const kn_value *e, kn_node **sum, kn_node **div)
{
    *sum = *div = NULL;
    if (e->n_users != 2 || (e->flags & KN_VALUE_GRAPH_OUTPUT)) return false;
    for (int i = 0; i < 2; i++) {
        kn_node *u = e->users[i].node;
        if (u->op == KN_OP_ReduceSum && e->users[i].index == 0) *sum = u;
        else if (u->op == KN_OP_Div && e->users[i].index == 0) *div = u;
    }
    return *sum && *div && (*div)->inputs[1] == (*sum)->outputs[0] && kn_pm_single_use((*sum)->outputs[0]);
}

static const char *match(kn_node *exp_n, kn_value **x, int *axis, kn_value **out)
{
    kn_value *t = exp_n->inputs[0];
    kn_node *sub = kn_pm_producer(t, KN_OP_Sub);
    kn_node *mx = sub ? kn_pm_producer(sub->inputs[1], KN_OP_ReduceMax) : NULL;
    if (!mx || mx->inputs[0] != sub->inputs[0]) return "";
    *x = sub->inputs[0];
    int rank = (*x)->shape.rank;
    if (!kn_pm_single_use(t) || !kn_pm_single_use(sub->inputs[1])) return "x - max(x) is read elsewhere";
    if (rank < 1 || (*axis = one_axis(mx, rank)) < 0) return "the max is not over one axis with keepdims";
    kn_node *sum, *div;
    if (!sum_and_div(exp_n->outputs[0], &sum, &div)) return "exp(...) is not divided by its own sum";
    if (one_axis(sum, rank) != *axis) return "the sum is over another axis than the max";
    if (kn_node_opset(exp_n) < 13 && *axis != rank - 1)
        return "before opset 13 Softmax flattens at the axis: only the last axis matches";
    *out = div->outputs[0];
    return kn_pm_same_type(*x, *out) ? NULL : "the result's shape differs from x's";
}

int kn_pass_recognize_softmax(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int n0 = g->n_nodes;
    for (int i = 0; i < n0; i++) {
        kn_node *n = g->nodes[i];
        if (n->op != KN_OP_Exp || n->n_inputs < 1 || !n->inputs[0]) continue;
        kn_value *x = NULL, *out = NULL;
        int axis = 0;
        const char *why = match(n, &x, &axis, &out);
        if (why) {
            if (*why) kn_pass_remark(ctx, "Softmax at Exp '%s': %s", n->name, why);
            continue;
        }
        kn_node *sm = kn_node_create(g, KN_OP_Softmax, out->producer->name, 1, &x, 1);
        if (!sm || !kn_pm_set_int(sm, "axis", axis)) return kn_error(KN_ERR_NOMEM, "out of memory");
        sm->outputs[0]->dtype = out->dtype;
        sm->outputs[0]->shape = out->shape;
        if (!kn_pm_replace(out, sm->outputs[0])) continue;
        ctx->rewrites++;
        *out_changed = true;
    }
    return *out_changed || g->n_nodes != n0 ? kn_pass_finish(g) : KN_OK;
}
