/*
 * codegen/cpu/dyn.c — dynamic dims in compiled artifacts: the affine
 * analysis of the probes, which nodes run in rows, and the row loop
 * (overview in dyn.h).
 */
#include "dyn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- analysis ------------------------------------------------------------------ */

/* Value by id, for one graph (ids are unique in a model, not dense). */
typedef struct id_map {
    kn_value **at;
    int n;
} id_map;

static int max_id(const kn_graph *g)
{
    int m = -1;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i]->id > m) m = g->values[i]->id;
    return m;
}

static int map_build(const kn_graph *g, int n, id_map *out)
{
    out->n = n;
    out->at = calloc((size_t)n + 1, sizeof *out->at);
    if (!out->at) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i]->id >= 0 && g->values[i]->id < n) out->at[g->values[i]->id] = g->values[i];
    return KN_OK;
}

static bool same_tensor(const kn_tensor *x, const kn_tensor *y)
{
    if (!x || !y || x->dtype != y->dtype || x->rank != y->rank || x->nbytes != y->nbytes) return false;
    for (int d = 0; d < x->rank; d++)
        if (x->dims[d] != y->dims[d]) return false;
    return !x->nbytes || (x->data && y->data && !memcmp(x->data, y->data, x->nbytes));
}

static int not_affine(const kn_value *v, int d, const kn_compile_sym *s, const int64_t *sizes)
{
    long long A = (long long)kn_compile_sym_align(s), lo = (long long)kn_compile_sym_min(s);
    return kn_error(KN_ERR_UNSUPPORTED,
                    "value '%s': dim %d is %lld for %s=%lld, %lld for %s=%lld and %lld for %s=%lld, which is not "
                    "affine in %s (a strided conv or pooling over a dynamic dim?): align it to the product of the "
                    "strides (--align %s=32, or [MIN..MAX%%32] in --shape) or pin it with --shape %s=N",
                    v->name, d, (long long)sizes[0], s->name, lo * A, (long long)sizes[1], s->name, (lo + 1) * A,
                    (long long)sizes[2], s->name, (long long)s->max * A, s->name, s->name, s->name);
}

/* Dims of v that follow symbol k, from its counterparts p1 (n = min) and p2 (n = min + 1). */
static int fit_value(kn_dyn *dy, int k, const kn_value *v, const kn_value *p1, const kn_value *p2)
{
    const kn_compile_sym *s = &dy->syms[k];
    bool main_static = kn_shape_is_static(&v->shape);
    bool probes_static = p1 && p2 && kn_shape_is_static(&p1->shape) && kn_shape_is_static(&p2->shape);
    if (!main_static && !probes_static) return KN_OK; /* data-dependent: a session slot at run time */
    if (!main_static || !probes_static || p1->shape.rank != v->shape.rank || p2->shape.rank != v->shape.rank ||
        p1->dtype != v->dtype || p2->dtype != v->dtype)
        return kn_error(KN_ERR_UNSUPPORTED,
                        "value '%s': its rank or dtype changes with %s (or its shape is known only for some "
                        "values of %s): pin it with --shape %s=N", v->name, s->name, s->name, s->name);
    if (v->shape.rank > 8) return KN_OK;
    kn_dyn_value *dv = &dy->v[v->id];
    for (int d = 0; d < v->shape.rank; d++) {
        int64_t sizes[3] = {p1->shape.dims[d], p2->shape.dims[d], v->shape.dims[d]};
        int64_t a = sizes[1] - sizes[0], b = sizes[0] - a * kn_compile_sym_min(s);
        if (a * s->max + b != sizes[2]) return not_affine(v, d, s, sizes);
        if (a == 0) continue;
        if (dv->sym[d])
            return kn_error(KN_ERR_UNSUPPORTED, "value '%s': dim %d follows both %s and %s: pin one of them with "
                            "--shape", v->name, d, dy->syms[dv->sym[d] - 1].name, s->name);
        if (kn_dtype_nbytes(v->dtype, 2) != 2 * kn_dtype_nbytes(v->dtype, 1))
            return kn_error(KN_ERR_UNSUPPORTED, "value '%s': a packed 4-bit tensor cannot have a dynamic dim (%s)",
                            v->name, s->name);
        dv->sym[d] = k + 1;
        dv->a[d] = a;
    }
    return KN_OK;
}

