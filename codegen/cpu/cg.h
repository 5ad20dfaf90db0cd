/*
 * codegen/cpu/cg.h — lowering a graph to native code through the LLVM C API.
 *
 * Pipeline (codegen/cpu/compile.c): the graph, with static shapes, gets a
 * memory plan (plan.c: every constant an offset in the weights blob, every
 * intermediate an offset in one arena from liveness, graph inputs/outputs
 * the user's buffers). Then one LLVM function per node
 *
 *     int node_<id>(kn_exec *ex, char *arena, const char *weights,
 *                   void *const *inputs, void *const *outputs)
 *
 * is emitted by the op's lowering (a loop nest, or a call into oneDNN
 * through kn_rt_dnnl_exec), or, for ops without a lowering, a call to
 * kn_rt_opnode_exec (the op's runtime kernel). A `run` function calls them
 * in order. LLVM's O3 pipeline optimizes and vectorizes for the target; the
 * object is linked into a .so (or archived into a .a) with the descriptor.
 *
 * Writing a lowering (codegen/cpu/lower_<family>.c):
 *
 *     static int lower_relu(kn_cg *cg, const kn_node *n) {
 *         const kn_value *x = n->inputs[0], *y = n->outputs[0];
 *         if (x->dtype != KN_F32) return KN_ERR_UNSUPPORTED;  // BEFORE emitting
 *         int64_t count = kn_cg_numel(y);
 *         LLVMValueRef px = kn_cg_ptr(cg, x), py = kn_cg_ptr(cg, y);
 *         kn_cg_loop l;
 *         LLVMValueRef i = kn_cg_loop_begin(cg, &l, count, "i");
 *         LLVMValueRef v = kn_cg_load(cg, KN_F32, px, i);
 *         v = kn_cg_fmax(cg, v, kn_cg_f32(cg, 0.0f));
 *         kn_cg_store(cg, KN_F32, py, i, v);
 *         kn_cg_loop_end(cg, &l);
 *         return KN_OK;
 *     }
 *     const kn_cg_lowering kn_cg_lower_elementwise[] = {
 *         {KN_OP_Relu, lower_relu},
 *         {KN_OP_UNKNOWN, NULL},
 *     };
 *
 * A lowering returns KN_ERR_UNSUPPORTED only before it emitted anything; the
 * core then falls back to the runtime kernel. Any other error fails the
 * compile with its message (which names the node).
 */
#ifndef KILN_CODEGEN_CPU_CG_H
#define KILN_CODEGEN_CPU_CG_H

#include <stdbool.h>
#include <stdint.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "ir.h"
#include "plan.h"
#include "kiln/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- codegen context -------------------------------------------------------- */

/* The most operands a node emitted in operand mode (below) may have. */
#define KN_CG_MAX_OPS 64

