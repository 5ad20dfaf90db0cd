"""An application built against one model's generated header must refuse
another model's artifact (codegen/cpu/header.c, kn_artifact_check_header).

Three small models, all compiled with --name m so that their headers declare
the same functions, as an application's build would use them:
  A  y = x + [1, 2, 3, 4]   x, y f32[1,4]
  B  y = x * 2              x, y f32[1,4]  (the same I/O: only the model hash tells)
  C  y = x + 1              x, y f32[1,8]  (another I/O contract)
An app built with A's header runs A (right answer), and A compiled again
from the same file; it refuses B and C with a message naming the artifact
and the header, exit status 1, no signal. The same with static archives:
the app built with A's static header and linked with B's archive refuses.

  test_header_contract.py KILN RUNTIME_INCLUDE_DIR LIBKILN_RT [SANITIZE]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

KILN, RT_INCLUDE, RT_LIB = sys.argv[1:4]
SANITIZE = len(sys.argv) > 4 and sys.argv[4].upper() in ("ON", "1", "TRUE")
failures = []

APP = r"""
#include <stdio.h>
#include <kiln/kiln.h>
#include "m.h"

int main(int argc, char **argv)
{
    kn_artifact *art = NULL;
    kn_session *s = NULL;
#ifdef STATIC_ARTIFACT
    (void)argc; (void)argv;
    int st = m_open(&art);
#else
    int st = argc == 2 ? m_open(argv[1], &art) : 2;
#endif
    if (st || kn_session_create(art, &s)) {
        fprintf(stderr, "app: %s\n", kn_last_error());
        return 1;
    }
    float x[4] = {10, 20, 30, 40}, y[4];
    if (m_run(s, x, y)) {
        fprintf(stderr, "app: %s\n", kn_last_error());
        return 1;
    }
    printf("%g %g %g %g\n", y[0], y[1], y[2], y[3]);
    kn_session_free(s);
    kn_artifact_close(art);
    return 0;
}
"""


def check(cond, what):
    print(("ok:   " if cond else "FAIL: ") + what)
    if not cond:
        failures.append(what)


def make_model(path, op, const, width):
    c = numpy_helper.from_array(np.array(const, np.float32).reshape(1, width), "c")
    g = helper.make_graph([helper.make_node(op, ["x", "c"], ["y"], name="op")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], [c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def kiln_compile(model, *opts):
    p = subprocess.run([KILN, "compile", model, "--name", "m", *opts], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"kiln compile {model} {' '.join(opts)} failed:\n{p.stderr}")


def build_app(tmp, header, exe, *extra):
    hdir = os.path.join(tmp, exe + "_inc")
    os.makedirs(hdir, exist_ok=True)
    with open(header) as f, open(os.path.join(hdir, "m.h"), "w") as g:
        g.write(f.read())
    src = os.path.join(tmp, "app.c")
    with open(src, "w") as f:
        f.write(APP)
    out = os.path.join(tmp, exe)
    san = ["-fsanitize=address,undefined"] if SANITIZE else []
    subprocess.run(["cc", "-std=c11", "-Wall", "-Werror", *san, "-I", RT_INCLUDE, "-I", hdir, *extra[:1], src,
                    *extra[1:], "-o", out, RT_LIB, "-lm", "-Wl,-rpath," + os.path.dirname(RT_LIB)], check=True)
    return out


def run(exe, *args):
    return subprocess.run([exe, *args], capture_output=True, text=True)


def expect_ok(p, want, what):
    check(p.returncode == 0 and p.stdout.split() == want, f"{what}: runs ({p.stdout.strip()} {p.stderr.strip()})")


def expect_refused(p, art, texts, what):
    msg = p.stderr.strip()
    check(p.returncode == 1, f"{what}: exit status 1, not a signal or a run (got {p.returncode}: {msg})")
    for t in [art, "m.h", *texts]:
        check(t in msg, f"{what}: message names '{t}' ({msg})")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        path = lambda name: os.path.join(tmp, name)
        make_model(path("a.onnx"), "Add", [1, 2, 3, 4], 4)
        make_model(path("b.onnx"), "Mul", [2, 2, 2, 2], 4)
        make_model(path("c.onnx"), "Add", [1] * 8, 8)
        kiln_compile(path("a.onnx"), "-o", path("a.so"), "--emit-header", path("a.h"))
        kiln_compile(path("a.onnx"), "-o", path("a2.so"))
        kiln_compile(path("b.onnx"), "-o", path("b.so"))
        kiln_compile(path("c.onnx"), "-o", path("c.so"))
        text = open(path("a.h")).read()
        check("KN_MODEL_m_HASH" in text and "KN_MODEL_m_IO_HASH" in text, "the header records both hashes")

        app = build_app(tmp, path("a.h"), "app")
        expect_ok(run(app, path("a.so")), ["11", "22", "33", "44"], "A's header, A's artifact")
        expect_ok(run(app, path("a2.so")), ["11", "22", "33", "44"], "A's header, A compiled again")
        expect_refused(run(app, path("b.so")), path("b.so"), ["model hash", "another model"],
                       "A's header, B's artifact (same I/O)")
        expect_refused(run(app, path("c.so")), path("c.so"), ["inputs and outputs differ"],
                       "A's header, C's artifact (other I/O)")

        # static archives: the descriptor is linked in under the same name
        kiln_compile(path("a.onnx"), "--static", path("a.a"), "--emit-header", path("as.h"))
        kiln_compile(path("b.onnx"), "--static", path("b.a"))
        app_a = build_app(tmp, path("as.h"), "app_sa", "-DSTATIC_ARTIFACT", path("a.a"))
        expect_ok(run(app_a), ["11", "22", "33", "44"], "A's static header, A's archive")
        app_b = build_app(tmp, path("as.h"), "app_sb", "-DSTATIC_ARTIFACT", path("b.a"))
        expect_refused(run(app_b), "static artifact", ["model hash", "another model"],
                       "A's static header, B's archive")
    if failures:
        print(f"test_header_contract: {len(failures)} failed")
        sys.exit(1)
    print("test_header_contract: all passed")


main()
