/*
 * passes/normalize_msft.c — onnxruntime's transformer contrib ops, which
 * its transformer optimizer (onnxruntime.transformers.optimizer) writes
 * into BERT-like models, become the standard ops kiln already compiles
 * well, so that the rest of the pipeline (fusion, the flash-style
 * attention kernel) treats such a model like the unfused original:
 *
 *   SkipLayerNormalization(x, skip, gamma, beta?, bias?)
 *       → LayerNormalization(x + skip (+ bias), gamma, beta); the sum is
 *         the input_skip_bias_sum output
 *   SkipSimplifiedLayerNormalization(x, skip, gamma, bias?)
 *       → RMSNormalization(x + skip (+ bias), gamma)
 *   BiasGelu(a, b) → Gelu(a + b);  Gelu (com.microsoft) → Gelu
 *   FastGelu(x, bias?) → Gelu(x (+ bias), approximate="tanh")
 *   Attention(x, W, bias?, mask_index?, attention_bias?)
 *       → Q, K, V = x @ W[:, part] + bias[part] (W's columns split as
 *         qkv_hidden_sizes says), then ONNX Attention in its 3-D form
 *         (q_num_heads = kv_num_heads = num_heads)
 *   MultiHeadAttention(q, k, v, bias?, key_padding_mask?, attention_bias?)
 *       → ONNX Attention (3-D form) of q, k, v (+ their bias parts)
 *   EmbedLayerNormalization(ids, segment_ids?, word, position, segment?,
 *                           gamma, beta, mask?, position_ids?)
 *       → LayerNormalization(Gather(word, ids) + position rows (+ segment
 *         rows)); mask_index is ReduceSum(mask) per batch row, int32
 *
 * Masks: ONNX Attention adds a float mask to the scaled scores, as
 * onnxruntime does with mask_filter_value (-10000 by default) where the
 * mask is 0, so a 0/1 mask of shape [B, T] or [B, S, T] becomes
 * Where(mask, 0, mask_filter_value) unsqueezed to [B, 1, 1, T] or
 * [B, 1, S, T]. A 1-D mask_index of the batch's size (right padding: each
 * sequence's length, what EmbedLayerNormalization and the optimizer's
 * ReduceSum write) becomes Attention's nonpad_kv_seqlen, which masks the
 * keys at and after that length completely; the results are the same
 * whenever a sequence keeps at least one key (exp(-10000) is 0 in f32).
 * attention_bias is added to the mask. unidirectional is is_causal.
 *
 * What has no standard form here is refused with an error naming the node
 * and the input or attribute: past/present state (decoding caches), rotary
 * embeddings, packed QKV/KV inputs of MultiHeadAttention, the left-padding
 * mask_index forms (2*B or 3*B+2 values), 4-D masks, and the mean /
 * inv_std_var outputs of the skip normalizations when something reads them.
 *
 * Runs first in every -O pipeline (and before a --passes list that does
 * not name it, and before `kiln run` evaluates an .onnx): the contrib ops
 * have no kernels, nothing after this pass may see them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "match.h"

/* One rewrite: the contrib node n, the nodes made for it named after it. */
typedef struct rw {
    kn_graph *g;
    kn_node *n;
    int64_t opset; /* the model's default-domain opset: Unsqueeze/ReduceSum axes moved to inputs at 13 */
} rw;

static int oom(void) { return kn_error(KN_ERR_NOMEM, "out of memory"); }

/* A node of op named "<n>.<suffix>" with one output (NULL on out of memory). */
static kn_node *mk(rw *r, kn_op op, const char *suffix, int n_in, kn_value *const *in)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", r->n->name, suffix);
    return kn_node_create(r->g, op, kn_graph_lookup(r->g, name) ? NULL : name, n_in, in, 1);
}

static kn_value *out0(kn_node *m) { return m ? m->outputs[0] : NULL; }

static kn_value *binary(rw *r, kn_op op, kn_value *a, kn_value *b, const char *suffix)
{
    if (!a || !b) return NULL;
    kn_value *in[2] = {a, b};
    return out0(mk(r, op, suffix, 2, in));
}

static kn_value *cast(rw *r, kn_value *x, kn_dtype to, const char *suffix)
{
    if (!x) return NULL;
    kn_node *c = mk(r, KN_OP_Cast, suffix, 1, &x);
    return c && kn_pm_set_int(c, "to", (int64_t)to) ? c->outputs[0] : NULL;
}

