/*
 * ir/eval.h — the reference evaluator: walks a graph in topological order
 * and calls each op's eval function (ir/ops/<family>.c, which call the plain C
 * kernels of runtime/). Obviously correct rather than fast.
 *
 *     kn_tensor outs[4] = {0};
 *     const char *names[] = {"x"};
 *     if (kn_eval_model(model, 1, names, &x, outs))
 *         fprintf(stderr, "%s\n", kn_last_error());
 *     ... outs[i] belongs to the caller: kn_tensor_free(&outs[i]) ...
 */
#ifndef KILN_IR_EVAL_H
#define KILN_IR_EVAL_H

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the model's main graph. Inputs are matched by name (every runtime
 * input of the graph must be given; an initializer that is also an input may
 * be overridden). Their dtype and rank are checked against the model.
 * `outputs` must have m->graph->n_outputs zeroed entries; each is filled with
 * an owned tensor. On failure nothing is left allocated in outputs. */
int kn_eval_model(kn_model *m, int n_inputs, const char *const *names,
                  const kn_tensor *inputs, kn_tensor *outputs);

typedef struct kn_eval_options {
    /* Compare every computed output with the dtype/shape that inference
     * recorded on its value, and fail on a disagreement (conformance runs). */
    unsigned check_infer;
} kn_eval_options;

/* kn_eval_model with options (NULL = defaults). */
int kn_eval_model_opts(kn_model *m, int n_inputs, const char *const *names,
                       const kn_tensor *inputs, kn_tensor *outputs,
                       const kn_eval_options *opts);

/* For control-flow ops: runs subgraph g with its formal inputs bound to `in`
 * (n_in must equal g->n_inputs; entries are borrowed) and fills `out`
 * (g->n_outputs zeroed entries, owned copies). Outer-scope values resolve to
 * the tensors of the enclosing evaluation. */
int kn_eval_subgraph(kn_eval_ctx *ctx, const kn_graph *g, int n_in,
                     const kn_tensor *const *in, kn_tensor *out);

/* True if the evaluator can run op (an IR eval function or a runtime exec). */
bool kn_op_runnable(kn_op op);

/* Fills *out with n's descriptor for runtime execution. has_output must have
 * room for n->n_outputs entries; out borrows n's strings and attributes. */
void kn_node_opdesc(const kn_node *n, kn_opdesc *out, bool *has_output);
/* Fails naming the node unless its first k inputs are present (an empty
 * name in the model omits one), so an infer function can read them. */
int kn_node_need_inputs(const kn_node *n, int k);
/* The preamble of an infer function that calls the runtime's rules: fails
 * naming the node unless its first k inputs are present (an empty name in
 * the model omits one) and it has at most max_out outputs, then fills *d
 * (has_output: max_out entries) as kn_node_opdesc does. */
int kn_node_prepare(const kn_node *n, int k, int max_out, kn_opdesc *d, bool *has_output);

/* Runs one node on tensors through its runtime exec function (runtime/ops);
 * ops with subgraphs (If, Loop, Scan) run their bodies through ctx, which
 * may be NULL only for ops without subgraphs. in[i] is NULL for omitted
 * optional inputs (and for i >= n->n_inputs is never read). out has
 * n->n_outputs zeroed entries; each one whose n->outputs[i] is non-NULL is
 * allocated and filled. On failure the status comes with a message naming
 * the node; the caller frees whatever was allocated. */
int kn_node_eval(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);

/* ---- helpers for op definitions (ir/ops/<family>.c) --------------------------- */

/* Output i gets input j's dtype and shape. */
int kn_infer_same_as_input(kn_node *n, int j);
/* Sets output i's dtype and static shape. */
void kn_infer_set(kn_node *n, int i, kn_dtype dt, int rank, const int64_t *dims);
/* Sets output i's dtype and copies a (possibly symbolic) shape. */
void kn_infer_set_shape(kn_node *n, int i, kn_dtype dt, const kn_shape *s);

/* Reads an integer tensor (any integer dtype) into int64s: returns the count,
 * or -1 with an error if the dtype is not integer or there are more than max. */
int kn_tensor_read_ints(const kn_tensor *t, int64_t *out, int max);
/* Reads element 0 of a numeric tensor as double. */
double kn_tensor_scalar_f64(const kn_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
