/*
 * runtime/src/config.h — the one place that picks kiln's own convolution
 * algorithms and their thresholds for the CPU the runtime runs on
 * (config.c). Private to libkiln_rt.
 *
 * Two inputs: the CPU's features (kn_cpu_features, KILN_CPU_MASK applied)
 * and its family (cpuid vendor, family and model: Zen 5, Zen 4, Intel
 * Sapphire/Emerald Rapids class, any other AVX-512 CPU, AVX2). Each family
 * is a row of a tuning table holding every threshold that was fitted by
 * measurement; each row says the machine it was measured on, or the
 * measured row it inherits from.
 *
 * Two overrides, read from the environment at each call (tests set them
 * per process; kn_config_check reports a bad value as an error):
 *   KILN_TUNE_FAMILY=zen5|zen4|intel-spr|avx512|avx2  the row to use
 *   KILN_CONV_ALGO=auto|winograd|pointwise|im2col|thin|xdw|matmul|direct|dnnl
 *       the algorithm every convolution that it supports takes (the
 *       others take oneDNN's direct kernel); xdw forms every 1x1 +
 *       depthwise pair it supports; dnnl: oneDNN only (no kiln kernel,
 *       matmuls included); direct: oneDNN's convolution primitive only.
 */
#ifndef KILN_RT_CONFIG_H
#define KILN_RT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/kiln.h"

/* Rates behind the Winograd cost model (kn_wino_tile): FLOP/s and bytes/s
 * per thread of the products, of oneDNN's direct kernel, of the
 * transforms' traffic, of streaming U from memory (shared by the cores)
 * and of the direct kernel's filter from memory (0: folded into direct). */
typedef struct kn_wino_rates {
    double gemm, direct, xform, u, wdirect;
} kn_wino_rates;

/* One row of the tuning table. */
typedef struct kn_tuning {
    const char *name;        /* the KILN_TUNE_FAMILY value */
    const char *measured_on; /* the machine its figures come from */
    const char *inherits;    /* NULL, or the measured row it copies */
    kn_wino_rates wino;      /* for the product kernel of this family's ISA */
    double wino_min_gain;    /* Winograd only at most this share of direct's time */
    int64_t wino_block_max_u;    /* blocked Winograd runs up to this filter size (bytes) */
    int64_t wino_block_vm_bytes; /* V and M of one block (bytes) */
    int64_t pw_min_sum_bytes;    /* kiln's 1x1: a residual sum into at least this output */
    int64_t pw_max_pixels;       /* ... or at most this many pixels */
    int64_t pw_min_filter_bytes; /* ... against at least this filter */
    int64_t pw_matmul_min_filter_bytes; /* kiln's matmul: filters at least this large */
    int64_t pw_matmul_min_filter_bytes_1t; /* ... on one thread */
    int64_t im2col_max_pixels;   /* im2col: output images of at most this many pixels */
    int64_t thin_im2col_max_pixels; /* ... of width 1 (k x 1 convs): at most this many */
    int64_t thin_min_height;     /* a k x 1 conv over width 1 as 1-D: outputs at least this tall */
    int64_t xdw_min_bytes;       /* 1x1 + depthwise pairs: expansions at least this large */
    bool rnn_prefetch;           /* recurrent products prefetch R's rows in software (AVX-512) */
    /* oneDNN implementations (name prefixes, NULL-terminated) measured
     * slower than the next one oneDNN offers for the same primitive: the
     * next one that is not a reference kernel runs instead */
    const char *const *avoid_impls;
} kn_tuning;

typedef enum kn_cpu_family {
    KN_FAMILY_ZEN5,
    KN_FAMILY_ZEN4,
    KN_FAMILY_INTEL_SPR,
    KN_FAMILY_AVX512,
    KN_FAMILY_AVX2,
    KN_FAMILY_COUNT
} kn_cpu_family;

/* The convolution algorithms (the rows of dnnl/conv.c's table; a kernel
 * added later comes after DIRECT here, whatever its place there), then the
 * override's other values. */
