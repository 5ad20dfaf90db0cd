/*
 * tests/fuzz/fuzz_main.c — the libFuzzer entry of one fuzz target. CMake
 * builds this file once per target with KN_FUZZ_ENTRY naming the function
 * of fuzz_one.h it calls (fuzz_npy → kn_fuzz_npy, ...).
 */
#include "fuzz_one.h"

#ifndef KN_FUZZ_ENTRY
#error "KN_FUZZ_ENTRY must name a kn_fuzz_* function"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return KN_FUZZ_ENTRY(data, size);
}
