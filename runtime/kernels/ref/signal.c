/* Reference kernels of the 'signal' family (k_signal.h): the windows,
 * DFT, STFT, MelWeightMatrix. */
#include "k_signal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- windows -------------------------------------------------------------------------- */

int kn_k_window(kn_window_kind kind, bool periodic, kn_tensor *out)
{
    int64_t n = kn_tensor_numel(out);
    double den = (double)(periodic ? n : n - 1);
    for (int64_t i = 0; i < n; i++) {
        double a = 2 * M_PI * (double)i / den, v;
        if (kind == KN_WINDOW_HANN) v = 0.5 - 0.5 * cos(a);
        else if (kind == KN_WINDOW_HAMMING) v = 25.0 / 46.0 - (21.0 / 46.0) * cos(a);
        else v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
        /* A one-point symmetric window divides 0 by 0; torch gives 1. */
        if (den == 0) v = 1.0;
        kn_store_f64(out->dtype, out->data, (size_t)i, v);
    }
    return KN_OK;
}

/* ---- spectral ------------------------------------------------------------------------------- */

/* One DFT line: in[j] (j < n, complex as re/im pairs at stride `is`) to
 * nout bins at stride `os`; the angle uses (j*k) mod L to stay exact. */
static void dft_line(const kn_tensor *x, size_t ibase, int64_t is, int64_t n, int comps, int64_t L,
                     bool inverse, const double *w, kn_tensor *out, size_t obase, int64_t os, int64_t nout)
{
    int64_t m = n < L ? n : L;
    double sign = inverse ? 1.0 : -1.0;
    for (int64_t k = 0; k < nout; k++) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < m; j++) {
            size_t e = ibase + (size_t)(j * is) * (size_t)comps;
            double a = kn_load_f64(x->dtype, x->data, e), b = comps == 2 ? kn_load_f64(x->dtype, x->data, e + 1) : 0;
            if (w) {
                a *= w[j];
                b *= w[j];
            }
            double ang = sign * 2 * M_PI * (double)((j * k) % L) / (double)L;
            double c = cos(ang), s = sin(ang);
            re += a * c - b * s;
            im += a * s + b * c;
        }
        if (inverse) {
            re /= (double)L;
            im /= (double)L;
        }
        size_t o = obase + (size_t)(k * os) * 2;
        kn_store_f64(out->dtype, out->data, o, re);
        kn_store_f64(out->dtype, out->data, o + 1, im);
    }
}

/* One inverse real DFT line (numpy's irfft): n one-sided bins (re/im pairs at
 * stride `is`) to L real samples at stride `os`. Bins past L/2 are dropped,
 * missing ones are zero; the imaginary parts of bin 0 and (L even) bin L/2
 * do not contribute, as the Hermitian extension implies. */
static void irdft_line(const kn_tensor *x, size_t ibase, int64_t is, int64_t n, int comps, int64_t L, kn_tensor *out,
                       size_t obase, int64_t os)
{
    int64_t m = L / 2 + 1 < n ? L / 2 + 1 : n;
    for (int64_t j = 0; j < L; j++) {
        double acc = 0;
        for (int64_t k = 0; k < m; k++) {
            size_t e = ibase + (size_t)(k * is) * (size_t)comps;
            double a = kn_load_f64(x->dtype, x->data, e), b = comps == 2 ? kn_load_f64(x->dtype, x->data, e + 1) : 0;
            double ang = 2 * M_PI * (double)((j * k) % L) / (double)L;
            bool self_conj = k == 0 || (L % 2 == 0 && k == L / 2);
            double t = a * cos(ang) - b * sin(ang);
            acc += self_conj ? (k == 0 ? a : a * cos(ang)) : 2 * t;
        }
        kn_store_f64(out->dtype, out->data, obase + (size_t)(j * os), acc / (double)L);
    }
}

int kn_k_dft(const kn_tensor *x, int axis, int64_t L, bool inverse, bool onesided, kn_tensor *out)
{
    int r = x->rank;
    if (r < 2 || axis < 0 || axis >= r - 1) return kn_error(KN_ERR_INVALID, "DFT: axis %d invalid for rank %d", axis, r);
    int comps = (int)x->dims[r - 1];
    if (comps != 1 && comps != 2) return kn_error(KN_ERR_INVALID, "DFT: last dim must be 1 or 2, got %d", comps);
    if (L <= 0) return kn_error(KN_ERR_INVALID, "DFT: length %lld must be positive", (long long)L);
    int64_t outer = 1, inner = 1, n = x->dims[axis], nout = onesided ? L / 2 + 1 : L;
    for (int i = 0; i < axis; i++) outer *= x->dims[i];
    for (int i = axis + 1; i < r - 1; i++) inner *= x->dims[i];
    if (inverse && onesided) { /* one-sided spectrum in, L real samples out */
        if (kn_tensor_numel(out) != outer * L * inner) return kn_error(KN_ERR_INTERNAL, "DFT: output has the wrong size");
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++)
                irdft_line(x, (size_t)((o * n * inner + i) * comps), inner, n, comps, L, out,
                           (size_t)(o * L * inner + i), inner);
        return KN_OK;
    }
    if (kn_tensor_numel(out) != outer * nout * inner * 2) return kn_error(KN_ERR_INTERNAL, "DFT: output has the wrong size");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            dft_line(x, (size_t)((o * n * inner + i) * comps), inner, n, comps, L, inverse, NULL, out,
                     (size_t)((o * nout * inner + i) * 2), inner, nout);
    return KN_OK;
}

