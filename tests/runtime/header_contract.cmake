# An app built against one model's generated header refuses another
# model's artifact (shared and static): see test_header_contract.py.
add_test(NAME runtime/header_contract
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/runtime/test_header_contract.py $<TARGET_FILE:kiln>
                 ${CMAKE_SOURCE_DIR}/runtime/include $<TARGET_FILE:kiln_rt> ${KILN_SANITIZE})
set_tests_properties(runtime/header_contract PROPERTIES TIMEOUT 300 LABELS "runtime")
