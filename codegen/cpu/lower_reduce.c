/*
 * codegen/cpu/lower_reduce.c — generated loop nests for reductions (Reduce*,
 * ArgMax/ArgMin), Softmax/LogSoftmax, normalizations (Layer, Batch
 * (inference), Instance, Group, Lp) and pooling (Max with optional Indices,
 * Average, Lp, and their global forms), each specialized to the node's static
 * shapes (see cg.h). Float dtypes f32/f64 (f16/bf16 computed in float);
 * integer Reduce Sum/Prod/Max/Min/L1/SumSquare on i32/i64, ArgMax/Min on
 * i32/i64, MaxPool on i8/u8. Anything else is left to the runtime kernel.
 *
 * Layout strategy: a reduction over the contiguous innermost extent folds a
 * row into a scalar through an explicit vector accumulator (LLVM 16's C API
 * cannot set fast-math flags, so the loop vectorizer would not reassociate a
 * scalar float sum on its own); a reduction over an outer axis keeps the
 * contiguous inner axis innermost and folds into a row buffer (a stack array
 * of the row), which LLVM vectorizes as plain elementwise code. exp is a
 * polynomial in IR (fast_exp) so softmax loops vectorize too.
 *
 * Semantics follow the runtime kernels (runtime/kernels/reduce.c, nn.c,
 * nn_pool.c, linalg.c): NaN propagates, as in numpy and onnxruntime's
 * ReduceMax, GlobalMaxPool and Max: ReduceMax/Min and the global and
 * windowed max pools give NaN for a window holding one, and ArgMax/ArgMin
 * and MaxPool's indices pick the first NaN (numpy's argmax). Only softmax's
 * stabilising row maximum keeps the plain `v > acc` (F_MAXGT; a NaN makes
 * the whole row NaN either way). Statistics are
 * two-pass (mean, then centred variance). Floats accumulate in the compute
 * type (float for f32) rather than double, so sums may differ from the
 * reference in the last bits.
 */
#include "cg.h"

#include <math.h>
#include <string.h>

#include "eval.h"
#include "nn_int.h"
#include "reduce_int.h"

/* Most elements a stack row buffer may hold (32 KiB of floats). */
#define ROW_MAX 8192

/* ---- small IR helpers --------------------------------------------------------- */

typedef enum fold_kind { F_SUM, F_PROD, F_MAX, F_MIN, F_MAXGT } fold_kind;
typedef enum map_kind { M_ID, M_ABS, M_SQ, M_EXPSUB, M_SQDIFF } map_kind;

static bool is_vec(LLVMValueRef v) { return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind; }

static LLVMValueRef splat(kn_cg *cg, LLVMValueRef s, unsigned w)
{
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(s), w);
    LLVMValueRef u = LLVMGetPoison(vt);
    LLVMValueRef v = LLVMBuildInsertElement(cg->b, u, s, kn_cg_i32(cg, 0), "");
    return LLVMBuildShuffleVector(cg->b, v, u, LLVMConstNull(LLVMVectorType(cg->t_i32, w)), "");
}

/* s as a value shaped like `like` (splatted when like is a vector). */
static LLVMValueRef like(kn_cg *cg, LLVMValueRef s, LLVMValueRef like_v)
{
    if (!is_vec(like_v)) return s;
    return splat(cg, s, LLVMGetVectorSize(LLVMTypeOf(like_v)));
}

/* Array (or scalar) in the function's entry block, so a loop does not grow the stack. */
static LLVMValueRef entry_alloca(kn_cg *cg, LLVMTypeRef t, int64_t count)
{
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(cg->fn);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(cg->ctx);
    LLVMValueRef first = LLVMGetFirstInstruction(entry);
    if (first) LLVMPositionBuilderBefore(b, first);
    else LLVMPositionBuilderAtEnd(b, entry);
    LLVMValueRef a = LLVMBuildAlloca(b, count == 1 ? t : LLVMArrayType(t, (unsigned)count), "");
    LLVMSetAlignment(a, 64);
    LLVMDisposeBuilder(b);
    return a;
}

static LLVMValueRef ld(kn_cg *cg, LLVMTypeRef t, LLVMValueRef p) { return LLVMBuildLoad2(cg->b, t, p, ""); }
static void st(kn_cg *cg, LLVMValueRef v, LLVMValueRef p) { LLVMBuildStore(cg->b, v, p); }

/* Element idx of a row buffer of type t. */
static LLVMValueRef at(kn_cg *cg, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef idx)
{
    return LLVMBuildGEP2(cg->b, t, base, &idx, 1, "");
}

/* acc + iv * stride (i64), skipping what is constant zero. */
static LLVMValueRef madd(kn_cg *cg, LLVMValueRef acc, LLVMValueRef iv, int64_t stride)
{
    if (stride == 0) return acc;
    LLVMValueRef t = stride == 1 ? iv : LLVMBuildMul(cg->b, iv, kn_cg_i64(cg, stride), "");
    return LLVMBuildAdd(cg->b, acc, t, "");
}

static LLVMValueRef addc(kn_cg *cg, LLVMValueRef a, int64_t c)
{
    return c ? LLVMBuildAdd(cg->b, a, kn_cg_i64(cg, c), "") : a;
}

static LLVMValueRef fconst(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }

static LLVMValueRef intrin1(kn_cg *cg, const char *name, LLVMValueRef v)
{
    return kn_cg_intrinsic(cg, name, LLVMTypeOf(v), &v, 1);
}

/* a * b + c, fused where the target has FMA (llvm.fmuladd). */
static LLVMValueRef fmuladd(kn_cg *cg, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    LLVMValueRef args[3] = {a, b, c};
    return kn_cg_intrinsic(cg, "llvm.fmuladd", LLVMTypeOf(a), args, 3);
}

/* Floats computed in float (f16/bf16/f32) or double (f64). */
static bool dt_float(kn_dtype dt) { return dt == KN_F32 || dt == KN_F64 || dt == KN_F16 || dt == KN_BF16; }
/* Floats stored as their compute type (vector loads work on them). */
static bool dt_native(kn_dtype dt) { return dt == KN_F32 || dt == KN_F64; }
static bool dt_int(kn_dtype dt) { return dt == KN_I32 || dt == KN_I64; }

/* Identity of a fold in the compute type of dt. */
static LLVMValueRef fold_init(kn_cg *cg, fold_kind fk, kn_dtype dt)
{
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    if (dt_float(dt)) {
        switch (fk) {
        case F_PROD: return fconst(t, 1.0);
        case F_MAX: case F_MAXGT: return fconst(t, -INFINITY);
        case F_MIN: return fconst(t, INFINITY);
        default: return fconst(t, 0.0);
        }
    }
    bool w = dt == KN_I64;
    switch (fk) {
    case F_PROD: return LLVMConstInt(t, 1, 1);
    case F_MAX: case F_MAXGT: return LLVMConstInt(t, (unsigned long long)(w ? INT64_MIN : INT32_MIN), 1);
    case F_MIN: return LLVMConstInt(t, (unsigned long long)(w ? INT64_MAX : INT32_MAX), 1);
    default: return LLVMConstInt(t, 0, 1);
    }
}

/* a ⊕ v. Max/min let NaN win (numpy, the runtime's Reduce* and pooling);
 * F_MAXGT is the plain `v > a ? v : a` of softmax's row maximum. */
static LLVMValueRef fold(kn_cg *cg, fold_kind fk, bool flt, LLVMValueRef a, LLVMValueRef v)
{
    LLVMBuilderRef b = cg->b;
    switch (fk) {
    case F_SUM: return flt ? LLVMBuildFAdd(b, a, v, "") : LLVMBuildAdd(b, a, v, "");
    case F_PROD: return flt ? LLVMBuildFMul(b, a, v, "") : LLVMBuildMul(b, a, v, "");
    case F_MAX:
    case F_MIN: {
        LLVMValueRef c;
        if (flt) {
            c = LLVMBuildFCmp(b, fk == F_MAX ? LLVMRealOLT : LLVMRealOGT, a, v, "");
            c = LLVMBuildOr(b, c, LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "");
        } else {
            c = LLVMBuildICmp(b, fk == F_MAX ? LLVMIntSLT : LLVMIntSGT, a, v, "");
        }
        return LLVMBuildSelect(b, c, v, a, "");
    }
    case F_MAXGT: {
        LLVMValueRef c = flt ? LLVMBuildFCmp(b, LLVMRealOGT, v, a, "") : LLVMBuildICmp(b, LLVMIntSGT, v, a, "");
        return LLVMBuildSelect(b, c, v, a, "");
    }
    }
    return a;
}

static LLVMTypeRef scalar_t(LLVMTypeRef t)
{
    return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t;
}

/* exp(v) for float (scalar or vector) v without a libm call, so loops around
 * it vectorize: Cephes' expf (range reduction by ln 2 in two parts, a degree-6
 * polynomial, 2^n through the exponent bits), within 2 ulp of expf on
 * [-87, 88.3]; below that it gives 0 (exp(-87) = 1.6e-38), above +inf, and
 * NaN stays NaN. The lower bound keeps every intermediate normal: from
 * -87.34 (ln FLT_MIN) the last multiplication rounds to a subnormal that the
 * select then drops, and on x86 each such result costs a microcode assist,
 * which made a softmax over masked scores (-3.4e38 added) 35% slower.
 * Doubles call llvm.exp. */
static LLVMValueRef fast_exp(kn_cg *cg, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    if (scalar_t(t) != cg->t_float) return intrin1(cg, "llvm.exp", v);
    LLVMBuilderRef b = cg->b;
    unsigned w = is_vec(v) ? LLVMGetVectorSize(t) : 0;
    LLVMTypeRef it = w ? LLVMVectorType(cg->t_i32, w) : cg->t_i32;
#define FC(x) like(cg, fconst(cg->t_float, (x)), v)
#define IC(x) like(cg, kn_cg_i32(cg, (x)), LLVMBuildBitCast(b, v, it, ""))
    const double hi = 88.3762626647949, lo = -87.0;
    LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, v, FC(hi), "");
    LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, v, FC(lo), "");
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, v, v, "");
    LLVMValueRef x = LLVMBuildSelect(b, big, FC(hi), v, "");
    x = LLVMBuildSelect(b, small, FC(lo), x, "");
    x = LLVMBuildSelect(b, nan, FC(0.0), x, "");
    LLVMValueRef n = intrin1(cg, "llvm.roundeven", LLVMBuildFMul(b, x, FC(1.44269504088896341), ""));
    /* multiply-adds as llvm.fmuladd: one FMA each where the CPU has it */
    x = fmuladd(cg, n, FC(-0.693359375), x);
    x = fmuladd(cg, n, FC(2.12194440e-4), x);
    static const double c[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                               4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
    LLVMValueRef p = FC(c[0]);
    for (int i = 1; i < 6; i++) p = fmuladd(cg, p, x, FC(c[i]));
    p = fmuladd(cg, p, LLVMBuildFMul(b, x, x, ""), x);
    p = LLVMBuildFAdd(b, p, FC(1.0), "");
    LLVMValueRef e = LLVMBuildAdd(b, LLVMBuildFPToSI(b, n, it, ""), IC(127), "");
    e = LLVMBuildBitCast(b, LLVMBuildShl(b, e, IC(23), ""), t, "");
    LLVMValueRef r = LLVMBuildFMul(b, p, e, "");
    r = LLVMBuildSelect(b, big, FC(INFINITY), r, "");
    r = LLVMBuildSelect(b, small, FC(0.0), r, "");
    return LLVMBuildSelect(b, nan, v, r, "");
#undef FC
#undef IC
}

