/* `kiln difftest`: the C side of kiln's differential tester.
 *
 * tests/difftest/ generates random valid ONNX graphs with their inputs and
 * onnxruntime's outputs, one folder per case. This verb runs every case
 * through the reference evaluator and through compiled artifacts at each
 * -O level and thread count, compares with onnxruntime under the case's
 * tolerances, and writes what it found beside the case (result.txt, the
 * compile reports). Each case runs in a forked child (forkpool.h), so a
 * crash or a hang is that case's result; the driver runs thousands of
 * cases an hour, so a case does nothing beyond one import per check. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cg.h"
#include "cli.h"
#include "eval.h"
#include "forkpool.h"
#include "kiln/kiln.h"
#include "kiln/profile.h"
#include "onnx_import.h"
#include "pass.h"

#define MAX_IO 64
#define MAX_LEVELS 4
#define MAX_THREADS 16
#define MAX_FILTERS 64
#define LINE 2048

static void difftest_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln difftest DIR [-j N] [-O LIST] [--threads LIST] [--timeout SECONDS]\n"
            "                         [--filter GLOB]... [--keep]\n"
            "\n"
            "Runs a batch of differential-test cases (as tests/difftest/ writes them) through\n"
            "kiln's reference evaluator and through compiled artifacts, and compares every\n"
            "output with onnxruntime's.\n"
            "\n"
            "Each subfolder of DIR that holds a model.onnx is a case, run in sorted order:\n"
            "  model.onnx      the graph\n"
            "  input_<i>.pb    ONNX TensorProto, i = 0..; its name is the graph input's name\n"
            "  expect_<j>.pb   onnxruntime's output j, in graph output order\n"
            "  tol.txt         one line per output j: '<rtol> <atol>'; a float element is good\n"
            "                  when both are NaN, or both are the same inf, or\n"
            "                  |got - want| <= atol + rtol * |want|; '0 0' means exact (floats\n"
            "                  equal in value, NaN == NaN; every output that is exact must also\n"
            "                  be bitwise the same at every thread count). Integers and bools\n"
            "                  are always compared exactly.\n"
            "  dynamic.txt     optional: 'NAME MAX' per line, symbolic dims of model.onnx's\n"
            "                  inputs compiled dynamic (as kiln compile --max NAME=MAX)\n"
            "\n"
            "Besides result.txt, each compile leaves report_O<o>.txt (kiln compile --report)\n"
            "and kernels_O<o>.txt (the kernel each oneDNN step runs, per thread count) in\n"
            "the case's folder, which tests/difftest reads for its coverage report.\n"
            "\n"
            "Checks, each case in a forked child (a crash or timeout is that case's result):\n"
            "  case            the folder itself: a file missing or malformed fails the case\n"
            "  ref             import, infer, run the reference evaluator\n"
            "  O<o> t<T>       compile at -O<o> with the inputs' shapes (report captured in\n"
            "                  DIR/<case>/report_O<o>.txt), run with T threads\n"
            "  O<o> threads    the exact outputs are bitwise equal across the thread counts\n"
            "and writes DIR/<case>/result.txt, one line per check: '<check> PASS',\n"
            "'<check> FAIL <detail>' or '<check> UNSUPPORTED <kiln's message>'\n"
            "(the parent writes 'CRASH <signal or timeout>' for a case that crashed).\n"
            "UNSUPPORTED (the import or the compile says kiln does not support the model)\n"
            "is not a failure. Artifacts are compiled under $TMPDIR (default /tmp), removed\n"
            "as each case ends unless --keep.\n"
            "\n"
            "Prints one line per case as it finishes:\n"
            "  difftest: <case> ok | FAIL <first failing check line> | CRASH <signal or timeout>\n"
            "                      | UNSUPPORTED <message>\n"
            "and at the end:\n"
            "  difftest: P ok, F failed, C crashed, U unsupported (of T cases)\n"
            "Exits 0 only if no case failed or crashed (1 otherwise, 2 for a usage error).\n"
            "\n"
            "  -j N              cases run in parallel (default: number of CPUs)\n"
            "  -O LIST           optimization levels to compile at, e.g. 0,3 (default 0,3)\n"
            "  --threads LIST    thread counts to run each artifact with (default 1,2,4)\n"
            "  --timeout S       seconds a case may take before it is killed (default 120)\n"
            "  --filter GLOB     only cases whose folder name matches (repeatable)\n"
            "  --keep            keep the compiled artifacts (the folder is printed at the end)\n");
}

/* ---- the options and the parent's state ----------------------------------- */

