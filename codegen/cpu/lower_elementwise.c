/*
 * codegen/cpu/lower_elementwise.c — generated loop nests for the elementwise
 * family (see cg.h): unary math and activations, binary and variadic
 * arithmetic, comparisons and logic with numpy broadcasting, Clip, Where,
 * Cast/CastLike.
 *
 * Every op goes through one emitter (emit_map): it iterates the output shape
 * with nested counted loops over the collapsed shape (axes of size 1 dropped,
 * neighbouring axes merged wherever every operand walks them contiguously),
 * so equal shapes become one flat loop and the innermost loop is contiguous
 * for the output: what LLVM's O3 vectorizer wants. Each operand is addressed
 * with its broadcast strides (0 on broadcast axes); a body callback turns the
 * loaded operand values into the output value.
 *
 * Results follow the runtime kernels (runtime/kernels/elementwise.c): the
 * same NaN rules (Max/Min propagate NaN, Relu keeps NaN, Sign keeps NaN),
 * integer division and modulo by 0 give 0, shifts past the width give 0,
 * Cast saturates floats to int64 before wrapping. Floats compute in float
 * (double for f64) with formulas chosen to stay within 1e-5 relative of the
 * kernels' double arithmetic (erfc for Gelu, a two-sided sigmoid, expm1,
 * log1p). Anything whose result could differ is left to the runtime kernel
 * (KN_ERR_UNSUPPORTED before anything is emitted).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cg.h"
#include "elementwise_int.h"
#include "fused_int.h"
#include "eval.h"

#define EW_MAX_OPS 16
#define POW_ANY 1e300 /* ew_ctx.pow_const: no constant exponent to specialize */

/* ---- small helpers ------------------------------------------------------------ */

static bool is_float_dt(kn_dtype dt) { return kn_dtype_info(dt)->is_float; }
static bool is_int_dt(kn_dtype dt) { return kn_dtype_info(dt)->is_integer; }
static bool is_signed_dt(kn_dtype dt) { return kn_dtype_info(dt)->is_signed; }

/* True for the dtypes emit_map can load and store. */
static bool dt_ok(kn_cg *cg, kn_dtype dt)
{
    return dt == KN_BOOL || ((is_float_dt(dt) || is_int_dt(dt)) && kn_cg_elem_type(cg, dt) != NULL);
}

static LLVMValueRef cf(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }

static LLVMValueRef fcmp(kn_cg *cg, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildFCmp(cg->b, p, a, b, "");
}

static LLVMValueRef sel(kn_cg *cg, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(cg->b, c, a, b, "");
}

static LLVMValueRef intr1(kn_cg *cg, const char *name, LLVMValueRef x)
{
    return kn_cg_intrinsic(cg, name, LLVMTypeOf(x), &x, 1);
}

static LLVMValueRef intr2(kn_cg *cg, const char *name, LLVMValueRef x, LLVMValueRef y)
{
    LLVMValueRef a[2] = {x, y};
    return kn_cg_intrinsic(cg, name, LLVMTypeOf(x), a, 2);
}

/* C math function `base` ("tanh") for float ("tanhf") or double. */
static LLVMValueRef libm1(kn_cg *cg, const char *base, LLVMValueRef x)
{
    char name[32];
    LLVMTypeRef t = LLVMTypeOf(x);
    snprintf(name, sizeof name, "%s%s", base, t == cg->t_float ? "f" : "");
    return kn_cg_libm(cg, name, t, &x, 1);
}

/* llvm.fptosi.sat.i64.<float type>: NaN → 0, out of range → INT64_MIN/MAX,
 * the kernel's float → int64 rule. Overloaded on two types, so not through
 * kn_cg_intrinsic. */
static LLVMValueRef fptosi_sat_i64(kn_cg *cg, LLVMValueRef x)
{
    static const char name[] = "llvm.fptosi.sat";
    unsigned id = LLVMLookupIntrinsicID(name, sizeof name - 1);
    LLVMTypeRef tys[2] = {cg->t_i64, LLVMTypeOf(x)};
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(cg->mod, id, tys, 2);
    LLVMTypeRef fty = LLVMIntrinsicGetType(cg->ctx, id, tys, 2);
    return LLVMBuildCall2(cg->b, fty, fn, &x, 1, "");
}

static LLVMValueRef bool_i8(kn_cg *cg, LLVMValueRef i1) { return LLVMBuildZExt(cg->b, i1, cg->t_i8, ""); }

/* ---- the broadcasting loop nest ----------------------------------------------- */

typedef struct ew_ctx ew_ctx;
typedef LLVMValueRef (*ew_body)(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v);

struct ew_ctx {
    const kn_node *n;
    int n_ops;
    const kn_value *ops[EW_MAX_OPS];
    bool raw[EW_MAX_OPS];     /* load the stored bits as they are (Where's X/Y) */
    bool out_raw;
    kn_dtype dt;              /* dtype of the (first) data operand */
    kn_dtype out_dt;
    int kop;                  /* kn_unary_op or kn_binary_op */
    kn_unary_params p;
    LLVMValueRef lo, hi;      /* Clip bounds (NULL: none) */
    float qscale;             /* QuantizeLinear/DequantizeLinear per tensor: scale, zero point */
    int64_t qzp;
    double pow_const;         /* Pow by this constant exponent (POW_ANY: not one of the special cases) */
    ew_body body;
    /* kiln::FusedElementwise: its steps, and each Pow step's constant exponent */
    const kn_ew_program *prog;
    double step_pow[KN_EW_MAX_STEPS];
    LLVMValueRef lut; /* an 8-bit program as a [256 x i8] table (lower_fused_lut) */
};

static LLVMValueRef load_raw(kn_cg *cg, kn_dtype dt, LLVMValueRef base, LLVMValueRef idx)
{
    LLVMTypeRef et = kn_cg_elem_type(cg, dt);
    LLVMValueRef p = LLVMBuildGEP2(cg->b, et, base, &idx, 1, "");
    return LLVMBuildLoad2(cg->b, et, p, "");
}

static void store_raw(kn_cg *cg, kn_dtype dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v)
{
    LLVMTypeRef et = kn_cg_elem_type(cg, dt);
    LLVMValueRef p = LLVMBuildGEP2(cg->b, et, base, &idx, 1, "");
    LLVMBuildStore(cg->b, v, p);
}

/* The iteration space: output dims and each operand's element strides,
 * collapsed to as few axes as possible. */
typedef struct ew_space {
    int rank;
    int64_t dims[KN_MAX_RANK];
    int64_t str[EW_MAX_OPS + 1][KN_MAX_RANK]; /* [n_ops] is the output */
} ew_space;

/* Fails (false) when a shape is not static or does not broadcast to y's. */
static bool build_space(const ew_ctx *c, const kn_value *y, ew_space *s)
{
    int r = y->shape.rank;
    int nk = c->n_ops + 1;
    int64_t str[EW_MAX_OPS + 1][KN_MAX_RANK];
    for (int k = 0; k < nk; k++) {
        const kn_value *v = k < c->n_ops ? c->ops[k] : y;
        if (!kn_shape_is_static(&v->shape) || v->shape.rank > r) {
            if (!kn_shape_is_static(&v->shape) || kn_cg_numel(v) != 1) return false;
        }
        bool scalar = kn_cg_numel(v) == 1;
        int64_t acc = 1;
        for (int i = r - 1; i >= 0; i--) {
            int j = i - (r - v->shape.rank);
            int64_t d = j >= 0 ? v->shape.dims[j] : 1;
            if (!scalar && d != 1 && d != y->shape.dims[i]) return false;
            str[k][i] = scalar || d == 1 ? 0 : acc;
            acc *= d;
        }
    }
    /* drop size-1 axes, then merge an axis into the next one when every
     * operand steps through both as one */
    s->rank = 0;
    for (int i = 0; i < r; i++) {
        int64_t d = y->shape.dims[i];
        if (d == 1) continue;
        int q = s->rank;
        bool merge = q > 0;
        for (int k = 0; merge && k < nk; k++) merge = str[k][i] * d == s->str[k][q - 1];
        if (merge) {
            s->dims[q - 1] *= d;
            for (int k = 0; k < nk; k++) s->str[k][q - 1] = str[k][i];
            continue;
        }
        s->dims[q] = d;
        for (int k = 0; k < nk; k++) s->str[k][q] = str[k][i];
        s->rank++;
    }
    if (s->rank == 0) { /* a single element */
        s->rank = 1;
        s->dims[0] = 1;
        for (int k = 0; k < nk; k++) s->str[k][0] = 0;
    }
    return true;
}

static LLVMValueRef add_scaled(kn_cg *cg, LLVMValueRef off, LLVMValueRef iv, int64_t stride)
{
    if (stride == 0) return off;
    LLVMValueRef t = stride == 1 ? iv : LLVMBuildMul(cg->b, iv, kn_cg_i64(cg, stride), "");
    return off ? LLVMBuildAdd(cg->b, off, t, "") : t;
}

/* Emits the loop nest computing y = body(operands). Returns UNSUPPORTED (and
 * emits nothing) when the shapes do not allow it. */
