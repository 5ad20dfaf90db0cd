/*
 * passes/cse.c — common-subexpression elimination.
 *
 * Two nodes compute the same thing when they have the same op (type and
 * domain), the same inputs and the same attributes; the later one is
 * replaced by the earlier (which, in topological order, is defined before
 * every reader of the later one). Constants take part by content: first
 * constants with equal dtype, shape and bytes are merged into one, after
 * which equal inputs are the same value.
 *
 * Not merged: ops that may be random (Dropout, Random*, Bernoulli,
 * Multinomial), nodes holding subgraphs (comparing bodies is not worth it),
 * and pairs whose outputs are both graph outputs (each keeps its name).
 */
#include <stdlib.h>
#include <string.h>

#include "kiln/abi.h"
#include "match.h"

static bool random_op(const kn_node *n)
{
    return n->op == KN_OP_Dropout || n->op == KN_OP_UNKNOWN || !strncmp(n->op_type, "Random", 6) ||
           !strcmp(n->op_type, "Bernoulli") || !strcmp(n->op_type, "Multinomial");
}

static bool tensor_equal(const kn_tensor *a, const kn_tensor *b)
{
    if (a->dtype != b->dtype || a->rank != b->rank || a->nbytes != b->nbytes) return false;
    if (memcmp(a->dims, b->dims, sizeof a->dims[0] * (size_t)a->rank)) return false;
    return a->nbytes == 0 || (a->data && b->data && !memcmp(a->data, b->data, a->nbytes));
}

/* Constants of equal content become one value (the first in value order).
 * Candidates are compared only when dtype and shape agree, and memcmp stops
 * at the first differing byte, so distinct weights cost almost nothing:
 * no hashing of hundreds of megabytes. */
static bool mergeable_const(const kn_value *v)
{
    /* graph inputs may be overridden at run time: not really constant */
    return v->const_data && !v->producer && !v->q && !(v->flags & KN_VALUE_GRAPH_INPUT);
}

static int merge_constants(kn_pass_ctx *ctx, kn_graph *g, bool *changed)
{
    for (int i = 0; i < g->n_values; i++) {
        kn_value *v = g->values[i];
        if (!mergeable_const(v) || !v->n_users || (v->flags & KN_VALUE_GRAPH_OUTPUT)) continue;
        for (int j = 0; j < i; j++) {
            kn_value *u = g->values[j];
            if (!mergeable_const(u) || !tensor_equal(u->const_data, v->const_data)) continue;
            kn_value_replace_uses(v, u);
            ctx->rewrites++;
            *changed = true;
            break;
        }
    }
    return KN_OK;
}

static bool attr_equal(const kn_attr *a, const kn_attr *b)
{
    if (a->kind != b->kind || strcmp(a->name, b->name)) return false;
    switch (a->kind) {
    case KN_ATTR_FLOAT: return !memcmp(&a->f, &b->f, sizeof a->f);
    case KN_ATTR_INT: return a->i == b->i;
    case KN_ATTR_STRING: return a->s_len == b->s_len && !memcmp(a->s, b->s, a->s_len);
    case KN_ATTR_TENSOR: return tensor_equal(a->t, b->t);
    case KN_ATTR_FLOATS: return a->n == b->n && (!a->n || !memcmp(a->floats, b->floats, sizeof(float) * (size_t)a->n));
    case KN_ATTR_INTS: return a->n == b->n && (!a->n || !memcmp(a->ints, b->ints, sizeof(int64_t) * (size_t)a->n));
    case KN_ATTR_STRINGS:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++)
            if (strcmp(a->strings[i], b->strings[i])) return false;
        return true;
    case KN_ATTR_TENSORS:
        if (a->n != b->n) return false;
        for (int i = 0; i < a->n; i++)
            if (!tensor_equal(a->tensors[i], b->tensors[i])) return false;
        return true;
    default: return false; /* graphs, undefined: never equal */
    }
}

