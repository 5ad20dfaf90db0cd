/*
 * nn_attention.c — the transformer kernels of the nn family:
 * RMSNormalization, Attention (opset 23/24) and RotaryEmbedding.
 *
 * Attention works on f32 copies in B x H x T x D layout (which are also the
 * present_key/present_value outputs). Scores are formed a block of query
 * rows at a time against K transposed (T contiguous), so the inner loops are
 * unit-stride multiply-adds the compiler vectorizes without reassociating;
 * the weighted sum of V rows is an axpy per key. This is the reference
 * evaluator's kernel and the oracle of the flash-style kernel compiled
 * artifacts run (runtime/src/attention.c; KILN_ATTENTION=ref selects this
 * one there too).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "k_nn.h"

static inline float ld32(kn_dtype dt, const void *data, size_t i)
{
    return dt == KN_F32 ? ((const float *)data)[i] : (float)kn_load_f64(dt, data, i);
}

/* ---- RMSNormalization ------------------------------------------------------ */

int kn_k_rmsnorm(const kn_tensor *x, int axis, const kn_tensor *scale, double eps, kn_tensor *y)
{
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->dims[d];
    for (int d = axis; d < x->rank; d++) inner *= x->dims[d];
    int64_t ss[KN_MAX_RANK];
    kn_broadcast_strides(scale->rank, scale->dims, x->rank, x->dims, ss);
    kn_index it;
    kn_index_init(&it, x->rank, x->dims);
    for (int64_t o = 0; o < outer; o++) {
        double q = 0;
        for (int64_t i = 0; i < inner; i++) {
            double v = kn_load_f64(x->dtype, x->data, (size_t)(o * inner + i));
            q += v * v;
        }
        double r = 1.0 / sqrt((inner ? q / (double)inner : 0.0) + eps);
        for (int64_t i = 0; i < inner; i++, kn_index_next(&it)) {
            size_t at = (size_t)(o * inner + i);
            double v = kn_load_f64(x->dtype, x->data, at) * r;
            v *= kn_load_f64(scale->dtype, scale->data, (size_t)kn_index_offset(&it, ss));
            kn_store_f64(y->dtype, y->data, at, v);
        }
    }
    return KN_OK;
}

/* ---- Attention ----------------------------------------------------------------- */

/* Element (b, h, s, d) of a 4-D B x H x S x Dh tensor, or of its 3-D
 * B x S x (H*Dh) form. */
static inline size_t at4(bool three_d, int64_t H, int64_t S, int64_t Dh, int64_t b, int64_t h, int64_t s,
                         int64_t d)
{
    return three_d ? (size_t)(((b * S + s) * H + h) * Dh + d) : (size_t)(((b * H + h) * S + s) * Dh + d);
}

/* dst (B x H x (P+S) x Dh, f32): past rows, then the new ones. */
static void gather_kv(float *dst, const kn_tensor *past, const kn_tensor *cur, bool three_d, int64_t B,
                      int64_t H, int64_t P, int64_t S, int64_t Dh)
{
    int64_t T = P + S;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            float *o = dst + (b * H + h) * T * Dh;
            for (int64_t t = 0; t < P; t++)
                for (int64_t d = 0; d < Dh; d++)
                    o[t * Dh + d] = ld32(past->dtype, past->data, (size_t)(((b * H + h) * P + t) * Dh + d));
            for (int64_t s = 0; s < S; s++)
                for (int64_t d = 0; d < Dh; d++)
                    o[(P + s) * Dh + d] = ld32(cur->dtype, cur->data, at4(three_d, H, S, Dh, b, h, s, d));
        }
}

