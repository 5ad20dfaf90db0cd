/*
 * tools/kiln/prof_report.h — what `kiln profile` measured, and the files it
 * writes from it (prof_files.c): a Chrome trace and an SVG of the arena.
 * Private to the profile verb.
 */
#ifndef KILN_TOOLS_PROF_REPORT_H
#define KILN_TOOLS_PROF_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/abi.h"
#include "peak.h"

typedef struct kn_prof {
    const char *path;      /* the artifact or model profiled */
    const kn_meta *m;      /* its steps and buffers (owned by the artifact) */
    int threads, runs, warmup;
    const int64_t *ns;     /* runs x m->n_steps step times, in run order */
    const double *step_ms; /* median over the runs, per step */
    const int64_t *live;   /* arena bytes live during each step */
    const char *const *impl; /* per step: what runs it (kn_session_step_impl), NULL if not oneDNN's record */
    double total_ms;       /* sum of step_ms */
    double run_ms;         /* median of the uninstrumented kn_session_run, interleaved with the profiled runs */
    bool have_peak;
    kn_peak peak;
} kn_prof;

/* Arena bytes live during each step (out[n_steps], from the buffers). */
void kn_prof_live_bytes(const kn_meta *m, int64_t *out);

/* Writes a Chrome trace-event JSON file (opens in Perfetto and
 * chrome://tracing): one complete event per step per run, a counter of the
 * arena bytes live. Atomic: a temporary file renamed into place. */
int kn_prof_write_trace(const kn_prof *p, const char *path);

/* Writes an SVG of the arena over time: x = step, y = arena offset, one
 * rectangle per buffer over its live range, with its name and size in a
 * <title>. Atomic like the trace. */
int kn_prof_write_svg(const kn_prof *p, const char *path);

#endif
