#!/usr/bin/env python3
"""Times onnxruntime on a model, for `kiln bench --vs-ort` and by hand.

usage: ort_bench.py MODEL.onnx --threads T --warmup W [--input NAME=FILE.npy ...]
                    (--runs N | --serve)

The session: CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads T,
inter_op_num_threads 1; the inputs are loaded once; W warm-up runs.

One-shot (--runs N): N timed runs, then one JSON object on stdout:
{"median_ms": ..., "p90_ms": ..., "runs": N}.

Server (--serve, what `kiln bench --vs-ort` uses so that it can interleave
kiln's runs with these): after the warm-up prints `ready`, then answers one
command per line on stdin: `run N` -> N timed runs, one line
{"times_ms": [...]}; `quit` or end of input -> exit 0. Every line is flushed.

Errors (model, inputs, onnxruntime missing, a bad command): one line
`ort_bench: ...` on stderr and exit status 1.
"""
import argparse
import json
import os
import sys
import time


class BenchError(Exception):
    pass


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--serve", action="store_true", help="answer `run N` / `quit` on stdin")
    return ap.parse_args()


def make_session(a):
    """The session and its feeds, after the warm-up runs."""
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        raise BenchError(f"onnxruntime is not usable with {sys.executable}: {e}") from e
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise BenchError(f"onnxruntime cannot load {a.model}: {e}") from e
    feeds = {}
    for spec in a.input:
        name, sep, path = spec.partition("=")
        if not sep:
            raise BenchError(f"--input takes NAME=FILE.npy, not '{spec}'")
        feeds[name] = np.load(path)
    for _ in range(a.warmup):
        sess.run(None, feeds)
    return sess, feeds


def timed_runs(sess, feeds, n):
    """Milliseconds of each of n runs."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def one_shot(sess, feeds, runs):
    times = sorted(timed_runs(sess, feeds, runs))
    p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
    print(json.dumps({"median_ms": times[len(times) // 2], "p90_ms": p90, "runs": runs}), flush=True)


def serve(sess, feeds, out):
    """The `run N` / `quit` loop; replies go to `out`, the protocol's own stream."""
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        words = line.split()
        if words == ["quit"]:
            return
        if len(words) != 2 or words[0] != "run" or not words[1].isdigit() or int(words[1]) < 1:
            raise BenchError(f"unknown command {line.strip()!r} (expected `run N` or `quit`)")
        out.write(json.dumps({"times_ms": timed_runs(sess, feeds, int(words[1]))}) + "\n")
        out.flush()


def main() -> int:
    a = parse_args()
    out = sys.stdout
    if a.serve:
        # The protocol owns the real stdout; anything onnxruntime or numpy
        # might print there goes to stderr instead of corrupting a reply.
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
    try:
        if a.threads < 1 or a.warmup < 0 or (not a.serve and a.runs < 1):
            raise BenchError("--threads and --runs must be at least 1, --warmup at least 0")
        sess, feeds = make_session(a)
        if a.serve:
            serve(sess, feeds, out)
        else:
            one_shot(sess, feeds, a.runs)
    except BrokenPipeError:
        print("ort_bench: the reader of the replies went away", file=sys.stderr)
        return 1
    except Exception as e:  # one line for the caller to show, not a traceback
        print(f"ort_bench: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
