#!/usr/bin/env bash
# The last lines of `make test`: how many tests passed, failed and were
# skipped, and for each skipped test why (its "SKIP: reason" lines, see
# tests/test_skip.h), so that work a machine could not do is never mistaken
# for work that passed.
#
# Usage: summary.sh CTEST_STDOUT_FILE BUILD_DIR
set -euo pipefail
out="$1"; build="$2"
log="$build/Testing/Temporary/LastTest.log"

# ctest's per-test lines: "  3/81 Test  #3: ir/test_ir_build ......   Passed    0.05 sec"
results=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.* *(\**)([A-Za-z][A-Za-z ]*[a-z])\b.*/\1\t\3/p' "$out" || true)
passed=$(printf '%s\n' "$results" | awk -F'\t' '$2 == "Passed"' | grep -c . || true)
skipped=$(printf '%s\n' "$results" | awk -F'\t' '$2 == "Skipped"' | cut -f1 || true)
failed=$(printf '%s\n' "$results" | awk -F'\t' 'NF == 2 && $2 != "Passed" && $2 != "Skipped"' || true)
n_skipped=$(printf '%s\n' "$skipped" | grep -c . || true)
n_failed=$(printf '%s\n' "$failed" | grep -c . || true)

echo
echo "== make test: $passed passed, $n_failed failed, $n_skipped skipped"
if [ "$n_failed" -gt 0 ]; then
    printf '%s\n' "$failed" | while IFS=$'\t' read -r name how; do echo "  FAILED  $name ($how)"; done
fi
if [ "$n_skipped" -gt 0 ]; then
    for name in $skipped; do
        # the SKIP: lines of this test's output in ctest's log, each reason once
        why=$(awk -v t="\"$name\" start time:" '
                index($0, t) == 1 { on = 1; next }
                on && /^<end of output>/ { exit }
                on && /^SKIP: / { sub(/^SKIP: /, ""); if (!seen[$0]++) print }' "$log" 2>/dev/null || true)
        echo "  SKIPPED $name: ${why:-no reason given}" | head -1
        printf '%s\n' "$why" | tail -n +2 | sed 's/^/          also: /'
    done
fi
