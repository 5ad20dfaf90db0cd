#!/usr/bin/env bash
# `kiln profile` as a user meets it: a small residual conv model (node and
# value names with XML/JSON metacharacters) is compiled, profiled with a
# trace and an arena drawing, and check_profile.py checks the table, the
# JSON report, the trace (valid Chrome trace JSON) and the SVG (well-formed
# XML) against the model itself. Also: --help, usage and I/O errors.
set -uo pipefail
kiln="$1"; python="$2"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$python" "$here/check_profile.py" make "$tmp/m.onnx" || fail "model generation"
# -O1: no fusion, so that every node of the model is a step of its own
"$kiln" compile "$tmp/m.onnx" -O1 -o "$tmp/m.so" >/dev/null || fail "compile"

"$kiln" profile "$tmp/m.so" --runs 3 --trace "$tmp/t.json" --memory-svg "$tmp/m.svg" > "$tmp/table.txt" \
  || fail "profile"
"$kiln" profile "$tmp/m.so" --runs 3 --no-peak --json > "$tmp/report.json" || fail "profile --json"
"$python" "$here/check_profile.py" check "$tmp/m.onnx" "$tmp/table.txt" "$tmp/report.json" "$tmp/t.json" \
  "$tmp/m.svg" 3 || fail "check_profile.py"
# no temporary files left beside the outputs
[ "$(ls "$tmp" | grep -c tmp-)" -eq 0 ] || fail "temporary files left: $(ls "$tmp")"

# usage and errors
"$kiln" profile --help | grep -q "usage: kiln profile" || fail "--help"
"$kiln" profile >/dev/null 2>&1; [ $? -eq 2 ] || fail "no argument: exit status 2 expected"
out=$("$kiln" profile "$tmp/missing.so" 2>&1); [ $? -eq 1 ] && grep -q "missing.so" <<<"$out" || fail "missing file: $out"
out=$("$kiln" profile "$tmp/m.so" --runs 1 --no-peak --trace "$tmp/no/dir/t.json" 2>&1)
[ $? -eq 1 ] && grep -q "no/dir/t.json: cannot be written" <<<"$out" || fail "unwritable trace: $out"
out=$("$kiln" profile "$tmp/m.so" --runs 1 --no-peak --input "nosuch=$tmp/x.npy" 2>&1)
[ $? -eq 1 ] && grep -q "no input named 'nosuch'" <<<"$out" || fail "bad --input: $out"
# an .onnx model is compiled first (digits: pin its batch)
"$kiln" profile "$root/samples/digits/digits.onnx" --shape N=2 --runs 2 --no-peak --order | grep -q "conv1" \
  || fail "profiling an .onnx model"
# an output whose shape depends on data (an If whose branches give [2,3] and
# [1,3]): profile and bench take it as kiln run does
"$python" - "$tmp/if.onnx" <<'PY' || fail "If model generation"
import sys
import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh
then_g = h.make_graph([h.make_node("Relu", ["x"], ["t"])], "then", [], [h.make_tensor_value_info("t", T.FLOAT, None)])
else_g = h.make_graph([h.make_node("ReduceMax", ["x"], ["e"], axes=[0], keepdims=1)], "else", [],
                      [h.make_tensor_value_info("e", T.FLOAT, None)])
nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "z"], ["cond"]),
         h.make_node("If", ["cond"], ["y"], name="branchy", then_branch=then_g, else_branch=else_g)]
g = h.make_graph(nodes, "if_dyn", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["n", 3])], [nh.from_array(np.array(0, np.float32), "z")])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
PY
"$kiln" compile "$tmp/if.onnx" -o "$tmp/if.so" >/dev/null || fail "compile the If model"
for v in 1 -1; do
  "$python" -c "import numpy as np; np.save('$tmp/x$v.npy', np.full((2, 3), $v, np.float32))"
  out=$("$kiln" profile "$tmp/if.so" --runs 2 --no-peak --input "x=$tmp/x$v.npy" 2>&1)
  [ $? -eq 0 ] && grep -q "branchy  *If" <<<"$out" || fail "profile of a data-dependent output (x = $v): $out"
  out=$("$kiln" bench "$tmp/if.so" --runs 2 --input "x=$tmp/x$v.npy" 2>&1) || fail "bench of a data-dependent output: $out"
done
echo "profile: ok"
