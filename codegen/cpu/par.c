/*
 * codegen/cpu/par.c — parallel node functions: which operands of a node are
 * cut into rows along its split dim, and the unit / chunk / node functions
 * that hand contiguous ranges of units to kn_rt_parallel_for (par.h).
 */
#include "par.h"

#include <stdio.h>
#include <string.h>

#include "eval.h"
#include "reduce_int.h"

/* At most this many units per node: more only adds calls. */
#define PAR_MAX_UNITS 256
/* Elements of work per unit below which units are merged. */
#define PAR_MIN_UNIT_WORK 4096

static int64_t norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

static bool in_table(const kn_cg_lowering *t, kn_op op)
{
    for (; t->lower; t++)
        if (t->op == op) return true;
    return false;
}

/* The split: every cut operand has R (> 1) rows along its dim, every dim
 * before that of size 1. */
typedef struct split {
    int sd;    /* split dim of output 0 */
    int64_t R; /* its size */
    kn_cg_rows rows;
} split;

/* Cuts v along dim d (false if v cannot be cut there). */
static bool cut(split *s, kn_value *v, int d)
{
    if (!v || d < 0 || d >= v->shape.rank || v->shape.dims[d] != s->R) return false;
    for (int i = 0; i < d; i++)
        if (v->shape.dims[i] != 1) return false;
    return kn_cg_rows_add(&s->rows, v, d, 1);
}

/* A numpy-broadcast operand (aligned on the right): cut where it has the
 * split dim, read whole where it broadcasts along it. */
static bool cut_bcast(split *s, kn_value *v, int out_rank)
{
    if (!v) return true;
    int d = s->sd - (out_rank - v->shape.rank);
    if (d < 0 || v->shape.dims[d] == 1) return true;
    return cut(s, v, d);
}

/* The constant int64 input i of n: its data and count (false if absent,
 * not constant or not int64). */
static bool const_ints(const kn_node *n, int i, const int64_t **out, int64_t *out_n)
{
    const kn_value *v = kn_node_input(n, i);
    if (!v || !v->const_data || v->const_data->dtype != KN_I64 || v->const_data->rank > 1) return false;
    *out = v->const_data->data;
    *out_n = (int64_t)(v->const_data->nbytes / sizeof(int64_t));
    return true;
}

/* Reductions: no reduced axis at or before the split dim. */
static bool reduce_ok(const kn_node *n, const split *s)
{
    kn_opdesc d;
    bool has_out[8];
    if (n->n_outputs > 8) return false;
    kn_node_opdesc(n, &d, has_out);
    const kn_value *x = kn_node_input(n, 0), *ax = kn_node_input(n, 1);
    if (ax && !ax->const_data) return false;
    int64_t axes[KN_RD_MAX_AXES];
    int cnt = kn_rd_reduce_axes(&d, ax ? ax->const_data : NULL, ax != NULL, axes);
    uint32_t mask;
    if (cnt < 0 || kn_rd_axes_mask(&d, axes, cnt, x->shape.rank, &mask)) return false;
    return (mask & ((2u << s->sd) - 1u)) == 0;
}

/* Slice (opset >= 10): no constant axis at or before the split dim. */
static bool slice_ok(const kn_node *n, const split *s, int rank)
{
    const int64_t *starts, *axes;
    int64_t n_starts, n_axes;
    if (kn_node_opset(n) < 10 || !const_ints(n, 1, &starts, &n_starts)) return false;
    if (!kn_node_input(n, 3)) return n_starts <= s->sd; /* axes 0..n_starts-1 */
    if (!const_ints(n, 3, &axes, &n_axes)) return false;
    for (int64_t i = 0; i < n_axes; i++)
        if (norm_axis(axes[i], rank) <= s->sd) return false;
    return true;
}

/* Pad: no padding at or before the split dim (pads from the constant input
 * from opset 11, the attribute before; an `axes` input is not handled). */
static bool pad_ok(const kn_node *n, const split *s, int rank)
{
    const int64_t *pads;
    int64_t n_pads;
    if (kn_node_opset(n) >= 11) {
        if (kn_node_input(n, 3) || !const_ints(n, 1, &pads, &n_pads)) return false;
    } else {
        n_pads = kn_attr_ints(n, "pads", &pads);
    }
    if (n_pads != 2 * rank) return false;
    for (int i = 0; i <= s->sd; i++)
        if (pads[i] || pads[i + rank]) return false;
    return true;
}

/* Resize (opset >= 11) by constant scales of 1 up to the split dim: the
 * lowering derives a scale from `sizes` and the input's dims, which a unit
 * sees cut, so `sizes`, `axes` and crops are left to one thread. */
