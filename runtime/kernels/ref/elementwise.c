/*
 * Reference kernels for elementwise ops (see k_elementwise.h).
 *
 * Every element goes through one of three computation kinds chosen by dtype:
 * double for floating types, int64 for bool and every integer type but u64,
 * and uint64 for u64. One broadcasting walk (bcast_walk) serves every binary
 * and ternary op: it visits the output row by row (innermost axis) and hands
 * a row function the starting offset and stride of each operand.
 */
#include "k_elementwise.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- computation kinds and element access ------------------------------- */

typedef enum { KF, KI, KU } kkind;

typedef union {
    double f;
    int64_t i;
    uint64_t u;
} kval;

static kkind kind_of(kn_dtype dt)
{
    if (kn_dtype_info(dt)->is_float) return KF;
    return dt == KN_U64 ? KU : KI;
}

static kval load(kn_dtype dt, kkind k, const void *p, int64_t i)
{
    kval v;
    /* the common cases inline; kn_load_* handles every dtype and conversion */
    if (k == KF && dt == KN_F32) v.f = ((const float *)p)[i];
    else if (k == KI && dt == KN_I64) v.i = ((const int64_t *)p)[i];
    else if (k == KF) v.f = kn_load_f64(dt, p, (size_t)i);
    else if (k == KU) v.u = kn_load_u64(dt, p, (size_t)i);
    else v.i = kn_load_i64(dt, p, (size_t)i);
    return v;
}

/* Rounds d to float with round-to-odd, so that a second rounding to a
 * narrower format (f16, bf16) gives the same result as rounding d once. */
