# Model tests: real architectures with random weights, generated into the build
# folder by gen_models.py (a fixture), run by kiln and compared with
# onnxruntime's outputs. Included from tests/CMakeLists.txt.
set(KILN_MODELS_SRC ${CMAKE_SOURCE_DIR}/tests/models)
foreach(model resnet50 mobilenetv2 bert vit)
  set(dir ${CMAKE_BINARY_DIR}/models/${model})
  add_test(NAME models/${model}_generate
           COMMAND ${KILN_PYTHON} ${KILN_MODELS_SRC}/gen_models.py --model ${model} ${dir})
  set_tests_properties(models/${model}_generate PROPERTIES
    FIXTURES_SETUP model_${model} LABELS models TIMEOUT 900)
  add_test(NAME models/${model}
           COMMAND ${KILN_MODELS_SRC}/run_model_test.sh $<TARGET_FILE:kiln> ${KILN_PYTHON} ${dir})
  set_tests_properties(models/${model} PROPERTIES
    FIXTURES_REQUIRED model_${model} LABELS models TIMEOUT 900)
  # the same model compiled ahead of time and run through libkiln_rt
  add_test(NAME models/${model}_compiled
           COMMAND ${KILN_MODELS_SRC}/run_model_test.sh $<TARGET_FILE:kiln> ${KILN_PYTHON} ${dir} --compiled)
  set_tests_properties(models/${model}_compiled PROPERTIES
    FIXTURES_REQUIRED model_${model} LABELS models TIMEOUT 900)
endforeach()

# kiln compile --precision (passes/autocast.c): which products and
# Attention nodes the report marks bf16 (mixed leaves the last product f32),
# the warning and the refusal on CPUs without AVX512-BF16, and on CPUs with
# it the outputs against onnxruntime's FP32 ones (cosine >= 0.999) and the
# bf16 attention kernel in kiln profile (skipped elsewhere).
foreach(case "bert;mixed;47;1;12" "vit;mixed;49;1;12" "resnet50;bf16;54;0;0" "mobilenetv2;bf16;53;0;0")
  list(GET case 0 model)
  list(GET case 1 precision)
  list(GET case 2 n_bf16)
  list(GET case 3 n_f32)
  list(GET case 4 n_attn)
  add_test(NAME models/${model}_${precision}
           COMMAND ${KILN_PYTHON} ${KILN_MODELS_SRC}/check_precision.py $<TARGET_FILE:kiln>
                   ${CMAKE_BINARY_DIR}/models/${model} --precision ${precision} --bf16 ${n_bf16} --f32 ${n_f32}
                   --attn ${n_attn})
  set_tests_properties(models/${model}_${precision} PROPERTIES
    FIXTURES_REQUIRED model_${model} LABELS models TIMEOUT 900 SKIP_RETURN_CODE ${KILN_SKIP_CODE})
endforeach()

# Architectures of real users' models (gen_real_models.py, also in make
# bench): the evaluator and the compiled artifact against onnxruntime.
foreach(model dbnet crnn yolov8n mobilenetv3 audio_rnn)
  set(dir ${CMAKE_BINARY_DIR}/models/${model})
  add_test(NAME models/${model}_generate
           COMMAND ${KILN_PYTHON} ${KILN_MODELS_SRC}/gen_real_models.py --model ${model} ${dir})
  set_tests_properties(models/${model}_generate PROPERTIES
    FIXTURES_SETUP model_${model} LABELS models TIMEOUT 900)
  add_test(NAME models/${model}_compiled
           COMMAND ${KILN_MODELS_SRC}/run_model_test.sh $<TARGET_FILE:kiln> ${KILN_PYTHON} ${dir} --compiled)
  set_tests_properties(models/${model}_compiled PROPERTIES
    FIXTURES_REQUIRED model_${model} LABELS models TIMEOUT 900)
endforeach()

# The demo: the bundled digits model must reach its known accuracy (>= 290/300)
# through the evaluator, the compiled artifact and the embedding application,
# and the script must exit 0 (expect_output.sh checks both).
add_test(NAME models/demo
         COMMAND ${KILN_EXPECT}
                 "(?s)digits: (29[0-9]|300)/300 correct.*\ncompiled: (29[0-9]|300)/300 correct.*\nembed: (29[0-9]|300)/300 correct"
                 ${CMAKE_SOURCE_DIR}/scripts/demo ${CMAKE_BINARY_DIR})
set_tests_properties(models/demo PROPERTIES
  LABELS models TIMEOUT 300
  ENVIRONMENT "KILN_PYTHON=${KILN_PYTHON}")

# PyTorch exports (gen_torch_models.py, under the system python3 with
# Debian's python3-torch; skipped without it): nn.TransformerEncoder with a
# key padding mask and nn.MultiheadAttention with a causal mask, every
# attention block fused (one Attention node each), outputs within 1e-4 of
# onnxruntime's and PyTorch's.
foreach(case "encoder;4" "causal;1")
  list(GET case 0 model)
  list(GET case 1 n_attn)
  add_test(NAME models/torch_${model}
           COMMAND ${KILN_PYTHON} ${KILN_MODELS_SRC}/check_torch_model.py $<TARGET_FILE:kiln> ${KILN_SYSTEM_PYTHON}
                   ${model} ${CMAKE_BINARY_DIR}/models/torch_${model} --attention ${n_attn})
  set_tests_properties(models/torch_${model} PROPERTIES
    LABELS models TIMEOUT 600 SKIP_RETURN_CODE ${KILN_SKIP_CODE})
endforeach()

# kiln compile --pack-tokens (passes/pack_tokens.c) on bert-tiny at batch 4:
# both attention blocks packed, outputs within 1e-4 of onnxruntime's at the
# real tokens and 0 at padding for right padding, holes, no padding and all
# padding; an app built against its header runs it; bf16 and a dynamic
# sequence; a padding mask too weak to remove the keys exactly is refused.
add_test(NAME models/pack_tokens
         COMMAND ${KILN_PYTHON} ${KILN_MODELS_SRC}/check_pack_tokens.py $<TARGET_FILE:kiln>
                 ${CMAKE_BINARY_DIR}/models/pack_tokens --rt-include ${CMAKE_SOURCE_DIR}/runtime/include
                 --rt-lib $<TARGET_FILE:kiln_rt> --sanitize "${KILN_SANITIZE}")
set_tests_properties(models/pack_tokens PROPERTIES LABELS models TIMEOUT 300)
