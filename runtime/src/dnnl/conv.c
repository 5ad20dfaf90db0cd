/*
 * runtime/src/dnnl/conv.c — convolutions: the table of algorithms that may
 * run one, and its rows.
 *
 * kn_dnnl_create_conv checks the record, then walks ALGOS in order and
 * builds the first row that supports the record and, by config.c's cost
 * model and tuning table for this CPU, is worth it; oneDNN's direct
 * convolution, last, takes everything. KILN_CONV_ALGO (config.h) forces
 * one row wherever it supports the record (oneDNN's direct convolution
 * elsewhere), without asking whether it is worth it, so that tests run
 * every path on any CPU that has it. A new kernel or precision (INT8,
 * INT4, BF16) is a new row with its own dtype and support test.
 *
 *  winograd   3x3 stride 1 between activations in the session's layout
 *             (nChw8c, nChw16c, NHWC) by kernels/x86/f32_winograd_*
 *             (a cost model: kn_wino_tile);
 *  pointwise  1x1 without padding between NHWC activations (AVX-512) by
 *             kernels/x86/f32_conv1x1_avx512.c: as fast as oneDNN's
 *             brgconv_1x1 at batch 1, 1.4-2x faster with a residual sum at
 *             batch 8 (the tuning table says where);
 *  stem       a network's first conv: 1-4 plain NCHW input channels into
 *             16-64 NHWC ones (AVX-512) by kernels/x86/f32_stem_avx512.c;
 *             int8 (u8 NCHW input, AVX-512 VNNI) by u8_stem_avx512.c;
 *  im2col     a small output image between blocked activations: patches
 *             copied, then oneDNN's 1x1 kernel (im2col.c);
 *  thin       a k x 1 conv over width-1 images (1 x k over height-1 rows
 *             when forced) as oneDNN's 1-D convolution: the same bytes in
 *             every layout, and the kernel blocks along the long dim;
 *  matmul     a plain NC(D)HW 1x1 stride-1 conv as oneDNN's matmul
 *             W[O, C] x X[C, HW] (no reorders);
 *  depthwise  an int8 depthwise 3x3 conv, stride 1 or 2, between NHWC
 *             activations (AVX-512 VNNI) by kernels/x86/u8_dw3x3_avx512.c
 *             where its channel chunks are full enough (kn_dw8_worth);
 *  direct     oneDNN's convolution primitive; an int8 one with its zero
 *             points folded into the bias where that is exact (zp_fold:
 *             AMX kernels on CPUs that have them), else with oneDNN's.
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

/* True if rec's post-ops add a residual (a malformed count: no). */
bool kn_dnnl_has_sum(const kn_abi_dnnl *rec)
{
    return rec->n_post >= 0 && rec->n_post <= 4 && kn_fused_has_sum(rec->post, rec->n_post);
}

/* True if rec may run by one of kiln's own algorithms (Winograd, im2col):
 * the record allows it, and its activations (the residual too) are in the
 * session's blocked layout. */
bool kn_dnnl_own_algo_allowed(const kn_abi_dnnl *rec)
{
    /* kiln's own kernels compute in f32: not for a bf16 (autocast) record */
    return rec->conv_algo != KN_CONV_ALGO_DIRECT && rec->compute == KN_DT_UNDEFINED &&
           rec->src_layout == KN_LAYOUT_NATIVE && rec->dst_layout == KN_LAYOUT_NATIVE &&
           (!kn_dnnl_has_sum(rec) || rec->post_layout == KN_LAYOUT_NATIVE);
}

/* True for a pointwise conv: 1x1 kernel, stride 1, no padding, one group. */
bool kn_dnnl_is_pointwise(const kn_abi_dnnl *rec)
{
    if (rec->groups != 1) return false;
    for (int i = 0; i < rec->spatial; i++)
        if (rec->wei.dims[2 + i] != 1 || rec->strides[i] != 1 || rec->pads_begin[i] || rec->pads_end[i] ||
            rec->src.dims[2 + i] != rec->dst.dims[2 + i])
            return false;
    return true;
}

/* A pointwise conv on plain NC(D)HW is the batched matmul W[O, C] x X[C, HW]:
 * no activation reorders (oneDNN's conv kernels want channels-last). */
