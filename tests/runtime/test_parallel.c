/*
 * tests/runtime/test_parallel.c — kn_rt_parallel_for (runtime/src/parallel.c):
 * every index covered exactly once by contiguous, ordered chunks (four per
 * thread), for many sizes and thread counts; chunks really run on several
 * threads; a slowed thread's share is taken by the other; one thread (and
 * one unit) calls the function directly; the first failing chunk's status
 * and message reach the caller.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../../runtime/src/rt_internal.h"

#define MAX_N 1000
#define MAX_CHUNKS 64

typedef struct cover {
    pthread_mutex_t mu;
    int hits[MAX_N];
    int64_t lo[MAX_CHUNKS], hi[MAX_CHUNKS];
    pthread_t who[MAX_CHUNKS];
    int n_chunks;
    int fail_from; /* chunks starting at or after this index fail; -1: none */
    int slow_ms;   /* the chunk at 0 sleeps this long first */
    int each_ms;   /* every chunk sleeps this long first */
} cover;

static int record(void *args, int64_t lo, int64_t hi)
{
    cover *c = args;
    int ms = lo == 0 && c->slow_ms > 0 ? c->slow_ms : c->each_ms;
    if (ms > 0) {
        struct timespec t = {0, ms * 1000000L};
        nanosleep(&t, NULL);
    }
    for (int64_t i = lo; i < hi; i++) __atomic_add_fetch(&c->hits[i], 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&c->mu);
    if (c->n_chunks < MAX_CHUNKS) {
        c->lo[c->n_chunks] = lo;
        c->hi[c->n_chunks] = hi;
        c->who[c->n_chunks] = pthread_self();
    }
    c->n_chunks++;
    pthread_mutex_unlock(&c->mu);
    if (c->fail_from >= 0 && lo >= c->fail_from)
        return kn_error(KN_ERR_INVALID, "chunk at %lld failed", (long long)lo);
    return KN_OK;
}

static void reset(cover *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->fail_from = -1;
}

static int cmp_lo(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Every index once; the chunks, sorted, tile [0, n) with sizes differing by
 * at most one; min(4 * threads, n) of them (one with one thread). */
static void test_cover(void **state)
{
    (void)state;
    static const int64_t sizes[] = {1, 2, 3, 7, 64, 97, 1000};
    static const int threads[] = {1, 2, 3, 4, 8, 16};
    cover *c = malloc(sizeof *c);
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++) {
        for (size_t b = 0; b < sizeof threads / sizeof *threads; b++) {
            int64_t n = sizes[a];
            reset(c);
            assert_int_equal(kn_rt_parallel_for_threads(threads[b], record, c, n), KN_OK);
            for (int64_t i = 0; i < n; i++) assert_int_equal(c->hits[i], 1);
            int expect = threads[b] == 1 ? 1 : 4 * threads[b] < n ? 4 * threads[b] : (int)n;
            assert_int_equal(c->n_chunks, expect);
            int64_t pairs[MAX_CHUNKS][2];
            for (int k = 0; k < c->n_chunks; k++) {
                pairs[k][0] = c->lo[k];
                pairs[k][1] = c->hi[k];
            }
            qsort(pairs, (size_t)c->n_chunks, sizeof pairs[0], cmp_lo);
            int64_t at = 0, least = n, most = 0;
            for (int k = 0; k < c->n_chunks; k++) {
                assert_int_equal(pairs[k][0], at);
                assert_true(pairs[k][1] > pairs[k][0]);
                int64_t len = pairs[k][1] - pairs[k][0];
                least = len < least ? len : least;
                most = len > most ? len : most;
                at = pairs[k][1];
            }
            assert_int_equal(at, n);
            assert_true(most - least <= 1);
        }
    }
    free(c);
}

/* 1 thread: one call with the whole range, on the calling thread. */
static void test_one_thread(void **state)
{
    (void)state;
    cover *c = malloc(sizeof *c);
    reset(c);
    assert_int_equal(kn_rt_parallel_for_threads(1, record, c, 500), KN_OK);
    assert_int_equal(c->n_chunks, 1);
    assert_int_equal(c->lo[0], 0);
    assert_int_equal(c->hi[0], 500);
    assert_true(pthread_equal(c->who[0], pthread_self()));
    /* nothing to do: no call */
    reset(c);
    assert_int_equal(kn_rt_parallel_for_threads(4, record, c, 0), KN_OK);
    assert_int_equal(c->n_chunks, 0);
    free(c);
}

