#!/usr/bin/env python3
"""kiln's differential tester: random graphs through onnxruntime, kiln's
reference evaluator and kiln's compiled code (-O0 and -O3, 1, 2 and 4
threads), compared under per-op tolerances. See docs/testing.md.

  difftest.py --kiln build/kiln --seed 1000 --count 300 [--require-coverage]
      a fixed batch (what `make test` runs)
  difftest.py --kiln build/kiln --seconds 3600
      open-ended, random seeds, until the time is up (`make difftest`)
  difftest.py --kiln build/kiln --regress tests/difftest/regress
      the saved regression cases (each a minimized spec)

Each graph becomes a case folder (model.onnx, input_*.pb, expect_*.pb from
onnxruntime, tol.txt, spec.json) and `kiln difftest` runs a batch of them.
A failing or crashing case is minimized (delta debugging over outputs and
nodes) and, with --save-dir, saved as a regression spec. Exit status 1 on
any mismatch or crash, or on missing coverage with --require-coverage.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphgen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
LIMIT_MAG = 1e5  # intermediates beyond this make float comparisons meaningless


class GenBug(Exception):
    """The generator declared a type or shape that onnxruntime disagrees with."""


# ---- one case --------------------------------------------------------------------

def ort_values(spec):
    """Every tensor's value from onnxruntime (all intermediates exposed)."""
    names = [o for nd in spec["nodes"] for o in nd["outputs"] if o]
    model = graphgen.to_model(spec, outputs=names, dynamic=False)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as e:  # the generator made something onnxruntime refuses
        raise GenBug("onnxruntime refuses the graph: %s" % str(e).splitlines()[0][:300])
    feeds = graphgen.input_arrays(spec)
    try:
        outs = sess.run(names, feeds)
    except Exception as e:
        raise GenBug("onnxruntime fails to run the graph: %s" % str(e).splitlines()[0][:300])
    vals = dict(feeds)
    for n, v in zip(names, outs):
        want = spec["types"][n]
        if str(v.dtype) != want[0] or list(v.shape) != want[1]:
            raise GenBug("%s: generator says %s%s, onnxruntime gives %s%s" % (n, want[0], want[1], v.dtype,
                                                                               list(v.shape)))
        vals[n] = v
    return vals


def in_domain(vals):
    """No NaN/Inf and nothing huge anywhere: a mismatch is then a bug, not noise."""
    for v in vals.values():
        if v.dtype.kind == "f" and v.size:
            if not np.all(np.isfinite(v)) or float(np.max(np.abs(v))) > LIMIT_MAG:
                return False
    return True


