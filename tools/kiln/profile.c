/* `kiln profile`: where a compiled model's time and memory go, step by step
 * (kn_session_profile, kiln/profile.h), with achieved GFLOP/s against the
 * machine's measured FP32 FMA peak (peak.h), a Chrome trace and an SVG of
 * the arena (prof_files.c). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cg.h"
#include "cli.h"
#include "kiln/kiln.h"
#include "kiln/profile.h"
#include "peak.h"
#include "prof_report.h"

static void profile_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln profile ART.so|MODEL.onnx [--input NAME=FILE.npy ...] [--runs N] [--warmup W]\n"
            "        [--threads T] [--order] [--no-peak] [--json] [--trace FILE.json] [--memory-svg FILE.svg]\n"
            "        [--shape NAME=DIMS ...]\n"
            "\n"
            "Runs a compiled model step by step (one step per node the compiler emitted, a\n"
            "oneDNN primitive, a generated loop nest or a runtime kernel) and prints, per\n"
            "step, the median time over N runs (default 10) after W warm-up runs (default 1),\n"
            "its share of the total, FLOPs, GFLOP/s, bytes read and written and the arena\n"
            "bytes live during it; then a summary per op type with the fraction of this\n"
            "machine's FP32 FMA peak (measured first for T threads, about 0.5 s), and the\n"
            "arena peak against the sum of all intermediates and the weights.\n"
            "An .onnx model is compiled first (-O3, native; --shape as for kiln compile).\n"
            "Inputs not given are random with a fixed seed, in the artifact's shape or, for\n"
            "an ART.so with dynamic dims, the one --shape NAME=DIMS gives (an .npy of a\n"
            "run-time size works too); FLOPs and bytes are the compiled maximum's.\n"
            "kn_session_run is not instrumented: only profiling pays.\n"
            "\n"
            "  --order              list steps in run order instead of by time\n"
            "  --no-peak            do not measure the FMA peak\n"
            "  --json               print the report as JSON instead of tables\n"
            "  --trace FILE         write a Chrome trace (open in https://ui.perfetto.dev)\n"
            "  --memory-svg FILE    draw the arena over the steps: which value lives where, when\n");
}

typedef struct prof_args {
    const char *path, *trace, *svg;
    char **specs, **shapes;
    int n_specs, n_shapes, threads, runs, warmup;
    bool order, no_peak, json;
} prof_args;

/* 0: parsed, 1: --help shown, 2: usage error, 3: usage error already explained. */
static int parse_args(int argc, char **argv, prof_args *a)
{
    static const char *const k_value_flags[] = {"--threads", "--runs",  "--warmup",    "--input",
                                                "--shape",   "--trace", "--memory-svg"};
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        for (size_t f = 0; f < sizeof k_value_flags / sizeof k_value_flags[0]; f++)
            if (!strcmp(s, k_value_flags[f]) && !kn_cli_needs_value("profile", i, argc, argv)) return 3;
        if (kn_cli_is_help(s)) {
            profile_usage(stdout);
            return 1;
        } else if (!strcmp(s, "--threads") || !strcmp(s, "--runs") || !strcmp(s, "--warmup")) {
            int *v = s[2] == 't' ? &a->threads : s[2] == 'r' ? &a->runs : &a->warmup;
            long long max = s[2] == 't' ? KN_PEAK_MAX_THREADS : KN_CLI_MAX_RUNS;
            if (!kn_cli_parse_int("profile", s, argv[++i], s[2] == 'w' ? 0 : 1, max, v)) return 3;
        } else if (!strcmp(s, "--input")) a->specs[a->n_specs++] = argv[++i];
        else if (!strcmp(s, "--shape")) a->shapes[a->n_shapes++] = argv[++i];
        else if (!strcmp(s, "--trace")) a->trace = argv[++i];
        else if (!strcmp(s, "--memory-svg")) a->svg = argv[++i];
        else if (!strcmp(s, "--order")) a->order = true;
        else if (!strcmp(s, "--no-peak")) a->no_peak = true;
        else if (!strcmp(s, "--json")) a->json = true;
        else if (s[0] == '-' || a->path) {
            fprintf(stderr, "kiln profile: unexpected argument '%s'\n", s);
            return 2;
        } else a->path = s;
    }
    if (!a->path) return 2;
    /* the trace and the drawing must not replace the model, an input or each other */
    kn_cli_file f[3] = {{"MODEL", a->path, false}, {"--trace", a->trace, true}, {"--memory-svg", a->svg, true}};
    int st = kn_cli_check_distinct(f, 3);
    for (int k = 0; !st && k < a->n_specs; k++) {
        const char *eq = strchr(a->specs[k], '=');
        kn_cli_file g[3] = {{"--input", eq ? eq + 1 : a->specs[k], false}, f[1], f[2]};
        st = kn_cli_check_distinct(g, 3);
    }
    if (st) {
        kn_cli_report(NULL);
        return 3;
    }
    return 0;
}