static kn_value *f32_scalar(rw *r, double v) { return kn_pm_const_f(r->g, NULL, KN_F32, 0, NULL, &v); }

/* Unsqueeze/ReduceSum take their axes as an attribute before opset 13 and
 * as an input from 13 on: kiln's kernels read them where the model's opset
 * says. */
static kn_node *with_axes(rw *r, kn_op op, kn_value *x, int n_axes, const int64_t *axes, const char *suffix)
{
    if (!x) return NULL;
    if (r->opset < 13) {
        kn_node *m = mk(r, op, suffix, 1, &x);
        return m && kn_pm_set_ints(m, "axes", n_axes, axes) ? m : NULL;
    }
    kn_value *in[2] = {x, kn_pm_const_i64(r->g, NULL, n_axes, axes)};
    return in[1] ? mk(r, op, suffix, 2, in) : NULL;
}

/* x[start:end] along axis (end a constant, or the 1-D value end_v when given). */
static kn_value *slice(rw *r, kn_value *x, int64_t start, int64_t end, kn_value *end_v, int64_t axis,
                       const char *suffix)
{
    if (!x) return NULL;
    kn_value *in[4] = {x, kn_pm_const_i64(r->g, NULL, 1, &start), end_v ? end_v : kn_pm_const_i64(r->g, NULL, 1, &end),
                       kn_pm_const_i64(r->g, NULL, 1, &axis)};
    if (!in[1] || !in[2] || !in[3]) return NULL;
    return out0(mk(r, KN_OP_Slice, suffix, 4, in));
}

static bool used(const kn_value *v) { return v && (v->n_users > 0 || (v->flags & KN_VALUE_GRAPH_OUTPUT)); }

/* Output i of n, when something reads it, is refused: no standard op here
 * computes it. */
static int refuse_output(const kn_node *n, int i, const char *what)
{
    if (i < n->n_outputs && used(n->outputs[i]))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "output %d (%s) is read, and kiln's rewrite into standard ops "
                             "does not compute it", i, what);
    return KN_OK;
}

static int refuse_input(const kn_node *n, int i, const char *what)
{
    if (kn_node_input(n, i))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "input %d (%s) is not supported (no standard-op form in kiln)", i,
                             what);
    return KN_OK;
}

/* new takes over old's readers (and its name, so graph outputs and
 * --report keep the names the model used). It also takes old's inferred
 * type: a later rewrite in this pass reads the shapes of its inputs (an
 * Attention after a SkipLayerNormalization), and the graph is inferred
 * again only at the end. */
static void take_over(kn_value *old, kn_value *new)
{
    if (!old) return;
    new->dtype = old->dtype;
    new->shape = old->shape;
    kn_value_replace_uses(old, new);
    kn_value_swap_names(old, new);
    old->flags &= ~(unsigned)KN_VALUE_GRAPH_OUTPUT;
}

/* The last step of every rewrite: f's output replaces n's output 0, f
 * takes n's name, n goes. */
static int finish(kn_pass_ctx *ctx, rw *r, kn_node *f)
{
    if (!f) return oom();
    kn_node *n = r->n;
    take_over(n->outputs[0], f->outputs[0]);
    kn_node_remove(n);
    f->name = n->name;
    ctx->rewrites++;
    return KN_OK;
}

/* ---- normalizations and activations ----------------------------------------------------- */

static int norm_skip_ln(kn_pass_ctx *ctx, rw *r)
{
    kn_node *n = r->n;
    bool simplified = n->op == KN_OP_SkipSimplifiedLayerNormalization;
    int st;
    if ((st = refuse_output(n, 1, "mean")) || (st = refuse_output(n, 2, "inv_std_var"))) return st;
    kn_value *beta = simplified ? NULL : kn_node_input(n, 3), *bias = kn_node_input(n, simplified ? 3 : 4);
    /* x + bias first, then the skip: a MatMul before x takes the bias and
     * then the skip as its residual into one FusedMatMul (onnxruntime sums
     * in another order; the difference is float rounding) */
    kn_value *x = n->inputs[0];
    if (bias) x = binary(r, KN_OP_Add, x, bias, "bias_add");
    kn_value *s = binary(r, KN_OP_Add, x, n->inputs[1], "skip_add");
    if (!s) return oom();
    kn_value *in[3] = {s, n->inputs[2], beta};
    kn_node *f = kn_node_create(r->g, simplified ? KN_OP_RMSNormalization : KN_OP_LayerNormalization, NULL,
                                beta ? 3 : 2, in, 1);
    /* onnxruntime's default epsilon for both is 1e-12, not ONNX's 1e-5 */
    if (!f || !kn_pm_set_int(f, "axis", -1) || !kn_pm_set_float(f, "epsilon", kn_attr_float(n, "epsilon", 1e-12f)))
        return oom();
    if (n->n_outputs > 3) take_over(n->outputs[3], s);
    return finish(ctx, r, f);
}

