/*
 * Op definitions of the 'nn' family (see ir/ops.h): convolution, pooling,
 * normalization, LRN, unpooling, RoI pooling and Col2Im.
 *
 * Shape logic is written once per op as a "geometry" function over plain
 * dims arrays, where -1 means unknown: infer calls it with the IR shapes,
 * eval with the actual tensors' dims (all known), so the two always agree.
 * The arithmetic itself lives in runtime/kernels (k_nn.h).
 */
#include <stdlib.h>
#include <string.h>

#include "../eval.h"
#include "k_nn.h"

/* ---- small helpers ------------------------------------------------------- */

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t ceildiv(int64_t a, int64_t b) { return -floordiv(-a, b); }

static bool is_float_dt(kn_dtype dt)
{
    return dt == KN_F32 || dt == KN_F64 || dt == KN_F16 || dt == KN_BF16;
}

/* The dtype and (rank, dims) of input i as seen by infer; rank -1 if unknown
 * or the input is absent. */
static int in_dims(const kn_node *n, int i, int64_t *dims, kn_dtype *dt)
{
    kn_value *v = kn_node_input(n, i);
    if (dt) *dt = v ? v->dtype : KN_DT_UNDEFINED;
    if (!v || v->shape.rank < 0) return -1;
    for (int d = 0; d < v->shape.rank; d++) dims[d] = v->shape.dims[d];
    return v->shape.rank;
}

/* Sets output i to (dt, rank, dims) where dims may hold -1; the batch dim
 * keeps the symbolic name of input 0's first dim. rank < 0 → unknown rank. */
static void set_out(kn_node *n, int i, kn_dtype dt, int rank, const int64_t *dims)
{
    if (i >= n->n_outputs || !n->outputs[i]) return;
    kn_shape s = kn_shape_unknown();
    if (rank >= 0) {
        s.rank = rank;
        for (int d = 0; d < rank; d++) s.dims[d] = dims[d] < 0 ? -1 : dims[d];
        kn_value *x = kn_node_input(n, 0);
        if (rank > 0 && dims[0] < 0 && x && x->shape.rank > 0) s.sym[0] = x->shape.sym[0];
    }
    kn_infer_set_shape(n, i, dt, &s);
}

/* Allocates output i if the node has it; returns status. */
static int alloc_out(const kn_node *n, kn_tensor *out, int i, kn_dtype dt, int rank, const int64_t *dims)
{
    if (i >= n->n_outputs || !n->outputs[i]) return KN_OK;
    int st = kn_tensor_alloc(&out[i], dt, rank, dims);
    return st ? kn_node_error(n, st, "output %d: %s", i, kn_last_error()) : KN_OK;
}

/* Output i if the node produces it (allocated by alloc_out), else NULL. */
static kn_tensor *opt_out(const kn_node *n, kn_tensor *out, int i)
{
    return i < n->n_outputs && n->outputs[i] && out[i].data ? &out[i] : NULL;
}

/* Status of a kernel call, with the node named in the message. */
static int kernel_status(const kn_node *n, int st)
{
    if (!st) return KN_OK;
    /* Kernel messages start with the op name; the node prefix already says it. */
    const char *msg = kn_last_error();
    size_t len = strlen(n->op_type);
    if (!strncmp(msg, n->op_type, len) && msg[len] == ':' && msg[len + 1] == ' ') msg += len + 2;
    return kn_node_error(n, st, "%s", msg);
}

static int need_input(const kn_node *n, const kn_tensor *const *in, int i, const char *what)
{
    if (i >= n->n_inputs || !in[i]) return kn_node_error(n, KN_ERR_INVALID, "input %d (%s) is missing", i, what);
    return KN_OK;
}

/* Rank check for N x C x spatial... tensors. */
static int check_nchw(const kn_node *n, int rank, const char *what)
{
    if (rank < 3 || rank > 2 + KN_NN_MAXSP)
        return kn_node_error(n, KN_ERR_INVALID, "%s has rank %d, expected N x C x D1 ... (3 to %d)", what,
                             rank, 2 + KN_NN_MAXSP);
    return KN_OK;
}

/* ---- sliding windows ------------------------------------------------------ */

/* Reads an ints attribute of exactly `count` entries into out (default def
 * when absent), each at least `min`. */
static int window_ints(const kn_node *n, const char *name, int count, int64_t def, int64_t min, int64_t *out)
{
    const int64_t *v;
    int c = kn_attr_ints(n, name, &v);
    if (c && c != count)
        return kn_node_error(n, KN_ERR_INVALID, "attribute '%s' has %d values, expected %d", name, c, count);
    for (int d = 0; d < count; d++) {
        out[d] = c ? v[d] : def;
        if (out[d] < min)
            return kn_node_error(n, KN_ERR_INVALID, "attribute '%s'[%d] is %lld, must be at least %lld", name,
                                 d, (long long)out[d], (long long)min);
        if (out[d] > ((int64_t)1 << 24)) /* keeps window arithmetic far from overflow */
            return kn_node_error(n, KN_ERR_INVALID, "attribute '%s'[%d] is absurdly large (%lld)", name, d,
                                 (long long)out[d]);
    }
    return KN_OK;
}

/* Fills strides, dilations and pads of w (kernel is the caller's). */
static int read_window(const kn_node *n, int nsp, kn_nn_window *w)
{
    w->nsp = nsp;
    int st = window_ints(n, "strides", nsp, 1, 1, w->strides);
    if (!st) st = window_ints(n, "dilations", nsp, 1, 1, w->dilations);
    if (!st) st = window_ints(n, "pads", 2 * nsp, 0, 0, w->pads);
    return st;
}

/* Output spatial dims of a sliding window over in[] (-1 = unknown), resolving
 * auto_pad into w->pads. Kernel dims of -1 give unknown outputs. */
