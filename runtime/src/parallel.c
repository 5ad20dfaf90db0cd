/*
 * runtime/src/parallel.c — kn_rt_parallel_for: the parallel loop behind
 * generated chunk functions (kiln/abi.h), on a session's thread pool.
 *
 * [0, n) is cut into T = min(threads, n) static, contiguous chunks, chunk c
 * being [c*n/T, (c+1)*n/T); which thread runs a chunk never changes what it
 * computes, so outputs are bitwise the same for any thread count.
 *
 * The calling thread works too: it publishes the loop, wakes the pool's
 * T - 1 workers and claims chunks itself, as they do, until none is left;
 * then it waits only for chunks a worker has claimed and not finished. A
 * worker that is slow to wake (the cores are busy with other processes)
 * finds nothing left and goes back to sleep: the loop never waits for a
 * thread that has not started, which a fork-join barrier (an OpenMP
 * parallel region) does, for a whole scheduler slice when the machine is
 * loaded. Between loops workers poll briefly, then sleep on a condition
 * variable, so they take little from oneDNN's OpenMP threads, which run at
 * other times.
 *
 * Claims are one atomic word (generation, next chunk, chunk count): a
 * worker still holding an old loop's generation cannot take a chunk of the
 * next one. A session runs on one thread at a time, so a pool has one
 * caller. A chunk's error message is recorded on the thread that ran it;
 * the first failing chunk (in chunk order) is reported, with its message,
 * on the calling thread.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

/* At most this many chunks (and threads) per loop. */
#define PAR_MAX_CHUNKS 256

struct kn_rt_pool {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    pthread_t *workers;
    int threads, n_workers;
    bool stop;
    uint32_t gen;                /* the current loop's generation (under mu) */
    _Atomic uint64_t claim;      /* gen << 32 | next chunk << 16 | chunks */
    _Atomic int finished;        /* chunks of the current loop done */
    /* the current loop, written by the caller before it is published */
    kn_rt_chunk_fn fn;
    void *args;
    int64_t n;
    int chunks;
    int status[PAR_MAX_CHUNKS];
    char *msg[PAR_MAX_CHUNKS];   /* strdup'd message of a failed chunk */
};

static uint64_t claim_word(uint32_t gen, int next, int chunks)
{
    return (uint64_t)gen << 32 | (uint64_t)next << 16 | (uint64_t)chunks;
}

static int64_t chunk_start(int64_t n, int chunks, int c) { return (int64_t)((__int128)n * c / chunks); }

/* The next chunk of loop `gen` (and the loop's chunk count), or -1 when
 * there is none or the loop is over. */
static int claim_chunk(kn_rt_pool *p, uint32_t gen, int *out_chunks)
{
    uint64_t cur = atomic_load(&p->claim);
    for (;;) {
        int next = (int)((cur >> 16) & 0xffff), chunks = (int)(cur & 0xffff);
        if ((uint32_t)(cur >> 32) != gen || next >= chunks) return -1;
        *out_chunks = chunks;
        if (atomic_compare_exchange_weak(&p->claim, &cur, claim_word(gen, next + 1, chunks))) return next;
    }
}

/* Runs chunks of loop `gen` until none is left. Nothing of the loop is
 * read after its last chunk is counted: the caller may then start the next. */
static void work(kn_rt_pool *p, uint32_t gen)
{
    int c, chunks;
    while ((c = claim_chunk(p, gen, &chunks)) >= 0) {
        int st = p->fn(p->args, chunk_start(p->n, chunks, c), chunk_start(p->n, chunks, c + 1));
        p->status[c] = st;
        if (st) p->msg[c] = strdup(kn_last_error());
        if (atomic_fetch_add(&p->finished, 1) + 1 == chunks) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

/* Polls this long (pause instructions, some 20-80 us) for the next loop
 * before sleeping: a model's nodes come back to back, and a worker woken
 * from a condition variable often arrives after the caller has done
 * everything itself. Short, so that it takes little from oneDNN's threads
 * when a convolution comes next. */
#define PAR_SPIN 2000

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *arg)
{
    kn_rt_pool *p = arg;
    uint32_t seen = 0; /* the generation at creation: a worker that starts late still sees loop 1 */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < PAR_SPIN && (uint32_t)(atomic_load(&p->claim) >> 32) == seen; i++) cpu_relax();
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->gen == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        work(p, seen);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void kn_rt_pool_free(kn_rt_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_workers; i++) pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p);
}

int kn_rt_pool_create(int threads, kn_rt_pool **out)
{
    *out = NULL;
    if (threads > PAR_MAX_CHUNKS) threads = PAR_MAX_CHUNKS;
    kn_rt_pool *p = calloc(1, sizeof *p);
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->threads = threads;
    p->workers = calloc((size_t)(threads > 1 ? threads - 1 : 0) + 1, sizeof *p->workers);
    if (!p->workers) {
        kn_rt_pool_free(p);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i + 1 < threads; i++) {
        if (pthread_create(&p->workers[i], NULL, worker_main, p)) {
            kn_rt_pool_free(p);
            return kn_error(KN_ERR_NOMEM, "kn_session_set_threads: cannot start thread %d of %d", i + 2, threads);
        }
        p->n_workers++;
    }
    *out = p;
    return KN_OK;
}

int kn_rt_pool_run(kn_rt_pool *p, kn_rt_chunk_fn fn, void *args, int64_t n)
{
    if (!fn) return kn_error(KN_ERR_INTERNAL, "kn_rt_parallel_for: no chunk function");
    if (n <= 0) return KN_OK;
    int threads = p ? p->n_workers + 1 : 1;
    int chunks = (int64_t)threads < n ? threads : (int)n;
    if (chunks <= 1) return fn(args, 0, n);
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->args = args;
    p->n = n;
    p->chunks = chunks;
    memset(p->status, 0, sizeof(int) * (size_t)chunks);
    memset(p->msg, 0, sizeof(char *) * (size_t)chunks);
    atomic_store(&p->finished, 0);
    uint32_t gen = ++p->gen;
    atomic_store(&p->claim, claim_word(gen, 0, chunks));
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    work(p, gen);
    pthread_mutex_lock(&p->mu);
    while (atomic_load(&p->finished) < chunks) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    int st = KN_OK;
    for (int c = 0; c < chunks; c++) {
        if (p->status[c] && !st) st = kn_error(p->status[c], "%s", p->msg[c] ? p->msg[c] : "a parallel chunk failed");
        free(p->msg[c]);
    }
    return st;
}

int kn_rt_parallel_for(kn_exec *ex, kn_rt_chunk_fn fn, void *args, int64_t n)
{
    if (!ex || !ex->session) return kn_error(KN_ERR_INTERNAL, "kn_rt_parallel_for: no session");
    return kn_rt_pool_run(ex->session->pool, fn, args, n);
}
