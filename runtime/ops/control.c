/*
 * runtime/ops/control.c — execution of Constant, Identity and the ops with
 * subgraphs (If, Loop, Scan).
 *
 * The subgraph ops hold their semantics here once — branch choice, trip
 * count and condition, loop-carried values, scan slicing and stacking — and
 * run their bodies through the descriptor's body runner (kn_opdesc.body):
 * the reference evaluator runs IR graphs with it, a compiled artifact its
 * serialized graphs (subgraph.h). A descriptor without a runner (constant
 * folding) gets an error, not a guess.
 */
#include <stdlib.h>
#include <string.h>

#include "opdesc.h"

/* ---- Constant ------------------------------------------------------------ */

static int exec_constant(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    (void)in;
    const kn_attr *a;
    if ((a = kn_op_attr(d, "value")) && a->kind == KN_ATTR_TENSOR && a->t) return kn_tensor_copy(&out[0], a->t);
    if ((a = kn_op_attr(d, "value_float")) && a->kind == KN_ATTR_FLOAT) {
        int st = kn_tensor_alloc(&out[0], KN_F32, 0, NULL);
        if (!st) ((float *)out[0].data)[0] = a->f;
        return st;
    }
    if ((a = kn_op_attr(d, "value_int")) && a->kind == KN_ATTR_INT) {
        int st = kn_tensor_alloc(&out[0], KN_I64, 0, NULL);
        if (!st) ((int64_t *)out[0].data)[0] = a->i;
        return st;
    }
    if ((a = kn_op_attr(d, "value_floats")) && a->kind == KN_ATTR_FLOATS) {
        int64_t n = a->n;
        int st = kn_tensor_alloc(&out[0], KN_F32, 1, &n);
        if (!st && a->n) memcpy(out[0].data, a->floats, sizeof(float) * (size_t)a->n);
        return st;
    }
    if ((a = kn_op_attr(d, "value_ints")) && a->kind == KN_ATTR_INTS) {
        int64_t n = a->n;
        int st = kn_tensor_alloc(&out[0], KN_I64, 1, &n);
        if (!st && a->n) memcpy(out[0].data, a->ints, sizeof(int64_t) * (size_t)a->n);
        return st;
    }
    if (kn_op_attr(d, "value_string") || kn_op_attr(d, "value_strings"))
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "string constants are not supported");
    if (kn_op_attr(d, "sparse_value")) return kn_op_error(d, KN_ERR_UNSUPPORTED, "sparse constants are not supported");
    return kn_op_error(d, KN_ERR_INVALID, "has no value attribute");
}

/* ---- Identity ------------------------------------------------------------ */

static int exec_identity(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (!in[0]) return kn_op_error(d, KN_ERR_INVALID, "input 0 is missing");
    return kn_tensor_copy(&out[0], in[0]);
}

/* ---- shared by the subgraph ops ----------------------------------------- */

static int need_graph(const kn_opdesc *d, const char *name, const kn_attr **out)
{
    *out = kn_op_attr(d, name);
    if (!*out || (*out)->kind != KN_ATTR_GRAPH)
        return kn_op_error(d, KN_ERR_INVALID, "attribute '%s' (a graph) is missing", name);
    if (!d->body) return kn_op_error(d, KN_ERR_UNSUPPORTED, "no way to run subgraphs here");
    return KN_OK;
}

/* Runs graph attribute g; a failure is prefixed with the node and iteration. */
static int run_body(const kn_opdesc *d, const kn_attr *g, int64_t it, int n_in, const kn_tensor *const *in, int n_out,
                    kn_tensor *out)
{
    int st = d->body->run(d->body->ctx, g, n_in, in, n_out, out);
    if (st && it >= 0) kn_error_prefix("node '%s' (%s) iteration %lld: ", d->name, d->op_type, (long long)it);
    else if (st) kn_error_prefix("node '%s' (%s): ", d->name, d->op_type);
    return st;
}

static void free_all(kn_tensor *t, int n)
{
    for (int i = 0; t && i < n; i++) kn_tensor_free(&t[i]);
}

