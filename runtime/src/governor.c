/*
 * runtime/src/governor.c — the per-run choice between a session's threads
 * and the calling thread alone (governor.h says why and how).
 */
#include "governor.h"

#include <string.h>

/* A probe becomes the choice when it costs under this share of the
 * current choice's mean: a margin, so that two choices that cost about
 * the same do not take turns on noise. */
#define GOV_WIN 0.9
/* Runs between probes of one thread while running at T (after a probe
 * that lost: doubled, up to the maximum), and of T while running alone. */
#define GOV_GAP_SOLO 4
#define GOV_GAP_SOLO_MAX 1024
#define GOV_GAP_FULL 32
#define GOV_GAP_FULL_MAX 256
/* Runs in a probe. A probe of one thread is judged by the cheaper: the
 * first run of a switch pays for it once (primitives built for one thread
 * run for the first time), 16 ms for MobileNetV2's 7 ms run alone beside a
 * busy process. A probe of T by their mean: a run after a pause wakes
 * sleeping workers and costs T more than one thread, the next does not. */
#define GOV_PROBE_RUNS 2
/* A run at T that costs this many times the least of the last runs counts
 * as evidence of contention. */
#define GOV_JUMP 1.5
/* The run at which one thread is tried once whatever the evidence, so that
 * a session started on a loaded machine (no quick runs at T to compare
 * with, and lateness inside oneDNN's regions unseen) learns what a run
 * alone costs: from then on a run at T that costs more is evidence. */
#define GOV_EXPLORE_AT 3
/* A run of a probe of T this many times the cost of one thread's mean has
 * lost: the probe ends there (under load each such run costs a time slice
 * or more). */
#define GOV_LOST 1.5
/* Runs to the first probe of T after the first probe went alone: the
 * session's first runs may have met a passing load (a process starting
 * beside it: onnxruntime's pool spinning after its warm-up in `kiln bench
 * --vs-ort`), which should not keep it alone for long; but under a steady
 * load every probe of T costs a slow run, and at 8 the first 43 runs of
 * the interleaved bench held two (audio_rnn's p90 6x its median). */
#define GOV_GAP_EXPLORED 16
/* A run that starts this long after the last one ended follows a pause:
 * the workers have stopped spinning and gone to sleep (libgomp spins for
 * a few milliseconds), and on a virtual machine their idle vCPUs have been
 * halted. Such a run at T pays to wake them in its first regions, and its
 * caches are cold: MobileNetV2-qdq on 2 threads takes 2.5-6 ms after 100
 * ms idle against 1.5 ms back to back, while one thread takes 3 ms either
 * way. The first run after a pause teaches the governor nothing (its cost
 * would make T look contended and costly); a session whose every run
 * follows a pause (an application that runs now and then) learns from
 * all but its first, which compare with each other. */
#define GOV_PAUSE_NS 2000000

void kn_gov_init(kn_gov *g, int threads, bool fixed)
{
    memset(g, 0, sizeof *g);
    g->threads = threads < 1 ? 1 : threads;
    g->fixed = fixed;
    g->gap_solo = GOV_GAP_SOLO;
    g->gap_full = GOV_GAP_FULL;
    g->since = -2 * GOV_GAP_FULL; /* no T taken back from a probe yet: no doubled gap */
}

static bool chooses(const kn_gov *g) { return g->threads > 1 && !g->fixed; }

int kn_gov_begin(kn_gov *g, int64_t idle_ns)
{
    if (!chooses(g)) return g->threads;
    bool paused = idle_ns >= GOV_PAUSE_NS;
    g->skip = paused && !g->paused;
    g->paused = paused;
    if (g->skip) return g->solo != g->probing ? 1 : g->threads; /* the current choice, or the probe's */
    /* a probe needs two runs of the current choice to compare with; alone,
     * T is tried on a schedule; at T, one thread only on evidence. A probe
     * lasts GOV_PROBE_RUNS runs (probe_left counts them down). */
    bool explore = !g->explored && g->runs >= GOV_EXPLORE_AT;
    if (!g->probing && g->runs >= g->next_probe && g->ncost >= 2 && (g->solo || g->evidence || explore)) {
        g->probing = true;
        g->probe_left = GOV_PROBE_RUNS;
        g->probe_cost = -1;
    }
    return g->solo != g->probing ? 1 : g->threads;
}

