#!/usr/bin/env python3
"""`kiln compile --max`: compiles the models of gen_dyn_models.py with a
dynamic dim, runs them at several sizes against onnxruntime's outputs, and
asserts the refusals (too large, inconsistent, wrong dtype/rank/fixed dim,
non-affine dims, unbounded dims) by their messages.

Usage: run_dyn_test.py KILN MODELS_DIR RUNTIME_INCLUDE_DIR LIBKILN_RT CASE [SANITIZE]
CASE: convnet | encoder | refusals | header | two_dims | mobilenetv2 | yolo_head | if_fold | conv_residual
(mobilenetv2 reads tests/models' MobileNetV2 from MODELS_DIR/../models)
SANITIZE: ON when libkiln_rt is a sanitizer build (the header case's app
must then be built with the same runtime)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

KILN, MODELS, RT_INCLUDE, RT_LIB, CASE = sys.argv[1:6]
SANITIZE = len(sys.argv) > 6 and sys.argv[6].upper() in ("ON", "1", "TRUE")
failures = []


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def kiln(*args):
    p = subprocess.run([KILN, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def compile_model(model, out, *opts):
    rc, so, se = kiln("compile", model, "-o", out, *opts)
    if rc:
        sys.exit(f"kiln compile {model} {' '.join(opts)} failed:\n{se}")
    return so


def run(art, inputs, out_dir):
    args = ["run", art, "--output-dir", out_dir]
    for name, path in inputs.items():
        args += ["--input", f"{name}={path}"]
    return kiln(*args)


def compare_sizes(tmp, art, model_dir, sizes):
    """Runs art at every size and compares with onnxruntime's outputs."""
    for n in sizes:
        inputs = {f[len(f"in_{n}_"):-4]: os.path.join(model_dir, f)
                  for f in os.listdir(model_dir) if f.startswith(f"in_{n}_")}
        out = os.path.join(tmp, f"out_{n}")
        rc, _, se = run(art, inputs, out)
        check(rc == 0, f"run at {n}: {se.strip()[-300:] if rc else 'ran'}")
        if rc:
            continue
        for f in os.listdir(model_dir):
            if not f.startswith(f"out_{n}_"):
                continue
            want = np.load(os.path.join(model_dir, f))
            got = np.load(os.path.join(out, f[len(f"out_{n}_"):]))
            err = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
            check(got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-4),
                  f"{f}: shape {got.shape} (want {want.shape}), max error {err:.3g}")


def expect_refusal(tmp, art, arrays, text, what):
    paths = {}
    for name, arr in arrays.items():
        paths[name] = os.path.join(tmp, f"bad_{name}.npy")
        np.save(paths[name], arr)
    rc, _, se = run(art, paths, os.path.join(tmp, "bad_out"))
    check(rc != 0 and text in se, f"{what}: refused with '{text}' (got rc {rc}: {se.strip()})")


def report_says(report, node_op, how):
    return any(line.split()[1:2] == [node_op] and line.rstrip().endswith(how) for line in report.splitlines()
               if len(line.split()) > 2)