/* Attributes compare as sets: their order in the file means nothing. */
static bool attrs_equal(const kn_node *a, const kn_node *b)
{
    if (a->n_attrs != b->n_attrs) return false;
    for (int i = 0; i < a->n_attrs; i++) {
        const kn_attr *o = kn_node_attr(b, a->attrs[i].name);
        if (!o || !attr_equal(&a->attrs[i], o)) return false;
    }
    return true;
}

static bool same_computation(const kn_node *a, const kn_node *b)
{
    if (a->op != b->op || strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain) ||
        a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs)
        return false;
    for (int i = 0; i < a->n_inputs; i++)
        if (a->inputs[i] != b->inputs[i]) return false;
    for (int k = 0; k < a->n_outputs; k++)
        if (!a->outputs[k] != !b->outputs[k]) return false; /* the same outputs are wanted */
    return attrs_equal(a, b);
}

static uint64_t node_hash(const kn_node *n)
{
    uint64_t h = kn_fnv1a(KN_FNV_INIT, n->op_type, strlen(n->op_type));
    for (int i = 0; i < n->n_inputs; i++) {
        int id = n->inputs[i] ? n->inputs[i]->id : -1;
        h = kn_fnv1a(h, &id, sizeof id);
    }
    return h | 1; /* 0 marks "not a candidate" */
}

static bool mergeable(const kn_node *n)
{
    if (random_op(n)) return false;
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].kind == KN_ATTR_GRAPH || n->attrs[a].kind == KN_ATTR_GRAPHS) return false;
    return true;
}

/* Replaces every output of `dup` by the same output of `keep`; false (and
 * nothing changed) if an output name could not be kept. */
static bool replace_node(kn_node *keep, kn_node *dup)
{
    for (int k = 0; k < dup->n_outputs; k++) {
        const kn_value *from = dup->outputs[k], *to = keep->outputs[k];
        if (from && (from->flags & KN_VALUE_GRAPH_OUTPUT) && (to->flags & KN_VALUE_GRAPH_OUTPUT)) return false;
    }
    for (int k = 0; k < dup->n_outputs; k++)
        if (dup->outputs[k]) kn_pm_replace(dup->outputs[k], keep->outputs[k]);
    kn_node_remove(dup);
    return true;
}

static int merge_nodes(kn_pass_ctx *ctx, kn_graph *g, bool *changed)
{
    int n = g->n_nodes;
    kn_node **orig = malloc(sizeof *orig * ((size_t)n + 1));
    uint64_t *h = malloc(sizeof *h * ((size_t)n + 1));
    bool *gone = calloc((size_t)n + 1, sizeof *gone);
    if (!orig || !h || !gone) {
        free(orig), free(h), free(gone);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    memcpy(orig, g->nodes, sizeof *orig * (size_t)n);
    for (int i = 0; i < n; i++) h[i] = mergeable(orig[i]) ? node_hash(orig[i]) : 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; h[i] && j < i; j++) {
            if (gone[j] || h[j] != h[i] || !same_computation(orig[j], orig[i])) continue;
            if (!replace_node(orig[j], orig[i])) {
                kn_pass_remark(ctx, "%s '%s' computes the same as '%s', but both are graph outputs", orig[i]->op_type,
                               orig[i]->name, orig[j]->name);
                break;
            }
            gone[i] = true;
            ctx->rewrites++;
            *changed = true;
            break;
        }
    }
    free(orig), free(h), free(gone);
    return KN_OK;
}

int kn_pass_cse(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int st = merge_constants(ctx, g, out_changed);
    /* a merge makes readers of the removed node read the kept one, which can
     * make those readers equal in turn: repeat until nothing merges */
    for (bool again = true; !st && again;) {
        again = false;
        st = merge_nodes(ctx, g, &again);
        *out_changed |= again;
    }
    if (!st && *out_changed) st = kn_graph_compact_values(g);
    return st;
}
