/* `kiln bench`: latency of a compiled model (median and p90 after warm-up),
 * optionally against onnxruntime on the same inputs in the same run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cg.h"
#include "cli.h"
#include "kiln/kiln.h"
#include "kiln/npy.h"
#include "peak.h"

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln bench MODEL.onnx|ART.so [--threads T] [--runs N] [--warmup W]\n"
            "        [--input NAME=FILE.npy ...] [--shape ...] [--vs-ort [--model MODEL.onnx]] [--json]\n"
            "       kiln bench --peak [--threads T] [--json]\n"
            "\n"
            "Times kn_session_run: median and p90 of N runs (default 20) after W warm-up runs\n"
            "(default 3). An .onnx model is compiled first (-O3, native). Inputs not given\n"
            "are random with a fixed seed (floats in [-1,1), integers in [0,10)).\n"
            "With --vs-ort, onnxruntime (ORT_ENABLE_ALL, same thread count) runs the same\n"
            "model on the same inputs in this run and the ratio kiln/onnxruntime is printed.\n"
            "\n"
            "With --peak, no model is run: the machine's FP32 FMA peak (GFLOP/s) is measured\n"
            "with register-only FMA loops on T threads at once (about half a second), the\n"
            "yardstick for a model's achieved FLOPs. --json prints\n"
            "{\"peak_gflops\": G, \"threads\": T, \"isa\": \"avx512f\"|\"avx2\"|\"scalar\"}.\n");
}

/* `kiln bench --peak`: the measured FP32 FMA peak on `threads` threads. */
static int bench_peak(int threads, bool json)
{
    kn_peak p;
    if (kn_peak_measure(threads, &p)) {
        kn_cli_report(NULL);
        return 1;
    }
    if (json)
        printf("{\"peak_gflops\": %.2f, \"threads\": %d, \"isa\": \"%s\"}\n", p.gflops, p.threads, p.isa);
    else
        printf("peak: %.1f GFLOP/s FP32 FMA (%s, %d thread%s)\n", p.gflops, p.isa, p.threads,
               p.threads == 1 ? "" : "s");
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs scripts/ort_bench.py; fills median/p90 (ms). */
static int run_ort(const char *model, int threads, int runs, int warmup, const char *dir, const kn_artifact *art,
                   double *median, double *p90)
{
    const char *py = getenv("KILN_PYTHON");
    char pybuf[4096], script[4096], cmd[16384];
    if (!py || !*py) {
        snprintf(pybuf, sizeof pybuf, "%s/.venv/bin/python", KILN_SOURCE_DIR);
        py = pybuf;
    }
    snprintf(script, sizeof script, "%s/scripts/ort_bench.py", KILN_SOURCE_DIR);
    int used = snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' --threads %d --runs %d --warmup %d", py, script, model,
                        threads, runs, warmup);
    for (int i = 0; i < kn_artifact_num_inputs(art); i++) {
        kn_io_info info;
        kn_artifact_input_info(art, i, &info);
        used += snprintf(cmd + used, sizeof cmd - (size_t)used, " --input '%s=%s/in%d.npy'", info.name, dir, i);
    }
    FILE *p = popen(cmd, "r");
    if (!p) return kn_error(KN_ERR_IO, "cannot start onnxruntime (%s)", py);
    char line[1024] = "";
    char *got = fgets(line, sizeof line, p);
    int rc = pclose(p);
    if (!got || rc != 0 || sscanf(line, "{\"median_ms\": %lf, \"p90_ms\": %lf", median, p90) != 2)
        return kn_error(KN_ERR_IO, "onnxruntime run failed (%s)", line);
    return KN_OK;
}

/* One run through kn_session_run_tensors (outputs allocated and freed). */
static int run_tensors_once(kn_session *s, int n_in, const kn_tensor *in, int n_out)
{
    kn_tensor out[64] = {{0}};
    if (n_out > 64) return kn_error(KN_ERR_UNSUPPORTED, "more than 64 outputs");
    int st = kn_session_run_tensors(s, n_in, in, n_out, out);
    for (int i = 0; i < n_out; i++) kn_tensor_free(&out[i]);
    return st;
}

