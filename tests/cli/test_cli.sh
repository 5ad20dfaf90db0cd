#!/usr/bin/env bash
# Checks kiln's command-line contract: every verb has --help, and bad input
# gets a clear message on stderr and a non-zero exit.
set -uo pipefail
kiln="$1"; python="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
model="$root/samples/digits/digits.onnx"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fails=0; passes=0

# expect RC SUBSTRING -- command...: exit status and a substring of stdout+stderr
expect() {
  local want_rc="$1" want="$2"; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: $*"; echo "  want rc=$want_rc and '$want'"; echo "  got rc=$rc: $(head -5 <<<"$out")"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}

expect 0 "usage: kiln <verb>" -- "$kiln" --help
expect 2 "unknown verb 'frobnicate'" -- "$kiln" frobnicate
for verb in inspect run conformance bench; do
  expect 0 "usage: kiln $verb" -- "$kiln" "$verb" --help
done
expect 1 "nonexistent.onnx" -- "$kiln" inspect "$tmp/nonexistent.onnx"
expect 0 "Conv" -- "$kiln" inspect "$model"
expect 0 "graph written to" -- "$kiln" inspect "$model" --dot "$tmp/g.dot"
grep -q "digraph" "$tmp/g.dot" || { echo "FAIL: DOT file not written"; fails=$((fails + 1)); }

"$python" - "$tmp" <<'PY'
import sys, numpy as np
d = sys.argv[1]
np.save(f"{d}/wrong_shape.npy", np.zeros((2, 1, 7, 8), np.float32))
np.save(f"{d}/wrong_dtype.npy", np.zeros((2, 1, 8, 8), np.float64))
np.save(f"{d}/good.npy", np.zeros((2, 1, 8, 8), np.float32))
open(f"{d}/garbage.npy", "wb").write(b"not numpy at all")
PY
expect 1 "input 'image': expected f32[N,1,8,8], got shape 2x1x7x8" -- "$kiln" run "$model" --input "image=$tmp/wrong_shape.npy"
expect 1 "input 'image': expected dtype f32, got f64" -- "$kiln" run "$model" --input "image=$tmp/wrong_dtype.npy"
expect 1 "garbage.npy: not a .npy file (bad magic)" -- "$kiln" run "$model" --input "image=$tmp/garbage.npy"
expect 1 "the model has no input named 'img'" -- "$kiln" run "$model" --input "img=$tmp/good.npy"
expect 1 "input 'image' was not given" -- "$kiln" run "$model"
expect 0 "probs: f32[2x10]" -- "$kiln" run "$model" --input "$tmp/good.npy" --output-dir "$tmp/out"
[ -f "$tmp/out/probs.npy" ] || { echo "FAIL: probs.npy not written"; fails=$((fails + 1)); }
printf 'garbage' > "$tmp/bad.onnx"
expect 1 "bad.onnx" -- "$kiln" run "$tmp/bad.onnx"
expect 2 "--layout takes auto or nchw, not 'nhwc'" -- "$kiln" compile "$model" -o "$tmp/d.so" --layout nhwc
[ ! -e "$tmp/d.so" ] || { echo "FAIL: a refused --layout wrote d.so"; fails=$((fails + 1)); }
expect 0 "--layout auto|nchw" -- "$kiln" compile --help

# kiln bench --peak: the format of the line and of the JSON, never the value
# (tests do not assert speed).
expect_re() { # REGEX -- command...: exit 0 and stdout matching an extended regex
  local want="$1"; shift 2
  local out rc
  out=$("$@" 2>/dev/null); rc=$?
  if [ "$rc" -ne 0 ] || ! grep -qE -- "$want" <<<"$out"; then
    echo "FAIL: $*"; echo "  want rc=0 and /$want/"; echo "  got rc=$rc: $(head -5 <<<"$out")"
    fails=$((fails + 1))
  else
    passes=$((passes + 1))
  fi
}
expect_re '^peak: [0-9]+\.[0-9] GFLOP/s FP32 FMA \((avx512f|avx2|scalar), 1 thread\)$' -- "$kiln" bench --peak
expect_re '^peak: [0-9]+\.[0-9] GFLOP/s FP32 FMA \((avx512f|avx2|scalar), 2 threads\)$' -- "$kiln" bench --peak --threads 2
if "$kiln" bench --peak --threads 2 --json | "$python" -c '
import json, sys
p = json.loads(sys.stdin.read())
assert set(p) == {"peak_gflops", "threads", "isa"}, p
assert p["threads"] == 2 and p["isa"] in ("avx512f", "avx2", "scalar"), p
assert isinstance(p["peak_gflops"], float) and p["peak_gflops"] > 0, p
'; then passes=$((passes + 1)); else echo "FAIL: kiln bench --peak --json"; fails=$((fails + 1)); fi
expect 2 "--threads: expected a positive integer up to 256, got '0'" -- "$kiln" bench --peak --threads 0
expect 2 "--peak measures the machine and takes no model" -- "$kiln" bench --peak "$model"

# kiln bench --vs-ort: onnxruntime runs as a child (scripts/ort_bench.py
# --serve); however it fails, kiln names the model and onnxruntime, quotes
# what the child printed, exits 1 and does not hang (timeout: 124 fails).
"$kiln" compile "$model" --shape N=2 -o "$tmp/d2.so" >/dev/null 2>&1 ||
  { echo "FAIL: compile d2.so"; fails=$((fails + 1)); }
ort() { KILN_PYTHON="$1" timeout 60 "$kiln" bench "$tmp/d2.so" --vs-ort --model "$2" --runs 6; }
expect 1 "onnxruntime on $tmp/bad.onnx stopped before it was ready (exit status 1): ort_bench: onnxruntime cannot load" \
  -- ort "$python" "$tmp/bad.onnx"
expect 1 "cannot start onnxruntime for $model: $tmp/no-python: No such file" -- ort "$tmp/no-python" "$model"
# stand-ins for python that break the protocol: they ignore the script
# path and play a server that dies or talks nonsense
fake() { printf '#!/bin/sh\n%s\n' "$2" > "$tmp/$1"; chmod +x "$tmp/$1"; }
fake dies 'echo ready; read cmd; echo "lost my $cmd" >&2; exit 3'
expect 1 "onnxruntime on $model stopped during 'run 1' (exit status 3): lost my run 1" -- ort "$tmp/dies" "$model"
fake killed 'echo ready; read cmd; kill -9 $$'
expect 1 "stopped during 'run 1' (killed by signal 9" -- ort "$tmp/killed" "$model"
fake nonsense 'echo ready; read cmd; echo "{\"times_ms\": [1.0, 2.0]}"; cat >/dev/null'
expect 1 "answered 'run 1' with '{\"times_ms\": [1.0, 2.0]}' (exit status 0), it printed nothing" \
  -- ort "$tmp/nonsense" "$model"
fake mute 'echo hello'
expect 1 "said 'hello' instead of 'ready'" -- ort "$tmp/mute" "$model"
fake noquit 'echo ready; while read cmd; do [ "$cmd" = quit ] && exit 4; echo "{\"times_ms\": [1.5]}"; done'
expect 1 "onnxruntime on $model failed on 'quit' (exit status 4)" -- ort "$tmp/noquit" "$model"

echo "cli: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