static int emit_map(kn_cg *cg, const ew_ctx *c, const kn_value *y)
{
    ew_space s;
    if (!y || !kn_shape_is_static(&y->shape) || !build_space(c, y, &s)) return KN_ERR_UNSUPPORTED;
    if (kn_cg_numel(y) == 0) return KN_OK;
    int nk = c->n_ops + 1;
    LLVMValueRef base[EW_MAX_OPS + 1];
    for (int k = 0; k < c->n_ops; k++) base[k] = kn_cg_ptr(cg, c->ops[k]);
    base[c->n_ops] = kn_cg_ptr(cg, y);

    kn_cg_loop loops[KN_MAX_RANK];
    LLVMValueRef off[EW_MAX_OPS + 1] = {0};
    for (int l = 0; l < s.rank; l++) {
        LLVMValueRef iv = kn_cg_loop_begin(cg, &loops[l], s.dims[l], l == s.rank - 1 ? "i" : "o");
        for (int k = 0; k < nk; k++) off[k] = add_scaled(cg, off[k], iv, s.str[k][l]);
    }
    LLVMValueRef v[EW_MAX_OPS];
    for (int k = 0; k < c->n_ops; k++) {
        LLVMValueRef idx = off[k] ? off[k] : kn_cg_i64(cg, 0);
        kn_dtype dt = c->ops[k]->dtype;
        v[k] = c->raw[k] ? load_raw(cg, dt, base[k], idx) : kn_cg_load(cg, dt, base[k], idx);
    }
    LLVMValueRef r = c->body(cg, c, v);
    LLVMValueRef oidx = off[c->n_ops] ? off[c->n_ops] : kn_cg_i64(cg, 0);
    if (c->out_raw) store_raw(cg, y->dtype, base[c->n_ops], oidx, r);
    else kn_cg_store(cg, y->dtype, base[c->n_ops], oidx, r);
    for (int l = s.rank - 1; l >= 0; l--) kn_cg_loop_end(cg, &loops[l]);
    return KN_OK;
}

/* Fills the common part of a context from n's inputs [0, n_ops). */
static bool ctx_init(kn_cg *cg, ew_ctx *c, const kn_node *n, int n_ops, ew_body body)
{
    memset(c, 0, sizeof *c);
    if (n_ops < 1 || n_ops > EW_MAX_OPS || n->n_inputs < n_ops || n->n_outputs < 1 || !n->outputs[0]) return false;
    c->n = n;
    c->n_ops = n_ops;
    c->body = body;
    for (int k = 0; k < n_ops; k++) {
        c->ops[k] = n->inputs[k];
        if (!c->ops[k] || !dt_ok(cg, c->ops[k]->dtype)) return false;
    }
    c->dt = c->ops[0]->dtype;
    c->out_dt = n->outputs[0]->dtype;
    return dt_ok(cg, c->out_dt);
}

/* ---- vectorizable float approximations ------------------------------------------
 * libm calls keep LLVM from vectorizing a loop, so the float forms of exp,
 * tanh and erf are polynomials (Cephes expf; Eigen's rational tanh and erf).
 * Measured against double libm over dense grids: exp 1.2e-7, tanh 4e-7, erf
 * 4.3e-7 relative (normal results). NaN is passed through explicitly because
 * the clamps (minnum/maxnum) would drop it. */

static LLVMValueRef poly(kn_cg *cg, LLVMValueRef x, const double *c, int n)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef y = cf(t, c[0]);
    for (int i = 1; i < n; i++) y = LLVMBuildFAdd(cg->b, LLVMBuildFMul(cg->b, y, x, ""), cf(t, c[i]), "");
    return y;
}

static LLVMValueRef clampf(kn_cg *cg, LLVMValueRef x, double lo, double hi)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    return intr2(cg, "llvm.minnum", intr2(cg, "llvm.maxnum", x, cf(t, lo)), cf(t, hi));
}

/* 2^n for an i32 n in [-75, 65] (an exponent field that stays normal). */
static LLVMValueRef pow2i(kn_cg *cg, LLVMValueRef n)
{
    LLVMValueRef e = LLVMBuildShl(cg->b, LLVMBuildAdd(cg->b, n, kn_cg_i32(cg, 127), ""), kn_cg_i32(cg, 23), "");
    return LLVMBuildBitCast(cg->b, e, cg->t_float, "");
}

