/*
 * passes/lower_qdq.c — the integer lowering: DequantizeLinear → Conv /
 * MatMul / Gemm (+ activations, a residual Add) → QuantizeLinear groups of
 * a quantized model (the IR's one quantized form: QDQ) become one
 * kiln::QConv or kiln::QMatMul (runtime/ops/fused_q.h), which the cpu
 * backend runs as one oneDNN int8 primitive; 8-bit tensors stay 8-bit
 * through data movement and max pooling.
 *
 *   %x  = DequantizeLinear(%xq, xs, xz)
 *   %w  = DequantizeLinear(%wq, ws[O], 0)       %yq = kiln::QConv(%xq, %wq, %B, %rq, %S)
 *   %b  = DequantizeLinear(%bq, xs*ws, 0)   →        {..Conv's attributes..,
 *   %c  = Conv(%x, %w, %b)                            x_zero_point=xz, y_zero_point=yz,
 *   %cq = QuantizeLinear(%c, cs, cz)                  y_dtype=2, post_ops=["Add"],
 *   %cd = DequantizeLinear(%cq, cs, cz)               post_alpha=[rs/ys], post_beta=[rz]}
 *   %a  = Add(%cd, DequantizeLinear(%rq, rs, rz))
 *   %yq = QuantizeLinear(%a, ys, yz)
 *
 * with S[o] = xs*ws[o]/ys and B[o] = bias[o]/(xs*ws[o]) (fused_q.h). A
 * QuantizeLinear → DequantizeLinear pair inside a group (%cq, %cd: the
 * conv's own output quantization before a residual Add) keeps its rounding
 * and saturation as a QDQ_U8/QDQ_S8 post-op (kiln/abi.h): S[o] is then
 * xs*ws[o]/cs, so that the conv's result reaches it in steps of cs, and it
 * hands on (round + clamp) * cs/ys. The group computes what the graph as
 * written does: rounding once instead (as kiln did) put MobileNetV2's
 * logits within one output step of onnxruntime's on 97.4% of them, where
 * twice gives 99.9%.
 * A group that ends in float (no QuantizeLinear after it) gives a QConv
 * with an f32 output.
 *
 * Dynamic quantization: a MatMul/Gemm whose activation input is
 * DequantizeLinear(DynamicQuantizeLinear(x)) and whose weights are constant
 * becomes a QMatMul of x itself (f32: quantized at run time, inside the
 * op), with its bias Add, activations and a float residual Add, ending in
 * float. onnxruntime's quantize_dynamic form (MatMulInteger, Cast, Mul by
 * x_scale * w_scale) is first rewritten into that canonical form.
 *
 * Data movement: DequantizeLinear → MaxPool / Reshape / Flatten /
 * Transpose / (Un)Squeeze / Slice / Concat / DepthToSpace / SpaceToDepth /
 * Expand / Tile / nearest Resize → QuantizeLinear with the same scale and
 * zero point (every input of a Concat) runs the op on the 8-bit tensor
 * (exact: these ops only move or select values).
 *
 * Conditions (each near miss is a remark): activations quantized per
 * tensor (u8 or s8) with constant scale and zero point; weights constant
 * s8 with zero point 0, per tensor or per output channel; a bias that is a
 * constant (float, or int32 behind a DequantizeLinear); every value inside
 * a group has one user and is no graph output; activations after which a
 * quantized output is not a plain rescaling (Sigmoid, Tanh, Gelu,
 * HardSwish) end the group in float.
 *
 * PyTorch's QAT exports: a fused Conv+BatchNorm arrives as Conv → Div →
 * Add → BatchNormalization (per-channel constants), which the group folds
 * into the weights' per-channel scales and the bias (the integers stay);
 * a fake quantization to a narrower range than its type's arrives as
 * QuantizeLinear → Clip, which becomes a float Clip before the
 * QuantizeLinear (normalize_q_clip).
 *
 * QOperator form: onnxruntime's QLinearConv, QLinearMatMul, and
 * com.microsoft QGemm, QLinearAdd, QLinearMul, QLinearConcat,
 * QLinearGlobalAveragePool, QLinearSigmoid and QLinearLeakyRelu are first
 * rewritten into DequantizeLinear → float op → QuantizeLinear with the same
 * parameters (passes/normalize_qop.c), so that everything below lowers
 * them as it lowers QDQ; a QLinearAdd after a QLinearConv becomes that
 * group's residual Add.
 *
 * Runs first in the pipeline (after a first recognize-gelu, so that a Gelu
 * after a dynamic matmul becomes its post-op), before fold-constants turns
 * the weights' DequantizeLinear into float constants; whatever it leaves is
 * folded (constant weights of float ops) or runs as QuantizeLinear /
 * DequantizeLinear (generated loops when per tensor).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_util.h"
#include "match.h"
#include "fused_q.h"
#include "normalize_qop.h"

/* ---- quantization parameters --------------------------------------------------- */

/* A per-tensor quantization: scale and zero point of a QuantizeLinear or
 * DequantizeLinear with constant scalar parameters. */
typedef struct qparam {
    float scale;
    int32_t zp;
    kn_dtype dt; /* the 8-bit type */
} qparam;

static bool is_8bit(kn_dtype dt) { return dt == KN_U8 || dt == KN_I8; }

static bool same_q(const qparam *a, const qparam *b) { return a->scale == b->scale && a->zp == b->zp && a->dt == b->dt; }

/* Element i of constant v as a double (v numeric). */
static double const_at(const kn_value *v, int64_t i) { return kn_load_f64(v->const_data->dtype, v->const_data->data, (size_t)i); }

static int64_t const_numel(const kn_value *v) { return v && v->const_data ? kn_tensor_numel(v->const_data) : -1; }

/* The parameters of Q/DQ node n if they are per tensor and constant; the
 * 8-bit side is `qv` (DQ's input, Q's output). */
static bool per_tensor(const kn_node *n, const kn_value *qv, qparam *p)
{
    const kn_value *s = kn_node_input(n, 1), *z = kn_node_input(n, 2);
    if (!qv || !is_8bit(qv->dtype) || !s || const_numel(s) != 1 || s->dtype != KN_F32) return false;
    if (z && (const_numel(z) != 1 || z->dtype != qv->dtype)) return false;
    p->scale = (float)const_at(s, 0);
    p->zp = z ? (int32_t)const_at(z, 0) : 0;
    p->dt = qv->dtype;
    return isfinite(p->scale) && p->scale > 0;
}

