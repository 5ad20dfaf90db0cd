/*
 * Op definitions of the 'linalg' family (see ir/ops.h): MatMul, Gemm, Einsum,
 * the softmax family, Det, and the quantization ops (QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
 * ConvInteger, QLinearConv).
 *
 * Attributes and opset-dependent semantics are resolved here into plain
 * kernel parameters (runtime/kernels/k_linalg.h). Shape arithmetic shared by
 * inference and evaluation lives in the kernels' *_shape helpers, so the
 * two cannot disagree; errors from kernels get the node's name prepended.
 */
#include <stdio.h>
#include <string.h>

#include "../eval.h"
#include "k_linalg.h"

/* ---- helpers ---------------------------------------------------------------- */

/* Re-raises the kernel's last message under the node's name. */
static int node_fail(const kn_node *n, int st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", kn_last_error());
    return kn_node_error(n, st, "%s", msg);
}

static int require(const kn_node *n, int i)
{
    if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
    return KN_OK;
}

static int require_in(const kn_node *n, const kn_tensor *const *in, int i)
{
    if (i >= n->n_inputs || !in[i]) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
    return KN_OK;
}

static bool is_num(kn_dtype dt)
{
    const kn_dtype_traits *t = kn_dtype_info(dt);
    return t->is_float || t->is_integer;
}

/* Input i's dtype must satisfy ok() (unknown dtypes pass). */
static int check_dtype(const kn_node *n, int i, bool (*ok)(kn_dtype), const char *what)
{
    kn_value *v = kn_node_input(n, i);
    if (!v || v->dtype == KN_DT_UNDEFINED || ok(v->dtype)) return KN_OK;
    return kn_node_error(n, KN_ERR_INVALID, "input %d has dtype %s; expected %s", i, kn_dtype_name(v->dtype), what);
}

static bool is_float(kn_dtype dt) { return kn_dtype_info(dt)->is_float; }
static bool is_q8(kn_dtype dt) { return dt == KN_U8 || dt == KN_I8 || dt == KN_U16 || dt == KN_I16; }

/* The dtype shared by inputs i and j (either may still be unknown). */
static int same_dtype(const kn_node *n, int i, int j, kn_dtype *out)
{
    kn_dtype a = kn_node_input(n, i)->dtype, b = kn_node_input(n, j)->dtype;
    if (a && b && a != b)
        return kn_node_error(n, KN_ERR_INVALID, "input %d has dtype %s but input %d has %s", i, kn_dtype_name(a), j,
                             kn_dtype_name(b));
    *out = a ? a : b;
    return KN_OK;
}

/* Output shape whose dims come from the given (value, axis) sources, keeping
 * symbolic names: src[k] NULL means the literal dims[k]. */
static kn_shape shape_from(int rank, const int64_t *dims, const kn_value *const *src, const int *axis)
{
    kn_shape s = {0};
    s.rank = rank;
    for (int k = 0; k < rank; k++) {
        s.dims[k] = dims[k];
        if (dims[k] < 0 && src[k]) s.sym[k] = src[k]->shape.sym[axis[k]];
    }
    return s;
}

/* ---- MatMul ----------------------------------------------------------------- */

/* Infers a matmul-shaped output from inputs ia and ib (also used by the
 * integer variants); dims keep the symbolic names of the dims they copy. */
static int infer_matmul_shape(kn_node *n, int ia, int ib, kn_dtype dt)
{
    const kn_value *a = kn_node_input(n, ia), *b = kn_node_input(n, ib);
    if (a->shape.rank < 0 || b->shape.rank < 0) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 0, dt, &u);
        return KN_OK;
    }
    int r, ra = a->shape.rank, rb = b->shape.rank;
    int64_t d[KN_MAX_RANK];
    int st = kn_k_matmul_shape(ra, a->shape.dims, rb, b->shape.dims, &r, d);
    if (st) return node_fail(n, st);
    const kn_value *src[KN_MAX_RANK];
    int ax[KN_MAX_RANK];
    int nb = r - (ra >= 2) - (rb >= 2);
    for (int k = 0; k < nb; k++) { /* prefer the operand whose dim is not a broadcast 1 */
        int ka = k - (nb - (ra - 2)), kb = k - (nb - (rb - 2));
        bool use_a = ra > 2 && ka >= 0 && a->shape.dims[ka] != 1;
        src[k] = use_a ? a : (rb > 2 && kb >= 0 ? b : NULL);
        ax[k] = use_a ? ka : kb;
    }
    int o = nb;
    if (ra >= 2) src[o] = a, ax[o++] = ra - 2;
    if (rb >= 2) src[o] = b, ax[o++] = rb - 1;
    kn_shape s = shape_from(r, d, src, ax);
    kn_infer_set_shape(n, 0, dt, &s);
    return KN_OK;
}

