/*
 * Shape and attribute logic of the 'nn' ops (see nn_int.h): sliding-window
 * attributes, auto_pad, and each op's output dims. Used by execution here in
 * runtime/ops and by type/shape inference in ir/ops/nn.c, so the shapes a
 * graph promises and the tensors it produces come from one implementation.
 */
#include <string.h>

#include "nn_int.h"

bool kn_nn_is_float(kn_dtype dt)
{
    return dt == KN_F32 || dt == KN_F64 || dt == KN_F16 || dt == KN_BF16;
}

/* Reads an integer tensor into int64s: the count, or -1 with an error if the
 * dtype is not integer or there are more than max values. */
static int read_ints(const kn_tensor *t, int64_t *out, int max)
{
    if (!kn_dtype_info(t->dtype)->is_integer) {
        kn_error(KN_ERR_INVALID, "expected an integer tensor, got %s", kn_dtype_name(t->dtype));
        return -1;
    }
    int64_t n = kn_tensor_numel(t);
    if (n > max) {
        kn_error(KN_ERR_INVALID, "integer tensor has %lld elements, at most %d expected", (long long)n, max);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) out[i] = kn_load_i64(t->dtype, t->data, (size_t)i);
    return (int)n;
}

static int64_t floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t ceildiv(int64_t a, int64_t b) { return -floordiv(-a, b); }


/* Rank check for N x C x spatial... tensors. */
static int check_nchw(const kn_opdesc *op, int rank, const char *what)
{
    if (rank < 3 || rank > 2 + KN_NN_MAXSP)
        return kn_op_error(op, KN_ERR_INVALID, "%s has rank %d, expected N x C x D1 ... (3 to %d)", what,
                           rank, 2 + KN_NN_MAXSP);
    return KN_OK;
}

/* ---- sliding windows ------------------------------------------------------ */

/* Reads an ints attribute of exactly `count` entries into out (default def
 * when absent), each at least `min`. */
static int window_ints(const kn_opdesc *op, const char *name, int count, int64_t def, int64_t min, int64_t *out)
{
    const int64_t *v;
    int c = kn_op_attr_ints(op, name, &v);
    if (c && c != count)
        return kn_op_error(op, KN_ERR_INVALID, "attribute '%s' has %d values, expected %d", name, c, count);
    for (int d = 0; d < count; d++) {
        out[d] = c ? v[d] : def;
        if (out[d] < min)
            return kn_op_error(op, KN_ERR_INVALID, "attribute '%s'[%d] is %lld, must be at least %lld", name,
                               d, (long long)out[d], (long long)min);
        if (out[d] > ((int64_t)1 << 24)) /* keeps window arithmetic far from overflow */
            return kn_op_error(op, KN_ERR_INVALID, "attribute '%s'[%d] is absurdly large (%lld)", name, d,
                               (long long)out[d]);
    }
    return KN_OK;
}

/* Fills strides, dilations and pads of w (kernel is the caller's). */
static int read_window(const kn_opdesc *op, int nsp, kn_nn_window *w)
{
    w->nsp = nsp;
    int st = window_ints(op, "strides", nsp, 1, 1, w->strides);
    if (!st) st = window_ints(op, "dilations", nsp, 1, 1, w->dilations);
    if (!st) st = window_ints(op, "pads", 2 * nsp, 0, 0, w->pads);
    return st;
}

/* Output spatial dims of a sliding window over in[] (-1 = unknown), resolving
 * auto_pad into w->pads. Kernel dims of -1 give unknown outputs. */
