/*
 * k_signal.h — plain C reference kernels of the 'signal' family: the
 * windows, DFT, STFT, MelWeightMatrix (signal.c), into outputs the caller
 * allocated.
 */
#ifndef KILN_K_SIGNAL_H
#define KILN_K_SIGNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_window_kind { KN_WINDOW_HANN, KN_WINDOW_HAMMING, KN_WINDOW_BLACKMAN } kn_window_kind;

/* Fills the preallocated 1-D out with a window of its length (periodic: the
 * denominator is N, else N - 1). */
int kn_k_window(kn_window_kind kind, bool periodic, kn_tensor *out);

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
