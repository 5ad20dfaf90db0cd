/*
 * ir/cost.c — how much arithmetic a node does, from its inferred shapes.
 *
 * Used by `kiln inspect` (a model's FLOPs) and by the CPU compiler, which
 * records each step's FLOPs in the artifact for `kiln profile`. The counts
 * are the conventional ones, so that GFLOP/s compare with what other tools
 * and papers print: a multiply-add is 2 FLOPs (Conv, ConvTranspose, MatMul,
 * Gemm and their integer and quantized forms; the gates' products of
 * RNN, GRU and LSTM), pure data movement is 0, and
 * any other op is estimated at one operation per output element (per input
 * element for reductions, per window element for pooling).
 */
#include "ir.h"

static int64_t numel_of(const kn_value *v)
{
    return v && kn_shape_is_static(&v->shape) ? kn_shape_numel(v->shape.rank, v->shape.dims) : -1;
}

/* Ops that only copy, select or reinterpret bytes. */
static bool is_movement(kn_op op)
{
    switch (op) {
    case KN_OP_Reshape: case KN_OP_Flatten: case KN_OP_Squeeze: case KN_OP_Unsqueeze: case KN_OP_Identity:
    case KN_OP_Transpose: case KN_OP_Concat: case KN_OP_Split: case KN_OP_Slice: case KN_OP_Gather:
    case KN_OP_GatherElements: case KN_OP_GatherND: case KN_OP_Pad: case KN_OP_Expand: case KN_OP_Tile:
    case KN_OP_DepthToSpace: case KN_OP_SpaceToDepth: case KN_OP_Shape: case KN_OP_Size: case KN_OP_Constant:
    case KN_OP_ConstantOfShape: case KN_OP_Cast: case KN_OP_Dropout: case KN_OP_ScatterElements:
    case KN_OP_ScatterND: return true;
    default: return false;
    }
}

/* Multiply-adds of a convolution: per output element Cin/group * prod(kernel)
 * (ConvTranspose: per input element Cout/group * prod(kernel)). */
static double conv_macs(const kn_node *n, int w_index, int64_t out)
{
    const kn_value *w = kn_node_input(n, w_index);
    if (!w || !kn_shape_is_static(&w->shape) || w->shape.rank < 2) return -1;
    int64_t per = 1;
    for (int i = 1; i < w->shape.rank; i++) per *= w->shape.dims[i];
    if (n->op != KN_OP_ConvTranspose && n->op != KN_OP_FusedConvTranspose) return (double)out * (double)per;
    int64_t x = numel_of(kn_node_input(n, 0));
    return x < 0 ? -1 : (double)x * (double)per;
}

/* Multiply-adds of a matrix product: per output element, the shared dim K. */
static double matmul_macs(const kn_node *n, int a_index, int64_t out)
{
    const kn_value *a = kn_node_input(n, a_index);
    if (!a || a->shape.rank < 1 || a->shape.dims[a->shape.rank - 1] < 0) return -1;
    int64_t k = a->shape.dims[a->shape.rank - 1];
    if ((n->op == KN_OP_Gemm || n->op == KN_OP_FusedMatMul) && kn_attr_int(n, "transA", 0) && a->shape.rank == 2)
        k = a->shape.dims[0];
    return (double)out * (double)k;
}

/* Pooling: one operation per window element of every output. */
static double pool_ops(const kn_node *n, int64_t out)
{
    if (n->op == KN_OP_GlobalAveragePool || n->op == KN_OP_GlobalMaxPool) {
        int64_t x = numel_of(kn_node_input(n, 0));
        return x < 0 ? -1 : (double)x;
    }
    const int64_t *k = NULL;
    int nk = kn_attr_ints(n, "kernel_shape", &k);
    double per = 1;
    for (int i = 0; i < nk; i++) per *= (double)k[i];
    return (double)out * per;
}

/* A fused op (or kiln's integer QConv/QMatMul): its product, then one
 * operation per output element for the bias and for each post-op
 * (activations, residual Add). */
static double fused_flops(const kn_node *n, int64_t out)
{
    bool conv = n->op == KN_OP_FusedConv || n->op == KN_OP_FusedConvTranspose || n->op == KN_OP_QConv;
    double macs = conv ? conv_macs(n, 1, out) : matmul_macs(n, 0, out);
    if (macs < 0) return -1;
    const kn_attr *posts = kn_node_attr(n, "post_ops");
    int extra = (kn_node_input(n, 2) != NULL) + (posts ? posts->n : 0);
    return 2 * macs + (double)out * extra;
}

/* A recurrent layer (RNN, GRU, LSTM; W [dirs, G*H, I], R [dirs, G*H, H]):
 * at every step of every sequence and direction, the G gates' products with
 * the step's input and the previous hidden state, G*H*(I + H)
 * multiply-adds, then one operation per gate value (bias and activation).
 * Steps past a sequence's sequence_lens entry count too: the figure is the
 * padded batch's. X holds steps x batch rows of I values in either layout;
 * every output may be omitted, so none is read. */
