/*
 * frontend/onnx/onnx_export.c — kiln IR → ONNX ModelProto (onnx_export.h).
 *
 * The protobuf-c message tree is built in a scratch arena that goes away
 * after packing; strings and weight bytes are borrowed from the model (the
 * packer only reads them), so exporting costs one copy of the weights: the
 * packed buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln/file.h"
#include "onnx_export.h"
#include "onnx_internal.h"

/* Subgraphs nested deeper than this are refused, as on import. */
#define MAX_GRAPH_DEPTH 32

typedef struct exporter {
    kn_arena a; /* every message of the tree */
    const kn_model *m;
    /* domains nodes use, to add those the model does not import */
    const char **domains;
    int n_domains, cap_domains;
} exporter;

static int oom(void) { return kn_error(KN_ERR_NOMEM, "out of memory"); }

/* A zeroed arena array of n elements (n may be 0). */
static void *xarray(exporter *x, size_t n, size_t size) { return kn_arena_alloc(&x->a, size * (n ? n : 1)); }

/* The protobuf-c messages start from their INIT values, not from zeros. */
#define NEW_MSG(x, type, init) ((type *)new_msg((x), sizeof(type), &(type)init))

static void *new_msg(exporter *x, size_t size, const void *init)
{
    void *p = kn_arena_alloc(&x->a, size);
    if (p) memcpy(p, init, size);
    return p;
}

/* protobuf-c's char * fields are not const; the packer never writes them. */
static char *borrow(const char *s) { return (char *)(s ? s : ""); }

static int graph_proto(exporter *x, const kn_graph *g, int depth, Onnx__GraphProto **out);

/* ---- types and tensors --------------------------------------------------- */

static int type_proto(exporter *x, kn_dtype dt, const kn_shape *s, Onnx__TypeProto **out)
{
    Onnx__TypeProto *tp = NEW_MSG(x, Onnx__TypeProto, ONNX__TYPE_PROTO__INIT);
    Onnx__TypeProto__Tensor *tt = NEW_MSG(x, Onnx__TypeProto__Tensor, ONNX__TYPE_PROTO__TENSOR__INIT);
    if (!tp || !tt) return oom();
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    if (dt != KN_DT_UNDEFINED) {
        tt->has_elem_type = 1;
        tt->elem_type = (int32_t)dt; /* kn_dtype uses TensorProto.DataType's numbers */
    }
    if (s->rank >= 0) {
        Onnx__TensorShapeProto *sp = NEW_MSG(x, Onnx__TensorShapeProto, ONNX__TENSOR_SHAPE_PROTO__INIT);
        if (!sp || !(sp->dim = xarray(x, (size_t)s->rank, sizeof *sp->dim))) return oom();
        for (int d = 0; d < s->rank; d++) {
            Onnx__TensorShapeProto__Dimension *dim =
                NEW_MSG(x, Onnx__TensorShapeProto__Dimension, ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT);
            if (!dim) return oom();
            if (s->dims[d] >= 0) {
                dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                dim->dim_value = s->dims[d];
            } else if (s->sym[d]) {
                dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                dim->dim_param = borrow(s->sym[d]);
            } /* else: an unknown dim is a Dimension with neither field */
            sp->dim[d] = dim;
        }
        sp->n_dim = (size_t)s->rank;
        tt->shape = sp;
    }
    *out = tp;
    return KN_OK;
}

static int value_info(exporter *x, const char *name, kn_dtype dt, const kn_shape *s, Onnx__ValueInfoProto **out)
{
    Onnx__ValueInfoProto *vi = NEW_MSG(x, Onnx__ValueInfoProto, ONNX__VALUE_INFO_PROTO__INIT);
    if (!vi) return oom();
    vi->name = borrow(name);
    *out = vi;
    return type_proto(x, dt, s, &vi->type);
}

/* A value's declared type: a constant's comes from its data. */
static int value_info_of(exporter *x, const kn_value *v, Onnx__ValueInfoProto **out)
{
    if (v->const_data) {
        kn_shape s = kn_shape_unknown();
        kn_shape_set(&s, v->const_data->rank, v->const_data->dims);
        return value_info(x, v->name, v->const_data->dtype, &s, out);
    }
    return value_info(x, v->name, v->dtype, &v->shape, out);
}

