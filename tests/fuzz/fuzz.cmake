# A short run of the ONNX importer fuzzer (included by tests/CMakeLists.txt).
# Only where clang exists: configures and builds the libFuzzer target in its
# own folder (ASan+UBSan, clang), then runs scripts/fuzz for 60 s. Labelled
# no-asan because it brings its own sanitizers (make test-asan skips it).
find_program(KILN_CLANG clang)
if(KILN_CLANG AND NOT KILN_FUZZ)
  set(_fuzz_build ${CMAKE_BINARY_DIR}/fuzz-build)
  add_test(NAME fuzz/onnx_import
    COMMAND sh -c "\"${CMAKE_COMMAND}\" -S \"${CMAKE_SOURCE_DIR}\" -B \"${_fuzz_build}\" -G Ninja -DCMAKE_C_COMPILER=\"${KILN_CLANG}\" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON -DKILN_SANITIZE=ON -DKILN_TESTS=OFF >/dev/null && \"${CMAKE_COMMAND}\" --build \"${_fuzz_build}\" --target fuzz_onnx_import >/dev/null && \"${CMAKE_SOURCE_DIR}/scripts/fuzz\" \"${_fuzz_build}\" 60")
  set_tests_properties(fuzz/onnx_import PROPERTIES
    LABELS "fuzz;no-asan"
    TIMEOUT 1200
    ENVIRONMENT "KILN_PYTHON=${KILN_PYTHON}")
endif()
