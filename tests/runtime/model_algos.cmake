# The CNN model tests with each convolution algorithm forced through
# KILN_CONV_ALGO, against onnxruntime at 1e-5 (run_model_algos.sh); the
# models come from tests/models' generate fixtures.
foreach(model resnet50 mobilenetv2)
  add_test(NAME runtime/model_algos_${model}
           COMMAND ${CMAKE_SOURCE_DIR}/tests/runtime/run_model_algos.sh $<TARGET_FILE:kiln> ${KILN_PYTHON}
                   ${CMAKE_BINARY_DIR}/models/${model})
  set_tests_properties(runtime/model_algos_${model} PROPERTIES
    FIXTURES_REQUIRED model_${model} LABELS "runtime;models" TIMEOUT 1200)
endforeach()
