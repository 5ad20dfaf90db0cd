/*
 * runtime/src/meta.c — the serialized kn_meta that an artifact carries
 * (kn_meta_write for the code generator, kn_meta_read for the runtime) and
 * the FNV-1a hash used for model and weight hashes.
 *
 * Format (all integers little-endian, floats as their IEEE bits):
 *   u32 "KNMT", u32 format version, then the fields of kn_meta in
 *   declaration order, except that the I/O counts precede the strings. A
 *   string is u32 length + bytes (0xffffffff: NULL); a tensor is name,
 *   dtype, rank, 8 dims, 8 dim names, nbytes, slot, 8 dim symbols, 8 dim
 *   coefficients; the slot and symbol counts follow the I/O counts, the
 *   symbols (name, max) the version string; an opnode's attributes are
 *   u64 length + the kn_attrs_write bytes, then its compute dtype (i32)
 *   and its NHWC bits (i32);
 *   then the profiling records:
 *   step and buffer counts, each step (name, op type, flops, bytes read,
 *   bytes written), each buffer (name, offset, size, first and last step).
 *   Nothing may follow the last record.
 *
 * kn_meta_read parses bytes taken from a file that may be foreign or
 * damaged: every length and count is checked against the bytes that are
 * left before anything is read or allocated, and every value the runtime
 * later trusts (ranks, dtypes, sizes, locations) is range-checked here, so
 * the rest of libkiln_rt can index with them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/abi.h"
#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "fused_int.h"
#include "opdesc.h"
#include "rbuf.h"
#include "wbuf.h"

#define META_MAGIC 0x544d4e4bu /* "KNMT" */
#define META_FORMAT 6u /* follows KN_ABI_VERSION */
#define STR_NULL 0xffffffffu
/* Smallest serialized sizes, to bound counts before allocating. */
#define MIN_TENSOR_BYTES (4 + 4 + 4 + 8 * 8 + 8 * 4 + 8 + 4 + 8 * 4 + 8 * 8)
#define MAX_SLOTS (1 << 24)
#define MIN_DNNL_BYTES (4 + 4 + 4 * 12 + 4 * MIN_TENSOR_BYTES)
#define MIN_OPNODE_BYTES (4 * 4 + 8 + 4 + 4 + 8 + 4 + 4)
#define MAX_OPNODE_ARITY 1000
#define MIN_STEP_BYTES (4 + 4 + 8 * 3 + 4)
#define MIN_BUFFER_BYTES (4 + 8 * 2 + 4 * 2)

uint64_t kn_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* ---- writing ------------------------------------------------------------ */

static void w_i32(kn_wbuf *w, int32_t v) { kn_wbuf_u32(w, (uint32_t)v); }
static void w_i64(kn_wbuf *w, int64_t v) { kn_wbuf_u64(w, (uint64_t)v); }

static void w_str(kn_wbuf *w, const char *s)
{
    if (!s) {
        kn_wbuf_u32(w, STR_NULL);
        return;
    }
    size_t n = strlen(s);
    if (n >= STR_NULL) {
        if (!w->err) w->err = kn_error(KN_ERR_INVALID, "meta: string of %zu bytes is too long", n);
        return;
    }
    kn_wbuf_u32(w, (uint32_t)n);
    kn_wbuf_bytes(w, s, n);
}

static void w_tensor(kn_wbuf *w, const kn_abi_tensor *t)
{
    w_str(w, t->name);
    w_i32(w, t->dtype);
    w_i32(w, t->rank);
    for (int i = 0; i < 8; i++) w_i64(w, t->dims[i]);
    for (int i = 0; i < 8; i++) w_str(w, t->dim_names[i]);
    w_i64(w, t->nbytes);
    w_i32(w, t->slot);
    for (int i = 0; i < 8; i++) w_i32(w, t->dim_sym[i]);
    for (int i = 0; i < 8; i++) w_i64(w, t->dim_a[i]);
}

static void w_ref(kn_wbuf *w, const kn_abi_ref *r)
{
    w_i32(w, r->loc);
    w_i64(w, r->offset);
}

static void w_dnnl(kn_wbuf *w, const kn_abi_dnnl *d)
{
    w_i32(w, d->kind);
    w_i32(w, d->n_post);
    for (int i = 0; i < 4; i++) {
        w_i32(w, d->post[i].kind);
        kn_wbuf_f32(w, d->post[i].alpha);
        kn_wbuf_f32(w, d->post[i].beta);
    }
    w_tensor(w, &d->src);
    w_tensor(w, &d->wei);
    w_tensor(w, &d->bias);
    w_tensor(w, &d->dst);
    w_i32(w, d->trans_a);
    w_i32(w, d->trans_b);
    kn_wbuf_f32(w, d->alpha);
    w_i32(w, d->groups);
    w_i32(w, d->spatial);
    for (int i = 0; i < 3; i++) w_i64(w, d->strides[i]);
    for (int i = 0; i < 3; i++) w_i64(w, d->dilations[i]);
    for (int i = 0; i < 3; i++) w_i64(w, d->pads_begin[i]);
    for (int i = 0; i < 3; i++) w_i64(w, d->pads_end[i]);
    w_ref(w, &d->wei_ref);
    w_ref(w, &d->bias_ref);
    w_i32(w, d->src_layout);
    w_i32(w, d->dst_layout);
    w_i32(w, d->post_layout);
    w_i32(w, d->conv_algo);
    w_i32(w, d->alg);
    for (int i = 0; i < 3; i++) w_i64(w, d->kernel[i]);
    w_i32(w, d->n_scale);
    w_ref(w, &d->scale_ref);
    w_i32(w, d->src_zp);
    w_i32(w, d->dst_zp);
    w_i32(w, d->compute);
}

