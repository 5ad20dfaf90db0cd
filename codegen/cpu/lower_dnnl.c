/*
 * codegen/cpu/lower_dnnl.c — Conv, MatMul and Gemm lowered onto oneDNN
 * primitives: each node becomes one kn_abi_dnnl record (created once per
 * session by runtime/src/dnnl.c) and a call to kn_rt_dnnl_exec.
 *
 * The record conventions are those documented at the top of
 * runtime/src/dnnl.c: tensors as stored (row-major), transposes as flags,
 * ONNX conv weight layout and ONNX dilations. Constant weights are passed as
 * a NULL pointer: the runtime reordered them at session creation.
 *
 * Every check happens before anything is emitted, so that a case oneDNN
 * cannot take (other dtypes, 1-D MatMul operands, a Gemm C that is not a row
 * bias, dynamic shapes) returns KN_ERR_UNSUPPORTED and the node falls back to
 * its runtime kernel.
 *
 * ConvTranspose and kiln::FusedConvTranspose become oneDNN deconvolution
 * records (KN_DNNL_DECONV), with the same layouts and post-ops as a Conv.
 *
 * kiln::FusedConv and kiln::FusedMatMul (runtime/ops/fused_int.h) are the
 * same primitives with their post_ops list as oneDNN post-ops (eltwise, sum
 * for the residual), so a Conv + bias + Relu + residual Add is one call.
 *
 * Activations that one convolution writes and only convolutions read stay
 * in oneDNN's preferred layout (act_layout; KN_LAYOUT_NATIVE in kiln/abi.h):
 * a network of fused convolutions then reorders only at its edges.
 * kn_compile_opts.layout = KN_CG_LAYOUT_NCHW keeps every value plain.
 */
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "dyn.h"
#include "eval.h"
#include "fused_int.h"
#include "fused_q.h"
#include "nn_int.h"

/* True if v has a static shape and a place in the memory plan. */
static bool placed(const kn_cg *cg, const kn_value *v)
{
    return v && kn_shape_is_static(&v->shape) && v->shape.rank <= 8 && v->id < cg->plan->n_where &&
           cg->plan->where[v->id].loc >= 0;
}

/* True if v is f32 with a static shape and a place in the memory plan. */
static bool usable(const kn_cg *cg, const kn_value *v) { return placed(cg, v) && v->dtype == KN_F32; }

static bool is_8bit(kn_dtype dt) { return dt == KN_U8 || dt == KN_I8; }

/* An activation oneDNN may take: f32, or 8-bit. */
static bool usable_act(const kn_cg *cg, const kn_value *v) { return placed(cg, v) && (v->dtype == KN_F32 || is_8bit(v->dtype)); }

static kn_abi_ref where_of(const kn_cg *cg, const kn_value *v) { return cg->plan->where[v->id]; }

static bool is_const(const kn_cg *cg, const kn_value *v) { return where_of(cg, v).loc == KN_LOC_WEIGHTS; }

/* The record with its common fields; weights/bias refs from the plan. */
static void record_init(const kn_cg *cg, kn_abi_dnnl *r, int kind, const kn_value *src, const kn_value *wei,
                        const kn_value *bias, const kn_value *dst)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->alpha = 1.0f;
    r->groups = 1;
    kn_cg_abi_tensor(src, &r->src);
    kn_cg_abi_tensor(wei, &r->wei);
    kn_cg_abi_tensor(dst, &r->dst);
    r->wei_ref = where_of(cg, wei);
    if (bias) {
        kn_cg_abi_tensor(bias, &r->bias);
        r->bias_ref = where_of(cg, bias);
    } else {
        r->bias_ref.loc = KN_LOC_ARENA; /* no bias: bias.rank 0, nbytes 0 */
    }
}

/* Emits n's record r; a float matmul or convolution that the autocast pass
 * marked computes in bf16 (kn_abi_dnnl.compute). */
static int emit(kn_cg *cg, const kn_node *n, const kn_abi_dnnl *r, const kn_value *src, const kn_value *wei,
                const kn_value *bias, const kn_value *dst, const kn_value *residual)
{
    kn_abi_dnnl rec = *r;
    if (n->compute == KN_BF16 && rec.n_scale == 0 && rec.src.dtype == KN_F32 && rec.wei.dtype == KN_F32 &&
        (rec.kind == KN_DNNL_MATMUL || rec.kind == KN_DNNL_CONV))
        rec.compute = KN_BF16;
    LLVMValueRef ps = kn_cg_ptr(cg, src), pd = kn_cg_ptr(cg, dst);
    LLVMValueRef pw = is_const(cg, wei) ? NULL : kn_cg_ptr(cg, wei);
    LLVMValueRef pb = bias ? kn_cg_ptr(cg, bias) : NULL;
    LLVMValueRef pr = residual ? kn_cg_ptr(cg, residual) : NULL;
    return kn_cg_emit_dnnl(cg, &rec, ps, pw, pb, pd, pr);
}

/* ---- Conv ------------------------------------------------------------------------ */

/* Fills strides, dilations and pads of r from the node's attributes and
 * checks that they give the inferred output size. */