static int window_out(const kn_opdesc *op, kn_nn_window *w, const int64_t *in, bool ceil_mode, int64_t *out)
{
    const char *ap = kn_op_attr_string(op, "auto_pad", "NOTSET");
    bool upper = !strcmp(ap, "SAME_UPPER"), lower = !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
    if (!upper && !lower && !valid && strcmp(ap, "NOTSET") && *ap)
        return kn_op_error(op, KN_ERR_INVALID, "unknown auto_pad '%s'", ap);
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
            return kn_op_error(op, KN_ERR_INVALID,
                               "spatial axis %d: window of %lld (kernel %lld, dilation %lld) is larger than the padded input (%lld)",
                               d, (long long)eff, (long long)k, (long long)w->dilations[d],
                               (long long)(in[d] + w->pads[d] + w->pads[nsp + d]));
        out[d] = (ceil_mode ? ceildiv(span, s) : floordiv(span, s)) + 1;
        /* As in PyTorch/onnxruntime: a last window starting in the end padding is dropped. */
        if (ceil_mode && (out[d] - 1) * s >= in[d] + w->pads[d]) out[d]--;
    }
    return KN_OK;
}


/* Output dims of Conv given X (rank, xd) and W dims (wd, NULL if unknown). */
int kn_nn_conv_geometry(const kn_opdesc *op, int rank, const int64_t *xd, const int64_t *wd,
                         kn_nn_window *w, int64_t *group, int64_t *od)
{
    int nsp = rank - 2, st = check_nchw(op, rank, "X");
    if (st) return st;
    *group = kn_op_attr_int(op, "group", 1);
    if (*group < 1) return kn_op_error(op, KN_ERR_INVALID, "group is %lld, must be positive", (long long)*group);
    if (wd) {
        if (wd[0] >= 0 && wd[0] % *group)
            return kn_op_error(op, KN_ERR_INVALID, "weight has %lld output channels, not a multiple of group %lld",
                               (long long)wd[0], (long long)*group);
        if (wd[1] >= 0 && xd[1] >= 0 && wd[1] * *group != xd[1])
            return kn_op_error(op, KN_ERR_INVALID,
                               "weight has %lld input channels per group, X has %lld channels with group %lld",
                               (long long)wd[1], (long long)xd[1], (long long)*group);
    }
    int64_t wk[KN_NN_MAXSP];
    for (int d = 0; d < nsp; d++) wk[d] = wd ? wd[2 + d] : -1;
    const int64_t *ks;
    int kc = kn_op_attr_ints(op, "kernel_shape", &ks);
    if (kc && kc != nsp)
        return kn_op_error(op, KN_ERR_INVALID, "kernel_shape has %d values, X has %d spatial axes", kc, nsp);
    for (int d = 0; d < nsp; d++) {
        if (kc && wk[d] >= 0 && ks[d] != wk[d])
            return kn_op_error(op, KN_ERR_INVALID, "kernel_shape[%d] is %lld, weight has %lld", d,
                               (long long)ks[d], (long long)wk[d]);
        w->kernel[d] = kc ? ks[d] : wk[d];
        if (kc && ks[d] < 1) return kn_op_error(op, KN_ERR_INVALID, "kernel_shape[%d] is %lld", d, (long long)ks[d]);
    }
    if ((st = read_window(op, nsp, w))) return st;
    od[0] = xd[0];
    od[1] = wd ? wd[0] : -1;
    return window_out(op, w, xd + 2, false, od + 2);
}


