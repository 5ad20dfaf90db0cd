/* kn_graph_verify: the IR's structural invariants, checked after import and
 * between passes so that a broken rewrite is caught where it happened, with
 * a message naming the node, rather than as a crash much later. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct verifier {
    const kn_model *m;
    char *defined; /* per value id: its definition has been walked */
    char *live;    /* per node id: the node is in some graph of the model */
} verifier;

static int verify_graph(verifier *V, const kn_graph *g);

static bool dtype_ok(kn_dtype dt) { return dt == KN_DT_UNDEFINED || kn_dtype_info(dt)->name != NULL; }

/* Marks every node reachable from g as live (nodes removed from their graph
 * may still be listed as users of a value, which is an error). */
static void mark_live(verifier *V, const kn_graph *g)
{
    for (int k = 0; k < g->n_nodes; k++) {
        const kn_node *n = g->nodes[k];
        if (!n) continue;
        if (n->id >= 0 && n->id < V->m->n_node_ids) V->live[n->id] = 1;
        for (int i = 0; i < n->n_attrs; i++) {
            const kn_attr *a = &n->attrs[i];
            if (a->kind == KN_ATTR_GRAPH && a->g) mark_live(V, a->g);
            for (int j = 0; a->kind == KN_ATTR_GRAPHS && a->graphs && j < a->n; j++)
                if (a->graphs[j]) mark_live(V, a->graphs[j]);
        }
    }
}

static bool id_ok(const verifier *V, const kn_value *v) { return v->id >= 0 && v->id < V->m->n_value_ids; }

/* The contract of kn_qparams (ir.h): a scale, a zero point shaped like it,
 * an axis inside the value's rank or -1 for per-tensor. */
static int check_qparams(const kn_graph *g, const kn_value *v)
{
    const kn_qparams *q = v->q;
    if (!q->scale)
        return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' has quantization parameters without a scale",
                        g->name, v->name);
    if (q->zero_point && kn_tensor_numel(q->zero_point) != kn_tensor_numel(q->scale))
        return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' has %" PRId64 " zero points for %" PRId64 " scales",
                        g->name, v->name, kn_tensor_numel(q->zero_point), kn_tensor_numel(q->scale));
    if (q->axis < -1 || (v->shape.rank >= 0 && q->axis >= v->shape.rank) || q->block_size < 0)
        return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' has quantization axis %d / block size %d "
                        "outside its rank %d", g->name, v->name, q->axis, q->block_size, v->shape.rank);
    return KN_OK;
}

static int check_value(verifier *V, const kn_graph *g, const kn_value *v)
{
    if (!id_ok(V, v))
        return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' has id %d outside [0, %d)", g->name,
                        v->name, v->id, V->m->n_value_ids);
    if (v->graph != g)
        return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' is listed but belongs to another graph",
                        g->name, v->name);
    if (kn_graph_lookup_local(g, v->name) != v)
        return kn_error(KN_ERR_INVALID, "graph '%s': value name '%s' is not unique", g->name, v->name);
    if (!dtype_ok(v->dtype))
        return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' has invalid dtype %d", g->name,
                        v->name, (int)v->dtype);
    if (v->shape.rank < -1 || v->shape.rank > KN_MAX_RANK)
        return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' has invalid rank %d", g->name,
                        v->name, v->shape.rank);
    if (v->const_data) {
        const kn_tensor *t = v->const_data;
        /* only an instance (KN_VALUE_VARYING_SHAPE) may be both computed and known */
        if (v->producer && !(v->flags & KN_VALUE_VARYING_SHAPE))
            return kn_error(KN_ERR_INVALID, "graph '%s': constant '%s' also has a producer", g->name, v->name);
        if ((v->dtype != KN_DT_UNDEFINED && v->dtype != t->dtype) ||
            (v->shape.rank >= 0 && v->shape.rank != t->rank))
            return kn_error(KN_ERR_INVALID, "graph '%s': constant '%s' is typed %s rank %d but its data is %s rank %d",
                            g->name, v->name, kn_dtype_name(v->dtype), v->shape.rank,
                            kn_dtype_name(t->dtype), t->rank);
    }
    if (v->q) {
        int st = check_qparams(g, v);
        if (st) return st;
    }
    for (int k = 0; k < v->n_users; k++) {
        const kn_use *u = &v->users[k];
        if (!u->node || u->node->id < 0 || u->node->id >= V->m->n_node_ids || !V->live[u->node->id])
            return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' lists a user node '%s' that is not in the model",
                            g->name, v->name, u->node ? u->node->name : "(null)");
        if (u->index < 0 || u->index >= u->node->n_inputs || u->node->inputs[u->index] != v)
            return kn_node_error(u->node, KN_ERR_INVALID,
                                 "is listed as user %d of value '%s' but its input %d is not that value",
                                 k, v->name, u->index);
    }
    return KN_OK;
}