/* v = DequantizeLinear(q) per tensor: the node, q and its parameters. */
static kn_node *dq_input(const kn_value *v, qparam *p)
{
    kn_node *d = v ? v->producer : NULL;
    if (!d || d->op != KN_OP_DequantizeLinear || d->n_outputs != 1) return NULL;
    return per_tensor(d, kn_node_input(d, 0), p) ? d : NULL;
}

/* v = DequantizeLinear(y, scale, zp) of the three outputs of one
 * DynamicQuantizeLinear: that node (its input is quantized at run time). */
static kn_node *dyn_input(const kn_value *v)
{
    kn_node *d = v ? v->producer : NULL;
    if (!d || d->op != KN_OP_DequantizeLinear || d->n_inputs < 3) return NULL;
    kn_node *q = d->inputs[0] ? d->inputs[0]->producer : NULL;
    if (!q || q->op != KN_OP_DynamicQuantizeLinear || q->n_outputs != 3 || d->inputs[0] != q->outputs[0] ||
        d->inputs[1] != q->outputs[1] || d->inputs[2] != q->outputs[2] || !kn_node_input(q, 0) ||
        kn_node_input(q, 0)->dtype != KN_F32)
        return NULL;
    return q;
}

/* A QuantizeLinear node's parameters, per tensor. */
static bool q_params(const kn_node *q, qparam *p)
{
    return q->op == KN_OP_QuantizeLinear && q->n_outputs == 1 && q->outputs[0] &&
           per_tensor(q, q->outputs[0], p);
}

/* The weights: v = DequantizeLinear(wq) with wq a constant s8 tensor, zero
 * point 0, scale per tensor or per `axis` (which has `chans` entries).
 * Fills scales[chans] (per tensor: repeated) and returns wq. */
static kn_value *const_weights(const kn_value *v, int axis, int64_t chans, float *scales, const char **why)
{
    kn_node *d = v ? v->producer : NULL;
    *why = "the weights are not a DequantizeLinear of a constant";
    if (!d || d->op != KN_OP_DequantizeLinear) return NULL;
    kn_value *wq = kn_node_input(d, 0), *s = kn_node_input(d, 1), *z = kn_node_input(d, 2);
    if (!wq || !wq->const_data || !s || !s->const_data || (z && !z->const_data)) return NULL;
    *why = "the weights are not s8";
    if (wq->dtype != KN_I8) return NULL;
    *why = "the weights' zero point is not 0";
    for (int64_t i = 0; z && i < const_numel(z); i++)
        if (const_at(z, i) != 0) return NULL;
    int64_t ns = const_numel(s);
    int64_t a = kn_attr_int(d, "axis", 1);
    if (wq->shape.rank > 0 && a < 0) a += wq->shape.rank;
    *why = "the weights' scale is neither per tensor nor per output channel";
    if (kn_attr_int(d, "block_size", 0) != 0 || s->dtype != KN_F32) return NULL;
    if (ns != 1 && (ns != chans || a != axis)) return NULL;
    for (int64_t i = 0; i < chans; i++) {
        scales[i] = (float)const_at(s, ns == 1 ? 0 : i);
        if (!(isfinite(scales[i]) && scales[i] > 0)) return NULL;
    }
    *why = NULL;
    return wq;
}

/* The bias in real units into bias[chans]: a float constant of chans
 * values, or a DequantizeLinear of an int32 constant. */
static bool const_bias(const kn_value *b, int64_t chans, float *bias)
{
    if (!b) {
        for (int64_t i = 0; i < chans; i++) bias[i] = 0;
        return true;
    }
    if (b->const_data && b->dtype == KN_F32 && const_numel(b) == chans) {
        for (int64_t i = 0; i < chans; i++) bias[i] = (float)const_at(b, i);
        return true;
    }
    kn_node *d = b->producer;
    if (!d || d->op != KN_OP_DequantizeLinear) return false;
    kn_value *bq = kn_node_input(d, 0), *s = kn_node_input(d, 1), *z = kn_node_input(d, 2);
    if (!bq || !bq->const_data || bq->dtype != KN_I32 || const_numel(bq) != chans || !s || !s->const_data ||
        (z && !z->const_data))
        return false;
    int64_t ns = const_numel(s), nz = z ? const_numel(z) : 0;
    if ((ns != 1 && ns != chans) || (z && nz != 1 && nz != chans)) return false;
    for (int64_t i = 0; i < chans; i++) {
        double zp = z ? const_at(z, nz == 1 ? 0 : i) : 0;
        bias[i] = (float)((const_at(bq, i) - zp) * const_at(s, ns == 1 ? 0 : i));
    }
    return true;
}

/* ---- groups ----------------------------------------------------------------------- */

/* One group being grown from a Conv or a matrix product. */
typedef struct qgroup {
    kn_node *head;
    const char *what;
    kn_node *nodes[16]; /* head, then every node taken */
    int n_nodes;
    kn_value *out;      /* the group's result so far */
    kn_abi_post post[KN_FUSED_MAX_POST]; /* clip bounds in real units; a sum's alpha/beta: r scale, r zp;
                                          * a QDQ's: the inner scale and zero point */
    int n_post;
    int inner;          /* index in post of the inner QuantizeLinear → DequantizeLinear pair, or -1 */
    kn_value *residual; /* 8-bit */
    bool quantized;     /* ends in a QuantizeLinear: */
    qparam y;
    bool dynamic;       /* activations quantized at run time: the group ends in float */
    kn_value *bias;     /* dynamic: a constant [N] bias Add taken (real units) */
} qgroup;

/* The one user of v if v is no graph output; NULL otherwise. */
static kn_node *sole_user(const kn_value *v)
{
    if (!v || v->n_users != 1 || (v->flags & KN_VALUE_GRAPH_OUTPUT)) return NULL;
    return v->users[0].node;
}

static void take(qgroup *q, kn_node *u)
{
    q->nodes[q->n_nodes++] = u;
    q->out = u->outputs[0];
}

