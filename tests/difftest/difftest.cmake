# The differential tester (docs/testing.md): a fixed-seed batch of random
# graphs through onnxruntime, the reference evaluator and the compiled path
# (-O0/-O3, 1/2/4 threads), which must also reach every op with a lowering
# and every lowering path; and the minimized cases of every bug it found.
# Included from tests/CMakeLists.txt.
set(KILN_DIFFTEST_SRC ${CMAKE_SOURCE_DIR}/tests/difftest)
add_test(NAME difftest/batch
         COMMAND ${KILN_PYTHON} ${KILN_DIFFTEST_SRC}/difftest.py --kiln $<TARGET_FILE:kiln>
                 --seed 1000 --count 500 --require-coverage --no-minimize)
set_tests_properties(difftest/batch PROPERTIES LABELS difftest TIMEOUT 1200)
add_test(NAME difftest/regress
         COMMAND ${KILN_PYTHON} ${KILN_DIFFTEST_SRC}/difftest.py --kiln $<TARGET_FILE:kiln>
                 --regress ${KILN_DIFFTEST_SRC}/regress)
set_tests_properties(difftest/regress PROPERTIES LABELS difftest TIMEOUT 600)