static bool resize_ok(const kn_node *n, const split *s)
{
    const kn_value *sc = kn_node_input(n, 2), *sz = kn_node_input(n, 3);
    if (kn_node_opset(n) < 11 || (sz && !(sz->const_data && sz->const_data->nbytes == 0))) return false;
    if (!sc || !sc->const_data || sc->const_data->dtype != KN_F32 || kn_node_attr(n, "axes")) return false;
    if (!strcmp(kn_attr_string(n, "coordinate_transformation_mode", "half_pixel"), "tf_crop_and_resize")) return false;
    const float *f = sc->const_data->data;
    if ((int64_t)(sc->const_data->nbytes / sizeof(float)) <= s->sd) return false;
    for (int i = 0; i <= s->sd; i++)
        if (f[i] != 1.0f) return false;
    return true;
}

/* Gather: the split dim of the output lies in the data's dims after the
 * axis (cut the data) or in the indices' dims (cut the indices). Constant
 * indices are never cut: the lowering compiles them into the code as a
 * table read from their const_data, which a unit would read from its first
 * row whatever rows it computes (every unit gathered the first G indices). */
static bool gather_cut(split *s, const kn_node *n)
{
    kn_value *data = n->inputs[0], *idx = n->inputs[1];
    int axis = (int)norm_axis(kn_attr_int(n, "axis", 0), data->shape.rank);
    if (axis > s->sd) return cut(s, data, s->sd);
    if (s->sd < axis + idx->shape.rank) return !idx->const_data && cut(s, idx, s->sd - axis);
    return false;
}

/* Split along channels: the per-channel parameters ([C]: scale, bias,
 * mean, variance) are cut with them. */
static bool channel_params(split *s, const kn_node *n)
{
    for (int i = 1; i < n->n_inputs; i++)
        if (n->inputs[i] && (n->inputs[i]->shape.rank != 1 || !cut(s, n->inputs[i], 0))) return false;
    return true;
}

/* Cuts the operands of n along split dim s->sd of its output, by op. */
static bool plan_cuts(const kn_node *n, split *s)
{
    kn_value *x = kn_node_input(n, 0);
    const kn_value *y = n->outputs[0];
    int rank = y->shape.rank, in_rank = x ? x->shape.rank : 0, sd = s->sd;
    const int64_t *perm;
    if (in_table(kn_cg_lower_elementwise, n->op) || n->op == KN_OP_Expand) {
        int n_data = n->op == KN_OP_Expand ? 1 : n->n_inputs;
        for (int i = 0; i < n_data; i++)
            if (!cut_bcast(s, n->inputs[i], rank)) return false;
        return true;
    }
    switch (n->op) {
    case KN_OP_Softmax: case KN_OP_LogSoftmax:
        if (norm_axis(kn_attr_int(n, "axis", kn_node_opset(n) >= 13 ? -1 : 1), in_rank) <= sd) return false;
        return cut(s, x, sd);
    case KN_OP_LayerNormalization: /* scale and bias cover the normalized dims only */
        return norm_axis(kn_attr_int(n, "axis", -1), in_rank) > sd && cut(s, x, sd);
    case KN_OP_LpNormalization:
        return norm_axis(kn_attr_int(n, "axis", -1), in_rank) > sd && cut(s, x, sd);
    case KN_OP_ArgMax: case KN_OP_ArgMin:
        return norm_axis(kn_attr_int(n, "axis", 0), in_rank) > sd && cut(s, x, sd);
    case KN_OP_ReduceL1: case KN_OP_ReduceL2: case KN_OP_ReduceLogSum: case KN_OP_ReduceLogSumExp:
    case KN_OP_ReduceMax: case KN_OP_ReduceMean: case KN_OP_ReduceMin: case KN_OP_ReduceProd:
    case KN_OP_ReduceSum: case KN_OP_ReduceSumSquare:
        return reduce_ok(n, s) && cut(s, x, sd);
    case KN_OP_MaxPool: /* its Indices are flat offsets into the whole input: not per unit */
        if (n->n_outputs > 1 && n->outputs[1]) return false;
        return sd <= 1 && cut(s, x, sd);
    case KN_OP_AveragePool: case KN_OP_LpPool: /* batch and channels are independent */
    case KN_OP_GlobalAveragePool: case KN_OP_GlobalMaxPool: case KN_OP_GlobalLpPool:
        return sd <= 1 && cut(s, x, sd);
    case KN_OP_BatchNormalization: case KN_OP_InstanceNormalization:
        return sd == 0 ? cut(s, x, sd) : sd == 1 && cut(s, x, sd) && channel_params(s, n);
    case KN_OP_GroupNormalization: case KN_OP_DepthToSpace: case KN_OP_SpaceToDepth: /* channels mixed */
        return sd == 0 && cut(s, x, sd);
    case KN_OP_Resize: return resize_ok(n, s) && cut(s, x, sd);
    case KN_OP_Transpose:
        if (kn_attr_ints(n, "perm", &perm) <= sd) return false;
        for (int i = 0; i <= sd; i++)
            if (perm[i] != i) return false;
        return cut(s, x, sd);
    case KN_OP_Concat:
        if (norm_axis(kn_attr_int(n, "axis", 0), rank) <= sd) return false;
        for (int i = 0; i < n->n_inputs; i++)
            if (!cut(s, n->inputs[i], sd)) return false;
        return true;
    case KN_OP_Split:
        return norm_axis(kn_attr_int(n, "axis", 0), in_rank) > sd && cut(s, x, sd);
    case KN_OP_Slice: return slice_ok(n, s, in_rank) && cut(s, x, sd);
    case KN_OP_Pad: return pad_ok(n, s, in_rank) && cut(s, x, sd);
    case KN_OP_Gather: return gather_cut(s, n);
    default: return false; /* scatters, Tile, ...: rows may mix */
    }
}

