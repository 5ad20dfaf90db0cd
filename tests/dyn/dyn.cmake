# Dynamic dims in compiled artifacts (kiln compile --max NAME=N): models with
# a dynamic batch and a dynamic sequence length made by gen_dyn_models.py (a
# fixture), compiled, run at several sizes against onnxruntime, and the
# refusals asserted by their messages. Included from tests/CMakeLists.txt.
set(KILN_DYN_DIR ${CMAKE_BINARY_DIR}/dyn_models)
add_test(NAME dyn/generate
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/dyn/gen_dyn_models.py ${KILN_DYN_DIR})
set_tests_properties(dyn/generate PROPERTIES FIXTURES_SETUP dyn_models LABELS dyn TIMEOUT 300)
foreach(case convnet encoder refusals header two_dims yolo_head if_fold conv_residual)
  add_test(NAME dyn/${case}
           COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/dyn/run_dyn_test.py $<TARGET_FILE:kiln> ${KILN_DYN_DIR}
                   ${CMAKE_SOURCE_DIR}/runtime/include $<TARGET_FILE:kiln_rt> ${case} ${KILN_SANITIZE})
  set_tests_properties(dyn/${case} PROPERTIES FIXTURES_REQUIRED dyn_models LABELS dyn TIMEOUT 600)
endforeach()
# MobileNetV2 of tests/models with a dynamic batch
add_test(NAME dyn/mobilenetv2
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/dyn/run_dyn_test.py $<TARGET_FILE:kiln> ${KILN_DYN_DIR}
                 ${CMAKE_SOURCE_DIR}/runtime/include $<TARGET_FILE:kiln_rt> mobilenetv2 ${KILN_SANITIZE})
set_tests_properties(dyn/mobilenetv2 PROPERTIES FIXTURES_REQUIRED "dyn_models;model_mobilenetv2" LABELS "dyn;models"
                     TIMEOUT 900)
# The bench models of tests/models/gen_real_models.py in their dynamic form
# (--dynamic), their varying dims bounded: three sizes against onnxruntime,
# the refusals, and convs/poolings over dynamic H/W on oneDNN in --report.
# mobilenetv3 (a dynamic batch, in rows) once gave wrong answers: a conv's
# output layout was decided while a neighbour was being emitted in rows.
foreach(model dbnet crnn yolov8n mobilenetv3 audio_rnn)
  add_test(NAME dyn/real_${model}
           COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/dyn/run_real_dyn.py $<TARGET_FILE:kiln>
                   ${CMAKE_BINARY_DIR}/dyn_real ${model})
  set_tests_properties(dyn/real_${model} PROPERTIES LABELS dyn TIMEOUT 300)
endforeach()
