#!/usr/bin/env bash
# The holes a robustness review found in what the kiln command reads and
# writes (issue 14), one block per hole: outputs that are inputs or each
# other, temporary files at predictable names, outputs whose file names
# collide, inputs that are FIFOs/directories or given twice, a strict .npy
# header, numeric flags, and models that are not regular files. Every case
# checks the exit status and the message, and what is (not) on disk.
set -euo pipefail
kiln="$1"; python="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
model="$root/samples/digits/digits.onnx"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect RC SUBSTRING -- command...: exit status and a substring of stdout+stderr;
# a timeout of 60 s turns a hang into a failure (status 124)
expect() {
  local want_rc="$1" want="$2"; shift 3
  local out rc=0
  out=$(timeout 60 "$@" 2>&1) || rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qF -- "$want" <<<"$out"; then
    fail "$*"; echo "  want rc=$want_rc and '$want'"; echo "  got rc=$rc: $(head -5 <<<"$out")"
  else
    passes=$((passes + 1))
  fi
}
# same FILE COPY: FILE still has the bytes of COPY
same() { if cmp -s "$1" "$2"; then passes=$((passes + 1)); else fail "$1 was changed"; fi; }
absent() { if [ ! -e "$1" ] && [ ! -L "$1" ]; then passes=$((passes + 1)); else fail "$1 was written"; fi; }

"$python" - "$tmp" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto
d = sys.argv[1]
np.save(f"{d}/good.npy", np.arange(128, dtype=np.float32).reshape(2, 1, 8, 8) / 128)
# two outputs whose names both map to the file name a_b
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
g = helper.make_graph([helper.make_node("Identity", ["x"], ["a/b"]), helper.make_node("Neg", ["x"], ["a_b"])],
                      "g", [x], [helper.make_tensor_value_info("a/b", TensorProto.FLOAT, [3]),
                                 helper.make_tensor_value_info("a_b", TensorProto.FLOAT, [3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/two.onnx")
np.save(f"{d}/x.npy", np.array([1, 2, 3], np.float32))
# kiln's own integer op, written into a model by hand with a zero point that
# does not fit its u8 input
from onnx import numpy_helper
qn = helper.make_node("QConv", ["qx", "qw", "", "", "qs"], ["qy"], domain="kiln", kernel_shape=[1, 1],
                      x_zero_point=1000, y_zero_point=0, y_dtype=2)
qg = helper.make_graph([qn], "q", [helper.make_tensor_value_info("qx", TensorProto.UINT8, [1, 2, 3, 3])],
                       [helper.make_tensor_value_info("qy", TensorProto.UINT8, [1, 2, 3, 3])],
                       [numpy_helper.from_array(np.ones((2, 2, 1, 1), np.int8), "qw"),
                        numpy_helper.from_array(np.array([0.5, 0.5], np.float32), "qs")])
onnx.save(helper.make_model(qg, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("kiln", 1)]),
          f"{d}/badzp.onnx")
# kiln's fused elementwise op by hand: a QuantizeLinear step whose type is
# NaN (once a float-to-int cast), and an 8-bit input that an Add reads as f32
fe = helper.make_node("FusedElementwise", ["fx"], ["fy"], domain="kiln", steps=["QuantizeLinear"], operands=[0],
                      step_alpha=[float("nan")], step_beta=[0.0], step_gamma=[float("nan")])
fg = helper.make_graph([fe], "f", [helper.make_tensor_value_info("fx", TensorProto.FLOAT, [4])],
                       [helper.make_tensor_value_info("fy", TensorProto.UINT8, [4])])
onnx.save(helper.make_model(fg, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("kiln", 1)]),
          f"{d}/badstep.onnx")
fe = helper.make_node("FusedElementwise", ["fq", "fq"], ["fy"], domain="kiln", steps=["DequantizeLinear", "Add"],
                      operands=[0, -1, 1], step_alpha=[0.1, 0.0], step_beta=[3.0, 0.0], step_gamma=[2.0, 0.0])
fg = helper.make_graph([fe], "f", [helper.make_tensor_value_info("fq", TensorProto.UINT8, [4])],
                       [helper.make_tensor_value_info("fy", TensorProto.FLOAT, [4])])
onnx.save(helper.make_model(fg, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("kiln", 1)]),
          f"{d}/badtype.onnx")
# a header with an extra key whose string value holds "'shape': (2, 3)"
hdr = "{'descr': '<f4', 'fortran_order': False, 'x': \"'shape': (2, 3)\", 'shape': (2, 1, 8, 8), }"
hdr += " " * ((64 - (10 + len(hdr) + 1) % 64) % 64) + "\n"
data = np.zeros((2, 1, 8, 8), np.float32).tobytes()
open(f"{d}/extra_key.npy", "wb").write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode() + data)
PY
cp "$model" "$tmp/m.onnx"; cp "$model" "$tmp/orig.onnx"
printf 'precious' > "$tmp/victim"; cp "$tmp/victim" "$tmp/victim.orig"

