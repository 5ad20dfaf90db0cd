/*
 * runtime/src/dnnl/dynconv.c — convolutions and poolings whose spatial dims
 * are dynamic (`kiln compile --shape x=1x3x[32..640%32]x[32..640%32]`), run
 * through oneDNN with primitives created for the run-time shape.
 *
 * The compiler emits kn_rt_dynconv_exec for a Conv, kiln::FusedConv,
 * MaxPool or AveragePool node whose dynamic dims do not let it run in rows
 * (codegen/cpu/dyn.h). Its activations are plain NCHW in the arena, or
 * NHWC where the compiler made two such nodes exchange them channels-last
 * (kn_abi_opnode.nhwc: oneDNN's kernels want NHWC on AVX-512, and NCHW
 * cost a reorder on each side of every node). Per node
 * the session keeps up to DC_WAYS primitives, one per input shape (least
 * recently used replaced), each with its scratchpad and with src/dst
 * reorders to and from the layout oneDNN prefers for that shape. A conv's
 * weights are reordered once per weights layout oneDNN asks for (usually
 * one for every shape) and shared by that node's primitives. Everything
 * is created on the first run at a shape; later runs at it only execute.
 *
 * A 3x3 stride-1 convolution runs kiln's Winograd kernel where the cost
 * model of conv.c's table picks it for the run's shape, as a compiled
 * shape's does (kernels/x86/f32_winograd_3x3_avx2_avx512.c): the filter
 * transformed once per node, a view of it per shape, the activations
 * reordered to and from NHWC around it. A CRNN's convolutions at a
 * run-time width ran oneDNN's direct kernel at the FMA peak and 1.03x
 * onnxruntime's time where the pinned model runs Winograd at 0.6x.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dnnl.h>

#include "bigmem.h"
#include "dnnl_int.h"
#include "fused_int.h"
#include "nn_int.h"

#define DC_WAYS 4 /* shapes kept per node */
#define DC_WEI 2  /* weights layouts kept per node */

typedef struct dc_prim {
    int64_t key[4]; /* src N, C, H, W; key[0] 0: empty */
    int nthr;
    uint64_t used;
    prim_run main, src_ro, dst_ro, res_ro;
    dnnl_memory_t m_src, m_dst, m_src_user, m_dst_user, m_res_user, m_wei, m_bias;
    void *src_buf, *dst_buf; /* in oneDNN's layout (NULL: the user's buffer is used) */
    bool has_sum;
    int wei;     /* index into dc_node.wei, -1: a pooling or Winograd */
    kn_wino *wv; /* Winograd at this shape (a view of dc_node.wino), else NULL */
    char impl[48]; /* oneDNN's implementation, for kiln profile ("": Winograd's, named by its tile) */
} dc_prim;

typedef struct dc_wei {
    dnnl_memory_desc_t md;
    void *buf;
    const void *from; /* the user's weights it was reordered from */
} dc_wei;

typedef struct dc_node {
    dc_prim p[DC_WAYS];
    dc_wei wei[DC_WEI];
    int n_wei;
    kn_wino *wino;         /* the transformed filter, or NULL */
    const void *wino_from; /* the weights it was transformed from */
    uint64_t clock;
} dc_node;

struct kn_dynconv {
    int n;
    dc_node **nodes;
};

static void prim_free(dc_prim *p)
{
    kn_dnnl_run_free(&p->main);
    kn_dnnl_run_free(&p->src_ro);
    kn_dnnl_run_free(&p->dst_ro);
    kn_dnnl_run_free(&p->res_ro);
    dnnl_memory_t *mems[] = {&p->m_src, &p->m_dst, &p->m_src_user, &p->m_dst_user, &p->m_res_user, &p->m_wei,
                             &p->m_bias};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (*mems[i]) dnnl_memory_destroy(*mems[i]);
    kn_big_free(p->src_buf);
    kn_big_free(p->dst_buf);
    kn_wino_free(p->wv);
    memset(p, 0, sizeof *p);
}

