# The 1x1 expansion + depthwise pair as sessions form it from compiled
# models: outputs against onnxruntime's, and when it must (not) form.
add_test(NAME runtime/xdw_session
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/runtime/test_xdw_session.py $<TARGET_FILE:kiln>)
set_tests_properties(runtime/xdw_session PROPERTIES TIMEOUT 300 LABELS "runtime")