static int window_out(const kn_node *n, kn_nn_window *w, const int64_t *in, bool ceil_mode, int64_t *out)
{
    const char *ap = kn_attr_string(n, "auto_pad", "NOTSET");
    bool upper = !strcmp(ap, "SAME_UPPER"), lower = !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
    if (!upper && !lower && !valid && strcmp(ap, "NOTSET") && *ap)
        return kn_node_error(n, KN_ERR_INVALID, "unknown auto_pad '%s'", ap);
    int nsp = w->nsp;
    for (int d = 0; d < nsp; d++) {
        int64_t k = w->kernel[d], s = w->strides[d];
        if (in[d] < 0 || k < 0) {
            out[d] = -1;
            continue;
        }
        int64_t eff = (k - 1) * w->dilations[d] + 1;
        if (upper || lower) {
            out[d] = ceildiv(in[d], s);
            int64_t total = (out[d] - 1) * s + eff - in[d];
            if (total < 0) total = 0;
            w->pads[d] = upper ? total / 2 : total - total / 2;
            w->pads[nsp + d] = total - w->pads[d];
            continue;
        }
        if (valid) w->pads[d] = w->pads[nsp + d] = 0;
        int64_t span = in[d] + w->pads[d] + w->pads[nsp + d] - eff;
        if (span < 0)
            return kn_node_error(n, KN_ERR_INVALID,
                                 "spatial axis %d: window of %lld (kernel %lld, dilation %lld) is larger than the padded input (%lld)",
                                 d, (long long)eff, (long long)k, (long long)w->dilations[d],
                                 (long long)(in[d] + w->pads[d] + w->pads[nsp + d]));
        out[d] = (ceil_mode ? ceildiv(span, s) : floordiv(span, s)) + 1;
        /* As in PyTorch/onnxruntime: a last window starting in the end padding is dropped. */
        if (ceil_mode && (out[d] - 1) * s >= in[d] + w->pads[d]) out[d]--;
    }
    return KN_OK;
}

/* ---- Conv ------------------------------------------------------------------ */

/* Output dims of Conv given X (rank, xd) and W dims (wd, NULL if unknown). */
static int conv_geometry(const kn_node *n, int rank, const int64_t *xd, const int64_t *wd,
                         kn_nn_window *w, int64_t *group, int64_t *od)
{
    int nsp = rank - 2, st = check_nchw(n, rank, "X");
    if (st) return st;
    *group = kn_attr_int(n, "group", 1);
    if (*group < 1) return kn_node_error(n, KN_ERR_INVALID, "group is %lld, must be positive", (long long)*group);
    if (wd) {
        if (wd[0] >= 0 && wd[0] % *group)
            return kn_node_error(n, KN_ERR_INVALID, "weight has %lld output channels, not a multiple of group %lld",
                                 (long long)wd[0], (long long)*group);
        if (wd[1] >= 0 && xd[1] >= 0 && wd[1] * *group != xd[1])
            return kn_node_error(n, KN_ERR_INVALID,
                                 "weight has %lld input channels per group, X has %lld channels with group %lld",
                                 (long long)wd[1], (long long)xd[1], (long long)*group);
    }
    int64_t wk[KN_NN_MAXSP];
    for (int d = 0; d < nsp; d++) wk[d] = wd ? wd[2 + d] : -1;
    const int64_t *ks;
    int kc = kn_attr_ints(n, "kernel_shape", &ks);
    if (kc && kc != nsp)
        return kn_node_error(n, KN_ERR_INVALID, "kernel_shape has %d values, X has %d spatial axes", kc, nsp);
    for (int d = 0; d < nsp; d++) {
        if (kc && wk[d] >= 0 && ks[d] != wk[d])
            return kn_node_error(n, KN_ERR_INVALID, "kernel_shape[%d] is %lld, weight has %lld", d,
                                 (long long)ks[d], (long long)wk[d]);
        w->kernel[d] = kc ? ks[d] : wk[d];
        if (kc && ks[d] < 1) return kn_node_error(n, KN_ERR_INVALID, "kernel_shape[%d] is %lld", d, (long long)ks[d]);
    }
    if ((st = read_window(n, nsp, w))) return st;
    od[0] = xd[0];
    od[1] = wd ? wd[0] : -1;
    return window_out(n, w, xd + 2, false, od + 2);
}

static int infer_conv(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], wd[KN_MAX_RANK], od[KN_MAX_RANK], group;
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), wr = in_dims(n, 1, wd, NULL);
    if (xr < 0) {
        set_out(n, 0, dt, -1, NULL);
        return KN_OK;
    }
    if (wr >= 0 && wr != xr)
        return kn_node_error(n, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", wr, xr);
    kn_nn_window w;
    int st = conv_geometry(n, xr, xd, wr >= 0 ? wd : NULL, &w, &group, od);
    if (st) return st;
    set_out(n, 0, dt, xr, od);
    return KN_OK;
}

