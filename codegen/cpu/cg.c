/* Helpers every lowering uses to emit LLVM IR (see cg.h). */
#include "cg.h"

#include <llvm-c/DebugInfo.h>

#include <stdlib.h>
#include <string.h>

void kn_cg_init_types(kn_cg *cg)
{
    LLVMContextRef c = cg->ctx;
    if (!cg->b) cg->b = LLVMCreateBuilderInContext(c);
    cg->t_void = LLVMVoidTypeInContext(c);
    cg->t_i1 = LLVMInt1TypeInContext(c);
    cg->t_i8 = LLVMInt8TypeInContext(c);
    cg->t_i16 = LLVMInt16TypeInContext(c);
    cg->t_i32 = LLVMInt32TypeInContext(c);
    cg->t_i64 = LLVMInt64TypeInContext(c);
    cg->t_half = LLVMHalfTypeInContext(c);
    cg->t_bf16 = LLVMBFloatTypeInContext(c);
    cg->t_float = LLVMFloatTypeInContext(c);
    cg->t_double = LLVMDoubleTypeInContext(c);
    cg->t_ptr = LLVMPointerTypeInContext(c, 0);
}

LLVMTypeRef kn_cg_fn_type(kn_cg *cg)
{
    LLVMTypeRef p[5] = {cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_ptr};
    return LLVMFunctionType(cg->t_i32, p, 5, 0);
}

LLVMValueRef kn_cg_const_global(kn_cg *cg, const char *name, LLVMValueRef init, unsigned align)
{
    LLVMValueRef gv = LLVMAddGlobal(cg->mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMPrivateLinkage);
    if (align) LLVMSetAlignment(gv, align);
    return gv;
}

LLVMValueRef kn_cg_begin_function(kn_cg *cg, const char *name, bool internal)
{
    return kn_cg_begin_function_typed(cg, name, kn_cg_fn_type(cg), internal);
}

LLVMValueRef kn_cg_begin_function_typed(kn_cg *cg, const char *name, LLVMTypeRef type, bool internal)
{
    LLVMValueRef fn = LLVMAddFunction(cg->mod, name, type);
    if (internal) LLVMSetLinkage(fn, LLVMInternalLinkage);
    cg->fn = fn;
    cg->op_fn = NULL; /* a deleted function's address may come back */
    cg->a_exec = LLVMGetParam(fn, 0);
    cg->a_arena = LLVMGetParam(fn, 1);
    cg->a_weights = LLVMGetParam(fn, 2);
    cg->a_inputs = LLVMGetParam(fn, 3);
    cg->a_outputs = LLVMGetParam(fn, 4);
    LLVMPositionBuilderAtEnd(cg->b, LLVMAppendBasicBlockInContext(cg->ctx, fn, "entry"));
    cg->status = LLVMBuildAlloca(cg->b, cg->t_i32, "status");
    LLVMBuildStore(cg->b, kn_cg_i32(cg, 0), cg->status);
    return fn;
}

int64_t kn_cg_numel(const kn_value *v)
{
    return kn_shape_is_static(&v->shape) ? kn_shape_numel(v->shape.rank, v->shape.dims) : -1;
}

LLVMValueRef kn_cg_i64(kn_cg *cg, int64_t v) { return LLVMConstInt(cg->t_i64, (unsigned long long)v, 1); }
LLVMValueRef kn_cg_i32(kn_cg *cg, int32_t v) { return LLVMConstInt(cg->t_i32, (unsigned long long)(int64_t)v, 1); }
LLVMValueRef kn_cg_f32(kn_cg *cg, float v) { return LLVMConstReal(cg->t_float, v); }

static LLVMValueRef base_ptr(kn_cg *cg, const kn_value *v);

LLVMValueRef kn_cg_ptr(kn_cg *cg, const kn_value *v)
{
    LLVMValueRef p = base_ptr(cg, v);
    int64_t rb = cg->row_bytes && v->id >= 0 && v->id < cg->plan->n_where ? cg->row_bytes[v->id] : 0;
    if (!rb) return p;
    LLVMValueRef off = LLVMBuildMul(cg->b, cg->row, kn_cg_i64(cg, rb), "");
    return LLVMBuildGEP2(cg->b, cg->t_i8, p, &off, 1, "");
}

/* Operand k's address in operand mode, loaded once per function in its
 * entry block: a load inside a loop, under a bounds check, could not be
 * hoisted (LLVM does not know the slot array is readable there), and
 * MaxPool's padded windows ran 25% slower. */
