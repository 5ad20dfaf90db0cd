# The ONNX backend node suite through the reference evaluator and through the
# cpu backend (every case compiled to an artifact and run through libkiln_rt).
# check_floor.sh fails if any case listed in passing*.txt stops passing (per
# case, so a regression is never hidden by another case starting to pass),
# on any FAIL and on a non-zero exit. The cpu run's closing line also says how
# many passing cases ran only runtime kernels (no generated code at all).
add_test(NAME conformance/reference
         COMMAND ${CMAKE_SOURCE_DIR}/tests/conformance/check_floor.sh $<TARGET_FILE:kiln> reference
                 ${CMAKE_SOURCE_DIR}/tests/conformance/passing.txt)
set_tests_properties(conformance/reference PROPERTIES TIMEOUT 1500 LABELS "conformance")

add_test(NAME conformance/cpu
         COMMAND ${CMAKE_SOURCE_DIR}/tests/conformance/check_floor.sh $<TARGET_FILE:kiln> cpu
                 ${CMAKE_SOURCE_DIR}/tests/conformance/passing_cpu.txt)
set_tests_properties(conformance/cpu PROPERTIES TIMEOUT 1500 LABELS "conformance")

# check_floor.sh itself, against stand-in conformance runs (seconds).
add_test(NAME conformance/check_floor_selftest COMMAND ${CMAKE_SOURCE_DIR}/tests/conformance/test_check_floor.sh)
set_tests_properties(conformance/check_floor_selftest PROPERTIES TIMEOUT 60 LABELS "conformance")
