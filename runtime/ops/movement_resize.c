/*
 * Execution of the movement ops with many knobs: Pad, Resize and Upsample
 * (listed in kn_exec_movement, movement.c). As in movement.c, one "plan"
 * function per op computes the output shape (for the IR's inference, from
 * constant inputs, through kn_mv_shape_of) and the kernel parameters (for
 * execution), so the two never disagree.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastops.h"
#include "k_movement.h"
#include "movement_int.h"

/* 0: absent or empty; 1: value known; 2: present, value unknown. */
static int input_state(const kn_mv_args *a, int i)
{
    if (i < 0 || !a->has[i]) return 0;
    if (a->val[i]) return kn_tensor_numel(a->val[i]) > 0 ? 1 : 0;
    int64_t cnt = a->shp[i].rank >= 0 ? kn_shape_numel(a->shp[i].rank, a->shp[i].dims) : -1;
    return cnt == 0 ? 0 : 2;
}

/* Reads a numeric input as doubles (at most max); the value must be known. */
static int floats_of(const kn_mv_args *a, int i, const char *what, double *out, int max, int *cnt)
{
    const kn_tensor *t = a->val[i];
    const kn_dtype_traits *tr = kn_dtype_info(t->dtype);
    if (!tr->is_float && !tr->is_integer)
        return kn_op_error(a->d, KN_ERR_INVALID, "%s has non-numeric dtype %s", what, kn_dtype_name(t->dtype));
    int64_t c = kn_tensor_numel(t);
    if (c < 0 || c > max) return kn_op_error(a->d, KN_ERR_INVALID, "%s has %lld entries, at most %d supported", what, (long long)c, max);
    for (int64_t k = 0; k < c; k++) out[k] = kn_load_f64(t->dtype, t->data, (size_t)k);
    *cnt = (int)c;
    return KN_OK;
}

/* ---- Pad ----------------------------------------------------------------- */

static int pad_mode(const kn_opdesc *d, kn_pad_mode *m)
{
    const char *s = kn_op_attr_string(d, "mode", "constant");
    static const char *const names[] = {"constant", "reflect", "edge", "wrap"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *m = (kn_pad_mode)i;
            return KN_OK;
        }
    return kn_op_error(d, KN_ERR_UNSUPPORTED, "unknown pad mode '%s'", s);
}

/* Raw pads list (and the axes it refers to); *cnt = -1 when not known. */
static int pad_lists(const kn_mv_args *a, int64_t *raw, int *cnt, int64_t *axes, int *na)
{
    const kn_opdesc *d = a->d;
    int r = a->shp[0].rank, st;
    *na = r;
    for (int i = 0; i < r; i++) axes[i] = i;
    if (d->opset < 11) {
        const char *name = kn_op_attr(d, "pads") ? "pads" : "paddings";
        if ((st = kn_mv_attr_ints(d, name, raw, 2 * KN_MAX_RANK, cnt))) return st;
        if (*cnt < 0) return kn_op_error(d, KN_ERR_INVALID, "missing 'pads' attribute");
        return KN_OK;
    }
    if (!a->has[1]) return kn_op_error(d, KN_ERR_INVALID, "missing pads input");
    if ((st = kn_mv_ints(a, 1, "pads", raw, 2 * KN_MAX_RANK, cnt))) return st;
    if (d->opset >= 18 && a->has[3]) {
        if ((st = kn_mv_ints(a, 3, "axes", axes, KN_MAX_RANK, na))) return st;
        if (*na < 0) *cnt = -1;
    }
    return KN_OK;
}

/* Output shape and full per-axis pads (begins then ends); *known says
 * whether pads were known. */
