/*
 * passes/pack_tokens.c — padding-aware execution (kiln compile
 * --pack-tokens), PyTorch BetterTransformer's nested tensors for a
 * compiled encoder: the tokens of a batch that its attention mask marks as
 * padding cost nothing in the projections, the feed-forward layers, the
 * norms and the attention.
 *
 *   x [B, S, H] ──PackRows(x, mask)──> [1, T, H]    T: the real tokens
 *   token-wise nodes on [1, T, ...]                 (one row per token)
 *   Attention(q, k, v, additive mask) → PackedAttention(q, k, v, mask)
 *   [1, T, H] ──UnpackRows(y, mask)──> y [B, S, H]  zeros at padding
 *
 * Taken: the 3-D Attention nodes (recognize-attention's form; f32, no past
 * state, no causal mask, only output 0) whose attn_mask is a key padding
 * mask of one graph input M [B, S] (its dims static or dynamic): a chain of
 * elementwise ops, Cast, Unsqueeze and Reshape from M alone (other operands
 * scalar constants) that gives [B, 1, 1, S], and that the evaluator shows to be 0
 * where M is 1 and at most -1e4 (or false) where M is 0; such a mask
 * removes the padded keys exactly (their softmax weights underflow to 0).
 * Around them, the region grows over the nodes that compute each token on
 * its own: products by constant matrices (+ bias, activations, a residual
 * of the region), LayerNormalization/RMSNormalization over the last axis,
 * Split along it, elementwise ops whose other operands are constants that
 * do not vary along B or S (a position-embedding table does: it stays
 * outside). Values entering the region are packed, values leaving it
 * (graph outputs included, which keep their names) unpacked.
 *
 * Outputs at padded positions become 0 (BetterTransformer's and PyTorch's
 * fast path give the same); at real tokens they are the unpacked model's.
 * The packed count T is set at run time by the data: the compiler treats
 * dim 1 of every value marked KN_VALUE_TOKEN_ROWS as a dynamic dim set by
 * the first PackRows of the run (codegen/cpu/dyn.c), so token-wise nodes run
 * over T rows. With dynamic dims the pass runs on the probe models too and
 * must pack them alike: a constant that is a probe's instance of a computed
 * value (KN_VALUE_VARYING_SHAPE) counts as that value. Runs last (after
 * autocast), when `kn_pipeline_opts.pack_tokens` asks for it; an error
 * names why when nothing can be packed.
 */
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "fused_int.h"
#include "match.h"

/* The graph input M [B, S] and the tokens' shape. */
typedef struct pack_ctx {
    kn_graph *g;
    kn_value *mask;
    int64_t B, S;
    bool *in; /* by node id: in the region */
    int cap;  /* entries of in */
} pack_ctx;

/* A constant that is one instance of a value computed at run time (a
 * dynamic dim's probe, ir.h): to be treated as the computed value, so that
 * the main graph and its probes are packed alike. */
static bool varying(const kn_value *v) { return (v->flags & KN_VALUE_VARYING_SHAPE) != 0; }

static bool is_tok(const pack_ctx *p, const kn_value *v)
{
    return v && v->shape.rank == 3 && v->shape.dims[0] == p->B && v->shape.dims[1] == p->S && v->dtype == KN_F32 &&
           (!v->const_data || varying(v)) && v->shape.dims[2] > 0;
}

/* A constant operand that is the same for every token: it does not vary
 * along dims 0 and 1 of a [B, S, X] operand it broadcasts to. */
static bool token_const(const kn_value *v)
{
    if (!v || !v->const_data || varying(v)) return false;
    const kn_shape *s = &v->shape;
    for (int i = 0; i < s->rank - 1; i++)
        if (s->rank - i >= 2 && s->dims[i] != 1) return false; /* a dim aligned with B or S */
    return s->rank <= 3;
}

/* ---- the mask ------------------------------------------------------------------- */

static bool mask_op_ok(const kn_node *n)
{
    if (n->op == KN_OP_Cast || n->op == KN_OP_Unsqueeze || n->op == KN_OP_Reshape || n->op == KN_OP_Where ||
        n->op == KN_OP_FusedElementwise)
        return true;
    return (kn_op_flags(n->op) & KN_OPF_ELEMENTWISE) != 0;
}

