/*
 * Execution of the 'nn' ops (see opdesc.h): convolution, pooling,
 * normalization, LRN, unpooling, RoI pooling and Col2Im.
 *
 * Each exec function checks its tensors, gets the output dims from the
 * geometry functions of nn_geom.c (which inference shares), allocates the
 * outputs and calls a kernel of runtime/kernels (k_nn.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "convt.h"
#include "nn_int.h"

/* ---- small helpers ------------------------------------------------------- */

static int need_input(const kn_opdesc *op, const kn_tensor *const *in, int i, const char *what)
{
    if (!kn_op_input(op, in, i)) return kn_op_error(op, KN_ERR_INVALID, "input %d (%s) is missing", i, what);
    return KN_OK;
}

/* Allocates output i if the node wants it; returns status. */
static int alloc_out(const kn_opdesc *op, kn_tensor *out, int i, kn_dtype dt, int rank, const int64_t *dims)
{
    if (!kn_op_has_output(op, i)) return KN_OK;
    int st = kn_tensor_alloc(&out[i], dt, rank, dims);
    return st ? kn_op_error(op, st, "output %d: %s", i, kn_last_error()) : KN_OK;
}

/* Output i if the node produces it (allocated by alloc_out), else NULL. */
static kn_tensor *opt_out(const kn_opdesc *op, kn_tensor *out, int i)
{
    return kn_op_has_output(op, i) && out[i].data ? &out[i] : NULL;
}

/* Status of a kernel call, with the node named in the message. */
static int kernel_status(const kn_opdesc *op, int st)
{
    if (!st) return KN_OK;
    /* Kernel messages start with the op name; the node prefix already says it. */
    const char *msg = kn_last_error();
    size_t len = strlen(op->op_type);
    if (!strncmp(msg, op->op_type, len) && msg[len] == ':' && msg[len + 1] == ' ') msg += len + 2;
    return kn_op_error(op, st, "%s", msg);
}

/* ---- Conv, ConvTranspose ---------------------------------------------------- */

static int exec_conv(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "W"))) return st;
    const kn_tensor *x = in[0], *w = in[1], *b = kn_op_input(op, in, 2);
    if (!kn_nn_is_float(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "X, W and B must share one float dtype (got %s, %s, %s)",
                           kn_dtype_name(x->dtype), kn_dtype_name(w->dtype), b ? kn_dtype_name(b->dtype) : "-");
    if (w->rank != x->rank)
        return kn_op_error(op, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", w->rank, x->rank);
    int64_t od[KN_MAX_RANK], group;
    kn_nn_window win;
    if ((st = kn_nn_conv_geometry(op, x->rank, x->dims, w->dims, &win, &group, od))) return st;
    if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
        return kn_op_error(op, KN_ERR_INVALID, "bias has %lld elements, expected %lld (output channels)",
                           (long long)kn_tensor_numel(b), (long long)w->dims[0]);
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, od))) return st;
    return kernel_status(op, kn_k_conv(x, w, b, &win, group, &out[0]));
}

static int exec_convt(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "W"))) return st;
    const kn_tensor *x = in[0], *w = in[1], *b = kn_op_input(op, in, 2);
    if (!kn_nn_is_float(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "X, W and B must share one float dtype");
    if (w->rank != x->rank)
        return kn_op_error(op, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", w->rank, x->rank);
    int64_t od[KN_MAX_RANK], group;
    kn_nn_window win;
    if ((st = kn_nn_convt_geometry(op, x->rank, x->dims, w->dims, &win, &group, od))) return st;
    if (b && kn_tensor_numel(b) != od[1])
        return kn_op_error(op, KN_ERR_INVALID, "bias has %lld elements, expected %lld (output channels)",
                           (long long)kn_tensor_numel(b), (long long)od[1]);
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, od))) return st;
    /* compiled artifacts: the patch kernel where it applies (convt.h) */
    if (op->sess) {
        bool posts_done;
        st = kn_convt_fast(op->sess, x, w, b, NULL, 0, &win, group, &out[0], &posts_done, op->nhwc);
        if (st != KN_ERR_UNSUPPORTED) return kernel_status(op, st);
        op->sess->impl = NULL;
    }
    return kernel_status(op, kn_convt_reference(x, w, b, &win, group, &out[0], op->nhwc));
}

/* ---- pooling ---------------------------------------------------------------- */

/* The p of LpPool/GlobalLpPool: an int since opset 2, a float in opset 1. */
static double lp_order(const kn_opdesc *op)
{
    const kn_attr *a = kn_op_attr(op, "p");
    if (a && a->kind == KN_ATTR_FLOAT) return a->f;
    return (double)kn_op_attr_int(op, "p", 2);
}

