/*
 * Type and shape inference of the 'select' family (see ir/ops.h): NonZero,
 * Compress, Unique, whose output size is the data's (a dim of -1 until the
 * graph runs). Execution is in runtime/ops/select.c (kn_exec_select); the
 * axis rule (select_int.h) is the runtime's.
 */
#include <string.h>

#include "../eval.h"
#include "select_int.h"

static void set_1d(kn_node *n, int i, kn_dtype dt, int64_t len)
{
    kn_shape s = {.rank = 1, .dims = {len}};
    kn_infer_set_shape(n, i, dt, &s);
}

static int infer_nonzero(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_SEL_MAX_OUTPUTS];
    if (kn_node_prepare(n, 1, KN_SEL_MAX_OUTPUTS, &d, has)) return KN_ERR_INVALID;
    int r = n->inputs[0]->shape.rank;
    kn_shape s = {.rank = 2, .dims = {r, -1}};
    kn_infer_set_shape(n, 0, KN_I64, &s);
    return KN_OK;
}

static int infer_compress(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_SEL_MAX_OUTPUTS];
    if (kn_node_prepare(n, 2, KN_SEL_MAX_OUTPUTS, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    int a = kn_sel_opt_axis(&d, x->shape.rank);
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

static int infer_unique(kn_node *n)
{
    kn_opdesc d;
    bool has[KN_SEL_MAX_OUTPUTS];
    if (kn_node_prepare(n, 1, KN_SEL_MAX_OUTPUTS, &d, has)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0];
    int a = kn_sel_opt_axis(&d, x->shape.rank);
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

/* ---- the family table (execution: kn_exec_select) ------------------------------- */

const kn_op_impl kn_ops_select[] = {
    {KN_OP_NonZero, infer_nonzero},
    {KN_OP_Compress, infer_compress},
    {KN_OP_Unique, infer_unique},
    {KN_OP_UNKNOWN, NULL},
};
