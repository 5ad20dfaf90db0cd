/*
 * tests/codegen/jit_harness.h — lowers one node of a test model into an LLVM
 * function with the node signature of cg.h, optimizes it (O3, host CPU) and
 * JIT-compiles it with MCJIT, so the lowering tests can run generated code
 * without the compile driver. Memory plan: runtime inputs and node outputs
 * are user buffers, constants are packed into a weights blob. Included by
 * the test_lower_*.c files (after cmocka.h). KILN_TEST_DUMP_IR=1 prints each
 * optimized module.
 */
#ifndef KILN_TESTS_JIT_HARNESS_H
#define KILN_TESTS_JIT_HARNESS_H

#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/ExecutionEngine.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "cg.h"

typedef int (*node_fn)(void *ex, char *arena, const char *weights, void *const *inputs, void *const *outputs);

typedef struct jit_node {
    kn_plan plan;
    unsigned char *blob; /* the constants, 64-byte aligned each */
    LLVMContextRef ctx;
    kn_cg cg;
    LLVMExecutionEngineRef ee; /* owns the module once created */
    node_fn fn;
} jit_node;

static LLVMTargetMachineRef jit_host_tm(void)
{
    char *triple = LLVMGetDefaultTargetTriple(), *err = NULL;
    LLVMTargetRef target;
    assert_int_equal(LLVMGetTargetFromTriple(triple, &target, &err), 0);
    char *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, feat, LLVMCodeGenLevelAggressive,
                                                      LLVMRelocPIC, LLVMCodeModelJITDefault);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    return tm;
}

/* The lowering of op in table, or NULL. */
static kn_cg_lower_fn jit_find(const kn_cg_lowering *table, kn_op op)
{
    for (const kn_cg_lowering *l = table; l->lower; l++)
        if (l->op == op) return l->lower;
    return NULL;
}

static void jit_plan(jit_node *j, const kn_model *m, kn_value *const *ins, int n_ins, const kn_node *n)
{
    kn_plan *plan = &j->plan;
    plan->n_where = m->n_value_ids;
    plan->where = calloc((size_t)plan->n_where, sizeof *plan->where);
    assert_non_null(plan->where);
    for (int i = 0; i < plan->n_where; i++) plan->where[i].loc = -1;
    int64_t wbytes = 0;
    for (int i = 0; i < n_ins; i++)
        if (ins[i] && ins[i]->const_data) wbytes += ((int64_t)ins[i]->const_data->nbytes + 63) / 64 * 64;
    j->blob = aligned_alloc(64, (size_t)(wbytes + 64));
    assert_non_null(j->blob);
    int64_t off = 0;
    int rti = 0;
    for (int i = 0; i < n_ins; i++) {
        kn_value *v = ins[i];
        if (!v) continue;
        if (v->const_data) {
            plan->where[v->id] = (kn_abi_ref){KN_LOC_WEIGHTS, 0, off};
            memcpy(j->blob + off, v->const_data->data, v->const_data->nbytes);
            off += ((int64_t)v->const_data->nbytes + 63) / 64 * 64;
        } else {
            plan->where[v->id] = (kn_abi_ref){KN_LOC_INPUT, 0, rti++};
        }
    }
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i]) plan->where[n->outputs[i]->id] = (kn_abi_ref){KN_LOC_OUTPUT, 0, i};
}

/* Lowers n (inputs ins[0..n_ins) of model m) with `lower`. Returns the
 * lowering's status; on KN_OK j->fn is the compiled node, whose return value
 * is the status the generated code recorded. Always call jit_free after. */
static int jit_lower(jit_node *j, const kn_model *m, kn_value *const *ins, int n_ins, const kn_node *n,
                     kn_cg_lower_fn lower)
{
    memset(j, 0, sizeof *j);
    assert_non_null(lower);
    jit_plan(j, m, ins, n_ins, n);
    j->ctx = LLVMContextCreate();
    kn_cg *cg = &j->cg;
    cg->ctx = j->ctx;
    cg->mod = LLVMModuleCreateWithNameInContext("t", j->ctx);
    cg->tm = jit_host_tm();
    char *triple = LLVMGetTargetMachineTriple(cg->tm);
    LLVMSetTarget(cg->mod, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(cg->tm);
    LLVMSetModuleDataLayout(cg->mod, dl);
    LLVMDisposeTargetData(dl);
    kn_cg_init_types(cg);
    cg->model = m;
    cg->g = m->graph;
    cg->plan = &j->plan;
    kn_cg_begin_function(cg, "node", false);
    int st = lower(cg, n);
    if (st != KN_OK) return st;
    LLVMBuildRet(cg->b, LLVMBuildLoad2(cg->b, cg->t_i32, cg->status, ""));
    char *err = NULL;
    if (LLVMVerifyModule(cg->mod, LLVMReturnStatusAction, &err)) {
        LLVMDumpModule(cg->mod);
        fail_msg("module does not verify: %s", err);
    }
    LLVMDisposeMessage(err);
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(cg->mod, "default<O3>", cg->tm, po);
    assert_null(e);
    LLVMDisposePassBuilderOptions(po);
    if (getenv("KILN_TEST_DUMP_IR")) LLVMDumpModule(cg->mod);
    struct LLVMMCJITCompilerOptions jo;
    LLVMInitializeMCJITCompilerOptions(&jo, sizeof jo);
    jo.OptLevel = 2;
    if (LLVMCreateMCJITCompilerForModule(&j->ee, cg->mod, &jo, sizeof jo, &err)) fail_msg("MCJIT: %s", err);
    j->fn = (node_fn)(uintptr_t)LLVMGetFunctionAddress(j->ee, "node");
    assert_non_null(j->fn);
    return KN_OK;
}

/* Runs the compiled node on user buffers; returns its status. */
static int jit_call(const jit_node *j, void *const *inputs, void *const *outputs)
{
    return j->fn(NULL, NULL, (const char *)j->blob, inputs, outputs);
}

static void jit_free(jit_node *j)
{
    if (j->ee) LLVMDisposeExecutionEngine(j->ee); /* owns the module */
    else if (j->cg.mod) LLVMDisposeModule(j->cg.mod);
    if (j->cg.b) LLVMDisposeBuilder(j->cg.b);
    if (j->cg.tm) LLVMDisposeTargetMachine(j->cg.tm);
    if (j->ctx) LLVMContextDispose(j->ctx);
    free(j->blob);
    free(j->plan.where);
    memset(j, 0, sizeof *j);
}

#endif