static int eval_conv(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st;
    if ((st = need_input(n, in, 0, "X")) || (st = need_input(n, in, 1, "W"))) return st;
    const kn_tensor *x = in[0], *w = in[1], *b = kn_node_input(n, 2) ? in[2] : NULL;
    if (!is_float_dt(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "X, W and B must share one float dtype (got %s, %s, %s)",
                             kn_dtype_name(x->dtype), kn_dtype_name(w->dtype), b ? kn_dtype_name(b->dtype) : "-");
    if (w->rank != x->rank)
        return kn_node_error(n, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", w->rank, x->rank);
    int64_t od[KN_MAX_RANK], group;
    kn_nn_window win;
    if ((st = conv_geometry(n, x->rank, x->dims, w->dims, &win, &group, od))) return st;
    if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
        return kn_node_error(n, KN_ERR_INVALID, "bias has %lld elements, expected %lld (output channels)",
                             (long long)kn_tensor_numel(b), (long long)w->dims[0]);
    if ((st = alloc_out(n, out, 0, x->dtype, x->rank, od))) return st;
    return kernel_status(n, kn_k_conv(x, w, b, &win, group, &out[0]));
}

/* ---- ConvTranspose --------------------------------------------------------- */

static int convt_geometry(const kn_node *n, int rank, const int64_t *xd, const int64_t *wd,
                          kn_nn_window *w, int64_t *group, int64_t *od)
{
    int nsp = rank - 2, st = check_nchw(n, rank, "X");
    if (st) return st;
    *group = kn_attr_int(n, "group", 1);
    if (*group < 1) return kn_node_error(n, KN_ERR_INVALID, "group is %lld, must be positive", (long long)*group);
    if (wd && wd[0] >= 0 && xd[1] >= 0 && wd[0] != xd[1])
        return kn_node_error(n, KN_ERR_INVALID, "weight has %lld input channels, X has %lld",
                             (long long)wd[0], (long long)xd[1]);
    if (xd[1] >= 0 && xd[1] % *group)
        return kn_node_error(n, KN_ERR_INVALID, "X has %lld channels, not a multiple of group %lld",
                             (long long)xd[1], (long long)*group);
    const int64_t *ks;
    int kc = kn_attr_ints(n, "kernel_shape", &ks);
    if (kc && kc != nsp)
        return kn_node_error(n, KN_ERR_INVALID, "kernel_shape has %d values, X has %d spatial axes", kc, nsp);
    for (int d = 0; d < nsp; d++) {
        w->kernel[d] = kc ? ks[d] : wd ? wd[2 + d] : -1;
        if (kc && wd && wd[2 + d] >= 0 && ks[d] != wd[2 + d])
            return kn_node_error(n, KN_ERR_INVALID, "kernel_shape[%d] is %lld, weight has %lld", d,
                                 (long long)ks[d], (long long)wd[2 + d]);
    }
    if ((st = read_window(n, nsp, w))) return st;
    int64_t opad[KN_NN_MAXSP], oshape[KN_NN_MAXSP];
    if ((st = window_ints(n, "output_padding", nsp, 0, 0, opad))) return st;
    const int64_t *os;
    int oc = kn_attr_ints(n, "output_shape", &os);
    if (oc && oc != nsp && oc != nsp + 2)
        return kn_node_error(n, KN_ERR_INVALID, "output_shape has %d values, expected %d", oc, nsp);
    for (int d = 0; d < nsp && oc; d++) oshape[d] = os[oc - nsp + d];
    const char *ap = kn_attr_string(n, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    bool have_pads = kn_node_attr(n, "pads") != NULL; /* explicit pads win, as in the ONNX reference */
    od[0] = xd[0];
    od[1] = wd && wd[1] >= 0 ? wd[1] * *group : -1;
    for (int d = 0; d < nsp; d++) {
        int64_t in = xd[2 + d], k = w->kernel[d], s = w->strides[d];
        if (in < 0 || k < 0) {
            od[2 + d] = oc ? oshape[d] : -1;
            continue;
        }
        int64_t full = s * (in - 1) + opad[d] + (k - 1) * w->dilations[d] + 1;
        if (same && !have_pads) {
            int64_t o = oc ? oshape[d] : in * s, total = full - o;
            int64_t half = floordiv(total, 2);
            w->pads[d] = !strcmp(ap, "SAME_UPPER") ? half : total - half;
            w->pads[nsp + d] = total - w->pads[d];
            od[2 + d] = o;
        } else {
            if (!strcmp(ap, "VALID")) w->pads[d] = w->pads[nsp + d] = 0;
            od[2 + d] = oc ? oshape[d] : full - w->pads[d] - w->pads[nsp + d];
        }
        if (od[2 + d] < 0)
            return kn_node_error(n, KN_ERR_INVALID, "spatial axis %d: output size %lld is negative", d,
                                 (long long)od[2 + d]);
    }
    return KN_OK;
}

static int infer_convt(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], wd[KN_MAX_RANK], od[KN_MAX_RANK], group;
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), wr = in_dims(n, 1, wd, NULL);
    if (xr < 0) {
        set_out(n, 0, dt, -1, NULL);
        return KN_OK;
    }
    if (wr >= 0 && wr != xr)
        return kn_node_error(n, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", wr, xr);
    kn_nn_window w;
    int st = convt_geometry(n, xr, xd, wr >= 0 ? wd : NULL, &w, &group, od);
    if (st) return st;
    set_out(n, 0, dt, xr, od);
    return KN_OK;
}

static int eval_convt(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st;
    if ((st = need_input(n, in, 0, "X")) || (st = need_input(n, in, 1, "W"))) return st;
    const kn_tensor *x = in[0], *w = in[1], *b = kn_node_input(n, 2) ? in[2] : NULL;
    if (!is_float_dt(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "X, W and B must share one float dtype");
    if (w->rank != x->rank)
        return kn_node_error(n, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", w->rank, x->rank);
    int64_t od[KN_MAX_RANK], group;
    kn_nn_window win;
    if ((st = convt_geometry(n, x->rank, x->dims, w->dims, &win, &group, od))) return st;
    if (b && kn_tensor_numel(b) != od[1])
        return kn_node_error(n, KN_ERR_INVALID, "bias has %lld elements, expected %lld (output channels)",
                             (long long)kn_tensor_numel(b), (long long)od[1]);
    if ((st = alloc_out(n, out, 0, x->dtype, x->rank, od))) return st;
    return kernel_status(n, kn_k_conv_transpose(x, w, b, &win, group, &out[0]));
}

/* ---- windowed pooling -------------------------------------------------------- */

static int pool_geometry(const kn_node *n, int rank, const int64_t *xd, kn_nn_window *w, int64_t *od)
{
    int nsp = rank - 2, st = check_nchw(n, rank, "X");
    if (st) return st;
    const int64_t *ks;
    int kc = kn_attr_ints(n, "kernel_shape", &ks);
    if (kc != nsp)
        return kn_node_error(n, KN_ERR_INVALID, "kernel_shape has %d values, X has %d spatial axes", kc, nsp);
    if ((st = window_ints(n, "kernel_shape", nsp, 1, 1, w->kernel))) return st;
    if ((st = read_window(n, nsp, w))) return st;
    od[0] = xd[0];
    od[1] = xd[1];
    return window_out(n, w, xd + 2, kn_attr_int(n, "ceil_mode", 0) != 0, od + 2);
}

static int infer_pool(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt);
    if (xr < 0) {
        set_out(n, 0, dt, -1, NULL);
        set_out(n, 1, KN_I64, -1, NULL);
        return KN_OK;
    }
    kn_nn_window w;
    int st = pool_geometry(n, xr, xd, &w, od);
    if (st) return st;
    set_out(n, 0, dt, xr, od);
    set_out(n, 1, KN_I64, xr, od);
    return KN_OK;
}

/* The p of LpPool/GlobalLpPool: an int since opset 2, a float in opset 1. */
static double lp_order(const kn_node *n)
{
    const kn_attr *a = kn_node_attr(n, "p");
    if (a && a->kind == KN_ATTR_FLOAT) return a->f;
    return (double)kn_attr_int(n, "p", 2);
}

static int eval_pool(const kn_node *n, const kn_tensor *const *in, kn_tensor *out, kn_pool_kind kind)
{
    int st;
    if ((st = need_input(n, in, 0, "X"))) return st;
    const kn_tensor *x = in[0];
    bool ok = is_float_dt(x->dtype) || (kind == KN_POOL_MAX && (x->dtype == KN_I8 || x->dtype == KN_U8));
    if (!ok) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(x->dtype));
    int64_t od[KN_MAX_RANK];
    kn_nn_window w;
    if ((st = pool_geometry(n, x->rank, x->dims, &w, od))) return st;
    if ((st = alloc_out(n, out, 0, x->dtype, x->rank, od))) return st;
    if ((st = alloc_out(n, out, 1, KN_I64, x->rank, od))) return st;
    int64_t so = kn_attr_int(n, "storage_order", 0);
    double p = lp_order(n);
    if (kind == KN_POOL_LP && p <= 0) return kn_node_error(n, KN_ERR_INVALID, "p is %g, must be positive", p);
    bool cip = kn_attr_int(n, "count_include_pad", 0) != 0;
    kn_tensor *idx = n->n_outputs > 1 && n->outputs[1] ? &out[1] : NULL;
    return kernel_status(n, kn_k_pool(x, &w, kind, cip, p, so == 1, &out[0], idx));
}

static int eval_maxpool(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return eval_pool(n, in, out, KN_POOL_MAX);
}

static int eval_avgpool(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return eval_pool(n, in, out, KN_POOL_AVG);
}

static int eval_lppool(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return eval_pool(n, in, out, KN_POOL_LP);
}

/* ---- global pooling ------------------------------------------------------------ */

static void global_dims(int rank, const int64_t *xd, int64_t *od)
{
    for (int d = 0; d < rank; d++) od[d] = d < 2 ? xd[d] : 1;
}

static int infer_global_pool(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt);
    if (xr >= 0 && xr < 2) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected at least 2", xr);
    if (xr >= 0) global_dims(xr, xd, od);
    set_out(n, 0, dt, xr, od);
    return KN_OK;
}

static int eval_global(const kn_node *n, const kn_tensor *const *in, kn_tensor *out, kn_pool_kind kind)
{
    int st;
    if ((st = need_input(n, in, 0, "X"))) return st;
    const kn_tensor *x = in[0];
    if (!is_float_dt(x->dtype)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(x->dtype));
    if (x->rank < 2) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected at least 2", x->rank);
    int64_t od[KN_MAX_RANK];
    global_dims(x->rank, x->dims, od);
    if ((st = alloc_out(n, out, 0, x->dtype, x->rank, od))) return st;
    double p = lp_order(n);
    if (kind == KN_POOL_LP && p <= 0) return kn_node_error(n, KN_ERR_INVALID, "p is %g, must be positive", p);
    return kernel_status(n, kn_k_global_pool(x, kind, p, &out[0]));
}

static int eval_gap(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return eval_global(n, in, out, KN_POOL_AVG);
}

static int eval_gmp(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return eval_global(n, in, out, KN_POOL_MAX);
}

static int eval_glp(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    return eval_global(n, in, out, KN_POOL_LP);
}

/* ---- BatchNormalization ------------------------------------------------------ */

static int infer_batchnorm(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], md[KN_MAX_RANK], c;
    kn_dtype dt, mdt;
    int xr = in_dims(n, 0, xd, &dt);
    in_dims(n, 3, md, &mdt);
    if (xr >= 0 && xr < 2) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected N x C x ...", xr);
    set_out(n, 0, dt, xr, xd);
    c = xr >= 2 ? xd[1] : -1;
    set_out(n, 1, mdt ? mdt : dt, 1, &c);
    set_out(n, 2, mdt ? mdt : dt, 1, &c);
    return KN_OK;
}