static int norm_gelu(kn_pass_ctx *ctx, rw *r)
{
    kn_node *n = r->n;
    kn_value *x = n->inputs[0], *b = n->op == KN_OP_MsGelu ? NULL : kn_node_input(n, 1);
    if (b && !(x = binary(r, KN_OP_Add, x, b, "bias_add"))) return oom();
    kn_node *f = kn_node_create(r->g, KN_OP_Gelu, NULL, 1, &x, 1);
    if (f && n->op == KN_OP_FastGelu && !kn_pm_set_string(f, "approximate", "tanh")) return oom();
    return finish(ctx, r, f);
}

/* ---- attention ----------------------------------------------------------------------------- */

/* Two dims that are known to be equal (the same number or symbol). */
static bool same_dim(const kn_shape *a, int i, const kn_shape *b, int j)
{
    if (a->rank <= i || b->rank <= j) return false;
    if (a->dims[i] >= 0 || b->dims[j] >= 0) return a->dims[i] == b->dims[j];
    return a->sym[i] && b->sym[j] && !strcmp(a->sym[i], b->sym[j]);
}

/* The mask inputs of ONNX Attention for a contrib attention node whose
 * queries are x ([B, S, *]): the additive float mask (or NULL) and the
 * nonpad_kv_seqlen lengths (or NULL), from mask input mi (index mi_idx,
 * named mi_name) and attention_bias ab. */
static int attn_masks(rw *r, kn_value *x, int mi_idx, const char *mi_name, kn_value *ab, kn_value **out_mask,
                      kn_value **out_lens)
{
    kn_node *n = r->n;
    kn_value *mi = kn_node_input(n, mi_idx), *mask = NULL;
    *out_mask = *out_lens = NULL;
    if (mi) {
        const kn_shape *ms = &mi->shape;
        switch (ms->rank) {
        case 1:
            /* [B]: right padding, the lengths; [2B] and [3B+2] (left
             * padding, packed starts) have no standard form */
            if (!same_dim(ms, 0, &x->shape, 0))
                return kn_node_error(n, KN_ERR_UNSUPPORTED, "input %d (%s) is 1-D but not of the batch's size: "
                                     "only the right-padding form (one length per sequence) is supported",
                                     mi_idx, mi_name);
            if (!(*out_lens = cast(r, mi, KN_I64, "lengths"))) return oom();
            break;
        case 2:
        case 3: {
            double zero = 0.0, filt = kn_attr_float(n, "mask_filter_value", -10000.0f);
            kn_value *in[3] = {cast(r, mi, KN_BOOL, "mask_bool"), kn_pm_const_f(r->g, NULL, KN_F32, 0, NULL, &zero),
                               f32_scalar(r, filt)};
            if (!in[0] || !in[1] || !in[2]) return oom();
            kn_value *w = out0(mk(r, KN_OP_Where, "mask_add", 3, in));
            const int64_t axes2[2] = {1, 2}, axes3[1] = {1};
            mask = out0(with_axes(r, KN_OP_Unsqueeze, w, ms->rank == 2 ? 2 : 1, ms->rank == 2 ? axes2 : axes3,
                                  "mask_4d"));
            if (!mask) return oom();
            break;
        }
        default:
            return kn_node_error(n, KN_ERR_UNSUPPORTED, "input %d (%s) has rank %d: only [B], [B, T] and "
                                 "[B, S, T] masks are supported", mi_idx, mi_name, ms->rank);
        }
    }
    if (ab && !(mask = mask ? binary(r, KN_OP_Add, mask, ab, "bias_mask") : ab)) return oom();
    *out_mask = mask;
    return KN_OK;
}