static float f64_to_f32_odd(double d)
{
    float f = (float)d;
    if ((double)f == d || isnan(f) || isinf(f)) return f;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (!(u & 1)) {
        if (fabs((double)f) > fabs(d)) u--;
        else u++;
    }
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kn_k_f64_to_f16(double v) { return kn_f32_to_f16(f64_to_f32_odd(v)); }
uint16_t kn_k_f64_to_bf16(double v) { return kn_f32_to_bf16(f64_to_f32_odd(v)); }

static void store_f(kn_dtype dt, void *p, int64_t i, double v)
{
    switch (dt) {
    case KN_F32: ((float *)p)[i] = (float)v; return;
    case KN_F64: ((double *)p)[i] = v; return;
    case KN_F16: ((uint16_t *)p)[i] = kn_k_f64_to_f16(v); return;
    case KN_BF16: ((uint16_t *)p)[i] = kn_k_f64_to_bf16(v); return;
    default: kn_store_f64(dt, p, (size_t)i, v); return;
    }
}

static void store(kn_dtype dt, kkind k, void *p, int64_t i, kval v)
{
    if (k == KF) store_f(dt, p, i, v.f);
    else if (k == KU) kn_store_u64(dt, p, (size_t)i, v.u);
    else kn_store_i64(dt, p, (size_t)i, v.i);
}

/* ---- shape checks and the broadcasting walk ------------------------------ */

static int check_data(const kn_tensor *t, const char *what)
{
    if (t->rank < 0 || t->rank > KN_MAX_RANK)
        return kn_error(KN_ERR_INVALID, "%s has rank %d, outside [0, %d]", what, t->rank, KN_MAX_RANK);
    int64_t n = kn_tensor_numel(t);
    char buf[160];
    if (n < 0)
        return kn_error(KN_ERR_INVALID, "%s has an invalid shape %s", what,
                        kn_shape_str(t->rank, t->dims, buf, sizeof buf));
    if (!kn_dtype_valid(t->dtype))
        return kn_error(KN_ERR_UNSUPPORTED, "%s has dtype %s, which cannot be computed on", what,
                        kn_dtype_name(t->dtype));
    if (n > 0 && (!t->data || t->nbytes < kn_dtype_nbytes(t->dtype, (size_t)n)))
        return kn_error(KN_ERR_INVALID, "%s holds %zu bytes, fewer than its shape %s needs", what,
                        t->nbytes, kn_shape_str(t->rank, t->dims, buf, sizeof buf));
    return KN_OK;
}

int kn_k_broadcast_shape(int n, const kn_tensor *const *in, int *rank, int64_t *dims)
{
    *rank = 0;
    for (int k = 0; k < n; k++) {
        int r = *rank;
        int64_t d[KN_MAX_RANK];
        memcpy(d, dims, sizeof d);
        if (in[k]->rank < 0 || in[k]->rank > KN_MAX_RANK)
            return kn_error(KN_ERR_INVALID, "operand %d has rank %d", k, in[k]->rank);
        int st = kn_broadcast_shape(r, d, in[k]->rank, in[k]->dims, rank, dims);
        if (st) return st;
    }
    return KN_OK;
}

int kn_k_broadcast_alloc(int n, const kn_tensor *const *in, kn_dtype dt, kn_tensor *out)
{
    memset(out, 0, sizeof *out);
    int rank;
    int64_t dims[KN_MAX_RANK] = {0};
    int st = kn_k_broadcast_shape(n, in, &rank, dims);
    if (st) return st;
    return kn_tensor_alloc(out, dt, rank, dims);
}

/* A row function: len elements, output from element o on, operand k from
 * element off[k] on with stride step[k]. */
typedef void (*row_fn)(void *ctx, int64_t len, int64_t o, const int64_t *off, const int64_t *step);

static int bcast_walk(int n, const kn_tensor *const *in, const kn_tensor *out, row_fn fn, void *ctx)
{
    static const char *names[3] = {"operand 0", "operand 1", "operand 2"};
    for (int k = 0; k < n; k++) {
        int st = check_data(in[k], names[k]);
        if (st) return st;
    }
    int st = check_data(out, "output");
    if (st) return st;
    int rank;
    int64_t dims[KN_MAX_RANK] = {0};
    st = kn_k_broadcast_shape(n, in, &rank, dims);
    if (st) return st;
    char sa[160], sb[160];
    if (rank != out->rank || memcmp(dims, out->dims, sizeof(int64_t) * (size_t)rank) != 0)
        return kn_error(KN_ERR_INVALID, "output shape %s is not the broadcast shape %s",
                        kn_shape_str(out->rank, out->dims, sa, sizeof sa),
                        kn_shape_str(rank, dims, sb, sizeof sb));
    if (kn_tensor_numel(out) == 0) return KN_OK;

    int64_t strides[3][KN_MAX_RANK], off[3], step[3];
    for (int k = 0; k < n; k++) kn_broadcast_strides(in[k]->rank, in[k]->dims, rank, dims, strides[k]);
    if (rank == 0) {
        for (int k = 0; k < n; k++) off[k] = step[k] = 0;
        fn(ctx, 1, 0, off, step);
        return KN_OK;
    }
    int64_t inner = dims[rank - 1];
    for (int k = 0; k < n; k++) step[k] = strides[k][rank - 1];
    kn_index it;
    kn_index_init(&it, rank - 1, dims);
    int64_t o = 0;
    do {
        for (int k = 0; k < n; k++) off[k] = kn_index_offset(&it, strides[k]);
        fn(ctx, inner, o, off, step);
        o += inner;
    } while (kn_index_next(&it));
    return KN_OK;
}

/* ---- binary ops ---------------------------------------------------------- */

static bool is_compare(kn_binary_op op)
{
    return op == KN_BIN_EQ || op == KN_BIN_GT || op == KN_BIN_GE || op == KN_BIN_LT || op == KN_BIN_LE ||
           op == KN_BIN_AND || op == KN_BIN_OR || op == KN_BIN_XOR;
}

kn_dtype kn_k_binary_out_dtype(kn_binary_op op, kn_dtype a) { return is_compare(op) ? KN_BOOL : a; }

static double bin_f(kn_binary_op op, double a, double b)
{
    switch (op) {
    case KN_BIN_ADD: return a + b;
    case KN_BIN_SUB: return a - b;
    case KN_BIN_MUL: return a * b;
    case KN_BIN_DIV: return a / b;
    case KN_BIN_POW: return pow(a, b);
    case KN_BIN_FMOD: return fmod(a, b);
    case KN_BIN_MOD: {
        double r = fmod(a, b);
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
    }
    case KN_BIN_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case KN_BIN_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case KN_BIN_PRELU: return a < 0 ? a * b : a;
    default: return NAN; /* bit ops are rejected for floats before we get here */
    }
}

/* Shifts and multiplications go through uint64 so overflow wraps instead of
 * being undefined. */
static int64_t bin_i(kn_binary_op op, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case KN_BIN_ADD: return (int64_t)(ua + ub);
    case KN_BIN_SUB: return (int64_t)(ua - ub);
    case KN_BIN_MUL: return (int64_t)(ua * ub);
    case KN_BIN_DIV:
        if (b == 0) return 0;
        if (b == -1) return (int64_t)(0 - ua);
        return a / b;
    case KN_BIN_FMOD:
        if (b == 0 || b == -1) return 0;
        return a % b;
    case KN_BIN_MOD: {
        if (b == 0 || b == -1) return 0;
        int64_t r = a % b;
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
    }
    case KN_BIN_SHL: return ub >= 64 ? 0 : (int64_t)(ua << ub);
    case KN_BIN_SHR: return ub >= 64 ? 0 : (int64_t)(ua >> ub);
    case KN_BIN_BITAND: case KN_BIN_AND: return a & b;
    case KN_BIN_BITOR: case KN_BIN_OR: return a | b;
    case KN_BIN_BITXOR: case KN_BIN_XOR: return a ^ b;
    case KN_BIN_MAX: return a > b ? a : b;
    case KN_BIN_MIN: return a < b ? a : b;
    case KN_BIN_PRELU: return a < 0 ? (int64_t)(ua * ub) : a;
    default: return 0;
    }
}