void kn_dynconv_free(kn_dynconv *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) {
        dc_node *n = c->nodes[i];
        if (!n) continue;
        for (int k = 0; k < DC_WAYS; k++) prim_free(&n->p[k]); /* the Winograd views before their filter */
        kn_wino_free(n->wino);
        for (int k = 0; k < n->n_wei; k++) kn_big_free(n->wei[k].buf);
        free(n);
    }
    free(c->nodes);
    free(c);
}

/* A plain (NCHW, OIHW, GOIHW, O) descriptor. */
static int plain(dnnl_memory_desc_t *md, int nd, const int64_t *dims, const char *what)
{
    dnnl_dims_t d;
    for (int i = 0; i < nd; i++) d[i] = dims[i];
    return kn_dnnl_plain_md(md, nd, d, what);
}

/* The descriptor of an activation as the node exchanges it: channels-last
 * where the compiler said so (kn_abi_opnode.nhwc), else plain NCHW. */
static int user_md(dnnl_memory_desc_t *md, const int64_t *dims, bool nhwc, const char *what)
{
    if (!nhwc) return plain(md, 4, dims, what);
    dnnl_dims_t d = {dims[0], dims[1], dims[2], dims[3]};
    if (dnnl_memory_desc_init_by_tag(md, 4, d, dnnl_f32, dnnl_acdb) != dnnl_success)
        return kn_error(KN_ERR_INTERNAL, "oneDNN: an NHWC %s descriptor", what);
    return KN_OK;
}

static int mem(kn_dnnl_session *s, const dnnl_memory_desc_t *md, void *data, dnnl_memory_t *out)
{
    KN_DN(dnnl_memory_create(out, md, s->engine, data ? data : DNNL_MEMORY_NONE), "creating a memory");
    return KN_OK;
}

/* user ↔ oneDNN's layout: a reorder and the buffer in oneDNN's layout,
 * unless the two are the same (then *buf stays NULL). */
static int side(kn_dnnl_session *s, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *prim, bool to_prim,
                prim_run *ro, void **buf, dnnl_memory_t *m_user, dnnl_memory_t *m_prim)
{
    int st = mem(s, user, NULL, m_user);
    if (st) return st;
    if (dnnl_memory_desc_equal(user, prim)) return mem(s, prim, NULL, m_prim);
    size_t n = dnnl_memory_desc_get_size(prim);
    if (!(*buf = kn_big_alloc(n))) return kn_error(KN_ERR_NOMEM, "out of memory");
    st = mem(s, prim, *buf, m_prim);
    if (!st) st = to_prim ? kn_dnnl_make_reorder(s, user, prim, ro, "reordering src")
                          : kn_dnnl_make_reorder(s, prim, user, ro, "reordering dst");
    return st;
}

/* The conv's weights in layout md, reordered once from the user's (plain). */
static int weights_for(kn_dnnl_session *s, dc_node *n, const dnnl_memory_desc_t *md, const dnnl_memory_desc_t *user,
                       const void *from, int *out)
{
    for (int k = 0; k < n->n_wei; k++)
        if (n->wei[k].from == from && dnnl_memory_desc_equal(&n->wei[k].md, md)) {
            *out = k;
            return KN_OK;
        }
    int k = n->n_wei < DC_WEI ? n->n_wei++ : DC_WEI - 1; /* the last layout is replaced */
    if (k == DC_WEI - 1 && n->wei[k].buf) {
        /* no primitive may keep using it */
        for (int j = 0; j < DC_WAYS; j++)
            if (n->p[j].key[0] && n->p[j].wei == k) prim_free(&n->p[j]);
        kn_big_free(n->wei[k].buf);
        n->wei[k].buf = NULL;
    }
    size_t bytes = dnnl_memory_desc_get_size(md);
    void *buf = kn_big_alloc(bytes);
    if (!buf) return kn_error(KN_ERR_NOMEM, "out of memory");
    prim_run ro = {0};
    dnnl_memory_t mu = NULL, mp = NULL;
    int st = mem(s, user, (void *)from, &mu);
    if (!st) st = mem(s, md, buf, &mp);
    if (!st) st = kn_dnnl_make_reorder(s, user, md, &ro, "reordering weights");
    if (!st) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, mu}, {DNNL_ARG_TO, mp}};
        st = kn_dnnl_run_exec(s, &ro, args, 2, "reordering weights");
        if (!st && dnnl_stream_wait(s->stream) != dnnl_success) st = kn_error(KN_ERR_INTERNAL, "oneDNN stream wait");
    }
    kn_dnnl_run_free(&ro);
    if (mu) dnnl_memory_destroy(mu);
    if (mp) dnnl_memory_destroy(mp);
    if (st) {
        kn_big_free(buf);
        if (k == n->n_wei - 1) n->n_wei--;
        return st;
    }
    n->wei[k] = (dc_wei){.md = *md, .buf = buf, .from = from};
    *out = k;
    return KN_OK;
}

