/*
 * kiln/abi.h — the artifact ABI: what a compiled model (.so or .a) exports
 * and what libkiln_rt expects of it. codegen/cpu emits exactly these
 * structures as constant data; runtime/src/artifact.c reads and checks them.
 *
 * An artifact exports one kn_artifact_desc. A shared artifact names it
 * `kn_artifact_descriptor` (found with dlsym); a static one names it
 * `kn_artifact_<model>` and the generated header declares it. The desc
 * points at a serialized kn_meta (I/O, memory plan, oneDNN primitives,
 * runtime-kernel nodes) that the runtime parses and checks. Every format
 * change bumps KN_ABI_VERSION; the runtime refuses other versions with a
 * message instead of misreading them.
 *
 * Execution model: the generated `run` function receives a kn_exec (owned by
 * the session) and the base pointers of the arena, the weights and the
 * user's input and output buffers. Generated kernels address every tensor as
 * base + constant offset. Steps that the generated code does not implement
 * call back into libkiln_rt: kn_rt_dnnl_exec() for oneDNN primitives the
 * session created up front, kn_rt_opnode_exec() for ops run by their runtime
 * kernel. A non-zero return stops the run; the runtime has set the message.
 *
 * Dynamic dims (`--max NAME=N`): the plan reserves every value at its
 * size for the maximum; each run's symbol values are derived from the input
 * shapes by the session (or set with kn_session_set_dim) and kept in the
 * kn_exec, where generated code reads them with kn_rt_sym(). Nodes whose
 * operands depend on a symbol run either as the code generated for one row
 * (symbol = 1) in a loop of n iterations over the leading dim, or through
 * their runtime kernel with the run-time shapes.
 *
 * Values whose shape depends on input data (NonZero, Reshape to a shape that
 * is an input, ...) have no static offset: they live in per-session slots
 * (kn_abi_tensor.slot), only runtime-kernel nodes read or write them, and
 * graph outputs among them are returned by kn_session_run_tensors.
 *
 * Profiling (kiln/profile.h): `run` calls one step function per emitted node,
 * in order. The descriptor also exports that table of step functions
 * (step_fns), and the meta describes each step (kn_abi_step: node, op, FLOPs,
 * bytes moved) and each arena block (kn_abi_buffer: offset, size, the steps
 * it lives through). kn_session_profile calls the steps itself with a clock
 * around each; `run` is untouched, so a model that is not profiled pays
 * nothing.
 */
#ifndef KILN_ABI_H
#define KILN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KN_ABI_MAGIC 0x4e4c494bu /* "KILN" read as a little-endian u32 */
/* 3: control flow (opnode captures), dynamic dims, profiling step table,
 * conv activation layouts, Tanh/HardSwish post-ops; 4: conv_algo, each
 * step's oneDNN record; 6: weights_hash is kn_weights_hash (was FNV-1a)
 * and embedded weights are checked against it too; 8: KN_DNNL_DECONV
 * records (ConvTranspose), and a dynamic dim has a minimum and an
 * alignment (kn_abi_sym.min, align); 9: kn_abi_dnnl.compute (bf16
 * autocast); 10: kn_abi_opnode.compute (bf16 attention); 11: the
 * KN_POST_QDQ_* post-ops (int8 groups round at their inner quantization);
 * 12: kn_abi_sym.from_data (token packing); 13: KN_DNNL_BINARY records,
 * kn_abi_dnnl.pool_alg renamed alg, and kn_abi_opnode.nhwc; 14:
 * KN_OPNODE_NHWC_ALL (Concat, Split, Resize and binary ops channels-last at
 * a run-time shape); 15: KN_OPNODE_NATIVE_ALL (the same in static graphs,
 * on the session's layout) */
#define KN_ABI_VERSION 15u
#define KN_MAX_SYMS 4 /* dynamic dims (symbols) one artifact may have */