# ---- 1. an output that is an input or another output ----------------------
m="$tmp/m.onnx"
expect 2 "-o '$m' names the same file as MODEL '$m': refusing to overwrite an input" -- "$kiln" compile "$m" -o "$m"
same "$m" "$tmp/orig.onnx"
expect 2 "--emit-header '$m' names the same file as MODEL '$m'" -- "$kiln" compile "$m" -o "$tmp/a.so" --emit-header "$m"
expect 2 "--static '$m' names the same file as MODEL '$m'" -- "$kiln" compile "$m" --static "$m"
same "$m" "$tmp/orig.onnx"; absent "$tmp/a.so"
# other spellings of the model: a symlink, a hard link, a path through ..
ln -s m.onnx "$tmp/link.onnx"; ln "$m" "$tmp/hard.onnx"; mkdir "$tmp/sub"
expect 2 "-o '$tmp/link.onnx' names the same file as MODEL '$m'" -- "$kiln" compile "$m" -o "$tmp/link.onnx"
expect 2 "-o '$tmp/hard.onnx' names the same file as MODEL '$m'" -- "$kiln" compile "$m" -o "$tmp/hard.onnx"
expect 2 "-o '$tmp/sub/../m.onnx' names the same file as MODEL" -- "$kiln" compile "$m" -o "$tmp/sub/../m.onnx"
same "$m" "$tmp/orig.onnx"
# two outputs, whether the file exists yet or not
expect 2 "-o '$tmp/a.so' and --emit-header '$tmp/sub/../a.so' name the same file" \
  -- "$kiln" compile "$m" -o "$tmp/a.so" --emit-header "$tmp/sub/../a.so"
expect 2 "--static '$tmp/a.a' and --emit-header '$tmp/a.a' name the same file" \
  -- "$kiln" compile "$m" --static "$tmp/a.a" --emit-header "$tmp/a.a"
absent "$tmp/a.so"; absent "$tmp/a.a"
cp "$model" "$tmp/w.so.weights"
expect 2 "--weights external (the side file) '$tmp/w.so.weights' names the same file as MODEL" \
  -- "$kiln" compile "$tmp/w.so.weights" -o "$tmp/w.so" --weights external
same "$tmp/w.so.weights" "$tmp/orig.onnx"; absent "$tmp/w.so"
# kiln run: an output file that is an input file (or the model)
mkdir "$tmp/o"; cp "$tmp/good.npy" "$tmp/o/probs.npy"
expect 1 "output 'probs' in --output-dir '$tmp/o/probs.npy' names the same file as --input image '$tmp/o/probs.npy'" \
  -- "$kiln" run "$m" --input "image=$tmp/o/probs.npy" --output-dir "$tmp/o"
same "$tmp/o/probs.npy" "$tmp/good.npy"
printf 'x' > "$tmp/notdir"
expect 1 "--output-dir '$tmp/notdir': exists and is not a folder" \
  -- "$kiln" run "$m" --input "image=$tmp/good.npy" --output-dir "$tmp/notdir"
