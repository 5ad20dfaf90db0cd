/* quant/quantize.c — QDQ rewrites (quantize.h). */
#include "quantize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "match.h"
#include "observer.h"
#include "pass.h"

int kn_quant_prepare(kn_model *m)
{
    int st = kn_graph_toposort(m->graph);
    if (st) return st;
    kn_pipeline_opts po = {.opt_level = 3, .passes = KN_QUANT_PREPASSES};
    kn_pass_log log = {0};
    st = kn_pass_run_pipeline(m, &po, &log);
    kn_pass_log_free(&log);
    return st;
}

bool kn_quant_is_kept(const kn_node *n, int n_keep, const char *const *keep)
{
    for (int i = 0; i < n_keep; i++)
        if (!strcmp(n->name, keep[i]) || !strcmp(n->op_type, keep[i])) return true;
    return false;
}

int kn_quant_check_keep(const kn_graph *g, int n_keep, const char *const *keep)
{
    for (int i = 0; i < n_keep; i++) {
        bool found = false;
        for (int k = 0; k < g->n_nodes && !found; k++)
            found = !strcmp(g->nodes[k]->name, keep[i]) || !strcmp(g->nodes[k]->op_type, keep[i]);
        if (!found)
            return kn_error(KN_ERR_INVALID, "--keep-float '%s': no node and no op type of that name in the model",
                            keep[i]);
    }
    return KN_OK;
}

static bool is_qop(const kn_node *n) { return kn_op_flags(n->op) & KN_OPF_QUANT; }

static bool is_matrix_op(kn_op op) { return op == KN_OP_Conv || op == KN_OP_MatMul || op == KN_OP_Gemm; }

static bool matrix_out_for_add(const kn_value *v)
{
    return v && v->producer && is_matrix_op(v->producer->op) && !(v->flags & KN_VALUE_GRAPH_OUTPUT) &&
           v->n_users == 1 && v->users[0].node->op == KN_OP_Add;
}

/* An output the integer kernel keeps inside: read only by a fused
 * activation (Relu, Clip) or, for a matrix op, only by a bias/residual Add
 * whose other addend is quantized. Of an Add of two such outputs (ResNet's
 * downsampling block: conv3 + the shortcut's conv) the later value is
 * quantized, and the other group takes it as its residual. */
static bool fused_inside(const kn_value *v)
{
    if (!v->producer || (v->flags & KN_VALUE_GRAPH_OUTPUT) || v->n_users != 1) return false;
    kn_op p = v->producer->op, c = v->users[0].node->op;
    if ((is_matrix_op(p) || p == KN_OP_Add) && (c == KN_OP_Relu || c == KN_OP_Clip)) return true;
    if (!matrix_out_for_add(v)) return false;
    const kn_node *add = v->users[0].node;
    const kn_value *other = kn_node_input(add, 0) == v ? kn_node_input(add, 1) : kn_node_input(add, 0);
    return !matrix_out_for_add(other) || other->id > v->id;
}

static bool quantizable_value(const kn_value *v)
{
    return v && !v->const_data && v->dtype == KN_F32 && !fused_inside(v);
}

int kn_quant_select(const kn_graph *g, int n_keep, const char *const *keep, kn_value ***out_vals, int *out_n)
{
    *out_vals = NULL;
    *out_n = 0;
    /* by value id: chosen? */
    int n_ids = g->model->n_value_ids;
    bool *chosen = calloc((size_t)n_ids + 1, 1);
    kn_value **vals = calloc((size_t)g->n_values + (size_t)g->n_inputs + 1, sizeof *vals);
    if (!chosen || !vals) {
        free(chosen), free(vals);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const kn_node *n = g->nodes[i];
        if (!is_qop(n) || kn_quant_is_kept(n, n_keep, keep)) continue;
        for (int k = 0; k < n->n_inputs; k++)
            if (quantizable_value(n->inputs[k])) chosen[n->inputs[k]->id] = true;
        for (int k = 0; k < n->n_outputs; k++)
            if (quantizable_value(n->outputs[k])) chosen[n->outputs[k]->id] = true;
    }
    int cnt = 0;
    for (int i = 0; i < g->n_inputs; i++)
        if (chosen[g->inputs[i]->id]) chosen[g->inputs[i]->id] = false, vals[cnt++] = g->inputs[i];
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_outputs; k++) {
            kn_value *v = g->nodes[i]->outputs[k];
            if (v && chosen[v->id]) chosen[v->id] = false, vals[cnt++] = v;
        }
    free(chosen);
    *out_vals = vals;
    *out_n = cnt;
    return KN_OK;
}

