/* Models, graphs, values, nodes and attributes (see ir.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* ---- name → value map: open addressing, arena-backed -------------------- */

struct kn_value_map {
    kn_value **slots;
    int cap, count;
};

static uint64_t hash_str(const char *s)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int map_grow(kn_arena *a, kn_value_map *m)
{
    int cap = m->cap ? m->cap * 2 : 64;
    kn_value **slots = kn_arena_alloc(a, sizeof(kn_value *) * (size_t)cap);
    if (!slots) return KN_ERR_NOMEM;
    for (int i = 0; i < m->cap; i++) {
        kn_value *v = m->slots[i];
        if (!v) continue;
        uint64_t h = hash_str(v->name) & (uint64_t)(cap - 1);
        while (slots[h]) h = (h + 1) & (uint64_t)(cap - 1);
        slots[h] = v;
    }
    m->slots = slots;
    m->cap = cap;
    return KN_OK;
}

static kn_value *map_get(const kn_value_map *m, const char *name)
{
    if (!m || !m->cap) return NULL;
    uint64_t h = hash_str(name) & (uint64_t)(m->cap - 1);
    while (m->slots[h]) {
        if (strcmp(m->slots[h]->name, name) == 0) return m->slots[h];
        h = (h + 1) & (uint64_t)(m->cap - 1);
    }
    return NULL;
}

static int map_put(kn_arena *a, kn_value_map *m, kn_value *v)
{
    if ((m->count + 1) * 2 > m->cap && map_grow(a, m)) return KN_ERR_NOMEM;
    uint64_t h = hash_str(v->name) & (uint64_t)(m->cap - 1);
    while (m->slots[h]) h = (h + 1) & (uint64_t)(m->cap - 1);
    m->slots[h] = v;
    m->count++;
    return KN_OK;
}

/* Grows an arena array of pointers-sized elements; old storage is abandoned
 * to the arena (cheap, and the arena dies with the model). */
static int grow(kn_arena *a, void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return KN_OK;
    int ncap = *cap ? *cap * 2 : 8;
    while (ncap < need) ncap *= 2;
    void *p = kn_arena_alloc(a, elem * (size_t)ncap);
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory growing IR array");
    if (*arr && *cap) memcpy(p, *arr, elem * (size_t)*cap);
    *arr = p;
    *cap = ncap;
    return KN_OK;
}

/* ---- shapes ------------------------------------------------------------- */

bool kn_shape_is_static(const kn_shape *s)
{
    if (s->rank < 0) return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] < 0) return false;
    return true;
}

bool kn_shape_same(const kn_shape *a, const kn_shape *b)
{
    if (a->rank < 0 || a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i]) return false;
        if (a->dims[i] < 0 && (!a->sym[i] || !b->sym[i] || strcmp(a->sym[i], b->sym[i]))) return false;
    }
    return true;
}

void kn_shape_set(kn_shape *s, int rank, const int64_t *dims)
{
    memset(s, 0, sizeof *s);
    s->rank = rank;
    for (int i = 0; i < rank && i < KN_MAX_RANK; i++) s->dims[i] = dims[i];
}

kn_shape kn_shape_unknown(void)
{
    kn_shape s;
    memset(&s, 0, sizeof s);
    s.rank = -1;
    return s;
}

/* ---- models ------------------------------------------------------------- */

static kn_graph *graph_new(kn_model *m, kn_graph *parent, const char *name)
{
    kn_graph *g = kn_arena_alloc(&m->arena, sizeof *g);
    if (!g) return NULL;
    g->model = m;
    g->parent = parent;
    g->name = kn_arena_strdup(&m->arena, name ? name : "");
    g->map = kn_arena_alloc(&m->arena, sizeof *g->map);
    if (!g->map || !g->name) return NULL;
    return g;
}

kn_model *kn_model_create(void)
{
    kn_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->graph = graph_new(m, NULL, "main");
    if (!m->graph) {
        kn_arena_release(&m->arena);
        free(m);
        return NULL;
    }
    return m;
}

void kn_model_free(kn_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_consts; i++) {
        kn_tensor_free(m->consts[i]);
        free(m->consts[i]);
    }
    free(m->consts);
    kn_arena_release(&m->arena);
    free(m);
}

static bool is_default_domain(const char *d) { return !d || !*d || strcmp(d, "ai.onnx") == 0; }

