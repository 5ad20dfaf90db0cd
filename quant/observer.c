/* quant/observer.c — see observer.h for the histogram rule that makes the
 * statistics independent of batch order. */
#include "observer.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HALF (KN_OBS_BINS / 2)
#define HALF_LOG2 10 /* HALF = 2^HALF_LOG2 */
_Static_assert(HALF == 1 << HALF_LOG2, "HALF_LOG2 follows KN_OBS_BINS");

static const char *const k_methods[] = {"minmax", "percentile", "entropy", "mse"};

const char *kn_calib_method_name(kn_calib_method m)
{
    return (unsigned)m < 4 ? k_methods[m] : NULL;
}

int kn_calib_method_from_name(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, k_methods[i])) return i;
    return -1;
}

kn_observer *kn_observer_create(void)
{
    kn_observer *o = malloc(sizeof *o);
    if (o) kn_observer_reset(o);
    return o;
}

void kn_observer_free(kn_observer *o) { free(o); }

void kn_observer_reset(kn_observer *o)
{
    memset(o, 0, sizeof *o);
    o->exp = KN_OBS_NO_RANGE;
}

double kn_observer_hist_range(const kn_observer *o)
{
    return o->exp == KN_OBS_NO_RANGE ? 0.0 : ldexp(1.0, o->exp);
}

/* floor(a / 2^k) for integers, for negative a too */
static int64_t floor_shift(int64_t a, int k)
{
    if (k >= 62) return a < 0 ? -1 : 0;
    int64_t d = (int64_t)1 << k;
    int64_t q = a / d;
    if (a % d != 0 && a < 0) q--;
    return q;
}

/* Widens the histogram to R = 2^e (e >= o->exp) by merging whole bins. */
static void widen(kn_observer *o, int e)
{
    if (o->exp == KN_OBS_NO_RANGE) {
        /* only zeros so far: they sit in bin HALF at every range */
        o->exp = e;
        return;
    }
    int k = e - o->exp;
    if (k <= 0) return;
    uint64_t nb[KN_OBS_BINS] = {0};
    for (int i = 0; i < KN_OBS_BINS; i++)
        if (o->bins[i]) nb[HALF + floor_shift(i - HALF, k)] += o->bins[i];
    memcpy(o->bins, nb, sizeof nb);
    o->exp = e;
}

/* The exponent e of the smallest power of two strictly above a > 0. */
static int exp_above(double a)
{
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): a < 2^e */
    return e;
}

void kn_observer_add(kn_observer *o, const float *x, size_t n)
{
    /* first pass: min, max and the largest |x|, so that the range widens
     * once per batch */
    float mn = INFINITY, mx = -INFINITY;
    uint64_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        float f = x[i];
        bool ok = fabsf(f) <= FLT_MAX; /* false for NaN and inf */
        finite += ok;
        mn = ok && f < mn ? f : mn;
        mx = ok && f > mx ? f : mx;
    }
    o->nonfinite += n - finite;
    if (!finite) return;
    mn += 0.0f, mx += 0.0f; /* -0 becomes +0: which zero came first must not show */
    if (o->count == 0 || mn < o->min) o->min = mn;
    if (o->count == 0 || mx > o->max) o->max = mx;
    o->count += finite;
    double amax = fmax(fabs(mn), fabs(mx));
    if (amax > 0) {
        int e = exp_above(amax);
        if (o->exp == KN_OBS_NO_RANGE || e > o->exp) widen(o, e);
    }
    if (o->exp == KN_OBS_NO_RANGE) { /* all zeros */
        o->bins[HALF] += finite;
        return;
    }
    /* x * HALF / R is exact in double (a power-of-two scaling of a float,
     * far from overflow and underflow), and so is its floor */
    const double k = ldexp(1.0, HALF_LOG2 - o->exp);
    uint64_t *bins = o->bins;
    for (size_t i = 0; i < n; i++) {
        float f = x[i];
        if (!(fabsf(f) <= FLT_MAX)) continue;
        double t = (double)f * k;
        int64_t b = (int64_t)t; /* truncation; floor below for negatives */
        b -= (double)b > t;
        bins[HALF + b] += 1;
    }
}

void kn_observer_merge(kn_observer *a, const kn_observer *b)
{
    a->nonfinite += b->nonfinite;
    if (!b->count) return;
    if (!a->count || b->min < a->min) a->min = b->min;
    if (!a->count || b->max > a->max) a->max = b->max;
    a->count += b->count;
    kn_observer t = *b;
    if (a->exp != KN_OBS_NO_RANGE && (t.exp == KN_OBS_NO_RANGE || t.exp < a->exp)) widen(&t, a->exp);
    else if (t.exp != KN_OBS_NO_RANGE) widen(a, t.exp);
    for (int i = 0; i < KN_OBS_BINS; i++) a->bins[i] += t.bins[i];
}

