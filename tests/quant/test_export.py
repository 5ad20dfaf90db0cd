#!/usr/bin/env python3
"""kiln export: the QDQ model it writes passes onnx.checker, onnxruntime runs
it, and its outputs agree with kiln's own INT8 artifact compiled from the
same model and table (`kiln compile --quantize static-int8 --calib`).

Agreement: >= 99% of the output elements within one output quantization
step (the output tensor's scale in the table) of the artifact's, against
onnxruntime with graph optimizations off (ORT_DISABLE_ALL: the reference
QuantizeLinear/DequantizeLinear/float kernels, the same arithmetic kiln's
fake quantization does), on every CPU: without VNNI kiln quantizes weights
to 7 bits, which u8 x s8 kernels sum exactly. onnxruntime's optimized
session is measured and printed too.

Then the errors: a missing table, another model's table, an output path
that cannot be written (no partial or temporary file left, an existing
file untouched).

Usage: test_export.py KILN
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
KILN = sys.argv[1]
fails = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        fails.append(what)


def kiln(*args, want_rc=0):
    r = subprocess.run([KILN, *args], capture_output=True, text=True)
    if want_rc is not None and r.returncode != want_rc:
        print(f"kiln {' '.join(args)}: rc {r.returncode}\n{r.stdout}{r.stderr}")
    return r


def ort_outputs(path, feeds, opt):
    so = ort.SessionOptions()
    so.graph_optimization_level = opt
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return [s.run(None, f) for f in feeds]


def artifact_outputs(art, model, samples, out_names, tmp, extra=()):
    res = []
    for i, f in enumerate(samples):
        d = os.path.join(tmp, f"out_{os.path.basename(art)}_{i}")
        r = kiln("run", art, *extra, "--input", f"x={f}", "--output-dir", d)
        if r.returncode:
            return None
        res.append([np.load(os.path.join(d, n + ".npy")) for n in out_names])
    return res


def fake_quant_pipeline():
    """The -O3 pass pipeline without lower-qdq: the artifact then runs the
    QDQ graph's arithmetic in float kernels, what ORT_DISABLE_ALL does."""
    r = kiln("compile", "--help")
    line = next(l for l in r.stdout.splitlines() if l.strip().startswith("-O3"))
    return ",".join(p for p in line.split()[1].split(",") if p != "lower-qdq")


def agreement(a, b, scale):
    """Fraction of elements of b within one step of a, and the largest |a - b| in steps."""
    d = np.concatenate([np.abs(x - y).ravel() for ra, rb in zip(a, b) for x, y in zip(ra, rb)])
    return float(np.mean(d <= scale * 1.0001)), float(d.max() / scale)


