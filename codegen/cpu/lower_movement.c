/*
 * codegen/cpu/lower_movement.c — generated loop nests for data movement
 * (see cg.h): Transpose, Concat, Split, Slice, Gather, GatherElements,
 * Expand, Tile, Pad, DepthToSpace, SpaceToDepth, nearest Resize/Upsample,
 * ScatterElements/ScatterND without reduction, and plain copies for
 * Reshape-like ops the memory plan did not alias.
 *
 * Every op is described as a list of "boxes": a box is an iteration space
 * over the output (up to 2*KN_MAX_RANK axes) in which each axis advances the
 * destination by a constant stride and the source by a constant stride, or
 * through an index table (constant, or a runtime indices tensor). One emitter
 * turns a box into a loop nest, after dropping size-1 axes and merging axes
 * that are contiguous on both sides, so the innermost loop walks the longest
 * run we can prove contiguous; a run contiguous on both sides becomes one
 * llvm.memcpy (a vector copy after O3); a transpose-like box whose source
 * is contiguous along an outer axis is walked in 8x8 blocks. Elements are
 * moved as integers of their byte size, so one path serves every dtype;
 * packed 4-bit types and strings are left to the runtime kernels
 * (KN_ERR_UNSUPPORTED), as are shapes or parameters not known at compile
 * time.
 *
 * Runtime indices (Gather*, Scatter*) are validated in a first loop;
 * if one is out of range the node records a message naming itself
 * (kn_error), stores KN_ERR_INVALID into cg->status and skips the copy, so
 * no read or write ever leaves its buffer.
 */
#include "cg.h"
#include "movement_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MV_MAXAX (2 * KN_MAX_RANK + 2)
#define MV_MAXBOX 128

typedef struct mv_axis {
    int64_t n;            /* iterations */
    int64_t dst, src;     /* strides in elements (src unused with a table) */
    LLVMValueRef tbl;     /* index table or NULL: src += norm(tbl[iv]) * mul */
    LLVMTypeRef tbl_t;    /* i32 or i64 */
    int64_t mul, wrap;    /* wrap > 0: negative entries get wrap added */
} mv_axis;

typedef struct mv_box {
    int rank;
    mv_axis ax[MV_MAXAX];
    int64_t dst0, src0;   /* base offsets in elements */
    LLVMValueRef dst, src; /* src NULL: store `fill` */
    uint64_t fill;        /* bit pattern of one element */
    /* GatherElements: src += norm(eidx[dst offset]) * emul; with eidx_dst
     * (ScatterElements): dst += norm(eidx[src offset]) * emul */
    LLVMValueRef eidx;
    LLVMTypeRef eidx_t;
    int64_t emul, ewrap;
    bool eidx_dst;
} mv_box;

/* ---- small helpers ---------------------------------------------------------- */

/* Element size in bytes for a dtype we move as integers; 0 if we do not. */
static int mv_esize(kn_dtype dt)
{
    if (dt == KN_STRING || !kn_dtype_valid(dt)) return 0;
    size_t es = kn_dtype_size(dt);
    return es == 1 || es == 2 || es == 4 || es == 8 ? (int)es : 0;
}

/* Static and of a size kiln counts (kn_shape_nbytes; inference refuses
 * bigger ones): every element count, stride and offset product computed
 * below is then at most 2^62 and cannot overflow int64_t. */
static bool mv_static(const kn_value *v)
{
    return v && v->dtype != KN_DT_UNDEFINED && kn_shape_nbytes(v->dtype, &v->shape) >= 0;
}

/* True if the plan gave v a place (an unused output may have none). */
static bool mv_stored(const kn_cg *cg, const kn_value *v)
{
    return v && v->id < cg->plan->n_where && cg->plan->where[v->id].loc >= 0;
}

static void mv_strides(int r, const int64_t *dims, int64_t *s)
{
    int64_t acc = 1;
    for (int k = r - 1; k >= 0; k--) {
        s[k] = acc;
        acc *= dims[k];
    }
}

static void box_init(mv_box *b, LLVMValueRef dst, LLVMValueRef src)
{
    memset(b, 0, sizeof *b);
    b->dst = dst;
    b->src = src;
}

static mv_axis *box_add(mv_box *b, int64_t n, int64_t dst, int64_t src)
{
    mv_axis *a = &b->ax[b->rank++];
    memset(a, 0, sizeof *a);
    a->n = n;
    a->dst = dst;
    a->src = src;
    return a;
}

/* Drops size-1 axes and merges neighbours contiguous on both sides. Returns
 * false when the box is empty. */
static bool box_simplify(mv_box *b)
{
    int r = 0;
    for (int k = 0; k < b->rank; k++) {
        if (b->ax[k].n == 0) return false;
        if (b->ax[k].n == 1) {
            /* a size-1 table axis still contributes its one entry */
            if (!b->ax[k].tbl) continue;
        }
        mv_axis a = b->ax[k];
        if (r > 0) {
            mv_axis *p = &b->ax[r - 1];
            if (!p->tbl && !a.tbl && p->dst == a.n * a.dst && p->src == a.n * a.src) {
                p->n *= a.n;
                p->dst = a.dst;
                p->src = a.src;
                continue;
            }
        }
        b->ax[r++] = a;
    }
    b->rank = r;
    return true;
}

static LLVMValueRef mv_norm(kn_cg *cg, LLVMValueRef v, LLVMTypeRef t, int64_t wrap)
{
    if (t != cg->t_i64) v = LLVMBuildSExt(cg->b, v, cg->t_i64, "");
    if (wrap <= 0) return v;
    LLVMValueRef neg = LLVMBuildICmp(cg->b, LLVMIntSLT, v, kn_cg_i64(cg, 0), "");
    return LLVMBuildSelect(cg->b, neg, LLVMBuildAdd(cg->b, v, kn_cg_i64(cg, wrap), ""), v, "");
}

static LLVMValueRef mv_elem_ptr(kn_cg *cg, LLVMTypeRef et, LLVMValueRef base, LLVMValueRef off)
{
    return LLVMBuildGEP2(cg->b, et, base, &off, 1, "");
}

/* One byte value if every byte of the element pattern is the same, else -1. */
static int fill_byte(uint64_t fill, int es)
{
    int b0 = (int)(fill & 0xff);
    for (int i = 1; i < es; i++)
        if ((int)((fill >> (8 * i)) & 0xff) != b0) return -1;
    return b0;
}

static void emit_level(kn_cg *cg, const mv_box *b, LLVMTypeRef et, int es, int level, LLVMValueRef doff,
                       LLVMValueRef soff)
{
    if (level == b->rank) {
        LLVMValueRef v;
        if (b->src) {
            if (b->eidx) {
                LLVMValueRef ip = mv_elem_ptr(cg, b->eidx_t, b->eidx, b->eidx_dst ? soff : doff);
                LLVMValueRef iv = mv_norm(cg, LLVMBuildLoad2(cg->b, b->eidx_t, ip, ""), b->eidx_t, b->ewrap);
                LLVMValueRef add = LLVMBuildMul(cg->b, iv, kn_cg_i64(cg, b->emul), "");
                if (b->eidx_dst) doff = LLVMBuildAdd(cg->b, doff, add, "");
                else soff = LLVMBuildAdd(cg->b, soff, add, "");
            }
            v = LLVMBuildLoad2(cg->b, et, mv_elem_ptr(cg, et, b->src, soff), "");
        } else {
            v = LLVMConstInt(et, b->fill, 0);
        }
        LLVMBuildStore(cg->b, v, mv_elem_ptr(cg, et, b->dst, doff));
        return;
    }
    const mv_axis *a = &b->ax[level];
    if (level == b->rank - 1 && a->dst == 1 && !a->tbl && !b->eidx) {
        LLVMValueRef bytes = kn_cg_i64(cg, a->n * es);
        LLVMValueRef dp = mv_elem_ptr(cg, et, b->dst, doff);
        if (b->src && a->src == 1) {
            LLVMBuildMemCpy(cg->b, dp, (unsigned)es, mv_elem_ptr(cg, et, b->src, soff), (unsigned)es, bytes);
            return;
        }
        int fb = b->src ? -1 : fill_byte(b->fill, es);
        if (fb >= 0) {
            LLVMBuildMemSet(cg->b, dp, LLVMConstInt(cg->t_i8, (unsigned)fb, 0), bytes, (unsigned)es);
            return;
        }
    }
    kn_cg_loop l;
    LLVMValueRef iv = kn_cg_loop_begin(cg, &l, a->n, "mv");
    LLVMValueRef d = LLVMBuildAdd(cg->b, doff, LLVMBuildMul(cg->b, iv, kn_cg_i64(cg, a->dst), ""), "");
    LLVMValueRef s = soff;
    if (a->tbl) {
        LLVMValueRef t = LLVMBuildLoad2(cg->b, a->tbl_t, mv_elem_ptr(cg, a->tbl_t, a->tbl, iv), "");
        t = mv_norm(cg, t, a->tbl_t, a->wrap);
        s = LLVMBuildAdd(cg->b, soff, LLVMBuildMul(cg->b, t, kn_cg_i64(cg, a->mul), ""), "");
    } else if (b->src) {
        s = LLVMBuildAdd(cg->b, soff, LLVMBuildMul(cg->b, iv, kn_cg_i64(cg, a->src), ""), "");
    }
    emit_level(cg, b, et, es, level + 1, d, s);
    kn_cg_loop_end(cg, &l);
}

