/*
 * runtime/src/dnnl/pool.c — max and average pooling by oneDNN.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "dnnl_int.h"

/* Max or average pooling between activations in the record's layouts (the
 * session's layout between convolutions: no reorder around it). oneDNN's
 * optimized kernels want dst in src's layout (else its reference kernel
 * runs, 10x slower): where the record's differ, the primitive writes that
 * layout into the session's dst buffer and a reorder follows. */
int kn_dnnl_create_pool(kn_dnnl_session *s, const kn_abi_dnnl *rec, kn_dnnl_prim *p, dnnl_primitive_attr_t attr)
{
    int sp = rec->spatial, nd = sp + 2, st;
    if (sp < 1 || sp > 3) return kn_error(KN_ERR_UNSUPPORTED, "oneDNN pooling: %d spatial dims (1..3 supported)", sp);
    if ((st = kn_dnnl_check_tensor(&rec->src, "pooling src", nd, nd)) ||
        (st = kn_dnnl_check_tensor(&rec->dst, "pooling dst", nd, nd)))
        return st;
    if (rec->src.dtype != rec->dst.dtype || (rec->src.dtype != KN_F32 && rec->alg != KN_POOLING_MAX))
        return kn_error(KN_ERR_INVALID, "oneDNN pooling: src %s, dst %s (8-bit: max pooling only, in and out alike)",
                        kn_dtype_name(rec->src.dtype), kn_dtype_name(rec->dst.dtype));
    if (rec->src.dims[0] != rec->dst.dims[0] || rec->src.dims[1] != rec->dst.dims[1])
        return kn_error(KN_ERR_INVALID, "oneDNN pooling: src [%lld, %lld, ..] and dst [%lld, %lld, ..] disagree",
                        (long long)rec->src.dims[0], (long long)rec->src.dims[1], (long long)rec->dst.dims[0],
                        (long long)rec->dst.dims[1]);
    dnnl_dims_t sd, dd, strides, kernel, dil, pl, pr;
    for (int i = 0; i < nd; i++) sd[i] = rec->src.dims[i], dd[i] = rec->dst.dims[i];
    for (int i = 0; i < sp; i++) {
        if (rec->strides[i] < 1 || rec->kernel[i] < 1 || rec->dilations[i] < 1 || rec->pads_begin[i] < 0 ||
            rec->pads_end[i] < 0)
            return kn_error(KN_ERR_INVALID,
                            "oneDNN pooling: spatial dim %d: kernel %lld, stride %lld, dilation %lld, pads %lld/%lld",
                            i, (long long)rec->kernel[i], (long long)rec->strides[i], (long long)rec->dilations[i],
                            (long long)rec->pads_begin[i], (long long)rec->pads_end[i]);
        strides[i] = rec->strides[i], kernel[i] = rec->kernel[i], dil[i] = rec->dilations[i] - 1;
        pl[i] = rec->pads_begin[i], pr[i] = rec->pads_end[i];
    }
    static const dnnl_alg_kind_t algs[] = {[KN_POOLING_MAX] = dnnl_pooling_max,
                                           [KN_POOLING_AVG_INCLUDE_PAD] = dnnl_pooling_avg_include_padding,
                                           [KN_POOLING_AVG_EXCLUDE_PAD] = dnnl_pooling_avg_exclude_padding};
    if (rec->alg < KN_POOLING_MAX || rec->alg > KN_POOLING_AVG_EXCLUDE_PAD)
        return kn_error(KN_ERR_INVALID, "oneDNN pooling: algorithm %d", rec->alg);
    dnnl_memory_desc_t src_md, dst_md, dst_user;
    if ((st = kn_dnnl_act_md(s, rec->src_layout, rec->src.dtype, &src_md, nd, sd, "the pooling src")) ||
        (st = kn_dnnl_act_md(s, rec->src_layout, rec->dst.dtype, &dst_md, nd, dd, "the pooling dst")) ||
        (st = kn_dnnl_act_md(s, rec->dst_layout, rec->dst.dtype, &dst_user, nd, dd, "the pooling dst")))
        return st;
    dnnl_pooling_v2_desc_t pdesc;
    KN_DN(dnnl_pooling_v2_forward_desc_init(&pdesc, dnnl_forward_inference, algs[rec->alg], &src_md, &dst_md,
                                            strides, kernel, dil, pl, pr),
          "describing the pooling");
    dnnl_primitive_desc_t pd;
    KN_DN(dnnl_primitive_desc_create(&pd, &pdesc, attr, s->engine, NULL), "creating the pooling");
    return kn_dnnl_finish_in_src_layout(s, p, pd, &src_md, &dst_md, &dst_user, "creating the pooling");
}

int kn_dnnl_finish_in_src_layout(kn_dnnl_session *s, kn_dnnl_prim *p, dnnl_primitive_desc_t pd,
                                 const dnnl_memory_desc_t *src_md, const dnnl_memory_desc_t *dst_md,
                                 const dnnl_memory_desc_t *dst_user, const char *what)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(p->impl, sizeof p->impl, "%s", impl);
    int st = kn_dnnl_run_make(s, pd, &p->main, what);
    if (st) return st;
    KN_DN(dnnl_memory_create(&p->m_src, src_md, s->engine, DNNL_MEMORY_NONE), "creating the src memory");
    KN_DN(dnnl_memory_create(&p->m_dst, dst_md, s->engine, DNNL_MEMORY_NONE), "creating the dst memory");
    p->dst_bytes = dnnl_memory_desc_get_size(dst_user);
    p->dst_reorder = !dnnl_memory_desc_equal(dst_md, dst_user);
    if (!p->dst_reorder) return KN_OK;
    KN_DN(dnnl_memory_create(&p->m_dst_user, dst_user, s->engine, DNNL_MEMORY_NONE), "creating the dst memory");
    if ((st = kn_dnnl_make_reorder(s, dst_md, dst_user, &p->dst_ro, "creating the dst reorder"))) return st;
    return kn_dnnl_reserve(s, 1, dnnl_memory_desc_get_size(dst_md));
}
