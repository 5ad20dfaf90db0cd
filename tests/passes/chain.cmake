# A 20k-node elementwise chain (gen_chain.py) compiled at -O0, -O2 and -O3
# and run against onnxruntime: every pass, the planner and codegen must
# handle long graphs (issue 14: CSE used to compare every node with every
# earlier one). No time is asserted; the timeout only stops a hang. The
# 100k-node figure is measured by hand (see the report of issue 14).
# Included from tests/CMakeLists.txt.
set(KILN_CHAIN_DIR ${CMAKE_BINARY_DIR}/pass_models/chain20k)
add_test(NAME passes/chain_generate
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/passes/gen_chain.py ${KILN_CHAIN_DIR} 20000)
set_tests_properties(passes/chain_generate PROPERTIES FIXTURES_SETUP chain20k LABELS passes TIMEOUT 600)
foreach(o 0 2 3)
  add_test(NAME passes/chain20k_O${o}
           COMMAND ${CMAKE_SOURCE_DIR}/tests/passes/run_chain.sh $<TARGET_FILE:kiln> ${KILN_PYTHON}
                   ${KILN_CHAIN_DIR} ${o})
  set_tests_properties(passes/chain20k_O${o} PROPERTIES FIXTURES_REQUIRED chain20k LABELS passes TIMEOUT 600)
endforeach()
