/*
 * codegen/cpu/compile.c — the CPU compiler driver (kn_compile_cpu).
 *
 * Checks that the graph can be compiled (static input shapes),
 * plans memory (codegen/plan/plan.c), creates the LLVM target machine for the requested
 * target, emits one function per node (a lowering from the four tables, or a
 * call to the op's runtime kernel through kn_rt_opnode_exec), a `run`
 * function calling them in order, the serialized meta (with the profiling
 * records of profile_info.c), the weights and the exported descriptor (with
 * the table of the functions `run` calls, for kn_session_profile); then
 * verifies, optimizes (O0..O3 with the loop and SLP vectorizers), emits an
 * object into a temporary folder and links/archives it (link.c). Every
 * output file is written under a temporary name and renamed into place only
 * when all of them succeeded.
 *
 * A value whose shape is still not static after folding depends on input
 * data (NonZero, a Reshape to a shape that is an input, ...). The plan puts
 * it in a session slot; every node that reads or writes one runs through its
 * runtime kernel, which sizes the value at run time (kiln/abi.h).
 *
 * Control flow (If, Loop, Scan) runs through the op's runtime kernel with
 * its bodies serialized into the node's attributes (subgraph.c); the outer
 * values the bodies read are extra inputs of that node (its captures).
 * Dynamic dims (`--max NAME=N`, dyn.h): the model arrives inferred at the
 * maxima with probe models beside it; each probe goes through the same
 * checks and folding, dyn.c compares them, and nodes with dynamic operands
 * are emitted as a loop over rows or run by their runtime kernel.
 */
#include "driver.h"
#include "dyn.h"
#include "par.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "eval.h"
#include "fused_int.h"
#include "kiln/kiln.h"
#include "opdesc.h"
#include "pass.h"

typedef struct compile_state {
    kn_model *m;
    const kn_compile_opts *o;
    kn_graph *g;
    kn_plan plan;
    kn_dyn dyn;
    kn_meta meta;
    kn_cg cg;
    char name[128];
    char target_desc[160];
    kn_lowered_as *how;          /* per node index */
    char **fallback_why;         /* per node index: why an op with a lowering runs its runtime kernel, or NULL */
    int32_t *node_dnnl;          /* per node index: its first oneDNN record, -1 for none */
    int32_t *node_nhwc;          /* per node index: its kn_abi_opnode.nhwc bits (kn_rt_dynconv_exec) */
    bool *nhwc;                  /* per value id: a dynamic activation dynconv nodes exchange channels-last */
    kn_abi_tensor **op_tensors;  /* per opnode: its inputs then outputs */
    unsigned char **op_attrs;    /* per opnode */
    LLVMValueRef *node_fns;      /* per node index; NULL for aliases */
    kn_cg_share *share;          /* generated bodies by structure (share.c) */
    int n_shared_nodes;          /* generated nodes whose body is an earlier node's */
    LLVMValueRef copy_fn;        /* copies the outputs not computed in place, or NULL */
    int64_t copy_bytes;          /* what copy_fn copies */
    LLVMValueRef desc;           /* the exported kn_artifact_desc global */
    unsigned char *meta_bytes;
    size_t meta_len;
    char tmpdir[256];
    char obj[300];
} compile_state;

/* ---- checks ------------------------------------------------------------------ */

static void shape_str(const kn_shape *s, char *buf, size_t len)
{
    if (s->rank < 0) {
        snprintf(buf, len, "of unknown rank");
        return;
    }
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < s->rank && k < len; d++) {
        if (s->dims[d] >= 0) k += (size_t)snprintf(buf + k, len - k, "%s%lld", d ? "," : "", (long long)s->dims[d]);
        else k += (size_t)snprintf(buf + k, len - k, "%s%s", d ? "," : "", s->sym[d] ? s->sym[d] : "?");
    }
    if (k < len) snprintf(buf + k, len - k, "]");
}

static int dynamic_error(const kn_value *v)
{
    char sh[256];
    shape_str(&v->shape, sh, sizeof sh);
    for (int d = 0; d < v->shape.rank; d++)
        if (v->shape.dims[d] < 0 && v->shape.sym[d])
            return kn_error(KN_ERR_UNSUPPORTED,
                            "value '%s' has a dynamic shape %s: pin it with --shape %s=N or bound it with --max %s=N",
                            v->name, sh, v->shape.sym[d], v->shape.sym[d]);
    if (!v->producer)
        return kn_error(KN_ERR_UNSUPPORTED, "value '%s' has a dynamic shape %s: pin it with --shape %s=DIMS",
                        v->name, sh, v->name);
    return kn_error(KN_ERR_UNSUPPORTED,
                    "value '%s' (output of node '%s') has a dynamic shape %s: its size depends on data, and the "
                    "cpu backend has no runtime kernel for this op to size it at run time",
                    v->name, v->producer->name, sh);
}

/* What folding cannot fix: dynamic inputs. */
static int check_structure(kn_graph *g)
{
    int st = kn_graph_toposort(g);
    if (st) return st;
    for (int i = 0; i < g->n_inputs; i++)
        if (!g->inputs[i]->const_data && !kn_shape_is_static(&g->inputs[i]->shape)) return dynamic_error(g->inputs[i]);
    return KN_OK;
}

/* After folding: a node that produces a data-dependent value must have a
 * runtime kernel (only those size their outputs at run time). */
static int check_dynamic(const kn_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const kn_node *n = g->nodes[i];
        for (int k = 0; k < n->n_outputs; k++) {
            const kn_value *v = n->outputs[k];
            if (v && !v->const_data && !kn_shape_is_static(&v->shape) && !kn_op_exec(n->op))
                return dynamic_error(v);
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        const kn_value *v = g->outputs[i];
        if (!v->producer && !v->const_data && !(v->flags & KN_VALUE_GRAPH_INPUT))
            return kn_error(KN_ERR_INVALID, "graph output '%s' is not computed by any node", v->name);
    }
    return KN_OK;
}

/* ---- constant folding ------------------------------------------------------------ */

/* report label of a node whose outputs were all evaluated at compile time */
#define LOWERED_FOLDED ((kn_lowered_as)4)
/* ... and of a node emitted for one row in a loop over a dynamic dim (dyn.h) */
#define LOWERED_ROWS ((kn_lowered_as)5)
#define LOWERED_ROWS_DNNL ((kn_lowered_as)6)
/* ... and of a generated node whose units run on the session's threads (par.h) */
#define LOWERED_PARALLEL ((kn_lowered_as)7)
/* ... and of a conv or pooling over dynamic spatial dims run by oneDNN at the run's shape (dynconv.c) */
#define LOWERED_DYN_DNNL ((kn_lowered_as)8)


/* Code generation needs static shapes, and folding is what makes shapes
 * that come from Shape → ... → Reshape chains static. The folding itself is
 * the fold-constants pass (passes/fold_constants.c); it is run here too so
 * that a caller who ran no pipeline (or -O0's) still gets it. On an already
 * folded graph it finds nothing to do. */
static int fold_constants(kn_model *m)
{
    kn_pass_log log = {0};
    kn_pipeline_opts po = {.passes = "fold-constants"};
    int st = kn_pass_run_pipeline(m, &po, &log);
    kn_pass_log_free(&log);
    return st;
}

static int model_name(compile_state *s)
{
    const kn_compile_opts *o = s->o;
    if (o->name) {
        bool ok = *o->name && !(o->name[0] >= '0' && o->name[0] <= '9') && strlen(o->name) < sizeof s->name;
        for (const char *p = o->name; *p && ok; p++)
            ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
        if (!ok) return kn_error(KN_ERR_INVALID, "--name '%s' is not a C identifier", o->name);
        snprintf(s->name, sizeof s->name, "%s", o->name);
        return KN_OK;
    }
    const char *path = o->output ? o->output : o->static_output;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t k = 0;
    if (*base >= '0' && *base <= '9') s->name[k++] = '_';
    for (const char *p = base; *p && *p != '.' && k + 1 < sizeof s->name; p++) {
        bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
        s->name[k++] = alnum ? *p : '_';
    }
    s->name[k] = '\0';
    if (!k) snprintf(s->name, sizeof s->name, "model");
    return KN_OK;
}

/* ---- target -------------------------------------------------------------------- */

