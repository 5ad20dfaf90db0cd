/*
 * runtime/ops/attr_blob.c — serialized node attributes (kn_attrs_write /
 * kn_attrs_read), as compiled artifacts carry them for ops that run through
 * their runtime kernel.
 *
 * Format (integers little-endian): "KNAT", u32 count, then per attribute:
 * name (u32 length + bytes), i32 kind, and the payload —
 *   FLOAT f32 | INT i64 | STRING u64 length + bytes (NULs allowed) |
 *   TENSOR tensor | FLOATS/INTS/STRINGS/TENSORS u32 n + n items,
 * where a tensor is i32 dtype, i32 rank, rank x i64 dims, u64 nbytes, bytes,
 * and GRAPH a graph (subgraph.h), which is:
 *   name, u32 n_values + per value (name, i32 dtype, i32 rank (-1: unknown),
 *   rank x i64 dims), inputs, outputs (each u32 n + n x i32 value index),
 *   u32 n_consts + per constant (i32 value index, tensor), captures (u32 n +
 *   n x i32), u32 n_nodes + per node (name, op_type, domain, i64 opset,
 *   inputs and outputs as u32 n + n x i32 with -1 for an omitted one, then
 *   u32 n_attrs + that many attributes as above, so graphs nest).
 * Names are u32 length + bytes. Ops are stored by name and domain.
 *
 * The reader parses bytes from an artifact file: every count is checked
 * against the bytes left before anything is allocated, and tensors must
 * have consistent dtype, dims and size, because kernels index them freely.
 * Graphs are checked by kn_sg_check (every index in range, each value
 * defined once and before it is read, every op known with a runtime kernel).
 * Everything it returns lives in a chain of 64-byte aligned chunks (the
 * opaque block), so one kn_attrs_free releases it.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opdesc.h"
#include "subgraph.h"
#include "rbuf.h"
#include "wbuf.h"

#define ATTR_MAGIC 0x54414e4bu /* "KNAT" */
#define CHUNK_HDR 64
#define CHUNK_MIN 4096

/* ---- writing ------------------------------------------------------------ */


static int w_str32(kn_wbuf *w, const char *s, const char *attr)
{
    size_t n = s ? strlen(s) : 0;
    if (n > UINT32_MAX) return kn_error(KN_ERR_INVALID, "attribute '%s': string too long", attr);
    kn_wbuf_u32(w, (uint32_t)n);
    kn_wbuf_bytes(w, s, n);
    return KN_OK;
}

static int w_tensor(kn_wbuf *w, const kn_tensor *t, const char *attr)
{
    if (!t) return kn_error(KN_ERR_INVALID, "attribute '%s': NULL tensor", attr);
    int64_t numel = t->rank >= 0 && t->rank <= KN_MAX_RANK ? kn_shape_numel(t->rank, t->dims) : -1;
    if (numel < 0 || !kn_dtype_valid(t->dtype))
        return kn_error(KN_ERR_INVALID, "attribute '%s': tensor of rank %d, dtype %d cannot be serialized", attr,
                        t->rank, (int)t->dtype);
    size_t nbytes = kn_dtype_nbytes(t->dtype, (size_t)numel);
    if (nbytes && (!t->data || t->nbytes < nbytes))
        return kn_error(KN_ERR_INVALID, "attribute '%s': tensor holds %zu bytes, its shape needs %zu", attr,
                        t->data ? t->nbytes : 0, nbytes);
    kn_wbuf_u32(w, (uint32_t)t->dtype);
    kn_wbuf_u32(w, (uint32_t)t->rank);
    for (int i = 0; i < t->rank; i++) kn_wbuf_u64(w, (uint64_t)t->dims[i]);
    kn_wbuf_u64(w, nbytes);
    kn_wbuf_bytes(w, t->data, nbytes);
    return KN_OK;
}

