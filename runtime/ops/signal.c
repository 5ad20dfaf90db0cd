/*
 * Execution of the 'signal' ops (see opdesc.h): DFT, STFT, MelWeightMatrix
 * and the windows (Hann, Hamming, Blackman). Kernels are in
 * runtime/kernels/ref/signal.c; the attribute and shape rules
 * (signal_int.h) are shared with the family's type inference in the IR
 * (ir/ops/signal.c).
 */
#include <string.h>

#include "signal_int.h"

/* ---- windows -------------------------------------------------------------------------- */

static kn_window_kind window_kind(kn_op op)
{
    return op == KN_OP_HannWindow ? KN_WINDOW_HANN : op == KN_OP_HammingWindow ? KN_WINDOW_HAMMING
                                                                              : KN_WINDOW_BLACKMAN;
}

static int exec_window(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    if (kn_tensor_numel(in[0]) != 1) return kn_op_error(d, KN_ERR_INVALID, "size must be a scalar");
    int64_t len = kn_load_i64(in[0]->dtype, in[0]->data, 0);
    if (len < 0) return kn_op_error(d, KN_ERR_INVALID, "size %lld is negative", (long long)len);
    int st = kn_tensor_alloc(&out[0], (kn_dtype)kn_op_attr_int(d, "output_datatype", KN_F32), 1, &len);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_window(window_kind(d->op), kn_op_attr_int(d, "periodic", 1) != 0, &out[0]));
}

/* ---- DFT / STFT / MelWeightMatrix ---------------------------------------------------------- */

/* Integer scalar of an optional input; `def` when absent, -2 when present but
 * not known (inference), -1 with an error when malformed. */
int64_t kn_sig_opt_scalar(const kn_opdesc *d, const kn_tensor *t, bool present, int64_t def, const char *what)
{
    if (!present) return def;
    if (!t) return -2;
    if (kn_tensor_numel(t) != 1) {
        kn_op_error(d, KN_ERR_INVALID, "%s must be a scalar", what);
        return -1;
    }
    return kn_load_i64(t->dtype, t->data, 0); /* floats truncate, saturating */
}

/* DFT's axis: an input from opset 20 (default -2), an attribute before (default 1). */
int kn_sig_dft_axis(const kn_opdesc *d, const kn_tensor *axis_t, bool present, int rank, int *out)
{
    int64_t a = d->opset >= 20 ? -2 : kn_op_attr_int(d, "axis", 1);
    if (present) {
        if (!axis_t) return 1; /* unknown */
        if (kn_tensor_numel(axis_t) != 1) return kn_op_error(d, KN_ERR_INVALID, "axis must be a scalar");
        a = kn_load_i64(axis_t->dtype, axis_t->data, 0);
    }
    int na = kn_norm_axis(a, rank);
    if (na < 0 || na == rank - 1)
        return kn_op_error(d, KN_ERR_INVALID, "axis %lld is invalid for rank %d (the last axis holds re/im)", (long long)a, rank);
    *out = na;
    return KN_OK;
}

