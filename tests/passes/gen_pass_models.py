#!/usr/bin/env python3
"""Small ONNX models whose patterns the graph passes rewrite, with
onnxruntime's outputs, for the end-to-end pass tests (passes.cmake).

  conv_bn      Conv -> BatchNormalization -> Relu, a grouped Conv -> BN, a
               Gemm -> BN, with Dropout and Identity around (fold-batchnorm,
               freeze)
  decomposed   a transformer block written out in elementwise ops: layer
               norm (ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add), tanh GELU, softmax
               as Exp(x - max)/sum, Shape->Gather->Concat->Reshape, x*1, double
               Transpose (recognize-*, fold-shapes, simplify, cse)

Writes OUT_DIR/<model>/{model.onnx, input_<name>.npy, expected_<name>.npy},
the layout tests/models/run_model_test.sh reads.

Usage: gen_pass_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

F32 = np.float32


class Graph:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, name, n_out=1, **attrs):
        outs = [name] if n_out == 1 else [f"{name}:{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def rand(self, *shape, scale=1.0):
        return (scale * self.rng.standard_normal(shape)).astype(F32)

    def bn(self, x, c, name):
        p = [self.init(f"{name}.{k}", v) for k, v in (
            ("scale", 1.0 + self.rand(c, scale=0.2)), ("bias", self.rand(c, scale=0.1)),
            ("mean", self.rand(c, scale=0.1)), ("var", (1.0 + 0.5 * self.rng.random(c)).astype(F32)))]
        return self.node("BatchNormalization", [x] + p, name, epsilon=1e-5)

    def model(self, name, inputs, outputs):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-tests-passes")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def conv_bn():
    g = Graph(1)
    x = "x"
    y = g.node("Conv", [x, g.init("c1.w", g.rand(8, 3, 3, 3, scale=0.3)), g.init("c1.b", g.rand(8))], "c1",
               kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = g.node("Relu", [g.bn(y, 8, "bn1")], "relu1")
    y = g.node("Dropout", [y], "drop1")
    y = g.node("Conv", [y, g.init("c2.w", g.rand(8, 2, 1, 1, scale=0.5))], "c2", kernel_shape=[1, 1], group=4)
    y = g.node("Identity", [g.bn(y, 8, "bn2")], "id2")
    y = g.node("GlobalAveragePool", [y], "gap")
    y = g.node("Flatten", [y], "flat")
    y = g.node("Gemm", [y, g.init("fc.w", g.rand(5, 8, scale=0.4)), g.init("fc.b", g.rand(5))], "fc", transB=1)
    g.node("BatchNormalization", [y] + [g.init(f"bn3.{k}", v) for k, v in (
        ("scale", 1.0 + g.rand(5, scale=0.2)), ("bias", g.rand(5, scale=0.1)), ("mean", g.rand(5, scale=0.1)),
        ("var", (1.0 + g.rng.random(5)).astype(F32)))], "y", epsilon=1e-5)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])]
    return g.model("conv_bn", inputs, outputs), {"x": g.rand(1, 3, 8, 8)}


def decomposed():
    g = Graph(2)
    c = lambda name, v: g.node("Constant", [], name, value=numpy_helper.from_array(np.asarray(v), name + ".value"))
    x = g.node("MatMul", ["x", g.init("w0", g.rand(16, 16, scale=0.3))], "proj")
    # layer norm over the last axis, as older exporters wrote it
    m = g.node("ReduceMean", [x], "ln.mean", axes=[-1])
    d = g.node("Sub", [x, m], "ln.sub")
    v = g.node("ReduceMean", [g.node("Pow", [d, c("ln.two", F32(2))], "ln.pow")], "ln.var", axes=[-1])
    s = g.node("Sqrt", [g.node("Add", [v, c("ln.eps", F32(1e-5))], "ln.add_eps")], "ln.sqrt")
    y = g.node("Div", [d, s], "ln.div")
    y = g.node("Mul", [y, g.init("ln.gamma", 1.0 + g.rand(16, scale=0.1))], "ln.mul")
    y = g.node("Add", [y, g.init("ln.beta", g.rand(16, scale=0.1))], "ln.add")
    # tanh GELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
    cube = g.node("Pow", [y, c("gelu.three", F32(3))], "gelu.pow")
    inner = g.node("Add", [y, g.node("Mul", [c("gelu.c", F32(0.044715)), cube], "gelu.mul_c")], "gelu.inner")
    t = g.node("Tanh", [g.node("Mul", [inner, c("gelu.k", F32(np.sqrt(2 / np.pi)))], "gelu.mul_k")], "gelu.tanh")
    t = g.node("Add", [t, c("gelu.one", F32(1))], "gelu.one_plus")
    y = g.node("Mul", [g.node("Mul", [y, c("gelu.half", F32(0.5))], "gelu.half_x"), t], "gelu.out")
    # x * 1 and a transpose pair that cancels
    y = g.node("Mul", [y, c("one", F32(1))], "times_one")
    y = g.node("Transpose", [g.node("Transpose", [y], "t1", perm=[0, 2, 1])], "t2", perm=[0, 2, 1])
    # reshape to heads through a computed shape
    sh = g.node("Shape", [y], "shape")
    b = g.node("Gather", [sh, c("idx0", np.array([0], np.int64))], "gather_batch", axis=0)
    tgt = g.node("Concat", [b, c("rest", np.array([4, 4, 4], np.int64))], "target", axis=0)
    y = g.node("Reshape", [y, tgt], "to_heads")
    # softmax over the last axis, written out
    mx = g.node("ReduceMax", [y], "sm.max", axes=[-1])
    e = g.node("Exp", [g.node("Sub", [y, mx], "sm.sub")], "sm.exp")
    g.node("Div", [e, g.node("ReduceSum", [e, c("sm.axes", np.array([-1], np.int64))], "sm.sum")], "y")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 16])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 4, 4])]
    return g.model("decomposed", inputs, outputs), {"x": g.rand(2, 4, 16)}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, build in (("conv_bn", conv_bn), ("decomposed", decomposed)):
        model, inputs = build()
        d = os.path.join(sys.argv[1], name)
        os.makedirs(d, exist_ok=True)
        onnx.save(model, os.path.join(d, "model.onnx"))
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        outs = sess.run(None, inputs)
        for k, v in inputs.items():
            np.save(os.path.join(d, f"input_{k}.npy"), v)
        for o, v in zip(sess.get_outputs(), outs):
            np.save(os.path.join(d, f"expected_{o.name}.npy"), v)
        print(f"{name}: {len(model.graph.node)} nodes")


if __name__ == "__main__":
    main()
