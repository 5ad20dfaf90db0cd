/*
 * More op definitions of the 'misc' family: AffineGrid, DeformConv and
 * TfIdfVectorizer, calling the kernels of runtime/kernels/misc2.c. The
 * functions are listed in kn_ops_misc (ir/ops/misc.c).
 */
#include <string.h>

#include "../eval.h"
#include "k_misc2.h"

int kn_misc2_infer_affine_grid(kn_node *n);
int kn_misc2_eval_affine_grid(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_misc2_infer_deform_conv(kn_node *n);
int kn_misc2_eval_deform_conv(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);
int kn_misc2_infer_tfidf(kn_node *n);
int kn_misc2_eval_tfidf(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out);

static int need(const kn_node *n, int k)
{
    for (int i = 0; i < k; i++)
        if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

static int fail(const kn_node *n, int st)
{
    if (st) kn_error_prefix("node '%s' (%s): ", n->name, n->op_type);
    return st;
}

static bool is_float(kn_dtype dt)
{
    return kn_dtype_info(dt)->is_float;
}

/* ---- AffineGrid ------------------------------------------------------------------------ */

/* Reads the size input (N, C, H, W) or (N, C, D, H, W) into dims and s. */
static int ag_size(const kn_node *n, const kn_tensor *size, int64_t *dims, int *s)
{
    int64_t cnt = kn_tensor_numel(size);
    if (!kn_dtype_info(size->dtype)->is_integer || size->rank != 1 || (cnt != 4 && cnt != 5))
        return kn_node_error(n, KN_ERR_INVALID, "size must be a 1-D integer tensor of 4 or 5 entries");
    for (int64_t i = 0; i < cnt; i++) {
        dims[i] = kn_load_i64(size->dtype, size->data, (size_t)i);
        if (dims[i] < 0) return kn_node_error(n, KN_ERR_INVALID, "size[%lld] = %lld is negative", (long long)i, (long long)dims[i]);
    }
    *s = (int)cnt - 2;
    return KN_OK;
}

int kn_misc2_infer_affine_grid(kn_node *n)
{
    if (need(n, 2)) return KN_ERR_INVALID;
    kn_value *th = n->inputs[0], *sv = n->inputs[1];
    kn_shape out = kn_shape_unknown();
    int64_t sz[5];
    int s = 0;
    if (sv->const_data) {
        int st = ag_size(n, sv->const_data, sz, &s);
        if (st) return st;
    } else if (sv->shape.rank == 1 && (sv->shape.dims[0] == 4 || sv->shape.dims[0] == 5)) {
        s = (int)sv->shape.dims[0] - 2;
        for (int i = 0; i < 5; i++) sz[i] = -1;
    }
    if (s) {
        out.rank = s + 2;
        out.dims[0] = sz[0];
        if (th->shape.rank == 3 && th->shape.dims[0] >= 0) {
            out.dims[0] = th->shape.dims[0];
            out.sym[0] = th->shape.sym[0];
        }
        for (int d = 0; d < s; d++) out.dims[1 + d] = sz[2 + d];
        out.dims[s + 1] = s;
    }
    kn_infer_set_shape(n, 0, th->dtype, &out);
    return KN_OK;
}

int kn_misc2_eval_affine_grid(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    if (need(n, 2)) return KN_ERR_INVALID;
    const kn_tensor *th = in[0];
    int64_t sz[5];
    int s;
    int st = ag_size(n, in[1], sz, &s);
    if (st) return st;
    if (!is_float(th->dtype)) return kn_node_error(n, KN_ERR_INVALID, "theta must be floating point, got %s", kn_dtype_name(th->dtype));
    if (th->rank != 3 || th->dims[0] != sz[0] || th->dims[1] != s || th->dims[2] != s + 1)
        return kn_node_error(n, KN_ERR_INVALID, "theta must have shape (%lld, %d, %d) for size of %d entries",
                             (long long)sz[0], s, s + 1, s + 2);
    int64_t dims[5];
    dims[0] = sz[0];
    for (int d = 0; d < s; d++) dims[1 + d] = sz[2 + d];
    dims[s + 1] = s;
    st = kn_tensor_alloc(&out[0], th->dtype, s + 2, dims);
    if (st) return fail(n, st);
    return fail(n, kn_k_affine_grid(th, s, &sz[2], kn_attr_int(n, "align_corners", 0) != 0, &out[0]));
}

/* ---- DeformConv ------------------------------------------------------------------------ */

/* Fills p from the attributes for spatial rank s and kernel dims kd (from
 * W); fails naming the node on inconsistent attribute lengths or values. */
static int dc_params(const kn_node *n, int s, const int64_t *kd, kn_deform_params *p)
{
    memset(p, 0, sizeof *p);
    p->s = s;
    p->group = kn_attr_int(n, "group", 1);
    p->offset_group = kn_attr_int(n, "offset_group", 1);
    if (p->group <= 0 || p->offset_group <= 0)
        return kn_node_error(n, KN_ERR_INVALID, "group %lld / offset_group %lld must be positive", (long long)p->group,
                             (long long)p->offset_group);
    const int64_t *ks, *pads, *strides, *dil;
    int nk = kn_attr_ints(n, "kernel_shape", &ks), np = kn_attr_ints(n, "pads", &pads);
    int ns = kn_attr_ints(n, "strides", &strides), nd = kn_attr_ints(n, "dilations", &dil);
    if ((nk && nk != s) || (np && np != 2 * s) || (ns && ns != s) || (nd && nd != s))
        return kn_node_error(n, KN_ERR_INVALID, "kernel_shape/pads/strides/dilations lengths do not match %d spatial dims", s);
    for (int d = 0; d < s; d++) {
        p->kernel[d] = nk ? ks[d] : kd[d];
        if (kd[d] >= 0 && p->kernel[d] != kd[d])
            return kn_node_error(n, KN_ERR_INVALID, "kernel_shape[%d] = %lld but W has %lld", d, (long long)p->kernel[d], (long long)kd[d]);
        p->strides[d] = ns ? strides[d] : 1;
        p->dilations[d] = nd ? dil[d] : 1;
        p->pads[d] = np ? pads[d] : 0;
        p->pads[s + d] = np ? pads[s + d] : 0;
        if (p->strides[d] <= 0 || p->dilations[d] <= 0 || p->pads[d] < 0 || p->pads[s + d] < 0)
            return kn_node_error(n, KN_ERR_INVALID, "strides and dilations must be positive and pads non-negative");
    }
    return KN_OK;
}

/* Output spatial dim d of a convolution over an input dim of size len. */
static int64_t dc_out_dim(const kn_deform_params *p, int d, int64_t len)
{
    if (len < 0 || p->kernel[d] < 0) return -1;
    int64_t span = (p->kernel[d] - 1) * p->dilations[d] + 1;
    int64_t v = len + p->pads[d] + p->pads[p->s + d] - span;
    return v < 0 ? 0 : v / p->strides[d] + 1;
}

int kn_misc2_infer_deform_conv(kn_node *n)
{
    if (need(n, 3)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *w = n->inputs[1];
    kn_shape out = kn_shape_unknown();
    int r = x->shape.rank;
    if (r >= 0 && r < 3) return kn_node_error(n, KN_ERR_INVALID, "X rank %d, expected at least 3", r);
    if (r >= 3 && w->shape.rank >= 0 && w->shape.rank != r)
        return kn_node_error(n, KN_ERR_INVALID, "W rank %d, X rank %d", w->shape.rank, r);
    if (r >= 3) {
        int64_t kd[KN_MAX_RANK];
        for (int d = 0; d < r - 2; d++) kd[d] = w->shape.rank == r ? w->shape.dims[2 + d] : -1;
        kn_deform_params p;
        int st = dc_params(n, r - 2, kd, &p);
        if (st) return st;
        out.rank = r;
        out.dims[0] = x->shape.dims[0];
        out.sym[0] = x->shape.sym[0];
        out.dims[1] = w->shape.rank == r ? w->shape.dims[0] : -1;
        for (int d = 0; d < r - 2; d++) out.dims[2 + d] = dc_out_dim(&p, d, x->shape.dims[2 + d]);
    }
    kn_infer_set_shape(n, 0, x->dtype, &out);
    return KN_OK;
}

int kn_misc2_eval_deform_conv(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    if (need(n, 3)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0], *w = in[1], *off = in[2];
    const kn_tensor *b = kn_node_input(n, 3) ? in[3] : NULL, *mask = kn_node_input(n, 4) ? in[4] : NULL;
    if (x->rank < 3 || w->rank != x->rank)
        return kn_node_error(n, KN_ERR_INVALID, "X rank %d and W rank %d must be equal and >= 3", x->rank, w->rank);
    if (!is_float(x->dtype)) return kn_node_error(n, KN_ERR_INVALID, "X must be floating point, got %s", kn_dtype_name(x->dtype));
    kn_deform_params p;
    int st = dc_params(n, x->rank - 2, &w->dims[2], &p);
    if (st) return st;
    int64_t dims[KN_MAX_RANK];
    dims[0] = x->dims[0];
    dims[1] = w->dims[0];
    for (int d = 0; d < p.s; d++) dims[2 + d] = dc_out_dim(&p, d, x->dims[2 + d]);
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return fail(n, st);
    return fail(n, kn_k_deform_conv(x, w, off, b, mask, &p, &out[0]));
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------- */

/* Reads the attributes into p (pool_strings: unsupported). */
static int tfidf_params(const kn_node *n, kn_tfidf_params *p)
{
    memset(p, 0, sizeof *p);
    const char *mode = kn_attr_string(n, "mode", "");
    if (!strcmp(mode, "TF")) p->mode = KN_TFIDF_TF;
    else if (!strcmp(mode, "IDF")) p->mode = KN_TFIDF_IDF;
    else if (!strcmp(mode, "TFIDF")) p->mode = KN_TFIDF_TFIDF;
    else return kn_node_error(n, KN_ERR_INVALID, "unknown mode '%s'", mode);
    if (kn_node_attr(n, "pool_strings")) return kn_node_error(n, KN_ERR_UNSUPPORTED, "pool_strings is not supported");
    p->min_gram = kn_attr_int(n, "min_gram_length", 1);
    p->max_gram = kn_attr_int(n, "max_gram_length", 1);
    p->max_skip = kn_attr_int(n, "max_skip_count", 0);
    if (p->min_gram < 1 || p->max_gram < p->min_gram || p->max_skip < 0 || p->max_skip > (1 << 20))
        return kn_node_error(n, KN_ERR_INVALID, "min_gram_length %lld / max_gram_length %lld / max_skip_count %lld invalid",
                             (long long)p->min_gram, (long long)p->max_gram, (long long)p->max_skip);
    p->n_pool = kn_attr_ints(n, "pool_int64s", &p->pool);
    p->n_counts = kn_attr_ints(n, "ngram_counts", &p->counts);
    p->n_indexes = kn_attr_ints(n, "ngram_indexes", &p->indexes);
    p->n_weights = kn_attr_floats(n, "weights", &p->weights);
    if (!p->n_indexes) return kn_node_error(n, KN_ERR_INVALID, "ngram_indexes is missing");
    int64_t mx = -1;
    for (int64_t i = 0; i < p->n_indexes; i++) {
        if (p->indexes[i] < 0 || p->indexes[i] > ((int64_t)1 << 31))
            return kn_node_error(n, KN_ERR_INVALID, "ngram_indexes[%lld] = %lld is out of range", (long long)i,
                                 (long long)p->indexes[i]);
        if (p->indexes[i] > mx) mx = p->indexes[i];
    }
    p->out_size = mx + 1;
    return KN_OK;
}

int kn_misc2_infer_tfidf(kn_node *n)
{
    if (need(n, 1)) return KN_ERR_INVALID;
    kn_tfidf_params p;
    int st = tfidf_params(n, &p);
    if (st) return st;
    const kn_shape *xs = &n->inputs[0]->shape;
    if (xs->rank == 1) kn_infer_set(n, 0, KN_F32, 1, &p.out_size);
    else if (xs->rank == 2) {
        kn_shape s = *xs;
        s.dims[1] = p.out_size;
        s.sym[1] = NULL;
        kn_infer_set_shape(n, 0, KN_F32, &s);
    } else if (xs->rank < 0) {
        kn_shape s = kn_shape_unknown();
        kn_infer_set_shape(n, 0, KN_F32, &s);
    } else
        return kn_node_error(n, KN_ERR_INVALID, "X must be [C] or [B, C], got rank %d", xs->rank);
    return KN_OK;
}

int kn_misc2_eval_tfidf(kn_eval_ctx *ctx, const kn_node *n, const kn_tensor *const *in, kn_tensor *out)
{
    (void)ctx;
    if (need(n, 1)) return KN_ERR_INVALID;
    kn_tfidf_params p;
    int st = tfidf_params(n, &p);
    if (st) return st;
    const kn_tensor *x = in[0];
    if (x->dtype != KN_I64 && x->dtype != KN_I32)
        return kn_node_error(n, KN_ERR_UNSUPPORTED, "X of type %s (only int32/int64 are supported)", kn_dtype_name(x->dtype));
    if (x->rank != 1 && x->rank != 2) return kn_node_error(n, KN_ERR_INVALID, "X must be [C] or [B, C], got rank %d", x->rank);
    int64_t dims[2] = {x->dims[0], p.out_size};
    st = x->rank == 1 ? kn_tensor_alloc(&out[0], KN_F32, 1, &p.out_size) : kn_tensor_alloc(&out[0], KN_F32, 2, dims);
    if (st) return fail(n, st);
    return fail(n, kn_k_tfidf(x, &p, &out[0]));
}
