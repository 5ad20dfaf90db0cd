/*
 * tests/runtime/test_governor.c — the per-run choice of threads
 * (runtime/src/governor.c), driven by made-up runs: a quiet machine leaves
 * T for one probe only, to learn (and a false alarm costs a probe, then
 * fewer and fewer); a
 * loaded one goes to one thread at the first evidence (a late worker, or
 * a run much slower than the last ones) and stays there, trying T
 * rarely; when the load ends T comes back within a probe's gap;
 * runs at T that are quick or a time slice slower by turns count by their
 * mean, and one lucky quick run does not bring T back for long; a fixed
 * policy and one thread never choose; failed runs teach nothing, nor does
 * the first run after a pause (the interleaved bench's cold run), unless
 * every run follows one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../runtime/src/governor.h"

/* A machine: what a run costs at T threads and alone, and whether a run at
 * T sees a late worker. */
typedef struct machine {
    double full, solo;
    int evidence_every; /* a run at T sees contention every this many runs (0: never) */
    /* bimodal T: every slow_every-th run at T costs slow instead of full */
    int slow_every;
    double slow;
    /* runs in pairs after a pause (the interleaved bench: 100 ms idle, a
     * run, a run back to back): the first of each pair at T costs cold
     * (workers asleep, vCPUs halted), and is late every late_cold-th time */
    bool pairs;
    double cold;
    int late_cold;
    int64_t n_full; /* runs at T so far */
    int64_t n_runs; /* runs so far */
} machine;

/* Runs n runs on m; returns how many went alone. */
static int64_t drive(kn_gov *g, machine *m, int n)
{
    int64_t solo = 0;
    for (int i = 0; i < n; i++) {
        bool after_pause = m->pairs && m->n_runs++ % 2 == 0;
        int t = kn_gov_begin(g, after_pause ? 100000000 : 20000);
        double cost = m->solo;
        bool late = false;
        if (t > 1) {
            m->n_full++;
            cost = m->slow_every && m->n_full % m->slow_every == 0 ? m->slow : m->full;
            late = m->evidence_every && m->n_full % m->evidence_every == 0;
            if (after_pause) {
                cost = m->cold;
                late = m->late_cold && m->n_full % m->late_cold == 0;
            }
        } else {
            solo++;
        }
        kn_gov_end(g, cost, late);
    }
    return solo;
}

static void test_quiet_stays(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    machine m = {.full = 1.0, .solo = 1.8};
    assert_int_equal(drive(&g, &m, 1000), 2); /* the one probe that learns what a run alone costs */
    assert_false(g.solo);
}

static void test_false_alarms_fade(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    /* a late worker every 3rd run, and one thread is slower: each probe
     * loses and the next waits twice as long (4, 8, ..., 1024) */
    machine m = {.full = 1.0, .solo = 1.8, .evidence_every = 3};
    int64_t solo = drive(&g, &m, 3000);
    assert_true(solo >= 2);
    assert_true(solo <= 20); /* probes of two runs */
    assert_false(g.solo);
    assert_int_equal(g.gap_solo, 1024);
}

static void test_load_goes_solo(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    /* loaded from the first run: T costs 3x one thread, every run at T late */
    machine m = {.full = 3.0, .solo = 1.0, .evidence_every = 1};
    drive(&g, &m, 5); /* run 0 (not measured), 1 and 2 at T, 3 and 4 the probe */
    assert_true(g.solo);
    assert_int_equal(g.gap_full, 16); /* the first probe went alone: T again soon */
    int64_t before = m.n_full;
    int64_t solo = drive(&g, &m, 500);
    /* T tried at gaps of 16, 32, ..., 256, one run each (a run that has
     * clearly lost ends the probe): at most 6 of 500 */
    assert_true(m.n_full - before <= 6);
    assert_int_equal(solo + (m.n_full - before), 500);
    assert_true(g.solo);
}

static void test_load_ends(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 4, false);
    machine m = {.full = 3.0, .solo = 1.0, .evidence_every = 1};
    drive(&g, &m, 100);
    assert_true(g.solo);
    int64_t gap = g.gap_full;
    assert_true(gap <= 64);
    /* quiet again: T costs half of one thread; the next probe of T wins */
    m = (machine){.full = 0.5, .solo = 1.0};
    drive(&g, &m, (int)gap + 2); /* the probe of T: two runs */
    assert_false(g.solo);
    int64_t solo = drive(&g, &m, 1000);
    assert_int_equal(solo, 0);
    assert_int_equal(kn_gov_begin(&g, 0), 4);
}