static int w_opnode(kn_wbuf *w, int index, const kn_abi_opnode *o)
{
    if (o->n_inputs < 0 || o->n_outputs < 0 || o->n_inputs > MAX_OPNODE_ARITY ||
        o->n_outputs > MAX_OPNODE_ARITY || (o->n_inputs && !o->inputs) || (o->n_outputs && !o->outputs) ||
        o->attrs_len < 0 || (o->attrs_len && !o->attrs) || o->n_captures < 0 || o->n_captures > o->n_inputs)
        return kn_error(KN_ERR_INVALID, "meta: opnode %d ('%s'): inconsistent counts or NULL arrays", index,
                        o->name ? o->name : "?");
    w_i32(w, o->op);
    w_i32(w, o->n_inputs);
    w_i32(w, o->n_outputs);
    w_i32(w, o->n_captures);
    w_i64(w, o->opset);
    w_str(w, o->name);
    w_str(w, o->op_type);
    for (int i = 0; i < o->n_inputs; i++) w_tensor(w, &o->inputs[i]);
    for (int i = 0; i < o->n_outputs; i++) w_tensor(w, &o->outputs[i]);
    kn_wbuf_u64(w, (uint64_t)o->attrs_len);
    kn_wbuf_bytes(w, o->attrs, (size_t)o->attrs_len);
    w_i32(w, o->compute);
    w_i32(w, o->nhwc);
    return KN_OK;
}

static void w_profile(kn_wbuf *w, const kn_meta *m)
{
    w_i32(w, m->n_steps);
    w_i32(w, m->n_buffers);
    for (int i = 0; i < m->n_steps; i++) {
        const kn_abi_step *t = &m->steps[i];
        w_str(w, t->name);
        w_str(w, t->op_type);
        w_i64(w, t->flops);
        w_i64(w, t->bytes_read);
        w_i64(w, t->bytes_written);
        w_i32(w, t->dnnl);
    }
    for (int i = 0; i < m->n_buffers; i++) {
        const kn_abi_buffer *b = &m->buffers[i];
        w_str(w, b->name);
        w_i64(w, b->offset);
        w_i64(w, b->nbytes);
        w_i32(w, b->first_step);
        w_i32(w, b->last_step);
    }
}

static int check_counts(const kn_meta *m)
{
    if (m->n_inputs < 0 || m->n_outputs < 0 || m->n_dnnl < 0 || m->n_opnodes < 0 || m->n_slots < 0 ||
        m->n_steps < 0 || m->n_buffers < 0 || m->n_syms < 0)
        return kn_error(KN_ERR_INVALID, "meta: negative count");
    if (m->n_syms > KN_MAX_SYMS || (m->n_syms && !m->syms))
        return kn_error(KN_ERR_INVALID, "meta: %d dynamic dims (at most %d)", m->n_syms, KN_MAX_SYMS);
    if ((m->n_inputs && !m->inputs) || (m->n_outputs && !m->outputs) || (m->n_dnnl && !m->dnnl) ||
        (m->n_opnodes && !m->opnodes) || (m->n_steps && !m->steps) || (m->n_buffers && !m->buffers))
        return kn_error(KN_ERR_INVALID, "meta: a non-zero count with a NULL array");
    return KN_OK;
}

