/*
 * Execution of the 'elementwise' ops (see opdesc.h): binary and variadic
 * arithmetic, logic and comparisons (numpy broadcasting), unary math and
 * activations, Clip, Where, Cast and CastLike.
 *
 * Ops of one shape of signature share one exec function; small tables map
 * each op to its kernel (runtime/kernels/ref/k_elementwise.h) and to the class of
 * dtypes it accepts. Attributes become kernel parameters here, so kernels
 * never see a descriptor. The table and attribute helpers are also used by
 * the family's type inference in the IR (elementwise_int.h).
 */
#include <float.h>
#include <string.h>

#include "fastops.h"
#include "elementwise_int.h"

/* ---- dtype classes ---------------------------------------------------------- */

static const char *const k_ty_names[] = {"a numeric type", "a floating type", "an integer type",
                                         "an unsigned integer type", "bool", "a numeric type or bool"};

static bool ty_ok(kn_ew_ty ty, kn_dtype dt)
{
    const kn_dtype_traits *t = kn_dtype_info(dt);
    switch (ty) {
    case KN_EW_NUM: return t->is_float || t->is_integer;
    case KN_EW_FLOAT: return t->is_float;
    case KN_EW_INT: return t->is_integer;
    case KN_EW_UINT: return t->is_integer && !t->is_signed;
    case KN_EW_BOOL: return dt == KN_BOOL;
    case KN_EW_ALL: return kn_dtype_valid(dt);
    }
    return false;
}

int kn_ew_check_ty(const kn_opdesc *d, int i, kn_dtype dt, kn_ew_ty ty)
{
    if (dt == KN_DT_UNDEFINED || ty_ok(ty, dt)) return KN_OK;
    return kn_op_error(d, dt == KN_STRING ? KN_ERR_UNSUPPORTED : KN_ERR_INVALID,
                       "input %d has dtype %s; this op takes %s", i, kn_dtype_name(dt), k_ty_names[ty]);
}

/* Adds node context to a kernel's message. */
static int kernel_fail(const kn_opdesc *d, int st)
{
    kn_error_prefix("node '%s' (%s): ", d->name, d->op_type);
    return st;
}

/* ---- binary ops ------------------------------------------------------------------ */

static const kn_ew_bin k_bin[] = {
    {KN_OP_Add, KN_BIN_ADD, KN_EW_NUM},
    {KN_OP_Sub, KN_BIN_SUB, KN_EW_NUM},
    {KN_OP_Mul, KN_BIN_MUL, KN_EW_NUM},
    {KN_OP_Div, KN_BIN_DIV, KN_EW_NUM},
    {KN_OP_Pow, KN_BIN_POW, KN_EW_NUM},
    {KN_OP_Mod, KN_BIN_MOD, KN_EW_NUM},
    {KN_OP_BitShift, KN_BIN_SHL, KN_EW_UINT},
    {KN_OP_BitwiseAnd, KN_BIN_BITAND, KN_EW_INT},
    {KN_OP_BitwiseOr, KN_BIN_BITOR, KN_EW_INT},
    {KN_OP_BitwiseXor, KN_BIN_BITXOR, KN_EW_INT},
    {KN_OP_And, KN_BIN_AND, KN_EW_BOOL},
    {KN_OP_Or, KN_BIN_OR, KN_EW_BOOL},
    {KN_OP_Xor, KN_BIN_XOR, KN_EW_BOOL},
    {KN_OP_Equal, KN_BIN_EQ, KN_EW_ALL},
    {KN_OP_Greater, KN_BIN_GT, KN_EW_NUM},
    {KN_OP_GreaterOrEqual, KN_BIN_GE, KN_EW_NUM},
    {KN_OP_Less, KN_BIN_LT, KN_EW_NUM},
    {KN_OP_LessOrEqual, KN_BIN_LE, KN_EW_NUM},
    {KN_OP_PRelu, KN_BIN_PRELU, KN_EW_NUM},
    /* variadic */
    {KN_OP_Sum, KN_BIN_ADD, KN_EW_NUM},
    {KN_OP_Mean, KN_BIN_ADD, KN_EW_FLOAT},
    {KN_OP_Max, KN_BIN_MAX, KN_EW_NUM},
    {KN_OP_Min, KN_BIN_MIN, KN_EW_NUM},
};

const kn_ew_bin *kn_ew_bin_find(kn_op op)
{
    for (size_t i = 0; i < sizeof k_bin / sizeof k_bin[0]; i++)
        if (k_bin[i].op == op) return &k_bin[i];
    return NULL;
}

