/*
 * nn_pool.c — pooling kernels: windowed Max/Average/Lp pooling (with MaxPool
 * indices), global pooling, MaxUnpool, MaxRoiPool and RoiAlign. Values are
 * widened to double once per call, which keeps one code path for every dtype
 * (uint8/int8 MaxPool included) and is exact for them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_nn.h"

/* Pools one window at output multi-index `o` of a plane `xp`. */
typedef struct pool_ctx {
    const kn_nn_window *win;
    const int64_t *in;
    int64_t in_prod, k_prod;
    kn_pool_kind kind;
    bool count_include_pad;
    double p;
} pool_ctx;

static double pool_window(const pool_ctx *pc, const double *xp, const int64_t *o,
                          int64_t *out_argmax)
{
    const kn_nn_window *w = pc->win;
    int nsp = w->nsp;
    double acc = pc->kind == KN_POOL_MAX ? -INFINITY : 0.0;
    int64_t n_valid = 0, n_padded = 0, arg = -1;
    for (int64_t kk = 0; kk < pc->k_prod; kk++) {
        int64_t rem = kk, flat = 0, mul = 1;
        bool inside = true, in_pads = true;
        for (int d = nsp - 1; d >= 0; d--) {
            int64_t k = rem % w->kernel[d];
            rem /= w->kernel[d];
            int64_t i = o[d] * w->strides[d] - w->pads[d] + k * w->dilations[d];
            if (i < 0 || i >= pc->in[d]) inside = false;
            if (i < -w->pads[d] || i >= pc->in[d] + w->pads[nsp + d]) in_pads = false;
            flat += i * mul;
            mul *= pc->in[d];
        }
        n_padded += in_pads;
        if (!inside) continue;
        double v = xp[flat];
        n_valid++;
        switch (pc->kind) {
        case KN_POOL_MAX: /* NaN wins and stays, at its first position (numpy's max and argmax) */
            if (v > acc || arg < 0 || (isnan(v) && !isnan(acc))) { acc = v; arg = flat; }
            break;
        case KN_POOL_AVG: acc += v; break;
        case KN_POOL_LP: acc += pow(fabs(v), pc->p); break;
        }
    }
    if (out_argmax) *out_argmax = arg;
    if (pc->kind == KN_POOL_AVG) {
        /* count_include_pad counts the taps inside the explicitly padded
         * input, not those past it that ceil_mode's last window reaches (the
         * ONNX reference and its conformance data since onnx 1.16, and
         * onnxruntime; onnx 1.15's counted every tap). */
        int64_t div = pc->count_include_pad ? n_padded : n_valid;
        return div ? acc / (double)div : 0.0;
    }
    if (pc->kind == KN_POOL_LP) return pow(acc, 1.0 / pc->p);
    return n_valid ? acc : 0.0;
}

/* Flat index of a within-plane row-major offset, re-laid column-major over
 * the spatial axes (MaxPool storage_order = 1). */
static int64_t col_major(int64_t flat, int nsp, const int64_t *in)
{
    int64_t idx[KN_NN_MAXSP], out = 0;
    for (int d = nsp - 1; d >= 0; d--) {
        idx[d] = flat % in[d];
        flat /= in[d];
    }
    for (int d = nsp - 1; d >= 0; d--) out = out * in[d] + idx[d];
    return out;
}

int kn_k_pool(const kn_tensor *x, const kn_nn_window *win, kn_pool_kind kind,
              bool count_include_pad, double p, int storage_order, kn_tensor *y,
              kn_tensor *indices)
{
    int nsp = win->nsp;
    pool_ctx pc = {win, x->dims + 2, 1, 1, kind, count_include_pad, p};
    int64_t out_prod = 1, planes = x->dims[0] * x->dims[1];
    for (int d = 0; d < nsp; d++) {
        pc.in_prod *= x->dims[2 + d];
        pc.k_prod *= win->kernel[d];
        out_prod *= y->dims[2 + d];
    }
    if (kn_tensor_numel(y) == 0) return KN_OK;
    double *xd = kn_nn_to_f64(x);
    double *yd = malloc((size_t)kn_tensor_numel(y) * sizeof(double));
    if (!xd || !yd) {
        free(xd);
        free(yd);
        return kn_error(KN_ERR_NOMEM, "pooling: out of memory");
    }
    for (int64_t pl = 0; pl < planes; pl++) {
        const double *xp = xd + pl * pc.in_prod;
        for (int64_t op = 0; op < out_prod; op++) {
            int64_t o[KN_NN_MAXSP], rem = op, arg = -1;
            for (int d = nsp - 1; d >= 0; d--) {
                o[d] = rem % y->dims[2 + d];
                rem /= y->dims[2 + d];
            }
            yd[pl * out_prod + op] = pool_window(&pc, xp, o, indices ? &arg : NULL);
            if (indices) {
                int64_t a = arg < 0 ? 0 : storage_order ? col_major(arg, nsp, pc.in) : arg;
                ((int64_t *)indices->data)[pl * out_prod + op] = pl * pc.in_prod + a;
            }
        }
    }
    kn_nn_from_f64(y, yd);
    free(xd);
    free(yd);
    return KN_OK;
}

