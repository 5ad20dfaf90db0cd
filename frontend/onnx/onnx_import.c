/*
 * frontend/onnx/onnx_import.c — ONNX ModelProto → kiln IR.
 *
 * A graph is imported in passes so that nodes may appear in any order (ONNX
 * requires topological order; we are lenient and sort afterwards):
 *   1. initializers, then inputs (an input that is also an initializer stays
 *      a constant but is listed as an overridable runtime input);
 *   2. every node with its outputs (so every name of this graph exists);
 *   3. every node's attributes (subgraphs recursively — they may refer to
 *      any value of this graph) and inputs;
 *   4. value_info types, graph outputs, then kn_graph_toposort().
 * The protobuf-c message is freed before returning; tensors are copied.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"
#include "onnx_internal.h"

/* Subgraphs nested deeper than this are refused (real models use 2-3). */
#define MAX_GRAPH_DEPTH 32

typedef struct importer {
    kn_model *m;
    const char *base_dir; /* external data folder; NULL if none */
} importer;

static const char *str_or_empty(const char *s) { return s ? s : ""; }

static int import_graph(importer *im, const Onnx__GraphProto *gp, kn_graph *g, int depth);

/* ---- types -------------------------------------------------------------- */

/* Reads a ValueInfo's tensor type into (dt, shape). `strict` (graph inputs
 * and outputs) turns what kiln cannot represent into an error; value_info
 * hints are simply dropped then. */
static int read_type(importer *im, const Onnx__ValueInfoProto *vi, const char *what, bool strict,
                     kn_dtype *out_dt, kn_shape *out_shape)
{
    *out_dt = KN_DT_UNDEFINED;
    *out_shape = kn_shape_unknown();
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return KN_OK;
    if (tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
        if (!strict) return KN_OK;
        const char *kind = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ? "sequence"
                           : tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE    ? "map"
                           : tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ? "optional"
                           : tp->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE ? "sparse tensor"
                                                                                   : "non-tensor";
        return kn_error(KN_ERR_UNSUPPORTED, "%s has %s type; kiln supports only tensors", what, kind);
    }
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    int dt = tt && tt->has_elem_type ? tt->elem_type : 0;
    if (dt != KN_DT_UNDEFINED && !kn_dtype_valid(dt)) {
        if (!strict) return KN_OK;
        const char *name = kn_onnx_type_name(dt);
        if (name) return kn_error(KN_ERR_UNSUPPORTED, "%s has dtype %s, which kiln does not support", what, name);
        return kn_error(KN_ERR_UNSUPPORTED, "%s has unknown dtype %d", what, dt);
    }
    if (!tt || !tt->shape) {
        *out_dt = (kn_dtype)dt;
        return KN_OK;
    }
    const Onnx__TensorShapeProto *sp = tt->shape;
    if (sp->n_dim > KN_MAX_RANK) {
        if (!strict) return KN_OK;
        return kn_error(KN_ERR_UNSUPPORTED, "%s has rank %zu, over kiln's maximum of %d", what, sp->n_dim, KN_MAX_RANK);
    }
    kn_shape s = kn_shape_unknown();
    s.rank = (int)sp->n_dim;
    for (int i = 0; i < s.rank; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sp->dim[i];
        s.dims[i] = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            /* -1 is a common exporter spelling of "unknown"; others are bad */
            if (d->dim_value < -1 || d->dim_value > ((int64_t)1 << 40)) {
                if (!strict) return KN_OK;
                return kn_error(KN_ERR_INVALID, "%s has an absurd dim %d (%lld)", what, i, (long long)d->dim_value);
            }
            s.dims[i] = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
                   *d->dim_param) {
            s.sym[i] = kn_arena_strdup(&im->m->arena, d->dim_param);
            if (!s.sym[i]) return kn_error(KN_ERR_NOMEM, "out of memory");
        }
    }
    if (kn_shape_is_static(&s) && kn_shape_numel(s.rank, s.dims) < 0) {
        if (!strict) return KN_OK;
        return kn_error(KN_ERR_INVALID, "%s has an absurd shape (element count overflows)", what);
    }
    if (kn_shape_is_static(&s) && kn_shape_nbytes((kn_dtype)dt, &s) < 0) {
        if (!strict) return KN_OK;
        return kn_error(KN_ERR_UNSUPPORTED, "%s has a shape of more than 2^62 bytes, kiln's limit per tensor", what);
    }
    *out_dt = (kn_dtype)dt;
    *out_shape = s;
    return KN_OK;
}

