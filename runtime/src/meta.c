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
 *   u64 length + the kn_attrs_write bytes, then its compute dtype (i32);
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
#include "opdesc.h"
#include "wbuf.h"

#define META_MAGIC 0x544d4e4bu /* "KNMT" */
#define META_FORMAT 4u /* follows KN_ABI_VERSION */
#define STR_NULL 0xffffffffu
/* Smallest serialized sizes, to bound counts before allocating. */
#define MIN_TENSOR_BYTES (4 + 4 + 4 + 8 * 8 + 8 * 4 + 8 + 4 + 8 * 4 + 8 * 8)
#define MAX_SLOTS (1 << 24)
#define MIN_DNNL_BYTES (4 + 4 + 4 * 12 + 4 * MIN_TENSOR_BYTES)
#define MIN_OPNODE_BYTES (4 * 4 + 8 + 4 + 4 + 8 + 4)
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
    w_i32(w, d->pool_alg);
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
    const unsigned char *p;
    size_t len, pos;
    char *blk; /* one block for every string and array of the result */
    size_t cap, used;
    int32_t n_slots; /* of the meta being read, for checking tensors' slots */
    int32_t n_syms;  /* and their dynamic dims */
    const kn_abi_sym *syms;
} rbuf;

#define RD(call)                    \
    do {                            \
        int st_ = (call);           \
        if (st_) return st_;        \
    } while (0)

static int r_bad(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int r_bad(const char *what, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kn_error(KN_ERR_INVALID, "malformed meta: %s: %s", what, msg);
}

static int r_need(rbuf *r, size_t n, const char *what)
{
    if (n > r->len - r->pos)
        return r_bad(what, "truncated at byte %zu of %zu (needs %zu more)", r->pos, r->len, n);
    return KN_OK;
}

static int r_u32(rbuf *r, uint32_t *v, const char *what)
{
    RD(r_need(r, 4, what));
    uint32_t x = 0;
    for (int i = 0; i < 4; i++) x |= (uint32_t)r->p[r->pos + i] << (8 * i);
    r->pos += 4;
    *v = x;
    return KN_OK;
}

static int r_u64(rbuf *r, uint64_t *v, const char *what)
{
    RD(r_need(r, 8, what));
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += 8;
    *v = x;
    return KN_OK;
}

static int r_i32(rbuf *r, int32_t *v, const char *what)
{
    uint32_t u;
    RD(r_u32(r, &u, what));
    *v = (int32_t)u;
    return KN_OK;
}

static int r_i64(rbuf *r, int64_t *v, const char *what)
{
    uint64_t u;
    RD(r_u64(r, &u, what));
    *v = (int64_t)u;
    return KN_OK;
}

static int r_f32(rbuf *r, float *v, const char *what)
{
    uint32_t u;
    RD(r_u32(r, &u, what));
    memcpy(v, &u, 4);
    return KN_OK;
}

/* Carves n bytes (8-aligned, zeroed) from the block. The block is sized so
 * that valid input always fits; running out means the counts lied. */
static int r_alloc(rbuf *r, size_t n, void **out, const char *what)
{
    size_t at = (r->used + 7) & ~(size_t)7;
    if (at > r->cap || n > r->cap - at) return r_bad(what, "sizes do not add up");
    *out = r->blk + at;
    r->used = at + n;
    return KN_OK;
}

static int r_str(rbuf *r, const char **out, const char *what)
{
    uint32_t n;
    RD(r_u32(r, &n, what));
    *out = NULL;
    if (n == STR_NULL) return KN_OK;
    RD(r_need(r, n, what));
    char *s = NULL;
    RD(r_alloc(r, (size_t)n + 1, (void **)&s, what));
    memcpy(s, r->p + r->pos, n);
    s[n] = '\0';
    r->pos += n;
    *out = s;
    return KN_OK;
}

/* A count that must be in [0, max] and leave at least count * min_size bytes. */
static int r_count(rbuf *r, int32_t *out, int32_t max, size_t min_size, const char *what)
{
    RD(r_i32(r, out, what));
    if (*out < 0 || *out > max) return r_bad(what, "count %d outside [0, %d]", *out, max);
    if ((size_t)*out > (r->len - r->pos) / min_size)
        return r_bad(what, "count %d does not fit in the %zu bytes left", *out, r->len - r->pos);
    return KN_OK;
}

enum { T_ANY = 0, T_IO = 1, T_OPNODE = 2, T_OUTPUT = 3 };

/* A dynamic value (slot > 0): only graph outputs and opnode tensors may be
 * one, its slot must exist, its dims are sizes or -1, it has no size. */
static int check_dynamic(const kn_abi_tensor *t, int mode, int n_slots, const char *what)
{
    if (mode != T_OUTPUT && mode != T_OPNODE) return r_bad(what, "a graph input or oneDNN tensor cannot be dynamic");
    if (t->slot > n_slots) return r_bad(what, "slot %d, but the artifact has %d", t->slot, n_slots);
    if (t->rank < -1 || t->rank > KN_MAX_RANK) return r_bad(what, "rank %d outside [-1, %d]", t->rank, KN_MAX_RANK);
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < -1) return r_bad(what, "dim %lld", (long long)t->dims[i]);
    if (t->nbytes != 0) return r_bad(what, "a dynamic value with a static size %lld", (long long)t->nbytes);
    if (t->dtype != KN_DT_UNDEFINED && !kn_dtype_valid(t->dtype)) return r_bad(what, "unknown dtype %d", t->dtype);
    if (mode == T_OUTPUT && !t->name) return r_bad(what, "no name");
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
            return r_bad(what, "dim %d follows symbol %d (the artifact has %d)", i, k, r->n_syms);
        int64_t a = t->dim_a[i], span = r->syms[k - 1].max - r->syms[k - 1].min, low;
        /* size at the smallest value: dims - a * span, which a damaged
         * artifact can push past int64 (and UB) with a huge or negative dim */
        if (a == 0 || a > INT32_MAX || a < -INT32_MAX || __builtin_mul_overflow(a, span, &low) ||
            __builtin_sub_overflow(t->dims[i], low, &low) || low < 0)
            return r_bad(what, "dim %d: %lld at the maximum with coefficient %lld", i, (long long)t->dims[i],
                         (long long)a);
    }
    return KN_OK;
}