static LLVMValueRef operand_ptr(kn_cg *cg, int k)
{
    if (cg->op_fn != cg->fn) {
        memset(cg->op_ptr, 0, sizeof cg->op_ptr);
        cg->op_fn = cg->fn;
    }
    if (cg->op_ptr[k]) return cg->op_ptr[k];
    LLVMBuilderRef b = cg->b, eb = NULL;
    if (LLVMIsAArgument(cg->a_inputs)) { /* else (a chunk function) the slots are loaded where asked */
        LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(cg->fn);
        LLVMValueRef first = LLVMGetFirstInstruction(entry);
        b = eb = LLVMCreateBuilderInContext(cg->ctx);
        if (first) LLVMPositionBuilderBefore(eb, first);
        else LLVMPositionBuilderAtEnd(eb, entry);
    }
    LLVMValueRef idx = kn_cg_i64(cg, k);
    LLVMValueRef slot = LLVMBuildGEP2(b, cg->t_ptr, cg->a_inputs, &idx, 1, "");
    LLVMValueRef p = LLVMBuildLoad2(b, cg->t_ptr, slot, "");
    if (eb) LLVMDisposeBuilder(eb);
    return cg->op_ptr[k] = p;
}

static LLVMValueRef base_ptr(kn_cg *cg, const kn_value *v)
{
    const kn_abi_ref *r = v->id < cg->plan->n_where ? &cg->plan->where[v->id] : NULL;
    if (!r || r->loc < 0) return LLVMConstNull(cg->t_ptr);
    if (cg->ops) {
        for (int k = 0; k < cg->n_ops; k++)
            if (cg->ops[k] == v) return operand_ptr(cg, k);
        cg->op_miss = true; /* the usual address below is wrong in this mode: the body is discarded */
    }
    LLVMValueRef off = kn_cg_i64(cg, r->offset);
    switch (r->loc) {
    case KN_LOC_ARENA: return LLVMBuildGEP2(cg->b, cg->t_i8, cg->a_arena, &off, 1, "");
    case KN_LOC_WEIGHTS: return LLVMBuildGEP2(cg->b, cg->t_i8, cg->a_weights, &off, 1, "");
    case KN_LOC_INPUT:
    case KN_LOC_OUTPUT: {
        LLVMValueRef base = r->loc == KN_LOC_INPUT ? cg->a_inputs : cg->a_outputs;
        LLVMValueRef slot = LLVMBuildGEP2(cg->b, cg->t_ptr, base, &off, 1, "");
        return LLVMBuildLoad2(cg->b, cg->t_ptr, slot, "");
    }
    default: return LLVMConstNull(cg->t_ptr);
    }
}

LLVMTypeRef kn_cg_elem_type(kn_cg *cg, kn_dtype dt)
{
    switch (dt) {
    case KN_F32: return cg->t_float;
    case KN_F64: return cg->t_double;
    case KN_F16: case KN_BF16: case KN_I16: case KN_U16: return cg->t_i16;
    case KN_I8: case KN_U8: case KN_BOOL: return cg->t_i8;
    case KN_I32: case KN_U32: return cg->t_i32;
    case KN_I64: case KN_U64: return cg->t_i64;
    default: return NULL;
    }
}

LLVMTypeRef kn_cg_compute_type(kn_cg *cg, kn_dtype dt)
{
    switch (dt) {
    case KN_F16: case KN_BF16: case KN_F32: return cg->t_float;
    case KN_F64: return cg->t_double;
    default: return kn_cg_elem_type(cg, dt);
    }
}

LLVMValueRef kn_cg_const(kn_cg *cg, kn_dtype dt, double v)
{
    LLVMTypeRef t = kn_cg_compute_type(cg, dt);
    if (kn_dtype_info(dt)->is_float) return LLVMConstReal(t, v);
    if (dt == KN_BOOL) return LLVMConstInt(t, v != 0, 0);
    return LLVMConstInt(t, (unsigned long long)(int64_t)v, kn_dtype_info(dt)->is_signed);
}

/* bf16 ↔ float with integer ops: LLVM 16's x86 backend has no bf16 fptrunc. */
static LLVMValueRef bf16_to_float(kn_cg *cg, LLVMValueRef h)
{
    LLVMValueRef w = LLVMBuildZExt(cg->b, h, cg->t_i32, "");
    w = LLVMBuildShl(cg->b, w, LLVMConstInt(cg->t_i32, 16, 0), "");
    return LLVMBuildBitCast(cg->b, w, cg->t_float, "");
}