def case_convnet(tmp):
    d = os.path.join(MODELS, "convnet")
    art = os.path.join(tmp, "convnet.so")
    # -O1 does not fuse: the elementwise ops are nodes of their own, in rows
    report = compile_model(os.path.join(d, "model.onnx"), art, "--max", "batch=8", "--report", "-O1")
    print(report)
    for op, how in [("Conv", "oneDNN, in rows"), ("Relu", "generated, in rows"), ("Add", "generated, in rows"),
                    ("MaxPool", "generated, in rows"), ("Softmax", "generated, in rows"),
                    ("Shape", "runtime kernel")]:
        check(report_says(report, op, how), f"--report: {op} {how}")
    compare_sizes(tmp, art, d, [1, 3, 8])
    # -O3 fuses bias, activations and residuals into the oneDNN primitives, also in rows
    fused = os.path.join(tmp, "convnet_fused.so")
    report = compile_model(os.path.join(d, "model.onnx"), fused, "--max", "batch=8", "--report")
    print(report)
    for op, how in [("FusedConv", "oneDNN, in rows"), ("FusedMatMul", "oneDNN, in rows")]:
        check(report_says(report, op, how), f"--report: {op} {how}")
    compare_sizes(tmp, fused, d, [1, 3, 8])
    # a maximum of 32 adds code for blocks of 16 rows: 20 = one block and 4 single rows
    big = os.path.join(tmp, "convnet32.so")
    compile_model(os.path.join(d, "model.onnx"), big, "--max", "batch=32")
    compare_sizes(tmp, big, d, [1, 20])
    rng = np.random.default_rng(3)
    x = lambda *s: rng.standard_normal(s).astype(np.float32)
    expect_refusal(tmp, art, {"x": x(9, 3, 16, 16), "y": x(9, 10)},
                   "input 'x': dim 0 (batch) is 9, the artifact was compiled for at most 8", "batch 9")
    expect_refusal(tmp, art, {"x": x(0, 3, 16, 16), "y": x(0, 10)},
                   "input 'x': dim 0 (batch) is 0, the artifact was compiled for at least 1", "batch 0")
    expect_refusal(tmp, art, {"x": x(3, 3, 16, 16), "y": x(2, 10)},
                   "input 'y': dim 0 (batch) is 2, but input 'x' gave batch = 3", "inconsistent batch")
    expect_refusal(tmp, art, {"x": x(3, 3, 16, 16).astype(np.float64), "y": x(3, 10)},
                   "input 'x': expected f32[batch<=8,3,16,16], got f64[3,3,16,16]", "wrong dtype")
    expect_refusal(tmp, art, {"x": x(3, 3, 16), "y": x(3, 10)},
                   "input 'x': expected f32[batch<=8,3,16,16], got f32[3,3,16]", "wrong rank")
    expect_refusal(tmp, art, {"x": x(3, 3, 16, 15), "y": x(3, 10)},
                   "input 'x': expected f32[batch<=8,3,16,16], got f32[3,3,16,15]", "wrong fixed dim")


def case_encoder(tmp):
    d = os.path.join(MODELS, "encoder")
    art = os.path.join(tmp, "encoder.so")
    report = compile_model(os.path.join(d, "model.onnx"), art, "--max", "seq=32", "--report")
    print(report)
    # [1, seq, hidden] is in rows of seq; the attention scores [1, heads, seq, seq] are not
    check(report_says(report, "FusedMatMul", "oneDNN, in rows"), "--report: projection MatMul (fused): oneDNN, in rows")
    check(report_says(report, "LayerNormalization", "generated, in rows"), "--report: LayerNormalization in rows")
    # the scores MatMul, Softmax and the MatMul by V are one Attention node
    # (passes/recognize_attention.c), run by the flash kernel at the run's seq
    check(report_says(report, "Attention", "runtime kernel"), "--report: attention fused, its kernel at run time")
    check(not report_says(report, "Softmax", ""), "--report: no Softmax left outside the Attention node")
    compare_sizes(tmp, art, d, [5, 17, 32])
    expect_refusal(tmp, art, {"input_ids": np.ones((1, 33), np.int64), "attention_mask": np.ones((1, 33), np.int64)},
                   "input 'input_ids': dim 1 (seq) is 33, the artifact was compiled for at most 32", "seq 33")


def strided_model(path):
    """A strided conv over a dynamic spatial dim: ceil(h/2) is not affine in h."""
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], strides=[2, 1], name="conv")], "strided",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def case_refusals(tmp):
    model = os.path.join(MODELS, "convnet", "model.onnx")
    art = os.path.join(tmp, "r.so")
    cases = [
        ([], "value 'x' has a dynamic shape [batch,3,16,16]: pin it with --shape batch=N or bound it with "
             "--max batch=N", "unbounded dim"),
        (["--max", "batch=0"], "--max 'batch=0': expected DIM=N with N >= 1", "--max 0"),
        (["--max", "batch=4", "--max", "seq=4"], "--max seq: no input has a symbolic dim of that name", "unknown"),
        (["--max", "batch=4", "--max", "batch=8"], "--max 'batch=8': batch is given twice", "twice"),
    ]
    for opts, text, what in cases:
        rc, _, se = kiln("compile", model, "-o", art, *opts)
        check(rc != 0 and text in se and not os.path.exists(art), f"{what}: '{text}' (got: {se.strip()})")
    strided = os.path.join(tmp, "strided.onnx")
    strided_model(strided)
    rc, _, se = kiln("compile", strided, "-o", art, "--max", "h=8")
    text = "value 'y': dim 2 is 1 for h=1, 1 for h=2 and 4 for h=8, which is not affine in h"
    check(rc != 0 and text in se, f"non-affine: '{text}' (got: {se.strip()})")
    # pinned with --shape instead, the same model compiles
    rc, _, se = kiln("compile", model, "-o", art, "--shape", "batch=2")
    check(rc == 0, f"--shape batch=2 still compiles ({se.strip()})")


PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "convnet.h"
/* convnet_run at batch N on x.bin, y.bin; writes probs.bin */
int main(int argc, char **argv)
{
    int64_t n = atoll(argv[2]);
    float *x = calloc((size_t)n * 3 * 16 * 16, 4), *y = calloc((size_t)n * 10, 4), *p = calloc((size_t)n * 10, 4);
    FILE *f = fopen("x.bin", "rb");
    if (!f || fread(x, 4, (size_t)n * 768, f) != (size_t)n * 768) return 3; /* the OS frees on exit */
    fclose(f);
    if (!(f = fopen("y.bin", "rb")) || fread(y, 4, (size_t)n * 10, f) != (size_t)n * 10) return 3;
    fclose(f);
    kn_artifact *art = NULL;
    kn_session *s = NULL;
    int rc = 0;
    if (convnet_open(argv[1], &art) || kn_session_create(art, &s) || convnet_run(s, n, x, y, p)) {
        fprintf(stderr, "%s\n", kn_last_error());
        rc = 1;
    } else if ((f = fopen("probs.bin", "wb"))) {
        rc = fwrite(p, 4, (size_t)n * 10, f) == (size_t)n * 10 ? 0 : 4;
        fclose(f);
    }
    kn_session_free(s);
    kn_artifact_close(art);
    free(x);
    free(y);
    free(p);
    return rc;
}
"""


def case_header(tmp):
    d = os.path.join(MODELS, "convnet")
    art = os.path.join(tmp, "convnet.so")
    header = os.path.join(tmp, "convnet.h")
    compile_model(os.path.join(d, "model.onnx"), art, "--max", "batch=8", "--emit-header", header)
    text = open(header).read()
    check("[batch, 3, 16, 16]" in text and "dynamic dim batch: 1 to 8" in text, "header documents batch")
    check("int64_t dim_batch" in text, "typed run function takes the batch")
    with open(os.path.join(tmp, "main.c"), "w") as f:
        f.write(PROGRAM)
    exe = os.path.join(tmp, "app")
    san = ["-fsanitize=address,undefined"] if SANITIZE else []
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", *san, "-I", RT_INCLUDE, "-I", tmp, os.path.join(tmp, "main.c"),
                    "-o", exe, RT_LIB, "-Wl,-rpath," + os.path.dirname(RT_LIB)], check=True)
    np.load(os.path.join(d, "in_3_x.npy")).tofile(os.path.join(tmp, "x.bin"))
    np.load(os.path.join(d, "in_3_y.npy")).tofile(os.path.join(tmp, "y.bin"))
    p = subprocess.run([exe, art, "3"], cwd=tmp, capture_output=True, text=True)
    got = np.fromfile(os.path.join(tmp, "probs.bin"), np.float32) if p.returncode == 0 else np.zeros(0)
    want = np.load(os.path.join(d, "out_3_probs.npy"))
    check(p.returncode == 0 and got.size == 30 and np.allclose(got.reshape(3, 10), want, rtol=1e-3, atol=1e-4),
          f"convnet_run(s, 3, ...) matches onnxruntime ({p.stderr.strip()})")
    np.zeros((9, 3, 16, 16), np.float32).tofile(os.path.join(tmp, "x.bin"))
    np.zeros((9, 10), np.float32).tofile(os.path.join(tmp, "y.bin"))
    p = subprocess.run([exe, art, "9"], cwd=tmp, capture_output=True, text=True)
    check(p.returncode != 0 and "dynamic dim 'batch' set to 9, the artifact was compiled for 1 to 8" in p.stderr,
          f"convnet_run(s, 9, ...) refused ({p.stderr.strip()})")


def case_two_dims(tmp):
    """Two dynamic dims in one tensor ([batch, seq, 8]): runtime kernels, both values derived per run."""
    import onnxruntime as ort
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32), "w")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["m"]),
             helper.make_node("Softmax", ["m"], ["s"], axis=1), helper.make_node("Add", ["s", "b"], ["y"])]
    g = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8]),
                                         helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", 1, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    model, art = os.path.join(tmp, "two.onnx"), os.path.join(tmp, "two.so")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    compile_model(model, art, "--max", "batch=4", "--max", "seq=7")
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for batch, seq in [(1, 1), (3, 5), (4, 7), (2, 7)]:
        rng = np.random.default_rng(batch * 10 + seq)
        feeds = {"x": rng.standard_normal((batch, seq, 8)).astype(np.float32),
                 "b": rng.standard_normal((batch, 1, 6)).astype(np.float32)}
        paths = {}
        for k, v in feeds.items():
            paths[k] = os.path.join(tmp, f"{k}.npy")
            np.save(paths[k], v)
        rc, _, se = run(art, paths, os.path.join(tmp, "two_out"))
        got = np.load(os.path.join(tmp, "two_out", "y.npy")) if rc == 0 else None
        want = sess.run(None, feeds)[0]
        check(rc == 0 and got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-4),
              f"batch={batch} seq={seq}: matches onnxruntime ({se.strip()})")
    expect_refusal(tmp, art, {"x": np.zeros((2, 8, 8), np.float32), "b": np.zeros((2, 1, 6), np.float32)},
                   "input 'x': dim 1 (seq) is 8, the artifact was compiled for at most 7", "seq 8")


def case_mobilenetv2(tmp):
    """MobileNetV2 (tests/models) with its batch made dynamic: every node in rows, compared at 1 and 3."""
    import onnxruntime as ort
    m = onnx.load(os.path.join(os.path.dirname(MODELS), "models", "mobilenetv2", "model.onnx"))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.shape.dim[0].dim_param = "batch"
    del m.graph.value_info[:]
    model, art = os.path.join(tmp, "mnv2.onnx"), os.path.join(tmp, "mnv2.so")
    onnx.save(m, model)
    report = compile_model(model, art, "--max", "batch=4", "--report")
    summary = next((l for l in report.splitlines() if " nodes: " in l and " runtime kernel" in l), "")
    check(" 0 runtime kernel" in summary, f"every node generated or oneDNN: {summary or report}")
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name, out_name = sess.get_inputs()[0].name, sess.get_outputs()[0].name
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 3, 224, 224)).astype(np.float32)
        path = os.path.join(tmp, "x.npy")
        np.save(path, x)
        rc, _, se = run(art, {name: path}, os.path.join(tmp, "out"))
        got = np.load(os.path.join(tmp, "out", out_name + ".npy")) if rc == 0 else None
        want = sess.run(None, {name: x})[0]
        check(rc == 0 and got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-4),
              f"batch {n}: matches onnxruntime ({se.strip()[-300:]})")


def case_yolo_head(tmp):
    """The anchor grid folds to constants while the batch varies: once a
    segfault in kn_run (memcpy), at every -O level."""
    d = os.path.join(MODELS, "yolo_head")
    for level in ["-O0", "-O1", "-O3"]:
        art = os.path.join(tmp, f"yolo{level}.so")
        compile_model(os.path.join(d, "model.onnx"), art, "--max", "batch=4", level)
        compare_sizes(tmp, art, d, [1, 3, 4])


def case_conv_residual(tmp):
    """Two fused convolutions in rows with a residual: the activation between
    them in oneDNN's layout on both sides."""
    d = os.path.join(MODELS, "conv_residual")
    art = os.path.join(tmp, "conv_residual.so")
    report = compile_model(os.path.join(d, "model.onnx"), art, "--max", "batch=3", "--report")
    check(report.count("oneDNN, in rows") == 2, "--report: both convolutions on oneDNN, in rows")
    compare_sizes(tmp, art, d, [1, 2, 3])


