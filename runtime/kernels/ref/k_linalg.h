/*
 * k_linalg.h — plain C kernels for matrix products, the softmax family,
 * determinants, einsum and the quantization ops (QuantizeLinear and friends,
 * integer matrix products and convolutions).
 *
 * Kernels take kn_tensors and plain parameters, never IR. The caller
 * allocates every output with the right dtype and shape (the *_shape helpers
 * compute it) and the kernel fills it; kernels re-check what they index with
 * and return a status with a message (the caller adds the node's name).
 *
 *     kn_tensor y = {0};
 *     int r; int64_t d[KN_MAX_RANK];
 *     if (kn_k_matmul_shape(a.rank, a.dims, b.rank, b.dims, &r, d)) return ...;
 *     if (kn_tensor_alloc(&y, KN_F32, r, d)) return ...;
 *     if (kn_k_matmul(&a, &b, &y)) ...;
 */
#ifndef KILN_K_LINALG_H
#define KILN_K_LINALG_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- float32 GEMM core ---------------------------------------------------- */

/* C[M,N] (row stride ldc) += alpha * op(A) * op(B), where op(A) is A[M,K]
 * (row stride lda) or, if trans_a, the transpose of A[K,M]; likewise B. Blocked
 * and packed for cache reuse. Fails only on out of memory. */
int kn_k_sgemm(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               bool trans_a, const float *B, int64_t ldb, bool trans_b, float *C, int64_t ldc);

/* ---- MatMul / Gemm -------------------------------------------------------- */

/* numpy.matmul result shape (1-D operands promoted and dropped, batch dims
 * broadcast). Dims may be -1 (unknown): the result then has -1 there. Fails
 * (KN_ERR_INVALID) on rank 0, mismatched inner dims or unbroadcastable batches. */
int kn_k_matmul_shape(int ra, const int64_t *a, int rb, const int64_t *b, int *out_rank,
                      int64_t *out_dims);

/* out = a @ b for any numeric dtype (a, b, out of one dtype; out shaped by
 * kn_k_matmul_shape and zero-filled). Integers wrap like two's complement. */
int kn_k_matmul(const kn_tensor *a, const kn_tensor *b, kn_tensor *out);

/* out[M,N] = alpha * op(a) @ op(b) + beta * c, where c (may be NULL) is
 * unidirectionally broadcast to [M,N]. out must be allocated [M,N]. */
int kn_k_gemm(const kn_tensor *a, const kn_tensor *b, const kn_tensor *c, bool trans_a,
              bool trans_b, double alpha, double beta, kn_tensor *out);

/* ---- softmax family, determinant, einsum ---------------------------------- */

enum { KN_K_SOFTMAX = 0, KN_K_LOGSOFTMAX = 1, KN_K_HARDMAX = 2 };

/* Views x as [outer, n, inner] and normalizes along n (mode KN_K_*). x and out
 * share dtype (a float type) and element count outer*n*inner. */
int kn_k_softmax(const kn_tensor *x, int64_t outer, int64_t n, int64_t inner, int mode,
                 kn_tensor *out);

/* Determinants of the trailing square matrices of x [..., M, M] into out [...]
 * (LU with partial pivoting, in double). */
int kn_k_det(const kn_tensor *x, kn_tensor *out);

/* Result shape of einsum `eq` over n operands of the given ranks/dims (-1 dims
 * allowed for inference). Fails with a message on a malformed equation. */
int kn_k_einsum_shape(const char *eq, int n, const int *ranks, const int64_t *const *dims,
                      int *out_rank, int64_t *out_dims);

/* out = einsum(eq, in[0..n)) — numpy semantics incl. implicit output,
 * repeated labels (diagonals) and "..." (broadcast). One dtype throughout. */
int kn_k_einsum(const char *eq, int n, const kn_tensor *const *in, kn_tensor *out);

/* ---- quantization --------------------------------------------------------- */

/* Which scale/zero-point element applies to element i of x: per-tensor
 * (scale of one element), per-axis (1-D scale along `axis`) or blocked (scale
 * shaped like x but with ceil(dim/block) along axis). Built and validated by
 * kn_k_qparam_layout. */