/* True for activations whose quantized result is the activation of the
 * scaled value (relu(v * s) = relu(v) * s for s > 0). */
static bool homogeneous(int kind) { return kind == KN_POST_RELU || kind == KN_POST_CLIP || kind == KN_POST_LEAKY_RELU; }

/* Takes an Add of q->out and a per-tensor dequantized 8-bit tensor as the
 * residual sum. */
static bool take_residual(kn_pass_ctx *ctx, qgroup *q, kn_node *u)
{
    if (u->op != KN_OP_Add || q->residual || q->n_post == KN_FUSED_MAX_POST || !u->outputs[0]) return false;
    kn_value *a = kn_node_input(u, 0), *b = kn_node_input(u, 1);
    kn_value *other = a == q->out ? b : a;
    qparam r;
    if (other == q->out || !dq_input(other, &r)) {
        kn_pass_remark(ctx, "%s '%s' + Add '%s': the addend is not a per-tensor DequantizeLinear", q->what,
                       q->head->name, u->name);
        return false;
    }
    if (!kn_shape_same(&other->shape, &q->out->shape) || !kn_shape_same(&u->outputs[0]->shape, &q->out->shape)) {
        kn_pass_remark(ctx, "%s '%s' + Add '%s': the addend broadcasts", q->what, q->head->name, u->name);
        return false;
    }
    q->residual = kn_node_input(other->producer, 0);
    q->post[q->n_post++] = (kn_abi_post){.kind = KN_POST_SUM, .alpha = r.scale, .beta = (float)r.zp};
    take(q, u);
    return true;
}

/* Takes u when it adds a constant row bias (N f32 values along the last
 * axis) to the group's result before any post-op: into bias[N]. */
static bool take_row_bias(qgroup *q, kn_node *u, int64_t N, float *bias)
{
    if (u->op != KN_OP_Add || q->n_post || !u->outputs[0]) return false;
    kn_value *a = kn_node_input(u, 0), *b = kn_node_input(u, 1), *other = a == q->out ? b : a;
    if (other == q->out || !kn_shape_same(&u->outputs[0]->shape, &q->out->shape)) return false;
    bool row = other->const_data && other->dtype == KN_F32 && const_numel(other) == N && other->shape.rank >= 1 &&
               other->shape.dims[other->shape.rank - 1] == N;
    if (!row) return false;
    for (int64_t i = 0; i < N; i++) bias[i] += (float)const_at(other, i);
    q->bias = other;
    take(q, u);
    return true;
}

/* The dynamic form: a bias Add of a constant with the output's N values
 * (into *bias), activations, and a float residual Add; never quantized. */
static void grow_dynamic(kn_pass_ctx *ctx, qgroup *q, int64_t N, float *bias)
{
    kn_node *u;
    while ((u = sole_user(q->out)) && u->n_outputs >= 1 && u->outputs[0] && q->n_nodes < 12) {
        kn_abi_post p;
        const char *why;
        if (take_row_bias(q, u, N, bias)) continue;
        if (u->op == KN_OP_Add) {
            kn_value *a = kn_node_input(u, 0), *b = kn_node_input(u, 1), *other = a == q->out ? b : a;
            if (other == q->out || !kn_shape_same(&u->outputs[0]->shape, &q->out->shape)) return;
            if (q->residual || q->n_post == KN_FUSED_MAX_POST || other->dtype != KN_F32 ||
                !kn_shape_same(&other->shape, &q->out->shape)) {
                kn_pass_remark(ctx, "%s '%s' + Add '%s': neither a constant row bias nor a residual", q->what,
                               q->head->name, u->name);
                return;
            }
            q->residual = other;
            q->post[q->n_post++] = (kn_abi_post){.kind = KN_POST_SUM, .alpha = 1.0f, .beta = 0.0f};
            take(q, u);
            continue;
        }
        if (q->n_post == KN_FUSED_MAX_POST || !kn_fuse_post_of(u, &p, &why)) return;
        q->post[q->n_post++] = p;
        take(q, u);
    }
}

/* True if constant c scales or shifts each channel of a value of rank
 * `rank` with `chans` channels on axis 1 (NCHW) alike: one f32 value, or
 * `chans` values along that axis only. */
static bool chan_const(const kn_value *c, int rank, int64_t chans)
{
    if (!c || !c->const_data || c->dtype != KN_F32 || c->shape.rank > rank) return false;
    int64_t n = const_numel(c);
    if (n == 1) return true;
    int at = c->shape.rank - (rank - 1); /* c's axis under axis 1 */
    return n == chans && at >= 0 && c->shape.dims[at] == chans;
}

/* Node u as y = f[c] * x + g[c] on the group's output x (chans channels):
 * Mul or Div by, Add or Sub of a per-channel constant (x first for Div and
 * Sub), or an inference BatchNormalization. *why says why not when u is
 * one of these ops. */
static bool channel_affine(const qgroup *q, const kn_node *u, int64_t chans, double *f, double *g, const char **why)
{
    *why = NULL;
    if (u->op == KN_OP_BatchNormalization) {
        for (int k = 1; k < u->n_outputs; k++)
            if (u->outputs[k] && u->outputs[k]->n_users) return *why = "its running statistics are read", false;
        if (kn_attr_int(u, "training_mode", 0) != 0) return *why = "it is in training mode", false;
        return u->inputs[0] == q->out && kn_pm_bn_affine(u, chans, f, g, why);
    }
    if (u->op != KN_OP_Mul && u->op != KN_OP_Div && u->op != KN_OP_Add && u->op != KN_OP_Sub) return false;
    kn_value *a = kn_node_input(u, 0), *b = kn_node_input(u, 1), *c = a == q->out ? b : a;
    if (c == q->out || !chan_const(c, q->out->shape.rank, chans))
        return *why = "the other operand is not a constant of one value or one per output channel", false;
    if ((u->op == KN_OP_Div || u->op == KN_OP_Sub) && a != q->out)
        return *why = "the convolution is its second operand", false;
    int64_t n = const_numel(c);
    for (int64_t i = 0; i < chans; i++) {
        double v = const_at(c, n == 1 ? 0 : i);
        f[i] = u->op == KN_OP_Mul ? v : u->op == KN_OP_Div ? 1.0 / v : 1.0;
        g[i] = u->op == KN_OP_Add ? v : u->op == KN_OP_Sub ? -v : 0.0;
    }
    return true;
}