/* ---- building blocks ------------------------------------------------------------ */

/* A fresh value name "<base><suffix>", with a counter if taken. */
static const char *fresh_name(kn_graph *g, const char *base, const char *suffix, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", base, suffix);
    for (int k = 1; kn_graph_lookup(g, buf); k++) snprintf(buf, len, "%s%s_%d", base, suffix, k);
    return buf;
}

static kn_value *new_const(kn_graph *g, const char *base, const char *suffix, kn_dtype dt, int rank,
                           const int64_t *dims, kn_tensor **out_t)
{
    char name[512];
    return kn_pm_const_new(g, fresh_name(g, base, suffix, name, sizeof name), dt, rank, dims, out_t);
}

static kn_node *add_node(kn_graph *g, const char *op, int n_in, kn_value *const *in, const char *out_base,
                         const char *suffix, int n_out)
{
    char names[3][512];
    const char *outs[3];
    for (int i = 0; i < n_out; i++) {
        char sfx[64];
        snprintf(sfx, sizeof sfx, "%s%s", suffix, i == 0 ? "" : i == 1 ? "_scale" : "_zero_point");
        outs[i] = fresh_name(g, out_base, sfx, names[i], sizeof names[i]);
        /* reserve the name now: the node creates the value */
    }
    return kn_node_create_named(g, op, "", NULL, n_in, in, n_out, outs);
}

static int set_axis(kn_node *n, int axis)
{
    kn_attr *a = kn_node_add_attr(n, "axis", KN_ATTR_INT);
    if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
    a->i = axis;
    return KN_OK;
}

/* T → QuantizeLinear → DequantizeLinear with u8 scale/zp; *out_dq the DQ's
 * output. */
static int insert_qdq(kn_graph *g, kn_value *t, float scale, int32_t zp, kn_value **out_dq)
{
    kn_tensor *ts, *tz;
    kn_value *s = new_const(g, t->name, "_scale", KN_F32, 0, NULL, &ts);
    kn_value *z = s ? new_const(g, t->name, "_zero_point", KN_U8, 0, NULL, &tz) : NULL;
    if (!z) return KN_ERR_NOMEM;
    ((float *)ts->data)[0] = scale;
    ((uint8_t *)tz->data)[0] = (uint8_t)zp;
    kn_node *q = add_node(g, "QuantizeLinear", 3, (kn_value *[]){t, s, z}, t->name, "_quantized", 1);
    if (!q) return KN_ERR_NOMEM;
    kn_node *dq = add_node(g, "DequantizeLinear", 3, (kn_value *[]){q->outputs[0], s, z}, t->name, "_dequantized", 1);
    if (!dq) return KN_ERR_NOMEM;
    *out_dq = dq->outputs[0];
    return KN_OK;
}

/* Points every reader of `from` but `except` and nodes left in float at `to`. */
static int redirect(kn_value *from, kn_value *to, const kn_node *except, const kn_quant_opts *o)
{
    int n = from->n_users;
    kn_use *uses = malloc(sizeof *uses * ((size_t)n + 1));
    if (!uses) return kn_error(KN_ERR_NOMEM, "out of memory");
    memcpy(uses, from->users, sizeof *uses * (size_t)n); /* set_input edits the list */
    for (int i = 0; i < n; i++)
        if (uses[i].node != except && !kn_quant_is_kept(uses[i].node, o->n_keep, o->keep))
            kn_node_set_input(uses[i].node, uses[i].index, to);
    free(uses);
    return KN_OK;
}

/* Symmetric s8 weights in [-qmax, qmax], per channel along axis (or per
 * tensor with axis -1), + DequantizeLinear; *out_scales (malloc'd, n_ch floats) for the bias. */
