/* codegen/cpu/lower_reduce.c — generated loop nests for reductions, softmax,
 * normalizations and pooling (see cg.h). */
#include "cg.h"

const kn_cg_lowering kn_cg_lower_reduce[] = {
    {KN_OP_UNKNOWN, NULL},
};
