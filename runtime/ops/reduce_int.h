/*
 * runtime/ops/reduce_int.h — private to the 'reduce' family: the attribute
 * and shape rules that both its execution (runtime/ops/reduce.c,
 * runtime/ops/reduce_gen.c) and its type/shape inference (ir/ops/reduce.c,
 * ir/ops/reduce_gen.c, through a descriptor the IR builds per node) need, so
 * each rule exists once. Errors name the node through kn_op_error().
 */
#ifndef KILN_RUNTIME_REDUCE_INT_H
#define KILN_RUNTIME_REDUCE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "opdesc.h"

/* Most outputs an op of this family has (Unique). */
#define KN_RD_MAX_OUTPUTS 4
/* Most axes a Reduce* node may list (repeats allowed). */
#define KN_RD_MAX_AXES (KN_MAX_RANK * 4)

/* ---- shared by reduce.c and reduce_gen.c ---- */

/* Reads up to max integers of an integer tensor into out; returns the count,
 * or -1 with an error naming `what` if it is not integer or too long. */
int kn_rd_read_ints(const kn_opdesc *d, const kn_tensor *t, const char *what, int64_t *out, int max);
/* The integer value of a one-element tensor (a float one is truncated). */
int kn_rd_scalar_int(const kn_opdesc *d, const kn_tensor *t, const char *what, int64_t *out);
/* Normalizes attribute-given axis for rank into *out; fails naming it. */
int kn_rd_axis(const kn_opdesc *d, int64_t axis, int rank, int *out);

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

/* ---- generator and shape-info ops (reduce_gen.c) ---- */

/* The [start, end) window of Shape (opset 15), clamped to [0, rank]. */
void kn_rd_shape_window(const kn_opdesc *d, int rank, int64_t *out_start, int64_t *out_end);
/* ConstantOfShape's 'value' tensor; NULL if absent (zeros of f32). */
const kn_tensor *kn_rd_cos_value(const kn_opdesc *d);
/* Reads a shape tensor (1-D integers, each >= 0) into dims (KN_MAX_RANK
 * room); returns its length or -1 with an error. */
int kn_rd_read_shape(const kn_opdesc *d, const kn_tensor *t, int64_t *dims);
/* Element count of Range(start, limit, delta) = in[0..2]. */
int kn_rd_range_count(const kn_opdesc *d, const kn_tensor *const *in, int64_t *out_n);
/* EyeLike's output dtype: attribute 'dtype', else the input's. */
kn_dtype kn_rd_eyelike_dtype(const kn_opdesc *d, kn_dtype in_dt);
/* The optional 'axis' of Compress and Unique, normalized: -1 when absent
 * (flatten), -2 on error. rank < 0 (unknown) accepts any axis. */
int kn_rd_opt_axis(const kn_opdesc *d, int rank);

/* Exec functions of reduce_gen.c, listed in reduce.c's kn_exec_reduce. */
int kn_rd_exec_shape(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_size(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_constantofshape(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_range(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_eyelike(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_trilu(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_onehot(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_nonzero(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_compress(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_rd_exec_unique(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);

#endif
