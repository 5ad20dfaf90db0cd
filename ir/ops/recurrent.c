/*
 * Type and shape inference of the 'recurrent' family (see ir/ops.h): RNN,
 * GRU, LSTM. Execution is in runtime/ops/recurrent.c (kn_exec_recurrent);
 * the attribute rules (recurrent_int.h) are the runtime's, called with the
 * node's descriptor.
 */
#include <string.h>

#include "../eval.h"
#include "recurrent_int.h"

/* Most outputs an op of this family has (LSTM: Y, Y_h, Y_c). */
#define REC_MAX_OUT 3

/* ---- RNN / GRU / LSTM ------------------------------------------------------------------------ */

static int infer_rnn(kn_node *n)
{
    if (kn_node_need_inputs(n, 3)) return KN_ERR_INVALID;
    kn_rnn_params p;
    kn_opdesc d;
    bool has[REC_MAX_OUT];
    const kn_shape *r = &n->inputs[2]->shape;
    int st = kn_node_prepare(n, 0, REC_MAX_OUT, &d, has);
    if (st || (st = kn_rec_params(&d, r->rank == 3 ? r->dims[2] : -1, &p))) return st;
    kn_value *x = n->inputs[0];
    kn_shape y = kn_shape_unknown(), h = kn_shape_unknown();
    if (x->shape.rank == 3) {
        int64_t T = x->shape.dims[p.layout ? 1 : 0], B = x->shape.dims[p.layout ? 0 : 1];
        y.rank = 4;
        h.rank = 3;
        int64_t yd[4] = {T, p.num_dir, B, p.hidden}, ydb[4] = {B, T, p.num_dir, p.hidden};
        int64_t hd[3] = {p.num_dir, B, p.hidden}, hdb[3] = {B, p.num_dir, p.hidden};
        memcpy(y.dims, p.layout ? ydb : yd, sizeof yd);
        memcpy(h.dims, p.layout ? hdb : hd, sizeof hd);
    }
    kn_infer_set_shape(n, 0, x->dtype, &y);
    kn_infer_set_shape(n, 1, x->dtype, &h);
    kn_infer_set_shape(n, 2, x->dtype, &h);
    return KN_OK;
}

/* ---- the family table (execution: kn_exec_recurrent) ----------------------------- */

const kn_op_impl kn_ops_recurrent[] = {
    {KN_OP_RNN, infer_rnn},
    {KN_OP_GRU, infer_rnn},
    {KN_OP_LSTM, infer_rnn},
    {KN_OP_UNKNOWN, NULL},
};