# kiln profile and kiln inspect: the files they draw
expect 2 "--trace '$m' names the same file as MODEL '$m'" -- "$kiln" profile "$m" --trace "$m"
expect 2 "--trace '$tmp/t.json' and --memory-svg '$tmp/t.json' name the same file" \
  -- "$kiln" profile "$m" --trace "$tmp/t.json" --memory-svg "$tmp/t.json"
expect 2 "--trace '$tmp/good.npy' names the same file as --input '$tmp/good.npy'" \
  -- "$kiln" profile "$m" --input "image=$tmp/good.npy" --trace "$tmp/good.npy"
expect 2 "--dot '$m' names the same file as MODEL '$m'" -- "$kiln" inspect "$m" --dot "$m"
same "$m" "$tmp/orig.onnx"; absent "$tmp/t.json"

# a kiln::QConv whose zero point does not fit its input's type: refused,
# naming the node, by inference (compile) and by the evaluator alike
expect 1 "node 'QConv_0' (QConv): x_zero_point is outside the range of X's type" -- "$kiln" compile "$tmp/badzp.onnx" -o "$tmp/badzp.so"
absent "$tmp/badzp.so"
# a kiln::FusedElementwise with a quantization step of no 8-bit type, or an
# 8-bit input that a float step reads: refused, naming the node and step
expect 1 "node 'FusedElementwise_0' (FusedElementwise): step 0: step_gamma nan names no 8-bit type" -- "$kiln" compile "$tmp/badstep.onnx" -o "$tmp/badstep.so"
expect 1 "node 'FusedElementwise_0' (FusedElementwise): input 1 has dtype u8, expected f32" -- "$kiln" compile "$tmp/badtype.onnx" -o "$tmp/badtype.so"
absent "$tmp/badstep.so"; absent "$tmp/badtype.so"

# an output path that is a FIFO (as /dev/null is a device): renaming the
# finished file over it would replace the node itself, so it is refused
mkfifo "$tmp/fifo"
expect 1 "$tmp/fifo: is a FIFO" -- "$kiln" compile "$model" --shape N=2 -o "$tmp/fifo"
mkdir "$tmp/od" && mkfifo "$tmp/od/probs.npy"
expect 1 "$tmp/od/probs.npy: is a FIFO" -- "$kiln" run "$model" --input "image=$tmp/good.npy" --output-dir "$tmp/od"
[ -p "$tmp/fifo" ] && [ -p "$tmp/od/probs.npy" ] && passes=$((passes + 1)) || fail "a FIFO was replaced"

# ---- 2. temporary files never follow a planted symlink ---------------------
# `exec` keeps the shell's pid, so $$ is kiln's pid: the names the old code
# used (FINAL.tmp-kiln-<pid>-<n>, FINAL.tmp.<pid>) are planted exactly
"$kiln" compile "$model" --shape N=2 -o "$tmp/d2.so" >/dev/null 2>&1 || fail "compile d2.so"
art="$tmp/d2.so"
mkdir "$tmp/t" "$tmp/t2"
sh -c 'ln -s "$1" "$2/r.h.tmp-kiln-$$-1"; exec "$3" compile "$4" --shape N=2 -o "$2/r.so" --emit-header "$2/r.h"' \
  _ "$tmp/victim" "$tmp/t" "$kiln" "$model" >/dev/null 2>&1 || fail "compile with a planted header symlink"
same "$tmp/victim" "$tmp/victim.orig"
if [ -f "$tmp/t/r.so" ] && [ -f "$tmp/t/r.h" ] && [ ! -L "$tmp/t/r.h" ] && grep -q "kn_artifact" "$tmp/t/r.h"; then
  passes=$((passes + 1)); else fail "r.so/r.h not written as regular files"; fi
sh -c 'ln -s "$1" "$2/r.so.tmp-kiln-$$-0"; exec "$3" compile "$4" --shape N=2 -o "$2/r.so"' \
  _ "$tmp/victim" "$tmp/t2" "$kiln" "$model" >/dev/null 2>&1 || fail "compile with a planted artifact symlink"
