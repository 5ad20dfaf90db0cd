/*
 * runtime/src/attention.c — ONNX Attention in compiled artifacts, flash
 * style (attention.h): per task, a block of query rows of one head against
 * blocks of keys, with an online softmax, so that no S x T matrix exists.
 */
#include "attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "config.h"
#include "rt_internal.h"

/* Per-thread scratch for tasks of head sizes up to D and Dv. */
typedef struct attn_state {
    const kn_attn_kern *k;
    int64_t D, Dv;
    int threads;
    int32_t compute; /* the node's, which picked k */
    size_t per_thread; /* floats, a multiple of 16 */
    float *scratch;
} attn_state;

static void state_free(void *p)
{
    attn_state *st = p;
    if (st) kn_big_free(st->scratch);
    free(st);
}

/* The best table for the CPU; a bf16 node's only where the CPU has the
 * bf16 dot product (an artifact with one is refused on others, so this is
 * for KILN_CPU_MASK and direct calls), else f32. */
static const kn_attn_kern *pick_kernels(int32_t compute)
{
    if (kn_config_attention_path() == KN_KERNEL_PATH_PORTABLE) return &kn_attn_kern_portable;
    uint64_t f = kn_cpu_features(), avx2 = KN_CPU_AVX2 | KN_CPU_FMA, bf16 = KN_CPU_AVX512F | KN_CPU_AVX512BF16 | avx2;
    if (compute == KN_BF16 && (f & bf16) == bf16 && kn_attn_kern_avx512_bf16.scores) return &kn_attn_kern_avx512_bf16;
    if ((f & (KN_CPU_AVX512F | avx2)) == (KN_CPU_AVX512F | avx2) && kn_attn_kern_avx512.scores)
        return &kn_attn_kern_avx512;
    return (f & avx2) == avx2 && kn_attn_kern_avx2.scores ? &kn_attn_kern_avx2 : &kn_attn_kern_portable;
}

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* The node's scratch for this geometry and thread count. */
static int prepare(kn_op_session *os, const kn_attn_dims *dm, int threads, int32_t compute, attn_state **out)
{
    attn_state *st = os->state;
    if (st && st->D >= dm->D && st->Dv >= dm->Dv && st->threads >= threads && st->compute == compute)
        return *out = st, KN_OK;
    state_free(st);
    os->state = st = calloc(1, sizeof *st);
    os->free_state = state_free;
    if (!st) return kn_error(KN_ERR_NOMEM, "Attention: out of memory");
    st->k = pick_kernels(compute);
    st->D = dm->D, st->Dv = dm->Dv, st->threads = threads, st->compute = compute;
    size_t D = (size_t)dm->D, Dv = (size_t)dm->Dv, QB = KN_ATTN_QBLOCK, KB = KN_ATTN_KBLOCK;
    st->per_thread = round16(QB * D) + round16(D * KB) + round16(KN_ATTN_ROWS * KB) + round16(QB * Dv) + round16(2 * QB);
    st->scratch = kn_big_alloc(st->per_thread * (size_t)threads * sizeof(float));
    if (!st->scratch) {
        state_free(st);
        os->state = NULL;
        return kn_error(KN_ERR_NOMEM, "Attention: out of memory for %d threads' scratch", threads);
    }
    *out = st;
    return KN_OK;
}

/* One (batch, head) of a B x H x S x D tensor or its 3-D B x S x (H*D)
 * form: where row 0 starts and the distance between rows. */
typedef struct head_view {
    int64_t base, row;
} head_view;

static head_view view_of(bool three_d, int64_t H, int64_t S, int64_t D, int64_t b, int64_t h)
{
    return three_d ? (head_view){(b * S * H + h) * D, H * D} : (head_view){(b * H + h) * S * D, D};
}

typedef struct attn_run {
    const kn_attn_dims *dm;
    const kn_attn_params *pr;
    const attn_state *st;
    const float *q, *k, *v;
    const kn_tensor *mask, *nonpad;
    int64_t ms[3], mlast; /* the mask's strides over (B, Hq, Sq), its last axis's length */
    int64_t qb, nqb;      /* query rows per task (a multiple of 4), tasks per head */
    float *y;
} attn_run;

/* What the kernel's softmax step cannot add by itself to row i's scores
 * s[0..n) of keys k0 + j: the softcap, a bool mask, a mask shorter than
 * the keys, causality. Returns the float mask to add (NULL: none or
 * already applied). */
