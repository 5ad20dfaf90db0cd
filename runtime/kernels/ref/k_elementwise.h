/*
 * k_elementwise.h — plain C reference kernels for elementwise ops: binary
 * arithmetic, logic and comparisons with numpy broadcasting, unary math and
 * activations, Clip, Where and Cast.
 *
 * Kernels take kn_tensor and plain parameters (no IR). The caller allocates
 * every output with its final dtype and shape (kn_k_broadcast_alloc() does
 * that for the broadcasting ops); a kernel checks that shapes and dtypes
 * agree and fills the data. Floating types compute in double and are stored
 * with round-to-nearest-even (f16/bf16 without double rounding); integers
 * compute in int64 (uint64 for u64) and wrap like C/numpy on store.
 *
 *     kn_tensor y;
 *     const kn_tensor *ins[2] = {&a, &b};
 *     int st = kn_k_broadcast_alloc(2, ins, a.dtype, &y);
 *     if (!st) st = kn_k_binary(KN_BIN_ADD, &a, &b, &y);
 */
#ifndef KILN_K_ELEMENTWISE_H
#define KILN_K_ELEMENTWISE_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_binary_op {
    KN_BIN_ADD,
    KN_BIN_SUB,
    KN_BIN_MUL,
    KN_BIN_DIV,    /* integers truncate toward zero; x/0 gives 0 */
    KN_BIN_POW,    /* b may have any numeric dtype; result has a's dtype */
    KN_BIN_MOD,    /* result takes the divisor's sign (numpy mod); x%0 gives 0 */
    KN_BIN_FMOD,   /* result takes the dividend's sign (C fmod) */
    KN_BIN_SHL,    /* unsigned; a shift >= the width gives 0 */
    KN_BIN_SHR,
    KN_BIN_BITAND,
    KN_BIN_BITOR,
    KN_BIN_BITXOR,
    KN_BIN_AND,    /* logical; output bool */
    KN_BIN_OR,
    KN_BIN_XOR,
    KN_BIN_EQ,     /* comparisons; output bool */
    KN_BIN_GT,
    KN_BIN_GE,
    KN_BIN_LT,
    KN_BIN_LE,
    KN_BIN_MAX,    /* NaN propagates, like numpy maximum */
    KN_BIN_MIN,
    KN_BIN_PRELU,  /* a < 0 ? a * b : a */
    KN_BIN_COUNT
} kn_binary_op;

typedef enum kn_unary_op {
    KN_UN_ABS, KN_UN_NEG, KN_UN_SIGN, KN_UN_CEIL, KN_UN_FLOOR,
    KN_UN_ROUND, /* half to even */
    KN_UN_SQRT, KN_UN_RECIPROCAL, KN_UN_EXP, KN_UN_LOG,
    KN_UN_SIN, KN_UN_COS, KN_UN_TAN, KN_UN_ASIN, KN_UN_ACOS, KN_UN_ATAN,
    KN_UN_SINH, KN_UN_COSH, KN_UN_ASINH, KN_UN_ACOSH, KN_UN_ATANH, KN_UN_ERF,
    KN_UN_ISNAN,      /* output bool */
    KN_UN_ISINF,      /* output bool; detect_pos / detect_neg */
    KN_UN_NOT,        /* bool */
    KN_UN_BITNOT,     /* integers */
    KN_UN_RELU,
    KN_UN_LEAKYRELU,  /* alpha */
    KN_UN_SIGMOID,
    KN_UN_HARDSIGMOID, /* max(0, min(1, alpha*x + beta)) */
    KN_UN_HARDSWISH,
    KN_UN_TANH,
    KN_UN_GELU,       /* exact (erf) form */
    KN_UN_GELU_TANH,  /* tanh approximation */
    KN_UN_SOFTPLUS,
    KN_UN_SOFTSIGN,
    KN_UN_ELU,        /* alpha */
    KN_UN_SELU,       /* alpha, gamma */
    KN_UN_CELU,       /* alpha */
    KN_UN_MISH,
    KN_UN_THRESHOLDEDRELU, /* alpha */
    KN_UN_SHRINK,     /* alpha = lambd, beta = bias */
    KN_UN_SWISH,      /* x * sigmoid(alpha x) */
    KN_UN_DIV_BY,     /* x / alpha (the last step of Mean) */
    KN_UN_COUNT
} kn_unary_op;

/* Parameters of the unary ops that take any (unused ones are ignored). */
typedef struct kn_unary_params {
    double alpha, beta, gamma;
    bool detect_pos, detect_neg;
} kn_unary_params;

/* The dtype a binary op produces for inputs of dtype `a` (bool for logic and
 * comparisons, a otherwise). */
kn_dtype kn_k_binary_out_dtype(kn_binary_op op, kn_dtype a);
/* Same for unary ops (bool for IsNaN/IsInf). */
kn_dtype kn_k_unary_out_dtype(kn_unary_op op, kn_dtype x);

/* Allocates *out (overwritten, owned) with dtype dt and the numpy broadcast
 * shape of the n inputs. Fails with KN_ERR_INVALID naming the shapes if they
 * do not broadcast. */
int kn_k_broadcast_alloc(int n, const kn_tensor *const *in, kn_dtype dt, kn_tensor *out);
/* The broadcast shape of the n operands alone (*rank, dims[0..*rank)). */
int kn_k_broadcast_shape(int n, const kn_tensor *const *in, int *rank, int64_t *dims);

/* out = a op b, broadcasting. a and b must share a dtype (except b of POW);
 * out must have the broadcast shape and kn_k_binary_out_dtype(op, a). */
int kn_k_binary(kn_binary_op op, const kn_tensor *a, const kn_tensor *b, kn_tensor *out);

/* out = op(x), elementwise. out has x's shape and kn_k_unary_out_dtype(). p
 * may be NULL for ops without parameters. */
int kn_k_unary(kn_unary_op op, const kn_unary_params *p, const kn_tensor *x, kn_tensor *out);

/* out = min(max(x, lo), hi); lo / hi are one-element tensors or NULL (no
 * bound), of any numeric dtype (converted to x's). out is like x. */
int kn_k_clip(const kn_tensor *x, const kn_tensor *lo, const kn_tensor *hi, kn_tensor *out);

/* out = cond ? x : y, broadcasting all three. cond is bool; x and y share
 * out's dtype. */
int kn_k_where(const kn_tensor *cond, const kn_tensor *x, const kn_tensor *y, kn_tensor *out);

/* Converts x into out (same shape, out's dtype): floats round to nearest
 * even, float to integer truncates toward zero (NaN gives 0, out-of-range
 * saturates to int64 first, then wraps), integers wrap, anything to bool is
 * x != 0. */
int kn_k_cast(const kn_tensor *x, kn_tensor *out);

/* The double → f16 / bf16 conversions Cast uses (nearest even, one rounding). */
uint16_t kn_k_f64_to_f16(double v);
uint16_t kn_k_f64_to_bf16(double v);

#ifdef __cplusplus
}
#endif
#endif