static void emit_simple(kn_cg *cg, mv_box *b, int es)
{
    if (!box_simplify(b)) return;
    LLVMTypeRef et = LLVMIntTypeInContext(cg->ctx, (unsigned)(8 * es));
    emit_level(cg, b, et, es, 0, kn_cg_i64(cg, b->dst0), kn_cg_i64(cg, b->src0));
}

#define MV_TILE 8

/* A transpose-like box (innermost axis contiguous in the destination but
 * strided in the source, another axis contiguous in the source) is walked in
 * MV_TILE x MV_TILE blocks so both sides stay in cache and the block becomes
 * vector shuffles; the ragged edges are plain boxes. */
static bool emit_tiled(kn_cg *cg, const mv_box *b0, int es)
{
    mv_box b = *b0;
    if (!box_simplify(&b) || b.rank < 2 || !b.src || b.eidx || b.rank + 2 > MV_MAXAX) return false;
    int L = b.rank - 1, J = -1;
    mv_axis al = b.ax[L];
    if (al.tbl || al.dst != 1 || al.src == 1 || al.src == 0 || al.n < 2 * MV_TILE) return false;
    for (int k = L - 1; k >= 0 && J < 0; k--)
        if (!b.ax[k].tbl && b.ax[k].src == 1 && b.ax[k].n >= 2 * MV_TILE) J = k;
    if (J < 0) return false;
    mv_axis aj = b.ax[J];
    int64_t qj = aj.n / MV_TILE, ql = al.n / MV_TILE;
    /* the full blocks */
    mv_box t = b;
    t.ax[J].n = qj;
    t.ax[J].dst = aj.dst * MV_TILE;
    t.ax[J].src = MV_TILE;
    t.ax[L].n = ql;
    t.ax[L].dst = MV_TILE;
    t.ax[L].src = al.src * MV_TILE;
    t.rank = L + 1;
    box_add(&t, MV_TILE, aj.dst, 1);
    box_add(&t, MV_TILE, 1, al.src);
    LLVMTypeRef et = LLVMIntTypeInContext(cg->ctx, (unsigned)(8 * es));
    emit_level(cg, &t, et, es, 0, kn_cg_i64(cg, t.dst0), kn_cg_i64(cg, t.src0));
    /* rows of J past the last block, all of L */
    mv_box r = b;
    r.ax[J].n = aj.n - qj * MV_TILE;
    r.dst0 += qj * MV_TILE * aj.dst;
    r.src0 += qj * MV_TILE;
    emit_simple(cg, &r, es);
    /* the blocks' rows, L past the last block */
    r = b;
    r.ax[J].n = qj * MV_TILE;
    r.ax[L].n = al.n - ql * MV_TILE;
    r.dst0 += ql * MV_TILE;
    r.src0 += ql * MV_TILE * al.src;
    emit_simple(cg, &r, es);
    return true;
}

/* Emits the loop nest(s) of one box (moving es-byte elements). */
static void emit_box(kn_cg *cg, mv_box *b, int es)
{
    if (!emit_tiled(cg, b, es)) emit_simple(cg, b, es);
}

/* A private constant i64 array (compile-time index tables). */
static LLVMValueRef const_table(kn_cg *cg, const int64_t *v, int64_t n)
{
    LLVMValueRef *el = malloc(sizeof *el * (size_t)(n ? n : 1));
    if (!el) return NULL;
    for (int64_t i = 0; i < n; i++) el[i] = kn_cg_i64(cg, v[i]);
    LLVMValueRef init = LLVMConstArray(cg->t_i64, el, (unsigned)n);
    free(el);
    LLVMValueRef g = kn_cg_const_global(cg, "mv_table", init, 0);
    LLVMSetUnnamedAddr(g, 1);
    return g;
}

/* Emits a loop that checks n runtime indices ind[first + i * stride] against
 * [-dim, dim); returns the i1 "any bad" value after the loop. */
static LLVMValueRef emit_index_check_strided(kn_cg *cg, LLVMValueRef ind, LLVMTypeRef t, int64_t n, int64_t stride,
                                             int64_t first, int64_t dim)
{
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(cg->ctx);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(cg->fn);
    LLVMValueRef head = LLVMGetFirstInstruction(entry);
    if (head) LLVMPositionBuilderBefore(eb, head);
    else LLVMPositionBuilderAtEnd(eb, entry);
    LLVMValueRef flag = LLVMBuildAlloca(eb, cg->t_i8, "bad_index");
    LLVMDisposeBuilder(eb);
    LLVMBuildStore(cg->b, LLVMConstInt(cg->t_i8, 0, 0), flag);
    kn_cg_loop l;
    LLVMValueRef iv = kn_cg_loop_begin(cg, &l, n, "chk");
    LLVMValueRef at = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, iv, kn_cg_i64(cg, stride), ""), kn_cg_i64(cg, first), "");
    LLVMValueRef v = mv_norm(cg, LLVMBuildLoad2(cg->b, t, mv_elem_ptr(cg, t, ind, at), ""), t, dim);
    LLVMValueRef bad = LLVMBuildICmp(cg->b, LLVMIntUGE, v, kn_cg_i64(cg, dim), "");
    LLVMValueRef acc = LLVMBuildLoad2(cg->b, cg->t_i8, flag, "");
    LLVMBuildStore(cg->b, LLVMBuildOr(cg->b, acc, LLVMBuildZExt(cg->b, bad, cg->t_i8, ""), ""), flag);
    kn_cg_loop_end(cg, &l);
    LLVMValueRef any = LLVMBuildLoad2(cg->b, cg->t_i8, flag, "");
    return LLVMBuildICmp(cg->b, LLVMIntNE, any, LLVMConstInt(cg->t_i8, 0, 0), "");
}

static LLVMValueRef emit_index_check(kn_cg *cg, LLVMValueRef ind, LLVMTypeRef t, int64_t n, int64_t dim)
{
    return emit_index_check_strided(cg, ind, t, n, 1, 0, dim);
}

/* `if (bad) { kn_error(KN_ERR_INVALID, msg); *status = KN_ERR_INVALID; goto
 * done; }` — the runtime reports a non-zero status with the message last
 * recorded, so the failing node is named. Returns `done`; the builder
 * continues in the good path, which must branch to `done` at the end. */
static LLVMBasicBlockRef emit_guard(kn_cg *cg, const kn_node *n, LLVMValueRef bad, int64_t dim)
{
    LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "bad_index");
    LLVMBasicBlockRef ok = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "");
    LLVMBuildCondBr(cg->b, bad, fail, ok);
    LLVMPositionBuilderAtEnd(cg->b, fail);
    char msg[512];
    if (dim >= 0)
        snprintf(msg, sizeof msg, "node '%s' (%s): an index is out of range for an axis of size %lld", n->name,
                 kn_op_name(n->op), (long long)dim);
    else
        snprintf(msg, sizeof msg, "node '%s' (%s): an index is out of range", n->name, kn_op_name(n->op));
    LLVMTypeRef params[2] = {cg->t_i32, cg->t_ptr};
    LLVMTypeRef fty = LLVMFunctionType(cg->t_i32, params, 2, 1);
    LLVMValueRef fn = LLVMGetNamedFunction(cg->mod, "kn_error");
    if (!fn) fn = LLVMAddFunction(cg->mod, "kn_error", fty);
    LLVMValueRef args[3] = {kn_cg_i32(cg, KN_ERR_INVALID), LLVMBuildGlobalStringPtr(cg->b, "%s", ""),
                            LLVMBuildGlobalStringPtr(cg->b, msg, "")};
    LLVMBuildCall2(cg->b, fty, fn, args, 3, "");
    if (cg->status) LLVMBuildStore(cg->b, kn_cg_i32(cg, KN_ERR_INVALID), cg->status);
    LLVMBuildBr(cg->b, done);
    LLVMPositionBuilderAtEnd(cg->b, ok);
    return done;
}