def case_if_fold(tmp):
    """An If whose condition follows from the pinned shapes runs its taken
    branch only; the other one (a Squeeze of a dim of size 2 when H = 2)
    is never compiled."""
    d = os.path.join(MODELS, "if_fold")
    for h, branch in [(1, "then"), (2, "else")]:
        for level in ["-O0", "-O3"]:
            art = os.path.join(tmp, f"if_{h}{level}.so")
            report = compile_model(os.path.join(d, "model.onnx"), art, "--shape", f"H={h}", "--report", "--verify-each",
                                   level)
            check(f"If 'if_h1': the condition is {'true' if h == 1 else 'false'} at compile time; its {branch} "
                  f"branch" in report, f"H={h} {level}: --report says the {branch} branch is inlined")
            check(not any(line.split()[1:2] == ["If"] for line in report.splitlines() if ":" not in line),
                  f"H={h} {level}: no If node is left")
            compare_sizes(tmp, art, d, [h])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        {"convnet": case_convnet, "encoder": case_encoder, "refusals": case_refusals, "header": case_header,
         "two_dims": case_two_dims, "mobilenetv2": case_mobilenetv2, "yolo_head": case_yolo_head, "conv_residual": case_conv_residual,
         "if_fold": case_if_fold}[CASE](tmp)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