static bool same_domain(const char *a, const char *b)
{
    if (is_default_domain(a) || is_default_domain(b)) return is_default_domain(a) && is_default_domain(b);
    return strcmp(a, b) == 0;
}

int64_t kn_model_opset(const kn_model *m, const char *domain)
{
    for (int i = 0; i < m->n_opsets; i++)
        if (same_domain(m->opsets[i].domain, domain)) return m->opsets[i].version;
    return 0;
}

int kn_model_set_opset(kn_model *m, const char *domain, int64_t version)
{
    for (int i = 0; i < m->n_opsets; i++)
        if (same_domain(m->opsets[i].domain, domain)) {
            m->opsets[i].version = version;
            return KN_OK;
        }
    kn_opset *o = kn_arena_alloc(&m->arena, sizeof *o * (size_t)(m->n_opsets + 1));
    if (!o) return kn_error(KN_ERR_NOMEM, "out of memory");
    if (m->n_opsets) memcpy(o, m->opsets, sizeof *o * (size_t)m->n_opsets);
    o[m->n_opsets].domain = kn_arena_strdup(&m->arena, is_default_domain(domain) ? "" : domain);
    o[m->n_opsets].version = version;
    m->opsets = o;
    m->n_opsets++;
    return KN_OK;
}

kn_tensor *kn_model_adopt_tensor(kn_model *m, kn_tensor *t)
{
    if (m->n_consts == m->cap_consts) {
        int cap = m->cap_consts ? m->cap_consts * 2 : 16;
        kn_tensor **p = realloc(m->consts, sizeof *p * (size_t)cap);
        if (!p) {
            kn_tensor_free(t);
            free(t);
            kn_error(KN_ERR_NOMEM, "out of memory");
            return NULL;
        }
        m->consts = p;
        m->cap_consts = cap;
    }
    m->consts[m->n_consts++] = t;
    return t;
}

/* ---- graphs and values -------------------------------------------------- */

kn_graph *kn_graph_create_sub(kn_graph *parent, const char *name)
{
    kn_graph *g = graph_new(parent->model, parent, name);
    if (!g) kn_error(KN_ERR_NOMEM, "out of memory");
    return g;
}

kn_value *kn_graph_lookup_local(const kn_graph *g, const char *name)
{
    return map_get(g->map, name);
}

kn_value *kn_graph_lookup(const kn_graph *g, const char *name)
{
    for (; g; g = g->parent) {
        kn_value *v = map_get(g->map, name);
        if (v) return v;
    }
    return NULL;
}

