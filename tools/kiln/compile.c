/* `kiln compile`: ONNX model → artifact (.so/.a) + C header, through the CPU
 * code generator. Also the compile step shared by `bench` and `conformance`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "cli.h"
#include "kiln/abi.h"
#include "pass.h"
#include "quantize.h"
#include "table.h"

/* The pass table with each pass's summary, and the -O pipelines. */
static void print_pass_list(FILE *f)
{
    int n;
    const kn_pass_info *t = kn_pass_table(&n);
    fprintf(f, "\nGraph passes (docs/compiling.md):\n");
    for (int i = 0; i < n; i++) fprintf(f, "  %-22s%s\n", t[i].name, t[i].summary);
    fprintf(f, "\nPipelines:\n");
    for (int o = 0; o <= 3; o++) fprintf(f, "  -O%d  %s\n", o, kn_pass_default_pipeline(o));
}

static void compile_usage(FILE *f)
{
    fprintf(f,
            "usage: kiln compile MODEL.onnx -o ART.so [--emit-header ART.h] [--static ART.a]\n"
            "        [--target native|x86-64-v2|x86-64-v3|x86-64-v4] [-O0..-O3]\n"
            "        [--shape NAME=1x3x224x224 | --shape DIM=N] [--max DIM=N] [--min DIM=N] [--align DIM=A]\n"
            "        [--weights embed|external]\n"
            "        [--layout auto|nchw] [--conv-algo auto|direct] [--name IDENT] [--report] [--passes LIST] [--print-after PASS|all]\n"
            "        [--verify-each] [--stats]\n"
            "        [--quantize dynamic-int8|static-int8] [--calib TABLE.json] [--keep-float LIST] [--per-channel]\n"
            "        [--weight-bits 7|8] [--precision fp32|bf16|mixed] [--pack-tokens]\n"
            "\n"
            "Compiles MODEL ahead of time into a shared library (or a static archive) that\n"
            "an application runs through libkiln_rt, and a C header describing it. Nothing\n"
            "is written unless the whole compile succeeds.\n"
            "\n"
            "  -o ART.so             the shared artifact\n"
            "  --static ART.a        a static archive (descriptor kn_artifact_<name>)\n"
            "  --emit-header ART.h   the C header (inputs, outputs, memory, typed entry point)\n"
            "  --target T            instruction set: native (default) or an x86-64 level\n"
            "  -O0 .. -O3            graph pass pipeline and LLVM optimization level (default -O3)\n"
            "  --shape NAME=AxBxC    pin input NAME to a static shape\n"
            "  --shape DIM=N         pin every symbolic dim named DIM (e.g. batch=1)\n"
            "  --max DIM=N           keep symbolic dim DIM dynamic, up to N (memory is planned for N;\n"
            "                        each run takes it from the input shapes); repeatable\n"
            "  --min DIM=N           the smallest value of dynamic dim DIM (default: 1, or its alignment);\n"
            "                        shapes are checked at the minimum\n"
            "  --align DIM=A         dynamic dim DIM is a multiple of A (strided convs and poolings over\n"
            "                        it need A = the product of their strides, e.g. 32)\n"
            "  --shape NAME=1x3x[32..640%%32]x[32..640%%32]  a dim as a range [MIN..MAX] or\n"
            "                        [MIN..MAX%%ALIGN]: dynamic, named after the model's dim, or\n"
            "                        NAME.D (e.g. x.2) when the model leaves it unnamed (?, -1)\n"
            "  --weights external    weights in ART.so.weights, mmapped at open (models > 2 GiB)\n"
            "  --layout auto|nchw    auto (default): convolutions hand each other activations in\n"
            "                        oneDNN's preferred layout; nchw: every value stays plain\n"
            "  --conv-algo auto|direct  auto (default): the runtime may run 3x3 stride-1\n"
            "                        convolutions by Winograd (about 5e-6 relative error), on\n"
            "                        AVX2 CPUs those with small outputs (7x7, 14x14) as im2col\n"
            "                        + a 1x1 convolution, on AVX-512 ones some 1x1 convolutions,\n"
            "                        alone or with the depthwise one after them, by its own\n"
            "                        kernels, where it measured them faster (docs/compiling.md);\n"
            "                        direct: always oneDNN's direct kernels\n"
            "  --name IDENT          C identifier for the header's functions (default: from -o)\n"
            "  --report              how each node was lowered: generated, oneDNN, runtime kernel;\n"
            "                        then the passes' remarks (patterns that almost matched, and why not);\n"
            "                        for a quantized model, every node that stays float, and why\n"
            "  --passes LIST         run these graph passes (comma-separated) instead of the -O pipeline\n"
            "  --print-after PASS    print the text IR to stderr after PASS (or after every pass: all)\n"
            "  --verify-each         check the graph's invariants after every pass\n"
            "  --stats               per-pass statistics to stderr: runs, nodes in/out, rewrites, time;\n"
            "                        then the time of each code generation phase\n"
            "  --quantize static-int8   QuantizeLinear/DequantizeLinear on the activations of the\n"
            "                        --calib table (u8), s8 weights (Conv per output channel), int32\n"
            "                        biases (docs/quantization.md)\n"
            "  --precision bf16      matrix products, convolutions and attention's Q.K^T compute in\n"
            "                        bf16 with f32 accumulation (PyTorch's autocast); softmax, norms,\n"
            "                        reductions and elementwise ops stay f32. The artifact needs\n"
            "                        AVX512-BF16\n"
            "  --precision mixed     the same, but the last products (a classifier, the final\n"
            "                        projection) stay f32; fp32 (default): everything f32\n"
            "  --pack-tokens         padding-aware encoders: the tokens the attention mask (a graph input\n"
            "                        [batch, sequence]) marks as padding are dropped before the layers\n"
            "                        and cost nothing; outputs at padding are 0 (docs/compiling.md)\n"
            "  --quantize dynamic-int8  MatMul/Gemm with constant weights: s8 per-channel weights,\n"
            "                        activations quantized at run time (DynamicQuantizeLinear)\n"
            "  --calib TABLE.json    the table `kiln calibrate` wrote for this model\n"
            "  --keep-float LIST     comma-separated node names or op types to leave in float\n"
            "                        (added to the table's own list)\n"
            "  --per-channel         MatMul/Gemm weights per output channel (also if the table says so)\n"
            "  --weight-bits 7|8     weight width (default: 8 for a native target on a CPU with VNNI, else 7:\n"
            "                        without VNNI, int8 products are summed in saturating 16-bit pairs)\n");
    print_pass_list(f);
}

