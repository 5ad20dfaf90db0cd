/* `kiln conformance`: runs the ONNX backend node test suite.
 *
 * Each case (a folder with model.onnx and test_data_set_*) runs in a forked
 * child, so a crash or a hang in one case is reported as that case's failure
 * instead of ending the run. The child sends back one status letter and a
 * message through a pipe. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "eval.h"
#include "cg.h"
#include "kiln/kiln.h"
#include "onnx_import.h"
#include "pass.h"
#include "kiln/profile.h"

#define CASE_TIMEOUT_S 120
#define MAX_SETS 16
#define MAX_IO 64

enum { R_PASS = 'P', R_FAIL = 'F', R_UNSUPPORTED = 'U' };

/* What the cpu backend made of a case's nodes, from the artifact's meta:
 * a case whose every step is a runtime kernel re-tests the C code the
 * reference evaluator runs, not the compiler, and is counted apart. */
enum { P_NONE = '-', P_COMPILED = 'C', P_RUNTIME_ONLY = 'R', P_FOLDED = 'K' };

typedef struct case_result {
    char *name;
    char code;
    char path; /* P_*, for the cpu backend */
    char *msg;
} case_result;

static void conf_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln conformance [--backend reference|cpu] [DIR] [--list-failures] [--list-passes] [--filter GLOB]...\n"
            "                        [-j N] [-O0..3]\n"
            "\n"
            "Runs every case of the ONNX backend node test suite in DIR (default: the one\n"
            "shipped in the project venv's onnx package): imports model.onnx, runs each\n"
            "test_data_set_* and compares with the expected outputs (rtol 1e-3, atol 1e-7;\n"
            "DFT and STFT cases: atol 1e-6 of the output's largest magnitude, as ONNX's runner;\n"
            "integers and bools exactly). Inferred output types and shapes are checked\n"
            "against the computed ones as well. Ends with one line:\n"
            "  conformance: P passed, F failed, U unsupported (of T)\n"
            "  conformance: P passed (R ran only runtime kernels, K folded away), ...   (cpu)\n"
            "With the cpu backend the passed count is followed by how many of those cases\n"
            "ran only runtime kernels (no generated code, no oneDNN primitive: the same C\n"
            "code the reference evaluator runs) and how many folded away entirely.\n"
            "Exits 1 if any case failed.\n"
            "\n"
            "  --backend B       reference (the evaluator, default) or cpu (each case compiled\n"
            "                    to an artifact with its inputs' shapes and run through libkiln_rt)\n"
            "  -O0 .. -O3        optimization level of the cpu backend's compiles (default -O2)\n"
            "  --list-failures   print every failed and unsupported case with its reason\n"
            "  --list-passes     print every passed case (\"PASS name\"; with the cpu backend\n"
            "                    followed by compiled, runtime-only or folded)\n"
            "  --filter GLOB     only cases whose folder name matches (repeatable)\n"
            "  -j N              cases run in parallel (default: number of CPUs)\n");
}

static char *default_dir(void)
{
    const char *env = getenv("KILN_ONNX_NODE_DIR");
    if (env && *env) return strdup(env);
    glob_t g;
    char pat[4096];
    snprintf(pat, sizeof pat, "%s/.venv/lib/python3*/site-packages/onnx/backend/test/data/node", KILN_SOURCE_DIR);
    char *res = NULL;
    if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) res = strdup(g.gl_pathv[0]);
    globfree(&g);
    return res;
}

/* ---- comparing ----------------------------------------------------------- */

/* The folder name of the case this process runs (each case runs in a child). */
static const char *g_case = "";

static void set_case(const char *case_dir)
{
    const char *slash = strrchr(case_dir, '/');
    g_case = slash ? slash + 1 : case_dir;
}

/* The largest |x| of a float tensor (0 for other dtypes). */
static double max_abs(const kn_tensor *t)
{
    double m = 0;
    int64_t n = kn_tensor_numel(t);
    for (int64_t i = 0; t->data && i < n; i++) {
        double v = t->dtype == KN_F32 ? fabs(((const float *)t->data)[i])
                   : t->dtype == KN_F64 ? fabs(((const double *)t->data)[i]) : 0;
        if (v > m) m = v;
    }
    return m;
}

