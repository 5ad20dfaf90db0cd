#!/usr/bin/env python3
"""Runs bench/run_bench.py on ViT-Tiny, batch 1, 1 thread, 2 runs and checks
the shape of what it writes: results.json (meta, peak, one complete row,
measured with kiln's and onnxruntime's runs interleaved) and results.md (the
table with that row). Figures are checked for being finite and positive,
never against a speed.

Usage: check_bench.py RUN_BENCH.py KILN WORK_DIR
"""
import json
import math
import os
import re
import subprocess
import sys


def main():
    script, kiln, work = sys.argv[1:4]
    cmd = [sys.executable, script, "--kiln", kiln, "--build", work, "--models", "vit",
           "--batches", "1", "--threads", "1", "--runs", "2", "--warmup", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        sys.exit(f"check_bench: run_bench.py exited {p.returncode}")
    with open(os.path.join(work, "bench", "results.json")) as f:
        res = json.load(f)
    problems = []
    peak = res["peaks"].get("1", {})
    if not (peak.get("peak_gflops", 0) > 0 and peak.get("isa") in ("avx512f", "avx2", "scalar")):
        problems.append(f"peak for 1 thread malformed: {peak}")
    rows = res["rows"]
    if len(rows) != 1:
        problems.append(f"{len(rows)} rows, expected 1")
    row = rows[0] if rows else {}
    want = {"model": "vit", "batch": 1, "threads": 1, "runs": 2}
    for k, v in want.items():
        if row.get(k) != v:
            problems.append(f"row {k} = {row.get(k)!r}, expected {v!r}")
    for k in ("median_ms", "p90_ms", "ort_median_ms", "ort_p90_ms", "ratio", "flops", "cold_median_ms",
              "ort_cold_median_ms", "cold_ratio"):
        v = row.get(k)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            problems.append(f"row {k} = {v!r}, expected a positive number")
    # kiln bench: the two sides take turns, each a cold run then a timed one
    if row.get("protocol") != "interleaved, rewarmed":
        problems.append(f"row protocol = {row.get('protocol')!r}, expected 'interleaved, rewarmed'")
    # ViT-Tiny/16 at 224x224 is about 2.5 GFLOP (1.26 G multiply-adds)
    if not 2.0e9 < row.get("flops", 0) < 3.0e9:
        problems.append(f"ViT-Tiny FLOPs {row.get('flops')}, expected about 2.5e9")
    if row.get("median_ms", 0) > row.get("p90_ms", 0):
        problems.append("kiln median above its p90")
    with open(os.path.join(work, "bench", "results.md")) as f:
        md = f.read()
    if p.stdout != md:
        problems.append("stdout differs from results.md")
    if ("| model | batch | threads | kiln median | kiln p90 | ORT median | kiln/ORT | kiln GFLOP/s | % of peak "
            "| cold kiln / ORT | cold kiln/ORT |") not in md:
        problems.append("results.md lacks the table header")
    num = r" [0-9.]+ \|"
    if not re.search(r"^\| vit \| 1 \| 1 \|" + num * 5 + r" [0-9]+% \| [0-9.]+ / [0-9.]+ \|" + num + "$", md, re.M):
        problems.append("results.md lacks a well-formed vit row:\n" + md)
    for msg in problems:
        print("FAIL:", msg)
    print(f"check_bench: {'ok' if not problems else f'{len(problems)} problem(s)'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