static int quantize_weight(kn_graph *g, kn_node *n, int idx, int axis, int qmax, float **out_scales, int *out_nch)
{
    kn_value *w = n->inputs[idx];
    const kn_tensor *wt = w->const_data;
    int64_t numel = kn_tensor_numel(wt);
    int64_t nch = axis >= 0 ? wt->dims[axis] : 1, inner = 1;
    for (int d = axis + 1; axis >= 0 && d < wt->rank; d++) inner *= wt->dims[d];
    const float *x = wt->data;
    float *scales = calloc((size_t)nch, sizeof *scales);
    if (!scales) return kn_error(KN_ERR_NOMEM, "out of memory");
    /* element i belongs to channel (i / inner) % nch */
    float *amax = calloc((size_t)nch, sizeof *amax);
    if (!amax) {
        free(scales);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < numel; i++) {
        int64_t c = axis >= 0 ? (i / inner) % nch : 0;
        float a = fabsf(x[i]);
        if (a > amax[c]) amax[c] = a;
    }
    for (int64_t c = 0; c < nch; c++) kn_qparams_s8_max(-amax[c], amax[c], qmax, &scales[c]);
    free(amax);
    kn_tensor *tq, *ts, *tz;
    int64_t chd[1] = {nch};
    kn_value *q = new_const(g, w->name, "_quantized", KN_I8, wt->rank, wt->dims, &tq);
    kn_value *s = q ? new_const(g, w->name, "_scale", KN_F32, axis >= 0 ? 1 : 0, chd, &ts) : NULL;
    kn_value *z = s ? new_const(g, w->name, "_zero_point", KN_I8, axis >= 0 ? 1 : 0, chd, &tz) : NULL;
    if (!z) {
        free(scales);
        return KN_ERR_NOMEM;
    }
    for (int64_t i = 0; i < numel; i++) {
        int64_t c = axis >= 0 ? (i / inner) % nch : 0;
        ((int8_t *)tq->data)[i] = kn_quantize_s8_max(x[i], scales[c], qmax);
    }
    memcpy(ts->data, scales, sizeof *scales * (size_t)nch);
    kn_node *dq = add_node(g, "DequantizeLinear", 3, (kn_value *[]){q, s, z}, w->name, "_dequantized", 1);
    int st = dq ? KN_OK : KN_ERR_NOMEM;
    if (!st && axis >= 0) st = set_axis(dq, axis);
    if (st) {
        free(scales);
        return st;
    }
    kn_node_set_input(n, idx, dq->outputs[0]);
    *out_scales = scales;
    *out_nch = (int)nch;
    return KN_OK;
}

/* Bias (1-D, one value per output channel) as int32 with scale
 * x_scale * w_scale[c], zero point 0, + DequantizeLinear. */
static int quantize_bias(kn_graph *g, kn_node *n, int idx, float x_scale, const float *w_scales, int nch)
{
    kn_value *b = kn_node_input(n, idx);
    if (!b || !b->const_data || b->dtype != KN_F32 || b->const_data->rank != 1) return KN_OK;
    int64_t m = b->const_data->dims[0];
    if (nch != 1 && nch != m) return KN_OK;
    const float *x = b->const_data->data;
    kn_tensor *tq, *ts;
    int64_t chd[1] = {nch};
    kn_value *q = new_const(g, b->name, "_quantized", KN_I32, 1, &m, &tq);
    kn_value *s = q ? new_const(g, b->name, "_scale", KN_F32, nch > 1 ? 1 : 0, chd, &ts) : NULL;
    if (!s) return KN_ERR_NOMEM;
    for (int64_t c = 0; c < nch; c++) ((float *)ts->data)[c] = x_scale * w_scales[c];
    for (int64_t i = 0; i < m; i++) {
        double v = nearbyint((double)x[i] / (double)((float *)ts->data)[nch > 1 ? i : 0]);
        ((int32_t *)tq->data)[i] = v > INT32_MAX ? INT32_MAX : v < -INT32_MAX ? -INT32_MAX : (int32_t)v;
    }
    kn_node *dq = add_node(g, "DequantizeLinear", 2, (kn_value *[]){q, s}, b->name, "_dequantized", 1);
    if (!dq) return KN_ERR_NOMEM;
    if (nch > 1) {
        int st = set_axis(dq, 0);
        if (st) return st;
    }
    kn_node_set_input(n, idx, dq->outputs[0]);
    return KN_OK;
}

/* The weight input of a matrix op and its output-channel axis; -1 if n has
 * no constant f32 weight kiln quantizes. */
