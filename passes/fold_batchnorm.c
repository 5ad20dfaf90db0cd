/*
 * passes/fold_batchnorm.c — folds an inference-mode BatchNormalization into
 * the Conv, ConvTranspose, Gemm or MatMul that produces its input.
 *
 * BN(y) = (y - mean) * a + beta with a = scale / sqrt(var + eps), one value
 * per channel. When y = W * x + B is linear in per-channel weights, scaling
 * output channel c of W by a[c] and replacing B by (B - mean) * a + beta
 * gives the same result with one node less. Conditions (each failure is a
 * remark naming both nodes):
 *   - BN's parameters and the producer's weights (and bias) are constants
 *     of a float type, BN is in inference mode and only its output 0 is read;
 *   - the producer's output is read by the BN alone (other readers need the
 *     unnormalized value);
 *   - for Gemm/MatMul the BN's channel axis (1) is the last axis: the
 *     product is 2-D, its columns are the channels.
 * New weights and bias are new constants; the old ones go with dce.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "match.h"

typedef struct bn_params {
    int64_t channels;
    double *a;    /* per-channel multiplier */
    double *b;    /* per-channel offset: beta - mean * a */
} bn_params;

static bool float_const(const kn_value *v)
{
    return v && v->const_data && (v->dtype == KN_F32 || v->dtype == KN_F64);
}

/* Reads a, b from the BN's constants; the reason of a failure in *why. */
static bool read_bn(const kn_node *bn, int64_t channels, bn_params *p, const char **why)
{
    p->channels = channels;
    p->a = malloc(sizeof(double) * (size_t)channels);
    p->b = malloc(sizeof(double) * (size_t)channels);
    if (!p->a || !p->b) return *why = "out of memory", false;
    return kn_pm_bn_affine(bn, channels, p->a, p->b, why);
}

/* Which output channel element i of a weight tensor W feeds. */
typedef enum { W_CONV, W_CONVTRANSPOSE, W_COLS, W_ROWS } w_layout;

typedef struct chan_map {
    w_layout layout;
    int64_t inner;   /* elements per (row of) dim 0, or per dims[0..1] cell for ConvTranspose */
    int64_t d1;      /* dims[1] */
    int64_t per_group; /* ConvTranspose: input channels per group */
} chan_map;

static chan_map make_map(const kn_tensor *w, w_layout layout, int64_t group)
{
    int64_t n = kn_tensor_numel(w);
    chan_map m = {.layout = layout, .d1 = w->dims[1]};
    m.inner = layout == W_CONVTRANSPOSE ? n / (w->dims[0] * w->dims[1]) : n / w->dims[0];
    m.per_group = w->dims[0] / group;
    return m;
}

static int64_t chan_of(const chan_map *m, int64_t i)
{
    switch (m->layout) {
    case W_CONV: return i / m->inner;              /* W is [M, C/g, k...] */
    case W_CONVTRANSPOSE: {                        /* W is [C, M/g, k...] */
        int64_t c = i / (m->d1 * m->inner), j = i / m->inner % m->d1;
        return c / m->per_group * m->d1 + j;
    }
    case W_COLS: return i % m->d1;                 /* B is [K, N] */
    default: return i / m->d1;                     /* transB: B is [N, K] */
    }
}

static double get_w(const kn_tensor *t, int64_t i)
{
    return t->dtype == KN_F32 ? (double)((const float *)t->data)[i] : ((const double *)t->data)[i];
}

static void put_w(kn_tensor *t, int64_t i, double x)
{
    if (t->dtype == KN_F32) ((float *)t->data)[i] = (float)x;
    else ((double *)t->data)[i] = x;
}

/* W with every element scaled by its output channel's a[c], as a new
 * constant. Conv weights (the bulk: ResNet-50 has 25M) go channel block by
 * channel block; the other layouts element by element. */
static kn_value *scaled_weights(kn_graph *g, const kn_value *w, w_layout layout, int64_t group, const bn_params *p)
{
    const kn_tensor *t = w->const_data;
    kn_tensor *out = calloc(1, sizeof *out);
    if (!out || kn_tensor_alloc(out, t->dtype, t->rank, t->dims)) {
        free(out);
        return kn_error(KN_ERR_NOMEM, "out of memory"), NULL;
    }
    int64_t n = kn_tensor_numel(t);
    chan_map m = make_map(t, layout, group);
    if (layout == W_CONV) {
        for (int64_t c = 0, i = 0; c < t->dims[0]; c++)
            for (int64_t j = 0; j < m.inner; j++, i++) put_w(out, i, get_w(t, i) * p->a[c]);
    } else {
        for (int64_t i = 0; i < n; i++) put_w(out, i, get_w(t, i) * p->a[chan_of(&m, i)]);
    }
    return kn_graph_add_constant(g, NULL, out);
}

