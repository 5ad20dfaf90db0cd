/*
 * runtime/src/dnnl/postops.c — a record's post-ops as oneDNN attributes:
 * the residual sum as a sum post-op (the residual copied into dst first)
 * or, where oneDNN runs the same kernel either way, as a binary add that
 * reads the residual where it is; and the checks on the implementation
 * oneDNN picks for a descriptor.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "dnnl_int.h"
#include "fused_int.h"
/* Fills attr's post-ops from the record, after a binary multiply by
 * `scale_md` and a binary add of `bias_md` when given (a bias that the
 * output scale must not scale). With res_md, the record's residual sum
 * becomes a binary add of a tensor described by res_md (its index among the
 * post-ops in *res_idx); otherwise a sum. qdq_shift is added by the last
 * QDQ post-op's scaling (conv.c's zp_fold: zero points moved there). */
static int set_post_ops_shift(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *scale_md,
                              const dnnl_memory_desc_t *bias_md, const dnnl_memory_desc_t *res_md, bool *has_sum,
                              int *res_idx, float qdq_shift)
{
    int last_qdq = -1;
    for (int i = 0; i < rec->n_post && i < 4; i++)
        if (rec->post[i].kind == KN_POST_QDQ_U8 || rec->post[i].kind == KN_POST_QDQ_S8) last_qdq = i;
    *has_sum = false;
    if (res_idx) *res_idx = -1;
    if (rec->n_post < 0 || rec->n_post > 4)
        return kn_error(KN_ERR_INVALID, "oneDNN record: %d post-ops (at most 4)", rec->n_post);
    if (rec->n_post == 0 && !bias_md && !scale_md) return KN_OK;
    dnnl_post_ops_t po;
    KN_DN(dnnl_post_ops_create(&po), "creating post-ops");
    dnnl_status_t st = dnnl_success;
    if (scale_md) st = dnnl_post_ops_append_binary(po, dnnl_binary_mul, scale_md);
    if (bias_md && st == dnnl_success) st = dnnl_post_ops_append_binary(po, dnnl_binary_add, bias_md);
    int bad = 0;
    for (int i = 0; i < rec->n_post && st == dnnl_success && !bad; i++) {
        const kn_abi_post *p = &rec->post[i];
        switch (p->kind) {
        case KN_POST_NONE: break;
        case KN_POST_RELU: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, 0.f, 0.f); break;
        case KN_POST_LEAKY_RELU: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_relu, p->alpha, 0.f); break;
        case KN_POST_CLIP:
            if (!(p->alpha <= p->beta)) bad = 3; /* oneDNN refuses it; the compiler never writes it */
            else st = dnnl_post_ops_append_eltwise(po, 1.f, kn_fused_clip_variant(rec->post, i) == 0 ?
                                                   dnnl_eltwise_clip_v2 : dnnl_eltwise_clip_v2_use_dst_for_bwd,
                                                   p->alpha, p->beta);
            break;
        case KN_POST_SIGMOID: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_logistic, 0.f, 0.f); break;
        case KN_POST_GELU_ERF: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_gelu_erf, 0.f, 0.f); break;
        case KN_POST_GELU_TANH: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_gelu_tanh, 0.f, 0.f); break;
        case KN_POST_TANH: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_tanh, 0.f, 0.f); break;
        case KN_POST_HARDSWISH: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_hardswish, 0.f, 0.f); break;
        case KN_POST_SWISH: st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_swish, 1.f, 0.f); break;
        case KN_POST_QDQ_U8:
        case KN_POST_QDQ_S8: {
            /* round, clamp to the 8-bit range less the zero point, scale to
             * output units: three algorithms no other post-op uses (oneDNN
             * 2.x runs two eltwise post-ops of one algorithm with the first
             * one's parameters; KN_POST_CLIP is clip_v2, this is clip) */
            float lo = p->kind == KN_POST_QDQ_U8 ? 0.f : -128.f, hi = p->kind == KN_POST_QDQ_U8 ? 255.f : 127.f;
            if (!isfinite(p->alpha) || p->beta != (float)(int32_t)p->beta) bad = 5;
            else if ((st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_round, 0.f, 0.f)) == dnnl_success &&
                     (st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_clip, lo - p->beta, hi - p->beta)) ==
                         dnnl_success)
                st = dnnl_post_ops_append_eltwise(po, 1.f, dnnl_eltwise_linear, p->alpha,
                                                  i == last_qdq ? qdq_shift : 0.f);
            break;
        }
        case KN_POST_SUM:
            if (*has_sum || (res_idx && *res_idx >= 0)) bad = 2;
            else if (res_md && res_idx) {
                *res_idx = dnnl_post_ops_len(po);
                st = dnnl_post_ops_append_binary(po, dnnl_binary_add, res_md);
            } else if (kn_dnnl_is_int8(rec)) {
                /* scale*(residual - zero point), the residual in dst's type */
                if (!isfinite(p->alpha) || p->beta != (float)(int32_t)p->beta) bad = 4;
                else st = dnnl_post_ops_append_sum_v3(po, p->alpha, (int32_t)p->beta, dnnl_data_type_undef);
                *has_sum = true;
            } else {
                st = dnnl_post_ops_append_sum(po, 1.f);
                *has_sum = true;
            }
            break;
        default: bad = 1; break;
        }
        if (bad == 1) {
            dnnl_post_ops_destroy(po);
            return kn_error(KN_ERR_INVALID, "oneDNN record: post-op %d has unknown kind %d", i, p->kind);
        }
        if (bad == 4) {
            dnnl_post_ops_destroy(po);
            return kn_error(KN_ERR_INVALID, "oneDNN record: post-op %d sums with scale %g and zero point %g", i,
                            (double)p->alpha, (double)p->beta);
        }
        if (bad == 5) {
            dnnl_post_ops_destroy(po);
            return kn_error(KN_ERR_INVALID, "oneDNN record: post-op %d re-quantizes with scale %g and zero point %g",
                            i, (double)p->alpha, (double)p->beta);
        }
        if (bad == 3) {
            dnnl_post_ops_destroy(po);
            return kn_error(KN_ERR_INVALID, "oneDNN record: post-op %d clips to [%g, %g], not a range", i,
                            (double)p->alpha, (double)p->beta);
        }
    }
    if (bad == 2) {
        dnnl_post_ops_destroy(po);
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN record: more than one sum post-op");
    }
    if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_post_ops_destroy(po);
    if (st != dnnl_success) return kn_dnnl_fail(st, "appending post-ops");
    return KN_OK;
}