/* Checks that input i is a float vector of C elements. */
static int check_chan_param(const kn_node *n, const kn_tensor *const *in, int i, const char *what, int64_t C)
{
    int st = need_input(n, in, i, what);
    if (st) return st;
    if (!is_float_dt(in[i]->dtype))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "%s has dtype %s, expected a float type", what,
                             kn_dtype_name(in[i]->dtype));
    if (kn_tensor_numel(in[i]) != C)
        return kn_node_error(n, KN_ERR_INVALID, "%s has %lld elements, expected %lld (channels)", what,
                             (long long)kn_tensor_numel(in[i]), (long long)C);
    return KN_OK;
}

static int eval_batchnorm(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st;
    if ((st = need_input(n, in, 0, "X"))) return st;
    const kn_tensor *x = in[0];
    if (!is_float_dt(x->dtype)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(x->dtype));
    if (x->rank < 2) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected N x C x ...", x->rank);
    int64_t C = x->dims[1];
    static const char *names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 1; i < 5; i++)
        if ((st = check_chan_param(n, in, i, names[i], C))) return st;
    double eps = kn_attr_float(n, "epsilon", 1e-5f), mom = kn_attr_float(n, "momentum", 0.9f);
    if ((st = alloc_out(n, out, 0, x->dtype, x->rank, x->dims))) return st;
    if ((st = alloc_out(n, out, 1, in[3]->dtype, 1, &C))) return st;
    if ((st = alloc_out(n, out, 2, in[4]->dtype, 1, &C))) return st;
    kn_tensor *rm = opt_out(n, out, 1), *rv = opt_out(n, out, 2);
    if (kn_attr_int(n, "training_mode", 0))
        return kernel_status(n, kn_k_batchnorm_train(x, in[1], in[2], in[3], in[4], eps, mom, &out[0], rm, rv));
    /* Inference: the running statistics pass through unchanged. */
    if (rm) memcpy(rm->data, in[3]->data, rm->nbytes);
    if (rv) memcpy(rv->data, in[4]->data, rv->nbytes);
    return kernel_status(n, kn_k_batchnorm(x, in[1], in[2], in[3], in[4], eps, &out[0]));
}

