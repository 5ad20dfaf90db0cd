/*
 * runtime/src/dnnl/exec.c — running a oneDNN primitive on the caller's
 * pointers: the reorders around it, the residual (copied into dst for a
 * sum post-op, or bound for a binary add, moved aside where it overlaps
 * dst other than exactly), constant or per-run weights and bias.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "dnnl_int.h"
/* ---- execution ------------------------------------------------------------------ */

/* A copy of n bytes between buffers that do not overlap, cut into pieces of
 * whole cache lines for the session's threads: a residual is up to a few
 * MB, which one thread copies at a fraction of the bandwidth two reach. */
typedef struct par_copy {
    char *dst;
    const char *src;
    size_t n;
} par_copy;

enum { COPY_PIECE = 64 << 10 }; /* bytes per parallel unit: 64 KiB */

static int copy_chunk(void *args, int64_t lo, int64_t hi)
{
    const par_copy *c = args;
    size_t a = (size_t)lo * COPY_PIECE, b = (size_t)hi * COPY_PIECE;
    if (b > c->n) b = c->n;
    memcpy(c->dst + a, c->src + a, b - a);
    return KN_OK;
}

int kn_dnnl_copy_parallel(void *dst, const void *src, size_t n, int threads)
{
    par_copy c = {dst, src, n};
    return kn_rt_parallel_for_threads(threads, copy_chunk, &c, (int64_t)((n + COPY_PIECE - 1) / COPY_PIECE));
}

/* After p's primitive ran: its output reordered into the caller's dst where
 * it wrote another layout (into the session's buffer), then the wait. */
static int finish_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *dst)
{
    if (p->dst_reorder) {
        KN_DN(dnnl_memory_set_data_handle(p->m_dst_user, dst), "binding the dst");
        dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, p->m_dst}, {DNNL_ARG_TO, p->m_dst_user}};
        int rc = kn_dnnl_run_exec(s, &p->dst_ro, ra, 2, "reordering the dst");
        if (rc) return rc;
    }
    KN_DN(dnnl_stream_wait(s->stream), "waiting for the stream");
    return KN_OK;
}

/* True if the na bytes at a and the nb bytes at b share a byte. */
bool kn_dnnl_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    const char *x = a, *y = b;
    return x < y + nb && y < x + na;
}

int kn_dnnl_exec_one(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                     const void *post_src, int threads)
{
    kn_dnnl_prim *r = p;
    int rc = kn_dnnl_prim_for(s, p, threads, &r);
    if (rc) return rc;
    rc = r->algo && r->algo->run ? r->algo->run(s, r, src, wei, bias, dst, post_src, threads)
                                 : kn_dnnl_exec_prim(s, r, src, wei, bias, dst, post_src, threads);
    if (threads > 1) kn_rt_team_done();
    return rc;
}

