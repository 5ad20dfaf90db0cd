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
#define GOV_GAP_FULL 16
#define GOV_GAP_FULL_MAX 256

void kn_gov_init(kn_gov *g, int threads, bool fixed)
{
    memset(g, 0, sizeof *g);
    g->threads = threads < 1 ? 1 : threads;
    g->fixed = fixed;
    g->gap_solo = GOV_GAP_SOLO;
    g->gap_full = GOV_GAP_FULL;
}

static bool chooses(const kn_gov *g) { return g->threads > 1 && !g->fixed; }

int kn_gov_begin(kn_gov *g)
{
    if (!chooses(g)) return g->threads;
    /* a probe needs two runs of the current choice to compare with; alone,
     * T is tried on a schedule; at T, one thread only on evidence */
    g->probing = g->runs >= g->next_probe && g->ncost >= 2 && (g->solo || g->evidence);
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

static int64_t doubled(int64_t gap, int64_t max) { return gap * 2 < max ? gap * 2 : max; }

void kn_gov_end(kn_gov *g, double cost, bool contended)
{
    if (!chooses(g)) return;
    bool probe = g->probing;
    g->probing = false;
    if (g->solo != probe) g->solo_runs++;
    int64_t run = g->runs++;
    /* the first run pays for first touches (pages, caches, threads
     * created): neither a cost nor evidence. A failed run: nothing. */
    if (run == 0 || cost < 0) return;
    if (!probe) {
        push(g, cost);
        if (!g->solo) g->evidence = contended;
        return;
    }
    g->evidence = false;
    if (cost < GOV_WIN * mean(g)) { /* the probe's choice wins */
        g->solo = !g->solo;
        g->ncost = g->at = 0;
        push(g, cost);
        /* back alone soon after T won a probe: T's win was luck (its runs
         * are quick or slow by turns), so T waits twice as long as last time */
        if (g->solo) g->gap_full = run - g->since < 2 * GOV_GAP_FULL ? doubled(g->gap_full, GOV_GAP_FULL_MAX)
                                                                     : GOV_GAP_FULL;
        else g->gap_solo = GOV_GAP_SOLO;
        g->since = run;
    } else if (g->solo) {
        g->gap_full = doubled(g->gap_full, GOV_GAP_FULL_MAX);
    } else {
        g->gap_solo = doubled(g->gap_solo, GOV_GAP_SOLO_MAX);
    }
    g->next_probe = run + 1 + (g->solo ? g->gap_full : g->gap_solo);
}
