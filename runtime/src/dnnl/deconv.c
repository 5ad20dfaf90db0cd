/*
 * runtime/src/dnnl/deconv.c — transposed convolutions (ONNX ConvTranspose,
 * KN_DNNL_DECONV records) as oneDNN's deconvolution primitive.
 *
 * oneDNN 2.6 runs an f32 deconvolution as its convolution's backward-data
 * kernel (jit:avx2, jit:avx512_core...) in the layout the session's
 * convolutions use (blocked, or NHWC on AVX-512: deconv_create asks for
 * it), so a deconvolution between convolutions needs no reorders. Its bias and post-ops, though, it applies in a
 * reference loop that takes as long as the product itself (1.6 ms → 3.4 ms
 * for a bias on a 64-channel 81x81 output on Zen 3, 18 ms with a Relu).
 * So the deconvolution runs without them, and the bias, the activations
 * and the residual follow as one binary primitive (dst += bias, with the
 * activations and the residual add as its post-ops) in place over dst,
 * at memory speed.
 *
 * Record conventions (kiln/abi.h): weights in ONNX layout [C, O/g, k..],
 * which is oneDNN's logical (g,) O/g, C/g, k.. with the first two dims
 * swapped: described by strides, reordered once when constant. pads_end
 * may be negative (output_padding, output_shape): oneDNN's deconvolution
 * only checks that the sizes agree, and its kernels compute every output
 * from the begin padding.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "dnnl_int.h"

/* The bias + post-ops stage over dst (NULL when the record has neither). */
typedef struct deconv_post {
    prim_run run;
    dnnl_memory_t m_dst, m_bias, m_res;
    int res_arg;          /* the residual's argument, when there is one */
    /* a residual in another layout than dst's: reordered into dst's (the
     * session's buffer 2) before the deconvolution, since the binary add
     * reading another layout is oneDNN's reference kernel */
    prim_run res_ro;
    dnnl_memory_t m_res_user;
    const void *bias;     /* the constant bias, or zeros when the record has none */
    float *zeros;
    size_t dst_bytes, res_bytes;
    char impl[96];
} deconv_post;

static void post_free(void *state)
{
    deconv_post *d = state;
    if (!d) return;
    kn_dnnl_run_free(&d->run);
    kn_dnnl_run_free(&d->res_ro);
    dnnl_memory_t mems[] = {d->m_dst, d->m_bias, d->m_res, d->m_res_user};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    free(d->zeros);
    free(d);
}

/* Checks what the primitive relies on: shapes that agree with the geometry. */
static int check_deconv(const kn_abi_dnnl *rec)
{
    int sp = rec->spatial, nd = sp + 2, st;
    if (sp < 1 || sp > 3) return kn_error(KN_ERR_UNSUPPORTED, "oneDNN deconv: %d spatial dims (1..3 supported)", sp);
    if ((st = kn_dnnl_check_tensor(&rec->src, "deconv src", nd, nd)) ||
        (st = kn_dnnl_check_tensor(&rec->wei, "deconv weights", nd, nd)) ||
        (st = kn_dnnl_check_tensor(&rec->dst, "deconv dst", nd, nd)))
        return st;
    if (rec->src.dtype != KN_F32 || rec->wei.dtype != KN_F32 || rec->dst.dtype != KN_F32 || kn_dnnl_is_int8(rec))
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN deconv: src %s, weights %s, dst %s (f32 only)",
                        kn_dtype_name(rec->src.dtype), kn_dtype_name(rec->wei.dtype), kn_dtype_name(rec->dst.dtype));
    int64_t g = rec->groups, C = rec->src.dims[1];
    if (g < 1 || C % g || rec->wei.dims[0] != C || rec->wei.dims[1] * g != rec->dst.dims[1] ||
        rec->dst.dims[0] != rec->src.dims[0])
        return kn_error(KN_ERR_INVALID,
                        "oneDNN deconv: groups %lld, src channels %lld, weights [%lld, %lld, ..], dst channels %lld "
                        "do not agree",
                        (long long)g, (long long)C, (long long)rec->wei.dims[0], (long long)rec->wei.dims[1],
                        (long long)rec->dst.dims[1]);
    for (int i = 0; i < sp; i++) {
        int64_t s = rec->strides[i], d = rec->dilations[i], pb = rec->pads_begin[i], pe = rec->pads_end[i];
        int64_t in = rec->src.dims[2 + i], k = rec->wei.dims[2 + i], out = rec->dst.dims[2 + i];
        if (s < 1 || d < 1 || pb < 0 || pe <= -s || (in - 1) * s + d * (k - 1) + 1 - pb - pe != out)
            return kn_error(KN_ERR_INVALID,
                            "oneDNN deconv: spatial dim %d: %lld → %lld with kernel %lld, stride %lld, dilation %lld, "
                            "pads %lld/%lld",
                            i, (long long)in, (long long)out, (long long)k, (long long)s, (long long)d, (long long)pb,
                            (long long)pe);
    }
    return KN_OK;
}

