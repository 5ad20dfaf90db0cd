/* Op definitions of the 'nn' family (see ir/ops.h). */
#include "../eval.h"

const kn_op_impl kn_ops_nn[] = {
    {KN_OP_UNKNOWN, NULL, NULL},
};
