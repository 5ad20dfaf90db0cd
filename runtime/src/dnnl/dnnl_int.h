/*
 * runtime/src/dnnl/dnnl_int.h — what the files of the oneDNN wrapper share
 * (private to libkiln_rt): the session and primitive structures, the table
 * of convolution algorithms, and the helpers each file uses from the
 * others. The wrapper's interface is in rt_internal.h.
 *
 *   dnnl.c      sessions, the layout probe, primitives' life (create,
 *               rebuild for a thread count, free), which of oneDNN's
 *               implementations runs (kn_dnnl_pd_create), small helpers
 *   conv.c      convolutions: the table of algorithms and its rows
 *   deconv.c    transposed convolutions (ConvTranspose)
 *   im2col.c    the im2col row of that table
 *   matmul.c    matmuls (and 2-D products run as 1x1 convolutions)
 *   pool.c      poolings
 *   reorder.c   reorders and the memories of a primitive (finish_prim)
 *   postops.c   post-ops, the residual as a sum or a binary add
 *   exec.c      running a primitive, residual copies
 *   pair.c      a 1x1 conv and its depthwise consumer as one kernel
 */
#ifndef KILN_RT_DNNL_INT_H
#define KILN_RT_DNNL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dnnl.h>

#include "config.h"
#include "rt_internal.h"

struct kn_dnnl_session {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    /* activations in a primitive's blocked layout (0: src, 1: dst), shared by
     * the session's primitives (they run one at a time); sized at creation */
    void *act[3]; /* 2: Winograd's or im2col's scratch */
    size_t act_cap[3];
    /* what KN_LAYOUT_NATIVE means in this session (probed on first use) */
    int native;
    /* time spent building primitives during runs (kn_dnnl_prim_for), which
     * the session's governor leaves out of a run's cost */
    int64_t build_ns;
    /* the rows of a matrix product the exec under way needs (0: all;
     * kn_rt_dnnl_exec_rows, for packed tokens) */
    int64_t rows;
};

/* The layouts KN_LAYOUT_NATIVE may stand for. */
enum { NATIVE_UNKNOWN, NATIVE_PLAIN, NATIVE_NHWC, NATIVE_BLOCK8, NATIVE_BLOCK16 };

/* A 1x1 conv and the depthwise conv that alone reads its output, run as one
 * kernel (kn_dnnl_prim_fuse, pair.c). The 1x1 conv's exec only hands its
 * pointers on; the depthwise conv's runs both. Freed with either prim,
 * which leaves the other to run alone. */
typedef struct xdw_pair {
    kn_xdw *k;
    kn_dnnl_prim *head, *tail;
    bool pending; /* the head's exec has handed on: */
    void *src, *dst;
    const void *wei, *bias;
    /* head runs already done alone, whose tails have not run yet (a pair
     * run in rows: pair.c, kn_dnnl_prim_exec) */
    int64_t ahead;
} xdw_pair;

/* A primitive with its scratchpad (user mode: no allocation at exec). */
typedef struct prim_run {
    dnnl_primitive_t prim;
    dnnl_memory_t scratch_mem;
    void *scratch;
} prim_run;

/* One way of running a record: a row of conv.c's table of convolution
 * algorithms (or matmul.c's kiln kernel). A new precision (INT8, INT4,
 * BF16) or a new kernel is a new row, never a new `if` in the callers. */
