/*
 * Execution of the 'vision' ops (see opdesc.h): sampling and detection
 * over images: GridSample, AffineGrid, DeformConv, NonMaxSuppression.
 * Kernels are in runtime/kernels/ref/vision.c; the attribute and shape
 * rules (vision_int.h) are shared with the family's type inference in the
 * IR (ir/ops/vision.c).
 */
#include <string.h>

#include "vision_int.h"

/* ---- GridSample ------------------------------------------------------------------------------ */

int kn_vis_gs_params(const kn_opdesc *d, kn_gs_mode *mode, kn_gs_pad *pad)
{
    const char *m = kn_op_attr_string(d, "mode", d->opset >= 20 ? "linear" : "bilinear");
    const char *p = kn_op_attr_string(d, "padding_mode", "zeros");
    if (!strcmp(m, "nearest")) *mode = KN_GS_NEAREST;
    else if (!strcmp(m, "linear") || !strcmp(m, "bilinear")) *mode = KN_GS_LINEAR;
    else if (!strcmp(m, "cubic") || !strcmp(m, "bicubic")) *mode = KN_GS_CUBIC;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown mode '%s'", m);
    if (!strcmp(p, "zeros")) *pad = KN_GS_ZEROS;
    else if (!strcmp(p, "border")) *pad = KN_GS_BORDER;
    else if (!strcmp(p, "reflection")) *pad = KN_GS_REFLECTION;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown padding_mode '%s'", p);
    return KN_OK;
}

static int exec_gridsample(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    kn_gs_mode mode;
    kn_gs_pad pad;
    int st = kn_vis_gs_params(d, &mode, &pad);
    if (st) return st;
    const kn_tensor *x = in[0], *g = in[1];
    if (x->rank < 3 || g->rank != x->rank || g->dims[x->rank - 1] != x->rank - 2 || g->dims[0] != x->dims[0])
        return kn_op_error(d, KN_ERR_INVALID, "grid must have shape (N, ..., %d) for X of rank %d", x->rank - 2, x->rank);
    int64_t dims[KN_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = x->dims[1];
    for (int i = 2; i < x->rank; i++) dims[i] = g->dims[i - 1];
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_grid_sample(x, g, mode, pad, kn_op_attr_int(d, "align_corners", 0) != 0, &out[0]));
}

/* ---- AffineGrid ------------------------------------------------------------------------ */

/* Reads the size input (N, C, H, W) or (N, C, D, H, W) into dims and s. */
int kn_vis_ag_size(const kn_opdesc *d, const kn_tensor *size, int64_t *dims, int *s)
{
    int64_t cnt = kn_tensor_numel(size);
    if (!kn_dtype_info(size->dtype)->is_integer || size->rank != 1 || (cnt != 4 && cnt != 5))
        return kn_op_error(d, KN_ERR_INVALID, "size must be a 1-D integer tensor of 4 or 5 entries");
    for (int64_t i = 0; i < cnt; i++) {
        dims[i] = kn_load_i64(size->dtype, size->data, (size_t)i);
        if (dims[i] < 0) return kn_op_error(d, KN_ERR_INVALID, "size[%lld] = %lld is negative", (long long)i, (long long)dims[i]);
    }
    *s = (int)cnt - 2;
    return KN_OK;
}

static int exec_affine_grid(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    const kn_tensor *th = in[0];
    int64_t sz[5];
    int s;
    int st = kn_vis_ag_size(d, in[1], sz, &s);
    if (st) return st;
    if (!kn_dtype_info(th->dtype)->is_float)
        return kn_op_error(d, KN_ERR_INVALID, "theta must be floating point, got %s", kn_dtype_name(th->dtype));
    if (th->rank != 3 || th->dims[0] != sz[0] || th->dims[1] != s || th->dims[2] != s + 1)
        return kn_op_error(d, KN_ERR_INVALID, "theta must have shape (%lld, %d, %d) for size of %d entries",
                             (long long)sz[0], s, s + 1, s + 2);
    int64_t dims[5];
    dims[0] = sz[0];
    for (int dv = 0; dv < s; dv++) dims[1 + dv] = sz[2 + dv];
    dims[s + 1] = s;
    st = kn_tensor_alloc(&out[0], th->dtype, s + 2, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_affine_grid(th, s, &sz[2], kn_op_attr_int(d, "align_corners", 0) != 0, &out[0]));
}

/* ---- DeformConv ------------------------------------------------------------------------ */

/* Fills p from the attributes for spatial rank s and kernel dims kd (from
 * W); fails naming the node on inconsistent attribute lengths or values. */
