/*
 * Type and shape inference of the 'elementwise' family (see ir/ops.h):
 * binary and variadic arithmetic, logic and comparisons (numpy
 * broadcasting), unary math and activations, Clip, Where, Cast and CastLike.
 *
 * Execution lives in runtime/ops/elementwise.c (kn_exec_elementwise). The op
 * tables, dtype classes and attribute decoding are the runtime's too
 * (elementwise_int.h), called here with the node's descriptor, so inference
 * and execution cannot disagree on them.
 */
#include <string.h>

#include "../eval.h"
#include "elementwise_int.h"
#include "fused_int.h"

/* Every op of this family has one output. */
#define EW_MAX_OUTPUTS 1

/* Fills *d with n's descriptor for the runtime helpers; has needs room for
 * EW_MAX_OUTPUTS entries. */
static int node_desc(const kn_node *n, kn_opdesc *d, bool *has)
{
    if (n->n_outputs > EW_MAX_OUTPUTS)
        return kn_node_error(n, KN_ERR_INVALID, "has %d outputs, at most %d allowed", n->n_outputs, EW_MAX_OUTPUTS);
    kn_node_opdesc(n, d, has);
    return KN_OK;
}

/* Checks that inputs [first, first+count) that are present share a dtype of
 * class ty; returns it in *out_dt (UNDEFINED if none is known yet). */
static int common_dtype(const kn_node *n, const kn_opdesc *d, int first, int count, kn_ew_ty ty, kn_dtype *out_dt)
{
    *out_dt = KN_DT_UNDEFINED;
    int from = -1;
    for (int i = first; i < first + count; i++) {
        kn_value *v = kn_node_input(n, i);
        if (!v || v->dtype == KN_DT_UNDEFINED) continue;
        int st = kn_ew_check_ty(d, i, v->dtype, ty);
        if (st) return st;
        if (*out_dt == KN_DT_UNDEFINED) {
            *out_dt = v->dtype;
            from = i;
        } else if (v->dtype != *out_dt) {
            return kn_node_error(n, KN_ERR_INVALID, "input %d has dtype %s but input %d has %s", i,
                                 kn_dtype_name(v->dtype), from, kn_dtype_name(*out_dt));
        }
    }
    return KN_OK;
}

static int require_inputs(const kn_node *n, int first, int count)
{
    for (int i = first; i < first + count; i++)
        if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
    return KN_OK;
}

/* ---- broadcast shape inference ------------------------------------------------ */

/* Merges shape b into a (numpy broadcasting), keeping symbolic dims where
 * they survive. A static dim > 1 against an unknown one wins: a valid model
 * can only have 1 or the same size there. */
static int merge_shape(const kn_node *n, kn_shape *a, const kn_shape *b)
{
    if (a->rank < 0 || b->rank < 0) {
        *a = kn_shape_unknown();
        return KN_OK;
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    kn_shape o;
    memset(&o, 0, sizeof o);
    o.rank = r;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia < 0 ? 1 : a->dims[ia], db = ib < 0 ? 1 : b->dims[ib];
        const char *sa = ia < 0 ? NULL : a->sym[ia], *sb = ib < 0 ? NULL : b->sym[ib];
        if (da >= 0 && db >= 0) {
            if (da != db && da != 1 && db != 1)
                return kn_node_error(n, KN_ERR_INVALID, "input shapes cannot be broadcast: dim %lld against %lld",
                                     (long long)da, (long long)db);
            o.dims[i] = da == 1 ? db : da;
        } else if (da >= 0) {
            o.dims[i] = da == 1 ? db : da;
            o.sym[i] = da == 1 ? sb : NULL;
        } else if (db >= 0) {
            o.dims[i] = db == 1 ? da : db;
            o.sym[i] = db == 1 ? sa : NULL;
        } else {
            o.dims[i] = -1;
            o.sym[i] = sa && sb && strcmp(sa, sb) == 0 ? sa : NULL;
        }
    }
    *a = o;
    return KN_OK;
}

/* Output 0 gets dtype dt and the broadcast shape of the present inputs in
 * [first, first+count). */
