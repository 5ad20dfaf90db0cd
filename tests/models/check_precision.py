#!/usr/bin/env python3
"""kiln compile --precision bf16|mixed on a generated model (gen_models.py).

  check_precision.py KILN MODEL_DIR --precision mixed --bf16 47 --f32 1
      [--attn 12] [--min-cosine 0.999]

Checks, on any CPU:
  - --report marks exactly N oneDNN nodes ", bf16" (--bf16), exactly
    --attn Attention nodes "runtime kernel, bf16" (autocast marks them and
    the runtime's bf16 attention kernel runs them), and, with mixed, the
    autocast pass names the --f32 products it left f32;
  - that kiln compile warns for a target without AVX512-BF16 (x86-64-v3,
    and native on a CPU without it), and that there the artifact refuses to
    run with a message naming AVX512-BF16 and --precision fp32.
On a CPU with AVX512-BF16 it then runs the artifact on the model's inputs and
checks the outputs against onnxruntime's (expected_*.npy): cosine at least
--min-cosine, and a relative error above 1e-5, which an f32 run (bf16 not
applied) would not reach; and that kiln profile names the bf16 attention
kernel (kiln attention:avx512-bf16) for each of the --attn nodes. Without AVX512-BF16 that part is skipped (exit 77,
"SKIP: reason") after the checks above passed.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return re.search(r"^flags\s*:.*\bavx512_bf16\b", f.read(), re.M) is not None
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("model_dir")
    ap.add_argument("--precision", required=True, choices=["bf16", "mixed"])
    ap.add_argument("--bf16", type=int, required=True, help="oneDNN nodes the report marks bf16")
    ap.add_argument("--f32", type=int, default=0, help="products mixed leaves f32 (autocast remarks)")
    ap.add_argument("--attn", type=int, default=0, help="Attention nodes the report marks bf16")
    ap.add_argument("--min-cosine", type=float, default=0.999)
    a = ap.parse_args()
    mdir = a.model_dir
    inputs = []
    for f in sorted(glob.glob(os.path.join(mdir, "input_*.npy"))):
        inputs += ["--input", os.path.basename(f)[len("input_"):-4] + "=" + f]
    has_bf16 = cpu_has_bf16() and os.environ.get("KILN_CPU_MASK") is None
    with tempfile.TemporaryDirectory() as tmp:
        art = os.path.join(tmp, "model.so")
        p = subprocess.run([a.kiln, "compile", os.path.join(mdir, "model.onnx"), "-o", art, "--precision",
                            a.precision, "--report"], capture_output=True, text=True)
        if p.returncode != 0:
            fail("kiln compile --precision %s: %s" % (a.precision, p.stderr.strip()))
        marked = [ln for ln in p.stdout.splitlines() if re.search(r"  oneDNN(, in rows)?, bf16$", ln)]
        if len(marked) != a.bf16:
            fail("--report marks %d nodes bf16, expected %d" % (len(marked), a.bf16))
        print("ok:   --report: %d oneDNN nodes in bf16" % len(marked))
        attn = [ln for ln in p.stdout.splitlines() if re.search(r"\bAttention +runtime kernel, bf16$", ln)]
        if len(attn) != a.attn:
            fail("--report marks %d Attention nodes bf16, expected %d" % (len(attn), a.attn))
        if attn:
            print("ok:   --report: %d Attention nodes in bf16" % len(attn))
        kept = [ln for ln in p.stdout.splitlines() if ln.startswith("autocast: ") and "stays f32" in ln]
        if len(kept) != a.f32:
            fail("%d autocast remarks of products left f32, expected %d:\n%s" % (len(kept), a.f32, "\n".join(kept)))
        if kept:
            print("ok:   " + kept[0])
        warned = "has no AVX512-BF16" in p.stderr
        if warned != (not cpu_has_bf16()):
            fail("kiln compile %s warn about AVX512-BF16 on a CPU %s it (stderr: %r)"
                 % ("did" if warned else "did not", "with" if cpu_has_bf16() else "without", p.stderr))
        v3 = subprocess.run([a.kiln, "compile", os.path.join(mdir, "model.onnx"), "-o", os.path.join(tmp, "v3.so"),
                             "--precision", a.precision, "--target", "x86-64-v3"], capture_output=True, text=True)
        if v3.returncode != 0 or "target x86-64-v3 has no AVX512-BF16" not in v3.stderr:
            fail("kiln compile --target x86-64-v3 --precision %s: rc %d, no warning about AVX512-BF16: %r"
                 % (a.precision, v3.returncode, v3.stderr))
        print("ok:   " + v3.stderr.strip())
        out = os.path.join(tmp, "out")
        r = subprocess.run([a.kiln, "run", art, "--output-dir", out] + inputs, capture_output=True, text=True)
        if not has_bf16:
            if r.returncode == 0 or "AVX512BF16" not in r.stderr or "--precision fp32" not in r.stderr:
                fail("without AVX512-BF16 the artifact must refuse to run, naming it: rc %d, %r"
                     % (r.returncode, r.stderr))
            print("ok:   the artifact refused: " + r.stderr.strip())
            print("SKIP: the CPU has no AVX512-BF16 (or KILN_CPU_MASK is set): bf16 outputs not checked")
            sys.exit(SKIP)
        if r.returncode != 0:
            fail("kiln run: " + r.stderr.strip())
        for f in sorted(glob.glob(os.path.join(mdir, "expected_*.npy"))):
            name = os.path.basename(f)[len("expected_"):-4]
            want = np.load(f).astype(np.float64).ravel()
            got = np.load(os.path.join(out, name + ".npy")).astype(np.float64).ravel()
            cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
            rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
            print("%s %s: cosine %.6f, max |a-b|/max|b| %.2e" % ("ok:  " if cos >= a.min_cosine and rel > 1e-5
                                                                    else "FAIL:", name, cos, rel))
            if cos < a.min_cosine:
                fail("%s: cosine %.6f below %g" % (name, cos, a.min_cosine))
            if rel <= 1e-5:
                fail("%s: relative error %.2e is an f32 run's: the products did not run in bf16" % (name, rel))
        if a.attn:
            pr = subprocess.run([a.kiln, "profile", art, "--runs", "1"] + inputs, capture_output=True, text=True)
            ran = pr.stdout.count("kiln attention:avx512-bf16")
            if pr.returncode != 0 or ran != a.attn:
                fail("kiln profile: %d steps ran kiln attention:avx512-bf16, expected %d (rc %d, %r)"
                     % (ran, a.attn, pr.returncode, pr.stderr.strip()))
            print("ok:   kiln profile: %d Attention steps ran kiln attention:avx512-bf16" % ran)


if __name__ == "__main__":
    main()
