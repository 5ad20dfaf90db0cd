#!/usr/bin/env python3
"""A long chain of elementwise nodes, with onnxruntime's output, for the
compile-time test of the graph passes (passes.cmake, issue 14): every pass,
the planner and codegen must handle N nodes in about linear time, which a
chain shows at once (a quadratic step turns 20k nodes into minutes).

  kind mixed (default)  x -> Neg -> Abs -> Add c_i -> Mul h_i -> Relu -> ...
        c_i cycles over 16 values and h_i is 0.5, each written as its own
        initializer, so CSE merges 16 + 1 distinct constants out of about
        2N/5, and the chain's value stays bounded (each Mul halves it)
  kind add   x -> Add c_i -> Add c_i -> ... with one c_i per node (16 values)

The output is y = f(x) on a [4, 64] float input. Writes OUT_DIR/{model.onnx,
input_x.npy, expected_y.npy}, the layout tests/models/run_model_test.sh
reads.

Usage: gen_chain.py OUT_DIR N_NODES [mixed|add]
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def chain(n, kind):
    rng = np.random.default_rng(14)
    pool = rng.uniform(-1.0, 1.0, 16).astype(np.float32)
    nodes, inits = [], []
    cur = "x"
    cycle = ["Neg", "Abs", "Add", "Mul", "Relu"] if kind == "mixed" else ["Add"]
    for i in range(n):
        op = cycle[i % len(cycle)]
        out = "y" if i == n - 1 else f"t{i}"
        inputs = [cur]
        if op in ("Add", "Mul"):
            c = f"c{i}"
            value = pool[i % 16] if op == "Add" else np.float32(0.5)
            if kind == "add":
                value = np.float32(pool[i % 16] * 1e-3)  # keeps a sum of N terms small
            inits.append(numpy_helper.from_array(np.array([value], dtype=np.float32), c))
            inputs.append(c)
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{i}"))
        cur = out
    g = helper.make_graph(nodes, f"chain_{kind}_{n}",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="kiln-tests-passes")
    m.ir_version = 8
    return m


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] not in ("mixed", "add")):
        sys.exit("usage: gen_chain.py OUT_DIR N_NODES [mixed|add]")
    out, n = sys.argv[1], int(sys.argv[2])
    kind = sys.argv[3] if len(sys.argv) == 4 else "mixed"
    os.makedirs(out, exist_ok=True)
    m = chain(n, kind)
    path = os.path.join(out, "model.onnx")
    onnx.save(m, path)
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the reference, not its rewrites
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"x": x})
    np.save(os.path.join(out, "input_x.npy"), x)
    np.save(os.path.join(out, "expected_y.npy"), y)
    print(f"gen_chain: {n} {kind} nodes in {path}")


if __name__ == "__main__":
    main()