/* The largest dim --shape takes, as for --max: a larger one is a typo, and
 * products of a few of them must not overflow the planner's byte counts. */
#define KN_CLI_MAX_DIM INT32_MAX

/* A dim of --shape given as a range, [MIN..MAX] or [MIN..MAX%ALIGN]
 * (MIN may be left out: the alignment, or 1). */
typedef struct dim_range {
    int64_t min, max, align; /* max 0: a plain dim */
} dim_range;

static int parse_range(const char *s, const char **out_end, dim_range *r)
{
    char *end;
    errno = 0;
    r->min = 0, r->align = 1;
    if (*s >= '0' && *s <= '9') {
        r->min = strtoll(s, &end, 10);
        s = end;
    }
    if (strncmp(s, "..", 2) != 0) return -1;
    s += 2;
    if (*s < '0' || *s > '9') return -1;
    r->max = strtoll(s, &end, 10);
    s = end;
    if (*s == '%') {
        if (s[1] < '0' || s[1] > '9') return -1;
        r->align = strtoll(s + 1, &end, 10);
        s = end;
    }
    if (*s != ']' || errno) return -1;
    *out_end = s + 1;
    return 0;
}

/* NxMx... where a dim may be a range (ranges: one per dim, NULL: refused). */
static int parse_dims_ranges(const char *s, int64_t *dims, int *rank, dim_range *ranges)
{
    *rank = 0;
    while (*s) {
        if (*rank == KN_MAX_RANK) return -1;
        char *end;
        if (ranges) ranges[*rank] = (dim_range){0};
        if (*s == '[') {
            const char *e;
            if (!ranges || parse_range(s + 1, &e, &ranges[*rank])) return -1;
            dims[(*rank)++] = -1;
            end = (char *)e;
        } else {
            errno = 0;
            long long v = strtoll(s, &end, 10);
            if (*s < '0' || *s > '9' || end == s || errno || v < 0) return -1;
            dims[(*rank)++] = v;
        }
        if (*end == 'x' || *end == 'X' || *end == ',') end++;
        else if (*end) return -1;
        s = end;
    }
    return *rank > 0 ? 0 : -1;
}


/* The name a ranged dim d of input `in` goes by: the model's, else "in.d"
 * (written into buf). */
static const char *range_name(const kn_value *in, int d, char *buf, size_t len)
{
    if (d < in->shape.rank && in->shape.sym[d]) return in->shape.sym[d];
    snprintf(buf, len, "%s.%d", in->name, d);
    return buf;
}

/* After --shape pins: every input with a static shape must have a byte
 * size that fits in int64 (dims of up to 2^31 each can still multiply past
 * it), said here in --shape's words rather than later as "no static size". */
