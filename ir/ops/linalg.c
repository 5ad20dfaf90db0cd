/* Op definitions of the 'linalg' family (see ir/ops.h). */
#include "../eval.h"

const kn_op_impl kn_ops_linalg[] = {
    {KN_OP_UNKNOWN, NULL, NULL},
};
