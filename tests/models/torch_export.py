"""The first steps of the PyTorch-export tests (check_torch_model.py,
tests/quant/check_torch_qat.py): generate a model with
gen_torch_models.py under the system python3 (exit 77 with a SKIP line when
PyTorch is missing), then compile it with --report.
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def generate_and_compile(kiln, system_python, model, out_dir):
    """(model.onnx path, artifact path, kiln's --report); exits on failure."""
    g = subprocess.run([system_python, os.path.join(HERE, "gen_torch_models.py"), "--model", model, out_dir],
                       capture_output=True, text=True)
    if g.returncode == 77:
        print(g.stdout.strip())
        sys.exit(77)
    if g.returncode != 0:
        sys.exit("FAIL: generating %s: %s" % (model, g.stderr.strip()[-2000:]))
    onnx_path = os.path.join(out_dir, "model.onnx")
    art = os.path.join(out_dir, "model.so")
    c = subprocess.run([kiln, "compile", onnx_path, "-o", art, "--report"], capture_output=True, text=True)
    if c.returncode != 0:
        sys.exit("FAIL: kiln compile: " + c.stderr.strip())
    return onnx_path, art, c.stdout
