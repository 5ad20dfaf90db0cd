/*
 * Execution and output shapes of Expand, Tile, DepthToSpace and
 * SpaceToDepth (see movement.c, whose table lists them, and
 * movement_int.h). Kernels are in runtime/kernels/ref (k_movement.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k_movement.h"
#include "movement_int.h"

/* ---- Expand, Tile -------------------------------------------------------- */

/* One output dim of a broadcast of x's dim a (with symbol) and target b. */
static int bcast_dim(const kn_opdesc *d, const kn_mv_shape *x, int xi, int64_t b, kn_mv_shape *o, int oi)
{
    int64_t dv = xi >= 0 ? x->dims[xi] : 1;
    if (dv == 1) o->dims[oi] = b;
    else if (b == 1 || dv == b) kn_mv_sh_copy_dim(o, oi, x, xi);
    else if (dv < 0) o->dims[oi] = b;
    else return kn_op_error(d, KN_ERR_INVALID, "dim %lld cannot be expanded to %lld", (long long)dv, (long long)b);
    return KN_OK;
}

int kn_mv_shape_expand(const kn_mv_args *a, kn_mv_shape *o)
{
    const kn_mv_shape *x = &a->shp[0];
    int64_t sh[KN_MAX_RANK];
    int cnt;
    if (!a->has[1]) return kn_op_error(a->d, KN_ERR_INVALID, "missing shape input");
    int st = kn_mv_ints(a, 1, "shape", sh, KN_MAX_RANK, &cnt);
    if (st) return st;
    kn_mv_sh_init(o, -1);
    if (cnt < 0) {
        const kn_mv_shape *s1 = &a->shp[1];
        if (x->rank >= 0 && s1->rank == 1 && s1->dims[0] >= 0 && s1->dims[0] <= KN_MAX_RANK)
            kn_mv_sh_init(o, x->rank > (int)s1->dims[0] ? x->rank : (int)s1->dims[0]);
        return KN_OK;
    }
    if (x->rank < 0) return KN_OK;
    int r = x->rank > cnt ? x->rank : cnt;
    kn_mv_sh_init(o, r);
    for (int i = 0; i < r; i++) {
        int xi = i - (r - x->rank), si = i - (r - cnt);
        int64_t b = si >= 0 ? sh[si] : 1;
        if (b < 0) return kn_op_error(a->d, KN_ERR_INVALID, "shape[%d] = %lld is negative", si, (long long)b);
        if ((st = bcast_dim(a->d, x, xi, b, o, i))) return st;
    }
    return KN_OK;
}

