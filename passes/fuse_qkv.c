/*
 * passes/fuse_qkv.c — products of one input by several constant matrices
 * (a transformer layer's query, key and value projections) become one
 * product by the matrices side by side, then a Split:
 *
 *   q = FusedMatMul(x, Wq, bq)              qkv = FusedMatMul(x, [Wq Wk Wv], [bq bk bv])
 *   k = FusedMatMul(x, Wk, bk)       →      q, k, v = Split(qkv, axis = -1, [Nq, Nk, Nv])
 *   v = FusedMatMul(x, Wv, bv)
 *
 * One product of N = Nq + Nk + Nv reads x once: oneDNN's kernels run it
 * closer to their peak than three narrow ones, x is converted to bf16 once
 * under --precision bf16 (passes/autocast.c), and the dynamic form of
 * kiln::QMatMul (x f32, quantized at run time, runtime/ops/fused_q.h)
 * quantizes x once instead of once per product. The Split copies the
 * result apart (M x N floats).
 *
 * Taken: MatMul, FusedMatMul without transposes, alpha, post-ops or
 * residual (the float group becomes a FusedMatMul), and dynamic QMatMul
 * without post-ops or residual; W a constant [K, N_i] (f32, or s8 for
 * QMatMul); every product of a group of the same kind and K; no output a
 * graph output. A missing bias becomes zeros when another product
 * of the group has one; a QMatMul's per-tensor scale is repeated per column.
 * Runs after fuse-matmul (the biases are then inputs), before autocast.
 */
#include <stdlib.h>
#include <string.h>

#include "fused_int.h"
#include "fused_q.h"
#include "match.h"

enum { MAX_GROUP = 8 };

/* The kind of product n is: a float one (MatMul, FusedMatMul) merges with
 * float ones, a QMatMul with QMatMuls. */
static bool is_float_product(const kn_node *n) { return n->op == KN_OP_MatMul || n->op == KN_OP_FusedMatMul; }

/* The product's weights (constant, 2-D) or NULL when n is not a candidate. */
static const kn_value *candidate_w(const kn_node *n)
{
    bool q = n->op == KN_OP_QMatMul;
    if (!is_float_product(n) && !q) return NULL;
    const kn_value *x = kn_node_input(n, 0), *w = kn_node_input(n, 1), *y = n->n_outputs ? n->outputs[0] : NULL;
    if (!x || !w || !y || !w->const_data || w->shape.rank != 2 || x->dtype != KN_F32 || y->dtype != KN_F32 ||
        (y->flags & KN_VALUE_GRAPH_OUTPUT) || w->dtype != (q ? KN_I8 : KN_F32) || x->shape.rank < 1 ||
        x->shape.dims[x->shape.rank - 1] != w->shape.dims[0])
        return NULL;
    const kn_attr *posts = kn_node_attr(n, "post_ops");
    if (posts && posts->n > 0) return NULL;
    if (q) {
        const kn_value *s = kn_node_input(n, KN_Q_S), *b = kn_node_input(n, KN_Q_B);
        if (kn_node_input(n, KN_Q_R) || !s || !s->const_data || kn_attr_int(n, "y_dtype", 1) != 1 ||
            (b && !b->const_data))
            return NULL;
        int64_t ns = kn_tensor_numel(s->const_data);
        if (ns != 1 && ns != w->shape.dims[1]) return NULL;
        return w;
    }
    if (n->op == KN_OP_MatMul) return w;
    const kn_value *c = kn_node_input(n, 2);
    if (kn_node_input(n, KN_FUSED_RESIDUAL) || kn_attr_int(n, "transA", 0) || kn_attr_int(n, "transB", 0) ||
        kn_attr_float(n, "alpha", 1.0f) != 1.0f || (c && (!c->const_data || c->shape.rank != 1)))
        return NULL;
    return w;
}

/* A new constant [n] (or [k, n]) of dtype dt named after the head. */
static kn_value *new_const(kn_graph *g, const kn_node *head, const char *suffix, kn_dtype dt, int rank,
                           const int64_t *dims, kn_tensor **out)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", head->name, suffix);
    return kn_pm_const_new(g, name, dt, rank, dims, out);
}

/* Input i's values as floats for column c of a product with n columns
 * (NULL input: 0; one value: that one for every column). */
static float column_value(const kn_node *m, int i, int64_t c)
{
    const kn_value *v = kn_node_input(m, i);
    if (!v) return 0.0f;
    const float *f = v->const_data->data;
    return kn_tensor_numel(v->const_data) == 1 ? f[0] : f[c];
}