static int conv_geometry(const kn_node *n, kn_abi_dnnl *r, const kn_value *x, const kn_value *w, const kn_value *y)
{
    int sp = x->shape.rank - 2;
    const int64_t *a;
    int cnt;
    for (int i = 0; i < sp; i++) r->strides[i] = 1, r->dilations[i] = 1;
    if ((cnt = kn_attr_ints(n, "strides", &a)) > 0) {
        if (cnt != sp) return KN_ERR_UNSUPPORTED;
        for (int i = 0; i < sp; i++) r->strides[i] = a[i];
    }
    if ((cnt = kn_attr_ints(n, "dilations", &a)) > 0) {
        if (cnt != sp) return KN_ERR_UNSUPPORTED;
        for (int i = 0; i < sp; i++) r->dilations[i] = a[i];
    }
    if ((cnt = kn_attr_ints(n, "kernel_shape", &a)) > 0) {
        if (cnt != sp) return KN_ERR_UNSUPPORTED;
        for (int i = 0; i < sp; i++)
            if (a[i] != w->shape.dims[2 + i]) return KN_ERR_UNSUPPORTED;
    }
    const char *ap = kn_attr_string(n, "auto_pad", "NOTSET");
    bool same_upper = !strcmp(ap, "SAME_UPPER"), same_lower = !strcmp(ap, "SAME_LOWER");
    if (!strcmp(ap, "NOTSET") || !strcmp(ap, "")) {
        if ((cnt = kn_attr_ints(n, "pads", &a)) > 0) {
            if (cnt != 2 * sp) return KN_ERR_UNSUPPORTED;
            for (int i = 0; i < sp; i++) r->pads_begin[i] = a[i], r->pads_end[i] = a[sp + i];
        }
    } else if (!same_upper && !same_lower && strcmp(ap, "VALID")) {
        return KN_ERR_UNSUPPORTED;
    }
    for (int i = 0; i < sp; i++) {
        int64_t in = x->shape.dims[2 + i], k = w->shape.dims[2 + i], s = r->strides[i], d = r->dilations[i];
        if (s < 1 || d < 1 || r->pads_begin[i] < 0 || r->pads_end[i] < 0) return KN_ERR_UNSUPPORTED;
        int64_t ext = d * (k - 1) + 1;
        if (same_upper || same_lower) {
            int64_t out = (in + s - 1) / s, total = (out - 1) * s + ext - in;
            if (total < 0) total = 0;
            r->pads_begin[i] = same_upper ? total / 2 : total - total / 2;
            r->pads_end[i] = total - r->pads_begin[i];
        }
        int64_t span = in + r->pads_begin[i] + r->pads_end[i] - ext;
        if (span < 0 || span / s + 1 != y->shape.dims[2 + i]) return KN_ERR_UNSUPPORTED;
    }
    return KN_OK;
}


/* The post-ops of a fused or integer node into r, and its residual input
 * (NULL when there is none); KN_ERR_UNSUPPORTED when the residual is not
 * usable: oneDNN's sum reads it from dst, so it has the output's shape and
 * dtype, 8-bit when res_8bit (a static QConv/QMatMul), else f32. */
static int fused_posts(const kn_cg *cg, const kn_node *n, bool res_8bit, kn_abi_dnnl *r, const kn_value **out_res)
{
    *out_res = NULL;
    kn_opdesc d;
    bool has[1];
    kn_node_opdesc(n, &d, has);
    kn_abi_post post[KN_FUSED_MAX_POST];
    int np;
    if (kn_fused_posts(&d, post, &np)) {
        kn_error_clear(); /* the runtime kernel reports it, naming the node */
        return KN_ERR_UNSUPPORTED;
    }
    if (kn_fused_posts_collide(post, np))
        return kn_error(KN_ERR_UNSUPPORTED, "two post-ops use one oneDNN eltwise algorithm with different "
                                            "parameters (oneDNN 2.x would apply the first one's to both)");
    const kn_value *res = kn_node_input(n, KN_FUSED_RESIDUAL), *y = n->outputs[0];
    if (kn_fused_has_sum(post, np) != (res != NULL)) return KN_ERR_UNSUPPORTED;
    if (res && (!placed(cg, res) || res->dtype != y->dtype || (res_8bit ? !is_8bit(res->dtype) : res->dtype != KN_F32) ||
                !kn_shape_same(&res->shape, &y->shape)))
        return KN_ERR_UNSUPPORTED;
    r->n_post = np;
    memcpy(r->post, post, sizeof post);
    *out_res = res;
    return KN_OK;
}

/* The int8 fields of a QConv or QMatMul (runtime/ops/fused_q.h) into r:
 * output scales, zero points, post-ops (a sum with the residual's scale and
 * zero point) and the residual *out_res. */
static int q_fields(const kn_cg *cg, const kn_node *n, kn_abi_dnnl *r, int64_t chans, const kn_value **out_res)
{
    *out_res = NULL;
    const kn_value *s = kn_node_input(n, KN_Q_S);
    if (!usable(cg, s) || !is_const(cg, s) || (kn_cg_numel(s) != 1 && kn_cg_numel(s) != chans))
        return KN_ERR_UNSUPPORTED;
    r->n_scale = (int32_t)kn_cg_numel(s);
    r->scale_ref = where_of(cg, s);
    int64_t xz = kn_attr_int(n, "x_zero_point", 0), yz = kn_attr_int(n, "y_zero_point", 0);
    if (xz < -128 || xz > 255 || yz < -128 || yz > 255) return KN_ERR_UNSUPPORTED;
    r->src_zp = (int32_t)xz, r->dst_zp = (int32_t)yz;
    bool dyn = kn_node_input(n, KN_Q_X)->dtype == KN_F32; /* its residual is f32, in real units */
    return fused_posts(cg, n, !dyn, r, out_res);
}

/* The record of a Conv, or of a FusedConv (then with its post-ops and
 * residual *out_res); KN_ERR_UNSUPPORTED for what oneDNN does not take.
 * Emits nothing: the layout choice asks it about neighbours too. */
