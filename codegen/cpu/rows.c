/*
 * codegen/cpu/rows.c — row mode: a node's lowering emitted for a block of
 * rows of its operands, in a function that takes the block's index (cg.h).
 * Dynamic dims (dyn.c) loop over the rows of this run; parallel nodes
 * (par.c) hand contiguous ranges of blocks to the session's threads.
 */
#include <stdlib.h>

#include "cg.h"

bool kn_cg_rows_add(kn_cg_rows *r, kn_value *v, int dim, int64_t per_row)
{
    for (int j = 0; j < r->n; j++)
        if (r->vals[j] == v) return r->dim[j] == dim && r->per_row[j] == per_row;
    if (r->n == KN_CG_ROWS_MAX) return false;
    r->vals[r->n] = v;
    r->dim[r->n] = dim;
    r->per_row[r->n++] = per_row;
    return true;
}

/* The row function: the node's signature plus i64 row; made current like
 * kn_cg_begin_function. */
static LLVMValueRef begin_row_function(kn_cg *cg, const char *name)
{
    LLVMTypeRef params[6] = {cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_ptr, cg->t_i64};
    LLVMValueRef fn = kn_cg_begin_function_typed(cg, name, LLVMFunctionType(cg->t_i32, params, 6, 0), true);
    cg->row = LLVMGetParam(fn, 5);
    return fn;
}

/* Gives every operand in r its shape for `rows` rows and records its bytes
 * per row in row_bytes; saved[] keeps the dims (rows_restore). */
static void rows_enter(const kn_cg_rows *r, int64_t rows, int64_t *row_bytes, int64_t *saved)
{
    for (int j = 0; j < r->n; j++) {
        kn_value *v = r->vals[j];
        saved[j] = v->shape.dims[r->dim[j]];
        v->shape.dims[r->dim[j]] = r->per_row[j];
        row_bytes[v->id] = (int64_t)kn_dtype_nbytes(v->dtype, (size_t)kn_cg_numel(v));
        v->shape.dims[r->dim[j]] = r->per_row[j] * rows;
    }
}

static void rows_restore(const kn_cg_rows *r, int64_t *row_bytes, const int64_t *saved)
{
    for (int j = 0; j < r->n; j++) {
        r->vals[j]->shape.dims[r->dim[j]] = saved[j];
        row_bytes[r->vals[j]->id] = 0;
    }
}

LLVMValueRef kn_cg_emit_row_fn(kn_cg *cg, const kn_node *n, const kn_cg_rows *r, int64_t rows,
                               kn_cg_lower_fn lower, const char *name, int *out_st)
{
    int64_t *row_bytes = calloc((size_t)cg->plan->n_where + 1, sizeof *row_bytes);
    if (!row_bytes) {
        *out_st = kn_error(KN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int64_t saved[KN_CG_ROWS_MAX];
    LLVMValueRef fn = begin_row_function(cg, name);
    rows_enter(r, rows, row_bytes, saved);
    cg->row_bytes = row_bytes;
    int st = lower(cg, n);
    cg->row_bytes = NULL;
    cg->row = NULL;
    rows_restore(r, row_bytes, saved);
    free(row_bytes);
    *out_st = st;
    if (st) {
        LLVMDeleteFunction(fn);
        return NULL;
    }
    if (!LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(cg->b)))
        LLVMBuildRet(cg->b, LLVMBuildLoad2(cg->b, cg->t_i32, cg->status, ""));
    kn_cg_tag_aliases(cg, fn, n);
    return fn;
}

LLVMValueRef kn_cg_emit_row_loop(kn_cg *cg, LLVMValueRef n, LLVMValueRef start, int64_t step, LLVMValueRef fn)
{
    LLVMTypeRef fty = LLVMGlobalGetValueType(fn);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(cg->b);
    LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows_body");
    LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows_fail");
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, cg->fn, "rows_done");
    LLVMBuildBr(cg->b, head);
    LLVMPositionBuilderAtEnd(cg->b, head);
    LLVMValueRef row = LLVMBuildPhi(cg->b, cg->t_i64, "row");
    LLVMValueRef next = LLVMBuildAdd(cg->b, row, kn_cg_i64(cg, step), "");
    LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntSLE, next, n, ""), body, done);
    LLVMPositionBuilderAtEnd(cg->b, body);
    LLVMValueRef args[6] = {cg->a_exec, cg->a_arena, cg->a_weights, cg->a_inputs, cg->a_outputs, row};
    LLVMValueRef st = LLVMBuildCall2(cg->b, fty, fn, args, 6, "");
    LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntNE, st, kn_cg_i32(cg, 0), ""), fail, head);
    LLVMValueRef in_vals[2] = {start, next};
    LLVMBasicBlockRef in_blocks[2] = {pre, body};
    LLVMAddIncoming(row, in_vals, in_blocks, 2);
    LLVMPositionBuilderAtEnd(cg->b, fail);
    LLVMBuildRet(cg->b, st);
    LLVMPositionBuilderAtEnd(cg->b, done);
    return row;
}

