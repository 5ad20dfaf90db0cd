/*
 * passes/fuse_elementwise.c — chains (small DAGs) of elementwise ops →
 * one kiln::FusedElementwise (runtime/ops/fused_int.h), which the cpu
 * backend runs as one generated loop: the intermediates are never written
 * to memory. In a transformer this turns the attention's scale and mask
 * (Div, then Add of a broadcast mask) into one pass over the scores.
 *
 *   %s = Div(%x, %c)                 %y = kiln::FusedElementwise(%x, %c, %m)
 *   %y = Add(%s, %m[1,1,1,128])  →       {steps=["Div", "Add"],
 *                                         operands=[0, 1, -1, 2], ...}
 *
 * A group grows from its last node (the root) towards its inputs: the
 * producer of an operand joins when it is an elementwise op the fused op
 * runs (f32; unary ops with their parameters, Add, Sub, Mul, Div, Pow, and
 * Max/Min of two inputs), every reader of its output is in the group, the
 * output is no graph output, and it has as many elements as the root's
 * output: inputs broadcast into the loop, but an intermediate is never
 * recomputed per element of a larger result. At most KN_EW_MAX_STEPS
 * nodes and KN_EW_MAX_INPUTS distinct inputs. Near misses are remarks.
 *
 * Preconditions: an inferred graph in topological order, run after
 * fuse-conv and fuse-matmul (which take activations and bias Adds into
 * their primitives first).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "elementwise_int.h"
#include "eval.h"
#include "fuse_util.h"

/* The nodes of the graph as the pass found them: where each is (by id),
 * and which are in a group already. */
typedef struct ew_nodes {
    kn_node **nodes;
    int count;
    int *pos;        /* [max_id + 1]: index in nodes, -1 for none */
    int max_id;
    bool *taken;
    bool *gone;      /* [count]: merged into a fused node, to be dropped */
} ew_nodes;

/* n's index in the snapshot; -1 for a node made since. */
static int pos_of(const ew_nodes *s, const kn_node *n) { return n->id >= 0 && n->id <= s->max_id ? s->pos[n->id] : -1; }

static bool is_taken(const ew_nodes *s, const kn_node *n)
{
    int i = pos_of(s, n);
    return i < 0 || s->taken[i];
}

/* What one group holds while it grows. */
typedef struct ew_group {
    kn_node *nodes[KN_EW_MAX_STEPS]; /* nodes[0] is the root */
    int n;
    kn_value *inputs[KN_EW_MAX_INPUTS];
    int n_inputs;
} ew_group;

/* The kernel parameters of a unary node; false when it is no step. */
static bool unary_params(const kn_node *n, kn_unary_params *p)
{
    const kn_ew_un *u = kn_ew_un_find(n->op);
    if (!u || !kn_fused_ew_unary_ok(n->op)) return false;
    kn_opdesc d;
    bool has[1];
    kn_node_opdesc(n, &d, has);
    kn_unary_op k;
    if (kn_ew_un_params(&d, u, &k, p) || k != u->k) {
        kn_error_clear();
        return false;
    }
    return true;
}

static bool is_8bit(kn_dtype dt) { return dt == KN_U8 || dt == KN_I8; }

/* The step parameters of a QuantizeLinear/DequantizeLinear per tensor
 * (scale, zero point, ONNX element type of its 8-bit side); false unless
 * both are constant scalars and it converts between f32 and u8/s8. */
static bool qdq_params(const kn_node *n, kn_unary_params *p)
{
    bool quant = n->op == KN_OP_QuantizeLinear;
    if (!quant && n->op != KN_OP_DequantizeLinear) return false;
    const kn_value *x = kn_node_input(n, 0), *s = kn_node_input(n, 1), *z = kn_node_input(n, 2);
    const kn_value *y = n->outputs[0], *q = quant ? y : x, *f = quant ? x : y;
    if (!x || !q || !is_8bit(q->dtype) || f->dtype != KN_F32 || x->shape.rank < 0 || !s || !s->const_data ||
        s->dtype != KN_F32 || kn_tensor_numel(s->const_data) != 1 || kn_attr_int(n, "block_size", 0) != 0)
        return false;
    if (z && (!z->const_data || z->dtype != q->dtype || kn_tensor_numel(z->const_data) != 1)) return false;
    p->alpha = ((const float *)s->const_data->data)[0];
    p->beta = z ? (float)kn_load_i64(z->dtype, z->const_data->data, 0) : 0.0f;
    p->gamma = q->dtype == KN_U8 ? 2.0f : 3.0f; /* the ONNX element type */
    return isfinite(p->alpha) && p->alpha > 0;
}

/* How many of n's inputs a step reads (a QuantizeLinear/DequantizeLinear's
 * scale and zero point are its parameters). */
static int step_arity(const kn_node *n) { kn_binary_op k; return kn_fused_ew_binary(n->op, &k) ? 2 : 1; }

/* True if n may be a step: an elementwise op the fused op runs, on f32
 * values of known shape, or a per-tensor QuantizeLinear/DequantizeLinear
 * between f32 and 8-bit values. */
