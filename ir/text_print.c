/* The IR text printer (grammar in docs/ir.md; API in text.h). Output is a
 * pure function of the model so that golden files and diffs are stable. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

typedef struct printer {
    FILE *f;
    int64_t max_inline;
} printer;

static int print_graph(printer *p, const kn_graph *g, int ind);

kn_ir_print_opts kn_ir_print_defaults(void)
{
    kn_ir_print_opts o;
    memset(&o, 0, sizeof o);
    o.max_inline_elems = KN_IR_INLINE_DEFAULT;
    return o;
}

/* ---- lexical helpers ---------------------------------------------------- */

static bool is_alpha_(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_value_char(int c)
{
    return is_alpha_(c) || is_digit(c) || c == '.' || c == '-' || c == '/';
}

/* Value names print bare after '%' when the parser would read them back
 * whole: a ':' is part of a bare name only when a name character follows,
 * so that "%y: f32" still splits at the type colon. */
static bool bare_value_name(const char *s)
{
    if (!*s) return false;
    for (const char *c = s; *c; c++) {
        if (is_value_char((unsigned char)*c)) continue;
        if (*c == ':' && (is_value_char((unsigned char)c[1]) || c[1] == ':')) continue;
        return false;
    }
    return s[strlen(s) - 1] != ':';
}

static const char *const k_keywords[] = {"_", "const", "init", "graph", "tensor", "return",
                                         "true", "false", "undefined", "nan", "inf",
                                         "ints", "floats", "strings", "tensors", "graphs",
                                         "opset", "producer", "ir_version", NULL};

static bool is_keyword(const char *s)
{
    for (int i = 0; k_keywords[i]; i++)
        if (!strcmp(s, k_keywords[i])) return true;
    return false;
}

/* Identifier = [A-Za-z_][A-Za-z0-9_]* (dots allowed where `dots`). */
static bool bare_ident(const char *s, bool dots)
{
    if (!is_alpha_((unsigned char)*s)) return false;
    for (const char *c = s + 1; *c; c++)
        if (!is_alpha_((unsigned char)*c) && !is_digit((unsigned char)*c) && !(dots && *c == '.'))
            return false;
    return !is_keyword(s);
}

static void put_quoted(printer *p, const char *s, size_t n)
{
    fputc('"', p->f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", p->f); break;
        case '\\': fputs("\\\\", p->f); break;
        case '\n': fputs("\\n", p->f); break;
        case '\t': fputs("\\t", p->f); break;
        case '\r': fputs("\\r", p->f); break;
        default:
            /* bytes >= 0x80 stay raw so UTF-8 names remain readable */
            if (c < 0x20 || c == 0x7f) fprintf(p->f, "\\x%02x", c);
            else fputc(c, p->f);
        }
    }
    fputc('"', p->f);
}

static void put_str(printer *p, const char *s) { put_quoted(p, s ? s : "", s ? strlen(s) : 0); }

static void put_value_name(printer *p, const kn_value *v)
{
    fputc('%', p->f);
    if (bare_value_name(v->name)) fputs(v->name, p->f);
    else put_str(p, v->name);
}

static void put_ident(printer *p, const char *s, bool dots)
{
    if (s && bare_ident(s, dots)) fputs(s, p->f);
    else put_str(p, s);
}

/* Shortest text that reads back to the same float: %.9g (%.17g for
 * doubles), with ".0" added so a float never looks like an integer. */
static void put_float(printer *p, double v, bool dbl)
{
    if (isnan(v)) {
        fputs("nan", p->f);
        return;
    }
    if (isinf(v)) {
        fputs(v < 0 ? "-inf" : "inf", p->f);
        return;
    }
    char buf[64];
    snprintf(buf, sizeof buf, dbl ? "%.17g" : "%.9g", v);
    fputs(buf, p->f);
    if (!strpbrk(buf, ".e")) fputs(".0", p->f);
}

/* ---- types and tensors -------------------------------------------------- */

