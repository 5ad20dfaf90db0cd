/*
 * Type/shape inference of the 'nn' family (see ir/ops.h): convolution,
 * pooling, normalization, LRN, unpooling, RoI pooling and Col2Im.
 *
 * Execution lives in runtime/ops/nn.c. Shape logic is written once per op as
 * a "geometry" function of runtime/ops/nn_geom.c over plain dims arrays,
 * where -1 means unknown: infer calls it with the IR shapes (through the
 * node's kn_opdesc), execution with the actual tensors' dims, so the two
 * always agree.
 */

#include "../eval.h"
#include "nn_int.h"

/* ---- small helpers ------------------------------------------------------- */

/* Most outputs an nn op has (Attention: 4). */
#define NN_MAX_OUT 4

/* The node as the runtime's geometry functions see it. has needs NN_MAX_OUT
 * entries; the importer's arity check keeps n_outputs within that. */
static int node_desc(const kn_node *n, kn_opdesc *d, bool *has)
{
    if (n->n_outputs > NN_MAX_OUT)
        return kn_node_error(n, KN_ERR_INVALID, "%d outputs, at most %d expected", n->n_outputs, NN_MAX_OUT);
    kn_node_opdesc(n, d, has);
    return KN_OK;
}

/* The dtype and (rank, dims) of input i as seen by infer; rank -1 if unknown
 * or the input is absent. */
static int in_dims(const kn_node *n, int i, int64_t *dims, kn_dtype *dt)
{
    kn_value *v = kn_node_input(n, i);
    if (dt) *dt = v ? v->dtype : KN_DT_UNDEFINED;
    if (!v || v->shape.rank < 0) return -1;
    for (int d = 0; d < v->shape.rank; d++) dims[d] = v->shape.dims[d];
    return v->shape.rank;
}

/* Sets output i to (dt, rank, dims) where dims may hold -1; the batch dim
 * keeps the symbolic name of input 0's first dim. rank < 0 → unknown rank. */
static void set_out(kn_node *n, int i, kn_dtype dt, int rank, const int64_t *dims)
{
    if (i >= n->n_outputs || !n->outputs[i]) return;
    kn_shape s = kn_shape_unknown();
    if (rank >= 0) {
        s.rank = rank;
        for (int d = 0; d < rank; d++) s.dims[d] = dims[d] < 0 ? -1 : dims[d];
        kn_value *x = kn_node_input(n, 0);
        if (rank > 0 && dims[0] < 0 && x && x->shape.rank > 0) s.sym[0] = x->shape.sym[0];
    }
    kn_infer_set_shape(n, i, dt, &s);
}

static int infer_conv(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], wd[KN_MAX_RANK], od[KN_MAX_RANK], group;
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), wr = in_dims(n, 1, wd, NULL);
    if (xr < 0) {
        set_out(n, 0, dt, -1, NULL);
        return KN_OK;
    }
    if (wr >= 0 && wr != xr)
        return kn_node_error(n, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", wr, xr);
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    kn_nn_window w;
    st = kn_nn_conv_geometry(&d, xr, xd, wr >= 0 ? wd : NULL, &w, &group, od);
    if (st) return st;
    set_out(n, 0, dt, xr, od);
    return KN_OK;
}

static int infer_convt(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], wd[KN_MAX_RANK], od[KN_MAX_RANK], group;
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), wr = in_dims(n, 1, wd, NULL);
    if (xr < 0) {
        set_out(n, 0, dt, -1, NULL);
        return KN_OK;
    }
    if (wr >= 0 && wr != xr)
        return kn_node_error(n, KN_ERR_INVALID, "weight rank %d, expected %d (the rank of X)", wr, xr);
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    kn_nn_window w;
    st = kn_nn_convt_geometry(&d, xr, xd, wr >= 0 ? wd : NULL, &w, &group, od);
    if (st) return st;
    set_out(n, 0, dt, xr, od);
    return KN_OK;
}

