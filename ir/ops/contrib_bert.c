/*
 * Op definitions of onnxruntime's transformer contrib ops (com.microsoft),
 * the ones its transformer optimizer writes (see ir/ops.h):
 * SkipLayerNormalization, SkipSimplifiedLayerNormalization, BiasGelu,
 * FastGelu, Gelu, Attention, MultiHeadAttention, EmbedLayerNormalization.
 *
 * Type/shape inference only, and no kernels: passes/normalize_msft.c
 * rewrites every one of them into standard ops before anything evaluates or
 * lowers the graph. Inference still has to run first, since the importer
 * infers the whole graph and the rewrite reads the shapes it needs (hidden
 * sizes, heads) from it. Symbolic dims are carried where an output dim is
 * an input's dim, so that the rewritten graph keeps its dynamic batch and
 * sequence names.
 *
 * The ONNX importer checks attributes of default-domain ops only (its
 * schema table comes from onnx's schemas, which do not hold these), so the
 * attributes each op may carry are checked here.
 */
#include <string.h>

#include "../eval.h"

static int require(const kn_node *n, int i, const char *what)
{
    if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "input %d (%s) is missing", i, what);
    return KN_OK;
}

/* Every attribute of n must be one of `known` (NULL-terminated): a typo or
 * a newer attribute kiln does not know would otherwise be ignored
 * silently. */
static int check_attrs(const kn_node *n, const char *const *known)
{
    for (int i = 0; i < n->n_attrs; i++) {
        int k = 0;
        while (known[k] && strcmp(known[k], n->attrs[i].name)) k++;
        if (!known[k])
            return kn_node_error(n, KN_ERR_UNSUPPORTED, "attribute '%s' is not defined for com.microsoft %s",
                                 n->attrs[i].name, n->op_type);
    }
    return KN_OK;
}

/* Output i gets dtype dt and the first `rank` dims of input j's shape
 * (symbols included), then the dims of `tail` (count n_tail; -1 unknown). */
static void set_prefix(kn_node *n, int i, kn_dtype dt, int j, int rank, int n_tail, const int64_t *tail)
{
    const kn_value *x = kn_node_input(n, j);
    if (!x || x->shape.rank < rank) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, i, dt, &u);
        return;
    }
    kn_shape s = {.rank = rank + n_tail};
    for (int d = 0; d < rank; d++) s.dims[d] = x->shape.dims[d], s.sym[d] = x->shape.sym[d];
    for (int d = 0; d < n_tail; d++) s.dims[rank + d] = tail[d], s.sym[rank + d] = NULL;
    kn_infer_set_shape(n, i, dt, &s);
}

static kn_dtype dtype_of(const kn_node *n, int i)
{
    const kn_value *v = kn_node_input(n, i);
    return v ? v->dtype : KN_DT_UNDEFINED;
}

static int64_t last_dim(const kn_node *n, int i)
{
    const kn_value *v = kn_node_input(n, i);
    return v && v->shape.rank > 0 ? v->shape.dims[v->shape.rank - 1] : -1;
}

/* ---- SkipLayerNormalization, SkipSimplifiedLayerNormalization ------------------------ */

/* Outputs: output and input_skip_bias_sum have the input's shape; mean and
 * inv_std_var its shape with the last dim 1. */
static int infer_skip_ln(kn_node *n)
{
    static const char *const known[] = {"epsilon"};
    int st = check_attrs(n, known);
    if (!st) st = require(n, 0, "input");
    if (!st) st = require(n, 1, "skip");
    if (!st) st = require(n, 2, "gamma");
    if (st) return st;
    const kn_value *x = n->inputs[0];
    if (x->shape.rank >= 0 && x->shape.rank != 3 && x->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "input has rank %d; expected 3 (batch, sequence, hidden) or 2",
                             x->shape.rank);
    kn_dtype dt = x->dtype;
    int r = x->shape.rank;
    for (int i = 0; i < n->n_outputs && i < 4; i++) {
        if (i == 1 || i == 2) set_prefix(n, i, KN_F32, 0, r < 1 ? 0 : r - 1, 1, (int64_t[]){1});
        else kn_infer_set_shape(n, i, dt, &x->shape);
    }
    return KN_OK;
}

/* ---- BiasGelu, FastGelu, Gelu ---------------------------------------------------------- */

static int infer_gelu(kn_node *n)
{
    static const char *const known[] = {NULL};
    int st = check_attrs(n, known);
    if (!st) st = require(n, 0, n->op == KN_OP_FastGelu ? "X" : "A");
    if (!st && n->op == KN_OP_BiasGelu) st = require(n, 1, "B");
    if (st) return st;
    return kn_infer_same_as_input(n, 0);
}

