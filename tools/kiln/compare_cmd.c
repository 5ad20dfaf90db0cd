/* `kiln compare`: two models (or artifacts) on the same data — per output
 * errors, cosine, SQNR, top-1 agreement; with --per-layer, the
 * quantization noise of each quantized tensor alone (docs/quantization.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compare.h"
#include "qtool.h"
#include "table.h"

static void compare_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln compare A B --data DIR|NAME=FILE.npy ... [--threads T]\n"
            "       kiln compare A.onnx [B.onnx] --per-layer [--calib TABLE.json] --data ...\n"
            "\n"
            "Runs A and B (ONNX models, compiled here to temporary artifacts, or compiled\n"
            "artifacts ART.so) on every sample of the data and prints, per output of A (B's\n"
            "output of the same name, or at the same position): the largest absolute and\n"
            "relative error, cosine similarity, SQNR in dB (10 log10 of signal over error\n"
            "energy), and top-1 agreement when the output is [N, classes].\n"
            "\n"
            "--per-layer: A is the FP32 .onnx; the quantization parameters come from\n"
            "--calib TABLE.json or from B, a static QDQ .onnx (its QuantizeLinear nodes).\n"
            "Each quantized tensor of A is fake-quantized with its scale and zero point and\n"
            "compared with its FP32 value, worst SQNR first: the layers to keep in float\n"
            "(`--keep-float`) are at the top.\n"
            "\n"
            "  --data ...          as for kiln calibrate: a folder of <input>_<index>.npy, or\n"
            "                      NAME=FILE.npy with samples along a leading axis\n"
            "  --threads T         threads of the compiled models\n"
            "  --per-layer         the per-tensor report above\n"
            "  --calib TABLE.json  the parameters for --per-layer\n");
}

typedef struct cmp_args {
    const char *a, *b, *calib;
    char **data;
    int n_data, threads;
    bool per_layer;
} cmp_args;

/* Opens path as an artifact or compiles it; data shapes pin its dims. */
static int open_side(const char *path, const cmp_args *c, int n, char **shapes, const kn_probe_opts *extra,
                     kn_qprobe *out)
{
    if (kn_cli_is_artifact(path)) return kn_qprobe_open(path, c->threads, out);
    kn_probe_opts o = extra ? *extra : (kn_probe_opts){.mode = KN_PROBE_NONE};
    o.threads = c->threads;
    o.n_shapes = n;
    o.shapes = shapes;
    return kn_qprobe_build(path, &o, out);
}

/* Sample tensors (in data order) reordered for p's inputs. */
static int order_inputs(const kn_qprobe *p, int n, const char *const *names, const kn_tensor *in, kn_tensor *out)
{
    for (int j = 0; j < p->n_in; j++) {
        int k = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(p->in_names[j], names[i])) k = i;
        if (k < 0) return kn_error(KN_ERR_INVALID, "input '%s' has no data", p->in_names[j]);
        out[j] = in[k];
    }
    return KN_OK;
}

/* Name column width: the longest name (at least 24), so columns line up. */
static int name_width(int n, const char *const *names)
{
    int w = 24;
    for (int i = 0; i < n; i++)
        if ((int)strlen(names[i]) > w) w = (int)strlen(names[i]);
    return w;
}

static void print_header(int w, const char *first)
{
    printf("%-*s %12s %12s %10s %10s %8s\n", w, first, "max_abs", "max_rel", "cosine", "sqnr_db", "top1");
}

static void print_metric_row(int w, const char *name, const kn_qmetrics *m)
{
    char top1[32] = "-";
    if (m->rows) snprintf(top1, sizeof top1, "%.4f", kn_qmetrics_top1(m));
    printf("%-*s %12.6g %12.6g %10.6f %10.2f %8s\n", w, name, m->max_abs, m->max_rel, kn_qmetrics_cosine(m),
           kn_qmetrics_sqnr_db(m), top1);
}

/* The data's input names: the .onnx model's or the artifact's. */
static int data_names(const char *path, kn_model **m, kn_qprobe *art, const char ***names, int *n)
{
    if (!kn_cli_is_artifact(path)) return kn_model_data_inputs(path, names, n, m);
    int st = kn_qprobe_open(path, 1, art);
    if (st) return st;
    *names = calloc((size_t)art->n_in + 1, sizeof **names);
    if (!*names) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < art->n_in; i++) (*names)[i] = art->in_names[i];
    *n = art->n_in;
    return KN_OK;
}

