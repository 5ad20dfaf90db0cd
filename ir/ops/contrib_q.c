/*
 * Op definitions of the com.microsoft quantization ops (see ir/ops.h):
 * QLinearAdd, QLinearMul, QLinearConcat, QLinearGlobalAveragePool,
 * QLinearSigmoid, QLinearLeakyRelu, QGemm, MatMulIntegerToFloat,
 * DynamicQuantizeMatMul, DynamicQuantizeLSTM.
 *
 * Type/shape inference only: execution lives in runtime/ops/contrib_q.c.
 * Shapes whose inputs are not fully known keep -1 dims (symbolic names are
 * not carried through these ops: onnxruntime's quantized models have
 * static shapes).
 */
#include <stdio.h>
#include <string.h>

#include "../eval.h"
#include "k_linalg.h"

static int require(const kn_node *n, int i)
{
    if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
    return KN_OK;
}

static int require_all(const kn_node *n, const int *idx)
{
    for (int k = 0; idx[k] >= 0; k++) {
        int st = require(n, idx[k]);
        if (st) return st;
    }
    return KN_OK;
}

static bool q8(kn_dtype dt) { return dt == KN_U8 || dt == KN_I8; }

/* Input i must be u8 or s8 (unknown passes). */
static int check_q8(const kn_node *n, int i)
{
    const kn_value *v = kn_node_input(n, i);
    if (!v || v->dtype == KN_DT_UNDEFINED || q8(v->dtype)) return KN_OK;
    return kn_node_error(n, KN_ERR_INVALID, "input %d has dtype %s; expected u8 or s8", i, kn_dtype_name(v->dtype));
}

static void set_unknown(kn_node *n, int i, kn_dtype dt)
{
    kn_shape u = kn_shape_unknown();
    kn_infer_set_shape(n, i, dt, &u);
}

/* ---- QLinearAdd, QLinearMul: numpy broadcasting of A (0) and B (3) ------------------- */

static int infer_qlinear_binary(kn_node *n)
{
    static const int req[] = {0, 1, 3, 4, 6, -1};
    int st = require_all(n, req);
    if (!st) st = check_q8(n, 0);
    if (!st) st = check_q8(n, 3);
    if (st) return st;
    const kn_shape *a = &n->inputs[0]->shape, *b = &n->inputs[3]->shape;
    kn_dtype dt = n->inputs[0]->dtype;
    if (a->rank < 0 || b->rank < 0) {
        set_unknown(n, 0, dt);
        return KN_OK;
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    int64_t dims[KN_MAX_RANK];
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia < 0 ? 1 : a->dims[ia], db = ib < 0 ? 1 : b->dims[ib];
        if (da >= 0 && db >= 0 && da != db && da != 1 && db != 1)
            return kn_node_error(n, KN_ERR_INVALID, "A and B cannot be broadcast: dim %lld against %lld",
                                 (long long)da, (long long)db);
        dims[i] = da == 1 ? db : db == 1 ? da : da >= 0 ? da : db;
    }
    kn_infer_set(n, 0, dt, r, dims);
    /* a dim that is the same symbol in A (or B alone) keeps it */
    kn_value *y = n->outputs[0];
    if (y)
        for (int i = 0; i < r; i++) {
            int ia = i - (r - a->rank), ib = i - (r - b->rank);
            const char *sa = ia < 0 ? NULL : a->sym[ia], *sb = ib < 0 ? NULL : b->sym[ib];
            if (dims[i] < 0) y->shape.sym[i] = sa && (!sb || !strcmp(sa, sb)) ? sa : !sa && ia < 0 ? sb : NULL;
        }
    return KN_OK;
}

/* ---- QLinearConcat ------------------------------------------------------------------ */