/* The value folded for input v; p is the map's scalar parameter. */
static LLVMValueRef map(kn_cg *cg, map_kind mk, bool flt, LLVMValueRef v, LLVMValueRef p)
{
    LLVMBuilderRef b = cg->b;
    switch (mk) {
    case M_ABS:
        if (flt) return intrin1(cg, "llvm.fabs", v);
        return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, v, LLVMConstNull(LLVMTypeOf(v)), ""),
                               LLVMBuildNeg(b, v, ""), v, "");
    case M_SQ: return flt ? LLVMBuildFMul(b, v, v, "") : LLVMBuildMul(b, v, v, "");
    case M_EXPSUB: return fast_exp(cg, LLVMBuildFSub(b, v, like(cg, p, v), ""));
    case M_SQDIFF: {
        LLVMValueRef d = LLVMBuildFSub(b, v, like(cg, p, v), "");
        return LLVMBuildFMul(b, d, d, "");
    }
    default: return v;
    }
}

/* Folds the w lanes of v into a scalar by halving (a fixed tree order). */
static LLVMValueRef hreduce(kn_cg *cg, fold_kind fk, bool flt, LLVMValueRef v, unsigned w)
{
    while (w > 1) {
        LLVMValueRef lo[32], hi[32];
        for (unsigned i = 0; i < w / 2; i++) {
            lo[i] = kn_cg_i32(cg, (int)i);
            hi[i] = kn_cg_i32(cg, (int)(i + w / 2));
        }
        LLVMValueRef u = LLVMGetPoison(LLVMTypeOf(v));
        LLVMValueRef a = LLVMBuildShuffleVector(cg->b, v, u, LLVMConstVector(lo, w / 2), "");
        LLVMValueRef b = LLVMBuildShuffleVector(cg->b, v, u, LLVMConstVector(hi, w / 2), "");
        v = fold(cg, fk, flt, a, b);
        w /= 2;
    }
    return LLVMBuildExtractElement(cg->b, v, kn_cg_i32(cg, 0), "");
}

/* Folds map(x[base + i]) for 0 <= i < n into a scalar; when py is given the
 * mapped values are also stored to py[base + i]. f32/f64 rows go through a
 * vector accumulator (fixed order, so results are deterministic). */
static LLVMValueRef row_fold(kn_cg *cg, fold_kind fk, map_kind mk, kn_dtype dt, LLVMValueRef px, LLVMValueRef py,
                             LLVMValueRef base, int64_t n, LLVMValueRef p)
{
    bool flt = dt_float(dt);
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    LLVMValueRef acc = entry_alloca(cg, t, 1);
    LLVMValueRef init = fold_init(cg, fk, dt);
    st(cg, init, acc);
    unsigned w = dt == KN_F64 ? 8 : 16;
    int64_t nv = (dt_native(dt) || dt_int(dt)) && n >= 2 * (int64_t)w ? n / w * w : 0;
    if (nv) {
        LLVMTypeRef vt = LLVMVectorType(t, w);
        unsigned es = (unsigned)LLVMABISizeOfType(LLVMGetModuleDataLayout(cg->mod), t);
        LLVMValueRef vacc = entry_alloca(cg, vt, 1);
        st(cg, splat(cg, init, w), vacc);
        kn_cg_loop l;
        LLVMValueRef j = kn_cg_loop_begin(cg, &l, nv / w, "vrow");
        LLVMValueRef idx = madd(cg, base, j, w);
        LLVMValueRef v = LLVMBuildLoad2(cg->b, vt, at(cg, t, px, idx), "");
        LLVMSetAlignment(v, es);
        v = map(cg, mk, flt, v, p);
        if (py) LLVMSetAlignment(LLVMBuildStore(cg->b, v, at(cg, t, py, idx)), es);
        st(cg, fold(cg, fk, flt, ld(cg, vt, vacc), v), vacc);
        kn_cg_loop_end(cg, &l);
        st(cg, fold(cg, fk, flt, init, hreduce(cg, fk, flt, ld(cg, vt, vacc), w)), acc);
    }
    if (n > nv) {
        kn_cg_loop l;
        LLVMValueRef j = kn_cg_loop_begin(cg, &l, n - nv, "row");
        LLVMValueRef idx = addc(cg, LLVMBuildAdd(cg->b, base, j, ""), nv);
        LLVMValueRef v = map(cg, mk, flt, kn_cg_load(cg, dt, px, idx), p);
        if (py) kn_cg_store(cg, dt, py, idx, v);
        st(cg, fold(cg, fk, flt, ld(cg, t, acc), v), acc);
        kn_cg_loop_end(cg, &l);
    }
    return ld(cg, t, acc);
}

/* The node's runtime descriptor (for the shared attribute rules). */
typedef struct desc {
    kn_opdesc d;
    bool has_out[8];
} desc;

static int get_desc(const kn_node *n, desc *out)
{
    if (n->n_outputs > 8) return KN_ERR_UNSUPPORTED;
    kn_node_opdesc(n, &out->d, out->has_out);
    return KN_OK;
}

static bool is_static(const kn_value *v) { return v && kn_shape_is_static(&v->shape); }

/* True if only output 0 of n is present. */
static bool only_out0(const kn_node *n)
{
    for (int i = 1; i < n->n_outputs; i++)
        if (n->outputs[i]) return false;
    return n->n_outputs >= 1 && n->outputs[0];
}

static int64_t span(const kn_value *v, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= v->shape.dims[d];
    return p;
}

/* ---- Reduce* -------------------------------------------------------------------- */

typedef struct grp {
    int64_t size, stride, ostride; /* ostride: output (or row) stride of a kept group */
    bool red;
} grp;

/* Merges x's axes into alternating kept/reduced groups (size-1 axes dropped)
 * with their contiguous input strides; returns the group count. */
static int merge_groups(const kn_value *x, uint32_t mask, grp *g)
{
    int ng = 0;
    for (int i = 0; i < x->shape.rank; i++) {
        int64_t d = x->shape.dims[i];
        bool red = (mask >> i) & 1u;
        if (d == 1) continue;
        if (ng && g[ng - 1].red == red) g[ng - 1].size *= d;
        else g[ng++] = (grp){d, 0, 0, red};
    }
    int64_t s = 1;
    for (int i = ng - 1; i >= 0; i--) {
        g[i].stride = s;
        s *= g[i].size;
    }
    return ng;
}

typedef struct rspec {
    kn_op op;
    fold_kind fk;
    map_kind mk;
    kn_dtype dt;
    int64_t count; /* reduced element count */
} rspec;

static void reduce_kind(kn_op op, fold_kind *fk, map_kind *mk)
{
    *mk = M_ID;
    *fk = F_SUM;
    switch (op) {
    case KN_OP_ReduceMax: *fk = F_MAX; break;
    case KN_OP_ReduceMin: *fk = F_MIN; break;
    case KN_OP_ReduceProd: *fk = F_PROD; break;
    case KN_OP_ReduceL1: *mk = M_ABS; break;
    case KN_OP_ReduceL2: case KN_OP_ReduceSumSquare: *mk = M_SQ; break;
    case KN_OP_ReduceLogSumExp: *mk = M_EXPSUB; break;
    default: break;
    }
}


/* Final transform of an accumulator (m: LogSumExp's maximum). */
static LLVMValueRef finish(kn_cg *cg, const rspec *r, LLVMValueRef a, LLVMValueRef m)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    switch (r->op) {
    case KN_OP_ReduceMean: return LLVMBuildFDiv(cg->b, a, like(cg, fconst(scalar_t(t), (double)r->count), a), "");
    case KN_OP_ReduceL2: return intrin1(cg, "llvm.sqrt", a);
    case KN_OP_ReduceLogSum: return intrin1(cg, "llvm.log", a);
    case KN_OP_ReduceLogSumExp: {
        LLVMValueRef inf = LLVMBuildFCmp(cg->b, LLVMRealOEQ, intrin1(cg, "llvm.fabs", m), fconst(t, INFINITY), "");
        return LLVMBuildSelect(cg->b, inf, m, LLVMBuildFAdd(cg->b, m, intrin1(cg, "llvm.log", a), ""), "");
    }
    default: return a;
    }
}

/* Folds map(x[...]) over the reduced groups R (innermost last) from `base`. */
static LLVMValueRef fold_nest(kn_cg *cg, fold_kind fk, map_kind mk, kn_dtype dt, LLVMValueRef px, LLVMValueRef base,
                              const grp *R, int nr, LLVMValueRef p)
{
    bool flt = dt_float(dt);
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    if (nr == 0) return fold(cg, fk, flt, fold_init(cg, fk, dt), map(cg, mk, flt, kn_cg_load(cg, dt, px, base), p));
    LLVMValueRef acc = entry_alloca(cg, t, 1);
    st(cg, fold_init(cg, fk, dt), acc);
    kn_cg_loop l[KN_MAX_RANK];
    LLVMValueRef off = base;
    for (int i = 0; i < nr - 1; i++) off = madd(cg, off, kn_cg_loop_begin(cg, &l[i], R[i].size, "r"), R[i].stride);
    const grp *last = &R[nr - 1];
    LLVMValueRef v;
    if (last->stride == 1) {
        v = row_fold(cg, fk, mk, dt, px, NULL, off, last->size, p);
        st(cg, fold(cg, fk, flt, ld(cg, t, acc), v), acc);
    } else {
        kn_cg_loop li;
        LLVMValueRef o2 = madd(cg, off, kn_cg_loop_begin(cg, &li, last->size, "r"), last->stride);
        v = map(cg, mk, flt, kn_cg_load(cg, dt, px, o2), p);
        st(cg, fold(cg, fk, flt, ld(cg, t, acc), v), acc);
        kn_cg_loop_end(cg, &li);
    }
    for (int i = nr - 2; i >= 0; i--) kn_cg_loop_end(cg, &l[i]);
    return ld(cg, t, acc);
}

/* Strategy A: one accumulator per output element; the reduced groups are the
 * inner loops (contiguous innermost when the last axis is reduced). */