static void put_dtype(printer *p, kn_dtype dt)
{
    const char *n = kn_dtype_info(dt)->name;
    if (dt == KN_DT_UNDEFINED || !n) fputs("?", p->f);
    else fputs(n, p->f);
}

static void put_shape(printer *p, const kn_shape *s)
{
    if (s->rank < 0) return;
    fputc('[', p->f);
    for (int i = 0; i < s->rank && i < KN_MAX_RANK; i++) {
        if (i) fputc(',', p->f);
        if (s->dims[i] >= 0) fprintf(p->f, "%" PRId64, s->dims[i]);
        else if (s->sym[i] && *s->sym[i]) put_ident(p, s->sym[i], false);
        else fputc('?', p->f);
    }
    fputc(']', p->f);
}

static bool has_type(const kn_value *v) { return v->dtype != KN_DT_UNDEFINED || v->shape.rank >= 0; }

/* ": TYPE" after a value name, when anything is known. */
static void put_value_type(printer *p, const kn_value *v)
{
    if (!has_type(v)) return;
    fputs(": ", p->f);
    put_dtype(p, v->dtype);
    put_shape(p, &v->shape);
}

static uint64_t fnv1a(const void *data, size_t n)
{
    uint64_t h = 14695981039346656037ull;
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void put_element(printer *p, const kn_tensor *t, size_t i)
{
    const kn_dtype_traits *tr = kn_dtype_info(t->dtype);
    if (t->dtype == KN_BOOL) fputs(kn_load_i64(t->dtype, t->data, i) ? "true" : "false", p->f);
    else if (tr->is_float) put_float(p, kn_load_f64(t->dtype, t->data, i), t->dtype == KN_F64);
    else if (!tr->is_signed) fprintf(p->f, "%" PRIu64, kn_load_u64(t->dtype, t->data, i));
    else fprintf(p->f, "%" PRId64, kn_load_i64(t->dtype, t->data, i));
}

/* "f32[2,2] [1.0, 2.0, 3.0, 4.0]" or "f32[1000] {... fnv1a=...}". */
static void put_tensor(printer *p, const kn_tensor *t)
{
    kn_shape s;
    kn_shape_set(&s, t->rank, t->dims);
    put_dtype(p, t->dtype);
    put_shape(p, &s);
    int64_t n = kn_tensor_numel(t);
    bool printable = kn_dtype_valid(t->dtype) && n >= 0 &&
                     (n == 0 || (t->data && t->nbytes >= kn_dtype_nbytes(t->dtype, (size_t)n)));
    if (!printable || (p->max_inline >= 0 && n > p->max_inline)) {
        fprintf(p->f, " {... fnv1a=%016" PRIx64 "}", t->data ? fnv1a(t->data, t->nbytes) : 0);
        return;
    }
    fputs(" [", p->f);
    for (int64_t i = 0; i < n; i++) {
        if (i) fputs(", ", p->f);
        put_element(p, t, (size_t)i);
    }
    fputc(']', p->f);
}

/* " quant(scale=T, zero_point=T, axis=A, block_size=B)" for a value that
 * carries quantization parameters. */
static void put_quant(printer *p, const kn_value *v)
{
    const kn_qparams *q = v->q;
    if (!q) return;
    fputs(" quant(", p->f);
    if (q->scale) {
        fputs("scale=", p->f);
        put_tensor(p, q->scale);
        fputs(", ", p->f);
    }
    if (q->zero_point) {
        fputs("zero_point=", p->f);
        put_tensor(p, q->zero_point);
        fputs(", ", p->f);
    }
    fprintf(p->f, "axis=%d, block_size=%d)", q->axis, q->block_size);
}

/* ---- attributes --------------------------------------------------------- */

static const char *empty_list_name(kn_attr_kind k)
{
    switch (k) {
    case KN_ATTR_FLOATS: return "floats[]";
    case KN_ATTR_INTS: return "ints[]";
    case KN_ATTR_STRINGS: return "strings[]";
    case KN_ATTR_TENSORS: return "tensors[]";
    default: return "graphs[]";
    }
}

static int put_attr_value(printer *p, const kn_attr *a, int ind)
{
    switch (a->kind) {
    case KN_ATTR_FLOAT: put_float(p, a->f, false); return KN_OK;
    case KN_ATTR_INT: fprintf(p->f, "%" PRId64, a->i); return KN_OK;
    case KN_ATTR_STRING: put_quoted(p, a->s ? a->s : "", a->s ? a->s_len : 0); return KN_OK;
    case KN_ATTR_TENSOR:
        if (!a->t) return kn_error(KN_ERR_INVALID, "attribute '%s' has no tensor", a->name);
        fputs("tensor ", p->f);
        put_tensor(p, a->t);
        return KN_OK;
    case KN_ATTR_GRAPH:
        if (!a->g) return kn_error(KN_ERR_INVALID, "attribute '%s' has no graph", a->name);
        return print_graph(p, a->g, ind);
    case KN_ATTR_FLOATS: case KN_ATTR_INTS: case KN_ATTR_STRINGS:
    case KN_ATTR_TENSORS: case KN_ATTR_GRAPHS: break;
    default: fputs("undefined", p->f); return KN_OK;
    }
    if (a->n <= 0) {
        fputs(empty_list_name(a->kind), p->f);
        return KN_OK;
    }
    fputc('[', p->f);
    for (int i = 0; i < a->n; i++) {
        /* int lists read like shapes ([3,3]); other lists get a space */
        if (i) fputs(a->kind == KN_ATTR_INTS ? "," : ", ", p->f);
        if (a->kind == KN_ATTR_FLOATS) put_float(p, a->floats[i], false);
        else if (a->kind == KN_ATTR_INTS) fprintf(p->f, "%" PRId64, a->ints[i]);
        else if (a->kind == KN_ATTR_STRINGS) put_str(p, a->strings[i]);
        else if (a->kind == KN_ATTR_TENSORS) {
            if (!a->tensors[i]) return kn_error(KN_ERR_INVALID, "attribute '%s' has a NULL tensor", a->name);
            fputs("tensor ", p->f);
            put_tensor(p, a->tensors[i]);
        } else {
            if (!a->graphs[i]) return kn_error(KN_ERR_INVALID, "attribute '%s' has a NULL graph", a->name);
            int st = print_graph(p, a->graphs[i], ind);
            if (st) return st;
        }
    }
    fputc(']', p->f);
    return KN_OK;
}

static int put_attrs(printer *p, const kn_node *n, int ind)
{
    if (!n->n_attrs) return KN_OK;
    fputs(" {", p->f);
    for (int i = 0; i < n->n_attrs; i++) {
        if (i) fputs(", ", p->f);
        put_ident(p, n->attrs[i].name, false);
        fputc('=', p->f);
        int st = put_attr_value(p, &n->attrs[i], ind);
        if (st) return kn_node_error(n, st, "%s", kn_last_error());
    }
    fputc('}', p->f);
    return KN_OK;
}

/* ---- nodes and graphs --------------------------------------------------- */

static int print_node(printer *p, const kn_node *n, int ind)
{
    fprintf(p->f, "%*s", ind, "");
    for (int i = 0; i < n->n_outputs; i++) {
        if (i) fputs(", ", p->f);
        if (!n->outputs[i]) {
            fputc('_', p->f);
            continue;
        }
        put_value_name(p, n->outputs[i]);
        put_value_type(p, n->outputs[i]);
        put_quant(p, n->outputs[i]);
    }
    if (n->n_outputs) fputs(" = ", p->f);
    if (n->domain && *n->domain) {
        put_ident(p, n->domain, true);
        fputs("::", p->f);
    }
    put_ident(p, n->op_type, false);
    fputc('(', p->f);
    for (int i = 0; i < n->n_inputs; i++) {
        if (i) fputs(", ", p->f);
        if (n->inputs[i]) put_value_name(p, n->inputs[i]);
        else fputc('_', p->f);
    }
    fputc(')', p->f);
    int st = put_attrs(p, n, ind);
    if (st) return st;
    fputs(" #", p->f);
    put_str(p, n->name);
    if (n->compute == KN_BF16) fputs(" @bf16", p->f); /* passes/autocast.c */
    fputc('\n', p->f);
    return KN_OK;
}

static void print_constants(printer *p, const kn_graph *g, int ind)
{
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (!v->const_data || v->producer) continue;
        fprintf(p->f, "%*s", ind, "");
        put_value_name(p, v);
        fputs((v->flags & KN_VALUE_INITIALIZER) ? " = init " : " = const ", p->f);
        put_tensor(p, v->const_data);
        put_quant(p, v);
        fputc('\n', p->f);
    }
}