/* (bias * bias_scale - mean) * a + beta, per channel; bias may be absent. */
static kn_value *new_bias(kn_graph *g, kn_dtype dt, const kn_value *bias, double bias_scale, const bn_params *p)
{
    double *d = malloc(sizeof *d * (size_t)p->channels);
    if (!d) return kn_error(KN_ERR_NOMEM, "out of memory"), NULL;
    const kn_tensor *t = bias ? bias->const_data : NULL;
    int64_t nb = t ? kn_tensor_numel(t) : 0;
    for (int64_t c = 0; c < p->channels; c++)
        d[c] = (t ? kn_pm_get_f(t, nb == 1 ? 0 : c) * bias_scale : 0.0) * p->a[c] + p->b[c];
    int64_t dims[1] = {p->channels};
    kn_value *v = kn_pm_const_f(g, NULL, dt, 1, dims, d);
    free(d);
    return v;
}

/* Creates `op` like `old` (same name and attributes) on new inputs; old goes
 * away with dce once the BN's output is rerouted. */
static kn_node *clone_with(kn_graph *g, const kn_node *old, int n_in, kn_value *const *in)
{
    kn_node *n = kn_node_create(g, old->op, old->name, n_in, in, 1);
    if (!n) return NULL;
    n->attrs = old->attrs;
    n->n_attrs = old->n_attrs;
    return n;
}

/* Why (or NULL) the producer p of BN's input cannot take the BN. */
static const char *producer_problem(const kn_node *p, const kn_node *bn)
{
    if (p->n_outputs != 1) return "it has more than one output";
    if (p->outputs[0]->flags & KN_VALUE_GRAPH_OUTPUT) return "its output is a graph output";
    if (!float_const(kn_node_input(p, 1))) return "its weight is not a float constant";
    int bias_at = p->op == KN_OP_MatMul ? -1 : 2;
    if (bias_at > 0 && kn_node_input(p, bias_at) && !float_const(p->inputs[bias_at])) return "its bias is not a constant";
    if (p->inputs[1]->dtype != bn->outputs[0]->dtype) return "the weight's dtype differs from the BatchNormalization's";
    return NULL;
}

static int fold_conv(kn_graph *g, kn_node *p, const bn_params *bp, kn_value **out)
{
    bool tr = p->op == KN_OP_ConvTranspose;
    int64_t group = kn_attr_int(p, "group", 1);
    kn_value *w = scaled_weights(g, p->inputs[1], tr ? W_CONVTRANSPOSE : W_CONV, group, bp);
    kn_value *b = w ? new_bias(g, w->dtype, kn_node_input(p, 2), 1.0, bp) : NULL;
    kn_value *in[3] = {p->inputs[0], w, b};
    kn_node *n = b ? clone_with(g, p, 3, in) : NULL;
    *out = n ? n->outputs[0] : NULL;
    return *out ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
}

static int fold_gemm(kn_graph *g, kn_node *p, const bn_params *bp, kn_value **out)
{
    bool tb = kn_attr_int(p, "transB", 0) != 0;
    kn_value *w = scaled_weights(g, p->inputs[1], tb ? W_ROWS : W_COLS, 1, bp);
    kn_value *b = w ? new_bias(g, w->dtype, kn_node_input(p, 2), kn_attr_float(p, "beta", 1.0f), bp) : NULL;
    kn_value *in[3] = {p->inputs[0], w, b};
    kn_node *n = b ? clone_with(g, p, 3, in) : NULL;
    if (!n) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (p->n_attrs > 0) { /* beta is now inside the bias: a copy of the attributes with beta=1 */
        kn_attr *attrs = kn_arena_memdup(&g->model->arena, p->attrs, sizeof *attrs * (size_t)p->n_attrs);
        if (!attrs) return kn_error(KN_ERR_NOMEM, "out of memory");
        for (int i = 0; i < p->n_attrs; i++)
            if (!strcmp(attrs[i].name, "beta")) attrs[i].f = 1.0f;
        n->attrs = attrs;
    }
    *out = n->outputs[0];
    return KN_OK;
}

static int fold_matmul(kn_graph *g, kn_node *p, const char *bn_name, const bn_params *bp, kn_value **out)
{
    kn_value *w = scaled_weights(g, p->inputs[1], W_COLS, 1, bp);
    kn_value *b = w ? new_bias(g, w->dtype, NULL, 0.0, bp) : NULL;
    kn_value *in[2] = {p->inputs[0], w};
    kn_node *mm = b ? clone_with(g, p, 2, in) : NULL;
    kn_value *sum_in[2] = {mm ? mm->outputs[0] : NULL, b};
    kn_node *add = mm ? kn_node_create(g, KN_OP_Add, bn_name, 2, sum_in, 1) : NULL;
    *out = add ? add->outputs[0] : NULL;
    return *out ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
}