static int infer_qlinear_concat(kn_node *n)
{
    if (n->n_inputs < 5 || (n->n_inputs - 2) % 3)
        return kn_node_error(n, KN_ERR_INVALID, "%d inputs; expected Y_scale, Y_zero_point and triples "
                             "(X, X_scale, X_zero_point)", n->n_inputs);
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_q8(n, 1);
    if (st) return st;
    kn_dtype dt = n->inputs[1]->dtype;
    const kn_shape *s0 = NULL;
    for (int i = 2; i < n->n_inputs; i += 3) {
        if ((st = require(n, i)) || (st = require(n, i + 1))) return st;
        if (n->inputs[i]->shape.rank >= 0 && !s0) s0 = &n->inputs[i]->shape;
    }
    if (!s0) {
        set_unknown(n, 0, dt);
        return KN_OK;
    }
    int r = s0->rank;
    int64_t axis = kn_attr_int(n, "axis", 0);
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r)
        return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                             (long long)kn_attr_int(n, "axis", 0), r);
    kn_shape o = *s0;
    o.dims[axis] = 0;
    o.sym[axis] = NULL;
    for (int i = 2; i < n->n_inputs; i += 3) {
        const kn_shape *s = &n->inputs[i]->shape;
        if (s->rank >= 0 && s->rank != r)
            return kn_node_error(n, KN_ERR_INVALID, "input %d has rank %d, not %d", i, s->rank, r);
        if (s->rank < 0 || s->dims[axis] < 0 || o.dims[axis] < 0) o.dims[axis] = -1;
        else o.dims[axis] += s->dims[axis];
    }
    kn_infer_set_shape(n, 0, dt, &o);
    return KN_OK;
}

/* ---- QLinearGlobalAveragePool, QLinearSigmoid, QLinearLeakyRelu --------------------- */

static int infer_qlinear_gap(kn_node *n)
{
    static const int req[] = {0, 1, 3, -1};
    int st = require_all(n, req);
    if (!st) st = check_q8(n, 0);
    if (st) return st;
    kn_shape s = n->inputs[0]->shape;
    if (s.rank >= 0) {
        if (s.rank < 3) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d; expected 3 or more", s.rank);
        int cax = kn_attr_int(n, "channels_last", 0) ? s.rank - 1 : 1;
        for (int i = 1; i < s.rank; i++)
            if (i != cax) s.dims[i] = 1, s.sym[i] = NULL;
    }
    kn_infer_set_shape(n, 0, n->inputs[0]->dtype, &s);
    return KN_OK;
}

static int infer_qlinear_unary(kn_node *n)
{
    static const int req[] = {0, 1, 3, -1};
    int st = require_all(n, req);
    if (!st) st = check_q8(n, 0);
    return st ? st : kn_infer_same_as_input(n, 0);
}

/* ---- QGemm ------------------------------------------------------------------------- */

static int infer_qgemm(kn_node *n)
{
    static const int req[] = {0, 1, 3, 4, -1};
    int st = require_all(n, req);
    if (!st) st = check_q8(n, 0);
    if (!st) st = check_q8(n, 3);
    if (st) return st;
    const kn_value *a = n->inputs[0], *b = n->inputs[3], *ys = kn_node_input(n, 7), *yz = kn_node_input(n, 8);
    kn_dtype dt = ys ? (yz ? yz->dtype : a->dtype) : KN_F32;
    if ((a->shape.rank >= 0 && a->shape.rank != 2) || (b->shape.rank >= 0 && b->shape.rank != 2))
        return kn_node_error(n, KN_ERR_INVALID, "A and B must be 2-D (ranks %d and %d)", a->shape.rank, b->shape.rank);
    bool ta = kn_attr_int(n, "transA", 0) != 0, tb = kn_attr_int(n, "transB", 0) != 0;
    int64_t dims[2] = {a->shape.rank == 2 ? a->shape.dims[ta] : -1, b->shape.rank == 2 ? b->shape.dims[!tb] : -1};
    kn_infer_set(n, 0, dt, 2, dims);
    if (a->shape.rank == 2 && n->outputs[0]) n->outputs[0]->shape.sym[0] = a->shape.sym[ta];
    return KN_OK;
}

/* ---- MatMulIntegerToFloat, DynamicQuantizeMatMul ------------------------------------ */

