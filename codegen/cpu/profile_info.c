/*
 * codegen/cpu/profile_info.c — what `kiln profile` needs to know about a
 * compiled model, recorded in its meta (kiln/abi.h: kn_abi_step,
 * kn_abi_buffer).
 *
 * A step is one function that `run` calls: an emitted node (generated code,
 * a oneDNN primitive or a runtime kernel; folded constants and aliases emit
 * nothing and have no step), plus a last "(outputs)" step when outputs are
 * copied at the end. Each step carries its FLOPs (ir/cost.c) and the bytes
 * its node reads and writes. Each arena block of the plan becomes a buffer
 * with its offset, size and the steps it is live through, from the plan's
 * node-index live ranges mapped onto step indices.
 */
#include "driver.h"

#include <math.h>
#include <stdlib.h>

#include "kiln/kiln.h"

static int64_t static_nbytes(const kn_value *v)
{
    if (!v) return 0;
    if (v->const_data) return (int64_t)v->const_data->nbytes;
    int64_t n = kn_shape_is_static(&v->shape) ? kn_cg_numel(v) : -1;
    return n < 0 ? 0 : (int64_t)kn_dtype_nbytes(v->dtype, (size_t)n); /* data-dependent: unknown, 0 */
}

static kn_abi_step node_step(const kn_node *n, int32_t dnnl)
{
    kn_abi_step t = {.name = n->name ? n->name : n->op_type, .op_type = n->op_type, .dnnl = dnnl};
    double f = kn_node_flops(n);
    t.flops = f > 0 ? (int64_t)llround(f) : 0;
    for (int k = 0; k < n->n_inputs; k++) t.bytes_read += static_nbytes(n->inputs[k]);
    for (int k = 0; k < n->n_outputs; k++) t.bytes_written += static_nbytes(n->outputs[k]);
    return t;
}

static bool is_graph_output(const kn_graph *g, int value_id)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i]->id == value_id) return true;
    return false;
}

/* One buffer per value that owns an arena block; step_of[node index] is the
 * last step at or before that node. */
static int fill_buffers(const kn_graph *g, const kn_plan *p, const int *step_of, kn_meta *meta)
{
    meta->buffers = calloc((size_t)g->n_values + 1, sizeof *meta->buffers);
    if (!meta->buffers) return kn_error(KN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_values; i++) {
        const kn_value *v = g->values[i];
        int id = v->id;
        if (id < 0 || id >= p->n_where || p->live_first[id] < 0 || p->where[id].loc != KN_LOC_ARENA) continue;
        int first = step_of[p->live_first[id]], last = step_of[p->live_last[id]];
        if (first < 0) first = 0;
        if (last < first) last = first;
        if (is_graph_output(g, id)) last = meta->n_steps - 1; /* read by the final copy */
        int64_t nb = (static_nbytes(v) + 63) / 64 * 64;
        if (nb > meta->arena_bytes - p->where[id].offset) nb = meta->arena_bytes - p->where[id].offset;
        meta->buffers[meta->n_buffers++] = (kn_abi_buffer){
            .name = v->name, .offset = p->where[id].offset, .nbytes = nb, .first_step = first, .last_step = last};
    }
    return KN_OK;
}

int kn_cg_profile_info(const kn_graph *g, const kn_plan *p, const bool *has_step, const int32_t *node_dnnl,
                       int64_t copy_bytes, kn_meta *meta)
{
    meta->n_steps = meta->n_buffers = 0;
    meta->steps = calloc((size_t)g->n_nodes + 2, sizeof *meta->steps);
    int *step_of = calloc((size_t)g->n_nodes + 1, sizeof *step_of);
    if (!meta->steps || !step_of) {
        free(step_of);
        return kn_error(KN_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (has_step[i]) meta->steps[meta->n_steps++] = node_step(g->nodes[i], node_dnnl[i]);
        step_of[i] = meta->n_steps - 1;
    }
    if (copy_bytes > 0)
        meta->steps[meta->n_steps++] = (kn_abi_step){.name = "(outputs)", .op_type = "Copy", .dnnl = -1,
                                                     .bytes_read = copy_bytes, .bytes_written = copy_bytes};
    int st = meta->n_steps > 0 ? fill_buffers(g, p, step_of, meta) : KN_OK;
    free(step_of);
    return st;
}

void kn_cg_profile_info_free(kn_meta *meta)
{
    free(meta->steps);
    free(meta->buffers);
    meta->steps = NULL;
    meta->buffers = NULL;
    meta->n_steps = meta->n_buffers = 0;
}
