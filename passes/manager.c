/*
 * passes/manager.c — the pass table, the pipelines per -O level, and the
 * driver that runs them with --print-after, --verify-each and statistics.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "match.h"
#include "pass.h"
#include "text.h"

static const kn_pass_info pass_table[] = {
#define KN_PASS(ident, name, summary) {name, kn_pass_##ident, summary},
#include "passes.def"
#undef KN_PASS
};

#define N_PASSES ((int)(sizeof pass_table / sizeof pass_table[0]))

/* The default pipeline of each -O level, as a --passes list. Later passes
 * rely on earlier ones having run (fusion expects folded constants and no
 * dead nodes), so the order matters:
 *   - folding first: the patterns below look for constants (0.5, eps, BN
 *     parameters) that exporters often write as Constant nodes or compute;
 *   - freeze before simplify/cse: removing Dropout/Identity exposes
 *     neighbours (double Transposes, duplicate subexpressions);
 *   - fold-batchnorm before the recognizers and before fusion (a later
 *     pass), which then sees Conv → Relu without a BN in between;
 *   - recognize-attention after recognize-softmax (it starts from a
 *     Softmax) and before sink-transposes and fusion, which would move
 *     the heads' Transposes and take the scale and mask into other ops;
 *   - sink-transposes before the second simplify, which cancels the
 *     Transposes it brought together;
 *   - fuse-elementwise after fuse-conv/fuse-matmul, which take activations
 *     and bias Adds into their primitives first;
 *   - dce last, to drop what the rewrites left unread.
 * -O0 folds only (and inlines the If branches a known condition takes):
 * code generation needs static shapes. normalize-msft comes first at every
 * level: onnxruntime's contrib ops have no kernels, so no later pass (nor
 * code generation) may meet them; a --passes list that does not name it
 * gets it in front. */
static const char *const default_pipeline[4] = {
    /* -O0 */ "normalize-msft,inline-if,fold-constants",
    /* -O1 */ "normalize-msft,inline-if,fold-constants,fold-shapes,freeze,simplify,dce",
    /* -O2 */ "normalize-msft,inline-if,recognize-gelu,lower-qdq,fold-constants,fold-shapes,freeze,simplify,cse,fold-batchnorm,recognize-gelu,recognize-layernorm,"
              "recognize-softmax,recognize-attention,sink-transposes,simplify,cse,dce,fuse-conv,fuse-matmul,fuse-qkv,fuse-elementwise",
    /* -O3 */ "normalize-msft,inline-if,recognize-gelu,lower-qdq,fold-constants,fold-shapes,freeze,simplify,cse,fold-batchnorm,recognize-gelu,recognize-layernorm,"
              "recognize-softmax,recognize-attention,sink-transposes,simplify,cse,dce,fuse-conv,fuse-matmul,fuse-qkv,fuse-elementwise",
};

const char *kn_pass_default_pipeline(int level)
{
    return level >= 0 && level <= 3 ? default_pipeline[level] : "";
}

const kn_pass_info *kn_pass_table(int *out_n)
{
    *out_n = N_PASSES;
    return pass_table;
}

const kn_pass_info *kn_pass_find(const char *name)
{
    for (int i = 0; i < N_PASSES; i++)
        if (!strcmp(pass_table[i].name, name)) return &pass_table[i];
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *grow(void *p, int n, int *cap, size_t elem)
{
    if (n < *cap) return p;
    int c = *cap ? *cap * 2 : 16;
    void *q = realloc(p, (size_t)c * elem);
    if (q) *cap = c;
    return q;
}

void kn_pass_remark(kn_pass_ctx *ctx, const char *fmt, ...)
{
    kn_pass_log *log = ctx->log;
    kn_remark *r = grow(log->remarks, log->n_remarks, &log->cap_remarks, sizeof *r);
    if (!r) return; /* remarks are advice; losing one under OOM is harmless */
    log->remarks = r;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!text) return;
    va_start(ap, fmt);
    vsnprintf(text, (size_t)len + 1, fmt, ap);
    va_end(ap);
    log->remarks[log->n_remarks++] = (kn_remark){.pass = ctx->pass, .text = text};
}

/* The statistics entry of pass `name`, created on first use: a pass that
 * runs twice in one pipeline adds to the same entry. */
static kn_pass_stat *stat_for(kn_pass_log *log, const char *name)
{
    for (int i = 0; i < log->n_stats; i++)
        if (!strcmp(log->stats[i].pass, name)) return &log->stats[i];
    kn_pass_stat *s = grow(log->stats, log->n_stats, &log->cap_stats, sizeof *s);
    if (!s) return NULL;
    log->stats = s;
    s = &log->stats[log->n_stats++];
    *s = (kn_pass_stat){.pass = name};
    return s;
}

int kn_pass_finish(kn_graph *g)
{
    kn_pass_ctx quiet = {.model = g->model, .log = &(kn_pass_log){0}, .pass = "finish"};
    bool changed;
    int n_const;
    int st = kn_pass_dce(&quiet, g, &changed);
    if (!st) st = kn_graph_toposort(g);
    if (!st) st = kn_graph_infer(g);
    if (!st) st = kn_pm_materialize(g, &n_const);
    return st;
}