typedef struct difftest_opts {
    int jobs;
    int levels[MAX_LEVELS], n_levels;
    int threads[MAX_THREADS], n_threads;
    int timeout_s;
    const char *filters[MAX_FILTERS];
    int n_filters;
    bool keep;
} difftest_opts;

/* The run, kept in a static so that a forked child's leak check (under ASan)
 * finds the parent's bookkeeping reachable instead of calling it a leak. */
static struct {
    const char *dir;
    difftest_opts o;
    char tmp_root[4096];
    char **names;
    int n;
    int done, ok, failed, crashed, unsupported;
    bool tty;
} g_run;

/* Parses "0,3" / "1,2,4" into out[0..*out_n): at most max integers in [lo, hi]. */
static bool parse_list(const char *s, int lo, int hi, int max, int *out, int *out_n)
{
    *out_n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < lo || v > hi || *out_n == max || (*end && *end != ',')) return false;
        out[(*out_n)++] = (int)v;
        s = *end ? end + 1 : end;
        if (*end && !*s) return false; /* a trailing comma */
    }
    return *out_n > 0;
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "kiln difftest: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(kiln difftest --help explains the options)\n");
    return 2;
}

/* Returns -1 when the arguments are good, else the exit status. */
static int parse_args(int argc, char **argv, difftest_opts *o, const char **out_dir)
{
    *o = (difftest_opts){.jobs = (int)sysconf(_SC_NPROCESSORS_ONLN), .levels = {0, 3}, .n_levels = 2,
                         .threads = {1, 2, 4}, .n_threads = 3, .timeout_s = 120};
    *out_dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (kn_cli_is_help(a)) {
            difftest_usage(stdout);
            return 0;
        } else if (!strcmp(a, "-j") || !strcmp(a, "-O") || !strcmp(a, "--threads") || !strcmp(a, "--timeout") ||
                   !strcmp(a, "--filter")) {
            if (!v) return usage_error("%s needs a value", a);
            i++;
            char *end;
            long n = strtol(v, &end, 10);
            bool num_ok = *v && !*end && n >= 1 && n <= 1000000;
            if (!strcmp(a, "-j") && num_ok) o->jobs = (int)n;
            else if (!strcmp(a, "--timeout") && num_ok) o->timeout_s = (int)n;
            else if (!strcmp(a, "-O") && parse_list(v, 0, 3, MAX_LEVELS, o->levels, &o->n_levels)) {}
            else if (!strcmp(a, "--threads") && parse_list(v, 1, 1024, MAX_THREADS, o->threads, &o->n_threads)) {}
            else if (!strcmp(a, "--filter") && o->n_filters < MAX_FILTERS) o->filters[o->n_filters++] = v;
            else {
                fprintf(stderr, "kiln difftest: bad value '%s' for %s\n", v, a);
                return 2;
            }
        } else if (!strcmp(a, "--keep")) {
            o->keep = true;
        } else if (a[0] == '-' || *out_dir) {
            return usage_error("unexpected argument '%s'", a);
        } else {
            *out_dir = a;
        }
    }
    if (!*out_dir) return usage_error("%s", "no case folder given");
    return -1;
}

/* ---- one case's data, in the child ----------------------------------------- */

typedef struct difftest_case {
    char dir[4096];
    char tmp[4096]; /* this case's temp folder */
    int n_in, n_out;
    kn_tensor in[MAX_IO];
    char *in_names[MAX_IO]; /* the TensorProtos' names */
    char *bound[MAX_IO];    /* the graph input each feeds (bind_inputs) */
    kn_tensor want[MAX_IO];
    double rtol[MAX_IO], atol[MAX_IO];
    int n_syms; /* dynamic dims from dynamic.txt, compiled with --max */
    char sym_name[KN_MAX_SYMS][64];
    int64_t sym_max[KN_MAX_SYMS];
    FILE *result; /* result.txt.tmp */
    char first_fail[LINE], first_unsupported[LINE];
} difftest_case;

