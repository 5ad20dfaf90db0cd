# Quantized-op and quantized-model tests (label `quant`). Included from
# tests/CMakeLists.txt with the other tests/*/*.cmake.
#
# quant/<case>            one quantized op (gen_qop_cases.py: QuantizeLinear,
#                         QLinearConv, MatMulInteger, com.microsoft QLinear*, ...)
#                         compiled by kiln and run through libkiln_rt
# quant/<case>_reference  the same through kiln's reference evaluator
# models/<model>          onnxruntime's INT8 models (gen_quant_models.py), reference
# models/<model>_compiled the same compiled
# Each is compared with onnxruntime's output by compare.py, as judged by the
# case's tolerance.json (one quantization step for 8-bit outputs, exact for
# integer outputs of exact ops, a cosine for whole networks).
#
# Tests named in tests/models/QUANT_PENDING.txt (ops and models kiln does not
# run yet) also get the label `quant-pending`, which `make test` excludes;
# `make test-quant` runs them all. Remove a line there when its op lands.
set(KILN_QUANT_CASES_DIR ${CMAKE_BINARY_DIR}/quant-cases)
execute_process(COMMAND ${KILN_PYTHON} ${KILN_MODELS_SRC}/gen_qop_cases.py --list
                OUTPUT_VARIABLE kiln_qop_cases RESULT_VARIABLE kiln_qop_rc
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT kiln_qop_rc EQUAL 0)
  message(WARNING "gen_qop_cases.py --list failed (${kiln_qop_rc}); no quantized-op tests registered")
  set(kiln_qop_cases "")
endif()
string(REPLACE "\n" ";" kiln_qop_cases "${kiln_qop_cases}")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${KILN_MODELS_SRC}/gen_qop_cases.py ${KILN_MODELS_SRC}/QUANT_PENDING.txt)

# QUANT_PENDING.txt: one test a line, `CASE` (both variants), `CASE:compiled`
# or `CASE:reference`; `#` starts a comment.
file(STRINGS ${KILN_MODELS_SRC}/QUANT_PENDING.txt kiln_pending_lines)
set(kiln_quant_pending "")
foreach(line ${kiln_pending_lines})
  string(REGEX REPLACE "#.*$" "" line "${line}")
  string(STRIP "${line}" line)
  if(line STREQUAL "")
    continue()
  endif()
  if(line MATCHES ":")
    list(APPEND kiln_quant_pending "${line}")
  else()
    list(APPEND kiln_quant_pending "${line}:compiled" "${line}:reference")
  endif()
endforeach()

function(kiln_quant_labels out name variant)
  if("${name}:${variant}" IN_LIST kiln_quant_pending)
    set(${out} "quant;quant-pending" PARENT_SCOPE)
  else()
    set(${out} "quant" PARENT_SCOPE)
  endif()
endfunction()

add_test(NAME quant/generate_cases
         COMMAND ${KILN_PYTHON} ${KILN_MODELS_SRC}/gen_qop_cases.py ${KILN_QUANT_CASES_DIR})
set_tests_properties(quant/generate_cases PROPERTIES FIXTURES_SETUP quant_cases LABELS quant TIMEOUT 300)
foreach(case ${kiln_qop_cases})
  set(dir ${KILN_QUANT_CASES_DIR}/${case})
  add_test(NAME quant/${case}
           COMMAND ${KILN_MODELS_SRC}/run_model_test.sh $<TARGET_FILE:kiln> ${KILN_PYTHON} ${dir} --compiled)
  kiln_quant_labels(labels ${case} compiled)
  set_tests_properties(quant/${case} PROPERTIES FIXTURES_REQUIRED quant_cases LABELS "${labels}" TIMEOUT 120)
  add_test(NAME quant/${case}_reference
           COMMAND ${KILN_MODELS_SRC}/run_model_test.sh $<TARGET_FILE:kiln> ${KILN_PYTHON} ${dir} --reference)
  kiln_quant_labels(labels ${case} reference)
  set_tests_properties(quant/${case}_reference PROPERTIES FIXTURES_REQUIRED quant_cases LABELS "${labels}" TIMEOUT 120)
endforeach()

# onnxruntime's INT8 versions of the model tests' networks; each needs its
# FP32 model's generate fixture (models.cmake) so that the two never write
# the same folder at once.
foreach(model resnet50-qdq mobilenetv2-qdq resnet50-qop mobilenetv2-qop bert-dyn)
  string(REGEX REPLACE "-.*$" "" base ${model})
  set(dir ${CMAKE_BINARY_DIR}/models/${model})
  add_test(NAME models/${model}_generate
           COMMAND ${KILN_PYTHON} ${KILN_MODELS_SRC}/gen_quant_models.py --model ${model}
                   --fp32-dir ${CMAKE_BINARY_DIR}/models/${base} ${dir})
  set_tests_properties(models/${model}_generate PROPERTIES
    FIXTURES_REQUIRED model_${base} FIXTURES_SETUP model_${model} LABELS "models;quant" TIMEOUT 900)
  add_test(NAME models/${model}
           COMMAND ${KILN_MODELS_SRC}/run_model_test.sh $<TARGET_FILE:kiln> ${KILN_PYTHON} ${dir})
  kiln_quant_labels(labels ${model} reference)
  set_tests_properties(models/${model} PROPERTIES
    FIXTURES_REQUIRED model_${model} LABELS "models;${labels}" TIMEOUT 900)
  add_test(NAME models/${model}_compiled
           COMMAND ${KILN_MODELS_SRC}/run_model_test.sh $<TARGET_FILE:kiln> ${KILN_PYTHON} ${dir} --compiled)
  kiln_quant_labels(labels ${model} compiled)
  set_tests_properties(models/${model}_compiled PROPERTIES
    FIXTURES_REQUIRED model_${model} LABELS "models;${labels}" TIMEOUT 900)
endforeach()
