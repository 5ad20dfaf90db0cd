/*
 * frontend/onnx/onnx_export.h — kiln IR → ONNX (the other direction of
 * onnx_import.h): for `kiln export` (a QDQ model with kiln's calibrated
 * scales, which onnxruntime and PyTorch read) and for inspecting what the
 * passes made of a model.
 *
 *     kn_model *m = ...imported, passes run, quantized...;
 *     if (kn_onnx_save_file(m, "out.onnx")) {
 *         fprintf(stderr, "%s\n", kn_last_error());   // names the file, node or value
 *         return 1;
 *     }
 *
 * What is written: every node with its attributes (all kinds, subgraphs of
 * If/Loop/Scan recursively), in graph order; constants as initializers with
 * raw_data (little-endian, as kiln holds them; only those something reads,
 * or that are graph inputs or outputs); graph inputs and outputs with their
 * dtypes and shapes (static dims, symbolic names, unknown dims); value_info
 * for every other value whose dtype is known; the model's opset imports (a
 * domain a node uses but the model does not import is added at version 1).
 * Refused: string tensors and a serialized model over protobuf's 2 GiB
 * (external data is not written).
 */
#ifndef KILN_ONNX_EXPORT_H
#define KILN_ONNX_EXPORT_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Serializes m into a malloc'd buffer (*out_data, *out_len) that the caller
 * frees. m is only read. On failure *out_data is NULL and kn_last_error()
 * names the node or value that could not be written. */
int kn_onnx_save_bytes(const kn_model *m, uint8_t **out_data, size_t *out_len);

/* Writes m to path atomically: into a temporary file beside it, synced,
 * then renamed over path; on any failure nothing is left behind and path is
 * untouched. Messages start with the path. */
int kn_onnx_save_file(const kn_model *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif
