/*
 * passes/normalize_qop.c — the first phase of lower-qdq (passes/lower_qdq.c
 * calls kn_normalize_qop before it groups anything): onnxruntime's
 * QOperator form, where each quantized op is one node with its scales and
 * zero points as inputs, becomes kiln's one quantized form, QDQ, with the
 * same parameters, so that the grouping that follows lowers both the same
 * way (QConv/QMatMul as oneDNN int8 primitives, 8-bit data movement).
 *
 *   %y = QLinearConv(%x, xs, xz, %w, ws, wz, ys, yz, %b)
 *     →  %y = QuantizeLinear(Conv(DequantizeLinear(%x, xs, xz),
 *                                 DequantizeLinear(%w, ws, wz, axis=0),
 *                                 DequantizeLinear(%b, xs*ws, axis=0)), ys, yz)
 *
 * likewise QLinearMatMul → MatMul, com.microsoft QGemm → Gemm (C is int32
 * with scale alpha*a_scale*b_scale; without y_scale the result stays
 * float), QLinearAdd / QLinearMul → Add / Mul (a QLinearAdd after a
 * QLinearConv becomes that conv group's residual Add), QLinearConcat →
 * Concat, QLinearSigmoid → Sigmoid, QLinearLeakyRelu → LeakyRelu; and the
 * dynamic contrib ops into the canonical dynamic form:
 *
 *   %y = DynamicQuantizeMatMul(%a, %b, bs, bz, %bias)
 *     →  %q, %qs, %qz = DynamicQuantizeLinear(%a)
 *        %y = Add(MatMul(DequantizeLinear(%q, %qs, %qz),
 *                        DequantizeLinear(%b, bs, bz, axis=1)), %bias)
 *
 * and MatMulIntegerToFloat(A, B, as, bs, az, bz, bias) likewise, with A
 * dequantized by its own parameters (dynamic when they are a
 * DynamicQuantizeLinear's outputs).
 *
 * What the grouping does not take runs as DequantizeLinear → float op →
 * QuantizeLinear, which rounds where onnxruntime's integer kernel rounds
 * (at most one step apart from its fixed-point arithmetic).
 *
 * Conditions: the per-tensor parameters (scales, zero points) are
 * constants of one value; QLinearConv's / QGemm's bias scale is computed
 * here, so x_scale and w_scale must be constant (w_scale per tensor or per
 * output channel). A node that does not qualify stays as it is (its
 * reference kernel runs it) with a remark.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "normalize_qop.h"

static int64_t numel(const kn_value *v) { return v && v->const_data ? kn_tensor_numel(v->const_data) : -1; }

/* v is absent (when optional) or a constant of one value. */
static bool scalar_const(const kn_value *v, bool optional)
{
    return v ? numel(v) == 1 : optional;
}

static double at(const kn_value *v, int64_t i)
{
    return kn_load_f64(v->const_data->dtype, v->const_data->data, numel(v) == 1 ? 0 : (size_t)i);
}

/* A node of op named "<from>.<suffix>" with one output. */
static kn_node *mk(kn_graph *g, kn_op op, const kn_node *from, const char *suffix, int n_in, kn_value *const *in)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", from->name, suffix);
    return kn_node_create(g, op, kn_graph_lookup(g, name) ? NULL : name, n_in, in, 1);
}

static int set_int(kn_node *n, const char *name, int64_t v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INT);
    if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
    a->i = v;
    return KN_OK;
}

/* DequantizeLinear(x, s, z?) (axis set when axis >= 0): its output, NULL
 * on out of memory. */
static kn_value *dq(kn_graph *g, const kn_node *from, const char *suffix, kn_value *x, kn_value *s, kn_value *z,
                    int axis)
{
    kn_value *in[3] = {x, s, z};
    kn_node *d = mk(g, KN_OP_DequantizeLinear, from, suffix, z ? 3 : 2, in);
    if (!d || (axis >= 0 && set_int(d, "axis", axis))) return NULL;
    return d->outputs[0];
}

/* Copies n's attributes but `drop` to m. */
static int copy_attrs(kn_node *m, const kn_node *n, const char *drop)
{
    for (int i = 0; i < n->n_attrs; i++) {
        const kn_attr *src = &n->attrs[i];
        if (drop && !strcmp(src->name, drop)) continue;
        kn_attr *a = kn_node_add_attr(m, src->name, src->kind);
        if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
        const char *name = a->name;
        *a = *src;
        a->name = name;
    }
    return KN_OK;
}