static uint64_t features_from_string(const char *f)
{
    static const struct {
        const char *name;
        uint64_t bit;
    } map[] = {
        {"sse4.2", KN_CPU_SSE42},       {"avx", KN_CPU_AVX},           {"avx2", KN_CPU_AVX2},
        {"fma", KN_CPU_FMA},            {"f16c", KN_CPU_F16C},         {"avx512f", KN_CPU_AVX512F},
        {"avx512bw", KN_CPU_AVX512BW},  {"avx512dq", KN_CPU_AVX512DQ}, {"avx512vl", KN_CPU_AVX512VL},
        {"avx512vnni", KN_CPU_AVX512VNNI}, {"avx512bf16", KN_CPU_AVX512BF16}, {"avx512fp16", KN_CPU_AVX512FP16},
    };
    uint64_t bits = 0;
    while (f && *f) {
        const char *end = strchr(f, ',');
        size_t len = end ? (size_t)(end - f) : strlen(f);
        if (len > 1 && f[0] == '+')
            for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
                if (strlen(map[i].name) == len - 1 && !strncmp(map[i].name, f + 1, len - 1)) bits |= map[i].bit;
        f = end ? end + 1 : NULL;
    }
    return bits;
}

static int make_target_machine(compile_state *s)
{
    const char *target = s->o->target && *s->o->target ? s->o->target : "native";
    static const uint64_t v2 = KN_CPU_SSE42, v3 = v2 | KN_CPU_AVX | KN_CPU_AVX2 | KN_CPU_FMA | KN_CPU_F16C,
                          v4 = v3 | KN_CPU_AVX512F | KN_CPU_AVX512BW | KN_CPU_AVX512DQ | KN_CPU_AVX512VL;
    bool native = !strcmp(target, "native") || !strcmp(target, "cpu");
    if (!native && strcmp(target, "x86-64-v2") && strcmp(target, "x86-64-v3") && strcmp(target, "x86-64-v4"))
        return kn_error(KN_ERR_UNSUPPORTED,
                        "target '%s' is not supported by the cpu backend: use native, x86-64-v2, x86-64-v3 or "
                        "x86-64-v4", target);
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter())
        return kn_error(KN_ERR_UNSUPPORTED, "LLVM has no code generator for this machine");
    char *triple = LLVMGetDefaultTargetTriple(), *err = NULL;
    LLVMTargetRef t;
    if (LLVMGetTargetFromTriple(triple, &t, &err)) {
        int st = kn_error(KN_ERR_UNSUPPORTED, "LLVM target '%s': %s", triple, err ? err : "unknown");
        LLVMDisposeMessage(err);
        LLVMDisposeMessage(triple);
        return st;
    }
    char *cpu = native ? LLVMGetHostCPUName() : NULL, *feat = native ? LLVMGetHostCPUFeatures() : NULL;
    static const LLVMCodeGenOptLevel levels[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess, LLVMCodeGenLevelDefault,
                                                 LLVMCodeGenLevelAggressive};
    int lvl = s->o->opt_level < 0 ? 0 : s->o->opt_level > 3 ? 3 : s->o->opt_level;
    s->cg.tm = LLVMCreateTargetMachine(t, triple, native ? cpu : target, native ? feat : "", levels[lvl],
                                       LLVMRelocPIC, LLVMCodeModelDefault);
    if (native) {
        s->meta.cpu_features = features_from_string(feat);
        snprintf(s->target_desc, sizeof s->target_desc, "native (%s)", cpu);
    } else {
        s->meta.cpu_features = !strcmp(target, "x86-64-v2") ? v2 : !strcmp(target, "x86-64-v3") ? v3 : v4;
        snprintf(s->target_desc, sizeof s->target_desc, "%s", target);
    }
    if (native) {
        LLVMDisposeMessage(cpu);
        LLVMDisposeMessage(feat);
    }
    if (!s->cg.tm) {
        LLVMDisposeMessage(triple);
        return kn_error(KN_ERR_UNSUPPORTED, "LLVM cannot create a target machine for '%s'", target);
    }
    s->cg.mod = LLVMModuleCreateWithNameInContext(s->name, s->cg.ctx);
    LLVMSetTarget(s->cg.mod, triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(s->cg.tm);
    LLVMSetModuleDataLayout(s->cg.mod, dl);
    LLVMDisposeTargetData(dl);
    LLVMDisposeMessage(triple);
    return KN_OK;
}

/* ---- meta --------------------------------------------------------------------- */

/* The plan's slot of v, or -1 if v has a static place. */
static int slot_of(const kn_plan *p, const kn_value *v)
{
    if (!v || v->id < 0 || v->id >= p->n_where || p->where[v->id].loc != KN_LOC_DYNAMIC) return -1;
    return (int)p->where[v->id].offset;
}

/* kn_cg_abi_tensor, plus the slot of a dynamic value (which has no size). */
static void abi_tensor(const compile_state *s, const kn_value *v, kn_abi_tensor *out)
{
    const kn_plan *p = &s->plan;
    kn_cg_abi_tensor(v, out);
    kn_dyn_fill_abi(&s->dyn, v, out);
    int slot = slot_of(p, v);
    if (slot < 0) return;
    out->slot = slot + 1;
    out->nbytes = 0;
    if (out->rank < 0 || out->rank > 8) {
        out->rank = -1;
        memset(out->dims, 0, sizeof out->dims);
        return;
    }
    for (int d = 0; d < out->rank; d++)
        if (out->dims[d] < 0) out->dims[d] = -1;
}

/* A node that reads or writes a dynamic value runs through its runtime kernel. */
static bool touches_dynamic(const kn_plan *p, const kn_node *n)
{
    for (int k = 0; k < n->n_inputs; k++)
        if (slot_of(p, n->inputs[k]) >= 0) return true;
    for (int k = 0; k < n->n_outputs; k++)
        if (slot_of(p, n->outputs[k]) >= 0) return true;
    return false;
}

static int init_meta(compile_state *s)
{
    kn_meta *mt = &s->meta;
    const kn_graph *g = s->g;
    mt->model_hash = s->o->model_hash;
    mt->name = s->name;
    mt->target = s->target_desc;
    mt->kiln_version = kn_runtime_version();
    for (int i = 0; i < g->n_inputs; i++) mt->n_inputs += !g->inputs[i]->const_data;
    mt->n_outputs = g->n_outputs;
    mt->inputs = calloc((size_t)mt->n_inputs + 1, sizeof *mt->inputs);
    mt->outputs = calloc((size_t)mt->n_outputs + 1, sizeof *mt->outputs);
    if (!mt->inputs || !mt->outputs) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0, k = 0; i < g->n_inputs; i++) {
        if (g->inputs[i]->const_data) continue;
        kn_cg_abi_tensor(g->inputs[i], &mt->inputs[k]);
        kn_dyn_fill_abi(&s->dyn, g->inputs[i], &mt->inputs[k++]);
    }
    for (int i = 0; i < g->n_outputs; i++) abi_tensor(s, g->outputs[i], &mt->outputs[i]);
    if ((mt->n_syms = s->dyn.n_syms) > 0 && !(mt->syms = calloc((size_t)mt->n_syms, sizeof *mt->syms)))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int k = 0; k < mt->n_syms; k++)
        mt->syms[k] = (kn_abi_sym){.name = s->dyn.syms[k].name, .max = s->dyn.syms[k].max,
                                   .min = kn_compile_sym_min(&s->dyn.syms[k]),
                                   .align = kn_compile_sym_align(&s->dyn.syms[k]),
                                   .from_data = s->dyn.syms[k].from_data};
    mt->n_slots = s->plan.n_slots;
    mt->arena_bytes = s->plan.arena_bytes;
    mt->intermediate_bytes = s->plan.intermediate_bytes;
    mt->weights_bytes = s->plan.weights_bytes;
    mt->weights_hash = kn_weights_hash(s->plan.weights, (size_t)s->plan.weights_bytes);
    return KN_OK;
}

static void free_meta(compile_state *s)
{
    for (int i = 0; i < s->meta.n_opnodes; i++) {
        free(s->op_tensors[i]);
        free(s->op_attrs[i]);
    }
    free(s->op_tensors);
    free(s->op_attrs);
    free(s->meta.inputs);
    free(s->meta.outputs);
    free(s->meta.dnnl);
    free(s->meta.opnodes);
    kn_cg_profile_info_free(&s->meta);
    free(s->meta.syms);
    free(s->meta_bytes);
}

/* ---- code ---------------------------------------------------------------------- */

static void init_cg(compile_state *s)
{
    kn_cg *cg = &s->cg;
    kn_cg_init_types(cg);
    cg->model = s->m;
    cg->g = s->g;
    cg->plan = &s->plan;
    cg->meta = &s->meta;
    cg->plain_layout = s->o->layout == KN_CG_LAYOUT_NCHW;
    cg->conv_algo = s->o->conv_algo;
    cg->dyn = &s->dyn;
}

/* The lowering of op in the tables from the `from`-th on (the oneDNN table
 * is the 0th); *table says which table it is from. */
static kn_cg_lower_fn find_lowering_from(kn_op op, size_t from, size_t *table)
{
    const kn_cg_lowering *tables[] = {kn_cg_lower_dnnl, kn_cg_lower_elementwise, kn_cg_lower_reduce,
                                      kn_cg_lower_movement};
    for (size_t t = from; t < sizeof tables / sizeof tables[0]; t++)
        for (const kn_cg_lowering *l = tables[t]; l->lower; l++)
            if (l->op == op) {
                *table = t;
                return l->lower;
            }
    return NULL;
}

