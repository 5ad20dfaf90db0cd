/*
 * Type and shape inference of the generator and shape-info ops of the
 * 'reduce' family: Shape, Size, ConstantOfShape, Range, EyeLike, Trilu,
 * OneHot, NonZero, Compress, Unique. The kn_ops_reduce table in reduce.c
 * lists the functions defined here; execution is in runtime/ops/reduce_gen.c
 * and the attribute rules are the runtime's (reduce_int.h).
 */
#include <string.h>

#include "../eval.h"
#include "reduce_int.h"

int kn_rg_prepare(const kn_node *n, int k, kn_opdesc *d, bool *has);
int kn_rg_infer_shape(kn_node *n);
int kn_rg_infer_size(kn_node *n);
int kn_rg_infer_constantofshape(kn_node *n);
int kn_rg_infer_range(kn_node *n);
int kn_rg_infer_eyelike(kn_node *n);
int kn_rg_infer_trilu(kn_node *n);
int kn_rg_infer_onehot(kn_node *n);
int kn_rg_infer_nonzero(kn_node *n);
int kn_rg_infer_compress(kn_node *n);
int kn_rg_infer_unique(kn_node *n);

/* Fills *d with n's descriptor for the runtime helpers and checks that n's
 * first k inputs are present (an empty name in the model), so no infer
 * function dereferences a NULL input. has needs KN_RD_MAX_OUTPUTS entries. */
int kn_rg_prepare(const kn_node *n, int k, kn_opdesc *d, bool *has)
{
    if (n->n_outputs > KN_RD_MAX_OUTPUTS)
        return kn_node_error(n, KN_ERR_INVALID, "has %d outputs, at most %d allowed", n->n_outputs,
                             KN_RD_MAX_OUTPUTS);
    for (int i = 0; i < k; i++)
        if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "required input %d is missing", i);
    kn_node_opdesc(n, d, has);
    return KN_OK;
}

static void set_1d(kn_node *n, int i, kn_dtype dt, int64_t len)
{
    kn_shape s = {.rank = 1, .dims = {len}};
    kn_infer_set_shape(n, i, dt, &s);
}

/* ---- Shape / Size ------------------------------------------------------------------- */

int kn_rg_infer_shape(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 1, &d, has)) return KN_ERR_INVALID;
    int rank = n->inputs[0]->shape.rank;
    int64_t s = 0, e = -1;
    if (rank >= 0) kn_rd_shape_window(&d, rank, &s, &e);
    set_1d(n, 0, KN_I64, rank >= 0 ? e - s : -1);
    return KN_OK;
}

int kn_rg_infer_size(kn_node *n)
{
    kn_infer_set(n, 0, KN_I64, 0, NULL);
    return KN_OK;
}

/* ---- ConstantOfShape ------------------------------------------------------------------ */

int kn_rg_infer_constantofshape(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 1, &d, has)) return KN_ERR_INVALID;
    const kn_tensor *v = kn_rd_cos_value(&d);
    kn_dtype dt = v ? v->dtype : KN_F32;
    kn_value *sv = n->inputs[0];
    kn_shape s = kn_shape_unknown();
    if (sv->const_data) {
        int r = kn_rd_read_shape(&d, sv->const_data, s.dims);
        if (r < 0) return KN_ERR_INVALID;
        s.rank = r;
    } else if (sv->shape.rank == 1 && sv->shape.dims[0] >= 0 && sv->shape.dims[0] <= KN_MAX_RANK) {
        s.rank = (int)sv->shape.dims[0];
        for (int i = 0; i < s.rank; i++) s.dims[i] = -1;
    }
    kn_infer_set_shape(n, 0, dt, &s);
    return KN_OK;
}

/* ---- Range ---------------------------------------------------------------------------- */