int kn_dnnl_exec_prim(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                      const void *post_src, int threads)
{
    int rc;
    kn_dnnl_set_threads(threads);
    if (p->kind == KN_DNNL_POOL) {
        KN_DN(dnnl_memory_set_data_handle(p->m_src, src), "binding the src");
        KN_DN(dnnl_memory_set_data_handle(p->m_dst, p->dst_reorder ? s->act[1] : dst), "binding the dst");
        dnnl_exec_arg_t pa[3] = {{DNNL_ARG_SRC, p->m_src}, {DNNL_ARG_DST, p->m_dst}};
        if ((rc = kn_dnnl_run_exec(s, &p->main, pa, 2, "running the pooling"))) return rc;
        return finish_run(s, p, dst);
    }
    if (p->kind == KN_DNNL_BINARY) {
        if (!p->wei_const) {
            if (!wei) return kn_error(KN_ERR_INVALID, "oneDNN binary: no operand given");
            KN_DN(dnnl_memory_set_data_handle(p->m_wei, (void *)wei), "binding the operand");
        }
        KN_DN(dnnl_memory_set_data_handle(p->m_src, src), "binding the src");
        KN_DN(dnnl_memory_set_data_handle(p->m_dst, p->dst_reorder ? s->act[1] : dst), "binding the dst");
        dnnl_exec_arg_t ba[3] = {{DNNL_ARG_SRC_0, p->m_src}, {DNNL_ARG_SRC_1, p->m_wei}, {DNNL_ARG_DST, p->m_dst}};
        if ((rc = kn_dnnl_run_exec(s, &p->main, ba, 3, "running the binary op"))) return rc;
        return finish_run(s, p, dst);
    }
    if (p->swap) {
        const void *w = p->swap_const ? p->swap_const : wei;
        if (!w) return kn_error(KN_ERR_INVALID, "oneDNN: no weights given for a 1x1 convolution");
        wei = src;
        src = (void *)w;
    }
    if (p->dynq && (rc = kn_dnnl_dynq_run(s, p, src, threads, &src))) return rc; /* src: now the u8 copy */
    void *dst_prim = p->dst_reorder ? s->act[1] : dst;
    KN_DN(dnnl_memory_set_data_handle(p->m_dst, dst_prim), "binding the dst");
    if (p->has_sum) {
        if (!post_src) return kn_error(KN_ERR_INVALID, "oneDNN: the sum post-op has no input");
        /* the sum post-op accumulates into dst: start from the residual */
        if (p->sum_ro.prim) {
            if (kn_dnnl_overlap(post_src, p->post_bytes, dst_prim, p->dst_bytes)) {
                /* in place: the reorder must not write over what it reads */
                if ((rc = kn_dnnl_copy_parallel(s->act[1], post_src, p->post_bytes, threads))) return rc;
                post_src = s->act[1];
            }
            KN_DN(dnnl_memory_set_data_handle(p->m_post_user, (void *)post_src), "binding the residual");
            dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, p->m_post_user}, {DNNL_ARG_TO, p->m_dst}};
            if ((rc = kn_dnnl_run_exec(s, &p->sum_ro, ra, 2, "reordering the residual"))) return rc;
        } else if (post_src != dst_prim) {
            /* already in the layout the primitive writes (dst_prim may be the
             * session's buffer when dst itself is reordered afterwards); the
             * memory plan never overlaps a node's output with its inputs
             * unless they are the same */
            if (kn_dnnl_overlap(post_src, p->dst_bytes, dst_prim, p->dst_bytes))
                memmove(dst_prim, post_src, p->dst_bytes);
            else if ((rc = kn_dnnl_copy_parallel(dst_prim, post_src, p->dst_bytes, threads))) return rc;
        }
    }
    if (!p->wei_const) {
        if (!wei) return kn_error(KN_ERR_INVALID, "oneDNN: no weights given for a primitive without constant ones");
        if (p->wei_reorder) {
            KN_DN(dnnl_memory_set_data_handle(p->m_wei_user, (void *)wei), "binding the weights");
            dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, p->m_wei_user}, {DNNL_ARG_TO, p->m_wei}};
            if ((rc = kn_dnnl_run_exec(s, &p->reorder, ra, 2, "reordering the weights"))) return rc;
        } else {
            KN_DN(dnnl_memory_set_data_handle(p->m_wei, (void *)wei), "binding the weights");
        }
    }
    dnnl_exec_arg_t args[8] = {{DNNL_ARG_SRC, p->m_src}, {DNNL_ARG_WEIGHTS, p->m_wei}, {DNNL_ARG_DST, p->m_dst}};
    int n = 3;
    if (p->src_reorder) {
        KN_DN(dnnl_memory_set_data_handle(p->m_src_user, src), "binding the src");
        KN_DN(dnnl_memory_set_data_handle(p->m_src, s->act[0]), "binding the src");
        dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, p->m_src_user}, {DNNL_ARG_TO, p->m_src}};
        if ((rc = kn_dnnl_run_exec(s, &p->src_ro, ra, 2, "reordering the src"))) return rc;
    } else {
        KN_DN(dnnl_memory_set_data_handle(p->m_src, src), "binding the src");
    }
    if (p->has_bias) {
        const void *b = p->bias_const ? p->bias_const : bias;
        if (!b) return kn_error(KN_ERR_INVALID, "oneDNN: no bias given");
        KN_DN(dnnl_memory_set_data_handle(p->m_bias, (void *)b), "binding the bias");
        args[n++] = (dnnl_exec_arg_t){p->bias_arg, p->m_bias};
    }
    if (p->dynq) {
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, p->dynq->m_xs};
    }
    prim_run *run = &p->main;
    if (p->m_res) {
        if (!post_src) return kn_error(KN_ERR_INVALID, "oneDNN: the residual add has no input");
        if (post_src == dst_prim && p->main_sum.prim) {
            run = &p->main_sum; /* in place: dst holds the residual, as the sum post-op wants */
        } else {
            if (kn_dnnl_overlap(post_src, p->res_bytes, dst_prim,
                                p->dst_bytes)) { /* the kernel would read its own sums */
                if ((rc = kn_dnnl_copy_parallel(s->act[1], post_src, p->res_bytes, threads))) return rc;
                post_src = s->act[1];
            }
            KN_DN(dnnl_memory_set_data_handle(p->m_res, (void *)post_src), "binding the residual");
            args[n++] = (dnnl_exec_arg_t){p->res_arg, p->m_res};
        }
    }
    if ((rc = kn_dnnl_run_exec(s, run, args, n,
                               p->kind == KN_DNNL_CONV     ? "running the convolution"
                               : p->kind == KN_DNNL_DECONV ? "running the deconvolution"
                                                           : "running the matmul")))
        return rc;
    return finish_run(s, p, dst);
}