int kn_meta_write(const kn_meta *m, unsigned char **out_bytes, size_t *out_len)
{
    if (out_bytes) *out_bytes = NULL;
    if (out_len) *out_len = 0;
    if (!m || !out_bytes || !out_len) return kn_error(KN_ERR_INVALID, "kn_meta_write: NULL argument");
    int st = check_counts(m);
    if (st) return st;
    kn_wbuf w = {.what = "meta"};
    kn_wbuf_u32(&w, META_MAGIC);
    kn_wbuf_u32(&w, META_FORMAT);
    kn_wbuf_u64(&w, m->model_hash);
    kn_wbuf_u64(&w, m->cpu_features);
    w_i32(&w, m->n_inputs);
    w_i32(&w, m->n_outputs);
    w_i32(&w, m->n_slots);
    w_i32(&w, m->n_syms);
    w_str(&w, m->name);
    w_str(&w, m->target);
    w_str(&w, m->kiln_version);
    for (int i = 0; i < m->n_syms; i++) {
        w_str(&w, m->syms[i].name);
        w_i64(&w, m->syms[i].max);
        w_i64(&w, m->syms[i].min);
        w_i64(&w, m->syms[i].align);
        w_i64(&w, m->syms[i].from_data);
    }
    for (int i = 0; i < m->n_inputs; i++) w_tensor(&w, &m->inputs[i]);
    for (int i = 0; i < m->n_outputs; i++) w_tensor(&w, &m->outputs[i]);
    w_i64(&w, m->arena_bytes);
    w_i64(&w, m->intermediate_bytes);
    w_i64(&w, m->weights_bytes);
    w_str(&w, m->weights_file);
    kn_wbuf_u64(&w, m->weights_hash);
    w_i32(&w, m->n_dnnl);
    w_i32(&w, m->n_opnodes);
    for (int i = 0; i < m->n_dnnl; i++) w_dnnl(&w, &m->dnnl[i]);
    for (int i = 0; i < m->n_opnodes && !w.err; i++)
        if ((st = w_opnode(&w, i, &m->opnodes[i]))) w.err = st;
    w_profile(&w, m);
    if (w.err) {
        free(w.p);
        return w.err;
    }
    *out_bytes = w.p;
    *out_len = w.len;
    return KN_OK;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct rbuf {
    kn_rbuf in;
    char *blk; /* one block for every string and array of the result */
    size_t cap, used;
    int32_t n_slots; /* of the meta being read, for checking tensors' slots */
    int32_t n_syms;  /* and their dynamic dims */
    const kn_abi_sym *syms;
} rbuf;

/* Carves n bytes (8-aligned, zeroed) from the block. The block is sized so
 * that valid input always fits; running out means the counts lied. */
static int r_alloc(rbuf *r, size_t n, void **out, const char *what)
{
    size_t at = (r->used + 7) & ~(size_t)7;
    if (at > r->cap || n > r->cap - at) return kn_rbuf_bad(&r->in, what, "sizes do not add up");
    *out = r->blk + at;
    r->used = at + n;
    return KN_OK;
}

static int r_str(rbuf *r, const char **out, const char *what)
{
    uint32_t n;
    KN_RD(kn_rbuf_u32(&r->in, &n, what));
    *out = NULL;
    if (n == STR_NULL) return KN_OK;
    KN_RD(kn_rbuf_need(&r->in, n, what));
    char *s = NULL;
    KN_RD(r_alloc(r, (size_t)n + 1, (void **)&s, what));
    memcpy(s, r->in.p + r->in.pos, n);
    s[n] = '\0';
    r->in.pos += n;
    *out = s;
    return KN_OK;
}

enum { T_ANY = 0, T_IO = 1, T_OPNODE = 2, T_OUTPUT = 3 };

/* A dynamic value (slot > 0): only graph outputs and opnode tensors may be
 * one, its slot must exist, its dims are sizes or -1, it has no size. */
static int check_dynamic(const rbuf *r, const kn_abi_tensor *t, int mode, const char *what)
{
    int n_slots = r->n_slots;
    if (mode != T_OUTPUT && mode != T_OPNODE)
        return kn_rbuf_bad(&r->in, what, "a graph input or oneDNN tensor cannot be dynamic");
    if (t->slot > n_slots) return kn_rbuf_bad(&r->in, what, "slot %d, but the artifact has %d", t->slot, n_slots);
    if (t->rank < -1 || t->rank > KN_MAX_RANK)
        return kn_rbuf_bad(&r->in, what, "rank %d outside [-1, %d]", t->rank, KN_MAX_RANK);
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < -1) return kn_rbuf_bad(&r->in, what, "dim %lld", (long long)t->dims[i]);
    if (t->nbytes != 0)
        return kn_rbuf_bad(&r->in, what, "a dynamic value with a static size %lld", (long long)t->nbytes);
    if (t->dtype != KN_DT_UNDEFINED && !kn_dtype_valid(t->dtype))
        return kn_rbuf_bad(&r->in, what, "unknown dtype %d", t->dtype);
    if (mode == T_OUTPUT && !t->name) return kn_rbuf_bad(&r->in, what, "no name");
    return KN_OK;
}

/* Dims that follow a symbol: the symbol exists, the coefficient is not 0
 * and the size stays >= 0 down to the symbol's smallest value. */
static int check_sym_dims(const rbuf *r, const kn_abi_tensor *t, const char *what)
{
    for (int i = 0; i < 8; i++) {
        int k = t->dim_sym[i];
        if (k == 0) continue;
        if (k < 0 || k > r->n_syms || i >= t->rank || t->slot != 0)
            return kn_rbuf_bad(&r->in, what, "dim %d follows symbol %d (the artifact has %d)", i, k, r->n_syms);
        int64_t a = t->dim_a[i], span = r->syms[k - 1].max - r->syms[k - 1].min, low;
        /* size at the smallest value: dims - a * span, which a damaged
         * artifact can push past int64 (and UB) with a huge or negative dim */
        if (a == 0 || a > INT32_MAX || a < -INT32_MAX || __builtin_mul_overflow(a, span, &low) ||
            __builtin_sub_overflow(t->dims[i], low, &low) || low < 0)
            return kn_rbuf_bad(&r->in, what, "dim %d: %lld at the maximum with coefficient %lld", i,
                               (long long)t->dims[i], (long long)a);
    }
    return KN_OK;
}

