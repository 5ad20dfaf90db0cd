/*
 * runtime/ops/subgraph.h — graphs in the runtime's form (kn_sg): the bodies
 * of If / Loop / Scan as a compiled artifact carries them, without the IR.
 *
 * The compiler (codegen/cpu/subgraph.c) converts each graph attribute of a
 * control-flow node into a kn_sg; kn_attrs_write serializes it inside the
 * node's attribute blob and kn_attrs_read parses it back, bounds-checked
 * (attr_blob.c documents the bytes). kn_sg_run executes one: every node
 * through its runtime kernel (kn_op_exec) on heap tensors, in the recorded
 * (topological) order. That is slow next to generated code, and acceptable
 * for the rare models with control flow; the main graph stays generated.
 *
 * Values are numbered 0..n_values-1 within one graph. Each is defined once:
 * as a formal input, a constant, a capture (a value of an enclosing graph
 * the body reads, found by name in the enclosing scopes when the graph
 * runs), or a node output. Nodes only read values defined before them.
 *
 *     kn_sg_scope outer = {.n = 1, .names = names, .tensors = captured};
 *     kn_tensor out[2] = {0};
 *     if (kn_sg_run(body, &outer, 2, in, 2, out)) ... kn_last_error() ...
 */
#ifndef KILN_RUNTIME_SUBGRAPH_H
#define KILN_RUNTIME_SUBGRAPH_H

#include "opdesc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_SG_MAX_DEPTH 16 /* nesting of graphs inside graphs */

typedef struct kn_sg_value {
    const char *name;
    kn_dtype dtype; /* KN_DT_UNDEFINED if unknown */
    int rank;       /* -1 if unknown */
    int64_t dims[KN_MAX_RANK]; /* -1 for an unknown dim */
} kn_sg_value;

typedef struct kn_sg_node {
    kn_opdesc desc;         /* op, names, opset, counts, attributes (body is set when it runs) */
    const int32_t *inputs;  /* desc.n_inputs value indices; -1: omitted */
    const int32_t *outputs; /* desc.n_outputs value indices; -1: omitted */
} kn_sg_node;

struct kn_sg {
    const char *name;
    int n_values;
    const kn_sg_value *values;
    int n_consts;
    const int32_t *const_ids;      /* value index of each constant */
    const kn_tensor *const *consts; /* its data */
    int n_captures;
    const int32_t *captures; /* values read from enclosing scopes, by name */
    int n_inputs, n_outputs;
    const int32_t *inputs, *outputs;
    int n_nodes;
    const kn_sg_node *nodes;
};

/* Where a running graph finds its captures: n (name, tensor) pairs, then
 * the enclosing scope. */
typedef struct kn_sg_scope {
    const struct kn_sg_scope *parent;
    int n;
    const char *const *names;
    const kn_tensor *const *tensors;
} kn_sg_scope;

/* Runs g with its formal inputs bound to in[0..n_in) (borrowed) and the
 * captures looked up in `outer`; fills out[0..n_out) (zeroed on entry) with
 * owned tensors. On failure nothing is left in out and the message names
 * the graph and node. */
int kn_sg_run(const kn_sg *g, const kn_sg_scope *outer, int n_in, const kn_tensor *const *in, int n_out,
              kn_tensor *out);

/* A body runner (opdesc.h) for a control-flow node whose graph attributes
 * are kn_sg, running them in scope `outer` (which must outlive the call). */
kn_body_runner kn_sg_body_runner(const kn_sg_scope *outer);

/* Checks g's structure (indices in range, each value defined once and
 * before use, known ops, nesting depth); kn_attrs_read calls it on every
 * graph it parses. `what` prefixes the message. */
int kn_sg_check(const kn_sg *g, int depth, const char *what);

#ifdef __cplusplus
}
#endif
#endif
