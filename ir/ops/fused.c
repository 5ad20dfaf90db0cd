/*
 * Type/shape inference of kiln's fused ops (domain "kiln"; see
 * runtime/ops/fused_int.h for what they compute): FusedConv, FusedConvTranspose
 * and FusedMatMul.
 * Execution lives in runtime/ops/fused.c.
 *
 * The output is shaped like the unfused Conv or MatMul/Gemm; the post_ops
 * list is checked here so that a malformed node fails at inference, naming
 * the node, rather than at run time.
 */
#include <string.h>

#include "../eval.h"
#include "fused_int.h"
#include "fused_q.h"
#include "k_linalg.h"
#include "nn_int.h"

/* Checks the post_ops list and the residual input against output 0, which
 * inference has just set; the residual's dtype too when same_dtype (the
 * integer ops have their own rule). */
static int check_posts(kn_node *n, bool same_dtype)
{
    kn_opdesc d;
    bool has[1];
    kn_node_opdesc(n, &d, has);
    kn_abi_post post[KN_FUSED_MAX_POST];
    int np, st = kn_fused_posts(&d, post, &np);
    if (st) return st;
    const kn_value *r = kn_node_input(n, KN_FUSED_RESIDUAL), *y = n->outputs[0];
    bool sum = kn_fused_has_sum(post, np);
    if (sum != (r != NULL))
        return kn_node_error(n, KN_ERR_INVALID, sum ? "post_ops adds a residual but input R is missing"
                                                    : "input R is given but post_ops has no 'Add'");
    if (r && y && r->shape.rank >= 0 && y->shape.rank >= 0 && !kn_shape_same(&r->shape, &y->shape))
        return kn_node_error(n, KN_ERR_INVALID, "residual R must have the output's shape");
    if (same_dtype && r && y && r->dtype != KN_DT_UNDEFINED && r->dtype != y->dtype)
        return kn_node_error(n, KN_ERR_INVALID, "residual R has dtype %s, the output %s", kn_dtype_name(r->dtype),
                             kn_dtype_name(y->dtype));
    return KN_OK;
}

typedef int (*conv_geometry_fn)(const kn_opdesc *, int, const int64_t *, const int64_t *, kn_nn_window *,
                                int64_t *, int64_t *);

/* The output shape of a convolution (kn_nn_conv_geometry) or a transposed
 * one (kn_nn_convt_geometry: pads, output_padding, output_shape and
 * auto_pad as the unfused op has them) of x by w, from the node's
 * attributes; unknown while x's rank is. */
static int conv_out_shape(kn_node *n, const kn_value *x, const kn_value *w, conv_geometry_fn geometry, kn_shape *s)
{
    *s = kn_shape_unknown();
    if (x->shape.rank < 0) return KN_OK;
    if (w->shape.rank >= 0 && w->shape.rank != x->shape.rank)
        return kn_node_error(n, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", w->shape.rank,
                             x->shape.rank);
    kn_opdesc d;
    bool has[1];
    kn_node_opdesc(n, &d, has);
    kn_nn_window win;
    int64_t group, od[KN_MAX_RANK];
    int st = geometry(&d, x->shape.rank, x->shape.dims, w->shape.rank >= 0 ? w->shape.dims : NULL, &win, &group, od);
    if (st) return st;
    s->rank = x->shape.rank;
    for (int i = 0; i < s->rank; i++) s->dims[i] = od[i] < 0 ? -1 : od[i];
    if (s->dims[0] < 0) s->sym[0] = x->shape.sym[0]; /* the batch dim keeps its name */
    return KN_OK;
}

/* A fused (de)convolution: its output shape, then the post_ops. */
static int infer_conv_like(kn_node *n, conv_geometry_fn geometry)
{
    const kn_value *x = kn_node_input(n, 0), *w = kn_node_input(n, 1);
    if (!x || !w) return kn_node_error(n, KN_ERR_INVALID, "input X or W is missing");
    kn_shape s;
    int st = conv_out_shape(n, x, w, geometry, &s);
    if (st) return st;
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return check_posts(n, true);
}