/* --per-layer parameters from a QDQ model: each QuantizeLinear with a
 * constant scalar scale and u8 zero point, by the name of its input. */
static int params_from_qdq(const char *path, kn_calib_table *t)
{
    kn_model *m = NULL;
    int st = kn_cli_load_model(path, true, &m);
    for (int i = 0; !st && i < m->graph->n_nodes; i++) {
        const kn_node *n = m->graph->nodes[i];
        const kn_value *x = kn_node_input(n, 0), *s = kn_node_input(n, 1), *z = kn_node_input(n, 2);
        if (n->op != KN_OP_QuantizeLinear || !s || !s->const_data || s->const_data->dtype != KN_F32 ||
            kn_tensor_numel(s->const_data) != 1 || (z && (!z->const_data || z->const_data->dtype != KN_U8 ||
                                                         kn_tensor_numel(z->const_data) != 1)))
            continue;
        if (kn_calib_table_find(t, x->name)) continue;
        kn_calib_entry e = {.name = (char *)x->name, .scale = ((const float *)s->const_data->data)[0],
                            .zero_point = z ? ((const uint8_t *)z->const_data->data)[0] : 0, .dtype = KN_U8};
        st = kn_calib_table_add(t, &e);
    }
    if (!st && !t->n_tensors)
        st = kn_error(KN_ERR_INVALID, "%s: no QuantizeLinear with a scalar scale and u8 zero point", path);
    kn_model_free(m);
    return st;
}

typedef struct layer_row {
    const char *name;
    kn_qmetrics m;
} layer_row;

static int cmp_rows(const void *a, const void *b)
{
    double x = kn_qmetrics_sqnr_db(&((const layer_row *)a)->m), y = kn_qmetrics_sqnr_db(&((const layer_row *)b)->m);
    if (x != y) return x < y ? -1 : 1;
    return strcmp(((const layer_row *)a)->name, ((const layer_row *)b)->name);
}

static int per_layer(const cmp_args *c, kn_samples *data, int n, const char *const *names, char **shapes)
{
    kn_calib_table t = {0};
    int st = c->calib ? kn_calib_table_read(c->calib, &t) : params_from_qdq(c->b, &t);
    const char **tn = calloc((size_t)t.n_tensors + 1, sizeof *tn);
    if (!st && !tn) st = kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < t.n_tensors; i++) tn[i] = t.tensors[i].name;
    kn_probe_opts po = {.mode = KN_PROBE_NAMES, .n_names = t.n_tensors, .names = tn};
    kn_qprobe p = {0};
    if (!st) st = open_side(c->a, c, n, shapes, &po, &p);
    if (!st && !p.n_obs) st = kn_error(KN_ERR_INVALID, "%s: none of the quantized tensors is in the model", c->a);
    layer_row *rows = st ? NULL : calloc((size_t)p.n_obs + 1, sizeof *rows);
    kn_tensor *in = calloc((size_t)n + 1, sizeof *in), *ord = calloc((size_t)p.n_in + 1, sizeof *ord),
              *out = calloc((size_t)p.n_out + 1, sizeof *out);
    float *fq = NULL;
    size_t fq_cap = 0;
    if (!st && (!rows || !in || !ord || !out)) st = kn_error(KN_ERR_NOMEM, "out of memory");
    for (int k = 0; !st && k < p.n_obs; k++) rows[k].name = p.obs_names[k];
    int64_t ns = st ? 0 : kn_samples_count(data);
    for (int64_t i = 0; !st && i < ns; i++) {
        st = kn_samples_read(data, i, in);
        if (!st) st = order_inputs(&p, n, names, in, ord);
        if (!st) st = kn_session_run_tensors(p.s, p.n_in, ord, p.n_out, out);
        for (int k = 0; !st && k < p.n_obs; k++) {
            const kn_tensor *x = p.obs_out[k] >= 0 ? &out[p.obs_out[k]] : &ord[-1 - p.obs_out[k]];
            size_t cnt = (size_t)kn_tensor_numel(x);
            if (cnt > fq_cap) {
                float *q = realloc(fq, sizeof *q * cnt);
                if (!q) {
                    st = kn_error(KN_ERR_NOMEM, "out of memory");
                    break;
                }
                fq = q, fq_cap = cnt;
            }
            const kn_calib_entry *e = kn_calib_table_find(&t, p.obs_names[k]);
            kn_fake_quant_u8(x->data, cnt, e->scale, e->zero_point, fq);
            kn_qmetrics_add(&rows[k].m, x->data, fq, cnt, 0);
        }
        for (int k = 0; k < n; k++) kn_tensor_free(&in[k]);
        for (int k = 0; k < p.n_out; k++) kn_tensor_free(&out[k]);
        kn_progress("kiln compare", i + 1, ns);
    }
    if (!st) {
        qsort(rows, (size_t)p.n_obs, sizeof *rows, cmp_rows);
        printf("per-layer quantization noise over %lld samples (worst first; tensor fake-quantized alone):\n",
               (long long)ns);
        int w = name_width(p.n_obs, (const char *const *)p.obs_names);
        print_header(w, "tensor");
        for (int k = 0; k < p.n_obs; k++) print_metric_row(w, rows[k].name, &rows[k].m);
    }
    free(fq), free(rows), free(in), free(ord), free(out), free(tn);
    kn_qprobe_free(&p);
    kn_calib_table_free(&t);
    return st;
}