static int set_post_ops_res(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *scale_md,
                            const dnnl_memory_desc_t *bias_md, const dnnl_memory_desc_t *res_md, bool *has_sum,
                            int *res_idx)
{
    return set_post_ops_shift(rec, attr, scale_md, bias_md, res_md, has_sum, res_idx, 0.f);
}

int kn_dnnl_set_post_ops_qdq_shift(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, float qdq_shift,
                                   bool *has_sum)
{
    return set_post_ops_shift(rec, attr, NULL, NULL, NULL, has_sum, NULL, qdq_shift);
}

int kn_dnnl_set_post_ops(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *bias_md,
                         bool *has_sum)
{
    return set_post_ops_res(rec, attr, NULL, bias_md, NULL, has_sum, NULL);
}

int kn_dnnl_set_post_ops_ex(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *scale_md,
                            const dnnl_memory_desc_t *bias_md, bool *has_sum)
{
    return set_post_ops_res(rec, attr, scale_md, bias_md, NULL, has_sum, NULL);
}

int kn_dnnl_set_post_ops_add(const kn_abi_dnnl *rec, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *res_md,
                             int *out_idx)
{
    bool has_sum;
    return set_post_ops_res(rec, attr, NULL, NULL, res_md, &has_sum, out_idx);
}

int kn_dnnl_set_int8_attr(const kn_abi_dnnl *rec, const unsigned char *weights, dnnl_primitive_attr_t attr,
                          int64_t chans, int out_dim)
{
    if (rec->n_scale != 1 && rec->n_scale != chans)
        return kn_error(KN_ERR_INVALID, "oneDNN record: %d output scales for %lld output channels", rec->n_scale,
                        (long long)chans);
    if (rec->src_zp < -128 || rec->src_zp > 255 || rec->dst_zp < -128 || rec->dst_zp > 255)
        return kn_error(KN_ERR_INVALID, "oneDNN record: zero points %d / %d out of the 8-bit range", rec->src_zp,
                        rec->dst_zp);
    const void *scales;
    int st = kn_dnnl_const_ptr(&rec->scale_ref, weights, (int64_t)rec->n_scale * 4, "output scales", &scales);
    if (st) return st;
    for (int32_t i = 0; i < rec->n_scale; i++)
        if (!isfinite(((const float *)scales)[i]))
            return kn_error(KN_ERR_INVALID, "oneDNN record: output scale %d is not finite", i);
    int mask = rec->n_scale == 1 ? 0 : 1 << out_dim;
    KN_DN(dnnl_primitive_attr_set_output_scales(attr, rec->n_scale, mask, scales), "setting output scales");
    int32_t sz = rec->src_zp, dz = rec->dst_zp;
    if (sz) KN_DN(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &sz), "setting the src zero point");
    if (dz) KN_DN(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_DST, 1, 0, &dz), "setting the dst zero point");
    return KN_OK;
}

/* oneDNN's implementation for op_desc with attr's post-ops into impl; false
 * if oneDNN offers none, or (with dst) if it would not write dst in `dst`. */
