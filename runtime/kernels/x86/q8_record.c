/*
 * runtime/kernels/x86/q8_record.c — what kiln's int8 convolution kernels
 * (u8_dw3x3_avx512.c, u8_stem_avx512.c) ask of a kiln::QConv record alike:
 * the CPU (AVX-512 BW and VNNI), static rank-4 tensors, u8 input, s8
 * weights, u8 or s8 output, constant weights, scales and bias, zero points
 * in range, and post-ops that are one clamp; the clamp in output bytes;
 * and how the row-parallel kernels cut their rows.
 */
#include <math.h>
#include <stdint.h>

#include "rt_internal.h"

bool kn_abi_static_dims(const kn_abi_tensor *t)
{
    for (int d = 0; d < t->rank && d < 8; d++)
        if (t->dim_sym[d] || t->dims[d] < 1) return false;
    return t->slot == 0;
}

bool kn_q8_posts_clamp(const kn_abi_dnnl *rec, float *lo, float *hi)
{
    *lo = -INFINITY, *hi = INFINITY;
    if (rec->n_post < 0 || rec->n_post > 4) return false;
    for (int i = 0; i < rec->n_post; i++) {
        const kn_abi_post *p = &rec->post[i];
        float a = -INFINITY, b = INFINITY;
        if (p->kind == KN_POST_NONE) continue;
        if (p->kind == KN_POST_RELU && p->alpha == 0.f)
            a = 0.f;
        else if (p->kind == KN_POST_CLIP && !isnan(p->alpha) && !isnan(p->beta) && p->alpha <= p->beta)
            a = p->alpha, b = p->beta;
        else
            return false;
        /* clamp(clamp(v, lo, hi), a, b) is clamp(v, max(lo, a), min(hi, b))
         * while that range is not empty, else the constant it pins to */
        float nlo = fmaxf(*lo, a), nhi = fminf(*hi, b);
        if (nlo > nhi) nlo = nhi = a > *hi ? a : b;
        *lo = nlo, *hi = nhi;
    }
    return true;
}

bool kn_q8_record_ok(const kn_abi_dnnl *rec)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const uint32_t need = KN_CPU_AVX512F | KN_CPU_AVX512BW | KN_CPU_AVX512VNNI;
    if ((kn_cpu_features() & need) != need) return false;
    if (rec->kind != KN_DNNL_CONV || rec->spatial != 2 || rec->n_scale < 1) return false;
    if (rec->src.dtype != KN_U8 || rec->wei.dtype != KN_I8 || (rec->dst.dtype != KN_U8 && rec->dst.dtype != KN_I8))
        return false;
    const kn_abi_tensor *ts[] = {&rec->src, &rec->wei, &rec->dst};
    for (int i = 0; i < 3; i++)
        if (ts[i]->rank != 4 || !kn_abi_static_dims(ts[i])) return false;
    int64_t O = rec->wei.dims[0];
    if (rec->dst.dims[0] != rec->src.dims[0] || rec->dst.dims[1] != O) return false;
    bool has_bias = !(rec->bias.rank == 0 && rec->bias.nbytes == 0);
    if (rec->wei_ref.loc != KN_LOC_WEIGHTS || rec->scale_ref.loc != KN_LOC_WEIGHTS ||
        (rec->n_scale != 1 && rec->n_scale != O) ||
        (has_bias && (rec->bias_ref.loc != KN_LOC_WEIGHTS || rec->bias.dtype != KN_F32 || rec->bias.nbytes != O * 4)))
        return false;
    int32_t qmin = rec->dst.dtype == KN_U8 ? 0 : -128;
    if (rec->src_zp < 0 || rec->src_zp > 255 || rec->dst_zp < qmin || rec->dst_zp > qmin + 255) return false;
    float lo, hi;
    return kn_q8_posts_clamp(rec, &lo, &hi);
#else
    (void)rec;
    return false;
#endif
}

void kn_q8_byte_clamp(const kn_abi_dnnl *rec, int8_t *lo, int8_t *hi)
{
    float l, h;
    kn_q8_posts_clamp(rec, &l, &h);
    /* round(clamp(v, l, h)) is clamp(round(v), round(l), round(h)) */
    int qmin = rec->dst.dtype == KN_I8 ? -128 : 0, qmax = qmin + 255;
    double zy = rec->dst_zp, a = nearbyint((double)l + zy), b = nearbyint((double)h + zy);
    *lo = (int8_t)(a < qmin ? qmin : a > qmax ? qmax : a);
    *hi = (int8_t)(b < qmin ? qmin : b > qmax ? qmax : b);
}

int64_t kn_row_bands(int64_t rows, int threads)
{
    int64_t parts = threads < 1 ? 1 : threads;
    if (threads > 1 && rows >= 64 * (int64_t)threads) parts = 4 * (int64_t)threads;
    return parts > rows ? rows : parts;
}