static int infer_pool(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt);
    if (xr < 0) {
        set_out(n, 0, dt, -1, NULL);
        set_out(n, 1, KN_I64, -1, NULL);
        return KN_OK;
    }
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    kn_nn_window w;
    st = kn_nn_pool_geometry(&d, xr, xd, &w, od);
    if (st) return st;
    set_out(n, 0, dt, xr, od);
    set_out(n, 1, KN_I64, xr, od);
    return KN_OK;
}

static int infer_global_pool(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt);
    if (xr >= 0 && xr < 2) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected at least 2", xr);
    if (xr >= 0) kn_nn_global_dims(xr, xd, od);
    set_out(n, 0, dt, xr, od);
    return KN_OK;
}

static int infer_batchnorm(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], md[KN_MAX_RANK], c;
    kn_dtype dt, mdt;
    int xr = in_dims(n, 0, xd, &dt);
    in_dims(n, 3, md, &mdt);
    if (xr >= 0 && xr < 2) return kn_node_error(n, KN_ERR_INVALID, "X has rank %d, expected N x C x ...", xr);
    set_out(n, 0, dt, xr, xd);
    c = xr >= 2 ? xd[1] : -1;
    set_out(n, 1, mdt ? mdt : dt, 1, &c);
    set_out(n, 2, mdt ? mdt : dt, 1, &c);
    return KN_OK;
}

static int infer_layernorm(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], md[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), axis;
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    kn_dtype sdt = kn_nn_stash_dtype(&d, KN_F32);
    set_out(n, 0, dt, xr, xd);
    if (xr < 0) {
        set_out(n, 1, sdt, -1, NULL);
        set_out(n, 2, sdt, -1, NULL);
        return KN_OK;
    }
    if ((st = kn_nn_layernorm_geometry(&d, xr, xd, &axis, md))) return st;
    set_out(n, 1, sdt, xr, md);
    set_out(n, 2, sdt, xr, md);
    return KN_OK;
}

static int infer_same(kn_node *n) { return kn_infer_same_as_input(n, 0); }

static int infer_maxunpool(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt);
    kn_value *osv = kn_node_input(n, 2);
    if (xr < 0 || (osv && !osv->const_data)) {
        for (int d = 0; d < xr; d++) od[d] = -1; /* rank known, dims from runtime data */
        set_out(n, 0, dt, xr, od);
        return KN_OK;
    }
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    int64_t nat[KN_MAX_RANK];
    st = kn_nn_unpool_geometry(&d, xr, xd, osv ? osv->const_data : NULL, nat, od);
    if (st) return st;
    set_out(n, 0, dt, xr, od);
    return KN_OK;
}

static int infer_roi(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], rd[KN_MAX_RANK], od[4], oh = 0, ow = 0;
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), rr = in_dims(n, 1, rd, NULL);
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    bool align = n->op == KN_OP_RoiAlign;
    if (align) {
        oh = kn_op_attr_int(&d, "output_height", 1);
        ow = kn_op_attr_int(&d, "output_width", 1);
    } else if ((st = kn_nn_roipool_size(&d, &oh, &ow))) {
        return st;
    }
    if ((st = kn_nn_roi_geometry(&d, xr, xd, rr, rd, align ? 4 : 5, oh, ow, od))) return st;
    set_out(n, 0, dt, 4, od);
    /* The first output dim counts RoIs, not images: name it after the rois' dim. */
    if (n->outputs[0]) n->outputs[0]->shape.sym[0] = rr >= 1 && rd[0] < 0 ? n->inputs[1]->shape.sym[0] : NULL;
    return KN_OK;
}

