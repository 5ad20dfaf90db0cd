# The kiln command as a user meets it: help, errors that name the problem.
add_test(NAME cli/errors
         COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/test_cli.sh $<TARGET_FILE:kiln> ${KILN_PYTHON})
set_tests_properties(cli/errors PROPERTIES TIMEOUT 120 LABELS cli)
