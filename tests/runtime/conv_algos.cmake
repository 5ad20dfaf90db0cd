# Every convolution algorithm forced through KILN_CONV_ALGO on a compiled
# model, against onnxruntime; every tuning-table row (KILN_TUNE_FAMILY).
add_test(NAME runtime/conv_algos
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/runtime/test_conv_algos.py $<TARGET_FILE:kiln>)
set_tests_properties(runtime/conv_algos PROPERTIES TIMEOUT 600 LABELS "runtime")

# Concat, Split, Resize and elementwise ops between convolutions of a static
# model on the session's layout, under each layout a CPU may pick
# (KILN_NATIVE_LAYOUT), against onnxruntime.
add_test(NAME runtime/native_agnostic
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/runtime/test_native_agnostic.py $<TARGET_FILE:kiln>)
set_tests_properties(runtime/native_agnostic PROPERTIES TIMEOUT 300 LABELS "runtime")
