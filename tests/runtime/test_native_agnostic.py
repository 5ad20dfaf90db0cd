"""Layout-agnostic nodes between convolutions of a static model run on the
session's layout (KN_OPNODE_NATIVE_ALL, codegen/cpu/lower_dnnl.c
plan_native_agnostic; runtime/src/exec.c), against onnxruntime's outputs
(max|a-b|/max|b| <= 1e-5).

The model is a YOLOv8-style C2f block and a neck step: a conv, Split of its
channels, two 3x3 convs on one half, an Add of that half back, a Concat of
the three, a nearest 2x Resize, a Sub of a single number and a 1x1 conv
that writes the output, then the same with 8 + 24 channels (counts that do
not fill nChw16c blocks, which the session keeps plain). `--report` must
show the Split, Add, Concat, Resize and Sub as "runtime kernel, native
layout", and with --layout nchw as generated code or plain runtime kernels.
The artifact must give the same outputs whatever the session's layout is
(KILN_NATIVE_LAYOUT: NHWC as on AVX-512, nChw16c, the nChw8c of AVX2 CPUs,
plain NCHW) and as probed.

  test_native_agnostic.py KILN
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

TOL = 1e-5
AGNOSTIC = ("Split", "Add", "Concat", "Resize", "Sub")


def fail(msg):
    print("test_native_agnostic: FAIL:", msg)
    sys.exit(1)


def make(path):
    rng = np.random.default_rng(5)
    w = lambda *shape: (rng.standard_normal(shape) * (2.0 / np.prod(shape[1:])) ** 0.5).astype(np.float32)
    inits, nodes = [], []

    def conv(name, x, cin, cout, k, relu=True):
        inits.append(numpy_helper.from_array(w(cout, cin, k, k), name + ".w"))
        inits.append(numpy_helper.from_array(w(cout) * 0.1, name + ".b"))
        nodes.append(helper.make_node("Conv", [x, name + ".w", name + ".b"], [name + (".c" if relu else "")],
                                      name=name, kernel_shape=[k, k], pads=[k // 2] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [name + ".c"], [name], name=name + ".relu"))
        return name

    def block(tag, x, cin, a, b):
        """conv -> Split [a, b] -> two 3x3 convs on the b half + Add -> Concat -> Resize 2x -> Sub -> 1x1"""
        c = conv(tag + ".cv1", x, cin, a + b, 3)
        inits.append(numpy_helper.from_array(np.array([a, b], np.int64), tag + ".sizes"))
        nodes.append(helper.make_node("Split", [c, tag + ".sizes"], [tag + ".s0", tag + ".s1"], name=tag + ".split",
                                      axis=1))
        m = conv(tag + ".m2", conv(tag + ".m1", tag + ".s1", b, b, 3), b, b, 3)
        nodes.append(helper.make_node("Add", [tag + ".s1", m], [tag + ".add"], name=tag + ".add"))
        nodes.append(helper.make_node("Concat", [tag + ".s0", tag + ".s1", tag + ".add"], [tag + ".cat"],
                                      name=tag + ".concat", axis=1))
        inits.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), tag + ".scales"))
        nodes.append(helper.make_node("Resize", [tag + ".cat", "", tag + ".scales"], [tag + ".up"], name=tag + ".up",
                                      mode="nearest", coordinate_transformation_mode="asymmetric",
                                      nearest_mode="floor"))
        inits.append(numpy_helper.from_array(np.array(0.5, np.float32), tag + ".half"))
        nodes.append(helper.make_node("Sub", [tag + ".up", tag + ".half"], [tag + ".sub"], name=tag + ".sub"))
        return conv(tag + ".cv2", tag + ".sub", a + 2 * b, 32, 1)

    y = block("b1", "x", 16, 16, 16)  # 48 channels after the Concat: whole blocks of 8 and 16
    nodes.append(helper.make_node("MaxPool", [y], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    y = block("b2", "pool", 32, 8, 24)  # 8, 24 and 56 channels: kept plain where blocks of 16 would pad them
    nodes[-1].output[0] = "y"
    g = helper.make_graph(nodes, "native_agnostic",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 12, 20])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 24, 40])], inits)
    mdl = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    mdl.ir_version = 8
    onnx.checker.check_model(mdl)
    onnx.save(mdl, path)


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        fail(f"{' '.join(cmd)} exited with {r.returncode}: {r.stderr.strip()[-500:]}")
    return r


def report(kiln, model, art, *flags):
    rep = run([kiln, "compile", model, "-o", art, "--report", *flags]).stdout
    how = {}
    for line in rep.splitlines():
        f = line.split(None, 2)
        if len(f) == 3 and f[1] in AGNOSTIC:
            how[f[0]] = f[2].strip()
    return how


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    kiln = sys.argv[1]
    x = np.random.default_rng(3).standard_normal((1, 16, 12, 20)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.onnx")
        make(model)
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        want = want.astype(np.float64)
        x_path = os.path.join(tmp, "x.npy")
        np.save(x_path, x)
        art, art_nchw = os.path.join(tmp, "m.so"), os.path.join(tmp, "m_nchw.so")
        how = report(kiln, model, art)
        if len(how) != 10 or any(h != "runtime kernel, native layout" for h in how.values()):
            fail(f"Split, Add, Concat, Resize and Sub between convolutions not on the session's layout: {how}")
        how_nchw = report(kiln, model, art_nchw, "--layout", "nchw")
        if any("native" in h or "NHWC" in h for h in how_nchw.values()):
            fail(f"--layout nchw: agnostic nodes on the session's layout: {how_nchw}")
        print(f"report: {len(how)} nodes on the session's layout; --layout nchw: {sorted(set(how_nchw.values()))}")
        for label, layout in [("probed", None), ("nhwc", "nhwc"), ("nChw16c", "block16"), ("nChw8c", "block8"),
                              ("plain", "plain"), ("--layout nchw", None)]:
            env = {k: v for k, v in os.environ.items() if k != "KILN_NATIVE_LAYOUT"}
            if layout:
                env["KILN_NATIVE_LAYOUT"] = layout
            out = os.path.join(tmp, "out_" + label.replace(" ", "_"))
            run([kiln, "run", art_nchw if label.startswith("--") else art, "--input", "x=" + x_path,
                 "--output-dir", out], env)
            got = np.load(os.path.join(out, "y.npy"))
            err = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
            if got.shape != want.shape or not err <= TOL:
                fail(f"{label}: shape {got.shape} vs {want.shape}, relative error {err:.3g} (tolerance {TOL:g})")
            print(f"{label}: relative error {err:.2g}")
    print("test_native_agnostic: OK")


if __name__ == "__main__":
    main()