/* The user's weights [C, O/g, k..] as oneDNN's logical (g,) O/g, C/g, k.. */
static int weights_md(const kn_abi_dnnl *rec, dnnl_memory_desc_t *user, dnnl_memory_desc_t *any)
{
    int sp = rec->spatial, g = rec->groups;
    int64_t C = rec->wei.dims[0], Og = rec->wei.dims[1], Cg = C / g, kprod = 1;
    for (int i = 0; i < sp; i++) kprod *= rec->wei.dims[2 + i];
    dnnl_dims_t wd, ws;
    int at = 0;
    if (g > 1) wd[at] = g, ws[at] = Cg * Og * kprod, at++;
    wd[at] = Og, ws[at] = kprod, at++;
    wd[at] = Cg, ws[at] = Og * kprod, at++;
    int64_t str = 1;
    for (int i = sp - 1; i >= 0; i--) wd[at + i] = rec->wei.dims[2 + i], ws[at + i] = str, str *= rec->wei.dims[2 + i];
    int wnd = at + sp;
    KN_DN(dnnl_memory_desc_init_by_strides(user, wnd, wd, dnnl_f32, ws), "describing the deconv weights");
    KN_DN(dnnl_memory_desc_init_by_tag(any, wnd, wd, dnnl_f32, dnnl_format_tag_any), "describing the deconv weights");
    return KN_OK;
}

/* The bias + post-ops stage: dst = post_ops(dst + bias) as one in-place
 * binary primitive on dst in the caller's layout (dst_md). */