/* Appends v to g's runtime inputs (for initializers that are also inputs,
 * which kn_graph_add_input cannot express since the value already exists). */
static int append_input(kn_graph *g, kn_value *v)
{
    if (g->n_inputs == g->cap_inputs) {
        int cap = g->cap_inputs ? g->cap_inputs * 2 : 8;
        kn_value **p = kn_arena_alloc(&g->model->arena, sizeof *p * (size_t)cap);
        if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
        if (g->n_inputs) memcpy(p, g->inputs, sizeof *p * (size_t)g->n_inputs);
        g->inputs = p;
        g->cap_inputs = cap;
    }
    g->inputs[g->n_inputs++] = v;
    v->flags |= KN_VALUE_GRAPH_INPUT;
    return KN_OK;
}

/* ---- initializers and inputs -------------------------------------------- */

/* Converts a TensorProto into a heap kn_tensor for kn_graph_add_constant /
 * kn_model_adopt_tensor (which then own it). */
static int new_tensor(importer *im, const Onnx__TensorProto *tp, const char *what, kn_tensor **out)
{
    *out = NULL;
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_onnx_tensor_from_proto(tp, what, im->base_dir, t);
    if (st) {
        free(t);
        return st;
    }
    *out = t;
    return KN_OK;
}

static int import_initializers(importer *im, const Onnx__GraphProto *gp, kn_graph *g)
{
    if (gp->n_sparse_initializer) {
        const Onnx__SparseTensorProto *sp = gp->sparse_initializer[0];
        const char *name = sp->values && sp->values->name ? sp->values->name : "";
        return kn_error(KN_ERR_UNSUPPORTED, "sparse initializer '%s' is not supported", name);
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        char what[320];
        if (!tp->name || !*tp->name) return kn_error(KN_ERR_INVALID, "initializer #%zu has no name", i);
        snprintf(what, sizeof what, "initializer '%s'", tp->name);
        if (kn_graph_lookup_local(g, tp->name))
            return kn_error(KN_ERR_INVALID, "initializer '%s' is defined more than once", tp->name);
        kn_tensor *t;
        int st = new_tensor(im, tp, what, &t);
        if (st) return st;
        kn_value *v = kn_graph_add_constant(g, tp->name, t);
        if (!v) return KN_ERR_NOMEM; /* t is owned by the model now */
        v->flags |= KN_VALUE_INITIALIZER;
    }
    return KN_OK;
}

static int import_inputs(importer *im, const Onnx__GraphProto *gp, kn_graph *g)
{
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi->name || !*vi->name) return kn_error(KN_ERR_INVALID, "graph input #%zu has no name", i);
        kn_value *v = kn_graph_lookup_local(g, vi->name);
        if (v && (v->flags & KN_VALUE_INITIALIZER) && !(v->flags & KN_VALUE_GRAPH_INPUT)) {
            int st = append_input(g, v);
            if (st) return st;
            continue;
        }
        if (v) return kn_error(KN_ERR_INVALID, "graph input '%s' is listed more than once", vi->name);
        char what[320];
        snprintf(what, sizeof what, "input '%s'", vi->name);
        kn_dtype dt;
        kn_shape s;
        int st = read_type(im, vi, what, true, &dt, &s);
        if (st) return st;
        if (!kn_graph_add_input(g, vi->name, dt, &s)) return KN_ERR_NOMEM;
    }
    return KN_OK;
}

/* ---- attributes --------------------------------------------------------- */

