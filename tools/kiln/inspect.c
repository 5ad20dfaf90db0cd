/* `kiln inspect`: what a model is — opsets, I/O, op histogram, parameters,
 * an estimate of its FLOPs — and optionally its graph as Graphviz DOT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "eval.h"
#include "onnx_import.h"
#include "pass.h"
#include "text.h"

static void inspect_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln inspect MODEL.onnx [--dot FILE]\n"
            "\n"
            "Prints the model's opset imports, inputs and outputs with shapes, a histogram of\n"
            "its ops (unsupported ones marked), parameter count and bytes, and an estimate\n"
            "of the floating-point operations of one run (multiply-add = 2).\n"
            "\n"
            "  --dot FILE   also write the graph in Graphviz DOT format\n");
}

static void print_type(const kn_value *v)
{
    printf("%s[", kn_dtype_name(v->dtype));
    if (v->shape.rank < 0) printf("?");
    for (int i = 0; i < v->shape.rank; i++) {
        if (i) printf(",");
        if (v->shape.dims[i] >= 0) printf("%lld", (long long)v->shape.dims[i]);
        else printf("%s", v->shape.sym[i] ? v->shape.sym[i] : "?");
    }
    printf("]");
}

typedef struct op_count {
    const char *name;
    const char *domain;
    int count;
    bool supported;
} op_count;

static int count_ops(const kn_graph *g, op_count *hist, int n)
{
    for (int k = 0; k < g->n_nodes; k++) {
        const kn_node *node = g->nodes[k];
        int j = 0;
        while (j < n && (strcmp(hist[j].name, node->op_type) || strcmp(hist[j].domain, node->domain))) j++;
        if (j == n) {
            const kn_op_info *oi = node->op ? kn_op_get(node->op) : NULL;
            /* onnxruntime's transformer contrib ops have no kernels but run
             * as the standard ops normalize-msft makes of them */
            bool ok = oi && (kn_op_runnable(oi->op) || kn_pass_normalize_msft_rewrites(oi->op));
            hist[n++] = (op_count){node->op_type, node->domain, 0, ok};
        }
        hist[j].count++;
        for (int a = 0; a < node->n_attrs; a++) {
            const kn_attr *at = &node->attrs[a];
            if (at->kind == KN_ATTR_GRAPH && at->g) n = count_ops(at->g, hist, n);
            for (int s = 0; at->kind == KN_ATTR_GRAPHS && s < at->n; s++) n = count_ops(at->graphs[s], hist, n);
        }
    }
    return n;
}

static int count_nodes(const kn_graph *g)
{
    int n = g->n_nodes;
    for (int k = 0; k < g->n_nodes; k++)
        for (int a = 0; a < g->nodes[k]->n_attrs; a++) {
            const kn_attr *at = &g->nodes[k]->attrs[a];
            if (at->kind == KN_ATTR_GRAPH && at->g) n += count_nodes(at->g);
            for (int s = 0; at->kind == KN_ATTR_GRAPHS && s < at->n; s++) n += count_nodes(at->graphs[s]);
        }
    return n;
}

static int cmp_count(const void *a, const void *b)
{
    const op_count *x = a, *y = b;
    if (x->count != y->count) return y->count - x->count;
    return strcmp(x->name, y->name);
}

/* FLOPs of one run; -1 if some node's shapes stay unknown. A model with
 * symbolic input dims (batch, sequence) is counted with each set to 1, on a
 * second copy so the first keeps its symbolic shapes for display. */
static double count_flops(const char *path, const kn_graph *g, bool *out_pinned)
{
    *out_pinned = false;
    kn_model *m2 = NULL;
    const kn_graph *gg = g;
    for (int i = 0; i < g->n_inputs && !*out_pinned; i++)
        for (int d = 0; d < g->inputs[i]->shape.rank; d++)
            if (g->inputs[i]->shape.dims[d] < 0) *out_pinned = true;
    if (*out_pinned) {
        if (kn_cli_load_model(path, false, &m2)) return -1;
        for (int i = 0; i < m2->graph->n_inputs; i++) {
            kn_shape *s = &m2->graph->inputs[i]->shape;
            for (int d = 0; d < s->rank; d++)
                if (s->dims[d] < 0) s->dims[d] = 1, s->sym[d] = NULL;
        }
        /* value_info may still carry symbolic dims: clear the rest so
         * inference recomputes them from the pinned inputs */
        for (int v = 0; v < m2->graph->n_values; v++) {
            kn_value *val = m2->graph->values[v];
            if (val->producer) val->shape = kn_shape_unknown();
        }
        if (kn_graph_infer(m2->graph)) {
            kn_model_free(m2);
            return -1;
        }
        gg = m2->graph;
    }
    double flops = 0;
    for (int k = 0; k < gg->n_nodes && flops >= 0; k++) {
        double f = kn_node_flops(gg->nodes[k]);
        flops = f < 0 ? -1 : flops + f;
    }
    kn_model_free(m2);
    return flops;
}

