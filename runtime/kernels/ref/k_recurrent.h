/*
 * k_recurrent.h — the plain C reference kernel of the 'recurrent' family
 * (RNN, GRU, LSTM; recurrent.c) and the parameters a node's attributes
 * give, which kiln's packed kernel (runtime/src/rnn.h) takes too.
 */
#ifndef KILN_K_RECURRENT_H
#define KILN_K_RECURRENT_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_rnn_kind { KN_RNN_SIMPLE, KN_RNN_GRU, KN_RNN_LSTM } kn_rnn_kind;

typedef enum kn_rnn_act {
    KN_ACT_TANH, KN_ACT_SIGMOID, KN_ACT_RELU, KN_ACT_AFFINE, KN_ACT_LEAKYRELU,
    KN_ACT_THRESHOLDEDRELU, KN_ACT_SCALEDTANH, KN_ACT_HARDSIGMOID, KN_ACT_ELU,
    KN_ACT_SOFTSIGN, KN_ACT_SOFTPLUS,
} kn_rnn_act;

typedef struct kn_rnn_params {
    kn_rnn_kind kind;
    int64_t hidden;
    int num_dir;              /* 1 or 2 */
    bool reverse;             /* with num_dir 1: run backwards */
    int layout;               /* 0: X (T, B, I); 1: X (B, T, I) */
    bool linear_before_reset; /* GRU */
    bool input_forget;        /* LSTM: forget gate = 1 - input gate */
    double clip;              /* > 0: gate pre-activations clipped to [-clip, clip] */
    kn_rnn_act act[2][3];     /* per direction: f, g, h (as many as the kind uses) */
    double alpha[2][3], beta[2][3];
} kn_rnn_params;

/* One activation of a recurrent op, in double (alpha and beta as ONNX's). */
double kn_k_rnn_act(kn_rnn_act a, double x, double alpha, double beta);

/* RNN / GRU / LSTM as ONNX defines them (gate orders z,r,h and i,o,f,c).
 * B, seq_lens, init_h, init_c and P may be NULL; Y, Y_h, Y_c may be NULL
 * (not wanted) or preallocated zeroed with the ONNX shapes for p->layout. */
int kn_k_rnn(const kn_rnn_params *p, const kn_tensor *X, const kn_tensor *W, const kn_tensor *R,
             const kn_tensor *B, const kn_tensor *seq_lens, const kn_tensor *init_h,
             const kn_tensor *init_c, const kn_tensor *P, kn_tensor *Y, kn_tensor *Y_h, kn_tensor *Y_c);

#ifdef __cplusplus
}
#endif
#endif
