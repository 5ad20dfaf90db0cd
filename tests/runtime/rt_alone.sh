#!/usr/bin/env bash
# libkiln_rt alone (rt_alone.c): compile the digits sample with the kiln
# binary, check that the test program links libkiln_rt and no library of
# the compiler (LLVM, protobuf-c), then run it on the held-out data.
# Usage: rt_alone.sh KILN RT_ALONE DIGITS_DIR WORK_DIR
set -euo pipefail
kiln="$1" prog="$2" digits="$3" work="$4"
mkdir -p "$work"
"$kiln" compile "$digits/digits.onnx" --shape N=1 -o "$work/digits.so"
needed="$(readelf -d "$prog" | awk '/NEEDED/ { print $NF }')"
echo "rt_alone links: $(echo $needed)"
if ! grep -q 'libkiln_rt' <<<"$needed"; then echo "rt_alone: FAIL: does not link libkiln_rt"; exit 1; fi
if grep -Eiq 'LLVM|protobuf' <<<"$needed"; then echo "rt_alone: FAIL: links a compiler library"; exit 1; fi
"$prog" "$work/digits.so" "$digits/heldout_images.npy" "$digits/heldout_labels.npy"
