/*
 * frontend/onnx/onnx_check.c — checks around the import proper:
 *   - kn_onnx_check_nesting: a pre-scan of the protobuf wire data that bounds
 *     message nesting before protobuf-c (which recurses) unpacks it;
 *   - kn_onnx_check_supported: one message listing every op kiln does not
 *     declare, so `kiln inspect` can show such a model and `kiln run` refuse it.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_import.h"
#include "onnx_internal.h"

/* ---- nesting pre-scan --------------------------------------------------- */

/* Far above real models (a graph level costs 3: graph → node → attribute),
 * far below what would exhaust the stack in protobuf-c's recursive unpack. */
#define MAX_MSG_DEPTH 200

typedef enum msg_kind {
    M_LEAF, M_MODEL, M_TRAINING, M_FUNCTION, M_GRAPH, M_NODE, M_ATTR, M_VALUEINFO,
    M_TYPE, M_TYPE_SEQ, M_TYPE_MAP, M_TYPE_OPT
} msg_kind;

/* The only message fields through which ONNX messages can nest deeply
 * (graphs inside attributes, types inside sequence/map/optional types). */
static msg_kind child_kind(msg_kind k, unsigned field)
{
    switch (k) {
    case M_MODEL: return field == 7 ? M_GRAPH : field == 20 ? M_TRAINING : field == 25 ? M_FUNCTION : M_LEAF;
    case M_TRAINING: return field == 1 || field == 2 ? M_GRAPH : M_LEAF;
    case M_FUNCTION: return field == 7 ? M_NODE : M_LEAF;
    case M_GRAPH: return field == 1 ? M_NODE : (field >= 11 && field <= 13) ? M_VALUEINFO : M_LEAF;
    case M_NODE: return field == 5 ? M_ATTR : M_LEAF;
    case M_ATTR: return field == 6 || field == 11 ? M_GRAPH : field == 14 || field == 15 ? M_TYPE : M_LEAF;
    case M_VALUEINFO: return field == 2 ? M_TYPE : M_LEAF;
    case M_TYPE: return field == 4 ? M_TYPE_SEQ : field == 5 ? M_TYPE_MAP : field == 9 ? M_TYPE_OPT : M_LEAF;
    case M_TYPE_SEQ: return field == 1 ? M_TYPE : M_LEAF;
    case M_TYPE_MAP: return field == 2 ? M_TYPE : M_LEAF;
    case M_TYPE_OPT: return field == 1 ? M_TYPE : M_LEAF;
    default: return M_LEAF;
    }
}

