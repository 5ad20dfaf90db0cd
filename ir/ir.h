/*
 * ir/ir.h — kiln's graph IR: models, graphs, nodes, values, attributes.
 *
 * A kn_model owns one arena from which every graph (the main graph and the
 * bodies of If/Loop/Scan), node, value, attribute and string is allocated;
 * kn_model_free() releases all of it at once. Constant tensors (weights) are
 * not in the arena: each value's `const_data` is a kn_tensor whose ownership
 * flag (owned / borrowed / mmapped) says how it is released; the model keeps
 * a list of them and frees them with itself.
 *
 * Values are named SSA edges. A value is produced by at most one node (or is
 * a graph input / initializer) and used by any number of nodes. A subgraph may
 * use a value of an enclosing graph directly (ONNX outer-scope references);
 * kn_graph_lookup() searches outward. Every value of a model has a unique
 * `id` in [0, model->n_value_ids), which evaluators use to index tables.
 *
 *     kn_model *m = kn_model_create();
 *     kn_graph *g = m->graph;
 *     kn_value *x = kn_graph_add_input(g, "x", KN_F32, &(kn_shape){2, {1, 8}});
 *     kn_node *n = kn_node_create(g, KN_OP_Relu, "relu0", 1, &x, 1);
 *     kn_graph_add_output(g, n->outputs[0]);
 *     ...
 *     kn_model_free(m);
 */
#ifndef KILN_IR_H
#define KILN_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/tensor.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- arena -------------------------------------------------------------- */

typedef struct kn_arena_block kn_arena_block;
typedef struct kn_arena {
    kn_arena_block *head;
    size_t total; /* bytes handed out, for statistics */
} kn_arena;

/* Zeroed, 16-byte aligned memory that lives until kn_arena_release(); NULL
 * only if malloc fails. */
void *kn_arena_alloc(kn_arena *a, size_t size);
/* Copy of s (NULL stays NULL); kn_arena_strndup copies n bytes and adds NUL. */
char *kn_arena_strdup(kn_arena *a, const char *s);
char *kn_arena_strndup(kn_arena *a, const char *s, size_t n);
void *kn_arena_memdup(kn_arena *a, const void *p, size_t size);
void kn_arena_release(kn_arena *a);

/* ---- shapes ------------------------------------------------------------- */

/* A tensor type's shape: rank -1 means unknown rank. A dim is static when
 * dims[i] >= 0; otherwise it is unknown (-1), and sym[i] may name it
 * ("batch"). Named dims with the same name are equal. */
typedef struct kn_shape {
    int rank;
    int64_t dims[KN_MAX_RANK];
    const char *sym[KN_MAX_RANK]; /* arena strings or NULL */
} kn_shape;

/* True if the rank and every dim are known. */
bool kn_shape_is_static(const kn_shape *s);
/* The most bytes one tensor (and the arena) may take: far above any real
 * model, low enough that sums and products of a few sizes stay in int64_t. */
#define KN_MAX_TENSOR_BYTES ((int64_t)1 << 62)
/* Bytes of a tensor of dtype dt (4-bit types packed) and static shape s; -1
 * when s is not static, or its element or byte count does not fit in
 * int64_t or is over KN_MAX_TENSOR_BYTES. (Defined in ir/infer.c.) */
int64_t kn_shape_nbytes(kn_dtype dt, const kn_shape *s);
/* True if a and b are the same known-rank shape; an unknown dim matches only
 * an unknown dim of the same symbolic name. */
bool kn_shape_same(const kn_shape *a, const kn_shape *b);
/* Sets s to the static shape (rank, dims). */
void kn_shape_set(kn_shape *s, int rank, const int64_t *dims);
/* An unknown-rank shape. */
kn_shape kn_shape_unknown(void);

/* ---- attributes --------------------------------------------------------- */

typedef struct kn_node kn_node;
typedef struct kn_value kn_value;
typedef struct kn_model kn_model;

