#!/usr/bin/env python3
"""Checks scripts/ort_bench.py's contract on the digits sample (batch 2):
the one-shot mode's JSON; the --serve protocol (`ready`, `run N` -> N times,
`quit` or end of input -> exit 0, a bad command -> exit 1 with a message);
a model onnxruntime cannot load -> exit 1 with one `ort_bench:` line.
Times are checked for being there and positive, never against a speed.

Usage: check_ort_bench.py ORT_BENCH.py DIGITS.onnx WORK_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np


def main():
    script, model, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    image = os.path.join(work, "image.npy")
    np.save(image, np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32))
    base = [sys.executable, script, model, "--threads", "1", "--warmup", "1", "--input", f"image={image}"]
    problems = []

    p = subprocess.run(base + ["--runs", "3"], capture_output=True, text=True, timeout=120)
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    if p.returncode != 0 or got.get("runs") != 3 or not 0 < got.get("median_ms", 0) <= got.get("p90_ms", 0):
        problems.append(f"one-shot: rc {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr[-300:]!r}")

    def serve(commands):
        return subprocess.run(base + ["--serve"], input=commands, capture_output=True, text=True, timeout=120)

    p = serve("run 3\nrun 1\nquit\nrun 2\n")  # nothing after quit is read
    lines = p.stdout.splitlines()
    times = [json.loads(x)["times_ms"] for x in lines[1:]] if p.returncode == 0 and lines[:1] == ["ready"] else []
    if [len(t) for t in times] != [3, 1] or not all(x > 0 for t in times for x in t):
        problems.append(f"serve: rc {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr[-300:]!r}")

    p = serve("run 2\n")  # end of input is a quit
    if p.returncode != 0 or len(p.stdout.splitlines()) != 2:
        problems.append(f"serve to EOF: rc {p.returncode}, stdout {p.stdout!r}")

    p = serve("run 1\nfly 2\n")
    if p.returncode != 1 or "ort_bench: unknown command 'fly 2'" not in p.stderr or len(p.stdout.splitlines()) != 2:
        problems.append(f"serve, bad command: rc {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")

    bad = os.path.join(work, "bad.onnx")
    with open(bad, "wb") as f:
        f.write(b"not a model")
    p = subprocess.run([sys.executable, script, bad, "--serve"], input="", capture_output=True, text=True, timeout=120)
    if p.returncode != 1 or p.stdout or not p.stderr.startswith(f"ort_bench: onnxruntime cannot load {bad}"):
        problems.append(f"bad model: rc {p.returncode}, stdout {p.stdout!r}, stderr {p.stderr!r}")

    for msg in problems:
        print("FAIL:", msg)
    print(f"check_ort_bench: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