/* Bytes v occupies in the arena, or false if it is not there. */
static bool arena_range(const kn_cg *cg, const kn_value *v, int64_t *lo, int64_t *hi)
{
    if (!v || v->id < 0 || v->id >= cg->plan->n_where || cg->plan->where[v->id].loc != KN_LOC_ARENA) return false;
    *lo = cg->plan->where[v->id].offset;
    *hi = *lo + (int64_t)kn_dtype_nbytes(v->dtype, (size_t)kn_cg_numel(v));
    return true;
}

static bool is_cut(const split *s, const kn_value *v)
{
    for (int j = 0; j < s->rows.n; j++)
        if (s->rows.vals[j] == v) return true;
    return false;
}

/* Every output is cut, and an input sharing arena bytes with an output is
 * cut the same way at the same place (in place): otherwise one unit would
 * read what another writes. */
static bool cuts_safe(const kn_cg *cg, const kn_node *n, const split *s)
{
    for (int k = 0; k < n->n_outputs; k++) {
        const kn_value *y = n->outputs[k];
        if (!y) continue;
        if (!is_cut(s, y)) return false;
        int64_t ylo, yhi;
        if (!arena_range(cg, y, &ylo, &yhi)) continue;
        for (int i = 0; i < n->n_inputs; i++) {
            int64_t xlo, xhi;
            const kn_value *x = n->inputs[i];
            if (!arena_range(cg, x, &xlo, &xhi) || xhi <= ylo || yhi <= xlo) continue;
            if (!is_cut(s, x) || xlo != ylo || xhi != yhi) return false;
        }
    }
    return true;
}

/* Elements of the largest operand. */
static int64_t work_of(const kn_node *n)
{
    int64_t w = 0;
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
        const kn_value *v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
        if (v && kn_shape_is_static(&v->shape) && kn_cg_numel(v) > w) w = kn_cg_numel(v);
    }
    return w;
}

/* Rows per unit for R rows in at most max_units units: the fewest, unless
 * a count up to half as many again divides R. A split with a remainder
 * compiles the lowering twice (the unit and the tail, each vectorized at
 * -O3), so a few fewer units are worth one copy of the code. */
static int64_t rows_per_unit(int64_t R, int64_t max_units)
{
    int64_t g = (R + max_units - 1) / max_units;
    for (int64_t d = g; d <= g + g / 2 && d < R; d++)
        if (R % d == 0) return d;
    return g;
}

/* Decides whether and how n is split (G rows per unit); false to keep it
 * on one thread. */
static bool plan_split(const kn_cg *cg, const kn_node *n, split *s, int64_t *out_g)
{
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    int64_t work = work_of(n);
    if (!y || !kn_shape_is_static(&y->shape) || work < KN_PAR_MIN_WORK) return false;
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] && !kn_shape_is_static(&n->inputs[i]->shape)) return false;
    memset(s, 0, sizeof *s);
    s->sd = -1;
    for (int d = 0; d < y->shape.rank && s->sd < 0; d++)
        if (y->shape.dims[d] != 1) s->sd = d;
    if (s->sd < 0) return false;
    s->R = y->shape.dims[s->sd];
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] && !cut(s, n->outputs[k], s->sd)) return false;
    if (!plan_cuts(n, s) || !cuts_safe(cg, n, s)) return false;
    int64_t max_units = work / PAR_MIN_UNIT_WORK;
    if (max_units > PAR_MAX_UNITS) max_units = PAR_MAX_UNITS;
    *out_g = rows_per_unit(s->R, max_units);
    return s->R > *out_g;
}

