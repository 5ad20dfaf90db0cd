/*
 * runtime/src/convt.c — ConvTranspose in compiled artifacts whose spatial
 * dims vary (`kiln compile --shape x=1x3x[32..640%32]x[32..640%32]`): such
 * a node runs as a runtime op at the run's shape, and its plain C kernel
 * (kernels/ref/nn_conv.c) took 9.7 of a 21 ms DBNet run at 256x256. Where
 * the patch kernel applies (kernel = stride, no padding, one group, f32,
 * AVX-512: every upsampling of the text detectors), the node's activation,
 * plain NCHW in the arena, is copied channels-last into a scratch buffer
 * and the patch kernel writes the NCHW output, with the node's post-ops in
 * its epilogue where it has them. The weights are packed once per session.
 * Where the compiler placed the node's input or output channels-last
 * (kn_opdesc.nhwc: its neighbours are convolutions at the run's shape, or
 * another such ConvTranspose), the kernel reads or writes them there; the
 * plain C kernel then runs through NCHW copies (kn_convt_reference).
 */
#include <stdlib.h>
#include <string.h>

#include "convt.h"
#include "k_movement.h"
#include "rt_internal.h"

typedef struct convt_state {
    kn_pdc *k;
    const void *w, *b; /* the constant weights and bias it was packed from */
    bool posts;        /* k applies the node's post-ops */
    float *nhwc;       /* the input, channels-last */
    size_t cap;        /* floats in nhwc */
} convt_state;

static void state_free(void *p)
{
    convt_state *st = p;
    if (!st) return;
    kn_pdc_free(st->k);
    free(st->nhwc);
    free(st);
}

/* t's bytes lie inside the artifact's weights: the same at every run. */
static bool constant(const kn_op_session *os, const kn_tensor *t)
{
    return kn_op_is_constant(os, t->data, (size_t)kn_tensor_numel(t) * kn_dtype_size(t->dtype));
}

/* The patch kernel's record for this node at the run's shape. */
static kn_abi_dnnl record_of(const kn_tensor *x, const kn_tensor *w, const kn_tensor *b, const kn_nn_window *win)
{
    kn_abi_dnnl rec = {.kind = KN_DNNL_DECONV, .groups = 1, .spatial = 2, .alpha = 1.0f};
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], O = w->dims[1];
    rec.src = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {N, C, H, W}};
    rec.wei = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {C, O, w->dims[2], w->dims[3]}};
    rec.dst = (kn_abi_tensor){.dtype = KN_F32, .rank = 4, .dims = {N, O, H * w->dims[2], W * w->dims[3]}};
    if (b) rec.bias = (kn_abi_tensor){.dtype = KN_F32, .rank = 1, .dims = {O}, .nbytes = O * (int64_t)sizeof(float)};
    rec.wei_ref.loc = rec.bias_ref.loc = KN_LOC_WEIGHTS;
    for (int i = 0; i < 2; i++) {
        rec.strides[i] = win->strides[i];
        rec.dilations[i] = win->dilations[i];
        rec.pads_begin[i] = win->pads[i];
        rec.pads_end[i] = win->pads[2 + i];
    }
    return rec;
}

/* src [N][C][HW] to dst [N][HW][C], in 16 x 16 tiles; the parallel loop's
 * units are blocks of 16 pixels of one image. */
typedef struct cl_job {
    const float *src;
    float *dst;
    int64_t C, HW, blocks; /* blocks: of 16 pixels per image */
} cl_job;

static int cl_chunk(void *args, int64_t lo, int64_t hi)
{
    const cl_job *j = args;
    for (int64_t u = lo; u < hi; u++) {
        int64_t n = u / j->blocks, p0 = u % j->blocks * 16, p1 = p0 + 16 < j->HW ? p0 + 16 : j->HW;
        const float *src = j->src + n * j->C * j->HW;
        float *dst = j->dst + n * j->C * j->HW;
        for (int64_t c0 = 0; c0 < j->C; c0 += 16) {
            int64_t c1 = c0 + 16 < j->C ? c0 + 16 : j->C;
            for (int64_t c = c0; c < c1; c++)
                for (int64_t p = p0; p < p1; p++) dst[p * j->C + c] = src[c * j->HW + p];
        }
    }
    return KN_OK;
}

static int to_channels_last(const float *src, int64_t N, int64_t C, int64_t HW, float *dst, int threads)
{
    cl_job j = {src, dst, C, HW, (HW + 15) / 16};
    return kn_rt_parallel_for_threads(threads, cl_chunk, &j, N * j.blocks);
}

