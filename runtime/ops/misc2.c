/*
 * Execution of AffineGrid, DeformConv and TfIdfVectorizer (listed in
 * kn_exec_misc, misc.c), calling the kernels of runtime/kernels/ref/misc2.c.
 * Their attribute and shape rules (misc_int.h) are shared with the IR's
 * type inference.
 */
#include <string.h>

#include "misc_int.h"

/* Fails naming the node if one of its first k inputs is missing. */
static int need(const kn_opdesc *d, const kn_tensor *const *in, int k)
{
    for (int i = 0; i < k; i++)
        if (i >= d->n_inputs || !in[i]) return kn_op_error(d, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

static bool is_float(kn_dtype dt)
{
    return kn_dtype_info(dt)->is_float;
}

/* ---- AffineGrid ------------------------------------------------------------------------ */

/* Reads the size input (N, C, H, W) or (N, C, D, H, W) into dims and s. */
int kn_misc_ag_size(const kn_opdesc *d, const kn_tensor *size, int64_t *dims, int *s)
{
    int64_t cnt = kn_tensor_numel(size);
    if (!kn_dtype_info(size->dtype)->is_integer || size->rank != 1 || (cnt != 4 && cnt != 5))
        return kn_op_error(d, KN_ERR_INVALID, "size must be a 1-D integer tensor of 4 or 5 entries");
    for (int64_t i = 0; i < cnt; i++) {
        dims[i] = kn_load_i64(size->dtype, size->data, (size_t)i);
        if (dims[i] < 0) return kn_op_error(d, KN_ERR_INVALID, "size[%lld] = %lld is negative", (long long)i, (long long)dims[i]);
    }
    *s = (int)cnt - 2;
    return KN_OK;
}

int kn_misc_exec_affine_grid(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need(d, in, 2)) return KN_ERR_INVALID;
    const kn_tensor *th = in[0];
    int64_t sz[5];
    int s;
    int st = kn_misc_ag_size(d, in[1], sz, &s);
    if (st) return st;
    if (!is_float(th->dtype)) return kn_op_error(d, KN_ERR_INVALID, "theta must be floating point, got %s", kn_dtype_name(th->dtype));
    if (th->rank != 3 || th->dims[0] != sz[0] || th->dims[1] != s || th->dims[2] != s + 1)
        return kn_op_error(d, KN_ERR_INVALID, "theta must have shape (%lld, %d, %d) for size of %d entries",
                             (long long)sz[0], s, s + 1, s + 2);
    int64_t dims[5];
    dims[0] = sz[0];
    for (int dv = 0; dv < s; dv++) dims[1 + dv] = sz[2 + dv];
    dims[s + 1] = s;
    st = kn_tensor_alloc(&out[0], th->dtype, s + 2, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_affine_grid(th, s, &sz[2], kn_op_attr_int(d, "align_corners", 0) != 0, &out[0]));
}

/* ---- DeformConv ------------------------------------------------------------------------ */

/* Fills p from the attributes for spatial rank s and kernel dims kd (from
 * W); fails naming the node on inconsistent attribute lengths or values. */
int kn_misc_dc_params(const kn_opdesc *d, int s, const int64_t *kd, kn_deform_params *p)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    p->group = kn_op_attr_int(d, "group", 1);
    p->offset_group = kn_op_attr_int(d, "offset_group", 1);
    if (p->group <= 0 || p->offset_group <= 0)
        return kn_op_error(d, KN_ERR_INVALID, "group %lld / offset_group %lld must be positive", (long long)p->group,
                             (long long)p->offset_group);
    const int64_t *ks, *pads, *strides, *dil;
    int nk = kn_op_attr_ints(d, "kernel_shape", &ks), np = kn_op_attr_ints(d, "pads", &pads);
    int ns = kn_op_attr_ints(d, "strides", &strides), nd = kn_op_attr_ints(d, "dilations", &dil);
    if ((nk && nk != s) || (np && np != 2 * s) || (ns && ns != s) || (nd && nd != s))
        return kn_op_error(d, KN_ERR_INVALID, "kernel_shape/pads/strides/dilations lengths do not match %d spatial dims", s);
    for (int dv = 0; dv < s; dv++) {
        p->kernel[dv] = nk ? ks[dv] : kd[dv];
        if (kd[dv] >= 0 && p->kernel[dv] != kd[dv])
            return kn_op_error(d, KN_ERR_INVALID, "kernel_shape[%d] = %lld but W has %lld", dv, (long long)p->kernel[dv], (long long)kd[dv]);
        p->strides[dv] = ns ? strides[dv] : 1;
        p->dilations[dv] = nd ? dil[dv] : 1;
        p->pads[dv] = np ? pads[dv] : 0;
        p->pads[s + dv] = np ? pads[s + dv] : 0;
        if (p->strides[dv] <= 0 || p->dilations[dv] <= 0 || p->pads[dv] < 0 || p->pads[s + dv] < 0)
            return kn_op_error(d, KN_ERR_INVALID, "strides and dilations must be positive and pads non-negative");
    }
    return KN_OK;
}

