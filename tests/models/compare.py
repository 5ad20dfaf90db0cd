#!/usr/bin/env python3
"""Compare kiln's outputs with onnxruntime's for one generated model.

For every EXPECTED_DIR/expected_<name>.npy, loads ACTUAL_DIR/<name>.npy and
checks shape, dtype and, element by element as numpy.isclose does,
    |actual - expected| <= atol + rtol * |expected|
with rtol 1e-4 and atol = 1e-5 * max|expected| (the part of the error that
comes from sums cancelling scales with the terms, not with the element).
The old check, max|a-b| / max|b| <= 1e-4, let small outputs be off by 100x
what kiln's errors are (~8e-7 of max|b|). Prints the worst element's share
of its tolerance per output; exits 1 if any output is missing or off.

If EXPECTED_DIR holds tolerance.json (the quantized cases and models,
gen_qop_cases.py and gen_quant_models.py), an output it names is judged by
its entry instead:
  {"exact": true}                  every element equal (integer outputs of exact ops)
  {"atol": A, "rtol": R}           |actual - expected| <= A + R*|expected|, in float64
                                   (for 8-bit outputs A = 1 is one quantization step)
  {"cosine_min": C}                cosine(actual, expected) >= C over the whole tensor
                                   (whole quantized networks, where rounding compounds)

Usage: compare.py EXPECTED_DIR ACTUAL_DIR [--rtol 1e-4] [--atol-scale 1e-5]
"""
import json
import argparse
import glob
import os
import sys

import numpy as np


def compare_tol(name, exp, act, tol):
    """Judges one output by its tolerance.json entry."""
    e64, a64 = exp.astype(np.float64), act.astype(np.float64)
    if tol.get("exact"):
        bad = int(np.count_nonzero(act != exp))
        print(f"{'ok  ' if bad == 0 else 'FAIL'} {name}: {bad} of {exp.size} elements differ (exact)")
        return bad == 0
    if not np.all(np.isfinite(a64)):
        print(f"FAIL {name}: {int(np.count_nonzero(~np.isfinite(a64)))} non-finite values")
        return False
    if "cosine_min" in tol:
        den = float(np.linalg.norm(a64) * np.linalg.norm(e64))
        cos = float((a64.ravel() @ e64.ravel()) / den) if den > 0 else float(np.array_equal(a64, e64))
        ok = cos >= tol["cosine_min"]
        print(f"{'ok  ' if ok else 'FAIL'} {name}: cosine {cos:.6f} (at least {tol['cosine_min']}); "
              f"max|a-b|/max|b| = {float(np.abs(a64 - e64).max()) / max(float(np.abs(e64).max()), 1e-30):.3e}")
        return ok
    atol, rtol = float(tol.get("atol", 0)), float(tol.get("rtol", 0))
    diff = np.abs(a64 - e64)
    bound = atol + rtol * np.abs(e64)
    bad = int(np.count_nonzero(diff > bound))
    worst = np.unravel_index(int((diff - bound).argmax()), diff.shape) if diff.size else ()
    ok = bad == 0
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {bad} of {exp.size} elements outside atol {atol:.3g} + "
          f"rtol {rtol:g}*|b|" + (f"; worst at {list(map(int, worst))}: a = {a64[worst]:.6g}, "
                                    f"b = {e64[worst]:.6g}" if diff.size else ""))
    return ok


def compare_one(name, expected_path, actual_path, rtol, atol_scale, tol=None):
    if not os.path.exists(actual_path):
        print(f"FAIL {name}: kiln wrote no {os.path.basename(actual_path)}")
        return False
    exp = np.load(expected_path)
    act = np.load(actual_path)
    if act.shape != exp.shape:
        print(f"FAIL {name}: shape {list(act.shape)}, expected {list(exp.shape)}")
        return False
    if act.dtype != exp.dtype:
        print(f"FAIL {name}: dtype {act.dtype}, expected {exp.dtype}")
        return False
    if tol is not None:
        return compare_tol(name, exp, act, tol)
    if exp.dtype.kind not in "fc":
        bad = int(np.count_nonzero(act != exp))
        print(f"{'ok  ' if bad == 0 else 'FAIL'} {name}: {bad} of {exp.size} elements differ")
        return bad == 0
    if not np.all(np.isfinite(act)):
        print(f"FAIL {name}: {int(np.count_nonzero(~np.isfinite(act)))} non-finite values")
        return False
    e64, a64 = exp.astype(np.float64), act.astype(np.float64)
    diff = np.abs(a64 - e64)
    scale = max(float(np.abs(e64).max()), np.finfo(np.float32).tiny)
    atol = atol_scale * scale
    share = diff / (atol + rtol * np.abs(e64))
    worst = np.unravel_index(int(share.argmax()), share.shape)
    bad = int(np.count_nonzero(share > 1))
    ok = bad == 0
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {bad} of {exp.size} elements outside atol {atol:.3g} + rtol {rtol:g}*|b|; "
          f"worst at {list(map(int, worst))}: |a-b| = {diff[worst]:.3e}, b = {e64[worst]:.6g} "
          f"({share[worst]:.3f} of its tolerance); max|a-b|/max|b| = {float(diff.max()) / scale:.3e}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("expected_dir")
    ap.add_argument("actual_dir")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol-scale", type=float, default=1e-5)
    args = ap.parse_args()
    expected = sorted(glob.glob(os.path.join(args.expected_dir, "expected_*.npy")))
    if not expected:
        sys.exit(f"compare: no expected_*.npy in {args.expected_dir}")
    tols = {}
    tol_path = os.path.join(args.expected_dir, "tolerance.json")
    if os.path.exists(tol_path):
        with open(tol_path) as f:
            tols = json.load(f)
    ok = True
    for path in expected:
        name = os.path.basename(path)[len("expected_"):-len(".npy")]
        ok &= compare_one(name, path, os.path.join(args.actual_dir, name + ".npy"), args.rtol,
                          args.atol_scale, tols.get(name))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