int kn_nn_convt_geometry(const kn_opdesc *op, int rank, const int64_t *xd, const int64_t *wd,
                          kn_nn_window *w, int64_t *group, int64_t *od)
{
    int nsp = rank - 2, st = check_nchw(op, rank, "X");
    if (st) return st;
    *group = kn_op_attr_int(op, "group", 1);
    if (*group < 1) return kn_op_error(op, KN_ERR_INVALID, "group is %lld, must be positive", (long long)*group);
    if (wd && wd[0] >= 0 && xd[1] >= 0 && wd[0] != xd[1])
        return kn_op_error(op, KN_ERR_INVALID, "weight has %lld input channels, X has %lld",
                           (long long)wd[0], (long long)xd[1]);
    if (xd[1] >= 0 && xd[1] % *group)
        return kn_op_error(op, KN_ERR_INVALID, "X has %lld channels, not a multiple of group %lld",
                           (long long)xd[1], (long long)*group);
    const int64_t *ks;
    int kc = kn_op_attr_ints(op, "kernel_shape", &ks);
    if (kc && kc != nsp)
        return kn_op_error(op, KN_ERR_INVALID, "kernel_shape has %d values, X has %d spatial axes", kc, nsp);
    for (int d = 0; d < nsp; d++) {
        w->kernel[d] = kc ? ks[d] : wd ? wd[2 + d] : -1;
        if (kc && wd && wd[2 + d] >= 0 && ks[d] != wd[2 + d])
            return kn_op_error(op, KN_ERR_INVALID, "kernel_shape[%d] is %lld, weight has %lld", d,
                               (long long)ks[d], (long long)wd[2 + d]);
    }
    if ((st = read_window(op, nsp, w))) return st;
    int64_t opad[KN_NN_MAXSP], oshape[KN_NN_MAXSP];
    if ((st = window_ints(op, "output_padding", nsp, 0, 0, opad))) return st;
    const int64_t *os;
    int oc = kn_op_attr_ints(op, "output_shape", &os);
    if (oc && oc != nsp && oc != nsp + 2)
        return kn_op_error(op, KN_ERR_INVALID, "output_shape has %d values, expected %d", oc, nsp);
    for (int d = 0; d < nsp && oc; d++) oshape[d] = os[oc - nsp + d];
    const char *ap = kn_op_attr_string(op, "auto_pad", "NOTSET");
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    bool have_pads = kn_op_attr(op, "pads") != NULL; /* explicit pads win, as in the ONNX reference */
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
            return kn_op_error(op, KN_ERR_INVALID, "spatial axis %d: output size %lld is negative", d,
                               (long long)od[2 + d]);
    }
    return KN_OK;
}


int kn_nn_pool_geometry(const kn_opdesc *op, int rank, const int64_t *xd, kn_nn_window *w, int64_t *od)
{
    int nsp = rank - 2, st = check_nchw(op, rank, "X");
    if (st) return st;
    const int64_t *ks;
    int kc = kn_op_attr_ints(op, "kernel_shape", &ks);
    if (kc != nsp)
        return kn_op_error(op, KN_ERR_INVALID, "kernel_shape has %d values, X has %d spatial axes", kc, nsp);
    if ((st = window_ints(op, "kernel_shape", nsp, 1, 1, w->kernel))) return st;
    if ((st = read_window(op, nsp, w))) return st;
    od[0] = xd[0];
    od[1] = xd[1];
    return window_out(op, w, xd + 2, kn_op_attr_int(op, "ceil_mode", 0) != 0, od + 2);
}


kn_dtype kn_nn_stash_dtype(const kn_opdesc *op, kn_dtype def)
{
    int64_t s = kn_op_attr_int(op, "stash_type", 1);
    return kn_nn_is_float((kn_dtype)s) ? (kn_dtype)s : def;
}


/* Dims of MaxUnpool: `nat` is the shape the pooling attributes imply (the
 * space the indices address); od is the output_shape input's value when
 * given (os non-NULL), else nat. */