typedef struct kn_cg {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTargetMachineRef tm;
    LLVMTypeRef t_void, t_i1, t_i8, t_i16, t_i32, t_i64, t_half, t_bf16, t_float, t_double, t_ptr;
    const kn_model *model;
    const kn_graph *g;
    const kn_plan *plan;
    kn_meta *meta;            /* being filled: dnnl records and opnodes are appended */
    bool plain_layout;        /* --layout nchw: no value in oneDNN's native layout */
    int32_t conv_algo;        /* KN_CONV_ALGO_* for every convolution record */
    const struct kn_dyn *dyn; /* the dynamic dims (dyn.h), or NULL */
    /* KN_LAYOUT_* + 1 of each activation by value id (0: not a oneDNN
     * activation), decided once for the whole graph before any node is
     * emitted (kn_cg_plan_layouts): row mode gives a node's operands their
     * row shapes while it is emitted, and a neighbour looked at then would
     * see half a graph and could choose another layout than its producer. */
    int8_t *layouts;
    /* By node index: a layout-agnostic node (kn_cg_layout_agnostic) whose
     * rank-4 operands are all KN_LAYOUT_NATIVE, run by its runtime kernel
     * on that layout (KN_OPNODE_NATIVE_ALL) instead of generated code on
     * plain tensors (kn_cg_plan_layouts; the caller frees it). */
    bool *native_all;
    int cap_dnnl, cap_opnodes;
    /* the node function being emitted and its arguments */
    LLVMValueRef fn, a_exec, a_arena, a_weights, a_inputs, a_outputs;
    LLVMValueRef status;      /* i32 alloca a lowering may set non-zero on a runtime failure */
    /* Row mode (dynamic dims, dyn.c): the node is emitted for one row of its
     * leading dim, and kn_cg_ptr adds row * row_bytes[v->id] to every
     * pointer (row_bytes NULL: off). */
    LLVMValueRef row;
    const int64_t *row_bytes;
    /* k + 1 (0: off): oneDNN calls pass the value of symbol k (less the row
     * the block starts at, in row mode) as the rows their matrix product
     * needs (kn_rt_dnnl_exec_rows; packed tokens, dyn.c) */
    int dnnl_rows_sym1;
    /* Operand mode (share.c): while ops is set, the node's stored operands
     * are reached through the `inputs` argument, whose slot k holds the
     * address of ops[k] (filled by the node function that calls this body),
     * so that nodes differing only in where their operands live compile to
     * one shared function. Asking for the address of any other stored value
     * sets op_miss: the body is then emitted again the usual way. */
    const kn_value *const *ops; /* at most KN_CG_MAX_OPS */
    int n_ops;
    bool op_miss;
    LLVMValueRef op_fn, op_ptr[KN_CG_MAX_OPS]; /* the addresses loaded in op_fn's entry block, by slot */
} kn_cg;

/* Fills cg's LLVM types from cg->ctx (and creates cg->b if NULL). */
void kn_cg_init_types(kn_cg *cg);
/* The node function type: i32 (ptr ex, ptr arena, ptr weights, ptr inputs, ptr outputs). */
LLVMTypeRef kn_cg_fn_type(kn_cg *cg);
/* Adds a function of the node type named `name` (internal linkage if asked),
 * makes it current (cg->fn and the a_* arguments), positions the builder in
 * its entry block and zeroes cg->status. */
LLVMValueRef kn_cg_begin_function(kn_cg *cg, const char *name, bool internal);
/* The same for a function of another type whose first five parameters are
 * those of kn_cg_fn_type (the caller reads the others with LLVMGetParam). */
LLVMValueRef kn_cg_begin_function_typed(kn_cg *cg, const char *name, LLVMTypeRef type, bool internal);

/* A private, constant global named `name` holding `init`, aligned to
 * `align` bytes (0: the type's natural alignment). */
LLVMValueRef kn_cg_const_global(kn_cg *cg, const char *name, LLVMValueRef init, unsigned align);

/* Gives fn's loads and stores, emitted for n, LLVM scoped-noalias metadata
 * from the memory plan (alias.c): which operands cannot overlap. */
void kn_cg_tag_aliases(kn_cg *cg, LLVMValueRef fn, const kn_node *n);
/* What kn_cg_tag_aliases would derive, in operand mode, from the memory
 * plan rather than from the body: the class of each operand slot and which
 * arena blocks overlap. Writes at most KN_CG_ALIAS_KEY_MAX words to out and
 * returns their count, or -1 when n has too many operands to tag. */
#define KN_CG_ALIAS_KEY_MAX (2 + 64 + 64 * 63 / 2 / 64 + 1)
int kn_cg_alias_key(const kn_cg *cg, const kn_node *n, uint64_t *out);

/* ---- shared bodies (share.c) ------------------------------------------------ */

/* The node bodies emitted so far, by structure. */
typedef struct kn_cg_share kn_cg_share;
kn_cg_share *kn_cg_share_new(void);
void kn_cg_share_free(kn_cg_share *t);
/* fns[0..n-1], the definitions one node's body consists of (helpers before
 * their callers, the body's entry last), or an earlier group with the same
 * structure that was given the same `extra` words (what the functions'
 * metadata depends on): then fns are deleted and the earlier group's entry
 * is returned. A body is shared whole or not at all, so a helper keeps its
 * one caller and is still inlined into it. */