/* ---- values ------------------------------------------------------------- */

enum {
    KN_VALUE_GRAPH_INPUT = 1u << 0,
    KN_VALUE_GRAPH_OUTPUT = 1u << 1,
    KN_VALUE_INITIALIZER = 1u << 2, /* const_data came from the model file */
    /* The static shape is one instance of a shape that varies at run time
     * (a dim bounded with --max); inference sets it on every value computed
     * from such a value. Data inference attaches to one (Shape of it, and
     * what follows) is an instance too: passes must not fold such a node
     * away or read its data as a constant; codegen/cpu/dyn.c decides, by
     * comparing probes, what is computed at run time. */
    KN_VALUE_VARYING_SHAPE = 1u << 3,
    /* The dtype was declared by the model file (value_info or a graph
     * output), not inferred: the first kn_graph_infer checks that the
     * producer computes that dtype, then clears the flag. */
    KN_VALUE_DECLARED_TYPE = 1u << 4,
    /* Dim 1 is the run's count of real tokens, set by the data (passes/
     * pack_tokens.c): the static shape holds the most there may be,
     * rounded up to KN_TOKEN_ROWS_ALIGN. */
    KN_VALUE_TOKEN_ROWS = 1u << 5,
};

/* Packed values (KN_VALUE_TOKEN_ROWS) have room for this many rows past
 * the run's count rounded down to a multiple of it: generated code may
 * compute the rows past the count in whole blocks (codegen/cpu/dyn.c). */
#define KN_TOKEN_ROWS_ALIGN 16

/* Quantization parameters attached to a value (used by quant/ and codegen). */
typedef struct kn_qparams {
    kn_tensor *scale;      /* f32, scalar or per-axis */
    kn_tensor *zero_point; /* same shape as scale; NULL means 0 */
    int axis;              /* axis of per-channel parameters; -1 if per-tensor */
    int block_size;        /* > 0 for blocked (int4) quantization */
} kn_qparams;

typedef struct kn_use {
    kn_node *node;
    int index; /* which input of node */
} kn_use;

struct kn_value {
    const char *name;
    int id;              /* unique in the model */
    kn_graph *graph;     /* graph that defines it */
    kn_dtype dtype;      /* KN_DT_UNDEFINED if not yet inferred */
    kn_shape shape;
    kn_node *producer;   /* NULL for graph inputs and constants */
    int producer_index;  /* which output of producer */
    kn_use *users;
    int n_users, cap_users;
    kn_tensor *const_data; /* non-NULL for constants; model-owned */
    kn_qparams *q;
    unsigned flags;        /* KN_VALUE_* */
};

/* ---- nodes -------------------------------------------------------------- */

struct kn_node {
    const char *name;    /* never NULL; generated if the model had none */
    int id;              /* unique in the model */
    kn_op op;            /* KN_OP_UNKNOWN if op_type is not registered */
    const char *op_type; /* ONNX op_type as written in the model */
    const char *domain;  /* "" for the default ONNX domain */
    kn_graph *graph;
    kn_value **inputs;   /* an entry is NULL for an omitted optional input */
    int n_inputs;
    kn_value **outputs;  /* an entry is NULL for an omitted optional output */
    int n_outputs;
    kn_attr *attrs;
    int n_attrs;
    /* KN_BF16: a matrix product or convolution computed as PyTorch's
     * autocast does, operands rounded to bf16, accumulation, bias and
     * output in f32 (set by passes/autocast.c for --precision bf16|mixed;
     * the reference evaluator ignores it). KN_DT_UNDEFINED: in the dtypes
     * of its values. */
    kn_dtype compute;
};

/* ---- graphs and models -------------------------------------------------- */

typedef struct kn_value_map kn_value_map; /* name → value, private to graph.c */

