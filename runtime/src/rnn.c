/*
 * runtime/src/rnn.c — LSTM, GRU and RNN in compiled artifacts: weights
 * packed once per session, the input projection of all time steps as one
 * product, then per step the recurrent product with the gates fused
 * (rnn.h says how; docs/kernels.md why kiln's own kernel and not oneDNN's
 * RNN primitives).
 *
 * Why not oneDNN's LSTM/GRU/vanilla RNN: its gate orders differ from
 * ONNX's (a reorder of W, R and B), it has no per-batch sequence lengths
 * (ONNX's sequence_lens), no peepholes or input_forget, no clip, one
 * activation for a vanilla RNN and none to choose for LSTM/GRU, and
 * linear_before_reset only as a distinct primitive; an ONNX layer would run
 * on it only in its plainest form. The recurrent step at batch 1 is a
 * matrix-vector product that streams R from the caches: a short kernel of
 * our own does it at the memory's speed and takes every ONNX feature.
 *
 * The packed weights are kept in the node's kn_op_session: made at the
 * first run, remade only when W, R, B or P are not the artifact's constants
 * (their bytes may change between runs) or come at another address.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bigmem.h"
#include "config.h"
#include "rnn.h"
#include "rt_internal.h"

enum { L = KN_RNN_LANES };

/* A step splits its blocks across threads from this many multiply-adds on:
 * below, handing a step's half to another thread costs about what it
 * saves. On 2 threads of an AMD Zen 3, H=128 LSTM and GRU layers (64K and
 * 48K per step) ran 1.4-1.7x faster; the threshold itself is not tuned. */
#define RNN_PAR_MIN_MACS 32768

typedef struct rnn_state {
    const kn_rnn_kern *k;
    kn_rnn_kind kind;
    bool lbr;
    int64_t D, G, H, Hp, I, nblk, GHp;
    const void *src[4]; /* W, R, B, P the packing was made from */
    bool packed;        /* from constants: kept for the next runs */
    float *wp;          /* D panels-sets of the projection: [D*GHp/16][I][16] */
    float *rp;          /* D x nblk blocks of R: [H][G*16] each */
    float *bx;          /* D*GHp: Wb + Rb (GRU's h gate: Wb only), added to the projection */
    float *bh;          /* D*Hp: GRU's Rb of the h gate (it goes inside r ⊙ (...) or after r ⊙ h) */
    float *peep;        /* D*3*Hp: LSTM's P (i, o, f) */
    float *xw;          /* the projection, [T*B][D*GHp] */
    size_t xw_cap;
    float *scr; /* per direction: h (two), c, z, r ⊙ h, each [B][Hp] */
    size_t scr_cap;
    int solo_runs; /* runs left on the calling thread alone (contended_backoff) */
} rnn_state;

static void state_free(void *v)
{
    rnn_state *st = v;
    if (!st) return;
    kn_big_free(st->wp), kn_big_free(st->rp), kn_big_free(st->bx), kn_big_free(st->bh), kn_big_free(st->peep);
    kn_big_free(st->xw), kn_big_free(st->scr);
    free(st);
}

