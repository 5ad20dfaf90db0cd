/*
 * runtime/src/exec.c — the callbacks that generated code makes into
 * libkiln_rt (kiln/abi.h): oneDNN primitives created by the session, and
 * nodes run by their runtime kernel (runtime/ops).
 *
 * A runtime kernel allocates its outputs and sizes them from its inputs'
 * values when the op is data-dependent; the compiled plan reserved exactly
 * the recorded shape, so each output is checked against it before it is
 * copied into place. A mismatch is refused with the node's name. Outputs
 * the compiler marked dynamic (data-dependent shapes) are not checked but
 * kept, as the kernel sized them, in the session's slot for later nodes and
 * for kn_session_run_tensors.
 *
 * Tensors with dynamic dims (`--max`) are seen by the kernels in their
 * shape for this run (kn_rt_tensor_dims): the plan reserved the maximum, and
 * the value is stored densely in its actual shape from the reservation's
 * start, whichever path (generated or runtime kernel) wrote it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"
#include "subgraph.h"

int kn_rt_dnnl_exec(kn_exec *ex, int32_t index, void *src, const void *wei, const void *bias, void *dst,
                    const void *post_src)
{
    if (!ex || !ex->session) return kn_error(KN_ERR_INTERNAL, "kn_rt_dnnl_exec: no session");
    kn_session *s = ex->session;
    if (index < 0 || index >= s->art->meta.n_dnnl || !s->prims || !s->prims[index])
        return kn_error(KN_ERR_INTERNAL, "kn_rt_dnnl_exec: oneDNN primitive #%d does not exist (the artifact has %d)",
                        index, s->art->meta.n_dnnl);
    return kn_dnnl_prim_exec(s->dnnl, s->prims[index], src, wei, bias, dst, post_src, s->run_threads);
}

int kn_rt_dnnl_exec_rows(kn_exec *ex, int32_t index, int64_t rows, void *src, const void *wei, const void *bias,
                         void *dst, const void *post_src)
{
    if (!ex || !ex->session) return kn_error(KN_ERR_INTERNAL, "kn_rt_dnnl_exec_rows: no session");
    kn_dnnl_session_set_rows(ex->session->dnnl, rows);
    int st = kn_rt_dnnl_exec(ex, index, src, wei, bias, dst, post_src);
    kn_dnnl_session_set_rows(ex->session->dnnl, 0);
    return st;
}

int64_t kn_rt_sym(kn_exec *ex, int32_t index)
{
    /* the generated code only asks for symbols the meta declares (checked at open) */
    return ex && index >= 0 && index < KN_MAX_SYMS ? ex->syms[index] : 0;
}

void kn_rt_tensor_dims(const kn_exec *ex, const kn_abi_tensor *t, int64_t *dims)
{
    const kn_meta *m = &ex->session->art->meta;
    for (int d = 0; d < t->rank && d < KN_MAX_RANK; d++) {
        int k = t->dim_sym[d];
        dims[d] = t->dims[d];
        if (k > 0 && k <= m->n_syms) dims[d] += t->dim_a[d] * (ex->syms[k - 1] - m->syms[k - 1].max);
    }
}

size_t kn_rt_tensor_nbytes(const kn_exec *ex, const kn_abi_tensor *t)
{
    bool dyn = false;
    for (int d = 0; d < t->rank && d < KN_MAX_RANK; d++) dyn |= t->dim_sym[d] != 0;
    if (!dyn) return t->nbytes > 0 ? (size_t)t->nbytes : 0;
    int64_t dims[KN_MAX_RANK];
    kn_rt_tensor_dims(ex, t, dims);
    return kn_dtype_nbytes((kn_dtype)t->dtype, (size_t)kn_shape_numel(t->rank, dims));
}

/* "f32[1,3,224,224]" */
static char *sig_str(int dtype, int rank, const int64_t *dims, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "%s[", kn_dtype_name(dtype));
    for (int i = 0; i < rank && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
    return buf;
}

/* A dim of want that follows a symbol set by the data (kn_abi_sym.from_data)
 * takes got's size: the symbol's value in this run from here on. A size no
 * value in the symbol's range gives is left to the check that follows. */
static void set_data_syms(kn_exec *ex, const kn_abi_tensor *want, const kn_tensor *got)
{
    const kn_meta *m = &ex->session->art->meta;
    for (int d = 0; d < want->rank && d < KN_MAX_RANK && got->rank == want->rank; d++) {
        int k = want->dim_sym[d];
        if (k <= 0 || k > m->n_syms || !m->syms[k - 1].from_data) continue;
        const kn_abi_sym *y = &m->syms[k - 1];
        int64_t a = want->dim_a[d], diff = got->dims[d] - want->dims[d];
        if (a == 0 || diff % a) continue;
        int64_t n = y->max + diff / a;
        if (n >= y->min && n <= y->max) ex->syms[k - 1] = n;
    }
}