typedef enum kn_conv_algo {
    KN_ALGO_AUTO = -1,
    KN_ALGO_WINOGRAD,  /* kiln's Winograd F(4x4)/F(2x2), 3x3 stride 1 */
    KN_ALGO_POINTWISE, /* kiln's AVX-512 1x1 (and constant-weight matmul) */
    KN_ALGO_IM2COL,    /* im2col + oneDNN's 1x1 kernel, blocked layouts */
    KN_ALGO_THIN,      /* a k x 1 conv over width 1 as oneDNN's 1-D conv */
    KN_ALGO_MATMUL,    /* a plain 1x1 conv as oneDNN's matmul */
    KN_ALGO_DIRECT,    /* oneDNN's convolution primitive */
    KN_ALGO_DEPTHWISE, /* kiln's int8 depthwise 3x3 (AVX-512 VNNI) */
    KN_ALGO_STEM,      /* kiln's first convolution: 1-4 NCHW channels to NHWC (AVX-512) */
    KN_ALGO_XDW,       /* kiln's fused 1x1 + depthwise pair (not a table row) */
    KN_ALGO_DNNL,      /* oneDNN only: matmul or direct, no kiln kernel */
    KN_ALGO_COUNT
} kn_conv_algo;

/* What cpuid says the CPU is (cpu.c): vendor, display family and model. */
typedef enum { KN_VENDOR_OTHER, KN_VENDOR_AMD, KN_VENDOR_INTEL } kn_cpu_vendor;
typedef struct kn_cpu_id {
    kn_cpu_vendor vendor;
    unsigned family, model;
} kn_cpu_id;
void kn_cpu_ident(kn_cpu_id *out);
/* The family of a CPU with these features (KN_CPU_*) and identity. */
kn_cpu_family kn_config_family_of(uint64_t features, const kn_cpu_id *id);

/* The family of this CPU: KILN_TUNE_FAMILY when set (and valid), else
 * cpuid's, AVX2 whenever AVX-512F is absent or masked off. */
kn_cpu_family kn_config_family(void);
/* The tuning row of kn_config_family() (never NULL). */
const kn_tuning *kn_config_tuning(void);
/* Row f of the table (NULL out of range): for tests and docs. */
const kn_tuning *kn_config_row(kn_cpu_family f);
/* KILN_CONV_ALGO (KN_ALGO_AUTO when unset or invalid). */
kn_conv_algo kn_config_conv_algo(void);
/* The name of an algorithm ("winograd", ...; "auto"). */
const char *kn_config_algo_name(kn_conv_algo a);
/* KN_OK, or an error naming the variable, its value and the accepted
 * values when KILN_TUNE_FAMILY or KILN_CONV_ALGO is set to something else. */
int kn_config_check(void);

/* How compiled artifacts run an op that has a fast path of kiln's own
 * besides its reference kernel: LSTM, GRU and RNN (rnn.c, KILN_RNN) and
 * Attention (attention.c, KILN_ATTENTION). auto (default): kiln's kernel
 * with the best ISA the CPU has; portable: kiln's kernel in plain C, no
 * SIMD; ref: the reference evaluator's plain C kernel (kernels/ref/). */
typedef enum kn_kernel_path {
    KN_KERNEL_PATH_AUTO,
    KN_KERNEL_PATH_PORTABLE,
    KN_KERNEL_PATH_REF,
    KN_KERNEL_PATH_COUNT
} kn_kernel_path;
/* KILN_RNN, KILN_ATTENTION (AUTO when unset or invalid). */
kn_kernel_path kn_config_rnn_path(void);
kn_kernel_path kn_config_attention_path(void);
/* KN_OK, or an error naming KILN_RNN's / KILN_ATTENTION's value and the
 * accepted ones. */
int kn_config_check_rnn(void);
/* A new session's thread policy from KILN_THREADS ("adaptive", the
 * default, or "fixed"); KN_ERR_INVALID with a message for another value. */
int kn_config_thread_policy(kn_thread_policy *out);
int kn_config_check_attention(void);

#endif
