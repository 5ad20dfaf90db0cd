/*
 * Type and shape inference of the 'movement' family (see ir/ops.h): shape
 * manipulation (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand,
 * Tile, DepthToSpace, SpaceToDepth) and data movement (Concat, Split, Slice,
 * Gather*, Scatter*, Pad, Resize, Upsample, Dropout).
 *
 * Execution lives in runtime/ops/movement*.c (kn_exec_movement). The shape
 * rules are the runtime's (movement_int.h), called here with the node's
 * descriptor and its inputs' shapes and constant values, so the static
 * shapes inferred at compile time can never disagree with what execution
 * produces. Unknown dims are -1; symbolic dims are carried through.
 */
#include <stdlib.h>
#include <string.h>

#include "../eval.h"
#include "movement_int.h"

/* A node seen as the runtime's shape rules see it. */
typedef struct mv_node {
    kn_opdesc d;
    bool *has;      /* has_output of d: stack or heap */
    bool stack[16];
    kn_mv_args a;
} mv_node;

static kn_mv_shape to_mv(const kn_shape *s)
{
    kn_mv_shape o;
    o.rank = s->rank;
    memcpy(o.dims, s->dims, sizeof o.dims);
    memcpy(o.sym, s->sym, sizeof o.sym);
    return o;
}

static kn_mv_shape shape_of_tensor(const kn_tensor *t)
{
    kn_mv_shape s;
    kn_mv_sh_init(&s, t->rank);
    for (int i = 0; i < t->rank; i++) s.dims[i] = t->dims[i];
    return s;
}

/* Fills m in place (m->a points into m) from n's values; constants give
 * both their shape and their value. Release with mv_release. */
static int mv_prepare(const kn_node *n, mv_node *m)
{
    memset(m, 0, sizeof *m);
    m->has = n->n_outputs <= 16 ? m->stack : calloc((size_t)n->n_outputs, sizeof *m->has);
    if (!m->has) return kn_node_error(n, KN_ERR_NOMEM, "out of memory");
    kn_node_opdesc(n, &m->d, m->has);
    kn_mv_args *a = &m->a;
    a->d = &m->d;
    for (int i = 0; i < KN_MV_MAXIN; i++) {
        kn_value *v = kn_node_input(n, i);
        if (!v) {
            kn_mv_sh_init(&a->shp[i], -1);
            continue;
        }
        a->has[i] = true;
        a->dt[i] = v->dtype;
        a->val[i] = v->const_data;
        a->shp[i] = v->const_data ? shape_of_tensor(v->const_data) : to_mv(&v->shape);
    }
    return KN_OK;
}

static void mv_release(mv_node *m)
{
    if (m->has != m->stack) free(m->has);
}

static void set_out(kn_node *n, int i, kn_dtype dt, const kn_mv_shape *s)
{
    if (i >= n->n_outputs || !n->outputs[i]) return;
    kn_shape o;
    o.rank = s->rank;
    memcpy(o.dims, s->dims, sizeof o.dims);
    memcpy(o.sym, s->sym, sizeof o.sym);
    n->outputs[i]->dtype = dt;
    n->outputs[i]->shape = o;
}

/* Output 0 gets input 0's dtype and the shape of the op's rule. */
static int infer_rule(kn_node *n)
{
    kn_mv_shape_fn fn = kn_mv_shape_of(n->op);
    if (!fn) return kn_node_error(n, KN_ERR_INTERNAL, "no shape rule for this op");
    mv_node m;
    int st = mv_prepare(n, &m);
    kn_mv_shape s;
    if (!st && !(st = fn(&m.a, &s))) set_out(n, 0, m.a.dt[0], &s);
    mv_release(&m);
    return st;
}

static int infer_concat(kn_node *n)
{
    kn_mv_shape *sh = calloc((size_t)n->n_inputs + 1, sizeof *sh);
    const kn_mv_shape **ps = calloc((size_t)n->n_inputs + 1, sizeof *ps);
    mv_node m;
    int st = !sh || !ps ? kn_node_error(n, KN_ERR_NOMEM, "out of memory") : mv_prepare(n, &m);
    if (st) {
        free(sh);
        free(ps);
        return st;
    }
    kn_dtype dt = KN_DT_UNDEFINED;
    for (int i = 0; i < n->n_inputs; i++) {
        kn_value *v = n->inputs[i];
        if (!v) continue;
        sh[i] = to_mv(&v->shape);
        ps[i] = &sh[i];
        if (dt == KN_DT_UNDEFINED) dt = v->dtype;
    }
    kn_mv_shape o;
    st = kn_mv_concat_shape(&m.d, n->n_inputs, ps, &o);
    if (!st) set_out(n, 0, dt, &o);
    mv_release(&m);
    free(sh);
    free(ps);
    return st;
}

static int infer_split(kn_node *n)
{
    mv_node m;
    int st = mv_prepare(n, &m);
    if (st) return st;
    int64_t *sizes = calloc((size_t)n->n_outputs + 1, sizeof *sizes);
    int axis = -1;
    if (!sizes) st = kn_node_error(n, KN_ERR_NOMEM, "out of memory");
    else st = kn_mv_split_plan(&m.a, &axis, sizes);
    kn_mv_shape o = m.a.shp[0];
    for (int i = 0; !st && i < n->n_outputs; i++) {
        if (axis >= 0) {
            o.dims[axis] = sizes[i];
            o.sym[axis] = NULL;
        }
        set_out(n, i, m.a.dt[0], &o);
    }
    free(sizes);
    mv_release(&m);
    return st;
}

static int infer_dropout(kn_node *n)
{
    mv_node m;
    int st = mv_prepare(n, &m);
    if (!st && !(st = kn_mv_dropout_check(&m.a))) {
        set_out(n, 0, m.a.dt[0], &m.a.shp[0]);
        set_out(n, 1, kn_mv_dropout_mask_dtype(&m.d, m.a.dt[0]), &m.a.shp[0]);
    }
    mv_release(&m);
    return st;
}

/* ---- the family table ---------------------------------------------------- */

const kn_op_impl kn_ops_movement[] = {
    {KN_OP_Reshape, infer_rule},
    {KN_OP_Flatten, infer_rule},
    {KN_OP_Squeeze, infer_rule},
    {KN_OP_Unsqueeze, infer_rule},
    {KN_OP_Transpose, infer_rule},
    {KN_OP_Concat, infer_concat},
    {KN_OP_Split, infer_split},
    {KN_OP_Slice, infer_rule},
    {KN_OP_Gather, infer_rule},
    {KN_OP_GatherElements, infer_rule},
    {KN_OP_GatherND, infer_rule},
    {KN_OP_Scatter, infer_rule},
    {KN_OP_ScatterElements, infer_rule},
    {KN_OP_ScatterND, infer_rule},
    {KN_OP_Expand, infer_rule},
    {KN_OP_Tile, infer_rule},
    {KN_OP_DepthToSpace, infer_rule},
    {KN_OP_SpaceToDepth, infer_rule},
    {KN_OP_Dropout, infer_dropout},
    {KN_OP_Pad, infer_rule},
    {KN_OP_Resize, infer_rule},
    {KN_OP_Upsample, infer_rule},
    {KN_OP_UNKNOWN, NULL},
};
