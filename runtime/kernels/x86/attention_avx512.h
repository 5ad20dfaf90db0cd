/*
 * runtime/kernels/x86/attention_avx512.h — what the AVX-512 attention
 * kernels share: the f32 table's kernels (f32_attention_avx512.c) that the
 * bf16 table (bf16_attention_avx512.c) uses as they are, the 16 x 16
 * register transpose both pack K with, and tail masks. Private to those
 * two files; compiled for AVX-512 by function attributes whatever the
 * build's flags, and called only where the CPU has it.
 */
#ifndef KILN_KERNELS_X86_ATTENTION_AVX512_H
#define KILN_KERNELS_X86_ATTENTION_AVX512_H

#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define KN_ATTN512_TARGET __attribute__((target("avx512f,avx2,fma")))
#define KN_ATTN512_INLINE static inline __attribute__((always_inline))
/* Before every loop over registers (tile rows and columns, transpose
 * rows): unrolled, the arrays of vectors become registers; GCC -O2 leaves
 * such loops rolled and keeps the accumulators in memory, a load and a
 * store around every FMA (the kernels ran slower than the AVX2 ones). */
#define KN_ATTN512_UNROLL _Pragma("GCC unroll 16")

/* The f32 table's softmax_step, pv and scale (attention.h has their
 * contracts). */
KN_ATTN512_TARGET float kn_attn_softmax_step_avx512(float *s, const float *add, int64_t n, float *m);
KN_ATTN512_TARGET void kn_attn_pv_avx512(const float *p, int64_t ldp, int64_t n, const float *v, int64_t ldv, int64_t dv,
                              float *o, int64_t ldo);
KN_ATTN512_TARGET void kn_attn_scale_avx512(float *y, const float *x, int64_t n, float a);

/* Lanes 0 .. n-1 set (none for n <= 0, all 16 for n >= 16). */
KN_ATTN512_INLINE __mmask16 kn_attn512_lanes(int64_t n)
{
    return n <= 0 ? (__mmask16)0 : n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
}

/* Rows 0 .. 15 of r (16 lanes each) transposed in place: r[i] lane c
 * becomes r[c] lane i (f32_attention_avx512.c). */
KN_ATTN512_TARGET __attribute__((visibility("hidden"))) void kn_attn512_transpose16(__m512 r[16]);

#endif

#endif