LLVMValueRef kn_cg_share_group(kn_cg_share *t, LLVMValueRef *fns, int n, const uint64_t *extra, int n_extra);
/* How many functions kn_cg_share_group deleted as repeats. */
int kn_cg_share_count(const kn_cg_share *t);
/* Once every node is emitted: an entry called by more than one node is
 * kept out of its callers (noinline), or LLVM would inline it into each and
 * optimize and compile it once per caller again; one called once is still
 * inlined. */
void kn_cg_share_finish(kn_cg_share *t);

/* Number of elements of a value with a static shape. */
int64_t kn_cg_numel(const kn_value *v);
/* Pointer to the first byte of v's data in the current function (in row
 * mode, of the current row's data). */
LLVMValueRef kn_cg_ptr(kn_cg *cg, const kn_value *v);
/* LLVM type of one element of dt (bool is i8; NULL for packed 4-bit types). */
LLVMTypeRef kn_cg_elem_type(kn_cg *cg, kn_dtype dt);
/* The type a lowering computes in for dt: float for f16/bf16/f32, double for
 * f64, the integer type itself otherwise. */
LLVMTypeRef kn_cg_compute_type(kn_cg *cg, kn_dtype dt);

LLVMValueRef kn_cg_i64(kn_cg *cg, int64_t v);
LLVMValueRef kn_cg_i32(kn_cg *cg, int32_t v);
LLVMValueRef kn_cg_f32(kn_cg *cg, float v);
/* A constant of compute type of dt holding v. */
LLVMValueRef kn_cg_const(kn_cg *cg, kn_dtype dt, double v);

/* Element idx (i64) of a buffer of dt, converted to/from the compute type
 * (f16/bf16 are widened to float on load and rounded to nearest even on
 * store; bool loads as i8 0/1). */
LLVMValueRef kn_cg_load(kn_cg *cg, kn_dtype dt, LLVMValueRef base, LLVMValueRef idx);
void kn_cg_store(kn_cg *cg, kn_dtype dt, LLVMValueRef base, LLVMValueRef idx, LLVMValueRef v);

/* A counted loop 0 <= iv < n; after _begin the builder is in the body. */
typedef struct kn_cg_loop {
    LLVMBasicBlockRef pre, body, exit;
    LLVMValueRef iv, next;
    int64_t n;
} kn_cg_loop;
LLVMValueRef kn_cg_loop_begin(kn_cg *cg, kn_cg_loop *l, int64_t n, const char *name);
void kn_cg_loop_end(kn_cg *cg, kn_cg_loop *l);

/* Calls an overloaded LLVM intrinsic ("llvm.exp", "llvm.fabs", "llvm.maxnum"…)
 * on args of type t. */
LLVMValueRef kn_cg_intrinsic(kn_cg *cg, const char *name, LLVMTypeRef t, LLVMValueRef *args, int n);
/* Calls a C math function by name (e.g. "erff", "tanhf", "erf") of one or
 * two arguments of type t (declared on first use; the artifact links -lm). */
LLVMValueRef kn_cg_libm(kn_cg *cg, const char *fname, LLVMTypeRef t, LLVMValueRef *args, int n);

/* Appends a oneDNN primitive record to the artifact and emits a call that
 * runs it on the given pointers (NULL bias/post → null). On a runtime
 * failure the node function returns the status. */
int kn_cg_emit_dnnl(kn_cg *cg, const kn_abi_dnnl *rec, LLVMValueRef src, LLVMValueRef wei, LLVMValueRef bias,
                    LLVMValueRef dst, LLVMValueRef post_src);

/* Fills a kn_abi_tensor from a value (static shape required; the compiler
 * marks dynamic values itself). */
