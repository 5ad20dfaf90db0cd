# `kiln difftest`, the runner of the differential tester: four hand-made
# cases (right, wrong expectation, exact, unsupported) and its error paths.
# Included from tests/CMakeLists.txt.
add_test(NAME difftest/runner
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/difftest/test_runner.py
                 $<TARGET_FILE:kiln> ${CMAKE_BINARY_DIR}/difftest/runner)
set_tests_properties(difftest/runner PROPERTIES TIMEOUT 600 LABELS difftest)