typedef struct kn_dnnl_algo {
    kn_conv_algo id;
    int32_t dtype; /* the activations' KN_* dtype it computes in */
    /* True if it can run rec in s (CPU, shapes, layouts, the record's
     * conv_algo), whatever it costs. */
    bool (*supports)(kn_dnnl_session *s, const kn_abi_dnnl *rec);
    /* True if the cost model or the tuning table (config.h) says it should
     * run rec with `threads` threads, rather than the rows after it. */
    bool (*worth)(kn_dnnl_session *s, const kn_abi_dnnl *rec, int threads);
    /* Builds p (zeroed but for kind, rec, weights, nthr); KN_ERR_UNSUPPORTED
     * with p as it was: the next row. */
    int (*create)(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                  dnnl_primitive_attr_t attr);
    /* Runs p (NULL: the oneDNN primitive in p, kn_dnnl_exec_prim). */
    int (*run)(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
               const void *post_src, int threads);
    /* Frees p->state (NULL: none). */
    void (*free)(void *state);
    /* True if p runs with `threads` threads as built (NULL: rebuild). */
    bool (*keeps)(const kn_dnnl_prim *p, int threads);
    /* What runs p (NULL: oneDNN's implementation name, p->impl). */
    const char *(*impl)(const kn_dnnl_prim *p);
} kn_dnnl_algo;

/* The dynamic int8 matmul's state (dynq.c). */
typedef struct kn_dnnl_dynq {
    int64_t n_src;          /* activations quantized per run */
    int32_t n_scale;        /* 1 or n_cols */
    int64_t n_cols;         /* N */
    const float *wscales;   /* the weights' scales (the record's): the primitive's output scales */
    float x_scale;          /* the run's activation scale: the first post-op multiplies by it */
    const float *bias;      /* the record's bias (real units), or NULL */
    int32_t *colsum;        /* sum over k of W[k, n] */
    float *bias_run;        /* bias[n] - x_scale * w_scale[n] * zero point * colsum[n], per run */
    float *part;            /* per-chunk minima and maxima */
    bool avx512;            /* quantize with the AVX-512 loop (the CPU has it; read at creation) */
    dnnl_memory_desc_t xs_md; /* x_scale's: one element of dst's rank */
    dnnl_memory_t m_xs;
} kn_dnnl_dynq;

struct kn_dnnl_prim {
    int kind;
    /* what it was built from, to rebuild it for another thread count: oneDNN
     * fixes a primitive's thread partitioning when it is created */
    kn_abi_dnnl rec;
    const unsigned char *weights;
    int nthr;
    prim_run main;
    dnnl_memory_t m_src, m_wei, m_bias, m_dst;
    /* weights in the primitive's layout when it differs from the user's */
    bool wei_const, wei_reorder;
    void *wei_buf;
    prim_run reorder; /* user layout → wei_buf, for non-constant weights */
    dnnl_memory_t m_wei_user;
    /* src/dst in the primitive's (blocked) layout, reordered from/to the
     * caller's plain buffers around each run */
    bool src_reorder, dst_reorder;
    dnnl_memory_t m_src_user, m_dst_user, m_post_user;
    prim_run src_ro, dst_ro, sum_ro; /* sum_ro: residual → the primitive's dst layout */
    /* a 1x1 conv run as a matmul W[O, C] x X[n][C, HW]: the roles of src and
     * weights are swapped at exec; swap_const is W when constant */
    bool swap;
    const void *swap_const;
    bool has_bias, has_sum;
    int bias_arg; /* DNNL_ARG_BIAS, or the first binary post-op's operand */
    /* the residual read by a binary add post-op (set_residual_post_ops)
     * instead of copied into dst for a sum post-op; res_arg is its operand.
     * main_sum: the same kernel with the sum post-op, for runs in place
     * (dst already holds the residual: nothing to copy either way) */
    dnnl_memory_t m_res;
    prim_run main_sum;
    int res_arg;
    size_t res_bytes;
    const void *bias_const;
    size_t dst_bytes, post_bytes; /* post_bytes: the residual's, when sum_ro reorders it */
    /* the algorithm that runs p (NULL: a oneDNN primitive of a matmul or a
     * pooling) and its state (a kn_wino, kn_pw, im2col geometry) */
    const kn_dnnl_algo *algo;
    void *state;
    /* a conv of a fused 1x1 + depthwise pair (kept when p is rebuilt; the
     * primitive itself stays built, for runs the pair cannot take) */
    xdw_pair *pair;
    /* the same record built for another thread count: runs that the
     * session's governor gives fewer threads (kn_dnnl_prim_for). While it is
     * built, twin is p: its reordered constant weights are shared when the
     * layouts agree (then alt's wei_buf is NULL). */
    kn_dnnl_prim *alt;
    const kn_dnnl_prim *twin;
    char impl[48]; /* oneDNN's implementation name (kn_dnnl_prim_impl) */
    kn_dnnl_dynq *dynq; /* a dynamic int8 matmul (f32 src quantized per run), or NULL */
};

