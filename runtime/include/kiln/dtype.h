/*
 * kiln/dtype.h — element types and their traits.
 *
 * The numeric values equal ONNX's TensorProto.DataType, so importing and
 * exporting need no table. Packed 4-bit types (KN_INT4, KN_UINT4) store two
 * elements per byte, low nibble first; kn_dtype_nbytes() accounts for that.
 *
 *     size_t n = kn_dtype_nbytes(KN_F32, 1000);        // 4000
 *     float  x = kn_f16_to_f32(h);                     // IEEE half → float
 */
#ifndef KILN_DTYPE_H
#define KILN_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_dtype {
    KN_DT_UNDEFINED = 0,
    KN_F32 = 1,
    KN_U8 = 2,
    KN_I8 = 3,
    KN_U16 = 4,
    KN_I16 = 5,
    KN_I32 = 6,
    KN_I64 = 7,
    KN_STRING = 8, /* recognized so it can be reported; never computed on */
    KN_BOOL = 9,
    KN_F16 = 10,
    KN_F64 = 11,
    KN_U32 = 12,
    KN_U64 = 13,
    KN_BF16 = 16,
    KN_UINT4 = 21,
    KN_INT4 = 22,
    KN_DT_COUNT = 23
} kn_dtype;

typedef struct kn_dtype_traits {
    const char *name;    /* "f32", "i64", ... as used in text IR; NULL if unknown */
    const char *np_name; /* numpy descr ("<f4") or NULL if numpy has none */
    unsigned bits;       /* bits per element (4 for packed int4) */
    bool is_float;
    bool is_signed;      /* for integers; floats are signed too */
    bool is_integer;
    const char *onnx_name; /* TensorProto.DataType's name ("FLOAT", "INT64", ...) */
} kn_dtype_traits;

/* The dtype whose ONNX TensorProto.DataType name is `name` ("FLOAT");
 * KN_DT_UNDEFINED if none. The dtype's code is ONNX's code. */
kn_dtype kn_dtype_from_onnx_name(const char *name);

/* A name for any ONNX TensorProto.DataType code, kiln's own short name
 * ("f32") or one of the types kiln cannot hold ("complex64",
 * "float8e4m3fn", "string"), for messages; NULL if ONNX has no such code. */
const char *kn_onnx_type_name(int code);

/* Traits of `dt`; a zeroed record (name NULL) for values kiln does not know. */
const kn_dtype_traits *kn_dtype_info(int dt);

/* True if `dt` is a dtype kiln can compute with (every one but STRING/unknown). */
bool kn_dtype_valid(int dt);

/* Short name ("f32"); "?" for unknown values. */
const char *kn_dtype_name(int dt);

/* Parses a short name back; KN_DT_UNDEFINED if unknown. */
kn_dtype kn_dtype_from_name(const char *name);

/* Bytes needed for `n` elements (rounded up for packed types). */
size_t kn_dtype_nbytes(kn_dtype dt, size_t n);

/* Bytes per element for byte-addressable types; 0 for packed 4-bit types. */
size_t kn_dtype_size(kn_dtype dt);

float kn_f16_to_f32(uint16_t h);
uint16_t kn_f32_to_f16(float f);  /* round to nearest even */
float kn_bf16_to_f32(uint16_t h);
uint16_t kn_f32_to_bf16(float f); /* round to nearest even, NaN kept */

/* Element i of an array of `dt`, widened to double / int64 (bool → 0/1). */
double kn_load_f64(kn_dtype dt, const void *data, size_t i);
int64_t kn_load_i64(kn_dtype dt, const void *data, size_t i);
uint64_t kn_load_u64(kn_dtype dt, const void *data, size_t i);
/* Stores v into element i, converting like a C cast (float→int truncates,
 * saturating-free; for saturating quantization use the quant kernels). */
void kn_store_f64(kn_dtype dt, void *data, size_t i, double v);
void kn_store_i64(kn_dtype dt, void *data, size_t i, int64_t v);
void kn_store_u64(kn_dtype dt, void *data, size_t i, uint64_t v);

#ifdef __cplusplus
}
#endif
#endif
