/*
 * passes/simplify.c — algebraic simplification.
 *
 *   x*1, 1*x, x+0, 0+x, x-0, x/1      → x
 *   Transpose(Transpose(x, p), q)      → Transpose(x, p∘q), or x if that is the identity
 *   Reshape(Reshape(x, a), b)          → Reshape(x, b)
 *   Cast(x, to=type of x)              → x
 *   Cast(Cast(x, B), A) with x of A and A → B exact (f32 → f64, f16 → f32, i32 → i64, ...) → x
 *   Identity(x)                        → x
 *   chains of Reshape/Squeeze/Unsqueeze/Flatten whose result has x's shape → x
 *
 * x+0 → x keeps a -0.0 where IEEE addition would give +0.0: the one bit
 * of difference these rewrites allow (ONNX Runtime's do the same).
 *
 * An operand is dropped only when the result's dtype and shape are exactly
 * x's (a broadcast x + 0 with a bigger 0 changes the shape and stays). A
 * rewrite that would rename a graph output is skipped with a remark.
 */
#include <math.h>
#include <string.h>

#include "match.h"

/* Replaces node n's output 0 by v; on failure records why. */
static bool forward(kn_pass_ctx *ctx, kn_node *n, kn_value *v, const char *what)
{
    kn_value *out = n->outputs[0];
    if (!kn_pm_same_type(out, v)) {
        kn_pass_remark(ctx, "%s '%s' (%s): the result's type or shape differs from its operand's", n->op_type,
                       n->name, what);
        return false;
    }
    if (!kn_pm_replace(out, v)) {
        kn_pass_remark(ctx, "%s '%s' (%s): its output is a graph output and '%s' cannot take its name", n->op_type,
                       n->name, what, v->name);
        return false;
    }
    return true;
}

/* x op c where c is a neutral constant. */
static bool neutral_operand(kn_pass_ctx *ctx, kn_node *n)
{
    kn_value *a = n->inputs[0], *b = n->inputs[1];
    if (!a || !b) return false;
    switch (n->op) {
    case KN_OP_Mul:
        if (kn_pm_const_splat(b, 1.0)) return forward(ctx, n, a, "x*1");
        if (kn_pm_const_splat(a, 1.0)) return forward(ctx, n, b, "1*x");
        return false;
    case KN_OP_Add:
        if (kn_pm_const_splat(b, 0.0)) return forward(ctx, n, a, "x+0");
        if (kn_pm_const_splat(a, 0.0)) return forward(ctx, n, b, "0+x");
        return false;
    case KN_OP_Sub:
        return kn_pm_const_splat(b, 0.0) && forward(ctx, n, a, "x-0");
    case KN_OP_Div:
        return kn_pm_const_splat(b, 1.0) && forward(ctx, n, a, "x/1");
    default: return false;
    }
}

/* Transpose(Transpose(x, p), q): output axis j is x's axis p[q[j]]. */
static int double_transpose(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, bool *done)
{
    kn_node *inner = kn_pm_producer(n->inputs[0], KN_OP_Transpose);
    kn_value *x = inner ? inner->inputs[0] : NULL;
    int rank = x ? x->shape.rank : -1;
    int64_t p[KN_MAX_RANK], q[KN_MAX_RANK], c[KN_MAX_RANK];
    if (rank < 1 || kn_pm_perm(inner, rank, p) != rank || kn_pm_perm(n, rank, q) != rank) return KN_OK;
    bool identity = true;
    for (int j = 0; j < rank; j++) {
        if (q[j] < 0 || q[j] >= rank) return KN_OK;
        c[j] = p[q[j]];
        identity &= c[j] == j;
    }
    if (identity) {
        *done = forward(ctx, n, x, "transposes cancel");
        return KN_OK;
    }
    kn_node *t = kn_node_create(g, KN_OP_Transpose, n->name, 1, &x, 1);
    if (!t || !kn_pm_set_ints(t, "perm", rank, c)) return kn_error(KN_ERR_NOMEM, "out of memory");
    t->outputs[0]->dtype = n->outputs[0]->dtype;
    t->outputs[0]->shape = n->outputs[0]->shape;
    *done = kn_pm_replace(n->outputs[0], t->outputs[0]);
    return KN_OK;
}

static bool reshape_like(const kn_node *n)
{
    return n && (n->op == KN_OP_Reshape || n->op == KN_OP_Squeeze || n->op == KN_OP_Unsqueeze ||
                 n->op == KN_OP_Flatten);
}

/* Reshape-like ops never move data, so a chain of them whose result has its
 * start's shape is its start; and Reshape(Reshape(x)) needs only the outer
 * one. */
