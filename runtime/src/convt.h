/*
 * runtime/src/convt.h — ConvTranspose in compiled artifacts at run-time
 * shapes (private to libkiln_rt). runtime/ops dispatches a compiled
 * artifact's ConvTranspose and kiln::FusedConvTranspose nodes here first;
 * the reference evaluator runs the plain C kernel, which stays the oracle.
 */
#ifndef KILN_RT_CONVT_H
#define KILN_RT_CONVT_H

#include <stdbool.h>
#include <stdint.h>

#include <kiln/abi.h>

#include "k_nn.h"
#include "opdesc.h"

/* y = ConvTranspose(x, w, b) (y allocated, its dims the node's output) on
 * the patch kernel, with its packed weights kept in os. Taken: f32, 2-D,
 * kernel = stride, no padding or dilation, one group, w and b constant,
 * AVX-512. KN_ERR_UNSUPPORTED with no message and nothing written
 * otherwise: the caller runs kn_k_conv_transpose. post (n_post of them,
 * a fused node's, the same at every run): applied by the kernel where its
 * epilogue has them all (*posts_done true), else left to the caller. nhwc
 * (kn_opdesc.nhwc): x and y are channels-last in memory. */
int kn_convt_fast(kn_op_session *os, const kn_tensor *x, const kn_tensor *w, const kn_tensor *b,
                  const kn_abi_post *post, int n_post, const kn_nn_window *win, int64_t group, kn_tensor *y,
                  bool *posts_done, int nhwc);
/* The plain C kernel (kn_k_conv_transpose) for a node whose input or
 * output is channels-last (nhwc: KN_OPNODE_NHWC_SRC/DST bits): through
 * NCHW copies of them. */
int kn_convt_reference(const kn_tensor *x, const kn_tensor *w, const kn_tensor *b, const kn_nn_window *win,
                       int64_t group, kn_tensor *y, int nhwc);

#endif
