"""Test of `kiln difftest` (tools/kiln/difftest.c), the runner that the
differential tester's driver feeds with generated cases.

Writes four hand-made cases in the folder format the driver uses and checks
what the runner makes of them: the exit status, the line per case, the
summary, each case's result.txt and the captured compile report. Then the
failure paths a driver depends on: a case with a broken tol.txt, usage
errors, and no temporary file left behind (--keep keeps them).

usage: test_runner.py KILN WORKDIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LEVELS = ("O0", "O3")
THREADS = (1, 2, 4)


def save_tensor(path, arr, name=""):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(arr, name).SerializeToString())


def write_case(root, name, graph, inputs, expects, tols):
    """inputs: [(name, array)], expects: [array], tols: ["rtol atol"]."""
    d = os.path.join(root, name)
    os.makedirs(d)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, os.path.join(d, "model.onnx"))
    for i, (iname, arr) in enumerate(inputs):
        save_tensor(os.path.join(d, "input_%d.pb" % i), arr, iname)
    for j, arr in enumerate(expects):
        save_tensor(os.path.join(d, "expect_%d.pb" % j), arr)
    with open(os.path.join(d, "tol.txt"), "w") as f:
        f.write("".join(t + "\n" for t in tols))


def relu_add_graph():
    return helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Add", ["r", "b"], ["y"], name="add")],
        "relu_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 37]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [37])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 37])])


def make_cases(root):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 37)).astype(np.float32)
    b = rng.standard_normal(37).astype(np.float32)
    y = np.maximum(x, 0) + b
    # (a) right answer, loose tolerance -> ok
    write_case(root, "a_relu_add", relu_add_graph(), [("x", x), ("b", b)], [y], ["1e-5 1e-6"])
    # (b) the same graph, one element of the expected output wrong -> FAIL.
    # The inputs are given in the other order: they bind by name.
    wrong = y.copy()
    wrong.flat[17] += 1.0
    write_case(root, "b_wrong_expect", relu_add_graph(), [("b", b), ("x", x)], [wrong], ["1e-5 1e-6"])
    # (c) a transpose must be exact, and bitwise the same at every thread count
    t = rng.standard_normal((3, 5, 64)).astype(np.float32)
    write_case(root, "c_transpose_exact",
               helper.make_graph(
                   [helper.make_node("Transpose", ["t"], ["u"], name="tr", perm=[2, 0, 1])], "transpose",
                   [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 5, 64])],
                   [helper.make_tensor_value_info("u", TensorProto.FLOAT, [64, 3, 5])]),
               [("t", t)], [np.transpose(t, (2, 0, 1)).copy()], ["0 0"])
    # (d) an op kiln does not support -> UNSUPPORTED, not a failure
    write_case(root, "d_unsupported",
               helper.make_graph(
                   [helper.make_node("RandomUniformLike", ["x"], ["y"], name="rnd")], "random",
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]),
               [("x", np.zeros((2, 3), np.float32))], [np.zeros((2, 3), np.float32)], ["0 0"])
    # not a case: no model.onnx
    os.makedirs(os.path.join(root, "notes"))


def fail(msg, out=""):
    print("FAIL:", msg)
    if out:
        print("---- output ----\n" + out)
    sys.exit(1)


def run(kiln, args, env):
    p = subprocess.run([kiln, "difftest"] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=env, timeout=600)
    return p.returncode, p.stdout


def result_lines(root, case):
    with open(os.path.join(root, case, "result.txt")) as f:
        return f.read().splitlines()


def expect_all_pass(root, case, out):
    want = ["ref PASS"]
    for o in LEVELS:
        want += ["%s t%d PASS" % (o, t) for t in THREADS] + ["%s threads PASS" % o]
    got = result_lines(root, case)
    if got != want:
        fail("%s/result.txt is %r, expected %r" % (case, got, want), out)
    for o in LEVELS:
        report = os.path.join(root, case, "report_%s.txt" % o)
        with open(report) as f:
            text = f.read()
        if " nodes: " not in text:
            fail("%s has no compile report: %r" % (report, text), out)


def check_batch(kiln, root, env, tmp):
    rc, out = run(kiln, [root, "-j", "2"], env)
    if rc != 1:
        fail("a batch with a failing case exits %d, expected 1" % rc, out)
    lines = out.splitlines()
    summary = "difftest: 2 ok, 1 failed, 0 crashed, 1 unsupported (of 4 cases)"
    if summary not in lines:
        fail("no summary line %r" % summary, out)
    for want in ("difftest: a_relu_add ok", "difftest: c_transpose_exact ok"):
        if want not in lines:
            fail("no line %r" % want, out)
    detail = "output 'y': 1 of 148 elements differ (first at 17: expected %.9g, got %.9g; max abs diff 1)" % (
        open_expect(root, "b_wrong_expect").flat[17], open_expect(root, "a_relu_add").flat[17])
    b_line = [l for l in lines if l.startswith("difftest: b_wrong_expect ")]
    if b_line != ["difftest: b_wrong_expect FAIL ref FAIL " + detail]:
        fail("case b's line is %r, expected the first failing check with %r" % (b_line, detail), out)
    d_line = [l for l in lines if l.startswith("difftest: d_unsupported ")]
    if len(d_line) != 1 or not d_line[0].startswith("difftest: d_unsupported UNSUPPORTED ") \
            or "RandomUniformLike" not in d_line[0]:
        fail("case d's line is %r" % d_line, out)

    expect_all_pass(root, "a_relu_add", out)
    expect_all_pass(root, "c_transpose_exact", out)
    b = result_lines(root, "b_wrong_expect")
    want = ["ref FAIL " + detail]
    for o in LEVELS:
        want += ["%s t%d FAIL %s" % (o, t, detail) for t in THREADS] + ["%s threads PASS" % o]
    if b != want:
        fail("b_wrong_expect/result.txt is %r, expected %r" % (b, want), out)
    d = result_lines(root, "d_unsupported")
    if [l.split(" ", 2)[:2] for l in d] != [["ref", "UNSUPPORTED"], ["O0", "UNSUPPORTED"], ["O3", "UNSUPPORTED"]]:
        fail("d_unsupported/result.txt: %r" % d, out)
    if os.path.exists(os.path.join(root, "notes", "result.txt")):
        fail("a folder without model.onnx was run as a case", out)
    if os.listdir(tmp):
        fail("temporary files left in $TMPDIR: %r" % os.listdir(tmp), out)


def open_expect(root, case):
    with open(os.path.join(root, case, "expect_0.pb"), "rb") as f:
        t = TensorProto()
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def check_filter_keep(kiln, root, env, tmp):
    rc, out = run(kiln, [root, "-j", "1", "-O", "3", "--threads", "2", "--filter", "[ac]_*", "--keep"], env)
    if rc != 0 or "difftest: 2 ok, 0 failed, 0 crashed, 0 unsupported (of 2 cases)" not in out:
        fail("a passing filtered batch: exit %d" % rc, out)
    if result_lines(root, "c_transpose_exact") != ["ref PASS", "O3 t2 PASS"]:
        fail("-O 3 --threads 2: c's result.txt is %r" % result_lines(root, "c_transpose_exact"), out)
    if os.path.exists(os.path.join(root, "c_transpose_exact", "report_O0.txt")):
        fail("report_O0.txt left from an earlier run", out)
    kept = [l for l in out.splitlines() if l.startswith("difftest: artifacts kept in ")]
    so = os.path.join(kept[0].split(" in ", 1)[1].split("/<case>")[0], "c_transpose_exact", "case_O3.so") if kept else ""
    if not so or not os.path.isfile(so):
        fail("--keep: no artifact at %r" % so, out)
    shutil.rmtree(os.path.dirname(os.path.dirname(so)))


def spin_graph():
    """A Loop of 10**12 steps: the evaluator cannot finish it in any timeout
    a test would give, so it stands for a case that hangs."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "one"], ["s_out"], name="inc"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.ones(1, np.float32), "one")])
    return helper.make_graph(
        [helper.make_node("Loop", ["n", "c", "x"], ["y"], name="loop", body=body)], "spin",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.array(10**12, np.int64), "n"),
         numpy_helper.from_array(np.array(True), "c")])


