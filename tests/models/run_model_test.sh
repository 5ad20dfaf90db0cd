#!/usr/bin/env bash
# One model test: run kiln on a generated model's fixed inputs and compare its
# outputs with onnxruntime's (see gen_models.py, compare.py).
# Usage: run_model_test.sh KILN PYTHON MODEL_DIR [--compiled] [extra kiln run args...]
# With --compiled the model is first compiled to an artifact (kiln compile)
# and the artifact is run through libkiln_rt instead of the evaluator.
set -euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 KILN PYTHON MODEL_DIR [kiln run args...]" >&2
    exit 2
fi
kiln="$1" python="$2" dir="$3"
shift 3
compiled=0
if [ "${1:-}" = "--compiled" ]; then compiled=1; shift; fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ ! -f "$dir/model.onnx" ]; then
    echo "run_model_test: $dir/model.onnx missing (the generate fixture failed?)" >&2
    exit 1
fi
args=()
for f in "$dir"/input_*.npy; do
    [ -e "$f" ] || continue
    name="$(basename "$f" .npy)"
    args+=(--input "${name#input_}=$f")
done

out="$(mktemp -d "$dir/kiln_out.XXXXXX")"
trap 'rm -rf "$out"' EXIT
target="$dir/model.onnx"
if [ "$compiled" = 1 ]; then
    cstart=$(date +%s.%N)
    "$kiln" compile "$dir/model.onnx" -o "$out/model.so" --emit-header "$out/model.h"
    cend=$(date +%s.%N)
    echo "kiln compile: $(awk -v a="$cstart" -v b="$cend" 'BEGIN { printf "%.2f", b - a }') s," \
         "artifact $(stat -c %s "$out/model.so") bytes"
    target="$out/model.so"
fi
start=$(date +%s.%N)
"$kiln" run "$target" "${args[@]}" --output-dir "$out" "$@"
end=$(date +%s.%N)
echo "kiln run: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }') s"
"$python" "$here/compare.py" "$dir" "$out"