static int compare_outputs(const cmp_args *c, kn_samples *data, int n, const char *const *names, char **shapes)
{
    kn_qprobe a = {0}, b = {0};
    int st = open_side(c->a, c, n, shapes, NULL, &a);
    if (!st) st = open_side(c->b, c, n, shapes, NULL, &b);
    int *map = calloc((size_t)a.n_out + 1, sizeof *map);
    kn_qmetrics *m = calloc((size_t)a.n_out + 1, sizeof *m);
    kn_tensor *in = calloc((size_t)n + 1, sizeof *in), *oa = calloc((size_t)a.n_out + 1, sizeof *oa),
              *ob = calloc((size_t)b.n_out + 1, sizeof *ob), *ia = calloc((size_t)a.n_in + 1, sizeof *ia),
              *ib = calloc((size_t)b.n_in + 1, sizeof *ib);
    if (!st && (!map || !m || !in || !oa || !ob || !ia || !ib)) st = kn_error(KN_ERR_NOMEM, "out of memory");
    for (int k = 0; !st && k < a.n_out; k++) {
        kn_io_info info;
        kn_artifact_output_info(a.art, k, &info);
        map[k] = kn_artifact_find_output(b.art, info.name);
        if (map[k] < 0) map[k] = k < b.n_out ? k : -1;
        if (map[k] < 0) st = kn_error(KN_ERR_INVALID, "%s: no output like '%s' of %s", c->b, info.name, c->a);
    }
    int64_t ns = st ? 0 : kn_samples_count(data);
    for (int64_t i = 0; !st && i < ns; i++) {
        st = kn_samples_read(data, i, in);
        if (!st) st = order_inputs(&a, n, names, in, ia);
        if (!st) st = order_inputs(&b, n, names, in, ib);
        if (!st) st = kn_session_run_tensors(a.s, a.n_in, ia, a.n_out, oa);
        if (!st) st = kn_session_run_tensors(b.s, b.n_in, ib, b.n_out, ob);
        for (int k = 0; !st && k < a.n_out; k++) {
            const kn_tensor *x = &oa[k], *y = &ob[map[k]];
            if (x->dtype != KN_F32 || y->dtype != KN_F32 || kn_tensor_numel(x) != kn_tensor_numel(y)) {
                kn_io_info info;
                kn_artifact_output_info(a.art, k, &info);
                st = kn_error(KN_ERR_INVALID, "output '%s': %s[%lld] in A, %s[%lld] in B (f32 of one size needed)",
                              info.name, kn_dtype_name(x->dtype), (long long)kn_tensor_numel(x),
                              kn_dtype_name(y->dtype), (long long)kn_tensor_numel(y));
                break;
            }
            size_t classes = x->rank == 2 && x->dims[1] > 1 ? (size_t)x->dims[1] : 0;
            kn_qmetrics_add(&m[k], x->data, y->data, (size_t)kn_tensor_numel(x), classes);
        }
        for (int k = 0; k < n; k++) kn_tensor_free(&in[k]);
        for (int k = 0; k < a.n_out; k++) kn_tensor_free(&oa[k]);
        for (int k = 0; k < b.n_out; k++) kn_tensor_free(&ob[k]);
        kn_progress("kiln compare", i + 1, ns);
    }
    if (!st) {
        printf("%s vs %s over %lld samples:\n", c->a, c->b, (long long)ns);
        const char **on = calloc((size_t)a.n_out + 1, sizeof *on);
        for (int k = 0; on && k < a.n_out; k++) {
            kn_io_info info;
            kn_artifact_output_info(a.art, k, &info);
            on[k] = info.name;
        }
        int w = on ? name_width(a.n_out, on) : 24;
        print_header(w, "output");
        for (int k = 0; on && k < a.n_out; k++) print_metric_row(w, on[k], &m[k]);
        free(on);
    }
    free(map), free(m), free(in), free(oa), free(ob), free(ia), free(ib);
    kn_qprobe_free(&a);
    kn_qprobe_free(&b);
    return st;
}

