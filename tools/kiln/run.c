/* `kiln run`: runs a model on .npy inputs through the reference evaluator. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "eval.h"
#include "pass.h"
#include "kiln/kiln.h"
#include "kiln/npy.h"

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln run MODEL.onnx|ART.so --input NAME=FILE.npy ... [--output-dir DIR] [--reference]\n"
            "\n"
            "Runs MODEL on the given inputs with the reference evaluator (or a compiled\n"
            "artifact ART.so through libkiln_rt) and prints each\n"
            "output's dtype, shape and first values. With --output-dir, writes every\n"
            "output to DIR/<output name>.npy (the folder is created if needed): in the\n"
            "file name, every character but letters, digits, '_', '-' and '.' (and a\n"
            "leading '.') becomes '_'; if two outputs map to one name, the later one's\n"
            "file gets ~<output index> before .npy (outputs 'a/b' and 'a_b' go to\n"
            "a_b.npy and a_b~1.npy), and kiln run says so. An output file may not be\n"
            "the model or an input file.\n"
            "A model with a single input also accepts --input FILE.npy.\n"
            "\n"
            "  --input NAME=FILE   input tensor as a numpy .npy file (repeat per input)\n"
            "  --output-dir DIR    where to write the outputs as .npy\n"
            "  --reference         use the reference evaluator (the default for .onnx)\n");
}

/* Output names may hold '/' or ':'; file names get '_' for anything odd. */
void kn_cli_safe_name(const char *name, char *buf, size_t len)
{
    size_t i = 0;
    for (; name[i] && i + 1 < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                  c == '-' || c == '.';
        buf[i] = ok ? c : '_';
    }
    buf[i] = '\0';
    if (i == 0 || buf[0] == '.') buf[0] = '_';
}

static void print_summary(const char *name, const kn_tensor *t)
{
    char shape[256];
    kn_shape_str(t->rank, t->dims, shape, sizeof shape);
    printf("%s: %s[%s]", name, kn_dtype_name(t->dtype), shape);
    int64_t n = kn_tensor_numel(t);
    printf(" = [");
    for (int64_t i = 0; i < n && i < 6; i++) {
        if (kn_dtype_info(t->dtype)->is_float) printf("%s%.6g", i ? ", " : "", kn_load_f64(t->dtype, t->data, (size_t)i));
        else printf("%s%lld", i ? ", " : "", (long long)kn_load_i64(t->dtype, t->data, (size_t)i));
    }
    printf("%s]\n", n > 6 ? ", ..." : "");
}

/* The model kiln run runs: an .onnx through the reference evaluator or an
 * artifact through libkiln_rt, with its inputs' and outputs' names. */
typedef struct run_target {
    const char *path;
    kn_model *m;      /* .onnx */
    kn_artifact *art; /* ART.so */
    kn_session *s;
    int n_in, n_out;
    const char **in_names, **out_names;
    bool *required; /* per input: no initializer gives it a default */
} run_target;

/* onnxruntime's transformer contrib ops (com.microsoft Attention,
 * SkipLayerNormalization, ...) have no kernels: the normalize-msft pass
 * rewrites them into the standard ops the evaluator runs, as kiln compile
 * does first at every -O level. */
static int normalize_contrib(kn_model *m)
{
    if (!kn_pass_needs_normalize_msft(m->graph)) return KN_OK;
    /* the pass reads shapes (hidden sizes, the mask's form): infer first,
     * symbolic dims and all */
    kn_pass_log log = {0};
    kn_pipeline_opts po = {.opt_level = 0, .passes = "normalize-msft"};
    int st = kn_graph_infer(m->graph);
    if (!st) st = kn_pass_run_pipeline(m, &po, &log);
    kn_pass_log_free(&log);
    return st;
}