static LLVMValueRef fast_expf(kn_cg *cg, LLVMValueRef x)
{
    static const double p[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                               4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = cg->t_float;
    LLVMValueRef xc = clampf(cg, x, -104.0, 89.0); /* past these: 0 and inf */
    /* n = round(x log2 e) by the 1.5 * 2^23 trick: cheaper than a floor */
    LLVMValueRef magic = cf(t, 12582912.0);
    LLVMValueRef fx = LLVMBuildFSub(b, LLVMBuildFAdd(b, LLVMBuildFMul(b, xc, cf(t, M_LOG2E), ""), magic, ""), magic, "");
    LLVMValueRef r = LLVMBuildFSub(b, xc, LLVMBuildFMul(b, fx, cf(t, 0.693359375), ""), "");
    r = LLVMBuildFSub(b, r, LLVMBuildFMul(b, fx, cf(t, -2.12194440e-4), ""), "");
    LLVMValueRef y = poly(cg, r, p, 6);
    y = LLVMBuildFAdd(b, LLVMBuildFAdd(b, LLVMBuildFMul(b, y, LLVMBuildFMul(b, r, r, ""), ""), r, ""), cf(t, 1), "");
    /* scale by 2^n in two steps so that results near overflow and in the
     * subnormal range are rounded once, by the last multiplication */
    LLVMValueRef n = LLVMBuildFPToSI(b, fx, cg->t_i32, "");
    LLVMValueRef n1 = LLVMBuildAShr(b, n, kn_cg_i32(cg, 1), ""), n2 = LLVMBuildSub(b, n, n1, "");
    y = LLVMBuildFMul(b, LLVMBuildFMul(b, y, pow2i(cg, n1), ""), pow2i(cg, n2), "");
    return sel(cg, fcmp(cg, LLVMRealUNO, x, x), x, y);
}

static LLVMValueRef fast_tanhf(kn_cg *cg, LLVMValueRef x)
{
    static const double a[] = {-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                               5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                               4.89352455891786e-03};
    static const double bq[] = {1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                                4.89352518554385e-03};
    LLVMBuilderRef b = cg->b;
    LLVMValueRef xc = clampf(cg, x, -7.90531110763549805, 7.90531110763549805);
    LLVMValueRef x2 = LLVMBuildFMul(b, xc, xc, "");
    LLVMValueRef num = LLVMBuildFMul(b, poly(cg, x2, a, 7), xc, "");
    LLVMValueRef r = LLVMBuildFDiv(b, num, poly(cg, x2, bq, 4), "");
    LLVMValueRef tiny = fcmp(cg, LLVMRealOLT, intr1(cg, "llvm.fabs", x), cf(cg->t_float, 0.0004));
    return sel(cg, LLVMBuildOr(b, tiny, fcmp(cg, LLVMRealUNO, x, x), ""), x, r);
}

static LLVMValueRef fast_erff(kn_cg *cg, LLVMValueRef x)
{
    static const double a[] = {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                               -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                               -1.60960333262415e-02};
    static const double bq[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                                -7.37332916720468e-03, -1.42647390514189e-02};
    LLVMBuilderRef b = cg->b;
    LLVMValueRef xc = clampf(cg, x, -4.0, 4.0);
    LLVMValueRef x2 = LLVMBuildFMul(b, xc, xc, "");
    LLVMValueRef num = LLVMBuildFMul(b, poly(cg, x2, a, 7), xc, "");
    LLVMValueRef r = LLVMBuildFDiv(b, num, poly(cg, x2, bq, 5), "");
    return sel(cg, fcmp(cg, LLVMRealUNO, x, x), x, r);
}

/* erfc(u) for float, vectorizable, without cancellation for large u:
 * erfc(z) = t exp(-z^2 + P(t)), t = 1/(1 + z/2), z = |u|, with the
 * Chebyshev-fitted degree-9 P of Numerical Recipes' erfcc (fractional error
 * below 1.2e-7 for every z >= 0); erfc(-z) = 2 - erfc(z). Gelu needs it:
 * libm's erfcf is a scalar call and made a Gelu node ~10x slower than the
 * Div/Erf/Add/Mul chain it replaces. */
static LLVMValueRef fast_erfcf(kn_cg *cg, LLVMValueRef u)
{
    static const double p[] = {0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
                               -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223};
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = cg->t_float;
    LLVMValueRef z = intr1(cg, "llvm.fabs", u);
    LLVMValueRef tt = LLVMBuildFDiv(b, cf(t, 1), LLVMBuildFAdd(b, cf(t, 1), LLVMBuildFMul(b, z, cf(t, 0.5), ""), ""), "");
    LLVMValueRef arg = LLVMBuildFSub(b, poly(cg, tt, p, 10), LLVMBuildFMul(b, z, z, ""), "");
    LLVMValueRef r = LLVMBuildFMul(b, tt, fast_expf(cg, arg), "");
    return sel(cg, fcmp(cg, LLVMRealOGE, u, cf(t, 0)), r, LLVMBuildFSub(b, cf(t, 2), r, ""));
}

/* Cephes logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), a degree-9
 * polynomial in m - 1, ln2 split in two; subnormals are scaled up first.
 * 8e-8 relative on (0, FLT_MAX]. */
static LLVMValueRef fast_logf(kn_cg *cg, LLVMValueRef x)
{
    static const double p[] = {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1,
                               1.4249322787E-1, -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1,
                               3.3333331174E-1};
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = cg->t_float, i32 = cg->t_i32;
    LLVMValueRef sub = fcmp(cg, LLVMRealOLT, x, cf(t, FLT_MIN));
    LLVMValueRef xs = sel(cg, sub, LLVMBuildFMul(b, x, cf(t, 8388608.0), ""), x);
    LLVMValueRef u = LLVMBuildBitCast(b, xs, i32, "");
    LLVMValueRef e = LLVMBuildSub(b, LLVMBuildAnd(b, LLVMBuildLShr(b, u, kn_cg_i32(cg, 23), ""), kn_cg_i32(cg, 0xff), ""),
                                  kn_cg_i32(cg, 126), "");
    e = LLVMBuildSub(b, e, sel(cg, sub, kn_cg_i32(cg, 23), kn_cg_i32(cg, 0)), "");
    LLVMValueRef mu = LLVMBuildOr(b, LLVMBuildAnd(b, u, LLVMConstInt(i32, 0x807fffffu, 0), ""), kn_cg_i32(cg, 0x3f000000), "");
    LLVMValueRef m = LLVMBuildBitCast(b, mu, t, ""); /* [0.5, 1) */
    LLVMValueRef lt = fcmp(cg, LLVMRealOLT, m, cf(t, M_SQRT1_2));
    LLVMValueRef fe = LLVMBuildSIToFP(b, LLVMBuildSub(b, e, LLVMBuildZExt(b, lt, i32, ""), ""), t, "");
    m = LLVMBuildFSub(b, sel(cg, lt, LLVMBuildFAdd(b, m, m, ""), m), cf(t, 1), "");
    LLVMValueRef z = LLVMBuildFMul(b, m, m, "");
    LLVMValueRef y = LLVMBuildFMul(b, LLVMBuildFMul(b, poly(cg, m, p, 9), m, ""), z, "");
    y = LLVMBuildFAdd(b, y, LLVMBuildFMul(b, fe, cf(t, -2.12194440e-4), ""), "");
    y = LLVMBuildFAdd(b, y, LLVMBuildFMul(b, z, cf(t, -0.5), ""), "");
    LLVMValueRef r = LLVMBuildFAdd(b, LLVMBuildFAdd(b, m, y, ""), LLVMBuildFMul(b, fe, cf(t, 0.693359375), ""), "");
    /* log(0) = -inf, log(inf) = inf, log(<0) = log(NaN) = NaN */
    r = sel(cg, fcmp(cg, LLVMRealOEQ, x, cf(t, INFINITY)), x, r);
    r = sel(cg, fcmp(cg, LLVMRealOEQ, x, cf(t, 0)), cf(t, -INFINITY), r);
    return sel(cg, fcmp(cg, LLVMRealULT, x, cf(t, 0)), cf(t, NAN), r);
}

/* log1p(x) = log(u) * x / (u - 1) with u = 1 + x (Goldberg): the rounding
 * of u cancels out. 1.7e-7 relative on (0, 1]. */
static LLVMValueRef fast_log1pf(kn_cg *cg, LLVMValueRef x)
{
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = cg->t_float;
    LLVMValueRef u = LLVMBuildFAdd(b, cf(t, 1), x, ""), d = LLVMBuildFSub(b, u, cf(t, 1), "");
    LLVMValueRef r = LLVMBuildFMul(b, fast_logf(cg, u), LLVMBuildFDiv(b, x, d, ""), "");
    r = sel(cg, fcmp(cg, LLVMRealOEQ, u, cf(t, INFINITY)), u, r);
    return sel(cg, fcmp(cg, LLVMRealOEQ, d, cf(t, 0)), x, r);
}

/* expm1: Taylor to x^8 below |x| = 0.5 (no cancellation), exp(x) - 1
 * above. 1.3e-7 relative. */
static LLVMValueRef fast_expm1f(kn_cg *cg, LLVMValueRef x)
{
    static const double p[] = {1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1};
    LLVMTypeRef t = cg->t_float;
    LLVMValueRef small = LLVMBuildFMul(cg->b, poly(cg, x, p, 8), x, "");
    LLVMValueRef big = LLVMBuildFSub(cg->b, fast_expf(cg, x), cf(t, 1), "");
    return sel(cg, fcmp(cg, LLVMRealOLT, intr1(cg, "llvm.fabs", x), cf(t, 0.5)), small, big);
}

static LLVMValueRef vexp(kn_cg *cg, LLVMValueRef x)
{
    return LLVMTypeOf(x) == cg->t_float ? fast_expf(cg, x) : intr1(cg, "llvm.exp", x);
}

/* A math function by its C name: the vectorizable form for float where
 * there is one, libm otherwise. */
static LLVMValueRef vmath(kn_cg *cg, const char *name, LLVMValueRef x)
{
    if (LLVMTypeOf(x) == cg->t_float) {
        if (!strcmp(name, "log1p")) return fast_log1pf(cg, x);
        if (!strcmp(name, "expm1")) return fast_expm1f(cg, x);
        if (!strcmp(name, "tanh")) return fast_tanhf(cg, x);
        if (!strcmp(name, "erf")) return fast_erff(cg, x);
        if (!strcmp(name, "log")) return fast_logf(cg, x);
    }
    return libm1(cg, name, x);
}

/* ---- unary ops ------------------------------------------------------------------- */

/* 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below: one exp of -|x|, no overflow and
 * no cancellation (the kernel's two-sided formula). */
static LLVMValueRef sigmoid(kn_cg *cg, LLVMValueRef x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef e = vexp(cg, LLVMBuildFNeg(cg->b, intr1(cg, "llvm.fabs", x), ""));
    LLVMValueRef d = LLVMBuildFAdd(cg->b, cf(t, 1), e, "");
    LLVMValueRef num = sel(cg, fcmp(cg, LLVMRealOGE, x, cf(t, 0)), cf(t, 1), e);
    return LLVMBuildFDiv(cg->b, num, d, "");
}

/* log(1+e^x) as x + log1p(e^-x) for x > 0, log1p(e^x) otherwise. */
static LLVMValueRef softplus(kn_cg *cg, LLVMValueRef x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef e = vexp(cg, LLVMBuildFNeg(cg->b, intr1(cg, "llvm.fabs", x), ""));
    LLVMValueRef l = vmath(cg, "log1p", e);
    return sel(cg, fcmp(cg, LLVMRealOGT, x, cf(t, 0)), LLVMBuildFAdd(cg->b, x, l, ""), l);
}

static LLVMValueRef clamp01(kn_cg *cg, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    return intr2(cg, "llvm.maxnum", cf(t, 0), intr2(cg, "llvm.minnum", cf(t, 1), v));
}

static LLVMValueRef un_float(kn_cg *cg, const ew_ctx *c, LLVMValueRef x)
{
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = cf(t, 0), one = cf(t, 1);
    const kn_unary_params *p = &c->p;
    LLVMValueRef isnan = fcmp(cg, LLVMRealUNO, x, x);
    switch ((kn_unary_op)c->kop) {
    case KN_UN_ABS: return intr1(cg, "llvm.fabs", x);
    case KN_UN_NEG: return LLVMBuildFNeg(b, x, "");
    case KN_UN_SIGN:
        return sel(cg, fcmp(cg, LLVMRealOGT, x, zero), one,
                   sel(cg, fcmp(cg, LLVMRealOLT, x, zero), cf(t, -1), sel(cg, isnan, x, zero)));
    case KN_UN_CEIL: return intr1(cg, "llvm.ceil", x);
    case KN_UN_FLOOR: return intr1(cg, "llvm.floor", x);
    case KN_UN_ROUND: return intr1(cg, "llvm.roundeven", x);
    case KN_UN_SQRT: return intr1(cg, "llvm.sqrt", x);
    case KN_UN_RECIPROCAL: return LLVMBuildFDiv(b, one, x, "");
    case KN_UN_EXP: return vexp(cg, x);
    case KN_UN_LOG: return t == cg->t_float ? fast_logf(cg, x) : intr1(cg, "llvm.log", x);
    case KN_UN_SIN: return intr1(cg, "llvm.sin", x);
    case KN_UN_COS: return intr1(cg, "llvm.cos", x);
    case KN_UN_TAN: return libm1(cg, "tan", x);
    case KN_UN_ASIN: return libm1(cg, "asin", x);
    case KN_UN_ACOS: return libm1(cg, "acos", x);
    case KN_UN_ATAN: return libm1(cg, "atan", x);
    case KN_UN_SINH: return libm1(cg, "sinh", x);
    case KN_UN_COSH: return libm1(cg, "cosh", x);
    case KN_UN_ASINH: return libm1(cg, "asinh", x);
    case KN_UN_ACOSH: return libm1(cg, "acosh", x);
    case KN_UN_ATANH: return libm1(cg, "atanh", x);
    case KN_UN_ERF: return vmath(cg, "erf", x);
    case KN_UN_TANH: return vmath(cg, "tanh", x);
    case KN_UN_ISNAN: return bool_i8(cg, isnan);
    case KN_UN_ISINF: {
        LLVMValueRef r = LLVMConstInt(cg->t_i1, 0, 0);
        if (p->detect_pos) r = LLVMBuildOr(b, r, fcmp(cg, LLVMRealOEQ, x, cf(t, INFINITY)), "");
        if (p->detect_neg) r = LLVMBuildOr(b, r, fcmp(cg, LLVMRealOEQ, x, cf(t, -INFINITY)), "");
        return bool_i8(cg, r);
    }
    case KN_UN_RELU: return sel(cg, fcmp(cg, LLVMRealUGT, x, zero), x, zero); /* NaN stays */
    case KN_UN_LEAKYRELU: return sel(cg, fcmp(cg, LLVMRealOLT, x, zero), LLVMBuildFMul(b, cf(t, p->alpha), x, ""), x);
    case KN_UN_SIGMOID: return sigmoid(cg, x);
    case KN_UN_HARDSIGMOID: {
        LLVMValueRef v = LLVMBuildFAdd(b, LLVMBuildFMul(b, cf(t, p->alpha), x, ""), cf(t, p->beta), "");
        return sel(cg, isnan, x, clamp01(cg, v));
    }
    case KN_UN_HARDSWISH: {
        LLVMValueRef v = LLVMBuildFAdd(b, LLVMBuildFDiv(b, x, cf(t, 6), ""), cf(t, 0.5), "");
        return sel(cg, isnan, x, LLVMBuildFMul(b, x, clamp01(cg, v), ""));
    }
    case KN_UN_GELU: { /* 0.5 x (1 + erf(x/√2)) = 0.5 x erfc(-x/√2): no cancellation for x << 0 */
        LLVMValueRef u = LLVMBuildFMul(b, x, cf(t, -M_SQRT1_2), "");
        LLVMValueRef ec = t == cg->t_float ? fast_erfcf(cg, u) : libm1(cg, "erfc", u);
        return LLVMBuildFMul(b, LLVMBuildFMul(b, cf(t, 0.5), x, ""), ec, "");
    }
    case KN_UN_GELU_TANH: { /* 0.5 (1 + tanh(u)) = sigmoid(2u) */
        LLVMValueRef x3 = LLVMBuildFMul(b, LLVMBuildFMul(b, x, x, ""), x, "");
        LLVMValueRef u = LLVMBuildFAdd(b, x, LLVMBuildFMul(b, cf(t, 0.044715), x3, ""), "");
        u = LLVMBuildFMul(b, u, cf(t, 2.0 * sqrt(2.0 / M_PI)), "");
        return LLVMBuildFMul(b, x, sigmoid(cg, u), "");
    }
    case KN_UN_SOFTPLUS: return softplus(cg, x);
    case KN_UN_SOFTSIGN: return LLVMBuildFDiv(b, x, LLVMBuildFAdd(b, one, intr1(cg, "llvm.fabs", x), ""), "");
    case KN_UN_ELU:
        return sel(cg, fcmp(cg, LLVMRealOLT, x, zero), LLVMBuildFMul(b, cf(t, p->alpha), vmath(cg, "expm1", x), ""), x);
    case KN_UN_SELU: {
        LLVMValueRef neg = LLVMBuildFMul(b, cf(t, p->alpha), vmath(cg, "expm1", x), "");
        return LLVMBuildFMul(b, cf(t, p->gamma), sel(cg, fcmp(cg, LLVMRealOGT, x, zero), x, neg), "");
    }
    case KN_UN_CELU: {
        LLVMValueRef e = vmath(cg, "expm1", LLVMBuildFDiv(b, x, cf(t, p->alpha), ""));
        LLVMValueRef neg = intr2(cg, "llvm.minnum", zero, LLVMBuildFMul(b, cf(t, p->alpha), e, ""));
        return LLVMBuildFAdd(b, intr2(cg, "llvm.maxnum", zero, x), neg, "");
    }
    case KN_UN_MISH: return LLVMBuildFMul(b, x, vmath(cg, "tanh", softplus(cg, x)), "");
    case KN_UN_THRESHOLDEDRELU: return sel(cg, fcmp(cg, LLVMRealOGT, x, cf(t, p->alpha)), x, zero);
    case KN_UN_SWISH: return LLVMBuildFMul(b, x, sigmoid(cg, LLVMBuildFMul(b, cf(t, p->alpha), x, "")), "");
    case KN_UN_SHRINK: {
        LLVMValueRef l = cf(t, p->alpha), bias = cf(t, p->beta);
        LLVMValueRef hi = sel(cg, fcmp(cg, LLVMRealOGT, x, l), LLVMBuildFSub(b, x, bias, ""), zero);
        return sel(cg, fcmp(cg, LLVMRealOLT, x, cf(t, -p->alpha)), LLVMBuildFAdd(b, x, bias, ""), hi);
    }
    default: return NULL;
    }
}

static LLVMValueRef un_int(kn_cg *cg, const ew_ctx *c, LLVMValueRef x)
{
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0);
    bool sg = is_signed_dt(c->dt);
    switch ((kn_unary_op)c->kop) {
    case KN_UN_ABS: return sg ? sel(cg, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), LLVMBuildNeg(b, x, ""), x) : x;
    case KN_UN_NEG: return LLVMBuildNeg(b, x, "");
    case KN_UN_SIGN:
        if (!sg) return LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntNE, x, zero, ""), t, "");
        return sel(cg, LLVMBuildICmp(b, LLVMIntSGT, x, zero, ""), LLVMConstInt(t, 1, 0),
                   sel(cg, LLVMBuildICmp(b, LLVMIntSLT, x, zero, ""), LLVMConstAllOnes(t), zero));
    case KN_UN_RELU: return sg ? sel(cg, LLVMBuildICmp(b, LLVMIntSGT, x, zero, ""), x, zero) : x;
    case KN_UN_BITNOT: return LLVMBuildNot(b, x, "");
    case KN_UN_NOT: return LLVMBuildXor(b, x, LLVMConstInt(t, 1, 0), ""); /* bool loads as 0/1 */
    default: return NULL;
    }
}

