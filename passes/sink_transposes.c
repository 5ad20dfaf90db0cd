/*
 * passes/sink_transposes.c — moves a Transpose below the layout-agnostic op
 * that reads it, so that it travels down towards the next Transpose, where
 * simplify composes the two or cancels them:
 *
 *   %t = Transpose(%x) {perm=p}          %u = Relu(%x)
 *   %y = Relu(%t)                   →    %y = Transpose(%u) {perm=p}
 *
 * Layout-agnostic readers: unary elementwise ops (and Cast, and Clip with
 * scalar bounds), and binary elementwise ops whose other operand is
 *   - a scalar (any rank up to the Transpose's, all dims 1),
 *   - a constant: it is transposed by the inverse perm here, at compile
 *     time (after leading 1s up to the Transpose's rank, so a broadcast
 *     bias moves with its axis),
 *   - or a Transpose with the same perm: both sink (Add(T(a), T(b)) →
 *     T(Add(a, b))).
 * The rewrite swaps the two nodes in place: the reader now produces the
 * Transpose's old output value (reshaped by inference) and the Transpose
 * produces the reader's, which keeps its name and readers.
 *
 * Conditions (near misses are remarks): the Transpose's output has this one
 * reader and is no graph output; shapes are static and no value involved
 * has a --max shape. The pass repeats until nothing moves (a Transpose
 * sinks one op per round, at most KN_SINK_MAX_ROUNDS rounds).
 *
 * Preconditions: an inferred graph in topological order.
 */
#include <stdlib.h>
#include <string.h>

#include "elementwise_int.h"
#include "k_movement.h"
#include "match.h"
#include "pass.h"

#define KN_SINK_MAX_ROUNDS 64

/* True for a value this pass may move or reshape. */
static bool plain_value(const kn_value *v)
{
    return v && kn_shape_is_static(&v->shape) && !(v->flags & KN_VALUE_VARYING_SHAPE);
}

static bool is_scalar(const kn_value *v, int rank)
{
    return v->shape.rank <= rank && kn_shape_numel(v->shape.rank, v->shape.dims) == 1;
}

/* True if n is a unary op that works elementwise whatever the layout. */
static bool unary_agnostic(const kn_node *n)
{
    if (!(kn_op_flags(n->op) & KN_OPF_LAYOUT)) return false;
    if (n->op != KN_OP_Clip) return n->n_inputs == 1;
    for (int i = 1; i < n->n_inputs; i++)
        if (n->inputs[i] && !is_scalar(n->inputs[i], KN_MAX_RANK)) return false;
    return true;
}

/* True if n is a two-input elementwise op with numpy broadcasting (the
 * binary and variadic ops of the elementwise family; before opset 7 B could
 * broadcast from an axis, which is not layout-agnostic). */
static bool binary_agnostic(const kn_node *n)
{
    return kn_ew_bin_find(n->op) && n->n_inputs == 2 && kn_node_opset(n) >= 7;
}

/* Constant c (rank <= rank) with leading 1s up to rank, transposed by the
 * inverse of perm: the operand that makes op(x, c') transpose to op(t, c). */
static kn_value *permuted_const(kn_graph *g, const kn_value *c, int rank, const int64_t *perm)
{
    kn_tensor src = *c->const_data, out;
    src.rank = rank;
    for (int i = 0; i < rank; i++) {
        int j = i - (rank - c->const_data->rank);
        src.dims[i] = j >= 0 ? c->const_data->dims[j] : 1;
    }
    int inv[KN_MAX_RANK];
    int64_t dims[KN_MAX_RANK];
    for (int k = 0; k < rank; k++) inv[perm[k]] = k;
    for (int k = 0; k < rank; k++) dims[k] = src.dims[inv[k]];
    memset(&out, 0, sizeof out);
    if (kn_tensor_alloc(&out, src.dtype, rank, dims)) return NULL;
    if (kn_k_transpose(&src, inv, &out)) {
        kn_tensor_free(&out);
        return NULL;
    }
    kn_tensor *t = malloc(sizeof *t);
    if (!t) {
        kn_tensor_free(&out);
        return NULL;
    }
    *t = out;
    kn_value *v = kn_graph_add_constant(g, NULL, t);
    if (!v) {
        kn_tensor_free(t);
        free(t);
    }
    return v;
}

/* Swaps Transpose tr (output t, input x) and its reader r (output y): r
 * reads x and writes t, tr reads t and writes y. */
static void swap(kn_node *tr, kn_node *r, int idx)
{
    kn_value *t = tr->outputs[0], *y = r->outputs[0], *x = tr->inputs[0];
    kn_node_set_input(r, idx, x);
    r->outputs[0] = t;
    t->producer = r;
    t->producer_index = 0;
    tr->outputs[0] = y;
    y->producer = tr;
    y->producer_index = 0;
    kn_node_set_input(tr, 0, t);
}

/* Nodes rewritten in this round: their neighbours' shapes are stale until
 * the round ends (kn_pass_finish re-infers). */