static void push(kn_gov *g, double cost)
{
    g->cost[g->at] = cost;
    g->at = (g->at + 1) % KN_GOV_WINDOW;
    if (g->ncost < KN_GOV_WINDOW) g->ncost++;
}

/* The mean, not the median: under contention a choice's runs are often
 * either quick or a time slice slower (0.6 or 8 ms for the same model), and
 * the mean is what the slow ones cost a user. */
static double mean(const kn_gov *g)
{
    double sum = 0;
    for (int i = 0; i < g->ncost; i++) sum += g->cost[i];
    return sum / g->ncost;
}

static double least(const kn_gov *g)
{
    double m = g->cost[0];
    for (int i = 1; i < g->ncost; i++) m = g->cost[i] < m ? g->cost[i] : m;
    return m;
}

static int64_t doubled(int64_t gap, int64_t max) { return gap * 2 < max ? gap * 2 : max; }

void kn_gov_end(kn_gov *g, double cost, bool contended)
{
    if (!chooses(g)) return;
    bool probe = g->probing;
    if (g->solo != probe) g->solo_runs++;
    int64_t run = g->runs++;
    /* the first run after a pause (GOV_PAUSE_NS): nothing, and a probe under
     * way goes on at the next run */
    if (g->skip) return;
    /* the first run pays for first touches (pages, caches, threads
     * created): neither a cost nor evidence. A failed run: nothing (a
     * probe is dropped). */
    if (run == 0 || cost < 0) {
        g->probing = false;
        return;
    }
    if (!probe) {
        /* a run at T this much slower than its best recent one is evidence
         * too: a late worker inside oneDNN's parallel regions is not seen */
        if (!g->solo) {
            g->evidence = contended || (g->ncost >= 2 && cost > GOV_JUMP * least(g)) ||
                          (g->solo_cost > 0 && cost > g->solo_cost);
            g->last_full = cost;
        } else {
            g->solo_cost = cost;
        }
        push(g, cost);
        return;
    }
    /* one thread by its cheaper run (the first pays for the switch), T by
     * the mean of its runs (GOV_PROBE_RUNS); a run of T that has clearly
     * lost ends its probe (GOV_LOST) */
    if (g->solo) {
        g->probe_cost = g->probe_cost < 0 ? cost : g->probe_cost + cost; /* the sum, then the mean */
    } else {
        if (g->probe_cost < 0 || cost < g->probe_cost) g->probe_cost = cost;
        g->solo_cost = cost;
    }
    if (--g->probe_left > 0 && !(g->solo && cost >= GOV_LOST * mean(g))) return;
    g->probing = false;
    g->evidence = false;
    /* the first probe, which no evidence asked for, against T's best run:
     * a session's first runs at T are slow (pages touched, caches cold) and
     * would make one thread look better on a quiet machine */
    bool first = !g->explored;
    double against = first ? least(g) : mean(g);
    g->explored = true;
    cost = g->solo ? g->probe_cost / (GOV_PROBE_RUNS - g->probe_left) : g->probe_cost;
    if (cost < GOV_WIN * against) { /* the probe's choice wins */
        g->solo = !g->solo;
        g->ncost = g->at = 0;
        push(g, cost);
        int64_t stint = run - g->since;
        g->since = run;
        if (!g->solo) { /* back at T: the next evidence may probe one thread at once */
            g->gap_solo = GOV_GAP_SOLO;
            g->next_probe = run + 1;
            return;
        }
        /* alone: T soon after the first probe (GOV_GAP_EXPLORED); twice as
         * late as last time when T, back from a probe, lost again within
         * two gaps (its win was luck: its runs are quick or slow by turns) */
        g->gap_full = first                      ? GOV_GAP_EXPLORED
                      : stint < 2 * GOV_GAP_FULL ? doubled(g->gap_full, GOV_GAP_FULL_MAX)
                                                 : GOV_GAP_FULL;
    } else if (g->solo) { /* T lost */
        g->gap_full = doubled(g->gap_full, GOV_GAP_FULL_MAX);
    } else if (!first && cost >= GOV_WIN * g->last_full) { /* one thread lost */
        g->gap_solo = doubled(g->gap_solo, GOV_GAP_SOLO_MAX);
    } else {
        /* the first probe, which no evidence asked for, or one that beat the
         * last run at T but not T's mean, which still holds runs from before
         * the load: the next may come soon */
        g->next_probe = run + 1 + GOV_GAP_SOLO;
        return;
    }
    g->next_probe = run + 1 + (g->solo ? g->gap_full : g->gap_solo);
}