/* Splits a comma-separated list into pass infos; every name must exist. */
static int parse_list(const char *list, const kn_pass_info ***out, int *out_n)
{
    *out = NULL;
    *out_n = 0;
    int cap = 1;
    for (const char *p = list; *p; p++) cap += *p == ',';
    const kn_pass_info **v = calloc((size_t)cap, sizeof *v);
    if (!v) return kn_error(KN_ERR_NOMEM, "out of memory");
    int n = 0;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char name[64];
        if (len == 0 || len >= sizeof name) {
            free(v);
            return kn_error(KN_ERR_INVALID, "--passes: empty or overlong pass name in '%s'", list);
        }
        memcpy(name, p, len);
        name[len] = 0;
        const kn_pass_info *pi = kn_pass_find(name);
        if (!pi) {
            free(v);
            return kn_error(KN_ERR_INVALID, "--passes: unknown pass '%s' (kiln compile --help lists them)", name);
        }
        v[n++] = pi;
        p += len + (e != NULL);
    }
    *out = v;
    *out_n = n;
    return KN_OK;
}

static bool wants_print(const kn_pipeline_opts *o, const char *name)
{
    return o->print_after && (!strcmp(o->print_after, "all") || !strcmp(o->print_after, name));
}

static int run_one(kn_model *m, const kn_pass_info *pi, const kn_pipeline_opts *o, kn_pass_log *log)
{
    kn_graph *g = m->graph;
    kn_pass_ctx ctx = {.model = m, .log = log, .pass = pi->name, .precision = o->precision};
    kn_pass_stat *s = stat_for(log, pi->name);
    if (!s) return kn_error(KN_ERR_NOMEM, "out of memory");
    int before = g->n_nodes;
    double t0 = now_s();
    bool changed = false;
    int st = pi->run(&ctx, g, &changed);
    /* s may have moved if the pass grew the log's stats; look it up again */
    s = stat_for(log, pi->name);
    if (!s) return kn_error(KN_ERR_NOMEM, "out of memory");
    s->seconds += now_s() - t0;
    s->runs++;
    if (s->runs == 1) s->nodes_before = before;
    s->nodes_after = g->n_nodes;
    s->rewrites += ctx.rewrites;
    if (st) {
        kn_error_prefix("pass '%s': ", pi->name);
        return st;
    }
    if (o->verify_each && (st = kn_graph_verify(g))) {
        kn_error_prefix("after pass '%s': ", pi->name);
        return st;
    }
    if (wants_print(o, pi->name)) {
        FILE *f = o->print_to ? o->print_to : stderr;
        fprintf(f, "; IR after pass '%s'%s\n", pi->name, changed ? "" : " (unchanged)");
        if ((st = kn_ir_print(m, f))) return st;
    }
    return KN_OK;
}

int kn_pass_run_pipeline(kn_model *m, const kn_pipeline_opts *o, kn_pass_log *log)
{
    if (o->opt_level < 0 || o->opt_level > 3)
        return kn_error(KN_ERR_INVALID, "optimization level -O%d: expected 0..3", o->opt_level);
    if (o->print_after && strcmp(o->print_after, "all") && !kn_pass_find(o->print_after))
        return kn_error(KN_ERR_INVALID, "--print-after: unknown pass '%s'", o->print_after);
    const kn_pass_info **list;
    int n;
    int st = parse_list(o->passes ? o->passes : default_pipeline[o->opt_level], &list, &n);
    /* what inference already computed from constants becomes constants, so
     * every pass (and --verify-each) starts from a well-formed graph */
    int n_const = 0;
    if (!st) st = kn_pm_materialize(m->graph, &n_const);
    kn_pass_stat *ms = !st && n_const ? stat_for(log, "inferred-constants") : NULL;
    if (ms) ms->runs = 1, ms->nodes_before = m->graph->n_nodes + n_const, ms->nodes_after = m->graph->n_nodes,
            ms->rewrites = n_const;
    bool autocast_ran = false, pack_ran = false, has_normalize = false;
    for (int i = 0; i < n; i++) has_normalize |= list[i]->run == kn_pass_normalize_msft;
    if (!st && !has_normalize && kn_pass_needs_normalize_msft(m->graph)) st = run_one(m, kn_pass_find("normalize-msft"), o, log);
    for (int i = 0; !st && i < n; i++) {
        st = run_one(m, list[i], o, log);
        autocast_ran |= list[i]->run == kn_pass_autocast;
        pack_ran |= list[i]->run == kn_pass_pack_tokens;
    }
    free(list);
    /* last: the products it marks are the ones the fusions left */
    if (!st && o->precision != KN_PRECISION_FP32 && !autocast_ran) st = run_one(m, kn_pass_find("autocast"), o, log);
    /* after everything: it packs the nodes the other passes left */
    if (!st && o->pack_tokens && !pack_ran) st = run_one(m, kn_pass_find("pack-tokens"), o, log);
    return st;
}

void kn_pass_log_print_stats(const kn_pass_log *log, FILE *f)
{
    fprintf(f, "%-24s %5s %8s %8s %9s %10s\n", "pass", "runs", "nodes in", "out", "rewrites", "time ms");
    for (int i = 0; i < log->n_stats; i++) {
        const kn_pass_stat *s = &log->stats[i];
        fprintf(f, "%-24s %5d %8d %8d %9d %10.2f\n", s->pass, s->runs, s->nodes_before, s->nodes_after, s->rewrites,
                s->seconds * 1e3);
    }
}

void kn_pass_log_print_remarks(const kn_pass_log *log, FILE *f)
{
    for (int i = 0; i < log->n_remarks; i++) fprintf(f, "%s: %s\n", log->remarks[i].pass, log->remarks[i].text);
}

void kn_pass_log_free(kn_pass_log *log)
{
    for (int i = 0; i < log->n_remarks; i++) free(log->remarks[i].text);
    free(log->remarks);
    free(log->stats);
    *log = (kn_pass_log){0};
}
