/*
 * k_misc.h — plain C reference kernels for the rarer ops of the 'misc'
 * family. Kernels take kn_tensor and plain parameters (no IR); the caller
 * allocates the output unless a kernel says it allocates it.
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

typedef enum kn_window_kind { KN_WINDOW_HANN, KN_WINDOW_HAMMING, KN_WINDOW_BLACKMAN } kn_window_kind;

/* Fills the preallocated 1-D out with a window of its length (periodic: the
 * denominator is N, else N - 1). */
int kn_k_window(kn_window_kind kind, bool periodic, kn_tensor *out);

/* Center crop / zero pad of x to out's shape (same rank): along each axis the
 * window starts at floor((in - out) / 2) (crop) or is placed at
 * floor((out - in) / 2) (pad). */
int kn_k_center_crop_pad(const kn_tensor *x, kn_tensor *out);

/* Reverses the first lens[b] steps along time_axis of each batch b (along
 * batch_axis); lens is an integer tensor of dims[batch_axis] entries. */
int kn_k_reverse_sequence(const kn_tensor *x, const kn_tensor *lens, int batch_axis, int time_axis,
                          kn_tensor *out);

typedef enum kn_gs_mode { KN_GS_NEAREST, KN_GS_LINEAR, KN_GS_CUBIC } kn_gs_mode;
typedef enum kn_gs_pad { KN_GS_ZEROS, KN_GS_BORDER, KN_GS_REFLECTION } kn_gs_pad;

/* GridSample: x (N, C, D1..Dk), grid (N, O1..Ok, k) with coordinates in
 * [-1, 1] ordered innermost dim first; out (N, C, O1..Ok) preallocated. */
int kn_k_grid_sample(const kn_tensor *x, const kn_tensor *grid, kn_gs_mode mode, kn_gs_pad pad,
                     bool align_corners, kn_tensor *out);

/* NonMaxSuppression: boxes (B, S, 4), scores (B, C, S). Allocates out
 * (i64 [count, 3] of batch, class, box). Only boxes scoring above
 * score_threshold (when has_score_threshold) are candidates; a candidate is
 * dropped when its IoU with a kept box exceeds iou_threshold. */
int kn_k_nms(const kn_tensor *boxes, const kn_tensor *scores, int64_t max_per_class,
             double iou_threshold, bool has_score_threshold, double score_threshold,
             bool center_point_box, kn_tensor *out);

/* ---- recurrent networks ----------------------------------------------------------------- */

typedef enum kn_rnn_kind { KN_RNN_SIMPLE, KN_RNN_GRU, KN_RNN_LSTM } kn_rnn_kind;

typedef enum kn_rnn_act {
    KN_ACT_TANH, KN_ACT_SIGMOID, KN_ACT_RELU, KN_ACT_AFFINE, KN_ACT_LEAKYRELU,
    KN_ACT_THRESHOLDEDRELU, KN_ACT_SCALEDTANH, KN_ACT_HARDSIGMOID, KN_ACT_ELU,
    KN_ACT_SOFTSIGN, KN_ACT_SOFTPLUS,
} kn_rnn_act;

typedef struct kn_rnn_params {
    kn_rnn_kind kind;
    int64_t hidden;
    int num_dir;              /* 1 or 2 */
    bool reverse;             /* with num_dir 1: run backwards */
    int layout;               /* 0: X (T, B, I); 1: X (B, T, I) */
    bool linear_before_reset; /* GRU */
    bool input_forget;        /* LSTM: forget gate = 1 - input gate */
    double clip;              /* > 0: gate pre-activations clipped to [-clip, clip] */
    kn_rnn_act act[2][3];     /* per direction: f, g, h (as many as the kind uses) */
    double alpha[2][3], beta[2][3];
} kn_rnn_params;

/* One activation of a recurrent op, in double (alpha and beta as ONNX's). */
double kn_k_rnn_act(kn_rnn_act a, double x, double alpha, double beta);

/* RNN / GRU / LSTM as ONNX defines them (gate orders z,r,h and i,o,f,c).
 * B, seq_lens, init_h, init_c and P may be NULL; Y, Y_h, Y_c may be NULL
 * (not wanted) or preallocated zeroed with the ONNX shapes for p->layout. */
int kn_k_rnn(const kn_rnn_params *p, const kn_tensor *X, const kn_tensor *W, const kn_tensor *R,
             const kn_tensor *B, const kn_tensor *seq_lens, const kn_tensor *init_h,
             const kn_tensor *init_c, const kn_tensor *P, kn_tensor *Y, kn_tensor *Y_h, kn_tensor *Y_c);

/* ---- spectral ------------------------------------------------------------------------------- */

/* DFT of x (..., n along axis, ..., 1 or 2 real/imaginary) with length L
 * along `axis` (zero-padded or truncated); inverse divides by L. out is
 * preallocated: x's dims with dims[axis] = onesided ? L/2+1 : L, last = 2. */
int kn_k_dft(const kn_tensor *x, int axis, int64_t L, bool inverse, bool onesided, kn_tensor *out);

/* STFT of signal (B, len, 1 or 2): frames of frame_length every step,
 * weighted by window (frame_length entries) or 1 if NULL. out preallocated
 * (B, frames, onesided ? frame_length/2+1 : frame_length, 2). */
int kn_k_stft(const kn_tensor *signal, int64_t step, int64_t frame_length, const kn_tensor *window,
              bool onesided, kn_tensor *out);

/* The mel filter bank of ONNX's MelWeightMatrix into the preallocated out
 * (dft_length/2+1, num_mel_bins). */
int kn_k_mel_weight_matrix(int64_t num_mel_bins, int64_t dft_length, double sample_rate,
                           double lower_hz, double upper_hz, kn_tensor *out);

#ifdef __cplusplus
}
#endif
#endif