static int grow(void **p, int n, int *cap, size_t elem)
{
    if (n < *cap) return KN_OK;
    int nc = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, elem * (size_t)nc);
    if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
    *p = q;
    *cap = nc;
    return KN_OK;
}

/* The attribute blob of n; graph attributes in their runtime form. */
static int opnode_attrs(const kn_node *n, unsigned char **out_bytes, size_t *out_len)
{
    kn_cg_sgpool *pool = NULL;
    kn_attr *attrs = n->attrs;
    int st = kn_cg_sg_attrs(n, &attrs, &pool);
    if (!st) st = kn_attrs_write(attrs, n->n_attrs, out_bytes, out_len);
    kn_cg_sg_free(pool);
    if (st) kn_error_prefix("node '%s' (%s): ", n->name, n->op_type);
    return st;
}

/* Appends the opnode record of n, whose subgraphs read caps[0..n_caps), to
 * the meta; returns its index in *out_index. */
static int add_opnode(compile_state *s, const kn_node *n, kn_value *const *caps, int n_caps, int *out_index)
{
    kn_meta *mt = &s->meta;
    int cap = s->cg.cap_opnodes, cap2 = cap, cap3 = cap;
    int st = grow((void **)&mt->opnodes, mt->n_opnodes, &cap, sizeof *mt->opnodes);
    if (!st) st = grow((void **)&s->op_tensors, mt->n_opnodes, &cap2, sizeof *s->op_tensors);
    if (!st) st = grow((void **)&s->op_attrs, mt->n_opnodes, &cap3, sizeof *s->op_attrs);
    if (st) return st;
    s->cg.cap_opnodes = cap;
    int n_in = n->n_inputs + n_caps;
    kn_abi_tensor *ts = calloc((size_t)(n_in + n->n_outputs) + 1, sizeof *ts);
    unsigned char *attrs = NULL;
    size_t attrs_len = 0;
    if (!ts) return kn_error(KN_ERR_NOMEM, "out of memory");
    if ((st = opnode_attrs(n, &attrs, &attrs_len))) {
        free(ts);
        return st;
    }
    for (int i = 0; i < n->n_inputs; i++) abi_tensor(s, n->inputs[i], &ts[i]);
    for (int i = 0; i < n_caps; i++) abi_tensor(s, caps[i], &ts[n->n_inputs + i]);
    for (int i = 0; i < n->n_outputs; i++) abi_tensor(s, n->outputs[i], &ts[n_in + i]);
    int idx = mt->n_opnodes++;
    s->op_tensors[idx] = ts;
    s->op_attrs[idx] = attrs;
    mt->opnodes[idx] = (kn_abi_opnode){.op = n->op, .n_inputs = n_in, .n_outputs = n->n_outputs,
                                       .n_captures = n_caps, .opset = kn_node_opset(n), .name = n->name,
                                       .op_type = n->op_type, .inputs = ts, .outputs = ts + n_in, .attrs = attrs,
                                       .attrs_len = (int64_t)attrs_len};
    /* autocast's Attention (passes/autocast.c): the runtime's bf16 kernel,
     * whose dot products need AVX512-BF16 (as oneDNN's bf16 records do) */
    if ((n->op == KN_OP_Attention || n->op == KN_OP_PackedAttention) && n->compute == KN_BF16) {
        mt->opnodes[idx].compute = KN_BF16;
        mt->cpu_features |= KN_CPU_AVX512BF16;
    }
    *out_index = idx;
    return KN_OK;
}

/* Fills a stack array of n pointers (at least one slot) and returns it. */
static LLVMValueRef ptr_array(kn_cg *cg, kn_value *const *vals, int n, const char *name)
{
    LLVMValueRef arr = LLVMBuildArrayAlloca(cg->b, cg->t_ptr, kn_cg_i32(cg, n > 0 ? n : 1), name);
    for (int i = 0; i < n; i++) {
        LLVMValueRef idx = kn_cg_i64(cg, i);
        LLVMValueRef slot = LLVMBuildGEP2(cg->b, cg->t_ptr, arr, &idx, 1, "");
        LLVMBuildStore(cg->b, vals[i] ? kn_cg_ptr(cg, vals[i]) : LLVMConstNull(cg->t_ptr), slot);
    }
    return arr;
}

/* The runtime kernel of n, called through `entry` (kn_rt_opnode_exec, or
 * kn_rt_dynconv_exec for oneDNN at the run's shape); the outer values its
 * subgraphs read are passed after its own inputs. */
static int emit_opnode_call(compile_state *s, const kn_node *n, const char *entry, int32_t nhwc)
{
    kn_cg *cg = &s->cg;
    if (!kn_op_exec(n->op))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "the cpu backend has neither a lowering nor a runtime kernel "
                                                     "for this op");
    kn_value **caps = NULL, **ins = NULL;
    int n_caps = 0, index = 0, st = kn_node_captures(n, &caps, &n_caps);
    if (!st) st = add_opnode(s, n, caps, n_caps, &index);
    if (!st) s->meta.opnodes[index].nhwc = nhwc;
    if (!st && !(ins = calloc((size_t)(n->n_inputs + n_caps) + 1, sizeof *ins)))
        st = kn_error(KN_ERR_NOMEM, "out of memory");
    if (st) {
        free(caps);
        return st;
    }
    if (n->n_inputs) memcpy(ins, n->inputs, sizeof *ins * (size_t)n->n_inputs);
    if (n_caps) memcpy(ins + n->n_inputs, caps, sizeof *ins * (size_t)n_caps);
    LLVMValueRef in = ptr_array(cg, ins, n->n_inputs + n_caps, "in");
    free(ins);
    free(caps);
    LLVMValueRef out = ptr_array(cg, n->outputs, n->n_outputs, "out");
    LLVMTypeRef params[4] = {cg->t_ptr, cg->t_i32, cg->t_ptr, cg->t_ptr};
    LLVMTypeRef fty = LLVMFunctionType(cg->t_i32, params, 4, 0);
    LLVMValueRef fn = LLVMGetNamedFunction(cg->mod, entry);
    if (!fn) fn = LLVMAddFunction(cg->mod, entry, fty);
    LLVMValueRef args[4] = {cg->a_exec, kn_cg_i32(cg, index), in, out};
    LLVMBuildRet(cg->b, LLVMBuildCall2(cg->b, fty, fn, args, 4, ""));
    return KN_OK;
}

static int emit_fallback(compile_state *s, const kn_node *n) { return emit_opnode_call(s, n, "kn_rt_opnode_exec", 0); }

static bool is_const(const kn_value *v) { return !v || v->const_data; }

/* A 2-D f32 Conv/FusedConv (constant weights and bias), MaxPool (no
 * indices) or AveragePool (no ceil_mode) that oneDNN can run at the run's
 * shape (runtime/src/dnnl/dynconv.c). */
/* n's post-ops (a FusedConv's) can go to oneDNN as they are
 * (kn_fused_posts_collide). */
static bool posts_ok(const kn_node *n)
{
    kn_opdesc d;
    bool has[1];
    kn_node_opdesc(n, &d, has);
    kn_abi_post post[KN_FUSED_MAX_POST];
    int np;
    if (kn_fused_posts(&d, post, &np)) {
        kn_error_clear(); /* the runtime kernel reports it, naming the node */
        return false;
    }
    return !kn_fused_posts_collide(post, np);
}

static bool dynconv_ok(const kn_node *n)
{
    const kn_value *x = n->n_inputs > 0 ? n->inputs[0] : NULL, *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    if (!x || !y || x->dtype != KN_F32 || y->dtype != KN_F32 || x->shape.rank != 4 || y->shape.rank != 4) return false;
    switch (n->op) {
    case KN_OP_Conv: case KN_OP_FusedConv:
        return n->n_inputs >= 2 && is_const(n->inputs[1]) && (n->n_inputs < 3 || is_const(n->inputs[2])) &&
               posts_ok(n);
    case KN_OP_MaxPool:
        return (n->n_outputs < 2 || !n->outputs[1]) && kn_attr_int(n, "storage_order", 0) == 0;
    case KN_OP_AveragePool: return kn_attr_int(n, "ceil_mode", 0) == 0;
    default: return false;
    }
}

/* Records, for --report, why node i runs its runtime kernel although its op
 * has a lowering: a silent fallback is how a broken lowering hides (the
 * kernel is the reference evaluator's own code, so outputs still match).
 * Reads the declining lowering's message, so call it before kn_error_clear. */
