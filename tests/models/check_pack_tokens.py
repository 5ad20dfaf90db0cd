#!/usr/bin/env python3
"""kiln compile --pack-tokens on a BERT-style encoder with a padding mask.

  check_pack_tokens.py KILN OUT_DIR

Generates bert-tiny (gen_models.py: the BERT-base graph with 2 layers,
hidden 64, 4 heads, seq 32) at batch 4 and compiles it with --pack-tokens
and without. Checks that:
  - --report shows both attention blocks packed (PackedAttention, no
    Attention left, PackRows before the layers, UnpackRows after);
  - for several masks (the generated right padding, holes anywhere with one
    sequence all padding, no padding, all padding) the packed artifact's
    output equals onnxruntime's within 1e-4 at every real token and is 0 at
    every padded one, and the unpacked artifact and the packed one on kiln's
    own matmul kernel (KILN_CONV_ALGO=pointwise, which computes only the
    run's rows on AVX-512 CPUs) agree with it at real tokens;
  - at batch 8 (256 tokens at most: 128-row blocks, the last told the rows
    left) the same, for right padding, holes and no padding;
  - with --precision mixed the packed attention runs in bf16 (cosine >=
    0.999 at the real tokens; on a CPU without AVX512-BF16, only the report);
  - tests/dyn's encoder with a dynamic sequence (--max seq=64) packs too
    and matches onnxruntime at the real tokens of lengths 5, 17 and 32;
  - malformed kiln::PackRows/UnpackRows/PackedAttention nodes written into a
    model by hand are refused (kiln run, kiln compile or the artifact's
    run) with a message naming the node;
  - a mask whose padding value is too small to remove the keys exactly
    (-100 instead of -10000) is refused with a message naming the node.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, SEQ = 4, 32


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    return r.returncode, r.stdout + r.stderr


def masks(rng):
    right = np.load(os.path.join(MODEL_DIR, "input_attention_mask.npy"))
    holes = (rng.random((BATCH, SEQ)) < 0.6).astype(np.int64)
    holes[2] = 0
    return {"right padding": right, "holes, one sequence all padding": holes,
            "no padding": np.ones((BATCH, SEQ), np.int64), "all padding": np.zeros((BATCH, SEQ), np.int64)}


APP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <kiln/kiln.h>
#include "bt.h"

static void *load(const char *path, size_t n)
{
    void *p = malloc(n);
    FILE *f = fopen(path, "rb");
    if (!p || !f || fread(p, 1, n, f) != n) exit(3);
    fclose(f);
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 5) return 2;
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    if (bt_open(argv[1], &art) || kn_session_create(art, &s)) {
        fprintf(stderr, "app: %s\n", kn_last_error());
        return 1;
    }
    size_t tok = (size_t)BATCH * SEQ;
    int64_t *ids = load(argv[2], tok * 8), *mask = load(argv[3], tok * 8);
    float *y = calloc(tok * HIDDEN, sizeof(float));
    if (bt_run(s, ids, mask, y)) {
        fprintf(stderr, "app: %s\n", kn_last_error());
        return 1;
    }
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(y, sizeof(float), tok * HIDDEN, f) != tok * HIDDEN) return 4;
    fclose(f);
    free(ids), free(mask), free(y);
    kn_session_free(s);
    kn_artifact_close(art);
    return 0;
}
"""