/* CPU features an artifact may need (kn_artifact_desc.cpu_features). */
enum {
    KN_CPU_SSE42 = 1u << 0,
    KN_CPU_AVX = 1u << 1,
    KN_CPU_AVX2 = 1u << 2,
    KN_CPU_FMA = 1u << 3,
    KN_CPU_F16C = 1u << 4,
    KN_CPU_AVX512F = 1u << 5,
    KN_CPU_AVX512BW = 1u << 6,
    KN_CPU_AVX512DQ = 1u << 7,
    KN_CPU_AVX512VL = 1u << 8,
    KN_CPU_AVX512VNNI = 1u << 9,
    KN_CPU_AVX512BF16 = 1u << 10,
    KN_CPU_AVX512FP16 = 1u << 11,
};

/* A tensor's static description. dims are the compiled (maximum) sizes.
 * A dynamic value (its shape depends on input data, so it has no place in
 * the static plan) has slot > 0: it lives in the session's slot slot-1, its
 * unknown dims are -1 (rank -1 if even that is unknown) and nbytes is 0.
 *
 * A dim that follows a dynamic dim of the model (`kiln compile --max
 * NAME=N`) has dim_sym[d] = k > 0 (symbol k-1 of kn_meta.syms): its size is
 * affine in the symbol's value n, dims[d] + dim_a[d] * (n - max), so dims[d]
 * is its size at the maximum and nbytes the bytes at the maximum (what the
 * plan reserved). At run time the tensor is stored densely in its actual
 * shape from the start of that reservation. */
typedef struct kn_abi_tensor {
    const char *name;
    int32_t dtype; /* kn_dtype */
    int32_t rank;
    int64_t dims[8];
    const char *dim_names[8]; /* symbolic dim names from the model, or NULL */
    int64_t nbytes;
    int32_t slot;  /* 0: static; k > 0: dynamic value in session slot k-1 */
    int32_t pad_;
    int32_t dim_sym[8]; /* 0: fixed; k > 0: affine in symbol k-1 */
    int64_t dim_a[8];   /* the coefficient of the symbol (non-zero when dim_sym[d] > 0) */
} kn_abi_tensor;

/* A dynamic dim of the model: its name, and the values compiled for. With
 * alignment `align` (A) the symbol's value n is the dim divided by A (the
 * dim is A*n), which keeps dims through strided convs and poolings affine
 * in n; min and max are values of n (the dim runs from A*min to A*max in
 * steps of A). Without alignment A = 1 and n is the dim itself. */
typedef struct kn_abi_sym {
    const char *name;
    int64_t max;
    int64_t min;   /* >= 1 */
    int64_t align; /* >= 1 */
    /* 1: no input or output carries the dim: in each run the first runtime
     * kernel that produces a value with this dim sets it from that value's
     * size (the count of real tokens of kiln compile --pack-tokens); the
     * typed entry point does not take it. 0: set from the inputs. */
    int64_t from_data;
} kn_abi_sym;

/* Where a tensor lives while the model runs. */
enum {
    KN_LOC_ARENA = 0,   /* session arena + offset */
    KN_LOC_WEIGHTS = 1, /* weights + offset */
    KN_LOC_INPUT = 2,   /* user input #offset */
    KN_LOC_OUTPUT = 3,  /* user output #offset */
    KN_LOC_DYNAMIC = 4, /* session slot #offset (a data-dependent shape; never in a oneDNN record) */
};

typedef struct kn_abi_ref {
    int32_t loc;    /* KN_LOC_* */
    int32_t pad_;
    int64_t offset; /* byte offset (arena, weights) or index (input, output) */
} kn_abi_ref;

/* oneDNN primitives the runtime creates once per session. */
enum {
    KN_DNNL_MATMUL = 1, /* dst[b,M,N] = src[b,M,K] x wei[b,K,N] (+ bias[N]) */
    KN_DNNL_CONV = 2,   /* N-D convolution, NCHW-family plain layouts */
    KN_DNNL_POOL = 3,   /* N-D pooling (alg: KN_POOLING_*, kernel): src → dst, no weights */
    /* N-D transposed convolution (ONNX ConvTranspose): src [N, C, in..], wei
     * in ONNX layout [C, O/g, k..], dst [N, O, out..]; strides, dilations
     * and groups as a conv's; pads_begin is ONNX's begin padding (>= 0)
     * and pads_end what makes out = (in-1)*s + (k-1)*d + 1 - begin - end,
     * which output_padding and output_shape may make negative (down to
     * 1 - s). Bias and post-ops as a conv's; conv_algo is ignored. */
    KN_DNNL_DECONV = 4,
    /* dst = src (alg: KN_BINARY_*) wei, f32: src and dst [N, C, spatial..]
     * in src_layout and dst_layout, wei [1 or N, 1 or C, 1, ..] plain (the
     * same bytes in every layout), constant (wei_ref) or given at each run;
     * no bias, post-ops or scales (runtime/src/dnnl/binary.c) */
    KN_DNNL_BINARY = 5,
};

