/*
 * Type and shape inference of the 'misc' family (see ir/ops.h): losses
 * (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss), window generators
 * (Hann, Hamming, Blackman), and the other rare ops; AffineGrid, DeformConv
 * and TfIdfVectorizer in misc2.c, whose functions this file's table lists.
 *
 * Execution lives in runtime/ops/misc*.c (kn_exec_misc). The attribute and
 * shape rules are the runtime's (misc_int.h), called here with the node's
 * descriptor, so inference and execution cannot disagree on them.
 */
#include <string.h>

#include "../eval.h"
#include "misc_int.h"

/* Fails naming the node if one of its first k inputs is missing (an empty
 * name in the model), so no definition below dereferences a NULL input. */
static int need_inputs(const kn_node *n, int k)
{
    for (int i = 0; i < k; i++)
        if (!kn_node_input(n, i)) return kn_node_error(n, KN_ERR_INVALID, "required input %d is missing", i);
    return KN_OK;
}

/* Most outputs an op of this family has (LSTM). */
#define MISC_MAX_OUT 3

/* Fills d (with has, MISC_MAX_OUT entries) with n's descriptor. Shared with
 * misc2.c. */
int kn_misc_ir_desc(const kn_node *n, kn_opdesc *d, bool *has)
{
    if (n->n_outputs > MISC_MAX_OUT)
        return kn_node_error(n, KN_ERR_INVALID, "%d outputs, at most %d expected", n->n_outputs, MISC_MAX_OUT);
    kn_node_opdesc(n, d, has);
    return KN_OK;
}

static int infer_same0(kn_node *n)
{
    return need_inputs(n, 2) ? KN_ERR_INVALID : kn_infer_same_as_input(n, 0);
}

/* ---- losses --------------------------------------------------------------------------- */

static int infer_loss(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_loss_reduction red;
    kn_opdesc d;
    bool has[MISC_MAX_OUT];
    int st = kn_misc_ir_desc(n, &d, has);
    if (st || (st = kn_misc_loss_reduction(&d, &red))) return st;
    kn_value *x = n->inputs[0], *t = n->inputs[1];
    if (red == KN_LOSS_NONE) kn_infer_set_shape(n, 0, x->dtype, &t->shape);
    else kn_infer_set(n, 0, x->dtype, 0, NULL);
    if (n->n_outputs > 1) kn_infer_set_shape(n, 1, x->dtype, &x->shape);
    return KN_OK;
}

/* ---- windows -------------------------------------------------------------------------- */

static int infer_window(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_dtype dt = (kn_dtype)kn_attr_int(n, "output_datatype", KN_F32);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output_datatype %d", (int)dt);
    int64_t len = -1;
    const kn_tensor *c = n->inputs[0]->const_data;
    if (c && kn_tensor_numel(c) == 1) len = kn_load_i64(c->dtype, c->data, 0);
    kn_infer_set(n, 0, dt, 1, &len);
    return KN_OK;
}

/* ---- CenterCropPad / ReverseSequence ---------------------------------------------------- */