static int infer_matmul(kn_node *n)
{
    kn_dtype dt;
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 0, is_num, "a numeric type");
    if (!st) st = same_dtype(n, 0, 1, &dt);
    return st ? st : infer_matmul_shape(n, 0, 1, dt);
}

static int eval_matmul(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    const kn_tensor *a = in[0], *b = in[1];
    int r;
    int64_t d[KN_MAX_RANK];
    if (!a || !b) return kn_node_error(n, KN_ERR_INVALID, "an input is missing");
    if (a->dtype != b->dtype)
        return kn_node_error(n, KN_ERR_INVALID, "inputs have dtypes %s and %s", kn_dtype_name(a->dtype),
                             kn_dtype_name(b->dtype));
    if (!is_num(a->dtype)) return kn_node_error(n, KN_ERR_INVALID, "dtype %s", kn_dtype_name(a->dtype));
    int st = kn_k_matmul_shape(a->rank, a->dims, b->rank, b->dims, &r, d);
    if (!st) st = kn_tensor_alloc(&out[0], a->dtype, r, d);
    if (!st) st = kn_k_matmul(a, b, &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

/* ---- Gemm ------------------------------------------------------------------- */

static int infer_gemm(kn_node *n)
{
    kn_dtype dt;
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 0, is_num, "a numeric type");
    if (!st) st = same_dtype(n, 0, 1, &dt);
    if (st) return st;
    const kn_value *a = n->inputs[0], *b = n->inputs[1], *c = kn_node_input(n, 2);
    if (a->shape.rank < 0 || b->shape.rank < 0) {
        kn_shape u = {.rank = 2, .dims = {-1, -1}};
        kn_infer_set_shape(n, 0, dt, &u);
        return KN_OK;
    }
    if (a->shape.rank != 2 || b->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "A and B must be 2-D (got ranks %d and %d)", a->shape.rank,
                             b->shape.rank);
    int ta = kn_attr_int(n, "transA", 0) != 0, tb = kn_attr_int(n, "transB", 0) != 0;
    int64_t ka = a->shape.dims[ta ? 0 : 1], kb = b->shape.dims[tb ? 1 : 0];
    if (ka >= 0 && kb >= 0 && ka != kb)
        return kn_node_error(n, KN_ERR_INVALID, "inner dimensions differ: op(A) has %lld columns, op(B) %lld rows",
                             (long long)ka, (long long)kb);
    int64_t d[2] = {a->shape.dims[ta ? 1 : 0], b->shape.dims[tb ? 0 : 1]};
    const kn_value *src[2] = {a, b};
    int ax[2] = {ta ? 1 : 0, tb ? 0 : 1};
    if (c && c->shape.rank > 2)
        return kn_node_error(n, KN_ERR_INVALID, "C has rank %d, expected <= 2", c->shape.rank);
    for (int i = 0; c && i < c->shape.rank; i++) {
        int64_t cd = c->shape.dims[i], want = d[2 - c->shape.rank + i];
        if (cd >= 0 && want >= 0 && cd != 1 && cd != want)
            return kn_node_error(n, KN_ERR_INVALID, "C dim %lld cannot be broadcast to %lld", (long long)cd,
                                 (long long)want);
    }
    kn_shape s = shape_from(2, d, src, ax);
    kn_infer_set_shape(n, 0, dt, &s);
    return KN_OK;
}

static int eval_gemm(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = require_in(n, in, 0);
    if (!st) st = require_in(n, in, 1);
    if (st) return st;
    const kn_tensor *a = in[0], *b = in[1], *c = n->n_inputs > 2 ? in[2] : NULL;
    if (a->rank != 2 || b->rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "A and B must be 2-D (got ranks %d and %d)", a->rank, b->rank);
    bool ta = kn_attr_int(n, "transA", 0) != 0, tb = kn_attr_int(n, "transB", 0) != 0;
    int64_t d[2] = {a->dims[ta ? 1 : 0], b->dims[tb ? 0 : 1]};
    st = kn_tensor_alloc(&out[0], a->dtype, 2, d);
    if (!st)
        st = kn_k_gemm(a, b, c, ta, tb, kn_attr_float(n, "alpha", 1.0f), kn_attr_float(n, "beta", 1.0f), &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

/* ---- Softmax, LogSoftmax, Hardmax --------------------------------------------- */

/* Before opset 13 these ops flatten the input to 2-D at `axis` (default 1);
 * from 13 on they work along the single axis `axis` (default -1). */
static int64_t softmax_axis(const kn_node *n) { return kn_attr_int(n, "axis", kn_node_opset(n) < 13 ? 1 : -1); }

static int infer_softmax(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = check_dtype(n, 0, is_float, "a float type");
    if (st) return st;
    int r = n->inputs[0]->shape.rank;
    int64_t axis = softmax_axis(n);
    if (r >= 0 && kn_norm_axis(axis, r) < 0)
        return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, r);
    return kn_infer_same_as_input(n, 0);
}

static int eval_softmax_mode(const kn_node *n, const kn_tensor *x, int mode, kn_tensor *out)
{
    int64_t axis = softmax_axis(n);
    bool legacy = kn_node_opset(n) < 13;
    int a = kn_norm_axis(axis, x->rank);
    if (a < 0) return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, x->rank);
    if (!is_float(x->dtype)) return kn_node_error(n, KN_ERR_INVALID, "dtype %s; expected a float type", kn_dtype_name(x->dtype));
    int64_t outer = kn_shape_numel(a, x->dims), mid, inner;
    if (legacy) {
        mid = kn_shape_numel(x->rank - a, x->dims + a);
        inner = 1;
    } else {
        mid = x->dims[a];
        inner = kn_shape_numel(x->rank - a - 1, x->dims + a + 1);
    }
    int st = kn_tensor_alloc(out, x->dtype, x->rank, x->dims);
    if (!st) st = kn_k_softmax(x, outer, mid, inner, mode, out);
    return st ? node_fail(n, st) : KN_OK;
}

static int eval_softmax(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return require_in(n, in, 0) ? KN_ERR_INVALID : eval_softmax_mode(n, in[0], KN_K_SOFTMAX, out);
}

static int eval_logsoftmax(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return require_in(n, in, 0) ? KN_ERR_INVALID : eval_softmax_mode(n, in[0], KN_K_LOGSOFTMAX, out);
}

static int eval_hardmax(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return require_in(n, in, 0) ? KN_ERR_INVALID : eval_softmax_mode(n, in[0], KN_K_HARDMAX, out);
}

/* ---- Det ---------------------------------------------------------------------- */

static int infer_det(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = check_dtype(n, 0, is_float, "a float type");
    if (st) return st;
    const kn_value *x = n->inputs[0];
    int r = x->shape.rank;
    if (r < 0) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 0, x->dtype, &u);
        return KN_OK;
    }
    if (r < 2) return kn_node_error(n, KN_ERR_INVALID, "input has rank %d, expected >= 2", r);
    int64_t m0 = x->shape.dims[r - 2], m1 = x->shape.dims[r - 1];
    if (m0 >= 0 && m1 >= 0 && m0 != m1)
        return kn_node_error(n, KN_ERR_INVALID, "matrices are %lldx%lld, not square", (long long)m0, (long long)m1);
    kn_shape s = x->shape;
    s.rank = r - 2;
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

