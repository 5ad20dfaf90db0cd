/*
 * runtime/src/dnnl.c — the oneDNN (2.6 C API) wrapper behind kn_rt_dnnl_exec:
 * one engine and stream per session, one primitive per kn_abi_dnnl record.
 *
 * Everything that can allocate or JIT happens in kn_dnnl_prim_create (the
 * primitive, its scratchpad in user mode, constant weights reordered once into
 * the layout the primitive prefers); kn_dnnl_prim_exec only binds pointers and
 * executes.
 *
 * Record conventions (shared with codegen/cpu/lower_dnnl.c):
 *  - MATMUL: src/wei/dst are the tensors as stored, row-major. trans_a means
 *    src is stored [.., K, M], trans_b means wei is stored [.., N, K]; the
 *    logical operands are described to oneDNN with strides. Ranks may differ;
 *    the shorter operand gets leading 1s and batch dims of 1 broadcast. Bias
 *    holds N values ([N] or [1, N]) added to every row. alpha scales the
 *    product (Gemm: alpha * A x B + C).
 *  - CONV: src [N, C, spatial..], wei in ONNX layout [O, C/g, k..], dst
 *    [N, O, out..], all plain. dilations are ONNX's (1 = dense).
 *  - wei_ref / bias_ref in KN_LOC_WEIGHTS: constant, read from `weights` at
 *    creation (the pointers passed at exec are then ignored).
 *
 * Layouts: a conv gets activations in the layout its fastest kernel wants
 * (channels-last for brgconv, nChw8c for AVX2's jit kernels). A record says
 * per activation whether the caller's buffer is plain or already in the
 * session's KN_LAYOUT_NATIVE layout (probed once: what a ResNet-like conv
 * picks), which the compiler uses between two convolutions; other buffers
 * are reordered from/to plain around the call through two session-wide
 * buffers. A plain 1x1 stride-1 conv instead runs as the matmul
 * W[O, C] x X[C, HW] (no reorders). A matmul whose weights are shared by
 * every batch is one 2-D product, and a 2-D product by constant weights that
 * oneDNN would run as jit sgemm is a channels-last 1x1 convolution.
 *
 * Winograd: a 3x3 stride-1 conv between two activations in the session's
 * layout (nChw8c with AVX2; NHWC or nChw16c with AVX-512) runs by
 * winograd.c instead when its cost model says that is faster and the record
 * allows it (conv_algo AUTO); the session's third activation buffer is its
 * scratch.
 *
 * 1x1: a 1x1 conv without padding between two NHWC activations (AVX-512)
 * runs by pointwise.c when the record allows it: as fast as oneDNN's
 * brgconv_1x1 at batch 1, 1.4-2x faster with a residual sum at batch 8.
 *
 * im2col: otherwise a conv with a small output image (at most
 * IM2COL_MAX_PIXELS per image, ResNet's last stages) between two blocked
 * activations copies its input patches into that scratch buffer and runs
 * as one 1x1 convolution over them (try_im2col): oneDNN's direct kernel
 * blocks along the output width and is slow on 7- or 14-pixel rows.
 *
 * Threads: oneDNN fixes a primitive's thread partitioning when it is created,
 * so primitives are built for 1 thread (a new session's count) and rebuilt
 * once when kn_dnnl_prim_exec sees another count. libdnnl here uses GNU
 * OpenMP: the count is set for the calling thread with omp_set_num_threads,
 * looked up with dlsym in the libgomp that libdnnl already loaded, so that
 * libkiln_rt (and static apps) need neither -fopenmp nor -lgomp.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>
#include <dnnl_debug.h>

#include "fused_int.h"
#include "kiln/profile.h"
#include "rt_internal.h"

struct kn_dnnl_session {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    /* activations in a primitive's blocked layout (0: src, 1: dst), shared by
     * the session's primitives (they run one at a time); sized at creation */
    void *act[3];        /* 2: Winograd's or im2col's scratch */
    size_t act_cap[3];
    /* what KN_LAYOUT_NATIVE means in this session (probed on first use) */
    int native;
};

/* The layouts KN_LAYOUT_NATIVE may stand for. */
enum { NATIVE_UNKNOWN, NATIVE_PLAIN, NATIVE_NHWC, NATIVE_BLOCK8, NATIVE_BLOCK16 };

/* A 1x1 conv and the depthwise conv that alone reads its output, run as one
 * kernel (kn_dnnl_prim_fuse). The 1x1 conv's exec only hands its pointers
 * on; the depthwise conv's runs both. Freed with either prim, which leaves
 * the other to run alone. */
typedef struct xdw_pair {
    kn_xdw *k;
    kn_dnnl_prim *head, *tail;
    bool pending; /* the head's exec has handed on: */
    void *src, *dst;
    const void *wei, *bias;
} xdw_pair;

/* A primitive with its scratchpad (user mode: no allocation at exec). */
typedef struct prim_run {
    dnnl_primitive_t prim;
    dnnl_memory_t scratch_mem;
    void *scratch;
} prim_run;

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
    prim_run reorder;          /* user layout → wei_buf, for non-constant weights */
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
    int bias_arg;              /* DNNL_ARG_BIAS, or the first binary post-op's operand */
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
    /* a 3x3 stride-1 conv run by winograd.c instead of oneDNN */
    kn_wino *wino;
    /* a 1x1 conv on NHWC run by pointwise.c instead of oneDNN */
    kn_pw *pw;
    /* a conv run as im2col + oneDNN's 1x1 kernel (see try_im2col) */
    struct im2col *i2c;
    /* a conv of a fused 1x1 + depthwise pair (kept when p is rebuilt; the
     * primitive itself stays built, for runs the pair cannot take) */
    xdw_pair *pair;
    char impl[48]; /* oneDNN's implementation name (kn_dnnl_prim_impl) */
};

static void prim_clear(kn_dnnl_prim *p);

/* ---- errors and small helpers --------------------------------------------- */

static int dnnl_fail(dnnl_status_t s, const char *what)
{
    int code = s == dnnl_unimplemented    ? KN_ERR_UNSUPPORTED
               : s == dnnl_out_of_memory  ? KN_ERR_NOMEM
               : s == dnnl_invalid_arguments ? KN_ERR_INVALID
                                          : KN_ERR_INTERNAL;
    return kn_error(code, "oneDNN: %s failed: status %s", what, dnnl_status2str(s));
}

#define DN(call, what)                                                                                             \
    do {                                                                                                           \
        dnnl_status_t s_ = (call);                                                                                 \
        if (s_ != dnnl_success) return dnnl_fail(s_, what);                                                        \
    } while (0)

static void *alloc64(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64)) return NULL;
    return p;
}

typedef void (*omp_set_fn)(int);
static omp_set_fn g_omp_set;
static pthread_once_t g_omp_once = PTHREAD_ONCE_INIT;
static void find_omp(void) { *(void **)&g_omp_set = dlsym(RTLD_DEFAULT, "omp_set_num_threads"); }

/* Contiguous row-major strides for dims. */
static void plain_strides(int nd, const dnnl_dims_t dims, dnnl_dims_t strides)
{
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
}

static int plain_md(dnnl_memory_desc_t *md, int nd, const dnnl_dims_t dims, const char *what)
{
    dnnl_dims_t st;
    plain_strides(nd, dims, st);
    DN(dnnl_memory_desc_init_by_strides(md, nd, dims, dnnl_f32, st), what);
    return KN_OK;
}

/* The format tag of layout `native` (NATIVE_*) for nd dims (3..5). */
static dnnl_format_tag_t native_tag(int native, int nd)
{
    static const dnnl_format_tag_t tags[5][3] = {
        [NATIVE_PLAIN] = {dnnl_abc, dnnl_abcd, dnnl_abcde},
        [NATIVE_NHWC] = {dnnl_acb, dnnl_acdb, dnnl_acdeb},
        [NATIVE_BLOCK8] = {dnnl_aBc8b, dnnl_aBcd8b, dnnl_aBcde8b},
        [NATIVE_BLOCK16] = {dnnl_aBc16b, dnnl_aBcd16b, dnnl_aBcde16b},
    };
    return tags[native][nd - 3];
}

/* Finds the activation layout oneDNN's convolution picks on this CPU, from
 * a ResNet-like 3x3 layer: the layout that convolutions exchange when the
 * compiler marks a value KN_LAYOUT_NATIVE. Plain if it is none of those
 * (then nothing is gained, but nothing breaks either). */
static void probe_native(struct kn_dnnl_session *s)
{
    s->native = NATIVE_PLAIN;
    dnnl_dims_t sd = {1, 64, 28, 28}, wd = {64, 64, 3, 3}, one = {1, 1}, zero = {0, 0}, pad = {1, 1};
    dnnl_memory_desc_t src, wei, dst;
    if (dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&wei, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&dst, 4, sd, dnnl_f32, dnnl_format_tag_any))
        return;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd;
    if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei,
                                                   NULL, &dst, one, zero, pad, pad) ||
        dnnl_primitive_desc_create(&pd, &cd, NULL, s->engine, NULL))
        return;
    dnnl_memory_desc_t got = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    dnnl_primitive_desc_destroy(pd);
    for (int k = NATIVE_NHWC; k <= NATIVE_BLOCK16; k++) {
        dnnl_memory_desc_t want;
        if (!dnnl_memory_desc_init_by_tag(&want, 4, sd, dnnl_f32, native_tag(k, 4)) &&
            dnnl_memory_desc_equal(&want, &got))
            s->native = k;
    }
}

/* What KN_LAYOUT_NATIVE stands for in this session (probed on first use). */
static int native_layout(struct kn_dnnl_session *s)
{
    if (s->native == NATIVE_UNKNOWN) probe_native(s);
    return s->native;
}

int kn_dnnl_native_block(kn_dnnl_session *s)
{
    switch (native_layout(s)) {
    case NATIVE_BLOCK8: return 8;
    case NATIVE_BLOCK16: return 16;
    case NATIVE_NHWC: return 0;
    default: return -1;
    }
}

/* True if the session's layout stores a tensor of these dims in its plain
 * byte size: a blocked layout only when the channels fill whole blocks. */
