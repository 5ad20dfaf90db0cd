/*
 * passes/inline_if.c — an If whose condition is known at compile time (a
 * constant, or one computed from pinned shapes, as exported models test the
 * input's size) is replaced by the nodes of the branch it takes. The other
 * branch is dropped unseen: inference never looked at it (ir/ops/control.c),
 * since it may be invalid for these shapes. The inlined nodes then go
 * through every later pass like the rest of the graph, and nothing is left
 * to interpret per node at run time.
 *
 * Branch nodes read outer values directly (ONNX outer-scope references), so
 * their inputs map to themselves; the branch's own values and constants get
 * new values in the enclosing graph, named "<if>/<name>". Each If output
 * becomes an Identity of its branch output (freeze removes it), which keeps
 * the output's name. A branch holding a node with a subgraph of its own
 * stays an If (its subgraph's scope would have to move too).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pass.h"

static bool has_subgraph(const kn_node *n)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].kind == KN_ATTR_GRAPH || n->attrs[i].kind == KN_ATTR_GRAPHS) return true;
    return false;
}

/* A name "<prefix>/<name>" (then "~1", "~2", ...) that g does not define yet. */
static const char *fresh_name(kn_graph *g, const char *prefix, const char *name)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", prefix, name);
    size_t len = strlen(buf);
    for (int k = 1; kn_graph_lookup_local(g, buf) && k < 1000000; k++)
        snprintf(buf + len, sizeof buf - len, "~%d", k);
    return kn_arena_strdup(&g->model->arena, buf);
}

/* Passes a failure of the IR's constructors on, naming the If. */
static int failed(const kn_node *site)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s", kn_last_error());
    return kn_node_error(site, KN_ERR_NOMEM, "inlining its taken branch: %s", msg[0] ? msg : "out of memory");
}

typedef struct inliner {
    kn_graph *g;           /* where the nodes go */
    const kn_node *site;   /* the If */
    kn_value **map;        /* branch value id -> its value in g */
    int n_ids;
} inliner;

/* v's counterpart in g: a branch value's copy, or v itself (outer scope). */
static kn_value *mapped(const inliner *in, kn_value *v)
{
    if (v && v->id >= 0 && v->id < in->n_ids && in->map[v->id]) return in->map[v->id];
    return v;
}

/* The branch's constants (initializers and folded values without producer). */
static int copy_constants(inliner *in, const kn_graph *b)
{
    for (int i = 0; i < b->n_values; i++) {
        kn_value *v = b->values[i];
        if (!v->const_data || v->producer || v->id < 0 || v->id >= in->n_ids) continue;
        kn_value *c = kn_graph_new_value(in->g, fresh_name(in->g, in->site->name, v->name), v->dtype, &v->shape);
        if (!c) return failed(in->site);
        c->const_data = v->const_data; /* model-owned, shared */
        c->flags |= v->flags & KN_VALUE_INITIALIZER;
        in->map[v->id] = c;
    }
    return KN_OK;
}

static int copy_node(inliner *in, const kn_node *bn)
{
    kn_value *ins[64];
    const char *outs[64];
    if (bn->n_inputs > 64 || bn->n_outputs > 64)
        return kn_node_error(bn, KN_ERR_UNSUPPORTED, "more than 64 inputs or outputs in an inlined branch");
    for (int i = 0; i < bn->n_inputs; i++) ins[i] = mapped(in, bn->inputs[i]);
    for (int i = 0; i < bn->n_outputs; i++)
        outs[i] = bn->outputs[i] ? fresh_name(in->g, in->site->name, bn->outputs[i]->name) : NULL;
    char name[512];
    snprintf(name, sizeof name, "%s/%s", in->site->name, bn->name);
    kn_node *n = kn_node_create_named(in->g, bn->op_type, bn->domain, name, bn->n_inputs, ins, bn->n_outputs, outs);
    if (!n) n = kn_node_create_named(in->g, bn->op_type, bn->domain, NULL, bn->n_inputs, ins, bn->n_outputs, outs);
    if (!n) return failed(in->site);
    n->attrs = bn->attrs; /* arena-owned, shared */
    n->n_attrs = bn->n_attrs;
    for (int i = 0; i < bn->n_outputs; i++) {
        kn_value *o = bn->outputs[i];
        if (!o || o->id < 0 || o->id >= in->n_ids) continue;
        n->outputs[i]->dtype = o->dtype;
        n->outputs[i]->shape = o->shape;
        in->map[o->id] = n->outputs[i];
    }
    return KN_OK;
}

/* Each If output becomes Identity(branch output) under the If output's name. */
static int reroute_outputs(inliner *in, kn_node *site, const kn_graph *b)
{
    for (int i = 0; i < site->n_outputs; i++) {
        kn_value *v = site->outputs[i];
        if (!v) continue;
        kn_value *src = mapped(in, b->outputs[i]);
        kn_node *id = kn_node_create(in->g, KN_OP_Identity, NULL, 1, &src, 1);
        if (!id) return failed(site);
        kn_value *r = id->outputs[0];
        r->dtype = v->dtype;
        r->shape = v->shape;
        kn_value_replace_uses(v, r);
        kn_value_swap_names(v, r);
    }
    return KN_OK;
}

static int inline_one(kn_pass_ctx *ctx, kn_graph *g, kn_node *site, const kn_graph *taken, bool *done)
{
    *done = false;
    for (int i = 0; i < taken->n_nodes; i++)
        if (has_subgraph(taken->nodes[i])) {
            kn_pass_remark(ctx, "If '%s': its condition is known, but node '%s' of the branch it takes has a "
                           "subgraph of its own; it stays an If", site->name, taken->nodes[i]->name);
            return KN_OK;
        }
    inliner in = {.g = g, .site = site, .n_ids = g->model->n_value_ids};
    in.map = calloc((size_t)in.n_ids + 1, sizeof *in.map);
    if (!in.map) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_graph_toposort((kn_graph *)taken);
    if (!st) st = copy_constants(&in, taken);
    for (int i = 0; i < taken->n_nodes && !st; i++) st = copy_node(&in, taken->nodes[i]);
    if (!st) st = reroute_outputs(&in, site, taken);
    free(in.map);
    if (st) return st;
    const kn_attr *th = kn_node_attr(site, "then_branch");
    bool then = th && th->g == taken;
    kn_pass_remark(ctx, "If '%s': the condition is %s at compile time; its %s branch (%d nodes) is inlined",
                   site->name, then ? "true" : "false", then ? "then" : "else", taken->n_nodes);
    kn_node_remove(site); /* with its branches' uses of outer values */
    ctx->rewrites++;
    *done = true;
    return KN_OK;
}

int kn_pass_inline_if(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    /* The sites first: inlining changes g->nodes. */
    int n_sites = 0;
    kn_node **sites = calloc((size_t)g->n_nodes + 1, sizeof *sites);
    if (!sites) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++)
        if (kn_if_taken_branch(g->nodes[i])) sites[n_sites++] = g->nodes[i];
    int st = KN_OK;
    for (int i = 0; i < n_sites && !st; i++) {
        bool done;
        st = inline_one(ctx, g, sites[i], kn_if_taken_branch(sites[i]), &done);
        *out_changed |= done;
    }
    free(sites);
    if (st || !*out_changed) return st;
    st = kn_graph_compact_values(g);
    return st ? st : kn_pass_finish(g);
}