static int matmul_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                         dnnl_primitive_attr_t conv_attr)
{
    int64_t N = rec->src.dims[0], C = rec->src.dims[1], O = rec->wei.dims[0], HW = 1;
    for (int i = 0; i < rec->spatial; i++) HW *= rec->src.dims[2 + i];
    dnnl_dims_t ad = {1, O, C}, xd = {N, C, HW}, dd = {N, O, HW}, bd = {1, O, 1};
    dnnl_memory_desc_t a_md, x_md, d_md, b_md;
    (void)conv_attr; /* a matmul takes its own */
    int st;
    if ((st = kn_dnnl_plain_md(&a_md, 3, ad, "describing the 1x1 conv weights")) ||
        (st = kn_dnnl_plain_md(&x_md, 3, xd, "describing the 1x1 conv src")) ||
        (st = kn_dnnl_plain_md(&d_md, 3, dd, "describing the 1x1 conv dst")) ||
        (st = kn_dnnl_plain_md(&b_md, 3, bd, "describing the 1x1 conv bias")))
        return st;
    bool hb = kn_dnnl_has_bias(rec);
    const void *wconst, *bconst = NULL;
    if ((st = kn_dnnl_const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &wconst))) return st;
    if (hb && (st = kn_dnnl_const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &bconst))) return st;
    dnnl_primitive_attr_t attr = kn_dnnl_scratch_attr();
    if (!attr) return kn_error(KN_ERR_NOMEM, "oneDNN: creating attributes failed");
    dnnl_matmul_desc_t md;
    /* a per-row matmul bias gets oneDNN's reference kernel; a binary add
     * post-op broadcast over rows keeps the brgemm one */
    st = kn_dnnl_set_post_ops(rec, attr, hb ? &b_md : NULL, &p->has_sum);
    if (!st) {
        dnnl_status_t ds = dnnl_matmul_desc_init(&md, &a_md, &x_md, NULL, &d_md);
        if (ds != dnnl_success) st = kn_dnnl_fail(ds, "describing the 1x1 convolution");
    }
    if (!st) st = kn_dnnl_reject_reference(s, &md, attr);
    if (!st) {
        p->has_bias = hb;
        p->bias_const = bconst;
        p->bias_arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;
        p->swap = true;
        p->swap_const = wconst;
        st = kn_dnnl_finish_prim(s, p, &md, attr, &a_md, &x_md, hb ? &b_md : NULL, &d_md, NULL, NULL,
                                 "creating the 1x1 convolution");
    }
    dnnl_primitive_attr_destroy(attr);
    return st;
}

/* After kiln's 1x1 or matmul kernel was made (status st) for rec: a residual that
 * overlaps dst other than exactly is copied aside at exec, into act[1]. */
int kn_dnnl_pw_made(kn_dnnl_session *s, const kn_abi_dnnl *rec, kn_dnnl_prim *p, int st)
{
    p->dst_bytes = (size_t)rec->dst.nbytes;
    return !st && kn_dnnl_has_sum(rec) ? kn_dnnl_reserve(s, 1, p->dst_bytes) : st;
}

/* ---- winograd ------------------------------------------------------------ */

/* The tile for rec at `threads` threads: the cost model's choice, or when
 * KILN_CONV_ALGO=winograd forces it, the better tile even where direct
 * convolution would be faster. */
static int wino_tile_for(const kn_abi_dnnl *rec, int threads)
{
    return kn_config_conv_algo() == KN_ALGO_WINOGRAD ? kn_wino_best_tile(rec, threads) : kn_wino_tile(rec, threads);
}

static bool wino_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    return kn_dnnl_own_algo_allowed(rec) && kn_wino_supported(rec) && kn_dnnl_native_block(s) >= 0;
}

static bool wino_worth(kn_dnnl_session *s, const kn_abi_dnnl *rec, int threads)
{
    (void)s;
    return kn_wino_tile(rec, threads) != 0;
}

static int wino_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                       dnnl_primitive_attr_t attr)
{
    (void)attr;
    kn_wino *w = NULL;
    int st = kn_wino_create(rec, weights, wino_tile_for(rec, p->nthr), kn_dnnl_native_block(s), &w);
    if (!st) st = kn_dnnl_reserve(s, 2, kn_wino_scratch_bytes(w));
    if (st) {
        kn_wino_free(w);
        return st;
    }
    p->state = w;
    return KN_OK;
}

static int wino_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                    const void *post_src, int threads)
{
    (void)wei;
    return kn_wino_exec(p->state, src, bias, dst, post_src, s->act[2], threads);
}

static void wino_free(void *state) { kn_wino_free(state); }

/* It splits its work at each run: only another tile needs a rebuild. */
static bool wino_keeps(const kn_dnnl_prim *p, int threads)
{
    return wino_tile_for(&p->rec, threads) == kn_wino_tile_of(p->state);
}

static const char *wino_impl(const kn_dnnl_prim *p)
{
    return kn_wino_tile_of(p->state) == 4 ? "winograd F(4x4,3x3)" : "winograd F(2x2,3x3)";
}

/* ---- pointwise (kiln's AVX-512 1x1 and matmul kernel) --------------------- */

static bool pw_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    return kn_dnnl_own_algo_allowed(rec) && kn_dnnl_native_block(s) == 0 && kn_pw_supported(rec);
}

/* A residual sum into a large output, or few pixels against a large filter
 * (the tuning table's figures); elsewhere, small input channel counts
 * above all, oneDNN's stores win. */
bool kn_pw_worth(const kn_abi_dnnl *rec)
{
    const kn_tuning *t = kn_config_tuning();
    int64_t P = rec->dst.dims[0] * rec->dst.dims[2] * rec->dst.dims[3], O = rec->wei.dims[0], C = rec->wei.dims[1];
    return (kn_dnnl_has_sum(rec) && P * O * 4 >= t->pw_min_sum_bytes) ||
           (P <= t->pw_max_pixels && O * C * 4 >= t->pw_min_filter_bytes);
}

static bool pw_worth(kn_dnnl_session *s, const kn_abi_dnnl *rec, int threads)
{
    (void)s, (void)threads;
    return kn_pw_worth(rec);
}

