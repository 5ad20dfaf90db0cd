/*
 * Type and shape inference of AffineGrid, DeformConv and TfIdfVectorizer
 * (listed in kn_ops_misc, ir/ops/misc.c). Execution is in
 * runtime/ops/misc2.c; the attribute and shape rules (misc_int.h) are the
 * runtime's, called with the node's descriptor.
 */
#include <string.h>

#include "../eval.h"
#include "misc_int.h"

int kn_misc2_infer_affine_grid(kn_node *n);
int kn_misc2_infer_deform_conv(kn_node *n);
int kn_misc2_infer_tfidf(kn_node *n);
/* Defined in misc.c: n's descriptor, has with room for 3 outputs. */
int kn_misc_ir_desc(const kn_node *n, kn_opdesc *d, bool *has);

static int need(const kn_node *n, int k)
{
    for (int i = 0; i < k; i++)
        if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

/* ---- AffineGrid ------------------------------------------------------------------------ */

int kn_misc2_infer_affine_grid(kn_node *n)
{
    if (need(n, 2)) return KN_ERR_INVALID;
    kn_value *th = n->inputs[0], *sv = n->inputs[1];
    kn_shape out = kn_shape_unknown();
    int64_t sz[5];
    int s = 0;
    if (sv->const_data) {
        kn_opdesc d;
        bool has[3];
        int st = kn_misc_ir_desc(n, &d, has);
        if (st || (st = kn_misc_ag_size(&d, sv->const_data, sz, &s))) return st;
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
        for (int i = 0; i < r - 2; i++) kd[i] = w->shape.rank == r ? w->shape.dims[2 + i] : -1;
        kn_deform_params p;
        kn_opdesc d;
        bool has[3];
        int st = kn_misc_ir_desc(n, &d, has);
        if (st || (st = kn_misc_dc_params(&d, r - 2, kd, &p))) return st;
        out.rank = r;
        out.dims[0] = x->shape.dims[0];
        out.sym[0] = x->shape.sym[0];
        out.dims[1] = w->shape.rank == r ? w->shape.dims[0] : -1;
        for (int i = 0; i < r - 2; i++) out.dims[2 + i] = kn_misc_dc_out_dim(&p, i, x->shape.dims[2 + i]);
    }
    kn_infer_set_shape(n, 0, x->dtype, &out);
    return KN_OK;
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------- */

int kn_misc2_infer_tfidf(kn_node *n)
{
    if (need(n, 1)) return KN_ERR_INVALID;
    kn_tfidf_params p;
    kn_opdesc d;
    bool has[3];
    int st = kn_misc_ir_desc(n, &d, has);
    if (st || (st = kn_misc_tfidf_params(&d, &p))) return st;
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

