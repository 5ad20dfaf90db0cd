/* Execution of the 'nn' ops (see opdesc.h); kernels are in runtime/kernels. */
#include "opdesc.h"

const kn_exec_impl kn_exec_nn[] = {
    {KN_OP_UNKNOWN, NULL},
};
