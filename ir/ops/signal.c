/*
 * Type and shape inference of the 'signal' family (see ir/ops.h): DFT,
 * STFT, MelWeightMatrix and the windows (Hann, Hamming, Blackman).
 * Execution is in runtime/ops/signal.c (kn_exec_signal); the attribute and
 * shape rules (signal_int.h) are the runtime's, called with the node's
 * descriptor.
 */
#include <string.h>

#include "../eval.h"
#include "signal_int.h"

/* ---- windows -------------------------------------------------------------------------- */

static int infer_window(kn_node *n)
{
    if (kn_node_need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_dtype dt = (kn_dtype)kn_attr_int(n, "output_datatype", KN_F32);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output_datatype %d", (int)dt);
    int64_t len = -1;
    const kn_tensor *c = n->inputs[0]->const_data;
    if (c && kn_tensor_numel(c) == 1) len = kn_load_i64(c->dtype, c->data, 0);
    kn_infer_set(n, 0, dt, 1, &len);
    return KN_OK;
}

/* ---- DFT / STFT / MelWeightMatrix ---------------------------------------------------------- */

static int infer_dft(kn_node *n)
{
    if (kn_node_need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *lv = kn_node_input(n, 1), *av = kn_node_input(n, 2);
    kn_shape s = x->shape;
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 0, 1, &d, has)) return KN_ERR_INVALID;
    if (s.rank >= 2) {
        int axis;
        int st = kn_sig_dft_axis(&d, av ? av->const_data : NULL, av != NULL, s.rank, &axis);
        if (st == 1) {
            for (int i = 0; i < s.rank - 1; i++) s.dims[i] = -1;
        } else if (st) {
            return st;
        } else {
            bool one = kn_attr_int(n, "onesided", 0) != 0, inv = kn_attr_int(n, "inverse", 0) != 0;
            int64_t def = inv && one ? (s.dims[axis] < 0 ? -1 : 2 * (s.dims[axis] - 1)) : s.dims[axis];
            int64_t L = kn_sig_opt_scalar(&d, lv ? lv->const_data : NULL, lv != NULL, def, "dft_length");
            if (L == -1 && lv && lv->const_data) return KN_ERR_INVALID;
            s.dims[axis] = L < 0 ? -1 : one && !inv ? L / 2 + 1 : L;
            s.sym[axis] = NULL;
        }
        s.dims[s.rank - 1] = kn_attr_int(n, "onesided", 0) && kn_attr_int(n, "inverse", 0) ? 1 : 2;
        s.sym[s.rank - 1] = NULL;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

static int infer_stft(kn_node *n)
{
    if (kn_node_need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *sv = n->inputs[1], *wv = kn_node_input(n, 2), *fv = kn_node_input(n, 3);
    kn_shape s = kn_shape_unknown();
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 0, 1, &d, has)) return KN_ERR_INVALID;
    if (x->shape.rank == 3) {
        int64_t len = x->shape.dims[1];
        int64_t fl = kn_sig_stft_frame_length(&d, fv ? fv->const_data : NULL, fv != NULL, wv != NULL,
                                               wv ? wv->shape.rank : -1, wv ? wv->shape.dims[0] : -1, len);
        int64_t step = kn_sig_opt_scalar(&d, sv->const_data, true, 0, "frame_step");
        bool one = kn_attr_int(n, "onesided", 1) != 0;
        s.rank = 4;
        s.dims[0] = x->shape.dims[0];
        s.sym[0] = x->shape.sym[0];
        s.dims[1] = fl > 0 && step > 0 && len >= fl ? 1 + (len - fl) / step : -1;
        s.dims[2] = fl > 0 ? (one ? fl / 2 + 1 : fl) : -1;
        s.dims[3] = 2;
    }
    kn_infer_set_shape(n, 0, x->dtype, &s);
    return KN_OK;
}

static int infer_mel(kn_node *n)
{
    if (kn_node_need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_dtype dt = (kn_dtype)kn_attr_int(n, "output_datatype", KN_F32);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output_datatype %d", (int)dt);
    kn_opdesc d;
    bool has[1];
    if (kn_node_prepare(n, 0, 1, &d, has)) return KN_ERR_INVALID;
    int64_t nb = kn_sig_opt_scalar(&d, n->inputs[0]->const_data, true, 0, "num_mel_bins");
    int64_t dl = kn_sig_opt_scalar(&d, n->inputs[1]->const_data, true, 0, "dft_length");
    int64_t dims[2] = {dl >= 0 ? dl / 2 + 1 : -1, nb >= 0 ? nb : -1};
    kn_infer_set(n, 0, dt, 2, dims);
    return KN_OK;
}

/* Defined in ir/ops/misc2.c. */

/* ---- the family table (execution: kn_exec_signal) ----------------------------- */

const kn_op_impl kn_ops_signal[] = {
    {KN_OP_HannWindow, infer_window},
    {KN_OP_HammingWindow, infer_window},
    {KN_OP_BlackmanWindow, infer_window},
    {KN_OP_DFT, infer_dft},
    {KN_OP_STFT, infer_stft},
    {KN_OP_MelWeightMatrix, infer_mel},
    {KN_OP_UNKNOWN, NULL},
};