/* "graph NAME(%in: T, ...) {\n ... return ...\n<ind>}" — the caller has
 * written whatever precedes "graph" on the line. */
static int print_graph(printer *p, const kn_graph *g, int ind)
{
    fputs("graph ", p->f);
    put_ident(p, g->name, false);
    fputc('(', p->f);
    for (int i = 0; i < g->n_inputs; i++) {
        if (i) fputs(", ", p->f);
        put_value_name(p, g->inputs[i]);
        put_value_type(p, g->inputs[i]);
        put_quant(p, g->inputs[i]);
    }
    fputs(") {\n", p->f);
    print_constants(p, g, ind + 2);
    for (int i = 0; i < g->n_nodes; i++) {
        int st = print_node(p, g->nodes[i], ind + 2);
        if (st) return st;
    }
    fprintf(p->f, "%*sreturn", ind + 2, "");
    for (int i = 0; i < g->n_outputs; i++) {
        fputs(i ? ", " : " ", p->f);
        put_value_name(p, g->outputs[i]);
    }
    fprintf(p->f, "\n%*s}", ind, "");
    return KN_OK;
}

static int print_model(printer *p, const kn_model *m)
{
    fputs("kiln-ir v1\n", p->f);
    if (m->ir_version) fprintf(p->f, "ir_version %" PRId64 "\n", m->ir_version);
    if (m->producer_name || m->producer_version) {
        fputs("producer ", p->f);
        put_str(p, m->producer_name);
        fputc(' ', p->f);
        put_str(p, m->producer_version);
        fputc('\n', p->f);
    }
    for (int i = 0; i < m->n_opsets; i++) {
        fputs("opset ", p->f);
        put_str(p, m->opsets[i].domain);
        fprintf(p->f, " %" PRId64 "\n", m->opsets[i].version);
    }
    int st = print_graph(p, m->graph, 0);
    fputc('\n', p->f);
    return st;
}

