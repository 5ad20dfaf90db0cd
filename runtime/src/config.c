/*
 * runtime/src/config.c — the CPU-family tuning table and the overrides
 * (see config.h). Every threshold of kiln's own convolution algorithms
 * that was fitted by measurement lives here, in the row of the family it
 * was measured on; the kernels and dnnl_conv.c's algorithm table read it
 * through kn_config_tuning(), never a constant of their own.
 *
 * Measured rows:
 *  - zen5: one core of an AMD Zen 5 machine (docs/benchmarks.md), with
 *    ResNet-50, MobileNetV2 and BERT-base at batch 1 and 8, 1 and 2
 *    threads, layer by layer against oneDNN 2.6's brgconv/brgemm kernels;
 *  - zen4: which of oneDNN's depthwise kernels to take (AVOID_ZEN4, below),
 *    on an AMD Zen 4 EPYC (KVM, 2 vCPUs); its other figures are Zen 5's;
 *  - avx512: kiln's matmul on one thread (pw_matmul_min_filter_bytes_1t),
 *    on an Intel Xeon with AMX (KVM, 2 vCPUs); its other figures are Zen 5's;
 *  - avx2: an AMD Zen 2 core (AVX2+FMA), Winograd's 6x16 product kernel
 *    against oneDNN's jit:avx2 direct kernel, and im2col against it on 7x7,
 *    14x14 and 28x28 outputs; an AMD Zen 3 core for thin (k x 1) convs.
 * Unmeasured rows copy a measured row (its name in `inherits`) until
 * someone measures them: Intel's Sapphire/Emerald Rapids run the same
 * AVX-512 kernels as Zen 5, at other rates.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "kiln/abi.h"
#include "kiln/status.h"

/* Zen 5's figures, which the unmeasured AVX-512 rows inherit:
 *  - Winograd: 8x32 AVX-512 products, which prefetch U, against
 *    brgconv:avx512_core (NHWC), which waits on its filter where it comes
 *    from memory: ResNet-50's 7x7 layers at batch 1 take 0.64 ms on 2
 *    threads, the 14x14 ones (as many FLOPs, a quarter of the filter)
 *    0.49 ms; F(2x2) takes 0.43 ms there, streaming its 16 MB U at 40 GB/s;
 *  - blocked Winograd runs: ResNet-50's 56x56 layers on 2 threads, 2.0-2.2
 *    ms instead of 3.5-3.6 at batch 8 (block_chunk in
 *    f32_winograd_3x3_avx2_avx512.c);
 *  - kiln's 1x1 beats brgconv_1x1 with a residual sum into 8 MB or more
 *    (batch 8: oneDNN takes 1.6-2.2x as long with the sum), and on few
 *    pixels against a large filter (batch 1's 7x7 and 14x14: 1-12%);
 *  - kiln's matmul: BERT-base's projections (2.4 MB and up) 4-9% faster at
 *    batch 1, 0-6% at batch 8; ViT-Tiny's (0.6 MB) stay on oneDNN;
 *  - im2col runs only on blocked layouts (oneDNN held to AVX2 on these
 *    CPUs): the AVX2 row's figure;
 *  - MobileNetV2's expansions: paired from 4 MB of output up;
 *  - thin k x 1 convs: the AVX2 row's figures (Zen 3), not measured on an
 *    AVX-512 CPU (the 1-D form is oneDNN's own kernel there too);
 *  - avoided: oneDNN 2.6's jit_1x1 and jit int8 kernels for AMX, which it
 *    picks where its brgconv AMX kernels decline (MobileNetV2's 1x1
 *    layers): measured on a Sapphire Rapids-class Xeon (KVM, 2 vCPUs),
 *    1.5-5x slower per layer than brgconv_1x1:avx512_core_vnni, oneDNN's
 *    next choice (MobileNetV2-qdq 2.29 -> 1.30 ms on 2 threads, 3.13 ->
 *    2.05 on 1; ResNet-50-qdq, whose 1x1 layers keep brgconv_1x1 AMX,
 *    4.53 -> 4.19 and 7.09 -> 6.97). Only AMX CPUs offer them, so the rule
 *    is every AVX-512 row's. */