/* A binary record's operation (kn_abi_dnnl.alg). */
enum { KN_BINARY_MUL = 0, KN_BINARY_ADD = 1 };

/* A pooling record's algorithm (kn_abi_dnnl.alg). */
enum { KN_POOLING_MAX = 0, KN_POOLING_AVG_INCLUDE_PAD = 1, KN_POOLING_AVG_EXCLUDE_PAD = 2 };

/* Post-operations fused into a oneDNN primitive (applied in order). */
enum {
    KN_POST_NONE = 0,
    KN_POST_RELU = 1,
    KN_POST_CLIP = 2,   /* alpha = min, beta = max */
    KN_POST_SUM = 3,    /* dst += extra input (residual) */
    KN_POST_SIGMOID = 4,
    KN_POST_GELU_ERF = 5,
    KN_POST_GELU_TANH = 6,
    KN_POST_LEAKY_RELU = 7, /* alpha = slope */
    KN_POST_TANH = 8,
    KN_POST_HARDSWISH = 9,  /* x * clip(x / 6 + 1/2, 0, 1), ONNX HardSwish */
    KN_POST_SWISH = 10,     /* x * sigmoid(x) (SiLU), exported as Mul(x, Sigmoid(x)) */
    /* A QuantizeLinear -> DequantizeLinear pair inside an int8 group
     * (passes/lower_qdq.c: a conv's own output quantization before a
     * residual Add), on x already in units of that quantization's scale:
     * x -> (clamp(nearbyint(x) + beta, lo, hi) - beta) * alpha, lo and hi
     * the u8 or s8 range, beta the zero point, alpha that scale over the
     * output's (the result is in output units). */
    KN_POST_QDQ_U8 = 11,
    KN_POST_QDQ_S8 = 12,
};

/* How a oneDNN record's activation is laid out in memory. */
enum {
    KN_LAYOUT_PLAIN = 0,  /* row-major as the tensor's dims say (NCHW) */
    /* the session's convolution layout: what oneDNN's fastest convolution
     * wants on this CPU (nChw8c on AVX2, nChw16c or NHWC on AVX-512),
     * probed once per session, where it keeps the plain byte size (NHWC
     * always, a blocked layout when the channels fill whole blocks); plain
     * otherwise, which producer and consumer decide alike from the dims.
     * The compiler uses it only for 2-D convolution activations between two
     * convolutions. */
    KN_LAYOUT_NATIVE = 1,
};

typedef struct kn_abi_post {
    int32_t kind;
    float alpha, beta;
} kn_abi_post;

/* How a convolution may be computed (kn_abi_dnnl.conv_algo). AUTO lets the
 * runtime run a 3x3 stride-1 layer by Winograd's F(4x4, 3x3) or F(2x2, 3x3)
 * where its cost model says that is faster (runtime/src/winograd.c: AVX2
 * and AVX-512 CPUs, activations in the session's layout), a layer with a
 * small output image as im2col + oneDNN's 1x1 kernel (runtime/src/dnnl.c),
 * and some 1x1 layers between NHWC activations by its own kernel
 * (runtime/src/pointwise.c, AVX-512), alone or together with the depthwise
 * layer after them (runtime/src/expand_dw.c); DIRECT always uses oneDNN's direct
 * kernels (closer to the reference: about 1e-7 relative instead of 5e-6). */
enum { KN_CONV_ALGO_AUTO = 0, KN_CONV_ALGO_DIRECT = 1 };