int kn_k_stft(const kn_tensor *signal, int64_t step, int64_t frame_length, const kn_tensor *window,
              bool onesided, kn_tensor *out)
{
    if (signal->rank != 3 || (signal->dims[2] != 1 && signal->dims[2] != 2))
        return kn_error(KN_ERR_INVALID, "STFT: signal must be (batch, length, 1 or 2)");
    int64_t B = signal->dims[0], len = signal->dims[1];
    int comps = (int)signal->dims[2];
    if (step <= 0 || frame_length <= 0 || frame_length > len)
        return kn_error(KN_ERR_INVALID, "STFT: frame_step %lld / frame_length %lld invalid for length %lld",
                        (long long)step, (long long)frame_length, (long long)len);
    if (window && kn_tensor_numel(window) != frame_length)
        return kn_error(KN_ERR_INVALID, "STFT: window has %lld entries, frame_length is %lld",
                        (long long)kn_tensor_numel(window), (long long)frame_length);
    int64_t frames = 1 + (len - frame_length) / step, bins = onesided ? frame_length / 2 + 1 : frame_length;
    if (kn_tensor_numel(out) != B * frames * bins * 2) return kn_error(KN_ERR_INTERNAL, "STFT: output has the wrong size");
    double *w = malloc(sizeof *w * (size_t)frame_length);
    if (!w) return kn_error(KN_ERR_NOMEM, "STFT: out of memory");
    for (int64_t j = 0; j < frame_length; j++) w[j] = window ? kn_load_f64(window->dtype, window->data, (size_t)j) : 1.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t f = 0; f < frames; f++)
            dft_line(signal, (size_t)((b * len + f * step) * comps), 1, frame_length, comps, frame_length, false, w,
                     out, (size_t)((b * frames + f) * bins * 2), 1, bins);
    free(w);
    return KN_OK;
}

int kn_k_mel_weight_matrix(int64_t num_mel_bins, int64_t dft_length, double sample_rate,
                           double lower_hz, double upper_hz, kn_tensor *out)
{
    int64_t nspec = dft_length / 2 + 1;
    if (num_mel_bins <= 0 || dft_length <= 0 || sample_rate <= 0 || num_mel_bins > (1 << 20))
        return kn_error(KN_ERR_INVALID, "MelWeightMatrix: num_mel_bins, dft_length and sample_rate must be positive");
    if (kn_tensor_numel(out) != nspec * num_mel_bins) return kn_error(KN_ERR_INTERNAL, "MelWeightMatrix: output has the wrong size");
    int64_t *fb = malloc(sizeof *fb * (size_t)(num_mel_bins + 2));
    if (!fb) return kn_error(KN_ERR_NOMEM, "MelWeightMatrix: out of memory");
    double lo = 2595 * log10(1 + lower_hz / 700), hi = 2595 * log10(1 + upper_hz / 700);
    /* The step divides by the number of points (num_mel_bins + 2), as ONNX's reference does. */
    double step = (hi - lo) / (double)(num_mel_bins + 2);
    for (int64_t i = 0; i < num_mel_bins + 2; i++) {
        double hz = 700 * (pow(10, ((double)i * step + lo) / 2595) - 1);
        double bin = floor((double)(dft_length + 1) * hz / sample_rate);
        if (!(fabs(bin) < 1e15)) {
            free(fb);
            return kn_error(KN_ERR_INVALID, "MelWeightMatrix: edge frequencies give no finite bins");
        }
        fb[i] = (int64_t)bin;
    }
    for (int64_t i = 0; i < num_mel_bins; i++) {
        int64_t l = fb[i], c = fb[i + 1], h = fb[i + 2];
        if (l < 0 || h >= nspec + 1 || c >= nspec || l > c || c > h) {
            free(fb);
            return kn_error(KN_ERR_INVALID, "MelWeightMatrix: mel band %lld falls outside the spectrum", (long long)i);
        }
        if (c == l) kn_store_f64(out->dtype, out->data, (size_t)(c * num_mel_bins + i), 1);
        else
            for (int64_t j = l; j <= c; j++)
                kn_store_f64(out->dtype, out->data, (size_t)(j * num_mel_bins + i), (double)(j - l) / (double)(c - l));
        for (int64_t j = c; j < h && h > c; j++)
            kn_store_f64(out->dtype, out->data, (size_t)(j * num_mel_bins + i), (double)(h - j) / (double)(h - c));
    }
    free(fb);
    return KN_OK;
}
