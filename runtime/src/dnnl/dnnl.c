/*
 * runtime/src/dnnl/dnnl.c — the oneDNN (2.6 C API) wrapper behind kn_rt_dnnl_exec:
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
 * Convolutions: conv.c holds the table of algorithms that may run one
 * (kiln's Winograd, 1x1 and im2col kernels, oneDNN's matmul and direct
 * convolution), picked by config.c's tuning table and overrides.
 *
 * Threads: oneDNN fixes a primitive's thread partitioning when it is created,
 * so primitives are built for 1 thread (a new session's count) and rebuilt
 * when the session's count changes (kn_dnnl_prim_set_threads); a run at
 * another count (the governor's: one thread) uses a second build, p->alt,
 * made at the first such run (kn_dnnl_prim_for). libdnnl here uses GNU
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

#include "dnnl_int.h"
#include "kiln/profile.h"
#include "bigmem.h"

/* ---- errors and small helpers --------------------------------------------- */

int kn_dnnl_fail(dnnl_status_t s, const char *what)
{
    int code = s == dnnl_unimplemented    ? KN_ERR_UNSUPPORTED
               : s == dnnl_out_of_memory  ? KN_ERR_NOMEM
               : s == dnnl_invalid_arguments ? KN_ERR_INVALID
                                          : KN_ERR_INTERNAL;
    return kn_error(code, "oneDNN: %s failed: status %s", what, dnnl_status2str(s));
}

void *kn_dnnl_alloc(size_t n)
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
void kn_dnnl_plain_strides(int nd, const dnnl_dims_t dims, dnnl_dims_t strides)
{
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i] > 0 ? dims[i] : 1;
    }
}

int kn_dnnl_plain_md(dnnl_memory_desc_t *md, int nd, const dnnl_dims_t dims, const char *what)
{
    dnnl_dims_t st;
    kn_dnnl_plain_strides(nd, dims, st);
    KN_DN(dnnl_memory_desc_init_by_strides(md, nd, dims, dnnl_f32, st), what);
    return KN_OK;
}

/* The format tag of layout `native` (NATIVE_*) for nd dims (3..5). */
dnnl_format_tag_t kn_dnnl_native_tag(int native, int nd)
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
        if (!dnnl_memory_desc_init_by_tag(&want, 4, sd, dnnl_f32, kn_dnnl_native_tag(k, 4)) &&
            dnnl_memory_desc_equal(&want, &got))
            s->native = k;
    }
}

/* KILN_NATIVE_LAYOUT=plain|nhwc|block8|block16 sets what KN_LAYOUT_NATIVE
 * stands for instead of the probe: for tests of the layouts other CPUs
 * pick (an AVX2 CPU's nChw8c on an AVX-512 one); unset or another value:
 * the probe. */
static int native_override(void)
{
    static const char *const names[] = {[NATIVE_PLAIN] = "plain", [NATIVE_NHWC] = "nhwc", [NATIVE_BLOCK8] = "block8",
                                        [NATIVE_BLOCK16] = "block16"};
    const char *v = getenv("KILN_NATIVE_LAYOUT");
    for (int k = NATIVE_PLAIN; v && k <= NATIVE_BLOCK16; k++)
        if (!strcmp(v, names[k])) return k;
    return NATIVE_UNKNOWN;
}

/* What KN_LAYOUT_NATIVE stands for in this session (probed on first use). */
int kn_dnnl_native_layout(struct kn_dnnl_session *s)
{
    if (s->native == NATIVE_UNKNOWN && (s->native = native_override()) == NATIVE_UNKNOWN) probe_native(s);
    return s->native;
}