/* ---- measuring ------------------------------------------------------------- */

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

/* Median over the runs of each step's time, in ms. */
static int step_medians(const int64_t *ns, int runs, int n, double *out_ms)
{
    int64_t *col = malloc(sizeof *col * ((size_t)runs + 1));
    if (!col) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < runs; r++) col[r] = ns[(size_t)r * (size_t)n + (size_t)i];
        qsort(col, (size_t)runs, sizeof *col, cmp_i64);
        out_ms[i] = (runs % 2 ? (double)col[runs / 2] : ((double)col[runs / 2 - 1] + (double)col[runs / 2]) / 2) / 1e6;
    }
    free(col);
    return KN_OK;
}

/* Output buffers in the compiled sizes (data-dependent ones are ignored by
 * the run: a byte each); *dynamic tells whether there is such an output. */
static int alloc_outputs(const kn_artifact *art, void **out, bool *dynamic)
{
    *dynamic = false;
    for (int i = 0; i < kn_artifact_num_outputs(art); i++) {
        kn_io_info info;
        kn_artifact_output_info(art, i, &info);
        for (int d = 0; d < info.rank; d++) *dynamic |= info.dims[d] < 0;
        if (!(out[i] = malloc(info.nbytes ? info.nbytes : 1))) return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    return KN_OK;
}

/* The plain run beside each profiled one: kn_session_run, or for outputs
 * whose shape depends on data kn_session_run_tensors (outputs freed). */
static int plain_run(kn_session *s, const kn_artifact *art, bool dynamic, const kn_tensor *in, const void **in_ptrs,
                     void **out)
{
    if (!dynamic) return kn_session_run(s, in_ptrs, out);
    int n_out = kn_artifact_num_outputs(art);
    kn_tensor *t = calloc((size_t)n_out + 1, sizeof *t);
    if (!t) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_session_run_tensors(s, kn_artifact_num_inputs(art), in, n_out, t);
    for (int i = 0; !st && i < n_out; i++) kn_tensor_free(&t[i]);
    free(t);
    return st;
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Warm-up runs, then `runs` profiled runs into ns[runs x n_steps], each
 * followed by one plain kn_session_run timed into run_ns[runs]: the two
 * see the same machine state, so their ratio shows what profiling costs. */
static int measure(kn_session *s, const kn_artifact *art, const prof_args *a, int64_t *ns, int64_t *run_ns)
{
    int n_in = kn_artifact_num_inputs(art), n_out = kn_artifact_num_outputs(art), n = kn_artifact_meta(art)->n_steps;
    kn_tensor *in = calloc((size_t)n_in + 1, sizeof *in);
    const void **in_ptrs = calloc((size_t)n_in + 1, sizeof *in_ptrs);
    void **out = calloc((size_t)n_out + 1, sizeof *out);
    int64_t *scratch = calloc((size_t)n + 1, sizeof *scratch);
    int st = in && in_ptrs && out && scratch ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    bool other_shape = false, from_onnx = !kn_cli_is_artifact(a->path);
    if (!st && !(st = kn_cli_artifact_inputs(art, a->n_specs, a->specs, from_onnx ? 0 : a->n_shapes, a->shapes, in,
                                             &other_shape))) {
        for (int i = 0; i < n_in; i++) in_ptrs[i] = in[i].data;
        bool dynamic;
        st = alloc_outputs(art, out, &dynamic);
        /* a run-time size of a dynamic dim: one run on tensors sets it */
        if (!st && other_shape) st = plain_run(s, art, true, in, in_ptrs, out);
        for (int r = 0; !st && r < a->warmup; r++) st = kn_session_profile(s, in_ptrs, out, n, scratch);
        for (int r = 0; !st && r < a->runs; r++) {
            st = kn_session_profile(s, in_ptrs, out, n, ns + (size_t)r * (size_t)n);
            int64_t t0 = now_ns();
            if (!st) st = plain_run(s, art, dynamic, in, in_ptrs, out);
            run_ns[r] = now_ns() - t0;
        }
        for (int i = 0; i < n_in; i++) kn_tensor_free(&in[i]);
    }
    for (int i = 0; out && i < n_out; i++) free(out[i]);
    free(in), free(in_ptrs), free(out), free(scratch);
    return st;
}

/* ---- the report ------------------------------------------------------------ */

/* "1.5 MiB", "640 B" */
static const char *human_bytes(int64_t b, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    if (u == 0) snprintf(buf, len, "%lld B", (long long)b);
    else snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

static double gflops_per_s(int64_t flops, double ms) { return ms > 0 ? (double)flops / (ms * 1e6) : 0; }

static bool runs_in_next(const kn_prof *p, int i)
{
    return i >= 0 && p->impl && p->impl[i] && !strcmp(p->impl[i], KN_IMPL_IN_NEXT_STEP);
}

/* The FLOPs done in step i's time: its own and those of a step before it
 * whose work the runtime does in it (a 1x1 convolution fused with the
 * depthwise one after it); none for that step itself. */
static int64_t timed_flops(const kn_prof *p, int i)
{
    if (runs_in_next(p, i)) return 0;
    return p->m->steps[i].flops + (runs_in_next(p, i - 1) ? p->m->steps[i - 1].flops : 0);
}

/* Step i's GFLOP/s (timed_flops over its time). */
static double step_rate(const kn_prof *p, int i) { return gflops_per_s(timed_flops(p, i), p->step_ms[i]); }

/* True if the artifact has dynamic dims: its steps' FLOPs and bytes were
 * counted at the compiled maximum sizes (kn_abi_step), so a rate over a
 * run at another size would be wrong (a CRNN bounded to width 640 and run
 * at 200 showed 1,000 GFLOP/s on a 215 GFLOP/s core). Rates are then not
 * printed. */
static bool counts_at_max(const kn_prof *p) { return p->m->n_syms > 0; }

/* "%9.2f" of a rate, or "-" where counts_at_max. */
static const char *rate_text(const kn_prof *p, double g, char *buf, size_t n)
{
    if (counts_at_max(p)) snprintf(buf, n, "%9s", "-");
    else snprintf(buf, n, "%9.2f", g);
    return buf;
}

/* Op types in order of first appearance, with their totals. */
typedef struct op_sum {
    const char *op;
    int count;
    double ms;
    int64_t flops;
} op_sum;

static int sum_ops(const kn_prof *p, op_sum *ops)
{
    int n_ops = 0;
    for (int i = 0; i < p->m->n_steps; i++) {
        const kn_abi_step *t = &p->m->steps[i];
        int k = 0;
        while (k < n_ops && strcmp(ops[k].op, t->op_type)) k++;
        if (k == n_ops) ops[n_ops++] = (op_sum){.op = t->op_type};
        ops[k].count++;
        ops[k].ms += p->step_ms[i];
        ops[k].flops += t->flops;
    }
    return n_ops;
}

static const double *g_sort_ms; /* qsort has no context argument */
static int cmp_step_time(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    double ta = g_sort_ms[a], tb = g_sort_ms[b];
    return ta > tb ? -1 : ta < tb ? 1 : a - b;
}

static int cmp_op_time(const void *x, const void *y)
{
    const op_sum *a = x, *b = y;
    return a->ms > b->ms ? -1 : a->ms < b->ms;
}

static void print_steps(const kn_prof *p, const int *order)
{
    const kn_meta *m = p->m;
    int w = 4;
    for (int i = 0; i < m->n_steps; i++) {
        int l = (int)strlen(m->steps[i].name);
        if (l > w) w = l < 40 ? l : 40;
    }
    if (counts_at_max(p))
        printf("dynamic dims: MFLOP, read and written are counted at the compiled maximum sizes, not this run's; "
               "no GFLOP/s\n\n");
    printf("%5s  %-*s  %-18s %9s %7s %10s %9s %11s %11s %11s  %s\n", "#", w, "step", "op", "time ms", "share",
           "MFLOP", "GFLOP/s", "read", "written", "live", "kernel");
    for (int k = 0; k < m->n_steps; k++) {
        int i = order[k];
        const kn_abi_step *t = &m->steps[i];
        char r[32], wr[32], lv[32], g[32];
        printf("%5d  %-*s  %-18s %9.4f %6.2f%% %10.3f %s %11s %11s %11s  %s\n", i, w, t->name, t->op_type,
               p->step_ms[i], p->total_ms > 0 ? 100 * p->step_ms[i] / p->total_ms : 0, (double)t->flops / 1e6,
               rate_text(p, step_rate(p, i), g, sizeof g), human_bytes(t->bytes_read, r, sizeof r),
               human_bytes(t->bytes_written, wr, sizeof wr), human_bytes(p->live[i], lv, sizeof lv),
               p->impl && p->impl[i] ? p->impl[i] : "-");
    }
}

static void print_ops(const kn_prof *p, op_sum *ops, int n_ops)
{
    printf("\n%-18s %5s %9s %7s %10s %9s %8s\n", "op", "steps", "time ms", "share", "MFLOP", "GFLOP/s", "% peak");
    for (int k = 0; k < n_ops; k++) {
        double g = gflops_per_s(ops[k].flops, ops[k].ms);
        char gt[32];
        printf("%-18s %5d %9.4f %6.2f%% %10.3f %s", ops[k].op, ops[k].count, ops[k].ms,
               p->total_ms > 0 ? 100 * ops[k].ms / p->total_ms : 0, (double)ops[k].flops / 1e6,
               rate_text(p, g, gt, sizeof gt));
        if (p->have_peak && ops[k].flops > 0 && !counts_at_max(p)) printf(" %7.1f%%\n", 100 * g / p->peak.gflops);
        else printf(" %8s\n", "-");
    }
}

static void print_summary(const kn_prof *p, int64_t total_flops)
{
    const kn_meta *m = p->m;
    char a[32], b[32], c[32];
    if (counts_at_max(p))
        printf("\ntotal: %.4f ms (sum of step medians) over %d steps, %.4f GFLOP at the compiled maximum sizes\n",
               p->total_ms, m->n_steps, (double)total_flops / 1e9);
    else
        printf("\ntotal: %.4f ms (sum of step medians) over %d steps, %.4f GFLOP, %.2f GFLOP/s\n", p->total_ms,
               m->n_steps, (double)total_flops / 1e9, gflops_per_s(total_flops, p->total_ms));
    printf("run: %.4f ms median of kn_session_run (not instrumented) in the same runs\n", p->run_ms);
    printf("arena: %s peak (%lld bytes) for %s of intermediates without reuse (%.1f%%); weights %s\n",
           human_bytes(m->arena_bytes, a, sizeof a), (long long)m->arena_bytes,
           human_bytes(m->intermediate_bytes, b, sizeof b),
           m->intermediate_bytes ? 100.0 * (double)m->arena_bytes / (double)m->intermediate_bytes : 100.0,
           human_bytes(m->weights_bytes, c, sizeof c));
    if (!p->have_peak || counts_at_max(p)) return;
    printf("FP32 FMA peak: %.1f GFLOP/s measured with %d thread%s (%s)\n", p->peak.gflops, p->peak.threads,
           p->peak.threads > 1 ? "s" : "", p->peak.isa);
    /* a step faster than the peak means the peak loop was starved (a busy
     * machine), so every fraction printed is too high, or that the step
     * does fewer multiply-adds than its FLOPs count: say so */
    int fastest = -1;
    for (int i = 0; i < m->n_steps; i++)
        if (step_rate(p, i) > p->peak.gflops &&
            (fastest < 0 || p->step_ms[i] > p->step_ms[fastest]))
            fastest = i;
    if (fastest >= 0)
        printf("note: step '%s' ran above the measured peak: either it does fewer multiply-adds than its FLOPs "
               "count (a Winograd convolution: FLOPs are counted as direct convolution's), or the machine was busy "
               "while the peak was measured and the %% peak figures are too high (then rerun on a quiet machine)\n",
               m->steps[fastest].name);
}

static void json_escaped(const char *s)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c < 0x20) printf("\\u%04x", *c);
        else putchar(*c);
    }
    putchar('"');
}