/* Takes the nodes right after a convolution that scale and shift each
 * output channel by constants, which is how PyTorch exports a fused
 * Conv+BatchNorm trained with quantization-aware training (Conv → Div →
 * Add → BatchNormalization). y = mul[c] * conv + add[c] accumulates them
 * (mul and add start as 1 and 0); lower_conv folds them into the weights'
 * scales and the bias, the weights staying the same integers. */
static void grow_affine(kn_pass_ctx *ctx, qgroup *q, int64_t chans, double *mul, double *add, double *f, double *g)
{
    kn_node *u;
    while ((u = sole_user(q->out)) && u->n_outputs >= 1 && u->outputs[0] && q->n_nodes < 12 &&
           kn_shape_same(&u->outputs[0]->shape, &q->out->shape)) {
        const char *why;
        if (!channel_affine(q, u, chans, f, g, &why)) {
            if (why) kn_pass_remark(ctx, "%s '%s' + %s '%s': %s", q->what, q->head->name, u->op_type, u->name, why);
            return;
        }
        for (int64_t c = 0; c < chans; c++) {
            double m = mul[c] * f[c], a = add[c] * f[c] + g[c];
            if (!(isfinite(m) && m != 0 && isfinite(a))) {
                kn_pass_remark(ctx, "%s '%s' + %s '%s': channel %lld would be scaled by %g", q->what,
                               q->head->name, u->op_type, u->name, (long long)c, m);
                return;
            }
        }
        for (int64_t c = 0; c < chans; c++) mul[c] *= f[c], add[c] = add[c] * f[c] + g[c];
        take(q, u);
    }
}

/* The inner QuantizeLinear → DequantizeLinear pair as a post-op (its scale
 * and zero point; commit() puts it in output units). */
static void add_inner_qdq(qgroup *q, const qparam *p)
{
    q->inner = q->n_post;
    q->post[q->n_post++] = (kn_abi_post){.kind = p->dt == KN_U8 ? KN_POST_QDQ_U8 : KN_POST_QDQ_S8,
                                         .alpha = (float)p->scale, .beta = (float)p->zp};
}

/* Grows q from its head's output: activations, a QuantizeLinear →
 * DequantizeLinear pair before a residual Add, the Add, and the final
 * QuantizeLinear. */
static void grow(kn_pass_ctx *ctx, qgroup *q)
{
    kn_node *u;
    while ((u = sole_user(q->out)) && u->n_outputs >= 1 && u->outputs[0] && q->n_nodes < 12) {
        kn_abi_post p;
        const char *why;
        qparam qp, dp;
        if (u->op == KN_OP_QuantizeLinear) {
            if (!q_params(u, &qp)) {
                kn_pass_remark(ctx, "%s '%s' + QuantizeLinear '%s': not per tensor with constant parameters",
                               q->what, q->head->name, u->name);
                return;
            }
            /* Q → DQ → Add(residual): the pair becomes a post-op */
            kn_node *d = sole_user(u->outputs[0]);
            kn_node *add = d && d->op == KN_OP_DequantizeLinear && dq_input(d->outputs[0], &dp) && same_q(&qp, &dp)
                               ? sole_user(d->outputs[0])
                               : NULL;
            if (add && add->op == KN_OP_Add && !q->residual && q->n_post + 2 <= KN_FUSED_MAX_POST) {
                int n0 = q->n_nodes, np0 = q->n_post;
                take(q, u);
                take(q, d);
                add_inner_qdq(q, &qp);
                if (take_residual(ctx, q, add)) continue;
                q->n_nodes = n0; /* the group ends at the QuantizeLinear after all */
                q->out = u->inputs[0];
                q->n_post = np0; /* add_inner_qdq only appended */
                q->inner = -1;
            }
            take(q, u);
            q->quantized = true;
            q->y = qp;
            return;
        }
        if (u->op == KN_OP_Add) {
            if (!take_residual(ctx, q, u)) return;
            continue;
        }
        if (q->n_post == KN_FUSED_MAX_POST || !kn_fuse_post_of(u, &p, &why)) return;
        if (!homogeneous(p.kind) && q->residual) return; /* the group must end quantized (the sum's residual) */
        q->post[q->n_post++] = p;
        take(q, u);
        if (!homogeneous(p.kind)) return; /* the group ends here, in float */
    }
}

/* Adds a float constant of n values named after the head. */
static kn_value *add_f32(kn_graph *g, const kn_node *head, const char *suffix, const float *vals, int64_t n)
{
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (kn_tensor_alloc(t, KN_F32, 1, &n)) {
        free(t);
        return NULL;
    }
    memcpy(t->data, vals, sizeof(float) * (size_t)n);
    char name[256];
    snprintf(name, sizeof name, "%s.%s", head->name, suffix);
    return kn_graph_add_constant(g, kn_graph_lookup(g, name) ? NULL : name, t);
}

static int set_int(kn_node *n, const char *name, int64_t v)
{
    kn_attr *a = kn_node_add_attr(n, name, KN_ATTR_INT);
    if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
    a->i = v;
    return KN_OK;
}

/* Replaces q by one node of op with inputs (X, W, B, R, S), the head's
 * attributes but `drop`, the quantization attributes, and the post-ops in
 * the units they run in (fused_q.h): Clip bounds over the inner scale
 * before an inner QDQ, over y_scale otherwise; the QDQ's scale and the
 * sum's over y_scale. */