static int64_t attr_at(const kn_opdesc *d, const char *name, int i, int64_t def)
{
    const int64_t *v;
    int cnt = kn_op_attr_ints(d, name, &v);
    return i < cnt ? v[i] : def;
}

/* Scan outputs are collected per iteration and stacked at the end. */
typedef struct scan_acc {
    kn_tensor *items; /* one per iteration */
    int64_t n, cap;
} scan_acc;

static int acc_push(scan_acc *a, kn_tensor *t)
{
    if (a->n == a->cap) {
        int64_t cap = a->cap ? a->cap * 2 : 16;
        kn_tensor *p = realloc(a->items, sizeof *p * (size_t)cap);
        if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
        a->items = p;
        a->cap = cap;
    }
    if (t->own == KN_BORROWED && t->nbytes) { /* a view of something the next iteration replaces */
        int st = kn_tensor_copy(&a->items[a->n], t);
        if (st) return st;
        a->n++;
        memset(t, 0, sizeof *t);
        return KN_OK;
    }
    a->items[a->n++] = *t;
    memset(t, 0, sizeof *t);
    return KN_OK;
}

/* Stacks the items along a new axis `axis` (items in reverse order if rev). */
static int acc_stack(const kn_opdesc *d, scan_acc *a, int axis, bool rev, kn_dtype dt_if_empty, kn_tensor *out)
{
    if (a->n == 0) {
        int64_t n = 0;
        return kn_tensor_alloc(out, dt_if_empty ? dt_if_empty : KN_F32, 1, &n);
    }
    const kn_tensor *f = &a->items[0];
    if (f->rank + 1 > KN_MAX_RANK) return kn_op_error(d, KN_ERR_UNSUPPORTED, "scan output rank too large");
    for (int64_t k = 1; k < a->n; k++) {
        const kn_tensor *t = &a->items[k];
        if (t->dtype != f->dtype || t->rank != f->rank || memcmp(t->dims, f->dims, sizeof(int64_t) * (size_t)f->rank))
            return kn_op_error(d, KN_ERR_INVALID, "scan output changes shape between iterations");
    }
    int64_t dims[KN_MAX_RANK];
    int r = f->rank + 1;
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return kn_op_error(d, KN_ERR_INVALID, "scan output axis out of range");
    size_t es = kn_dtype_size(f->dtype);
    if (!es) return kn_op_error(d, KN_ERR_UNSUPPORTED, "packed dtypes in scan outputs");
    for (int k = 0, s = 0; k < r; k++) dims[k] = k == axis ? a->n : f->dims[s++];
    int st = kn_tensor_alloc(out, f->dtype, r, dims);
    if (st) return st;
    /* out viewed as [outer, n, inner] where outer = prod(dims[:axis]) */
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= dims[k];
    for (int k = axis + 1; k < r; k++) inner *= dims[k];
    for (int64_t k = 0; k < a->n; k++) {
        const kn_tensor *t = &a->items[rev ? a->n - 1 - k : k];
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)out->data + ((o * a->n + k) * inner) * (int64_t)es,
                   (const char *)t->data + o * inner * (int64_t)es, (size_t)inner * es);
    }
    return KN_OK;
}

static void acc_free(scan_acc *a)
{
    for (int64_t k = 0; k < a->n; k++) kn_tensor_free(&a->items[k]);
    free(a->items);
    memset(a, 0, sizeof *a);
}

/* Takes a body output as the next state: owned data moves, a view is copied. */
static int take_state(kn_tensor *state, kn_tensor *from)
{
    kn_tensor_free(state);
    if (from->own == KN_BORROWED && from->nbytes) {
        int st = kn_tensor_copy(state, from);
        memset(from, 0, sizeof *from);
        return st;
    }
    *state = *from;
    memset(from, 0, sizeof *from);
    return KN_OK;
}

/* ---- If ------------------------------------------------------------------ */

static int exec_if(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (!in[0] || kn_tensor_numel(in[0]) != 1)
        return kn_op_error(d, KN_ERR_INVALID, "condition must hold exactly one element");
    bool cond = kn_load_i64(in[0]->dtype, in[0]->data, 0) != 0;
    const kn_attr *g;
    int st = need_graph(d, cond ? "then_branch" : "else_branch", &g);
    if (st) return st;
    return run_body(d, g, -1, 0, NULL, d->n_outputs, out);
}