int kn_ew_bin_kop(const kn_opdesc *d, const kn_ew_bin *b, kn_binary_op *out)
{
    *out = b->k;
    if (d->op == KN_OP_Mod) {
        int64_t f = kn_op_attr_int(d, "fmod", 0);
        if (f != 0 && f != 1) return kn_op_error(d, KN_ERR_INVALID, "fmod must be 0 or 1, got %lld", (long long)f);
        *out = f ? KN_BIN_FMOD : KN_BIN_MOD;
    } else if (d->op == KN_OP_BitShift) {
        const char *dir = kn_op_attr_string(d, "direction", NULL);
        if (!dir) return kn_op_error(d, KN_ERR_INVALID, "attribute 'direction' is required");
        if (strcmp(dir, "LEFT") == 0) *out = KN_BIN_SHL;
        else if (strcmp(dir, "RIGHT") == 0) *out = KN_BIN_SHR;
        else return kn_op_error(d, KN_ERR_INVALID, "direction must be LEFT or RIGHT, got '%s'", dir);
    }
    return KN_OK;
}

bool kn_ew_legacy_bcast(const kn_opdesc *d, int rank_a, int rank_b, const int64_t *dims_b, int *out_rank,
                        int64_t *out_dims, int *st)
{
    *st = KN_OK;
    if (d->opset >= 7 || !kn_op_attr_int(d, "broadcast", 0) || !kn_op_attr(d, "axis")) return false;
    int64_t axis = kn_op_attr_int(d, "axis", 0);
    if (axis < 0) axis += rank_a;
    if (axis < 0 || axis + rank_b > rank_a) {
        *st = kn_op_error(d, KN_ERR_INVALID, "axis %lld does not fit B of rank %d in A of rank %d",
                          (long long)kn_op_attr_int(d, "axis", 0), rank_b, rank_a);
        return false;
    }
    *out_rank = rank_a - (int)axis;
    for (int i = 0; i < *out_rank; i++) out_dims[i] = i < rank_b ? dims_b[i] : 1;
    return true;
}

static int exec_binary(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_ew_bin *b = kn_ew_bin_find(d->op);
    if (!b) return kn_op_error(d, KN_ERR_INTERNAL, "not a binary op");
    if (d->n_inputs < 2 || !in[0] || !in[1]) return kn_op_error(d, KN_ERR_INVALID, "both inputs are required");
    kn_binary_op k;
    int st = kn_ew_bin_kop(d, b, &k);
    if (!st) st = kn_ew_check_ty(d, 0, in[0]->dtype, b->ty);
    if (st) return st;
    kn_tensor b_view;
    const kn_tensor *ab[2] = {in[0], in[1]};
    int64_t dims[KN_MAX_RANK];
    int rank;
    if (kn_ew_legacy_bcast(d, in[0]->rank, in[1]->rank, in[1]->dims, &rank, dims, &st)) {
        st = kn_tensor_view(&b_view, in[1], rank, dims);
        ab[1] = &b_view;
    }
    if (st) return st;
    int out_rank = 0;
    int64_t out_dims[KN_MAX_RANK] = {0};
    st = kn_k_broadcast_shape(2, ab, &out_rank, out_dims);
    if (!st) st = kn_op_alloc_output(d, &out[0], kn_k_binary_out_dtype(k, in[0]->dtype), out_rank, out_dims, false);
    if (!st) { /* compiled artifacts: the f32 fast path first (fastops.h) */
        st = kn_fast_binary(d->sess, k, ab[0], ab[1], &out[0]);
        if (st == KN_ERR_UNSUPPORTED) st = kn_k_binary(k, ab[0], ab[1], &out[0]);
    }
    return st ? kernel_fail(d, st) : KN_OK;
}

/* ---- variadic ops (Sum, Mean, Max, Min) ---------------------------------------------- */

/* Folds the inputs left to right with the binary kernel, broadcasting as it
 * goes, so a mix of shapes ends in their common broadcast shape. */