/* ---- errors and helpers (dnnl.c) ------------------------------------------ */

int kn_dnnl_fail(dnnl_status_t s, const char *what);
#define KN_DN(call, what)                                                                                          \
    do {                                                                                                           \
        dnnl_status_t s_ = (call);                                                                                 \
        if (s_ != dnnl_success) return kn_dnnl_fail(s_, what);                                                     \
    } while (0)
void *kn_dnnl_alloc(size_t n); /* 64-byte aligned; free() */
void kn_dnnl_plain_strides(int nd, const dnnl_dims_t dims, dnnl_dims_t strides);
int kn_dnnl_plain_md(dnnl_memory_desc_t *md, int nd, const dnnl_dims_t dims, const char *what);
dnnl_format_tag_t kn_dnnl_native_tag(int native, int nd);
int kn_dnnl_native_layout(kn_dnnl_session *s); /* NATIVE_*, probed on first use */
/* The user-side descriptor of an activation of KN dtype `dtype` in
 * `layout` (KN_LAYOUT_*; NATIVE: NHWC for 8-bit, the session's layout for
 * f32 where it keeps the plain size). */
int kn_dnnl_act_md(kn_dnnl_session *s, int32_t layout, int32_t dtype, dnnl_memory_desc_t *md, int nd,
                   const dnnl_dims_t dims, const char *what);
/* oneDNN's data type of a KN dtype (f32 for anything but u8, s8, s32). */
dnnl_data_type_t kn_dnnl_dt(int32_t dtype);
/* The dtype a record computes in: its compute field (bf16 autocast), else
 * its src's. A row of conv.c's table runs records of its dtype. */
static inline int32_t kn_dnnl_compute_dtype(const kn_abi_dnnl *rec)
{
    return rec->compute != KN_DT_UNDEFINED ? rec->compute : rec->src.dtype;
}
/* True for an int8 record (runtime/ops/fused_q.h): output scales given. */
static inline bool kn_dnnl_is_int8(const kn_abi_dnnl *rec) { return rec->n_scale > 0; }
int kn_dnnl_check_tensor(const kn_abi_tensor *t, const char *what, int min_rank, int max_rank);
bool kn_dnnl_has_bias(const kn_abi_dnnl *rec);
int kn_dnnl_const_ptr(const kn_abi_ref *r, const unsigned char *weights, int64_t nbytes, const char *what,
                      const void **out);
void kn_dnnl_set_threads(int threads);
/* oneDNN's primitive descriptor for op_desc + attr: its first choice, or,
 * when the tuning table avoids that one (kn_tuning.avoid_impls), the next
 * one that is neither avoided nor a reference kernel. Every descriptor of
 * a primitive that runs, and every query of what would run, goes through
 * it. */
int kn_dnnl_pd_create(kn_dnnl_session *s, const void *op_desc, dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *out,
                      const char *what);
void kn_dnnl_run_free(prim_run *r);
int kn_dnnl_run_make(kn_dnnl_session *s, dnnl_primitive_desc_t pd, prim_run *r, const char *what);
int kn_dnnl_run_exec(kn_dnnl_session *s, prim_run *r, dnnl_exec_arg_t *args, int nargs, const char *what);
void kn_dnnl_prim_clear(kn_dnnl_prim *p);
/* Rebuilds p for a new thread count; on failure p is left as it was. */
int kn_dnnl_rebuild(kn_dnnl_session *s, kn_dnnl_prim *p, int threads);
/* The primitive that runs p's record with `threads` threads: p when it was
 * built for them (or splits its work at each run), else p->alt, built now
 * if it was built for another count. p itself is never rebuilt here. */
