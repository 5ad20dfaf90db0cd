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

/* Checks that every node of m (subgraphs included) has an op kiln declares.
 * On failure (KN_ERR_UNSUPPORTED) one message lists them all, grouped:
 * "model.onnx: 2 unsupported ops (3 nodes): Foo (2 nodes: 'a', 'b'), Bar (1 node: 'c')".
 * kn_onnx_load_* succeed on such models so that `kiln inspect` can show them. */
int kn_onnx_check_supported(const kn_model *m);

#ifdef __cplusplus
}
#endif
#endif