static int pw_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                     dnnl_primitive_attr_t attr)
{
    (void)attr;
    kn_pw *k = NULL;
    int st = kn_pw_create(rec, weights, &k);
    if (!st) p->state = k;
    return kn_dnnl_pw_made(s, rec, p, st);
}

/* A residual that overlaps dst other than exactly is copied aside first. */
static int pw_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                  const void *post_src, int threads)
{
    (void)wei;
    if (post_src && post_src != dst && kn_dnnl_overlap(post_src, p->dst_bytes, dst, p->dst_bytes)) {
        int rc = kn_dnnl_copy_parallel(s->act[1], post_src, p->dst_bytes, threads);
        if (rc) return rc;
        post_src = s->act[1];
    }
    return kn_pw_exec_rows(p->state, s->rows, src, bias, dst, post_src, threads);
}

static void pw_free(void *state) { kn_pw_free(state); }

/* kiln's kernels that split their work at each run keep any thread count. */
static bool splits_each_run(const kn_dnnl_prim *p, int threads)
{
    (void)p, (void)threads;
    return true;
}

static const char *pw_impl(const kn_dnnl_prim *p)
{
    (void)p;
    return "kiln 1x1:avx512";
}

static const char *pw_matmul_impl(const kn_dnnl_prim *p)
{
    (void)p;
    return "kiln matmul:avx512";
}

/* A matmul on kiln's kernel splits its work at each run, but whether the
 * kernel is the one to take depends on the thread count (the tuning
 * table's 1-thread threshold): another count rebuilds it unless the choice
 * stays the same. */
static bool pw_matmul_keeps(const kn_dnnl_prim *p, int threads)
{
    return kn_pw_matmul_wanted(&p->rec, threads);
}

/* The same kernel for matmul records (matmul.c picks it). */
const kn_dnnl_algo kn_dnnl_algo_pw_matmul = {
    .id = KN_ALGO_POINTWISE,
    .dtype = KN_F32,
    .run = pw_run,
    .free = pw_free,
    .keeps = pw_matmul_keeps,
    .impl = pw_matmul_impl,
};

/* ---- stem (kiln's first-convolution kernel, AVX-512) ----------------------- */

static bool stem_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    return rec->conv_algo != KN_CONV_ALGO_DIRECT && rec->compute == KN_DT_UNDEFINED &&
           rec->src_layout == KN_LAYOUT_PLAIN && rec->dst_layout == KN_LAYOUT_NATIVE && kn_dnnl_native_block(s) == 0 &&
           kn_stem_supported(rec);
}

static int stem_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                       dnnl_primitive_attr_t attr)
{
    (void)s, (void)attr;
    kn_stem *k = NULL;
    int st = kn_stem_create(rec, weights, &k);
    if (!st) p->state = k;
    return st;
}

static int stem_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                    const void *post_src, int threads)
{
    (void)s, (void)wei, (void)post_src;
    return kn_stem_exec(p->state, src, bias, dst, threads);
}

static void stem_free(void *state) { kn_stem_free(state); }

static const char *stem_impl(const kn_dnnl_prim *p)
{
    (void)p;
    return "kiln stem:avx512";
}

/* ---- stem, int8 (kiln's int8 first-convolution kernel, AVX-512 VNNI) ------- */

/* An int8 record's constant weights, bias (NULL: none) and output scales. */
static int q8_consts(const kn_abi_dnnl *rec, const unsigned char *weights, const void **w, const void **b,
                     const void **sc)
{
    int st;
    *b = NULL;
    if ((st = kn_dnnl_const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", w)) ||
        (kn_dnnl_has_bias(rec) && (st = kn_dnnl_const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", b))))
        return st;
    return kn_dnnl_const_ptr(&rec->scale_ref, weights, (int64_t)rec->n_scale * 4, "output scales", sc);
}

static bool qstem_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    (void)s;
    return rec->conv_algo != KN_CONV_ALGO_DIRECT && rec->src_layout == KN_LAYOUT_PLAIN &&
           rec->dst_layout == KN_LAYOUT_NATIVE && kn_qstem_supported(rec);
}

static int qstem_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                        dnnl_primitive_attr_t attr)
{
    (void)s, (void)attr;
    const void *w, *b, *sc;
    int st = q8_consts(rec, weights, &w, &b, &sc);
    if (st) return st;
    kn_qstem *k = NULL;
    st = kn_qstem_create(rec, w, b, sc, &k);
    if (!st) p->state = k;
    return st;
}

static int qstem_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                     const void *post_src, int threads)
{
    (void)s, (void)wei, (void)bias, (void)post_src;
    return kn_qstem_exec(p->state, src, dst, threads);
}

static void qstem_free(void *state) { kn_qstem_free(state); }

static const char *qstem_impl(const kn_dnnl_prim *p)
{
    (void)p;
    return "kiln stem:avx512_vnni";
}

/* ---- depthwise (kiln's int8 depthwise 3x3 kernel, AVX-512 VNNI) ----------- */

static bool dw8_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    (void)s;
    return rec->conv_algo != KN_CONV_ALGO_DIRECT && rec->src_layout == KN_LAYOUT_NATIVE &&
           rec->dst_layout == KN_LAYOUT_NATIVE && kn_dw8_supported(rec);
}