kn_value *kn_graph_new_value(kn_graph *g, const char *name, kn_dtype dt, const kn_shape *shape)
{
    kn_model *m = g->model;
    char buf[48];
    if (!name || !*name) {
        /* generated names cannot clash with ONNX ones that avoid the prefix */
        do snprintf(buf, sizeof buf, "_v%d", m->n_value_ids++);
        while (kn_graph_lookup(g, buf));
        name = buf;
    } else if (map_get(g->map, name)) {
        kn_error(KN_ERR_INVALID, "value '%s' is defined more than once in graph '%s'", name, g->name);
        return NULL;
    }
    kn_value *v = kn_arena_alloc(&m->arena, sizeof *v);
    if (!v) goto oom;
    v->name = kn_arena_strdup(&m->arena, name);
    if (!v->name) goto oom;
    v->id = m->n_value_ids++;
    v->graph = g;
    v->dtype = dt;
    v->shape = shape ? *shape : kn_shape_unknown();
    if (grow(&m->arena, (void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(kn_value *)))
        return NULL;
    if (map_put(&m->arena, g->map, v)) goto oom;
    g->values[g->n_values++] = v;
    return v;
oom:
    kn_error(KN_ERR_NOMEM, "out of memory");
    return NULL;
}

kn_value *kn_graph_add_input(kn_graph *g, const char *name, kn_dtype dt, const kn_shape *shape)
{
    kn_value *v = kn_graph_new_value(g, name, dt, shape);
    if (!v) return NULL;
    if (grow(&g->model->arena, (void **)&g->inputs, &g->cap_inputs, g->n_inputs + 1, sizeof(kn_value *)))
        return NULL;
    v->flags |= KN_VALUE_GRAPH_INPUT;
    g->inputs[g->n_inputs++] = v;
    return v;
}

kn_value *kn_graph_add_constant(kn_graph *g, const char *name, kn_tensor *t)
{
    if (!kn_model_adopt_tensor(g->model, t)) return NULL;
    kn_shape s;
    kn_shape_set(&s, t->rank, t->dims);
    kn_value *v = kn_graph_new_value(g, name, t->dtype, &s);
    if (!v) return NULL;
    v->const_data = t;
    return v;
}

int kn_graph_add_output(kn_graph *g, kn_value *v)
{
    int st = grow(&g->model->arena, (void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1,
                  sizeof(kn_value *));
    if (st) return st;
    v->flags |= KN_VALUE_GRAPH_OUTPUT;
    g->outputs[g->n_outputs++] = v;
    return KN_OK;
}

static int add_use(kn_arena *a, kn_value *v, kn_node *n, int i)
{
    int st = grow(a, (void **)&v->users, &v->cap_users, v->n_users + 1, sizeof(kn_use));
    if (st) return st;
    v->users[v->n_users].node = n;
    v->users[v->n_users].index = i;
    v->n_users++;
    return KN_OK;
}

static void remove_use(kn_value *v, kn_node *n, int i)
{
    for (int k = 0; k < v->n_users; k++)
        if (v->users[k].node == n && v->users[k].index == i) {
            v->users[k] = v->users[--v->n_users];
            return;
        }
}

/* ---- nodes -------------------------------------------------------------- */

static kn_node *node_alloc(kn_graph *g, const char *op_type, const char *domain, kn_op op,
                           const char *name, int n_inputs, kn_value *const *inputs, int n_outputs)
{
    kn_model *m = g->model;
    kn_arena *a = &m->arena;
    kn_node *n = kn_arena_alloc(a, sizeof *n);
    if (!n) goto oom;
    char buf[64];
    if (!name || !*name) {
        snprintf(buf, sizeof buf, "%s_%d", op_type, m->n_node_ids);
        name = buf;
    }
    n->name = kn_arena_strdup(a, name);
    n->op_type = kn_arena_strdup(a, op_type);
    n->domain = kn_arena_strdup(a, is_default_domain(domain) ? "" : domain);
    n->op = op;
    n->id = m->n_node_ids++;
    n->graph = g;
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    n->inputs = kn_arena_alloc(a, sizeof(kn_value *) * (size_t)(n_inputs + 1));
    n->outputs = kn_arena_alloc(a, sizeof(kn_value *) * (size_t)(n_outputs + 1));
    if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs) goto oom;
    for (int i = 0; i < n_inputs; i++) {
        n->inputs[i] = inputs ? inputs[i] : NULL;
        if (n->inputs[i] && add_use(a, n->inputs[i], n, i)) return NULL;
    }
    if (grow(a, (void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(kn_node *))) return NULL;
    g->nodes[g->n_nodes++] = n;
    return n;
oom:
    kn_error(KN_ERR_NOMEM, "out of memory");
    return NULL;
}

kn_node *kn_node_create(kn_graph *g, kn_op op, const char *name, int n_inputs,
                        kn_value *const *inputs, int n_outputs)
{
    const kn_op_info *oi = kn_op_get(op);
    kn_node *n = node_alloc(g, oi->name, oi->domain, op, name, n_inputs, inputs, n_outputs);
    if (!n) return NULL;
    for (int i = 0; i < n_outputs; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s:%d", n->name, i);
        n->outputs[i] = kn_graph_new_value(g, kn_graph_lookup(g, buf) ? NULL : buf, KN_DT_UNDEFINED, NULL);
        if (!n->outputs[i]) return NULL;
        n->outputs[i]->producer = n;
        n->outputs[i]->producer_index = i;
    }
    return n;
}

kn_node *kn_node_create_named(kn_graph *g, const char *op_type, const char *domain,
                              const char *name, int n_inputs, kn_value *const *inputs,
                              int n_outputs, const char *const *output_names)
{
    const kn_op_info *oi = kn_op_lookup(op_type, domain);
    kn_node *n = node_alloc(g, op_type, domain, oi ? oi->op : KN_OP_UNKNOWN, name, n_inputs,
                            inputs, n_outputs);
    if (!n) return NULL;
    for (int i = 0; i < n_outputs; i++) {
        if (!output_names || !output_names[i] || !*output_names[i]) continue;
        kn_value *v = kn_graph_new_value(g, output_names[i], KN_DT_UNDEFINED, NULL);
        if (!v) {
            kn_error_prefix("node '%s' (%s): ", n->name, n->op_type);
            return NULL;
        }
        v->producer = n;
        v->producer_index = i;
        n->outputs[i] = v;
    }
    return n;
}

void kn_node_set_input(kn_node *n, int i, kn_value *v)
{
    if (n->inputs[i]) remove_use(n->inputs[i], n, i);
    n->inputs[i] = v;
    if (v) add_use(&n->graph->model->arena, v, n, i);
}

bool kn_node_outputs_known(const kn_node *n)
{
    bool any = false;
    for (int k = 0; k < n->n_outputs; k++) {
        if (!n->outputs[k]) continue;
        if (!n->outputs[k]->const_data) return false;
        any = true;
    }
    return any;
}

/* Forgets the uses n makes of its inputs, and those the nodes of its
 * subgraphs (which go with it) make, of outer values too (ONNX outer-scope
 * references): no value may keep a removed node as a user. */
static void forget_uses(kn_node *n)
{
    for (int i = 0; i < n->n_inputs; i++)
        if (n->inputs[i]) remove_use(n->inputs[i], n, i);
    for (int a = 0; a < n->n_attrs; a++) {
        const kn_attr *at = &n->attrs[a];
        for (int j = 0; at->kind == KN_ATTR_GRAPH && at->g && j < at->g->n_nodes; j++) forget_uses(at->g->nodes[j]);
        for (int k = 0; at->kind == KN_ATTR_GRAPHS && k < at->n; k++)
            for (int j = 0; at->graphs[k] && j < at->graphs[k]->n_nodes; j++) forget_uses(at->graphs[k]->nodes[j]);
    }
}

void kn_node_remove(kn_node *n)
{
    forget_uses(n);
    kn_graph *g = n->graph;
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k] == n) {
            memmove(&g->nodes[k], &g->nodes[k + 1], sizeof(kn_node *) * (size_t)(g->n_nodes - k - 1));
            g->n_nodes--;
            break;
        }
}