static LLVMValueRef body_unary(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    return is_float_dt(c->dt) ? un_float(cg, c, v[0]) : un_int(cg, c, v[0]);
}

static bool un_int_form(kn_unary_op k)
{
    return k == KN_UN_ABS || k == KN_UN_NEG || k == KN_UN_SIGN || k == KN_UN_RELU || k == KN_UN_BITNOT ||
           k == KN_UN_NOT;
}

static int lower_unary(kn_cg *cg, const kn_node *n)
{
    const kn_ew_un *u = kn_ew_un_find(n->op);
    ew_ctx c;
    if (!u || !ctx_init(cg, &c, n, 1, body_unary)) return KN_ERR_UNSUPPORTED;
    kn_opdesc d;
    bool has[4];
    if (n->n_outputs > 4) return KN_ERR_UNSUPPORTED;
    kn_node_opdesc(n, &d, has);
    kn_unary_op k;
    if (kn_ew_un_params(&d, u, &k, &c.p)) return KN_ERR_UNSUPPORTED;
    c.kop = k;
    if (kn_k_unary_out_dtype(k, c.dt) != c.out_dt) return KN_ERR_UNSUPPORTED;
    if (k == KN_UN_NOT) {
        if (c.dt != KN_BOOL) return KN_ERR_UNSUPPORTED;
    } else if (k == KN_UN_BITNOT) {
        if (!is_int_dt(c.dt)) return KN_ERR_UNSUPPORTED;
    } else if (!is_float_dt(c.dt) && !(is_int_dt(c.dt) && un_int_form(k))) {
        return KN_ERR_UNSUPPORTED; /* integer Erf/Shrink/LeakyRelu: the kernel's double path */
    }
    if (k == KN_UN_DIV_BY) return KN_ERR_UNSUPPORTED;
    return emit_map(cg, &c, n->outputs[0]);
}

/* ---- binary and variadic ops --------------------------------------------------------- */

/* pow(a, k) for the constant exponents models use (x^2 in hand-written
 * norms, x^3 in tanh-Gelu, x^0.5): multiplications and sqrt vectorize where
 * powf calls do not. pow's special cases are kept: pow(x, 0) = 1 even for
 * NaN, pow(-0, 0.5) = +0 and pow(-inf, 0.5) = +inf where sqrt differs. */