static int infer_bcast(kn_node *n, int first, int count, kn_dtype dt)
{
    kn_shape s;
    memset(&s, 0, sizeof s);
    for (int i = first; i < first + count; i++) {
        kn_value *v = kn_node_input(n, i);
        if (!v) continue;
        int st = merge_shape(n, &s, &v->shape);
        if (st) return st;
    }
    kn_infer_set_shape(n, 0, dt, &s);
    return KN_OK;
}

/* ---- binary ops ------------------------------------------------------------------ */

/* Before opset 7, B may broadcast aligned at an axis (kn_ew_legacy_bcast);
 * sets output 0 and *done when that rule applies. */
static int infer_legacy_bcast(kn_node *n, const kn_opdesc *d, kn_dtype dt, bool *done)
{
    *done = false;
    const kn_shape *sa = &n->inputs[0]->shape, *sb = &n->inputs[1]->shape;
    if (sa->rank < 0 || sb->rank < 0 || d->opset >= 7) return KN_OK;
    kn_shape b = *sb;
    int st;
    if (!kn_ew_legacy_bcast(d, sa->rank, sb->rank, sb->dims, &b.rank, b.dims, &st)) return st;
    for (int i = sb->rank; i < b.rank; i++) b.sym[i] = NULL;
    kn_shape o = *sa;
    st = merge_shape(n, &o, &b);
    if (!st) kn_infer_set_shape(n, 0, dt, &o);
    *done = true;
    return st;
}

static int infer_binary(kn_node *n)
{
    kn_opdesc d;
    bool has[EW_MAX_OUTPUTS];
    int st = node_desc(n, &d, has);
    if (st) return st;
    const kn_ew_bin *b = kn_ew_bin_find(n->op);
    if (!b) return kn_node_error(n, KN_ERR_INTERNAL, "not a binary op");
    kn_binary_op k;
    st = require_inputs(n, 0, 2);
    if (!st) st = kn_ew_bin_kop(&d, b, &k);
    if (st) return st;
    kn_dtype dt;
    if (n->op == KN_OP_Pow) {
        /* the exponent may have its own type; the result has the base's */
        dt = n->inputs[0]->dtype;
        st = kn_ew_check_ty(&d, 0, dt, KN_EW_NUM);
        if (!st) st = kn_ew_check_ty(&d, 1, n->inputs[1]->dtype, KN_EW_NUM);
    } else {
        st = common_dtype(n, &d, 0, 2, b->ty, &dt);
    }
    if (st) return st;
    dt = dt == KN_DT_UNDEFINED ? dt : kn_k_binary_out_dtype(k, dt);
    bool done;
    st = infer_legacy_bcast(n, &d, dt, &done);
    if (st || done) return st;
    return infer_bcast(n, 0, 2, dt);
}

/* ---- variadic ops (Sum, Mean, Max, Min) ---------------------------------------------- */

static int infer_variadic(kn_node *n)
{
    kn_opdesc d;
    bool has[EW_MAX_OUTPUTS];
    int st = node_desc(n, &d, has);
    if (st) return st;
    const kn_ew_bin *b = kn_ew_bin_find(n->op);
    if (!b) return kn_node_error(n, KN_ERR_INTERNAL, "not a variadic op");
    st = require_inputs(n, 0, n->n_inputs);
    kn_dtype dt;
    if (!st) st = common_dtype(n, &d, 0, n->n_inputs, b->ty, &dt);
    if (st) return st;
    return infer_bcast(n, 0, n->n_inputs, dt);
}

/* ---- unary ops -------------------------------------------------------------------------- */

static int infer_unary(kn_node *n)
{
    kn_opdesc d;
    bool has[EW_MAX_OUTPUTS];
    int st = node_desc(n, &d, has);
    if (st) return st;
    const kn_ew_un *u = kn_ew_un_find(n->op);
    if (!u) return kn_node_error(n, KN_ERR_INTERNAL, "not a unary op");
    kn_unary_op k;
    kn_unary_params p;
    st = require_inputs(n, 0, 1);
    if (!st) st = kn_ew_un_params(&d, u, &k, &p);
    if (!st) st = kn_ew_check_ty(&d, 0, n->inputs[0]->dtype, u->ty);
    if (st) return st;
    kn_dtype dt = n->inputs[0]->dtype;
    kn_infer_set_shape(n, 0, dt == KN_DT_UNDEFINED ? dt : kn_k_unary_out_dtype(k, dt), &n->inputs[0]->shape);
    return KN_OK;
}