/* Checks what later code relies on: ranks index dims[8], dims are sizes,
 * and (for I/O and opnode tensors) nbytes is what dtype and dims say. */
static int check_tensor(const rbuf *r, const kn_abi_tensor *t, int mode, const char *what)
{
    int n_slots = r->n_slots;
    if (t->slot < 0) return r_bad(what, "negative slot %d", t->slot);
    RD(check_sym_dims(r, t, what));
    if (t->slot > 0) return check_dynamic(t, mode, n_slots, what);
    if (mode == T_OUTPUT) mode = T_IO;
    int min_rank = mode == T_IO ? 0 : -1;
    if (t->rank < min_rank || t->rank > KN_MAX_RANK)
        return r_bad(what, "rank %d outside [%d, %d]", t->rank, min_rank, KN_MAX_RANK);
    if (t->dtype != KN_DT_UNDEFINED && !kn_dtype_info(t->dtype)->name)
        return r_bad(what, "unknown dtype %d", t->dtype);
    if (t->nbytes < 0) return r_bad(what, "negative size %lld", (long long)t->nbytes);
    if (t->rank < 0) return KN_OK;
    int64_t numel = kn_shape_numel(t->rank, t->dims);
    if (numel < 0) return r_bad(what, "negative or overflowing dims");
    if (mode == T_ANY) return KN_OK;
    if (mode == T_IO && !t->name) return r_bad(what, "no name");
    if (!kn_dtype_valid(t->dtype)) return r_bad(what, "dtype %d cannot be computed on", t->dtype);
    if ((uint64_t)numel > SIZE_MAX / 8) return r_bad(what, "too many elements");
    size_t want = kn_dtype_nbytes((kn_dtype)t->dtype, (size_t)numel);
    if ((uint64_t)t->nbytes != want)
        return r_bad(what, "nbytes %lld, but %s of %lld elements is %zu bytes", (long long)t->nbytes,
                     kn_dtype_name(t->dtype), (long long)numel, want);
    return KN_OK;
}