/* ---- LayerNormalization ---------------------------------------------------------- */

static kn_dtype stash_dtype(const kn_node *n, kn_dtype def)
{
    int64_t s = kn_attr_int(n, "stash_type", 1);
    return is_float_dt((kn_dtype)s) ? (kn_dtype)s : def;
}

static int infer_layernorm(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], md[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt);
    set_out(n, 0, dt, xr, xd);
    if (xr < 0) {
        set_out(n, 1, stash_dtype(n, KN_F32), -1, NULL);
        set_out(n, 2, stash_dtype(n, KN_F32), -1, NULL);
        return KN_OK;
    }
    int axis = kn_norm_axis(kn_attr_int(n, "axis", -1), xr);
    if (axis < 0) return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                                       (long long)kn_attr_int(n, "axis", -1), xr);
    for (int d = 0; d < xr; d++) md[d] = d < axis ? xd[d] : 1;
    set_out(n, 1, stash_dtype(n, KN_F32), xr, md);
    set_out(n, 2, stash_dtype(n, KN_F32), xr, md);
    return KN_OK;
}

/* True if t broadcasts (numpy rules) to dims[0..r) without growing it. */
static bool broadcasts_to(const kn_tensor *t, int r, const int64_t *dims)
{
    if (t->rank > r) return false;
    for (int i = 0; i < t->rank; i++) {
        int64_t a = t->dims[t->rank - 1 - i], b = dims[r - 1 - i];
        if (a != 1 && a != b) return false;
    }
    return true;
}

static int eval_layernorm(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st;
    if ((st = need_input(n, in, 0, "X")) || (st = need_input(n, in, 1, "Scale"))) return st;
    const kn_tensor *x = in[0], *sc = in[1], *b = kn_node_input(n, 2) ? in[2] : NULL;
    if (!is_float_dt(x->dtype)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(x->dtype));
    int axis = kn_norm_axis(kn_attr_int(n, "axis", -1), x->rank);
    if (axis < 0) return kn_node_error(n, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                                       (long long)kn_attr_int(n, "axis", -1), x->rank);
    char buf[96];
    if (!broadcasts_to(sc, x->rank - axis, x->dims + axis) || (b && !broadcasts_to(b, x->rank - axis, x->dims + axis)))
        return kn_node_error(n, KN_ERR_INVALID, "Scale/B do not broadcast to the normalized shape %s",
                             kn_shape_str(x->rank - axis, x->dims + axis, buf, sizeof buf));
    if (!is_float_dt(sc->dtype) || (b && !is_float_dt(b->dtype)))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "Scale and B must be float tensors");
    int64_t md[KN_MAX_RANK];
    for (int d = 0; d < x->rank; d++) md[d] = d < axis ? x->dims[d] : 1;
    kn_dtype sdt = stash_dtype(n, KN_F32);
    if ((st = alloc_out(n, out, 0, x->dtype, x->rank, x->dims)) || (st = alloc_out(n, out, 1, sdt, x->rank, md)) ||
        (st = alloc_out(n, out, 2, sdt, x->rank, md)))
        return st;
    double eps = kn_attr_float(n, "epsilon", 1e-5f);
    return kernel_status(n, kn_k_layernorm(x, axis, sc, b, eps, &out[0], opt_out(n, out, 1),
                                           opt_out(n, out, 2)));
}

/* ---- Instance / Group normalization, LRN, LpNormalization, MVN ----------------------- */

static int infer_same(kn_node *n) { return kn_infer_same_as_input(n, 0); }

/* X of a channel-normalization: a float N x C x ... tensor. */
static int check_nc_float(const kn_node *n, const kn_tensor *const *in, int min_rank)
{
    int st = need_input(n, in, 0, "X");
    if (st) return st;
    if (!is_float_dt(in[0]->dtype))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(in[0]->dtype));
    if (in[0]->rank < min_rank)
        return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected at least %d", in[0]->rank, min_rank);
    return KN_OK;
}