def check_app(a, model):
    """Builds APP against the header of a --pack-tokens artifact and runs it
    on the model's inputs: the output must be kiln run's, bit for bit."""
    d = os.path.join(a.out_dir, "app")
    os.makedirs(d, exist_ok=True)
    art, hdr = os.path.join(d, "bt.so"), os.path.join(d, "bt.h")
    rc, out = run([a.kiln, "compile", model, "-o", art, "--pack-tokens", "--name", "bt", "--emit-header", hdr])
    if rc:
        sys.exit("FAIL: kiln compile --emit-header: " + out)
    text = open(hdr).read()
    ins = ["--input", "input_ids=" + os.path.join(MODEL_DIR, "input_input_ids.npy"),
           "--input", "attention_mask=" + os.path.join(MODEL_DIR, "input_attention_mask.npy")]
    rc, out = run([a.kiln, "run", art, "--output-dir", os.path.join(d, "ref")] + ins)
    if rc:
        sys.exit("FAIL: kiln run (app's artifact): " + out)
    want = np.load(os.path.join(d, "ref", "last_hidden_state.npy"))
    rt_lib = os.path.abspath(a.rt_lib)
    src = os.path.join(d, "app.c")
    with open(src, "w") as f:
        f.write(APP)
    san = ["-fsanitize=address,undefined"] if a.sanitize.upper() in ("ON", "1", "TRUE") else []
    exe = os.path.join(d, "app")
    c = subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", *san, "-DBATCH=%d" % BATCH, "-DSEQ=%d" % SEQ,
                        "-DHIDDEN=%d" % want.shape[-1], "-I", a.rt_include, "-I", d, src, "-o", exe, rt_lib, "-lm",
                        "-Wl,-rpath," + os.path.dirname(rt_lib)], capture_output=True, text=True)
    if c.returncode:
        print("FAIL: building the app against the header: " + c.stderr.strip()[-600:])
        return False
    ids = os.path.join(d, "ids.bin")
    mask = os.path.join(d, "mask.bin")
    np.load(os.path.join(MODEL_DIR, "input_input_ids.npy")).astype(np.int64).tofile(ids)
    np.load(os.path.join(MODEL_DIR, "input_attention_mask.npy")).astype(np.int64).tofile(mask)
    y = os.path.join(d, "y.bin")
    rc, out = run([exe, art, ids, mask, y])
    got = np.fromfile(y, np.float32).reshape(want.shape) if rc == 0 else None
    ok = (rc == 0 and "packed tokens: up to" in text and "int64_t dim_" not in text and
          float(np.abs(got - want).max()) == 0.0)
    print("%s an app built against the header runs bt_run(s, ids, mask, y): %s" %
          ("ok:  " if ok else "FAIL:", "the same output as kiln run" if ok else out.strip()[-300:]))
    return ok


def check_hostile(a):
    """kiln-domain packing nodes written into a model by hand, malformed:
    kiln run and kiln compile (or the artifact's run) refuse each one with
    a message naming the node, never a signal."""
    from onnx import helper, TensorProto
    d = os.path.join(a.out_dir, "hostile")
    os.makedirs(d, exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    m = helper.make_tensor_value_info("m", TensorProto.INT64, [2, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = {"PackRows": helper.make_node("PackRows", ["x", "m"], ["y"], domain="kiln"),
             "UnpackRows": helper.make_node("UnpackRows", ["x", "m"], ["y"], domain="kiln"),
             "PackedAttention": helper.make_node("PackedAttention", ["x", "x", "x", "m"], ["y"], domain="kiln",
                                                 q_num_heads=3, kv_num_heads=2)}
    np.save(os.path.join(d, "x.npy"), np.ones((2, 3, 4), np.float32))
    np.save(os.path.join(d, "m.npy"), np.ones((2, 5), np.int64))
    ins = ["--input", "x=" + os.path.join(d, "x.npy"), "--input", "m=" + os.path.join(d, "m.npy")]
    ok = True
    for op, node in nodes.items():
        path = os.path.join(d, op + ".onnx")
        g = helper.make_graph([node], "g", [x, m], [y])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("kiln", 1)]),
                  path)
        art = os.path.join(d, op + ".so")
        steps = [[a.kiln, "run", path] + ins, [a.kiln, "compile", path, "-o", art]]
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
            msg = (r.stdout + r.stderr).strip()
            if cmd[1] == "compile" and r.returncode == 0:  # compiled: its run must refuse
                r = subprocess.run([a.kiln, "run", art] + ins, capture_output=True, text=True)
                msg = (r.stdout + r.stderr).strip()
            good = r.returncode == 1 and "'%s_0'" % op in msg
            ok &= good
            if not good:
                print("FAIL: kiln %s of a malformed %s: status %d: %s" % (cmd[1], op, r.returncode, msg[-300:]))
    print("%s malformed PackRows, UnpackRows and PackedAttention nodes are refused, naming the node"
          % ("ok:  " if ok else "FAIL:"))
    return ok


