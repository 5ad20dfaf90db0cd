/* The type/shape inference driver (kn_graph_infer), with light data
 * propagation: small values computed only from constants (Constant nodes,
 * shape arithmetic, Shape of a static shape) get their data attached as
 * const_data, so Reshape/Expand/Slice/... after them infer static shapes,
 * as exported PyTorch graphs need. */
#include <stdlib.h>
#include <string.h>

#include "eval.h"

/* Values larger than this are left to evaluation, not inference. */
#define KN_PROPAGATE_MAX_ELEMS 4096

static int infer_subgraphs(kn_node *n)
{
    for (int i = 0; i < n->n_attrs; i++) {
        kn_attr *at = &n->attrs[i];
        if (at->kind == KN_ATTR_GRAPH && at->g) {
            int st = kn_graph_infer(at->g);
            if (st) return st;
        }
        for (int k = 0; at->kind == KN_ATTR_GRAPHS && k < at->n; k++) {
            int st = kn_graph_infer(at->graphs[k]);
            if (st) return st;
        }
    }
    return KN_OK;
}

static bool has_subgraph(const kn_node *n)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].kind == KN_ATTR_GRAPH || n->attrs[i].kind == KN_ATTR_GRAPHS) return true;
    return false;
}

static bool small_static(const kn_value *v)
{
    if (!v || !kn_shape_is_static(&v->shape)) return false;
    int64_t n = kn_shape_numel(v->shape.rank, v->shape.dims);
    return n >= 0 && n <= KN_PROPAGATE_MAX_ELEMS;
}

/* Attaches `t` (heap struct, owned data) as the constant data of v. */
static int attach(kn_graph *g, kn_value *v, kn_tensor *t)
{
    if (!kn_model_adopt_tensor(g->model, t)) return KN_ERR_NOMEM;
    v->const_data = t;
    return KN_OK;
}

/* A value computed from one whose shape varies at run time may vary too
 * (conservatively: whatever its op). */
static void propagate_varying(kn_node *n)
{
    bool varying = false;
    for (int i = 0; i < n->n_inputs; i++) varying |= n->inputs[i] && (n->inputs[i]->flags & KN_VALUE_VARYING_SHAPE);
    if (!varying) return;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k]) n->outputs[k]->flags |= KN_VALUE_VARYING_SHAPE;
}

/* Shape(x) needs only x's static shape, not its data. */
static int propagate_shape_op(kn_graph *g, kn_node *n)
{
    kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    if (!x || !y || !kn_shape_is_static(&x->shape)) return KN_OK;
    int r = x->shape.rank;
    int64_t start = kn_attr_int(n, "start", 0), end = kn_attr_int(n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_tensor_alloc(t, KN_I64, 1, &len);
    if (st) {
        free(t);
        return st;
    }
    for (int64_t i = 0; i < len; i++) ((int64_t *)t->data)[i] = x->shape.dims[start + i];
    return attach(g, y, t);
}

/* Evaluates n now if every input is a known constant and every output is
 * small; failures just leave the outputs without data. */
static int propagate_constants(kn_graph *g, kn_node *n)
{
    if (n->op == KN_OP_Shape) return propagate_shape_op(g, n);
    if (!kn_op_runnable(n->op) || has_subgraph(n) || n->n_outputs > 8) return KN_OK;
    const kn_tensor *in[16];
    if (n->n_inputs > 16) return KN_OK;
    for (int i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] && !n->inputs[i]->const_data) return KN_OK;
        in[i] = n->inputs[i] ? n->inputs[i]->const_data : NULL;
    }
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] && (!small_static(n->outputs[i]) || n->outputs[i]->const_data)) return KN_OK;
    const kn_op_info *oi = kn_op_get(n->op);
    if (n->n_inputs < oi->min_inputs || n->n_inputs > oi->max_inputs || n->n_outputs > oi->max_outputs)
        return KN_OK; /* malformed: let the verifier or the evaluator report it */
    kn_tensor out[8];
    memset(out, 0, sizeof out);
    int st = kn_node_eval(NULL, n, in, out);
    bool kept[8] = {false};
    for (int i = 0; st == KN_OK && i < n->n_outputs; i++) {
        if (!n->outputs[i] || out[i].dtype != n->outputs[i]->dtype) continue;
        kn_tensor *t = malloc(sizeof *t);
        if (!t) continue;
        *t = out[i];
        kept[i] = true;
        if (attach(g, n->outputs[i], t)) {
            for (int k = i + 1; k < 8; k++) kn_tensor_free(&out[k]);
            return KN_ERR_NOMEM;
        }
    }
    /* every slot: an op may have filled one past n_outputs on bad input */
    for (int i = 0; i < 8; i++)
        if (!kept[i]) kn_tensor_free(&out[i]);
    kn_error_clear();
    return KN_OK;
}

int kn_graph_infer(kn_graph *g)
{
    for (int k = 0; k < g->n_nodes; k++) {
        kn_node *n = g->nodes[k];
        const kn_op_info *oi = n->op != KN_OP_UNKNOWN ? kn_op_get(n->op) : NULL;
        int st = infer_subgraphs(n);
        if (st) return st;
        if (!oi || !oi->infer) continue; /* outputs stay unknown */
        st = oi->infer(n);
        if (st) return st;
        propagate_varying(n);
        st = propagate_constants(g, n);
        if (st) return st;
    }
    return KN_OK;
}