static int commit(kn_pass_ctx *ctx, kn_graph *g, qgroup *q, kn_op op, kn_value *x, const qparam *xq, kn_value *w,
                  kn_value *bias, kn_value *scale, const char *const *drop)
{
    kn_value *in[5] = {x, w, bias, q->residual, scale};
    kn_node *n = kn_fuse_replace(ctx, g, q->head, q->nodes, q->n_nodes, q->out, op, in, 5, drop);
    if (!n) return KN_ERR_NOMEM;
    float ys = q->quantized ? q->y.scale : 1.0f;
    kn_abi_post post[KN_FUSED_MAX_POST];
    for (int i = 0; i < q->n_post; i++) {
        float unit = q->inner >= 0 && i < q->inner ? q->post[q->inner].alpha : ys;
        post[i] = q->post[i];
        if (post[i].kind == KN_POST_CLIP) post[i].alpha /= unit, post[i].beta /= unit; /* ±inf stays */
        if (post[i].kind == KN_POST_SUM) post[i].alpha /= ys;                          /* beta: r's zero point */
        if (i == q->inner) post[i].alpha /= ys;                                        /* beta: its zero point */
    }
    int st = set_int(n, "x_zero_point", xq->zp);
    if (!st) st = set_int(n, "y_zero_point", q->quantized ? q->y.zp : 0);
    if (!st) st = set_int(n, "y_dtype", kn_q_onnx_elem(q->quantized ? q->y.dt : KN_F32));
    if (!st) st = kn_fuse_set_posts(n, post, q->n_post);
    return st;
}

/* S and B of a group: S[c] = xs*ws[c]/ys (over the inner scale when the
 * group has an inner QDQ), B[c] = bias[c]/(xs*ws[c]). */
static int scales_and_bias(kn_graph *g, const qgroup *q, float xs, const float *ws, const float *bias, int64_t chans,
                           kn_value **out_s, kn_value **out_b)
{
    float *sv = calloc(2 * (size_t)chans + 1, sizeof(float));
    if (!sv) return kn_error(KN_ERR_NOMEM, "out of memory");
    float *bv = sv + chans, ys = q->inner >= 0 ? q->post[q->inner].alpha : q->quantized ? q->y.scale : 1.0f;
    bool any_bias = false;
    for (int64_t c = 0; c < chans; c++) {
        double acc_scale = (double)xs * ws[c];
        /* dynamic: xs is known at run time only; S holds the weights' scales
         * and B stays in real units (fused_q.h) */
        sv[c] = q->dynamic ? ws[c] : (float)(acc_scale / ys);
        bv[c] = q->dynamic ? bias[c] : (float)(bias[c] / acc_scale);
        any_bias |= bv[c] != 0;
    }
    *out_s = add_f32(g, q->head, "qscale", sv, chans);
    *out_b = any_bias ? add_f32(g, q->head, "qbias", bv, chans) : NULL;
    free(sv);
    return !*out_s || (any_bias && !*out_b) ? kn_error(KN_ERR_NOMEM, "out of memory") : KN_OK;
}

/* Ends q in float when it took a residual but no QuantizeLinear: oneDNN's
 * sum reads the residual in dst's type. */
static bool group_ok(kn_pass_ctx *ctx, const qgroup *q)
{
    if (q->residual && !q->quantized && !q->dynamic) {
        kn_pass_remark(ctx, "%s '%s': a residual Add without a QuantizeLinear after it stays float", q->what,
                       q->head->name);
        return false;
    }
    return true;
}

/* Every weight in [-64, 63]. oneDNN's int8 convolution runs s8
 * activations as u8 (+128, with a compensation term); on CPUs without VNNI
 * it sums pairs of u8 x s8 products in saturating int16 and, for s8
 * sources, halves the weights to stay clear of that (its scale adjust),
 * which rounds odd 8-bit weights: the result is off by several steps. */
static bool weights_7bit(const kn_value *wq)
{
    const int8_t *w = wq->const_data->data;
    for (int64_t i = 0; i < const_numel(wq); i++)
        if (w[i] < -64 || w[i] > 63) return false;
    return true;
}

static int lower_conv(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, bool *changed)
{
    qparam xq;
    kn_node *dx = dq_input(kn_node_input(n, 0), &xq);
    kn_value *wv = kn_node_input(n, 1);
    if (!dx || !wv || wv->shape.rank < 3 || wv->shape.dims[0] <= 0 || !n->outputs[0]) return KN_OK;
    int64_t O = wv->shape.dims[0];
    float *ws = malloc(sizeof(float) * 2 * (size_t)O);
    double *aff = malloc(sizeof(double) * 4 * (size_t)O); /* mul, add, and a step's f, g */
    if (!ws || !aff) {
        free(ws);
        free(aff);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    float *bias = ws + O;
    const char *why;
    kn_value *wq = const_weights(wv, 0, O, ws, &why);
    int st = KN_OK;
    if (!wq) {
        kn_pass_remark(ctx, "Conv '%s': %s", n->name, why);
    } else if (xq.dt == KN_I8 && !weights_7bit(wq)) {
        kn_pass_remark(ctx, "Conv '%s': s8 activations with weights beyond [-64, 63] (oneDNN's s8 convolution "
                       "halves such weights on CPUs without VNNI)", n->name);
    } else if (!const_bias(kn_node_input(n, 2), O, bias)) {
        kn_pass_remark(ctx, "Conv '%s': the bias is not a constant", n->name);
    } else {
        qgroup q = {.head = n, .what = "Conv", .nodes = {n}, .n_nodes = 1, .out = n->outputs[0], .inner = -1};
        double *mul = aff, *add = aff + O;
        for (int64_t c = 0; c < O; c++) mul[c] = 1, add[c] = 0;
        grow_affine(ctx, &q, O, mul, add, aff + 2 * O, aff + 3 * O);
        for (int64_t c = 0; c < O; c++) {
            ws[c] = (float)(ws[c] * mul[c]);
            bias[c] = (float)(bias[c] * mul[c] + add[c]);
        }
        grow(ctx, &q);
        if (group_ok(ctx, &q)) {
            kn_value *s, *b;
            st = scales_and_bias(g, &q, xq.scale, ws, bias, O, &s, &b);
            if (!st) st = commit(ctx, g, &q, KN_OP_QConv, kn_node_input(dx, 0), &xq, wq, b, s, NULL);
            *changed = true;
        }
    }
    free(ws);
    free(aff);
    return st;
}

/* The constant s8 [N, K] transposed into a new [K, N] constant. */
static kn_value *transposed(kn_graph *g, const kn_node *head, const kn_value *w)
{
    int64_t N = w->shape.dims[0], K = w->shape.dims[1], d[2] = {K, N};
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t || kn_tensor_alloc(t, KN_I8, 2, d)) {
        free(t);
        return NULL;
    }
    const int8_t *src = w->const_data->data;
    int8_t *dst = t->data;
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) dst[k * N + j] = src[j * K + k];
    char name[256];
    snprintf(name, sizeof name, "%s.weight_kn", head->name);
    return kn_graph_add_constant(g, kn_graph_lookup(g, name) ? NULL : name, t);
}