/* Checks what later code relies on: ranks index dims[8], dims are sizes,
 * and (for I/O and opnode tensors) nbytes is what dtype and dims say. */
static int check_tensor(const rbuf *r, const kn_abi_tensor *t, int mode, const char *what)
{
    if (t->slot < 0) return kn_rbuf_bad(&r->in, what, "negative slot %d", t->slot);
    KN_RD(check_sym_dims(r, t, what));
    if (t->slot > 0) return check_dynamic(r, t, mode, what);
    if (mode == T_OUTPUT) mode = T_IO;
    int min_rank = mode == T_IO ? 0 : -1;
    if (t->rank < min_rank || t->rank > KN_MAX_RANK)
        return kn_rbuf_bad(&r->in, what, "rank %d outside [%d, %d]", t->rank, min_rank, KN_MAX_RANK);
    if (t->dtype != KN_DT_UNDEFINED && !kn_dtype_info(t->dtype)->name)
        return kn_rbuf_bad(&r->in, what, "unknown dtype %d", t->dtype);
    if (t->nbytes < 0) return kn_rbuf_bad(&r->in, what, "negative size %lld", (long long)t->nbytes);
    if (t->rank < 0) return KN_OK;
    int64_t numel = kn_shape_numel(t->rank, t->dims);
    if (numel < 0) return kn_rbuf_bad(&r->in, what, "negative or overflowing dims");
    if (mode == T_ANY) return KN_OK;
    if (mode == T_IO && !t->name) return kn_rbuf_bad(&r->in, what, "no name");
    if (!kn_dtype_valid(t->dtype)) return kn_rbuf_bad(&r->in, what, "dtype %d cannot be computed on", t->dtype);
    if ((uint64_t)numel > SIZE_MAX / 8) return kn_rbuf_bad(&r->in, what, "too many elements");
    size_t want = kn_dtype_nbytes((kn_dtype)t->dtype, (size_t)numel);
    if ((uint64_t)t->nbytes != want)
        return kn_rbuf_bad(&r->in, what, "nbytes %lld, but %s of %lld elements is %zu bytes", (long long)t->nbytes,
                     kn_dtype_name(t->dtype), (long long)numel, want);
    return KN_OK;
}

static int r_tensor(rbuf *r, kn_abi_tensor *t, int mode, const char *what)
{
    KN_RD(r_str(r, &t->name, what));
    KN_RD(kn_rbuf_i32(&r->in, &t->dtype, what));
    KN_RD(kn_rbuf_i32(&r->in, &t->rank, what));
    for (int i = 0; i < 8; i++) KN_RD(kn_rbuf_i64(&r->in, &t->dims[i], what));
    for (int i = 0; i < 8; i++) KN_RD(r_str(r, &t->dim_names[i], what));
    KN_RD(kn_rbuf_i64(&r->in, &t->nbytes, what));
    KN_RD(kn_rbuf_i32(&r->in, &t->slot, what));
    for (int i = 0; i < 8; i++) KN_RD(kn_rbuf_i32(&r->in, &t->dim_sym[i], what));
    for (int i = 0; i < 8; i++) KN_RD(kn_rbuf_i64(&r->in, &t->dim_a[i], what));
    return check_tensor(r, t, mode, what);
}

static int r_tensors(rbuf *r, int n, kn_abi_tensor *arr, int mode, const char *what)
{
    char item[160];
    for (int i = 0; i < n; i++) {
        snprintf(item, sizeof item, "%s %d", what, i);
        KN_RD(r_tensor(r, &arr[i], mode, item));
    }
    return KN_OK;
}

static int r_tensor_array(rbuf *r, int n, kn_abi_tensor **out, int mode, const char *what)
{
    KN_RD(r_alloc(r, sizeof **out * (size_t)n, (void **)out, what));
    return r_tensors(r, n, *out, mode, what);
}

static int r_ref(rbuf *r, kn_abi_ref *ref, const char *what)
{
    KN_RD(kn_rbuf_i32(&r->in, &ref->loc, what));
    KN_RD(kn_rbuf_i64(&r->in, &ref->offset, what));
    if (ref->loc < KN_LOC_ARENA || ref->loc > KN_LOC_OUTPUT || ref->offset < 0)
        return kn_rbuf_bad(&r->in, what, "bad location %d / offset %lld", ref->loc, (long long)ref->offset);
    return KN_OK;
}