static int post_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights,
                       const dnnl_memory_desc_t *dst_md, deconv_post **out)
{
    *out = NULL;
    int nd = rec->spatial + 2, st, idx = -1;
    int64_t O = rec->dst.dims[1];
    bool hb = kn_dnnl_has_bias(rec);
    if (hb && (rec->bias.rank != 1 || rec->bias.dims[0] != O))
        return kn_error(KN_ERR_INVALID, "oneDNN deconv: bias has %lld values, expected %lld",
                        (long long)(rec->bias.rank == 1 ? rec->bias.dims[0] : -1), (long long)O);
    deconv_post *d = calloc(1, sizeof *d);
    if (!d) return kn_error(KN_ERR_NOMEM, "out of memory");
    dnnl_dims_t bd, dd;
    for (int i = 0; i < nd; i++) bd[i] = i == 1 ? O : 1, dd[i] = rec->dst.dims[i];
    dnnl_memory_desc_t bias_md, res_md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_binary_desc_t bdesc;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t ds = dnnl_success;
    const char *what = "describing the deconv bias";
    if ((st = kn_dnnl_plain_md(&bias_md, nd, bd, what)) ||
        (st = kn_dnnl_act_md(s, rec->post_layout, KN_F32, &res_md, nd, dd, "the deconv residual")))
        goto out;
    /* a bias [1, O, 1..] read as plain beside a blocked dst gets oneDNN's
     * reference binary kernel; in dst's own layout it is the same bytes
     * (one pixel, whole channel blocks) and gets the jit one */
    dnnl_memory_desc_t bias_dst;
    dnnl_format_tag_t tag = kn_dnnl_native_tag(kn_dnnl_native_layout(s), nd);
    if (rec->dst_layout == KN_LAYOUT_NATIVE &&
        dnnl_memory_desc_init_by_tag(&bias_dst, nd, bd, dnnl_f32, tag) == dnnl_success &&
        dnnl_memory_desc_get_size(&bias_dst) == (size_t)O * sizeof(float)) {
        dnnl_memory_desc_t dst_native;
        if (dnnl_memory_desc_init_by_tag(&dst_native, nd, dd, dnnl_f32, tag) == dnnl_success &&
            dnnl_memory_desc_equal(&dst_native, dst_md))
            bias_md = bias_dst;
    }
    if (hb) {
        if ((st = kn_dnnl_const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &d->bias))) goto out;
    } else if (!(d->zeros = calloc((size_t)O, sizeof(float)))) {
        st = kn_error(KN_ERR_NOMEM, "out of memory");
        goto out;
    } else {
        d->bias = d->zeros;
    }
    if (!(attr = kn_dnnl_scratch_attr())) {
        st = kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
        goto out;
    }
    bool res_ro = kn_dnnl_has_sum(rec) && !dnnl_memory_desc_equal(&res_md, dst_md);
    if ((st = kn_dnnl_set_post_ops_add(rec, attr, res_ro ? dst_md : &res_md, &idx))) goto out;
    what = "creating the deconv bias and post-ops";
    if ((ds = dnnl_binary_desc_init(&bdesc, dnnl_binary_add, dst_md, &bias_md, dst_md)) ||
        (ds = dnnl_primitive_desc_create(&pd, &bdesc, attr, s->engine, NULL)))
        goto out;
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(d->impl, sizeof d->impl, "%s", impl);
    st = kn_dnnl_run_make(s, pd, &d->run, what); /* takes pd over */
    pd = NULL;
    if (st) goto out;
    if ((ds = dnnl_memory_create(&d->m_dst, dst_md, s->engine, DNNL_MEMORY_NONE)) ||
        (ds = dnnl_memory_create(&d->m_bias, &bias_md, s->engine, DNNL_MEMORY_NONE)))
        goto out;
    d->dst_bytes = dnnl_memory_desc_get_size(dst_md);
    if (idx >= 0) {
        d->res_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1;
        d->res_bytes = dnnl_memory_desc_get_size(&res_md);
        if ((ds = dnnl_memory_create(&d->m_res, res_ro ? dst_md : &res_md, s->engine, DNNL_MEMORY_NONE))) goto out;
        if (res_ro) {
            what = "creating the deconv residual reorder";
            if ((ds = dnnl_memory_create(&d->m_res_user, &res_md, s->engine, DNNL_MEMORY_NONE)) ||
                (st = kn_dnnl_make_reorder(s, &res_md, dst_md, &d->res_ro, what)))
                goto out;
        }
        /* a residual that overlaps dst is moved aside first (run) */
        st = kn_dnnl_reserve(s, 2, d->res_bytes > d->dst_bytes ? d->res_bytes : d->dst_bytes);
    }
out:
    if (ds != dnnl_success && !st) st = kn_dnnl_fail(ds, what);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (st) post_free(d);
    else *out = d;
    return st;
}

static int deconv_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                      const void *post_src, int threads)
{
    deconv_post *d = p->state;
    int rc;
    if (d && d->m_res) {
        if (!post_src) return kn_error(KN_ERR_INVALID, "oneDNN: the deconvolution's residual add has no input");
        if (d->res_ro.prim) { /* into dst's layout, aside */
            KN_DN(dnnl_memory_set_data_handle(d->m_res_user, (void *)post_src), "binding the residual");
            KN_DN(dnnl_memory_set_data_handle(d->m_res, s->act[2]), "binding the residual");
            dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, d->m_res_user}, {DNNL_ARG_TO, d->m_res}};
            if ((rc = kn_dnnl_run_exec(s, &d->res_ro, ra, 2, "reordering the deconvolution's residual"))) return rc;
            post_src = s->act[2];
        } else if (kn_dnnl_overlap(post_src, d->res_bytes, dst, d->dst_bytes)) {
            /* the deconvolution writes dst before the add reads the residual */
            if ((rc = kn_dnnl_copy_parallel(s->act[2], post_src, d->res_bytes, threads))) return rc;
            post_src = s->act[2];
        }
    }
    if ((rc = kn_dnnl_exec_prim(s, p, src, wei, NULL, dst, NULL, threads)) || !d) return rc;
    const void *b = d->bias ? d->bias : bias;
    if (!b) return kn_error(KN_ERR_INVALID, "oneDNN: no bias given for the deconvolution");
    KN_DN(dnnl_memory_set_data_handle(d->m_dst, dst), "binding the dst");
    KN_DN(dnnl_memory_set_data_handle(d->m_bias, (void *)b), "binding the bias");
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC_0, d->m_dst}, {DNNL_ARG_SRC_1, d->m_bias}, {DNNL_ARG_DST, d->m_dst}};
    int n = 3;
    if (d->m_res) {
        KN_DN(dnnl_memory_set_data_handle(d->m_res, (void *)post_src), "binding the residual");
        args[n++] = (dnnl_exec_arg_t){d->res_arg, d->m_res};
    }
    if ((rc = kn_dnnl_run_exec(s, &d->run, args, n, "adding the deconvolution's bias"))) return rc;
    KN_DN(dnnl_stream_wait(s->stream), "waiting for the stream");
    return KN_OK;
}