static int check_input_sizes(const kn_graph *g)
{
    for (int i = 0; i < g->n_inputs; i++) {
        const kn_value *v = g->inputs[i];
        if (v->const_data || v->shape.rank < 0) continue;
        bool sized = true; /* every dim known and none 0 */
        for (int d = 0; d < v->shape.rank; d++) sized &= v->shape.dims[d] > 0;
        uint64_t bytes = kn_dtype_size(v->dtype) ? kn_dtype_size(v->dtype) : 1;
        for (int d = 0; sized && d < v->shape.rank; d++) {
            uint64_t dim = (uint64_t)v->shape.dims[d];
            if (bytes > (uint64_t)INT64_MAX / dim)
                return kn_error(KN_ERR_INVALID, "--shape: input '%s' would hold more than 2^63 bytes", v->name);
            bytes *= dim;
        }
    }
    return KN_OK;
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
        /* a second pin of the same name would find it already pinned and
         * say it does not exist */
        for (int j = 0; j < k; j++)
            if (!strncmp(specs[j], specs[k], (size_t)(eq - specs[k]) + 1))
                return kn_error(KN_ERR_INVALID, "--shape %s is given twice ('%s' and '%s')", name, specs[j], specs[k]);
        int64_t dims[KN_MAX_RANK];
        dim_range ranges[KN_MAX_RANK];
        int rank;
        if (parse_dims_ranges(eq + 1, dims, &rank, ranges))
            return kn_error(KN_ERR_INVALID, "--shape '%s': '%s' is not a shape like 1x3x224x224 or "
                            "1x3x[32..640%%32]x[32..640%%32]", specs[k], eq + 1);
        for (int d = 0; d < rank; d++)
            if (dims[d] > KN_CLI_MAX_DIM)
                return kn_error(KN_ERR_INVALID, "--shape '%s': dim %lld is too large (at most %d)", specs[k],
                                (long long)dims[d], KN_CLI_MAX_DIM);
        kn_value *in = kn_graph_lookup_local(g, name);
        if (in && (in->flags & KN_VALUE_GRAPH_INPUT)) {
            if (in->shape.rank >= 0 && in->shape.rank != rank)
                return kn_error(KN_ERR_INVALID, "--shape %s: the model's input has rank %d, not %d", name,
                                in->shape.rank, rank);
            for (int d = 0; d < in->shape.rank; d++)
                if (in->shape.dims[d] >= 0 && in->shape.dims[d] != dims[d])
                    return kn_error(KN_ERR_INVALID, "--shape %s: dim %d is %lld in the model, not %lld%s", name, d,
                                    (long long)in->shape.dims[d], (long long)dims[d],
                                    ranges[d].max ? " (a range needs a dim the model leaves open)" : "");
            /* a ranged dim stays symbolic under its name (apply_max gives it its value) */
            const char *keep[KN_MAX_RANK] = {0};
            for (int d = 0; d < rank; d++) {
                if (!ranges[d].max) continue;
                char buf[300];
                const char *nm = range_name(in, d, buf, sizeof buf);
                if (!(keep[d] = kn_arena_strdup(&m->arena, nm))) return kn_error(KN_ERR_NOMEM, "out of memory");
            }
            kn_shape_set(&in->shape, rank, dims);
            for (int d = 0; d < rank; d++)
                if (keep[d]) in->shape.sym[d] = keep[d];
            continue;
        }
        if (rank != 1 || ranges[0].max)
            return kn_error(KN_ERR_INVALID, "--shape %s: no input of that name%s", name,
                            ranges[0].max ? " (a named dim's range is given with --min/--max/--align)" : "");
        bool found = false;
        for (int i = 0; i < g->n_inputs; i++) {
            kn_shape *s = &g->inputs[i]->shape;
            for (int d = 0; d < s->rank; d++)
                if (s->sym[d] && !strcmp(s->sym[d], name)) s->dims[d] = dims[0], s->sym[d] = NULL, found = true;
        }
        if (!found) return kn_error(KN_ERR_INVALID, "--shape %s: no input and no symbolic dim has that name", name);
    }
    return n ? check_input_sizes(g) : KN_OK;
}

/* The symbol named name[0..len) in o, added (without bounds) if new. */
static int find_sym(kn_compile_opts *o, const char *name, size_t len, const char *flag, const char *spec,
                    kn_compile_sym **out)
{
    for (int k = 0; k < o->n_syms; k++)
        if (strlen(o->syms[k].name) == len && !strncmp(o->syms[k].name, name, len)) {
            *out = &o->syms[k];
            return KN_OK;
        }
    if (o->n_syms == KN_MAX_SYMS)
        return kn_error(KN_ERR_INVALID, "%s '%s': at most %d dynamic dims", flag, spec, KN_MAX_SYMS);
    char *copy = malloc(len + 1);
    if (!copy) return kn_error(KN_ERR_NOMEM, "out of memory");
    memcpy(copy, name, len);
    copy[len] = '\0';
    *out = &o->syms[o->n_syms++];
    **out = (kn_compile_sym){.name = copy};
    return KN_OK;
}

/* Parses --max/--min/--align DIM=N into opts->syms, in the dim's units
 * (resolve_syms turns them into the symbol's once every flag is read). */
