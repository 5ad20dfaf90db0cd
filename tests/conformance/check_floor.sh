#!/usr/bin/env bash
# Runs `kiln conformance --backend BACKEND` and checks it against the list of
# cases that passed before (PASSING_FILE, one case name a line). Fails on
#   - any case of the list that does not pass now (a regression is never
#     hidden by another case starting to pass in the same change),
#   - any FAIL (a case that ran and gave a wrong answer or crashed),
#   - a non-zero exit status of kiln conformance or no summary line.
# Cases that pass but are not listed are named; the list only ever grows:
# KILN_UPDATE_FLOOR=1 adds them (never removes one).
#
# Usage: check_floor.sh KILN BACKEND PASSING_FILE
set -euo pipefail
kiln="$1"; backend="$2"; list_file="$3"

rc=0
out=$("$kiln" conformance --backend "$backend" --list-failures --list-passes 2>&1) || rc=$?
line=$(printf '%s\n' "$out" | grep -E '^conformance: [0-9]+ passed' | tail -1 || true)
if [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -20
    echo "check_floor: no conformance summary line (exit status $rc)"
    exit 1
fi
printf '%s\n' "$out" | grep -E '^(FAIL|UNSUPPORTED) ' | sort | head -400 || true

now=$(mktemp)
trap 'rm -f "$now"' EXIT
printf '%s\n' "$out" | sed -nE 's/^PASS ([^ ]+).*/\1/p' | sort -u > "$now"
lost=$(grep -vE '^(#|$)' "$list_file" | sort -u | comm -23 - "$now")
new=$(grep -vE '^(#|$)' "$list_file" | sort -u | comm -13 - "$now")
fails=$(printf '%s\n' "$out" | grep -cE '^FAIL ' || true)

echo "$line"
status=0
if [ -n "$lost" ]; then
    echo "check_floor: $(printf '%s\n' "$lost" | wc -l) case(s) passed before and do not pass now:"
    printf '  %s\n' $lost
    status=1
fi
if [ "$fails" -ne 0 ]; then
    echo "check_floor: $fails case(s) FAIL (listed above)"
    status=1
fi
if [ "$rc" -ne 0 ]; then
    echo "check_floor: kiln conformance exited with status $rc"
    status=1
fi
if [ -n "$new" ]; then
    if [ "${KILN_UPDATE_FLOOR:-0}" = 1 ]; then
        printf '%s\n' $new >> "$list_file"
        echo "check_floor: added $(printf '%s\n' "$new" | wc -l) newly passing case(s) to $list_file"
    else
        echo "check_floor: $(printf '%s\n' "$new" | wc -l) case(s) pass that $list_file does not list yet" \
             "(KILN_UPDATE_FLOOR=1 adds them):"
        printf '  %s\n' $new
    fi
fi
[ "$status" -eq 0 ] && echo "check_floor: every one of the $(grep -cvE '^(#|$)' "$list_file") listed cases passes"
exit "$status"