static void reduce_scalar(kn_cg *cg, const rspec *r, LLVMValueRef px, LLVMValueRef py, grp *g, int ng)
{
    grp K[KN_MAX_RANK], R[KN_MAX_RANK];
    int nk = 0, nr = 0;
    for (int i = 0; i < ng; i++) {
        if (g[i].red) R[nr++] = g[i];
        else K[nk++] = g[i];
    }
    int64_t os = 1;
    for (int i = nk - 1; i >= 0; i--) {
        K[i].ostride = os;
        os *= K[i].size;
    }
    kn_cg_loop l[KN_MAX_RANK];
    LLVMValueRef in = kn_cg_i64(cg, 0), out = kn_cg_i64(cg, 0);
    for (int i = 0; i < nk; i++) {
        LLVMValueRef iv = kn_cg_loop_begin(cg, &l[i], K[i].size, "k");
        in = madd(cg, in, iv, K[i].stride);
        out = madd(cg, out, iv, K[i].ostride);
    }
    LLVMValueRef m = NULL, a;
    if (r->op == KN_OP_ReduceLogSumExp) {
        m = fold_nest(cg, F_MAX, M_ID, r->dt, px, in, R, nr, NULL);
        a = fold_nest(cg, F_SUM, M_EXPSUB, r->dt, px, in, R, nr, m);
    } else {
        a = fold_nest(cg, r->fk, r->mk, r->dt, px, in, R, nr, NULL);
    }
    kn_cg_store(cg, r->dt, py, out, finish(cg, r, a, m));
    for (int i = nk - 1; i >= 0; i--) kn_cg_loop_end(cg, &l[i]);
}

/* Strategy B (last group kept): the groups from the first reduced one on fold
 * into a row buffer indexed by their kept axes; the innermost loop walks the
 * contiguous kept axis, so it vectorizes as elementwise code. */
static void reduce_rows(kn_cg *cg, const rspec *r, LLVMValueRef px, LLVMValueRef py, grp *g, int ng, int fr,
                        int64_t row_n)
{
    bool flt = dt_float(r->dt);
    LLVMTypeRef t = kn_cg_compute_type(cg, r->dt);
    LLVMValueRef row = entry_alloca(cg, t, row_n);
    int64_t rs = 1;
    for (int i = ng - 1; i >= fr; i--)
        if (!g[i].red) {
            g[i].ostride = rs;
            rs *= g[i].size;
        }
    for (int i = fr - 1; i >= 0; i--) {
        g[i].ostride = rs;
        rs *= g[i].size;
    }
    kn_cg_loop lo[KN_MAX_RANK];
    LLVMValueRef in = kn_cg_i64(cg, 0), out = kn_cg_i64(cg, 0);
    for (int i = 0; i < fr; i++) {
        LLVMValueRef iv = kn_cg_loop_begin(cg, &lo[i], g[i].size, "k");
        in = madd(cg, in, iv, g[i].stride);
        out = madd(cg, out, iv, g[i].ostride);
    }
    kn_cg_loop l;
    LLVMValueRef j = kn_cg_loop_begin(cg, &l, row_n, "init");
    st(cg, fold_init(cg, r->fk, r->dt), at(cg, t, row, j));
    kn_cg_loop_end(cg, &l);
    kn_cg_loop li[KN_MAX_RANK];
    LLVMValueRef xi = in, ri = kn_cg_i64(cg, 0);
    for (int i = fr; i < ng; i++) {
        LLVMValueRef iv = kn_cg_loop_begin(cg, &li[i], g[i].size, g[i].red ? "r" : "k");
        xi = madd(cg, xi, iv, g[i].stride);
        if (!g[i].red) ri = madd(cg, ri, iv, g[i].ostride);
    }
    LLVMValueRef pr = at(cg, t, row, ri);
    LLVMValueRef v = map(cg, r->mk, flt, kn_cg_load(cg, r->dt, px, xi), NULL);
    st(cg, fold(cg, r->fk, flt, ld(cg, t, pr), v), pr);
    for (int i = ng - 1; i >= fr; i--) kn_cg_loop_end(cg, &li[i]);
    j = kn_cg_loop_begin(cg, &l, row_n, "fin");
    kn_cg_store(cg, r->dt, py, LLVMBuildAdd(cg->b, out, j, ""), finish(cg, r, ld(cg, t, at(cg, t, row, j)), NULL));
    kn_cg_loop_end(cg, &l);
    for (int i = fr - 1; i >= 0; i--) kn_cg_loop_end(cg, &lo[i]);
}

static int lower_reduce_op(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    if (!x || !y || !is_static(x) || !is_static(y) || y->dtype != x->dtype) return KN_ERR_UNSUPPORTED;
    rspec r = {n->op, F_SUM, M_ID, x->dtype, 1};
    reduce_kind(n->op, &r.fk, &r.mk);
    bool int_ok = r.op == KN_OP_ReduceSum || r.op == KN_OP_ReduceProd || r.op == KN_OP_ReduceMax ||
                  r.op == KN_OP_ReduceMin || r.op == KN_OP_ReduceL1 || r.op == KN_OP_ReduceSumSquare;
    if (!dt_float(x->dtype) && !(dt_int(x->dtype) && int_ok)) return KN_ERR_UNSUPPORTED;
    desc d;
    if (get_desc(n, &d)) return KN_ERR_UNSUPPORTED;
    const kn_value *ax = kn_node_input(n, 1);
    if (ax && !ax->const_data) return KN_ERR_UNSUPPORTED; /* axes known only at run time */
    int64_t axes[KN_RD_MAX_AXES];
    int cnt = kn_rd_reduce_axes(&d.d, ax ? ax->const_data : NULL, ax != NULL, axes);
    uint32_t mask;
    if (cnt < 0 || kn_rd_axes_mask(&d.d, axes, cnt, x->shape.rank, &mask)) return KN_ERR_UNSUPPORTED;
    for (int i = 0; i < x->shape.rank; i++)
        if ((mask >> i) & 1u) r.count *= x->shape.dims[i];
    /* an empty integer max/min stores a truncated INT64 sentinel at run time */
    if (r.count == 0 && dt_int(x->dtype) && (r.fk == F_MAX || r.fk == F_MIN)) return KN_ERR_UNSUPPORTED;
    if (kn_cg_numel(y) != kn_cg_numel(x) / (r.count ? r.count : 1) && r.count) return KN_ERR_UNSUPPORTED;
    grp g[KN_MAX_RANK];
    int ng = merge_groups(x, mask, g);
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y);
    int fr = -1;
    int64_t row_n = 1;
    for (int i = 0; i < ng; i++) {
        if (g[i].red && fr < 0) fr = i;
        if (fr >= 0 && !g[i].red) row_n *= g[i].size;
    }
    bool rows = ng && !g[ng - 1].red && fr >= 0 && row_n <= ROW_MAX && r.op != KN_OP_ReduceLogSumExp &&
                kn_cg_numel(x) > 0;
    if (rows) reduce_rows(cg, &r, px, py, g, ng, fr, row_n);
    else reduce_scalar(cg, &r, px, py, g, ng);
    return KN_OK;
}

/* ---- ArgMax / ArgMin ---------------------------------------------------------------- */

/* u > v with NaN above everything (the runtime's cmp_elems); eq likewise. */
static LLVMValueRef gt_nan(kn_cg *cg, bool flt, LLVMValueRef u, LLVMValueRef v)
{
    if (!flt) return LLVMBuildICmp(cg->b, LLVMIntSGT, u, v, "");
    LLVMValueRef un = LLVMBuildFCmp(cg->b, LLVMRealUNO, u, u, ""), vn = LLVMBuildFCmp(cg->b, LLVMRealUNO, v, v, "");
    LLVMValueRef c = LLVMBuildAnd(cg->b, un, LLVMBuildNot(cg->b, vn, ""), "");
    return LLVMBuildOr(cg->b, c, LLVMBuildFCmp(cg->b, LLVMRealOGT, u, v, ""), "");
}

/* u beats v for ArgMax (is_max) or ArgMin: NaN beats any number in both,
 * as in numpy's argmax and argmin (the runtime's kn_k_argreduce). */
static LLVMValueRef arg_beats(kn_cg *cg, bool flt, bool is_max, LLVMValueRef u, LLVMValueRef v)
{
    if (is_max || !flt) return is_max ? gt_nan(cg, flt, u, v) : gt_nan(cg, flt, v, u);
    LLVMValueRef un = LLVMBuildFCmp(cg->b, LLVMRealUNO, u, u, ""), vn = LLVMBuildFCmp(cg->b, LLVMRealUNO, v, v, "");
    LLVMValueRef c = LLVMBuildAnd(cg->b, un, LLVMBuildNot(cg->b, vn, ""), "");
    return LLVMBuildOr(cg->b, c, LLVMBuildFCmp(cg->b, LLVMRealOLT, u, v, ""), "");
}

static LLVMValueRef eq_nan(kn_cg *cg, bool flt, LLVMValueRef u, LLVMValueRef v)
{
    if (!flt) return LLVMBuildICmp(cg->b, LLVMIntEQ, u, v, "");
    LLVMValueRef both = LLVMBuildAnd(cg->b, LLVMBuildFCmp(cg->b, LLVMRealUNO, u, u, ""),
                                     LLVMBuildFCmp(cg->b, LLVMRealUNO, v, v, ""), "");
    return LLVMBuildOr(cg->b, both, LLVMBuildFCmp(cg->b, LLVMRealOEQ, u, v, ""), "");
}

/* outer × n × inner view of x around axis a. */
static void split3(const kn_value *x, int a, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = span(x, 0, a);
    *n = x->shape.dims[a];
    *inner = span(x, a + 1, x->shape.rank);
}

/* (v, i) replaces (b, bi): better, or equal with the index rule (select_last:
 * the later index; otherwise never, as the running index only grows). */
static LLVMValueRef arg_better(kn_cg *cg, bool flt, bool is_max, bool last, LLVMValueRef v, LLVMValueRef b)
{
    LLVMValueRef c = arg_beats(cg, flt, is_max, v, b);
    return last ? LLVMBuildOr(cg->b, c, eq_nan(cg, flt, v, b), "") : c;
}

/* Index of the best element of the contiguous row x[base .. base+n): one
 * candidate per vector lane (lane l sees elements l, l+w, ... in order), then
 * the lanes are merged with ties going to the lower (or, select_last, the
 * higher) index, then the scalar tail. */