static const char *const AVOID_AMX_JIT_INT8[] = {"jit_1x1:avx512_core_amx_int8", "jit:avx512_core_amx_int8", NULL};
/* Zen 4 (EPYC, KVM, 2 vCPUs), measured: oneDNN 2.6's first choice for
 * depthwise convolutions, brdgmm_dw, is slower than its jit_dw (f32) and
 * jit_int8 (u8/s8) kernels on every depthwise layer of MobileNetV2, at
 * batch 1 and 8, 2 threads: f32 features.1.conv.1 0.103-0.107 -> 0.059-0.072
 * ms, u8 features.3.conv.1 0.093 -> 0.066 ms; whole model, A/B in one run,
 * f32 b8 29.4 -> 28.7 ms, u8 b1 1.51-1.57 -> 1.43 ms, u8 b8 11.0-11.4 ->
 * 10.6-10.7 ms. (Its brgconv and brgconv_1x1 int8 kernels against jit_int8:
 * within noise over ResNet-50-qdq, faster on some layers, slower on
 * others: kept.) Not measured elsewhere, so only this row avoids it. */
static const char *const AVOID_ZEN4[] = {"jit_1x1:avx512_core_amx_int8", "jit:avx512_core_amx_int8", "brdgmm_dw",
                                         NULL};
#define ZEN5_FIGURES_BUT_1T                                                                                        \
    .wino = {200e9, 230e9, 20e9, 40e9, 60e9}, .wino_min_gain = 0.8, .wino_block_max_u = 768 << 10,                 \
    .wino_block_vm_bytes = 256 << 10, .pw_min_sum_bytes = 8 << 20, .pw_max_pixels = 256,                           \
    .pw_min_filter_bytes = 1 << 20, .pw_matmul_min_filter_bytes = 1 << 20, .im2col_max_pixels = 256,               \
    .thin_im2col_max_pixels = 0, .thin_min_height = 1, .xdw_min_bytes = 4 << 20
#define ZEN5_FIGURES ZEN5_FIGURES_BUT_1T, .pw_matmul_min_filter_bytes_1t = 1 << 20, .rnn_prefetch = true