static int r_dnnl(rbuf *r, kn_abi_dnnl *d, int index)
{
    char what[64];
    snprintf(what, sizeof what, "oneDNN record %d", index);
    KN_RD(kn_rbuf_i32(&r->in, &d->kind, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->n_post, what));
    for (int i = 0; i < 4; i++) {
        KN_RD(kn_rbuf_i32(&r->in, &d->post[i].kind, what));
        KN_RD(kn_rbuf_f32(&r->in, &d->post[i].alpha, what));
        KN_RD(kn_rbuf_f32(&r->in, &d->post[i].beta, what));
    }
    KN_RD(r_tensor(r, &d->src, T_ANY, what));
    KN_RD(r_tensor(r, &d->wei, T_ANY, what));
    KN_RD(r_tensor(r, &d->bias, T_ANY, what));
    KN_RD(r_tensor(r, &d->dst, T_ANY, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->trans_a, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->trans_b, what));
    KN_RD(kn_rbuf_f32(&r->in, &d->alpha, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->groups, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->spatial, what));
    for (int i = 0; i < 3; i++) KN_RD(kn_rbuf_i64(&r->in, &d->strides[i], what));
    for (int i = 0; i < 3; i++) KN_RD(kn_rbuf_i64(&r->in, &d->dilations[i], what));
    for (int i = 0; i < 3; i++) KN_RD(kn_rbuf_i64(&r->in, &d->pads_begin[i], what));
    for (int i = 0; i < 3; i++) KN_RD(kn_rbuf_i64(&r->in, &d->pads_end[i], what));
    KN_RD(r_ref(r, &d->wei_ref, what));
    KN_RD(r_ref(r, &d->bias_ref, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->src_layout, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->dst_layout, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->post_layout, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->conv_algo, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->alg, what));
    for (int i = 0; i < 3; i++) KN_RD(kn_rbuf_i64(&r->in, &d->kernel[i], what));
    KN_RD(kn_rbuf_i32(&r->in, &d->n_scale, what));
    KN_RD(r_ref(r, &d->scale_ref, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->src_zp, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->dst_zp, what));
    KN_RD(kn_rbuf_i32(&r->in, &d->compute, what));
    if (d->compute != KN_DT_UNDEFINED &&
        (d->compute != KN_BF16 || d->n_scale != 0 || d->src.dtype != KN_F32 || d->wei.dtype != KN_F32 ||
         (d->kind != KN_DNNL_MATMUL && d->kind != KN_DNNL_CONV)))
        return kn_rbuf_bad(&r->in, what, "compute dtype %d (bf16 is for float matmuls and convolutions)", d->compute);
    if (d->n_scale < 0 || d->n_scale > (1 << 24)) return kn_rbuf_bad(&r->in, what, "%d output scales", d->n_scale);
    if (d->conv_algo != KN_CONV_ALGO_AUTO && d->conv_algo != KN_CONV_ALGO_DIRECT)
        return kn_rbuf_bad(&r->in, what, "convolution algorithm %d", d->conv_algo);
    if (d->kind == KN_DNNL_BINARY ? d->alg != KN_BINARY_MUL && d->alg != KN_BINARY_ADD
                                  : d->alg < KN_POOLING_MAX || d->alg > KN_POOLING_AVG_EXCLUDE_PAD)
        return kn_rbuf_bad(&r->in, what, "%s algorithm %d", d->kind == KN_DNNL_BINARY ? "binary" : "pooling", d->alg);
    for (int i = 0; i < 3; i++) {
        int32_t l = i == 0 ? d->src_layout : i == 1 ? d->dst_layout : d->post_layout;
        if (l != KN_LAYOUT_PLAIN && (l != KN_LAYOUT_NATIVE || d->kind == KN_DNNL_MATMUL))
            return kn_rbuf_bad(&r->in, what, "activation layout %d", l);
    }
    if (d->kind != KN_DNNL_MATMUL && d->kind != KN_DNNL_CONV && d->kind != KN_DNNL_POOL && d->kind != KN_DNNL_DECONV &&
        d->kind != KN_DNNL_BINARY)
        return kn_rbuf_bad(&r->in, what, "unknown kind %d", d->kind);
    if (d->n_post < 0 || d->n_post > 4) return kn_rbuf_bad(&r->in, what, "%d post-ops (at most 4)", d->n_post);
    if (d->spatial < 0 || d->spatial > 3 || d->groups < 0)
        return kn_rbuf_bad(&r->in, what, "spatial %d / groups %d out of range", d->spatial, d->groups);
    return KN_OK;
}