static int exec_pool(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out, kn_pool_kind kind)
{
    int st;
    if ((st = need_input(op, in, 0, "X"))) return st;
    const kn_tensor *x = in[0];
    bool ok = kn_nn_is_float(x->dtype) || (kind == KN_POOL_MAX && (x->dtype == KN_I8 || x->dtype == KN_U8));
    if (!ok) return kn_op_error(op, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(x->dtype));
    int64_t od[KN_MAX_RANK];
    kn_nn_window w;
    if ((st = kn_nn_pool_geometry(op, x->rank, x->dims, &w, od))) return st;
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, od))) return st;
    if ((st = alloc_out(op, out, 1, KN_I64, x->rank, od))) return st;
    int64_t so = kn_op_attr_int(op, "storage_order", 0);
    double p = lp_order(op);
    if (kind == KN_POOL_LP && p <= 0) return kn_op_error(op, KN_ERR_INVALID, "p is %g, must be positive", p);
    bool cip = kn_op_attr_int(op, "count_include_pad", 0) != 0;
    kn_tensor *idx = kn_op_has_output(op, 1) ? &out[1] : NULL;
    return kernel_status(op, kn_k_pool(x, &w, kind, cip, p, so == 1, &out[0], idx));
}

static int exec_maxpool(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_pool(op, in, out, KN_POOL_MAX);
}

static int exec_avgpool(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_pool(op, in, out, KN_POOL_AVG);
}

static int exec_lppool(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_pool(op, in, out, KN_POOL_LP);
}

static int exec_global(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out, kn_pool_kind kind)
{
    int st;
    if ((st = need_input(op, in, 0, "X"))) return st;
    const kn_tensor *x = in[0];
    if (!kn_nn_is_float(x->dtype)) return kn_op_error(op, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(x->dtype));
    if (x->rank < 2) return kn_op_error(op, KN_ERR_INVALID, "X has rank %d, expected at least 2", x->rank);
    int64_t od[KN_MAX_RANK];
    kn_nn_global_dims(x->rank, x->dims, od);
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, od))) return st;
    double p = lp_order(op);
    if (kind == KN_POOL_LP && p <= 0) return kn_op_error(op, KN_ERR_INVALID, "p is %g, must be positive", p);
    return kernel_status(op, kn_k_global_pool(x, kind, p, &out[0]));
}

static int exec_gap(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_global(op, in, out, KN_POOL_AVG);
}

static int exec_gmp(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_global(op, in, out, KN_POOL_MAX);
}

static int exec_glp(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    return exec_global(op, in, out, KN_POOL_LP);
}

/* ---- BatchNormalization, LayerNormalization ------------------------------------ */

/* Checks that input i is a float vector of C elements. */
static int check_chan_param(const kn_opdesc *op, const kn_tensor *const *in, int i, const char *what, int64_t C)
{
    int st = need_input(op, in, i, what);
    if (st) return st;
    if (!kn_nn_is_float(in[i]->dtype))
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "%s has dtype %s, expected a float type", what,
                           kn_dtype_name(in[i]->dtype));
    if (kn_tensor_numel(in[i]) != C)
        return kn_op_error(op, KN_ERR_INVALID, "%s has %lld elements, expected %lld (channels)", what,
                           (long long)kn_tensor_numel(in[i]), (long long)C);
    return KN_OK;
}

static int exec_batchnorm(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X"))) return st;
    const kn_tensor *x = in[0];
    if (!kn_nn_is_float(x->dtype)) return kn_op_error(op, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(x->dtype));
    if (x->rank < 2) return kn_op_error(op, KN_ERR_INVALID, "X has rank %d, expected N x C x ...", x->rank);
    int64_t C = x->dims[1];
    static const char *names[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (int i = 1; i < 5; i++)
        if ((st = check_chan_param(op, in, i, names[i], C))) return st;
    double eps = kn_op_attr_float(op, "epsilon", 1e-5f), mom = kn_op_attr_float(op, "momentum", 0.9f);
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, x->dims))) return st;
    if ((st = alloc_out(op, out, 1, in[3]->dtype, 1, &C))) return st;
    if ((st = alloc_out(op, out, 2, in[4]->dtype, 1, &C))) return st;
    kn_tensor *rm = opt_out(op, out, 1), *rv = opt_out(op, out, 2);
    if (kn_op_attr_int(op, "training_mode", 0))
        return kernel_status(op, kn_k_batchnorm_train(x, in[1], in[2], in[3], in[4], eps, mom, &out[0], rm, rv));
    /* Inference: the running statistics pass through unchanged. */
    if (rm) memcpy(rm->data, in[3]->data, rm->nbytes);
    if (rv) memcpy(rv->data, in[4]->data, rv->nbytes);
    return kernel_status(op, kn_k_batchnorm(x, in[1], in[2], in[3], in[4], eps, &out[0]));
}

/* True if t broadcasts (numpy rules) to dims[0..r) without growing it. */
static bool broadcasts_to(const kn_tensor *t, int r, const int64_t *dims)
{
    if (t->rank > r) return false;
    for (int i = 0; i < t->rank; i++) {
        int64_t a = t->dims[t->rank - 1 - i], b = dims[r - 1 - i];
        if (a != 1 && a != b) return false;
    }
    return true;
}

