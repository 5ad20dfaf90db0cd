/* Reference kernel of the 'recurrent' family (k_recurrent.h): RNN, GRU and
 * LSTM as ONNX defines them, in double: the oracle the packed kernel of
 * runtime/src/rnn.c is tested against. */
#include "k_recurrent.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- recurrent networks ----------------------------------------------------------------- */

double kn_k_rnn_act(kn_rnn_act a, double x, double alpha, double beta)
{
    switch (a) {
    case KN_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case KN_ACT_RELU: return x > 0 ? x : 0;
    case KN_ACT_AFFINE: return alpha * x + beta;
    case KN_ACT_LEAKYRELU: return x >= 0 ? x : alpha * x;
    case KN_ACT_THRESHOLDEDRELU: return x > alpha ? x : 0;
    case KN_ACT_SCALEDTANH: return alpha * tanh(beta * x);
    case KN_ACT_HARDSIGMOID: return fmax(0, fmin(1, alpha * x + beta));
    case KN_ACT_ELU: return x >= 0 ? x : alpha * (exp(x) - 1);
    case KN_ACT_SOFTSIGN: return x / (1 + fabs(x));
    case KN_ACT_SOFTPLUS: return log1p(exp(x));
    default: return tanh(x);
    }
}

/* Shapes and scratch shared by the steps of one direction. */
typedef struct rnn_run {
    const kn_rnn_params *p;
    const kn_tensor *X, *W, *R, *B, *P;
    int64_t T, Bn, I, H, G;
    double *xw, *hr, *rh, *h, *c; /* G*H, G*H, H, H, H */
} rnn_run;

static double at(const kn_tensor *t, int64_t i) { return kn_load_f64(t->dtype, t->data, (size_t)i); }

static double clipv(const kn_rnn_params *p, double v)
{
    if (p->clip > 0) v = v < -p->clip ? -p->clip : v > p->clip ? p->clip : v;
    return v;
}

/* xw = X_t W^T + Wb and hr = H R^T + Rb for direction d, batch b, time t. */
static void rnn_linear(rnn_run *r, int d, int64_t b, int64_t t)
{
    int64_t GH = r->G * r->H;
    int64_t xoff = r->p->layout ? (b * r->T + t) * r->I : (t * r->Bn + b) * r->I;
    for (int64_t g = 0; g < GH; g++) {
        double sx = r->B ? at(r->B, d * 2 * GH + g) : 0, sh = r->B ? at(r->B, d * 2 * GH + GH + g) : 0;
        for (int64_t k = 0; k < r->I; k++) sx += at(r->X, xoff + k) * at(r->W, (d * GH + g) * r->I + k);
        for (int64_t k = 0; k < r->H; k++) sh += r->h[k] * at(r->R, (d * GH + g) * r->H + k);
        r->xw[g] = sx;
        r->hr[g] = sh;
    }
}

