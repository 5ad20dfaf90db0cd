/*
 * Execution of the 'misc' ops (see opdesc.h), those no other family holds:
 * the losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss),
 * CenterCropPad, ReverseSequence and TfIdfVectorizer. Kernels are in
 * runtime/kernels/ref/misc.c; the attribute and shape rules (misc_int.h)
 * are shared with the family's type inference in the IR (ir/ops/misc.c).
 */
#include <string.h>

#include "misc_int.h"

/* ---- losses --------------------------------------------------------------------------- */

int kn_misc_loss_reduction(const kn_opdesc *d, kn_loss_reduction *out)
{
    const char *r = kn_op_attr_string(d, "reduction", "mean");
    if (!strcmp(r, "none")) *out = KN_LOSS_NONE;
    else if (!strcmp(r, "sum")) *out = KN_LOSS_SUM;
    else if (!strcmp(r, "mean")) *out = KN_LOSS_MEAN;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown reduction '%s'", r);
    return KN_OK;
}

/* NLL of log-probabilities lp (the input itself, or SCE's log-softmax). */
static int run_nll(const kn_opdesc *d, const kn_tensor *lp, const kn_tensor *target, const kn_tensor *weight,
                   kn_tensor *out)
{
    kn_loss_reduction red;
    int st = kn_misc_loss_reduction(d, &red);
    if (st) return st;
    if (!kn_dtype_info(target->dtype)->is_integer)
        return kn_op_error(d, KN_ERR_INVALID, "target must be integer, got %s", kn_dtype_name(target->dtype));
    const kn_attr *ii = kn_op_attr(d, "ignore_index");
    if (red == KN_LOSS_NONE) st = kn_tensor_alloc(out, lp->dtype, target->rank, target->dims);
    else st = kn_tensor_alloc(out, lp->dtype, 0, NULL);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_nll_loss(lp, target, weight, ii != NULL, ii ? ii->i : 0, red, out));
}

static int exec_nll(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    return run_nll(d, in[0], in[1], kn_op_input(d, in, 2), &out[0]);
}

static int exec_sce(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    kn_tensor lp = {0};
    int st = kn_tensor_alloc(&lp, in[0]->dtype, in[0]->rank, in[0]->dims);
    if (!st) st = kn_k_log_softmax_axis1(in[0], &lp);
    if (st) {
        kn_tensor_free(&lp);
        return kn_op_fail(d, st);
    }
    st = run_nll(d, &lp, in[1], kn_op_input(d, in, 2), &out[0]);
    if (!st && kn_op_has_output(d, 1)) out[1] = lp;
    else kn_tensor_free(&lp);
    return st;
}

/* ---- CenterCropPad / ReverseSequence ---------------------------------------------------- */

/* Output dims of CenterCropPad: x's dims with the listed axes set from the
 * shape input. Fails naming the node on a bad axis or negative size. */
int kn_misc_ccp_dims(const kn_opdesc *d, int rank, const int64_t *xdims, const kn_tensor *shape, int64_t *dims)
{
    const int64_t *axes;
    int na = kn_op_attr_ints(d, "axes", &axes);
    int64_t cnt = kn_tensor_numel(shape);
    if (!kn_dtype_info(shape->dtype)->is_integer || shape->rank != 1)
        return kn_op_error(d, KN_ERR_INVALID, "shape must be a 1-D integer tensor");
    if (cnt != (na ? na : rank))
        return kn_op_error(d, KN_ERR_INVALID, "shape has %lld entries for %d axes", (long long)cnt, na ? na : rank);
    memcpy(dims, xdims, sizeof *dims * (size_t)rank);
    for (int i = 0; i < cnt; i++) {
        int a = na ? kn_norm_axis(axes[i], rank) : i;
        if (a < 0) return kn_op_error(d, KN_ERR_INVALID, "axis %lld is out of range for rank %d", (long long)axes[i], rank);
        dims[a] = kn_load_i64(shape->dtype, shape->data, (size_t)i);
        if (dims[a] < 0) return kn_op_error(d, KN_ERR_INVALID, "target size %lld is negative", (long long)dims[a]);
    }
    return KN_OK;
}

static int exec_ccp(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    int64_t dims[KN_MAX_RANK];
    int st = kn_misc_ccp_dims(d, in[0]->rank, in[0]->dims, in[1], dims);
    if (st) return st;
    st = kn_tensor_alloc(&out[0], in[0]->dtype, in[0]->rank, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_center_crop_pad(in[0], &out[0]));
}