/* The float op f replaces n: its result is quantized with (s, z) when s is
 * given, and that (or f's output) takes over n's output and name. */
static int finish(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, kn_node *f, kn_value *s, kn_value *z)
{
    if (!f) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_value *r = f->outputs[0];
    if (s) {
        kn_value *in[3] = {r, s, z};
        kn_node *q = mk(g, KN_OP_QuantizeLinear, n, "q", z ? 3 : 2, in);
        if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
        r = q->outputs[0];
    }
    kn_value *y = n->outputs[0];
    kn_value_replace_uses(y, r);
    kn_value_swap_names(y, r);
    kn_node_remove(n);
    f->name = n->name; /* the float op is what remarks and --report name */
    ctx->rewrites++;
    return KN_OK;
}

/* A new f32 constant [count] (rank 0 when count is 0) named after n. */
static kn_value *f32_const(kn_graph *g, const kn_node *n, const char *suffix, const float *v, int64_t count)
{
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t || kn_tensor_alloc(t, KN_F32, count ? 1 : 0, &count)) {
        free(t);
        return NULL;
    }
    memcpy(t->data, v, sizeof(float) * (size_t)(count ? count : 1));
    char name[256];
    snprintf(name, sizeof name, "%s.%s", n->name, suffix);
    return kn_graph_add_constant(g, kn_graph_lookup(g, name) ? NULL : name, t);
}

/* The bias DequantizeLinear(b, mult * xs * ws[c]) for an int32 constant b
 * of `chans` values along its last axis (or one); NULL if b does not fit
 * (*bad set) or on out of memory. */
static kn_value *bias_dq(kn_graph *g, const kn_node *n, kn_value *b, const kn_value *xs, const kn_value *ws,
                         double mult, int64_t chans, bool *bad)
{
    int64_t nw = numel(ws);
    *bad = !b->const_data || b->dtype != KN_I32 || !scalar_const(xs, false) || nw < 1 || (nw != 1 && nw != chans) ||
           b->shape.rank < 0;
    if (*bad) return NULL;
    int64_t last = b->shape.rank ? b->shape.dims[b->shape.rank - 1] : 1;
    if (nw != 1 && last != chans) {
        *bad = true;
        return NULL;
    }
    float *v = malloc(sizeof(float) * (size_t)nw);
    if (!v) return NULL;
    for (int64_t c = 0; c < nw; c++) v[c] = (float)(mult * (double)(float)(at(xs, 0) * at(ws, c)));
    kn_value *s = f32_const(g, n, "bias_scale", v, nw == 1 ? 0 : nw);
    free(v);
    return s ? dq(g, n, "dq_bias", b, s, NULL, nw == 1 ? -1 : b->shape.rank - 1) : NULL;
}

/* QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B?) and QLinearMatMul(a, as,
 * az, b, bs, bz, ys, yz): weights per tensor or per output channel (conv:
 * axis 0; matmul: B's last axis). */
