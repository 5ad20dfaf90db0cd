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
 *
 * Linear time: candidates are found through hash tables (constants by
 * dtype, shape and leading bytes; nodes by op and input ids), so a model of
 * N nodes costs O(N) lookups, not the O(N^2) comparisons of trying every
 * earlier node (37 s for a 100k-node chain). Nodes are visited in
 * topological order and hashed when visited, after the merges of everything
 * before them, so merges that make their readers equal in turn all happen
 * in one sweep.
 */
#include <stdint.h>
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

/* An open-addressing set of pointers keyed by a caller's hash: a lookup
 * walks the slots of one hash (and its rare collisions) only. */
typedef struct ptr_table {
    void **slots;
    uint64_t *hashes; /* 0: empty slot */
    size_t mask;
} ptr_table;

static int table_init(ptr_table *t, int n)
{
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    t->mask = cap - 1;
    t->slots = malloc(sizeof *t->slots * cap);
    t->hashes = calloc(cap, sizeof *t->hashes);
    if (!t->slots || !t->hashes) {
        free(t->slots), free(t->hashes);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    return KN_OK;
}

static void table_free(ptr_table *t)
{
    free(t->slots), free(t->hashes);
}

/* The first entry with hash h for which eq(entry, key) holds, or NULL; *at
 * is where key goes if it is not there. h must not be 0. */
static void *table_find(const ptr_table *t, uint64_t h, const void *key, bool (*eq)(const void *, const void *),
                        size_t *at)
{
    size_t i = h & t->mask;
    for (; t->hashes[i]; i = (i + 1) & t->mask)
        if (t->hashes[i] == h && eq(t->slots[i], key)) return t->slots[i];
    *at = i;
    return NULL;
}

/* Constants of equal content become one value (the first in value order).
 * They are hashed on dtype, shape and at most their first 4 KiB, so that
 * distinct weights rarely share a slot and never cost a pass over hundreds
 * of megabytes; memcmp settles the rest and stops at the first difference. */
enum { CONST_HASH_BYTES = 4096 };

static bool mergeable_const(const kn_value *v)
{
    /* graph inputs may be overridden at run time: not really constant */
    return v->const_data && !v->producer && !v->q && !(v->flags & KN_VALUE_GRAPH_INPUT);
}

static uint64_t const_hash(const kn_tensor *t)
{
    uint64_t h = kn_fnv1a(KN_FNV_INIT, &t->dtype, sizeof t->dtype);
    h = kn_fnv1a(h, &t->rank, sizeof t->rank);
    h = kn_fnv1a(h, t->dims, sizeof t->dims[0] * (size_t)t->rank);
    if (t->data) h = kn_fnv1a(h, t->data, t->nbytes < CONST_HASH_BYTES ? t->nbytes : CONST_HASH_BYTES);
    return h | 1; /* 0 marks an empty slot */
}

static bool const_eq(const void *a, const void *b)
{
    return tensor_equal(((const kn_value *)a)->const_data, ((const kn_value *)b)->const_data);
}

static int merge_constants(kn_pass_ctx *ctx, kn_graph *g, bool *changed)
{
    ptr_table seen = {0};
    int st = table_init(&seen, g->n_values);
    if (st) return st;
    for (int i = 0; i < g->n_values; i++) {
        kn_value *v = g->values[i];
        if (!mergeable_const(v)) continue;
        size_t at = 0;
        uint64_t h = const_hash(v->const_data);
        kn_value *u = table_find(&seen, h, v, const_eq, &at);
        if (!u) {
            seen.slots[at] = v, seen.hashes[at] = h;
            continue;
        }
        if (!v->n_users || (v->flags & KN_VALUE_GRAPH_OUTPUT)) continue;
        kn_value_replace_uses(v, u);
        ctx->rewrites++;
        *changed = true;
    }
    table_free(&seen);
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

/* The scalar and list parts of an attribute (what is cheap to hash; a
 * tensor counts by its size only). */
static uint64_t attr_hash(const kn_attr *a)
{
    uint64_t h = kn_fnv1a(KN_FNV_INIT, a->name, strlen(a->name));
    h = kn_fnv1a(h, &a->kind, sizeof a->kind);
    switch (a->kind) {
    case KN_ATTR_FLOAT: return kn_fnv1a(h, &a->f, sizeof a->f);
    case KN_ATTR_INT: return kn_fnv1a(h, &a->i, sizeof a->i);
    case KN_ATTR_STRING: return kn_fnv1a(h, a->s, a->s_len);
    case KN_ATTR_TENSOR: return kn_fnv1a(h, &a->t->nbytes, sizeof a->t->nbytes);
    case KN_ATTR_FLOATS: return kn_fnv1a(h, a->floats, sizeof(float) * (size_t)a->n);
    case KN_ATTR_INTS: return kn_fnv1a(h, a->ints, sizeof(int64_t) * (size_t)a->n);
    default: return kn_fnv1a(h, &a->n, sizeof a->n);
    }
}

/* Hashes what same_computation compares: the op, the inputs and the
 * attributes (summed, as attributes compare as sets), so that nodes which
 * differ only in attributes (Constant-like ops without inputs, Transposes
 * of one value) do not share one long probe chain. */
static uint64_t node_hash(const kn_node *n)
{
    uint64_t h = kn_fnv1a(KN_FNV_INIT, n->op_type, strlen(n->op_type));
    for (int i = 0; i < n->n_inputs; i++) {
        int id = n->inputs[i] ? n->inputs[i]->id : -1;
        h = kn_fnv1a(h, &id, sizeof id);
    }
    uint64_t attrs = 0;
    for (int a = 0; a < n->n_attrs; a++) attrs += attr_hash(&n->attrs[a]);
    h = kn_fnv1a(h, &attrs, sizeof attrs);
    return h | 1; /* 0 marks an empty slot */
}

static bool node_eq(const void *a, const void *b)
{
    return same_computation(a, b);
}

static bool mergeable(const kn_node *n)
{
    if (random_op(n)) return false;
    for (int a = 0; a < n->n_attrs; a++)
        if (n->attrs[a].kind == KN_ATTR_GRAPH || n->attrs[a].kind == KN_ATTR_GRAPHS) return false;
    return true;
}

/* Makes every reader of `dup`'s outputs read the same outputs of `keep`,
 * and detaches dup from its inputs (the caller drops it from the node
 * list); false (and nothing changed) if an output name could not be kept. */
static bool replace_node(kn_node *keep, kn_node *dup)
{
    for (int k = 0; k < dup->n_outputs; k++) {
        const kn_value *from = dup->outputs[k], *to = keep->outputs[k];
        if (from && (from->flags & KN_VALUE_GRAPH_OUTPUT) && (to->flags & KN_VALUE_GRAPH_OUTPUT)) return false;
    }
    for (int k = 0; k < dup->n_outputs; k++)
        if (dup->outputs[k]) kn_pm_replace(dup->outputs[k], keep->outputs[k]);
    for (int i = 0; i < dup->n_inputs; i++) kn_node_set_input(dup, i, NULL);
    return true;
}

static int merge_nodes(kn_pass_ctx *ctx, kn_graph *g, bool *changed)
{
    int n = g->n_nodes;
    ptr_table seen = {0};
    bool *gone = calloc((size_t)n + 1, sizeof *gone);
    int st = gone ? table_init(&seen, n) : kn_error(KN_ERR_NOMEM, "out of memory");
    if (st) {
        free(gone);
        return st;
    }
    for (int i = 0; i < n; i++) {
        kn_node *node = g->nodes[i];
        if (!mergeable(node)) continue;
        size_t at = 0;
        uint64_t h = node_hash(node); /* after the merges before it: its inputs are final */
        kn_node *keep = table_find(&seen, h, node, node_eq, &at);
        if (!keep) {
            seen.slots[at] = node, seen.hashes[at] = h;
            continue;
        }
        if (!replace_node(keep, node)) {
            kn_pass_remark(ctx, "%s '%s' computes the same as '%s', but both are graph outputs", node->op_type,
                           node->name, keep->name);
            continue;
        }
        gone[i] = true;
        ctx->rewrites++;
        *changed = true;
    }
    /* drop the merged nodes in one sweep (kn_node_remove, a search of the
     * node list per node, would make this quadratic again) */
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (!gone[i]) g->nodes[kept++] = g->nodes[i];
    g->n_nodes = kept;
    table_free(&seen);
    free(gone);
    return KN_OK;
}

int kn_pass_cse(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int st = merge_constants(ctx, g, out_changed);
    /* one sweep merges everything in a topologically ordered graph; a graph
     * out of order may leave merges that the next sweep finds */
    for (bool again = true; !st && again;) {
        again = false;
        st = merge_nodes(ctx, g, &again);
        *out_changed |= again;
    }
    if (!st && *out_changed) st = kn_graph_compact_values(g);
    return st;
}