/* ---- Loop ---------------------------------------------------------------- */

/* Loop(M?, cond?, v_initial...) with body(iter, cond, v...) -> (cond, v..., scan...). */

typedef struct loop_state {
    int n_carried, n_scan, n_body_out;
    kn_tensor *state, *bout;
    const kn_tensor **bin;
    scan_acc *acc;
    kn_tensor iter, cond;
} loop_state;

static int loop_init(loop_state *L, const kn_opdesc *d, const kn_tensor *const *in)
{
    L->state = calloc((size_t)L->n_carried + 1, sizeof *L->state);
    L->bout = calloc((size_t)L->n_body_out + 1, sizeof *L->bout);
    L->bin = calloc((size_t)L->n_carried + 3, sizeof *L->bin);
    L->acc = calloc((size_t)L->n_scan + 1, sizeof *L->acc);
    if (!L->state || !L->bout || !L->bin || !L->acc) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < L->n_carried; i++) {
        if (!in[2 + i]) return kn_op_error(d, KN_ERR_INVALID, "loop-carried input %d is missing", i);
        int st = kn_tensor_copy(&L->state[i], in[2 + i]);
        if (st) return st;
    }
    int st = kn_tensor_alloc(&L->iter, KN_I64, 0, NULL);
    if (!st) st = kn_tensor_alloc(&L->cond, KN_BOOL, 0, NULL);
    return st;
}

static void loop_free(loop_state *L)
{
    free_all(L->state, L->n_carried);
    free_all(L->bout, L->n_body_out);
    for (int j = 0; L->acc && j < L->n_scan; j++) acc_free(&L->acc[j]);
    kn_tensor_free(&L->iter);
    kn_tensor_free(&L->cond);
    free(L->state), free(L->bout), free(L->bin), free(L->acc);
}

/* One iteration: runs the body, keeps the new state, collects scan outputs;
 * *cond gets the body's condition. */
static int loop_step(loop_state *L, const kn_opdesc *d, const kn_attr *body, int64_t it, bool *cond)
{
    ((int64_t *)L->iter.data)[0] = it;
    ((uint8_t *)L->cond.data)[0] = *cond;
    L->bin[0] = &L->iter;
    L->bin[1] = &L->cond;
    for (int i = 0; i < L->n_carried; i++) L->bin[2 + i] = &L->state[i];
    int st = run_body(d, body, it, 2 + L->n_carried, L->bin, L->n_body_out, L->bout);
    if (st) return st;
    const kn_tensor *c = &L->bout[0];
    *cond = kn_tensor_numel(c) >= 1 && c->data ? kn_load_i64(c->dtype, c->data, 0) != 0 : false;
    for (int i = 0; i < L->n_carried && !st; i++) st = take_state(&L->state[i], &L->bout[1 + i]);
    for (int j = 0; j < L->n_scan && !st; j++) st = acc_push(&L->acc[j], &L->bout[1 + L->n_carried + j]);
    free_all(L->bout, L->n_body_out);
    return st;
}