static bool dw8_worth(kn_dnnl_session *s, const kn_abi_dnnl *rec, int threads)
{
    (void)s, (void)threads;
    return kn_dw8_worth(rec);
}

static int dw8_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                      dnnl_primitive_attr_t attr)
{
    (void)s, (void)attr;
    const void *w, *b, *sc;
    int st = q8_consts(rec, weights, &w, &b, &sc);
    if (st) return st;
    kn_dw8 *k = NULL;
    st = kn_dw8_create(rec, w, b, sc, &k);
    if (!st) p->state = k;
    return st;
}

static int dw8_run(kn_dnnl_session *s, kn_dnnl_prim *p, void *src, const void *wei, const void *bias, void *dst,
                   const void *post_src, int threads)
{
    (void)s, (void)wei, (void)bias, (void)post_src;
    return kn_dw8_exec(p->state, src, dst, threads);
}

static void dw8_free(void *state) { kn_dw8_free(state); }

static const char *dw8_impl(const kn_dnnl_prim *p)
{
    (void)p;
    return "kiln dw3x3:avx512_vnni";
}

/* ---- oneDNN: matmul for plain 1x1, direct convolution --------------------- */

static bool matmul_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    (void)s;
    return rec->src_layout == KN_LAYOUT_PLAIN && rec->dst_layout == KN_LAYOUT_PLAIN &&
           rec->post_layout == KN_LAYOUT_PLAIN && kn_dnnl_is_pointwise(rec);
}

bool kn_dnnl_any_record(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    (void)s, (void)rec;
    return true;
}

bool kn_dnnl_always_worth(kn_dnnl_session *s, const kn_abi_dnnl *rec, int threads)
{
    (void)s, (void)rec, (void)threads;
    return true;
}

void kn_dnnl_window_dims(const kn_abi_dnnl *rec, dnnl_dims_t sd, dnnl_dims_t dd, dnnl_dims_t strides,
                         dnnl_dims_t dil, dnnl_dims_t pl, dnnl_dims_t pr)
{
    for (int i = 0; i < rec->spatial + 2; i++) sd[i] = rec->src.dims[i], dd[i] = rec->dst.dims[i];
    for (int i = 0; i < rec->spatial; i++) {
        strides[i] = rec->strides[i];
        dil[i] = rec->dilations[i] - 1; /* oneDNN counts the holes */
        pl[i] = rec->pads_begin[i];
        pr[i] = rec->pads_end[i];
    }
}

/* oneDNN's convolution, activations in the record's layouts (reordered
 * around it where oneDNN wants others). An int8 record's zero points
 * moved by zp_fold_create: `folded` is the bias that holds some, in place
 * of the record's, and qdq_shift what its last QDQ post-op adds. */
static int direct_build(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                        dnnl_primitive_attr_t attr, const float *folded, float qdq_shift)
{
    int sp = rec->spatial, nd = sp + 2, st;
    int64_t g = rec->groups, O = rec->wei.dims[0];
    dnnl_dims_t sd, wd, dd, strides, dil, pl, pr, bd;
    kn_dnnl_window_dims(rec, sd, dd, strides, dil, pl, pr);
    /* ONNX [O, C/g, k..] is the same bytes as oneDNN's goi(d)hw [g, O/g, C/g, k..] */
    int wnd = g > 1 ? nd + 1 : nd;
    if (g > 1) {
        wd[0] = g, wd[1] = O / g;
        for (int i = 1; i < nd; i++) wd[i + 1] = rec->wei.dims[i];
    } else {
        for (int i = 0; i < nd; i++) wd[i] = rec->wei.dims[i];
    }
    /* an int8 record: u8/s8 src, s8 weights, f32 bias, u8/s8/f32 dst; the
     * residual has dst's type (oneDNN's sum reads it from dst). bf16
     * autocast: the kernel's src and weights are bf16, reordered from the
     * caller's f32 (the weights once) */
    bool bf16 = rec->compute == KN_BF16;
    dnnl_data_type_t sdt = kn_dnnl_dt(rec->src.dtype), wdt = kn_dnnl_dt(rec->wei.dtype);
    dnnl_data_type_t kdt = bf16 ? dnnl_bf16 : wdt;
    dnnl_data_type_t ddt = kn_dnnl_dt(rec->dst.dtype);
    dnnl_memory_desc_t src_md, dst_md, post_md, wei_user, wei_any, bias_md;
    dnnl_dims_t wst;
    kn_dnnl_plain_strides(wnd, wd, wst);
    if ((st = kn_dnnl_act_md(s, rec->src_layout, rec->src.dtype, &src_md, nd, sd, "the conv src")) ||
        (st = kn_dnnl_act_md(s, rec->dst_layout, rec->dst.dtype, &dst_md, nd, dd, "the conv dst")) ||
        (st = kn_dnnl_act_md(s, rec->post_layout, rec->dst.dtype, &post_md, nd, dd, "the conv residual")))
        return st;
    KN_DN(dnnl_memory_desc_init_by_strides(&wei_user, wnd, wd, wdt, wst), "describing the conv weights");
    KN_DN(dnnl_memory_desc_init_by_tag(&wei_any, wnd, wd, kdt, dnnl_format_tag_any), "describing the conv weights");
    /* oneDNN's direct kernels want blocked activations (nChw16c; NHWC for
     * int8); plain NCHW would get the im2col+GEMM path, several times slower */
    dnnl_memory_desc_t src_any, dst_any;
    KN_DN(dnnl_memory_desc_init_by_tag(&src_any, nd, sd, bf16 ? dnnl_bf16 : sdt, dnnl_format_tag_any),
          "describing the conv src");
    KN_DN(dnnl_memory_desc_init_by_tag(&dst_any, nd, dd, ddt, dnnl_format_tag_any), "describing the conv dst");
    bool hb = folded || kn_dnnl_has_bias(rec);
    if (folded) {
        bd[0] = O;
        if ((st = kn_dnnl_plain_md(&bias_md, 1, bd, "describing the conv bias"))) return st;
    } else if (hb) {
        if ((st = kn_dnnl_check_tensor(&rec->bias, "conv bias", 1, 1))) return st;
        if (rec->bias.dims[0] != O)
            return kn_error(KN_ERR_INVALID, "oneDNN conv: bias has %lld values, expected %lld",
                            (long long)rec->bias.dims[0], (long long)O);
        bd[0] = O;
        if ((st = kn_dnnl_plain_md(&bias_md, 1, bd, "describing the conv bias"))) return st;
    }
    const void *wconst, *bconst = NULL;
    if ((st = kn_dnnl_const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &wconst))) return st;
    if (folded)
        bconst = folded;
    else if (hb && (st = kn_dnnl_const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &bconst)))
        return st;
    p->has_bias = hb;
    p->bias_const = hb ? bconst : NULL;
    p->bias_arg = DNNL_ARG_BIAS;
    dnnl_convolution_desc_t cd;
    KN_DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src_any,
                                                     &wei_any, hb ? &bias_md : NULL, &dst_any, strides, dil, pl, pr),
          "describing the convolution");
    if (kn_dnnl_is_int8(rec)) {
        /* the sum reads the residual with its own scale and zero point:
         * always a sum post-op (a binary add has neither) */
        if ((st = kn_dnnl_set_int8_attr(rec, weights, attr, O, 1)) ||
            (st = kn_dnnl_set_post_ops_qdq_shift(rec, attr, qdq_shift, &p->has_sum)))
            return st;
    } else if ((st = kn_dnnl_set_residual_post_ops(s, p, rec, &cd, attr,
                                                   rec->post_layout == rec->dst_layout ? &post_md : NULL, &p->has_sum))) {
        return st;
    }
    return kn_dnnl_finish_prim(s, p, &cd, attr, &src_md, &wei_user, hb ? &bias_md : NULL, &dst_md, &post_md, wconst,
                               "creating the convolution");
}