static LLVMValueRef arg_row(kn_cg *cg, kn_dtype dt, LLVMValueRef px, LLVMValueRef base, int64_t n, bool is_max,
                            bool last)
{
    bool flt = dt_float(dt);
    LLVMTypeRef t = kn_cg_compute_type(cg, dt), i64 = cg->t_i64;
    unsigned w = LLVMABISizeOfType(LLVMGetModuleDataLayout(cg->mod), t) == 8 ? 8 : 16;
    LLVMValueRef bv = entry_alloca(cg, t, 1), bi = entry_alloca(cg, i64, 1);
    int64_t nv = n / w * w, start = 1;
    if (nv >= 2 * (int64_t)w) {
        LLVMTypeRef vt = LLVMVectorType(t, w), it = LLVMVectorType(i64, w);
        unsigned es = (unsigned)LLVMABISizeOfType(LLVMGetModuleDataLayout(cg->mod), t);
        LLVMValueRef vb = entry_alloca(cg, vt, 1), vi = entry_alloca(cg, it, 1), lanes[16];
        for (unsigned l = 0; l < w; l++) lanes[l] = kn_cg_i64(cg, l);
        LLVMValueRef lane = LLVMConstVector(lanes, w);
        LLVMValueRef first = LLVMBuildLoad2(cg->b, vt, at(cg, t, px, base), "");
        LLVMSetAlignment(first, es);
        st(cg, first, vb);
        st(cg, lane, vi);
        kn_cg_loop l;
        LLVMValueRef j = LLVMBuildMul(cg->b, addc(cg, kn_cg_loop_begin(cg, &l, nv / w - 1, "vj"), 1), kn_cg_i64(cg, w), "");
        LLVMValueRef v = LLVMBuildLoad2(cg->b, vt, at(cg, t, px, LLVMBuildAdd(cg->b, base, j, "")), "");
        LLVMSetAlignment(v, es);
        LLVMValueRef b = ld(cg, vt, vb), c = arg_better(cg, flt, is_max, last, v, b);
        st(cg, LLVMBuildSelect(cg->b, c, v, b, ""), vb);
        st(cg, LLVMBuildSelect(cg->b, c, LLVMBuildAdd(cg->b, splat(cg, j, w), lane, ""), ld(cg, it, vi), ""), vi);
        kn_cg_loop_end(cg, &l);
        LLVMValueRef V = ld(cg, vt, vb), I = ld(cg, it, vi);
        LLVMValueRef cb = LLVMBuildExtractElement(cg->b, V, kn_cg_i32(cg, 0), "");
        LLVMValueRef ci = LLVMBuildExtractElement(cg->b, I, kn_cg_i32(cg, 0), "");
        for (unsigned e = 1; e < w; e++) {
            LLVMValueRef v2 = LLVMBuildExtractElement(cg->b, V, kn_cg_i32(cg, (int)e), "");
            LLVMValueRef i2 = LLVMBuildExtractElement(cg->b, I, kn_cg_i32(cg, (int)e), "");
            LLVMValueRef c = arg_beats(cg, flt, is_max, v2, cb);
            LLVMValueRef tie = LLVMBuildICmp(cg->b, last ? LLVMIntSGT : LLVMIntSLT, i2, ci, "");
            c = LLVMBuildOr(cg->b, c, LLVMBuildAnd(cg->b, eq_nan(cg, flt, v2, cb), tie, ""), "");
            cb = LLVMBuildSelect(cg->b, c, v2, cb, "");
            ci = LLVMBuildSelect(cg->b, c, i2, ci, "");
        }
        st(cg, cb, bv);
        st(cg, ci, bi);
        start = nv;
    } else {
        st(cg, kn_cg_load(cg, dt, px, base), bv);
        st(cg, kn_cg_i64(cg, 0), bi);
    }
    if (n > start) {
        kn_cg_loop l;
        LLVMValueRef j = addc(cg, kn_cg_loop_begin(cg, &l, n - start, "j"), start);
        LLVMValueRef v = kn_cg_load(cg, dt, px, LLVMBuildAdd(cg->b, base, j, "")), b = ld(cg, t, bv);
        LLVMValueRef c = arg_better(cg, flt, is_max, last, v, b);
        st(cg, LLVMBuildSelect(cg->b, c, v, b, ""), bv);
        st(cg, LLVMBuildSelect(cg->b, c, j, ld(cg, i64, bi), ""), bi);
        kn_cg_loop_end(cg, &l);
    }
    return ld(cg, i64, bi);
}

static int lower_arg(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    if (!x || !y || !is_static(x) || !is_static(y) || y->dtype != KN_I64) return KN_ERR_UNSUPPORTED;
    kn_dtype dt = x->dtype;
    if (!dt_float(dt) && !dt_int(dt)) return KN_ERR_UNSUPPORTED;
    int a = kn_norm_axis(kn_attr_int(n, "axis", 0), x->shape.rank);
    if (a < 0) return KN_ERR_UNSUPPORTED;
    int64_t outer, len, inner;
    split3(x, a, &outer, &len, &inner);
    if (len <= 0 || inner > ROW_MAX || kn_cg_numel(y) != outer * inner) return KN_ERR_UNSUPPORTED;
    bool is_max = n->op == KN_OP_ArgMax, last = kn_attr_int(n, "select_last_index", 0) != 0, flt = dt_float(dt);
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y);
    if (inner == 1 && (dt_native(dt) || dt_int(dt))) {
        kn_cg_loop l;
        LLVMValueRef o = kn_cg_loop_begin(cg, &l, outer, "o");
        LLVMValueRef r = arg_row(cg, dt, px, LLVMBuildMul(cg->b, o, kn_cg_i64(cg, len), ""), len, is_max, last);
        kn_cg_store(cg, KN_I64, py, o, r);
        kn_cg_loop_end(cg, &l);
        return KN_OK;
    }
    LLVMValueRef bv = entry_alloca(cg, t, inner), bi = entry_alloca(cg, cg->t_i64, inner);
    kn_cg_loop lo, li, lj;
    LLVMValueRef o = kn_cg_loop_begin(cg, &lo, outer, "o");
    LLVMValueRef base = LLVMBuildMul(cg->b, o, kn_cg_i64(cg, len * inner), "");
    LLVMValueRef i = kn_cg_loop_begin(cg, &li, inner, "i");
    st(cg, kn_cg_load(cg, dt, px, LLVMBuildAdd(cg->b, base, i, "")), at(cg, t, bv, i));
    st(cg, kn_cg_i64(cg, 0), at(cg, cg->t_i64, bi, i));
    kn_cg_loop_end(cg, &li);
    LLVMValueRef j = addc(cg, kn_cg_loop_begin(cg, &lj, len - 1, "j"), 1);
    LLVMValueRef row = madd(cg, base, j, inner);
    i = kn_cg_loop_begin(cg, &li, inner, "i");
    LLVMValueRef v = kn_cg_load(cg, dt, px, LLVMBuildAdd(cg->b, row, i, ""));
    LLVMValueRef pv = at(cg, t, bv, i), pi = at(cg, cg->t_i64, bi, i), b = ld(cg, t, pv);
    LLVMValueRef c = arg_beats(cg, flt, is_max, v, b);
    if (last) c = LLVMBuildOr(cg->b, c, eq_nan(cg, flt, v, b), "");
    st(cg, LLVMBuildSelect(cg->b, c, v, b, ""), pv);
    st(cg, LLVMBuildSelect(cg->b, c, j, ld(cg, cg->t_i64, pi), ""), pi);
    kn_cg_loop_end(cg, &li);
    kn_cg_loop_end(cg, &lj);
    i = kn_cg_loop_begin(cg, &li, inner, "i");
    kn_cg_store(cg, KN_I64, py, madd(cg, i, o, inner), ld(cg, cg->t_i64, at(cg, cg->t_i64, bi, i)));
    kn_cg_loop_end(cg, &li);
    kn_cg_loop_end(cg, &lo);
    return KN_OK;
}

/* ---- Softmax / LogSoftmax ---------------------------------------------------------------- */

/* Rows of n contiguous elements (inner == 1): max, sum of exp, scale. */
static void softmax_rows(kn_cg *cg, bool lg, kn_dtype dt, LLVMValueRef px, LLVMValueRef py, int64_t outer, int64_t len)
{
    bool flt = true;
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    kn_cg_loop lo, l;
    LLVMValueRef base = LLVMBuildMul(cg->b, kn_cg_loop_begin(cg, &lo, outer, "o"), kn_cg_i64(cg, len), "");
    LLVMValueRef m = row_fold(cg, F_MAXGT, M_ID, dt, px, NULL, base, len, NULL);
    LLVMValueRef s = row_fold(cg, F_SUM, M_EXPSUB, dt, px, lg ? NULL : py, base, len, m);
    LLVMValueRef k = lg ? intrin1(cg, "llvm.log", s) : LLVMBuildFDiv(cg->b, fconst(t, 1.0), s, "");
    LLVMValueRef idx = LLVMBuildAdd(cg->b, base, kn_cg_loop_begin(cg, &l, len, "i"), "");
    LLVMValueRef v;
    if (lg) v = LLVMBuildFSub(cg->b, LLVMBuildFSub(cg->b, kn_cg_load(cg, dt, px, idx), m, ""), k, "");
    else v = LLVMBuildFMul(cg->b, kn_cg_load(cg, dt, py, idx), k, "");
    kn_cg_store(cg, dt, py, idx, v);
    kn_cg_loop_end(cg, &l);
    kn_cg_loop_end(cg, &lo);
    (void)flt;
}

/* Columns of a strided softmax taken at once: their running max and sum
 * (two arrays on the stack) stay in L1 while the rows stream past. */
#define SOFTMAX_COL_BLOCK 1024

/* The largest divisor of inner that is at most SOFTMAX_COL_BLOCK. */
static int64_t col_block(int64_t inner)
{
    for (int64_t b = inner < SOFTMAX_COL_BLOCK ? inner : SOFTMAX_COL_BLOCK; b > 1; b--)
        if (inner % b == 0) return b;
    return 1;
}

/* Softmax over a strided axis: per-column max/sum rows, inner axis innermost,
 * the columns in blocks of blk (a divisor of inner). */
static void softmax_cols(kn_cg *cg, bool lg, kn_dtype dt, LLVMValueRef px, LLVMValueRef py, int64_t outer, int64_t len,
                         int64_t inner)
{
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    int64_t blk = col_block(inner);
    LLVMValueRef mr = entry_alloca(cg, t, blk), sr = entry_alloca(cg, t, blk);
    kn_cg_loop lo, lb, lk, li;
    LLVMValueRef base = LLVMBuildMul(cg->b, kn_cg_loop_begin(cg, &lo, outer, "o"), kn_cg_i64(cg, len * inner), "");
    base = madd(cg, base, kn_cg_loop_begin(cg, &lb, inner / blk, "b"), blk);
    LLVMValueRef i = kn_cg_loop_begin(cg, &li, blk, "i");
    st(cg, fconst(t, -INFINITY), at(cg, t, mr, i));
    st(cg, fconst(t, 0.0), at(cg, t, sr, i));
    kn_cg_loop_end(cg, &li);
    for (int pass = 0; pass < 3; pass++) {
        LLVMValueRef row = madd(cg, base, kn_cg_loop_begin(cg, &lk, len, "k"), inner);
        i = kn_cg_loop_begin(cg, &li, blk, "i");
        LLVMValueRef idx = LLVMBuildAdd(cg->b, row, i, "");
        LLVMValueRef pm = at(cg, t, mr, i), ps = at(cg, t, sr, i);
        LLVMValueRef x = kn_cg_load(cg, dt, px, idx);
        if (pass == 0) {
            st(cg, fold(cg, F_MAXGT, true, ld(cg, t, pm), x), pm);
        } else if (pass == 1) {
            LLVMValueRef e = fast_exp(cg, LLVMBuildFSub(cg->b, x, ld(cg, t, pm), ""));
            if (!lg) kn_cg_store(cg, dt, py, idx, e);
            st(cg, LLVMBuildFAdd(cg->b, ld(cg, t, ps), e, ""), ps);
        } else if (lg) {
            LLVMValueRef v = LLVMBuildFSub(cg->b, x, ld(cg, t, pm), "");
            kn_cg_store(cg, dt, py, idx, LLVMBuildFSub(cg->b, v, ld(cg, t, ps), ""));
        } else {
            kn_cg_store(cg, dt, py, idx, LLVMBuildFMul(cg->b, kn_cg_load(cg, dt, py, idx), ld(cg, t, ps), ""));
        }
        kn_cg_loop_end(cg, &li);
        kn_cg_loop_end(cg, &lk);
        if (pass == 1) { /* sums → reciprocal (softmax) or log (logsoftmax) */
            i = kn_cg_loop_begin(cg, &li, blk, "i");
            LLVMValueRef ps = at(cg, t, sr, i), s = ld(cg, t, ps);
            st(cg, lg ? intrin1(cg, "llvm.log", s) : LLVMBuildFDiv(cg->b, fconst(t, 1.0), s, ""), ps);
            kn_cg_loop_end(cg, &li);
        }
    }
    kn_cg_loop_end(cg, &lb);
    kn_cg_loop_end(cg, &lo);
}