bool kn_dnnl_impl_of(kn_dnnl_session *s, const void *op_desc, dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *dst,
                     char *impl, size_t n)
{
    dnnl_primitive_desc_t pd;
    if (kn_dnnl_pd_create(s, op_desc, attr, &pd, "querying the implementation")) {
        kn_error_clear(); /* none: the caller decides without it */
        return false;
    }
    const char *name = NULL;
    bool ok = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) == dnnl_success && name &&
              (!dst || dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), dst));
    if (ok) snprintf(impl, n, "%s", name);
    dnnl_primitive_desc_destroy(pd);
    return ok;
}

/* The post-ops of a primitive with a residual in res_md (the caller's
 * layout of the residual and of dst): the residual sum as a binary add that
 * reads the residual where it is, when oneDNN runs op_desc so with the same
 * kernel as with a sum post-op, writing dst in res_md; otherwise the sum
 * post-op, for which the residual is first copied into dst at every run (a
 * single-threaded copy of the whole output: 4-5% of ResNet-50's time).
 * The same kernel, because with a binary add oneDNN may pick a slower one
 * (a gemm-based convolution for a plain dst, 20x slower). */
int kn_dnnl_set_residual_post_ops(kn_dnnl_session *s, kn_dnnl_prim *p, const kn_abi_dnnl *rec, const void *op_desc,
                                  dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *res_md, bool *has_sum)
{
    int idx = -1, st = kn_dnnl_set_post_ops(rec, attr, NULL, has_sum);
    char with_sum[48], with_add[48];
    if (st || !*has_sum || !res_md || !kn_dnnl_impl_of(s, op_desc, attr, res_md, with_sum, sizeof with_sum)) {
        kn_error_clear();
        return st;
    }
    /* the sum variant too, for runs in place (main_sum) */
    dnnl_primitive_attr_t sum_attr = NULL;
    if (dnnl_primitive_attr_clone(&sum_attr, attr) != dnnl_success)
        return kn_error(KN_ERR_NOMEM, "oneDNN: copying attributes failed");
    bool ok = !set_post_ops_res(rec, attr, NULL, NULL, res_md, has_sum, &idx) && idx >= 0 &&
              kn_dnnl_impl_of(s, op_desc, attr, res_md, with_add, sizeof with_add) && !strcmp(with_sum, with_add);
    dnnl_primitive_desc_t sum_pd = NULL;
    if (ok && dnnl_primitive_desc_create(&sum_pd, op_desc, sum_attr, s->engine, NULL) != dnnl_success) ok = false;
    dnnl_primitive_attr_destroy(sum_attr);
    if (ok && (st = kn_dnnl_run_make(s, sum_pd, &p->main_sum, "creating the in-place variant"))) return st;
    if (!ok) {
        kn_error_clear();
        return kn_dnnl_set_post_ops(rec, attr, NULL, has_sum);
    }
    p->res_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1;
    p->res_bytes = dnnl_memory_desc_get_size(res_md);
    KN_DN(dnnl_memory_create(&p->m_res, res_md, s->engine, DNNL_MEMORY_NONE), "creating the residual memory");
    /* when the residual overlaps dst other than exactly (in place runs
     * main_sum), the kernel would read back its own partial sums: the
     * residual is copied aside first, into the dst-reorder buffer, which this
     * primitive does not use (its dst is in res_md, the caller's layout) */
    return kn_dnnl_reserve(s, 1, p->res_bytes);
}


int kn_dnnl_set_residual_as_add(kn_dnnl_session *s, kn_dnnl_prim *p, const kn_abi_dnnl *rec,
                                 dnnl_primitive_attr_t attr, const dnnl_memory_desc_t *scale_md,
                                 const dnnl_memory_desc_t *bias_md, const dnnl_memory_desc_t *res_md)
{
    int idx = -1, st = set_post_ops_res(rec, attr, scale_md, bias_md, res_md, &p->has_sum, &idx);
    if (st || idx < 0) return st;
    p->res_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1;
    p->res_bytes = dnnl_memory_desc_get_size(res_md);
    KN_DN(dnnl_memory_create(&p->m_res, res_md, s->engine, DNNL_MEMORY_NONE), "creating the residual memory");
    return kn_dnnl_reserve(s, 1, p->res_bytes); /* where an overlapping residual is copied aside */
}

/* KN_ERR_UNSUPPORTED if oneDNN would run op_desc with a reference
 * (unoptimized) kernel. */
int kn_dnnl_reject_reference(kn_dnnl_session *s, const void *op_desc, dnnl_primitive_attr_t attr)
{
    char impl[48];
    if (!kn_dnnl_impl_of(s, op_desc, attr, NULL, impl, sizeof impl) || !strncmp(impl, "ref", 3))
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN: no optimized kernel for the 1x1 convolution");
    return KN_OK;
}
