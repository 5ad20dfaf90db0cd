/* `kiln compile`: ONNX model → artifact (.so/.a) + C header, through the CPU
 * code generator. Also the compile step shared by `bench` and `conformance`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "cli.h"
#include "kiln/abi.h"

static void compile_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln compile MODEL.onnx -o ART.so [--emit-header ART.h] [--static ART.a]\n"
            "        [--target native|x86-64-v2|x86-64-v3|x86-64-v4] [-O0..-O3]\n"
            "        [--shape NAME=1x3x224x224 | --shape DIM=N] [--weights embed|external]\n"
            "        [--layout auto|nchw] [--name IDENT] [--report]\n"
            "\n"
            "Compiles MODEL ahead of time into a shared library (or a static archive) that\n"
            "an application runs through libkiln_rt, and a C header describing it. Nothing\n"
            "is written unless the whole compile succeeds.\n"
            "\n"
            "  -o ART.so             the shared artifact\n"
            "  --static ART.a        a static archive (descriptor kn_artifact_<name>)\n"
            "  --emit-header ART.h   the C header (inputs, outputs, memory, typed entry point)\n"
            "  --target T            instruction set: native (default) or an x86-64 level\n"
            "  -O0 .. -O3            LLVM optimization level (default -O3)\n"
            "  --shape NAME=AxBxC    pin input NAME to a static shape\n"
            "  --shape DIM=N         pin every symbolic dim named DIM (e.g. batch=1)\n"
            "  --weights external    weights in ART.so.weights, mmapped at open (models > 2 GiB)\n"
            "  --layout auto|nchw    auto (default): convolutions hand each other activations in\n"
            "                        oneDNN's preferred layout; nchw: every value stays plain\n"
            "  --name IDENT          C identifier for the header's functions (default: from -o)\n"
            "  --report              how each node was lowered: generated, oneDNN, runtime kernel\n");
}

static int parse_dims(const char *s, int64_t *dims, int *rank)
{
    *rank = 0;
    while (*s) {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0 || *rank == KN_MAX_RANK) return -1;
        dims[(*rank)++] = v;
        if (*end == 'x' || *end == 'X' || *end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return *rank > 0 ? 0 : -1;
}

int kn_cli_apply_shapes(kn_model *m, int n, char **specs)
{
    kn_graph *g = m->graph;
    for (int k = 0; k < n; k++) {
        const char *eq = strchr(specs[k], '=');
        if (!eq || eq == specs[k])
            return kn_error(KN_ERR_INVALID, "--shape '%s': expected NAME=AxBxC or DIM=N", specs[k]);
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - specs[k]), specs[k]);
        int64_t dims[KN_MAX_RANK];
        int rank;
        if (parse_dims(eq + 1, dims, &rank))
            return kn_error(KN_ERR_INVALID, "--shape '%s': '%s' is not a shape like 1x3x224x224", specs[k], eq + 1);
        kn_value *in = kn_graph_lookup_local(g, name);
        if (in && (in->flags & KN_VALUE_GRAPH_INPUT)) {
            if (in->shape.rank >= 0 && in->shape.rank != rank)
                return kn_error(KN_ERR_INVALID, "--shape %s: the model's input has rank %d, not %d", name,
                                in->shape.rank, rank);
            for (int d = 0; d < in->shape.rank; d++)
                if (in->shape.dims[d] >= 0 && in->shape.dims[d] != dims[d])
                    return kn_error(KN_ERR_INVALID, "--shape %s: dim %d is %lld in the model, not %lld", name, d,
                                    (long long)in->shape.dims[d], (long long)dims[d]);
            kn_shape_set(&in->shape, rank, dims);
            continue;
        }
        if (rank != 1) return kn_error(KN_ERR_INVALID, "--shape %s: no input of that name", name);
        bool found = false;
        for (int i = 0; i < g->n_inputs; i++) {
            kn_shape *s = &g->inputs[i]->shape;
            for (int d = 0; d < s->rank; d++)
                if (s->sym[d] && !strcmp(s->sym[d], name)) s->dims[d] = dims[0], s->sym[d] = NULL, found = true;
        }
        if (!found) return kn_error(KN_ERR_INVALID, "--shape %s: no input and no symbolic dim has that name", name);
    }
    return KN_OK;
}

/* Hash of the model bytes and the options that change the artifact. */
static uint64_t model_hash(const char *path, const kn_compile_opts *o)
{
    uint64_t h = KN_FNV_INIT;
    FILE *f = fopen(path, "rb");
    if (f) {
        char buf[65536];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) h = kn_fnv1a(h, buf, got);
        fclose(f);
    }
    char opts[256];
    snprintf(opts, sizeof opts, "%s|%d|%d|%d", o->target ? o->target : "native", o->opt_level, o->external_weights,
             o->layout);
    return kn_fnv1a(h, opts, strlen(opts));
}

