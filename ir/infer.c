/* The type/shape inference driver (kn_graph_infer), with light data
 * propagation: small values computed only from constants (Constant nodes,
 * shape arithmetic, Shape of a static shape) get their data attached as
 * const_data, so Reshape/Expand/Slice/... after them infer static shapes,
 * as exported PyTorch graphs need. */
#include <stdlib.h>
#include <string.h>

#include "eval.h"

/* Values larger than this are left to evaluation, not inference. */
#define KN_PROPAGATE_MAX_ELEMS 4096

static int infer_subgraphs(kn_node *n)
{
    const kn_graph *taken = kn_if_taken_branch(n);
    if (taken) return kn_graph_infer((kn_graph *)taken);
    for (int i = 0; i < n->n_attrs; i++) {
        kn_attr *at = &n->attrs[i];
        if (at->kind == KN_ATTR_GRAPH && at->g) {
            int st = kn_graph_infer(at->g);
            if (st) return st;
        }
        for (int k = 0; at->kind == KN_ATTR_GRAPHS && k < at->n; k++) {
            int st = kn_graph_infer(at->graphs[k]);
            if (st) return st;
        }
    }
    return KN_OK;
}

static bool has_subgraph(const kn_node *n)
{
    for (int i = 0; i < n->n_attrs; i++)
        if (n->attrs[i].kind == KN_ATTR_GRAPH || n->attrs[i].kind == KN_ATTR_GRAPHS) return true;
    return false;
}

static bool small_static(const kn_value *v)
{
    if (!v || !kn_shape_is_static(&v->shape)) return false;
    int64_t n = kn_shape_numel(v->shape.rank, v->shape.dims);
    return n >= 0 && n <= KN_PROPAGATE_MAX_ELEMS;
}

/* Attaches `t` (heap struct, owned data) as the constant data of v. */
static int attach(kn_graph *g, kn_value *v, kn_tensor *t)
{
    if (!kn_model_adopt_tensor(g->model, t)) return KN_ERR_NOMEM;
    v->const_data = t;
    return KN_OK;
}

/* A value computed from one whose shape varies at run time may vary too
 * (conservatively: whatever its op). */
static void propagate_varying(kn_node *n)
{
    bool varying = false;
    for (int i = 0; i < n->n_inputs; i++) varying |= n->inputs[i] && (n->inputs[i]->flags & KN_VALUE_VARYING_SHAPE);
    if (!varying) return;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k]) n->outputs[k]->flags |= KN_VALUE_VARYING_SHAPE;
}

/* Shape(x) needs only x's static shape, not its data. */
static int propagate_shape_op(kn_graph *g, kn_node *n)
{
    kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    if (!x || !y || !kn_shape_is_static(&x->shape)) return KN_OK;
    int r = x->shape.rank;
    int64_t start = kn_attr_int(n, "start", 0), end = kn_attr_int(n, "end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    kn_tensor *t = calloc(1, sizeof *t);
    if (!t) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_tensor_alloc(t, KN_I64, 1, &len);
    if (st) {
        free(t);
        return st;
    }
    for (int64_t i = 0; i < len; i++) ((int64_t *)t->data)[i] = x->shape.dims[start + i];
    return attach(g, y, t);
}

/* Evaluates n now if every input is a known constant and every output is
 * small; failures just leave the outputs without data. */
static int propagate_constants(kn_graph *g, kn_node *n)
{
    if (n->op == KN_OP_Shape) return propagate_shape_op(g, n);
    /* a dequantized constant stays quantized for the integer lowering
     * (passes/lower_qdq.c); fold-constants folds what it leaves */
    if (n->op == KN_OP_DequantizeLinear) return KN_OK;
    /* Dropout may be random (training mode): never evaluated at compile time,
     * as fold-constants does not either (found by the differential tester
     * once DequantizeLinear stopped propagating: a constant Dropout output
     * kept its producer) */
    if (n->op == KN_OP_Dropout) return KN_OK;
    if (!kn_op_runnable(n->op) || has_subgraph(n) || n->n_outputs > 8) return KN_OK;
    const kn_tensor *in[16];
    if (n->n_inputs > 16) return KN_OK;
    for (int i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] && !n->inputs[i]->const_data) return KN_OK;
        in[i] = n->inputs[i] ? n->inputs[i]->const_data : NULL;
    }
    for (int i = 0; i < n->n_outputs; i++)
        if (n->outputs[i] && (!small_static(n->outputs[i]) || n->outputs[i]->const_data)) return KN_OK;
    const kn_op_info *oi = kn_op_get(n->op);
    if (n->n_inputs < oi->min_inputs || n->n_inputs > oi->max_inputs || n->n_outputs > oi->max_outputs)
        return KN_OK; /* malformed: let the verifier or the evaluator report it */
    kn_tensor out[8];
    memset(out, 0, sizeof out);
    int st = kn_node_eval(NULL, n, in, out);
    bool kept[8] = {false};
    for (int i = 0; st == KN_OK && i < n->n_outputs; i++) {
        if (!n->outputs[i] || out[i].dtype != n->outputs[i]->dtype) continue;
        kn_tensor *t = malloc(sizeof *t);
        if (!t) continue;
        *t = out[i];
        kept[i] = true;
        if (attach(g, n->outputs[i], t)) {
            for (int k = i + 1; k < 8; k++) kn_tensor_free(&out[k]);
            return KN_ERR_NOMEM;
        }
    }
    /* every slot: an op may have filled one past n_outputs on bad input */
    for (int i = 0; i < 8; i++)
        if (!kept[i]) kn_tensor_free(&out[i]);
    kn_error_clear();
    return KN_OK;
}

