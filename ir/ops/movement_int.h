/*
 * ir/ops/movement_int.h — private plumbing shared by the movement family's
 * files (movement.c, movement_resize.c). Not a public header.
 *
 * A shape function computes an op's output shape from kn_mv_args, which
 * carries each input's shape and — when known — its value. Inference fills
 * the args from the graph (values = constants), evaluation from the actual
 * tensors, so both run the same code.
 */
#ifndef KILN_IR_OPS_MOVEMENT_INT_H
#define KILN_IR_OPS_MOVEMENT_INT_H

#include "../eval.h"

#define KN_MV_MAXIN 8

typedef struct kn_mv_args {
    const kn_node *n;
    bool eval;                      /* evaluating: every present input is known */
    bool has[KN_MV_MAXIN];          /* input present */
    kn_dtype dt[KN_MV_MAXIN];
    kn_shape shp[KN_MV_MAXIN];      /* rank -1 if unknown or absent */
    const kn_tensor *val[KN_MV_MAXIN]; /* value if known; borrowed */
} kn_mv_args;

typedef int (*kn_mv_shape_fn)(const kn_mv_args *a, kn_shape *out);

void kn_mv_sh_init(kn_shape *s, int rank); /* rank given, all dims unknown */
void kn_mv_args_from_node(const kn_node *n, kn_mv_args *a);
void kn_mv_args_from_eval(const kn_node *n, const kn_tensor *const *in, kn_mv_args *a);
/* Integer input i (≤ max entries) into out; *out_n = -1 if not known. */
int kn_mv_ints(const kn_mv_args *a, int i, const char *what, int64_t *out, int max, int *out_n);
/* Integer-list attribute into out; *out_n = -1 if absent. */
int kn_mv_attr_ints(const kn_node *n, const char *name, int64_t *out, int max, int *out_n);
void kn_mv_set_out(kn_node *n, int i, kn_dtype dt, const kn_shape *s);
int kn_mv_fail(const kn_node *n, int st);
int kn_mv_alloc(const kn_node *n, kn_tensor *out, kn_dtype dt, const kn_shape *s);
int kn_mv_axis(const kn_node *n, int64_t axis, int r, int *out);
int kn_mv_infer(kn_node *n, kn_mv_shape_fn fn);

/* Defined in movement_resize.c. */
int kn_mv_infer_pad(kn_node *n);
int kn_mv_eval_pad(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_infer_resize(kn_node *n);
int kn_mv_eval_resize(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_mv_infer_upsample(kn_node *n);
int kn_mv_eval_upsample(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);

#endif