/* Old files may leave AttributeProto.type unset; the filled field tells. */
static int attr_kind(const Onnx__AttributeProto *ap)
{
    if (ap->has_type && ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return (int)ap->type;
    if (ap->has_f) return KN_ATTR_FLOAT;
    if (ap->has_i) return KN_ATTR_INT;
    if (ap->has_s) return KN_ATTR_STRING;
    if (ap->t) return KN_ATTR_TENSOR;
    if (ap->g) return KN_ATTR_GRAPH;
    if (ap->n_floats) return KN_ATTR_FLOATS;
    if (ap->n_ints) return KN_ATTR_INTS;
    if (ap->n_strings) return KN_ATTR_STRINGS;
    if (ap->n_tensors) return KN_ATTR_TENSORS;
    if (ap->n_graphs) return KN_ATTR_GRAPHS;
    if (ap->sparse_tensor) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR;
    if (ap->tp) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO;
    return KN_ATTR_UNDEFINED;
}

static int attr_tensor(importer *im, kn_node *n, const char *aname, const Onnx__TensorProto *tp, kn_tensor **out)
{
    char what[600];
    snprintf(what, sizeof what, "node '%s' (%s): attribute '%s': tensor '%s'", n->name, n->op_type, aname,
             str_or_empty(tp->name));
    kn_tensor *t;
    int st = new_tensor(im, tp, what, &t);
    if (st) return st;
    *out = kn_model_adopt_tensor(im->m, t);
    return *out ? KN_OK : KN_ERR_NOMEM;
}

static int attr_graph(importer *im, kn_node *n, const char *aname, const Onnx__GraphProto *gp, int depth,
                      kn_graph **out)
{
    if (depth >= MAX_GRAPH_DEPTH)
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "attribute '%s': subgraphs nested deeper than %d levels", aname,
                             MAX_GRAPH_DEPTH);
    kn_graph *sub = kn_graph_create_sub(n->graph, gp->name && *gp->name ? gp->name : aname);
    if (!sub) return KN_ERR_NOMEM;
    sub->parent_node = n;
    int st = import_graph(im, gp, sub, depth + 1);
    if (st) {
        kn_error_prefix("node '%s' (%s): attribute '%s': ", n->name, n->op_type, aname);
        return st;
    }
    *out = sub;
    return KN_OK;
}

/* Arena array of `count` elements of `size` bytes (count may be 0). */
static void *arena_array(importer *im, size_t count, size_t size)
{
    if (count > INT_MAX) return NULL;
    return kn_arena_alloc(&im->m->arena, size * (count ? count : 1));
}

static int import_list_attr(importer *im, kn_node *n, const Onnx__AttributeProto *ap, kn_attr *a, int depth)
{
    switch (a->kind) {
    case KN_ATTR_FLOATS:
        a->floats = arena_array(im, ap->n_floats, sizeof(float));
        if (!a->floats) goto oom;
        if (ap->n_floats) memcpy(a->floats, ap->floats, sizeof(float) * ap->n_floats);
        a->n = (int)ap->n_floats;
        return KN_OK;
    case KN_ATTR_INTS:
        a->ints = arena_array(im, ap->n_ints, sizeof(int64_t));
        if (!a->ints) goto oom;
        if (ap->n_ints) memcpy(a->ints, ap->ints, sizeof(int64_t) * ap->n_ints);
        a->n = (int)ap->n_ints;
        return KN_OK;
    case KN_ATTR_STRINGS:
        a->strings = arena_array(im, ap->n_strings, sizeof(char *));
        if (!a->strings) goto oom;
        for (size_t k = 0; k < ap->n_strings; k++) {
            a->strings[k] = kn_arena_strndup(&im->m->arena, (const char *)ap->strings[k].data, ap->strings[k].len);
            if (!a->strings[k]) goto oom;
        }
        a->n = (int)ap->n_strings;
        return KN_OK;
    case KN_ATTR_TENSORS:
        a->tensors = arena_array(im, ap->n_tensors, sizeof(kn_tensor *));
        if (!a->tensors) goto oom;
        for (size_t k = 0; k < ap->n_tensors; k++) {
            int st = attr_tensor(im, n, a->name, ap->tensors[k], &a->tensors[k]);
            if (st) return st;
            a->n = (int)k + 1;
        }
        return KN_OK;
    case KN_ATTR_GRAPHS:
        a->graphs = arena_array(im, ap->n_graphs, sizeof(kn_graph *));
        if (!a->graphs) goto oom;
        for (size_t k = 0; k < ap->n_graphs; k++) {
            int st = attr_graph(im, n, a->name, ap->graphs[k], depth, &a->graphs[k]);
            if (st) return st;
            a->n = (int)k + 1;
        }
        return KN_OK;
    default:
        return kn_error(KN_ERR_INTERNAL, "import_list_attr: kind %d", (int)a->kind);
    }
oom:
    return kn_error(KN_ERR_NOMEM, "out of memory");
}

static const char *unsupported_attr_kind(int kind)
{
    switch (kind) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR: return "SPARSE_TENSOR";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS: return "SPARSE_TENSORS";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: return "TYPE_PROTO";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS: return "TYPE_PROTOS";
    default: return NULL;
    }
}