/* The ONNX Attention node for q, k, v ([B, S|T, heads*D]) with n's
 * num_heads, scale, unidirectional and masks. */
static kn_node *onnx_attention(rw *r, int64_t heads, kn_value *q, kn_value *k, kn_value *v, kn_value *mask,
                               kn_value *lens)
{
    kn_node *n = r->n;
    kn_value *in[7] = {q, k, v, mask, NULL, NULL, lens};
    kn_node *a = kn_node_create(r->g, KN_OP_Attention, NULL, lens ? 7 : mask ? 4 : 3, in, 1);
    if (!a || !kn_pm_set_int(a, "q_num_heads", heads) || !kn_pm_set_int(a, "kv_num_heads", heads)) return NULL;
    /* onnxruntime reads scale 0 (and no scale) as 1/sqrt(head size), as ONNX does without one */
    float scale = kn_attr_float(n, "scale", 0.0f);
    if (scale != 0.0f && !kn_pm_set_float(a, "scale", scale)) return NULL;
    if (kn_attr_int(n, "unidirectional", 0) && !kn_pm_set_int(a, "is_causal", 1)) return NULL;
    return a;
}

static int64_t heads_of(const kn_node *n, int *st)
{
    int64_t h = kn_attr_int(n, "num_heads", 0);
    *st = h > 0 ? KN_OK : kn_node_error(n, KN_ERR_INVALID, "attribute 'num_heads' is missing or not positive");
    return h;
}

static int check_hidden(const kn_node *n, const char *what, int64_t hidden, int64_t heads)
{
    if (hidden <= 0 || hidden % heads)
        return kn_node_error(n, KN_ERR_INVALID, "%s hidden size %lld is not a positive multiple of num_heads %lld",
                             what, (long long)hidden, (long long)heads);
    return KN_OK;
}

static int norm_ms_attention(kn_pass_ctx *ctx, rw *r)
{
    kn_node *n = r->n;
    int st;
    if ((st = refuse_input(n, 4, "past")) || (st = refuse_input(n, 6, "past_sequence_length")) ||
        (st = refuse_output(n, 1, "present")))
        return st;
    if (kn_attr_int(n, "do_rotary", 0))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "attribute 'do_rotary' = 1 (rotary embeddings) is not supported");
    if (kn_attr_int(n, "past_present_share_buffer", 0))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "attribute 'past_present_share_buffer' = 1 is not supported");
    int64_t heads = heads_of(n, &st);
    if (st) return st;
    kn_value *x = n->inputs[0], *w = n->inputs[1], *bias = kn_node_input(n, 2);
    if (x->shape.rank != 3 || w->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "input must be 3-D and weights 2-D (ranks %d, %d)", x->shape.rank,
                             w->shape.rank);
    const int64_t *qkv;
    int64_t hs[3];
    if (kn_attr_ints(n, "qkv_hidden_sizes", &qkv) == 3) {
        memcpy(hs, qkv, sizeof hs);
    } else {
        if (kn_attr_ints(n, "qkv_hidden_sizes", &qkv) > 0)
            return kn_node_error(n, KN_ERR_INVALID, "attribute 'qkv_hidden_sizes' must hold 3 values");
        int64_t c = w->shape.dims[1];
        if (c < 0 || c % 3)
            return kn_node_error(n, KN_ERR_INVALID, "weights have %lld columns, not a known multiple of 3 (and "
                                 "no qkv_hidden_sizes)", (long long)c);
        hs[0] = hs[1] = hs[2] = c / 3;
    }
    if (hs[0] != hs[1])
        return kn_node_error(n, KN_ERR_INVALID, "qkv_hidden_sizes: Q and K sizes differ (%lld, %lld)",
                             (long long)hs[0], (long long)hs[1]);
    for (int i = 0; i < 3; i++)
        if ((st = check_hidden(n, i == 0 ? "Q" : i == 1 ? "K" : "V", hs[i], heads))) return st;
    if (w->shape.dims[1] >= 0 && w->shape.dims[1] != hs[0] + hs[1] + hs[2])
        return kn_node_error(n, KN_ERR_INVALID, "weights have %lld columns, qkv_hidden_sizes sum to %lld",
                             (long long)w->shape.dims[1], (long long)(hs[0] + hs[1] + hs[2]));
    /* three products instead of one packed one: each becomes its own
     * FusedMatMul with its bias, and Attention reads Q, K, V directly
     * (no strided views of a packed [B, S, 3H] tensor) */
    static const char *const part[3] = {"q", "k", "v"};
    kn_value *proj[3];
    int64_t off = 0;
    for (int i = 0; i < 3; i++) {
        char s1[16], s2[16], s3[16];
        snprintf(s1, sizeof s1, "w_%s", part[i]);
        snprintf(s2, sizeof s2, "%s", part[i]);
        snprintf(s3, sizeof s3, "b_%s", part[i]);
        kn_value *y = binary(r, KN_OP_MatMul, x, slice(r, w, off, off + hs[i], NULL, 1, s1), s2);
        if (bias) {
            snprintf(s2, sizeof s2, "%s_bias", part[i]);
            y = binary(r, KN_OP_Add, y, slice(r, bias, off, off + hs[i], NULL, 0, s3), s2);
        }
        if (!y) return oom();
        proj[i] = y;
        off += hs[i];
    }
    kn_value *mask, *lens;
    if ((st = attn_masks(r, x, 3, "mask_index", kn_node_input(n, 5), &mask, &lens))) return st;
    return finish(ctx, r, onnx_attention(r, heads, proj[0], proj[1], proj[2], mask, lens));
}