/* Checks a produced output against its record (in this run's shape) and
 * copies it to dst. */
static int deliver_output(kn_exec *ex, const kn_rt_opnode *rt, int k, const kn_tensor *got, void *dst)
{
    const kn_abi_tensor *want = &rt->abi->outputs[k];
    set_data_syms(ex, want, got);
    int64_t dims[KN_MAX_RANK];
    kn_rt_tensor_dims(ex, want, dims);
    bool same = (int)got->dtype == want->dtype && got->rank == want->rank;
    for (int i = 0; same && i < want->rank; i++) same = got->dims[i] == dims[i];
    if (!same) {
        char a[256], b[256];
        int rank = got->rank >= 0 && got->rank <= KN_MAX_RANK ? got->rank : 0;
        return kn_op_error(&rt->desc, KN_ERR_UNSUPPORTED,
                           "output %d is %s, but the artifact was compiled for %s (an output shape that depends on "
                           "input values cannot run in a compiled artifact)",
                           k, sig_str(got->dtype, rank, got->dims, b, sizeof b),
                           sig_str(want->dtype, want->rank, dims, a, sizeof a));
    }
    size_t nbytes = kn_rt_tensor_nbytes(ex, want);
    if (nbytes == 0) return KN_OK;
    if (!dst || !got->data || got->nbytes < nbytes)
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "output %d: no buffer to copy %zu bytes %s", k, nbytes,
                           dst ? "from" : "to");
    if (got->data != dst) memcpy(dst, got->data, nbytes); /* else written in place (kn_op_alloc_output) */
    return KN_OK;
}

/* A borrowed view of dynamic value `slot` (1-based), as the run produced it. */
static int slot_view(kn_session *s, const kn_rt_opnode *rt, int i, const kn_abi_tensor *t, kn_tensor *v)
{
    if (!s->slots || t->slot > s->art->meta.n_slots)
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "input %d ('%s'): slot %d does not exist", i,
                           t->name ? t->name : "?", t->slot);
    const kn_tensor *held = &s->slots[t->slot - 1];
    if (held->rank < 0 || (held->nbytes && !held->data))
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "input %d ('%s') has not been computed in this run", i,
                           t->name ? t->name : "?");
    *v = *held;
    v->own = KN_BORROWED;
    return KN_OK;
}

/* Borrowed views over the plan's buffers or the session's dynamic slots;
 * NULL for omitted inputs. */
static int input_views(kn_session *s, const kn_rt_opnode *rt, const void *const *in_ptrs, kn_tensor *views,
                       const kn_tensor **in)
{
    const kn_abi_opnode *o = rt->abi;
    for (int i = 0; i < o->n_inputs; i++) {
        const kn_abi_tensor *t = &o->inputs[i];
        in[i] = NULL;
        if (t->slot > 0) {
            int st = slot_view(s, rt, i, t, &views[i]);
            if (st) return st;
            in[i] = &views[i];
            continue;
        }
        if (t->rank < 0) continue;
        const void *p = in_ptrs ? in_ptrs[i] : NULL;
        if (!p && t->nbytes > 0)
            return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "input %d ('%s') has no buffer", i, t->name ? t->name : "?");
        kn_tensor *v = &views[i];
        v->dtype = (kn_dtype)t->dtype;
        v->rank = t->rank;
        kn_rt_tensor_dims(&s->exec, t, v->dims);
        v->data = (void *)p; /* kernels take inputs as const kn_tensor * */
        v->nbytes = kn_rt_tensor_nbytes(&s->exec, t);
        v->own = KN_BORROWED;
        in[i] = v;
    }
    return KN_OK;
}

/* Moves a produced dynamic output into its slot, replacing the previous
 * run's tensor. A kernel may return a view of an input (borrowed): that is
 * copied, since the input may be overwritten before the value's last use. */
