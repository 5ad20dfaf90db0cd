/*
 * runtime/src/parallel.c — kn_rt_parallel_for: the parallel loop behind
 * generated chunk functions (kiln/abi.h), on the session's thread count.
 *
 * [0, n) is cut into K = min(4 * threads, n) contiguous chunks, chunk c
 * being [c*n/K, (c+1)*n/K), which the threads claim one at a time from a
 * shared counter: when one thread is slowed (here: a vCPU that the host
 * takes away for milliseconds), the others take its share instead of
 * waiting for it at the end. Which thread runs a chunk, and where the
 * chunks are cut, never changes what is computed for an element, so outputs
 * are bitwise the same for any thread count.
 *
 * Threads come from the OpenMP runtime oneDNN already loaded (GNU libgomp):
 * GOMP_parallel is looked up with dlsym, as dnnl.c does for
 * omp_set_num_threads, so that generated loops and oneDNN primitives share
 * one pool of warm threads (no oversubscription) and libkiln_rt needs no
 * -fopenmp. One thread, one unit of work or no libgomp: the function is
 * called directly on the calling thread.
 *
 * A chunk's error message is recorded on the thread that ran it; the first
 * failing chunk (in chunk order) is reported, with its message, on the
 * calling thread.
 *
 * Contention: a member that joins a loop more than PAR_LATE_NS after the
 * call, when the team's last parallel work (a loop here, a oneDNN
 * primitive: kn_rt_team_done) ended so recently that its workers should
 * still be spinning (PAR_AWAKE_NS), was waiting for a CPU that something
 * else held. Such joins are counted (kn_rt_contention_count): a session's
 * governor (governor.h) takes them as the sign to try a run alone.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"

typedef void (*gomp_parallel_fn)(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
static struct {
    gomp_parallel_fn parallel;
} g_omp;
static pthread_once_t g_omp_once = PTHREAD_ONCE_INIT;

/* The calling thread's index in the team of the loop it runs a chunk of. */
static __thread int tl_worker;

int kn_rt_parallel_worker(void) { return tl_worker; }

/* A member this late joined a team whose workers should have been ready. */
#define PAR_LATE_NS 100000
/* libgomp's workers spin this long at least after a loop before they sleep
 * (its default is 300,000 spins, some milliseconds): a join later than
 * that is a wake-up, not evidence. */
#define PAR_AWAKE_NS 1000000

static _Atomic int64_t g_last_end; /* when the last loop's team finished (CLOCK_MONOTONIC ns) */
static _Atomic uint64_t g_late;    /* late joins (and kn_rt_note_contention calls) so far */

int64_t kn_rt_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t kn_rt_contention_count(void) { return atomic_load_explicit(&g_late, memory_order_relaxed); }

void kn_rt_note_contention(void) { atomic_fetch_add_explicit(&g_late, 1, memory_order_relaxed); }

void kn_rt_team_done(void) { atomic_store_explicit(&g_last_end, kn_rt_now_ns(), memory_order_relaxed); }

static void find_omp(void)
{
    *(void **)&g_omp.parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
}

/* At most this many chunks (and threads) per loop: the job lives on the
 * caller's stack, so that a parallel loop allocates nothing. */
#define PAR_MAX_CHUNKS 256
/* Chunks per thread: enough that a slowed thread's share can be taken over,
 * few enough that claiming (one atomic add each) costs nothing. */
#define PAR_CHUNKS_PER_THREAD 4

typedef struct par_job {
    kn_rt_chunk_fn fn;
    void *args;
    int64_t n;
    int chunks;
    int next;   /* the next chunk to claim */
    int joined; /* threads that entered the team: their worker indices */
    int64_t t_call; /* when the loop was called; 0: joins are not watched */
    int status[PAR_MAX_CHUNKS];
    char *msg[PAR_MAX_CHUNKS]; /* strdup'd message of a failed chunk */
} par_job;

static int64_t chunk_start(const par_job *j, int c) { return (int64_t)((__int128)j->n * c / j->chunks); }

static void run_chunk(par_job *j, int c)
{
    int st = j->fn(j->args, chunk_start(j, c), chunk_start(j, c + 1));
    j->status[c] = st;
    if (st) j->msg[c] = strdup(kn_last_error());
}

/* Body of the OpenMP team: each thread claims chunks until none is left
 * (the runtime may give fewer threads than asked; every chunk still runs). */
static void team_body(void *data)
{
    par_job *j = data;
    tl_worker = __atomic_fetch_add(&j->joined, 1, __ATOMIC_RELAXED);
    if (j->t_call && kn_rt_now_ns() - j->t_call > PAR_LATE_NS) kn_rt_note_contention();
    for (int c; (c = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->chunks;) run_chunk(j, c);
}

int kn_rt_parallel_for_threads(int threads, kn_rt_chunk_fn fn, void *args, int64_t n)
{
    if (!fn) return kn_error(KN_ERR_INTERNAL, "kn_rt_parallel_for: no chunk function");
    if (n <= 0) return KN_OK;
    tl_worker = 0;
    if (threads <= 1 || n == 1) return fn(args, 0, n);
    if (threads > PAR_MAX_CHUNKS / PAR_CHUNKS_PER_THREAD) threads = PAR_MAX_CHUNKS / PAR_CHUNKS_PER_THREAD;
    int64_t want = (int64_t)threads * PAR_CHUNKS_PER_THREAD;
    int chunks = want < n ? (int)want : (int)n, team = threads < chunks ? threads : chunks;
    pthread_once(&g_omp_once, find_omp);
    if (!g_omp.parallel) return fn(args, 0, n);
    int64_t t = kn_rt_now_ns();
    bool awake = t - atomic_load_explicit(&g_last_end, memory_order_relaxed) < PAR_AWAKE_NS;
    par_job j = {.fn = fn, .args = args, .n = n, .chunks = chunks, .t_call = awake ? t : 0};
    g_omp.parallel(team_body, &j, (unsigned)team, 0);
    kn_rt_team_done();
    int st = KN_OK;
    for (int c = 0; c < chunks; c++) {
        if (j.status[c] && !st) st = kn_error(j.status[c], "%s", j.msg[c] ? j.msg[c] : "a parallel chunk failed");
        free(j.msg[c]);
    }
    return st;
}

int kn_rt_parallel_for(kn_exec *ex, kn_rt_chunk_fn fn, void *args, int64_t n)
{
    if (!ex || !ex->session) return kn_error(KN_ERR_INTERNAL, "kn_rt_parallel_for: no session");
    return kn_rt_parallel_for_threads(ex->session->run_threads, fn, args, n);
}

static int nothing(void *args, int64_t lo, int64_t hi)
{
    (void)args, (void)lo, (void)hi;
    return KN_OK;
}

void kn_rt_team_check(int threads)
{
    if (threads > 1) kn_rt_parallel_for_threads(threads, nothing, NULL, threads);
}