/* One time step updating r->h (and r->c). */
static void rnn_step(rnn_run *r, int d)
{
    const kn_rnn_params *p = r->p;
    const kn_rnn_act *a = p->act[d];
    const double *al = p->alpha[d], *be = p->beta[d];
    int64_t H = r->H;
    if (p->kind == KN_RNN_SIMPLE) {
        for (int64_t j = 0; j < H; j++) r->h[j] = kn_k_rnn_act(a[0], clipv(p, r->xw[j] + r->hr[j]), al[0], be[0]);
        return;
    }
    if (p->kind == KN_RNN_GRU) {
        /* r->rh holds (r ⊙ H_prev) R_h^T + Rb_h when linear_before_reset is off. */
        for (int64_t j = 0; j < H; j++) {
            double rg = kn_k_rnn_act(a[0], clipv(p, r->xw[H + j] + r->hr[H + j]), al[0], be[0]);
            r->rh[j] = rg; /* reset gate, consumed below */
        }
        double *hn = r->c; /* scratch for the new state */
        for (int64_t j = 0; j < H; j++) {
            double z = kn_k_rnn_act(a[0], clipv(p, r->xw[j] + r->hr[j]), al[0], be[0]);
            double pre;
            if (p->linear_before_reset) {
                pre = r->xw[2 * H + j] + r->rh[j] * r->hr[2 * H + j];
            } else {
                int64_t GH = 3 * H;
                double s = r->B ? at(r->B, d * 2 * GH + GH + 2 * H + j) : 0;
                for (int64_t k = 0; k < H; k++) s += r->rh[k] * r->h[k] * at(r->R, (d * GH + 2 * H + j) * H + k);
                pre = r->xw[2 * H + j] + s;
            }
            double hh = kn_k_rnn_act(a[1], clipv(p, pre), al[1], be[1]);
            hn[j] = (1 - z) * hh + z * r->h[j];
        }
        memcpy(r->h, hn, sizeof *hn * (size_t)H);
        return;
    }
    /* LSTM: gates i, o, f, c; peepholes P = (Pi, Po, Pf). */
    for (int64_t j = 0; j < H; j++) {
        double pi = r->P ? at(r->P, d * 3 * H + j) : 0, po = r->P ? at(r->P, d * 3 * H + H + j) : 0;
        double pf = r->P ? at(r->P, d * 3 * H + 2 * H + j) : 0;
        double cp = r->c[j];
        double i = kn_k_rnn_act(a[0], clipv(p, r->xw[j] + r->hr[j] + pi * cp), al[0], be[0]);
        double f = kn_k_rnn_act(a[0], clipv(p, r->xw[2 * H + j] + r->hr[2 * H + j] + pf * cp), al[0], be[0]);
        if (p->input_forget) f = 1 - i;
        double cc = kn_k_rnn_act(a[1], clipv(p, r->xw[3 * H + j] + r->hr[3 * H + j]), al[1], be[1]);
        double cn = f * cp + i * cc;
        double o = kn_k_rnn_act(a[0], clipv(p, r->xw[H + j] + r->hr[H + j] + po * cn), al[0], be[0]);
        r->c[j] = cn;
        r->rh[j] = o * kn_k_rnn_act(a[2], cn, al[2], be[2]); /* new h, copied after the loop */
    }
    memcpy(r->h, r->rh, sizeof *r->h * (size_t)H);
}

static int64_t state_off(const kn_rnn_params *p, int d, int64_t b, int64_t Bn)
{
    return p->layout ? (b * p->num_dir + d) * p->hidden : (d * Bn + b) * p->hidden;
}

static void rnn_direction(rnn_run *r, int d, const kn_tensor *seq_lens, const kn_tensor *init_h,
                          const kn_tensor *init_c, kn_tensor *Y, kn_tensor *Y_h, kn_tensor *Y_c)
{
    const kn_rnn_params *p = r->p;
    bool rev = p->num_dir == 2 ? d == 1 : p->reverse;
    int64_t H = r->H;
    for (int64_t b = 0; b < r->Bn; b++) {
        int64_t so = state_off(p, d, b, r->Bn);
        for (int64_t j = 0; j < H; j++) {
            r->h[j] = init_h ? at(init_h, so + j) : 0;
            r->c[j] = init_c ? at(init_c, so + j) : 0;
        }
        int64_t len = seq_lens ? kn_load_i64(seq_lens->dtype, seq_lens->data, (size_t)b) : r->T;
        for (int64_t s = 0; s < len; s++) {
            int64_t t = rev ? len - 1 - s : s;
            rnn_linear(r, d, b, t);
            rnn_step(r, d);
            if (!Y) continue;
            int64_t yo = p->layout ? ((b * r->T + t) * p->num_dir + d) * H : ((t * p->num_dir + d) * r->Bn + b) * H;
            for (int64_t j = 0; j < H; j++) kn_store_f64(Y->dtype, Y->data, (size_t)(yo + j), r->h[j]);
        }
        for (int64_t j = 0; j < H; j++) {
            if (Y_h) kn_store_f64(Y_h->dtype, Y_h->data, (size_t)(so + j), r->h[j]);
            if (Y_c) kn_store_f64(Y_c->dtype, Y_c->data, (size_t)(so + j), r->c[j]);
        }
    }
}