/* A folded value whose data differs in a probe is computed at run time. */
static void unfold_if_varying(kn_value *v, const kn_value *p1, const kn_value *p2)
{
    if (!v->const_data || !v->producer || (v->flags & KN_VALUE_INITIALIZER)) return;
    if (!p1 || !p2 || !same_tensor(v->const_data, p1->const_data) || !same_tensor(v->const_data, p2->const_data))
        v->const_data = NULL; /* the tensor stays owned by the model */
}

static int analyze_sym(kn_dyn *dy, kn_graph *g, int k)
{
    id_map m1 = {0}, m2 = {0};
    const kn_compile_sym *s = &dy->syms[k];
    if (!s->probe[0] || !s->probe[1] || !s->probe[0]->graph || !s->probe[1]->graph)
        return kn_error(KN_ERR_INVALID, "dynamic dim '%s': no probe models", s->name);
    int st = map_build(s->probe[0]->graph, dy->n_values, &m1);
    if (!st) st = map_build(s->probe[1]->graph, dy->n_values, &m2);
    for (int i = 0; i < g->n_values && !st; i++) {
        kn_value *v = g->values[i];
        if (v->id < 0 || v->id >= dy->n_values) continue;
        const kn_value *p1 = m1.at[v->id], *p2 = m2.at[v->id];
        unfold_if_varying(v, p1, p2);
        /* a packed value's dim 1 follows the token count, whatever the
         * inputs' dims (kn_dyn_analyze): it holds at most the maximum's */
        if (!(v->flags & KN_VALUE_TOKEN_ROWS)) st = fit_value(dy, k, v, p1, p2);
    }
    free(m1.at);
    free(m2.at);
    return st;
}

/* The most packed tokens of g's KN_VALUE_TOKEN_ROWS values (their dim 1),
 * 0 without any, -1 with an error when they disagree. */
static int64_t token_rows_max(const kn_graph *g)
{
    int64_t t = 0;
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (!(v->flags & KN_VALUE_TOKEN_ROWS)) continue;
        if (v->shape.rank < 2 || v->shape.dims[1] < 1 || (t && v->shape.dims[1] != t)) {
            kn_error(KN_ERR_INTERNAL, "packed value '%s' does not have %lld tokens in dim 1", v->name, (long long)t);
            return -1;
        }
        t = v->shape.dims[1];
    }
    return t;
}

int kn_dyn_analyze(kn_graph *g, const kn_compile_opts *o, kn_dyn *out)
{
    memset(out, 0, sizeof *out);
    int64_t tokens = token_rows_max(g);
    if (tokens < 0) return KN_ERR_INTERNAL;
    int n = o->n_syms + (tokens > 0);
    if (!n) return KN_OK;
    if (o->n_syms < 0 || n > KN_MAX_SYMS)
        return kn_error(KN_ERR_INVALID, "%d dynamic dims (at most %d)", n, KN_MAX_SYMS);
    if (o->n_syms) memcpy(out->own, o->syms, sizeof *o->syms * (size_t)o->n_syms);
    if (tokens) /* every packed value has T rows in dim 1 */
        out->own[o->n_syms] =
            (kn_compile_sym){.name = "kiln.packed_tokens", .max = tokens, .min = 1, .align = 1, .from_data = true};
    out->n_syms = n;
    out->syms = out->own;
    out->n_values = max_id(g) + 1;
    out->v = calloc((size_t)out->n_values + 1, sizeof *out->v);
    if (!out->v) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int k = 0; k < o->n_syms; k++) {
        int st = analyze_sym(out, g, k);
        if (st) return st;
    }
    for (int i = 0; tokens && i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (!(v->flags & KN_VALUE_TOKEN_ROWS) || v->id < 0 || v->id >= out->n_values) continue;
        if (kn_dyn_value_is_dynamic(out, v))
            return kn_error(KN_ERR_INTERNAL, "packed value '%s' follows a dynamic dim of the inputs", v->name);
        out->v[v->id].sym[1] = o->n_syms + 1, out->v[v->id].a[1] = 1;
    }
    return KN_OK;
}

