/* Small helpers the reference kernels share (k_util.h). */
#include "k_util.h"

#include <string.h>

bool kn_k_is_float(kn_dtype dt) { return kn_dtype_info(dt)->is_float; }

void kn_k_copy_elem(const kn_tensor *src, size_t si, kn_tensor *dst, size_t di, size_t esz)
{
    memcpy((char *)dst->data + di * esz, (const char *)src->data + si * esz, esz);
}

int kn_k_need_bytes(const kn_tensor *t, const char *what)
{
    if (kn_dtype_size(t->dtype) == 0)
        return kn_error(KN_ERR_UNSUPPORTED, "%s: dtype %s is not supported", what, kn_dtype_name(t->dtype));
    return KN_OK;
}

int kn_k_cmp_elems(const kn_tensor *x, size_t a, size_t b)
{
    if (kn_k_is_float(x->dtype)) {
        double u = kn_load_f64(x->dtype, x->data, a), v = kn_load_f64(x->dtype, x->data, b);
        return (u > v) - (u < v);
    }
    if (x->dtype == KN_U64) {
        uint64_t u = kn_load_u64(x->dtype, x->data, a), v = kn_load_u64(x->dtype, x->data, b);
        return (u > v) - (u < v);
    }
    int64_t u = kn_load_i64(x->dtype, x->data, a), v = kn_load_i64(x->dtype, x->data, b);
    return (u > v) - (u < v);
}