def check_timeout(kiln, work, root, env):
    """A case that hangs is killed, reported as CRASH, and the batch goes on
    to the next case (-j 1: strictly after it). The case after it is the
    unsupported one, which ends at the import: it cannot itself come near
    the timeout, however slow the machine or the build (ASan)."""
    hang = os.path.join(work, "hang")
    write_case(hang, "a_spin", spin_graph(), [("x", np.zeros(1, np.float32))], [np.zeros(1, np.float32)], ["0 0"])
    shutil.copytree(os.path.join(root, "d_unsupported"), os.path.join(hang, "z_unsupported"))
    rc, out = run(kiln, [hang, "-j", "1", "--timeout", "2"], env)
    lines = [l for l in out.splitlines() if l.startswith("difftest: ")]
    if rc != 1 or len(lines) != 3 or lines[0] != "difftest: a_spin CRASH timeout after 2 s" \
            or not lines[1].startswith("difftest: z_unsupported UNSUPPORTED ") \
            or lines[2] != "difftest: 0 ok, 0 failed, 1 crashed, 1 unsupported (of 2 cases)":
        fail("a hanging case: exit %d" % rc, out)
    if result_lines(hang, "a_spin") != ["CRASH timeout after 2 s"]:
        fail("a_spin/result.txt is %r" % result_lines(hang, "a_spin"), out)


def check_bad_inputs(kiln, root, env):
    os.remove(os.path.join(root, "c_transpose_exact", "tol.txt"))
    rc, out = run(kiln, [root, "--filter", "c_*"], env)
    lines = result_lines(root, "c_transpose_exact")
    if rc != 1 or len(lines) != 1 or not lines[0].startswith("case FAIL ") or "tol.txt" not in lines[0]:
        fail("a case without tol.txt: exit %d, result.txt %r" % (rc, lines), out)
    for args, what in (([root, "-O", "5"], "-O 5"), ([root, "--threads", "0"], "--threads 0"),
                       ([root, "-O", "0,"], "-O 0,"), ([os.path.join(root, "missing")], "a missing folder"),
                       ([root, "--filter", "zzz*"], "a filter that matches nothing"), ([], "no folder")):
        rc, out = run(kiln, args, env)
        if rc != 2 or "kiln difftest: " not in out:
            fail("%s: exit %d, expected 2 with a message" % (what, rc), out)
    rc, out = run(kiln, ["--help"], env)
    if rc != 0 or "tol.txt" not in out or "expect_<j>.pb" not in out or "--timeout" not in out:
        fail("--help", out)


def main():
    kiln, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    root, tmp = os.path.join(work, "cases"), os.path.join(work, "tmp")
    os.makedirs(root)
    os.makedirs(tmp)
    env = dict(os.environ, TMPDIR=tmp)
    make_cases(root)
    check_batch(kiln, root, env, tmp)
    check_filter_keep(kiln, root, env, tmp)
    check_timeout(kiln, work, root, env)
    if os.listdir(tmp):
        fail("temporary files left in $TMPDIR after a killed case: %r" % os.listdir(tmp))
    check_bad_inputs(kiln, root, env)
    print("difftest runner: all checks passed")


if __name__ == "__main__":
    main()