static bool native_fits(kn_dnnl_session *s, const dnnl_dims_t dims)
{
    int b = kn_dnnl_native_block(s);
    return b <= 0 || dims[1] % b == 0;
}

/* The user-side descriptor of an activation in `layout` (KN_LAYOUT_*;
 * KN_LAYOUT_NATIVE is plain where the session's layout would pad it). */
static int act_md(struct kn_dnnl_session *s, int32_t layout, dnnl_memory_desc_t *md, int nd, const dnnl_dims_t dims,
                  const char *what)
{
    if (layout == KN_LAYOUT_PLAIN || nd < 3 || nd > 5 || !native_fits(s, dims)) {
        dnnl_dims_t st;
        int64_t str = 1;
        for (int i = nd - 1; i >= 0; i--) st[i] = str, str *= dims[i] > 0 ? dims[i] : 1;
        DN(dnnl_memory_desc_init_by_strides(md, nd, dims, dnnl_f32, st), what);
        return KN_OK;
    }
    DN(dnnl_memory_desc_init_by_tag(md, nd, dims, dnnl_f32, native_tag(native_layout(s), nd)), what);
    /* the compiler planned plain-sized buffers (native_fits: a safety net) */
    dnnl_dims_t st;
    int64_t str = 1;
    for (int i = nd - 1; i >= 0; i--) st[i] = str, str *= dims[i];
    dnnl_memory_desc_t plain;
    DN(dnnl_memory_desc_init_by_strides(&plain, nd, dims, dnnl_f32, st), what);
    if (dnnl_memory_desc_get_size(md) != dnnl_memory_desc_get_size(&plain))
        return kn_error(KN_ERR_INVALID, "oneDNN record: %s in the native layout is larger than planned", what);
    return KN_OK;
}

/* Checks a tensor of a record: f32, rank in range, positive dims, no overflow. */
static int check_tensor(const kn_abi_tensor *t, const char *what, int min_rank, int max_rank)
{
    if (t->dtype != KN_F32)
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN record: %s has dtype %s; only f32 is supported", what,
                        kn_dtype_name(t->dtype));
    if (t->rank < min_rank || t->rank > max_rank)
        return kn_error(KN_ERR_INVALID, "oneDNN record: %s has rank %d, expected %d..%d", what, t->rank, min_rank,
                        max_rank);
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] <= 0 || t->dims[i] > (INT64_C(1) << 40))
            return kn_error(KN_ERR_INVALID, "oneDNN record: %s dim %d is %lld", what, i, (long long)t->dims[i]);
        if (__builtin_mul_overflow(n, t->dims[i], &n) || n > (INT64_MAX / 8))
            return kn_error(KN_ERR_INVALID, "oneDNN record: %s is too large", what);
    }
    return KN_OK;
}

static int64_t numel(const kn_abi_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

static bool has_bias(const kn_abi_dnnl *rec) { return !(rec->bias.rank == 0 && rec->bias.nbytes == 0); }

/* Pointer to a constant (KN_LOC_WEIGHTS) tensor, or NULL if not constant. */
static int const_ptr(const kn_abi_ref *r, const unsigned char *weights, int64_t nbytes, const char *what,
                     const void **out)
{
    *out = NULL;
    if (r->loc != KN_LOC_WEIGHTS) return KN_OK;
    if (!weights) return kn_error(KN_ERR_INVALID, "oneDNN record: constant %s but no weights were given", what);
    if (r->offset < 0 || nbytes < 0)
        return kn_error(KN_ERR_INVALID, "oneDNN record: %s at weight offset %lld", what, (long long)r->offset);
    (void)nbytes; /* the artifact loader bounds-checked offset + nbytes */
    *out = weights + r->offset;
    return KN_OK;
}

/* ---- session ------------------------------------------------------------------ */

int kn_dnnl_session_init(kn_dnnl_session **out)
{
    if (!out) return kn_error(KN_ERR_INVALID, "kn_dnnl_session_init: NULL argument");
    *out = NULL;
    kn_dnnl_session *s = calloc(1, sizeof *s);
    if (!s) return kn_error(KN_ERR_NOMEM, "out of memory");
    dnnl_status_t st = dnnl_engine_create(&s->engine, dnnl_cpu, 0);
    if (st != dnnl_success) {
        free(s);
        return dnnl_fail(st, "creating the CPU engine");
    }
    st = dnnl_stream_create(&s->stream, s->engine, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        dnnl_engine_destroy(s->engine);
        free(s);
        return dnnl_fail(st, "creating a stream");
    }
    pthread_once(&g_omp_once, find_omp);
    *out = s;
    return KN_OK;
}

void kn_dnnl_session_free(kn_dnnl_session *s)
{
    if (!s) return;
    if (s->stream) dnnl_stream_destroy(s->stream);
    if (s->engine) dnnl_engine_destroy(s->engine);
    for (int i = 0; i < 3; i++) free(s->act[i]);
    free(s);
}

/* ---- primitive creation ------------------------------------------------------ */

static void run_free(prim_run *r)
{
    if (r->prim) dnnl_primitive_destroy(r->prim);
    if (r->scratch_mem) dnnl_memory_destroy(r->scratch_mem);
    free(r->scratch);
    memset(r, 0, sizeof *r);
}

/* Creates the primitive of pd (which it takes over) with its own scratchpad. */
static int run_make(kn_dnnl_session *s, dnnl_primitive_desc_t pd, prim_run *r, const char *what)
{
    dnnl_status_t st = dnnl_primitive_create(&r->prim, pd);
    if (st != dnnl_success) {
        dnnl_primitive_desc_destroy(pd);
        return dnnl_fail(st, what);
    }
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t n = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (n > 0) {
        r->scratch = alloc64(n);
        if (!r->scratch) st = dnnl_out_of_memory;
        else st = dnnl_memory_create(&r->scratch_mem, smd, s->engine, r->scratch);
    }
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return dnnl_fail(st, "allocating a scratchpad");
    return KN_OK;
}

static int run_exec(kn_dnnl_session *s, prim_run *r, dnnl_exec_arg_t *args, int nargs, const char *what)
{
    if (r->scratch_mem) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, r->scratch_mem};
    DN(dnnl_primitive_execute(r->prim, s->stream, nargs, args), what);
    return KN_OK;
}

static dnnl_primitive_attr_t user_scratch_attr(void)
{
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return NULL;
    }
    return attr;
}

/* Creates a reorder from → to (user scratchpad) in r. */
static int make_reorder(kn_dnnl_session *s, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                        prim_run *r, const char *what)
{
    dnnl_primitive_attr_t attr = user_scratch_attr();
    if (!attr) return kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
    dnnl_primitive_desc_t rpd;
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&rpd, from, s->engine, to, s->engine, attr);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return dnnl_fail(st, what);
    return run_make(s, rpd, r, what);
}

/* Grows the session's activation buffer i to n bytes (creation time only). */
static int session_reserve(kn_dnnl_session *s, int i, size_t n)
{
    if (n <= s->act_cap[i]) return KN_OK;
    void *p = alloc64(n);
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory for a %zu-byte oneDNN activation buffer", n);
    free(s->act[i]);
    s->act[i] = p;
    s->act_cap[i] = n;
    return KN_OK;
}

/* Fills attr's post-ops from the record, after a binary add of `bias_md`
 * when given (a bias that the output scale must not scale). With res_md,
 * the record's residual sum becomes a binary add of a tensor described by
 * res_md (its index among the post-ops in *res_idx); otherwise a sum. */
static int set_post_ops_res(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *bias_md,
                            const dnnl_memory_desc_t *res_md, bool *has_sum, int *res_idx)
{
    *has_sum = false;
    if (res_idx) *res_idx = -1;
    if (rec->n_post < 0 || rec->n_post > 4)
        return kn_error(KN_ERR_INVALID, "oneDNN record: %d post-ops (at most 4)", rec->n_post);
    if (rec->n_post == 0 && !bias_md) return KN_OK;
    dnnl_post_ops_t po;
    DN(dnnl_post_ops_create(&po), "creating post-ops");
    dnnl_status_t st = dnnl_success;
    if (bias_md) st = dnnl_post_ops_append_binary(po, dnnl_binary_add, bias_md);
    int bad = 0;
    for (int i = 0; i < rec->n_post && st == dnnl_success && !bad; i++) {
        const kn_abi_post *p = &rec->post[i];
        switch (p->kind) {
        case KN_POST_NONE: break;
        case KN_POST_RELU: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0.f, 0.f); break;
        case KN_POST_LEAKY_RELU: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, p->alpha, 0.f); break;
        case KN_POST_CLIP: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_clip_v2, p->alpha, p->beta); break;
        case KN_POST_SIGMOID: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_logistic, 0.f, 0.f); break;
        case KN_POST_GELU_ERF: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_gelu_erf, 0.f, 0.f); break;
        case KN_POST_GELU_TANH: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_gelu_tanh, 0.f, 0.f); break;
        case KN_POST_TANH: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_tanh, 0.f, 0.f); break;
        case KN_POST_HARDSWISH: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_hardswish, 0.f, 0.f); break;
        case KN_POST_SUM:
            if (*has_sum || (res_idx && *res_idx >= 0)) bad = 2;
            else if (res_md && res_idx) {
                *res_idx = dnnl_post_ops_len(po);
                st = dnnl_post_ops_append_binary(po, dnnl_binary_add, res_md);
            } else {
                st = dnnl_post_ops_append_sum(po, 1.f);
                *has_sum = true;
            }
            break;
        default: bad = 1; break;
        }
        if (bad == 1) {
            dnnl_post_ops_destroy(po);
            return kn_error(KN_ERR_INVALID, "oneDNN record: post-op %d has unknown kind %d", i, p->kind);
        }
    }
    if (bad == 2) {
        dnnl_post_ops_destroy(po);
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN record: more than one sum post-op");
    }
    if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_post_ops_destroy(po);
    if (st != dnnl_success) return dnnl_fail(st, "appending post-ops");
    return KN_OK;
}

static int set_post_ops(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *bias_md,
                        bool *has_sum)
{
    return set_post_ops_res(rec, attr, bias_md, NULL, has_sum, NULL);
}