int kn_nn_unpool_geometry(const kn_opdesc *op, int rank, const int64_t *xd, const kn_tensor *os, int64_t *nat,
                           int64_t *od)
{
    int nsp = rank - 2, st = check_nchw(op, rank, "X");
    if (st) return st;
    kn_nn_window w;
    const int64_t *ks;
    if (kn_op_attr_ints(op, "kernel_shape", &ks) != nsp)
        return kn_op_error(op, KN_ERR_INVALID, "kernel_shape must have %d values", nsp);
    if ((st = window_ints(op, "kernel_shape", nsp, 1, 1, w.kernel)) || (st = read_window(op, nsp, &w))) return st;
    nat[0] = xd[0];
    nat[1] = xd[1];
    for (int d = 0; d < nsp; d++) {
        nat[2 + d] = xd[2 + d] < 0 ? -1 : (xd[2 + d] - 1) * w.strides[d] + w.kernel[d] - w.pads[d] - w.pads[nsp + d];
        if (xd[2 + d] >= 0 && nat[2 + d] < 0)
            return kn_op_error(op, KN_ERR_INVALID, "spatial axis %d: pads exceed the unpooled size", d);
    }
    memcpy(od, nat, sizeof(int64_t) * (size_t)rank);
    if (!os) return KN_OK;
    int64_t v[KN_MAX_RANK];
    int c = read_ints(os, v, KN_MAX_RANK);
    if (c < 0) return kn_op_error(op, KN_ERR_INVALID, "output_shape: %s", kn_last_error());
    if (c != rank) return kn_op_error(op, KN_ERR_INVALID, "output_shape has %d values, expected %d", c, rank);
    for (int d = 0; d < rank; d++) {
        if (v[d] < 0) return kn_op_error(op, KN_ERR_INVALID, "output_shape[%d] is negative", d);
        od[d] = v[d];
    }
    return KN_OK;
}


/* Output dims R x C x oh x ow of the RoI ops; rois_rank/rd describe the rois. */
int kn_nn_roi_geometry(const kn_opdesc *op, int xr, const int64_t *xd, int rr, const int64_t *rd, int cols,
                        int64_t oh, int64_t ow, int64_t *od)
{
    if (xr >= 0 && xr != 4) return kn_op_error(op, KN_ERR_INVALID, "X has rank %d, expected 4 (N x C x H x W)", xr);
    if (rr >= 0 && (rr != 2 || (rd[1] >= 0 && rd[1] != cols)))
        return kn_op_error(op, KN_ERR_INVALID, "rois must be num_rois x %d", cols);
    if (oh < 1 || ow < 1) return kn_op_error(op, KN_ERR_INVALID, "pooled size %lldx%lld must be positive",
                                             (long long)oh, (long long)ow);
    od[0] = rr >= 0 ? rd[0] : -1;
    od[1] = xr >= 0 ? xd[1] : -1;
    od[2] = oh;
    od[3] = ow;
    return KN_OK;
}

int kn_nn_roipool_size(const kn_opdesc *op, int64_t *oh, int64_t *ow)
{
    const int64_t *ps;
    if (kn_op_attr_ints(op, "pooled_shape", &ps) != 2)
        return kn_op_error(op, KN_ERR_INVALID, "attribute 'pooled_shape' must have 2 values");
    *oh = ps[0];
    *ow = ps[1];
    return KN_OK;
}


/* Output dims N x C x image... and the window (block, strides, ...). */
int kn_nn_col2im_geometry(const kn_opdesc *op, int xr, const int64_t *xd, const kn_tensor *img, const kn_tensor *blk,
                           kn_nn_window *w, int *out_rank, int64_t *od)
{
    if (xr != 3) return kn_op_error(op, KN_ERR_INVALID, "input has rank %d, expected 3 (N x C*prod(block) x L)", xr);
    int64_t iv[KN_NN_MAXSP], bv[KN_NN_MAXSP];
    int ni = read_ints(img, iv, KN_NN_MAXSP), nb = ni < 0 ? -1 : read_ints(blk, bv, KN_NN_MAXSP);
    if (ni < 0 || nb < 0) return kn_op_error(op, KN_ERR_INVALID, "image_shape/block_shape: %s", kn_last_error());
    if (ni != nb || ni < 1)
        return kn_op_error(op, KN_ERR_INVALID, "image_shape has %d values and block_shape %d; expected the same, at least 1",
                           ni, nb);
    int64_t kprod = 1;
    for (int d = 0; d < ni; d++) {
        if (iv[d] < 0 || bv[d] < 1)
            return kn_op_error(op, KN_ERR_INVALID, "image_shape[%d] = %lld / block_shape[%d] = %lld are invalid", d,
                               (long long)iv[d], d, (long long)bv[d]);
        w->kernel[d] = bv[d];
        kprod *= bv[d];
    }
    int st = read_window(op, ni, w);
    if (st) return st;
    if (xd[1] >= 0 && xd[1] % kprod)
        return kn_op_error(op, KN_ERR_INVALID, "input has %lld rows, not a multiple of prod(block_shape) = %lld",
                           (long long)xd[1], (long long)kprod);
    *out_rank = ni + 2;
    od[0] = xd[0];
    od[1] = xd[1] >= 0 ? xd[1] / kprod : -1;
    for (int d = 0; d < ni; d++) od[2 + d] = iv[d];
    return KN_OK;
}