static uint64_t bin_u(kn_binary_op op, uint64_t a, uint64_t b)
{
    switch (op) {
    case KN_BIN_ADD: return a + b;
    case KN_BIN_SUB: return a - b;
    case KN_BIN_MUL: return a * b;
    case KN_BIN_DIV: return b ? a / b : 0;
    case KN_BIN_MOD: case KN_BIN_FMOD: return b ? a % b : 0;
    case KN_BIN_SHL: return b >= 64 ? 0 : a << b;
    case KN_BIN_SHR: return b >= 64 ? 0 : a >> b;
    case KN_BIN_BITAND: case KN_BIN_AND: return a & b;
    case KN_BIN_BITOR: case KN_BIN_OR: return a | b;
    case KN_BIN_BITXOR: case KN_BIN_XOR: return a ^ b;
    case KN_BIN_MAX: return a > b ? a : b;
    case KN_BIN_MIN: return a < b ? a : b;
    case KN_BIN_PRELU: return a; /* never negative */
    default: return 0;
    }
}

static bool cmp(kn_binary_op op, kkind k, kval a, kval b)
{
    int c; /* -1, 0, 1; 2 for unordered (NaN) */
    if (k == KF) c = a.f < b.f ? -1 : a.f > b.f ? 1 : a.f == b.f ? 0 : 2;
    else if (k == KU) c = a.u < b.u ? -1 : a.u > b.u;
    else c = a.i < b.i ? -1 : a.i > b.i;
    switch (op) {
    case KN_BIN_EQ: return c == 0;
    case KN_BIN_GT: return c == 1;
    case KN_BIN_GE: return c == 1 || c == 0;
    case KN_BIN_LT: return c == -1;
    case KN_BIN_LE: return c == -1 || c == 0;
    case KN_BIN_AND: return (k == KF ? a.f != 0 : a.u != 0) && (k == KF ? b.f != 0 : b.u != 0);
    case KN_BIN_OR: return (k == KF ? a.f != 0 : a.u != 0) || (k == KF ? b.f != 0 : b.u != 0);
    case KN_BIN_XOR: return (k == KF ? a.f != 0 : a.u != 0) != (k == KF ? b.f != 0 : b.u != 0);
    default: return false;
    }
}

