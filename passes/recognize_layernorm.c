/*
 * passes/recognize_layernorm.c — a decomposed layer normalization becomes
 * one LayerNormalization node (opset 17).
 *
 *   m = ReduceMean(x, axes)        d = Sub(x, m)
 *   v = ReduceMean(Pow(d, 2) | Mul(d, d), axes)
 *   n = Div(d, Sqrt(Add(v, eps)))
 *   [y = Mul(n, gamma)] [z = Add(y, beta)]        (either operand order)
 *
 * → LayerNormalization(x, gamma', beta', axis = first of axes, epsilon = eps)
 * when axes are the trailing axes of x (keepdims=1), eps, gamma and beta
 * are float constants and gamma/beta broadcast over the normalized axes
 * only (they are expanded to x.shape[axis:]; ones/zeros when absent). Every
 * intermediate must be read only inside the pattern.
 */
#include <stdlib.h>
#include <string.h>

#include "match.h"

/* The axes of a Reduce* node (attribute, or input 1 from opset 18). */
static int reduce_axes(const kn_node *r, int rank, int64_t *axes)
{
    const int64_t *a;
    int n = kn_attr_ints(r, "axes", &a);
    if (n > 0) memcpy(axes, a, sizeof *a * (size_t)n);
    else if (kn_node_input(r, 1)) n = kn_pm_const_ints(r->inputs[1], axes, KN_MAX_RANK);
    else return -1; /* all axes (or noop_with_empty_axes): not a layer norm */
    if (n <= 0 || kn_attr_int(r, "keepdims", 1) != 1) return -1;
    for (int i = 0; i < n; i++) axes[i] = axes[i] < 0 ? axes[i] + rank : axes[i];
    return n;
}

/* The first axis if axes are exactly {rank-n, ..., rank-1}; else -1. */
static int trailing_axis(const int64_t *axes, int n, int rank)
{
    bool seen[KN_MAX_RANK] = {0};
    for (int i = 0; i < n; i++) {
        if (axes[i] < rank - n || axes[i] >= rank || seen[axes[i]]) return -1;
        seen[axes[i]] = true;
    }
    return rank - n;
}

typedef struct ln_match {
    kn_value *x;
    int axis;
    double eps;
    kn_value *normed;         /* Div output */
    kn_value *gamma, *beta;   /* constants or NULL */
    kn_value *out;            /* the value the LayerNormalization replaces */
} ln_match;

static kn_node *sole_user(const kn_value *v, kn_op op)
{
    if (!kn_pm_single_use(v)) return NULL;
    kn_node *u = v->users[0].node;
    return u->op == op ? u : NULL;
}

/* d's readers: the square (Pow(d,2) or Mul(d,d)) and the Div. */
static bool square_and_div(kn_value *d, kn_node **sq, kn_node **div)
{
    *sq = *div = NULL;
    if (d->flags & KN_VALUE_GRAPH_OUTPUT) return false;
    for (int i = 0; i < d->n_users; i++) {
        kn_node *u = d->users[i].node;
        if (u->op == KN_OP_Div && d->users[i].index == 0 && !*div) *div = u;
        else if (u->op == KN_OP_Pow && d->users[i].index == 0 && kn_pm_const_splat(u->inputs[1], 2.0)) *sq = u;
        else if (u->op == KN_OP_Mul && u->inputs[0] == d && u->inputs[1] == d) *sq = u;
        else return false;
    }
    int want = *sq && (*sq)->op == KN_OP_Mul ? 3 : 2;
    return *sq && *div && d->n_users == want;
}

/* From the Sub node, the core of the pattern; the reason of a failure in *why. */
static bool match_core(kn_node *sub, ln_match *lm, const char **why)
{
    kn_node *mean = kn_pm_producer(sub->inputs[1], KN_OP_ReduceMean);
    if (!mean || mean->inputs[0] != sub->inputs[0] || !kn_pm_single_use(sub->inputs[1])) return false;
    lm->x = sub->inputs[0];
    int rank = lm->x->shape.rank;
    int64_t a1[KN_MAX_RANK], a2[KN_MAX_RANK];
    int n1 = rank > 0 ? reduce_axes(mean, rank, a1) : -1;
    kn_node *sq, *div;
    if (n1 < 1 || (lm->axis = trailing_axis(a1, n1, rank)) < 0) return *why = "the mean is not over the trailing axes", false;
    if (!square_and_div(sub->outputs[0], &sq, &div)) return *why = "x - mean is not squared and divided", false;
    kn_node *var = sole_user(sq->outputs[0], KN_OP_ReduceMean);
    int n2 = var ? reduce_axes(var, rank, a2) : -1;
    if (n2 != n1 || trailing_axis(a2, n2, rank) != lm->axis) return *why = "the variance is not over the same axes", false;
    kn_node *add = sole_user(var->outputs[0], KN_OP_Add);
    kn_value *eps = add ? (add->inputs[0] == var->outputs[0] ? add->inputs[1] : add->inputs[0]) : NULL;
    if (!eps || !kn_pm_const_uniform(eps, &lm->eps)) return *why = "no constant epsilon is added to the variance", false;
    kn_node *sqrt_n = sole_user(add->outputs[0], KN_OP_Sqrt);
    if (!sqrt_n || div->inputs[1] != sqrt_n->outputs[0] || !kn_pm_single_use(sqrt_n->outputs[0]))
        return *why = "the divisor is not sqrt(variance + epsilon)", false;
    lm->normed = lm->out = div->outputs[0];
    return true;
}