static bool exact(const difftest_case *c, int j) { return c->rtol[j] == 0 && c->atol[j] == 0; }

/* Writes "<check> <word>[ <msg>]" to result.txt (flushed, so that a crash
 * later in the case leaves the checks done so far) and remembers the first
 * failure and the first unsupported message. */
static void record(difftest_case *c, const char *check, const char *word, const char *msg)
{
    char line[LINE];
    int len = snprintf(line, sizeof line, "%s %s%s%s", check, word, msg && *msg ? " " : "", msg ? msg : "");
    for (int i = 0; i < len && line[i]; i++)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    fprintf(c->result, "%s\n", line);
    fflush(c->result);
    if (!strcmp(word, "FAIL") && !c->first_fail[0]) snprintf(c->first_fail, sizeof c->first_fail, "%s", line);
    if (!strcmp(word, "UNSUPPORTED") && !c->first_unsupported[0])
        snprintf(c->first_unsupported, sizeof c->first_unsupported, "%s", msg ? msg : "");
}

/* Records kiln's last error for a failed status: UNSUPPORTED or FAIL. */
static void record_status(difftest_case *c, const char *check, int st)
{
    record(c, check, st == KN_ERR_UNSUPPORTED ? "UNSUPPORTED" : "FAIL", kn_last_error());
}

static int count_files(const char *dir, const char *prefix)
{
    for (int n = 0;; n++) {
        char p[4200];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s_%d.pb", dir, prefix, n);
        if (stat(p, &sb) != 0) return n;
    }
}

static int load_tolerances(difftest_case *c)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/tol.txt", c->dir);
    FILE *f = fopen(p, "r");
    if (!f) return kn_error(KN_ERR_IO, "%s: %s", p, strerror(errno));
    int st = KN_OK;
    char line[256];
    for (int j = 0; j < c->n_out && !st; j++) {
        char extra;
        if (!fgets(line, sizeof line, f))
            st = kn_error(KN_ERR_INVALID, "%s: has %d lines, the case has %d outputs (expect_*.pb)", p, j, c->n_out);
        else if (sscanf(line, "%lf %lf %c", &c->rtol[j], &c->atol[j], &extra) != 2 || !(c->rtol[j] >= 0) ||
                 !(c->atol[j] >= 0) || isinf(c->rtol[j]) || isinf(c->atol[j]))
            st = kn_error(KN_ERR_INVALID, "%s: line %d: expected '<rtol> <atol>' (two numbers >= 0)", p, j + 1);
    }
    fclose(f);
    return st;
}

/* dynamic.txt (optional): "NAME MAX" per line, the model's symbolic dims
 * to keep dynamic, as `kiln compile --max NAME=MAX`. */
static int load_dynamic(difftest_case *c)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/dynamic.txt", c->dir);
    FILE *f = fopen(p, "r");
    if (!f) return errno == ENOENT ? KN_OK : kn_error(KN_ERR_IO, "%s: %s", p, strerror(errno));
    char name[64];
    long long max;
    int st = KN_OK;
    while (!st && fscanf(f, "%63s %lld", name, &max) == 2) {
        if (c->n_syms == KN_MAX_SYMS || max < 1) st = kn_error(KN_ERR_INVALID, "%s: at most %d dims, each >= 1", p, KN_MAX_SYMS);
        else snprintf(c->sym_name[c->n_syms], sizeof c->sym_name[0], "%s", name), c->sym_max[c->n_syms++] = max;
    }
    if (!st && !feof(f)) st = kn_error(KN_ERR_INVALID, "%s: expected lines 'NAME MAX'", p);
    fclose(f);
    return st;
}

static int load_case(difftest_case *c)
{
    c->n_in = count_files(c->dir, "input");
    c->n_out = count_files(c->dir, "expect");
    if (c->n_in > MAX_IO || c->n_out > MAX_IO)
        return kn_error(KN_ERR_INVALID, "%s: %d inputs and %d outputs; at most %d of each", c->dir, c->n_in, c->n_out,
                        MAX_IO);
    if (c->n_out == 0) return kn_error(KN_ERR_INVALID, "%s: no expect_0.pb", c->dir);
    for (int i = 0; i < c->n_in; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/input_%d.pb", c->dir, i);
        int st = kn_onnx_load_tensor_file(p, &c->in[i], &c->in_names[i]);
        if (st) return st;
    }
    for (int j = 0; j < c->n_out; j++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/expect_%d.pb", c->dir, j);
        int st = kn_onnx_load_tensor_file(p, &c->want[j], NULL);
        if (st) return st;
    }
    int st = load_tolerances(c);
    return st ? st : load_dynamic(c);
}