static void emit_guard_end(kn_cg *cg, LLVMBasicBlockRef done)
{
    LLVMBuildBr(cg->b, done);
    LLVMPositionBuilderAtEnd(cg->b, done);
}

/* Integer list from a constant input (NULL/absent → *cnt = -1; non-constant
 * → -2). */
static int const_ints(const kn_node *n, int i, int64_t *out, int max, int *cnt)
{
    const kn_value *v = kn_node_input(n, i);
    *cnt = -1;
    if (!v) return KN_OK;
    *cnt = -2;
    const kn_tensor *t = v->const_data;
    if (!t) return KN_OK;
    if (!kn_dtype_info(t->dtype)->is_integer) return KN_ERR_UNSUPPORTED;
    int64_t c = kn_tensor_numel(t);
    if (c < 0 || c > max) return KN_ERR_UNSUPPORTED;
    for (int64_t k = 0; k < c; k++) out[k] = kn_load_i64(t->dtype, t->data, (size_t)k);
    *cnt = (int)c;
    return KN_OK;
}

static int attr_ints(const kn_node *n, const char *name, int64_t *out, int max, int *cnt)
{
    const int64_t *p = NULL;
    *cnt = -1;
    if (!kn_node_attr(n, name)) return KN_OK;
    int c = kn_attr_ints(n, name, &p);
    if (c > max) return KN_ERR_UNSUPPORTED;
    for (int k = 0; k < c; k++) out[k] = p[k];
    *cnt = c;
    return KN_OK;
}

/* Checks x and y are static, same dtype, movable; sets *es. */
static int mv_check_xy(const kn_value *x, const kn_value *y, int *es)
{
    if (!mv_static(x) || !mv_static(y) || x->dtype != y->dtype) return KN_ERR_UNSUPPORTED;
    *es = mv_esize(x->dtype);
    return *es ? KN_OK : KN_ERR_UNSUPPORTED;
}

/* ---- copies, Transpose, DepthToSpace, SpaceToDepth --------------------------- */

static int emit_copy(kn_cg *cg, const kn_value *x, const kn_value *y, int es)
{
    int64_t nx = kn_cg_numel(x), ny = kn_cg_numel(y);
    if (nx != ny) return KN_ERR_UNSUPPORTED;
    if (!mv_stored(cg, y) || ny == 0) return KN_OK;
    mv_box b;
    box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
    box_add(&b, ny, 1, 1);
    emit_box(cg, &b, es);
    return KN_OK;
}

static int lower_copy(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    int es;
    if (!y || mv_check_xy(x, y, &es)) return KN_ERR_UNSUPPORTED;
    return emit_copy(cg, x, y, es);
}

/* Inference Dropout: a copy, and a mask of ones when one is wanted. */
static int lower_dropout(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    const kn_value *mask = n->n_outputs > 1 ? n->outputs[1] : NULL;
    const kn_value *train = kn_node_input(n, 2);
    int es, mes = 0;
    if (!y || mv_check_xy(x, y, &es)) return KN_ERR_UNSUPPORTED;
    if (kn_node_opset(n) >= 12 && train) {
        const kn_tensor *t = train->const_data;
        if (!t || (kn_tensor_numel(t) > 0 && kn_load_i64(t->dtype, t->data, 0) != 0)) return KN_ERR_UNSUPPORTED;
    }
    if (mask && mv_stored(cg, mask)) {
        if (!mv_static(mask) || kn_cg_numel(mask) != kn_cg_numel(y) || !(mes = mv_esize(mask->dtype)))
            return KN_ERR_UNSUPPORTED;
    }
    if (kn_cg_numel(x) != kn_cg_numel(y)) return KN_ERR_UNSUPPORTED;
    emit_copy(cg, x, y, es);
    if (mes && kn_cg_numel(mask) > 0) {
        unsigned char one[16] = {0};
        kn_store_f64(mask->dtype, one, 0, 1.0);
        mv_box b;
        box_init(&b, kn_cg_ptr(cg, mask), NULL);
        memcpy(&b.fill, one, 8);
        if (mes < 8) b.fill &= (1ull << (8 * mes)) - 1;
        box_add(&b, kn_cg_numel(mask), 1, 0);
        emit_box(cg, &b, mes);
    }
    return KN_OK;
}

/* y[i] = x viewed with dims xd (rank r) transposed by perm. */
static void emit_transpose(kn_cg *cg, const kn_value *x, const kn_value *y, int r, const int64_t *xd,
                           const int *perm, int es)
{
    int64_t xs[MV_MAXAX], yd[MV_MAXAX], ys[MV_MAXAX];
    mv_strides(r, xd, xs);
    for (int k = 0; k < r; k++) yd[k] = xd[perm[k]];
    mv_strides(r, yd, ys);
    mv_box b;
    box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
    for (int k = 0; k < r; k++) box_add(&b, yd[k], ys[k], xs[perm[k]]);
    emit_box(cg, &b, es);
}

static int lower_transpose(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    int es;
    if (mv_check_xy(x, y, &es)) return KN_ERR_UNSUPPORTED;
    int r = x->shape.rank, perm[KN_MAX_RANK], cnt;
    int64_t p[KN_MAX_RANK];
    if (attr_ints(n, "perm", p, KN_MAX_RANK, &cnt)) return KN_ERR_UNSUPPORTED;
    if (cnt < 0)
        for (int k = 0; k < r; k++) perm[k] = r - 1 - k;
    else if (cnt != r) return KN_ERR_UNSUPPORTED;
    bool seen[KN_MAX_RANK] = {0};
    for (int k = 0; cnt >= 0 && k < r; k++) {
        if (p[k] < 0 || p[k] >= r || seen[p[k]]) return KN_ERR_UNSUPPORTED;
        seen[p[k]] = true;
        perm[k] = (int)p[k];
    }
    for (int k = 0; k < r; k++)
        if (y->shape.rank != r || y->shape.dims[k] != x->shape.dims[perm[k]]) return KN_ERR_UNSUPPORTED;
    if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) return KN_OK; /* nothing to write */
    emit_transpose(cg, x, y, r, x->shape.dims, perm, es);
    return KN_OK;
}

/* Both ops are one 6-D transpose between views of input and output (the
 * same views as the reference evaluator). */
static int lower_space_depth(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    int es;
    if (mv_check_xy(x, y, &es) || x->shape.rank != 4 || y->shape.rank != 4) return KN_ERR_UNSUPPORTED;
    int64_t b = kn_attr_int(n, "blocksize", 0);
    const int64_t *d = x->shape.dims;
    if (b <= 0) return KN_ERR_UNSUPPORTED;
    if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) return KN_OK; /* nothing to write */
    int64_t xd[6];
    const int *perm;
    static const int p_dcr[6] = {0, 3, 4, 1, 5, 2}, p_crd[6] = {0, 1, 4, 2, 5, 3}, p_s2d[6] = {0, 3, 5, 1, 2, 4};
    if (n->op == KN_OP_DepthToSpace) {
        const char *mode = kn_attr_string(n, "mode", "DCR");
        if (d[1] % (b * b) || y->shape.dims[1] != d[1] / (b * b) || y->shape.dims[2] != d[2] * b || y->shape.dims[3] != d[3] * b)
            return KN_ERR_UNSUPPORTED;
        int64_t c = d[1] / (b * b);
        if (!strcmp(mode, "CRD")) {
            int64_t v[6] = {d[0], c, b, b, d[2], d[3]};
            memcpy(xd, v, sizeof v);
            perm = p_crd;
        } else if (!strcmp(mode, "DCR")) {
            int64_t v[6] = {d[0], b, b, c, d[2], d[3]};
            memcpy(xd, v, sizeof v);
            perm = p_dcr;
        } else {
            return KN_ERR_UNSUPPORTED;
        }
    } else {
        if (d[2] % b || d[3] % b || y->shape.dims[1] != d[1] * b * b) return KN_ERR_UNSUPPORTED;
        int64_t v[6] = {d[0], d[1], d[2] / b, b, d[3] / b, b};
        memcpy(xd, v, sizeof v);
        perm = p_s2d;
    }
    emit_transpose(cg, x, y, 6, xd, perm, es);
    return KN_OK;
}