/* i32 chunk(ptr args, i64 lo, i64 hi): loads the node function's arguments
 * from args and runs units lo..hi-1 in order: `unit` for rows u*g..u*g+g-1
 * while u < full, then `tail` (the last R - full*g rows) if hi > full. */
static LLVMValueRef emit_chunk_fn(kn_cg *cg, const char *name, LLVMValueRef unit, int64_t g, int64_t full,
                                  LLVMValueRef tail)
{
    LLVMTypeRef params[3] = {cg->t_ptr, cg->t_i64, cg->t_i64};
    LLVMValueRef fn = LLVMAddFunction(cg->mod, name, LLVMFunctionType(cg->t_i32, params, 3, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    cg->fn = fn;
    cg->op_fn = NULL;
    LLVMPositionBuilderAtEnd(cg->b, LLVMAppendBasicBlockInContext(cg->ctx, fn, "entry"));
    LLVMValueRef *slots[5] = {&cg->a_exec, &cg->a_arena, &cg->a_weights, &cg->a_inputs, &cg->a_outputs};
    for (int k = 0; k < 5; k++) {
        LLVMValueRef idx = kn_cg_i64(cg, k);
        LLVMValueRef p = LLVMBuildGEP2(cg->b, cg->t_ptr, LLVMGetParam(fn, 0), &idx, 1, "");
        *slots[k] = LLVMBuildLoad2(cg->b, cg->t_ptr, p, "");
    }
    LLVMValueRef vg = kn_cg_i64(cg, g), vfull = kn_cg_i64(cg, full), hi = LLVMGetParam(fn, 2);
    LLVMValueRef hi_full = LLVMBuildSelect(cg->b, LLVMBuildICmp(cg->b, LLVMIntSLT, hi, vfull, ""), hi, vfull, "");
    LLVMValueRef first = LLVMBuildMul(cg->b, LLVMGetParam(fn, 1), vg, "first");
    LLVMValueRef end = LLVMBuildMul(cg->b, hi_full, vg, "end");
    kn_cg_emit_row_loop(cg, end, first, g, unit);
    if (tail) {
        LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(cg->ctx, fn, "tail");
        LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, fn, "done");
        LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntSGT, hi, vfull, ""), run, done);
        LLVMPositionBuilderAtEnd(cg->b, run);
        LLVMValueRef args[6] = {cg->a_exec, cg->a_arena, cg->a_weights, cg->a_inputs, cg->a_outputs,
                                kn_cg_i64(cg, full * g)};
        LLVMBuildRet(cg->b, LLVMBuildCall2(cg->b, LLVMGlobalGetValueType(tail), tail, args, 6, ""));
        LLVMPositionBuilderAtEnd(cg->b, done);
    }
    LLVMBuildRet(cg->b, kn_cg_i32(cg, 0));
    return fn;
}

/* The node function: its arguments in an array, and kn_rt_parallel_for. */
static LLVMValueRef emit_node_fn(kn_cg *cg, const char *name, LLVMValueRef chunk, int64_t units)
{
    LLVMValueRef fn = kn_cg_begin_function(cg, name, true);
    LLVMTypeRef arr = LLVMArrayType(cg->t_ptr, 5);
    LLVMValueRef args = LLVMBuildAlloca(cg->b, arr, "args");
    LLVMValueRef vals[5] = {cg->a_exec, cg->a_arena, cg->a_weights, cg->a_inputs, cg->a_outputs};
    for (int k = 0; k < 5; k++) {
        LLVMValueRef idx = kn_cg_i64(cg, k);
        LLVMBuildStore(cg->b, vals[k], LLVMBuildGEP2(cg->b, cg->t_ptr, args, &idx, 1, ""));
    }
    LLVMTypeRef params[4] = {cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_i64};
    LLVMTypeRef fty = LLVMFunctionType(cg->t_i32, params, 4, 0);
    LLVMValueRef pf = LLVMGetNamedFunction(cg->mod, "kn_rt_parallel_for");
    if (!pf) pf = LLVMAddFunction(cg->mod, "kn_rt_parallel_for", fty);
    LLVMValueRef call_args[4] = {cg->a_exec, chunk, args, kn_cg_i64(cg, units)};
    LLVMBuildRet(cg->b, LLVMBuildCall2(cg->b, fty, pf, call_args, 4, ""));
    return fn;
}

