/* Reference kernels of the 'generate' family (k_generate.h): Range,
 * EyeLike, Trilu, OneHot. */
#include "k_generate.h"

#include <math.h>
#include <string.h>

#include "k_util.h"

int kn_k_range(double fstart, double fdelta, int64_t istart, int64_t idelta, kn_tensor *out)
{
    int64_t n = kn_tensor_numel(out);
    bool flt = kn_k_is_float(out->dtype);
    for (int64_t i = 0; i < n; i++) {
        if (flt) kn_store_f64(out->dtype, out->data, (size_t)i, fstart + (double)i * fdelta);
        else kn_store_i64(out->dtype, out->data, (size_t)i, (int64_t)((uint64_t)istart + (uint64_t)i * (uint64_t)idelta));
    }
    return KN_OK;
}

int kn_k_eyelike(int64_t k, kn_tensor *out)
{
    if (out->rank != 2) return kn_error(KN_ERR_INVALID, "EyeLike: output must be 2-D, got rank %d", out->rank);
    int64_t r = out->dims[0], c = out->dims[1];
    for (int64_t i = 0; i < r; i++) {
        int64_t j = i + k;
        if (j >= 0 && j < c) kn_store_i64(out->dtype, out->data, (size_t)(i * c + j), 1);
    }
    return KN_OK;
}

int kn_k_trilu(const kn_tensor *x, int64_t k, bool upper, kn_tensor *out)
{
    if (x->rank < 2) return kn_error(KN_ERR_INVALID, "Trilu: input rank %d, expected >= 2", x->rank);
    int st = kn_k_need_bytes(x, "Trilu");
    if (st) return st;
    size_t esz = kn_dtype_size(x->dtype);
    int64_t r = x->dims[x->rank - 2], c = x->dims[x->rank - 1];
    int64_t total = kn_tensor_numel(x);
    if (total <= 0) return KN_OK;
    int64_t mats = total / (r * c);
    for (int64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < c; j++) {
                bool keep = upper ? j - i >= k : j - i <= k;
                if (keep) kn_k_copy_elem(x, (size_t)((m * r + i) * c + j), out, (size_t)((m * r + i) * c + j), esz);
            }
    return KN_OK;
}

int kn_k_onehot(const kn_tensor *indices, int64_t depth, const kn_tensor *values, int axis,
                kn_tensor *out)
{
    if (kn_tensor_numel(values) != 2)
        return kn_error(KN_ERR_INVALID, "OneHot: values must hold 2 elements (off, on)");
    int st = kn_k_need_bytes(values, "OneHot");
    if (st) return st;
    size_t esz = kn_dtype_size(values->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= indices->dims[i];
    for (int i = axis; i < indices->rank; i++) inner *= indices->dims[i];
    if (kn_tensor_numel(out) != outer * depth * inner || out->dtype != values->dtype)
        return kn_error(KN_ERR_INTERNAL, "OneHot: output has the wrong size");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < depth; d++)
            for (int64_t i = 0; i < inner; i++)
                kn_k_copy_elem(values, 0, out, (size_t)((o * depth + d) * inner + i), esz);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            size_t k = (size_t)(o * inner + i);
            int64_t v = kn_load_i64(indices->dtype, indices->data, k); /* floats truncate, saturating */
            if (v < 0) v += depth;
            if (v < 0 || v >= depth) continue;
            kn_k_copy_elem(values, 1, out, (size_t)((o * depth + v) * inner + i), esz);
        }
    return KN_OK;
}
