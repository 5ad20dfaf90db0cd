/*
 * Execution of the 'recurrent' ops (see opdesc.h): RNN, GRU, LSTM. A
 * compiled artifact runs kiln's packed kernel (runtime/src/rnn.c); the
 * reference evaluator, and the artifact where that kernel declines, the
 * plain C kernel (runtime/kernels/ref/recurrent.c). The attribute rules
 * (recurrent_int.h) are shared with the family's type inference in the IR
 * (ir/ops/recurrent.c).
 */
#include <string.h>
#include <strings.h>

#include "recurrent_int.h"
#include "rnn.h"

/* ---- RNN / GRU / LSTM ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    kn_rnn_act act;
    int n_params; /* alpha, then beta, consumed from the attribute lists */
    double alpha, beta;
} k_acts[] = {
    {"Tanh", KN_ACT_TANH, 0, 0, 0},           {"Sigmoid", KN_ACT_SIGMOID, 0, 0, 0},
    {"Relu", KN_ACT_RELU, 0, 0, 0},           {"Affine", KN_ACT_AFFINE, 2, 1, 0},
    {"LeakyRelu", KN_ACT_LEAKYRELU, 1, 0.01, 0}, {"ThresholdedRelu", KN_ACT_THRESHOLDEDRELU, 1, 1, 0},
    {"ScaledTanh", KN_ACT_SCALEDTANH, 2, 1, 1}, {"HardSigmoid", KN_ACT_HARDSIGMOID, 2, 0.2, 0.5},
    {"Elu", KN_ACT_ELU, 1, 1, 0},             {"Softsign", KN_ACT_SOFTSIGN, 0, 0, 0},
    {"Softplus", KN_ACT_SOFTPLUS, 0, 0, 0},
};

/* Reads the attributes of an RNN/GRU/LSTM node into p. */
int kn_rec_params(const kn_opdesc *d, int64_t r_hidden, kn_rnn_params *p)
{
    memset(p, 0, sizeof *p);
    p->kind = d->op == KN_OP_RNN ? KN_RNN_SIMPLE : d->op == KN_OP_GRU ? KN_RNN_GRU : KN_RNN_LSTM;
    p->hidden = kn_op_attr_int(d, "hidden_size", -1);
    /* Without the attribute, R (num_directions, G*hidden, hidden) still says it. */
    if (!kn_op_attr(d, "hidden_size") && r_hidden >= 0) p->hidden = r_hidden;
    const char *dir = kn_op_attr_string(d, "direction", "forward");
    if (!strcmp(dir, "forward") || !strcmp(dir, "reverse")) p->num_dir = 1;
    else if (!strcmp(dir, "bidirectional")) p->num_dir = 2;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown direction '%s'", dir);
    p->reverse = !strcmp(dir, "reverse");
    p->layout = (int)kn_op_attr_int(d, "layout", 0);
    p->linear_before_reset = kn_op_attr_int(d, "linear_before_reset", 0) != 0;
    p->input_forget = kn_op_attr_int(d, "input_forget", 0) != 0;
    p->clip = kn_op_attr_float(d, "clip", 0);
    int per = p->kind == KN_RNN_SIMPLE ? 1 : p->kind == KN_RNN_GRU ? 2 : 3;
    static const kn_rnn_act defaults[3] = {KN_ACT_SIGMOID, KN_ACT_TANH, KN_ACT_TANH};
    const kn_attr *acts = kn_op_attr(d, "activations");
    int nacts = acts && acts->kind == KN_ATTR_STRINGS ? acts->n : 0;
    if (nacts && nacts != per * p->num_dir)
        return kn_op_error(d, KN_ERR_INVALID, "%d activations given, expected %d", nacts, per * p->num_dir);
    const float *al, *be;
    int nal = kn_op_attr_floats(d, "activation_alpha", &al), nbe = kn_op_attr_floats(d, "activation_beta", &be);
    int ia = 0, ib = 0;
    for (int dv = 0; dv < p->num_dir; dv++)
        for (int k = 0; k < per; k++) {
            p->act[dv][k] = p->kind == KN_RNN_SIMPLE ? KN_ACT_TANH : defaults[k];
            if (!nacts) continue;
            const char *name = acts->strings[dv * per + k];
            size_t e = 0;
            while (e < sizeof k_acts / sizeof k_acts[0] && strcasecmp(k_acts[e].name, name)) e++;
            if (e == sizeof k_acts / sizeof k_acts[0])
                return kn_op_error(d, KN_ERR_UNSUPPORTED, "activation '%s' is not supported", name);
            p->act[dv][k] = k_acts[e].act;
            p->alpha[dv][k] = k_acts[e].alpha;
            p->beta[dv][k] = k_acts[e].beta;
            if (k_acts[e].n_params >= 1 && ia < nal) p->alpha[dv][k] = al[ia++];
            if (k_acts[e].n_params >= 2 && ib < nbe) p->beta[dv][k] = be[ib++];
        }
    return KN_OK;
}

