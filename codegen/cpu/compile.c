/* The CPU compiler driver (placeholder until the core lands). */
#include "cg.h"

int kn_compile_cpu(kn_model *m, const kn_compile_opts *opts)
{
    (void)m;
    (void)opts;
    return kn_error(KN_ERR_UNSUPPORTED, "the CPU code generator is not built yet");
}
