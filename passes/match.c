/* passes/match.c — pattern helpers shared by the passes (see match.h). */
#include "match.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "eval.h"

kn_node *kn_pm_producer(const kn_value *v, kn_op op)
{
    if (!v || !v->producer || v->producer->op != op || v->producer_index != 0) return NULL;
    return v->producer;
}

bool kn_pm_single_use(const kn_value *v)
{
    return v && v->n_users == 1 && !(v->flags & KN_VALUE_GRAPH_OUTPUT);
}

/* Data attached to a value whose shape varies at run time is one instance,
 * not a constant (KN_VALUE_VARYING_SHAPE). */
static bool varying(const kn_value *v) { return v && (v->flags & KN_VALUE_VARYING_SHAPE); }

static bool is_float(kn_dtype dt) { return dt == KN_F32 || dt == KN_F64 || dt == KN_F16 || dt == KN_BF16; }

double kn_pm_get_f(const kn_tensor *t, int64_t i) { return kn_load_f64(t->dtype, t->data, (size_t)i); }

bool kn_pm_const_uniform(const kn_value *v, double *out)
{
    if (varying(v)) return false;
    const kn_tensor *t = v ? v->const_data : NULL;
    if (!t || !is_float(t->dtype)) return false;
    int64_t n = kn_tensor_numel(t);
    if (n < 1 || !t->data) return false;
    double x = kn_pm_get_f(t, 0);
    for (int64_t i = 1; i < n; i++)
        if (kn_pm_get_f(t, i) != x) return false;
    *out = x;
    return true;
}

bool kn_pm_bn_affine(const kn_node *bn, int64_t channels, double *a, double *b, const char **why)
{
    for (int i = 1; i < 5; i++) {
        const kn_value *v = kn_node_input(bn, i);
        if (!v || !v->const_data || varying(v) || !(v->dtype == KN_F32 || v->dtype == KN_F64))
            return *why = "its parameters are not float constants", false;
        if (kn_tensor_numel(v->const_data) != channels) return *why = "its parameters do not have one value per channel", false;
    }
    double eps = kn_attr_float(bn, "epsilon", 1e-5f);
    const kn_tensor *sc = bn->inputs[1]->const_data, *be = bn->inputs[2]->const_data;
    const kn_tensor *mu = bn->inputs[3]->const_data, *var = bn->inputs[4]->const_data;
    for (int64_t c = 0; c < channels; c++) {
        a[c] = kn_pm_get_f(sc, c) / sqrt(kn_pm_get_f(var, c) + eps);
        b[c] = kn_pm_get_f(be, c) - kn_pm_get_f(mu, c) * a[c];
    }
    return true;
}

bool kn_pm_const_splat(const kn_value *v, double x)
{
    double got;
    return kn_pm_const_uniform(v, &got) && got == x;
}

bool kn_pm_const_scalar(const kn_value *v, double *out)
{
    if (varying(v)) return false;
    const kn_tensor *t = v ? v->const_data : NULL;
    if (!t || !is_float(t->dtype) || kn_tensor_numel(t) < 1 || !t->data) return false;
    *out = kn_pm_get_f(t, 0);
    return true;
}

int kn_pm_const_ints(const kn_value *v, int64_t *out, int max)
{
    if (!v || !v->const_data || varying(v)) return -1;
    int n = kn_tensor_read_ints(v->const_data, out, max);
    if (n < 0) kn_error_clear();
    return n;
}

bool kn_pm_same_type(const kn_value *a, const kn_value *b)
{
    if (a->dtype != b->dtype || a->shape.rank != b->shape.rank || a->shape.rank < 0) return false;
    for (int d = 0; d < a->shape.rank; d++) {
        if (a->shape.dims[d] != b->shape.dims[d]) return false;
        if (a->shape.dims[d] < 0 && (!a->shape.sym[d] || !b->shape.sym[d] || strcmp(a->shape.sym[d], b->shape.sym[d])))
            return false;
    }
    return true;
}

