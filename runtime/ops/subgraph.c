/*
 * runtime/ops/subgraph.c — checking and running graphs in the runtime's
 * form (kn_sg, see subgraph.h).
 */
#include "subgraph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checks --------------------------------------------------------------- */

typedef struct sg_checker {
    const kn_sg *g;
    unsigned char *defined; /* per value */
    const char *what;
} sg_checker;

static int bad(const sg_checker *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const sg_checker *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kn_error(KN_ERR_INVALID, "%s: graph '%.100s': %s", c->what, c->g->name ? c->g->name : "?", msg);
}

/* Marks value index v defined (once) by `by`. */
static int define(sg_checker *c, int32_t v, const char *by)
{
    if (v < 0 || v >= c->g->n_values) return bad(c, "%s names value %d of %d", by, (int)v, c->g->n_values);
    if (c->defined[v]) return bad(c, "%s defines value %d twice", by, (int)v);
    c->defined[v] = 1;
    return KN_OK;
}

static int check_node(sg_checker *c, int k, int depth)
{
    const kn_sg_node *n = &c->g->nodes[k];
    char by[160];
    snprintf(by, sizeof by, "node %d ('%.100s')", k, n->desc.name ? n->desc.name : "?");
    if (n->desc.op <= KN_OP_UNKNOWN || n->desc.op >= KN_OP_COUNT || !kn_op_exec(n->desc.op))
        return bad(c, "%s: op '%s' has no runtime kernel", by, n->desc.op_type ? n->desc.op_type : "?");
    if (kn_op_check_arity(&n->desc)) return bad(c, "%s", kn_last_error());
    for (int i = 0; i < n->desc.n_inputs; i++) {
        int32_t v = n->inputs[i];
        if (v == -1) continue;
        if (v < -1 || v >= c->g->n_values) return bad(c, "%s reads value %d of %d", by, (int)v, c->g->n_values);
        if (!c->defined[v]) return bad(c, "%s reads value %d before it is defined", by, (int)v);
    }
    for (int a = 0; a < n->desc.n_attrs; a++) {
        const kn_attr *at = &n->desc.attrs[a];
        if (at->kind != KN_ATTR_GRAPH) continue;
        if (!at->sg) return bad(c, "%s: graph attribute '%s' holds no graph", by, at->name);
        int st = kn_sg_check(at->sg, depth + 1, c->what);
        if (st) return st;
    }
    for (int i = 0; i < n->desc.n_outputs; i++) {
        if (n->outputs[i] == -1) continue;
        int st = define(c, n->outputs[i], by);
        if (st) return st;
    }
    return KN_OK;
}

static int check_all(sg_checker *c, int depth)
{
    const kn_sg *g = c->g;
    int st = KN_OK;
    for (int i = 0; i < g->n_inputs && !st; i++) st = define(c, g->inputs[i], "a graph input");
    for (int i = 0; i < g->n_consts && !st; i++) st = define(c, g->const_ids[i], "a constant");
    for (int i = 0; i < g->n_captures && !st; i++) st = define(c, g->captures[i], "a capture");
    for (int k = 0; k < g->n_nodes && !st; k++) st = check_node(c, k, depth);
    for (int i = 0; i < g->n_outputs && !st; i++) {
        int32_t v = g->outputs[i];
        if (v < 0 || v >= g->n_values || !c->defined[v])
            st = bad(c, "output %d is value %d, which is not defined", i, (int)v);
    }
    return st;
}

int kn_sg_check(const kn_sg *g, int depth, const char *what)
{
    if (!g) return kn_error(KN_ERR_INVALID, "%s: no graph", what);
    if (depth > KN_SG_MAX_DEPTH)
        return kn_error(KN_ERR_INVALID, "%s: graphs nested more than %d deep", what, KN_SG_MAX_DEPTH);
    sg_checker c = {.g = g, .what = what, .defined = calloc((size_t)g->n_values + 1, 1)};
    if (!c.defined) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = check_all(&c, depth);
    free(c.defined);
    return st;
}

/* ---- running ------------------------------------------------------------- */

typedef struct sg_frame {
    const kn_sg *g;
    kn_tensor *env;           /* per value */
    const char **names;       /* per value, for the scope */
    const kn_tensor **ptrs;   /* per value: &env[i] once defined, else NULL */
    kn_sg_scope scope;        /* what nested graphs see: this frame, then outer */
} sg_frame;

static const kn_tensor *scope_find(const kn_sg_scope *s, const char *name)
{
    for (; s; s = s->parent)
        for (int i = s->n - 1; i >= 0; i--)
            if (s->tensors[i] && s->names[i] && !strcmp(s->names[i], name)) return s->tensors[i];
    return NULL;
}

static void bind_view(sg_frame *f, int32_t v, const kn_tensor *t)
{
    f->env[v] = *t;
    f->env[v].own = KN_BORROWED;
    f->ptrs[v] = &f->env[v];
}