/* oneDNN's implementation for op_desc with attr's post-ops into impl; false
 * if oneDNN offers none, or (with dst) if it would not write dst in `dst`. */
static bool impl_of(kn_dnnl_session *s, const void *op_desc, dnnl_primitive_attr_t attr,
                    const dnnl_memory_desc_t *dst, char *impl, size_t n)
{
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_desc_create(&pd, op_desc, attr, s->engine, NULL) != dnnl_success) return false;
    const char *name = NULL;
    bool ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name &&
              (!dst || dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), dst));
    if (ok) snprintf(impl, n, "%s", name);
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

/* The post-ops of a primitive with a residual in res_md (the caller's
 * layout of the residual and of dst): the residual sum as a binary add that
 * reads the residual where it is, when oneDNN runs op_desc so with the same
 * kernel as with a sum post-op, writing dst in res_md; otherwise the sum
 * post-op, for which the residual is first copied into dst at every run (a
 * single-threaded copy of the whole output: 4-5% of ResNet-50's time).
 * The same kernel, because with a binary add oneDNN may pick a slower one
 * (a gemm-based convolution for a plain dst, 20x slower). */
static int set_residual_post_ops(kn_dnnl_session *s, kn_dnnl_prim *p, const kn_abi_dnnl *rec, const void *op_desc,
                                 dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *res_md, bool *has_sum)
{
    int idx = -1, st = set_post_ops(rec, attr, NULL, has_sum);
    char with_sum[48], with_add[48];
    if (st || !*has_sum || !res_md || !impl_of(s, op_desc, attr, res_md, with_sum, sizeof with_sum)) {
        kn_error_clear();
        return st;
    }
    /* the sum variant too, for runs in place (main_sum) */
    dnnl_primitive_attr_t sum_attr = NULL;
    if (dnnl_primitive_attr_clone(&sum_attr, attr) != dnnl_success)
        return kn_error(KN_ERR_NOMEM, "oneDNN: copying attributes failed");
    bool ok = !set_post_ops_res(rec, attr, NULL, res_md, has_sum, &idx) && idx >= 0 &&
              impl_of(s, op_desc, attr, res_md, with_add, sizeof with_add) && !strcmp(with_sum, with_add);
    dnnl_primitive_desc_t sum_pd = NULL;
    if (ok && dnnl_primitive_desc_create(&sum_pd, op_desc, sum_attr, s->engine, NULL) != dnnl_success) ok = false;
    dnnl_primitive_attr_destroy(sum_attr);
    if (ok && (st = run_make(s, sum_pd, &p->main_sum, "creating the in-place variant"))) return st;
    if (!ok) {
        kn_error_clear();
        return set_post_ops(rec, attr, NULL, has_sum);
    }
    p->res_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1;
    p->res_bytes = dnnl_memory_desc_get_size(res_md);
    DN(dnnl_memory_create(&p->m_res, res_md, s->engine, DNNL_MEMORY_NONE), "creating the residual memory");
    /* when the residual overlaps dst other than exactly (in place runs
     * main_sum), the kernel would read back its own partial sums: the
     * residual is copied aside first, into the dst-reorder buffer, which this
     * primitive does not use (its dst is in res_md, the caller's layout) */
    return session_reserve(s, 1, p->res_bytes);
}

/* Sets up the weights memory: the primitive's layout `want` vs the user's
 * `user`. Constant weights are reordered now into wei_buf; others get a
 * reorder primitive run at each exec (or are bound directly when the layouts
 * agree). */
static int setup_weights(kn_dnnl_session *s, kn_dnnl_prim *p, const dnnl_memory_desc_t *user,
                         const dnnl_memory_desc_t *want, const void *wconst)
{
    p->wei_const = wconst != NULL;
    p->wei_reorder = !dnnl_memory_desc_equal(user, want);
    if (!p->wei_reorder) {
        /* bound at exec (or now, for constants) */
        DN(dnnl_memory_create(&p->m_wei, want, s->engine, (void *)wconst), "creating the weights memory");
        return KN_OK;
    }
    size_t n = dnnl_memory_desc_get_size(want);
    p->wei_buf = alloc64(n);
    if (!p->wei_buf) return kn_error(KN_ERR_NOMEM, "out of memory for %zu bytes of reordered weights", n);
    DN(dnnl_memory_create(&p->m_wei, want, s->engine, p->wei_buf), "creating the weights memory");
    DN(dnnl_memory_create(&p->m_wei_user, user, s->engine, (void *)wconst), "creating the user weights memory");
    int rc = make_reorder(s, user, want, &p->reorder, "creating the weights reorder");
    if (rc || !wconst) return rc;
    /* constant: reorder once, then the reorder is not needed any more */
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, p->m_wei_user}, {DNNL_ARG_TO, p->m_wei}};
    if ((rc = run_exec(s, &p->reorder, args, 2, "reordering the weights"))) return rc;
    DN(dnnl_stream_wait(s->stream), "reordering the weights");
    run_free(&p->reorder);
    dnnl_memory_destroy(p->m_wei_user);
    p->m_wei_user = NULL;
    return KN_OK;
}

/* Creates pd from op_desc + attr, then the primitive and every memory. */
static int finish_prim(kn_dnnl_session *s, kn_dnnl_prim *p, const void *op_desc, dnnl_primitive_attr_t attr,
                       const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *wei_user,
                       const dnnl_memory_desc_t *bias_md, const dnnl_memory_desc_t *dst_md,
                       const dnnl_memory_desc_t *post_md, const void *wconst, const char *what)
{
    dnnl_primitive_desc_t pd;
    DN(dnnl_primitive_desc_create(&pd, op_desc, attr, s->engine, NULL), what);
    dnnl_memory_desc_t want = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_desc_t src_pd = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    dnnl_memory_desc_t dst_pd = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(p->impl, sizeof p->impl, "%s", impl);
    int rc = run_make(s, pd, &p->main, what);
    if (rc) return rc;
    p->src_reorder = !dnnl_memory_desc_equal(src_md, &src_pd);
    p->dst_reorder = !dnnl_memory_desc_equal(dst_md, &dst_pd);
    DN(dnnl_memory_create(&p->m_src, &src_pd, s->engine, DNNL_MEMORY_NONE), "creating the src memory");
    DN(dnnl_memory_create(&p->m_dst, &dst_pd, s->engine, DNNL_MEMORY_NONE), "creating the dst memory");
    if (p->src_reorder) {
        DN(dnnl_memory_create(&p->m_src_user, src_md, s->engine, DNNL_MEMORY_NONE), "creating the src memory");
        if ((rc = make_reorder(s, src_md, &src_pd, &p->src_ro, "creating the src reorder")) ||
            (rc = session_reserve(s, 0, dnnl_memory_desc_get_size(&src_pd))))
            return rc;
    }
    if (p->dst_reorder) {
        DN(dnnl_memory_create(&p->m_dst_user, dst_md, s->engine, DNNL_MEMORY_NONE), "creating the dst memory");
        if ((rc = make_reorder(s, &dst_pd, dst_md, &p->dst_ro, "creating the dst reorder")) ||
            (rc = session_reserve(s, 1, dnnl_memory_desc_get_size(&dst_pd))))
            return rc;
    }
    /* the sum post-op accumulates into dst: the residual is copied there
     * first, reordered when its layout is not the primitive's dst layout */
    const dnnl_memory_desc_t *pm = post_md ? post_md : dst_md;
    if (p->has_sum && !dnnl_memory_desc_equal(pm, &dst_pd)) {
        DN(dnnl_memory_create(&p->m_post_user, pm, s->engine, DNNL_MEMORY_NONE), "creating the sum memory");
        if ((rc = make_reorder(s, pm, &dst_pd, &p->sum_ro, "creating the residual reorder"))) return rc;
        /* in place, the residual is moved aside before the reorder (exec) */
        p->post_bytes = dnnl_memory_desc_get_size(pm);
        if (!p->dst_reorder && (rc = session_reserve(s, 1, p->post_bytes))) return rc;
    }
    if (bias_md) DN(dnnl_memory_create(&p->m_bias, bias_md, s->engine, DNNL_MEMORY_NONE), "creating the bias memory");
    p->dst_bytes = dnnl_memory_desc_get_size(dst_md);
    if (p->main_sum.prim) { /* it shares the weights: only with the same layout of them */
        const_dnnl_primitive_desc_t spd = NULL;
        if (dnnl_primitive_get_primitive_desc(p->main_sum.prim, &spd) != dnnl_success ||
            !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(spd, dnnl_query_weights_md, 0), &want))
            run_free(&p->main_sum);
    }
    return setup_weights(s, p, wei_user, &want, wconst);
}

/* True for a pointwise conv: 1x1 kernel, stride 1, no padding, one group. */
static bool is_pointwise(const kn_abi_dnnl *rec)
{
    if (rec->groups != 1) return false;
    for (int i = 0; i < rec->spatial; i++)
        if (rec->wei.dims[2 + i] != 1 || rec->strides[i] != 1 || rec->pads_begin[i] || rec->pads_end[i] ||
            rec->src.dims[2 + i] != rec->dst.dims[2 + i])
            return false;
    return true;
}

/* KN_ERR_UNSUPPORTED if oneDNN would run op_desc with a reference
 * (unoptimized) kernel. */
static int reject_reference(kn_dnnl_session *s, const void *op_desc, dnnl_primitive_attr_t attr)
{
    char impl[48];
    if (!impl_of(s, op_desc, attr, NULL, impl, sizeof impl) || !strncmp(impl, "ref", 3))
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN: no optimized kernel for the 1x1 convolution");
    return KN_OK;
}

/* A pointwise conv on plain NC(D)HW is the batched matmul W[O, C] x X[C, HW]:
 * no activation reorders (oneDNN's conv kernels want channels-last). */
