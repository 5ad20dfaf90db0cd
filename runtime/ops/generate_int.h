/*
 * runtime/ops/generate_int.h — private to the 'generate' family: the
 * attribute and shape rules that both its execution (runtime/ops/generate.c)
 * and its type/shape inference (ir/ops/generate.c, through a descriptor the
 * IR builds per node) need, so each rule exists once. Errors name the node
 * through kn_op_error().
 */
#ifndef KILN_RUNTIME_GENERATE_INT_H
#define KILN_RUNTIME_GENERATE_INT_H

#include <stdint.h>

#include "opdesc.h"

/* The [start, end) window of Shape (opset 15), clamped to [0, rank]. */
void kn_gen_shape_window(const kn_opdesc *d, int rank, int64_t *out_start, int64_t *out_end);
/* ConstantOfShape's 'value' tensor; NULL if absent (zeros of f32). */
const kn_tensor *kn_gen_cos_value(const kn_opdesc *d);
/* Reads a shape tensor (1-D integers, each >= 0) into dims (KN_MAX_RANK
 * room); returns its length or -1 with an error. */
int kn_gen_read_shape(const kn_opdesc *d, const kn_tensor *t, int64_t *dims);
/* Element count of Range(start, limit, delta) = in[0..2]. */
int kn_gen_range_count(const kn_opdesc *d, const kn_tensor *const *in, int64_t *out_n);
/* EyeLike's output dtype: attribute 'dtype', else the input's. */
kn_dtype kn_gen_eyelike_dtype(const kn_opdesc *d, kn_dtype in_dt);

#endif
