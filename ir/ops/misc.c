/* Op definitions of the 'misc' family (see ir/ops.h). */
#include "../eval.h"

const kn_op_impl kn_ops_misc[] = {
    {KN_OP_UNKNOWN, NULL, NULL},
};
