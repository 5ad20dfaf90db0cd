# End-to-end tests of the graph passes through `kiln compile`: small ONNX
# models (gen_pass_models.py) whose patterns the -O3 pipeline must rewrite,
# checked on the --report output and, compiled, against onnxruntime.
# Included from tests/CMakeLists.txt.
set(KILN_PASS_MODELS ${CMAKE_BINARY_DIR}/pass_models)
add_test(NAME passes/models_generate
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/passes/gen_pass_models.py ${KILN_PASS_MODELS})
set_tests_properties(passes/models_generate PROPERTIES FIXTURES_SETUP pass_models LABELS passes TIMEOUT 120)

add_test(NAME passes/conv_bn_report
         COMMAND ${CMAKE_SOURCE_DIR}/tests/passes/check_report.sh $<TARGET_FILE:kiln>
                 ${KILN_PASS_MODELS}/conv_bn/model.onnx ${KILN_PASS_MODELS}/conv_bn.so
                 --absent BatchNormalization Dropout Identity --present Conv Gemm)
add_test(NAME passes/decomposed_report
         COMMAND ${CMAKE_SOURCE_DIR}/tests/passes/check_report.sh $<TARGET_FILE:kiln>
                 ${KILN_PASS_MODELS}/decomposed/model.onnx ${KILN_PASS_MODELS}/decomposed.so
                 --absent Erf Tanh ReduceMean ReduceMax Exp Transpose Shape Mul
                 --present LayerNormalization Gelu Softmax)
foreach(m conv_bn decomposed)
  add_test(NAME passes/${m}_compiled
           COMMAND ${CMAKE_SOURCE_DIR}/tests/models/run_model_test.sh $<TARGET_FILE:kiln> ${KILN_PYTHON}
                   ${KILN_PASS_MODELS}/${m} --compiled)
endforeach()
set_tests_properties(passes/conv_bn_report passes/decomposed_report passes/conv_bn_compiled
                     passes/decomposed_compiled PROPERTIES FIXTURES_REQUIRED pass_models LABELS passes TIMEOUT 120)
