/*
 * Type and shape inference of the 'generate' family (see ir/ops.h): the
 * tensors made from a shape or from positions: Shape, Size,
 * ConstantOfShape, Range, EyeLike, Trilu, OneHot. Execution is in
 * runtime/ops/generate.c (kn_exec_generate); the attribute and shape rules
 * (generate_int.h) are the runtime's, called with the node's descriptor.
 */
#include <string.h>

#include "../eval.h"
#include "generate_int.h"

static void set_1d(kn_node *n, int i, kn_dtype dt, int64_t len)
{
    kn_shape s = {.rank = 1, .dims = {len}};
    kn_infer_set_shape(n, i, dt, &s);
}

/* ---- Shape / Size ------------------------------------------------------------------- */

static int infer_shape(kn_node *n)
{
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 1, 1, &d, has)) return KN_ERR_INVALID;
    int rank = n->inputs[0]->shape.rank;
    int64_t s = 0, e = -1;
    if (rank >= 0) kn_gen_shape_window(&d, rank, &s, &e);
    set_1d(n, 0, KN_I64, rank >= 0 ? e - s : -1);
    return KN_OK;
}

static int infer_size(kn_node *n)
{
    kn_infer_set(n, 0, KN_I64, 0, NULL);
    return KN_OK;
}

/* ---- ConstantOfShape ------------------------------------------------------------------ */

static int infer_constantofshape(kn_node *n)
{
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 1, 1, &d, has)) return KN_ERR_INVALID;
    const kn_tensor *v = kn_gen_cos_value(&d);
    kn_dtype dt = v ? v->dtype : KN_F32;
    kn_value *sv = n->inputs[0];
    kn_shape s = kn_shape_unknown();
    if (sv->const_data) {
        int r = kn_gen_read_shape(&d, sv->const_data, s.dims);
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

static int infer_range(kn_node *n)
{
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 3, 1, &d, has)) return KN_ERR_INVALID;
    int64_t len = -1;
    const kn_tensor *c[3];
    bool all = true;
    for (int i = 0; i < 3; i++) {
        c[i] = n->inputs[i]->const_data;
        all = all && c[i];
    }
    if (all && kn_gen_range_count(&d, c, &len)) return KN_ERR_INVALID;
    set_1d(n, 0, n->inputs[0]->dtype, len);
    return KN_OK;
}

/* ---- EyeLike / Trilu ----------------------------------------------------------------- */

static int infer_eyelike(kn_node *n)
{
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 1, 1, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    kn_dtype dt = kn_gen_eyelike_dtype(&d, x->dtype);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "dtype %d is not supported", (int)dt);
    if (x->shape.rank >= 0 && x->shape.rank != 2)
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected 2", x->shape.rank);
    kn_infer_set_shape(n, 0, dt, &x->shape);
    return KN_OK;
}

static int infer_trilu(kn_node *n)
{
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 1, 1, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    if (x->shape.rank >= 0 && x->shape.rank < 2)
        return kn_node_error(n, KN_ERR_INVALID, "input rank %d, expected at least 2", x->shape.rank);
    return kn_infer_same_as_input(n, 0);
}

/* ---- OneHot ------------------------------------------------------------------------- */

static int infer_onehot(kn_node *n)
{
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 3, 1, &d, has)) return KN_ERR_INVALID;
    kn_value *idx = n->inputs[0], *dv = n->inputs[1], *vals = n->inputs[2];
    kn_shape s = kn_shape_unknown();
    if (idx->shape.rank >= 0 && idx->shape.rank < KN_MAX_RANK) {
        int r = idx->shape.rank + 1, a;
        int st = kn_op_axis(&d, kn_op_attr_int(&d, "axis", -1), r, &a);
        if (st) return st;
        int64_t depth = -1;
        if (dv->const_data && kn_op_scalar_int(&d, dv->const_data, "depth", &depth)) return KN_ERR_INVALID;
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

/* ---- the family table (execution: kn_exec_generate) ----------------------------- */

const kn_op_impl kn_ops_generate[] = {
    {KN_OP_Shape, infer_shape},
    {KN_OP_Size, infer_size},
    {KN_OP_ConstantOfShape, infer_constantofshape},
    {KN_OP_Range, infer_range},
    {KN_OP_EyeLike, infer_eyelike},
    {KN_OP_Trilu, infer_trilu},
    {KN_OP_OneHot, infer_onehot},
    {KN_OP_UNKNOWN, NULL},
};