/* Output spatial dim dv of a convolution over an input dim of size len. */
int64_t kn_misc_dc_out_dim(const kn_deform_params *p, int dv, int64_t len)
{
    if (len < 0 || p->kernel[dv] < 0) return -1;
    int64_t span = (p->kernel[dv] - 1) * p->dilations[dv] + 1;
    int64_t v = len + p->pads[dv] + p->pads[p->s + dv] - span;
    return v < 0 ? 0 : v / p->strides[dv] + 1;
}

int kn_misc_exec_deform_conv(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need(d, in, 3)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0], *w = in[1], *off = in[2];
    const kn_tensor *b = kn_op_input(d, in, 3), *mask = kn_op_input(d, in, 4);
    if (x->rank < 3 || w->rank != x->rank)
        return kn_op_error(d, KN_ERR_INVALID, "X rank %d and W rank %d must be equal and >= 3", x->rank, w->rank);
    if (!is_float(x->dtype)) return kn_op_error(d, KN_ERR_INVALID, "X must be floating point, got %s", kn_dtype_name(x->dtype));
    kn_deform_params p;
    int st = kn_misc_dc_params(d, x->rank - 2, &w->dims[2], &p);
    if (st) return st;
    int64_t dims[KN_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = w->dims[0];
    for (int dv = 0; dv < p.s; dv++) dims[2 + dv] = kn_misc_dc_out_dim(&p, dv, x->dims[2 + dv]);
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_deform_conv(x, w, off, b, mask, &p, &out[0]));
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------- */

/* Reads the attributes into p (pool_strings: unsupported). */
int kn_misc_tfidf_params(const kn_opdesc *d, kn_tfidf_params *p)
{
    memset(p, 0, sizeof *p);
    const char *mode = kn_op_attr_string(d, "mode", "");
    if (!strcmp(mode, "TF")) p->mode = KN_TFIDF_TF;
    else if (!strcmp(mode, "IDF")) p->mode = KN_TFIDF_IDF;
    else if (!strcmp(mode, "TFIDF")) p->mode = KN_TFIDF_TFIDF;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown mode '%s'", mode);
    if (kn_op_attr(d, "pool_strings")) return kn_op_error(d, KN_ERR_UNSUPPORTED, "pool_strings is not supported");
    p->min_gram = kn_op_attr_int(d, "min_gram_length", 1);
    p->max_gram = kn_op_attr_int(d, "max_gram_length", 1);
    p->max_skip = kn_op_attr_int(d, "max_skip_count", 0);
    if (p->min_gram < 1 || p->max_gram < p->min_gram || p->max_skip < 0 || p->max_skip > (1 << 20))
        return kn_op_error(d, KN_ERR_INVALID, "min_gram_length %lld / max_gram_length %lld / max_skip_count %lld invalid",
                             (long long)p->min_gram, (long long)p->max_gram, (long long)p->max_skip);
    p->n_pool = kn_op_attr_ints(d, "pool_int64s", &p->pool);
    p->n_counts = kn_op_attr_ints(d, "ngram_counts", &p->counts);
    p->n_indexes = kn_op_attr_ints(d, "ngram_indexes", &p->indexes);
    p->n_weights = kn_op_attr_floats(d, "weights", &p->weights);
    if (!p->n_indexes) return kn_op_error(d, KN_ERR_INVALID, "ngram_indexes is missing");
    int64_t mx = -1;
    for (int64_t i = 0; i < p->n_indexes; i++) {
        if (p->indexes[i] < 0 || p->indexes[i] > ((int64_t)1 << 31))
            return kn_op_error(d, KN_ERR_INVALID, "ngram_indexes[%lld] = %lld is out of range", (long long)i,
                                 (long long)p->indexes[i]);
        if (p->indexes[i] > mx) mx = p->indexes[i];
    }
    p->out_size = mx + 1;
    return KN_OK;
}

int kn_misc_exec_tfidf(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (need(d, in, 1)) return KN_ERR_INVALID;
    kn_tfidf_params p;
    int st = kn_misc_tfidf_params(d, &p);
    if (st) return st;
    const kn_tensor *x = in[0];
    if (x->dtype != KN_I64 && x->dtype != KN_I32)
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "X of type %s (only int32/int64 are supported)", kn_dtype_name(x->dtype));
    if (x->rank != 1 && x->rank != 2) return kn_op_error(d, KN_ERR_INVALID, "X must be [C] or [B, C], got rank %d", x->rank);
    int64_t dims[2] = {x->dims[0], p.out_size};
    st = x->rank == 1 ? kn_tensor_alloc(&out[0], KN_F32, 1, &p.out_size) : kn_tensor_alloc(&out[0], KN_F32, 2, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_tfidf(x, &p, &out[0]));
}
