/*
 * Reference Resize kernel (see k_movement.h). Interpolation is separable:
 * for each axis and each output coordinate we precompute a small window of
 * (input index, weight) pairs, then every output element is the sum over the
 * product of its axes' windows. This follows the ONNX reference semantics:
 * neighbours come from an edge-padded input, the fractional "ratio" lies in
 * (0, 1], and tf_crop_and_resize returns the extrapolation value outside
 * the crop.
 */
#include "k_movement.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct axis_win {
    int wn;             /* window slots per output coordinate */
    int *cnt;           /* [out] used slots (zero weights dropped) */
    int64_t *idx;       /* [out * wn] clamped input indices */
    double *w;          /* [out * wn] weights */
    unsigned char *oor; /* [out] 1 where tf_crop_and_resize extrapolates */
} axis_win;

/* Input coordinate of output coordinate x along one axis. */
static double original_coord(const kn_resize_params *p, int axis, int rank, double x, int64_t in, int64_t out)
{
    double scale = p->scales[axis];
    double ow = scale * (double)in; /* the reference uses the real-valued output length */
    switch (p->coord) {
    case KN_COORD_ALIGN_CORNERS: return ow == 1 ? 0.0 : x * (double)(in - 1) / (ow - 1);
    case KN_COORD_ASYMMETRIC: return x / scale;
    case KN_COORD_TF_CROP_AND_RESIZE: {
        double s = p->roi[axis], e = p->roi[rank + axis];
        double xo = ow == 1 ? (e - s) * (double)(in - 1) / 2 : x * (e - s) * (double)(in - 1) / (ow - 1);
        return xo + s * (double)(in - 1);
    }
    /* The spec (and onnxruntime) test the integer output length here. */
    case KN_COORD_PYTORCH_HALF_PIXEL: return out <= 1 ? 0.0 : (x + 0.5) / scale - 0.5;
    case KN_COORD_HALF_PIXEL_SYMMETRIC: {
        double adjustment = (double)out / ow;
        double offset = (double)in / 2 * (1 - adjustment);
        return offset + (x + 0.5) / scale - 0.5;
    }
    case KN_COORD_HALF_PIXEL:
    default: return (x + 0.5) / scale - 0.5;
    }
}

static double cubic_w(double x, double a)
{
    x = fabs(x);
    if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
    if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    return 0.0;
}

/* Fills weights w[0..n) for input indices base+start+j given the ratio in
 * (0, 1]; returns the window start relative to base (floor of x). */
static int coeffs(const kn_resize_params *p, double ratio, double scale, double *w, int *n)
{
    if (p->mode == KN_RESIZE_NEAREST) {
        bool up;
        if (ratio == 1.0) up = true; /* x is integral: take x itself */
        else switch (p->nearest) {
            case KN_NEAREST_ROUND_PREFER_CEIL: up = ratio >= 0.5; break;
            case KN_NEAREST_FLOOR: up = false; break;
            case KN_NEAREST_CEIL: up = true; break;
            case KN_NEAREST_SIMPLE: up = scale < 1.0; break;
            case KN_NEAREST_ROUND_PREFER_FLOOR:
            default: up = ratio > 0.5; break;
            }
        w[0] = up ? 0.0 : 1.0;
        w[1] = up ? 1.0 : 0.0;
        *n = 2;
        return 0;
    }
    double s = p->antialias ? fmin(scale, 1.0) : 1.0;
    int start;
    if (p->mode == KN_RESIZE_LINEAR) start = (int)floor(-1.0 / s) + 1;
    else start = (int)floor(-2.0 / s) + 1;
    *n = 2 - 2 * start;
    double sum = 0;
    for (int j = 0; j < *n; j++) {
        double d = ((double)(start + j) - ratio) * s;
        double v;
        if (p->mode == KN_RESIZE_LINEAR) v = fmax(0.0, fmin(1.0, 1 - fabs(d)));
        else v = cubic_w(d, p->cubic_a);
        w[j] = v;
        sum += v;
    }
    /* Without antialias the cubic kernel already sums to 1; dividing keeps
     * the antialiased filters normalized as the reference does. */
    if (p->antialias && sum != 0)
        for (int j = 0; j < *n; j++) w[j] /= sum;
    return start;
}

static int window_size(const kn_resize_params *p, double scale)
{
    if (p->mode == KN_RESIZE_NEAREST) return 2;
    double s = p->antialias ? fmin(scale, 1.0) : 1.0;
    int start = p->mode == KN_RESIZE_LINEAR ? (int)floor(-1.0 / s) + 1 : (int)floor(-2.0 / s) + 1;
    return 2 - 2 * start;
}

static void free_win(axis_win *a)
{
    free(a->cnt);
    free(a->idx);
    free(a->w);
    free(a->oor);
}