static bool is_step(const kn_node *n)
{
    if (!n || n->n_outputs != 1 || !n->outputs[0] || n->outputs[0]->shape.rank < 0) return false;
    kn_unary_params qp;
    if (qdq_params(n, &qp)) return true;
    if (n->outputs[0]->dtype != KN_F32) return false;
    kn_binary_op k;
    int want = kn_fused_ew_binary(n->op, &k) ? 2 : 1;
    kn_unary_params p;
    if (want == 1 && !unary_params(n, &p)) return false;
    if (n->n_inputs != want) return false;
    if (want == 2 && kn_node_opset(n) < 7) return false; /* broadcast=1/axis: not numpy's rules */
    for (int i = 0; i < n->n_inputs; i++)
        if (!n->inputs[i] || n->inputs[i]->dtype != KN_F32 || n->inputs[i]->shape.rank < 0) return false;
    return true;
}

static bool in_group(const ew_group *g, const kn_node *n)
{
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i] == n) return true;
    return false;
}

static int64_t numel(const kn_value *v) { return kn_shape_numel(v->shape.rank, v->shape.dims); }

/* True if the producer of v may join g; otherwise, with a ctx, a remark
 * says why when it is a step at all. */
static bool may_join(kn_pass_ctx *ctx, const ew_group *g, const kn_value *v, const ew_nodes *sn)
{
    kn_node *p = v->producer;
    if (!p || in_group(g, p) || is_taken(sn, p) || !is_step(p)) return false;
    kn_node *root = g->nodes[0];
    const char *why = NULL;
    if (v->flags & KN_VALUE_GRAPH_OUTPUT) why = "its output is a graph output";
    else if (numel(v) != numel(root->outputs[0]) || numel(v) < 0)
        why = "its output is broadcast into the result (it would be recomputed per element)";
    else if (g->n >= KN_EW_MAX_STEPS) why = "the group has the most steps one fused op takes";
    for (int i = 0; !why && i < v->n_users; i++)
        if (!in_group(g, v->users[i].node)) why = "its output has readers outside the group";
    if (why && ctx)
        kn_pass_remark(ctx, "%s '%s' + %s '%s': %s", p->op_type, p->name, root->op_type, root->name, why);
    return !why;
}

/* Adds the producers that may join, until none does; then says why each
 * step producer of an operand stayed out. */
static void grow(kn_pass_ctx *ctx, ew_group *g, const ew_nodes *sn)
{
    bool more = true;
    while (more) {
        more = false;
        for (int i = 0; i < g->n && g->n < KN_EW_MAX_STEPS; i++) {
            kn_node *n = g->nodes[i];
            for (int j = 0; j < step_arity(n); j++)
                if (may_join(NULL, g, n->inputs[j], sn)) {
                    g->nodes[g->n++] = n->inputs[j]->producer;
                    more = true;
                }
        }
    }
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < step_arity(g->nodes[i]); j++) {
            const kn_value *v = g->nodes[i]->inputs[j];
            bool first = true; /* one remark per value */
            for (int k = 0; k < j; k++) first &= g->nodes[i]->inputs[k] != v;
            if (first) may_join(ctx, g, v, sn);
        }
}

/* Steps in graph order (inputs before readers): insertion sort by
 * snapshot index. */
static void sort_steps(const ew_nodes *sn, kn_node **v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && pos_of(sn, v[j - 1]) > pos_of(sn, v[j]); j--) {
            kn_node *t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
}

/* The operand reference of v: an input index (added if new) or -(step + 1);
 * -1000 when there are too many inputs. */
static int operand_ref(ew_group *g, kn_node *const *order, int n_order, const kn_value *v)
{
    for (int s = 0; s < n_order; s++)
        if (order[s]->outputs[0] == v) return -(s + 1);
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == v) return i;
    if (g->n_inputs == KN_EW_MAX_INPUTS) return -1000;
    g->inputs[g->n_inputs] = (kn_value *)v;
    return g->n_inputs++;
}

