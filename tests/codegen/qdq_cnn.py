#!/usr/bin/env python3
"""End-to-end test of kiln's integer lowering (passes/lower_qdq.c, oneDNN int8).

Builds a small CNN with the onnx helper API (fixed seed): a stem conv + Relu,
MaxPool, a residual block (two 3x3 convs, the identity Add, Relu), a strided
1x1 conv, a depthwise conv with Clip(0, 6), global average pooling and a Gemm.
onnxruntime's quantize_static turns it into a static QDQ model (per-channel
s8 weights, u8 activations); kiln compiles it and must

  - lower every Conv and the Gemm to kiln::QConv / kiln::QMatMul run by oneDNN
    (the --report lines), keeping the weights s8 (the artifact's weights
    under 40% of the float model's);
  - agree with onnxruntime's output within one output quantization step on
    >= 99% of elements;
  - and kiln's reference evaluator must agree likewise with the model's exact
    QDQ semantics (onnxruntime with its graph optimizations off: its fused
    integer kernels, like oneDNN's, may saturate u8 x s8 pair sums on CPUs
    without VNNI, so the two integer paths are compared with each other).

Usage: qdq_cnn.py KILN WORKDIR
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

RNG = np.random.default_rng(15)


def conv(nodes, inits, x, cin, cout, k, name, stride=1, group=1, relu=True):
    w = (RNG.standard_normal((cout, cin // group, k, k)) * (1.5 / np.sqrt(cin // group * k * k))).astype(np.float32)
    b = RNG.standard_normal(cout).astype(np.float32) * 0.1
    inits += [numpy_helper.from_array(w, name + ".w"), numpy_helper.from_array(b, name + ".b")]
    nodes.append(helper.make_node("Conv", [x, name + ".w", name + ".b"], [name], name=name, kernel_shape=[k, k],
                                  pads=[k // 2] * 4, strides=[stride] * 2, group=group))
    if not relu:
        return name
    nodes.append(helper.make_node("Relu", [name], [name + ".r"], name=name + ".relu"))
    return name + ".r"


def build(path):
    nodes, inits = [], []
    x = conv(nodes, inits, "input", 3, 16, 3, "stem")
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    a = conv(nodes, inits, "pool", 16, 16, 3, "b1")
    a = conv(nodes, inits, a, 16, 16, 3, "b2", relu=False)
    nodes.append(helper.make_node("Add", [a, "pool"], ["res"], name="res"))
    nodes.append(helper.make_node("Relu", ["res"], ["res.r"], name="res.relu"))
    d = conv(nodes, inits, "res.r", 16, 32, 1, "down", stride=2)
    dw = conv(nodes, inits, d, 32, 32, 3, "dw", group=32, relu=False)
    inits += [numpy_helper.from_array(np.array(0, np.float32), "zero"),
              numpy_helper.from_array(np.array(6, np.float32), "six")]
    nodes.append(helper.make_node("Clip", [dw, "zero", "six"], ["dw.c"], name="dw.clip"))
    nodes.append(helper.make_node("GlobalAveragePool", ["dw.c"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat"))
    fw = RNG.standard_normal((10, 32)).astype(np.float32) * 0.3
    inits += [numpy_helper.from_array(fw, "fc.w"), numpy_helper.from_array(np.zeros(10, np.float32), "fc.b")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["output"], name="fc", transB=1))
    g = helper.make_graph(nodes, "qdq_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


class Reader(CalibrationDataReader):
    def __init__(self):
        self.data = [{"input": RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(8)]

    def get_next(self):
        return self.data.pop() if self.data else None


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def within_step(got, want, step):
    return float(np.mean(np.abs(got.astype(np.float64) - want) <= step * 1.0001))


def main():
    kiln, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    fp32, qdq = os.path.join(work, "cnn.onnx"), os.path.join(work, "cnn_qdq.onnx")
    build(fp32)
    quantize_static(fp32, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    x = RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)
    xin = os.path.join(work, "input.npy")
    np.save(xin, x)
    want = ort.InferenceSession(qdq, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    exact = ort.InferenceSession(qdq, so, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    m = onnx.load(qdq)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    last = next(n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.output[0] == "output")
    step = float(inits[last.input[1]])

    art, art32 = os.path.join(work, "cnn_qdq.so"), os.path.join(work, "cnn.so")
    report = run([kiln, "compile", qdq, "-o", art, "--report"])
    lowered = [l.split()[0] for l in report.splitlines() if "QConv" in l or "QMatMul" in l]
    onednn = [l.split()[0] for l in report.splitlines() if ("QConv" in l or "QMatMul" in l) and "oneDNN" in l]
    want_heads = {"stem", "b1", "b2", "down", "dw", "fc"}
    if set(lowered) != want_heads or set(onednn) != want_heads:
        sys.exit(f"FAIL: integer ops {sorted(lowered)} (oneDNN: {sorted(onednn)}), expected {sorted(want_heads)}\n{report}")
    def weights(text):
        return int(text.rsplit("weights ", 1)[1].split()[0])
    ratio = weights(report) / weights(run([kiln, "compile", fp32, "-o", art32, "--report"]))
    out = os.path.join(work, "out")
    run([kiln, "run", art, "--input", f"input={xin}", "--output-dir", out])
    got = np.load(os.path.join(out, "output.npy"))
    ref = os.path.join(work, "ref")
    run([kiln, "run", qdq, "--reference", "--input", f"input={xin}", "--output-dir", ref])
    got_ref = np.load(os.path.join(ref, "output.npy"))
    a, b = within_step(got, want, step), within_step(got_ref, exact, step)
    print(f"qdq_cnn: step {step:.4g}; compiled within one step of onnxruntime: {100 * a:.1f}%, "
          f"reference evaluator of the exact QDQ semantics: {100 * b:.1f}%; weights {ratio:.2f}x the float model's")
    if a < 0.99 or b < 0.99:
        sys.exit("FAIL: fewer than 99% of elements within one step")
    if ratio > 0.4:
        sys.exit("FAIL: the weights did not stay 8-bit")


if __name__ == "__main__":
    main()
