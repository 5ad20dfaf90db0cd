/*
 * runtime/src/rnn_kern_c.c — the recurrent layers' kernels (rnn.h) in plain
 * C, for CPUs without AVX2+FMA and for KILN_RNN=portable. Loops over the 16
 * columns of a panel innermost, which compilers vectorize for whatever the
 * build targets; activations through libm in float (sigmoid, tanh, ReLU)
 * or the reference kernel's double formula (the others).
 */
#include <math.h>

#include "rnn.h"

static void gemm_c(const float *A, int64_t lda, int64_t M, int64_t K, const float *P, int64_t np, const float *bias,
                   float *C, int64_t ldc)
{
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < np; j++) {
            float acc[KN_RNN_LANES];
            const float *pj = P + j * K * KN_RNN_LANES, *a = A + m * lda;
            for (int l = 0; l < KN_RNN_LANES; l++) acc[l] = bias ? bias[j * KN_RNN_LANES + l] : 0.0f;
            for (int64_t k = 0; k < K; k++)
                for (int l = 0; l < KN_RNN_LANES; l++) acc[l] += a[k] * pj[k * KN_RNN_LANES + l];
            for (int l = 0; l < KN_RNN_LANES; l++) C[m * ldc + j * KN_RNN_LANES + l] = acc[l];
        }
}

static void gemv_c(const float *h, int64_t K, const float *P, int64_t ldp, int np, float *acc)
{
    int n = np * KN_RNN_LANES;
    for (int64_t k = 0; k < K; k++)
        for (int l = 0; l < n; l++) acc[l] += h[k] * P[k * ldp + l];
}

static void act_c(kn_rnn_act a, float alpha, float beta, float *x, int n)
{
    switch (a) {
    case KN_ACT_SIGMOID:
        for (int i = 0; i < n; i++) x[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    case KN_ACT_TANH:
        for (int i = 0; i < n; i++) x[i] = tanhf(x[i]);
        break;
    case KN_ACT_RELU:
        for (int i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0.0f;
        break;
    default:
        for (int i = 0; i < n; i++) x[i] = (float)kn_k_rnn_act(a, x[i], alpha, beta);
        break;
    }
}

const kn_rnn_kern kn_rnn_kern_portable = {"portable", gemm_c, gemv_c, NULL, act_c, NULL, NULL, NULL, NULL};
