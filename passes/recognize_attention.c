/*
 * passes/recognize_attention.c — scaled dot-product attention as exporters
 * write it becomes one ONNX Attention node (opset 23), which compiled
 * artifacts run as one flash-style kernel (runtime/src/attention.c) that
 * never holds the S x T score matrix.
 *
 *   s = MatMul(q [* c1], kT [* c2]) [* c3 | / c3]     (scalars c1..c3)
 *   p = Softmax(s [+ mask], axis = last)
 *   o = MatMul(p, v)
 *
 * with q [..., Sq, D], kT [..., D, T], v [..., T, Dv] and the same leading
 * dims (no broadcast), float32; mask (any producer) broadcasts to
 * [..., Sq, T] and its last dim is T.
 *   - rank 4 ([B, H, S, D], BERT/ViT): Attention(q, k, v, mask), k being
 *     kT's Transpose(0,1,3,2) input when it has one (else a Transpose is
 *     added). When q, kT and v are Transpose(0,2,1,3)/(0,2,3,1)/(0,2,1,3)
 *     of Reshapes [B, S, H, D] of 3-D projections and o is read only by
 *     Transpose(0,2,1,3) + Reshape [B, Sq, H*Dv], the 3-D form of
 *     Attention (q_num_heads = kv_num_heads = H) takes the projections
 *     and replaces that Reshape: the head split and merge cost nothing.
 *   - rank 3 ([B*H, S, D], torch's nn.MultiheadAttention): the same on
 *     [1, B*H, S, D] views (Reshapes, aliases in artifacts).
 * scale = c1 * c2 * c3. Every intermediate must be read only inside the
 * pattern. A Softmax between two MatMuls that does not qualify is named in
 * a remark with the reason (kiln compile --report).
 */
#include <string.h>

#include "match.h"

typedef struct attn_match {
    kn_node *softmax, *qk, *pv;
    kn_value *q, *kt, *v, *mask;
    double scale;
    int rank;
    /* the 3-D form: the projections and the Reshape that merges the heads */
    kn_value *q3, *k3, *v3, *merged;
    int64_t heads;
} attn_match;

static bool same_dim(const kn_shape *a, int i, const kn_shape *b, int j)
{
    if (a->dims[i] >= 0 || b->dims[j] >= 0) return a->dims[i] == b->dims[j];
    return a->sym[i] && b->sym[j] && !strcmp(a->sym[i], b->sym[j]);
}

/* v's single-use producer when it is a Mul/Div by a scalar float constant:
 * folds the factor into *scale and returns the other operand; else v. */
static kn_value *peel_scale(kn_value *v, double *scale)
{
    for (;;) {
        kn_node *p = v->producer;
        double c;
        if (!p || !kn_pm_single_use(v) || (p->op != KN_OP_Mul && p->op != KN_OP_Div)) return v;
        kn_value *a = p->inputs[0], *b = p->inputs[1];
        if (p->op == KN_OP_Mul && kn_pm_const_scalar(a, &c) && kn_tensor_numel(a->const_data) == 1) {
            *scale *= c, v = b;
        } else if (kn_pm_const_scalar(b, &c) && kn_tensor_numel(b->const_data) == 1 && (p->op == KN_OP_Mul || c != 0)) {
            *scale *= p->op == KN_OP_Mul ? c : 1.0 / c, v = a;
        } else {
            return v;
        }
    }
}

/* The scores side of the Add before the Softmax: the operand that reaches a
 * MatMul through scalar scalings (1 or 0 for the operand index; -1 none). */
static int scores_operand(const kn_node *add)
{
    for (int i = 0; i < 2; i++) {
        double s = 1;
        kn_value *v = peel_scale(add->inputs[i], &s);
        if (kn_pm_single_use(add->inputs[i]) && kn_pm_producer(v, KN_OP_MatMul) && kn_pm_single_use(v)) return i;
    }
    return -1;
}

