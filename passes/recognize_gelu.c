/*
 * passes/recognize_gelu.c — a decomposed GELU becomes one Gelu node.
 *
 * Exporters write GELU as elementwise ops:
 *   erf form:  0.5 * x * (1 + erf(x / sqrt(2)))      (x * 0.7071... also seen)
 *   tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
 *                                                      (x^3 as Pow(x, 3) or x*x*x)
 * The three factors 0.5, x and (1 + ...) are multiplied in any association
 * and order: (x*0.5)*s, x*(s*0.5), (x*s)*0.5, ... . The result is
 * Gelu(x) (opset 20's op, approximate="tanh" for the tanh form). Every
 * intermediate value must be read only inside the pattern; constants must
 * match to 1e-4 relative.
 */
#include <math.h>

#include "match.h"

static bool near(const kn_value *v, double want)
{
    double got;
    return kn_pm_const_uniform(v, &got) && fabs(got - want) <= 1e-4 * fabs(want);
}

/* The operand of binary node n other than `one`, or NULL. */
static kn_value *other(const kn_node *n, const kn_value *one)
{
    if (n->n_inputs != 2) return NULL;
    if (n->inputs[0] == one) return n->inputs[1];
    if (n->inputs[1] == one) return n->inputs[0];
    return NULL;
}

/* The single reader of v if it is op; else NULL. */
static kn_node *sole_user(const kn_value *v, kn_op op)
{
    if (!kn_pm_single_use(v)) return NULL;
    kn_node *u = v->users[0].node;
    return u->op == op ? u : NULL;
}

/* Mul(a, b) with a == p or b == p; the other operand in *rest. */
static kn_node *mul_with(const kn_value *p, kn_value **rest)
{
    kn_node *m = sole_user(p, KN_OP_Mul);
    *rest = m ? other(m, p) : NULL;
    return *rest ? m : NULL;
}

/* Given s = 1 + f(x), finds the value computing 0.5 * x * s. */
static kn_value *half_x_times(kn_value *s, kn_value *x)
{
    kn_value *r;
    kn_node *m1 = mul_with(s, &r);
    if (!m1) return NULL;
    if (r == x || near(r, 0.5)) { /* (x*s)*0.5 or (s*0.5)*x */
        kn_value *r2;
        kn_node *m2 = mul_with(m1->outputs[0], &r2);
        if (m2 && ((r == x && near(r2, 0.5)) || (r != x && r2 == x))) return m2->outputs[0];
        return NULL;
    }
    kn_node *h = kn_pm_producer(r, KN_OP_Mul); /* s * (x*0.5) */
    if (h && kn_pm_single_use(r) && near(other(h, x), 0.5)) return m1->outputs[0];
    return NULL;
}

/* 1 + t where t is the Erf/Tanh output. */
static kn_value *one_plus(kn_value *t)
{
    kn_node *a = sole_user(t, KN_OP_Add);
    return a && near(other(a, t), 1.0) ? a->outputs[0] : NULL;
}

/* x from Div(x, sqrt2) or Mul(x, 1/sqrt2). */
static kn_value *erf_arg(kn_value *u)
{
    if (!kn_pm_single_use(u)) return NULL;
    kn_node *d = kn_pm_producer(u, KN_OP_Div);
    if (d && near(d->inputs[1], sqrt(2.0))) return d->inputs[0];
    kn_node *m = kn_pm_producer(u, KN_OP_Mul);
    if (!m) return NULL;
    if (near(m->inputs[1], 1.0 / sqrt(2.0))) return m->inputs[0];
    if (near(m->inputs[0], 1.0 / sqrt(2.0))) return m->inputs[1];
    return NULL;
}