void kn_value_replace_uses(kn_value *from, kn_value *to)
{
    while (from->n_users > 0) {
        kn_use u = from->users[from->n_users - 1];
        kn_node_set_input(u.node, u.index, to);
    }
    kn_graph *g = from->graph;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] == from) {
            g->outputs[i] = to;
            to->flags |= KN_VALUE_GRAPH_OUTPUT;
        }
}

static kn_value **map_slot(kn_value_map *m, const kn_value *v)
{
    uint64_t h = hash_str(v->name) & (uint64_t)(m->cap - 1);
    while (m->slots[h] && m->slots[h] != v) h = (h + 1) & (uint64_t)(m->cap - 1);
    return &m->slots[h];
}

void kn_value_swap_names(kn_value *a, kn_value *b)
{
    /* Each value's slot sits on its name's probe chain; swapping the slots
     * along with the names keeps every chain intact. */
    kn_value **sa = map_slot(a->graph->map, a), **sb = map_slot(b->graph->map, b);
    *sa = b;
    *sb = a;
    const char *t = a->name;
    a->name = b->name;
    b->name = t;
}

static bool value_live(const kn_value *v, const unsigned char *produced)
{
    if (v->n_users > 0 || (v->flags & (KN_VALUE_GRAPH_INPUT | KN_VALUE_GRAPH_OUTPUT))) return true;
    return v->producer ? produced[v->id] : false;
}

int kn_graph_compact_values(kn_graph *g)
{
    kn_model *m = g->model;
    unsigned char *produced = calloc((size_t)m->n_value_ids + 1, 1);
    if (!produced) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i]->n_outputs; k++)
            if (g->nodes[i]->outputs[k]) produced[g->nodes[i]->outputs[k]->id] = 1;
    int kept = 0;
    for (int i = 0; i < g->n_values; i++)
        if (value_live(g->values[i], produced)) g->values[kept++] = g->values[i];
    free(produced);
    if (kept == g->n_values) return KN_OK;
    g->n_values = kept;
    /* rebuild the name map from what is left (open addressing has no delete) */
    kn_value_map fresh = {0};
    for (int i = 0; i < g->n_values; i++)
        if (map_put(&m->arena, &fresh, g->values[i])) return kn_error(KN_ERR_NOMEM, "out of memory");
    *g->map = fresh;
    return KN_OK;
}

/* ---- attributes --------------------------------------------------------- */

