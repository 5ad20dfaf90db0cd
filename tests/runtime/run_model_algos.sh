#!/usr/bin/env bash
# A model test (tests/models) with each convolution algorithm forced: the
# generated model is compiled once, then run through libkiln_rt under every
# KILN_CONV_ALGO value (runtime/src/config.h), each run's outputs compared
# with onnxruntime's at 1e-5 (tests/models/compare.py).
# Usage: run_model_algos.sh KILN PYTHON MODEL_DIR
set -euo pipefail
kiln="$1" python="$2" dir="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -f "$dir/model.onnx" ]; then
    echo "run_model_algos: $dir/model.onnx missing (the generate fixture failed?)" >&2
    exit 1
fi
args=()
for f in "$dir"/input_*.npy; do
    [ -e "$f" ] || continue
    name="$(basename "$f" .npy)"
    args+=(--input "${name#input_}=$f")
done
out="$(mktemp -d "$dir/kiln_algos.XXXXXX")"
trap 'rm -rf "$out"' EXIT
"$kiln" compile "$dir/model.onnx" -o "$out/model.so"
for algo in auto winograd pointwise im2col xdw matmul direct dnnl; do
    echo "== KILN_CONV_ALGO=$algo"
    mkdir -p "$out/$algo"
    KILN_CONV_ALGO="$algo" "$kiln" run "$out/model.so" "${args[@]}" --output-dir "$out/$algo"
    "$python" "$here/../models/compare.py" "$dir" "$out/$algo" --rtol 1e-5 --atol-scale 1e-5
done
