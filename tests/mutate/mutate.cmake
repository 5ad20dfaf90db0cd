# The planted-bug list (tests/mutate/mutations.txt) must apply to the code as
# it is: every file there, every text to replace there exactly once. `make
# mutate` itself (a rebuild and test run per mutation) is not part of make test.
add_test(NAME mutate/list COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/mutate --check)
set_tests_properties(mutate/list PROPERTIES LABELS mutate)