static void note_fallback(compile_state *s, int i)
{
    const kn_node *n = s->g->nodes[i];
    size_t table = 0;
    if (!find_lowering_from(n->op, 0, &table)) return;
    const char *msg = kn_last_error();
    char why[512];
    if (touches_dynamic(&s->plan, n))
        snprintf(why, sizeof why, "it reads or writes a value whose size depends on data");
    else
        snprintf(why, sizeof why, "its lowering declined: %s",
                 msg && *msg ? msg : "no reason given (a dtype, attribute or shape it does not handle)");
    free(s->fallback_why[i]);
    s->fallback_why[i] = strdup(why); /* NULL on failure: the report just has no remark */
}

/* A node with dynamic operands: its lowering for one row in a loop over
 * the rows when dyn.c allows it, else its runtime kernel. */
/* The body of node i's function (begun) when no lowering took it: a
 * convolution or pooling at its run-time shape on oneDNN
 * (kn_rt_dynconv_exec), else its runtime kernel. */
static bool runs_dyn_deconv(compile_state *s, const kn_node *n);

static int emit_kernel_call(compile_state *s, int i)
{
    const kn_node *n = s->g->nodes[i];
    if (!touches_dynamic(&s->plan, n) && dynconv_ok(n)) {
        s->how[i] = LOWERED_DYN_DNNL;
        free(s->fallback_why[i]);
        s->fallback_why[i] = NULL;
        const kn_value *res = n->op == KN_OP_FusedConv ? kn_node_input(n, KN_FUSED_RESIDUAL) : NULL;
        s->node_nhwc[i] = (s->nhwc[n->inputs[0]->id] ? KN_OPNODE_NHWC_SRC : 0) |
                          (s->nhwc[n->outputs[0]->id] ? KN_OPNODE_NHWC_DST : 0) |
                          (res && s->nhwc[res->id] ? KN_OPNODE_NHWC_RES : 0);
        return emit_opnode_call(s, n, "kn_rt_dynconv_exec", s->node_nhwc[i]);
    }
    s->how[i] = KN_LOWERED_RUNTIME;
    if (s->node_nhwc && runs_dyn_deconv(s, n)) {
        s->node_nhwc[i] = (s->nhwc[n->inputs[0]->id] ? KN_OPNODE_NHWC_SRC : 0) |
                          (s->nhwc[n->outputs[0]->id] ? KN_OPNODE_NHWC_DST : 0);
        return emit_opnode_call(s, n, "kn_rt_opnode_exec", s->node_nhwc[i]);
    }
    if (s->node_nhwc && (s->node_nhwc[i] == KN_OPNODE_NHWC_ALL || s->node_nhwc[i] == KN_OPNODE_NATIVE_ALL))
        return emit_opnode_call(s, n, "kn_rt_opnode_exec", s->node_nhwc[i]); /* plan_dyn_nhwc set it */
    return emit_fallback(s, n);
}

/* The lowering a node with dynamic operands runs in rows, if any. */
static kn_cg_lower_fn dyn_lowering(compile_state *s, const kn_node *n)
{
    size_t table = 0;
    kn_cg_lower_fn lower = touches_dynamic(&s->plan, n) ? NULL : find_lowering_from(n->op, 0, &table), alt;
    /* a pooling in rows stays generated code (lower_dnnl.c: pool_record) */
    if (lower && table == 0 && (alt = find_lowering_from(n->op, 1, &table))) lower = alt;
    return lower;
}

static int emit_dynamic_node(compile_state *s, int i, const char *fname)
{
    const kn_node *n = s->g->nodes[i];
    kn_cg_lower_fn lower = dyn_lowering(s, n);
    int sym = lower ? kn_dyn_row_sym(&s->dyn, n) : -1;
    int dnnl_before = s->meta.n_dnnl;
    int st = sym >= 0 ? kn_dyn_emit_rows(&s->cg, &s->dyn, n, sym, lower, fname, &s->node_fns[i]) : KN_ERR_UNSUPPORTED;
    if (st == KN_OK) {
        s->how[i] = s->meta.n_dnnl > dnnl_before ? LOWERED_ROWS_DNNL : LOWERED_ROWS;
        if (s->meta.n_dnnl > dnnl_before) s->node_dnnl[i] = dnnl_before;
        return KN_OK;
    }
    if (st != KN_ERR_UNSUPPORTED) return st;
    note_fallback(s, i);
    kn_error_clear();
    s->meta.n_dnnl = dnnl_before;
    s->node_fns[i] = kn_cg_begin_function(&s->cg, fname, true);
    if (!touches_dynamic(&s->plan, n) && kn_dyn_emit_copy(&s->cg, &s->dyn, n) == KN_OK) {
        LLVMBuildRet(s->cg.b, kn_cg_i32(&s->cg, 0));
        s->how[i] = KN_LOWERED_GENERATED;
        return KN_OK;
    }
    return emit_kernel_call(s, i);
}

/* Node i as one function by `lower`; KN_ERR_UNSUPPORTED, with nothing left
 * behind, when the lowering declines. */
static int emit_whole(compile_state *s, int i, const char *fname, kn_cg_lower_fn lower)
{
    kn_cg *cg = &s->cg;
    const kn_node *n = s->g->nodes[i];
    int dnnl_before = s->meta.n_dnnl;
    LLVMValueRef fn = kn_cg_begin_function(cg, fname, true);
    int st = lower(cg, n);
    if (st == KN_OK) {
        if (!LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(cg->b)))
            LLVMBuildRet(cg->b, LLVMBuildLoad2(cg->b, cg->t_i32, cg->status, ""));
        s->how[i] = s->meta.n_dnnl > dnnl_before ? KN_LOWERED_DNNL : KN_LOWERED_GENERATED;
        if (s->meta.n_dnnl > dnnl_before) s->node_dnnl[i] = dnnl_before;
        s->node_fns[i] = fn;
        kn_cg_tag_aliases(cg, fn, n);
        return KN_OK;
    }
    /* a lowering that declined may have emitted part of a body: start over */
    s->meta.n_dnnl = dnnl_before;
    LLVMDeleteFunction(fn);
    return st;
}

/* Node i through its runtime kernel, the reason its lowering declined
 * (still kn_last_error) kept for --report. */
static int emit_runtime(compile_state *s, int i, const char *fname)
{
    note_fallback(s, i);
    kn_error_clear();
    LLVMValueRef fn = kn_cg_begin_function(&s->cg, fname, true);
    s->node_fns[i] = fn;
    return emit_kernel_call(s, i);
}

/* ---- shared bodies ------------------------------------------------------------ */

/* n's stored operands, each once: inputs, then outputs. -1 when there are
 * too many to pass. */
static int node_operands(const compile_state *s, const kn_node *n, const kn_value **ops)
{
    int k = 0;
    for (int side = 0; side < 2; side++) {
        kn_value *const *vals = side ? n->outputs : n->inputs;
        int nv = side ? n->n_outputs : n->n_inputs;
        for (int j = 0; j < nv; j++) {
            const kn_value *v = vals[j];
            if (!v || v->id < 0 || v->id >= s->plan.n_where || s->plan.where[v->id].loc < 0) continue;
            bool seen = false;
            for (int q = 0; q < k && !seen; q++) seen = ops[q] == v;
            if (seen) continue;
            if (k == KN_CG_MAX_OPS) return -1;
            ops[k++] = v;
        }
    }
    return k;
}

/* The definitions added to the module after `last` (NULL: from the first),
 * in the order they were added: a body's helpers come before their callers. */
static int new_functions(compile_state *s, LLVMValueRef last, LLVMValueRef **out)
{
    int n = 0, cap = 0;
    *out = NULL;
    for (LLVMValueRef f = last ? LLVMGetNextFunction(last) : LLVMGetFirstFunction(s->cg.mod); f;
         f = LLVMGetNextFunction(f)) {
        if (LLVMIsDeclaration(f)) continue;
        if (grow((void **)out, n + 1, &cap, sizeof **out)) return -1;
        (*out)[n++] = f;
    }
    return n;
}

/* Node i's generated code as a body in operand mode, shared with every
 * earlier node whose body came out the same, called by node i's function
 * with the addresses of its operands (kn_run's calls and the profiler's
 * step table stay as they are). A body used once is inlined into its
 * caller at -O2 and -O3, where its operand addresses become constants
 * again. KN_ERR_UNSUPPORTED, with nothing left behind, when the lowering
 * declines (its reason kept as the last error), or with *usual set when
 * node i cannot have a shared body (its lowering reached a value that is
 * not an operand, or it has too many operands): then it is emitted the
 * usual way. */
