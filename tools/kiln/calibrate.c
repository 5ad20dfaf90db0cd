/* `kiln calibrate`: runs the compiled FP32 model over calibration data and
 * writes the calibration table that `kiln compile --quantize static-int8`
 * reads (docs/quantization.md). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "observer.h"
#include "qtool.h"
#include "quantize.h"
#include "table.h"

static void calibrate_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln calibrate MODEL.onnx --data DIR|FILE.npy|NAME=FILE.npy ... -o TABLE.json\n"
            "        [--method minmax|percentile|entropy|mse] [--percentile P] [--per-channel]\n"
            "        [--keep-float NODES|OPS] [--threads T]\n"
            "\n"
            "Compiles MODEL (FP32) with the tensors static quantization covers as extra\n"
            "outputs, runs it on every sample of the data, one sample at a time, and writes\n"
            "each tensor's range, u8 scale and zero point to TABLE.json for\n"
            "`kiln compile --quantize static-int8 --calib TABLE.json`.\n"
            "\n"
            "  --data DIR          a folder of <input>_<index>.npy files, one per model input\n"
            "                      per sample (x_0.npy, x_1.npy, ...; samples in index order;\n"
            "                      in <input>, characters other than letters, digits, _ - .\n"
            "                      are written as _)\n"
            "  --data NAME=FILE    FILE.npy holds every sample of input NAME along a leading\n"
            "                      axis (FILE.npy alone for a one-input model); repeat per input\n"
            "  --method M          minmax: the full range seen; percentile (default): clips the\n"
            "                      tails beyond --percentile; entropy: the KL-divergence\n"
            "                      threshold (TensorRT's); mse: the clipping that minimizes the\n"
            "                      expected quantization error\n"
            "  --percentile P      for --method percentile (default 99.999)\n"
            "  --per-channel       quantize MatMul/Gemm weights per output channel at compile\n"
            "                      time (Conv weights always are); recorded in the table\n"
            "  --keep-float LIST   comma-separated node names or op types to leave in float;\n"
            "                      recorded in the table\n"
            "  --threads T         samples run T at a time, each on one thread (a model's result\n"
            "                      can differ in the last bits with its thread count; this way\n"
            "                      the table is byte-identical at any T)\n"
            "  -o TABLE.json       the calibration table (written atomically)\n"
            "\n"
            "Progress goes to stderr when it is a terminal.\n");
}

/* Splits a comma-separated list into malloc'd items appended to *items. */
static int split_list(const char *s, char ***items, int *n)
{
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len) {
            char **q = realloc(*items, sizeof *q * ((size_t)*n + 1));
            if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
            *items = q;
            if (!(q[*n] = strndup(p, len))) return kn_error(KN_ERR_NOMEM, "out of memory");
            (*n)++;
        }
        p += len + (e ? 1 : 0);
    }
    return KN_OK;
}

static void free_list(char **items, int n)
{
    for (int i = 0; i < n; i++) free(items[i]);
    free(items);
}

typedef struct calib_args {
    const char *model, *out;
    char **data;
    int n_data;
    kn_calib_method method;
    double percentile;
    bool per_channel;
    char **keep;
    int n_keep;
    int threads;
} calib_args;

