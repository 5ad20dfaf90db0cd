#!/usr/bin/env python3
"""Compare kiln's outputs with onnxruntime's for one generated model.

For every EXPECTED_DIR/expected_<name>.npy, loads ACTUAL_DIR/<name>.npy and
checks shape, dtype and  max|actual - expected| / max|expected| <= TOL.
Prints the figure per output; exits 1 if any output is missing or off.

Usage: compare.py EXPECTED_DIR ACTUAL_DIR [--tol 1e-4]
"""
import argparse
import glob
import os
import sys

import numpy as np


def compare_one(name, expected_path, actual_path, tol):
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
    rel = float(diff.max()) / scale
    where = np.unravel_index(int(diff.argmax()), diff.shape)
    ok = rel <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max|a-b|/max|b| = {rel:.3e} (tol {tol:g}); "
          f"max|a-b| = {diff.max():.3e} at {list(map(int, where))}, max|b| = {scale:.4g}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("expected_dir")
    ap.add_argument("actual_dir")
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    expected = sorted(glob.glob(os.path.join(args.expected_dir, "expected_*.npy")))
    if not expected:
        sys.exit(f"compare: no expected_*.npy in {args.expected_dir}")
    ok = True
    for path in expected:
        name = os.path.basename(path)[len("expected_"):-len(".npy")]
        ok &= compare_one(name, path, os.path.join(args.actual_dir, name + ".npy"), args.tol)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
