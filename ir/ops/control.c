/* Type and shape inference of the 'control' family: Constant, Identity and
 * the ops with subgraphs (If, Loop, Scan). Their execution is the runtime's
 * (runtime/ops/control.c); the evaluator hands it a body runner that runs
 * the IR subgraphs (ir/eval.c). */
#include <stdlib.h>
#include <string.h>

#include "../eval.h"

/* ---- Constant ------------------------------------------------------------ */

/* The constant's value, computed by its runtime kernel (it reads only attributes). */
static int infer_constant(kn_node *n)
{
    kn_tensor t = {0};
    int st = kn_node_eval(NULL, n, NULL, &t);
    if (st) return st;
    kn_infer_set(n, 0, t.dtype, t.rank, t.dims);
    kn_tensor_free(&t);
    return KN_OK;
}

/* ---- Identity ------------------------------------------------------------ */

static int infer_identity(kn_node *n) { return kn_infer_same_as_input(n, 0); }

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

/* ---- If ------------------------------------------------------------------ */

const kn_graph *kn_if_taken_branch(const kn_node *n)
{
    const kn_value *c = n && n->op == KN_OP_If ? kn_node_input(n, 0) : NULL;
    /* data of a varying shape is one instance of it, not a constant */
    if (!c || !c->const_data || (c->flags & KN_VALUE_VARYING_SHAPE)) return NULL;
    const kn_tensor *t = c->const_data;
    if (t->dtype != KN_BOOL || kn_tensor_numel(t) != 1 || !t->data) return NULL;
    return graph_attr(n, *(const uint8_t *)t->data ? "then_branch" : "else_branch");
}

/* With a known condition, the outputs are the taken branch's (the other one
 * is not inferred: it may not even be valid for these shapes, as exported
 * models with shape-dependent Ifs have). Otherwise a dim both branches
 * agree on is kept. */
static int infer_if(kn_node *n)
{
    const kn_graph *th, *el;
    int st = need_graph(n, "then_branch", &th);
    if (!st) st = need_graph(n, "else_branch", &el);
    if (st) return st;
    if (th->n_outputs != n->n_outputs || el->n_outputs != n->n_outputs)
        return kn_node_error(n, KN_ERR_INVALID, "has %d outputs but its branches give %d and %d",
                             n->n_outputs, th->n_outputs, el->n_outputs);
    const kn_graph *taken = kn_if_taken_branch(n);
    if (taken) {
        for (int i = 0; i < n->n_outputs; i++)
            kn_infer_set_shape(n, i, taken->outputs[i]->dtype, &taken->outputs[i]->shape);
        return KN_OK;
    }
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

const kn_op_impl kn_ops_control[] = {
    {KN_OP_Constant, infer_constant},
    {KN_OP_Identity, infer_identity},
    {KN_OP_If, infer_if},
    {KN_OP_Loop, infer_loop},
    {KN_OP_Scan, infer_scan},
    {KN_OP_UNKNOWN, NULL},
};