static void free_case(difftest_case *c)
{
    for (int i = 0; i < MAX_IO; i++) {
        kn_tensor_free(&c->in[i]);
        kn_tensor_free(&c->want[i]);
        free(c->in_names[i]);
        free(c->bound[i]);
    }
}

/* out_names[i]: the graph input input_i.pb feeds (by the tensor's name; an
 * unnamed tensor feeds the i-th input that is not an initializer). */
static int bind_inputs(difftest_case *c, const kn_graph *g, const char **out_names)
{
    const kn_value *formal[MAX_IO];
    int n_formal = 0;
    for (int i = 0; i < g->n_inputs && n_formal < MAX_IO; i++)
        if (!g->inputs[i]->const_data) formal[n_formal++] = g->inputs[i];
    for (int i = 0; i < c->n_in; i++) {
        const char *tn = c->in_names[i];
        const kn_value *v = tn && *tn ? kn_graph_lookup_local(g, tn) : i < n_formal ? formal[i] : NULL;
        if (!v || !(v->flags & KN_VALUE_GRAPH_INPUT))
            return kn_error(KN_ERR_INVALID, "%s/input_%d.pb: tensor '%s' names no input of model.onnx", c->dir, i,
                            tn ? tn : "");
        out_names[i] = v->name;
        if (!c->bound[i] && !(c->bound[i] = strdup(v->name))) return kn_error(KN_ERR_NOMEM, "out of memory");
        kn_cli_as_bf16_if_meant(&c->in[i], v->dtype);
    }
    if (c->n_out != g->n_outputs)
        return kn_error(KN_ERR_INVALID, "%s: %d expect_*.pb files, model.onnx has %d outputs", c->dir, c->n_out,
                        g->n_outputs);
    return KN_OK;
}

/* ---- comparing ------------------------------------------------------------- */

/* 0 if got matches want under (rtol, atol), else 1 with the detail in msg. */
/* Compares every output; records check PASS or FAIL (the first bad output). */
static void compare_all(difftest_case *c, const char *check, const char *const *out_names, kn_tensor *got)
{
    char msg[LINE] = "";
    for (int j = 0; j < c->n_out; j++) {
        char what[300];
        snprintf(what, sizeof what, "output '%s'", out_names[j]);
        kn_cli_as_bf16_if_meant(&c->want[j], got[j].dtype);
        if (kn_cli_compare(what, &c->want[j], &got[j], c->rtol[j], c->atol[j], msg, sizeof msg)) {
            record(c, check, "FAIL", msg);
            return;
        }
    }
    record(c, check, "PASS", NULL);
}

/* ---- the checks ------------------------------------------------------------ */

static int import(const difftest_case *c, kn_model **out_m)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/model.onnx", c->dir);
    int st = kn_onnx_load_file(p, out_m);
    if (!st) st = kn_onnx_check_supported(*out_m);
    return st;
}

static void check_ref(difftest_case *c)
{
    kn_model *m = NULL;
    kn_tensor got[MAX_IO] = {0};
    const char *names[MAX_IO];
    int st = import(c, &m);
    if (!st && (st = kn_graph_infer(m->graph))) kn_error_prefix("type/shape inference: ");
    if (!st) st = bind_inputs(c, m->graph, names);
    kn_eval_options opts = {.check_infer = 1};
    if (!st) st = kn_eval_model_opts(m, c->n_in, names, c->in, got, &opts);
    if (st) {
        record_status(c, "ref", st);
    } else {
        const char *out_names[MAX_IO];
        for (int j = 0; j < c->n_out; j++) out_names[j] = m->graph->outputs[j]->name;
        compare_all(c, "ref", out_names, got);
    }
    for (int j = 0; j < MAX_IO; j++) kn_tensor_free(&got[j]);
    kn_model_free(m);
}

