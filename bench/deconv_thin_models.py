#!/usr/bin/env python3
"""Two measurement models for ConvTranspose and thin convolutions (not
tests: `kiln bench --vs-ort` times them; the numbers are in
docs/benchmarks.md).

  dbnet  a DBNet-style text detector at [1, 3, 640, 640]: a strided conv
         backbone down to 1/32 (3x3 stride-2 stages with BN + Relu), an
         FPN-like top-down path that upsamples by ConvTranspose (k=2, s=2)
         + BN + Relu twice and adds the lateral 1x1 convolutions, fused
         maps concatenated at 1/4, and a DB head: 3x3 conv + BN + Relu,
         ConvTranspose (k=2, s=2) + BN + Relu, ConvTranspose (k=2, s=2),
         Sigmoid.
  thin   a CRNN-style sequence head at [1, 256, 64, 1]: five 5x1
         convolutions (256 -> 256, pads 2) over the width-1 feature column,
         with bias + Relu, one with a residual Add, then a 1x1 projection.

Usage: deconv_thin_models.py OUT_DIR [--model dbnet|thin]...
Writes OUT_DIR/<model>.onnx.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(640)


class G:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def const(self, a, p="c"):
        n = self.name(p)
        self.inits.append(numpy_helper.from_array(a.astype(np.float32), n))
        return n

    def node(self, op, ins, **attrs):
        o = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [o], name=o, **attrs))
        return o

    def bn(self, x, c):
        return self.node("BatchNormalization", [x, self.const(RNG.uniform(0.5, 1.5, c)), self.const(RNG.uniform(-.1, .1, c)),
                                                self.const(RNG.uniform(-.1, .1, c)), self.const(RNG.uniform(.5, 2, c))])

    def conv(self, x, cin, cout, k, s=1, bias=False, bn=True, relu=True, kw=None):
        kh, kw = (k, k) if kw is None else (k, kw)
        w = self.const(RNG.normal(0, (2.0 / (cin * kh * kw)) ** 0.5, (cout, cin, kh, kw)))
        ins = [x, w] + ([self.const(RNG.uniform(-.1, .1, cout))] if bias else [])
        y = self.node("Conv", ins, strides=[s, s] if kw == kh else [s, 1], pads=[kh // 2, kw // 2, kh // 2, kw // 2])
        if bn:
            y = self.bn(y, cout)
        return self.node("Relu", [y]) if relu else y

    def up(self, x, cin, cout, bn=True, relu=True, bias=False):
        w = self.const(RNG.normal(0, (1.0 / cin) ** 0.5, (cin, cout, 2, 2)))
        ins = [x, w] + ([self.const(RNG.uniform(-.1, .1, cout))] if bias else [])
        y = self.node("ConvTranspose", ins, strides=[2, 2])
        if bn:
            y = self.bn(y, cout)
        return self.node("Relu", [y]) if relu else y


def dbnet():
    g = G()
    x = "x"
    # backbone: stem, then stages at 1/4, 1/8, 1/16, 1/32
    y = g.conv(x, 3, 32, 3, 2)
    y = g.conv(y, 32, 64, 3, 2)                       # 1/4, 160x160
    c2 = g.conv(y, 64, 64, 3)
    c3 = g.conv(g.conv(c2, 64, 128, 3, 2), 128, 128, 3)    # 1/8
    c4 = g.conv(g.conv(c3, 128, 256, 3, 2), 256, 256, 3)   # 1/16
    c5 = g.conv(g.conv(c4, 256, 512, 3, 2), 512, 512, 3)   # 1/32
    # FPN top-down: 1x1 laterals to 128, ConvTranspose x2 upsampling + BN + Relu
    inner = 128
    p5 = g.conv(c5, 512, inner, 1, bn=False, relu=False)
    l4 = g.conv(c4, 256, inner, 1, bn=False, relu=False)
    p4 = g.node("Add", [g.up(p5, inner, inner), l4])
    l3 = g.conv(c3, 128, inner, 1, bn=False, relu=False)
    p3 = g.node("Add", [g.up(p4, inner, inner), l3])
    l2 = g.conv(c2, 64, inner, 1, bn=False, relu=False)
    p2 = g.node("Add", [g.up(p3, inner, inner), l2])
    # smooth and bring every level to 1/4 (ConvTranspose chains), concat
    f2 = g.conv(p2, inner, 32, 3)
    f3 = g.up(g.conv(p3, inner, 32, 3), 32, 32)
    f4 = g.up(g.up(g.conv(p4, inner, 32, 3), 32, 32), 32, 32)
    f5 = g.up(g.up(g.up(g.conv(p5, inner, 32, 3), 32, 32), 32, 32), 32, 32)
    fuse = g.node("Concat", [f2, f3, f4, f5], axis=1)          # 128 @ 1/4
    # DB head: probability map
    h = g.conv(fuse, 128, 32, 3)
    h = g.up(h, 32, 32, bias=True)
    h = g.up(h, 32, 1, bn=False, relu=False, bias=True)
    out = g.node("Sigmoid", [h])
    g.nodes.append(helper.make_node("Identity", [out], ["y"], name="out"))
    return g, [1, 3, 640, 640]


def thin():
    g = G()
    y = "x"
    for i in range(5):
        t = g.conv(y, 256, 256, 5, bias=True, bn=False, relu=i != 2, kw=1)
        y = g.node("Relu", [g.node("Add", [t, y])]) if i == 2 else t
    y = g.conv(y, 256, 96, 1, bias=True, bn=False, relu=False, kw=1)
    g.nodes.append(helper.make_node("Identity", [y], ["y"], name="out"))
    return g, [1, 256, 64, 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--model", action="append", choices=["dbnet", "thin"])
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    for name in a.model or ["dbnet", "thin"]:
        g, shape = {"dbnet": dbnet, "thin": thin}[name]()
        graph = helper.make_graph(g.nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], g.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        path = os.path.join(a.out_dir, name + ".onnx")
        onnx.save(m, path)
        print(f"{path}: {len(g.nodes)} nodes, input {shape}")


if __name__ == "__main__":
    main()