/* True if v is visible from g by its name (defined in g or an enclosing
 * graph, and not shadowed by a nearer value of the same name). */
static bool visible(const kn_graph *g, const kn_value *v) { return kn_graph_lookup(g, v->name) == v; }

static int count_use(const kn_value *v, const kn_node *n, int i)
{
    int c = 0;
    for (int k = 0; k < v->n_users; k++)
        if (v->users[k].node == n && v->users[k].index == i) c++;
    return c;
}

static int check_input(verifier *V, const kn_graph *g, const kn_node *n, int i)
{
    const kn_value *v = n->inputs[i];
    if (!visible(g, v))
        return kn_node_error(n, KN_ERR_INVALID, "input %d '%s' is not defined in graph '%s' or an enclosing graph",
                             i, v->name, g->name);
    if (!id_ok(V, v)) return kn_node_error(n, KN_ERR_INVALID, "input %d '%s' has a bad id", i, v->name);
    /* a value left behind when a rewrite gave its node a new output */
    const kn_node *p = v->producer;
    if (p && (v->producer_index < 0 || v->producer_index >= p->n_outputs || p->outputs[v->producer_index] != v))
        return kn_node_error(n, KN_ERR_INVALID, "input %d '%s' names node '%s' as its producer, which does not output it",
                             i, v->name, p->name);
    if (!V->defined[v->id]) {
        if (v->producer && (v->producer->id < 0 || v->producer->id >= V->m->n_node_ids ||
                            !V->live[v->producer->id]))
            return kn_node_error(n, KN_ERR_INVALID, "input %d '%s' is produced by node '%s', which was removed",
                                 i, v->name, v->producer->name);
        if (v->producer)
            return kn_node_error(n, KN_ERR_INVALID, "input %d '%s' is used before it is defined (by node '%s')",
                                 i, v->name, v->producer->name);
        return kn_node_error(n, KN_ERR_INVALID,
                             "input %d '%s' is neither a graph input, a constant nor a node output",
                             i, v->name);
    }
    int c = count_use(v, n, i);
    if (c != 1)
        return kn_node_error(n, KN_ERR_INVALID, "input %d '%s' appears %d times in the value's users list, expected once",
                             i, v->name, c);
    return KN_OK;
}