static int infer_col2im(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], od[KN_MAX_RANK];
    kn_dtype dt;
    int xr = in_dims(n, 0, xd, &dt), orank;
    kn_value *img = kn_node_input(n, 1), *blk = kn_node_input(n, 2);
    if (xr < 0 || !img || !blk || !img->const_data || !blk->const_data) {
        set_out(n, 0, dt, -1, NULL);
        return KN_OK;
    }
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    kn_nn_window w;
    st = kn_nn_col2im_geometry(&d, xr, xd, img->const_data, blk->const_data, &w, &orank, od);
    if (st) return st;
    set_out(n, 0, dt, orank, od);
    return KN_OK;
}

static int infer_attention(kn_node *n)
{
    int64_t qd[KN_MAX_RANK], kd[KN_MAX_RANK], vd[KN_MAX_RANK], pd[KN_MAX_RANK];
    int64_t yd[4], pkd[4], pvd[4], qkd[4];
    kn_dtype dt;
    int qr = in_dims(n, 0, qd, &dt), kr = in_dims(n, 1, kd, NULL), vr = in_dims(n, 2, vd, NULL);
    int pr = in_dims(n, 4, pd, NULL);
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    bool has_past = kn_node_input(n, 4) != NULL;
    if (qr < 0 || kr < 0 || vr < 0 || (has_past && pr < 0)) {
        int64_t unk[KN_MAX_RANK];
        for (int i = 0; i < KN_MAX_RANK; i++) unk[i] = -1;
        set_out(n, 0, dt, qr, unk);
        for (int i = 1; i < 4; i++) set_out(n, i, dt, 4, unk);
        return KN_OK;
    }
    kn_attn_dims dm;
    int yr;
    if ((st = kn_nn_attention_geometry(&d, qr, qd, kr, kd, vr, vd, has_past ? pr : -1, pd, &dm, &yr, yd, pkd, pvd, qkd)))
        return st;
    set_out(n, 0, dt, yr, yd);
    set_out(n, 1, dt, 4, pkd);
    set_out(n, 2, dt, 4, pvd);
    set_out(n, 3, dt, 4, qkd);
    return KN_OK;
}

static int infer_rotary(kn_node *n)
{
    int64_t xd[KN_MAX_RANK], H, rot;
    kn_dtype dt;
    bool three_d;
    int xr = in_dims(n, 0, xd, &dt);
    kn_opdesc d;
    bool has[NN_MAX_OUT];
    int st = node_desc(n, &d, has);
    if (st) return st;
    if (xr >= 0 && (st = kn_nn_rotary_geometry(&d, xr, xd, &H, &rot, &three_d))) return st;
    set_out(n, 0, dt, xr, xd);
    return KN_OK;
}

const kn_op_impl kn_ops_nn[] = {
    {KN_OP_Conv, infer_conv},
    {KN_OP_ConvTranspose, infer_convt},
    {KN_OP_MaxPool, infer_pool},
    {KN_OP_AveragePool, infer_pool},
    {KN_OP_LpPool, infer_pool},
    {KN_OP_GlobalAveragePool, infer_global_pool},
    {KN_OP_GlobalMaxPool, infer_global_pool},
    {KN_OP_GlobalLpPool, infer_global_pool},
    {KN_OP_BatchNormalization, infer_batchnorm},
    {KN_OP_LayerNormalization, infer_layernorm},
    {KN_OP_RMSNormalization, infer_same},
    {KN_OP_Attention, infer_attention},
    {KN_OP_RotaryEmbedding, infer_rotary},
    {KN_OP_InstanceNormalization, infer_same},
    {KN_OP_GroupNormalization, infer_same},
    {KN_OP_LRN, infer_same},
    {KN_OP_LpNormalization, infer_same},
    {KN_OP_MeanVarianceNormalization, infer_same},
    {KN_OP_MaxUnpool, infer_maxunpool},
    {KN_OP_MaxRoiPool, infer_roi},
    {KN_OP_RoiAlign, infer_roi},
    {KN_OP_Col2Im, infer_col2im},
    {KN_OP_UNKNOWN, NULL},
};
