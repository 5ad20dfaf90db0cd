#!/usr/bin/env python3
"""`kiln compile` on the models of issue 14 that it used to accept: each must
exit non-zero with the given message on stderr and leave no artifact.

Usage: check_refusals.py KILN_BIN OUT_DIR
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, shape=None, dt=F):
    return helper.make_tensor_value_info(name, dt, shape)


def expand(shape):
    s = numpy_helper.from_array(np.array(shape, np.int64), "s")
    return model([helper.make_node("Expand", ["x", "s"], ["y"], name="e")], [vi("x", [1, 4])], [vi("y")], [s])


CASES = [
    ("huge_input", model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2**31, 2**31])], [vi("y")]),
     "input 'x' has a shape of more than 2^62 bytes, kiln's limit per tensor"),
    ("expand_overflow", expand([2**62, 4]),
     "node 'e' (Expand): output 0 'y' has shape 4611686018427387904x4 (f32), whose element count does not fit in 64 bits"),
    ("expand_too_big", expand([2**40, 2**20, 4]),
     "node 'e' (Expand): output 0 'y' has shape 1099511627776x1048576x4 (f32), over kiln's limit of 2^62 bytes per tensor"),
    ("sum20k", model([helper.make_node("Sum", ["x"] * 20000, ["y"], name="s")], [vi("x", [4])], [vi("y")]),
     "node 's' (Sum): has 20000 inputs, over kiln's limit of 1000 per node"),
    ("relu3", model([helper.make_node("Relu", ["x", "x", "x"], ["y"], name="r")], [vi("x", [2])], [vi("y")]),
     "node 'r' (Relu): has 3 inputs, Relu takes 1"),
    ("relu_i64", model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2])], [vi("y", [2], TensorProto.INT64)]),
     "node 'r' (Relu): output 0 'y' is declared i64 in the model but the node computes f32"),
    ("opset99", model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2])], [vi("y")], opset=99),
     "default-domain opset 99 is outside the range kiln supports (1 to 25)"),
    ("gelu_opset17", model([helper.make_node("Gelu", ["x"], ["y"], name="g")], [vi("x", [2])], [vi("y")]),
     "node 'g' (Gelu): Gelu is defined from opset 20 on; the model imports opset 17"),
    ("upsample_opset13", model([helper.make_node("Upsample", ["x", "s"], ["y"], name="u")], [vi("x", [1, 1, 2, 2])],
                               [vi("y")], [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")], opset=13),
     "node 'u' (Upsample): Upsample was removed from ONNX after opset 9; the model imports opset 13"),
    ("softmax_axis_string", model([helper.make_node("Softmax", ["x"], ["y"], name="s", axis="1")], [vi("x", [2])], [vi("y")]),
     "node 's' (Softmax): attribute 'axis' has type STRING, expected INT"),
]


def main():
    kiln, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    bad = 0
    for name, m, msg in CASES:
        path = os.path.join(out, name + ".onnx")
        art = os.path.join(out, name + ".so")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        for p in (art, art[:-3] + ".h"):
            if os.path.exists(p):
                os.remove(p)
        r = subprocess.run([kiln, "compile", path, "-o", art, "--emit-header", art[:-3] + ".h"],
                           capture_output=True, text=True, timeout=300)
        problems = []
        if r.returncode == 0:
            problems.append("exit status 0")
        if msg not in r.stderr:
            problems.append(f"stderr lacks {msg!r}")
        if os.path.exists(art) or os.path.exists(art[:-3] + ".h"):
            problems.append("an artifact was left behind")
        if r.returncode < 0 or "runtime error" in r.stderr or "Sanitizer" in r.stderr:
            problems.append("crashed or tripped a sanitizer")
        if problems:
            bad += 1
            print(f"FAIL {name}: {', '.join(problems)}\n  stderr: {r.stderr.strip()[:600]}")
        else:
            print(f"ok   {name}: {r.stderr.strip()}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
