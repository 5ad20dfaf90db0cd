/*
 * Execution of the 'select' ops (see opdesc.h): the positions or values a
 * tensor holds, whose output size is the data's: NonZero, Compress, Unique.
 * Kernels are in runtime/kernels/ref/select.c; the attribute rule
 * (select_int.h) is shared with the family's type inference in the IR
 * (ir/ops/select.c).
 */
#include <string.h>

#include "k_select.h"
#include "select_int.h"

static int exec_nonzero(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    return kn_op_fail(d, kn_k_nonzero(in[0], &out[0]));
}

int kn_sel_opt_axis(const kn_opdesc *d, int rank)
{
    if (!kn_op_attr(d, "axis")) return -1;
    if (rank < 0) return 0;
    int a;
    return kn_op_axis(d, kn_op_attr_int(d, "axis", 0), rank, &a) ? -2 : a;
}

static int exec_compress(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 2)) return KN_ERR_INVALID;
    int a = kn_sel_opt_axis(d, in[0]->rank);
    if (a == -2) return KN_ERR_INVALID;
    return kn_op_fail(d, kn_k_compress(in[0], in[1], a, &out[0]));
}

static int exec_unique(const kn_opdesc *d, const kn_tensor *const *in, kn_tensor *out)
{
    if (kn_op_need_inputs(d, in, 1)) return KN_ERR_INVALID;
    int a = kn_sel_opt_axis(d, in[0]->rank);
    if (a == -2) return KN_ERR_INVALID;
    kn_tensor all[KN_SEL_MAX_OUTPUTS];
    memset(all, 0, sizeof all);
    int st = kn_k_unique(in[0], a, kn_op_attr_int(d, "sorted", 1) != 0, all);
    /* Hand over the outputs the node wants; free the rest. */
    for (int i = 0; i < KN_SEL_MAX_OUTPUTS; i++) {
        if (!st && kn_op_has_output(d, i)) out[i] = all[i];
        else kn_tensor_free(&all[i]);
    }
    return kn_op_fail(d, st);
}

/* ---- the family table ---------------------------------------------------------- */

const kn_exec_impl kn_exec_select[] = {
    {KN_OP_NonZero, exec_nonzero},
    {KN_OP_Compress, exec_compress},
    {KN_OP_Unique, exec_unique},
    {KN_OP_UNKNOWN, NULL},
};