static int parse_bound(const char *flag, const char *spec, kn_compile_opts *o)
{
    const char *eq = strchr(spec, '=');
    char *end = NULL;
    errno = 0;
    long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
    if (!eq || eq == spec || end == eq + 1 || *end || errno || v < 1 || v > INT32_MAX)
        return kn_error(KN_ERR_INVALID, "%s '%s': expected DIM=N with N >= 1", flag, spec);
    kn_compile_sym *y = NULL;
    int st = find_sym(o, spec, (size_t)(eq - spec), flag, spec, &y);
    if (st) return st;
    int64_t *field = !strcmp(flag, "--max") ? &y->max : !strcmp(flag, "--min") ? &y->min : &y->align;
    if (*field) return kn_error(KN_ERR_INVALID, "%s '%s': %s is given twice", flag, spec, y->name);
    *field = v;
    return KN_OK;
}


/* Every range of --shape becomes a symbol (named after the model's dim, or
 * INPUT.D for an unnamed one), then every symbol's bounds are checked and
 * turned into the symbol's units: n = dim / alignment. */
static int resolve_syms(const char *path, int n_shapes, char **shapes, kn_compile_opts *o)
{
    kn_model *m = NULL;
    int st = KN_OK;
    for (int k = 0; k < n_shapes && !st; k++) {
        const char *eq = strchr(shapes[k], '=');
        if (!eq || !strchr(eq, '[')) continue;
        if (!m && (st = kn_cli_load_model(path, true, &m))) break;
        int64_t dims[KN_MAX_RANK];
        dim_range ranges[KN_MAX_RANK];
        int rank;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - shapes[k]), shapes[k]);
        if (parse_dims_ranges(eq + 1, dims, &rank, ranges)) break; /* kn_cli_apply_shapes says why */
        const kn_value *in = kn_graph_lookup_local(m->graph, name);
        if (!in || !(in->flags & KN_VALUE_GRAPH_INPUT)) break;
        for (int d = 0; d < rank && !st; d++) {
            if (!ranges[d].max) continue;
            char buf[300];
            const char *nm = range_name(in, d, buf, sizeof buf);
            kn_compile_sym *y = NULL;
            st = find_sym(o, nm, strlen(nm), "--shape", shapes[k], &y);
            const dim_range *r = &ranges[d];
            if (!st && ((y->max && y->max != r->max) || (y->min && r->min && y->min != r->min) ||
                        (y->align && y->align != r->align)))
                st = kn_error(KN_ERR_INVALID, "--shape '%s': dim %d (%s) has other bounds from another flag", shapes[k],
                              d, nm);
            if (!st) y->max = r->max, y->align = r->align, y->min = r->min ? r->min : y->min;
        }
    }
    kn_model_free(m);
    for (int k = 0; k < o->n_syms && !st; k++) {
        kn_compile_sym *y = &o->syms[k];
        int64_t A = y->align ? y->align : 1, lo = y->min ? y->min : A;
        if (!y->max)
            st = kn_error(KN_ERR_INVALID, "dynamic dim %s: --min/--align without --max %s=N", y->name, y->name);
        else if (y->max % A || lo % A)
            st = kn_error(KN_ERR_INVALID, "dynamic dim %s: the bounds %lld..%lld must be multiples of its alignment %lld",
                          y->name, (long long)lo, (long long)y->max, (long long)A);
        else if (lo > y->max)
            st = kn_error(KN_ERR_INVALID, "dynamic dim %s: minimum %lld is above the maximum %lld", y->name,
                          (long long)lo, (long long)y->max);
        else y->max /= A, y->min = lo / A, y->align = A;
    }
    return st;
}

/* Gives every input dim named like a --max symbol its value for one
 * compile: the maximum, except symbol `probe` set to `value`. */
static int apply_max(kn_model *m, const kn_compile_opts *o, int probe, int64_t value)
{
    kn_graph *g = m->graph;
    for (int k = 0; k < o->n_syms; k++) {
        bool found = false;
        for (int i = 0; i < g->n_inputs; i++) {
            kn_shape *s = &g->inputs[i]->shape;
            for (int d = 0; d < s->rank; d++)
                if (s->sym[d] && !strcmp(s->sym[d], o->syms[k].name)) {
                    s->dims[d] = (k == probe ? value : o->syms[k].max) * kn_compile_sym_align(&o->syms[k]);
                    s->sym[d] = NULL;
                    g->inputs[i]->flags |= KN_VALUE_VARYING_SHAPE;
                    found = true;
                }
        }
        if (!found)
            return kn_error(KN_ERR_INVALID, "--max %s: no input has a symbolic dim of that name (pinned by --shape?)",
                            o->syms[k].name);
    }
    return KN_OK;
}