static int conv_record(const kn_cg *cg, const kn_node *n, kn_abi_dnnl *r, const kn_value **out_res)
{
    *out_res = NULL;
    const kn_value *x = kn_node_input(n, 0), *w = kn_node_input(n, 1), *b = kn_node_input(n, 2);
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    bool q = n->op == KN_OP_QConv;
    if (q ? !placed(cg, x) || !is_8bit(x->dtype) || !placed(cg, w) || w->dtype != KN_I8 || !is_const(cg, w) ||
                !usable_act(cg, y)
          : !usable(cg, x) || !usable(cg, w) || !usable(cg, y))
        return KN_ERR_UNSUPPORTED;
    if (b && !usable(cg, b)) return KN_ERR_UNSUPPORTED;
    int rank = x->shape.rank;
    if (rank < 3 || rank > 5 || w->shape.rank != rank || y->shape.rank != rank) return KN_ERR_UNSUPPORTED;
    int64_t g = kn_attr_int(n, "group", 1), C = x->shape.dims[1], O = w->shape.dims[0];
    if (g < 1 || g > INT32_MAX || O % g || w->shape.dims[1] * g != C || y->shape.dims[0] != x->shape.dims[0] ||
        y->shape.dims[1] != O)
        return KN_ERR_UNSUPPORTED;
    if (b && (b->shape.rank != 1 || b->shape.dims[0] != O)) return KN_ERR_UNSUPPORTED;
    record_init(cg, r, KN_DNNL_CONV, x, w, b, y);
    r->groups = (int32_t)g;
    r->spatial = rank - 2;
    r->conv_algo = cg->conv_algo;
    int st = conv_geometry(n, r, x, w, y);
    if (!st && n->op == KN_OP_FusedConv) st = fused_posts(cg, n, false, r, out_res);
    if (!st && q) st = q_fields(cg, n, r, O, out_res);
    return st;
}

static bool is_conv(const kn_node *n)
{
    return n && (n->op == KN_OP_Conv || n->op == KN_OP_FusedConv || n->op == KN_OP_QConv);
}

/* ---- ConvTranspose ----------------------------------------------------------------- */

/* The record of a ConvTranspose or FusedConvTranspose (then with its
 * post-ops and residual *out_res): oneDNN's deconvolution (runtime/src/
 * dnnl/deconv.c). The geometry is the reference kernel's
 * (kn_nn_convt_geometry: auto_pad, output_padding and output_shape
 * resolved into the begin pads and the output size, at compile time);
 * the end pad is what makes the sizes agree, negative where the output
 * reaches past the last input's window (output_padding). What oneDNN
 * cannot express (a negative begin pad, an output more than a stride past
 * the windows) declines with a message, which `kiln compile --report`
 * shows, and runs the reference kernel. */
static int deconv_record(const kn_cg *cg, const kn_node *n, kn_abi_dnnl *r, const kn_value **out_res)
{
    *out_res = NULL;
    const kn_value *x = kn_node_input(n, 0), *w = kn_node_input(n, 1), *b = kn_node_input(n, 2);
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    if (!usable(cg, x) || !usable(cg, w) || !usable(cg, y) || (b && !usable(cg, b))) return KN_ERR_UNSUPPORTED;
    int rank = x->shape.rank, sp = rank - 2;
    if (rank < 3 || rank > 5 || w->shape.rank != rank || y->shape.rank != rank)
        return kn_error(KN_ERR_UNSUPPORTED, "oneDNN's deconvolution takes 1 to 3 spatial dims, not %d", sp);
    kn_opdesc d;
    bool has[1];
    kn_node_opdesc(n, &d, has);
    kn_nn_window win;
    int64_t g, od[KN_MAX_RANK];
    if (kn_nn_convt_geometry(&d, rank, x->shape.dims, w->shape.dims, &win, &g, od)) {
        kn_error_clear(); /* the runtime kernel reports it, naming the node */
        return KN_ERR_UNSUPPORTED;
    }
    for (int i = 0; i < rank; i++)
        if (od[i] != y->shape.dims[i]) return KN_ERR_UNSUPPORTED;
    int64_t C = x->shape.dims[1], O = y->shape.dims[1];
    if (g < 1 || g > INT32_MAX || C % g || w->shape.dims[0] != C || w->shape.dims[1] * g != O)
        return KN_ERR_UNSUPPORTED;
    if (b && (b->shape.rank != 1 || b->shape.dims[0] != O)) return KN_ERR_UNSUPPORTED;
    record_init(cg, r, KN_DNNL_DECONV, x, w, b, y);
    r->groups = (int32_t)g;
    r->spatial = sp;
    for (int i = 0; i < sp; i++) {
        int64_t in = x->shape.dims[2 + i], k = w->shape.dims[2 + i], s = win.strides[i], dl = win.dilations[i];
        if (win.kernel[i] != k || s < 1 || dl < 1) return KN_ERR_UNSUPPORTED;
        int64_t pb = win.pads[i], pe = (in - 1) * s + dl * (k - 1) + 1 - pb - od[2 + i];
        if (pb < 0)
            return kn_error(KN_ERR_UNSUPPORTED, "spatial dim %d starts %lld before the first window (negative "
                                                "padding; oneDNN's deconvolution has none)", i, (long long)-pb);
        if (pe <= -s)
            return kn_error(KN_ERR_UNSUPPORTED, "spatial dim %d reaches %lld past the last window (oneDNN's "
                                                "deconvolution reaches at most stride - 1 = %lld)",
                            i, (long long)-pe, (long long)(s - 1));
        r->strides[i] = s, r->dilations[i] = dl, r->pads_begin[i] = pb, r->pads_end[i] = pe;
    }
    if (n->op == KN_OP_FusedConvTranspose) return fused_posts(cg, n, false, r, out_res);
    return KN_OK;
}

static bool is_deconv(const kn_node *n) { return n && (n->op == KN_OP_ConvTranspose || n->op == KN_OP_FusedConvTranspose); }

/* True if n runs as a oneDNN convolution or deconvolution (the nodes that
 * hand each other activations in the session's layout). */
static bool conv_like_lowerable(const kn_cg *cg, const kn_node *n)
{
    kn_abi_dnnl r;
    const kn_value *res;
    if (!is_deconv(n)) return is_conv(n) && conv_record(cg, n, &r, &res) == KN_OK;
    int st = deconv_record(cg, n, &r, &res);
    if (st) kn_error_clear(); /* asked about a neighbour: its own lowering reports it */
    return st == KN_OK;
}

/* ---- pooling --------------------------------------------------------------------- */