static int import_attr(importer *im, kn_node *n, const Onnx__AttributeProto *ap, int depth)
{
    if (!ap->name || !*ap->name) return kn_node_error(n, KN_ERR_INVALID, "has an attribute with no name");
    if (ap->ref_attr_name && *ap->ref_attr_name)
        return kn_node_error(n, KN_ERR_INVALID,
                             "attribute '%s' refers to function attribute '%s' (ref_attr_name), which is only valid inside a function",
                             ap->name, ap->ref_attr_name);
    int kind = attr_kind(ap);
    if (unsupported_attr_kind(kind))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "attribute '%s' has type %s, which kiln does not support", ap->name,
                             unsupported_attr_kind(kind));
    if (kind <= KN_ATTR_UNDEFINED || kind > KN_ATTR_GRAPHS)
        return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' has %s type %d", ap->name,
                             kind == KN_ATTR_UNDEFINED ? "no value and no" : "unknown", kind);
    kn_attr *a = kn_node_add_attr(n, ap->name, (kn_attr_kind)kind);
    if (!a) return KN_ERR_INVALID;
    switch (a->kind) {
    case KN_ATTR_FLOAT: a->f = ap->f; return KN_OK;
    case KN_ATTR_INT: a->i = ap->i; return KN_OK;
    case KN_ATTR_STRING:
        a->s = kn_arena_strndup(&im->m->arena, ap->s.data ? (const char *)ap->s.data : "", ap->s.len);
        a->s_len = ap->s.len;
        return a->s ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    case KN_ATTR_TENSOR:
        if (!ap->t) return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' of type TENSOR holds no tensor", ap->name);
        return attr_tensor(im, n, a->name, ap->t, &a->t);
    case KN_ATTR_GRAPH:
        if (!ap->g) return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' of type GRAPH holds no graph", ap->name);
        return attr_graph(im, n, a->name, ap->g, depth, &a->g);
    default:
        return import_list_attr(im, n, ap, a, depth);
    }
}

/* ---- nodes -------------------------------------------------------------- */

/* A label for a node in messages before the kn_node exists. */
static void node_label(const Onnx__NodeProto *np, size_t k, char *buf, size_t len)
{
    if (np->name && *np->name) snprintf(buf, len, "node '%s' (%s)", np->name, str_or_empty(np->op_type));
    else snprintf(buf, len, "node #%zu (%s)", k, str_or_empty(np->op_type));
}

/* Says who already defines `v` ("node 'a'", "graph input", "initializer"). */
static void definer(const kn_value *v, char *buf, size_t len)
{
    if (v->producer) snprintf(buf, len, "already produced by node '%s'", v->producer->name);
    else if (v->flags & KN_VALUE_INITIALIZER) snprintf(buf, len, "already an initializer");
    else snprintf(buf, len, "already a graph input");
}

/* Node names of one graph, to make them unique: ONNX files often leave
 * names empty or repeat them, and kiln's messages and verifier need unique
 * ones. Open addressing over borrowed strings (the nodes' arena names). */
typedef struct name_set {
    const char **slots;
    size_t cap, count;
} name_set;

