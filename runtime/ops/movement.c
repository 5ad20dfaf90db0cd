/*
 * Execution of the 'movement' ops (see opdesc.h): shape manipulation
 * (Reshape, Flatten, Squeeze, Unsqueeze, Transpose) and data movement
 * (Concat, Split, Slice, Dropout) here, with the family's table; Gather*
 * and Scatter* in movement_gather.c; Expand, Tile, DepthToSpace and
 * SpaceToDepth in movement_expand.c; Pad, Resize and Upsample in
 * movement_resize.c. Kernels are in runtime/kernels/ref.
 *
 * Each op's output shape is computed by ONE function (movement_int.h) that
 * serves both execution and the IR's type inference: it sees the inputs'
 * shapes and whatever input values are known (constants during inference,
 * everything during execution), so the static shapes inferred at compile
 * time can never disagree with what execution produces. Unknown dims are -1.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastops.h"
#include "k_movement.h"
#include "movement_int.h"

/* ---- shared plumbing -------------------------------------------------------- */

void kn_mv_sh_init(kn_mv_shape *s, int rank)
{
    memset(s, 0, sizeof *s);
    s->rank = rank;
    for (int i = 0; i < KN_MAX_RANK; i++) s->dims[i] = -1;
}

void kn_mv_sh_copy_dim(kn_mv_shape *o, int oi, const kn_mv_shape *s, int si)
{
    o->dims[oi] = s->dims[si];
    o->sym[oi] = s->sym[si];
}

static kn_mv_shape shape_of_tensor(const kn_tensor *t)
{
    kn_mv_shape s;
    kn_mv_sh_init(&s, t->rank);
    for (int i = 0; i < t->rank; i++) s.dims[i] = t->dims[i];
    return s;
}

/* Element count of a shape, or -1 if any dim is unknown. */
static int64_t sh_numel(const kn_mv_shape *s, int from, int to)
{
    if (s->rank < 0) return -1;
    return kn_shape_numel(to - from, s->dims + from);
}


void kn_mv_args_from_tensors(const kn_opdesc *d, const kn_tensor *const *in, kn_mv_args *a)
{
    memset(a, 0, sizeof *a);
    a->d = d;
    for (int i = 0; i < KN_MV_MAXIN; i++) {
        const kn_tensor *t = i < d->n_inputs ? in[i] : NULL;
        if (!t) {
            kn_mv_sh_init(&a->shp[i], -1);
            continue;
        }
        a->has[i] = true;
        a->dt[i] = t->dtype;
        a->val[i] = t;
        a->shp[i] = shape_of_tensor(t);
    }
}

/* Reads integer input i into out (at most max); *out_n = -1 if its value is
 * not known (a non-constant input during inference). */
int kn_mv_ints(const kn_mv_args *a, int i, const char *what, int64_t *out, int max, int *out_n)
{
    *out_n = -1;
    const kn_tensor *t = a->val[i];
    if (!t) return KN_OK;
    const kn_dtype_traits *tr = kn_dtype_info(t->dtype);
    if (!tr->is_integer)
        return kn_op_error(a->d, KN_ERR_INVALID, "%s must be an integer tensor, got %s", what, kn_dtype_name(t->dtype));
    if (t->rank > 1) return kn_op_error(a->d, KN_ERR_INVALID, "%s must be 1-D, got rank %d", what, t->rank);
    int64_t cnt = kn_tensor_numel(t);
    if (cnt < 0 || cnt > max)
        return kn_op_error(a->d, KN_ERR_INVALID, "%s has %lld entries, at most %d supported", what, (long long)cnt, max);
    for (int64_t k = 0; k < cnt; k++) out[k] = kn_load_i64(t->dtype, t->data, (size_t)k);
    *out_n = (int)cnt;
    return KN_OK;
}

/* Same for an attribute list; *out_n = -1 if absent. */
int kn_mv_attr_ints(const kn_opdesc *d, const char *name, int64_t *out, int max, int *out_n)
{
    const int64_t *p = NULL;
    *out_n = -1;
    if (!kn_op_attr(d, name)) return KN_OK;
    int cnt = kn_op_attr_ints(d, name, &p);
    if (cnt > max) return kn_op_error(d, KN_ERR_INVALID, "attribute '%s' has %d entries, at most %d supported", name, cnt, max);
    for (int k = 0; k < cnt; k++) out[k] = p[k];
    *out_n = cnt;
    return KN_OK;
}