same "$tmp/victim" "$tmp/victim.orig"
[ -f "$tmp/t2/r.so" ] && [ ! -L "$tmp/t2/r.so" ] && passes=$((passes + 1)) || fail "r.so not written as a regular file"
# nothing of kiln's is left beside them: only the outputs and the planted links
left=$(cd "$tmp/t" && ls -A | grep -v -e '^r\.so$' -e '^r\.h$' -e '\.tmp-kiln-' || true)
[ -z "$left" ] && passes=$((passes + 1)) || fail "temporaries left behind: $left"
mkdir "$tmp/t/out"
sh -c 'ln -s "$1" "$2/probs.npy.tmp.$$"; exec "$3" run "$4" --input "$5" --output-dir "$2"' \
  _ "$tmp/victim" "$tmp/t/out" "$kiln" "$art" "image=$tmp/good.npy" >/dev/null 2>&1 || fail "run with a planted symlink"
same "$tmp/victim" "$tmp/victim.orig"
"$python" -c 'import sys, numpy as np; a = np.load(sys.argv[1]); assert a.shape == (2, 10) and a.dtype == np.float32' \
  "$tmp/t/out/probs.npy" && passes=$((passes + 1)) || fail "probs.npy not written correctly"

# ---- 3. outputs whose file names collide -------------------------------------
expect 0 "output 'a_b' goes to $tmp/two_out/a_b~1.npy: output 'a/b' took $tmp/two_out/a_b.npy" \
  -- "$kiln" run "$tmp/two.onnx" --input "x=$tmp/x.npy" --output-dir "$tmp/two_out"
"$python" - "$tmp/two_out" <<'PY' && passes=$((passes + 1)) || fail "a_b.npy / a_b~1.npy"
import sys, numpy as np
d = sys.argv[1]
assert (np.load(f"{d}/a_b.npy") == [1, 2, 3]).all()
assert (np.load(f"{d}/a_b~1.npy") == [-1, -2, -3]).all()
PY
expect 0 "a_b~1.npy" -- "$kiln" run --help

# ---- 4. inputs that are not regular files, given twice, or unknown ---------------
mkfifo "$tmp/fifo.npy"
expect 1 "$tmp/fifo.npy: is a FIFO, not a regular .npy file" -- "$kiln" run "$m" --input "image=$tmp/fifo.npy"
expect 1 "$tmp: is a directory, not a regular .npy file" -- "$kiln" run "$m" --input "image=$tmp"
expect 1 "/dev/zero: is a device, not a regular .npy file" -- "$kiln" run "$m" --input "image=/dev/zero"
expect 1 "$tmp/fifo.npy: is a FIFO, not a regular .npy file" -- "$kiln" run "$art" --input "image=$tmp/fifo.npy"
expect 1 "$tmp/fifo.npy: is a FIFO" -- "$kiln" bench "$art" --input "image=$tmp/fifo.npy" --runs 1
expect 1 "--input image is given twice ('image=$tmp/good.npy' and 'image=$tmp/x.npy')" \
  -- "$kiln" run "$m" --input "image=$tmp/good.npy" --input "image=$tmp/x.npy"
expect 1 "--input image is given twice" -- "$kiln" run "$art" --input "image=$tmp/good.npy" --input "image=$tmp/good.npy"
expect 1 "--input image is given twice" -- "$kiln" bench "$art" --input "image=$tmp/good.npy" --input "image=$tmp/good.npy"
expect 1 "the model has no input named 'img' (its inputs: image)" -- "$kiln" run "$m" --input "img=$tmp/good.npy"
expect 1 "the model has no input named 'img' (its inputs: image)" -- "$kiln" run "$art" --input "img=$tmp/good.npy"
expect 1 "the model has no input named 'img' (its inputs: image)" -- "$kiln" profile "$art" --input "img=$tmp/good.npy" --no-peak
expect 1 "--input 'image=': no file after '='" -- "$kiln" run "$m" --input "image="

# ---- 5. the .npy header is parsed, not searched --------------------------------
expect 1 "extra_key.npy: malformed .npy header: unknown key 'x'" -- "$kiln" run "$m" --input "image=$tmp/extra_key.npy"