/* The graph passes of level o, as `kiln compile` runs them, verified after
 * each: a pass that breaks an invariant is caught at the pass. */
static int run_pipeline(kn_model *m, int o)
{
    kn_pass_log log = {0};
    kn_pipeline_opts po = {.opt_level = o, .verify_each = true};
    int st = kn_graph_toposort(m->graph);
    if (!st) st = kn_pass_run_pipeline(m, &po, &log);
    kn_pass_log_free(&log);
    return st;
}

/* kn_compile_cpu with its report (printed on stdout) captured in
 * report_path: stdout is pointed at the file around the call. */
static int compile_with_report(const difftest_case *c, kn_model *m, kn_compile_opts *o, const char *report_path)
{
    fflush(stdout);
    int fd = open(report_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return kn_error(KN_ERR_IO, "%s: %s", report_path, strerror(errno));
    int saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fd, STDOUT_FILENO) < 0) {
        int e = errno;
        close(fd);
        if (saved >= 0) close(saved);
        return kn_error(KN_ERR_IO, "cannot point stdout at %s: %s", report_path, strerror(e));
    }
    close(fd);
    char model[4200];
    snprintf(model, sizeof model, "%s/model.onnx", c->dir);
    /* dynamic dims go through the CLI's compile, which makes the probes */
    int st = c->n_syms ? kn_cli_compile_model_ex(model, 0, NULL, o, NULL) : kn_compile_cpu(m, o);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    return st;
}

/* Import, pin the inputs' shapes, infer, run level o's passes, compile to
 * so_path; then open the artifact and make one session. */
static int build_artifact(difftest_case *c, int o, const char *so_path, kn_artifact **out_art, kn_session **out_sess)
{
    kn_model *m = NULL;
    const char *names[MAX_IO];
    int st = import(c, &m);
    if (!st) st = bind_inputs(c, m->graph, names);
    /* static: pinned to the inputs' shapes; dynamic: the CLI's compile
     * imports the model again with the dims at their maximum */
    for (int i = 0; !st && !c->n_syms && i < c->n_in; i++)
        kn_shape_set(&kn_graph_lookup_local(m->graph, names[i])->shape, c->in[i].rank, c->in[i].dims);
    if (!st && !c->n_syms && (st = kn_graph_infer(m->graph))) kn_error_prefix("type/shape inference: ");
    if (!st && !c->n_syms) st = run_pipeline(m, o);
    if (!st) {
        char report[4200];
        snprintf(report, sizeof report, "%s/report_O%d.txt", c->dir, o);
        kn_compile_opts co = {
            .output = so_path, .opt_level = o, .target = "native", .name = "difftest_case", .report = 1};
        co.n_syms = c->n_syms;
        for (int k = 0; k < c->n_syms; k++) co.syms[k] = (kn_compile_sym){.name = c->sym_name[k], .max = c->sym_max[k]};
        st = compile_with_report(c, m, &co, report);
    }
    kn_model_free(m);
    if (!st) st = kn_artifact_open(so_path, out_art);
    if (!st) st = kn_session_create(*out_art, out_sess);
    return st;
}

/* The case's inputs in the artifact's input order (borrowed). */
static int order_inputs(const difftest_case *c, const kn_artifact *art, kn_tensor *out_ordered)
{
    int n = kn_artifact_num_inputs(art);
    if (n > MAX_IO) return kn_error(KN_ERR_INVALID, "the artifact has %d inputs; at most %d", n, MAX_IO);
    bool given[MAX_IO] = {0};
    for (int i = 0; i < c->n_in; i++) {
        int idx = kn_artifact_find_input(art, c->bound[i]);
        if (idx < 0) continue; /* an initializer the compile folded in */
        out_ordered[idx] = c->in[i];
        out_ordered[idx].own = KN_BORROWED;
        given[idx] = true;
    }
    for (int k = 0; k < n; k++) {
        kn_io_info info;
        kn_artifact_input_info(art, k, &info);
        if (!given[k]) return kn_error(KN_ERR_INVALID, "%s: no input_*.pb for the artifact's input '%s'", c->dir, info.name);
    }
    return KN_OK;
}