int kn_cli_compile_model(const char *path, int n_shapes, char **shapes, kn_compile_opts *opts)
{
    kn_model *m = NULL;
    int st = kn_cli_load_model(path, true, &m);
    if (!st) st = kn_cli_apply_shapes(m, n_shapes, shapes);
    if (!st) {
        st = kn_graph_infer(m->graph);
        if (st) kn_error_prefix("%s: type/shape inference: ", path);
    }
    if (!st) {
        opts->model_hash = model_hash(path, opts);
        st = kn_compile_cpu(m, opts);
    }
    kn_model_free(m);
    return st;
}

int kn_cmd_compile(int argc, char **argv)
{
    kn_compile_opts o = {.opt_level = 3, .target = "native"};
    const char *model = NULL;
    char **shapes = calloc((size_t)argc + 1, sizeof *shapes);
    int n_shapes = 0;
    if (!shapes) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < argc;
        if (kn_cli_is_help(a)) {
            compile_usage(stdout);
            free(shapes);
            return 0;
        } else if (!strcmp(a, "-o") && has_next) o.output = argv[++i];
        else if (!strcmp(a, "--static") && has_next) o.static_output = argv[++i];
        else if (!strcmp(a, "--emit-header") && has_next) o.header = argv[++i];
        else if (!strcmp(a, "--target") && has_next) o.target = argv[++i];
        else if (!strcmp(a, "--name") && has_next) o.name = argv[++i];
        else if (!strcmp(a, "--shape") && has_next) shapes[n_shapes++] = argv[++i];
        else if (!strcmp(a, "--report")) o.report = true;
        else if (!strcmp(a, "--layout") && has_next) {
            const char *l = argv[++i];
            if (!strcmp(l, "nchw")) o.layout = KN_CG_LAYOUT_NCHW;
            else if (strcmp(l, "auto") != 0) {
                /* nhwc would need generated loops over channels-last values too */
                fprintf(stderr, "kiln compile: --layout takes auto or nchw, not '%s' (nhwc is not supported yet; "
                                "auto uses channels-last between convolutions where oneDNN prefers it)\n", l);
                free(shapes);
                return 2;
            }
        }
        else if (!strcmp(a, "--weights") && has_next) {
            const char *w = argv[++i];
            if (!strcmp(w, "external")) o.external_weights = true;
            else if (strcmp(w, "embed") != 0) {
                fprintf(stderr, "kiln compile: --weights takes embed or external, not '%s'\n", w);
                free(shapes);
                return 2;
            }
        } else if (!strcmp(a, "--max") && has_next) {
            fprintf(stderr, "kiln compile: --max %s: dynamic dimensions are not supported yet; pin the dim "
                            "with --shape DIM=N\n", argv[i + 1]);
            free(shapes);
            return 2;
        } else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) o.opt_level = a[2] - '0';
        else if (a[0] == '-' || model) {
            fprintf(stderr, "kiln compile: unexpected argument '%s'\n", a);
            compile_usage(stderr);
            free(shapes);
            return 2;
        } else model = a;
    }
    if (!model || (!o.output && !o.static_output)) {
        compile_usage(stderr);
        free(shapes);
        return 2;
    }
    int st = kn_cli_compile_model(model, n_shapes, shapes, &o);
    free(shapes);
    if (st) {
        kn_cli_report(NULL);
        return 1;
    }
    return 0;
}
