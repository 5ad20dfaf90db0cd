# `kiln compile` refuses the models of issue 14 (bad attributes, arity,
# opsets, declared types, shapes over 2^62 bytes, 20,000-input Sum) with a
# message, a non-zero exit and no artifact.
add_test(NAME frontend/refusals
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/frontend/check_refusals.py
                 $<TARGET_FILE:kiln> ${CMAKE_BINARY_DIR}/test_models/refusals)

# ops.def's opset ranges are ONNX's (the importer refuses a node outside them).
add_test(NAME frontend/opsets
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/frontend/check_opsets.py ${CMAKE_SOURCE_DIR}/runtime/ops/ops.def)