static int run_compare(const cmp_args *c)
{
    kn_model *model = NULL;
    kn_qprobe art = {0};
    const char **names = NULL;
    int n = 0;
    kn_samples *data = NULL;
    char **shapes = NULL;
    int st = data_names(c->a, &model, &art, &names, &n);
    if (!st) st = kn_samples_open(c->n_data, c->data, n, names, &data);
    if (!st) st = kn_shape_specs_from(data, n, names, &shapes);
    if (!st) st = c->per_layer ? per_layer(c, data, n, names, shapes) : compare_outputs(c, data, n, names, shapes);
    kn_free_shape_specs(n, shapes);
    kn_samples_close(data);
    free(names);
    kn_qprobe_free(&art);
    kn_model_free(model);
    return st;
}

int kn_cmd_compare(int argc, char **argv)
{
    cmp_args c = {.threads = 1};
    c.data = calloc((size_t)argc + 1, sizeof *c.data);
    if (!c.data) return 1;
    int rc = -1;
    for (int i = 1; i < argc && rc < 0; i++) {
        const char *s = argv[i];
        if ((!strcmp(s, "--data") || !strcmp(s, "--calib") || !strcmp(s, "--threads")) &&
            !kn_cli_needs_value("compare", i, argc, argv))
            rc = 2;
        else if (kn_cli_is_help(s)) {
            compare_usage(stdout);
            rc = 0;
        } else if (!strcmp(s, "--data")) c.data[c.n_data++] = argv[++i];
        else if (!strcmp(s, "--calib")) c.calib = argv[++i];
        else if (!strcmp(s, "--per-layer")) c.per_layer = true;
        else if (!strcmp(s, "--threads")) {
            if (!kn_cli_parse_int("compare", "--threads", argv[++i], 1, 1024, &c.threads)) rc = 2;
        } else if (s[0] == '-' || (c.a && c.b)) {
            fprintf(stderr, "kiln compare: unexpected argument '%s'\n", s);
            compare_usage(stderr);
            rc = 2;
        } else if (!c.a) c.a = s;
        else c.b = s;
    }
    const char *err = NULL;
    if (rc < 0 && (!c.a || !c.n_data)) err = "give A, B and --data";
    else if (rc < 0 && !c.per_layer && !c.b) err = "give B, the model to compare A with";
    else if (rc < 0 && c.per_layer && !c.calib && !c.b) err = "--per-layer needs --calib TABLE.json or a QDQ model B";
    else if (rc < 0 && c.per_layer && kn_cli_is_artifact(c.a)) err = "--per-layer needs A as an .onnx model";
    else if (rc < 0 && c.calib && !c.per_layer) err = "--calib is for --per-layer";
    if (err) {
        fprintf(stderr, "kiln compare: %s\n\n", err);
        compare_usage(stderr);
        rc = 2;
    }
    if (rc < 0) {
        rc = run_compare(&c) ? 1 : 0;
        if (rc) kn_cli_report(NULL);
    }
    free(c.data);
    return rc;
}