static LLVMValueRef pow_const(kn_cg *cg, LLVMValueRef a, LLVMValueRef e, double k)
{
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = LLVMTypeOf(a);
    if (k == 0) return cf(t, 1);
    if (k == 1) return a;
    if (k == 2) return LLVMBuildFMul(b, a, a, "");
    if (k == 3) return LLVMBuildFMul(b, LLVMBuildFMul(b, a, a, ""), a, "");
    if (k == -1) return LLVMBuildFDiv(b, cf(t, 1), a, "");
    if (k == 0.5) {
        LLVMValueRef r = LLVMBuildFAdd(b, intr1(cg, "llvm.sqrt", a), cf(t, 0), ""); /* -0 → +0 */
        return sel(cg, fcmp(cg, LLVMRealOEQ, a, cf(t, -INFINITY)), cf(t, INFINITY), r);
    }
    return intr2(cg, "llvm.pow", a, e);
}

static LLVMValueRef bin_float(kn_cg *cg, kn_binary_op op, double pow_k, LLVMValueRef a, LLVMValueRef bb)
{
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = LLVMTypeOf(a);
    switch (op) {
    case KN_BIN_ADD: return LLVMBuildFAdd(b, a, bb, "");
    case KN_BIN_SUB: return LLVMBuildFSub(b, a, bb, "");
    case KN_BIN_MUL: return LLVMBuildFMul(b, a, bb, "");
    case KN_BIN_DIV: return LLVMBuildFDiv(b, a, bb, "");
    case KN_BIN_POW: return pow_const(cg, a, bb, pow_k);
    case KN_BIN_FMOD: return LLVMBuildFRem(b, a, bb, "");
    case KN_BIN_MOD: { /* C fmod, moved to the divisor's sign */
        LLVMValueRef r = LLVMBuildFRem(b, a, bb, ""), zero = cf(t, 0);
        LLVMValueRef fix = LLVMBuildAnd(b, fcmp(cg, LLVMRealUNE, r, zero),
                                        LLVMBuildXor(b, fcmp(cg, LLVMRealOLT, r, zero), fcmp(cg, LLVMRealOLT, bb, zero), ""), "");
        return sel(cg, fix, LLVMBuildFAdd(b, r, bb, ""), r);
    }
    case KN_BIN_MAX: case KN_BIN_MIN: {
        LLVMValueRef m = sel(cg, fcmp(cg, op == KN_BIN_MAX ? LLVMRealOGT : LLVMRealOLT, a, bb), a, bb);
        return sel(cg, fcmp(cg, LLVMRealUNO, a, bb), cf(t, NAN), m);
    }
    case KN_BIN_PRELU: return sel(cg, fcmp(cg, LLVMRealOLT, a, cf(t, 0)), LLVMBuildFMul(b, a, bb, ""), a);
    case KN_BIN_EQ: return bool_i8(cg, fcmp(cg, LLVMRealOEQ, a, bb));
    case KN_BIN_GT: return bool_i8(cg, fcmp(cg, LLVMRealOGT, a, bb));
    case KN_BIN_GE: return bool_i8(cg, fcmp(cg, LLVMRealOGE, a, bb));
    case KN_BIN_LT: return bool_i8(cg, fcmp(cg, LLVMRealOLT, a, bb));
    case KN_BIN_LE: return bool_i8(cg, fcmp(cg, LLVMRealOLE, a, bb));
    default: return NULL;
    }
}

/* Integer ops in the dtype's own width: wrapping add/sub/mul are the int64
 * results truncated; division and modulo avoid LLVM's undefined cases (by 0,
 * MIN / -1) with the kernel's answers (0, and -a for a / -1). */
static LLVMValueRef bin_int(kn_cg *cg, kn_binary_op op, bool sg, LLVMValueRef a, LLVMValueRef bb)
{
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0), m1 = LLVMConstAllOnes(t);
    unsigned width = LLVMGetIntTypeWidth(t);
    LLVMValueRef bz = LLVMBuildICmp(b, LLVMIntEQ, bb, zero, "");
    LLVMValueRef bm1 = sg ? LLVMBuildICmp(b, LLVMIntEQ, bb, m1, "") : LLVMConstInt(cg->t_i1, 0, 0);
    LLVMValueRef safe = sel(cg, LLVMBuildOr(b, bz, bm1, ""), one, bb);
    switch (op) {
    case KN_BIN_ADD: return LLVMBuildAdd(b, a, bb, "");
    case KN_BIN_SUB: return LLVMBuildSub(b, a, bb, "");
    case KN_BIN_MUL: return LLVMBuildMul(b, a, bb, "");
    case KN_BIN_DIV: {
        LLVMValueRef q = sg ? LLVMBuildSDiv(b, a, safe, "") : LLVMBuildUDiv(b, a, safe, "");
        return sel(cg, bz, zero, sel(cg, bm1, LLVMBuildNeg(b, a, ""), q));
    }
    case KN_BIN_FMOD: case KN_BIN_MOD: {
        LLVMValueRef r = sg ? LLVMBuildSRem(b, a, safe, "") : LLVMBuildURem(b, a, safe, "");
        if (sg && op == KN_BIN_MOD) {
            LLVMValueRef fix = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, r, zero, ""),
                                            LLVMBuildXor(b, LLVMBuildICmp(b, LLVMIntSLT, r, zero, ""),
                                                         LLVMBuildICmp(b, LLVMIntSLT, bb, zero, ""), ""), "");
            r = sel(cg, fix, LLVMBuildAdd(b, r, bb, ""), r);
        }
        return sel(cg, LLVMBuildOr(b, bz, bm1, ""), zero, r);
    }
    case KN_BIN_SHL: case KN_BIN_SHR: {
        LLVMValueRef big = LLVMBuildICmp(b, LLVMIntUGE, bb, LLVMConstInt(t, width, 0), "");
        LLVMValueRef amt = LLVMBuildAnd(b, bb, LLVMConstInt(t, width - 1, 0), "");
        LLVMValueRef s = op == KN_BIN_SHL ? LLVMBuildShl(b, a, amt, "") : LLVMBuildLShr(b, a, amt, "");
        return sel(cg, big, zero, s);
    }
    case KN_BIN_BITAND: case KN_BIN_AND: return LLVMBuildAnd(b, a, bb, "");
    case KN_BIN_BITOR: case KN_BIN_OR: return LLVMBuildOr(b, a, bb, "");
    case KN_BIN_BITXOR: case KN_BIN_XOR: return LLVMBuildXor(b, a, bb, "");
    case KN_BIN_MAX: return sel(cg, LLVMBuildICmp(b, sg ? LLVMIntSGT : LLVMIntUGT, a, bb, ""), a, bb);
    case KN_BIN_MIN: return sel(cg, LLVMBuildICmp(b, sg ? LLVMIntSLT : LLVMIntULT, a, bb, ""), a, bb);
    case KN_BIN_PRELU:
        return sg ? sel(cg, LLVMBuildICmp(b, LLVMIntSLT, a, zero, ""), LLVMBuildMul(b, a, bb, ""), a) : a;
    case KN_BIN_EQ: return bool_i8(cg, LLVMBuildICmp(b, LLVMIntEQ, a, bb, ""));
    case KN_BIN_GT: return bool_i8(cg, LLVMBuildICmp(b, sg ? LLVMIntSGT : LLVMIntUGT, a, bb, ""));
    case KN_BIN_GE: return bool_i8(cg, LLVMBuildICmp(b, sg ? LLVMIntSGE : LLVMIntUGE, a, bb, ""));
    case KN_BIN_LT: return bool_i8(cg, LLVMBuildICmp(b, sg ? LLVMIntSLT : LLVMIntULT, a, bb, ""));
    case KN_BIN_LE: return bool_i8(cg, LLVMBuildICmp(b, sg ? LLVMIntSLE : LLVMIntULE, a, bb, ""));
    default: return NULL;
    }
}

/* Pow's exponent may have another dtype: integers convert to the base's
 * float type like the kernel's (double)b. */
static LLVMValueRef pow_exponent(kn_cg *cg, const ew_ctx *c, LLVMValueRef e, LLVMTypeRef t)
{
    kn_dtype de = c->ops[1]->dtype;
    if (is_float_dt(de)) return e;
    return is_signed_dt(de) ? LLVMBuildSIToFP(cg->b, e, t, "") : LLVMBuildUIToFP(cg->b, e, t, "");
}

/* Integer base: an integer exponent by squaring (unrolled over the
 * exponent's bits, so the loop stays vectorizable), wrapping in the base's
 * width; a negative exponent gives what 1/a truncates to. A float exponent
 * computes pow in double and converts like the kernel's store (saturating
 * to int64, NaN → 0, then wrapping). */
