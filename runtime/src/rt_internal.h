/*
 * runtime/src/rt_internal.h — what the pieces of libkiln_rt share privately:
 * the artifact and session structures and the oneDNN primitive wrapper.
 */
#ifndef KILN_RT_INTERNAL_H
#define KILN_RT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "governor.h"
#include "kiln/kiln.h"
#include "opdesc.h"

/* ---- oneDNN primitives (runtime/src/dnnl.c) ------------------------------ */

typedef struct kn_dnnl_prim kn_dnnl_prim;

/* Creates the primitive a record describes (engine and stream are the
 * session's, made by kn_dnnl_session_init). Constant weights (rec->wei_ref in
 * KN_LOC_WEIGHTS) are reordered into the primitive's preferred layout once,
 * here, from `weights`. */
typedef struct kn_dnnl_session kn_dnnl_session;
int kn_dnnl_session_init(kn_dnnl_session **out);
void kn_dnnl_session_free(kn_dnnl_session *s);
int kn_dnnl_prim_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights,
                        kn_dnnl_prim **out);
/* The rows of a matrix product's src and dst the next exec needs (0: all;
 * kn_rt_dnnl_exec_rows): kernels that can compute only those do. */
void kn_dnnl_session_set_rows(kn_dnnl_session *s, int64_t rows);
/* Runs it on raw pointers (wei NULL → the prepared constant weights). */
int kn_dnnl_prim_exec(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                      const void *post_src, int threads);
void kn_dnnl_prim_free(kn_dnnl_prim *p);
/* What runs p: oneDNN's implementation name ("jit:avx2", ...),
 * "winograd F(4x4,3x3)" / "winograd F(2x2,3x3)" (kernels/x86/f32_winograd_3x3_avx2_avx512.c) or
 * "kiln 1x1:avx512" / "kiln matmul:avx512" (kernels/x86/f32_conv1x1_avx512.c). */
const char *kn_dnnl_prim_impl(const kn_dnnl_prim *p);
/* The channel block of the layout that KN_LAYOUT_NATIVE stands for in s:
 * 8 or 16 (nChw8c, nChw16c), 0 for NHWC, -1 for plain NCHW. */
int kn_dnnl_native_block(kn_dnnl_session *s);
/* Rebuilds p for `threads` (oneDNN fixes a primitive's thread split when it
 * is created), so that the next run does not have to. */
int kn_dnnl_prim_set_threads(kn_dnnl_session *s, kn_dnnl_prim *p, int threads);
/* Nanoseconds spent building primitives during runs, so far (0 for NULL). */
int64_t kn_dnnl_build_ns(const kn_dnnl_session *s);
/* Runs head, a 1x1 conv, and tail, the depthwise conv that alone reads its
 * output, as one kernel (kernels/x86/f32_expand_dw_avx512.c) where that is supported and faster:
 * then head's exec only hands its pointers on to tail's, the next one.
 * KN_ERR_UNSUPPORTED otherwise (both unchanged). */
int kn_dnnl_prim_fuse(kn_dnnl_session *s, kn_dnnl_prim *head, kn_dnnl_prim *tail);

/* ---- Winograd convolutions (kernels/x86/f32_winograd_3x3_avx2_avx512.c) ---------------------------------- */

/* A 3x3 stride-1 convolution by F(4x4, 3x3) or F(2x2, 3x3) (AVX2; the
 * products by AVX-512 where the CPU has it), on activations that are
 * channel-blocked (nChw8c or nChw16c) or channels-last (NHWC). */
typedef struct kn_wino kn_wino;
/* True if rec is one it can run on this CPU (layouts are the caller's to
 * check). */
bool kn_wino_supported(const kn_abi_dnnl *rec);
/* The output tile worth using for rec with `threads` threads (4 or 2), or 0
 * when oneDNN's direct kernel should be faster (a cost model with the
 * rates of config.c's tuning table). */
int kn_wino_tile(const kn_abi_dnnl *rec, int threads);
/* The cheaper of the two tiles by the same model, whether or not it beats
 * direct convolution (0: rec unsupported). */
