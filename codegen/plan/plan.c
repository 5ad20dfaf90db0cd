/*
 * codegen/plan/plan.c — the static memory plan of a graph (plan.h).
 *
 * Every value gets a kn_abi_ref: constants an offset in one weights blob
 * (64-byte aligned each, one copy per distinct tensor), graph inputs and
 * outputs the index of the user's buffer, everything else an offset in one
 * arena. Arena offsets come from liveness over the topological node order: a
 * value lives from its producer to its last user, and a freed interval is
 * reused by the best-fitting later value. Reshape-like ops whose output is
 * only a view of the input share the input's location ("alias"); the input
 * then lives until the alias's last use. A fused Conv/MatMul (float or
 * 8-bit) whose residual dies there writes its output over the residual ("in
 * place": oneDNN's sum post-op then finds the residual already in dst
 * instead of having it copied there at every run). A computed value whose
 * shape is not static (it depends on input data) gets a session slot
 * instead: the runtime kernel that produces it sizes it at run time. The
 * outer values that a control-flow node's subgraphs read
 * (kn_node_captures) count as inputs of that node: they are stored and stay
 * alive until it has run.
 */
#include "plan.h"

#include "fused_int.h"
#include "fused_q.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_ALIGN 64

static int64_t align_up(int64_t n) { return (n + PLAN_ALIGN - 1) / PLAN_ALIGN * PLAN_ALIGN; }

static bool is_output_of(const kn_graph *g, const kn_value *v)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

static int input_index(const kn_graph *g, const kn_value *v)
{
    for (int i = 0, k = 0; i < g->n_inputs; i++) {
        if (g->inputs[i]->const_data) continue; /* an initializer listed as input stays a weight */
        if (g->inputs[i] == v) return k;
        k++;
    }
    return -1;
}

/* Dropout is a view only in inference mode and without a mask output. */
static bool dropout_is_identity(const kn_node *n)
{
    if (n->n_outputs > 1 && n->outputs[1]) return false;
    const kn_value *tm = kn_node_input(n, 2);
    if (!tm) return true;
    if (!tm->const_data || !tm->const_data->data || tm->const_data->nbytes < 1) return false;
    return ((const unsigned char *)tm->const_data->data)[0] == 0;
}

static bool is_view_op(const kn_node *n)
{
    switch (n->op) {
    case KN_OP_Reshape:
    case KN_OP_Flatten:
    case KN_OP_Squeeze:
    case KN_OP_Unsqueeze:
    case KN_OP_Identity: return true;
    case KN_OP_Dropout: return dropout_is_identity(n);
    default: return false;
    }
}

static int64_t value_nbytes(const kn_value *v)
{
    if (v->const_data) return (int64_t)v->const_data->nbytes;
    return kn_shape_nbytes(v->dtype, &v->shape); /* -1 also when too large to count */
}

/* ---- weights ------------------------------------------------------------- */

/* Only constants that emitted code or a subgraph reads (or that are
 * outputs) are stored. */
static bool value_needed(const kn_graph *g, const kn_value *v, const unsigned char *captured)
{
    for (int i = 0; i < v->n_users; i++)
        if (v->users[i].node->graph == g && !kn_node_outputs_known(v->users[i].node)) return true;
    return captured[v->id] || is_output_of(g, v);
}

/* captured[id] = 1 for each value of g that a subgraph of one of g's nodes reads. */
static int mark_captured(const kn_graph *g, unsigned char *captured)
{
    for (int i = 0; i < g->n_nodes; i++) {
        kn_value **vals;
        int n, st = kn_node_captures(g->nodes[i], &vals, &n);
        if (st) return st;
        for (int k = 0; k < n; k++) captured[vals[k]->id] = 1;
        free(vals);
    }
    return KN_OK;
}

/* A constant stored with the weights, for finding repeats of one tensor. */
typedef struct stored_const {
    const void *data;
    size_t nbytes;
    int index; /* in g->values */
} stored_const;

