/* Execution of the 'reduce' ops (see opdesc.h); kernels are in runtime/kernels. */
#include "opdesc.h"

const kn_exec_impl kn_exec_reduce[] = {
    {KN_OP_UNKNOWN, NULL},
};
