/*
 * frontend/onnx/onnx_import.h — ONNX → kiln IR.
 *
 *     kn_model *m = NULL;
 *     if (kn_onnx_load_file("model.onnx", &m)) {
 *         fprintf(stderr, "%s\n", kn_last_error());   // names file and node
 *         return 1;
 *     }
 *     ...
 *     kn_model_free(m);
 */
#ifndef KILN_ONNX_IMPORT_H
#define KILN_ONNX_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads an ONNX model file (external data resolved relative to its folder).
 * On success *out_model is a new model the caller frees with kn_model_free;
 * on failure it is NULL and kn_last_error() names the file and problem. */
int kn_onnx_load_file(const char *path, kn_model **out_model);

/* Loads a model from bytes. base_dir is where external data lives (NULL:
 * external data is an error). The bytes are not kept. */
int kn_onnx_load_bytes(const void *data, size_t len, const char *base_dir, kn_model **out_model);

/* Reads a serialized TensorProto file (as in the ONNX test suite's
 * input_0.pb) into an owned tensor *out; *out_name receives a malloc'd copy
 * of the tensor's name ("" if none) if out_name is non-NULL. */
int kn_onnx_load_tensor_file(const char *path, kn_tensor *out, char **out_name);

#ifdef __cplusplus
}
#endif
#endif