/* Orders sample tensors (data order) as the artifact's inputs. */
static int input_order(const kn_qprobe *p, int n, const char *const *names, int *order)
{
    for (int j = 0; j < p->n_in; j++) {
        order[j] = -1;
        for (int k = 0; k < n; k++)
            if (!strcmp(p->in_names[j], names[k])) order[j] = k;
        if (order[j] < 0) return kn_error(KN_ERR_INTERNAL, "the compiled model's input '%s' has no data", p->in_names[j]);
    }
    return KN_OK;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Feeds one sample's observed tensors to the observers. */
static int observe_sample(const kn_qprobe *p, const kn_tensor *in, const kn_tensor *out, kn_observer **obs)
{
    for (int k = 0; k < p->n_obs; k++) {
        const kn_tensor *t = p->obs_out[k] >= 0 ? &out[p->obs_out[k]] : &in[-1 - p->obs_out[k]];
        if (t->dtype != KN_F32)
            return kn_error(KN_ERR_INTERNAL, "tensor '%s' is %s, not f32", p->obs_names[k], kn_dtype_name(t->dtype));
        kn_observer_add(obs[k], t->data, (size_t)kn_tensor_numel(t));
    }
    return KN_OK;
}

/* One worker: its own session (one thread) and observers, samples
 * first, first + step, ... Observers merge exactly in any order (observer.h),
 * so the table does not depend on how samples were shared out. */
typedef struct worker {
    const kn_qprobe *p;
    kn_samples *data;
    int n;               /* data inputs */
    const int *order;
    int64_t first, step, ns;
    kn_session *s;
    kn_observer **obs;
    int st;
    int64_t failed_at;
    char msg[1024];
    pthread_mutex_t *lock;
    int64_t *done;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    const kn_qprobe *p = w->p;
    kn_tensor *in = calloc((size_t)w->n + 1, sizeof *in), *ordered = calloc((size_t)p->n_in + 1, sizeof *ordered),
              *out = calloc((size_t)p->n_out + 1, sizeof *out);
    int st = in && ordered && out ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    int64_t i = w->first;
    for (; !st && i < w->ns; i += w->step) {
        st = kn_samples_read(w->data, i, in);
        for (int j = 0; !st && j < p->n_in; j++) ordered[j] = in[w->order[j]];
        if (!st) st = kn_session_run_tensors(w->s, p->n_in, ordered, p->n_out, out);
        if (!st) st = observe_sample(p, ordered, out, w->obs);
        for (int k = 0; k < w->n; k++) kn_tensor_free(&in[k]);
        for (int k = 0; k < p->n_out; k++) kn_tensor_free(&out[k]);
        if (st) break;
        pthread_mutex_lock(w->lock);
        kn_progress("kiln calibrate", ++*w->done, w->ns);
        pthread_mutex_unlock(w->lock);
    }
    if (st) {
        w->st = st;
        w->failed_at = i;
        snprintf(w->msg, sizeof w->msg, "%s", kn_last_error());
    }
    free(in), free(ordered), free(out);
    return NULL;
}

/* Runs every sample through T workers and merges their observers into obs. */
static int run_samples(const kn_qprobe *p, kn_samples *data, int n, const int *order, int threads, kn_observer **obs)
{
    int64_t ns = kn_samples_count(data), done = 0;
    if (threads > ns) threads = (int)ns;
    worker *w = calloc((size_t)threads, sizeof *w);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int st = w && tid ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    int started = 0;
    for (int t = 0; !st && t < threads; t++) {
        w[t] = (worker){.p = p, .data = data, .n = n, .order = order, .first = t, .step = threads, .ns = ns,
                        .lock = &lock, .done = &done};
        w[t].obs = calloc((size_t)p->n_obs + 1, sizeof *w[t].obs);
        if (!w[t].obs) st = kn_error(KN_ERR_NOMEM, "out of memory");
        for (int k = 0; !st && k < p->n_obs; k++)
            if (!(w[t].obs[k] = kn_observer_create())) st = kn_error(KN_ERR_NOMEM, "out of memory");
        /* worker 0 uses the probe's session; the others open their own */
        if (!st) st = t == 0 ? (w[t].s = p->s, KN_OK) : kn_session_create(p->art, &w[t].s);
    }
    for (int t = 0; !st && t < threads; t++) {
        if (pthread_create(&tid[t], NULL, work, &w[t]) != 0) {
            st = kn_error(KN_ERR_NOMEM, "cannot start a thread");
            break;
        }
        started++;
    }
    for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
    /* the failure of the earliest sample, as a one-thread run would report */
    int64_t first_bad = -1;
    for (int t = 0; !st && t < threads; t++)
        if (w[t].st && (first_bad < 0 || w[t].failed_at < w[first_bad].failed_at)) first_bad = t;
    if (first_bad >= 0)
        st = kn_error(w[first_bad].st, "sample %lld: %s", (long long)w[first_bad].failed_at, w[first_bad].msg);
    for (int t = 0; w && t < threads; t++) {
        for (int k = 0; w[t].obs && k < p->n_obs; k++) {
            if (!st) kn_observer_merge(obs[k], w[t].obs[k]);
            kn_observer_free(w[t].obs[k]);
        }
        free(w[t].obs);
        if (t > 0) kn_session_free(w[t].s);
    }
    free(w), free(tid);
    return st;
}

static int calibrate(const calib_args *a)
{
    kn_model *m = NULL;
    const char **names = NULL;
    int n = 0;
    kn_samples *data = NULL;
    char **shapes = NULL;
    kn_qprobe p = {0};
    kn_observer **obs = NULL;
    int *order = NULL;
    kn_calib_table t = {0};
    double t0 = now_s();
    int st = kn_model_data_inputs(a->model, &names, &n, &m);
    if (!st) st = kn_samples_open(a->n_data, a->data, n, names, &data);
    if (!st) st = kn_shape_specs_from(data, n, names, &shapes);
    kn_probe_opts po = {.mode = KN_PROBE_SELECT, .n_keep = a->n_keep, .keep = (const char *const *)a->keep,
                        .threads = 1, .n_shapes = n, .shapes = shapes};
    if (!st) st = kn_qprobe_build(a->model, &po, &p);
    if (!st) {
        obs = calloc((size_t)p.n_obs + 1, sizeof *obs);
        order = calloc((size_t)p.n_in + 1, sizeof *order);
        if (!obs || !order) st = kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; !st && k < p.n_obs; k++)
        if (!(obs[k] = kn_observer_create())) st = kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) st = input_order(&p, n, names, order);
    int64_t ns = st ? 0 : kn_samples_count(data);
    double t1 = now_s();
    if (!st) st = run_samples(&p, data, n, order, a->threads, obs);
    double t2 = now_s();
    if (!st) st = kn_calib_hash_file(a->model, &t.model_hash);
    t.method = a->method;
    t.percentile = a->percentile;
    t.per_channel = a->per_channel;
    t.samples = (uint64_t)ns;
    for (int k = 0; !st && k < a->n_keep; k++) st = kn_calib_table_add_keep(&t, a->keep[k]);
    for (int k = 0; !st && k < p.n_obs; k++) {
        if (obs[k]->nonfinite)
            fprintf(stderr, "kiln calibrate: warning: tensor '%s': %llu NaN or infinite values were left out\n",
                    p.obs_names[k], (unsigned long long)obs[k]->nonfinite);
        if (!obs[k]->count)
            fprintf(stderr, "kiln calibrate: warning: tensor '%s' had no finite value; its range is [0, 0]\n",
                    p.obs_names[k]);
        kn_calib_entry e = {.name = p.obs_names[k], .dtype = KN_U8, .count = obs[k]->count, .bins = KN_OBS_BINS,
                            .range = kn_observer_hist_range(obs[k])};
        kn_observer_range(obs[k], a->method, a->percentile, false, &e.min, &e.max);
        kn_qparams_u8(e.min, e.max, &e.scale, &e.zero_point);
        st = kn_calib_table_add(&t, &e);
    }
    if (!st) st = kn_calib_table_write(a->out, &t);
    if (!st)
        fprintf(stderr,
                "kiln calibrate: %d tensors, %lld samples: compile %.2f s, %.2f ms per sample (%d threads), total %.2f s; "
                "wrote %s\n",
                p.n_obs, (long long)ns, p.compile_s, ns ? (t2 - t1) * 1e3 / (double)ns : 0.0, a->threads,
                now_s() - t0, a->out);
    kn_calib_table_free(&t);
    for (int k = 0; obs && k < p.n_obs; k++) kn_observer_free(obs[k]);
    free(obs), free(order);
    kn_qprobe_free(&p);
    kn_free_shape_specs(n, shapes);
    kn_samples_close(data);
    free(names);
    kn_model_free(m);
    return st;
}

