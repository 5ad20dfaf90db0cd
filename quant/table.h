/*
 * quant/table.h — the calibration table: what `kiln calibrate` measured and
 * `kiln compile --quantize static-int8 --calib TABLE.json` reads.
 *
 *     kn_calib_table t = {0};
 *     if (kn_calib_table_read("resnet.calib.json", &t)) { ...kn_last_error()... }
 *     const kn_calib_entry *e = kn_calib_table_find(&t, "relu_3");
 *     ... e->scale, e->zero_point ...
 *     kn_calib_table_free(&t);
 *
 * The file is JSON, written with a fixed layout so that the same data gives
 * the same bytes (floats as %.9g, keys in the order below, tensors in graph
 * order), through a temporary file renamed into place:
 *
 *   {
 *     "format": "kiln-calib",
 *     "version": 1,
 *     "model_hash": "0123456789abcdef",      FNV-1a 64 of the ONNX file's bytes
 *     "method": "percentile",                 minmax | percentile | entropy | mse
 *     "percentile": 99.999,                   (only for percentile)
 *     "per_channel": false,                   weights of MatMul/Gemm per output channel
 *     "samples": 100,
 *     "keep_float": ["conv_1", "Sigmoid"],    node names or op types left in float
 *     "tensors": {
 *       "x": {"min": 0, "max": 1, "scale": 0.00392156886, "zero_point": 0, "dtype": "u8",
 *             "hist": {"count": 15052800, "bins": 2048, "range": 1}},
 *       ...
 *     }
 *   }
 *
 * The reader is strict: an unknown or missing key, a wrong type, a scale
 * that is not a positive finite number, a zero point outside its dtype, a
 * tensor named twice or another format or version is refused, the message
 * naming the file and the field ("t.json: tensors.relu_3.scale: ...").
 */
#ifndef KILN_QUANT_TABLE_H
#define KILN_QUANT_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/dtype.h"
#include "kiln/status.h"
#include "observer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KN_CALIB_FORMAT "kiln-calib"
#define KN_CALIB_VERSION 1

typedef struct kn_calib_entry {
    char *name;         /* malloc'd */
    float min, max;     /* the range the method chose */
    float scale;
    int32_t zero_point;
    kn_dtype dtype;     /* KN_U8 (asymmetric) or KN_I8 (symmetric) */
    uint64_t count;     /* histogram summary */
    int bins;
    double range;       /* R: the histogram covers [-R, R) */
} kn_calib_entry;

typedef struct kn_calib_table {
    uint64_t model_hash;
    kn_calib_method method;
    double percentile;  /* for KN_CALIB_PERCENTILE */
    bool per_channel;
    uint64_t samples;
    char **keep_float;  /* malloc'd strings */
    int n_keep;
    kn_calib_entry *tensors;
    int n_tensors, cap_tensors;
} kn_calib_table;

/* FNV-1a 64 of a file's bytes (the table's model_hash). */
int kn_calib_hash_file(const char *path, uint64_t *out_hash);

/* Appends an entry (name copied). */
int kn_calib_table_add(kn_calib_table *t, const kn_calib_entry *e);
/* Appends a keep_float item (copied). */
int kn_calib_table_add_keep(kn_calib_table *t, const char *item);
/* The entry named name, or NULL. */
const kn_calib_entry *kn_calib_table_find(const kn_calib_table *t, const char *name);
/* Frees what t owns and zeroes it. */
void kn_calib_table_free(kn_calib_table *t);

/* The table as JSON text (malloc'd, NUL-terminated) in the fixed layout. */
int kn_calib_table_format(const kn_calib_table *t, char **out_text);
/* Writes the table to path atomically (temporary file + rename). */
int kn_calib_table_write(const char *path, const kn_calib_table *t);
/* Parses JSON text (source names it in errors) into *out (zeroed first). */
int kn_calib_table_parse(const char *text, size_t len, const char *source, kn_calib_table *out);
/* Reads and parses a table file. */
int kn_calib_table_read(const char *path, kn_calib_table *out);

#ifdef __cplusplus
}
#endif
#endif
