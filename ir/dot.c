/* Graphviz DOT writer for a model (`kiln inspect --dot`): ops as boxes,
 * graph inputs, constants and outputs styled apart, edges labeled with the
 * type of the value they carry, and If/Loop/Scan bodies as nested clusters.
 * Graphviz ids are derived from node/value ids, never from names, so any
 * name (quotes, backslashes, UTF-8) is safe: names only appear in labels. */
#include <inttypes.h>
#include <string.h>

#include "text.h"

/* Two passes over the same traversal: the first declares nodes inside their
 * clusters, the second writes every edge at the top level, because an edge
 * written inside a cluster would pull an outer node into that cluster. */
typedef struct dotw {
    FILE *f;
    int n_graphs; /* numbering for cluster and output ids; reset per pass */
    bool edges;   /* second pass */
} dotw;

static void dot_graph(dotw *d, const kn_graph *g, int depth);

/* Writes s escaped for a double-quoted DOT string. */
static void esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c < 0x20 || c == 0x7f) fputc(' ', f);
        else fputc(c, f);
    }
}

static void type_str(const kn_value *v, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "%s", v->dtype ? kn_dtype_name(v->dtype) : "?");
    if (v->shape.rank < 0 || k >= len) return;
    k += (size_t)snprintf(buf + k, len - k, "[");
    for (int i = 0; i < v->shape.rank && i < KN_MAX_RANK && k < len; i++) {
        const char *sep = i ? "," : "";
        if (v->shape.dims[i] >= 0) k += (size_t)snprintf(buf + k, len - k, "%s%" PRId64, sep, v->shape.dims[i]);
        else if (v->shape.sym[i]) k += (size_t)snprintf(buf + k, len - k, "%s%s", sep, v->shape.sym[i]);
        else k += (size_t)snprintf(buf + k, len - k, "%s?", sep);
    }
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* The DOT id of the graph node a value's edges start from. */
static void src_id(const kn_value *v, char *buf, size_t len)
{
    if (v->producer) snprintf(buf, len, "n%d", v->producer->id);
    else snprintf(buf, len, "v%d", v->id);
}

static void indent(dotw *d, int depth) { fprintf(d->f, "%*s", 2 + depth * 2, ""); }

static void value_decl(dotw *d, const kn_value *v, int depth, const char *style)
{
    if (d->edges) return;
    char ty[256];
    type_str(v, ty, sizeof ty);
    indent(d, depth);
    fprintf(d->f, "v%d [label=\"", v->id);
    esc(d->f, v->name);
    fputs("\\n", d->f);
    esc(d->f, ty);
    fprintf(d->f, "\", %s];\n", style);
}

static void edge(dotw *d, const kn_value *v, const char *to)
{
    if (!d->edges) return;
    char from[32], ty[256];
    src_id(v, from, sizeof from);
    type_str(v, ty, sizeof ty);
    indent(d, 0);
    fprintf(d->f, "%s -> %s [label=\"", from, to);
    esc(d->f, ty);
    fputs("\"];\n", d->f);
}

static bool is_graph_input(const kn_graph *g, const kn_value *v)
{
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == v) return true;
    return false;
}

static void dot_subgraphs(dotw *d, const kn_node *n, int depth)
{
    for (int i = 0; i < n->n_attrs; i++) {
        const kn_attr *a = &n->attrs[i];
        int ng = a->kind == KN_ATTR_GRAPH ? (a->g != NULL) : a->kind == KN_ATTR_GRAPHS ? a->n : 0;
        for (int j = 0; j < ng; j++) {
            const kn_graph *sub = a->kind == KN_ATTR_GRAPH ? a->g : a->graphs[j];
            if (!sub) continue;
            if (d->edges) {
                dot_graph(d, sub, depth + 1);
                continue;
            }
            indent(d, depth);
            fprintf(d->f, "subgraph cluster_%d {\n", d->n_graphs);
            indent(d, depth + 1);
            fputs("label=\"", d->f);
            esc(d->f, n->op_type);
            fputs(" '", d->f);
            esc(d->f, n->name);
            fputs("': ", d->f);
            esc(d->f, a->name);
            fputs("\"; style=dashed;\n", d->f);
            dot_graph(d, sub, depth + 1);
            indent(d, depth);
            fputs("}\n", d->f);
        }
    }
}

static void dot_node(dotw *d, const kn_node *n, int depth)
{
    if (!d->edges) {
        indent(d, depth);
        fprintf(d->f, "n%d [label=\"", n->id);
        if (n->domain && *n->domain) {
            esc(d->f, n->domain);
            fputs("::", d->f);
        }
        esc(d->f, n->op_type);
        fputs("\\n", d->f);
        esc(d->f, n->name);
        fputs("\"];\n", d->f);
    }
    char to[32];
    snprintf(to, sizeof to, "n%d", n->id);
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i]) edge(d, n->inputs[i], to);
    dot_subgraphs(d, n, depth);
}

/* Declares g's inputs, constants, nodes and outputs at the given depth. */
static void dot_graph(dotw *d, const kn_graph *g, int depth)
{
    int gid = d->n_graphs++;
    for (int i = 0; i < g->n_inputs; i++)
        value_decl(d, g->inputs[i], depth, "shape=ellipse, style=filled, fillcolor=\"#cfe2ff\"");
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (v->const_data && !v->producer && !is_graph_input(g, v))
            value_decl(d, v, depth, "shape=note, style=filled, fillcolor=\"#eeeeee\", fontsize=10");
    }
    for (int k = 0; k < g->n_nodes; k++) dot_node(d, g->nodes[k], depth);
    for (int i = 0; i < g->n_outputs; i++) {
        char to[48];
        snprintf(to, sizeof to, "out%d_%d", gid, i);
        if (!d->edges) {
            indent(d, depth);
            fprintf(d->f, "%s [label=\"", to);
            esc(d->f, g->outputs[i]->name);
            fputs("\", shape=ellipse, style=filled, fillcolor=\"#ffd6d6\"];\n", d->f);
        }
        edge(d, g->outputs[i], to);
    }
}

int kn_ir_write_dot(const kn_model *m, FILE *f)
{
    if (!m || !m->graph) return kn_error(KN_ERR_INVALID, "kn_ir_write_dot: no model");
    dotw d = {f, 0, false};
    fputs("digraph \"", f);
    esc(f, m->graph->name);
    fputs("\" {\n  rankdir=TB;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n"
          "  edge [fontname=\"Helvetica\", fontsize=9];\n", f);
    dot_graph(&d, m->graph, 0);
    d.n_graphs = 0;
    d.edges = true;
    dot_graph(&d, m->graph, 0);
    fputs("}\n", f);
    if (fflush(f) || ferror(f)) return kn_error(KN_ERR_IO, "writing DOT output failed");
    return KN_OK;
}
