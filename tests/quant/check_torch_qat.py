#!/usr/bin/env python3
"""PyTorch quantization-aware training exports through kiln compile.

  check_torch_qat.py KILN SYSTEM_PYTHON MODEL OUT_DIR --integer N

MODEL is gen_torch_models.py's `qat` (the fake-quantized QAT model: Q ->
Clip -> DQ, Conv -> Div -> Add -> BatchNormalization) or `qat_int8` (the
same model after torch.ao.quantization.convert). Generates it with the
system python3 (PyTorch; exit 77 with a SKIP line when it is missing),
compiles it with --report and checks that exactly N nodes run integer
kernels and that no convolution, BatchNormalization or Div stays float;
then runs the artifact and compares its output with onnxruntime's (the
graph as written: ORT_DISABLE_ALL) and PyTorch's: >= 99% of the elements
within one step of the output's quantization (the scale of the
DequantizeLinear that produces it).
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
from torch_export import generate_and_compile  # noqa: E402


def output_step(model):
    """The scale of the DequantizeLinear that produces the graph's output."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            inits[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    out = model.graph.output[0].name
    for n in model.graph.node:
        if out in n.output and n.op_type == "DequantizeLinear":
            return float(np.asarray(inits[n.input[1]]).reshape(-1)[0])
    sys.exit("FAIL: the output is not a DequantizeLinear's")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("system_python")
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--integer", type=int, required=True)
    a = ap.parse_args()
    onnx_path, art, report = generate_and_compile(a.kiln, a.system_python, a.model, a.out_dir)
    failed = 0
    m = re.search(r"(\d+) nodes stay float in this quantized model \((\d+) integer kernels\)", report)
    n_int = int(m.group(2)) if m else -1
    floats = [ln.split()[1] for ln in report.split("stay float", 1)[-1].splitlines()[1:] if ln.startswith("  ")]
    bad = [op for op in floats if op in ("Conv", "FusedConv", "BatchNormalization", "Div")]
    ok = n_int == a.integer and not bad
    print("%s   --report: %d integer kernels (want %d); float: %s" % ("ok:" if ok else "FAIL:", n_int, a.integer,
                                                                       ", ".join(floats) or "none"))
    failed += not ok
    x = np.load(os.path.join(a.out_dir, "input_x.npy"))
    out = os.path.join(a.out_dir, "out")
    r = subprocess.run([a.kiln, "run", art, "--input", "x=" + os.path.join(a.out_dir, "input_x.npy"),
                        "--output-dir", out], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAIL: kiln run: " + r.stderr.strip())
    model = onnx.load(onnx_path)
    got = np.load(os.path.join(out, model.graph.output[0].name + ".npy"))
    step = output_step(model)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
    want = {"onnxruntime": sess.run(None, {"x": x})[0], "PyTorch": np.load(os.path.join(a.out_dir, "torch_y.npy"))}
    for who, w in want.items():
        steps = np.abs(got.astype(np.float64) - w) / step
        share = float(np.mean(steps <= 1.0 + 1e-3)) if got.shape == w.shape else 0.0
        ok = share >= 0.99
        print("%s   vs %s: %.1f%% within one step (%.4g), at most %.1f steps" % ("ok:" if ok else "FAIL:", who,
              100 * share, step, steps.max() if got.shape == w.shape else float("nan")))
        failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