static int infer_fused_conv(kn_node *n) { return infer_conv_like(n, kn_nn_conv_geometry); }

static int infer_fused_convt(kn_node *n) { return infer_conv_like(n, kn_nn_convt_geometry); }

/* The matmul's output dims with symbolic names: batch dims and M from A
 * where A has them, N from B. */
static void matmul_syms(const kn_value *a, const kn_value *b, kn_shape *s)
{
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] >= 0) continue;
        const kn_value *src = i == s->rank - 1 ? b : a;
        int k = i - (s->rank - src->shape.rank);
        if (k >= 0 && k < src->shape.rank) s->sym[i] = src->shape.sym[k];
    }
}

static int infer_fused_matmul(kn_node *n)
{
    const kn_value *a = kn_node_input(n, 0), *b = kn_node_input(n, 1);
    if (!a || !b) return kn_node_error(n, KN_ERR_INVALID, "input A or B is missing");
    if (a->dtype != b->dtype)
        return kn_node_error(n, KN_ERR_INVALID, "A and B have dtypes %s and %s", kn_dtype_name(a->dtype),
                             kn_dtype_name(b->dtype));
    bool ta = kn_attr_int(n, "transA", 0) != 0, tb = kn_attr_int(n, "transB", 0) != 0;
    bool gemm = ta || tb || kn_attr_float(n, "alpha", 1.0f) != 1.0f;
    kn_shape s = kn_shape_unknown();
    if (a->shape.rank >= 0 && b->shape.rank >= 0) {
        if (gemm) {
            if (a->shape.rank != 2 || b->shape.rank != 2)
                return kn_node_error(n, KN_ERR_INVALID, "transA/transB/alpha need 2-D A and B (got ranks %d and %d)",
                                     a->shape.rank, b->shape.rank);
            s.rank = 2;
            s.dims[0] = a->shape.dims[ta ? 1 : 0], s.sym[0] = a->shape.sym[ta ? 1 : 0];
            s.dims[1] = b->shape.dims[tb ? 0 : 1], s.sym[1] = b->shape.sym[tb ? 0 : 1];
        } else {
            int st = kn_k_matmul_shape(a->shape.rank, a->shape.dims, b->shape.rank, b->shape.dims, &s.rank, s.dims);
            if (st) return kn_node_error(n, st, "%s", kn_last_error());
            matmul_syms(a, b, &s);
        }
    }
    const kn_value *c = kn_node_input(n, 2);
    int64_t N = s.rank > 0 ? s.dims[s.rank - 1] : -1;
    if (c && c->shape.rank >= 0) {
        bool row = (c->shape.rank == 1 || (c->shape.rank == 2 && c->shape.dims[0] == 1)) &&
                   (N < 0 || c->shape.dims[c->shape.rank - 1] < 0 || c->shape.dims[c->shape.rank - 1] == N);
        if (!row) return kn_node_error(n, KN_ERR_INVALID, "C must be [N] or [1, N] (one value per column)");
    }
    kn_infer_set_shape(n, 0, a->dtype, &s);
    return check_posts(n, true);
}

/* QConv / QMatMul (fused_q.h): output dtype from y_dtype; the residual is
 * 8-bit with the output's shape. */