/* Replaces the products in grp (same x, op and K) by one and a Split. */
static int merge(kn_pass_ctx *ctx, kn_graph *g, kn_node **grp, int n)
{
    kn_node *head = grp[0];
    bool q = head->op == KN_OP_QMatMul;
    int bias_in = q ? KN_Q_B : 2; /* a MatMul has no input 2: no bias */
    int64_t K = grp[0]->inputs[1]->shape.dims[0], N = 0, cols[MAX_GROUP];
    bool any_bias = false;
    for (int i = 0; i < n; i++) {
        cols[i] = grp[i]->inputs[1]->shape.dims[1];
        N += cols[i];
        any_bias |= kn_node_input(grp[i], bias_in) != NULL;
    }
    size_t esz = q ? 1 : sizeof(float);
    kn_tensor *tw, *tb = NULL, *ts = NULL;
    int64_t wd[2] = {K, N};
    kn_value *w = new_const(g, head, "qkv_w", q ? KN_I8 : KN_F32, 2, wd, &tw);
    kn_value *b = any_bias ? new_const(g, head, "qkv_b", KN_F32, 1, &N, &tb) : NULL;
    kn_value *s = q ? new_const(g, head, "qkv_s", KN_F32, 1, &N, &ts) : NULL;
    if (!w || (any_bias && !b) || (q && !s)) return kn_error(KN_ERR_NOMEM, "out of memory");
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        const unsigned char *src = grp[i]->inputs[1]->const_data->data;
        for (int64_t k = 0; k < K; k++)
            memcpy((unsigned char *)tw->data + ((size_t)(k * N + at)) * esz, src + (size_t)(k * cols[i]) * esz,
                   (size_t)cols[i] * esz);
        for (int64_t c = 0; c < cols[i]; c++) {
            if (b) ((float *)tb->data)[at + c] = column_value(grp[i], bias_in, c);
            if (s) ((float *)ts->data)[at + c] = column_value(grp[i], KN_Q_S, c);
        }
        at += cols[i];
    }
    char name[256];
    snprintf(name, sizeof name, "%s.qkv", head->name);
    kn_value *x = head->inputs[0];
    kn_value *ins[5] = {x, w, b, NULL, s};
    kn_node *m = kn_node_create(g, q ? KN_OP_QMatMul : KN_OP_FusedMatMul, kn_pm_free_node_name(g, name), q ? 5 : 3, ins, 1);
    if (!m) return kn_error(KN_ERR_NOMEM, "out of memory");
    /* the pieces' widths: Split's input from opset 13, its attribute before */
    bool split_input = kn_model_opset(g->model, "") >= 13;
    kn_value *split = NULL;
    if (split_input) {
        int64_t n_pieces = n;
        kn_tensor *tsplit;
        if (!(split = new_const(g, head, "qkv_split", KN_I64, 1, &n_pieces, &tsplit)))
            return kn_error(KN_ERR_NOMEM, "out of memory");
        memcpy(tsplit->data, cols, sizeof(int64_t) * (size_t)n);
    }
    kn_value *sin[2] = {m->outputs[0], split};
    snprintf(name, sizeof name, "%s.qkv.split", head->name);
    kn_node *sp = kn_node_create(g, KN_OP_Split, kn_pm_free_node_name(g, name), split_input ? 2 : 1, sin, n);
    if (!sp) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_attr *ax = kn_node_add_attr(sp, "axis", KN_ATTR_INT);
    if (!ax) return kn_error(KN_ERR_NOMEM, "out of memory");
    ax->i = -1;
    if (!split_input) {
        kn_attr *sa = kn_node_add_attr(sp, "split", KN_ATTR_INTS);
        int64_t *v = sa ? kn_arena_alloc(&g->model->arena, sizeof(int64_t) * (size_t)n) : NULL;
        if (!v) return kn_error(KN_ERR_NOMEM, "out of memory");
        memcpy(v, cols, sizeof(int64_t) * (size_t)n);
        sa->ints = v, sa->n = n;
    }
    for (int i = 0; i < n; i++) {
        kn_value_replace_uses(grp[i]->outputs[0], sp->outputs[i]);
        kn_node_remove(grp[i]);
    }
    ctx->rewrites += n;
    return KN_OK;
}

int kn_pass_fuse_qkv(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    for (int i = 0; i < g->n_nodes; i++) {
        kn_node *first = g->nodes[i];
        const kn_value *w0 = candidate_w(first);
        if (!w0) continue;
        kn_node *grp[MAX_GROUP] = {first};
        int n = 1;
        const kn_value *x = first->inputs[0];
        for (int u = 0; u < x->n_users && n < MAX_GROUP; u++) {
            kn_node *o = x->users[u].node;
            const kn_value *w = o != first && x->users[u].index == 0 ? candidate_w(o) : NULL;
            bool dup = false;
            for (int j = 0; j < n; j++) dup |= grp[j] == o;
            if (w && !dup && is_float_product(o) == is_float_product(first) && o->graph == g &&
                w->shape.dims[0] == w0->shape.dims[0])
                grp[n++] = o;
        }
        if (n < 2) continue;
        int st = merge(ctx, g, grp, n);
        if (st) return st;
        *out_changed = true;
        i = -1; /* the node list changed: start over (each merge removes n - 1 nodes) */
    }
    return *out_changed ? kn_pass_finish(g) : KN_OK;
}
