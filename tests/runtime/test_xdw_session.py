"""The 1x1 expansion + depthwise pair as a session forms it from a compiled
model (runtime/src/session.c, read_by_next_alone; runtime/kernels/x86/f32_expand_dw_avx512.c).

Three MobileNet-style blocks (a 3x3 stem conv, so that the block's input
is in the session's layout, then a 1x1 expansion 16 -> 96 over 112x112
with ReLU6, depthwise 3x3, ReLU6, 1x1 projection) are compiled and run,
and their outputs compared with onnxruntime's:
  pair      the expansion's output is read by the depthwise conv alone:
            on a CPU where the session exchanges NHWC (AVX-512), `kiln
            profile` must show the pair (`(in the next step)` then
            `kiln 1x1+dw:avx512`), with the pair's FLOPs in its GFLOP/s;
  pair_s2   the same with a stride-2 depthwise conv and asymmetric pads;
  shared    the expansion's output also feeds a residual Add: no pair;
and `pair` compiled with --conv-algo direct: no pair.

  test_xdw_session.py KILN
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

PAIR_HEAD = "(in the next step)"
PAIR_TAIL = "kiln 1x1+dw:avx512"


def fail(msg):
    print("test_xdw_session: FAIL:", msg)
    sys.exit(1)


def make(path, variant):
    rng = np.random.default_rng(7)
    c, e, hw = 16, 96, 112
    stride, pads = (2, [0, 0, 1, 1]) if variant == "pair_s2" else (1, [1, 1, 1, 1])
    arrays = {
        "w_stem": rng.standard_normal((c, c, 3, 3)) * 0.2,
        "w_exp": rng.standard_normal((e, c, 1, 1)) * 0.3, "b_exp": rng.standard_normal(e) * 0.1,
        "w_dw": rng.standard_normal((e, 1, 3, 3)) * 0.3, "b_dw": rng.standard_normal(e) * 0.1,
        "w_proj": rng.standard_normal((c, e, 1, 1)) * 0.1,
        "lo": np.array(0.0), "hi": np.array(6.0),
    }
    inits = [numpy_helper.from_array(a.astype(np.float32), name=n) for n, a in arrays.items()]
    nodes = [
        helper.make_node("Conv", ["x", "w_stem"], ["stem"], name="stem", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["stem", "w_exp", "b_exp"], ["exp"], name="expand"),
        helper.make_node("Clip", ["exp", "lo", "hi"], ["exp6"], name="expand_relu6"),
        helper.make_node("Conv", ["exp6", "w_dw", "b_dw"], ["dw"], name="depthwise", group=e,
                         kernel_shape=[3, 3], strides=[stride, stride], pads=pads),
        helper.make_node("Clip", ["dw", "lo", "hi"], ["dw6"], name="depthwise_relu6"),
    ]
    last = "dw6"
    if variant == "shared":  # a second reader of the expansion's output
        nodes.append(helper.make_node("Add", ["dw6", "exp6"], ["res"], name="residual"))
        last = "res"
    nodes.append(helper.make_node("Conv", [last, "w_proj"], ["y"], name="project"))
    oh = (hw + sum(pads[0::2]) - 3) // stride + 1
    g = helper.make_graph(nodes, variant, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, oh, oh])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        fail(f"{' '.join(cmd)} exited with {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def session_is_nhwc(steps):
    """oneDNN's AVX-512 convolutions (brgconv) exchange NHWC: then the pair may form."""
    return any((s["kernel"] or "").startswith(("brg", "kiln ")) for s in steps)


def check(kiln, tmp, variant, algo, x):
    model = os.path.join(tmp, variant + ".onnx")
    make(model, variant)
    art = os.path.join(tmp, f"{variant}_{algo}.so")
    run([kiln, "compile", model, "-o", art, "--conv-algo", algo])
    np.save(os.path.join(tmp, "x.npy"), x)
    out_dir = os.path.join(tmp, f"out_{variant}_{algo}")
    run([kiln, "run", art, "--input", "x=" + os.path.join(tmp, "x.npy"), "--output-dir", out_dir])
    got = np.load(os.path.join(out_dir, "y.npy"))
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    err = np.abs(got - want).max() / np.abs(want).max()
    if got.shape != want.shape or not err < 1e-5:
        fail(f"{variant} ({algo}): shape {got.shape} vs {want.shape}, relative error {err:.3g}")
    steps = json.loads(run([kiln, "profile", art, "--runs", "2", "--no-peak", "--json"]))["steps"]
    kernels = [s["kernel"] for s in steps]
    paired = PAIR_TAIL in kernels
    want_pair = variant != "shared" and algo == "auto" and session_is_nhwc(steps)
    if paired != want_pair:
        fail(f"{variant} ({algo}): pair {'formed' if paired else 'not formed'}, kernels {kernels}")
    if paired:
        t = kernels.index(PAIR_TAIL)
        head, tail = steps[t - 1], steps[t]
        if head["kernel"] != PAIR_HEAD or head["name"] != "expand" or tail["name"] != "depthwise":
            fail(f"{variant}: the pair is {head['name']} ({head['kernel']}) + {tail['name']}")
        rate = (head["flops"] + tail["flops"]) / (tail["ms"] * 1e6)
        if head["gflops_per_s"] != 0 or abs(tail["gflops_per_s"] - rate) > 1e-3 * rate:
            fail(f"{variant}: GFLOP/s {head['gflops_per_s']} and {tail['gflops_per_s']}, expected 0 and {rate}")
    print(f"{variant} ({algo}): relative error {err:.2g}, pair {'formed' if paired else 'not formed'}")
    return paired


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    kiln = sys.argv[1]
    x = np.random.default_rng(1).standard_normal((1, 16, 112, 112)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        for variant, algo in [("pair", "auto"), ("pair_s2", "auto"), ("shared", "auto"), ("pair", "direct")]:
            check(kiln, tmp, variant, algo, x)
    print("test_xdw_session: ok")


if __name__ == "__main__":
    main()
