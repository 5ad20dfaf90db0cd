/*
 * runtime/ops/opdesc.h — ops as the runtime sees them: the op enum (from
 * ops.def), attributes, and an op descriptor (kn_opdesc) that carries what an
 * op's execution needs to know about its node, without the graph IR.
 *
 * Each op's execution function lives in runtime/ops/<family>.c and is listed
 * in that family's kn_exec_<family>[] table. Both the reference evaluator
 * (ir/eval.c, which builds a kn_opdesc from an IR node) and compiled
 * artifacts (which carry serialized descriptors for ops that are not
 * generated) call the same function, so there is one implementation per op.
 *
 *     static int exec_relu(const kn_opdesc *d, const kn_tensor *const *in,
 *                          kn_tensor *out) {
 *         float alpha = kn_op_attr_float(d, "alpha", 0.01f);
 *         if (!in[0]) return kn_op_error(d, KN_ERR_INVALID, "input 0 is missing");
 *         ... kn_tensor_alloc(&out[0], ...) ... call a kernel of runtime/kernels ...
 *     }
 *     const kn_exec_impl kn_exec_elementwise[] = {
 *         {KN_OP_Relu, exec_relu},
 *         {KN_OP_UNKNOWN, NULL},
 *     };
 */
#ifndef KILN_RUNTIME_OPDESC_H
#define KILN_RUNTIME_OPDESC_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_VAR 1000 /* "any number" in arity columns */

typedef enum kn_op {
    KN_OP_UNKNOWN = 0,
#define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) KN_OP_##name,
#define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) KN_OP_##ident,
#include "ops.def"
#undef KN_OP
#undef KN_OP_NAMED
    KN_OP_COUNT
} kn_op;

/* The elementwise ops by ops.def's CLASS column, for the tables of the
 * inference, execution and lowering families: a table defines UN(name),
 * BIN(name) and VAR(name) as its entries and then
 *
 *     #define KN_OP(name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags) KN_CLASS_##cls(name)
 *     #define KN_OP_NAMED(ident, name, domain, min_in, max_in, min_out, max_out, cls, since, until, flags)
 *     #include "ops.def"
 *
 * so that an op added to ops.def as UNARY is inferred, run and lowered. */
#define KN_CLASS_UNARY(name) UN(name),
#define KN_CLASS_BINARY(name) BIN(name),
#define KN_CLASS_VARIADIC(name) VAR(name),
#define KN_CLASS_OTHER(name)

/* Numeric values equal ONNX's AttributeProto.AttributeType. */
typedef enum kn_attr_kind {
    KN_ATTR_UNDEFINED = 0,
    KN_ATTR_FLOAT = 1,
    KN_ATTR_INT = 2,
    KN_ATTR_STRING = 3,
    KN_ATTR_TENSOR = 4,
    KN_ATTR_GRAPH = 5,
    KN_ATTR_FLOATS = 6,
    KN_ATTR_INTS = 7,
    KN_ATTR_STRINGS = 8,
    KN_ATTR_TENSORS = 9,
    KN_ATTR_GRAPHS = 10,
} kn_attr_kind;

typedef struct kn_graph kn_graph; /* IR graph; opaque at this layer */
typedef struct kn_sg kn_sg;       /* serialized-form graph (subgraph.h) */

typedef struct kn_attr {
    const char *name;
    kn_attr_kind kind;
    float f;
    int64_t i;
    const char *s; /* NUL-terminated; s_len bytes (may hold NULs) */
    size_t s_len;
    kn_tensor *t;
    kn_graph *g;   /* GRAPH in the IR (the reference evaluator) */
    const kn_sg *sg; /* GRAPH in the runtime's form (compiled artifacts); what kn_attrs_write writes */
    int n;         /* element count of the list kinds */
    float *floats;
    int64_t *ints;
    const char **strings;
    kn_tensor **tensors;
    kn_graph **graphs;
} kn_attr;

/* How a control-flow op (If, Loop, Scan) runs the graphs in its attributes:
 * the reference evaluator runs IR graphs (kn_attr.g), a compiled artifact
 * its serialized ones (kn_attr.sg). The op's semantics (runtime/ops/control.c)
 * are the same for both. */
typedef struct kn_body_runner {
    /* Runs graph attribute `g` with its n_in formal inputs bound to `in`
     * (borrowed) and fills `out` (n_out zeroed entries, owned results). A
     * count that does not match the graph is an error naming it. */
    int (*run)(void *ctx, const kn_attr *g, int n_in, const kn_tensor *const *in, int n_out, kn_tensor *out);
    /* dtype of output i of graph `g` (KN_DT_UNDEFINED if not known). */
    kn_dtype (*output_dtype)(void *ctx, const kn_attr *g, int i);
    void *ctx;
} kn_body_runner;

