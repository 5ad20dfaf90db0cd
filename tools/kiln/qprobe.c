/* tools/kiln/qprobe.c — a model compiled to a temporary artifact that also
 * outputs the tensors quantization covers (qtool.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cg.h"
#include "cli.h"
#include "pass.h"
#include "qtool.h"
#include "quantize.h"

int kn_model_data_inputs(const char *model, const char ***out_names, int *out_n, kn_model **out_model)
{
    *out_names = NULL;
    *out_n = 0;
    int st = kn_cli_load_model(model, true, out_model);
    if (st) return st;
    kn_graph *g = (*out_model)->graph;
    const char **names = calloc((size_t)g->n_inputs + 1, sizeof *names);
    if (!names) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_inputs; i++)
        if (!g->inputs[i]->const_data) names[(*out_n)++] = g->inputs[i]->name;
    *out_names = names;
    return KN_OK;
}

int kn_shape_specs_from(kn_samples *s, int n, const char *const *names, char ***out_specs)
{
    *out_specs = calloc((size_t)n + 1, sizeof **out_specs);
    kn_tensor *t = calloc((size_t)n + 1, sizeof *t);
    if (!*out_specs || !t) {
        free(t);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    int st = kn_samples_read(s, 0, t);
    for (int k = 0; !st && k < n; k++) {
        char dims[256];
        kn_shape_str(t[k].rank, t[k].dims, dims, sizeof dims);
        if (t[k].rank == 0) dims[0] = '\0';
        if (asprintf(&(*out_specs)[k], "%s=%s", names[k], dims) < 0) {
            (*out_specs)[k] = NULL;
            st = kn_error(KN_ERR_NOMEM, "out of memory");
        }
    }
    for (int k = 0; k < n; k++) kn_tensor_free(&t[k]);
    free(t);
    return st;
}

void kn_free_shape_specs(int n, char **specs)
{
    for (int k = 0; specs && k < n; k++) free(specs[k]);
    free(specs);
}

static int make_dir(char *dir, size_t len)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, len, "%s/kiln-quant-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) {
        dir[0] = '\0';
        return kn_error(KN_ERR_IO, "cannot create a temporary folder: %s", strerror(errno));
    }
    return KN_OK;
}

static int open_session(kn_qprobe *p, const char *art, int threads)
{
    int st = kn_artifact_open(art, &p->art);
    if (!st) st = kn_session_create(p->art, &p->s);
    if (!st && threads > 1) st = kn_session_set_threads(p->s, threads);
    if (st) return st;
    p->n_in = kn_artifact_num_inputs(p->art);
    p->n_out = kn_artifact_num_outputs(p->art);
    p->in_names = calloc((size_t)p->n_in + 1, sizeof *p->in_names);
    if (!p->in_names) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->n_in; i++) {
        kn_io_info info;
        kn_artifact_input_info(p->art, i, &info);
        p->in_names[i] = info.name;
    }
    return KN_OK;
}

int kn_qprobe_open(const char *art, int threads, kn_qprobe *out)
{
    memset(out, 0, sizeof *out);
    int st = open_session(out, art, threads);
    out->n_model_out = out->n_out;
    return st;
}

/* Records tensor v as observed: a graph input is read from the data, any
 * other value becomes an extra graph output. */
static int observe(kn_qprobe *p, kn_graph *g, kn_value *v)
{
    int st = KN_OK;
    if (!(v->flags & (KN_VALUE_GRAPH_INPUT | KN_VALUE_GRAPH_OUTPUT))) st = kn_graph_add_output(g, v);
    if (st) return st;
    if (!(p->obs_names[p->n_obs] = strdup(v->name))) return kn_error(KN_ERR_NOMEM, "out of memory");
    p->n_obs++;
    return KN_OK;
}

int kn_qprobe_build(const char *model, const kn_probe_opts *o, kn_qprobe *out)
{
    memset(out, 0, sizeof *out);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kn_model *m = NULL;
    int st = kn_cli_load_model(model, true, &m);
    if (!st) st = kn_cli_apply_shapes(m, o->n_shapes, o->shapes);
    if (!st) st = kn_graph_infer(m->graph);
    if (!st && o->mode != KN_PROBE_NONE) st = kn_quant_prepare(m);
    kn_graph *g = m ? m->graph : NULL;
    kn_value **vals = NULL;
    int nv = 0;
    if (!st) out->n_model_out = g->n_outputs;
    if (!st && o->mode == KN_PROBE_SELECT) st = kn_quant_check_keep(g, o->n_keep, o->keep);
    if (!st && o->mode == KN_PROBE_SELECT) st = kn_quant_select(g, o->n_keep, o->keep, &vals, &nv);
    if (!st && o->mode == KN_PROBE_NAMES) {
        vals = calloc((size_t)o->n_names + 1, sizeof *vals);
        if (!vals) st = kn_error(KN_ERR_NOMEM, "out of memory");
        for (int i = 0; !st && i < o->n_names; i++) {
            kn_value *v = kn_graph_lookup_local(g, o->names[i]);
            if (v && v->dtype == KN_F32 && !v->const_data) vals[nv++] = v;
        }
    }
    if (!st) {
        out->obs_names = calloc((size_t)nv + 1, sizeof *out->obs_names);
        out->obs_out = calloc((size_t)nv + 1, sizeof *out->obs_out);
        if (!out->obs_names || !out->obs_out) st = kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; !st && i < nv; i++) st = observe(out, g, vals[i]);
    free(vals);
    kn_pipeline_opts po = {.opt_level = 3};
    kn_pass_log log = {0};
    if (!st) st = kn_graph_toposort(g);
    if (!st) st = kn_pass_run_pipeline(m, &po, &log);
    kn_pass_log_free(&log);
    char art[4300];
    if (!st) st = make_dir(out->dir, sizeof out->dir);
    if (!st) {
        snprintf(art, sizeof art, "%s/model.so", out->dir);
        kn_compile_opts co = {.output = art, .opt_level = 3, .target = "native", .model_hash = 1};
        st = kn_compile_cpu(m, &co);
    }
    if (st) kn_error_prefix("%s: ", model);
    kn_model_free(m);
    if (!st) st = open_session(out, art, o->threads);
    for (int i = 0; !st && i < out->n_obs; i++) {
        int k = kn_artifact_find_output(out->art, out->obs_names[i]);
        bool found = k >= 0;
        for (int j = 0; !found && j < out->n_in; j++)
            if (!strcmp(out->in_names[j], out->obs_names[i])) k = -(1 + j), found = true;
        if (!found)
            st = kn_error(KN_ERR_INTERNAL, "%s: tensor '%s' is not an output of the compiled model", model,
                          out->obs_names[i]);
        out->obs_out[i] = k;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->compile_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return st;
}

void kn_qprobe_free(kn_qprobe *p)
{
    kn_session_free(p->s);
    kn_artifact_close(p->art);
    free(p->in_names);
    for (int i = 0; i < p->n_obs; i++) free(p->obs_names[i]);
    free(p->obs_names);
    free(p->obs_out);
    if (p->dir[0]) {
        char path[4400];
        snprintf(path, sizeof path, "%s/model.so", p->dir);
        unlink(path);
        if (rmdir(p->dir) != 0) fprintf(stderr, "kiln: could not remove the temporary folder %s\n", p->dir);
    }
    memset(p, 0, sizeof *p);
}