static int pad_plan(const kn_mv_args *a, kn_mv_shape *o, int64_t *pads, bool *known)
{
    const kn_opdesc *d = a->d;
    const kn_mv_shape *x = &a->shp[0];
    kn_pad_mode mode = KN_PAD_CONSTANT;
    int st = pad_mode(d, &mode);
    *known = false;
    if (st) return st;
    kn_mv_sh_init(o, x->rank);
    if (x->rank < 0) return KN_OK;
    int r = x->rank, cnt, na;
    int64_t raw[2 * KN_MAX_RANK], axes[KN_MAX_RANK];
    if ((st = pad_lists(a, raw, &cnt, axes, &na))) return st;
    if (cnt < 0) return KN_OK;
    if (cnt != 2 * na) return kn_op_error(d, KN_ERR_INVALID, "pads has %d entries for %d axes", cnt, na);
    memset(pads, 0, sizeof(int64_t) * 2 * KN_MAX_RANK);
    bool seen[KN_MAX_RANK] = {0};
    for (int i = 0; i < na; i++) {
        int k;
        if ((st = kn_op_axis(d, axes[i], r, &k))) return st;
        if (seen[k]) return kn_op_error(d, KN_ERR_INVALID, "axis %d is padded twice", k);
        seen[k] = true;
        pads[k] = raw[i];
        pads[r + k] = raw[na + i];
    }
    for (int k = 0; k < r; k++) {
        if (pads[k] == 0 && pads[r + k] == 0) {
            o->dims[k] = x->dims[k];
            o->sym[k] = x->sym[k];
        } else if (x->dims[k] >= 0) {
            int64_t dv = x->dims[k] + pads[k] + pads[r + k];
            if (dv < 0) return kn_op_error(d, KN_ERR_INVALID, "pads make axis %d negative (%lld)", k, (long long)dv);
            o->dims[k] = dv;
        }
    }
    *known = true;
    return KN_OK;
}

int kn_mv_shape_pad(const kn_mv_args *a, kn_mv_shape *o)
{
    int64_t pads[2 * KN_MAX_RANK];
    bool known;
    return pad_plan(a, o, pads, &known);
}


/* The constant to pad with, as one element of x's dtype. */
static void pad_value(const kn_opdesc *d, const kn_tensor *x, const kn_tensor *cv, unsigned char *buf)
{
    memset(buf, 0, 16);
    const kn_dtype_traits *tr = kn_dtype_info(x->dtype);
    if (d->opset < 11) {
        kn_store_f64(x->dtype, buf, 0, kn_op_attr_float(d, "value", 0.0f));
    } else if (cv && kn_tensor_numel(cv) > 0) {
        if (cv->dtype == x->dtype) memcpy(buf, cv->data, kn_dtype_size(x->dtype));
        else if (tr->is_float) kn_store_f64(x->dtype, buf, 0, kn_load_f64(cv->dtype, cv->data, 0));
        else kn_store_i64(x->dtype, buf, 0, kn_load_i64(cv->dtype, cv->data, 0));
    }
}