static int keep_dynamic(kn_session *s, const kn_rt_opnode *rt, int k, kn_tensor *got)
{
    const kn_abi_tensor *want = &rt->abi->outputs[k];
    if (!s->slots || want->slot > s->art->meta.n_slots)
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "output %d: slot %d does not exist", k, want->slot);
    if (want->dtype != KN_DT_UNDEFINED && (int)got->dtype != want->dtype)
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "output %d is %s, the artifact expects %s", k,
                           kn_dtype_name(got->dtype), kn_dtype_name(want->dtype));
    if (got->rank < 0 || got->rank > KN_MAX_RANK)
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "output %d was not produced", k);
    kn_tensor *slot = &s->slots[want->slot - 1];
    kn_tensor_free(slot);
    if (got->own == KN_BORROWED && got->nbytes) {
        int st = kn_tensor_copy(slot, got);
        if (st) kn_op_error(&rt->desc, st, "output %d: out of memory", k);
        return st;
    }
    *slot = *got;
    memset(got, 0, sizeof *got);
    return KN_OK;
}

/* Frees the dynamic inputs of opnode `index` that no later node reads. */
static void free_dead_slots(kn_session *s, int index)
{
    const kn_artifact *a = s->art;
    const kn_abi_opnode *o = a->opnodes[index].abi;
    for (int i = 0; i < o->n_inputs && s->slots && a->slot_last_use; i++) {
        int slot = o->inputs[i].slot;
        if (slot <= 0 || slot > a->meta.n_slots || a->slot_last_use[slot - 1] != index) continue;
        kn_tensor_free(&s->slots[slot - 1]);
        s->slots[slot - 1].rank = -1;
    }
}

/* True if output k of the node has a place in the memory plan's arena that
 * its kernel may write directly: one of a size known before the kernel
 * runs (no dim the data sets) that overlaps none of the inputs. */
static bool output_dest(kn_exec *ex, const kn_rt_opnode *rt, int k, const kn_tensor *const *in, void *dst,
                        size_t *nbytes)
{
    const kn_abi_tensor *want = &rt->abi->outputs[k];
    const kn_meta *m = &ex->session->art->meta;
    if (!dst || !rt->has_output[k] || want->slot > 0 || want->dtype == KN_DT_UNDEFINED || want->dtype == KN_STRING)
        return false;
    for (int d = 0; d < want->rank && d < KN_MAX_RANK; d++) {
        int y = want->dim_sym[d];
        if (y > 0 && y <= m->n_syms && m->syms[y - 1].from_data) return false;
    }
    size_t n = kn_rt_tensor_nbytes(ex, want);
    const char *a = dst;
    for (int i = 0; n && i < rt->abi->n_inputs; i++) {
        const char *b = in[i] ? in[i]->data : NULL;
        if (b && in[i]->nbytes && a < b + in[i]->nbytes && b < a + n) return false;
    }
    *nbytes = n;
    return n > 0;
}

/* ---- layout-agnostic nodes channels-last (KN_OPNODE_NHWC_ALL) ----------- */

/* A rank-4 tensor's dims from NCHW order to NHWC order, and back. */
static void dims_to_nhwc(kn_tensor *t)
{
    if (t->rank != 4) return;
    int64_t c = t->dims[1];
    t->dims[1] = t->dims[2], t->dims[2] = t->dims[3], t->dims[3] = c;
}

static void dims_to_nchw(kn_tensor *t)
{
    if (t->rank != 4) return;
    int64_t c = t->dims[3];
    t->dims[3] = t->dims[2], t->dims[2] = t->dims[1], t->dims[1] = c;
}

/* Resize's per-axis input i (roi: starts then ends; scales; sizes) for NHWC
 * dims, permuted into buf; an empty one stays as it is. */
static int nhwc_resize_arg(const kn_rt_opnode *rt, int i, kn_tensor *view, int64_t buf[8])
{
    int64_t n = kn_tensor_numel(view);
    size_t es = kn_dtype_size(view->dtype);
    if (n == 0) return KN_OK;
    if ((n != 4 && n != 8) || (es != 4 && es != 8) || view->nbytes < (size_t)n * es)
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "input %d: %lld values, not one per axis of a rank-4 tensor",
                           i, (long long)n);
    static const int from[4] = {0, 2, 3, 1}; /* NHWC axis k is NCHW axis from[k] */
    const char *src = view->data;
    for (int64_t k = 0; k < n; k++)
        memcpy((char *)buf + k * es, src + ((k / 4) * 4 + from[k % 4]) * es, es);
    view->data = buf;
    return KN_OK;
}

/* The node's rank-4 operands as NHWC (their data already is: the compiler
 * says so); Split's sizes stay as they are, Resize's per-axis inputs are
 * permuted (into bufs), and a binary op's other operands must be single
 * elements (they broadcast alike either way). */