static int lower_matmul(kn_pass_ctx *ctx, kn_graph *g, kn_node *n, bool *changed)
{
    bool gemm = n->op == KN_OP_Gemm;
    qparam xq = {.scale = 1.0f, .zp = 0, .dt = KN_U8};
    kn_node *dx = dq_input(kn_node_input(n, 0), &xq), *dyn = dx ? NULL : dyn_input(kn_node_input(n, 0));
    kn_value *wv = kn_node_input(n, 1);
    if ((!dx && !dyn) || !wv || wv->shape.rank != 2 || !n->outputs[0] || n->outputs[0]->shape.rank < 2) return KN_OK;
    bool tb = gemm && kn_attr_int(n, "transB", 0) != 0;
    if (gemm && (kn_attr_int(n, "transA", 0) || kn_attr_float(n, "alpha", 1.0f) != 1.0f ||
                 kn_attr_float(n, "beta", 1.0f) != 1.0f || kn_node_input(n, 0)->shape.rank != 2)) {
        kn_pass_remark(ctx, "Gemm '%s': transA, alpha or beta", n->name);
        return KN_OK;
    }
    int64_t N = wv->shape.dims[tb ? 0 : 1];
    if (N <= 0) return KN_OK;
    float *ws = malloc(sizeof(float) * 2 * (size_t)N);
    if (!ws) return kn_error(KN_ERR_NOMEM, "out of memory");
    float *bias = ws + N;
    const char *why;
    kn_value *wq = const_weights(wv, tb ? 0 : 1, N, ws, &why);
    int st = KN_OK;
    if (!wq) {
        kn_pass_remark(ctx, "%s '%s': %s", n->op_type, n->name, why);
    } else if (!const_bias(gemm ? kn_node_input(n, 2) : NULL, N, bias)) {
        kn_pass_remark(ctx, "Gemm '%s': C is not a constant row bias", n->name);
    } else {
        qgroup q = {.head = n, .what = n->op_type, .nodes = {n}, .n_nodes = 1, .out = n->outputs[0],
                    .dynamic = dyn != NULL, .inner = -1};
        if (dyn) {
            grow_dynamic(ctx, &q, N, bias);
        } else {
            kn_node *u = sole_user(q.out); /* MatMul → Add(bias), as QDQ exports of Linear layers have it */
            if (u && !gemm) take_row_bias(&q, u, N, bias);
            grow(ctx, &q);
        }
        if (group_ok(ctx, &q)) {
            kn_value *s, *b, *w = tb ? transposed(g, n, wq) : wq;
            st = w ? scales_and_bias(g, &q, xq.scale, ws, bias, N, &s, &b) : kn_error(KN_ERR_NOMEM, "out of memory");
            static const char *const drop[] = {"transA", "transB", "alpha", "beta", NULL};
            kn_value *x = dyn ? kn_node_input(dyn, 0) : kn_node_input(dx, 0);
            if (!st) st = commit(ctx, g, &q, KN_OP_QMatMul, x, &xq, w, b, s, drop);
            *changed = true;
        }
    }
    free(ws);
    return st;
}

/* ---- data movement on 8-bit tensors ---------------------------------------------- */

/* Ops that only move or select values of input 0 (and Concat's inputs):
 * exact on the 8-bit tensor. Resize only in nearest mode. */
static bool moves_values(const kn_node *n)
{
    switch (n->op) {
    case KN_OP_MaxPool: case KN_OP_Reshape: case KN_OP_Flatten: case KN_OP_Transpose: case KN_OP_Squeeze:
    case KN_OP_Unsqueeze: case KN_OP_Slice: case KN_OP_DepthToSpace: case KN_OP_SpaceToDepth: case KN_OP_Expand:
    case KN_OP_Tile: case KN_OP_Concat:
        return true;
    case KN_OP_Resize: return !strcmp(kn_attr_string(n, "mode", "nearest"), "nearest");
    default: return false;
    }
}

/* DQ → op → Q with equal parameters (every input of a Concat a DQ with
 * them): op reads the 8-bit tensor(s) and writes Q's output. */
static int lower_movement(kn_pass_ctx *ctx, kn_node *n, bool *changed)
{
    qparam in, out, other;
    kn_node *dx = dq_input(kn_node_input(n, 0), &in);
    if (!dx || n->n_outputs < 1 || !n->outputs[0]) return KN_OK;
    for (int i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] && n->outputs[i]->n_users) return KN_OK; /* MaxPool's Indices */
    kn_node *q = sole_user(n->outputs[0]);
    if (!q || !q_params(q, &out) || !same_q(&in, &out)) return KN_OK;
    if (n->op == KN_OP_MaxPool && kn_node_opset(n) < 12) return KN_OK; /* 8-bit MaxPool came in opset 12 */
    int n_data = n->op == KN_OP_Concat ? n->n_inputs : 1;
    for (int i = 1; i < n_data; i++)
        if (!dq_input(kn_node_input(n, i), &other) || !same_q(&in, &other)) {
            kn_pass_remark(ctx, "Concat '%s': input %d is not dequantized like input 0 (it stays float)", n->name, i);
            return KN_OK;
        }
    kn_value *y = q->outputs[0], *old = n->outputs[0];
    for (int i = 0; i < n_data; i++) kn_node_set_input(n, i, kn_node_input(kn_node_input(n, i)->producer, 0));
    kn_value_replace_uses(y, old);
    kn_value_swap_names(y, old); /* y may be a graph output */
    old->dtype = in.dt;
    kn_node_remove(q);
    ctx->rewrites++;
    *changed = true;
    return KN_OK;
}

/* ---- onnxruntime's dynamic form into QDQ ------------------------------------------- */

/* The constant factor of Mul m besides `x` (NULL: none). */
static kn_value *mul_other(const kn_node *m, const kn_value *x)
{
    if (!m || m->op != KN_OP_Mul) return NULL;
    kn_value *a = kn_node_input(m, 0), *b = kn_node_input(m, 1);
    return a == x ? b : b == x ? a : NULL;
}

