/*
 * runtime/src/dnnl/binary.c — a Mul or an Add of an activation by a
 * per-channel (or single) value, by oneDNN's binary primitive: the
 * squeeze-and-excitation scale of MobileNetV3 and EfficientNet between
 * convolutions, kept in the session's layout (a generated loop reads and
 * writes plain NCHW only, so that the convolutions on both sides would
 * read and write plain NCHW too: MobileNetV3's 5x5 depthwise layers took
 * twice as long).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <dnnl.h>

#include "dnnl_int.h"

/* src (a [N, C, spatial..] activation in the record's src layout) combined
 * with wei ([1 or N, 1 or C, 1, ..], plain: the same bytes in every
 * layout) into dst in src's layout; where the record's dst layout differs,
 * a reorder follows (as for pooling: oneDNN's optimized binary kernels want
 * the two alike). */
int kn_dnnl_create_binary(kn_dnnl_session *s, const kn_abi_dnnl *rec, const unsigned char *weights, kn_dnnl_prim *p,
                          dnnl_primitive_attr_t attr)
{
    int nd = rec->src.rank, st;
    if ((st = kn_dnnl_check_tensor(&rec->src, "binary src", 3, 5)) ||
        (st = kn_dnnl_check_tensor(&rec->wei, "binary operand", nd, nd)) ||
        (st = kn_dnnl_check_tensor(&rec->dst, "binary dst", nd, nd)))
        return st;
    if (rec->src.dtype != KN_F32 || rec->wei.dtype != KN_F32 || rec->dst.dtype != KN_F32)
        return kn_error(KN_ERR_INVALID, "oneDNN binary: src %s, operand %s, dst %s (f32 only)",
                        kn_dtype_name(rec->src.dtype), kn_dtype_name(rec->wei.dtype), kn_dtype_name(rec->dst.dtype));
    if (rec->alg != KN_BINARY_MUL && rec->alg != KN_BINARY_ADD)
        return kn_error(KN_ERR_INVALID, "oneDNN binary: algorithm %d", rec->alg);
    if (rec->n_post != 0 || kn_dnnl_has_bias(rec) || kn_dnnl_is_int8(rec))
        return kn_error(KN_ERR_INVALID, "oneDNN binary: post-ops, a bias or scales in the record");
    dnnl_dims_t sd, wd;
    for (int i = 0; i < nd; i++) {
        sd[i] = rec->src.dims[i], wd[i] = rec->wei.dims[i];
        bool ok = rec->dst.dims[i] == sd[i] && (wd[i] == 1 || (i < 2 && wd[i] == sd[i]));
        if (!ok)
            return kn_error(KN_ERR_INVALID,
                            "oneDNN binary: dim %d: src %lld, operand %lld, dst %lld (the operand is per "
                            "channel or single)",
                            i, (long long)sd[i], (long long)wd[i], (long long)rec->dst.dims[i]);
    }
    dnnl_memory_desc_t src_md, wei_md, dst_md, dst_user;
    if ((st = kn_dnnl_act_md(s, rec->src_layout, KN_F32, &src_md, nd, sd, "the binary src")) ||
        (st = kn_dnnl_plain_md(&wei_md, nd, wd, "describing the binary operand")) ||
        (st = kn_dnnl_act_md(s, rec->src_layout, KN_F32, &dst_md, nd, sd, "the binary dst")) ||
        (st = kn_dnnl_act_md(s, rec->dst_layout, KN_F32, &dst_user, nd, sd, "the binary dst")))
        return st;
    const void *wconst = NULL;
    if (rec->wei_ref.loc == KN_LOC_WEIGHTS &&
        (st = kn_dnnl_const_ptr(&rec->wei_ref, weights, rec->wei.nbytes, "binary operand", &wconst)))
        return st;
    dnnl_binary_desc_t bd;
    KN_DN(dnnl_binary_desc_init(&bd, rec->alg == KN_BINARY_MUL ? dnnl_binary_mul : dnnl_binary_add, &src_md, &wei_md,
                                &dst_md),
          "describing the binary op");
    KN_DN(dnnl_memory_create(&p->m_wei, &wei_md, s->engine, (void *)wconst), "creating the operand memory");
    p->wei_const = wconst != NULL;
    dnnl_primitive_desc_t pd;
    KN_DN(dnnl_primitive_desc_create(&pd, &bd, attr, s->engine, NULL), "creating the binary op");
    return kn_dnnl_finish_in_src_layout(s, p, pd, &src_md, &dst_md, &dst_user, "creating the binary op");
}