static int cmp_stored(const void *a, const void *b)
{
    const stored_const *x = a, *y = b;
    if (x->data != y->data) return (uintptr_t)x->data < (uintptr_t)y->data ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static bool stored_with_weights(const kn_graph *g, const kn_value *v, const unsigned char *captured)
{
    return v->const_data && value_needed(g, v, captured) && input_index(g, v) < 0;
}

/* Constants → offsets in the weights blob, in value order; a tensor that
 * several values share (the same data and size) is stored once, at the
 * first one's offset. Repeats are found by sorting, not by comparing every
 * constant with every earlier one (40,000 constants took seconds). */
static int plan_weights(const kn_graph *g, kn_plan *p, const unsigned char *captured)
{
    int n = 0;
    stored_const *sc = malloc(sizeof *sc * ((size_t)g->n_values + 1));
    int *first = malloc(sizeof *first * ((size_t)g->n_values + 1)); /* by value index: the index it repeats */
    if (!sc || !first) {
        free(sc);
        free(first);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        first[i] = i;
        if (stored_with_weights(g, v, captured) && v->const_data->data)
            sc[n++] = (stored_const){v->const_data->data, v->const_data->nbytes, i};
    }
    qsort(sc, (size_t)n, sizeof *sc, cmp_stored);
    for (int k = 1; k < n; k++)
        if (sc[k].data == sc[k - 1].data && sc[k].nbytes == sc[k - 1].nbytes) first[sc[k].index] = first[sc[k - 1].index];
    free(sc);
    int64_t total = 0;
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (!stored_with_weights(g, v, captured)) continue;
        int64_t off;
        if (first[i] != i) off = p->where[g->values[first[i]]->id].offset;
        else {
            size_t nb = v->const_data->nbytes;
            if ((int64_t)nb > INT64_MAX / 2 - total) {
                free(first);
                return kn_error(KN_ERR_NOMEM, "constant '%s': the weights exceed the addressable size", v->name);
            }
            off = total;
            total = align_up(total + (int64_t)nb);
        }
        p->where[v->id] = (kn_abi_ref){.loc = KN_LOC_WEIGHTS, .offset = off};
    }
    p->weights_bytes = total;
    if (total > 0 && !(p->weights = aligned_alloc(PLAN_ALIGN, (size_t)total))) {
        free(first);
        return kn_error(KN_ERR_NOMEM, "out of memory for %lld bytes of weights", (long long)total);
    }
    if (total > 0) memset(p->weights, 0, (size_t)total);
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (first[i] == i && stored_with_weights(g, v, captured) && v->const_data->data && v->const_data->nbytes)
            memcpy(p->weights + p->where[v->id].offset, v->const_data->data, v->const_data->nbytes);
    }
    free(first);
    return KN_OK;
}

/* ---- arena ---------------------------------------------------------------- */

typedef struct live_block {
    int64_t off, size;
    int root; /* value id */
} live_block;

typedef struct arena_state {
    live_block *live;
    int n_live;
    int64_t peak;
} arena_state;

static int cmp_block(const void *a, const void *b)
{
    const live_block *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Best-fit: the smallest gap between live blocks that holds size, else the
 * end; -1 when the arena would grow past KN_MAX_TENSOR_BYTES. Every block
 * is at most that big, so the sums below stay in int64_t. */
static int64_t arena_alloc(arena_state *s, int64_t size, int root)
{
    qsort(s->live, (size_t)s->n_live, sizeof *s->live, cmp_block);
    int64_t best = -1, best_gap = INT64_MAX, cur = 0;
    for (int i = 0; i < s->n_live; i++) {
        int64_t gap = s->live[i].off - cur;
        if (gap >= size && gap < best_gap) best = cur, best_gap = gap;
        if (s->live[i].off + s->live[i].size > cur) cur = s->live[i].off + s->live[i].size;
    }
    if (best < 0) best = cur;
    if (best > KN_MAX_TENSOR_BYTES - size) return -1;
    s->live[s->n_live++] = (live_block){best, size, root};
    if (best + size > s->peak) s->peak = best + size;
    return best;
}

/* The block of root now holds new_root's bytes (an in-place output). */
static void arena_hand_over(arena_state *s, int root, int new_root)
{
    for (int i = 0; i < s->n_live; i++)
        if (s->live[i].root == root) s->live[i].root = new_root;
}

static void arena_release(arena_state *s, int root)
{
    for (int i = 0; i < s->n_live; i++)
        if (s->live[i].root == root) {
            s->live[i] = s->live[--s->n_live];
            return;
        }
}

/* Which values alias which: root[id] is the value whose bytes id shares. */
static void find_aliases(const kn_graph *g, const kn_plan *p, int *root)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const kn_node *n = g->nodes[i];
        if (!is_view_op(n) || n->n_inputs < 1 || !n->inputs[0] || n->n_outputs < 1 || !n->outputs[0]) continue;
        const kn_value *x = n->inputs[0], *y = n->outputs[0];
        if (p->where[x->id].loc == KN_LOC_DYNAMIC || p->where[y->id].loc == KN_LOC_DYNAMIC) continue;
        /* a constant view is stored with the weights itself (plan_weights):
         * its input may be a folded value that nothing stores */
        if (y->const_data || is_output_of(g, y) || x->dtype != y->dtype || value_nbytes(x) != value_nbytes(y))
            continue;
        int r = root[x->id];
        const kn_value *rv = NULL;
        for (int j = 0; j < g->n_values && !rv; j++)
            if (g->values[j]->id == r) rv = g->values[j];
        if (!rv) continue;
        bool in_weights = p->where[r].loc == KN_LOC_WEIGHTS;
        bool in_arena = rv->producer && !is_output_of(g, rv);
        if (in_weights || in_arena) root[y->id] = r;
    }
}

