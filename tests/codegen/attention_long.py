#!/usr/bin/env python3
"""Long sequences through the fused attention: memory and answers.

  attention_long.py KILN

One encoder layer (hidden 64, 4 heads, the attention written as exporters
write it: MatMul(q, k^T) * scale + mask, Softmax, MatMul(., v), with the head
split and merge) over a dynamic sequence:
  - compiled with --max seq=2048 and seq=4096 at -O3: the report shows one
    Attention node, and the arena at 4096 is at most 2.2x the arena at 2048
    (no S x S buffer: linear growth);
  - the same at -O1 (no recognition, scores in memory) grows about 4x, which
    shows that the first check can fail;
  - the -O3 artifact at seq 3000 (a partial key block, a padding mask)
    matches onnxruntime within 1e-4 (relative to the output's largest
    magnitude).
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HID, HEADS = 64, 4
D = HID // HEADS


def build(path):
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, name, **attrs):
        nodes.append(helper.make_node(op, ins, [name], name=name, **attrs))
        return name

    def proj(x, name, n_out=HID):
        w = const(name + ".w", (rng.standard_normal((HID, n_out)) * 0.1).astype(np.float32))
        return node("Add", [node("MatMul", [x, w], name + ".mm"),
                            const(name + ".b", (rng.standard_normal(n_out) * 0.1).astype(np.float32))], name)

    split = const("split", np.array([0, -1, HEADS, D], np.int64))
    merge = const("merge", np.array([0, -1, HID], np.int64))

    def heads(t, perm, name):
        return node("Transpose", [node("Reshape", [t, split], name + ".r")], name, perm=perm)

    q = heads(proj("x", "q"), [0, 2, 1, 3], "qh")
    k = heads(proj("x", "k"), [0, 2, 3, 1], "kh")
    v = heads(proj("x", "v"), [0, 2, 1, 3], "vh")
    m = node("Unsqueeze", [node("Mul", [node("Sub", [const("one", np.float32(1)), "mask"], "inv"),
                                        const("neg", np.float32(-10000))], "madd"),
                           const("ax12", np.array([1, 2], np.int64))], "m4")
    s = node("Add", [node("Mul", [node("MatMul", [q, k], "qk"), const("scale", np.float32(1 / np.sqrt(D)))],
                          "scaled"), m], "scores")
    p = node("Softmax", [s], "probs", axis=-1)
    ctx = node("Reshape", [node("Transpose", [node("MatMul", [p, v], "pv")], "ctx.t", perm=[0, 2, 1, 3]), merge],
               "ctx")
    gamma, beta = const("ln.g", np.ones(HID, np.float32)), const("ln.b", np.zeros(HID, np.float32))
    h = node("LayerNormalization", [node("Add", [proj(ctx, "o"), "x"], "res1"), gamma, beta], "ln1", axis=-1)
    w1 = const("ffn1.w", (rng.standard_normal((HID, 128)) * 0.1).astype(np.float32))
    w2 = const("ffn2.w", (rng.standard_normal((128, HID)) * 0.1).astype(np.float32))
    f = node("Relu", [node("MatMul", [h, w1], "ffn1")], "act")
    node("LayerNormalization", [node("Add", [node("MatMul", [f, w2], "ffn2"), h], "res2"), gamma, beta], "y",
         axis=-1)
    g = helper.make_graph(nodes, "layer",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", HID]),
                           helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", HID])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def compile_arena(kiln, model, art, seq, opt):
    p = subprocess.run([kiln, "compile", model, "-o", art, "--max", f"seq={seq}", "--report", opt],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: kiln compile {opt} --max seq={seq}: {p.stderr.strip()}")
    m = re.search(r"arena (\d+) bytes", p.stdout)
    if not m:
        sys.exit("FAIL: no arena figure in the report:\n" + p.stdout)
    n_attn = sum(1 for ln in p.stdout.splitlines() if ln.split()[1:2] == ["Attention"])
    return int(m.group(1)), n_attn


def main():
    kiln = sys.argv[1]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "layer.onnx")
        build(model)
        arenas = {}
        for opt in ("-O3", "-O1"):
            for seq in (2048, 4096):
                arenas[opt, seq], n_attn = compile_arena(kiln, model, os.path.join(tmp, f"l{opt}{seq}.so"), seq, opt)
                want = 1 if opt == "-O3" else 0
                if n_attn != want:
                    print(f"FAIL: {opt} seq {seq}: {n_attn} Attention nodes in the report, expected {want}")
                    failed += 1
            ratio = arenas[opt, 4096] / arenas[opt, 2048]
            print(f"{opt}: arena {arenas[opt, 2048]} bytes at seq 2048, {arenas[opt, 4096]} at 4096: {ratio:.2f}x")
            if opt == "-O3" and ratio > 2.2:
                print("FAIL: the fused attention's arena grows faster than 2.2x from seq 2048 to 4096")
                failed += 1
            if opt == "-O1" and ratio < 3.0:
                print("FAIL: unfused, the S x S scores should make the arena grow about 4x: the check above "
                      "would not notice a regression")
                failed += 1
        # answers at a long sequence: a partial key block and padding
        import onnxruntime as ort
        n = 3000
        rng = np.random.default_rng(1)
        x = rng.standard_normal((1, n, HID)).astype(np.float32)
        mask = np.ones((1, n), np.float32)
        mask[0, n - 700:] = 0
        np.save(os.path.join(tmp, "x.npy"), x)
        np.save(os.path.join(tmp, "mask.npy"), mask)
        out = os.path.join(tmp, "out")
        r = subprocess.run([kiln, "run", os.path.join(tmp, "l-O34096.so"), "--input", f"x={tmp}/x.npy", "--input",
                            f"mask={tmp}/mask.npy", "--output-dir", out], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("FAIL: kiln run at seq 3000: " + r.stderr.strip())
        got = np.load(os.path.join(out, "y.npy"))
        want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x, "mask": mask})[0]
        err = float(np.abs(got - want).max() / np.abs(want).max())
        print(f"seq {n}: max |kiln - onnxruntime| / max |onnxruntime| = {err:.2e}")
        if not err <= 1e-4:
            print("FAIL: seq 3000 differs from onnxruntime")
            failed += 1
    print("FAILED" if failed else "ok")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