/* Loads the model with its --shape pins and --max values, inferred. */
static int load_inferred(const char *path, int n_shapes, char **shapes, const kn_compile_opts *o, int probe,
                         int64_t value, kn_model **out)
{
    int st = kn_cli_load_model(path, true, out);
    if (!st) st = kn_cli_apply_shapes(*out, n_shapes, shapes);
    if (!st) st = apply_max(*out, o, probe, value);
    if (!st) {
        st = kn_graph_infer((*out)->graph);
        if (st) kn_error_prefix("%s: type/shape inference: ", path);
    }
    if (st && probe >= 0)
        kn_error_prefix("with %s=%lld: ", o->syms[probe].name,
                        (long long)(value * kn_compile_sym_align(&o->syms[probe])));
    return st;
}

static void free_probes(kn_compile_opts *o)
{
    for (int k = 0; k < o->n_syms; k++)
        for (int p = 0; p < 2; p++) {
            kn_model_free(o->syms[k].probe[p]);
            o->syms[k].probe[p] = NULL;
        }
}

/* Hash of the model bytes and the options that change the artifact. */
static uint64_t model_hash(const char *path, const kn_compile_opts *o, const kn_cli_passes *cp)
{
    const char *passes = cp->passes;
    uint64_t h = KN_FNV_INIT;
    FILE *f = fopen(path, "rb");
    if (f) {
        char buf[65536];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, f)) > 0) h = kn_fnv1a(h, buf, got);
        fclose(f);
    }
    char opts[1024];
    snprintf(opts, sizeof opts, "%s|%d|%d|%d|%d|%d|%d|%s", o->target ? o->target : "native", o->opt_level,
             o->external_weights, o->layout, o->conv_algo, cp->precision, (int)cp->pack_tokens, passes ? passes : "");
    h = kn_fnv1a(h, opts, strlen(opts));
    for (int k = 0; k < o->n_syms; k++) {
        snprintf(opts, sizeof opts, "|max %s=%lld min %lld align %lld", o->syms[k].name, (long long)o->syms[k].max,
                 (long long)kn_compile_sym_min(&o->syms[k]), (long long)kn_compile_sym_align(&o->syms[k]));
        h = kn_fnv1a(h, opts, strlen(opts));
    }
    if (cp->quantize) {
        /* the table's bytes, not its path: recalibrating changes the artifact */
        uint64_t th = 0;
        if (cp->calib) kn_calib_hash_file(cp->calib, &th);
        snprintf(opts, sizeof opts, "|quantize %s|calib %016llx|per-channel %d|weight-bits %d|keep-float ",
                 cp->quantize, (unsigned long long)th, (int)cp->per_channel, cp->weight_bits);
        h = kn_fnv1a(h, opts, strlen(opts));
        if (cp->keep_float) h = kn_fnv1a(h, cp->keep_float, strlen(cp->keep_float));
    }
    return h;
}

/* The graph passes between import and code generation. */
static int run_passes(const char *path, kn_model *m, const kn_compile_opts *opts, const kn_cli_passes *cp,
                      kn_pass_log *log)
{
    kn_pipeline_opts po = {.opt_level = opts->opt_level, .passes = cp->passes, .print_after = cp->print_after,
                           .verify_each = cp->verify_each, .precision = (kn_precision)cp->precision,
                           .pack_tokens = cp->pack_tokens};
    int st = kn_graph_toposort(m->graph);
    if (!st) st = kn_pass_run_pipeline(m, &po, log);
    if (st) kn_error_prefix("%s: ", path);
    if (cp->stats) kn_pass_log_print_stats(log, stderr);
    return st;
}

/* What --quantize needs, read once: the table (checked against the model)
 * and the keep-float list. */
typedef struct cli_quant {
    kn_calib_table table;
    char **keep;
    int n_keep;
    kn_quant_opts o;
    bool is_static;
} cli_quant;

static void cli_quant_free(cli_quant *q)
{
    kn_calib_table_free(&q->table);
    for (int i = 0; i < q->n_keep; i++) free(q->keep[i]);
    free(q->keep);
    memset(q, 0, sizeof *q);
}

static int add_keep(cli_quant *q, const char *item, size_t len)
{
    char **k = realloc(q->keep, sizeof *k * ((size_t)q->n_keep + 1));
    if (!k) return kn_error(KN_ERR_NOMEM, "out of memory");
    q->keep = k;
    if (!(k[q->n_keep] = strndup(item, len))) return kn_error(KN_ERR_NOMEM, "out of memory");
    q->n_keep++;
    return KN_OK;
}