static const char *deconv_impl(const kn_dnnl_prim *p)
{
    const deconv_post *d = p->state;
    return d && d->impl[0] ? d->impl : p->impl;
}

static int deconv_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                         dnnl_primitive_attr_t attr);

static const kn_dnnl_algo DECONV = {KN_ALGO_DIRECT, KN_F32,     kn_dnnl_any_record, kn_dnnl_always_worth, deconv_create,
                                    deconv_run,     post_free, NULL,       deconv_impl};

static int deconv_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                         dnnl_primitive_attr_t attr)
{
    int sp = rec->spatial, nd = sp + 2, st;
    dnnl_dims_t sd, dd, strides, dil, pl, pr;
    kn_dnnl_window_dims(rec, sd, dd, strides, dil, pl, pr);
    dnnl_memory_desc_t src_md, dst_md, wei_user, wei_any, src_any, dst_any;
    if ((st = kn_dnnl_act_md(s, rec->src_layout, KN_F32, &src_md, nd, sd, "the deconv src")) ||
        (st = kn_dnnl_act_md(s, rec->dst_layout, KN_F32, &dst_md, nd, dd, "the deconv dst")) ||
        (st = weights_md(rec, &wei_user, &wei_any)))
        return st;
    KN_DN(dnnl_memory_desc_init_by_tag(&src_any, nd, sd, dnnl_f32, dnnl_format_tag_any), "describing the deconv src");
    KN_DN(dnnl_memory_desc_init_by_tag(&dst_any, nd, dd, dnnl_f32, dnnl_format_tag_any), "describing the deconv dst");
    const void *wconst;
    if ((st = kn_dnnl_const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &wconst))) return st;
    dnnl_deconvolution_desc_t dc;
    /* Between convolutions, the session's own layout where oneDNN has an
     * optimized kernel for it: left to choose, oneDNN picks its blocked
     * layout, which is the session's on AVX2 (nChw8c) but not on AVX-512,
     * where the session exchanges NHWC and a free choice (nChw16c) would
     * cost a reorder on each side. Elsewhere (a plain graph input or
     * output), its choice, reordered to and from. */
    bool own = rec->src_layout == KN_LAYOUT_NATIVE && rec->dst_layout == KN_LAYOUT_NATIVE &&
               dnnl_dilated_deconvolution_forward_desc_init(&dc, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                            &src_md, &wei_any, NULL, &dst_md, strides, dil, pl,
                                                            pr) == dnnl_success &&
               kn_dnnl_reject_reference(s, &dc, attr) == KN_OK;
    kn_error_clear();
    if (!own)
        KN_DN(dnnl_dilated_deconvolution_forward_desc_init(&dc, dnnl_forward_inference, dnnl_deconvolution_direct,
                                                           &src_any, &wei_any, NULL, &dst_any, strides, dil, pl, pr),
              "describing the deconvolution");
    /* the bias and post-ops are the stage after it (deconv_post) */
    p->has_bias = p->has_sum = false;
    if ((st = kn_dnnl_finish_prim(s, p, &dc, attr, &src_md, &wei_user, NULL, &dst_md, NULL, wconst,
                                  "creating the deconvolution")))
        return st;
    deconv_post *d = NULL;
    if ((kn_dnnl_has_bias(rec) || rec->n_post > 0) && (st = post_create(s, rec, weights, &dst_md, &d))) return st;
    if (d) { /* what runs it, as profiles and reports show it */
        char both[sizeof d->impl];
        snprintf(both, sizeof both, "%s + %s", p->impl, d->impl[0] ? d->impl : "binary");
        memcpy(d->impl, both, sizeof both);
    }
    p->state = d;
    return KN_OK;
}