/* ---- ranges ---------------------------------------------------------------- */

/* Left edge of bin i (i in [0, KN_OBS_BINS]). */
static double edge(const kn_observer *o, int i)
{
    return ldexp((double)(i - HALF), o->exp - HALF_LOG2);
}

/* |x| histogram: bin k covers [k, k+1) * R / HALF. */
static void fold_abs(const kn_observer *o, uint64_t *abs)
{
    for (int k = 0; k < HALF; k++) abs[k] = o->bins[HALF + k] + o->bins[HALF - 1 - k];
}

static void clip_to_seen(const kn_observer *o, double lo, double hi, float *out_lo, float *out_hi)
{
    if (lo < o->min) lo = o->min;
    if (hi > o->max) hi = o->max;
    if (lo > hi) lo = hi = 0;
    *out_lo = (float)lo;
    *out_hi = (float)hi;
}

static void range_percentile(const kn_observer *o, double p, bool symmetric, float *lo, float *hi)
{
    double want = (p / 100.0) * (double)o->count;
    if (symmetric) {
        uint64_t abs[HALF];
        fold_abs(o, abs);
        uint64_t cum = 0;
        int k = HALF - 1;
        for (int i = 0; i < HALF; i++) {
            cum += abs[i];
            if ((double)cum >= want) {
                k = i;
                break;
            }
        }
        double t = edge(o, HALF + k + 1);
        clip_to_seen(o, -t, t, lo, hi);
        return;
    }
    uint64_t cum = 0;
    int ih = KN_OBS_BINS - 1, il = 0;
    for (int i = 0; i < KN_OBS_BINS; i++) {
        cum += o->bins[i];
        if ((double)cum >= want) {
            ih = i;
            break;
        }
    }
    cum = 0;
    for (int i = KN_OBS_BINS - 1; i >= 0; i--) {
        cum += o->bins[i];
        if ((double)cum >= want) {
            il = i;
            break;
        }
    }
    clip_to_seen(o, edge(o, il), edge(o, ih + 1), lo, hi);
}

/* onnxruntime's smooth_distribution on a normalized distribution: moves eps
 * of mass onto every empty bin so that KL stays finite. false if all empty. */
static bool smooth(double *p, int n)
{
    const double eps = 0.0001;
    int zeros = 0;
    for (int i = 0; i < n; i++) zeros += p[i] == 0;
    if (zeros == n) return false;
    double eps1 = eps * zeros / (double)(n - zeros);
    for (int i = 0; i < n; i++) p[i] += p[i] == 0 ? eps : -eps1;
    return true;
}

static void normalize(double *p, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += p[i];
    if (s > 0)
        for (int i = 0; i < n; i++) p[i] /= s;
}

/* TensorRT's entropy calibration on the |x| histogram: for each candidate
 * threshold of i bins (i from `levels` up), P is the histogram clipped to
 * i bins (the tail added to the last one), Q is P's first i bins merged
 * into `levels` bins and spread back over the non-empty ones; the
 * threshold minimizing KL(P || Q) wins (the first one on ties). */
static double entropy_threshold(const kn_observer *o, int levels)
{
    uint64_t abs[HALF];
    fold_abs(o, abs);
    int last = 0;
    for (int i = 0; i < HALF; i++)
        if (abs[i]) last = i;
    if (last + 1 <= levels) return edge(o, HALF + last + 1);
    double p[HALF], q[HALF];
    double best = INFINITY;
    int best_i = HALF;
    uint64_t outliers = 0; /* of the candidate i: abs[i..HALF) */
    for (int j = levels; j < HALF; j++) outliers += abs[j];
    for (int i = levels; i <= HALF; i++) {
        if (i > levels) outliers -= abs[i - 1];
        for (int j = 0; j < i; j++) p[j] = (double)abs[j];
        p[i - 1] += (double)outliers;
        int merged = i / levels;
        for (int b = 0; b < levels; b++) {
            int start = b * merged, end = b == levels - 1 ? i : start + merged;
            double sum = 0;
            int nz = 0;
            for (int j = start; j < end; j++) {
                sum += (double)abs[j];
                nz += abs[j] != 0;
            }
            for (int j = start; j < end; j++) q[j] = abs[j] && nz ? sum / nz : 0;
        }
        normalize(p, i);
        normalize(q, i);
        if (!smooth(p, i) || !smooth(q, i)) continue;
        double kl = 0;
        for (int j = 0; j < i; j++)
            if (p[j] > 0 && q[j] > 0) kl += p[j] * log(p[j] / q[j]);
        if (kl < best) {
            best = kl;
            best_i = i;
        }
    }
    return edge(o, HALF + best_i);
}