int kn_mv_exec_pad(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (!kn_mv_in(d, in, 0)) return kn_op_error(d, KN_ERR_INVALID, "missing input 0");
    kn_mv_args a;
    kn_mv_args_from_tensors(d, in, &a);
    kn_mv_shape o;
    int64_t pads[2 * KN_MAX_RANK];
    bool known;
    kn_pad_mode mode = KN_PAD_CONSTANT;
    int st = pad_plan(&a, &o, pads, &known);
    if (st || (st = pad_mode(d, &mode)) || (st = kn_mv_alloc(d, &out[0], in[0]->dtype, &o))) return st;
    if (kn_dtype_size(in[0]->dtype) > 8 || kn_dtype_size(in[0]->dtype) == 0)
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "dtype %s cannot be padded", kn_dtype_name(in[0]->dtype));
    unsigned char val[16];
    pad_value(d, in[0], d->n_inputs > 2 ? in[2] : NULL, val);
    st = kn_k_pad(in[0], pads, mode, val, &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

/* ---- Resize / Upsample --------------------------------------------------- */

static int pick(const kn_opdesc *d, const char *attr, const char *def, const char *const *names, int count, int *out)
{
    const char *s = kn_op_attr_string(d, attr, def);
    for (int i = 0; i < count; i++)
        if (names[i] && !strcmp(s, names[i])) {
            *out = i;
            return KN_OK;
        }
    return kn_op_error(d, KN_ERR_UNSUPPORTED, "unsupported %s '%s'", attr, s);
}

/* The mode-type attributes. Resize-10 and Upsample sample "asymmetric" with
 * the simple nearest rule of those versions. */
static int resize_attrs(const kn_opdesc *d, bool legacy, kn_resize_params *p)
{
    static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear"};
    static const char *const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                         "align_corners", "asymmetric", "tf_crop_and_resize"};
    static const char *const nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    int m = 0, c = KN_COORD_ASYMMETRIC, nm = KN_NEAREST_SIMPLE;
    memset(p, 0, sizeof *p);
    int st = pick(d, "mode", "nearest", modes, legacy ? 4 : 3, &m);
    if (!st && !legacy) st = pick(d, "coordinate_transformation_mode", "half_pixel", coords, 6, &c);
    if (!st && !legacy) st = pick(d, "nearest_mode", "round_prefer_floor", nearest, 4, &nm);
    if (st) return st;
    p->mode = m == 3 ? KN_RESIZE_LINEAR : (kn_resize_mode)m;
    if (legacy && p->mode == KN_RESIZE_CUBIC) return kn_op_error(d, KN_ERR_UNSUPPORTED, "cubic mode needs Resize-11");
    p->coord = (kn_resize_coord)c;
    p->nearest = (kn_resize_nearest)nm;
    p->cubic_a = kn_op_attr_float(d, "cubic_coeff_a", -0.75f);
    p->exclude_outside = kn_op_attr_int(d, "exclude_outside", 0) != 0;
    p->extrapolation = kn_op_attr_float(d, "extrapolation_value", 0.0f);
    p->antialias = kn_op_attr_int(d, "antialias", 0) != 0 && p->mode != KN_RESIZE_NEAREST;
    return KN_OK;
}

typedef struct resize_io {
    bool legacy;      /* Resize-10 or Upsample */
    int roi, scales, sizes; /* input indices, -1 if the version has none */
} resize_io;

static int resize_axes(const kn_opdesc *d, int r, int *axes, int *na)
{
    int64_t raw[KN_MAX_RANK];
    int cnt, st = kn_mv_attr_ints(d, "axes", raw, KN_MAX_RANK, &cnt);
    if (st) return st;
    if (cnt < 0) {
        *na = r;
        for (int i = 0; i < r; i++) axes[i] = i;
        return KN_OK;
    }
    bool seen[KN_MAX_RANK] = {0};
    for (int i = 0; i < cnt; i++) {
        if ((st = kn_op_axis(d, raw[i], r, &axes[i]))) return st;
        if (seen[axes[i]]) return kn_op_error(d, KN_ERR_INVALID, "axis %lld is repeated", (long long)raw[i]);
        seen[axes[i]] = true;
    }
    *na = cnt;
    return KN_OK;
}