/* The record of a 2-D MaxPool (no Indices output), AveragePool (floor
 * mode) or GlobalAveragePool with static shapes; KN_ERR_UNSUPPORTED for
 * anything else, which then runs as generated code (as a pooling with a
 * dynamic batch does, in rows: compile.c). Explicit pads only (no
 * auto_pad), each less than the window; ceil mode becomes extra padding at
 * the end, which max pooling ignores. */
static int pool_record(const kn_cg *cg, const kn_node *n, kn_abi_dnnl *r)
{
    if (cg->dyn && kn_dyn_node_is_dynamic(cg->dyn, n)) return KN_ERR_UNSUPPORTED;
    bool gap = n->op == KN_OP_GlobalAveragePool, max = n->op == KN_OP_MaxPool;
    if (!gap && !max && n->op != KN_OP_AveragePool) return KN_ERR_UNSUPPORTED;
    const kn_value *x = kn_node_input(n, 0), *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    /* max pooling also on 8-bit tensors (passes/lower_qdq.c) */
    bool ok = usable(cg, x) || (max && placed(cg, x) && is_8bit(x->dtype));
    if (!ok || !placed(cg, y) || y->dtype != x->dtype || x->shape.rank != 4 || y->shape.rank != 4)
        return KN_ERR_UNSUPPORTED;
    if (n->n_outputs > 1 && n->outputs[1]) return KN_ERR_UNSUPPORTED; /* MaxPool's Indices */
    memset(r, 0, sizeof *r);
    r->kind = KN_DNNL_POOL;
    r->alpha = 1.0f;
    r->groups = 1;
    r->spatial = 2;
    kn_cg_abi_tensor(x, &r->src);
    kn_cg_abi_tensor(y, &r->dst);
    r->wei_ref.loc = r->bias_ref.loc = KN_LOC_ARENA; /* none */
    r->alg = max ? KN_POOLING_MAX : KN_POOLING_AVG_EXCLUDE_PAD;
    for (int i = 0; i < 2; i++) r->strides[i] = r->dilations[i] = 1, r->kernel[i] = x->shape.dims[2 + i];
    bool ceil = false;
    if (!gap) {
        const int64_t *a;
        if (kn_attr_ints(n, "kernel_shape", &a) != 2) return KN_ERR_UNSUPPORTED;
        for (int i = 0; i < 2; i++) r->kernel[i] = a[i];
        int cnt;
        if ((cnt = kn_attr_ints(n, "strides", &a)) > 0) {
            if (cnt != 2) return KN_ERR_UNSUPPORTED;
            for (int i = 0; i < 2; i++) r->strides[i] = a[i];
        }
        if ((cnt = kn_attr_ints(n, "dilations", &a)) > 0) {
            if (cnt != 2) return KN_ERR_UNSUPPORTED;
            for (int i = 0; i < 2; i++) r->dilations[i] = a[i];
        }
        if ((cnt = kn_attr_ints(n, "pads", &a)) > 0) {
            if (cnt != 4) return KN_ERR_UNSUPPORTED;
            for (int i = 0; i < 2; i++) r->pads_begin[i] = a[i], r->pads_end[i] = a[2 + i];
        }
        const char *ap = kn_attr_string(n, "auto_pad", "NOTSET");
        if (strcmp(ap, "NOTSET") && strcmp(ap, "")) return KN_ERR_UNSUPPORTED;
        if (kn_attr_int(n, "storage_order", 0) != 0) return KN_ERR_UNSUPPORTED;
        ceil = kn_attr_int(n, "ceil_mode", 0) != 0;
        if (!max) {
            if (ceil) return KN_ERR_UNSUPPORTED; /* ONNX counts the ceil region its own way */
            if (kn_attr_int(n, "count_include_pad", 0)) r->alg = KN_POOLING_AVG_INCLUDE_PAD;
        }
    }
    for (int i = 0; i < 2; i++) {
        int64_t in = x->shape.dims[2 + i], k = r->kernel[i], s = r->strides[i], d = r->dilations[i];
        if (k < 1 || s < 1 || d < 1 || r->pads_begin[i] < 0 || r->pads_end[i] < 0) return KN_ERR_UNSUPPORTED;
        int64_t ext = d * (k - 1) + 1, out = y->shape.dims[2 + i];
        if (ceil) { /* as much padding at the end as the last window needs */
            int64_t need = (out - 1) * s + ext - in - r->pads_begin[i];
            if (need > r->pads_end[i]) r->pads_end[i] = need;
        }
        if (r->pads_begin[i] >= ext || r->pads_end[i] >= ext) return KN_ERR_UNSUPPORTED;
        int64_t span = in + r->pads_begin[i] + r->pads_end[i] - ext;
        if (span < 0 || span / s + 1 != out) return KN_ERR_UNSUPPORTED;
    }
    return KN_OK;
}

/* ---- Mul and Add by a per-channel value ------------------------------------------ */

/* The record of a Mul or Add of a 4-D f32 activation (*out_x, the output's
 * shape) by a value that is one number per channel or one in all, [1 or
 * N, 1 or C, 1, 1] once broadcast (*out_c, any rank up to 4): the
 * squeeze-and-excitation scale between convolutions. KN_ERR_UNSUPPORTED
 * for anything else, which stays a generated loop. */