static int create_pointwise(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights,
                            kn_dnnl_prim *p)
{
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0], HW = 1;
    for (int i = 0; i < rec->spatial; i++) HW *= rec->src.dims[2 + i];
    dnnl_dims_t ad = {1, O, C}, xd = {N, C, HW}, dd = {N, O, HW}, bd = {1, O, 1};
    dnnl_memory_desc_t a_md, x_md, d_md, b_md;
    int st;
    if ((st = plain_md(&a_md, 3, ad, "describing the 1x1 conv weights")) ||
        (st = plain_md(&x_md, 3, xd, "describing the 1x1 conv src")) ||
        (st = plain_md(&d_md, 3, dd, "describing the 1x1 conv dst")) ||
        (st = plain_md(&b_md, 3, bd, "describing the 1x1 conv bias")))
        return st;
    bool hb = has_bias(rec);
    const void *wconst, *bconst = NULL;
    if ((st = const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &wconst))) return st;
    if (hb && (st = const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &bconst))) return st;
    dnnl_primitive_attr_t attr = user_scratch_attr();
    if (!attr) return kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
    dnnl_matmul_desc_t md;
    /* a per-row matmul bias gets oneDNN's reference kernel; a binary add
     * post-op broadcast over rows keeps the brgemm one */
    st = set_post_ops(rec, attr, hb ? &b_md : NULL, &p->has_sum);
    if (!st) {
        dnnl_status_t ds = dnnl_matmul_desc_init(&md, &a_md, &x_md, NULL, &d_md);
        if (ds != dnnl_success) st = dnnl_fail(ds, "describing the 1x1 convolution");
    }
    if (!st) st = reject_reference(s, &md, attr);
    if (!st) {
        p->has_bias = hb;
        p->bias_const = bconst;
        p->bias_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
        p->swap = true;
        p->swap_const = wconst;
        st = finish_prim(s, p, &md, attr, &a_md, &x_md, hb ? &b_md : NULL, &d_md, NULL, NULL,
                         "creating the 1x1 convolution");
    }
    dnnl_primitive_attr_destroy(attr);
    return st;
}

/* True if rec's post-ops add a residual (a malformed count: no). */
static bool record_has_sum(const kn_abi_dnnl *rec)
{
    return rec->n_post >= 0 && rec->n_post <= 4 && kn_fused_has_sum(rec->post, rec->n_post);
}

/* True if rec may run by one of kiln's own algorithms (Winograd, im2col):
 * the record allows it, and its activations (the residual too) are in the
 * session's blocked layout. */
static bool own_algo_allowed(const kn_abi_dnnl *rec)
{
    return rec->conv_algo != KN_CONV_ALGO_DIRECT && rec->src_layout == KN_LAYOUT_NATIVE &&
           rec->dst_layout == KN_LAYOUT_NATIVE && (!record_has_sum(rec) || rec->post_layout == KN_LAYOUT_NATIVE);
}

/* A 3x3 stride-1 conv between two activations in the session's layout
 * (nChw8c, nChw16c or NHWC) runs by Winograd (winograd.c) when its cost
 * model says that is faster for p's thread count, unless the record asks
 * for direct convolution; KN_ERR_UNSUPPORTED otherwise. */
static int try_winograd(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p)
{
    if (!own_algo_allowed(rec)) return KN_ERR_UNSUPPORTED;
    int tile = kn_wino_tile(rec, p->nthr);
    if (!tile) return KN_ERR_UNSUPPORTED;
    int block = kn_dnnl_native_block(s);
    if (block < 0) return KN_ERR_UNSUPPORTED; /* plain: no layout it takes */
    int st = kn_wino_create(rec, weights, tile, block, &p->wino);
    if (!st) st = session_reserve(s, 2, kn_wino_scratch_bytes(p->wino));
    return st;
}

/* After p->pw was made (status st) for rec, conv or matmul: a residual that
 * overlaps dst other than exactly is copied aside at exec, into act[1]. */
static int pw_made(kn_dnnl_session *s, const kn_abi_dnnl *rec, kn_dnnl_prim *p, int st)
{
    p->dst_bytes = (size_t)rec->dst.nbytes;
    return !st && record_has_sum(rec) ? session_reserve(s, 1, p->dst_bytes) : st;
}

/* A 1x1 conv without padding between two NHWC activations (the session's layout
 * on AVX-512 CPUs) runs by pointwise.c, unless the record asks for oneDNN's
 * direct convolution; KN_ERR_UNSUPPORTED otherwise. */
static int try_pointwise(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p)
{
    if (!own_algo_allowed(rec) || kn_dnnl_native_block(s) != 0 || !kn_pw_supported(rec) || !kn_pw_worth(rec))
        return KN_ERR_UNSUPPORTED;
    return pw_made(s, rec, p, kn_pw_create(rec, weights, &p->pw));
}

/* ---- im2col ----------------------------------------------------------------------------- */

/* Largest output image (pixels per image) run by im2col. On this class of
 * machine (AVX2, one thread and two), measured against oneDNN's direct
 * kernel at batch 1: 7x7 outputs 1.1-1.6x faster, 14x14 1.1-1.3x, 28x28
 * 0.9x (slower). Not for channels-last activations (AVX-512 CPUs, where
 * oneDNN's brgconv kernels exchange NHWC): there its direct kernel keeps
 * up (ResNet-50's 7x7 and 14x14 layers within +-8%, either way). */
enum { IM2COL_MAX_PIXELS = 256 };
/* Largest column buffer (ResNet-50 at batch 8 needs 14.5 MB). */
#define IM2COL_MAX_BYTES (INT64_C(256) << 20)

/* The patch copy of a 2-D conv whose activations are in a channel-blocked
 * layout [N][C/b][H][W][b]. The columns are the 1x1 convolution's src
 * [N][K/b][OH*OW][b], K = kh * kw * C in the order (tap, channel block):
 * block j holds channels (j % (C/b)) * b .. of tap j / (C/b). */
struct im2col {
    int64_t N, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, b;
    float *wei; /* [O][K] in that order: the 1x1 convolution's weights */
};

typedef struct im2col_run {
    const struct im2col *g;
    const float *src;
    float *col;
} im2col_run;

/* Column blocks [lo, hi) of the flattened (image, tap, channel block). */
static int im2col_chunk(void *args, int64_t lo, int64_t hi)
{
    const im2col_run *r = args;
    const struct im2col *g = r->g;
    int64_t cb = g->C / g->b, taps = g->KH * g->KW, plane = g->H * g->W * g->b, M = g->OH * g->OW;
    size_t vec = (size_t)g->b * sizeof(float);
    for (int64_t it = lo; it < hi; it++) {
        int64_t n = it / (taps * cb), tap = it / cb % taps, j = it % cb;
        int64_t kh = tap / g->KW, kw = tap % g->KW;
        const float *x = r->src + (n * cb + j) * plane;
        float *out = r->col + it * M * g->b;
        for (int64_t oh = 0; oh < g->OH; oh++) {
            int64_t ih = oh * g->sh - g->ph + kh * g->dh;
            for (int64_t ow = 0; ow < g->OW; ow++, out += g->b) {
                int64_t iw = ow * g->sw - g->pw + kw * g->dw;
                if (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W) memcpy(out, x + (ih * g->W + iw) * g->b, vec);
                else memset(out, 0, vec);
            }
        }
    }
    return KN_OK;
}

static void im2col_free(struct im2col *g)
{
    if (!g) return;
    free(g->wei);
    free(g);
}

/* A 2-D conv (one group, not 1x1 stride 1) between two activations in the
 * session's blocked layout, with constant weights and at most
 * IM2COL_MAX_PIXELS output pixels per image, runs as im2col + oneDNN's 1x1
 * kernel, unless the record asks for direct convolution; KN_ERR_UNSUPPORTED
 * (p untouched) when it does not qualify or oneDNN has no optimized 1x1
 * kernel for it. */