static int target_open(const char *path, run_target *t)
{
    *t = (run_target){.path = path};
    int st;
    if (kn_cli_is_artifact(path)) {
        if ((st = kn_artifact_open(path, &t->art)) || (st = kn_session_create(t->art, &t->s))) return st;
        t->n_in = kn_artifact_num_inputs(t->art);
        t->n_out = kn_artifact_num_outputs(t->art);
    } else {
        if ((st = kn_cli_load_model(path, true, &t->m)) || (st = normalize_contrib(t->m))) return st;
        t->n_in = t->m->graph->n_inputs;
        t->n_out = t->m->graph->n_outputs;
    }
    t->in_names = calloc((size_t)t->n_in + 1, sizeof *t->in_names);
    t->out_names = calloc((size_t)t->n_out + 1, sizeof *t->out_names);
    t->required = calloc((size_t)t->n_in + 1, sizeof *t->required);
    if (!t->in_names || !t->out_names || !t->required) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < t->n_in; i++) {
        kn_io_info info = {0};
        if (t->art) kn_artifact_input_info(t->art, i, &info);
        t->in_names[i] = t->art ? info.name : t->m->graph->inputs[i]->name;
        t->required[i] = t->art || !t->m->graph->inputs[i]->const_data;
    }
    for (int i = 0; i < t->n_out; i++) {
        kn_io_info info = {0};
        if (t->art) kn_artifact_output_info(t->art, i, &info);
        t->out_names[i] = t->art ? info.name : t->m->graph->outputs[i]->name;
    }
    return KN_OK;
}

static void target_close(run_target *t)
{
    free(t->in_names);
    free(t->out_names);
    free(t->required);
    kn_session_free(t->s);
    kn_artifact_close(t->art);
    kn_model_free(t->m);
}

/* Each output's file in out_dir: its name through kn_cli_safe_name, plus .npy; a
 * file name an earlier output already took gets "~<output index>" before
 * .npy (kn_cli_safe_name never makes a '~', so these cannot collide with another
 * output's plain name). Two outputs named "a/b" and "a_b" used to share
 * a_b.npy, the second silently replacing the first. */
static int output_paths(const char *out_dir, const run_target *t, char **out_paths)
{
    for (int i = 0; i < t->n_out; i++) {
        char fname[512];
        kn_cli_safe_name(t->out_names[i], fname, sizeof fname);
        if (asprintf(&out_paths[i], "%s/%s.npy", out_dir, fname) < 0) {
            out_paths[i] = NULL;
            return kn_error(KN_ERR_NOMEM, "out of memory");
        }
        for (int j = 0; j < i; j++) {
            if (strcmp(out_paths[i], out_paths[j])) continue;
            free(out_paths[i]);
            if (asprintf(&out_paths[i], "%s/%s~%d.npy", out_dir, fname, i) < 0) {
                out_paths[i] = NULL;
                return kn_error(KN_ERR_NOMEM, "out of memory");
            }
            fprintf(stderr, "kiln run: output '%s' goes to %s: output '%s' took %s\n", t->out_names[i],
                    out_paths[i], t->out_names[j], out_paths[j]);
            break;
        }
    }
    return KN_OK;
}

/* No output file may be the model, an input file or another output's. */
static int check_output_paths(const run_target *t, int n_specs, const char *const *files, const int *idx,
                              char *const *out_paths)
{
    int n = 1 + n_specs + t->n_out, st = KN_OK;
    kn_cli_file *f = calloc((size_t)n, sizeof *f);
    char **labels = calloc((size_t)n, sizeof *labels);
    if (!f || !labels) st = kn_error(KN_ERR_NOMEM, "out of memory");
    for (int k = 0; !st && k < n; k++) {
        int r = k == 0 ? asprintf(&labels[k], "MODEL")
                : k <= n_specs ? asprintf(&labels[k], "--input %s", t->in_names[idx[k - 1]])
                               : asprintf(&labels[k], "output '%s' in --output-dir", t->out_names[k - 1 - n_specs]);
        if (r < 0) {
            labels[k] = NULL;
            st = kn_error(KN_ERR_NOMEM, "out of memory");
            break;
        }
        f[k] = (kn_cli_file){labels[k], k == 0 ? t->path : k <= n_specs ? files[k - 1] : out_paths[k - 1 - n_specs],
                             k > n_specs};
    }
    if (!st) st = kn_cli_check_distinct(f, n);
    for (int k = 0; labels && k < n; k++) free(labels[k]);
    free(labels);
    free(f);
    return st;
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Runs t on inputs (indexed like t's inputs; unset ones take their
 * default) into outputs[0..t->n_out). */
static int target_run(const run_target *t, kn_tensor *inputs, kn_tensor *outputs)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st;
    if (t->art) {
        st = kn_session_run_tensors(t->s, t->n_in, inputs, t->n_out, outputs);
        if (!st) fprintf(stderr, "kiln run: artifact took %.2f ms\n", ms_since(&t0));
    } else {
        const char **names = calloc((size_t)t->n_in + 1, sizeof *names);
        kn_tensor *given = calloc((size_t)t->n_in + 1, sizeof *given);
        int n = 0;
        st = names && given ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
        for (int i = 0; !st && i < t->n_in; i++)
            if (inputs[i].data || inputs[i].dtype) names[n] = t->in_names[i], given[n++] = inputs[i];
        if (!st) st = kn_eval_model(t->m, n, names, given, outputs);
        if (!st) fprintf(stderr, "kiln run: reference evaluator took %.1f ms\n", ms_since(&t0));
        free(names);
        free(given);
    }
    if (st) kn_error_prefix("%s: ", t->path);
    return st;
}