static int r_opnode(rbuf *r, kn_abi_opnode *o, int index)
{
    char what[64], list[160];
    snprintf(what, sizeof what, "opnode %d", index);
    KN_RD(kn_rbuf_i32(&r->in, &o->op, what));
    KN_RD(kn_rbuf_count(&r->in, MAX_OPNODE_ARITY, MIN_TENSOR_BYTES, &o->n_inputs, what));
    KN_RD(kn_rbuf_count(&r->in, MAX_OPNODE_ARITY, MIN_TENSOR_BYTES, &o->n_outputs, what));
    KN_RD(kn_rbuf_i32(&r->in, &o->n_captures, what));
    if (o->n_captures < 0 || o->n_captures > o->n_inputs)
        return kn_rbuf_bad(&r->in, what, "%d captures among %d inputs", o->n_captures, o->n_inputs);
    KN_RD(kn_rbuf_i64(&r->in, &o->opset, what));
    KN_RD(r_str(r, &o->name, what));
    KN_RD(r_str(r, &o->op_type, what));
    if (!o->name || !o->op_type) return kn_rbuf_bad(&r->in, what, "no name or op type");
    snprintf(list, sizeof list, "opnode %d ('%s') input", index, o->name);
    KN_RD(r_tensor_array(r, o->n_inputs, (kn_abi_tensor **)&o->inputs, T_OPNODE, list));
    snprintf(list, sizeof list, "opnode %d ('%s') output", index, o->name);
    KN_RD(r_tensor_array(r, o->n_outputs, (kn_abi_tensor **)&o->outputs, T_OPNODE, list));
    uint64_t n;
    KN_RD(kn_rbuf_u64(&r->in, &n, what));
    KN_RD(kn_rbuf_need(&r->in, n, what));
    unsigned char *a;
    KN_RD(r_alloc(r, (size_t)n, (void **)&a, what));
    memcpy(a, r->in.p + r->in.pos, (size_t)n);
    r->in.pos += (size_t)n;
    o->attrs = a;
    o->attrs_len = (int64_t)n;
    KN_RD(kn_rbuf_i32(&r->in, &o->compute, what));
    if (o->compute != KN_DT_UNDEFINED &&
        (o->compute != KN_BF16 || (o->op != KN_OP_Attention && o->op != KN_OP_PackedAttention)))
        return kn_rbuf_bad(&r->in, what, "compute dtype %d (bf16 is for Attention)", o->compute);
    KN_RD(kn_rbuf_i32(&r->in, &o->nhwc, what));
    bool window =
        o->op == KN_OP_Conv || o->op == KN_OP_FusedConv || o->op == KN_OP_MaxPool || o->op == KN_OP_AveragePool;
    bool convt = o->op == KN_OP_ConvTranspose || o->op == KN_OP_FusedConvTranspose;
    bool agnostic = o->op == KN_OP_Concat || o->op == KN_OP_Split || o->op == KN_OP_Resize || o->op == KN_OP_Add ||
                    o->op == KN_OP_Sub || o->op == KN_OP_Mul || o->op == KN_OP_Div;
    if (o->nhwc == KN_OPNODE_NHWC_ALL || o->nhwc == KN_OPNODE_NATIVE_ALL) {
        if (!agnostic)
            return kn_rbuf_bad(&r->in, what,
                               "NHWC bits %#x (all operands: Concat, Split, Resize and binary ops only)",
                               (unsigned)o->nhwc);
        return KN_OK;
    }
    if (o->nhwc & ~(KN_OPNODE_NHWC_SRC | KN_OPNODE_NHWC_DST | KN_OPNODE_NHWC_RES) || (o->nhwc && !window && !convt) ||
        (convt && (o->nhwc & KN_OPNODE_NHWC_RES)))
        return kn_rbuf_bad(&r->in, what, "NHWC bits %#x (for convolutions and poolings only)", (unsigned)o->nhwc);
    /* a residual is read in the output's layout (the sum adds what dst holds) */
    bool res = o->op == KN_OP_FusedConv && o->n_inputs > KN_FUSED_RESIDUAL && o->inputs[KN_FUSED_RESIDUAL].rank >= 0;
    if (res ? !(o->nhwc & KN_OPNODE_NHWC_RES) != !(o->nhwc & KN_OPNODE_NHWC_DST) : (o->nhwc & KN_OPNODE_NHWC_RES))
        return kn_rbuf_bad(&r->in, what, "NHWC bits %#x: the residual's layout is not the output's", (unsigned)o->nhwc);
    return KN_OK;
}

static int r_sizes(rbuf *r, kn_meta *m)
{
    KN_RD(kn_rbuf_i64(&r->in, &m->arena_bytes, "sizes"));
    KN_RD(kn_rbuf_i64(&r->in, &m->intermediate_bytes, "sizes"));
    KN_RD(kn_rbuf_i64(&r->in, &m->weights_bytes, "sizes"));
    if (m->arena_bytes < 0 || m->intermediate_bytes < 0 || m->weights_bytes < 0)
        return kn_rbuf_bad(&r->in, "sizes", "negative arena, intermediate or weights size");
    KN_RD(r_str(r, &m->weights_file, "weights file"));
    if (m->weights_file && (!*m->weights_file || strchr(m->weights_file, '/')))
        return kn_rbuf_bad(&r->in, "weights file", "'%s' is not a plain file name", m->weights_file);
    KN_RD(kn_rbuf_u64(&r->in, &m->weights_hash, "weights hash"));
    return KN_OK;
}

