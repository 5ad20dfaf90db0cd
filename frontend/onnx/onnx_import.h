/*
 * frontend/onnx/onnx_import.h — ONNX → kiln IR.
 *
 *     kn_model *m = NULL;
 *     if (kn_onnx_load_file("model.onnx", &m)) {
 *         fprintf(stderr, "%s\n", kn_last_error());   // names file and node
 *         return 1;
 *     }
 *     if (kn_onnx_check_supported(m)) ...             // before running it
 *     ...
 *     kn_model_free(m);
 *
 * What the importer guarantees: every graph (subgraphs of If/Loop/Scan too)
 * is topologically sorted; node names are unique per graph (empty or
 * repeated ONNX names become "<name or op>_<k>"); initializers are copied
 * into model-owned tensors (an initializer that is also a graph input is a
 * constant listed in graph->inputs, flagged INITIALIZER | GRAPH_INPUT);
 * value_info and output types fill in values nothing else types; a subgraph
 * output that is an outer value gets an Identity node of its own. Messages
 * start with the file ("<memory>" for kn_onnx_load_bytes), then the node
 * ("node 'if0' (If): attribute 'then_branch': node 'n3' (Add): ...").
 * Refused: sequence/map/optional/sparse values, string and float8 tensors,
 * sparse initializers, ref_attr_name, external data outside the model's
 * folder, rank > KN_MAX_RANK, subgraphs nested over 32 deep.
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
 * of the tensor's name ("" if none) if out_name is non-NULL. A file holding
 * a SequenceProto or OptionalProto fails with KN_ERR_UNSUPPORTED and the
 * message "<path>: holds a SequenceProto or OptionalProto, not a TensorProto;
 * kiln supports only tensors". */
int kn_onnx_load_tensor_file(const char *path, kn_tensor *out, char **out_name);

/* Like kn_onnx_load_tensor_file for a TensorProto held in memory (messages
 * name "<memory>"; external data is refused). */
int kn_onnx_load_tensor_bytes(const void *data, size_t len, kn_tensor *out, char **out_name);

/* Checks that every node of m (subgraphs included) has an op kiln declares.
 * On failure (KN_ERR_UNSUPPORTED) one message lists them all, grouped:
 * "model.onnx: 2 unsupported ops (3 nodes): Foo (2 nodes: 'a', 'b'), Bar (1 node: 'c')".
 * kn_onnx_load_* succeed on such models so that `kiln inspect` can show them. */
int kn_onnx_check_supported(const kn_model *m);

#ifdef __cplusplus
}
#endif
#endif