static int cli_quant_init(const char *path, const kn_cli_passes *cp, cli_quant *q)
{
    memset(q, 0, sizeof *q);
    q->is_static = !strcmp(cp->quantize, "static-int8");
    int st = KN_OK;
    if (q->is_static) {
        uint64_t h = 0;
        st = kn_calib_table_read(cp->calib, &q->table);
        if (!st) st = kn_calib_hash_file(path, &h);
        if (!st && h != q->table.model_hash)
            st = kn_error(KN_ERR_INVALID,
                          "--calib %s: the table was made for another model (model_hash %016llx; %s is %016llx): "
                          "run kiln calibrate on this model",
                          cp->calib, (unsigned long long)q->table.model_hash, path, (unsigned long long)h);
        for (int i = 0; !st && i < q->table.n_keep; i++)
            st = add_keep(q, q->table.keep_float[i], strlen(q->table.keep_float[i]));
        q->o.table = &q->table;
        q->o.per_channel = q->table.per_channel;
    }
    for (const char *p = cp->keep_float; !st && p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len) st = add_keep(q, p, len);
        p += len + (e ? 1 : 0);
    }
    q->o.per_channel |= cp->per_channel;
    q->o.weight_max = cp->weight_bits == 7 ? 63 : 127;
    q->o.n_keep = q->n_keep;
    q->o.keep = (const char *const *)q->keep;
    return st;
}

/* Rewrites m into QDQ form (the same passes first as calibration saw). */
static int apply_quant(const char *path, const kn_cli_passes *cp, const cli_quant *q, kn_model *m)
{
    int st = kn_quant_prepare(m);
    if (!st) st = q->is_static ? kn_quantize_static(m, &q->o) : kn_quantize_dynamic(m, &q->o);
    if (st) {
        if (q->is_static) kn_error_prefix("--calib %s: ", cp->calib);
        kn_error_prefix("%s: --quantize %s: ", path, cp->quantize);
    }
    return st;
}

int kn_cli_weight_bits(const kn_cli_passes *cp, const char *target)
{
    if (cp->weight_bits) return cp->weight_bits;
    bool native = !target || !strcmp(target, "native");
    return native && (kn_cpu_features() & KN_CPU_AVX512VNNI) ? 8 : 7;
}

int kn_cli_quantize(const char *path, const kn_cli_passes *cp, kn_model *m)
{
    cli_quant q;
    int st = cli_quant_init(path, cp, &q);
    if (!st) st = apply_quant(path, cp, &q, m);
    cli_quant_free(&q);
    return st;
}

/* --report on a quantized model (one with kiln::QConv/QMatMul nodes): every
 * node that still computes in float, and why (the integer lowering's remark
 * naming it, or no integer kernel for its op). */
static void report_float(const kn_graph *g, const kn_pass_log *log)
{
    int n_int = 0, n_float = 0;
    for (int i = 0; i < g->n_nodes; i++) n_int += g->nodes[i]->op == KN_OP_QConv || g->nodes[i]->op == KN_OP_QMatMul;
    if (!n_int) return;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) printf("%d nodes stay float in this quantized model (%d integer kernels)%s\n", n_float, n_int,
                              n_float ? ":" : "");
        for (int i = 0; i < g->n_nodes; i++) {
            const kn_node *n = g->nodes[i];
            const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
            kn_op op = n->op;
            if (!y || y->dtype != KN_F32 || op == KN_OP_QConv || op == KN_OP_QMatMul ||
                op == KN_OP_DequantizeLinear || op == KN_OP_QuantizeLinear || op == KN_OP_DynamicQuantizeLinear)
                continue;
            if (pass == 0) {
                n_float++;
                continue;
            }
            char key[300];
            snprintf(key, sizeof key, "'%s'", n->name);
            const char *why = NULL;
            for (int r = 0; r < log->n_remarks && !why; r++)
                if (!strcmp(log->remarks[r].pass, "lower-qdq") && strstr(log->remarks[r].text, key))
                    why = log->remarks[r].text;
            if (why) printf("  %-32s %-20s %s\n", n->name, n->op_type, why);
            else printf("  %-32s %-20s no integer kernel for %s: it computes in float\n", n->name, n->op_type, n->op_type);
        }
    }
}