/* Integer power by squaring; negative exponents give what 1/x truncates to. */
static uint64_t ipow_u(uint64_t base, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1) r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}

static kval pow_mixed(kkind ka, kval a, kkind kb, kval b)
{
    kval r;
    if (ka == KF || kb == KF) {
        double x = ka == KF ? a.f : ka == KU ? (double)a.u : (double)a.i;
        double y = kb == KF ? b.f : kb == KU ? (double)b.u : (double)b.i;
        if (ka == KF) {
            r.f = pow(x, y);
        } else {
            /* integer base, float exponent: numpy computes in double and
             * truncates back to the base's type */
            kval t = {.f = pow(x, y)};
            r = t;
        }
        return r;
    }
    bool neg_exp = kb == KI && b.i < 0;
    uint64_t base = ka == KU ? a.u : (uint64_t)a.i;
    if (neg_exp) {
        int64_t sb = ka == KU ? (int64_t)(a.u == 1) : a.i;
        r.i = sb == 1 ? 1 : sb == -1 ? ((b.i & 1) ? -1 : 1) : 0;
        return r;
    }
    r.u = ipow_u(base, kb == KU ? b.u : (uint64_t)b.i);
    return r;
}

typedef struct bin_ctx {
    kn_binary_op op;
    const kn_tensor *a, *b;
    kn_tensor *out;
    kkind ka, kb;
    bool compare;
    bool float_result; /* POW with an integer base and a float exponent */
} bin_ctx;

/* f32 add/sub/mul/div, the bulk of most models' elementwise work, without
 * the generic load/store. Same results: double arithmetic rounded to float
 * is float arithmetic for these four ops. */
static bool bin_row_f32(const bin_ctx *c, int64_t len, int64_t o, const int64_t *off, const int64_t *step)
{
    if (c->a->dtype != KN_F32 || c->b->dtype != KN_F32 || c->out->dtype != KN_F32) return false;
    if (c->op != KN_BIN_ADD && c->op != KN_BIN_SUB && c->op != KN_BIN_MUL && c->op != KN_BIN_DIV) return false;
    const float *a = (const float *)c->a->data + off[0], *b = (const float *)c->b->data + off[1];
    float *y = (float *)c->out->data + o;
    int64_t sa = step[0], sb = step[1];
    switch (c->op) {
    case KN_BIN_ADD: for (int64_t j = 0; j < len; j++) y[j] = a[j * sa] + b[j * sb]; break;
    case KN_BIN_SUB: for (int64_t j = 0; j < len; j++) y[j] = a[j * sa] - b[j * sb]; break;
    case KN_BIN_MUL: for (int64_t j = 0; j < len; j++) y[j] = a[j * sa] * b[j * sb]; break;
    default: for (int64_t j = 0; j < len; j++) y[j] = a[j * sa] / b[j * sb]; break;
    }
    return true;
}

static void bin_row(void *vctx, int64_t len, int64_t o, const int64_t *off, const int64_t *step)
{
    bin_ctx *c = vctx;
    kn_dtype da = c->a->dtype, db = c->b->dtype, dout = c->out->dtype;
    if (bin_row_f32(c, len, o, off, step)) return;
    for (int64_t j = 0; j < len; j++) {
        kval a = load(da, c->ka, c->a->data, off[0] + j * step[0]);
        kval b = load(db, c->kb, c->b->data, off[1] + j * step[1]);
        kval r;
        if (c->compare) {
            kn_store_i64(dout, c->out->data, (size_t)(o + j), cmp(c->op, c->ka, a, b));
            continue;
        }
        if (c->op == KN_BIN_POW) {
            r = pow_mixed(c->ka, a, c->kb, b);
            store(dout, c->float_result ? KF : c->ka, c->out->data, o + j, r);
            continue;
        }
        if (c->ka == KF) r.f = bin_f(c->op, a.f, b.f);
        else if (c->ka == KU) r.u = bin_u(c->op, a.u, b.u);
        else r.i = bin_i(c->op, a.i, b.i);
        store(dout, c->ka, c->out->data, o + j, r);
    }
}