int kn_k_global_pool(const kn_tensor *x, kn_pool_kind kind, double p, kn_tensor *y)
{
    int64_t planes = x->dims[0] * x->dims[1], sp = 1;
    for (int d = 2; d < x->rank; d++) sp *= x->dims[d];
    if (planes == 0) return KN_OK;
    double *xd = kn_nn_to_f64(x);
    if (!xd) return kn_error(KN_ERR_NOMEM, "global pooling: out of memory");
    for (int64_t pl = 0; pl < planes; pl++) {
        const double *xp = xd + pl * sp;
        double acc = kind == KN_POOL_MAX ? -INFINITY : 0.0;
        for (int64_t i = 0; i < sp; i++) {
            if (kind == KN_POOL_MAX) acc = xp[i] > acc || isnan(xp[i]) ? xp[i] : acc; /* NaN wins, as numpy */
            else if (kind == KN_POOL_AVG) acc += xp[i];
            else acc += pow(fabs(xp[i]), p);
        }
        if (kind == KN_POOL_AVG) acc = sp ? acc / (double)sp : 0.0;
        else if (kind == KN_POOL_LP) acc = pow(acc, 1.0 / p);
        kn_store_f64(y->dtype, y->data, (size_t)pl, acc);
    }
    free(xd);
    return KN_OK;
}