static int norm_conv_matmul(kn_pass_ctx *ctx, kn_graph *g, kn_node *n)
{
    bool conv = n->op == KN_OP_QLinearConv;
    kn_value *x = kn_node_input(n, 0), *xs = kn_node_input(n, 1), *xz = kn_node_input(n, 2);
    kn_value *w = kn_node_input(n, 3), *ws = kn_node_input(n, 4), *wz = kn_node_input(n, 5);
    kn_value *ys = kn_node_input(n, 6), *yz = kn_node_input(n, 7), *b = conv ? kn_node_input(n, 8) : NULL;
    if (!x || !w || w->shape.rank < (conv ? 3 : 2) || !scalar_const(xs, false) || !scalar_const(xz, true) ||
        !scalar_const(ys, false) || !scalar_const(yz, true) || !ws || !ws->const_data ||
        (wz && !wz->const_data)) {
        kn_pass_remark(ctx, "%s '%s': the scales and zero points are not constants per tensor (weights: per "
                       "channel)", n->op_type, n->name);
        return KN_OK;
    }
    int axis = conv ? 0 : w->shape.rank - 1;
    int64_t chans = w->shape.dims[axis], nw = numel(ws), nz = wz ? numel(wz) : 1;
    if ((nw != 1 && nw != chans) || (nz != 1 && nz != chans) || (!conv && w->shape.rank != 2 && nw != 1)) {
        kn_pass_remark(ctx, "%s '%s': the weights' scale is neither per tensor nor per output channel", n->op_type,
                       n->name);
        return KN_OK;
    }
    bool per_chan = nw != 1 || nz != 1;
    kn_value *bd = NULL;
    if (b) {
        bool bad;
        bd = bias_dq(g, n, b, xs, ws, 1.0, chans, &bad);
        if (bad) {
            kn_pass_remark(ctx, "%s '%s': the bias is not an int32 constant", n->op_type, n->name);
            return KN_OK;
        }
        if (!bd) return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    kn_value *xd = dq(g, n, "dq_x", x, xs, xz, -1), *wd = dq(g, n, "dq_w", w, ws, wz, per_chan ? axis : -1);
    if (!xd || !wd) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_value *in[3] = {xd, wd, bd};
    kn_node *f = mk(g, conv ? KN_OP_Conv : KN_OP_MatMul, n, conv ? "conv" : "matmul", bd ? 3 : 2, in);
    int st = f ? copy_attrs(f, n, NULL) : KN_OK;
    return st ? st : finish(ctx, g, n, f, ys, yz);
}

/* QGemm(A, as, az, B, bs, bz, C?, ys?, yz?): Y = alpha * A'B' + C', C' =
 * C * alpha * as * bs (int32 C). */
static int norm_qgemm(kn_pass_ctx *ctx, kn_graph *g, kn_node *n)
{
    kn_value *a = kn_node_input(n, 0), *as = kn_node_input(n, 1), *az = kn_node_input(n, 2);
    kn_value *b = kn_node_input(n, 3), *bs = kn_node_input(n, 4), *bz = kn_node_input(n, 5);
    kn_value *c = kn_node_input(n, 6), *ys = kn_node_input(n, 7), *yz = kn_node_input(n, 8);
    bool tb = kn_attr_int(n, "transB", 0) != 0;
    if (!a || !b || b->shape.rank != 2 || !scalar_const(as, false) || !scalar_const(az, true) ||
        !scalar_const(ys, true) || !scalar_const(yz, true) || !bs || !bs->const_data || (bz && !bz->const_data)) {
        kn_pass_remark(ctx, "QGemm '%s': the scales and zero points are not constants per tensor (B: per column)",
                       n->name);
        return KN_OK;
    }
    int axis = tb ? 0 : 1;
    int64_t N = b->shape.dims[axis], nb = numel(bs), nz = bz ? numel(bz) : 1;
    if ((nb != 1 && nb != N) || (nz != 1 && nz != N)) {
        kn_pass_remark(ctx, "QGemm '%s': b_scale is neither per tensor nor per column", n->name);
        return KN_OK;
    }
    kn_value *cd = NULL;
    if (c) {
        bool bad;
        cd = bias_dq(g, n, c, as, bs, kn_attr_float(n, "alpha", 1.0f), N, &bad);
        if (bad) {
            kn_pass_remark(ctx, "QGemm '%s': C is not an int32 constant", n->name);
            return KN_OK;
        }
        if (!cd) return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    kn_value *ad = dq(g, n, "dq_a", a, as, az, -1), *bd = dq(g, n, "dq_b", b, bs, bz, nb != 1 || nz != 1 ? axis : -1);
    if (!ad || !bd) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_value *in[3] = {ad, bd, cd};
    kn_node *f = mk(g, KN_OP_Gemm, n, "gemm", cd ? 3 : 2, in);
    int st = f ? copy_attrs(f, n, NULL) : KN_OK;
    return st ? st : finish(ctx, g, n, f, ys, yz);
}

/* QLinearAdd / QLinearMul (A, as, az, B, bs, bz, cs, cz): inputs at 0 and
 * 3; QLinearSigmoid / QLinearLeakyRelu (X, xs, xz, ys, yz): input at 0
 * only. (QLinearGlobalAveragePool stays: the cpu backend runs it as an
 * integer sum, and lower-qdq makes one of DequantizeLinear →
 * GlobalAveragePool → QuantizeLinear.) */
static int norm_elementwise(kn_pass_ctx *ctx, kn_graph *g, kn_node *n)
{
    bool binary = n->op == KN_OP_QLinearAdd || n->op == KN_OP_QLinearMul;
    int nq = binary ? 2 : 1, ys_at = binary ? 6 : 3;
    kn_value *ys = kn_node_input(n, ys_at), *yz = kn_node_input(n, ys_at + 1);
    bool ok = scalar_const(ys, false) && scalar_const(yz, true);
    for (int k = 0; k < nq; k++)
        ok = ok && kn_node_input(n, 3 * k) && scalar_const(kn_node_input(n, 3 * k + 1), false) &&
             scalar_const(kn_node_input(n, 3 * k + 2), true);
    if (!ok) {
        kn_pass_remark(ctx, "%s '%s': the scales and zero points are not constants per tensor", n->op_type, n->name);
        return KN_OK;
    }
    kn_value *in[2];
    for (int k = 0; k < nq; k++) {
        in[k] = dq(g, n, k ? "dq_b" : "dq_a", kn_node_input(n, 3 * k), kn_node_input(n, 3 * k + 1),
                   kn_node_input(n, 3 * k + 2), -1);
        if (!in[k]) return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    kn_op op = n->op == KN_OP_QLinearAdd ? KN_OP_Add
               : n->op == KN_OP_QLinearMul ? KN_OP_Mul
               : n->op == KN_OP_QLinearSigmoid ? KN_OP_Sigmoid
                                                : KN_OP_LeakyRelu;
    kn_node *f = mk(g, op, n, "float", nq, in);
    int st = f && op == KN_OP_LeakyRelu ? copy_attrs(f, n, NULL) : KN_OK;
    return st ? st : finish(ctx, g, n, f, ys, yz);
}

/* QLinearConcat(ys, yz, (x, xs, xz)...). */
static int norm_concat(kn_pass_ctx *ctx, kn_graph *g, kn_node *n)
{
    kn_value *ys = kn_node_input(n, 0), *yz = kn_node_input(n, 1);
    int nt = (n->n_inputs - 2) / 3;
    bool ok = (n->n_inputs - 2) % 3 == 0 && nt >= 1 && scalar_const(ys, false) && scalar_const(yz, true);
    for (int t = 0; ok && t < nt; t++)
        ok = kn_node_input(n, 2 + 3 * t) && scalar_const(kn_node_input(n, 3 + 3 * t), false) &&
             scalar_const(kn_node_input(n, 4 + 3 * t), true);
    if (!ok) {
        kn_pass_remark(ctx, "QLinearConcat '%s': the scales and zero points are not constants per tensor", n->name);
        return KN_OK;
    }
    kn_value **in = malloc(sizeof *in * (size_t)nt);
    if (!in) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = KN_OK;
    for (int t = 0; t < nt && !st; t++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "dq_%d", t);
        in[t] = dq(g, n, suffix, kn_node_input(n, 2 + 3 * t), kn_node_input(n, 3 + 3 * t), kn_node_input(n, 4 + 3 * t),
                   -1);
        if (!in[t]) st = kn_error(KN_ERR_NOMEM, "out of memory");
    }
    kn_node *f = st ? NULL : mk(g, KN_OP_Concat, n, "concat", nt, in);
    free(in);
    if (!st) st = f ? copy_attrs(f, n, NULL) : kn_error(KN_ERR_NOMEM, "out of memory");
    return st ? st : finish(ctx, g, n, f, ys, yz);
}

/* B's scale and zero point per tensor or per column of a 2-D B: the
 * DequantizeLinear's axis (-1: per tensor), or -2 when they are neither. */
static int b_axis(const kn_value *b, const kn_value *bs, const kn_value *bz)
{
    int64_t nb = numel(bs), nz = bz ? numel(bz) : 1;
    if (!b || b->shape.rank != 2 || nb < 1 || (bz && nz < 1)) return -2;
    int64_t N = b->shape.dims[1];
    if ((nb != 1 && nb != N) || (nz != 1 && nz != N)) return -2;
    return nb == 1 && nz == 1 ? -1 : 1;
}

/* Y = MatMul(ad, DequantizeLinear(B, bs, bz)) [+ bias] replacing n. */
static int matmul_to_float(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, kn_value *ad, kn_value *b, kn_value *bs,
                           kn_value *bz, int axis, kn_value *bias)
{
    kn_value *bd = dq(g, n, "dq_b", b, bs, bz, axis);
    if (!ad || !bd) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_value *in[2] = {ad, bd};
    kn_node *f = mk(g, KN_OP_MatMul, n, "matmul", 2, in);
    if (f && bias) { /* the Add takes n's name (finish), the product is "<n>.matmul" */
        kn_value *add_in[2] = {f->outputs[0], bias};
        f = mk(g, KN_OP_Add, n, "bias", 2, add_in);
    }
    return finish(ctx, g, n, f, NULL, NULL);
}

/* com.microsoft DynamicQuantizeMatMul(A, B, b_scale, b_zero_point?, bias?):
 * A quantized to u8 at run time as DynamicQuantizeLinear does, times B
 * dequantized, plus bias: the canonical dynamic form, which the grouping
 * lowers to a dynamic QMatMul. */
static int norm_dynamic_matmul(kn_pass_ctx *ctx, kn_graph *g, kn_node *n)
{
    kn_value *a = kn_node_input(n, 0), *b = kn_node_input(n, 1), *bs = kn_node_input(n, 2);
    kn_value *bz = kn_node_input(n, 3), *bias = kn_node_input(n, 4);
    int axis = b_axis(b, bs, bz);
    if (!a || axis == -2 || !bs->const_data || (bz && !bz->const_data)) {
        kn_pass_remark(ctx, "DynamicQuantizeMatMul '%s': B is not 2-D with constant scales per tensor or column",
                       n->name);
        return KN_OK;
    }
    char name[256];
    snprintf(name, sizeof name, "%s.dql", n->name);
    kn_node *q = kn_node_create(g, KN_OP_DynamicQuantizeLinear, kn_graph_lookup(g, name) ? NULL : name, 1, &a, 3);
    if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
    return matmul_to_float(ctx, g, n, dq(g, n, "dq_a", q->outputs[0], q->outputs[1], q->outputs[2], -1), b, bs, bz,
                           axis, bias);
}

/* com.microsoft MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point?,
 * b_zero_point?, bias?): both sides dequantized, their product plus bias
 * (dynamic when A and its parameters come from a DynamicQuantizeLinear). */
static int norm_matmul_to_float(kn_pass_ctx *ctx, kn_graph *g, kn_node *n)
{
    kn_value *a = kn_node_input(n, 0), *b = kn_node_input(n, 1), *as = kn_node_input(n, 2), *bs = kn_node_input(n, 3);
    kn_value *az = kn_node_input(n, 4), *bz = kn_node_input(n, 5), *bias = kn_node_input(n, 6);
    int axis = b_axis(b, bs, bz);
    bool dyn = a && a->producer && a->producer->op == KN_OP_DynamicQuantizeLinear && a->producer->n_outputs == 3 &&
               as == a->producer->outputs[1] && (!az || az == a->producer->outputs[2]);
    if (!a || axis == -2 || !bs->const_data || (bz && !bz->const_data) ||
        !(dyn || (scalar_const(as, false) && scalar_const(az, true)))) {
        kn_pass_remark(ctx, "MatMulIntegerToFloat '%s': A's parameters are neither constants per tensor nor a "
                       "DynamicQuantizeLinear's, or B is not 2-D with constant scales per tensor or column", n->name);
        return KN_OK;
    }
    return matmul_to_float(ctx, g, n, dq(g, n, "dq_a", a, as, az, -1), b, bs, bz, axis, bias);
}

int kn_normalize_qop(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int count = g->n_nodes;
    kn_node **todo = malloc(sizeof *todo * (size_t)(count ? count : 1));
    if (!todo) return kn_error(KN_ERR_NOMEM, "out of memory");
    memcpy(todo, g->nodes, sizeof *todo * (size_t)count);
    int st = KN_OK, before = ctx->rewrites;
    for (int i = 0; i < count && !st; i++) {
        kn_node *n = todo[i];
        if (n->n_outputs != 1 || !n->outputs[0]) continue;
        switch (n->op) {
        case KN_OP_QLinearConv:
        case KN_OP_QLinearMatMul: st = norm_conv_matmul(ctx, g, n); break;
        case KN_OP_QGemm: st = norm_qgemm(ctx, g, n); break;
        case KN_OP_QLinearAdd:
        case KN_OP_QLinearMul:
        case KN_OP_QLinearSigmoid:
        case KN_OP_QLinearLeakyRelu: st = norm_elementwise(ctx, g, n); break;
        case KN_OP_QLinearConcat: st = norm_concat(ctx, g, n); break;
        case KN_OP_DynamicQuantizeMatMul: st = norm_dynamic_matmul(ctx, g, n); break;
        case KN_OP_MatMulIntegerToFloat: st = norm_matmul_to_float(ctx, g, n); break;
        default: break;
        }
    }
    free(todo);
    *out_changed = ctx->rewrites != before;
    /* the grouping reads shapes and walks users: sort and infer, but do not
     * fold (kn_pass_finish would turn the weights' DequantizeLinear into
     * float constants) */
    if (!st && *out_changed) st = kn_graph_toposort(g);
    if (!st && *out_changed) st = kn_graph_infer(g);
    return st;
}
