#!/usr/bin/env python3
"""Check one case of gen_msft_models.py: a model with onnxruntime's
transformer contrib ops through kiln.

  1. `kiln compile --report`: no com.microsoft contrib op is left (the
     normalize-msft pass rewrote every one), and the report holds as many
     Attention nodes as meta.json says (each attention block one node);
  2. the artifact's outputs against onnxruntime's (expected_*.npy): max
     |kiln - ort| <= 1e-4 * max |ort| per output;
  3. `kiln run --reference` on the .onnx (the reference evaluator, after
     the same rewrite), same tolerance.

A case whose meta.json says "refuse" must fail to compile with that text in
the error.

Usage: check_msft.py KILN CASE_DIR [-O LEVEL]
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

CONTRIB = {"SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "BiasGelu", "FastGelu",
           "MultiHeadAttention", "EmbedLayerNormalization"}
TOL = 1e-4


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def report_ops(text):
    """(node, op) of every node row of the --report table."""
    rows = []
    for line in text.splitlines():
        m = re.match(r"^(\S+)\s{2,}(\S+)\s{2,}(generated|oneDNN|runtime kernel|alias|folded)", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    return rows


def compare(label, outdir, case):
    worst = 0.0
    for exp in sorted(glob.glob(os.path.join(case, "expected_*.npy"))):
        name = os.path.basename(exp)[len("expected_"):-4]
        ref = np.load(exp)
        got = np.load(os.path.join(outdir, name + ".npy"))
        if got.shape != ref.shape or got.dtype != ref.dtype:
            sys.exit(f"{label}: output {name} is {got.dtype}{list(got.shape)}, onnxruntime's {ref.dtype}{list(ref.shape)}")
        scale = max(float(np.abs(ref).max()), 1e-30)
        err = float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()) / scale
        print(f"{label}: {name} max error {err:.3g} of max |ref| {scale:.4g}")
        if not err <= TOL:
            sys.exit(f"{label}: output {name} differs from onnxruntime by {err:.3g} (relative), over {TOL}")
        worst = max(worst, err)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kiln")
    ap.add_argument("case")
    ap.add_argument("-O", dest="level", default="3")
    args = ap.parse_args()
    case = args.case
    meta = json.load(open(os.path.join(case, "meta.json")))
    model = os.path.join(case, "model.onnx")
    inputs = []
    for f in sorted(glob.glob(os.path.join(case, "input_*.npy"))):
        inputs += ["--input", f"{os.path.basename(f)[len('input_'):-4]}={f}"]
    with tempfile.TemporaryDirectory() as tmp:
        art = os.path.join(tmp, "model.so")
        rc, text = run([args.kiln, "compile", model, "-o", art, f"-O{args.level}", "--report"])
        if meta.get("refuse"):
            if rc == 0:
                sys.exit(f"{case}: compiled, but kiln should refuse it ({meta['refuse']})")
            if meta["refuse"] not in text:
                sys.exit(f"{case}: refused, but the error does not say '{meta['refuse']}':\n{text}")
            print(f"refused as expected: {text.strip().splitlines()[-1]}")
            return
        if rc:
            sys.exit(f"{case}: kiln compile failed:\n{text}")
        rows = report_ops(text)
        if not rows:
            sys.exit(f"{case}: no node rows in the --report output:\n{text}")
        left = [r for r in rows if r[1] in CONTRIB or r[1].startswith("com.microsoft")]
        if left:
            sys.exit(f"{case}: contrib ops left after normalize-msft: {left}")
        n_att = sum(op == "Attention" for _, op in rows)
        print(f"report: {len(rows)} nodes, {n_att} Attention")
        if n_att != meta["attention"]:
            sys.exit(f"{case}: {n_att} Attention nodes in the report, expected {meta['attention']}:\n{text}")
        for label, target, extra in (("compiled", art, []), ("reference", model, ["--reference"])):
            outdir = os.path.join(tmp, label)
            os.makedirs(outdir)
            rc, text = run([args.kiln, "run", target, *inputs, "--output-dir", outdir, *extra])
            if rc:
                sys.exit(f"{case}: kiln run ({label}) failed:\n{text}")
            compare(label, outdir, case)


if __name__ == "__main__":
    main()