/* Runs the chain (from M to the mask) on M filled with `fill`; *out owned. */
static int eval_chain(kn_node **chain, int n, const kn_value *m, double fill, kn_tensor *out)
{
    kn_tensor cur = {0};
    int st = kn_tensor_alloc(&cur, m->dtype, 2, m->shape.dims);
    if (st) return st;
    for (int64_t i = 0; i < kn_tensor_numel(&cur); i++) kn_store_f64(cur.dtype, cur.data, (size_t)i, fill);
    const kn_value *at = m;
    for (int c = 0; c < n && !st; c++) {
        kn_node *node = chain[c];
        const kn_tensor *ins[16] = {0};
        for (int i = 0; i < node->n_inputs && i < 16; i++) {
            const kn_value *v = node->inputs[i];
            ins[i] = v == at ? &cur : v ? v->const_data : NULL;
        }
        kn_tensor outs[4] = {{0}};
        st = node->n_outputs <= 4 ? kn_node_eval(NULL, node, ins, outs)
                                  : kn_error(KN_ERR_UNSUPPORTED, "%d outputs", node->n_outputs);
        for (int k = 1; k < 4; k++) kn_tensor_free(&outs[k]);
        kn_tensor_free(&cur);
        cur = outs[0];
        at = node->outputs[0];
    }
    if (st) kn_tensor_free(&cur);
    else *out = cur;
    return st;
}

/* keep: every element of t lets its key through (0; true for a bool mask);
 * else every one removes it (at most -1e4; false for a bool mask). */
static bool all_are(const kn_tensor *t, bool keep)
{
    for (int64_t i = 0; i < kn_tensor_numel(t); i++) {
        double x = kn_load_f64(t->dtype, t->data, (size_t)i);
        bool ok = t->dtype == KN_BOOL ? (x != 0) == keep : keep ? x == 0 : x <= -1e4;
        if (!ok) return false;
    }
    return true;
}

/* The graph input M whose key padding mask attention node a reads, or NULL
 * with *why set. */
static kn_value *padding_mask_of(const kn_node *a, const char **why)
{
    kn_value *mv = kn_node_input(a, 3);
    kn_node *chain[16];
    int n = 0;
    kn_value *v = mv;
    while (v && v->producer && n < 16) {
        kn_node *p = v->producer;
        if (!mask_op_ok(p) || p->n_outputs != 1)
            return *why = "the mask is computed by other ops than elementwise ones, Cast, Unsqueeze and Reshape", NULL;
        kn_value *next = NULL;
        for (int i = 0; i < p->n_inputs; i++) {
            kn_value *in = p->inputs[i];
            if (!in) continue;
            if (in->const_data) {
                bool shape_operand = (p->op == KN_OP_Unsqueeze || p->op == KN_OP_Reshape) && i == 1;
                if (!shape_operand && kn_tensor_numel(in->const_data) != 1)
                    return *why = "the mask's computation has a constant that is not a scalar", NULL;
                continue;
            }
            if (next) return *why = "the mask is computed from more than one input", NULL;
            next = in;
        }
        chain[n++] = p;
        v = next;
    }
    if (!v || v->producer || !(v->flags & KN_VALUE_GRAPH_INPUT) || v->const_data)
        return *why = "the mask does not come from a graph input", NULL;
    if (v->shape.rank != 2 || !kn_shape_is_static(&v->shape))
        return *why = "the mask's graph input is not a [batch, sequence] tensor of known size", NULL;
    const int64_t *md = mv->shape.dims;
    if (mv->shape.rank != 4 || md[0] != v->shape.dims[0] || md[1] != 1 || md[2] != 1 || md[3] != v->shape.dims[1])
        return *why = "the mask is not [batch, 1, 1, sequence] (one row of keys per sequence)", NULL;
    for (int i = 0; i < n / 2; i++) {
        kn_node *t = chain[i];
        chain[i] = chain[n - 1 - i], chain[n - 1 - i] = t;
    }
    kn_tensor ones = {0}, zeros = {0};
    int st = eval_chain(chain, n, v, 1.0, &ones);
    if (!st) st = eval_chain(chain, n, v, 0.0, &zeros);
    bool ok = !st && all_are(&ones, true) && all_are(&zeros, false);
    kn_tensor_free(&ones);
    kn_tensor_free(&zeros);
    if (st) kn_error_clear();
    if (!ok) return *why = "the mask is not 0 at real tokens and at most -1e4 (or false) at padding", NULL;
    return v;
}

