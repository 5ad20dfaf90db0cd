#!/usr/bin/env bash
# tests/fuzz/run_short.sh SRC FUZZ_BUILD TARGET SECONDS — the ctest side of
# fuzzing (tests/fuzz/fuzz.cmake): builds the fuzz targets in FUZZ_BUILD
# once (the tests of all targets share it; a lock keeps their builds from
# running at once), then runs scripts/fuzz on TARGET for SECONDS. Exits 77
# (ctest: SKIPPED) when clang or its libFuzzer runtime is missing.
set -euo pipefail
src=$1 build=$2 target=$3 seconds=$4

clang=$(command -v clang || true)
if [ -z "$clang" ]; then
    echo "SKIPPED: no clang, so no libFuzzer" >&2
    exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
if ! "$clang" -fsanitize=fuzzer,address "$probe/p.c" -o "$probe/p" 2>"$probe/err"; then
    echo "SKIPPED: $clang cannot link a libFuzzer target:" >&2
    cat "$probe/err" >&2
    exit 77
fi

mkdir -p "$build"
(
    flock 9
    if [ ! -f "$build/build.ninja" ] &&
        ! cmake -S "$src" -B "$build" -G Ninja -DCMAKE_C_COMPILER="$clang" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DKILN_FUZZ=ON -DKILN_SANITIZE=ON -DKILN_TESTS=OFF >"$build/configure.log" 2>&1; then
        cat "$build/configure.log" >&2
        exit 1
    fi
    if ! cmake --build "$build" --target fuzz_all --parallel 2 >"$build/build.log" 2>&1; then
        tail -50 "$build/build.log" >&2
        exit 1
    fi
) 9>"$build.lock"
exec "$src/scripts/fuzz" "$build" "$seconds" "$target"
