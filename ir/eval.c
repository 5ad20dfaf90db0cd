/* The reference evaluator: runs a graph node by node (see eval.h). */
#include "eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kn_eval_ctx {
    kn_model *m;
    kn_tensor *env;     /* indexed by value id */
    unsigned check_infer;
};

/* ---- helpers for op definitions ---------------------------------------- */

int kn_infer_same_as_input(kn_node *n, int j)
{
    kn_value *in = kn_node_input(n, j);
    if (!in) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", j);
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i]) kn_infer_set_shape(n, i, in->dtype, &in->shape);
    return KN_OK;
}

void kn_infer_set(kn_node *n, int i, kn_dtype dt, int rank, const int64_t *dims)
{
    if (i >= n->n_outputs || !n->outputs[i]) return;
    n->outputs[i]->dtype = dt;
    kn_shape_set(&n->outputs[i]->shape, rank, dims);
}

void kn_infer_set_shape(kn_node *n, int i, kn_dtype dt, const kn_shape *s)
{
    if (i >= n->n_outputs || !n->outputs[i]) return;
    n->outputs[i]->dtype = dt;
    n->outputs[i]->shape = *s;
}

int kn_tensor_read_ints(const kn_tensor *t, int64_t *out, int max)
{
    if (!kn_dtype_info(t->dtype)->is_integer && t->dtype != KN_BOOL) {
        kn_error(KN_ERR_INVALID, "expected an integer tensor, got %s", kn_dtype_name(t->dtype));
        return -1;
    }
    int64_t n = kn_tensor_numel(t);
    if (n > max) {
        kn_error(KN_ERR_INVALID, "integer tensor has %lld elements, at most %d expected", (long long)n, max);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) out[i] = kn_load_i64(t->dtype, t->data, (size_t)i);
    return (int)n;
}

double kn_tensor_scalar_f64(const kn_tensor *t)
{
    if (kn_tensor_numel(t) < 1) return 0.0;
    return kn_load_f64(t->dtype, t->data, 0);
}

/* ---- one node ------------------------------------------------------------ */

bool kn_op_runnable(kn_op op)
{
    if (op == KN_OP_UNKNOWN) return false;
    return kn_op_exec(op) != NULL;
}

void kn_node_opdesc(const kn_node *n, kn_opdesc *out, bool *has_output)
{
    for (int i = 0; i < n->n_outputs; i++) has_output[i] = n->outputs[i] != NULL;
    *out = (kn_opdesc){
        .op = n->op,
        .name = n->name,
        .op_type = n->op_type,
        .domain = n->domain,
        .opset = kn_node_opset(n),
        .n_inputs = n->n_inputs,
        .n_outputs = n->n_outputs,
        .has_output = has_output,
        .attrs = n->attrs,
        .n_attrs = n->n_attrs,
    };
}

int kn_node_need_inputs(const kn_node *n, int k)
{
    for (int i = 0; i < k; i++)
        if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

int kn_node_prepare(const kn_node *n, int k, int max_out, kn_opdesc *d, bool *has_output)
{
    if (n->n_outputs > max_out)
        return kn_node_error(n, KN_ERR_INVALID, "has %d outputs, at most %d allowed", n->n_outputs, max_out);
    int st = kn_node_need_inputs(n, k);
    if (st) return st;
    kn_node_opdesc(n, d, has_output);
    return KN_OK;
}

/* The body runner of control-flow ops in the evaluator: IR subgraphs, whose
 * outer-scope values resolve to the tensors of the enclosing evaluation. */
static int ir_body_run(void *ctx, const kn_attr *g, int n_in, const kn_tensor *const *in, int n_out, kn_tensor *out)
{
    if (!g || g->kind != KN_ATTR_GRAPH || !g->g)
        return kn_error(KN_ERR_INVALID, "attribute '%s' holds no graph", g ? g->name : "?");
    if (n_out != g->g->n_outputs)
        return kn_error(KN_ERR_INVALID, "graph '%s' gives %d outputs, the node expects %d", g->g->name,
                        g->g->n_outputs, n_out);
    return kn_eval_subgraph(ctx, g->g, n_in, in, out);
}

static kn_dtype ir_output_dtype(void *ctx, const kn_attr *g, int i)
{
    (void)ctx;
    if (!g || !g->g || i < 0 || i >= g->g->n_outputs) return KN_DT_UNDEFINED;
    return g->g->outputs[i]->dtype;
}

int kn_node_eval(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    kn_exec_fn exec = kn_op_exec(n->op);
    if (!exec)
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "op %s%s%s is not supported by the reference evaluator",
                             n->domain[0] ? n->domain : "", n->domain[0] ? "." : "", n->op_type);
    bool stack_has[16];
    bool *has = n->n_outputs <= 16 ? stack_has : malloc(sizeof *has * (size_t)n->n_outputs);
    if (!has) return kn_error(KN_ERR_NOMEM, "out of memory");
    kn_opdesc d;
    kn_node_opdesc(n, &d, has);
    kn_body_runner body = {.run = ir_body_run, .output_dtype = ir_output_dtype, .ctx = ctx};
    if (ctx) d.body = &body;
    int st = exec(&d, in, out);
    if (has != stack_has) free(has);
    return st;
}

