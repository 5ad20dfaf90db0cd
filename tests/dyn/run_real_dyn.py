#!/usr/bin/env python3
"""The bench models of tests/models/gen_real_models.py in their dynamic form
(--dynamic: torch.onnx.export's dynamic_axes), compiled with their varying
dims bounded (not pinned), run at three sizes (the smallest allowed among
them) against onnxruntime, the refusals (off the alignment, below the
minimum, above the maximum) asserted by their messages, and --report
showing every conv and pooling over dynamic spatial dims on oneDNN.

Usage: run_real_dyn.py KILN WORK_DIR MODEL
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import gen_real_models as grm  # noqa: E402

KILN, WORK, MODEL = sys.argv[1:4]
f32 = np.float32
failures = []

# model: (compile options, input builder per size, sizes, refusals (size, message))
def image(c, h, w):
    return lambda rng: {"input": rng.standard_normal((1, c, h, w)).astype(f32)}


def audio(t):
    def make(rng):
        d = {"features": rng.standard_normal((t, 1, 64)).astype(f32)}
        for k in ("h0", "c0", "g0"):
            d[k] = (0.1 * rng.standard_normal((1, 1, 128))).astype(f32)
        return d
    return make


def batch(n):
    return lambda rng: {"input": rng.standard_normal((n, 3, 224, 224)).astype(f32)}


CASES = {
    # H and W both dynamic, multiples of 32 (five stride-2 stages)
    "dbnet": (["--shape", "input=1x3x[32..256%32]x[32..256%32]"],
              {"32x32": image(3, 32, 32), "96x64": image(3, 96, 64), "256x160": image(3, 256, 160)},
              [("48x64", image(3, 48, 64), "dim 2 (height) is 48, not a multiple of 32"),
               ("288x64", image(3, 288, 64), "dim 2 (height) is 288, the artifact was compiled for at most 256")]),
    # a line of any width, a multiple of 4 (two 2x2 poolings), at least 32
    "crnn": (["--max", "width=256", "--min", "width=32", "--align", "width=4"],
             {"32": image(1, 32, 32), "100": image(1, 32, 100), "256": image(1, 32, 256)},
             [("102", image(1, 32, 102), "dim 3 (width) is 102, not a multiple of 4"),
              ("28", image(1, 32, 28), "dim 3 (width) is 28, the artifact was compiled for at least 32"),
              ("260", image(1, 32, 260), "dim 3 (width) is 260, the artifact was compiled for at most 256")]),
    # the anchors' count is height*width/64 + ...: a product of two dynamic dims is not affine in
    # either, so the height is pinned and the width varies (multiples of 32, at least 64)
    "yolov8n": (["--shape", "height=64", "--max", "width=256", "--min", "width=64", "--align", "width=32"],
                {"64": image(3, 64, 64), "160": image(3, 64, 160), "256": image(3, 64, 256)},
                [("100", image(3, 64, 100), "dim 3 (width) is 100, not a multiple of 32"),
                 ("32", image(3, 64, 32), "dim 3 (width) is 32, the artifact was compiled for at least 64")]),
    "mobilenetv3": (["--max", "batch=3"], {"1": batch(1), "2": batch(2), "3": batch(3)},
                    [("4", batch(4), "dim 0 (batch) is 4, the artifact was compiled for at most 3")]),
    "audio_rnn": (["--max", "frames=48", "--min", "frames=2"], {"2": audio(2), "17": audio(17), "48": audio(48)},
                  [("1", audio(1), "dim 0 (frames) is 1, the artifact was compiled for at least 2"),
                   ("49", audio(49), "dim 0 (frames) is 49, the artifact was compiled for at most 48")]),
}


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def kiln(*args):
    p = subprocess.run([KILN, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def write_inputs(d, feeds):
    os.makedirs(d, exist_ok=True)
    args = []
    for k, v in feeds.items():
        path = os.path.join(d, k + ".npy")
        np.save(path, v)
        args += ["--input", f"{k}={path}"]
    return args


def main():
    work = os.path.join(WORK, MODEL)
    os.makedirs(work, exist_ok=True)
    model = grm.write_dynamic(MODEL, work)
    opts, sizes, refusals = CASES[MODEL]
    art = os.path.join(work, MODEL + ".so")
    rc, rep, se = kiln("compile", model, "-o", art, "--report", *opts)
    if rc:
        sys.exit(f"kiln compile {MODEL} {' '.join(opts)} failed:\n{se}")
    for line in rep.splitlines():
        f = line.split()
        if len(f) >= 3 and f[1] in ("Conv", "FusedConv", "MaxPool", "AveragePool") and "runtime kernel" in line:
            check(False, f"{MODEL}: {f[0]} ({f[1]}) runs its runtime kernel, not oneDNN")
    n_dyn = sum("oneDNN, run-time shape" in line for line in rep.splitlines())
    if MODEL in ("dbnet", "crnn", "yolov8n"):
        check(n_dyn > 0, f"{MODEL}: {n_dyn} convs/poolings on oneDNN at the run-time shape")
        # those that hand each other their activations do so channels-last (no reorders between them)
        n_nhwc = sum("oneDNN, run-time shape" in line and ", NHWC" in line for line in rep.splitlines())
        check(n_nhwc >= {"dbnet": 14, "crnn": 6, "yolov8n": 60}[MODEL],
              f"{MODEL}: {n_nhwc} of them exchange NHWC activations")
    if MODEL == "yolov8n":
        # the C2f blocks' Split, Add and Concat between them stay channels-last (KN_OPNODE_NHWC_ALL)
        agn = {op: sum(len(line.split()) > 2 and line.split()[1] == op and "runtime kernel, NHWC" in line
                       for line in rep.splitlines()) for op in ("Concat", "Split", "Add")}
        check(agn["Concat"] >= 8 and agn["Split"] >= 8 and agn["Add"] >= 6,
              f"{MODEL}: Concat, Split and Add on NHWC activations: {agn}")
    if MODEL == "dbnet":
        # the head's upsamplings read and write their neighbours' NHWC too
        convt = [line for line in rep.splitlines()
                 if len(line.split()) > 1 and line.split()[1].endswith("ConvTranspose") and "runtime kernel" in line]
        check(len(convt) == 2 and all(", NHWC" in line for line in convt),
              f"{MODEL}: ConvTranspose at the run's shape on NHWC activations: {convt}")
        # and so do the neck's upsamplings and the Concat of its outputs (KN_OPNODE_NHWC_ALL)
        agn = {op: sum(len(line.split()) > 2 and line.split()[1] == op and "runtime kernel, NHWC" in line
                       for line in rep.splitlines()) for op in ("Resize", "Concat")}
        check(agn["Resize"] == 9 and agn["Concat"] == 1, f"{MODEL}: Resize and Concat on NHWC activations: {agn}")
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    for tag, make in sizes.items():
        feeds = make(rng)
        d = os.path.join(work, "in_" + tag)
        out = os.path.join(work, "out_" + tag)
        rc, _, se = kiln("run", art, "--output-dir", out, *write_inputs(d, feeds))
        check(rc == 0, f"{MODEL} at {tag}: {se.strip()[-400:] if rc else 'ran'}")
        if rc:
            continue
        ref = sess.run(None, feeds)
        for o, r in zip(sess.get_outputs(), ref):
            got = np.load(os.path.join(out, o.name + ".npy"))
            ok = got.shape == r.shape and np.allclose(got, r, atol=1e-4, rtol=1e-3)
            err = float(np.abs(got - r).max()) if got.shape == r.shape else float("nan")
            check(ok, f"{MODEL} at {tag}: {o.name} {got.shape} vs onnxruntime {r.shape}, max abs error {err:.2e}")
    if MODEL == "dbnet" and "avx512f" in open("/proc/cpuinfo").read().split():
        # the head's upsamplings at a run-time size run the patch kernel (runtime/src/convt.c)
        rc, prof, se = kiln("profile", art, "--runs", "1", "--no-peak", "--json", "--shape", "input=1x3x96x64")
        steps = json.loads(prof)["steps"] if rc == 0 else []
        convt = [st for st in steps if st["op"] in ("ConvTranspose", "FusedConvTranspose")]
        check(rc == 0 and convt and all(st["kernel"] == "kiln patch deconv:avx512" for st in convt),
              f"{MODEL}: ConvTranspose at a run-time size: " +
              (", ".join(f"{st['name']} on {st['kernel'] or 'the plain C kernel'}" for st in convt) or se.strip()[-300:]))
    flags = open("/proc/cpuinfo").read().split()
    if MODEL == "crnn" and "avx2" in flags and "fma" in flags:
        # 3x3 stride-1 convolutions at a run-time width run Winograd (dnnl/dynconv.c)
        rc, prof, se = kiln("profile", art, "--runs", "1", "--no-peak", "--json", "--shape", "input=1x1x32x100")
        wino = [st["name"] for st in (json.loads(prof)["steps"] if rc == 0 else [])
                if (st["kernel"] or "").startswith("winograd")]
        check(rc == 0 and len(wino) >= 4, f"{MODEL}: convolutions on Winograd at width 100: {wino or se.strip()[-300:]}")
        # FLOPs are counted at the compiled maximum: no rate at a run-time size (docs/profiling.md)
        rep = json.loads(prof) if rc == 0 else {}
        check(rep.get("counts_at_max") is True and all(st["gflops_per_s"] is None for st in rep.get("steps", [1])),
              f"{MODEL}: profile at width 100 gives rates from counts at the maximum: {str(rep)[:300]}")
    if MODEL == "yolov8n":
        # the head at a run-time width: runtime kernels, on their f32 fast paths (runtime/src/fastops.c)
        rc, prof, se = kiln("profile", art, "--runs", "1", "--no-peak", "--json", "--threads", "2",
                            "--shape", "input=1x3x64x256")
        steps = json.loads(prof)["steps"] if rc == 0 else []
        kernels = {st["op"]: set() for st in steps}
        for st in steps:
            kernels[st["op"]].add(st["kernel"] or "")
        want = {"Concat": "kiln concat", "Split": "kiln split"}
        if "avx2" in flags and "fma" in flags:
            want.update({"Sigmoid": "kiln sigmoid:avx2", "Softmax": "kiln softmax:avx2"})
        for op, k in want.items():
            check(rc == 0 and k in kernels.get(op, ()), f"{MODEL}: {op} at width 256 on {kernels.get(op) or se.strip()[-300:]}")
    if MODEL == "dbnet":
        # kiln bench and profile of the artifact at a run-time size: --shape
        # or an .npy of that size; outside the range, the session's message
        small = os.path.join(work, "in_96x64", "input.npy")
        for verb in ("bench", "profile"):
            for how in (["--shape", "input=1x3x96x64"], ["--input", "input=" + small]):
                rc, _, se = kiln(verb, art, "--runs", "2", "--warmup", "1", "--json", *how,
                                 *(["--no-peak"] if verb == "profile" else []))
                check(rc == 0, f"kiln {verb} {MODEL} {' '.join(how)}: {se.strip()[-300:]}")
        rc, _, se = kiln("bench", art, "--runs", "1", "--shape", "input=1x3x288x64")
        check(rc != 0 and "is 288, the artifact was compiled for at most 256" in se,
              f"kiln bench {MODEL} --shape input=1x3x288x64 must be refused by its range: {se.strip()[-300:]}")
        rc, _, se = kiln("bench", art, "--runs", "1", "--shape", "input=1x3x96")
        check(rc != 0 and "expected 4 dims" in se, f"kiln bench {MODEL} --shape input=1x3x96: {se.strip()[-300:]}")
    for tag, make, msg in refusals:
        d = os.path.join(work, "bad_" + tag)
        rc, _, se = kiln("run", art, "--output-dir", os.path.join(work, "out_bad"), *write_inputs(d, make(rng)))
        check(rc != 0 and msg in se, f"{MODEL} refuses {tag}: {se.strip()[-300:]}")
    if failures:
        sys.exit(f"{len(failures)} checks failed")


main()