/* Outputs whose tolerance is exact must be bitwise the same at every thread
 * count: compares run t's against the first good run's (base). */
static void bitwise_diff(const difftest_case *c, const kn_tensor *base, const kn_tensor *got, int t_base, int t,
                         char *msg, size_t len)
{
    for (int j = 0; j < c->n_out && !msg[0]; j++)
        if (exact(c, j) && (base[j].nbytes != got[j].nbytes || memcmp(base[j].data, got[j].data, got[j].nbytes)))
            snprintf(msg, len, "output %d differs bitwise between T=%d and T=%d", j, t_base, t);
}

/* Appends to DIR/<case>/kernels_O<o>.txt the kernel each oneDNN step (and
 * each runtime-kernel step that is not the plain C kernel: "kiln
 * lstm:avx2") ran with t threads ("t2 step 3 winograd F(4x4,3x3)"): the
 * session picks them on the machine, after the compile's report was
 * written. */
static void note_kernels(const difftest_case *c, int o, int t, const kn_artifact *art, const kn_session *sess)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/kernels_O%d.txt", c->dir, o);
    FILE *f = fopen(p, "a");
    if (!f) return; /* coverage notes only: the checks go on */
    const kn_meta *meta = kn_artifact_meta(art);
    for (int i = 0; meta && i < meta->n_steps; i++) {
        const char *impl = kn_session_step_impl(sess, i);
        if (impl) fprintf(f, "t%d step %d %s\n", t, i, impl);
    }
    fclose(f);
}

static void check_level(difftest_case *c, int o)
{
    char check[32], so[4200];
    snprintf(check, sizeof check, "O%d", o);
    snprintf(so, sizeof so, "%s/case_O%d.so", c->tmp, o);
    kn_artifact *art = NULL;
    kn_session *sess = NULL;
    kn_tensor ordered[MAX_IO] = {0}, base[MAX_IO] = {0};
    int st = build_artifact(c, o, so, &art, &sess);
    if (!st && kn_artifact_num_outputs(art) != c->n_out)
        st = kn_error(KN_ERR_INVALID, "the artifact has %d outputs, the case %d", kn_artifact_num_outputs(art), c->n_out);
    if (!st) st = order_inputs(c, art, ordered);
    if (st) {
        record_status(c, check, st);
        goto out;
    }
    const char *out_names[MAX_IO];
    for (int j = 0; j < c->n_out; j++) {
        kn_io_info info;
        kn_artifact_output_info(art, j, &info);
        out_names[j] = info.name;
    }
    int t_base = 0, runs = 0;
    char diff[LINE] = "";
    for (int k = 0; k < g_run.o.n_threads; k++) {
        int t = g_run.o.threads[k];
        kn_tensor got[MAX_IO] = {0};
        snprintf(check, sizeof check, "O%d t%d", o, t);
        st = kn_session_set_threads(sess, t);
        if (!st) st = kn_session_run_tensors(sess, kn_artifact_num_inputs(art), ordered, c->n_out, got);
        /* after the run: a runtime kernel names what ran it once it has run */
        if (!st) note_kernels(c, o, t, art, sess);
        if (st) {
            record_status(c, check, st);
            continue;
        }
        compare_all(c, check, out_names, got);
        runs++;
        if (!t_base) {
            t_base = t;
            memcpy(base, got, sizeof got); /* base takes ownership */
            continue;
        }
        bitwise_diff(c, base, got, t_base, t, diff, sizeof diff);
        for (int j = 0; j < MAX_IO; j++) kn_tensor_free(&got[j]);
    }
    snprintf(check, sizeof check, "O%d threads", o);
    if (runs > 1) record(c, check, diff[0] ? "FAIL" : "PASS", diff);
out:
    for (int j = 0; j < MAX_IO; j++) kn_tensor_free(&base[j]);
    kn_session_free(sess);
    kn_artifact_close(art);
    if (!g_run.o.keep) unlink(so);
}

/* ---- the child: one case --------------------------------------------------- */

static void case_path(char *buf, size_t len, int index, const char *file)
{
    snprintf(buf, len, "%s/%s/%s", g_run.dir, g_run.names[index], file);
}