static bool bin_dtype_ok(kn_binary_op op, kn_dtype dt)
{
    const kn_dtype_traits *t = kn_dtype_info(dt);
    switch (op) {
    case KN_BIN_SHL: case KN_BIN_SHR: return t->is_integer && !t->is_signed;
    case KN_BIN_BITAND: case KN_BIN_BITOR: case KN_BIN_BITXOR: return t->is_integer || dt == KN_BOOL;
    case KN_BIN_AND: case KN_BIN_OR: case KN_BIN_XOR: case KN_BIN_EQ: return kn_dtype_valid(dt);
    default: return t->is_float || t->is_integer;
    }
}

int kn_k_binary(kn_binary_op op, const kn_tensor *a, const kn_tensor *b, kn_tensor *out)
{
    if ((int)op < 0 || op >= KN_BIN_COUNT) return kn_error(KN_ERR_INTERNAL, "unknown binary op %d", (int)op);
    if (!bin_dtype_ok(op, a->dtype))
        return kn_error(KN_ERR_UNSUPPORTED, "dtype %s is not supported by this op", kn_dtype_name(a->dtype));
    if (op == KN_BIN_POW ? !bin_dtype_ok(op, b->dtype) : a->dtype != b->dtype)
        return kn_error(KN_ERR_INVALID, "operands have dtypes %s and %s", kn_dtype_name(a->dtype),
                        kn_dtype_name(b->dtype));
    kn_dtype want = kn_k_binary_out_dtype(op, a->dtype);
    if (out->dtype != want)
        return kn_error(KN_ERR_INVALID, "output dtype %s, expected %s", kn_dtype_name(out->dtype),
                        kn_dtype_name(want));
    bin_ctx c = {op, a, b, out, kind_of(a->dtype), kind_of(b->dtype), is_compare(op), false};
    c.float_result = op == KN_BIN_POW && c.ka != KF && c.kb == KF;
    const kn_tensor *in[2] = {a, b};
    return bcast_walk(2, in, out, bin_row, &c);
}

/* ---- unary ops ------------------------------------------------------------ */

kn_dtype kn_k_unary_out_dtype(kn_unary_op op, kn_dtype x)
{
    return op == KN_UN_ISNAN || op == KN_UN_ISINF ? KN_BOOL : x;
}

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double un_f(kn_unary_op op, const kn_unary_params *p, double x)
{
    switch (op) {
    case KN_UN_ABS: return fabs(x);
    case KN_UN_NEG: return -x;
    case KN_UN_SIGN: return isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case KN_UN_CEIL: return ceil(x);
    case KN_UN_FLOOR: return floor(x);
    case KN_UN_ROUND: return nearbyint(x);
    case KN_UN_SQRT: return sqrt(x);
    case KN_UN_RECIPROCAL: return 1.0 / x;
    case KN_UN_EXP: return exp(x);
    case KN_UN_LOG: return log(x);
    case KN_UN_SIN: return sin(x);
    case KN_UN_COS: return cos(x);
    case KN_UN_TAN: return tan(x);
    case KN_UN_ASIN: return asin(x);
    case KN_UN_ACOS: return acos(x);
    case KN_UN_ATAN: return atan(x);
    case KN_UN_SINH: return sinh(x);
    case KN_UN_COSH: return cosh(x);
    case KN_UN_ASINH: return asinh(x);
    case KN_UN_ACOSH: return acosh(x);
    case KN_UN_ATANH: return atanh(x);
    case KN_UN_ERF: return erf(x);
    case KN_UN_ISNAN: return isnan(x) ? 1 : 0;
    case KN_UN_ISINF: return isinf(x) && ((x > 0 && p->detect_pos) || (x < 0 && p->detect_neg)) ? 1 : 0;
    case KN_UN_NOT: return x == 0;
    case KN_UN_RELU: return x > 0 ? x : isnan(x) ? x : 0.0;
    case KN_UN_LEAKYRELU: return x < 0 ? p->alpha * x : x;
    case KN_UN_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case KN_UN_HARDSIGMOID: return isnan(x) ? x : fmax(0.0, fmin(1.0, p->alpha * x + p->beta));
    case KN_UN_HARDSWISH: return isnan(x) ? x : x * fmax(0.0, fmin(1.0, x / 6.0 + 0.5));
    case KN_UN_TANH: return tanh(x);
    case KN_UN_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case KN_UN_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case KN_UN_SOFTPLUS: return softplus(x);
    case KN_UN_SOFTSIGN: return x / (1.0 + fabs(x));
    case KN_UN_ELU: return x < 0 ? p->alpha * expm1(x) : x;
    case KN_UN_SELU: return p->gamma * (x > 0 ? x : p->alpha * expm1(x));
    case KN_UN_CELU: return fmax(0.0, x) + fmin(0.0, p->alpha * expm1(x / p->alpha));
    case KN_UN_MISH: return x * tanh(softplus(x));
    case KN_UN_THRESHOLDEDRELU: return x > p->alpha ? x : 0.0;
    case KN_UN_SHRINK: return x < -p->alpha ? x + p->beta : x > p->alpha ? x - p->beta : 0.0;
    case KN_UN_SWISH: {
        double ax = p->alpha * x;
        return x * (ax >= 0 ? 1.0 / (1.0 + exp(-ax)) : exp(ax) / (1.0 + exp(ax)));
    }
    case KN_UN_DIV_BY: return x / p->alpha;
    default: return NAN;
    }
}

