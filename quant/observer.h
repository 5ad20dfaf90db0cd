/*
 * quant/observer.h — streaming, mergeable statistics of one tensor's values
 * over a calibration data set, and the ways to turn them into a quantization
 * range, scale and zero point.
 *
 *     kn_observer *o = kn_observer_create();
 *     for (each sample) kn_observer_add(o, data, n);       // float32 values
 *     float lo, hi, scale; int32_t zp;
 *     kn_observer_range(o, KN_CALIB_PERCENTILE, 99.999, false, &lo, &hi);
 *     kn_qparams_u8(lo, hi, &scale, &zp);                   // activations
 *     kn_observer_free(o);
 *
 * What an observer keeps (memory is fixed, whatever the number of samples):
 * the count of finite values, their min and max (double), the count of
 * NaN/inf values (ignored otherwise), and a histogram of KN_OBS_BINS bins
 * over [-R, R), where R = 2^e is the smallest power of two strictly above
 * the largest |x| seen so far (R is undefined while only zeros were seen).
 *
 * The rule that makes results independent of batch order: a value x goes to
 * bin KN_OBS_BINS/2 + floor(x * (KN_OBS_BINS/2) / R), computed exactly in
 * double (R is a power of two, so the product is exact). When a batch has a
 * larger |x|, R doubles (as often as needed) and each doubling merges bins
 * i → B/2 + floor((i - B/2) / 2): bin edges at range R are a subset of the
 * edges at range R/2, so a value lands in the same bin whether it was
 * binned at the final R or at a smaller R and merged. Hence the histogram
 * (and everything derived from it) depends only on the multiset of values
 * seen: observe(a); observe(b) == observe(b); observe(a) == merge(a, b).
 */
#ifndef KILN_QUANT_OBSERVER_H
#define KILN_QUANT_OBSERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KN_OBS_BINS 2048

typedef struct kn_observer {
    uint64_t count;       /* finite values seen */
    uint64_t nonfinite;   /* NaN and inf values seen (not in min/max/bins) */
    double min, max;      /* of the finite values; 0, 0 while count == 0 */
    int exp;              /* R = 2^exp; KN_OBS_NO_RANGE while no nonzero value was seen */
    uint64_t bins[KN_OBS_BINS];
} kn_observer;

#define KN_OBS_NO_RANGE (-100000)

/* Range methods (`kiln calibrate --method`). */
typedef enum kn_calib_method {
    KN_CALIB_MINMAX = 0,     /* [min, max] of everything seen */
    KN_CALIB_PERCENTILE = 1, /* clip the (100 - P)% tails */
    KN_CALIB_ENTROPY = 2,    /* threshold minimizing KL(P || Q), TensorRT's method, 128 levels */
    KN_CALIB_MSE = 3,        /* clipping that minimizes the expected quantization MSE */
} kn_calib_method;

/* "minmax", "percentile", "entropy", "mse"; NULL for other values. */
const char *kn_calib_method_name(kn_calib_method m);
/* Parses a name; -1 if unknown. */
int kn_calib_method_from_name(const char *name);

/* A zeroed observer (malloc'd; free with kn_observer_free); NULL on out of memory. */
kn_observer *kn_observer_create(void);
void kn_observer_free(kn_observer *o);
/* Resets o to the empty state. */
void kn_observer_reset(kn_observer *o);
/* Adds n float32 values. */
void kn_observer_add(kn_observer *o, const float *x, size_t n);
/* Adds everything b saw into a (b unchanged). */
void kn_observer_merge(kn_observer *a, const kn_observer *b);
/* R, the histogram's half range (0 while undefined). */
double kn_observer_hist_range(const kn_observer *o);

/* The range [*out_lo, *out_hi] of method m. percentile: P in (0, 100]
 * (99.999 if <= 0). symmetric: the range will be used symmetrically (s8
 * weights, signed activations): percentile and entropy look at |x|. Every
 * method stays inside [min, max]. An observer that saw nothing gives [0, 0]. */
void kn_observer_range(const kn_observer *o, kn_calib_method m, double percentile, bool symmetric, float *out_lo,
                       float *out_hi);

/* u8 asymmetric parameters for range [lo, hi] widened to include 0:
 * scale = (hi - lo) / 255, zero point = round(-lo / scale) in [0, 255]
 * (scale 1, zero point 0 for an empty range, as onnxruntime). */
void kn_qparams_u8(float lo, float hi, float *out_scale, int32_t *out_zp);
/* The same for weights in [-qmax, qmax] (127 for 8 bits, 63 for 7). */
void kn_qparams_s8_max(float lo, float hi, int qmax, float *out_scale);
int8_t kn_quantize_s8_max(float x, float scale, int qmax);

/* s8 symmetric parameters: scale = max(|lo|, |hi|) / 127, zero point 0
 * (scale 1 for an all-zero range); values are then clamped to [-127, 127]. */
void kn_qparams_s8(float lo, float hi, float *out_scale);

/* round-half-to-even quantization as ONNX QuantizeLinear does, to u8 / s8 */
uint8_t kn_quantize_u8(float x, float scale, int32_t zp);
int8_t kn_quantize_s8(float x, float scale);

#ifdef __cplusplus
}
#endif
#endif