static int lower_softmax(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    if (!x || !y || !is_static(x) || !is_static(y) || !dt_float(x->dtype) || y->dtype != x->dtype) return KN_ERR_UNSUPPORTED;
    bool legacy = kn_node_opset(n) < 13;
    int a = kn_norm_axis(kn_attr_int(n, "axis", legacy ? 1 : -1), x->shape.rank);
    if (a < 0) return KN_ERR_UNSUPPORTED;
    int64_t outer = span(x, 0, a), len, inner;
    if (legacy) {
        len = span(x, a, x->shape.rank);
        inner = 1;
    } else {
        len = x->shape.dims[a];
        inner = span(x, a + 1, x->shape.rank);
    }
    bool lg = n->op == KN_OP_LogSoftmax;
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y);
    if (kn_cg_numel(x) == 0) return KN_OK;
    if (inner == 1) softmax_rows(cg, lg, x->dtype, px, py, outer, len);
    else softmax_cols(cg, lg, x->dtype, px, py, outer, len, inner);
    return KN_OK;
}

/* ---- normalizations ---------------------------------------------------------------- */

/* 1/sqrt(v + eps) in the compute type. */
static LLVMValueRef inv_std(kn_cg *cg, LLVMValueRef var, float eps)
{
    LLVMTypeRef t = LLVMTypeOf(var);
    LLVMValueRef s = intrin1(cg, "llvm.sqrt", LLVMBuildFAdd(cg->b, var, fconst(t, (double)eps), ""));
    return LLVMBuildFDiv(cg->b, fconst(t, 1.0), s, "");
}

/* Mean and inverse std of x[base .. base+len) (two passes, like the kernels). */
static void moments(kn_cg *cg, kn_dtype dt, LLVMValueRef px, LLVMValueRef base, int64_t len, float eps,
                    LLVMValueRef *out_m, LLVMValueRef *out_is)
{
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    LLVMValueRef cnt = fconst(t, (double)len);
    LLVMValueRef m = LLVMBuildFDiv(cg->b, row_fold(cg, F_SUM, M_ID, dt, px, NULL, base, len, NULL), cnt, "");
    LLVMValueRef v = LLVMBuildFDiv(cg->b, row_fold(cg, F_SUM, M_SQDIFF, dt, px, NULL, base, len, m), cnt, "");
    *out_m = m;
    *out_is = inv_std(cg, v, eps);
}

/* Float v converted to float type t. */
static LLVMValueRef to_type(kn_cg *cg, LLVMValueRef v, LLVMTypeRef t)
{
    LLVMTypeRef vt = LLVMTypeOf(v);
    if (vt == t) return v;
    return t == cg->t_double ? LLVMBuildFPExt(cg->b, v, t, "") : LLVMBuildFPTrunc(cg->b, v, t, "");
}

/* A float parameter of numel 1 or `want` (absent is fine when optional). */
static bool param_ok(const kn_value *v, int64_t want, bool optional)
{
    if (!v) return optional;
    if (!is_static(v)) return false;
    int64_t k = kn_cg_numel(v);
    bool dt = v->dtype == KN_F32 || v->dtype == KN_F64 || v->dtype == KN_F16 || v->dtype == KN_BF16;
    return dt && (k == want || k == 1);
}

/* Element idx of parameter v (broadcast when it holds one element) in the
 * compute type t; def when v is absent. */
static LLVMValueRef param_at(kn_cg *cg, const kn_value *v, LLVMValueRef pv, LLVMValueRef idx, LLVMTypeRef t, double def)
{
    if (!v) return fconst(t, def);
    return to_type(cg, kn_cg_load(cg, v->dtype, pv, kn_cg_numel(v) == 1 ? kn_cg_i64(cg, 0) : idx), t);
}

static int lower_layernorm(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *sc = kn_node_input(n, 1), *bi = kn_node_input(n, 2), *y = n->outputs[0];
    if (!x || !y || !is_static(x) || !is_static(y) || !dt_float(x->dtype) || y->dtype != x->dtype) return KN_ERR_UNSUPPORTED;
    int a = kn_norm_axis(kn_attr_int(n, "axis", -1), x->shape.rank);
    if (a < 0) return KN_ERR_UNSUPPORTED;
    int64_t outer = span(x, 0, a), inner = span(x, a, x->shape.rank);
    if (inner <= 0 || !param_ok(sc, inner, false) || !param_ok(bi, inner, true)) return KN_ERR_UNSUPPORTED;
    const kn_value *mo = n->n_outputs > 1 ? n->outputs[1] : NULL, *io = n->n_outputs > 2 ? n->outputs[2] : NULL;
    if ((mo && (!param_ok(mo, outer, false) || kn_cg_numel(mo) != outer)) ||
        (io && (!param_ok(io, outer, false) || kn_cg_numel(io) != outer)))
        return KN_ERR_UNSUPPORTED;
    float eps = kn_attr_float(n, "epsilon", 1e-5f);
    kn_dtype dt = x->dtype;
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y), ps = kn_cg_ptr(cg, sc);
    LLVMValueRef pb = bi ? kn_cg_ptr(cg, bi) : NULL, pm = mo ? kn_cg_ptr(cg, mo) : NULL, pi = io ? kn_cg_ptr(cg, io) : NULL;
    kn_cg_loop lo, l;
    LLVMValueRef o = kn_cg_loop_begin(cg, &lo, outer, "o");
    LLVMValueRef base = LLVMBuildMul(cg->b, o, kn_cg_i64(cg, inner), ""), m, is;
    moments(cg, dt, px, base, inner, eps, &m, &is);
    LLVMValueRef i = kn_cg_loop_begin(cg, &l, inner, "i");
    LLVMValueRef idx = LLVMBuildAdd(cg->b, base, i, "");
    LLVMValueRef v = LLVMBuildFMul(cg->b, LLVMBuildFSub(cg->b, kn_cg_load(cg, dt, px, idx), m, ""), is, "");
    v = LLVMBuildFMul(cg->b, v, param_at(cg, sc, ps, i, t, 1.0), "");
    v = LLVMBuildFAdd(cg->b, v, param_at(cg, bi, pb, i, t, 0.0), "");
    kn_cg_store(cg, dt, py, idx, v);
    kn_cg_loop_end(cg, &l);
    if (mo) kn_cg_store(cg, mo->dtype, pm, o, to_type(cg, m, kn_cg_compute_type(cg, mo->dtype)));
    if (io) kn_cg_store(cg, io->dtype, pi, o, to_type(cg, is, kn_cg_compute_type(cg, io->dtype)));
    kn_cg_loop_end(cg, &lo);
    return KN_OK;
}

static int lower_batchnorm(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    if (!x || !y || !is_static(x) || !is_static(y) || !dt_float(x->dtype) || y->dtype != x->dtype || x->shape.rank < 2 ||
        !only_out0(n) || kn_attr_int(n, "training_mode", 0) != 0)
        return KN_ERR_UNSUPPORTED;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], sp = span(x, 2, x->shape.rank);
    const kn_value *pv[4];
    LLVMValueRef pp[4];
    for (int k = 0; k < 4; k++) {
        pv[k] = kn_node_input(n, k + 1);
        if (!param_ok(pv[k], C, false) || kn_cg_numel(pv[k]) != C) return KN_ERR_UNSUPPORTED;
    }
    double eps = kn_attr_float(n, "epsilon", 1e-5f);
    kn_dtype dt = x->dtype;
    LLVMTypeRef t = kn_cg_compute_type(cg, dt), d = cg->t_double;
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y);
    for (int k = 0; k < 4; k++) pp[k] = kn_cg_ptr(cg, pv[k]);
    kn_cg_loop ln, lc, li;
    LLVMValueRef nb = kn_cg_loop_begin(cg, &ln, N, "n");
    LLVMValueRef c = kn_cg_loop_begin(cg, &lc, C, "c");
    /* a and b in double, then rounded, as the runtime's f32 loop does */
    LLVMValueRef s = param_at(cg, pv[0], pp[0], c, d, 1), b = param_at(cg, pv[1], pp[1], c, d, 0);
    LLVMValueRef mean = param_at(cg, pv[2], pp[2], c, d, 0), var = param_at(cg, pv[3], pp[3], c, d, 1);
    LLVMValueRef sd = intrin1(cg, "llvm.sqrt", LLVMBuildFAdd(cg->b, var, fconst(d, eps), ""));
    LLVMValueRef fa = LLVMBuildFDiv(cg->b, s, sd, "");
    LLVMValueRef fb = LLVMBuildFSub(cg->b, b, LLVMBuildFMul(cg->b, mean, fa, ""), "");
    if (t != d) {
        fa = LLVMBuildFPTrunc(cg->b, fa, t, "");
        fb = LLVMBuildFPTrunc(cg->b, fb, t, "");
    }
    LLVMValueRef base = LLVMBuildMul(cg->b, madd(cg, c, nb, C), kn_cg_i64(cg, sp), "");
    LLVMValueRef idx = LLVMBuildAdd(cg->b, base, kn_cg_loop_begin(cg, &li, sp, "i"), "");
    LLVMValueRef v = LLVMBuildFAdd(cg->b, LLVMBuildFMul(cg->b, kn_cg_load(cg, dt, px, idx), fa, ""), fb, "");
    kn_cg_store(cg, dt, py, idx, v);
    kn_cg_loop_end(cg, &li);
    kn_cg_loop_end(cg, &lc);
    kn_cg_loop_end(cg, &ln);
    return KN_OK;
}

/* Instance/Group norm: N*G runs of cpg*sp elements; the affine parameters of
 * channel c are at c / div. */
static void norm_runs(kn_cg *cg, const kn_node *n, int64_t G, int64_t cpg, int64_t div, float eps)
{
    const kn_value *x = kn_node_input(n, 0), *sc = kn_node_input(n, 1), *bi = kn_node_input(n, 2), *y = n->outputs[0];
    int64_t N = x->shape.dims[0], sp = span(x, 2, x->shape.rank), len = cpg * sp;
    kn_dtype dt = x->dtype;
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y), ps = kn_cg_ptr(cg, sc), pb = kn_cg_ptr(cg, bi);
    kn_cg_loop ln, lg, lj, li;
    LLVMValueRef nb = kn_cg_loop_begin(cg, &ln, N, "n");
    LLVMValueRef g = kn_cg_loop_begin(cg, &lg, G, "g");
    LLVMValueRef base = LLVMBuildMul(cg->b, madd(cg, g, nb, G), kn_cg_i64(cg, len), ""), m, is;
    moments(cg, dt, px, base, len, eps, &m, &is);
    LLVMValueRef j = kn_cg_loop_begin(cg, &lj, cpg, "j");
    LLVMValueRef pc = madd(cg, j, g, cpg);
    if (div > 1) pc = LLVMBuildSDiv(cg->b, pc, kn_cg_i64(cg, div), "");
    LLVMValueRef s = param_at(cg, sc, ps, pc, t, 1.0), b = param_at(cg, bi, pb, pc, t, 0.0);
    LLVMValueRef cb = madd(cg, base, j, sp);
    LLVMValueRef idx = LLVMBuildAdd(cg->b, cb, kn_cg_loop_begin(cg, &li, sp, "i"), "");
    LLVMValueRef v = LLVMBuildFMul(cg->b, LLVMBuildFSub(cg->b, kn_cg_load(cg, dt, px, idx), m, ""), is, "");
    kn_cg_store(cg, dt, py, idx, LLVMBuildFAdd(cg->b, LLVMBuildFMul(cg->b, v, s, ""), b, ""));
    kn_cg_loop_end(cg, &li);
    kn_cg_loop_end(cg, &lj);
    kn_cg_loop_end(cg, &lg);
    kn_cg_loop_end(cg, &ln);
}