/* An Attention node this pass can pack, its mask input's graph input in
 * *m; NULL with *why otherwise. */
static bool attention_ok(const kn_node *a, kn_value **m, const char **why)
{
    *m = NULL;
    const kn_value *q = kn_node_input(a, 0), *k = kn_node_input(a, 1), *v = kn_node_input(a, 2);
    if (!q || !k || !v || q->shape.rank != 3 || k->shape.rank != 3 || v->shape.rank != 3)
        return *why = "not the 3-D form (q, k, v [batch, sequence, heads x size])", false;
    if (q->dtype != KN_F32 || k->dtype != KN_F32 || v->dtype != KN_F32)
        return *why = "q, k and v are not f32", false;
    if (kn_node_input(a, 4) || kn_node_input(a, 5) || kn_node_input(a, 6))
        return *why = "it has past state or nonpad_kv_seqlen", false;
    for (int i = 1; i < a->n_outputs; i++)
        if (a->outputs[i] && a->outputs[i]->n_users) return *why = "present state or scores are read", false;
    if (kn_attr_int(a, "is_causal", 0) || kn_attr_int(a, "qk_matmul_output_mode", 0))
        return *why = "it is causal or exports its scores", false;
    if (!kn_node_input(a, 3)) return *why = "it has no attention mask", false;
    if (!(*m = padding_mask_of(a, why))) return false;
    const int64_t *qd = q->shape.dims;
    if (qd[0] != (*m)->shape.dims[0] || qd[1] != (*m)->shape.dims[1] || k->shape.dims[1] != qd[1] ||
        v->shape.dims[1] != qd[1])
        return *why = "q, k and v are not [batch, sequence, ...] of the mask's batch and sequence", *m = NULL, false;
    return true;
}

/* ---- the region -------------------------------------------------------------------- */

/* n computes each token of its [B, S, ...] operands on its own. */
static bool token_wise(const pack_ctx *p, const kn_node *n)
{
    if (n->graph != p->g || n->n_outputs < 1 || !is_tok(p, n->outputs[0])) return false;
    switch (n->op) {
    case KN_OP_MatMul: case KN_OP_FusedMatMul: {
        const kn_value *w = kn_node_input(n, 1), *c = kn_node_input(n, 2), *r = kn_node_input(n, KN_FUSED_RESIDUAL);
        return is_tok(p, kn_node_input(n, 0)) && w && w->const_data && w->shape.rank == 2 &&
               !kn_attr_int(n, "transA", 0) && !kn_attr_int(n, "transB", 0) && (!c || token_const(c)) &&
               (n->op == KN_OP_MatMul || !r || is_tok(p, r));
    }
    case KN_OP_LayerNormalization: case KN_OP_RMSNormalization: {
        int64_t axis = kn_attr_int(n, "axis", -1);
        for (int i = 1; i < n->n_outputs; i++)
            if (n->outputs[i] && n->outputs[i]->n_users) return false;
        for (int i = 1; i < n->n_inputs; i++)
            if (n->inputs[i] && !token_const(n->inputs[i])) return false;
        return is_tok(p, n->inputs[0]) && (axis == -1 || axis == 2);
    }
    case KN_OP_Split: {
        int64_t axis = kn_attr_int(n, "axis", 0);
        for (int i = 0; i < n->n_outputs; i++)
            if (!is_tok(p, n->outputs[i])) return false;
        return is_tok(p, n->inputs[0]) && (axis == -1 || axis == 2);
    }
    default:
        break;
    }
    if (n->op != KN_OP_FusedElementwise && n->op != KN_OP_Gelu && !(kn_op_flags(n->op) & KN_OPF_ELEMENTWISE))
        return false;
    if (n->n_outputs != 1) return false;
    for (int i = 0; i < n->n_inputs; i++) {
        const kn_value *v = n->inputs[i];
        if (v && !is_tok(p, v) && !token_const(v)) return false;
    }
    return true;
}