static LLVMValueRef int_pow(kn_cg *cg, const ew_ctx *c, LLVMValueRef a, LLVMValueRef e)
{
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef ta = LLVMTypeOf(a), te = LLVMTypeOf(e);
    kn_dtype de = c->ops[1]->dtype;
    bool sa = is_signed_dt(c->dt);
    if (is_float_dt(de)) {
        LLVMValueRef x = sa ? LLVMBuildSIToFP(b, a, cg->t_double, "") : LLVMBuildUIToFP(b, a, cg->t_double, "");
        LLVMValueRef y = te == cg->t_double ? e : LLVMBuildFPExt(b, e, cg->t_double, "");
        LLVMValueRef i = fptosi_sat_i64(cg, intr2(cg, "llvm.pow", x, y));
        return LLVMGetIntTypeWidth(ta) == 64 ? i : LLVMBuildTrunc(b, i, ta, "");
    }
    LLVMValueRef one = LLVMConstInt(ta, 1, 0), zero = LLVMConstInt(ta, 0, 0);
    LLVMValueRef r = one, base = a, ee = e;
    unsigned bits = LLVMGetIntTypeWidth(te);
    for (unsigned i = 0; i < bits; i++) {
        LLVMValueRef bit = LLVMBuildTrunc(b, ee, cg->t_i1, "");
        r = sel(cg, bit, LLVMBuildMul(b, r, base, ""), r);
        base = LLVMBuildMul(b, base, base, "");
        ee = LLVMBuildLShr(b, ee, LLVMConstInt(te, 1, 0), "");
    }
    if (!is_signed_dt(de)) return r;
    /* negative exponent: 1 for a == 1, ±1 for a == -1, else 0 */
    LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, e, LLVMConstInt(te, 0, 0), "");
    LLVMValueRef odd = LLVMBuildTrunc(b, e, cg->t_i1, "");
    LLVMValueRef m1 = sa ? LLVMBuildICmp(b, LLVMIntEQ, a, LLVMConstAllOnes(ta), "") : LLVMConstInt(cg->t_i1, 0, 0);
    LLVMValueRef rn = sel(cg, LLVMBuildICmp(b, LLVMIntEQ, a, one, ""), one,
                          sel(cg, m1, sel(cg, odd, LLVMConstAllOnes(ta), one), zero));
    return sel(cg, neg, rn, r);
}

static LLVMValueRef body_binary(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    kn_binary_op op = (kn_binary_op)c->kop;
    if (op == KN_BIN_POW && !is_float_dt(c->dt)) return int_pow(cg, c, v[0], v[1]);
    if (is_float_dt(c->dt)) {
        LLVMValueRef e = op == KN_BIN_POW ? pow_exponent(cg, c, v[1], LLVMTypeOf(v[0])) : v[1];
        return bin_float(cg, op, c->pow_const, v[0], e);
    }
    return bin_int(cg, op, is_signed_dt(c->dt), v[0], v[1]);
}

/* Sum/Max/Min/Mean fold left to right in the compute type, then Mean divides. */
static LLVMValueRef body_variadic(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    LLVMValueRef acc = v[0];
    bool fl = is_float_dt(c->dt);
    for (int k = 1; k < c->n_ops; k++) {
        acc = fl ? bin_float(cg, (kn_binary_op)c->kop, POW_ANY, acc, v[k]) : bin_int(cg, (kn_binary_op)c->kop, is_signed_dt(c->dt), acc, v[k]);
        if (c->dt == KN_F16) /* the kernel stores every partial result in f16 */
            acc = LLVMBuildFPExt(cg->b, LLVMBuildFPTrunc(cg->b, acc, cg->t_half, ""), cg->t_float, "");
    }
    if (c->n->op == KN_OP_Mean && c->n_ops > 1) acc = LLVMBuildFDiv(cg->b, acc, cf(LLVMTypeOf(acc), c->n_ops), "");
    return acc;
}

/* True if v is a constant whose every element is the float value x. */
static bool const_all(const kn_value *v, double x)
{
    const kn_tensor *t = v->const_data;
    if (!t || !is_float_dt(t->dtype)) return false;
    int64_t n = kn_tensor_numel(t);
    if (n < 1) return false;
    for (int64_t i = 0; i < n; i++)
        if (kn_load_f64(t->dtype, t->data, (size_t)i) != x) return false;
    return true;
}

/* The exponent Pow specializes (pow_const) when e is a constant of one
 * value; POW_ANY otherwise. */
static double pow_special(const kn_value *e)
{
    static const double ks[] = {0, 1, 2, 3, -1, 0.5};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        if (const_all(e, ks[i])) return ks[i];
    return POW_ANY;
}

static bool bin_dtypes_ok(const ew_ctx *c, kn_binary_op op)
{
    kn_dtype a = c->dt;
    bool fl = is_float_dt(a), in = is_int_dt(a);
    switch (op) {
    case KN_BIN_SHL: case KN_BIN_SHR: return in && !is_signed_dt(a);
    case KN_BIN_BITAND: case KN_BIN_BITOR: case KN_BIN_BITXOR: return in;
    case KN_BIN_AND: case KN_BIN_OR: case KN_BIN_XOR: return a == KN_BOOL;
    case KN_BIN_EQ: return fl || in || a == KN_BOOL;
    case KN_BIN_POW: return fl || in;
    default: return fl || in;
    }
}

static int lower_binary(kn_cg *cg, const kn_node *n)
{
    const kn_ew_bin *bi = kn_ew_bin_find(n->op);
    ew_ctx c;
    if (!bi || n->n_inputs != 2 || !ctx_init(cg, &c, n, 2, body_binary)) return KN_ERR_UNSUPPORTED;
    kn_opdesc d;
    bool has[4];
    if (n->n_outputs > 4) return KN_ERR_UNSUPPORTED;
    kn_node_opdesc(n, &d, &has[0]);
    /* pre-opset-7 axis broadcasting is not numpy's */
    if (d.opset < 7 && kn_op_attr(&d, "broadcast")) return KN_ERR_UNSUPPORTED;
    kn_binary_op k;
    if (kn_ew_bin_kop(&d, bi, &k)) return KN_ERR_UNSUPPORTED;
    c.kop = k;
    if (!bin_dtypes_ok(&c, k) || kn_k_binary_out_dtype(k, c.dt) != c.out_dt) return KN_ERR_UNSUPPORTED;
    kn_dtype db = c.ops[1]->dtype;
    if (k == KN_BIN_POW) {
        /* a float base takes its own dtype or an integer exponent; an
         * integer base any integer, f32 or f64 one */
        bool fl = is_float_dt(c.dt);
        if (fl ? db != c.dt && !is_int_dt(db) : !is_int_dt(db) && db != KN_F32 && db != KN_F64)
            return KN_ERR_UNSUPPORTED;
        /* a u64 result from double has the kernel's own C-cast rules */
        if (c.dt == KN_U64 && is_float_dt(db)) return KN_ERR_UNSUPPORTED;
        c.pow_const = pow_special(c.ops[1]);
    } else if (db != c.dt) {
        return KN_ERR_UNSUPPORTED;
    }
    return emit_map(cg, &c, n->outputs[0]);
}

static int lower_variadic(kn_cg *cg, const kn_node *n)
{
    const kn_ew_bin *bi = kn_ew_bin_find(n->op);
    ew_ctx c;
    if (!bi || !ctx_init(cg, &c, n, n->n_inputs, body_variadic)) return KN_ERR_UNSUPPORTED;
    c.kop = bi->k;
    for (int k = 1; k < c.n_ops; k++)
        if (c.ops[k]->dtype != c.dt) return KN_ERR_UNSUPPORTED;
    if (c.out_dt != c.dt || !(is_float_dt(c.dt) || is_int_dt(c.dt))) return KN_ERR_UNSUPPORTED;
    if (n->op == KN_OP_Mean && !is_float_dt(c.dt)) return KN_ERR_UNSUPPORTED;
    /* the kernel rounds every partial result to the dtype: f16 does too
     * (body_variadic), bf16 chains longer than one step are left to it */
    if (c.dt == KN_BF16 && (c.n_ops > 2 || (n->op == KN_OP_Mean && c.n_ops > 1)))
        return KN_ERR_UNSUPPORTED;
    return emit_map(cg, &c, n->outputs[0]);
}

/* ---- Clip ---------------------------------------------------------------------------------- */

static LLVMValueRef body_clip(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    LLVMValueRef x = v[0];
    bool fl = is_float_dt(c->dt), sg = is_signed_dt(c->dt);
    if (c->lo) {
        LLVMValueRef lt = fl ? fcmp(cg, LLVMRealOLT, x, c->lo) : LLVMBuildICmp(cg->b, sg ? LLVMIntSLT : LLVMIntULT, x, c->lo, "");
        x = sel(cg, lt, c->lo, x);
    }
    if (c->hi) {
        LLVMValueRef gt = fl ? fcmp(cg, LLVMRealOGT, x, c->hi) : LLVMBuildICmp(cg->b, sg ? LLVMIntSGT : LLVMIntUGT, x, c->hi, "");
        x = sel(cg, gt, c->hi, x);
    }
    return x;
}

/* A bound input: present, one element, of x's dtype (loaded once, before the
 * loops). */
static bool clip_bound_ok(const kn_value *v, kn_dtype dt)
{
    return !v || (v->dtype == dt && kn_shape_is_static(&v->shape) && kn_cg_numel(v) == 1);
}