static int exec_variadic(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_ew_bin *b = kn_ew_bin_find(d->op);
    if (!b) return kn_op_error(d, KN_ERR_INTERNAL, "not a variadic op");
    if (d->n_inputs < 1) return kn_op_error(d, KN_ERR_INVALID, "needs at least one input");
    for (int i = 0; i < d->n_inputs; i++)
        if (!in[i]) return kn_op_error(d, KN_ERR_INVALID, "input %d is missing", i);
    int st = kn_ew_check_ty(d, 0, in[0]->dtype, b->ty);
    if (st) return st;
    kn_tensor acc;
    st = kn_tensor_copy(&acc, in[0]);
    for (int i = 1; !st && i < d->n_inputs; i++) {
        const kn_tensor *pair[2] = {&acc, in[i]};
        kn_tensor next;
        st = kn_k_broadcast_alloc(2, pair, acc.dtype, &next);
        if (!st) st = kn_k_binary(b->k, &acc, in[i], &next);
        kn_tensor_free(&acc);
        acc = next;
        if (st) kn_tensor_free(&acc);
    }
    if (!st && d->op == KN_OP_Mean && d->n_inputs > 1) {
        kn_unary_params p = {.alpha = (double)d->n_inputs};
        st = kn_k_unary(KN_UN_DIV_BY, &p, &acc, &acc);
        if (st) kn_tensor_free(&acc);
    }
    if (st) return kernel_fail(d, st);
    out[0] = acc;
    return KN_OK;
}

/* ---- unary ops -------------------------------------------------------------------------- */

static const kn_ew_un k_un[] = {
    {KN_OP_Abs, KN_UN_ABS, KN_EW_NUM},
    {KN_OP_Neg, KN_UN_NEG, KN_EW_NUM},
    {KN_OP_Sign, KN_UN_SIGN, KN_EW_NUM},
    {KN_OP_Ceil, KN_UN_CEIL, KN_EW_FLOAT},
    {KN_OP_Floor, KN_UN_FLOOR, KN_EW_FLOAT},
    {KN_OP_Round, KN_UN_ROUND, KN_EW_FLOAT},
    {KN_OP_Sqrt, KN_UN_SQRT, KN_EW_FLOAT},
    {KN_OP_Reciprocal, KN_UN_RECIPROCAL, KN_EW_FLOAT},
    {KN_OP_Exp, KN_UN_EXP, KN_EW_FLOAT},
    {KN_OP_Log, KN_UN_LOG, KN_EW_FLOAT},
    {KN_OP_Sin, KN_UN_SIN, KN_EW_FLOAT},
    {KN_OP_Cos, KN_UN_COS, KN_EW_FLOAT},
    {KN_OP_Tan, KN_UN_TAN, KN_EW_FLOAT},
    {KN_OP_Asin, KN_UN_ASIN, KN_EW_FLOAT},
    {KN_OP_Acos, KN_UN_ACOS, KN_EW_FLOAT},
    {KN_OP_Atan, KN_UN_ATAN, KN_EW_FLOAT},
    {KN_OP_Sinh, KN_UN_SINH, KN_EW_FLOAT},
    {KN_OP_Cosh, KN_UN_COSH, KN_EW_FLOAT},
    {KN_OP_Asinh, KN_UN_ASINH, KN_EW_FLOAT},
    {KN_OP_Acosh, KN_UN_ACOSH, KN_EW_FLOAT},
    {KN_OP_Atanh, KN_UN_ATANH, KN_EW_FLOAT},
    {KN_OP_Erf, KN_UN_ERF, KN_EW_NUM},
    {KN_OP_IsNaN, KN_UN_ISNAN, KN_EW_FLOAT},
    {KN_OP_IsInf, KN_UN_ISINF, KN_EW_FLOAT},
    {KN_OP_Not, KN_UN_NOT, KN_EW_BOOL},
    {KN_OP_BitwiseNot, KN_UN_BITNOT, KN_EW_INT},
    {KN_OP_Relu, KN_UN_RELU, KN_EW_NUM},
    {KN_OP_LeakyRelu, KN_UN_LEAKYRELU, KN_EW_FLOAT},
    {KN_OP_Sigmoid, KN_UN_SIGMOID, KN_EW_FLOAT},
    {KN_OP_HardSigmoid, KN_UN_HARDSIGMOID, KN_EW_FLOAT},
    {KN_OP_HardSwish, KN_UN_HARDSWISH, KN_EW_FLOAT},
    {KN_OP_Tanh, KN_UN_TANH, KN_EW_FLOAT},
    {KN_OP_Gelu, KN_UN_GELU, KN_EW_FLOAT},
    {KN_OP_Softplus, KN_UN_SOFTPLUS, KN_EW_FLOAT},
    {KN_OP_Softsign, KN_UN_SOFTSIGN, KN_EW_FLOAT},
    {KN_OP_Elu, KN_UN_ELU, KN_EW_FLOAT},
    {KN_OP_Selu, KN_UN_SELU, KN_EW_FLOAT},
    {KN_OP_Celu, KN_UN_CELU, KN_EW_FLOAT},
    {KN_OP_Mish, KN_UN_MISH, KN_EW_FLOAT},
    {KN_OP_ThresholdedRelu, KN_UN_THRESHOLDEDRELU, KN_EW_FLOAT},
    {KN_OP_Shrink, KN_UN_SHRINK, KN_EW_NUM},
    {KN_OP_Swish, KN_UN_SWISH, KN_EW_FLOAT},
};