def export_case(tmp, name, extra=()):
    """Calibrate, export, compile; compare the export in onnxruntime with the artifact."""
    model = os.path.join(tmp, name + ".onnx")
    table = os.path.join(tmp, name + ".json")
    qdq = os.path.join(tmp, name + "_qdq.onnx")
    art = os.path.join(tmp, name + "_q.so")
    r = kiln("calibrate", model, "--data", os.path.join(tmp, name + "_data"), *extra, "-o", table)
    check(r.returncode == 0, f"{name}: calibrate")
    r = kiln("export", model, "--calib", table, "-o", qdq)
    check(r.returncode == 0 and os.path.exists(qdq), f"{name}: export")
    if r.returncode:
        return
    m = onnx.load(qdq)
    try:
        onnx.checker.check_model(m, full_check=True)
        check(True, f"{name}: onnx.checker (full_check) accepts the export")
    except Exception as e:  # noqa: BLE001 - the checker's own exception types vary
        check(False, f"{name}: onnx.checker: {e}")
    ops = [n.op_type for n in m.graph.node]
    check(all(n.domain in ("", "ai.onnx") for n in m.graph.node), f"{name}: only standard-domain ops")
    check("QuantizeLinear" in ops and "DequantizeLinear" in ops, f"{name}: has QDQ pairs")
    weights = [t for t in m.graph.initializer if t.data_type == onnx.TensorProto.INT8]
    check(len(weights) > 0, f"{name}: weights are s8 initializers ({len(weights)})")
    check(all(t.HasField("raw_data") for t in m.graph.initializer), f"{name}: initializers use raw_data")
    r = kiln("compile", model, "--quantize", "static-int8", "--calib", table, "-o", art)
    check(r.returncode == 0, f"{name}: compile static-int8")
    fq = os.path.join(tmp, name + "_fq.so")
    r2 = kiln("compile", model, "--quantize", "static-int8", "--calib", table, "--passes", fake_quant_pipeline(),
              "-o", fq)
    check(r2.returncode == 0, f"{name}: compile static-int8 without lower-qdq")
    if r.returncode or r2.returncode:
        return
    samples = sorted(glob.glob(os.path.join(tmp, name + "_eval", "x_*.npy")),
                     key=lambda p: int(p.rsplit("_", 1)[1][:-4]))
    feeds = [{"x": np.load(f)} for f in samples]
    out_names = [o.name for o in m.graph.output]
    got = artifact_outputs(art, model, samples, out_names, tmp)
    check(got is not None, f"{name}: kiln run of the artifact")
    if got is None:
        return
    fake = artifact_outputs(fq, model, samples, out_names, tmp)
    ref = artifact_outputs(qdq, model, samples, out_names, tmp, ("--reference",))
    check(ref is not None, f"{name}: kiln run --reference of the export")
    if ref is None:
        return
    tensors = json.load(open(table))["tensors"]
    scale = tensors[out_names[0]]["scale"]
    noopt = ort_outputs(qdq, feeds, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    full = ort_outputs(qdq, feeds, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    a0, m0 = agreement(got, noopt, scale)
    a1, m1 = agreement(got, full, scale)
    a2, m2 = agreement(ref, noopt, scale)
    a3, m3 = agreement(fake, noopt, scale)
    n = sum(x.size for r_ in got for x in r_)
    print(f"{name}: {n} output elements, step {scale:.6g}; share within one step:\n"
          f"  kiln artifact vs onnxruntime ORT_DISABLE_ALL   {100 * a0:6.2f}% (max {m0:.2f} steps)\n"
          f"  kiln artifact vs onnxruntime ORT_ENABLE_ALL    {100 * a1:6.2f}% (max {m1:.2f} steps)\n"
          f"  kiln artifact without lower-qdq (QDQ as float kernels) vs ORT_DISABLE_ALL {100 * a3:6.2f}% "
          f"(max {m3:.2f} steps)\n"
          f"  kiln reference evaluator on the export vs ORT_DISABLE_ALL {100 * a2:6.2f}% (max {m2:.2f} steps)")
    # the export means to onnxruntime what it means to kiln
    check(a2 >= 0.99, f"{name}: export through kiln's evaluator vs onnxruntime: >= 99% within one step")
    check(a3 >= 0.99, f"{name}: kiln's artifact without the integer lowering vs onnxruntime: >= 99% within one step")
    # kiln quantizes weights to 7 bits on CPUs without VNNI (--weight-bits),
    # where u8 x s8 pair sums saturate in int16: its int8 kernels are then
    # the graph's exact arithmetic on every CPU
    check(a0 >= 0.99, f"{name}: kiln's INT8 artifact vs the export in onnxruntime ORT_DISABLE_ALL: "
                      f">= 99% within one step ({100 * a0:.2f}%)")


def errors(tmp):
    model = os.path.join(tmp, "cnn.onnx")
    table = os.path.join(tmp, "cnn.json")
    out = os.path.join(tmp, "keep.onnx")
    with open(out, "wb") as f:
        f.write(b"old")
    missing = os.path.join(tmp, "nope.json")
    r = kiln("export", model, "--calib", missing, "-o", out, want_rc=1)
    check(r.returncode == 1 and "nope.json" in r.stderr, f"missing table: rc 1 naming it ({r.stderr.strip()})")
    check(open(out, "rb").read() == b"old", "missing table: the existing output is untouched")
    r = kiln("export", model, "--calib", os.path.join(tmp, "mlp.json"), "-o", out, want_rc=1)
    check(r.returncode == 1 and "another model" in r.stderr, f"another model's table: refused ({r.stderr.strip()})")
    r = kiln("export", model, "-o", out, want_rc=2)
    check(r.returncode == 2 and "--calib" in r.stderr, "no --calib: usage error")
    # a folder that does not exist, and a path that is a folder: the write
    # fails, and no temporary file is left beside it
    r = kiln("export", model, "--calib", table, "-o", os.path.join(tmp, "no", "such", "dir", "q.onnx"), want_rc=1)
    check(r.returncode == 1 and "cannot" in r.stderr, f"unwritable folder: rc 1 ({r.stderr.strip()})")
    os.mkdir(os.path.join(tmp, "adir"))
    r = kiln("export", model, "--calib", table, "-o", os.path.join(tmp, "adir"), want_rc=1)
    check(r.returncode == 1 and "adir" in r.stderr, f"output is a folder: rc 1 ({r.stderr.strip()})")
    check(os.path.isdir(os.path.join(tmp, "adir")), "output is a folder: the folder is untouched")
    left = [p for p in os.listdir(tmp) if ".tmp" in p]
    check(not left, f"no temporary files left behind ({left})")
    r = kiln("--help")
    check("export" in r.stdout, "kiln --help lists export")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "gen_quant_models.py"), tmp, "--samples", "24",
                        "--eval", "64"], check=True, stdout=subprocess.DEVNULL)
        export_case(tmp, "cnn")
        export_case(tmp, "mlp", ("--per-channel",))
        errors(tmp)
    if fails:
        print(f"{len(fails)} checks failed")
        return 1
    print("all export checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
