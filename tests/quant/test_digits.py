#!/usr/bin/env python3
"""Static INT8 accuracy on a real (small) trained model: the digits CNN of
gen_digits.py, calibrated by `kiln calibrate` on 200 training images with
each method, compiled with `--quantize static-int8 --calib`, and scored on
the held-out test split (not the 200). Each method's INT8 accuracy may be at
most 0.5 points below the FP32 artifact's.

Also printed, not checked: the accuracy of the same table's `kiln export`
run by onnxruntime with graph optimizations off (the QDQ graph's exact
arithmetic), which shows what the integer kernels' own rounding and
saturation cost.

Usage: test_digits.py KILN CACHE_DIR   (the trained model is cached there)
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KILN, CACHE = sys.argv[1], sys.argv[2]
METHODS = ("minmax", "percentile", "entropy", "mse")
MAX_DROP = 0.5  # points


def kiln(*args):
    r = subprocess.run([KILN, *args], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"kiln {' '.join(args)} failed (rc {r.returncode}):\n{r.stdout}{r.stderr}")


def accuracy(art, tag, x_path, y):
    out = os.path.join(CACHE, "out_" + tag)
    kiln("run", art, "--input", f"x={x_path}", "--output-dir", out)
    return 100.0 * float((np.load(os.path.join(out, "logits.npy")).argmax(1) == y).mean())


def ort_accuracy(model, x, y):
    try:
        import onnxruntime as ort
    except ImportError:
        return float("nan")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return 100.0 * float((s.run(None, {"x": x})[0].argmax(1) == y).mean())


def main():
    subprocess.run([sys.executable, os.path.join(HERE, "gen_digits.py"), CACHE], check=True)
    model = os.path.join(CACHE, "digits.onnx")
    x_path = os.path.join(CACHE, "test_x.npy")
    x, y = np.load(x_path), np.load(os.path.join(CACHE, "test_y.npy"))
    shape = f"N={len(y)}"  # the whole test split in one run
    fp32 = os.path.join(CACHE, "fp32.so")
    kiln("compile", model, "--shape", shape, "-o", fp32)
    acc_f = accuracy(fp32, "fp32", x_path, y)
    rows, fails = [], []
    for m in METHODS:
        table = os.path.join(CACHE, f"calib_{m}.json")
        art = os.path.join(CACHE, f"int8_{m}.so")
        qdq = os.path.join(CACHE, f"qdq_{m}.onnx")
        kiln("calibrate", model, "--data", "x=" + os.path.join(CACHE, "calib.npy"), "--method", m, "-o", table)
        kiln("compile", model, "--shape", shape, "--quantize", "static-int8", "--calib", table, "-o", art)
        acc_q = accuracy(art, "int8_" + m, x_path, y)
        kiln("export", model, "--calib", table, "-o", qdq)
        rows.append((m, acc_f, acc_q, acc_f - acc_q, ort_accuracy(qdq, x, y)))
        if acc_f - acc_q > MAX_DROP + 1e-9:
            fails.append(m)
    print(f"digits CNN, {len(y)} held-out images, calibrated on 200 training images")
    print(f"{'method':<12}{'FP32 %':>9}{'INT8 %':>9}{'drop':>8}{'   export in ORT (no opt) %':>28}")
    for m, f, q, d, o in rows:
        print(f"{m:<12}{f:>9.2f}{q:>9.2f}{d:>8.2f}{o:>28.2f}")
    if acc_f < 95.0:
        print(f"FAIL: the FP32 artifact scores {acc_f:.2f}%, under the 95% the trained model should reach")
        return 1
    if fails:
        print(f"FAIL: INT8 accuracy drops more than {MAX_DROP} points with: {', '.join(fails)}")
        return 1
    print(f"every method within {MAX_DROP} points of FP32")
    return 0


if __name__ == "__main__":
    sys.exit(main())
