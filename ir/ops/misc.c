/*
 * Type and shape inference of the 'misc' family (see ir/ops.h), the ops no
 * other family holds: the losses (NegativeLogLikelihoodLoss,
 * SoftmaxCrossEntropyLoss), CenterCropPad, ReverseSequence,
 * TfIdfVectorizer. Execution is in runtime/ops/misc.c (kn_exec_misc); the
 * attribute and shape rules (misc_int.h) are the runtime's, called with the
 * node's descriptor.
 */
#include <string.h>

#include "../eval.h"
#include "misc_int.h"

/* Most outputs an op of this family has (SoftmaxCrossEntropyLoss). */
#define MISC_MAX_OUT 2

static int infer_same0(kn_node *n)
{
    return kn_node_need_inputs(n, 2) ? KN_ERR_INVALID : kn_infer_same_as_input(n, 0);
}

/* ---- losses --------------------------------------------------------------------------- */

static int infer_loss(kn_node *n)
{
    if (kn_node_need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_loss_reduction red;
    kn_opdesc d;
    bool has[MISC_MAX_OUT];
    int st = kn_node_prepare(n, 0, MISC_MAX_OUT, &d, has);
    if (st || (st = kn_misc_loss_reduction(&d, &red))) return st;
    kn_value *x = n->inputs[0], *t = n->inputs[1];
    if (red == KN_LOSS_NONE) kn_infer_set_shape(n, 0, x->dtype, &t->shape);
    else kn_infer_set(n, 0, x->dtype, 0, NULL);
    if (n->n_outputs > 1) kn_infer_set_shape(n, 1, x->dtype, &x->shape);
    return KN_OK;
}

/* ---- CenterCropPad / ReverseSequence ---------------------------------------------------- */

static int infer_ccp(kn_node *n)
{
    if (kn_node_need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *sv = n->inputs[1];
    kn_shape s = x->shape;
    if (s.rank >= 0 && sv->const_data) {
        kn_opdesc d;
        bool has[MISC_MAX_OUT];
        int st = kn_node_prepare(n, 0, MISC_MAX_OUT, &d, has);
        if (st || (st = kn_misc_ccp_dims(&d, s.rank, x->shape.dims, sv->const_data, s.dims))) return st;
        for (int i = 0; i < s.rank; i++)
            if (s.dims[i] != x->shape.dims[i]) s.sym[i] = NULL;
    } else if (s.rank >= 0) {
        for (int i = 0; i < s.rank; i++) {
            s.dims[i] = -1;
            s.sym[i] = NULL;
        }
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------- */

static int infer_tfidf(kn_node *n)
{
    if (kn_node_need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_tfidf_params p;
    kn_opdesc d;
    bool has[MISC_MAX_OUT];
    int st = kn_node_prepare(n, 0, MISC_MAX_OUT, &d, has);
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

/* ---- the family table (execution: kn_exec_misc) ----------------------------- */

const kn_op_impl kn_ops_misc[] = {
    {KN_OP_NegativeLogLikelihoodLoss, infer_loss},
    {KN_OP_SoftmaxCrossEntropyLoss, infer_loss},
    {KN_OP_CenterCropPad, infer_ccp},
    {KN_OP_ReverseSequence, infer_same0},
    {KN_OP_TfIdfVectorizer, infer_tfidf},
    {KN_OP_UNKNOWN, NULL},
};