typedef struct kn_abi_dnnl {
    int32_t kind;          /* KN_DNNL_* */
    int32_t n_post;
    kn_abi_post post[4];
    kn_abi_tensor src, wei, bias, dst; /* bias.rank == 0 and nbytes == 0: none */
    /* matmul: transposed operands are described by strides, row-major otherwise */
    int32_t trans_a, trans_b;
    float alpha;           /* matmul output scale (Gemm alpha); 1 otherwise */
    /* conv */
    int32_t groups;
    int32_t spatial;       /* 1, 2 or 3 */
    int64_t strides[3], dilations[3], pads_begin[3], pads_end[3];
    kn_abi_ref wei_ref, bias_ref; /* usually KN_LOC_WEIGHTS: prepared once */
    /* conv, pool: KN_LAYOUT_* of src, dst and the KN_POST_SUM input (matmul: plain) */
    int32_t src_layout, dst_layout, post_layout;
    /* conv: KN_CONV_ALGO_*; the runtime picks among the algorithms allowed */
    int32_t conv_algo;
    /* pool: KN_POOLING_* and the window (strides, dilations, pads above;
     * the src, dst and layout fields as for a conv); binary: KN_BINARY_* */
    int32_t alg;
    int64_t kernel[3];
    /* int8 (src u8/s8, weights s8: a kiln::QConv or QMatMul, runtime/ops/
     * fused_q.h): n_scale output scales (f32, 1 or one per output channel)
     * at scale_ref, and the zero points of src and dst; a KN_POST_SUM's
     * alpha and beta are then the residual's scale (relative to dst's) and
     * zero point. n_scale 0: a float record. A matmul record with n_scale
     * > 0 and an f32 src is the dynamic form: src is quantized at every run
     * (u8, per tensor, as DynamicQuantizeLinear), the scales are the
     * weights' (multiplied by the run's), and bias and residual are in real
     * units. KN_LAYOUT_NATIVE of an 8-bit activation is NHWC, what oneDNN's
     * int8 kernels want on every CPU. */
    int32_t n_scale;
    kn_abi_ref scale_ref;
    int32_t src_zp, dst_zp;
    /* KN_BF16: a float matmul or convolution computed as PyTorch's autocast
     * does (kiln compile --precision bf16|mixed): src and weights rounded to
     * bf16 (the weights once, when the session is created), products
     * accumulated in f32, bias, post-ops and dst in f32. The artifact then
     * needs AVX512-BF16. KN_DT_UNDEFINED (0): in src's and wei's dtypes. */
    int32_t compute;
} kn_abi_dnnl;

/* A node executed by its runtime kernel (runtime/ops). Its attributes are
 * serialized by kn_attrs_write (runtime/ops/opdesc.h); a control-flow node
 * (If, Loop, Scan) carries its bodies there as serialized graphs. The last
 * n_captures of its inputs are not the op's: they are the outer values its
 * bodies read, bound to the bodies' captures by name. */
typedef struct kn_abi_opnode {
    int32_t op;            /* kn_op */
    int32_t n_inputs, n_outputs; /* n_inputs includes the captures */
    int32_t n_captures;
    int64_t opset;
    const char *name;
    const char *op_type;
    const kn_abi_tensor *inputs;  /* n_inputs; rank -1 for an omitted input */
    const kn_abi_tensor *outputs; /* n_outputs; rank -1 for an omitted output */
    const unsigned char *attrs;
    int64_t attrs_len;
    /* KN_BF16: an f32 Attention node marked by autocast (kiln compile
     * --precision bf16|mixed): its Q.K^T products take Q (scaled) and K
     * rounded to bf16 and accumulate in f32; softmax, P.V and the output
     * stay f32. The artifact then needs AVX512-BF16. KN_DT_UNDEFINED (0):
     * the node computes in its operands' dtype; any other value, or
     * KN_BF16 on another op, is refused when the artifact is opened. */
    int32_t compute;
    /* A convolution or pooling run by kn_rt_dynconv_exec, or a
     * ConvTranspose run by its runtime kernel, at the run's shape:
     * KN_OPNODE_NHWC_SRC/DST/RES bits for the activations it exchanges
     * channels-last (NHWC) with its neighbours instead of plain NCHW. A
     * Concat, Split, Resize, Add, Sub, Mul or Div run by its runtime
     * kernel: KN_OPNODE_NHWC_ALL or KN_OPNODE_NATIVE_ALL alone. 0 elsewhere; bits on another op are
     * refused when the artifact is opened. */
    int32_t nhwc;
} kn_abi_opnode;

