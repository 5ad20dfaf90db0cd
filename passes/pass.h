/*
 * passes/pass.h — the graph pass manager and the interface every pass
 * implements.
 *
 * A pass is one file (passes/<name>.c) defining one function with the
 * kn_pass_fn signature: it rewrites a graph in place and says whether it
 * changed anything. The pass table (passes/passes.def, an X-macro list)
 * names every pass once; the manager builds the pipelines per -O level from
 * it, runs a user's --passes list, prints the text IR after a pass
 * (--print-after), verifies after each pass (--verify-each) and keeps
 * per-pass statistics (--stats).
 *
 * Passes work on an inferred graph (kn_graph_infer ran) in topological
 * order, and leave it so: a pass that adds nodes re-sorts and re-infers
 * before returning (kn_pass_finish does both).
 *
 * Example:
 *
 *     kn_pipeline_opts po = {.opt_level = 3};
 *     kn_pass_log log = {0};
 *     int st = kn_pass_run_pipeline(model, &po, &log);
 *     kn_pass_log_print_stats(&log, stderr);
 *     kn_pass_log_free(&log);
 */
#ifndef KILN_PASSES_PASS_H
#define KILN_PASSES_PASS_H

#include <stdbool.h>
#include <stdio.h>

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a pattern almost matched: "Conv 'c12' + Relu 'r12': Conv output has 2
 * users". kiln compile --report prints them. */
typedef struct kn_remark {
    const char *pass;    /* static string: the pass that wrote it */
    char *text;          /* owned by the log */
} kn_remark;

/* What one pass did in one run of the pipeline (--stats). */
typedef struct kn_pass_stat {
    const char *pass;    /* static string */
    int runs;            /* how many times it ran (fixed-point iterations count) */
    int nodes_before, nodes_after;
    int rewrites;        /* patterns rewritten / nodes fused or folded, as the pass counts them */
    double seconds;
} kn_pass_stat;

/* Everything the pipeline reports back. Zero-initialize; free with
 * kn_pass_log_free. */
typedef struct kn_pass_log {
    kn_remark *remarks;
    int n_remarks, cap_remarks;
    kn_pass_stat *stats;
    int n_stats, cap_stats;
} kn_pass_log;

/* kiln compile --precision: what the autocast pass does. FP32: nothing;
 * BF16: every f32 matrix product and convolution computes in bf16 with f32
 * accumulation; MIXED: the same but for the last ones (those no other
 * product or convolution reads from: a classifier, a final projection),
 * which stay f32. Softmax, norms, reductions and elementwise ops stay f32
 * in all three, as under PyTorch's autocast. */
typedef enum kn_precision { KN_PRECISION_FP32 = 0, KN_PRECISION_BF16, KN_PRECISION_MIXED } kn_precision;

/* What a running pass sees besides its graph. */
typedef struct kn_pass_ctx {
    kn_model *model;
    kn_pass_log *log;    /* never NULL while a pass runs */
    const char *pass;    /* name of the running pass */
    int rewrites;        /* a pass adds to this what it rewrote (for --stats) */
    kn_precision precision; /* for autocast */
} kn_pass_ctx;

/* One pass: rewrites g in place; *out_changed says whether it did anything.
 * Returns KN_OK or a status whose message names the node at fault. */
typedef int (*kn_pass_fn)(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed);

typedef struct kn_pass_info {
    const char *name;    /* as written in --passes, e.g. "fold-constants" */
    kn_pass_fn run;
    const char *summary; /* one line for kiln compile --help */
} kn_pass_info;

/* Every pass, declared from the table. */
#define KN_PASS(ident, name, summary) int kn_pass_##ident(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed);
#include "passes.def"
#undef KN_PASS

/* The pass table, in passes.def order; *out_n receives its length. */
const kn_pass_info *kn_pass_table(int *out_n);
/* The pass called name, or NULL. */
const kn_pass_info *kn_pass_find(const char *name);

typedef struct kn_pipeline_opts {
    int opt_level;           /* 0..3: which default pipeline */
    const char *passes;      /* comma-separated pass names; replaces the -O pipeline when non-NULL */
    const char *print_after; /* a pass name or "all": print the text IR after it */
    FILE *print_to;          /* where --print-after goes (NULL: stderr) */
    bool verify_each;        /* kn_graph_verify after every pass; fail naming the pass */
    kn_precision precision;  /* not FP32: the autocast pass runs last */
    bool pack_tokens;        /* pack-tokens runs after it (kiln compile --pack-tokens) */
} kn_pipeline_opts;

/* The --passes list of -O<level>'s default pipeline (level 0..3; else ""). */
const char *kn_pass_default_pipeline(int level);

/* Runs the pipeline over m's main graph. Fills log (remarks and stats).
 * First, nodes whose outputs type inference already computed from
 * constants become constants (counted as "inferred-constants" in the
 * stats), so every pass starts from a graph kn_graph_verify accepts.
 * On failure the message names the pass. */
int kn_pass_run_pipeline(kn_model *m, const kn_pipeline_opts *o, kn_pass_log *log);

/* True if g holds an onnxruntime contrib op that the normalize-msft pass
 * rewrites (those ops have no kernels: `kiln run` normalizes such a model
 * before the reference evaluator runs it). */
bool kn_pass_needs_normalize_msft(const kn_graph *g);
/* True if normalize-msft rewrites nodes of op (they run as standard ops). */
bool kn_pass_normalize_msft_rewrites(kn_op op);

/* For passes: records a near-miss remark (printf-style text). */
void kn_pass_remark(kn_pass_ctx *ctx, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* For passes that added or rewired nodes: drops nodes that no longer feed
 * anything, re-sorts and re-infers g, and turns nodes whose outputs
 * inference computed from constants into constants (a constant has no
 * producer: kn_graph_verify holds). */
int kn_pass_finish(kn_graph *g);

void kn_pass_log_print_stats(const kn_pass_log *log, FILE *f);
void kn_pass_log_print_remarks(const kn_pass_log *log, FILE *f);
void kn_pass_log_free(kn_pass_log *log);

#ifdef __cplusplus
}
#endif
#endif