void kn_cg_abi_tensor(const kn_value *v, kn_abi_tensor *out);

/* ---- row mode (rows.c) ------------------------------------------------------- */

/* A node's operands cut into equal blocks of bytes ("rows") along one dim
 * each: per_row elements of that dim per row, every dim before it of size 1.
 * Operands not listed are the same for every row. */
#define KN_CG_ROWS_MAX 64
typedef struct kn_cg_rows {
    int n;
    kn_value *vals[KN_CG_ROWS_MAX];
    int dim[KN_CG_ROWS_MAX];
    int64_t per_row[KN_CG_ROWS_MAX];
} kn_cg_rows;
/* Adds v (once; false if it is already there with another cut, or full). */
bool kn_cg_rows_add(kn_cg_rows *r, kn_value *v, int dim, int64_t per_row);

typedef int (*kn_cg_lower_fn)(kn_cg *cg, const kn_node *n);

/* Emits `lower` for `rows` rows of the operands in r as a new internal
 * function `name`, i32 (the node function's arguments, i64 row): the
 * operands have their shapes for `rows` rows while it lowers, and kn_cg_ptr
 * advances each of them by row * its bytes per row (the rows it computes
 * are row..row+rows-1). NULL and
 * *out_st if the lowering declines (KN_ERR_UNSUPPORTED, nothing left
 * behind) or fails. */
LLVMValueRef kn_cg_emit_row_fn(kn_cg *cg, const kn_node *n, const kn_cg_rows *r, int64_t rows,
                               kn_cg_lower_fn lower, const char *name, int *out_st);
/* while (row + step <= n) { if ((st = fn(..., row))) return st; row += step; }
 * in the current function, passing its a_* arguments; returns the row it
 * stopped at. */
LLVMValueRef kn_cg_emit_row_loop(kn_cg *cg, LLVMValueRef n, LLVMValueRef start, int64_t step, LLVMValueRef fn);

/* ---- control flow (subgraph.c) ---------------------------------------------- */

typedef struct kn_cg_sgpool kn_cg_sgpool; /* what kn_cg_sg_attrs allocated */
/* A copy of n's attributes in which every GRAPH carries its runtime form
 * (kn_attr.sg, runtime/ops/subgraph.h), for kn_attrs_write. Fails, naming
 * the node, for a body op without a runtime kernel or a graph list. Free
 * *out_pool (which owns *out_attrs) with kn_cg_sg_free. */
int kn_cg_sg_attrs(const kn_node *n, kn_attr **out_attrs, kn_cg_sgpool **out_pool);
void kn_cg_sg_free(kn_cg_sgpool *p);

/* ---- lowerings -------------------------------------------------------------- */

typedef struct kn_cg_lowering {
    kn_op op;
    kn_cg_lower_fn lower;
} kn_cg_lowering;

extern const kn_cg_lowering kn_cg_lower_elementwise[]; /* lower_elementwise.c */
extern const kn_cg_lowering kn_cg_lower_reduce[];      /* lower_reduce.c: reductions, softmax, norms, pooling */
extern const kn_cg_lowering kn_cg_lower_movement[];    /* lower_movement.c */
/* A node indifferent to layout (lower_dnnl.c): run on its rank-4 operands'
 * dims in NHWC order with its axis mapped (kn_rt_opnode_exec,
 * KN_OPNODE_NHWC_ALL / NATIVE_ALL), its runtime kernel computes the NHWC
 * form of its NCHW result. Concat and Split of rank-4 values, Add, Sub, Mul
 * and Div of rank-4 values or of one by a single element, and a Resize of a
 * rank-4 value over all its axes (its scales and sizes permuted at run
 * time); f32 only. */
bool kn_cg_layout_agnostic(const kn_node *n);
/* True if input `index` of such a node carries its layout (Split's sizes
 * and Resize's scales do not). */