static void store_all(kn_tensor *t, const float *v, int64_t n)
{
    if (t->dtype == KN_F32) {
        memcpy(t->data, v, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++) kn_store_f64(t->dtype, t->data, (size_t)i, v[i]);
}

static void store_at(kn_tensor *t, size_t off, const float *v, int64_t n)
{
    if (t->dtype == KN_F32) {
        memcpy((float *)t->data + off, v, (size_t)n * sizeof(float));
        return;
    }
    for (int64_t i = 0; i < n; i++) kn_store_f64(t->dtype, t->data, off + (size_t)i, v[i]);
}

#define ATTN_ROWS 4 /* query rows scored together against one pass over K^T */

int kn_k_attention(const kn_attn_dims *dm, const kn_attn_params *pr, const kn_tensor *q,
                   const kn_tensor *k, const kn_tensor *v, const kn_tensor *mask,
                   const kn_tensor *past_k, const kn_tensor *past_v, const kn_tensor *nonpad,
                   kn_tensor *y, kn_tensor *present_k, kn_tensor *present_v, kn_tensor *qk)
{
    const int64_t B = dm->B, Hq = dm->Hq, Hkv = dm->Hkv, Sq = dm->Sq, P = dm->P, D = dm->D, Dv = dm->Dv;
    const int64_t T = P + dm->Skv, grp = Hq / Hkv;
    float *kb = malloc((size_t)(B * Hkv * T * D + 1) * sizeof(float));
    float *vb = malloc((size_t)(B * Hkv * T * Dv + 1) * sizeof(float));
    float *kt = malloc((size_t)(T * D + 1) * sizeof(float));
    float *qr = malloc((size_t)(ATTN_ROWS * D + 1) * sizeof(float));
    float *sc = malloc((size_t)(ATTN_ROWS * T + 1) * sizeof(float));
    float *orow = malloc((size_t)(Dv + 1) * sizeof(float));
    if (!kb || !vb || !kt || !qr || !sc || !orow) {
        free(kb), free(vb), free(kt), free(qr), free(sc), free(orow);
        return kn_error(KN_ERR_NOMEM, "Attention: out of memory");
    }
    gather_kv(kb, past_k, k, dm->three_d, B, Hkv, P, dm->Skv, D);
    gather_kv(vb, past_v, v, dm->three_d, B, Hkv, P, dm->Skv, Dv);
    if (present_k) store_all(present_k, kb, B * Hkv * T * D);
    if (present_v) store_all(present_v, vb, B * Hkv * T * Dv);

    /* The mask's strides over (B, Hq, Sq) and its last axis's length. */
    int64_t ms[3] = {0, 0, 0}, mlast = 0;
    if (mask) {
        int mr = mask->rank;
        mlast = mr ? mask->dims[mr - 1] : 1;
        int64_t stride = mlast;
        for (int a = 2; a >= 0; a--) {
            int ma = mr - 1 - (3 - a);
            if (ma < 0) continue;
            ms[a] = mask->dims[ma] == 1 ? 0 : stride;
            stride *= mask->dims[ma];
        }
    }
    const float scale = (float)pr->scale, cap = (float)pr->softcap;

    for (int64_t b = 0; b < B; b++) {
        int64_t valid = T;
        if (nonpad) {
            valid = kn_load_i64(nonpad->dtype, nonpad->data, (size_t)b);
            if (valid < 0) valid = 0;
            if (valid > T) valid = T;
        }
        for (int64_t hk = 0; hk < Hkv; hk++) {
            const float *K = kb + (b * Hkv + hk) * T * D, *V = vb + (b * Hkv + hk) * T * Dv;
            for (int64_t t = 0; t < T; t++) /* K^T: D x T */
                for (int64_t d = 0; d < D; d++) kt[d * T + t] = K[t * D + d];
            for (int64_t h = hk * grp; h < (hk + 1) * grp; h++)
                for (int64_t i0 = 0; i0 < Sq; i0 += ATTN_ROWS) {
                    int64_t nr = Sq - i0 < ATTN_ROWS ? Sq - i0 : ATTN_ROWS;
                    for (int64_t r = 0; r < nr; r++)
                        for (int64_t d = 0; d < D; d++)
                            qr[r * D + d] =
                                ld32(q->dtype, q->data, at4(dm->three_d, Hq, Sq, D, b, h, i0 + r, d)) * scale;
                    memset(sc, 0, (size_t)(nr * T) * sizeof(float));
                    for (int64_t d = 0; d < D; d++) {
                        const float *kr = kt + d * T;
                        for (int64_t r = 0; r < nr; r++) {
                            float qv = qr[r * D + d];
                            float *s = sc + r * T;
                            for (int64_t t = 0; t < T; t++) s[t] += qv * kr[t];
                        }
                    }
                    for (int64_t r = 0; r < nr; r++) {
                        int64_t i = i0 + r;
                        float *s = sc + r * T;
                        if (cap > 0)
                            for (int64_t t = 0; t < T; t++) s[t] = cap * tanhf(s[t] / cap);
                        size_t qo = (size_t)((((b * Hq + h) * Sq) + i) * T);
                        if (qk && pr->qk_mode < 2) store_at(qk, qo, s, T);
                        for (int64_t t = 0; t < T; t++) {
                            float m = 0;
                            if (mask) {
                                if (t >= mlast) {
                                    m = -INFINITY;
                                } else {
                                    size_t mo = (size_t)(b * ms[0] + h * ms[1] + i * ms[2] + t);
                                    m = mask->dtype == KN_BOOL ? (((const uint8_t *)mask->data)[mo] ? 0.0f : -INFINITY)
                                                               : ld32(mask->dtype, mask->data, mo);
                                }
                            }
                            if (pr->causal && t > i + P) m += -INFINITY;
                            if (t >= valid) m += -INFINITY;
                            s[t] += m;
                        }
                        if (qk && pr->qk_mode == 2) store_at(qk, qo, s, T);
                        float mx = -INFINITY;
                        for (int64_t t = 0; t < T; t++) mx = s[t] > mx || isnan(s[t]) ? s[t] : mx;
                        double sum = 0;
                        for (int64_t t = 0; t < T; t++) {
                            s[t] = expf(s[t] - mx);
                            sum += s[t];
                        }
                        float inv = (float)(1.0 / sum);
                        for (int64_t t = 0; t < T; t++) s[t] *= inv;
                        if (qk && pr->qk_mode == 3) store_at(qk, qo, s, T);
                        memset(orow, 0, (size_t)Dv * sizeof(float));
                        for (int64_t t = 0; t < T; t++) {
                            float w = s[t];
                            const float *vr = V + t * Dv;
                            for (int64_t d = 0; d < Dv; d++) orow[d] += w * vr[d];
                        }
                        for (int64_t d = 0; d < Dv; d++)
                            kn_store_f64(y->dtype, y->data, at4(dm->three_d, Hq, Sq, Dv, b, h, i, d), orow[d]);
                    }
                }
        }
    }
    free(kb), free(vb), free(kt), free(qr), free(sc), free(orow);
    return KN_OK;
}

/* ---- RotaryEmbedding ------------------------------------------------------------ */

int kn_k_rotary(const kn_tensor *x, const kn_tensor *cosc, const kn_tensor *sinc, const kn_tensor *pos,
                int64_t H, int64_t rot_dim, bool interleaved, bool three_d, kn_tensor *y)
{
    int64_t B = x->dims[0], S = three_d ? x->dims[1] : x->dims[2];
    int64_t D = three_d ? x->dims[2] / H : x->dims[3], half = rot_dim / 2;
    int64_t maxpos = pos ? cosc->dims[0] : 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++) {
            int64_t row; /* row of the caches */
            if (pos) {
                row = kn_load_i64(pos->dtype, pos->data, (size_t)(b * S + s));
                if (row < 0 || row >= maxpos)
                    return kn_error(KN_ERR_INVALID, "RotaryEmbedding: position id %lld is outside the caches' %lld rows",
                                    (long long)row, (long long)maxpos);
            } else {
                row = b * S + s;
            }
            for (int64_t h = 0; h < H; h++) {
                size_t base = at4(three_d, H, S, D, b, h, s, 0);
                for (int64_t j = 0; j < half; j++) {
                    double c = kn_load_f64(cosc->dtype, cosc->data, (size_t)(row * half + j));
                    double sn = kn_load_f64(sinc->dtype, sinc->data, (size_t)(row * half + j));
                    size_t i1 = base + (size_t)(interleaved ? 2 * j : j);
                    size_t i2 = base + (size_t)(interleaved ? 2 * j + 1 : j + half);
                    double x1 = kn_load_f64(x->dtype, x->data, i1), x2 = kn_load_f64(x->dtype, x->data, i2);
                    kn_store_f64(y->dtype, y->data, i1, c * x1 - sn * x2);
                    kn_store_f64(y->dtype, y->data, i2, sn * x1 + c * x2);
                }
                for (int64_t d = rot_dim; d < D; d++)
                    kn_store_f64(y->dtype, y->data, base + (size_t)d, kn_load_f64(x->dtype, x->data, base + (size_t)d));
            }
        }
    return KN_OK;
}
