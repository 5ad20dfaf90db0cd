/*
 * Op definitions of the 'elementwise' family (see ir/ops.h): binary and
 * variadic arithmetic, logic and comparisons (numpy broadcasting), unary math
 * and activations, Clip, Where, Cast and CastLike.
 *
 * Ops of one shape of signature share one infer and one eval function; small
 * tables map each op to its runtime kernel (runtime/kernels/k_elementwise.h)
 * and to the class of dtypes it accepts. Attributes become kernel parameters
 * here, so the kernels never see the IR.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "../eval.h"
#include "k_elementwise.h"

/* ---- dtype classes ---------------------------------------------------------- */

typedef enum ty_class {
    TY_NUM,   /* every float and integer type */
    TY_FLOAT, /* f16, bf16, f32, f64 */
    TY_INT,   /* integers */
    TY_UINT,  /* unsigned integers */
    TY_BOOL,
    TY_ALL,   /* numeric and bool */
} ty_class;

static const char *const k_ty_names[] = {"a numeric type", "a floating type", "an integer type",
                                         "an unsigned integer type", "bool", "a numeric type or bool"};

static bool ty_ok(ty_class ty, kn_dtype dt)
{
    const kn_dtype_traits *t = kn_dtype_info(dt);
    switch (ty) {
    case TY_NUM: return t->is_float || t->is_integer;
    case TY_FLOAT: return t->is_float;
    case TY_INT: return t->is_integer;
    case TY_UINT: return t->is_integer && !t->is_signed;
    case TY_BOOL: return dt == KN_BOOL;
    case TY_ALL: return kn_dtype_valid(dt);
    }
    return false;
}

/* Checks the dtype of input i (skipped while it is still unknown). */
static int check_ty(const kn_node *n, int i, kn_dtype dt, ty_class ty)
{
    if (dt == KN_DT_UNDEFINED || ty_ok(ty, dt)) return KN_OK;
    return kn_node_error(n, dt == KN_STRING ? KN_ERR_UNSUPPORTED : KN_ERR_INVALID,
                         "input %d has dtype %s; this op takes %s", i, kn_dtype_name(dt), k_ty_names[ty]);
}

/* Checks that inputs [first, first+count) that are present share a dtype of
 * class ty; returns it in *out_dt (UNDEFINED if none is known yet). */