/* A rate as JSON: null where counts_at_max. */
static void json_rate(const kn_prof *p, double v)
{
    if (counts_at_max(p)) printf("null");
    else printf("%.6g", v);
}

static void print_json(const kn_prof *p, const op_sum *ops, int n_ops)
{
    const kn_meta *m = p->m;
    printf("{\"model\": ");
    json_escaped(p->path);
    printf(", \"threads\": %d, \"runs\": %d, \"total_ms\": %.6f, \"run_ms\": %.6f, \"arena_bytes\": %lld, "
           "\"intermediate_bytes\": %lld, \"weights_bytes\": %lld, \"peak_gflops\": %.3f, \"counts_at_max\": %s,\n "
           "\"steps\": [",
           p->threads, p->runs, p->total_ms, p->run_ms, (long long)m->arena_bytes, (long long)m->intermediate_bytes,
           (long long)m->weights_bytes, p->have_peak ? p->peak.gflops : 0.0, counts_at_max(p) ? "true" : "false");
    for (int i = 0; i < m->n_steps; i++) {
        const kn_abi_step *t = &m->steps[i];
        printf("%s\n  {\"index\": %d, \"name\": ", i ? "," : "", i);
        json_escaped(t->name);
        printf(", \"op\": ");
        json_escaped(t->op_type);
        printf(", \"kernel\": ");
        if (p->impl && p->impl[i]) json_escaped(p->impl[i]);
        else printf("null");
        printf(", \"ms\": %.6f, \"share\": %.6f, \"flops\": %lld, \"gflops_per_s\": ", p->step_ms[i],
               p->total_ms > 0 ? 100 * p->step_ms[i] / p->total_ms : 0, (long long)t->flops);
        json_rate(p, step_rate(p, i));
        printf(", \"bytes_read\": %lld, \"bytes_written\": %lld, \"bytes_live\": %lld}", (long long)t->bytes_read,
               (long long)t->bytes_written, (long long)p->live[i]);
    }
    printf("],\n \"ops\": [");
    for (int k = 0; k < n_ops; k++) {
        double g = gflops_per_s(ops[k].flops, ops[k].ms);
        printf("%s\n  {\"op\": ", k ? "," : "");
        json_escaped(ops[k].op);
        printf(", \"steps\": %d, \"ms\": %.6f, \"flops\": %lld, \"gflops_per_s\": ", ops[k].count, ops[k].ms,
               (long long)ops[k].flops);
        json_rate(p, g);
        printf(", \"peak_fraction\": ");
        json_rate(p, p->have_peak ? g / p->peak.gflops : 0.0);
        printf("}");
    }
    printf("]}\n");
}

