/* Op definitions of the 'control' family: Constant, Identity and the ops
 * with subgraphs (If, Loop, Scan), which run their bodies through the
 * evaluator (kn_eval_subgraph). */
#include <stdlib.h>
#include <string.h>

#include "../eval.h"

/* ---- Constant ------------------------------------------------------------ */

/* Builds the constant's value from whichever attribute the node carries. */
static int constant_value(const kn_node *n, kn_tensor *out)
{
    const kn_attr *a;
    if ((a = kn_node_attr(n, "value")) && a->kind == KN_ATTR_TENSOR && a->t) return kn_tensor_copy(out, a->t);
    if ((a = kn_node_attr(n, "value_float")) && a->kind == KN_ATTR_FLOAT) {
        int st = kn_tensor_alloc(out, KN_F32, 0, NULL);
        if (!st) ((float *)out->data)[0] = a->f;
        return st;
    }
    if ((a = kn_node_attr(n, "value_int")) && a->kind == KN_ATTR_INT) {
        int st = kn_tensor_alloc(out, KN_I64, 0, NULL);
        if (!st) ((int64_t *)out->data)[0] = a->i;
        return st;
    }
    if ((a = kn_node_attr(n, "value_floats")) && a->kind == KN_ATTR_FLOATS) {
        int64_t d = a->n;
        int st = kn_tensor_alloc(out, KN_F32, 1, &d);
        if (!st && a->n) memcpy(out->data, a->floats, sizeof(float) * (size_t)a->n);
        return st;
    }
    if ((a = kn_node_attr(n, "value_ints")) && a->kind == KN_ATTR_INTS) {
        int64_t d = a->n;
        int st = kn_tensor_alloc(out, KN_I64, 1, &d);
        if (!st && a->n) memcpy(out->data, a->ints, sizeof(int64_t) * (size_t)a->n);
        return st;
    }
    if (kn_node_attr(n, "value_string") || kn_node_attr(n, "value_strings"))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "string constants are not supported");
    if (kn_node_attr(n, "sparse_value"))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "sparse constants are not supported");
    return kn_node_error(n, KN_ERR_INVALID, "has no value attribute");
}

static int infer_constant(kn_node *n)
{
    kn_tensor t = {0};
    int st = constant_value(n, &t);
    if (st) return st;
    kn_infer_set(n, 0, t.dtype, t.rank, t.dims);
    kn_tensor_free(&t);
    return KN_OK;
}

static int eval_constant(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx, (void)in;
    return constant_value(n, &out[0]);
}

/* ---- Identity ------------------------------------------------------------ */

static int infer_identity(kn_node *n) { return kn_infer_same_as_input(n, 0); }

static int eval_identity(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    if (!in[0]) return kn_node_error(n, KN_ERR_INVALID, "input 0 is missing");
    return kn_tensor_copy(&out[0], in[0]);
}

/* ---- shared by the subgraph ops ----------------------------------------- */

static const kn_graph *graph_attr(const kn_node *n, const char *name)
{
    const kn_attr *a = kn_node_attr(n, name);
    return a && a->kind == KN_ATTR_GRAPH ? a->g : NULL;
}

static int need_graph(const kn_node *n, const char *name, const kn_graph **out)
{
    *out = graph_attr(n, name);
    if (!*out) return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' (a graph) is missing", name);
    return KN_OK;
}

static void free_all(kn_tensor *t, int n)
{
    for (int i = 0; i < n; i++) kn_tensor_free(&t[i]);
}

/* ---- If ------------------------------------------------------------------ */

static int infer_if(kn_node *n)
{
    const kn_graph *th, *el;
    int st = need_graph(n, "then_branch", &th);
    if (!st) st = need_graph(n, "else_branch", &el);
    if (st) return st;
    if (th->n_outputs != n->n_outputs || el->n_outputs != n->n_outputs)
        return kn_node_error(n, KN_ERR_INVALID, "has %d outputs but its branches give %d and %d",
                             n->n_outputs, th->n_outputs, el->n_outputs);
    for (int i = 0; i < n->n_outputs; i++) {
        const kn_value *a = th->outputs[i], *b = el->outputs[i];
        kn_shape s = a->shape;
        if (s.rank != b->shape.rank) s = kn_shape_unknown();
        for (int d = 0; d < s.rank; d++)
            if (s.dims[d] != b->shape.dims[d]) s.dims[d] = -1, s.sym[d] = NULL;
        kn_infer_set_shape(n, i, a->dtype ? a->dtype : b->dtype, &s);
    }
    return KN_OK;
}

