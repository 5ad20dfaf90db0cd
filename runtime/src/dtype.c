/* Dtype traits and scalar conversions behind kiln/dtype.h. */
#include "kiln/dtype.h"

#include <math.h>
#include <string.h>

static const kn_dtype_traits k_traits[KN_DT_COUNT] = {
    [KN_F32] = {"f32", "<f4", 32, true, true, false, "FLOAT"},
    [KN_U8] = {"u8", "|u1", 8, false, false, true, "UINT8"},
    [KN_I8] = {"i8", "|i1", 8, false, true, true, "INT8"},
    [KN_U16] = {"u16", "<u2", 16, false, false, true, "UINT16"},
    [KN_I16] = {"i16", "<i2", 16, false, true, true, "INT16"},
    [KN_I32] = {"i32", "<i4", 32, false, true, true, "INT32"},
    [KN_I64] = {"i64", "<i8", 64, false, true, true, "INT64"},
    [KN_STRING] = {"string", NULL, 0, false, false, false, "STRING"},
    [KN_BOOL] = {"bool", "|b1", 8, false, false, false, "BOOL"},
    [KN_F16] = {"f16", "<f2", 16, true, true, false, "FLOAT16"},
    [KN_F64] = {"f64", "<f8", 64, true, true, false, "DOUBLE"},
    [KN_U32] = {"u32", "<u4", 32, false, false, true, "UINT32"},
    [KN_U64] = {"u64", "<u8", 64, false, false, true, "UINT64"},
    [KN_BF16] = {"bf16", NULL, 16, true, true, false, "BFLOAT16"},
    [KN_UINT4] = {"u4", NULL, 4, false, false, true, "UINT4"},
    [KN_INT4] = {"i4", NULL, 4, false, true, true, "INT4"},
};

static const kn_dtype_traits k_unknown = {0};

const kn_dtype_traits *kn_dtype_info(int dt)
{
    if (dt <= 0 || dt >= KN_DT_COUNT || !k_traits[dt].name) return &k_unknown;
    return &k_traits[dt];
}

bool kn_dtype_valid(int dt) { return dt != KN_STRING && kn_dtype_info(dt)->name != NULL; }

const char *kn_dtype_name(int dt)
{
    const char *n = kn_dtype_info(dt)->name;
    return n ? n : "?";
}

kn_dtype kn_dtype_from_name(const char *name)
{
    for (int i = 1; i < KN_DT_COUNT; i++)
        if (k_traits[i].name && strcmp(k_traits[i].name, name) == 0) return (kn_dtype)i;
    return KN_DT_UNDEFINED;
}

kn_dtype kn_dtype_from_onnx_name(const char *name)
{
    for (int i = 1; name && i < KN_DT_COUNT; i++)
        if (k_traits[i].onnx_name && strcmp(k_traits[i].onnx_name, name) == 0) return (kn_dtype)i;
    return KN_DT_UNDEFINED;
}

const char *kn_onnx_type_name(int code)
{
    switch (code) {
    case 14: return "complex64";
    case 15: return "complex128";
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case KN_STRING: return "string";
    default: return kn_dtype_info(code)->name;
    }
}

size_t kn_dtype_nbytes(kn_dtype dt, size_t n)
{
    unsigned bits = kn_dtype_info(dt)->bits;
    return (n * bits + 7) / 8;
}

size_t kn_dtype_size(kn_dtype dt)
{
    unsigned bits = kn_dtype_info(dt)->bits;
    return bits % 8 ? 0 : bits / 8;
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float kn_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13)); /* inf/nan */
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t kn_f32_to_f16(float f)
{
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t absu = u & 0x7fffffffu;
    if (absu >= 0x7f800000u) /* inf or nan */
        return sign | 0x7c00 | (absu > 0x7f800000u ? 0x200 : 0);
    if (absu >= 0x477ff000u) return sign | 0x7c00; /* rounds to >= 65520: inf */
    if (absu < 0x38800000u) {
        /* result is subnormal or zero: round(|f| * 2^24) to nearest even */
        float a = u2f(absu) * 16777216.0f;
        return sign | (uint16_t)lrintf(a);
    }
    uint32_t exp = (absu >> 23) - 112;
    uint32_t man = absu & 0x7fffff;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return sign | (uint16_t)h;
}

float kn_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t kn_f32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static int nibble(const void *data, size_t i, bool is_signed)
{
    uint8_t b = ((const uint8_t *)data)[i / 2];
    int v = (i & 1) ? (b >> 4) : (b & 0xf);
    if (is_signed && v >= 8) v -= 16;
    return v;
}

static void set_nibble(void *data, size_t i, int v)
{
    uint8_t *b = (uint8_t *)data + i / 2;
    uint8_t n = (uint8_t)(v & 0xf);
    *b = (i & 1) ? (uint8_t)((*b & 0x0f) | (n << 4)) : (uint8_t)((*b & 0xf0) | n);
}

