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

# The flags: --help lists every pass, an unknown pass is named, --print-after
# prints the IR after the pass, and --passes replaces the -O pipeline.
add_test(NAME passes/compile_flags
         COMMAND sh -c "set -e
\"$1\" compile --help | grep -q '^  recognize-softmax  *replace Exp'
\"$1\" compile --help | grep -q '^  -O3  normalize-msft,inline-if,recognize-gelu,lower-qdq,fold-constants,'
if \"$1\" compile \"$2\" -o \"$3\" --passes dce,frobnicate 2>\"$3.err\"; then exit 1; fi
grep -q \"unknown pass 'frobnicate'\" \"$3.err\"
\"$1\" compile \"$2\" -o \"$3\" --passes freeze,fold-batchnorm --print-after fold-batchnorm 2>\"$3.err\"
grep -q \"; IR after pass 'fold-batchnorm'\" \"$3.err\"
! grep -q 'BatchNormalization(' \"$3.err\"
\"$1\" compile \"$2\" -o \"$3\" --passes dce --report > \"$3.out\"
grep -q ' BatchNormalization ' \"$3.out\""
                 sh $<TARGET_FILE:kiln> ${KILN_PASS_MODELS}/conv_bn/model.onnx ${KILN_PASS_MODELS}/flags.so)
set_tests_properties(passes/compile_flags PROPERTIES FIXTURES_REQUIRED pass_models LABELS passes TIMEOUT 120)