def generic_in_n(spec):
    """True if onnxruntime runs the dynamic model with its leading dim N at
    1, 2 and the maximum (kiln's probes and its compile): a graph whose
    shapes only fit the drawn size is not a dynamic model."""
    dyn = spec["dynamic"]
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(graphgen.to_model(spec).SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        base = graphgen.input_arrays(spec)
        for n in (1, 2, dyn["N"]):
            feeds = {}
            for k, v in base.items():
                if k in dyn["inputs"]:
                    v = np.resize(v, (n,) + v.shape[1:])
                feeds[k] = v
            sess.run(None, feeds)
    except Exception:
        return False
    return True


def prepare(spec, tries=3):
    """Values with every intermediate in domain, drawing new input seeds
    up to `tries` times (NNSmith's input search, simplified); None if none."""
    rng = np.random.default_rng(spec["seed"] + 7)
    if spec.get("dynamic") and not generic_in_n(spec):
        del spec["dynamic"]
    for k in range(tries):
        vals = ort_values(spec)
        if in_domain(vals) and not graphgen.ill_conditioned(spec, vals):
            return vals
        for i in spec["inputs"]:
            i["seed"] = int(rng.integers(0, 2**31 - 1))
            if i["kind"] == "normal" and k >= 1:
                i["kind"] = "unit"
    return None


def write_case(spec, vals, d, with_spec=True):
    os.makedirs(d, exist_ok=True)
    onnx.save(graphgen.to_model(spec), os.path.join(d, "model.onnx"))
    for k, i in enumerate(spec["inputs"]):
        t = numpy_helper.from_array(vals[i["name"]], i["name"])
        with open(os.path.join(d, "input_%d.pb" % k), "wb") as f:
            f.write(t.SerializeToString())
    for k, o in enumerate(spec["outputs"]):
        t = numpy_helper.from_array(vals[o], o)
        with open(os.path.join(d, "expect_%d.pb" % k), "wb") as f:
            f.write(t.SerializeToString())
    with open(os.path.join(d, "tol.txt"), "w") as f:
        for r, a in graphgen.tolerances(spec, vals):
            f.write("%.9g %.9g\n" % (r, a))
    if spec.get("dynamic"):
        with open(os.path.join(d, "dynamic.txt"), "w") as f:
            f.write("N %d\n" % spec["dynamic"]["N"])
    if with_spec:  # only for a reader (--keep): the JSON of the constants costs a tenth of generating
        graphgen.dump(spec, os.path.join(d, "spec.json"))


def make_case_here(spec, d, with_spec=True):
    """Writes spec as case folder d; False if no in-domain inputs were found."""
    vals = prepare(spec)
    if vals is None:
        return False
    write_case(spec, vals, d, with_spec)
    return True


# onnxruntime itself crashes on a few graphs (a segfault running a dynamic
# model at N=1 took down an hour's run), so every case is made in a worker
# process: a crash costs that graph only, and a new worker takes over.
_worker = None


def _in_worker(fn, *a):
    global _worker
    if _worker is None:
        _worker = concurrent.futures.ProcessPoolExecutor(max_workers=1)
    try:
        return _worker.submit(fn, *a).result()
    except concurrent.futures.process.BrokenProcessPool:
        _worker = None
        raise GenBug("onnxruntime (or the case writer) crashed on the graph")


def _make_case_task(spec, d, with_spec):
    try:
        return make_case_here(spec, d, with_spec), spec, None
    except GenBug as e:
        return False, spec, str(e)


def _gen_case_task(seed, max_nodes, d, with_spec, only=None):
    spec = graphgen.generate(seed, max_nodes=max_nodes, only=only)
    return (None, None, None) if spec is None else _make_case_task(spec, d, with_spec)


def _finish_task(res, d):
    ok, spec, genbug = res
    if genbug:
        raise GenBug(genbug)
    return ok, spec


def make_case(spec, d, with_spec=True):
    """make_case_here in the worker; the input search changes spec, which
    comes back updated."""
    try:
        ok, new_spec = _finish_task(_in_worker(_make_case_task, spec, d, with_spec), d)
    except GenBug:
        shutil.rmtree(d, ignore_errors=True)
        raise
    spec.clear()
    spec.update(new_spec)
    return ok


def gen_case(seed, max_nodes, d, with_spec, only=None):
    """(made, spec) for seed, generated and written by the worker; spec is
    None when the generator gave up on the seed."""
    try:
        ok, spec = _finish_task(_in_worker(_gen_case_task, seed, max_nodes, d, with_spec, only), d)
    except GenBug:
        shutil.rmtree(d, ignore_errors=True)
        raise
    return ok, spec


# ---- running kiln ----------------------------------------------------------------

LINE = re.compile(r"^difftest: (\S+) (ok|FAIL|CRASH|UNSUPPORTED)\s*(.*)$")


def kiln_env():
    """kiln difftest's environment: OpenMP threads that sleep when idle. The
    checks run 2 and 4 threads on a machine that runs -j cases at once, and
    libgomp's default is to spin for a while after each parallel loop: a
    twentieth of the whole run's CPU went to spinning. Results do not depend
    on it."""
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def run_kiln(args, work, extra=(), quiet=True):
    """Runs `kiln difftest` on work; {case: (status, detail)}."""
    cmd = [args.kiln, "difftest", work, "-j", str(args.jobs)] + list(extra)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=kiln_env())
    res = {}
    for ln in p.stdout.splitlines():
        m = LINE.match(ln)
        if m:
            res[m.group(1)] = (m.group(2), m.group(3))
        elif not quiet or not ln.startswith("difftest:"):
            if ln.strip():
                print("  kiln: " + ln)
    if p.returncode not in (0, 1):
        print("kiln difftest exited %d" % p.returncode)
    return res


REPORT_LINE = re.compile(r"^(\S+)\s{2,}(\S+)\s{2,}(.+?)\s*$")


KERNEL_LINE = re.compile(r"^t\d+ step \d+ (.+?)\s*$")


