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

Models come from tests/models/gen_models.py (the four synthetic ones:
resnet50, mobilenetv2, bert, vit) and tests/models/gen_real_models.py
(architectures of real users' models: dbnet, crnn, yolov8n, mobilenetv3,
audio_rnn), random weights, fixed seed,
generated once per (model, batch) into BUILD/bench-models/<model>-b<batch>/
with their inputs; each is compiled once per (model, batch) with
`kiln compile --shape NAME=<shape of its input>` into BUILD/bench/artifacts/.
Results: a Markdown table on stdout and in BUILD/bench/results.md, every
figure in BUILD/bench/results.json.

INT8 rows (a second table): resnet50-qdq and mobilenetv2-qdq (onnxruntime's
static QDQ quantization, compiled by kiln), bert-dyn (onnxruntime's
quantize_dynamic BERT, compiled by kiln) and bert-dynk (kiln compile
--quantize dynamic-int8 on the FP32 BERT, against onnxruntime running its own
quantize_dynamic model). The quantized models come from
tests/models/gen_quant_models.py (onnxruntime's quantizer, calibrated on 8
fixed-seed synthetic images; cached like the FP32 ones, in
BUILD/bench-models/<name>-b<batch>/). Each row: kiln's INT8 median and
onnxruntime's on the same quantized model (the same interleaved `kiln bench
--vs-ort` run), their ratio, kiln's FP32 median on the FP32 model (from the
FP32 row of this run if there is one, else `kiln bench` alone) and the
speedup FP32/INT8, the artifact size INT8/FP32, and accuracy: for the QDQ
models the percentage of output elements within one output quantization
step of onnxruntime's output (graph as written), for BERT the cosine of the
last hidden state against the FP32 model's (bench/qaccuracy.py); onnxruntime's
optimized run gets the same figure beside it. Where kiln cannot compile or
run a quantized model yet, the row says n/a with the first line of kiln's
error and onnxruntime's median alone (scripts/ort_bench.py), and it does
not make the exit status non-zero. Where one kiln run of a quantized model
takes long (a path still on reference kernels), its row gets fewer runs (at
least 3) so that kiln's side takes about a minute ("runs" in results.json
says how many), and none if 3 would take over two minutes (n/a, with the
time of the one run, and kiln's accuracy from it).

Mixed-precision rows (in the main table, and a third one): bert-bf16 and
vit-bf16, the FP32 BERT and ViT compiled with `kiln compile --precision
mixed`, timed against onnxruntime's FP32 run of the same model, with
kiln's FP32 median of the model (the speedup) and the lowest cosine of an
output against the FP32 artifact's. Where the CPU lacks AVX512-BF16 the
artifact refuses to open and the row says n/a (not a failure). bert-pack
is the FP32 BERT compiled with `--pack-tokens` in the same table: its
speedup is what skipping the padding gives (about half the tokens at batch
8), its cosine is taken at the real tokens (padding outputs are 0).

Under load (BENCH_LOAD=N, N >= 1): every FP32 row is measured a second
time with N busy processes (one Python loop each, ended after the row and
bounded to 10 minutes) beside both sides, as on a shared machine; a third
table gives each row's quiet and loaded kiln/onnxruntime ratios, their
quotient, and kiln's and onnxruntime's p90/median under load.

Rows at a run-time size (dbnet-dyn, crnn-dyn, yolov8n-dyn; batch 1 only):
the real model's dynamic form compiled with its varying dims bounded, run
at one size inside the range against onnxruntime on the same dynamic model
(DYN_MODELS says which bounds and size): the path of a user whose images
vary in size. No FLOPs column (the count is the maximum's).

Environment (each also a flag): BENCH_MODELS=resnet50,mobilenetv2,bert,vit,
dbnet,crnn,yolov8n,mobilenetv3,audio_rnn,dbnet-dyn,crnn-dyn,yolov8n-dyn,
bert-bf16,vit-bf16,bert-pack,resnet50-qdq,mobilenetv2-qdq,bert-dyn,bert-dynk
BENCH_BATCHES=1,8
BENCH_THREADS=1,2  BENCH_RUNS=20  BENCH_WARMUP=3  BENCH_LOAD=0.
No timing here is ever a pass/fail criterion; the exit status is non-zero
only when a model could not be generated, compiled or run (for INT8 rows:
only generated).
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
GEN_QUANT = os.path.join(ROOT, "tests", "models", "gen_quant_models.py")
GEN_REAL = os.path.join(ROOT, "tests", "models", "gen_real_models.py")
ORT_BENCH = os.path.join(ROOT, "scripts", "ort_bench.py")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qaccuracy  # noqa: E402

# The four models kiln was tuned on, then real architectures users bring
# (tests/models/gen_real_models.py): a speed-up must hold on both.
SYNTHETIC_MODELS = ["resnet50", "mobilenetv2", "bert", "vit"]
REAL_MODELS = ["dbnet", "crnn", "yolov8n", "mobilenetv3", "audio_rnn"]
FP32_MODELS = SYNTHETIC_MODELS + REAL_MODELS
# INT8 rows: the FP32 model they are measured against, the quantized model
# onnxruntime runs (gen_quant_models.py), and what kiln compiles: that model
# ("quantized") or the FP32 one with `kiln compile --quantize ...`.
INT8_MODELS = {
    "resnet50-qdq": {"fp32": "resnet50", "ort": "resnet50-qdq", "kiln": "quantized"},
    "mobilenetv2-qdq": {"fp32": "mobilenetv2", "ort": "mobilenetv2-qdq", "kiln": "quantized"},
    "bert-dyn": {"fp32": "bert", "ort": "bert-dyn", "kiln": "quantized"},
    "bert-dynk": {"fp32": "bert", "ort": "bert-dyn", "kiln": ["--quantize", "dynamic-int8"]},
}
# Mixed-precision rows: the FP32 model compiled with kiln's autocast
# (--precision, docs/compiling.md) against onnxruntime's FP32 run of it;
# they need a CPU with AVX512-BF16 (elsewhere the row says n/a).
PRECISION_MODELS = {
    "bert-bf16": {"fp32": "bert", "flags": ["--precision", "mixed"]},
    "vit-bf16": {"fp32": "vit", "flags": ["--precision", "mixed"]},
    # padding-aware execution (the same table: another compile flag on the
    # FP32 model); BERT's batch mixes lengths, about half padding at batch 8
    "bert-pack": {"fp32": "bert", "flags": ["--pack-tokens"], "mask": "attention_mask"},
}
# Rows at a run-time size: a real model's dynamic form (gen_real_models.py
# --dynamic, the exporter's dynamic_axes) compiled with its varying dims
# bounded, not pinned, and run at a size inside the range (the path a user
# who feeds images of any size gets: docs/compiling.md), against
# onnxruntime on the same dynamic model and inputs. YOLOv8n's height is
# pinned: H and W both dynamic make its anchor count a product of two dims.
DYN_MODELS = {
    "dbnet-dyn": {"base": "dbnet", "flags": ["--shape", "input=1x3x[32..640%32]x[32..640%32]"],
                  "input": (1, 3, 480, 320)},
    "crnn-dyn": {"base": "crnn", "flags": ["--max", "width=640", "--min", "width=32", "--align", "width=4"],
                 "input": (1, 1, 32, 200)},
    "yolov8n-dyn": {"base": "yolov8n", "flags": ["--shape", "height=320", "--max", "width=640", "--min",
                                                 "width=64", "--align", "width=32"],
                    "input": (1, 3, 320, 480)},
}
FP32_MODELS += list(DYN_MODELS)
ALL_MODELS = FP32_MODELS + list(PRECISION_MODELS) + list(INT8_MODELS)
# an INT8 row whose kiln runs are slow gets fewer runs: about this many seconds of kiln's side
INT8_ROW_BUDGET_S = 60
# What each model is, for the report's table.
MODEL_LABEL = {
    "resnet50": "ResNet-50 v1.5",
    "mobilenetv2": "MobileNetV2",
    "bert": "BERT-base encoder, seq 128",
    "vit": "ViT-Tiny/16",
    "resnet50-qdq": "ResNet-50, onnxruntime static INT8 (QDQ)",
    "mobilenetv2-qdq": "MobileNetV2, onnxruntime static INT8 (QDQ)",
    "bert-dyn": "BERT-base, onnxruntime quantize_dynamic, compiled by kiln",
    "bert-dynk": "BERT-base, kiln --quantize dynamic-int8 vs onnxruntime quantize_dynamic",
    "bert-bf16": "BERT-base, kiln --precision mixed (bf16 products) vs onnxruntime FP32",
    "vit-bf16": "ViT-Tiny/16, kiln --precision mixed (bf16 products) vs onnxruntime FP32",
    "bert-pack": "BERT-base, kiln --pack-tokens (padding tokens skipped) vs onnxruntime FP32",
    "dbnet-dyn": "DBNet, H and W bounded to [32..640], run at 480x320",
    "crnn-dyn": "CRNN, width bounded to [32..640], run at 200",
    "yolov8n-dyn": "YOLOv8n, height 320, width bounded to [64..640], run at 480",
}


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args():
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="CMake build folder (default: build)")
    ap.add_argument("--kiln", help="the kiln binary (default: BUILD/kiln)")
    ap.add_argument("--models", default=env("BENCH_MODELS", ",".join(ALL_MODELS)))
    ap.add_argument("--batches", default=env("BENCH_BATCHES", "1,8"))
    ap.add_argument("--threads", default=env("BENCH_THREADS", "1,2"))
    ap.add_argument("--runs", type=int, default=int(env("BENCH_RUNS", "20")))
    ap.add_argument("--warmup", type=int, default=int(env("BENCH_WARMUP", "3")))
    ap.add_argument("--load", type=int, default=int(env("BENCH_LOAD", "0")),
                    help="also measure every FP32 row beside this many busy processes")
    a = ap.parse_args()
    a.models = [m.strip() for m in a.models.split(",") if m.strip()]
    unknown = [m for m in a.models if m not in ALL_MODELS]
    if unknown or not a.models:
        ap.error(f"unknown model(s) {unknown}; choose from {','.join(ALL_MODELS)}")
    a.batches, a.threads = int_list(a.batches), int_list(a.threads)
    if not a.batches or min(a.batches) < 1 or not a.threads or min(a.threads) < 1:
        ap.error("batches and threads must be lists of positive integers")
    if a.runs < 1 or a.warmup < 0 or a.load < 0:
        ap.error("--runs must be at least 1, --warmup and --load at least 0")
    a.build = os.path.abspath(a.build)
    a.kiln = os.path.abspath(a.kiln or os.path.join(a.build, "kiln"))
    if not os.access(a.kiln, os.X_OK):
        ap.error(f"{a.kiln} is not an executable kiln (build first: make build)")
    return a


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class KilnError(RuntimeError):
    """A command failed; .first_line is the first line of what it printed on stderr."""

    def __init__(self, msg, first_line):
        super().__init__(msg)
        self.first_line = first_line


def run(cmd, **kw):
    """Runs cmd; returns stdout, or raises with stderr's tail in the message."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        lines = [ln for ln in (p.stderr or p.stdout).strip().splitlines() if ln.strip()]
        tail = lines[-3:]
        raise KilnError(f"{os.path.basename(cmd[0])} {cmd[1]} failed (exit {p.returncode}): " + " | ".join(tail),
                        lines[0] if lines else f"exit {p.returncode}")
    return p.stdout


def model_inputs(model_dir):
    """{name: path} of the inputs gen_models.py wrote (input_<name>.npy)."""
    found = sorted(glob.glob(os.path.join(model_dir, "input_*.npy")))
    return {os.path.basename(p)[len("input_"):-len(".npy")]: p for p in found}


def shape_args(inputs):
    args = []
    for name, path in inputs.items():
        shape = np.load(path, mmap_mode="r").shape
        args += ["--shape", f"{name}=" + "x".join(str(d) for d in shape)]
    return args


def prepare_dyn(a, model, art_dir):
    """A DYN_MODELS row: the dynamic model and its input at the run's size
    (generated if missing), compiled with the row's bounds."""
    spec = DYN_MODELS[model]
    mdir = os.path.join(a.build, "bench-models", model)
    onnx_path = os.path.join(mdir, spec["base"] + "_dyn.onnx")
    if not os.path.exists(onnx_path):
        log(f"{model}: generating {onnx_path}")
        run([sys.executable, GEN_REAL, "--dynamic", "--model", spec["base"], mdir])
    import onnx
    name = onnx.load(onnx_path, load_external_data=False).graph.input[0].name
    inp = os.path.join(mdir, f"input_{name}.npy")
    np.save(inp, np.random.default_rng(7).standard_normal(spec["input"]).astype(np.float32))
    art = os.path.join(art_dir, f"{model}.so")
    t0 = time.time()
    log(f"{model}: compiling ({' '.join(spec['flags'])})")
    run([a.kiln, "compile", onnx_path, "-o", art] + spec["flags"])
    return {"onnx": onnx_path, "artifact": art, "inputs": {name: inp}, "flops": None,
            "compile_s": round(time.time() - t0, 2)}


def prepare(a, model, batch, art_dir, cache=None):
    """Generates (if stale) and compiles one (model, batch); returns what the runs need.
    With `cache` (a dict), a (model, batch) already prepared in this run is reused."""
    if cache is not None and (model, batch) in cache:
        return cache[(model, batch)]
    if model in DYN_MODELS:
        prep = prepare_dyn(a, model, art_dir)
        if cache is not None:
            cache[(model, batch)] = prep
        return prep
    spec = PRECISION_MODELS.get(model, {"fp32": model, "flags": []})
    base = spec["fp32"]
    mdir = os.path.join(a.build, "bench-models", f"{base}-b{batch}")
    log(f"{model} batch {batch}: generating {mdir}")
    gen = GEN_REAL if base in REAL_MODELS else GEN_MODELS
    run([sys.executable, gen, "--model", base, "--batch", str(batch), mdir])
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
    cmd += spec["flags"]
    t0 = time.time()
    log(f"{model} batch {batch}: compiling")
    run(cmd)
    prep = {"onnx": onnx_path, "artifact": art, "inputs": inputs, "flops": flops,
            "compile_s": round(time.time() - t0, 2)}
    if cache is not None:
        cache[(model, batch)] = prep
    return prep


def bench_one(a, prep, threads, runs=None):
    cmd = [a.kiln, "bench", prep["artifact"], "--vs-ort", "--model", prep["onnx"], "--threads", str(threads),
           "--runs", str(runs or a.runs), "--warmup", str(a.warmup), "--json"]
    for name, path in prep["inputs"].items():
        cmd += ["--input", f"{name}={path}"]
    env = dict(os.environ, KILN_PYTHON=sys.executable)
    got = json.loads(run(cmd, env=env).strip().splitlines()[-1])
    got["artifact"] = got.pop("model")  # kiln bench names the file it ran
    return got


BUSY_LOOP = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"


class BusyLoad:
    """N busy processes (bounded to 10 minutes each) while the block runs."""

    def __init__(self, n):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(self.n)]
        time.sleep(0.5)  # let the scheduler see them
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        return False


def bench_loaded(a, prep, threads):
    """The row again beside a.load busy processes: its figures under load."""
    with BusyLoad(a.load):
        got = bench_one(a, prep, threads)
    keys = ("median_ms", "p90_ms", "ort_median_ms", "ort_p90_ms", "ratio", "runs_alone", "runs_all")
    return {k: got[k] for k in keys if k in got}


def prepare_int8(a, model, batch, art_dir, fp32_prep):
    """Generates the quantized model (if stale) and compiles kiln's INT8 artifact.
    Returns what the runs need; "kiln_error" holds the first line of kiln's error
    if it cannot compile it (the row is then n/a on kiln's side)."""
    spec = INT8_MODELS[model]
    qdir = os.path.join(a.build, "bench-models", f"{spec['ort']}-b{batch}")
    fp32_dir = os.path.dirname(fp32_prep["onnx"])
    log(f"{model} batch {batch}: generating {qdir}")
    run([sys.executable, GEN_QUANT, "--model", spec["ort"], "--batch", str(batch), "--fp32-dir", fp32_dir, qdir])
    q_onnx = os.path.join(qdir, "model.onnx")
    inputs = model_inputs(qdir)
    art = os.path.join(art_dir, f"{model}-b{batch}.so")
    if spec["kiln"] == "quantized":
        cmd = [a.kiln, "compile", q_onnx, "-o", art]
    else:
        cmd = [a.kiln, "compile", fp32_prep["onnx"], "-o", art] + spec["kiln"]
    cmd += shape_args(inputs)
    prep = {"onnx": q_onnx, "model_dir": qdir, "artifact": art, "inputs": inputs,
            "fp32_artifact": fp32_prep["artifact"], "fp32_inputs": fp32_prep["inputs"]}
    if os.path.exists(art):
        os.remove(art)  # never measure a stale artifact of an earlier kiln
    log(f"{model} batch {batch}: compiling ({' '.join(cmd[2:3] + cmd[5:])})")
    t0 = time.time()
    try:
        run(cmd)
        prep["compile_s"] = round(time.time() - t0, 2)
    except KilnError as e:
        prep["kiln_error"] = e.first_line if e.first_line.startswith("kiln compile") else "kiln compile: " + e.first_line
        return prep
    # accuracy, once per (model, batch): kiln's outputs on the model's inputs
    out = os.path.join(art_dir, f"{model}-b{batch}.out")
    cmd = [a.kiln, "run", art, "--output-dir", out]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    t0 = time.time()
    try:
        run(cmd)
        prep["run_s"] = time.time() - t0
    except KilnError as e:
        prep["kiln_error"] = e.first_line if e.first_line.startswith("kiln run") else "kiln run: " + e.first_line
        return prep
    outputs = {os.path.basename(f)[:-4]: np.load(f) for f in glob.glob(os.path.join(out, "*.npy"))}
    try:
        prep["accuracy"] = qaccuracy.model_accuracy(qdir, outputs)
    except (KeyError, ValueError) as e:
        prep["kiln_error"] = f"accuracy: {e}"
    return prep


def ort_only(a, onnx_path, inputs, threads):
    """onnxruntime's median alone (scripts/ort_bench.py), for rows kiln cannot run."""
    cmd = [sys.executable, ORT_BENCH, onnx_path, "--threads", str(threads), "--runs", str(a.runs),
           "--warmup", str(a.warmup)]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    return json.loads(run(cmd).strip().splitlines()[-1])


def kiln_alone(a, artifact, inputs, threads):
    cmd = [a.kiln, "bench", artifact, "--threads", str(threads), "--runs", str(a.runs), "--warmup",
           str(a.warmup), "--json"]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    return json.loads(run(cmd).strip().splitlines()[-1])


def bench_int8(a, model, batch, t, prep, fp32_rows):
    """One INT8 row: kiln vs onnxruntime on the quantized model, kiln FP32, sizes, accuracy."""
    row = {"model": model, "batch": batch, "threads": t, "int8": True,
           "ort_model": os.path.relpath(prep["onnx"], a.build)}
    # A quantized path still on reference kernels can take seconds, or minutes,
    # a run (judged by the one `kiln run` of the accuracy check): kiln's side
    # gets about INT8_ROW_BUDGET_S (timed + cold runs, at least 3 of each), and
    # is not timed at all when 3 would take over twice that.
    run_s = prep.get("run_s", 0)
    slow = "kiln_error" not in prep and run_s * 6 > 2 * INT8_ROW_BUDGET_S
    if slow:
        row["kiln_run_s"] = round(run_s, 1)
        row["kiln_error"] = f"one kiln run took {run_s:.1f} s: not timed"
    if "kiln_error" in prep or slow:
        row.setdefault("kiln_error", prep.get("kiln_error"))
        got = ort_only(a, prep["onnx"], prep["inputs"], t)
        row["ort_median_ms"], row["ort_p90_ms"] = got["median_ms"], got["p90_ms"]
    else:
        row["compile_s"] = prep["compile_s"]
        runs = max(3, min(a.runs, int(INT8_ROW_BUDGET_S / (2 * max(run_s, 1e-3)))))
        if runs < a.runs:
            log(f"{model} b{batch} t{t}: one kiln run took {run_s:.1f} s: {runs} runs instead of {a.runs}")
        row.update(bench_one(a, prep, t, runs))
    acc = prep.get("accuracy")
    if acc:
        row["accuracy_kind"], row["accuracy"] = acc["kind"], acc["value"]
        row["ort_accuracy"] = acc["ort_value"]
    else:
        # onnxruntime's own figure needs no kiln output
        with open(os.path.join(prep["model_dir"], "quant.json")) as f:
            info = json.load(f)
        outs = info["outputs"]
        if all(o.get("step") for o in outs.values()):
            row["accuracy_kind"] = "within_one_step"
            row["ort_accuracy"] = min(100 * o["ort_opt_within_one_step"] for o in outs.values())
        else:
            row["accuracy_kind"] = "cosine_vs_fp32"
            row["ort_accuracy"] = min(qaccuracy.cosine(
                np.load(os.path.join(prep["model_dir"], f"ort_opt_{n}.npy")),
                np.load(os.path.join(prep["model_dir"], f"fp32_{n}.npy"))) for n in outs)
    fp32 = fp32_rows.get((INT8_MODELS[model]["fp32"], batch, t))
    if fp32 and "median_ms" in fp32:
        row["fp32_median_ms"] = fp32["median_ms"]
        row["fp32_source"] = fp32.get("source", "FP32 row of this run")
    else:
        # measured once per (FP32 model, batch, threads): bert-dyn and bert-dynk share it
        key = (INT8_MODELS[model]["fp32"], batch, t)
        fp32_rows[key] = {"median_ms": kiln_alone(a, prep["fp32_artifact"], prep["fp32_inputs"], t)["median_ms"],
                          "source": "kiln bench alone"}
        row["fp32_median_ms"], row["fp32_source"] = fp32_rows[key]["median_ms"], "kiln bench alone"
    row["size_fp32"] = os.path.getsize(prep["fp32_artifact"])
    if os.path.exists(prep["artifact"]):
        row["size_int8"] = os.path.getsize(prep["artifact"])
        row["size_ratio"] = row["size_int8"] / row["size_fp32"]
    if "median_ms" in row:
        row["speedup"] = row["fp32_median_ms"] / row["median_ms"]
    return row


def outputs_of(a, artifact, inputs, out_dir):
    """kiln's outputs of one run of artifact, by name."""
    cmd = [a.kiln, "run", artifact, "--output-dir", out_dir]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    run(cmd)
    return {os.path.basename(f)[:-4]: np.load(f) for f in glob.glob(os.path.join(out_dir, "*.npy"))}


def precision_extras(a, model, batch, t, prep, row, preps, fp32_rows, art_dir):
    """What a mixed-precision row adds to an FP32 one: kiln's FP32 median of
    the same model (the speedup) and, once per (model, batch), the lowest
    cosine of its outputs against the FP32 artifact's. A CPU without the
    instructions makes the row n/a (row["kiln_error"]), not a failure."""
    base = PRECISION_MODELS[model]["fp32"]
    fp32_prep = prepare(a, base, batch, art_dir, preps)
    if "cosine" not in prep and "kiln_error" not in prep:
        try:
            got = outputs_of(a, prep["artifact"], prep["inputs"], os.path.join(art_dir, f"{model}-b{batch}.out"))
        except KilnError as e:
            prep["kiln_error"] = e.first_line
            row["kiln_error"] = e.first_line
            return
        want = outputs_of(a, fp32_prep["artifact"], fp32_prep["inputs"],
                          os.path.join(art_dir, f"{base}-b{batch}.out"))
        mask_name = PRECISION_MODELS[model].get("mask")
        if mask_name:  # packed tokens: outputs at padding are 0 by design, compared at the real tokens
            real = np.load(prep["inputs"][mask_name]) != 0
            got = {n: v[real] for n, v in got.items()}
            want = {n: v[real] for n, v in want.items()}
        prep["cosine"] = min(qaccuracy.cosine(got[n], want[n]) for n in want)
    if "kiln_error" in prep:
        row["kiln_error"] = prep["kiln_error"]
        return
    row["cosine_vs_fp32"] = prep["cosine"]
    fp32 = fp32_rows.get((base, batch, t))
    if fp32 and "median_ms" in fp32:
        row["fp32_median_ms"] = fp32["median_ms"]
    else:
        key = (base, batch, t)
        fp32_rows[key] = {"median_ms": kiln_alone(a, fp32_prep["artifact"], fp32_prep["inputs"], t)["median_ms"],
                          "source": "kiln bench alone"}
        row["fp32_median_ms"] = fp32_rows[key]["median_ms"]


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
    if "kiln_error" in r:
        return f"| {r['model']} | {r['batch']} | {r['threads']} | n/a: {r['kiln_error'].replace('|', '/')} | | | | | | | |"
    gflops = r["flops"] / (r["median_ms"] * 1e6) if r.get("flops") else None
    pct = 100 * gflops / peaks[r["threads"]]["peak_gflops"] if gflops else None
    return (f"| {r['model']} | {r['batch']} | {r['threads']} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | "
            f"{r['ort_median_ms']:.2f} | {r['ratio']:.2f} | "
            + (f"{gflops:.1f} | {pct:.0f}% | " if gflops else "? | ? | ")
            + f"{r['cold_median_ms']:.2f} / {r['ort_cold_median_ms']:.2f} | {r['cold_ratio']:.2f} |")


def fmt_int8_row(r):
    if "error" in r:
        return f"| {r['model']} | {r['batch']} | {r['threads']} | failed: {r['error']} | | | | | | | | |"
    kind = r.get("accuracy_kind")
    ort_acc = qaccuracy.fmt(kind, r.get("ort_accuracy"))
    if "kiln_error" in r:
        size = f"{r['size_ratio']:.2f}" if "size_ratio" in r else "n/a"
        return (f"| {r['model']} | {r['batch']} | {r['threads']} | n/a | {r['ort_median_ms']:.2f} | n/a | "
                f"{r['fp32_median_ms']:.2f} | n/a | {size} | {qaccuracy.fmt(kind, r.get('accuracy'))} | {ort_acc} | "
                f"{r['kiln_error'].replace('|', '/')} |")
    return (f"| {r['model']} | {r['batch']} | {r['threads']} | {r['median_ms']:.2f} | {r['ort_median_ms']:.2f} | "
            f"{r['ratio']:.2f} | {r['fp32_median_ms']:.2f} | {r['speedup']:.2f} | {r['size_ratio']:.2f} | "
            f"{qaccuracy.fmt(kind, r.get('accuracy'))} | {ort_acc} | |")


INT8_HEADER = ("| model | batch | threads | kiln INT8 median | ORT median | kiln/ORT | kiln FP32 median "
               "| FP32/INT8 | size INT8/FP32 | kiln accuracy | ORT accuracy | note |")


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
    fp32 = [r for r in rows if not r.get("int8")]
    int8 = [r for r in rows if r.get("int8")]
    if fp32:
        lines += [fmt_row(r, peaks) for r in fp32]
    else:
        lines = lines[:-3]
    if int8:
        lines += [
            "",
            "INT8: kiln's artifact of the quantized model (bert-dynk: of the FP32 model, quantized by "
            "kiln) against onnxruntime on onnxruntime's quantized model, in one interleaved run as above; "
            "kiln FP32 = kiln's median on the FP32 model (FP32/INT8 = the speedup); size = artifact bytes. "
            "Accuracy: QDQ models, the share of output elements within one output quantization step of "
            "onnxruntime's output (graph as written); BERT, the cosine of the last hidden state against "
            "the FP32 model's. ORT accuracy: the same figure for onnxruntime's optimized run.",
            "",
            INT8_HEADER,
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        lines += [fmt_int8_row(r) for r in int8]
    mixed = [r for r in fp32 if r.get("precision") and "speedup" in r]
    if mixed:
        lines += [
            "",
            "Mixed precision and packed tokens: the FP32 model compiled with `--precision` (matrix products "
            "and convolutions in bf16, f32 accumulation) or `--pack-tokens` (padding skipped); kiln FP32 = "
            "kiln's median on the same model without it; cosine = the lowest cosine of an output against the "
            "FP32 artifact's (at the real tokens for --pack-tokens).",
            "",
            "| model | batch | threads | flag | kiln median | kiln FP32 median | FP32/this | ORT FP32 median "
            "| kiln/ORT | cosine vs FP32 |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [f"| {r['model']} | {r['batch']} | {r['threads']} | {r['precision']} | {r['median_ms']:.2f} | "
                  f"{r['fp32_median_ms']:.2f} | {r['speedup']:.2f} | {r['ort_median_ms']:.2f} | {r['ratio']:.2f} | "
                  f"{r['cosine_vs_fp32']:.6f} |" for r in mixed]
    loaded = [r for r in fp32 if "load" in r]
    if loaded:
        lines += [
            "",
            f"Under load: each FP32 row again with {a.load} busy process(es) beside both sides. "
            "loaded/quiet = the loaded kiln/ORT ratio over the quiet one (above 1: kiln suffers more from "
            "the load than onnxruntime); p90/median of each side's timed runs under load; kiln alone: the "
            "runs (warm-up included) that kiln's thread governor ran on one thread (docs/design.md).",
            "",
            "| model | batch | threads | kiln loaded median | ORT loaded median | kiln/ORT quiet | kiln/ORT loaded "
            "| loaded/quiet | kiln p90/median | ORT p90/median | kiln alone |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in loaded:
            ld = r["load"]
            ort_tail = f"{ld['ort_p90_ms'] / ld['ort_median_ms']:.2f}" if "ort_p90_ms" in ld else "?"
            lines.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {ld['median_ms']:.2f} | "
                         f"{ld['ort_median_ms']:.2f} | {r['ratio']:.2f} | {ld['ratio']:.2f} | "
                         f"{ld['ratio'] / r['ratio']:.2f} | {ld['p90_ms'] / ld['median_ms']:.2f} | {ort_tail} | "
                         f"{ld.get('runs_alone', '?')} of {ld.get('runs_all', '?')} |")
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
            "loadavg_start": round(os.getloadavg()[0], 2), "load_processes": a.load}
    n = len(a.models) * len(a.batches) * len(a.threads)
    log(f"{n} rows: models {a.models}, batches {a.batches}, threads {a.threads}, {a.runs} runs each")
    peaks = measure_peaks(a, {})
    rows, failed, na = [], 0, 0
    preps, fp32_rows = {}, {}
    # FP32 rows first, so that the mixed-precision and INT8 rows can take
    # their FP32 medians from them
    order = ([m for m in a.models if m not in INT8_MODELS and m not in PRECISION_MODELS]
             + [m for m in a.models if m in PRECISION_MODELS] + [m for m in a.models if m in INT8_MODELS])
    for model in order:
        if model in INT8_MODELS:
            for batch in a.batches:
                try:
                    fp32_prep = prepare(a, INT8_MODELS[model]["fp32"], batch, art_dir, preps)
                    prep = prepare_int8(a, model, batch, art_dir, fp32_prep)
                except RuntimeError as e:
                    log(f"{model} batch {batch}: {e}")
                    rows += [{"model": model, "batch": batch, "threads": t, "int8": True, "error": str(e)}
                             for t in a.threads]
                    failed += len(a.threads)
                    continue
                if "kiln_error" in prep:
                    log(f"{model} batch {batch}: n/a on kiln's side: {prep['kiln_error']}")
                for t in a.threads:
                    try:
                        row = bench_int8(a, model, batch, t, prep, fp32_rows)
                        na += "kiln_error" in row
                        log(f"{model} b{batch} t{t}: kiln "
                            + (f"{row['median_ms']:.2f} ms" if "median_ms" in row else "n/a")
                            + f", onnxruntime {row['ort_median_ms']:.2f} ms, kiln FP32 {row['fp32_median_ms']:.2f} ms")
                    except (RuntimeError, ValueError, KeyError) as e:
                        log(f"{model} b{batch} t{t}: {e}")
                        row = {"model": model, "batch": batch, "threads": t, "int8": True, "error": str(e)}
                        failed += 1
                    rows.append(row)
            continue
        for batch in a.batches:
            if model in DYN_MODELS and batch != 1:
                continue  # the run-time size rows are batch 1
            try:
                prep = prepare(a, model, batch, art_dir, preps)
            except RuntimeError as e:
                log(f"{model} batch {batch}: {e}")
                rows += [{"model": model, "batch": batch, "threads": t, "error": str(e)} for t in a.threads]
                failed += len(a.threads)
                continue
            for t in a.threads:
                row = {"model": model, "batch": batch, "threads": t, "flops": prep["flops"],
                       "compile_s": prep["compile_s"]}
                if model in PRECISION_MODELS:
                    row["precision"] = PRECISION_MODELS[model]["flags"][-1]
                try:
                    if model in PRECISION_MODELS:
                        precision_extras(a, model, batch, t, prep, row, preps, fp32_rows, art_dir)
                        if "kiln_error" in row:
                            log(f"{model} b{batch} t{t}: n/a: {row['kiln_error']}")
                            na += 1
                            rows.append(row)
                            continue
                    row.update(bench_one(a, prep, t))
                    if "fp32_median_ms" in row:
                        row["speedup"] = row["fp32_median_ms"] / row["median_ms"]
                    log(f"{model} b{batch} t{t}: kiln {row['median_ms']:.2f} ms, "
                        f"onnxruntime {row['ort_median_ms']:.2f} ms, ratio {row['ratio']:.2f}")
                    if a.load:
                        row["load"] = bench_loaded(a, prep, t)
                        log(f"{model} b{batch} t{t} beside {a.load} busy process(es): kiln "
                            f"{row['load']['median_ms']:.2f} ms (p90 {row['load']['p90_ms']:.2f}), onnxruntime "
                            f"{row['load']['ort_median_ms']:.2f} ms, ratio {row['load']['ratio']:.2f}")
                except (RuntimeError, ValueError, KeyError) as e:
                    log(f"{model} b{batch} t{t}: {e}")
                    row["error"] = str(e)
                    failed += 1
                rows.append(row)
                fp32_rows[(model, batch, t)] = row
    measure_peaks(a, peaks)  # again at the end: the best of the two counts
    meta["loadavg_end"] = round(os.getloadavg()[0], 2)
    table = report(a, meta, peaks, rows)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(table)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"meta": meta, "peaks": {str(t): p for t, p in peaks.items()}, "rows": rows}, f, indent=1)
        f.write("\n")
    print(table, end="")
    log(f"wrote {out_dir}/results.md and results.json" + (f"; {failed} row(s) failed" if failed else "")
        + (f"; {na} INT8 row(s) n/a on kiln's side (not a failure)" if na else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
