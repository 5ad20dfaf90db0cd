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

/* One attribute that ONNX defines for an op: its AttributeProto type and
 * the opsets [first, last] of the op's versions that have it (last 0: up to
 * the newest). The table (onnx_attr_schema.c) is sorted by (op, name). */
typedef struct kn_onnx_attr_rule {
    const char *op, *name;
    int type;
    int first, last;
} kn_onnx_attr_rule;
extern const kn_onnx_attr_rule kn_onnx_attr_rules[];
extern const int kn_onnx_n_attr_rules;

/* ONNX's name of an AttributeProto type ("INTS"); "?" when out of range. */
const char *kn_onnx_attr_type_name(int type);

/* Checks n's attributes against ONNX's schema of its op at `opset`, as
 * onnxruntime does: an attribute ONNX does not define for that version, or
 * one of another type, is an error naming the node, the attribute, and the
 * expected and found types. Ops outside the default domain are not checked. */
int kn_onnx_check_node_attrs(const kn_node *n, int64_t opset);

/* The default-domain opsets kiln imports: those onnx 1.15 defines plus 21
 * (whose 4-bit types kiln supports), as onnxruntime 1.18 does. */
#define KN_ONNX_MIN_OPSET 1
#define KN_ONNX_MAX_OPSET 25

/* The most inputs or outputs one node may have: a compiled artifact records
 * each node that calls a runtime kernel with at most this many
 * (MAX_OPNODE_ARITY of runtime/src/meta.c), so a bigger node (Sum of 20,000
 * tensors) is refused at import rather than by the artifact writer. */
#define KN_ONNX_MAX_ARITY 1000

#endif