static int lower_clip(kn_cg *cg, const kn_node *n)
{
    ew_ctx c;
    if (!ctx_init(cg, &c, n, 1, body_clip)) return KN_ERR_UNSUPPORTED;
    if (c.out_dt != c.dt || !(is_float_dt(c.dt) || is_int_dt(c.dt))) return KN_ERR_UNSUPPORTED;
    const kn_value *lo = kn_node_input(n, 1), *hi = kn_node_input(n, 2);
    bool legacy = kn_node_opset(n) < 11 && n->n_inputs == 1;
    if (legacy && !is_float_dt(c.dt)) return KN_ERR_UNSUPPORTED;
    if (!clip_bound_ok(lo, c.dt) || !clip_bound_ok(hi, c.dt)) return KN_ERR_UNSUPPORTED;
    ew_space s;
    if (!kn_shape_is_static(&n->outputs[0]->shape) || !build_space(&c, n->outputs[0], &s)) return KN_ERR_UNSUPPORTED;
    LLVMTypeRef t = kn_cg_compute_type(cg, c.dt);
    if (legacy) {
        c.lo = cf(t, kn_attr_float(n, "min", -FLT_MAX));
        c.hi = cf(t, kn_attr_float(n, "max", FLT_MAX));
    } else {
        if (lo) c.lo = kn_cg_load(cg, c.dt, kn_cg_ptr(cg, lo), kn_cg_i64(cg, 0));
        if (hi) c.hi = kn_cg_load(cg, c.dt, kn_cg_ptr(cg, hi), kn_cg_i64(cg, 0));
    }
    return emit_map(cg, &c, n->outputs[0]);
}

/* ---- Where ------------------------------------------------------------------------------------ */

static LLVMValueRef body_where(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    (void)c;
    return sel(cg, LLVMBuildICmp(cg->b, LLVMIntNE, v[0], LLVMConstInt(cg->t_i8, 0, 0), ""), v[1], v[2]);
}

static int lower_where(kn_cg *cg, const kn_node *n)
{
    ew_ctx c;
    if (n->n_inputs != 3 || !ctx_init(cg, &c, n, 3, body_where)) return KN_ERR_UNSUPPORTED;
    if (c.ops[0]->dtype != KN_BOOL || c.ops[1]->dtype != c.ops[2]->dtype || c.ops[1]->dtype != c.out_dt)
        return KN_ERR_UNSUPPORTED;
    c.raw[1] = c.raw[2] = c.out_raw = true; /* the kernel copies bytes */
    return emit_map(cg, &c, n->outputs[0]);
}

/* ---- Cast ------------------------------------------------------------------------------------- */

/* double → float rounded to odd, so that a second rounding to f16/bf16 is
 * the correctly rounded result (the kernel's kn_k_f64_to_f16). */
static LLVMValueRef f64_to_f32_odd(kn_cg *cg, LLVMValueRef d)
{
    LLVMBuilderRef b = cg->b;
    LLVMValueRef f = LLVMBuildFPTrunc(b, d, cg->t_float, "");
    LLVMValueRef exact = fcmp(cg, LLVMRealUEQ, LLVMBuildFPExt(b, f, cg->t_double, ""), d);
    LLVMValueRef inf = fcmp(cg, LLVMRealOEQ, intr1(cg, "llvm.fabs", f), cf(cg->t_float, INFINITY));
    LLVMValueRef u = LLVMBuildBitCast(b, f, cg->t_i32, "");
    LLVMValueRef odd = LLVMBuildTrunc(b, u, cg->t_i1, "");
    LLVMValueRef away = fcmp(cg, LLVMRealOGT, LLVMBuildFPExt(b, intr1(cg, "llvm.fabs", f), cg->t_double, ""),
                             intr1(cg, "llvm.fabs", d));
    LLVMValueRef adj = sel(cg, away, LLVMBuildSub(b, u, LLVMConstInt(cg->t_i32, 1, 0), ""),
                           LLVMBuildAdd(b, u, LLVMConstInt(cg->t_i32, 1, 0), ""));
    LLVMValueRef keep = LLVMBuildOr(b, LLVMBuildOr(b, exact, inf, ""), odd, "");
    return LLVMBuildBitCast(b, sel(cg, keep, u, adj), cg->t_float, "");
}

static LLVMValueRef body_cast(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    LLVMBuilderRef b = cg->b;
    LLVMValueRef x = v[0];
    kn_dtype from = c->dt, to = c->out_dt;
    LLVMTypeRef tt = kn_cg_compute_type(cg, to);
    bool ff = is_float_dt(from), tf = is_float_dt(to);
    if (to == KN_BOOL) {
        LLVMValueRef nz = ff ? fcmp(cg, LLVMRealUNE, x, cf(LLVMTypeOf(x), 0))
                             : LLVMBuildICmp(b, LLVMIntNE, x, LLVMConstInt(LLVMTypeOf(x), 0, 0), "");
        return bool_i8(cg, nz);
    }
    if (ff && tf) {
        if (from == KN_F64 && to != KN_F64) {
            LLVMValueRef f = to == KN_F32 ? LLVMBuildFPTrunc(b, x, cg->t_float, "") : f64_to_f32_odd(cg, x);
            return f;
        }
        if (to == KN_F64) return LLVMBuildFPExt(b, x, cg->t_double, "");
        return x; /* f16/bf16/f32 all compute in float; the store rounds */
    }
    if (ff) { /* to an integer: saturate to int64 (NaN → 0), then wrap */
        LLVMValueRef i = fptosi_sat_i64(cg, x);
        return LLVMGetIntTypeWidth(tt) == 64 ? i : LLVMBuildTrunc(b, i, tt, "");
    }
    bool sg = is_signed_dt(from) || from == KN_BOOL;
    if (tf) {
        if (to == KN_F32) return sg ? LLVMBuildSIToFP(b, x, cg->t_float, "") : LLVMBuildUIToFP(b, x, cg->t_float, "");
        LLVMValueRef d = sg ? LLVMBuildSIToFP(b, x, cg->t_double, "") : LLVMBuildUIToFP(b, x, cg->t_double, "");
        return to == KN_F64 ? d : LLVMBuildFPTrunc(b, d, cg->t_float, ""); /* the kernel's (float)(double)v */
    }
    unsigned wf = LLVMGetIntTypeWidth(LLVMTypeOf(x)), wt = LLVMGetIntTypeWidth(tt);
    if (wf == wt) return x;
    if (wf > wt) return LLVMBuildTrunc(b, x, tt, "");
    return sg && from != KN_BOOL ? LLVMBuildSExt(b, x, tt, "") : LLVMBuildZExt(b, x, tt, "");
}

static int lower_cast(kn_cg *cg, const kn_node *n)
{
    ew_ctx c;
    if (!ctx_init(cg, &c, n, 1, body_cast)) return KN_ERR_UNSUPPORTED;
    if (n->op == KN_OP_Cast) {
        kn_opdesc d;
        bool has[4];
        if (n->n_outputs > 4) return KN_ERR_UNSUPPORTED;
        kn_node_opdesc(n, &d, has);
        kn_dtype to;
        if (kn_ew_cast_target(&d, KN_DT_UNDEFINED, &to) || to != c.out_dt) return KN_ERR_UNSUPPORTED;
    } else if (!n->inputs[1] || n->inputs[1]->dtype != c.out_dt) {
        return KN_ERR_UNSUPPORTED;
    }
    c.n_ops = 1;
    /* the kernel converts a negative or huge float to u64 through C casts
     * whose results are not portable */
    if (is_float_dt(c.dt) && c.out_dt == KN_U64) return KN_ERR_UNSUPPORTED;
    const kn_value *x = c.ops[0], *y = n->outputs[0];
    if (!kn_shape_is_static(&x->shape) || !kn_shape_is_static(&y->shape) || kn_cg_numel(x) != kn_cg_numel(y))
        return KN_ERR_UNSUPPORTED;
    return emit_map(cg, &c, y);
}

/* ---- QuantizeLinear / DequantizeLinear per tensor ----------------------------------------------- */

/* The constant scalar scale and zero point of a Q/DQ node (its 8-bit side
 * q): false unless both are per tensor and known. */
static bool q_scalar_params(const kn_node *n, const kn_value *q, float *scale, int64_t *zp)
{
    const kn_value *s = kn_node_input(n, 1), *z = kn_node_input(n, 2);
    if (!q || (q->dtype != KN_U8 && q->dtype != KN_I8) || !s || !s->const_data || s->dtype != KN_F32 ||
        kn_tensor_numel(s->const_data) != 1)
        return false;
    if (z && (!z->const_data || z->dtype != q->dtype || kn_tensor_numel(z->const_data) != 1)) return false;
    *scale = ((const float *)s->const_data->data)[0];
    *zp = z ? kn_load_i64(z->dtype, z->const_data->data, 0) : 0;
    return true;
}

/* saturate(roundeven(x / scale) + zp), NaN → zp (the kernel's rule) */
static LLVMValueRef body_quantize(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    LLVMBuilderRef b = cg->b;
    LLVMValueRef x = v[0];
    LLVMTypeRef t = LLVMTypeOf(x);
    LLVMValueRef q = intr1(cg, "llvm.roundeven", LLVMBuildFDiv(b, x, cf(t, c->qscale), ""));
    q = sel(cg, fcmp(cg, LLVMRealUNO, x, x), cf(t, 0), q);
    q = LLVMBuildFAdd(b, q, cf(t, (double)c->qzp), "");
    double lo = c->out_dt == KN_U8 ? 0 : -128, hi = c->out_dt == KN_U8 ? 255 : 127;
    q = intr2(cg, "llvm.minnum", intr2(cg, "llvm.maxnum", q, cf(t, lo)), cf(t, hi));
    /* in range after the clamp: to u8 unsigned (200.0 is no i8) */
    LLVMTypeRef it = kn_cg_compute_type(cg, c->out_dt);
    return c->out_dt == KN_U8 ? LLVMBuildFPToUI(b, q, it, "") : LLVMBuildFPToSI(b, q, it, "");
}