static double recurrent_flops(const kn_node *n)
{
    const kn_value *x = kn_node_input(n, 0), *w = kn_node_input(n, 1), *r = kn_node_input(n, 2);
    if (!w || !r || w->shape.rank != 3 || r->shape.rank != 3 || !kn_shape_is_static(&w->shape) ||
        !kn_shape_is_static(&r->shape))
        return -1;
    int64_t xn = numel_of(x), dirs = w->shape.dims[0], gh = w->shape.dims[1], in = w->shape.dims[2];
    int64_t h = r->shape.dims[2];
    if (xn < 0 || in < 1) return -1;
    double rows = (double)(xn / in) * (double)dirs;
    return rows * (2.0 * (double)gh * (double)(in + h) + (double)gh);
}

/* ONNX Attention (Q [B, Hq, S, D] or [B, S, Hq*D]; K [B, Hkv, T, D] or
 * [B, T, Hkv*D]; past_key [B, Hkv, P, D]; Y with head size Dv): for every
 * head, query row and key, D multiply-adds for the score and Dv for the
 * weighted value, then one operation for mask and softmax. T counts the
 * past keys; masked, causal or padded keys count too (the dense figure).
 * kiln::PackedAttention: every token of the packed Q against the S keys of
 * a full sequence (the most it may see). */
static double attention_flops(const kn_node *n)
{
    const kn_value *q = kn_node_input(n, 0), *k = kn_node_input(n, 1), *past = kn_node_input(n, 4);
    int64_t qn = numel_of(q), yn = numel_of(n->outputs[0]);
    if (qn < 0 || yn < 0 || !k || (k->shape.rank != 3 && k->shape.rank != 4) || q->shape.rank != k->shape.rank ||
        !kn_shape_is_static(&k->shape))
        return -1;
    bool three_d = q->shape.rank == 3;
    int64_t t = k->shape.dims[three_d ? 1 : 2];
    if (n->op == KN_OP_PackedAttention) { /* each token sees at most its sequence: the mask's S */
        const kn_value *m = kn_node_input(n, 3);
        if (!m || m->shape.rank != 2 || m->shape.dims[1] < 1) return -1;
        t = m->shape.dims[1];
    } else if (past) {
        if (past->shape.rank != 4 || !kn_shape_is_static(&past->shape)) return -1;
        t += past->shape.dims[2];
    }
    int64_t heads = three_d ? kn_attr_int(n, "q_num_heads", 0) : q->shape.dims[1];
    int64_t d = q->shape.dims[q->shape.rank - 1] / (three_d ? heads : 1);
    if (heads < 1 || d < 1) return -1;
    return 2.0 * (double)t * (double)(qn + yn) + (double)(qn / d) * (double)t;
}

double kn_node_flops(const kn_node *n)
{
    if (!n || n->n_outputs < 1) return -1;
    if (n->op == KN_OP_RNN || n->op == KN_OP_GRU || n->op == KN_OP_LSTM) return recurrent_flops(n);
    if (n->op == KN_OP_Attention || n->op == KN_OP_PackedAttention) return attention_flops(n);
    int64_t out = numel_of(n->outputs[0]);
    if (out < 0) return -1;
    double macs;
    switch (n->op) {
    case KN_OP_Conv:
    case KN_OP_ConvInteger:
    case KN_OP_ConvTranspose: macs = conv_macs(n, 1, out); break;
    case KN_OP_QLinearConv: macs = conv_macs(n, 3, out); break;
    case KN_OP_MatMul:
    case KN_OP_MatMulInteger:
    case KN_OP_Gemm:
    case KN_OP_QLinearMatMul: macs = matmul_macs(n, 0, out); break;
    case KN_OP_FusedConv:
    case KN_OP_FusedConvTranspose:
    case KN_OP_FusedMatMul:
    case KN_OP_QConv: /* integer multiply-adds, counted as FLOPs are: 2 per product */
    case KN_OP_QMatMul: return fused_flops(n, out);
    case KN_OP_AveragePool:
    case KN_OP_MaxPool:
    case KN_OP_LpPool:
    case KN_OP_GlobalAveragePool:
    case KN_OP_GlobalMaxPool: return pool_ops(n, out);
    case KN_OP_ReduceSum: case KN_OP_ReduceMean: case KN_OP_ReduceMax: case KN_OP_ReduceMin:
    case KN_OP_ReduceProd: case KN_OP_ReduceL1: case KN_OP_ReduceL2: case KN_OP_ReduceLogSum:
    case KN_OP_ReduceLogSumExp: case KN_OP_ReduceSumSquare: case KN_OP_ArgMax: case KN_OP_ArgMin: {
        int64_t x = numel_of(kn_node_input(n, 0));
        return x < 0 ? -1 : (double)x;
    }
    default: return is_movement(n->op) ? 0 : (double)out;
    }
    return macs < 0 ? -1 : 2 * macs;
}