void kn_dyn_free(kn_dyn *d)
{
    free(d->v);
    memset(d, 0, sizeof *d);
}

static const kn_dyn_value *dyn_of(const kn_dyn *d, const kn_value *v)
{
    return d->v && v && v->id >= 0 && v->id < d->n_values ? &d->v[v->id] : NULL;
}

bool kn_dyn_value_is_dynamic(const kn_dyn *d, const kn_value *v)
{
    const kn_dyn_value *dv = dyn_of(d, v);
    for (int i = 0; dv && i < 8; i++)
        if (dv->sym[i]) return true;
    return false;
}

bool kn_dyn_node_is_dynamic(const kn_dyn *d, const kn_node *n)
{
    for (int k = 0; k < n->n_inputs; k++)
        if (kn_dyn_value_is_dynamic(d, n->inputs[k])) return true;
    for (int k = 0; k < n->n_outputs; k++)
        if (kn_dyn_value_is_dynamic(d, n->outputs[k])) return true;
    return false;
}

void kn_dyn_fill_abi(const kn_dyn *d, const kn_value *v, kn_abi_tensor *t)
{
    const kn_dyn_value *dv = dyn_of(d, v);
    if (!dv || t->slot) return;
    memcpy(t->dim_sym, dv->sym, sizeof t->dim_sym);
    memcpy(t->dim_a, dv->a, sizeof t->dim_a);
}

/* ---- which nodes run in rows ------------------------------------------------------ */

/* A value is in rows of symbol `sym` when one dim, its row dim, has size a*n
 * (a > 0), every dim before it is 1 and no other dim is dynamic: its bytes
 * are then n equal blocks, one per value of the symbol. Returns a and sets
 * *out_dim; 0 if v does not depend on any symbol; -1 otherwise. */
static int64_t rows_of(const kn_dyn *d, const kn_value *v, int sym, int *out_dim)
{
    const kn_dyn_value *dv = dyn_of(d, v);
    *out_dim = -1;
    if (!kn_dyn_value_is_dynamic(d, v)) return 0;
    int rd = -1;
    for (int i = 0; i < 8; i++)
        if (dv->sym[i]) {
            if (rd >= 0 || dv->sym[i] != sym + 1) return -1;
            rd = i;
        }
    if (dv->a[rd] <= 0 || v->shape.dims[rd] != dv->a[rd] * d->syms[sym].max) return -1;
    for (int i = 0; i < rd; i++)
        if (v->shape.dims[i] != 1) return -1;
    *out_dim = rd;
    return dv->a[rd];
}

static int64_t norm_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

static bool is_elementwise(kn_op op)
{
    for (const kn_cg_lowering *l = kn_cg_lower_elementwise; l->lower; l++)
        if (l->op == op) return true;
    return false;
}

/* A Pad keeps row r of its input at row r of its output only when it pads
 * nothing before or after the row dim rd: a pad of +1 before and -1 after
 * leaves the dim's size (so its form in N) unchanged but moves every row
 * down by one (found by the differential tester). Pads and axes must be
 * constants to tell. */