static int try_im2col(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                      dnnl_primitive_attr_t attr)
{
    if (!own_algo_allowed(rec) || rec->spatial != 2 || rec->groups != 1 || rec->wei_ref.loc != KN_LOC_WEIGHTS ||
        !weights)
        return KN_ERR_UNSUPPORTED;
    int64_t b = kn_dnnl_native_block(s);
    if (b != 8 && b != 16) return KN_ERR_UNSUPPORTED; /* blocked layouts only */
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0], KH = rec->wei.dims[2],
            KW = rec->wei.dims[3], OH = rec->dst.dims[2], OW = rec->dst.dims[3];
    bool pointwise = KH == 1 && KW == 1 && rec->strides[0] == 1 && rec->strides[1] == 1;
    if (pointwise || C % b || O % b || OH * OW > IM2COL_MAX_PIXELS) return KN_ERR_UNSUPPORTED;
    int64_t K = C * KH * KW, M = OH * OW, col;
    /* the columns live in a session buffer: not for a huge batch or kernel */
    if (__builtin_mul_overflow(N * M, K, &col) || col > IM2COL_MAX_BYTES / (int64_t)sizeof(float))
        return KN_ERR_UNSUPPORTED;
    if (rec->wei.nbytes != O * K * (int64_t)sizeof(float))
        return kn_error(KN_ERR_INVALID, "oneDNN conv: weights of %lld bytes for [%lld, %lld, %lld, %lld]",
                        (long long)rec->wei.nbytes, (long long)O, (long long)C, (long long)KH, (long long)KW);
    struct im2col *g = calloc(1, sizeof *g);
    if (!g) return kn_error(KN_ERR_NOMEM, "out of memory");
    *g = (struct im2col){.N = N, .C = C, .H = rec->src.dims[2], .W = rec->src.dims[3], .OH = OH, .OW = OW,
                         .KH = KH, .KW = KW, .sh = rec->strides[0], .sw = rec->strides[1],
                         .ph = rec->pads_begin[0], .pw = rec->pads_begin[1], .dh = rec->dilations[0],
                         .dw = rec->dilations[1], .b = b};
    g->wei = alloc64((size_t)(O * K) * sizeof(float));
    if (!g->wei) {
        free(g);
        return kn_error(KN_ERR_NOMEM, "out of memory for %lld bytes of im2col weights", (long long)(O * K * 4));
    }
    /* ONNX [O][C][KH][KW] -> [O][tap][C] */
    const float *w = (const float *)(weights + rec->wei_ref.offset);
    for (int64_t o = 0; o < O; o++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < KH * KW; t++) g->wei[(o * KH * KW + t) * C + c] = w[(o * C + c) * KH * KW + t];
    dnnl_dims_t xd = {N, K, M, 1}, wd = {O, K, 1, 1}, yd = {N, O, M, 1}, bd = {O}, one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t x_md, w_user, w_any, y_md, b_md;
    bool hb = has_bias(rec);
    const void *bconst = NULL;
    int st = KN_OK;
    if (hb && (st = check_tensor(&rec->bias, "conv bias", 1, 1)) == KN_OK && rec->bias.dims[0] != O)
        st = kn_error(KN_ERR_INVALID, "oneDNN conv: bias has %lld values, expected %lld",
                      (long long)rec->bias.dims[0], (long long)O);
    if (!st && hb) st = const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &bconst);
    dnnl_format_tag_t tag = native_tag(native_layout(s), 4);
    if (!st && (dnnl_memory_desc_init_by_tag(&x_md, 4, xd, dnnl_f32, tag) ||
                dnnl_memory_desc_init_by_tag(&y_md, 4, yd, dnnl_f32, tag) ||
                dnnl_memory_desc_init_by_tag(&w_user, 4, wd, dnnl_f32, dnnl_oihw) ||
                dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
                dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a)))
        st = kn_error(KN_ERR_INTERNAL, "oneDNN: describing the im2col convolution failed");
    bool sum = false;
    dnnl_convolution_desc_t cd;
    if (!st && dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &x_md, &w_any,
                                                  hb ? &b_md : NULL, &y_md, one, zero, zero) != dnnl_success)
        st = KN_ERR_UNSUPPORTED;
    if (!st) st = set_residual_post_ops(s, p, rec, &cd, attr, &y_md, &sum);
    if (!st) st = reject_reference(s, &cd, attr);
    if (!st) st = session_reserve(s, 2, (size_t)col * sizeof(float));
    if (st) { /* leave p as it was: the direct path builds it next */
        im2col_free(g);
        if (p->m_res) dnnl_memory_destroy(p->m_res);
        p->m_res = NULL;
        run_free(&p->main_sum);
        return st;
    }
    p->i2c = g;
    p->has_sum = sum;
    p->has_bias = hb;
    p->bias_const = bconst;
    p->bias_arg = DNNL_ARG_BIAS;
    st = finish_prim(s, p, &cd, attr, &x_md, &w_user, hb ? &b_md : NULL, &y_md, NULL, g->wei,
                     "creating the im2col convolution");
    if (!st && p->wei_reorder) { /* reordered into wei_buf: the copy is not needed any more */
        free(g->wei);
        g->wei = NULL;
    }
    char impl[sizeof p->impl];
    snprintf(impl, sizeof impl, "im2col %s", p->impl);
    memcpy(p->impl, impl, sizeof impl);
    return st;
}

static int create_conv(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                       dnnl_primitive_attr_t attr)
{
    int sp = rec->spatial, nd = sp + 2;
    int st;
    if (sp < 1 || sp > 3) return kn_error(KN_ERR_UNSUPPORTED, "oneDNN conv: %d spatial dims (1..3 supported)", sp);
    if ((st = check_tensor(&rec->src, "conv src", nd, nd)) || (st = check_tensor(&rec->wei, "conv weights", nd, nd)) ||
        (st = check_tensor(&rec->dst, "conv dst", nd, nd)))
        return st;
    int64_t g = rec->groups, C = rec->src.dims[1], O = rec->wei.dims[0];
    if (g < 1 || C % g || O % g || rec->wei.dims[1] * g != C || rec->dst.dims[1] != O ||
        rec->dst.dims[0] != rec->src.dims[0])
        return kn_error(KN_ERR_INVALID,
                        "oneDNN conv: groups %lld, src channels %lld, weights [%lld, %lld, ..], dst channels %lld "
                        "do not agree",
                        (long long)g, (long long)C, (long long)O, (long long)rec->wei.dims[1],
                        (long long)rec->dst.dims[1]);
    dnnl_dims_t sd, wd, dd, strides, dil, pl, pr, bd;
    for (int i = 0; i < nd; i++) sd[i] = rec->src.dims[i], dd[i] = rec->dst.dims[i];
    for (int i = 0; i < sp; i++) {
        if (rec->strides[i] < 1 || rec->dilations[i] < 1 || rec->pads_begin[i] < 0 || rec->pads_end[i] < 0)
            return kn_error(KN_ERR_INVALID, "oneDNN conv: spatial dim %d: stride %lld, dilation %lld, pads %lld/%lld",
                            i, (long long)rec->strides[i], (long long)rec->dilations[i],
                            (long long)rec->pads_begin[i], (long long)rec->pads_end[i]);
        strides[i] = rec->strides[i];
        dil[i] = rec->dilations[i] - 1; /* oneDNN counts the holes */
        pl[i] = rec->pads_begin[i];
        pr[i] = rec->pads_end[i];
    }
    if ((st = try_winograd(s, rec, weights, p)) != KN_ERR_UNSUPPORTED) return st;
    kn_error_clear();
    if ((st = try_pointwise(s, rec, weights, p)) != KN_ERR_UNSUPPORTED) return st;
    kn_error_clear();
    if ((st = try_im2col(s, rec, weights, p, attr)) != KN_ERR_UNSUPPORTED) return st;
    kn_error_clear();
    bool plain = rec->src_layout == KN_LAYOUT_PLAIN && rec->dst_layout == KN_LAYOUT_PLAIN &&
                 rec->post_layout == KN_LAYOUT_PLAIN;
    if (plain && is_pointwise(rec)) {
        kn_dnnl_prim keep = *p;
        if ((st = create_pointwise(s, rec, weights, p)) != KN_ERR_UNSUPPORTED) return st;
        /* oneDNN has no matmul for it (bias broadcast?): the conv path then */
        prim_clear(p);
        p->kind = keep.kind, p->rec = keep.rec, p->weights = keep.weights, p->nthr = keep.nthr;
        kn_error_clear();
    }
    /* ONNX [O, C/g, k..] is the same bytes as oneDNN's goi(d)hw [g, O/g, C/g, k..] */
    int wnd = g > 1 ? nd + 1 : nd;
    if (g > 1) {
        wd[0] = g, wd[1] = O / g;
        for (int i = 1; i < nd; i++) wd[i + 1] = rec->wei.dims[i];
    } else {
        for (int i = 0; i < nd; i++) wd[i] = rec->wei.dims[i];
    }
    dnnl_memory_desc_t src_md, dst_md, post_md, wei_user, wei_any, bias_md;
    if ((st = act_md(s, rec->src_layout, &src_md, nd, sd, "the conv src")) ||
        (st = act_md(s, rec->dst_layout, &dst_md, nd, dd, "the conv dst")) ||
        (st = act_md(s, rec->post_layout, &post_md, nd, dd, "the conv residual")) ||
        (st = plain_md(&wei_user, wnd, wd, "describing the conv weights")))
        return st;
    DN(dnnl_memory_desc_init_by_tag(&wei_any, wnd, wd, dnnl_f32, dnnl_format_tag_any), "describing the conv weights");
    /* oneDNN's direct kernels want blocked activations (nChw16c); plain NCHW
     * would get the im2col+GEMM path, several times slower */
    dnnl_memory_desc_t src_any, dst_any;
    DN(dnnl_memory_desc_init_by_tag(&src_any, nd, sd, dnnl_f32, dnnl_format_tag_any), "describing the conv src");
    DN(dnnl_memory_desc_init_by_tag(&dst_any, nd, dd, dnnl_f32, dnnl_format_tag_any), "describing the conv dst");
    bool hb = has_bias(rec);
    if (hb) {
        if ((st = check_tensor(&rec->bias, "conv bias", 1, 1))) return st;
        if (rec->bias.dims[0] != O)
            return kn_error(KN_ERR_INVALID, "oneDNN conv: bias has %lld values, expected %lld",
                            (long long)rec->bias.dims[0], (long long)O);
        bd[0] = O;
        if ((st = plain_md(&bias_md, 1, bd, "describing the conv bias"))) return st;
    }
    const void *wconst, *bconst = NULL;
    if ((st = const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &wconst))) return st;
    if (hb && (st = const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &bconst))) return st;
    p->has_bias = hb;
    p->bias_const = hb ? bconst : NULL;
    p->bias_arg = DNNL_ARG_BIAS;
    dnnl_convolution_desc_t cd;
    DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src_any,
                                                  &wei_any, hb ? &bias_md : NULL, &dst_any, strides, dil, pl, pr),
       "describing the convolution");
    if ((st = set_residual_post_ops(s, p, rec, &cd, attr, rec->post_layout == rec->dst_layout ? &post_md : NULL,
                                    &p->has_sum)))
        return st;
    return finish_prim(s, p, &cd, attr, &src_md, &wei_user, hb ? &bias_md : NULL, &dst_md, &post_md, wconst,
                       "creating the convolution");
}

/* Logical [.., rows, cols] of a stored row-major tensor, padded to nd dims,
 * with the last two swapped when trans. */
static void mm_operand(const kn_abi_tensor *t, int nd, bool trans, dnnl_dims_t dims, dnnl_dims_t strides)
{
    dnnl_dims_t sd, ss;
    int lead = nd - t->rank;
    for (int i = 0; i < nd; i++) sd[i] = i < lead ? 1 : t->dims[i - lead];
    plain_strides(nd, sd, ss);
    for (int i = 0; i < nd; i++) dims[i] = sd[i], strides[i] = ss[i];
    if (trans) {
        dims[nd - 2] = sd[nd - 1], dims[nd - 1] = sd[nd - 2];
        strides[nd - 2] = ss[nd - 1], strides[nd - 1] = ss[nd - 2];
    }
}

/* Weights shared by every batch (x [.., M, K] times a [K, N] matrix, the
 * transformer projection) make one [B*M, K] x [K, N] product: oneDNN then
 * picks a blocked weight layout and its fastest kernel, which it does not for
 * a broadcast batch. Returns the new rank. */