def reference_session(model):
    """onnxruntime on the graph as written (no fusions that reorder math)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def check_big_batch(a):
    """bert-tiny at batch 8 (256 tokens at most: products over the packed
    rows run in 128-row blocks, the last one told the rows left) against
    onnxruntime at the real tokens, on oneDNN and on kiln's matmul."""
    d = os.path.join(a.out_dir, "batch8")
    rc, out = run([sys.executable, os.path.join(HERE, "gen_models.py"), "--model", "bert-tiny", d, "--batch", "8"])
    if rc:
        sys.exit("FAIL: gen_models.py --batch 8: " + out)
    model, art = os.path.join(d, "model.onnx"), os.path.join(d, "packed.so")
    rc, out = run([a.kiln, "compile", model, "-o", art, "--pack-tokens"])
    if rc:
        sys.exit("FAIL: kiln compile --pack-tokens (batch 8): " + out)
    sess = reference_session(model)
    ids = np.load(os.path.join(d, "input_input_ids.npy"))
    holes = (np.random.default_rng(8).random(ids.shape) < 0.6).astype(np.int64)
    ok = True
    for name, mask in (("right padding", np.load(os.path.join(d, "input_attention_mask.npy"))),
                       ("holes", holes), ("no padding", np.ones(ids.shape, np.int64))):
        np.save(os.path.join(d, "ids.npy"), ids)
        np.save(os.path.join(d, "mask.npy"), mask)
        ref = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        real = mask.astype(bool)
        for env in ({}, {"KILN_CONV_ALGO": "pointwise"}):
            rc, out = run([a.kiln, "run", art, "--input", "input_ids=" + os.path.join(d, "ids.npy"),
                           "--input", "attention_mask=" + os.path.join(d, "mask.npy"),
                           "--output-dir", os.path.join(d, "out")], env)
            if rc:
                sys.exit("FAIL: kiln run (batch 8, %s): %s" % (name, out))
            got = np.load(os.path.join(d, "out", "last_hidden_state.npy"))
            err = float(np.abs(got - ref)[real].max())
            pad = float(np.abs(got[~real]).max()) if (~real).any() else 0.0
            good = err <= 1e-4 and pad == 0.0
            ok &= good
            print("%s batch 8, %-13s %3d real tokens%s: max error %.2e, padding max |y| %g"
                  % ("ok:  " if good else "FAIL:", name, int(real.sum()), ", kiln's matmul" if env else "", err, pad))
    return ok


