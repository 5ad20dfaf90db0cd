/*
 * nn.c — normalization kernels: BatchNormalization (inference and training),
 * LayerNormalization, InstanceNormalization, GroupNormalization, LRN,
 * LpNormalization, MeanVarianceNormalization. Statistics are accumulated in
 * double (two passes: mean, then centred variance) whatever the dtype; f32
 * BatchNormalization, the one on hot CNN paths, has a direct loop.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_nn.h"

/* Per-channel parameter c of a 1-D tensor, as double. */
static double chan(const kn_tensor *t, int64_t c) { return kn_load_f64(t->dtype, t->data, (size_t)c); }

/* Product of dims [from, to). */
static int64_t span(const kn_tensor *t, int from, int to)
{
    int64_t p = 1;
    for (int d = from; d < to; d++) p *= t->dims[d];
    return p;
}

/* Mean and biased variance of n doubles. */
static void moments(const double *v, int64_t n, double *mean, double *var)
{
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    double m = n ? s / (double)n : 0.0;
    for (int64_t i = 0; i < n; i++) q += (v[i] - m) * (v[i] - m);
    *mean = m;
    *var = n ? q / (double)n : 0.0;
}

int kn_k_batchnorm(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *bias,
                   const kn_tensor *mean, const kn_tensor *var, double eps, kn_tensor *y)
{
    int64_t N = x->dims[0], C = x->rank > 1 ? x->dims[1] : 1, sp = span(x, 2, x->rank);
    for (int64_t c = 0; c < C; c++) {
        double a = chan(scale, c) / sqrt(chan(var, c) + eps);
        double b = chan(bias, c) - chan(mean, c) * a;
        for (int64_t n = 0; n < N; n++) {
            size_t base = (size_t)((n * C + c) * sp);
            if (x->dtype == KN_F32) {
                const float *xs = (const float *)x->data + base;
                float *ys = (float *)y->data + base, fa = (float)a, fb = (float)b;
                for (int64_t i = 0; i < sp; i++) ys[i] = xs[i] * fa + fb;
            } else {
                for (int64_t i = 0; i < sp; i++) {
                    double v = kn_load_f64(x->dtype, x->data, base + (size_t)i);
                    kn_store_f64(y->dtype, y->data, base + (size_t)i, v * a + b);
                }
            }
        }
    }
    return KN_OK;
}

int kn_k_batchnorm_train(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *bias,
                         const kn_tensor *mean, const kn_tensor *var, double eps,
                         double momentum, kn_tensor *y, kn_tensor *running_mean,
                         kn_tensor *running_var)
{
    int64_t N = x->dims[0], C = x->rank > 1 ? x->dims[1] : 1, sp = span(x, 2, x->rank);
    int64_t cnt = N * sp;
    double *xd = kn_nn_to_f64(x), *buf = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(double));
    if (!xd || !buf) {
        free(xd);
        free(buf);
        return kn_error(KN_ERR_NOMEM, "BatchNormalization: out of memory");
    }
    for (int64_t c = 0; c < C; c++) {
        for (int64_t n = 0; n < N; n++) memcpy(buf + n * sp, xd + (n * C + c) * sp, (size_t)sp * sizeof(double));
        double m, v;
        moments(buf, N * sp, &m, &v);
        double a = chan(scale, c) / sqrt(v + eps), b = chan(bias, c) - m * a;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < sp; i++) {
                size_t k = (size_t)((n * C + c) * sp + i);
                kn_store_f64(y->dtype, y->data, k, xd[k] * a + b);
            }
        if (running_mean)
            kn_store_f64(running_mean->dtype, running_mean->data, (size_t)c,
                         chan(mean, c) * momentum + m * (1 - momentum));
        if (running_var)
            kn_store_f64(running_var->dtype, running_var->data, (size_t)c,
                         chan(var, c) * momentum + v * (1 - momentum));
    }
    free(xd);
    free(buf);
    return KN_OK;
}

/* Expands a parameter tensor that broadcasts to dims[axis:] of x into a
 * dense double array of `inner` entries (NULL t → all `def`). */
