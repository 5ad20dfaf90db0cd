#!/usr/bin/env bash
# kiln calibrate / compile --quantize static-int8 / compare on ResNet-50.
set -uo pipefail
kiln="$1"; python="$2"; dir="$3"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$python" - "$tmp" <<'PY' || exit 1
import os, sys
import numpy as np
rng = np.random.default_rng(1)
for d, n in (("data", 6), ("eval", 4)):
    os.makedirs(os.path.join(sys.argv[1], d))
    for i in range(n):
        np.save(os.path.join(sys.argv[1], d, f"input_{i}.npy"), rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
PY
cd "$tmp"
"$kiln" calibrate "$dir/model.onnx" --data data -o t1.json || exit 1
"$kiln" calibrate "$dir/model.onnx" --data data --threads 2 -o t2.json || exit 1
cmp t1.json t2.json || { echo "FAIL: tables differ between --threads 1 and 2"; diff t1.json t2.json | head; exit 1; }
"$kiln" compile "$dir/model.onnx" --quantize static-int8 --calib t1.json -o q.so || exit 1
"$kiln" compare "$dir/model.onnx" q.so --data eval | tee cmp.txt || exit 1
c=$(awk '$1 == "output" { print $4 }' cmp.txt)
awk -v c="$c" 'BEGIN { exit !(c > 0.99) }' || { echo "FAIL: static-int8 cosine $c <= 0.99"; exit 1; }
echo "ok: byte-identical tables, cosine $c"
