/*
 * tests/fuzz/fuzz_onnx_import.c — libFuzzer target for the ONNX importer.
 *
 * Feeds arbitrary bytes to kn_onnx_load_bytes (no base folder, so external
 * data is refused without touching the file system) and, when a model
 * loads, runs the unsupported-op check and frees it. Any crash, sanitizer
 * report or leak is a bug in the importer. Built by `make fuzz`
 * (-DKILN_FUZZ=ON) and run by scripts/fuzz.
 */
#include <stddef.h>
#include <stdint.h>

#include "onnx_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kn_model *m = NULL;
    if (kn_onnx_load_bytes(data, size, NULL, &m) == KN_OK) {
        /* walks every graph and node the importer built */
        (void)kn_onnx_check_supported(m);
        kn_model_free(m);
    }
    return 0;
}