int kn_mv_exec_expand(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    int st = kn_mv_exec_begin(d, in, out, kn_mv_shape_expand, &a);
    if (st) return st;
    st = kn_k_expand(in[0], &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

int kn_mv_shape_tile(const kn_mv_args *a, kn_mv_shape *o)
{
    const kn_mv_shape *x = &a->shp[0];
    int64_t rep[KN_MAX_RANK];
    int cnt;
    if (!a->has[1]) return kn_op_error(a->d, KN_ERR_INVALID, "missing repeats input");
    int st = kn_mv_ints(a, 1, "repeats", rep, KN_MAX_RANK, &cnt);
    if (st) return st;
    kn_mv_sh_init(o, x->rank);
    if (cnt < 0 || x->rank < 0) return KN_OK;
    if (cnt != x->rank) return kn_op_error(a->d, KN_ERR_INVALID, "repeats has %d entries for rank %d", cnt, x->rank);
    for (int i = 0; i < cnt; i++) {
        if (rep[i] < 0) return kn_op_error(a->d, KN_ERR_INVALID, "repeats[%d] = %lld is negative", i, (long long)rep[i]);
        if (rep[i] == 1) kn_mv_sh_copy_dim(o, i, x, i);
        else if (x->dims[i] >= 0) {
            if (rep[i] && x->dims[i] > INT64_MAX / rep[i]) return kn_op_error(a->d, KN_ERR_INVALID, "tiled dim overflows");
            o->dims[i] = x->dims[i] * rep[i];
        }
    }
    return KN_OK;
}

int kn_mv_exec_tile(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    int st = kn_mv_exec_begin(d, in, out, kn_mv_shape_tile, &a);
    if (st) return st;
    st = kn_k_tile(in[0], &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

/* ---- DepthToSpace, SpaceToDepth ------------------------------------------ */

static int block_size(const kn_mv_args *a, int64_t *b)
{
    *b = kn_op_attr_int(a->d, "blocksize", 0);
    if (*b <= 0 || *b > (1 << 20)) return kn_op_error(a->d, KN_ERR_INVALID, "blocksize %lld must be positive", (long long)*b);
    if (a->d->op == KN_OP_DepthToSpace) {
        const char *mode = kn_op_attr_string(a->d, "mode", "DCR");
        if (strcmp(mode, "DCR") && strcmp(mode, "CRD"))
            return kn_op_error(a->d, KN_ERR_INVALID, "mode '%s' must be DCR or CRD", mode);
    }
    if (a->shp[0].rank >= 0 && a->shp[0].rank != 4)
        return kn_op_error(a->d, KN_ERR_INVALID, "input must have rank 4, got %d", a->shp[0].rank);
    return KN_OK;
}

int kn_mv_shape_depth_to_space(const kn_mv_args *a, kn_mv_shape *o)
{
    int64_t b;
    int st = block_size(a, &b);
    if (st) return st;
    const kn_mv_shape *x = &a->shp[0];
    kn_mv_sh_init(o, 4);
    if (x->rank < 0) return KN_OK;
    kn_mv_sh_copy_dim(o, 0, x, 0);
    if (x->dims[1] >= 0) {
        if (x->dims[1] % (b * b))
            return kn_op_error(a->d, KN_ERR_INVALID, "channels %lld are not a multiple of blocksize^2", (long long)x->dims[1]);
        o->dims[1] = x->dims[1] / (b * b);
    }
    for (int i = 2; i < 4; i++) {
        if (x->dims[i] > INT64_MAX / b) return kn_op_error(a->d, KN_ERR_INVALID, "dim %d is too large", i);
        o->dims[i] = x->dims[i] >= 0 ? x->dims[i] * b : -1;
    }
    return KN_OK;
}

int kn_mv_shape_space_to_depth(const kn_mv_args *a, kn_mv_shape *o)
{
    int64_t b;
    int st = block_size(a, &b);
    if (st) return st;
    const kn_mv_shape *x = &a->shp[0];
    kn_mv_sh_init(o, 4);
    if (x->rank < 0) return KN_OK;
    kn_mv_sh_copy_dim(o, 0, x, 0);
    if (x->dims[1] > INT64_MAX / (b * b)) return kn_op_error(a->d, KN_ERR_INVALID, "channel dim is too large");
    o->dims[1] = x->dims[1] >= 0 ? x->dims[1] * b * b : -1;
    for (int i = 2; i < 4; i++) {
        if (x->dims[i] >= 0 && x->dims[i] % b)
            return kn_op_error(a->d, KN_ERR_INVALID, "dim %d (%lld) is not a multiple of blocksize", i, (long long)x->dims[i]);
        o->dims[i] = x->dims[i] >= 0 ? x->dims[i] / b : -1;
    }
    return KN_OK;
}


/* Both ops are one 6-D transpose between views of input and output. */
static int block_transpose(const kn_opdesc *d, const kn_tensor *x, kn_tensor *y, const int64_t *xd, const int64_t *yd,
                           const int *perm)
{
    kn_tensor xv, yv;
    int st = kn_tensor_view(&xv, x, 6, xd);
    if (!st) st = kn_tensor_view(&yv, y, 6, yd);
    if (!st) st = kn_k_transpose(&xv, perm, &yv);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

int kn_mv_exec_depth_to_space(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    int st = kn_mv_exec_begin(d, in, out, kn_mv_shape_depth_to_space, &a);
    if (st) return st;
    int64_t b = kn_op_attr_int(d, "blocksize", 0);
    const int64_t *dv = in[0]->dims;
    int64_t c = dv[1] / (b * b);
    int64_t yd[6] = {dv[0], c, dv[2], b, dv[3], b};
    if (!strcmp(kn_op_attr_string(d, "mode", "DCR"), "CRD")) {
        int64_t xd[6] = {dv[0], c, b, b, dv[2], dv[3]};
        static const int perm[6] = {0, 1, 4, 2, 5, 3};
        return block_transpose(d, in[0], &out[0], xd, yd, perm);
    }
    int64_t xd[6] = {dv[0], b, b, c, dv[2], dv[3]};
    static const int perm[6] = {0, 3, 4, 1, 5, 2};
    return block_transpose(d, in[0], &out[0], xd, yd, perm);
}

int kn_mv_exec_space_to_depth(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    int st = kn_mv_exec_begin(d, in, out, kn_mv_shape_space_to_depth, &a);
    if (st) return st;
    int64_t b = kn_op_attr_int(d, "blocksize", 0);
    const int64_t *dv = in[0]->dims;
    int64_t xd[6] = {dv[0], dv[1], dv[2] / b, b, dv[3] / b, b};
    int64_t yd[6] = {dv[0], b, b, dv[1], dv[2] / b, dv[3] / b};
    static const int perm[6] = {0, 3, 5, 1, 2, 4};
    return block_transpose(d, in[0], &out[0], xd, yd, perm);
}

