/*
 * runtime/src/dnnl/reorder.c — reorders between the caller's layouts and a
 * primitive's, the session's activation buffers, and the memories of a
 * primitive once oneDNN has picked its layouts (kn_dnnl_finish_prim):
 * constant weights are reordered once, here.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "bigmem.h"
#include "dnnl_int.h"

dnnl_primitive_attr_t kn_dnnl_scratch_attr(void)
{
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return NULL;
    }
    return attr;
}

/* Creates a reorder from → to (user scratchpad) in r. */
int kn_dnnl_make_reorder(kn_dnnl_session *s, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, prim_run *r,
                         const char *what)
{
    dnnl_primitive_attr_t attr = kn_dnnl_scratch_attr();
    if (!attr) return kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
    dnnl_primitive_desc_t rpd;
    dnnl_status_t st = dnnl_reorder_primitive_desc_create(&rpd, from, s->engine, to, s->engine, attr);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return kn_dnnl_fail(st, what);
    return kn_dnnl_run_make(s, rpd, r, what);
}

/* Grows the session's activation buffer i to n bytes (creation time only). */
int kn_dnnl_reserve(kn_dnnl_session *s, int i, size_t n)
{
    if (n <= s->act_cap[i]) return KN_OK;
    void *p = kn_big_alloc(n);
    if (!p) return kn_error(KN_ERR_NOMEM, "out of memory for a %zu-byte oneDNN activation buffer", n);
    kn_big_free(s->act[i]);
    s->act[i] = p;
    s->act_cap[i] = n;
    return KN_OK;
}

/* Sets up the weights memory: the primitive's layout `want` vs the user's
 * `user`. Constant weights are reordered now into wei_buf; others get a
 * reorder primitive run at each exec (or are bound directly when the layouts
 * agree). */
static int setup_weights(kn_dnnl_session *s, kn_dnnl_prim *p, const dnnl_memory_desc_t *user,
                         const dnnl_memory_desc_t *want, const void *wconst)
{
    p->wei_const = wconst != NULL;
    p->wei_reorder = !dnnl_memory_desc_equal(user, want);
    if (!p->wei_reorder) {
        /* bound at exec (or now, for constants) */
        KN_DN(dnnl_memory_create(&p->m_wei, want, s->engine, (void *)wconst), "creating the weights memory");
        return KN_OK;
    }
    const kn_dnnl_prim *t = p->twin;
    if (wconst && t && t->wei_const && t->wei_buf && t->m_wei) {
        const dnnl_memory_desc_t *tmd = NULL;
        if (dnnl_memory_get_memory_desc(t->m_wei, &tmd) == dnnl_success && dnnl_memory_desc_equal(tmd, want)) {
            /* the twin's reordered weights: the same bytes */
            KN_DN(dnnl_memory_create(&p->m_wei, want, s->engine, t->wei_buf), "creating the weights memory");
            return KN_OK;
        }
    }
    size_t n = dnnl_memory_desc_get_size(want);
    p->wei_buf = kn_big_alloc(n);
    if (!p->wei_buf) return kn_error(KN_ERR_NOMEM, "out of memory for %zu bytes of reordered weights", n);
    KN_DN(dnnl_memory_create(&p->m_wei, want, s->engine, p->wei_buf), "creating the weights memory");
    KN_DN(dnnl_memory_create(&p->m_wei_user, user, s->engine, (void *)wconst), "creating the user weights memory");
    int rc = kn_dnnl_make_reorder(s, user, want, &p->reorder, "creating the weights reorder");
    if (rc || !wconst) return rc;
    /* constant: reorder once, then the reorder is not needed any more */
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, p->m_wei_user}, {DNNL_ARG_TO, p->m_wei}};
    if ((rc = kn_dnnl_run_exec(s, &p->reorder, args, 2, "reordering the weights"))) return rc;
    KN_DN(dnnl_stream_wait(s->stream), "reordering the weights");
    kn_dnnl_run_free(&p->reorder);
    dnnl_memory_destroy(p->m_wei_user);
    p->m_wei_user = NULL;
    return KN_OK;
}

