/*
 * tests/fuzz/fuzz_one.h — one entry point per parser of untrusted bytes.
 *
 * Each function feeds `size` arbitrary bytes to one parser and, when they
 * parse, walks and frees what came out. None may crash, leak or trip a
 * sanitizer on any input. Each returns the verdict (KN_OK or the first
 * error), which the fuzzers ignore and the replay checks. The
 * libFuzzer targets (fuzz_main.c, one executable per function) and the
 * replay of tests/fuzz/regress/ (test_regress.c) share them, so that a
 * finding replays through exactly the code that found it.
 *
 *     kn_fuzz_npy(bytes, n);   // as LLVMFuzzerTestOneInput of fuzz_npy
 */
#ifndef KILN_TESTS_FUZZ_ONE_H
#define KILN_TESTS_FUZZ_ONE_H

#include <stddef.h>
#include <stdint.h>

/* A .npy file (kn_npy_parse, what `kiln run --input` reads). */
int kn_fuzz_npy(const uint8_t *data, size_t size);
/* An artifact's serialized kn_meta (kn_meta_read, what kn_artifact_open
 * reads), then the attribute blob of each of its op nodes. */
int kn_fuzz_meta(const uint8_t *data, size_t size);
/* A node attribute blob alone (kn_attrs_read), subgraphs included. */
int kn_fuzz_attrs(const uint8_t *data, size_t size);
/* An ONNX model (kn_onnx_load_bytes) followed, when it imports, by the
 * support check, type and shape inference and the verifier, as `kiln
 * compile` runs them (the verdict is the first of them that failed); and
 * the same bytes as a TensorProto test-data file (verdict not counted). */
int kn_fuzz_onnx(const uint8_t *data, size_t size);

#endif