int kn_wino_best_tile(const kn_abi_dnnl *rec, int threads);
/* Transforms the constant filter (from `weights`) once, for tile 4 or 2,
 * for activations in layout `block`: 8 or 16 for nChw8c or nChw16c, 0 for
 * NHWC (KN_ERR_UNSUPPORTED when the channels do not fill whole blocks). */
int kn_wino_create(const kn_abi_dnnl *rec, const unsigned char *weights, int tile, int block, kn_wino **out);
int kn_wino_tile_of(const kn_wino *w);
/* Bytes of scratch a run needs (the transformed input and products). */
size_t kn_wino_scratch_bytes(const kn_wino *w);
/* src, dst and residual in the layout given at creation; bias used only
 * when not constant. */
int kn_wino_exec(const kn_wino *w, const float *src, const float *bias, float *dst, const float *residual,
                 float *scratch, int threads);
/* The same filter at another batch and image (N, H, W: a node whose
 * spatial dims vary, dnnl/dynconv.c): it shares w's transformed filter, so
 * it must be freed (kn_wino_free) before w. */
int kn_wino_view(const kn_wino *w, int64_t N, int64_t H, int64_t W, kn_wino **out);
void kn_wino_free(kn_wino *w);

/* ---- 1x1 convolutions (kernels/x86/f32_conv1x1_avx512.c) -------------------------------------- */

/* A 1x1 convolution (any stride, no padding) on NHWC activations by kiln's
 * own AVX-512 kernel, its post-ops (residual sum included) applied as it
 * stores. */
typedef struct kn_pw kn_pw;
/* True if rec is one it can run on this CPU (layouts are the caller's to
 * check: NHWC only). */
bool kn_pw_supported(const kn_abi_dnnl *rec);
/* True if it should run rec rather than oneDNN (a supported rec), by the
 * tuning table (dnnl/conv.c). */
bool kn_pw_worth(const kn_abi_dnnl *rec);
/* Packs the constant filter (from `weights`) once. */
int kn_pw_create(const kn_abi_dnnl *rec, const unsigned char *weights, kn_pw **out);
/* src, dst and residual in NHWC; residual may be dst itself (in place) but
 * must not overlap it otherwise; bias used only when not constant. */
int kn_pw_exec(const kn_pw *w, const float *src, const float *bias, float *dst, const float *residual, int threads);
/* kn_pw_exec of a matmul (kn_pw_create_matmul) over its first `rows` rows
 * only (rows <= 0 or above the product's: all). */
int kn_pw_exec_rows(const kn_pw *w, int64_t rows, const float *src, const float *bias, float *dst,
                    const float *residual, int threads);
/* The same kernel for a matmul by constant weights shared by every batch
 * (see f32_conv1x1_avx512.c), and whether it runs it. */
bool kn_pw_matmul_supported(const kn_abi_dnnl *rec);
/* True if it should run such a matmul on `threads` threads, by the tuning
 * table (dnnl/matmul.c). */
bool kn_pw_matmul_worth(const kn_abi_dnnl *rec, int threads);
/* Whether kiln's kernel runs a float matmul on `threads` threads: where it
 * supports it and it is worth it, every time with KILN_CONV_ALGO=pointwise,
 * never with another forced algorithm. */
bool kn_pw_matmul_wanted(const kn_abi_dnnl *rec, int threads);
int kn_pw_create_matmul(const kn_abi_dnnl *rec, const unsigned char *weights, kn_pw **out);
void kn_pw_free(kn_pw *w);

/* ---- a 1x1 convolution and its depthwise consumer (kernels/x86/f32_expand_dw_avx512.c) ------- */

/* The two convolutions as one AVX-512 kernel on NHWC activations, the 1x1
 * convolution's output never stored (see f32_expand_dw_avx512.c). */
typedef struct kn_xdw kn_xdw;
/* True if it runs the 1x1 record pw followed by the depthwise record dw on
 * this CPU (layouts, and that only dw reads pw's output, are the caller's
 * to check). */