kn_attr *kn_node_add_attr(kn_node *n, const char *name, kn_attr_kind kind)
{
    kn_arena *a = &n->graph->model->arena;
    if (kn_node_attr(n, name)) {
        kn_node_error(n, KN_ERR_INVALID, "attribute '%s' given more than once", name);
        return NULL;
    }
    kn_attr *attrs = kn_arena_alloc(a, sizeof *attrs * (size_t)(n->n_attrs + 1));
    if (!attrs) {
        kn_error(KN_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (n->n_attrs) memcpy(attrs, n->attrs, sizeof *attrs * (size_t)n->n_attrs);
    kn_attr *at = &attrs[n->n_attrs];
    at->name = kn_arena_strdup(a, name);
    at->kind = kind;
    n->attrs = attrs;
    n->n_attrs++;
    return at;
}

const kn_attr *kn_node_attr(const kn_node *n, const char *name)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

int64_t kn_attr_int(const kn_node *n, const char *name, int64_t def)
{
    const kn_attr *a = kn_node_attr(n, name);
    if (!a) return def;
    if (a->kind == KN_ATTR_FLOAT) {
        /* some old exporters write integral attributes as floats; a NaN or
         * out-of-range float in a bad model must not be a UB cast */
        if (!(a->f > -9.2e18f && a->f < 9.2e18f)) return def;
        return (int64_t)a->f;
    }
    return a->kind == KN_ATTR_INT ? a->i : def;
}

float kn_attr_float(const kn_node *n, const char *name, float def)
{
    const kn_attr *a = kn_node_attr(n, name);
    if (!a) return def;
    if (a->kind == KN_ATTR_INT) return (float)a->i;
    return a->kind == KN_ATTR_FLOAT ? a->f : def;
}

const char *kn_attr_string(const kn_node *n, const char *name, const char *def)
{
    const kn_attr *a = kn_node_attr(n, name);
    return a && a->kind == KN_ATTR_STRING ? a->s : def;
}

int kn_attr_ints(const kn_node *n, const char *name, const int64_t **out_ints)
{
    const kn_attr *a = kn_node_attr(n, name);
    *out_ints = NULL;
    if (!a || a->kind != KN_ATTR_INTS) return 0;
    *out_ints = a->ints;
    return a->n;
}

int kn_attr_floats(const kn_node *n, const char *name, const float **out_floats)
{
    const kn_attr *a = kn_node_attr(n, name);
    *out_floats = NULL;
    if (!a || a->kind != KN_ATTR_FLOATS) return 0;
    *out_floats = a->floats;
    return a->n;
}

int64_t kn_node_opset(const kn_node *n) { return kn_model_opset(n->graph->model, n->domain); }

int kn_node_error(const kn_node *n, int code, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kn_error(code, "node '%s' (%s): %s", n->name, n->op_type, msg);
}

/* ---- topological order -------------------------------------------------- */

/* Values a node needs before it can run: its inputs, plus outer-scope values
 * used anywhere inside its subgraphs (so If/Loop bodies see them computed). */
static int deps_of(const kn_node *n, const kn_graph *g, kn_value ***out, int *count, int *cap);

static int push_dep(kn_arena *a, kn_value *v, const kn_graph *g, kn_value ***out, int *count, int *cap)
{
    if (!v || v->graph != g) return KN_OK;
    if (grow(a, (void **)out, cap, *count + 1, sizeof(kn_value *))) return KN_ERR_NOMEM;
    (*out)[(*count)++] = v;
    return KN_OK;
}

static int sub_deps(const kn_graph *sub, const kn_graph *g, kn_value ***out, int *count, int *cap)
{
    for (int k = 0; k < sub->n_nodes; k++) {
        int st = deps_of(sub->nodes[k], g, out, count, cap);
        if (st) return st;
    }
    for (int k = 0; k < sub->n_outputs; k++)
        if (push_dep(&g->model->arena, sub->outputs[k], g, out, count, cap)) return KN_ERR_NOMEM;
    return KN_OK;
}

static int deps_of(const kn_node *n, const kn_graph *g, kn_value ***out, int *count, int *cap)
{
    kn_arena *a = &g->model->arena;
    for (int i = 0; i < n->n_inputs; i++)
        if (push_dep(a, n->inputs[i], g, out, count, cap)) return KN_ERR_NOMEM;
    for (int i = 0; i < n->n_attrs; i++) {
        const kn_attr *at = &n->attrs[i];
        if (at->kind == KN_ATTR_GRAPH && at->g) {
            int st = sub_deps(at->g, g, out, count, cap);
            if (st) return st;
        }
        for (int k = 0; at->kind == KN_ATTR_GRAPHS && k < at->n; k++) {
            int st = sub_deps(at->graphs[k], g, out, count, cap);
            if (st) return st;
        }
    }
    return KN_OK;
}

int kn_graph_toposort(kn_graph *g)
{
    int n = g->n_nodes;
    if (n == 0) return KN_OK;
    kn_arena *a = &g->model->arena;
    /* state per node (indexed by position): 0 = pending, 1 = placed */
    char *placed = calloc((size_t)n, 1);
    kn_node **order = calloc((size_t)n, sizeof *order);
    char *ready_val = NULL; /* per value id: produced already */
    int nids = g->model->n_value_ids;
    ready_val = calloc((size_t)nids, 1);
    if (!placed || !order || !ready_val) {
        free(placed), free(order), free(ready_val);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    kn_value **deps = NULL;
    int ndeps = 0, capdeps = 0;
    int done = 0;
    /* Repeated sweeps keep file order when it is already valid (the usual
     * case) and are fine for the graph sizes seen by the reference path. */
    bool progress = true;
    while (done < n && progress) {
        progress = false;
        for (int k = 0; k < n; k++) {
            if (placed[k]) continue;
            kn_node *node = g->nodes[k];
            ndeps = 0;
            if (deps_of(node, g, &deps, &ndeps, &capdeps)) {
                free(placed), free(order), free(ready_val);
                return kn_error(KN_ERR_NOMEM, "out of memory");
            }
            bool ok = true;
            for (int d = 0; d < ndeps && ok; d++)
                if (deps[d]->producer && !ready_val[deps[d]->id]) ok = false;
            if (!ok) continue;
            placed[k] = 1;
            order[done++] = node;
            for (int o = 0; o < node->n_outputs; o++)
                if (node->outputs[o]) ready_val[node->outputs[o]->id] = 1;
            progress = true;
        }
    }
    int st = KN_OK;
    if (done < n) {
        for (int k = 0; k < n; k++)
            if (!placed[k]) {
                st = kn_node_error(g->nodes[k], KN_ERR_INVALID,
                                   "is on a cycle or uses a value that is never computed");
                break;
            }
    } else {
        memcpy(g->nodes, order, sizeof *order * (size_t)n);
    }
    (void)a;
    free(placed);
    free(order);
    free(ready_val);
    return st;
}

/* ---- captures of a control-flow node ------------------------------------------ */

typedef struct value_set {
    kn_value **v;
    int n, cap;
} value_set;

static int set_add(value_set *s, kn_value *v)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == v) return KN_OK;
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        kn_value **p = realloc(s->v, sizeof *p * (size_t)cap);
        if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
        s->v = p;
        s->cap = cap;
    }
    s->v[s->n++] = v;
    return KN_OK;
}