/* ---- flat views: elementwise nodes over a short leading dim ---------------
 * A node is cut along its first dim that is not 1: 3 rows for an image's
 * [1, 3, H, W] preprocessing (a QuantizeLinear, a normalization), which 2
 * threads split 2:1 and more threads cannot share at all. An elementwise
 * node whose operands all have its output's shape (or are single
 * elements) computes the same thing on any shape of the same elements, so
 * it is lowered on [M, numel / M] views instead, M the leading dims merged
 * up to at least FLAT_MIN_ROWS rows. */
#define FLAT_MIN_ROWS 16

typedef struct flat_view {
    int n;
    kn_value *vals[KN_CG_ROWS_MAX];
    kn_shape saved[KN_CG_ROWS_MAX];
} flat_view;

static bool same_dims(const kn_value *v, const kn_value *y)
{
    if (!v || v->shape.rank != y->shape.rank) return false;
    for (int d = 0; d < y->shape.rank; d++)
        if (v->shape.dims[d] != y->shape.dims[d]) return false;
    return true;
}

static bool flat_add(flat_view *f, kn_value *v)
{
    for (int j = 0; j < f->n; j++)
        if (f->vals[j] == v) return true;
    if (f->n == KN_CG_ROWS_MAX) return false;
    f->vals[f->n] = v;
    f->saved[f->n++] = v->shape;
    return true;
}

static void flat_restore(flat_view *f)
{
    for (int j = 0; j < f->n; j++) f->vals[j]->shape = f->saved[j];
    f->n = 0;
}

/* Gives n's operands their [M, numel / M] views where that is safe and
 * worth it (f records what to restore); false leaves n as it is. */
static bool flat_enter(const kn_node *n, flat_view *f)
{
    f->n = 0;
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    if (!y || n->op == KN_OP_Expand || !in_table(kn_cg_lower_elementwise, n->op) || !kn_shape_is_static(&y->shape))
        return false;
    int r = y->shape.rank, sd = 0;
    while (sd < r && y->shape.dims[sd] == 1) sd++;
    if (sd >= r - 1 || y->shape.dims[sd] >= FLAT_MIN_ROWS) return false;
    int64_t M = 1, numel = kn_cg_numel(y);
    for (int d = sd; d < r - 1 && M < FLAT_MIN_ROWS; d++) M *= y->shape.dims[d];
    if (M < 2 || numel % M) return false;
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
        kn_value *v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
        if (!v) continue;
        if (!kn_shape_is_static(&v->shape)) return false;
        if (kn_cg_numel(v) == 1 && !same_dims(v, y)) continue; /* read whole */
        if (!same_dims(v, y) || !flat_add(f, v)) {
            f->n = 0;
            return false;
        }
    }
    for (int j = 0; j < f->n; j++) {
        kn_shape *sh = &f->vals[j]->shape;
        memset(sh, 0, sizeof *sh);
        sh->rank = 2;
        sh->dims[0] = M, sh->dims[1] = numel / M;
    }
    return f->n > 0;
}

static int par_emit(kn_cg *cg, const kn_node *n, kn_cg_lower_fn lower, const char *fname, LLVMValueRef *out_fn)
{
    *out_fn = NULL;
    split s;
    int64_t g;
    if (!lower || !plan_split(cg, n, &s, &g)) return KN_ERR_UNSUPPORTED;
    char name[96];
    int st;
    snprintf(name, sizeof name, "%s_unit", fname);
    LLVMValueRef unit = kn_cg_emit_row_fn(cg, n, &s.rows, g, lower, name, &st), tail = NULL;
    if (!unit) return st;
    int64_t full = s.R / g, rest = s.R - full * g;
    if (rest) {
        snprintf(name, sizeof name, "%s_tail", fname);
        if (!(tail = kn_cg_emit_row_fn(cg, n, &s.rows, rest, lower, name, &st))) {
            LLVMDeleteFunction(unit);
            return st;
        }
    }
    snprintf(name, sizeof name, "%s_chunk", fname);
    LLVMValueRef chunk = emit_chunk_fn(cg, name, unit, g, full, tail);
    *out_fn = emit_node_fn(cg, fname, chunk, full + (rest > 0));
    return KN_OK;
}

int kn_par_emit(kn_cg *cg, const kn_node *n, kn_cg_lower_fn lower, const char *fname, LLVMValueRef *out_fn)
{
    flat_view f;
    bool flat = lower && flat_enter(n, &f);
    int st = par_emit(cg, n, lower, fname, out_fn);
    if (flat) flat_restore(&f);
    return st;
}