/* ---- entry points ------------------------------------------------------- */

int kn_ir_print_ex(const kn_model *m, const kn_ir_print_opts *opts, FILE *f)
{
    kn_ir_print_opts d = kn_ir_print_defaults();
    printer p = {f, (opts ? opts : &d)->max_inline_elems};
    if (!m || !m->graph) return kn_error(KN_ERR_INVALID, "kn_ir_print: no model");
    int st = print_model(&p, m);
    if (st) return st;
    if (fflush(f) || ferror(f)) return kn_error(KN_ERR_IO, "writing IR text failed");
    return KN_OK;
}

int kn_ir_print(const kn_model *m, FILE *f) { return kn_ir_print_ex(m, NULL, f); }

int kn_ir_print_graph(const kn_graph *g, const kn_ir_print_opts *opts, int indent, FILE *f)
{
    kn_ir_print_opts d = kn_ir_print_defaults();
    printer p = {f, (opts ? opts : &d)->max_inline_elems};
    fprintf(f, "%*s", indent, "");
    int st = print_graph(&p, g, indent);
    fputc('\n', f);
    if (!st && ferror(f)) st = kn_error(KN_ERR_IO, "writing IR text failed");
    return st;
}

int kn_ir_print_string(const kn_model *m, const kn_ir_print_opts *opts, char **out_text)
{
    *out_text = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_ir_print_ex(m, opts, f);
    if (fclose(f) && !st) st = kn_error(KN_ERR_NOMEM, "out of memory");
    if (st) {
        free(buf);
        return st;
    }
    *out_text = buf;
    return KN_OK;
}
