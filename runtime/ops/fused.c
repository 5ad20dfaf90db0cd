/*
 * Execution of kiln's fused ops (see fused_int.h): the reference kernel of
 * FusedConv, FusedConvTranspose and FusedMatMul, used by the reference evaluator and by compiled
 * artifacts for a node oneDNN does not take. It runs the same kernels as
 * the unfused graph (Conv, MatMul/Gemm, the unary ops, Clip, Add), in
 * place on the output, so fusing never changes what the evaluator computes
 * beyond where the bias is added. FusedElementwise runs its steps with the
 * unfused ops' kernels too, one temporary per step (the cpu backend fuses
 * them into one loop).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "convt.h"
#include "elementwise_int.h"
#include "fused_int.h"
#include "k_elementwise.h"
#include "k_linalg.h"
#include "nn_int.h"

/* ---- the post_ops list --------------------------------------------------------- */

static const struct {
    int kind;
    const char *name;
} k_post_names[] = {
    {KN_POST_SUM, "Add"},          {KN_POST_RELU, "Relu"},       {KN_POST_LEAKY_RELU, "LeakyRelu"},
    {KN_POST_CLIP, "Clip"},        {KN_POST_SIGMOID, "Sigmoid"}, {KN_POST_TANH, "Tanh"},
    {KN_POST_HARDSWISH, "HardSwish"}, {KN_POST_GELU_ERF, "Gelu"}, {KN_POST_GELU_TANH, "GeluTanh"},
    {KN_POST_SWISH, "Swish"},      {KN_POST_QDQ_U8, "QDQ_U8"},    {KN_POST_QDQ_S8, "QDQ_S8"},
};

const char *kn_fused_post_name(int kind)
{
    for (size_t i = 0; i < sizeof k_post_names / sizeof *k_post_names; i++)
        if (k_post_names[i].kind == kind) return k_post_names[i].name;
    return NULL;
}

int kn_fused_post_kind(const char *name)
{
    for (size_t i = 0; i < sizeof k_post_names / sizeof *k_post_names; i++)
        if (!strcmp(k_post_names[i].name, name)) return k_post_names[i].kind;
    return KN_POST_NONE;
}

bool kn_fused_has_sum(const kn_abi_post *post, int n)
{
    for (int i = 0; i < n; i++)
        if (post[i].kind == KN_POST_SUM) return true;
    return false;
}

static int eltwise_alg(int kind) { return kind == KN_POST_LEAKY_RELU ? KN_POST_RELU : kind; }

static bool same_params(const kn_abi_post *a, const kn_abi_post *b) { return a->alpha == b->alpha && a->beta == b->beta; }

int kn_fused_clip_variant(const kn_abi_post *post, int i)
{
    int v = 0;
    for (int j = 0; j < i; j++) {
        if (post[j].kind != KN_POST_CLIP) continue;
        bool seen = false; /* j's bounds were numbered at an earlier clip */
        for (int k = 0; k < j && !seen; k++) seen = post[k].kind == KN_POST_CLIP && same_params(&post[k], &post[j]);
        if (seen) continue;
        if (same_params(&post[j], &post[i])) return v;
        v++;
    }
    return v;
}

bool kn_fused_posts_collide(const kn_abi_post *post, int n)
{
    for (int i = 0; i < n; i++) {
        if (post[i].kind == KN_POST_CLIP && kn_fused_clip_variant(post, i) >= KN_FUSED_CLIP_VARIANTS) return true;
        for (int j = i + 1; j < n; j++)
            if (post[i].kind != KN_POST_SUM && post[i].kind != KN_POST_CLIP &&
                eltwise_alg(post[i].kind) == eltwise_alg(post[j].kind) && !same_params(&post[i], &post[j]))
                return true;
    }
    return false;
}

