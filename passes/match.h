/*
 * passes/match.h — small helpers the passes share to match and rewrite
 * patterns: reading constants, checking users, creating constants and
 * nodes, and replacing a value without renaming graph outputs. Private to
 * passes/.
 *
 * Every value, node and tensor these return belongs to the graph's model
 * (arena or model-owned constant); callers never free them.
 */
#ifndef KILN_PASSES_MATCH_H
#define KILN_PASSES_MATCH_H

#include <stdbool.h>

#include "pass.h"

/* The node producing v if it is op (and v is its output 0); else NULL. */
kn_node *kn_pm_producer(const kn_value *v, kn_op op);
/* True if v is read by exactly one node and is not a graph output: the
 * value may disappear when that node is rewritten. */
bool kn_pm_single_use(const kn_value *v);
/* True if v is a float (f32/f64/f16/bf16) constant whose every element
 * equals x. */
bool kn_pm_const_splat(const kn_value *v, double x);
/* Element 0 of float constant v in *out; false if v is not a float constant
 * with at least one element. */
bool kn_pm_const_scalar(const kn_value *v, double *out);
/* True if v is a float constant all of whose elements are equal. */
bool kn_pm_const_uniform(const kn_value *v, double *out);
/* Reads an integer constant (or an ints attribute fallback) into out;
 * returns the count or -1. */
int kn_pm_const_ints(const kn_value *v, int64_t *out, int max);
/* True if a and b have the same static-or-symbolic shape (same rank, same
 * dims, same names for symbolic dims) and dtype. */
bool kn_pm_same_type(const kn_value *a, const kn_value *b);

/* Makes every reader of `from` (and the graph output slot, if any) read
 * `to`. When `from` is a graph output, `to` takes over its name so the
 * model's outputs keep their names; that needs `to` to be a node output
 * that is neither a graph input nor output. Returns false (nothing changed)
 * when the swap is impossible; the caller records a remark. */
bool kn_pm_replace(kn_value *from, kn_value *to);

/* name when no node of g has it yet, else NULL (kn_node_create then makes
 * one up): for the nodes a pass adds, named after what they replace. */
const char *kn_pm_free_node_name(const kn_graph *g, const char *name);
/* A new zero-filled constant of dtype dt and the given shape in g, named
 * `name` (a generated name when NULL or taken), its tensor in *out_t for
 * the caller to fill; NULL with an error on failure. */
kn_value *kn_pm_const_new(kn_graph *g, const char *name, kn_dtype dt, int rank, const int64_t *dims,
                          kn_tensor **out_t);
/* A new f32/f64 constant of the given shape in g, filled from data
 * (converted from double to dtype dt); NULL with an error on failure. */
kn_value *kn_pm_const_f(kn_graph *g, const char *name, kn_dtype dt, int rank, const int64_t *dims,
                        const double *data);
/* A new i64 1-D constant holding n values. */
kn_value *kn_pm_const_i64(kn_graph *g, const char *name, int n, const int64_t *vals);
/* Reads element i of a float tensor as double. */
double kn_pm_get_f(const kn_tensor *t, int64_t i);
/* An inference BatchNormalization as y = a[c] * x + b[c] for each of
 * `channels` channels: a = scale / sqrt(var + epsilon), b = B - mean * a.
 * False, with the reason in *why, unless its four parameters are float
 * constants of one value per channel. */
bool kn_pm_bn_affine(const kn_node *bn, int64_t channels, double *a, double *b, const char **why);

/* Adds an int / float / string / ints attribute; false on out of memory. */
bool kn_pm_set_int(kn_node *n, const char *name, int64_t v);
bool kn_pm_set_float(kn_node *n, const char *name, float v);
bool kn_pm_set_string(kn_node *n, const char *name, const char *s);
bool kn_pm_set_ints(kn_node *n, const char *name, int count, const int64_t *v);
/* The perm of Transpose t for input rank `rank` (its default reverses the
 * axes): rank, or -1 when the attribute has another length. */
int kn_pm_perm(const kn_node *t, int rank, int64_t *perm);

/* Naming: a node that replaces a pattern takes the name of the node whose
 * output it takes over (that node leaves the graph in the same pass, with
 * kn_pass_finish), so names in --report and profiles stay recognizable. */

/* Constant folding (passes/fold_constants.c) restricted to the nodes
 * `keep` accepts (NULL: all): evaluates them, turns their outputs into
 * constants and re-infers, until nothing more folds. */
typedef bool (*kn_pm_fold_filter)(const kn_node *n);
int kn_pm_fold(kn_pass_ctx *ctx, kn_graph *g, kn_pm_fold_filter keep, bool *out_changed);

/* Inference attaches data to small values computed from constants (Shape
 * of a static shape, Constant nodes, shape arithmetic) while their nodes
 * stay. This turns every node whose outputs all hold data into plain
 * constants, as the IR's invariants want (a constant has no producer);
 * *out_n receives how many nodes went. */
int kn_pm_materialize(kn_graph *g, int *out_n);

#endif