static int exec_loop(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_attr *body;
    int st = need_graph(d, "body", &body);
    if (st) return st;
    loop_state L = {.n_carried = d->n_inputs - 2};
    L.n_scan = d->n_outputs - L.n_carried;
    L.n_body_out = 1 + d->n_outputs;
    if (L.n_carried < 0 || L.n_scan < 0)
        return kn_op_error(d, KN_ERR_INVALID, "has %d inputs and %d outputs: fewer outputs than loop-carried values",
                           d->n_inputs, d->n_outputs);
    int64_t max_trip = INT64_MAX;
    if (in[0] && kn_tensor_numel(in[0]) == 1) max_trip = kn_load_i64(in[0]->dtype, in[0]->data, 0);
    bool cond = true;
    if (d->n_inputs > 1 && in[1] && kn_tensor_numel(in[1]) == 1) cond = kn_load_i64(in[1]->dtype, in[1]->data, 0) != 0;
    st = loop_init(&L, d, in);
    for (int64_t it = 0; !st && it < max_trip && cond; it++) {
        st = loop_step(&L, d, body, it, &cond);
        if (!st && it > (int64_t)1 << 30) st = kn_op_error(d, KN_ERR_INVALID, "loop runs more than 2^30 iterations");
    }
    for (int i = 0; !st && i < L.n_carried; i++) {
        if (!kn_op_has_output(d, i)) continue;
        out[i] = L.state[i];
        memset(&L.state[i], 0, sizeof L.state[i]);
    }
    for (int j = 0; !st && j < L.n_scan; j++)
        if (kn_op_has_output(d, L.n_carried + j))
            st = acc_stack(d, &L.acc[j], 0, false, d->body->output_dtype(d->body->ctx, body, 1 + L.n_carried + j),
                           &out[L.n_carried + j]);
    loop_free(&L);
    return st;
}

/* ---- Scan (opset 9+, and the batched opset 8 form) ------------------------ */

/* Scan(state..., scan_in...) with body(state..., slice...) -> (state..., scan_out_elem...). */

/* Copies slice `k` along `axis` of t into a new tensor of rank-1. */
static int take_slice(const kn_tensor *t, int axis, int64_t k, kn_tensor *out)
{
    int64_t dims[KN_MAX_RANK];
    for (int i = 0, j = 0; i < t->rank; i++)
        if (i != axis) dims[j++] = t->dims[i];
    int st = kn_tensor_alloc(out, t->dtype, t->rank - 1, dims);
    if (st) return st;
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= t->dims[i];
    for (int i = axis + 1; i < t->rank; i++) inner *= t->dims[i];
    size_t es = kn_dtype_size(t->dtype);
    for (int64_t o = 0; o < outer; o++)
        memcpy((char *)out->data + o * inner * (int64_t)es,
               (const char *)t->data + ((o * t->dims[axis] + k) * inner) * (int64_t)es, (size_t)inner * es);
    return KN_OK;
}

/* One scan: states and scan inputs (sliced along axes[j], reversed where
 * in_rev[j]) through the body; scan outputs stacked along out_axes[j]. */
typedef struct scan_spec {
    int n_state, m_in, n_scan_out;
    const int *axes, *in_rev, *out_axes, *out_rev;
} scan_spec;

typedef struct scan_bufs {
    kn_tensor *state, *slices, *bout;
    const kn_tensor **bin;
    scan_acc *acc;
} scan_bufs;

static int scan_len(const kn_opdesc *d, const scan_spec *sp, const kn_tensor *const *scans, int64_t *out_len)
{
    *out_len = -1;
    for (int j = 0; j < sp->m_in; j++) {
        const kn_tensor *t = scans[j];
        if (!kn_dtype_size(t->dtype)) return kn_op_error(d, KN_ERR_UNSUPPORTED, "packed dtype scan input");
        if (*out_len >= 0 && t->dims[sp->axes[j]] != *out_len)
            return kn_op_error(d, KN_ERR_INVALID, "scan inputs have different lengths (%lld and %lld)",
                               (long long)*out_len, (long long)t->dims[sp->axes[j]]);
        *out_len = t->dims[sp->axes[j]];
    }
    return KN_OK;
}

static int scan_iterate(const kn_opdesc *d, const kn_attr *body, const scan_spec *sp, const kn_tensor *const *scans,
                        int64_t len, scan_bufs *b)
{
    int st = KN_OK, n_body_out = sp->n_state + sp->n_scan_out;
    for (int64_t it = 0; !st && it < len; it++) {
        for (int j = 0; j < sp->m_in && !st; j++) {
            kn_tensor_free(&b->slices[j]);
            st = take_slice(scans[j], sp->axes[j], sp->in_rev[j] ? len - 1 - it : it, &b->slices[j]);
        }
        if (st) break;
        for (int i = 0; i < sp->n_state; i++) b->bin[i] = &b->state[i];
        for (int j = 0; j < sp->m_in; j++) b->bin[sp->n_state + j] = &b->slices[j];
        st = run_body(d, body, it, sp->n_state + sp->m_in, b->bin, n_body_out, b->bout);
        for (int i = 0; i < sp->n_state && !st; i++) st = take_state(&b->state[i], &b->bout[i]);
        for (int j = 0; j < sp->n_scan_out && !st; j++) st = acc_push(&b->acc[j], &b->bout[sp->n_state + j]);
        free_all(b->bout, n_body_out);
    }
    return st;
}