static int eval_det(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    if (require_in(n, in, 0)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return kn_node_error(n, KN_ERR_INVALID, "input must be [..., M, M] (rank %d)", x->rank);
    int st = kn_tensor_alloc(&out[0], x->dtype, x->rank - 2, x->dims);
    if (!st) st = kn_k_det(x, &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

/* ---- Einsum --------------------------------------------------------------------- */

static int infer_einsum(kn_node *n)
{
    const char *eq = kn_attr_string(n, "equation", NULL);
    if (!eq) return kn_node_error(n, KN_ERR_INVALID, "attribute 'equation' is missing");
    if (n->n_inputs > KN_MAX_RANK * 2) return kn_node_error(n, KN_ERR_UNSUPPORTED, "%d operands", n->n_inputs);
    int ranks[KN_MAX_RANK * 2];
    const int64_t *dims[KN_MAX_RANK * 2];
    kn_dtype dt = KN_DT_UNDEFINED;
    bool known = true;
    for (int i = 0; i < n->n_inputs; i++) {
        int st = require(n, i);
        if (!st) st = check_dtype(n, i, is_num, "a numeric type");
        if (!st && i) st = same_dtype(n, 0, i, &dt);
        if (st) return st;
        if (!dt) dt = n->inputs[i]->dtype;
        ranks[i] = n->inputs[i]->shape.rank;
        dims[i] = n->inputs[i]->shape.dims;
        known = known && ranks[i] >= 0;
    }
    if (!known) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 0, dt, &u);
        return KN_OK;
    }
    int r;
    int64_t d[KN_MAX_RANK];
    int st = kn_k_einsum_shape(eq, n->n_inputs, ranks, dims, &r, d);
    if (st) return node_fail(n, st);
    kn_infer_set(n, 0, dt, r, d);
    return KN_OK;
}

static int eval_einsum(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    const char *eq = kn_attr_string(n, "equation", NULL);
    if (!eq) return kn_node_error(n, KN_ERR_INVALID, "attribute 'equation' is missing");
    if (n->n_inputs > KN_MAX_RANK * 2) return kn_node_error(n, KN_ERR_UNSUPPORTED, "%d operands", n->n_inputs);
    int ranks[KN_MAX_RANK * 2];
    const int64_t *dims[KN_MAX_RANK * 2];
    for (int i = 0; i < n->n_inputs; i++) {
        if (require_in(n, in, i)) return KN_ERR_INVALID;
        ranks[i] = in[i]->rank;
        dims[i] = in[i]->dims;
    }
    int r;
    int64_t d[KN_MAX_RANK];
    int st = kn_k_einsum_shape(eq, n->n_inputs, ranks, dims, &r, d);
    if (!st) st = kn_tensor_alloc(&out[0], in[0]->dtype, r, d);
    if (!st) st = kn_k_einsum(eq, n->n_inputs, in, &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

/* ---- QuantizeLinear / DequantizeLinear ------------------------------------------- */

/* The quantized dtype: the zero point's, else `output_dtype` (opset 21), else u8. */
static kn_dtype quant_out_dtype(const kn_node *n, kn_dtype zp_dt)
{
    if (zp_dt) return zp_dt;
    int64_t od = kn_attr_int(n, "output_dtype", 0);
    return od > 0 ? (kn_dtype)od : KN_U8;
}

static int infer_quantize(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 1, is_float, "a float scale");
    if (st) return st;
    const kn_value *zp = kn_node_input(n, 2);
    kn_dtype dt = quant_out_dtype(n, zp ? zp->dtype : KN_DT_UNDEFINED);
    if (zp && !zp->dtype) dt = KN_DT_UNDEFINED;
    else if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output dtype %d", (int)dt);
    kn_infer_set_shape(n, 0, dt, &n->inputs[0]->shape);
    return KN_OK;
}

static int eval_quantize(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = require_in(n, in, 0);
    if (!st) st = require_in(n, in, 1);
    if (st) return st;
    const kn_tensor *zp = n->n_inputs > 2 ? in[2] : NULL;
    kn_dtype dt = quant_out_dtype(n, zp ? zp->dtype : KN_DT_UNDEFINED);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output dtype %d", (int)dt);
    st = kn_tensor_alloc(&out[0], dt, in[0]->rank, in[0]->dims);
    if (!st)
        st = kn_k_quantize(in[0], in[1], zp, (int)kn_attr_int(n, "axis", 1), kn_attr_int(n, "block_size", 0),
                           &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

static int infer_dequantize(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 1, is_float, "a float scale");
    if (st) return st;
    int64_t od = kn_attr_int(n, "output_dtype", 0);
    if (od > 0 && !(kn_dtype_valid((int)od) && is_float((kn_dtype)od)))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "output dtype %lld", (long long)od);
    kn_infer_set_shape(n, 0, od > 0 ? (kn_dtype)od : n->inputs[1]->dtype, &n->inputs[0]->shape);
    return KN_OK;
}

static int eval_dequantize(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = require_in(n, in, 0);
    if (!st) st = require_in(n, in, 1);
    if (st) return st;
    int64_t od = kn_attr_int(n, "output_dtype", 0);
    kn_dtype dt = od > 0 ? (kn_dtype)od : in[1]->dtype;
    if (!kn_dtype_valid(dt) || !is_float(dt))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "output dtype %s", kn_dtype_name(dt));
    st = kn_tensor_alloc(&out[0], dt, in[0]->rank, in[0]->dims);
    if (!st)
        st = kn_k_dequantize(in[0], in[1], n->n_inputs > 2 ? in[2] : NULL, (int)kn_attr_int(n, "axis", 1),
                             kn_attr_int(n, "block_size", 0), &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

static bool is_f32(kn_dtype dt) { return dt == KN_F32; }

static int infer_dynquant(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = check_dtype(n, 0, is_f32, "f32");
    if (st) return st;
    kn_infer_set_shape(n, 0, KN_U8, &n->inputs[0]->shape);
    kn_infer_set(n, 1, KN_F32, 0, NULL);
    kn_infer_set(n, 2, KN_U8, 0, NULL);
    return KN_OK;
}

static int eval_dynquant(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    if (require_in(n, in, 0)) return KN_ERR_INVALID;
    if (in[0]->dtype != KN_F32)
        return kn_node_error(n, KN_ERR_INVALID, "input has dtype %s, expected f32", kn_dtype_name(in[0]->dtype));
    /* All three are computed together, so allocate them even if some are unused. */
    kn_tensor t[3] = {{0}};
    int st = kn_tensor_alloc(&t[0], KN_U8, in[0]->rank, in[0]->dims);
    if (!st) st = kn_tensor_alloc(&t[1], KN_F32, 0, NULL);
    if (!st) st = kn_tensor_alloc(&t[2], KN_U8, 0, NULL);
    if (!st) st = kn_k_dynamic_quantize(in[0], &t[0], &t[1], &t[2]);
    for (int i = 0; i < 3; i++) {
        if (!st && i < n->n_outputs && n->outputs[i]) out[i] = t[i];
        else kn_tensor_free(&t[i]);
    }
    return st ? node_fail(n, st) : KN_OK;
}

/* ---- MatMulInteger / QLinearMatMul ----------------------------------------------- */

static int infer_matmul_integer(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 0, is_q8, "an 8-bit integer type");
    if (!st) st = check_dtype(n, 1, is_q8, "an 8-bit integer type");
    return st ? st : infer_matmul_shape(n, 0, 1, KN_I32);
}

static int eval_matmul_integer(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = require_in(n, in, 0);
    if (!st) st = require_in(n, in, 1);
    if (st) return st;
    int r;
    int64_t d[KN_MAX_RANK];
    st = kn_k_matmul_shape(in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, &r, d);
    if (!st) st = kn_tensor_alloc(&out[0], KN_I32, r, d);
    if (!st)
        st = kn_k_matmul_integer(in[0], in[1], n->n_inputs > 2 ? in[2] : NULL, n->n_inputs > 3 ? in[3] : NULL,
                                 &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

static int infer_qlinear_matmul(kn_node *n)
{
    for (int i = 0; i < 8; i++) {
        if (i == 2 || i == 5 || i == 7) continue; /* zero points are optional in practice */
        int st = require(n, i);
        if (st) return st;
    }
    int st = check_dtype(n, 0, is_q8, "an 8-bit integer type");
    if (!st) st = check_dtype(n, 3, is_q8, "an 8-bit integer type");
    if (st) return st;
    const kn_value *yzp = kn_node_input(n, 7);
    return infer_matmul_shape(n, 0, 3, yzp ? yzp->dtype : n->inputs[0]->dtype);
}

static int eval_qlinear_matmul(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    const kn_tensor *q[8] = {0};
    for (int i = 0; i < 8 && i < n->n_inputs; i++) q[i] = in[i];
    for (int i = 0; i < 8; i++)
        if (!q[i] && i != 2 && i != 5 && i != 7) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
    int r;
    int64_t d[KN_MAX_RANK];
    int st = kn_k_matmul_shape(q[0]->rank, q[0]->dims, q[3]->rank, q[3]->dims, &r, d);
    if (!st) st = kn_tensor_alloc(&out[0], q[7] ? q[7]->dtype : q[0]->dtype, r, d);
    if (!st) st = kn_k_qlinear_matmul(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

/* ---- ConvInteger / QLinearConv ----------------------------------------------------- */

/* Conv geometry from attributes; kernel dims default to the weight's. */
static int conv_params(const kn_node *n, int nsp, const int64_t *w_dims, kn_k_conv_params *p)
{
    memset(p, 0, sizeof *p);
    if (nsp < 1 || nsp > KN_MAX_RANK - 2)
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d does not fit a convolution", nsp + 2);
    p->nsp = nsp;
    p->group = kn_attr_int(n, "group", 1);
    const char *ap = kn_attr_string(n, "auto_pad", "NOTSET");
    if (!strcmp(ap, "NOTSET") || !*ap) p->auto_pad = KN_K_PAD_NOTSET;
    else if (!strcmp(ap, "SAME_UPPER")) p->auto_pad = KN_K_PAD_SAME_UPPER;
    else if (!strcmp(ap, "SAME_LOWER")) p->auto_pad = KN_K_PAD_SAME_LOWER;
    else if (!strcmp(ap, "VALID")) p->auto_pad = KN_K_PAD_VALID;
    else return kn_node_error(n, KN_ERR_INVALID, "unknown auto_pad '%s'", ap);
    const int64_t *v;
    int c = kn_attr_ints(n, "kernel_shape", &v);
    if (c && c != nsp) return kn_node_error(n, KN_ERR_INVALID, "kernel_shape has %d values, expected %d", c, nsp);
    for (int d = 0; d < nsp; d++) p->kernel[d] = c ? v[d] : (w_dims ? w_dims[2 + d] : -1);
    c = kn_attr_ints(n, "strides", &v);
    if (c && c != nsp) return kn_node_error(n, KN_ERR_INVALID, "strides has %d values, expected %d", c, nsp);
    for (int d = 0; d < nsp; d++) p->strides[d] = c ? v[d] : 1;
    c = kn_attr_ints(n, "dilations", &v);
    if (c && c != nsp) return kn_node_error(n, KN_ERR_INVALID, "dilations has %d values, expected %d", c, nsp);
    for (int d = 0; d < nsp; d++) p->dilations[d] = c ? v[d] : 1;
    c = kn_attr_ints(n, "pads", &v);
    if (c && c != 2 * nsp) return kn_node_error(n, KN_ERR_INVALID, "pads has %d values, expected %d", c, 2 * nsp);
    for (int d = 0; d < nsp; d++) {
        p->pad_begin[d] = c ? v[d] : 0;
        p->pad_end[d] = c ? v[nsp + d] : 0;
    }
    return KN_OK;
}

/* Output shape [N, M, spatial...] of a convolution of x by w. */
static int infer_conv_shape(kn_node *n, int ix, int iw, kn_dtype dt)
{
    const kn_value *x = kn_node_input(n, ix), *w = kn_node_input(n, iw);
    int r = x->shape.rank;
    if (r < 0 && w->shape.rank >= 0) r = w->shape.rank;
    if (r < 0) {
        kn_shape u = kn_shape_unknown();
        kn_infer_set_shape(n, 0, dt, &u);
        return KN_OK;
    }
    if (r < 3 || (w->shape.rank >= 0 && w->shape.rank != r) || (x->shape.rank >= 0 && x->shape.rank != r))
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d and weight rank %d do not fit a convolution",
                             x->shape.rank, w->shape.rank);
    kn_k_conv_params p;
    int st = conv_params(n, r - 2, w->shape.rank >= 0 ? w->shape.dims : NULL, &p);
    if (st) return st;
    int64_t in[KN_MAX_RANK], od[KN_MAX_RANK];
    for (int d = 0; d < r - 2; d++) in[d] = x->shape.rank >= 0 ? x->shape.dims[2 + d] : -1;
    bool kernel_known = true;
    for (int d = 0; d < r - 2; d++) kernel_known = kernel_known && p.kernel[d] >= 0;
    if (kernel_known) {
        st = kn_k_conv_out_dims(&p, in, od);
        if (st) return node_fail(n, st);
    } else {
        for (int d = 0; d < r - 2; d++) od[d] = -1;
    }
    int64_t dims[KN_MAX_RANK] = {x->shape.rank >= 0 ? x->shape.dims[0] : -1, w->shape.rank >= 0 ? w->shape.dims[0] : -1};
    const kn_value *src[KN_MAX_RANK] = {x->shape.rank >= 0 ? x : NULL, w->shape.rank >= 0 ? w : NULL};
    int ax[KN_MAX_RANK] = {0, 0};
    for (int d = 0; d < r - 2; d++) dims[2 + d] = od[d], src[2 + d] = NULL;
    kn_shape s = shape_from(r, dims, src, ax);
    kn_infer_set_shape(n, 0, dt, &s);
    return KN_OK;
}

/* Allocates the convolution output of x by w and resolves p. */
static int conv_alloc(const kn_node *n, const kn_tensor *x, const kn_tensor *w, kn_dtype dt,
                      kn_k_conv_params *p, kn_tensor *out)
{
    if (x->rank < 3 || w->rank != x->rank)
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d and weight rank %d do not fit a convolution", x->rank,
                             w->rank);
    int st = conv_params(n, x->rank - 2, w->dims, p);
    if (st) return st;
    int64_t dims[KN_MAX_RANK] = {x->dims[0], w->dims[0]};
    st = kn_k_conv_out_dims(p, x->dims + 2, dims + 2);
    if (!st) st = kn_tensor_alloc(out, dt, x->rank, dims);
    return st ? node_fail(n, st) : KN_OK;
}

static int infer_conv_integer(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 0, is_q8, "an 8-bit integer type");
    if (!st) st = check_dtype(n, 1, is_q8, "an 8-bit integer type");
    return st ? st : infer_conv_shape(n, 0, 1, KN_I32);
}

static int eval_conv_integer(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = require_in(n, in, 0);
    if (!st) st = require_in(n, in, 1);
    if (st) return st;
    kn_k_conv_params p;
    st = conv_alloc(n, in[0], in[1], KN_I32, &p, &out[0]);
    if (st) return st;
    st = kn_k_conv_integer(in[0], in[1], n->n_inputs > 2 ? in[2] : NULL, n->n_inputs > 3 ? in[3] : NULL, NULL, &p,
                           &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

static int infer_qlinear_conv(kn_node *n)
{
    for (int i = 0; i < 8; i++) {
        if (i == 2 || i == 5 || i == 7) continue;
        int st = require(n, i);
        if (st) return st;
    }
    int st = check_dtype(n, 0, is_q8, "an 8-bit integer type");
    if (!st) st = check_dtype(n, 3, is_q8, "an 8-bit integer type");
    if (st) return st;
    const kn_value *yzp = kn_node_input(n, 7);
    return infer_conv_shape(n, 0, 3, yzp ? yzp->dtype : n->inputs[0]->dtype);
}

static int eval_qlinear_conv(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    const kn_tensor *q[9] = {0};
    for (int i = 0; i < 9 && i < n->n_inputs; i++) q[i] = in[i];
    for (int i = 0; i < 8; i++)
        if (!q[i] && i != 2 && i != 5 && i != 7) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
    kn_k_conv_params p;
    int st = conv_alloc(n, q[0], q[3], q[7] ? q[7]->dtype : q[0]->dtype, &p, &out[0]);
    if (st) return st;
    st = kn_k_qlinear_conv(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], &p, &out[0]);
    return st ? node_fail(n, st) : KN_OK;
}

const kn_op_impl kn_ops_linalg[] = {
    {KN_OP_MatMul, infer_matmul, eval_matmul},
    {KN_OP_Gemm, infer_gemm, eval_gemm},
    {KN_OP_Einsum, infer_einsum, eval_einsum},
    {KN_OP_Softmax, infer_softmax, eval_softmax},
    {KN_OP_LogSoftmax, infer_softmax, eval_logsoftmax},
    {KN_OP_Hardmax, infer_softmax, eval_hardmax},
    {KN_OP_Det, infer_det, eval_det},
    {KN_OP_QuantizeLinear, infer_quantize, eval_quantize},
    {KN_OP_DequantizeLinear, infer_dequantize, eval_dequantize},
    {KN_OP_DynamicQuantizeLinear, infer_dynquant, eval_dynquant},
    {KN_OP_MatMulInteger, infer_matmul_integer, eval_matmul_integer},
    {KN_OP_QLinearMatMul, infer_qlinear_matmul, eval_qlinear_matmul},
    {KN_OP_ConvInteger, infer_conv_integer, eval_conv_integer},
    {KN_OP_QLinearConv, infer_qlinear_conv, eval_qlinear_conv},
    {KN_OP_UNKNOWN, NULL, NULL},
};
