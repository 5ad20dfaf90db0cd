#!/usr/bin/env python3
"""Nodes that compile to the same code share one function, and only those.

  shared_bodies.py KILN WORKDIR

A chain of ten blocks, each

    h = Softmax(LeakyRelu(h * c_k + d_k, alpha_k) + h)

on a [64, 512] tensor (large enough that the generated loops are cut into
parallel units). Every block but the first and last reads and writes arena
buffers, with its own constants c_k and d_k; blocks 0-6 use alpha 0.1 and
blocks 7-9 alpha 0.2. kiln compiles the repeats once (codegen/cpu/share.c):
the report must say so, at -O3 (fused) and at -O0 (one function per
node), and the artifact must agree with onnxruntime. A shared body that
ignored an attribute (alpha), a constant operand's identity or an
operand's place would give block 7 block 6's answer.
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

BLOCKS, ROWS, COLS = 10, 64, 512


def build(path, rng):
    nodes, inits = [], []
    h = "x"
    for k in range(BLOCKS):
        inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, COLS).astype(np.float32), f"c{k}"))
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, COLS).astype(np.float32), f"d{k}"))
        out = "y" if k == BLOCKS - 1 else f"h{k}"
        nodes += [
            helper.make_node("Mul", [h, f"c{k}"], [f"m{k}"]),
            helper.make_node("Add", [f"m{k}", f"d{k}"], [f"a{k}"]),
            helper.make_node("LeakyRelu", [f"a{k}"], [f"l{k}"], alpha=0.1 if k < 7 else 0.2),
            helper.make_node("Add", [f"l{k}", h], [f"r{k}"]),
            helper.make_node("Softmax", [f"r{k}"], [out], axis=-1),
        ]
        h = out
    g = helper.make_graph(nodes, "shared_bodies",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, COLS])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ROWS, COLS])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    kiln, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    model = os.path.join(work, "model.onnx")
    build(model, rng)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32) * 4
    np.save(os.path.join(work, "x.npy"), x)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    failures = 0
    # at -O3 a block is a fused elementwise node and a Softmax: 7 + 6 repeats
    # at least (blocks 2-6 repeat block 1, block 8 block 7, each twice); at
    # -O0 each of the five nodes of a block is its own function
    for opt, least in (("-O3", 12), ("-O0", 30)):
        art = os.path.join(work, f"model{opt}.so")
        rep = subprocess.run([kiln, "compile", model, "-o", art, opt, "--report"], capture_output=True, text=True)
        if rep.returncode:
            print(rep.stdout + rep.stderr)
            return 1
        m = re.search(r"(\d+) generated nodes reuse the code of an earlier node", rep.stdout)
        reused = int(m.group(1)) if m else 0
        out = os.path.join(work, f"out{opt}")
        run = subprocess.run([kiln, "run", art, "--input", f"x={work}/x.npy", "--output-dir", out],
                             capture_output=True, text=True)
        if run.returncode:
            print(f"FAIL {opt}: kiln run exited with {run.returncode}: {run.stderr.strip()[-500:]}")
            failures += 1
            continue
        got = np.load(os.path.join(out, "y.npy"))
        err = float(np.abs(got - want).max())
        ok = reused >= least and err <= 1e-5
        print(f"{'ok  ' if ok else 'FAIL'} {opt}: {reused} nodes reuse an earlier node's code (at least {least}), "
              f"max |kiln - onnxruntime| = {err:.3g} (at most 1e-5)")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