static int norm_mha(kn_pass_ctx *ctx, rw *r)
{
    kn_node *n = r->n;
    int st;
    static const char *const past[] = {"past_key", "past_value", "past_sequence_length", "cache_indirection"};
    for (int i = 6; i < 10; i++)
        if ((st = refuse_input(n, i, past[i - 6]))) return st;
    if ((st = refuse_output(n, 1, "present_key")) || (st = refuse_output(n, 2, "present_value")) ||
        (st = refuse_output(n, 3, "qk")))
        return st;
    int64_t heads = heads_of(n, &st);
    if (st) return st;
    kn_value *q = n->inputs[0], *k = kn_node_input(n, 1), *v = kn_node_input(n, 2), *bias = kn_node_input(n, 3);
    if (q->shape.rank != 3 || !k || !v)
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "packed QKV or KV inputs are not supported: query, key and value "
                             "must be separate 3-D tensors");
    if (k->shape.rank != 3 || v->shape.rank != 3)
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "key and value of rank %d, %d: only 3-D [B, T, hidden] is "
                             "supported (not packed KV or the 4-D per-head form)", k->shape.rank, v->shape.rank);
    int64_t hs[3] = {q->shape.dims[2], k->shape.dims[2], v->shape.dims[2]};
    for (int i = 0; i < 3; i++)
        if ((st = check_hidden(n, i == 0 ? "query" : i == 1 ? "key" : "value", hs[i], heads))) return st;
    if (bias) {
        kn_value **t[3] = {&q, &k, &v};
        static const char *const part[3] = {"q", "k", "v"};
        int64_t off = 0;
        for (int i = 0; i < 3; i++) {
            char s1[16], s2[16];
            snprintf(s1, sizeof s1, "b_%s", part[i]);
            snprintf(s2, sizeof s2, "%s_bias", part[i]);
            if (!(*t[i] = binary(r, KN_OP_Add, *t[i], slice(r, bias, off, off + hs[i], NULL, 0, s1), s2))) return oom();
            off += hs[i];
        }
    }
    kn_value *mask, *lens;
    if ((st = attn_masks(r, n->inputs[0], 4, "key_padding_mask", kn_node_input(n, 5), &mask, &lens))) return st;
    return finish(ctx, r, onnx_attention(r, heads, q, k, v, mask, lens));
}

/* ---- EmbedLayerNormalization ------------------------------------------------------------- */

static kn_value *gather_rows(rw *r, kn_value *table, kn_value *ids, const char *suffix)
{
    kn_value *g = binary(r, KN_OP_Gather, table, ids, suffix);
    return g && kn_pm_set_int(g->producer, "axis", 0) ? g : NULL;
}