static const kn_tuning TABLE[KN_FAMILY_COUNT] = {
    [KN_FAMILY_ZEN5] = {.name = "zen5",
                        .measured_on = "AMD Zen 5, one core (docs/benchmarks.md)",
                        ZEN5_FIGURES,
                        .avoid_impls = AVOID_AMX_JIT_INT8},
    [KN_FAMILY_ZEN4] = {.name = "zen4",
                        .measured_on = "AMD Zen 4 (EPYC, KVM, 2 vCPUs): oneDNN's depthwise kernels; the other "
                                       "figures are Zen 5's",
                        ZEN5_FIGURES,
                        .avoid_impls = AVOID_ZEN4},
    [KN_FAMILY_INTEL_SPR] = {.name = "intel-spr", .inherits = "zen5", ZEN5_FIGURES, .avoid_impls = AVOID_AMX_JIT_INT8},
    /* kiln's matmul on one thread against brg:avx512_core, ViT-Tiny's
     * matmuls (197 rows; filters of 147-590 KB), 2 rounds alternated:
     * 13.97 -> 13.05 ms in all (each shape 6-14% faster); on 2 threads
     * 7.62 -> 7.69 (qkv and fc2 11-21% slower), so the 1 MB stays there.
     * The recurrent products without software prefetch (the hardware's
     * suffices, the prefetches took load slots): the audio model on one
     * thread 0.58 -> 0.55 ms, 6 rounds alternated (rnn.c). */
    [KN_FAMILY_AVX512] = {.name = "avx512",
                          .measured_on = "Intel Xeon with AMX (KVM, 2 vCPUs, CPUID model A7h): kiln's matmul on "
                                         "one thread, the recurrent products' prefetch; the other figures are "
                                         "Zen 5's",
                          ZEN5_FIGURES_BUT_1T,
                          .pw_matmul_min_filter_bytes_1t = 128 << 10,
                          .rnn_prefetch = false,
                          .avoid_impls = AVOID_AMX_JIT_INT8},
    [KN_FAMILY_AVX2] =
        {
            .name = "avx2",
            .measured_on = "AMD Zen 2, one core (AVX2+FMA); thin convs: AMD Zen 3, one core",
            /* 6x16 AVX2 products against jit:avx2 */
            .wino = {60e9, 70e9, 8e9, 7e9, 0},
            .wino_min_gain = 0.8,
            /* blocked Winograd runs and kiln's 1x1 and 1x1 + depthwise
             * kernels need AVX-512: Zen 5's figures, never used here */
            .wino_block_max_u = 768 << 10,
            .wino_block_vm_bytes = 256 << 10,
            .pw_min_sum_bytes = 8 << 20,
            .pw_max_pixels = 256,
            .pw_min_filter_bytes = 1 << 20,
            .pw_matmul_min_filter_bytes = 1 << 20,
            .pw_matmul_min_filter_bytes_1t = 1 << 20,
            /* against jit:avx2's direct kernel at batch 1, one thread and
             * two: 7x7 outputs 1.1-1.6x faster, 14x14 1.1-1.3x, 28x28 0.9x */
            .im2col_max_pixels = 256,
            /* k x 1 convs over width-1 images (256 -> 256 channels, 5x1,
             * 32 to 2048 rows), measured on an AMD Zen 3 core (EPYC, 2
             * vCPUs), one thread: oneDNN's 2-D jit:avx2 kernel 0.83 ms at
             * 32 rows to 81 ms at 2048 (13-26 GFLOP/s), as a 1-D conv 0.24
             * to 14.9 ms (45-72 GFLOP/s), im2col 2-5% slower than the 1-D
             * form at every height: the 1-D form at every height, im2col
             * never (two threads: too noisy on that shared machine to
             * order them, 1-D at least as fast as direct) */
            .thin_im2col_max_pixels = 0,
            .thin_min_height = 1,
            .xdw_min_bytes = 4 << 20,
            .rnn_prefetch = true,
        },
};

static const char *const ALGO_NAMES[KN_ALGO_COUNT] = {
    [KN_ALGO_WINOGRAD] = "winograd", [KN_ALGO_POINTWISE] = "pointwise", [KN_ALGO_IM2COL] = "im2col",
    [KN_ALGO_THIN] = "thin",         [KN_ALGO_MATMUL] = "matmul",     [KN_ALGO_DIRECT] = "direct",       [KN_ALGO_XDW] = "xdw",
    [KN_ALGO_DNNL] = "dnnl",         [KN_ALGO_DEPTHWISE] = "depthwise",
    [KN_ALGO_STEM] = "stem",
};

const kn_tuning *kn_config_row(kn_cpu_family f)
{
    return f >= 0 && f < KN_FAMILY_COUNT ? &TABLE[f] : NULL;
}

kn_cpu_family kn_config_family_of(uint64_t features, const kn_cpu_id *id)
{
    if (!(features & KN_CPU_AVX512F)) return KN_FAMILY_AVX2;
    if (id->vendor == KN_VENDOR_AMD && id->family >= 0x1a) return KN_FAMILY_ZEN5;
    if (id->vendor == KN_VENDOR_AMD && id->family == 0x19) return KN_FAMILY_ZEN4; /* Zen 3 has no AVX-512 */
    if (id->vendor == KN_VENDOR_INTEL && id->family == 6) {
        switch (id->model) {
        case 0x8f: /* Sapphire Rapids */
        case 0xcf: /* Emerald Rapids */
        case 0xad: /* Granite Rapids */
        case 0xae: return KN_FAMILY_INTEL_SPR;
        default: break;
        }
    }
    return KN_FAMILY_AVX512;
}

/* The row KILN_TUNE_FAMILY names, -1 when it is unset, -2 when invalid. */
static int env_family(void)
{
    const char *v = getenv("KILN_TUNE_FAMILY");
    if (!v || !*v) return -1;
    for (int f = 0; f < KN_FAMILY_COUNT; f++)
        if (!strcmp(v, TABLE[f].name)) return f;
    return -2;
}