bool kn_pm_replace(kn_value *from, kn_value *to)
{
    if (from == to) return false;
    if (from->flags & KN_VALUE_GRAPH_OUTPUT) {
        /* the output keeps its name: `to` must be a plain node output of the same graph */
        if (!to->producer || to->graph != from->graph || (to->flags & (KN_VALUE_GRAPH_OUTPUT | KN_VALUE_GRAPH_INPUT)))
            return false;
        kn_value_swap_names(from, to);
    }
    kn_value_replace_uses(from, to);
    from->flags &= ~(unsigned)KN_VALUE_GRAPH_OUTPUT;
    return true;
}

const char *kn_pm_free_node_name(const kn_graph *g, const char *name)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i]->name, name)) return NULL;
    return name;
}

kn_value *kn_pm_const_new(kn_graph *g, const char *name, kn_dtype dt, int rank, const int64_t *dims,
                          kn_tensor **out_t)
{
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t || kn_tensor_alloc(t, dt, rank, dims)) {
        free(t);
        kn_error(KN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *out_t = t;
    return kn_graph_add_constant(g, name && kn_graph_lookup(g, name) ? NULL : name, t);
}

kn_value *kn_pm_const_f(kn_graph *g, const char *name, kn_dtype dt, int rank, const int64_t *dims, const double *data)
{
    if (dt != KN_F32 && dt != KN_F64) {
        kn_error(KN_ERR_UNSUPPORTED, "constant '%s': only f32/f64 constants are created by passes", name ? name : "");
        return NULL;
    }
    kn_tensor *t;
    kn_value *v = kn_pm_const_new(g, name, dt, rank, dims, &t);
    if (!v) return NULL;
    int64_t n = kn_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (dt == KN_F32) ((float *)t->data)[i] = (float)data[i];
        else ((double *)t->data)[i] = data[i];
    }
    return v;
}

kn_value *kn_pm_const_i64(kn_graph *g, const char *name, int n, const int64_t *vals)
{
    kn_tensor *t;
    int64_t dims[1] = {n};
    kn_value *v = kn_pm_const_new(g, name, KN_I64, 1, dims, &t);
    if (v && n) memcpy(t->data, vals, sizeof *vals * (size_t)n);
    return v;
}

static kn_attr *new_attr(kn_node *n, const char *name, kn_attr_kind kind)
{
    return kn_node_attr(n, name) ? NULL : kn_node_add_attr(n, name, kind);
}

bool kn_pm_set_int(kn_node *n, const char *name, int64_t v)
{
    kn_attr *a = new_attr(n, name, KN_ATTR_INT);
    if (a) a->i = v;
    return a != NULL;
}

bool kn_pm_set_float(kn_node *n, const char *name, float v)
{
    kn_attr *a = new_attr(n, name, KN_ATTR_FLOAT);
    if (a) a->f = v;
    return a != NULL;
}

bool kn_pm_set_string(kn_node *n, const char *name, const char *s)
{
    kn_attr *a = new_attr(n, name, KN_ATTR_STRING);
    if (!a) return false;
    a->s = kn_arena_strdup(&n->graph->model->arena, s);
    a->s_len = strlen(s);
    return a->s != NULL;
}

bool kn_pm_set_ints(kn_node *n, const char *name, int count, const int64_t *v)
{
    kn_attr *a = new_attr(n, name, KN_ATTR_INTS);
    if (!a) return false;
    a->n = count;
    a->ints = kn_arena_memdup(&n->graph->model->arena, v, sizeof *v * (size_t)(count ? count : 1));
    return a->ints != NULL;
}

int kn_pm_perm(const kn_node *t, int rank, int64_t *perm)
{
    const int64_t *p;
    int n = kn_attr_ints(t, "perm", &p);
    if (n == 0) { /* the default reverses the axes */
        for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
        return rank;
    }
    if (n != rank) return -1;
    memcpy(perm, p, sizeof *p * (size_t)n);
    return n;
}