/* Integer forms of the ops that stay exact on integers; the rest of the ops
 * that accept integers compute in double (see un_row). */
static bool un_has_int_form(kn_unary_op op)
{
    return op == KN_UN_ABS || op == KN_UN_NEG || op == KN_UN_SIGN || op == KN_UN_NOT ||
           op == KN_UN_BITNOT || op == KN_UN_RELU;
}

static int64_t un_i(kn_unary_op op, int64_t x)
{
    switch (op) {
    case KN_UN_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case KN_UN_NEG: return (int64_t)(0 - (uint64_t)x);
    case KN_UN_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case KN_UN_NOT: return x == 0;
    case KN_UN_BITNOT: return ~x;
    case KN_UN_RELU: return x > 0 ? x : 0;
    default: return 0;
    }
}

static uint64_t un_u(kn_unary_op op, uint64_t x)
{
    switch (op) {
    case KN_UN_ABS: case KN_UN_RELU: return x;
    case KN_UN_NEG: return 0 - x;
    case KN_UN_SIGN: return x != 0;
    case KN_UN_NOT: return x == 0;
    case KN_UN_BITNOT: return ~x;
    default: return 0;
    }
}

typedef struct un_ctx {
    kn_unary_op op;
    const kn_unary_params *p;
    const kn_tensor *x;
    kn_tensor *out;
    kkind k;
} un_ctx;

static void un_row(void *vctx, int64_t len, int64_t o, const int64_t *off, const int64_t *step)
{
    un_ctx *c = vctx;
    kn_dtype dx = c->x->dtype, dout = c->out->dtype;
    bool int_form = c->k != KF && un_has_int_form(c->op);
    kkind k = int_form ? c->k : KF;
    for (int64_t j = 0; j < len; j++) {
        kval v = load(dx, k, c->x->data, off[0] + j * step[0]), r;
        if (k == KF) r.f = un_f(c->op, c->p, v.f);
        else if (k == KU) r.u = un_u(c->op, v.u);
        else r.i = un_i(c->op, v.i);
        store(dout, k, c->out->data, o + j, r);
    }
}

static bool un_dtype_ok(kn_unary_op op, kn_dtype dt)
{
    const kn_dtype_traits *t = kn_dtype_info(dt);
    switch (op) {
    case KN_UN_NOT: return dt == KN_BOOL;
    case KN_UN_BITNOT: return t->is_integer;
    case KN_UN_ABS: case KN_UN_NEG: case KN_UN_SIGN: case KN_UN_RELU: case KN_UN_ERF:
    case KN_UN_SHRINK: case KN_UN_LEAKYRELU: case KN_UN_DIV_BY:
        return t->is_float || t->is_integer;
    default: return t->is_float;
    }
}