/* The mask broadcasts to the scores' shape and its last dim is T. */
static bool mask_fits(const kn_value *m, const kn_value *scores)
{
    const kn_shape *ms = &m->shape, *ss = &scores->shape;
    if (m->dtype != scores->dtype || ms->rank < 1 || ms->rank > ss->rank) return false;
    if (!same_dim(ms, ms->rank - 1, ss, ss->rank - 1)) return false;
    for (int i = 0; i < ms->rank - 1; i++) {
        int j = ss->rank - ms->rank + i;
        if (ms->dims[i] != 1 && !same_dim(ms, i, ss, j)) return false;
    }
    return true;
}

/* Softmax → its scores' MatMul, with the scale and mask between. */
static const char *match_scores(kn_node *sm, attn_match *am)
{
    kn_value *s = sm->inputs[0];
    am->scale = 1;
    s = peel_scale(s, &am->scale);
    kn_node *add = s->producer;
    if (add && add->op == KN_OP_Add && kn_pm_single_use(s)) {
        int i = scores_operand(add);
        if (i < 0) return "the Add before the Softmax has no scores operand read only there";
        am->mask = add->inputs[1 - i];
        if (am->scale != 1) return "the scores are scaled after the mask is added";
        s = peel_scale(add->inputs[i], &am->scale);
    }
    am->qk = kn_pm_producer(s, KN_OP_MatMul);
    if (!am->qk || !kn_pm_single_use(s)) return "the Softmax's input is not Q.K^T (scaled, masked) read only there";
    am->q = peel_scale(am->qk->inputs[0], &am->scale);
    am->kt = peel_scale(am->qk->inputs[1], &am->scale);
    if (am->mask && !mask_fits(am->mask, am->qk->outputs[0])) return "the mask does not broadcast to the scores";
    return NULL;
}

/* q [.., Sq, D], kT [.., D, T], v [.., T, Dv], the same leading dims. */
static const char *check_shapes(const attn_match *am)
{
    const kn_shape *q = &am->q->shape, *k = &am->kt->shape, *v = &am->v->shape;
    int r = q->rank;
    if ((r != 3 && r != 4) || k->rank != r || v->rank != r) return "Q, K^T and V are not all rank 3 or all rank 4";
    if (am->q->dtype != KN_F32 || am->kt->dtype != KN_F32 || am->v->dtype != KN_F32) return "not float32";
    for (int i = 0; i < r - 2; i++)
        if (!same_dim(q, i, k, i) || !same_dim(q, i, v, i) || q->dims[i] == 0)
            return "Q, K^T and V have different batch or head dims";
    if (!same_dim(q, r - 1, k, r - 2)) return "Q's head size is not K^T's";
    if (!same_dim(k, r - 1, v, r - 2)) return "K^T's length is not V's";
    return NULL;
}

/* v = Transpose(perm)(Reshape(x3, [B, S, H, D])), each read only here:
 * x3 when x3 is [B, S, H*D] (the heads of a projection); else NULL. */
static kn_value *heads_of(kn_value *v, const int64_t *want_perm)
{
    kn_node *t = kn_pm_producer(v, KN_OP_Transpose);
    int64_t perm[KN_MAX_RANK];
    if (!t || !kn_pm_single_use(v) || kn_pm_perm(t, 4, perm) != 4 || memcmp(perm, want_perm, sizeof *perm * 4))
        return NULL;
    kn_node *r = kn_pm_producer(t->inputs[0], KN_OP_Reshape);
    if (!r || !kn_pm_single_use(t->inputs[0])) return NULL;
    kn_value *x3 = r->inputs[0];
    const kn_shape *xs = &x3->shape, *rs = &r->outputs[0]->shape;
    if (xs->rank != 3 || rs->rank != 4 || !same_dim(xs, 0, rs, 0) || !same_dim(xs, 1, rs, 1)) return NULL;
    if (rs->dims[2] < 1 || rs->dims[3] < 1 || xs->dims[2] != rs->dims[2] * rs->dims[3]) return NULL;
    return x3;
}