static int infer_ccp(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *sv = n->inputs[1];
    kn_shape s = x->shape;
    if (s.rank >= 0 && sv->const_data) {
        kn_opdesc d;
        bool has[MISC_MAX_OUT];
        int st = kn_misc_ir_desc(n, &d, has);
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

/* ---- GridSample ------------------------------------------------------------------------------ */

static int infer_gridsample(kn_node *n)
{
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_gs_mode mode;
    kn_gs_pad pad;
    kn_opdesc d;
    bool has[MISC_MAX_OUT];
    int st = kn_misc_ir_desc(n, &d, has);
    if (st || (st = kn_misc_gs_params(&d, &mode, &pad))) return st;
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

/* ---- NonMaxSuppression ------------------------------------------------------------------------- */

static int infer_nms(kn_node *n)
{
    int64_t dims[2] = {-1, 3};
    kn_infer_set(n, 0, KN_I64, 2, dims);
    return KN_OK;
}

/* ---- RNN / GRU / LSTM ------------------------------------------------------------------------ */

static int infer_rnn(kn_node *n)
{
    if (need_inputs(n, 3)) return KN_ERR_INVALID;
    kn_rnn_params p;
    kn_opdesc d;
    bool has[MISC_MAX_OUT];
    const kn_shape *r = &n->inputs[2]->shape;
    int st = kn_misc_ir_desc(n, &d, has);
    if (st || (st = kn_misc_rnn_params(&d, r->rank == 3 ? r->dims[2] : -1, &p))) return st;
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

/* ---- DFT / STFT / MelWeightMatrix ---------------------------------------------------------- */

static int infer_dft(kn_node *n)
{
    if (need_inputs(n, 1)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *lv = kn_node_input(n, 1), *av = kn_node_input(n, 2);
    kn_shape s = x->shape;
    kn_opdesc d;
    bool has[MISC_MAX_OUT];
    if (kn_misc_ir_desc(n, &d, has)) return KN_ERR_INVALID;
    if (s.rank >= 2) {
        int axis;
        int st = kn_misc_dft_axis(&d, av ? av->const_data : NULL, av != NULL, s.rank, &axis);
        if (st == 1) {
            for (int i = 0; i < s.rank - 1; i++) s.dims[i] = -1;
        } else if (st) {
            return st;
        } else {
            bool one = kn_attr_int(n, "onesided", 0) != 0, inv = kn_attr_int(n, "inverse", 0) != 0;
            int64_t def = inv && one ? (s.dims[axis] < 0 ? -1 : 2 * (s.dims[axis] - 1)) : s.dims[axis];
            int64_t L = kn_misc_opt_scalar(&d, lv ? lv->const_data : NULL, lv != NULL, def, "dft_length");
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
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_value *x = n->inputs[0], *sv = n->inputs[1], *wv = kn_node_input(n, 2), *fv = kn_node_input(n, 3);
    kn_shape s = kn_shape_unknown();
    kn_opdesc d;
    bool has[MISC_MAX_OUT];
    if (kn_misc_ir_desc(n, &d, has)) return KN_ERR_INVALID;
    if (x->shape.rank == 3) {
        int64_t len = x->shape.dims[1];
        int64_t fl = kn_misc_stft_frame_length(&d, fv ? fv->const_data : NULL, fv != NULL, wv != NULL,
                                               wv ? wv->shape.rank : -1, wv ? wv->shape.dims[0] : -1, len);
        int64_t step = kn_misc_opt_scalar(&d, sv->const_data, true, 0, "frame_step");
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
    if (need_inputs(n, 2)) return KN_ERR_INVALID;
    kn_dtype dt = (kn_dtype)kn_attr_int(n, "output_datatype", KN_F32);
    if (!kn_dtype_valid(dt)) return kn_node_error(n, KN_ERR_UNSUPPORTED, "output_datatype %d", (int)dt);
    kn_opdesc d;
    bool has[MISC_MAX_OUT];
    if (kn_misc_ir_desc(n, &d, has)) return KN_ERR_INVALID;
    int64_t nb = kn_misc_opt_scalar(&d, n->inputs[0]->const_data, true, 0, "num_mel_bins");
    int64_t dl = kn_misc_opt_scalar(&d, n->inputs[1]->const_data, true, 0, "dft_length");
    int64_t dims[2] = {dl >= 0 ? dl / 2 + 1 : -1, nb >= 0 ? nb : -1};
    kn_infer_set(n, 0, dt, 2, dims);
    return KN_OK;
}

/* Defined in ir/ops/misc2.c. */
int kn_misc2_infer_affine_grid(kn_node *n);
int kn_misc2_infer_deform_conv(kn_node *n);
int kn_misc2_infer_tfidf(kn_node *n);

const kn_op_impl kn_ops_misc[] = {
    {KN_OP_NegativeLogLikelihoodLoss, infer_loss},
    {KN_OP_SoftmaxCrossEntropyLoss, infer_loss},
    {KN_OP_HannWindow, infer_window},
    {KN_OP_HammingWindow, infer_window},
    {KN_OP_BlackmanWindow, infer_window},
    {KN_OP_CenterCropPad, infer_ccp},
    {KN_OP_ReverseSequence, infer_same0},
    {KN_OP_GridSample, infer_gridsample},
    {KN_OP_NonMaxSuppression, infer_nms},
    {KN_OP_RNN, infer_rnn},
    {KN_OP_GRU, infer_rnn},
    {KN_OP_LSTM, infer_rnn},
    {KN_OP_DFT, infer_dft},
    {KN_OP_STFT, infer_stft},
    {KN_OP_MelWeightMatrix, infer_mel},
    {KN_OP_AffineGrid, kn_misc2_infer_affine_grid},
    {KN_OP_DeformConv, kn_misc2_infer_deform_conv},
    {KN_OP_TfIdfVectorizer, kn_misc2_infer_tfidf},
    {KN_OP_UNKNOWN, NULL},
};
