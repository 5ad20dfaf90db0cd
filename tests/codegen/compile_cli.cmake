# `kiln compile` as a user meets it (codegen/cpu/compile.c): --report names how
# each node was lowered; a model that cannot be compiled exits non-zero with
# the node's name and leaves no file behind. Included from tests/CMakeLists.txt.
set(KILN_NODE_SUITE ${CMAKE_SOURCE_DIR}/.venv/lib/python3.11/site-packages/onnx/backend/test/data/node)
set(KILN_CG_OUT ${CMAKE_BINARY_DIR}/codegen_cli)

add_test(NAME codegen/compile_report
         COMMAND $<TARGET_FILE:kiln> compile ${KILN_NODE_SUITE}/test_gemm_default_matrix_bias/model.onnx
                 -o ${KILN_CG_OUT}/gemm.so --emit-header ${KILN_CG_OUT}/gemm.h --report)
set_tests_properties(codegen/compile_report PROPERTIES TIMEOUT 120 LABELS codegen
  PASS_REGULAR_EXPRESSION "Gemm +(generated|oneDNN|runtime kernel)\n1 nodes: [0-9]+ generated \\([0-9]+ parallel\\), [0-9]+ oneDNN, [0-9]+ runtime kernel, 0 alias, 0 folded; arena 0 bytes")

# Control flow runs through the op's runtime kernel, and the report says so.
add_test(NAME codegen/compile_report_control_flow
         COMMAND $<TARGET_FILE:kiln> compile ${KILN_NODE_SUITE}/test_loop11/model.onnx
                 -o ${KILN_CG_OUT}/loop.so --report)
set_tests_properties(codegen/compile_report_control_flow PROPERTIES TIMEOUT 120 LABELS codegen
  PASS_REGULAR_EXPRESSION "Loop +runtime kernel\n")

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