int kn_k_maxunpool(const kn_tensor *x, const kn_tensor *indices, kn_tensor *y)
{
    int64_t n = kn_tensor_numel(x), ny = kn_tensor_numel(y);
    if (kn_tensor_numel(indices) != n)
        return kn_error(KN_ERR_INVALID, "MaxUnpool: indices have %lld elements, X has %lld",
                        (long long)kn_tensor_numel(indices), (long long)n);
    size_t es = kn_dtype_size(x->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx = kn_load_i64(indices->dtype, indices->data, (size_t)i);
        if (idx < 0 || idx >= ny)
            return kn_error(KN_ERR_INVALID, "MaxUnpool: index %lld at position %lld is outside the output (%lld elements)",
                            (long long)idx, (long long)i, (long long)ny);
        memcpy((char *)y->data + (size_t)idx * es, (const char *)x->data + (size_t)i * es, es);
    }
    return KN_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

int kn_k_maxroipool(const kn_tensor *x, const kn_tensor *rois, double spatial_scale,
                    kn_tensor *y)
{
    int64_t B = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t R = y->dims[0], PH = y->dims[2], PW = y->dims[3];
    for (int64_t r = 0; r < R; r++) {
        const size_t rb = (size_t)(r * 5);
        double bv = kn_load_f64(rois->dtype, rois->data, rb);
        int64_t b = (int64_t)bv;
        if (!(bv >= 0) || b >= B)
            return kn_error(KN_ERR_INVALID, "MaxRoiPool: roi %lld has batch index %g, batch is %lld",
                            (long long)r, bv, (long long)B);
        double box[4];
        for (int i = 0; i < 4; i++) {
            box[i] = kn_load_f64(rois->dtype, rois->data, rb + 1 + (size_t)i) * spatial_scale;
            if (!isfinite(box[i]) || fabs(box[i]) > 1e15)
                return kn_error(KN_ERR_INVALID, "MaxRoiPool: roi %lld has a non-finite or absurd coordinate",
                                (long long)r);
        }
        int64_t sw = (int64_t)llround(box[0]), sh = (int64_t)llround(box[1]);
        int64_t ew = (int64_t)llround(box[2]), eh = (int64_t)llround(box[3]);
        double bin_h = (double)(eh - sh + 1 > 1 ? eh - sh + 1 : 1) / (double)PH;
        double bin_w = (double)(ew - sw + 1 > 1 ? ew - sw + 1 : 1) / (double)PW;
        for (int64_t c = 0; c < C; c++) {
            size_t plane = (size_t)((b * C + c) * H * W);
            for (int64_t ph = 0; ph < PH; ph++)
                for (int64_t pw = 0; pw < PW; pw++) {
                    int64_t hs = clamp64((int64_t)floor(ph * bin_h) + sh, 0, H);
                    int64_t he = clamp64((int64_t)ceil((ph + 1) * bin_h) + sh, 0, H);
                    int64_t ws = clamp64((int64_t)floor(pw * bin_w) + sw, 0, W);
                    int64_t we = clamp64((int64_t)ceil((pw + 1) * bin_w) + sw, 0, W);
                    double m = (he <= hs || we <= ws) ? 0.0 : -INFINITY;
                    for (int64_t h = hs; h < he; h++)
                        for (int64_t w = ws; w < we; w++) {
                            double v = kn_load_f64(x->dtype, x->data, plane + (size_t)(h * W + w));
                            if (v > m) m = v;
                        }
                    kn_store_f64(y->dtype, y->data, (size_t)(((r * C + c) * PH + ph) * PW + pw), m);
                }
        }
    }
    return KN_OK;
}

/* One bilinear sample of RoiAlign: the four taps and their weights (all 0
 * when the point is outside the feature map by more than one pixel). */
typedef struct bilin {
    int64_t pos[4];
    double w[4];
} bilin;

static bilin bilinear_at(double yy, double xx, int64_t H, int64_t W)
{
    bilin b = {{0, 0, 0, 0}, {0, 0, 0, 0}};
    if (yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W) return b;
    if (yy <= 0) yy = 0;
    if (xx <= 0) xx = 0;
    int64_t yl = (int64_t)yy, xl = (int64_t)xx, yh, xh;
    if (yl >= H - 1) { yh = yl = H - 1; yy = (double)yl; } else yh = yl + 1;
    if (xl >= W - 1) { xh = xl = W - 1; xx = (double)xl; } else xh = xl + 1;
    double ly = yy - (double)yl, lx = xx - (double)xl, hy = 1 - ly, hx = 1 - lx;
    b.pos[0] = yl * W + xl; b.pos[1] = yl * W + xh;
    b.pos[2] = yh * W + xl; b.pos[3] = yh * W + xh;
    b.w[0] = hy * hx; b.w[1] = hy * lx; b.w[2] = ly * hx; b.w[3] = ly * lx;
    return b;
}

int kn_k_roialign(const kn_tensor *x, const kn_tensor *rois, const kn_tensor *batch_indices,
                  bool mode_max, int64_t sampling_ratio, double spatial_scale,
                  bool half_pixel, kn_tensor *y)
{
    int64_t B = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    int64_t R = y->dims[0], OH = y->dims[2], OW = y->dims[3];
    if (H == 0 || W == 0) return KN_OK; /* y stays zero */
    double *xd = kn_nn_to_f64(x);
    if (!xd) return kn_error(KN_ERR_NOMEM, "RoiAlign: out of memory");
    for (int64_t r = 0; r < R; r++) {
        int64_t b = kn_load_i64(batch_indices->dtype, batch_indices->data, (size_t)r);
        if (b < 0 || b >= B) {
            free(xd);
            return kn_error(KN_ERR_INVALID, "RoiAlign: batch index %lld of roi %lld is outside [0, %lld)",
                            (long long)b, (long long)r, (long long)B);
        }
        double off = half_pixel ? 0.5 : 0.0, rc[4];
        for (int i = 0; i < 4; i++)
            rc[i] = kn_load_f64(rois->dtype, rois->data, (size_t)(r * 4 + i)) * spatial_scale - off;
        double rw = rc[2] - rc[0], rh = rc[3] - rc[1];
        if (!half_pixel) {
            rw = rw > 1.0 ? rw : 1.0;
            rh = rh > 1.0 ? rh : 1.0;
        }
        /* Non-finite or absurd boxes would make the sampling grid unbounded. */
        if (!isfinite(rw) || !isfinite(rh) || !isfinite(rc[0]) || !isfinite(rc[1]) ||
            fabs(rw) > 1e7 || fabs(rh) > 1e7) {
            free(xd);
            return kn_error(KN_ERR_INVALID, "RoiAlign: roi %lld is not finite or absurdly large (%g x %g)",
                            (long long)r, rw, rh);
        }
        double bh = rh / (double)OH, bw = rw / (double)OW;
        int64_t gh = sampling_ratio > 0 ? sampling_ratio : (int64_t)ceil(rh / (double)OH);
        int64_t gw = sampling_ratio > 0 ? sampling_ratio : (int64_t)ceil(rw / (double)OW);
        if (gh * gw > ((int64_t)1 << 24)) {
            free(xd);
            return kn_error(KN_ERR_INVALID, "RoiAlign: roi %lld needs %lldx%lld samples per bin; too many",
                            (long long)r, (long long)gh, (long long)gw);
        }
        double count = gh * gw > 1 ? (double)(gh * gw) : 1.0;
        for (int64_t c = 0; c < C; c++) {
            const double *xp = xd + (b * C + c) * H * W;
            for (int64_t ph = 0; ph < OH; ph++)
                for (int64_t pw = 0; pw < OW; pw++) {
                    double acc = 0.0;
                    bool first = true;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double yy = rc[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double xx = rc[0] + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw;
                            bilin s = bilinear_at(yy, xx, H, W);
                            if (!mode_max) {
                                for (int t = 0; t < 4; t++) acc += s.w[t] * xp[s.pos[t]];
                                continue;
                            }
                            double v = s.w[0] * xp[s.pos[0]];
                            for (int t = 1; t < 4; t++)
                                if (s.w[t] * xp[s.pos[t]] > v) v = s.w[t] * xp[s.pos[t]];
                            acc = first || v > acc ? v : acc;
                            first = false;
                        }
                    }
                    if (!mode_max) acc /= count;
                    kn_store_f64(y->dtype, y->data, (size_t)(((r * C + c) * OH + ph) * OW + pw), acc);
                }
        }
    }
    free(xd);
    return KN_OK;
}