/* Output dims from sizes, honoring keep_aspect_ratio_policy. */
static int resize_from_sizes(const kn_mv_args *a, const int *axes, int na, kn_resize_params *p, kn_mv_shape *o)
{
    const kn_opdesc *d = a->d;
    const kn_mv_shape *x = &a->shp[0];
    int64_t sizes[KN_MAX_RANK];
    int cnt;
    int st = kn_mv_ints(a, 3, "sizes", sizes, KN_MAX_RANK, &cnt);
    if (st) return st;
    if (cnt != na) return kn_op_error(d, KN_ERR_INVALID, "sizes has %d entries for %d axes", cnt, na);
    static const char *const pol[] = {"stretch", "not_larger", "not_smaller"};
    int policy = 0;
    if ((st = pick(d, "keep_aspect_ratio_policy", "stretch", pol, 3, &policy))) return st;
    double keep = policy == 1 ? INFINITY : 0;
    for (int i = 0; i < na; i++) {
        int64_t in = x->dims[axes[i]];
        if (sizes[i] < 0) return kn_op_error(d, KN_ERR_INVALID, "sizes[%d] = %lld is negative", i, (long long)sizes[i]);
        if (in == 0) return kn_op_error(d, KN_ERR_INVALID, "cannot resize axis %d of size 0", axes[i]);
        o->dims[axes[i]] = policy ? -1 : sizes[i];
        o->sym[axes[i]] = NULL;
        if (in < 0) continue;
        double s = (double)sizes[i] / (double)in;
        p->scales[axes[i]] = s;
        if (policy == 1) keep = fmin(keep, s);
        if (policy == 2) keep = fmax(keep, s);
    }
    for (int i = 0; policy && i < na; i++) {
        int64_t in = x->dims[axes[i]];
        if (in < 0) continue;
        double dv = keep * (double)in + 0.5;
        if (!(dv < 9.0e15)) return kn_op_error(d, KN_ERR_INVALID, "resized axis %d is absurdly large", axes[i]);
        p->scales[axes[i]] = keep;
        o->dims[axes[i]] = (int64_t)dv;
    }
    return KN_OK;
}

static int resize_from_scales(const kn_mv_args *a, int si, const int *axes, int na, kn_resize_params *p, kn_mv_shape *o)
{
    const kn_mv_shape *x = &a->shp[0];
    double sc[KN_MAX_RANK];
    int cnt;
    int st = floats_of(a, si, "scales", sc, KN_MAX_RANK, &cnt);
    if (st) return st;
    if (cnt != na) return kn_op_error(a->d, KN_ERR_INVALID, "scales has %d entries for %d axes", cnt, na);
    for (int i = 0; i < na; i++) {
        int k = axes[i];
        if (!(sc[i] > 0) || !isfinite(sc[i])) return kn_op_error(a->d, KN_ERR_INVALID, "scales[%d] = %g must be positive", i, sc[i]);
        p->scales[k] = sc[i];
        if (sc[i] == 1.0) continue; /* dim (and its symbol) unchanged */
        o->sym[k] = NULL;
        double dv = x->dims[k] >= 0 ? floor(sc[i] * (double)x->dims[k]) : -1;
        if (dv > 9.0e15) return kn_op_error(a->d, KN_ERR_INVALID, "scaled axis %d is absurdly large", k);
        o->dims[k] = (int64_t)dv;
    }
    return KN_OK;
}

static int resize_roi(const kn_mv_args *a, int ri, const int *axes, int na, kn_resize_params *p)
{
    int r = a->shp[0].rank;
    for (int k = 0; k < r; k++) {
        p->roi[k] = 0;
        p->roi[r + k] = 1;
    }
    if (p->coord != KN_COORD_TF_CROP_AND_RESIZE || input_state(a, ri) != 1) return KN_OK;
    double v[2 * KN_MAX_RANK];
    int cnt;
    int st = floats_of(a, ri, "roi", v, 2 * KN_MAX_RANK, &cnt);
    if (st) return st;
    if (cnt != 2 * na) return kn_op_error(a->d, KN_ERR_INVALID, "roi has %d entries for %d axes", cnt, na);
    for (int i = 0; i < na; i++) {
        p->roi[axes[i]] = v[i];
        p->roi[r + axes[i]] = v[na + i];
    }
    return KN_OK;
}