/* The primitive descriptor of a conv (FusedConv's post-ops in attr). */
static int conv_pd(kn_dnnl_session *s, const kn_opdesc *d, const int64_t *xd, const int64_t *wd, bool bias,
                   const int64_t *od, dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd, bool *has_sum)
{
    kn_nn_window win;
    int64_t group, chk[KN_MAX_RANK];
    int st = kn_nn_conv_geometry(d, 4, xd, wd, &win, &group, chk);
    if (st) return st;
    if (chk[2] != od[2] || chk[3] != od[3] || chk[1] != od[1])
        return kn_error(KN_ERR_INTERNAL, "conv output %lldx%lld, the plan says %lldx%lld", (long long)chk[2],
                        (long long)chk[3], (long long)od[2], (long long)od[3]);
    if (d->op == KN_OP_FusedConv) {
        kn_abi_dnnl rec = {0};
        if ((st = kn_fused_posts(d, rec.post, &rec.n_post))) return st;
        if ((st = kn_dnnl_set_post_ops(&rec, attr, NULL, has_sum))) return st;
    }
    dnnl_memory_desc_t src, wei, bmd, dst;
    dnnl_dims_t sd = {xd[0], xd[1], xd[2], xd[3]}, dd = {od[0], od[1], od[2], od[3]};
    dnnl_dims_t wdims = {wd[0], wd[1], wd[2], wd[3]}, gdims = {group, wd[0] / group, wd[1], wd[2], wd[3]};
    dnnl_dims_t bd = {wd[0]};
    KN_DN(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, dnnl_format_tag_any), "conv src");
    KN_DN(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_format_tag_any), "conv dst");
    KN_DN(dnnl_memory_desc_init_by_tag(&wei, group > 1 ? 5 : 4, group > 1 ? gdims : wdims, dnnl_f32,
                                       dnnl_format_tag_any), "conv weights");
    KN_DN(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_a), "conv bias");
    dnnl_dims_t strides = {win.strides[0], win.strides[1]}, dil = {win.dilations[0] - 1, win.dilations[1] - 1};
    dnnl_dims_t pl = {win.pads[0], win.pads[1]}, pr = {win.pads[2], win.pads[3]};
    dnnl_convolution_desc_t cd;
    KN_DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &src, &wei,
                                                     bias ? &bmd : NULL, &dst, strides, dil, pl, pr),
          "conv descriptor");
    return kn_dnnl_pd_create(s, &cd, attr, pd, "conv primitive descriptor");
}

