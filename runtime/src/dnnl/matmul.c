/*
 * runtime/src/dnnl/matmul.c — matrix products: oneDNN's matmul, a 2-D
 * product by constant weights as oneDNN's 1x1 convolution where oneDNN
 * would run its jit sgemm, or kiln's own AVX-512 kernel (the 1x1 kernel of
 * kernels/x86/f32_conv1x1_avx512.c) where config.c says so.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "dnnl_int.h"

/* BERT-base's projections (2.4 MB and up) are 4-9% faster by kiln's
 * kernel than by oneDNN's brgemm at batch 1 and 0-6% at batch 8 on Zen 5;
 * ViT-Tiny's (0.6 MB) stay on oneDNN on more than one thread, and on one
 * where the tuning row says so (the avx512 row takes them: config.c). */
bool kn_pw_matmul_worth(const kn_abi_dnnl *rec, int threads)
{
    const kn_tuning *t = kn_config_tuning();
    return rec->wei.nbytes >= (threads <= 1 ? t->pw_matmul_min_filter_bytes_1t : t->pw_matmul_min_filter_bytes);
}

bool kn_pw_matmul_wanted(const kn_abi_dnnl *rec, int threads)
{
    if (!kn_pw_matmul_supported(rec)) return false;
    kn_conv_algo a = kn_config_conv_algo();
    if (a == KN_ALGO_POINTWISE) return true;
    return (a == KN_ALGO_AUTO || a == KN_ALGO_XDW) && kn_pw_matmul_worth(rec, threads);
}

static int64_t numel(const kn_abi_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->dims[i];
    return n;
}

/* Logical [.., rows, cols] of a stored row-major tensor, padded to nd dims,
 * with the last two swapped when trans. */
static void mm_operand(const kn_abi_tensor *t, int nd, bool trans, dnnl_dims_t dims, dnnl_dims_t strides)
{
    dnnl_dims_t sd = {0}, ss; /* zeroed: GCC cannot see that only sd[0..nd) is read */
    int lead = nd - t->rank;
    for (int i = 0; i < nd; i++) sd[i] = i < lead ? 1 : t->dims[i - lead];
    kn_dnnl_plain_strides(nd, sd, ss);
    for (int i = 0; i < nd; i++) dims[i] = sd[i], strides[i] = ss[i];
    if (trans) {
        dims[nd - 2] = sd[nd - 1], dims[nd - 1] = sd[nd - 2];
        strides[nd - 2] = ss[nd - 1], strides[nd - 1] = ss[nd - 2];
    }
}

/* Weights shared by every batch (x [.., M, K] times a [K, N] matrix, the
 * transformer projection) make one [B*M, K] x [K, N] product: oneDNN then
 * picks a blocked weight layout and its fastest kernel, which it does not for
 * a broadcast batch. Returns the new rank. */
static int collapse_batch(int nd, bool trans_a, dnnl_dims_t sd, dnnl_dims_t ss, dnnl_dims_t wd, dnnl_dims_t ws,
                          dnnl_dims_t dd)
{
    if (nd <= 2 || trans_a) return nd;
    int64_t rows = 1;
    for (int i = 0; i < nd - 2; i++) {
        if (wd[i] != 1 || sd[i] != dd[i]) return nd;
        rows *= sd[i];
    }
    int64_t M = sd[nd - 2], K = sd[nd - 1], N = dd[nd - 1];
    sd[0] = rows * M, sd[1] = K, ss[0] = K, ss[1] = 1;
    dd[0] = rows * M, dd[1] = N;
    wd[0] = wd[nd - 2], wd[1] = wd[nd - 1], ws[0] = ws[nd - 2], ws[1] = ws[nd - 1];
    return 2;
}

/* A 2-D product by constant weights, x[M, K] x W[K, N] (+ bias[N]), as the
 * 1x1 convolution of a 1 x K x M x 1 image stored channels-last (which is
 * x's row-major bytes) into 1 x N x M x 1 (y's). Without AVX-512, oneDNN's
 * f32 matmul is its jit sgemm, which packs the weights at every call; its
 * 1x1 convolution reorders them once into a blocked layout and runs
 * 1.1-1.6x faster on transformer projections (AVX2, one thread).
 * KN_ERR_UNSUPPORTED (p untouched) when oneDNN offers no optimized kernel. */