static int eval_instancenorm(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = check_nc_float(n, in, 3);
    if (st) return st;
    int64_t C = in[0]->dims[1];
    if ((st = check_chan_param(n, in, 1, "scale", C)) || (st = check_chan_param(n, in, 2, "B", C))) return st;
    if ((st = alloc_out(n, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    double eps = kn_attr_float(n, "epsilon", 1e-5f);
    return kernel_status(n, kn_k_instancenorm(in[0], in[1], in[2], eps, &out[0]));
}

static int eval_groupnorm(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = check_nc_float(n, in, 3);
    if (st) return st;
    int64_t C = in[0]->dims[1], G = kn_attr_int(n, "num_groups", -1);
    if (G < 1 || C % G)
        return kn_node_error(n, KN_ERR_INVALID, "num_groups %lld must be positive and divide the %lld channels",
                             (long long)G, (long long)C);
    if ((st = need_input(n, in, 1, "scale"))) return st;
    /* Opset 18 has one scale/bias per group; opset 21 one per channel. */
    bool per_channel = kn_node_opset(n) >= 21 || (kn_tensor_numel(in[1]) == C && C != G);
    int64_t want = per_channel ? C : G;
    if ((st = check_chan_param(n, in, 1, "scale", want)) || (st = check_chan_param(n, in, 2, "bias", want))) return st;
    if ((st = alloc_out(n, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    double eps = kn_attr_float(n, "epsilon", 1e-5f);
    return kernel_status(n, kn_k_groupnorm(in[0], in[1], in[2], G, eps, per_channel, &out[0]));
}

static int eval_lrn(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = check_nc_float(n, in, 2);
    if (st) return st;
    int64_t size = kn_attr_int(n, "size", -1);
    if (size < 1) return kn_node_error(n, KN_ERR_INVALID, "attribute 'size' is %lld, must be positive", (long long)size);
    if ((st = alloc_out(n, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    return kernel_status(n, kn_k_lrn(in[0], size, kn_attr_float(n, "alpha", 1e-4f), kn_attr_float(n, "beta", 0.75f),
                                     kn_attr_float(n, "bias", 1.0f), &out[0]));
}

static int eval_lpnorm(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = check_nc_float(n, in, 1);
    if (st) return st;
    int axis = kn_norm_axis(kn_attr_int(n, "axis", -1), in[0]->rank);
    int64_t p = kn_attr_int(n, "p", 2);
    if (axis < 0) return kn_node_error(n, KN_ERR_INVALID, "axis is out of range for rank %d", in[0]->rank);
    if (p != 1 && p != 2) return kn_node_error(n, KN_ERR_INVALID, "p is %lld, must be 1 or 2", (long long)p);
    if ((st = alloc_out(n, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    return kernel_status(n, kn_k_lpnorm(in[0], axis, p, &out[0]));
}

static int eval_mvn(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st = check_nc_float(n, in, 1);
    if (st) return st;
    static const int64_t def_axes[] = {0, 2, 3};
    const int64_t *axes;
    int na = kn_attr_ints(n, "axes", &axes);
    if (!kn_node_attr(n, "axes")) axes = def_axes, na = 3;
    unsigned mask = 0;
    for (int i = 0; i < na; i++) {
        int a = kn_norm_axis(axes[i], in[0]->rank);
        if (a < 0) return kn_node_error(n, KN_ERR_INVALID, "axes[%d] = %lld is out of range for rank %d", i,
                                        (long long)axes[i], in[0]->rank);
        mask |= 1u << a;
    }
    if ((st = alloc_out(n, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    return kernel_status(n, kn_k_mvn(in[0], mask, &out[0]));
}

/* ---- MaxUnpool --------------------------------------------------------------------- */

/* Dims of MaxUnpool: `nat` is the shape the pooling attributes imply (the
 * space the indices address); od is the output_shape input's value when
 * given (os non-NULL), else nat. */
static int unpool_geometry(const kn_node *n, int rank, const int64_t *xd, const kn_tensor *os, int64_t *nat,
                           int64_t *od)
{
    int nsp = rank - 2, st = check_nchw(n, rank, "X");
    if (st) return st;
    kn_nn_window w;
    const int64_t *ks;
    if (kn_attr_ints(n, "kernel_shape", &ks) != nsp)
        return kn_node_error(n, KN_ERR_INVALID, "kernel_shape must have %d values", nsp);
    if ((st = window_ints(n, "kernel_shape", nsp, 1, 1, w.kernel)) || (st = read_window(n, nsp, &w))) return st;
    nat[0] = xd[0];
    nat[1] = xd[1];
    for (int d = 0; d < nsp; d++) {
        nat[2 + d] = xd[2 + d] < 0 ? -1 : (xd[2 + d] - 1) * w.strides[d] + w.kernel[d] - w.pads[d] - w.pads[nsp + d];
        if (xd[2 + d] >= 0 && nat[2 + d] < 0)
            return kn_node_error(n, KN_ERR_INVALID, "spatial axis %d: pads exceed the unpooled size", d);
    }
    memcpy(od, nat, sizeof(int64_t) * (size_t)rank);
    if (!os) return KN_OK;
    int64_t v[KN_MAX_RANK];
    int c = kn_tensor_read_ints(os, v, KN_MAX_RANK);
    if (c < 0) return kn_node_error(n, KN_ERR_INVALID, "output_shape: %s", kn_last_error());
    if (c != rank) return kn_node_error(n, KN_ERR_INVALID, "output_shape has %d values, expected %d", c, rank);
    for (int d = 0; d < rank; d++) {
        if (v[d] < 0) return kn_node_error(n, KN_ERR_INVALID, "output_shape[%d] is negative", d);
        od[d] = v[d];
    }
    return KN_OK;
}

/* Copies the overlapping corner (from index 0 on every axis) of src into dst. */
static void copy_corner(const kn_tensor *src, kn_tensor *dst)
{
    int64_t dims[KN_MAX_RANK], ss[KN_MAX_RANK], ds[KN_MAX_RANK];
    size_t es = kn_dtype_size(src->dtype);
    for (int d = 0; d < src->rank; d++) dims[d] = src->dims[d] < dst->dims[d] ? src->dims[d] : dst->dims[d];
    int64_t cnt = kn_shape_numel(src->rank, dims);
    kn_shape_strides(src->rank, src->dims, ss);
    kn_shape_strides(dst->rank, dst->dims, ds);
    kn_index it;
    kn_index_init(&it, src->rank, dims);
    for (int64_t i = 0; i < cnt; i++, kn_index_next(&it))
        memcpy((char *)dst->data + (size_t)kn_index_offset(&it, ds) * es,
               (const char *)src->data + (size_t)kn_index_offset(&it, ss) * es, es);
}

static int infer_maxunpool(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt);
    kn_value *osv = kn_node_input(n, 2);
    if (xr < 0 || (osv && !osv->const_data)) {
        for (int d = 0; d < xr; d++) od[d] = -1; /* rank known, dims from runtime data */
        set_out(n, 0, dt, xr, od);
        return KN_OK;
    }
    int64_t nat[KN_MAX_RANK];
    int st = unpool_geometry(n, xr, xd, osv ? osv->const_data : NULL, nat, od);
    if (st) return st;
    set_out(n, 0, dt, xr, od);
    return KN_OK;
}

static int eval_maxunpool(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st;
    if ((st = need_input(n, in, 0, "X")) || (st = need_input(n, in, 1, "I"))) return st;
    if (!kn_dtype_info(in[1]->dtype)->is_integer)
        return kn_node_error(n, KN_ERR_INVALID, "indices have dtype %s, expected an integer type", kn_dtype_name(in[1]->dtype));
    if (!kn_dtype_size(in[0]->dtype)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "packed dtypes are not supported");
    int64_t od[KN_MAX_RANK], nat[KN_MAX_RANK];
    const kn_tensor *x = in[0];
    if ((st = unpool_geometry(n, x->rank, x->dims, kn_node_input(n, 2) ? in[2] : NULL, nat, od))) return st;
    if ((st = alloc_out(n, out, 0, x->dtype, x->rank, od))) return st;
    if (!memcmp(nat, od, sizeof(int64_t) * (size_t)x->rank))
        return kernel_status(n, kn_k_maxunpool(x, in[1], &out[0]));
    /* Indices address the attribute-implied shape; output_shape only pads
     * (or crops) that result at the end of each axis, as onnxruntime does. */
    kn_tensor tmp = {0};
    if ((st = kn_tensor_alloc(&tmp, x->dtype, x->rank, nat))) return kn_node_error(n, st, "%s", kn_last_error());
    st = kernel_status(n, kn_k_maxunpool(x, in[1], &tmp));
    if (!st) copy_corner(&tmp, &out[0]);
    kn_tensor_free(&tmp);
    return st;
}

/* ---- MaxRoiPool and RoiAlign -------------------------------------------------------- */

/* Output dims R x C x oh x ow of the RoI ops; rois_rank/rd describe the rois. */
static int roi_geometry(const kn_node *n, int xr, const int64_t *xd, int rr, const int64_t *rd, int cols,
                        int64_t oh, int64_t ow, int64_t *od)
{
    if (xr >= 0 && xr != 4) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected 4 (N x C x H x W)", xr);
    if (rr >= 0 && (rr != 2 || (rd[1] >= 0 && rd[1] != cols)))
        return kn_node_error(n, KN_ERR_INVALID, "rois must be num_rois x %d", cols);
    if (oh < 1 || ow < 1) return kn_node_error(n, KN_ERR_INVALID, "pooled size %lldx%lld must be positive",
                                               (long long)oh, (long long)ow);
    od[0] = rr >= 0 ? rd[0] : -1;
    od[1] = xr >= 0 ? xd[1] : -1;
    od[2] = oh;
    od[3] = ow;
    return KN_OK;
}

static int roipool_size(const kn_node *n, int64_t *oh, int64_t *ow)
{
    const int64_t *ps;
    if (kn_attr_ints(n, "pooled_shape", &ps) != 2)
        return kn_node_error(n, KN_ERR_INVALID, "attribute 'pooled_shape' must have 2 values");
    *oh = ps[0];
    *ow = ps[1];
    return KN_OK;
}

static int infer_roi(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], rd[KN_MAX_RANK], od[4], oh = 0, ow = 0;
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), rr = in_dims(n, 1, rd, NULL), st;
    bool align = n->op == KN_OP_RoiAlign;
    if (align) {
        oh = kn_attr_int(n, "output_height", 1);
        ow = kn_attr_int(n, "output_width", 1);
    } else if ((st = roipool_size(n, &oh, &ow))) {
        return st;
    }
    if ((st = roi_geometry(n, xr, xd, rr, rd, align ? 4 : 5, oh, ow, od))) return st;
    set_out(n, 0, dt, 4, od);
    /* The first output dim counts RoIs, not images: name it after the rois' dim. */
    if (n->outputs[0]) n->outputs[0]->shape.sym[0] = rr >= 1 && rd[0] < 0 ? n->inputs[1]->shape.sym[0] : NULL;
    return KN_OK;
}

static int eval_maxroipool(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st;
    int64_t od[4], oh = 0, ow = 0;
    if ((st = need_input(n, in, 0, "X")) || (st = need_input(n, in, 1, "rois")) || (st = roipool_size(n, &oh, &ow)))
        return st;
    if (!is_float_dt(in[0]->dtype) || !is_float_dt(in[1]->dtype))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "X and rois must be float tensors");
    if ((st = roi_geometry(n, in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, 5, oh, ow, od))) return st;
    if ((st = alloc_out(n, out, 0, in[0]->dtype, 4, od))) return st;
    return kernel_status(n, kn_k_maxroipool(in[0], in[1], kn_attr_float(n, "spatial_scale", 1.0f), &out[0]));
}

static int eval_roialign(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st;
    if ((st = need_input(n, in, 0, "X")) || (st = need_input(n, in, 1, "rois")) ||
        (st = need_input(n, in, 2, "batch_indices")))
        return st;
    if (!is_float_dt(in[0]->dtype) || !is_float_dt(in[1]->dtype))
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "X and rois must be float tensors");
    if (!kn_dtype_info(in[2]->dtype)->is_integer)
        return kn_node_error(n, KN_ERR_INVALID, "batch_indices must be an integer tensor");
    int64_t od[4];
    if ((st = roi_geometry(n, in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, 4, kn_attr_int(n, "output_height", 1),
                           kn_attr_int(n, "output_width", 1), od)))
        return st;
    if (kn_tensor_numel(in[2]) != od[0])
        return kn_node_error(n, KN_ERR_INVALID, "batch_indices has %lld entries for %lld rois",
                             (long long)kn_tensor_numel(in[2]), (long long)od[0]);
    const char *mode = kn_attr_string(n, "mode", "avg");
    if (strcmp(mode, "avg") && strcmp(mode, "max")) return kn_node_error(n, KN_ERR_INVALID, "unknown mode '%s'", mode);
    /* Opset 16 added coordinate_transformation_mode, defaulting to half_pixel;
     * before, the behaviour was output_half_pixel. */
    const char *ctm = kn_attr_string(n, "coordinate_transformation_mode",
                                     kn_node_opset(n) >= 16 ? "half_pixel" : "output_half_pixel");
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return kn_node_error(n, KN_ERR_INVALID, "unknown coordinate_transformation_mode '%s'", ctm);
    int64_t sr = kn_attr_int(n, "sampling_ratio", 0);
    if (sr < 0 || sr > 4096) return kn_node_error(n, KN_ERR_INVALID, "sampling_ratio %lld is out of range", (long long)sr);
    if ((st = alloc_out(n, out, 0, in[0]->dtype, 4, od))) return st;
    return kernel_status(n, kn_k_roialign(in[0], in[1], in[2], !strcmp(mode, "max"), sr,
                                          kn_attr_float(n, "spatial_scale", 1.0f), !strcmp(ctm, "half_pixel"), &out[0]));
}

/* ---- Col2Im -------------------------------------------------------------------------- */

/* Output dims N x C x image... and the window (block, strides, ...). */
static int col2im_geometry(const kn_node *n, int xr, const int64_t *xd, const kn_tensor *img, const kn_tensor *blk,
                           kn_nn_window *w, int *out_rank, int64_t *od)
{
    if (xr != 3) return kn_node_error(n, KN_ERR_INVALID, "input has rank %d, expected 3 (N x C*prod(block) x L)", xr);
    int64_t iv[KN_NN_MAXSP], bv[KN_NN_MAXSP];
    int ni = kn_tensor_read_ints(img, iv, KN_NN_MAXSP), nb = ni < 0 ? -1 : kn_tensor_read_ints(blk, bv, KN_NN_MAXSP);
    if (ni < 0 || nb < 0) return kn_node_error(n, KN_ERR_INVALID, "image_shape/block_shape: %s", kn_last_error());
    if (ni != nb || ni < 1)
        return kn_node_error(n, KN_ERR_INVALID, "image_shape has %d values and block_shape %d; expected the same, at least 1",
                             ni, nb);
    int64_t kprod = 1;
    for (int d = 0; d < ni; d++) {
        if (iv[d] < 0 || bv[d] < 1)
            return kn_node_error(n, KN_ERR_INVALID, "image_shape[%d] = %lld / block_shape[%d] = %lld are invalid", d,
                                 (long long)iv[d], d, (long long)bv[d]);
        w->kernel[d] = bv[d];
        kprod *= bv[d];
    }
    int st = read_window(n, ni, w);
    if (st) return st;
    if (xd[1] >= 0 && xd[1] % kprod)
        return kn_node_error(n, KN_ERR_INVALID, "input has %lld rows, not a multiple of prod(block_shape) = %lld",
                             (long long)xd[1], (long long)kprod);
    *out_rank = ni + 2;
    od[0] = xd[0];
    od[1] = xd[1] >= 0 ? xd[1] / kprod : -1;
    for (int d = 0; d < ni; d++) od[2 + d] = iv[d];
    return KN_OK;
}

static int infer_col2im(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), orank;
    kn_value *img = kn_node_input(n, 1), *blk = kn_node_input(n, 2);
    if (xr < 0 || !img || !blk || !img->const_data || !blk->const_data) {
        set_out(n, 0, dt, -1, NULL);
        return KN_OK;
    }
    kn_nn_window w;
    int st = col2im_geometry(n, xr, xd, img->const_data, blk->const_data, &w, &orank, od);
    if (st) return st;
    set_out(n, 0, dt, orank, od);
    return KN_OK;
}

static int eval_col2im(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    int st, orank;
    if ((st = need_input(n, in, 0, "input")) || (st = need_input(n, in, 1, "image_shape")) ||
        (st = need_input(n, in, 2, "block_shape")))
        return st;
    if (!is_float_dt(in[0]->dtype)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(in[0]->dtype));
    int64_t od[KN_MAX_RANK];
    kn_nn_window w;
    if ((st = col2im_geometry(n, in[0]->rank, in[0]->dims, in[1], in[2], &w, &orank, od))) return st;
    if ((st = alloc_out(n, out, 0, in[0]->dtype, orank, od))) return st;
    return kernel_status(n, kn_k_col2im(in[0], &w, &out[0]));
}


const kn_op_impl kn_ops_nn[] = {
    {KN_OP_Conv, infer_conv, eval_conv},
    {KN_OP_ConvTranspose, infer_convt, eval_convt},
    {KN_OP_MaxPool, infer_pool, eval_maxpool},
    {KN_OP_AveragePool, infer_pool, eval_avgpool},
    {KN_OP_LpPool, infer_pool, eval_lppool},
    {KN_OP_GlobalAveragePool, infer_global_pool, eval_gap},
    {KN_OP_GlobalMaxPool, infer_global_pool, eval_gmp},
    {KN_OP_GlobalLpPool, infer_global_pool, eval_glp},
    {KN_OP_BatchNormalization, infer_batchnorm, eval_batchnorm},
    {KN_OP_LayerNormalization, infer_layernorm, eval_layernorm},
    {KN_OP_InstanceNormalization, infer_same, eval_instancenorm},
    {KN_OP_GroupNormalization, infer_same, eval_groupnorm},
    {KN_OP_LRN, infer_same, eval_lrn},
    {KN_OP_LpNormalization, infer_same, eval_lpnorm},
    {KN_OP_MeanVarianceNormalization, infer_same, eval_mvn},
    {KN_OP_MaxUnpool, infer_maxunpool, eval_maxunpool},
    {KN_OP_MaxRoiPool, infer_roi, eval_maxroipool},
    {KN_OP_RoiAlign, infer_roi, eval_roialign},
    {KN_OP_Col2Im, infer_col2im, eval_col2im},
    {KN_OP_UNKNOWN, NULL, NULL},
};
