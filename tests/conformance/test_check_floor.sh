#!/usr/bin/env bash
# check_floor.sh against stand-in `kiln conformance` runs: it must fail when a
# listed case stops passing even though another case started to pass (the
# pass count stays the same), on a FAIL line, on a non-zero exit and on a
# missing summary, and pass (and only grow the list) otherwise.
set -euo pipefail
check="$(dirname "$0")/check_floor.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# fake NAME STATUS LINE...: a stand-in kiln printing LINEs and exiting STATUS
fake() {
    local f="$tmp/$1" rc="$2"
    shift 2
    { echo '#!/bin/sh'; for l in "$@"; do printf "echo '%s'\n" "$l"; done; echo "exit $rc"; } > "$f"
    chmod +x "$f"
}
expect() { # expect pass|fail FAKE
    local want="$1" fk="$2" rc=0
    printf 'a\nb\n' > "$tmp/list"
    "$check" "$tmp/$fk" cpu "$tmp/list" > "$tmp/out" 2>&1 || rc=$?
    if { [ "$want" = pass ] && [ "$rc" -ne 0 ]; } || { [ "$want" = fail ] && [ "$rc" -eq 0 ]; }; then
        cat "$tmp/out"
        echo "test_check_floor: $fk: expected check_floor to $want (status $rc)"
        exit 1
    fi
    echo "ok: $fk -> $want"
}
sum2='conformance: 2 passed (0 ran only runtime kernels, 0 folded away), 0 failed, 1 unsupported (of 3)'
fake ok 0 'PASS a compiled' 'PASS b compiled' "$sum2"
fake swapped 0 'PASS a compiled' 'PASS c compiled' 'UNSUPPORTED b: gone' "$sum2"
fake failed 0 'PASS a compiled' 'PASS b compiled' 'FAIL c: wrong' \
    'conformance: 2 passed (0 ran only runtime kernels, 0 folded away), 1 failed, 0 unsupported (of 3)'
fake status 3 'PASS a compiled' 'PASS b compiled' "$sum2"
fake nosummary 0 'PASS a compiled' 'PASS b compiled'
expect pass ok
expect fail swapped
expect fail failed
expect fail status
expect fail nosummary
# newly passing cases are added only on request, and nothing is removed
fake grown 0 'PASS a compiled' 'PASS b compiled' 'PASS c compiled' \
    'conformance: 3 passed (0 ran only runtime kernels, 0 folded away), 0 failed, 0 unsupported (of 3)'
printf 'a\nb\n' > "$tmp/list"
"$check" "$tmp/grown" cpu "$tmp/list" > /dev/null
[ "$(cat "$tmp/list")" = "$(printf 'a\nb')" ] || { echo "test_check_floor: the list changed without KILN_UPDATE_FLOOR"; exit 1; }
KILN_UPDATE_FLOOR=1 "$check" "$tmp/grown" cpu "$tmp/list" > /dev/null
[ "$(cat "$tmp/list")" = "$(printf 'a\nb\nc')" ] || { echo "test_check_floor: KILN_UPDATE_FLOOR=1 did not add c"; exit 1; }
echo "test_check_floor: all cases behave"
