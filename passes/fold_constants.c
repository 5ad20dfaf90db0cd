/*
 * passes/fold_constants.c — constant folding through the reference
 * evaluator.
 *
 * A node is folded when every input is a constant (Constant nodes, weights,
 * earlier folds), or when it is Shape/Size of a value whose shape is static
 * (they read the shape only, not the data). Its outputs turn into constants
 * in place — same values, same names — and the node goes away. Folding can
 * make shapes known that inference could not see (Shape → Gather → Concat →
 * Reshape), so the pass re-infers and repeats until nothing changes.
 *
 * The CPU code generator needs static shapes, so kn_compile_cpu runs this
 * pass itself (it is also first in every -O pipeline); it is the one place
 * kiln folds constants.
 */
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "match.h"

/* Larger results stay computed at run time: a folded tensor costs artifact
 * size (an Expand or ConstantOfShape can make gigabytes out of bytes). */
#define FOLD_MAX_BYTES ((size_t)16 << 20)
#define FOLD_MAX_ROUNDS 16

/* Dropout may be random (training mode); the rest of the registry is deterministic. */
static bool foldable_op(kn_op op) { return op != KN_OP_UNKNOWN && op != KN_OP_Dropout; }

static bool has_subgraph(const kn_node *n)
{
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].kind == KN_ATTR_GRAPH || n->attrs[a].kind == KN_ATTR_GRAPHS) return true;
    return false;
}

static int64_t static_numel(const kn_value *v)
{
    return kn_shape_is_static(&v->shape) ? kn_shape_numel(v->shape.rank, v->shape.dims) : -1;
}

/* Shape and Size only look at their input's shape: with a static shape they
 * fold even when the data is computed at run time. */
static bool reads_shape_only(const kn_node *n)
{
    return (n->op == KN_OP_Shape || n->op == KN_OP_Size) && n->n_inputs >= 1 && n->inputs[0] &&
           !n->inputs[0]->const_data && kn_shape_is_static(&n->inputs[0]->shape) &&
           !(n->inputs[0]->flags & KN_VALUE_VARYING_SHAPE);
}

/* A node reading or computing a value whose shape varies at run time (--max)
 * stays: what it computes is known only for this compile's instance. */
static bool touches_varying(const kn_node *n)
{
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] && (n->inputs[k]->flags & KN_VALUE_VARYING_SHAPE)) return true;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] && (n->outputs[k]->flags & KN_VALUE_VARYING_SHAPE)) return true;
    return false;
}

static bool fold_candidate(const kn_node *n)
{
    if (touches_varying(n)) return false;
    if (!foldable_op(n->op) || n->n_outputs < 1 || n->n_inputs > 16 || n->n_outputs > 16 || has_subgraph(n))
        return false;
    if (reads_shape_only(n)) return true;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] && !n->inputs[k]->const_data) return false;
    for (int k = 0; k < n->n_outputs; k++) {
        const kn_value *v = n->outputs[k];
        int64_t ne = v ? static_numel(v) : 0; /* -1: unknown until evaluated */
        if (v && ne >= 0 && kn_dtype_nbytes(v->dtype, (size_t)ne) > FOLD_MAX_BYTES) return false;
    }
    return true;
}

/* A result the evaluator computed must agree with what inference said (a
 * disagreement is a bug elsewhere; leave the node to code generation). */
static bool result_usable(const kn_value *v, const kn_tensor *t)
{
    if (!v) return true;
    if (v->dtype != t->dtype && v->dtype != KN_DT_UNDEFINED) return false;
    if (kn_shape_is_static(&v->shape) && kn_shape_numel(t->rank, t->dims) != static_numel(v)) return false;
    return t->nbytes <= FOLD_MAX_BYTES && (!t->nbytes || t->data);
}

static void free_all(kn_tensor *out, int n)
{
    for (int k = 0; k < n; k++) kn_tensor_free(&out[k]);
}

/* n's outputs all hold their data: they become plain constants (same
 * values, same names) and n leaves the graph. */
static void detach(kn_node *n)
{
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k]) n->outputs[k]->producer = NULL, n->outputs[k]->producer_index = 0;
    kn_node_remove(n);
}

static bool all_outputs_known(const kn_node *n)
{
    return !touches_varying(n) && kn_node_outputs_known(n);
}

static int materialize_subgraphs(kn_node *n, int *count);