int kn_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL, *dot = NULL;
    for (int i = 1; i < argc; i++) {
        if (kn_cli_is_help(argv[i])) {
            inspect_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--dot")) {
            if (!kn_cli_needs_value("inspect", i, argc, argv)) return 2;
            dot = argv[++i];
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr, "kiln inspect: unexpected argument '%s'\n", argv[i]);
            inspect_usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        inspect_usage(stderr);
        return 2;
    }
    kn_cli_file files[2] = {{"MODEL", path, false}, {"--dot", dot, true}};
    if (kn_cli_check_distinct(files, 2)) {
        kn_cli_report(NULL);
        return 2;
    }
    kn_model *m = NULL;
    if (kn_cli_load_model(path, false, &m)) {
        kn_cli_report(NULL);
        return 1;
    }
    kn_graph *g = m->graph;
    bool inferred = kn_graph_infer(g) == KN_OK;
    if (!inferred) fprintf(stderr, "kiln inspect: warning: shape inference stopped: %s\n", kn_last_error());

    printf("model: %s\n", path);
    printf("ir_version: %lld   producer: %s %s\n", (long long)m->ir_version,
           m->producer_name ? m->producer_name : "?", m->producer_version ? m->producer_version : "");
    printf("opsets:");
    for (int i = 0; i < m->n_opsets; i++)
        printf(" %s=%lld", m->opsets[i].domain[0] ? m->opsets[i].domain : "ai.onnx", (long long)m->opsets[i].version);
    printf("\n\ninputs:\n");
    for (int i = 0; i < g->n_inputs; i++) {
        if (g->inputs[i]->const_data) continue;
        printf("  %-24s ", g->inputs[i]->name);
        print_type(g->inputs[i]);
        printf("\n");
    }
    printf("outputs:\n");
    for (int i = 0; i < g->n_outputs; i++) {
        printf("  %-24s ", g->outputs[i]->name);
        print_type(g->outputs[i]);
        printf("\n");
    }

    int total_nodes = count_nodes(g);
    op_count *hist = calloc((size_t)total_nodes + 1, sizeof *hist);
    int n_hist = hist ? count_ops(g, hist, 0) : 0;
    qsort(hist, (size_t)n_hist, sizeof *hist, cmp_count);
    printf("\nops: %d nodes, %d distinct\n", total_nodes, n_hist);
    int unsupported = 0;
    for (int i = 0; i < n_hist; i++) {
        printf("  %6d  %s%s%s%s\n", hist[i].count, hist[i].domain[0] ? hist[i].domain : "",
               hist[i].domain[0] ? "." : "", hist[i].name, hist[i].supported ? "" : "   (unsupported)");
        if (!hist[i].supported) unsupported++;
    }
    free(hist);

    int64_t params = 0, bytes = 0;
    int tensors = 0;
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (!(v->flags & KN_VALUE_INITIALIZER) || !v->const_data) continue;
        tensors++;
        params += kn_tensor_numel(v->const_data);
        bytes += (int64_t)v->const_data->nbytes;
    }
    printf("\nparameters: %lld in %d tensors, %.2f MB\n", (long long)params, tensors, (double)bytes / 1e6);

    bool pinned = false;
    double flops = count_flops(path, g, &pinned);
    if (flops >= 0)
        printf("FLOPs: %.4g (%.3f GFLOP)%s\n", flops, flops / 1e9,
               pinned ? " per run with every symbolic input dim set to 1" : "");
    else
        printf("FLOPs: unknown (shapes could not be inferred)\n");
    if (unsupported) printf("\n%d op type(s) are not supported yet: `kiln run` will refuse this model\n", unsupported);

    int rc = 0;
    if (dot) {
        char *tmp;
        FILE *f;
        int st = kn_cli_create_beside(dot, &tmp, &f);
        if (!st) {
            bool ok = kn_ir_write_dot(m, f) == KN_OK;
            st = kn_cli_commit_file(tmp, f, dot, ok);
        }
        if (st) {
            kn_cli_report("--dot");
            rc = 1;
        } else {
            printf("graph written to %s\n", dot);
        }
    }
    kn_model_free(m);
    return rc;
}