static bool in_region(const pack_ctx *p, const kn_node *n) { return n && n->id >= 0 && n->id < p->cap && p->in[n->id]; }

/* Grows the region from its attention nodes to a fixed point. */
static void grow(pack_ctx *p)
{
    bool changed = true;
    while (changed) {
        changed = false;
        for (int i = 0; i < p->g->n_nodes; i++) {
            kn_node *n = p->g->nodes[i];
            if (!in_region(p, n)) continue;
            for (int k = 0; k < n->n_inputs; k++) {
                kn_node *q = n->inputs[k] ? n->inputs[k]->producer : NULL;
                if (q && !in_region(p, q) && is_tok(p, n->inputs[k]) && token_wise(p, q)) p->in[q->id] = changed = true;
            }
            for (int k = 0; k < n->n_outputs; k++) {
                kn_value *v = n->outputs[k];
                for (int u = 0; v && u < v->n_users; u++) {
                    kn_node *r = v->users[u].node;
                    if (!in_region(p, r) && token_wise(p, r)) p->in[r->id] = changed = true;
                }
            }
        }
    }
}

/* ---- the rewrite -------------------------------------------------------------------- */

static kn_node *new_node(kn_graph *g, kn_op op, const char *base, const char *suffix, int n_in, kn_value **ins)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", base, suffix);
    return kn_node_create(g, op, kn_pm_free_node_name(g, name), n_in, ins, 1);
}

/* Region inputs from outside get a PackRows each (one per value). */
static int pack_entries(pack_ctx *p, kn_node **region, int nr)
{
    for (int i = 0; i < nr; i++) {
        kn_node *n = region[i];
        for (int k = 0; k < n->n_inputs; k++) {
            kn_value *v = n->inputs[k];
            if (!is_tok(p, v) || in_region(p, v->producer)) continue;
            kn_value *ins[2] = {v, p->mask};
            kn_node *pk = new_node(p->g, KN_OP_PackRows, v->name, "packed", 2, ins);
            if (!pk) return kn_error(KN_ERR_NOMEM, "out of memory");
            /* every region reader of v reads the packed value */
            for (int j = 0; j < nr; j++)
                for (int t = 0; t < region[j]->n_inputs; t++)
                    if (region[j]->inputs[t] == v) kn_node_set_input(region[j], t, pk->outputs[0]);
        }
    }
    return KN_OK;
}

/* Region values read outside (or graph outputs) get an UnpackRows; a
 * graph output's name goes to the unpacked value. */
static int unpack_exits(pack_ctx *p, kn_node **region, int nr)
{
    for (int i = 0; i < nr; i++) {
        kn_node *n = region[i];
        for (int k = 0; k < n->n_outputs; k++) {
            kn_value *v = n->outputs[k];
            if (!v) continue;
            bool out = (v->flags & KN_VALUE_GRAPH_OUTPUT) != 0;
            for (int u = 0; u < v->n_users && !out; u++) out = !in_region(p, v->users[u].node);
            if (!out) continue;
            kn_value *ins[2] = {v, p->mask};
            kn_node *un = new_node(p->g, KN_OP_UnpackRows, v->name, "unpacked", 2, ins);
            if (!un) return kn_error(KN_ERR_NOMEM, "out of memory");
            kn_value *y = un->outputs[0];
            for (int u = 0; u < v->n_users;) {
                kn_use use = v->users[u];
                if (use.node == un || in_region(p, use.node)) {
                    u++;
                    continue;
                }
                kn_node_set_input(use.node, use.index, y); /* removes the use from v */
            }
            for (int o = 0; o < p->g->n_outputs; o++)
                if (p->g->outputs[o] == v) {
                    p->g->outputs[o] = y;
                    y->flags |= KN_VALUE_GRAPH_OUTPUT;
                    v->flags &= ~(unsigned)KN_VALUE_GRAPH_OUTPUT;
                    kn_value_swap_names(v, y);
                }
        }
    }
    return KN_OK;
}