static uint64_t name_hash(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool name_has(const name_set *ns, const char *name)
{
    if (!ns->cap) return false;
    for (size_t h = name_hash(name) & (ns->cap - 1); ns->slots[h]; h = (h + 1) & (ns->cap - 1))
        if (strcmp(ns->slots[h], name) == 0) return true;
    return false;
}

static int name_add(name_set *ns, const char *name)
{
    if ((ns->count + 1) * 2 > ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 64;
        const char **slots = calloc(cap, sizeof *slots);
        if (!slots) return kn_error(KN_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < ns->cap; i++) {
            if (!ns->slots[i]) continue;
            size_t h = name_hash(ns->slots[i]) & (cap - 1);
            while (slots[h]) h = (h + 1) & (cap - 1);
            slots[h] = ns->slots[i];
        }
        free(ns->slots);
        ns->slots = slots;
        ns->cap = cap;
    }
    size_t h = name_hash(name) & (ns->cap - 1);
    while (ns->slots[h]) h = (h + 1) & (ns->cap - 1);
    ns->slots[h] = name;
    ns->count++;
    return KN_OK;
}

/* The name node #k gets: its own if unused, else "<name or op>_<k>[_<j>]". */
static void unique_name(const name_set *ns, const Onnx__NodeProto *np, size_t k, char *buf, size_t len)
{
    const char *base = np->name && *np->name ? np->name : np->op_type;
    if (np->name && *np->name && strlen(np->name) < len && !name_has(ns, np->name)) {
        snprintf(buf, len, "%s", np->name);
        return;
    }
    snprintf(buf, len, "%.200s_%zu", base, k);
    for (unsigned j = 1; name_has(ns, buf); j++) snprintf(buf, len, "%.200s_%zu_%u", base, k, j);
}

/* Kernels index inputs and outputs by position: a count outside the op's
 * range (runtime/ops/ops.def) is refused here, as onnxruntime does, rather
 * than read past the end later. Ops kiln does not declare are reported by
 * kn_onnx_check_supported. */
static int check_arity(const kn_node *n)
{
    const kn_op_info *oi = kn_op_lookup(n->op_type, n->domain);
    if (!oi) return KN_OK;
    const struct { const char *what; int count, min, max; } io[2] = {
        {"input", n->n_inputs, oi->min_inputs, oi->max_inputs},
        {"output", n->n_outputs, oi->min_outputs, oi->max_outputs},
    };
    for (int k = 0; k < 2; k++) {
        int c = io[k].count, lo = io[k].min, hi = io[k].max;
        const char *s = c == 1 ? "" : "s";
        if (c > KN_ONNX_MAX_ARITY)
            return kn_node_error(n, KN_ERR_UNSUPPORTED, "has %d %s%s, over kiln's limit of %d per node", c, io[k].what,
                                 s, KN_ONNX_MAX_ARITY);
        if (c >= lo && (hi >= KN_VAR || c <= hi)) continue;
        if (hi >= KN_VAR)
            return kn_node_error(n, KN_ERR_INVALID, "has %d %s%s, %s takes at least %d", c, io[k].what, s, oi->name, lo);
        if (lo == hi)
            return kn_node_error(n, KN_ERR_INVALID, "has %d %s%s, %s takes %d", c, io[k].what, s, oi->name, lo);
        return kn_node_error(n, KN_ERR_INVALID, "has %d %s%s, %s takes %d to %d", c, io[k].what, s, oi->name, lo, hi);
    }
    return KN_OK;
}

/* Pass 2: a node and its outputs, inputs left unset. */
static int create_node(kn_graph *g, name_set *ns, const Onnx__NodeProto *np, size_t k)
{
    char label[400];
    node_label(np, k, label, sizeof label);
    if (!np->op_type || !*np->op_type) return kn_error(KN_ERR_INVALID, "%s has no op_type", label);
    if (np->n_input > INT_MAX / 2 || np->n_output > INT_MAX / 2)
        return kn_error(KN_ERR_INVALID, "%s has too many inputs or outputs", label);
    for (size_t i = 0; i < np->n_output; i++) {
        const char *o = np->output[i];
        if (!o || !*o) continue;
        const kn_value *v = kn_graph_lookup_local(g, o);
        char who[400];
        if (v) {
            definer(v, who, sizeof who);
            return kn_error(KN_ERR_INVALID, "%s: output '%s' is %s", label, o, who);
        }
    }
    char name[256];
    unique_name(ns, np, k, name, sizeof name);
    /* an output listed twice on this node fails here, named by the graph */
    kn_node *n = kn_node_create_named(g, np->op_type, str_or_empty(np->domain), name, (int)np->n_input, NULL,
                                      (int)np->n_output, (const char *const *)np->output);
    if (!n) return KN_ERR_INVALID;
    int st = check_arity(n);
    return st ? st : name_add(ns, n->name);
}

/* A default-domain op used outside the opsets in which ONNX defines it
 * (ops.def's SINCE and UNTIL: Gelu before opset 20, Upsample after 9) is
 * refused, as onnxruntime refuses the model: a kiln that read it anyway
 * would guess at semantics the model's opset never had. */
static int check_opset(const kn_node *n)
{
    const kn_op_info *oi = kn_op_lookup(n->op_type, n->domain);
    if (!oi || oi->domain[0]) return KN_OK;
    int64_t v = kn_node_opset(n);
    if (v <= 0) return KN_OK;
    if (v < oi->since)
        return kn_node_error(n, KN_ERR_INVALID, "%s is defined from opset %d on; the model imports opset %lld",
                             oi->name, oi->since, (long long)v);
    if (oi->until && v > oi->until)
        return kn_node_error(n, KN_ERR_INVALID, "%s was removed from ONNX after opset %d; the model imports opset %lld",
                             oi->name, oi->until, (long long)v);
    return KN_OK;
}

/* Pass 3: attributes (and subgraphs), then inputs resolved by name. */
static int wire_node(importer *im, kn_node *n, const Onnx__NodeProto *np, int depth)
{
    for (size_t i = 0; i < np->n_attribute; i++) {
        int st = import_attr(im, n, np->attribute[i], depth);
        if (st) return st;
    }
    int st = check_opset(n);
    if (!st) st = kn_onnx_check_node_attrs(n, kn_node_opset(n));
    if (st) return st;
    for (size_t i = 0; i < np->n_input; i++) {
        const char *name = np->input[i];
        if (!name || !*name) continue; /* omitted optional input */
        kn_value *v = kn_graph_lookup(n->graph, name);
        if (!v) return kn_node_error(n, KN_ERR_INVALID, "input '%s' is not defined", name);
        kn_node_set_input(n, (int)i, v);
    }
    return KN_OK;
}

/* ---- graph outputs and value_info --------------------------------------- */

static void set_declared_type(kn_value *v, kn_dtype dt, const kn_shape *s)
{
    /* only fill what nothing else knows: inputs and constants carry their own */
    if (v->const_data || (v->flags & KN_VALUE_GRAPH_INPUT) || v->dtype != KN_DT_UNDEFINED) return;
    v->dtype = dt;
    v->shape = *s;
    if (dt != KN_DT_UNDEFINED) v->flags |= KN_VALUE_DECLARED_TYPE;
}

static int import_value_info(importer *im, const Onnx__GraphProto *gp, kn_graph *g)
{
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        kn_value *v = vi->name ? kn_graph_lookup_local(g, vi->name) : NULL;
        if (!v) continue; /* a hint about a value nothing computes: harmless */
        kn_dtype dt;
        kn_shape s;
        int st = read_type(im, vi, "value_info", false, &dt, &s);
        if (st) return st;
        set_declared_type(v, dt, &s);
    }
    return KN_OK;
}