static const float *mask_row(const attn_run *r, int64_t b, int64_t h, int64_t i, int64_t k0, float *s, int64_t n)
{
    const kn_attn_params *pr = r->pr;
    const kn_tensor *m = r->mask;
    int64_t mo = m ? b * r->ms[0] + h * r->ms[1] + i * r->ms[2] + k0 : 0, live = m ? r->mlast - k0 : n;
    live = live < 0 ? 0 : live > n ? n : live;
    bool cut = pr->causal && k0 + n - 1 > i + r->dm->P;
    if (pr->softcap <= 0 && !cut && (!m || (m->dtype == KN_F32 && live == n)))
        return m ? (const float *)m->data + mo : NULL;
    if (pr->softcap > 0) {
        float cap = (float)pr->softcap;
        for (int64_t j = 0; j < n; j++) s[j] = cap * tanhf(s[j] / cap);
    }
    if (m) {
        if (m->dtype == KN_BOOL) {
            const uint8_t *mb = (const uint8_t *)m->data + mo;
            for (int64_t j = 0; j < live; j++) s[j] = mb[j] ? s[j] : -INFINITY;
        } else {
            const float *mf = (const float *)m->data + mo;
            for (int64_t j = 0; j < live; j++) s[j] += mf[j];
        }
        for (int64_t j = live; j < n; j++) s[j] = -INFINITY;
    }
    if (cut)
        for (int64_t j = i + r->dm->P + 1 - k0 < 0 ? 0 : i + r->dm->P + 1 - k0; j < n; j++) s[j] = -INFINITY;
    return NULL;
}

/* Row i's online-softmax step over a block: the block's scores in s become
 * its weights, and the row's output so far is rescaled to the new maximum.
 * m, l: the row's running maximum and sum of weights. */
static void softmax_step(const kn_attn_kern *k, float *s, const float *add, int64_t n, float *m, float *l, float *o,
                         int64_t dv)
{
    float before = *m, sum = k->softmax_step(s, add, n, m);
    if (isnan(*m)) { /* a NaN score poisons the row, as in the reference kernel */
        memset(s, 0, (size_t)n * sizeof *s);
        *l = NAN;
        return;
    }
    if (*m == -INFINITY) return; /* every key so far masked: s is 0, nothing to add */
    if (before == -INFINITY) { /* the row's first weights: o holds 0 (or NaN from 0 x inf), nothing to rescale */
        *l = sum;
        return;
    }
    float alpha = expf(before - *m);
    if (alpha != 1.0f) k->scale(o, o, dv, alpha);
    *l = *l * alpha + sum;
}

/* Task t: query rows [i0, i0 + nr) of head h of batch b. */
static void run_task(const attn_run *r, int64_t t, float *scratch)
{
    const kn_attn_dims *dm = r->dm;
    const kn_attn_kern *k = r->st->k;
    const int64_t D = dm->D, Dv = dm->Dv, Hq = dm->Hq, QB = KN_ATTN_QBLOCK, KB = KN_ATTN_KBLOCK, R = KN_ATTN_ROWS;
    int64_t b = t / (Hq * r->nqb), h = t / r->nqb % Hq, i0 = t % r->nqb * r->qb;
    int64_t nr = dm->Sq - i0 < r->qb ? dm->Sq - i0 : r->qb, hk = h / (Hq / dm->Hkv);
    float *qs = scratch, *kt = qs + round16((size_t)(QB * D)), *s = kt + round16((size_t)(D * KB));
    float *o = s + round16((size_t)(R * KB)), *m = o + round16((size_t)(QB * Dv)), *l = m + QB;

    head_view qv = view_of(dm->three_d, Hq, dm->Sq, D, b, h);
    head_view kv = view_of(dm->three_d, dm->Hkv, dm->Skv, D, b, hk);
    head_view vv = view_of(dm->three_d, dm->Hkv, dm->Skv, Dv, b, hk);
    const float scale = (float)r->pr->scale;
    int64_t nr4 = (nr + R - 1) / R * R;
    for (int64_t i = 0; i < nr; i++) k->scale(qs + i * D, r->q + qv.base + (i0 + i) * qv.row, D, scale);
    memset(qs + nr * D, 0, (size_t)((nr4 - nr) * D) * sizeof *qs); /* the last tile's missing rows */
    if (k->pack_q) k->pack_q(qs, nr4, D); /* bf16: Q rounded after the scale, as q * scale in bf16 would be */
    memset(o, 0, (size_t)(nr4 * Dv) * sizeof *o);
    for (int64_t i = 0; i < nr; i++) m[i] = -INFINITY, l[i] = 0;

    int64_t T = dm->P + dm->Skv, end = T;
    if (r->nonpad) {
        int64_t valid = kn_load_i64(r->nonpad->dtype, r->nonpad->data, (size_t)b);
        end = valid < 0 ? 0 : valid < T ? valid : T;
    }
    if (r->pr->causal && i0 + nr + dm->P < end) end = i0 + nr + dm->P; /* no row of the task sees past this */

    for (int64_t k0 = 0; k0 < end; k0 += KB) {
        int64_t n = end - k0 < KB ? end - k0 : KB, n8 = (n + 7) / 8 * 8;
        k->pack_kt(r->k + kv.base + k0 * kv.row, kv.row, n, D, kt, KB);
        for (int64_t r0 = 0; r0 < nr; r0 += R) {
            k->scores(qs + r0 * D, D, kt, KB, n8, s);
            for (int64_t rr = 0; rr < R; rr++) {
                float *row = s + rr * KB;
                int64_t i = r0 + rr;
                if (i >= nr) {
                    memset(row, 0, (size_t)n * sizeof *row);
                    continue;
                }
                const float *add = mask_row(r, b, h, i0 + i, k0, row, n);
                softmax_step(k, row, add, n, &m[i], &l[i], o + i * Dv, Dv);
            }
            k->pv(s, KB, n, r->v + vv.base + k0 * vv.row, vv.row, Dv, o + r0 * Dv, Dv);
        }
    }
    head_view yv = view_of(dm->three_d, Hq, dm->Sq, Dv, b, h);
    for (int64_t i = 0; i < nr; i++) {
        float *y = r->y + yv.base + (i0 + i) * yv.row;
        float inv = l[i] > 0 ? 1.0f / l[i] : NAN; /* no key at all: NaN, as the reference kernel */
        k->scale(y, o + i * Dv, Dv, inv);
    }
}

