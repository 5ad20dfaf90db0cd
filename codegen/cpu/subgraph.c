/*
 * codegen/cpu/subgraph.c — control-flow nodes in compiled artifacts.
 *
 * If, Loop and Scan run through their runtime kernel (runtime/ops/control.c)
 * with their bodies carried in the node's attribute blob, converted here from
 * the IR into the runtime's graph form (kn_sg, runtime/ops/subgraph.h): a
 * value table, constants, captures (outer values a body reads, by name), and
 * nodes that each run through their runtime kernel. The outer values the
 * bodies read become implicit inputs of the node (kn_node_captures, ir.h), so the
 * memory plan keeps them alive until the node has run.
 */
#include "cg.h"

#include <stdlib.h>
#include <string.h>

#include "subgraph.h"

/* ---- IR graph -> kn_sg -------------------------------------------------------- */

/* Everything the conversion allocates, freed at once. */
struct kn_cg_sgpool {
    void **p;
    int n, cap;
};

static void *pool_alloc(kn_cg_sgpool *pool, size_t n, size_t size)
{
    if (pool->n == pool->cap) {
        int cap = pool->cap ? pool->cap * 2 : 32;
        void **q = realloc(pool->p, sizeof *q * (size_t)cap);
        if (!q) return NULL;
        pool->p = q;
        pool->cap = cap;
    }
    void *m = calloc(n + 1, size);
    if (m) pool->p[pool->n++] = m;
    return m;
}

void kn_cg_sg_free(kn_cg_sgpool *pool)
{
    if (!pool) return;
    for (int i = 0; i < pool->n; i++) free(pool->p[i]);
    free(pool->p);
    free(pool);
}

/* One graph being converted: local value indices by model-wide value id. */
typedef struct sg_build {
    kn_cg_sgpool *pool;
    const kn_graph *g;
    kn_sg *sg;
    int *local; /* per value id; -1: not in the table yet */
    kn_sg_value *values;
    int32_t *captures;
} sg_build;

static int convert_attrs(kn_cg_sgpool *pool, const kn_node *n, kn_attr **out_attrs);

static int32_t add_value(sg_build *b, const kn_value *v)
{
    int32_t k = b->sg->n_values++;
    kn_sg_value *sv = &b->values[k];
    sv->name = v->name;
    sv->dtype = v->dtype;
    sv->rank = v->shape.rank;
    for (int d = 0; d < v->shape.rank && d < KN_MAX_RANK; d++) sv->dims[d] = v->shape.dims[d] >= 0 ? v->shape.dims[d] : -1;
    b->local[v->id] = k;
    return k;
}

/* The local index of a value a node or output of b->g reads; an outer
 * value becomes a capture on first use. */
static int read_value(sg_build *b, const kn_value *v, int32_t *out)
{
    if (b->local[v->id] >= 0) {
        *out = b->local[v->id];
        return KN_OK;
    }
    if (v->graph == b->g)
        return kn_error(KN_ERR_INVALID, "graph '%s': value '%s' is read before it is computed", b->g->name, v->name);
    *out = add_value(b, v);
    b->captures[b->sg->n_captures++] = *out;
    return KN_OK;
}

static int convert_node(sg_build *b, const kn_node *n, kn_sg_node *out)
{
    if (n->op == KN_OP_UNKNOWN || !kn_op_exec(n->op))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "(inside graph '%s') has no runtime kernel, so the cpu backend "
                                                    "cannot run it in a subgraph", b->g->name);
    int32_t *ins = pool_alloc(b->pool, (size_t)n->n_inputs, sizeof *ins);
    int32_t *outs = pool_alloc(b->pool, (size_t)n->n_outputs, sizeof *outs);
    if (!ins || !outs) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n->n_inputs; i++) {
        ins[i] = -1;
        int st = n->inputs[i] ? read_value(b, n->inputs[i], &ins[i]) : KN_OK;
        if (st) return st;
    }
    kn_attr *attrs = NULL;
    int st = convert_attrs(b->pool, n, &attrs);
    if (st) return st;
    for (int i = 0; i < n->n_outputs; i++) outs[i] = n->outputs[i] ? add_value(b, n->outputs[i]) : -1;
    out->desc = (kn_opdesc){.op = n->op, .name = n->name, .op_type = n->op_type, .domain = n->domain,
                            .opset = kn_node_opset(n), .n_inputs = n->n_inputs, .n_outputs = n->n_outputs,
                            .attrs = attrs, .n_attrs = n->n_attrs};
    out->inputs = ins;
    out->outputs = outs;
    return KN_OK;
}