/* ---- Concat, Split, Slice ----------------------------------------------------- */

static int lower_concat(kn_cg *cg, const kn_node *n)
{
    const kn_value *y = n->outputs[0];
    if (!mv_static(y) || !mv_esize(y->dtype)) return KN_ERR_UNSUPPORTED;
    int r = y->shape.rank, es = mv_esize(y->dtype);
    const kn_attr *at = kn_node_attr(n, "axis");
    int axis = kn_norm_axis(at ? at->i : 1, r);
    if (axis < 0 || r < 1) return KN_ERR_UNSUPPORTED;
    int64_t sum = 0;
    for (int i = 0; i < n->n_inputs; i++) {
        const kn_value *x = n->inputs[i];
        if (!x || !mv_static(x) || x->dtype != y->dtype || x->shape.rank != r) return KN_ERR_UNSUPPORTED;
        for (int k = 0; k < r; k++)
            if (k != axis && x->shape.dims[k] != y->shape.dims[k]) return KN_ERR_UNSUPPORTED;
        sum += x->shape.dims[axis];
    }
    if (sum != y->shape.dims[axis]) return KN_ERR_UNSUPPORTED;
    if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) return KN_OK; /* nothing to write */
    int64_t ys[KN_MAX_RANK], xs[KN_MAX_RANK], at_off = 0;
    mv_strides(r, y->shape.dims, ys);
    LLVMValueRef py = kn_cg_ptr(cg, y);
    for (int i = 0; i < n->n_inputs; i++) {
        const kn_value *x = n->inputs[i];
        mv_strides(r, x->shape.dims, xs);
        mv_box b;
        box_init(&b, py, kn_cg_ptr(cg, x));
        b.dst0 = at_off * ys[axis];
        for (int k = 0; k < r; k++) box_add(&b, x->shape.dims[k], ys[k], xs[k]);
        emit_box(cg, &b, es);
        at_off += x->shape.dims[axis];
    }
    return KN_OK;
}

static int lower_split(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0);
    if (!mv_static(x) || !mv_esize(x->dtype)) return KN_ERR_UNSUPPORTED;
    int r = x->shape.rank, es = mv_esize(x->dtype);
    int axis = kn_norm_axis(kn_attr_int(n, "axis", 0), r);
    if (axis < 0) return KN_ERR_UNSUPPORTED;
    int64_t sum = 0;
    for (int i = 0; i < n->n_outputs; i++) {
        const kn_value *y = n->outputs[i];
        if (!y) return KN_ERR_UNSUPPORTED; /* sizes of omitted outputs are unknown */
        if (!mv_static(y) || y->dtype != x->dtype || y->shape.rank != r) return KN_ERR_UNSUPPORTED;
        for (int k = 0; k < r; k++)
            if (k != axis && y->shape.dims[k] != x->shape.dims[k]) return KN_ERR_UNSUPPORTED;
        sum += y->shape.dims[axis];
    }
    if (sum != x->shape.dims[axis]) return KN_ERR_UNSUPPORTED;
    int64_t xs[KN_MAX_RANK], ys[KN_MAX_RANK], at_off = 0;
    mv_strides(r, x->shape.dims, xs);
    LLVMValueRef px = kn_cg_ptr(cg, x);
    for (int i = 0; i < n->n_outputs; i++) {
        const kn_value *y = n->outputs[i];
        if (mv_stored(cg, y) && kn_cg_numel(y) > 0) {
            mv_strides(r, y->shape.dims, ys);
            mv_box b;
            box_init(&b, kn_cg_ptr(cg, y), px);
            b.src0 = at_off * xs[axis];
            for (int k = 0; k < r; k++) box_add(&b, y->shape.dims[k], ys[k], xs[k]);
            emit_box(cg, &b, es);
        }
        at_off += y->shape.dims[axis];
    }
    return KN_OK;
}

static int slice_params(const kn_node *n, int r, const int64_t *dims, int64_t *starts, int64_t *steps, int64_t *cnts)
{
    int64_t s[KN_MAX_RANK], e[KN_MAX_RANK], ax[KN_MAX_RANK], st[KN_MAX_RANK];
    int ns, ne, na, nt = -1;
    if (kn_node_opset(n) < 10) {
        if (attr_ints(n, "starts", s, KN_MAX_RANK, &ns) || attr_ints(n, "ends", e, KN_MAX_RANK, &ne) ||
            attr_ints(n, "axes", ax, KN_MAX_RANK, &na))
            return KN_ERR_UNSUPPORTED;
    } else if (const_ints(n, 1, s, KN_MAX_RANK, &ns) || const_ints(n, 2, e, KN_MAX_RANK, &ne) ||
               const_ints(n, 3, ax, KN_MAX_RANK, &na) || const_ints(n, 4, st, KN_MAX_RANK, &nt)) {
        return KN_ERR_UNSUPPORTED;
    }
    if (ns < 0 || ne != ns || na == -2 || nt == -2 || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
        return KN_ERR_UNSUPPORTED;
    for (int k = 0; k < r; k++) {
        starts[k] = 0;
        steps[k] = 1;
        cnts[k] = dims[k];
    }
    bool seen[KN_MAX_RANK] = {0};
    for (int i = 0; i < ns; i++) {
        int k = kn_norm_axis(na >= 0 ? ax[i] : i, r);
        int64_t step = nt >= 0 ? st[i] : 1;
        if (k < 0 || seen[k] || step == 0) return KN_ERR_UNSUPPORTED;
        seen[k] = true;
        cnts[k] = kn_mv_slice_axis(dims[k], s[i], e[i], step, &starts[k]);
        steps[k] = step;
    }
    return KN_OK;
}

static int lower_slice(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    int es;
    if (mv_check_xy(x, y, &es)) return KN_ERR_UNSUPPORTED;
    int r = x->shape.rank;
    int64_t starts[KN_MAX_RANK], steps[KN_MAX_RANK], cnts[KN_MAX_RANK], xs[KN_MAX_RANK], ys[KN_MAX_RANK];
    if (y->shape.rank != r || slice_params(n, r, x->shape.dims, starts, steps, cnts)) return KN_ERR_UNSUPPORTED;
    for (int k = 0; k < r; k++)
        if (cnts[k] != y->shape.dims[k]) return KN_ERR_UNSUPPORTED;
    if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) return KN_OK; /* nothing to write */
    mv_strides(r, x->shape.dims, xs);
    mv_strides(r, y->shape.dims, ys);
    mv_box b;
    box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
    for (int k = 0; k < r; k++) {
        b.src0 += starts[k] * xs[k];
        /* a huge step only ever takes one element: keep the stride finite */
        box_add(&b, y->shape.dims[k], ys[k], y->shape.dims[k] > 1 ? steps[k] * xs[k] : 0);
    }
    emit_box(cg, &b, es);
    return KN_OK;
}

/* ---- Gather, GatherElements ---------------------------------------------------- */

static bool index_dtype(const kn_value *v) { return v && (v->dtype == KN_I32 || v->dtype == KN_I64); }

/* Constant indices: the source offsets (index * inner) if all are in range. */
static int gather_const(const kn_tensor *t, int64_t dim, int64_t inner, int64_t *off, int64_t ni)
{
    for (int64_t j = 0; j < ni; j++) {
        int64_t v = kn_load_i64(t->dtype, t->data, (size_t)j);
        int64_t w = v < 0 ? v + dim : v;
        if (w < 0 || w >= dim) return KN_ERR_UNSUPPORTED; /* the runtime kernel reports it */
        off[j] = w * inner;
    }
    return KN_OK;
}

/* The index axis of a Gather with constant indices: affine when the
 * offsets are evenly spaced, else a constant table. */