/* `to` takes over y: its readers, its graph-output slot and its name.
 * False (nothing changed) when kn_pm_replace cannot hand the output on. */
static bool take_over(kn_value *y, kn_value *to)
{
    bool named = y->flags & KN_VALUE_GRAPH_OUTPUT; /* kn_pm_replace hands a graph output's name on */
    if (!kn_pm_replace(y, to)) return false;
    if (!named) kn_value_swap_names(y, to);
    return true;
}

/* n takes the name of the node `from` it stands for (reports, profiles),
 * which has left the graph. */
static int take_name(kn_graph *g, kn_node *n, const kn_node *from)
{
    char *name = kn_arena_strdup(&g->model->arena, from->name);
    if (!name) return kn_error(KN_ERR_NOMEM, "out of memory");
    n->name = name;
    return KN_OK;
}

/* quantize_dynamic's MatMulInteger form
 *
 *   xq, xs, xz = DynamicQuantizeLinear(x)
 *   yi = MatMulInteger(xq, wq, xz, wz)        wq constant s8 [K, N], wz 0
 *   y  = Mul(Cast(yi, to=float), Mul(xs, ws))  ws constant, 1 or N values
 *
 * becomes MatMul(DequantizeLinear(xq, xs, xz), DequantizeLinear(wq, ws)):
 * the canonical form the dynamic QMatMul is lowered from. */
static int normalize_matmul_integer(kn_pass_ctx *ctx, kn_graph *g, kn_node *mi, bool *changed)
{
    kn_value *xq = kn_node_input(mi, 0), *wq = kn_node_input(mi, 1), *xz = kn_node_input(mi, 2);
    kn_value *wz = kn_node_input(mi, 3);
    kn_node *q = xq ? xq->producer : NULL;
    if (!q || q->op != KN_OP_DynamicQuantizeLinear || q->n_outputs != 3 || xq != q->outputs[0] || xz != q->outputs[2])
        return KN_OK;
    if (!wq || !wq->const_data || wq->dtype != KN_I8 || wq->shape.rank != 2) return KN_OK;
    for (int64_t i = 0; wz && i < const_numel(wz); i++)
        if (!wz->const_data || const_at(wz, i) != 0) return KN_OK;
    kn_node *cast = sole_user(mi->outputs[0]);
    if (!cast || cast->op != KN_OP_Cast || kn_attr_int(cast, "to", 0) != 1) return KN_OK;
    kn_node *mul = sole_user(cast->outputs[0]);
    kn_value *prod = mul_other(mul, cast->outputs[0]);
    kn_node *pm = prod ? prod->producer : NULL;
    kn_value *ws = mul_other(pm, q->outputs[1]);
    int64_t N = wq->shape.dims[1], nws = const_numel(ws);
    if (!ws || !ws->const_data || ws->dtype != KN_F32 || (nws != 1 && nws != N)) {
        kn_pass_remark(ctx, "MatMulInteger '%s': its output scale is not Mul(x_scale, constant weight scale)",
                       mi->name);
        return KN_OK;
    }
    char name[256];
    snprintf(name, sizeof name, "%s.dqx", mi->name);
    kn_value *ins_x[3] = {q->outputs[0], q->outputs[1], q->outputs[2]};
    kn_node *dqx = kn_node_create(g, KN_OP_DequantizeLinear, kn_graph_lookup(g, name) ? NULL : name, 3, ins_x, 1);
    snprintf(name, sizeof name, "%s.dqw", mi->name);
    kn_value *ins_w[2] = {wq, ws};
    kn_node *dqw = kn_node_create(g, KN_OP_DequantizeLinear, kn_graph_lookup(g, name) ? NULL : name, 2, ins_w, 1);
    kn_value *ins_m[2] = {dqx ? dqx->outputs[0] : NULL, dqw ? dqw->outputs[0] : NULL};
    kn_node *mm = dqx && dqw ? kn_node_create(g, KN_OP_MatMul, NULL, 2, ins_m, 1) : NULL;
    if (!mm) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_value *y = mul->outputs[0];
    if (nws == N && N != 1) {
        kn_attr *a = kn_node_add_attr(dqw, "axis", KN_ATTR_INT);
        if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
        a->i = 1;
    }
    /* the MatMul computes what the Mul did; its output takes the Mul's name */
    mm->outputs[0]->dtype = KN_F32;
    mm->outputs[0]->shape = y->shape;
    dqx->outputs[0]->dtype = dqw->outputs[0]->dtype = KN_F32;
    dqx->outputs[0]->shape = xq->shape;
    dqw->outputs[0]->shape = wq->shape;
    kn_value_replace_uses(y, mm->outputs[0]);
    kn_value_swap_names(y, mm->outputs[0]);
    kn_node_remove(mul);
    kn_node_remove(cast);
    kn_node_remove(mi);
    int st = take_name(g, mm, mi); /* the MatMulInteger's, free now */
    if (st) return st;
    ctx->rewrites++;
    *changed = true;
    return KN_OK;
}

/* PyTorch's export of a fake quantization to a narrower range than its
 * type's (quant_min, quant_max: u8 in [0, 127] with reduce_range):
 *
 *   q = QuantizeLinear(x, s, z)            f = Clip(x, (lo - z) * s, (hi - z) * s)
 *   c = Clip(q, lo, hi)             →      c = QuantizeLinear(f, s, z)
 *
 * the same integers (rounding is monotonic and (lo - z) * s / s rounds to
 * lo - z), with the Clip in float, where a group takes it as an
 * activation. */
static int normalize_q_clip(kn_pass_ctx *ctx, kn_graph *g, kn_node *clip, bool *changed)
{
    kn_value *qv = kn_node_input(clip, 0), *lo = kn_node_input(clip, 1), *hi = kn_node_input(clip, 2);
    kn_node *q = qv ? qv->producer : NULL;
    qparam p;
    if (!q || !q_params(q, &p) || sole_user(qv) != clip || clip->n_outputs != 1 || !clip->outputs[0] ||
        kn_node_opset(clip) < 11)
        return KN_OK;
    if ((lo && const_numel(lo) != 1) || (hi && const_numel(hi) != 1)) {
        kn_pass_remark(ctx, "QuantizeLinear '%s' + Clip '%s': the bounds are not constants", q->name, clip->name);
        return KN_OK;
    }
    kn_value *fb[2] = {NULL, NULL}, *bound[2] = {lo, hi};
    for (int k = 0; k < 2; k++) {
        if (!bound[k]) continue;
        double v = ((double)const_at(bound[k], 0) - p.zp) * p.scale;
        if (!(fb[k] = kn_pm_const_f(g, NULL, KN_F32, 0, NULL, &v))) return KN_ERR_NOMEM;
    }
    kn_value *ins_c[3] = {kn_node_input(q, 0), fb[0], fb[1]};
    kn_node *fc = kn_node_create(g, KN_OP_Clip, NULL, 3, ins_c, 1);
    kn_value *ins_q[3] = {fc ? fc->outputs[0] : NULL, kn_node_input(q, 1), kn_node_input(q, 2)};
    kn_node *nq = fc ? kn_node_create(g, KN_OP_QuantizeLinear, NULL, 3, ins_q, 1) : NULL;
    if (!nq) return kn_error(KN_ERR_NOMEM, "out of memory");
    fc->outputs[0]->dtype = KN_F32;
    fc->outputs[0]->shape = ins_c[0]->shape;
    nq->outputs[0]->dtype = qv->dtype;
    nq->outputs[0]->shape = qv->shape;
    if (!take_over(clip->outputs[0], nq->outputs[0])) return KN_OK; /* both new nodes go with dce */
    kn_node_remove(clip);
    kn_node_remove(q);
    int st = take_name(g, fc, clip);
    if (st || (st = take_name(g, nq, q))) return st;
    ctx->rewrites++;
    *changed = true;
    return KN_OK;
}

/* DequantizeLinear → GlobalAveragePool → QuantizeLinear of one 8-bit type,
 * per tensor, becomes com.microsoft QLinearGlobalAveragePool (NCHW), which
 * the cpu backend runs as an integer sum per channel (one pass over the
 * bytes instead of a float tensor four times their size). */
static int compose_qgap(kn_pass_ctx *ctx, kn_graph *g, kn_node *gap, bool *changed)
{
    qparam xp, yp;
    kn_value *gv = kn_node_input(gap, 0);
    kn_node *d = dq_input(gv, &xp), *q = gap->n_outputs == 1 ? sole_user(gap->outputs[0]) : NULL;
    if (!d || !q || sole_user(gv) != gap || !q_params(q, &yp) || yp.dt != xp.dt || gv->shape.rank < 3) return KN_OK;
    kn_value *in[5] = {kn_node_input(d, 0), kn_node_input(d, 1), kn_node_input(d, 2), kn_node_input(q, 1),
                       kn_node_input(q, 2)};
    if (!in[2] || !in[4]) { /* QLinearGlobalAveragePool's zero points are required */
        kn_pass_remark(ctx, "GlobalAveragePool '%s': a zero point is omitted", gap->name);
        return KN_OK;
    }
    kn_node *n = kn_node_create(g, KN_OP_QLinearGlobalAveragePool, NULL, 5, in, 1);
    if (!n || set_int(n, "channels_last", 0)) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_value *y = q->outputs[0];
    n->outputs[0]->dtype = y->dtype;
    n->outputs[0]->shape = y->shape;
    if (!take_over(y, n->outputs[0])) return KN_OK; /* the new node goes with dce */
    kn_node_remove(q);
    kn_node_remove(gap);
    kn_node_remove(d);
    const kn_op_info *oi = kn_op_get(KN_OP_QLinearGlobalAveragePool);
    int st = take_name(g, n, gap);
    if (!st && !kn_model_opset(g->model, oi->domain)) st = kn_model_set_opset(g->model, oi->domain, 1);
    ctx->rewrites++;
    *changed = true;
    return st;
}

int kn_pass_lower_qdq(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    /* QOperator nodes first: the phases below see them as QDQ groups */
    int st = kn_normalize_qop(ctx, g, out_changed);
    if (st) return st;
    int count = g->n_nodes;
    kn_node **heads = malloc(sizeof *heads * (size_t)(count ? count : 1));
    if (!heads) return kn_error(KN_ERR_NOMEM, "out of memory");
    int nh = 0;
    for (int i = 0; i < count; i++) heads[nh++] = g->nodes[i];
    for (int i = 0; i < nh && !st; i++) {
        if (heads[i]->op == KN_OP_MatMulInteger) st = normalize_matmul_integer(ctx, g, heads[i], out_changed);
        if (heads[i]->op == KN_OP_Clip) st = normalize_q_clip(ctx, g, heads[i], out_changed);
        if (heads[i]->op == KN_OP_GlobalAveragePool) st = compose_qgap(ctx, g, heads[i], out_changed);
    }
    /* movement first: a MaxPool between two convolutions then hands them 8-bit tensors */
    for (int i = 0; i < nh && !st; i++)
        if (moves_values(heads[i])) st = lower_movement(ctx, heads[i], out_changed);
    /* (no kn_pass_finish here: it would materialize the weights'
     * DequantizeLinear into float constants) a node removed by one group is
     * never another's head: groups start at a Conv/MatMul/Gemm and take only
     * the nodes after it */
    bool grouped = false;
    count = g->n_nodes, nh = 0;
    kn_node **grown = st ? NULL : realloc(heads, sizeof *heads * (size_t)(count ? count : 1));
    if (!st && !grown) st = kn_error(KN_ERR_NOMEM, "out of memory");
    else if (grown) heads = grown;
    for (int i = 0; i < count && !st; i++)
        if (g->nodes[i]->op == KN_OP_Conv || g->nodes[i]->op == KN_OP_MatMul || g->nodes[i]->op == KN_OP_Gemm)
            heads[nh++] = g->nodes[i];
    for (int i = 0; i < nh && !st; i++)
        st = heads[i]->op == KN_OP_Conv ? lower_conv(ctx, g, heads[i], &grouped)
                                        : lower_matmul(ctx, g, heads[i], &grouped);
    free(heads);
    *out_changed |= grouped;
    if (!st && *out_changed) st = kn_pass_finish(g);
    return st;
}