/* Steps and buffers: what a profiler indexes with must be in range (a
 * buffer inside the arena, its steps in [0, n_steps), first <= last). */
static int r_profile(rbuf *r, kn_meta *m)
{
    char what[64];
    KN_RD(kn_rbuf_count(&r->in, 1 << 24, MIN_STEP_BYTES, &m->n_steps, "steps"));
    KN_RD(kn_rbuf_count(&r->in, 1 << 24, MIN_BUFFER_BYTES, &m->n_buffers, "buffers"));
    KN_RD(r_alloc(r, sizeof *m->steps * (size_t)m->n_steps, (void **)&m->steps, "steps"));
    for (int i = 0; i < m->n_steps; i++) {
        kn_abi_step *t = &m->steps[i];
        snprintf(what, sizeof what, "step %d", i);
        KN_RD(r_str(r, &t->name, what));
        KN_RD(r_str(r, &t->op_type, what));
        KN_RD(kn_rbuf_i64(&r->in, &t->flops, what));
        KN_RD(kn_rbuf_i64(&r->in, &t->bytes_read, what));
        KN_RD(kn_rbuf_i64(&r->in, &t->bytes_written, what));
        KN_RD(kn_rbuf_i32(&r->in, &t->dnnl, what));
        if (!t->name || !t->op_type) return kn_rbuf_bad(&r->in, what, "no name or op type");
        if (t->dnnl < -1 || t->dnnl >= m->n_dnnl)
            return kn_rbuf_bad(&r->in, what, "oneDNN record %d of %d", t->dnnl, m->n_dnnl);
        if (t->flops < 0 || t->bytes_read < 0 || t->bytes_written < 0)
            return kn_rbuf_bad(&r->in, what, "negative count");
    }
    KN_RD(r_alloc(r, sizeof *m->buffers * (size_t)m->n_buffers, (void **)&m->buffers, "buffers"));
    for (int i = 0; i < m->n_buffers; i++) {
        kn_abi_buffer *b = &m->buffers[i];
        snprintf(what, sizeof what, "buffer %d", i);
        KN_RD(r_str(r, &b->name, what));
        KN_RD(kn_rbuf_i64(&r->in, &b->offset, what));
        KN_RD(kn_rbuf_i64(&r->in, &b->nbytes, what));
        KN_RD(kn_rbuf_i32(&r->in, &b->first_step, what));
        KN_RD(kn_rbuf_i32(&r->in, &b->last_step, what));
        if (!b->name) return kn_rbuf_bad(&r->in, what, "no name");
        if (b->offset < 0 || b->nbytes < 0 || b->offset > m->arena_bytes || b->nbytes > m->arena_bytes - b->offset)
            return kn_rbuf_bad(&r->in, what, "[%lld, +%lld) outside the arena of %lld bytes", (long long)b->offset,
                         (long long)b->nbytes, (long long)m->arena_bytes);
        if (b->first_step < 0 || b->first_step > b->last_step || b->last_step >= m->n_steps)
            return kn_rbuf_bad(&r->in, what, "steps %d..%d outside [0, %d)", b->first_step, b->last_step, m->n_steps);
    }
    return KN_OK;
}

static int r_syms(rbuf *r, kn_meta *m)
{
    KN_RD(r_alloc(r, sizeof *m->syms * (size_t)m->n_syms, (void **)&m->syms, "dynamic dims"));
    for (int i = 0; i < m->n_syms; i++) {
        KN_RD(r_str(r, &m->syms[i].name, "dynamic dims"));
        KN_RD(kn_rbuf_i64(&r->in, &m->syms[i].max, "dynamic dims"));
        KN_RD(kn_rbuf_i64(&r->in, &m->syms[i].min, "dynamic dims"));
        KN_RD(kn_rbuf_i64(&r->in, &m->syms[i].align, "dynamic dims"));
        KN_RD(kn_rbuf_i64(&r->in, &m->syms[i].from_data, "dynamic dims"));
        if (m->syms[i].from_data != 0 && m->syms[i].from_data != 1)
            return kn_rbuf_bad(&r->in, "dynamic dims", "symbol %d: from_data %lld (0 or 1)", i,
                               (long long)m->syms[i].from_data);
        if (!m->syms[i].name || m->syms[i].max < 1 || m->syms[i].max > INT32_MAX)
            return kn_rbuf_bad(&r->in, "dynamic dims", "symbol %d: no name or maximum %lld", i,
                               (long long)m->syms[i].max);
        if (m->syms[i].min < 1 || m->syms[i].min > m->syms[i].max || m->syms[i].align < 1 ||
            m->syms[i].align > INT32_MAX || m->syms[i].align * m->syms[i].max > INT32_MAX)
            return kn_rbuf_bad(&r->in, "dynamic dims", "symbol %d: minimum %lld, maximum %lld, alignment %lld", i,
                         (long long)m->syms[i].min, (long long)m->syms[i].max, (long long)m->syms[i].align);
    }
    r->n_syms = m->n_syms;
    r->syms = m->syms;
    return KN_OK;
}