struct kn_graph {
    kn_model *model;
    kn_graph *parent;   /* enclosing graph of a subgraph; NULL for the main graph */
    kn_node *parent_node; /* node whose attribute holds this subgraph */
    const char *name;
    kn_node **nodes;    /* in topological order once kn_graph_toposort() ran */
    int n_nodes, cap_nodes;
    kn_value **values;  /* every value this graph defines */
    int n_values, cap_values;
    kn_value **inputs;  /* runtime inputs in order (may include initializers that are overridable) */
    int n_inputs, cap_inputs;
    kn_value **outputs;
    int n_outputs, cap_outputs;
    kn_value_map *map;
};

typedef struct kn_opset {
    const char *domain; /* "" or "ai.onnx" for the default domain */
    int64_t version;
} kn_opset;

struct kn_model {
    kn_arena arena;
    kn_graph *graph;
    int64_t ir_version;
    kn_opset *opsets;
    int n_opsets;
    const char *producer_name;
    const char *producer_version;
    const char *path;      /* file it was loaded from, or NULL */
    int n_value_ids;       /* next value id */
    int n_node_ids;        /* next node id */
    kn_tensor **consts;    /* every constant tensor the model owns */
    int n_consts, cap_consts;
};

/* Creates an empty model with an empty main graph; NULL on out of memory. */
kn_model *kn_model_create(void);
/* Frees the model, its arena and the constant tensors it owns. NULL is fine. */
void kn_model_free(kn_model *m);
/* Opset version imported for a domain ("" and "ai.onnx" are the same); 0 if absent. */
int64_t kn_model_opset(const kn_model *m, const char *domain);
/* Sets (or adds) the version for a domain. */
int kn_model_set_opset(kn_model *m, const char *domain, int64_t version);
/* Hands a heap-allocated kn_tensor (from malloc) to the model: it frees both
 * the struct and its data with itself. Returns t, or NULL on out of memory
 * (in which case t has been freed). */
kn_tensor *kn_model_adopt_tensor(kn_model *m, kn_tensor *t);

/* Creates a subgraph whose outer scope is `parent`. */
kn_graph *kn_graph_create_sub(kn_graph *parent, const char *name);

/* Creates a new value named `name` (NULL or "" → generated unique name) in g.
 * Fails (NULL, with kn_last_error set) if g already defines that name. */
kn_value *kn_graph_new_value(kn_graph *g, const char *name, kn_dtype dt, const kn_shape *shape);
/* Adds a runtime input. */
kn_value *kn_graph_add_input(kn_graph *g, const char *name, kn_dtype dt, const kn_shape *shape);
/* Adds a constant value holding `t` (ownership passes to the model). */
kn_value *kn_graph_add_constant(kn_graph *g, const char *name, kn_tensor *t);
/* Marks v as a graph output (appended in order). */
int kn_graph_add_output(kn_graph *g, kn_value *v);
/* Finds a value by name in g, then in enclosing graphs; NULL if none. */
kn_value *kn_graph_lookup(const kn_graph *g, const char *name);
/* Finds a value by name defined in g itself. */
kn_value *kn_graph_lookup_local(const kn_graph *g, const char *name);

/* Creates a node of op `op` in g with the given inputs (NULL entries allowed)
 * and n_outputs fresh outputs named "<name>:<i>" unless named later with
 * kn_value_rename. op_type/domain come from the registry. The name must be
 * unique; NULL → generated. */
kn_node *kn_node_create(kn_graph *g, kn_op op, const char *name, int n_inputs,
                        kn_value *const *inputs, int n_outputs);
/* Like kn_node_create for an op by ONNX name and domain (op may be unknown:
 * the node is created with op KN_OP_UNKNOWN), with named outputs
 * (output_names[i] NULL or "" → omitted optional output). */
kn_node *kn_node_create_named(kn_graph *g, const char *op_type, const char *domain,
                              const char *name, int n_inputs, kn_value *const *inputs,
                              int n_outputs, const char *const *output_names);