/* kn_abi_opnode.nhwc: input 0, output 0, and a FusedConv's residual (which
 * is NHWC exactly when output 0 is); ALL: every rank-4 operand and result
 * (the node runs on their dims in NHWC order, its axis, or Resize's scales
 * and sizes, permuted to match; a binary op's other operands are single
 * elements); NATIVE_ALL: every rank-4 operand and result is in the
 * session's KN_LAYOUT_NATIVE layout (as ALL where that is NHWC; a blocked
 * one is unblocked around the kernel). */
enum {
    KN_OPNODE_NHWC_SRC = 1,
    KN_OPNODE_NHWC_DST = 2,
    KN_OPNODE_NHWC_RES = 4,
    KN_OPNODE_NHWC_ALL = 8,
    KN_OPNODE_NATIVE_ALL = 16
};

typedef struct kn_exec kn_exec; /* per-session execution state, runtime-private */

/* One step of `run` (a node, or the copy of outputs at the end), for
 * profilers. Counts come from the compiled shapes (ir/cost.c). */
typedef struct kn_abi_step {
    const char *name;      /* node name ("(outputs)" for the final copy) */
    const char *op_type;   /* op type, or the name of a fused group */
    int64_t flops;         /* 2 per multiply-add; 0 for data movement */
    int64_t bytes_read;    /* all inputs, weights included */
    int64_t bytes_written; /* all outputs */
    int32_t dnnl;          /* the first oneDNN record (kn_meta.dnnl) the step runs; -1: none */
} kn_abi_step;

/* An arena block: one value (and the views that alias it) at arena offset
 * `offset`, live from step first_step through step last_step. */
typedef struct kn_abi_buffer {
    const char *name;
    int64_t offset, nbytes; /* nbytes rounded up to the plan's alignment */
    int32_t first_step, last_step;
} kn_abi_buffer;

typedef int (*kn_abi_run_fn)(kn_exec *ex, char *arena, const char *weights, void *const *inputs,
                             void *const *outputs);

/* Everything about a compiled model except its code and weights, as the
 * codegen builds it and the runtime reads it back (kn_meta_read). */
typedef struct kn_meta {
    uint64_t model_hash;     /* FNV-1a of the ONNX bytes and compile options */
    uint64_t cpu_features;   /* KN_CPU_* bits the generated code needs */
    const char *name;        /* C identifier used in the header */
    const char *target;      /* e.g. "x86-64-v4" or "native (sapphirerapids)" */
    const char *kiln_version;
    int32_t n_inputs, n_outputs;
    kn_abi_tensor *inputs, *outputs;
    int64_t arena_bytes;        /* peak of the static memory plan */
    int64_t intermediate_bytes; /* sum of all intermediates (no reuse) */
    int64_t weights_bytes;
    const char *weights_file;   /* external weights: file name beside the artifact, or NULL */
    uint64_t weights_hash;      /* kn_weights_hash of the weight bytes, checked at every open */
    int32_t n_dnnl, n_opnodes;
    int32_t n_slots;            /* dynamic values (kn_abi_tensor.slot) */
    int32_t n_syms;             /* dynamic dims (kn_abi_tensor.dim_sym), at most KN_MAX_SYMS */
    kn_abi_dnnl *dnnl;
    kn_abi_opnode *opnodes;
    kn_abi_sym *syms;
    int32_t n_steps;            /* == kn_artifact_desc.n_step_fns */
    int32_t n_buffers;
    kn_abi_step *steps;
    kn_abi_buffer *buffers;
} kn_meta;

/* The one symbol an artifact exports. Only this small struct is emitted as
 * native data; the rest is the serialized kn_meta in `meta`, which the
 * runtime parses with bounds checks (a foreign or damaged artifact gets a
 * message, not a crash). */
typedef struct kn_artifact_desc {
    uint32_t magic;       /* KN_ABI_MAGIC */
    uint32_t abi_version; /* KN_ABI_VERSION */
    const unsigned char *meta;
    uint64_t meta_len;
    const unsigned char *weights; /* 64-byte aligned; NULL if external */
    uint64_t weights_len;
    kn_abi_run_fn run;
    const kn_abi_run_fn *step_fns; /* what `run` calls, in order (kn_meta.steps) */
    uint64_t n_step_fns;
} kn_artifact_desc;