# ---- 6. numeric flags -----------------------------------------------------------
expect 2 "kiln bench: --runs: expected a positive integer up to 1000000, got '0'" -- "$kiln" bench "$art" --runs 0
expect 2 "kiln bench: --runs: expected a positive integer up to 1000000, got '-1'" -- "$kiln" bench "$art" --runs -1
expect 2 "kiln bench: --runs: expected a positive integer up to 1000000, got '1x'" -- "$kiln" bench "$art" --runs 1x
expect 2 "kiln bench: --threads: expected a positive integer up to 256, got '0'" -- "$kiln" bench "$art" --threads 0
expect 2 "kiln bench: --threads: expected a positive integer up to 256, got '99999999999'" \
  -- "$kiln" bench "$art" --threads 99999999999
expect 2 "kiln bench: --warmup: expected a non-negative integer up to 1000000, got ' 3'" -- "$kiln" bench "$art" --warmup " 3"
expect 2 "kiln bench: --threads: expected a positive integer up to 256, got '0'" -- "$kiln" bench --peak --threads 0
expect 2 "kiln bench: --runs needs a value" -- "$kiln" bench "$art" --runs
expect 2 "kiln profile: --runs: expected a positive integer up to 1000000, got '0'" -- "$kiln" profile "$art" --runs 0
expect 2 "kiln profile: --threads: expected a positive integer up to 256, got '+2'" -- "$kiln" profile "$art" --threads +2
expect 2 "kiln profile: --warmup: expected a non-negative integer up to 1000000, got '-1'" -- "$kiln" profile "$art" --warmup -1
expect 2 "kiln compile: -o needs a value" -- "$kiln" compile "$m" -o
expect 2 "kiln run: --output-dir needs a value" -- "$kiln" run "$m" --output-dir
expect 2 "kiln inspect: --dot needs a value" -- "$kiln" inspect "$m" --dot
expect 1 "--shape 'N=4611686018427387904': dim 4611686018427387904 is too large (at most 2147483647)" \
  -- "$kiln" compile "$m" -o "$tmp/s.so" --shape N=4611686018427387904
expect 1 "--shape 'N=2^62': '2^62' is not a shape like 1x3x224x224" -- "$kiln" compile "$m" -o "$tmp/s.so" --shape "N=2^62"
expect 1 "--shape 'N=-1': '-1' is not a shape" -- "$kiln" compile "$m" -o "$tmp/s.so" --shape N=-1
expect 1 "--shape 'N=99999999999999999999': '99999999999999999999' is not a shape" \
  -- "$kiln" compile "$m" -o "$tmp/s.so" --shape N=99999999999999999999
expect 1 "--shape N is given twice ('N=2' and 'N=3')" -- "$kiln" compile "$m" -o "$tmp/s.so" --shape N=2 --shape N=3
expect 2 "--max 'N=99999999999': expected DIM=N with N >= 1" -- "$kiln" compile "$m" -o "$tmp/s.so" --max N=99999999999
absent "$tmp/s.so"

# ---- 7. a model that is a FIFO or a directory -------------------------------------
expect 1 "$tmp/fifo.npy: is a FIFO, not a regular file" -- "$kiln" inspect "$tmp/fifo.npy"
expect 1 "$tmp/fifo.npy: is a FIFO, not a regular file" -- "$kiln" compile "$tmp/fifo.npy" -o "$tmp/f.so"
expect 1 "$tmp/fifo.npy: is a FIFO, not a regular file" -- "$kiln" run "$tmp/fifo.npy"
expect 1 "$tmp/sub: is a directory, not a regular file" -- "$kiln" inspect "$tmp/sub"
expect 1 "$tmp/sub: is a directory, not a regular file" -- "$kiln" compile "$tmp/sub" -o "$tmp/f.so"
expect 1 "--model: $tmp/fifo.npy: is a FIFO, not a regular file" -- "$kiln" bench "$art" --vs-ort --model "$tmp/fifo.npy"
absent "$tmp/f.so"

echo "cli hostile input: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