/* The primitive descriptor of a MaxPool or AveragePool. */
static int pool_pd(kn_dnnl_session *s, const kn_opdesc *d, const int64_t *xd, const int64_t *od,
                   dnnl_primitive_attr_t attr, dnnl_primitive_desc_t *pd)
{
    kn_nn_window win;
    int64_t chk[KN_MAX_RANK];
    int st = kn_nn_pool_geometry(d, 4, xd, &win, chk);
    if (st) return st;
    if (chk[2] != od[2] || chk[3] != od[3])
        return kn_error(KN_ERR_INTERNAL, "pooling output %lldx%lld, the plan says %lldx%lld", (long long)chk[2],
                        (long long)chk[3], (long long)od[2], (long long)od[3]);
    dnnl_alg_kind_t alg = d->op == KN_OP_MaxPool ? dnnl_pooling_max
                          : kn_op_attr_int(d, "count_include_pad", 0) ? dnnl_pooling_avg_include_padding
                                                                       : dnnl_pooling_avg_exclude_padding;
    dnnl_memory_desc_t src, dst;
    dnnl_dims_t sd = {xd[0], xd[1], xd[2], xd[3]}, dd = {od[0], od[1], od[2], od[3]};
    /* a pooling's src cannot be `any`: the layout the session's convs use (plain NCHW runs oneDNN's slow
     * simple_nchw kernel) */
    KN_DN(dnnl_memory_desc_init_by_tag(&src, 4, sd, dnnl_f32, kn_dnnl_native_tag(kn_dnnl_native_layout(s), 4)),
          "pool src");
    KN_DN(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dnnl_format_tag_any), "pool dst");
    dnnl_dims_t strides = {win.strides[0], win.strides[1]}, k = {win.kernel[0], win.kernel[1]};
    dnnl_dims_t dil = {win.dilations[0] - 1, win.dilations[1] - 1};
    /* ceil_mode: the end pad grows to cover the last window */
    dnnl_dims_t pl = {win.pads[0], win.pads[1]}, pr;
    for (int i = 0; i < 2; i++) {
        int64_t ext = (k[i] - 1) * (dil[i] + 1) + 1;
        pr[i] = (od[2 + i] - 1) * strides[i] + ext - xd[2 + i] - pl[i];
    }
    dnnl_pooling_v2_desc_t pdsc;
    KN_DN(dnnl_pooling_v2_forward_desc_init(&pdsc, dnnl_forward_inference, alg, &src, &dst, strides, k, dil, pl, pr),
          "pooling descriptor");
    KN_DN(dnnl_primitive_desc_create(pd, &pdsc, attr, s->engine, NULL), "pooling primitive descriptor");
    return KN_OK;
}

/* The Winograd record of conv node d at input dims xd (output od), its
 * weights (plain OIHW, the artifact's constants: the filter is transformed
 * once) and the bias passed per run; false when Winograd does not run it or
 * the cost model prefers oneDNN's direct kernel for this shape
 * (KILN_CONV_ALGO as for a compiled shape). */
static bool wino_record(const kn_opdesc *d, const int64_t *xd, const int64_t *wd, const int64_t *od, bool bias,
                        int threads, kn_abi_dnnl *rec, int *tile)
{
    kn_conv_algo algo = kn_config_conv_algo();
    if (algo != KN_ALGO_AUTO && algo != KN_ALGO_WINOGRAD) return false;
    kn_nn_window win;
    int64_t group, chk[KN_MAX_RANK];
    if (kn_nn_conv_geometry(d, 4, xd, wd, &win, &group, chk) || win.nsp != 2) return false;
    *rec = (kn_abi_dnnl){.kind = KN_DNNL_CONV, .groups = (int32_t)group, .spatial = 2, .alpha = 1.0f};
    rec->src = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {xd[0], xd[1], xd[2], xd[3]}};
    rec->wei = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {wd[0], wd[1], wd[2], wd[3]},
                               .nbytes = wd[0] * wd[1] * wd[2] * wd[3] * (int64_t)sizeof(float)};
    rec->dst = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {od[0], od[1], od[2], od[3]}};
    if (bias) rec->bias = (kn_abi_tensor){.dtype = KN_F32, .rank = 1, .dims = {wd[0]}, .nbytes = wd[0] * 4};
    rec->wei_ref.loc = KN_LOC_WEIGHTS;   /* at offset 0 of the pointer kn_wino_create gets */
    rec->bias_ref.loc = KN_LOC_ARENA;    /* given at every run */
    for (int i = 0; i < 2; i++) {
        rec->strides[i] = win.strides[i];
        rec->dilations[i] = win.dilations[i];
        rec->pads_begin[i] = win.pads[i];
        rec->pads_end[i] = win.pads[2 + i];
    }
    if (d->op == KN_OP_FusedConv && kn_fused_posts(d, rec->post, &rec->n_post)) return false;
    if (!kn_wino_supported(rec)) return false;
    *tile = algo == KN_ALGO_WINOGRAD ? kn_wino_best_tile(rec, threads) : kn_wino_tile(rec, threads);
    return *tile != 0;
}

/* Node d's Winograd at this shape in p: the node's filter (transformed at
 * the first such shape, again when the weights move), a view of it, and
 * reorders of src, dst and the residual between NCHW and NHWC. */
