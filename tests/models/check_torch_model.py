#!/usr/bin/env python3
"""A PyTorch-exported model (gen_torch_models.py) through kiln compile.

  check_torch_model.py KILN SYSTEM_PYTHON MODEL OUT_DIR --attention N

Generates the model with the system python3 (PyTorch; exit 77 with a SKIP
line when it is missing), compiles it with --report and checks that N
Attention nodes replaced every attention block (no Softmax left), then runs
the artifact and compares its output with onnxruntime's and PyTorch's: at
most 1e-4 apart (absolute; the outputs are O(1)).
"""
import argparse
import glob
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort

from torch_export import generate_and_compile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("system_python")
    ap.add_argument("model")
    ap.add_argument("out_dir")
    ap.add_argument("--attention", type=int, required=True)
    a = ap.parse_args()
    onnx_path, art, report = generate_and_compile(a.kiln, a.system_python, a.model, a.out_dir)
    ops = [ln.split()[1] for ln in report.splitlines() if len(ln.split()) > 2 and not ln.startswith(" ")]
    failed = 0
    n_attn, n_softmax = ops.count("Attention"), ops.count("Softmax")
    print("%s   --report: %d Attention nodes (want %d), %d Softmax left"
          % ("ok:" if n_attn == a.attention and not n_softmax else "FAIL:", n_attn, a.attention, n_softmax))
    if n_attn != a.attention or n_softmax:
        failed += 1
        print("\n".join(ln for ln in report.splitlines() if "attention" in ln))
    feeds, args = {}, []
    for f in sorted(glob.glob(os.path.join(a.out_dir, "input_*.npy"))):
        name = os.path.basename(f)[len("input_"):-4]
        feeds[name] = np.load(f)
        args += ["--input", "%s=%s" % (name, f)]
    out = os.path.join(a.out_dir, "out")
    r = subprocess.run([a.kiln, "run", art, "--output-dir", out] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAIL: kiln run: " + r.stderr.strip())
    got = np.load(os.path.join(out, "y.npy"))
    want = {"onnxruntime": ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"]).run(None, feeds)[0],
            "PyTorch": np.load(os.path.join(a.out_dir, "torch_y.npy"))}
    for who, w in want.items():
        err = float(np.abs(got - w).max())
        ok = got.shape == w.shape and err <= 1e-4
        print("%s   vs %s: max |a-b| %.2e (max |b| %.2f)" % ("ok:" if ok else "FAIL:", who, err, np.abs(w).max()))
        failed += not ok
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
