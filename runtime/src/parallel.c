/*
 * runtime/src/parallel.c — kn_rt_parallel_for: the parallel loop behind
 * generated chunk functions (kiln/abi.h), on the session's thread count.
 *
 * [0, n) is cut into T = min(threads, n) static, contiguous chunks, chunk c
 * being [c*n/T, (c+1)*n/T); which thread runs a chunk never changes what it
 * computes, so outputs are bitwise the same for any thread count.
 *
 * Threads come from the OpenMP runtime oneDNN already loaded (GNU libgomp):
 * GOMP_parallel and omp_get_thread_num/omp_get_num_threads are looked up
 * with dlsym, as dnnl.c does for omp_set_num_threads, so that generated
 * loops and oneDNN primitives share one pool of warm threads (no
 * oversubscription) and libkiln_rt needs no -fopenmp. One thread, one chunk
 * or no libgomp: the function is called directly on the calling thread.
 *
 * A chunk's error message is recorded on the thread that ran it; the first
 * failing chunk (in chunk order) is reported, with its message, on the
 * calling thread.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

typedef void (*gomp_parallel_fn)(void (*fn)(void *), void *data, unsigned num_threads, unsigned flags);
typedef int (*omp_int_fn)(void);

static struct {
    gomp_parallel_fn parallel;
    omp_int_fn thread_num, num_threads;
} g_omp;
static pthread_once_t g_omp_once = PTHREAD_ONCE_INIT;

static void find_omp(void)
{
    *(void **)&g_omp.parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
    *(void **)&g_omp.thread_num = dlsym(RTLD_DEFAULT, "omp_get_thread_num");
    *(void **)&g_omp.num_threads = dlsym(RTLD_DEFAULT, "omp_get_num_threads");
    if (!g_omp.thread_num || !g_omp.num_threads) g_omp.parallel = NULL;
}

/* At most this many chunks (and threads) per loop: the job lives on the
 * caller's stack, so that a parallel loop allocates nothing. */
#define PAR_MAX_CHUNKS 256

typedef struct par_job {
    kn_rt_chunk_fn fn;
    void *args;
    int64_t n;
    int chunks;
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

/* Body of the OpenMP team: thread t runs chunks t, t + team, ... (the
 * runtime may give fewer threads than asked; every chunk still runs). */
static void team_body(void *data)
{
    par_job *j = data;
    int team = g_omp.num_threads(), t = g_omp.thread_num();
    if (team < 1) team = 1;
    for (int c = t; c < j->chunks; c += team) run_chunk(j, c);
}

int kn_rt_parallel_for_threads(int threads, kn_rt_chunk_fn fn, void *args, int64_t n)
{
    if (!fn) return kn_error(KN_ERR_INTERNAL, "kn_rt_parallel_for: no chunk function");
    if (n <= 0) return KN_OK;
    if (threads > PAR_MAX_CHUNKS) threads = PAR_MAX_CHUNKS;
    int chunks = threads < 1 ? 1 : (int64_t)threads < n ? threads : (int)n;
    if (chunks > 1) pthread_once(&g_omp_once, find_omp);
    if (chunks == 1 || !g_omp.parallel) return fn(args, 0, n);
    par_job j = {.fn = fn, .args = args, .n = n, .chunks = chunks};
    g_omp.parallel(team_body, &j, (unsigned)chunks, 0);
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
    return kn_rt_parallel_for_threads(ex->session->threads, fn, args, n);
}
