/*
 * runtime/ops/recurrent_int.h — private to the 'recurrent' family: the attribute and
 * shape rules that both its execution (runtime/ops/recurrent.c) and its type/shape
 * inference (ir/ops/recurrent.c, through a descriptor the IR builds per node)
 * need, so each rule exists once. Errors name the node through
 * kn_op_error().
 */
#ifndef KILN_RUNTIME_RECURRENT_INT_H
#define KILN_RUNTIME_RECURRENT_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "k_recurrent.h"
#include "opdesc.h"

/* The attributes of an RNN/GRU/LSTM node. Without 'hidden_size', r_hidden
 * (dim 2 of R when known, else -1) says it. */
int kn_rec_params(const kn_opdesc *d, int64_t r_hidden, kn_rnn_params *p);

#endif