/* `what` names the tensor in messages. raw_data borrows t's bytes. */
static int tensor_proto(exporter *x, const char *name, const kn_tensor *t, const char *what, Onnx__TensorProto **out)
{
    if (!kn_dtype_valid(t->dtype))
        return kn_error(KN_ERR_UNSUPPORTED, "%s has dtype %s, which kiln cannot write", what, kn_dtype_name(t->dtype));
    int64_t numel = kn_tensor_numel(t);
    if (numel < 0 || t->nbytes != kn_dtype_nbytes(t->dtype, (size_t)numel))
        return kn_error(KN_ERR_INTERNAL, "%s: %zu bytes for %lld elements of %s", what, t->nbytes, (long long)numel,
                        kn_dtype_name(t->dtype));
    Onnx__TensorProto *tp = NEW_MSG(x, Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
    if (!tp || !(tp->dims = xarray(x, (size_t)t->rank, sizeof *tp->dims))) return oom();
    for (int d = 0; d < t->rank; d++) tp->dims[d] = t->dims[d];
    tp->n_dims = (size_t)t->rank;
    tp->has_data_type = 1;
    tp->data_type = (int32_t)t->dtype;
    tp->name = name ? borrow(name) : NULL;
    /* raw_data is little-endian, as kiln holds tensors (x86-64); 4-bit types
     * are packed two to a byte, low nibble first, in both */
    tp->has_raw_data = 1;
    tp->raw_data.len = t->nbytes;
    tp->raw_data.data = t->nbytes ? (uint8_t *)t->data : NULL;
    *out = tp;
    return KN_OK;
}

/* ---- attributes and nodes ------------------------------------------------ */

static int attr_proto(exporter *x, const kn_node *n, const kn_attr *a, int depth, Onnx__AttributeProto **out)
{
    Onnx__AttributeProto *ap = NEW_MSG(x, Onnx__AttributeProto, ONNX__ATTRIBUTE_PROTO__INIT);
    if (!ap) return oom();
    ap->name = borrow(a->name);
    ap->has_type = 1;
    ap->type = (Onnx__AttributeProto__AttributeType)a->kind; /* same numbers as AttributeProto's */
    char what[600];
    snprintf(what, sizeof what, "node '%s' (%s): attribute '%s'", n->name, n->op_type, a->name);
    size_t cnt = a->n > 0 ? (size_t)a->n : 0;
    int st = KN_OK;
    switch (a->kind) {
    case KN_ATTR_FLOAT: ap->has_f = 1, ap->f = a->f; break;
    case KN_ATTR_INT: ap->has_i = 1, ap->i = a->i; break;
    case KN_ATTR_STRING:
        ap->has_s = 1;
        ap->s.len = a->s ? a->s_len : 0;
        ap->s.data = (uint8_t *)(a->s ? a->s : "");
        break;
    case KN_ATTR_TENSOR:
        if (!a->t) return kn_error(KN_ERR_INVALID, "%s of type TENSOR holds no tensor", what);
        st = tensor_proto(x, NULL, a->t, what, &ap->t);
        break;
    case KN_ATTR_GRAPH:
        if (!a->g) return kn_error(KN_ERR_INVALID, "%s of type GRAPH holds no graph", what);
        st = graph_proto(x, a->g, depth + 1, &ap->g);
        if (st) kn_error_prefix("%s: ", what);
        break;
    case KN_ATTR_FLOATS:
        ap->floats = a->floats, ap->n_floats = cnt;
        break;
    case KN_ATTR_INTS:
        ap->ints = a->ints, ap->n_ints = cnt;
        break;
    case KN_ATTR_STRINGS:
        if (!(ap->strings = xarray(x, cnt, sizeof *ap->strings))) return oom();
        for (size_t k = 0; k < cnt; k++) {
            ap->strings[k].data = (uint8_t *)borrow(a->strings[k]);
            ap->strings[k].len = strlen(borrow(a->strings[k]));
        }
        ap->n_strings = cnt;
        break;
    case KN_ATTR_TENSORS:
        if (!(ap->tensors = xarray(x, cnt, sizeof *ap->tensors))) return oom();
        for (size_t k = 0; k < cnt && !st; k++) st = tensor_proto(x, NULL, a->tensors[k], what, &ap->tensors[k]);
        ap->n_tensors = cnt;
        break;
    case KN_ATTR_GRAPHS:
        if (!(ap->graphs = xarray(x, cnt, sizeof *ap->graphs))) return oom();
        for (size_t k = 0; k < cnt && !st; k++) st = graph_proto(x, a->graphs[k], depth + 1, &ap->graphs[k]);
        if (st) kn_error_prefix("%s: ", what);
        ap->n_graphs = cnt;
        break;
    default:
        return kn_error(KN_ERR_INVALID, "%s has kind %d, which ONNX does not define", what, (int)a->kind);
    }
    *out = ap;
    return st;
}

static int note_domain(exporter *x, const char *domain)
{
    if (!*domain || !strcmp(domain, "ai.onnx") || kn_model_opset(x->m, domain)) return KN_OK;
    for (int i = 0; i < x->n_domains; i++)
        if (!strcmp(x->domains[i], domain)) return KN_OK;
    if (x->n_domains == x->cap_domains) {
        int cap = x->cap_domains ? 2 * x->cap_domains : 4;
        const char **p = xarray(x, (size_t)cap, sizeof *p);
        if (!p) return oom();
        if (x->n_domains) memcpy(p, x->domains, sizeof *p * (size_t)x->n_domains);
        x->domains = p, x->cap_domains = cap;
    }
    x->domains[x->n_domains++] = domain;
    return KN_OK;
}

/* Names of a node's inputs or outputs; an omitted optional one is "". */
static char **value_names(exporter *x, kn_value *const *vals, int n)
{
    char **names = xarray(x, (size_t)n, sizeof *names);
    for (int i = 0; names && i < n; i++) names[i] = borrow(vals[i] ? vals[i]->name : "");
    return names;
}

static int node_proto(exporter *x, const kn_node *n, int depth, Onnx__NodeProto **out)
{
    Onnx__NodeProto *np = NEW_MSG(x, Onnx__NodeProto, ONNX__NODE_PROTO__INIT);
    if (!np) return oom();
    np->name = borrow(n->name);
    np->op_type = borrow(n->op_type);
    np->domain = borrow(n->domain);
    if (!(np->input = value_names(x, n->inputs, n->n_inputs)) || !(np->output = value_names(x, n->outputs, n->n_outputs)))
        return oom();
    np->n_input = (size_t)n->n_inputs, np->n_output = (size_t)n->n_outputs;
    if (!(np->attribute = xarray(x, (size_t)n->n_attrs, sizeof *np->attribute))) return oom();
    for (int k = 0; k < n->n_attrs; k++) {
        int st = attr_proto(x, n, &n->attrs[k], depth, &np->attribute[k]);
        if (st) return st;
        np->n_attribute = (size_t)k + 1;
    }
    *out = np;
    return note_domain(x, n->domain);
}

/* ---- graphs and models --------------------------------------------------- */

/* A constant is written if something reads it (passes leave dead ones in
 * the value list) or it is part of the graph's interface. */
static bool constant_is_live(const kn_value *v)
{
    return v->const_data && (v->n_users > 0 || (v->flags & (KN_VALUE_GRAPH_INPUT | KN_VALUE_GRAPH_OUTPUT)));
}

static int graph_values(exporter *x, const kn_graph *g, Onnx__GraphProto *gp)
{
    size_t n_init = 0, n_info = 0;
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (constant_is_live(v)) n_init++;
        else if (!v->const_data && v->producer && v->dtype != KN_DT_UNDEFINED &&
                 !(v->flags & KN_VALUE_GRAPH_OUTPUT))
            n_info++;
    }
    gp->initializer = xarray(x, n_init, sizeof *gp->initializer);
    gp->value_info = xarray(x, n_info, sizeof *gp->value_info);
    if (!gp->initializer || !gp->value_info) return oom();
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        int st = KN_OK;
        if (constant_is_live(v)) {
            char what[320];
            snprintf(what, sizeof what, "constant '%s'", v->name);
            st = tensor_proto(x, v->name, v->const_data, what, &gp->initializer[gp->n_initializer++]);
        } else if (!v->const_data && v->producer && v->dtype != KN_DT_UNDEFINED &&
                   !(v->flags & KN_VALUE_GRAPH_OUTPUT)) {
            st = value_info(x, v->name, v->dtype, &v->shape, &gp->value_info[gp->n_value_info++]);
        }
        if (st) return st;
    }
    return KN_OK;
}