/* Re-raises the last (kernel) error with the node's name in front. */
int kn_mv_fail(const kn_opdesc *d, int st)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s", kn_last_error());
    return kn_op_error(d, st, "%s", msg);
}

static int mv_alloc(const kn_opdesc *d, kn_tensor *out, kn_dtype dt, const kn_mv_shape *s, bool zero)
{
    bool known = s->rank >= 0;
    for (int i = 0; known && i < s->rank; i++) known = s->dims[i] >= 0;
    if (!known)
        return kn_op_error(d, KN_ERR_INTERNAL, "output shape is not fully known at evaluation");
    int st = kn_op_alloc_output(d, out, dt, s->rank, s->dims, zero);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

int kn_mv_alloc(const kn_opdesc *d, kn_tensor *out, kn_dtype dt, const kn_mv_shape *s)
{
    return mv_alloc(d, out, dt, s, true);
}

int kn_mv_alloc_written(const kn_opdesc *d, kn_tensor *out, kn_dtype dt, const kn_mv_shape *s)
{
    return mv_alloc(d, out, dt, s, false);
}

/* Eval preamble: checks input 0, computes and allocates output 0 (every op
 * that uses it writes each element: kn_mv_alloc_written). */
int kn_mv_exec_begin(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out, kn_mv_shape_fn fn,
                      kn_mv_args *a)
{
    if (!kn_mv_in(d, in, 0)) return kn_op_error(d, KN_ERR_INVALID, "missing input 0");
    kn_mv_args_from_tensors(d, in, a);
    kn_mv_shape s;
    int st = fn(a, &s);
    if (st) return st;
    return kn_mv_alloc_written(d, &out[0], in[0]->dtype, &s);
}

/* Output 0 is input 0's bytes under a new shape (Reshape and friends). */
static int exec_view_copy(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out,
                          kn_mv_shape_fn fn)
{
    kn_mv_args a;
    int st = kn_mv_exec_begin(d, in, out, fn, &a);
    if (st) return st;
    if (out[0].nbytes != in[0]->nbytes)
        return kn_op_error(d, KN_ERR_INVALID, "output size differs from input size");
    if (in[0]->nbytes) memcpy(out[0].data, in[0]->data, in[0]->nbytes);
    return KN_OK;
}

#define MV_DEFINE(name)                                                                              \
    static int exec_##name(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out) \
    {                                                                                                \
        return exec_view_copy(d, in, out, shape_##name);                                        \
    }

/* ---- Reshape, Flatten, Squeeze, Unsqueeze -------------------------------- */

static int reshape_target(const kn_mv_args *a, int64_t *sh, int *cnt)
{
    const kn_opdesc *d = a->d;
    if (d->opset < 5) {
        int st = kn_mv_attr_ints(d, "shape", sh, KN_MAX_RANK, cnt);
        if (!st && *cnt < 0) return kn_op_error(d, KN_ERR_INVALID, "missing 'shape' attribute");
        return st;
    }
    if (!a->has[1]) return kn_op_error(d, KN_ERR_INVALID, "missing shape input");
    return kn_mv_ints(a, 1, "shape", sh, KN_MAX_RANK, cnt);
}

/* Fills the -1 slot from the element count, when everything is known. */
static int reshape_fill(const kn_opdesc *d, const kn_mv_shape *x, kn_mv_shape *o, int infer_at)
{
    int64_t in_n = sh_numel(x, 0, x->rank), rest = 1;
    bool known = in_n >= 0;
    for (int i = 0; i < o->rank; i++) {
        if (i == infer_at) continue;
        if (o->dims[i] < 0) known = false;
        else if (o->dims[i] && rest > INT64_MAX / o->dims[i])
            return kn_op_error(d, KN_ERR_INVALID, "target shape has too many elements");
        else rest *= o->dims[i];
    }
    if (!known) return KN_OK;
    if (infer_at < 0) {
        if (rest != in_n)
            return kn_op_error(d, KN_ERR_INVALID, "cannot reshape %lld elements into %lld", (long long)in_n, (long long)rest);
        return KN_OK;
    }
    if (rest == 0 || in_n % rest)
        return kn_op_error(d, KN_ERR_INVALID, "cannot infer the -1 dim: %lld elements do not divide into %lld",
                             (long long)in_n, (long long)rest);
    o->dims[infer_at] = in_n / rest;
    return KN_OK;
}

static int shape_reshape(const kn_mv_args *a, kn_mv_shape *o)
{
    const kn_opdesc *d = a->d;
    int64_t sh[KN_MAX_RANK];
    int cnt;
    int st = reshape_target(a, sh, &cnt);
    if (st) return st;
    if (cnt < 0) { /* shape not constant: the rank may still be known */
        const kn_mv_shape *s1 = &a->shp[1];
        kn_mv_sh_init(o, s1->rank == 1 && s1->dims[0] >= 0 && s1->dims[0] <= KN_MAX_RANK ? (int)s1->dims[0] : -1);
        return KN_OK;
    }
    bool allowzero = kn_op_attr_int(d, "allowzero", 0) != 0;
    const kn_mv_shape *x = &a->shp[0];
    kn_mv_sh_init(o, cnt);
    int infer_at = -1;
    for (int i = 0; i < cnt; i++) {
        if (sh[i] == -1) {
            if (infer_at >= 0) return kn_op_error(d, KN_ERR_INVALID, "shape has more than one -1");
            infer_at = i;
        } else if (sh[i] == 0 && !allowzero) {
            if (x->rank >= 0 && i >= x->rank)
                return kn_op_error(d, KN_ERR_INVALID, "shape[%d] = 0 copies a dim the input (rank %d) lacks", i, x->rank);
            if (x->rank >= 0) kn_mv_sh_copy_dim(o, i, x, i);
        } else if (sh[i] < 0) {
            return kn_op_error(d, KN_ERR_INVALID, "shape[%d] = %lld is negative", i, (long long)sh[i]);
        } else {
            o->dims[i] = sh[i];
        }
    }
    /* A symbolic input dim copied through is still unknown here; only the
     * fully static case can check the element count. */
    return reshape_fill(d, x, o, infer_at);
}
MV_DEFINE(reshape)

static int shape_flatten(const kn_mv_args *a, kn_mv_shape *o)
{
    const kn_mv_shape *x = &a->shp[0];
    kn_mv_sh_init(o, 2);
    if (x->rank < 0) return KN_OK;
    int64_t axis = kn_op_attr_int(a->d, "axis", 1);
    if (axis < 0) axis += x->rank;
    if (axis < 0 || axis > x->rank)
        return kn_op_error(a->d, KN_ERR_INVALID, "axis %lld is out of range for rank %d",
                             (long long)kn_op_attr_int(a->d, "axis", 1), x->rank);
    o->dims[0] = sh_numel(x, 0, (int)axis);
    o->dims[1] = sh_numel(x, (int)axis, x->rank);
    return KN_OK;
}
MV_DEFINE(flatten)

/* Axes of Squeeze/Unsqueeze: an attribute before opset 13, an input after.
 * *cnt = -1: none given; -2: given but not known yet. */
static int squeeze_axes(const kn_mv_args *a, int64_t *axes, int *cnt)
{
    if (a->d->opset < 13) return kn_mv_attr_ints(a->d, "axes", axes, KN_MAX_RANK, cnt);
    if (!a->has[1]) {
        *cnt = -1;
        return KN_OK;
    }
    int st = kn_mv_ints(a, 1, "axes", axes, KN_MAX_RANK, cnt);
    if (!st && *cnt < 0) *cnt = -2;
    return st;
}

/* Marks normalized axes in mark[0..r); fails on range errors and repeats. */
static int mark_axes(const kn_opdesc *d, const int64_t *axes, int cnt, int r, bool *mark)
{
    memset(mark, 0, sizeof(bool) * KN_MAX_RANK);
    for (int i = 0; i < cnt; i++) {
        int k;
        int st = kn_op_axis(d, axes[i], r, &k);
        if (st) return st;
        if (mark[k]) return kn_op_error(d, KN_ERR_INVALID, "axis %lld is repeated", (long long)axes[i]);
        mark[k] = true;
    }
    return KN_OK;
}

static int shape_squeeze(const kn_mv_args *a, kn_mv_shape *o)
{
    const kn_mv_shape *x = &a->shp[0];
    int64_t axes[KN_MAX_RANK];
    int cnt;
    int st = squeeze_axes(a, axes, &cnt);
    if (st) return st;
    kn_mv_sh_init(o, -1);
    if (x->rank < 0 || cnt == -2) return KN_OK;
    bool mark[KN_MAX_RANK];
    if (cnt >= 0) {
        if ((st = mark_axes(a->d, axes, cnt, x->rank, mark))) return st;
    } else {
        for (int i = 0; i < x->rank; i++) {
            if (x->dims[i] < 0) return KN_OK; /* which dims go is unknown */
            mark[i] = x->dims[i] == 1;
        }
    }
    o->rank = 0;
    for (int i = 0; i < x->rank; i++) {
        if (!mark[i]) {
            kn_mv_sh_copy_dim(o, o->rank++, x, i);
        } else if (x->dims[i] >= 0 && x->dims[i] != 1) {
            return kn_op_error(a->d, KN_ERR_INVALID, "cannot squeeze axis %d of size %lld", i, (long long)x->dims[i]);
        }
    }
    return KN_OK;
}
MV_DEFINE(squeeze)

static int shape_unsqueeze(const kn_mv_args *a, kn_mv_shape *o)
{
    const kn_mv_shape *x = &a->shp[0];
    int64_t axes[KN_MAX_RANK];
    int cnt;
    int st = squeeze_axes(a, axes, &cnt);
    if (st) return st;
    if (cnt == -1) return kn_op_error(a->d, KN_ERR_INVALID, "missing axes");
    kn_mv_sh_init(o, -1);
    if (x->rank < 0 || cnt == -2) return KN_OK;
    int r = x->rank + cnt;
    if (r > KN_MAX_RANK) return kn_op_error(a->d, KN_ERR_UNSUPPORTED, "output rank %d exceeds %d", r, KN_MAX_RANK);
    bool mark[KN_MAX_RANK];
    if ((st = mark_axes(a->d, axes, cnt, r, mark))) return st;
    kn_mv_sh_init(o, r);
    for (int i = 0, j = 0; i < r; i++) {
        if (mark[i]) o->dims[i] = 1;
        else kn_mv_sh_copy_dim(o, i, x, j++);
    }
    return KN_OK;
}
MV_DEFINE(unsqueeze)

/* ---- Transpose ----------------------------------------------------------- */

static int transpose_perm(const kn_mv_args *a, int *perm, int *rank)
{
    int64_t p[KN_MAX_RANK];
    int cnt;
    int st = kn_mv_attr_ints(a->d, "perm", p, KN_MAX_RANK, &cnt);
    if (st) return st;
    int r = a->shp[0].rank;
    if (cnt < 0) {
        *rank = r;
        for (int i = 0; i < r; i++) perm[i] = r - 1 - i;
        return KN_OK;
    }
    if (r >= 0 && cnt != r) return kn_op_error(a->d, KN_ERR_INVALID, "perm has %d entries for rank %d", cnt, r);
    bool seen[KN_MAX_RANK] = {0};
    for (int i = 0; i < cnt; i++) {
        if (p[i] < 0 || p[i] >= cnt || seen[p[i]])
            return kn_op_error(a->d, KN_ERR_INVALID, "perm is not a permutation of 0..%d", cnt - 1);
        seen[p[i]] = true;
        perm[i] = (int)p[i];
    }
    *rank = cnt;
    return KN_OK;
}

static int shape_transpose(const kn_mv_args *a, kn_mv_shape *o)
{
    int perm[KN_MAX_RANK], r;
    int st = transpose_perm(a, perm, &r);
    if (st) return st;
    kn_mv_sh_init(o, r);
    if (a->shp[0].rank < 0) return KN_OK;
    for (int i = 0; i < r; i++) kn_mv_sh_copy_dim(o, i, &a->shp[0], perm[i]);
    return KN_OK;
}

static int exec_transpose(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    int st = kn_mv_exec_begin(d, in, out, shape_transpose, &a);
    int perm[KN_MAX_RANK], r;
    if (st || (st = transpose_perm(&a, perm, &r))) return st;
    st = kn_fast_transpose(d->sess, in[0], perm, &out[0]); /* compiled artifacts (fastops.h) */
    if (st == KN_ERR_UNSUPPORTED) st = kn_k_transpose(in[0], perm, &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

/* ---- Concat -------------------------------------------------------------- */

static int concat_axis(const kn_opdesc *d, int r, int *axis)
{
    const kn_attr *at = kn_op_attr(d, "axis");
    if (!at && d->opset >= 4) return kn_op_error(d, KN_ERR_INVALID, "missing 'axis' attribute");
    return kn_op_axis(d, at ? at->i : 1, r, axis);
}

/* Shared by inference and execution: shapes[i] of cnt inputs (NULL entries skipped). */
int kn_mv_concat_shape(const kn_opdesc *d, int cnt, const kn_mv_shape *const *shapes, kn_mv_shape *o)
{
    int r = -1;
    for (int i = 0; i < cnt; i++)
        if (shapes[i] && shapes[i]->rank >= 0) {
            if (r >= 0 && shapes[i]->rank != r)
                return kn_op_error(d, KN_ERR_INVALID, "input %d has rank %d, input 0 has rank %d", i, shapes[i]->rank, r);
            r = shapes[i]->rank;
        }
    kn_mv_sh_init(o, r);
    if (r < 0) return KN_OK;
    int axis;
    int st = concat_axis(d, r, &axis);
    if (st) return st;
    int64_t sum = 0;
    for (int i = 0; i < cnt; i++) {
        const kn_mv_shape *s = shapes[i];
        if (!s || s->rank < 0) {
            sum = -1;
            continue;
        }
        for (int k = 0; k < r; k++) {
            if (k == axis) continue;
            if (o->dims[k] < 0) kn_mv_sh_copy_dim(o, k, s, k);
            else if (s->dims[k] >= 0 && s->dims[k] != o->dims[k])
                return kn_op_error(d, KN_ERR_INVALID, "input %d has dim %lld on axis %d, expected %lld", i,
                                     (long long)s->dims[k], k, (long long)o->dims[k]);
        }
        if (sum >= 0) sum = s->dims[axis] < 0 ? -1 : sum + s->dims[axis];
    }
    o->dims[axis] = sum;
    return KN_OK;
}

static int exec_concat(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    int cnt = d->n_inputs;
    if (cnt < 1) return kn_op_error(d, KN_ERR_INVALID, "needs at least one input");
    kn_mv_shape *sh = calloc((size_t)cnt + 1, sizeof *sh);
    const kn_mv_shape **ps = calloc((size_t)cnt + 1, sizeof *ps);
    int st = KN_OK;
    if (!sh || !ps) st = kn_op_error(d, KN_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < cnt; i++) {
        if (!in[i]) st = kn_op_error(d, KN_ERR_INVALID, "input %d is missing", i);
        else if (in[i]->dtype != in[0]->dtype)
            st = kn_op_error(d, KN_ERR_INVALID, "input %d is %s, input 0 is %s", i, kn_dtype_name(in[i]->dtype),
                               kn_dtype_name(in[0]->dtype));
        else {
            sh[i] = shape_of_tensor(in[i]);
            ps[i] = &sh[i];
        }
    }
    kn_mv_shape o;
    int axis = 0;
    if (!st) st = kn_mv_concat_shape(d, cnt, ps, &o);
    if (!st) st = concat_axis(d, o.rank, &axis);
    if (!st) st = kn_mv_alloc_written(d, &out[0], in[0]->dtype, &o);
    if (!st) {
        st = kn_fast_concat(d->sess, cnt, in, axis, &out[0]);
        if (st == KN_ERR_UNSUPPORTED) st = kn_k_concat(cnt, in, axis, &out[0]);
        if (st) st = kn_mv_fail(d, st);
    }
    free(sh);
    free(ps);
    return st;
}

/* ---- Split --------------------------------------------------------------- */

/* Sizes of the n_out pieces along the axis; entries -1 where unknown. */
static int split_sizes(const kn_mv_args *a, int axis, int64_t *sizes)
{
    const kn_opdesc *d = a->d;
    int n_out = d->n_outputs;
    int64_t dv = a->shp[0].dims[axis];
    int64_t *given = calloc((size_t)n_out + 1, sizeof *given);
    if (!given) return kn_op_error(d, KN_ERR_NOMEM, "out of memory");
    int cnt = -1, st = KN_OK;
    if (d->opset < 13) st = kn_mv_attr_ints(d, "split", given, n_out, &cnt);
    else if (a->has[1]) {
        st = kn_mv_ints(a, 1, "split", given, n_out, &cnt);
        if (!st && cnt < 0) cnt = -2; /* present but not constant */
    }
    if (st) {
        free(given);
        return kn_op_error(d, KN_ERR_INVALID, "split needs one entry per output (%d)", n_out);
    }
    for (int i = 0; i < n_out; i++) sizes[i] = -1;
    if (cnt >= 0) {
        int64_t sum = 0;
        if (cnt != n_out) st = kn_op_error(d, KN_ERR_INVALID, "split has %d entries for %d outputs", cnt, n_out);
        for (int i = 0; !st && i < cnt; i++) {
            if (given[i] < 0 || given[i] > INT64_MAX - sum)
                st = kn_op_error(d, KN_ERR_INVALID, "split[%d] = %lld is out of range", i, (long long)given[i]);
            sizes[i] = given[i];
            sum += given[i];
        }
        if (!st && dv >= 0 && sum != dv)
            st = kn_op_error(d, KN_ERR_INVALID, "split sums to %lld, but the axis has %lld", (long long)sum, (long long)dv);
    } else if (cnt == -1) {
        int64_t parts = kn_op_attr_int(d, "num_outputs", n_out);
        if (parts != n_out)
            st = kn_op_error(d, KN_ERR_INVALID, "num_outputs %lld differs from the %d outputs", (long long)parts, n_out);
        /* Equal parts; from opset 18 the last one may be smaller. */
        int64_t chunk = dv >= 0 && n_out > 0 ? (dv + n_out - 1) / n_out : -1;
        for (int i = 0; !st && dv >= 0 && i < n_out; i++) {
            int64_t left = dv - chunk * i;
            sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
    }
    free(given);
    return st;
}

static int split_axis(const kn_mv_args *a, int *axis)
{
    if (a->shp[0].rank < 0) return KN_OK;
    return kn_op_axis(a->d, kn_op_attr_int(a->d, "axis", 0), a->shp[0].rank, axis);
}

int kn_mv_split_plan(const kn_mv_args *a, int *axis, int64_t *sizes)
{
    *axis = -1;
    int st = split_axis(a, axis);
    if (st || *axis < 0) return st;
    return split_sizes(a, *axis, sizes);
}

static int exec_split(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (!kn_mv_in(d, in, 0)) return kn_op_error(d, KN_ERR_INVALID, "missing input 0");
    kn_mv_args a;
    kn_mv_args_from_tensors(d, in, &a);
    int axis = 0;
    int st = split_axis(&a, &axis);
    int64_t *sizes = calloc((size_t)d->n_outputs + 1, sizeof *sizes);
    if (!st && !sizes) st = kn_op_error(d, KN_ERR_NOMEM, "out of memory");
    if (!st) st = split_sizes(&a, axis, sizes);
    int64_t starts[KN_MAX_RANK] = {0}, steps[KN_MAX_RANK];
    for (int k = 0; k < KN_MAX_RANK; k++) steps[k] = 1;
    for (int i = 0; !st && i < d->n_outputs; i++) {
        kn_mv_shape o = a.shp[0];
        o.dims[axis] = sizes[i];
        if (kn_op_has_output(d, i) && !(st = kn_mv_alloc_written(d, &out[i], in[0]->dtype, &o))) {
            /* a Split's piece: the fast path in a compiled artifact (d->sess), else the slice kernel */
            st = kn_fast_split(d->sess, in[0], axis, starts[axis], &out[i]);
            if (st == KN_ERR_UNSUPPORTED) st = kn_k_slice(in[0], starts, steps, &out[i]);
            if (st) st = kn_mv_fail(d, st);
        }
        starts[axis] += sizes[i];
    }
    free(sizes);
    return st;
}

/* ---- Slice --------------------------------------------------------------- */

typedef struct slice_lists {
    int64_t starts[KN_MAX_RANK], ends[KN_MAX_RANK], axes[KN_MAX_RANK], steps[KN_MAX_RANK];
    int ns, ne, na, nt; /* counts; -1 absent, -2 present but unknown */
} slice_lists;

static int slice_input(const kn_mv_args *a, int i, const char *what, int64_t *out, int *cnt)
{
    if (!a->has[i]) {
        *cnt = -1;
        return KN_OK;
    }
    int st = kn_mv_ints(a, i, what, out, KN_MAX_RANK, cnt);
    if (!st && *cnt < 0) *cnt = -2;
    return st;
}

static int slice_read(const kn_mv_args *a, slice_lists *l)
{
    const kn_opdesc *d = a->d;
    int st;
    if (d->opset < 10) {
        if ((st = kn_mv_attr_ints(d, "starts", l->starts, KN_MAX_RANK, &l->ns)) ||
            (st = kn_mv_attr_ints(d, "ends", l->ends, KN_MAX_RANK, &l->ne)) ||
            (st = kn_mv_attr_ints(d, "axes", l->axes, KN_MAX_RANK, &l->na)))
            return st;
        l->nt = -1;
    } else if ((st = slice_input(a, 1, "starts", l->starts, &l->ns)) || (st = slice_input(a, 2, "ends", l->ends, &l->ne)) ||
               (st = slice_input(a, 3, "axes", l->axes, &l->na)) || (st = slice_input(a, 4, "steps", l->steps, &l->nt))) {
        return st;
    }
    if (l->ns == -1 || l->ne == -1) return kn_op_error(d, KN_ERR_INVALID, "missing starts or ends");
    return KN_OK;
}

int64_t kn_mv_slice_axis(int64_t dv, int64_t s, int64_t e, int64_t step, int64_t *out_start)
{
    if (s < 0) s += dv;
    if (e < 0) e += dv;
    if (step > 0) {
        s = s < 0 ? 0 : s > dv ? dv : s;
        e = e < 0 ? 0 : e > dv ? dv : e;
        *out_start = s;
        return e > s ? (e - s - 1) / step + 1 : 0;
    }
    s = s < 0 ? 0 : s > dv - 1 ? dv - 1 : s;
    e = e < -1 ? -1 : e > dv - 1 ? dv - 1 : e;
    *out_start = s;
    int64_t ms = step == INT64_MIN ? INT64_MAX : -step;
    return s > e ? (s - e - 1) / ms + 1 : 0;
}

/* The output shape and, for eval, each axis' first index and step. */
static int slice_plan(const kn_mv_args *a, kn_mv_shape *o, int64_t *starts, int64_t *steps)
{
    const kn_opdesc *d = a->d;
    const kn_mv_shape *x = &a->shp[0];
    slice_lists l;
    int st = slice_read(a, &l);
    if (st) return st;
    *o = *x;
    for (int k = 0; k < KN_MAX_RANK; k++) {
        starts[k] = 0;
        steps[k] = 1;
    }
    if (x->rank < 0) return KN_OK;
    if (l.ns == -2 || l.ne == -2 || l.na == -2 || l.nt == -2) {
        kn_mv_sh_init(o, x->rank);
        return KN_OK;
    }
    int cnt = l.ns;
    if (l.ne != cnt || (l.na >= 0 && l.na != cnt) || (l.nt >= 0 && l.nt != cnt))
        return kn_op_error(d, KN_ERR_INVALID, "starts, ends, axes and steps differ in length");
    bool seen[KN_MAX_RANK] = {0};
    for (int i = 0; i < cnt; i++) {
        int k;
        if ((st = kn_op_axis(d, l.na >= 0 ? l.axes[i] : i, x->rank, &k))) return st;
        if (seen[k]) return kn_op_error(d, KN_ERR_INVALID, "axis %d is sliced twice", k);
        seen[k] = true;
        int64_t step = l.nt >= 0 ? l.steps[i] : 1;
        if (step == 0) return kn_op_error(d, KN_ERR_INVALID, "step on axis %d is 0", k);
        o->sym[k] = NULL;
        if (x->dims[k] < 0) {
            o->dims[k] = -1;
            continue;
        }
        o->dims[k] = kn_mv_slice_axis(x->dims[k], l.starts[i], l.ends[i], step, &starts[k]);
        steps[k] = step;
    }
    return KN_OK;
}

static int shape_slice(const kn_mv_args *a, kn_mv_shape *o)
{
    int64_t starts[KN_MAX_RANK], steps[KN_MAX_RANK];
    return slice_plan(a, o, starts, steps);
}

static int exec_slice(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (!kn_mv_in(d, in, 0)) return kn_op_error(d, KN_ERR_INVALID, "missing input 0");
    kn_mv_args a;
    kn_mv_args_from_tensors(d, in, &a);
    kn_mv_shape o;
    int64_t starts[KN_MAX_RANK], steps[KN_MAX_RANK];
    int st = slice_plan(&a, &o, starts, steps);
    if (st || (st = kn_mv_alloc_written(d, &out[0], in[0]->dtype, &o))) return st;
    st = kn_k_slice(in[0], starts, steps, &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

/* ---- Dropout ------------------------------------------------------------- */

/* Inference mode is the identity; training mode (opset 12+, training_mode
 * input true) drops with numpy's generator so reference data matches. */
static int dropout_mode(const kn_mv_args *a, bool *training, double *ratio)
{
    *training = false;
    *ratio = 0.5;
    if (a->d->opset < 12) return KN_OK;
    if (a->val[1] && kn_tensor_numel(a->val[1]) > 0) *ratio = kn_load_f64(a->val[1]->dtype, a->val[1]->data, 0);
    if (a->val[2] && kn_tensor_numel(a->val[2]) > 0) *training = kn_load_i64(a->val[2]->dtype, a->val[2]->data, 0) != 0;
    if (*training && !(*ratio >= 0 && *ratio < 1))
        return kn_op_error(a->d, KN_ERR_INVALID, "ratio %g must be in [0, 1)", *ratio);
    return KN_OK;
}

kn_dtype kn_mv_dropout_mask_dtype(const kn_opdesc *d, kn_dtype x) { return d->opset < 10 ? x : KN_BOOL; }

int kn_mv_dropout_check(const kn_mv_args *a)
{
    bool training;
    double ratio;
    return dropout_mode(a, &training, &ratio);
}

static int exec_dropout(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (!kn_mv_in(d, in, 0)) return kn_op_error(d, KN_ERR_INVALID, "missing input 0");
    kn_mv_args a;
    kn_mv_args_from_tensors(d, in, &a);
    bool training, want_mask = kn_op_has_output(d, 1);
    double ratio;
    int st = dropout_mode(&a, &training, &ratio);
    if (st) return st;
    kn_dtype mdt = kn_mv_dropout_mask_dtype(d, in[0]->dtype);
    if (want_mask && (st = kn_tensor_alloc(&out[1], mdt, in[0]->rank, in[0]->dims))) return kn_mv_fail(d, st);
    if (training && ratio != 0) {
        if ((st = kn_tensor_alloc(&out[0], in[0]->dtype, in[0]->rank, in[0]->dims))) return kn_mv_fail(d, st);
        uint32_t seed = (uint32_t)kn_op_attr_int(d, "seed", 0);
        st = kn_k_dropout_train(in[0], ratio, seed, &out[0], want_mask ? &out[1] : NULL);
        return st ? kn_mv_fail(d, st) : KN_OK;
    }
    if ((st = kn_tensor_copy(&out[0], in[0]))) return kn_mv_fail(d, st);
    int64_t cnt = want_mask ? kn_tensor_numel(in[0]) : 0;
    for (int64_t i = 0; i < cnt; i++) kn_store_f64(mdt, out[1].data, (size_t)i, 1.0);
    return KN_OK;
}

/* ---- the family table ---------------------------------------------------- */

kn_mv_shape_fn kn_mv_shape_of(kn_op op)
{
    switch (op) {
    case KN_OP_Reshape: return shape_reshape;
    case KN_OP_Flatten: return shape_flatten;
    case KN_OP_Squeeze: return shape_squeeze;
    case KN_OP_Unsqueeze: return shape_unsqueeze;
    case KN_OP_Transpose: return shape_transpose;
    case KN_OP_Slice: return shape_slice;
    case KN_OP_Gather: return kn_mv_shape_gather;
    case KN_OP_GatherElements: return kn_mv_shape_gather_elements;
    case KN_OP_GatherND: return kn_mv_shape_gather_nd;
    case KN_OP_Scatter:
    case KN_OP_ScatterElements:
    case KN_OP_ScatterND: return kn_mv_shape_scatter;
    case KN_OP_Expand: return kn_mv_shape_expand;
    case KN_OP_Tile: return kn_mv_shape_tile;
    case KN_OP_DepthToSpace: return kn_mv_shape_depth_to_space;
    case KN_OP_SpaceToDepth: return kn_mv_shape_space_to_depth;
    case KN_OP_Pad: return kn_mv_shape_pad;
    case KN_OP_Resize: return kn_mv_shape_resize;
    case KN_OP_Upsample: return kn_mv_shape_upsample;
    default: return NULL;
    }
}

const kn_exec_impl kn_exec_movement[] = {
    {KN_OP_Reshape, exec_reshape},
    {KN_OP_Flatten, exec_flatten},
    {KN_OP_Squeeze, exec_squeeze},
    {KN_OP_Unsqueeze, exec_unsqueeze},
    {KN_OP_Transpose, exec_transpose},
    {KN_OP_Concat, exec_concat},
    {KN_OP_Split, exec_split},
    {KN_OP_Slice, exec_slice},
    {KN_OP_Gather, kn_mv_exec_gather},
    {KN_OP_GatherElements, kn_mv_exec_gather_elements},
    {KN_OP_GatherND, kn_mv_exec_gather_nd},
    {KN_OP_Scatter, kn_mv_exec_scatter_elements},
    {KN_OP_ScatterElements, kn_mv_exec_scatter_elements},
    {KN_OP_ScatterND, kn_mv_exec_scatter_nd},
    {KN_OP_Expand, kn_mv_exec_expand},
    {KN_OP_Tile, kn_mv_exec_tile},
    {KN_OP_DepthToSpace, kn_mv_exec_depth_to_space},
    {KN_OP_SpaceToDepth, kn_mv_exec_space_to_depth},
    {KN_OP_Dropout, exec_dropout},
    {KN_OP_Pad, kn_mv_exec_pad},
    {KN_OP_Resize, kn_mv_exec_resize},
    {KN_OP_Upsample, kn_mv_exec_upsample},
    {KN_OP_UNKNOWN, NULL},
};
