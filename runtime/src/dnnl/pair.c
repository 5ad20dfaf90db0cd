/*
 * runtime/src/dnnl/pair.c — a 1x1 convolution and the depthwise
 * convolution that alone reads its output (session.c finds them), run as
 * one kernel (kernels/x86/f32_expand_dw_avx512.c): the 1x1 conv's exec
 * only hands its pointers on to the depthwise conv's, which runs both.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "dnnl_int.h"

/* Whether to pair an expansion that can be: KILN_CONV_ALGO=xdw pairs every
 * one, auto those whose output reaches the tuning table's size (measured
 * with MobileNetV2), any other forced algorithm none. */
static bool pair_wanted(const kn_abi_dnnl *head)
{
    kn_conv_algo a = kn_config_conv_algo();
    if (a == KN_ALGO_XDW) return true;
    return a == KN_ALGO_AUTO && head->dst.nbytes >= kn_config_tuning()->xdw_min_bytes;
}

/* The tail of a pair runs: both convolutions by the fused kernel, or one
 * after the other where this run's buffers do not allow it (the memory plan
 * put dst over the 1x1 conv's input, which the fused kernel reads while it
 * writes dst). The tail has no residual (kn_dnnl_prim_fuse). */
static int pair_exec(kn_dnnl_session *s, xdw_pair *q, void *src, const void *wei, const void *bias, void *dst,
                     int threads)
{
    if (!q->pending && q->ahead > 0) { /* this row's 1x1 conv has run (kn_dnnl_prim_exec) */
        q->ahead--;
        return kn_dnnl_exec_one(s, q->tail, src, wei, bias, dst, NULL, threads);
    }
    if (!q->pending)
        return kn_error(KN_ERR_INTERNAL, "fused 1x1 + depthwise convolution: the 1x1 convolution did not run first");
    q->pending = false;
    size_t in = (size_t)q->head->rec.src.nbytes, out = (size_t)q->tail->rec.dst.nbytes;
    if (src == q->dst && !kn_dnnl_overlap(dst, out, q->src, in)) {
        int rc = kn_xdw_reserve(q->k, threads);
        return rc ? rc : kn_xdw_exec(q->k, q->src, q->bias, bias, dst, NULL, threads);
    }
    int rc = kn_dnnl_exec_one(s, q->head, q->src, q->wei, q->bias, q->dst, NULL, threads);
    return rc ? rc : kn_dnnl_exec_one(s, q->tail, src, wei, bias, dst, NULL, threads);
}

int kn_dnnl_prim_exec(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                      const void *post_src, int threads)
{
    if (!s || !p || !src || !dst) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_exec: NULL argument");
    if (threads < 1) threads = 1;
    xdw_pair *q = p->pair;
    if (q && q->head == p) {
        /* A node over a dynamic dim runs in rows (codegen/cpu/dyn.c): the
         * generated loop calls the head once per row, every row, before the
         * tail's loop does the same, with records made for one row and the
         * pointers advanced by a row's bytes. A head called again while one
         * is pending, on the next row, is such a run: the pending row's 1x1
         * conv runs now, alone, and its tail later alone too (pair_exec
         * counts them in `ahead`). The last row's head stays pending, and
         * since the first tail called (row 0's) does not read what it
         * writes, pair_exec runs those two one after the other: the fused
         * kernel runs only for a single row (batch 1, a static shape). A
         * pending head that is not the previous row is one a failed run
         * left behind: forgotten, as before. */
        size_t in = (size_t)p->rec.src.nbytes, mid = (size_t)p->rec.dst.nbytes;
        if (q->pending && src == (char *)q->src + in && dst == (char *)q->dst + mid) {
            int rc = kn_dnnl_exec_one(s, p, q->src, q->wei, q->bias, q->dst, NULL, threads);
            if (rc) return rc;
            q->ahead++;
        } else {
            q->ahead = 0;
        }
        q->pending = true;
        q->src = src, q->dst = dst, q->wei = wei, q->bias = bias;
        return KN_OK;
    }
    if (q) return pair_exec(s, q, src, wei, bias, dst, threads);
    return kn_dnnl_exec_one(s, p, src, wei, bias, dst, post_src, threads);
}


/* Not when the depthwise convolution adds a residual: the artifact's meta
 * does not say which value that is, and it may be the 1x1 convolution's
 * output (a block whose input is also its shortcut), which the fused
 * kernel never writes. kn_xdw itself takes the sum. */
int kn_dnnl_prim_fuse(kn_dnnl_session *s, kn_dnnl_prim *head, kn_dnnl_prim *tail)
{
    if (!s || !head || !tail || head == tail) return kn_error(KN_ERR_INVALID, "kn_dnnl_prim_fuse: bad argument");
    const kn_abi_dnnl *hr = &head->rec, *tr = &tail->rec;
    if (head->pair || tail->pair || !kn_dnnl_own_algo_allowed(hr) || !kn_dnnl_own_algo_allowed(tr) ||
        kn_dnnl_native_block(s) != 0 || kn_dnnl_has_sum(hr) || kn_dnnl_has_sum(tr) || !kn_xdw_supported(hr, tr) ||
        !pair_wanted(hr))
        return KN_ERR_UNSUPPORTED;
    xdw_pair *q = calloc(1, sizeof *q);
    if (!q) return kn_error(KN_ERR_NOMEM, "out of memory");
    int st = kn_xdw_create(hr, tr, head->weights, &q->k);
    if (!st) st = kn_xdw_reserve(q->k, tail->nthr);
    if (st) {
        kn_xdw_free(q->k);
        free(q);
        return st;
    }
    q->head = head, q->tail = tail;
    head->pair = tail->pair = q;
    return KN_OK;
}