static bool varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= len) return false;
        uint8_t b = p[(*pos)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Returns false only when nesting is too deep; malformed wire data is left
 * for protobuf-c to reject with its own (clearer) failure. */
static bool scan(const uint8_t *p, size_t len, msg_kind k, int depth)
{
    if (depth > MAX_MSG_DEPTH) return false;
    size_t pos = 0;
    while (pos < len) {
        uint64_t key, v;
        if (!varint(p, len, &pos, &key)) return true;
        unsigned wt = key & 7;
        if (wt == 0) {
            if (!varint(p, len, &pos, &v)) return true;
        } else if (wt == 1 || wt == 5) {
            size_t w = wt == 1 ? 8 : 4;
            if (len - pos < w) return true;
            pos += w;
        } else if (wt == 2) {
            if (!varint(p, len, &pos, &v) || v > len - pos) return true;
            msg_kind ck = child_kind(k, (unsigned)(key >> 3));
            if (ck != M_LEAF && !scan(p + pos, (size_t)v, ck, depth + 1)) return false;
            pos += (size_t)v;
        } else {
            return true; /* groups and junk: protobuf-c decides */
        }
    }
    return true;
}

int kn_onnx_check_nesting(const uint8_t *data, size_t len)
{
    if (!scan(data, len, M_MODEL, 0))
        return kn_error(KN_ERR_UNSUPPORTED, "graphs or types are nested more than %d messages deep", MAX_MSG_DEPTH);
    return KN_OK;
}

/* ---- unsupported ops ---------------------------------------------------- */

typedef struct op_group {
    const char *op_type, *domain;
    const kn_node **nodes;
    int n, cap;
} op_group;

typedef struct op_groups {
    op_group *g;
    int n, cap;
    int n_nodes;
    bool oom;
} op_groups;

static void add_unsupported(op_groups *gs, const kn_node *node)
{
    int k = 0;
    while (k < gs->n && !(strcmp(gs->g[k].op_type, node->op_type) == 0 && strcmp(gs->g[k].domain, node->domain) == 0))
        k++;
    if (k == gs->n) {
        if (gs->n == gs->cap) {
            int cap = gs->cap ? gs->cap * 2 : 8;
            op_group *p = realloc(gs->g, sizeof *p * (size_t)cap);
            if (!p) {
                gs->oom = true;
                return;
            }
            gs->g = p;
            gs->cap = cap;
        }
        gs->g[gs->n++] = (op_group){.op_type = node->op_type, .domain = node->domain};
    }
    op_group *grp = &gs->g[k];
    if (grp->n == grp->cap) {
        int cap = grp->cap ? grp->cap * 2 : 4;
        const kn_node **p = realloc(grp->nodes, sizeof *p * (size_t)cap);
        if (!p) {
            gs->oom = true;
            return;
        }
        grp->nodes = p;
        grp->cap = cap;
    }
    grp->nodes[grp->n++] = node;
    gs->n_nodes++;
}

static void collect(op_groups *gs, const kn_graph *g)
{
    for (int k = 0; k < g->n_nodes; k++) {
        const kn_node *n = g->nodes[k];
        if (!kn_op_lookup(n->op_type, n->domain)) add_unsupported(gs, n);
        for (int a = 0; a < n->n_attrs; a++) {
            const kn_attr *at = &n->attrs[a];
            if (at->kind == KN_ATTR_GRAPH && at->g) collect(gs, at->g);
            for (int i = 0; at->kind == KN_ATTR_GRAPHS && i < at->n; i++) collect(gs, at->graphs[i]);
        }
    }
}

/* Appends printf-style text to buf (len bytes), keeping it NUL-terminated;
 * text past the end is dropped. */
static void append(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

int kn_onnx_check_supported(const kn_model *m)
{
    op_groups gs = {0};
    collect(&gs, m->graph);
    int st = KN_OK;
    if (gs.oom) {
        st = kn_error(KN_ERR_NOMEM, "out of memory");
    } else if (gs.n) {
        /* the message buffer holds 2 KiB: list a few node names per op */
        char msg[1800] = "";
        append(msg, sizeof msg, "%s: %d unsupported op%s (%d node%s): ", m->path ? m->path : "model", gs.n,
               gs.n == 1 ? "" : "s", gs.n_nodes, gs.n_nodes == 1 ? "" : "s");
        for (int k = 0; k < gs.n; k++) {
            const op_group *grp = &gs.g[k];
            append(msg, sizeof msg, "%s%s%s%s (%d node%s: ", k ? ", " : "", grp->domain, *grp->domain ? "." : "",
                   grp->op_type, grp->n, grp->n == 1 ? "" : "s");
            for (int i = 0; i < grp->n && i < 3; i++) append(msg, sizeof msg, "%s'%s'", i ? ", " : "", grp->nodes[i]->name);
            if (grp->n > 3) append(msg, sizeof msg, ", ...");
            append(msg, sizeof msg, ")");
        }
        st = kn_error(KN_ERR_UNSUPPORTED, "%s", msg);
    }
    for (int k = 0; k < gs.n; k++) free(gs.g[k].nodes);
    free(gs.g);
    return st;
}

/* ---- attribute types ---------------------------------------------------- */

const char *kn_onnx_attr_type_name(int type)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",   "INT",           "STRING",         "TENSOR",
                                        "GRAPH",     "FLOATS",  "INTS",          "STRINGS",        "TENSORS",
                                        "GRAPHS",    "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
    return type >= 0 && type < (int)(sizeof names / sizeof names[0]) ? names[type] : "?";
}

static int cmp_rule(const char *op, const char *name, const kn_onnx_attr_rule *r)
{
    int c = strcmp(op, r->op);
    return c ? c : strcmp(name, r->name);
}

/* Index of the first rule for (op, name), or -1 if ONNX has none. */
static int find_rule(const char *op, const char *name)
{
    int lo = 0, hi = kn_onnx_n_attr_rules;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cmp_rule(op, name, &kn_onnx_attr_rules[mid]) > 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < kn_onnx_n_attr_rules && cmp_rule(op, name, &kn_onnx_attr_rules[lo]) == 0 ? lo : -1;
}

static bool rule_covers(const kn_onnx_attr_rule *r, int64_t opset)
{
    return opset >= r->first && (r->last == 0 || opset <= r->last);
}

int kn_onnx_check_node_attrs(const kn_node *n, int64_t opset)
{
    if (n->op == KN_OP_UNKNOWN || *n->domain) return KN_OK; /* unknown ops are reported by kn_onnx_check_supported */
    for (int i = 0; i < n->n_attrs; i++) {
        const kn_attr *a = &n->attrs[i];
        int k = find_rule(n->op_type, a->name);
        /* the rules of one attribute are adjacent: take one whose opsets
         * cover the node's, of the attribute's type if there is one (an
         * attribute changed type once: Cast 'to', LpPool 'p') */
        const kn_onnx_attr_rule *hit = NULL;
        for (int j = k; j >= 0 && j < kn_onnx_n_attr_rules && cmp_rule(n->op_type, a->name, &kn_onnx_attr_rules[j]) == 0;
             j++)
            if (rule_covers(&kn_onnx_attr_rules[j], opset) && (!hit || kn_onnx_attr_rules[j].type == (int)a->kind))
                hit = &kn_onnx_attr_rules[j];
        if (!hit)
            return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' is not defined for %s at opset %lld", a->name,
                                 n->op_type, (long long)opset);
        if (hit->type != (int)a->kind)
            return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' has type %s, expected %s", a->name,
                                 kn_onnx_attr_type_name((int)a->kind), kn_onnx_attr_type_name(hit->type));
    }
    return KN_OK;
}