static int exec_layernorm(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "Scale"))) return st;
    const kn_tensor *x = in[0], *sc = in[1], *b = kn_op_input(op, in, 2);
    if (!kn_nn_is_float(x->dtype)) return kn_op_error(op, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(x->dtype));
    int axis;
    int64_t md[KN_MAX_RANK];
    if ((st = kn_nn_layernorm_geometry(op, x->rank, x->dims, &axis, md))) return st;
    char buf[96];
    if (!broadcasts_to(sc, x->rank - axis, x->dims + axis) || (b && !broadcasts_to(b, x->rank - axis, x->dims + axis)))
        return kn_op_error(op, KN_ERR_INVALID, "Scale/B do not broadcast to the normalized shape %s",
                           kn_shape_str(x->rank - axis, x->dims + axis, buf, sizeof buf));
    if (!kn_nn_is_float(sc->dtype) || (b && !kn_nn_is_float(b->dtype)))
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "Scale and B must be float tensors");
    kn_dtype sdt = kn_nn_stash_dtype(op, KN_F32);
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, x->dims)) || (st = alloc_out(op, out, 1, sdt, x->rank, md)) ||
        (st = alloc_out(op, out, 2, sdt, x->rank, md)))
        return st;
    double eps = kn_op_attr_float(op, "epsilon", 1e-5f);
    return kernel_status(op, kn_k_layernorm(x, axis, sc, b, eps, &out[0], opt_out(op, out, 1),
                                            opt_out(op, out, 2)));
}

static int exec_rmsnorm(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "scale"))) return st;
    const kn_tensor *x = in[0], *sc = in[1];
    if (!kn_nn_is_float(x->dtype) || !kn_nn_is_float(sc->dtype))
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "X and scale must be float tensors (got %s, %s)",
                           kn_dtype_name(x->dtype), kn_dtype_name(sc->dtype));
    int axis;
    int64_t md[KN_MAX_RANK];
    if ((st = kn_nn_layernorm_geometry(op, x->rank, x->dims, &axis, md))) return st;
    char buf[96];
    if (!broadcasts_to(sc, x->rank, x->dims))
        return kn_op_error(op, KN_ERR_INVALID, "scale %s does not broadcast to X %s",
                           kn_shape_str(sc->rank, sc->dims, buf, sizeof buf), kn_shape_str(x->rank, x->dims, buf + 48, 48));
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, x->dims))) return st;
    return kernel_status(op, kn_k_rmsnorm(x, axis, sc, kn_op_attr_float(op, "epsilon", 1e-5f), &out[0]));
}

/* ---- Attention, RotaryEmbedding ------------------------------------------------- */