int kn_dnnl_prim_for(kn_dnnl_session *s, kn_dnnl_prim *p, int threads, kn_dnnl_prim **out);

/* ---- reorders, memories, post-ops (reorder.c, postops.c) ------------------ */

dnnl_primitive_attr_t kn_dnnl_scratch_attr(void);
int kn_dnnl_make_reorder(kn_dnnl_session *s, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                         prim_run *r, const char *what);
/* Grows the session's activation buffer i to n bytes (creation time only). */
int kn_dnnl_reserve(kn_dnnl_session *s, int i, size_t n);
int kn_dnnl_finish_prim(kn_dnnl_session *s, kn_dnnl_prim *p, const void *op_desc, dnnl_primitive_attr_t attr,
                        const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *wei_user,
                        const dnnl_memory_desc_t *bias_md, const dnnl_memory_desc_t *dst_md,
                        const dnnl_memory_desc_t *post_md, const void *wconst, const char *what);
/* An int8 record's output scales (from the weights) and zero points into
 * attr; chans: the output channels (the count of per-channel scales), dst
 * dim out_dim of the primitive (1 for a conv, the last for a matmul). */
int kn_dnnl_set_int8_attr(const kn_abi_dnnl *rec, const unsigned char *weights, dnnl_primitive_attr_t attr,
                          int64_t chans, int out_dim);
/* kn_dnnl_set_post_ops without a bias, the last QDQ post-op adding
 * qdq_shift (output units) after its scaling. */
int kn_dnnl_set_post_ops_qdq_shift(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, float qdq_shift,
                                   bool *has_sum);
int kn_dnnl_set_post_ops(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *bias_md,
                         bool *has_sum);
/* The same after a binary multiply by scale_md (the dynamic int8 matmul's
 * run-time activation scale; NULL: none), first of all. */
int kn_dnnl_set_post_ops_ex(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *scale_md,
                            const dnnl_memory_desc_t *bias_md, bool *has_sum);
/* attr's post-ops from rec with the residual sum as a binary add of res_md
 * (*out_idx: its index among the post-ops, -1 when rec has none). */
int kn_dnnl_set_post_ops_add(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *res_md,
                             int *out_idx);
bool kn_dnnl_impl_of(kn_dnnl_session *s, const void *op_desc, dnnl_primitive_attr_t attr,
                     const dnnl_memory_desc_t *dst, char *impl, size_t n);
int kn_dnnl_set_residual_post_ops(kn_dnnl_session *s, kn_dnnl_prim *p, const kn_abi_dnnl *rec, const void *op_desc,
                                  dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *res_md, bool *has_sum);
/* attr's post-ops with the residual as a binary add of res_md (after a
 * binary add of bias_md when given), whatever kernel that gets: oneDNN's
 * int8 matmul with run-time scales has no optimized kernel with a sum. */
int kn_dnnl_set_residual_as_add(kn_dnnl_session *s, kn_dnnl_prim *p, const kn_abi_dnnl *rec,
                                 dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *scale_md,
                                 const dnnl_memory_desc_t *bias_md, const dnnl_memory_desc_t *res_md);
int kn_dnnl_reject_reference(kn_dnnl_session *s, const void *op_desc, dnnl_primitive_attr_t attr);

/* ---- the kinds of primitive (conv.c, matmul.c, pool.c, im2col.c) ---------- */

int kn_dnnl_create_conv(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                        dnnl_primitive_attr_t attr);
/* A transposed convolution (deconv.c): oneDNN's deconvolution, then its
 * bias and post-ops as one binary primitive over dst. */
int kn_dnnl_create_deconv(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                          dnnl_primitive_attr_t attr);
int kn_dnnl_create_matmul(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                          dnnl_primitive_attr_t attr);
int kn_dnnl_create_pool(kn_dnnl_session *s, const kn_abi_dnnl *rec, kn_dnnl_prim *p, dnnl_primitive_attr_t attr);
/* The primitive of pd into p (its implementation named), its src and dst
 * memories, and where the caller's dst layout (dst_user) differs from
 * dst_md, src's, a reorder after it through the session's buffer 1:
 * oneDNN's optimized pooling and binary kernels want dst in src's layout
 * (pool.c). */