static int r_tensor(rbuf *r, kn_abi_tensor *t, int mode, const char *what)
{
    RD(r_str(r, &t->name, what));
    RD(r_i32(r, &t->dtype, what));
    RD(r_i32(r, &t->rank, what));
    for (int i = 0; i < 8; i++) RD(r_i64(r, &t->dims[i], what));
    for (int i = 0; i < 8; i++) RD(r_str(r, &t->dim_names[i], what));
    RD(r_i64(r, &t->nbytes, what));
    RD(r_i32(r, &t->slot, what));
    for (int i = 0; i < 8; i++) RD(r_i32(r, &t->dim_sym[i], what));
    for (int i = 0; i < 8; i++) RD(r_i64(r, &t->dim_a[i], what));
    return check_tensor(r, t, mode, what);
}

static int r_tensors(rbuf *r, int n, kn_abi_tensor *arr, int mode, const char *what)
{
    char item[160];
    for (int i = 0; i < n; i++) {
        snprintf(item, sizeof item, "%s %d", what, i);
        RD(r_tensor(r, &arr[i], mode, item));
    }
    return KN_OK;
}

static int r_tensor_array(rbuf *r, int n, kn_abi_tensor **out, int mode, const char *what)
{
    RD(r_alloc(r, sizeof **out * (size_t)n, (void **)out, what));
    return r_tensors(r, n, *out, mode, what);
}

static int r_ref(rbuf *r, kn_abi_ref *ref, const char *what)
{
    RD(r_i32(r, &ref->loc, what));
    RD(r_i64(r, &ref->offset, what));
    if (ref->loc < KN_LOC_ARENA || ref->loc > KN_LOC_OUTPUT || ref->offset < 0)
        return r_bad(what, "bad location %d / offset %lld", ref->loc, (long long)ref->offset);
    return KN_OK;
}