static int emit_shared(compile_state *s, int i, const char *fname, kn_cg_lower_fn lower, bool *usual)
{
    kn_cg *cg = &s->cg;
    const kn_node *n = s->g->nodes[i];
    const kn_value *ops[KN_CG_MAX_OPS];
    int n_ops = node_operands(s, n, ops);
    *usual = true;
    if (n_ops < 0 || !s->share) return KN_ERR_UNSUPPORTED;
    *usual = false;
    char bname[80];
    snprintf(bname, sizeof bname, "%s_body", fname);
    LLVMValueRef last = LLVMGetLastFunction(cg->mod), body = NULL;
    int dnnl_before = s->meta.n_dnnl;
    cg->ops = ops;
    cg->n_ops = n_ops;
    cg->op_miss = false;
    kn_lowered_as how = LOWERED_PARALLEL;
    int st = kn_par_emit(cg, n, lower, bname, &body);
    if (st == KN_ERR_UNSUPPORTED) {
        kn_error_clear();
        st = emit_whole(s, i, bname, lower);
        how = s->how[i];
        body = s->node_fns[i];
        s->node_fns[i] = NULL;
    }
    bool miss = cg->op_miss;
    cg->ops = NULL;
    cg->n_ops = 0;
    cg->op_miss = false;
    LLVMValueRef *fresh;
    int n_fresh = new_functions(s, last, &fresh);
    if (n_fresh < 0) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (st == KN_OK && miss) { /* start over the usual way: delete callers before callees */
        for (int k = n_fresh - 1; k >= 0; k--) LLVMDeleteFunction(fresh[k]);
        s->meta.n_dnnl = dnnl_before;
        st = KN_ERR_UNSUPPORTED;
        *usual = true;
    }
    if (st) {
        free(fresh);
        return st;
    }
    uint64_t key[KN_CG_ALIAS_KEY_MAX];
    int n_key = kn_cg_alias_key(cg, n, key);
    if (n_key < 0) n_key = 0; /* too many operands to tag: no metadata to tell apart */
    int before = kn_cg_share_count(s->share);
    if (n_fresh > 0 && fresh[n_fresh - 1] == body) body = kn_cg_share_group(s->share, fresh, n_fresh, key, n_key);
    free(fresh);
    if (kn_cg_share_count(s->share) > before) s->n_shared_nodes++;
    /* node i's function: its operands' addresses in an array, and the body */
    LLVMValueRef fn = kn_cg_begin_function(cg, fname, true);
    LLVMValueRef arr = LLVMBuildAlloca(cg->b, LLVMArrayType(cg->t_ptr, (unsigned)(n_ops ? n_ops : 1)), "ops");
    for (int k = 0; k < n_ops; k++) {
        LLVMValueRef idx = kn_cg_i64(cg, k);
        LLVMBuildStore(cg->b, kn_cg_ptr(cg, ops[k]), LLVMBuildGEP2(cg->b, cg->t_ptr, arr, &idx, 1, ""));
    }
    LLVMValueRef args[5] = {cg->a_exec, cg->a_arena, cg->a_weights, arr, cg->a_outputs};
    LLVMBuildRet(cg->b, LLVMBuildCall2(cg->b, kn_cg_fn_type(cg), body, args, 5, ""));
    s->node_fns[i] = fn;
    s->how[i] = how;
    return KN_OK;
}

static int emit_node(compile_state *s, int i)
{
    kn_cg *cg = &s->cg;
    const kn_node *n = s->g->nodes[i];
    char fname[64];
    snprintf(fname, sizeof fname, "node_%d", n->id);
    if (kn_dyn_node_is_dynamic(&s->dyn, n)) return emit_dynamic_node(s, i, fname);
    if (s->node_nhwc[i] == KN_OPNODE_NATIVE_ALL) { /* between convolutions, on their layout (kn_cg_plan_layouts) */
        s->node_fns[i] = kn_cg_begin_function(cg, fname, true);
        s->how[i] = KN_LOWERED_RUNTIME;
        return emit_kernel_call(s, i);
    }
    size_t table = 0;
    kn_cg_lower_fn lower = touches_dynamic(&s->plan, n) ? NULL : find_lowering_from(n->op, 0, &table);
    int st;
    if (lower && table == 0) { /* a oneDNN primitive, parallel by itself: never cut into row units */
        if ((st = emit_whole(s, i, fname, lower)) != KN_ERR_UNSUPPORTED) return st;
        lower = find_lowering_from(n->op, 1, &table); /* a pooling's generated lowering */
        if (!lower) return emit_runtime(s, i, fname); /* the report says why oneDNN declined */
        kn_error_clear();
    }
    if (lower) {
        bool usual;
        if ((st = emit_shared(s, i, fname, lower, &usual)) != KN_ERR_UNSUPPORTED) return st;
        if (!usual) return emit_runtime(s, i, fname); /* the lowering declined: the report says why */
        kn_error_clear();
    }
    st = lower ? kn_par_emit(cg, n, lower, fname, &s->node_fns[i]) : KN_ERR_UNSUPPORTED;
    if (st == KN_OK) {
        s->how[i] = LOWERED_PARALLEL;
        return KN_OK;
    }
    if (st != KN_ERR_UNSUPPORTED) return st;
    kn_error_clear();
    st = lower ? emit_whole(s, i, fname, lower) : KN_ERR_UNSUPPORTED;
    if (st != KN_ERR_UNSUPPORTED) return st;
    return emit_runtime(s, i, fname);
}

/* The copies at the end of `run` of outputs that are not computed in place
 * (inputs, constants, repeats), as a function of their own so that a
 * profiler can call and time it like a node. s->copy_fn stays NULL when
 * there is nothing to copy. */
static void emit_output_copies(compile_state *s)
{
    kn_cg *cg = &s->cg;
    const kn_graph *g = s->g;
    for (int i = 0; i < g->n_outputs; i++) {
        const kn_value *v = g->outputs[i];
        const kn_abi_ref *r = &s->plan.where[v->id];
        int64_t nb = s->meta.outputs[i].nbytes;
        if ((r->loc == KN_LOC_OUTPUT && r->offset == i) || nb <= 0) continue;
        if (!s->copy_fn) s->copy_fn = kn_cg_begin_function(cg, "copy_outputs", true);
        LLVMValueRef idx = kn_cg_i64(cg, i);
        LLVMValueRef dst = LLVMBuildLoad2(cg->b, cg->t_ptr, LLVMBuildGEP2(cg->b, cg->t_ptr, cg->a_outputs, &idx, 1, ""),
                                          "");
        /* a dynamic output is copied at its run-time size */
        LLVMValueRef bytes = kn_dyn_value_is_dynamic(&s->dyn, v) ? kn_dyn_nbytes(cg, &s->dyn, v) : kn_cg_i64(cg, nb);
        LLVMBuildMemCpy(cg->b, dst, 1, kn_cg_ptr(cg, v), 1, bytes);
        s->copy_bytes += nb;
    }
    if (s->copy_fn) LLVMBuildRet(cg->b, kn_cg_i32(cg, 0));
}

/* `run`: each node function in order, the first failure returned; then the
 * output copies. */
enum { MAX_INLINED_STEPS = 64 };
static void emit_run(compile_state *s)
{
    kn_cg *cg = &s->cg;
    const kn_graph *g = s->g;
    emit_output_copies(s);
    LLVMValueRef run = kn_cg_begin_function(cg, "kn_run", true);
    LLVMValueRef args[5];
    for (int k = 0; k < 5; k++) args[k] = LLVMGetParam(run, (unsigned)k);
    int n_steps = 0;
    for (int i = 0; i < g->n_nodes; i++) n_steps += s->node_fns[i] != NULL;
    /* Inlining every step into `run` saves one call per step, which only
     * matters for small graphs; for large ones it makes one function as big
     * as the model, on which LLVM's optimizations grow faster than linearly
     * (a 100k-node chain spent minutes there), and compiles each step twice
     * (the step table keeps the originals). */
    LLVMAttributeRef noinline = NULL;
    if (n_steps > MAX_INLINED_STEPS)
        noinline = LLVMCreateEnumAttribute(cg->ctx, LLVMGetEnumAttributeKindForName("noinline", 8), 0);
    for (int i = 0; i < g->n_nodes; i++) {
        if (!s->node_fns[i]) continue;
        if (noinline) LLVMAddAttributeAtIndex(s->node_fns[i], LLVMAttributeFunctionIndex, noinline);
        LLVMValueRef st = LLVMBuildCall2(cg->b, kn_cg_fn_type(cg), s->node_fns[i], args, 5, "");
        LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(cg->ctx, run, "fail");
        LLVMBasicBlockRef next = LLVMAppendBasicBlockInContext(cg->ctx, run, "");
        LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntNE, st, kn_cg_i32(cg, 0), ""), fail, next);
        LLVMPositionBuilderAtEnd(cg->b, fail);
        LLVMBuildRet(cg->b, st);
        LLVMPositionBuilderAtEnd(cg->b, next);
    }
    if (s->copy_fn) LLVMBuildCall2(cg->b, kn_cg_fn_type(cg), s->copy_fn, args, 5, "");
    LLVMBuildRet(cg->b, kn_cg_i32(cg, 0));
}