int kn_dnnl_finish_in_src_layout(kn_dnnl_session *s, kn_dnnl_prim *p, dnnl_primitive_desc_t pd,
                                 const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *dst_md,
                                 const dnnl_memory_desc_t *dst_user, const char *what);
/* binary.c */
int kn_dnnl_create_binary(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                          dnnl_primitive_attr_t attr);
/* True if rec's post-ops add a residual (a malformed count: no). */
bool kn_dnnl_has_sum(const kn_abi_dnnl *rec);
/* True if rec may run by one of kiln's own algorithms: the record allows
 * it, and its activations (the residual too) are in the session's layout. */
bool kn_dnnl_own_algo_allowed(const kn_abi_dnnl *rec);
/* The spatial dim (0: H, 1: W) of size 1 that a 2-D conv record can drop
 * to run as a 1-D conv (conv.c's thin row), or -1. */
int kn_dnnl_thin_dim(const kn_abi_dnnl *rec);
/* After p's kiln 1x1 or matmul kernel was made (status st). */
int kn_dnnl_pw_made(kn_dnnl_session *s, const kn_abi_dnnl *rec, kn_dnnl_prim *p, int st);
extern const kn_dnnl_algo kn_dnnl_algo_im2col;
extern const kn_dnnl_algo kn_dnnl_algo_pw_matmul;
/* The supports and worth of an algorithm that takes every record it is
 * asked for (oneDNN's own convolution and deconvolution). */
bool kn_dnnl_any_record(kn_dnnl_session *s, const kn_abi_dnnl *rec);
bool kn_dnnl_always_worth(kn_dnnl_session *s, const kn_abi_dnnl *rec, int threads);
/* A (de)convolution record's src and dst dims, and its strides, holes
 * between taps (oneDNN's dilations) and pads per spatial dim. */
void kn_dnnl_window_dims(const kn_abi_dnnl *rec, dnnl_dims_t sd, dnnl_dims_t dd, dnnl_dims_t strides,
                         dnnl_dims_t dil, dnnl_dims_t pl, dnnl_dims_t pr);

/* ---- the dynamic int8 matmul (dynq.c) ------------------------------------- */

/* Sets attr's output scales, the weights' (mask on dst dim out_dim), and
 * p's state for n_src activations; wconst: the constant s8 weights [K, N],
 * bconst: the bias or NULL. The run's activation scale is a binary
 * multiply by p->dynq->xs_md, the first post-op (kn_dnnl_set_post_ops_ex).
 * The activations' zero point is not oneDNN's (it would sum W's columns at
 * every run): the per-run bias corrects it. */
int kn_dnnl_dynq_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                        dnnl_primitive_attr_t attr, int64_t n_src, int out_dim, const void *wconst,
                        const void *bconst);
/* Quantizes x into the session's buffer (*out_q) and sets the run's scales
 * and bias. */
int kn_dnnl_dynq_run(kn_dnnl_session *s, kn_dnnl_prim *p, const float *x, int threads, void **out_q);
void kn_dnnl_dynq_free(kn_dnnl_dynq *dq);

/* ---- running (exec.c) ------------------------------------------------------ */

/* Runs p's oneDNN primitive (reorders, residual and all). */
int kn_dnnl_exec_prim(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                      const void *post_src, int threads);
/* Runs p by its algorithm (rebuilt first for another thread count). */
int kn_dnnl_exec_one(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                     const void *post_src, int threads);
int kn_dnnl_copy_parallel(void *dst, const void *src, size_t n, int threads);
/* True if the na bytes at a and the nb bytes at b share a byte. */
bool kn_dnnl_overlap(const void *a, size_t na, const void *b, size_t nb);

#endif
