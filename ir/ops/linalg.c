/*
 * Op definitions of the 'linalg' family (see ir/ops.h): MatMul, Gemm, Einsum,
 * the softmax family, Det, and the quantization ops (QuantizeLinear,
 * DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, QLinearMatMul,
 * ConvInteger, QLinearConv).
 *
 * Type/shape inference only: execution lives in runtime/ops/linalg.c.
 * Shape arithmetic shared by inference and execution lives in the kernels'
 * *_shape helpers, and opset-dependent attribute logic in
 * runtime/ops/linalg_attrs.c (called here with the node's kn_opdesc), so
 * the two cannot disagree; errors from kernels get the node's name prepended.
 */
#include <stdio.h>

#include "../eval.h"
#include "linalg_int.h"

/* ---- helpers ---------------------------------------------------------------- */

/* Re-raises the kernel's last message under the node's name. */
static int node_fail(const kn_node *n, int st)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", kn_last_error());
    return kn_node_error(n, st, "%s", msg);
}

/* Most outputs a linalg op has (DynamicQuantizeLinear: 3). */
#define LINALG_MAX_OUT 3

/* The node as the runtime's attribute helpers see it. has needs
 * LINALG_MAX_OUT entries; the importer's arity check keeps n_outputs within. */
static int node_desc(const kn_node *n, kn_opdesc *d, bool *has)
{
    if (n->n_outputs > LINALG_MAX_OUT)
        return kn_node_error(n, KN_ERR_INVALID, "%d outputs, at most %d expected", n->n_outputs, LINALG_MAX_OUT);
    kn_node_opdesc(n, d, has);
    return KN_OK;
}

static int require(const kn_node *n, int i)
{
    if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "input %d is missing", i);
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

/* ---- Softmax, LogSoftmax, Hardmax --------------------------------------------- */

static int infer_softmax(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = check_dtype(n, 0, is_float, "a float type");
    if (st) return st;
    kn_opdesc d;
    bool has[LINALG_MAX_OUT];
    if ((st = node_desc(n, &d, has))) return st;
    int r = n->inputs[0]->shape.rank;
    int64_t axis = kn_linalg_softmax_axis(&d);
    if (r >= 0 && kn_norm_axis(axis, r) < 0)
        return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axis, r);
    return kn_infer_same_as_input(n, 0);
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

/* ---- QuantizeLinear / DequantizeLinear ------------------------------------------- */

static int infer_quantize(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 1, is_float, "a float scale");
    if (st) return st;
    kn_opdesc d;
    bool has[LINALG_MAX_OUT];
    if ((st = node_desc(n, &d, has))) return st;
    const kn_value *zp = kn_node_input(n, 2);
    kn_dtype dt = kn_linalg_quant_out_dtype(&d, zp ? zp->dtype : KN_DT_UNDEFINED);
    if (zp && !zp->dtype) dt = KN_DT_UNDEFINED;
    else if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output dtype %d", (int)dt);
    kn_infer_set_shape(n, 0, dt, &n->inputs[0]->shape);
    return KN_OK;
}

static int infer_dequantize(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 1, is_float, "a float scale");
    if (st) return st;
    kn_opdesc d;
    bool has[LINALG_MAX_OUT];
    if ((st = node_desc(n, &d, has))) return st;
    kn_dtype dt;
    if ((st = kn_linalg_dequant_out_dtype(&d, n->inputs[1]->dtype, &dt))) return st;
    kn_infer_set_shape(n, 0, dt, &n->inputs[0]->shape);
    return KN_OK;
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

/* ---- MatMulInteger / QLinearMatMul ----------------------------------------------- */

static int infer_matmul_integer(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 0, is_q8, "an 8-bit integer type");
    if (!st) st = check_dtype(n, 1, is_q8, "an 8-bit integer type");
    return st ? st : infer_matmul_shape(n, 0, 1, KN_I32);
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

/* ---- ConvInteger / QLinearConv ----------------------------------------------------- */

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
    kn_opdesc desc; /* not d: the dims loops below use d */
    bool has[LINALG_MAX_OUT];
    int st = node_desc(n, &desc, has);
    if (!st) st = kn_linalg_conv_params(&desc, r - 2, w->shape.rank >= 0 ? w->shape.dims : NULL, &p);
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

static int infer_conv_integer(kn_node *n)
{
    int st = require(n, 0);
    if (!st) st = require(n, 1);
    if (!st) st = check_dtype(n, 0, is_q8, "an 8-bit integer type");
    if (!st) st = check_dtype(n, 1, is_q8, "an 8-bit integer type");
    return st ? st : infer_conv_shape(n, 0, 1, KN_I32);
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

const kn_op_impl kn_ops_linalg[] = {
    {KN_OP_MatMul, infer_matmul},
    {KN_OP_Gemm, infer_gemm},
    {KN_OP_Einsum, infer_einsum},
    {KN_OP_Softmax, infer_softmax},
    {KN_OP_LogSoftmax, infer_softmax},
    {KN_OP_Hardmax, infer_softmax},
    {KN_OP_Det, infer_det},
    {KN_OP_QuantizeLinear, infer_quantize},
    {KN_OP_DequantizeLinear, infer_dequantize},
    {KN_OP_DynamicQuantizeLinear, infer_dynquant},
    {KN_OP_MatMulInteger, infer_matmul_integer},
    {KN_OP_QLinearMatMul, infer_qlinear_matmul},
    {KN_OP_ConvInteger, infer_conv_integer},
    {KN_OP_QLinearConv, infer_qlinear_conv},
    {KN_OP_UNKNOWN, NULL},
};