static int graph_proto(exporter *x, const kn_graph *g, int depth, Onnx__GraphProto **out)
{
    if (depth > MAX_GRAPH_DEPTH)
        return kn_error(KN_ERR_UNSUPPORTED, "subgraphs nested deeper than %d levels", MAX_GRAPH_DEPTH);
    Onnx__GraphProto *gp = NEW_MSG(x, Onnx__GraphProto, ONNX__GRAPH_PROTO__INIT);
    if (!gp) return oom();
    gp->name = borrow(g->name && *g->name ? g->name : "kiln");
    gp->node = xarray(x, (size_t)g->n_nodes, sizeof *gp->node);
    gp->input = xarray(x, (size_t)g->n_inputs, sizeof *gp->input);
    gp->output = xarray(x, (size_t)g->n_outputs, sizeof *gp->output);
    if (!gp->node || !gp->input || !gp->output) return oom();
    for (int k = 0; k < g->n_nodes; k++) {
        int st = node_proto(x, g->nodes[k], depth, &gp->node[k]);
        if (st) return st;
        gp->n_node = (size_t)k + 1;
    }
    for (int k = 0; k < g->n_inputs; k++) {
        int st = value_info_of(x, g->inputs[k], &gp->input[k]);
        if (st) return st;
        gp->n_input = (size_t)k + 1;
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int st = value_info_of(x, g->outputs[k], &gp->output[k]);
        if (st) return st;
        gp->n_output = (size_t)k + 1;
    }
    *out = gp;
    return graph_values(x, g, gp);
}

