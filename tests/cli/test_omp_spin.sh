#!/usr/bin/env bash
# The kiln program bounds libgomp's spinning (tools/kiln/omp_spin.c): a verb
# that runs models starts the program again once with GOMP_SPINCOUNT set,
# unless the environment chose a wait policy; other verbs do not. Observed
# through a preloaded library whose initializer, which runs before libgomp's
# reads the environment, prints GOMP_SPINCOUNT as each process starts.
# Usage: test_omp_spin.sh KILN CC SANITIZE
set -uo pipefail
kiln="$1" cc="$2" sanitize="${3:-OFF}"
case "$sanitize" in ON|on|1|TRUE|true)
  echo "omp_spin: skipped in a sanitizer build (the sanitizer runtime must come first in LD_PRELOAD)"; exit 0;;
esac
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat > "$tmp/show.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void show(void)
{
    const char *v = getenv("GOMP_SPINCOUNT");
    fprintf(stderr, "[spin] %s\n", v ? v : "unset");
}
C
"$cc" -shared -fPIC -o "$tmp/show.so" "$tmp/show.c" || fail "building the preload library"
spins() { env "$@" LD_PRELOAD="$tmp/show.so" "$kiln" run --help 2>&1 >/dev/null | grep '^\[spin\]' | tr '\n' ' '; }
got=$(spins -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY)
[ "$got" = "[spin] unset [spin] 10000 " ] || fail "no policy set: expected one restart with 10000, got '$got'"
got=$(spins -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive)
[ "$got" = "[spin] unset " ] || fail "OMP_WAIT_POLICY set: expected no restart, got '$got'"
got=$(spins -u OMP_WAIT_POLICY GOMP_SPINCOUNT=7)
[ "$got" = "[spin] 7 " ] || fail "GOMP_SPINCOUNT set: expected it kept, got '$got'"
got=$(env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY LD_PRELOAD="$tmp/show.so" "$kiln" inspect --help 2>&1 >/dev/null \
      | grep '^\[spin\]' | tr '\n' ' ')
[ "$got" = "[spin] unset " ] || fail "kiln inspect (runs no model): expected no restart, got '$got'"
echo "omp_spin: ok"