/* ---- Attention (packed QKV weights) -------------------------------------------------- */

static int infer_ms_attention(kn_node *n)
{
    static const char *const known[] = {"num_heads",        "unidirectional",       "qkv_hidden_sizes",
                                        "mask_filter_value", "scale",               "do_rotary",
                                        "rotary_embedding_dim", "past_present_share_buffer"};
    int st = check_attrs(n, known);
    if (!st) st = require(n, 0, "input");
    if (!st) st = require(n, 1, "weights");
    if (st) return st;
    const kn_value *x = n->inputs[0], *w = n->inputs[1];
    if (x->shape.rank >= 0 && x->shape.rank != 3)
        return kn_node_error(n, KN_ERR_INVALID, "input has rank %d; expected 3 (batch, sequence, hidden)",
                             x->shape.rank);
    if (w->shape.rank >= 0 && w->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "weights have rank %d; expected 2", w->shape.rank);
    const int64_t *qkv;
    int64_t vh = -1;
    if (kn_attr_ints(n, "qkv_hidden_sizes", &qkv) == 3) vh = qkv[2];
    else if (w->shape.rank == 2 && w->shape.dims[1] >= 0) vh = w->shape.dims[1] / 3;
    set_prefix(n, 0, x->dtype, 0, 2, 1, &vh);
    if (n->n_outputs > 1) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 1, x->dtype, &u);
    }
    return KN_OK;
}

/* ---- MultiHeadAttention ---------------------------------------------------------------- */

static int infer_mha(kn_node *n)
{
    static const char *const known[] = {"num_heads", "unidirectional", "mask_filter_value", "scale"};
    int st = check_attrs(n, known);
    if (!st) st = require(n, 0, "query");
    if (st) return st;
    const kn_value *q = n->inputs[0], *v = kn_node_input(n, 2);
    if (q->shape.rank >= 0 && q->shape.rank != 3 && q->shape.rank != 5)
        return kn_node_error(n, KN_ERR_INVALID, "query has rank %d; expected 3 or 5 (packed QKV)", q->shape.rank);
    int64_t vh = -1;
    if (q->shape.rank == 5) vh = q->shape.dims[2] >= 0 && q->shape.dims[4] >= 0 ? q->shape.dims[2] * q->shape.dims[4] : -1;
    else if (v && v->shape.rank == 3) vh = v->shape.dims[2];
    else if (v && v->shape.rank == 4 && v->shape.dims[1] >= 0 && v->shape.dims[3] >= 0)
        vh = v->shape.dims[1] * v->shape.dims[3];
    else if (!v) vh = last_dim(n, 0);
    set_prefix(n, 0, q->dtype, 0, 2, 1, &vh);
    for (int i = 1; i < n->n_outputs; i++) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, i, q->dtype, &u);
    }
    return KN_OK;
}

/* ---- EmbedLayerNormalization ----------------------------------------------------------- */

static int infer_embed_ln(kn_node *n)
{
    static const char *const known[] = {"epsilon", "mask_index_type"};
    int st = check_attrs(n, known);
    if (!st) st = require(n, 0, "input_ids");
    if (!st) st = require(n, 2, "word_embedding");
    if (!st) st = require(n, 3, "position_embedding");
    if (!st) st = require(n, 5, "gamma");
    if (!st) st = require(n, 6, "beta");
    if (st) return st;
    const kn_value *ids = n->inputs[0];
    if (ids->shape.rank >= 0 && ids->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "input_ids has rank %d; expected 2 (batch, sequence)",
                             ids->shape.rank);
    int64_t h = last_dim(n, 2);
    kn_dtype dt = dtype_of(n, 2);
    set_prefix(n, 0, dt, 0, 2, 1, &h);
    if (n->n_outputs > 1) set_prefix(n, 1, KN_I32, 0, 1, 0, NULL);
    if (n->n_outputs > 2) set_prefix(n, 2, dt, 0, 2, 1, &h);
    return KN_OK;
}

const kn_op_impl kn_ops_contrib_bert[] = {
    {KN_OP_SkipLayerNormalization, infer_skip_ln},
    {KN_OP_SkipSimplifiedLayerNormalization, infer_skip_ln},
    {KN_OP_BiasGelu, infer_gelu},
    {KN_OP_FastGelu, infer_gelu},
    {KN_OP_MsGelu, infer_gelu},
    {KN_OP_MsAttention, infer_ms_attention},
    {KN_OP_MultiHeadAttention, infer_mha},
    {KN_OP_EmbedLayerNormalization, infer_embed_ln},
    {KN_OP_UNKNOWN, NULL},
};
