"""Every convolution algorithm of the runtime's table, forced through the
KILN_CONV_ALGO override (runtime/src/config.h), on a compiled model, against
onnxruntime's outputs (max|a-b|/max|b| <= 1e-5).

The model has one layer for each algorithm: 3x3 stride-1 convs (Winograd;
one adds a residual, one ends in SiLU as exporters write it, Sigmoid and
Mul), a 3x3 stride-2 conv with a 14x14 output (im2col), a 1x1 expansion
with ReLU6 read by a depthwise 3x3 alone (kiln's 1x1 kernel, the 1x1 +
depthwise pair), an Add of a per-channel constant and a squeeze-and-excitation block
(GlobalAveragePool, two 1x1 convs, HardSigmoid, Mul) between the
depthwise conv and a 1x1 projection that adds a residual, a 1x1 conv with
HardSwish, and a last 1x1 conv that writes the model's output: kiln's own kernels run only
between activations in the session's layout, so the stem (the plain
input) and the head (the plain output) are oneDNN's under any row. It is
compiled twice: in the session's layout between convolutions (every kiln
algorithm) and with --layout nchw (plain activations: the matmul row).

For each forced algorithm, `kiln profile` must show it wherever this CPU
can run it: winograd everywhere (AVX2+FMA), im2col with oneDNN held to AVX2
(blocked activations), pointwise and xdw where the session exchanges NHWC
(AVX-512); matmul must change the 1x1 layers' kernel from direct's; direct
and dnnl must show no kiln kernel. The Mul and the Add run as oneDNN
binary ops in the session's layout, and as generated loops with --layout
nchw. Every row of the tuning table
(KILN_TUNE_FAMILY) must give the same outputs, and a value of either
variable that is not one gets an error naming it.

  test_conv_algos.py KILN
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

TOL = 1e-5
FAMILIES = ["zen5", "zen4", "intel-spr", "avx512", "avx2"]


def fail(msg):
    print("test_conv_algos: FAIL:", msg)
    sys.exit(1)


def make(path):
    rng = np.random.default_rng(11)
    w = lambda *shape: (rng.standard_normal(shape) * (2.0 / np.prod(shape[1:])) ** 0.5).astype(np.float32)
    arrays = {
        "w_stem": w(32, 16, 3, 3), "b_stem": w(32) * 0.1,
        "w_c2": w(32, 32, 3, 3),
        "w_c3": w(32, 32, 3, 3), "b_c3": w(32) * 0.1,
        "w_down": w(32, 32, 3, 3), "b_down": w(32) * 0.1,
        "w_exp": w(64, 32, 1, 1), "b_exp": w(64) * 0.1,
        "w_dw": w(64, 1, 3, 3), "b_dw": w(64) * 0.1,
        "w_se1": w(16, 64, 1, 1), "b_se1": w(16) * 0.1,
        "w_se2": w(64, 16, 1, 1), "b_se2": w(64) * 0.1,
        "shift": w(64, 1, 1) * 0.1,
        "w_proj": w(32, 64, 1, 1),
        "w_mix": w(32, 32, 1, 1),
        "w_head": w(32, 32, 1, 1),
        "lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32),
    }
    inits = [numpy_helper.from_array(a, name=n) for n, a in arrays.items()]
    conv = lambda name, ins, **kw: helper.make_node("Conv", ins, [name], name=name, **kw)
    nodes = [
        conv("stem", ["x", "w_stem", "b_stem"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["stem"], ["stem_r"], name="stem_relu"),
        conv("c2", ["stem_r", "w_c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "stem_r"], ["c2_sum"], name="c2_add"),
        helper.make_node("Relu", ["c2_sum"], ["c2_r"], name="c2_relu"),
        conv("c3", ["c2_r", "w_c3", "b_c3"], pads=[1, 1, 1, 1]),  # SiLU as exporters write it
        helper.make_node("Sigmoid", ["c3"], ["c3_sig"], name="c3_sigmoid"),
        helper.make_node("Mul", ["c3", "c3_sig"], ["c3_silu"], name="c3_silu"),
        conv("down", ["c3_silu", "w_down", "b_down"], pads=[1, 1, 1, 1], strides=[2, 2]),
        conv("expand", ["down", "w_exp", "b_exp"]),
        helper.make_node("Clip", ["expand", "lo", "hi"], ["exp6"], name="expand_relu6"),
        conv("depthwise", ["exp6", "w_dw", "b_dw"], pads=[1, 1, 1, 1], group=64, kernel_shape=[3, 3]),
        helper.make_node("Clip", ["depthwise", "lo", "hi"], ["dw6"], name="depthwise_relu6"),
        # a per-channel shift by a constant, then squeeze-and-excitation
        helper.make_node("Add", ["shift", "dw6"], ["se_in"], name="se_shift"),
        helper.make_node("GlobalAveragePool", ["se_in"], ["se_pool"], name="se_pool"),
        conv("se_fc1", ["se_pool", "w_se1", "b_se1"]),
        helper.make_node("Relu", ["se_fc1"], ["se_r"], name="se_relu"),
        conv("se_fc2", ["se_r", "w_se2", "b_se2"]),
        helper.make_node("HardSigmoid", ["se_fc2"], ["se_gate"], name="se_gate", alpha=1.0 / 6, beta=0.5),
        helper.make_node("Mul", ["se_in", "se_gate"], ["se_out"], name="se_scale"),
        conv("project", ["se_out", "w_proj"]),
        helper.make_node("Add", ["project", "down"], ["proj_sum"], name="project_add"),
        conv("mix", ["proj_sum", "w_mix"]),
        helper.make_node("HardSwish", ["mix"], ["mix_hs"], name="mix_hardswish"),
        conv("head", ["mix_hs", "w_head"]),
        helper.make_node("Identity", ["head"], ["y"], name="out"),
    ]
    g = helper.make_graph(nodes, "conv_algos", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 28, 28])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 14, 14])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def run(cmd, env, expect_ok=True):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if expect_ok and r.returncode:
        fail(f"{' '.join(cmd)} exited with {r.returncode}: {r.stderr.strip()}")
    return r


def env_with(**kw):
    env = {k: v for k, v in os.environ.items() if k not in ("KILN_CONV_ALGO", "KILN_TUNE_FAMILY")}
    env.update(kw)
    return env


def outputs_and_kernels(kiln, tmp, art, x_path, want, label, env):
    out_dir = os.path.join(tmp, "out_" + label)
    run([kiln, "run", art, "--input", "x=" + x_path, "--output-dir", out_dir], env)
    got = np.load(os.path.join(out_dir, "y.npy"))
    err = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
    if got.shape != want.shape or not err <= TOL:
        fail(f"{label}: shape {got.shape} vs {want.shape}, relative error {err:.3g} (tolerance {TOL:g})")
    steps = json.loads(run([kiln, "profile", art, "--runs", "1", "--no-peak", "--json"], env).stdout)["steps"]
    return err, {s["name"]: s["kernel"] or "" for s in steps}


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    kiln = sys.argv[1]
    x = np.random.default_rng(3).standard_normal((1, 16, 28, 28)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "m.onnx")
        make(model)
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        want = want.astype(np.float64)
        x_path = os.path.join(tmp, "x.npy")
        np.save(x_path, x)
        art = os.path.join(tmp, "m.so")
        art_nchw = os.path.join(tmp, "m_nchw.so")
        run([kiln, "compile", model, "-o", art], env_with())
        run([kiln, "compile", model, "-o", art_nchw, "--layout", "nchw"], env_with())

        _, auto = outputs_and_kernels(kiln, tmp, art, x_path, want, "auto", env_with())
        nhwc = any(k.startswith(("brg", "kiln ")) for k in auto.values())
        kiln_kernel = lambda k: k.startswith(("winograd", "im2col", "kiln "))
        checks = {
            # (the stem reads the model's plain input: oneDNN's direct kernel)
            "winograd": (env_with(KILN_CONV_ALGO="winograd"),
                         lambda ks: ks["c2"].startswith("winograd") and ks["c3"].startswith("winograd"), True),
            "im2col": (env_with(KILN_CONV_ALGO="im2col", ONEDNN_MAX_CPU_ISA="AVX2"),
                       lambda ks: ks["down"].startswith("im2col"), True),
            "pointwise": (env_with(KILN_CONV_ALGO="pointwise"),
                          lambda ks: ks["project"] == ks["mix"] == "kiln 1x1:avx512", nhwc),
            "xdw": (env_with(KILN_CONV_ALGO="xdw"), lambda ks: ks["depthwise"] == "kiln 1x1+dw:avx512", nhwc),
            "direct": (env_with(KILN_CONV_ALGO="direct"), lambda ks: not any(map(kiln_kernel, ks.values())), True),
            "dnnl": (env_with(KILN_CONV_ALGO="dnnl"), lambda ks: not any(map(kiln_kernel, ks.values())), True),
        }
        for algo, (env, shown, can) in checks.items():
            err, ks = outputs_and_kernels(kiln, tmp, art, x_path, want, algo, env)
            if can and not shown(ks):
                fail(f"KILN_CONV_ALGO={algo}: not the kernels it forces: {ks}")
            if not can and any(map(kiln_kernel, (k for k in ks.values() if k.startswith("kiln ")))):
                fail(f"KILN_CONV_ALGO={algo}: a kiln AVX-512 kernel without NHWC sessions: {ks}")
            print(f"{algo}: relative error {err:.2g}, "
                  f"{'forced path shown' if can else 'not on this CPU (needs AVX-512): oneDNN'}")
        # the SE scale and the shift stay in the session's layout: oneDNN's binary op
        binary = lambda ks: [ks[n] for n in ("se_scale", "se_shift")]
        if not all(binary(auto)) or any(k.startswith("kiln ") for k in binary(auto)):
            fail(f"the SE Mul and the shift Add are not oneDNN binary ops: {binary(auto)}")
        print(f"SE scale and shift: {binary(auto)}")
        # plain activations: the 1x1 convs as oneDNN matmuls, not convolutions
        err, mm = outputs_and_kernels(kiln, tmp, art_nchw, x_path, want, "matmul", env_with(KILN_CONV_ALGO="matmul"))
        _, dr = outputs_and_kernels(kiln, tmp, art_nchw, x_path, want, "matmul_direct",
                                    env_with(KILN_CONV_ALGO="direct"))
        if mm["expand"] == dr["expand"] or mm["project"] == dr["project"]:
            fail(f"KILN_CONV_ALGO=matmul: the 1x1 layers run as with direct: {mm} vs {dr}")
        print(f"matmul: relative error {err:.2g}, 1x1 layers by {mm['project']} (direct: {dr['project']})")
        if any(binary(dr)):
            fail(f"--layout nchw: the SE Mul and the shift Add are not generated loops: {binary(dr)}")
        for fam in FAMILIES:
            err, _ = outputs_and_kernels(kiln, tmp, art, x_path, want, "family_" + fam,
                                         env_with(KILN_TUNE_FAMILY=fam))
            print(f"KILN_TUNE_FAMILY={fam}: relative error {err:.2g}")
        for var in ("KILN_CONV_ALGO", "KILN_TUNE_FAMILY"):
            r = run([kiln, "run", art, "--input", "x=" + x_path, "--output-dir", os.path.join(tmp, "bad")],
                    env_with(**{var: "bogus"}), expect_ok=False)
            if r.returncode == 0 or var not in r.stderr or "bogus" not in r.stderr:
                fail(f"{var}=bogus: exit {r.returncode}, stderr {r.stderr.strip()!r}")
            print(f"{var}=bogus: refused ({r.stderr.strip().splitlines()[-1]})")
    print("test_conv_algos: ok")


if __name__ == "__main__":
    main()