static int import_outputs(importer *im, const Onnx__GraphProto *gp, kn_graph *g)
{
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!vi->name || !*vi->name) return kn_error(KN_ERR_INVALID, "graph output #%zu has no name", i);
        char what[320];
        snprintf(what, sizeof what, "output '%s'", vi->name);
        kn_dtype dt;
        kn_shape s;
        int st = read_type(im, vi, what, true, &dt, &s);
        if (st) return st;
        kn_value *v = kn_graph_lookup_local(g, vi->name);
        if (!v && g->parent && kn_graph_lookup(g->parent, vi->name)) {
            /* a subgraph may return an outer value as is; give it a local
             * producer so the outer value's flags stay untouched */
            kn_value *outer = kn_graph_lookup(g->parent, vi->name);
            const char *oname = vi->name;
            kn_node *id = kn_node_create_named(g, "Identity", "", NULL, 1, &outer, 1, &oname);
            if (!id) return KN_ERR_NOMEM;
            v = id->outputs[0];
        }
        if (!v) return kn_error(KN_ERR_INVALID, "graph output '%s' is not produced by any node, input or initializer",
                                vi->name);
        set_declared_type(v, dt, &s);
        st = kn_graph_add_output(g, v);
        if (st) return st;
    }
    return KN_OK;
}

/* ---- ordering ----------------------------------------------------------- */

typedef struct dep_list {
    int *v;
    int n, cap;
} dep_list;

static int dep_push(dep_list *d, int pos)
{
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 64;
        int *p = realloc(d->v, sizeof *p * (size_t)cap);
        if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
        d->v = p;
        d->cap = cap;
    }
    d->v[d->n++] = pos;
    return KN_OK;
}

/* Values of g that node n needs first: its inputs and the outer-scope values
 * its subgraphs use (at any depth). Appends their producers' positions. */
static int node_deps(const kn_node *n, const kn_graph *g, const int *pos_of_value, dep_list *d)
{
    for (int i = 0; i < n->n_inputs; i++) {
        const kn_value *v = n->inputs[i];
        if (v && v->graph == g && v->producer && dep_push(d, pos_of_value[v->id])) return KN_ERR_NOMEM;
    }
    for (int a = 0; a < n->n_attrs; a++) {
        const kn_attr *at = &n->attrs[a];
        int cnt = at->kind == KN_ATTR_GRAPH ? (at->g != NULL) : at->kind == KN_ATTR_GRAPHS ? at->n : 0;
        for (int k = 0; k < cnt; k++) {
            const kn_graph *sub = at->kind == KN_ATTR_GRAPH ? at->g : at->graphs[k];
            for (int j = 0; j < sub->n_nodes; j++)
                if (node_deps(sub->nodes[j], g, pos_of_value, d)) return KN_ERR_NOMEM;
            for (int j = 0; j < sub->n_outputs; j++) {
                const kn_value *v = sub->outputs[j];
                if (v->graph == g && v->producer && dep_push(d, pos_of_value[v->id])) return KN_ERR_NOMEM;
            }
        }
    }
    return KN_OK;
}

/* Min-heap of node positions: Kahn's algorithm taking the earliest ready
 * node keeps file order whenever it is already topological. */