static int build_axis(const kn_resize_params *p, int axis, int rank, int64_t in, int64_t out, axis_win *a)
{
    double scale = p->scales[axis];
    if (!(scale > 0) || !isfinite(scale)) return kn_error(KN_ERR_INVALID, "resize scale %g on axis %d must be positive", scale, axis);
    int wn = window_size(p, scale);
    if (wn <= 0 || wn > (1 << 20)) return kn_error(KN_ERR_INVALID, "resize filter for scale %g is too wide", scale);
    a->wn = wn;
    a->cnt = calloc((size_t)out, sizeof *a->cnt);
    a->idx = calloc((size_t)out * (size_t)wn, sizeof *a->idx);
    a->w = calloc((size_t)out * (size_t)wn, sizeof *a->w);
    a->oor = calloc((size_t)out, 1);
    double *tmp = calloc((size_t)wn, sizeof *tmp);
    if (!a->cnt || !a->idx || !a->w || !a->oor || !tmp) {
        free(tmp);
        return kn_error(KN_ERR_NOMEM, "out of memory building resize windows");
    }
    for (int64_t x = 0; x < out; x++) {
        double xo = original_coord(p, axis, rank, (double)x, in, out);
        if (p->coord == KN_COORD_TF_CROP_AND_RESIZE && (xo < 0 || xo > (double)(in - 1))) {
            a->oor[x] = 1;
            continue;
        }
        /* The window is anchored at floor(xo), except that an integral xo
         * counts as ratio 1 from the index below it. */
        double fl = floor(xo);
        int64_t xi = (int64_t)fl;
        double ratio = xo - fl;
        if (ratio == 0) {
            ratio = 1.0;
            xi -= 1;
        }
        int n = 0;
        int start = coeffs(p, ratio, scale, tmp, &n);
        if (p->exclude_outside) {
            double sum = 0;
            for (int j = 0; j < n; j++) {
                int64_t id = xi + start + j;
                if (id < 0 || id >= in) tmp[j] = 0;
                sum += tmp[j];
            }
            if (sum != 0)
                for (int j = 0; j < n; j++) tmp[j] /= sum;
        }
        int c = 0;
        for (int j = 0; j < n && j < wn; j++) {
            if (tmp[j] == 0) continue;
            int64_t id = xi + start + j;
            id = id < 0 ? 0 : id >= in ? in - 1 : id;
            a->idx[x * wn + c] = id;
            a->w[x * wn + c] = tmp[j];
            c++;
        }
        a->cnt[x] = c;
    }
    free(tmp);
    return KN_OK;
}

/* Sum over the product of the axes' windows at output index `o`. */
static double interpolate(const kn_tensor *x, const axis_win *aw, const int64_t *xs, const int64_t *o)
{
    int r = x->rank;
    int pos[KN_MAX_RANK] = {0};
    for (int k = 0; k < r; k++)
        if (aw[k].cnt[o[k]] == 0) return 0.0;
    double acc = 0;
    for (;;) {
        double w = 1;
        int64_t off = 0;
        for (int k = 0; k < r; k++) {
            size_t slot = (size_t)(o[k] * aw[k].wn + pos[k]);
            w *= aw[k].w[slot];
            off += aw[k].idx[slot] * xs[k];
        }
        acc += w * kn_load_f64(x->dtype, x->data, (size_t)off);
        int k = r - 1;
        for (; k >= 0; k--) {
            if (++pos[k] < aw[k].cnt[o[k]]) break;
            pos[k] = 0;
        }
        if (k < 0) break;
    }
    return acc;
}

/* Integer outputs round to nearest and saturate, so a cubic overshoot never
 * wraps around. */
static void store_value(kn_tensor *out, size_t i, double v)
{
    const kn_dtype_traits *tr = kn_dtype_info(out->dtype);
    if (tr->is_float) {
        kn_store_f64(out->dtype, out->data, i, v);
        return;
    }
    double lo = 0, hi = 0;
    switch (out->dtype) {
    case KN_I8: lo = INT8_MIN; hi = INT8_MAX; break;
    case KN_U8: lo = 0; hi = UINT8_MAX; break;
    case KN_I16: lo = INT16_MIN; hi = INT16_MAX; break;
    case KN_U16: lo = 0; hi = UINT16_MAX; break;
    case KN_I32: lo = INT32_MIN; hi = INT32_MAX; break;
    case KN_U32: lo = 0; hi = UINT32_MAX; break;
    case KN_BOOL: lo = 0; hi = 1; break;
    case KN_U64: lo = 0; hi = 1.8446744073709550e19; break;
    default: lo = -9.2233720368547748e18; hi = 9.2233720368547748e18; break;
    }
    v = nearbyint(v);
    if (isnan(v)) v = 0;
    v = v < lo ? lo : v > hi ? hi : v;
    if (out->dtype == KN_U64) kn_store_u64(out->dtype, out->data, i, (uint64_t)v);
    else kn_store_i64(out->dtype, out->data, i, (int64_t)v);
}