static bool pad_keeps_rows(const kn_node *n, int rd, int rank)
{
    const kn_value *pv = kn_node_input(n, 1), *av = kn_node_input(n, 3);
    if (kn_node_opset(n) < 11) {
        const int64_t *pads;
        int cnt = kn_attr_ints(n, "pads", &pads);
        return cnt == 2 * rank && pads[rd] == 0 && pads[rank + rd] == 0;
    }
    const kn_tensor *pt = pv ? pv->const_data : NULL, *at = av ? av->const_data : NULL;
    if (!pt || (av && !at)) return false;
    int64_t np = kn_tensor_numel(pt), na = at ? kn_tensor_numel(at) : rank;
    if (np != 2 * na) return false;
    for (int64_t k = 0; k < na; k++) {
        int64_t ax = at ? norm_axis(kn_load_i64(at->dtype, at->data, (size_t)k), rank) : k;
        if (ax == rd && (kn_load_i64(pt->dtype, pt->data, (size_t)k) != 0 ||
                         kn_load_i64(pt->dtype, pt->data, (size_t)(na + k)) != 0))
            return false;
    }
    return true;
}

/* What an op needs to be independent along the row dim rd of its first
 * input (or output, for Concat): its axis after rd, or rd == 0 for ops that
 * treat the leading dim as the batch. `bcast`: its dynamic inputs must also
 * have the output's rank (broadcasting would otherwise move the row dim). */
static bool op_rows_ok(const kn_node *n, int rd, bool data_dynamic, bool *bcast)
{
    int rank = n->n_outputs > 0 && n->outputs[0] ? n->outputs[0]->shape.rank : 0;
    int in_rank = n->n_inputs > 0 && n->inputs[0] ? n->inputs[0]->shape.rank : 0;
    *bcast = is_elementwise(n->op);
    if (*bcast) return true;
    const int64_t *perm = NULL;
    switch (n->op) {
    /* fused: the bias is a constant, the residual has the output's shape */
    case KN_OP_MatMul: case KN_OP_FusedMatMul: case KN_OP_Expand: *bcast = true; return true;
    case KN_OP_Gemm: case KN_OP_Reshape: case KN_OP_Flatten: case KN_OP_Squeeze: case KN_OP_Unsqueeze:
    case KN_OP_Identity: case KN_OP_Dropout:
    case KN_OP_ReduceL1: case KN_OP_ReduceL2: case KN_OP_ReduceLogSum: case KN_OP_ReduceLogSumExp:
    case KN_OP_ReduceMax: case KN_OP_ReduceMean: case KN_OP_ReduceMin: case KN_OP_ReduceProd:
    case KN_OP_ReduceSum: case KN_OP_ReduceSumSquare:
        return true; /* reducing or padding the row dim changes its form: refused by the operand rules */
    case KN_OP_Conv: case KN_OP_FusedConv: case KN_OP_ConvTranspose: case KN_OP_FusedConvTranspose: case KN_OP_MaxPool: case KN_OP_AveragePool: case KN_OP_LpPool:
    case KN_OP_GlobalAveragePool: case KN_OP_GlobalMaxPool: case KN_OP_GlobalLpPool:
    case KN_OP_BatchNormalization: case KN_OP_InstanceNormalization: case KN_OP_GroupNormalization:
    case KN_OP_DepthToSpace: case KN_OP_SpaceToDepth:
        return rd == 0;
    case KN_OP_Pad: return pad_keeps_rows(n, rd, in_rank);
    case KN_OP_Softmax: case KN_OP_LogSoftmax:
        return norm_axis(kn_attr_int(n, "axis", kn_node_opset(n) >= 13 ? -1 : 1), in_rank) > rd;
    case KN_OP_LayerNormalization: return norm_axis(kn_attr_int(n, "axis", -1), in_rank) > rd;
    case KN_OP_LpNormalization: return norm_axis(kn_attr_int(n, "axis", -1), in_rank) > rd;
    case KN_OP_ArgMax: case KN_OP_ArgMin: return norm_axis(kn_attr_int(n, "axis", 0), in_rank) > rd;
    case KN_OP_Concat: return norm_axis(kn_attr_int(n, "axis", 0), rank) > rd;
    case KN_OP_Split: return norm_axis(kn_attr_int(n, "axis", 0), in_rank) > rd;
    /* a static table gathered by indices in rows is row-wise along any axis */
    case KN_OP_Gather: return !data_dynamic || norm_axis(kn_attr_int(n, "axis", 0), in_rank) > rd;
    case KN_OP_Transpose:
        if (kn_attr_ints(n, "perm", &perm) <= rd) return false;
        for (int i = 0; i <= rd; i++)
            if (perm[i] != i) return false;
        return true;
    default: return false; /* Slice, Tile, Resize, scatters, ...: may mix rows */
    }
}