int kn_fused_posts(const kn_opdesc *d, kn_abi_post *post, int *out_n)
{
    *out_n = 0;
    const kn_attr *ops = kn_op_attr(d, "post_ops");
    if (!ops) return KN_OK;
    if (ops->kind != KN_ATTR_STRINGS) return kn_op_error(d, KN_ERR_INVALID, "post_ops must be a list of strings");
    int n = ops->n;
    if (n > KN_FUSED_MAX_POST)
        return kn_op_error(d, KN_ERR_INVALID, "%d post_ops, at most %d", n, KN_FUSED_MAX_POST);
    const float *al = NULL, *be = NULL;
    int na = kn_op_attr_floats(d, "post_alpha", &al), nb = kn_op_attr_floats(d, "post_beta", &be);
    if ((na && na != n) || (nb && nb != n))
        return kn_op_error(d, KN_ERR_INVALID, "post_alpha has %d and post_beta %d values for %d post_ops", na, nb, n);
    int sums = 0;
    for (int i = 0; i < n; i++) {
        int k = kn_fused_post_kind(ops->strings[i]);
        if (k == KN_POST_NONE) return kn_op_error(d, KN_ERR_INVALID, "post_ops[%d]: unknown step '%s'", i, ops->strings[i]);
        sums += k == KN_POST_SUM;
        post[i] = (kn_abi_post){.kind = k, .alpha = na ? al[i] : 0.0f, .beta = nb ? be[i] : 0.0f};
    }
    if (sums > 1) return kn_op_error(d, KN_ERR_INVALID, "post_ops holds %d 'Add' steps, at most 1", sums);
    *out_n = n;
    return KN_OK;
}

/* ---- execution -------------------------------------------------------------------- */

static int post_unary(kn_unary_op op, double alpha, kn_tensor *y)
{
    kn_unary_params p = {.alpha = alpha};
    return kn_k_unary(op, &p, y, y);
}

/* y * sigmoid(y) in place, with the kernels the unfused Sigmoid and Mul run. */
static int post_swish(kn_tensor *y)
{
    kn_tensor s = {0};
    int st = kn_tensor_copy(&s, y);
    if (!st) st = post_unary(KN_UN_SIGMOID, 0, &s);
    if (!st) st = kn_k_binary(KN_BIN_MUL, y, &s, y);
    kn_tensor_free(&s);
    return st;
}

/* KN_POST_QDQ_*: y (f32, in units of the inner quantization's scale) rounded
 * half to even, clamped to the 8-bit range less the zero point, scaled to
 * output units, in the order oneDNN's round, clip and linear post-ops run. */
static int post_qdq(const kn_abi_post *p, kn_tensor *y)
{
    if (y->dtype != KN_F32) return kn_error(KN_ERR_INVALID, "re-quantizing post-op on %s", kn_dtype_name(y->dtype));
    float lo = (p->kind == KN_POST_QDQ_U8 ? 0.f : -128.f) - p->beta;
    float hi = (p->kind == KN_POST_QDQ_U8 ? 255.f : 127.f) - p->beta;
    float *v = y->data;
    int64_t n = kn_tensor_numel(y);
    for (int64_t i = 0; i < n; i++) {
        float k = nearbyintf(v[i]);
        v[i] = (k < lo ? lo : k > hi ? hi : k) * p->alpha;
    }
    return KN_OK;
}