static int binary_record(const kn_cg *cg, const kn_node *n, kn_abi_dnnl *r, const kn_value **out_x,
                         const kn_value **out_c)
{
    if (n->op != KN_OP_Mul && n->op != KN_OP_Add) return KN_ERR_UNSUPPORTED;
    if (n->n_inputs != 2 || n->n_outputs != 1 || (cg->dyn && kn_dyn_node_is_dynamic(cg->dyn, n)))
        return KN_ERR_UNSUPPORTED;
    const kn_value *a = kn_node_input(n, 0), *b = kn_node_input(n, 1), *y = n->outputs[0];
    if (!usable(cg, a) || !usable(cg, b) || !usable(cg, y) || y->shape.rank != 4) return KN_ERR_UNSUPPORTED;
    const kn_value *x = kn_shape_same(&a->shape, &y->shape) ? a : b, *c = x == a ? b : a;
    if (!kn_shape_same(&x->shape, &y->shape) || c->shape.rank > 4) return KN_ERR_UNSUPPORTED;
    kn_abi_tensor ct;
    kn_cg_abi_tensor(c, &ct);
    int lead = 4 - c->shape.rank;
    for (int i = 3; i >= 0; i--) { /* c's dims, right-aligned to y's (numpy broadcasting) */
        int64_t d = i >= lead ? c->shape.dims[i - lead] : 1;
        if (d != 1 && (i > 1 || d != y->shape.dims[i])) return KN_ERR_UNSUPPORTED;
        ct.dims[i] = d;
        ct.dim_names[i] = NULL; /* static: and c's own would sit at other dims */
    }
    ct.rank = 4;
    record_init(cg, r, KN_DNNL_BINARY, x, c, NULL, y);
    r->wei = ct;
    r->alg = n->op == KN_OP_Mul ? KN_BINARY_MUL : KN_BINARY_ADD;
    *out_x = x, *out_c = c;
    return KN_OK;
}

/* True if n runs as a oneDNN binary op when v, its activation operand, is
 * in the session's layout. */
static bool binary_lowerable(const kn_cg *cg, const kn_node *n, const kn_value *v)
{
    kn_abi_dnnl r;
    const kn_value *x, *c;
    return n && binary_record(cg, n, &r, &x, &c) == KN_OK && (!v || x == v);
}

/* A node with a dynamic dim that cannot run in rows runs at its run-time
 * shape on plain tensors (kn_rt_dynconv_exec) or its runtime kernel. */
static bool runs_at_runtime_shape(const kn_cg *cg, const kn_node *n)
{
    return cg->dyn && kn_dyn_node_is_dynamic(cg->dyn, n) && kn_dyn_row_sym(cg->dyn, n) < 0;
}

static bool pool_lowerable(const kn_cg *cg, const kn_node *n)
{
    kn_abi_dnnl r;
    return n && !runs_at_runtime_shape(cg, n) && pool_record(cg, n, &r) == KN_OK;
}

static bool conv_lowerable(const kn_cg *cg, const kn_node *n)
{
    return n && !runs_at_runtime_shape(cg, n) && conv_like_lowerable(cg, n);
}

bool kn_cg_layout_free(const kn_value *v)
{
    const kn_shape *sh = &v->shape;
    return sh->rank == 4 && (sh->dims[1] == 1 || (sh->dims[2] == 1 && sh->dims[3] == 1));
}

/* True if v is an operand a binary op may broadcast against rank-4 NHWC
 * values unchanged: a single element. */
static bool one_element(const kn_value *v)
{
    if (!kn_shape_is_static(&v->shape)) return false;
    for (int d = 0; d < v->shape.rank; d++)
        if (v->shape.dims[d] != 1) return false;
    return true;
}

bool kn_cg_agnostic_operand(const kn_node *n, int index)
{
    return (n->op != KN_OP_Split && n->op != KN_OP_Resize) || index == 0;
}

bool kn_cg_layout_agnostic(const kn_node *n)
{
    if (!n || n->n_outputs < 1) return false;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] && (n->outputs[k]->shape.rank != 4 || n->outputs[k]->dtype != KN_F32)) return false;
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] && kn_cg_agnostic_operand(n, k) && n->inputs[k]->dtype != KN_F32) return false;
    switch (n->op) {
    case KN_OP_Concat:
        for (int k = 0; k < n->n_inputs; k++)
            if (!n->inputs[k] || n->inputs[k]->shape.rank != 4) return false;
        return n->n_inputs > 0;
    case KN_OP_Split: return n->n_inputs >= 1 && n->inputs[0] && n->inputs[0]->shape.rank == 4;
    case KN_OP_Resize:
        return n->n_inputs >= 1 && n->inputs[0] && n->inputs[0]->shape.rank == 4 && !kn_node_attr(n, "axes") &&
               strcmp(kn_attr_string(n, "coordinate_transformation_mode", ""), "tf_crop_and_resize") != 0;
    case KN_OP_Add: case KN_OP_Sub: case KN_OP_Mul: case KN_OP_Div:
        if (n->n_inputs != 2 || n->n_outputs != 1 || kn_attr_int(n, "broadcast", 0)) return false;
        for (int k = 0; k < 2; k++)
            if (!n->inputs[k] || (n->inputs[k]->shape.rank != 4 && !one_element(n->inputs[k]))) return false;
        return true;
    default: return false;
    }
}

/* A layout-agnostic node of static shapes that may run on the session's
 * layout: its rank-4 operands and results are activations in the arena,
 * it is not an alias of the plan, and no oneDNN binary record takes it. */
static bool static_agnostic(const kn_cg *cg, const kn_node *n)
{
    if (cg->plain_layout || !kn_cg_layout_agnostic(n) || runs_at_runtime_shape(cg, n) ||
        kn_plan_is_alias(cg->plan, n) || binary_lowerable(cg, n, NULL))
        return false;
    for (int side = 0; side < 2; side++)
        for (int k = 0; k < (side ? n->n_outputs : n->n_inputs); k++) {
            const kn_value *v = side ? n->outputs[k] : n->inputs[k];
            if (!v || (!side && (!kn_cg_agnostic_operand(n, k) || v->shape.rank != 4))) continue;
            if (!usable_act(cg, v) || where_of(cg, v).loc != KN_LOC_ARENA) return false;
        }
    return true;
}