/* Creates pd from op_desc + attr, then the primitive and every memory. */
int kn_dnnl_finish_prim(kn_dnnl_session *s, kn_dnnl_prim *p, const void *op_desc, dnnl_primitive_attr_t attr,
                        const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *wei_user,
                        const dnnl_memory_desc_t *bias_md, const dnnl_memory_desc_t *dst_md,
                        const dnnl_memory_desc_t *post_md, const void *wconst, const char *what)
{
    dnnl_primitive_desc_t pd = NULL;
    int rc0 = kn_dnnl_pd_create(s, op_desc, attr, &pd, what);
    if (rc0) return rc0;
    dnnl_memory_desc_t want = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_desc_t src_pd = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    dnnl_memory_desc_t dst_pd = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(p->impl, sizeof p->impl, "%s", impl);
    int rc = kn_dnnl_run_make(s, pd, &p->main, what);
    if (rc) return rc;
    p->src_reorder = !dnnl_memory_desc_equal(src_md, &src_pd);
    p->dst_reorder = !dnnl_memory_desc_equal(dst_md, &dst_pd);
    KN_DN(dnnl_memory_create(&p->m_src, &src_pd, s->engine, DNNL_MEMORY_NONE), "creating the src memory");
    KN_DN(dnnl_memory_create(&p->m_dst, &dst_pd, s->engine, DNNL_MEMORY_NONE), "creating the dst memory");
    if (p->src_reorder) {
        KN_DN(dnnl_memory_create(&p->m_src_user, src_md, s->engine, DNNL_MEMORY_NONE), "creating the src memory");
        if ((rc = kn_dnnl_make_reorder(s, src_md, &src_pd, &p->src_ro, "creating the src reorder")) ||
            (rc = kn_dnnl_reserve(s, 0, dnnl_memory_desc_get_size(&src_pd))))
            return rc;
    }
    if (p->dst_reorder) {
        KN_DN(dnnl_memory_create(&p->m_dst_user, dst_md, s->engine, DNNL_MEMORY_NONE), "creating the dst memory");
        if ((rc = kn_dnnl_make_reorder(s, &dst_pd, dst_md, &p->dst_ro, "creating the dst reorder")) ||
            (rc = kn_dnnl_reserve(s, 1, dnnl_memory_desc_get_size(&dst_pd))))
            return rc;
    }
    /* the sum post-op accumulates into dst: the residual is copied there
     * first, reordered when its layout is not the primitive's dst layout */
    const dnnl_memory_desc_t *pm = post_md ? post_md : dst_md;
    if (p->has_sum && !dnnl_memory_desc_equal(pm, &dst_pd)) {
        KN_DN(dnnl_memory_create(&p->m_post_user, pm, s->engine, DNNL_MEMORY_NONE), "creating the sum memory");
        if ((rc = kn_dnnl_make_reorder(s, pm, &dst_pd, &p->sum_ro, "creating the residual reorder"))) return rc;
        /* in place, the residual is moved aside before the reorder (exec) */
        p->post_bytes = dnnl_memory_desc_get_size(pm);
        if (!p->dst_reorder && (rc = kn_dnnl_reserve(s, 1, p->post_bytes))) return rc;
    }
    if (bias_md)
        KN_DN(dnnl_memory_create(&p->m_bias, bias_md, s->engine, DNNL_MEMORY_NONE), "creating the bias memory");
    p->dst_bytes = dnnl_memory_desc_get_size(dst_md);
    if (p->main_sum.prim) { /* it shares the weights: only with the same layout of them */
        const_dnnl_primitive_desc_t spd = NULL;
        if (dnnl_primitive_get_primitive_desc(p->main_sum.prim, &spd) != dnnl_success ||
            !dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(spd, dnnl_query_weights_md, 0), &want))
            kn_dnnl_run_free(&p->main_sum);
    }
    return setup_weights(s, p, wei_user, &want, wconst);
}