static int infer_int_matmul(kn_node *n, int ia, int ib)
{
    const kn_value *a = n->inputs[ia], *b = n->inputs[ib];
    if (a->shape.rank < 0 || b->shape.rank < 0) {
        set_unknown(n, 0, KN_F32);
        return KN_OK;
    }
    int r;
    int64_t dims[KN_MAX_RANK];
    int st = kn_k_matmul_shape(a->shape.rank, a->shape.dims, b->shape.rank, b->shape.dims, &r, dims);
    if (st) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_node_error(n, st, "%s", msg);
    }
    kn_infer_set(n, 0, KN_F32, r, dims);
    /* A's leading (batch and row) dims keep their symbols */
    if (n->outputs[0] && b->shape.rank <= 2 && a->shape.rank == r)
        for (int i = 0; i < r - 1; i++) n->outputs[0]->shape.sym[i] = a->shape.sym[i];
    return KN_OK;
}

static int infer_matmul_integer_to_float(kn_node *n)
{
    static const int req[] = {0, 1, 2, 3, -1};
    int st = require_all(n, req);
    if (!st) st = check_q8(n, 0);
    if (!st) st = check_q8(n, 1);
    return st ? st : infer_int_matmul(n, 0, 1);
}

static int infer_dynamic_quantize_matmul(kn_node *n)
{
    static const int req[] = {0, 1, 2, -1};
    int st = require_all(n, req);
    if (!st) st = check_q8(n, 1);
    if (st) return st;
    const kn_value *a = n->inputs[0];
    if (a->dtype != KN_DT_UNDEFINED && a->dtype != KN_F32)
        return kn_node_error(n, KN_ERR_INVALID, "A has dtype %s; expected f32", kn_dtype_name(a->dtype));
    return infer_int_matmul(n, 0, 1);
}

/* ---- DynamicQuantizeLSTM ------------------------------------------------------------ */

static int infer_dynamic_quantize_lstm(kn_node *n)
{
    static const int req[] = {0, 1, 2, 8, 10, -1};
    int st = require_all(n, req);
    if (!st) st = check_q8(n, 1);
    if (!st) st = check_q8(n, 2);
    if (st) return st;
    const kn_shape *x = &n->inputs[0]->shape, *r = &n->inputs[2]->shape;
    int64_t H = kn_attr_int(n, "hidden_size", 0);
    if (H <= 0 && r->rank == 3) H = r->dims[1];
    const char *dir = kn_attr_string(n, "direction", "forward");
    int64_t dirs = dir && !strcmp(dir, "bidirectional") ? 2 : 1;
    int64_t S = x->rank == 3 ? x->dims[0] : -1, B = x->rank == 3 ? x->dims[1] : -1;
    int64_t yd[4] = {S, dirs, B, H > 0 ? H : -1}, hd[3] = {dirs, B, H > 0 ? H : -1};
    kn_infer_set(n, 0, KN_F32, 4, yd);
    kn_infer_set(n, 1, KN_F32, 3, hd);
    kn_infer_set(n, 2, KN_F32, 3, hd);
    if (x->rank == 3) {
        if (n->n_outputs > 0 && n->outputs[0]) n->outputs[0]->shape.sym[0] = x->sym[0], n->outputs[0]->shape.sym[2] = x->sym[1];
        for (int i = 1; i < 3 && i < n->n_outputs; i++)
            if (n->outputs[i]) n->outputs[i]->shape.sym[1] = x->sym[1];
    }
    return KN_OK;
}

const kn_op_impl kn_ops_contrib_q[] = {
    {KN_OP_QLinearAdd, infer_qlinear_binary},
    {KN_OP_QLinearMul, infer_qlinear_binary},
    {KN_OP_QLinearConcat, infer_qlinear_concat},
    {KN_OP_QLinearGlobalAveragePool, infer_qlinear_gap},
    {KN_OP_QLinearSigmoid, infer_qlinear_unary},
    {KN_OP_QLinearLeakyRelu, infer_qlinear_unary},
    {KN_OP_QGemm, infer_qgemm},
    {KN_OP_MatMulIntegerToFloat, infer_matmul_integer_to_float},
    {KN_OP_DynamicQuantizeMatMul, infer_dynamic_quantize_matmul},
    {KN_OP_DynamicQuantizeLSTM, infer_dynamic_quantize_lstm},
    {KN_OP_UNKNOWN, NULL},
};