static int gather_const_axis(kn_cg *cg, mv_box *b, const kn_tensor *t, int64_t ni, int64_t dim, int64_t inner)
{
    int64_t *off = malloc(sizeof *off * (size_t)(ni ? ni : 1));
    if (!off) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = gather_const(t, dim, inner, off, ni);
    if (st) {
        free(off);
        return st;
    }
    int64_t step = ni > 1 ? off[1] - off[0] : 0;
    bool affine = true;
    for (int64_t j = 2; j < ni && affine; j++) affine = off[j] - off[j - 1] == step;
    if (affine) {
        b->src0 += off[0];
        box_add(b, ni, inner, step);
    } else {
        LLVMValueRef g = const_table(cg, off, ni);
        if (!g) {
            free(off);
            return kn_error(KN_ERR_NOMEM, "out of memory");
        }
        mv_axis *a = box_add(b, ni, inner, 0);
        a->tbl = g;
        a->tbl_t = cg->t_i64;
        a->mul = 1;
    }
    free(off);
    return KN_OK;
}

static int lower_gather(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *ind = kn_node_input(n, 1), *y = n->outputs[0];
    int es;
    if (mv_check_xy(x, y, &es) || !mv_static(ind) || !index_dtype(ind) || x->shape.rank < 1) return KN_ERR_UNSUPPORTED;
    int r = x->shape.rank;
    int axis = kn_norm_axis(kn_attr_int(n, "axis", 0), r);
    if (axis < 0 || y->shape.rank != r - 1 + ind->shape.rank) return KN_ERR_UNSUPPORTED;
    int64_t outer = kn_shape_numel(axis, x->shape.dims), dim = x->shape.dims[axis];
    int64_t inner = kn_shape_numel(r - axis - 1, x->shape.dims + axis + 1), ni = kn_cg_numel(ind);
    if (outer * ni * inner != kn_cg_numel(y)) return KN_ERR_UNSUPPORTED;
    mv_box b;
    if (ind->const_data) {
        if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) return KN_OK; /* nothing to write */
        int64_t *tmp = malloc(sizeof *tmp * (size_t)(ni ? ni : 1));
        if (!tmp) return kn_error(KN_ERR_NOMEM, "out of memory");
        int st = gather_const(ind->const_data, dim, inner, tmp, ni);
        free(tmp);
        if (st) return st;
        box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
        box_add(&b, outer, ni * inner, dim * inner);
        if ((st = gather_const_axis(cg, &b, ind->const_data, ni, dim, inner))) return st;
        box_add(&b, inner, 1, 1);
        emit_box(cg, &b, es);
        return KN_OK;
    }
    if (ni == 0 || !mv_stored(cg, y)) return KN_OK;
    LLVMValueRef pi = kn_cg_ptr(cg, ind);
    LLVMTypeRef it = kn_cg_elem_type(cg, ind->dtype);
    LLVMBasicBlockRef done = emit_guard(cg, n, emit_index_check(cg, pi, it, ni, dim), dim);
    if (kn_cg_numel(y) > 0) {
        box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
        box_add(&b, outer, ni * inner, dim * inner);
        mv_axis *a = box_add(&b, ni, inner, 0);
        a->tbl = pi;
        a->tbl_t = it;
        a->mul = inner;
        a->wrap = dim;
        box_add(&b, inner, 1, 1);
        emit_box(cg, &b, es);
    }
    emit_guard_end(cg, done);
    return KN_OK;
}

static int lower_gather_elements(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *ind = kn_node_input(n, 1), *y = n->outputs[0];
    int es;
    if (mv_check_xy(x, y, &es) || !mv_static(ind) || !index_dtype(ind)) return KN_ERR_UNSUPPORTED;
    int r = x->shape.rank;
    int axis = kn_norm_axis(kn_attr_int(n, "axis", 0), r);
    if (r < 1 || axis < 0 || ind->shape.rank != r || y->shape.rank != r) return KN_ERR_UNSUPPORTED;
    for (int k = 0; k < r; k++)
        if (y->shape.dims[k] != ind->shape.dims[k] || (k != axis && ind->shape.dims[k] > x->shape.dims[k]))
            return KN_ERR_UNSUPPORTED;
    int64_t ni = kn_cg_numel(ind), xs[KN_MAX_RANK], ys[KN_MAX_RANK];
    if (ni == 0 || !mv_stored(cg, y)) return KN_OK;
    mv_strides(r, x->shape.dims, xs);
    mv_strides(r, y->shape.dims, ys);
    LLVMValueRef pi = kn_cg_ptr(cg, ind);
    LLVMTypeRef it = kn_cg_elem_type(cg, ind->dtype);
    LLVMBasicBlockRef done = emit_guard(cg, n, emit_index_check(cg, pi, it, ni, x->shape.dims[axis]), x->shape.dims[axis]);
    mv_box b;
    box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
    for (int k = 0; k < r; k++) box_add(&b, y->shape.dims[k], ys[k], k == axis ? 0 : xs[k]);
    b.eidx = pi;
    b.eidx_t = it;
    b.emul = xs[axis];
    b.ewrap = x->shape.dims[axis];
    emit_box(cg, &b, es);
    emit_guard_end(cg, done);
    return KN_OK;
}

/* ---- Expand, Tile ---------------------------------------------------------------- */

static int lower_expand(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    int es;
    if (mv_check_xy(x, y, &es)) return KN_ERR_UNSUPPORTED;
    int r = x->shape.rank, R = y->shape.rank;
    if (R < r) return KN_ERR_UNSUPPORTED;
    int64_t xs[KN_MAX_RANK], ys[KN_MAX_RANK];
    mv_strides(r, x->shape.dims, xs);
    mv_strides(R, y->shape.dims, ys);
    mv_box b;
    int64_t srcs[KN_MAX_RANK];
    for (int i = 0; i < R; i++) {
        int xi = i - (R - r);
        int64_t d = xi >= 0 ? x->shape.dims[xi] : 1, o = y->shape.dims[i];
        if (d != o && d != 1) return KN_ERR_UNSUPPORTED;
        srcs[i] = d == 1 ? 0 : xs[xi];
    }
    if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) return KN_OK; /* nothing to write */
    box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
    for (int i = 0; i < R; i++) box_add(&b, y->shape.dims[i], ys[i], srcs[i]);
    emit_box(cg, &b, es);
    return KN_OK;
}

/* Each output axis splits into (repeat, x dim): the repeat advances the
 * destination by a whole copy and the source not at all. */
static int lower_tile(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    int es;
    if (mv_check_xy(x, y, &es) || x->shape.rank != y->shape.rank) return KN_ERR_UNSUPPORTED;
    int r = x->shape.rank;
    for (int k = 0; k < r; k++)
        if (x->shape.dims[k] == 0 ? y->shape.dims[k] != 0 : y->shape.dims[k] % x->shape.dims[k]) return KN_ERR_UNSUPPORTED;
    if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) return KN_OK; /* nothing to write */
    int64_t xs[KN_MAX_RANK], ys[KN_MAX_RANK];
    mv_strides(r, x->shape.dims, xs);
    mv_strides(r, y->shape.dims, ys);
    mv_box b;
    box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
    for (int k = 0; k < r; k++) {
        int64_t d = x->shape.dims[k];
        box_add(&b, y->shape.dims[k] / d, d * ys[k], 0);
        box_add(&b, d, ys[k], xs[k]);
    }
    emit_box(cg, &b, es);
    return KN_OK;
}

/* ---- Pad ------------------------------------------------------------------------------ */

/* A run of output coordinates [o0, o0 + len) whose source index is
 * a + b * (o - o0), or a fill (src < 0). */
typedef struct mv_piece {
    int64_t o0, len, a, b;
    bool fill;
} mv_piece;

#define MV_MAXPIECE 8

typedef struct mv_pad {
    int r, es;
    int64_t xd[KN_MAX_RANK], yd[KN_MAX_RANK], xs[KN_MAX_RANK], ys[KN_MAX_RANK];
    mv_piece pc[KN_MAX_RANK][MV_MAXPIECE];
    int npc[KN_MAX_RANK];
    uint64_t fill;
    LLVMValueRef px, py;
    int nbox;
} mv_pad;