/* The axis leaves every coordinate where it is: one slot, weight 1. */
static bool is_identity(const axis_win *a, int64_t in, int64_t out)
{
    if (in != out) return false;
    for (int64_t o = 0; o < out; o++)
        if (a->cnt[o] != 1 || a->idx[o * a->wn] != o || a->w[o * a->wn] != 1.0 || a->oor[o]) return false;
    return true;
}

/* Every coordinate of the axis takes one input element whole (nearest). */
static bool is_selection(const axis_win *a, int64_t out)
{
    for (int64_t o = 0; o < out; o++)
        if (a->cnt[o] != 1 || a->w[o * a->wn] != 1.0) return false;
    return true;
}

/* f32 resized over its last two axes only (an image's H and W; the leading
 * axes identity): per plane and output row, the row's taps times the
 * column's, in the order and with the products interpolate() uses, so the
 * result is the same bit for bit, without its per-element walk over every
 * axis (a DBNet neck's 2x upsamplings took 17 ms of a 38 ms run). */
static void resize_planes_f32(const kn_tensor *x, const axis_win *aw, kn_tensor *out)
{
    int r = x->rank;
    int64_t ih = x->dims[r - 2], iw = x->dims[r - 1], oh = out->dims[r - 2], ow = out->dims[r - 1];
    int64_t planes = kn_tensor_numel(x) / (ih * iw);
    const axis_win *ay = &aw[r - 2], *ax = &aw[r - 1];
    const float *src = x->data;
    float *dst = out->data;
    if (is_selection(ay, oh) && is_selection(ax, ow)) { /* nearest: 0 + 1 * 1 * v is v + 0 (-0 becomes +0) */
        /* an integer upscaling along the row: each input column f times */
        int64_t f = ow / iw;
        bool rep = f >= 1 && ow == iw * f;
        for (int64_t ox = 0; rep && ox < ow; ox++) rep = ax->idx[ox * ax->wn] == ox / f;
        for (int64_t pl = 0; pl < planes; pl++, src += ih * iw)
            for (int64_t oy = 0; oy < oh; oy++, dst += ow) {
                if (oy > 0 && ay->idx[oy * ay->wn] == ay->idx[(oy - 1) * ay->wn]) { /* the row above again */
                    memcpy(dst, dst - ow, sizeof(float) * (size_t)ow);
                    continue;
                }
                const float *row = src + ay->idx[oy * ay->wn] * iw;
                if (rep && f == 2) {
                    for (int64_t ix = 0; ix < iw; ix++) dst[2 * ix] = dst[2 * ix + 1] = row[ix] + 0.0f;
                } else if (rep) {
                    for (int64_t ix = 0; ix < iw; ix++)
                        for (int64_t k = 0; k < f; k++) dst[ix * f + k] = row[ix] + 0.0f;
                } else {
                    for (int64_t ox = 0; ox < ow; ox++) dst[ox] = row[ax->idx[ox * ax->wn]] + 0.0f;
                }
            }
        return;
    }
    for (int64_t pl = 0; pl < planes; pl++, src += ih * iw)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++) {
                double acc = 0;
                for (int ty = 0; ty < ay->cnt[oy]; ty++) {
                    const float *row = src + ay->idx[oy * ay->wn + ty] * iw;
                    double wy = ay->w[oy * ay->wn + ty];
                    for (int tx = 0; tx < ax->cnt[ox]; tx++)
                        acc += wy * ax->w[ox * ax->wn + tx] * (double)row[ax->idx[ox * ax->wn + tx]];
                }
                *dst++ = (float)acc;
            }
}

/* f32 [N, H, W, C] resized over H and W only (a channels-last image; N and
 * C identity): per output pixel, its taps' channel vectors weighted as
 * interpolate() weights them (wy * wx, rows outer), the same bits without
 * its per-element walk; nearest takes the source pixel's channels (+0, as
 * 0 + 1 * v there), a row that repeats the one above as its copy. Output
 * rows [y0, y1) only. */
