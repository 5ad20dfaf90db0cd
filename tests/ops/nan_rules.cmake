# MaxPool, GlobalMaxPool, ReduceMax, ArgMax/ArgMin and Max with NaN in every window
# position: the reference evaluator and the generated code follow numpy's
# rule (issue 14); see check_nan_rules.py.
add_test(NAME ops/nan_rules
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/ops/check_nan_rules.py
                 $<TARGET_FILE:kiln> ${CMAKE_BINARY_DIR}/test_models/nan_rules)