/* last[root]: index of the last node that reads the root or any alias of it
 * (also as a capture of its subgraphs), or writes it, for values nobody reads. */
static int find_last_uses(const kn_graph *g, const int *root, int *last, int nv)
{
    for (int i = 0; i < nv; i++) last[i] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const kn_node *n = g->nodes[i];
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k]) {
                int r = root[n->outputs[k]->id];
                if (last[r] < i) last[r] = i;
            }
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] && last[root[n->inputs[k]->id]] < i) last[root[n->inputs[k]->id]] = i;
        kn_value **caps;
        int n_caps, st = kn_node_captures(n, &caps, &n_caps);
        if (st) return st;
        for (int k = 0; k < n_caps; k++)
            if (last[root[caps[k]->id]] < i) last[root[caps[k]->id]] = i;
        free(caps);
    }
    return KN_OK;
}

/* The residual whose arena bytes the output of n (node index i) may take
 * over, or NULL: n is a kiln::FusedConv or kiln::FusedMatMul, or their
 * integer forms kiln::QConv and kiln::QMatMul (their kernels, oneDNN's with
 * a sum post-op and the runtime's, add the residual into the output; the
 * integer ones read it back in the output's type, with its own scale and
 * zero point), the residual is a value of the output's shape and type in
 * the arena, not an alias, read by no later node and by no other input of
 * n (a conv must not write over its own src). */
static const kn_value *in_place_residual(const kn_node *n, int i, const kn_plan *p, const int *root, const int *last)
{
    _Static_assert(KN_FUSED_RESIDUAL == KN_Q_R, "FusedConv and QConv take their residual at the same input");
    bool fused = n->op == KN_OP_FusedConv || n->op == KN_OP_FusedMatMul;
    bool quant = n->op == KN_OP_QConv || n->op == KN_OP_QMatMul;
    if (!(fused || quant) || n->n_outputs < 1 || !n->outputs[0]) return NULL;
    const kn_value *r = kn_node_input(n, KN_FUSED_RESIDUAL), *y = n->outputs[0];
    if (!r || r->const_data || root[r->id] != r->id || p->where[r->id].loc != KN_LOC_ARENA || last[r->id] != i)
        return NULL;
    bool types_ok = fused ? r->dtype == KN_F32 && y->dtype == KN_F32
                          : r->dtype == y->dtype && (y->dtype == KN_U8 || y->dtype == KN_I8);
    if (!types_ok || r->shape.rank != y->shape.rank ||
        value_nbytes(r) != value_nbytes(y) || value_nbytes(y) < 0)
        return NULL;
    for (int d = 0; d < y->shape.rank; d++)
        if (r->shape.dims[d] != y->shape.dims[d]) return NULL;
    for (int k = 0; k < n->n_inputs; k++)
        if (k != KN_FUSED_RESIDUAL && n->inputs[k] && root[n->inputs[k]->id] == r->id) return NULL;
    return r;
}