/* Serializes m into a malloc'd buffer (*out_bytes, *out_len). */
int kn_meta_write(const kn_meta *m, unsigned char **out_bytes, size_t *out_len);
/* Parses bytes into *out; every string and array of *out is allocated in one
 * block released by kn_meta_free. Errors say what is malformed. */
int kn_meta_read(const unsigned char *bytes, size_t len, kn_meta *out);
void kn_meta_free(kn_meta *m);

/* FNV-1a 64-bit hash, continued from h (start with KN_FNV_INIT). */
#define KN_FNV_INIT 14695981039346656037ull
uint64_t kn_fnv1a(uint64_t h, const void *data, size_t len);

/* The hash of weight bytes kept in kn_meta.weights_hash (runtime/src/hash.c):
 * four 64-bit lanes, one multiply per word, so it runs at memory speed.
 * Any change confined to one 8-byte word (every single flipped bit)
 * changes it; other changes escape it with a probability of about 2^-64. */
uint64_t kn_weights_hash(const void *data, size_t len);

/* A digest of the I/O contract: the names, dtypes and shapes of the inputs
 * and outputs and the dynamic dims. A generated header records it with
 * model_hash, and its open function refuses an artifact whose own differs
 * (kn_artifact_check_header in kiln/kiln.h). */
uint64_t kn_meta_io_hash(const kn_meta *m);

/* CPU features of the machine running this code (KN_CPU_* bits). */
uint64_t kn_cpu_features(void);

/* ---- called by generated code, implemented in libkiln_rt ----------------- */

/* Runs the session's oneDNN primitive #index on the given buffers (post_src:
 * the extra input of a KN_POST_SUM, or NULL). */
int kn_rt_dnnl_exec(kn_exec *ex, int32_t index, void *src, const void *wei, const void *bias, void *dst,
                    const void *post_src);

/* kn_rt_dnnl_exec for a matrix product over packed tokens (kiln compile
 * --pack-tokens) recorded at their most: only the first `rows` rows of src
 * and dst matter in this run. The primitive computes those alone where its
 * kernel can (kiln's AVX-512 matmul), else every row (the others are room
 * the plan reserved, never read). */
int kn_rt_dnnl_exec_rows(kn_exec *ex, int32_t index, int64_t rows, void *src, const void *wei, const void *bias,
                         void *dst, const void *post_src);

/* The value of dynamic dim (symbol) #index in the current run: every
 * generated loop whose trip count follows a dynamic dim reads it. */
int64_t kn_rt_sym(kn_exec *ex, int32_t index);

/* Runs opnode #index through its runtime kernel, reading inputs from
 * in_ptrs[i] (NULL for omitted ones) and writing outputs to out_ptrs[i].
 * Dynamic inputs and outputs (slot > 0 in the record) ignore the pointer:
 * they are read from the session's slot, and a dynamic output's tensor, as
 * the kernel sized it, replaces what the slot held. */
int kn_rt_opnode_exec(kn_exec *ex, int32_t index, const void *const *in_ptrs, void *const *out_ptrs);

/* Runs opnode #index, a Conv, kiln::FusedConv, MaxPool or AveragePool over
 * plain NCHW f32 tensors with dynamic spatial dims, through a oneDNN
 * primitive made for this run's shape (kept per node for a few shapes). */
int kn_rt_dynconv_exec(kn_exec *ex, int32_t index, const void *const *in_ptrs, void *const *out_ptrs);

/* A generated chunk function: computes units [lo, hi) of a node's loop nest
 * (args: what its node function passed). Returns a status. */
typedef int (*kn_rt_chunk_fn)(void *args, int64_t lo, int64_t hi);

/* Runs fn over [0, n) in contiguous chunks, about four per session thread
 * (kn_session_set_threads), which the OpenMP threads oneDNN uses claim one
 * at a time (a slowed thread's share goes to the others); with one thread,
 * fn(args, 0, n) on the calling thread. Returns the first failing chunk's
 * status (in chunk order), with its message. */
int kn_rt_parallel_for(kn_exec *ex, kn_rt_chunk_fn fn, void *args, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