static int collapse_batch(int nd, bool trans_a, dnnl_dims_t sd, dnnl_dims_t ss, dnnl_dims_t wd, dnnl_dims_t ws,
                          dnnl_dims_t dd)
{
    if (nd <= 2 || trans_a) return nd;
    int64_t rows = 1;
    for (int i = 0; i < nd - 2; i++) {
        if (wd[i] != 1 || sd[i] != dd[i]) return nd;
        rows *= sd[i];
    }
    int64_t M = sd[nd - 2], K = sd[nd - 1], N = dd[nd - 1];
    sd[0] = rows * M, sd[1] = K, ss[0] = K, ss[1] = 1;
    dd[0] = rows * M, dd[1] = N;
    wd[0] = wd[nd - 2], wd[1] = wd[nd - 1], ws[0] = ws[nd - 2], ws[1] = ws[nd - 1];
    return 2;
}

/* A 2-D product by constant weights, x[M, K] x W[K, N] (+ bias[N]), as the
 * 1x1 convolution of a 1 x K x M x 1 image stored channels-last (which is
 * x's row-major bytes) into 1 x N x M x 1 (y's). Without AVX-512, oneDNN's
 * f32 matmul is its jit sgemm, which packs the weights at every call; its
 * 1x1 convolution reorders them once into a blocked layout and runs
 * 1.1-1.6x faster on transformer projections (AVX2, one thread).
 * KN_ERR_UNSUPPORTED (p untouched) when oneDNN offers no optimized kernel. */
static int create_matmul_as_conv(kn_dnnl_session *s, const kn_abi_dnnl *rec, kn_dnnl_prim *p, const dnnl_dims_t sd,
                                 const dnnl_dims_t ss, const dnnl_dims_t ws, int64_t N, const void *wconst,
                                 const void *bconst)
{
    int64_t M = sd[0], K = sd[1];
    dnnl_dims_t xd = {1, K, M, 1}, xs = {M * ss[0], ss[1], ss[0], ss[0]};
    dnnl_dims_t wd = {N, K, 1, 1}, wst = {ws[1], ws[0], 1, 1};
    dnnl_dims_t yd = {1, N, M, 1}, ys = {M * N, 1, N, N}, bd = {N}, one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t x_md, w_user, w_any, y_md, b_md;
    bool hb = has_bias(rec);
    DN(dnnl_memory_desc_init_by_strides(&x_md, 4, xd, dnnl_f32, xs), "describing the matmul src");
    DN(dnnl_memory_desc_init_by_strides(&w_user, 4, wd, dnnl_f32, wst), "describing the matmul weights");
    DN(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any), "describing the matmul weights");
    DN(dnnl_memory_desc_init_by_strides(&y_md, 4, yd, dnnl_f32, ys), "describing the matmul dst");
    DN(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a), "describing the matmul bias");
    dnnl_primitive_attr_t attr = user_scratch_attr();
    if (!attr) return kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
    bool has_sum = false;
    dnnl_convolution_desc_t cd;
    int st = KN_OK;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &x_md, &w_any,
                                           hb ? &b_md : NULL, &y_md, one, zero, zero) != dnnl_success)
        st = KN_ERR_UNSUPPORTED;
    if (!st) st = set_residual_post_ops(s, p, rec, &cd, attr, &y_md, &has_sum);
    if (!st) st = reject_reference(s, &cd, attr);
    if (!st) {
        p->has_sum = has_sum;
        p->has_bias = hb;
        p->bias_const = bconst;
        p->bias_arg = DNNL_ARG_BIAS;
        st = finish_prim(s, p, &cd, attr, &x_md, &w_user, hb ? &b_md : NULL, &y_md, NULL, wconst,
                         "creating the matmul (as a 1x1 convolution)");
    }
    dnnl_primitive_attr_destroy(attr);
    return st;
}

/* True if oneDNN runs this matmul with its jit sgemm ("gemm:jit"), which
 * packs the weights at every call (no brgemm kernel without AVX-512). */
static bool matmul_is_sgemm(kn_dnnl_session *s, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                            const dnnl_memory_desc_t *dst)
{
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (dnnl_matmul_desc_init(&md, src, wei, NULL, dst) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, NULL, s->engine, NULL) != dnnl_success)
        return false;
    const char *impl = NULL;
    bool sgemm = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
                 !strncmp(impl, "gemm:", 5);
    dnnl_primitive_desc_destroy(pd);
    return sgemm;
}

static int create_matmul(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights,
                         kn_dnnl_prim *p, dnnl_primitive_attr_t attr)
{
    int st;
    if ((st = check_tensor(&rec->src, "matmul src", 2, 8)) || (st = check_tensor(&rec->wei, "matmul weights", 2, 8)) ||
        (st = check_tensor(&rec->dst, "matmul dst", 2, 8)))
        return st;
    int nd = rec->dst.rank;
    if (rec->src.rank > nd || rec->wei.rank > nd)
        return kn_error(KN_ERR_INVALID, "oneDNN matmul: operand ranks %d and %d exceed the dst rank %d",
                        rec->src.rank, rec->wei.rank, nd);
    if (kn_pw_matmul_supported(rec) && kn_pw_matmul_worth(rec)) /* kiln's own kernel (pointwise.c) */
        return pw_made(s, rec, p, kn_pw_create_matmul(rec, weights, &p->pw));
    dnnl_dims_t sd, ss, wd, ws, dd, bd;
    mm_operand(&rec->src, nd, rec->trans_a, sd, ss);
    mm_operand(&rec->wei, nd, rec->trans_b, wd, ws);
    for (int i = 0; i < nd; i++) dd[i] = rec->dst.dims[i];
    int64_t M = sd[nd - 2], K = sd[nd - 1], N = wd[nd - 1];
    if (wd[nd - 2] != K || dd[nd - 2] != M || dd[nd - 1] != N)
        return kn_error(KN_ERR_INVALID, "oneDNN matmul: [%lld x %lld] x [%lld x %lld] does not give [%lld x %lld]",
                        (long long)M, (long long)K, (long long)wd[nd - 2], (long long)N, (long long)dd[nd - 2],
                        (long long)dd[nd - 1]);
    for (int i = 0; i < nd - 2; i++)
        if ((sd[i] != 1 && sd[i] != dd[i]) || (wd[i] != 1 && wd[i] != dd[i]))
            return kn_error(KN_ERR_INVALID, "oneDNN matmul: batch dim %d: %lld and %lld do not broadcast to %lld", i,
                            (long long)sd[i], (long long)wd[i], (long long)dd[i]);
    nd = collapse_batch(nd, rec->trans_a, sd, ss, wd, ws, dd);
    dnnl_memory_desc_t src_md, wei_user, wei_any, dst_md, bias_md;
    DN(dnnl_memory_desc_init_by_strides(&src_md, nd, sd, dnnl_f32, ss), "describing the matmul src");
    DN(dnnl_memory_desc_init_by_strides(&wei_user, nd, wd, dnnl_f32, ws), "describing the matmul weights");
    if ((st = plain_md(&dst_md, nd, dd, "describing the matmul dst"))) return st;
    const void *wconst, *bconst = NULL;
    if ((st = const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &wconst))) return st;
    /* only constant weights are worth a one-time reorder into a blocked layout */
    if (wconst) DN(dnnl_memory_desc_init_by_tag(&wei_any, nd, wd, dnnl_f32, dnnl_format_tag_any), "describing weights");
    else wei_any = wei_user;
    bool hb = has_bias(rec);
    if (hb) {
        if ((st = check_tensor(&rec->bias, "matmul bias", 1, 2))) return st;
        if (numel(&rec->bias) != N || rec->bias.dims[rec->bias.rank - 1] != N)
            return kn_error(KN_ERR_INVALID, "oneDNN matmul: bias must hold %lld values (one per column)", (long long)N);
        for (int i = 0; i < nd; i++) bd[i] = i == nd - 1 ? N : 1;
        if ((st = plain_md(&bias_md, nd, bd, "describing the matmul bias"))) return st;
        if ((st = const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &bconst))) return st;
    }
    if (nd == 2 && wconst && !rec->trans_a && rec->alpha == 1.0f && matmul_is_sgemm(s, &src_md, &wei_any, &dst_md)) {
        kn_dnnl_prim keep = *p;
        if ((st = create_matmul_as_conv(s, rec, p, sd, ss, ws, N, wconst, bconst)) != KN_ERR_UNSUPPORTED) return st;
        /* no optimized 1x1 convolution for it: the matmul then */
        prim_clear(p);
        p->kind = keep.kind, p->rec = keep.rec, p->weights = keep.weights, p->nthr = keep.nthr;
        kn_error_clear();
    }
    p->has_bias = hb;
    p->bias_const = bconst;
    p->bias_arg = DNNL_ARG_BIAS;
    /* oneDNN scales the bias with the product; Gemm adds C after alpha, so
     * with alpha the bias becomes a binary add post-op run after the scale */
    bool scaled = rec->alpha != 1.0f, bias_post = hb && scaled;
    if (scaled) {
        if (!(rec->alpha == rec->alpha)) return kn_error(KN_ERR_INVALID, "oneDNN matmul: alpha is NaN");
        float a = rec->alpha;
        DN(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &a), "setting the matmul output scale");
    }
    if (bias_post) p->bias_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
    if ((st = set_post_ops(rec, attr, bias_post ? &bias_md : NULL, &p->has_sum))) return st;
    const dnnl_memory_desc_t *prim_bias = hb && !bias_post ? &bias_md : NULL;
    dnnl_matmul_desc_t md;
    DN(dnnl_matmul_desc_init(&md, &src_md, &wei_any, prim_bias, &dst_md), "describing the matmul");
    return finish_prim(s, p, &md, attr, &src_md, &wei_user, hb ? &bias_md : NULL, &dst_md, NULL, wconst,
                       "creating the matmul");
}

/* ---- pooling ------------------------------------------------------------------ */

/* Max or average pooling between activations in the record's layouts (the
 * session's layout between convolutions: no reorder around it). oneDNN's
 * optimized kernels want dst in src's layout (else its reference kernel
 * runs, 10x slower): where the record's differ, the primitive writes that
 * layout into the session's dst buffer and a reorder follows. */
