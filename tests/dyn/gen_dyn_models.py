#!/usr/bin/env python3
"""Models with dynamic dims for the `kiln compile --max` tests (tests/dyn).

  convnet/  input x [batch,3,16,16] and y [batch,10]: Conv, Relu, MaxPool,
            a strided Conv, BatchNormalization, Transpose, a Reshape whose
            shape is computed from Shape(x) at run time, Gemm, MatMul,
            LayerNormalization, Softmax; dynamic dim `batch`.
  encoder/  a 2-layer BERT-style encoder, input_ids and attention_mask
            [1,seq]: Gather embeddings, position ids sliced by Shape(ids),
            self-attention with head split/merge Reshapes (one computed from
            Shape at run time), LayerNormalization, an erf GELU; dynamic dim
            `seq`.

  yolo_head/ a YOLO-style detection head over 3 scales, input x [batch,3,64,64]:
            per scale a 1x1 Conv, a Reshape whose shape is Concat(Shape(x)[0],
            constants), Transpose, Sigmoid and an anchor grid made of Range,
            Expand, Unsqueeze and Concat pieces that fold to constants; the
            scales are concatenated; dynamic dim `batch` (once a crash in
            kn_run with a dynamic batch).
  conv_residual/ input x [batch,8,8,8]: Conv, Relu, Conv, then the residual
            Add of a Relu of x: two convolutions in rows hand each other their
            activation in oneDNN's layout (once decided differently by the
            two, which gave wrong answers at every batch).
  if_fold/  input x [1,3,H,5] and an If on Shape(x)[2] == 1 whose then branch
            squeezes axis 2 (invalid when H > 1) and whose else branch
            reduces it; compiled with H pinned, for H = 1 and H = 2.

For each model, inputs at several sizes (in_<n>_<name>.npy) and
onnxruntime's outputs for them (out_<n>_<name>.npy).
Usage: gen_dyn_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class Builder:
    def __init__(self, seed):
        self.nodes, self.inits, self.k = [], [], 0
        self.rng = np.random.default_rng(seed)

    def name(self, p):
        self.k += 1
        return f"{p}_{self.k}"

    def const(self, arr, p="c"):
        n = self.name(p)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def weight(self, shape, p="w", scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else shape[0])
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), p)

    def node(self, op, ins, n_out=1, **attrs):
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=self.name("n_" + op), **attrs))
        return outs[0] if n_out == 1 else outs


def convnet():
    b = Builder(1)
    x = "x"
    h = b.node("Conv", [x, b.weight([8, 3, 3, 3]), b.weight([8], scale=0.1)], pads=[1, 1, 1, 1])
    h = b.node("Relu", [h])
    h = b.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.node("Conv", [h, b.weight([16, 8, 3, 3]), b.weight([16], scale=0.1)], pads=[1, 1, 1, 1],
               strides=[2, 2])
    h = b.node("BatchNormalization", [h, b.const(np.linspace(0.5, 1.5, 16, dtype=np.float32)),
                                      b.weight([16], scale=0.1), b.weight([16], scale=0.1),
                                      b.const(np.linspace(0.5, 2.0, 16, dtype=np.float32))])
    h = b.node("Clip", [h, b.const(np.float32(0)), b.const(np.float32(6))])
    h = b.node("Transpose", [h], perm=[0, 2, 3, 1])  # [batch,4,4,16]
    # [batch, 256] with the batch taken from Shape(x): data known only at run time
    n = b.node("Gather", [b.node("Shape", [x]), b.const(np.array([0], np.int64))], axis=0)
    h = b.node("Reshape", [h, b.node("Concat", [n, b.const(np.array([-1], np.int64))], axis=0)])
    h = b.node("Gemm", [h, b.weight([256, 32]), b.weight([32], scale=0.1)])
    h = b.node("Sigmoid", [h])
    h = b.node("MatMul", [h, b.weight([32, 10])])
    h = b.node("Add", [h, "y"])
    h = b.node("LayerNormalization", [h, b.const(np.linspace(0.5, 1.5, 10, dtype=np.float32)),
                                      b.weight([10], scale=0.1)], axis=-1)
    b.nodes.append(helper.make_node("Softmax", [h], ["probs"], name="softmax", axis=1))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16]),
              helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])]
    outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])]
    g = helper.make_graph(b.nodes, "convnet", inputs, outputs, b.inits)

    def feeds(n, rng):
        return {"x": rng.standard_normal((n, 3, 16, 16)).astype(np.float32),
                "y": rng.standard_normal((n, 10)).astype(np.float32)}
    return g, feeds, [1, 3, 8, 20]


def encoder():
    b = Builder(2)
    vocab, hid, heads, ffn, max_pos = 100, 32, 4, 64, 64
    d = hid // heads
    ids, mask = "input_ids", "attention_mask"
    shape_ids = b.node("Shape", [ids])
    seq = b.node("Gather", [shape_ids, b.const(np.array([1], np.int64))], axis=0)
    pos = b.node("Slice", [b.const(np.arange(max_pos, dtype=np.int64)[None]), b.const(np.array([0], np.int64)),
                           seq, b.const(np.array([1], np.int64))])
    h = b.node("Add", [b.node("Gather", [b.weight([vocab, hid], scale=0.5), ids]),
                       b.node("Gather", [b.weight([max_pos, hid], scale=0.5), pos])])
    h = b.node("LayerNormalization", [h, b.const(np.ones(hid, np.float32)), b.const(np.zeros(hid, np.float32))],
               axis=-1)
    m = b.node("Cast", [mask], to=TensorProto.FLOAT)
    m = b.node("Mul", [b.node("Sub", [b.const(np.float32(1)), m]), b.const(np.float32(-10000))])
    m = b.node("Unsqueeze", [m, b.const(np.array([1, 2], np.int64))])  # [1,1,1,seq]
    split = b.const(np.array([0, -1, heads, d], np.int64))
    for _ in range(2):
        def proj(t):
            return b.node("Add", [b.node("MatMul", [t, b.weight([hid, hid])]), b.weight([hid], scale=0.1)])

        def heads_of(t, perm):
            return b.node("Transpose", [b.node("Reshape", [t, split])], perm=perm)
        q = heads_of(proj(h), [0, 2, 1, 3])
        k = heads_of(proj(h), [0, 2, 3, 1])
        v = heads_of(proj(h), [0, 2, 1, 3])
        s = b.node("Add", [b.node("Mul", [b.node("MatMul", [q, k]), b.const(np.float32(1 / np.sqrt(d)))]), m])
        ctx = b.node("Transpose", [b.node("MatMul", [b.node("Softmax", [s], axis=-1), v])], perm=[0, 2, 1, 3])
        merged = b.node("Concat", [b.const(np.array([1], np.int64)), seq, b.const(np.array([hid], np.int64))], axis=0)
        ctx = b.node("Reshape", [ctx, merged])
        h = b.node("LayerNormalization", [b.node("Add", [proj(ctx), h]), b.const(np.ones(hid, np.float32)),
                                          b.weight([hid], scale=0.1)], axis=-1)
        f = b.node("Add", [b.node("MatMul", [h, b.weight([hid, ffn])]), b.weight([ffn], scale=0.1)])
        gelu = b.node("Mul", [b.node("Mul", [f, b.const(np.float32(0.5))]),
                              b.node("Add", [b.node("Erf", [b.node("Div", [f, b.const(np.float32(np.sqrt(2)))])]),
                                             b.const(np.float32(1))])])
        f = b.node("Add", [b.node("MatMul", [gelu, b.weight([ffn, hid])]), b.weight([hid], scale=0.1)])
        h = b.node("LayerNormalization", [b.node("Add", [f, h]), b.const(np.ones(hid, np.float32)),
                                          b.weight([hid], scale=0.1)], axis=-1)
    b.nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"], name="out"))
    inputs = [helper.make_tensor_value_info(ids, TensorProto.INT64, [1, "seq"]),
              helper.make_tensor_value_info(mask, TensorProto.INT64, [1, "seq"])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, "seq", hid])]
    g = helper.make_graph(b.nodes, "encoder", inputs, outputs, b.inits)

    def feeds(n, rng):
        mk = np.ones((1, n), np.int64)
        mk[0, n - n // 4:] = 0  # padding at the end
        return {ids: rng.integers(1, vocab, size=(1, n), dtype=np.int64), mask: mk}
    return g, feeds, [5, 17, 32]


def yolo_head():
    b = Builder(3)
    na, no = 3, 7
    outs = []
    for i, st in enumerate([8, 16, 32]):
        s = 64 // st
        f = b.node("Conv", [b.node("AveragePool", ["x"], kernel_shape=[st, st], strides=[st, st]),
                            b.weight([na * no, 3, 1, 1])])
        bs = b.node("Gather", [b.node("Shape", [f]), b.const(np.array([0], np.int64))], axis=0)
        v = b.node("Reshape", [f, b.node("Concat", [bs, b.const(np.array([na, no, s, s], np.int64))], axis=0)])
        v = b.node("Sigmoid", [b.node("Transpose", [v], perm=[0, 1, 3, 4, 2])])  # [batch,na,s,s,no]
        r = b.node("Range", [b.const(np.float32(0)), b.const(np.float32(s)), b.const(np.float32(1))])
        yv = b.node("Expand", [b.node("Unsqueeze", [r, b.const(np.array([1], np.int64))]),
                               b.const(np.array([s, s], np.int64))])
        xv = b.node("Expand", [b.node("Unsqueeze", [r, b.const(np.array([0], np.int64))]),
                               b.const(np.array([s, s], np.int64))])
        grid = b.node("Concat", [b.node("Unsqueeze", [xv, b.const(np.array([2], np.int64))]),
                                 b.node("Unsqueeze", [yv, b.const(np.array([2], np.int64))])], axis=2)
        grid = b.node("Expand", [b.node("Reshape", [grid, b.const(np.array([1, 1, s, s, 2], np.int64))]),
                                 b.const(np.array([1, na, s, s, 2], np.int64))])
        grid = b.node("Sub", [grid, b.const(np.float32(0.5))])

        def part(lo, hi):
            return b.node("Slice", [v, b.const(np.array([lo], np.int64)), b.const(np.array([hi], np.int64)),
                                    b.const(np.array([4], np.int64))])
        xy = b.node("Mul", [b.node("Add", [b.node("Mul", [part(0, 2), b.const(np.float32(2))]), grid]),
                            b.const(np.float32(st))])
        wh = part(2, 4)
        wh = b.node("Mul", [b.node("Mul", [wh, b.const(np.float32(2))]), wh])
        y = b.node("Concat", [xy, wh, part(4, no)], axis=4)
        outs.append(b.node("Reshape", [y, b.node("Concat", [bs, b.const(np.array([-1, no], np.int64))], axis=0)]))
    b.nodes.append(helper.make_node("Concat", outs, ["boxes"], name="boxes", axis=1))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 64, 64])]
    outputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["batch", na * 84, no])]
    g = helper.make_graph(b.nodes, "yolo_head", inputs, outputs, b.inits)

    def feeds(n, rng):
        return {"x": rng.standard_normal((n, 3, 64, 64)).astype(np.float32)}
    return g, feeds, [1, 3, 4]


def conv_residual():
    b = Builder(5)
    t = b.node("Relu", ["x"])
    h = b.node("Relu", [b.node("Conv", [t, b.weight([8, 8, 3, 3])], pads=[1, 1, 1, 1])])
    h = b.node("Add", [t, b.node("Conv", [h, b.weight([8, 8, 1, 1])])])
    b.nodes.append(helper.make_node("Relu", [h], ["y"], name="out"))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8, 8, 8])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, 8, 8])]
    g = helper.make_graph(b.nodes, "conv_residual", inputs, outputs, b.inits)

    def feeds(n, rng):
        return {"x": rng.standard_normal((n, 8, 8, 8)).astype(np.float32)}
    return g, feeds, [1, 2, 3]


def if_fold():
    b = Builder(4)
    then_g = helper.make_graph([helper.make_node("Squeeze", ["x", "axes2"], ["t"], name="squeeze")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
                               [numpy_helper.from_array(np.array([2], np.int64), "axes2")])
    scale = b.weight([1, 3, 5])  # an outer value the else branch reads
    else_g = helper.make_graph([helper.make_node("ReduceMax", ["x"], ["e0"], name="reduce", axes=[2], keepdims=0),
                                helper.make_node("Mul", ["e0", scale[:]], ["e"], name="scale")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    h = b.node("Gather", [b.node("Shape", ["x"]), b.const(np.int64(2))], axis=0)
    cond = b.node("Equal", [h, b.const(np.int64(1))])
    b.nodes.append(helper.make_node("If", [cond], ["y"], name="if_h1", then_branch=then_g, else_branch=else_g))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", 5])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 5])]
    g = helper.make_graph(b.nodes, "if_fold", inputs, outputs, b.inits)

    def feeds(n, rng):
        return {"x": rng.standard_normal((1, 3, n, 5)).astype(np.float32)}
    return g, feeds, [1, 2]


def write(out_dir, name, make):
    g, feeds, sizes = make()
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=name != "if_fold")
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    for n in sizes:
        f = feeds(n, rng)
        for k, v in f.items():
            np.save(os.path.join(d, f"in_{n}_{k}.npy"), v)
        for o, val in zip(sess.get_outputs(), sess.run(None, f)):
            np.save(os.path.join(d, f"out_{n}_{o.name}.npy"), val)


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):  # not a folder named "--help"
        print(__doc__, file=sys.stderr)
        return 2
    write(sys.argv[1], "convnet", convnet)
    write(sys.argv[1], "encoder", encoder)
    write(sys.argv[1], "yolo_head", yolo_head)
    write(sys.argv[1], "if_fold", if_fold)
    write(sys.argv[1], "conv_residual", conv_residual)
    return 0


if __name__ == "__main__":
    sys.exit(main())