static int plan_arena(const kn_graph *g, kn_plan *p, const int *root, int *last)
{
    int nv = p->n_where;
    int st = find_last_uses(g, root, last, nv);
    if (st) return st;
    arena_state s = {.live = calloc((size_t)nv + 1, sizeof(live_block))};
    if (!s.live) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const kn_node *n = g->nodes[i];
        for (int k = 0; k < n->n_outputs; k++) {
            const kn_value *v = n->outputs[k];
            if (!v || v->const_data || root[v->id] != v->id || p->where[v->id].loc >= 0) continue;
            int64_t nb = value_nbytes(v);
            if (nb < 0 || nb > KN_MAX_TENSOR_BYTES - PLAN_ALIGN) {
                free(s.live);
                return kn_node_error(n, KN_ERR_INVALID, "output '%s' has %s", v->name,
                                     nb < 0 ? "no static size, or one over 2^62 bytes" : "over 2^62 bytes");
            }
            int64_t size = align_up(nb);
            const kn_value *r = k == 0 ? in_place_residual(n, i, p, root, last) : NULL;
            if (r) { /* the residual's block, which it leaves at this node */
                p->where[v->id] = p->where[r->id];
                arena_hand_over(&s, r->id, v->id);
                /* for the profile's buffers: from this node on the bytes are v's */
                p->live_last[r->id] = i - 1;
            } else {
                int64_t off = arena_alloc(&s, size, v->id);
                if (off < 0) {
                    free(s.live);
                    return kn_node_error(n, KN_ERR_UNSUPPORTED, "output '%s' (%lld bytes) would take the arena past "
                                         "kiln's limit of 2^62 bytes", v->name, (long long)size);
                }
                p->where[v->id] = (kn_abi_ref){.loc = KN_LOC_ARENA, .offset = off};
            }
            /* a total without reuse, for reports: saturates rather than wraps */
            p->intermediate_bytes = size > INT64_MAX - p->intermediate_bytes ? INT64_MAX : p->intermediate_bytes + size;
            p->live_first[v->id] = i;
            p->live_last[v->id] = last[v->id];
        }
        /* release after allocating, so a node's outputs never overlap its inputs
         * (but for an in-place output and its residual) */
        for (int j = s.n_live - 1; j >= 0; j--)
            if (last[s.live[j].root] <= i) arena_release(&s, s.live[j].root);
    }
    p->arena_bytes = s.peak;
    free(s.live);
    /* aliases take their root's location */
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (root[v->id] != v->id) p->where[v->id] = p->where[root[v->id]];
    }
    return KN_OK;
}

static void plan_io(const kn_graph *g, kn_plan *p)
{
    for (int i = 0; i < g->n_inputs; i++) {
        int k = input_index(g, g->inputs[i]);
        if (k >= 0) p->where[g->inputs[i]->id] = (kn_abi_ref){.loc = KN_LOC_INPUT, .offset = k};
    }
    /* only a value a node computes can be written straight into the user's
     * buffer; inputs, constants and repeated outputs are copied by `run` */
    for (int i = 0; i < g->n_outputs; i++) {
        const kn_value *v = g->outputs[i];
        if (v->producer && p->where[v->id].loc < 0)
            p->where[v->id] = (kn_abi_ref){.loc = KN_LOC_OUTPUT, .offset = i};
    }
}

int kn_plan_build(const kn_graph *g, kn_plan *out)
{
    if (!g || !out) return kn_error(KN_ERR_INVALID, "kn_plan_build: NULL argument");
    memset(out, 0, sizeof *out);
    int nv = g->model->n_value_ids;
    out->n_where = nv;
    out->where = malloc(sizeof *out->where * ((size_t)nv + 1));
    out->live_first = malloc(sizeof(int) * ((size_t)nv + 1));
    out->live_last = malloc(sizeof(int) * ((size_t)nv + 1));
    int *root = malloc(sizeof(int) * ((size_t)nv + 1) * 2);
    if (!out->where || !out->live_first || !out->live_last || !root) {
        free(root);
        kn_plan_free(out);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nv; i++) {
        out->where[i] = (kn_abi_ref){.loc = -1};
        root[i] = i;
        out->live_first[i] = out->live_last[i] = -1;
    }
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (v->const_data || kn_shape_is_static(&v->shape)) continue;
        if (!v->producer && input_index(g, v) >= 0) {
            free(root);
            kn_plan_free(out);
            return kn_error(KN_ERR_INVALID, "graph input '%s' has a dynamic shape", v->name);
        }
        if (!v->producer) continue;
        out->where[v->id] = (kn_abi_ref){.loc = KN_LOC_DYNAMIC, .offset = out->n_slots++};
    }
    unsigned char *captured = calloc((size_t)nv + 1, 1);
    int st = captured ? mark_captured(g, captured) : kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) st = plan_weights(g, out, captured);
    free(captured);
    if (!st) {
        plan_io(g, out);
        find_aliases(g, out, root);
        st = plan_arena(g, out, root, root + nv + 1);
    }
    free(root);
    if (st) kn_plan_free(out);
    return st;
}

void kn_plan_free(kn_plan *p)
{
    if (!p) return;
    free(p->where);
    free(p->weights);
    free(p->live_first);
    free(p->live_last);
    memset(p, 0, sizeof *p);
}

bool kn_plan_is_alias(const kn_plan *p, const kn_node *n)
{
    if (!p || !n || !is_view_op(n) || n->n_inputs < 1 || n->n_outputs < 1) return false;
    const kn_value *x = n->inputs[0], *y = n->outputs[0];
    if (!x || !y || x->id >= p->n_where || y->id >= p->n_where) return false;
    const kn_abi_ref *a = &p->where[x->id], *b = &p->where[y->id];
    return (a->loc == KN_LOC_ARENA || a->loc == KN_LOC_WEIGHTS) && a->loc == b->loc && a->offset == b->offset;
}