static int run_scan(const kn_opdesc *d, const kn_attr *body, const scan_spec *sp, const kn_tensor *const *states,
                    const kn_tensor *const *scans, kn_tensor *out)
{
    int64_t len;
    int st = scan_len(d, sp, scans, &len);
    if (st) return st;
    int n_body_out = sp->n_state + sp->n_scan_out;
    scan_bufs b = {
        .state = calloc((size_t)sp->n_state + 1, sizeof *b.state),
        .slices = calloc((size_t)sp->m_in + 1, sizeof *b.slices),
        .bout = calloc((size_t)n_body_out + 1, sizeof *b.bout),
        .bin = calloc((size_t)(sp->n_state + sp->m_in) + 1, sizeof *b.bin),
        .acc = calloc((size_t)sp->n_scan_out + 1, sizeof *b.acc),
    };
    if (!b.state || !b.slices || !b.bout || !b.bin || !b.acc) st = kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < sp->n_state && !st; i++) st = kn_tensor_copy(&b.state[i], states[i]);
    if (!st) st = scan_iterate(d, body, sp, scans, len, &b);
    for (int i = 0; !st && i < sp->n_state; i++) {
        out[i] = b.state[i];
        memset(&b.state[i], 0, sizeof b.state[i]);
    }
    for (int j = 0; !st && j < sp->n_scan_out; j++)
        st = acc_stack(d, &b.acc[j], sp->out_axes[j], sp->out_rev[j] != 0,
                       d->body->output_dtype(d->body->ctx, body, sp->n_state + j), &out[sp->n_state + j]);
    free_all(b.state, sp->n_state);
    free_all(b.slices, sp->m_in);
    free_all(b.bout, n_body_out);
    for (int j = 0; b.acc && j < sp->n_scan_out; j++) acc_free(&b.acc[j]);
    free(b.state), free(b.slices), free(b.bout), free(b.bin), free(b.acc);
    return st;
}

/* Scan-8 has a leading batch axis on every state and scan input (and an
 * optional sequence_lens input first): it is Scan-9 run once per batch row. */
static int batch_size(const kn_opdesc *d, const kn_tensor *const *xs, int n, int64_t *out)
{
    *out = -1;
    for (int i = 0; i < n; i++) {
        if (!xs[i] || xs[i]->rank < 1) return kn_op_error(d, KN_ERR_INVALID, "input %d needs a batch axis", i + 1);
        if (*out >= 0 && xs[i]->dims[0] != *out) return kn_op_error(d, KN_ERR_INVALID, "inputs disagree on the batch size");
        *out = xs[i]->dims[0];
    }
    return KN_OK;
}

