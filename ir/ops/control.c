/* Op definitions of the 'control' family (see ir/ops.h). */
#include "../eval.h"

const kn_op_impl kn_ops_control[] = {
    {KN_OP_UNKNOWN, NULL, NULL},
};