int kn_convt_fast(kn_op_session *os, const kn_tensor *x, const kn_tensor *w, const kn_tensor *b,
                  const kn_abi_post *post, int n_post, const kn_nn_window *win, int64_t group, kn_tensor *y,
                  bool *posts_done, int nhwc)
{
    *posts_done = false;
    if (!os || x->dtype != KN_F32 || w->dtype != KN_F32 || (b && b->dtype != KN_F32) || y->dtype != KN_F32 ||
        x->rank != 4 || w->rank != 4 || win->nsp != 2 || group != 1 || !constant(os, w) || (b && !constant(os, b)))
        return KN_ERR_UNSUPPORTED;
    kn_abi_dnnl rec = record_of(x, w, b, win);
    for (int i = 0; i < 4; i++)
        if (y->dims[i] != rec.dst.dims[i]) return KN_ERR_UNSUPPORTED; /* output_padding or output_shape */
    bool dst_nhwc = nhwc & KN_OPNODE_NHWC_DST;
    if (!kn_pdc_supported(&rec, dst_nhwc)) return KN_ERR_UNSUPPORTED;
    if (n_post > 0 && n_post <= 4) { /* with the post-ops where the epilogue has them all */
        rec.n_post = n_post;
        memcpy(rec.post, post, sizeof *post * (size_t)n_post);
        if (!kn_pdc_supported(&rec, dst_nhwc)) rec.n_post = 0;
    }
    convt_state *st = os->state;
    if (!st || st->w != w->data || st->b != (b ? b->data : NULL) || st->posts != (rec.n_post > 0)) {
        state_free(st);
        os->state = st = calloc(1, sizeof *st);
        os->free_state = state_free;
        if (!st) return kn_error(KN_ERR_NOMEM, "ConvTranspose: out of memory");
        int rc = kn_pdc_create(&rec, w->data, b ? b->data : NULL, dst_nhwc, &st->k);
        if (rc) return rc;
        st->w = w->data, st->b = b ? b->data : NULL, st->posts = rec.n_post > 0;
    }
    int64_t N = x->dims[0], C = x->dims[1], HW = x->dims[2] * x->dims[3];
    int threads = os->threads > 0 ? os->threads : 1;
    const float *src = x->data;
    if (!(nhwc & KN_OPNODE_NHWC_SRC)) { /* the kernel reads channels-last: a copy */
        size_t need = (size_t)(N * C * HW);
        if (need > st->cap) {
            free(st->nhwc);
            st->cap = 0;
            if (!(st->nhwc = malloc(need * sizeof(float))))
                return kn_error(KN_ERR_NOMEM, "ConvTranspose: out of memory for a %lld-float input", (long long)need);
            st->cap = need;
        }
        int rc = to_channels_last(x->data, N, C, HW, st->nhwc, threads);
        if (rc) return rc;
        src = st->nhwc;
    }
    os->impl = "kiln patch deconv:avx512";
    *posts_done = st->posts;
    return kn_pdc_exec_at(st->k, N, x->dims[2], x->dims[3], src, y->data, NULL, threads);
}

/* t's bytes as [N, H, W, C] (channels-last) <-> [N, C, H, W]: perm of
 * kn_k_transpose over a view with the other order's dims. */
static int relayout(const kn_tensor *from, bool from_nhwc, kn_tensor *to)
{
    const int64_t *d = from->dims; /* NCHW dims, whichever the bytes */
    int64_t nhwc_dims[4] = {d[0], d[2], d[3], d[1]};
    static const int to_nchw[4] = {0, 3, 1, 2}, to_nhwc[4] = {0, 2, 3, 1};
    kn_tensor src = *from, dst = *to;
    src.own = dst.own = KN_BORROWED, src.map_base = dst.map_base = NULL;
    if (from_nhwc) memcpy(src.dims, nhwc_dims, sizeof nhwc_dims);
    else memcpy(dst.dims, nhwc_dims, sizeof nhwc_dims);
    return kn_k_transpose(&src, from_nhwc ? to_nchw : to_nhwc, &dst);
}

int kn_convt_reference(const kn_tensor *x, const kn_tensor *w, const kn_tensor *b, const kn_nn_window *win,
                       int64_t group, kn_tensor *y, int nhwc)
{
    if (!(nhwc & (KN_OPNODE_NHWC_SRC | KN_OPNODE_NHWC_DST))) return kn_k_conv_transpose(x, w, b, win, group, y);
    if (x->rank != 4 || y->rank != 4)
        return kn_error(KN_ERR_INVALID, "ConvTranspose: NHWC activations of rank %d", x->rank);
    kn_tensor xc = {0}, yc = {0};
    const kn_tensor *xs = x;
    kn_tensor *ys = y;
    int st = KN_OK;
    if (nhwc & KN_OPNODE_NHWC_SRC) {
        st = kn_tensor_alloc(&xc, x->dtype, 4, x->dims);
        if (!st) st = relayout(x, true, &xc);
        xs = &xc;
    }
    if (!st && (nhwc & KN_OPNODE_NHWC_DST)) {
        st = kn_tensor_alloc(&yc, y->dtype, 4, y->dims);
        ys = &yc;
    }
    if (!st) st = kn_k_conv_transpose(xs, w, b, win, group, ys);
    if (!st && ys != y) st = relayout(ys, false, y);
    kn_tensor_free(&xc);
    kn_tensor_free(&yc);
    return st;
}
