#!/usr/bin/env bash
# Runs `kiln conformance --backend BACKEND` and fails if fewer cases pass than
# the recorded floor. The floor only ever rises: raise it when kiln improves.
set -uo pipefail
kiln="$1"; backend="$2"; floor_file="$3"
floor=$(grep -E '^[0-9]+$' "$floor_file" | head -1)
out=$("$kiln" conformance --backend "$backend" --list-failures 2>&1)
line=$(printf '%s\n' "$out" | grep -E '^conformance: [0-9]+ passed' | tail -1)
if [ -z "$line" ]; then
  printf '%s\n' "$out" | tail -20
  echo "check_floor: no conformance summary line"; exit 1
fi
printf '%s\n' "$out" | grep -E '^(FAIL|UNSUPPORTED) ' | sort | head -400
echo "$line"
passed=$(echo "$line" | sed -E 's/^conformance: ([0-9]+) passed.*/\1/')
if [ "$passed" -lt "$floor" ]; then
  echo "check_floor: $passed passed, below the floor of $floor"; exit 1
fi
echo "check_floor: $passed passed (floor $floor)"