static int eval_if(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    if (!in[0] || kn_tensor_numel(in[0]) != 1)
        return kn_node_error(n, KN_ERR_INVALID, "condition must hold exactly one element");
    bool cond = kn_load_i64(in[0]->dtype, in[0]->data, 0) != 0;
    const kn_graph *g;
    int st = need_graph(n, cond ? "then_branch" : "else_branch", &g);
    if (st) return st;
    if (g->n_outputs != n->n_outputs)
        return kn_node_error(n, KN_ERR_INVALID, "has %d outputs but branch '%s' gives %d", n->n_outputs,
                             g->name, g->n_outputs);
    st = kn_eval_subgraph(ctx, g, 0, NULL, out);
    if (st) kn_error_prefix("node '%s' (If): ", n->name);
    return st;
}

/* ---- Loop ---------------------------------------------------------------- */

/* Loop(M?, cond?, v_initial...) with body(iter, cond, v...) -> (cond, v..., scan...). */

static int infer_loop(kn_node *n)
{
    const kn_graph *body;
    int st = need_graph(n, "body", &body);
    if (st) return st;
    int n_carried = n->n_inputs - 2;
    if (n_carried < 0 || body->n_outputs != n->n_outputs + 1 || n->n_outputs < n_carried)
        return kn_node_error(n, KN_ERR_INVALID, "body has %d outputs, node has %d", body->n_outputs,
                             n->n_outputs);
    for (int i = 0; i < n->n_outputs; i++) {
        const kn_value *bv = body->outputs[i + 1];
        if (i < n_carried) {
            const kn_value *init = n->inputs[2 + i];
            kn_shape s = init && init->shape.rank == bv->shape.rank ? bv->shape : kn_shape_unknown();
            for (int d = 0; d < s.rank; d++)
                if (!init || s.dims[d] != init->shape.dims[d]) s.dims[d] = -1, s.sym[d] = NULL;
            kn_infer_set_shape(n, i, bv->dtype ? bv->dtype : (init ? init->dtype : KN_DT_UNDEFINED), &s);
        } else {
            kn_shape s = kn_shape_unknown();
            if (bv->shape.rank >= 0 && bv->shape.rank < KN_MAX_RANK) {
                s.rank = bv->shape.rank + 1;
                s.dims[0] = -1;
                for (int d = 0; d < bv->shape.rank; d++) s.dims[d + 1] = bv->shape.dims[d], s.sym[d + 1] = bv->shape.sym[d];
            }
            kn_infer_set_shape(n, i, bv->dtype, &s);
        }
    }
    return KN_OK;
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
    a->items[a->n++] = *t;
    memset(t, 0, sizeof *t);
    return KN_OK;
}