static bool nc_float_ok(const kn_node *n, int min_rank)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    return x && y && is_static(x) && is_static(y) && dt_float(x->dtype) && y->dtype == x->dtype &&
           x->shape.rank >= min_rank && only_out0(n);
}

static int lower_instancenorm(kn_cg *cg, const kn_node *n)
{
    if (!nc_float_ok(n, 3)) return KN_ERR_UNSUPPORTED;
    const kn_value *x = kn_node_input(n, 0);
    int64_t C = x->shape.dims[1];
    const kn_value *sc = kn_node_input(n, 1), *bi = kn_node_input(n, 2);
    if (!param_ok(sc, C, false) || !param_ok(bi, C, false) || kn_cg_numel(sc) != C || kn_cg_numel(bi) != C ||
        span(x, 2, x->shape.rank) == 0)
        return KN_ERR_UNSUPPORTED;
    norm_runs(cg, n, C, 1, 1, kn_attr_float(n, "epsilon", 1e-5f));
    return KN_OK;
}

static int lower_groupnorm(kn_cg *cg, const kn_node *n)
{
    if (!nc_float_ok(n, 3)) return KN_ERR_UNSUPPORTED;
    const kn_value *x = kn_node_input(n, 0), *sc = kn_node_input(n, 1), *bi = kn_node_input(n, 2);
    int64_t C = x->shape.dims[1], G = kn_attr_int(n, "num_groups", -1);
    if (G < 1 || C % G || span(x, 2, x->shape.rank) == 0 || C == 0 || !sc || !is_static(sc)) return KN_ERR_UNSUPPORTED;
    bool per_channel = kn_node_opset(n) >= 21 || (kn_cg_numel(sc) == C && C != G);
    int64_t want = per_channel ? C : G;
    if (!param_ok(sc, want, false) || !param_ok(bi, want, false) || kn_cg_numel(sc) != want || kn_cg_numel(bi) != want)
        return KN_ERR_UNSUPPORTED;
    int64_t cpg = C / G;
    norm_runs(cg, n, G, cpg, per_channel ? 1 : cpg, kn_attr_float(n, "epsilon", 1e-5f));
    return KN_OK;
}

static int lower_lpnorm(kn_cg *cg, const kn_node *n)
{
    if (!nc_float_ok(n, 1)) return KN_ERR_UNSUPPORTED;
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    int a = kn_norm_axis(kn_attr_int(n, "axis", -1), x->shape.rank);
    int64_t p = kn_attr_int(n, "p", 2), outer, len, inner;
    if (a < 0 || (p != 1 && p != 2)) return KN_ERR_UNSUPPORTED;
    split3(x, a, &outer, &len, &inner);
    if (inner > ROW_MAX) return KN_ERR_UNSUPPORTED;
    kn_dtype dt = x->dtype;
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y), sr = entry_alloca(cg, t, inner ? inner : 1);
    kn_cg_loop lo, lk, li;
    LLVMValueRef base = LLVMBuildMul(cg->b, kn_cg_loop_begin(cg, &lo, outer, "o"), kn_cg_i64(cg, len * inner), "");
    LLVMValueRef i = kn_cg_loop_begin(cg, &li, inner, "i");
    st(cg, fconst(t, 0.0), at(cg, t, sr, i));
    kn_cg_loop_end(cg, &li);
    for (int pass = 0; pass < 2; pass++) {
        LLVMValueRef row = madd(cg, base, kn_cg_loop_begin(cg, &lk, len, "k"), inner);
        i = kn_cg_loop_begin(cg, &li, inner, "i");
        LLVMValueRef idx = LLVMBuildAdd(cg->b, row, i, ""), ps = at(cg, t, sr, i);
        LLVMValueRef v = kn_cg_load(cg, dt, px, idx), s = ld(cg, t, ps);
        if (pass == 0) {
            st(cg, LLVMBuildFAdd(cg->b, s, map(cg, p == 1 ? M_ABS : M_SQ, true, v, NULL), ""), ps);
        } else {
            LLVMValueRef z = LLVMBuildFCmp(cg->b, LLVMRealOEQ, s, fconst(t, 0.0), "");
            kn_cg_store(cg, dt, py, idx, LLVMBuildSelect(cg->b, z, fconst(t, 0.0), LLVMBuildFDiv(cg->b, v, s, ""), ""));
        }
        kn_cg_loop_end(cg, &li);
        kn_cg_loop_end(cg, &lk);
        if (pass == 0 && p == 2) {
            i = kn_cg_loop_begin(cg, &li, inner, "i");
            LLVMValueRef ps2 = at(cg, t, sr, i);
            st(cg, intrin1(cg, "llvm.sqrt", ld(cg, t, ps2)), ps2);
            kn_cg_loop_end(cg, &li);
        }
    }
    kn_cg_loop_end(cg, &lo);
    return KN_OK;
}

/* ---- pooling -------------------------------------------------------------------------- */

/* LpPool's |v|^p and acc^(1/p) (p == 0: not an Lp pool, identity). */
static LLVMValueRef lp_map(kn_cg *cg, LLVMValueRef v, double p)
{
    if (p == 0) return v;
    LLVMValueRef a = intrin1(cg, "llvm.fabs", v);
    if (p == 1) return a;
    if (p == 2) return LLVMBuildFMul(cg->b, v, v, "");
    LLVMValueRef args[2] = {a, like(cg, fconst(scalar_t(LLVMTypeOf(v)), p), v)};
    return kn_cg_intrinsic(cg, "llvm.pow", LLVMTypeOf(v), args, 2);
}

static LLVMValueRef lp_finish(kn_cg *cg, LLVMValueRef a, double p)
{
    if (p == 0 || p == 1) return a;
    if (p == 2) return intrin1(cg, "llvm.sqrt", a);
    LLVMValueRef args[2] = {a, fconst(LLVMTypeOf(a), 1.0 / p)};
    return kn_cg_intrinsic(cg, "llvm.pow", LLVMTypeOf(a), args, 2);
}

/* The order p of LpPool/GlobalLpPool: an int since opset 2, a float in opset 1. */
static double lp_order(const kn_node *n)
{
    const kn_attr *a = kn_node_attr(n, "p");
    if (a && a->kind == KN_ATTR_FLOAT) return a->f;
    return (double)kn_attr_int(n, "p", 2);
}

static int lower_global_pool(kn_cg *cg, const kn_node *n)
{
    if (!nc_float_ok(n, 2)) return KN_ERR_UNSUPPORTED;
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    int64_t planes = span(x, 0, 2), sp = span(x, 2, x->shape.rank);
    if (kn_cg_numel(y) != planes) return KN_ERR_UNSUPPORTED;
    bool avg = n->op == KN_OP_GlobalAveragePool, lpk = n->op == KN_OP_GlobalLpPool;
    double p = lpk ? lp_order(n) : 0;
    if (lpk && !(p > 0)) return KN_ERR_UNSUPPORTED;
    kn_dtype dt = x->dtype;
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y);
    kn_cg_loop l;
    LLVMValueRef pl = kn_cg_loop_begin(cg, &l, planes, "pl");
    LLVMValueRef base = LLVMBuildMul(cg->b, pl, kn_cg_i64(cg, sp), "");
    LLVMValueRef a;
    if (lpk && (p == 1 || p == 2)) {
        a = lp_finish(cg, row_fold(cg, F_SUM, p == 1 ? M_ABS : M_SQ, dt, px, NULL, base, sp, NULL), p);
    } else if (lpk) { /* a general order: |v|^p through llvm.pow, element by element */
        LLVMValueRef acc = entry_alloca(cg, t, 1);
        st(cg, fconst(t, 0.0), acc);
        kn_cg_loop li;
        LLVMValueRef v = kn_cg_load(cg, dt, px, LLVMBuildAdd(cg->b, base, kn_cg_loop_begin(cg, &li, sp, "i"), ""));
        st(cg, LLVMBuildFAdd(cg->b, ld(cg, t, acc), lp_map(cg, v, p), ""), acc);
        kn_cg_loop_end(cg, &li);
        a = lp_finish(cg, ld(cg, t, acc), p);
    } else {
        a = row_fold(cg, avg ? F_SUM : F_MAX, M_ID, dt, px, NULL, base, sp, NULL);
        if (avg) a = sp ? LLVMBuildFDiv(cg->b, a, fconst(t, (double)sp), "") : fconst(t, 0.0);
    }
    kn_cg_store(cg, dt, py, pl, a);
    kn_cg_loop_end(cg, &l);
    return KN_OK;
}

/* A constant scalar parameter of n (input i): f32 scale, or a zero point of
 * dtype dt (absent: 0). False when it is neither. */
static bool q_scalar(const kn_node *n, int i, kn_dtype dt, double *out)
{
    const kn_value *v = kn_node_input(n, i);
    *out = 0;
    if (!v) return dt != KN_F32;
    if (!v->const_data || v->dtype != dt || kn_tensor_numel(v->const_data) != 1) return false;
    *out = kn_load_f64(dt, v->const_data->data, 0);
    return true;
}

/* com.microsoft QLinearGlobalAveragePool (passes/lower_qdq.c makes one,
 * NCHW, of DequantizeLinear → GlobalAveragePool → QuantizeLinear): per
 * channel the integer sum of its 8-bit values, requantized as the
 * reference kernel does, rint((float)(sum - xz·S) · xs/(ys·S)) + yz,
 * saturated: one pass over the bytes, where DequantizeLinear wrote four
 * times as many. With channels_last the channel is the last axis (the
 * output is [N, 1.., C] either way, channel c of image b at b·C + c). */
