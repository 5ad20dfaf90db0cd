/*
 * Attribute logic of the 'linalg' ops (see linalg_int.h), shared by their
 * execution (linalg.c) and their inference (ir/ops/linalg.c) so that
 * opset-dependent defaults and conv geometry are decided in one place.
 */
#include <string.h>

#include "linalg_int.h"

int64_t kn_linalg_softmax_axis(const kn_opdesc *d)
{
    return kn_op_attr_int(d, "axis", d->opset < 13 ? 1 : -1);
}

kn_dtype kn_linalg_quant_out_dtype(const kn_opdesc *d, kn_dtype zp_dt)
{
    if (zp_dt) return zp_dt;
    int64_t od = kn_op_attr_int(d, "output_dtype", 0);
    /* out-of-range values stay invalid (kn_dtype_valid fails) without an
     * int64-to-enum narrowing that could wrap into a valid code */
    return od > 0 ? (od < 1000 ? (kn_dtype)od : (kn_dtype)1000) : KN_U8;
}

int kn_linalg_dequant_out_dtype(const kn_opdesc *d, kn_dtype scale_dt, kn_dtype *out_dt)
{
    int64_t od = kn_op_attr_int(d, "output_dtype", 0);
    *out_dt = scale_dt;
    if (od <= 0) return KN_OK;
    if (od >= 1000 || !kn_dtype_valid((int)od) || !kn_dtype_info((kn_dtype)od)->is_float)
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "output dtype %lld", (long long)od);
    *out_dt = (kn_dtype)od;
    return KN_OK;
}

/* Reads an ints attribute of `count` values (def for each when absent). */
static int count_ints(const kn_opdesc *d, const char *name, int count, int64_t def, int64_t *out)
{
    const int64_t *v;
    int c = kn_op_attr_ints(d, name, &v);
    if (c && c != count) return kn_op_error(d, KN_ERR_INVALID, "%s has %d values, expected %d", name, c, count);
    for (int i = 0; i < count; i++) out[i] = c ? v[i] : def;
    return KN_OK;
}

int kn_linalg_conv_params(const kn_opdesc *d, int nsp, const int64_t *w_dims, kn_k_conv_params *p)
{
    memset(p, 0, sizeof *p);
    if (nsp < 1 || nsp > KN_MAX_RANK - 2)
        return kn_op_error(d, KN_ERR_INVALID, "input rank %d does not fit a convolution", nsp + 2);
    p->nsp = nsp;
    p->group = kn_op_attr_int(d, "group", 1);
    const char *ap = kn_op_attr_string(d, "auto_pad", "NOTSET");
    if (!strcmp(ap, "NOTSET") || !*ap) p->auto_pad = KN_K_PAD_NOTSET;
    else if (!strcmp(ap, "SAME_UPPER")) p->auto_pad = KN_K_PAD_SAME_UPPER;
    else if (!strcmp(ap, "SAME_LOWER")) p->auto_pad = KN_K_PAD_SAME_LOWER;
    else if (!strcmp(ap, "VALID")) p->auto_pad = KN_K_PAD_VALID;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown auto_pad '%s'", ap);
    const int64_t *v;
    int c = kn_op_attr_ints(d, "kernel_shape", &v);
    if (c && c != nsp) return kn_op_error(d, KN_ERR_INVALID, "kernel_shape has %d values, expected %d", c, nsp);
    for (int i = 0; i < nsp; i++) p->kernel[i] = c ? v[i] : (w_dims ? w_dims[2 + i] : -1);
    int64_t pads[2 * KN_MAX_RANK];
    int st = count_ints(d, "strides", nsp, 1, p->strides);
    if (!st) st = count_ints(d, "dilations", nsp, 1, p->dilations);
    if (!st) st = count_ints(d, "pads", 2 * nsp, 0, pads);
    if (st) return st;
    for (int i = 0; i < nsp; i++) {
        p->pad_begin[i] = pads[i];
        p->pad_end[i] = pads[nsp + i];
    }
    return KN_OK;
}