/* What a compiled artifact's session keeps for one node run by its runtime
 * kernel, from run to run (kn_opdesc.sess; NULL in the reference evaluator
 * and in the bodies of control-flow ops, which run the plain C kernels). An
 * op with a faster path than its plain C kernel (LSTM, GRU, RNN:
 * runtime/src/rnn.c) keeps what it prepared once (packed weights) here. */
typedef struct kn_op_session {
    void *state;                /* the op's; NULL until it sets it */
    void (*free_state)(void *); /* what frees state when the session goes */
    int threads;                /* the session's thread count */
    /* the artifact's weights: an input whose bytes lie inside is a constant,
     * the same at every run */
    const unsigned char *weights;
    size_t weights_len;
    const char *impl; /* what ran the node last (static string), for kiln profile; NULL: its plain C kernel */
    /* During one run of the node (kn_rt_opnode_exec): its output array and,
     * per output, the place the memory plan gives it at this run's shape
     * (NULL: none, or one that overlaps an input) with its bytes. An op that
     * allocates an output by kn_op_alloc_output writes there, and the copy
     * from a buffer of its own into the arena is saved. */
    const kn_tensor *outs;
    void *const *out_dest;
    const size_t *out_dest_bytes;
    int n_outs;
} kn_op_session;

/* True if the n bytes at p lie inside the artifact's weights (os may be
 * NULL): a constant input, the same at every run, that an op may prepare
 * once (pack, transform) and keep. */
static inline bool kn_op_is_constant(const kn_op_session *os, const void *p, size_t n)
{
    const unsigned char *b = p;
    return os && os->weights && b >= os->weights && n <= os->weights_len &&
           (size_t)(b - os->weights) <= os->weights_len - n;
}

/* What an op's execution knows of its node. */
typedef struct kn_opdesc {
    kn_op op;
    const char *name;    /* node name, for messages */
    const char *op_type; /* ONNX op_type */
    const char *domain;  /* "" for the default domain */
    int64_t opset;       /* opset version of the node's domain in its model */
    int n_inputs;        /* as written in the model (omitted optional inputs count) */
    int n_outputs;
    const bool *has_output; /* has_output[i]: output i is wanted (not omitted) */
    const kn_attr *attrs;
    int n_attrs;
    const kn_body_runner *body; /* ops with graph attributes only; NULL elsewhere */
    kn_op_session *sess;        /* compiled artifacts' runtime-kernel nodes only; NULL elsewhere */
    /* KN_BF16: the node computes as autocast says (kn_abi_opnode.compute;
     * compiled artifacts' Attention only); 0: in its operands' dtype. The
     * reference evaluator leaves it 0: the oracle stays f32. */
    int32_t compute;
    /* KN_OPNODE_NHWC_* (kn_abi_opnode.nhwc; compiled artifacts' ConvTranspose
     * at a run-time shape only): input 0 / output 0 are channels-last in
     * memory, their dims still NCHW. 0 in the reference evaluator. */
    int32_t nhwc;
} kn_opdesc;

/* Allocates *out, one of the node's outputs, as kn_tensor_alloc does; in a
 * compiled run, where the memory plan has a place for it of exactly these
 * bytes (kn_op_session.out_dest), a borrowed view of that place instead.
 * zero: fill it with zeros, as kn_tensor_alloc does, for a kernel that
 * does not write every element. */
int kn_op_alloc_output(const kn_opdesc *d, kn_tensor *out, kn_dtype dt, int rank, const int64_t *dims, bool zero);

/* Computes the node's outputs. in[i] is NULL for an omitted optional input.
 * out has n_outputs zeroed entries; the function allocates (kn_tensor_alloc)
 * and fills each one with has_output[i]. On failure it returns a status with
 * a message from kn_op_error(); the caller frees what was allocated. */
typedef int (*kn_exec_fn)(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);

typedef struct kn_exec_impl {
    kn_op op;
    kn_exec_fn exec;
} kn_exec_impl;

/* Family tables (each ends with {KN_OP_UNKNOWN, NULL}). */
extern const kn_exec_impl kn_exec_elementwise[];
extern const kn_exec_impl kn_exec_nn[];
extern const kn_exec_impl kn_exec_linalg[];
extern const kn_exec_impl kn_exec_reduce[];
extern const kn_exec_impl kn_exec_generate[];
extern const kn_exec_impl kn_exec_select[];
extern const kn_exec_impl kn_exec_movement[];
extern const kn_exec_impl kn_exec_vision[];
extern const kn_exec_impl kn_exec_signal[];
extern const kn_exec_impl kn_exec_recurrent[];
extern const kn_exec_impl kn_exec_misc[];
extern const kn_exec_impl kn_exec_control[];
extern const kn_exec_impl kn_exec_fused[]; /* kiln-domain fused ops */
extern const kn_exec_impl kn_exec_fused_q[]; /* kiln-domain integer ops (fused_q.h) */
extern const kn_exec_impl kn_exec_contrib_q[]; /* com.microsoft quantization ops (contrib_q.c) */