/* Applies one step to y in place, with the kernel the unfused op runs. */
int kn_fused_apply_post(const kn_abi_post *p, const kn_tensor *r, kn_tensor *y)
{
    switch (p->kind) {
    case KN_POST_SUM: return kn_k_binary(KN_BIN_ADD, y, r, y);
    case KN_POST_RELU: return post_unary(KN_UN_RELU, 0, y);
    case KN_POST_LEAKY_RELU: return post_unary(KN_UN_LEAKYRELU, p->alpha, y);
    case KN_POST_SIGMOID: return post_unary(KN_UN_SIGMOID, 0, y);
    case KN_POST_TANH: return post_unary(KN_UN_TANH, 0, y);
    case KN_POST_HARDSWISH: return post_unary(KN_UN_HARDSWISH, 0, y);
    case KN_POST_SWISH: return post_swish(y);
    case KN_POST_QDQ_U8:
    case KN_POST_QDQ_S8: return post_qdq(p, y);
    case KN_POST_GELU_ERF: return post_unary(KN_UN_GELU, 0, y);
    case KN_POST_GELU_TANH: return post_unary(KN_UN_GELU_TANH, 0, y);
    case KN_POST_CLIP: {
        /* Clip's kernel takes its bounds as tensors; an infinite one is no bound */
        float lo = p->alpha, hi = p->beta;
        kn_tensor tlo = {.dtype = KN_F32, .rank = 0, .data = &lo, .nbytes = sizeof lo};
        kn_tensor thi = {.dtype = KN_F32, .rank = 0, .data = &hi, .nbytes = sizeof hi};
        return kn_k_clip(y, isinf(lo) ? NULL : &tlo, isinf(hi) ? NULL : &thi, y);
    }
    default: return kn_error(KN_ERR_INVALID, "post-op kind %d", p->kind);
    }
}

/* Checks R against the post list and y, then runs the list over y. */
static int run_posts(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *y)
{
    kn_abi_post post[KN_FUSED_MAX_POST];
    int n, st = kn_fused_posts(d, post, &n);
    if (st) return st;
    const kn_tensor *r = kn_op_input(d, in, KN_FUSED_RESIDUAL);
    bool sum = kn_fused_has_sum(post, n);
    if (sum != (r != NULL))
        return kn_op_error(d, KN_ERR_INVALID, sum ? "post_ops adds a residual but input R is missing"
                                                  : "input R is given but post_ops has no 'Add'");
    if (r && (r->dtype != y->dtype || r->rank != y->rank || memcmp(r->dims, y->dims, sizeof(int64_t) * (size_t)y->rank)))
        return kn_op_error(d, KN_ERR_INVALID, "residual R must have the output's dtype and shape");
    for (int i = 0; i < n; i++)
        if ((st = kn_fused_apply_post(&post[i], r, y))) return kn_op_fail(d, st);
    return KN_OK;
}

/* X, W and B of a fused (de)convolution: present, one float dtype, W of X's rank. */
static int conv_inputs(const kn_opdesc *d, const kn_tensor *const *in, const kn_tensor **x, const kn_tensor **w,
                       const kn_tensor **b)
{
    *x = kn_op_input(d, in, 0), *w = kn_op_input(d, in, 1), *b = kn_op_input(d, in, 2);
    if (!*x || !*w) return kn_op_error(d, KN_ERR_INVALID, "input X or W is missing");
    if (!kn_nn_is_float((*x)->dtype) || (*w)->dtype != (*x)->dtype || (*b && (*b)->dtype != (*x)->dtype))
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "X, W and B must share one float dtype");
    if ((*w)->rank != (*x)->rank)
        return kn_op_error(d, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", (*w)->rank, (*x)->rank);
    return KN_OK;
}

static int exec_fused_conv(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_tensor *x, *w, *b;
    int st = conv_inputs(d, in, &x, &w, &b);
    if (st) return st;
    int64_t od[KN_MAX_RANK], group;
    kn_nn_window win;
    if ((st = kn_nn_conv_geometry(d, x->rank, x->dims, w->dims, &win, &group, od))) return st;
    if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
        return kn_op_error(d, KN_ERR_INVALID, "bias has %lld elements, expected %lld (output channels)",
                           (long long)kn_tensor_numel(b), (long long)w->dims[0]);
    if ((st = kn_tensor_alloc(&out[0], x->dtype, x->rank, od))) return kn_op_fail(d, st);
    if ((st = kn_k_conv(x, w, b, &win, group, &out[0]))) return kn_op_fail(d, st);
    return run_posts(d, in, &out[0]);
}

