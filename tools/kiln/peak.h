/*
 * tools/kiln/peak.h — measures the machine's FP32 FMA peak (GFLOP/s), the
 * yardstick `kiln profile` and `kiln bench --peak` report fractions of.
 *
 *     kn_peak p;
 *     if (kn_peak_measure(2, &p) == KN_OK)
 *         printf("%.0f GFLOP/s with %s\n", p.gflops, p.isa);
 */
#ifndef KILN_TOOLS_PEAK_H
#define KILN_TOOLS_PEAK_H

#define KN_PEAK_MAX_THREADS 256

typedef struct kn_peak {
    int threads;              /* threads that ran the loop at once */
    double gflops;            /* all threads together */
    double gflops_per_thread;
    const char *isa;          /* static string: "avx512f", "avx2" or "scalar" */
} kn_peak;

/* Runs register-only FMA loops on `threads` threads (about 0.5 s in all)
 * and fills *out with the best of five tries. Returns KN_OK, or an error
 * (bad thread count, thread creation failed) with kn_last_error() set. */
int kn_peak_measure(int threads, kn_peak *out);

#endif