int kn_dyn_row_sym(const kn_dyn *d, const kn_node *n)
{
    if (n->n_outputs < 1 || !n->outputs[0]) return -1;
    const kn_dyn_value *dv = dyn_of(d, n->outputs[0]);
    int sym = -1, rd_out = -1, rd = -1;
    for (int i = 0; dv && i < 8 && sym < 0; i++) sym = dv->sym[i] - 1;
    if (sym < 0) return -1;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] && rows_of(d, n->outputs[k], sym, &rd_out) <= 0) return -1;
    const kn_value *first = n->n_inputs > 0 ? n->inputs[0] : NULL;
    bool data_dynamic = first && rows_of(d, first, sym, &rd) > 0;
    bool bcast = false;
    if (!op_rows_ok(n, data_dynamic ? rd : rd_out, data_dynamic, &bcast)) return -1;
    int rank = n->outputs[0]->shape.rank;
    for (int k = 0; k < n->n_inputs; k++) {
        const kn_value *v = n->inputs[k];
        int64_t rows = v ? rows_of(d, v, sym, &rd) : 0;
        if (rows < 0 || (rows > 0 && bcast && v->shape.rank != rank)) return -1;
    }
    return sym;
}

/* ---- the row loop ------------------------------------------------------------------ */

/* kn_rt_sym(ex, sym) in the current function. */
static LLVMValueRef sym_value(kn_cg *cg, int sym)
{
    LLVMTypeRef params[2] = {cg->t_ptr, cg->t_i32};
    LLVMTypeRef fty = LLVMFunctionType(cg->t_i64, params, 2, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(cg->mod, "kn_rt_sym");
    if (!fn) fn = LLVMAddFunction(cg->mod, "kn_rt_sym", fty);
    LLVMValueRef args[2] = {cg->a_exec, kn_cg_i32(cg, sym)};
    return LLVMBuildCall2(cg->b, fty, fn, args, 2, "n");
}

/* Every dynamic operand of n cut into its rows (a per row) along its row dim. */
static bool dyn_rows(const kn_dyn *d, const kn_node *n, int sym, kn_cg_rows *out)
{
    out->n = 0;
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
        kn_value *v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
        int rd = -1;
        int64_t a = v ? rows_of(d, v, sym, &rd) : 0;
        if (a > 0 && !kn_cg_rows_add(out, v, rd, a)) return false;
    }
    return true;
}

/* `lower` for `rows` rows of symbol sym, as a new row function (NULL and a
 * status if the lowering declines or fails). */
static LLVMValueRef emit_row_fn(kn_cg *cg, const kn_dyn *d, const kn_node *n, int sym, int64_t rows,
                                kn_cg_lower_fn lower, const char *name, int *out_st)
{
    kn_cg_rows r;
    if (!dyn_rows(d, n, sym, &r)) {
        *out_st = KN_ERR_UNSUPPORTED;
        return NULL;
    }
    return kn_cg_emit_row_fn(cg, n, &r, rows, lower, name, out_st);
}

/* Rows per call of the block variant: enough for a oneDNN GEMM or a vector
 * loop to be efficient, small enough not to double the compile time of a
 * model whose maximum is small. */
#define ROW_BLOCK 16

/* Rows per call of a product's big block over packed tokens: a GEMM of that
 * many rows streams its weights once per block. */
#define PRODUCT_BLOCK 128

_Static_assert(KN_TOKEN_ROWS_ALIGN % ROW_BLOCK == 0, "packed values hold whole row blocks");

