/* Execution of the 'movement' ops (see opdesc.h); kernels are in runtime/kernels. */
#include "opdesc.h"

const kn_exec_impl kn_exec_movement[] = {
    {KN_OP_UNKNOWN, NULL},
};
