/*
 * passes/fold_shapes.c — shape computations become constants.
 *
 * Exporters compute reshape targets at run time: Shape → Gather → Unsqueeze
 * → Concat → Reshape. Once the shapes involved are static these are
 * constants. This pass
 *   - replaces Shape(x) (with its start/end) by a constant when the dims it
 *     reads are static, even if other dims of x are not (a symbolic batch);
 *   - replaces Gather(Shape(x), constant indices) likewise when the gathered
 *     dims are static;
 *   - then folds the integer arithmetic downstream (nodes whose outputs are
 *     integer tensors of at most 64 elements and whose inputs are constants)
 *     with the constant folder, so the Reshape's target becomes a constant
 *     and inference makes its output static.
 * Large or float computations are left to fold-constants.
 */
#include <stdlib.h>
#include <string.h>

#include "match.h"

#define SHAPE_MAX_ELEMS 64

/* The dims range [*lo, *hi) of x that Shape node s returns (opset 15 start/end). */
static void shape_range(const kn_node *s, int rank, int *lo, int *hi)
{
    int64_t a = kn_attr_int(s, "start", 0), b = kn_attr_int(s, "end", rank);
    if (a < 0) a += rank;
    if (b < 0) b += rank;
    *lo = (int)(a < 0 ? 0 : a > rank ? rank : a);
    *hi = (int)(b < 0 ? 0 : b > rank ? rank : b);
    if (*hi < *lo) *hi = *lo;
}

static bool dims_static(const kn_shape *s, int lo, int hi)
{
    for (int d = lo; d < hi; d++)
        if (s->dims[d] < 0) return false;
    return true;
}

/* Gives v (the only output of its node) its data; kn_pm_materialize then
 * turns it into a constant in place, so a graph output keeps its name. */
static bool to_const(kn_graph *g, kn_value *v, int n, const int64_t *vals, int rank)
{
    kn_tensor *t = calloc(1, sizeof *t);
    int64_t dims[1] = {n};
    if (!t || kn_tensor_alloc(t, KN_I64, rank, dims)) {
        free(t);
        return false;
    }
    if (n) memcpy(t->data, vals, sizeof *vals * (size_t)n);
    if (!kn_model_adopt_tensor(g->model, t)) return false;
    v->const_data = t;
    return true;
}

/* Gather(Shape(x), idx) with static gathered dims. */
static bool gather_of_shape(kn_graph *g, kn_node *n)
{
    kn_node *s = kn_pm_producer(n->inputs[0], KN_OP_Shape);
    const kn_value *iv = kn_node_input(n, 1);
    if (!s || kn_attr_int(n, "axis", 0) != 0 || !iv || !iv->const_data || iv->const_data->rank > 1) return false;
    const kn_shape *xs = &s->inputs[0]->shape;
    if (xs->rank < 0 || (s->inputs[0]->flags & KN_VALUE_VARYING_SHAPE)) return false;
    int lo, hi;
    shape_range(s, xs->rank, &lo, &hi);
    int64_t idx[SHAPE_MAX_ELEMS], vals[SHAPE_MAX_ELEMS];
    int k = kn_pm_const_ints(iv, idx, SHAPE_MAX_ELEMS);
    if (k < 0 || k > SHAPE_MAX_ELEMS) return false;
    for (int i = 0; i < k; i++) {
        int64_t j = idx[i] < 0 ? idx[i] + (hi - lo) : idx[i];
        if (j < 0 || j >= hi - lo || xs->dims[lo + j] < 0) return false;
        vals[i] = xs->dims[lo + j];
    }
    return to_const(g, n->outputs[0], k, vals, iv->const_data->rank);
}

static bool static_shape(kn_graph *g, kn_node *n)
{
    const kn_shape *xs = &n->inputs[0]->shape;
    if (xs->rank < 0 || (n->inputs[0]->flags & KN_VALUE_VARYING_SHAPE)) return false;
    int lo, hi;
    shape_range(n, xs->rank, &lo, &hi);
    if (!dims_static(xs, lo, hi)) return false;
    return to_const(g, n->outputs[0], hi - lo, xs->dims + lo, 1);
}

/* Shape arithmetic: small integer results. */
static bool shape_arith(const kn_node *n)
{
    if (n->op == KN_OP_Shape || n->op == KN_OP_Size) return true;
    for (int k = 0; k < n->n_outputs; k++) {
        const kn_value *v = n->outputs[k];
        if (!v) continue;
        if (v->dtype != KN_I64 && v->dtype != KN_I32) return false;
        if (!kn_shape_is_static(&v->shape) || kn_shape_numel(v->shape.rank, v->shape.dims) > SHAPE_MAX_ELEMS)
            return false;
    }
    return true;
}

int kn_pass_fold_shapes(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    for (int i = 0; i < g->n_nodes; i++) {
        kn_node *n = g->nodes[i];
        if (n->n_inputs < 1 || !n->inputs[0] || !n->outputs[0] || n->outputs[0]->const_data) continue;
        bool done = n->op == KN_OP_Gather ? gather_of_shape(g, n) : n->op == KN_OP_Shape ? static_shape(g, n) : false;
        if (!done) continue;
        ctx->rewrites++;
        *out_changed = true;
    }
    int n_const;
    int st = *out_changed ? kn_pm_materialize(g, &n_const) : KN_OK;
    if (!st && *out_changed) st = kn_pass_finish(g);
    bool folded = false;
    if (!st) st = kn_pm_fold(ctx, g, shape_arith, &folded);
    if (folded) {
        *out_changed = true;
        if (!st) st = kn_pass_finish(g);
    }
    return st;
}
