/*
 * runtime/ops/signal_int.h — private to the 'signal' family: the attribute and
 * shape rules that both its execution (runtime/ops/signal.c) and its type/shape
 * inference (ir/ops/signal.c, through a descriptor the IR builds per node)
 * need, so each rule exists once. Errors name the node through
 * kn_op_error().
 */
#ifndef KILN_RUNTIME_SIGNAL_INT_H
#define KILN_RUNTIME_SIGNAL_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "k_signal.h"
#include "opdesc.h"

/* Integer scalar of an optional input t; `def` when not present, -2 when
 * present but its value is not known (t NULL: inference), -1 with an error
 * when malformed. */
int64_t kn_sig_opt_scalar(const kn_opdesc *d, const kn_tensor *t, bool present, int64_t def, const char *what);
/* DFT's axis (input 2 from opset 20, else attribute) normalized for rank;
 * returns 1 when the input is present but not known. */
int kn_sig_dft_axis(const kn_opdesc *d, const kn_tensor *axis_t, bool present, int rank, int *out);
/* STFT's frame length: input 3 (fl, when has_fl), else the window's length
 * (has_w: a window is given, of rank w_rank and first dim w_len), else
 * sig_len; -1/-2 as kn_sig_opt_scalar. */
int64_t kn_sig_stft_frame_length(const kn_opdesc *d, const kn_tensor *fl, bool has_fl, bool has_w, int w_rank,
                                  int64_t w_len, int64_t sig_len);

#endif
