#!/usr/bin/env bash
# Compiles MODEL with --report --stats --verify-each and checks the report:
# every op named after --absent must be gone, every op after --present left.
# Usage: check_report.sh KILN MODEL OUT.so [--absent OP...] [--present OP...]
set -euo pipefail
kiln="$1" model="$2" so="$3"
shift 3
out="$("$kiln" compile "$model" -o "$so" --report --stats --verify-each 2>&1)"
printf '%s\n' "$out"
mode=""
status=0
for arg in "$@"; do
    case "$arg" in
    --absent|--present) mode="$arg" ;;
    *)
        # report lines: NAME  OP  HOW; match the op column exactly
        if printf '%s\n' "$out" | awk -v op="$arg" '$2 == op && ($3 == "generated" || $3 == "oneDNN" || $3 == "runtime" || $3 == "alias" || $3 == "folded") { found = 1 } END { exit !found }'; then
            [ "$mode" = --absent ] && { echo "FAIL: $arg is still in the compiled graph"; status=1; }
        else
            [ "$mode" = --present ] && { echo "FAIL: no $arg in the compiled graph"; status=1; }
        fi
        ;;
    esac
done
exit $status
