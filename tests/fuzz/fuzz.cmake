# Short runs of every fuzz target (included by tests/CMakeLists.txt), one
# ctest test each: tests/fuzz/run_short.sh builds the libFuzzer targets in
# their own folder (clang, ASan+UBSan; one build shared by the four tests,
# under a lock) and runs scripts/fuzz on its target for 15 s. Without
# clang or libFuzzer they report SKIPPED (exit 77), never a pass. Labelled
# no-asan because they bring their own sanitizers (make test-asan skips
# them). The regression inputs replay in every build through
# tests/fuzz/test_regress.c.
if(NOT KILN_FUZZ)
  set(_fuzz_build ${CMAKE_BINARY_DIR}/fuzz-build)
  foreach(t npy meta attrs onnx)
    add_test(NAME fuzz/${t}
      COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_short.sh ${CMAKE_SOURCE_DIR} ${_fuzz_build} ${t} 15)
    set_tests_properties(fuzz/${t} PROPERTIES
      LABELS "fuzz;no-asan"
      SKIP_RETURN_CODE 77
      TIMEOUT 1500
      ENVIRONMENT "KILN_PYTHON=${KILN_PYTHON}")
  endforeach()
endif()
# the replay links the shared entry points (the cmocka target is globbed)
target_sources(fuzz_test_regress PRIVATE ${CMAKE_CURRENT_LIST_DIR}/fuzz_one.c)
target_include_directories(fuzz_test_regress PRIVATE ${CMAKE_SOURCE_DIR}/frontend/onnx)