static int task_chunk(void *args, int64_t lo, int64_t hi)
{
    const attn_run *r = args;
    float *scratch = r->st->scratch + (size_t)kn_rt_parallel_worker() * r->st->per_thread;
    for (int64_t t = lo; t < hi; t++) run_task(r, t, scratch);
    return KN_OK;
}

int kn_attention_fast(kn_op_session *os, const kn_attn_dims *dm, const kn_attn_params *pr, const kn_tensor *q,
                      const kn_tensor *k, const kn_tensor *v, const kn_tensor *mask, const kn_tensor *past_k,
                      const kn_tensor *nonpad, kn_tensor *y, bool more_outputs, int32_t compute)
{
    if (kn_config_attention_path() == KN_KERNEL_PATH_REF || past_k || more_outputs || pr->qk_mode != 0 ||
        q->dtype != KN_F32 || k->dtype != KN_F32 || v->dtype != KN_F32 || y->dtype != KN_F32 ||
        (mask && mask->dtype != KN_F32 && mask->dtype != KN_BOOL) || dm->Hkv <= 0 || dm->Hq % dm->Hkv)
        return KN_ERR_UNSUPPORTED;
    int threads = os->threads > 0 ? os->threads : 1;
    attn_state *st = NULL;
    int rc = prepare(os, dm, threads, compute == KN_BF16 ? KN_BF16 : 0, &st);
    if (rc) return rc;
    attn_run r = {.dm = dm, .pr = pr, .st = st, .q = q->data, .k = k->data, .v = v->data, .mask = mask,
                  .nonpad = nonpad, .y = y->data};
    /* Tasks of up to KN_ATTN_QBLOCK rows (each packs K once), but at least
     * three per thread when the heads alone are fewer. The grouping does
     * not change any row's arithmetic. */
    int64_t heads = dm->B * dm->Hq, want = heads > 0 ? (3 * threads + heads - 1) / heads : 1;
    r.qb = ((dm->Sq + want - 1) / want + KN_ATTN_ROWS - 1) / KN_ATTN_ROWS * KN_ATTN_ROWS;
    r.qb = r.qb < KN_ATTN_ROWS ? KN_ATTN_ROWS : r.qb > KN_ATTN_QBLOCK ? KN_ATTN_QBLOCK : r.qb;
    r.nqb = (dm->Sq + r.qb - 1) / r.qb;
    if (mask) { /* as the reference kernel: strides of the broadcast leading axes */
        int mr = mask->rank;
        r.mlast = mr ? mask->dims[mr - 1] : 1;
        int64_t stride = r.mlast;
        for (int a = 2; a >= 0; a--) {
            int ma = mr - 1 - (3 - a);
            if (ma < 0) continue;
            r.ms[a] = mask->dims[ma] == 1 ? 0 : stride;
            stride *= mask->dims[ma];
        }
    }
    int64_t tasks = dm->B * dm->Hq * r.nqb;
    os->impl = st->k->impl;
    if (tasks == 0) return KN_OK;
    return kn_rt_parallel_for_threads(threads, task_chunk, &r, tasks);
}