static int weight_of(const kn_node *n, int *out_axis)
{
    kn_value *w = kn_node_input(n, 1);
    if (!w || !w->const_data || w->dtype != KN_F32) return -1;
    int r = w->const_data->rank;
    if (n->op == KN_OP_Conv) {
        *out_axis = 0;
        return r >= 3 ? 1 : -1;
    }
    if (r != 2) return -1;
    if (n->op == KN_OP_MatMul) *out_axis = 1;
    else if (n->op == KN_OP_Gemm) *out_axis = kn_attr_int(n, "transB", 0) ? 0 : 1;
    else return -1;
    return 1;
}

static int finish(kn_model *m)
{
    int st = kn_graph_toposort(m->graph);
    if (!st) st = kn_graph_infer(m->graph);
    if (st) kn_error_prefix("after quantization: ");
    return st;
}

/* The DequantizeLinear feeding v, if it is one we inserted for an activation. */
static const kn_node *dq_producer(const kn_value *v)
{
    return v && v->producer && v->producer->op == KN_OP_DequantizeLinear ? v->producer : NULL;
}

int kn_quantize_static(kn_model *m, const kn_quant_opts *o)
{
    kn_graph *g = m->graph;
    const kn_calib_table *t = o->table;
    if (!t) return kn_error(KN_ERR_INVALID, "static quantization needs a calibration table");
    int st0 = kn_quant_check_keep(g, o->n_keep, o->keep);
    if (st0) return st0;
    bool per_axis_ok = kn_model_opset(m, "") >= 13;
    int st = KN_OK;
    for (int i = 0; !st && i < t->n_tensors; i++) {
        const kn_calib_entry *e = &t->tensors[i];
        kn_value *v = kn_graph_lookup_local(g, e->name);
        if (!v) {
            st = kn_error(KN_ERR_INVALID, "the table names tensor '%s', which the model does not have", e->name);
            break;
        }
        if (v->dtype != KN_F32 || v->const_data) {
            st = kn_error(KN_ERR_INVALID, "the table names tensor '%s', which is not a float32 activation", e->name);
            break;
        }
        if (e->dtype != KN_U8) {
            st = kn_error(KN_ERR_UNSUPPORTED, "tensor '%s': only u8 activations are supported", e->name);
            break;
        }
        if (!v->n_users) continue; /* a graph output only: nothing reads it quantized */
        /* max pooling only selects values: its output keeps its input's
         * quantization (as onnxruntime's quantizer does), so that the pooling
         * runs on the 8-bit tensor (passes/lower_qdq.c) */
        float scale = e->scale;
        int32_t zp = e->zero_point;
        if (v->producer && v->producer->op == KN_OP_MaxPool && kn_node_input(v->producer, 0)) {
            /* the input, seen through the QDQ pair inserted on it already */
            const kn_value *x = kn_node_input(v->producer, 0);
            const kn_node *d = x->producer, *q = d && d->op == KN_OP_DequantizeLinear && d->inputs[0] ? d->inputs[0]->producer : NULL;
            if (q && q->op == KN_OP_QuantizeLinear && q->inputs[0]) x = q->inputs[0];
            const char *in = x->name;
            for (int k = 0; k < t->n_tensors; k++)
                if (!strcmp(t->tensors[k].name, in) && t->tensors[k].dtype == KN_U8)
                    scale = t->tensors[k].scale, zp = t->tensors[k].zero_point;
        }
        kn_value *dq;
        if ((st = insert_qdq(g, v, scale, zp, &dq))) break;
        st = redirect(v, dq, dq->producer->inputs[0]->producer, o);
    }
    int n_nodes = g->n_nodes;
    for (int i = 0; !st && i < n_nodes; i++) {
        kn_node *n = g->nodes[i];
        int axis;
        if (!is_matrix_op(n->op) || kn_quant_is_kept(n, o->n_keep, o->keep) || weight_of(n, &axis) < 0) continue;
        const kn_node *xdq = dq_producer(n->inputs[0]);
        const kn_value *xs = xdq ? xdq->inputs[1] : NULL;
        if (!xs || !xs->const_data || xs->const_data->dtype != KN_F32 || kn_tensor_numel(xs->const_data) != 1)
            continue; /* the activation stays float */
        float x_scale = ((const float *)xs->const_data->data)[0];
        bool pc = per_axis_ok && (n->op == KN_OP_Conv || o->per_channel);
        float *ws = NULL;
        int nch = 0;
        st = quantize_weight(g, n, 1, pc ? axis : -1, o->weight_max > 0 ? o->weight_max : 127, &ws, &nch);
        if (!st && (n->op == KN_OP_Conv || n->op == KN_OP_Gemm))
            st = quantize_bias(g, n, 2, x_scale, ws, nch);
        free(ws);
    }
    if (st) return st;
    return finish(m);
}

