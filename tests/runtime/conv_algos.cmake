# Every convolution algorithm forced through KILN_CONV_ALGO on a compiled
# model, against onnxruntime; every tuning-table row (KILN_TUNE_FAMILY).
add_test(NAME runtime/conv_algos
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/runtime/test_conv_algos.py $<TARGET_FILE:kiln>)
set_tests_properties(runtime/conv_algos PROPERTIES TIMEOUT 600 LABELS "runtime")