bool kn_xdw_supported(const kn_abi_dnnl *pw, const kn_abi_dnnl *dw);
/* Packs both constant filters (from `weights`) once; room for one thread. */
int kn_xdw_create(const kn_abi_dnnl *pw, const kn_abi_dnnl *dw, const unsigned char *weights, kn_xdw **out);
/* Room for `threads` threads' scratch (when the thread count changes). */
int kn_xdw_reserve(kn_xdw *x, int threads);
/* src: pw's input, dst (and the residual of dw's sum, which may be dst
 * itself but must not overlap it otherwise): dw's output, all NHWC; dst must
 * not overlap src. Biases used only when not constant. */
int kn_xdw_exec(const kn_xdw *x, const float *src, const float *b1, const float *b2, float *dst,
                const float *residual, int threads);
void kn_xdw_free(kn_xdw *x);

/* ---- what the int8 convolution kernels ask of a record (kernels/x86/q8_record.c) ------------- */

/* True if t's dims are static (no symbol) and positive, in the arena's slot 0. */
bool kn_abi_static_dims(const kn_abi_tensor *t);
/* True for a kiln::QConv record those kernels may take, whatever its
 * geometry: AVX-512 BW + VNNI, static rank-4 tensors, u8 input, s8
 * weights, u8/s8 output, constant weights, scales (1 or one per output
 * channel) and f32 bias, zero points in range, post-ops one clamp. */
bool kn_q8_record_ok(const kn_abi_dnnl *rec);
/* The post-ops (ReLU, Clip) as one clamp [lo, hi] in output units, before
 * the zero point; false for any other post-op. */
bool kn_q8_posts_clamp(const kn_abi_dnnl *rec, float *lo, float *hi);
/* That clamp in output bytes (the zero point added, rounded, in the output
 * type's range; bit patterns of u8 or s8 as the output). */
void kn_q8_byte_clamp(const kn_abi_dnnl *rec, int8_t *lo, int8_t *hi);
/* Parallel units for `rows` output rows on `threads` threads: one band of
 * rows per thread, or 4 per thread where each has 64 rows or more (a
 * thread slowed by the host is helped out). */
int64_t kn_row_bands(int64_t rows, int threads);
/* A row of output pixels [ox, b) in blocks of PB (a constant), the rest in
 * blocks of 8, 4, 2 and 1 (one at a time ran 13% of MobileNet's 112-pixel
 * rows at a fifth of the speed): BLOCK(P) computes P pixels from ox, a
 * constant P for each call so that the kernels' blocks stay in registers.
 * The stem kernels' rows (f32_stem_avx512.c, u8_stem_avx512.c). */
#define KN_ROW_BLOCKS(PB, ox, b, BLOCK)                                                                                \
    do {                                                                                                               \
        for (; (ox) + (PB) <= (b); (ox) += (PB)) BLOCK(PB);                                                            \
        for (; (PB) > 8 && (ox) + 8 <= (b); (ox) += 8) BLOCK(8);                                                       \
        if ((PB) > 4 && (ox) + 4 <= (b)) BLOCK(4), (ox) += 4;                                                          \
        if ((ox) + 2 <= (b)) BLOCK(2), (ox) += 2;                                                                      \
        if ((ox) < (b)) BLOCK(1), (ox)++;                                                                              \
    } while (0)

/* ---- a network's first convolution (kernels/x86/f32_stem_avx512.c) ---------------------------- */

/* A convolution of 1-4 input channels in plain NCHW (an image) into 16-64
 * NHWC output channels, any window up to 7x7, stride 1 or 2, by kiln's
 * AVX-512 kernel, its bias and post-ops (no residual) applied as it stores. */
typedef struct kn_stem kn_stem;
/* True if it runs rec on this CPU (layouts are the caller's to check). */
bool kn_stem_supported(const kn_abi_dnnl *rec);
/* Packs the constant filter (from `weights`) once. */
int kn_stem_create(const kn_abi_dnnl *rec, const unsigned char *weights, kn_stem **out);
/* src NCHW, dst NHWC; bias used only when not constant. */
int kn_stem_exec(const kn_stem *k, const float *src, const float *bias, float *dst, int threads);
void kn_stem_free(kn_stem *k);

/* ---- int8 depthwise 3x3 convolution (kernels/x86/u8_dw3x3_avx512.c) --------------------------- */

/* A depthwise 3x3 int8 convolution (kiln::QConv: u8 NHWC input, s8
 * weights, u8 or s8 output, stride 1 or 2) by kiln's AVX-512 VNNI kernel. */
