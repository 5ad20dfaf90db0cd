/* `kiln bench`: latency of a compiled model (median and p90 after warm-up),
 * optionally against onnxruntime on the same inputs in the same run, the two
 * sides' timed runs interleaved in blocks (ort_server.h drives onnxruntime). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cg.h"
#include "cli.h"
#include "kiln/kiln.h"
#include "kiln/profile.h"
#include "kiln/npy.h"
#include "ort_server.h"
#include "peak.h"

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln bench MODEL.onnx|ART.so [--threads T] [--runs N] [--warmup W]\n"
            "        [--input NAME=FILE.npy ...] [--shape ...] [--vs-ort [--model MODEL.onnx]] [--json]\n"
            "       kiln bench --peak [--threads T] [--json]\n"
            "\n"
            "Times kn_session_run: median and p90 of N runs (default 20) after W warm-up runs\n"
            "(default 3). An .onnx model is compiled first (-O3, native; --shape as for\n"
            "kiln compile). Inputs not given are random with a fixed seed (floats in [-1,1),\n"
            "integers in [0,10)), in the artifact's shape or, for an ART.so with dynamic\n"
            "dims, the one --shape NAME=DIMS (1x3x256x160) gives; an .npy of a run-time\n"
            "size works too. The session checks such sizes against the compiled range.\n"
            "With --vs-ort, onnxruntime (ORT_ENABLE_ALL, same thread count) runs the same\n"
            "model on the same inputs in this run and the ratio kiln/onnxruntime is printed.\n"
            "The two sides take turns (the side that starts a round alternating too) so\n"
            "that both see the same machine: each turn is 100 ms of rest, one run timed\n"
            "as \"cold\" (caches and worker threads cold after the other side ran), then\n"
            "one timed run. The medians of the timed runs give the ratio; the cold ones\n"
            "are printed too (--json: cold_median_ms, ort_cold_median_ms, cold_ratio).\n"
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

/* One run through kn_session_run_tensors (outputs allocated and freed). */
static int run_tensors_once(kn_session *s, int n_in, const kn_tensor *in, int n_out)
{
    kn_tensor out[64] = {{0}};
    if (n_out > 64) return kn_error(KN_ERR_UNSUPPORTED, "more than 64 outputs");
    int st = kn_session_run_tensors(s, n_in, in, n_out, out);
    for (int i = 0; i < n_out; i++) kn_tensor_free(&out[i]);
    return st;
}

/* What a model's benchmark was asked for. */
typedef struct bench_opts {
    const char *path;      /* as given: the name printed */
    const char *ort_model; /* the .onnx for onnxruntime; NULL without --vs-ort */
    int threads, runs, warmup, n_specs, n_shapes;
    char **specs;  /* --input NAME=FILE.npy */
    char **shapes; /* --shape NAME=DIMS of an artifact's inputs (an .onnx's were compiled in) */
    bool json;
} bench_opts;

/* kiln's side: the session and the buffers of one timed call. */
typedef struct bench_kiln {
    kn_session *s;
    int n_in, n_out;
    kn_tensor *in;
    void **in_ptrs, **out_ptrs;
    bool dynamic; /* an output's shape depends on data: kn_session_run_tensors */
} bench_kiln;

/* n calls; with out_ms, the time (ms) of each. */
static int kiln_runs(const bench_kiln *k, int n, double *out_ms)
{
    for (int r = 0; r < n; r++) {
        double t0 = now_ms();
        int st = k->dynamic ? run_tensors_once(k->s, k->n_in, k->in, k->n_out)
                            : kn_session_run(k->s, (const void *const *)k->in_ptrs, k->out_ptrs);
        if (st) return st;
        if (out_ms) out_ms[r] = now_ms() - t0;
    }
    return KN_OK;
}

/* The inputs (given or random) and output buffers of art's session s. */
static int kiln_setup(const kn_artifact *art, kn_session *s, const bench_opts *o, bench_kiln *out_k)
{
    bench_kiln *k = out_k;
    *k = (bench_kiln){.s = s, .n_in = kn_artifact_num_inputs(art), .n_out = kn_artifact_num_outputs(art)};
    k->in = calloc((size_t)k->n_in + 1, sizeof *k->in);
    k->in_ptrs = calloc((size_t)k->n_in + 1, sizeof *k->in_ptrs);
    k->out_ptrs = calloc((size_t)k->n_out + 1, sizeof *k->out_ptrs);
    if (!k->in || !k->in_ptrs || !k->out_ptrs) return kn_error(KN_ERR_NOMEM, "out of memory");
    bool other_shape = false;
    int st = kn_cli_artifact_inputs(art, o->n_specs, o->specs, o->n_shapes, o->shapes, k->in, &other_shape);
    for (int i = 0; !st && i < k->n_in; i++) k->in_ptrs[i] = k->in[i].data;
    /* a run-time size of a dynamic dim: one run on tensors sets it for the
     * session's raw runs (checked against the compiled range there) */
    if (!st && other_shape) st = run_tensors_once(s, k->n_in, k->in, k->n_out);
    /* outputs whose shape depends on data need kn_session_run_tensors */
    for (int i = 0; !st && i < k->n_out; i++) {
        kn_io_info info;
        kn_artifact_output_info(art, i, &info);
        for (int d = 0; d < info.rank; d++) k->dynamic |= info.dims[d] < 0;
        k->out_ptrs[i] = malloc(info.nbytes ? info.nbytes : 1);
        if (!k->out_ptrs[i]) st = kn_error(KN_ERR_NOMEM, "out of memory");
    }
    return st;
}

static void kiln_free(bench_kiln *k)
{
    for (int i = 0; i < k->n_in && k->in; i++) kn_tensor_free(&k->in[i]);
    for (int i = 0; i < k->n_out && k->out_ptrs; i++) free(k->out_ptrs[i]);
    free(k->in), free(k->in_ptrs), free(k->out_ptrs);
}

/* Writes kiln's inputs to DIR/in<i>.npy and starts onnxruntime on them (it
 * is ready, warm-up done, when this returns). */
static int ort_start(const bench_kiln *k, const kn_artifact *art, const bench_opts *o, const char *dir,
                     kn_ort_server *out_srv)
{
    char **inputs = calloc((size_t)k->n_in + 1, sizeof *inputs), err_path[4200];
    int st = inputs ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < k->n_in; i++) {
        kn_io_info info;
        kn_artifact_input_info(art, i, &info);
        char p[4200];
        snprintf(p, sizeof p, "%s/in%d.npy", dir, i);
        st = kn_npy_write(p, &k->in[i]);
        if (!st && asprintf(&inputs[i], "%s=%s", info.name, p) < 0) {
            inputs[i] = NULL;
            st = kn_error(KN_ERR_NOMEM, "out of memory");
        }
    }
    snprintf(err_path, sizeof err_path, "%s/ort.stderr", dir);
    kn_ort_server_args a = {.model = o->ort_model, .threads = o->threads, .warmup = o->warmup, .n_inputs = k->n_in,
                            .inputs = inputs, .stderr_path = err_path};
    if (!st) st = kn_ort_server_start(&a, out_srv);
    for (int i = 0; inputs && i < k->n_in; i++) free(inputs[i]);
    free(inputs);
    return st;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* The interleaving. This machine's speed drifts over seconds (slow spells
 * last about a run or two of a big model: with blocks of 5 timed runs, one
 * build of ViT-Tiny gave kiln/ORT from 0.69 to 1.15), so the two sides take
 * turns run by run instead of one running after the other: kiln then
 * onnxruntime in even rounds, onnxruntime then kiln in odd ones (neither
 * always goes first).
 *
 * Each turn starts with 100 ms of rest, so that the other side's worker
 * threads (libgomp's, onnxruntime's pool) stop spinning before the clock
 * starts: onnxruntime's pool spins for tens of milliseconds after a run
 * (with 20 ms of rest, kiln's 2-thread ViT-Tiny ran in 54 ms instead of 22:
 * its own threads waited on the busy core). Then one run that is timed on
 * its own ("cold"), then the timed ("warm") run. After the rest a side's
 * weights have left the caches (the other process ran) and its worker
 * threads sleep; waking them costs milliseconds here (libgomp's first
 * parallel region after 100 ms idle: 0.01 to 8 ms), so a cold run measures
 * that, and the warm run measures a model that runs steadily, which is what
 * "the median after warm-up" means. Both are reported. */
