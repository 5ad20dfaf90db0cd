/*
 * runtime/ops/misc_int.h — private to the 'misc' family: the attribute and
 * shape rules that both its execution (runtime/ops/misc.c, misc2.c) and its
 * type/shape inference (ir/ops/misc.c, misc2.c, through a descriptor the IR
 * builds per node) need, so each rule exists once. Errors name the node
 * through kn_op_error().
 */
#ifndef KILN_RUNTIME_MISC_INT_H
#define KILN_RUNTIME_MISC_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "k_misc.h"
#include "k_misc2.h"
#include "opdesc.h"

/* ---- misc.c ---- */

/* The 'reduction' attribute of the loss ops. */
int kn_misc_loss_reduction(const kn_opdesc *d, kn_loss_reduction *out);
/* Output dims of CenterCropPad: xdims with the listed axes set from the
 * shape tensor. */
int kn_misc_ccp_dims(const kn_opdesc *d, int rank, const int64_t *xdims, const kn_tensor *shape, int64_t *dims);
/* GridSample's mode and padding_mode. */
int kn_misc_gs_params(const kn_opdesc *d, kn_gs_mode *mode, kn_gs_pad *pad);
/* The attributes of an RNN/GRU/LSTM node. Without 'hidden_size', r_hidden
 * (dim 2 of R when known, else -1) says it. */
int kn_misc_rnn_params(const kn_opdesc *d, int64_t r_hidden, kn_rnn_params *p);
/* Integer scalar of an optional input t; `def` when not present, -2 when
 * present but its value is not known (t NULL: inference), -1 with an error
 * when malformed. */
int64_t kn_misc_opt_scalar(const kn_opdesc *d, const kn_tensor *t, bool present, int64_t def, const char *what);
/* DFT's axis (input 2 from opset 20, else attribute) normalized for rank;
 * returns 1 when the input is present but not known. */
int kn_misc_dft_axis(const kn_opdesc *d, const kn_tensor *axis_t, bool present, int rank, int *out);
/* STFT's frame length: input 3 (fl, when has_fl), else the window's length
 * (has_w: a window is given, of rank w_rank and first dim w_len), else
 * sig_len; -1/-2 as kn_misc_opt_scalar. */
int64_t kn_misc_stft_frame_length(const kn_opdesc *d, const kn_tensor *fl, bool has_fl, bool has_w, int w_rank,
                                  int64_t w_len, int64_t sig_len);

/* ---- misc2.c ---- */

/* AffineGrid: reads the size input (N, C, H, W) or (N, C, D, H, W) into
 * dims; *s = spatial rank. */
int kn_misc_ag_size(const kn_opdesc *d, const kn_tensor *size, int64_t *dims, int *s);
/* DeformConv: fills p from the attributes for spatial rank s and kernel
 * dims kd (from W, -1 where unknown). */
int kn_misc_dc_params(const kn_opdesc *d, int s, const int64_t *kd, kn_deform_params *p);
/* Output spatial dim i of a DeformConv over an input dim of size len (-1
 * if unknown). */
int64_t kn_misc_dc_out_dim(const kn_deform_params *p, int i, int64_t len);
/* TfIdfVectorizer's attributes (pool_strings: unsupported). */
int kn_misc_tfidf_params(const kn_opdesc *d, kn_tfidf_params *p);

/* Exec functions of misc2.c, listed in misc.c's kn_exec_misc. */
int kn_misc_exec_affine_grid(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_misc_exec_deform_conv(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);
int kn_misc_exec_tfidf(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out);

#endif