def main():
    global MODEL_DIR
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("out_dir")
    ap.add_argument("--rt-include", help="runtime/include, to build an app against the generated header")
    ap.add_argument("--rt-lib", help="libkiln_rt.so, for that app")
    ap.add_argument("--sanitize", default="OFF")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    MODEL_DIR = os.path.join(a.out_dir, "model")
    rc, out = run([sys.executable, os.path.join(HERE, "gen_models.py"), "--model", "bert-tiny", MODEL_DIR,
                   "--batch", str(BATCH)])
    if rc:
        sys.exit("FAIL: gen_models.py: " + out)
    model = os.path.join(MODEL_DIR, "model.onnx")
    packed, plain = os.path.join(a.out_dir, "packed.so"), os.path.join(a.out_dir, "plain.so")
    failed = 0

    rc, report = run([a.kiln, "compile", model, "-o", packed, "--pack-tokens", "--report"])
    if rc:
        sys.exit("FAIL: kiln compile --pack-tokens: " + report)
    ops = [ln.split()[1] for ln in report.splitlines() if len(ln.split()) > 2 and not ln.startswith(" ")]
    want = {"PackedAttention": 2, "Attention": 0, "PackRows": 1, "UnpackRows": 1}
    got = {op: ops.count(op) for op in want}
    ok = got == want and "packed 17 nodes (2 attention blocks)" in report
    print("%s --report: %s" % ("ok:  " if ok else "FAIL:", got))
    failed += not ok
    rc, out = run([a.kiln, "compile", model, "-o", plain])
    if rc:
        sys.exit("FAIL: kiln compile: " + out)

    sess = reference_session(model)
    ids = np.load(os.path.join(MODEL_DIR, "input_input_ids.npy"))
    for name, mask in masks(np.random.default_rng(7)).items():
        ids_path = os.path.join(a.out_dir, "ids.npy")
        mask_path = os.path.join(a.out_dir, "mask.npy")
        np.save(ids_path, ids)
        np.save(mask_path, mask)
        ref = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        outs = {}
        # packed-kiln: kiln's AVX-512 matmul kernel, which computes only the
        # run's packed rows (kn_rt_dnnl_exec_rows); elsewhere it is the same run
        for label, art, env in (("packed", packed, {}), ("packed-kiln", packed, {"KILN_CONV_ALGO": "pointwise"}),
                                ("plain", plain, {})):
            d = os.path.join(a.out_dir, "out_" + label)
            rc, out = run([a.kiln, "run", art, "--input", "input_ids=" + ids_path,
                           "--input", "attention_mask=" + mask_path, "--output-dir", d], env)
            if rc:
                sys.exit("FAIL: kiln run %s (%s): %s" % (label, name, out))
            outs[label] = np.load(os.path.join(d, "last_hidden_state.npy"))
        real = mask.astype(bool)
        err = float(np.abs(outs["packed"] - ref)[real].max()) if real.any() else 0.0
        err_plain = max(float(np.abs(outs[k] - outs["packed"])[real].max()) if real.any() else 0.0
                        for k in ("plain", "packed-kiln"))
        pad = max(float(np.abs(outs[k][~real]).max()) if (~real).any() else 0.0 for k in ("packed", "packed-kiln"))
        ok = err <= 1e-4 and err_plain <= 1e-4 and pad == 0.0
        print("%s %-32s %4d real tokens: max error %.2e (onnxruntime), %.2e (unpacked, kiln's matmul), padding max |y| %g"
              % ("ok:  " if ok else "FAIL:", name, int(real.sum()), err, err_plain, pad))
        failed += not ok

    # an application built against the generated header: its typed entry
    # point takes the inputs only (the packed count is the data's), and its
    # raw-buffer run gives the answer kiln run gave
    if a.rt_include and a.rt_lib:
        failed += not check_app(a, model)

    # with autocast: the packed products and attention in bf16 (the report
    # says so; on a CPU without AVX512-BF16 the artifact refuses to open)
    bf16 = os.path.join(a.out_dir, "packed_bf16.so")
    rc, report = run([a.kiln, "compile", model, "-o", bf16, "--pack-tokens", "--precision", "mixed", "--report"])
    if rc:
        sys.exit("FAIL: kiln compile --pack-tokens --precision mixed: " + report)
    marked = sum(1 for ln in report.splitlines() if "PackedAttention" in ln and ln.rstrip().endswith("bf16"))
    mask = np.load(os.path.join(MODEL_DIR, "input_attention_mask.npy"))
    d = os.path.join(a.out_dir, "out_bf16")
    rc, out = run([a.kiln, "run", bf16, "--input", "input_ids=" + os.path.join(MODEL_DIR, "input_input_ids.npy"),
                   "--input", "attention_mask=" + os.path.join(MODEL_DIR, "input_attention_mask.npy"),
                   "--output-dir", d])
    if rc and "lacks" in out:
        print("ok:   bf16 and packed: %d PackedAttention marked bf16; not run (%s)" % (marked, out.strip()[-120:]))
        failed += marked != 2
    elif rc:
        sys.exit("FAIL: kiln run (bf16): " + out)
    else:
        real = mask.astype(bool)
        got = np.load(os.path.join(d, "last_hidden_state.npy"))
        want = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        x, y = got[real].ravel().astype(np.float64), want[real].ravel().astype(np.float64)
        cos = float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))
        pad = float(np.abs(got[~real]).max())
        # the artifact ran, so the CPU has AVX512-BF16: the packed attention
        # must run the bf16 kernel (kiln profile names it)
        rc, prof = run([a.kiln, "profile", bf16, "--runs", "1", "--json",
                        "--input", "input_ids=" + os.path.join(MODEL_DIR, "input_input_ids.npy"),
                        "--input", "attention_mask=" + os.path.join(MODEL_DIR, "input_attention_mask.npy")])
        kernels = [st.get("kernel") for st in json.loads(prof[prof.index("{"):])["steps"]
                   if st["op"] == "PackedAttention"] if rc == 0 else []
        ok = marked == 2 and cos >= 0.999 and pad == 0.0 and kernels and all("bf16" in (k or "") for k in kernels)
        print("%s bf16 and packed: %d PackedAttention marked bf16 (ran %s), cosine %.6f at the real tokens, "
              "padding max |y| %g" % ("ok:  " if ok else "FAIL:", marked, kernels, cos, pad))
        failed += not ok

    # a dynamic sequence (tests/dyn's encoder, --max seq=64): the packed
    # count follows the run's mask at every length
    dyn_dir = os.path.join(a.out_dir, "dyn")
    rc, out = run([sys.executable, os.path.join(HERE, "..", "dyn", "gen_dyn_models.py"), dyn_dir])
    if rc:
        sys.exit("FAIL: gen_dyn_models.py: " + out)
    enc = os.path.join(dyn_dir, "encoder")
    dyn_art = os.path.join(a.out_dir, "dyn_packed.so")
    rc, out = run([a.kiln, "compile", os.path.join(enc, "model.onnx"), "-o", dyn_art, "--max", "seq=64", "--pack-tokens"])
    if rc:
        sys.exit("FAIL: kiln compile --max seq=64 --pack-tokens: " + out)
    for n in (5, 17, 32):
        ins = {k: os.path.join(enc, "in_%d_%s.npy" % (n, k)) for k in ("input_ids", "attention_mask")}
        d = os.path.join(a.out_dir, "out_dyn_%d" % n)
        rc, out = run([a.kiln, "run", dyn_art, "--output-dir", d] + sum((["--input", "%s=%s" % kv] for kv in ins.items()), []))
        if rc:
            sys.exit("FAIL: kiln run (seq %d): %s" % (n, out))
        got = np.load(os.path.join(d, "last_hidden_state.npy"))
        want = np.load(os.path.join(enc, "out_%d_last_hidden_state.npy" % n))
        real = np.load(ins["attention_mask"]).astype(bool)
        err = float(np.abs(got - want)[real].max())
        pad = float(np.abs(got[~real]).max()) if (~real).any() else 0.0
        ok = got.shape == want.shape and err <= 1e-4 and pad == 0.0
        print("%s dynamic sequence %2d (%2d real tokens): max error %.2e (onnxruntime), padding max |y| %g"
              % ("ok:  " if ok else "FAIL:", n, int(real.sum()), err, pad))
        failed += not ok

    # -100 at padding leaves the padded keys a weight of about exp(-100): not
    # the same attention, so the mask is not a padding mask for the pass.
    m = onnx.load(model)
    weakened = 0
    for n in m.graph.node:
        if n.op_type == "Constant" and n.name == "mask_min":
            t = n.attribute[0].t
            t.CopyFrom(numpy_helper.from_array(np.array(-100.0, np.float32), t.name))
            weakened += 1
    if weakened != 1:
        sys.exit("FAIL: no Constant 'mask_min' in the model to weaken")
    weak = os.path.join(a.out_dir, "weak_mask.onnx")
    onnx.save(m, weak)
    rc, out = run([a.kiln, "compile", weak, "-o", os.path.join(a.out_dir, "weak.so"), "--pack-tokens"])
    ok = rc != 0 and "at most -1e4" in out and "Attention '" in out
    print("%s a -100 padding mask is refused: %s" % ("ok:  " if ok else "FAIL:", out.strip()[-200:]))
    failed += not ok
    failed += not check_big_batch(a)
    failed += not check_hostile(a)
    if failed:
        sys.exit("%d check(s) failed" % failed)
    print("all packed-token checks passed")


if __name__ == "__main__":
    main()