/* Source coordinate of output coordinate o on an axis (-1: constant fill). */
static int64_t pad_src(int64_t o, int64_t pb, int64_t d, const char *mode)
{
    int64_t c = o - pb;
    if (c >= 0 && c < d) return c;
    if (!strcmp(mode, "edge")) return c < 0 ? 0 : d - 1;
    if (!strcmp(mode, "wrap")) return ((c % d) + d) % d;
    if (!strcmp(mode, "reflect")) {
        if (d == 1) return 0;
        int64_t p = 2 * (d - 1);
        c = ((c % p) + p) % p;
        return c < d ? c : p - c;
    }
    return -1;
}

/* Splits one axis into affine pieces; false if it needs too many. */
static bool pad_pieces(mv_pad *p, int k, int64_t pb, const char *mode)
{
    int64_t n = p->yd[k], d = p->xd[k];
    int cnt = 0;
    for (int64_t o = 0; o < n;) {
        if (cnt == MV_MAXPIECE) return false;
        mv_piece *pc = &p->pc[k][cnt++];
        int64_t s0 = pad_src(o, pb, d, mode);
        pc->o0 = o;
        pc->a = s0;
        pc->fill = s0 < 0;
        pc->b = 0;
        int64_t len = 1;
        if (!pc->fill && o + 1 < n) {
            int64_t s1 = pad_src(o + 1, pb, d, mode);
            if (s1 >= 0 && s1 - s0 >= -1 && s1 - s0 <= 1) pc->b = s1 - s0;
        }
        while (o + len < n) {
            int64_t s = pad_src(o + len, pb, d, mode);
            if (pc->fill ? s >= 0 : s != s0 + pc->b * len) break;
            len++;
        }
        pc->len = len;
        o += len;
    }
    p->npc[k] = cnt;
    return true;
}

/* Walks the product of the axes' pieces; a fill piece on axis k fills the
 * whole of the remaining axes at once (one box). With emit false it only
 * counts boxes. */
static void pad_walk(kn_cg *cg, mv_pad *p, int k, const mv_piece **sel, bool emit)
{
    if (k == p->r) {
        p->nbox++;
        if (!emit) return;
        mv_box b;
        box_init(&b, p->py, p->px);
        for (int i = 0; i < p->r; i++) {
            b.dst0 += sel[i]->o0 * p->ys[i];
            b.src0 += sel[i]->a * p->xs[i];
            box_add(&b, sel[i]->len, p->ys[i], sel[i]->b * p->xs[i]);
        }
        emit_box(cg, &b, p->es);
        return;
    }
    for (int j = 0; j < p->npc[k]; j++) {
        const mv_piece *pc = &p->pc[k][j];
        if (!pc->fill) {
            sel[k] = pc;
            pad_walk(cg, p, k + 1, sel, emit);
            continue;
        }
        p->nbox++;
        if (!emit) continue;
        mv_box b;
        box_init(&b, p->py, NULL);
        b.fill = p->fill;
        for (int i = 0; i < k; i++) {
            b.dst0 += sel[i]->o0 * p->ys[i];
            box_add(&b, sel[i]->len, p->ys[i], 0);
        }
        b.dst0 += pc->o0 * p->ys[k];
        box_add(&b, pc->len, p->ys[k], 0);
        for (int i = k + 1; i < p->r; i++) box_add(&b, p->yd[i], p->ys[i], 0);
        emit_box(cg, &b, p->es);
    }
}

/* Full per-axis pads (begins then ends) from attributes or constant inputs. */
static int pad_amounts(const kn_node *n, int r, int64_t *pads)
{
    int64_t raw[2 * KN_MAX_RANK], axes[KN_MAX_RANK];
    int cnt, na = r;
    for (int i = 0; i < r; i++) axes[i] = i;
    if (kn_node_opset(n) < 11) {
        if (attr_ints(n, kn_node_attr(n, "pads") ? "pads" : "paddings", raw, 2 * KN_MAX_RANK, &cnt)) return KN_ERR_UNSUPPORTED;
    } else {
        if (const_ints(n, 1, raw, 2 * KN_MAX_RANK, &cnt)) return KN_ERR_UNSUPPORTED;
        if (kn_node_opset(n) >= 18 && kn_node_input(n, 3) && const_ints(n, 3, axes, KN_MAX_RANK, &na))
            return KN_ERR_UNSUPPORTED;
    }
    if (cnt < 0 || na < 0 || cnt != 2 * na) return KN_ERR_UNSUPPORTED;
    memset(pads, 0, sizeof(int64_t) * 2 * KN_MAX_RANK);
    for (int i = 0; i < na; i++) {
        int k = kn_norm_axis(axes[i], r);
        const int64_t lim = (int64_t)1 << 48; /* keeps the sums below from overflowing */
        if (k < 0 || raw[i] < -lim || raw[i] > lim || raw[na + i] < -lim || raw[na + i] > lim) return KN_ERR_UNSUPPORTED;
        pads[k] = raw[i];
        pads[r + k] = raw[na + i];
    }
    return KN_OK;
}

/* The constant to pad with, as the bits of one element of dt (the
 * reference's conversion rules). */
static int pad_fill(const kn_node *n, kn_dtype dt, int es, uint64_t *out)
{
    unsigned char buf[16] = {0};
    const kn_value *cv = kn_node_input(n, 2);
    if (kn_node_opset(n) < 11) {
        kn_store_f64(dt, buf, 0, kn_attr_float(n, "value", 0.0f));
    } else if (cv) {
        const kn_tensor *t = cv->const_data;
        if (!t) return KN_ERR_UNSUPPORTED;
        if (kn_tensor_numel(t) > 0) {
            if (t->dtype == dt) memcpy(buf, t->data, (size_t)es);
            else if (kn_dtype_info(dt)->is_float) kn_store_f64(dt, buf, 0, kn_load_f64(t->dtype, t->data, 0));
            else kn_store_i64(dt, buf, 0, kn_load_i64(t->dtype, t->data, 0));
        }
    }
    uint64_t v = 0;
    memcpy(&v, buf, 8);
    if (es < 8) v &= (1ull << (8 * es)) - 1;
    *out = v;
    return KN_OK;
}

static int lower_pad(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    mv_pad *p = calloc(1, sizeof *p);
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = KN_ERR_UNSUPPORTED;
    const char *mode = kn_attr_string(n, "mode", "constant");
    int64_t pads[2 * KN_MAX_RANK];
    if (mv_check_xy(x, y, &p->es) || y->shape.rank != x->shape.rank) goto out;
    if (strcmp(mode, "constant") && strcmp(mode, "edge") && strcmp(mode, "reflect") && strcmp(mode, "wrap")) goto out;
    p->r = x->shape.rank;
    if (pad_amounts(n, p->r, pads) || pad_fill(n, x->dtype, p->es, &p->fill)) goto out;
    for (int k = 0; k < p->r; k++) {
        p->xd[k] = x->shape.dims[k];
        p->yd[k] = y->shape.dims[k];
        if (p->yd[k] != p->xd[k] + pads[k] + pads[p->r + k]) goto out;
    }
    if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) {
        st = KN_OK;
        goto out;
    }
    /* reflect/edge/wrap of an empty axis is the runtime kernel's error */
    if (strcmp(mode, "constant") && kn_cg_numel(x) == 0) goto out;
    for (int k = 0; k < p->r; k++)
        if (!pad_pieces(p, k, pads[k], mode)) goto out;
    mv_strides(p->r, p->xd, p->xs);
    mv_strides(p->r, p->yd, p->ys);
    const mv_piece *sel[KN_MAX_RANK];
    pad_walk(cg, p, 0, sel, false);
    if (p->nbox > MV_MAXBOX) goto out;
    p->px = kn_cg_ptr(cg, x);
    p->py = kn_cg_ptr(cg, y);
    pad_walk(cg, p, 0, sel, true);
    st = KN_OK;
out:
    free(p);
    return st;
}

/* ---- nearest Resize / Upsample -------------------------------------------------- */

typedef struct mv_resize {
    int coord;   /* 0 half_pixel, 1 half_pixel_symmetric, 2 pytorch_half_pixel, 3 align_corners, 4 asymmetric */
    int nearest; /* 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil, 4 simple (legacy) */
    double scales[KN_MAX_RANK];
} mv_resize;

