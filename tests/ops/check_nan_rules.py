#!/usr/bin/env python3
"""NaN rules of the max-like ops (issue 14): kiln's reference evaluator and
its compiled code must agree with numpy's rule: a window or reduction that
holds a NaN gives NaN (np.max), and ArgMax/ArgMin (and MaxPool's Indices)
give the index of the first NaN (np.argmax, np.argmin).

onnxruntime 1.18 has no single rule to follow: its MaxPool, ReduceMax,
GlobalMaxPool and ArgMax/ArgMin keep or drop a NaN depending on where it
sits in the window and on whether a vectorized loop handles it (an all-NaN
1-D MaxPool window even gives -FLT_MAX). Its answers are run and the
windows where it differs from numpy are counted in the log, not asserted.

Every case puts NaN first, in the middle, last, everywhere, or nowhere in
its windows, and is big enough that `kiln compile --report` lists the node
as generated code, split across threads but for MaxPool with Indices (both
asserted).

Usage: check_nan_rules.py KILN_BIN OUT_DIR
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.RandomState(14)


def model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def vi(name, dt=F, shape=None):
    return helper.make_tensor_value_info(name, dt, shape)


def plant(windows):
    """windows: array [..., W] of window contents; the pattern of rows
    cycles none / first / middle / last / all NaN."""
    w = windows.reshape(-1, windows.shape[-1])
    for r in range(w.shape[0]):
        k = r % 5
        if k == 1:
            w[r, 0] = np.nan
        elif k == 2:
            w[r, w.shape[1] // 2] = np.nan
        elif k == 3:
            w[r, -1] = np.nan
        elif k == 4:
            w[r, :] = np.nan
    return windows


def nan_max(a, axis):
    return np.max(a, axis=axis)  # numpy: NaN propagates


def first_nan_arg(a, axis, is_max):
    return np.argmax(a, axis=axis) if is_max else np.argmin(a, axis=axis)  # NaN wins, first one


# ---- cases: (name, model, inputs, expected outputs) ----

def maxpool_1d():
    n, c, l, k = 2, 40, 512, 4
    x = RNG.randn(n, c, l).astype(np.float32)
    plant(x.reshape(n, c, l // k, k))
    want = nan_max(x.reshape(n, c, l // k, k), -1)
    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[k], strides=[k])],
              [vi("x", F, list(x.shape))], [vi("y")])
    return "maxpool_1d", m, {"x": x}, {"y": want}


def maxpool_2d_indices():
    n, c, h, w = 4, 40, 64, 64
    x = RNG.randn(n, c, h, w).astype(np.float32)
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).copy()
    plant(win.reshape(n, c, h // 2, w // 2, 4))
    x = win.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h, w).copy()
    flat = win.reshape(n, c, h // 2, w // 2, 4)
    want = nan_max(flat, -1)
    a = first_nan_arg(flat, -1, True)  # position in the 2x2 window, row-major
    oh, ow = np.meshgrid(np.arange(h // 2), np.arange(w // 2), indexing="ij")
    ih, iw = oh * 2 + a // 2, ow * 2 + a % 2
    plane = (np.arange(n)[:, None, None, None] * c + np.arange(c)[None, :, None, None]) * h * w
    idx = (plane + ih * w + iw).astype(np.int64)
    m = model([helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool", kernel_shape=[2, 2], strides=[2, 2])],
              [vi("x", F, list(x.shape))], [vi("y"), vi("i", I64)])
    return "maxpool_2d_indices", m, {"x": x}, {"y": want, "i": idx}


def maxpool_3d():
    n, c, d, h, w = 2, 20, 8, 32, 32
    x = RNG.randn(n, c, d, h, w).astype(np.float32)
    win = x.reshape(n, c, d // 2, 2, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 6, 3, 5, 7).copy()
    plant(win.reshape(n, c, d // 2, h // 2, w // 2, 8))
    x = win.transpose(0, 1, 2, 5, 3, 6, 4, 7).reshape(n, c, d, h, w).copy()
    want = nan_max(win.reshape(n, c, d // 2, h // 2, w // 2, 8), -1)
    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2, 2], strides=[2, 2, 2])],
              [vi("x", F, list(x.shape))], [vi("y")])
    return "maxpool_3d", m, {"x": x}, {"y": want}


def global_maxpool():
    n, c, h, w = 4, 40, 16, 16
    x = RNG.randn(n, c, h, w).astype(np.float32)
    plant(x.reshape(n, c, h * w))
    want = nan_max(x.reshape(n, c, h * w), -1).reshape(n, c, 1, 1)
    m = model([helper.make_node("GlobalMaxPool", ["x"], ["y"], name="pool")], [vi("x", F, list(x.shape))], [vi("y")])
    return "global_maxpool", m, {"x": x}, {"y": want}


def reduce_max_last():
    x = RNG.randn(160, 1024).astype(np.float32)
    plant(x)
    m = model([helper.make_node("ReduceMax", ["x"], ["y"], name="red", axes=[1], keepdims=0)],
              [vi("x", F, list(x.shape))], [vi("y")])
    return "reduce_max_last", m, {"x": x}, {"y": nan_max(x, 1)}


def reduce_max_outer():
    x = RNG.randn(40, 256, 64).astype(np.float32)
    t = x.transpose(0, 2, 1).copy()  # the pattern runs along axis 1
    plant(t)
    x = t.transpose(0, 2, 1).copy()
    m = model([helper.make_node("ReduceMax", ["x"], ["y"], name="red", axes=[1], keepdims=0)],
              [vi("x", F, list(x.shape))], [vi("y")])
    return "reduce_max_outer", m, {"x": x}, {"y": nan_max(x, 1)}


def argmax_argmin():
    x = RNG.randn(160, 1024).astype(np.float32)
    plant(x)
    m = model([helper.make_node("ArgMax", ["x"], ["amax"], name="amax", axis=1, keepdims=0),
               helper.make_node("ArgMin", ["x"], ["amin"], name="amin", axis=1, keepdims=0)],
              [vi("x", F, list(x.shape))], [vi("amax", I64), vi("amin", I64)])
    return "argmax_argmin", m, {"x": x}, {"amax": first_nan_arg(x, 1, True), "amin": first_nan_arg(x, 1, False)}


def max_elementwise():
    a = RNG.randn(160, 1024).astype(np.float32)
    b = RNG.randn(160, 1024).astype(np.float32)
    a[::3, ::2] = np.nan  # NaN in a only, b only, both, neither
    b[::2, 1::2] = np.nan
    b[::6, ::4] = np.nan
    m = model([helper.make_node("Max", ["a", "b"], ["y"], name="mx")],
              [vi("a", F, list(a.shape)), vi("b", F, list(b.shape))], [vi("y")])
    return "max", m, {"a": a, "b": b}, {"y": np.maximum(a, b)}


CASES = [maxpool_1d, maxpool_2d_indices, maxpool_3d, global_maxpool, reduce_max_last, reduce_max_outer, argmax_argmin, max_elementwise]


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def describe(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"{a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
    bad = ~((a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else (a == b))
    pos = np.argwhere(bad)
    p = tuple(pos[0])
    return f"{len(pos)} elements differ, first at {list(p)}: got {a[p]}, want {b[p]}"


def run_kiln(kiln, target, inputs, outdir, names):
    os.makedirs(outdir, exist_ok=True)
    args = [kiln, "run", target, "--output-dir", outdir]
    for k, path in inputs.items():
        args += ["--input", f"{k}={path}"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(f"kiln run {target}: {r.stderr.strip()}")
    return {n: np.load(os.path.join(outdir, n + ".npy")) for n in names}


def main():
    kiln, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    bad = 0
    for case in CASES:
        name, m, feeds, want = case()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        onnx.save(m, path)
        inputs = {}
        for k, v in feeds.items():
            inputs[k] = os.path.join(d, k + ".npy")
            np.save(inputs[k], v)
        art = os.path.join(d, "model.so")
        r = subprocess.run([kiln, "compile", path, "-o", art, "--report"], capture_output=True, text=True, timeout=600)
        if r.returncode:
            print(f"FAIL {name}: kiln compile: {r.stderr.strip()}")
            bad += 1
            continue
        rows = [l for l in r.stdout.splitlines() + r.stderr.splitlines()
                if re.match(r"\s*\S+\s+(MaxPool|GlobalMaxPool|ReduceMax|ArgMax|ArgMin|Max)\s", l)]
        summary = [l for l in r.stdout.splitlines() + r.stderr.splitlines() if "generated (" in l]
        problems = []
        if not rows or any("generated" not in l for l in rows):
            problems.append("not generated code: " + " | ".join(l.strip() for l in rows))
        # MaxPool with Indices is generated but not split across threads
        if name != "maxpool_2d_indices" and (not summary or "(0 parallel)" in summary[0]):
            problems.append("not on the parallel path: " + (summary[0].strip() if summary else "no summary"))
        names = list(want)
        got_ref = run_kiln(kiln, path, inputs, os.path.join(d, "ref"), names)
        got_cpu = run_kiln(kiln, art, inputs, os.path.join(d, "cpu"), names)
        for n in names:
            if not same(got_ref[n], want[n]):
                problems.append(f"reference '{n}': {describe(got_ref[n], want[n])}")
            if not same(got_cpu[n], want[n]):
                problems.append(f"compiled '{n}': {describe(got_cpu[n], want[n])}")
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        got_ort = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        note = []
        for n in names:
            g = got_ort[n].astype(want[n].dtype)
            if g.shape != want[n].shape:
                note.append(f"onnxruntime '{n}' has shape {list(g.shape)}")
                continue
            eq = (g == want[n]) | (np.isnan(g) & np.isnan(want[n])) if g.dtype.kind == "f" else g == want[n]
            if not eq.all():
                note.append(f"onnxruntime differs from numpy in {int((~eq).sum())} of {eq.size} '{n}' values")
        if problems:
            bad += 1
            print(f"FAIL {name}: " + "; ".join(problems))
        else:
            print(f"ok   {name}: {summary[0].strip() if summary else ''}" + "".join(f"; {t}" for t in note))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