/* Runs case index, writes result.txt (through result.txt.tmp, renamed at
 * the end, so a crash never leaves a result.txt that looks complete) and
 * answers 'P', 'F<first failing line>' or 'U<message>' on fd. */
static void run_case(int index, int fd, void *ctx)
{
    (void)ctx;
    static difftest_case c; /* large; static keeps it off the child's stack */
    memset(&c, 0, sizeof c);
    snprintf(c.dir, sizeof c.dir, "%s/%s", g_run.dir, g_run.names[index]);
    snprintf(c.tmp, sizeof c.tmp, "%s/%s", g_run.tmp_root, g_run.names[index]);
    char tmp_result[4200], result[4200];
    case_path(tmp_result, sizeof tmp_result, index, "result.txt.tmp");
    case_path(result, sizeof result, index, "result.txt");
    c.result = fopen(tmp_result, "w");
    char answer[LINE + 1];
    if (!c.result) {
        snprintf(answer, sizeof answer, "F%s: %s", tmp_result, strerror(errno));
        if (write(fd, answer, strlen(answer)) < 0) _exit(3);
        return;
    }
    /* codegen's own temp folders go into this case's, which the parent
     * removes whatever happens to the child */
    int st = mkdir(c.tmp, 0700) != 0 ? kn_error(KN_ERR_IO, "cannot create %s: %s", c.tmp, strerror(errno)) : KN_OK;
    if (!st) setenv("TMPDIR", c.tmp, 1);
    if (!st) st = load_case(&c);
    if (st) {
        record(&c, "case", "FAIL", kn_last_error());
    } else {
        check_ref(&c);
        for (int k = 0; k < g_run.o.n_levels; k++) check_level(&c, g_run.o.levels[k]);
    }
    fclose(c.result);
    if (rename(tmp_result, result) != 0 && !c.first_fail[0])
        snprintf(c.first_fail, sizeof c.first_fail, "case FAIL cannot write %s: %s", result, strerror(errno));
    if (c.first_fail[0]) snprintf(answer, sizeof answer, "F%s", c.first_fail);
    else if (c.first_unsupported[0]) snprintf(answer, sizeof answer, "U%s", c.first_unsupported);
    else snprintf(answer, sizeof answer, "P");
    free_case(&c);
    if (write(fd, answer, strlen(answer)) < 0) _exit(3);
}

/* ---- the parent ------------------------------------------------------------ */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Before a case runs: what an earlier run left beside it must not be read
 * as this run's result. */
static void before_case(int index, void *ctx)
{
    (void)ctx;
    static const char *const k_stale[] = {"result.txt", "result.txt.tmp", "report_O0.txt",
                                          "report_O1.txt", "report_O2.txt", "report_O3.txt"};
    for (size_t i = 0; i < sizeof k_stale / sizeof k_stale[0]; i++) {
        char p[4200];
        case_path(p, sizeof p, index, k_stale[i]);
        unlink(p);
    }
}

/* A crashed case's result.txt: the checks it finished, then the crash. */
static void write_crash(int index, const char *detail)
{
    char tmp[4200], result[4200];
    case_path(tmp, sizeof tmp, index, "result.txt.tmp");
    case_path(result, sizeof result, index, "result.txt");
    rename(tmp, result); /* fails harmlessly if the child got no further than forking */
    FILE *f = fopen(result, "a");
    if (!f) {
        fprintf(stderr, "kiln difftest: cannot write %s: %s\n", result, strerror(errno));
        return;
    }
    fprintf(f, "CRASH %s\n", detail);
    fclose(f);
}

