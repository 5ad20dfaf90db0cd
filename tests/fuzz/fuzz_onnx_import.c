/*
 * tests/fuzz/fuzz_onnx_import.c — libFuzzer target for the ONNX importer.
 *
 * Feeds arbitrary bytes to kn_onnx_load_bytes (no base folder, so external
 * data is refused without touching the file system) and to
 * kn_onnx_load_tensor_bytes (the test-data tensor reader); when a model
 * loads, runs the unsupported-op check and the IR verifier (whose verdict
 * is ignored: an odd but importable graph may fail it; it must not crash)
 * and frees it. With KILN_FUZZ_INFER=1 in the environment it also runs type
 * and shape inference, which fuzzes every op's infer function. Any crash,
 * sanitizer report or leak is a bug. Built by `make fuzz` (-DKILN_FUZZ=ON)
 * and run by scripts/fuzz.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "onnx_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kn_model *m = NULL;
    if (kn_onnx_load_bytes(data, size, NULL, &m) == KN_OK) {
        /* walks every graph and node the importer built */
        (void)kn_onnx_check_supported(m);
        (void)kn_graph_verify(m->graph);
        static int infer = -1;
        if (infer < 0) infer = getenv("KILN_FUZZ_INFER") && atoi(getenv("KILN_FUZZ_INFER")) > 0;
        if (infer) (void)kn_graph_infer(m->graph);
        kn_model_free(m);
    }
    kn_tensor t;
    char *name = NULL;
    if (kn_onnx_load_tensor_bytes(data, size, &t, &name) == KN_OK) {
        kn_tensor_free(&t);
        free(name);
    }
    return 0;
}