static LLVMValueRef float_to_bf16(kn_cg *cg, LLVMValueRef f)
{
    /* round to nearest even; NaN stays a (quiet) NaN */
    LLVMValueRef u = LLVMBuildBitCast(cg->b, f, cg->t_i32, "");
    LLVMValueRef lsb = LLVMBuildAnd(cg->b, LLVMBuildLShr(cg->b, u, LLVMConstInt(cg->t_i32, 16, 0), ""),
                                    LLVMConstInt(cg->t_i32, 1, 0), "");
    LLVMValueRef r = LLVMBuildAdd(cg->b, u, LLVMBuildAdd(cg->b, lsb, LLVMConstInt(cg->t_i32, 0x7fff, 0), ""), "");
    r = LLVMBuildTrunc(cg->b, LLVMBuildLShr(cg->b, r, LLVMConstInt(cg->t_i32, 16, 0), ""), cg->t_i16, "");
    LLVMValueRef nan16 = LLVMBuildTrunc(
        cg->b, LLVMBuildOr(cg->b, LLVMBuildLShr(cg->b, u, LLVMConstInt(cg->t_i32, 16, 0), ""), LLVMConstInt(cg->t_i32, 0x40, 0), ""),
        cg->t_i16, "");
    LLVMValueRef is_nan = LLVMBuildFCmp(cg->b, LLVMRealUNO, f, f, "");
    return LLVMBuildSelect(cg->b, is_nan, nan16, r, "");
}

LLVMValueRef kn_cg_load(kn_cg *cg, kn_dtype dt, LLVMValueRef base, LLVMValueRef idx)
{
    LLVMTypeRef et = kn_cg_elem_type(cg, dt);
    LLVMValueRef p = LLVMBuildGEP2(cg->b, et, base, &idx, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(cg->b, et, p, "");
    if (dt == KN_F16) return LLVMBuildFPExt(cg->b, LLVMBuildBitCast(cg->b, v, cg->t_half, ""), cg->t_float, "");
    if (dt == KN_BF16) return bf16_to_float(cg, v);
    if (dt == KN_BOOL) /* any non-zero byte is true */
        return LLVMBuildZExt(cg->b, LLVMBuildICmp(cg->b, LLVMIntNE, v, LLVMConstInt(cg->t_i8, 0, 0), ""), cg->t_i8, "");
    return v;
}

void kn_cg_store(kn_cg *cg, kn_dtype dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v)
{
    LLVMTypeRef et = kn_cg_elem_type(cg, dt);
    if (dt == KN_F16) v = LLVMBuildBitCast(cg->b, LLVMBuildFPTrunc(cg->b, v, cg->t_half, ""), cg->t_i16, "");
    else if (dt == KN_BF16) v = float_to_bf16(cg, v);
    LLVMValueRef p = LLVMBuildGEP2(cg->b, et, base, &idx, 1, "");
    LLVMBuildStore(cg->b, v, p);
}

LLVMValueRef kn_cg_loop_begin(kn_cg *cg, kn_cg_loop *l, int64_t n, const char *name)
{
    memset(l, 0, sizeof *l);
    l->n = n;
    l->pre = LLVMGetInsertBlock(cg->b);
    l->body = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, name);
    l->exit = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "");
    /* a constant guard keeps `pre` a predecessor of the body (for the phi)
     * even when n <= 0 makes the body dead */
    LLVMBuildCondBr(cg->b, LLVMConstInt(cg->t_i1, n > 0, 0), l->body, l->exit);
    LLVMPositionBuilderAtEnd(cg->b, l->body);
    l->iv = LLVMBuildPhi(cg->b, cg->t_i64, name);
    LLVMValueRef zero = kn_cg_i64(cg, 0);
    LLVMAddIncoming(l->iv, &zero, &l->pre, 1);
    return l->iv;
}

/* Marks the loop whose latch branch is br as never to be unrolled or
 * vectorized. LLVM works from the innermost loop out: once an inner loop
 * of constant trip count is fully unrolled, the loop around it looks
 * innermost, and is unrolled or vectorized across the unrolled copies
 * (interleaved groups of 16 strided accesses, shuffled). A nest of short
 * constant loops (an And broadcasting [48,1] over [64,1,48,16], in units
 * of 6 rows) became 12,000 lines of IR, and the machine scheduler's alias
 * checks, quadratic in a block's memory operations, took 9 s (25 s on a
 * loaded machine) for two elementwise nodes at -O3; a 28-node graph took
 * 23 s. Innermost loops are still unrolled and vectorized, and SLP
 * vectorizes a fully unrolled short inner loop in place. */