static int create_pool(kn_dnnl_session *s, const kn_abi_dnnl *rec, kn_dnnl_prim *p, dnnl_primitive_attr_t attr)
{
    int sp = rec->spatial, nd = sp + 2, st;
    if (sp < 1 || sp > 3) return kn_error(KN_ERR_UNSUPPORTED, "oneDNN pooling: %d spatial dims (1..3 supported)", sp);
    if ((st = check_tensor(&rec->src, "pooling src", nd, nd)) || (st = check_tensor(&rec->dst, "pooling dst", nd, nd)))
        return st;
    if (rec->src.dims[0] != rec->dst.dims[0] || rec->src.dims[1] != rec->dst.dims[1])
        return kn_error(KN_ERR_INVALID, "oneDNN pooling: src [%lld, %lld, ..] and dst [%lld, %lld, ..] disagree",
                        (long long)rec->src.dims[0], (long long)rec->src.dims[1], (long long)rec->dst.dims[0],
                        (long long)rec->dst.dims[1]);
    dnnl_dims_t sd, dd, strides, kernel, dil, pl, pr;
    for (int i = 0; i < nd; i++) sd[i] = rec->src.dims[i], dd[i] = rec->dst.dims[i];
    for (int i = 0; i < sp; i++) {
        if (rec->strides[i] < 1 || rec->kernel[i] < 1 || rec->dilations[i] < 1 || rec->pads_begin[i] < 0 ||
            rec->pads_end[i] < 0)
            return kn_error(KN_ERR_INVALID,
                            "oneDNN pooling: spatial dim %d: kernel %lld, stride %lld, dilation %lld, pads %lld/%lld", i,
                            (long long)rec->kernel[i], (long long)rec->strides[i], (long long)rec->dilations[i],
                            (long long)rec->pads_begin[i], (long long)rec->pads_end[i]);
        strides[i] = rec->strides[i], kernel[i] = rec->kernel[i], dil[i] = rec->dilations[i] - 1;
        pl[i] = rec->pads_begin[i], pr[i] = rec->pads_end[i];
    }
    static const dnnl_alg_kind_t algs[] = {[KN_POOLING_MAX] = dnnl_pooling_max,
                                           [KN_POOLING_AVG_INCLUDE_PAD] = dnnl_pooling_avg_include_padding,
                                           [KN_POOLING_AVG_EXCLUDE_PAD] = dnnl_pooling_avg_exclude_padding};
    if (rec->pool_alg < KN_POOLING_MAX || rec->pool_alg > KN_POOLING_AVG_EXCLUDE_PAD)
        return kn_error(KN_ERR_INVALID, "oneDNN pooling: algorithm %d", rec->pool_alg);
    dnnl_memory_desc_t src_md, dst_md, dst_user;
    if ((st = act_md(s, rec->src_layout, &src_md, nd, sd, "the pooling src")) ||
        (st = act_md(s, rec->src_layout, &dst_md, nd, dd, "the pooling dst")) ||
        (st = act_md(s, rec->dst_layout, &dst_user, nd, dd, "the pooling dst")))
        return st;
    dnnl_pooling_v2_desc_t pdesc;
    DN(dnnl_pooling_v2_forward_desc_init(&pdesc, dnnl_forward_inference, algs[rec->pool_alg], &src_md, &dst_md,
                                         strides, kernel, dil, pl, pr),
       "describing the pooling");
    dnnl_primitive_desc_t pd;
    DN(dnnl_primitive_desc_create(&pd, &pdesc, attr, s->engine, NULL), "creating the pooling");
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(p->impl, sizeof p->impl, "%s", impl);
    if ((st = run_make(s, pd, &p->main, "creating the pooling"))) return st;
    DN(dnnl_memory_create(&p->m_src, &src_md, s->engine, DNNL_MEMORY_NONE), "creating the src memory");
    DN(dnnl_memory_create(&p->m_dst, &dst_md, s->engine, DNNL_MEMORY_NONE), "creating the dst memory");
    p->dst_bytes = dnnl_memory_desc_get_size(&dst_user);
    p->dst_reorder = !dnnl_memory_desc_equal(&dst_md, &dst_user);
    if (!p->dst_reorder) return KN_OK;
    DN(dnnl_memory_create(&p->m_dst_user, &dst_user, s->engine, DNNL_MEMORY_NONE), "creating the dst memory");
    if ((st = make_reorder(s, &dst_md, &dst_user, &p->dst_ro, "creating the dst reorder"))) return st;
    return session_reserve(s, 1, dnnl_memory_desc_get_size(&dst_md));
}

static void set_threads(int threads)
{
    if (g_omp_set) g_omp_set(threads > 0 ? threads : 1);
}

/* Builds p (zeroed) from rec for `threads` OpenMP threads. */
static int build_prim(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, int threads,
                      kn_dnnl_prim *p)
{
    p->kind = rec->kind;
    p->rec = *rec;
    p->weights = weights;
    p->nthr = threads;
    set_threads(threads);
    dnnl_primitive_attr_t attr = user_scratch_attr();
    int st = attr ? KN_OK : kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
    if (!st)
        st = rec->kind == KN_DNNL_CONV   ? create_conv(s, rec, weights, p, attr)
             : rec->kind == KN_DNNL_POOL ? create_pool(s, rec, p, attr)
                                         : create_matmul(s, rec, weights, p, attr);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

static void prim_clear(kn_dnnl_prim *p)
{
    run_free(&p->main);
    run_free(&p->reorder);
    run_free(&p->src_ro);
    run_free(&p->dst_ro);
    run_free(&p->sum_ro);
    run_free(&p->main_sum);
    dnnl_memory_t mems[] = {p->m_src, p->m_wei, p->m_bias, p->m_dst, p->m_wei_user, p->m_src_user, p->m_dst_user,
                            p->m_post_user, p->m_res};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    free(p->wei_buf);
    kn_wino_free(p->wino);
    kn_pw_free(p->pw);
    im2col_free(p->i2c);
    memset(p, 0, sizeof *p);
}

int kn_dnnl_prim_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights,
                        kn_dnnl_prim **out)
{
    if (!out) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_create: NULL argument");
    *out = NULL;
    if (!s || !rec) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_create: NULL argument");
    if (rec->kind != KN_DNNL_MATMUL && rec->kind != KN_DNNL_CONV && rec->kind != KN_DNNL_POOL)
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN record: unknown primitive kind %d", rec->kind);
    kn_dnnl_prim *p = calloc(1, sizeof *p);
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
    /* sessions start with one thread (kn_session_create) */
    int st = build_prim(s, rec, weights, 1, p);
    if (st) {
        kn_dnnl_prim_free(p);
        return st;
    }
    *out = p;
    return KN_OK;
}

/* Rebuilds p for a new thread count (once per change, not per run): a
 * primitive created for T threads runs T OpenMP threads whatever the
 * caller's setting. On failure p is left as it was. */
static int rebuild_for(kn_dnnl_session *s, kn_dnnl_prim *p, int threads)
{
    if (p->pw || (p->wino && kn_wino_tile(&p->rec, threads) == kn_wino_tile_of(p->wino))) {
        p->nthr = threads; /* it splits its work at each run */
        return KN_OK;
    }
    kn_dnnl_prim *q = calloc(1, sizeof *q);
    if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = build_prim(s, &p->rec, p->weights, threads, q);
    if (st) {
        prim_clear(q);
        free(q);
        return st;
    }
    xdw_pair *pair = p->pair;
    prim_clear(p);
    *p = *q;
    p->pair = pair;
    free(q);
    return KN_OK;
}

/* Rebuilds p for `threads` now, so that the next run does not. */
int kn_dnnl_prim_set_threads(kn_dnnl_session *s, kn_dnnl_prim *p, int threads)
{
    if (!s || !p) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_set_threads: NULL argument");
    if (threads < 1) threads = 1;
    if (p->pair && p->pair->tail == p) {
        int st = kn_xdw_reserve(p->pair->k, threads);
        if (st) return st;
    }
    return threads == p->nthr ? KN_OK : rebuild_for(s, p, threads);
}

/* ---- execution ------------------------------------------------------------------ */

/* A copy of n bytes between buffers that do not overlap, cut into pieces of
 * whole cache lines for the session's threads: a residual is up to a few
 * MB, which one thread copies at a fraction of the bandwidth two reach. */
typedef struct par_copy {
    char *dst;
    const char *src;
    size_t n;
} par_copy;

enum { COPY_PIECE = 64 << 10 }; /* bytes per parallel unit: 64 KiB */

static int copy_chunk(void *args, int64_t lo, int64_t hi)
{
    const par_copy *c = args;
    size_t a = (size_t)lo * COPY_PIECE, b = (size_t)hi * COPY_PIECE;
    if (b > c->n) b = c->n;
    memcpy(c->dst + a, c->src + a, b - a);
    return KN_OK;
}

static int copy_parallel(void *dst, const void *src, size_t n, int threads)
{
    par_copy c = {dst, src, n};
    return kn_rt_parallel_for_threads(threads, copy_chunk, &c, (int64_t)((n + COPY_PIECE - 1) / COPY_PIECE));
}

/* After p's primitive ran: its output reordered into the caller's dst where
 * it wrote another layout (into the session's buffer), then the wait. */
static int finish_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *dst)
{
    if (p->dst_reorder) {
        DN(dnnl_memory_set_data_handle(p->m_dst_user, dst), "binding the dst");
        dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, p->m_dst}, {DNNL_ARG_TO, p->m_dst_user}};
        int rc = run_exec(s, &p->dst_ro, ra, 2, "reordering the dst");
        if (rc) return rc;
    }
    DN(dnnl_stream_wait(s->stream), "waiting for the stream");
    return KN_OK;
}

/* True if the na bytes at a and the nb bytes at b share a byte. */
static bool overlap(const void *a, size_t na, const void *b, size_t nb)
{
    const char *x = a, *y = b;
    return x < y + nb && y < x + na;
}