/* The node suite's tolerance, as ONNX's own runner uses it: rtol 1e-3,
 * atol 1e-7, but for the DFT and STFT cases an absolute tolerance of 1e-6
 * of the output's scale, as ONNX's and onnxruntime's runners give those
 * cases theirs (1e-6, 1e-3): their expected data come from numpy's float32
 * FFT, whose rounding leaves up to 2e-6 where the exact answer is 0. */
static int compare(const char *what, const kn_tensor *want, const kn_tensor *got, char *msg, size_t len)
{
    double atol = 1e-7;
    if (!strncmp(g_case, "test_dft", 8) || !strncmp(g_case, "test_stft", 9)) atol = fmax(atol, 1e-6 * max_abs(want));
    return kn_cli_compare(what, want, got, 1e-3, atol, msg, len);
}

/* ---- one case, in the child ---------------------------------------------- */

static char status_code(int st) { return st == KN_ERR_UNSUPPORTED ? R_UNSUPPORTED : R_FAIL; }

static int count_files(const char *dir, const char *prefix)
{
    int n = 0;
    for (;; n++) {
        char p[4096];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s_%d.pb", dir, prefix, n);
        if (stat(p, &sb) != 0) return n;
    }
}

/* Loads set_dir's tensors in[0..n_in) / want[0..n_out), mapped to graph inputs. */
static char load_set(const kn_graph *g, const char *set_dir, kn_tensor *in, const char **names, char **tnames,
                     int *out_n_in, kn_tensor *want, int *out_n_out, char *msg, size_t len)
{
    int n_in = count_files(set_dir, "input"), n_out = count_files(set_dir, "output");
    *out_n_in = *out_n_out = 0;
    if (n_in > MAX_IO || n_out > MAX_IO) {
        snprintf(msg, len, "too many inputs/outputs");
        return R_FAIL;
    }
    const kn_value *formal[MAX_IO];
    int n_formal = 0;
    for (int i = 0; i < g->n_inputs && n_formal < MAX_IO; i++)
        if (!g->inputs[i]->const_data) formal[n_formal++] = g->inputs[i];
    for (int i = 0; i < n_in; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/input_%d.pb", set_dir, i);
        int st = kn_onnx_load_tensor_file(p, &in[i], &tnames[i]);
        *out_n_in = i + 1;
        if (st) {
            snprintf(msg, len, "input_%d.pb: %s", i, kn_last_error());
            return status_code(st);
        }
        const kn_value *v = tnames[i] && *tnames[i] ? kn_graph_lookup_local(g, tnames[i]) : NULL;
        if (v && (v->flags & KN_VALUE_GRAPH_INPUT)) names[i] = v->name;
        else if (i < n_formal) names[i] = formal[i]->name;
        else if (i < g->n_inputs) names[i] = g->inputs[i]->name; /* an overridable initializer */
        else {
            snprintf(msg, len, "test gives %d inputs, the model has %d", n_in, g->n_inputs);
            return R_FAIL;
        }
        const kn_value *fv = kn_graph_lookup_local(g, names[i]);
        if (fv) kn_cli_as_bf16_if_meant(&in[i], fv->dtype);
    }
    for (int i = 0; i < n_out; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/output_%d.pb", set_dir, i);
        int st = kn_onnx_load_tensor_file(p, &want[i], NULL);
        *out_n_out = i + 1;
        if (st) {
            snprintf(msg, len, "output_%d.pb: %s", i, kn_last_error());
            return status_code(st);
        }
    }
    return R_PASS;
}