static int exec_scan8(const kn_opdesc *d, const kn_attr *body, const kn_tensor *const *in, kn_tensor *out)
{
    int m_in = (int)kn_op_attr_int(d, "num_scan_inputs", 0);
    int n_state = d->n_inputs - 1 - m_in, nout = d->n_outputs;
    if (m_in < 1 || m_in > KN_VAR || n_state < 0 || nout < n_state)
        return kn_op_error(d, KN_ERR_INVALID, "num_scan_inputs %d does not match %d inputs", m_in, d->n_inputs);
    const kn_tensor *const *xs = in + 1;
    int64_t batch;
    int st = batch_size(d, xs, n_state + m_in, &batch);
    if (st) return st;
    for (int64_t k = 0; in[0] && k < kn_tensor_numel(in[0]); k++)
        if (kn_load_i64(in[0]->dtype, in[0]->data, (size_t)k) != xs[n_state]->dims[1])
            return kn_op_error(d, KN_ERR_UNSUPPORTED, "sequence_lens shorter than the scan length");
    int zeros[KN_VAR] = {0}, dirs[KN_VAR] = {0};
    for (int j = 0; j < m_in; j++) dirs[j] = (int)attr_at(d, "directions", j, 0);
    scan_spec sp = {n_state, m_in, nout - n_state, zeros, dirs, zeros, zeros};
    scan_acc *acc = calloc((size_t)nout + 1, sizeof *acc);
    kn_tensor *row_in = calloc((size_t)(n_state + m_in) + 1, sizeof *row_in);
    kn_tensor *row_out = calloc((size_t)nout + 1, sizeof *row_out);
    const kn_tensor **ptrs = calloc((size_t)(n_state + m_in) + 1, sizeof *ptrs);
    st = (!acc || !row_in || !row_out || !ptrs) ? kn_error(KN_ERR_NOMEM, "out of memory") : KN_OK;
    for (int64_t b = 0; !st && b < batch; b++) {
        for (int i = 0; i < n_state + m_in && !st; i++) {
            kn_tensor_free(&row_in[i]);
            st = take_slice(xs[i], 0, b, &row_in[i]);
            ptrs[i] = &row_in[i];
        }
        if (!st) st = run_scan(d, body, &sp, ptrs, ptrs + n_state, row_out);
        for (int k = 0; !st && k < nout; k++) st = acc_push(&acc[k], &row_out[k]);
        free_all(row_out, nout);
    }
    for (int k = 0; !st && k < nout; k++)
        st = acc_stack(d, &acc[k], 0, false, d->body->output_dtype(d->body->ctx, body, k), &out[k]);
    for (int k = 0; acc && k < nout; k++) acc_free(&acc[k]);
    free_all(row_in, n_state + m_in);
    free(acc), free(row_in), free(row_out), free(ptrs);
    return st;
}

static int exec_scan(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_attr *body;
    int st = need_graph(d, "body", &body);
    if (st) return st;
    if (d->opset < 9) return exec_scan8(d, body, in, out);
    int m_in = (int)kn_op_attr_int(d, "num_scan_inputs", 0);
    int n_state = d->n_inputs - m_in, n_scan_out = d->n_outputs - n_state;
    if (m_in < 1 || m_in > KN_VAR || n_state < 0 || n_scan_out < 0 || n_scan_out > KN_VAR)
        return kn_op_error(d, KN_ERR_INVALID, "num_scan_inputs %d does not match %d inputs and %d outputs", m_in,
                           d->n_inputs, d->n_outputs);
    int axes[KN_VAR], in_rev[KN_VAR], out_axes[KN_VAR], out_rev[KN_VAR];
    for (int j = 0; j < m_in; j++) {
        const kn_tensor *t = in[n_state + j];
        if (!t) return kn_op_error(d, KN_ERR_INVALID, "scan input %d is missing", j);
        axes[j] = kn_norm_axis(attr_at(d, "scan_input_axes", j, 0), t->rank);
        if (axes[j] < 0) return kn_op_error(d, KN_ERR_INVALID, "scan_input_axes[%d] out of range", j);
        in_rev[j] = (int)attr_at(d, "scan_input_directions", j, 0);
    }
    for (int j = 0; j < n_scan_out; j++) {
        out_axes[j] = (int)attr_at(d, "scan_output_axes", j, 0);
        out_rev[j] = (int)attr_at(d, "scan_output_directions", j, 0);
    }
    for (int i = 0; i < n_state; i++)
        if (!in[i]) return kn_op_error(d, KN_ERR_INVALID, "state input %d is missing", i);
    scan_spec sp = {n_state, m_in, n_scan_out, axes, in_rev, out_axes, out_rev};
    return run_scan(d, body, &sp, in, in + n_state, out);
}

const kn_exec_impl kn_exec_control[] = {
    {KN_OP_Constant, exec_constant},
    {KN_OP_Identity, exec_identity},
    {KN_OP_If, exec_if},
    {KN_OP_Loop, exec_loop},
    {KN_OP_Scan, exec_scan},
    {KN_OP_UNKNOWN, NULL},
};