/* The products pack-tokens takes into its region (passes/pack_tokens.c):
 * their rows are independent, so rows past the count may be computed. A
 * dynamic QMatMul would not do (its input's scale would see those rows). */
static bool is_product(const kn_node *n) { return n->op == KN_OP_MatMul || n->op == KN_OP_FusedMatMul; }

int kn_dyn_emit_rows(kn_cg *cg, const kn_dyn *d, const kn_node *n, int sym, kn_cg_lower_fn lower, const char *fname,
                     LLVMValueRef *out_fn)
{
    *out_fn = NULL;
    char name[96];
    int st;
    /* Packed tokens (a symbol set by the data): every value has room for
     * whole blocks of ROW_BLOCK rows past the count (KN_TOKEN_ROWS_ALIGN),
     * so the count is rounded up to a block and no single rows remain; the
     * rows past it are computed and never read. Products run in blocks of
     * PRODUCT_BLOCK rows first. Other symbols: blocks, then single rows. */
    bool padded = d->syms[sym].from_data;
    LLVMValueRef one = NULL, block = NULL, big = NULL;
    int64_t max = d->syms[sym].max;
    if (padded && is_product(n) && max < 2 * PRODUCT_BLOCK) {
        /* fewer rows than two big blocks (an encoder at batch 1): one call at
         * the most rows, told the run's count (kn_rt_dnnl_exec_rows); a kernel
         * that can computes those alone, others all the rows */
        snprintf(name, sizeof name, "%s_rows%lld", fname, (long long)max);
        cg->dnnl_rows_sym1 = sym + 1;
        LLVMValueRef whole = emit_row_fn(cg, d, n, sym, max, lower, name, &st);
        cg->dnnl_rows_sym1 = 0;
        if (!whole) return st;
        *out_fn = kn_cg_begin_function(cg, fname, true);
        kn_cg_emit_row_loop(cg, kn_cg_i64(cg, max), kn_cg_i64(cg, 0), max, whole);
        LLVMBuildRet(cg->b, kn_cg_i32(cg, 0));
        return KN_OK;
    }
    if (!padded) {
        snprintf(name, sizeof name, "%s_row", fname);
        if (!(one = emit_row_fn(cg, d, n, sym, 1, lower, name, &st))) return st;
    }
    if (padded || d->syms[sym].max >= 2 * ROW_BLOCK) {
        snprintf(name, sizeof name, "%s_rows%d", fname, ROW_BLOCK);
        block = emit_row_fn(cg, d, n, sym, ROW_BLOCK, lower, name, &st);
        if (!block && (padded || st != KN_ERR_UNSUPPORTED)) return st;
        kn_error_clear();
    }
    if (padded && is_product(n)) {
        /* told the rows left (kn_rt_dnnl_exec_rows), so that it can also
         * run the last, partial block in one call */
        snprintf(name, sizeof name, "%s_rows%d", fname, PRODUCT_BLOCK);
        cg->dnnl_rows_sym1 = sym + 1;
        big = emit_row_fn(cg, d, n, sym, PRODUCT_BLOCK, lower, name, &st);
        cg->dnnl_rows_sym1 = 0;
        if (!big && st != KN_ERR_UNSUPPORTED) return st;
        kn_error_clear();
    }
    *out_fn = kn_cg_begin_function(cg, fname, true);
    LLVMValueRef count = sym_value(cg, sym), row = kn_cg_i64(cg, 0);
    if (big) {
        row = kn_cg_emit_row_loop(cg, count, row, PRODUCT_BLOCK, big);
        /* the rest in one more big call where the reservation holds a whole
         * block past it (a kernel that can computes only the rows left);
         * else in blocks of ROW_BLOCK below */
        LLVMValueRef end = LLVMBuildAdd(cg->b, row, kn_cg_i64(cg, PRODUCT_BLOCK), "");
        LLVMValueRef tail = LLVMBuildAnd(cg->b, LLVMBuildICmp(cg->b, LLVMIntSLT, row, count, ""),
                                         LLVMBuildICmp(cg->b, LLVMIntSLE, end, kn_cg_i64(cg, max), ""), "");
        LLVMBasicBlockRef in_tail = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "tail");
        LLVMBasicBlockRef rest = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rest");
        LLVMBuildCondBr(cg->b, tail, in_tail, rest);
        LLVMPositionBuilderAtEnd(cg->b, in_tail);
        LLVMValueRef args[6] = {cg->a_exec, cg->a_arena, cg->a_weights, cg->a_inputs, cg->a_outputs, row};
        LLVMBuildRet(cg->b, LLVMBuildCall2(cg->b, LLVMGlobalGetValueType(big), big, args, 6, ""));
        LLVMPositionBuilderAtEnd(cg->b, rest);
    }
    if (padded) {
        LLVMValueRef up = LLVMBuildAdd(cg->b, count, kn_cg_i64(cg, ROW_BLOCK - 1), "");
        LLVMValueRef blocks = LLVMBuildSDiv(cg->b, up, kn_cg_i64(cg, ROW_BLOCK), "");
        count = LLVMBuildMul(cg->b, blocks, kn_cg_i64(cg, ROW_BLOCK), "");
    }
    if (block) row = kn_cg_emit_row_loop(cg, count, row, ROW_BLOCK, block);
    if (one) kn_cg_emit_row_loop(cg, count, row, 1, one);
    LLVMBuildRet(cg->b, kn_cg_i32(cg, 0));
    return KN_OK;
}

