/*
 * Type and shape inference of the 'vision' family (see ir/ops.h):
 * GridSample, AffineGrid, DeformConv, NonMaxSuppression. Execution is in
 * runtime/ops/vision.c (kn_exec_vision); the attribute and shape rules
 * (vision_int.h) are the runtime's, called with the node's descriptor.
 */
#include <string.h>

#include "../eval.h"
#include "vision_int.h"

/* ---- GridSample ------------------------------------------------------------------------------ */

static int infer_gridsample(kn_node *n)
{
    if (kn_node_need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_gs_mode mode;
    kn_gs_pad pad;
    kn_opdesc d;
    bool has[1];
    int st = kn_node_prepare(n, 0, 1, &d, has);
    if (st || (st = kn_vis_gs_params(&d, &mode, &pad))) return st;
    kn_value *x = n->inputs[0], *g = n->inputs[1];
    kn_shape s = kn_shape_unknown();
    if (x->shape.rank >= 0 && g->shape.rank >= 0) {
        if (x->shape.rank != g->shape.rank || x->shape.rank < 3)
            return kn_node_error(n, KN_ERR_INVALID, "X rank %d and grid rank %d must be equal and >= 3",
                                 x->shape.rank, g->shape.rank);
        s = x->shape;
        for (int i = 2; i < s.rank; i++) {
            s.dims[i] = g->shape.dims[i - 1];
            s.sym[i] = g->shape.sym[i - 1];
        }
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

/* ---- AffineGrid ------------------------------------------------------------------------ */

static int infer_affine_grid(kn_node *n)
{
    if (kn_node_need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_value *th = n->inputs[0], *sv = n->inputs[1];
    kn_shape out = kn_shape_unknown();
    int64_t sz[5];
    int s = 0;
    if (sv->const_data) {
        kn_opdesc d;
        bool has[1];
        int st = kn_node_prepare(n, 0, 1, &d, has);
        if (st || (st = kn_vis_ag_size(&d, sv->const_data, sz, &s))) return st;
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
        for (int i = 0; i < s; i++) out.dims[1 + i] = sz[2 + i];
        out.dims[s + 1] = s;
    }
    kn_infer_set_shape(n, 0, th->dtype, &out);
    return KN_OK;
}

/* ---- DeformConv ------------------------------------------------------------------------ */

static int infer_deform_conv(kn_node *n)
{
    if (kn_node_need_inputs(n, 3)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *w = n->inputs[1];
    kn_shape out = kn_shape_unknown();
    int r = x->shape.rank;
    if (r >= 0 && r < 3) return kn_node_error(n, KN_ERR_INVALID, "X rank %d, expected at least 3", r);
    if (r >= 3 && w->shape.rank >= 0 && w->shape.rank != r)
        return kn_node_error(n, KN_ERR_INVALID, "W rank %d, X rank %d", w->shape.rank, r);
    if (r >= 3) {
        int64_t kd[KN_MAX_RANK];
        for (int i = 0; i < r - 2; i++) kd[i] = w->shape.rank == r ? w->shape.dims[2 + i] : -1;
        kn_deform_params p;
        kn_opdesc d;
        bool has[1];
        int st = kn_node_prepare(n, 0, 1, &d, has);
        if (st || (st = kn_vis_dc_params(&d, r - 2, kd, &p))) return st;
        out.rank = r;
        out.dims[0] = x->shape.dims[0];
        out.sym[0] = x->shape.sym[0];
        out.dims[1] = w->shape.rank == r ? w->shape.dims[0] : -1;
        for (int i = 0; i < r - 2; i++) out.dims[2 + i] = kn_vis_dc_out_dim(&p, i, x->shape.dims[2 + i]);
    }
    kn_infer_set_shape(n, 0, x->dtype, &out);
    return KN_OK;
}

/* ---- NonMaxSuppression ------------------------------------------------------------------------- */

static int infer_nms(kn_node *n)
{
    int64_t dims[2] = {-1, 3};
    kn_infer_set(n, 0, KN_I64, 2, dims);
    return KN_OK;
}

/* ---- the family table (execution: kn_exec_vision) ----------------------------- */

const kn_op_impl kn_ops_vision[] = {
    {KN_OP_GridSample, infer_gridsample},
    {KN_OP_AffineGrid, infer_affine_grid},
    {KN_OP_DeformConv, infer_deform_conv},
    {KN_OP_NonMaxSuppression, infer_nms},
    {KN_OP_UNKNOWN, NULL},
};