/* Optional Mul(gamma) then Add(beta) after the Div. */
static void match_affine(ln_match *lm)
{
    kn_node *mul = sole_user(lm->out, KN_OP_Mul);
    if (mul) {
        kn_value *gm = mul->inputs[0] == lm->out ? mul->inputs[1] : mul->inputs[0];
        if (gm && gm->const_data && gm->dtype == lm->x->dtype) lm->gamma = gm, lm->out = mul->outputs[0];
    }
    kn_node *add = sole_user(lm->out, KN_OP_Add);
    if (add) {
        kn_value *bt = add->inputs[0] == lm->out ? add->inputs[1] : add->inputs[0];
        if (bt && bt->const_data && bt->dtype == lm->x->dtype) lm->beta = bt, lm->out = add->outputs[0];
    }
}

/* p expanded to x.shape[axis:] (fill when p is NULL); NULL if p broadcasts
 * into the leading (not normalized) axes. */
static kn_value *expand_param(kn_graph *g, const ln_match *lm, const kn_value *p, double fill, bool *bad)
{
    const kn_shape *xs = &lm->x->shape;
    int nr = xs->rank - lm->axis;
    const kn_tensor *t = p ? p->const_data : NULL;
    if (t && t->rank > nr) {
        for (int d = 0; d < t->rank - nr; d++)
            if (t->dims[d] != 1) return *bad = true, NULL;
    }
    int64_t n = kn_shape_numel(nr, xs->dims + lm->axis);
    double *d = malloc(sizeof *d * (size_t)(n > 0 ? n : 1));
    if (!d) return kn_error(KN_ERR_NOMEM, "out of memory"), NULL;
    for (int64_t i = 0; i < n; i++) {
        /* index into t, right-aligned, broadcasting dims of 1 */
        int64_t rem = i, off = 0, stride = 1;
        for (int k = nr - 1; t && k >= 0; k--) {
            int64_t dim = xs->dims[lm->axis + k], idx = rem % dim;
            rem /= dim;
            int tk = t->rank - (nr - k);
            if (tk < 0) continue;
            if (t->dims[tk] != 1 && t->dims[tk] != dim) {
                free(d);
                return *bad = true, NULL;
            }
            if (t->dims[tk] != 1) off += idx * stride;
            stride *= t->dims[tk];
        }
        d[i] = t ? kn_pm_get_f(t, off) : fill;
    }
    kn_value *v = kn_pm_const_f(g, NULL, lm->x->dtype, nr, xs->dims + lm->axis, d);
    free(d);
    return v;
}

static int rewrite(kn_pass_ctx *ctx, kn_graph *g, kn_node *sub, ln_match *lm, bool *done)
{
    if (!kn_shape_is_static(&lm->x->shape) || (lm->x->dtype != KN_F32 && lm->x->dtype != KN_F64) ||
        !kn_pm_same_type(lm->x, lm->out)) {
        kn_pass_remark(ctx, "LayerNormalization at Sub '%s': x needs a static shape, a float type and the result's shape",
                       sub->name);
        return KN_OK;
    }
    bool bad = false;
    kn_value *gamma = expand_param(g, lm, lm->gamma, 1.0, &bad);
    kn_value *beta = !bad && gamma ? expand_param(g, lm, lm->beta, 0.0, &bad) : NULL;
    if (bad) {
        kn_pass_remark(ctx, "LayerNormalization at Sub '%s': scale or bias varies along the non-normalized axes", sub->name);
        return KN_OK;
    }
    kn_value *in[3] = {lm->x, gamma, beta};
    kn_node *ln = beta ? kn_node_create(g, KN_OP_LayerNormalization, lm->out->producer->name, 3, in, 1) : NULL;
    if (!ln || !kn_pm_set_int(ln, "axis", lm->axis) || !kn_pm_set_float(ln, "epsilon", (float)lm->eps))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    ln->outputs[0]->dtype = lm->out->dtype;
    ln->outputs[0]->shape = lm->out->shape;
    *done = kn_pm_replace(lm->out, ln->outputs[0]);
    return KN_OK;
}

int kn_pass_recognize_layernorm(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int n0 = g->n_nodes;
    for (int i = 0; i < n0; i++) {
        kn_node *n = g->nodes[i];
        if (n->op != KN_OP_Sub || n->n_inputs != 2 || !n->inputs[0] || !n->inputs[1]) continue;
        ln_match lm = {0};
        const char *why = NULL;
        if (!match_core(n, &lm, &why)) {
            if (why) kn_pass_remark(ctx, "LayerNormalization at Sub '%s': %s", n->name, why);
            continue;
        }
        match_affine(&lm);
        bool done = false;
        int st = rewrite(ctx, g, n, &lm, &done);
        if (st) return st;
        if (!done) continue;
        ctx->rewrites++;
        *out_changed = true;
    }
    return *out_changed || g->n_nodes != n0 ? kn_pass_finish(g) : KN_OK;
}