static int common_dtype(const kn_node *n, int first, int count, ty_class ty, kn_dtype *out_dt)
{
    *out_dt = KN_DT_UNDEFINED;
    int from = -1;
    for (int i = first; i < first + count; i++) {
        kn_value *v = kn_node_input(n, i);
        if (!v || v->dtype == KN_DT_UNDEFINED) continue;
        int st = check_ty(n, i, v->dtype, ty);
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

/* Adds node context to a kernel's message. */
static int kernel_fail(const kn_node *n, int st)
{
    kn_error_prefix("node '%s' (%s): ", n->name, n->op_type);
    return st;
}

/* ---- binary ops ------------------------------------------------------------------ */

typedef struct bin_desc {
    kn_op op;
    kn_binary_op k;
    ty_class ty;
} bin_desc;

static const bin_desc k_bin[] = {
    {KN_OP_Add, KN_BIN_ADD, TY_NUM},
    {KN_OP_Sub, KN_BIN_SUB, TY_NUM},
    {KN_OP_Mul, KN_BIN_MUL, TY_NUM},
    {KN_OP_Div, KN_BIN_DIV, TY_NUM},
    {KN_OP_Pow, KN_BIN_POW, TY_NUM},
    {KN_OP_Mod, KN_BIN_MOD, TY_NUM},
    {KN_OP_BitShift, KN_BIN_SHL, TY_UINT},
    {KN_OP_BitwiseAnd, KN_BIN_BITAND, TY_INT},
    {KN_OP_BitwiseOr, KN_BIN_BITOR, TY_INT},
    {KN_OP_BitwiseXor, KN_BIN_BITXOR, TY_INT},
    {KN_OP_And, KN_BIN_AND, TY_BOOL},
    {KN_OP_Or, KN_BIN_OR, TY_BOOL},
    {KN_OP_Xor, KN_BIN_XOR, TY_BOOL},
    {KN_OP_Equal, KN_BIN_EQ, TY_ALL},
    {KN_OP_Greater, KN_BIN_GT, TY_NUM},
    {KN_OP_GreaterOrEqual, KN_BIN_GE, TY_NUM},
    {KN_OP_Less, KN_BIN_LT, TY_NUM},
    {KN_OP_LessOrEqual, KN_BIN_LE, TY_NUM},
    {KN_OP_PRelu, KN_BIN_PRELU, TY_NUM},
    /* variadic */
    {KN_OP_Sum, KN_BIN_ADD, TY_NUM},
    {KN_OP_Mean, KN_BIN_ADD, TY_FLOAT},
    {KN_OP_Max, KN_BIN_MAX, TY_NUM},
    {KN_OP_Min, KN_BIN_MIN, TY_NUM},
};

static const bin_desc *bin_find(kn_op op)
{
    for (size_t i = 0; i < sizeof k_bin / sizeof k_bin[0]; i++)
        if (k_bin[i].op == op) return &k_bin[i];
    return NULL;
}

/* The kernel op of a binary node, with attributes that pick a variant. */
static int bin_kop(const kn_node *n, const bin_desc *d, kn_binary_op *out)
{
    *out = d->k;
    if (n->op == KN_OP_Mod) {
        int64_t f = kn_attr_int(n, "fmod", 0);
        if (f != 0 && f != 1) return kn_node_error(n, KN_ERR_INVALID, "fmod must be 0 or 1, got %lld", (long long)f);
        *out = f ? KN_BIN_FMOD : KN_BIN_MOD;
    } else if (n->op == KN_OP_BitShift) {
        const char *dir = kn_attr_string(n, "direction", NULL);
        if (!dir) return kn_node_error(n, KN_ERR_INVALID, "attribute 'direction' is required");
        if (strcmp(dir, "LEFT") == 0) *out = KN_BIN_SHL;
        else if (strcmp(dir, "RIGHT") == 0) *out = KN_BIN_SHR;
        else return kn_node_error(n, KN_ERR_INVALID, "direction must be LEFT or RIGHT, got '%s'", dir);
    }
    return KN_OK;
}

/* Before opset 7, arithmetic, logic and comparisons broadcast B only when
 * broadcast=1, aligning B's dims with A's from `axis` on (default: the
 * trailing dims, as numpy does). Gives in *out_dims B's dims padded with
 * trailing 1s so that numpy broadcasting does the rest; false if the node
 * uses numpy rules as is. */
static bool legacy_bcast(const kn_node *n, int rank_a, int rank_b, int *out_rank, int64_t *out_dims,
                         const int64_t *dims_b, int *st)
{
    *st = KN_OK;
    if (kn_node_opset(n) >= 7 || !kn_attr_int(n, "broadcast", 0) || !kn_node_attr(n, "axis")) return false;
    int64_t axis = kn_attr_int(n, "axis", 0);
    if (axis < 0) axis += rank_a;
    if (axis < 0 || axis + rank_b > rank_a) {
        *st = kn_node_error(n, KN_ERR_INVALID, "axis %lld does not fit B of rank %d in A of rank %d",
                            (long long)kn_attr_int(n, "axis", 0), rank_b, rank_a);
        return false;
    }
    *out_rank = rank_a - (int)axis;
    for (int i = 0; i < *out_rank; i++) out_dims[i] = i < rank_b ? dims_b[i] : 1;
    return true;
}

static int infer_binary(kn_node *n)
{
    const bin_desc *d = bin_find(n->op);
    if (!d) return kn_node_error(n, KN_ERR_INTERNAL, "not a binary op");
    kn_binary_op k;
    int st = require_inputs(n, 0, 2);
    if (!st) st = bin_kop(n, d, &k);
    if (st) return st;
    kn_dtype dt;
    if (n->op == KN_OP_Pow) {
        /* the exponent may have its own type; the result has the base's */
        dt = n->inputs[0]->dtype;
        st = check_ty(n, 0, dt, TY_NUM);
        if (!st) st = check_ty(n, 1, n->inputs[1]->dtype, TY_NUM);
    } else {
        st = common_dtype(n, 0, 2, d->ty, &dt);
    }
    if (st) return st;
    dt = dt == KN_DT_UNDEFINED ? dt : kn_k_binary_out_dtype(k, dt);
    const kn_shape *sa = &n->inputs[0]->shape, *sb = &n->inputs[1]->shape;
    if (sa->rank >= 0 && sb->rank >= 0 && kn_node_opset(n) < 7) {
        kn_shape b = *sb;
        if (legacy_bcast(n, sa->rank, sb->rank, &b.rank, b.dims, sb->dims, &st)) {
            for (int i = sb->rank; i < b.rank; i++) b.sym[i] = NULL;
            kn_shape o = *sa;
            st = merge_shape(n, &o, &b);
            if (!st) kn_infer_set_shape(n, 0, dt, &o);
            return st;
        }
        if (st) return st;
    }
    return infer_bcast(n, 0, 2, dt);
}

static int eval_binary(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    const bin_desc *d = bin_find(n->op);
    if (!d) return kn_node_error(n, KN_ERR_INTERNAL, "not a binary op");
    if (!in[0] || !in[1]) return kn_node_error(n, KN_ERR_INVALID, "both inputs are required");
    kn_binary_op k;
    int st = bin_kop(n, d, &k);
    if (!st) st = check_ty(n, 0, in[0]->dtype, d->ty);
    if (st) return st;
    kn_tensor b_view;
    const kn_tensor *ab[2] = {in[0], in[1]};
    int64_t dims[KN_MAX_RANK];
    int rank;
    if (legacy_bcast(n, in[0]->rank, in[1]->rank, &rank, dims, in[1]->dims, &st)) {
        st = kn_tensor_view(&b_view, in[1], rank, dims);
        ab[1] = &b_view;
    }
    if (st) return st;
    st = kn_k_broadcast_alloc(2, ab, kn_k_binary_out_dtype(k, in[0]->dtype), &out[0]);
    if (!st) st = kn_k_binary(k, ab[0], ab[1], &out[0]);
    return st ? kernel_fail(n, st) : KN_OK;
}

/* ---- variadic ops (Sum, Mean, Max, Min) ---------------------------------------------- */

static int infer_variadic(kn_node *n)
{
    const bin_desc *d = bin_find(n->op);
    if (!d) return kn_node_error(n, KN_ERR_INTERNAL, "not a variadic op");
    int st = require_inputs(n, 0, n->n_inputs);
    kn_dtype dt;
    if (!st) st = common_dtype(n, 0, n->n_inputs, d->ty, &dt);
    if (st) return st;
    return infer_bcast(n, 0, n->n_inputs, dt);
}

/* Folds the inputs left to right with the binary kernel, broadcasting as it
 * goes, so a mix of shapes ends in their common broadcast shape. */
static int eval_variadic(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    const bin_desc *d = bin_find(n->op);
    if (!d) return kn_node_error(n, KN_ERR_INTERNAL, "not a variadic op");
    if (n->n_inputs < 1) return kn_node_error(n, KN_ERR_INVALID, "needs at least one input");
    for (int i = 0; i < n->n_inputs; i++)
        if (!in[i]) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
    int st = check_ty(n, 0, in[0]->dtype, d->ty);
    if (st) return st;
    kn_tensor acc;
    st = kn_tensor_copy(&acc, in[0]);
    for (int i = 1; !st && i < n->n_inputs; i++) {
        const kn_tensor *pair[2] = {&acc, in[i]};
        kn_tensor next;
        st = kn_k_broadcast_alloc(2, pair, acc.dtype, &next);
        if (!st) st = kn_k_binary(d->k, &acc, in[i], &next);
        kn_tensor_free(&acc);
        acc = next;
        if (st) kn_tensor_free(&acc);
    }
    if (!st && n->op == KN_OP_Mean && n->n_inputs > 1) {
        kn_unary_params p = {.alpha = (double)n->n_inputs};
        st = kn_k_unary(KN_UN_DIV_BY, &p, &acc, &acc);
        if (st) kn_tensor_free(&acc);
    }
    if (st) return kernel_fail(n, st);
    out[0] = acc;
    return KN_OK;
}

/* ---- unary ops -------------------------------------------------------------------------- */

typedef struct un_desc {
    kn_op op;
    kn_unary_op k;
    ty_class ty;
} un_desc;

static const un_desc k_un[] = {
    {KN_OP_Abs, KN_UN_ABS, TY_NUM},
    {KN_OP_Neg, KN_UN_NEG, TY_NUM},
    {KN_OP_Sign, KN_UN_SIGN, TY_NUM},
    {KN_OP_Ceil, KN_UN_CEIL, TY_FLOAT},
    {KN_OP_Floor, KN_UN_FLOOR, TY_FLOAT},
    {KN_OP_Round, KN_UN_ROUND, TY_FLOAT},
    {KN_OP_Sqrt, KN_UN_SQRT, TY_FLOAT},
    {KN_OP_Reciprocal, KN_UN_RECIPROCAL, TY_FLOAT},
    {KN_OP_Exp, KN_UN_EXP, TY_FLOAT},
    {KN_OP_Log, KN_UN_LOG, TY_FLOAT},
    {KN_OP_Sin, KN_UN_SIN, TY_FLOAT},
    {KN_OP_Cos, KN_UN_COS, TY_FLOAT},
    {KN_OP_Tan, KN_UN_TAN, TY_FLOAT},
    {KN_OP_Asin, KN_UN_ASIN, TY_FLOAT},
    {KN_OP_Acos, KN_UN_ACOS, TY_FLOAT},
    {KN_OP_Atan, KN_UN_ATAN, TY_FLOAT},
    {KN_OP_Sinh, KN_UN_SINH, TY_FLOAT},
    {KN_OP_Cosh, KN_UN_COSH, TY_FLOAT},
    {KN_OP_Asinh, KN_UN_ASINH, TY_FLOAT},
    {KN_OP_Acosh, KN_UN_ACOSH, TY_FLOAT},
    {KN_OP_Atanh, KN_UN_ATANH, TY_FLOAT},
    {KN_OP_Erf, KN_UN_ERF, TY_NUM},
    {KN_OP_IsNaN, KN_UN_ISNAN, TY_FLOAT},
    {KN_OP_IsInf, KN_UN_ISINF, TY_FLOAT},
    {KN_OP_Not, KN_UN_NOT, TY_BOOL},
    {KN_OP_BitwiseNot, KN_UN_BITNOT, TY_INT},
    {KN_OP_Relu, KN_UN_RELU, TY_NUM},
    {KN_OP_LeakyRelu, KN_UN_LEAKYRELU, TY_FLOAT},
    {KN_OP_Sigmoid, KN_UN_SIGMOID, TY_FLOAT},
    {KN_OP_HardSigmoid, KN_UN_HARDSIGMOID, TY_FLOAT},
    {KN_OP_HardSwish, KN_UN_HARDSWISH, TY_FLOAT},
    {KN_OP_Tanh, KN_UN_TANH, TY_FLOAT},
    {KN_OP_Gelu, KN_UN_GELU, TY_FLOAT},
    {KN_OP_Softplus, KN_UN_SOFTPLUS, TY_FLOAT},
    {KN_OP_Softsign, KN_UN_SOFTSIGN, TY_FLOAT},
    {KN_OP_Elu, KN_UN_ELU, TY_FLOAT},
    {KN_OP_Selu, KN_UN_SELU, TY_FLOAT},
    {KN_OP_Celu, KN_UN_CELU, TY_FLOAT},
    {KN_OP_Mish, KN_UN_MISH, TY_FLOAT},
    {KN_OP_ThresholdedRelu, KN_UN_THRESHOLDEDRELU, TY_FLOAT},
    {KN_OP_Shrink, KN_UN_SHRINK, TY_NUM},
};

static const un_desc *un_find(kn_op op)
{
    for (size_t i = 0; i < sizeof k_un / sizeof k_un[0]; i++)
        if (k_un[i].op == op) return &k_un[i];
    return NULL;
}

/* Reads the node's attributes into kernel parameters (ONNX defaults). */
static int un_params(const kn_node *n, const un_desc *d, kn_unary_op *k, kn_unary_params *p)
{
    memset(p, 0, sizeof *p);
    *k = d->k;
    switch (n->op) {
    case KN_OP_LeakyRelu: p->alpha = kn_attr_float(n, "alpha", 0.01f); break;
    case KN_OP_HardSigmoid:
        p->alpha = kn_attr_float(n, "alpha", 0.2f);
        p->beta = kn_attr_float(n, "beta", 0.5f);
        break;
    case KN_OP_Elu: case KN_OP_ThresholdedRelu: p->alpha = kn_attr_float(n, "alpha", 1.0f); break;
    case KN_OP_Celu:
        p->alpha = kn_attr_float(n, "alpha", 1.0f);
        if (p->alpha == 0) return kn_node_error(n, KN_ERR_INVALID, "alpha must not be 0");
        break;
    case KN_OP_Selu:
        p->alpha = kn_attr_float(n, "alpha", 1.67326319217681884765625f);
        p->gamma = kn_attr_float(n, "gamma", 1.05070102214813232421875f);
        break;
    case KN_OP_Shrink:
        p->alpha = kn_attr_float(n, "lambd", 0.5f);
        p->beta = kn_attr_float(n, "bias", 0.0f);
        break;
    case KN_OP_IsInf:
        p->detect_pos = kn_attr_int(n, "detect_positive", 1) != 0;
        p->detect_neg = kn_attr_int(n, "detect_negative", 1) != 0;
        break;
    case KN_OP_Gelu: {
        const char *a = kn_attr_string(n, "approximate", "none");
        if (strcmp(a, "tanh") == 0) *k = KN_UN_GELU_TANH;
        else if (strcmp(a, "none") != 0)
            return kn_node_error(n, KN_ERR_INVALID, "approximate must be 'none' or 'tanh', got '%s'", a);
        break;
    }
    default: break;
    }
    return KN_OK;
}

static int infer_unary(kn_node *n)
{
    const un_desc *d = un_find(n->op);
    if (!d) return kn_node_error(n, KN_ERR_INTERNAL, "not a unary op");
    kn_unary_op k;
    kn_unary_params p;
    int st = require_inputs(n, 0, 1);
    if (!st) st = un_params(n, d, &k, &p);
    if (!st) st = check_ty(n, 0, n->inputs[0]->dtype, d->ty);
    if (st) return st;
    kn_dtype dt = n->inputs[0]->dtype;
    kn_infer_set_shape(n, 0, dt == KN_DT_UNDEFINED ? dt : kn_k_unary_out_dtype(k, dt), &n->inputs[0]->shape);
    return KN_OK;
}

static int eval_unary(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    const un_desc *d = un_find(n->op);
    if (!d) return kn_node_error(n, KN_ERR_INTERNAL, "not a unary op");
    if (!in[0]) return kn_node_error(n, KN_ERR_INVALID, "input 0 is missing");
    kn_unary_op k;
    kn_unary_params p;
    int st = un_params(n, d, &k, &p);
    if (!st) st = check_ty(n, 0, in[0]->dtype, d->ty);
    if (st) return st;
    st = kn_tensor_alloc(&out[0], kn_k_unary_out_dtype(k, in[0]->dtype), in[0]->rank, in[0]->dims);
    if (!st) st = kn_k_unary(k, &p, in[0], &out[0]);
    return st ? kernel_fail(n, st) : KN_OK;
}

/* ---- Clip --------------------------------------------------------------------------------- */

static int infer_clip(kn_node *n)
{
    int st = require_inputs(n, 0, 1);
    kn_dtype dt;
    /* from opset 11 on, min and max are inputs of the same type as x */
    if (!st) st = common_dtype(n, 0, n->n_inputs, TY_NUM, &dt);
    if (st) return st;
    for (int i = 1; i < n->n_inputs; i++) {
        kn_value *v = n->inputs[i];
        if (v && v->shape.rank > 0 && kn_shape_is_static(&v->shape) && kn_shape_numel(v->shape.rank, v->shape.dims) != 1)
            return kn_node_error(n, KN_ERR_INVALID, "input %d (%s) must be a scalar", i, i == 1 ? "min" : "max");
    }
    return kn_infer_same_as_input(n, 0);
}

static int eval_clip(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    if (!in[0]) return kn_node_error(n, KN_ERR_INVALID, "input 0 is missing");
    int st = check_ty(n, 0, in[0]->dtype, TY_NUM);
    if (st) return st;
    const kn_tensor *lo = n->n_inputs > 1 ? in[1] : NULL, *hi = n->n_inputs > 2 ? in[2] : NULL;
    /* before opset 11 the bounds are float attributes whose defaults are
     * the float range (so they do clip infinities) */
    float flo = -FLT_MAX, fhi = FLT_MAX;
    kn_tensor tlo, thi;
    if (kn_node_opset(n) < 11 && n->n_inputs == 1) {
        flo = kn_attr_float(n, "min", flo);
        fhi = kn_attr_float(n, "max", fhi);
        tlo = (kn_tensor){.dtype = KN_F32, .rank = 0, .data = &flo, .nbytes = sizeof flo};
        thi = (kn_tensor){.dtype = KN_F32, .rank = 0, .data = &fhi, .nbytes = sizeof fhi};
        lo = &tlo;
        hi = &thi;
    }
    st = kn_tensor_alloc(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
    if (!st) st = kn_k_clip(in[0], lo, hi, &out[0]);
    return st ? kernel_fail(n, st) : KN_OK;
}

/* ---- Where -------------------------------------------------------------------------------- */

static int infer_where(kn_node *n)
{
    int st = require_inputs(n, 0, 3);
    kn_dtype dt;
    if (!st) st = check_ty(n, 0, n->inputs[0]->dtype, TY_BOOL);
    if (!st) st = common_dtype(n, 1, 2, TY_ALL, &dt);
    if (st) return st;
    return infer_bcast(n, 0, 3, dt);
}

static int eval_where(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    if (!in[0] || !in[1] || !in[2]) return kn_node_error(n, KN_ERR_INVALID, "all three inputs are required");
    int st = kn_k_broadcast_alloc(3, in, in[1]->dtype, &out[0]);
    if (!st) st = kn_k_where(in[0], in[1], in[2], &out[0]);
    return st ? kernel_fail(n, st) : KN_OK;
}

/* ---- Cast, CastLike --------------------------------------------------------------------- */

/* The ONNX type code of a TensorProto.DataType name; -1 if unknown. */
static int64_t legacy_type_code(const char *name)
{
    static const struct { const char *name; kn_dtype dt; } k_names[] = {
        {"FLOAT", KN_F32}, {"UINT8", KN_U8}, {"INT8", KN_I8}, {"UINT16", KN_U16}, {"INT16", KN_I16},
        {"INT32", KN_I32}, {"INT64", KN_I64}, {"BOOL", KN_BOOL}, {"FLOAT16", KN_F16}, {"DOUBLE", KN_F64},
        {"UINT32", KN_U32}, {"UINT64", KN_U64}, {"BFLOAT16", KN_BF16},
    };
    for (size_t i = 0; name && i < sizeof k_names / sizeof k_names[0]; i++)
        if (strcmp(k_names[i].name, name) == 0) return k_names[i].dt;
    return -1;
}

/* A name for ONNX type codes kiln cannot compute on, for messages. */
static const char *onnx_type_name(int64_t code)
{
    switch (code) {
    case 8: return "string";
    case 14: return "complex64";
    case 15: return "complex128";
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    default: return code > 0 && code < KN_DT_COUNT ? kn_dtype_name((int)code) : "an unknown type";
    }
}

/* The target dtype of a Cast / CastLike node (from attribute 'to' or input 1). */
static int cast_target(const kn_node *n, kn_dtype like, kn_dtype *out)
{
    int64_t to = like;
    if (n->op == KN_OP_Cast) {
        const kn_attr *a = kn_node_attr(n, "to");
        if (!a) return kn_node_error(n, KN_ERR_INVALID, "attribute 'to' is required");
        if (a->kind == KN_ATTR_STRING) {
            /* before opset 6, 'to' named the type ("FLOAT") */
            to = legacy_type_code(a->s);
            if (to < 0) return kn_node_error(n, KN_ERR_UNSUPPORTED, "cast to type '%s' is not supported", a->s);
        } else {
            to = kn_attr_int(n, "to", 0);
        }
    }
    *out = (kn_dtype)to;
    if (to == KN_DT_UNDEFINED) return KN_OK; /* CastLike whose target is not known yet */
    if (to < 0 || to >= KN_DT_COUNT || !kn_dtype_valid((int)to))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "cast to %s (ONNX type %lld) is not supported",
                             onnx_type_name(to), (long long)to);
    return KN_OK;
}

static int check_cast_source(const kn_node *n, kn_dtype dt)
{
    if (dt == KN_DT_UNDEFINED || kn_dtype_valid(dt)) return KN_OK;
    return kn_node_error(n, KN_ERR_UNSUPPORTED, "cast from %s (ONNX type %d) is not supported",
                         onnx_type_name(dt), (int)dt);
}

static int infer_cast(kn_node *n)
{
    int st = require_inputs(n, 0, n->op == KN_OP_CastLike ? 2 : 1);
    kn_dtype to;
    if (!st) st = check_cast_source(n, n->inputs[0]->dtype);
    if (!st) st = cast_target(n, n->op == KN_OP_CastLike ? n->inputs[1]->dtype : KN_DT_UNDEFINED, &to);
    if (st) return st;
    kn_infer_set_shape(n, 0, to, &n->inputs[0]->shape);
    return KN_OK;
}

static int eval_cast(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    bool like = n->op == KN_OP_CastLike;
    if (!in[0] || (like && !in[1])) return kn_node_error(n, KN_ERR_INVALID, "an input is missing");
    kn_dtype to;
    int st = check_cast_source(n, in[0]->dtype);
    if (!st) st = cast_target(n, like ? in[1]->dtype : KN_DT_UNDEFINED, &to);
    if (st) return st;
    if (to == KN_DT_UNDEFINED) return kn_node_error(n, KN_ERR_INVALID, "target dtype is undefined");
    st = kn_tensor_alloc(&out[0], to, in[0]->rank, in[0]->dims);
    if (!st) st = kn_k_cast(in[0], &out[0]);
    return st ? kernel_fail(n, st) : KN_OK;
}

/* ---- the family table --------------------------------------------------------------------- */

#define BIN(name) {KN_OP_##name, infer_binary, eval_binary}
#define VAR(name) {KN_OP_##name, infer_variadic, eval_variadic}
#define UN(name) {KN_OP_##name, infer_unary, eval_unary}

const kn_op_impl kn_ops_elementwise[] = {
    BIN(Add), BIN(Sub), BIN(Mul), BIN(Div), BIN(Pow), BIN(Mod), BIN(BitShift),
    BIN(BitwiseAnd), BIN(BitwiseOr), BIN(BitwiseXor), BIN(And), BIN(Or), BIN(Xor),
    BIN(Equal), BIN(Greater), BIN(GreaterOrEqual), BIN(Less), BIN(LessOrEqual), BIN(PRelu),
    VAR(Sum), VAR(Mean), VAR(Max), VAR(Min),
    UN(Abs), UN(Neg), UN(Sign), UN(Ceil), UN(Floor), UN(Round), UN(Sqrt), UN(Reciprocal),
    UN(Exp), UN(Log), UN(Sin), UN(Cos), UN(Tan), UN(Asin), UN(Acos), UN(Atan),
    UN(Sinh), UN(Cosh), UN(Asinh), UN(Acosh), UN(Atanh), UN(Erf), UN(IsNaN), UN(IsInf),
    UN(Not), UN(BitwiseNot),
    UN(Relu), UN(LeakyRelu), UN(Sigmoid), UN(HardSigmoid), UN(HardSwish), UN(Tanh), UN(Gelu),
    UN(Softplus), UN(Softsign), UN(Elu), UN(Selu), UN(Celu), UN(Mish), UN(ThresholdedRelu), UN(Shrink),
    {KN_OP_Clip, infer_clip, eval_clip},
    {KN_OP_Where, infer_where, eval_where},
    {KN_OP_Cast, infer_cast, eval_cast},
    {KN_OP_CastLike, infer_cast, eval_cast},
    {KN_OP_UNKNOWN, NULL, NULL},
};