static int build_wino(kn_dnnl_session *s, dc_node *n, const kn_abi_dnnl *rec, int tile, const int64_t *xd,
                      const int64_t *od, const void *wei, bool res, int nhwc, dc_prim *p)
{
    if (n->wino && (n->wino_from != wei || kn_wino_tile_of(n->wino) != tile)) {
        if (n->wino_from != wei) { /* no view may outlive the filter */
            for (int k = 0; k < DC_WAYS; k++)
                if (n->p[k].wv) prim_free(&n->p[k]);
            kn_wino_free(n->wino);
            n->wino = NULL;
        } else {
            tile = kn_wino_tile_of(n->wino); /* the other tile would transform the filter again */
        }
    }
    int st = KN_OK;
    if (!n->wino) {
        if ((st = kn_wino_create(rec, wei, tile, 0, &n->wino))) return st;
        n->wino_from = wei;
    }
    if ((st = kn_wino_view(n->wino, xd[0], xd[2], xd[3], &p->wv))) return st;
    if ((st = kn_dnnl_reserve(s, 2, kn_wino_scratch_bytes(p->wv)))) return st;
    p->has_sum = kn_fused_has_sum(rec->post, rec->n_post);
    p->wei = -1;
    dnnl_memory_desc_t us, ud, ns, nd;
    st = user_md(&us, xd, nhwc & KN_OPNODE_NHWC_SRC, "src");
    if (!st) st = user_md(&ud, od, nhwc & KN_OPNODE_NHWC_DST, "dst");
    if (!st) st = user_md(&ns, xd, true, "src");
    if (!st) st = user_md(&nd, od, true, "dst");
    if (!st) st = side(s, &us, &ns, true, &p->src_ro, &p->src_buf, &p->m_src_user, &p->m_src);
    if (!st) st = side(s, &ud, &nd, false, &p->dst_ro, &p->dst_buf, &p->m_dst_user, &p->m_dst);
    if (!st && res && p->has_sum && p->dst_buf) {
        st = mem(s, &ud, NULL, &p->m_res_user);
        if (!st) st = kn_dnnl_make_reorder(s, &ud, &nd, &p->res_ro, "reordering the residual");
    }
    return st;
}

/* Builds the primitive of node `rt` for input dims xd (output od) in p. */
static int build(kn_dnnl_session *s, dc_node *n, const kn_rt_opnode *rt, const int64_t *xd, const int64_t *wd,
                 const int64_t *od, const void *wei, bool wei_const, bool bias, bool res, int threads, dc_prim *p)
{
    int nhwc = rt->abi->nhwc;
    const kn_opdesc *d = &rt->desc;
    bool conv = d->op == KN_OP_Conv || d->op == KN_OP_FusedConv;
    kn_abi_dnnl rec;
    int tile;
    if (conv && wei_const && wino_record(d, xd, wd, od, bias, threads, &rec, &tile))
        return build_wino(s, n, &rec, tile, xd, od, wei, res, nhwc, p);
    dnnl_primitive_attr_t attr = kn_dnnl_scratch_attr();
    if (!attr) return kn_error(KN_ERR_NOMEM, "oneDNN attributes: out of memory");
    dnnl_primitive_desc_t pd = NULL;
    int st = conv ? conv_pd(s, d, xd, wd, bias, od, attr, &pd, &p->has_sum) : pool_pd(s, d, xd, od, attr, &pd);
    dnnl_primitive_attr_destroy(attr);
    if (st) return st;
    dnnl_memory_desc_t us, ud;
    const dnnl_memory_desc_t *ps = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *pdst = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    st = user_md(&us, xd, nhwc & KN_OPNODE_NHWC_SRC, "src");
    if (!st) st = user_md(&ud, od, nhwc & KN_OPNODE_NHWC_DST, "dst");
    if (!st) st = side(s, &us, ps, true, &p->src_ro, &p->src_buf, &p->m_src_user, &p->m_src);
    if (!st) st = side(s, &ud, pdst, false, &p->dst_ro, &p->dst_buf, &p->m_dst_user, &p->m_dst);
    if (!st && res && p->has_sum && p->dst_buf) {
        st = mem(s, &ud, NULL, &p->m_res_user);
        if (!st) st = kn_dnnl_make_reorder(s, &ud, pdst, &p->res_ro, "reordering the residual");
    }
    p->wei = -1;
    if (!st && conv) {
        const dnnl_memory_desc_t *pw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        dnnl_memory_desc_t uw;
        int64_t group = kn_op_attr_int(d, "group", 1);
        int64_t gd[5] = {group, wd[0] / group, wd[1], wd[2], wd[3]};
        st = group > 1 ? plain(&uw, 5, gd, "weights") : plain(&uw, 4, wd, "weights");
        if (!st) st = weights_for(s, n, pw, &uw, wei, &p->wei);
        if (!st) st = mem(s, pw, n->wei[p->wei].buf, &p->m_wei);
        if (!st && bias) {
            dnnl_memory_desc_t bmd;
            st = plain(&bmd, 1, wd, "bias");
            if (!st) st = mem(s, &bmd, NULL, &p->m_bias);
        }
    }
    if (st) {
        dnnl_primitive_desc_destroy(pd);
        return st;
    }
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(p->impl, sizeof p->impl, "%s", impl);
    return kn_dnnl_run_make(s, pd, &p->main, conv ? "conv primitive" : "pooling primitive");
}