/* True if c computes x^3 (Pow(x, 3), x*(x*x) or (x*x)*x), reading x. */
static bool cube_of(kn_value *c, kn_value *x)
{
    if (!kn_pm_single_use(c)) return false;
    kn_node *p = kn_pm_producer(c, KN_OP_Pow);
    if (p) return p->inputs[0] == x && near(p->inputs[1], 3.0);
    kn_node *m = kn_pm_producer(c, KN_OP_Mul);
    kn_value *sq = m ? other(m, x) : NULL;
    kn_node *s = sq && kn_pm_single_use(sq) ? kn_pm_producer(sq, KN_OP_Mul) : NULL;
    return s && s->inputs[0] == x && s->inputs[1] == x;
}

/* x from sqrt(2/pi) * (x + 0.044715 * x^3), any operand order. */
static kn_value *tanh_arg(kn_value *u)
{
    if (!kn_pm_single_use(u)) return NULL;
    kn_node *m = kn_pm_producer(u, KN_OP_Mul);
    if (!m || m->n_inputs != 2) return NULL;
    const double k = sqrt(2.0 / M_PI);
    kn_value *inner = near(m->inputs[1], k) ? m->inputs[0] : near(m->inputs[0], k) ? m->inputs[1] : NULL;
    kn_node *add = inner && kn_pm_single_use(inner) ? kn_pm_producer(inner, KN_OP_Add) : NULL;
    for (int side = 0; add && side < 2; side++) {
        kn_value *x = add->inputs[side], *w = add->inputs[1 - side];
        kn_node *mw = kn_pm_single_use(w) ? kn_pm_producer(w, KN_OP_Mul) : NULL;
        if (!mw) continue;
        for (int j = 0; j < 2; j++)
            if (near(mw->inputs[1 - j], 0.044715) && cube_of(mw->inputs[j], x)) return x;
    }
    return NULL;
}

static int rewrite(kn_pass_ctx *ctx, kn_graph *g, kn_node *f, kn_value *x, kn_value *out, bool tanh_form, bool *done)
{
    if (x->dtype != out->dtype || !kn_pm_same_type(x, out)) {
        kn_pass_remark(ctx, "Gelu at %s '%s': the result's shape differs from x's (broadcast)", f->op_type, f->name);
        return KN_OK;
    }
    kn_node *gelu = kn_node_create(g, KN_OP_Gelu, out->producer->name, 1, &x, 1);
    if (!gelu || (tanh_form && !kn_pm_set_string(gelu, "approximate", "tanh")))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    gelu->outputs[0]->dtype = out->dtype;
    gelu->outputs[0]->shape = out->shape;
    *done = kn_pm_replace(out, gelu->outputs[0]);
    return KN_OK;
}

static int try_node(kn_pass_ctx *ctx, kn_graph *g, kn_node *f, bool *done)
{
    *done = false;
    bool tanh_form = f->op == KN_OP_Tanh;
    kn_value *x = tanh_form ? tanh_arg(f->inputs[0]) : erf_arg(f->inputs[0]);
    if (!x) return KN_OK;
    kn_value *s = one_plus(f->outputs[0]);
    kn_value *out = s ? half_x_times(s, x) : NULL;
    if (!out) {
        kn_pass_remark(ctx, "%s '%s' looks like the inside of a GELU, but the 0.5 * x * (1 + ...) around it does not match",
                       f->op_type, f->name);
        return KN_OK;
    }
    return rewrite(ctx, g, f, x, out, tanh_form, done);
}

int kn_pass_recognize_gelu(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int n0 = g->n_nodes;
    for (int i = 0; i < n0; i++) {
        kn_node *n = g->nodes[i];
        if ((n->op != KN_OP_Erf && n->op != KN_OP_Tanh) || n->n_inputs < 1 || !n->inputs[0]) continue;
        bool done;
        int st = try_node(ctx, g, n, &done);
        if (st) return st;
        if (!done) continue;
        ctx->rewrites++;
        *out_changed = true;
    }
    return *out_changed || g->n_nodes != n0 ? kn_pass_finish(g) : KN_OK;
}
