/*
 * tools/kiln/omp_spin.c — bounded spinning for the threads of the kiln
 * program (libgomp's, which oneDNN's primitives and kiln's generated loops
 * share).
 *
 * After each parallel region libgomp's workers spin before they sleep: by
 * default GOMP_SPINCOUNT = 300,000 pauses, milliseconds on these CPUs. On a
 * quiet machine that costs nothing; beside another busy process it keeps
 * every worker runnable between regions, so each region's end waits for a
 * worker the scheduler has set aside, and a model runs 4 to 100 times
 * slower. onnxruntime's pool spins briefly, then sleeps.
 *
 * libgomp reads its policy once, in its initializer, before the program's
 * own code runs (even a .preinit_array hook is too early: the C library's
 * initializer then resets the environment to the one the process started
 * with). So the kiln program starts itself again, once, with
 * GOMP_SPINCOUNT=KILN_GOMP_SPINCOUNT, unless the user chose a policy
 * (OMP_WAIT_POLICY or GOMP_SPINCOUNT set): about a millisecond at start.
 * Programs that embed libkiln_rt set the variable in their own environment
 * (docs/design.md, "Threads"). Child processes (the onnxruntime peer of
 * `kiln bench --vs-ort`) inherit it; onnxruntime has its own pool and does
 * not read it.
 */
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"

void kn_cli_bound_spinning(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", KN_CLI_GOMP_SPINCOUNT, 0)) return;
    execv("/proc/self/exe", argv);
    /* no /proc, or exec refused: run as started, with libgomp's default */
    unsetenv("GOMP_SPINCOUNT");
}