/* Attention a becomes PackedAttention(q, k, v, M). */
static int pack_attention(pack_ctx *p, kn_node *a, kn_node **slot)
{
    kn_value *ins[4] = {a->inputs[0], a->inputs[1], a->inputs[2], p->mask};
    kn_node *pa = kn_node_create(p->g, KN_OP_PackedAttention, NULL, 4, ins, 1);
    if (!pa) return kn_error(KN_ERR_NOMEM, "out of memory");
    const kn_attr *sc = kn_node_attr(a, "scale");
    if (!kn_pm_set_int(pa, "q_num_heads", kn_attr_int(a, "q_num_heads", 0)) ||
        !kn_pm_set_int(pa, "kv_num_heads", kn_attr_int(a, "kv_num_heads", 0)) ||
        (sc && !kn_pm_set_float(pa, "scale", sc->f)) ||
        (kn_attr_float(a, "softcap", 0.0f) != 0.0f && !kn_pm_set_float(pa, "softcap", kn_attr_float(a, "softcap", 0))))
        return kn_error(KN_ERR_NOMEM, "out of memory");
    pa->compute = a->compute;
    kn_value_replace_uses(a->outputs[0], pa->outputs[0]);
    kn_value_swap_names(a->outputs[0], pa->outputs[0]);
    const char *name = a->name;
    kn_node_remove(a);
    pa->name = name;
    if (pa->id < 0 || pa->id >= p->cap)
        return kn_error(KN_ERR_INTERNAL, "pack-tokens: node id %d out of range", pa->id);
    p->in[pa->id] = true;
    *slot = pa;
    return KN_OK;
}

int kn_pass_pack_tokens(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    pack_ctx p = {.g = g};
    const char *why = NULL, *why_node = NULL;
    int n_att = 0, n_seen = 0;
    /* room for the nodes this pass adds too (their ids come after) */
    p.cap = 2 * g->model->n_node_ids + 2 * g->n_nodes + 64;
    p.in = calloc((size_t)p.cap, sizeof *p.in);
    if (!p.in) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        kn_node *a = g->nodes[i];
        if (a->op != KN_OP_Attention) continue;
        n_seen++;
        kn_value *m = NULL;
        const char *w = NULL;
        if (!attention_ok(a, &m, &w)) {
            kn_pass_remark(ctx, "Attention '%s' is not packed: %s", a->name, w);
            if (!why) why = w, why_node = a->name;
            continue;
        }
        if (p.mask && m != p.mask) {
            kn_pass_remark(ctx, "Attention '%s' is not packed: its mask comes from input '%s', not '%s'", a->name,
                           m->name, p.mask->name);
            continue;
        }
        p.mask = m, p.B = m->shape.dims[0], p.S = m->shape.dims[1];
        p.in[a->id] = true;
        n_att++;
    }
    if (!n_att) {
        free(p.in);
        if (!n_seen)
            return kn_error(KN_ERR_UNSUPPORTED, "--pack-tokens: the model has no attention block (after "
                            "recognize-attention) to pack the tokens of");
        return kn_error(KN_ERR_UNSUPPORTED, "--pack-tokens: no attention block can be packed; Attention '%s': %s",
                        why_node, why);
    }
    grow(&p);
    kn_node **region = malloc(sizeof *region * (size_t)g->n_nodes);
    int nr = 0, st = region ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < g->n_nodes; i++)
        if (in_region(&p, g->nodes[i])) region[nr++] = g->nodes[i];
    for (int i = 0; !st && i < nr; i++)
        if (region[i]->op == KN_OP_Attention) st = pack_attention(&p, region[i], &region[i]);
    if (!st) st = pack_entries(&p, region, nr);
    if (!st) st = unpack_exits(&p, region, nr);
    if (!st) st = kn_pass_finish(g);
    /* dim 1 of every packed value is the run's token count (dyn.c) */
    for (int i = 0; !st && i < g->n_nodes; i++) {
        kn_node *n = g->nodes[i];
        if (!in_region(&p, n) && n->op != KN_OP_PackRows) continue;
        for (int k = 0; k < n->n_outputs; k++)
            if (n->outputs[k]) n->outputs[k]->flags |= KN_VALUE_TOKEN_ROWS;
    }
    if (!st) {
        ctx->rewrites += nr;
        *out_changed = true;
        kn_pass_remark(ctx, "packed %d nodes (%d attention blocks) over the tokens of input '%s' [%lld x %lld]", nr,
                       n_att, p.mask->name, (long long)p.B, (long long)p.S);
    }
    free(region);
    free(p.in);
    return st;
}