const kn_ew_un *kn_ew_un_find(kn_op op)
{
    for (size_t i = 0; i < sizeof k_un / sizeof k_un[0]; i++)
        if (k_un[i].op == op) return &k_un[i];
    return NULL;
}

int kn_ew_un_params(const kn_opdesc *d, const kn_ew_un *u, kn_unary_op *k, kn_unary_params *p)
{
    memset(p, 0, sizeof *p);
    *k = u->k;
    switch (d->op) {
    case KN_OP_LeakyRelu: p->alpha = kn_op_attr_float(d, "alpha", 0.01f); break;
    case KN_OP_HardSigmoid:
        p->alpha = kn_op_attr_float(d, "alpha", 0.2f);
        p->beta = kn_op_attr_float(d, "beta", 0.5f);
        break;
    case KN_OP_Elu: case KN_OP_ThresholdedRelu: case KN_OP_Swish: p->alpha = kn_op_attr_float(d, "alpha", 1.0f); break;
    case KN_OP_Celu:
        p->alpha = kn_op_attr_float(d, "alpha", 1.0f);
        if (p->alpha == 0) return kn_op_error(d, KN_ERR_INVALID, "alpha must not be 0");
        break;
    case KN_OP_Selu:
        p->alpha = kn_op_attr_float(d, "alpha", 1.67326319217681884765625f);
        p->gamma = kn_op_attr_float(d, "gamma", 1.05070102214813232421875f);
        break;
    case KN_OP_Shrink:
        p->alpha = kn_op_attr_float(d, "lambd", 0.5f);
        p->beta = kn_op_attr_float(d, "bias", 0.0f);
        break;
    case KN_OP_IsInf:
        p->detect_pos = kn_op_attr_int(d, "detect_positive", 1) != 0;
        p->detect_neg = kn_op_attr_int(d, "detect_negative", 1) != 0;
        break;
    case KN_OP_Gelu: {
        const char *a = kn_op_attr_string(d, "approximate", "none");
        if (strcmp(a, "tanh") == 0) *k = KN_UN_GELU_TANH;
        else if (strcmp(a, "none") != 0)
            return kn_op_error(d, KN_ERR_INVALID, "approximate must be 'none' or 'tanh', got '%s'", a);
        break;
    }
    default: break;
    }
    return KN_OK;
}

static int exec_unary(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_ew_un *u = kn_ew_un_find(d->op);
    if (!u) return kn_op_error(d, KN_ERR_INTERNAL, "not a unary op");
    if (d->n_inputs < 1 || !in[0]) return kn_op_error(d, KN_ERR_INVALID, "input 0 is missing");
    kn_unary_op k;
    kn_unary_params p;
    int st = kn_ew_un_params(d, u, &k, &p);
    if (!st) st = kn_ew_check_ty(d, 0, in[0]->dtype, u->ty);
    if (st) return st;
    st = kn_op_alloc_output(d, &out[0], kn_k_unary_out_dtype(k, in[0]->dtype), in[0]->rank, in[0]->dims, false);
    if (!st) { /* compiled artifacts: the f32 fast path first (fastops.h) */
        st = k == KN_UN_SIGMOID ? kn_fast_sigmoid(d->sess, in[0], &out[0]) : KN_ERR_UNSUPPORTED;
        if (st == KN_ERR_UNSUPPORTED) st = kn_k_unary(k, &p, in[0], &out[0]);
    }
    return st ? kernel_fail(d, st) : KN_OK;
}

/* ---- Clip --------------------------------------------------------------------------------- */

static int exec_clip(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (d->n_inputs < 1 || !in[0]) return kn_op_error(d, KN_ERR_INVALID, "input 0 is missing");
    int st = kn_ew_check_ty(d, 0, in[0]->dtype, KN_EW_NUM);
    if (st) return st;
    const kn_tensor *lo = d->n_inputs > 1 ? in[1] : NULL, *hi = d->n_inputs > 2 ? in[2] : NULL;
    /* before opset 11 the bounds are float attributes whose defaults are
     * the float range (so they do clip infinities) */
    float flo = -FLT_MAX, fhi = FLT_MAX;
    kn_tensor tlo, thi;
    if (d->opset < 11 && d->n_inputs == 1) {
        flo = kn_op_attr_float(d, "min", flo);
        fhi = kn_op_attr_float(d, "max", fhi);
        tlo = (kn_tensor){.dtype = KN_F32, .rank = 0, .data = &flo, .nbytes = sizeof flo};
        thi = (kn_tensor){.dtype = KN_F32, .rank = 0, .data = &fhi, .nbytes = sizeof fhi};
        lo = &tlo;
        hi = &thi;
    }
    st = kn_tensor_alloc(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims);
    if (!st) st = kn_k_clip(in[0], lo, hi, &out[0]);
    return st ? kernel_fail(d, st) : KN_OK;
}