typedef struct bench_times {
    double *warm, *cold; /* runs each; cold: the first run of each turn */
} bench_times;

static int bench_interleaved(const bench_kiln *k, kn_ort_server *ort, int runs, bench_times *kt, bench_times *ot)
{
    bool last_kiln = true; /* kiln's warm-up ran last */
    for (int round = 0; round < runs; round++) {
        for (int j = 0; j < 2; j++) {
            bool kiln = (round + j) % 2 == 0;
            if (kiln != last_kiln) sleep_ms(100);
            last_kiln = kiln;
            bench_times *t = kiln ? kt : ot;
            for (int w = 0; w < 2; w++) {
                double *ms = w ? t->warm + round : t->cold + round;
                int st = kiln ? kiln_runs(k, 1, ms) : kn_ort_server_run(ort, 1, ms);
                if (st) return st;
            }
        }
    }
    return KN_OK;
}

/* Sorts ms[0..n) and reads its median and p90 (element round(0.9 (n-1))). */
static void median_p90(double *ms, int n, double *out_median, double *out_p90)
{
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    *out_median = ms[n / 2];
    *out_p90 = ms[(int)((n - 1) * 0.9 + 0.5)];
}

static void print_result(const bench_opts *o, const kn_session *s, bench_times *kt, bench_times *ot)
{
    double med, p90, ort_med = 0, ort_p90 = 0, cold = 0, ort_cold = 0, cold_p90; /* cold_p90: not shown */
    int64_t runs = 0, alone = 0; /* runs (warm-up included) the thread governor ran on one thread */
    kn_session_thread_stats(s, &runs, &alone);
    median_p90(kt->warm, o->runs, &med, &p90);
    if (o->ort_model) {
        median_p90(ot->warm, o->runs, &ort_med, &ort_p90);
        median_p90(kt->cold, o->runs, &cold, &cold_p90);
        median_p90(ot->cold, o->runs, &ort_cold, &cold_p90);
    }
    if (o->json) {
        printf("{\"model\": \"%s\", \"threads\": %d, \"runs\": %d, \"median_ms\": %.4f, \"p90_ms\": %.4f", o->path,
               o->threads, o->runs, med, p90);
        if (o->ort_model)
            printf(", \"ort_median_ms\": %.4f, \"ort_p90_ms\": %.4f, \"ratio\": %.4f, \"cold_median_ms\": %.4f, "
                   "\"ort_cold_median_ms\": %.4f, \"cold_ratio\": %.4f, \"protocol\": \"interleaved, rewarmed\"",
                   ort_med, ort_p90, med / ort_med, cold, ort_cold, cold / ort_cold);
        printf(", \"runs_alone\": %lld, \"runs_all\": %lld}\n", (long long)alone, (long long)runs);
    } else {
        printf("%s: threads %d, %d runs: median %.3f ms, p90 %.3f ms\n", o->path, o->threads, o->runs, med, p90);
        if (alone > 0)
            printf("on one thread: %lld of %lld runs (warm-up included): the thread governor's probes, and runs "
                   "while that was faster (KILN_THREADS=fixed keeps %d)\n",
                   (long long)alone, (long long)runs, o->threads);
        if (o->ort_model) {
            printf("onnxruntime: median %.3f ms, p90 %.3f ms; kiln/onnxruntime = %.2f\n", ort_med, ort_p90,
                   med / ort_med);
            printf("first run after 100 ms idle: kiln %.3f ms, onnxruntime %.3f ms (medians); kiln/onnxruntime = "
                   "%.2f\n",
                   cold, ort_cold, cold / ort_cold);
        }
    }
}

/* Benchmarks the artifact art_file (and onnxruntime on o->ort_model if set);
 * dir is a private temporary folder. Returns the exit status. */
