/*
 * runtime/ops/misc_int.h — private to the 'misc' family: the attribute and
 * shape rules that both its execution (runtime/ops/misc.c) and its type/shape
 * inference (ir/ops/misc.c, through a descriptor the IR builds per node)
 * need, so each rule exists once. Errors name the node through
 * kn_op_error().
 */
#ifndef KILN_RUNTIME_MISC_INT_H
#define KILN_RUNTIME_MISC_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "k_misc.h"
#include "opdesc.h"

/* The 'reduction' attribute of the loss ops. */
int kn_misc_loss_reduction(const kn_opdesc *d, kn_loss_reduction *out);
/* Output dims of CenterCropPad: xdims with the listed axes set from the
 * shape tensor. */
int kn_misc_ccp_dims(const kn_opdesc *d, int rank, const int64_t *xdims, const kn_tensor *shape, int64_t *dims);
/* TfIdfVectorizer's attributes (pool_strings: unsupported). */
int kn_misc_tfidf_params(const kn_opdesc *d, kn_tfidf_params *p);

#endif