static int report(const kn_prof *p, const prof_args *a)
{
    const kn_meta *m = p->m;
    int *order = malloc(sizeof *order * ((size_t)m->n_steps + 1));
    op_sum *ops = calloc((size_t)m->n_steps + 1, sizeof *ops);
    if (!order || !ops) {
        free(order), free(ops);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    int n_ops = sum_ops(p, ops);
    int64_t total_flops = 0;
    for (int i = 0; i < m->n_steps; i++) order[i] = i, total_flops += m->steps[i].flops;
    g_sort_ms = p->step_ms;
    if (!a->order) qsort(order, (size_t)m->n_steps, sizeof *order, cmp_step_time);
    qsort(ops, (size_t)n_ops, sizeof *ops, cmp_op_time);
    if (a->json) {
        print_json(p, ops, n_ops);
    } else {
        printf("kiln profile %s: %d thread%s, median of %d runs after %d warm-up\n\n", p->path, p->threads,
               p->threads > 1 ? "s" : "", p->runs, p->warmup);
        print_steps(p, order);
        print_ops(p, ops, n_ops);
        print_summary(p, total_flops);
    }
    free(order), free(ops);
    int st = a->trace ? kn_prof_write_trace(p, a->trace) : KN_OK;
    if (!st && a->trace && !a->json) printf("trace written to %s\n", a->trace);
    if (!st && a->svg) st = kn_prof_write_svg(p, a->svg);
    if (!st && a->svg && !a->json) printf("arena drawing written to %s\n", a->svg);
    return st;
}

/* ---- the verb -------------------------------------------------------------- */

static int profile_artifact(const char *art_file, const prof_args *a)
{
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    int st = kn_artifact_open(art_file, &art);
    if (!st) st = kn_session_create(art, &s);
    if (!st) st = kn_session_set_threads(s, a->threads);
    const kn_meta *m = art ? kn_artifact_meta(art) : NULL;
    size_t n = m ? (size_t)m->n_steps : 0, runs = (size_t)a->runs;
    int64_t *ns = calloc(n * runs + 1, sizeof *ns), *live = calloc(n + 1, sizeof *live);
    int64_t *run_ns = calloc(runs + 1, sizeof *run_ns);
    double *ms = calloc(n + 1, sizeof *ms), run_ms = 0;
    const char **impl = calloc(n + 1, sizeof *impl);
    if (!st && (!ns || !live || !run_ns || !ms || !impl)) st = kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) st = measure(s, art, a, ns, run_ns);
    /* after the runs: a runtime kernel names what ran it only once it has run */
    for (size_t i = 0; !st && i < n; i++) impl[i] = kn_session_step_impl(s, (int)i);
    if (!st) st = step_medians(ns, a->runs, (int)n, ms);
    if (!st) st = step_medians(run_ns, a->runs, 1, &run_ms);
    kn_prof p = {.path = a->path, .m = m, .threads = a->threads, .runs = a->runs, .warmup = a->warmup,
                 .ns = ns, .step_ms = ms, .live = live, .impl = impl, .run_ms = run_ms};
    if (!st) {
        kn_prof_live_bytes(m, live);
        for (size_t i = 0; i < n; i++) p.total_ms += ms[i];
        /* measured after the model ran, so oneDNN's threads are not competing */
        if (!a->no_peak) p.have_peak = (st = kn_peak_measure(a->threads, &p.peak)) == KN_OK;
        if (!st) st = report(&p, a);
    }
    free(ns), free(live), free(run_ns), free(ms), free(impl);
    kn_session_free(s);
    kn_artifact_close(art);
    return st;
}