typedef struct kn_dw8 kn_dw8;
/* True if it runs rec on this CPU (layouts are the caller's to check:
 * NHWC only). */
bool kn_dw8_supported(const kn_abi_dnnl *rec);
/* True if it should run rec (a supported one) rather than oneDNN: where its
 * 64-channel chunks are full enough (see u8_dw3x3_avx512.c). */
bool kn_dw8_worth(const kn_abi_dnnl *rec);
/* Packs the constant filter w ([C][3][3]), with the bias (f32, accumulator
 * units, or NULL) and the output scales (1 or C), once. */
int kn_dw8_create(const kn_abi_dnnl *rec, const int8_t *w, const float *bias, const float *scales, kn_dw8 **out);
/* src and dst NHWC, apart. */
int kn_dw8_exec(const kn_dw8 *k, const uint8_t *src, uint8_t *dst, int threads);
void kn_dw8_free(kn_dw8 *k);

/* ---- an int8 network's first convolution (kernels/x86/u8_stem_avx512.c) ------------------------ */

/* A kiln::QConv of 1-4 u8 input channels in plain NCHW into 16-64 u8/s8
 * NHWC ones, windows up to 7x7, stride 1 or 2, by kiln's AVX-512 VNNI
 * kernel. */
typedef struct kn_qstem kn_qstem;
/* True if it runs rec on this CPU (layouts are the caller's to check). */
bool kn_qstem_supported(const kn_abi_dnnl *rec);
/* Packs the constant filter w ([O][C][KH][KW]), with the bias (f32,
 * accumulator units, or NULL) and the output scales (1 or O), once. */
int kn_qstem_create(const kn_abi_dnnl *rec, const int8_t *w, const float *bias, const float *scales, kn_qstem **out);
int kn_qstem_exec(const kn_qstem *k, const uint8_t *src, uint8_t *dst, int threads);
void kn_qstem_free(kn_qstem *k);

/* ---- Sigmoid and Softmax on 8 lanes (kernels/x86/f32_sigmoid_softmax_avx2.c; AVX2 + FMA) ---- */

void kn_sigmoid256(const float *x, float *y, int64_t n);
/* One row of `mid` contiguous floats. */
void kn_softmax256_row(const float *x, float *y, int64_t mid);
/* Columns [i0, i1) of a [mid, inner] slice, each a softmax over its mid
 * floats `inner` apart. */
void kn_softmax256_columns(const float *x, float *y, int64_t mid, int64_t inner, int64_t i0, int64_t i1);

/* ---- transposed convolutions with kernel = stride (kernels/x86/f32_deconv_patch_avx512.c) */

/* A KN_DNNL_DECONV record whose kernel equals its stride, 2-D, no padding,
 * one group, constant weights, on AVX-512: each input pixel's own output
 * patch. Its src is channels-last (NHWC); dst_nhwc says dst's layout
 * (else NCHW). A residual (SUM) only where the kernel stores in place:
 * dst NHWC, kw O a multiple of 16. */
typedef struct kn_pdc kn_pdc;
bool kn_pdc_supported(const kn_abi_dnnl *rec, bool dst_nhwc);
/* w: ONNX's [C, O, kh, kw]; bias: O values or NULL. */
int kn_pdc_create(const kn_abi_dnnl *rec, const float *w, const float *bias, bool dst_nhwc, kn_pdc **out);
/* residual: in dst's layout, equal to dst or apart from it. */
int kn_pdc_exec(const kn_pdc *k, const float *src, float *dst, const float *residual, int threads);
/* The same at another batch and input image (N, H, W; the record's C, O,
 * kernel and layouts), for a node whose spatial dims vary (convt.c). */
int kn_pdc_exec_at(const kn_pdc *k, int64_t N, int64_t H, int64_t W, const float *src, float *dst,
                   const float *residual, int threads);
void kn_pdc_free(kn_pdc *k);

/* ---- parallel loops (parallel.c) ------------------------------------------ */

/* kn_rt_parallel_for for a given thread count (threads <= 1: fn(args, 0, n)). */
int kn_rt_parallel_for_threads(int threads, kn_rt_chunk_fn fn, void *args, int64_t n);
/* Inside a chunk: the index of the thread running it in the loop's team,
 * 0 .. threads - 1 (0 when the loop runs on the calling thread), for
 * per-thread scratch. */