/* ConvTranspose's kernel, then the post-ops: what the unfused graph runs. */
static int exec_fused_convt(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_tensor *x, *w, *b;
    int st = conv_inputs(d, in, &x, &w, &b);
    if (st) return st;
    int64_t od[KN_MAX_RANK], group;
    kn_nn_window win;
    if ((st = kn_nn_convt_geometry(d, x->rank, x->dims, w->dims, &win, &group, od))) return st;
    if (b && (b->rank != 1 || b->dims[0] != od[1]))
        return kn_op_error(d, KN_ERR_INVALID, "bias has %lld elements, expected %lld (output channels)",
                           (long long)kn_tensor_numel(b), (long long)od[1]);
    if ((st = kn_tensor_alloc(&out[0], x->dtype, x->rank, od))) return kn_op_fail(d, st);
    /* compiled artifacts: the patch kernel where it applies (convt.h), with
     * the post-ops when there is no residual */
    kn_abi_post post[KN_FUSED_MAX_POST];
    int n_post = 0;
    bool posts_done = false;
    st = KN_ERR_UNSUPPORTED;
    if (d->sess && (st = kn_fused_posts(d, post, &n_post)) == KN_OK) {
        if (kn_op_input(d, in, KN_FUSED_RESIDUAL)) n_post = 0;
        st = kn_convt_fast(d->sess, x, w, b, post, n_post, &win, group, &out[0], &posts_done, d->nhwc);
    }
    if (st == KN_ERR_UNSUPPORTED) {
        if (d->sess) d->sess->impl = NULL;
        st = kn_convt_reference(x, w, b, &win, group, &out[0], d->nhwc);
    }
    if (st) return kn_op_fail(d, st);
    return posts_done ? KN_OK : run_posts(d, in, &out[0]);
}

static int exec_fused_matmul(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    const kn_tensor *a = kn_op_input(d, in, 0), *b = kn_op_input(d, in, 1), *c = kn_op_input(d, in, 2);
    if (!a || !b) return kn_op_error(d, KN_ERR_INVALID, "input A or B is missing");
    if (!kn_nn_is_float(a->dtype) || b->dtype != a->dtype || (c && c->dtype != a->dtype))
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "A, B and C must share one float dtype");
    bool ta = kn_op_attr_int(d, "transA", 0) != 0, tb = kn_op_attr_int(d, "transB", 0) != 0;
    float alpha = kn_op_attr_float(d, "alpha", 1.0f);
    /* Gemm's form (transposes, alpha) is 2-D; MatMul's broadcasts batches */
    bool gemm = ta || tb || alpha != 1.0f;
    int st, r = 2;
    int64_t dims[KN_MAX_RANK];
    if (gemm) {
        if (a->rank != 2 || b->rank != 2)
            return kn_op_error(d, KN_ERR_INVALID, "transA/transB/alpha need 2-D A and B (got ranks %d and %d)",
                               a->rank, b->rank);
        dims[0] = a->dims[ta ? 1 : 0], dims[1] = b->dims[tb ? 0 : 1];
    } else if ((st = kn_k_matmul_shape(a->rank, a->dims, b->rank, b->dims, &r, dims))) {
        return kn_op_fail(d, st);
    }
    int64_t N = dims[r - 1];
    if (c && (c->rank < 1 || c->rank > 2 || kn_tensor_numel(c) != N || c->dims[c->rank - 1] != N))
        return kn_op_error(d, KN_ERR_INVALID, "C must be [N] or [1, N] with N = %lld", (long long)N);
    if ((st = kn_tensor_alloc(&out[0], a->dtype, r, dims))) return kn_op_fail(d, st);
    if (gemm) st = kn_k_gemm(a, b, c, ta, tb, alpha, 1.0, &out[0]);
    else if (!(st = kn_k_matmul(a, b, &out[0])) && c) st = kn_k_binary(KN_BIN_ADD, &out[0], c, &out[0]);
    if (st) return kn_op_fail(d, st);
    return run_posts(d, in, &out[0]);
}

