# Quantization toolchain script tests (docs/quantization.md). The unit tests
# (tests/quant/test_*.c) register through the glob in tests/CMakeLists.txt.

# calibrate twice, at --threads 1 and 2, from a folder and from a stacked
# .npy: byte-identical tables; compile static-int8 / dynamic-int8 and
# compare with FP32 (cosine > 0.99); the errors compile and compare give.
add_test(NAME quant/calibrate
         COMMAND ${CMAKE_SOURCE_DIR}/tests/quant/test_calibrate.sh $<TARGET_FILE:kiln> ${KILN_PYTHON})
set_tests_properties(quant/calibrate PROPERTIES TIMEOUT 300 LABELS quant)

# Calibration streams: 2000 samples peak at <= 1.1x the RSS of 20 samples.
add_test(NAME quant/calibrate_memory
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/quant/test_calib_memory.py $<TARGET_FILE:kiln>)
set_tests_properties(quant/calibrate_memory PROPERTIES TIMEOUT 300 LABELS quant)

# ResNet-50 (the model tests' fixture): tables byte-identical at --threads 1
# and 2 although the compiled model's results differ in the last bit with
# its intra-op thread count; static-int8 within cosine 0.99 of FP32.
add_test(NAME quant/resnet50
         COMMAND ${CMAKE_SOURCE_DIR}/tests/quant/test_resnet50.sh $<TARGET_FILE:kiln> ${KILN_PYTHON}
                 ${CMAKE_BINARY_DIR}/models/resnet50)
set_tests_properties(quant/resnet50 PROPERTIES FIXTURES_REQUIRED model_resnet50 LABELS "quant;models" TIMEOUT 600)

# kiln export: the QDQ model passes onnx.checker, kiln's evaluator and
# onnxruntime (ORT_DISABLE_ALL) agree on it, and it agrees with kiln's own
# static-int8 artifact (held only on CPUs with VNNI: see the script); the
# errors (missing or foreign table, unwritable output) leave no file.
add_test(NAME quant/export
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/quant/test_export.py $<TARGET_FILE:kiln>)
set_tests_properties(quant/export PROPERTIES TIMEOUT 300 LABELS quant)

# The digits CNN (gen_digits.py: trained in numpy on scikit-learn's bundled
# digits, cached in the build folder until the script changes): static-int8
# with each calibration method at most 0.5 points of held-out accuracy
# below the FP32 artifact; prints the table of docs/quantization.md.
add_test(NAME quant/digits
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/quant/test_digits.py $<TARGET_FILE:kiln>
                 ${CMAKE_BINARY_DIR}/quant/digits)
set_tests_properties(quant/digits PROPERTIES TIMEOUT 300 LABELS quant)

# PyTorch quantization-aware training (gen_torch_models.py under the system
# python3; skipped without python3-torch): the fake-quantized export (Q ->
# Clip -> DQ, Conv -> Div -> Add -> BatchNormalization) and the converted
# int8 model, each with every convolution on an integer kernel and >= 99%
# of the outputs within one step of onnxruntime's and PyTorch's.
foreach(case "qat;4" "qat_int8;5")
  list(GET case 0 model)
  list(GET case 1 n_int)
  add_test(NAME quant/torch_${model}
           COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/quant/check_torch_qat.py $<TARGET_FILE:kiln>
                   ${KILN_SYSTEM_PYTHON} ${model} ${CMAKE_BINARY_DIR}/quant/torch_${model} --integer ${n_int})
  set_tests_properties(quant/torch_${model} PROPERTIES LABELS quant TIMEOUT 300 SKIP_RETURN_CODE ${KILN_SKIP_CODE})
endforeach()