bool kn_cg_agnostic_operand(const kn_node *n, int index);
/* The rank-4 operands and results of such a node, in turn (Split's sizes
 * and Resize's scales left out): *k from 0 on; NULL at the end. After a
 * call, *k > n->n_inputs says the value returned is a result. */
const kn_value *kn_cg_agnostic_value(const kn_node *n, int *k);
/* True if the bytes of a rank-4 value are the same in NCHW and NHWC (and in
 * a blocked layout): one channel, or one pixel. */
bool kn_cg_layout_free(const kn_value *v);
/* Decides the layout of every activation oneDNN hands over (lower_dnnl.c):
 * fills cg->layouts (the caller frees it), after the plan and cg->dyn are
 * set and before any node is emitted. */
int kn_cg_plan_layouts(kn_cg *cg);
extern const kn_cg_lowering kn_cg_lower_dnnl[];        /* lower_dnnl.c: Conv, MatMul, Gemm */

/* ---- the compiler ----------------------------------------------------------- */

/* A dynamic dim (`kiln compile --max NAME=N`, `--shape x=1x3x[32..640%32]`).
 * Its value n is the dim divided by its alignment A (the dim is A*n; A = 1
 * without alignment), from min to max (values of n; min 0 stands for 1,
 * align 0 for 1). The model given to kn_compile_cpu is inferred with every
 * such dim at its maximum; probe[0] and probe[1] are the same model
 * imported again and inferred with this dim at n = min and min + 1 (the
 * others at their maximum), owned by the caller. The compiler compares them
 * value by value to find each dim's affine form in n. */
typedef struct kn_compile_sym {
    const char *name;
    int64_t max;
    int64_t min;
    int64_t align;
    kn_model *probe[2];
    /* set by the data, not by an input (the token count of --pack-tokens,
     * kn_abi_sym.from_data): no probes; codegen/cpu/dyn.c adds it */
    bool from_data;
} kn_compile_sym;

static inline int64_t kn_compile_sym_min(const kn_compile_sym *s) { return s->min > 0 ? s->min : 1; }
static inline int64_t kn_compile_sym_align(const kn_compile_sym *s) { return s->align > 0 ? s->align : 1; }

typedef struct kn_compile_opts {
    const char *output;      /* ART.so path (required unless static_output only) */
    const char *static_output; /* ART.a path or NULL */
    const char *header;      /* ART.h path or NULL */
    const char *name;        /* C identifier; NULL → from the output file name */
    const char *target;      /* "native" (default), "x86-64-v2", "x86-64-v3", "x86-64-v4" */
    int opt_level;           /* 0..3 (default 3) */
    bool external_weights;   /* weights in ART.so.weights, mmapped at open */
    bool report;             /* print how each node was lowered */
    bool stats;              /* time of each code generation phase to stderr (--stats) */
    int layout;              /* KN_CG_LAYOUT_*: activations between convolutions */
    int conv_algo;           /* KN_CONV_ALGO_* (kiln/abi.h): --conv-algo */
    uint64_t model_hash;     /* of the ONNX bytes and options */
    int n_syms;              /* dynamic dims, at most KN_MAX_SYMS */
    kn_compile_sym syms[KN_MAX_SYMS];
} kn_compile_opts;

/* kn_compile_opts.layout: AUTO lets convolutions hand each other their
 * activations in oneDNN's preferred layout (see lower_dnnl.c); NCHW keeps
 * every value in its plain layout. */
enum { KN_CG_LAYOUT_AUTO = 0, KN_CG_LAYOUT_NCHW = 1 };

/* How each node was lowered, for --report. */
typedef enum kn_lowered_as { KN_LOWERED_GENERATED, KN_LOWERED_DNNL, KN_LOWERED_RUNTIME, KN_LOWERED_ALIAS } kn_lowered_as;

/* Compiles m (main graph with static shapes, inferred) into the artifacts
 * named in opts. Writes atomically: on any failure no output file is left.
 * With opts->report, prints one line per node to stdout. */
int kn_compile_cpu(kn_model *m, const kn_compile_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