/* The profiling records of the meta (profile_info.c): one step per function
 * `run` calls. */
static int add_profile_info(compile_state *s)
{
    bool *has_step = calloc((size_t)s->g->n_nodes + 1, sizeof *has_step);
    if (!has_step) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->g->n_nodes; i++) has_step[i] = s->node_fns[i] != NULL;
    int st = kn_cg_profile_info(s->g, &s->plan, has_step, s->node_dnnl, s->copy_bytes, &s->meta);
    free(has_step);
    return st;
}

/* The table of step functions the descriptor exports (kn_artifact_desc.step_fns):
 * referencing the node functions keeps them alive after `run` inlined them,
 * which costs code size only, never time in `run`. */
static LLVMValueRef step_table(compile_state *s)
{
    kn_cg *cg = &s->cg;
    int n = 0;
    LLVMValueRef *fns = calloc((size_t)s->g->n_nodes + 2, sizeof *fns);
    if (!fns) return NULL;
    for (int i = 0; i < s->g->n_nodes; i++)
        if (s->node_fns[i]) fns[n++] = s->node_fns[i];
    if (s->copy_fn) fns[n++] = s->copy_fn;
    LLVMValueRef init = LLVMConstArray(cg->t_ptr, fns, (unsigned)n);
    free(fns);
    return kn_cg_const_global(cg, "kn_step_fns", init, 8);
}

static LLVMValueRef const_bytes(compile_state *s, const char *name, const void *data, size_t len, unsigned align)
{
    kn_cg *cg = &s->cg;
    return kn_cg_const_global(cg, name, LLVMConstStringInContext(cg->ctx, data, (unsigned)len, 1), align);
}

/* The meta, the embedded weights and the exported kn_artifact_desc. */
static int emit_descriptor(compile_state *s)
{
    kn_cg *cg = &s->cg;
    int st = kn_meta_write(&s->meta, &s->meta_bytes, &s->meta_len);
    if (st) return st;
    if (s->meta_len > UINT32_MAX) return kn_error(KN_ERR_UNSUPPORTED, "the model's metadata exceeds 4 GiB");
    LLVMValueRef meta = const_bytes(s, "kn_meta", s->meta_bytes, s->meta_len, 8);
    LLVMValueRef weights = LLVMConstNull(cg->t_ptr);
    uint64_t wlen = 0;
    if (!s->o->external_weights && s->plan.weights_bytes > 0) {
        if ((uint64_t)s->plan.weights_bytes > UINT32_MAX)
            return kn_error(KN_ERR_UNSUPPORTED, "%lld bytes of weights do not fit in the artifact: use --weights "
                                                "external", (long long)s->plan.weights_bytes);
        weights = const_bytes(s, "kn_weights", s->plan.weights, (size_t)s->plan.weights_bytes, 64);
        wlen = (uint64_t)s->plan.weights_bytes;
    }
    LLVMValueRef steps = step_table(s);
    if (!steps) return kn_error(KN_ERR_NOMEM, "out of memory");
    LLVMValueRef fields[9] = {
        LLVMConstInt(cg->t_i32, KN_ABI_MAGIC, 0), LLVMConstInt(cg->t_i32, KN_ABI_VERSION, 0), meta,
        LLVMConstInt(cg->t_i64, s->meta_len, 0),  weights,                                    LLVMConstInt(cg->t_i64, wlen, 0),
        LLVMGetNamedFunction(cg->mod, "kn_run"),  steps,
        LLVMConstInt(cg->t_i64, (unsigned long long)s->meta.n_steps, 0),
    };
    LLVMValueRef init = LLVMConstStructInContext(cg->ctx, fields, 9, 0);
    LLVMValueRef desc = LLVMAddGlobal(cg->mod, LLVMTypeOf(init), "kn_artifact_descriptor");
    LLVMSetInitializer(desc, init);
    LLVMSetGlobalConstant(desc, 1);
    LLVMSetAlignment(desc, 8);
    s->desc = desc;
    return KN_OK;
}

/* Only the descriptor is exported: every other definition (node functions,
 * helpers a lowering added, constant tables) becomes internal, so several
 * static artifacts link into one program without clashes, and LLVM may
 * inline and drop what it likes. */
static void internalize(compile_state *s)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(s->cg.mod); f; f = LLVMGetNextFunction(f))
        if (!LLVMIsDeclaration(f)) LLVMSetLinkage(f, LLVMInternalLinkage);
    for (LLVMValueRef g = LLVMGetFirstGlobal(s->cg.mod); g; g = LLVMGetNextGlobal(g))
        if (g != s->desc && !LLVMIsDeclaration(g) && LLVMGetLinkage(g) != LLVMPrivateLinkage)
            LLVMSetLinkage(g, LLVMInternalLinkage);
}

static int optimize(compile_state *s)
{
    kn_cg *cg = &s->cg;
    char *msg = NULL;
    internalize(s);
    if (LLVMVerifyModule(cg->mod, LLVMReturnStatusAction, &msg)) {
        int st = kn_error(KN_ERR_INTERNAL, "generated code does not verify (a kiln bug): %.600s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return st;
    }
    LLVMDisposeMessage(msg);
    static const char *const pipelines[] = {"default<O0>", "default<O1>", "default<O2>", "default<O3>"};
    int lvl = s->o->opt_level < 0 ? 0 : s->o->opt_level > 3 ? 3 : s->o->opt_level;
    LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(pbo, lvl >= 2);
    LLVMPassBuilderOptionsSetSLPVectorization(pbo, lvl >= 2);
    LLVMPassBuilderOptionsSetLoopUnrolling(pbo, lvl >= 2);
    LLVMErrorRef e = LLVMRunPasses(cg->mod, pipelines[lvl], cg->tm, pbo);
    LLVMDisposePassBuilderOptions(pbo);
    if (e) {
        char *em = LLVMGetErrorMessage(e);
        int st = kn_error(KN_ERR_INTERNAL, "LLVM optimization failed: %s", em);
        LLVMDisposeErrorMessage(em);
        return st;
    }
    return KN_OK;
}

static int emit_object(compile_state *s, const char *symbol)
{
    char *err = NULL;
    /* the same module serves both flavours: only the exported name differs */
    LLVMSetValueName2(s->desc, symbol, strlen(symbol));
    if (LLVMTargetMachineEmitToFile(s->cg.tm, s->cg.mod, s->obj, LLVMObjectFile, &err)) {
        int st = kn_error(KN_ERR_IO, "emitting the object file %s: %s", s->obj, err ? err : "unknown error");
        LLVMDisposeMessage(err);
        return st;
    }
    return KN_OK;
}

/* ---- outputs ------------------------------------------------------------------- */

static int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return kn_error(KN_ERR_IO, "%s: cannot be written: %s", path, strerror(errno));
    bool ok = (len == 0 || fwrite(data, 1, len, f) == len);
    if (fclose(f) != 0 || !ok) return kn_error(KN_ERR_IO, "%s: cannot be written (disk full?)", path);
    return KN_OK;
}

static int make_tmpdir(compile_state *s)
{
    const char *t = getenv("TMPDIR");
    snprintf(s->tmpdir, sizeof s->tmpdir, "%s/kiln-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(s->tmpdir)) {
        int st = kn_error(KN_ERR_IO, "cannot create a temporary folder %s: %s", s->tmpdir, strerror(errno));
        s->tmpdir[0] = '\0';
        return st;
    }
    snprintf(s->obj, sizeof s->obj, "%s/model.o", s->tmpdir);
    return KN_OK;
}

static void remove_tmpdir(compile_state *s)
{
    if (!s->tmpdir[0]) return;
    unlink(s->obj);
    rmdir(s->tmpdir);
}

/* A missing or read-only output folder is reported before minutes of work. */
static int check_output_dirs(const kn_compile_opts *o)
{
    const char *paths[3] = {o->output, o->static_output, o->header};
    for (int i = 0; i < 3; i++) {
        if (!paths[i]) continue;
        char dir[4096];
        const char *slash = strrchr(paths[i], '/');
        if (!*paths[i] || (slash && !slash[1])) return kn_error(KN_ERR_INVALID, "'%s' is not a file name", paths[i]);
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - paths[i]) : 1, slash ? paths[i] : ".");
        if (!dir[0]) snprintf(dir, sizeof dir, "/");
        if (access(dir, W_OK) != 0)
            return kn_error(KN_ERR_IO, "%s: cannot be written: folder '%s': %s", paths[i], dir, strerror(errno));
    }
    return KN_OK;
}