/* The layout of activation v of a convolution. Convolutions hand each other
 * their activations in oneDNN's preferred layout (KN_LAYOUT_NATIVE), so that
 * a network of fused convolutions reorders only at its edges: v must be an
 * arena value (never the user's buffers) of a 2-D convolution, written by a
 * convolution, pooling or binary op oneDNN runs and read only by such
 * convolutions (as src or as residual), poolings, and binary ops (as the
 * activation operand: a squeeze-and-excitation scale), or by layout-
 * agnostic nodes between them (static_agnostic: Concat, Split, Resize,
 * elementwise; kn_cg_plan_layouts keeps those consistent). Any channel
 * count: where the session's layout would pad it (24 channels in
 * nChw16c), the runtime keeps the value plain on both sides. */
static int32_t decide_layout(const kn_cg *cg, const kn_value *v)
{
    if (cg->plain_layout || !v || !usable_act(cg, v) || where_of(cg, v).loc != KN_LOC_ARENA) return KN_LAYOUT_PLAIN;
    if (v->shape.rank != 4 || v->n_users == 0) return KN_LAYOUT_PLAIN;
    if (!conv_lowerable(cg, v->producer) && !pool_lowerable(cg, v->producer) &&
        !binary_lowerable(cg, v->producer, NULL) && !(v->dtype == KN_F32 && static_agnostic(cg, v->producer)))
        return KN_LAYOUT_PLAIN;
    for (int i = 0; i < v->n_users; i++) {
        const kn_use *u = &v->users[i];
        if (binary_lowerable(cg, u->node, v)) continue;
        if (v->dtype == KN_F32 && static_agnostic(cg, u->node) && kn_cg_agnostic_operand(u->node, u->index)) continue;
        bool role = u->index == 0 || (u->index == KN_FUSED_RESIDUAL &&
                                      (u->node->op == KN_OP_FusedConv || u->node->op == KN_OP_QConv ||
                                       u->node->op == KN_OP_FusedConvTranspose));
        if (!role || (!conv_lowerable(cg, u->node) && !pool_lowerable(cg, u->node))) return KN_LAYOUT_PLAIN;
    }
    return KN_LAYOUT_NATIVE;
}

/* True if v is planned KN_LAYOUT_NATIVE. */
static bool is_native(const kn_cg *cg, const kn_value *v)
{
    return v && v->id >= 0 && v->id < cg->plan->n_where && cg->layouts[v->id] == KN_LAYOUT_NATIVE + 1;
}

const kn_value *kn_cg_agnostic_value(const kn_node *n, int *k)
{
    for (; *k < n->n_inputs + n->n_outputs; (*k)++) {
        bool in = *k < n->n_inputs;
        const kn_value *v = in ? n->inputs[*k] : n->outputs[*k - n->n_inputs];
        if (v && v->shape.rank == 4 && (!in || kn_cg_agnostic_operand(n, *k))) return (*k)++, v;
    }
    return NULL;
}

/* True if value v is written or read by a convolution, pooling or binary
 * record. */
static bool touches_dnnl(const kn_cg *cg, const kn_value *v)
{
    const kn_node *p = v->producer;
    if (p && (conv_lowerable(cg, p) || pool_lowerable(cg, p) || binary_lowerable(cg, p, NULL))) return true;
    for (int i = 0; i < v->n_users; i++) {
        const kn_node *u = v->users[i].node;
        if (conv_lowerable(cg, u) || pool_lowerable(cg, u) || binary_lowerable(cg, u, v)) return true;
    }
    return false;
}

/* Layout-agnostic nodes between convolutions (static_agnostic) run on the
 * session's layout only where all of them can: each of a node's rank-4
 * operands and results is native, or has the same bytes in every layout
 * (kn_cg_layout_free), and the group of such nodes joined by their values
 * touches a oneDNN record (an elementwise chain alone stays generated code,
 * fused). A node that cannot makes its values plain, until none changes. */
static int plan_native_agnostic(kn_cg *cg)
{
    const kn_graph *g = cg->g;
    bool *anchored = calloc((size_t)cg->plan->n_where + 1, sizeof *anchored);
    cg->native_all = calloc((size_t)g->n_nodes + 1, sizeof *cg->native_all);
    if (!anchored || !cg->native_all) {
        free(anchored);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++) cg->native_all[i] = static_agnostic(cg, g->nodes[i]);
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        if (is_native(cg, v)) anchored[v->id] = touches_dnnl(cg, v);
    }
    for (bool changed = true; changed;) { /* anchoring spreads through agnostic nodes */
        changed = false;
        for (int i = 0; i < g->n_nodes; i++) {
            const kn_node *n = g->nodes[i];
            bool any = false;
            const kn_value *v;
            for (int k = 0; cg->native_all[i] && (v = kn_cg_agnostic_value(n, &k));)
                any |= is_native(cg, v) && anchored[v->id];
            for (int k = 0; any && (v = kn_cg_agnostic_value(n, &k));)
                if (is_native(cg, v) && !anchored[v->id]) anchored[v->id] = true, changed = true;
        }
    }
    for (int i = 0; i < g->n_values; i++) { /* native only between agnostic nodes: plain */
        const kn_value *v = g->values[i];
        if (is_native(cg, v) && !anchored[v->id]) cg->layouts[v->id] = KN_LAYOUT_PLAIN + 1;
    }
    free(anchored);
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < g->n_nodes; i++) {
            const kn_node *n = g->nodes[i];
            if (!cg->native_all[i]) continue;
            bool ok = true, any = false;
            const kn_value *v;
            for (int k = 0; (v = kn_cg_agnostic_value(n, &k));) {
                bool out = k > n->n_inputs;
                any |= is_native(cg, v);
                ok &= is_native(cg, v) || (!out && kn_cg_layout_free(v));
            }
            if (ok && any) continue;
            cg->native_all[i] = false;
            for (int k = 0; (v = kn_cg_agnostic_value(n, &k));)
                if (is_native(cg, v)) cg->layouts[v->id] = KN_LAYOUT_PLAIN + 1, changed = true;
        }
    }
    return KN_OK;
}