static int create_matmul_as_conv(kn_dnnl_session *s, const kn_abi_dnnl *rec, kn_dnnl_prim *p, const dnnl_dims_t sd,
                                 const dnnl_dims_t ss, const dnnl_dims_t ws, int64_t N, const void *wconst,
                                 const void *bconst)
{
    int64_t M = sd[0], K = sd[1];
    dnnl_dims_t xd = {1, K, M, 1}, xs = {M * ss[0], ss[1], ss[0], ss[0]};
    dnnl_dims_t wd = {N, K, 1, 1}, wst = {ws[1], ws[0], 1, 1};
    dnnl_dims_t yd = {1, N, M, 1}, ys = {M * N, 1, N, N}, bd = {N}, one = {1, 1}, zero = {0, 0};
    dnnl_memory_desc_t x_md, w_user, w_any, y_md, b_md;
    bool hb = kn_dnnl_has_bias(rec);
    KN_DN(dnnl_memory_desc_init_by_strides(&x_md, 4, xd, dnnl_f32, xs), "describing the matmul src");
    KN_DN(dnnl_memory_desc_init_by_strides(&w_user, 4, wd, dnnl_f32, wst), "describing the matmul weights");
    KN_DN(dnnl_memory_desc_init_by_tag(&w_any, 4, wd, dnnl_f32, dnnl_format_tag_any), "describing the matmul weights");
    KN_DN(dnnl_memory_desc_init_by_strides(&y_md, 4, yd, dnnl_f32, ys), "describing the matmul dst");
    KN_DN(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a), "describing the matmul bias");
    dnnl_primitive_attr_t attr = kn_dnnl_scratch_attr();
    if (!attr) return kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
    bool has_sum = false;
    dnnl_convolution_desc_t cd;
    int st = KN_OK;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &x_md, &w_any,
                                           hb ? &b_md : NULL, &y_md, one, zero, zero) != dnnl_success)
        st = KN_ERR_UNSUPPORTED;
    if (!st) st = kn_dnnl_set_residual_post_ops(s, p, rec, &cd, attr, &y_md, &has_sum);
    if (!st) st = kn_dnnl_reject_reference(s, &cd, attr);
    if (!st) {
        p->has_sum = has_sum;
        p->has_bias = hb;
        p->bias_const = bconst;
        p->bias_arg = DNNL_ARG_BIAS;
        st = kn_dnnl_finish_prim(s, p, &cd, attr, &x_md, &w_user, hb ? &b_md : NULL, &y_md, NULL, wconst,
                                 "creating the matmul (as a 1x1 convolution)");
    }
    dnnl_primitive_attr_destroy(attr);
    return st;
}

/* True if oneDNN runs this matmul with its jit sgemm ("gemm:jit"), which
 * packs the weights at every call (no brgemm kernel without AVX-512). */
static bool matmul_is_sgemm(kn_dnnl_session *s, const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                            const dnnl_memory_desc_t *dst)
{
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (dnnl_matmul_desc_init(&md, src, wei, NULL, dst) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &md, NULL, s->engine, NULL) != dnnl_success)
        return false;
    const char *impl = NULL;
    bool sgemm = dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
                 !strncmp(impl, "gemm:", 5);
    dnnl_primitive_desc_destroy(pd);
    return sgemm;
}