int kn_k_unary(kn_unary_op op, const kn_unary_params *p, const kn_tensor *x, kn_tensor *out)
{
    static const kn_unary_params none = {0, 0, 0, true, true};
    if ((int)op < 0 || op >= KN_UN_COUNT) return kn_error(KN_ERR_INTERNAL, "unknown unary op %d", (int)op);
    if (!un_dtype_ok(op, x->dtype))
        return kn_error(KN_ERR_UNSUPPORTED, "dtype %s is not supported by this op", kn_dtype_name(x->dtype));
    kn_dtype want = kn_k_unary_out_dtype(op, x->dtype);
    if (out->dtype != want)
        return kn_error(KN_ERR_INVALID, "output dtype %s, expected %s", kn_dtype_name(out->dtype),
                        kn_dtype_name(want));
    un_ctx c = {op, p ? p : &none, x, out, kind_of(x->dtype)};
    const kn_tensor *in[1] = {x};
    return bcast_walk(1, in, out, un_row, &c);
}

/* ---- Clip ------------------------------------------------------------------ */

typedef struct clip_ctx {
    const kn_tensor *x;
    kn_tensor *out;
    kkind k;
    bool has_lo, has_hi;
    kval lo, hi;
} clip_ctx;

static void clip_row(void *vctx, int64_t len, int64_t o, const int64_t *off, const int64_t *step)
{
    clip_ctx *c = vctx;
    for (int64_t j = 0; j < len; j++) {
        kval v = load(c->x->dtype, c->k, c->x->data, off[0] + j * step[0]);
        if (c->k == KF) {
            if (c->has_lo && v.f < c->lo.f) v.f = c->lo.f;
            if (c->has_hi && v.f > c->hi.f) v.f = c->hi.f;
        } else if (c->k == KU) {
            if (c->has_lo && v.u < c->lo.u) v.u = c->lo.u;
            if (c->has_hi && v.u > c->hi.u) v.u = c->hi.u;
        } else {
            if (c->has_lo && v.i < c->lo.i) v.i = c->lo.i;
            if (c->has_hi && v.i > c->hi.i) v.i = c->hi.i;
        }
        store(c->out->dtype, c->k, c->out->data, o + j, v);
    }
}

static int clip_bound(const kn_tensor *t, kkind k, const char *what, bool *has, kval *v)
{
    *has = false;
    if (!t) return KN_OK;
    int st = check_data(t, what);
    if (st) return st;
    if (kn_tensor_numel(t) != 1) {
        char buf[160];
        return kn_error(KN_ERR_INVALID, "%s must hold one element, has shape %s", what,
                        kn_shape_str(t->rank, t->dims, buf, sizeof buf));
    }
    *v = load(t->dtype, k, t->data, 0);
    *has = true;
    return KN_OK;
}

int kn_k_clip(const kn_tensor *x, const kn_tensor *lo, const kn_tensor *hi, kn_tensor *out)
{
    const kn_dtype_traits *t = kn_dtype_info(x->dtype);
    if (!t->is_float && !t->is_integer)
        return kn_error(KN_ERR_UNSUPPORTED, "dtype %s is not supported by Clip", kn_dtype_name(x->dtype));
    if (out->dtype != x->dtype)
        return kn_error(KN_ERR_INVALID, "output dtype %s, expected %s", kn_dtype_name(out->dtype),
                        kn_dtype_name(x->dtype));
    clip_ctx c = {x, out, kind_of(x->dtype), false, false, {0}, {0}};
    int st = clip_bound(lo, c.k, "min", &c.has_lo, &c.lo);
    if (!st) st = clip_bound(hi, c.k, "max", &c.has_hi, &c.hi);
    if (st) return st;
    const kn_tensor *in[1] = {x};
    return bcast_walk(1, in, out, clip_row, &c);
}

