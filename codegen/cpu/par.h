/*
 * codegen/cpu/par.h — nodes whose generated loop nest runs on the session's
 * threads, private to the CPU compiler driver.
 *
 * A node with enough work whose op is independent along the first dim of
 * its output of size > 1 (its split dim: channels of [1, C, H, W], tokens of
 * [1, T, D], heads of [1, H, T, T]; never a reduced or normalized dim) is
 * emitted in row mode (rows.c) as
 *
 *     unit(ex, arena, weights, in, out, row) the lowering for rows [row, row+G)
 *     tail(ex, arena, weights, in, out, row) the same for the last R mod G rows
 *     chunk(args, lo, hi)                    units lo..hi-1 (row = u*G), in order
 *     node(ex, arena, weights, in, out)      kn_rt_parallel_for(ex, chunk, args, units)
 *
 * G = ceil(R / units) rows (R: the split dim's size; at most 256 units, of
 * at least 4096 elements of work each) and the units are fixed at compile
 * time, so each output
 * element is computed by the same code whatever the thread count: results
 * are bitwise the same at 1, 2 or 16 threads. Which operands are cut into
 * rows, and along which of their dims, is decided per op (par.c); every
 * output is cut, and operands that are not (broadcast operands, weights,
 * indices, scale and bias) are read whole by every unit.
 */
#ifndef KILN_CODEGEN_CPU_PAR_H
#define KILN_CODEGEN_CPU_PAR_H

#include "cg.h"

/* Elements of work (the largest operand) below which a node stays on one
 * thread: a parallel loop costs a few microseconds to fork and join. */
#define KN_PAR_MIN_WORK 32768

/* Emits node function `fname` for n (static shapes, lowering `lower`) as a
 * parallel loop when n qualifies. KN_ERR_UNSUPPORTED, with nothing left
 * behind, when it does not or the lowering declines; *out_fn: the node
 * function. */
int kn_par_emit(kn_cg *cg, const kn_node *n, kn_cg_lower_fn lower, const char *fname, LLVMValueRef *out_fn);

#endif