void kn_nn_global_dims(int rank, const int64_t *xd, int64_t *od)
{
    for (int d = 0; d < rank; d++) od[d] = d < 2 ? xd[d] : 1;
}

int kn_nn_layernorm_geometry(const kn_opdesc *op, int rank, const int64_t *xd, int *axis, int64_t *md)
{
    int64_t a = kn_op_attr_int(op, "axis", -1);
    *axis = kn_norm_axis(a, rank);
    if (*axis < 0)
        return kn_op_error(op, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)a, rank);
    for (int d = 0; d < rank; d++) md[d] = d < *axis ? xd[d] : 1;
    return KN_OK;
}

static int64_t umul(int64_t a, int64_t b) { return a < 0 || b < 0 ? -1 : a * b; }
static int64_t uadd(int64_t a, int64_t b) { return a < 0 || b < 0 ? -1 : a + b; }

/* a / h when a is known (h > 0); an error if it does not divide. */
static int head_split(const kn_opdesc *op, const char *what, int64_t a, int64_t h, int64_t *out)
{
    if (a < 0) {
        *out = -1;
        return KN_OK;
    }
    if (a % h)
        return kn_op_error(op, KN_ERR_INVALID, "%s's hidden size %lld is not a multiple of its %lld heads", what,
                           (long long)a, (long long)h);
    *out = a / h;
    return KN_OK;
}