def coverage_of(case_dir, cov, kernels):
    for fn in os.listdir(case_dir):
        if fn.startswith("kernels_O"):
            with open(os.path.join(case_dir, fn)) as f:
                for ln in f:
                    m = KERNEL_LINE.match(ln)
                    if m:
                        kernels[m.group(1)] += 1
        if fn.startswith("report_O"):
            with open(os.path.join(case_dir, fn)) as f:
                for ln in f:
                    m = REPORT_LINE.match(ln)
                    if m and not ln[0].isdigit():
                        cov[m.group(2)][m.group(3)] += 1


def lowered_ops():
    """Every op the CPU backend has a lowering for, read from the lowering
    tables (codegen/cpu/lower_*.c), so that a new lowering is reported as
    uncovered until the generator reaches it."""
    ops = set()
    cdir = os.path.join(SRC, "codegen", "cpu")
    for fn in sorted(os.listdir(cdir)):
        if fn.startswith("lower_") and fn.endswith(".c"):
            src = open(os.path.join(cdir, fn)).read()
            m = re.search(r"const kn_cg_lowering kn_cg_lower_\w+\[\] = \{(.*?)\n\};", src, re.S)
            if not m:
                continue
            body = m.group(1)
            ops |= set(re.findall(r"\{KN_OP_(\w+),", body))
            ops |= set(re.findall(r"\b(?:UN|BIN|VAR)\((\w+)\)", body))
    ops.discard("UNKNOWN")
    return ops


# Every path `kiln compile --report` can name ("in rows": a node over a
# dynamic dim, emitted as a loop over its rows).
PATHS = ["generated", "generated, parallel", "generated, in rows", "oneDNN", "oneDNN, in rows", "runtime kernel",
         "alias", "folded"]
# Ops with a lowering that a generated graph cannot reach: only in opsets
# before 10 (Upsample, Scatter) or made by kiln's own fusion passes
# (FusedConv, FusedMatMul, FusedElementwise are reached through the Conv,
# MatMul and elementwise chains the passes fuse at -O3).
UNREACHABLE = {"Upsample": "opset < 10 only (Resize replaces it)", "Scatter": "opset < 11 only (ScatterElements)"}


def print_coverage(cov, kernels, require):
    ops = lowered_ops()
    missing = []
    print("coverage: op x path (cases whose report names it)")
    for op in sorted(ops | set(cov)):
        paths = cov.get(op, {})
        line = ", ".join("%s %d" % (p, paths[p]) for p in sorted(paths))
        print("  %-24s %s" % (op, line or "-"))
        if op in ops and op not in UNREACHABLE and not any(p.startswith(("generated", "oneDNN")) for p in paths):
            missing.append(op)
    seen_paths = {p for v in cov.values() for p in v}
    missing_paths = [p for p in PATHS if p not in seen_paths]
    for op, why in sorted(UNREACHABLE.items()):
        print("  not generated: %s (%s)" % (op, why))
    print("coverage: %d of %d lowered ops reached on a generated/oneDNN path; paths seen: %s" %
          (len(ops - set(missing) - set(UNREACHABLE)), len(ops - set(UNREACHABLE)), ", ".join(sorted(seen_paths))))
    print("coverage: kernels the sessions chose for oneDNN steps: %s" %
          ", ".join("%s %d" % kv for kv in sorted(kernels.items())))
    if missing:
        print("coverage: ops never compiled by their lowering: %s" % " ".join(missing))
    if missing_paths:
        print("coverage: paths never taken: %s" % ", ".join(missing_paths))
    return not require or (not missing and not missing_paths)


# ---- minimizing ------------------------------------------------------------------

def failing_output(detail, spec):
    m = re.search(r"output '([^']+)'", detail)
    return m.group(1) if m and m.group(1) in spec["outputs"] else None