static int reshape_chain(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, bool *done)
{
    kn_value *x = n->inputs[0];
    while (x && reshape_like(x->producer) && x->producer_index == 0) x = x->producer->inputs[0];
    if (!x) return KN_OK;
    if (kn_pm_same_type(x, n->outputs[0]) && kn_shape_is_static(&x->shape)) {
        *done = forward(ctx, n, x, "reshapes cancel");
        return KN_OK;
    }
    if (n->op != KN_OP_Reshape || x == n->inputs[0] || !kn_shape_is_static(&n->outputs[0]->shape)) return KN_OK;
    /* the outer shape may hold 0 ("copy this dim of the input"), which would
     * read x's dims instead: give the result's dims explicitly */
    const kn_shape *s = &n->outputs[0]->shape;
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] == 0) return KN_OK;
    kn_value *shape = kn_pm_const_i64(g, NULL, s->rank, s->dims);
    kn_value *in[2] = {x, shape};
    kn_node *r = shape ? kn_node_create(g, KN_OP_Reshape, n->name, 2, in, 1) : NULL;
    if (!r) return kn_error(KN_ERR_NOMEM, "out of memory");
    r->outputs[0]->dtype = n->outputs[0]->dtype;
    r->outputs[0]->shape = *s;
    *done = kn_pm_replace(n->outputs[0], r->outputs[0]);
    return KN_OK;
}

/* Every value of `from` is exactly representable in `to`. */
static bool exact_widening(kn_dtype from, kn_dtype to)
{
    switch (from) {
    case KN_F32: return to == KN_F64;
    case KN_F16: case KN_BF16: return to == KN_F32 || to == KN_F64;
    case KN_I8: return to == KN_I16 || to == KN_I32 || to == KN_I64 || to == KN_F32 || to == KN_F64;
    case KN_U8: return to == KN_I16 || to == KN_U16 || to == KN_I32 || to == KN_U32 || to == KN_I64 || to == KN_U64 || to == KN_F32 || to == KN_F64;
    case KN_I16: return to == KN_I32 || to == KN_I64 || to == KN_F32 || to == KN_F64;
    case KN_U16: return to == KN_I32 || to == KN_U32 || to == KN_I64 || to == KN_U64 || to == KN_F32 || to == KN_F64;
    case KN_I32: return to == KN_I64 || to == KN_F64;
    case KN_U32: return to == KN_I64 || to == KN_U64 || to == KN_F64;
    default: return false;
    }
}

static bool cast(kn_pass_ctx *ctx, kn_node *n)
{
    kn_value *x = n->inputs[0];
    if (!x || kn_attr_int(n, "saturate", 1) != 1) return false;
    if (x->dtype == n->outputs[0]->dtype) return forward(ctx, n, x, "cast to its own type");
    kn_node *inner = kn_pm_producer(x, KN_OP_Cast);
    kn_value *src = inner ? inner->inputs[0] : NULL;
    if (!src || src->dtype != n->outputs[0]->dtype) return false;
    if (!exact_widening(src->dtype, x->dtype)) {
        kn_pass_remark(ctx, "Cast '%s' after Cast '%s': %s -> %s -> %s loses precision, kept", n->name, inner->name,
                       kn_dtype_name(src->dtype), kn_dtype_name(x->dtype), kn_dtype_name(src->dtype));
        return false;
    }
    return forward(ctx, n, src, "cast round trip");
}

static int simplify_node(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, bool *done)
{
    *done = false;
    if (n->n_outputs < 1 || !n->outputs[0] || n->n_inputs < 1) return KN_OK;
    switch (n->op) {
    case KN_OP_Mul: case KN_OP_Add: case KN_OP_Sub: case KN_OP_Div:
        *done = n->n_inputs == 2 && neutral_operand(ctx, n);
        return KN_OK;
    case KN_OP_Identity: *done = n->inputs[0] && forward(ctx, n, n->inputs[0], "identity"); return KN_OK;
    case KN_OP_Cast: *done = cast(ctx, n); return KN_OK;
    case KN_OP_Transpose: return double_transpose(ctx, g, n, done);
    case KN_OP_Reshape: case KN_OP_Squeeze: case KN_OP_Unsqueeze: case KN_OP_Flatten:
        return reshape_chain(ctx, g, n, done);
    default: return KN_OK;
    }
}

int kn_pass_simplify(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    /* new nodes are appended; they are already simplified */
    int n0 = g->n_nodes;
    for (int i = 0; i < n0; i++) {
        bool done;
        int st = simplify_node(ctx, g, g->nodes[i], &done);
        if (st) return st;
        if (!done) continue;
        ctx->rewrites++;
        *out_changed = true;
    }
    return *out_changed || g->n_nodes != n0 ? kn_pass_finish(g) : KN_OK;
}