typedef struct kn_k_qlayout {
    int64_t inner;    /* product of x dims after axis */
    int64_t dim;      /* x dims[axis] */
    int64_t block;    /* block size (0 unless blocked) */
    int64_t n_blocks; /* ceil(dim / block) */
    int kind;         /* 0 per-tensor, 1 per-axis, 2 blocked */
} kn_k_qlayout;

/* Checks scale (and zero point, may be NULL) against x and fills *out. */
int kn_k_qparam_layout(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *zp, int axis,
                       int64_t block_size, kn_k_qlayout *out);

/* y = saturate(round_half_even(x / scale) + zp); y's dtype (u8, i8, u16, i16,
 * u4, i4, i32) is the target. saturate is accepted for float8 parity only. */
int kn_k_quantize(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *zp, int axis,
                  int64_t block_size, kn_tensor *y);

/* y = (x - zp) * scale; y's dtype (a float type) is the target. */
int kn_k_dequantize(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *zp, int axis,
                    int64_t block_size, kn_tensor *y);

/* uint8 dynamic quantization of f32 x: y (u8, x's shape), y_scale (f32
 * scalar), y_zp (u8 scalar), all allocated by the caller. */
int kn_k_dynamic_quantize(const kn_tensor *x, kn_tensor *y, kn_tensor *y_scale, kn_tensor *y_zp);

/* out (i32, matmul shape) = (a - a_zp) @ (b - b_zp); a_zp is a scalar or one
 * per row of a, b_zp a scalar or one per column of b; either may be NULL. */
int kn_k_matmul_integer(const kn_tensor *a, const kn_tensor *b, const kn_tensor *a_zp,
                        const kn_tensor *b_zp, kn_tensor *out);

/* QLinearMatMul: out = saturate(round((a-azp)@(b-bzp) * as*bs/ys) + yzp);
 * out's dtype is yzp's (or a's if yzp is NULL). Scales per tensor, per row
 * (a) or per column (b, y). */
int kn_k_qlinear_matmul(const kn_tensor *a, const kn_tensor *a_scale, const kn_tensor *a_zp,
                        const kn_tensor *b, const kn_tensor *b_scale, const kn_tensor *b_zp,
                        const kn_tensor *y_scale, const kn_tensor *y_zp, kn_tensor *out);

enum { KN_K_PAD_NOTSET = 0, KN_K_PAD_SAME_UPPER = 1, KN_K_PAD_SAME_LOWER = 2, KN_K_PAD_VALID = 3 };

/* Convolution geometry over nsp spatial dims. */
typedef struct kn_k_conv_params {
    int nsp;
    int64_t group;
    int auto_pad; /* KN_K_PAD_* */
    int64_t kernel[KN_MAX_RANK];
    int64_t strides[KN_MAX_RANK];
    int64_t dilations[KN_MAX_RANK];
    int64_t pad_begin[KN_MAX_RANK];
    int64_t pad_end[KN_MAX_RANK];
} kn_k_conv_params;

/* Output spatial dims for input spatial dims `in` (-1 → -1); for SAME_* and
 * VALID also rewrites p's pads. Fails when a window does not fit. */
int kn_k_conv_out_dims(kn_k_conv_params *p, const int64_t *in, int64_t *out);

/* ConvInteger: out (i32 [N, M, out...]) = conv(x - x_zp, w - w_zp[m]) (+ bias
 * i32 [M] if non-NULL); w_zp is a scalar or one per output channel. p must
 * have been resolved by kn_k_conv_out_dims. */
int kn_k_conv_integer(const kn_tensor *x, const kn_tensor *w, const kn_tensor *x_zp,
                      const kn_tensor *w_zp, const kn_tensor *bias, const kn_k_conv_params *p,
                      kn_tensor *out);

/* QLinearConv: requantizes the integer convolution with x_scale*w_scale[m]/
 * y_scale and y_zp into out (dtype of y_zp, or of x without one). */
int kn_k_qlinear_conv(const kn_tensor *x, const kn_tensor *x_scale, const kn_tensor *x_zp,
                      const kn_tensor *w, const kn_tensor *w_scale, const kn_tensor *w_zp,
                      const kn_tensor *y_scale, const kn_tensor *y_zp, const kn_tensor *bias,
                      const kn_k_conv_params *p, kn_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