/* The execution function of op; NULL if it has none in the runtime. */
kn_exec_fn kn_op_exec(kn_op op);
/* Checks d's input and output counts against ops.def (kernels index their
 * inputs by position); an error naming the node otherwise. */
int kn_op_check_arity(const kn_opdesc *d);
/* ONNX name of op ("?" if unknown). */
const char *kn_op_type_name(kn_op op);

/* What passes ask about an op (ops.def's FLAGS column). */
enum {
    KN_OPF_ELEMENTWISE = 1 << 0, /* computed per element, inputs broadcast */
    KN_OPF_LAYOUT = 1 << 1,      /* one input, the same computation in any layout */
    KN_OPF_QUANT = 1 << 2,       /* static INT8 quantizes its activations */
    KN_OPF_BF16 = 1 << 3,        /* autocast (--precision bf16|mixed) runs it in bf16 */
};
/* op's flags, with those its class implies: UNARY ops are elementwise and
 * layout-agnostic, BINARY and VARIADIC ones elementwise. 0 for KN_OP_UNKNOWN. */
unsigned kn_op_flags(kn_op op);
/* op for an ONNX name in the default domain ("" or "ai.onnx"); KN_OP_UNKNOWN if none. */
kn_op kn_op_from_name(const char *op_type, const char *domain);

/* Attribute lookup on a descriptor; NULL if absent. */
const kn_attr *kn_op_attr(const kn_opdesc *d, const char *name);
/* Typed getters; the default is returned when the attribute is absent or of
 * another kind. */
int64_t kn_op_attr_int(const kn_opdesc *d, const char *name, int64_t def);
float kn_op_attr_float(const kn_opdesc *d, const char *name, float def);
const char *kn_op_attr_string(const kn_opdesc *d, const char *name, const char *def);
/* List getters: count (0 if absent) and pointer (NULL if absent). */
int kn_op_attr_ints(const kn_opdesc *d, const char *name, const int64_t **out_ints);
int kn_op_attr_floats(const kn_opdesc *d, const char *name, const float **out_floats);
/* True if output i exists and is wanted. */
static inline bool kn_op_has_output(const kn_opdesc *d, int i)
{
    return i < d->n_outputs && (!d->has_output || d->has_output[i]);
}

/* Serializes attributes into a malloc'd buffer. A GRAPH attribute is written
 * from its runtime form (kn_attr.sg; see subgraph.h), recursively; GRAPHS
 * and a GRAPH without .sg fail with KN_ERR_UNSUPPORTED naming the attribute. */
int kn_attrs_write(const kn_attr *attrs, int n_attrs, unsigned char **out_bytes, size_t *out_len);
/* Parses a buffer from kn_attrs_write. *out_block owns every attribute,
 * string, list, tensor and graph (free with kn_attrs_free). Bounds-checked:
 * damaged bytes are an error saying what is malformed, never a crash. */
int kn_attrs_read(const unsigned char *bytes, size_t len, kn_attr **out_attrs, int *out_n, void **out_block);
void kn_attrs_free(void *block);

/* Records "node 'NAME' (OpType): <message>" and returns code. */
int kn_op_error(const kn_opdesc *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Passes st through; when it is an error, puts the node's name in front of
 * the message a kernel recorded ("node 'c1' (Conv): ..."). */
int kn_op_fail(const kn_opdesc *d, int st);
/* Fails naming the node unless its first k inputs are present (an empty
 * name in the model omits one), so an exec function can read them. */
int kn_op_need_inputs(const kn_opdesc *d, const kn_tensor *const *in, int k);
/* Normalizes an attribute-given axis for rank into *out; fails naming the
 * node and the axis when it is out of range. */
int kn_op_axis(const kn_opdesc *d, int64_t axis, int rank, int *out);
/* The integer value of a one-element tensor (a float one is truncated);
 * fails naming `what` otherwise, or when the float is not finite. */
int kn_op_scalar_int(const kn_opdesc *d, const kn_tensor *t, const char *what, int64_t *out);
/* Input i, or NULL when the node omits it (in[] is only read below n_inputs). */
static inline const kn_tensor *kn_op_input(const kn_opdesc *d, const kn_tensor *const *in, int i)
{
    return i < d->n_inputs ? in[i] : NULL;
}

#ifdef __cplusplus
}
#endif
#endif