/* ---- liveness ------------------------------------------------------------ */

/* Marks, in last_use[v->id], the position k of the last node of g that needs
 * v: as an input, or as an outer-scope value somewhere inside its subgraphs. */
static void mark_uses_in(const kn_graph *sub, const kn_graph *g, int k, int *last_use);

static void mark_node_uses(const kn_node *n, const kn_graph *g, int k, int *last_use)
{
    for (int i = 0; i < n->n_inputs; i++) {
        kn_value *v = n->inputs[i];
        if (v && v->graph == g && last_use[v->id] < k) last_use[v->id] = k;
    }
    for (int a = 0; a < n->n_attrs; a++) {
        const kn_attr *at = &n->attrs[a];
        if (at->kind == KN_ATTR_GRAPH && at->g) mark_uses_in(at->g, g, k, last_use);
        for (int s = 0; at->kind == KN_ATTR_GRAPHS && s < at->n; s++)
            mark_uses_in(at->graphs[s], g, k, last_use);
    }
}

static void mark_uses_in(const kn_graph *sub, const kn_graph *g, int k, int *last_use)
{
    for (int j = 0; j < sub->n_nodes; j++) mark_node_uses(sub->nodes[j], g, k, last_use);
    for (int j = 0; j < sub->n_outputs; j++) {
        kn_value *v = sub->outputs[j];
        if (v && v->graph == g && last_use[v->id] < k) last_use[v->id] = k;
    }
}

/* ---- running a graph ----------------------------------------------------- */

static bool shape_matches(const kn_value *v, const kn_tensor *t)
{
    if (v->dtype != KN_DT_UNDEFINED && v->dtype != t->dtype) return false;
    if (v->shape.rank < 0) return true;
    if (v->shape.rank != t->rank) return false;
    for (int i = 0; i < t->rank; i++)
        if (v->shape.dims[i] >= 0 && v->shape.dims[i] != t->dims[i]) return false;
    return true;
}

static void fmt_value_type(const kn_value *v, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", kn_dtype_name(v->dtype));
    if (v->shape.rank < 0) {
        snprintf(buf + used, len - used, "[?]");
        return;
    }
    used += (size_t)snprintf(buf + used, len - used, "[");
    for (int i = 0; i < v->shape.rank && used < len; i++) {
        if (v->shape.dims[i] >= 0)
            used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "", (long long)v->shape.dims[i]);
        else
            used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "", v->shape.sym[i] ? v->shape.sym[i] : "?");
    }
    if (used < len) snprintf(buf + used, len - used, "]");
}

