/*
 * runtime/src/attention.h — the compiled path of ONNX Attention (opset
 * 23/24) and the kernels it is made of (private to libkiln_rt).
 * runtime/ops/nn.c dispatches a compiled artifact's Attention node here and
 * the reference evaluator's to the plain C kernel
 * (kernels/ref/nn_attention.c), which stays the oracle.
 *
 * Flash-style: per task (one batch, one head, a block of query rows) the
 * keys are visited in blocks; each block's scores, mask and softmax
 * weights live in a small per-thread buffer, the running maximum and sum
 * of each row rescale the output accumulated so far (online softmax), and
 * the S x T score matrix never exists. Memory is O(rows x block) per
 * thread whatever the sequence length; causal attention skips the key
 * blocks past the last query row of a task. Each output row is computed by
 * one task in one order: results are bitwise the same for any number of
 * threads.
 *
 * Taken: float32 Q, K, V (3-D or 4-D, GQA), bool or float32 attn_mask,
 * is_causal, scale, softcap, nonpad_kv_seqlen, output 0 only. Declined
 * (the plain C kernel runs): past_key/past_value, the present and
 * qk_matmul outputs, other dtypes, KILN_ATTENTION=ref.
 *
 * A node autocast marked (compute KN_BF16, kiln compile --precision
 * bf16|mixed) runs the bf16 table where the CPU has AVX512-BF16 and
 * KILN_ATTENTION is auto: Q (already scaled) and K rounded to bf16 (round
 * to nearest even) for the scores, accumulated in f32; mask, softmax, P.V
 * and the output f32, as PyTorch's autocast. Elsewhere it runs in f32.
 */
#ifndef KILN_RT_ATTENTION_H
#define KILN_RT_ATTENTION_H

#include <stdint.h>

#include "k_nn.h"
#include "opdesc.h"

/* Runs an Attention node as kn_k_attention does (same arguments, y
 * allocated), with its scratch kept in os; compute: the node's
 * (kn_opdesc.compute), KN_BF16 for the bf16 scores, else 0. KN_ERR_UNSUPPORTED with no
 * message and nothing written when it does not take the node (see above):
 * the caller runs kn_k_attention. */
int kn_attention_fast(kn_op_session *os, const kn_attn_dims *dm, const kn_attn_params *pr, const kn_tensor *q,
                      const kn_tensor *k, const kn_tensor *v, const kn_tensor *mask, const kn_tensor *past_k,
                      const kn_tensor *nonpad, kn_tensor *y, bool more_outputs, int32_t compute);

enum {
    KN_ATTN_ROWS = 4,   /* query rows of one micro tile (the kernels' R) */
    KN_ATTN_QBLOCK = 128, /* most query rows of one task (fewer when that leaves threads idle) */
    KN_ATTN_KBLOCK = 256 /* keys of one block (a multiple of 8) */
};

/* One implementation of the four kernels. */
typedef struct kn_attn_kern {
    const char *isa;  /* "avx512", "avx2", "portable" */
    const char *impl; /* what kiln profile names: "kiln attention:<isa>" */
    /* NULL for the f32 tables. The bf16 table's: the n rows of q (D floats
     * each, the task's scaled Q) rewritten in place as (D + 1) / 2 pairs of
     * bf16 per row, the row still starting at q + r D; word p of a row
     * holds elements 2p (low half) and 2p + 1 (high half, 0 past D). */
    void (*pack_q)(float *q, int64_t n, int64_t D);
    /* kt[d ldk + j] = k[j ldr + d] for d < D, j < n, and 0 for n <= j < n8
     * (n rounded up to 8): a block of keys transposed. The bf16 table:
     * word kt[p ldk + j] = the bf16 pair of k[j ldr + 2p], k[j ldr + 2p + 1]
     * as pack_q makes them, for p < (D + 1) / 2. */
    void (*pack_kt)(const float *k, int64_t ldr, int64_t n, int64_t D, float *kt, int64_t ldk);
    /* s[r][j] = sum_d q[r D + d] kt[d ldk + j] for r < 4, j < n (n a
     * multiple of 8, n <= ldk; s has row stride ldk); the bf16 table: q and
     * kt as pack_q and pack_kt left them, the products of bf16 pairs summed
     * in f32. */
    void (*scores)(const float *q, int64_t D, const float *kt, int64_t ldk, int64_t n, float *s);
    /* One row's online-softmax step over a block: s[j] += add[j] (add may
     * be NULL), mx = max(*m, s[0..n)); then s[j] = exp(s[j] - mx) (0 for
     * -inf), *m = mx, and the sum of s is returned. When mx is -inf (every
     * key so far masked) s becomes 0 and 0 is returned, *m unchanged; when
     * a score is NaN, *m becomes NaN and NaN is returned. */
    float (*softmax_step)(float *s, const float *add, int64_t n, float *m);
    /* o[r ldo + e] += sum_{j < n} p[r ldp + j] v[j ldv + e] for r < 4,
     * e < dv. */
    void (*pv)(const float *p, int64_t ldp, int64_t n, const float *v, int64_t ldv, int64_t dv, float *o,
               int64_t ldo);
    /* y[i] = x[i] * a for i < n (y may be x): a task's Q scaled, its
     * output rescaled to a new maximum and divided by the sum of weights. */
    void (*scale)(float *y, const float *x, int64_t n, float a);
} kn_attn_kern;

extern const kn_attn_kern kn_attn_kern_portable;
/* The x86 tables' kernels are NULL where not built for x86-64; each runs
 * only where kn_cpu_features() has its ISA (attention.c, pick_kernels). */
extern const kn_attn_kern kn_attn_kern_avx2;   /* AVX2 + FMA */
extern const kn_attn_kern kn_attn_kern_avx512; /* AVX-512F */
/* AVX-512F + AVX512-BF16: bf16 pack_q, pack_kt and scores (vdpbf16ps),
 * the avx512 table's softmax_step and pv; bf16 nodes only */
extern const kn_attn_kern kn_attn_kern_avx512_bf16;

#endif