int kn_cmd_bench(int argc, char **argv)
{
    const char *path = NULL, *ort_model = NULL;
    int threads = 1, runs = 20, warmup = 3;
    bool vs_ort = false, json = false, peak = false;
    char **specs = calloc((size_t)argc + 1, sizeof *specs), **shapes = calloc((size_t)argc + 1, sizeof *shapes);
    int n_specs = 0, n_shapes = 0, rc = 1;
    if (!specs || !shapes) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool nx = i + 1 < argc;
        if (kn_cli_is_help(a)) {
            bench_usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--threads") && nx) threads = atoi(argv[++i]);
        else if (!strcmp(a, "--runs") && nx) runs = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup") && nx) warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--input") && nx) specs[n_specs++] = argv[++i];
        else if (!strcmp(a, "--shape") && nx) shapes[n_shapes++] = argv[++i];
        else if (!strcmp(a, "--model") && nx) ort_model = argv[++i];
        else if (!strcmp(a, "--vs-ort")) vs_ort = true;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--peak")) peak = true;
        else if (a[0] == '-' || path) {
            fprintf(stderr, "kiln bench: unexpected argument '%s'\n", a);
            bench_usage(stderr);
            rc = 2;
            goto out;
        } else path = a;
    }
    if (peak) {
        /* the peak is a property of the machine: a model here is a mistake */
        if (path || vs_ort || n_specs || n_shapes) {
            fprintf(stderr, "kiln bench: --peak measures the machine and takes no model, --input, --shape or --vs-ort\n");
            rc = 2;
        } else {
            rc = bench_peak(threads, json);
        }
        goto out;
    }
    if (!path || threads < 1 || runs < 1 || warmup < 0) {
        bench_usage(stderr);
        rc = 2;
        goto out;
    }
    char dir[] = "/tmp/kiln-bench.XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "kiln bench: cannot create a temporary folder: %s\n", strerror(errno));
        goto out;
    }
    char art_path[4096];
    const char *art_file = path;
    if (!kn_cli_is_artifact(path)) {
        if (!ort_model) ort_model = path;
        snprintf(art_path, sizeof art_path, "%s/model.so", dir);
        kn_compile_opts o = {.output = art_path, .opt_level = 3, .target = "native"};
        double t0 = now_ms();
        if (kn_cli_compile_model(path, n_shapes, shapes, &o)) {
            kn_cli_report(NULL);
            goto cleanup;
        }
        if (!json) fprintf(stderr, "kiln bench: compiled %s in %.2f s\n", path, (now_ms() - t0) / 1e3);
        art_file = art_path;
    }
    if (vs_ort && !ort_model) {
        fprintf(stderr, "kiln bench: --vs-ort with an artifact needs --model MODEL.onnx\n");
        goto cleanup;
    }
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    if (kn_artifact_open(art_file, &art) || kn_session_create(art, &s) || kn_session_set_threads(s, threads)) {
        kn_cli_report(NULL);
        kn_session_free(s);
        kn_artifact_close(art);
        goto cleanup;
    }
    int n_in = kn_artifact_num_inputs(art), n_out = kn_artifact_num_outputs(art);
    kn_tensor *in = calloc((size_t)n_in + 1, sizeof *in);
    void **in_ptrs = calloc((size_t)n_in + 1, sizeof *in_ptrs), **out_ptrs = calloc((size_t)n_out + 1, sizeof *out_ptrs);
    double *times = calloc((size_t)runs, sizeof *times);
    int st = (!in || !in_ptrs || !out_ptrs || !times) ? kn_error(KN_ERR_NOMEM, "out of memory") : KN_OK;
    if (!st) st = kn_cli_artifact_inputs(art, n_specs, specs, in);
    for (int i = 0; !st && i < n_in; i++) {
        in_ptrs[i] = in[i].data;
        char p[4200];
        snprintf(p, sizeof p, "%s/in%d.npy", dir, i);
        if (vs_ort) st = kn_npy_write(p, &in[i]);
    }
    /* outputs whose shape depends on data need kn_session_run_tensors */
    bool dynamic = false;
    for (int i = 0; !st && i < n_out; i++) {
        kn_io_info info;
        kn_artifact_output_info(art, i, &info);
        for (int d = 0; d < info.rank; d++) dynamic |= info.dims[d] < 0;
        out_ptrs[i] = malloc(info.nbytes ? info.nbytes : 1);
        if (!out_ptrs[i]) st = kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; !st && r < warmup + runs; r++) {
        double t0 = now_ms();
        st = dynamic ? run_tensors_once(s, n_in, in, n_out) : kn_session_run(s, (const void *const *)in_ptrs, out_ptrs);
        if (r >= warmup) times[r - warmup] = now_ms() - t0;
    }
    double ort_med = 0, ort_p90 = 0;
    if (!st && vs_ort) st = run_ort(ort_model, threads, runs, warmup, dir, art, &ort_med, &ort_p90);
    if (st) {
        kn_cli_report(NULL);
    } else {
        qsort(times, (size_t)runs, sizeof *times, cmp_double);
        double med = times[runs / 2], p90 = times[(int)((runs - 1) * 0.9 + 0.5)];
        const kn_artifact_desc *d = kn_artifact_descriptor(art);
        (void)d;
        if (json) {
            printf("{\"model\": \"%s\", \"threads\": %d, \"runs\": %d, \"median_ms\": %.4f, \"p90_ms\": %.4f", path,
                   threads, runs, med, p90);
            if (vs_ort) printf(", \"ort_median_ms\": %.4f, \"ort_p90_ms\": %.4f, \"ratio\": %.4f", ort_med, ort_p90, med / ort_med);
            printf("}\n");
        } else {
            printf("%s: threads %d, %d runs: median %.3f ms, p90 %.3f ms\n", path, threads, runs, med, p90);
            if (vs_ort)
                printf("onnxruntime: median %.3f ms, p90 %.3f ms; kiln/onnxruntime = %.2f\n", ort_med, ort_p90,
                       med / ort_med);
        }
        rc = 0;
    }
    for (int i = 0; i < n_in && in; i++) kn_tensor_free(&in[i]);
    for (int i = 0; i < n_out && out_ptrs; i++) free(out_ptrs[i]);
    free(in), free(in_ptrs), free(out_ptrs), free(times);
    kn_session_free(s);
    kn_artifact_close(art);
cleanup:;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "kiln bench: could not remove %s\n", dir);
out:
    free(specs);
    free(shapes);
    return rc;
}
