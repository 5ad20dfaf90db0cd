/*
 * runtime/src/cpu.c — kn_cpu_features(): which KN_CPU_* instruction sets
 * this machine can run, and kn_cpu_ident(): what cpuid says it is. A feature counts only if the CPU has it AND the OS
 * saves its register state (XCR0 via xgetbv): a CPU with AVX-512 under an
 * OS or hypervisor that does not enable ZMM state would fault on the first
 * AVX-512 instruction, which is exactly what the artifact check must avoid.
 */
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "kiln/abi.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static uint64_t detect(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    uint64_t f = 0;
    if (c & bit_SSE4_2) f |= KN_CPU_SSE42;
    /* without OSXSAVE, xgetbv itself faults and no AVX state is enabled */
    if (!(c & bit_OSXSAVE)) return f;
    uint64_t xcr0 = xgetbv0();
    int ymm_ok = (xcr0 & 0x6) == 0x6;             /* SSE + AVX state */
    int zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
    if (!ymm_ok) return f;
    if (c & bit_AVX) f |= KN_CPU_AVX;
    if (c & bit_FMA) f |= KN_CPU_FMA;
    if (c & bit_F16C) f |= KN_CPU_F16C;
    unsigned b7 = 0, c7 = 0, d7 = 0, a7_1 = 0;
    if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d7)) {
        unsigned max7 = a;
        if (max7 >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) a7_1 = a;
    }
    if (b7 & (1u << 5)) f |= KN_CPU_AVX2;
    if (!zmm_ok) return f;
    if (b7 & (1u << 16)) f |= KN_CPU_AVX512F;
    if (!(f & KN_CPU_AVX512F)) return f;
    if (b7 & (1u << 30)) f |= KN_CPU_AVX512BW;
    if (b7 & (1u << 17)) f |= KN_CPU_AVX512DQ;
    if (b7 & (1u << 31)) f |= KN_CPU_AVX512VL;
    if (c7 & (1u << 11)) f |= KN_CPU_AVX512VNNI;
    if (a7_1 & (1u << 5)) f |= KN_CPU_AVX512BF16;
    if (d7 & (1u << 23)) f |= KN_CPU_AVX512FP16;
    return f;
}
#else
static uint64_t detect(void) { return 0; }
#endif

uint64_t kn_cpu_features(void)
{
    /* the hardware's bits, detected once: cpuid traps to the hypervisor in
     * a VM (tens of microseconds), and creating a session asks for every
     * primitive. Threads that race here store the same value. KILN_CPU_MASK
     * is read at every call (tests change it between sessions). */
    static uint64_t detected;
    static int have;
    uint64_t f;
    if (__atomic_load_n(&have, __ATOMIC_ACQUIRE)) {
        f = __atomic_load_n(&detected, __ATOMIC_RELAXED);
    } else {
        f = detect();
        __atomic_store_n(&detected, f, __ATOMIC_RELAXED);
        __atomic_store_n(&have, 1, __ATOMIC_RELEASE);
    }
    const char *mask = getenv("KILN_CPU_MASK");
    if (mask && *mask) {
        char *end;
        unsigned long long m = strtoull(mask, &end, 0);
        if (*end == '\0') f &= m;
    }
    return f;
}

#if defined(__x86_64__) || defined(__i386__)
/* Vendor, family and model, for the tuning table (config.c). */
void kn_cpu_ident(kn_cpu_id *out)
{
    *out = (kn_cpu_id){KN_VENDOR_OTHER, 0, 0};
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    /* the vendor string's first four letters, in ebx */
    if (b == 0x68747541u) out->vendor = KN_VENDOR_AMD; /* "Auth"enticAMD */
    else if (b == 0x756e6547u) out->vendor = KN_VENDOR_INTEL; /* "Genu"ineIntel */
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    unsigned family = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    /* the extended fields count only for these base families (SDM, APM) */
    if (family == 0xf) family += (a >> 20) & 0xff;
    if (family == 0x6 || family >= 0xf) model |= ((a >> 16) & 0xf) << 4;
    out->family = family, out->model = model;
}
#else
void kn_cpu_ident(kn_cpu_id *out) { *out = (kn_cpu_id){KN_VENDOR_OTHER, 0, 0}; }
#endif