static int lower_qlinear_gap(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    if (!x || !is_static(x) || !only_out0(n) || !is_static(y) || (x->dtype != KN_U8 && x->dtype != KN_I8) ||
        y->dtype != x->dtype || x->shape.rank < 3)
        return KN_ERR_UNSUPPORTED;
    bool last = kn_attr_int(n, "channels_last", 0) != 0;
    double xs, xz, ys, yz;
    if (!q_scalar(n, 1, KN_F32, &xs) || !q_scalar(n, 2, x->dtype, &xz) || !q_scalar(n, 3, KN_F32, &ys) ||
        !q_scalar(n, 4, x->dtype, &yz))
        return KN_ERR_UNSUPPORTED;
    int64_t C = x->shape.dims[last ? x->shape.rank - 1 : 1], planes = x->shape.dims[0] * C;
    int64_t S = planes ? kn_cg_numel(x) / planes : 0;
    /* the sum and sum - xz*S stay in i32 */
    if (kn_cg_numel(y) != planes || S < 1 || S > (INT32_MAX / 2) / 256) return KN_ERR_UNSUPPORTED;
    float scale = (float)xs / ((float)ys * (float)S); /* the reference kernel's float arithmetic */
    bool u = x->dtype == KN_U8;
    LLVMBuilderRef b = cg->b;
    LLVMTypeRef i32 = cg->t_i32, f = cg->t_float;
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y), acc = entry_alloca(cg, i32, 1);
    kn_cg_loop lp, ls;
    LLVMValueRef pl = kn_cg_loop_begin(cg, &lp, planes, "pl"), base, step;
    if (last) { /* image b = pl / C, channel c = pl % C: elements b·S·C + c + s·C */
        LLVMValueRef cc = kn_cg_i64(cg, C), img = LLVMBuildUDiv(b, pl, cc, "");
        base = LLVMBuildAdd(b, LLVMBuildMul(b, img, kn_cg_i64(cg, S * C), ""), LLVMBuildURem(b, pl, cc, ""), "");
        step = cc;
    } else {
        base = LLVMBuildMul(b, pl, kn_cg_i64(cg, S), "");
        step = kn_cg_i64(cg, 1);
    }
    st(cg, LLVMConstInt(i32, 0, 0), acc);
    LLVMValueRef s = kn_cg_loop_begin(cg, &ls, S, "s");
    LLVMValueRef v = kn_cg_load(cg, x->dtype, px, LLVMBuildAdd(b, base, LLVMBuildMul(b, s, step, ""), ""));
    v = u ? LLVMBuildZExt(b, v, i32, "") : LLVMBuildSExt(b, v, i32, "");
    st(cg, LLVMBuildAdd(b, ld(cg, i32, acc), v, ""), acc);
    kn_cg_loop_end(cg, &ls);
    LLVMValueRef c = LLVMBuildSub(b, ld(cg, i32, acc), LLVMConstInt(i32, (uint64_t)(int64_t)(xz * (double)S), 1), "");
    LLVMValueRef r = LLVMBuildFMul(b, LLVMBuildSIToFP(b, c, f, ""), fconst(f, scale), "");
    r = kn_cg_intrinsic(cg, "llvm.roundeven", f, &r, 1);
    r = LLVMBuildFAdd(b, r, fconst(f, yz), "");
    LLVMValueRef lohi[2] = {r, fconst(f, u ? 0.0 : -128.0)};
    r = kn_cg_intrinsic(cg, "llvm.maxnum", f, lohi, 2);
    LLVMValueRef hi[2] = {r, fconst(f, u ? 255.0 : 127.0)};
    r = kn_cg_intrinsic(cg, "llvm.minnum", f, hi, 2);
    LLVMValueRef q = u ? LLVMBuildFPToUI(b, r, cg->t_i8, "") : LLVMBuildFPToSI(b, r, cg->t_i8, "");
    kn_cg_store(cg, y->dtype, py, pl, q);
    kn_cg_loop_end(cg, &lp);
    return KN_OK;
}

/* 1-D/2-D pooling with the output row innermost: for each output row and each
 * kernel row inside the input, each kernel column folds the range of output
 * columns whose tap lies inside the input (a compile-time range) into a row
 * buffer, so no tap needs a bounds check and the inner loop vectorizes. The
 * valid-tap count (AveragePool's divisor) is rows × columns. Dims are
 * {H, W}, {OH, OW}, and kernel/strides/begin pads/dilations per axis. */
static void pool_rows(kn_cg *cg, bool mx, bool cip, double lp, kn_dtype dt, LLVMValueRef px, LLVMValueRef py, int64_t planes,
                      const int64_t *in, const int64_t *out, const int64_t *k, const int64_t *s, const int64_t *pb,
                      const int64_t *dil)
{
    /* 8-bit integer max pools compare in i32 (sign- or zero-extended) */
    bool i8 = dt == KN_I8 || dt == KN_U8;
    LLVMTypeRef t = i8 ? cg->t_i32 : kn_cg_compute_type(cg, dt);
    int64_t H = in[0], W = in[1], OH = out[0], OW = out[1], lo[64], hi[64];
    for (int64_t kw = 0; kw < k[1]; kw++) {
        int64_t off = kw * dil[1] - pb[1];
        lo[kw] = off >= 0 ? 0 : (-off + s[1] - 1) / s[1];
        hi[kw] = W - 1 - off < 0 ? 0 : (W - 1 - off) / s[1] + 1;
        if (hi[kw] > OW) hi[kw] = OW;
    }
    LLVMValueRef row = entry_alloca(cg, t, OW), cnth = entry_alloca(cg, cg->t_i64, 1);
    kn_cg_loop lpl, lh, lk, lw;
    LLVMValueRef pl = kn_cg_loop_begin(cg, &lpl, planes, "pl");
    LLVMValueRef xb = LLVMBuildMul(cg->b, pl, kn_cg_i64(cg, H * W), "");
    LLVMValueRef oh = kn_cg_loop_begin(cg, &lh, OH, "oh");
    LLVMValueRef yb = LLVMBuildMul(cg->b, madd(cg, oh, pl, OH), kn_cg_i64(cg, OW), "");
    LLVMValueRef ow = kn_cg_loop_begin(cg, &lw, OW, "init");
    st(cg, i8 ? kn_cg_i32(cg, INT32_MIN) : fold_init(cg, mx ? F_MAX : F_SUM, dt), at(cg, t, row, ow));
    kn_cg_loop_end(cg, &lw);
    st(cg, kn_cg_i64(cg, 0), cnth);
    LLVMValueRef kh = kn_cg_loop_begin(cg, &lk, k[0], "kh");
    LLVMValueRef ih = madd(cg, addc(cg, LLVMBuildMul(cg->b, oh, kn_cg_i64(cg, s[0]), ""), -pb[0]), kh, dil[0]);
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "tap_row");
    LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "");
    LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntULT, ih, kn_cg_i64(cg, H), ""), then, cont);
    LLVMPositionBuilderAtEnd(cg->b, then);
    st(cg, LLVMBuildAdd(cg->b, ld(cg, cg->t_i64, cnth), kn_cg_i64(cg, 1), ""), cnth);
    LLVMValueRef xrow = madd(cg, xb, ih, W);
    for (int64_t kw = 0; kw < k[1]; kw++) {
        if (hi[kw] <= lo[kw]) continue;
        ow = addc(cg, kn_cg_loop_begin(cg, &lw, hi[kw] - lo[kw], "ow"), lo[kw]);
        LLVMValueRef xi = madd(cg, addc(cg, xrow, kw * dil[1] - pb[1]), ow, s[1]);
        LLVMValueRef pr = at(cg, t, row, ow);
        LLVMValueRef v = kn_cg_load(cg, dt, px, xi);
        if (i8) v = dt == KN_I8 ? LLVMBuildSExt(cg->b, v, t, "") : LLVMBuildZExt(cg->b, v, t, "");
        else v = lp_map(cg, v, lp);
        st(cg, fold(cg, mx ? F_MAX : F_SUM, !i8, ld(cg, t, pr), v), pr);
        kn_cg_loop_end(cg, &lw);
    }
    LLVMBuildBr(cg->b, cont);
    LLVMPositionBuilderAtEnd(cg->b, cont);
    kn_cg_loop_end(cg, &lk);
    LLVMValueRef ch = ld(cg, cg->t_i64, cnth);
    ow = kn_cg_loop_begin(cg, &lw, OW, "fin");
    LLVMValueRef cw = kn_cg_i64(cg, 0);
    for (int64_t kw = 0; kw < k[1]; kw++) {
        LLVMValueRef a = LLVMBuildICmp(cg->b, LLVMIntSGE, ow, kn_cg_i64(cg, lo[kw]), "");
        LLVMValueRef b = LLVMBuildICmp(cg->b, LLVMIntSLT, ow, kn_cg_i64(cg, hi[kw]), "");
        cw = LLVMBuildAdd(cg->b, cw, LLVMBuildZExt(cg->b, LLVMBuildAnd(cg->b, a, b, ""), cg->t_i64, ""), "");
    }
    LLVMValueRef cnt = LLVMBuildMul(cg->b, ch, cw, "");
    LLVMValueRef res = ld(cg, t, at(cg, t, row, ow));
    LLVMValueRef none = LLVMBuildICmp(cg->b, LLVMIntEQ, cnt, kn_cg_i64(cg, 0), "");
    if (lp) {
        res = lp_finish(cg, res, lp);
        none = LLVMConstInt(cg->t_i1, 0, 0);
    } else if (!mx) {
        if (cip) {
            res = LLVMBuildFDiv(cg->b, res, fconst(t, (double)(k[0] * k[1])), "");
            none = LLVMConstInt(cg->t_i1, 0, 0);
        } else {
            res = LLVMBuildFDiv(cg->b, res, LLVMBuildSIToFP(cg->b, cnt, t, ""), "");
        }
    }
    res = LLVMBuildSelect(cg->b, none, i8 ? kn_cg_i32(cg, 0) : fconst(t, 0.0), res, "");
    if (i8) res = LLVMBuildTrunc(cg->b, res, cg->t_i8, "");
    kn_cg_store(cg, dt, py, LLVMBuildAdd(cg->b, yb, ow, ""), res);
    kn_cg_loop_end(cg, &lw);
    kn_cg_loop_end(cg, &lh);
    kn_cg_loop_end(cg, &lpl);
}

/* Max/Average pooling: each output position folds its window; taps outside
 * the input are skipped (bounds checks only on axes where padding can reach). */