int kn_vis_dc_params(const kn_opdesc *d, int s, const int64_t *kd, kn_deform_params *p)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    p->group = kn_op_attr_int(d, "group", 1);
    p->offset_group = kn_op_attr_int(d, "offset_group", 1);
    if (p->group <= 0 || p->offset_group <= 0)
        return kn_op_error(d, KN_ERR_INVALID, "group %lld / offset_group %lld must be positive", (long long)p->group,
                             (long long)p->offset_group);
    const int64_t *ks, *pads, *strides, *dil;
    int nk = kn_op_attr_ints(d, "kernel_shape", &ks), np = kn_op_attr_ints(d, "pads", &pads);
    int ns = kn_op_attr_ints(d, "strides", &strides), nd = kn_op_attr_ints(d, "dilations", &dil);
    if ((nk && nk != s) || (np && np != 2 * s) || (ns && ns != s) || (nd && nd != s))
        return kn_op_error(d, KN_ERR_INVALID, "kernel_shape/pads/strides/dilations lengths do not match %d spatial dims", s);
    for (int dv = 0; dv < s; dv++) {
        p->kernel[dv] = nk ? ks[dv] : kd[dv];
        if (kd[dv] >= 0 && p->kernel[dv] != kd[dv])
            return kn_op_error(d, KN_ERR_INVALID, "kernel_shape[%d] = %lld but W has %lld", dv, (long long)p->kernel[dv], (long long)kd[dv]);
        p->strides[dv] = ns ? strides[dv] : 1;
        p->dilations[dv] = nd ? dil[dv] : 1;
        p->pads[dv] = np ? pads[dv] : 0;
        p->pads[s + dv] = np ? pads[s + dv] : 0;
        if (p->strides[dv] <= 0 || p->dilations[dv] <= 0 || p->pads[dv] < 0 || p->pads[s + dv] < 0)
            return kn_op_error(d, KN_ERR_INVALID, "strides and dilations must be positive and pads non-negative");
    }
    return KN_OK;
}

/* Output spatial dim dv of a convolution over an input dim of size len. */
int64_t kn_vis_dc_out_dim(const kn_deform_params *p, int dv, int64_t len)
{
    if (len < 0 || p->kernel[dv] < 0) return -1;
    int64_t span = (p->kernel[dv] - 1) * p->dilations[dv] + 1;
    int64_t v = len + p->pads[dv] + p->pads[p->s + dv] - span;
    return v < 0 ? 0 : v / p->strides[dv] + 1;
}

static int exec_deform_conv(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 3)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0], *w = in[1], *off = in[2];
    const kn_tensor *b = kn_op_input(d, in, 3), *mask = kn_op_input(d, in, 4);
    if (x->rank < 3 || w->rank != x->rank)
        return kn_op_error(d, KN_ERR_INVALID, "X rank %d and W rank %d must be equal and >= 3", x->rank, w->rank);
    if (!kn_dtype_info(x->dtype)->is_float)
        return kn_op_error(d, KN_ERR_INVALID, "X must be floating point, got %s", kn_dtype_name(x->dtype));
    kn_deform_params p;
    int st = kn_vis_dc_params(d, x->rank - 2, &w->dims[2], &p);
    if (st) return st;
    int64_t dims[KN_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = w->dims[0];
    for (int dv = 0; dv < p.s; dv++) dims[2 + dv] = kn_vis_dc_out_dim(&p, dv, x->dims[2 + dv]);
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_deform_conv(x, w, off, b, mask, &p, &out[0]));
}

/* ---- NonMaxSuppression ------------------------------------------------------------------------- */

static int exec_nms(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    const kn_tensor *mo = kn_op_input(d, in, 2);
    const kn_tensor *iou = kn_op_input(d, in, 3);
    const kn_tensor *sth = kn_op_input(d, in, 4);
    int64_t max_out = mo && kn_tensor_numel(mo) > 0 ? kn_load_i64(mo->dtype, mo->data, 0) : 0;
    double iou_thr = iou && kn_tensor_numel(iou) > 0 ? kn_load_f64(iou->dtype, iou->data, 0) : 0.0;
    bool has_sth = sth && kn_tensor_numel(sth) > 0;
    double s_thr = has_sth ? kn_load_f64(sth->dtype, sth->data, 0) : 0.0;
    return kn_op_fail(d, kn_k_nms(in[0], in[1], max_out, iou_thr, has_sth, s_thr,
                                 kn_op_attr_int(d, "center_point_box", 0) != 0, &out[0]));
}

/* ---- the family table ---------------------------------------------------------- */

const kn_exec_impl kn_exec_vision[] = {
    {KN_OP_GridSample, exec_gridsample},
    {KN_OP_AffineGrid, exec_affine_grid},
    {KN_OP_DeformConv, exec_deform_conv},
    {KN_OP_NonMaxSuppression, exec_nms},
    {KN_OP_UNKNOWN, NULL},
};
