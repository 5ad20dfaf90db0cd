/*
 * tools/kiln/peak.c — this machine's FP32 FMA peak, measured.
 *
 * `kiln profile` and `kiln bench --peak` report achieved GFLOP/s as a
 * fraction of what the cores can do, so the peak must be measured on the
 * machine at hand, not taken from a data sheet (turbo, AVX-512 frequency
 * licences and shared cores all move it). The loop keeps 12 independent
 * accumulators in registers so that FMA latency (4 cycles) times the two
 * FMA ports is covered and only FMA throughput limits it; no memory is
 * touched. The widest vector the CPU has is used: 512-bit with AVX-512F,
 * else 256-bit with AVX2+FMA, else a scalar loop (which measures much less
 * than the true peak, and says so through `out->isa`).
 */
#include "peak.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "kiln/abi.h"
#include "kiln/status.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define KN_PEAK_X86 1
#endif

#define ACC 12 /* accumulators: entries of KN_ACC_LIST */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Each kernel runs `iters` rounds of ACC vector FMAs and returns a value
 * that depends on every accumulator, so that nothing is optimized away.
 * The accumulators are named variables, not an array: compilers keep an
 * array in memory at -O2, which would measure store forwarding instead. */
#define KN_ACC_LIST(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#ifdef KN_PEAK_X86
__attribute__((target("avx512f"))) static float fma_avx512(long iters)
{
#define DECL(i) __m512 acc##i = _mm512_set1_ps((float)(i) * 1e-3f);
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, a, b);
#define SUM(i) s = _mm512_add_ps(s, acc##i);
    KN_ACC_LIST(DECL)
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
        KN_ACC_LIST(STEP)
    }
    __m512 s = _mm512_setzero_ps();
    KN_ACC_LIST(SUM)
    return _mm512_reduce_add_ps(s);
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx2,fma"))) static float fma_avx2(long iters)
{
#define DECL(i) __m256 acc##i = _mm256_set1_ps((float)(i) * 1e-3f);
#define STEP(i) acc##i = _mm256_fmadd_ps(acc##i, a, b);
#define SUM(i) s = _mm256_add_ps(s, acc##i);
    KN_ACC_LIST(DECL)
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
        KN_ACC_LIST(STEP)
    }
    __m256 s = _mm256_setzero_ps();
    KN_ACC_LIST(SUM)
    float lanes[8], r = 0;
    _mm256_storeu_ps(lanes, s);
    for (int i = 0; i < 8; i++) r += lanes[i];
    return r;
#undef DECL
#undef STEP
#undef SUM
}
#endif

static float fma_scalar(long iters)
{
#define DECL(i) float acc##i = (float)(i) * 1e-3f;
#define STEP(i) acc##i = acc##i * a + b;
#define SUM(i) s += acc##i;
    volatile float seed = 0.999999f;
    const float a = seed, b = 1e-7f;
    KN_ACC_LIST(DECL)
    for (long it = 0; it < iters; it++) {
        KN_ACC_LIST(STEP)
    }
    float s = 0;
    KN_ACC_LIST(SUM)
    return s;
#undef DECL
#undef STEP
#undef SUM
}

typedef float (*peak_fn)(long iters);

typedef struct peak_job {
    peak_fn fn;
    long iters;
    double seconds;
    volatile float sink;
} peak_job;

static void *peak_thread(void *arg)
{
    peak_job *j = arg;
    double t0 = now_s();
    j->sink = j->fn(j->iters);
    j->seconds = now_s() - t0;
    return NULL;
}

static void pick_kernel(peak_fn *out_fn, int *out_lanes, const char **out_isa)
{
    *out_fn = fma_scalar;
    *out_lanes = 1;
    *out_isa = "scalar";
#ifdef KN_PEAK_X86
    uint64_t f = kn_cpu_features();
    if (f & KN_CPU_AVX512F) {
        *out_fn = fma_avx512;
        *out_lanes = 16;
        *out_isa = "avx512f";
    } else if ((f & KN_CPU_AVX2) && (f & KN_CPU_FMA)) {
        *out_fn = fma_avx2;
        *out_lanes = 8;
        *out_isa = "avx2";
    }
#endif
}

/* Runs `threads` copies of the kernel at once; returns the aggregate GFLOP/s
 * (each thread's flops over the slowest thread's time). */
static int run_once(peak_fn fn, int lanes, int threads, long iters, double *out_gflops)
{
    pthread_t tid[KN_PEAK_MAX_THREADS];
    peak_job jobs[KN_PEAK_MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (peak_job){.fn = fn, .iters = iters};
        if (pthread_create(&tid[t], NULL, peak_thread, &jobs[t])) {
            for (int k = 0; k < t; k++) pthread_join(tid[k], NULL);
            return kn_error(KN_ERR_INTERNAL, "peak: cannot start thread %d of %d", t + 1, threads);
        }
    }
    double slowest = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        if (jobs[t].seconds > slowest) slowest = jobs[t].seconds;
    }
    double flops = 2.0 * ACC * lanes * (double)iters * threads;
    *out_gflops = slowest > 0 ? flops / slowest * 1e-9 : 0;
    return KN_OK;
}

int kn_peak_measure(int threads, kn_peak *out)
{
    memset(out, 0, sizeof *out);
    if (threads < 1 || threads > KN_PEAK_MAX_THREADS)
        return kn_error(KN_ERR_INVALID, "peak: --threads must be 1..%d, got %d", KN_PEAK_MAX_THREADS, threads);
    peak_fn fn;
    int lanes;
    pick_kernel(&fn, &lanes, &out->isa);
    /* Calibrate to ~50 ms per try, then keep the best of 5 tries: the best
     * one is the least disturbed by other processes on a shared machine. */
    long iters = 1 << 16;
    double g = 0;
    for (;;) {
        double t0 = now_s();
        int st = run_once(fn, lanes, 1, iters, &g);
        if (st) return st;
        if (now_s() - t0 > 0.02 || iters > (1L << 30)) break;
        iters *= 2;
    }
    iters *= 2;
    double best = 0;
    for (int k = 0; k < 5; k++) {
        int st = run_once(fn, lanes, threads, iters, &g);
        if (st) return st;
        if (g > best) best = g;
    }
    out->threads = threads;
    out->gflops = best;
    out->gflops_per_thread = best / threads;
    return KN_OK;
}
