# `kiln compile` as a user meets it (codegen/cpu/compile.c): --report names how
# each node was lowered; a model that cannot be compiled exits non-zero with
# the node's name and leaves no file behind. Included from tests/CMakeLists.txt.
set(KILN_CG_OUT ${CMAKE_BINARY_DIR}/codegen_cli)

# expect_output.sh: the output must match AND the exit status must be 0
# (ctest's PASS_REGULAR_EXPRESSION alone ignores the status).
add_test(NAME codegen/compile_report
         COMMAND ${KILN_EXPECT} "Gemm +(generated|oneDNN|runtime kernel)\n1 nodes: [0-9]+ generated \\([0-9]+ parallel\\), [0-9]+ oneDNN, [0-9]+ runtime kernel, 0 alias, 0 folded; arena 0 bytes"
                 $<TARGET_FILE:kiln> compile ${KILN_NODE_SUITE}/test_gemm_default_matrix_bias/model.onnx
                 -o ${KILN_CG_OUT}/gemm.so --emit-header ${KILN_CG_OUT}/gemm.h --report)
set_tests_properties(codegen/compile_report PROPERTIES TIMEOUT 120 LABELS codegen)

# Control flow runs through the op's runtime kernel, and the report says so.
add_test(NAME codegen/compile_report_control_flow
         COMMAND ${KILN_EXPECT} "Loop +runtime kernel\n" $<TARGET_FILE:kiln> compile ${KILN_NODE_SUITE}/test_loop11/model.onnx
                 -o ${KILN_CG_OUT}/loop.so --report)
set_tests_properties(codegen/compile_report_control_flow PROPERTIES TIMEOUT 120 LABELS codegen)

# An op that has a lowering but runs its runtime kernel gets a remark with the
# reason (here its scales are a graph input, so its output size depends on data).
add_test(NAME codegen/compile_report_fallback_remark
         COMMAND ${KILN_EXPECT} "Resize +runtime kernel\n  remark: node 'Resize_0' \\(Resize\\) has a lowering but runs its runtime kernel: it reads or writes a value whose size depends on data\n"
                 $<TARGET_FILE:kiln> compile ${KILN_NODE_SUITE}/test_resize_upsample_scales_linear/model.onnx
                 -o ${KILN_CG_OUT}/resize.so --report)
set_tests_properties(codegen/compile_report_fallback_remark PROPERTIES TIMEOUT 120 LABELS codegen)

# The compile fails part-way (an unknown target, after the checks and the plan).
# Its own folder: other tests compile into KILN_CG_OUT at the same time, and
# their temporary files would look like leftovers.
add_test(NAME codegen/compile_failure_leaves_nothing
         COMMAND sh -c "rm -f \"$2\" \"$3\"; \"$1\" compile \"$4\" -o \"$2\" --emit-header \"$3\" --target x86-64-v9 && exit 1; \
test ! -e \"$2\" && test ! -e \"$3\" && ! ls \"$5\" | grep -q tmp-kiln"
                 sh $<TARGET_FILE:kiln> ${KILN_CG_OUT}/failure/if.so ${KILN_CG_OUT}/failure/if.h
                 ${KILN_NODE_SUITE}/test_if/model.onnx ${KILN_CG_OUT}/failure)
set_tests_properties(codegen/compile_failure_leaves_nothing PROPERTIES TIMEOUT 120 LABELS codegen)
file(MAKE_DIRECTORY ${KILN_CG_OUT} ${KILN_CG_OUT}/failure)

# Every op with a lowering compiled at a size above the parallel threshold:
# the report must show it generated / oneDNN (views: aliased), never its
# runtime kernel, and the artifact must match the reference evaluator
# (check_paths.py). paths_coverage fails when a lowering has no case.
add_test(NAME codegen/paths_coverage
         COMMAND ${KILN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/codegen/check_paths.py --coverage ${CMAKE_SOURCE_DIR})
set_tests_properties(codegen/paths_coverage PROPERTIES TIMEOUT 60 LABELS codegen)
foreach(group elementwise reduce movement dnnl)
  add_test(NAME codegen/paths_${group}
           COMMAND ${KILN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/codegen/check_paths.py
                   $<TARGET_FILE:kiln> ${KILN_CG_OUT}/paths ${group})
  set_tests_properties(codegen/paths_${group} PROPERTIES TIMEOUT 900 LABELS codegen)
endforeach()

# ConvTranspose through oneDNN's deconvolution (strides, pads,
# output_padding, output_shape, auto_pad, groups, dilations, fused bias,
# activations, residual, BatchNorm; between convolutions) and thin k x 1 /
# 1 x k convolutions under every KILN_CONV_ALGO row, against onnxruntime
# within 1e-4, each asserting the oneDNN path in the report and a
# non-reference kernel in `kiln profile` (deconv_thin_cases.py).
foreach(group deconv thin)
  add_test(NAME codegen/${group}_cases
           COMMAND ${KILN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/codegen/deconv_thin_cases.py
                   $<TARGET_FILE:kiln> ${KILN_CG_OUT}/${group}_cases ${group})
  set_tests_properties(codegen/${group}_cases PROPERTIES TIMEOUT 600 LABELS codegen)
endforeach()

# The integer lowering end to end (passes/lower_qdq.c, oneDNN int8): a small
# CNN quantized by onnxruntime (static QDQ) compiles with every Conv/Gemm as
# an int8 primitive and agrees with onnxruntime within one output step.
add_test(NAME codegen/qdq_cnn
         COMMAND ${KILN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/codegen/qdq_cnn.py $<TARGET_FILE:kiln> ${KILN_CG_OUT}/qdq_cnn)
set_tests_properties(codegen/qdq_cnn PROPERTIES TIMEOUT 300 LABELS codegen)

# One encoder layer over a dynamic sequence: with the attention fused the
# arena grows linearly (seq 4096 <= 2.2x seq 2048; unfused about 4x), and
# seq 3000 with padding matches onnxruntime.
add_test(NAME codegen/attention_long
         COMMAND ${KILN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/codegen/attention_long.py $<TARGET_FILE:kiln>)
set_tests_properties(codegen/attention_long PROPERTIES TIMEOUT 300 LABELS codegen)

# A QDQ residual group (conv, its own Q -> DQ, the Add, the output Q) as one
# QConv rounds where the graph does: equal to onnxruntime's graph as written.
add_test(NAME codegen/qdq_residual
         COMMAND ${KILN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/codegen/qdq_residual.py $<TARGET_FILE:kiln> ${KILN_CG_OUT}/qdq_residual)
set_tests_properties(codegen/qdq_residual PROPERTIES TIMEOUT 300 LABELS "codegen;quant")

# Nodes that compile to the same code share one function (codegen/cpu/share.c):
# ten repeated blocks, two of them with another LeakyRelu alpha, reuse code
# at -O3 and -O0 and still agree with onnxruntime.
add_test(NAME codegen/shared_bodies
         COMMAND ${KILN_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/codegen/shared_bodies.py $<TARGET_FILE:kiln> ${KILN_CG_OUT}/shared_bodies)
set_tests_properties(codegen/shared_bodies PROPERTIES TIMEOUT 300 LABELS codegen)