int kn_cmd_calibrate(int argc, char **argv)
{
    calib_args a = {.method = KN_CALIB_PERCENTILE, .percentile = 99.999, .threads = 1};
    a.data = calloc((size_t)argc + 1, sizeof *a.data);
    if (!a.data) return 1;
    int rc = -1;
    static const char *const k_value_flags[] = {"-o", "--data", "--method", "--percentile", "--keep-float", "--threads"};
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *s = argv[i];
        for (size_t f = 0; f < sizeof k_value_flags / sizeof k_value_flags[0]; f++)
            if (!strcmp(s, k_value_flags[f]) && !kn_cli_needs_value("calibrate", i, argc, argv)) rc = 2;
        if (rc >= 0) break;
        if (kn_cli_is_help(s)) {
            calibrate_usage(stdout);
            rc = 0;
        } else if (!strcmp(s, "-o")) a.out = argv[++i];
        else if (!strcmp(s, "--data")) a.data[a.n_data++] = argv[++i];
        else if (!strcmp(s, "--method")) {
            int m = kn_calib_method_from_name(argv[++i]);
            if (m < 0) {
                fprintf(stderr, "kiln calibrate: --method takes minmax, percentile, entropy or mse, not '%s'\n", argv[i]);
                rc = 2;
            } else a.method = (kn_calib_method)m;
        } else if (!strcmp(s, "--percentile")) {
            char *end;
            a.percentile = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(a.percentile > 0 && a.percentile <= 100)) {
                fprintf(stderr, "kiln calibrate: --percentile takes a number in (0, 100], not '%s'\n", argv[i]);
                rc = 2;
            }
        } else if (!strcmp(s, "--per-channel")) a.per_channel = true;
        else if (!strcmp(s, "--keep-float")) {
            if (split_list(argv[++i], &a.keep, &a.n_keep)) {
                kn_cli_report(NULL);
                rc = 1;
            }
        } else if (!strcmp(s, "--threads")) {
            if (!kn_cli_parse_int("calibrate", "--threads", argv[++i], 1, 1024, &a.threads)) rc = 2;
        } else if (s[0] == '-' || a.model) {
            fprintf(stderr, "kiln calibrate: unexpected argument '%s'\n", s);
            calibrate_usage(stderr);
            rc = 2;
        } else a.model = s;
    }
    if (rc < 0 && (!a.model || !a.out || !a.n_data)) {
        if (a.model) fprintf(stderr, "kiln calibrate: give --data and -o TABLE.json\n\n");
        calibrate_usage(stderr);
        rc = 2;
    }
    if (rc < 0) {
        kn_cli_file files[] = {{"MODEL", a.model, false}, {"-o", a.out, true}};
        if (kn_cli_check_distinct(files, 2)) {
            kn_cli_report(NULL);
            rc = 2;
        }
    }
    if (rc < 0) {
        rc = calibrate(&a) ? 1 : 0;
        if (rc) kn_cli_report(NULL);
    }
    free(a.data);
    free_list(a.keep, a.n_keep);
    return rc;
}