static float *alloc_f(size_t n)
{
    void *p = kn_big_alloc((n ? n : 1) * sizeof(float));
    if (!p) return NULL;
    memset(p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

/* Grows a scratch buffer to n floats (contents not kept). */
static int reserve(float **buf, size_t *cap, size_t n)
{
    if (*cap >= n) return KN_OK;
    kn_big_free(*buf);
    *cap = 0;
    if (!(*buf = alloc_f(n))) return kn_error(KN_ERR_NOMEM, "recurrent layer: out of memory (%zu floats)", n);
    *cap = n;
    return KN_OK;
}

static bool is_const(const kn_op_session *os, const kn_tensor *t)
{
    return !t || kn_op_is_constant(os, t->data, t->nbytes);
}

/* The packed column of gate g of unit j. */
static int64_t packed_col(const rnn_state *st, int64_t g, int64_t j)
{
    return (j / L) * st->G * L + g * L + j % L;
}

static void pack(rnn_state *st, const float *W, const float *R, const float *Bv, const float *Pv)
{
    int64_t D = st->D, G = st->G, H = st->H, Hp = st->Hp, I = st->I, GHp = st->GHp, GH = G * H;
    memset(st->wp, 0, sizeof(float) * (size_t)(D * GHp * I));
    memset(st->rp, 0, sizeof(float) * (size_t)(D * GHp * H));
    memset(st->bx, 0, sizeof(float) * (size_t)(D * GHp));
    memset(st->bh, 0, sizeof(float) * (size_t)(D * Hp));
    memset(st->peep, 0, sizeof(float) * (size_t)(D * 3 * Hp));
    bool gru = st->kind == KN_RNN_GRU;
    for (int64_t d = 0; d < D; d++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t j = 0; j < H; j++) {
                int64_t pc = packed_col(st, g, j), row = d * GH + g * H + j;
                float *wp = st->wp + d * GHp * I + (pc / L) * I * L + pc % L;
                for (int64_t k = 0; k < I; k++) wp[k * L] = W[row * I + k];
                float *rp = st->rp + d * GHp * H + (j / L) * H * G * L + g * L + j % L;
                for (int64_t k = 0; k < H; k++) rp[k * G * L] = R[row * H + k];
                if (!Bv) continue;
                const float *bd = Bv + d * 2 * GH;
                st->bx[d * GHp + pc] = bd[g * H + j] + (gru && g == 2 ? 0.0f : bd[GH + g * H + j]);
                if (gru && g == 2) st->bh[d * Hp + j] = bd[GH + g * H + j];
            }
    for (int64_t d = 0; Pv && d < D; d++)
        for (int64_t q = 0; q < 3; q++)
            for (int64_t j = 0; j < H; j++) st->peep[(d * 3 + q) * Hp + j] = Pv[(d * 3 + q) * H + j];
}

/* The node's state for these shapes, packed from these weights. */
static int prepare(kn_op_session *os, const kn_rnn_kern *k, const kn_rnn_params *p, int64_t I, const kn_tensor *W,
                   const kn_tensor *R, const kn_tensor *B, const kn_tensor *P, rnn_state **out)
{
    rnn_state *st = os->state;
    int64_t G = p->kind == KN_RNN_SIMPLE ? 1 : p->kind == KN_RNN_GRU ? 3 : 4, H = p->hidden;
    bool same = st && st->kind == p->kind && st->lbr == p->linear_before_reset && st->D == p->num_dir &&
                st->H == H && st->I == I && st->k == k;
    if (!same) {
        state_free(st);
        os->state = st = calloc(1, sizeof *st);
        os->free_state = state_free;
        if (!st) return kn_error(KN_ERR_NOMEM, "recurrent layer: out of memory");
        st->k = k, st->kind = p->kind, st->lbr = p->linear_before_reset, st->D = p->num_dir, st->G = G, st->H = H;
        st->I = I, st->Hp = (H + L - 1) / L * L, st->nblk = st->Hp / L, st->GHp = G * st->Hp;
        size_t D = (size_t)st->D;
        st->wp = alloc_f(D * (size_t)(st->GHp * I));
        st->rp = alloc_f(D * (size_t)(st->GHp * H));
        st->bx = alloc_f(D * (size_t)st->GHp);
        st->bh = alloc_f(D * (size_t)st->Hp);
        st->peep = alloc_f(D * 3 * (size_t)st->Hp);
        if (!st->wp || !st->rp || !st->bx || !st->bh || !st->peep) {
            state_free(st);
            os->state = NULL;
            return kn_error(KN_ERR_NOMEM, "recurrent layer: out of memory for its packed weights");
        }
    }
    const void *src[4] = {W->data, R->data, B ? B->data : NULL, P ? P->data : NULL};
    if (!st->packed || memcmp(src, st->src, sizeof src)) {
        pack(st, W->data, R->data, B ? B->data : NULL, P ? P->data : NULL);
        memcpy(st->src, src, sizeof src);
        st->packed = is_const(os, W) && is_const(os, R) && is_const(os, B) && is_const(os, P);
    }
    *out = st;
    return KN_OK;
}

/* ---- one direction --------------------------------------------------------------------- */

typedef struct dir_run {
    const rnn_state *st;
    const kn_rnn_params *p;
    int d;
    bool rev;
    int threads;
    int64_t T, Bn, maxlen;
    const int64_t *lens;
    const float *xw; /* this direction's columns at row 0 */
    int64_t ldx;
    float *h[2], *c, *z, *rh; /* step s reads h[s & 1], writes h[(s + 1) & 1] */
    float *Y;
    /* the team running the steps (team_member): work items claimed, done;
     * solo: a member waited so long for another that it runs the rest alone */
    int64_t next, done;
    int parts, solo;
    int64_t t_call; /* when the parallel loop running it was called */
    int *contended; /* set when a thread of that loop started late or waited too long */
} dir_run;

/* Where a block's work reads and writes in step s. */
typedef struct blk {
    int64_t b, t, u;
    const float *x, *hp; /* the projection's row, h_prev's row */
    float *hn;           /* h_next's row */
    const float *pre;    /* the gates' pre-activations, recurrent product added (step_rows), or NULL */
} blk;

static void clip16(const kn_rnn_params *p, float *x, int n)
{
    if (!(p->clip > 0)) return;
    float c = (float)p->clip;
    for (int i = 0; i < n; i++) x[i] = x[i] < -c ? -c : x[i] > c ? c : x[i];
}

static void act(const dir_run *r, int which, float *x, int n)
{
    const kn_rnn_params *p = r->p;
    r->st->k->act(p->act[r->d][which], (float)p->alpha[r->d][which], (float)p->beta[r->d][which], x, n);
}

/* 1 - f(x) for the 16 pre-activations x, f being the gates' activation:
 * sigmoid(-x) when f is the sigmoid, as 1 - sigmoid(x) in float32 keeps
 * nothing of a gate near 1 (GRU's (1 - z) h~ and LSTM's input_forget gave
 * -2.4e-7 for -1.1e-7 in ONNX's test_gru_seq_length); else filled by the
 * caller from f(x). */
static void one_minus_f(const dir_run *r, const float *x, float *out)
{
    if (r->p->act[r->d][0] != KN_ACT_SIGMOID) return;
    for (int l = 0; l < L; l++) out[l] = -x[l];
    act(r, 0, out, L);
}

/* The block's units of h_next, and of Y at its time. */
static void put_h(const dir_run *r, const blk *k, const float *hnew)
{
    memcpy(k->hn + k->u * L, hnew, sizeof(float) * L);
    if (!r->Y) return;
    int64_t H = r->st->H, n = H - k->u * L < L ? H - k->u * L : L, D = r->st->D, b = k->b, t = k->t;
    int64_t yo = r->p->layout ? ((b * r->T + t) * D + r->d) * H : ((t * D + r->d) * r->Bn + b) * H;
    memcpy(r->Y + yo + k->u * L, hnew, sizeof(float) * (size_t)n);
}

/* The pre-activations of block u before the recurrent product: the
 * projection's gates, and for a GRU its h gate's recurrent bias (np: LSTM
 * 4, GRU 3 gates; a GRU's third is its recurrent part alone). */
static void gates_init(const dir_run *r, const float *x, int64_t u, int np, float *acc)
{
    if (np == 4) {
        memcpy(acc, x + u * 4 * L, sizeof(float) * 4 * L);
        return;
    }
    memcpy(acc, x + u * 3 * L, sizeof(float) * 2 * L);
    memcpy(acc + 2 * L, r->st->bh + r->d * r->st->Hp + u * L, sizeof(float) * L);
}

static void lstm_block(const dir_run *r, const blk *k)
{
    const rnn_state *st = r->st;
    const kn_rnn_params *p = r->p;
    int64_t Hp = st->Hp, H = st->H, u = k->u;
    float acc[4 * L], hnew[L], gi_pre[L];
    if (k->pre) {
        memcpy(acc, k->pre, sizeof acc);
    } else {
        gates_init(r, k->x, u, 4, acc);
        st->k->gemv(k->hp, H, st->rp + r->d * st->GHp * H + u * H * 4 * L, 4 * L, 4, acc);
    }
    float *gi = acc, *go = acc + L, *gf = acc + 2 * L, *gc = acc + 3 * L, *c = r->c + k->b * Hp + u * L;
    const float *pe = st->peep + r->d * 3 * Hp + u * L;
    bool peep = st->src[3] != NULL;
    const kn_rnn_act *a = p->act[r->d];
    if (st->k->lstm16 && a[0] == KN_ACT_SIGMOID && a[1] == KN_ACT_TANH && a[2] == KN_ACT_TANH) {
        /* k->pre: step_rows runs several rows' cells back to back */
        void (*cell)(const float *, float *, const float *, int64_t, float, bool, float *) =
            k->pre && st->k->lstm16_rows ? st->k->lstm16_rows : st->k->lstm16;
        cell(acc, c, peep ? pe : NULL, Hp, p->clip > 0 ? (float)p->clip : 0.0f, p->input_forget, hnew);
        put_h(r, k, hnew);
        return;
    }
    clip16(p, gc, L);
    act(r, 1, gc, L);
    if (peep) {
        for (int l = 0; l < L; l++) gi[l] += pe[l] * c[l], gf[l] += pe[2 * Hp + l] * c[l];
        clip16(p, gi, L);
        clip16(p, gf, L);
        memcpy(gi_pre, gi, sizeof gi_pre);
        act(r, 0, gi, L);
        act(r, 0, gf, L);
    } else {
        clip16(p, acc, 3 * L);
        memcpy(gi_pre, gi, sizeof gi_pre);
        act(r, 0, acc, 3 * L); /* i, o and f at once (o needs no peephole here) */
    }
    if (p->input_forget) {
        one_minus_f(r, gi_pre, gf);
        if (a[0] != KN_ACT_SIGMOID)
            for (int l = 0; l < L; l++) gf[l] = 1.0f - gi[l];
    }
    for (int l = 0; l < L; l++) c[l] = gf[l] * c[l] + gi[l] * gc[l];
    if (peep) {
        for (int l = 0; l < L; l++) go[l] += pe[Hp + l] * c[l];
        clip16(p, go, L);
        act(r, 0, go, L);
    }
    memcpy(hnew, c, sizeof hnew);
    act(r, 2, hnew, L);
    for (int l = 0; l < L; l++) hnew[l] *= go[l];
    put_h(r, k, hnew);
}

static void rnn_block(const dir_run *r, const blk *k)
{
    const rnn_state *st = r->st;
    float acc[L];
    memcpy(acc, k->x + k->u * L, sizeof acc);
    st->k->gemv(k->hp, st->H, st->rp + r->d * st->GHp * st->H + k->u * st->H * L, L, 1, acc);
    clip16(r->p, acc, L);
    act(r, 0, acc, L);
    put_h(r, k, acc);
}

/* GRU: with linear_before_reset all three gates in one pass; without, phase
 * 0 computes z and r ⊙ h_prev for the block's units and phase 1 (once every
 * block has done phase 0) the h gate from r ⊙ h_prev. */
static void gru_block(const dir_run *r, const blk *k, int phase)
{
    const rnn_state *st = r->st;
    const kn_rnn_params *p = r->p;
    int64_t Hp = st->Hp, H = st->H, u = k->u, b = k->b;
    const float *hp = k->hp, *rp = st->rp + r->d * st->GHp * H + u * H * 3 * L;
    const float *xh = k->x + u * 3 * L + 2 * L, *bh = st->bh + r->d * Hp + u * L;
    /* 1 - z kept apart (in c, which GRU has no use for) */
    float acc[3 * L], hnew[L], *z = r->z + b * Hp + u * L, *zc = r->c + b * Hp + u * L;
    if (st->lbr || phase == 0) {
        if (k->pre) { /* linear_before_reset: all three gates (step_rows) */
            memcpy(acc, k->pre, sizeof acc);
        } else {
            gates_init(r, k->x, u, 3, acc);
            st->k->gemv(hp, H, rp, 3 * L, st->lbr ? 3 : 2, acc);
        }
        if (st->lbr && st->k->gru16 && p->act[r->d][0] == KN_ACT_SIGMOID && p->act[r->d][1] == KN_ACT_TANH) {
            void (*cell)(const float *, const float *, const float *, float, float *) =
                k->pre && st->k->gru16_rows ? st->k->gru16_rows : st->k->gru16; /* as lstm_block's */
            cell(acc, xh, hp + u * L, p->clip > 0 ? (float)p->clip : 0.0f, hnew);
            put_h(r, k, hnew);
            return;
        }
        clip16(p, acc, 2 * L);
        one_minus_f(r, acc, zc);
        act(r, 0, acc, 2 * L);
        memcpy(z, acc, sizeof(float) * L);
        if (p->act[r->d][0] != KN_ACT_SIGMOID)
            for (int l = 0; l < L; l++) zc[l] = 1.0f - z[l];
        if (!st->lbr) {
            for (int l = 0; l < L; l++) r->rh[b * Hp + u * L + l] = acc[L + l] * hp[u * L + l];
            return;
        }
        for (int l = 0; l < L; l++) hnew[l] = xh[l] + acc[L + l] * acc[2 * L + l];
    } else {
        memcpy(acc, bh, sizeof(float) * L);
        st->k->gemv(r->rh + b * Hp, H, rp + 2 * L, 3 * L, 1, acc);
        for (int l = 0; l < L; l++) hnew[l] = xh[l] + acc[l];
    }
    clip16(p, hnew, L);
    act(r, 1, hnew, L);
    for (int l = 0; l < L; l++) hnew[l] = zc[l] * hnew[l] + z[l] * hp[u * L + l];
    put_h(r, k, hnew);
}

/* Row b's work in step s (k.t, k.x), false when s is past its length. */
static bool row_of(const dir_run *r, int64_t s, int64_t b, blk *k)
{
    const rnn_state *st = r->st;
    int64_t len = r->lens ? r->lens[b] : r->T;
    *k = (blk){.b = b, .hp = r->h[s & 1] + b * st->Hp, .hn = r->h[(s + 1) & 1] + b * st->Hp};
    if (s >= len) return false;
    k->t = r->rev ? len - 1 - s : s;
    k->x = r->xw + (r->p->layout ? b * r->T + k->t : k->t * r->Bn + b) * r->ldx;
    return true;
}

/* True if step_rows runs the steps: several batch rows, an LSTM or a GRU
 * with linear_before_reset (all gates in one product), a kernel for it. */
static bool by_rows(const dir_run *r)
{
    const rnn_state *st = r->st;
    return r->Bn > 1 && st->k->gemv_rows && (st->kind == KN_RNN_LSTM || (st->kind == KN_RNN_GRU && st->lbr));
}

/* step_blocks for several rows at a time: per block, the recurrent
 * product of up to KN_RNN_ROWS rows in one pass over its R (gemv_rows, each
 * row's result the same bits as gemv's), then each row's cell. */
static void step_rows(const dir_run *r, int64_t s, int64_t u0, int64_t u1)
{
    const rnn_state *st = r->st;
    int np = st->kind == KN_RNN_LSTM ? 4 : 3;
    int64_t H = st->H;
    blk ks[KN_RNN_ROWS];
    float acc[KN_RNN_ROWS][4 * L];
    const float *hp[KN_RNN_ROWS];
    float *ap[KN_RNN_ROWS];
    int n = 0;
    for (int64_t b = 0; b <= r->Bn; b++) {
        if (b < r->Bn) {
            if (!row_of(r, s, b, &ks[n])) { /* past its length: the state carries over */
                memcpy(ks[n].hn + u0 * L, ks[n].hp + u0 * L, sizeof(float) * (size_t)((u1 - u0) * L));
                continue;
            }
            if (++n < KN_RNN_ROWS) continue;
        }
        for (int64_t u = u0; n && u < u1; u++) {
            for (int i = 0; i < n; i++) {
                gates_init(r, ks[i].x, u, np, acc[i]);
                hp[i] = ks[i].hp, ap[i] = acc[i];
            }
            st->k->gemv_rows(n, hp, H, st->rp + r->d * st->GHp * H + u * H * np * L, np * L, np, ap);
            for (int i = 0; i < n; i++) {
                ks[i].u = u, ks[i].pre = acc[i];
                if (np == 4) lstm_block(r, &ks[i]);
                else gru_block(r, &ks[i], 0);
            }
        }
        n = 0;
    }
}

/* Blocks per group of one_row: their pre-activations on the stack (2 KiB). */
enum { ROW_GROUP = 8 };

/* step_blocks' blocks [u0, u1) of one row k (an LSTM, or a GRU with
 * linear_before_reset): the recurrent products of a group of blocks first,
 * then the group's cells. A cell is a chain of dependent operations (exp,
 * reciprocal, tanh) that the next block's product, which streams R from
 * L2, cannot hide; cells back to back overlap one another (and take
 * lstm16_rows' 16 lanes, as a batch's rows do: the same bits). Back (odd
 * steps): the blocks last to first, so that a step starts with the part of
 * R the step before read last, still in L1. */
static void one_row(const dir_run *r, blk *k, int64_t u0, int64_t u1, bool back)
{
    const rnn_state *st = r->st;
    int np = st->kind == KN_RNN_LSTM ? 4 : 3;
    int64_t H = st->H, nb = u1 - u0;
    float acc[ROW_GROUP][4 * L];
    for (int64_t g = 0; g < nb; g += ROW_GROUP) {
        int64_t n = nb - g < ROW_GROUP ? nb - g : ROW_GROUP;
        for (int64_t i = 0; i < n; i++) {
            int64_t u = back ? u1 - 1 - (g + i) : u0 + g + i;
            gates_init(r, k->x, u, np, acc[i]);
            st->k->gemv(k->hp, H, st->rp + r->d * st->GHp * H + u * H * np * L, np * L, np, acc[i]);
        }
        for (int64_t i = 0; i < n; i++) {
            k->u = back ? u1 - 1 - (g + i) : u0 + g + i, k->pre = acc[i];
            if (np == 4) lstm_block(r, k);
            else gru_block(r, k, 0);
        }
        k->pre = NULL;
    }
}

/* Blocks [u0, u1) of step s (GRU without linear_before_reset: of its
 * phase) for every batch row; a row past its length carries its state. */
static void step_blocks(const dir_run *r, int64_t s, int phase, int64_t u0, int64_t u1)
{
    const rnn_state *st = r->st;
    if (by_rows(r)) {
        step_rows(r, s, u0, u1);
        return;
    }
    bool grouped = st->kind == KN_RNN_LSTM || (st->kind == KN_RNN_GRU && st->lbr);
    for (int64_t b = 0; b < r->Bn; b++) {
        blk k;
        if (!row_of(r, s, b, &k)) {
            if (phase == 0) memcpy(k.hn + u0 * L, k.hp + u0 * L, sizeof(float) * (size_t)((u1 - u0) * L));
            continue;
        }
        if (grouped) {
            one_row(r, &k, u0, u1, s & 1);
            continue;
        }
        for (k.u = u0; k.u < u1; k.u++) {
            if (st->kind == KN_RNN_LSTM) lstm_block(r, &k);
            else if (st->kind == KN_RNN_GRU) gru_block(r, &k, phase);
            else rnn_block(r, &k);
        }
    }
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int phases_of(const rnn_state *st) { return st->kind == KN_RNN_GRU && !st->lbr ? 2 : 1; }

/* A member that waits this long for another one's part of a step takes
 * over the layer's remaining work: the other one has lost its CPU (steps
 * take microseconds). Without it, a machine whose other core was busy made
 * every step wait for a scheduler time slice: 40 ms runs instead of 0.5.
 * 1 ms, under the scheduler's slices: at 100 us a quiet virtual machine's
 * brief stalls of a vCPU passed for contention, and the audio model on the
 * AMX Xeon's 2 vCPUs ran most layers alone (batch 8, 2 threads: 3.02 ms
 * median, 2.54 at 1 ms; with one busy process beside it 3.63 and 3.46;
 * batch 1: 0.62 and 0.52 quiet, 0.735 and 0.72 beside it). */
#define RNN_TEAM_MAX_WAIT_NS 1000000

/* Notes a thread of a parallel loop that started long after the call: the
 * machine has more work than CPUs, and the loop's end waits for its
 * latecomers (kn_rt_parallel_for_threads is an OpenMP region). */
static void note_start(int64_t t_call, int *contended)
{
    if (contended && t_call && kn_rt_now_ns() - t_call > RNN_TEAM_MAX_WAIT_NS)
        __atomic_store_n(contended, 1, __ATOMIC_RELAXED);
}

/* Runs that a layer whose threads could not all get a CPU runs on the
 * calling thread alone before it tries its threads again: on a machine
 * with more runnable threads than CPUs each parallel region waits for a
 * scheduler time slice at its end (a 2-thread H=128 LSTM model took 68 ms
 * instead of 0.9 ms on one thread, 2 vCPUs at a load of 9). Results are
 * the same bitwise whichever way a run goes. */
#define RNN_SOLO_RUNS 32

/* One thread of a team running a direction's steps: each stage (a step,
 * or a GRU step's phase) is cut in r->parts items, claimed in order by
 * whichever thread is free; an item waits until every item of the stages
 * before it is done. Items are claimed in order and a claimed item is
 * being run, so this never waits forever, whatever number of threads
 * OpenMP gives (one thread runs every item in order). One parallel region
 * per layer instead of one per step. */
static int team_member(void *args, int64_t lo, int64_t hi)
{
    (void)lo, (void)hi;
    dir_run *r = args;
    note_start(r->t_call, r->contended);
    int64_t nblk = r->st->nblk, phases = phases_of(r->st), n = r->maxlen * phases * r->parts;
    bool leader = false; /* the member that took over, when one did */
    for (int64_t i; (leader || !__atomic_load_n(&r->solo, __ATOMIC_RELAXED)) &&
                    (i = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED)) < n;) {
        int64_t stage = i / r->parts, q = i % r->parts, t0 = 0;
        for (int spins = 0; __atomic_load_n(&r->done, __ATOMIC_ACQUIRE) < stage * r->parts; spins++) {
            cpu_relax();
            if (spins % 64 || leader) continue;
            int64_t t = kn_rt_now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > RNN_TEAM_MAX_WAIT_NS && !__atomic_exchange_n(&r->solo, 1, __ATOMIC_RELAXED)) {
                leader = true;
                __atomic_store_n(r->contended, 1, __ATOMIC_RELAXED);
            }
        }
        step_blocks(r, stage / phases, (int)(stage % phases), q * nblk / r->parts, (q + 1) * nblk / r->parts);
        __atomic_fetch_add(&r->done, 1, __ATOMIC_RELEASE);
    }
    return KN_OK;
}

static int run_direction(dir_run *r)
{
    const rnn_state *st = r->st;
    int64_t macs = r->Bn * st->G * st->H * st->H;
    int phases = phases_of(st);
    if (r->threads > 1 && st->nblk > 1 && macs >= RNN_PAR_MIN_MACS) {
        r->parts = r->threads < st->nblk ? r->threads : (int)st->nblk;
        r->next = r->done = 0;
        r->solo = 0;
        r->t_call = kn_rt_now_ns();
        return kn_rt_parallel_for_threads(r->parts, team_member, r, r->parts);
    }
    for (int64_t s = 0; s < r->maxlen; s++)
        for (int ph = 0; ph < phases; ph++) step_blocks(r, s, ph, 0, st->nblk);
    return KN_OK;
}

static int dir_chunk(void *args, int64_t lo, int64_t hi)
{
    dir_run *runs = args;
    note_start(runs[lo].t_call, runs[lo].contended);
    for (int64_t d = lo; d < hi; d++) {
        int st = run_direction(&runs[d]);
        if (st) return st;
    }
    return KN_OK;
}

/* ---- the projection ------------------------------------------------------------------------ */

typedef struct proj_run {
    const rnn_state *st;
    const float *X;
    int64_t M;
} proj_run;

static int proj_chunk(void *args, int64_t lo, int64_t hi)
{
    const proj_run *pr = args;
    const rnn_state *st = pr->st;
    st->k->gemm(pr->X, st->I, pr->M, st->I, st->wp + lo * st->I * L, hi - lo, st->bx + lo * L, st->xw + lo * L,
                st->D * st->GHp);
    return KN_OK;
}

/* ---- the entry point ------------------------------------------------------------------------- */

static bool f32_or_absent(const kn_tensor *t) { return !t || t->dtype == KN_F32; }

static const kn_rnn_kern *pick_kernels(void)
{
    if (kn_config_rnn_path() == KN_KERNEL_PATH_PORTABLE) return &kn_rnn_kern_portable;
    uint64_t f = kn_cpu_features(), need = KN_CPU_AVX2 | KN_CPU_FMA;
    if ((f & need) != need || !kn_rnn_kern_avx2.gemm) return &kn_rnn_kern_portable;
    if (!(f & KN_CPU_AVX512F)) return &kn_rnn_kern_avx2;
    return kn_config_tuning()->rnn_prefetch ? &kn_rnn_kern_avx512 : &kn_rnn_kern_avx512_nopf;
}

static const char *impl_name(kn_rnn_kind kind, const kn_rnn_kern *k)
{
    static const char *const names[3][3] = {
        {"kiln rnn:portable", "kiln rnn:avx2", "kiln rnn:avx512"},
        {"kiln gru:portable", "kiln gru:avx2", "kiln gru:avx512"},
        {"kiln lstm:portable", "kiln lstm:avx2", "kiln lstm:avx512"},
    };
    int i = k == &kn_rnn_kern_avx2 ? 1 : k == &kn_rnn_kern_avx512 || k == &kn_rnn_kern_avx512_nopf ? 2 : 0;
    return names[kind == KN_RNN_SIMPLE ? 0 : kind == KN_RNN_GRU ? 1 : 2][i];
}

/* Shapes as kn_k_rnn wants them; false sends the node to kn_k_rnn, which
 * says what is wrong. */
static bool shapes_ok(const kn_rnn_params *p, const kn_tensor *X, const kn_tensor *W, const kn_tensor *R,
                      const kn_tensor *B, const kn_tensor *P, const kn_tensor *h0, const kn_tensor *c0, int64_t G)
{
    int64_t D = p->num_dir, H = p->hidden, T = X->dims[p->layout ? 1 : 0], Bn = X->dims[p->layout ? 0 : 1];
    int64_t I = X->dims[2], s0 = p->layout ? Bn : D, s1 = p->layout ? D : Bn;
    if (X->rank != 3 || H <= 0 || T <= 0 || Bn <= 0 || I <= 0) return false;
    if (W->rank != 3 || W->dims[0] != D || W->dims[1] != G * H || W->dims[2] != I) return false;
    if (R->rank != 3 || R->dims[0] != D || R->dims[1] != G * H || R->dims[2] != H) return false;
    if (B && (B->rank != 2 || B->dims[0] != D || B->dims[1] != 2 * G * H)) return false;
    if (P && (P->rank != 2 || P->dims[0] != D || P->dims[1] != 3 * H)) return false;
    for (const kn_tensor *s = h0; s; s = s == h0 ? c0 : NULL)
        if (s->rank != 3 || s->dims[0] != s0 || s->dims[1] != s1 || s->dims[2] != H) return false;
    return true;
}

int kn_rnn_fast(kn_op_session *os, const kn_rnn_params *p, const kn_tensor *X, const kn_tensor *W,
                const kn_tensor *R, const kn_tensor *B, const kn_tensor *seq_lens, const kn_tensor *init_h,
                const kn_tensor *init_c, const kn_tensor *P, kn_tensor *Y, kn_tensor *Y_h, kn_tensor *Y_c)
{
    if (!os || kn_config_rnn_path() == KN_KERNEL_PATH_REF) return KN_ERR_UNSUPPORTED;
    int64_t G = p->kind == KN_RNN_SIMPLE ? 1 : p->kind == KN_RNN_GRU ? 3 : 4;
    if (!f32_or_absent(X) || !f32_or_absent(W) || !f32_or_absent(R) || !f32_or_absent(B) || !f32_or_absent(P) ||
        !f32_or_absent(init_h) || !f32_or_absent(init_c) || !f32_or_absent(Y) || !f32_or_absent(Y_h) ||
        !f32_or_absent(Y_c) || X->rank != 3 || !shapes_ok(p, X, W, R, B, P, init_h, init_c, G))
        return KN_ERR_UNSUPPORTED;
    int64_t D = p->num_dir, H = p->hidden, T = X->dims[p->layout ? 1 : 0], Bn = X->dims[p->layout ? 0 : 1];
    int64_t *lens = NULL, maxlen = T;
    if (seq_lens) {
        if (kn_tensor_numel(seq_lens) != Bn) return KN_ERR_UNSUPPORTED;
        if (!(lens = malloc(sizeof *lens * (size_t)Bn))) return kn_error(KN_ERR_NOMEM, "out of memory");
        maxlen = 0;
        for (int64_t b = 0; b < Bn; b++) {
            lens[b] = kn_load_i64(seq_lens->dtype, seq_lens->data, (size_t)b);
            if (lens[b] < 0 || lens[b] > T) {
                free(lens);
                return KN_ERR_UNSUPPORTED;
            }
            maxlen = lens[b] > maxlen ? lens[b] : maxlen;
        }
    }
    /* cpuid is slow under a hypervisor: the kernels are picked once */
    const kn_rnn_kern *k = os->state ? ((const rnn_state *)os->state)->k : pick_kernels();
    rnn_state *st = NULL;
    int rc = prepare(os, k, p, X->dims[2], W, R, B, P, &st);
    int64_t Hp = st ? st->Hp : 0, ldx = D * (st ? st->GHp : 0), M = T * Bn, threads = os->threads;
    int contended = 0;
    if (st && threads > 1 && st->solo_runs > 0) {
        st->solo_runs--;
        threads = 1;
    }
    if (!rc) rc = reserve(&st->xw, &st->xw_cap, (size_t)(M * ldx));
    if (!rc) rc = reserve(&st->scr, &st->scr_cap, (size_t)(D * 5 * Bn * Hp));
    if (!rc) {
        /* rows of X in its memory order: (t, b) for layout 0, (b, t) for 1 */
        proj_run pr = {st, X->data, M};
        rc = kn_rt_parallel_for_threads((int)threads, proj_chunk, &pr, ldx / L);
    }
    dir_run runs[2];
    for (int d = 0; d < D && !rc; d++) {
        float *s = st->scr + (size_t)(d * 5 * Bn * Hp);
        memset(s, 0, sizeof(float) * (size_t)(5 * Bn * Hp));
        dir_run *r = &runs[d];
        *r = (dir_run){.st = st, .p = p, .d = d, .rev = D == 2 ? d == 1 : p->reverse, .threads = (int)threads,
                       .T = T, .Bn = Bn, .maxlen = maxlen, .lens = lens, .xw = st->xw + d * st->GHp, .ldx = ldx,
                       .h = {s, s + Bn * Hp}, .c = s + 2 * Bn * Hp, .z = s + 3 * Bn * Hp, .rh = s + 4 * Bn * Hp,
                       .Y = Y ? Y->data : NULL, .contended = &contended};
        for (int64_t b = 0; b < Bn; b++) {
            int64_t so = p->layout ? (b * D + d) * H : (d * Bn + b) * H;
            if (init_h) memcpy(r->h[0] + b * Hp, (const float *)init_h->data + so, sizeof(float) * (size_t)H);
            if (init_c && p->kind == KN_RNN_LSTM)
                memcpy(r->c + b * Hp, (const float *)init_c->data + so, sizeof(float) * (size_t)H);
        }
    }
    if (!rc && D == 2 && threads >= 2) {
        runs[0].threads = runs[1].threads = 1; /* one direction per thread */
        runs[0].t_call = runs[1].t_call = kn_rt_now_ns();
        rc = kn_rt_parallel_for_threads(2, dir_chunk, runs, 2);
    } else if (!rc) {
        rc = dir_chunk(runs, 0, D);
    }
    for (int d = 0; d < D && !rc; d++)
        for (int64_t b = 0; b < Bn; b++) {
            int64_t so = p->layout ? (b * D + d) * H : (d * Bn + b) * H;
            if (Y_h) memcpy((float *)Y_h->data + so, runs[d].h[maxlen & 1] + b * Hp, sizeof(float) * (size_t)H);
            if (Y_c) memcpy((float *)Y_c->data + so, runs[d].c + b * Hp, sizeof(float) * (size_t)H);
        }
    free(lens);
    if (contended) {
        st->solo_runs = RNN_SOLO_RUNS;
        kn_rt_note_contention(); /* for the session's governor too */
    }
    if (!rc) os->impl = impl_name(p->kind, k);
    return rc;
}
