/*
 * runtime/src/rnn.h — the compiled path of LSTM, GRU and RNN (rnn.c) and the
 * kernels it is made of (private to libkiln_rt). runtime/ops/misc.c
 * dispatches a compiled artifact's recurrent node here and the reference
 * evaluator's to the plain C kernel (kernels/ref/recurrent.c), which
 * stays the oracle.
 *
 * The weights are packed once per session in a column order where the
 * gates of 16 hidden units lie side by side: column (u G + g) 16 + l is
 * gate g of unit 16 u + l (G gates: LSTM i,o,f,c; GRU z,r,h; RNN one).
 * Then, per run:
 *   1. the input projection of every time step and both directions as one
 *      product, X [T*B, I] by the packed W [I, D*G*Hp] plus the biases
 *      (kernel `gemm`, parallel over 16-column panels);
 *   2. per time step, per block of 16 units: the recurrent product of the
 *      previous h by that block's packed R (kernel `gemv`, all its gates at
 *      once), then the gates' activations and the cell update on the
 *      block's units (kernel `act` and plain loops of 16, or `lstm16` and
 *      `gru16` in registers), so that a block never waits for another (GRU
 *      without linear_before_reset waits once per step, for r ⊙ h); an
 *      LSTM's or linear_before_reset GRU's products of up to 8 blocks
 *      first, then their cells back to back (`lstm16_rows`, `gru16_rows`),
 *      and on odd steps the blocks last to first; with several batch
 *      rows, up to KN_RNN_ROWS rows' products in one pass over the block's
 *      R (`gemv_rows`). Blocks split across threads when a step is
 *      large enough; the two directions of a bidirectional layer run on two
 *      threads.
 * Each output is computed the same way whatever the thread count: results
 * are bitwise the same for any number of threads.
 */
#ifndef KILN_RT_RNN_H
#define KILN_RT_RNN_H

#include <stdbool.h>
#include <stdint.h>

#include "k_recurrent.h"
#include "opdesc.h"

/* Runs a recurrent node as kn_k_rnn does (same arguments, outputs
 * preallocated zeroed), with what it keeps in os (packed weights, scratch).
 * KN_ERR_UNSUPPORTED with no message and nothing written when it does not
 * take the node (not float32, or KILN_RNN=ref): the caller runs kn_k_rnn. */
int kn_rnn_fast(kn_op_session *os, const kn_rnn_params *p, const kn_tensor *X, const kn_tensor *W,
                const kn_tensor *R, const kn_tensor *B, const kn_tensor *seq_lens, const kn_tensor *init_h,
                const kn_tensor *init_c, const kn_tensor *P, kn_tensor *Y, kn_tensor *Y_h, kn_tensor *Y_c);

enum { KN_RNN_LANES = 16 }; /* units per block, columns per panel */
enum { KN_RNN_ROWS = 4 };   /* batch rows per gemv_rows call */

/* One implementation of the three kernels. */
typedef struct kn_rnn_kern {
    const char *isa; /* "avx2", "avx512", "portable": for the profile's kernel name */
    /* C[m][0..16 np) = bias + sum_k A[m lda + k] P[j][k][..] for m < M, over
     * np panels P[j] of K x 16 floats each (64-byte aligned), stored at
     * C + m ldc + 16 j; bias: np*16 floats. */
    void (*gemm)(const float *A, int64_t lda, int64_t M, int64_t K, const float *P, int64_t np, const float *bias,
                 float *C, int64_t ldc);
    /* acc[0..16 np) += sum_k h[k] P[k ldp + ..] (np 1..4; P 64-byte aligned, ldp a multiple of 16). */
    void (*gemv)(const float *h, int64_t K, const float *P, int64_t ldp, int np, float *acc);
    /* The same for `rows` (1..KN_RNN_ROWS) rows h[i] into acc[i] at once,
     * P read once for all; np 3 or 4, where gemv adds in k order into one
     * accumulator per 16 columns: each row's result is gemv's, bit for bit.
     * NULL: the caller runs gemv per row. */
    void (*gemv_rows)(int rows, const float *const *h, int64_t K, const float *P, int64_t ldp, int np,
                      float *const *acc);
    /* x[i] = act(x[i]) for i < n (n a multiple of 8), alpha and beta as ONNX's. */
    void (*act)(kn_rnn_act a, float alpha, float beta, float *x, int n);
    /* The LSTM cell of 16 units with the default activations (sigmoid,
     * tanh, tanh) in registers: acc holds the pre-activations i, o, f, c
     * (16 each), c the cell state (updated), peep P's i, o, f rows at these
     * units or NULL, clip > 0 clips; h gets the new state. NULL: the
     * caller composes it from `act`. */
    void (*lstm16)(const float *acc, float *c, const float *peep, int64_t peep_stride, float clip,
                   bool input_forget, float *h);
    /* The GRU cell of 16 units with linear_before_reset and the default
     * activations (sigmoid, tanh) in registers: acc holds the
     * pre-activations z and r and the h gate's recurrent part (16 each), xh
     * the h gate's input part, hp the previous state; clip > 0 clips; h
     * gets the new state. NULL: the caller composes it from `act`. */
    void (*gru16)(const float *acc, const float *xh, const float *hp, float clip, float *h);
    /* The same two cells for cells run back to back (several batch rows'
     * in step_rows, one row's group of blocks in one_row), where they are
     * bound by throughput and AVX-512's 16 lanes do them in half the
     * instructions (the audio model on the AMX Xeon, 1 thread: batch 8 4.0
     * -> 3.5 ms); a cell alone after its block's product is a chain of
     * dependent operations, which two 8-lane halves run faster. NULL:
     * lstm16, gru16. */
    void (*lstm16_rows)(const float *acc, float *c, const float *peep, int64_t peep_stride, float clip,
                        bool input_forget, float *h);
    void (*gru16_rows)(const float *acc, const float *xh, const float *hp, float clip, float *h);
} kn_rnn_kern;

/* Plain C (rnn_kern_c.c): runs anywhere. */
extern const kn_rnn_kern kn_rnn_kern_portable;
/* AVX2+FMA (kernels/x86/f32_rnn_avx2.c): only where kn_cpu_features() has both. */
extern const kn_rnn_kern kn_rnn_kern_avx2;
/* The AVX2 kernels with the projection by AVX-512's 8x32 product kernel
 * (f32_gemm_8x32_avx512.c), the recurrent products of 3 or 4 gates
 * (gemv, gemv_rows) and the rows' cells on 16 lanes: only where the CPU
 * has AVX-512F too. */
extern const kn_rnn_kern kn_rnn_kern_avx512;
/* The same without the software prefetch of R in the recurrent products
 * (kn_tuning.rnn_prefetch false). */
extern const kn_rnn_kern kn_rnn_kern_avx512_nopf;

#endif