/* The 3-D form, when every side of a rank-4 match qualifies. */
static void match_three_d(attn_match *am)
{
    static const int64_t p0213[4] = {0, 2, 1, 3}, p0231[4] = {0, 2, 3, 1};
    kn_value *q3 = heads_of(am->q, p0213), *k3 = heads_of(am->kt, p0231), *v3 = heads_of(am->v, p0213);
    kn_value *o = am->pv->outputs[0];
    kn_node *t = kn_pm_single_use(o) ? o->users[0].node : NULL;
    int64_t perm[KN_MAX_RANK];
    if (!q3 || !k3 || !v3 || !t || t->op != KN_OP_Transpose || kn_pm_perm(t, 4, perm) != 4 ||
        memcmp(perm, p0213, sizeof p0213) || !kn_pm_single_use(t->outputs[0]))
        return;
    kn_node *r = t->outputs[0]->users[0].node;
    const kn_shape *rs = &r->outputs[0]->shape, *qs = &am->q->shape, *vs = &am->v->shape;
    int64_t H = qs->dims[1];
    if (r->op != KN_OP_Reshape || r->inputs[0] != t->outputs[0] || rs->rank != 3 || H < 1 ||
        !same_dim(rs, 0, qs, 0) || !same_dim(rs, 1, qs, 2) || vs->dims[3] < 1 || rs->dims[2] != H * vs->dims[3])
        return;
    am->q3 = q3, am->k3 = k3, am->v3 = v3, am->merged = r->outputs[0], am->heads = H;
}

static const char *match_at(kn_node *sm, attn_match *am)
{
    am->softmax = sm;
    kn_value *p = sm->outputs[0];
    int r = p->shape.rank;
    int64_t axis = kn_attr_int(sm, "axis", kn_node_opset(sm) < 13 ? 1 : -1);
    if (r < 1 || (axis < 0 ? axis + r : axis) != r - 1) return "the Softmax is not over the last axis";
    if (!kn_pm_single_use(p) || p->users[0].node->op != KN_OP_MatMul || p->users[0].index != 0)
        return "the attention weights are read by more than the MatMul with V";
    am->pv = p->users[0].node;
    am->v = am->pv->inputs[1];
    const char *why = match_scores(sm, am);
    if (!why) why = check_shapes(am);
    if (why) return why;
    am->rank = r;
    if (r == 4) match_three_d(am);
    return NULL;
}

/* A Reshape of x to a static shape (aliases in artifacts). */
static kn_value *reshape(kn_graph *g, kn_value *x, int rank, const int64_t *dims, const char *name)
{
    kn_value *shape = kn_pm_const_i64(g, NULL, rank, dims);
    kn_value *in[2] = {x, shape};
    kn_node *n = shape ? kn_node_create(g, KN_OP_Reshape, name, 2, in, 1) : NULL;
    if (!n) return NULL;
    n->outputs[0]->dtype = x->dtype;
    kn_shape_set(&n->outputs[0]->shape, rank, dims);
    return n->outputs[0];
}

static kn_value *transpose(kn_graph *g, kn_value *x, int rank, const int64_t *perm, const char *name)
{
    kn_node *n = kn_node_create(g, KN_OP_Transpose, name, 1, &x, 1);
    if (!n || !kn_pm_set_ints(n, "perm", rank, perm)) return NULL;
    n->outputs[0]->dtype = x->dtype;
    n->outputs[0]->shape.rank = rank;
    for (int i = 0; i < rank; i++) {
        n->outputs[0]->shape.dims[i] = x->shape.dims[perm[i]];
        n->outputs[0]->shape.sym[i] = x->shape.sym[perm[i]];
    }
    return n->outputs[0];
}

/* K from K^T: the input of a Transpose swapping the last two axes, or one. */
static kn_value *untranspose(kn_graph *g, kn_value *kt, const char *name)
{
    int r = kt->shape.rank;
    int64_t perm[KN_MAX_RANK], swap[4] = {0, 1, 2, 3};
    swap[r - 2] = r - 1, swap[r - 1] = r - 2;
    kn_node *t = kn_pm_producer(kt, KN_OP_Transpose);
    if (t && kn_pm_single_use(kt) && kn_pm_perm(t, r, perm) == r && !memcmp(perm, swap, sizeof *perm * (size_t)r))
        return t->inputs[0];
    return transpose(g, kt, r, swap, name);
}