int kn_cli_compile_model_ex(const char *path, int n_shapes, char **shapes, kn_compile_opts *opts,
                            const kn_cli_passes *passes)
{
    const kn_cli_passes none = {0};
    const kn_cli_passes *cp = passes ? passes : &none;
    kn_model *m = NULL;
    kn_pass_log log = {0};
    cli_quant q = {0};
    int st = cp->quantize ? cli_quant_init(path, cp, &q) : KN_OK;
    if (!st) st = load_inferred(path, n_shapes, shapes, opts, -1, 0, &m);
    if (!st && cp->quantize) st = apply_quant(path, cp, &q, m);
    /* a dynamic dim's probes: the same model with it at 1 and at 2 (dyn.h),
     * through the same passes so that their graphs stay node for node alike */
    for (int k = 0; k < opts->n_syms && !st; k++)
        for (int p = 0; p < 2 && !st; p++) {
            st = load_inferred(path, n_shapes, shapes, opts, k, kn_compile_sym_min(&opts->syms[k]) + p,
                               &opts->syms[k].probe[p]);
            if (!st && cp->quantize) st = apply_quant(path, cp, &q, opts->syms[k].probe[p]);
        }
    if (!st) st = run_passes(path, m, opts, cp, &log);
    for (int k = 0; k < opts->n_syms && !st; k++)
        for (int p = 0; p < 2 && !st; p++) {
            kn_pass_log probe_log = {0};
            kn_cli_passes quiet = *cp;
            quiet.print_after = NULL;
            quiet.stats = false;
            st = run_passes(path, opts->syms[k].probe[p], opts, &quiet, &probe_log);
            kn_pass_log_free(&probe_log);
        }
    if (!st) {
        opts->model_hash = model_hash(path, opts, cp);
        st = kn_compile_cpu(m, opts);
    }
    free_probes(opts);
    if (!st && opts->report) {
        printf("%d remarks from the graph passes%s\n", log.n_remarks, log.n_remarks ? ":" : "");
        kn_pass_log_print_remarks(&log, stdout);
        report_float(m->graph, &log);
    }
    kn_pass_log_free(&log);
    kn_model_free(m);
    cli_quant_free(&q);
    return st;
}

static void free_max(kn_compile_opts *o, char **shapes)
{
    for (int k = 0; k < o->n_syms; k++) free((char *)o->syms[k].name);
    o->n_syms = 0;
    free(shapes);
}

int kn_cli_compile_model(const char *path, int n_shapes, char **shapes, kn_compile_opts *opts)
{
    return kn_cli_compile_model_ex(path, n_shapes, shapes, opts, NULL);
}

/* `kiln compile m.onnx -o m.onnx` would replace the model with the
 * artifact, and `-o a.so --emit-header a.so` the artifact with the header:
 * refused before any work, naming both arguments. */
static int check_paths(const char *model, const kn_compile_opts *o, const char *calib)
{
    char weights[4200];
    const char *art = o->output ? o->output : o->static_output;
    snprintf(weights, sizeof weights, "%s.weights", art);
    const kn_cli_file files[] = {
        {"MODEL", model, false},
        {"--calib", calib, false},
        {"-o", o->output, true},
        {"--static", o->static_output, true},
        {"--emit-header", o->header, true},
        {"--weights external (the side file)", o->external_weights ? weights : NULL, true},
    };
    return kn_cli_check_distinct(files, (int)(sizeof files / sizeof files[0]));
}