static int run_node(kn_eval_ctx *ctx, const kn_node *n)
{
    const kn_op_info *oi = n->op != KN_OP_UNKNOWN ? kn_op_get(n->op) : NULL;
    if (!oi || !kn_op_runnable(n->op))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "op %s%s%s is not supported by the reference evaluator",
                             n->domain[0] ? n->domain : "", n->domain[0] ? "." : "", n->op_type);
    if (n->n_inputs < oi->min_inputs || n->n_inputs > oi->max_inputs)
        return kn_node_error(n, KN_ERR_INVALID, "has %d inputs, expected %d to %d", n->n_inputs,
                             oi->min_inputs, oi->max_inputs);
    if (n->n_outputs > oi->max_outputs)
        return kn_node_error(n, KN_ERR_INVALID, "has %d outputs, at most %d allowed", n->n_outputs,
                             oi->max_outputs);
    const kn_tensor *in_stack[16];
    kn_tensor out_stack[8];
    const kn_tensor **in = n->n_inputs <= 16 ? in_stack : calloc((size_t)n->n_inputs, sizeof *in);
    kn_tensor *out = n->n_outputs <= 8 ? out_stack : calloc((size_t)n->n_outputs, sizeof *out);
    if (!in || !out) {
        if (in != in_stack) free(in);
        if (out != out_stack) free(out);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    /* zero every slot so an eval that peeks past n_outputs sees empty tensors */
    memset(out, 0, sizeof *out * (size_t)(n->n_outputs <= 8 ? 8 : n->n_outputs));
    for (int i = 0; i < n->n_inputs; i++) in[i] = n->inputs[i] ? &ctx->env[n->inputs[i]->id] : NULL;
    int st = kn_node_eval(ctx, n, in, out);
    for (int i = 0; st == KN_OK && i < n->n_outputs; i++) {
        kn_value *v = n->outputs[i];
        if (!v) continue;
        if (!out[i].data && kn_tensor_numel(&out[i]) != 0 && out[i].dtype == KN_DT_UNDEFINED) {
            st = kn_node_error(n, KN_ERR_INTERNAL, "output %d was not computed", i);
            break;
        }
        if (ctx->check_infer && !shape_matches(v, &out[i])) {
            char want[256], got[256];
            fmt_value_type(v, want, sizeof want);
            kn_shape_str(out[i].rank, out[i].dims, got, sizeof got);
            st = kn_node_error(n, KN_ERR_INTERNAL, "output '%s': inferred %s but computed %s[%s]", v->name,
                               want, kn_dtype_name(out[i].dtype), got);
        }
    }
    for (int i = 0; i < n->n_outputs; i++) {
        if (st == KN_OK && n->outputs[i]) {
            kn_tensor_free(&ctx->env[n->outputs[i]->id]);
            ctx->env[n->outputs[i]->id] = out[i];
        } else {
            kn_tensor_free(&out[i]);
        }
    }
    if (in != in_stack) free(in);
    if (out != out_stack) free(out);
    return st;
}

static void bind_borrowed(kn_eval_ctx *ctx, const kn_value *v, const kn_tensor *t)
{
    kn_tensor *e = &ctx->env[v->id];
    kn_tensor_free(e);
    *e = *t;
    e->own = KN_BORROWED;
}

/* Runs g's nodes with its inputs already bound; copies outputs into out.
 * Frees every tensor g's own values hold afterwards. */
static int run_graph(kn_eval_ctx *ctx, const kn_graph *g, kn_tensor *out)
{
    int st = KN_OK;
    int nids = ctx->m->n_value_ids;
    int *last_use = malloc(sizeof *last_use * (size_t)(nids ? nids : 1));
    if (!last_use) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < nids; i++) last_use[i] = -1;
    for (int k = 0; k < g->n_nodes; k++) mark_node_uses(g->nodes[k], g, k, last_use);
    for (int i = 0; i < g->n_outputs; i++) last_use[g->outputs[i]->id] = g->n_nodes; /* keep */

    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (v->const_data && !ctx->env[v->id].data && !(v->flags & KN_VALUE_GRAPH_INPUT && ctx->env[v->id].dtype))
            bind_borrowed(ctx, v, v->const_data);
    }
    for (int k = 0; k < g->n_nodes && st == KN_OK; k++) {
        const kn_node *n = g->nodes[k];
        st = run_node(ctx, n);
        if (st) break;
        /* free what no later node needs */
        for (int i = 0; i < n->n_inputs; i++) {
            kn_value *v = n->inputs[i];
            if (v && v->graph == g && last_use[v->id] == k && v->producer) kn_tensor_free(&ctx->env[v->id]);
        }
    }
    for (int i = 0; st == KN_OK && i < g->n_outputs; i++) {
        const kn_value *v = g->outputs[i];
        const kn_tensor *t = &ctx->env[v->id];
        if (t->dtype == KN_DT_UNDEFINED) {
            st = kn_error(KN_ERR_INVALID, "graph '%s': output '%s' was never computed", g->name, v->name);
            break;
        }
        st = kn_tensor_copy(&out[i], t);
    }
    if (st)
        for (int i = 0; i < g->n_outputs; i++) kn_tensor_free(&out[i]);
    for (int i = 0; i < g->n_values; i++) kn_tensor_free(&ctx->env[g->values[i]->id]);
    free(last_use);
    return st;
}