int kn_rg_infer_range(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 3, &d, has)) return KN_ERR_INVALID;
    int64_t len = -1;
    const kn_tensor *c[3];
    bool all = true;
    for (int i = 0; i < 3; i++) {
        c[i] = n->inputs[i]->const_data;
        all = all && c[i];
    }
    if (all && kn_rd_range_count(&d, c, &len)) return KN_ERR_INVALID;
    set_1d(n, 0, n->inputs[0]->dtype, len);
    return KN_OK;
}

/* ---- EyeLike / Trilu ----------------------------------------------------------------- */

int kn_rg_infer_eyelike(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 1, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    kn_dtype dt = kn_rd_eyelike_dtype(&d, x->dtype);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %d is not supported", (int)dt);
    if (x->shape.rank >= 0 && x->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected 2", x->shape.rank);
    kn_infer_set_shape(n, 0, dt, &x->shape);
    return KN_OK;
}

int kn_rg_infer_trilu(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 1, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    if (x->shape.rank >= 0 && x->shape.rank < 2)
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected at least 2", x->shape.rank);
    return kn_infer_same_as_input(n, 0);
}

/* ---- OneHot ------------------------------------------------------------------------- */

int kn_rg_infer_onehot(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 3, &d, has)) return KN_ERR_INVALID;
    kn_value *idx = n->inputs[0], *dv = n->inputs[1], *vals = n->inputs[2];
    kn_shape s = kn_shape_unknown();
    if (idx->shape.rank >= 0 && idx->shape.rank < KN_MAX_RANK) {
        int r = idx->shape.rank + 1, a;
        int st = kn_rd_axis(&d, kn_op_attr_int(&d, "axis", -1), r, &a);
        if (st) return st;
        int64_t depth = -1;
        if (dv->const_data && kn_rd_scalar_int(&d, dv->const_data, "depth", &depth)) return KN_ERR_INVALID;
        s.rank = r;
        for (int i = 0, j = 0; i < r; i++) {
            s.dims[i] = i == a ? depth : idx->shape.dims[j];
            s.sym[i] = i == a ? NULL : idx->shape.sym[j];
            if (i != a) j++;
        }
    }
    kn_infer_set_shape(n, 0, vals->dtype, &s);
    return KN_OK;
}

/* ---- NonZero / Compress / Unique ------------------------------------------------------ */

int kn_rg_infer_nonzero(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 1, &d, has)) return KN_ERR_INVALID;
    int r = n->inputs[0]->shape.rank;
    kn_shape s = {.rank = 2, .dims = {r, -1}};
    kn_infer_set_shape(n, 0, KN_I64, &s);
    return KN_OK;
}

int kn_rg_infer_compress(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 2, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    int a = kn_rd_opt_axis(&d, x->shape.rank);
    if (a == -2) return KN_ERR_INVALID;
    if (a == -1) {
        set_1d(n, 0, x->dtype, -1);
        return KN_OK;
    }
    kn_shape s = x->shape;
    if (s.rank >= 0) {
        s.dims[a] = -1;
        s.sym[a] = NULL;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

int kn_rg_infer_unique(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_RD_MAX_OUTPUTS];
    if (kn_rg_prepare(n, 1, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    int a = kn_rd_opt_axis(&d, x->shape.rank);
    if (a == -2) return KN_ERR_INVALID;
    kn_shape s = {.rank = 1, .dims = {-1}};
    int64_t items = -1;
    if (a >= 0) {
        s = x->shape;
        if (s.rank >= 0) {
            items = s.dims[a];
            s.dims[a] = -1;
            s.sym[a] = NULL;
        }
    } else if (kn_shape_is_static(&x->shape)) {
        items = kn_shape_numel(x->shape.rank, x->shape.dims);
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    if (n->n_outputs > 1) set_1d(n, 1, KN_I64, -1);
    if (n->n_outputs > 2) set_1d(n, 2, KN_I64, items);
    if (n->n_outputs > 3) set_1d(n, 3, KN_I64, -1);
    return KN_OK;
}
