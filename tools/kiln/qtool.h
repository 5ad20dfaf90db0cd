/*
 * tools/kiln/qtool.h — what `kiln calibrate` and `kiln compare` share:
 * streaming calibration data (qdata.c) and compiling a model to a
 * temporary artifact that also outputs the tensors quantization covers
 * (qprobe.c).
 *
 * Data (`--data`), one sample at a time, never the whole set in memory:
 *   DIR             a folder of <input>_<index>.npy files, one per model
 *                   input per sample: x_0.npy, x_1.npy, ... (index: decimal,
 *                   samples in increasing index order; every index must have
 *                   every input). In <input>, characters other than letters,
 *                   digits, '_', '-' and '.' are written as '_'.
 *   NAME=FILE.npy   one file per input holding all samples along a leading
 *                   axis: x.npy of shape [S, 1, 3, 224, 224] is S samples of
 *                   a [1, 3, 224, 224] input; FILE.npy alone for a
 *                   one-input model. Only the header and one sample's bytes
 *                   are read at a time.
 */
#ifndef KILN_TOOLS_QTOOL_H
#define KILN_TOOLS_QTOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "ir.h"
#include "kiln/kiln.h"

typedef struct kn_samples kn_samples;

/* Opens the data named by specs[0..n_specs) for inputs names[0..n). */
int kn_samples_open(int n_specs, char *const *specs, int n, const char *const *names, kn_samples **out);
/* Number of samples. */
int64_t kn_samples_count(const kn_samples *s);
/* Reads sample i (0-based, in order) into out[0..n) (owned; the caller frees). */
int kn_samples_read(kn_samples *s, int64_t i, kn_tensor *out);
void kn_samples_close(kn_samples *s);

/* A model compiled to a temporary artifact. */
typedef struct kn_qprobe {
    char dir[4200];           /* temporary folder, removed by kn_qprobe_free */
    kn_artifact *art;
    kn_session *s;
    int n_in, n_out;          /* the artifact's */
    const char **in_names;    /* the artifact's input names (owned by art) */
    int n_model_out;          /* the model's own outputs: art outputs [0, n_model_out) */
    int n_obs;                /* observed tensors */
    char **obs_names;         /* malloc'd */
    int *obs_out;             /* artifact output index of each, or -(1 + input index) for a graph input */
    double compile_s;
} kn_qprobe;

typedef enum { KN_PROBE_NONE, KN_PROBE_SELECT, KN_PROBE_NAMES } kn_probe_mode;

typedef struct kn_probe_opts {
    kn_probe_mode mode;        /* NONE: the model as is; SELECT: kn_quant_select's tensors; NAMES: names[] */
    int n_keep;                /* SELECT: nodes left in float */
    const char *const *keep;
    int n_names;               /* NAMES: tensors to output (those the prepared graph lacks are skipped) */
    const char *const *names;
    int threads;               /* session threads (>= 1) */
    int n_shapes;              /* --shape pins NAME=AxB from the data */
    char **shapes;
} kn_probe_opts;

/* Compiles model (ONNX path) with opts into a temporary artifact (-O3,
 * native) and opens a session. SELECT and NAMES run KN_QUANT_PREPASSES
 * first, so that names match what kiln compile --quantize sees. */
int kn_qprobe_build(const char *model, const kn_probe_opts *o, kn_qprobe *out);
/* Opens an existing artifact (for kiln compare with ART.so). */
int kn_qprobe_open(const char *art, int threads, kn_qprobe *out);
void kn_qprobe_free(kn_qprobe *p);

/* --shape specs NAME=AxBxC from the first sample of data for names[0..n):
 * the model's symbolic dims are pinned to what the data holds. specs and
 * their strings are malloc'd (free with kn_free_shape_specs). */
int kn_shape_specs_from(kn_samples *s, int n, const char *const *names, char ***out_specs);
void kn_free_shape_specs(int n, char **specs);

/* The model's inputs that need data (no initializer): names in the
 * model's arena. */
int kn_model_data_inputs(const char *model, const char ***out_names, int *out_n, kn_model **out_model);

/* Progress "\r<verb>: i/n samples" on stderr, only when it is a terminal. */
void kn_progress(const char *verb, int64_t i, int64_t n);

#endif