static int set(dnnl_memory_t m, const void *ptr)
{
    KN_DN(dnnl_memory_set_data_handle(m, (void *)ptr), "setting a memory's data");
    return KN_OK;
}

static int run(kn_dnnl_session *s, dc_prim *p, const void *x, const void *b, const void *r, void *y, size_t ybytes,
               int threads)
{
    int st = set(p->m_src_user, x);
    if (!st) st = set(p->m_dst_user, y);
    if (!st && p->src_buf) {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, p->m_src_user}, {DNNL_ARG_TO, p->m_src}};
        st = kn_dnnl_run_exec(s, &p->src_ro, a, 2, "reordering src");
    } else if (!st) st = set(p->m_src, x);
    if (!st && !p->dst_buf) st = set(p->m_dst, y);
    if (!st && p->has_sum && r) {
        /* the sum post-op adds what dst holds: the residual, in dst's layout */
        if (p->dst_buf) {
            dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, p->m_res_user}, {DNNL_ARG_TO, p->m_dst}};
            st = set(p->m_res_user, r);
            if (!st) st = kn_dnnl_run_exec(s, &p->res_ro, a, 2, "reordering the residual");
        } else if (r != y) {
            memmove(y, r, ybytes);
        }
    }
    if (st) return st;
    if (p->wv) { /* Winograd between the NHWC buffers (the residual already in dst's) */
        float *d = p->dst_buf ? p->dst_buf : y;
        const float *src = p->src_buf ? p->src_buf : x;
        if (dnnl_stream_wait(s->stream) != dnnl_success) return kn_error(KN_ERR_INTERNAL, "oneDNN stream wait");
        st = kn_wino_exec(p->wv, src, b, d, p->has_sum ? d : NULL, s->act[2], threads);
    } else {
        if (p->m_bias) st = set(p->m_bias, b);
        dnnl_exec_arg_t a[5];
        int na = 0;
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, p->m_src};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, p->m_dst};
        if (p->m_wei) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, p->m_wei};
        if (p->m_bias) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->m_bias};
        if (!st) st = kn_dnnl_run_exec(s, &p->main, a, na, "running a dynamic conv or pooling");
    }
    if (!st && p->dst_buf) {
        dnnl_exec_arg_t r2[3] = {{DNNL_ARG_FROM, p->m_dst}, {DNNL_ARG_TO, p->m_dst_user}};
        st = kn_dnnl_run_exec(s, &p->dst_ro, r2, 2, "reordering dst");
    }
    if (!st && dnnl_stream_wait(s->stream) != dnnl_success) st = kn_error(KN_ERR_INTERNAL, "oneDNN stream wait");
    return st;
}

