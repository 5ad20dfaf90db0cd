/*
 * quant/compare.h — accuracy metrics between a reference tensor (FP32) and a
 * tensor under test (quantized), accumulated over many samples.
 *
 *     kn_qmetrics m;
 *     kn_qmetrics_init(&m);
 *     for (each sample) kn_qmetrics_add(&m, ref, test, n, classes);
 *     printf("cos %.6f sqnr %.2f dB\n", kn_qmetrics_cosine(&m), kn_qmetrics_sqnr_db(&m));
 *
 * Sums are kept in double in sample order, so a run over the same data
 * gives the same figures.
 */
#ifndef KILN_QUANT_COMPARE_H
#define KILN_QUANT_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_qmetrics {
    uint64_t n;            /* elements compared */
    double max_abs;        /* max |ref - test| */
    double max_rel;        /* max |ref - test| / |ref| over elements with |ref| > rel_floor */
    double dot, ref2, test2, err2; /* sum ref*test, ref^2, test^2, (ref - test)^2 */
    uint64_t rows, top1_agree;     /* top-1 agreement when rows of `classes` are compared */
    uint64_t nonfinite;    /* elements where either side is NaN or inf (left out of the sums) */
} kn_qmetrics;

/* |ref| below this does not count for the relative error (it would be noise). */
#define KN_QMETRICS_REL_FLOOR 1e-6

void kn_qmetrics_init(kn_qmetrics *m);
/* Adds n elements. classes > 1: the tensors are rows of `classes` scores
 * (n a multiple of it) and each row's argmax is compared (first on ties). */
void kn_qmetrics_add(kn_qmetrics *m, const float *ref, const float *test, size_t n, size_t classes);
/* Cosine similarity (1 when both are all zero, 0 when one is). */
double kn_qmetrics_cosine(const kn_qmetrics *m);
/* Signal-to-quantization-noise ratio 10 log10(sum ref^2 / sum err^2) in dB;
 * +inf when there is no error. */
double kn_qmetrics_sqnr_db(const kn_qmetrics *m);
/* Top-1 agreement in [0, 1]; -1 when no rows were compared. */
double kn_qmetrics_top1(const kn_qmetrics *m);

/* Fake quantization to u8 with scale/zero point: dequantize(quantize(x)),
 * as a QuantizeLinear → DequantizeLinear pair computes it, into out. */
void kn_fake_quant_u8(const float *x, size_t n, float scale, int32_t zp, float *out);

#ifdef __cplusplus
}
#endif
#endif