int kn_dnnl_native_block(kn_dnnl_session *s)
{
    switch (kn_dnnl_native_layout(s)) {
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
int kn_dnnl_act_md(struct kn_dnnl_session *s, int32_t layout, int32_t dtype, dnnl_memory_desc_t *md, int nd,
                   const dnnl_dims_t dims, const char *what)
{
    dnnl_data_type_t dt = kn_dnnl_dt(dtype);
    bool q = dtype == KN_U8 || dtype == KN_I8;
    if (layout == KN_LAYOUT_PLAIN || nd < 3 || nd > 5 || (!q && !native_fits(s, dims))) {
        dnnl_dims_t st;
        int64_t str = 1;
        for (int i = nd - 1; i >= 0; i--) st[i] = str, str *= dims[i] > 0 ? dims[i] : 1;
        KN_DN(dnnl_memory_desc_init_by_strides(md, nd, dims, dt, st), what);
        return KN_OK;
    }
    /* 8-bit activations: channels-last, what oneDNN's int8 kernels want */
    int native = q ? NATIVE_NHWC : kn_dnnl_native_layout(s);
    KN_DN(dnnl_memory_desc_init_by_tag(md, nd, dims, dt, kn_dnnl_native_tag(native, nd)), what);
    /* the compiler planned plain-sized buffers (native_fits: a safety net) */
    dnnl_dims_t st;
    int64_t str = 1;
    for (int i = nd - 1; i >= 0; i--) st[i] = str, str *= dims[i];
    dnnl_memory_desc_t plain;
    KN_DN(dnnl_memory_desc_init_by_strides(&plain, nd, dims, dt, st), what);
    if (dnnl_memory_desc_get_size(md) != dnnl_memory_desc_get_size(&plain))
        return kn_error(KN_ERR_INVALID, "oneDNN record: %s in the native layout is larger than planned", what);
    return KN_OK;
}

dnnl_data_type_t kn_dnnl_dt(int32_t dtype)
{
    switch (dtype) {
    case KN_U8: return dnnl_u8;
    case KN_I8: return dnnl_s8;
    case KN_I32: return dnnl_s32;
    default: return dnnl_f32;
    }
}

/* Checks a tensor of a record: f32 (or, in an int8 record, u8/s8),
 * rank in range, positive dims, no overflow. */
int kn_dnnl_check_tensor(const kn_abi_tensor *t, const char *what, int min_rank, int max_rank)
{
    if (t->dtype != KN_F32 && t->dtype != KN_U8 && t->dtype != KN_I8)
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN record: %s has dtype %s; only f32, u8 and s8 are supported", what,
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

bool kn_dnnl_has_bias(const kn_abi_dnnl *rec) { return !(rec->bias.rank == 0 && rec->bias.nbytes == 0); }

/* Pointer to a constant (KN_LOC_WEIGHTS) tensor, or NULL if not constant. */
int kn_dnnl_const_ptr(const kn_abi_ref *r, const unsigned char *weights, int64_t nbytes, const char *what,
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
    /* a mistyped override must not silently measure the default path */
    int bad = kn_config_check();
    if (bad) return bad;
    kn_dnnl_session *s = calloc(1, sizeof *s);
    if (!s) return kn_error(KN_ERR_NOMEM, "out of memory");
    dnnl_status_t st = dnnl_engine_create(&s->engine, dnnl_cpu, 0);
    if (st != dnnl_success) {
        free(s);
        return kn_dnnl_fail(st, "creating the CPU engine");
    }
    st = dnnl_stream_create(&s->stream, s->engine, dnnl_stream_default_flags);
    if (st != dnnl_success) {
        dnnl_engine_destroy(s->engine);
        free(s);
        return kn_dnnl_fail(st, "creating a stream");
    }
    pthread_once(&g_omp_once, find_omp);
    *out = s;
    return KN_OK;
}

void kn_dnnl_session_set_rows(kn_dnnl_session *s, int64_t rows)
{
    if (s) s->rows = rows > 0 ? rows : 0;
}

void kn_dnnl_session_free(kn_dnnl_session *s)
{
    if (!s) return;
    if (s->stream) dnnl_stream_destroy(s->stream);
    if (s->engine) dnnl_engine_destroy(s->engine);
    for (int i = 0; i < 3; i++) kn_big_free(s->act[i]);
    free(s);
}

/* ---- primitive creation ------------------------------------------------------ */

void kn_dnnl_run_free(prim_run *r)
{
    if (r->prim) dnnl_primitive_destroy(r->prim);
    if (r->scratch_mem) dnnl_memory_destroy(r->scratch_mem);
    kn_big_free(r->scratch);
    memset(r, 0, sizeof *r);
}

/* Creates the primitive of pd (which it takes over) with its own scratchpad. */
int kn_dnnl_run_make(kn_dnnl_session *s, dnnl_primitive_desc_t pd, prim_run *r, const char *what)
{
    dnnl_status_t st = dnnl_primitive_create(&r->prim, pd);
    if (st != dnnl_success) {
        dnnl_primitive_desc_destroy(pd);
        return kn_dnnl_fail(st, what);
    }
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t n = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (n > 0) {
        r->scratch = kn_big_alloc(n);
        if (!r->scratch) st = dnnl_out_of_memory;
        else st = dnnl_memory_create(&r->scratch_mem, smd, s->engine, r->scratch);
    }
    dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success) return kn_dnnl_fail(st, "allocating a scratchpad");
    return KN_OK;
}

int kn_dnnl_run_exec(kn_dnnl_session *s, prim_run *r, dnnl_exec_arg_t *args, int nargs, const char *what)
{
    if (r->scratch_mem) args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, r->scratch_mem};
    KN_DN(dnnl_primitive_execute(r->prim, s->stream, nargs, args), what);
    return KN_OK;
}

/* A dilated convolution whose dilated window is wider than its input along
 * an axis. oneDNN 2.6's brgconv computes some of them wrongly at some
 * thread counts: 16x197x1x7 by a 1x5 kernel, dilation 2, padding 4, gives
 * values of 1e33 on 4, 6 or 8 threads and is right on 1, 2, 3 or 5
 * (difftest seed 1827111812; a plain oneDNN program shows it, with its own
 * scratchpad too). Its next implementation runs them. */
static bool brgconv_unsafe(const void *op_desc)
{
    const dnnl_convolution_desc_t *cd = op_desc;
    if (cd->primitive_kind != dnnl_convolution) return false;
    int sp = cd->src_desc.ndims - 2, wk = cd->weights_desc.ndims - sp; /* grouped weights have one more dim */
    for (int i = 0; i < sp && i < DNNL_MAX_NDIMS - 2; i++) {
        int64_t k = cd->weights_desc.dims[wk + i], extent = (k - 1) * (cd->dilates[i] + 1) + 1;
        if (cd->dilates[i] > 0 && extent > cd->src_desc.dims[2 + i]) return true;
    }
    return false;
}

/* True if impl starts with one of the tuning row's avoided names, or is
 * brgconv for an op it is unsafe for (brgconv_unsafe). */
static bool avoided(const char *impl, bool no_brgconv)
{
    if (no_brgconv && !strncmp(impl, "brgconv", 7)) return true;
    const char *const *avoid = kn_config_tuning()->avoid_impls;
    for (int i = 0; avoid && avoid[i]; i++)
        if (!strncmp(impl, avoid[i], strlen(avoid[i]))) return true;
    return false;
}

/* oneDNN's primitive descriptor for op_desc + attr: its first choice, or
 * the next one that is neither avoided (kn_tuning.avoid_impls) nor a
 * reference kernel when the first is avoided. */
int kn_dnnl_pd_create(kn_dnnl_session *s, const void *op_desc, dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *out,
                      const char *what)
{
    dnnl_primitive_desc_iterator_t it;
    KN_DN(dnnl_primitive_desc_iterator_create(&it, op_desc, attr, s->engine, NULL), what);
    dnnl_primitive_desc_t first = dnnl_primitive_desc_iterator_fetch(it), pick = NULL;
    const char *impl = NULL;
    bool no_brgconv = brgconv_unsafe(op_desc);
    bool avoid_first = first && dnnl_primitive_desc_query(first, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
                       impl && avoided(impl, no_brgconv);
    while (avoid_first && !pick && dnnl_primitive_desc_iterator_next(it) == dnnl_success) {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        impl = NULL;
        if (pd && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
            !avoided(impl, no_brgconv) && strncmp(impl, "ref", 3))
            pick = pd;
        else if (pd)
            dnnl_primitive_desc_destroy(pd);
    }
    dnnl_primitive_desc_iterator_destroy(it);
    if (!first) return kn_error(KN_ERR_UNSUPPORTED, "oneDNN: %s: no implementation", what);
    if (pick) dnnl_primitive_desc_destroy(first);
    *out = pick ? pick : first;
    return KN_OK;
}

void kn_dnnl_set_threads(int threads)
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
    kn_dnnl_set_threads(threads);
    dnnl_primitive_attr_t attr = kn_dnnl_scratch_attr();
    int st = attr ? KN_OK : kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
    if (!st)
        st = rec->kind == KN_DNNL_CONV     ? kn_dnnl_create_conv(s, rec, weights, p, attr)
             : rec->kind == KN_DNNL_DECONV ? kn_dnnl_create_deconv(s, rec, weights, p, attr)
             : rec->kind == KN_DNNL_POOL   ? kn_dnnl_create_pool(s, rec, p, attr)
             : rec->kind == KN_DNNL_BINARY ? kn_dnnl_create_binary(s, rec, weights, p, attr)
                                           : kn_dnnl_create_matmul(s, rec, weights, p, attr);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

void kn_dnnl_prim_clear(kn_dnnl_prim *p)
{
    kn_dnnl_prim_free(p->alt); /* first: it may use p's weights */
    kn_dnnl_run_free(&p->main);
    kn_dnnl_run_free(&p->reorder);
    kn_dnnl_run_free(&p->src_ro);
    kn_dnnl_run_free(&p->dst_ro);
    kn_dnnl_run_free(&p->sum_ro);
    kn_dnnl_run_free(&p->main_sum);
    dnnl_memory_t mems[] = {p->m_src, p->m_wei, p->m_bias, p->m_dst, p->m_wei_user, p->m_src_user, p->m_dst_user,
                            p->m_post_user, p->m_res};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    kn_big_free(p->wei_buf);
    if (p->algo && p->algo->free) p->algo->free(p->state);
    kn_dnnl_dynq_free(p->dynq);
    memset(p, 0, sizeof *p);
}

int kn_dnnl_prim_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim **out)
{
    if (!out) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_create: NULL argument");
    *out = NULL;
    if (!s || !rec) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_create: NULL argument");
    if (rec->kind != KN_DNNL_MATMUL && rec->kind != KN_DNNL_CONV && rec->kind != KN_DNNL_POOL &&
        rec->kind != KN_DNNL_DECONV && rec->kind != KN_DNNL_BINARY)
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
int kn_dnnl_rebuild(kn_dnnl_session *s, kn_dnnl_prim *p, int threads)
{
    if (p->algo && p->algo->keeps && p->algo->keeps(p, threads)) {
        p->nthr = threads; /* it splits its work at each run */
        return KN_OK;
    }
    kn_dnnl_prim *q = calloc(1, sizeof *q);
    if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = build_prim(s, &p->rec, p->weights, threads, q);
    if (st) {
        kn_dnnl_prim_clear(q);
        free(q);
        return st;
    }
    xdw_pair *pair = p->pair;
    kn_dnnl_prim_clear(p);
    *p = *q;
    p->pair = pair;
    free(q);
    return KN_OK;
}

int64_t kn_dnnl_build_ns(const kn_dnnl_session *s) { return s ? s->build_ns : 0; }

int kn_dnnl_prim_for(kn_dnnl_session *s, kn_dnnl_prim *p, int threads, kn_dnnl_prim **out)
{
    *out = p;
    if (threads == p->nthr || (p->algo && p->algo->keeps && p->algo->keeps(p, threads))) return KN_OK;
    if (p->alt && p->alt->nthr == threads) {
        *out = p->alt;
        return KN_OK;
    }
    int64_t t0 = kn_rt_now_ns();
    kn_dnnl_prim *q = calloc(1, sizeof *q);
    if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
    q->twin = p;
    int st = build_prim(s, &p->rec, p->weights, threads, q);
    q->twin = NULL;
    s->build_ns += kn_rt_now_ns() - t0;
    if (st) {
        kn_dnnl_prim_free(q);
        return st;
    }
    kn_dnnl_prim_free(p->alt);
    *out = p->alt = q;
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
    return threads == p->nthr ? KN_OK : kn_dnnl_rebuild(s, p, threads);
}

const char *kn_dnnl_prim_impl(const kn_dnnl_prim *p)
{
    if (!p) return "";
    if (p->pair) return p->pair->head == p ? KN_IMPL_IN_NEXT_STEP : "kiln 1x1+dw:avx512";
    if (p->algo && p->algo->impl) return p->algo->impl(p);
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
    kn_dnnl_prim_clear(p);
    free(p);
}