int64_t kn_shape_nbytes(kn_dtype dt, const kn_shape *s)
{
    if (!kn_shape_is_static(s)) return -1;
    int64_t n = kn_shape_numel(s->rank, s->dims); /* -1 on overflow */
    int64_t bits = kn_dtype_info(dt)->bits ? kn_dtype_info(dt)->bits : 8;
    if (n < 0 || n / 8 > KN_MAX_TENSOR_BYTES / bits) return -1;
    /* in two parts so that n * bits cannot overflow */
    int64_t bytes = n / 8 * bits + (n % 8 * bits + 7) / 8;
    return bytes <= KN_MAX_TENSOR_BYTES ? bytes : -1;
}

/* A static shape whose byte count overflows would reach the memory plan,
 * the header and the generated loops as a wrapped or negative size. */
static int check_size(const kn_node *n, int i, const kn_value *v)
{
    if (!kn_shape_is_static(&v->shape) || kn_shape_nbytes(v->dtype, &v->shape) >= 0) return KN_OK;
    char dims[256];
    kn_shape_str(v->shape.rank, v->shape.dims, dims, sizeof dims);
    const char *why = kn_shape_numel(v->shape.rank, v->shape.dims) < 0 ? "whose element count does not fit in 64 bits"
                                                                       : "over kiln's limit of 2^62 bytes per tensor";
    if (!n)
        return kn_error(KN_ERR_UNSUPPORTED, "graph input '%s' has shape %s (%s), %s", v->name, dims,
                        kn_dtype_name(v->dtype), why);
    return kn_node_error(n, KN_ERR_UNSUPPORTED, "output %d '%s' has shape %s (%s), %s", i, v->name, dims,
                         kn_dtype_name(v->dtype), why);
}

/* A dtype the model file declares for an output (value_info, graph output)
 * must be the one the node computes: kiln would otherwise size and read the
 * value by one dtype and compute it in another. onnxruntime refuses such a
 * model as well. Checked once, on the first inference after import. */
static int check_declared(const kn_node *n, const kn_dtype *declared)
{
    for (int i = 0; i < n->n_outputs && i < 16; i++) {
        kn_value *v = n->outputs[i];
        if (!v || declared[i] == KN_DT_UNDEFINED) continue;
        v->flags &= ~(unsigned)KN_VALUE_DECLARED_TYPE;
        if (v->dtype != KN_DT_UNDEFINED && v->dtype != declared[i])
            return kn_node_error(n, KN_ERR_INVALID, "output %d '%s' is declared %s in the model but the node computes %s",
                                 i, v->name, kn_dtype_name(declared[i]), kn_dtype_name(v->dtype));
    }
    return KN_OK;
}

int kn_graph_infer(kn_graph *g)
{
    for (int i = 0; i < g->n_inputs; i++) {
        int st = check_size(NULL, i, g->inputs[i]);
        if (st) return st;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        kn_node *n = g->nodes[k];
        const kn_op_info *oi = n->op != KN_OP_UNKNOWN ? kn_op_get(n->op) : NULL;
        int st = infer_subgraphs(n);
        if (st) return st;
        if (!oi || !oi->infer) continue; /* outputs stay unknown */
        kn_dtype declared[16];
        bool any_declared = false;
        for (int i = 0; i < n->n_outputs && i < 16; i++) {
            const kn_value *v = n->outputs[i];
            declared[i] = v && (v->flags & KN_VALUE_DECLARED_TYPE) ? v->dtype : KN_DT_UNDEFINED;
            any_declared |= declared[i] != KN_DT_UNDEFINED;
        }
        st = oi->infer(n);
        if (!st && any_declared) st = check_declared(n, declared);
        for (int i = 0; !st && i < n->n_outputs; i++)
            if (n->outputs[i]) st = check_size(n, i, n->outputs[i]);
        if (st) return st;
        propagate_varying(n);
        st = propagate_constants(g, n);
        if (st) return st;
    }
    return KN_OK;
}