static int collect_graph(const kn_graph *sub, const kn_graph *g, value_set *s);

/* Values of g read by the subgraphs of node n (itself anywhere below g). */
static int collect_node(const kn_node *n, const kn_graph *g, value_set *s)
{
    int st = KN_OK;
    for (int a = 0; a < n->n_attrs && !st; a++) {
        const kn_attr *at = &n->attrs[a];
        if (at->kind == KN_ATTR_GRAPH && at->g) st = collect_graph(at->g, g, s);
        for (int k = 0; at->kind == KN_ATTR_GRAPHS && k < at->n && !st; k++) st = collect_graph(at->graphs[k], g, s);
    }
    return st;
}

static int collect_graph(const kn_graph *sub, const kn_graph *g, value_set *s)
{
    int st = KN_OK;
    for (int k = 0; k < sub->n_nodes && !st; k++) {
        const kn_node *n = sub->nodes[k];
        for (int i = 0; i < n->n_inputs && !st; i++)
            if (n->inputs[i] && n->inputs[i]->graph == g) st = set_add(s, n->inputs[i]);
        if (!st) st = collect_node(n, g, s);
    }
    for (int i = 0; i < sub->n_outputs && !st; i++)
        if (sub->outputs[i]->graph == g) st = set_add(s, sub->outputs[i]);
    return st;
}

int kn_node_captures(const kn_node *n, kn_value ***out_vals, int *out_n)
{
    *out_vals = NULL;
    *out_n = 0;
    value_set s = {0};
    int st = collect_node(n, n->graph, &s);
    if (st) {
        free(s.v);
        return st;
    }
    *out_vals = s.v;
    *out_n = s.n;
    return KN_OK;
}
