/*
 * runtime/ops/movement_int.h — private to the 'movement' family: the shape
 * rules that both its execution (runtime/ops/movement.c, movement_resize.c)
 * and its type/shape inference (ir/ops/movement.c, through a descriptor the
 * IR builds per node) use, so each rule exists once.
 *
 * A shape function computes an op's output shape from kn_mv_args, which
 * carries each input's shape and — when known — its value. Inference fills
 * the args from the graph (values = constants, dims may be unknown (-1) or
 * carry a symbol), execution from the actual tensors. Errors name the node
 * through kn_op_error().
 */
#ifndef KILN_RUNTIME_MOVEMENT_INT_H
#define KILN_RUNTIME_MOVEMENT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "opdesc.h"

#define KN_MV_MAXIN 8

/* A shape whose rank (-1) or dims (-1) may be unknown. sym[i] is an opaque
 * label of dim i (the IR's symbolic dim name) that the rules carry through
 * unchanged where a dim is copied; NULL elsewhere. The runtime never reads it. */
typedef struct kn_mv_shape {
    int rank;
    int64_t dims[KN_MAX_RANK];
    const char *sym[KN_MAX_RANK];
} kn_mv_shape;

typedef struct kn_mv_args {
    const kn_opdesc *d;
    bool has[KN_MV_MAXIN];             /* input present */
    kn_dtype dt[KN_MV_MAXIN];
    kn_mv_shape shp[KN_MV_MAXIN];      /* rank -1 if unknown or absent */
    const kn_tensor *val[KN_MV_MAXIN]; /* value if known; borrowed */
} kn_mv_args;

typedef int (*kn_mv_shape_fn)(const kn_mv_args *a, kn_mv_shape *out);

/* ---- for inference (ir/ops/movement.c) ---- */

/* s gets rank `rank` (may be -1) with every dim unknown. */
void kn_mv_sh_init(kn_mv_shape *s, int rank);
/* The rule giving output 0's shape (its dtype is input 0's) of op; NULL for
 * Concat, Split and Dropout, which have the functions below. */
kn_mv_shape_fn kn_mv_shape_of(kn_op op);
/* Concat's output shape from its cnt inputs' shapes (NULL entries: absent). */
int kn_mv_concat_shape(const kn_opdesc *d, int cnt, const kn_mv_shape *const *shapes, kn_mv_shape *o);
/* Split: the normalized axis (-1 when input 0's rank is unknown, sizes then
 * untouched) and, otherwise, the size of each of d->n_outputs pieces (-1 where
 * unknown). */
int kn_mv_split_plan(const kn_mv_args *a, int *axis, int64_t *sizes);
/* Dropout: checks ratio/training_mode; the mask's dtype for input dtype x. */
int kn_mv_dropout_check(const kn_mv_args *a);
kn_dtype kn_mv_dropout_mask_dtype(const kn_opdesc *d, kn_dtype x);

/* ---- shared by movement.c and movement_resize.c ---- */

/* Input i, or NULL when omitted or past the n_inputs entries in[] holds. */
static inline const kn_tensor *kn_mv_in(const kn_opdesc *d, const kn_tensor *const *in, int i)
{
    return i < d->n_inputs ? in[i] : NULL;
}

void kn_mv_args_from_tensors(const kn_opdesc *d, const kn_tensor *const *in, kn_mv_args *a);
/* Integer input i (≤ max entries) into out; *out_n = -1 if not known. */
int kn_mv_ints(const kn_mv_args *a, int i, const char *what, int64_t *out, int max, int *out_n);
/* Integer-list attribute into out; *out_n = -1 if absent. */
int kn_mv_attr_ints(const kn_opdesc *d, const char *name, int64_t *out, int max, int *out_n);
int kn_mv_fail(const kn_opdesc *d, int st);
int kn_mv_alloc(const kn_opdesc *d, kn_tensor *out, kn_dtype dt, const kn_mv_shape *s);
/* The same for a kernel that writes every element: not zero-filled where
 * the output goes to the memory plan's arena (kn_op_alloc_output). */
int kn_mv_alloc_written(const kn_opdesc *d, kn_tensor *out, kn_dtype dt, const kn_mv_shape *s);
/* One axis of Slice over a dim of size dv: start and end clamped as ONNX
 * does for the step's sign; the first index in *out_start, the element
 * count returned. Shared by the runtime kernel and the generated Slice. */
int64_t kn_mv_slice_axis(int64_t dv, int64_t s, int64_t e, int64_t step, int64_t *out_start);
/* Eval preamble: checks input 0, computes (fn) and allocates output 0. */
int kn_mv_exec_begin(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out, kn_mv_shape_fn fn,
                     kn_mv_args *a);
/* o->dims[oi] (and its symbol) from s's dim si. */
void kn_mv_sh_copy_dim(kn_mv_shape *o, int oi, const kn_mv_shape *s, int si);

/* Defined in movement_gather.c. */
int kn_mv_shape_gather(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_shape_gather_elements(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_shape_gather_nd(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_shape_scatter(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_exec_gather(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_exec_gather_elements(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_exec_gather_nd(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_exec_scatter_elements(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_exec_scatter_nd(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);

/* Defined in movement_expand.c. */
int kn_mv_shape_expand(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_exec_expand(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_shape_tile(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_exec_tile(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_shape_depth_to_space(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_shape_space_to_depth(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_exec_depth_to_space(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_exec_space_to_depth(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);

/* Defined in movement_resize.c. */
int kn_mv_shape_pad(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_shape_resize(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_shape_upsample(const kn_mv_args *a, kn_mv_shape *o);
int kn_mv_exec_pad(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_exec_resize(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_exec_upsample(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);

#endif