static int pick(const char *s, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

/* Per-axis scales: from constant sizes (stretch policy) or constant scales. */
static int resize_scales(const kn_node *n, const kn_value *x, bool legacy, mv_resize *p)
{
    int r = x->shape.rank, axes[KN_MAX_RANK], na = r;
    for (int k = 0; k < r; k++) {
        axes[k] = k;
        p->scales[k] = 1.0;
    }
    int64_t raw[KN_MAX_RANK];
    int cnt;
    if (!legacy) {
        if (attr_ints(n, "axes", raw, KN_MAX_RANK, &cnt)) return KN_ERR_UNSUPPORTED;
        if (cnt >= 0) {
            na = cnt;
            for (int i = 0; i < cnt; i++)
                if ((axes[i] = kn_norm_axis(raw[i], r)) < 0) return KN_ERR_UNSUPPORTED;
        }
    }
    const kn_value *sz = legacy ? NULL : kn_node_input(n, 3);
    const kn_value *sc = kn_node_input(n, legacy ? 1 : 2);
    float attr_sc[KN_MAX_RANK];
    kn_tensor at = {0};
    if (legacy && n->op == KN_OP_Upsample && kn_node_opset(n) < 9) {
        const float *f = NULL;
        int c = kn_attr_floats(n, "scales", &f);
        if (c != r) return KN_ERR_UNSUPPORTED;
        memcpy(attr_sc, f, sizeof(float) * (size_t)c);
        at.dtype = KN_F32;
        at.rank = 1;
        at.dims[0] = c;
        at.data = attr_sc;
        sc = NULL;
    }
    const kn_tensor *tsz = sz && sz->const_data && kn_tensor_numel(sz->const_data) > 0 ? sz->const_data : NULL;
    const kn_tensor *tsc = at.data ? &at : sc && sc->const_data && kn_tensor_numel(sc->const_data) > 0 ? sc->const_data : NULL;
    if ((sz && !sz->const_data) || (!tsz && sc && !sc->const_data)) return KN_ERR_UNSUPPORTED;
    if (tsz) {
        /* keep_aspect_ratio_policy: one scale for the listed axes, the
         * smallest (not_larger) or largest (not_smaller), as the reference */
        static const char *const pol[] = {"stretch", "not_larger", "not_smaller"};
        int policy = pick(kn_attr_string(n, "keep_aspect_ratio_policy", "stretch"), pol, 3);
        if (policy < 0 || kn_tensor_numel(tsz) != na) return KN_ERR_UNSUPPORTED;
        double keep = policy == 1 ? INFINITY : 0;
        for (int i = 0; i < na; i++) {
            int64_t in = x->shape.dims[axes[i]];
            if (in <= 0) return KN_ERR_UNSUPPORTED;
            double s = (double)kn_load_i64(tsz->dtype, tsz->data, (size_t)i) / (double)in;
            p->scales[axes[i]] = s;
            keep = policy == 1 ? fmin(keep, s) : fmax(keep, s);
        }
        for (int i = 0; policy && i < na; i++) p->scales[axes[i]] = keep;
    } else if (tsc) {
        if (kn_tensor_numel(tsc) != na || !kn_dtype_info(tsc->dtype)->is_float) return KN_ERR_UNSUPPORTED;
        for (int i = 0; i < na; i++) {
            double s = kn_load_f64(tsc->dtype, tsc->data, (size_t)i);
            if (!(s > 0) || !isfinite(s)) return KN_ERR_UNSUPPORTED;
            p->scales[axes[i]] = s;
        }
    } else {
        return KN_ERR_UNSUPPORTED;
    }
    return KN_OK;
}

/* Input coordinate of output coordinate o (the runtime kernel's formulas). */
static double resize_coord(const mv_resize *p, int k, double o, int64_t in, int64_t out)
{
    double scale = p->scales[k], ow = scale * (double)in;
    switch (p->coord) {
    case 3: return ow == 1 ? 0.0 : o * (double)(in - 1) / (ow - 1);
    case 4: return o / scale;
    case 2: return out <= 1 ? 0.0 : (o + 0.5) / scale - 0.5;
    case 1: {
        double adjustment = (double)out / ow;
        double offset = (double)in / 2 * (1 - adjustment);
        return offset + (o + 0.5) / scale - 0.5;
    }
    default: return (o + 0.5) / scale - 0.5;
    }
}

static int64_t resize_nearest(const mv_resize *p, int k, int64_t o, int64_t in, int64_t out)
{
    double xo = resize_coord(p, k, (double)o, in, out);
    double fl = floor(xo);
    double ratio = xo - fl;
    int64_t xi = (int64_t)fl;
    if (ratio == 0) {
        ratio = 1.0;
        xi -= 1;
    }
    bool up;
    if (ratio == 1.0) up = true;
    else switch (p->nearest) {
        case 1: up = ratio >= 0.5; break;
        case 2: up = false; break;
        case 3: up = true; break;
        case 4: up = p->scales[k] < 1.0; break;
        default: up = ratio > 0.5; break;
        }
    int64_t id = up ? xi + 1 : xi;
    return id < 0 ? 0 : id >= in ? in - 1 : id;
}

/* One output axis of a nearest resize: identity/affine, an integer
 * upsampling (o / f: split into two affine axes), or a constant table. */
static int resize_axis(kn_cg *cg, mv_box *b, const int64_t *map, int64_t out, int64_t ys, int64_t xs)
{
    int64_t step = out > 1 ? map[1] - map[0] : 0;
    bool affine = true;
    for (int64_t o = 1; o < out && affine; o++) affine = map[o] - map[o - 1] == step;
    if (affine) {
        b->src0 += map[0] * xs;
        box_add(b, out, ys, step * xs);
        return KN_OK;
    }
    int64_t f = 1;
    while (f < out && map[f] == map[0]) f++;
    bool rep = out % f == 0;
    for (int64_t o = 0; o < out && rep; o++) rep = map[o] == map[0] + o / f;
    if (rep) {
        b->src0 += map[0] * xs;
        box_add(b, out / f, f * ys, xs);
        box_add(b, f, ys, 0);
        return KN_OK;
    }
    int64_t *off = malloc(sizeof *off * (size_t)out);
    if (!off) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int64_t o = 0; o < out; o++) off[o] = map[o] * xs;
    LLVMValueRef g = const_table(cg, off, out);
    free(off);
    if (!g) return kn_error(KN_ERR_NOMEM, "out of memory");
    mv_axis *a = box_add(b, out, ys, 0);
    a->tbl = g;
    a->tbl_t = cg->t_i64;
    a->mul = 1;
    return KN_OK;
}

static int lower_resize(kn_cg *cg, const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    int es;
    if (mv_check_xy(x, y, &es) || x->shape.rank != y->shape.rank) return KN_ERR_UNSUPPORTED;
    /* the runtime kernel goes through double: 64-bit integers may round */
    if (es == 8 && !kn_dtype_info(x->dtype)->is_float) return KN_ERR_UNSUPPORTED;
    bool legacy = n->op == KN_OP_Upsample || kn_node_opset(n) < 11;
    mv_resize p;
    memset(&p, 0, sizeof p);
    if (strcmp(kn_attr_string(n, "mode", "nearest"), "nearest")) return KN_ERR_UNSUPPORTED;
    if (legacy) {
        p.coord = 4;
        p.nearest = 4;
    } else {
        static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                             "asymmetric"};
        static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
        p.coord = pick(kn_attr_string(n, "coordinate_transformation_mode", "half_pixel"), coords, 5);
        p.nearest = pick(kn_attr_string(n, "nearest_mode", "round_prefer_floor"), nearest, 4);
        if (p.coord < 0 || p.nearest < 0 || kn_attr_int(n, "exclude_outside", 0)) return KN_ERR_UNSUPPORTED;
    }
    int r = x->shape.rank;
    if (resize_scales(n, x, legacy, &p)) return KN_ERR_UNSUPPORTED;
    if (kn_cg_numel(y) == 0 || !mv_stored(cg, y)) return KN_OK; /* nothing to write */
    if (kn_cg_numel(x) == 0) return KN_ERR_UNSUPPORTED;
    int64_t xs[KN_MAX_RANK], ys[KN_MAX_RANK], maxd = 1;
    mv_strides(r, x->shape.dims, xs);
    mv_strides(r, y->shape.dims, ys);
    for (int k = 0; k < r; k++) maxd = y->shape.dims[k] > maxd ? y->shape.dims[k] : maxd;
    int64_t *map = malloc(sizeof *map * (size_t)maxd);
    if (!map) return kn_error(KN_ERR_NOMEM, "out of memory");
    mv_box b;
    box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, x));
    int st = KN_OK;
    for (int k = 0; k < r && !st; k++) {
        int64_t in = x->shape.dims[k], out = y->shape.dims[k];
        for (int64_t o = 0; o < out; o++) map[o] = resize_nearest(&p, k, o, in, out);
        st = resize_axis(cg, &b, map, out, ys[k], xs[k]);
    }
    free(map);
    if (st) return st;
    emit_box(cg, &b, es);
    return KN_OK;
}

