/*
 * Execution of the 'linalg' ops (see opdesc.h): MatMul, Gemm, Einsum, the
 * softmax family, Det, and the quantization ops (QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
 * ConvInteger, QLinearConv).
 *
 * Attributes and opset-dependent semantics are resolved here (and in
 * linalg_attrs.c, which inference shares) into plain kernel parameters of
 * runtime/kernels/ref/k_linalg.h; output shapes come from the kernels' *_shape
 * helpers, as in inference. Kernel errors get the node's name prepended.
 */
#include <stdio.h>
#include <string.h>

#include "fastops.h"
#include "linalg_int.h"

/* ---- helpers ---------------------------------------------------------------- */

static int require_in(const kn_opdesc *d, const kn_tensor *const *in, int i)
{
    if (!kn_op_input(d, in, i)) return kn_op_error(d, KN_ERR_INVALID, "input %d is missing", i);
    return KN_OK;
}

static bool is_num(kn_dtype dt)
{
    const kn_dtype_traits *t = kn_dtype_info(dt);
    return t->is_float || t->is_integer;
}

static bool is_float(kn_dtype dt) { return kn_dtype_info(dt)->is_float; }

/* ---- MatMul, Gemm --------------------------------------------------------------- */

static int exec_matmul(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_tensor *a = kn_op_input(d, in, 0), *b = kn_op_input(d, in, 1);
    int r;
    int64_t dims[KN_MAX_RANK];
    if (!a || !b) return kn_op_error(d, KN_ERR_INVALID, "an input is missing");
    if (a->dtype != b->dtype)
        return kn_op_error(d, KN_ERR_INVALID, "inputs have dtypes %s and %s", kn_dtype_name(a->dtype),
                           kn_dtype_name(b->dtype));
    if (!is_num(a->dtype)) return kn_op_error(d, KN_ERR_INVALID, "dtype %s", kn_dtype_name(a->dtype));
    int st = kn_k_matmul_shape(a->rank, a->dims, b->rank, b->dims, &r, dims);
    if (!st) st = kn_tensor_alloc(&out[0], a->dtype, r, dims);
    if (!st) st = kn_k_matmul(a, b, &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

static int exec_gemm(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    int st = require_in(d, in, 0);
    if (!st) st = require_in(d, in, 1);
    if (st) return st;
    const kn_tensor *a = in[0], *b = in[1], *c = kn_op_input(d, in, 2);
    if (a->rank != 2 || b->rank != 2)
        return kn_op_error(d, KN_ERR_INVALID, "A and B must be 2-D (got ranks %d and %d)", a->rank, b->rank);
    bool ta = kn_op_attr_int(d, "transA", 0) != 0, tb = kn_op_attr_int(d, "transB", 0) != 0;
    int64_t dims[2] = {a->dims[ta ? 1 : 0], b->dims[tb ? 0 : 1]};
    st = kn_tensor_alloc(&out[0], a->dtype, 2, dims);
    if (!st)
        st = kn_k_gemm(a, b, c, ta, tb, kn_op_attr_float(d, "alpha", 1.0f), kn_op_attr_float(d, "beta", 1.0f),
                       &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

/* ---- Softmax, LogSoftmax, Hardmax --------------------------------------------- */

static int exec_softmax_mode(const kn_opdesc *d, const kn_tensor *const *in, int mode, kn_tensor *out)
{
    if (require_in(d, in, 0)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    int64_t axis = kn_linalg_softmax_axis(d);
    bool legacy = d->opset < 13;
    int a = kn_norm_axis(axis, x->rank);
    if (a < 0) return kn_op_error(d, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
    if (!is_float(x->dtype)) return kn_op_error(d, KN_ERR_INVALID, "dtype %s; expected a float type", kn_dtype_name(x->dtype));
    int64_t outer = kn_shape_numel(a, x->dims), mid, inner;
    if (legacy) {
        mid = kn_shape_numel(x->rank - a, x->dims + a);
        inner = 1;
    } else {
        mid = x->dims[a];
        inner = kn_shape_numel(x->rank - a - 1, x->dims + a + 1);
    }
    int st = kn_op_alloc_output(d, out, x->dtype, x->rank, x->dims, false);
    if (!st) { /* compiled artifacts: the f32 fast path first (fastops.h) */
        st = mode == KN_K_SOFTMAX ? kn_fast_softmax(d->sess, x, outer, mid, inner, out) : KN_ERR_UNSUPPORTED;
        if (st == KN_ERR_UNSUPPORTED) st = kn_k_softmax(x, outer, mid, inner, mode, out);
    }
    return st ? kn_op_fail(d, st) : KN_OK;
}

static int exec_softmax(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_softmax_mode(d, in, KN_K_SOFTMAX, out);
}

static int exec_logsoftmax(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_softmax_mode(d, in, KN_K_LOGSOFTMAX, out);
}

static int exec_hardmax(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_softmax_mode(d, in, KN_K_HARDMAX, out);
}

/* ---- Det, Einsum ---------------------------------------------------------------- */

static int exec_det(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (require_in(d, in, 0)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return kn_op_error(d, KN_ERR_INVALID, "input must be [..., M, M] (rank %d)", x->rank);
    int st = kn_tensor_alloc(&out[0], x->dtype, x->rank - 2, x->dims);
    if (!st) st = kn_k_det(x, &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

static int exec_einsum(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const char *eq = kn_op_attr_string(d, "equation", NULL);
    if (!eq) return kn_op_error(d, KN_ERR_INVALID, "attribute 'equation' is missing");
    if (d->n_inputs < 1) return kn_op_error(d, KN_ERR_INVALID, "no operands");
    if (d->n_inputs > KN_MAX_RANK * 2) return kn_op_error(d, KN_ERR_UNSUPPORTED, "%d operands", d->n_inputs);
    int ranks[KN_MAX_RANK * 2];
    const int64_t *dims[KN_MAX_RANK * 2];
    for (int i = 0; i < d->n_inputs; i++) {
        if (require_in(d, in, i)) return KN_ERR_INVALID;
        ranks[i] = in[i]->rank;
        dims[i] = in[i]->dims;
    }
    int r;
    int64_t od[KN_MAX_RANK];
    int st = kn_k_einsum_shape(eq, d->n_inputs, ranks, dims, &r, od);
    if (!st) st = kn_tensor_alloc(&out[0], in[0]->dtype, r, od);
    if (!st) st = kn_k_einsum(eq, d->n_inputs, in, &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

/* ---- QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear -------------------- */

static int exec_quantize(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    int st = require_in(d, in, 0);
    if (!st) st = require_in(d, in, 1);
    if (st) return st;
    const kn_tensor *zp = kn_op_input(d, in, 2);
    kn_dtype dt = kn_linalg_quant_out_dtype(d, zp ? zp->dtype : KN_DT_UNDEFINED);
    if (!kn_dtype_valid(dt)) return kn_op_error(d, KN_ERR_UNSUPPORTED, "output dtype %d", (int)dt);
    st = kn_tensor_alloc(&out[0], dt, in[0]->rank, in[0]->dims);
    if (!st)
        st = kn_k_quantize(in[0], in[1], zp, (int)kn_op_attr_int(d, "axis", 1), kn_op_attr_int(d, "block_size", 0),
                           &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

static int exec_dequantize(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    int st = require_in(d, in, 0);
    if (!st) st = require_in(d, in, 1);
    if (st) return st;
    kn_dtype dt;
    if ((st = kn_linalg_dequant_out_dtype(d, in[1]->dtype, &dt))) return st;
    if (!is_float(dt)) return kn_op_error(d, KN_ERR_UNSUPPORTED, "output dtype %s", kn_dtype_name(dt));
    st = kn_tensor_alloc(&out[0], dt, in[0]->rank, in[0]->dims);
    if (!st)
        st = kn_k_dequantize(in[0], in[1], kn_op_input(d, in, 2), (int)kn_op_attr_int(d, "axis", 1),
                             kn_op_attr_int(d, "block_size", 0), &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

static int exec_dynquant(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (require_in(d, in, 0)) return KN_ERR_INVALID;
    if (in[0]->dtype != KN_F32)
        return kn_op_error(d, KN_ERR_INVALID, "input has dtype %s, expected f32", kn_dtype_name(in[0]->dtype));
    /* All three are computed together, so allocate them even if some are unused. */
    kn_tensor t[3] = {{0}};
    int st = kn_tensor_alloc(&t[0], KN_U8, in[0]->rank, in[0]->dims);
    if (!st) st = kn_tensor_alloc(&t[1], KN_F32, 0, NULL);
    if (!st) st = kn_tensor_alloc(&t[2], KN_U8, 0, NULL);
    if (!st) st = kn_k_dynamic_quantize(in[0], &t[0], &t[1], &t[2]);
    for (int i = 0; i < 3; i++) {
        if (!st && kn_op_has_output(d, i)) out[i] = t[i];
        else kn_tensor_free(&t[i]);
    }
    return st ? kn_op_fail(d, st) : KN_OK;
}

/* ---- MatMulInteger, QLinearMatMul ----------------------------------------------- */

static int exec_matmul_integer(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    int st = require_in(d, in, 0);
    if (!st) st = require_in(d, in, 1);
    if (st) return st;
    int r;
    int64_t dims[KN_MAX_RANK];
    st = kn_k_matmul_shape(in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, &r, dims);
    if (!st) st = kn_tensor_alloc(&out[0], KN_I32, r, dims);
    if (!st) st = kn_k_matmul_integer(in[0], in[1], kn_op_input(d, in, 2), kn_op_input(d, in, 3), &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

/* Gathers the operands of the QLinear ops into q[0..n); zero points (2, 5,
 * 7) and the bias (8) may be omitted, the rest are required. */
static int qlinear_inputs(const kn_opdesc *d, const kn_tensor *const *in, int n, const kn_tensor **q)
{
    for (int i = 0; i < n; i++) {
        q[i] = kn_op_input(d, in, i);
        if (!q[i] && i != 2 && i != 5 && i != 7 && i != 8)
            return kn_op_error(d, KN_ERR_INVALID, "input %d is missing", i);
    }
    return KN_OK;
}

static int exec_qlinear_matmul(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_tensor *q[8];
    int st = qlinear_inputs(d, in, 8, q);
    if (st) return st;
    int r;
    int64_t dims[KN_MAX_RANK];
    st = kn_k_matmul_shape(q[0]->rank, q[0]->dims, q[3]->rank, q[3]->dims, &r, dims);
    if (!st) st = kn_tensor_alloc(&out[0], q[7] ? q[7]->dtype : q[0]->dtype, r, dims);
    if (!st) st = kn_k_qlinear_matmul(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

/* ---- ConvInteger, QLinearConv ------------------------------------------------------ */

/* Allocates the convolution output of x by w and resolves p. */
static int conv_alloc(const kn_opdesc *d, const kn_tensor *x, const kn_tensor *w, kn_dtype dt,
                      kn_k_conv_params *p, kn_tensor *out)
{
    if (x->rank < 3 || w->rank != x->rank)
        return kn_op_error(d, KN_ERR_INVALID, "input rank %d and weight rank %d do not fit a convolution", x->rank,
                           w->rank);
    int st = kn_linalg_conv_params(d, x->rank - 2, w->dims, p);
    if (st) return st;
    int64_t dims[KN_MAX_RANK] = {x->dims[0], w->dims[0]};
    st = kn_k_conv_out_dims(p, x->dims + 2, dims + 2);
    if (!st) st = kn_tensor_alloc(out, dt, x->rank, dims);
    return st ? kn_op_fail(d, st) : KN_OK;
}

static int exec_conv_integer(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    int st = require_in(d, in, 0);
    if (!st) st = require_in(d, in, 1);
    if (st) return st;
    kn_k_conv_params p;
    st = conv_alloc(d, in[0], in[1], KN_I32, &p, &out[0]);
    if (st) return st;
    st = kn_k_conv_integer(in[0], in[1], kn_op_input(d, in, 2), kn_op_input(d, in, 3), NULL, &p, &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

static int exec_qlinear_conv(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_tensor *q[9];
    int st = qlinear_inputs(d, in, 9, q);
    if (st) return st;
    kn_k_conv_params p;
    st = conv_alloc(d, q[0], q[3], q[7] ? q[7]->dtype : q[0]->dtype, &p, &out[0]);
    if (st) return st;
    st = kn_k_qlinear_conv(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], &p, &out[0]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

const kn_exec_impl kn_exec_linalg[] = {
    {KN_OP_MatMul, exec_matmul},
    {KN_OP_Gemm, exec_gemm},
    {KN_OP_Einsum, exec_einsum},
    {KN_OP_Softmax, exec_softmax},
    {KN_OP_LogSoftmax, exec_logsoftmax},
    {KN_OP_Hardmax, exec_hardmax},
    {KN_OP_Det, exec_det},
    {KN_OP_QuantizeLinear, exec_quantize},
    {KN_OP_DequantizeLinear, exec_dequantize},
    {KN_OP_DynamicQuantizeLinear, exec_dynquant},
    {KN_OP_MatMulInteger, exec_matmul_integer},
    {KN_OP_QLinearMatMul, exec_qlinear_matmul},
    {KN_OP_ConvInteger, exec_conv_integer},
    {KN_OP_QLinearConv, exec_qlinear_conv},
    {KN_OP_UNKNOWN, NULL},
};