static int r_dnnl(rbuf *r, kn_abi_dnnl *d, int index)
{
    char what[64];
    snprintf(what, sizeof what, "oneDNN record %d", index);
    RD(r_i32(r, &d->kind, what));
    RD(r_i32(r, &d->n_post, what));
    for (int i = 0; i < 4; i++) {
        RD(r_i32(r, &d->post[i].kind, what));
        RD(r_f32(r, &d->post[i].alpha, what));
        RD(r_f32(r, &d->post[i].beta, what));
    }
    RD(r_tensor(r, &d->src, T_ANY, what));
    RD(r_tensor(r, &d->wei, T_ANY, what));
    RD(r_tensor(r, &d->bias, T_ANY, what));
    RD(r_tensor(r, &d->dst, T_ANY, what));
    RD(r_i32(r, &d->trans_a, what));
    RD(r_i32(r, &d->trans_b, what));
    RD(r_f32(r, &d->alpha, what));
    RD(r_i32(r, &d->groups, what));
    RD(r_i32(r, &d->spatial, what));
    for (int i = 0; i < 3; i++) RD(r_i64(r, &d->strides[i], what));
    for (int i = 0; i < 3; i++) RD(r_i64(r, &d->dilations[i], what));
    for (int i = 0; i < 3; i++) RD(r_i64(r, &d->pads_begin[i], what));
    for (int i = 0; i < 3; i++) RD(r_i64(r, &d->pads_end[i], what));
    RD(r_ref(r, &d->wei_ref, what));
    RD(r_ref(r, &d->bias_ref, what));
    RD(r_i32(r, &d->src_layout, what));
    RD(r_i32(r, &d->dst_layout, what));
    RD(r_i32(r, &d->post_layout, what));
    RD(r_i32(r, &d->conv_algo, what));
    RD(r_i32(r, &d->pool_alg, what));
    for (int i = 0; i < 3; i++) RD(r_i64(r, &d->kernel[i], what));
    RD(r_i32(r, &d->n_scale, what));
    RD(r_ref(r, &d->scale_ref, what));
    RD(r_i32(r, &d->src_zp, what));
    RD(r_i32(r, &d->dst_zp, what));
    RD(r_i32(r, &d->compute, what));
    if (d->compute != KN_DT_UNDEFINED &&
        (d->compute != KN_BF16 || d->n_scale != 0 || d->src.dtype != KN_F32 || d->wei.dtype != KN_F32 ||
         (d->kind != KN_DNNL_MATMUL && d->kind != KN_DNNL_CONV)))
        return r_bad(what, "compute dtype %d (bf16 is for float matmuls and convolutions)", d->compute);
    if (d->n_scale < 0 || d->n_scale > (1 << 24)) return r_bad(what, "%d output scales", d->n_scale);
    if (d->conv_algo != KN_CONV_ALGO_AUTO && d->conv_algo != KN_CONV_ALGO_DIRECT)
        return r_bad(what, "convolution algorithm %d", d->conv_algo);
    if (d->pool_alg < KN_POOLING_MAX || d->pool_alg > KN_POOLING_AVG_EXCLUDE_PAD)
        return r_bad(what, "pooling algorithm %d", d->pool_alg);
    for (int i = 0; i < 3; i++) {
        int32_t l = i == 0 ? d->src_layout : i == 1 ? d->dst_layout : d->post_layout;
        if (l != KN_LAYOUT_PLAIN && (l != KN_LAYOUT_NATIVE || d->kind == KN_DNNL_MATMUL))
            return r_bad(what, "activation layout %d", l);
    }
    if (d->kind != KN_DNNL_MATMUL && d->kind != KN_DNNL_CONV && d->kind != KN_DNNL_POOL && d->kind != KN_DNNL_DECONV)
        return r_bad(what, "unknown kind %d", d->kind);
    if (d->n_post < 0 || d->n_post > 4) return r_bad(what, "%d post-ops (at most 4)", d->n_post);
    if (d->spatial < 0 || d->spatial > 3 || d->groups < 0)
        return r_bad(what, "spatial %d / groups %d out of range", d->spatial, d->groups);
    return KN_OK;
}

static int r_opnode(rbuf *r, kn_abi_opnode *o, int index)
{
    char what[64], list[160];
    snprintf(what, sizeof what, "opnode %d", index);
    RD(r_i32(r, &o->op, what));
    RD(r_count(r, &o->n_inputs, MAX_OPNODE_ARITY, MIN_TENSOR_BYTES, what));
    RD(r_count(r, &o->n_outputs, MAX_OPNODE_ARITY, MIN_TENSOR_BYTES, what));
    RD(r_i32(r, &o->n_captures, what));
    if (o->n_captures < 0 || o->n_captures > o->n_inputs)
        return r_bad(what, "%d captures among %d inputs", o->n_captures, o->n_inputs);
    RD(r_i64(r, &o->opset, what));
    RD(r_str(r, &o->name, what));
    RD(r_str(r, &o->op_type, what));
    if (!o->name || !o->op_type) return r_bad(what, "no name or op type");
    snprintf(list, sizeof list, "opnode %d ('%s') input", index, o->name);
    RD(r_tensor_array(r, o->n_inputs, (kn_abi_tensor **)&o->inputs, T_OPNODE, list));
    snprintf(list, sizeof list, "opnode %d ('%s') output", index, o->name);
    RD(r_tensor_array(r, o->n_outputs, (kn_abi_tensor **)&o->outputs, T_OPNODE, list));
    uint64_t n;
    RD(r_u64(r, &n, what));
    RD(r_need(r, n, what));
    unsigned char *a;
    RD(r_alloc(r, (size_t)n, (void **)&a, what));
    memcpy(a, r->p + r->pos, (size_t)n);
    r->pos += (size_t)n;
    o->attrs = a;
    o->attrs_len = (int64_t)n;
    RD(r_i32(r, &o->compute, what));
    if (o->compute != KN_DT_UNDEFINED && (o->compute != KN_BF16 || o->op != KN_OP_Attention))
        return r_bad(what, "compute dtype %d (bf16 is for Attention)", o->compute);
    return KN_OK;
}