static int exec_dft(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    if (x->rank < 2) return kn_op_error(d, KN_ERR_INVALID, "input rank %d, expected >= 2", x->rank);
    bool has_axis = kn_op_input(d, in, 2) != NULL, has_len = kn_op_input(d, in, 1) != NULL;
    int axis;
    int st = kn_sig_dft_axis(d, has_axis ? in[2] : NULL, has_axis, x->rank, &axis);
    if (st) return st;
    bool one = kn_op_attr_int(d, "onesided", 0) != 0, inv = kn_op_attr_int(d, "inverse", 0) != 0;
    /* an inverse one-sided DFT (irfft) defaults to the even length its bins imply */
    int64_t L = kn_sig_opt_scalar(d, has_len ? in[1] : NULL, has_len, inv && one ? 2 * (x->dims[axis] - 1) : x->dims[axis],
                                   "dft_length");
    if (L <= 0) return kn_op_error(d, KN_ERR_INVALID, "dft_length %lld must be positive", (long long)L);
    /* The reference DFT is O(L^2) and its angle index j*k must fit in int64. */
    if (L > (1 << 24)) return kn_op_error(d, KN_ERR_UNSUPPORTED, "dft_length %lld is too large for the reference DFT", (long long)L);
    int64_t dims[KN_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = one && !inv ? L / 2 + 1 : L;
    dims[x->rank - 1] = one && inv ? 1 : 2;
    st = kn_tensor_alloc(&out[0], x->dtype, x->rank, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_dft(x, axis, L, inv, one, &out[0]));
}

/* STFT's frame length: input 3, else the window's length, else the signal's. */
int64_t kn_sig_stft_frame_length(const kn_opdesc *d, const kn_tensor *fl, bool has_fl, bool has_w, int w_rank,
                                  int64_t w_len, int64_t sig_len)
{
    if (has_fl) return kn_sig_opt_scalar(d, fl, true, 0, "frame_length");
    if (has_w) return w_rank == 1 ? w_len : -1;
    return sig_len;
}

static int exec_stft(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    const kn_tensor *x = in[0];
    const kn_tensor *w = kn_op_input(d, in, 2);
    if (x->rank != 3) return kn_op_error(d, KN_ERR_INVALID, "signal rank %d, expected 3", x->rank);
    bool has_fl = kn_op_input(d, in, 3) != NULL;
    int64_t fl = kn_sig_stft_frame_length(d, has_fl ? in[3] : NULL, has_fl, w != NULL, w ? w->rank : -1,
                                           w && w->rank > 0 ? w->dims[0] : -1, x->dims[1]);
    int64_t step = kn_sig_opt_scalar(d, in[1], true, 0, "frame_step");
    if (fl <= 0 || step <= 0 || fl > x->dims[1])
        return kn_op_error(d, KN_ERR_INVALID, "frame_length %lld / frame_step %lld invalid for signal length %lld",
                             (long long)fl, (long long)step, (long long)x->dims[1]);
    bool one = kn_op_attr_int(d, "onesided", 1) != 0;
    int64_t dims[4] = {x->dims[0], 1 + (x->dims[1] - fl) / step, one ? fl / 2 + 1 : fl, 2};
    int st = kn_tensor_alloc(&out[0], x->dtype, 4, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_stft(x, step, fl, w, one, &out[0]));
}

static int exec_mel(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 5)) return KN_ERR_INVALID;
    for (int i = 0; i < 5; i++)
        if (kn_tensor_numel(in[i]) != 1) return kn_op_error(d, KN_ERR_INVALID, "input %d must be a scalar", i);
    int64_t nb = kn_load_i64(in[0]->dtype, in[0]->data, 0), dl = kn_load_i64(in[1]->dtype, in[1]->data, 0);
    if (nb <= 0 || dl <= 0 || nb > (1 << 20) || dl > ((int64_t)1 << 30))
        return kn_op_error(d, KN_ERR_INVALID, "num_mel_bins %lld / dft_length %lld out of range", (long long)nb, (long long)dl);
    int64_t dims[2] = {dl / 2 + 1, nb};
    int st = kn_tensor_alloc(&out[0], (kn_dtype)kn_op_attr_int(d, "output_datatype", KN_F32), 2, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_mel_weight_matrix(nb, dl, kn_load_f64(in[2]->dtype, in[2]->data, 0),
                                               kn_load_f64(in[3]->dtype, in[3]->data, 0),
                                               kn_load_f64(in[4]->dtype, in[4]->data, 0), &out[0]));
}

/* ---- the family table ---------------------------------------------------------- */

const kn_exec_impl kn_exec_signal[] = {
    {KN_OP_HannWindow, exec_window},
    {KN_OP_HammingWindow, exec_window},
    {KN_OP_BlackmanWindow, exec_window},
    {KN_OP_DFT, exec_dft},
    {KN_OP_STFT, exec_stft},
    {KN_OP_MelWeightMatrix, exec_mel},
    {KN_OP_UNKNOWN, NULL},
};