static int direct_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                         dnnl_primitive_attr_t attr)
{
    return direct_build(s, rec, weights, p, attr, NULL, 0.f);
}

/* ---- zp_fold: an int8 conv's zero points in its bias ------------------- */

/* Which zero points of rec can move out of oneDNN's hands, and where to.
 *
 * The source's, where no window reaches past the image: every product of
 * the zero point with a weight is then in the sum, so that
 *     sum (x - zx) w = sum x w - zx * sum w,
 * and the second term, one constant per output channel, joins the bias
 * (which is in accumulator units). A padded window would count zx at the
 * pad.
 *
 * The destination's, and those of the residual sums after the last
 * post-op that is not linear: a constant c = zy - sum(a zr) in output
 * units, added where that post-op leaves off,
 *     ... + a (R - zr) + zy = ... + c + a R.
 * With no such post-op (MobileNet's projections), c / S joins the bias; a
 * QDQ post-op (a projection quantized before its residual Add) adds c in
 * its scaling; after any other, they stay. The rounding then sees c added
 * before it rather than after: they differ only at an exact tie.
 *
 * oneDNN runs faster without them: on CPUs with AMX its 1x1 convolutions
 * take the AMX kernel, which refuses any of the three. */
typedef struct zp_plan {
    bool src;   /* the source's zero point into the bias */
    bool out;   /* the destination's and the residuals' from post-op `from` on */
    bool shift; /* ... into the QDQ post-op from - 1 (else the bias) */
    int from;
} zp_plan;

static bool zp_foldable(const kn_abi_dnnl *rec, zp_plan *z)
{
    *z = (zp_plan){0};
    if (!kn_dnnl_is_int8(rec) || rec->dst.dtype == KN_F32 || rec->n_post < 0 || rec->n_post > 4 ||
        (kn_dnnl_has_bias(rec) && rec->bias_ref.loc != KN_LOC_WEIGHTS))
        return false;
    if (rec->src_zp && rec->wei_ref.loc == KN_LOC_WEIGHTS) {
        z->src = true;
        for (int i = 0; i < rec->spatial; i++)
            if (rec->pads_begin[i] || rec->pads_end[i]) z->src = false;
    }
    int qdq = 0;
    for (int i = 0; i < rec->n_post; i++) {
        int k = rec->post[i].kind;
        qdq += k == KN_POST_QDQ_U8 || k == KN_POST_QDQ_S8;
        if (k != KN_POST_SUM && k != KN_POST_NONE) z->from = i + 1;
    }
    int last = z->from - 1;
    z->shift = last >= 0;
    /* one QDQ post-op: oneDNN 2.6 would run a second one's scaling with the
     * first one's parameters (postops.c) */
    bool where = last < 0 ? rec->scale_ref.loc == KN_LOC_WEIGHTS
                          : qdq == 1 && (rec->post[last].kind == KN_POST_QDQ_U8 || rec->post[last].kind == KN_POST_QDQ_S8);
    bool any = rec->dst_zp != 0;
    for (int i = z->from; i < rec->n_post; i++) {
        const kn_abi_post *p = &rec->post[i];
        if (p->kind != KN_POST_SUM) continue;
        if (!isfinite(p->alpha) || p->beta != (float)(int32_t)p->beta) return z->src; /* kn_dnnl_set_post_ops refuses it */
        any |= p->beta != 0;
    }
    z->out = where && any;
    return z->src || z->out;
}