/* ---- kernel = stride: kiln's patch kernel (kernels/x86/f32_deconv_patch_avx512.c) ---- */

/* Whether dst (or src) is channels-last in s: the session's NHWC, or one
 * channel in any layout (the same bytes). */
static bool nhwc(kn_dnnl_session *s, int32_t layout, int64_t channels)
{
    return channels == 1 || (layout == KN_LAYOUT_NATIVE && kn_dnnl_native_block(s) == 0);
}

/* The patch kernel takes rec: an f32 record not forced onto oneDNN, src
 * channels-last, a residual in dst's layout. */
static bool patch_supported(kn_dnnl_session *s, const kn_abi_dnnl *rec, bool *dst_nhwc)
{
    *dst_nhwc = nhwc(s, rec->dst_layout, rec->dst.dims[1]);
    bool plain_dst = rec->dst_layout == KN_LAYOUT_PLAIN;
    if (!*dst_nhwc && !plain_dst) return false; /* a blocked dst */
    kn_conv_algo forced = kn_config_conv_algo();
    return rec->conv_algo != KN_CONV_ALGO_DIRECT && rec->compute == KN_DT_UNDEFINED && forced != KN_ALGO_DNNL &&
           forced != KN_ALGO_DIRECT && rec->src.rank == 4 && nhwc(s, rec->src_layout, rec->src.dims[1]) &&
           (!kn_dnnl_has_sum(rec) || rec->post_layout == rec->dst_layout) && kn_pdc_supported(rec, *dst_nhwc);
}

static int patch_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                     const void *post_src, int threads)
{
    (void)wei, (void)bias;
    if (post_src && post_src != dst && kn_dnnl_overlap(post_src, p->dst_bytes, dst, p->dst_bytes)) {
        int rc = kn_dnnl_copy_parallel(s->act[2], post_src, p->dst_bytes, threads);
        if (rc) return rc;
        post_src = s->act[2];
    }
    return kn_pdc_exec(p->state, src, dst, post_src, threads);
}

static void patch_free(void *state) { kn_pdc_free(state); }

static bool patch_keeps(const kn_dnnl_prim *p, int threads)
{
    (void)p, (void)threads;
    return true; /* it splits its work at each run */
}

static const char *patch_impl(const kn_dnnl_prim *p)
{
    (void)p;
    return "kiln patch deconv:avx512";
}

static const kn_dnnl_algo PATCH = {
    .id = KN_ALGO_AUTO, .dtype = KN_F32, .run = patch_run, .free = patch_free, .keeps = patch_keeps,
    .impl = patch_impl,
};

static int patch_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, bool dst_nhwc,
                        kn_dnnl_prim *p)
{
    const void *w = NULL, *b = NULL;
    int st = kn_dnnl_const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &w);
    if (!st && kn_dnnl_has_bias(rec)) st = kn_dnnl_const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &b);
    kn_pdc *k = NULL;
    if (!st) st = kn_pdc_create(rec, w, b, dst_nhwc, &k);
    p->dst_bytes = (size_t)rec->dst.nbytes;
    /* a residual that overlaps dst other than exactly is copied aside (patch_run) */
    if (!st && kn_dnnl_has_sum(rec)) st = kn_dnnl_reserve(s, 2, p->dst_bytes);
    if (st) {
        kn_pdc_free(k);
        return st;
    }
    p->algo = &PATCH;
    p->state = k;
    return KN_OK;
}

int kn_dnnl_create_deconv(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                          dnnl_primitive_attr_t attr)
{
    int st = check_deconv(rec);
    if (st) return st;
    bool dst_nhwc = false;
    if (patch_supported(s, rec, &dst_nhwc)) return patch_create(s, rec, weights, dst_nhwc, p);
    p->algo = &DECONV;
    st = deconv_create(s, rec, weights, p, attr);
    if (st) p->algo = NULL; /* the caller frees what was made; no state to free */
    return st;
}