def prune(spec):
    """Drops nodes no output depends on, and unused inputs/initializers."""
    need = set(spec["outputs"])
    keep = []
    for nd in reversed(spec["nodes"]):
        if any(o in need for o in nd["outputs"]):
            keep.append(nd)
            need |= {i for i in nd["inputs"] if i}
    spec["nodes"] = list(reversed(keep))
    spec["inputs"] = [i for i in spec["inputs"] if i["name"] in need]
    if spec.get("dynamic"):
        spec["dynamic"]["inputs"] = [n for n in spec["dynamic"]["inputs"] if n in need]
        if not spec["dynamic"]["inputs"]:
            del spec["dynamic"]
    spec["inits"] = [c for c in spec["inits"] if c["name"] in need]
    named = need | {o for nd in spec["nodes"] for o in nd["outputs"]}
    spec["types"] = {k: v for k, v in spec["types"].items() if k in named}
    # outputs that are node outputs must stay (a graph input as output is fine too)
    return spec


def still_fails(args, spec, kind):
    with tempfile.TemporaryDirectory(prefix="kiln-dmin-") as tmp:
        d = os.path.join(tmp, "case")
        try:
            if not make_case(spec, d):
                return False
        except GenBug:
            return False
        r = run_kiln(args, tmp).get("case")
        return r is not None and r[0] == kind


def minimize(args, spec, kind, detail):
    spec = json.loads(json.dumps(spec))
    out = failing_output(detail, spec)
    if out:
        trial = prune(dict(json.loads(json.dumps(spec)), outputs=[out]))
        if still_fails(args, trial, kind):
            spec = trial
    spec = prune(spec)
    changed = True
    while changed:
        changed = False
        # cut a node's producers: its inputs become graph inputs
        for k in range(len(spec["nodes"])):
            if k >= len(spec["nodes"]):
                break
            nd = spec["nodes"][k]
            produced = {o for n2 in spec["nodes"] for o in n2["outputs"]}
            for i in nd["inputs"]:
                if i not in produced:
                    continue
                trial = json.loads(json.dumps(spec))
                producer = next(n2 for n2 in trial["nodes"] if i in n2["outputs"])
                trial["nodes"] = [n2 for n2 in trial["nodes"] if n2 is not producer]
                for o in producer["outputs"]:  # every output of the cut node becomes an input
                    if not o:
                        continue
                    dt, shape = spec["types"][o]
                    trial["inputs"].append({"name": o, "dtype": dt, "shape": shape, "seed": 12345 + len(trial["inputs"]),
                                            "kind": "int" if dt in graphgen.INTS else "bool" if dt == "bool" else "normal"})
                trial = prune(trial)
                if still_fails(args, trial, kind):
                    spec, changed = trial, True
                    break
        # drop an output
        if len(spec["outputs"]) > 1:
            for o in list(spec["outputs"]):
                trial = prune(dict(json.loads(json.dumps(spec)), outputs=[x for x in spec["outputs"] if x != o]))
                if trial["nodes"] and still_fails(args, trial, kind):
                    spec, changed = trial, True
                    break
    return spec


# ---- batches ------------------------------------------------------------------------

class Stats:
    def __init__(self):
        self.graphs = self.ok = self.unsupported = self.rejected = self.genbugs = 0
        self.failures = []  # (seed, status, detail, case dir)
        self.cov = collections.defaultdict(collections.Counter)
        self.ops = collections.Counter()
        self.kernels = collections.Counter()  # oneDNN/kiln kernels the sessions picked


def gen_batch(seeds, work, stats, args):
    made = []
    for s in seeds:
        d = os.path.join(work, "s%d" % s)
        try:
            ok, spec = gen_case(s, args.max_nodes, d, bool(args.keep), args.only)
            if spec is None:
                continue
            if ok:
                made.append((s, d, spec))
            else:
                stats.rejected += 1
        except GenBug as e:
            stats.genbugs += 1
            if args.verbose:
                print("generator: seed %d: %s" % (s, e))
    return made


def account(args, made, res, stats):
    for s, d, spec in made:
        st, detail = res.get(os.path.basename(d), ("CRASH", "no result from kiln difftest"))
        stats.graphs += 1
        for nd in spec["nodes"]:
            stats.ops[nd["op"]] += 1
        coverage_of(d, stats.cov, stats.kernels)
        if st == "ok":
            stats.ok += 1
        elif st == "UNSUPPORTED":
            stats.unsupported += 1
            if args.verbose:
                print("unsupported: seed %d: %s" % (s, detail))
        else:
            stats.failures.append((s, st, detail, d, spec))
            print("difftest: seed %d %s %s" % (s, st, detail))


