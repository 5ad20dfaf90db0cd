/*
 * tools/kiln/forkpool.h — runs jobs 0..n-1 each in a forked child, at most
 * `jobs` at once, so that a crash, an abort or a hang in one job is that
 * job's result and never the end of the run (`kiln difftest`; `kiln
 * conformance` follows the same pattern).
 *
 * The child runs `child(index, fd, ctx)`, writes its answer (a short text)
 * to fd and returns; the pool then ends it with exit(0) (not _exit: under
 * ASan the leak check runs at exit and a leak becomes a non-zero status).
 * The parent reads each child's answer through a pipe and calls
 * `done(result, ctx)` once per job, in the order the jobs finish:
 *
 *     kn_forkpool p = {.jobs = 4, .timeout_s = 120, .child = run_one,
 *                      .done = report_one, .ctx = &state};
 *     if (kn_forkpool_run(&p, n_cases)) ...;   // only a failed fork/pipe
 *
 * A child still running timeout_s seconds after its start is killed with
 * SIGKILL and reported as KN_FORKPOOL_TIMEOUT. The pipe is close-on-exec,
 * so a program the child spawns (the linker) never keeps it open.
 * stdio buffers are flushed before every fork, so nothing is printed twice.
 */
#ifndef KILN_TOOLS_FORKPOOL_H
#define KILN_TOOLS_FORKPOOL_H

#include <stddef.h>

/* How a child ended. */
typedef enum kn_forkpool_end {
    KN_FORKPOOL_EXITED,   /* exit status `code` (0: normal) */
    KN_FORKPOOL_SIGNALED, /* killed by signal `code` */
    KN_FORKPOOL_TIMEOUT,  /* killed by the pool after timeout_s seconds */
} kn_forkpool_end;

typedef struct kn_forkpool_result {
    int index;           /* the job */
    kn_forkpool_end end;
    int code;            /* exit status or signal number */
    const char *answer;  /* what the child wrote, NUL-terminated (valid during done) */
    size_t answer_len;
} kn_forkpool_result;

typedef struct kn_forkpool {
    int jobs;      /* children at once (< 1 is taken as 1) */
    int timeout_s; /* per job; <= 0: none */
    /* In the parent, just before job index is forked (may be NULL). */
    void (*before)(int index, void *ctx);
    /* In the child: does the job, writes its answer to fd. */
    void (*child)(int index, int fd, void *ctx);
    /* In the parent, once per job as it ends. */
    void (*done)(const kn_forkpool_result *r, void *ctx);
    void *ctx;
} kn_forkpool;

/* Runs jobs 0..n-1. Returns 0, or -1 (errno set) if a pipe or fork could
 * not be made; the children already started are then waited for first. */
int kn_forkpool_run(const kn_forkpool *p, int n);

/* "SIGSEGV", "SIGABRT", ...; "signal N" for others (buf holds that text). */
const char *kn_forkpool_signal_name(int sig, char *buf, size_t len);

#endif