int kn_cg_plan_layouts(kn_cg *cg)
{
    free(cg->layouts);
    free(cg->native_all);
    cg->native_all = NULL;
    cg->layouts = calloc((size_t)cg->plan->n_where + 1, 1);
    if (!cg->layouts) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < cg->g->n_values; i++) {
        const kn_value *v = cg->g->values[i];
        if (v->id >= 0 && v->id < cg->plan->n_where) cg->layouts[v->id] = (int8_t)(decide_layout(cg, v) + 1);
    }
    return plan_native_agnostic(cg);
}

/* The layout planned for v (kn_cg_plan_layouts); plain for a value the plan
 * did not see. */
static int32_t act_layout(const kn_cg *cg, const kn_value *v)
{
    if (!v || v->id < 0 || !cg->layouts || v->id >= cg->plan->n_where || !cg->layouts[v->id]) return KN_LAYOUT_PLAIN;
    return cg->layouts[v->id] - 1;
}

static int lower_pool(kn_cg *cg, const kn_node *n)
{
    kn_abi_dnnl r;
    int st = pool_record(cg, n, &r);
    if (st) return st;
    const kn_value *x = kn_node_input(n, 0), *y = n->outputs[0];
    r.src_layout = act_layout(cg, x);
    r.dst_layout = act_layout(cg, y);
    /* Between plain tensors oneDNN 2.x pools with its simple_nchw kernel
     * (0.2 GFLOP/s for a 5x5 window); the generated loop is vectorized. It
     * takes f32 pooling unless a neighbour hands over or expects oneDNN's
     * layout (and 8-bit pooling stays oneDNN's). */
    if (x->dtype == KN_F32 && r.src_layout == KN_LAYOUT_PLAIN && r.dst_layout == KN_LAYOUT_PLAIN)
        return KN_ERR_UNSUPPORTED;
    return kn_cg_emit_dnnl(cg, &r, kn_cg_ptr(cg, x), NULL, NULL, kn_cg_ptr(cg, y), NULL);
}

/* A Mul or Add by a per-channel value whose activation operand or output is
 * in the session's layout; between plain tensors the generated loop runs it
 * (as fast, and fused with its neighbours). */
static int lower_binary(kn_cg *cg, const kn_node *n)
{
    kn_abi_dnnl r;
    const kn_value *x, *c;
    int st = binary_record(cg, n, &r, &x, &c);
    if (st) return st;
    const kn_value *y = n->outputs[0];
    r.src_layout = act_layout(cg, x);
    r.dst_layout = act_layout(cg, y);
    if (r.src_layout == KN_LAYOUT_PLAIN && r.dst_layout == KN_LAYOUT_PLAIN) return KN_ERR_UNSUPPORTED;
    return emit(cg, n, &r, x, c, NULL, y, NULL);
}

typedef int (*conv_record_fn)(const kn_cg *, const kn_node *, kn_abi_dnnl *, const kn_value **);

/* A convolution or deconvolution record of n, with its activations' layouts. */
static int lower_conv_like(kn_cg *cg, const kn_node *n, conv_record_fn record)
{
    kn_abi_dnnl r;
    const kn_value *res;
    int st = record(cg, n, &r, &res);
    if (st) return st;
    const kn_value *x = kn_node_input(n, 0), *w = kn_node_input(n, 1), *b = kn_node_input(n, 2), *y = n->outputs[0];
    r.src_layout = act_layout(cg, x);
    r.dst_layout = act_layout(cg, y);
    r.post_layout = act_layout(cg, res);
    return emit(cg, n, &r, x, w, b, y, res);
}

static int lower_conv(kn_cg *cg, const kn_node *n) { return lower_conv_like(cg, n, conv_record); }

static int lower_deconv(kn_cg *cg, const kn_node *n) { return lower_conv_like(cg, n, deconv_record); }

/* ---- MatMul and Gemm --------------------------------------------------------- */

/* True if a [.., M, K] x b [.., K, N] → y, batch dims broadcasting numpy-style. */
static bool matmul_shapes_ok(const kn_value *a, const kn_value *b, const kn_value *y, bool ta, bool tb)
{
    int ra = a->shape.rank, rb = b->shape.rank, ry = y->shape.rank;
    if (ra < 2 || rb < 2 || ry != (ra > rb ? ra : rb)) return false;
    const int64_t *ad = a->shape.dims, *bd = b->shape.dims, *yd = y->shape.dims;
    int64_t M = ta ? ad[ra - 1] : ad[ra - 2], K = ta ? ad[ra - 2] : ad[ra - 1];
    int64_t Kb = tb ? bd[rb - 1] : bd[rb - 2], N = tb ? bd[rb - 2] : bd[rb - 1];
    if (K != Kb || yd[ry - 2] != M || yd[ry - 1] != N) return false;
    for (int i = 0; i < ry - 2; i++) {
        int ia = i - (ry - ra), ib = i - (ry - rb);
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        if ((da != 1 && da != yd[i]) || (db != 1 && db != yd[i])) return false;
    }
    return true;
}

static int lower_matmul(kn_cg *cg, const kn_node *n)
{
    const kn_value *a = kn_node_input(n, 0), *b = kn_node_input(n, 1);
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    if (!usable(cg, a) || !usable(cg, b) || !usable(cg, y)) return KN_ERR_UNSUPPORTED;
    /* 1-D operands (vector products) stay with the runtime kernel */
    if (!matmul_shapes_ok(a, b, y, false, false)) return KN_ERR_UNSUPPORTED;
    kn_abi_dnnl r;
    record_init(cg, &r, KN_DNNL_MATMUL, a, b, NULL, y);
    return emit(cg, n, &r, a, b, NULL, y, NULL);
}