static int w_list(kn_wbuf *w, const kn_attr *a)
{
    if (a->n < 0 || (a->n > 0 && ((a->kind == KN_ATTR_FLOATS && !a->floats) || (a->kind == KN_ATTR_INTS && !a->ints) ||
                                  (a->kind == KN_ATTR_STRINGS && !a->strings) ||
                                  (a->kind == KN_ATTR_TENSORS && !a->tensors))))
        return kn_error(KN_ERR_INVALID, "attribute '%s': list of %d with no elements", a->name, a->n);
    kn_wbuf_u32(w, (uint32_t)a->n);
    int st = KN_OK;
    for (int k = 0; k < a->n && !st; k++) {
        switch (a->kind) {
        case KN_ATTR_FLOATS: kn_wbuf_f32(w, a->floats[k]); break;
        case KN_ATTR_INTS: kn_wbuf_u64(w, (uint64_t)a->ints[k]); break;
        case KN_ATTR_STRINGS: st = w_str32(w, a->strings[k], a->name); break;
        default: st = w_tensor(w, a->tensors[k], a->name); break;
        }
    }
    return st;
}

static int w_attr(kn_wbuf *w, const kn_attr *a);

static void w_ids(kn_wbuf *w, int n, const int32_t *ids)
{
    kn_wbuf_u32(w, (uint32_t)n);
    for (int i = 0; i < n; i++) kn_wbuf_u32(w, (uint32_t)ids[i]);
}

static int w_sg_node(kn_wbuf *w, const kn_sg_node *n)
{
    const kn_opdesc *d = &n->desc;
    int st = w_str32(w, d->name, d->name);
    if (!st) st = w_str32(w, d->op_type, d->name);
    if (!st) st = w_str32(w, d->domain, d->name);
    if (st) return st;
    kn_wbuf_u64(w, (uint64_t)d->opset);
    w_ids(w, d->n_inputs, n->inputs);
    w_ids(w, d->n_outputs, n->outputs);
    kn_wbuf_u32(w, (uint32_t)d->n_attrs);
    for (int a = 0; a < d->n_attrs && !st; a++) st = w_attr(w, &d->attrs[a]);
    return st;
}

static int w_graph(kn_wbuf *w, const kn_sg *g, const char *attr)
{
    if (!g) return kn_error(KN_ERR_UNSUPPORTED, "attribute '%s': graph attributes need their runtime form", attr);
    char what[160];
    snprintf(what, sizeof what, "attribute '%.100s'", attr);
    int st = kn_sg_check(g, 0, what);
    if (!st) st = w_str32(w, g->name, attr);
    if (st) return st;
    kn_wbuf_u32(w, (uint32_t)g->n_values);
    for (int i = 0; i < g->n_values && !st; i++) {
        const kn_sg_value *v = &g->values[i];
        st = w_str32(w, v->name, attr);
        kn_wbuf_u32(w, (uint32_t)v->dtype);
        kn_wbuf_u32(w, (uint32_t)v->rank);
        for (int d = 0; d < v->rank; d++) kn_wbuf_u64(w, (uint64_t)v->dims[d]);
    }
    w_ids(w, g->n_inputs, g->inputs);
    w_ids(w, g->n_outputs, g->outputs);
    kn_wbuf_u32(w, (uint32_t)g->n_consts);
    for (int i = 0; i < g->n_consts && !st; i++) {
        kn_wbuf_u32(w, (uint32_t)g->const_ids[i]);
        st = w_tensor(w, g->consts[i], attr);
    }
    w_ids(w, g->n_captures, g->captures);
    kn_wbuf_u32(w, (uint32_t)g->n_nodes);
    for (int k = 0; k < g->n_nodes && !st; k++) st = w_sg_node(w, &g->nodes[k]);
    return st;
}

static int w_attr(kn_wbuf *w, const kn_attr *a)
{
    if (!a->name) return kn_error(KN_ERR_INVALID, "attributes: an attribute has no name");
    int st = w_str32(w, a->name, a->name);
    if (st) return st;
    kn_wbuf_u32(w, (uint32_t)a->kind);
    switch (a->kind) {
    case KN_ATTR_FLOAT: kn_wbuf_f32(w, a->f); return KN_OK;
    case KN_ATTR_INT: kn_wbuf_u64(w, (uint64_t)a->i); return KN_OK;
    case KN_ATTR_STRING:
        if (a->s_len && !a->s) return kn_error(KN_ERR_INVALID, "attribute '%s': NULL string", a->name);
        kn_wbuf_u64(w, a->s_len);
        kn_wbuf_bytes(w, a->s, a->s_len);
        return KN_OK;
    case KN_ATTR_TENSOR: return w_tensor(w, a->t, a->name);
    case KN_ATTR_FLOATS:
    case KN_ATTR_INTS:
    case KN_ATTR_STRINGS:
    case KN_ATTR_TENSORS: return w_list(w, a);
    case KN_ATTR_GRAPH: return w_graph(w, a->sg, a->name);
    case KN_ATTR_GRAPHS:
        return kn_error(KN_ERR_UNSUPPORTED, "attribute '%s': graph lists cannot be compiled into an artifact",
                        a->name);
    default: return kn_error(KN_ERR_INVALID, "attribute '%s': unknown kind %d", a->name, (int)a->kind);
    }
}