static void resize_pixels_f32(const kn_tensor *x, const axis_win *aw, int64_t y0, int64_t y1, kn_tensor *out)
{
    enum { CB = 64 }; /* channels per accumulator block */
    int64_t n = x->dims[0], ih = x->dims[1], iw = x->dims[2], c = x->dims[3], oh = out->dims[1], ow = out->dims[2];
    const axis_win *ay = &aw[1], *ax = &aw[2];
    const float *src = x->data;
    bool sel = is_selection(ay, oh) && is_selection(ax, ow);
    for (int64_t b = 0; b < n; b++)
        for (int64_t oy = y0; oy < y1; oy++) {
            float *dst = (float *)out->data + (b * oh + oy) * ow * c;
            if (sel && oy > y0 && ay->idx[oy * ay->wn] == ay->idx[(oy - 1) * ay->wn]) { /* the row above again */
                memcpy(dst, dst - ow * c, sizeof(float) * (size_t)(ow * c));
                continue;
            }
            for (int64_t ox = 0; ox < ow; ox++, dst += c) {
                if (sel) {
                    const float *s = src + ((b * ih + ay->idx[oy * ay->wn]) * iw + ax->idx[ox * ax->wn]) * c;
                    for (int64_t k = 0; k < c; k++) dst[k] = s[k] + 0.0f;
                    continue;
                }
                for (int64_t k0 = 0; k0 < c; k0 += CB) {
                    int64_t kn = c - k0 < CB ? c - k0 : CB;
                    double acc[CB] = {0};
                    for (int ty = 0; ty < ay->cnt[oy]; ty++) {
                        double wy = ay->w[oy * ay->wn + ty];
                        const float *row = src + (b * ih + ay->idx[oy * ay->wn + ty]) * iw * c + k0;
                        for (int tx = 0; tx < ax->cnt[ox]; tx++) {
                            double w = wy * ax->w[ox * ax->wn + tx];
                            const float *px = row + ax->idx[ox * ax->wn + tx] * c;
                            for (int64_t k = 0; k < kn; k++) acc[k] += w * (double)px[k];
                        }
                    }
                    for (int64_t k = 0; k < kn; k++) dst[k0 + k] = (float)acc[k];
                }
            }
        }
}

int kn_k_resize(const kn_tensor *x, const kn_resize_params *p, kn_tensor *out)
{
    int r = x->rank;
    if (!kn_dtype_valid(x->dtype) || kn_dtype_size(x->dtype) == 0 || x->dtype == KN_STRING)
        return kn_error(KN_ERR_UNSUPPORTED, "resize of dtype %s is not supported", kn_dtype_name(x->dtype));
    if (out->rank != r || out->dtype != x->dtype) return kn_error(KN_ERR_INTERNAL, "resize: output does not match input");
    if (kn_tensor_numel(out) == 0) return KN_OK;
    if (kn_tensor_numel(x) == 0) return kn_error(KN_ERR_INVALID, "cannot resize an empty tensor to a non-empty one");
    axis_win aw[KN_MAX_RANK];
    memset(aw, 0, sizeof aw);
    int st = KN_OK;
    for (int k = 0; k < r && !st; k++) st = build_axis(p, k, r, x->dims[k], out->dims[k], &aw[k]);
    bool ranged = p->rows[0] != 0 || p->rows[1] != 0;
    bool pixels = !st && r == 4 && x->dtype == KN_F32 && p->coord != KN_COORD_TF_CROP_AND_RESIZE &&
                  is_identity(&aw[0], x->dims[0], out->dims[0]) && is_identity(&aw[3], x->dims[3], out->dims[3]);
    bool planes = !st && !ranged && r >= 2 && x->dtype == KN_F32 && p->coord != KN_COORD_TF_CROP_AND_RESIZE;
    for (int k = 0; planes && k < r - 2; k++) planes = is_identity(&aw[k], x->dims[k], out->dims[k]);
    if (!st && ranged && (!pixels || p->rows[0] < 0 || p->rows[0] > p->rows[1] || p->rows[1] > out->dims[1]))
        st = kn_error(KN_ERR_UNSUPPORTED, "resize: rows %lld..%lld of a tensor that is not a channels-last f32 "
                                          "image resized over H and W, or outside its %lld rows",
                      (long long)p->rows[0], (long long)p->rows[1], (long long)(r > 1 ? out->dims[1] : 0));
    if (!st && planes) {
        resize_planes_f32(x, aw, out);
    } else if (!st && pixels) {
        resize_pixels_f32(x, aw, ranged ? p->rows[0] : 0, ranged ? p->rows[1] : out->dims[1], out);
    } else if (!st) {
        int64_t xs[KN_MAX_RANK];
        kn_shape_strides(r, x->dims, xs);
        kn_index it;
        kn_index_init(&it, r, out->dims);
        size_t i = 0;
        do {
            bool oor = false;
            for (int k = 0; k < r; k++) oor |= aw[k].oor[it.idx[k]] != 0;
            store_value(out, i++, oor ? p->extrapolation : interpolate(x, aw, xs, it.idx));
        } while (kn_index_next(&it));
    }
    for (int k = 0; k < r; k++) free_win(&aw[k]);
    return st;
}
