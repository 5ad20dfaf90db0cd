#!/usr/bin/env bash
# tests/passes/run_chain.sh KILN PYTHON DIR OPT — compiles DIR/model.onnx
# (gen_chain.py) at -OOPT, runs the artifact on DIR/input_x.npy and compares
# with onnxruntime's output (tests/models/compare.py). Prints the compile
# time for the record; asserts none.
set -euo pipefail
kiln=$1 python=$2 dir=$3 opt=$4
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(mktemp -d "$dir/O$opt.XXXXXX")"
trap 'rm -rf "$out"' EXIT
start=$(date +%s.%N)
"$kiln" compile "$dir/model.onnx" -o "$out/model.so" "-O$opt"
end=$(date +%s.%N)
echo "kiln compile -O$opt: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s"
"$kiln" run "$out/model.so" --input "x=$dir/input_x.npy" --output-dir "$out"
"$python" "$here/../models/compare.py" "$dir" "$out"