def handle_failures(args, stats):
    for s, st, detail, d, spec in stats.failures:
        if args.no_minimize:
            continue
        small = minimize(args, spec, st, detail)
        print("minimized seed %d: %d nodes (%s), %d inputs" % (
            s, len(small["nodes"]), " ".join(nd["op"] for nd in small["nodes"]), len(small["inputs"])))
        if args.save_dir:
            os.makedirs(args.save_dir, exist_ok=True)
            path = os.path.join(args.save_dir, "seed%d.json" % s)
            graphgen.dump(small, path)
            print("saved %s" % path)


def summary(stats, t0):
    dt = time.time() - t0
    print("difftest: %d graphs in %.0f s (%.1f graphs/s): %d ok, %d mismatches/crashes, %d unsupported; "
          "%d generated graphs had no in-domain inputs, %d were refused by onnxruntime or crashed it (generator or onnxruntime bugs)" %
          (stats.graphs, dt, stats.graphs / max(dt, 1e-9), stats.ok, len(stats.failures), stats.unsupported,
           stats.rejected, stats.genbugs))
    print("difftest: ops in generated graphs: %d kinds, %d nodes" % (len(stats.ops), sum(stats.ops.values())))


def run_regress(args):
    t0 = time.time()
    stats = Stats()
    work = tempfile.mkdtemp(prefix="kiln-diffreg-")
    try:
        made = []
        for fn in sorted(os.listdir(args.regress)):
            if fn.endswith(".json"):
                spec = json.load(open(os.path.join(args.regress, fn)))
                d = os.path.join(work, fn[:-5])
                if not make_case(spec, d):
                    print("regress: %s: no in-domain inputs (the case is broken)" % fn)
                    return 1
                made.append((fn, d, spec))
        res = run_kiln(args, work)
        for fn, d, spec in made:
            st, detail = res.get(os.path.basename(d), ("CRASH", "no result"))
            print("regress: %s %s %s" % (fn, st, detail))
            stats.graphs += 1
            if st != "ok":
                stats.failures.append((fn, st, detail, d, spec))
        print("regress: %d cases, %d fail" % (stats.graphs, len(stats.failures)))
        return 1 if stats.failures or not made else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--batch", type=int, default=24)
    ap.add_argument("--max-nodes", type=int, default=30)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--regress")
    ap.add_argument("--save-dir")
    ap.add_argument("--keep", help="keep case folders here")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--require-coverage", action="store_true")
    ap.add_argument("--only", type=lambda v: v.split(","), default=None,
                    help="draw only these generators (graphgen.OPS keys, comma-separated) for a focused run")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if args.regress:
        return run_regress(args)

    t0 = time.time()
    stats = Stats()
    base = args.keep or tempfile.mkdtemp(prefix="kiln-difftest-")
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little") % (2**31 - 2**20)
    print("difftest: first seed %d" % seed)
    n_done = 0
    k = 0
    pending = None  # (made, Popen, work) of the batch kiln is running
    try:
        while True:
            if args.seconds is None:
                if n_done >= args.count:
                    break
                cnt = min(args.batch, args.count - n_done)
            else:
                if time.time() - t0 > args.seconds:
                    break
                cnt = args.batch
            work = os.path.join(base, "b%d" % k)
            os.makedirs(work, exist_ok=True)
            made = gen_batch(range(seed + n_done, seed + n_done + cnt), work, stats, args)
            n_done += cnt
            k += 1
            # kiln runs this batch while the next one is generated
            if pending:
                finish(args, pending, stats)
            pending = (made, start_kiln(args, work), work)
        if pending:
            finish(args, pending, stats)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    summary(stats, t0)
    handle_failures(args, stats)
    ok_cov = print_coverage(stats.cov, stats.kernels, args.require_coverage)
    return 1 if stats.failures or not ok_cov or stats.graphs == 0 else 0


def start_kiln(args, work):
    cmd = [args.kiln, "difftest", work, "-j", str(args.jobs)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=kiln_env())


def finish(args, pending, stats):
    made, p, work = pending
    out, _ = p.communicate()
    res = {}
    for ln in out.splitlines():
        m = LINE.match(ln)
        if m:
            res[m.group(1)] = (m.group(2), m.group(3))
    account(args, made, res, stats)
    if not args.keep:
        for s, d, spec in made:
            if not any(f[0] == s for f in stats.failures):
                shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