static char run_set(kn_model *m, const char *set_dir, char *msg, size_t len)
{
    kn_graph *g = m->graph;
    kn_tensor in[MAX_IO] = {0}, want[MAX_IO] = {0}, got[MAX_IO] = {0};
    const char *names[MAX_IO];
    char *tnames[MAX_IO] = {0};
    int n_in = 0, n_out = 0;
    char code = load_set(g, set_dir, in, names, tnames, &n_in, want, &n_out, msg, len);
    if (code == R_PASS && n_out != g->n_outputs) {
        snprintf(msg, len, "test expects %d outputs, the model has %d", n_out, g->n_outputs);
        code = R_FAIL;
    }
    kn_eval_options opts = {.check_infer = 1};
    int st = code == R_PASS ? kn_eval_model_opts(m, n_in, names, in, got, &opts) : KN_OK;
    if (st) {
        snprintf(msg, len, "%s", kn_last_error());
        code = status_code(st);
    }
    for (int i = 0; i < n_out && code == R_PASS; i++) {
        char what[300];
        snprintf(what, sizeof what, "output '%s'", g->outputs[i]->name);
        kn_cli_as_bf16_if_meant(&want[i], got[i].dtype);
        if (compare(what, &want[i], &got[i], msg, len)) code = R_FAIL;
    }
    for (int i = 0; i < MAX_IO; i++) {
        kn_tensor_free(&in[i]);
        kn_tensor_free(&want[i]);
        kn_tensor_free(&got[i]);
        free(tnames[i]);
    }
    return code;
}

/* ---- the cpu backend: compile the case, run it through libkiln_rt -------- */

static int g_opt_level = 2;

/* Compiles model_path with its inputs pinned to the shapes of this data set,
 * runs the artifact and compares. */
/* The graph passes of the -O level, as `kiln compile` runs them, with the
 * graph verified after each (cheap, and the suite's 1000+ graphs are a good
 * net for a pass that breaks an invariant). */
static int run_pipeline(kn_model *m)
{
    kn_pass_log log = {0};
    kn_pipeline_opts po = {.opt_level = g_opt_level, .verify_each = true};
    int st = kn_graph_toposort(m->graph);
    if (!st) st = kn_pass_run_pipeline(m, &po, &log);
    kn_pass_log_free(&log);
    return st;
}

/* P_* for an opened artifact: its steps are the functions `run` calls, one
 * per emitted node (plus an "(outputs)" copy), and every runtime-kernel
 * node adds one opnode record. */
static char artifact_path(const kn_artifact *art)
{
    const kn_meta *mt = kn_artifact_meta(art);
    int node_steps = mt->n_steps;
    if (node_steps > 0 && mt->steps[node_steps - 1].name && !strcmp(mt->steps[node_steps - 1].name, "(outputs)"))
        node_steps--;
    if (node_steps == 0) return P_FOLDED;
    return mt->n_opnodes >= node_steps ? P_RUNTIME_ONLY : P_COMPILED;
}