int kn_cmd_compile(int argc, char **argv)
{
    kn_compile_opts o = {.opt_level = 3, .target = "native"};
    kn_cli_passes cp = {0};
    const char *model = NULL;
    char **shapes = calloc((size_t)argc + 1, sizeof *shapes);
    int n_shapes = 0;
    if (!shapes) return 1;
    static const char *const k_value_flags[] = {"-o", "--static", "--emit-header", "--target", "--name", "--shape",
                                                "--passes", "--print-after", "--layout", "--conv-algo", "--weights",
                                                "--max", "--min", "--align", "--quantize", "--calib",
                                                "--keep-float", "--precision"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < argc;
        for (size_t f = 0; f < sizeof k_value_flags / sizeof k_value_flags[0]; f++)
            if (!strcmp(a, k_value_flags[f]) && !kn_cli_needs_value("compile", i, argc, argv)) {
                free_max(&o, shapes);
                return 2;
            }
        if (kn_cli_is_help(a)) {
            compile_usage(stdout);
            free_max(&o, shapes);
            return 0;
        } else if (!strcmp(a, "-o") && has_next) o.output = argv[++i];
        else if (!strcmp(a, "--static") && has_next) o.static_output = argv[++i];
        else if (!strcmp(a, "--emit-header") && has_next) o.header = argv[++i];
        else if (!strcmp(a, "--target") && has_next) o.target = argv[++i];
        else if (!strcmp(a, "--name") && has_next) o.name = argv[++i];
        else if (!strcmp(a, "--shape") && has_next) shapes[n_shapes++] = argv[++i];
        else if (!strcmp(a, "--report")) o.report = true;
        else if (!strcmp(a, "--passes") && has_next) cp.passes = argv[++i];
        else if (!strcmp(a, "--print-after") && has_next) cp.print_after = argv[++i];
        else if (!strcmp(a, "--verify-each")) cp.verify_each = true;
        else if (!strcmp(a, "--stats")) cp.stats = o.stats = true;
        else if (!strcmp(a, "--quantize") && has_next) {
            cp.quantize = argv[++i];
            if (strcmp(cp.quantize, "static-int8") && strcmp(cp.quantize, "dynamic-int8")) {
                fprintf(stderr, "kiln compile: --quantize takes static-int8 or dynamic-int8, not '%s'\n", cp.quantize);
                free_max(&o, shapes);
                return 2;
            }
        } else if (!strcmp(a, "--precision") && has_next) {
            const char *pr = argv[++i];
            cp.precision = !strcmp(pr, "fp32")    ? KN_PRECISION_FP32
                           : !strcmp(pr, "bf16")  ? KN_PRECISION_BF16
                           : !strcmp(pr, "mixed") ? KN_PRECISION_MIXED
                                                  : -1;
            if (cp.precision < 0) {
                fprintf(stderr, "kiln compile: --precision takes fp32, bf16 or mixed, not '%s'\n", pr);
                free_max(&o, shapes);
                return 2;
            }
        } else if (!strcmp(a, "--calib") && has_next) cp.calib = argv[++i];
        else if (!strcmp(a, "--keep-float") && has_next) cp.keep_float = argv[++i];
        else if (!strcmp(a, "--per-channel")) cp.per_channel = true;
        else if (!strcmp(a, "--pack-tokens")) cp.pack_tokens = true;
        else if (!strcmp(a, "--weight-bits") && has_next) {
            const char *b = argv[++i];
            cp.weight_bits = !strcmp(b, "7") ? 7 : !strcmp(b, "8") ? 8 : -1;
            if (cp.weight_bits < 0) {
                fprintf(stderr, "kiln compile: --weight-bits takes 7 or 8, not '%s'\n", b);
                free_max(&o, shapes);
                return 2;
            }
        } else if (!strcmp(a, "--layout") && has_next) {
            const char *l = argv[++i];
            if (!strcmp(l, "nchw")) o.layout = KN_CG_LAYOUT_NCHW;
            else if (strcmp(l, "auto") != 0) {
                /* nhwc would need generated loops over channels-last values too */
                fprintf(stderr, "kiln compile: --layout takes auto or nchw, not '%s' (nhwc is not supported yet; "
                                "auto uses channels-last between convolutions where oneDNN prefers it)\n", l);
                free_max(&o, shapes);
                return 2;
            }
        }
        else if (!strcmp(a, "--conv-algo") && has_next) {
            const char *l = argv[++i];
            if (!strcmp(l, "direct")) o.conv_algo = KN_CONV_ALGO_DIRECT;
            else if (strcmp(l, "auto") != 0) {
                fprintf(stderr, "kiln compile: --conv-algo takes auto or direct, not '%s'\n", l);
                free_max(&o, shapes);
                return 2;
            }
        }
        else if (!strcmp(a, "--weights") && has_next) {
            const char *w = argv[++i];
            if (!strcmp(w, "external")) o.external_weights = true;
            else if (strcmp(w, "embed") != 0) {
                fprintf(stderr, "kiln compile: --weights takes embed or external, not '%s'\n", w);
                free_max(&o, shapes);
                return 2;
            }
        } else if ((!strcmp(a, "--max") || !strcmp(a, "--min") || !strcmp(a, "--align")) && has_next) {
            if (parse_bound(a, argv[++i], &o)) {
                kn_cli_report(NULL);
                free_max(&o, shapes);
                return 2;
            }
        } else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) o.opt_level = a[2] - '0';
        else if (a[0] == '-' || model) {
            fprintf(stderr, "kiln compile: unexpected argument '%s'\n", a);
            compile_usage(stderr);
            free_max(&o, shapes);
            return 2;
        } else model = a;
    }
    if (!model || (!o.output && !o.static_output)) {
        if (model) fprintf(stderr, "kiln compile: give -o ART.so or --static ART.a\n\n");
        compile_usage(stderr);
        free_max(&o, shapes);
        return 2;
    }
    const char *qerr = NULL;
    if (cp.quantize && !strcmp(cp.quantize, "static-int8") && !cp.calib)
        qerr = "--quantize static-int8 needs --calib TABLE.json (made by kiln calibrate)";
    else if (cp.calib && (!cp.quantize || strcmp(cp.quantize, "static-int8")))
        qerr = "--calib is for --quantize static-int8";
    else if ((cp.keep_float || cp.per_channel || cp.weight_bits) && !cp.quantize)
        qerr = "--keep-float, --per-channel and --weight-bits need --quantize";
    else if (cp.quantize && cp.precision != KN_PRECISION_FP32)
        qerr = "--precision bf16|mixed and --quantize cannot be combined yet: the quantized products are int8, "
               "the others would stay f32";
    if (qerr) {
        fprintf(stderr, "kiln compile: %s\n", qerr);
        free_max(&o, shapes);
        return 2;
    }
    if (cp.quantize) cp.weight_bits = kn_cli_weight_bits(&cp, o.target);
    if (check_paths(model, &o, cp.calib) || resolve_syms(model, n_shapes, shapes, &o)) {
        kn_cli_report(NULL);
        free_max(&o, shapes);
        return 2;
    }
    int st = kn_cli_compile_model_ex(model, n_shapes, shapes, &o, &cp);
    free_max(&o, shapes);
    if (st) {
        kn_cli_report(NULL);
        return 1;
    }
    return 0;
}