static int prim_exec(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                     const void *post_src, int threads)
{
    int rc;
    if (threads != p->nthr && (rc = rebuild_for(s, p, threads))) return rc;
    if (p->wino)
        return kn_wino_exec(p->wino, src, bias, dst, post_src, s->act[2], threads);
    if (p->pw) {
        if (post_src && post_src != dst && overlap(post_src, p->dst_bytes, dst, p->dst_bytes)) {
            if ((rc = copy_parallel(s->act[1], post_src, p->dst_bytes, threads))) return rc;
            post_src = s->act[1];
        }
        return kn_pw_exec(p->pw, src, bias, dst, post_src, threads);
    }
    set_threads(threads);
    if (p->kind == KN_DNNL_POOL) {
        DN(dnnl_memory_set_data_handle(p->m_src, src), "binding the src");
        DN(dnnl_memory_set_data_handle(p->m_dst, p->dst_reorder ? s->act[1] : dst), "binding the dst");
        dnnl_exec_arg_t pa[3] = {{DNNL_ARG_SRC, p->m_src}, {DNNL_ARG_DST, p->m_dst}};
        if ((rc = run_exec(s, &p->main, pa, 2, "running the pooling"))) return rc;
        return finish_run(s, p, dst);
    }
    if (p->i2c) {
        im2col_run r = {p->i2c, src, s->act[2]};
        int64_t blocks = p->i2c->N * p->i2c->KH * p->i2c->KW * (p->i2c->C / p->i2c->b);
        if ((rc = kn_rt_parallel_for_threads(threads, im2col_chunk, &r, blocks))) return rc;
        src = s->act[2];
    }
    if (p->swap) {
        const void *w = p->swap_const ? p->swap_const : wei;
        if (!w) return kn_error(KN_ERR_INVALID, "oneDNN: no weights given for a 1x1 convolution");
        wei = src;
        src = (void *)w;
    }
    void *dst_prim = p->dst_reorder ? s->act[1] : dst;
    DN(dnnl_memory_set_data_handle(p->m_dst, dst_prim), "binding the dst");
    if (p->has_sum) {
        if (!post_src) return kn_error(KN_ERR_INVALID, "oneDNN: the sum post-op has no input");
        /* the sum post-op accumulates into dst: start from the residual */
        if (p->sum_ro.prim) {
            if (overlap(post_src, p->post_bytes, dst_prim, p->dst_bytes)) {
                /* in place: the reorder must not write over what it reads */
                if ((rc = copy_parallel(s->act[1], post_src, p->post_bytes, threads))) return rc;
                post_src = s->act[1];
            }
            DN(dnnl_memory_set_data_handle(p->m_post_user, (void *)post_src), "binding the residual");
            dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, p->m_post_user}, {DNNL_ARG_TO, p->m_dst}};
            if ((rc = run_exec(s, &p->sum_ro, ra, 2, "reordering the residual"))) return rc;
        } else if (post_src != dst_prim) {
            /* already in the layout the primitive writes (dst_prim may be the
             * session's buffer when dst itself is reordered afterwards); the
             * memory plan never overlaps a node's output with its inputs
             * unless they are the same */
            if (overlap(post_src, p->dst_bytes, dst_prim, p->dst_bytes)) memmove(dst_prim, post_src, p->dst_bytes);
            else if ((rc = copy_parallel(dst_prim, post_src, p->dst_bytes, threads))) return rc;
        }
    }
    if (!p->wei_const) {
        if (!wei) return kn_error(KN_ERR_INVALID, "oneDNN: no weights given for a primitive without constant ones");
        if (p->wei_reorder) {
            DN(dnnl_memory_set_data_handle(p->m_wei_user, (void *)wei), "binding the weights");
            dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, p->m_wei_user}, {DNNL_ARG_TO, p->m_wei}};
            if ((rc = run_exec(s, &p->reorder, ra, 2, "reordering the weights"))) return rc;
        } else {
            DN(dnnl_memory_set_data_handle(p->m_wei, (void *)wei), "binding the weights");
        }
    }
    dnnl_exec_arg_t args[8] = {{DNNL_ARG_SRC, p->m_src}, {DNNL_ARG_WEIGHTS, p->m_wei}, {DNNL_ARG_DST, p->m_dst}};
    int n = 3;
    if (p->src_reorder) {
        DN(dnnl_memory_set_data_handle(p->m_src_user, src), "binding the src");
        DN(dnnl_memory_set_data_handle(p->m_src, s->act[0]), "binding the src");
        dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, p->m_src_user}, {DNNL_ARG_TO, p->m_src}};
        if ((rc = run_exec(s, &p->src_ro, ra, 2, "reordering the src"))) return rc;
    } else {
        DN(dnnl_memory_set_data_handle(p->m_src, src), "binding the src");
    }
    if (p->has_bias) {
        const void *b = p->bias_const ? p->bias_const : bias;
        if (!b) return kn_error(KN_ERR_INVALID, "oneDNN: no bias given");
        DN(dnnl_memory_set_data_handle(p->m_bias, (void *)b), "binding the bias");
        args[n++] = (dnnl_exec_arg_t){p->bias_arg, p->m_bias};
    }
    prim_run *run = &p->main;
    if (p->m_res) {
        if (!post_src) return kn_error(KN_ERR_INVALID, "oneDNN: the residual add has no input");
        if (post_src == dst_prim && p->main_sum.prim) {
            run = &p->main_sum; /* in place: dst holds the residual, as the sum post-op wants */
        } else {
            if (overlap(post_src, p->res_bytes, dst_prim, p->dst_bytes)) { /* the kernel would read its own sums */
                if ((rc = copy_parallel(s->act[1], post_src, p->res_bytes, threads))) return rc;
                post_src = s->act[1];
            }
            DN(dnnl_memory_set_data_handle(p->m_res, (void *)post_src), "binding the residual");
            args[n++] = (dnnl_exec_arg_t){p->res_arg, p->m_res};
        }
    }
    if ((rc = run_exec(s, run, args, n, p->kind == KN_DNNL_CONV ? "running the convolution" : "running the matmul")))
        return rc;
    return finish_run(s, p, dst);
}

/* The tail of a pair runs: both convolutions by the fused kernel, or one
 * after the other where this run's buffers do not allow it (the memory plan
 * put dst over the 1x1 conv's input, which the fused kernel reads while it
 * writes dst). The tail has no residual (kn_dnnl_prim_fuse). */
static int pair_exec(kn_dnnl_session *s, xdw_pair *q, void *src, const void *wei, const void *bias, void *dst,
                     int threads)
{
    if (!q->pending)
        return kn_error(KN_ERR_INTERNAL, "fused 1x1 + depthwise convolution: the 1x1 convolution did not run first");
    q->pending = false;
    size_t in = (size_t)q->head->rec.src.nbytes, out = (size_t)q->tail->rec.dst.nbytes;
    if (src == q->dst && !overlap(dst, out, q->src, in)) {
        int rc = kn_xdw_reserve(q->k, threads);
        return rc ? rc : kn_xdw_exec(q->k, q->src, q->bias, bias, dst, NULL, threads);
    }
    int rc = prim_exec(s, q->head, q->src, q->wei, q->bias, q->dst, NULL, threads);
    return rc ? rc : prim_exec(s, q->tail, src, wei, bias, dst, NULL, threads);
}

int kn_dnnl_prim_exec(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                      const void *post_src, int threads)
{
    if (!s || !p || !src || !dst) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_exec: NULL argument");
    if (threads < 1) threads = 1;
    xdw_pair *q = p->pair;
    if (q && q->head == p) {
        q->pending = true;
        q->src = src, q->dst = dst, q->wei = wei, q->bias = bias;
        return KN_OK;
    }
    if (q) return pair_exec(s, q, src, wei, bias, dst, threads);
    return prim_exec(s, p, src, wei, bias, dst, post_src, threads);
}

/* Expansions whose output is at least this large run fused with their
 * depthwise consumer (measured on a Zen 5 core with MobileNetV2). */
#define XDW_MIN_BYTES (4 << 20)

/* Not when the depthwise convolution adds a residual: the artifact's meta
 * does not say which value that is, and it may be the 1x1 convolution's
 * output (a block whose input is also its shortcut), which the fused
 * kernel never writes. kn_xdw itself takes the sum. */
int kn_dnnl_prim_fuse(kn_dnnl_session *s, kn_dnnl_prim *head, kn_dnnl_prim *tail)
{
    if (!s || !head || !tail || head == tail) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_fuse: bad argument");
    const kn_abi_dnnl *hr = &head->rec, *tr = &tail->rec;
    if (head->pair || tail->pair || !own_algo_allowed(hr) || !own_algo_allowed(tr) ||
        kn_dnnl_native_block(s) != 0 || record_has_sum(hr) || record_has_sum(tr) || !kn_xdw_supported(hr, tr) ||
        hr->dst.nbytes < XDW_MIN_BYTES)
        return KN_ERR_UNSUPPORTED;
    xdw_pair *q = calloc(1, sizeof *q);
    if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_xdw_create(hr, tr, head->weights, &q->k);
    if (!st) st = kn_xdw_reserve(q->k, tail->nthr);
    if (st) {
        kn_xdw_free(q->k);
        free(q);
        return st;
    }
    q->head = head, q->tail = tail;
    head->pair = tail->pair = q;
    return KN_OK;
}

const char *kn_dnnl_prim_impl(const kn_dnnl_prim *p)
{
    if (!p) return "";
    if (p->pair) return p->pair->head == p ? KN_IMPL_IN_NEXT_STEP : "kiln 1x1+dw:avx512";
    if (p->wino) return kn_wino_tile_of(p->wino) == 4 ? "winograd F(4x4,3x3)" : "winograd F(2x2,3x3)";
    if (p->pw) return p->kind == KN_DNNL_MATMUL ? "kiln matmul:avx512" : "kiln 1x1:avx512";
    return p->impl;
}

void kn_dnnl_prim_free(kn_dnnl_prim *p)
{
    if (!p) return;
    xdw_pair *q = p->pair;
    if (q) { /* the other prim of the pair runs alone from now on */
        (q->head == p ? q->tail : q->head)->pair = NULL;
        kn_xdw_free(q->k);
        free(q);
    }
    prim_clear(p);
    free(p);
}