static bool zp_fold_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    (void)s;
    zp_plan z;
    return zp_foldable(rec, &z);
}

static int zp_fold_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights,
                          kn_dnnl_prim *p, dnnl_primitive_attr_t attr)
{
    zp_plan z;
    zp_foldable(rec, &z);
    int64_t O = rec->wei.dims[0], per = O > 0 ? rec->wei.nbytes / O : 0;
    const void *w = NULL, *b = NULL, *sc = NULL;
    int st = KN_OK;
    bool to_bias = z.src || (z.out && !z.shift);
    if (z.out && !z.shift) st = kn_dnnl_const_ptr(&rec->scale_ref, weights, (int64_t)rec->n_scale * 4, "output scales", &sc);
    if (!st && z.src) st = kn_dnnl_const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "weights", &w);
    if (!st && to_bias && kn_dnnl_has_bias(rec)) {
        if (rec->bias.dtype != KN_F32 || rec->bias.nbytes != O * 4)
            return kn_error(KN_ERR_INVALID, "oneDNN conv: an int8 bias of %lld bytes for %lld channels",
                            (long long)rec->bias.nbytes, (long long)O);
        st = kn_dnnl_const_ptr(&rec->bias_ref, weights, rec->bias.nbytes, "bias", &b);
    }
    if (st) return st;
    if (O < 1 || per < 1 || per * O != rec->wei.nbytes || (rec->n_scale != 1 && rec->n_scale != O))
        return kn_error(KN_ERR_INVALID, "oneDNN conv: %lld weight bytes and %d scales for %lld output channels",
                        (long long)rec->wei.nbytes, rec->n_scale, (long long)O);
    const float *scale = sc;
    for (int32_t i = 0; sc && i < rec->n_scale; i++)
        if (!isnormal(scale[i])) z.out = false; /* c / S would not be finite */
    if (!z.src && !z.out) return KN_ERR_UNSUPPORTED; /* the next row: oneDNN's own zero points */
    kn_abi_dnnl q = *rec;
    double c = 0; /* output units */
    if (z.out) {
        c = rec->dst_zp;
        q.dst_zp = 0;
        for (int i = z.from; i < rec->n_post; i++)
            if (rec->post[i].kind == KN_POST_SUM) {
                c -= (double)rec->post[i].alpha * rec->post[i].beta;
                q.post[i].beta = 0;
            }
    }
    float *folded = NULL;
    if (z.src || !z.shift) {
        folded = kn_dnnl_alloc((size_t)O * sizeof(float));
        if (!folded) return kn_error(KN_ERR_NOMEM, "out of memory");
        const int8_t *w8 = w;
        for (int64_t o = 0; o < O; o++) {
            double v = b ? ((const float *)b)[o] : 0.0;
            if (z.src) {
                int64_t sum = 0;
                for (int64_t i = 0; i < per; i++) sum += w8[o * per + i];
                v -= (double)rec->src_zp * (double)sum;
            }
            if (z.out && !z.shift) v += c / scale[rec->n_scale == 1 ? 0 : o];
            folded[o] = (float)v;
        }
        if (z.src) q.src_zp = 0;
    }
    st = direct_build(s, &q, weights, p, attr, folded, z.out && z.shift ? (float)c : 0.f);
    if (st) {
        free(folded);
        return st;
    }
    p->state = folded;
    return KN_OK;
}

/* ---- thin: a k x 1 conv over width-1 images as a 1-D conv ---------------- */

/* The spatial dim (0: H, 1: W) a 2-D conv can drop: size 1 in the input,
 * the output and the kernel, no padding along it; -1 for none (or a 1x1
 * conv, which the 1x1 rows take). Its activations, in any of the session's
 * layouts (NCHW, nChw8c/16c, NHWC), are then the same bytes as those of
 * the 1-D conv along the other dim (NCW, nCw8c/16c, NWC). */
int kn_dnnl_thin_dim(const kn_abi_dnnl *rec)
{
    if (rec->kind != KN_DNNL_CONV || rec->spatial != 2 || kn_dnnl_is_pointwise(rec)) return -1;
    for (int d = 1; d >= 0; d--)
        if (rec->src.dims[2 + d] == 1 && rec->dst.dims[2 + d] == 1 && rec->wei.dims[2 + d] == 1 &&
            rec->pads_begin[d] == 0 && rec->pads_end[d] == 0)
            return d;
    return -1;
}