static int exec_revseq(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    int rank = in[0]->rank;
    int64_t ba = kn_op_attr_int(d, "batch_axis", 1), ta = kn_op_attr_int(d, "time_axis", 0);
    int b = kn_norm_axis(ba, rank), t = kn_norm_axis(ta, rank);
    if (b < 0 || t < 0 || b == t)
        return kn_op_error(d, KN_ERR_INVALID, "batch_axis %lld / time_axis %lld invalid for rank %d",
                             (long long)ba, (long long)ta, rank);
    int st = kn_tensor_alloc(&out[0], in[0]->dtype, rank, in[0]->dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_reverse_sequence(in[0], in[1], b, t, &out[0]));
}

/* ---- TfIdfVectorizer ------------------------------------------------------------------- */

/* Reads the attributes into p (pool_strings: unsupported). */
int kn_misc_tfidf_params(const kn_opdesc *d, kn_tfidf_params *p)
{
    memset(p, 0, sizeof *p);
    const char *mode = kn_op_attr_string(d, "mode", "");
    if (!strcmp(mode, "TF")) p->mode = KN_TFIDF_TF;
    else if (!strcmp(mode, "IDF")) p->mode = KN_TFIDF_IDF;
    else if (!strcmp(mode, "TFIDF")) p->mode = KN_TFIDF_TFIDF;
    else return kn_op_error(d, KN_ERR_INVALID, "unknown mode '%s'", mode);
    if (kn_op_attr(d, "pool_strings")) return kn_op_error(d, KN_ERR_UNSUPPORTED, "pool_strings is not supported");
    p->min_gram = kn_op_attr_int(d, "min_gram_length", 1);
    p->max_gram = kn_op_attr_int(d, "max_gram_length", 1);
    p->max_skip = kn_op_attr_int(d, "max_skip_count", 0);
    if (p->min_gram < 1 || p->max_gram < p->min_gram || p->max_skip < 0 || p->max_skip > (1 << 20))
        return kn_op_error(d, KN_ERR_INVALID, "min_gram_length %lld / max_gram_length %lld / max_skip_count %lld invalid",
                             (long long)p->min_gram, (long long)p->max_gram, (long long)p->max_skip);
    p->n_pool = kn_op_attr_ints(d, "pool_int64s", &p->pool);
    p->n_counts = kn_op_attr_ints(d, "ngram_counts", &p->counts);
    p->n_indexes = kn_op_attr_ints(d, "ngram_indexes", &p->indexes);
    p->n_weights = kn_op_attr_floats(d, "weights", &p->weights);
    if (!p->n_indexes) return kn_op_error(d, KN_ERR_INVALID, "ngram_indexes is missing");
    int64_t mx = -1;
    for (int64_t i = 0; i < p->n_indexes; i++) {
        if (p->indexes[i] < 0 || p->indexes[i] > ((int64_t)1 << 31))
            return kn_op_error(d, KN_ERR_INVALID, "ngram_indexes[%lld] = %lld is out of range", (long long)i,
                                 (long long)p->indexes[i]);
        if (p->indexes[i] > mx) mx = p->indexes[i];
    }
    p->out_size = mx + 1;
    return KN_OK;
}

static int exec_tfidf(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    kn_tfidf_params p;
    int st = kn_misc_tfidf_params(d, &p);
    if (st) return st;
    const kn_tensor *x = in[0];
    if (x->dtype != KN_I64 && x->dtype != KN_I32)
        return kn_op_error(d, KN_ERR_UNSUPPORTED, "X of type %s (only int32/int64 are supported)", kn_dtype_name(x->dtype));
    if (x->rank != 1 && x->rank != 2) return kn_op_error(d, KN_ERR_INVALID, "X must be [C] or [B, C], got rank %d", x->rank);
    int64_t dims[2] = {x->dims[0], p.out_size};
    st = x->rank == 1 ? kn_tensor_alloc(&out[0], KN_F32, 1, &p.out_size) : kn_tensor_alloc(&out[0], KN_F32, 2, dims);
    if (st) return kn_op_fail(d, st);
    return kn_op_fail(d, kn_k_tfidf(x, &p, &out[0]));
}

/* ---- the family table ---------------------------------------------------------- */

const kn_exec_impl kn_exec_misc[] = {
    {KN_OP_NegativeLogLikelihoodLoss, exec_nll},
    {KN_OP_SoftmaxCrossEntropyLoss, exec_sce},
    {KN_OP_CenterCropPad, exec_ccp},
    {KN_OP_ReverseSequence, exec_revseq},
    {KN_OP_TfIdfVectorizer, exec_tfidf},
    {KN_OP_UNKNOWN, NULL},
};
