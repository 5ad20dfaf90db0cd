#!/usr/bin/env python3
"""Times onnxruntime on a model for `kiln bench --vs-ort`.

usage: ort_bench.py MODEL.onnx --threads T --runs N --warmup W [--input NAME=FILE.npy ...]
Prints one JSON object: {"median_ms": ..., "p90_ms": ..., "runs": N}.
"""
import argparse
import json
import sys
import time

import numpy as np
import onnxruntime as ort


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--input", action="append", default=[])
    a = ap.parse_args()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    feeds = {}
    for spec in a.input:
        name, path = spec.split("=", 1)
        feeds[name] = np.load(path)
    for _ in range(a.warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
    print(json.dumps({"median_ms": times[len(times) // 2], "p90_ms": p90, "runs": a.runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