/* Everything kiln run does after its arguments are parsed: every check
 * (inputs, output paths) comes before any input is read or output written. */
static int run_model(const char *path, int n_specs, char **specs, const char *out_dir)
{
    run_target t;
    int st = target_open(path, &t);
    int *idx = calloc((size_t)n_specs + 1, sizeof *idx);
    const char **files = calloc((size_t)n_specs + 1, sizeof *files);
    kn_tensor *inputs = calloc((size_t)t.n_in + 1, sizeof *inputs);
    kn_tensor *outputs = calloc((size_t)t.n_out + 1, sizeof *outputs);
    char **out_paths = calloc((size_t)t.n_out + 1, sizeof *out_paths);
    if (!st && (!idx || !files || !inputs || !outputs || !out_paths)) st = kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) st = kn_cli_match_inputs(path, t.n_in, t.in_names, t.required, n_specs, specs, true, idx, files);
    for (int i = 0; !st && i < t.n_in; i++) {
        bool given = false;
        for (int k = 0; k < n_specs; k++) given |= idx[k] == i;
        if (!given && t.required[i]) st = kn_error(KN_ERR_INVALID, "%s: input '%s' was not given", path, t.in_names[i]);
    }
    struct stat sb;
    if (!st && out_dir && stat(out_dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
        st = kn_error(KN_ERR_INVALID, "--output-dir '%s': exists and is not a folder", out_dir);
    if (!st && out_dir && !(st = output_paths(out_dir, &t, out_paths)))
        st = check_output_paths(&t, n_specs, files, idx, out_paths);
    for (int k = 0; !st && k < n_specs; k++) st = kn_npy_read(files[k], &inputs[idx[k]]);
    if (!st) st = target_run(&t, inputs, outputs);
    if (!st && out_dir && mkdir(out_dir, 0777) != 0 && errno != EEXIST)
        st = kn_error(KN_ERR_IO, "cannot create output folder '%s': %s", out_dir, strerror(errno));
    for (int i = 0; !st && i < t.n_out; i++) {
        print_summary(t.out_names[i], &outputs[i]);
        if (out_dir) st = kn_npy_write(out_paths[i], &outputs[i]);
    }
    for (int i = 0; inputs && i < t.n_in; i++) kn_tensor_free(&inputs[i]);
    for (int i = 0; outputs && i < t.n_out; i++) kn_tensor_free(&outputs[i]);
    for (int i = 0; out_paths && i < t.n_out; i++) free(out_paths[i]);
    free(idx), free(files), free(inputs), free(outputs), free(out_paths);
    target_close(&t);
    if (st) kn_cli_report(NULL);
    return st ? 1 : 0;
}

int kn_cmd_run(int argc, char **argv)
{
    const char *model_path = NULL, *out_dir = NULL;
    int n_in = 0;
    char **in_specs = calloc((size_t)argc + 1, sizeof *in_specs);
    if (!in_specs) return 1;
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *a = argv[i];
        if (kn_cli_is_help(a)) {
            run_usage(stdout);
            rc = 0;
        } else if ((!strcmp(a, "--input") || !strcmp(a, "--output-dir")) && !kn_cli_needs_value("run", i, argc, argv)) {
            rc = 2;
        } else if (!strcmp(a, "--input")) {
            in_specs[n_in++] = argv[++i];
        } else if (!strcmp(a, "--output-dir")) {
            if (out_dir) {
                fprintf(stderr, "kiln run: --output-dir is given twice ('%s' and '%s')\n", out_dir, argv[i + 1]);
                rc = 2;
            }
            out_dir = argv[++i];
        } else if (!strcmp(a, "--reference")) {
            /* the only engine for .onnx models today */
        } else if (a[0] == '-' || model_path) {
            fprintf(stderr, "kiln run: unexpected argument '%s'\n", a);
            run_usage(stderr);
            rc = 2;
        } else {
            model_path = a;
        }
    }
    if (rc < 0 && !model_path) {
        run_usage(stderr);
        rc = 2;
    }
    if (rc < 0) rc = run_model(model_path, n_in, in_specs, out_dir);
    free(in_specs);
    return rc;
}