static bool thin_supports(kn_dnnl_session *s, const kn_abi_dnnl *rec)
{
    (void)s;
    return rec->conv_algo != KN_CONV_ALGO_DIRECT && kn_dnnl_thin_dim(rec) >= 0;
}

/* oneDNN's 2-D kernels block along the output width: over a width-1 image
 * one output per block (Zen 3, a 5x1 conv of 256 channels over 64 rows:
 * 19 GFLOP/s in 2-D, 52-58 as 1-D; the tuning table's thin_min_height).
 * Height-1 rows are blocked well either way. */
static bool thin_worth(kn_dnnl_session *s, const kn_abi_dnnl *rec, int threads)
{
    (void)s, (void)threads;
    return kn_dnnl_thin_dim(rec) == 1 && rec->dst.dims[2] >= kn_config_tuning()->thin_min_height;
}

/* The record as a 1-D conv: the thin dim dropped from every tensor and
 * every window field. */
static void thin_record(const kn_abi_dnnl *rec, int drop, kn_abi_dnnl *out)
{
    *out = *rec;
    out->spatial = 1;
    int keep = 1 - drop;
    kn_abi_tensor *ts[3] = {&out->src, &out->wei, &out->dst};
    for (int i = 0; i < 3; i++) {
        ts[i]->rank = 3;
        ts[i]->dims[2] = ts[i]->dims[2 + keep];
        ts[i]->dims[3] = 0;
    }
    out->strides[0] = rec->strides[keep], out->dilations[0] = rec->dilations[keep];
    out->pads_begin[0] = rec->pads_begin[keep], out->pads_end[0] = rec->pads_end[keep];
    for (int i = 1; i < 3; i++) out->strides[i] = out->dilations[i] = 1, out->pads_begin[i] = out->pads_end[i] = 0;
}

static int direct_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                         dnnl_primitive_attr_t attr);

static int thin_create(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                       dnnl_primitive_attr_t attr)
{
    kn_abi_dnnl one;
    thin_record(rec, kn_dnnl_thin_dim(rec), &one);
    int st = direct_create(s, &one, weights, p, attr);
    if (!st) {
        char impl[sizeof p->impl];
        snprintf(impl, sizeof impl, "1-D %s", p->impl);
        memcpy(p->impl, impl, sizeof impl);
    }
    return st;
}

static const kn_dnnl_algo WINOGRAD = {KN_ALGO_WINOGRAD, KN_F32,    wino_supports, wino_worth, wino_create,
                                      wino_run,         wino_free, wino_keeps,    wino_impl};
static const kn_dnnl_algo POINTWISE = {KN_ALGO_POINTWISE, KN_F32,   pw_supports, pw_worth, pw_create, pw_run,
                                       pw_free,           splits_each_run, pw_impl};
static const kn_dnnl_algo STEM = {KN_ALGO_STEM, KN_F32,    stem_supports, kn_dnnl_always_worth, stem_create,
                                  stem_run,     stem_free, splits_each_run,    stem_impl};
static const kn_dnnl_algo THIN = {KN_ALGO_THIN, KN_F32, thin_supports, thin_worth, thin_create, NULL, NULL, NULL, NULL};
static const kn_dnnl_algo MATMUL = {KN_ALGO_MATMUL, KN_F32, matmul_supports, kn_dnnl_always_worth, matmul_create, NULL, NULL,
                                    NULL,           NULL};
static const kn_dnnl_algo DIRECT = {KN_ALGO_DIRECT, KN_F32, kn_dnnl_any_record, kn_dnnl_always_worth, direct_create,
                                    NULL,           NULL,   NULL,       NULL};
/* bf16 autocast (kn_abi_dnnl.compute): oneDNN's convolution in bf16 */
static const kn_dnnl_algo DIRECT_BF16 = {KN_ALGO_DIRECT, KN_BF16, kn_dnnl_any_record, kn_dnnl_always_worth,
                                         direct_create,  NULL,    NULL,               NULL,
                                         NULL};
/* int8 (kiln::QConv): kiln's first-convolution and depthwise 3x3 kernels
 * where they run the record (the depthwise one where it is worth it), else
 * oneDNN's convolution with u8 or s8 activations, its zero points moved out
 * first where that is exact (zp_fold) */
static const kn_dnnl_algo ZP_FOLD_U8 = {KN_ALGO_DIRECT, KN_U8, zp_fold_supports, kn_dnnl_always_worth,
                                        zp_fold_create, NULL,  free,             NULL,
                                        NULL};
static const kn_dnnl_algo ZP_FOLD_S8 = {KN_ALGO_DIRECT, KN_I8, zp_fold_supports, kn_dnnl_always_worth,
                                        zp_fold_create, NULL,  free,             NULL,
                                        NULL};
static const kn_dnnl_algo STEM_U8 = {KN_ALGO_STEM, KN_U8,      qstem_supports, kn_dnnl_always_worth,
                                     qstem_create, qstem_run,  qstem_free,     splits_each_run,
                                     qstem_impl};
static const kn_dnnl_algo DEPTHWISE_U8 = {KN_ALGO_DEPTHWISE, KN_U8,    dw8_supports, dw8_worth,
                                          dw8_create,        dw8_run,  dw8_free,     splits_each_run,
                                          dw8_impl};