static int exec_rnn(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 3)) return KN_ERR_INVALID;
    kn_rnn_params p;
    int st = kn_rec_params(d, in[2]->rank == 3 ? in[2]->dims[2] : -1, &p);
    if (st) return st;
    const kn_tensor *x = in[0];
    if (x->rank != 3) return kn_op_error(d, KN_ERR_INVALID, "X rank %d, expected 3", x->rank);
    if (!kn_op_attr(d, "hidden_size") && in[2]->rank == 3) p.hidden = in[2]->dims[2];
    if (p.hidden <= 0) return kn_op_error(d, KN_ERR_INVALID, "hidden_size must be positive");
    int64_t T = x->dims[p.layout ? 1 : 0], B = x->dims[p.layout ? 0 : 1];
    int64_t yd[4] = {T, p.num_dir, B, p.hidden}, ydb[4] = {B, T, p.num_dir, p.hidden};
    int64_t hd[3] = {p.num_dir, B, p.hidden}, hdb[3] = {B, p.num_dir, p.hidden};
    kn_tensor *outs[3] = {NULL, NULL, NULL};
    for (int i = 0; i < d->n_outputs && i < 3; i++) {
        if (!kn_op_has_output(d, i)) continue;
        st = i == 0 ? kn_tensor_alloc(&out[0], x->dtype, 4, p.layout ? ydb : yd)
                    : kn_tensor_alloc(&out[i], x->dtype, 3, p.layout ? hdb : hd);
        if (st) return kn_op_fail(d, st);
        outs[i] = &out[i];
    }
    const kn_tensor *opt[8] = {0};
    for (int i = 3; i < d->n_inputs && i < 8; i++) opt[i] = kn_op_input(d, in, i);
    bool lstm = p.kind == KN_RNN_LSTM;
    /* compiled artifacts: kiln's packed kernel (runtime/src/rnn.c), unless it
     * declines (dtypes, KILN_RNN=ref); the reference evaluator: the plain C
     * kernel, the oracle */
    if (d->sess) {
        st = kn_rnn_fast(d->sess, &p, x, in[1], in[2], opt[3], opt[4], opt[5], lstm ? opt[6] : NULL,
                         lstm ? opt[7] : NULL, outs[0], outs[1], lstm ? outs[2] : NULL);
        if (st != KN_ERR_UNSUPPORTED) return kn_op_fail(d, st);
        d->sess->impl = NULL;
    }
    return kn_op_fail(d, kn_k_rnn(&p, x, in[1], in[2], opt[3], opt[4], opt[5], lstm ? opt[6] : NULL,
                                 lstm ? opt[7] : NULL, outs[0], outs[1], lstm ? outs[2] : NULL));
}

/* ---- the family table ---------------------------------------------------------- */

const kn_exec_impl kn_exec_recurrent[] = {
    {KN_OP_RNN, exec_rnn},
    {KN_OP_GRU, exec_rnn},
    {KN_OP_LSTM, exec_rnn},
    {KN_OP_UNKNOWN, NULL},
};
