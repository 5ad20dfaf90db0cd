/*
 * k_misc.h — plain C reference kernels of the 'misc' family: the losses,
 * CenterCropPad, ReverseSequence, TfIdfVectorizer (misc.c). Kernels take
 * kn_tensor and plain parameters (no IR) and fill an output the caller
 * allocated with its final shape.
 */
#ifndef KILN_K_MISC_H
#define KILN_K_MISC_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_loss_reduction { KN_LOSS_NONE, KN_LOSS_SUM, KN_LOSS_MEAN } kn_loss_reduction;

/* Negative log-likelihood: x is (N, C, d1..dk) log-probabilities, target
 * (N, d1..dk) integer classes, weight (C) or NULL. Targets equal to
 * ignore_index (when has_ignore) contribute 0 and no weight; any other
 * target outside [0, C) is an error. out is preallocated: target's shape for
 * KN_LOSS_NONE, a scalar otherwise (mean divides by the summed weights). */
int kn_k_nll_loss(const kn_tensor *x, const kn_tensor *target, const kn_tensor *weight,
                  bool has_ignore, int64_t ignore_index, kn_loss_reduction red, kn_tensor *out);

/* log(softmax(x)) along axis 1 into the preallocated out (x's shape). */
int kn_k_log_softmax_axis1(const kn_tensor *x, kn_tensor *out);

/* Center crop / zero pad of x to out's shape (same rank): along each axis the
 * window starts at floor((in - out) / 2) (crop) or is placed at
 * floor((out - in) / 2) (pad). */
int kn_k_center_crop_pad(const kn_tensor *x, kn_tensor *out);

/* Reverses the first lens[b] steps along time_axis of each batch b (along
 * batch_axis); lens is an integer tensor of dims[batch_axis] entries. */
int kn_k_reverse_sequence(const kn_tensor *x, const kn_tensor *lens, int batch_axis, int time_axis,
                          kn_tensor *out);

typedef enum kn_tfidf_mode { KN_TFIDF_TF, KN_TFIDF_IDF, KN_TFIDF_TFIDF } kn_tfidf_mode;

typedef struct kn_tfidf_params {
    kn_tfidf_mode mode;
    int64_t min_gram, max_gram, max_skip;
    const int64_t *pool;    int64_t n_pool;     /* n-grams, grouped by size */
    const int64_t *counts;  int64_t n_counts;   /* start of size i+1 in pool */
    const int64_t *indexes; int64_t n_indexes;  /* output column of each n-gram */
    const float *weights;   int64_t n_weights;  /* per output column, or none */
    int64_t out_size;                           /* max(indexes) + 1 */
} kn_tfidf_params;

/* N-gram counts (weighted per mode) of the integer rows of x ([C] or
 * [B, C]) into the preallocated out ([out_size] or [B, out_size]). */
int kn_k_tfidf(const kn_tensor *x, const kn_tfidf_params *p, kn_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