int kn_attrs_write(const kn_attr *attrs, int n_attrs, unsigned char **out_bytes, size_t *out_len)
{
    if (out_bytes) *out_bytes = NULL;
    if (out_len) *out_len = 0;
    if (!out_bytes || !out_len || n_attrs < 0 || (n_attrs && !attrs))
        return kn_error(KN_ERR_INVALID, "kn_attrs_write: bad arguments");
    kn_wbuf w = {.what = "attributes"};
    kn_wbuf_u32(&w, ATTR_MAGIC);
    kn_wbuf_u32(&w, (uint32_t)n_attrs);
    int st = KN_OK;
    for (int i = 0; i < n_attrs && !st && !w.err; i++) st = w_attr(&w, &attrs[i]);
    if (!st) st = w.err;
    if (st) {
        free(w.p);
        return st;
    }
    *out_bytes = w.p;
    *out_len = w.len;
    return KN_OK;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct chunk {
    struct chunk *next;
    size_t cap, used;
} chunk; /* followed, at CHUNK_HDR, by cap bytes of 64-byte aligned data */

typedef struct rbuf {
    kn_rbuf in;
    chunk *head, *cur;
    int depth; /* of the graph being read; 0 outside graphs */
} rbuf;

static int chunk_new(rbuf *r, size_t need)
{
    size_t cap = need > CHUNK_MIN ? need : CHUNK_MIN;
    if (cap > SIZE_MAX - CHUNK_HDR - 64) return kn_error(KN_ERR_NOMEM, "attributes: block too large");
    void *p = NULL;
    if (posix_memalign(&p, 64, CHUNK_HDR + cap)) return kn_error(KN_ERR_NOMEM, "attributes: out of memory");
    chunk *c = p;
    c->next = NULL;
    c->cap = cap;
    c->used = 0;
    if (r->cur) r->cur->next = c;
    else r->head = c;
    r->cur = c;
    return KN_OK;
}

/* n zeroed bytes aligned to `align` (a power of two up to 64). */
static int r_alloc(rbuf *r, size_t n, size_t align, void **out)
{
    chunk *c = r->cur;
    size_t at = c ? (c->used + align - 1) & ~(align - 1) : 0;
    if (!c || at > c->cap || n > c->cap - at) {
        if (n > SIZE_MAX - align) return kn_error(KN_ERR_NOMEM, "attributes: block too large");
        KN_RD(chunk_new(r, n + align));
        c = r->cur;
        at = 0;
    }
    *out = (char *)c + CHUNK_HDR + at;
    memset(*out, 0, n);
    c->used = at + n;
    return KN_OK;
}

/* Bytes of the input as a NUL-terminated copy. */
static int r_copy_str(rbuf *r, uint64_t n, const char **out, const char *what)
{
    KN_RD(kn_rbuf_need(&r->in, n, what));
    char *s = NULL;
    KN_RD(r_alloc(r, (size_t)n + 1, 1, (void **)&s));
    memcpy(s, r->in.p + r->in.pos, (size_t)n);
    r->in.pos += (size_t)n;
    *out = s;
    return KN_OK;
}

static int r_str32(rbuf *r, const char **out, const char *what)
{
    uint32_t n;
    KN_RD(kn_rbuf_u32(&r->in, &n, what));
    return r_copy_str(r, n, out, what);
}

static int r_tensor(rbuf *r, kn_tensor **out, const char *what)
{
    kn_tensor *t;
    KN_RD(r_alloc(r, sizeof *t, 8, (void **)&t));
    uint32_t dt, rank;
    KN_RD(kn_rbuf_u32(&r->in, &dt, what));
    KN_RD(kn_rbuf_u32(&r->in, &rank, what));
    if (!kn_dtype_valid((int)dt)) return kn_rbuf_bad(&r->in, what, "tensor dtype %u", dt);
    if (rank > KN_MAX_RANK) return kn_rbuf_bad(&r->in, what, "tensor rank %u", rank);
    t->dtype = (kn_dtype)dt;
    t->rank = (int)rank;
    for (uint32_t i = 0; i < rank; i++) {
        uint64_t d;
        KN_RD(kn_rbuf_u64(&r->in, &d, what));
        t->dims[i] = (int64_t)d;
    }
    int64_t numel = kn_shape_numel(t->rank, t->dims);
    if (numel < 0 || (uint64_t)numel > SIZE_MAX / 8)
        return kn_rbuf_bad(&r->in, what, "tensor dims negative or too large");
    uint64_t nbytes;
    KN_RD(kn_rbuf_u64(&r->in, &nbytes, what));
    if (nbytes != kn_dtype_nbytes(t->dtype, (size_t)numel))
        return kn_rbuf_bad(&r->in, what, "tensor of %lld %s elements with %llu bytes", (long long)numel,
                           kn_dtype_name(t->dtype), (unsigned long long)nbytes);
    KN_RD(kn_rbuf_need(&r->in, nbytes, what));
    if (nbytes) {
        KN_RD(r_alloc(r, (size_t)nbytes, 64, &t->data));
        memcpy(t->data, r->in.p + r->in.pos, (size_t)nbytes);
        r->in.pos += (size_t)nbytes;
    }
    t->nbytes = (size_t)nbytes;
    t->own = KN_BORROWED; /* the block owns it */
    *out = t;
    return KN_OK;
}

static int r_list(rbuf *r, kn_attr *a, const char *what)
{
    static const size_t min_size[] = {[KN_ATTR_FLOATS] = 4, [KN_ATTR_INTS] = 8, [KN_ATTR_STRINGS] = 4,
                                      [KN_ATTR_TENSORS] = 16};
    KN_RD(kn_rbuf_count(&r->in, INT32_MAX, min_size[a->kind], &a->n, what));
    size_t n = (size_t)a->n;
    switch (a->kind) {
    case KN_ATTR_FLOATS:
        KN_RD(r_alloc(r, n * sizeof(float), 8, (void **)&a->floats));
        for (size_t k = 0; k < n; k++) {
            uint32_t u = (uint32_t)kn_le(r->in.p + r->in.pos + 4 * k, 4);
            memcpy(&a->floats[k], &u, 4);
        }
        r->in.pos += 4 * n;
        return KN_OK;
    case KN_ATTR_INTS:
        KN_RD(r_alloc(r, n * sizeof(int64_t), 8, (void **)&a->ints));
        for (size_t k = 0; k < n; k++) a->ints[k] = (int64_t)kn_le(r->in.p + r->in.pos + 8 * k, 8);
        r->in.pos += 8 * n;
        return KN_OK;
    case KN_ATTR_STRINGS:
        KN_RD(r_alloc(r, n * sizeof(char *), 8, (void **)&a->strings));
        for (size_t k = 0; k < n; k++) KN_RD(r_str32(r, &a->strings[k], what));
        return KN_OK;
    default:
        KN_RD(r_alloc(r, n * sizeof(kn_tensor *), 8, (void **)&a->tensors));
        for (size_t k = 0; k < n; k++) KN_RD(r_tensor(r, &a->tensors[k], what));
        return KN_OK;
    }
}

static int r_attr(rbuf *r, kn_attr *a, int index);

/* u32 n + n x i32 value indices (range-checked later by kn_sg_check). */
static int r_ids(rbuf *r, int *out_n, const int32_t **out_ids, const char *what)
{
    int n;
    KN_RD(kn_rbuf_count(&r->in, INT32_MAX, 4, &n, what));
    int32_t *ids;
    KN_RD(r_alloc(r, sizeof *ids * (size_t)n, 8, (void **)&ids));
    for (int i = 0; i < n; i++) ids[i] = (int32_t)kn_le(r->in.p + r->in.pos + 4 * (size_t)i, 4);
    r->in.pos += 4 * (size_t)n;
    *out_n = n;
    *out_ids = ids;
    return KN_OK;
}

static int r_sg_value(rbuf *r, kn_sg_value *v, const char *what)
{
    uint32_t dt, rank;
    KN_RD(r_str32(r, &v->name, what));
    KN_RD(kn_rbuf_u32(&r->in, &dt, what));
    KN_RD(kn_rbuf_u32(&r->in, &rank, what));
    if (dt != KN_DT_UNDEFINED && !kn_dtype_valid((int)dt))
        return kn_rbuf_bad(&r->in, what, "value '%s': dtype %u", v->name, dt);
    if ((int32_t)rank < -1 || (int32_t)rank > KN_MAX_RANK)
        return kn_rbuf_bad(&r->in, what, "value '%s': rank %d", v->name, (int32_t)rank);
    v->dtype = (kn_dtype)dt;
    v->rank = (int32_t)rank;
    for (int d = 0; d < v->rank; d++) {
        uint64_t x;
        KN_RD(kn_rbuf_u64(&r->in, &x, what));
        v->dims[d] = (int64_t)x;
    }
    return KN_OK;
}

static int r_sg_node(rbuf *r, kn_sg_node *n, int k, const char *gwhat)
{
    char what[300];
    snprintf(what, sizeof what, "%s node %d", gwhat, k);
    kn_opdesc *d = &n->desc;
    KN_RD(r_str32(r, &d->name, what));
    snprintf(what, sizeof what, "%s node '%.100s'", gwhat, d->name);
    KN_RD(r_str32(r, &d->op_type, what));
    KN_RD(r_str32(r, &d->domain, what));
    uint64_t opset;
    KN_RD(kn_rbuf_u64(&r->in, &opset, what));
    d->opset = (int64_t)opset;
    d->op = kn_op_from_name(d->op_type, d->domain);
    if (d->op == KN_OP_UNKNOWN)
        return kn_rbuf_bad(&r->in, what, "unknown op '%s' (domain '%s')", d->op_type, d->domain);
    KN_RD(r_ids(r, &d->n_inputs, &n->inputs, what));
    KN_RD(r_ids(r, &d->n_outputs, &n->outputs, what));
    bool *has;
    KN_RD(r_alloc(r, sizeof *has * ((size_t)d->n_outputs + 1), 8, (void **)&has));
    for (int i = 0; i < d->n_outputs; i++) has[i] = n->outputs[i] >= 0;
    d->has_output = has;
    KN_RD(kn_rbuf_count(&r->in, INT32_MAX, 12, &d->n_attrs, what));
    kn_attr *attrs;
    KN_RD(r_alloc(r, sizeof *attrs * (size_t)d->n_attrs, 8, (void **)&attrs));
    for (int a = 0; a < d->n_attrs; a++) KN_RD(r_attr(r, &attrs[a], a));
    d->attrs = attrs;
    return KN_OK;
}

static int r_graph_body(rbuf *r, kn_sg *g, const char *what)
{
    KN_RD(r_str32(r, &g->name, what));
    KN_RD(kn_rbuf_count(&r->in, INT32_MAX, 12, &g->n_values, what));
    kn_sg_value *vals;
    KN_RD(r_alloc(r, sizeof *vals * (size_t)g->n_values, 8, (void **)&vals));
    for (int i = 0; i < g->n_values; i++) KN_RD(r_sg_value(r, &vals[i], what));
    g->values = vals;
    KN_RD(r_ids(r, &g->n_inputs, &g->inputs, what));
    KN_RD(r_ids(r, &g->n_outputs, &g->outputs, what));
    KN_RD(kn_rbuf_count(&r->in, INT32_MAX, 4 + 16, &g->n_consts, what));
    int32_t *ids;
    kn_tensor **ts;
    KN_RD(r_alloc(r, sizeof *ids * (size_t)g->n_consts, 8, (void **)&ids));
    KN_RD(r_alloc(r, sizeof *ts * (size_t)g->n_consts, 8, (void **)&ts));
    for (int i = 0; i < g->n_consts; i++) {
        uint32_t v;
        KN_RD(kn_rbuf_u32(&r->in, &v, what));
        ids[i] = (int32_t)v;
        KN_RD(r_tensor(r, &ts[i], what));
    }
    g->const_ids = ids;
    g->consts = (const kn_tensor *const *)ts;
    KN_RD(r_ids(r, &g->n_captures, &g->captures, what));
    KN_RD(kn_rbuf_count(&r->in, INT32_MAX, 28, &g->n_nodes, what));
    kn_sg_node *nodes;
    KN_RD(r_alloc(r, sizeof *nodes * (size_t)g->n_nodes, 8, (void **)&nodes));
    for (int k = 0; k < g->n_nodes; k++) KN_RD(r_sg_node(r, &nodes[k], k, what));
    g->nodes = nodes;
    return KN_OK;
}

/* A graph; the outermost one is checked as a whole once it is read. */
static int r_graph(rbuf *r, const kn_sg **out, const char *what)
{
    if (r->depth >= KN_SG_MAX_DEPTH)
        return kn_rbuf_bad(&r->in, what, "graphs nested more than %d deep", KN_SG_MAX_DEPTH);
    kn_sg *g;
    KN_RD(r_alloc(r, sizeof *g, 8, (void **)&g));
    r->depth++;
    int st = r_graph_body(r, g, what);
    r->depth--;
    if (st) return st;
    if (r->depth == 0) {
        char w[200];
        snprintf(w, sizeof w, "malformed attributes: %s", what);
        KN_RD(kn_sg_check(g, 0, w));
    }
    *out = g;
    return KN_OK;
}

static int r_attr(rbuf *r, kn_attr *a, int index)
{
    char what[128];
    snprintf(what, sizeof what, "attribute %d", index);
    KN_RD(r_str32(r, &a->name, what));
    snprintf(what, sizeof what, "attribute '%.100s'", a->name);
    uint32_t kind;
    KN_RD(kn_rbuf_u32(&r->in, &kind, what));
    a->kind = (kn_attr_kind)kind;
    switch (kind) {
    case KN_ATTR_FLOAT: {
        uint32_t u;
        KN_RD(kn_rbuf_u32(&r->in, &u, what));
        memcpy(&a->f, &u, 4);
        return KN_OK;
    }
    case KN_ATTR_INT: {
        uint64_t u;
        KN_RD(kn_rbuf_u64(&r->in, &u, what));
        a->i = (int64_t)u;
        return KN_OK;
    }
    case KN_ATTR_STRING: {
        uint64_t n;
        KN_RD(kn_rbuf_u64(&r->in, &n, what));
        KN_RD(r_copy_str(r, n, &a->s, what));
        a->s_len = (size_t)n;
        return KN_OK;
    }
    case KN_ATTR_TENSOR: return r_tensor(r, &a->t, what);
    case KN_ATTR_FLOATS:
    case KN_ATTR_INTS:
    case KN_ATTR_STRINGS:
    case KN_ATTR_TENSORS: return r_list(r, a, what);
    case KN_ATTR_GRAPH: return r_graph(r, &a->sg, what);
    default: return kn_rbuf_bad(&r->in, what, "kind %u cannot be read", kind);
    }
}

static int r_attrs(rbuf *r, kn_attr **out_attrs, int *out_n)
{
    uint32_t magic;
    KN_RD(kn_rbuf_u32(&r->in, &magic, "header"));
    if (magic != ATTR_MAGIC) return kn_rbuf_bad(&r->in, "header", "bad magic 0x%08x", magic);
    int n;
    KN_RD(kn_rbuf_count(&r->in, INT32_MAX, 12, &n, "header"));
    kn_attr *attrs;
    KN_RD(r_alloc(r, sizeof *attrs * (size_t)n, 8, (void **)&attrs));
    for (int i = 0; i < n; i++) KN_RD(r_attr(r, &attrs[i], i));
    if (r->in.pos != r->in.len)
        return kn_rbuf_bad(&r->in, "end", "%zu unexpected bytes after the last attribute", r->in.len - r->in.pos);
    *out_attrs = attrs;
    *out_n = n;
    return KN_OK;
}

int kn_attrs_read(const unsigned char *bytes, size_t len, kn_attr **out_attrs, int *out_n, void **out_block)
{
    if (out_attrs) *out_attrs = NULL;
    if (out_n) *out_n = 0;
    if (out_block) *out_block = NULL;
    if (!out_attrs || !out_n || !out_block || (!bytes && len))
        return kn_error(KN_ERR_INVALID, "kn_attrs_read: bad arguments");
    rbuf r = {.in = {.p = bytes, .len = len, .what = "attributes"}};
    int st = chunk_new(&r, 0);
    if (!st) st = r_attrs(&r, out_attrs, out_n);
    if (st) {
        kn_attrs_free(r.head);
        *out_attrs = NULL;
        *out_n = 0;
        return st;
    }
    *out_block = r.head;
    return KN_OK;
}

void kn_attrs_free(void *block)
{
    for (chunk *c = block; c;) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
}