static double *expand_param(const kn_tensor *t, const kn_tensor *x, int axis, int64_t inner, double def)
{
    double *out = malloc((size_t)(inner ? inner : 1) * sizeof(double));
    if (!out) return NULL;
    if (!t) {
        for (int64_t i = 0; i < inner; i++) out[i] = def;
        return out;
    }
    int r = x->rank - axis;
    int64_t strides[KN_MAX_RANK];
    kn_broadcast_strides(t->rank, t->dims, r, x->dims + axis, strides);
    kn_index it;
    kn_index_init(&it, r, x->dims + axis);
    for (int64_t i = 0; i < inner; i++, kn_index_next(&it))
        out[i] = kn_load_f64(t->dtype, t->data, (size_t)kn_index_offset(&it, strides));
    return out;
}

int kn_k_layernorm(const kn_tensor *x, int axis, const kn_tensor *scale, const kn_tensor *bias,
                   double eps, kn_tensor *y, kn_tensor *mean, kn_tensor *invstd)
{
    int64_t outer = span(x, 0, axis), inner = span(x, axis, x->rank);
    double *xd = kn_nn_to_f64(x);
    double *sc = expand_param(scale, x, axis, inner, 1.0), *bi = expand_param(bias, x, axis, inner, 0.0);
    if (!xd || !sc || !bi) {
        free(xd);
        free(sc);
        free(bi);
        return kn_error(KN_ERR_NOMEM, "LayerNormalization: out of memory");
    }
    for (int64_t o = 0; o < outer; o++) {
        double *row = xd + o * inner, m, v;
        moments(row, inner, &m, &v);
        double is = 1.0 / sqrt(v + eps);
        for (int64_t i = 0; i < inner; i++)
            kn_store_f64(y->dtype, y->data, (size_t)(o * inner + i), (row[i] - m) * is * sc[i] + bi[i]);
        if (mean) kn_store_f64(mean->dtype, mean->data, (size_t)o, m);
        if (invstd) kn_store_f64(invstd->dtype, invstd->data, (size_t)o, is);
    }
    free(xd);
    free(sc);
    free(bi);
    return KN_OK;
}

/* Normalizes `groups` consecutive runs of `len` elements of x into y; the
 * affine parameters of element i of run g are param(g, i / chan_len). */
static int norm_runs(const kn_tensor *x, int64_t groups, int64_t len, int64_t chan_len,
                     int64_t C, const kn_tensor *scale, const kn_tensor *bias, int64_t per_group_div,
                     double eps, kn_tensor *y)
{
    double *xd = kn_nn_to_f64(x);
    if (!xd) return kn_error(KN_ERR_NOMEM, "normalization: out of memory");
    for (int64_t g = 0; g < groups; g++) {
        double *run = xd + g * len, m, v;
        moments(run, len, &m, &v);
        double is = 1.0 / sqrt(v + eps);
        int64_t c0 = (g * (len / chan_len)) % C; /* channel of the run's first element */
        for (int64_t i = 0; i < len; i++) {
            int64_t c = c0 + i / chan_len, pc = c / per_group_div;
            double out = (run[i] - m) * is * chan(scale, pc) + chan(bias, pc);
            kn_store_f64(y->dtype, y->data, (size_t)(g * len + i), out);
        }
    }
    free(xd);
    return KN_OK;
}

int kn_k_instancenorm(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *bias,
                      double eps, kn_tensor *y)
{
    int64_t N = x->dims[0], C = x->dims[1], sp = span(x, 2, x->rank);
    if (sp == 0) return KN_OK;
    return norm_runs(x, N * C, sp, sp, C, scale, bias, 1, eps, y);
}

int kn_k_groupnorm(const kn_tensor *x, const kn_tensor *scale, const kn_tensor *bias,
                   int64_t num_groups, double eps, bool per_channel, kn_tensor *y)
{
    int64_t N = x->dims[0], C = x->dims[1], sp = span(x, 2, x->rank), cpg = C / num_groups;
    if (sp == 0 || cpg == 0) return KN_OK;
    return norm_runs(x, N * num_groups, cpg * sp, sp, C, scale, bias, per_channel ? 1 : cpg, eps, y);
}