int kn_dyn_emit_copy(kn_cg *cg, const kn_dyn *d, const kn_node *n)
{
    bool copy_op = n->op == KN_OP_Identity || n->op == KN_OP_Reshape || n->op == KN_OP_Flatten ||
                   n->op == KN_OP_Squeeze || n->op == KN_OP_Unsqueeze || n->op == KN_OP_Dropout;
    const kn_value *x = n->n_inputs > 0 ? n->inputs[0] : NULL, *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    if (!copy_op || !x || !y || x->dtype != y->dtype || (n->n_outputs > 1 && n->outputs[1]) ||
        (n->op == KN_OP_Dropout && n->n_inputs > 2 && n->inputs[2]))
        return KN_ERR_UNSUPPORTED; /* a Dropout that may train, or one asked for its mask */
    LLVMValueRef dst = kn_cg_ptr(cg, y), src = kn_cg_ptr(cg, x);
    /* the plan may have placed y over x: memmove */
    LLVMBuildMemMove(cg->b, dst, 1, src, 1, kn_dyn_nbytes(cg, d, y));
    return KN_OK;
}

LLVMValueRef kn_dyn_nbytes(kn_cg *cg, const kn_dyn *d, const kn_value *v)
{
    const kn_dyn_value *dv = dyn_of(d, v);
    int64_t fixed = (int64_t)kn_dtype_nbytes(v->dtype, 1);
    LLVMValueRef bytes = NULL;
    for (int i = 0; i < v->shape.rank; i++) {
        if (!dv || !dv->sym[i]) {
            fixed *= v->shape.dims[i];
            continue;
        }
        int k = dv->sym[i] - 1;
        /* dims + a * (n - max) */
        LLVMValueRef delta = LLVMBuildSub(cg->b, sym_value(cg, k), kn_cg_i64(cg, d->syms[k].max), "");
        LLVMValueRef dim = LLVMBuildAdd(cg->b, kn_cg_i64(cg, v->shape.dims[i]),
                                        LLVMBuildMul(cg->b, delta, kn_cg_i64(cg, dv->a[i]), ""), "");
        bytes = bytes ? LLVMBuildMul(cg->b, bytes, dim, "") : dim;
    }
    LLVMValueRef f = kn_cg_i64(cg, fixed);
    return bytes ? LLVMBuildMul(cg->b, bytes, f, "") : f;
}