/* (x - zp) * scale, in float as the kernel computes it */
static LLVMValueRef body_dequantize(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    LLVMBuilderRef b = cg->b;
    LLVMValueRef f = c->dt == KN_U8 ? LLVMBuildUIToFP(b, v[0], cg->t_float, "") : LLVMBuildSIToFP(b, v[0], cg->t_float, "");
    f = LLVMBuildFSub(b, f, cf(cg->t_float, (double)c->qzp), "");
    return LLVMBuildFMul(b, f, cf(cg->t_float, c->qscale), "");
}

static int lower_qdq(kn_cg *cg, const kn_node *n)
{
    bool quant = n->op == KN_OP_QuantizeLinear;
    ew_ctx c;
    if (!ctx_init(cg, &c, n, 1, quant ? body_quantize : body_dequantize)) return KN_ERR_UNSUPPORTED;
    c.n_ops = 1;
    const kn_value *x = c.ops[0], *y = n->outputs[0];
    if (!q_scalar_params(n, quant ? y : x, &c.qscale, &c.qzp)) return KN_ERR_UNSUPPORTED;
    if ((quant ? c.dt : c.out_dt) != KN_F32 || !(isfinite(c.qscale) && c.qscale != 0)) return KN_ERR_UNSUPPORTED;
    if (!kn_shape_is_static(&x->shape) || !kn_shape_is_static(&y->shape) || kn_cg_numel(x) != kn_cg_numel(y))
        return KN_ERR_UNSUPPORTED;
    return emit_map(cg, &c, y);
}

/* ---- kiln::FusedElementwise ------------------------------------------------------------------------ */

/* The program's steps on one element (or vector) of every input, in
 * registers: no intermediate reaches memory. */
static LLVMValueRef body_fused(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    const kn_ew_program *prog = c->prog;
    LLVMValueRef r[KN_EW_MAX_STEPS];
    for (int s = 0; s < prog->n_steps; s++) {
        const kn_ew_step *st = &prog->steps[s];
        LLVMValueRef a = st->a >= 0 ? v[st->a] : r[-st->a - 1];
        if (st->binary) {
            LLVMValueRef b = st->b >= 0 ? v[st->b] : r[-st->b - 1];
            r[s] = bin_float(cg, st->bin, c->step_pow[s], a, b);
        } else if (st->q != KN_DT_UNDEFINED) { /* an 8-bit value stays an integer in a register */
            ew_ctx sc = *c;
            sc.dt = sc.out_dt = st->q;
            sc.qscale = st->p.alpha;
            sc.qzp = (int64_t)st->p.beta;
            r[s] = st->op == KN_OP_QuantizeLinear ? body_quantize(cg, &sc, &a) : body_dequantize(cg, &sc, &a);
        } else {
            ew_ctx sc = *c;
            sc.kop = st->un;
            sc.p = st->p;
            r[s] = un_float(cg, &sc, a);
        }
    }
    return r[prog->n_steps - 1];
}

/* ---- an 8-bit FusedElementwise as a lookup table ---------------------------------------------
 * A program whose output is 8-bit and whose one varying input is 8-bit
 * (the others constant scalars: DequantizeLinear → Sigmoid →
 * QuantizeLinear, say) is a function of 256 values. The reference kernel
 * computes them at compile time and the loop is y[i] = table[x[i]]: the
 * reference's answers bit for bit, for any step (no polynomial of exp or
 * erf to round differently at a tie) at one load per element. */

/* The index of the one varying 8-bit input of an 8-bit program, or -1. */
static int lut_input(const kn_node *n, const kn_ew_program *prog)
{
    if (prog->out_dt != KN_U8 && prog->out_dt != KN_I8) return -1;
    int k = -1;
    for (int i = 0; i < n->n_inputs; i++) {
        const kn_value *v = n->inputs[i];
        if (v->const_data && kn_tensor_numel(v->const_data) == 1) continue;
        if (k >= 0 || (prog->in_dt[i] != KN_U8 && prog->in_dt[i] != KN_I8)) return -1;
        k = i;
    }
    return k >= 0 && kn_cg_numel(n->inputs[k]) == kn_cg_numel(n->outputs[0]) ? k : -1;
}

static LLVMValueRef body_lut(kn_cg *cg, const ew_ctx *c, LLVMValueRef *v)
{
    LLVMValueRef idx[2] = {kn_cg_i64(cg, 0), LLVMBuildZExt(cg->b, v[0], cg->t_i64, "")};
    LLVMTypeRef at = LLVMArrayType(cg->t_i8, 256);
    return LLVMBuildLoad2(cg->b, cg->t_i8, LLVMBuildInBoundsGEP2(cg->b, at, c->lut, idx, 2, ""), "");
}

/* Emits n as table[x] with x = input k; UNSUPPORTED when the table cannot be computed. */
static int lower_fused_lut(kn_cg *cg, const kn_node *n, const kn_ew_program *prog, int k)
{
    kn_dtype xdt = prog->in_dt[k];
    uint8_t all[256];
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)i; /* index = the byte, for s8 too */
    kn_tensor x = {.dtype = xdt, .rank = 1, .dims = {256}, .data = all, .nbytes = sizeof all};
    const kn_tensor *in[KN_EW_MAX_INPUTS];
    for (int i = 0; i < n->n_inputs; i++) in[i] = i == k ? &x : n->inputs[i]->const_data;
    kn_tensor out[1];
    memset(out, 0, sizeof out);
    int st = kn_node_eval(NULL, n, in, out);
    if (st || out[0].dtype != prog->out_dt || kn_tensor_numel(&out[0]) != 256) {
        kn_tensor_free(&out[0]);
        kn_error_clear(); /* the runtime kernel reports it, naming the node */
        return KN_ERR_UNSUPPORTED;
    }
    LLVMValueRef elems[256];
    for (int i = 0; i < 256; i++) elems[i] = LLVMConstInt(cg->t_i8, ((const uint8_t *)out[0].data)[i], 0);
    kn_tensor_free(&out[0]);
    ew_ctx c;
    if (!ctx_init(cg, &c, n, n->n_inputs, body_lut)) return KN_ERR_UNSUPPORTED;
    c.ops[0] = n->inputs[k];
    c.n_ops = 1;
    c.raw[0] = c.out_raw = true;
    c.lut = kn_cg_const_global(cg, "kn_lut", LLVMConstArray(cg->t_i8, elems, 256), 64);
    return emit_map(cg, &c, n->outputs[0]);
}

static int lower_fused_elementwise(kn_cg *cg, const kn_node *n)
{
    ew_ctx c;
    kn_ew_program prog;
    if (n->n_inputs > EW_MAX_OPS || !ctx_init(cg, &c, n, n->n_inputs, body_fused)) return KN_ERR_UNSUPPORTED;
    kn_opdesc d;
    bool has[1];
    kn_node_opdesc(n, &d, has);
    if (kn_fused_ew_program(&d, n->n_inputs, &prog)) {
        kn_error_clear(); /* the runtime kernel reports it, naming the node */
        return KN_ERR_UNSUPPORTED;
    }
    for (int k = 0; k < c.n_ops; k++)
        if (c.ops[k]->dtype != prog.in_dt[k]) return KN_ERR_UNSUPPORTED;
    if (c.out_dt != prog.out_dt) return KN_ERR_UNSUPPORTED;
    int k = lut_input(n, &prog);
    if (k >= 0) return lower_fused_lut(cg, n, &prog, k);
    c.prog = &prog;
    for (int s = 0; s < prog.n_steps; s++) {
        const kn_ew_step *st = &prog.steps[s];
        bool by_input = st->binary && st->bin == KN_BIN_POW && st->b >= 0;
        c.step_pow[s] = by_input ? pow_special(c.ops[st->b]) : POW_ANY;
    }
    return emit_map(cg, &c, n->outputs[0]);
}

/* ---- the table ---------------------------------------------------------------------------------- */

#define UN(name) {KN_OP_##name, lower_unary}
#define BIN(name) {KN_OP_##name, lower_binary}
#define VAR(name) {KN_OP_##name, lower_variadic}

const kn_cg_lowering kn_cg_lower_elementwise[] = {
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) KN_CLASS_##cls(name)
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags)
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
    {KN_OP_Clip, lower_clip},
    {KN_OP_Where, lower_where},
    {KN_OP_Cast, lower_cast},
    {KN_OP_QuantizeLinear, lower_qdq},
    {KN_OP_DequantizeLinear, lower_qdq},
    {KN_OP_CastLike, lower_cast},
    {KN_OP_FusedElementwise, lower_fused_elementwise},
    {KN_OP_UNKNOWN, NULL},
};