static int lower_pool(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    bool i8 = x && (x->dtype == KN_I8 || x->dtype == KN_U8) && n->op == KN_OP_MaxPool;
    /* MaxPool's optional Indices output: the general path tracks the argmax */
    const kn_value *yi_v = n->op == KN_OP_MaxPool && n->n_outputs > 1 ? n->outputs[1] : NULL;
    bool base_ok = y && x && is_static(x) && is_static(y) && y->dtype == x->dtype && x->shape.rank >= 3;
    if (yi_v && (i8 || !base_ok || !dt_float(x->dtype) || yi_v->dtype != KN_I64 || !is_static(yi_v) ||
                 kn_cg_numel(yi_v) != kn_cg_numel(y)))
        return KN_ERR_UNSUPPORTED;
    if (!yi_v && (i8 ? !(base_ok && only_out0(n)) : !nc_float_ok(n, 3))) return KN_ERR_UNSUPPORTED;
    desc d;
    if (get_desc(n, &d)) return KN_ERR_UNSUPPORTED;
    kn_nn_window w;
    int64_t od[KN_MAX_RANK];
    int r = x->shape.rank, nsp = r - 2;
    memset(&w, 0, sizeof w);
    if (kn_nn_pool_geometry(&d.d, r, x->shape.dims, &w, od)) return KN_ERR_UNSUPPORTED;
    for (int i = 0; i < r; i++)
        if (od[i] != y->shape.dims[i] || y->shape.rank != r) return KN_ERR_UNSUPPORTED;
    bool mx = n->op == KN_OP_MaxPool, cip = kn_attr_int(n, "count_include_pad", 0) != 0;
    double lp = n->op == KN_OP_LpPool ? lp_order(n) : 0;
    if (n->op == KN_OP_LpPool && !(lp > 0)) return KN_ERR_UNSUPPORTED;
    kn_dtype dt = x->dtype;
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    const int64_t *in = x->shape.dims + 2;
    int64_t in_prod = span(x, 2, r), out_prod = span(y, 2, r), k_prod = 1;
    bool check[KN_NN_MAXSP], past_pads = false;
    for (int i = 0; i < nsp; i++) {
        k_prod *= w.kernel[i];
        int64_t hi = (od[2 + i] - 1) * w.strides[i] - w.pads[i] + (w.kernel[i] - 1) * w.dilations[i];
        check[i] = w.pads[i] > 0 || hi >= in[i];
        past_pads |= hi >= in[i] + w.pads[nsp + i]; /* ceil_mode's last window */
    }
    /* count_include_pad divides by the taps inside the explicitly padded
     * input: the row path's k[0] * k[1] only when no window reaches past it */
    bool rows = nsp <= 2 && od[r - 1] <= ROW_MAX && w.kernel[nsp - 1] <= 64 && k_prod > 0 && !yi_v &&
                !(cip && past_pads);
    bool col_major = kn_attr_int(n, "storage_order", 0) == 1;
    if (i8 && !rows) return KN_ERR_UNSUPPORTED; /* only the row path handles 8-bit integers */
    LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y);
    if (rows) {
        /* 1-D pools are 2-D pools of one row */
        int f = nsp == 2 ? 0 : 1;
        int64_t in2[2] = {f ? 1 : in[0], in[nsp - 1]}, out2[2] = {f ? 1 : od[2], od[r - 1]};
        int64_t k2[2] = {f ? 1 : w.kernel[0], w.kernel[nsp - 1]}, s2[2] = {f ? 1 : w.strides[0], w.strides[nsp - 1]};
        int64_t p2[2] = {f ? 0 : w.pads[0], w.pads[nsp - 1]}, d2[2] = {f ? 1 : w.dilations[0], w.dilations[nsp - 1]};
        pool_rows(cg, mx, cip, lp, dt, px, py, span(x, 0, 2), in2, out2, k2, s2, p2, d2);
        return KN_OK;
    }
    LLVMValueRef acc = entry_alloca(cg, t, 1), cnt = entry_alloca(cg, cg->t_i64, 1);
    LLVMValueRef cntp = entry_alloca(cg, cg->t_i64, 1); /* taps inside the padded input */
    LLVMValueRef arg = entry_alloca(cg, cg->t_i64, 1), pyi = yi_v ? kn_cg_ptr(cg, yi_v) : NULL;
    kn_cg_loop lpl, lo[KN_NN_MAXSP], lk[KN_NN_MAXSP];
    LLVMValueRef pl = kn_cg_loop_begin(cg, &lpl, span(x, 0, 2), "pl");
    LLVMValueRef xbase = LLVMBuildMul(cg->b, pl, kn_cg_i64(cg, in_prod), "");
    LLVMValueRef ybase = LLVMBuildMul(cg->b, pl, kn_cg_i64(cg, out_prod), "");
    LLVMValueRef o[KN_NN_MAXSP], yi = ybase;
    int64_t ys = out_prod;
    for (int i = 0; i < nsp; i++) {
        o[i] = kn_cg_loop_begin(cg, &lo[i], od[2 + i], "o");
        ys /= od[2 + i];
        yi = madd(cg, yi, o[i], ys);
    }
    st(cg, fold_init(cg, mx ? F_MAX : F_SUM, dt), acc);
    st(cg, kn_cg_i64(cg, 0), cnt);
    st(cg, kn_cg_i64(cg, 0), cntp);
    st(cg, kn_cg_i64(cg, -1), arg);
    LLVMValueRef in_pads = LLVMConstInt(cg->t_i1, 1, 0);
    LLVMValueRef inside = LLVMConstInt(cg->t_i1, 1, 0), xi = kn_cg_i64(cg, 0), xc = kn_cg_i64(cg, 0);
    int64_t xs = in_prod, cs = 1;
    for (int i = 0; i < nsp; i++) {
        LLVMValueRef k = kn_cg_loop_begin(cg, &lk[i], w.kernel[i], "kw");
        LLVMValueRef pos = addc(cg, LLVMBuildMul(cg->b, o[i], kn_cg_i64(cg, w.strides[i]), ""), -w.pads[i]);
        pos = madd(cg, pos, k, w.dilations[i]);
        if (check[i])
            inside = LLVMBuildAnd(cg->b, inside, LLVMBuildICmp(cg->b, LLVMIntULT, pos, kn_cg_i64(cg, in[i]), ""), "");
        if (cip && past_pads)
            in_pads = LLVMBuildAnd(cg->b, in_pads,
                                   LLVMBuildICmp(cg->b, LLVMIntULT, addc(cg, pos, w.pads[i]),
                                                 kn_cg_i64(cg, in[i] + w.pads[i] + w.pads[nsp + i]), ""),
                                   "");
        xs /= in[i];
        xi = madd(cg, xi, pos, xs);
        xc = madd(cg, xc, pos, cs); /* column-major flat index (storage_order 1) */
        cs *= in[i];
    }
    LLVMValueRef idx = LLVMBuildAdd(cg->b, xbase, LLVMBuildSelect(cg->b, inside, xi, kn_cg_i64(cg, 0), ""), "");
    LLVMValueRef v = kn_cg_load(cg, dt, px, idx), a = ld(cg, t, acc);
    if (mx) {
        /* the kernel's rule: the first tap inside, then any greater one, or
         * the first NaN (which no later tap replaces) */
        LLVMValueRef ar = ld(cg, cg->t_i64, arg);
        LLVMValueRef first_nan = LLVMBuildAnd(cg->b, LLVMBuildFCmp(cg->b, LLVMRealUNO, v, v, ""),
                                              LLVMBuildFCmp(cg->b, LLVMRealORD, a, a, ""), "");
        LLVMValueRef take = LLVMBuildOr(cg->b, LLVMBuildFCmp(cg->b, LLVMRealOGT, v, a, ""),
                                        LLVMBuildICmp(cg->b, LLVMIntSLT, ar, kn_cg_i64(cg, 0), ""), "");
        take = LLVMBuildOr(cg->b, take, first_nan, "");
        take = LLVMBuildAnd(cg->b, inside, take, "");
        st(cg, LLVMBuildSelect(cg->b, take, v, a, ""), acc);
        st(cg, LLVMBuildSelect(cg->b, take, col_major ? xc : xi, ar, ""), arg);
    } else {
        st(cg, LLVMBuildSelect(cg->b, inside, fold(cg, F_SUM, true, a, lp_map(cg, v, lp)), a, ""), acc);
    }
    st(cg, LLVMBuildAdd(cg->b, ld(cg, cg->t_i64, cnt), LLVMBuildZExt(cg->b, inside, cg->t_i64, ""), ""), cnt);
    st(cg, LLVMBuildAdd(cg->b, ld(cg, cg->t_i64, cntp), LLVMBuildZExt(cg->b, in_pads, cg->t_i64, ""), ""), cntp);
    for (int i = nsp - 1; i >= 0; i--) kn_cg_loop_end(cg, &lk[i]);
    LLVMValueRef c = ld(cg, cg->t_i64, cnt), res = ld(cg, t, acc);
    LLVMValueRef none = LLVMBuildICmp(cg->b, LLVMIntEQ, c, kn_cg_i64(cg, 0), "");
    if (lp) {
        res = lp_finish(cg, res, lp);
        none = LLVMConstInt(cg->t_i1, 0, 0);
    } else if (!mx) {
        LLVMValueRef cp = ld(cg, cg->t_i64, cntp);
        LLVMValueRef dv = !cip ? LLVMBuildSIToFP(cg->b, c, t, "") : past_pads ? LLVMBuildSIToFP(cg->b, cp, t, "")
                                                                            : fconst(t, (double)k_prod);
        res = LLVMBuildFDiv(cg->b, res, dv, "");
        if (cip && past_pads) none = LLVMBuildICmp(cg->b, LLVMIntEQ, cp, kn_cg_i64(cg, 0), "");
        else if (cip && k_prod == 0) none = LLVMConstInt(cg->t_i1, 1, 0);
        else if (cip) none = LLVMConstInt(cg->t_i1, 0, 0);
    }
    res = LLVMBuildSelect(cg->b, none, fconst(t, 0.0), res, "");
    kn_cg_store(cg, dt, py, yi, res);
    if (pyi) {
        LLVMValueRef ar = ld(cg, cg->t_i64, arg);
        ar = LLVMBuildSelect(cg->b, LLVMBuildICmp(cg->b, LLVMIntSLT, ar, kn_cg_i64(cg, 0), ""), kn_cg_i64(cg, 0), ar, "");
        kn_cg_store(cg, KN_I64, pyi, yi, LLVMBuildAdd(cg->b, xbase, ar, ""));
    }
    for (int i = nsp - 1; i >= 0; i--) kn_cg_loop_end(cg, &lo[i]);
    kn_cg_loop_end(cg, &lpl);
    return KN_OK;
}

/* ---- the family table --------------------------------------------------------------------- */

const kn_cg_lowering kn_cg_lower_reduce[] = {
    {KN_OP_ReduceSum, lower_reduce_op},
    {KN_OP_ReduceMean, lower_reduce_op},
    {KN_OP_ReduceMax, lower_reduce_op},
    {KN_OP_ReduceMin, lower_reduce_op},
    {KN_OP_ReduceProd, lower_reduce_op},
    {KN_OP_ReduceL1, lower_reduce_op},
    {KN_OP_ReduceL2, lower_reduce_op},
    {KN_OP_ReduceLogSum, lower_reduce_op},
    {KN_OP_ReduceLogSumExp, lower_reduce_op},
    {KN_OP_ReduceSumSquare, lower_reduce_op},
    {KN_OP_ArgMax, lower_arg},
    {KN_OP_ArgMin, lower_arg},
    {KN_OP_Softmax, lower_softmax},
    {KN_OP_LogSoftmax, lower_softmax},
    {KN_OP_LayerNormalization, lower_layernorm},
    {KN_OP_BatchNormalization, lower_batchnorm},
    {KN_OP_InstanceNormalization, lower_instancenorm},
    {KN_OP_GroupNormalization, lower_groupnorm},
    {KN_OP_LpNormalization, lower_lpnorm},
    {KN_OP_GlobalAveragePool, lower_global_pool},
    {KN_OP_GlobalMaxPool, lower_global_pool},
    {KN_OP_MaxPool, lower_pool},
    {KN_OP_AveragePool, lower_pool},
    {KN_OP_LpPool, lower_pool},
    {KN_OP_GlobalLpPool, lower_global_pool},
    {KN_OP_QLinearGlobalAveragePool, lower_qlinear_gap},
    {KN_OP_UNKNOWN, NULL},
};