/* Output shape and kernel parameters; dims stay -1 where unknown. */
static int resize_plan(const kn_mv_args *a, const resize_io *io, kn_mv_shape *o, kn_resize_params *p)
{
    const kn_opdesc *d = a->d;
    const kn_mv_shape *x = &a->shp[0];
    int st = resize_attrs(d, io->legacy, p);
    if (st) return st;
    *o = *x;
    if (x->rank < 0) return KN_OK;
    int r = x->rank, axes[KN_MAX_RANK], na = r;
    for (int k = 0; k < r; k++) {
        axes[k] = k;
        p->scales[k] = 1.0;
    }
    if (!io->legacy && (st = resize_axes(d, r, axes, &na))) return st;
    int sz = input_state(a, io->sizes), sc = input_state(a, io->scales);
    if (sz == 2 || (sz == 0 && sc == 2)) { /* decided only at run time */
        kn_mv_sh_init(o, r);
        return KN_OK;
    }
    if (sz == 1) st = resize_from_sizes(a, axes, na, p, o);
    else if (sc == 1) st = resize_from_scales(a, io->scales, axes, na, p, o);
    else st = kn_op_error(d, KN_ERR_INVALID, "needs scales or sizes");
    if (!st && !io->legacy) st = resize_roi(a, io->roi, axes, na, p);
    return st;
}

static resize_io resize_layout(const kn_opdesc *d)
{
    if (d->opset < 11) return (resize_io){true, -1, 1, -1};
    return (resize_io){false, 1, 2, 3};
}

int kn_mv_shape_resize(const kn_mv_args *a, kn_mv_shape *o)
{
    kn_resize_params p;
    resize_io io = resize_layout(a->d);
    return resize_plan(a, &io, o, &p);
}


static int run_resize(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out, const kn_mv_args *a,
                      const resize_io *io)
{
    kn_mv_shape o;
    kn_resize_params p;
    int st = resize_plan(a, io, &o, &p);
    if (st || (st = kn_mv_alloc_written(d, &out[0], in[0]->dtype, &o))) return st;
    st = kn_fast_resize(d->sess, in[0], &p, &out[0]); /* compiled artifacts (fastops.h) */
    if (st == KN_ERR_UNSUPPORTED) st = kn_k_resize(in[0], &p, &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

int kn_mv_exec_resize(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (!kn_mv_in(d, in, 0)) return kn_op_error(d, KN_ERR_INVALID, "missing input 0");
    kn_mv_args a;
    kn_mv_args_from_tensors(d, in, &a);
    resize_io io = resize_layout(d);
    return run_resize(d, in, out, &a, &io);
}

/* Upsample-7 keeps its scales in an attribute; we present it as a constant
 * "input 1" so Upsample-9 and Resize-10 share the same plan. */
static int upsample_args(const kn_opdesc *d, kn_mv_args *a, kn_tensor *scales)
{
    if (d->opset >= 9) return KN_OK;
    const float *f = NULL;
    int cnt = kn_op_attr_floats(d, "scales", &f);
    if (cnt <= 0 || cnt > KN_MAX_RANK) return kn_op_error(d, KN_ERR_INVALID, "missing or bad 'scales' attribute");
    memset(scales, 0, sizeof *scales);
    scales->dtype = KN_F32;
    scales->rank = 1;
    scales->dims[0] = cnt;
    scales->data = (void *)f;
    scales->nbytes = (size_t)cnt * sizeof(float);
    a->has[1] = true;
    a->dt[1] = KN_F32;
    a->val[1] = scales;
    kn_mv_sh_init(&a->shp[1], 1);
    a->shp[1].dims[0] = cnt;
    return KN_OK;
}

static const resize_io k_upsample_io = {true, -1, 1, -1};

int kn_mv_shape_upsample(const kn_mv_args *a, kn_mv_shape *o)
{
    kn_mv_args b = *a;
    kn_tensor sc;
    kn_resize_params p;
    int st = upsample_args(a->d, &b, &sc);
    return st ? st : resize_plan(&b, &k_upsample_io, o, &p);
}
int kn_mv_exec_upsample(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (!kn_mv_in(d, in, 0)) return kn_op_error(d, KN_ERR_INVALID, "missing input 0");
    kn_mv_args a;
    kn_tensor sc;
    kn_mv_args_from_tensors(d, in, &a);
    int st = upsample_args(d, &a, &sc);
    return st ? st : run_resize(d, in, out, &a, &k_upsample_io);
}
