/*
 * runtime/src/fastops.h — f32 fast paths of runtime kernels in compiled
 * artifacts (private to libkiln_rt; fastops.c). runtime/ops calls them
 * first with the node's session (kn_opdesc.sess, NULL in the reference
 * evaluator, which then never takes them); KN_ERR_UNSUPPORTED with nothing
 * written and no message means the caller runs the reference kernel.
 */
#ifndef KILN_RT_FASTOPS_H
#define KILN_RT_FASTOPS_H

#include <stdint.h>

#include <kiln/tensor.h>

#include "k_elementwise.h"
#include "k_movement.h"
#include "opdesc.h"

/* y = Sigmoid(x), f32, y allocated with x's shape. */
int kn_fast_sigmoid(kn_op_session *os, const kn_tensor *x, kn_tensor *y);
/* y = Softmax(x) over `mid` elements `inner` apart, in `outer` slices
 * (opset 13's axis; the legacy flattened form is inner 1), f32. */
int kn_fast_softmax(kn_op_session *os, const kn_tensor *x, int64_t outer, int64_t mid, int64_t inner, kn_tensor *y);
/* y = a (op) b for Add, Sub, Mul and Div of f32 tensors of y's shape, b
 * that or a single value. */
int kn_fast_binary(kn_op_session *os, kn_binary_op op, const kn_tensor *a, const kn_tensor *b, kn_tensor *y);
/* y = Transpose(x, perm) where perm keeps the innermost dim: its runs
 * copied whole; any dtype of fixed size. */
int kn_fast_transpose(kn_op_session *os, const kn_tensor *x, const int *perm, kn_tensor *y);
/* out = Concat(xs, axis), out allocated; any dtype of fixed size. */
int kn_fast_concat(kn_op_session *os, int n, const kn_tensor *const *xs, int axis, kn_tensor *out);
/* out = the piece of x from `start` along axis (out->dims[axis] long: a
 * Split's output), out allocated; any dtype of fixed size. */
int kn_fast_split(kn_op_session *os, const kn_tensor *x, int axis, int64_t start, kn_tensor *out);
/* out = Resize(x) of 4-D f32 images whose leading axes stay (scales 1):
 * the reference kernel on groups of image planes, one group per unit of
 * the session's threads. */
int kn_fast_resize(kn_op_session *os, const kn_tensor *x, const kn_resize_params *p, kn_tensor *out);

#endif