static int exec_attention(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    static const char *names[] = {"Q", "K", "V"};
    for (int i = 0; i < 3; i++)
        if ((st = need_input(op, in, i, names[i]))) return st;
    const kn_tensor *q = in[0], *k = in[1], *v = in[2], *mask = kn_op_input(op, in, 3),
                    *pk = kn_op_input(op, in, 4), *pv = kn_op_input(op, in, 5), *np = kn_op_input(op, in, 6);
    if (!kn_nn_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "Q, K and V must share one float dtype (got %s, %s, %s)",
                           kn_dtype_name(q->dtype), kn_dtype_name(k->dtype), kn_dtype_name(v->dtype));
    if (!pk != !pv) return kn_op_error(op, KN_ERR_INVALID, "past_key and past_value must be given together");
    kn_attn_dims dm;
    int yr;
    int64_t yd[4], pkd[4], pvd[4], qkd[4];
    if ((st = kn_nn_attention_geometry(op, q->rank, q->dims, k->rank, k->dims, v->rank, v->dims, pk ? pk->rank : -1,
                                       pk ? pk->dims : NULL, &dm, &yr, yd, pkd, pvd, qkd)))
        return st;
    char b1[64], b2[64];
    if (pk) {
        int64_t want_k[4] = {dm.B, dm.Hkv, dm.P, dm.D}, want_v[4] = {dm.B, dm.Hkv, dm.P, dm.Dv};
        if (pk->dtype != q->dtype || pv->dtype != q->dtype || pv->rank != 4 || memcmp(pk->dims, want_k, sizeof want_k) ||
            memcmp(pv->dims, want_v, sizeof want_v))
            return kn_op_error(op, KN_ERR_INVALID, "past_key %s / past_value %s: expected %s dtype, %s / %s",
                               kn_shape_str(pk->rank, pk->dims, b1, sizeof b1),
                               kn_shape_str(pv->rank, pv->dims, b2, sizeof b2), kn_dtype_name(q->dtype),
                               kn_shape_str(4, want_k, b1, sizeof b1), kn_shape_str(4, want_v, b2, sizeof b2));
    }
    if (mask) {
        if (mask->dtype != KN_BOOL && mask->dtype != q->dtype)
            return kn_op_error(op, KN_ERR_UNSUPPORTED, "attn_mask has dtype %s, expected bool or %s",
                               kn_dtype_name(mask->dtype), kn_dtype_name(q->dtype));
        int mr = mask->rank;
        bool ok = mr >= 1 && mr <= 4 && mask->dims[mr - 1] <= qkd[3];
        int64_t lead[3] = {dm.B, dm.Hq, dm.Sq};
        for (int a = 0; ok && a < mr - 1; a++) {
            int64_t want = lead[3 - (mr - 1) + a];
            ok = mask->dims[a] == 1 || mask->dims[a] == want;
        }
        if (!ok)
            return kn_op_error(op, KN_ERR_INVALID, "attn_mask %s does not broadcast to %s",
                               kn_shape_str(mr, mask->dims, b1, sizeof b1), kn_shape_str(4, qkd, b2, sizeof b2));
    }
    if (np && (np->rank != 1 || np->dims[0] != dm.B || (np->dtype != KN_I64 && np->dtype != KN_I32)))
        return kn_op_error(op, KN_ERR_INVALID, "nonpad_kv_seqlen must be an int64 vector of %lld (the batch)",
                           (long long)dm.B);
    int64_t mode = kn_op_attr_int(op, "qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
        return kn_op_error(op, KN_ERR_INVALID, "qk_matmul_output_mode %lld is not 0..3", (long long)mode);
    if ((st = alloc_out(op, out, 0, q->dtype, yr, yd)) || (st = alloc_out(op, out, 1, q->dtype, 4, pkd)) ||
        (st = alloc_out(op, out, 2, q->dtype, 4, pvd)) || (st = alloc_out(op, out, 3, q->dtype, 4, qkd)))
        return st;
    const kn_attr *sa = kn_op_attr(op, "scale");
    kn_attn_params pr = {
        .scale = sa ? kn_op_attr_float(op, "scale", 1.0f) : 1.0 / sqrt((double)dm.D),
        .softcap = kn_op_attr_float(op, "softcap", 0.0f),
        .causal = kn_op_attr_int(op, "is_causal", 0) != 0,
        .qk_mode = (int)mode,
    };
    /* compiled artifacts: kiln's flash-style kernel (runtime/src/attention.c)
     * unless it declines; the reference evaluator: the plain C kernel, the
     * oracle */
    if (op->sess) {
        bool more = opt_out(op, out, 1) || opt_out(op, out, 2) || opt_out(op, out, 3);
        st = kn_attention_fast(op->sess, &dm, &pr, q, k, v, mask, pk, np, &out[0], more, op->compute);
        if (st != KN_ERR_UNSUPPORTED) return kernel_status(op, st);
        op->sess->impl = NULL;
    }
    return kernel_status(op, kn_k_attention(&dm, &pr, q, k, v, mask, pk, pv, np, &out[0], opt_out(op, out, 1),
                                            opt_out(op, out, 2), opt_out(op, out, 3)));
}

/* ---- token packing (passes/pack_tokens.c) ---------------------------------------- */

/* The padding mask of the packed ops: [B, S], any numeric or bool dtype,
 * a token is real where it is not 0. Returns the count of real tokens of
 * each batch in len[0..B) (len may be NULL) and in total. */
static int mask_lengths(const kn_opdesc *op, const kn_tensor *m, int64_t B, int64_t S, int64_t *len, int64_t *total)
{
    char b1[64];
    if (m->dtype == KN_STRING || kn_dtype_info(m->dtype)->bits < 8)
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "mask has dtype %s, expected a number or bool",
                           kn_dtype_name(m->dtype));
    if (m->rank != 2 || m->dims[0] != B || m->dims[1] != S)
        return kn_op_error(op, KN_ERR_INVALID, "mask %s: expected %lldx%lld (batch x sequence)",
                           kn_shape_str(m->rank, m->dims, b1, sizeof b1), (long long)B, (long long)S);
    *total = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t n = 0;
        for (int64_t s = 0; s < S; s++) n += kn_load_f64(m->dtype, m->data, (size_t)(b * S + s)) != 0;
        if (len) len[b] = n;
        *total += n;
    }
    return KN_OK;
}

/* Bytes of one token of t: the product of its dims from `from` on. */
static size_t row_bytes(const kn_tensor *t, int from)
{
    size_t n = kn_dtype_nbytes(t->dtype, 1);
    for (int d = from; d < t->rank; d++) n *= (size_t)t->dims[d];
    return n;
}

/* kiln::PackRows(X [B, S, ...], mask [B, S]) -> [1, T, ...]: the real
 * tokens, in order; T = their count, or 1 (a row of zeros) when there are
 * none, so that every packed tensor has a row. */
static int exec_pack_rows(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "mask"))) return st;
    const kn_tensor *x = in[0], *m = in[1];
    if (x->rank < 2) return kn_op_error(op, KN_ERR_INVALID, "X has rank %d, expected batch x sequence x ...", x->rank);
    if (x->dtype == KN_STRING || kn_dtype_info(x->dtype)->bits < 8)
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "X has dtype %s, which is not stored a byte or more per element",
                           kn_dtype_name(x->dtype));
    int64_t B = x->dims[0], S = x->dims[1], total;
    if ((st = mask_lengths(op, m, B, S, NULL, &total))) return st;
    int64_t od[KN_MAX_RANK] = {1, total > 0 ? total : 1};
    memcpy(od + 2, x->dims + 2, sizeof(int64_t) * (size_t)(x->rank - 2));
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, od))) return st;
    size_t rb = row_bytes(x, 2);
    unsigned char *dst = out[0].data;
    const unsigned char *src = x->data;
    if (total == 0) memset(dst, 0, rb);
    for (int64_t t = 0; t < B * S; t++)
        if (kn_load_f64(m->dtype, m->data, (size_t)t) != 0) memcpy(dst, src + (size_t)t * rb, rb), dst += rb;
    return KN_OK;
}