/* ---- FusedElementwise ---------------------------------------------------------------- */

bool kn_fused_ew_unary_ok(kn_op op)
{
    const kn_ew_un *u = kn_ew_un_find(op);
    /* Gelu's form is an attribute; the others have non-float outputs or inputs */
    return u && u->k != KN_UN_ISNAN && u->k != KN_UN_ISINF && u->k != KN_UN_NOT && u->k != KN_UN_BITNOT &&
           op != KN_OP_Gelu;
}

bool kn_fused_ew_binary(kn_op op, kn_binary_op *out)
{
    static const struct {
        kn_op op;
        kn_binary_op k;
    } bins[] = {{KN_OP_Add, KN_BIN_ADD}, {KN_OP_Sub, KN_BIN_SUB}, {KN_OP_Mul, KN_BIN_MUL}, {KN_OP_Div, KN_BIN_DIV},
                {KN_OP_Pow, KN_BIN_POW}, {KN_OP_Max, KN_BIN_MAX}, {KN_OP_Min, KN_BIN_MIN}};
    for (size_t i = 0; i < sizeof bins / sizeof *bins; i++)
        if (bins[i].op == op) {
            *out = bins[i].k;
            return true;
        }
    return false;
}

static bool is_qdq(kn_op op) { return op == KN_OP_QuantizeLinear || op == KN_OP_DequantizeLinear; }

/* The dtype of operand ref as step s reads it (`want`): an input takes the
 * type of its first reader and every other reader must agree; an earlier
 * step's result is f32, or 8-bit for a QuantizeLinear. */
static int ew_type(const kn_opdesc *d, kn_ew_program *prog, int s, int ref, kn_dtype want)
{
    kn_dtype *in = ref >= 0 ? &prog->in_dt[ref] : NULL;
    const kn_ew_step *from = ref < 0 ? &prog->steps[-ref - 1] : NULL;
    kn_dtype have = in ? *in : from->op == KN_OP_QuantizeLinear ? from->q : KN_F32;
    if (in && have == KN_DT_UNDEFINED) *in = have = want;
    if (have != want)
        return kn_op_error(d, KN_ERR_INVALID, "step %d reads %s %d as %s, which is %s", s, in ? "input" : "step",
                           in ? ref : -ref - 1, kn_dtype_name(want), kn_dtype_name(have));
    return KN_OK;
}

/* Checks operand ref of step s (a step before s, or an input) and marks it read. */
static int ew_ref(const kn_opdesc *d, int s, int64_t ref, int n_inputs, bool *in_read, bool *step_read, int *out)
{
    if (ref >= n_inputs || ref < -(int64_t)s)
        return kn_op_error(d, KN_ERR_INVALID, "step %d: operand %lld is neither an input (0..%d) nor an earlier step",
                           s, (long long)ref, n_inputs - 1);
    if (ref >= 0) in_read[ref] = true;
    else step_read[-ref - 1] = true;
    *out = (int)ref;
    return KN_OK;
}

/* A QuantizeLinear/DequantizeLinear step's parameters: a positive finite
 * scale, a u8/s8 type and a zero point in it. */
static int ew_qparams(const kn_opdesc *d, int s, kn_ew_step *st)
{
    float scale = st->p.alpha, zp = st->p.beta;
    st->q = st->p.gamma == 2.0f ? KN_U8 : st->p.gamma == 3.0f ? KN_I8 : KN_DT_UNDEFINED; /* ONNX element types */
    if (st->q != KN_U8 && st->q != KN_I8)
        return kn_op_error(d, KN_ERR_INVALID, "step %d: step_gamma %g names no 8-bit type (2 u8, 3 s8)", s, st->p.gamma);
    double lo = st->q == KN_U8 ? 0 : -128, hi = st->q == KN_U8 ? 255 : 127;
    if (!(isfinite(scale) && scale > 0) || !(zp >= lo && zp <= hi && zp == (float)(int)zp))
        return kn_op_error(d, KN_ERR_INVALID, "step %d: scale %g and zero point %g do not quantize to %s", s, scale, zp,
                           kn_dtype_name(st->q));
    return KN_OK;
}