static int materialize(kn_graph *g, int *count)
{
    int before = *count;
    for (int i = 0; i < g->n_nodes;) {
        kn_node *n = g->nodes[i];
        if (!all_outputs_known(n)) {
            int st = materialize_subgraphs(n, count);
            if (st) return st;
            i++;
            continue;
        }
        detach(n); /* the next node moved to i */
        (*count)++;
    }
    return *count != before ? kn_graph_compact_values(g) : KN_OK;
}

/* Inference runs into If/Loop/Scan bodies too, and leaves the same state there. */
static int materialize_subgraphs(kn_node *n, int *count)
{
    for (int a = 0; a < n->n_attrs; a++) {
        const kn_attr *at = &n->attrs[a];
        int st = KN_OK;
        if (at->kind == KN_ATTR_GRAPH && at->g) st = materialize(at->g, count);
        for (int k = 0; !st && at->kind == KN_ATTR_GRAPHS && k < at->n; k++) st = materialize(at->graphs[k], count);
        if (st) return st;
    }
    return KN_OK;
}

int kn_pm_materialize(kn_graph *g, int *out_n)
{
    *out_n = 0;
    return materialize(g, out_n);
}

/* Evaluates n; on success its outputs become constants and n is removed.
 * A node the evaluator cannot run is left alone (*out_folded stays false). */
static int fold_node(kn_model *m, kn_node *n, bool *out_folded)
{
    *out_folded = false;
    const kn_tensor *in[16] = {0};
    kn_tensor out[16], shape_only = {0};
    memset(out, 0, sizeof out);
    for (int k = 0; k < n->n_inputs; k++) in[k] = n->inputs[k] ? n->inputs[k]->const_data : NULL;
    if (reads_shape_only(n)) {
        /* a data-less stand-in with the right shape */
        shape_only.dtype = n->inputs[0]->dtype;
        shape_only.rank = n->inputs[0]->shape.rank;
        memcpy(shape_only.dims, n->inputs[0]->shape.dims, sizeof shape_only.dims);
        in[0] = &shape_only;
    }
    if (kn_node_eval(NULL, n, in, out)) {
        free_all(out, n->n_outputs);
        kn_error_clear();
        return KN_OK;
    }
    for (int k = 0; k < n->n_outputs; k++)
        if (!result_usable(n->outputs[k], &out[k])) {
            free_all(out, n->n_outputs);
            return KN_OK;
        }
    for (int k = 0; k < n->n_outputs; k++) {
        kn_value *v = n->outputs[k];
        if (!v) continue;
        kn_tensor *t = malloc(sizeof *t);
        if (!t) {
            free_all(out + k, n->n_outputs - k);
            return kn_error(KN_ERR_NOMEM, "out of memory");
        }
        *t = out[k];
        out[k] = (kn_tensor){0};
        if (!(t = kn_model_adopt_tensor(m, t))) { /* adopt freed t */
            free_all(out + k + 1, n->n_outputs - k - 1);
            return kn_error(KN_ERR_NOMEM, "out of memory");
        }
        v->const_data = t;
        v->dtype = t->dtype;
        kn_shape_set(&v->shape, t->rank, t->dims);
    }
    detach(n);
    *out_folded = true;
    return KN_OK;
}

static int fold_round(kn_pass_ctx *ctx, kn_graph *g, kn_pm_fold_filter keep, int *n_folded)
{
    for (int i = 0; i < g->n_nodes;) {
        kn_node *n = g->nodes[i];
        bool folded = false;
        if (fold_candidate(n) && (!keep || keep(n))) {
            int st = fold_node(ctx->model, n, &folded);
            if (st) return st;
        }
        if (folded) (*n_folded)++;
        else i++; /* a folded node left the array: the next one moved to i */
    }
    return KN_OK;
}

int kn_pm_fold(kn_pass_ctx *ctx, kn_graph *g, kn_pm_fold_filter keep, bool *out_changed)
{
    *out_changed = false;
    for (int round = 0; round < FOLD_MAX_ROUNDS; round++) {
        int n_folded = 0, st = fold_round(ctx, g, keep, &n_folded);
        if (st) return st;
        if (!n_folded) break;
        ctx->rewrites += n_folded;
        *out_changed = true;
        if ((st = kn_graph_infer(g))) {
            kn_error_prefix("type/shape inference after constant folding: ");
            return st;
        }
    }
    if (*out_changed) return kn_graph_compact_values(g);
    return KN_OK;
}

int kn_pass_fold_constants(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    return kn_pm_fold(ctx, g, NULL, out_changed);
}
