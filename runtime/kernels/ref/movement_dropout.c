/*
 * Training-mode Dropout (see k_movement.h). The mask comes from MT19937
 * seeded and sampled exactly as numpy's legacy RandomState does, because the
 * ONNX reference (and its test data) is defined by that generator.
 */
#include "k_movement.h"


enum { MT_N = 624, MT_M = 397 };

typedef struct mt_state {
    uint32_t key[MT_N];
    int pos;
} mt_state;

/* numpy's mt19937_seed (Knuth's initializer, as init_genrand). */
static void mt_seed(mt_state *s, uint32_t seed)
{
    for (int i = 0; i < MT_N; i++) {
        s->key[i] = seed;
        seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)i + 1u;
    }
    s->pos = MT_N;
}

static void mt_twist(mt_state *s)
{
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (s->key[k] & 0x80000000u) | (s->key[(k + 1) % MT_N] & 0x7fffffffu);
        s->key[k] = s->key[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    s->pos = 0;
}

static uint32_t mt_next(mt_state *s)
{
    if (s->pos >= MT_N) mt_twist(s);
    uint32_t y = s->key[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* numpy's random_sample: 53 random bits from two draws. */
static double mt_double(mt_state *s)
{
    uint32_t a = mt_next(s) >> 5, b = mt_next(s) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

int kn_k_dropout_train(const kn_tensor *x, double ratio, uint32_t seed, kn_tensor *out, kn_tensor *mask)
{
    const kn_dtype_traits *tr = kn_dtype_info(x->dtype);
    if (!tr->is_float) return kn_error(KN_ERR_UNSUPPORTED, "dropout of dtype %s", kn_dtype_name(x->dtype));
    if (!(ratio >= 0 && ratio < 1)) return kn_error(KN_ERR_INVALID, "ratio %g must be in [0, 1)", ratio);
    if (out->dtype != x->dtype || kn_tensor_numel(out) != kn_tensor_numel(x) ||
        (mask && (mask->dtype != KN_BOOL || kn_tensor_numel(mask) != kn_tensor_numel(x))))
        return kn_error(KN_ERR_INTERNAL, "dropout: outputs do not match the input");
    mt_state st;
    mt_seed(&st, seed);
    /* The reference computes the scale in the input's precision. */
    float scale_f = 1.0f / (1.0f - (float)ratio);
    double scale_d = 1.0 / (1.0 - ratio);
    int64_t n = kn_tensor_numel(x);
    for (int64_t i = 0; i < n; i++) {
        bool keep = mt_double(&st) >= ratio;
        if (mask) ((uint8_t *)mask->data)[i] = keep;
        if (x->dtype == KN_F32) ((float *)out->data)[i] = keep ? ((const float *)x->data)[i] * scale_f : 0.0f;
        else kn_store_f64(out->dtype, out->data, (size_t)i, keep ? kn_load_f64(x->dtype, x->data, (size_t)i) * scale_d : 0.0);
    }
    return KN_OK;
}
