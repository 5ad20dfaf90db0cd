/*
 * frontend/onnx/onnx_internal.h — helpers shared by the importer's files
 * (not part of the public API; includes the generated protobuf-c header,
 * which only kiln_frontend's own sources can see).
 */
#ifndef KILN_ONNX_INTERNAL_H
#define KILN_ONNX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ir.h"
#include "onnx/onnx.pb-c.h"

/* Protobuf cannot encode a message over 2 GiB; bigger models keep their
 * weights in external data files. */
#define KN_ONNX_MAX_PROTO_BYTES ((size_t)INT32_MAX)

/* Name for an ONNX TensorProto.DataType value, including the ones kiln
 * does not support ("complex64", "float8e4m3fn"); NULL if ONNX has none. */
const char *kn_onnx_dtype_name(int dt);

/* Converts a TensorProto into *out (an owned kn_tensor; zeroed on failure).
 * `what` names the tensor in messages ("initializer 'w'"). base_dir is where
 * external data files live (NULL: external data is an error). */
int kn_onnx_tensor_from_proto(const Onnx__TensorProto *tp, const char *what, const char *base_dir,
                              kn_tensor *out);

/* Reads a whole file into a malloc'd buffer (*out_data, *out_len), refusing
 * files over max_len bytes. Messages name the path. */
int kn_onnx_read_file(const char *path, size_t max_len, uint8_t **out_data, size_t *out_len);

/* Checks that the protobuf wire data of a ModelProto does not nest
 * graphs/types deeper than the importer handles (protobuf-c recurses on the
 * C stack while unpacking, so a hostile file could otherwise overflow it). */
int kn_onnx_check_nesting(const uint8_t *data, size_t len);

#endif