/* Shape conditions; the channel count in *out_channels. */
static const char *shape_problem(const kn_node *p, const kn_node *bn, int64_t *out_channels)
{
    const kn_shape *s = &bn->inputs[0]->shape;
    const kn_tensor *w = p->inputs[1]->const_data;
    *out_channels = s->rank >= 2 ? s->dims[1] : -1;
    if (*out_channels < 1) return "the channel count is not static";
    int64_t m = *out_channels;
    if (p->op == KN_OP_Conv || p->op == KN_OP_ConvTranspose) {
        if (w->rank < 3) return "its weight rank is below 3";
        int64_t wm = p->op == KN_OP_Conv ? w->dims[0] : kn_attr_int(p, "group", 1) * w->dims[1];
        return wm == m ? NULL : "its weight's output channels differ from the BatchNormalization's";
    }
    if (s->rank != 2) return "the channel axis of the BatchNormalization is not the product's last axis";
    if (w->rank != 2) return "its weight is not 2-D";
    bool tb = p->op == KN_OP_Gemm && kn_attr_int(p, "transB", 0) != 0;
    if (w->dims[tb ? 0 : 1] != m) return "its weight's columns differ from the BatchNormalization's channels";
    const kn_value *c = p->op == KN_OP_Gemm ? kn_node_input(p, 2) : NULL;
    if (c) {
        const kn_tensor *ct = c->const_data;
        bool per_column = ct->rank >= 1 && ct->dims[ct->rank - 1] == m && kn_tensor_numel(ct) == m;
        if (kn_tensor_numel(ct) != 1 && !per_column) return "its bias C is not one value per column";
    }
    return NULL;
}

static int try_fold(kn_pass_ctx *ctx, kn_graph *g, kn_node *bn, bool *done)
{
    *done = false;
    kn_value *y = bn->inputs[0];
    kn_node *p = y ? y->producer : NULL;
    if (!p || (p->op != KN_OP_Conv && p->op != KN_OP_ConvTranspose && p->op != KN_OP_Gemm && p->op != KN_OP_MatMul))
        return KN_OK;
    const char *why = NULL;
    int64_t channels = 0;
    bn_params bp = {0};
    if (kn_attr_int(bn, "training_mode", 0) != 0) why = "it is in training mode";
    for (int k = 1; !why && k < bn->n_outputs; k++)
        if (bn->outputs[k] && (bn->outputs[k]->n_users || (bn->outputs[k]->flags & KN_VALUE_GRAPH_OUTPUT)))
            why = "its training outputs are used";
    if (!why && y->n_users > 1) {
        kn_pass_remark(ctx, "BatchNormalization '%s' into %s '%s': %s output has %d users", bn->name, p->op_type,
                       p->name, p->op_type, y->n_users);
        return KN_OK;
    }
    if (!why) why = producer_problem(p, bn);
    if (!why) why = shape_problem(p, bn, &channels);
    if (!why) read_bn(bn, channels, &bp, &why);
    int st = KN_OK;
    if (why) {
        kn_pass_remark(ctx, "BatchNormalization '%s' into %s '%s': %s", bn->name, p->op_type, p->name, why);
    } else {
        kn_value *out = NULL;
        st = p->op == KN_OP_MatMul ? fold_matmul(g, p, bn->name, &bp, &out)
             : p->op == KN_OP_Gemm ? fold_gemm(g, p, &bp, &out)
                                   : fold_conv(g, p, &bp, &out);
        if (!st) {
            out->dtype = bn->outputs[0]->dtype;
            out->shape = bn->outputs[0]->shape;
            *done = kn_pm_replace(bn->outputs[0], out);
        }
    }
    free(bp.a);
    free(bp.b);
    return st;
}

int kn_pass_fold_batchnorm(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    int n0 = g->n_nodes;
    for (int i = 0; i < n0; i++) {
        if (g->nodes[i]->op != KN_OP_BatchNormalization) continue;
        bool done;
        int st = try_fold(ctx, g, g->nodes[i], &done);
        if (st) {
            kn_error_prefix("node '%s': ", g->nodes[i]->name);
            return st;
        }
        if (!done) continue;
        ctx->rewrites++;
        *out_changed = true;
    }
    return *out_changed || g->n_nodes != n0 ? kn_pass_finish(g) : KN_OK;
}