static void case_done(const kn_forkpool_result *r, void *ctx)
{
    (void)ctx;
    const char *name = g_run.names[r->index];
    char detail[LINE], sig[32];
    detail[0] = '\0';
    if (r->end == KN_FORKPOOL_TIMEOUT) snprintf(detail, sizeof detail, "timeout after %d s", g_run.o.timeout_s);
    else if (r->end == KN_FORKPOOL_SIGNALED) snprintf(detail, sizeof detail, "%s", kn_forkpool_signal_name(r->code, sig, sizeof sig));
    else if (r->code != 0) snprintf(detail, sizeof detail, "exited with status %d (a sanitizer report?)", r->code);
    else if (!r->answer_len || !strchr("PFU", r->answer[0])) snprintf(detail, sizeof detail, "exited without a result");
    if (g_run.tty) fprintf(stderr, "\r%*s\r", 79, "");
    if (detail[0]) {
        write_crash(r->index, detail);
        printf("difftest: %s CRASH %s\n", name, detail);
        g_run.crashed++;
    } else if (r->answer[0] == 'P') {
        printf("difftest: %s ok\n", name);
        g_run.ok++;
    } else if (r->answer[0] == 'F') {
        printf("difftest: %s FAIL %s\n", name, r->answer + 1);
        g_run.failed++;
    } else {
        printf("difftest: %s UNSUPPORTED %s\n", name, r->answer + 1);
        g_run.unsupported++;
    }
    fflush(stdout);
    if (!g_run.o.keep) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s/%s", g_run.tmp_root, name);
        remove_tree(tmp);
    }
    g_run.done++;
    if (g_run.tty) fprintf(stderr, "[%d/%d] %-60.60s\r", g_run.done, g_run.n, name);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The sorted names of DIR's subfolders that hold a model.onnx and match a
 * filter; -1 if DIR cannot be read. */
static int list_cases(const char *dir, const difftest_opts *o, char ***out_names)
{
    *out_names = NULL;
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[4200];
        struct stat sb;
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s/model.onnx", dir, e->d_name);
        if (stat(p, &sb) != 0) continue;
        bool match = o->n_filters == 0;
        for (int f = 0; f < o->n_filters && !match; f++) match = fnmatch(o->filters[f], e->d_name, 0) == 0;
        if (!match) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            char **grown = realloc(names, sizeof *names * (size_t)cap);
            if (!grown) abort();
            names = grown;
        }
        if (!(names[n++] = strdup(e->d_name))) abort();
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    *out_names = names;
    return n;
}

int kn_cmd_difftest(int argc, char **argv)
{
    const char *dir;
    memset(&g_run, 0, sizeof g_run);
    int rc = parse_args(argc, argv, &g_run.o, &dir);
    if (rc >= 0) return rc;
    g_run.dir = dir;
    g_run.n = list_cases(dir, &g_run.o, &g_run.names);
    if (g_run.n < 0) {
        fprintf(stderr, "kiln difftest: cannot read '%s': %s\n", dir, strerror(errno));
        return 2;
    }
    if (g_run.n == 0) {
        fprintf(stderr, "kiln difftest: no case in '%s' (a subfolder holding model.onnx%s)\n", dir,
                g_run.o.n_filters ? " whose name matches --filter" : "");
        free(g_run.names);
        return 2;
    }
    const char *t = getenv("TMPDIR");
    snprintf(g_run.tmp_root, sizeof g_run.tmp_root, "%s/kiln-difftest.XXXXXX", t && *t ? t : "/tmp");
    g_run.tty = isatty(STDERR_FILENO);
    kn_forkpool pool = {.jobs = g_run.o.jobs, .timeout_s = g_run.o.timeout_s, .before = before_case,
                        .child = run_case, .done = case_done};
    if (!mkdtemp(g_run.tmp_root)) {
        fprintf(stderr, "kiln difftest: cannot create a temporary folder %s: %s\n", g_run.tmp_root, strerror(errno));
        g_run.tmp_root[0] = '\0';
        rc = 2;
    } else if (kn_forkpool_run(&pool, g_run.n) != 0) {
        /* the cases that did start have ended and were reported */
        fprintf(stderr, "kiln difftest: cannot start a case: %s\n", strerror(errno));
        rc = 2;
    } else {
        if (g_run.tty) fprintf(stderr, "\r%*s\r", 79, "");
        printf("difftest: %d ok, %d failed, %d crashed, %d unsupported (of %d cases)\n", g_run.ok, g_run.failed,
               g_run.crashed, g_run.unsupported, g_run.n);
        rc = g_run.failed || g_run.crashed ? 1 : 0;
    }
    if (rc != 2 && g_run.o.keep) printf("difftest: artifacts kept in %s/<case>/case_O<o>.so\n", g_run.tmp_root);
    else if (g_run.tmp_root[0]) remove_tree(g_run.tmp_root);
    for (int i = 0; i < g_run.n; i++) free(g_run.names[i]);
    free(g_run.names);
    return rc;
}