static int rewrite(kn_pass_ctx *ctx, kn_graph *g, attn_match *am, bool *done)
{
    char nm[512];
    const char *base = am->pv->name;
    kn_value *q, *k, *v, *out;
    if (am->q3) {
        q = am->q3, k = am->k3, v = am->v3, out = am->merged;
    } else if (am->rank == 4) {
        snprintf(nm, sizeof nm, "%s.key", base);
        q = am->q, k = untranspose(g, am->kt, nm), v = am->v, out = am->pv->outputs[0];
    } else {
        const kn_shape *qs = &am->q->shape, *ks = &am->kt->shape, *vs = &am->v->shape;
        if (!kn_shape_is_static(qs) || !kn_shape_is_static(ks) || !kn_shape_is_static(vs)) {
            kn_pass_remark(ctx, "attention at Softmax '%s': rank-3 heads need static shapes", am->softmax->name);
            return KN_OK;
        }
        snprintf(nm, sizeof nm, "%s.key", base);
        kn_value *k3 = untranspose(g, am->kt, nm);
        snprintf(nm, sizeof nm, "%s.q4", base);
        q = reshape(g, am->q, 4, (int64_t[]){1, qs->dims[0], qs->dims[1], qs->dims[2]}, nm);
        snprintf(nm, sizeof nm, "%s.k4", base);
        k = k3 ? reshape(g, k3, 4, (int64_t[]){1, ks->dims[0], ks->dims[2], ks->dims[1]}, nm) : NULL;
        snprintf(nm, sizeof nm, "%s.v4", base);
        v = reshape(g, am->v, 4, (int64_t[]){1, vs->dims[0], vs->dims[1], vs->dims[2]}, nm);
        out = am->pv->outputs[0];
    }
    if (!q || !k || !v) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_value *in[4] = {q, k, v, am->mask};
    kn_node *a = kn_node_create(g, KN_OP_Attention, out->producer->name, am->mask ? 4 : 3, in, 1);
    if (!a || !kn_pm_set_float(a, "scale", (float)am->scale)) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (am->q3 && (!kn_pm_set_int(a, "q_num_heads", am->heads) || !kn_pm_set_int(a, "kv_num_heads", am->heads)))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_value *y = a->outputs[0];
    y->dtype = out->dtype;
    if (am->rank == 3) {
        const kn_shape *os = &out->shape;
        kn_shape_set(&y->shape, 4, (int64_t[]){1, os->dims[0], os->dims[1], os->dims[2]});
        snprintf(nm, sizeof nm, "%s.heads", base);
        if (!(y = reshape(g, y, 3, os->dims, nm))) return kn_error(KN_ERR_NOMEM, "out of memory");
    } else {
        y->shape = out->shape;
    }
    *done = kn_pm_replace(out, y);
    return KN_OK;
}

/* A Softmax between two MatMuls: what a near-miss remark is worth for. */
static bool looks_like_attention(const kn_node *sm)
{
    const kn_value *p = sm->outputs[0];
    bool to_mm = false;
    for (int i = 0; i < p->n_users; i++) to_mm |= p->users[i].node->op == KN_OP_MatMul;
    return to_mm;
}

int kn_pass_recognize_attention(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int n0 = g->n_nodes;
    for (int i = 0; i < n0; i++) {
        kn_node *n = g->nodes[i];
        if (n->op != KN_OP_Softmax || !kn_node_input(n, 0) || !looks_like_attention(n)) continue;
        attn_match am = {0};
        const char *why = match_at(n, &am);
        if (why) {
            kn_pass_remark(ctx, "attention at Softmax '%s': %s", n->name, why);
            continue;
        }
        bool done = false;
        int st = rewrite(ctx, g, &am, &done);
        if (st) return st;
        if (!done) continue;
        ctx->rewrites++;
        *out_changed = true;
    }
    return *out_changed || g->n_nodes != n0 ? kn_pass_finish(g) : KN_OK;
}