static bool dims_are(const kn_tensor *t, int rank, int64_t d0, int64_t d1, int64_t d2)
{
    int64_t want[3] = {d0, d1, d2};
    if (!t) return true;
    if (t->rank != rank) return false;
    for (int i = 0; i < rank; i++)
        if (t->dims[i] != want[i]) return false;
    return true;
}

int kn_k_rnn(const kn_rnn_params *p, const kn_tensor *X, const kn_tensor *W, const kn_tensor *R,
             const kn_tensor *B, const kn_tensor *seq_lens, const kn_tensor *init_h,
             const kn_tensor *init_c, const kn_tensor *P, kn_tensor *Y, kn_tensor *Y_h, kn_tensor *Y_c)
{
    rnn_run r = {.p = p, .X = X, .W = W, .R = R, .B = B, .P = P, .H = p->hidden};
    r.G = p->kind == KN_RNN_SIMPLE ? 1 : p->kind == KN_RNN_GRU ? 3 : 4;
    if (X->rank != 3) return kn_error(KN_ERR_INVALID, "X rank %d, expected 3", X->rank);
    r.T = p->layout ? X->dims[1] : X->dims[0];
    r.Bn = p->layout ? X->dims[0] : X->dims[1];
    r.I = X->dims[2];
    int64_t D = p->num_dir, H = r.H, GH = r.G * H;
    if (H <= 0) return kn_error(KN_ERR_INVALID, "hidden_size %lld must be positive", (long long)H);
    if (!dims_are(W, 3, D, GH, r.I)) return kn_error(KN_ERR_INVALID, "W must be (%lld, %lld, %lld)", (long long)D, (long long)GH, (long long)r.I);
    if (!dims_are(R, 3, D, GH, H)) return kn_error(KN_ERR_INVALID, "R must be (%lld, %lld, %lld)", (long long)D, (long long)GH, (long long)H);
    if (!dims_are(B, 2, D, 2 * GH, 0)) return kn_error(KN_ERR_INVALID, "B must be (%lld, %lld)", (long long)D, (long long)(2 * GH));
    if (!dims_are(P, 2, D, 3 * H, 0)) return kn_error(KN_ERR_INVALID, "P must be (%lld, %lld)", (long long)D, (long long)(3 * H));
    int64_t s0 = p->layout ? r.Bn : D, s1 = p->layout ? D : r.Bn;
    if (!dims_are(init_h, 3, s0, s1, H) || !dims_are(init_c, 3, s0, s1, H))
        return kn_error(KN_ERR_INVALID, "initial state must be (%lld, %lld, %lld)", (long long)s0, (long long)s1, (long long)H);
    if (seq_lens) {
        if (kn_tensor_numel(seq_lens) != r.Bn) return kn_error(KN_ERR_INVALID, "sequence_lens must have %lld entries", (long long)r.Bn);
        for (int64_t b = 0; b < r.Bn; b++) {
            int64_t l = kn_load_i64(seq_lens->dtype, seq_lens->data, (size_t)b);
            if (l < 0 || l > r.T) return kn_error(KN_ERR_INVALID, "sequence length %lld outside [0, %lld]", (long long)l, (long long)r.T);
        }
    }
    double *buf = malloc(sizeof *buf * (size_t)(2 * GH + 3 * H));
    if (!buf) return kn_error(KN_ERR_NOMEM, "out of memory");
    r.xw = buf;
    r.hr = buf + GH;
    r.rh = buf + 2 * GH;
    r.h = r.rh + H;
    r.c = r.h + H;
    for (int d = 0; d < D; d++) rnn_direction(&r, d, seq_lens, init_h, init_c, Y, Y_h, Y_c);
    free(buf);
    return KN_OK;
}