static const kn_dnnl_algo DIRECT_U8 = {KN_ALGO_DIRECT, KN_U8, kn_dnnl_any_record, kn_dnnl_always_worth, direct_create,
                                       NULL,           NULL,  NULL,       NULL};
static const kn_dnnl_algo DIRECT_S8 = {KN_ALGO_DIRECT, KN_I8, kn_dnnl_any_record, kn_dnnl_always_worth, direct_create,
                                       NULL,           NULL,  NULL,       NULL};

/* The table, in the order rows are tried. */
static const kn_dnnl_algo *const ALGOS[] = {&WINOGRAD, &POINTWISE, &STEM, &kn_dnnl_algo_im2col, &THIN, &MATMUL, &DIRECT,
                                             &DIRECT_BF16, &STEM_U8, &DEPTHWISE_U8, &ZP_FOLD_U8, &ZP_FOLD_S8, &DIRECT_U8, &DIRECT_S8};

/* Whether row a may run a conv with KILN_CONV_ALGO as it is, and whether
 * it must first be worth it. */
static bool row_allowed(const kn_dnnl_algo *a, kn_conv_algo forced, bool *ask_worth)
{
    *ask_worth = true;
    switch (forced) {
    case KN_ALGO_AUTO:
    case KN_ALGO_XDW: return true;
    case KN_ALGO_DNNL: return a->id == KN_ALGO_MATMUL || a->id == KN_ALGO_DIRECT;
    default: *ask_worth = false; return a->id == forced || a->id == KN_ALGO_DIRECT;
    }
}

/* Checks what every row relies on: shapes that agree, sane geometry. */
static int check_conv(const kn_abi_dnnl *rec)
{
    int sp = rec->spatial, nd = sp + 2;
    int st;
    if (sp < 1 || sp > 3) return kn_error(KN_ERR_UNSUPPORTED, "oneDNN conv: %d spatial dims (1..3 supported)", sp);
    if ((st = kn_dnnl_check_tensor(&rec->src, "conv src", nd, nd)) ||
        (st = kn_dnnl_check_tensor(&rec->wei, "conv weights", nd, nd)) ||
        (st = kn_dnnl_check_tensor(&rec->dst, "conv dst", nd, nd)))
        return st;
    bool q = kn_dnnl_is_int8(rec);
    bool float_ok = rec->src.dtype == KN_F32 && rec->wei.dtype == KN_F32 && rec->dst.dtype == KN_F32;
    bool int8_ok = (rec->src.dtype == KN_U8 || rec->src.dtype == KN_I8) && rec->wei.dtype == KN_I8;
    if (q ? !int8_ok : !float_ok)
        return kn_error(KN_ERR_INVALID, "oneDNN conv: src %s, weights %s, dst %s in a%s record",
                        kn_dtype_name(rec->src.dtype), kn_dtype_name(rec->wei.dtype), kn_dtype_name(rec->dst.dtype),
                        q ? "n int8" : " float");
    int64_t g = rec->groups, C = rec->src.dims[1], O = rec->wei.dims[0];
    if (g < 1 || C % g || O % g || rec->wei.dims[1] * g != C || rec->dst.dims[1] != O ||
        rec->dst.dims[0] != rec->src.dims[0])
        return kn_error(KN_ERR_INVALID,
                        "oneDNN conv: groups %lld, src channels %lld, weights [%lld, %lld, ..], dst channels %lld "
                        "do not agree",
                        (long long)g, (long long)C, (long long)O, (long long)rec->wei.dims[1],
                        (long long)rec->dst.dims[1]);
    for (int i = 0; i < sp; i++) {
        if (rec->strides[i] < 1 || rec->dilations[i] < 1 || rec->pads_begin[i] < 0 || rec->pads_end[i] < 0)
            return kn_error(KN_ERR_INVALID, "oneDNN conv: spatial dim %d: stride %lld, dilation %lld, pads %lld/%lld",
                            i, (long long)rec->strides[i], (long long)rec->dilations[i],
                            (long long)rec->pads_begin[i], (long long)rec->pads_end[i]);
    }
    return KN_OK;
}

int kn_dnnl_create_conv(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                        dnnl_primitive_attr_t attr)
{
    int st = check_conv(rec);
    if (st) return st;
    kn_conv_algo forced = kn_config_conv_algo();
    for (size_t i = 0; i < sizeof ALGOS / sizeof *ALGOS; i++) {
        const kn_dnnl_algo *a = ALGOS[i];
        bool ask_worth;
        if (a->dtype != kn_dnnl_compute_dtype(rec) || !row_allowed(a, forced, &ask_worth) || !a->supports(s, rec) ||
            (ask_worth && !a->worth(s, rec, p->nthr)))
            continue;
        kn_dnnl_prim keep = *p;
        st = a->create(s, rec, weights, p, attr);
        if (st == KN_OK) p->algo = a;
        if (st != KN_ERR_UNSUPPORTED) return st;
        /* not after all (oneDNN has no optimized kernel for it): the next row */
        kn_dnnl_prim_clear(p);
        p->kind = keep.kind, p->rec = keep.rec, p->weights = keep.weights, p->nthr = keep.nthr;
        kn_error_clear();
    }
    return kn_error(KN_ERR_UNSUPPORTED, "oneDNN conv: no algorithm runs this convolution");
}
