/*
 * runtime/ops/elementwise_int.h — private to the 'elementwise' family: the
 * dtype classes and attribute decoding that both its execution
 * (runtime/ops/elementwise.c) and its type/shape inference
 * (ir/ops/elementwise.c, through a descriptor the IR builds per node) need, so
 * each rule exists once. Errors name the node through kn_op_error().
 */
#ifndef KILN_RUNTIME_ELEMENTWISE_INT_H
#define KILN_RUNTIME_ELEMENTWISE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "k_elementwise.h"
#include "opdesc.h"

/* Classes of dtypes an op accepts. */
typedef enum kn_ew_ty {
    KN_EW_NUM,   /* every float and integer type */
    KN_EW_FLOAT, /* f16, bf16, f32, f64 */
    KN_EW_INT,   /* integers */
    KN_EW_UINT,  /* unsigned integers */
    KN_EW_BOOL,
    KN_EW_ALL,   /* numeric and bool */
} kn_ew_ty;

/* Checks that input i's dtype dt is of class ty (KN_DT_UNDEFINED passes: the
 * type is not known yet during inference). */
int kn_ew_check_ty(const kn_opdesc *d, int i, kn_dtype dt, kn_ew_ty ty);

/* Binary and variadic ops: the kernel op and the accepted dtypes. */
typedef struct kn_ew_bin {
    kn_op op;
    kn_binary_op k;
    kn_ew_ty ty;
} kn_ew_bin;

/* The entry of op; NULL if op is not binary or variadic. */
const kn_ew_bin *kn_ew_bin_find(kn_op op);
/* The kernel op of a binary node, with the attributes that pick a variant
 * (Mod's fmod, BitShift's direction). */
int kn_ew_bin_kop(const kn_opdesc *d, const kn_ew_bin *b, kn_binary_op *out);
/* Before opset 7, B broadcasts only with broadcast=1, aligned at `axis`.
 * When that applies, returns true with B's dims padded with trailing 1s in
 * out_rank/out_dims (numpy broadcasting does the rest); false when numpy rules
 * apply as they are, or on error (*st set). */
bool kn_ew_legacy_bcast(const kn_opdesc *d, int rank_a, int rank_b, const int64_t *dims_b, int *out_rank,
                        int64_t *out_dims, int *st);

/* Unary ops: the kernel op and the accepted dtypes. */
typedef struct kn_ew_un {
    kn_op op;
    kn_unary_op k;
    kn_ew_ty ty;
} kn_ew_un;

/* The entry of op; NULL if op is not unary. */
const kn_ew_un *kn_ew_un_find(kn_op op);
/* The node's attributes as kernel parameters (ONNX defaults); *k may change
 * with an attribute (Gelu's approximate). */
int kn_ew_un_params(const kn_opdesc *d, const kn_ew_un *u, kn_unary_op *k, kn_unary_params *p);

/* The target dtype of Cast (attribute 'to', a name before opset 6) or
 * CastLike (`like`, which may be KN_DT_UNDEFINED during inference). */
int kn_ew_cast_target(const kn_opdesc *d, kn_dtype like, kn_dtype *out);
/* Fails if kiln cannot cast from dt (UNDEFINED passes). */
int kn_ew_check_cast_source(const kn_opdesc *d, kn_dtype dt);

#endif