/* kiln::UnpackRows(Y [1, T, ...], mask [B, S]) -> [B, S, ...]: PackRows
 * undone; padded tokens are 0. */
static int exec_unpack_rows(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "Y")) || (st = need_input(op, in, 1, "mask"))) return st;
    const kn_tensor *y = in[0], *m = in[1];
    if (y->dtype == KN_STRING || kn_dtype_info(y->dtype)->bits < 8)
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "Y has dtype %s, which is not stored a byte or more per element",
                           kn_dtype_name(y->dtype));
    if (m->rank != 2)
        return kn_op_error(op, KN_ERR_INVALID, "mask has rank %d, expected 2 (batch x sequence)", m->rank);
    int64_t B = m->dims[0], S = m->dims[1], total;
    if ((st = mask_lengths(op, m, B, S, NULL, &total))) return st;
    if (y->rank < 2 || y->dims[0] != 1 || y->dims[1] != (total > 0 ? total : 1))
        return kn_op_error(op, KN_ERR_INVALID, "Y has %lld packed tokens, the mask %lld",
                           (long long)(y->rank >= 2 ? y->dims[1] : -1), (long long)total);
    int64_t od[KN_MAX_RANK] = {B, S};
    memcpy(od + 2, y->dims + 2, sizeof(int64_t) * (size_t)(y->rank - 2));
    if ((st = alloc_out(op, out, 0, y->dtype, y->rank, od))) return st;
    size_t rb = row_bytes(y, 2);
    unsigned char *dst = out[0].data;
    const unsigned char *src = y->data;
    for (int64_t t = 0; t < B * S; t++) {
        if (kn_load_f64(m->dtype, m->data, (size_t)t) != 0) memcpy(dst + (size_t)t * rb, src, rb), src += rb;
        else memset(dst + (size_t)t * rb, 0, rb);
    }
    return KN_OK;
}

/* A view of rows [at, at + n) of a packed [1, T, W] tensor. */
static kn_tensor rows_view(const kn_tensor *t, int64_t at, int64_t n)
{
    kn_tensor v = *t;
    size_t rb = row_bytes(t, 2);
    v.own = KN_BORROWED;
    v.dims[1] = n;
    v.data = (unsigned char *)t->data + (size_t)at * rb;
    v.nbytes = (size_t)n * rb;
    v.map_base = NULL, v.map_len = 0;
    return v;
}

/* kiln::PackedAttention(Q [1, T, Hq*D], K [1, T, Hkv*D], V [1, T, Hkv*Dv],
 * mask [B, S]) -> [1, T, Hq*Dv]: the 3-D Attention of each sequence of the
 * batch over its own real tokens (those PackRows kept, in order), as
 * Attention with a key padding mask computes them at the real tokens. */
static int exec_packed_attention(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    static const char *names[] = {"Q", "K", "V", "mask"};
    for (int i = 0; i < 4; i++)
        if ((st = need_input(op, in, i, names[i]))) return st;
    const kn_tensor *q = in[0], *k = in[1], *v = in[2], *m = in[3];
    if (!kn_nn_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "Q, K and V must share one float dtype");
    if (q->rank != 3 || k->rank != 3 || v->rank != 3 || q->dims[0] != 1 || k->dims[1] != q->dims[1] ||
        v->dims[1] != q->dims[1] || k->dims[0] != 1 || v->dims[0] != 1)
        return kn_op_error(op, KN_ERR_INVALID, "Q, K and V must be packed [1, T, width] with one T");
    if (m->rank != 2)
        return kn_op_error(op, KN_ERR_INVALID, "mask has rank %d, expected 2 (batch x sequence)", m->rank);
    int64_t B = m->dims[0], T = q->dims[1], total;
    int64_t *len = malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    if (!len) return kn_op_error(op, KN_ERR_NOMEM, "out of memory");
    st = mask_lengths(op, m, B, m->dims[1], len, &total);
    if (!st && T != (total > 0 ? total : 1))
        st = kn_op_error(op, KN_ERR_INVALID, "Q has %lld packed tokens, the mask %lld", (long long)T, (long long)total);
    kn_attn_dims dm;
    int yr;
    int64_t yd[4], pkd[4], pvd[4], qkd[4];
    if (!st)
        st = kn_nn_attention_geometry(op, q->rank, q->dims, k->rank, k->dims, v->rank, v->dims, -1, NULL, &dm, &yr, yd,
                                      pkd, pvd, qkd);
    if (!st) st = alloc_out(op, out, 0, q->dtype, yr, yd);
    if (st) {
        free(len);
        return st;
    }
    const kn_attr *sa = kn_op_attr(op, "scale");
    kn_attn_params pr = {
        .scale = sa ? kn_op_attr_float(op, "scale", 1.0f) : 1.0 / sqrt((double)dm.D),
        .softcap = kn_op_attr_float(op, "softcap", 0.0f),
    };
    if (total == 0) memset(out[0].data, 0, out[0].nbytes); /* PackRows' row of zeros */
    int64_t at = 0;
    for (int64_t b = 0; b < B && !st && total > 0; b++) {
        if (len[b] == 0) continue;
        kn_tensor qb = rows_view(q, at, len[b]), kb = rows_view(k, at, len[b]), vb = rows_view(v, at, len[b]),
                  yb = rows_view(&out[0], at, len[b]);
        kn_attn_dims db = dm;
        db.B = 1, db.Sq = db.Skv = len[b];
        st = KN_ERR_UNSUPPORTED;
        if (op->sess) {
            st = kn_attention_fast(op->sess, &db, &pr, &qb, &kb, &vb, NULL, NULL, NULL, &yb, false, op->compute);
            if (st == KN_ERR_UNSUPPORTED) op->sess->impl = NULL;
        }
        if (st == KN_ERR_UNSUPPORTED)
            st = kn_k_attention(&db, &pr, &qb, &kb, &vb, NULL, NULL, NULL, NULL, &yb, NULL, NULL, NULL);
        at += len[b];
    }
    free(len);
    return kernel_status(op, st);
}