static int infer_q_common(kn_node *n, const kn_shape *s)
{
    const kn_value *x = kn_node_input(n, KN_Q_X), *w = kn_node_input(n, KN_Q_W), *sc = kn_node_input(n, KN_Q_S);
    if (!sc) return kn_node_error(n, KN_ERR_INVALID, "input S (the output scales) is missing");
    bool dyn = x->dtype == KN_F32 && n->op == KN_OP_QMatMul; /* quantized at run time */
    if (x->dtype != KN_DT_UNDEFINED && x->dtype != KN_U8 && x->dtype != KN_I8 && !dyn)
        return kn_node_error(n, KN_ERR_INVALID, "X has dtype %s, expected u8 or s8%s", kn_dtype_name(x->dtype),
                             n->op == KN_OP_QMatMul ? " (or f32: the dynamic form)" : "");
    if (w->dtype != KN_DT_UNDEFINED && w->dtype != KN_I8)
        return kn_node_error(n, KN_ERR_INVALID, "W has dtype %s, expected s8", kn_dtype_name(w->dtype));
    int64_t elem = kn_attr_int(n, "y_dtype", 1);
    kn_dtype dt = kn_q_out_dtype(elem);
    if (dt == KN_DT_UNDEFINED || (dyn && dt != KN_F32))
        return kn_node_error(n, KN_ERR_INVALID, "y_dtype %lld: expected %s", (long long)elem,
                             dyn ? "1 (f32) for the dynamic form" : "1 (f32), 2 (u8) or 3 (s8)");
    if (x->dtype != KN_DT_UNDEFINED) {
        const char *bad = kn_q_check_zero_points(x->dtype, kn_attr_int(n, "x_zero_point", 0), dt,
                                                 kn_attr_int(n, "y_zero_point", 0));
        if (bad) return kn_node_error(n, KN_ERR_INVALID, "%s", bad);
    }
    kn_infer_set_shape(n, 0, dt, s);
    int st = check_posts(n, false);
    if (st) return st;
    const kn_value *r = kn_node_input(n, KN_Q_R);
    if (r && r->dtype != KN_DT_UNDEFINED && (dyn ? r->dtype != KN_F32 : r->dtype != KN_U8 && r->dtype != KN_I8))
        return kn_node_error(n, KN_ERR_INVALID, "residual R has dtype %s, expected %s", kn_dtype_name(r->dtype),
                             dyn ? "f32" : "u8 or s8");
    return KN_OK;
}

static int infer_qconv(kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *w = kn_node_input(n, 1);
    if (!x || !w) return kn_node_error(n, KN_ERR_INVALID, "input X or W is missing");
    kn_shape s;
    int st = conv_out_shape(n, x, w, kn_nn_conv_geometry, &s);
    return st ? st : infer_q_common(n, &s);
}

static int infer_qmatmul(kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *w = kn_node_input(n, 1);
    if (!x || !w) return kn_node_error(n, KN_ERR_INVALID, "input X or W is missing");
    if (w->shape.rank >= 0 && w->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "W has rank %d, expected 2 ([K, N])", w->shape.rank);
    kn_shape s = kn_shape_unknown();
    if (x->shape.rank >= 0 && w->shape.rank >= 0) {
        int st = kn_k_matmul_shape(x->shape.rank, x->shape.dims, w->shape.rank, w->shape.dims, &s.rank, s.dims);
        if (st) return kn_node_error(n, st, "%s", kn_last_error());
        matmul_syms(x, w, &s);
    }
    return infer_q_common(n, &s);
}

/* ---- token packing (passes/pack_tokens.c) ---------------------------------------- */

/* The mask [B, S] of the packed ops. */
static int check_pack_mask(kn_node *n, const kn_value *m)
{
    if (!m) return kn_node_error(n, KN_ERR_INVALID, "input mask is missing");
    if (m->shape.rank >= 0 && m->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "mask has rank %d, expected 2 (batch x sequence)", m->shape.rank);
    return KN_OK;
}

/* PackRows(X [B, S, ...], mask) -> [1, B*S, ...]: dim 1 is the most tokens
 * the run may have (rounded up to KN_TOKEN_ROWS_ALIGN, ir.h); the run's
 * count is the mask's (a dim set by the data, codegen/cpu/dyn.c). */
