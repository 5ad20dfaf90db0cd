#!/usr/bin/env python3
"""Small models and calibration data for the quantization tests.

  cnn.onnx      Conv-BN-Relu stem, a residual block, MaxPool, GAP, Gemm:
                input x f32[1,3,32,32], output logits f32[1,10]
  mlp.onnx      MatMul+bias+Relu, MatMul+bias: input x f32[4,64], output y f32[4,16]

Calibration data for each (seeded): <model>_data/x_<i>.npy (a folder of
samples) and <model>_stacked.npy (the same samples along a leading axis),
plus held-out <model>_eval/ samples for accuracy checks.

Usage: gen_quant_models.py OUT_DIR [--samples N] [--eval N]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv(nodes, inits, rng, x, cin, cout, k, name, stride=1, bn=True):
    w = (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
    inits.append(numpy_helper.from_array(w, name + "_w"))
    nodes.append(helper.make_node("Conv", [x, name + "_w"], [name], name=name, pads=[k // 2] * 4,
                                  strides=[stride, stride], kernel_shape=[k, k]))
    if not bn:
        return name
    for p, v in (("g", 1 + 0.1 * rng.standard_normal(cout)), ("b", 0.1 * rng.standard_normal(cout)),
                 ("m", 0.1 * rng.standard_normal(cout)), ("v", 1 + 0.1 * np.abs(rng.standard_normal(cout)))):
        inits.append(numpy_helper.from_array(v.astype(np.float32), f"{name}_bn_{p}"))
    nodes.append(helper.make_node("BatchNormalization", [name] + [f"{name}_bn_{p}" for p in "gbmv"],
                                  [name + "_bn"], name=name + "_bn"))
    return name + "_bn"


def build_cnn(rng):
    nodes, inits = [], []
    h = conv(nodes, inits, rng, "x", 3, 16, 3, "stem")
    nodes.append(helper.make_node("Relu", [h], ["stem_relu"], name="stem_relu"))
    h = conv(nodes, inits, rng, "stem_relu", 16, 16, 3, "b1c1")
    nodes.append(helper.make_node("Relu", [h], ["b1r1"], name="b1r1"))
    h = conv(nodes, inits, rng, "b1r1", 16, 16, 3, "b1c2")
    nodes.append(helper.make_node("Add", [h, "stem_relu"], ["b1add"], name="b1add"))
    nodes.append(helper.make_node("Relu", ["b1add"], ["b1out"], name="b1out"))
    nodes.append(helper.make_node("MaxPool", ["b1out"], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    h = conv(nodes, inits, rng, "pool", 16, 32, 3, "c2")
    nodes.append(helper.make_node("Relu", [h], ["c2r"], name="c2r"))
    nodes.append(helper.make_node("GlobalAveragePool", ["c2r"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat"))
    inits.append(numpy_helper.from_array((rng.standard_normal((10, 32)) * 0.5).astype(np.float32), "fc_w"))
    inits.append(numpy_helper.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "fc_b"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1))
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), (1, 3, 32, 32)


def build_mlp(rng):
    nodes, inits = [], []
    for i, (a, b) in enumerate(((64, 128), (128, 16))):
        inits.append(numpy_helper.from_array((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array((rng.standard_normal(b) * 0.1).astype(np.float32), f"b{i}"))
    nodes.append(helper.make_node("MatMul", ["x", "w0"], ["mm0"], name="mm0"))
    nodes.append(helper.make_node("Add", ["mm0", "b0"], ["h0"], name="add0"))
    nodes.append(helper.make_node("Relu", ["h0"], ["r0"], name="relu0"))
    nodes.append(helper.make_node("MatMul", ["r0", "w1"], ["mm1"], name="mm1"))
    nodes.append(helper.make_node("Add", ["mm1", "b1"], ["y"], name="add1"))
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), (4, 64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--eval", type=int, default=16)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, build in (("cnn", build_cnn), ("mlp", build_mlp)):
        rng = np.random.default_rng(7)
        model, shape = build(rng)
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(a.out, name + ".onnx"))
        for kind, n in (("data", a.samples), ("eval", a.eval)):
            d = os.path.join(a.out, f"{name}_{kind}")
            os.makedirs(d, exist_ok=True)
            xs = rng.standard_normal((n,) + shape).astype(np.float32)
            for i in range(n):
                np.save(os.path.join(d, f"x_{i}.npy"), xs[i])
            if kind == "data":
                np.save(os.path.join(a.out, f"{name}_stacked.npy"), xs)


if __name__ == "__main__":
    main()
