/*
 * Execution and output shapes of the Gather and Scatter families of the
 * 'movement' ops (see movement.c, whose table lists them, and
 * movement_int.h). Kernels are in runtime/kernels/ref (k_movement.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k_movement.h"
#include "movement_int.h"

/* ---- Gather family ------------------------------------------------------- */

static int check_index_dtype(const kn_mv_args *a, int i)
{
    kn_dtype dt = a->dt[i];
    if (dt != KN_DT_UNDEFINED && dt != KN_I32 && dt != KN_I64)
        return kn_op_error(a->d, KN_ERR_INVALID, "indices must be int32 or int64, got %s", kn_dtype_name(dt));
    return KN_OK;
}

static int gather_axis(const kn_mv_args *a, int *axis)
{
    *axis = -1;
    if (a->shp[0].rank < 0) return KN_OK;
    if (a->shp[0].rank == 0) return kn_op_error(a->d, KN_ERR_INVALID, "data must have rank >= 1");
    return kn_op_axis(a->d, kn_op_attr_int(a->d, "axis", 0), a->shp[0].rank, axis);
}

int kn_mv_shape_gather(const kn_mv_args *a, kn_mv_shape *o)
{
    const kn_mv_shape *x = &a->shp[0], *ind = &a->shp[1];
    int axis;
    int st = check_index_dtype(a, 1);
    if (st || (st = gather_axis(a, &axis))) return st;
    kn_mv_sh_init(o, -1);
    if (x->rank < 0 || ind->rank < 0) return KN_OK;
    int r = x->rank - 1 + ind->rank;
    if (r > KN_MAX_RANK) return kn_op_error(a->d, KN_ERR_UNSUPPORTED, "output rank %d exceeds %d", r, KN_MAX_RANK);
    kn_mv_sh_init(o, r);
    int j = 0;
    for (int i = 0; i < axis; i++) kn_mv_sh_copy_dim(o, j++, x, i);
    for (int i = 0; i < ind->rank; i++) kn_mv_sh_copy_dim(o, j++, ind, i);
    for (int i = axis + 1; i < x->rank; i++) kn_mv_sh_copy_dim(o, j++, x, i);
    return KN_OK;
}

