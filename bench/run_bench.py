#!/usr/bin/env python3
"""The kiln benchmark suite behind `make bench`: kiln against onnxruntime.

For every model x batch x thread count it runs, in one process tree and on
the same inputs,

    kiln bench ART.so --vs-ort --model MODEL.onnx --threads T --runs R --json

(kiln's artifact and onnxruntime with ORT_ENABLE_ALL and the same intra-op
thread count, each after its own warm-up, taking turns so that both see the
same machine: each turn is a rest, one run timed as "cold", one timed run),
and reports the median
and p90 latency of both, the ratio kiln/onnxruntime, kiln's achieved GFLOP/s
(FLOPs from `kiln inspect` over kiln's median) and that as a fraction of the
machine's FP32 FMA peak measured by `kiln bench --peak --threads T` (before
and after the runs, the higher of the two).

Models come from tests/models/gen_models.py (random weights, fixed seed),
generated once per (model, batch) into BUILD/bench-models/<model>-b<batch>/
with their inputs; each is compiled once per (model, batch) with
`kiln compile --shape NAME=<shape of its input>` into BUILD/bench/artifacts/.
Results: a Markdown table on stdout and in BUILD/bench/results.md, every
figure in BUILD/bench/results.json.

Environment (each also a flag): BENCH_MODELS=resnet50,mobilenetv2,bert,vit
BENCH_BATCHES=1,8  BENCH_THREADS=1,2  BENCH_RUNS=20  BENCH_WARMUP=3.
No timing here is ever a pass/fail criterion; the exit status is non-zero
only when a model could not be generated, compiled or run.
"""
import argparse
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN_MODELS = os.path.join(ROOT, "tests", "models", "gen_models.py")
ALL_MODELS = ["resnet50", "mobilenetv2", "bert", "vit"]
# What each model is, for the report's table.
MODEL_LABEL = {
    "resnet50": "ResNet-50 v1.5",
    "mobilenetv2": "MobileNetV2",
    "bert": "BERT-base encoder, seq 128",
    "vit": "ViT-Tiny/16",
}


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args():
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="CMake build folder (default: build)")
    ap.add_argument("--kiln", help="the kiln binary (default: BUILD/kiln)")
    ap.add_argument("--models", default=env("BENCH_MODELS", ",".join(ALL_MODELS)))
    ap.add_argument("--batches", default=env("BENCH_BATCHES", "1,8"))
    ap.add_argument("--threads", default=env("BENCH_THREADS", "1,2"))
    ap.add_argument("--runs", type=int, default=int(env("BENCH_RUNS", "20")))
    ap.add_argument("--warmup", type=int, default=int(env("BENCH_WARMUP", "3")))
    a = ap.parse_args()
    a.models = [m.strip() for m in a.models.split(",") if m.strip()]
    unknown = [m for m in a.models if m not in ALL_MODELS]
    if unknown or not a.models:
        ap.error(f"unknown model(s) {unknown}; choose from {','.join(ALL_MODELS)}")
    a.batches, a.threads = int_list(a.batches), int_list(a.threads)
    if not a.batches or min(a.batches) < 1 or not a.threads or min(a.threads) < 1:
        ap.error("batches and threads must be lists of positive integers")
    if a.runs < 1 or a.warmup < 0:
        ap.error("--runs must be at least 1 and --warmup at least 0")
    a.build = os.path.abspath(a.build)
    a.kiln = os.path.abspath(a.kiln or os.path.join(a.build, "kiln"))
    if not os.access(a.kiln, os.X_OK):
        ap.error(f"{a.kiln} is not an executable kiln (build first: make build)")
    return a


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    """Runs cmd; returns stdout, or raises with stderr's tail in the message."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{os.path.basename(cmd[0])} {cmd[1]} failed (exit {p.returncode}): " + " | ".join(tail))
    return p.stdout


def model_inputs(model_dir):
    """{name: path} of the inputs gen_models.py wrote (input_<name>.npy)."""
    found = sorted(glob.glob(os.path.join(model_dir, "input_*.npy")))
    return {os.path.basename(p)[len("input_"):-len(".npy")]: p for p in found}


def prepare(a, model, batch, art_dir):
    """Generates (if stale) and compiles one (model, batch); returns what the runs need."""
    mdir = os.path.join(a.build, "bench-models", f"{model}-b{batch}")
    log(f"{model} batch {batch}: generating {mdir}")
    run([sys.executable, GEN_MODELS, "--model", model, "--batch", str(batch), mdir])
    onnx_path = os.path.join(mdir, "model.onnx")
    inputs = model_inputs(mdir)
    flops_line = re.search(r"^FLOPs: (\S+)", run([a.kiln, "inspect", onnx_path]), re.M)
    flops = float(flops_line.group(1)) if flops_line and flops_line.group(1) != "unknown" else None
    art = os.path.join(art_dir, f"{model}-b{batch}.so")
    cmd = [a.kiln, "compile", onnx_path, "-o", art]
    for name, path in inputs.items():
        # the model's inputs are static already; --shape states the shape the
        # artifact is built for, and kiln refuses it if the model disagrees
        shape = np.load(path, mmap_mode="r").shape
        cmd += ["--shape", f"{name}=" + "x".join(str(d) for d in shape)]
    t0 = time.time()
    log(f"{model} batch {batch}: compiling")
    run(cmd)
    return {"onnx": onnx_path, "artifact": art, "inputs": inputs, "flops": flops,
            "compile_s": round(time.time() - t0, 2)}


def bench_one(a, prep, threads):
    cmd = [a.kiln, "bench", prep["artifact"], "--vs-ort", "--model", prep["onnx"], "--threads", str(threads),
           "--runs", str(a.runs), "--warmup", str(a.warmup), "--json"]
    for name, path in prep["inputs"].items():
        cmd += ["--input", f"{name}={path}"]
    env = dict(os.environ, KILN_PYTHON=sys.executable)
    got = json.loads(run(cmd, env=env).strip().splitlines()[-1])
    got["artifact"] = got.pop("model")  # kiln bench names the file it ran
    return got


def measure_peaks(a, peaks):
    """Measures the peak per thread count, keeping the best of this and any
    earlier measurement: on a shared machine a neighbour's burst can only
    lower it, and a too-low peak would overstate every fraction of it."""
    for t in a.threads:
        p = json.loads(run([a.kiln, "bench", "--peak", "--threads", str(t), "--json"]))
        log(f"peak with {t} thread(s): {p['peak_gflops']:.1f} GFLOP/s ({p['isa']})")
        if t not in peaks or p["peak_gflops"] > peaks[t]["peak_gflops"]:
            peaks[t] = p
    return peaks


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if m:
            return m.group(1).strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def fmt_row(r, peaks):
    if "error" in r:
        return f"| {r['model']} | {r['batch']} | {r['threads']} | failed: {r['error']} | | | | | | | |"
    gflops = r["flops"] / (r["median_ms"] * 1e6) if r.get("flops") else None
    pct = 100 * gflops / peaks[r["threads"]]["peak_gflops"] if gflops else None
    return (f"| {r['model']} | {r['batch']} | {r['threads']} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | "
            f"{r['ort_median_ms']:.2f} | {r['ratio']:.2f} | "
            + (f"{gflops:.1f} | {pct:.0f}% | " if gflops else "? | ? | ")
            + f"{r['cold_median_ms']:.2f} / {r['ort_cold_median_ms']:.2f} | {r['cold_ratio']:.2f} |")


def report(a, meta, peaks, rows):
    lines = [
        f"kiln {meta['commit']} vs onnxruntime {meta['onnxruntime']} on {meta['cpu']} "
        f"({meta['cpus']} logical CPUs), {meta['date']}; 1-minute load average "
        f"{meta['loadavg_start']} before the runs, {meta['loadavg_end']} after "
        f"(well above 0 before: other work shared the CPUs)",
        f"{a.runs} timed runs after {a.warmup} warm-up runs per side; latency in ms; "
        f"ratio = kiln median / onnxruntime median (below 1: kiln is faster). The sides take turns: "
        f"each turn is 100 ms of rest, one run timed as cold (the other side just ran: caches "
        f"and worker threads cold), then one timed run; the last two columns are the cold runs' medians.",
        "FP32 FMA peak (`kiln bench --peak`): "
        + ", ".join(f"{t} thread{'s' if t > 1 else ''} {p['peak_gflops']:.1f} GFLOP/s ({p['isa']})"
                    for t, p in peaks.items()) + ".",
        "",
        "| model | batch | threads | kiln median | kiln p90 | ORT median | kiln/ORT | kiln GFLOP/s | % of peak "
        "| cold kiln / ORT | cold kiln/ORT |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [fmt_row(r, peaks) for r in rows]
    return "\n".join(lines) + "\n"


def main():
    a = parse_args()
    out_dir = os.path.join(a.build, "bench")
    art_dir = os.path.join(out_dir, "artifacts")
    os.makedirs(art_dir, exist_ok=True)
    import onnxruntime
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git_commit(), "onnxruntime": onnxruntime.__version__, "cpu": cpu_model(),
            "cpus": os.cpu_count(), "runs": a.runs, "warmup": a.warmup,
            "loadavg_start": round(os.getloadavg()[0], 2)}
    n = len(a.models) * len(a.batches) * len(a.threads)
    log(f"{n} rows: models {a.models}, batches {a.batches}, threads {a.threads}, {a.runs} runs each")
    peaks = measure_peaks(a, {})
    rows, failed = [], 0
    for model in a.models:
        for batch in a.batches:
            try:
                prep = prepare(a, model, batch, art_dir)
            except RuntimeError as e:
                log(f"{model} batch {batch}: {e}")
                rows += [{"model": model, "batch": batch, "threads": t, "error": str(e)} for t in a.threads]
                failed += len(a.threads)
                continue
            for t in a.threads:
                row = {"model": model, "batch": batch, "threads": t, "flops": prep["flops"],
                       "compile_s": prep["compile_s"]}
                try:
                    row.update(bench_one(a, prep, t))
                    log(f"{model} b{batch} t{t}: kiln {row['median_ms']:.2f} ms, "
                        f"onnxruntime {row['ort_median_ms']:.2f} ms, ratio {row['ratio']:.2f}")
                except (RuntimeError, ValueError, KeyError) as e:
                    log(f"{model} b{batch} t{t}: {e}")
                    row["error"] = str(e)
                    failed += 1
                rows.append(row)
    measure_peaks(a, peaks)  # again at the end: the best of the two counts
    meta["loadavg_end"] = round(os.getloadavg()[0], 2)
    table = report(a, meta, peaks, rows)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(table)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "peaks": {str(t): p for t, p in peaks.items()}, "rows": rows}, f, indent=1)
        f.write("\n")
    print(table, end="")
    log(f"wrote {out_dir}/results.md and results.json" + (f"; {failed} row(s) failed" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