static char run_set_cpu(const char *model_path, const char *set_dir, char *out_path, char *msg, size_t len)
{
    kn_model *m = NULL;
    kn_artifact *art = NULL;
    kn_session *sess = NULL;
    kn_tensor in[MAX_IO] = {0}, want[MAX_IO] = {0}, got[MAX_IO] = {0}, ordered[MAX_IO] = {0};
    const char *names[MAX_IO];
    char *tnames[MAX_IO] = {0};
    int n_in = 0, n_out = 0;
    char dir[] = "/tmp/kiln-conf.XXXXXX", so[4200] = "";
    bool have_dir = mkdtemp(dir) != NULL;
    char code = R_PASS;
    int st = have_dir ? kn_onnx_load_file(model_path, &m) : kn_error(KN_ERR_IO, "cannot create a temp folder");
    if (!st) st = kn_onnx_check_supported(m);
    if (st) {
        snprintf(msg, len, "%s", kn_last_error());
        code = status_code(st);
        goto out;
    }
    code = load_set(m->graph, set_dir, in, names, tnames, &n_in, want, &n_out, msg, len);
    if (code != R_PASS) goto out;
    for (int i = 0; i < n_in; i++) {
        kn_value *v = kn_graph_lookup_local(m->graph, names[i]);
        if (v) kn_shape_set(&v->shape, in[i].rank, in[i].dims);
    }
    st = kn_graph_infer(m->graph);
    if (!st) st = run_pipeline(m);
    if (!st) {
        snprintf(so, sizeof so, "%s/case.so", dir);
        kn_compile_opts o = {.output = so, .opt_level = g_opt_level, .target = "native", .name = "conformance_case"};
        st = kn_compile_cpu(m, &o);
    }
    if (!st) st = kn_artifact_open(so, &art);
    if (!st) *out_path = artifact_path(art);
    if (!st) st = kn_session_create(art, &sess);
    int n_art_in = art ? kn_artifact_num_inputs(art) : 0, n_art_out = art ? kn_artifact_num_outputs(art) : 0;
    if (!st && (n_art_out != n_out || n_art_in > MAX_IO))
        st = kn_error(KN_ERR_INVALID, "artifact has %d outputs, the test expects %d", n_art_out, n_out);
    for (int i = 0; !st && i < n_in; i++) {
        int idx = kn_artifact_find_input(art, names[i]);
        if (idx < 0) st = kn_error(KN_ERR_INVALID, "artifact has no input '%s'", names[i]);
        else ordered[idx] = in[i], ordered[idx].own = KN_BORROWED;
    }
    if (!st) st = kn_session_run_tensors(sess, n_art_in, ordered, n_out, got);
    if (st) {
        snprintf(msg, len, "%s", kn_last_error());
        code = status_code(st);
        goto out;
    }
    for (int i = 0; i < n_out && code == R_PASS; i++) {
        char what[300];
        kn_io_info info;
        kn_artifact_output_info(art, i, &info);
        snprintf(what, sizeof what, "output '%s'", info.name);
        kn_cli_as_bf16_if_meant(&want[i], got[i].dtype);
        if (compare(what, &want[i], &got[i], msg, len)) code = R_FAIL;
    }
out:
    for (int i = 0; i < MAX_IO; i++) {
        kn_tensor_free(&in[i]);
        kn_tensor_free(&want[i]);
        kn_tensor_free(&got[i]);
        free(tnames[i]);
    }
    kn_session_free(sess);
    kn_artifact_close(art);
    kn_model_free(m);
    if (so[0]) unlink(so);
    if (have_dir) rmdir(dir);
    return code;
}

/* *out_path: what the compiler made of the case (P_*), from its last set. */
static char run_case_cpu(const char *case_dir, char *out_path, char *msg, size_t len)
{
    set_case(case_dir);
    char p[4096];
    snprintf(p, sizeof p, "%s/model.onnx", case_dir);
    char code = R_PASS;
    int sets = 0;
    for (int s = 0; s < MAX_SETS && code == R_PASS; s++) {
        char sd[4096];
        struct stat sb;
        snprintf(sd, sizeof sd, "%s/test_data_set_%d", case_dir, s);
        if (stat(sd, &sb) != 0) break;
        sets++;
        code = run_set_cpu(p, sd, out_path, msg, len);
    }
    if (!sets) {
        snprintf(msg, len, "no test_data_set_* folder");
        code = R_FAIL;
    }
    return code;
}

static char run_case(const char *case_dir, char *msg, size_t len)
{
    set_case(case_dir);
    char p[4096];
    snprintf(p, sizeof p, "%s/model.onnx", case_dir);
    kn_model *m = NULL;
    int st = kn_onnx_load_file(p, &m);
    if (!st) st = kn_onnx_check_supported(m);
    if (!st) {
        st = kn_graph_infer(m->graph);
        if (st) kn_error_prefix("type/shape inference: ");
    }
    if (st) {
        snprintf(msg, len, "%s", kn_last_error());
        kn_model_free(m);
        return status_code(st);
    }
    char code = R_PASS;
    int sets = 0;
    for (int s = 0; s < MAX_SETS && code == R_PASS; s++) {
        char sd[4096];
        struct stat sb;
        snprintf(sd, sizeof sd, "%s/test_data_set_%d", case_dir, s);
        if (stat(sd, &sb) != 0) break;
        sets++;
        code = run_set(m, sd, msg, len);
    }
    if (!sets) {
        snprintf(msg, len, "no test_data_set_* folder");
        code = R_FAIL;
    }
    kn_model_free(m);
    return code;
}

