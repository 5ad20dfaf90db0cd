/* Op definitions of the 'movement' family (see ir/ops.h). */
#include "../eval.h"

const kn_op_impl kn_ops_movement[] = {
    {KN_OP_UNKNOWN, NULL, NULL},
};