static void loop_no_unroll(kn_cg *cg, LLVMValueRef br)
{
    static const char unroll[] = "llvm.loop.unroll.disable", vec[] = "llvm.loop.vectorize.enable";
    LLVMMetadataRef dis = LLVMMDStringInContext2(cg->ctx, unroll, sizeof unroll - 1);
    LLVMMetadataRef vops[2] = {LLVMMDStringInContext2(cg->ctx, vec, sizeof vec - 1),
                               LLVMValueAsMetadata(LLVMConstInt(cg->t_i1, 0, 0))};
    LLVMMetadataRef self = LLVMTemporaryMDNode(cg->ctx, NULL, 0);
    LLVMMetadataRef ops[3] = {self, LLVMMDNodeInContext2(cg->ctx, &dis, 1), LLVMMDNodeInContext2(cg->ctx, vops, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(cg->ctx, ops, 3);
    LLVMMetadataReplaceAllUsesWith(self, id); /* a loop ID refers to itself */
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(cg->ctx, "llvm.loop", 9), LLVMMetadataAsValue(cg->ctx, id));
}

/* Marks an innermost loop (latch branch br): once vectorized, it is not
 * unrolled again. The vectorizer already interleaves up to four vectors per
 * iteration; the unroller then copied the vector body up to 34 times more
 * (the trip count's divisor under its size threshold), which bought nothing
 * in a memory-bound loop and made LLVM's codegen of a random 20-node graph
 * three times slower. A loop that is not vectorized is still unrolled as
 * LLVM sees fit. */
static void loop_no_unroll_once_vectorized(kn_cg *cg, LLVMValueRef br)
{
    static const char follow[] = "llvm.loop.vectorize.followup_vectorized", unroll[] = "llvm.loop.unroll.disable";
    LLVMMetadataRef str = LLVMMDStringInContext2(cg->ctx, unroll, sizeof unroll - 1);
    LLVMMetadataRef dis = LLVMMDNodeInContext2(cg->ctx, &str, 1);
    LLVMMetadataRef fops[2] = {LLVMMDStringInContext2(cg->ctx, follow, sizeof follow - 1), dis};
    LLVMMetadataRef self = LLVMTemporaryMDNode(cg->ctx, NULL, 0);
    LLVMMetadataRef ops[2] = {self, LLVMMDNodeInContext2(cg->ctx, fops, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(cg->ctx, ops, 2);
    LLVMMetadataReplaceAllUsesWith(self, id);
    LLVMSetMetadata(br, LLVMGetMDKindIDInContext(cg->ctx, "llvm.loop", 9), LLVMMetadataAsValue(cg->ctx, id));
}

void kn_cg_loop_end(kn_cg *cg, kn_cg_loop *l)
{
    LLVMValueRef next = LLVMBuildAdd(cg->b, l->iv, kn_cg_i64(cg, 1), "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(cg->b);
    LLVMAddIncoming(l->iv, &next, &latch, 1);
    LLVMValueRef more = LLVMBuildICmp(cg->b, LLVMIntSLT, next, kn_cg_i64(cg, l->n), "");
    LLVMValueRef br = LLVMBuildCondBr(cg->b, more, l->body, l->exit);
    /* more than one block from body to latch: the body holds an inner loop
     * (or a branch), so this is not an innermost loop */
    if (latch != l->body) loop_no_unroll(cg, br);
    else loop_no_unroll_once_vectorized(cg, br);
    LLVMPositionBuilderAtEnd(cg->b, l->exit);
    l->next = next;
}

LLVMValueRef kn_cg_intrinsic(kn_cg *cg, const char *name, LLVMTypeRef t, LLVMValueRef *args, int n)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(cg->mod, id, &t, 1);
    LLVMTypeRef fty = LLVMIntrinsicGetType(cg->ctx, id, &t, 1);
    return LLVMBuildCall2(cg->b, fty, fn, args, (unsigned)n, "");
}

LLVMValueRef kn_cg_libm(kn_cg *cg, const char *fname, LLVMTypeRef t, LLVMValueRef *args, int n)
{
    LLVMTypeRef params[2] = {t, t};
    LLVMTypeRef fty = LLVMFunctionType(t, params, (unsigned)n, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(cg->mod, fname);
    if (!fn) fn = LLVMAddFunction(cg->mod, fname, fty);
    return LLVMBuildCall2(cg->b, fty, fn, args, (unsigned)n, "");
}

void kn_cg_abi_tensor(const kn_value *v, kn_abi_tensor *out)
{
    memset(out, 0, sizeof *out);
    if (!v) {
        out->rank = -1;
        return;
    }
    out->name = v->name;
    out->dtype = v->dtype;
    out->rank = v->shape.rank;
    for (int i = 0; i < v->shape.rank && i < 8; i++) {
        out->dims[i] = v->shape.dims[i];
        out->dim_names[i] = v->shape.sym[i];
    }
    int64_t n = kn_cg_numel(v);
    out->nbytes = n >= 0 ? (int64_t)kn_dtype_nbytes(v->dtype, (size_t)n) : -1;
}

/* Emits `if (st != 0) return st;` and continues in a fresh block. */
static void return_if_failed(kn_cg *cg, LLVMValueRef st)
{
    LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "fail");
    LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "");
    LLVMValueRef bad = LLVMBuildICmp(cg->b, LLVMIntNE, st, kn_cg_i32(cg, 0), "");
    LLVMBuildCondBr(cg->b, bad, fail, cont);
    LLVMPositionBuilderAtEnd(cg->b, fail);
    LLVMBuildRet(cg->b, st);
    LLVMPositionBuilderAtEnd(cg->b, cont);
}

int kn_cg_emit_dnnl(kn_cg *cg, const kn_abi_dnnl *rec, LLVMValueRef src, LLVMValueRef wei, LLVMValueRef bias,
                    LLVMValueRef dst, LLVMValueRef post_src)
{
    kn_meta *m = cg->meta;
    if (m->n_dnnl == cg->cap_dnnl) {
        int cap = cg->cap_dnnl ? cg->cap_dnnl * 2 : 16;
        kn_abi_dnnl *p = realloc(m->dnnl, sizeof *p * (size_t)cap);
        if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
        m->dnnl = p;
        cg->cap_dnnl = cap;
    }
    int index = m->n_dnnl++;
    m->dnnl[index] = *rec;
    /* oneDNN's bf16 kernels: the artifact refuses CPUs without the dot product */
    if (rec->compute == KN_BF16) m->cpu_features |= KN_CPU_AVX512BF16;
    LLVMValueRef null = LLVMConstNull(cg->t_ptr), st;
    if (cg->dnnl_rows_sym1 > 0) { /* the run's rows of a product over packed tokens */
        LLVMTypeRef sp[2] = {cg->t_ptr, cg->t_i32};
        LLVMTypeRef sty = LLVMFunctionType(cg->t_i64, sp, 2, 0);
        LLVMValueRef sfn = LLVMGetNamedFunction(cg->mod, "kn_rt_sym");
        if (!sfn) sfn = LLVMAddFunction(cg->mod, "kn_rt_sym", sty);
        LLVMValueRef sargs[2] = {cg->a_exec, kn_cg_i32(cg, cg->dnnl_rows_sym1 - 1)};
        LLVMValueRef rows = LLVMBuildCall2(cg->b, sty, sfn, sargs, 2, "rows");
        if (cg->row) rows = LLVMBuildSub(cg->b, rows, cg->row, "rows_left"); /* a block's rows from its first */
        LLVMTypeRef params[8] = {cg->t_ptr, cg->t_i32, cg->t_i64, cg->t_ptr,
                                 cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_ptr};
        LLVMTypeRef fty = LLVMFunctionType(cg->t_i32, params, 8, 0);
        LLVMValueRef fn = LLVMGetNamedFunction(cg->mod, "kn_rt_dnnl_exec_rows");
        if (!fn) fn = LLVMAddFunction(cg->mod, "kn_rt_dnnl_exec_rows", fty);
        LLVMValueRef args[8] = {cg->a_exec, kn_cg_i32(cg, index), rows, src ? src : null, wei ? wei : null,
                                bias ? bias : null, dst ? dst : null, post_src ? post_src : null};
        st = LLVMBuildCall2(cg->b, fty, fn, args, 8, "");
    } else {
        LLVMTypeRef params[7] = {cg->t_ptr, cg->t_i32, cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_ptr};
        LLVMTypeRef fty = LLVMFunctionType(cg->t_i32, params, 7, 0);
        LLVMValueRef fn = LLVMGetNamedFunction(cg->mod, "kn_rt_dnnl_exec");
        if (!fn) fn = LLVMAddFunction(cg->mod, "kn_rt_dnnl_exec", fty);
        LLVMValueRef args[7] = {cg->a_exec, kn_cg_i32(cg, index), src ? src : null, wei ? wei : null,
                                bias ? bias : null, dst ? dst : null, post_src ? post_src : null};
        st = LLVMBuildCall2(cg->b, fty, fn, args, 7, "");
    }
    return_if_failed(cg, st);
    return KN_OK;
}