/* Inputs and initializers (constants), in that order; an initializer that
 * is also a formal input is an input (the caller may override it). */
static int add_inputs_and_consts(sg_build *b)
{
    const kn_graph *g = b->g;
    kn_sg *sg = b->sg;
    int32_t *inputs = pool_alloc(b->pool, (size_t)g->n_inputs, sizeof *inputs);
    int32_t *cids = pool_alloc(b->pool, (size_t)g->n_values, sizeof *cids);
    const kn_tensor **consts = pool_alloc(b->pool, (size_t)g->n_values, sizeof *consts);
    if (!inputs || !cids || !consts) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_inputs; i++) inputs[i] = add_value(b, g->inputs[i]);
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (!v->const_data || b->local[v->id] >= 0) continue;
        cids[sg->n_consts] = add_value(b, v);
        consts[sg->n_consts++] = v->const_data;
    }
    sg->n_inputs = g->n_inputs;
    sg->inputs = inputs;
    sg->const_ids = cids;
    sg->consts = consts;
    return KN_OK;
}

static int convert_graph(kn_cg_sgpool *pool, const kn_graph *g, const kn_sg **out)
{
    int nids = g->model->n_value_ids, n_refs = g->n_outputs;
    for (int k = 0; k < g->n_nodes; k++) n_refs += g->nodes[k]->n_inputs;
    sg_build b = {.pool = pool, .g = g, .sg = pool_alloc(pool, 1, sizeof(kn_sg)),
                  .local = pool_alloc(pool, (size_t)nids, sizeof(int)),
                  /* at most: every value of g, and one capture per read */
                  .values = pool_alloc(pool, (size_t)(g->n_values + n_refs), sizeof(kn_sg_value)),
                  .captures = pool_alloc(pool, (size_t)n_refs, sizeof(int32_t))};
    kn_sg_node *nodes = pool_alloc(pool, (size_t)g->n_nodes, sizeof *nodes);
    int32_t *outputs = pool_alloc(pool, (size_t)g->n_outputs, sizeof *outputs);
    if (!b.sg || !b.local || !b.values || !b.captures || !nodes || !outputs)
        return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nids; i++) b.local[i] = -1;
    b.sg->name = g->name;
    int st = add_inputs_and_consts(&b);
    for (int k = 0; k < g->n_nodes && !st; k++) st = convert_node(&b, g->nodes[k], &nodes[k]);
    for (int i = 0; i < g->n_outputs && !st; i++) st = read_value(&b, g->outputs[i], &outputs[i]);
    if (st) return st;
    b.sg->values = b.values;
    b.sg->captures = b.captures;
    b.sg->n_nodes = g->n_nodes;
    b.sg->nodes = nodes;
    b.sg->n_outputs = g->n_outputs;
    b.sg->outputs = outputs;
    *out = b.sg;
    return KN_OK;
}

static int convert_attrs(kn_cg_sgpool *pool, const kn_node *n, kn_attr **out_attrs)
{
    kn_attr *attrs = pool_alloc(pool, (size_t)n->n_attrs, sizeof *attrs);
    if (!attrs) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int a = 0; a < n->n_attrs; a++) {
        attrs[a] = n->attrs[a];
        if (attrs[a].kind == KN_ATTR_GRAPHS)
            return kn_node_error(n, KN_ERR_UNSUPPORTED, "attribute '%s': graph lists are not supported by the cpu "
                                                        "backend", attrs[a].name);
        if (attrs[a].kind != KN_ATTR_GRAPH) continue;
        if (!attrs[a].g) return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' holds no graph", attrs[a].name);
        int st = convert_graph(pool, attrs[a].g, &attrs[a].sg);
        if (st) return st;
    }
    *out_attrs = attrs;
    return KN_OK;
}

int kn_cg_sg_attrs(const kn_node *n, kn_attr **out_attrs, kn_cg_sgpool **out_pool)
{
    *out_attrs = NULL;
    *out_pool = calloc(1, sizeof **out_pool);
    if (!*out_pool) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = convert_attrs(*out_pool, n, out_attrs);
    if (st) {
        kn_cg_sg_free(*out_pool);
        *out_pool = NULL;
        *out_attrs = NULL;
    }
    return st;
}
