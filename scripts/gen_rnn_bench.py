#!/usr/bin/env python3
"""Models with recurrent layers, for timing kiln's LSTM/GRU path against
onnxruntime (`kiln bench --vs-ort`); random weights, fixed seed.

  crnn       a CRNN line recognizer: Conv+BN+Relu+MaxPool x4 over a
             [1,1,32,320] image (height collapsed to 1), [T=80,1,256],
             two bidirectional LSTMs of hidden 256 (directions
             concatenated), MatMul to 100 classes
  audio-lstm [T=100,1,64] features and h0/c0 [2,1,128] state inputs, a
             2-layer LSTM of hidden 128, logits (10) and the final states
  audio-gru  the same with GRUs (h0 only)

Usage: gen_rnn_bench.py OUT_DIR [--model NAME ...]
Writes OUT_DIR/NAME.onnx. Not a test: docs/kernels.md says how it was used.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(2024)


def w(*shape, scale=None):
    fan_in = np.prod(shape[1:]) if len(shape) > 1 else shape[0]
    s = scale if scale is not None else (1.0 / fan_in) ** 0.5
    return (RNG.standard_normal(shape) * s).astype(np.float32)


class G:
    def __init__(self):
        self.nodes, self.inits = [], []

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name=name))
        return name

    def node(self, op, ins, outs, **kw):
        self.nodes.append(helper.make_node(op, ins, outs, name=outs[0], **kw))
        return outs[0]


def rnn_weights(g, prefix, op, d, i, h):
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    s = (1.0 / h) ** 0.5
    return [g.const(prefix + "_W", w(d, gates * h, i, scale=s)), g.const(prefix + "_R", w(d, gates * h, h, scale=s)),
            g.const(prefix + "_B", w(d, 2 * gates * h, scale=0.1))]


def crnn():
    g = G()
    x, c_in = "image", 1
    layers = [(64, (2, 2)), (128, (2, 2)), (256, (2, 1)), (256, (4, 1))]
    for k, (c, pool) in enumerate(layers):
        conv = g.node("Conv", [x, g.const(f"conv{k}_w", w(c, c_in, 3, 3)), g.const(f"conv{k}_b", w(c, scale=0.1))],
                      [f"conv{k}"], pads=[1, 1, 1, 1])
        bn = g.node("BatchNormalization",
                    [conv, g.const(f"bn{k}_s", 1 + w(c, scale=0.1)), g.const(f"bn{k}_b", w(c, scale=0.1)),
                     g.const(f"bn{k}_m", w(c, scale=0.1)), g.const(f"bn{k}_v", 1 + np.abs(w(c, scale=0.1)))],
                    [f"bn{k}"])
        relu = g.node("Relu", [bn], [f"relu{k}"])
        x = g.node("MaxPool", [relu], [f"pool{k}"], kernel_shape=list(pool), strides=list(pool))
        c_in = c
    # [1, 256, 1, 80] -> [80, 1, 256]
    sq = g.node("Squeeze", [x, g.const("axis2", np.array([2], np.int64))], ["squeezed"])
    seq = g.node("Transpose", [sq], ["seq"], perm=[2, 0, 1])
    i = 256
    for k in range(2):
        y = g.node("LSTM", [seq] + rnn_weights(g, f"lstm{k}", "LSTM", 2, i, 256), [f"lstm{k}_y"],
                   hidden_size=256, direction="bidirectional")
        t = g.node("Transpose", [y], [f"lstm{k}_t"], perm=[0, 2, 1, 3])  # [T, 1, 2, 256]
        seq = g.node("Reshape", [t, g.const(f"shape{k}", np.array([80, 1, 512], np.int64))], [f"lstm{k}_out"])
        i = 512
    mm = g.node("MatMul", [seq, g.const("fc_w", w(512, 100))], ["fc"])
    g.node("Add", [mm, g.const("fc_b", w(100, scale=0.1))], ["logits"])
    graph = helper.make_graph(g.nodes, "crnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 32, 320])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [80, 1, 100])], g.inits)
    return graph


def audio(op):
    g = G()
    T, F, H, L = 100, 64, 128, 2
    x = "features"
    ins = [helper.make_tensor_value_info("features", TensorProto.FLOAT, [T, 1, F]),
           helper.make_tensor_value_info("h0", TensorProto.FLOAT, [L, 1, H])]
    if op == "LSTM":
        ins.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, [L, 1, H]))
    hs, cs, i = [], [], F
    for k in range(L):
        st = g.const(f"s{k}", np.array([k], np.int64))
        en = g.const(f"e{k}", np.array([k + 1], np.int64))
        h0 = g.node("Slice", ["h0", st, en], [f"h0_{k}"])
        args = [x] + rnn_weights(g, f"{op.lower()}{k}", op, 1, i, H) + ["", h0]
        outs = [f"y{k}", f"hn{k}"]
        if op == "LSTM":
            args.append(g.node("Slice", ["c0", st, en], [f"c0_{k}"]))
            outs.append(f"cn{k}")
        g.node(op, args, outs, hidden_size=H)
        hs.append(f"hn{k}")
        if op == "LSTM":
            cs.append(f"cn{k}")
        x = g.node("Squeeze", [f"y{k}", g.const(f"ax{k}", np.array([1], np.int64))], [f"y{k}_sq"])
        i = H
    mm = g.node("MatMul", [x, g.const("fc_w", w(H, 10))], ["fc"])
    g.node("Add", [mm, g.const("fc_b", w(10, scale=0.1))], ["logits"])
    g.node("Concat", hs, ["hn"], axis=0)
    outs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [T, 1, 10]),
            helper.make_tensor_value_info("hn", TensorProto.FLOAT, [L, 1, H])]
    if op == "LSTM":
        g.node("Concat", cs, ["cn"], axis=0)
        outs.append(helper.make_tensor_value_info("cn", TensorProto.FLOAT, [L, 1, H]))
    return helper.make_graph(g.nodes, f"audio_{op.lower()}", ins, outs, g.inits)


MODELS = {"crnn": crnn, "audio-lstm": lambda: audio("LSTM"), "audio-gru": lambda: audio("GRU")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", action="append", choices=sorted(MODELS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.model or sorted(MODELS):
        m = helper.make_model(MODELS[name](), opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, os.path.join(a.out, name + ".onnx"))
        print("wrote", os.path.join(a.out, name + ".onnx"))


if __name__ == "__main__":
    main()