static int r_meta(rbuf *r, kn_meta *m)
{
    uint32_t magic, format;
    KN_RD(kn_rbuf_u32(&r->in, &magic, "header"));
    KN_RD(kn_rbuf_u32(&r->in, &format, "header"));
    if (magic != META_MAGIC) return kn_rbuf_bad(&r->in, "header", "bad magic 0x%08x", magic);
    if (format != META_FORMAT)
        return kn_rbuf_bad(&r->in, "header", "format v%u, this runtime reads v%u", format, META_FORMAT);
    KN_RD(kn_rbuf_u64(&r->in, &m->model_hash, "header"));
    KN_RD(kn_rbuf_u64(&r->in, &m->cpu_features, "header"));
    KN_RD(kn_rbuf_count(&r->in, 1 << 20, MIN_TENSOR_BYTES, &m->n_inputs, "inputs"));
    KN_RD(kn_rbuf_count(&r->in, 1 << 20, MIN_TENSOR_BYTES, &m->n_outputs, "outputs"));
    KN_RD(kn_rbuf_i32(&r->in, &m->n_slots, "slots"));
    if (m->n_slots < 0 || m->n_slots > MAX_SLOTS)
        return kn_rbuf_bad(&r->in, "slots", "count %d outside [0, %d]", m->n_slots, MAX_SLOTS);
    r->n_slots = m->n_slots;
    KN_RD(kn_rbuf_i32(&r->in, &m->n_syms, "dynamic dims"));
    if (m->n_syms < 0 || m->n_syms > KN_MAX_SYMS)
        return kn_rbuf_bad(&r->in, "dynamic dims", "count %d outside [0, %d]", m->n_syms, KN_MAX_SYMS);
    /* the inputs array comes first in the block (even when empty), so that
     * kn_meta_free finds the block through m->inputs */
    KN_RD(r_alloc(r, sizeof *m->inputs * (size_t)m->n_inputs, (void **)&m->inputs, "inputs"));
    KN_RD(r_str(r, &m->name, "name"));
    KN_RD(r_str(r, &m->target, "target"));
    KN_RD(r_str(r, &m->kiln_version, "kiln version"));
    KN_RD(r_syms(r, m));
    KN_RD(r_tensors(r, m->n_inputs, m->inputs, T_IO, "input"));
    KN_RD(r_tensor_array(r, m->n_outputs, &m->outputs, T_OUTPUT, "output"));
    KN_RD(r_sizes(r, m));
    KN_RD(kn_rbuf_count(&r->in, 1 << 24, MIN_DNNL_BYTES, &m->n_dnnl, "oneDNN records"));
    KN_RD(kn_rbuf_count(&r->in, 1 << 24, MIN_OPNODE_BYTES, &m->n_opnodes, "opnodes"));
    KN_RD(r_alloc(r, sizeof *m->dnnl * (size_t)m->n_dnnl, (void **)&m->dnnl, "oneDNN records"));
    for (int i = 0; i < m->n_dnnl; i++) KN_RD(r_dnnl(r, &m->dnnl[i], i));
    KN_RD(r_alloc(r, sizeof *m->opnodes * (size_t)m->n_opnodes, (void **)&m->opnodes, "opnodes"));
    for (int i = 0; i < m->n_opnodes; i++) KN_RD(r_opnode(r, &m->opnodes[i], i));
    KN_RD(r_profile(r, m));
    if (r->in.pos != r->in.len)
        return kn_rbuf_bad(&r->in, "end", "%zu unexpected bytes after the last record", r->in.len - r->in.pos);
    return KN_OK;
}

int kn_meta_read(const unsigned char *bytes, size_t len, kn_meta *out)
{
    if (!out) return kn_error(KN_ERR_INVALID, "kn_meta_read: NULL output");
    memset(out, 0, sizeof *out);
    if (!bytes && len) return kn_error(KN_ERR_INVALID, "kn_meta_read: NULL bytes");
    if (len > SIZE_MAX / 8) return kn_error(KN_ERR_INVALID, "malformed meta: %zu bytes is too large", len);
    /* Every record's serialized form is at least a quarter of its size in
     * memory (tightest: an opnode with empty names and no tensors, 44 bytes
     * for 88), so 4*len is enough for valid input; running out of the block
     * means the counts lied. */
    rbuf r = {.in = {.p = bytes, .len = len, .what = "meta"}, .cap = 4 * len + 1024};
    r.blk = calloc(1, r.cap);
    if (!r.blk) return kn_error(KN_ERR_NOMEM, "meta: out of memory (%zu bytes)", r.cap);
    int st = r_meta(&r, out);
    if (st) {
        free(r.blk);
        memset(out, 0, sizeof *out);
        return st;
    }
    return KN_OK;
}

void kn_meta_free(kn_meta *m)
{
    if (!m) return;
    free(m->inputs);
    memset(m, 0, sizeof *m);
}