static int bench_artifact(const bench_opts *o, const char *art_file, const char *dir)
{
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    bench_kiln k = {0};
    kn_ort_server ort = {0};
    double *ms = calloc(4 * (size_t)o->runs, sizeof *ms);
    bench_times kt = {ms, ms ? ms + o->runs : NULL}, ot = {ms ? ms + 2 * o->runs : NULL, ms ? ms + 3 * o->runs : NULL};
    int st = ms ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) st = kn_artifact_open(art_file, &art);
    if (!st) st = kn_session_create(art, &s);
    if (!st) st = kn_session_set_threads(s, o->threads);
    if (!st) st = kiln_setup(art, s, o, &k);
    if (!st && o->ort_model) st = ort_start(&k, art, o, dir, &ort);
    /* onnxruntime's pool spins for tens of milliseconds after its warm-up:
     * the rest of a turn (bench_interleaved) before kiln's, so that kiln's
     * first runs, from which its thread governor learns, do not meet it */
    if (!st && o->ort_model) sleep_ms(100);
    if (!st) st = kiln_runs(&k, o->warmup, NULL);
    if (!st && o->ort_model) st = bench_interleaved(&k, &ort, o->runs, &kt, &ot);
    else if (!st) st = kiln_runs(&k, o->runs, kt.warm);
    if (st) kn_ort_server_abort(&ort);
    else st = kn_ort_server_finish(&ort);
    if (st) kn_cli_report(NULL);
    else print_result(o, s, &kt, &ot);
    kiln_free(&k);
    free(ms);
    kn_session_free(s);
    kn_artifact_close(art);
    return st ? 1 : 0;
}

int kn_cmd_bench(int argc, char **argv)
{
    const char *path = NULL, *ort_model = NULL;
    int threads = 1, runs = 20, warmup = 3;
    bool vs_ort = false, json = false, peak = false;
    char **specs = calloc((size_t)argc + 1, sizeof *specs), **shapes = calloc((size_t)argc + 1, sizeof *shapes);
    int n_specs = 0, n_shapes = 0, rc = 1;
    if (!specs || !shapes) return 1;
    static const char *const k_value_flags[] = {"--threads", "--runs", "--warmup", "--input", "--shape", "--model"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        for (size_t f = 0; f < sizeof k_value_flags / sizeof k_value_flags[0]; f++)
            if (!strcmp(a, k_value_flags[f]) && !kn_cli_needs_value("bench", i, argc, argv)) {
                rc = 2;
                goto out;
            }
        if (kn_cli_is_help(a)) {
            bench_usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--threads") || !strcmp(a, "--runs") || !strcmp(a, "--warmup")) {
            int *v = a[2] == 't' ? &threads : a[2] == 'r' ? &runs : &warmup;
            long long max = a[2] == 't' ? KN_PEAK_MAX_THREADS : KN_CLI_MAX_RUNS;
            if (!kn_cli_parse_int("bench", a, argv[++i], a[2] == 'w' ? 0 : 1, max, v)) {
                rc = 2;
                goto out;
            }
        } else if (!strcmp(a, "--input")) specs[n_specs++] = argv[++i];
        else if (!strcmp(a, "--shape")) shapes[n_shapes++] = argv[++i];
        else if (!strcmp(a, "--model")) ort_model = argv[++i];
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
    if (!path) {
        bench_usage(stderr);
        rc = 2;
        goto out;
    }
    /* onnxruntime's child would wait forever on a FIFO: refuse it here */
    if (ort_model && kn_cli_check_regular(ort_model)) {
        kn_cli_report("--model");
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
    bench_opts bo = {.path = path, .ort_model = vs_ort ? ort_model : NULL, .threads = threads, .runs = runs,
                     .warmup = warmup, .n_specs = n_specs, .specs = specs, .json = json};
    if (art_file == path) bo.n_shapes = n_shapes, bo.shapes = shapes;
    rc = bench_artifact(&bo, art_file, dir);
cleanup:;
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "kiln bench: could not remove %s\n", dir);
out:
    free(specs);
    free(shapes);
    return rc;
}
