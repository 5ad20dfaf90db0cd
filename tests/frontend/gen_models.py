#!/usr/bin/env python3
"""Writes the small ONNX models that tests/frontend/test_import.c loads.

Usage: gen_models.py OUT_DIR

Each model exercises one importer feature or one malformed-input case; the C
test asserts the exact error text for the bad ones. Run at test time into the
build folder (nothing generated is committed).
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def vi(name, dt=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dt, shape)


def model(nodes, inputs, outputs, inits=(), opsets=OPSET, name="g", **kw):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits), **kw)
    m = helper.make_model(g, opset_imports=opsets, producer_name="gen_models", producer_version="1.0")
    m.ir_version = 8
    return m


def save(out, name, m):
    with open(os.path.join(out, name), "wb") as f:
        f.write(m.SerializeToString())


def raw_tensor(name, dt, dims, raw):
    t = TensorProto()
    t.name, t.data_type = name, dt
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def typed_tensor(name, dt, dims, field, values):
    t = TensorProto()
    t.name, t.data_type = name, dt
    t.dims.extend(dims)
    getattr(t, field).extend(values)
    return t


def ext_tensor(name, dims, location, offset=None, length=None):
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def encodings():
    """One initializer per TensorProto data field and dtype that uses it."""
    f16 = np.array([1.5, -2.0], np.float16).view(np.uint16).tolist()
    bf16 = [0x3FC0, 0xC000]  # 1.5, -2.0
    inits = [
        typed_tensor("f32", TensorProto.FLOAT, [2, 2], "float_data", [1, 2, 3, 4]),
        typed_tensor("i32", TensorProto.INT32, [3], "int32_data", [-1, 0, 7]),
        typed_tensor("i8", TensorProto.INT8, [2], "int32_data", [-128, 127]),
        typed_tensor("u8", TensorProto.UINT8, [2], "int32_data", [0, 255]),
        typed_tensor("i16", TensorProto.INT16, [2], "int32_data", [-300, 300]),
        typed_tensor("u16", TensorProto.UINT16, [2], "int32_data", [0, 65535]),
        typed_tensor("b", TensorProto.BOOL, [3], "int32_data", [1, 0, 1]),
        typed_tensor("f16", TensorProto.FLOAT16, [2], "int32_data", f16),
        typed_tensor("bf16", TensorProto.BFLOAT16, [2], "int32_data", bf16),
        typed_tensor("i4", 22, [3], "int32_data", [0x21, 0x0F]),  # 1, 2, -1 packed
        typed_tensor("i64", TensorProto.INT64, [2], "int64_data", [-(2**40), 5]),
        typed_tensor("f64", TensorProto.DOUBLE, [2], "double_data", [0.25, -1e300]),
        typed_tensor("u32", TensorProto.UINT32, [1], "uint64_data", [4000000000]),
        typed_tensor("u64", TensorProto.UINT64, [1], "uint64_data", [2**63 + 1]),
        raw_tensor("raw_f32", TensorProto.FLOAT, [3], np.array([0.5, 1.5, -3], "<f4").tobytes()),
        raw_tensor("raw_i64", TensorProto.INT64, [2], np.array([9, -9], "<i8").tobytes()),
        raw_tensor("raw_u4", 21, [3], bytes([0x21, 0x03])),
        raw_tensor("scalar", TensorProto.FLOAT, [], np.array([42.0], "<f4").tobytes()),
        typed_tensor("empty", TensorProto.FLOAT, [0, 3], "float_data", []),
    ]
    x = vi("x", TensorProto.FLOAT, ["batch", 4])
    # f32 is also a graph input: an overridable initializer
    inputs = [x, vi("f32", TensorProto.FLOAT, [2, 2])]
    n = helper.make_node("Relu", ["x"], ["y"], name="relu0")
    return model([n], inputs, [vi("y", TensorProto.FLOAT, ["batch", 4])], inits)


def attrs():
    sub = helper.make_graph([helper.make_node("Identity", ["a"], ["b"], name="id_in_attr")], "body",
                            [vi("a")], [vi("b")])
    t1 = numpy_helper.from_array(np.array([1, 2, 3], np.int64), "t1")
    t2 = numpy_helper.from_array(np.array([[1.0]], np.float32), "t2")
    n = helper.make_node("AttrHolder", ["x"], ["y"], name="holder", domain="test.domain",
                         f=0.5, i=-7, s=b"hello", t=t1, g=sub, fs=[1.0, 2.5], is_=[3, 4, 5],
                         ss=[b"a", b"bc"], ts=[t1, t2], gs=[sub, sub])
    # helper can't name an attribute "is" via kwargs; rename after the fact
    for a in n.attribute:
        if a.name == "is_":
            a.name = "is"
    return model([n], [vi("x")], [vi("y")], opsets=OPSET + [helper.make_opsetid("test.domain", 1)])


def if_outer():
    """If whose branches read 'outer' (computed in the main graph) and 'w'."""
    then_g = helper.make_graph([helper.make_node("Add", ["outer", "w"], ["t_out"], name="then_add")], "then",
                               [], [vi("t_out", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["outer"], ["e_out"], name="else_neg")], "else",
                               [], [vi("e_out", TensorProto.FLOAT, [2])])
    nodes = [
        helper.make_node("If", ["cond"], ["y"], name="if0", then_branch=then_g, else_branch=else_g),
        helper.make_node("Relu", ["x"], ["outer"], name="relu_outer"),  # after its use: must be sorted first
    ]
    w = numpy_helper.from_array(np.array([10, 20], np.float32), "w")
    return model(nodes, [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])],
                 [vi("y", TensorProto.FLOAT, [2])], [w])


def if_passthrough():
    """The then-branch returns the outer value 'x' itself, with no node."""
    then_g = helper.make_graph([], "then", [], [vi("x", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="else_neg")], "else",
                               [], [vi("e_out", TensorProto.FLOAT, [2])])
    n = helper.make_node("If", ["cond"], ["y"], name="if0", then_branch=then_g, else_branch=else_g)
    return model([n], [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])],
                 [vi("y", TensorProto.FLOAT, [2])])


def unsupported_ops():
    nodes = [
        helper.make_node("Foo", ["x"], ["a"], name="a"),
        helper.make_node("Foo", ["a"], ["b"], name="b"),
        helper.make_node("Bar", ["b"], ["c"], name="c"),
        helper.make_node("Relu", ["c"], ["y"], name="ok"),
    ]
    return model(nodes, [vi("x")], [vi("y")])


def bad_models(out):
    x, y = vi("x"), vi("y")
    save(out, "undefined_input.onnx",
         model([helper.make_node("Add", ["x", "foo"], ["y"], name="n3")], [x], [y]))
    save(out, "duplicate_output.onnx",
         model([helper.make_node("Relu", ["x"], ["y"], name="first"),
                helper.make_node("Neg", ["x"], ["y"], name="second")], [x], [y]))
    save(out, "cycle.onnx",
         model([helper.make_node("Add", ["x", "b"], ["a"], name="ca"),
                helper.make_node("Relu", ["a"], ["b"], name="cb"),
                helper.make_node("Neg", ["b"], ["y"], name="cc")], [x], [y]))
    ident = [helper.make_node("Identity", ["x"], ["y"], name="id")]
    save(out, "unknown_dtype.onnx", model(ident, [x], [y], [typed_tensor("w999", 999, [1], "int32_data", [0])]))
    save(out, "float8_dtype.onnx", model(ident, [x], [y], [raw_tensor("w8", 17, [1], b"\0")]))
    save(out, "string_init.onnx", model(ident, [x], [y], [typed_tensor("names", TensorProto.STRING, [1], "string_data", [b"a"])]))
    save(out, "negative_dim.onnx", model(ident, [x], [y], [typed_tensor("neg", TensorProto.FLOAT, [2, -3], "float_data", [])]))
    save(out, "huge_dims.onnx", model(ident, [x], [y], [typed_tensor("huge", TensorProto.FLOAT, [2**31, 2**31, 2**31], "float_data", [])]))
    save(out, "rank9.onnx", model(ident, [x], [y], [typed_tensor("r9", TensorProto.FLOAT, [1] * 9, "float_data", [1])]))
    save(out, "raw_mismatch.onnx", model(ident, [x], [y], [raw_tensor("short", TensorProto.FLOAT, [4], b"\0" * 12)]))
    save(out, "raw_long.onnx", model(ident, [x], [y], [raw_tensor("long", TensorProto.FLOAT, [4], b"\0" * 20)]))
    seg = raw_tensor("seg", TensorProto.FLOAT, [4], b"\0" * 16)
    seg.segment.begin, seg.segment.end = 0, 4
    save(out, "segment.onnx", model(ident, [x], [y], [seg]))
    save(out, "count_mismatch.onnx", model(ident, [x], [y], [typed_tensor("few", TensorProto.INT64, [3], "int64_data", [1, 2])]))
    save(out, "no_graph.onnx", helper.make_model(helper.make_graph([], "g", [], []), opset_imports=OPSET).__class__())
    ref = helper.make_node("Relu", ["x"], ["y"], name="r")
    a = ref.attribute.add()
    a.name, a.ref_attr_name, a.type = "alpha", "outer_alpha", onnx.AttributeProto.FLOAT
    save(out, "ref_attr.onnx", model([ref], [x], [y]))
    save(out, "seq_input.onnx",
         model(ident, [helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2])], [y]))
    save(out, "bad_output.onnx", model(ident, [x], [vi("nowhere")]))
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32), "sp"),
                                       numpy_helper.from_array(np.array([0], np.int64), "sp_idx"), [4])
    save(out, "sparse_init.onnx", model(ident, [x], [y], sparse_initializer=[sparse]))
    dup = [helper.make_node("Relu", ["x"], ["a"], name="same"), helper.make_node("Neg", ["a"], ["y"], name="same"),
           helper.make_node("Relu", ["x"], ["b"]), helper.make_node("Relu", ["b"], ["c"])]
    save(out, "dup_names.onnx", model(dup, [x], [y, vi("c")]))


def strict_models(out):
    """Models onnxruntime refuses and kiln used to accept (issue 14):
    attributes of the wrong type or unknown to the op, wrong arity, opsets
    out of range or missing, declared output types inference disagrees with."""
    x, y = vi("x"), vi("y")
    x4 = vi("x", TensorProto.FLOAT, [1, 1, 4, 4])
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    conv = lambda **a: model([helper.make_node("Conv", ["x", "w"], ["y"], name="c", **a)], [x4], [vi("y")], [w])
    save(out, "attr_floats.onnx", conv(strides=[2.0, 2.0]))
    save(out, "attr_string.onnx", conv(strides="2"))
    save(out, "attr_unknown.onnx", conv(bogus=[1]))
    save(out, "attr_ok.onnx", conv(strides=[2, 2], pads=[0, 0, 0, 0], auto_pad="NOTSET"))
    save(out, "softmax_axis_string.onnx", model([helper.make_node("Softmax", ["x"], ["y"], name="s", axis="0")], [x], [y]))
    # Pad's 'pads' attribute became an input at opset 11
    save(out, "attr_old_opset.onnx", model([helper.make_node("Pad", ["x"], ["y"], name="p", pads=[0, 0])], [x], [y],
                                            opsets=[helper.make_opsetid("", 17)]))
    save(out, "relu3.onnx", model([helper.make_node("Relu", ["x", "x", "x"], ["y"], name="r")], [x], [y]))
    save(out, "relu0out.onnx", model([helper.make_node("Relu", ["x"], [], name="r"),
                                      helper.make_node("Identity", ["x"], ["y"], name="i")], [x], [y]))
    save(out, "concat0.onnx", model([helper.make_node("Concat", [], ["y"], name="cc", axis=0)], [x], [y]))
    relu = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    save(out, "opset99.onnx", model(relu, [x], [y], opsets=[helper.make_opsetid("", 99)]))
    save(out, "opset_neg.onnx", model(relu, [x], [y], opsets=[helper.make_opsetid("", -5)]))
    save(out, "opset21.onnx", model(relu, [x], [y], opsets=[helper.make_opsetid("", 21)]))
    save(out, "opset_none.onnx", model(relu, [x], [y], opsets=[]))
    save(out, "opset_custom_only.onnx", model(relu, [x], [y], opsets=[helper.make_opsetid("custom.domain", 1)]))
    save(out, "relu_out_i64.onnx", model(relu, [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.INT64, [2])]))
    two = [helper.make_node("Relu", ["x"], ["t"], name="r"), helper.make_node("Identity", ["t"], ["y"], name="i")]
    save(out, "relu_vi_i64.onnx", model(two, [x], [y], value_info=[vi("t", TensorProto.INT64)]))
    save(out, "relu_vi_f32.onnx", model(two, [x], [y], value_info=[vi("t", TensorProto.FLOAT)]))


def external(out):
    """External data inside the folder (two tensors in one file, one in a
    subfolder) and the ways it can go wrong."""
    a = np.arange(6, dtype="<f4")
    b = np.array([7, 8], "<f4")
    with open(os.path.join(out, "weights.bin"), "wb") as f:
        f.write(b"\0" * 16 + a.tobytes() + b.tobytes())
    os.makedirs(os.path.join(out, "data"), exist_ok=True)
    with open(os.path.join(out, "data", "c.bin"), "wb") as f:
        f.write(np.array([1, 2, 3], "<f4").tobytes())
    ident = [helper.make_node("Identity", ["x"], ["y"], name="id")]
    x, y = vi("x"), vi("y")
    save(out, "external.onnx",
         model(ident, [x], [y], [ext_tensor("ea", [2, 3], "weights.bin", 16, 24),
                                 ext_tensor("eb", [2], "weights.bin", 40),
                                 ext_tensor("ec", [3], "data/c.bin")]))
    save(out, "ext_missing.onnx", model(ident, [x], [y], [ext_tensor("em", [2], "nope.bin")]))
    save(out, "ext_dotdot.onnx", model(ident, [x], [y], [ext_tensor("ed", [2], "../secret.bin")]))
    save(out, "ext_abs.onnx", model(ident, [x], [y], [ext_tensor("eabs", [2], "/etc/passwd")]))
    save(out, "ext_short.onnx", model(ident, [x], [y], [ext_tensor("es", [100], "weights.bin")]))
    link = os.path.join(out, "escape_link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("/etc/hostname", link)
    save(out, "ext_symlink.onnx", model(ident, [x], [y], [ext_tensor("esym", [1], "escape_link.bin")]))
    # a FIFO nobody writes to: opening it for reading used to wait forever
    fifo = os.path.join(out, "fifo.bin")
    if os.path.lexists(fifo):
        os.remove(fifo)
    os.mkfifo(fifo)
    save(out, "ext_fifo.onnx", model(ident, [x], [y], [ext_tensor("efifo", [2], "fifo.bin")]))
    save(out, "ext_dir.onnx", model(ident, [x], [y], [ext_tensor("edir", [2], "data")]))


def tensor_files(out):
    t = numpy_helper.from_array(np.array([[1, 2], [3, 4]], np.float32), "input_0")
    with open(os.path.join(out, "tensor.pb"), "wb") as f:
        f.write(t.SerializeToString())
    seq = numpy_helper.from_list([np.array([1.0], np.float32), np.array([2.0], np.float32)], "seq")
    with open(os.path.join(out, "sequence.pb"), "wb") as f:
        f.write(seq.SerializeToString())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    save(out, "encodings.onnx", encodings())
    save(out, "attrs.onnx", attrs())
    save(out, "if_outer.onnx", if_outer())
    save(out, "if_passthrough.onnx", if_passthrough())
    save(out, "unsupported.onnx", unsupported_ops())
    bad_models(out)
    strict_models(out)
    external(out)
    tensor_files(out)


if __name__ == "__main__":
    main()