/* ---- ScatterElements, ScatterND (no reduction) ------------------------------------ */

/* Common checks: static shapes, no reduction, updates of data's dtype,
 * int32/int64 indices; the output starts as a copy of data. */
static int scatter_begin(const kn_node *n, int *es)
{
    const kn_value *x = kn_node_input(n, 0), *ind = kn_node_input(n, 1), *upd = kn_node_input(n, 2);
    const kn_value *y = n->outputs[0];
    if (mv_check_xy(x, y, es) || !mv_static(ind) || !index_dtype(ind) || !mv_static(upd) || upd->dtype != x->dtype)
        return KN_ERR_UNSUPPORTED;
    if (strcmp(kn_attr_string(n, "reduction", "none"), "none") || kn_cg_numel(x) != kn_cg_numel(y))
        return KN_ERR_UNSUPPORTED;
    return KN_OK;
}

static int lower_scatter_elements(kn_cg *cg, const kn_node *n)
{
    int es;
    if (scatter_begin(n, &es)) return KN_ERR_UNSUPPORTED;
    const kn_value *x = kn_node_input(n, 0), *ind = kn_node_input(n, 1), *upd = kn_node_input(n, 2);
    const kn_value *y = n->outputs[0];
    int r = x->shape.rank;
    int axis = kn_norm_axis(kn_attr_int(n, "axis", 0), r);
    if (r < 1 || axis < 0 || ind->shape.rank != r || upd->shape.rank != r) return KN_ERR_UNSUPPORTED;
    for (int k = 0; k < r; k++)
        if (upd->shape.dims[k] != ind->shape.dims[k] || (k != axis && ind->shape.dims[k] > x->shape.dims[k]))
            return KN_ERR_UNSUPPORTED;
    if (!mv_stored(cg, y)) return KN_OK;
    int64_t ni = kn_cg_numel(ind), ys[KN_MAX_RANK], us[KN_MAX_RANK];
    if (ni == 0) return emit_copy(cg, x, y, es);
    mv_strides(r, y->shape.dims, ys);
    mv_strides(r, upd->shape.dims, us);
    LLVMValueRef pi = kn_cg_ptr(cg, ind);
    LLVMTypeRef it = kn_cg_elem_type(cg, ind->dtype);
    int64_t dim = x->shape.dims[axis];
    /* like Gather: a bad index fails before anything is written */
    LLVMBasicBlockRef done = emit_guard(cg, n, emit_index_check(cg, pi, it, ni, dim), dim);
    emit_copy(cg, x, y, es);
    mv_box b;
    box_init(&b, kn_cg_ptr(cg, y), kn_cg_ptr(cg, upd));
    for (int k = 0; k < r; k++) box_add(&b, upd->shape.dims[k], k == axis ? 0 : ys[k], us[k]);
    b.eidx = pi;
    b.eidx_t = it;
    b.emul = ys[axis];
    b.ewrap = dim;
    b.eidx_dst = true;
    emit_box(cg, &b, es);
    emit_guard_end(cg, done);
    return KN_OK;
}

static int lower_scatter_nd(kn_cg *cg, const kn_node *n)
{
    int es;
    if (scatter_begin(n, &es)) return KN_ERR_UNSUPPORTED;
    const kn_value *x = kn_node_input(n, 0), *ind = kn_node_input(n, 1), *upd = kn_node_input(n, 2);
    const kn_value *y = n->outputs[0];
    int r = x->shape.rank, ri = ind->shape.rank;
    int k = ri >= 1 ? (int)ind->shape.dims[ri - 1] : -1;
    if (ri < 1 || k < 0 || k > r || upd->shape.rank != ri - 1 + r - k) return KN_ERR_UNSUPPORTED;
    for (int i = 0; i < ri - 1; i++)
        if (upd->shape.dims[i] != ind->shape.dims[i]) return KN_ERR_UNSUPPORTED;
    for (int i = k; i < r; i++)
        if (upd->shape.dims[ri - 1 + i - k] != x->shape.dims[i]) return KN_ERR_UNSUPPORTED;
    if (!mv_stored(cg, y)) return KN_OK;
    int64_t nupd = kn_shape_numel(ri - 1, ind->shape.dims), slice = kn_shape_numel(r - k, x->shape.dims + k);
    int64_t ys[KN_MAX_RANK];
    if (nupd == 0 || slice == 0) return emit_copy(cg, x, y, es);
    mv_strides(r, y->shape.dims, ys);
    LLVMValueRef pi = kn_cg_ptr(cg, ind), pu = kn_cg_ptr(cg, upd), py = kn_cg_ptr(cg, y);
    LLVMTypeRef it = kn_cg_elem_type(cg, ind->dtype);
    /* the tuples' j-th components sit k apart: check them as k strided runs */
    LLVMBasicBlockRef done = NULL;
    if (k > 0) {
        LLVMValueRef bad = LLVMConstInt(cg->t_i1, 0, 0);
        for (int j = 0; j < k; j++) {
            LLVMValueRef flag = emit_index_check_strided(cg, pi, it, nupd, k, j, x->shape.dims[j]);
            bad = LLVMBuildOr(cg->b, bad, flag, "");
        }
        done = emit_guard(cg, n, bad, -1);
    }
    emit_copy(cg, x, y, es);
    LLVMTypeRef et = LLVMIntTypeInContext(cg->ctx, (unsigned)(8 * es));
    kn_cg_loop l;
    LLVMValueRef u = kn_cg_loop_begin(cg, &l, nupd, "upd");
    LLVMValueRef off = kn_cg_i64(cg, 0);
    for (int j = 0; j < k; j++) {
        LLVMValueRef at = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, u, kn_cg_i64(cg, k), ""), kn_cg_i64(cg, j), "");
        LLVMValueRef v = mv_norm(cg, LLVMBuildLoad2(cg->b, it, mv_elem_ptr(cg, it, pi, at), ""), it, x->shape.dims[j]);
        off = LLVMBuildAdd(cg->b, off, LLVMBuildMul(cg->b, v, kn_cg_i64(cg, ys[j]), ""), "");
    }
    LLVMValueRef src = mv_elem_ptr(cg, et, pu, LLVMBuildMul(cg->b, u, kn_cg_i64(cg, slice), ""));
    LLVMBuildMemCpy(cg->b, mv_elem_ptr(cg, et, py, off), (unsigned)es, src, (unsigned)es, kn_cg_i64(cg, slice * es));
    kn_cg_loop_end(cg, &l);
    if (done) emit_guard_end(cg, done);
    return KN_OK;
}

const kn_cg_lowering kn_cg_lower_movement[] = {
    {KN_OP_Reshape, lower_copy},
    {KN_OP_Flatten, lower_copy},
    {KN_OP_Squeeze, lower_copy},
    {KN_OP_Unsqueeze, lower_copy},
    {KN_OP_Identity, lower_copy},
    {KN_OP_Dropout, lower_dropout},
    {KN_OP_Transpose, lower_transpose},
    {KN_OP_Concat, lower_concat},
    {KN_OP_Split, lower_split},
    {KN_OP_Slice, lower_slice},
    {KN_OP_Gather, lower_gather},
    {KN_OP_GatherElements, lower_gather_elements},
    {KN_OP_Expand, lower_expand},
    {KN_OP_Tile, lower_tile},
    {KN_OP_Pad, lower_pad},
    {KN_OP_DepthToSpace, lower_space_depth},
    {KN_OP_SpaceToDepth, lower_space_depth},
    {KN_OP_Resize, lower_resize},
    {KN_OP_Upsample, lower_resize},
    {KN_OP_Scatter, lower_scatter_elements},
    {KN_OP_ScatterElements, lower_scatter_elements},
    {KN_OP_ScatterND, lower_scatter_nd},
    {KN_OP_UNKNOWN, NULL},
};