static int check_attr(verifier *V, const kn_graph *g, const kn_node *n, const kn_attr *a)
{
    if (!a->name) return kn_node_error(n, KN_ERR_INVALID, "has an attribute without a name");
    if (a->kind < KN_ATTR_UNDEFINED || a->kind > KN_ATTR_GRAPHS)
        return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' has invalid kind %d", a->name, (int)a->kind);
    bool is_list = a->kind >= KN_ATTR_FLOATS;
    if (is_list && a->n < 0) return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' has %d elements", a->name, a->n);
    if (is_list && a->n > 0) {
        const void *arr = a->kind == KN_ATTR_FLOATS ? (const void *)a->floats
                        : a->kind == KN_ATTR_INTS ? (const void *)a->ints
                        : a->kind == KN_ATTR_STRINGS ? (const void *)a->strings
                        : a->kind == KN_ATTR_TENSORS ? (const void *)a->tensors
                                                     : (const void *)a->graphs;
        if (!arr) return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' has %d elements but no array", a->name, a->n);
    }
    if (a->kind == KN_ATTR_TENSOR && !a->t)
        return kn_node_error(n, KN_ERR_INVALID, "tensor attribute '%s' has no tensor", a->name);
    if (a->kind == KN_ATTR_STRING && !a->s)
        return kn_node_error(n, KN_ERR_INVALID, "string attribute '%s' has no string", a->name);
    int ng = a->kind == KN_ATTR_GRAPH ? 1 : a->kind == KN_ATTR_GRAPHS ? a->n : 0;
    for (int j = 0; j < ng; j++) {
        const kn_graph *sub = a->kind == KN_ATTR_GRAPH ? a->g : a->graphs[j];
        if (!sub) return kn_node_error(n, KN_ERR_INVALID, "graph attribute '%s' has no graph", a->name);
        if (sub->parent != g || sub->model != V->m)
            return kn_node_error(n, KN_ERR_INVALID, "subgraph '%s' of attribute '%s' does not have graph '%s' as its parent",
                                 sub->name, a->name, g->name);
        int st = verify_graph(V, sub);
        if (st) {
            kn_error_prefix("node '%s' (%s), attribute '%s': ", n->name, n->op_type, a->name);
            return st;
        }
    }
    return KN_OK;
}