int kn_rt_dynconv_exec(kn_exec *ex, int32_t index, const void *const *in_ptrs, void *const *out_ptrs)
{
    if (!ex || !ex->session) return kn_error(KN_ERR_INTERNAL, "kn_rt_dynconv_exec: no session");
    kn_session *s = ex->session;
    const kn_artifact *a = s->art;
    if (index < 0 || index >= a->meta.n_opnodes || !in_ptrs || !out_ptrs)
        return kn_error(KN_ERR_INTERNAL, "kn_rt_dynconv_exec: node #%d does not exist (the artifact has %d)", index,
                        a->meta.n_opnodes);
    const kn_rt_opnode *rt = &a->opnodes[index];
    const kn_abi_opnode *on = rt->abi;
    int st = KN_OK;
    if (!s->dnnl && (st = kn_dnnl_session_init(&s->dnnl))) return st;
    if (!s->dynconv) {
        kn_dynconv *c = calloc(1, sizeof *c);
        if (!c || !(c->nodes = calloc((size_t)a->meta.n_opnodes + 1, sizeof *c->nodes))) {
            free(c);
            return kn_error(KN_ERR_NOMEM, "out of memory");
        }
        c->n = a->meta.n_opnodes;
        s->dynconv = c;
    }
    dc_node *n = s->dynconv->nodes[index];
    if (!n && !(n = s->dynconv->nodes[index] = calloc(1, sizeof *n))) return kn_error(KN_ERR_NOMEM, "out of memory");
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK], wd[KN_MAX_RANK] = {0};
    kn_rt_tensor_dims(ex, &on->inputs[0], xd);
    kn_rt_tensor_dims(ex, &on->outputs[0], od);
    bool conv = rt->desc.op == KN_OP_Conv || rt->desc.op == KN_OP_FusedConv;
    if (conv) kn_rt_tensor_dims(ex, &on->inputs[1], wd);
    const void *bias = conv && on->n_inputs > 2 ? in_ptrs[2] : NULL;
    const void *res = rt->desc.op == KN_OP_FusedConv && on->n_inputs > KN_FUSED_RESIDUAL ? in_ptrs[KN_FUSED_RESIDUAL]
                                                                                          : NULL;
    int threads = s->run_threads > 0 ? s->run_threads : 1;
    dc_prim *p = NULL, *lru = &n->p[0];
    for (int k = 0; k < DC_WAYS && !p; k++) {
        dc_prim *q = &n->p[k];
        if (q->key[0] && !memcmp(q->key, xd, sizeof q->key) && q->nthr == threads &&
            (q->wei < 0 || n->wei[q->wei].from == in_ptrs[1]))
            p = q;
        else if (!q->key[0] || (lru->key[0] && q->used < lru->used)) lru = q;
    }
    kn_dnnl_set_threads(threads);
    if (!p) {
        p = lru;
        prim_free(p);
        int64_t t0 = kn_rt_now_ns();
        /* weights inside the artifact's blob are the same at every run */
        const void *w = conv ? in_ptrs[1] : NULL;
        size_t wbytes = conv ? (size_t)(wd[0] * wd[1] * wd[2] * wd[3]) * sizeof(float) : 0;
        bool wei_const = w && kn_op_is_constant(s->opsess ? &s->opsess[index] : NULL, w, wbytes);
        st = build(s->dnnl, n, rt, xd, wd, od, w, wei_const, bias != NULL, res != NULL, threads, p);
        s->dnnl->build_ns += kn_rt_now_ns() - t0;
        if (st) {
            prim_free(p);
            kn_error_prefix("node '%s' (%s) at %lldx%lld: ", on->name, on->op_type, (long long)xd[2],
                            (long long)xd[3]);
            return st;
        }
        memcpy(p->key, xd, sizeof p->key);
        p->nthr = threads;
    }
    p->used = ++n->clock;
    if (s->opsess) /* what kiln profile names */
        s->opsess[index].impl = p->wv                         ? kn_wino_tile_of(p->wv) == 4 ? "winograd F(4x4,3x3)"
                                                                                            : "winograd F(2x2,3x3)"
                                : p->impl[0] ? p->impl
                                             : NULL;
    size_t ybytes = kn_rt_tensor_nbytes(ex, &on->outputs[0]);
    st = run(s->dnnl, p, in_ptrs[0], bias, res, out_ptrs[0], ybytes, threads);
    if (st) kn_error_prefix("node '%s' (%s): ", on->name, on->op_type);
    return st;
}