/* Replaces input i of n, keeping users lists right. */
void kn_node_set_input(kn_node *n, int i, kn_value *v);
/* Removes n from its graph and from its inputs' users lists, and the nodes
 * of its subgraphs (which go with it) from the users lists of the outer
 * values they read. Its outputs must have no users left. */
void kn_node_remove(kn_node *n);
/* True if n has at least one output and every output it has holds its data
 * (const_data): evaluated at compile time, nothing left to run. */
bool kn_node_outputs_known(const kn_node *n);
/* Values of n's own graph that its subgraphs read, at any depth: the
 * implicit inputs of a control-flow node, which a memory plan keeps alive
 * until n runs and the runtime binds to the bodies' captures by name.
 * *out_vals is malloc'd (the caller frees it); none for a node without
 * subgraphs. */
int kn_node_captures(const kn_node *n, kn_value ***out_vals, int *out_n);
/* Replaces every use of `from` by `to` (graph outputs included). */
void kn_value_replace_uses(kn_value *from, kn_value *to);

/* Swaps the names of a and b (values of the same graph). Passes use it to
 * keep a graph output's name when they replace the value computing it by
 * another one (the artifact's output names must not change). */
void kn_value_swap_names(kn_value *a, kn_value *b);
/* Drops from g->values the values nothing refers to any more: outputs of
 * removed nodes and constants without users that are neither graph inputs
 * nor outputs. Their names become free again. */
int kn_graph_compact_values(kn_graph *g);

/* Adds an attribute (copied into the arena; name must be unique on the node)
 * and returns it for the caller to fill. */
kn_attr *kn_node_add_attr(kn_node *n, const char *name, kn_attr_kind kind);

/* Attribute lookup; NULL if absent. */
const kn_attr *kn_node_attr(const kn_node *n, const char *name);
/* Typed getters with defaults (used when the attribute is absent). */
int64_t kn_attr_int(const kn_node *n, const char *name, int64_t def);
float kn_attr_float(const kn_node *n, const char *name, float def);
const char *kn_attr_string(const kn_node *n, const char *name, const char *def);
/* List getters: count (0 if absent) and pointer (NULL if absent). */
int kn_attr_ints(const kn_node *n, const char *name, const int64_t **out_ints);
int kn_attr_floats(const kn_node *n, const char *name, const float **out_floats);

/* Opset version of the node's domain in its model. */
int64_t kn_node_opset(const kn_node *n);
/* Input i, or NULL if i is past the end or the input was omitted. */
static inline kn_value *kn_node_input(const kn_node *n, int i)
{
    return i < n->n_inputs ? n->inputs[i] : NULL;
}

/* The branch an If node takes when its condition is known at compile time
 * (a constant, or data inference's value of one computed from pinned
 * shapes): its then_branch or else_branch graph; NULL when the condition is
 * only known at run time. */
const kn_graph *kn_if_taken_branch(const kn_node *n);

/* Records "node 'NAME' (OpType): <message>" and returns code. */
int kn_node_error(const kn_node *n, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sorts g->nodes topologically (stable: keeps file order where possible).
 * Fails with an error naming a node on a cycle. Does not recurse. */
int kn_graph_toposort(kn_graph *g);

/* Runs type and shape inference over g (and its subgraphs) in order, filling
 * every output value's dtype and shape from the registry's infer functions. */
int kn_graph_infer(kn_graph *g);

/* Checks structural invariants of g and its subgraphs: every input is defined
 * before use, names are unique, users lists agree with inputs, op arity is
 * within the registry's bounds, dtypes are valid. Error names the node. */
int kn_graph_verify(const kn_graph *g);

/* FLOPs of one run of n from its inferred shapes (ir/cost.c): 2 per
 * multiply-add for Conv/ConvTranspose/MatMul/Gemm and their integer and
 * QLinear forms, 0 for pure data movement, one per window element for
 * pooling, one per input element for reductions, one per output element for
 * anything else. -1 when a shape it needs is not static. */
double kn_node_flops(const kn_node *n);

#ifdef __cplusplus
}
#endif
#endif