typedef struct sink_round {
    kn_node **touched;
    int n_touched;
    bool remarks; /* the first round says why patterns did not match */
    bool pending; /* something skipped for a touched neighbour */
} sink_round;

static bool touched(const sink_round *rd, const kn_node *n)
{
    for (int i = 0; n && i < rd->n_touched; i++)
        if (rd->touched[i] == n) return true;
    return false;
}

/* Sinks tr below its reader when it may; *out_moved says whether it did. */
static int sink_one(kn_pass_ctx *ctx, kn_graph *g, sink_round *rd, kn_node *tr, bool *out_moved)
{
    *out_moved = false;
    kn_value *t = tr->outputs[0], *x = tr->inputs[0];
    if (!x || !plain_value(t) || !plain_value(x) || t->n_users != 1) return KN_OK;
    kn_node *r = t->users[0].node;
    kn_node *tr2 = r->n_inputs == 2 && r->inputs[1 - t->users[0].index]
                       ? kn_pm_producer(r->inputs[1 - t->users[0].index], KN_OP_Transpose)
                       : NULL;
    if (touched(rd, tr) || touched(rd, r) || touched(rd, x->producer) || touched(rd, tr2)) {
        rd->pending = true;
        return KN_OK;
    }
    if (!rd->remarks) ctx = NULL;
    int idx = t->users[0].index;
    int rank = x->shape.rank;
    int64_t perm[KN_MAX_RANK];
    if (r->n_outputs != 1 || !plain_value(r->outputs[0]) || kn_pm_perm(tr, rank, perm) != rank) return KN_OK;
    bool unary = unary_agnostic(r) && idx == 0;
    if (!unary && !binary_agnostic(r)) return KN_OK;
    if (t->flags & KN_VALUE_GRAPH_OUTPUT) {
        if (ctx)
            kn_pass_remark(ctx, "Transpose '%s' + %s '%s': the Transpose's output is a graph output", tr->name,
                           r->op_type, r->name);
        return KN_OK;
    }
    rd->touched[rd->n_touched++] = tr;
    rd->touched[rd->n_touched++] = r;
    if (unary) {
        swap(tr, r, 0);
        *out_moved = true;
        return KN_OK;
    }
    kn_value *c = r->inputs[1 - idx];
    int64_t perm2[KN_MAX_RANK];
    if (!c || !plain_value(c)) {
        rd->n_touched -= 2;
        return KN_OK;
    }
    if (is_scalar(c, rank)) {
        swap(tr, r, idx);
    } else if (c->const_data && c->shape.rank <= rank) {
        kn_value *cp = permuted_const(g, c, rank, perm);
        if (!cp) return kn_error(KN_ERR_NOMEM, "out of memory");
        kn_node_set_input(r, 1 - idx, cp);
        swap(tr, r, idx);
    } else if (tr2 && tr2 != tr && c->n_users == 1 && !(c->flags & KN_VALUE_GRAPH_OUTPUT) &&
               plain_value(tr2->inputs[0]) && tr2->inputs[0]->shape.rank == rank &&
               kn_pm_perm(tr2, rank, perm2) == rank && !memcmp(perm, perm2, sizeof(int64_t) * (size_t)rank)) {
        kn_node_set_input(r, 1 - idx, tr2->inputs[0]); /* tr2 is left unread: dce drops it */
        swap(tr, r, idx);
    } else {
        rd->n_touched -= 2;
        if (ctx)
            kn_pass_remark(ctx,
                           "Transpose '%s' + %s '%s': the other operand is no scalar, constant or Transpose with the "
                           "same perm",
                           tr->name, r->op_type, r->name);
        return KN_OK;
    }
    if (tr2) rd->touched[rd->n_touched++] = tr2;
    *out_moved = true;
    return KN_OK;
}

int kn_pass_sink_transposes(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    for (int round = 0; round < KN_SINK_MAX_ROUNDS; round++) {
        int count = g->n_nodes;
        kn_node **trs = malloc(sizeof *trs * (size_t)(count > 0 ? count : 1));
        sink_round rd = {.touched = malloc(sizeof(kn_node *) * (size_t)(3 * count + 1)), .remarks = round == 0};
        int st = trs && rd.touched ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
        int n = 0;
        for (int i = 0; !st && i < count; i++)
            if (g->nodes[i]->op == KN_OP_Transpose && g->nodes[i]->n_inputs >= 1 && g->nodes[i]->n_outputs == 1)
                trs[n++] = g->nodes[i];
        bool moved_any = false;
        for (int i = 0; i < n && !st; i++) {
            bool moved;
            st = sink_one(ctx, g, &rd, trs[i], &moved);
            if (moved) {
                moved_any = true;
                ctx->rewrites++;
            }
        }
        free(trs);
        free(rd.touched);
        if (!st && moved_any) st = kn_pass_finish(g);
        if (st) return st;
        *out_changed |= moved_any;
        if (!moved_any && !rd.pending) break;
    }
    return KN_OK;
}
