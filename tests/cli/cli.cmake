# The kiln command as a user meets it: help, errors that name the problem.
add_test(NAME cli/errors
         COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/test_cli.sh $<TARGET_FILE:kiln> ${KILN_PYTHON})
set_tests_properties(cli/errors PROPERTIES TIMEOUT 120 LABELS cli)

# What hostile or careless input found (issue 14): outputs over inputs,
# planted symlinks, colliding output names, FIFOs, a strict .npy header,
# numeric flags.
add_test(NAME cli/hostile_input
         COMMAND ${CMAKE_SOURCE_DIR}/tests/cli/test_hostile_input.sh $<TARGET_FILE:kiln> ${KILN_PYTHON})
set_tests_properties(cli/hostile_input PROPERTIES TIMEOUT 300 LABELS cli)