static int opset_id(exporter *x, const char *domain, int64_t version, Onnx__OperatorSetIdProto **out)
{
    Onnx__OperatorSetIdProto *o = NEW_MSG(x, Onnx__OperatorSetIdProto, ONNX__OPERATOR_SET_ID_PROTO__INIT);
    if (!o) return oom();
    o->domain = borrow(!strcmp(domain, "ai.onnx") ? "" : domain);
    o->has_version = 1;
    o->version = version;
    *out = o;
    return KN_OK;
}

/* The IR version to write: the model's when it has one ONNX 1.15 and
 * onnxruntime 1.18 read (IR 4 made initializers independent of inputs, which
 * this writer relies on), else 8 (the version of opsets 14 to 18). */
static int64_t ir_version_of(const kn_model *m) { return m->ir_version >= 4 && m->ir_version <= 9 ? m->ir_version : 8; }

static int model_proto(exporter *x, Onnx__ModelProto **out)
{
    const kn_model *m = x->m;
    Onnx__ModelProto *mp = NEW_MSG(x, Onnx__ModelProto, ONNX__MODEL_PROTO__INIT);
    if (!mp) return oom();
    mp->has_ir_version = 1;
    mp->ir_version = ir_version_of(m);
    mp->producer_name = "kiln";
    mp->producer_version = "0.1.0";
    int st = graph_proto(x, m->graph, 0, &mp->graph);
    if (st) return st;
    bool has_default = kn_model_opset(m, "") > 0;
    size_t n = (size_t)m->n_opsets + (size_t)x->n_domains + !has_default;
    if (!(mp->opset_import = xarray(x, n, sizeof *mp->opset_import))) return oom();
    for (int i = 0; i < m->n_opsets && !st; i++)
        st = opset_id(x, m->opsets[i].domain, m->opsets[i].version, &mp->opset_import[mp->n_opset_import++]);
    for (int i = 0; i < x->n_domains && !st; i++)
        st = opset_id(x, x->domains[i], 1, &mp->opset_import[mp->n_opset_import++]);
    if (!st && !has_default) st = opset_id(x, "", KN_ONNX_MAX_OPSET, &mp->opset_import[mp->n_opset_import++]);
    *out = mp;
    return st;
}

int kn_onnx_save_bytes(const kn_model *m, uint8_t **out_data, size_t *out_len)
{
    *out_data = NULL;
    *out_len = 0;
    exporter x = {.m = m};
    Onnx__ModelProto *mp = NULL;
    int st = model_proto(&x, &mp);
    if (!st) {
        size_t len = onnx__model_proto__get_packed_size(mp);
        if (len > KN_ONNX_MAX_PROTO_BYTES)
            st = kn_error(KN_ERR_UNSUPPORTED, "the model is %zu bytes serialized, over protobuf's 2 GiB limit "
                          "(kiln does not write external data)", len);
        uint8_t *buf = st ? NULL : malloc(len ? len : 1);
        if (!st && !buf) st = oom();
        if (!st && onnx__model_proto__pack(mp, buf) != len) {
            free(buf);
            st = kn_error(KN_ERR_INTERNAL, "protobuf-c packed a different size than it measured");
        } else if (!st) {
            *out_data = buf;
            *out_len = len;
        }
    }
    kn_arena_release(&x.a);
    return st;
}

/* Writes len bytes to fd, retrying short writes; false with errno set. */
int kn_onnx_save_file(const kn_model *m, const char *path)
{
    uint8_t *data = NULL;
    size_t len = 0;
    int st = kn_output_path_check(path); /* before the work of serializing */
    if (st) return st;
    st = kn_onnx_save_bytes(m, &data, &len);
    if (st) {
        kn_error_prefix("%s: ", path);
        return st;
    }
    st = kn_write_file_atomic(path, data, len);
    free(data);
    return st;
}