int kn_eval_subgraph(kn_eval_ctx *ctx, const kn_graph *g, int n_in, const kn_tensor *const *in,
                     kn_tensor *out)
{
    if (n_in != g->n_inputs)
        return kn_error(KN_ERR_INVALID, "subgraph '%s' takes %d inputs, %d given", g->name, g->n_inputs, n_in);
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) return kn_error(KN_ERR_INVALID, "subgraph '%s': input %d missing", g->name, i);
        bind_borrowed(ctx, g->inputs[i], in[i]);
    }
    return run_graph(ctx, g, out);
}

int kn_eval_model_opts(kn_model *m, int n_inputs, const char *const *names, const kn_tensor *inputs,
                       kn_tensor *outputs, const kn_eval_options *opts)
{
    kn_graph *g = m->graph;
    for (int i = 0; i < g->n_outputs; i++) memset(&outputs[i], 0, sizeof outputs[i]);
    kn_eval_ctx ctx = {.m = m, .check_infer = opts ? opts->check_infer : 0};
    ctx.env = calloc((size_t)(m->n_value_ids ? m->n_value_ids : 1), sizeof *ctx.env);
    if (!ctx.env) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = KN_OK;
    for (int k = 0; k < n_inputs && st == KN_OK; k++) {
        kn_value *v = kn_graph_lookup_local(g, names[k]);
        if (!v || !(v->flags & KN_VALUE_GRAPH_INPUT)) {
            st = kn_error(KN_ERR_INVALID, "the model has no input named '%s'", names[k]);
            break;
        }
        if (v->dtype != KN_DT_UNDEFINED && v->dtype != inputs[k].dtype) {
            st = kn_error(KN_ERR_INVALID, "input '%s': expected dtype %s, got %s", v->name,
                          kn_dtype_name(v->dtype), kn_dtype_name(inputs[k].dtype));
            break;
        }
        if (v->shape.rank >= 0 && !shape_matches(v, &inputs[k])) {
            char want[256], got[256];
            fmt_value_type(v, want, sizeof want);
            kn_shape_str(inputs[k].rank, inputs[k].dims, got, sizeof got);
            st = kn_error(KN_ERR_INVALID, "input '%s': expected %s, got shape %s", v->name, want, got);
            break;
        }
        bind_borrowed(&ctx, v, &inputs[k]);
    }
    for (int i = 0; st == KN_OK && i < g->n_inputs; i++) {
        const kn_value *v = g->inputs[i];
        if (!ctx.env[v->id].dtype && !v->const_data)
            st = kn_error(KN_ERR_INVALID, "input '%s' was not given", v->name);
    }
    if (st == KN_OK) st = run_graph(&ctx, g, outputs);
    for (int i = 0; i < m->n_value_ids; i++) kn_tensor_free(&ctx.env[i]);
    free(ctx.env);
    return st;
}

int kn_eval_model(kn_model *m, int n_inputs, const char *const *names, const kn_tensor *inputs,
                  kn_tensor *outputs)
{
    return kn_eval_model_opts(m, n_inputs, names, inputs, outputs, NULL);
}