double kn_load_f64(kn_dtype dt, const void *p, size_t i)
{
    switch (dt) {
    case KN_F32: return ((const float *)p)[i];
    case KN_F64: return ((const double *)p)[i];
    case KN_F16: return kn_f16_to_f32(((const uint16_t *)p)[i]);
    case KN_BF16: return kn_bf16_to_f32(((const uint16_t *)p)[i]);
    case KN_U64: return (double)((const uint64_t *)p)[i];
    default: return (double)kn_load_i64(dt, p, i);
    }
}

int64_t kn_load_i64(kn_dtype dt, const void *p, size_t i)
{
    switch (dt) {
    case KN_BOOL: return ((const uint8_t *)p)[i] != 0;
    case KN_U8: return ((const uint8_t *)p)[i];
    case KN_I8: return ((const int8_t *)p)[i];
    case KN_U16: return ((const uint16_t *)p)[i];
    case KN_I16: return ((const int16_t *)p)[i];
    case KN_U32: return ((const uint32_t *)p)[i];
    case KN_I32: return ((const int32_t *)p)[i];
    case KN_I64: return ((const int64_t *)p)[i];
    case KN_U64: return (int64_t)((const uint64_t *)p)[i];
    case KN_INT4: return nibble(p, i, true);
    case KN_UINT4: return nibble(p, i, false);
    case KN_F32: case KN_F64: case KN_F16: case KN_BF16: {
        double d = kn_load_f64(dt, p, i);
        if (d != d) return 0;
        if (d >= 9.2233720368547758e18) return INT64_MAX;
        if (d <= -9.2233720368547758e18) return INT64_MIN;
        return (int64_t)d;
    }
    default: return 0;
    }
}

uint64_t kn_load_u64(kn_dtype dt, const void *p, size_t i)
{
    if (dt == KN_U64) return ((const uint64_t *)p)[i];
    if (kn_dtype_info(dt)->is_float) {
        double d = kn_load_f64(dt, p, i);
        if (d != d || d <= 0) return d < 0 ? (uint64_t)(int64_t)d : 0;
        if (d >= 1.8446744073709552e19) return UINT64_MAX;
        return (uint64_t)d;
    }
    return (uint64_t)kn_load_i64(dt, p, i);
}

void kn_store_f64(kn_dtype dt, void *p, size_t i, double v)
{
    switch (dt) {
    case KN_F32: ((float *)p)[i] = (float)v; return;
    case KN_F64: ((double *)p)[i] = v; return;
    case KN_F16: ((uint16_t *)p)[i] = kn_f32_to_f16((float)v); return;
    case KN_BF16: ((uint16_t *)p)[i] = kn_f32_to_bf16((float)v); return;
    case KN_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    case KN_U64: kn_store_u64(dt, p, i, v != v || v < 0 ? (uint64_t)(int64_t)v : v >= 1.8446744073709552e19 ? UINT64_MAX : (uint64_t)v); return;
    default: {
        int64_t x;
        if (v != v) x = 0;
        else if (v >= 9.2233720368547758e18) x = INT64_MAX;
        else if (v <= -9.2233720368547758e18) x = INT64_MIN;
        else x = (int64_t)v;
        kn_store_i64(dt, p, i, x);
    }
    }
}

void kn_store_i64(kn_dtype dt, void *p, size_t i, int64_t v)
{
    switch (dt) {
    case KN_BOOL: ((uint8_t *)p)[i] = v != 0; return;
    case KN_U8: ((uint8_t *)p)[i] = (uint8_t)v; return;
    case KN_I8: ((int8_t *)p)[i] = (int8_t)v; return;
    case KN_U16: ((uint16_t *)p)[i] = (uint16_t)v; return;
    case KN_I16: ((int16_t *)p)[i] = (int16_t)v; return;
    case KN_U32: ((uint32_t *)p)[i] = (uint32_t)v; return;
    case KN_I32: ((int32_t *)p)[i] = (int32_t)v; return;
    case KN_I64: ((int64_t *)p)[i] = v; return;
    case KN_U64: ((uint64_t *)p)[i] = (uint64_t)v; return;
    case KN_INT4: case KN_UINT4: set_nibble(p, i, (int)v); return;
    case KN_F32: case KN_F64: case KN_F16: case KN_BF16: kn_store_f64(dt, p, i, (double)v); return;
    default: return;
    }
}

void kn_store_u64(kn_dtype dt, void *p, size_t i, uint64_t v)
{
    if (dt == KN_U64) ((uint64_t *)p)[i] = v;
    else if (kn_dtype_info(dt)->is_float) kn_store_f64(dt, p, i, (double)v);
    else kn_store_i64(dt, p, i, (int64_t)v);
}
