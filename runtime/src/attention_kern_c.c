/*
 * runtime/src/attention_kern_c.c — the portable kernels of the compiled
 * Attention path (attention.h): plain loops the compiler vectorizes, for
 * CPUs without AVX2 and for KILN_ATTENTION=portable.
 */
#include <math.h>
#include <string.h>

#include "attention.h"

static void scores_c(const float *q, int64_t D, const float *kt, int64_t ldk, int64_t n, float *s)
{
    for (int r = 0; r < KN_ATTN_ROWS; r++) {
        float *sr = s + r * ldk;
        memset(sr, 0, (size_t)n * sizeof *sr);
        for (int64_t d = 0; d < D; d++) {
            float qv = q[r * D + d];
            const float *kr = kt + d * ldk;
            for (int64_t j = 0; j < n; j++) sr[j] += qv * kr[j];
        }
    }
}

static void pack_kt_c(const float *k, int64_t ldr, int64_t n, int64_t D, float *kt, int64_t ldk)
{
    int64_t n8 = (n + 7) / 8 * 8;
    for (int64_t d = 0; d < D; d++) {
        float *kr = kt + d * ldk;
        for (int64_t j = 0; j < n; j++) kr[j] = k[j * ldr + d];
        for (int64_t j = n; j < n8; j++) kr[j] = 0;
    }
}

static float softmax_step_c(float *s, const float *add, int64_t n, float *m)
{
    if (add)
        for (int64_t j = 0; j < n; j++) s[j] += add[j];
    float mx = *m;
    for (int64_t j = 0; j < n; j++) mx = s[j] > mx || isnan(s[j]) ? s[j] : mx;
    if (isnan(mx)) return *m = NAN;
    if (mx == -INFINITY) {
        memset(s, 0, (size_t)n * sizeof *s);
        return 0;
    }
    float sum = 0;
    for (int64_t j = 0; j < n; j++) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    *m = mx;
    return sum;
}

static void pv_c(const float *p, int64_t ldp, int64_t n, const float *v, int64_t ldv, int64_t dv, float *o,
                 int64_t ldo)
{
    for (int r = 0; r < KN_ATTN_ROWS; r++)
        for (int64_t j = 0; j < n; j++) {
            float w = p[r * ldp + j];
            const float *vr = v + j * ldv;
            float *orow = o + r * ldo;
            for (int64_t e = 0; e < dv; e++) orow[e] += w * vr[e];
        }
}

static void scale_c(float *y, const float *x, int64_t n, float a)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * a;
}

const kn_attn_kern kn_attn_kern_portable = {.isa = "portable",
                                            .impl = "kiln attention:portable",
                                            .pack_kt = pack_kt_c,
                                            .scores = scores_c,
                                            .softmax_step = softmax_step_c,
                                            .pv = pv_c,
                                            .scale = scale_c};