static int nhwc_inputs(const kn_rt_opnode *rt, kn_tensor *views, const kn_tensor **in, int64_t bufs[][8])
{
    if (rt->desc.op == KN_OP_Resize && kn_op_attr(&rt->desc, "axes"))
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "a Resize over some axes cannot run channels-last");
    for (int i = 0; i < rt->abi->n_inputs; i++) {
        if (!in[i] || (rt->desc.op == KN_OP_Split && i > 0)) continue;
        if (rt->desc.op == KN_OP_Resize && i > 0) {
            int st = i < 4 ? nhwc_resize_arg(rt, i, &views[i], bufs[i - 1]) : KN_OK;
            if (st) return st;
            continue;
        }
        if (in[i]->rank == 4) dims_to_nhwc(&views[i]);
        else if (kn_tensor_numel(in[i]) != 1)
            return kn_op_error(&rt->desc, KN_ERR_INTERNAL,
                               "input %d has rank %d: a node run channels-last takes rank-4 operands only", i,
                               in[i]->rank);
    }
    return KN_OK;
}

/* ---- the same on the session's layout (KN_OPNODE_NATIVE_ALL) ------------- */

/* What KN_LAYOUT_NATIVE stands for in s (kn_dnnl_native_block: 0 NHWC, 8 or
 * 16 a channel block, -1 plain). */
static int native_block(kn_session *s)
{
    return s->dnnl ? kn_dnnl_native_block(s->dnnl) : -1;
}

/* True if a rank-4 f32 tensor of these dims is blocked by b in memory (the
 * session keeps one whose channels do not fill whole blocks plain). */
static bool is_blocked(const int64_t *dims, int b) { return b > 0 && dims[1] > 0 && dims[1] % b == 0; }

/* nChw{b}c to NCHW (to_plain) or back, f32. */
static void reblock(const float *src, float *dst, const int64_t *dims, int b, bool to_plain)
{
    int64_t N = dims[0], C = dims[1], HW = dims[2] * dims[3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < HW; p++) {
                int64_t bi = ((n * (C / b) + c / b) * HW + p) * b + c % b, pi = (n * C + c) * HW + p;
                if (to_plain) dst[pi] = src[bi];
                else dst[bi] = src[pi];
            }
}

/* Plain copies (in plain[i], to free) of the node's blocked rank-4 operands. */
static int unblock_inputs(const kn_rt_opnode *rt, int b, kn_tensor *views, const kn_tensor **in, void **plain)
{
    for (int i = 0; i < rt->abi->n_inputs; i++) {
        if (!in[i] || in[i]->rank != 4 || !is_blocked(in[i]->dims, b) || (rt->desc.op == KN_OP_Split && i > 0) ||
            (rt->desc.op == KN_OP_Resize && i > 0))
            continue;
        if (in[i]->dtype != KN_F32)
            return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "input %d is %s: a node on the session's layout takes f32",
                               i, kn_dtype_name(in[i]->dtype));
        if (!(plain[i] = malloc(in[i]->nbytes ? in[i]->nbytes : 1))) return kn_error(KN_ERR_NOMEM, "out of memory");
        reblock(in[i]->data, plain[i], in[i]->dims, b, true);
        views[i].data = plain[i];
    }
    return KN_OK;
}

/* Output k (plain, as the kernel made it) into the session's blocked layout. */
static int block_output(const kn_rt_opnode *rt, int k, int b, kn_tensor *out)
{
    if (out->rank != 4 || !is_blocked(out->dims, b) || !out->data) return KN_OK;
    if (out->dtype != KN_F32)
        return kn_op_error(&rt->desc, KN_ERR_INTERNAL, "output %d is %s: a node on the session's layout makes f32", k,
                           kn_dtype_name(out->dtype));
    void *blk = malloc(out->nbytes ? out->nbytes : 1);
    if (!blk) return kn_error(KN_ERR_NOMEM, "out of memory");
    reblock(out->data, blk, out->dims, b, false);
    kn_tensor t = *out;
    kn_tensor_free(out);
    *out = t;
    out->data = blk, out->own = KN_OWNED, out->map_base = NULL;
    return KN_OK;
}

/* Runs the kernel of a node; a control-flow node's bodies find the outer
 * values they read among its captures, the inputs after the op's own.
 * nhwc: its rank-4 operands run on NHWC dims (kn_rt_opnode.nhwc_attrs). */