static int r_sizes(rbuf *r, kn_meta *m)
{
    RD(r_i64(r, &m->arena_bytes, "sizes"));
    RD(r_i64(r, &m->intermediate_bytes, "sizes"));
    RD(r_i64(r, &m->weights_bytes, "sizes"));
    if (m->arena_bytes < 0 || m->intermediate_bytes < 0 || m->weights_bytes < 0)
        return r_bad("sizes", "negative arena, intermediate or weights size");
    RD(r_str(r, &m->weights_file, "weights file"));
    if (m->weights_file && (!*m->weights_file || strchr(m->weights_file, '/')))
        return r_bad("weights file", "'%s' is not a plain file name", m->weights_file);
    RD(r_u64(r, &m->weights_hash, "weights hash"));
    return KN_OK;
}

/* Steps and buffers: what a profiler indexes with must be in range (a
 * buffer inside the arena, its steps in [0, n_steps), first <= last). */
static int r_profile(rbuf *r, kn_meta *m)
{
    char what[64];
    RD(r_count(r, &m->n_steps, 1 << 24, MIN_STEP_BYTES, "steps"));
    RD(r_count(r, &m->n_buffers, 1 << 24, MIN_BUFFER_BYTES, "buffers"));
    RD(r_alloc(r, sizeof *m->steps * (size_t)m->n_steps, (void **)&m->steps, "steps"));
    for (int i = 0; i < m->n_steps; i++) {
        kn_abi_step *t = &m->steps[i];
        snprintf(what, sizeof what, "step %d", i);
        RD(r_str(r, &t->name, what));
        RD(r_str(r, &t->op_type, what));
        RD(r_i64(r, &t->flops, what));
        RD(r_i64(r, &t->bytes_read, what));
        RD(r_i64(r, &t->bytes_written, what));
        RD(r_i32(r, &t->dnnl, what));
        if (!t->name || !t->op_type) return r_bad(what, "no name or op type");
        if (t->dnnl < -1 || t->dnnl >= m->n_dnnl) return r_bad(what, "oneDNN record %d of %d", t->dnnl, m->n_dnnl);
        if (t->flops < 0 || t->bytes_read < 0 || t->bytes_written < 0) return r_bad(what, "negative count");
    }
    RD(r_alloc(r, sizeof *m->buffers * (size_t)m->n_buffers, (void **)&m->buffers, "buffers"));
    for (int i = 0; i < m->n_buffers; i++) {
        kn_abi_buffer *b = &m->buffers[i];
        snprintf(what, sizeof what, "buffer %d", i);
        RD(r_str(r, &b->name, what));
        RD(r_i64(r, &b->offset, what));
        RD(r_i64(r, &b->nbytes, what));
        RD(r_i32(r, &b->first_step, what));
        RD(r_i32(r, &b->last_step, what));
        if (!b->name) return r_bad(what, "no name");
        if (b->offset < 0 || b->nbytes < 0 || b->offset > m->arena_bytes || b->nbytes > m->arena_bytes - b->offset)
            return r_bad(what, "[%lld, +%lld) outside the arena of %lld bytes", (long long)b->offset,
                         (long long)b->nbytes, (long long)m->arena_bytes);
        if (b->first_step < 0 || b->first_step > b->last_step || b->last_step >= m->n_steps)
            return r_bad(what, "steps %d..%d outside [0, %d)", b->first_step, b->last_step, m->n_steps);
    }
    return KN_OK;
}

