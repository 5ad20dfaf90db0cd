/*
 * runtime/src/governor.h — how many threads the next run of a session
 * takes: the session's count T, or the calling thread alone.
 *
 * Why: on a machine where another process wants one of the CPUs, every
 * parallel region's end waits for the member the scheduler set aside, a
 * time slice of milliseconds, and a run at T threads can take many times
 * what it takes on one (docs/design.md, "Threads"). Nothing in the
 * session's environment can fix libgomp's wait once it is loaded, so the
 * session chooses per run between its T threads and one.
 *
 * How: runs go at T. The fourth and fifth runs try one thread once (a
 * probe: two runs, judged by the cheaper, since the first run of a switch
 * pays for it; against T's best run so far, since a session's first runs
 * are slow), to learn what a run alone costs. After that, a run at T that
 * saw evidence of contention lets the next runs try one thread. Evidence
 * is a worker that joined a parallel region late though it should have
 * been spinning (parallel.c counts them), a run 1.5 times as costly as the
 * least of the last five at T, or a run costlier than the last one alone
 * (lateness inside oneDNN's own parallel regions is not seen).
 *
 * The choices are compared by cost (a run's time per byte of input, so
 * that runs of other sizes compare): a probe wins, and becomes the choice,
 * when it costs under 0.9 of the mean of the current choice's last runs.
 * A probe of T is judged by the mean of its two runs and ends at a run
 * that costs 1.5 times one thread's mean. Alone, the session tries T again
 * every 32 runs (16 after the first probe), doubling to 256 while T keeps
 * losing (and when T, back, loses again within 64 runs); back at T, the
 * next evidence probes one thread at once. At T, a losing probe makes the
 * next one wait twice as long (4 runs, doubling to 1024) whatever the
 * evidence, unless it beat the last run at T (T's mean still holds runs
 * from before the load: the next probe comes as soon). Being wrong costs
 * one or two slow runs in that many.
 *
 * A run that starts 2 ms or more after the last one ended (its workers
 * asleep, their vCPUs halted, its caches cold) takes the current choice
 * and teaches nothing, unless the run before it followed a pause too: an
 * application that runs now and then is judged by its runs, which are
 * alike, and one that runs in bursts by the runs after the first of each.
 *
 * The policy is this file's pure functions of the costs and evidence the
 * session hands it (tests/runtime/test_governor.c drives it with made-up
 * runs); session.c measures them.
 */
#ifndef KILN_RT_GOVERNOR_H
#define KILN_RT_GOVERNOR_H

#include <stdbool.h>
#include <stdint.h>

/* Runs whose cost the mean of the current choice is taken over. */
#define KN_GOV_WINDOW 5

typedef struct kn_gov {
    int threads;        /* the session's count T; 1: nothing to choose */
    bool fixed;         /* KN_THREADS_FIXED: always T */
    bool solo;          /* the current choice: one thread (else T) */
    bool probing;       /* the run under way tries the other choice */
    int probe_left;     /* runs of the probe still to go, this one included */
    double probe_cost;  /* one thread: the least cost of the probe's runs so far; T: their sum */
    bool evidence;      /* the last run at T saw contention */
    int64_t runs;       /* runs recorded */
    int64_t next_probe; /* the first run that may probe */
    int64_t gap_solo;   /* runs between probes of one thread (at T) */
    int64_t gap_full;   /* runs between probes of T (alone) */
    int64_t since;      /* the run at which the current choice was taken */
    double last_full;   /* the cost of the last run at T that was not a probe */
    double solo_cost;   /* the cost of the last run alone (0: none yet) */
    bool explored;      /* one thread has been tried (GOV_EXPLORE_AT) */
    bool paused;        /* the run under way follows a pause */
    bool skip;          /* ... and the run before it did not: it teaches nothing */
    double cost[KN_GOV_WINDOW]; /* the current choice's last costs, a ring */
    int ncost, at;
    int64_t solo_runs; /* runs that went on one thread, probes included */
} kn_gov;

/* A governor for a session of `threads` threads; fixed: never choose. */
void kn_gov_init(kn_gov *g, int threads, bool fixed);
/* The thread count of the run about to start: g->threads or 1. idle_ns:
 * the time since the session's last run ended (< 0: no run yet). */
int kn_gov_begin(kn_gov *g, int64_t idle_ns);
/* Records the run that kn_gov_begin started: its cost (seconds per byte of
 * input, or any measure in which a cheaper run is smaller; < 0: not
 * measured, e.g. a failed run) and whether it saw contention. */
void kn_gov_end(kn_gov *g, double cost, bool contended);

#endif