static int norm_embed_ln(kn_pass_ctx *ctx, rw *r)
{
    kn_node *n = r->n;
    kn_value *ids = n->inputs[0], *seg_ids = kn_node_input(n, 1), *seg = kn_node_input(n, 4);
    kn_value *mask = kn_node_input(n, 7), *pos_ids = kn_node_input(n, 8);
    if (!seg_ids != !seg)
        return kn_node_error(n, KN_ERR_INVALID, "segment_ids and segment_embedding must be given together");
    if (n->n_outputs > 1 && used(n->outputs[1]) && !mask)
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "output 1 (mask_index) is read but there is no mask input");
    kn_value *sum = gather_rows(r, n->inputs[2], ids, "word");
    kn_value *pos;
    if (pos_ids) {
        pos = gather_rows(r, n->inputs[3], pos_ids, "position");
    } else {
        /* positions 0..S-1: the first S rows of the table, S from the ids' shape */
        kn_value *shape = out0(mk(r, KN_OP_Shape, "ids_shape", 1, &ids));
        kn_value *seq = slice(r, shape, 1, 2, NULL, 0, "seq_len");
        pos = seq ? slice(r, n->inputs[3], 0, 0, seq, 0, "position") : NULL;
    }
    sum = binary(r, KN_OP_Add, sum, pos, "add_position");
    if (seg) sum = binary(r, KN_OP_Add, sum, gather_rows(r, seg, seg_ids, "segment"), "add_segment");
    if (!sum) return oom();
    if (n->n_outputs > 1 && used(n->outputs[1])) {
        kn_value *m32 = mask->dtype == KN_I32 ? mask : cast(r, mask, KN_I32, "mask_i32");
        kn_node *rs = with_axes(r, KN_OP_ReduceSum, m32, 1, (int64_t[]){1}, "mask_index");
        if (!rs || !kn_pm_set_int(rs, "keepdims", 0)) return oom();
        take_over(n->outputs[1], rs->outputs[0]);
    }
    if (n->n_outputs > 2) take_over(n->outputs[2], sum);
    kn_value *in[3] = {sum, n->inputs[5], n->inputs[6]};
    kn_node *f = kn_node_create(r->g, KN_OP_LayerNormalization, NULL, 3, in, 1);
    if (!f || !kn_pm_set_int(f, "axis", -1) || !kn_pm_set_float(f, "epsilon", kn_attr_float(n, "epsilon", 1e-12f)))
        return oom();
    return finish(ctx, r, f);
}

bool kn_pass_normalize_msft_rewrites(kn_op op)
{
    switch (op) {
    case KN_OP_SkipLayerNormalization:
    case KN_OP_SkipSimplifiedLayerNormalization:
    case KN_OP_BiasGelu:
    case KN_OP_FastGelu:
    case KN_OP_MsGelu:
    case KN_OP_MsAttention:
    case KN_OP_MultiHeadAttention:
    case KN_OP_EmbedLayerNormalization: return true;
    default: return false;
    }
}

bool kn_pass_needs_normalize_msft(const kn_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (kn_pass_normalize_msft_rewrites(g->nodes[i]->op)) return true;
    return false;
}

int kn_pass_normalize_msft(kn_pass_ctx *ctx, kn_graph *g, bool *out_changed)
{
    *out_changed = false;
    /* the rewrites remove nodes from g->nodes: walk a copy */
    int count = g->n_nodes, st = KN_OK;
    kn_node **todo = malloc(sizeof *todo * (size_t)(count ? count : 1));
    if (!todo) return oom();
    memcpy(todo, g->nodes, sizeof *todo * (size_t)count);
    rw r = {.g = g, .opset = kn_model_opset(ctx->model, "")};
    for (int i = 0; i < count && !st; i++) {
        kn_node *n = todo[i];
        r.n = n;
        switch (n->op) {
        case KN_OP_SkipLayerNormalization:
        case KN_OP_SkipSimplifiedLayerNormalization: st = norm_skip_ln(ctx, &r); break;
        case KN_OP_BiasGelu:
        case KN_OP_FastGelu:
        case KN_OP_MsGelu: st = norm_gelu(ctx, &r); break;
        case KN_OP_MsAttention: st = norm_ms_attention(ctx, &r); break;
        case KN_OP_MultiHeadAttention: st = norm_mha(ctx, &r); break;
        case KN_OP_EmbedLayerNormalization: st = norm_embed_ln(ctx, &r); break;
        default: continue;
        }
        *out_changed = true;
    }
    free(todo);
    if (st) return st;
    return *out_changed ? kn_pass_finish(g) : KN_OK;
}
