# The ONNX backend node suite through the reference evaluator, with a floor
# on the pass count that may only rise (tests/conformance/floor.txt).
add_test(NAME conformance/reference
         COMMAND ${CMAKE_SOURCE_DIR}/tests/conformance/check_floor.sh $<TARGET_FILE:kiln> reference
                 ${CMAKE_SOURCE_DIR}/tests/conformance/floor.txt)
set_tests_properties(conformance/reference PROPERTIES TIMEOUT 1500 LABELS "conformance")

# The same suite compiled: every case becomes an artifact run through libkiln_rt.
add_test(NAME conformance/cpu
         COMMAND ${CMAKE_SOURCE_DIR}/tests/conformance/check_floor.sh $<TARGET_FILE:kiln> cpu
                 ${CMAKE_SOURCE_DIR}/tests/conformance/floor_cpu.txt)
set_tests_properties(conformance/cpu PROPERTIES TIMEOUT 1500 LABELS "conformance")
