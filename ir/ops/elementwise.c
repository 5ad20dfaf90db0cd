/* Op definitions of the 'elementwise' family (see ir/ops.h). */
#include "../eval.h"

const kn_op_impl kn_ops_elementwise[] = {
    {KN_OP_UNKNOWN, NULL, NULL},
};