/* Side weights file, .so, .a, header: all temporaries until commit. */
static int write_outputs(compile_state *s, kn_outset *outs)
{
    const kn_compile_opts *o = s->o;
    const char *tmp;
    int st;
    if (o->output) {
        if ((st = make_tmpdir(s)) || (st = emit_object(s, "kn_artifact_descriptor"))) return st;
        if ((st = kn_outset_add(outs, o->output, &tmp)) || (st = kn_link_shared(s->obj, tmp))) return st;
    }
    if (o->static_output) {
        char sym[160];
        snprintf(sym, sizeof sym, "kn_artifact_%s", s->name);
        if (!s->tmpdir[0] && (st = make_tmpdir(s))) return st;
        if ((st = emit_object(s, sym))) return st;
        if ((st = kn_outset_add(outs, o->static_output, &tmp)) || (st = kn_link_static(s->obj, tmp))) return st;
    }
    if (o->header) {
        if ((st = kn_outset_add(outs, o->header, &tmp)) || (st = kn_header_write(&s->meta, o->static_output, tmp)))
            return st;
    }
    return KN_OK;
}

static int write_weights_file(compile_state *s, kn_outset *outs, char *base, size_t base_len)
{
    const char *art = s->o->output ? s->o->output : s->o->static_output;
    char path[4096];
    if (snprintf(path, sizeof path, "%s.weights", art) >= (int)sizeof path)
        return kn_error(KN_ERR_IO, "%s: path too long", art);
    const char *slash = strrchr(path, '/');
    snprintf(base, base_len, "%s", slash ? slash + 1 : path);
    const char *tmp;
    int st = kn_outset_add(outs, path, &tmp);
    if (!st) st = write_file(tmp, s->plan.weights, (size_t)s->plan.weights_bytes);
    if (!st) s->meta.weights_file = base;
    return st;
}

/* --precision bf16|mixed for a target without the bf16 dot product: the
 * artifact is still made (for the machines that have it) but will not run
 * here, which the user should hear now rather than at the first run. */
static void warn_bf16(const compile_state *s, uint64_t target_features)
{
    int n = 0;
    for (int i = 0; i < s->meta.n_dnnl; i++) n += s->meta.dnnl[i].compute == KN_BF16;
    for (int i = 0; i < s->meta.n_opnodes; i++) n += s->meta.opnodes[i].compute == KN_BF16;
    if (!n || (target_features & KN_CPU_AVX512BF16)) return;
    fprintf(stderr,
            "kiln compile: warning: target %s has no AVX512-BF16: the artifact's %d bf16 matrix products need it, "
            "so it runs only on CPUs that have it (Intel Cooper Lake, Sapphire Rapids and later, AMD Zen 4 and "
            "later)\n",
            s->target_desc, n);
}

static void print_report(const compile_state *s)
{
    static const char *const names[] = {"generated", "oneDNN", "runtime kernel", "alias", "folded",
                                        "generated, in rows", "oneDNN, in rows", "generated, parallel",
                                        "oneDNN, run-time shape"};
    int counts[9] = {0};
    for (int i = 0; i < s->g->n_nodes; i++) {
        const kn_node *n = s->g->nodes[i];
        bool bf16 = (s->node_dnnl[i] >= 0 && s->meta.dnnl[s->node_dnnl[i]].compute == KN_BF16) ||
                    (s->how[i] == KN_LOWERED_RUNTIME && (n->op == KN_OP_Attention || n->op == KN_OP_PackedAttention) &&
                     n->compute == KN_BF16);
        printf("%-32s  %-20s  %s%s%s\n", n->name, n->op_type, names[s->how[i]], bf16 ? ", bf16" : "",
               !s->node_nhwc || !s->node_nhwc[i]                 ? ""
               : s->node_nhwc[i] == KN_OPNODE_NATIVE_ALL ? ", native layout"
                                                         : ", NHWC");
        if (s->how[i] == KN_LOWERED_RUNTIME && s->fallback_why[i])
            printf("  remark: node '%s' (%s) has a lowering but runs its runtime kernel: %s\n", n->name, n->op_type,
                   s->fallback_why[i]);
        counts[s->how[i]]++;
    }
    printf("%d nodes: %d generated (%d parallel), %d oneDNN, %d runtime kernel, %d alias, %d folded; arena %lld bytes "
           "(%lld without reuse), weights %lld bytes, target %s\n",
           s->g->n_nodes, counts[0] + counts[5] + counts[7], counts[7], counts[1] + counts[6] + counts[8], counts[2], counts[3],
           counts[4],
           (long long)s->meta.arena_bytes,
           (long long)s->meta.intermediate_bytes, (long long)s->meta.weights_bytes, s->meta.target);
    if (s->n_shared_nodes)
        printf("%d generated nodes reuse the code of an earlier node (%d functions not emitted again)\n",
               s->n_shared_nodes, kn_cg_share_count(s->share));
}

/* ---- driver -------------------------------------------------------------------- */

/* True if node n, over dynamic dims, cannot run in rows: emit_dynamic_node
 * gives it its call at the run's shape (kn_rt_dynconv_exec or its runtime
 * kernel). */
static bool runs_at_run_shape(compile_state *s, const kn_node *n)
{
    if (!n || !kn_dyn_node_is_dynamic(&s->dyn, n) || touches_dynamic(&s->plan, n) || kn_node_outputs_known(n) ||
        kn_plan_is_alias(&s->plan, n))
        return false;
    return !dyn_lowering(s, n) || kn_dyn_row_sym(&s->dyn, n) < 0;
}

/* True if node n will run as kn_rt_dynconv_exec (emit_dynamic_node): a
 * convolution or pooling over dynamic dims that cannot run in rows. */
static bool runs_dynconv(compile_state *s, const kn_node *n) { return runs_at_run_shape(s, n) && dynconv_ok(n); }

/* True if node n will run as the runtime kernel of a ConvTranspose at the
 * run's shape (the patch kernel where it applies, runtime/src/convt.c),
 * without a residual: it too reads and writes NHWC (kn_opdesc.nhwc). */
static bool runs_dyn_deconv(compile_state *s, const kn_node *n)
{
    if (!n || (n->op != KN_OP_ConvTranspose && n->op != KN_OP_FusedConvTranspose) || n->n_inputs < 1 ||
        n->n_outputs < 1 || !n->inputs[0] || !n->outputs[0])
        return false;
    const kn_value *x = n->inputs[0], *y = n->outputs[0];
    if (x->dtype != KN_F32 || y->dtype != KN_F32 || x->shape.rank != 4 || y->shape.rank != 4) return false;
    if (n->op == KN_OP_FusedConvTranspose && kn_node_input(n, KN_FUSED_RESIDUAL)) return false;
    return runs_at_run_shape(s, n);
}

/* A node that reads its input 0 and writes its output 0 channels-last
 * when the compiler says so. */
static bool takes_nhwc(compile_state *s, const kn_node *n) { return runs_dynconv(s, n) || runs_dyn_deconv(s, n); }

/* A runtime kernel at the run's shape that is indifferent to layout
 * (kn_cg_layout_agnostic): run channels-last (KN_OPNODE_NHWC_ALL). */
static bool layout_agnostic(compile_state *s, const kn_node *n)
{
    return kn_cg_layout_agnostic(n) && runs_at_run_shape(s, n);
}

/* True if a layout-agnostic node's operands and results can all be NHWC:
 * each that is rank 4 is NHWC or has the same bytes either way. */
static bool agnostic_consistent(compile_state *s, const kn_node *n)
{
    const kn_value *v;
    for (int k = 0; (v = kn_cg_agnostic_value(n, &k));)
        if (!s->nhwc[v->id] && (k > n->n_inputs || !kn_cg_layout_free(v))) return false;
    return true;
}

/* Clears the NHWC mark of every rank-4 operand and result of n that has one
 * (a layout-agnostic node that cannot run channels-last); true if any. */
static bool agnostic_clear(compile_state *s, const kn_node *n)
{
    bool changed = false;
    const kn_value *v;
    for (int k = 0; (v = kn_cg_agnostic_value(n, &k));)
        if (v->id >= 0 && s->nhwc[v->id]) s->nhwc[v->id] = false, changed = true;
    return changed;
}

static bool is_graph_output(const kn_graph *g, const kn_value *v)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == v) return true;
    return false;
}

/* The dynamic activations that convolutions and poolings at the run's
 * shape hand each other channels-last (s->nhwc): written by one as its
 * output 0 and read only by such nodes, as input 0 or as a FusedConv's
 * residual; never a graph output or a value a subgraph reads. oneDNN's
 * kernels (and Winograd) want NHWC on AVX-512: in NCHW every such node
 * reordered its input and its output at every run (YOLOv8n at a run-time
 * width: 4.6 of 22 ms). A FusedConv's residual takes its output's layout
 * (the sum adds what dst holds), so where the two would differ both stay
 * plain, until no pair differs. --layout nchw keeps them all plain. */