/* A Gather of a large float table (embeddings): the table becomes s8 (per
 * tensor, symmetric) and the gathered rows are dequantized,
 * DequantizeLinear(Gather(table_q, idx)), as onnxruntime's dynamic
 * quantizer writes it: the artifact keeps the table in 8 bits. */
static int quantize_gather(kn_graph *g, kn_node *n)
{
    float *ws = NULL;
    int nch = 0;
    int st = quantize_weight(g, n, 0, -1, 127, &ws, &nch);
    free(ws);
    if (st) return st;
    kn_node *d = n->inputs[0]->producer; /* the DequantizeLinear quantize_weight put before it */
    kn_value *q = d->inputs[0], *s = d->inputs[1], *z = d->inputs[2], *y = n->outputs[0];
    kn_node_set_input(n, 0, q);
    kn_node_remove(d);
    y->dtype = KN_I8;
    kn_node *dq = add_node(g, "DequantizeLinear", 3, (kn_value *[]){y, s, z}, y->name, "_dequantized", 1);
    if (!dq) return KN_ERR_NOMEM;
    /* every reader gets the float rows (--keep-float ones too: y is s8 now) */
    kn_value_replace_uses(y, dq->outputs[0]);
    kn_node_set_input(dq, 0, y);
    return KN_OK;
}

static bool is_table_gather(const kn_node *n)
{
    const kn_value *t = n->op == KN_OP_Gather ? kn_node_input(n, 0) : NULL;
    return t && t->const_data && t->dtype == KN_F32 && t->shape.rank == 2 && kn_tensor_numel(t->const_data) >= 65536 &&
           kn_attr_int(n, "axis", 0) == 0 && n->outputs[0] && !(n->outputs[0]->flags & KN_VALUE_GRAPH_OUTPUT);
}

int kn_quantize_dynamic(kn_model *m, const kn_quant_opts *o)
{
    kn_graph *g = m->graph;
    bool per_axis_ok = kn_model_opset(m, "") >= 11; /* DynamicQuantizeLinear itself needs 11 */
    if (!per_axis_ok) return kn_error(KN_ERR_UNSUPPORTED, "dynamic quantization needs opset 11 or later");
    bool pc = kn_model_opset(m, "") >= 13;
    int st0 = kn_quant_check_keep(g, o->n_keep, o->keep);
    if (st0) return st0;
    /* one DynamicQuantizeLinear → DequantizeLinear per activation, by value id */
    kn_value **dq_of = calloc((size_t)m->n_value_ids + 1, sizeof *dq_of);
    if (!dq_of) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = KN_OK, n_nodes = g->n_nodes;
    for (int i = 0; !st && i < n_nodes; i++) {
        kn_node *n = g->nodes[i];
        int axis;
        if (is_table_gather(n) && !kn_quant_is_kept(n, o->n_keep, o->keep)) {
            st = quantize_gather(g, n);
            continue;
        }
        if ((n->op != KN_OP_MatMul && n->op != KN_OP_Gemm) || kn_quant_is_kept(n, o->n_keep, o->keep) ||
            weight_of(n, &axis) < 0)
            continue;
        kn_value *x = n->inputs[0];
        if (!x || x->const_data || x->dtype != KN_F32) continue;
        if (!dq_of[x->id]) {
            kn_node *dyn = add_node(g, "DynamicQuantizeLinear", 1, &x, x->name, "_quantized", 3);
            kn_node *dq = dyn ? add_node(g, "DequantizeLinear", 3, dyn->outputs, x->name, "_dequantized", 1) : NULL;
            if (!dq) {
                st = KN_ERR_NOMEM;
                break;
            }
            dq_of[x->id] = dq->outputs[0];
        }
        kn_node_set_input(n, 0, dq_of[x->id]);
        float *ws = NULL;
        int nch = 0;
        st = quantize_weight(g, n, 1, pc ? axis : -1, o->weight_max > 0 ? o->weight_max : 127, &ws, &nch);
        free(ws);
    }
    free(dq_of);
    if (st) return st;
    return finish(m);
}