static void heap_push(int *h, int *n, int x)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > x) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = x;
}

static int heap_pop(int *h, int *n)
{
    int top = h[0], x = h[--*n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

/* Reorders g->nodes topologically in O(edges log n) before
 * kn_graph_toposort (which sweeps repeatedly, quadratic on a file in reverse
 * order) checks the result. Nodes on a cycle stay at the end in file order,
 * for kn_graph_toposort to report. */
static int presort(kn_graph *g)
{
    int n = g->n_nodes, nv = g->model->n_value_ids;
    if (n < 2) return KN_OK;
    int *pos_of_value = calloc((size_t)nv, sizeof *pos_of_value);
    int *start = calloc((size_t)n + 1, sizeof *start), *indeg = calloc((size_t)n, sizeof *indeg);
    int *heap = malloc(sizeof *heap * (size_t)n), *order = malloc(sizeof *order * (size_t)n);
    kn_node **sorted = malloc(sizeof *sorted * (size_t)n);
    char *placed = calloc((size_t)n, 1);
    dep_list d = {0};
    int *succ = NULL, *fill = NULL;
    int st = KN_ERR_NOMEM;
    if (!pos_of_value || !start || !indeg || !heap || !order || !sorted || !placed) goto out;
    for (int k = 0; k < n; k++)
        for (int o = 0; o < g->nodes[k]->n_outputs; o++)
            if (g->nodes[k]->outputs[o]) pos_of_value[g->nodes[k]->outputs[o]->id] = k;
    /* the producers node k waits for are d.v[start[k] .. start[k + 1]) */
    for (int k = 0; k < n; k++) {
        if (node_deps(g->nodes[k], g, pos_of_value, &d)) goto out;
        start[k + 1] = d.n;
    }
    /* successor lists (CSR) from the dependency lists */
    int *scount = calloc((size_t)n + 1, sizeof *scount);
    succ = malloc(sizeof *succ * (size_t)(d.n ? d.n : 1));
    fill = scount;
    if (!scount || !succ) goto out;
    for (int e = 0; e < d.n; e++) scount[d.v[e] + 1]++;
    for (int k = 0; k < n; k++) scount[k + 1] += scount[k];
    int *cursor = malloc(sizeof *cursor * (size_t)n);
    if (!cursor) goto out;
    memcpy(cursor, scount, sizeof *cursor * (size_t)n);
    for (int k = 0; k < n; k++)
        for (int e = start[k]; e < start[k + 1]; e++) {
            succ[cursor[d.v[e]]++] = k;
            indeg[k]++;
        }
    free(cursor);
    int hn = 0, done = 0;
    for (int k = 0; k < n; k++)
        if (!indeg[k]) heap_push(heap, &hn, k);
    while (hn) {
        int k = heap_pop(heap, &hn);
        order[done++] = k;
        placed[k] = 1;
        for (int e = scount[k]; e < scount[k + 1]; e++)
            if (--indeg[succ[e]] == 0) heap_push(heap, &hn, succ[e]);
    }
    for (int k = 0; k < n; k++)
        if (!placed[k]) order[done++] = k;
    for (int k = 0; k < n; k++) sorted[k] = g->nodes[order[k]];
    memcpy(g->nodes, sorted, sizeof *sorted * (size_t)n);
    st = KN_OK;
out:
    if (st) kn_error(KN_ERR_NOMEM, "out of memory");
    free(pos_of_value), free(start), free(indeg), free(heap), free(order), free(sorted), free(placed);
    free(d.v), free(succ), free(fill);
    return st;
}

/* ---- graphs and models -------------------------------------------------- */

static int import_graph(importer *im, const Onnx__GraphProto *gp, kn_graph *g, int depth)
{
    int st = import_initializers(im, gp, g);
    if (!st) st = import_inputs(im, gp, g);
    if (st) return st;
    int first = g->n_nodes;
    name_set ns = {0};
    for (size_t k = 0; k < gp->n_node && !st; k++) st = create_node(g, &ns, gp->node[k], k);
    free(ns.slots);
    if (st) return st;
    for (size_t k = 0; k < gp->n_node; k++) {
        st = wire_node(im, g->nodes[first + (int)k], gp->node[k], depth);
        if (st) return st;
    }
    st = import_value_info(im, gp, g);
    if (!st) st = import_outputs(im, gp, g);
    if (!st) st = presort(g);
    if (!st) st = kn_graph_toposort(g);
    return st;
}

static int import_model(importer *im, const Onnx__ModelProto *mp)
{
    kn_model *m = im->m;
    if (!mp->graph) return kn_error(KN_ERR_INVALID, "model has no graph");
    m->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    m->producer_name = kn_arena_strdup(&m->arena, str_or_empty(mp->producer_name));
    m->producer_version = kn_arena_strdup(&m->arena, str_or_empty(mp->producer_version));
    if (!m->producer_name || !m->producer_version) return kn_error(KN_ERR_NOMEM, "out of memory");
    /* Which version of each op a node means depends on its domain's opset:
     * without one (or with one no ONNX release defines) a node has no
     * meaning, and onnxruntime refuses the model too. */
    if (!mp->n_opset_import)
        return kn_error(KN_ERR_INVALID, "model has no opset_import; ONNX requires one naming the opset of the "
                        "default domain (kiln supports %d to %d)", KN_ONNX_MIN_OPSET, KN_ONNX_MAX_OPSET);
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
        const char *domain = str_or_empty(o->domain);
        int64_t version = o->has_version ? o->version : 0;
        bool onnx = !*domain || !strcmp(domain, "ai.onnx");
        if (onnx && (version < KN_ONNX_MIN_OPSET || version > KN_ONNX_MAX_OPSET))
            return kn_error(KN_ERR_UNSUPPORTED, "opset_import: default-domain opset %lld is outside the range kiln "
                            "supports (%d to %d)", (long long)version, KN_ONNX_MIN_OPSET, KN_ONNX_MAX_OPSET);
        int st = kn_model_set_opset(m, domain, version);
        if (st) return st;
    }
    /* onnxruntime reads a model whose opset_import names only other domains
     * as using the newest default-domain opset; so does kiln */
    if (!kn_model_opset(m, "")) {
        int st = kn_model_set_opset(m, "", KN_ONNX_MAX_OPSET);
        if (st) return st;
    }
    return import_graph(im, mp->graph, m->graph, 0);
}

/* Unpacks the protobuf after the size and nesting checks. */
static int parse_model(const void *data, size_t len, const char *name, Onnx__ModelProto **out)
{
    *out = NULL;
    if (len > KN_ONNX_MAX_PROTO_BYTES)
        return kn_error(KN_ERR_UNSUPPORTED, "%s: %zu bytes is over the 2 GiB protobuf limit (store weights as external data)",
                        name, len);
    int st = kn_onnx_check_nesting(data, len);
    if (st) {
        kn_error_prefix("%s: ", name);
        return st;
    }
    *out = onnx__model_proto__unpack(NULL, len, data);
    if (!*out) return kn_error(KN_ERR_INVALID, "%s: not a valid ONNX ModelProto (protobuf parse failed)", name);
    return KN_OK;
}

/* Builds the model from an unpacked message, which it frees. `path` (may be
 * NULL) is recorded as the model's file; `name` prefixes messages. */
static int import_parsed(Onnx__ModelProto *mp, const char *base_dir, const char *name, const char *path,
                         kn_model **out_model)
{
    importer im = {.m = kn_model_create(), .base_dir = base_dir};
    int st = im.m ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st && path && !(im.m->path = kn_arena_strdup(&im.m->arena, path))) st = kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) st = import_model(&im, mp);
    onnx__model_proto__free_unpacked(mp, NULL);
    if (st) {
        kn_error_prefix("%s: ", name);
        kn_model_free(im.m);
        return st;
    }
    *out_model = im.m;
    return KN_OK;
}

int kn_onnx_load_bytes(const void *data, size_t len, const char *base_dir, kn_model **out_model)
{
    *out_model = NULL;
    Onnx__ModelProto *mp;
    int st = parse_model(data, len, "<memory>", &mp);
    return st ? st : import_parsed(mp, base_dir, "<memory>", NULL, out_model);
}

int kn_onnx_load_file(const char *path, kn_model **out_model)
{
    *out_model = NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    int st = kn_onnx_read_file(path, KN_ONNX_MAX_PROTO_BYTES, &buf, &len);
    if (st) return st;
    Onnx__ModelProto *mp;
    st = parse_model(buf, len, path, &mp);
    free(buf); /* protobuf-c copied what it needs: keeps peak memory at 2x the weights */
    if (st) return st;
    char *dir = strdup(path);
    if (!dir) {
        onnx__model_proto__free_unpacked(mp, NULL);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    const char *base = ".";
    if (slash) {
        *slash = '\0';
        base = dir[0] ? dir : "/";
    }
    st = import_parsed(mp, base, path, path, out_model);
    free(dir);
    return st;
}
