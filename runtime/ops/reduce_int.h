/*
 * runtime/ops/reduce_int.h — private to the 'reduce' family: the attribute
 * and shape rules that both its execution (runtime/ops/reduce.c) and its
 * type/shape inference (ir/ops/reduce.c, through a descriptor the IR builds
 * per node) and code generation (codegen/cpu/lower_reduce.c, par.c) need, so
 * each rule exists once. Errors name the node through kn_op_error().
 */
#ifndef KILN_RUNTIME_REDUCE_INT_H
#define KILN_RUNTIME_REDUCE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "opdesc.h"

/* Most outputs an op of this family has (TopK). */
#define KN_RD_MAX_OUTPUTS 2
/* Most axes a Reduce* node may list (repeats allowed). */
#define KN_RD_MAX_AXES (KN_MAX_RANK * 4)

/* Reads up to max integers of an integer tensor into out; returns the count,
 * or -1 with an error naming `what` if it is not integer or too long. */
int kn_rd_read_ints(const kn_opdesc *d, const kn_tensor *t, const char *what, int64_t *out, int max);

/* ---- Reduce*, ArgMax/ArgMin, TopK ---- */

/* Axes of a Reduce* node from attribute 'axes' (older opsets) or from input 1
 * (axes_in, when have_input). Returns the count, -1 on error, or -2 when the
 * input is given but its value is not known (inference only). */
int kn_rd_reduce_axes(const kn_opdesc *d, const kn_tensor *axes_in, bool have_input, int64_t *axes);
/* Turns an axes list into a bit mask over rank axes. An empty list reduces
 * every axis, or none with noop_with_empty_axes. */
int kn_rd_axes_mask(const kn_opdesc *d, const int64_t *axes, int count, int rank, uint32_t *out);
/* The reduced shape: axes in mask become 1 (keepdims) or vanish. Fills
 * out_dims and, when out_src is not NULL, the input axis each output dim
 * comes from (-1 for a kept reduced axis); returns the output rank. */
int kn_rd_reduced_dims(int rank, const int64_t *dims, uint32_t mask, bool keepdims, int64_t *out_dims,
                       int *out_src);
/* k of TopK from attribute 'k' (opset 1) or input 1 (kt, when have_input);
 * -1 on a bad value (error set when kt was read), -2 if not known yet. */
int64_t kn_rd_topk_k(const kn_opdesc *d, const kn_tensor *kt, bool have_input);

#endif