static int lower_gemm(kn_cg *cg, const kn_node *n)
{
    const kn_value *a = kn_node_input(n, 0), *b = kn_node_input(n, 1), *c = kn_node_input(n, 2);
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    if (!usable(cg, a) || !usable(cg, b) || !usable(cg, y)) return KN_ERR_UNSUPPORTED;
    if (a->shape.rank != 2 || b->shape.rank != 2 || y->shape.rank != 2) return KN_ERR_UNSUPPORTED;
    bool ta = kn_attr_int(n, "transA", 0) != 0, tb = kn_attr_int(n, "transB", 0) != 0;
    float alpha = kn_attr_float(n, "alpha", 1.0f), beta = kn_attr_float(n, "beta", 1.0f);
    if (!matmul_shapes_ok(a, b, y, ta, tb) || !(alpha == alpha)) return KN_ERR_UNSUPPORTED;
    if (c && beta == 0.0f) c = NULL; /* 0 * C adds nothing (ONNX: C may then be anything) */
    /* C is a row bias ([N], [1, N]) or a full [M, N] addend (a sum post-op,
     * added after the alpha scale); other broadcasts and beta stay with the
     * runtime kernel */
    const kn_value *bias = NULL, *residual = NULL;
    if (c) {
        int64_t M = y->shape.dims[0], N = y->shape.dims[1];
        bool row = (c->shape.rank == 1 && c->shape.dims[0] == N) ||
                   (c->shape.rank == 2 && c->shape.dims[0] == 1 && c->shape.dims[1] == N);
        bool full = c->shape.rank == 2 && c->shape.dims[0] == M && c->shape.dims[1] == N && M != 1;
        if (beta != 1.0f || !usable(cg, c) || !(row || full)) return KN_ERR_UNSUPPORTED;
        if (row) bias = c;
        else residual = c;
    }
    kn_abi_dnnl r;
    record_init(cg, &r, KN_DNNL_MATMUL, a, b, bias, y);
    r.trans_a = ta, r.trans_b = tb;
    r.alpha = alpha;
    if (residual) {
        r.n_post = 1;
        r.post[0].kind = KN_POST_SUM;
    }
    return emit(cg, n, &r, a, b, bias, y, residual);
}

/* FusedMatMul: a MatMul (any batch rank) or, with transposes or alpha, a
 * 2-D Gemm; C is a row bias; then the post-ops. */
static int lower_fused_matmul(kn_cg *cg, const kn_node *n)
{
    const kn_value *a = kn_node_input(n, 0), *b = kn_node_input(n, 1), *c = kn_node_input(n, 2);
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    if (!usable(cg, a) || !usable(cg, b) || !usable(cg, y) || (c && !usable(cg, c))) return KN_ERR_UNSUPPORTED;
    bool ta = kn_attr_int(n, "transA", 0) != 0, tb = kn_attr_int(n, "transB", 0) != 0;
    float alpha = kn_attr_float(n, "alpha", 1.0f);
    if ((ta || tb || alpha != 1.0f) && (a->shape.rank != 2 || b->shape.rank != 2)) return KN_ERR_UNSUPPORTED;
    if (!matmul_shapes_ok(a, b, y, ta, tb) || !(alpha == alpha)) return KN_ERR_UNSUPPORTED;
    int64_t N = y->shape.dims[y->shape.rank - 1];
    if (c && !((c->shape.rank == 1 && c->shape.dims[0] == N) ||
               (c->shape.rank == 2 && c->shape.dims[0] == 1 && c->shape.dims[1] == N)))
        return KN_ERR_UNSUPPORTED;
    kn_abi_dnnl r;
    record_init(cg, &r, KN_DNNL_MATMUL, a, b, c, y);
    r.trans_a = ta, r.trans_b = tb;
    r.alpha = alpha;
    const kn_value *res = NULL;
    int st = fused_posts(cg, n, false, &r, &res);
    if (st) return st;
    return emit(cg, n, &r, a, b, c, y, res);
}

/* QMatMul (runtime/ops/fused_q.h): oneDNN's int8 matmul, W [K, N] constant. */
static int lower_qmatmul(kn_cg *cg, const kn_node *n)
{
    const kn_value *a = kn_node_input(n, KN_Q_X), *w = kn_node_input(n, KN_Q_W), *c = kn_node_input(n, KN_Q_B);
    const kn_value *y = n->n_outputs > 0 ? n->outputs[0] : NULL;
    bool dyn = a && a->dtype == KN_F32; /* quantized at run time (runtime/src/dnnl/dynq.c) */
    if (!placed(cg, a) || !(is_8bit(a->dtype) || dyn) || !placed(cg, w) || w->dtype != KN_I8 || !is_const(cg, w) ||
        !usable_act(cg, y) || (dyn && y->dtype != KN_F32) || (c && !usable(cg, c)))
        return KN_ERR_UNSUPPORTED;
    if (!matmul_shapes_ok(a, w, y, false, false)) return KN_ERR_UNSUPPORTED;
    int64_t N = y->shape.dims[y->shape.rank - 1];
    if (c && (c->shape.rank != 1 || c->shape.dims[0] != N)) return KN_ERR_UNSUPPORTED;
    kn_abi_dnnl r;
    record_init(cg, &r, KN_DNNL_MATMUL, a, w, c, y);
    const kn_value *res;
    int st = q_fields(cg, n, &r, N, &res);
    if (st) return st;
    return emit(cg, n, &r, a, w, c, y, res);
}

const kn_cg_lowering kn_cg_lower_dnnl[] = {
    {KN_OP_QMatMul, lower_qmatmul},
    {KN_OP_Conv, lower_conv},
    {KN_OP_FusedConv, lower_conv},
    {KN_OP_QConv, lower_conv},
    {KN_OP_ConvTranspose, lower_deconv},
    {KN_OP_FusedConvTranspose, lower_deconv},
    {KN_OP_FusedMatMul, lower_fused_matmul},
    {KN_OP_MatMul, lower_matmul},
    {KN_OP_Gemm, lower_gemm},
    {KN_OP_MaxPool, lower_pool},
    {KN_OP_AveragePool, lower_pool},
    {KN_OP_GlobalAveragePool, lower_pool},
    {KN_OP_Mul, lower_binary},
    {KN_OP_Add, lower_binary},
    {KN_OP_UNKNOWN, NULL},
};