static int bind_all(sg_frame *f, const kn_sg_scope *outer, const kn_tensor *const *in)
{
    const kn_sg *g = f->g;
    for (int i = 0; i < g->n_inputs; i++) {
        if (!in[i]) return kn_error(KN_ERR_INVALID, "graph '%s': input %d is missing", g->name, i);
        bind_view(f, g->inputs[i], in[i]);
    }
    for (int i = 0; i < g->n_consts; i++) bind_view(f, g->const_ids[i], g->consts[i]);
    for (int i = 0; i < g->n_captures; i++) {
        const char *name = g->values[g->captures[i]].name;
        const kn_tensor *t = name ? scope_find(outer, name) : NULL;
        if (!t)
            return kn_error(KN_ERR_INVALID, "graph '%s': outer-scope value '%s' is not available", g->name,
                            name ? name : "?");
        bind_view(f, g->captures[i], t);
    }
    return KN_OK;
}

static int run_node(sg_frame *f, const kn_sg_node *n)
{
    const kn_tensor *in_stack[16];
    kn_tensor out_stack[8];
    int ni = n->desc.n_inputs, no = n->desc.n_outputs;
    const kn_tensor **in = ni <= 16 ? in_stack : calloc((size_t)ni, sizeof *in);
    kn_tensor *out = no <= 8 ? out_stack : calloc((size_t)no, sizeof *out);
    int st = in && out ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) {
        memset(out, 0, sizeof *out * (size_t)(no <= 8 ? 8 : no));
        for (int i = 0; i < ni; i++) in[i] = n->inputs[i] >= 0 ? f->ptrs[n->inputs[i]] : NULL;
        kn_body_runner body = kn_sg_body_runner(&f->scope);
        kn_opdesc d = n->desc;
        d.body = &body;
        st = kn_op_exec(d.op)(&d, in, out);
    }
    for (int i = 0; out && i < no; i++) {
        int32_t v = n->outputs[i];
        if (st || v < 0) {
            kn_tensor_free(&out[i]);
            continue;
        }
        f->env[v] = out[i];
        f->ptrs[v] = &f->env[v];
    }
    if (in != in_stack) free(in);
    if (out != out_stack) free(out);
    return st;
}

/* Moves (or copies, if borrowed or listed again later) the outputs out. */
static int take_outputs(sg_frame *f, kn_tensor *out)
{
    const kn_sg *g = f->g;
    for (int k = 0; k < g->n_outputs; k++) {
        int32_t v = g->outputs[k];
        bool again = false;
        for (int j = k + 1; j < g->n_outputs && !again; j++) again = g->outputs[j] == v;
        if (f->env[v].own == KN_OWNED && !again) {
            out[k] = f->env[v];
            memset(&f->env[v], 0, sizeof f->env[v]);
            f->ptrs[v] = NULL;
            continue;
        }
        int st = kn_tensor_copy(&out[k], &f->env[v]);
        if (st) return st;
    }
    return KN_OK;
}

int kn_sg_run(const kn_sg *g, const kn_sg_scope *outer, int n_in, const kn_tensor *const *in, int n_out,
              kn_tensor *out)
{
    for (int k = 0; k < n_out; k++) memset(&out[k], 0, sizeof out[k]);
    if (n_in != g->n_inputs || n_out != g->n_outputs)
        return kn_error(KN_ERR_INVALID, "graph '%s' takes %d inputs and gives %d outputs, not %d and %d", g->name,
                        g->n_inputs, g->n_outputs, n_in, n_out);
    size_t nv = (size_t)g->n_values + 1;
    sg_frame f = {.g = g, .env = calloc(nv, sizeof *f.env), .names = calloc(nv, sizeof *f.names),
                  .ptrs = calloc(nv, sizeof *f.ptrs)};
    int st = f.env && f.names && f.ptrs ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) {
        for (int i = 0; i < g->n_values; i++) f.names[i] = g->values[i].name;
        f.scope = (kn_sg_scope){.parent = outer, .n = g->n_values, .names = f.names, .tensors = f.ptrs};
        st = bind_all(&f, outer, in);
    }
    for (int k = 0; !st && k < g->n_nodes; k++) {
        st = run_node(&f, &g->nodes[k]);
        if (st) kn_error_prefix("graph '%s': ", g->name);
    }
    if (!st) st = take_outputs(&f, out);
    if (st)
        for (int k = 0; k < n_out; k++) kn_tensor_free(&out[k]);
    for (int i = 0; f.env && i < g->n_values; i++) kn_tensor_free(&f.env[i]);
    free(f.env), free(f.names), free(f.ptrs);
    return st;
}

/* ---- the body runner of compiled artifacts --------------------------------- */

static int sg_body_run(void *ctx, const kn_attr *g, int n_in, const kn_tensor *const *in, int n_out, kn_tensor *out)
{
    if (!g || g->kind != KN_ATTR_GRAPH || !g->sg)
        return kn_error(KN_ERR_INVALID, "attribute '%s' holds no graph", g ? g->name : "?");
    return kn_sg_run(g->sg, ctx, n_in, in, n_out, out);
}

static kn_dtype sg_output_dtype(void *ctx, const kn_attr *g, int i)
{
    (void)ctx;
    if (!g || !g->sg || i < 0 || i >= g->sg->n_outputs) return KN_DT_UNDEFINED;
    return g->sg->values[g->sg->outputs[i]].dtype;
}

kn_body_runner kn_sg_body_runner(const kn_sg_scope *outer)
{
    return (kn_body_runner){.run = sg_body_run, .output_dtype = sg_output_dtype, .ctx = (void *)outer};
}