static int check_arity(const kn_node *n)
{
    if (n->op == KN_OP_UNKNOWN) return KN_OK; /* unsupported ops are reported elsewhere */
    if ((int)n->op < 0 || n->op >= KN_OP_COUNT)
        return kn_node_error(n, KN_ERR_INVALID, "has invalid op number %d", (int)n->op);
    const kn_op_info *oi = kn_op_get(n->op);
    bool var_in = oi->max_inputs >= KN_VAR, var_out = oi->max_outputs >= KN_VAR;
    if (n->n_inputs < oi->min_inputs || (!var_in && n->n_inputs > oi->max_inputs))
        return kn_node_error(n, KN_ERR_INVALID, "has %d inputs, expected %d to %d", n->n_inputs,
                             oi->min_inputs, oi->max_inputs);
    if (n->n_outputs < oi->min_outputs || (!var_out && n->n_outputs > oi->max_outputs))
        return kn_node_error(n, KN_ERR_INVALID, "has %d outputs, expected %d to %d", n->n_outputs,
                             oi->min_outputs, oi->max_outputs);
    /* Loop's M and cond, and opset-8 Scan's sequence_lens, are optional
     * inputs that the arity still counts. */
    bool leading_optional = n->op == KN_OP_Loop || n->op == KN_OP_Scan;
    for (int i = 0; !leading_optional && i < oi->min_inputs; i++)
        if (!n->inputs[i]) return kn_node_error(n, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

static int check_node(verifier *V, const kn_graph *g, const kn_node *n)
{
    if (n->graph != g) return kn_node_error(n, KN_ERR_INVALID, "is listed in graph '%s' but belongs to another", g->name);
    if (n->n_inputs < 0 || n->n_outputs < 0 || (n->n_inputs && !n->inputs) || (n->n_outputs && !n->outputs))
        return kn_node_error(n, KN_ERR_INVALID, "has a malformed input or output list");
    int st = check_arity(n);
    for (int i = 0; !st && i < n->n_inputs; i++)
        if (n->inputs[i]) st = check_input(V, g, n, i);
    for (int i = 0; !st && i < n->n_attrs; i++) st = check_attr(V, g, n, &n->attrs[i]);
    for (int i = 0; !st && i < n->n_outputs; i++) {
        const kn_value *v = n->outputs[i];
        if (!v) continue;
        if (v->graph != g || kn_graph_lookup_local(g, v->name) != v)
            return kn_node_error(n, KN_ERR_INVALID, "output %d '%s' is not a value of graph '%s'", i, v->name, g->name);
        if (v->producer != n || v->producer_index != i)
            return kn_node_error(n, KN_ERR_INVALID, "output %d '%s' is also produced by node '%s'", i,
                                 v->name, v->producer ? v->producer->name : "(none)");
        if (V->defined[v->id])
            return kn_node_error(n, KN_ERR_INVALID, "output %d '%s' is defined twice", i, v->name);
        V->defined[v->id] = 1;
    }
    return st;
}

static int cmp_names(const void *a, const void *b)
{
    const kn_node *x = *(const kn_node *const *)a, *y = *(const kn_node *const *)b;
    return strcmp(x->name, y->name);
}

/* Node names are unique within a graph (kn_node_create's contract). */
static int check_node_names(const kn_graph *g)
{
    if (g->n_nodes < 2) return KN_OK;
    const kn_node **s = malloc(sizeof *s * (size_t)g->n_nodes);
    if (!s) return kn_error(KN_ERR_NOMEM, "out of memory");
    memcpy(s, g->nodes, sizeof *s * (size_t)g->n_nodes);
    qsort(s, (size_t)g->n_nodes, sizeof *s, cmp_names);
    int st = KN_OK;
    for (int k = 1; k < g->n_nodes && !st; k++)
        if (!strcmp(s[k - 1]->name, s[k]->name))
            st = kn_node_error(s[k], KN_ERR_INVALID, "node name is used more than once in graph '%s'", g->name);
    free(s);
    return st;
}

static int check_graph_io(verifier *V, const kn_graph *g)
{
    for (int i = 0; i < g->n_inputs; i++) {
        const kn_value *v = g->inputs[i];
        if (!v || v->graph != g || v->producer || !id_ok(V, v))
            return kn_error(KN_ERR_INVALID, "graph '%s': input %d is not a plain value of the graph", g->name, i);
        V->defined[v->id] = 1;
    }
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (!v) return kn_error(KN_ERR_INVALID, "graph '%s': value slot %d is NULL", g->name, i);
        int st = check_value(V, g, v);
        if (st) return st;
        if (v->const_data && !v->producer) V->defined[v->id] = 1; /* an instance is defined by its node */
    }
    return KN_OK;
}

static int check_outputs(verifier *V, const kn_graph *g)
{
    for (int i = 0; i < g->n_outputs; i++) {
        const kn_value *v = g->outputs[i];
        if (!v) return kn_error(KN_ERR_INVALID, "graph '%s': output %d is NULL", g->name, i);
        if (!visible(g, v) || !id_ok(V, v))
            return kn_error(KN_ERR_INVALID, "graph '%s': output %d '%s' is not defined in the graph or an enclosing one",
                            g->name, i, v->name);
        if (!V->defined[v->id])
            return kn_error(KN_ERR_INVALID, "graph '%s': output %d '%s' is never computed", g->name, i, v->name);
    }
    return KN_OK;
}

static int verify_graph(verifier *V, const kn_graph *g)
{
    if (g->model != V->m) return kn_error(KN_ERR_INVALID, "graph '%s' belongs to another model", g->name);
    int st = check_graph_io(V, g);
    if (!st) st = check_node_names(g);
    for (int k = 0; !st && k < g->n_nodes; k++) {
        if (!g->nodes[k]) return kn_error(KN_ERR_INVALID, "graph '%s': node slot %d is NULL", g->name, k);
        st = check_node(V, g, g->nodes[k]);
    }
    if (!st) st = check_outputs(V, g);
    return st;
}

int kn_graph_verify(const kn_graph *g)
{
    if (!g || !g->model) return kn_error(KN_ERR_INVALID, "kn_graph_verify: no graph");
    verifier V = {g->model, NULL, NULL};
    V.defined = calloc((size_t)g->model->n_value_ids + 1, 1);
    V.live = calloc((size_t)g->model->n_node_ids + 1, 1);
    if (!V.defined || !V.live) {
        free(V.defined);
        free(V.live);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    /* values of enclosing graphs are visible to g: count them as defined */
    for (const kn_graph *p = g->parent; p; p = p->parent)
        for (int i = 0; i < p->n_values; i++)
            if (p->values[i] && id_ok(&V, p->values[i])) V.defined[p->values[i]->id] = 1;
    const kn_graph *root = g;
    while (root->parent) root = root->parent;
    mark_live(&V, root);
    int st = verify_graph(&V, g);
    free(V.defined);
    free(V.live);
    return st;
}