static int plan_dyn_nhwc(compile_state *s)
{
    const kn_graph *g = s->g;
    int n_ids = 0;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i]->id >= n_ids) n_ids = g->values[i]->id + 1;
    s->nhwc = calloc((size_t)n_ids + 1, sizeof *s->nhwc);
    s->node_nhwc = calloc((size_t)g->n_nodes + 1, sizeof *s->node_nhwc);
    if (!s->nhwc || !s->node_nhwc) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) /* static ones, on the session's layout */
        if (s->cg.native_all && s->cg.native_all[i]) s->node_nhwc[i] = KN_OPNODE_NATIVE_ALL;
    if (s->o->layout == KN_CG_LAYOUT_NCHW) return KN_OK;
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        const kn_node *p = v->producer;
        if (v->id < 0 || v->shape.rank != 4 || v->dtype != KN_F32 || !p || p->n_outputs < 1 || v->n_users == 0 ||
            is_graph_output(g, v) || !((takes_nhwc(s, p) && p->outputs[0] == v) || layout_agnostic(s, p)))
            continue;
        bool ok = true;
        for (int k = 0; k < v->n_users && ok; k++) {
            const kn_use *u = &v->users[k];
            ok = (takes_nhwc(s, u->node) &&
                  (u->index == 0 || (u->index == KN_FUSED_RESIDUAL && u->node->op == KN_OP_FusedConv))) ||
                 (layout_agnostic(s, u->node) && kn_cg_agnostic_operand(u->node, u->index));
        }
        s->nhwc[v->id] = ok;
    }
    for (int i = 0; i < g->n_nodes; i++) { /* what a subgraph reads stays plain */
        kn_value **caps = NULL;
        int n_caps = 0;
        if (kn_node_captures(g->nodes[i], &caps, &n_caps)) return kn_error(KN_ERR_NOMEM, "out of memory");
        for (int k = 0; k < n_caps; k++)
            if (caps[k] && caps[k]->id >= 0) s->nhwc[caps[k]->id] = false;
        free(caps);
    }
    bool *agnostic = calloc((size_t)g->n_nodes + 1, sizeof *agnostic);
    if (!agnostic) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) agnostic[i] = layout_agnostic(s, g->nodes[i]);
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < g->n_nodes; i++) {
            const kn_node *n = g->nodes[i];
            if (agnostic[i] && !agnostic_consistent(s, n)) {
                changed |= agnostic_clear(s, n);
                continue;
            }
            const kn_value *res = n->op == KN_OP_FusedConv ? kn_node_input(n, KN_FUSED_RESIDUAL) : NULL;
            if (!res || res->id < 0 || s->nhwc[res->id] == s->nhwc[n->outputs[0]->id]) continue;
            s->nhwc[res->id] = s->nhwc[n->outputs[0]->id] = false;
            changed = true;
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (agnostic[i] && agnostic_consistent(s, g->nodes[i])) s->node_nhwc[i] = KN_OPNODE_NHWC_ALL;
    free(agnostic);
    return KN_OK;
}

static int emit_all(compile_state *s)
{
    int st;
    const kn_graph *g = s->g;
    s->how = calloc((size_t)g->n_nodes + 1, sizeof *s->how);
    s->fallback_why = calloc((size_t)g->n_nodes + 1, sizeof *s->fallback_why);
    s->node_fns = calloc((size_t)g->n_nodes + 1, sizeof *s->node_fns);
    s->node_dnnl = malloc(sizeof *s->node_dnnl * ((size_t)g->n_nodes + 1));
    if (!s->how || !s->fallback_why || !s->node_fns || !s->node_dnnl) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) s->node_dnnl[i] = -1;
    if ((st = plan_dyn_nhwc(s))) return st;
    for (int i = 0; i < g->n_nodes; i++) {
        if (kn_node_outputs_known(g->nodes[i])) {
            s->how[i] = LOWERED_FOLDED;
            continue;
        }
        if (kn_plan_is_alias(&s->plan, g->nodes[i])) {
            s->how[i] = KN_LOWERED_ALIAS;
            continue;
        }
        if ((st = emit_node(s, i))) return st;
    }
    kn_cg_share_finish(s->share);
    emit_run(s);
    return add_profile_info(s);
}

/* Structure checks and constant folding, for the model and every probe. */
static int prepare(kn_model *m, kn_graph *g)
{
    int st = check_structure(g);
    if (!st) st = fold_constants(m);
    if (!st) st = check_dynamic(g);
    return st;
}

/* A node the artifact runs writes every output, so none of them may be a
 * constant stored with the weights: when only some outputs are known (a
 * TopK whose values match at every probe of a dynamic dim but whose
 * indices do not), the known ones are computed as well. Before, the
 * runtime kernel wrote into the artifact's read-only weights (SIGSEGV). */
static void unfold_partly_known(kn_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        kn_node *n = g->nodes[i];
        if (kn_node_outputs_known(n)) continue;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k] && !(n->outputs[k]->flags & KN_VALUE_INITIALIZER))
                n->outputs[k]->const_data = NULL; /* the tensor stays owned by the model */
    }
}

static int prepare_probes(const kn_compile_opts *o)
{
    for (int k = 0; k < o->n_syms; k++)
        for (int p = 0; p < 2; p++) {
            kn_model *m = o->syms[k].probe[p];
            int st = m ? prepare(m, m->graph) : KN_OK;
            if (st) {
                kn_error_prefix("with %s=%lld: ", o->syms[k].name,
                                (long long)((kn_compile_sym_min(&o->syms[k]) + p) * kn_compile_sym_align(&o->syms[k])));
                return st;
            }
        }
    return KN_OK;
}

/* --stats: wall time of each code generation phase, so a slow compile
 * says whether the graph, kiln's IR building or LLVM is to blame. */
typedef struct phase_clock {
    bool on;
    double last;
} phase_clock;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static void phase_done(phase_clock *c, const char *what)
{
    if (!c->on) return;
    double t = now_ms();
    if (c->last > 0) fprintf(stderr, "codegen %-28s %10.2f ms\n", what, t - c->last);
    c->last = t;
}

static int compile(compile_state *s, kn_outset *outs)
{
    int st;
    char wbase[512];
    phase_clock clk = {.on = s->o->stats};
    phase_done(&clk, "start");
    if ((st = check_output_dirs(s->o)) || (st = prepare(s->m, s->g)) || (st = prepare_probes(s->o)) ||
        (st = kn_dyn_analyze(s->g, s->o, &s->dyn)) || (st = model_name(s)))
        return st;
    unfold_partly_known(s->g);
    if ((st = kn_plan_build(s->g, &s->plan))) return st;
    phase_done(&clk, "checks, folding, memory plan");
    s->cg.ctx = LLVMContextCreate();
    if ((st = make_target_machine(s))) return st;
    uint64_t target_features = s->meta.cpu_features;
    init_cg(s);
    if (!(s->share = kn_cg_share_new())) return kn_error(KN_ERR_NOMEM, "out of memory");
    if ((st = kn_cg_plan_layouts(&s->cg)) || (st = init_meta(s)) || (st = emit_all(s))) return st;
    warn_bf16(s, target_features);
    if (s->o->external_weights && (st = write_weights_file(s, outs, wbase, sizeof wbase))) return st;
    if ((st = emit_descriptor(s))) return st;
    phase_done(&clk, "LLVM IR built");
    if ((st = optimize(s))) return st;
    phase_done(&clk, "LLVM optimized");
    if ((st = write_outputs(s, outs))) return st;
    phase_done(&clk, "object emitted and linked");
    return kn_outset_commit(outs);
}

int kn_compile_cpu(kn_model *m, const kn_compile_opts *opts)
{
    if (!m || !opts) return kn_error(KN_ERR_INVALID, "kn_compile_cpu: NULL argument");
    if (!opts->output && !opts->static_output)
        return kn_error(KN_ERR_INVALID, "kn_compile_cpu: no output path (a .so or a static .a)");
    compile_state s = {.m = m, .o = opts, .g = m->graph};
    kn_outset outs = {0};
    int st = compile(&s, &outs);
    if (st) kn_outset_abort(&outs);
    else if (opts->report) print_report(&s);
    remove_tmpdir(&s);
    free_meta(&s);
    free(s.how);
    for (int i = 0; s.fallback_why && i < s.g->n_nodes; i++) free(s.fallback_why[i]);
    free(s.fallback_why);
    free(s.node_fns);
    free(s.node_dnnl);
    free(s.node_nhwc);
    free(s.nhwc);
    kn_cg_share_free(s.share);
    kn_plan_free(&s.plan);
    kn_dyn_free(&s.dyn);
    free(s.cg.layouts);
    free(s.cg.native_all);
    if (s.cg.b) LLVMDisposeBuilder(s.cg.b);
    if (s.cg.mod) LLVMDisposeModule(s.cg.mod);
    if (s.cg.tm) LLVMDisposeTargetMachine(s.cg.tm);
    if (s.cg.ctx) LLVMContextDispose(s.cg.ctx);
    return st;
}