int kn_dnnl_create_matmul(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                          dnnl_primitive_attr_t attr)
{
    int st;
    if ((st = kn_dnnl_check_tensor(&rec->src, "matmul src", 2, 8)) ||
        (st = kn_dnnl_check_tensor(&rec->wei, "matmul weights", 2, 8)) ||
        (st = kn_dnnl_check_tensor(&rec->dst, "matmul dst", 2, 8)))
        return st;
    int nd = rec->dst.rank;
    if (rec->src.rank > nd || rec->wei.rank > nd)
        return kn_error(KN_ERR_INVALID, "oneDNN matmul: operand ranks %d and %d exceed the dst rank %d",
                        rec->src.rank, rec->wei.rank, nd);
    /* int8 (kiln::QMatMul): u8/s8 src, s8 weights, f32 bias, u8/s8/f32 dst */
    /* dynamic (f32 src): quantized per run, dynq.c */
    bool q = kn_dnnl_is_int8(rec), dyn = q && rec->src.dtype == KN_F32;
    bool float_ok = rec->src.dtype == KN_F32 && rec->wei.dtype == KN_F32 && rec->dst.dtype == KN_F32;
    bool int8_ok = (rec->src.dtype == KN_U8 || rec->src.dtype == KN_I8 || (dyn && rec->dst.dtype == KN_F32)) &&
                   rec->wei.dtype == KN_I8 && rec->alpha == 1.0f && !rec->trans_a;
    if (q ? !int8_ok : !float_ok)
        return kn_error(KN_ERR_INVALID, "oneDNN matmul: src %s, weights %s, dst %s in a%s record",
                        kn_dtype_name(rec->src.dtype), kn_dtype_name(rec->wei.dtype), kn_dtype_name(rec->dst.dtype),
                        q ? "n int8 record with alpha or transA, or" : " float");
    /* bf16 autocast: the kernel's src and weights are bf16, reordered from
     * the caller's f32 (the weights once, src at every run) */
    bool bf16 = rec->compute == KN_BF16;
    if (!q && !bf16 && kn_pw_matmul_wanted(rec, p->nthr)) {
        kn_pw *k = NULL;
        int made = kn_pw_create_matmul(rec, weights, &k);
        if (!made) p->algo = &kn_dnnl_algo_pw_matmul, p->state = k;
        return kn_dnnl_pw_made(s, rec, p, made);
    }
    dnnl_dims_t sd, ss, wd, ws, dd, bd;
    mm_operand(&rec->src, nd, rec->trans_a, sd, ss);
    mm_operand(&rec->wei, nd, rec->trans_b, wd, ws);
    for (int i = 0; i < nd; i++) dd[i] = rec->dst.dims[i];
    int64_t M = sd[nd - 2], K = sd[nd - 1], N = wd[nd - 1];
    if (wd[nd - 2] != K || dd[nd - 2] != M || dd[nd - 1] != N)
        return kn_error(KN_ERR_INVALID, "oneDNN matmul: [%lld x %lld] x [%lld x %lld] does not give [%lld x %lld]",
                        (long long)M, (long long)K, (long long)wd[nd - 2], (long long)N, (long long)dd[nd - 2],
                        (long long)dd[nd - 1]);
    for (int i = 0; i < nd - 2; i++)
        if ((sd[i] != 1 && sd[i] != dd[i]) || (wd[i] != 1 && wd[i] != dd[i]))
            return kn_error(KN_ERR_INVALID, "oneDNN matmul: batch dim %d: %lld and %lld do not broadcast to %lld", i,
                            (long long)sd[i], (long long)wd[i], (long long)dd[i]);
    nd = collapse_batch(nd, rec->trans_a, sd, ss, wd, ws, dd);
    dnnl_memory_desc_t src_md, src_kern, wei_user, wei_any, dst_md, bias_md;
    dnnl_data_type_t sdt = dyn ? dnnl_u8 : kn_dnnl_dt(rec->src.dtype), wdt = kn_dnnl_dt(rec->wei.dtype);
    dnnl_data_type_t kdt = bf16 ? dnnl_bf16 : wdt;
    dnnl_dims_t dst_st, src_st;
    kn_dnnl_plain_strides(nd, dd, dst_st);
    KN_DN(dnnl_memory_desc_init_by_strides(&src_md, nd, sd, sdt, ss), "describing the matmul src");
    /* the bf16 copy of src is dense (the reorder writes it so) */
    kn_dnnl_plain_strides(nd, sd, src_st);
    if (bf16) KN_DN(dnnl_memory_desc_init_by_strides(&src_kern, nd, sd, dnnl_bf16, src_st), "describing the matmul src");
    else src_kern = src_md;
    KN_DN(dnnl_memory_desc_init_by_strides(&wei_user, nd, wd, wdt, ws), "describing the matmul weights");
    KN_DN(dnnl_memory_desc_init_by_strides(&dst_md, nd, dd, kn_dnnl_dt(rec->dst.dtype), dst_st),
          "describing the matmul dst");
    const void *wconst, *bconst = NULL;
    if ((st = kn_dnnl_const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &wconst))) return st;
    /* only constant weights are worth a one-time reorder into a blocked layout */
    if (wconst) KN_DN(dnnl_memory_desc_init_by_tag(&wei_any, nd, wd, kdt, dnnl_format_tag_any), "describing weights");
    else if (bf16) KN_DN(dnnl_memory_desc_init_by_strides(&wei_any, nd, wd, kdt, ws), "describing weights");
    else wei_any = wei_user;
    bool hb = kn_dnnl_has_bias(rec);
    if (hb) {
        if ((st = kn_dnnl_check_tensor(&rec->bias, "matmul bias", 1, 2))) return st;
        if (numel(&rec->bias) != N || rec->bias.dims[rec->bias.rank - 1] != N)
            return kn_error(KN_ERR_INVALID, "oneDNN matmul: bias must hold %lld values (one per column)", (long long)N);
        for (int i = 0; i < nd; i++) bd[i] = i == nd - 1 ? N : 1;
        if ((st = kn_dnnl_plain_md(&bias_md, nd, bd, "describing the matmul bias"))) return st;
        if ((st = kn_dnnl_const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &bconst))) return st;
    }
    if (!q && !bf16 && nd == 2 && wconst && !rec->trans_a && rec->alpha == 1.0f && matmul_is_sgemm(s, &src_md, &wei_any, &dst_md)) {
        kn_dnnl_prim keep = *p;
        if ((st = create_matmul_as_conv(s, rec, p, sd, ss, ws, N, wconst, bconst)) != KN_ERR_UNSUPPORTED) return st;
        /* no optimized 1x1 convolution for it: the matmul then */
        kn_dnnl_prim_clear(p);
        p->kind = keep.kind, p->rec = keep.rec, p->weights = keep.weights, p->nthr = keep.nthr;
        kn_error_clear();
    }
    /* dynamic: a bias always (the zero point's correction, dynq.c), in real
     * units, i.e. after the output scales */
    if (dyn && !hb) {
        for (int i = 0; i < nd; i++) bd[i] = i == nd - 1 ? N : 1;
        if ((st = kn_dnnl_plain_md(&bias_md, nd, bd, "describing the matmul bias"))) return st;
        hb = true;
    }
    p->has_bias = hb;
    p->bias_const = bconst;
    p->bias_arg = DNNL_ARG_BIAS;
    /* oneDNN scales the bias with the product; Gemm adds C after alpha, so
     * with alpha the bias becomes a binary add post-op run after the scale */
    bool scaled = rec->alpha != 1.0f, bias_post = hb && (scaled || dyn);
    if (scaled) {
        if (!(rec->alpha == rec->alpha)) return kn_error(KN_ERR_INVALID, "oneDNN matmul: alpha is NaN");
        float a = rec->alpha;
        KN_DN(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &a), "setting the matmul output scale");
    }
    /* dynamic: the run's activation scale multiplies first (post-op 0) */
    if (bias_post) p->bias_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(dyn ? 1 : 0) | DNNL_ARG_SRC_1;
    if (dyn && (st = kn_dnnl_dynq_create(s, rec, weights, p, attr, numel(&rec->src), nd - 1, wconst, bconst)))
        return st;
    const dnnl_memory_desc_t *xs_md = dyn ? &p->dynq->xs_md : NULL;
    if (q && !dyn && (st = kn_dnnl_set_int8_attr(rec, weights, attr, N, nd - 1))) return st;
    /* the dynamic form's residual (f32, real units) as a binary add: with a
     * sum post-op oneDNN 2.6 runs its reference int8 matmul (1000x slower) */
    if (dyn && kn_dnnl_has_sum(rec)) {
        if ((st = kn_dnnl_set_residual_as_add(s, p, rec, attr, xs_md, bias_post ? &bias_md : NULL, &dst_md)))
            return st;
    } else if ((st = kn_dnnl_set_post_ops_ex(rec, attr, xs_md, bias_post ? &bias_md : NULL, &p->has_sum))) {
        return st;
    }
    const dnnl_memory_desc_t *prim_bias = hb && !bias_post ? &bias_md : NULL;
    dnnl_matmul_desc_t md;
    KN_DN(dnnl_matmul_desc_init(&md, &src_kern, &wei_any, prim_bias, &dst_md), "describing the matmul");
    return kn_dnnl_finish_prim(s, p, &md, attr, &src_md, &wei_user, hb ? &bias_md : NULL, &dst_md, NULL, wconst,
                               "creating the matmul");
}