/* ---- the driver ----------------------------------------------------------- */

typedef struct running {
    pid_t pid;
    int fd;
    int index;
    char buf[4096];
    size_t used;
} running;

static void finish(running *r, case_result *res)
{
    int status = 0;
    waitpid(r->pid, &status, 0);
    close(r->fd);
    r->buf[r->used < sizeof r->buf ? r->used : sizeof r->buf - 1] = '\0';
    case_result *c = &res[r->index];
    if (WIFSIGNALED(status)) {
        c->code = R_FAIL;
        char m[128];
        if (WTERMSIG(status) == SIGALRM) snprintf(m, sizeof m, "timed out after %d s", CASE_TIMEOUT_S);
        else snprintf(m, sizeof m, "crashed (%s)", strsignal(WTERMSIG(status)));
        c->msg = strdup(m);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        c->code = R_FAIL;
        char m[160];
        snprintf(m, sizeof m, "exited with status %d (a sanitizer or leak report?)", WEXITSTATUS(status));
        c->msg = strdup(m);
    } else if (r->used >= 2 && (r->buf[0] == R_PASS || r->buf[0] == R_FAIL || r->buf[0] == R_UNSUPPORTED)) {
        c->code = r->buf[0];
        c->path = r->buf[1];
        c->msg = strdup(r->buf + 2);
    } else {
        c->code = R_FAIL;
        c->msg = strdup("the case exited without a result");
    }
    r->pid = 0;
}

/* The parent's bookkeeping, kept reachable from a static so that a forked
 * child's leak check (under ASan) does not count it as the case's leak. */