int kn_rt_parallel_worker(void);
/* CLOCK_MONOTONIC in nanoseconds. */
int64_t kn_rt_now_ns(void);
/* Late joins seen so far, process-wide (parallel.c says which count), and
 * one more from a kernel that saw its own team wait for a CPU (rnn.c). */
uint64_t kn_rt_contention_count(void);
void kn_rt_note_contention(void);
/* Says that parallel work that parallel.c does not see (a oneDNN
 * primitive's) has just ended on the team: its workers spin now. */
void kn_rt_team_done(void);
/* Assembles a team of `threads` for nothing: wakes the workers, and counts
 * a late join if one of them should have been ready and was not. */
void kn_rt_team_check(int threads);

/* ---- artifacts and sessions (artifact.c, session.c) ---------------------- */

/* A runtime-kernel node ready to run: its descriptor with parsed attributes. */
typedef struct kn_rt_opnode {
    kn_opdesc desc;
    bool *has_output;
    void *attrs_block;
    const kn_abi_opnode *abi;
    /* A Concat or Split that may run on NHWC dims (KN_OPNODE_NHWC_ALL or
     * NATIVE_ALL): its attributes with the axis mapped to NHWC order, made
     * when the artifact is opened; NULL for every other node. */
    kn_attr *nhwc_attrs;
    int n_nhwc_attrs;
} kn_rt_opnode;

struct kn_artifact {
    const kn_artifact_desc *desc;
    kn_meta meta;
    void *dl;                      /* dlopen handle, or NULL for static artifacts */
    const unsigned char *weights;  /* embedded or mmapped */
    void *weights_map;             /* mmapped external weights */
    size_t weights_map_len;
    kn_rt_opnode *opnodes;         /* meta.n_opnodes */
    int32_t *slot_last_use;        /* meta.n_slots: last opnode reading the slot, -1: keep (an output) */
    char *path;
};

struct kn_exec {
    kn_session *session;
    int64_t syms[KN_MAX_SYMS]; /* this run's value of each dynamic dim (kn_meta.syms) */
};

/* t's dims in this run (dims[d] + dim_a[d] * (n - max) for a dim that
 * follows a symbol), written to dims[0..rank), and its bytes in this run
 * (t->nbytes for a tensor without dynamic dims). */
void kn_rt_tensor_dims(const kn_exec *ex, const kn_abi_tensor *t, int64_t *dims);
size_t kn_rt_tensor_nbytes(const kn_exec *ex, const kn_abi_tensor *t);

/* Per-node oneDNN primitives for run-time shapes (dnnl/dynconv.c). */
typedef struct kn_dynconv kn_dynconv;
void kn_dynconv_free(kn_dynconv *c);

struct kn_session {
    const kn_artifact *art;
    kn_exec exec;
    char *arena;                   /* 64-byte aligned, meta.arena_bytes */
    kn_dnnl_session *dnnl;
    kn_dnnl_prim **prims;          /* meta.n_dnnl */
    kn_dynconv *dynconv;           /* convs/poolings at run-time shapes (dnnl/dynconv.c), or NULL */
    int threads;                   /* kn_session_set_threads's count */
    int run_threads;               /* the run under way's: threads, or 1 (governor.h) */
    kn_gov gov;
    int64_t last_end_ns;           /* when the last run ended (0: none yet), for the governor */
    kn_tensor *slots;              /* meta.n_slots dynamic values, owned; kept until the next run */
    kn_op_session *opsess;         /* meta.n_opnodes: what runtime kernels keep across runs (opdesc.h) */
    atomic_int running;            /* 1 while a run is in progress (session.c: one thread at a time) */
};

/* Sets the thread count of the run about to start (s->run_threads, and
 * the runtime kernels' kn_op_session.threads). */
void kn_rt_set_run_threads(kn_session *s, int threads);

/* What kn_session_run checks of the caller's buffers before running
 * (session.c); kn_session_profile checks the same. */
int kn_rt_check_buffers(const kn_session *s, const void *const *inputs, void *const *outputs);

#endif
