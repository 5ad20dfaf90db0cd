/* `kiln run`: runs a model on .npy inputs through the reference evaluator. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "eval.h"
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
            "output to DIR/<output name>.npy (the folder is created if needed).\n"
            "A model with a single input also accepts --input FILE.npy.\n"
            "\n"
            "  --input NAME=FILE   input tensor as a numpy .npy file (repeat per input)\n"
            "  --output-dir DIR    where to write the outputs as .npy\n"
            "  --reference         use the reference evaluator (the default for .onnx)\n");
}

/* Output names may hold '/' or ':'; file names get '_' for anything odd. */
static void safe_name(const char *name, char *buf, size_t len)
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

static int write_output(const char *out_dir, const char *name, const kn_tensor *t)
{
    print_summary(name, t);
    if (!out_dir) return KN_OK;
    char fname[512], path[4096];
    safe_name(name, fname, sizeof fname);
    snprintf(path, sizeof path, "%s/%s.npy", out_dir, fname);
    return kn_npy_write(path, t);
}

/* kiln run ART.so: through libkiln_rt, as an application would. */
static int run_artifact(const char *path, int n_in, char **in_specs, const char *out_dir)
{
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    int rc = 1, n_art_in = 0, n_out = 0;
    kn_tensor *inputs = NULL, *outputs = NULL;
    if (kn_artifact_open(path, &art) || kn_session_create(art, &s)) {
        kn_cli_report(NULL);
        goto done;
    }
    n_art_in = kn_artifact_num_inputs(art);
    n_out = kn_artifact_num_outputs(art);
    inputs = calloc((size_t)n_art_in + 1, sizeof *inputs);
    outputs = calloc((size_t)n_out + 1, sizeof *outputs);
    if (!inputs || !outputs) goto done;
    for (int k = 0; k < n_in; k++) {
        const char *eq = strchr(in_specs[k], '=');
        char name[512];
        int idx;
        if (eq) {
            snprintf(name, sizeof name, "%.*s", (int)(eq - in_specs[k]), in_specs[k]);
            idx = kn_artifact_find_input(art, name);
        } else {
            idx = n_art_in == 1 && n_in == 1 ? 0 : -1;
            snprintf(name, sizeof name, "%s", in_specs[k]);
        }
        if (idx < 0) {
            fprintf(stderr, "kiln: error: %s: the artifact has no input named '%s'\n", path, name);
            goto done;
        }
        kn_tensor_free(&inputs[idx]);
        if (kn_npy_read(eq ? eq + 1 : in_specs[k], &inputs[idx])) {
            kn_cli_report(NULL);
            goto done;
        }
    }
    for (int i = 0; i < n_art_in; i++)
        if (!inputs[i].data && !inputs[i].dtype) {
            kn_io_info info;
            kn_artifact_input_info(art, i, &info);
            fprintf(stderr, "kiln: error: %s: input '%s' was not given\n", path, info.name);
            goto done;
        }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (kn_session_run_tensors(s, n_art_in, inputs, n_out, outputs)) {
        kn_cli_report(path);
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (out_dir && mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "kiln: error: cannot create output folder '%s': %s\n", out_dir, strerror(errno));
        goto done;
    }
    for (int i = 0; i < n_out; i++) {
        kn_io_info info;
        kn_artifact_output_info(art, i, &info);
        if (write_output(out_dir, info.name, &outputs[i])) {
            kn_cli_report(NULL);
            goto done;
        }
    }
    fprintf(stderr, "kiln run: artifact took %.2f ms\n",
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    rc = 0;
done:
    for (int i = 0; inputs && i < n_art_in; i++) kn_tensor_free(&inputs[i]);
    for (int i = 0; outputs && i < n_out; i++) kn_tensor_free(&outputs[i]);
    free(inputs);
    free(outputs);
    kn_session_free(s);
    kn_artifact_close(art);
    return rc;
}

int kn_cmd_run(int argc, char **argv)
{
    const char *model_path = NULL, *out_dir = NULL;
    int n_in = 0;
    char **in_specs = calloc((size_t)argc + 1, sizeof *in_specs);
    if (!in_specs) return 1;
    int rc = 1;
    for (int i = 1; i < argc; i++) {
        if (kn_cli_is_help(argv[i])) {
            run_usage(stdout);
            free(in_specs);
            return 0;
        } else if (!strcmp(argv[i], "--input") && i + 1 < argc) {
            in_specs[n_in++] = argv[++i];
        } else if (!strcmp(argv[i], "--output-dir") && i + 1 < argc) {
            out_dir = argv[++i];
        } else if (!strcmp(argv[i], "--reference")) {
            /* the only engine for .onnx models today */
        } else if (argv[i][0] == '-' || model_path) {
            fprintf(stderr, "kiln run: unexpected argument '%s'\n", argv[i]);
            run_usage(stderr);
            free(in_specs);
            return 2;
        } else {
            model_path = argv[i];
        }
    }
    if (!model_path) {
        run_usage(stderr);
        free(in_specs);
        return 2;
    }
    if (kn_cli_is_artifact(model_path)) {
        int r = run_artifact(model_path, n_in, in_specs, out_dir);
        free(in_specs);
        return r;
    }
    kn_model *m = NULL;
    kn_tensor *inputs = calloc((size_t)n_in + 1, sizeof *inputs);
    const char **names = calloc((size_t)n_in + 1, sizeof *names);
    char **name_bufs = calloc((size_t)n_in + 1, sizeof *name_bufs);
    kn_tensor *outputs = NULL;
    if (!inputs || !names || !name_bufs) goto done;
    if (kn_cli_load_model(model_path, true, &m)) {
        kn_cli_report(NULL);
        goto done;
    }
    for (int k = 0; k < n_in; k++) {
        const char *spec = in_specs[k];
        const char *eq = strchr(spec, '=');
        const char *file = eq ? eq + 1 : spec;
        if (eq) {
            name_bufs[k] = strndup(spec, (size_t)(eq - spec));
        } else {
            int runtime_inputs = 0;
            const kn_value *only = NULL;
            for (int i = 0; i < m->graph->n_inputs; i++)
                if (!m->graph->inputs[i]->const_data) runtime_inputs++, only = m->graph->inputs[i];
            if (runtime_inputs != 1 || n_in != 1) {
                fprintf(stderr, "kiln: error: --input '%s': give it as NAME=FILE.npy (the model has %d inputs)\n",
                        spec, runtime_inputs);
                goto done;
            }
            name_bufs[k] = strdup(only->name);
        }
        names[k] = name_bufs[k];
        if (!names[k]) goto done;
        if (kn_npy_read(file, &inputs[k])) {
            kn_cli_report(NULL);
            goto done;
        }
    }
    outputs = calloc((size_t)m->graph->n_outputs + 1, sizeof *outputs);
    if (!outputs) goto done;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (kn_eval_model(m, n_in, names, inputs, outputs)) {
        kn_cli_report(model_path);
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (out_dir && mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "kiln: error: cannot create output folder '%s': %s\n", out_dir, strerror(errno));
        goto done;
    }
    for (int i = 0; i < m->graph->n_outputs; i++) {
        if (write_output(out_dir, m->graph->outputs[i]->name, &outputs[i])) {
            kn_cli_report(NULL);
            goto done;
        }
    }
    fprintf(stderr, "kiln run: reference evaluator took %.1f ms\n", ms);
    rc = 0;
done:
    for (int k = 0; k < n_in; k++) {
        if (inputs) kn_tensor_free(&inputs[k]);
        if (name_bufs) free(name_bufs[k]);
    }
    if (outputs && m)
        for (int i = 0; i < m->graph->n_outputs; i++) kn_tensor_free(&outputs[i]);
    free(outputs);
    free(inputs);
    free(names);
    free(name_bufs);
    free(in_specs);
    kn_model_free(m);
    return rc;
}