static int run_kernel(const kn_rt_opnode *rt, kn_op_session *sess, const kn_tensor **in, kn_tensor *outs, bool nhwc)
{
    int n_caps = rt->abi->n_captures, first = rt->abi->n_inputs - n_caps;
    const char **names = calloc((size_t)n_caps + 1, sizeof *names);
    if (!names) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int j = 0; j < n_caps; j++) names[j] = rt->abi->inputs[first + j].name;
    kn_sg_scope scope = {.n = n_caps, .names = names, .tensors = in + first};
    kn_body_runner body = kn_sg_body_runner(&scope);
    kn_opdesc d = rt->desc;
    d.body = &body;
    d.sess = sess;
    if (nhwc && rt->nhwc_attrs) d.attrs = rt->nhwc_attrs, d.n_attrs = rt->n_nhwc_attrs;
    int st = kn_op_exec(d.op)(&d, in, outs);
    free(names);
    return st;
}

int kn_rt_opnode_exec(kn_exec *ex, int32_t index, const void *const *in_ptrs, void *const *out_ptrs)
{
    if (!ex || !ex->session) return kn_error(KN_ERR_INTERNAL, "kn_rt_opnode_exec: no session");
    kn_session *s = ex->session;
    const kn_artifact *a = s->art;
    if (index < 0 || index >= a->meta.n_opnodes)
        return kn_error(KN_ERR_INTERNAL, "kn_rt_opnode_exec: node #%d does not exist (the artifact has %d)", index,
                        a->meta.n_opnodes);
    const kn_rt_opnode *rt = &a->opnodes[index];
    int n_in = rt->abi->n_inputs, n_out = rt->abi->n_outputs;
    kn_tensor *views = calloc((size_t)n_in + 1, sizeof *views);
    const kn_tensor **in = calloc((size_t)n_in + 1, sizeof *in);
    kn_tensor *outs = calloc((size_t)n_out + 1, sizeof *outs);
    int st = views && in && outs ? KN_OK : kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st) st = input_views(s, rt, in_ptrs, views, in);
    /* layout-agnostic nodes: on NHWC dims, or on plain copies of the
     * session's blocked layout */
    int block = rt->abi->nhwc == KN_OPNODE_NATIVE_ALL ? native_block(s) : -1;
    bool all_nhwc = rt->abi->nhwc == KN_OPNODE_NHWC_ALL || (rt->abi->nhwc == KN_OPNODE_NATIVE_ALL && block == 0);
    int64_t resize_args[3][8]; /* Resize's roi, scales and sizes in NHWC order */
    void **plain = block > 0 ? calloc((size_t)n_in + 1, sizeof *plain) : NULL;
    if (!st && block > 0 && !plain) st = kn_error(KN_ERR_NOMEM, "out of memory");
    if (!st && all_nhwc) st = nhwc_inputs(rt, views, in, resize_args);
    if (!st && block > 0) st = unblock_inputs(rt, block, views, in, plain);
    void **dest = calloc((size_t)n_out + 1, sizeof *dest);
    size_t *dest_bytes = calloc((size_t)n_out + 1, sizeof *dest_bytes);
    kn_op_session *os = s->opsess ? &s->opsess[index] : NULL;
    if (!st && (!dest || !dest_bytes)) st = kn_error(KN_ERR_NOMEM, "out of memory");
    for (int k = 0; !st && os && out_ptrs && k < n_out && block <= 0; k++) /* a blocked output is copied */
        if (output_dest(ex, rt, k, in, out_ptrs[k], &dest_bytes[k])) dest[k] = out_ptrs[k];
    if (os) os->outs = outs, os->out_dest = dest, os->out_dest_bytes = dest_bytes, os->n_outs = n_out;
    if (!st) st = run_kernel(rt, os, in, outs, all_nhwc);
    if (os) os->outs = NULL, os->out_dest = NULL, os->out_dest_bytes = NULL, os->n_outs = 0;
    free(dest);
    free(dest_bytes);
    for (int i = 0; plain && i < n_in; i++) free(plain[i]);
    free(plain);
    for (int k = 0; !st && all_nhwc && k < n_out; k++) dims_to_nchw(&outs[k]); /* the values' dims stay NCHW */
    for (int k = 0; !st && block > 0 && k < n_out; k++) st = block_output(rt, k, block, &outs[k]);
    for (int k = 0; k < n_out && !st; k++) {
        if (!rt->has_output[k]) continue;
        if (rt->abi->outputs[k].slot > 0) st = keep_dynamic(s, rt, k, &outs[k]);
        else st = deliver_output(ex, rt, k, &outs[k], out_ptrs ? out_ptrs[k] : NULL);
    }
    for (int k = 0; outs && k < n_out; k++) kn_tensor_free(&outs[k]);
    free(outs);
    free(in);
    free(views);
    if (!st) free_dead_slots(s, index);
    return st;
}
