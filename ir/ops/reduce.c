/* Op definitions of the 'reduce' family (see ir/ops.h). */
#include "../eval.h"

const kn_op_impl kn_ops_reduce[] = {
    {KN_OP_UNKNOWN, NULL, NULL},
};
