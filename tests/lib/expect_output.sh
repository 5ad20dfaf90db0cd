#!/usr/bin/env bash
# Runs a command and passes only if it exits 0 AND its output (stdout and
# stderr together) matches a Perl regex over the whole text (so `\n` and
# `(?s).*` span lines).
#
# Why not ctest's PASS_REGULAR_EXPRESSION: with it ctest ignores the exit
# status, so a command that printed the right line and then failed (a leak
# found by LeakSanitizer at exit, an error after the report, a script that
# printed its result and exited 7) still passed.
#
# Usage: expect_output.sh REGEX COMMAND [ARGS...]
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 REGEX COMMAND [ARGS...]" >&2
    exit 2
fi
# a newline written into the regex (CMake turns "\n" into one) means \n
regex="${1//$'\n'/\\n}"
shift
out="$("$@" 2>&1)"
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne 0 ]; then
    echo "expect_output: '$1' exited with status $rc" >&2
    exit 1
fi
if ! printf '%s\n' "$out" | grep -Pzq -- "$regex"; then
    echo "expect_output: the output of '$1' does not match: $regex" >&2
    exit 1
fi