/* Stacks the items along a new axis `axis` (items in reverse order if rev). */
static int acc_stack(const kn_node *n, scan_acc *a, int axis, bool rev, kn_dtype dt_if_empty, kn_tensor *out)
{
    if (a->n == 0) {
        int64_t d = 0;
        return kn_tensor_alloc(out, dt_if_empty ? dt_if_empty : KN_F32, 1, &d);
    }
    const kn_tensor *f = &a->items[0];
    if (f->rank + 1 > KN_MAX_RANK) return kn_node_error(n, KN_ERR_UNSUPPORTED, "scan output rank too large");
    for (int64_t k = 1; k < a->n; k++) {
        const kn_tensor *t = &a->items[k];
        if (t->dtype != f->dtype || t->rank != f->rank || memcmp(t->dims, f->dims, sizeof(int64_t) * (size_t)f->rank))
            return kn_node_error(n, KN_ERR_INVALID, "scan output changes shape between iterations");
    }
    int64_t dims[KN_MAX_RANK];
    int r = f->rank + 1;
    if (axis < 0) axis += r;
    if (axis < 0 || axis >= r) return kn_node_error(n, KN_ERR_INVALID, "scan output axis out of range");
    for (int d = 0, s = 0; d < r; d++) dims[d] = d == axis ? a->n : f->dims[s++];
    int st = kn_tensor_alloc(out, f->dtype, r, dims);
    if (st) return st;
    /* out viewed as [outer, n, inner] where outer = prod(dims[:axis]) */
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= dims[d];
    for (int d = axis + 1; d < r; d++) inner *= dims[d];
    size_t es = kn_dtype_size(f->dtype);
    if (!es) return kn_node_error(n, KN_ERR_UNSUPPORTED, "packed dtypes in scan outputs");
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

static int eval_loop(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_graph *body;
    int st = need_graph(n, "body", &body);
    if (st) return st;
    int n_carried = n->n_inputs - 2;
    int n_scan = body->n_outputs - 1 - n_carried;
    if (n_carried < 0 || n_scan < 0 || body->n_inputs != 2 + n_carried || n->n_outputs != n_carried + n_scan)
        return kn_node_error(n, KN_ERR_INVALID, "body signature (%d inputs, %d outputs) does not match the node",
                             body->n_inputs, body->n_outputs);
    int64_t max_trip = INT64_MAX;
    if (in[0] && kn_tensor_numel(in[0]) == 1) max_trip = kn_load_i64(in[0]->dtype, in[0]->data, 0);
    bool cond = true;
    if (n->n_inputs > 1 && in[1] && kn_tensor_numel(in[1]) == 1) cond = kn_load_i64(in[1]->dtype, in[1]->data, 0) != 0;

    kn_tensor *state = calloc((size_t)n_carried + 1, sizeof *state);
    kn_tensor *bout = calloc((size_t)body->n_outputs + 1, sizeof *bout);
    const kn_tensor **bin = calloc((size_t)body->n_inputs + 1, sizeof *bin);
    scan_acc *acc = calloc((size_t)n_scan + 1, sizeof *acc);
    kn_tensor iter = {0}, cond_t = {0};
    if (!state || !bout || !bin || !acc) {
        st = kn_error(KN_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n_carried && !st; i++) {
        if (!in[2 + i]) st = kn_node_error(n, KN_ERR_INVALID, "loop-carried input %d is missing", i);
        else st = kn_tensor_copy(&state[i], in[2 + i]);
    }
    if (!st) st = kn_tensor_alloc(&iter, KN_I64, 0, NULL);
    if (!st) st = kn_tensor_alloc(&cond_t, KN_BOOL, 0, NULL);
    for (int64_t it = 0; !st && it < max_trip && cond; it++) {
        ((int64_t *)iter.data)[0] = it;
        ((uint8_t *)cond_t.data)[0] = cond;
        bin[0] = &iter;
        bin[1] = &cond_t;
        for (int i = 0; i < n_carried; i++) bin[2 + i] = &state[i];
        st = kn_eval_subgraph(ctx, body, body->n_inputs, bin, bout);
        if (st) {
            kn_error_prefix("node '%s' (Loop) iteration %lld: ", n->name, (long long)it);
            break;
        }
        cond = kn_tensor_numel(&bout[0]) >= 1 ? kn_load_i64(bout[0].dtype, bout[0].data, 0) != 0 : false;
        kn_tensor_free(&bout[0]);
        for (int i = 0; i < n_carried; i++) {
            kn_tensor_free(&state[i]);
            state[i] = bout[1 + i];
            memset(&bout[1 + i], 0, sizeof bout[1 + i]);
        }
        for (int j = 0; j < n_scan && !st; j++) st = acc_push(&acc[j], &bout[1 + n_carried + j]);
        free_all(bout, body->n_outputs);
        if (it > (int64_t)1 << 30) st = kn_node_error(n, KN_ERR_INVALID, "loop runs more than 2^30 iterations");
    }
    for (int i = 0; !st && i < n_carried; i++) {
        if (n->outputs[i]) {
            out[i] = state[i];
            memset(&state[i], 0, sizeof state[i]);
        }
    }
    for (int j = 0; !st && j < n_scan; j++)
        if (n->outputs[n_carried + j])
            st = acc_stack(n, &acc[j], 0, false, body->outputs[1 + n_carried + j]->dtype, &out[n_carried + j]);
done:
    if (state) free_all(state, n_carried);
    if (bout) free_all(bout, body->n_outputs);
    for (int j = 0; acc && j < n_scan; j++) acc_free(&acc[j]);
    kn_tensor_free(&iter);
    kn_tensor_free(&cond_t);
    free(state), free(bout), free(bin), free(acc);
    return st;
}

/* ---- Scan (opset 9+) ----------------------------------------------------- */

/* Scan(state..., scan_in...) with body(state..., slice...) -> (state..., scan_out_elem...). */

static int scan_attr_axis(const kn_node *n, const char *name, int i, int64_t def)
{
    const int64_t *v;
    int cnt = kn_attr_ints(n, name, &v);
    return (int)(i < cnt ? v[i] : def);
}

static int infer_scan(kn_node *n)
{
    const kn_graph *body;
    int st = need_graph(n, "body", &body);
    if (st) return st;
    int m_in = (int)kn_attr_int(n, "num_scan_inputs", 0);
    int n_state = n->n_inputs - m_in;
    if (n_state < 0 || body->n_outputs != n->n_outputs)
        return kn_node_error(n, KN_ERR_INVALID, "body signature does not match the node");
    if (kn_node_opset(n) < 9) {
        /* batched form: dtypes from the body, shapes left to evaluation */
        kn_shape unknown = kn_shape_unknown();
        for (int i = 0; i < n->n_outputs; i++) kn_infer_set_shape(n, i, body->outputs[i]->dtype, &unknown);
        return KN_OK;
    }
    for (int i = 0; i < n->n_outputs; i++) {
        const kn_value *bv = body->outputs[i];
        if (i < n_state) {
            kn_infer_set_shape(n, i, bv->dtype, &bv->shape);
            continue;
        }
        kn_shape s = kn_shape_unknown();
        if (bv->shape.rank >= 0 && bv->shape.rank < KN_MAX_RANK) {
            int r = bv->shape.rank + 1;
            int ax = scan_attr_axis(n, "scan_output_axes", i - n_state, 0);
            if (ax < 0) ax += r;
            if (ax >= 0 && ax < r) {
                int64_t len = -1;
                const kn_value *first = m_in > 0 ? n->inputs[n_state] : NULL;
                int iax = scan_attr_axis(n, "scan_input_axes", 0, 0);
                if (first && first->shape.rank > 0) {
                    if (iax < 0) iax += first->shape.rank;
                    if (iax >= 0 && iax < first->shape.rank) len = first->shape.dims[iax];
                }
                s.rank = r;
                for (int d = 0, k = 0; d < r; d++) {
                    if (d == ax) s.dims[d] = len;
                    else s.dims[d] = bv->shape.dims[k], s.sym[d] = bv->shape.sym[k], k++;
                }
            }
        }
        kn_infer_set_shape(n, i, bv->dtype, &s);
    }
    return KN_OK;
}

/* Copies slice `k` along `axis` of t into a new tensor of rank-1. */
static int take_slice(const kn_tensor *t, int axis, int64_t k, kn_tensor *out)
{
    int64_t dims[KN_MAX_RANK];
    for (int d = 0, j = 0; d < t->rank; d++)
        if (d != axis) dims[j++] = t->dims[d];
    int st = kn_tensor_alloc(out, t->dtype, t->rank - 1, dims);
    if (st) return st;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= t->dims[d];
    for (int d = axis + 1; d < t->rank; d++) inner *= t->dims[d];
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

static int run_scan(kn_eval_ctx *ctx, const kn_node *n, const kn_graph *body, const scan_spec *sp,
                    const kn_tensor *const *states, const kn_tensor *const *scans, kn_tensor *out)
{
    int st = KN_OK;
    int64_t len = -1;
    for (int j = 0; j < sp->m_in; j++) {
        const kn_tensor *t = scans[j];
        if (!kn_dtype_size(t->dtype)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "packed dtype scan input");
        if (len >= 0 && t->dims[sp->axes[j]] != len)
            return kn_node_error(n, KN_ERR_INVALID, "scan inputs have different lengths (%lld and %lld)",
                                 (long long)len, (long long)t->dims[sp->axes[j]]);
        len = t->dims[sp->axes[j]];
    }
    kn_tensor *state = calloc((size_t)sp->n_state + 1, sizeof *state);
    kn_tensor *slices = calloc((size_t)sp->m_in + 1, sizeof *slices);
    kn_tensor *bout = calloc((size_t)body->n_outputs + 1, sizeof *bout);
    const kn_tensor **bin = calloc((size_t)body->n_inputs + 1, sizeof *bin);
    scan_acc *acc = calloc((size_t)sp->n_scan_out + 1, sizeof *acc);
    if (!state || !slices || !bout || !bin || !acc) {
        st = kn_error(KN_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < sp->n_state && !st; i++) st = kn_tensor_copy(&state[i], states[i]);
    for (int64_t it = 0; !st && it < len; it++) {
        for (int j = 0; j < sp->m_in && !st; j++) {
            kn_tensor_free(&slices[j]);
            st = take_slice(scans[j], sp->axes[j], sp->in_rev[j] ? len - 1 - it : it, &slices[j]);
        }
        if (st) break;
        for (int i = 0; i < sp->n_state; i++) bin[i] = &state[i];
        for (int j = 0; j < sp->m_in; j++) bin[sp->n_state + j] = &slices[j];
        st = kn_eval_subgraph(ctx, body, body->n_inputs, bin, bout);
        if (st) {
            kn_error_prefix("node '%s' (Scan) iteration %lld: ", n->name, (long long)it);
            break;
        }
        for (int i = 0; i < sp->n_state; i++) {
            kn_tensor_free(&state[i]);
            state[i] = bout[i];
            memset(&bout[i], 0, sizeof bout[i]);
        }
        for (int j = 0; j < sp->n_scan_out && !st; j++) st = acc_push(&acc[j], &bout[sp->n_state + j]);
        free_all(bout, body->n_outputs);
    }
    for (int i = 0; !st && i < sp->n_state; i++) {
        out[i] = state[i];
        memset(&state[i], 0, sizeof state[i]);
    }
    for (int j = 0; !st && j < sp->n_scan_out; j++)
        st = acc_stack(n, &acc[j], sp->out_axes[j], sp->out_rev[j] != 0, body->outputs[sp->n_state + j]->dtype,
                       &out[sp->n_state + j]);
done:
    if (state) free_all(state, sp->n_state);
    if (slices) free_all(slices, sp->m_in);
    if (bout) free_all(bout, body->n_outputs);
    for (int j = 0; acc && j < sp->n_scan_out; j++) acc_free(&acc[j]);
    free(state), free(slices), free(bout), free(bin), free(acc);
    return st;
}

/* Scan-8 has a leading batch axis on every state and scan input (and an
 * optional sequence_lens input first): it is Scan-9 run once per batch row. */
static int eval_scan8(kn_eval_ctx *ctx, const kn_node *n, const kn_graph *body, const kn_tensor *const *in,
                      kn_tensor *out)
{
    int m_in = (int)kn_attr_int(n, "num_scan_inputs", 0);
    int n_state = n->n_inputs - 1 - m_in;
    int n_scan_out = body->n_outputs - n_state;
    if (m_in < 1 || n_state < 0 || n_scan_out < 0 || body->n_inputs != n_state + m_in ||
        n->n_outputs != body->n_outputs)
        return kn_node_error(n, KN_ERR_INVALID, "body signature does not match the node");
    const kn_tensor *const *xs = in + 1;
    int64_t batch = -1;
    for (int i = 0; i < n_state + m_in; i++) {
        if (!xs[i] || xs[i]->rank < 1) return kn_node_error(n, KN_ERR_INVALID, "input %d needs a batch axis", i + 1);
        if (batch >= 0 && xs[i]->dims[0] != batch) return kn_node_error(n, KN_ERR_INVALID, "inputs disagree on the batch size");
        batch = xs[i]->dims[0];
    }
    if (in[0]) {
        for (int64_t b = 0; b < kn_tensor_numel(in[0]); b++)
            if (kn_load_i64(in[0]->dtype, in[0]->data, (size_t)b) != xs[n_state]->dims[1])
                return kn_node_error(n, KN_ERR_UNSUPPORTED, "sequence_lens shorter than the scan length");
    }
    int zeros[KN_VAR] = {0}, dirs[KN_VAR] = {0};
    for (int j = 0; j < m_in; j++) dirs[j] = scan_attr_axis(n, "directions", j, 0);
    scan_spec sp = {n_state, m_in, n_scan_out, zeros, dirs, zeros, zeros};
    int nout = n->n_outputs;
    scan_acc *acc = calloc((size_t)nout + 1, sizeof *acc);
    kn_tensor *row_in = calloc((size_t)(n_state + m_in) + 1, sizeof *row_in);
    kn_tensor *row_out = calloc((size_t)nout + 1, sizeof *row_out);
    const kn_tensor **ptrs = calloc((size_t)(n_state + m_in) + 1, sizeof *ptrs);
    int st = (!acc || !row_in || !row_out || !ptrs) ? kn_error(KN_ERR_NOMEM, "out of memory") : KN_OK;
    for (int64_t b = 0; !st && b < batch; b++) {
        for (int i = 0; i < n_state + m_in && !st; i++) {
            kn_tensor_free(&row_in[i]);
            st = take_slice(xs[i], 0, b, &row_in[i]);
            ptrs[i] = &row_in[i];
        }
        if (!st) st = run_scan(ctx, n, body, &sp, ptrs, ptrs + n_state, row_out);
        for (int k = 0; !st && k < nout; k++) st = acc_push(&acc[k], &row_out[k]);
        free_all(row_out, nout);
    }
    for (int k = 0; !st && k < nout; k++) st = acc_stack(n, &acc[k], 0, false, body->outputs[k]->dtype, &out[k]);
    for (int k = 0; acc && k < nout; k++) acc_free(&acc[k]);
    if (row_in) free_all(row_in, n_state + m_in);
    free(acc), free(row_in), free(row_out), free(ptrs);
    return st;
}

static int eval_scan(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_graph *body;
    int st = need_graph(n, "body", &body);
    if (st) return st;
    if (kn_node_opset(n) < 9) return eval_scan8(ctx, n, body, in, out);
    int m_in = (int)kn_attr_int(n, "num_scan_inputs", 0);
    int n_state = n->n_inputs - m_in;
    int n_scan_out = body->n_outputs - n_state;
    if (m_in < 1 || m_in > KN_VAR || n_state < 0 || n_scan_out < 0 || body->n_inputs != n->n_inputs ||
        n->n_outputs != body->n_outputs)
        return kn_node_error(n, KN_ERR_INVALID, "body signature does not match the node");
    int axes[KN_VAR], in_rev[KN_VAR], out_axes[KN_VAR], out_rev[KN_VAR];
    for (int j = 0; j < m_in; j++) {
        const kn_tensor *t = in[n_state + j];
        if (!t) return kn_node_error(n, KN_ERR_INVALID, "scan input %d is missing", j);
        axes[j] = kn_norm_axis(scan_attr_axis(n, "scan_input_axes", j, 0), t->rank);
        if (axes[j] < 0) return kn_node_error(n, KN_ERR_INVALID, "scan_input_axes[%d] out of range", j);
        in_rev[j] = scan_attr_axis(n, "scan_input_directions", j, 0);
    }
    for (int j = 0; j < n_scan_out && j < KN_VAR; j++) {
        out_axes[j] = scan_attr_axis(n, "scan_output_axes", j, 0);
        out_rev[j] = scan_attr_axis(n, "scan_output_directions", j, 0);
    }
    for (int i = 0; i < n_state; i++)
        if (!in[i]) return kn_node_error(n, KN_ERR_INVALID, "state input %d is missing", i);
    scan_spec sp = {n_state, m_in, n_scan_out, axes, in_rev, out_axes, out_rev};
    return run_scan(ctx, n, body, &sp, in, in + n_state, out);
}

const kn_op_impl kn_ops_control[] = {
    {KN_OP_Constant, infer_constant, eval_constant},
    {KN_OP_Identity, infer_identity, eval_identity},
    {KN_OP_If, infer_if, eval_if},
    {KN_OP_Loop, infer_loop, eval_loop},
    {KN_OP_Scan, infer_scan, eval_scan},
    {KN_OP_UNKNOWN, NULL, NULL},
};