/* ---- Clip, Where --------------------------------------------------------------------------- */

static int infer_clip(kn_node *n)
{
    kn_opdesc d;
    bool has[EW_MAX_OUTPUTS];
    int st = node_desc(n, &d, has);
    if (!st) st = require_inputs(n, 0, 1);
    kn_dtype dt;
    /* from opset 11 on, min and max are inputs of the same type as x */
    if (!st) st = common_dtype(n, &d, 0, n->n_inputs, KN_EW_NUM, &dt);
    if (st) return st;
    for (int i = 1; i < n->n_inputs; i++) {
        kn_value *v = n->inputs[i];
        if (v && v->shape.rank > 0 && kn_shape_is_static(&v->shape) && kn_shape_numel(v->shape.rank, v->shape.dims) != 1)
            return kn_node_error(n, KN_ERR_INVALID, "input %d (%s) must be a scalar", i, i == 1 ? "min" : "max");
    }
    return kn_infer_same_as_input(n, 0);
}

static int infer_where(kn_node *n)
{
    kn_opdesc d;
    bool has[EW_MAX_OUTPUTS];
    int st = node_desc(n, &d, has);
    kn_dtype dt;
    if (!st) st = require_inputs(n, 0, 3);
    if (!st) st = kn_ew_check_ty(&d, 0, n->inputs[0]->dtype, KN_EW_BOOL);
    if (!st) st = common_dtype(n, &d, 1, 2, KN_EW_ALL, &dt);
    if (st) return st;
    return infer_bcast(n, 0, 3, dt);
}

/* ---- Cast, CastLike --------------------------------------------------------------------- */

static int infer_cast(kn_node *n)
{
    kn_opdesc d;
    bool has[EW_MAX_OUTPUTS];
    int st = node_desc(n, &d, has);
    kn_dtype to;
    if (!st) st = require_inputs(n, 0, n->op == KN_OP_CastLike ? 2 : 1);
    if (!st) st = kn_ew_check_cast_source(&d, n->inputs[0]->dtype);
    if (!st) st = kn_ew_cast_target(&d, n->op == KN_OP_CastLike ? n->inputs[1]->dtype : KN_DT_UNDEFINED, &to);
    if (st) return st;
    kn_infer_set_shape(n, 0, to, &n->inputs[0]->shape);
    return KN_OK;
}

/* ---- kiln::FusedElementwise (runtime/ops/fused_int.h) ---------------------------------------- */

/* A checked program over its inputs' dtypes (f32, or 8-bit where
 * DequantizeLinear steps read them); the output has their broadcast shape
 * (every step broadcasts, and every input reaches the last step) and the
 * last step's dtype. */
static int infer_fused_elementwise(kn_node *n)
{
    kn_opdesc d;
    bool has[1];
    kn_node_opdesc(n, &d, has);
    kn_ew_program prog;
    int st = kn_fused_ew_program(&d, n->n_inputs, &prog);
    if (st) return st;
    for (int i = 0; i < n->n_inputs; i++) {
        const kn_value *v = n->inputs[i];
        if (!v) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
        if (v->dtype != prog.in_dt[i] && v->dtype != KN_DT_UNDEFINED)
            return kn_node_error(n, KN_ERR_INVALID, "input %d has dtype %s, expected %s", i, kn_dtype_name(v->dtype),
                                 kn_dtype_name(prog.in_dt[i]));
    }
    return infer_bcast(n, 0, n->n_inputs, prog.out_dt);
}

/* ---- the family table (execution: kn_exec_elementwise) ------------------------------------- */

#define BIN(name) {KN_OP_##name, infer_binary}
#define VAR(name) {KN_OP_##name, infer_variadic}
#define UN(name) {KN_OP_##name, infer_unary}

const kn_op_impl kn_ops_elementwise[] = {
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) KN_CLASS_##cls(name)
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags)
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
    {KN_OP_Clip, infer_clip},
    {KN_OP_Where, infer_where},
    {KN_OP_Cast, infer_cast},
    {KN_OP_CastLike, infer_cast},
    {KN_OP_FusedElementwise, infer_fused_elementwise},
    {KN_OP_UNKNOWN, NULL},
};