int kn_nn_attention_geometry(const kn_opdesc *op, int qr, const int64_t *qd, int kr, const int64_t *kd, int vr,
                             const int64_t *vd, int pr, const int64_t *pd, kn_attn_dims *dm, int *yrank,
                             int64_t *yd, int64_t *pkd, int64_t *pvd, int64_t *qkd)
{
    if (qr != kr || qr != vr || (qr != 3 && qr != 4))
        return kn_op_error(op, KN_ERR_INVALID, "Q, K and V have ranks %d, %d, %d; expected all 3 or all 4", qr, kr, vr);
    memset(dm, 0, sizeof *dm);
    dm->three_d = qr == 3;
    int st;
    if (dm->three_d) {
        dm->Hq = kn_op_attr_int(op, "q_num_heads", 0);
        dm->Hkv = kn_op_attr_int(op, "kv_num_heads", 0);
        if (dm->Hq <= 0 || dm->Hkv <= 0)
            return kn_op_error(op, KN_ERR_INVALID,
                               "3-D Q/K/V need attributes q_num_heads and kv_num_heads > 0 (got %lld, %lld)",
                               (long long)dm->Hq, (long long)dm->Hkv);
        dm->Sq = qd[1];
        dm->Skv = kd[1];
        int64_t dk = -1;
        if ((st = head_split(op, "Q", qd[2], dm->Hq, &dm->D)) || (st = head_split(op, "K", kd[2], dm->Hkv, &dk)) ||
            (st = head_split(op, "V", vd[2], dm->Hkv, &dm->Dv)))
            return st;
        if (dm->D >= 0 && dk >= 0 && dk != dm->D)
            return kn_op_error(op, KN_ERR_INVALID, "Q's head size %lld differs from K's %lld", (long long)dm->D,
                               (long long)dk);
        if (vd[1] >= 0 && kd[1] >= 0 && vd[1] != kd[1])
            return kn_op_error(op, KN_ERR_INVALID, "K has %lld positions, V %lld", (long long)kd[1], (long long)vd[1]);
    } else {
        dm->Hq = qd[1];
        dm->Hkv = kd[1];
        dm->Sq = qd[2];
        dm->Skv = kd[2];
        dm->D = qd[3];
        dm->Dv = vd[3];
        if (kd[3] >= 0 && qd[3] >= 0 && kd[3] != qd[3])
            return kn_op_error(op, KN_ERR_INVALID, "Q's head size %lld differs from K's %lld", (long long)qd[3],
                               (long long)kd[3]);
        if ((vd[1] >= 0 && kd[1] >= 0 && vd[1] != kd[1]) || (vd[2] >= 0 && kd[2] >= 0 && vd[2] != kd[2]))
            return kn_op_error(op, KN_ERR_INVALID, "K (heads x positions %lld x %lld) and V (%lld x %lld) disagree",
                               (long long)kd[1], (long long)kd[2], (long long)vd[1], (long long)vd[2]);
    }
    dm->B = qd[0];
    if (dm->Hq > 0 && dm->Hkv > 0 && dm->Hq % dm->Hkv)
        return kn_op_error(op, KN_ERR_INVALID, "q_num_heads %lld is not a multiple of kv_num_heads %lld",
                           (long long)dm->Hq, (long long)dm->Hkv);
    if (dm->Hkv == 0) return kn_op_error(op, KN_ERR_INVALID, "K has no heads");
    dm->P = 0;
    if (pr >= 0) {
        if (pr != 4) return kn_op_error(op, KN_ERR_INVALID, "past_key has rank %d, expected 4", pr);
        dm->P = pd[2];
    }
    int64_t T = uadd(dm->P, dm->Skv);
    if (dm->three_d) {
        *yrank = 3;
        yd[0] = dm->B, yd[1] = dm->Sq, yd[2] = umul(dm->Hq, dm->Dv);
    } else {
        *yrank = 4;
        yd[0] = dm->B, yd[1] = dm->Hq, yd[2] = dm->Sq, yd[3] = dm->Dv;
    }
    pkd[0] = pvd[0] = qkd[0] = dm->B;
    pkd[1] = pvd[1] = dm->Hkv;
    pkd[2] = pvd[2] = T;
    pkd[3] = dm->D;
    pvd[3] = dm->Dv;
    qkd[1] = dm->Hq, qkd[2] = dm->Sq, qkd[3] = T;
    return KN_OK;
}

int kn_nn_rotary_geometry(const kn_opdesc *op, int xr, const int64_t *xd, int64_t *H, int64_t *rot, bool *three_d)
{
    if (xr != 3 && xr != 4) return kn_op_error(op, KN_ERR_INVALID, "X has rank %d, expected 3 or 4", xr);
    *three_d = xr == 3;
    int64_t D = -1;
    if (*three_d) {
        *H = kn_op_attr_int(op, "num_heads", 0);
        if (*H <= 0) return kn_op_error(op, KN_ERR_INVALID, "3-D X needs attribute num_heads > 0");
        int st = head_split(op, "X", xd[2], *H, &D);
        if (st) return st;
    } else {
        *H = xd[1];
        D = xd[3];
    }
    *rot = kn_op_attr_int(op, "rotary_embedding_dim", 0);
    if (*rot == 0) *rot = D;
    if (*rot < 0 || *rot % 2 || (D >= 0 && *rot > D))
        return kn_op_error(op, KN_ERR_INVALID, "rotary_embedding_dim %lld must be even and at most the head size %lld",
                           (long long)*rot, (long long)D);
    return KN_OK;
}
