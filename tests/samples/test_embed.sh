#!/usr/bin/env bash
# Installs kiln into a scratch prefix, compiles the digits model, builds the
# sample app with CMake (find_package) and with pkg-config, and runs both.
set -euo pipefail
build="$1"; src="$2"
# a sanitizer build of libkiln_rt needs the app built with the same runtime
san=""
case "${3:-OFF}" in ON|on|1|TRUE|true) san="-fsanitize=address,undefined" ;; esac
work="$build/sample-test"
rm -rf "$work"; mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
"$prefix/bin/kiln" compile "$src/samples/digits/digits.onnx" --shape N=1 --name digits \
    -o "$work/digits.so" --emit-header "$work/digits.h"
data="$src/samples/digits"

cmake -S "$src/samples/embed" -B "$work/cmake-build" -G Ninja -Dkiln_DIR="$prefix/lib/cmake/kiln" \
    -DKILN_ARTIFACT_DIR="$work" -DCMAKE_C_FLAGS="$san" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
out1=$("$work/cmake-build/embed_digits" "$work/digits.so" "$data/heldout_images.npy" "$data/heldout_labels.npy")
echo "$out1"

PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -s -C "$src/samples/embed" ARTIFACT_DIR="$work" OUT="$work/embed_pc" \
    CFLAGS="-std=c11 -O2 -Wall -Wextra $san" LDFLAGS="$san"
out2=$("$work/embed_pc" "$work/digits.so" "$data/heldout_images.npy" "$data/heldout_labels.npy")
echo "$out2"

for out in "$out1" "$out2"; do
  grep -Eq "embed: (29[0-9]|300)/300 correct" <<<"$out" || { echo "test_embed: accuracy line missing or too low"; exit 1; }
done
echo "test_embed: both builds ran"