static int infer_pack_rows(kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *m = kn_node_input(n, 1);
    int st = check_pack_mask(n, m);
    if (st) return st;
    if (!x) return kn_node_error(n, KN_ERR_INVALID, "input X is missing");
    kn_shape s = x->shape;
    if (s.rank >= 0 && s.rank < 2) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected >= 2", s.rank);
    for (int i = 0; i < 2 && s.rank >= 2 && m->shape.rank == 2; i++)
        if (s.dims[i] >= 0 && m->shape.dims[i] >= 0 && s.dims[i] != m->shape.dims[i])
            return kn_node_error(n, KN_ERR_INVALID, "mask dim %d is %lld, X's %lld (the mask is batch x sequence)", i,
                                 (long long)m->shape.dims[i], (long long)s.dims[i]);
    if (s.rank >= 2) {
        bool known = s.dims[0] >= 0 && s.dims[1] >= 0;
        int64_t t = s.dims[0] * s.dims[1];
        s.dims[1] = known ? (t + KN_TOKEN_ROWS_ALIGN - 1) / KN_TOKEN_ROWS_ALIGN * KN_TOKEN_ROWS_ALIGN : -1;
        s.dims[0] = 1, s.sym[0] = s.sym[1] = NULL;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

/* UnpackRows(Y [1, T, ...], mask [B, S]) -> [B, S, ...]. */
static int infer_unpack_rows(kn_node *n)
{
    const kn_value *y = kn_node_input(n, 0), *m = kn_node_input(n, 1);
    int st = check_pack_mask(n, m);
    if (st) return st;
    if (!y) return kn_node_error(n, KN_ERR_INVALID, "input Y is missing");
    kn_shape s = y->shape;
    if (s.rank >= 0 && s.rank < 2) return kn_node_error(n, KN_ERR_INVALID, "Y has rank %d, expected >= 2", s.rank);
    if (s.rank >= 2) {
        for (int i = 0; i < 2; i++) {
            s.dims[i] = m->shape.rank == 2 ? m->shape.dims[i] : -1;
            s.sym[i] = m->shape.rank == 2 ? m->shape.sym[i] : NULL;
        }
    }
    kn_infer_set_shape(n, 0, y->dtype, &s);
    return KN_OK;
}

/* PackedAttention(Q [1, T, Hq*D], K, V [1, T, Hkv*Dv], mask) -> [1, T, Hq*Dv]. */
static int infer_packed_attention(kn_node *n)
{
    const kn_value *q = kn_node_input(n, 0), *k = kn_node_input(n, 1), *v = kn_node_input(n, 2);
    int st = check_pack_mask(n, kn_node_input(n, 3));
    if (st) return st;
    if (!q || !k || !v) return kn_node_error(n, KN_ERR_INVALID, "input Q, K or V is missing");
    int64_t hq = kn_attr_int(n, "q_num_heads", 0), hkv = kn_attr_int(n, "kv_num_heads", 0);
    if (hq <= 0 || hkv <= 0 || hq % hkv)
        return kn_node_error(n, KN_ERR_INVALID, "q_num_heads %lld / kv_num_heads %lld: expected positive, the first a "
                             "multiple of the second", (long long)hq, (long long)hkv);
    if (q->shape.rank >= 0 && v->shape.rank >= 0) {
        if (q->shape.rank != 3 || v->shape.rank != 3 || k->shape.rank != 3)
            return kn_node_error(n, KN_ERR_INVALID, "Q, K and V must be packed [1, T, width]");
        kn_shape s = q->shape;
        s.dims[2] = v->shape.dims[2] >= 0 ? v->shape.dims[2] / hkv * hq : -1, s.sym[2] = NULL;
        kn_infer_set_shape(n, 0, q->dtype, &s);
    } else {
        kn_shape s = kn_shape_unknown();
        kn_infer_set_shape(n, 0, q->dtype, &s);
    }
    return KN_OK;
}

const kn_op_impl kn_ops_fused[] = {
    {KN_OP_QConv, infer_qconv},
    {KN_OP_QMatMul, infer_qmatmul},
    {KN_OP_FusedConv, infer_fused_conv},
    {KN_OP_FusedConvTranspose, infer_fused_convt},
    {KN_OP_FusedMatMul, infer_fused_matmul},
    {KN_OP_PackRows, infer_pack_rows},
    {KN_OP_UnpackRows, infer_unpack_rows},
    {KN_OP_PackedAttention, infer_packed_attention},
    {KN_OP_UNKNOWN, NULL},
};