/* Replaces the group by one FusedElementwise named and placed like its root. */
static int commit(kn_pass_ctx *ctx, kn_graph *gr, ew_nodes *sn, ew_group *g, bool *out_changed)
{
    kn_node *order[KN_EW_MAX_STEPS];
    memcpy(order, g->nodes, sizeof(kn_node *) * (size_t)g->n);
    sort_steps(sn, order, g->n);
    int64_t refs[2 * KN_EW_MAX_STEPS];
    int n_refs = 0;
    kn_unary_params params[KN_EW_MAX_STEPS];
    for (int s = 0; s < g->n; s++) {
        memset(&params[s], 0, sizeof params[s]);
        if (!qdq_params(order[s], &params[s]) && order[s]->n_inputs == 1) unary_params(order[s], &params[s]);
        for (int j = 0; j < step_arity(order[s]); j++) {
            int r = operand_ref(g, order, s, order[s]->inputs[j]);
            if (r == -1000) {
                kn_pass_remark(ctx, "%s '%s': its group reads more than %d values", g->nodes[0]->op_type,
                               g->nodes[0]->name, KN_EW_MAX_INPUTS);
                return KN_OK;
            }
            refs[n_refs++] = r;
        }
    }
    kn_node *root = g->nodes[0];
    kn_value *out = root->outputs[0];
    char *name = kn_arena_alloc(&gr->model->arena, strlen(root->name) + 1);
    const char *types[KN_EW_MAX_STEPS];
    if (!name) return kn_error(KN_ERR_NOMEM, "out of memory");
    strcpy(name, root->name);
    for (int s = 0; s < g->n; s++) types[s] = kn_op_type_name(order[s]->op);
    /* The steps leave the graph, but their slots in the node list stay
     * (marked in sn->gone) until the pass ends and drops them all in one
     * sweep: kn_node_remove searches and shifts the list, once per node,
     * which made this pass quadratic (seconds for a 20k-node chain). Until
     * then gr->nodes[i] is still sn->nodes[i] for every node found. */
    for (int s = 0; s < g->n; s++) {
        for (int j = 0; j < order[s]->n_inputs; j++) kn_node_set_input(order[s], j, NULL);
        sn->gone[pos_of(sn, order[s])] = true;
    }
    *out_changed = true;
    const kn_op_info *oi = kn_op_get(KN_OP_FusedElementwise);
    kn_node *n = kn_node_create_named(gr, oi->name, oi->domain, name, g->n_inputs, g->inputs, 1, NULL);
    if (!n) return kn_error(KN_ERR_NOMEM, "out of memory");
    /* in the root's slot, which the sweep keeps: printed graphs keep their order */
    int at = pos_of(sn, root);
    gr->nodes[at] = n;
    gr->nodes[--gr->n_nodes] = NULL;
    sn->gone[at] = false;
    n->outputs[0] = out; /* the result keeps its name and readers */
    out->producer = n;
    out->producer_index = 0;
    void *items;
    kn_attr *a = kn_fuse_add_list(n, "steps", KN_ATTR_STRINGS, g->n, sizeof(char *), &items);
    if (!a) return kn_error(KN_ERR_NOMEM, "out of memory");
    a->strings = items;
    for (int s = 0; s < g->n; s++) a->strings[s] = types[s];
    if (!(a = kn_fuse_add_list(n, "operands", KN_ATTR_INTS, n_refs, sizeof(int64_t), &items)))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    a->ints = items;
    memcpy(a->ints, refs, sizeof(int64_t) * (size_t)n_refs);
    static const char *const pnames[3] = {"step_alpha", "step_beta", "step_gamma"};
    for (int k = 0; k < 3; k++) {
        if (!(a = kn_fuse_add_list(n, pnames[k], KN_ATTR_FLOATS, g->n, sizeof(float), &items)))
            return kn_error(KN_ERR_NOMEM, "out of memory");
        a->floats = items;
        for (int s = 0; s < g->n; s++)
            a->floats[s] = (float)(k == 0 ? params[s].alpha : k == 1 ? params[s].beta : params[s].gamma);
    }
    int st = KN_OK;
    if (kn_model_opset(gr->model, oi->domain) == 0) st = kn_model_set_opset(gr->model, oi->domain, 1);
    ctx->rewrites += g->n - 1;
    return st;
}

int kn_pass_fuse_elementwise(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    ew_nodes sn = {.count = g->n_nodes, .max_id = -1};
    if (sn.count <= 0) return KN_OK;
    for (int i = 0; i < sn.count; i++)
        if (g->nodes[i]->id > sn.max_id) sn.max_id = g->nodes[i]->id;
    sn.nodes = malloc(sizeof *sn.nodes * (size_t)sn.count);
    sn.taken = calloc((size_t)sn.count, sizeof *sn.taken);
    sn.gone = calloc((size_t)sn.count, sizeof *sn.gone);
    sn.pos = malloc(sizeof *sn.pos * (size_t)(sn.max_id + 1));
    int st = sn.nodes && sn.taken && sn.gone && sn.pos ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i <= sn.max_id; i++) sn.pos[i] = -1;
    for (int i = 0; !st && i < sn.count; i++) {
        sn.nodes[i] = g->nodes[i];
        if (sn.nodes[i]->id >= 0) sn.pos[sn.nodes[i]->id] = i;
    }
    /* roots last to first, so that a group starts at the end of its chain */
    for (int i = sn.count - 1; i >= 0 && !st; i--) {
        kn_node *r = sn.nodes[i];
        if (sn.taken[i] || !is_step(r)) continue;
        ew_group grp = {.n = 1};
        grp.nodes[0] = r;
        grow(ctx, &grp, &sn);
        for (int k = 0; k < grp.n; k++) sn.taken[pos_of(&sn, grp.nodes[k])] = true;
        if (grp.n >= 2) st = commit(ctx, g, &sn, &grp, out_changed);
    }
    if (*out_changed) { /* the sweep commit() leaves to the end */
        int kept = 0;
        for (int i = 0; i < g->n_nodes; i++)
            if (i >= sn.count || !sn.gone[i]) g->nodes[kept++] = g->nodes[i];
        g->n_nodes = kept;
    }
    free(sn.nodes);
    free(sn.taken);
    free(sn.gone);
    free(sn.pos);
    if (!st && *out_changed) st = kn_pass_finish(g);
    return st;
}