static int r_syms(rbuf *r, kn_meta *m)
{
    RD(r_alloc(r, sizeof *m->syms * (size_t)m->n_syms, (void **)&m->syms, "dynamic dims"));
    for (int i = 0; i < m->n_syms; i++) {
        RD(r_str(r, &m->syms[i].name, "dynamic dims"));
        RD(r_i64(r, &m->syms[i].max, "dynamic dims"));
        RD(r_i64(r, &m->syms[i].min, "dynamic dims"));
        RD(r_i64(r, &m->syms[i].align, "dynamic dims"));
        if (!m->syms[i].name || m->syms[i].max < 1 || m->syms[i].max > INT32_MAX)
            return r_bad("dynamic dims", "symbol %d: no name or maximum %lld", i, (long long)m->syms[i].max);
        if (m->syms[i].min < 1 || m->syms[i].min > m->syms[i].max || m->syms[i].align < 1 ||
            m->syms[i].align > INT32_MAX || m->syms[i].align * m->syms[i].max > INT32_MAX)
            return r_bad("dynamic dims", "symbol %d: minimum %lld, maximum %lld, alignment %lld", i,
                         (long long)m->syms[i].min, (long long)m->syms[i].max, (long long)m->syms[i].align);
    }
    r->n_syms = m->n_syms;
    r->syms = m->syms;
    return KN_OK;
}

static int r_meta(rbuf *r, kn_meta *m)
{
    uint32_t magic, format;
    RD(r_u32(r, &magic, "header"));
    RD(r_u32(r, &format, "header"));
    if (magic != META_MAGIC) return r_bad("header", "bad magic 0x%08x", magic);
    if (format != META_FORMAT) return r_bad("header", "format v%u, this runtime reads v%u", format, META_FORMAT);
    RD(r_u64(r, &m->model_hash, "header"));
    RD(r_u64(r, &m->cpu_features, "header"));
    RD(r_count(r, &m->n_inputs, 1 << 20, MIN_TENSOR_BYTES, "inputs"));
    RD(r_count(r, &m->n_outputs, 1 << 20, MIN_TENSOR_BYTES, "outputs"));
    RD(r_i32(r, &m->n_slots, "slots"));
    if (m->n_slots < 0 || m->n_slots > MAX_SLOTS) return r_bad("slots", "count %d outside [0, %d]", m->n_slots, MAX_SLOTS);
    r->n_slots = m->n_slots;
    RD(r_i32(r, &m->n_syms, "dynamic dims"));
    if (m->n_syms < 0 || m->n_syms > KN_MAX_SYMS)
        return r_bad("dynamic dims", "count %d outside [0, %d]", m->n_syms, KN_MAX_SYMS);
    /* the inputs array comes first in the block (even when empty), so that
     * kn_meta_free finds the block through m->inputs */
    RD(r_alloc(r, sizeof *m->inputs * (size_t)m->n_inputs, (void **)&m->inputs, "inputs"));
    RD(r_str(r, &m->name, "name"));
    RD(r_str(r, &m->target, "target"));
    RD(r_str(r, &m->kiln_version, "kiln version"));
    RD(r_syms(r, m));
    RD(r_tensors(r, m->n_inputs, m->inputs, T_IO, "input"));
    RD(r_tensor_array(r, m->n_outputs, &m->outputs, T_OUTPUT, "output"));
    RD(r_sizes(r, m));
    RD(r_count(r, &m->n_dnnl, 1 << 24, MIN_DNNL_BYTES, "oneDNN records"));
    RD(r_count(r, &m->n_opnodes, 1 << 24, MIN_OPNODE_BYTES, "opnodes"));
    RD(r_alloc(r, sizeof *m->dnnl * (size_t)m->n_dnnl, (void **)&m->dnnl, "oneDNN records"));
    for (int i = 0; i < m->n_dnnl; i++) RD(r_dnnl(r, &m->dnnl[i], i));
    RD(r_alloc(r, sizeof *m->opnodes * (size_t)m->n_opnodes, (void **)&m->opnodes, "opnodes"));
    for (int i = 0; i < m->n_opnodes; i++) RD(r_opnode(r, &m->opnodes[i], i));
    RD(r_profile(r, m));
    if (r->pos != r->len) return r_bad("end", "%zu unexpected bytes after the last record", r->len - r->pos);
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
    rbuf r = {.p = bytes, .len = len, .cap = 4 * len + 1024};
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
