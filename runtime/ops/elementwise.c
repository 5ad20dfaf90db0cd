/* Execution of the 'elementwise' ops (see opdesc.h); kernels are in runtime/kernels. */
#include "opdesc.h"

const kn_exec_impl kn_exec_elementwise[] = {
    {KN_OP_UNKNOWN, NULL},
};