int kn_fused_ew_program(const kn_opdesc *d, int n_inputs, kn_ew_program *out)
{
    memset(out, 0, sizeof *out);
    const kn_attr *steps = kn_op_attr(d, "steps");
    if (!steps || steps->kind != KN_ATTR_STRINGS || steps->n < 1)
        return kn_op_error(d, KN_ERR_INVALID, "steps must be a non-empty list of strings");
    int n = steps->n;
    if (n > KN_EW_MAX_STEPS) return kn_op_error(d, KN_ERR_INVALID, "%d steps, at most %d", n, KN_EW_MAX_STEPS);
    if (n_inputs < 1 || n_inputs > KN_EW_MAX_INPUTS)
        return kn_op_error(d, KN_ERR_INVALID, "%d inputs, 1 to %d", n_inputs, KN_EW_MAX_INPUTS);
    const int64_t *ops = NULL;
    const float *al = NULL, *be = NULL, *ga = NULL;
    int n_ops = kn_op_attr_ints(d, "operands", &ops);
    int na = kn_op_attr_floats(d, "step_alpha", &al), nb = kn_op_attr_floats(d, "step_beta", &be),
        ng = kn_op_attr_floats(d, "step_gamma", &ga);
    if (na != n || nb != n || ng != n)
        return kn_op_error(d, KN_ERR_INVALID, "step_alpha, step_beta and step_gamma need %d values each (have %d, %d, %d)",
                           n, na, nb, ng);
    bool in_read[KN_EW_MAX_INPUTS] = {0}, step_read[KN_EW_MAX_STEPS] = {0};
    int at = 0;
    for (int s = 0; s < n; s++) {
        kn_ew_step *st = &out->steps[s];
        st->op = kn_op_from_name(steps->strings[s], "");
        st->binary = kn_fused_ew_binary(st->op, &st->bin);
        st->q = KN_DT_UNDEFINED;
        if (!st->binary && !kn_fused_ew_unary_ok(st->op) && !is_qdq(st->op))
            return kn_op_error(d, KN_ERR_INVALID, "step %d: '%s' is not an elementwise op it runs", s, steps->strings[s]);
        if (!st->binary && !is_qdq(st->op)) st->un = kn_ew_un_find(st->op)->k;
        st->p.alpha = al[s], st->p.beta = be[s], st->p.gamma = ga[s];
        int rc = is_qdq(st->op) ? ew_qparams(d, s, st) : KN_OK;
        int need = st->binary ? 2 : 1;
        if (!rc && at + need > n_ops)
            return kn_op_error(d, KN_ERR_INVALID, "operands has %d values, too few for the steps", n_ops);
        kn_dtype want = st->op == KN_OP_DequantizeLinear ? st->q : KN_F32;
        if (!rc) rc = ew_ref(d, s, ops[at++], n_inputs, in_read, step_read, &st->a);
        if (!rc) rc = ew_type(d, out, s, st->a, want);
        if (!rc && st->binary) rc = ew_ref(d, s, ops[at++], n_inputs, in_read, step_read, &st->b);
        if (!rc && st->binary) rc = ew_type(d, out, s, st->b, want);
        if (rc) return rc;
    }
    if (at != n_ops) return kn_op_error(d, KN_ERR_INVALID, "operands has %d values, the steps read %d", n_ops, at);
    for (int i = 0; i < n_inputs; i++)
        if (!in_read[i]) return kn_op_error(d, KN_ERR_INVALID, "input %d is read by no step", i);
    for (int s = 0; s < n - 1; s++)
        if (!step_read[s]) return kn_op_error(d, KN_ERR_INVALID, "the result of step %d is read by no later step", s);
    out->n_steps = n;
    const kn_ew_step *last = &out->steps[n - 1];
    out->out_dt = last->op == KN_OP_QuantizeLinear ? last->q : KN_F32;
    return KN_OK;
}