/* ---- Where ----------------------------------------------------------------- */

typedef struct where_ctx {
    const kn_tensor *c, *x, *y;
    kn_tensor *out;
    size_t size; /* bytes per element; 0 for packed 4-bit types */
} where_ctx;

static void where_row(void *vctx, int64_t len, int64_t o, const int64_t *off, const int64_t *step)
{
    where_ctx *w = vctx;
    for (int64_t j = 0; j < len; j++) {
        bool pick_x = kn_load_i64(w->c->dtype, w->c->data, (size_t)(off[0] + j * step[0])) != 0;
        const kn_tensor *src = pick_x ? w->x : w->y;
        int64_t si = pick_x ? off[1] + j * step[1] : off[2] + j * step[2];
        if (w->size) {
            memcpy((char *)w->out->data + (size_t)(o + j) * w->size, (const char *)src->data + (size_t)si * w->size,
                   w->size);
        } else {
            kn_store_i64(w->out->dtype, w->out->data, (size_t)(o + j), kn_load_i64(src->dtype, src->data, (size_t)si));
        }
    }
}

int kn_k_where(const kn_tensor *cond, const kn_tensor *x, const kn_tensor *y, kn_tensor *out)
{
    if (cond->dtype != KN_BOOL)
        return kn_error(KN_ERR_INVALID, "condition has dtype %s, expected bool", kn_dtype_name(cond->dtype));
    if (x->dtype != y->dtype || out->dtype != x->dtype)
        return kn_error(KN_ERR_INVALID, "X, Y and output have dtypes %s, %s and %s; they must agree",
                        kn_dtype_name(x->dtype), kn_dtype_name(y->dtype), kn_dtype_name(out->dtype));
    where_ctx w = {cond, x, y, out, kn_dtype_size(x->dtype)};
    const kn_tensor *in[3] = {cond, x, y};
    return bcast_walk(3, in, out, where_row, &w);
}

/* ---- Cast ------------------------------------------------------------------- */

typedef struct cast_ctx {
    const kn_tensor *x;
    kn_tensor *out;
    kkind kx;
} cast_ctx;

static void cast_row(void *vctx, int64_t len, int64_t o, const int64_t *off, const int64_t *step)
{
    cast_ctx *c = vctx;
    kn_dtype dx = c->x->dtype, dout = c->out->dtype;
    for (int64_t j = 0; j < len; j++) {
        kval v = load(dx, c->kx, c->x->data, off[0] + j * step[0]);
        if (dout == KN_BOOL) {
            ((uint8_t *)c->out->data)[o + j] = c->kx == KF ? v.f != 0 : v.u != 0;
        } else if (dout == KN_F32 && c->kx != KF) {
            /* one rounding from the integer, like numpy (not via double) */
            ((float *)c->out->data)[o + j] = c->kx == KU ? (float)v.u : (float)v.i;
        } else {
            store(dout, c->kx, c->out->data, o + j, v);
        }
    }
}

int kn_k_cast(const kn_tensor *x, kn_tensor *out)
{
    char sa[160], sb[160];
    int st = check_data(x, "input");
    if (!st) st = check_data(out, "output");
    if (st) return st;
    if (x->rank != out->rank || memcmp(x->dims, out->dims, sizeof(int64_t) * (size_t)x->rank))
        return kn_error(KN_ERR_INVALID, "output shape %s differs from input shape %s",
                        kn_shape_str(out->rank, out->dims, sa, sizeof sa),
                        kn_shape_str(x->rank, x->dims, sb, sizeof sb));
    if (!kn_dtype_valid(x->dtype) || !kn_dtype_valid(out->dtype))
        return kn_error(KN_ERR_UNSUPPORTED, "cast from %s to %s is not supported", kn_dtype_name(x->dtype),
                        kn_dtype_name(out->dtype));
    cast_ctx c = {x, out, kind_of(x->dtype)};
    const kn_tensor *in[1] = {x};
    return bcast_walk(1, in, out, cast_row, &c);
}