/* An .onnx model is compiled into a temporary folder first. */
static int profile_path(const prof_args *a)
{
    if (kn_cli_is_artifact(a->path)) return profile_artifact(a->path, a);
    const char *t = getenv("TMPDIR");
    char dir[512], art[600];
    snprintf(dir, sizeof dir, "%s/kiln-profile-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) return kn_error(KN_ERR_IO, "cannot create a temporary folder: %s", strerror(errno));
    snprintf(art, sizeof art, "%s/model.so", dir);
    kn_compile_opts o = {.output = art, .opt_level = 3, .target = "native"};
    int st = kn_cli_compile_model(a->path, a->n_shapes, a->shapes, &o);
    if (!st) st = profile_artifact(art, a);
    unlink(art);
    rmdir(dir);
    return st;
}

int kn_cmd_profile(int argc, char **argv)
{
    prof_args a = {.threads = 1, .runs = 10, .warmup = 1};
    a.specs = calloc((size_t)argc + 1, sizeof *a.specs);
    a.shapes = calloc((size_t)argc + 1, sizeof *a.shapes);
    int rc = 1;
    if (a.specs && a.shapes) {
        rc = parse_args(argc, argv, &a);
        if (rc == 1) rc = 0;
        else if (rc == 2) profile_usage(stderr);
        else if (rc == 3) rc = 2;
        else if (profile_path(&a)) kn_cli_report(NULL), rc = 1;
    }
    free(a.specs);
    free(a.shapes);
    return rc;
}