/* Step st of the reference program: QuantizeLinear/DequantizeLinear of a
 * into *y with st's per-tensor scale and zero point. */
static int exec_qdq_step(const kn_ew_step *st, const kn_tensor *a, kn_tensor *y)
{
    float scale = st->p.alpha;
    uint8_t zp[1];
    if (st->q == KN_U8) zp[0] = (uint8_t)(int)st->p.beta;
    else {
        int8_t z = (int8_t)(int)st->p.beta;
        memcpy(zp, &z, 1);
    }
    kn_tensor ts = {.dtype = KN_F32, .rank = 0, .data = &scale, .nbytes = sizeof scale};
    kn_tensor tz = {.dtype = st->q, .rank = 0, .data = zp, .nbytes = 1};
    bool quant = st->op == KN_OP_QuantizeLinear;
    int rc = kn_tensor_alloc(y, quant ? st->q : KN_F32, a->rank, a->dims);
    if (rc) return rc;
    return quant ? kn_k_quantize(a, &ts, &tz, 1, 0, y) : kn_k_dequantize(a, &ts, &tz, 1, 0, y);
}

static int exec_fused_elementwise(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_ew_program prog;
    int st = kn_fused_ew_program(d, d->n_inputs, &prog);
    if (st) return st;
    for (int i = 0; i < d->n_inputs; i++)
        if (!in[i] || in[i]->dtype != prog.in_dt[i])
            return kn_op_error(d, KN_ERR_INVALID, "input %d is missing or not %s", i, kn_dtype_name(prog.in_dt[i]));
    kn_tensor tmp[KN_EW_MAX_STEPS];
    memset(tmp, 0, sizeof tmp);
    for (int s = 0; s < prog.n_steps && !st; s++) {
        const kn_ew_step *p = &prog.steps[s];
        const kn_tensor *a = p->a >= 0 ? in[p->a] : &tmp[-p->a - 1];
        if (p->binary) {
            const kn_tensor *b = p->b >= 0 ? in[p->b] : &tmp[-p->b - 1];
            const kn_tensor *ab[2] = {a, b};
            st = kn_k_broadcast_alloc(2, ab, KN_F32, &tmp[s]);
            if (!st) st = kn_k_binary(p->bin, a, b, &tmp[s]);
        } else if (is_qdq(p->op)) {
            st = exec_qdq_step(p, a, &tmp[s]);
        } else {
            st = kn_tensor_alloc(&tmp[s], KN_F32, a->rank, a->dims);
            if (!st) st = kn_k_unary(p->un, &p->p, a, &tmp[s]);
        }
    }
    int last = prog.n_steps - 1; /* >= 0: kn_fused_ew_program checked */
    if (!st && last >= 0 && last < KN_EW_MAX_STEPS) {
        out[0] = tmp[last]; /* the result moves out */
        memset(&tmp[last], 0, sizeof tmp[0]);
    }
    for (int s = 0; s < prog.n_steps; s++) kn_tensor_free(&tmp[s]);
    return st ? kn_op_fail(d, st) : KN_OK;
}

const kn_exec_impl kn_exec_fused[] = {
    {KN_OP_FusedConv, exec_fused_conv},
    {KN_OP_FusedConvTranspose, exec_fused_convt},
    {KN_OP_FusedMatMul, exec_fused_matmul},
    {KN_OP_FusedElementwise, exec_fused_elementwise},
    {KN_OP_UNKNOWN, NULL},
};