int kn_k_lrn(const kn_tensor *x, int64_t size, double alpha, double beta, double bias,
             kn_tensor *y)
{
    int64_t N = x->dims[0], C = x->dims[1], sp = span(x, 2, x->rank);
    int64_t lo = (size - 1) / 2, hi = size / 2; /* floor and ceil of (size-1)/2 */
    double *xd = kn_nn_to_f64(x);
    if (!xd) return kn_error(KN_ERR_NOMEM, "LRN: out of memory");
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < sp; i++) {
                double sq = 0;
                for (int64_t k = c - lo; k <= c + hi; k++) {
                    if (k < 0 || k >= C) continue;
                    double v = xd[(n * C + k) * sp + i];
                    sq += v * v;
                }
                size_t at = (size_t)((n * C + c) * sp + i);
                kn_store_f64(y->dtype, y->data, at, xd[at] / pow(bias + alpha / (double)size * sq, beta));
            }
    free(xd);
    return KN_OK;
}

int kn_k_lpnorm(const kn_tensor *x, int axis, int64_t p, kn_tensor *y)
{
    int64_t outer = span(x, 0, axis), len = x->dims[axis], inner = span(x, axis + 1, x->rank);
    double *xd = kn_nn_to_f64(x);
    if (!xd) return kn_error(KN_ERR_NOMEM, "LpNormalization: out of memory");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t k = 0; k < len; k++) {
                double v = xd[(o * len + k) * inner + i];
                s += p == 1 ? fabs(v) : v * v;
            }
            double norm = p == 1 ? s : sqrt(s);
            for (int64_t k = 0; k < len; k++) {
                size_t at = (size_t)((o * len + k) * inner + i);
                kn_store_f64(y->dtype, y->data, at, norm == 0 ? 0.0 : xd[at] / norm);
            }
        }
    free(xd);
    return KN_OK;
}

int kn_k_mvn(const kn_tensor *x, unsigned axes_mask, kn_tensor *y)
{
    int64_t rdims[KN_MAX_RANK], strides[KN_MAX_RANK], n = kn_tensor_numel(x), cnt = 1;
    for (int d = 0; d < x->rank; d++) {
        bool red = (axes_mask >> d) & 1u;
        rdims[d] = red ? 1 : x->dims[d];
        if (red) cnt *= x->dims[d];
    }
    kn_broadcast_strides(x->rank, rdims, x->rank, x->dims, strides);
    int64_t nr = kn_shape_numel(x->rank, rdims);
    double *xd = kn_nn_to_f64(x), *sum = calloc((size_t)(nr ? nr : 1), sizeof(double));
    double *sq = calloc((size_t)(nr ? nr : 1), sizeof(double));
    if (!xd || !sum || !sq) {
        free(xd);
        free(sum);
        free(sq);
        return kn_error(KN_ERR_NOMEM, "MeanVarianceNormalization: out of memory");
    }
    /* Two passes: means, then centred squares, so large offsets do not cancel. */
    for (int pass = 0; pass < 3; pass++) {
        kn_index it;
        kn_index_init(&it, x->rank, x->dims);
        for (int64_t i = 0; i < n; i++, kn_index_next(&it)) {
            int64_t r = kn_index_offset(&it, strides);
            if (pass == 0) sum[r] += xd[i];
            else if (pass == 1) sq[r] += (xd[i] - sum[r]) * (xd[i] - sum[r]);
            else kn_store_f64(y->dtype, y->data, (size_t)i, (xd[i] - sum[r]) / (sqrt(sq[r]) + 1e-9));
        }
        for (int64_t r = 0; r < nr && pass < 2; r++) {
            if (pass == 0) sum[r] = cnt ? sum[r] / (double)cnt : 0.0;
            else sq[r] = cnt ? sq[r] / (double)cnt : 0.0;
        }
    }
    free(xd);
    free(sum);
    free(sq);
    return KN_OK;
}