static int exec_rotary(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "cos_cache")) ||
        (st = need_input(op, in, 2, "sin_cache")))
        return st;
    const kn_tensor *x = in[0], *cc = in[1], *sc = in[2], *pos = kn_op_input(op, in, 3);
    if (!kn_nn_is_float(x->dtype) || cc->dtype != x->dtype || sc->dtype != x->dtype)
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "X, cos_cache and sin_cache must share one float dtype");
    int64_t H, rot;
    bool three_d;
    if ((st = kn_nn_rotary_geometry(op, x->rank, x->dims, &H, &rot, &three_d))) return st;
    int64_t B = x->dims[0], S = three_d ? x->dims[1] : x->dims[2];
    char b1[64];
    if (pos) {
        if (pos->rank != 2 || pos->dims[0] != B || pos->dims[1] != S || (pos->dtype != KN_I64 && pos->dtype != KN_I32))
            return kn_op_error(op, KN_ERR_INVALID, "position_ids %s: expected int64 %lldx%lld",
                               kn_shape_str(pos->rank, pos->dims, b1, sizeof b1), (long long)B, (long long)S);
        if (cc->rank != 2 || cc->dims[1] != rot / 2 || sc->rank != 2 || memcmp(sc->dims, cc->dims, 2 * sizeof(int64_t)))
            return kn_op_error(op, KN_ERR_INVALID, "cos_cache/sin_cache %s: expected max_position x %lld",
                               kn_shape_str(cc->rank, cc->dims, b1, sizeof b1), (long long)(rot / 2));
    } else {
        int64_t want[3] = {B, S, rot / 2};
        if (cc->rank != 3 || sc->rank != 3 || memcmp(cc->dims, want, sizeof want) || memcmp(sc->dims, want, sizeof want))
            return kn_op_error(op, KN_ERR_INVALID, "cos_cache/sin_cache %s: expected %s without position_ids",
                               kn_shape_str(cc->rank, cc->dims, b1, sizeof b1), kn_shape_str(3, want, b1 + 32, 32));
    }
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, x->dims))) return st;
    return kernel_status(op, kn_k_rotary(x, cc, sc, pos, H, rot, kn_op_attr_int(op, "interleaved", 0) != 0, three_d,
                                         &out[0]));
}

/* ---- Instance / Group normalization, LRN, LpNormalization, MVN ------------------- */

/* X of a channel-normalization: a float N x C x ... tensor. */
static int check_nc_float(const kn_opdesc *op, const kn_tensor *const *in, int min_rank)
{
    int st = need_input(op, in, 0, "X");
    if (st) return st;
    if (!kn_nn_is_float(in[0]->dtype))
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(in[0]->dtype));
    if (in[0]->rank < min_rank)
        return kn_op_error(op, KN_ERR_INVALID, "X has rank %d, expected at least %d", in[0]->rank, min_rank);
    return KN_OK;
}