/* ---- Where -------------------------------------------------------------------------------- */

static int exec_where(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (d->n_inputs < 3 || !in[0] || !in[1] || !in[2])
        return kn_op_error(d, KN_ERR_INVALID, "all three inputs are required");
    int st = kn_k_broadcast_alloc(3, in, in[1]->dtype, &out[0]);
    if (!st) st = kn_k_where(in[0], in[1], in[2], &out[0]);
    return st ? kernel_fail(d, st) : KN_OK;
}

/* ---- Cast, CastLike --------------------------------------------------------------------- */

/* The ONNX type code of a TensorProto.DataType name, for the types Cast
 * named before opset 6 (byte-sized, computable); -1 otherwise. */
static int64_t legacy_type_code(const char *name)
{
    kn_dtype dt = kn_dtype_from_onnx_name(name);
    return kn_dtype_valid(dt) && kn_dtype_size(dt) > 0 ? (int64_t)dt : -1;
}

/* A name for an ONNX type code kiln cannot compute on, for messages. */
static const char *onnx_type_name(int64_t code)
{
    const char *n = code > 0 && code < 1000 ? kn_onnx_type_name((int)code) : NULL;
    return n ? n : "an unknown type";
}

int kn_ew_cast_target(const kn_opdesc *d, kn_dtype like, kn_dtype *out)
{
    int64_t to = like;
    if (d->op == KN_OP_Cast) {
        const kn_attr *a = kn_op_attr(d, "to");
        if (!a) return kn_op_error(d, KN_ERR_INVALID, "attribute 'to' is required");
        if (a->kind == KN_ATTR_STRING) {
            /* before opset 6, 'to' named the type ("FLOAT") */
            to = legacy_type_code(a->s);
            if (to < 0) return kn_op_error(d, KN_ERR_UNSUPPORTED, "cast to type '%s' is not supported", a->s);
        } else {
            to = kn_op_attr_int(d, "to", 0);
        }
    }
    *out = (kn_dtype)to;
    if (to == KN_DT_UNDEFINED) return KN_OK; /* CastLike whose target is not known yet */
    if (to < 0 || to >= KN_DT_COUNT || !kn_dtype_valid((int)to))
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "cast to %s (ONNX type %lld) is not supported",
                           onnx_type_name(to), (long long)to);
    return KN_OK;
}

int kn_ew_check_cast_source(const kn_opdesc *d, kn_dtype dt)
{
    if (dt == KN_DT_UNDEFINED || kn_dtype_valid(dt)) return KN_OK;
    return kn_op_error(d, KN_ERR_UNSUPPORTED, "cast from %s (ONNX type %d) is not supported",
                       onnx_type_name(dt), (int)dt);
}

static int exec_cast(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    bool like = d->op == KN_OP_CastLike;
    if (d->n_inputs < (like ? 2 : 1) || !in[0] || (like && !in[1]))
        return kn_op_error(d, KN_ERR_INVALID, "an input is missing");
    kn_dtype to;
    int st = kn_ew_check_cast_source(d, in[0]->dtype);
    if (!st) st = kn_ew_cast_target(d, like ? in[1]->dtype : KN_DT_UNDEFINED, &to);
    if (st) return st;
    if (to == KN_DT_UNDEFINED) return kn_op_error(d, KN_ERR_INVALID, "target dtype is undefined");
    st = kn_tensor_alloc(&out[0], to, in[0]->rank, in[0]->dims);
    if (!st) st = kn_k_cast(in[0], &out[0]);
    return st ? kernel_fail(d, st) : KN_OK;
}

/* ---- the family table --------------------------------------------------------------------- */

#define BIN(name) {KN_OP_##name, exec_binary}
#define VAR(name) {KN_OP_##name, exec_variadic}
#define UN(name) {KN_OP_##name, exec_unary}

const kn_exec_impl kn_exec_elementwise[] = {
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) KN_CLASS_##cls(name)
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags)
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
    {KN_OP_Clip, exec_clip},
    {KN_OP_Where, exec_where},
    {KN_OP_Cast, exec_cast},
    {KN_OP_CastLike, exec_cast},
    {KN_OP_UNKNOWN, NULL},
};