static struct {
    char *dir;
    char **names;
    case_result *res;
    running *slots;
} g_keep;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int kn_cmd_conformance(int argc, char **argv)
{
    const char *dir_arg = NULL;
    bool list = false, list_passes = false, cpu = false;
    int jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *filters[64];
    int n_filters = 0;
    for (int i = 1; i < argc; i++) {
        if (kn_cli_is_help(argv[i])) {
            conf_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
            const char *b = argv[++i];
            if (!strcmp(b, "cpu")) cpu = true;
            else if (strcmp(b, "reference") != 0) {
                fprintf(stderr, "kiln conformance: backend '%s' is not available (reference or cpu)\n", b);
                return 2;
            }
        } else if (!strcmp(argv[i], "--list-failures")) {
            list = true;
        } else if (!strcmp(argv[i], "--list-passes")) {
            list_passes = true;
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc && n_filters < 64) {
            filters[n_filters++] = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == 'O' && argv[i][2] >= '0' && argv[i][2] <= '3' && !argv[i][3]) {
            g_opt_level = argv[i][2] - '0';
        } else if (!strcmp(argv[i], "-j") && i + 1 < argc) {
            jobs = atoi(argv[++i]);
        } else if (argv[i][0] == '-' || dir_arg) {
            fprintf(stderr, "kiln conformance: unexpected argument '%s'\n", argv[i]);
            conf_usage(stderr);
            return 2;
        } else {
            dir_arg = argv[i];
        }
    }
    if (jobs < 1) jobs = 1;
    char *dir = dir_arg ? strdup(dir_arg) : default_dir();
    if (!dir) {
        fprintf(stderr, "kiln conformance: no suite folder given and none found in the project venv "
                        "(run scripts/install-deps, or pass DIR)\n");
        return 2;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "kiln conformance: cannot open '%s': %s\n", dir, strerror(errno));
        free(dir);
        return 2;
    }
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s/model.onnx", dir, e->d_name);
        if (stat(p, &sb) != 0) continue;
        bool match = n_filters == 0;
        for (int f = 0; f < n_filters && !match; f++) match = fnmatch(filters[f], e->d_name, 0) == 0;
        if (!match) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            names = realloc(names, sizeof *names * (size_t)cap);
            if (!names) abort();
            g_keep.names = names;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_str);
    case_result *res = calloc((size_t)n + 1, sizeof *res);
    running *slots = calloc((size_t)jobs, sizeof *slots);
    if (!res || !slots) abort();
    g_keep.dir = dir, g_keep.names = names, g_keep.res = res, g_keep.slots = slots;
    bool tty = isatty(2);
    int next = 0, done = 0, active = 0;
    fflush(NULL);
    while (done < n) {
        while (active < jobs && next < n) {
            int fds[2];
            if (pipe(fds) != 0) abort();
            pid_t pid = fork();
            if (pid == 0) {
                close(fds[0]);
                alarm(CASE_TIMEOUT_S);
                char p[4096], msg[2048] = "", path = P_NONE;
                snprintf(p, sizeof p, "%s/%s", dir, names[next]);
                char code = cpu ? run_case_cpu(p, &path, msg, sizeof msg) : run_case(p, msg, sizeof msg);
                char out[2100];
                int len = snprintf(out, sizeof out, "%c%c%s", code, path, msg);
                if (write(fds[1], out, (size_t)len) < 0) _exit(3);
                /* exit(), not _exit(): under ASan the leak check runs at exit
                 * and turns a leak into a non-zero status the parent sees */
                exit(0);
            }
            close(fds[1]);
            for (int s = 0; s < jobs; s++)
                if (!slots[s].pid) {
                    slots[s] = (running){.pid = pid, .fd = fds[0], .index = next};
                    break;
                }
            res[next].name = names[next];
            next++;
            active++;
        }
        struct pollfd pfd[64];
        int map[64], np = 0;
        for (int s = 0; s < jobs && np < 64; s++)
            if (slots[s].pid) pfd[np] = (struct pollfd){.fd = slots[s].fd, .events = POLLIN}, map[np++] = s;
        if (poll(pfd, (nfds_t)np, -1) < 0 && errno != EINTR) break;
        for (int k = 0; k < np; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            running *r = &slots[map[k]];
            ssize_t got = read(r->fd, r->buf + r->used, sizeof r->buf - 1 - r->used);
            if (got > 0) {
                r->used += (size_t)got;
                if (r->used < sizeof r->buf - 1) continue;
            }
            finish(r, res);
            active--;
            done++;
            if (tty) fprintf(stderr, "\r[%d/%d] %-60.60s", done, n, res[r->index].name);
        }
    }
    if (tty) fprintf(stderr, "\r%*s\r", 80, "");
    int pass = 0, fail = 0, unsup = 0, runtime_only = 0, folded = 0;
    for (int i = 0; i < n; i++) {
        if (res[i].code == R_PASS) pass++;
        else if (res[i].code == R_UNSUPPORTED) unsup++;
        else fail++;
        if (res[i].code == R_PASS) runtime_only += res[i].path == P_RUNTIME_ONLY, folded += res[i].path == P_FOLDED;
        if (list && res[i].code != R_PASS)
            printf("%s %s: %s\n", res[i].code == R_FAIL ? "FAIL" : "UNSUPPORTED", res[i].name, res[i].msg);
        if (list_passes && res[i].code == R_PASS)
            printf("PASS %s%s\n", res[i].name,
                   !cpu                                 ? ""
                   : res[i].path == P_RUNTIME_ONLY      ? " runtime-only"
                   : res[i].path == P_FOLDED            ? " folded"
                                                        : " compiled");
    }
    if (cpu)
        printf("conformance: %d passed (%d ran only runtime kernels, %d folded away), %d failed, %d unsupported "
               "(of %d)\n",
               pass, runtime_only, folded, fail, unsup, n);
    else
        printf("conformance: %d passed, %d failed, %d unsupported (of %d)\n", pass, fail, unsup, n);
    for (int i = 0; i < n; i++) {
        free(res[i].msg);
        free(names[i]);
    }
    free(names);
    free(res);
    free(slots);
    free(dir);
    memset(&g_keep, 0, sizeof g_keep);
    return fail ? 1 : 0;
}