static void test_bimodal_counts_by_mean(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    /* at T: 0.6 most runs, 8.0 every 4th, late workers in every run; alone
     * 0.8. T's quick runs (or its median, 0.6) would keep T; its mean (2.45)
     * must not */
    machine m = {.full = 0.6, .solo = 0.8, .slow_every = 4, .slow = 8.0, .evidence_every = 1};
    int64_t solo = drive(&g, &m, 1000);
    assert_true(g.solo);
    assert_true(solo >= 950);
}

static void test_lucky_runs_at_t(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    /* under load, one run at T in three as quick as on a quiet machine (the
     * other process was elsewhere), the others twice one thread's time:
     * one quick run must not bring T back for long */
    machine m = {.full = 14.0, .solo = 7.0, .slow_every = 3, .slow = 4.2, .evidence_every = 1};
    int64_t solo = drive(&g, &m, 1000);
    assert_true(g.solo);
    assert_true(solo >= 950);
}

static void test_slow_first_runs(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    /* a session's first runs at T cost 4-5x (pages, caches); one thread
     * costs 1.8x a warm run at T: the first probe must not go alone */
    double first[] = {5.0, 4.0, 1.0};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kn_gov_begin(&g, i ? 0 : -1), 2);
        kn_gov_end(&g, first[i], false);
    }
    machine m = {.full = 1.0, .solo = 1.8};
    drive(&g, &m, 100);
    assert_false(g.solo);
    assert_int_equal(g.solo_runs, 2);
}

static void test_load_seen_in_times(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    machine m = {.full = 1.0, .solo = 1.8};
    drive(&g, &m, 50);
    assert_false(g.solo);
    /* load that no late join shows (inside oneDNN's regions): runs at T
     * three times as long; one thread is the better choice now */
    m.full = 3.0;
    drive(&g, &m, 12); /* a probe that T's older runs leave undecided, a second one */
    assert_true(g.solo);
}

static void test_pauses_teach_nothing(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    /* the interleaved bench on a quiet machine (MobileNetV2-qdq, 2 vCPUs):
     * after 100 ms idle a run at T costs 2.5x one back to back and is
     * sometimes late; one thread costs 2x. Only the first probe goes alone */
    machine m = {.full = 1.5, .solo = 3.0, .pairs = true, .cold = 3.8, .late_cold = 3};
    int64_t solo = drive(&g, &m, 1000);
    assert_false(g.solo);
    assert_true(solo <= 3); /* the probe's two runs, and a paused run between them */
    /* loaded: back-to-back runs at T cost 3x one thread and are late: the
     * governor goes alone though every other run follows a pause */
    m.full = 9.0;
    m.evidence_every = 1;
    drive(&g, &m, 20);
    assert_true(g.solo);
}

static void test_every_run_after_a_pause(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    /* an application that runs every 100 ms on a loaded machine: each run
     * follows a pause, so the runs compare with each other and only the
     * first teaches nothing */
    machine m = {.full = 3.0, .solo = 1.0, .evidence_every = 1};
    for (int i = 0; i < 200; i++) {
        int t = kn_gov_begin(&g, 100000000);
        kn_gov_end(&g, t > 1 ? m.full : m.solo, t > 1);
    }
    assert_true(g.solo);
    assert_true(g.solo_runs >= 180);
}

static void test_no_choice(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, true); /* KN_THREADS_FIXED */
    machine m = {.full = 3.0, .solo = 1.0, .evidence_every = 1};
    assert_int_equal(drive(&g, &m, 200), 0);
    kn_gov_init(&g, 1, false); /* one thread: nothing to choose */
    for (int i = 0; i < 50; i++) {
        assert_int_equal(kn_gov_begin(&g, -1), 1);
        kn_gov_end(&g, 1.0, true);
    }
    assert_int_equal(g.solo_runs, 0);
}

static void test_failed_runs_teach_nothing(void **state)
{
    (void)state;
    kn_gov g;
    kn_gov_init(&g, 2, false);
    machine m = {.full = 1.0, .solo = 1.8};
    drive(&g, &m, 5);
    int n = g.ncost;
    kn_gov_begin(&g, 0);
    kn_gov_end(&g, -1.0, true);
    assert_int_equal(g.ncost, n);
    assert_false(g.evidence);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quiet_stays),
        cmocka_unit_test(test_false_alarms_fade),
        cmocka_unit_test(test_load_goes_solo),
        cmocka_unit_test(test_load_ends),
        cmocka_unit_test(test_bimodal_counts_by_mean),
        cmocka_unit_test(test_lucky_runs_at_t),
        cmocka_unit_test(test_slow_first_runs),
        cmocka_unit_test(test_load_seen_in_times),
        cmocka_unit_test(test_pauses_teach_nothing),
        cmocka_unit_test(test_every_run_after_a_pause),
        cmocka_unit_test(test_no_choice),
        cmocka_unit_test(test_failed_runs_teach_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
