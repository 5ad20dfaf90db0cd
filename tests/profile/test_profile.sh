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
echo "profile: ok"