/* Expected squared error of quantizing the histogram to range [lo, hi]
 * with step s: s^2/12 per value inside (uniform rounding noise), the
 * squared distance to the range for a value outside (at its bin's centre). */
static double expected_mse(const kn_observer *o, double lo, double hi, double s)
{
    double err = 0, noise = s * s / 12.0;
    for (int i = 0; i < KN_OBS_BINS; i++) {
        if (!o->bins[i]) continue;
        double c = 0.5 * (edge(o, i) + edge(o, i + 1));
        if (i == HALF && o->bins[i]) c = 0.5 * edge(o, i + 1); /* zeros dominate this bin */
        double d = c < lo ? lo - c : c > hi ? c - hi : 0;
        err += (double)o->bins[i] * (d > 0 ? d * d : noise);
    }
    return err;
}

/* Shrinks the min/max range by alpha = k/128, k = 1..128, keeping the one
 * with the least expected MSE (the widest on ties). */
static void range_mse(const kn_observer *o, bool symmetric, float *lo, float *hi)
{
    double l0 = fmin(o->min, 0), h0 = fmax(o->max, 0);
    if (symmetric) {
        double m = fmax(-l0, h0);
        l0 = -m, h0 = m;
    }
    double best = INFINITY, ba = 1;
    for (int k = 128; k >= 1; k--) {
        double a = k / 128.0, l = l0 * a, h = h0 * a;
        double s = symmetric ? h / 127.0 : (h - l) / 255.0;
        if (s <= 0) continue;
        double e = expected_mse(o, l, h, s);
        if (e < best) best = e, ba = a;
    }
    clip_to_seen(o, l0 * ba, h0 * ba, lo, hi);
}

void kn_observer_range(const kn_observer *o, kn_calib_method m, double percentile, bool symmetric, float *out_lo,
                       float *out_hi)
{
    *out_lo = *out_hi = 0;
    if (!o->count) return;
    if (o->exp == KN_OBS_NO_RANGE || m == KN_CALIB_MINMAX) {
        *out_lo = (float)o->min;
        *out_hi = (float)o->max;
        return;
    }
    if (percentile <= 0 || percentile > 100) percentile = 99.999;
    switch (m) {
    case KN_CALIB_PERCENTILE: range_percentile(o, percentile, symmetric, out_lo, out_hi); break;
    case KN_CALIB_ENTROPY: {
        double t = entropy_threshold(o, 128);
        clip_to_seen(o, -t, t, out_lo, out_hi);
        break;
    }
    case KN_CALIB_MSE: range_mse(o, symmetric, out_lo, out_hi); break;
    default:
        *out_lo = (float)o->min;
        *out_hi = (float)o->max;
    }
}

/* ---- scale and zero point ---------------------------------------------------- */

void kn_qparams_u8(float lo, float hi, float *out_scale, int32_t *out_zp)
{
    double l = fmin(lo, 0), h = fmax(hi, 0);
    if (!(h > l)) {
        *out_scale = 1.0f;
        *out_zp = 0;
        return;
    }
    float s = (float)((h - l) / 255.0);
    if (!(s > 0)) s = 1e-30f;
    double zp = nearbyint(-l / (double)s);
    *out_scale = s;
    *out_zp = zp < 0 ? 0 : zp > 255 ? 255 : (int32_t)zp;
}

void kn_qparams_s8_max(float lo, float hi, int qmax, float *out_scale)
{
    double m = fmax(fabs(lo), fabs(hi));
    float s = (float)(m / qmax);
    *out_scale = m > 0 && s > 0 ? s : 1.0f;
}

void kn_qparams_s8(float lo, float hi, float *out_scale) { kn_qparams_s8_max(lo, hi, 127, out_scale); }

uint8_t kn_quantize_u8(float x, float scale, int32_t zp)
{
    float q = nearbyintf(x / scale) + (float)zp;
    if (!(q >= 0)) return 0; /* NaN too */
    return q > 255 ? 255 : (uint8_t)q;
}

int8_t kn_quantize_s8_max(float x, float scale, int qmax)
{
    float q = nearbyintf(x / scale);
    if (!(q >= -qmax) && !(q > 0)) return (int8_t)-qmax;
    return q > qmax ? (int8_t)qmax : (int8_t)q;
}

int8_t kn_quantize_s8(float x, float scale) { return kn_quantize_s8_max(x, scale, 127); }
