/*
 * codegen/cpu/dyn.h — dynamic dims in compiled artifacts (`kiln compile
 * --max NAME=N`), private to the CPU compiler driver.
 *
 * The model is compiled at every dynamic dim's maximum; the same model
 * inferred with one dim at its minimum and the next value (kn_compile_sym
 * .probe; with an alignment A the symbol n is dim / A) shows how each
 * value's dims follow it. Every dim must be affine in at most one symbol,
 * a*n + b (checked again at the maximum); anything else is refused, naming
 * the value and the symbol. Folded constants whose data differs between the
 * probes (Shape of a dynamic tensor, what is computed from it) are computed
 * at run time instead.
 *
 * Code for a node with dynamic operands comes in one of two forms:
 *   - rows: every dynamic operand has the symbol in one dim only, its row
 *     dim (size a*n), with only dims of size 1 before it ([batch, ...],
 *     [1, seq, hidden]): its bytes are n equal blocks. When the op is also
 *     independent along that dim, the node's usual lowering is emitted for
 *     one row (n = 1) into a function taking the row index, and the node
 *     function calls it n times; kn_cg_ptr advances each dynamic operand by
 *     its bytes per row, the others stay put (oneDNN primitives are then
 *     created once for one row);
 *   - a 2-D Conv/FusedConv/MaxPool/AveragePool that cannot run in rows:
 *     oneDNN at the run's shape (kn_rt_dynconv_exec, compile.c);
 *   - otherwise the node's runtime kernel, which sees the run-time shapes.
 *
 *     kn_dyn d;
 *     kn_dyn_analyze(g, opts, &d);            // after folding every probe
 *     if (kn_dyn_node_is_dynamic(&d, n)) {
 *         int sym = kn_dyn_row_sym(&d, n);    // -1: runtime kernel
 *         ... kn_dyn_emit_rows(cg, &d, n, sym, lower, "node_7") ...
 *     }
 *     kn_dyn_free(&d);
 */
#ifndef KILN_CODEGEN_CPU_DYN_H
#define KILN_CODEGEN_CPU_DYN_H

#include "cg.h"

typedef struct kn_dyn_value {
    int32_t sym[8]; /* 0: fixed; k > 0: affine in symbol k-1 */
    int64_t a[8];   /* the symbol's coefficient */
} kn_dyn_value;

typedef struct kn_dyn {
    int n_syms;
    const kn_compile_sym *syms; /* the options' symbols, then the data's (own) */
    kn_compile_sym own[KN_MAX_SYMS];
    kn_dyn_value *v; /* by value id; NULL without dynamic dims */
    int n_values;
} kn_dyn;

/* Compares the main graph g (folded, at the maxima) with the probes in o
 * (folded the same way), fills *out and un-folds the constants of g whose
 * data follows a symbol. Values marked KN_VALUE_TOKEN_ROWS (passes/
 * pack_tokens.c) follow one more symbol, "kiln.packed_tokens", in dim 1, set at run
 * time by the data (kn_abi_sym.from_data). Without symbols *out is empty
 * and nothing happens. */
int kn_dyn_analyze(kn_graph *g, const kn_compile_opts *o, kn_dyn *out);
void kn_dyn_free(kn_dyn *d);

/* True if a dim of v (or of an operand of n) follows a symbol. */
bool kn_dyn_value_is_dynamic(const kn_dyn *d, const kn_value *v);
bool kn_dyn_node_is_dynamic(const kn_dyn *d, const kn_node *n);
/* Copies v's dim symbols and coefficients into t (filled by kn_cg_abi_tensor). */
void kn_dyn_fill_abi(const kn_dyn *d, const kn_value *v, kn_abi_tensor *t);

/* The symbol n may be emitted in rows for (see above), or -1. */
int kn_dyn_row_sym(const kn_dyn *d, const kn_node *n);
/* Emits node function `fname` for n as `lower` for one row in a loop over
 * the rows of symbol sym. KN_ERR_UNSUPPORTED (nothing left behind) if the
 * lowering declines; *out_fn: the node function. */
int kn_dyn_emit_rows(kn_cg *cg, const kn_dyn *d, const kn_node *n, int sym, kn_cg_lower_fn lower, const char *fname,
                     LLVMValueRef *out_fn);
/* Ops that only reinterpret their input's bytes (Identity, Reshape, ...):
 * a copy of the bytes in this run into the current node function.
 * KN_ERR_UNSUPPORTED (nothing emitted) for any other node. */
int kn_dyn_emit_copy(kn_cg *cg, const kn_dyn *d, const kn_node *n);
/* v's bytes in this run, computed in the current function (v may be dynamic). */
LLVMValueRef kn_dyn_nbytes(kn_cg *cg, const kn_dyn *d, const kn_value *v);

#endif