int kn_mv_exec_gather(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    int axis;
    if (!kn_mv_in(d, in, 1)) return kn_op_error(d, KN_ERR_INVALID, "missing indices");
    int st = kn_mv_exec_begin(d, in, out, kn_mv_shape_gather, &a);
    if (st || (st = gather_axis(&a, &axis))) return st;
    st = kn_k_gather(in[0], in[1], axis, &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

int kn_mv_shape_gather_elements(const kn_mv_args *a, kn_mv_shape *o)
{
    int axis;
    int st = check_index_dtype(a, 1);
    if (st || (st = gather_axis(a, &axis))) return st;
    const kn_mv_shape *x = &a->shp[0], *ind = &a->shp[1];
    if (x->rank >= 0 && ind->rank >= 0 && x->rank != ind->rank)
        return kn_op_error(a->d, KN_ERR_INVALID, "indices rank %d differs from data rank %d", ind->rank, x->rank);
    *o = *ind;
    return KN_OK;
}

int kn_mv_exec_gather_elements(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    int axis;
    if (!kn_mv_in(d, in, 1)) return kn_op_error(d, KN_ERR_INVALID, "missing indices");
    int st = kn_mv_exec_begin(d, in, out, kn_mv_shape_gather_elements, &a);
    if (st || (st = gather_axis(&a, &axis))) return st;
    st = kn_k_gather_elements(in[0], in[1], axis, &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

int kn_mv_shape_gather_nd(const kn_mv_args *a, kn_mv_shape *o)
{
    const kn_mv_shape *x = &a->shp[0], *ind = &a->shp[1];
    int st = check_index_dtype(a, 1);
    if (st) return st;
    kn_mv_sh_init(o, -1);
    if (x->rank < 0 || ind->rank < 0) return KN_OK;
    int64_t b = kn_op_attr_int(a->d, "batch_dims", 0);
    if (ind->rank < 1 || b < 0 || b >= x->rank || b >= ind->rank)
        return kn_op_error(a->d, KN_ERR_INVALID, "batch_dims %lld does not fit data rank %d and indices rank %d",
                             (long long)b, x->rank, ind->rank);
    int64_t k = ind->dims[ind->rank - 1];
    if (k < 0) return KN_OK;
    if (k < 1 || k > x->rank - b)
        return kn_op_error(a->d, KN_ERR_INVALID, "indices' last dim %lld exceeds data rank %d minus batch_dims",
                             (long long)k, x->rank);
    for (int i = 0; i < b; i++)
        if (x->dims[i] >= 0 && ind->dims[i] >= 0 && x->dims[i] != ind->dims[i])
            return kn_op_error(a->d, KN_ERR_INVALID, "batch dim %d differs between data and indices", i);
    int r = ind->rank - 1 + x->rank - (int)b - (int)k;
    if (r > KN_MAX_RANK) return kn_op_error(a->d, KN_ERR_UNSUPPORTED, "output rank %d exceeds %d", r, KN_MAX_RANK);
    kn_mv_sh_init(o, r);
    int j = 0;
    for (int i = 0; i < ind->rank - 1; i++) kn_mv_sh_copy_dim(o, j++, ind, i);
    for (int i = (int)(b + k); i < x->rank; i++) kn_mv_sh_copy_dim(o, j++, x, i);
    return KN_OK;
}

int kn_mv_exec_gather_nd(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    if (!kn_mv_in(d, in, 1)) return kn_op_error(d, KN_ERR_INVALID, "missing indices");
    int st = kn_mv_exec_begin(d, in, out, kn_mv_shape_gather_nd, &a);
    if (st) return st;
    st = kn_k_gather_nd(in[0], in[1], (int)kn_op_attr_int(d, "batch_dims", 0), &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

/* ---- Scatter family ------------------------------------------------------ */

static int scatter_reduction(const kn_opdesc *d, kn_reduction *red)
{
    const char *s = kn_op_attr_string(d, "reduction", "none");
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) {
            *red = (kn_reduction)i;
            return KN_OK;
        }
    return kn_op_error(d, KN_ERR_UNSUPPORTED, "unknown reduction '%s'", s);
}

int kn_mv_shape_scatter(const kn_mv_args *a, kn_mv_shape *o)
{
    int st = check_index_dtype(a, 1);
    if (st) return st;
    if (a->dt[2] != KN_DT_UNDEFINED && a->dt[0] != KN_DT_UNDEFINED && a->dt[2] != a->dt[0])
        return kn_op_error(a->d, KN_ERR_INVALID, "updates are %s but data is %s", kn_dtype_name(a->dt[2]),
                             kn_dtype_name(a->dt[0]));
    *o = a->shp[0];
    return KN_OK;
}

int kn_mv_exec_scatter_elements(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    kn_reduction red = KN_REDUCE_NONE;
    int axis;
    if (!kn_mv_in(d, in, 1) || !kn_mv_in(d, in, 2)) return kn_op_error(d, KN_ERR_INVALID, "missing indices or updates");
    int st = scatter_reduction(d, &red);
    if (st || (st = kn_mv_exec_begin(d, in, out, kn_mv_shape_scatter, &a)) || (st = gather_axis(&a, &axis))) return st;
    st = kn_k_scatter_elements(in[0], in[1], in[2], axis, red, &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

int kn_mv_exec_scatter_nd(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    kn_mv_args a;
    kn_reduction red = KN_REDUCE_NONE;
    if (!kn_mv_in(d, in, 1) || !kn_mv_in(d, in, 2)) return kn_op_error(d, KN_ERR_INVALID, "missing indices or updates");
    int st = scatter_reduction(d, &red);
    if (st || (st = kn_mv_exec_begin(d, in, out, kn_mv_shape_scatter, &a))) return st;
    st = kn_k_scatter_nd(in[0], in[1], in[2], red, &out[0]);
    return st ? kn_mv_fail(d, st) : KN_OK;
}

