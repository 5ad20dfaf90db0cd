#!/usr/bin/env python3
"""LSTM, GRU and RNN compiled (kiln's packed kernel, runtime/src/rnn.c)
against onnxruntime, through `kiln difftest`: every kind x direction
(forward, reverse, bidirectional) x layout (0, 1) x GRU's
linear_before_reset, each in a plain form (bias only) and a full one
(sequence_lens with short rows, initial_h/initial_c given as inputs, clip,
LSTM peepholes), plus input_forget, non-default activations, a hidden size
large enough that a step splits across threads, a batch of 3, and weights
that are graph inputs (packed again at every run). Hidden sizes are not
multiples of 16 (the kernel's block) except where said.

Each case folder holds a model with several recurrent nodes; kiln difftest
runs the reference evaluator and the artifact at -O3 with 1 and 2 threads,
every output within 1e-4 (+ 1e-5 relative) of onnxruntime's. onnxruntime
1.18 has no layout=1: its expected outputs come from the same node at
layout 0 between transposes.

Then checks what ran (kernels_O3.txt, from kn_session_step_impl): every
recurrent node on "kiln <kind>:<isa>" by default, ":portable" with
KILN_RNN=portable, and no kiln kernel with KILN_RNN=ref (the reference
kernel), each run passing the same comparison. A bad KILN_RNN value must
fail with a message naming it.

Usage: check_rnn.py KILN OUT_DIR
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(4242)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
ATOL, RTOL = 1e-4, 1e-5


def fail(msg):
    print("check_rnn: FAIL:", msg)
    sys.exit(1)


def rnd(*shape, scale=1.0):
    return (RNG.uniform(-1, 1, size=shape) * scale).astype(np.float32)


class Case:
    """One model: nodes for kiln, the same nodes as onnxruntime can run them."""

    def __init__(self, name):
        self.name = name
        self.nodes, self.ort_nodes, self.inits = [], [], []
        self.inputs, self.feeds, self.outputs, self.shapes = [], {}, [], []
        self.kinds = []  # op type per recurrent node

    def inp(self, name, arr):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(arr.shape)))
        self.feeds[name] = arr
        return name

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(arr, name=name))
        return name

    def add(self, op, tag, T=5, B=1, I=6, H=19, direction="forward", layout=0, full=False, lbr=0, **extra):
        D, G = (2 if direction == "bidirectional" else 1), GATES[op]
        p = f"{tag}_"
        x = self.inp(p + "x", rnd(*((B, T, I) if layout else (T, B, I))))
        s = 1.0 / np.sqrt(H)
        w_arr, r_arr = rnd(D, G * H, I, scale=s * 1.5), rnd(D, G * H, H, scale=s * 1.5)
        w = self.init(p + "w", w_arr)
        r = self.inp(p + "r", r_arr) if extra.pop("r_input", False) else self.init(p + "r", r_arr)
        b = self.init(p + "b", rnd(D, 2 * G * H, scale=0.3))
        ins = [x, w, r, b]
        attrs = dict(hidden_size=H, direction=direction, **extra)
        if op == "GRU":
            attrs["linear_before_reset"] = lbr
        if full:
            lens = np.array([T, max(1, T - 2), 1][:B] if B > 1 else [max(1, T - 1)], np.int32)
            ins.append(self.init(p + "lens", lens))
            st = (B, D, H) if layout else (D, B, H)
            ins.append(self.inp(p + "h0", rnd(*st, scale=0.5)))
            if op == "LSTM":
                ins.append(self.inp(p + "c0", rnd(*st, scale=0.5)))
                ins.append(self.init(p + "peep", rnd(D, 3 * H, scale=0.3)))
            attrs["clip"] = 1.5
        outs = [p + "y", p + "yh"] + ([p + "yc"] if op == "LSTM" else [])
        self.nodes.append(helper.make_node(op, ins, outs, name=p + op.lower(), layout=layout, **attrs))
        self.outputs += outs
        self.shapes += [[B, T, D, H] if layout else [T, D, B, H]] + [[B, D, H] if layout else [D, B, H]] * (len(outs) - 1)
        self.kinds.append(op)
        if not layout:
            self.ort_nodes.append(self.nodes[-1])
            return
        # onnxruntime: layout 0 between transposes
        tr = lambda a, b_, perm: self.ort_nodes.append(helper.make_node("Transpose", [a], [b_], perm=perm))
        o_ins = list(ins)
        tr(x, p + "x_t", [1, 0, 2])
        o_ins[0] = p + "x_t"
        for k in range(5, len(o_ins)):
            if o_ins[k] in (p + "h0", p + "c0"):
                tr(o_ins[k], o_ins[k] + "_t", [1, 0, 2])
                o_ins[k] += "_t"
        o_outs = [o + "_t" for o in outs]
        self.ort_nodes.append(helper.make_node(op, o_ins, o_outs, name=p + "ort", **attrs))
        tr(o_outs[0], outs[0], [2, 0, 1, 3])
        for o in outs[1:]:
            tr(o + "_t", o, [1, 0, 2])

    def write(self, root):
        d = os.path.join(root, self.name)
        os.makedirs(d, exist_ok=True)
        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, s) for o, s in zip(self.outputs, self.shapes)]
        opset = [helper.make_opsetid("", 17)]
        model = helper.make_model(helper.make_graph(self.nodes, self.name, self.inputs, outs, self.inits),
                                  opset_imports=opset)
        model.ir_version = 8
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(d, "model.onnx"))
        om = helper.make_model(helper.make_graph(self.ort_nodes, self.name, self.inputs, outs, self.inits),
                               opset_imports=opset)
        om.ir_version = 8
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(om.SerializeToString(), so, providers=["CPUExecutionProvider"])
        expect = sess.run(self.outputs, self.feeds)
        for i, v in enumerate(self.inputs):
            with open(os.path.join(d, f"input_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(self.feeds[v.name], name=v.name).SerializeToString())
        for j, e in enumerate(expect):
            with open(os.path.join(d, f"expect_{j}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(e, name=self.outputs[j]).SerializeToString())
        with open(os.path.join(d, "tol.txt"), "w") as f:
            f.write("".join(f"{RTOL} {ATOL}\n" for _ in expect))


def cases():
    out = []
    for op in ("LSTM", "GRU", "RNN"):
        for layout in (0, 1):
            for lbr in ((0, 1) if op == "GRU" else (0,)):
                c = Case(f"{op.lower()}_layout{layout}" + (f"_lbr{lbr}" if op == "GRU" else ""))
                for direction in ("forward", "reverse", "bidirectional"):
                    for full in (False, True):
                        tag = f"{direction[:3]}{'_full' if full else ''}"
                        c.add(op, tag, direction=direction, layout=layout, full=full, lbr=lbr,
                              B=3 if full and direction != "reverse" else 1)
                out.append(c)
    c = Case("variants")
    c.add("LSTM", "lstm_if", input_forget=1, full=True, B=2)
    c.add("LSTM", "lstm_acts", direction="bidirectional", activations=["HardSigmoid", "Softsign", "Tanh"] * 2,
          activation_alpha=[0.3, 0.3], activation_beta=[0.4, 0.4])
    c.add("GRU", "gru_acts", activations=["Sigmoid", "Relu"], T=4)
    c.add("RNN", "rnn_relu", activations=["Relu"], full=True, B=2)
    c.add("RNN", "rnn_lrelu", direction="reverse", activations=["LeakyRelu"], activation_alpha=[0.2])
    c.add("LSTM", "lstm_rin", r_input=True, direction="bidirectional", full=True, B=2)
    c.add("GRU", "gru_rin", r_input=True, lbr=1)
    out.append(c)
    # steps large enough to split across 2 threads (kiln's team), H 96 a multiple of 16
    c = Case("large")
    c.add("LSTM", "lstm_h96", H=96, I=24, T=7, full=True, B=2)
    c.add("GRU", "gru_h112", H=112, I=20, T=6)
    c.add("GRU", "gru_lbr_h100", H=100, I=20, T=6, lbr=1, full=True, B=2)
    c.add("RNN", "rnn_h200", H=200, I=16, T=5)
    c.add("LSTM", "lstm_bi_h64", H=64, I=32, T=9, direction="bidirectional", full=True, B=3)
    out.append(c)
    return out


def difftest(kiln, root, env_extra, threads):
    env = dict(os.environ, **env_extra)
    for case in os.listdir(root):
        for f in ("kernels_O3.txt", "result.txt", "report_O3.txt"):
            p = os.path.join(root, case, f)
            if os.path.exists(p):
                os.remove(p)
    r = subprocess.run([kiln, "difftest", root, "-O", "3", "--threads", threads, "-j", "2"], env=env,
                       capture_output=True, text=True)
    print(r.stdout.strip())
    if r.returncode != 0:
        fail(f"kiln difftest with {env_extra or 'defaults'} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")


def kernels(root, case):
    """{threads: [kernel names of the steps that name one]}"""
    got = {}
    with open(os.path.join(root, case.name, "kernels_O3.txt")) as f:
        for line in f:
            m = re.match(r"t(\d+) step \d+ (.*)", line.strip())
            if m:
                got.setdefault(int(m.group(1)), []).append(m.group(2))
    return got


def check_kernels(root, all_cases, want_isa, threads):
    for c in all_cases:
        got = kernels(root, c) if os.path.exists(os.path.join(root, c.name, "kernels_O3.txt")) else {}
        for t in threads:
            names = sorted(n for n in got.get(t, []) if n.startswith("kiln "))
            want = sorted(f"kiln {k.lower()}:" for k in c.kinds)
            if want_isa is None:
                if names:
                    fail(f"{c.name}, {t} threads: KILN_RNN=ref still ran {names}")
                continue
            ok = len(names) == len(want) and all(n.startswith(w) for n, w in zip(names, want))
            if ok and want_isa != "any":
                ok = all(n.endswith(":" + want_isa) for n in names)
            if not ok:
                fail(f"{c.name}, {t} threads: the recurrent steps ran {names}, expected {want} "
                     f"({want_isa}) (kernels_O3.txt)")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    kiln, out = sys.argv[1], sys.argv[2]
    root = os.path.join(out, "cases")
    shutil.rmtree(root, ignore_errors=True)
    all_cases = cases()
    for c in all_cases:
        c.write(root)
    print(f"check_rnn: {len(all_cases)} cases, {sum(len(c.kinds) for c in all_cases)} recurrent nodes")
    difftest(kiln, root, {}, "1,2")
    check_kernels(root, all_cases, "any", (1, 2))
    difftest(kiln, root, {"KILN_RNN": "portable"}, "1,2")
    check_kernels(root, all_cases, "portable", (1, 2))
    difftest(kiln, root, {"KILN_RNN": "ref"}, "1")
    check_kernels(root, all_cases, None, (1,))
    # a value that is not one fails the session, naming it
    so = os.path.join(out, "bad_env.so")
    subprocess.run([kiln, "compile", os.path.join(root, "variants", "model.onnx"), "-o", so], check=True,
                   capture_output=True)
    r = subprocess.run([kiln, "profile", so, "--no-peak", "--runs", "1"], env=dict(os.environ, KILN_RNN="fast"),
                       capture_output=True, text=True)
    if r.returncode == 0 or "KILN_RNN='fast'" not in r.stderr:
        fail(f"KILN_RNN=fast: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    print("check_rnn: ok")


if __name__ == "__main__":
    main()