kn_cpu_family kn_config_family(void)
{
    int f = env_family();
    if (f >= 0) return (kn_cpu_family)f;
    kn_cpu_id id;
    kn_cpu_ident(&id);
    return kn_config_family_of(kn_cpu_features(), &id);
}

const kn_tuning *kn_config_tuning(void) { return &TABLE[kn_config_family()]; }

const char *kn_config_algo_name(kn_conv_algo a)
{
    return a >= 0 && a < KN_ALGO_COUNT ? ALGO_NAMES[a] : "auto";
}

/* The algorithm KILN_CONV_ALGO names, AUTO when unset or "auto",
 * KN_ALGO_COUNT when invalid. */
static int env_algo(void)
{
    const char *v = getenv("KILN_CONV_ALGO");
    if (!v || !*v || !strcmp(v, "auto")) return KN_ALGO_AUTO;
    for (int a = 0; a < KN_ALGO_COUNT; a++)
        if (!strcmp(v, ALGO_NAMES[a])) return a;
    return KN_ALGO_COUNT;
}

kn_conv_algo kn_config_conv_algo(void)
{
    int a = env_algo();
    return a == KN_ALGO_COUNT ? KN_ALGO_AUTO : (kn_conv_algo)a;
}

static const char *const KERNEL_PATHS[KN_KERNEL_PATH_COUNT] = {"auto", "portable", "ref"};

/* The value of the environment variable `var`, KN_KERNEL_PATH_COUNT when
 * invalid. */
static int env_path(const char *var)
{
    const char *v = getenv(var);
    if (!v || !*v) return KN_KERNEL_PATH_AUTO;
    for (int a = 0; a < KN_KERNEL_PATH_COUNT; a++)
        if (!strcmp(v, KERNEL_PATHS[a])) return a;
    return KN_KERNEL_PATH_COUNT;
}

static kn_kernel_path path_of(const char *var)
{
    int a = env_path(var);
    return a == KN_KERNEL_PATH_COUNT ? KN_KERNEL_PATH_AUTO : (kn_kernel_path)a;
}

static int check_path(const char *var, const char *what)
{
    if (env_path(var) == KN_KERNEL_PATH_COUNT)
        return kn_error(KN_ERR_INVALID, "%s='%s': not a %s path (auto, portable, ref)", var, getenv(var), what);
    return KN_OK;
}

kn_kernel_path kn_config_rnn_path(void) { return path_of("KILN_RNN"); }
kn_kernel_path kn_config_attention_path(void) { return path_of("KILN_ATTENTION"); }
int kn_config_check_rnn(void) { return check_path("KILN_RNN", "recurrent-layer"); }
int kn_config_check_attention(void) { return check_path("KILN_ATTENTION", "attention"); }

int kn_config_thread_policy(kn_thread_policy *out)
{
    const char *v = getenv("KILN_THREADS");
    *out = KN_THREADS_ADAPTIVE;
    if (!v || !*v || !strcmp(v, "adaptive")) return KN_OK;
    if (!strcmp(v, "fixed")) {
        *out = KN_THREADS_FIXED;
        return KN_OK;
    }
    return kn_error(KN_ERR_INVALID, "KILN_THREADS='%s': not a thread policy (adaptive, fixed)", v);
}

int kn_config_check(void)
{
    if (env_family() == -2)
        return kn_error(KN_ERR_INVALID,
                        "KILN_TUNE_FAMILY='%s': not a CPU family of the tuning table "
                        "(zen5, zen4, intel-spr, avx512, avx2)",
                        getenv("KILN_TUNE_FAMILY"));
    if (env_algo() == KN_ALGO_COUNT)
        return kn_error(KN_ERR_INVALID,
                        "KILN_CONV_ALGO='%s': not a convolution algorithm "
                        "(auto, winograd, pointwise, im2col, thin, xdw, matmul, direct, dnnl, depthwise, stem)",
                        getenv("KILN_CONV_ALGO"));
    return KN_OK;
}