static int exec_instancenorm(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st = check_nc_float(op, in, 3);
    if (st) return st;
    int64_t C = in[0]->dims[1];
    if ((st = check_chan_param(op, in, 1, "scale", C)) || (st = check_chan_param(op, in, 2, "B", C))) return st;
    if ((st = alloc_out(op, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    double eps = kn_op_attr_float(op, "epsilon", 1e-5f);
    return kernel_status(op, kn_k_instancenorm(in[0], in[1], in[2], eps, &out[0]));
}

static int exec_groupnorm(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st = check_nc_float(op, in, 3);
    if (st) return st;
    int64_t C = in[0]->dims[1], G = kn_op_attr_int(op, "num_groups", -1);
    if (G < 1 || C % G)
        return kn_op_error(op, KN_ERR_INVALID, "num_groups %lld must be positive and divide the %lld channels",
                           (long long)G, (long long)C);
    if ((st = need_input(op, in, 1, "scale"))) return st;
    /* Opset 18 has one scale/bias per group; opset 21 one per channel. */
    bool per_channel = op->opset >= 21 || (kn_tensor_numel(in[1]) == C && C != G);
    int64_t want = per_channel ? C : G;
    if ((st = check_chan_param(op, in, 1, "scale", want)) || (st = check_chan_param(op, in, 2, "bias", want))) return st;
    if ((st = alloc_out(op, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    double eps = kn_op_attr_float(op, "epsilon", 1e-5f);
    return kernel_status(op, kn_k_groupnorm(in[0], in[1], in[2], G, eps, per_channel, &out[0]));
}

static int exec_lrn(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st = check_nc_float(op, in, 2);
    if (st) return st;
    int64_t size = kn_op_attr_int(op, "size", -1);
    if (size < 1) return kn_op_error(op, KN_ERR_INVALID, "attribute 'size' is %lld, must be positive", (long long)size);
    if ((st = alloc_out(op, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    double alpha = kn_op_attr_float(op, "alpha", 1e-4f), beta = kn_op_attr_float(op, "beta", 0.75f);
    return kernel_status(op, kn_k_lrn(in[0], size, alpha, beta, kn_op_attr_float(op, "bias", 1.0f), &out[0]));
}

static int exec_lpnorm(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st = check_nc_float(op, in, 1);
    if (st) return st;
    int axis = kn_norm_axis(kn_op_attr_int(op, "axis", -1), in[0]->rank);
    int64_t p = kn_op_attr_int(op, "p", 2);
    if (axis < 0) return kn_op_error(op, KN_ERR_INVALID, "axis is out of range for rank %d", in[0]->rank);
    if (p != 1 && p != 2) return kn_op_error(op, KN_ERR_INVALID, "p is %lld, must be 1 or 2", (long long)p);
    if ((st = alloc_out(op, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    return kernel_status(op, kn_k_lpnorm(in[0], axis, p, &out[0]));
}

static int exec_mvn(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st = check_nc_float(op, in, 1);
    if (st) return st;
    static const int64_t def_axes[] = {0, 2, 3};
    const int64_t *axes;
    int na = kn_op_attr_ints(op, "axes", &axes);
    if (!kn_op_attr(op, "axes")) axes = def_axes, na = 3;
    unsigned mask = 0;
    for (int i = 0; i < na; i++) {
        int a = kn_norm_axis(axes[i], in[0]->rank);
        if (a < 0) return kn_op_error(op, KN_ERR_INVALID, "axes[%d] = %lld is out of range for rank %d", i,
                                      (long long)axes[i], in[0]->rank);
        mask |= 1u << a;
    }
    if ((st = alloc_out(op, out, 0, in[0]->dtype, in[0]->rank, in[0]->dims))) return st;
    return kernel_status(op, kn_k_mvn(in[0], mask, &out[0]));
}

/* ---- MaxUnpool, MaxRoiPool, RoiAlign, Col2Im ---------------------------------------- */

/* Copies the overlapping corner (from index 0 on every axis) of src into dst. */
static void copy_corner(const kn_tensor *src, kn_tensor *dst)
{
    int64_t dims[KN_MAX_RANK], ss[KN_MAX_RANK], ds[KN_MAX_RANK];
    size_t es = kn_dtype_size(src->dtype);
    for (int d = 0; d < src->rank; d++) dims[d] = src->dims[d] < dst->dims[d] ? src->dims[d] : dst->dims[d];
    int64_t cnt = kn_shape_numel(src->rank, dims);
    kn_shape_strides(src->rank, src->dims, ss);
    kn_shape_strides(dst->rank, dst->dims, ds);
    kn_index it;
    kn_index_init(&it, src->rank, dims);
    for (int64_t i = 0; i < cnt; i++, kn_index_next(&it))
        memcpy((char *)dst->data + (size_t)kn_index_offset(&it, ds) * es,
               (const char *)src->data + (size_t)kn_index_offset(&it, ss) * es, es);
}

static int exec_maxunpool(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "I"))) return st;
    if (!kn_dtype_info(in[1]->dtype)->is_integer)
        return kn_op_error(op, KN_ERR_INVALID, "indices have dtype %s, expected an integer type", kn_dtype_name(in[1]->dtype));
    if (!kn_dtype_size(in[0]->dtype)) return kn_op_error(op, KN_ERR_UNSUPPORTED, "packed dtypes are not supported");
    int64_t od[KN_MAX_RANK], nat[KN_MAX_RANK];
    const kn_tensor *x = in[0];
    if ((st = kn_nn_unpool_geometry(op, x->rank, x->dims, kn_op_input(op, in, 2), nat, od))) return st;
    if ((st = alloc_out(op, out, 0, x->dtype, x->rank, od))) return st;
    if (!memcmp(nat, od, sizeof(int64_t) * (size_t)x->rank))
        return kernel_status(op, kn_k_maxunpool(x, in[1], &out[0]));
    /* Indices address the attribute-implied shape; output_shape only pads
     * (or crops) that result at the end of each axis, as onnxruntime does. */
    kn_tensor tmp = {0};
    if ((st = kn_tensor_alloc(&tmp, x->dtype, x->rank, nat))) return kn_op_error(op, st, "%s", kn_last_error());
    st = kernel_status(op, kn_k_maxunpool(x, in[1], &tmp));
    if (!st) copy_corner(&tmp, &out[0]);
    kn_tensor_free(&tmp);
    return st;
}

static int exec_maxroipool(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    int64_t od[4], oh = 0, ow = 0;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "rois")) || (st = kn_nn_roipool_size(op, &oh, &ow)))
        return st;
    if (!kn_nn_is_float(in[0]->dtype) || !kn_nn_is_float(in[1]->dtype))
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "X and rois must be float tensors");
    if ((st = kn_nn_roi_geometry(op, in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, 5, oh, ow, od))) return st;
    if ((st = alloc_out(op, out, 0, in[0]->dtype, 4, od))) return st;
    return kernel_status(op, kn_k_maxroipool(in[0], in[1], kn_op_attr_float(op, "spatial_scale", 1.0f), &out[0]));
}

static int exec_roialign(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st;
    if ((st = need_input(op, in, 0, "X")) || (st = need_input(op, in, 1, "rois")) ||
        (st = need_input(op, in, 2, "batch_indices")))
        return st;
    if (!kn_nn_is_float(in[0]->dtype) || !kn_nn_is_float(in[1]->dtype))
        return kn_op_error(op, KN_ERR_UNSUPPORTED, "X and rois must be float tensors");
    if (!kn_dtype_info(in[2]->dtype)->is_integer)
        return kn_op_error(op, KN_ERR_INVALID, "batch_indices must be an integer tensor");
    int64_t od[4];
    if ((st = kn_nn_roi_geometry(op, in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, 4, kn_op_attr_int(op, "output_height", 1),
                           kn_op_attr_int(op, "output_width", 1), od)))
        return st;
    if (kn_tensor_numel(in[2]) != od[0])
        return kn_op_error(op, KN_ERR_INVALID, "batch_indices has %lld entries for %lld rois",
                           (long long)kn_tensor_numel(in[2]), (long long)od[0]);
    const char *mode = kn_op_attr_string(op, "mode", "avg");
    if (strcmp(mode, "avg") && strcmp(mode, "max")) return kn_op_error(op, KN_ERR_INVALID, "unknown mode '%s'", mode);
    /* Opset 16 added coordinate_transformation_mode, defaulting to half_pixel;
     * before, the behaviour was output_half_pixel. */
    const char *ctm = kn_op_attr_string(op, "coordinate_transformation_mode",
                                     op->opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel"))
        return kn_op_error(op, KN_ERR_INVALID, "unknown coordinate_transformation_mode '%s'", ctm);
    int64_t sr = kn_op_attr_int(op, "sampling_ratio", 0);
    if (sr < 0 || sr > 4096) return kn_op_error(op, KN_ERR_INVALID, "sampling_ratio %lld is out of range", (long long)sr);
    if ((st = alloc_out(op, out, 0, in[0]->dtype, 4, od))) return st;
    double scale = kn_op_attr_float(op, "spatial_scale", 1.0f);
    return kernel_status(op, kn_k_roialign(in[0], in[1], in[2], !strcmp(mode, "max"), sr, scale,
                                           !strcmp(ctm, "half_pixel"), &out[0]));
}

static int exec_col2im(const kn_opdesc *op, const kn_tensor *const *in, kn_tensor *out)
{
    int st, orank;
    if ((st = need_input(op, in, 0, "input")) || (st = need_input(op, in, 1, "image_shape")) ||
        (st = need_input(op, in, 2, "block_shape")))
        return st;
    if (!kn_nn_is_float(in[0]->dtype)) return kn_op_error(op, KN_ERR_UNSUPPORTED, "dtype %s is not supported", kn_dtype_name(in[0]->dtype));
    int64_t od[KN_MAX_RANK];
    kn_nn_window w;
    if ((st = kn_nn_col2im_geometry(op, in[0]->rank, in[0]->dims, in[1], in[2], &w, &orank, od))) return st;
    if ((st = alloc_out(op, out, 0, in[0]->dtype, orank, od))) return st;
    return kernel_status(op, kn_k_col2im(in[0], &w, &out[0]));
}

const kn_exec_impl kn_exec_nn[] = {
    {KN_OP_Conv, exec_conv},
    {KN_OP_ConvTranspose, exec_convt},
    {KN_OP_MaxPool, exec_maxpool},
    {KN_OP_AveragePool, exec_avgpool},
    {KN_OP_LpPool, exec_lppool},
    {KN_OP_GlobalAveragePool, exec_gap},
    {KN_OP_GlobalMaxPool, exec_gmp},
    {KN_OP_GlobalLpPool, exec_glp},
    {KN_OP_BatchNormalization, exec_batchnorm},
    {KN_OP_LayerNormalization, exec_layernorm},
    {KN_OP_RMSNormalization, exec_rmsnorm},
    {KN_OP_Attention, exec_attention},
    {KN_OP_RotaryEmbedding, exec_rotary},
    {KN_OP_PackRows, exec_pack_rows},
    {KN_OP_UnpackRows, exec_unpack_rows},
    {KN_OP_PackedAttention, exec_packed_attention},
    {KN_OP_InstanceNormalization, exec_instancenorm},
    {KN_OP_GroupNormalization, exec_groupnorm},
    {KN_OP_LRN, exec_lrn},
    {KN_OP_LpNormalization, exec_lpnorm},
    {KN_OP_MeanVarianceNormalization, exec_mvn},
    {KN_OP_MaxUnpool, exec_maxunpool},
    {KN_OP_MaxRoiPool, exec_maxroipool},
    {KN_OP_RoiAlign, exec_roialign},
    {KN_OP_Col2Im, exec_col2im},
    {KN_OP_UNKNOWN, NULL},
};
