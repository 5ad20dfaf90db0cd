#!/usr/bin/env python3
"""ConvTranspose and thin convolutions, compiled, against onnxruntime.

Group `deconv`: ConvTranspose across strides, pads, output_padding,
output_shape, auto_pad (SAME_UPPER, SAME_LOWER, VALID), groups, dilations,
1-D/2-D/3-D, and fused bias, activations (Relu, Clip, Sigmoid, LeakyRelu),
a residual Add and a folded BatchNormalization, between convolutions (the
session's blocked layout) and at the graph's edges. Each case is a small
ONNX model written here with onnx.helper; the test compiles it with
`kiln compile --report`, asserts that every ConvTranspose node (plain or
fused) runs as oneDNN (the report) with an optimized kernel (`kiln profile`
names it: never oneDNN's "ref" one), runs the artifact, and compares every
output with onnxruntime's within 1e-4 (atol and rtol). Cases oneDNN cannot
express must take the runtime kernel with a remark that says why, and still
agree.

Group `thin`: k x 1 convolutions over width-1 images and 1 x k over
height-1 rows (the shapes of CRNN-style text recognizers), strided,
dilated, grouped, fused, each compiled once and run under every value of
KILN_CONV_ALGO (every row of runtime/src/dnnl/conv.c's table forced where
it supports the layer, oneDNN's direct convolution elsewhere), each against
onnxruntime within 1e-4, and with the kernel the row forces checked in
`kiln profile` where the row supports the layer. im2col runs only between
channel-blocked activations (nChw8c/16c; runtime/src/dnnl/im2col.c): an
AVX-512 session exchanges NHWC, where the row declines and forcing it must
give oneDNN's direct convolution, so im2col is also forced with oneDNN held
to AVX2 ("im2col@avx2"), where the session's layout is blocked on any CPU.

Usage: deconv_thin_cases.py KILN OUT_DIR {deconv,thin,all} [--case NAME]...
Exit 1 on any failure.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

TOL = 1e-4
COMPILED = {"oneDNN", "oneDNN, in rows"}
ALGOS = ["auto", "winograd", "pointwise", "im2col", "im2col@avx2", "thin", "matmul", "direct", "xdw", "dnnl"]


def algo_env(algo):
    """The environment that forces `algo`: KILN_CONV_ALGO, and for
    "NAME@avx2" oneDNN held to AVX2 (blocked activations in the session)."""
    name, _, isa = algo.partition("@")
    env = dict(os.environ, KILN_CONV_ALGO=name)
    if isa:
        env["ONEDNN_MAX_CPU_ISA"] = isa.upper()
    return env


class Case:
    """inputs: [(name, array)]; consts: [(name, array)]; nodes: onnx nodes;
    outputs: output names; want: the report label every ConvTranspose / Conv
    node must have ("oneDNN" or "runtime kernel"); remark: a regex the
    report must hold (for fallbacks)."""

    def __init__(self, name, inputs, consts, nodes, outputs, want="oneDNN", remark=None, ops=("ConvTranspose",)):
        self.name, self.inputs, self.consts, self.nodes, self.outputs = name, inputs, consts, nodes, outputs
        self.want, self.remark, self.ops = want, remark, ops
        self.thin = False  # a conv the thin row takes when forced (a unit spatial dim it can drop)
        self.chain = False  # between blocked activations
        self.fused = False  # every post step must fuse into the FusedConvTranspose
        self.thin_w = False  # a k x 1 conv over width 1
        self.max_act_reorders = None  # activation reorders a run may have (None: not checked)


def rng_for(name):
    return np.random.default_rng(sum(map(ord, name)) * 7919)  # stable across runs (hash() is not)


def ct_case(name, x_shape, w_shape, attrs=None, bias=True, post=(), residual=False, bn=False, want="oneDNN",
            remark=None, before=None, after=None):
    """One ConvTranspose x W (+ bias), optionally between convolutions
    (before/after: output channels of a 3x3 conv on either side), then the
    post chain: 'bn', 'relu', 'clip', 'sigmoid', 'leaky', 'add' (residual)."""
    r = rng_for(name)
    inputs = [("x", r.uniform(-1, 1, x_shape).astype(np.float32))]
    consts, nodes = [], []
    cur, c_in = "x", x_shape[1]
    rank = len(x_shape)
    if before:
        consts.append(("wb", r.uniform(-0.3, 0.3, [before, c_in] + [3] * (rank - 2)).astype(np.float32)))
        nodes.append(helper.make_node("Conv", [cur, "wb"], ["pre"], name="conv_before", pads=[1] * (2 * (rank - 2))))
        cur, c_in = "pre", before
    w_shape = [c_in] + list(w_shape[1:])
    consts.append(("w", r.uniform(-0.3, 0.3, w_shape).astype(np.float32)))
    ins = [cur, "w"]
    out_ch = w_shape[1] * (attrs or {}).get("group", 1)
    if bias:
        consts.append(("b", r.uniform(-0.5, 0.5, [out_ch]).astype(np.float32)))
        ins.append("b")
    nodes.append(helper.make_node("ConvTranspose", ins, ["ct"], name="deconv", **(attrs or {})))
    cur = "ct"
    for i, p in enumerate(post):
        o = f"p{i}"
        if p == "bn":
            for nm, v in [("s", r.uniform(0.5, 1.5, out_ch)), ("bb", r.uniform(-0.5, 0.5, out_ch)),
                          ("m", r.uniform(-0.2, 0.2, out_ch)), ("v", r.uniform(0.5, 2.0, out_ch))]:
                consts.append((f"bn_{nm}", v.astype(np.float32)))
            nodes.append(helper.make_node("BatchNormalization", [cur, "bn_s", "bn_bb", "bn_m", "bn_v"], [o],
                                          name="bn", epsilon=1e-5))
        elif p == "relu":
            nodes.append(helper.make_node("Relu", [cur], [o], name=f"relu{i}"))
        elif p == "clip":
            consts += [("lo", np.array(0, np.float32)), ("hi", np.array(0.6, np.float32))]
            nodes.append(helper.make_node("Clip", [cur, "lo", "hi"], [o], name=f"clip{i}"))
        elif p == "sigmoid":
            nodes.append(helper.make_node("Sigmoid", [cur], [o], name=f"sig{i}"))
        elif p == "leaky":
            nodes.append(helper.make_node("LeakyRelu", [cur], [o], name=f"leaky{i}", alpha=0.1))
        elif p == "add":
            inputs.append(("res", None))  # shaped below, from onnxruntime's output shape
            nodes.append(helper.make_node("Add", [cur, "res"], [o], name=f"add{i}"))
        cur = o
    if after:
        consts.append(("wa", r.uniform(-0.3, 0.3, [after, out_ch] + [3] * (rank - 2)).astype(np.float32)))
        nodes.append(helper.make_node("Conv", [cur, "wa"], ["post"], name="conv_after", pads=[1] * (2 * (rank - 2))))
        cur = "post"
    nodes.append(helper.make_node("Identity", [cur], ["y"], name="out"))
    c = Case(name, inputs, consts, nodes, ["y"], want, remark)
    c.fused = bool(post) and want == "oneDNN"
    return c


def deconv_cases():
    c = []
    X = [1, 16, 12, 10]
    W = [16, 8, 3, 3]
    # strides
    c.append(ct_case("k2s2_dbnet", [1, 32, 20, 20], [32, 16, 2, 2], {"strides": [2, 2]}, post=("relu",)))
    c.append(ct_case("s1", X, W, {"strides": [1, 1]}, bias=False))
    c.append(ct_case("s2_pads1", X, W, {"strides": [2, 2], "pads": [1, 1, 1, 1]}))
    c.append(ct_case("s3x2", X, W, {"strides": [3, 2]}))
    c.append(ct_case("k4s2p1", X, [16, 8, 4, 4], {"strides": [2, 2], "pads": [1, 1, 1, 1]}, post=("relu",)))
    # pads
    c.append(ct_case("pads_asym", X, W, {"strides": [2, 2], "pads": [0, 1, 2, 0]}))
    c.append(ct_case("pads_big", X, [16, 8, 5, 5], {"strides": [1, 1], "pads": [3, 2, 1, 4]}))
    # output_padding (the end pad goes negative: down to 1 - stride)
    c.append(ct_case("outpad1", X, W, {"strides": [2, 2], "output_padding": [1, 1]}))
    c.append(ct_case("outpad_pads", X, W, {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 0]}))
    c.append(ct_case("outpad2_s3", X, W, {"strides": [3, 3], "output_padding": [2, 1]}, post=("relu",)))
    # output_shape
    c.append(ct_case("outshape_bigger", X, W, {"strides": [2, 2], "output_shape": [26, 22]}))
    # (explicit pads with output_shape: onnxruntime derives the begin pads from output_shape as the ONNX
    # spec says, kiln takes the explicit ones as the ONNX reference does; these pads are the same in both)
    c.append(ct_case("outshape_smaller", X, W, {"strides": [2, 2], "pads": [1, 1, 0, 0], "output_shape": [24, 20]}))
    c.append(ct_case("outshape_pads", X, W, {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_shape": [23, 20]}))
    c.append(ct_case("outshape_same_upper", X, W, {"strides": [2, 2], "auto_pad": "SAME_UPPER",
                                                    "output_shape": [24, 20]}))
    # auto_pad
    c.append(ct_case("same_upper", X, W, {"strides": [2, 2], "auto_pad": "SAME_UPPER"}))
    c.append(ct_case("same_lower", X, W, {"strides": [2, 2], "auto_pad": "SAME_LOWER"}))
    c.append(ct_case("same_upper_k4s3", X, [16, 8, 4, 4], {"strides": [3, 3], "auto_pad": "SAME_UPPER"}))
    c.append(ct_case("same_lower_k2s1", X, [16, 8, 2, 2], {"strides": [1, 1], "auto_pad": "SAME_LOWER"}))
    c.append(ct_case("valid", X, W, {"strides": [2, 2], "auto_pad": "VALID"}))
    # groups, depthwise
    c.append(ct_case("group2", X, [16, 4, 3, 3], {"strides": [2, 2], "group": 2, "pads": [1, 1, 1, 1]}))
    c.append(ct_case("group4_outpad", X, [16, 2, 3, 3], {"strides": [2, 2], "group": 4, "output_padding": [1, 1]},
                     post=("relu",)))
    c.append(ct_case("depthwise", X, [16, 1, 4, 4], {"strides": [2, 2], "group": 16, "pads": [1, 1, 1, 1]}))
    # dilations
    c.append(ct_case("dil2", X, W, {"strides": [1, 1], "dilations": [2, 2], "pads": [2, 2, 2, 2]}))
    c.append(ct_case("dil2_s2_outpad", X, W, {"strides": [2, 2], "dilations": [2, 1], "output_padding": [1, 1]}))
    # 1-D and 3-D
    c.append(ct_case("conv1d", [1, 16, 30], [16, 8, 3], {"strides": [2], "pads": [1, 0]}, post=("relu",)))
    c.append(ct_case("conv3d", [1, 8, 4, 6, 5], [8, 8, 2, 3, 3], {"strides": [2, 2, 1], "pads": [0, 1, 1, 0, 1, 1]}))
    # fused chains
    c.append(ct_case("fused_clip", X, W, {"strides": [2, 2]}, post=("clip",)))
    c.append(ct_case("fused_sigmoid", X, W, {"strides": [2, 2]}, post=("sigmoid",)))
    c.append(ct_case("fused_leaky", X, W, {"strides": [2, 2]}, bias=False, post=("leaky",)))
    c.append(ct_case("fused_residual_relu", X, W, {"strides": [2, 2], "pads": [1, 1, 1, 1]}, post=("add", "relu")))
    c.append(ct_case("fused_relu_residual", X, W, {"strides": [2, 2]}, bias=False, post=("relu", "add")))
    c.append(ct_case("bn_relu", [1, 32, 20, 20], [32, 16, 2, 2], {"strides": [2, 2]}, bias=False, post=("bn", "relu")))
    # between convolutions: activations in the session's layout on both sides
    c.append(ct_case("between_convs", [1, 16, 20, 20], [16, 16, 2, 2], {"strides": [2, 2]}, post=("bn", "relu"),
                     before=16, after=16))
    c[-1].max_act_reorders = 2  # the input into the first conv, the last conv's output
    c.append(ct_case("between_convs_residual", [1, 16, 10, 10], [16, 16, 3, 3],
                     {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, post=("add", "relu"),
                     before=32, after=8))
    c[-1].max_act_reorders = 3  # and the residual, a graph input
    c.append(ct_case("between_convs_odd_ch", [1, 12, 10, 10], [12, 6, 2, 2], {"strides": [2, 2]}, post=("relu",),
                     before=12, after=8))
    # what oneDNN cannot express: the runtime kernel, with a remark saying why
    c.append(ct_case("outshape_far_past", X, W, {"strides": [2, 2], "output_shape": [28, 24]},
                     want="runtime kernel", remark=r"past the last window"))
    c.append(ct_case("outshape_same_negative_pad", X, W, {"strides": [2, 2], "auto_pad": "SAME_UPPER",
                                                           "output_shape": [27, 23]},
                     want="runtime kernel", remark=r"before the first window"))
    return c


def conv_case(name, x_shape, w_shape, attrs=None, bias=True, post=(), chain=False):
    """One Conv (+ bias, post chain); with chain, a second one of the same
    kernel reads it, so that the first one's output is in the session's
    blocked layout (where im2col may run it)."""
    r = rng_for(name)
    inputs = [("x", r.uniform(-1, 1, x_shape).astype(np.float32))]
    consts = [("w", r.uniform(-0.1, 0.1, w_shape).astype(np.float32))]
    ins = ["x", "w"]
    nodes = []
    if chain:  # a 1x1 conv before it: its src in the blocked layout too
        consts.append(("w0", r.uniform(-0.3, 0.3, [x_shape[1], x_shape[1], 1, 1]).astype(np.float32)))
        nodes.append(helper.make_node("Conv", ["x", "w0"], ["c0"], name="thin_prev"))
        ins[0] = "c0"
    if bias:
        consts.append(("b", r.uniform(-0.5, 0.5, [w_shape[0]]).astype(np.float32)))
        ins.append("b")
    nodes.append(helper.make_node("Conv", ins, ["c"], name="thin", **(attrs or {})))
    cur = "c"
    for i, p in enumerate(post):
        o = f"p{i}"
        if p == "relu":
            nodes.append(helper.make_node("Relu", [cur], [o], name=f"relu{i}"))
        elif p == "add":
            inputs.append(("res", None))
            nodes.append(helper.make_node("Add", [cur, "res"], [o], name=f"add{i}"))
        cur = o
    if chain:
        consts.append(("w2", r.uniform(-0.1, 0.1, [w_shape[0], w_shape[0] // (attrs or {}).get("group", 1)] +
                                       list(w_shape[2:])).astype(np.float32)))
        nodes.append(helper.make_node("Conv", [cur, "w2"], ["c2"], name="thin_next", **(attrs or {})))
        cur = "c2"
    nodes.append(helper.make_node("Identity", [cur], ["y"], name="out"))
    c = Case(name, inputs, consts, nodes, ["y"], ops=("Conv",))
    c.chain = chain
    pads = (attrs or {}).get("pads", [0, 0, 0, 0])
    unit = [x_shape[2 + d] == 1 and w_shape[2 + d] == 1 and pads[d] == 0 and pads[2 + d] == 0 for d in (0, 1)]
    c.thin = any(unit)
    c.thin_w = unit[1]  # width 1: auto must not leave it to oneDNN's 2-D kernel
    return c


def thin_cases():
    c = []
    # the model's shape: 5x1 over width-1 images, 256 channels
    c.append(conv_case("k5x1_w1", [1, 256, 64, 1], [256, 256, 5, 1], {"pads": [2, 0, 2, 0]}))
    c.append(conv_case("k1x5_h1", [1, 256, 1, 64], [256, 256, 1, 5], {"pads": [0, 2, 0, 2]}, post=("relu",)))
    c.append(conv_case("k3x1_w1_small", [1, 64, 40, 1], [128, 64, 3, 1], {"pads": [1, 0, 1, 0]}, post=("relu",)))
    c.append(conv_case("k5x1_w1_nopad", [2, 32, 50, 1], [48, 32, 5, 1]))
    c.append(conv_case("k3x1_w1_s2", [1, 64, 41, 1], [64, 64, 3, 1], {"strides": [2, 1], "pads": [1, 0, 1, 0]}))
    c.append(conv_case("k3x1_w1_dil2", [1, 32, 40, 1], [32, 32, 3, 1], {"dilations": [2, 1], "pads": [2, 0, 2, 0]}))
    c.append(conv_case("k3x1_w1_group2", [1, 64, 40, 1], [64, 32, 3, 1], {"group": 2, "pads": [1, 0, 1, 0]}))
    c.append(conv_case("k5x1_w1_residual", [1, 128, 32, 1], [128, 128, 5, 1], {"pads": [2, 0, 2, 0]},
                       post=("add", "relu")))
    c.append(conv_case("k1x3_h1_odd", [1, 20, 1, 37], [24, 20, 1, 3], {"pads": [0, 1, 0, 1]}))
    # between two thin convs: blocked activations (im2col's and the 1-D form's)
    c.append(conv_case("k5x1_w1_chain", [1, 64, 48, 1], [64, 64, 5, 1], {"pads": [2, 0, 2, 0]}, post=("relu",),
                       chain=True))
    c.append(conv_case("k5x1_w1_chain_tall", [1, 32, 600, 1], [32, 32, 5, 1], {"pads": [2, 0, 2, 0]}, chain=True))
    c.append(conv_case("k1x3_h1_chain", [1, 32, 1, 40], [32, 32, 1, 3], {"pads": [0, 1, 0, 1]}, chain=True))
    # k x 1 on a wider image: thin kernel, not a thin image
    c.append(conv_case("k5x1_w8", [1, 64, 32, 8], [64, 64, 5, 1], {"pads": [2, 0, 2, 0]}))
    return c


def onnx_type(a):
    return {np.dtype(np.float32): TensorProto.FLOAT}[a.dtype]


def ort_run(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def write_case(case, d):
    """The model and its inputs under d; a residual input gets the shape of
    the value it is added to (found by a first onnxruntime run)."""
    def model(inputs):
        g = helper.make_graph(case.nodes, case.name,
                              [helper.make_tensor_value_info(n, onnx_type(a), list(a.shape)) for n, a in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in case.outputs],
                              [numpy_helper.from_array(a, n) for n, a in case.consts])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    path = os.path.join(d, "model.onnx")
    inputs = list(case.inputs)
    if any(a is None for _, a in inputs):
        # the residual's shape: the pre-residual value as an output of a probe model
        add = next(n for n in case.nodes if n.op_type == "Add")
        probe = onnx.helper.make_graph(case.nodes[:case.nodes.index(add)], "probe",
                                       [helper.make_tensor_value_info(n, onnx_type(a), list(a.shape))
                                        for n, a in inputs if a is not None],
                                       [helper.make_tensor_value_info(add.input[0], TensorProto.FLOAT, None)],
                                       [numpy_helper.from_array(a, n) for n, a in case.consts])
        onnx.save(helper.make_model(probe, opset_imports=[helper.make_opsetid("", 17)]), path)
        shape = ort_run(path, {n: a for n, a in inputs if a is not None})[0].shape
        r = rng_for(case.name + "res")
        inputs = [(n, r.uniform(-1, 1, shape).astype(np.float32) if a is None else a) for n, a in inputs]
    m = model(inputs)
    onnx.save(m, path)
    args = []
    for n, a in inputs:
        f = os.path.join(d, f"input_{n}.npy")
        np.save(f, a)
        args += ["--input", f"{n}={f}"]
    if case.want != "oneDNN":
        # output_shape cases where onnxruntime places the output its own way
        # (1.18) or refuses it (1.32): the check compares with kiln's evaluator
        return path, args, None
    expected = ort_run(path, dict(inputs))
    return path, args, dict(zip(case.outputs, expected))


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    return p.returncode, p.stdout + p.stderr


def compare(name, got, want):
    if got.shape != want.shape:
        return f"output '{name}': shape {got.shape}, onnxruntime {want.shape}"
    err = np.abs(got.astype(np.float64) - want)
    bad = err > TOL + TOL * np.abs(want)
    if bad.any():
        i = np.unravel_index(np.argmax(err), err.shape)
        return (f"output '{name}': {int(bad.sum())} of {bad.size} elements differ by more than {TOL} "
                f"(worst at {i}: {got[i]} vs onnxruntime {want[i]})")
    return None


def kernels(kiln, so, args, env):
    """step name -> kernel, from `kiln profile --json`."""
    rc, out = run([kiln, "profile", so, *args, "--no-peak", "--runs", "1", "--warmup", "0", "--json"], env)
    if rc != 0:
        return None, out
    js = json.loads(out[out.index("{"):])
    return {s["name"]: s["kernel"] for s in js["steps"]}, out


def check_compiled(kiln, case, d, path, args, expected, env, tag):
    so = os.path.join(d, "case.so")
    got_dir = os.path.join(d, "got_" + tag)
    rc, out = run([kiln, "run", so, *args, "--output-dir", got_dir], env)
    if rc != 0:
        return f"[{tag}] kiln run exited {rc}:\n{out}"
    for name, want in expected.items():
        err = compare(name, np.load(os.path.join(got_dir, name + ".npy")), want)
        if err:
            return f"[{tag}] {err}"
    return None


def check(kiln, out_dir, case, algos):
    d = os.path.join(out_dir, case.name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path, args, expected = write_case(case, d)
    rc, rep = run([kiln, "compile", path, "-o", os.path.join(d, "case.so"), "--report"])
    if rc != 0:
        return f"kiln compile exited {rc}:\n{rep}"
    ops = "|".join(case.ops + tuple("Fused" + o for o in case.ops))
    rows = [ln for ln in rep.splitlines() if re.match(r"^\S+\s+(" + ops + r")\s{2,}", ln)]
    if not rows:
        return f"the report has no {'/'.join(case.ops)} node:\n{rep}"
    heads = [r for r in rows if r.split()[0] in ("deconv", "thin")]
    for ln in heads:
        label = re.split(r"\s{2,}", ln.strip(), maxsplit=2)[-1]
        ok = label in COMPILED if case.want == "oneDNN" else label == case.want
        if not ok:
            return f"{ln.split()[0]} took '{label}', expected {case.want}:\n{rep}"
    if case.fused:
        # bias, BatchNorm, activations and residual all inside the one deconvolution step
        left = [ln.split()[1] for ln in rep.splitlines()
                if re.match(r"^\S+\s+(Relu|Clip|Sigmoid|LeakyRelu|Add|BatchNormalization)\s{2,}", ln)]
        if left or not any(ln.split()[1] == "FusedConvTranspose" for ln in heads):
            return f"the chain was not fused into one FusedConvTranspose (left: {left}):\n{rep}"
    if case.remark and not re.search(case.remark, rep):
        return f"the report has no remark matching /{case.remark}/:\n{rep}"
    if case.want != "oneDNN":
        # the fallbacks are output_shape cases where onnxruntime 1.18 places the output its own way
        # (docs/testing.md, known divergences): the runtime kernel must agree with kiln's evaluator
        ref_dir = os.path.join(d, "ref")
        rc, out = run([kiln, "run", path, "--reference", *args, "--output-dir", ref_dir])
        if rc != 0:
            return f"kiln run --reference exited {rc}:\n{out}"
        expected = {n: np.load(os.path.join(ref_dir, n + ".npy")).astype(np.float64) for n in case.outputs}
    if case.max_act_reorders is not None:
        # between convolutions the deconvolution reads and writes the session's layout: the only
        # activation reorders are at the graph's edges (oneDNN's verbose log of one run)
        env = dict(os.environ, ONEDNN_VERBOSE="1")
        rc, out = run([kiln, "run", os.path.join(d, "case.so"), *args, "--output-dir", os.path.join(d, "verbose")], env)
        acts = [ln for ln in out.splitlines() if ln.startswith("onednn_verbose,exec,cpu,reorder") and
                re.search(r",1x\d+x\d+x\d+,", ln)]
        if rc != 0 or len(acts) > case.max_act_reorders:
            return (f"{len(acts)} activation reorders, at most {case.max_act_reorders} expected (the graph's edges):\n" +
                    "\n".join(acts))
    notes, ran = [], {}
    for algo in algos:
        env = algo_env(algo)
        err = check_compiled(kiln, case, d, path, args, expected, env, algo)
        if err:
            return err
        if case.want != "oneDNN":
            continue
        ks, out = kernels(kiln, os.path.join(d, "case.so"), args, env)
        if ks is None:
            return f"[{algo}] kiln profile failed:\n{out}"
        head = heads[0].split()[0]
        k = ks.get(head)
        if k is None:
            return f"[{algo}] kiln profile has no step '{head}': {ks}"
        if k.startswith("ref") or " ref" in k:
            return f"[{algo}] '{head}' ran oneDNN's reference kernel ({k})"
        if algo == "thin" and k.startswith("1-D") != case.thin:
            return f"[{algo}] '{head}' ran {k}: {'not ' if case.thin else ''}the 1-D form forced"
        if algo == "auto" and case.thin_w and not k.startswith(("1-D", "im2col")):
            return f"[{algo}] '{head}' over a width-1 image ran {k}: oneDNN's 2-D kernel, one output per block"
        if algo == "im2col@avx2" and case.chain and not k.startswith("im2col"):
            return f"[{algo}] '{head}' between blocked activations ran {k}, not im2col"
        if algo == "direct" and k.startswith(("1-D", "im2col", "winograd", "kiln")):
            return f"[{algo}] '{head}' ran {k}, not oneDNN's direct convolution"
        ran[algo] = k
        notes.append(f"{algo}={k}")
    # im2col forced without the AVX2 cap: im2col where the session's layout is blocked, else (NHWC:
    # the row declines) the kernel direct forces
    k = ran.get("im2col")
    if case.chain and k is not None and "direct" in ran and not k.startswith("im2col") and k != ran["direct"]:
        return f"[im2col] '{heads[0].split()[0]}' ran {k}: neither im2col nor direct's {ran['direct']}"
    return "ok " + ", ".join(notes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("out_dir")
    ap.add_argument("group", choices=["deconv", "thin", "all"])
    ap.add_argument("--case", action="append", default=[])
    a = ap.parse_args()
    todo = []
    if a.group in ("deconv", "all"):
        todo += [(c, ["auto"]) for c in deconv_cases()]
    if a.group in ("thin", "all"):
        todo += [(c, ALGOS) for c in thin_cases()]
    if a.case:
        todo = [t for t in todo if t[0].name in a.case]
        if not todo:
            sys.exit(f"no case named {a.case}")
    os.makedirs(a.out_dir, exist_ok=True)
    failed = 0
    for case, algos in todo:
        try:
            res = check(a.kiln, a.out_dir, case, algos)
        except Exception as e:  # a generator or onnxruntime problem is a failure too
            res = f"{type(e).__name__}: {e}"
        ok = res.startswith("ok")
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {case.name}: {res if not ok else res[3:]}", flush=True)
    print(f"{len(todo) - failed} of {len(todo)} cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
