/* Reference kernels of the 'vision' family (k_vision.h): GridSample,
 * AffineGrid, DeformConv, NonMaxSuppression. Arithmetic is done in double
 * through kn_load_f64 / kn_store_f64 so one loop serves every floating
 * dtype. */
#include "k_vision.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_util.h"

/* ---- GridSample ------------------------------------------------------------------------ */

/* Reflects x into [lo, hi] by folding at the borders (as ONNX's reference). */
static double gs_reflect(double x, double lo, double hi)
{
    double rng = hi - lo;
    if (rng <= 0 || !isfinite(x)) return lo;
    /* Parity of the number of folds decides which border the rest is measured from. */
    if (x < lo) {
        double dx = lo - x, n = floor(dx / rng), r = dx - n * rng;
        return fmod(n, 2.0) == 0 ? lo + r : hi - r;
    }
    if (x > hi) {
        double dx = x - hi, n = floor(dx / rng), r = dx - n * rng;
        return fmod(n, 2.0) == 0 ? hi - r : lo + r;
    }
    return x;
}

static void cubic_coeffs(double x, double c[4])
{
    const double a = -0.75;
    x = fabs(x);
    c[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
    c[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    c[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
    c[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

typedef struct gs_geom {
    int k;                        /* spatial dims */
    const int64_t *dims;          /* k spatial sizes */
    int64_t strides[KN_MAX_RANK]; /* within one (n, c) plane */
    double lo[KN_MAX_RANK], hi[KN_MAX_RANK];
    kn_gs_pad pad;
} gs_geom;

/* Maps an integer tap position along dim d to an index, or -1 for a zero. */
static int64_t gs_tap(const gs_geom *g, int d, int64_t i)
{
    int64_t n = g->dims[d];
    if (i >= 0 && i < n) return i;
    if (g->pad == KN_GS_ZEROS) return -1;
    if (g->pad == KN_GS_BORDER) return i < 0 ? 0 : n - 1;
    int64_t r = (int64_t)gs_reflect((double)i, g->lo[d], g->hi[d]);
    return r < 0 ? 0 : r >= n ? n - 1 : r;
}

/* Interpolates one plane at continuous position pos: each dim has `taps`
 * positions starting at base[d] with weights w[d][t]; sums every combination. */
static double gs_combine(const kn_tensor *x, size_t plane, const gs_geom *g, const int64_t *base,
                         double w[][4], int taps)
{
    int64_t combos = 1;
    for (int d = 0; d < g->k; d++) combos *= taps;
    double acc = 0;
    for (int64_t c = 0; c < combos; c++) {
        int64_t rem = c, off = 0;
        double wt = 1;
        bool zero = false;
        for (int d = g->k - 1; d >= 0; d--) {
            int t = (int)(rem % taps);
            rem /= taps;
            int64_t idx = gs_tap(g, d, base[d] + t);
            if (idx < 0) zero = true;
            else off += idx * g->strides[d];
            wt *= w[d][t];
        }
        if (!zero && wt != 0) acc += wt * kn_load_f64(x->dtype, x->data, plane + (size_t)off);
    }
    return acc;
}

static double gs_sample(const kn_tensor *x, size_t plane, const gs_geom *g, const double *pos, kn_gs_mode mode)
{
    int64_t base[KN_MAX_RANK];
    double w[KN_MAX_RANK][4];
    if (mode == KN_GS_NEAREST) {
        for (int d = 0; d < g->k; d++) {
            base[d] = (int64_t)pos[d];
            w[d][0] = 1;
        }
        return gs_combine(x, plane, g, base, w, 1);
    }
    for (int d = 0; d < g->k; d++) {
        double f = floor(pos[d]);
        double t = pos[d] - f;
        if (mode == KN_GS_LINEAR) {
            base[d] = (int64_t)f;
            w[d][0] = 1 - t;
            w[d][1] = t;
        } else {
            base[d] = (int64_t)f - 1;
            cubic_coeffs(t, w[d]);
        }
    }
    return gs_combine(x, plane, g, base, w, mode == KN_GS_LINEAR ? 2 : 4);
}

int kn_k_grid_sample(const kn_tensor *x, const kn_tensor *grid, kn_gs_mode mode, kn_gs_pad pad,
                     bool align_corners, kn_tensor *out)
{
    int k = x->rank - 2;
    if (k < 1 || grid->rank != k + 2 || grid->dims[k + 1] != k || grid->dims[0] != x->dims[0])
        return kn_error(KN_ERR_INVALID, "GridSample: grid must be (N, ..., %d) matching X's batch", k);
    gs_geom g = {.k = k, .dims = x->dims + 2, .pad = pad};
    kn_shape_strides(k, g.dims, g.strides);
    for (int d = 0; d < k; d++) {
        g.lo[d] = align_corners ? 0.0 : -0.5;
        g.hi[d] = align_corners ? (double)g.dims[d] - 1 : (double)g.dims[d] - 0.5;
    }
    int64_t N = x->dims[0], C = x->dims[1], plane = 1, opts = 1;
    for (int d = 0; d < k; d++) {
        plane *= g.dims[d];
        opts *= grid->dims[1 + d];
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < opts; o++) {
            double pos[KN_MAX_RANK];
            for (int d = 0; d < k; d++) {
                /* The grid's last axis lists x (innermost dim) first. */
                double v = kn_load_f64(grid->dtype, grid->data, (size_t)((n * opts + o) * k + (k - 1 - d)));
                double len = (double)g.dims[d];
                double p = align_corners ? (v + 1) / 2 * (len - 1) : ((v + 1) * len - 1) / 2;
                if (mode == KN_GS_NEAREST) p = nearbyint(p);
                if (p < g.lo[d] || p > g.hi[d]) {
                    if (pad == KN_GS_BORDER) p = p < 0 ? 0 : p > len - 1 ? len - 1 : p;
                    else if (pad == KN_GS_REFLECTION) p = gs_reflect(p, g.lo[d], g.hi[d]);
                }
                /* Far-out (or NaN) coordinates only read padding; keep them in int64 range. */
                if (!(fabs(p) < 1e9)) p = -1e9;
                pos[d] = p;
            }
            for (int64_t c = 0; c < C; c++) {
                double v = gs_sample(x, (size_t)((n * C + c) * plane), &g, pos, mode);
                kn_store_f64(out->dtype, out->data, (size_t)((n * C + c) * opts + o), v);
            }
        }
    return KN_OK;
}

/* ---- AffineGrid ------------------------------------------------------------------------ */

/* Normalized coordinate of pixel i of a dim of size n (torch's convention:
 * corners at ±1 when aligned, pixel centres otherwise). */
static double grid_coord(int64_t i, int64_t n, bool align)
{
    if (align) return n > 1 ? -1.0 + 2.0 * (double)i / (double)(n - 1) : -1.0;
    return -1.0 + (2.0 * (double)i + 1.0) / (double)n;
}

int kn_k_affine_grid(const kn_tensor *theta, int s, const int64_t *size, bool align_corners, kn_tensor *out)
{
    if (s < 2 || s > 3 || theta->rank != 3 || theta->dims[1] != s || theta->dims[2] != s + 1)
        return kn_error(KN_ERR_INVALID, "theta must have shape (N, %d, %d)", s, s + 1);
    int64_t N = theta->dims[0], npts = 1;
    for (int d = 0; d < s; d++) npts *= size[d];
    if (out->rank != s + 2 || out->dims[0] != N || kn_tensor_numel(out) != N * npts * s)
        return kn_error(KN_ERR_INTERNAL, "affine grid output has the wrong shape");
    size_t o = 0;
    for (int64_t n = 0; n < N; n++) {
        size_t tb = (size_t)(n * s * (s + 1));
        for (int64_t p = 0; p < npts; p++) {
            /* v = (x, y[, z], 1): v[c] is the coordinate of spatial dim s-1-c. */
            double v[4];
            int64_t rem = p;
            for (int d = s - 1; d >= 0; d--) {
                v[s - 1 - d] = grid_coord(rem % size[d], size[d], align_corners);
                rem /= size[d];
            }
            v[s] = 1.0;
            for (int r = 0; r < s; r++) {
                double acc = 0;
                for (int c = 0; c <= s; c++) acc += kn_load_f64(theta->dtype, theta->data, tb + (size_t)(r * (s + 1) + c)) * v[c];
                kn_store_f64(out->dtype, out->data, o++, acc);
            }
        }
    }
    return KN_OK;
}

/* ---- DeformConv ------------------------------------------------------------------------ */

/* Bilinear (multilinear) sample of one channel plane (s dims `in`, values at
 * x->data from element `base`) at fractional position pos; points outside
 * the plane count as zero. */
static double sample_plane(const kn_tensor *x, size_t base, int s, const int64_t *in, const double *pos)
{
    int64_t lo[KN_MAX_RANK];
    double fr[KN_MAX_RANK];
    for (int d = 0; d < s; d++) {
        if (!isfinite(pos[d]) || pos[d] <= -1.0 || pos[d] >= (double)in[d]) return 0.0;
        double f = floor(pos[d]);
        lo[d] = (int64_t)f;
        fr[d] = pos[d] - f;
    }
    double acc = 0;
    for (int corner = 0; corner < (1 << s); corner++) {
        double wgt = 1.0;
        int64_t off = 0;
        bool inside = true;
        for (int d = 0; d < s && inside; d++) {
            int bit = (corner >> d) & 1;
            int64_t idx = lo[d] + bit;
            if (idx < 0 || idx >= in[d]) inside = false;
            wgt *= bit ? fr[d] : 1.0 - fr[d];
            off = off * in[d] + idx;
        }
        if (inside && wgt != 0.0) acc += wgt * kn_load_f64(x->dtype, x->data, base + (size_t)off);
    }
    return acc;
}

/* Checks the shapes of the DeformConv operands against each other and p. */
static int deform_check(const kn_tensor *x, const kn_tensor *w, const kn_tensor *offset, const kn_tensor *b,
                        const kn_tensor *mask, const kn_deform_params *p, const kn_tensor *out, int64_t K)
{
    int s = p->s;
    int64_t N = x->dims[0], C = x->dims[1], OC = w->dims[0];
    if (p->group <= 0 || p->offset_group <= 0 || C % p->group || OC % p->group || C % p->offset_group)
        return kn_error(KN_ERR_INVALID, "group %lld / offset_group %lld do not divide %lld input / %lld output channels",
                        (long long)p->group, (long long)p->offset_group, (long long)C, (long long)OC);
    if (w->rank != s + 2 || w->dims[1] * p->group != C)
        return kn_error(KN_ERR_INVALID, "W must have shape (M, C/group, k...) with C = %lld", (long long)C);
    if (offset->rank != s + 2 || offset->dims[0] != N || offset->dims[1] != p->offset_group * K * s)
        return kn_error(KN_ERR_INVALID, "offset must have shape (N, %lld, out...)", (long long)(p->offset_group * K * s));
    if (out->rank != s + 2 || out->dims[0] != N || out->dims[1] != OC)
        return kn_error(KN_ERR_INTERNAL, "deform conv output has the wrong shape");
    for (int d = 0; d < s; d++)
        if (offset->dims[2 + d] != out->dims[2 + d])
            return kn_error(KN_ERR_INVALID, "offset spatial dim %d is %lld, output's is %lld", d,
                            (long long)offset->dims[2 + d], (long long)out->dims[2 + d]);
    if (b && (b->rank != 1 || b->dims[0] != OC)) return kn_error(KN_ERR_INVALID, "B must have shape (%lld)", (long long)OC);
    if (mask) {
        bool ok = mask->rank == s + 2 && mask->dims[0] == N && mask->dims[1] == p->offset_group * K;
        for (int d = 0; ok && d < s; d++) ok = mask->dims[2 + d] == out->dims[2 + d];
        if (!ok) return kn_error(KN_ERR_INVALID, "mask must have shape (N, %lld, out...)", (long long)(p->offset_group * K));
    }
    return KN_OK;
}

int kn_k_deform_conv(const kn_tensor *x, const kn_tensor *w, const kn_tensor *offset, const kn_tensor *b,
                     const kn_tensor *mask, const kn_deform_params *p, kn_tensor *out)
{
    int s = p->s;
    if (s < 1 || s > KN_MAX_RANK - 2 || x->rank != s + 2) return kn_error(KN_ERR_INVALID, "X rank %d is not 2 + %d", x->rank, s);
    int64_t K = 1, P = 1, IN = 1;
    for (int d = 0; d < s; d++) {
        K *= w->rank == s + 2 ? w->dims[2 + d] : 1;
        P *= out->dims[2 + d];
        IN *= x->dims[2 + d];
    }
    int st = deform_check(x, w, offset, b, mask, p, out, K);
    if (st) return st;
    int64_t N = x->dims[0], C = x->dims[1], OC = w->dims[0];
    int64_t cg = C / p->group, og_ = OC / p->group, cog = C / p->offset_group;
    const int64_t *in = &x->dims[2], *kd = &w->dims[2], *od = &out->dims[2];
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < OC; m++) {
            int64_t g = m / og_;
            for (int64_t q = 0; q < P; q++) {
                int64_t oi[KN_MAX_RANK], rem = q;
                for (int d = s - 1; d >= 0; d--) {
                    oi[d] = rem % od[d];
                    rem /= od[d];
                }
                double acc = b ? kn_load_f64(b->dtype, b->data, (size_t)m) : 0.0;
                for (int64_t cl = 0; cl < cg; cl++) {
                    int64_t c = g * cg + cl, og = c / cog;
                    for (int64_t k = 0; k < K; k++) {
                        int64_t ki[KN_MAX_RANK], kr = k;
                        for (int d = s - 1; d >= 0; d--) {
                            ki[d] = kr % kd[d];
                            kr /= kd[d];
                        }
                        double pos[KN_MAX_RANK];
                        for (int d = 0; d < s; d++) {
                            size_t oo = (size_t)((((n * p->offset_group + og) * K + k) * s + d) * P + q);
                            pos[d] = (double)(-p->pads[d] + p->strides[d] * oi[d] + p->dilations[d] * ki[d]) +
                                     kn_load_f64(offset->dtype, offset->data, oo);
                        }
                        double v = sample_plane(x, (size_t)((n * C + c) * IN), s, in, pos);
                        if (v == 0.0) continue;
                        if (mask) v *= kn_load_f64(mask->dtype, mask->data, (size_t)(((n * p->offset_group + og) * K + k) * P + q));
                        acc += v * kn_load_f64(w->dtype, w->data, (size_t)((m * cg + cl) * K + k));
                    }
                }
                kn_store_f64(out->dtype, out->data, (size_t)((n * OC + m) * P + q), acc);
            }
        }
    return KN_OK;
}

/* ---- NonMaxSuppression ---------------------------------------------------------------- */

typedef struct nms_cand {
    double score;
    int64_t idx;
} nms_cand;

static int cmp_nms(const void *pa, const void *pb)
{
    const nms_cand *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* Corners (ymin, xmin, ymax, xmax) of box i of batch b. */
static void nms_box(const kn_tensor *boxes, int64_t b, int64_t i, bool center, double r[4])
{
    double v[4];
    size_t base = (size_t)((b * boxes->dims[1] + i) * 4);
    for (int j = 0; j < 4; j++) v[j] = kn_load_f64(boxes->dtype, boxes->data, base + (size_t)j);
    if (center) {
        r[0] = v[1] - v[3] / 2;
        r[2] = v[1] + v[3] / 2;
        r[1] = v[0] - v[2] / 2;
        r[3] = v[0] + v[2] / 2;
    } else {
        r[0] = fmin(v[0], v[2]);
        r[2] = fmax(v[0], v[2]);
        r[1] = fmin(v[1], v[3]);
        r[3] = fmax(v[1], v[3]);
    }
}

static bool nms_suppress(const double a[4], const double b[4], double thr)
{
    double ih = fmin(a[2], b[2]) - fmax(a[0], b[0]);
    double iw = fmin(a[3], b[3]) - fmax(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return false;
    double inter = ih * iw;
    double a1 = (a[2] - a[0]) * (a[3] - a[1]), a2 = (b[2] - b[0]) * (b[3] - b[1]);
    double uni = a1 + a2 - inter;
    if (a1 <= 0 || a2 <= 0 || uni <= 0) return false;
    return inter / uni > thr;
}

int kn_k_nms(const kn_tensor *boxes, const kn_tensor *scores, int64_t max_per_class,
             double iou_threshold, bool has_score_threshold, double score_threshold,
             bool center_point_box, kn_tensor *out)
{
    if (boxes->rank != 3 || boxes->dims[2] != 4 || scores->rank != 3 || scores->dims[0] != boxes->dims[0] ||
        scores->dims[2] != boxes->dims[1])
        return kn_error(KN_ERR_INVALID, "NonMaxSuppression: boxes must be (B, S, 4) and scores (B, C, S)");
    int64_t B = boxes->dims[0], C = scores->dims[1], S = boxes->dims[1];
    if (max_per_class < 0) max_per_class = 0;
    if (max_per_class > S) max_per_class = S;
    size_t cap = (size_t)(B * C * max_per_class);
    nms_cand *cand = malloc((size_t)(S ? S : 1) * sizeof *cand);
    int64_t *kept = malloc((size_t)(S ? S : 1) * sizeof *kept);
    int64_t *sel = malloc((cap ? cap : 1) * 3 * sizeof *sel);
    if (!cand || !kept || !sel) {
        free(cand);
        free(kept);
        free(sel);
        return kn_error(KN_ERR_NOMEM, "NonMaxSuppression: out of memory");
    }
    int64_t nsel = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++) {
            int64_t nc = 0, nk = 0;
            for (int64_t s = 0; s < S; s++) {
                double v = kn_load_f64(scores->dtype, scores->data, (size_t)((b * C + c) * S + s));
                if (has_score_threshold && !(v > score_threshold)) continue;
                cand[nc++] = (nms_cand){v, s};
            }
            qsort(cand, (size_t)nc, sizeof *cand, cmp_nms);
            for (int64_t i = 0; i < nc && nk < max_per_class; i++) {
                double bi[4], bk[4];
                nms_box(boxes, b, cand[i].idx, center_point_box, bi);
                bool keep = true;
                for (int64_t j = 0; j < nk && keep; j++) {
                    nms_box(boxes, b, kept[j], center_point_box, bk);
                    keep = !nms_suppress(bi, bk, iou_threshold);
                }
                if (!keep) continue;
                kept[nk++] = cand[i].idx;
                sel[nsel * 3] = b;
                sel[nsel * 3 + 1] = c;
                sel[nsel * 3 + 2] = cand[i].idx;
                nsel++;
            }
        }
    int64_t dims[2] = {nsel, 3};
    int st = kn_tensor_alloc(out, KN_I64, 2, dims);
    if (!st && nsel) memcpy(out->data, sel, (size_t)nsel * 3 * sizeof *sel);
    free(cand);
    free(kept);
    free(sel);
    return st;
}