/* With 4 threads the chunks run on more than one thread (libgomp, which
 * oneDNN loaded, was found). Each chunk takes a millisecond, or the calling
 * thread could claim them all before the others start. */
static void test_threads_used(void **state)
{
    (void)state;
    cover *c = malloc(sizeof *c);
    reset(c);
    c->each_ms = 1;
    assert_int_equal(kn_rt_parallel_for_threads(4, record, c, 1000), KN_OK);
    assert_int_equal(c->n_chunks, 16);
    int distinct = 0;
    for (int k = 0; k < 16; k++) {
        bool seen = false;
        for (int j = 0; j < k; j++) seen |= pthread_equal(c->who[j], c->who[k]) != 0;
        distinct += !seen;
    }
    assert_true(distinct > 1);
    free(c);
}

/* Chunks starting at 500 or later fail (the 8 or 16 chunks of 2 or 4
 * threads over 1000 include one that starts at 500): the caller gets the
 * status and the message of the first failing chunk, 500, whichever thread
 * ran it. */
static void test_error(void **state)
{
    (void)state;
    cover *c = malloc(sizeof *c);
    for (int t = 1; t <= 4; t *= 2) {
        reset(c);
        c->fail_from = t == 1 ? 0 : 500;
        kn_error_clear();
        assert_int_equal(kn_rt_parallel_for_threads(t, record, c, 1000), KN_ERR_INVALID);
        assert_non_null(strstr(kn_last_error(), t == 1 ? "chunk at 0 failed" : "chunk at 500 failed"));
        /* the others still ran: no chunk is left half-done by a failing neighbour */
        for (int64_t i = 0; i < 1000; i++) assert_int_equal(c->hits[i], 1);
    }
    free(c);
}

/* Chunks are claimed, not dealt: while the thread that took the first
 * chunk sleeps 100 ms, the other takes all the rest (with a static split,
 * the sleeper would still have its own share to do). Unless the other
 * thread never ran during those 100 ms (a very busy machine): then one
 * thread ran everything, which proves nothing either way. */
static void test_slow_thread(void **state)
{
    (void)state;
    cover *c = malloc(sizeof *c);
    reset(c);
    c->slow_ms = 100;
    assert_int_equal(kn_rt_parallel_for_threads(2, record, c, 8), KN_OK);
    assert_int_equal(c->n_chunks, 8);
    pthread_t sleeper = c->who[0];
    int by_sleeper = 0;
    for (int k = 0; k < 8; k++) {
        if (c->lo[k] == 0) sleeper = c->who[k];
        assert_int_equal(c->hits[k], 1);
    }
    for (int k = 0; k < 8; k++) by_sleeper += pthread_equal(c->who[k], sleeper) != 0;
    if (by_sleeper != 8) assert_int_equal(by_sleeper, 1);
    free(c);
}

static int add_one(void *args, int64_t lo, int64_t hi)
{
    int *hits = args;
    for (int64_t i = lo; i < hi; i++) hits[i]++;
    return KN_OK;
}

/* Many short loops back to back on the same threads. */
static void test_many_loops(void **state)
{
    (void)state;
    static int hits[7];
    memset(hits, 0, sizeof hits);
    for (int r = 0; r < 20000; r++) assert_int_equal(kn_rt_parallel_for_threads(3, add_one, hits, 7), KN_OK);
    for (int i = 0; i < 7; i++) assert_int_equal(hits[i], 20000);
}

static void test_refusals(void **state)
{
    (void)state;
    assert_int_equal(kn_rt_parallel_for_threads(2, NULL, NULL, 10), KN_ERR_INTERNAL);
    assert_int_equal(kn_rt_parallel_for(NULL, record, NULL, 10), KN_ERR_INTERNAL);
    assert_non_null(strstr(kn_last_error(), "no session"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cover),
        cmocka_unit_test(test_one_thread),
        cmocka_unit_test(test_threads_used),
        cmocka_unit_test(test_error),
        cmocka_unit_test(test_slow_thread),
        cmocka_unit_test(test_many_loops),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
