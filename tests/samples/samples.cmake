# The embedding sample, built from an installed kiln with find_package and
# with pkg-config, then run on the bundled digits data.
add_test(NAME samples/embed
         COMMAND ${CMAKE_SOURCE_DIR}/tests/samples/test_embed.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR} ${KILN_SANITIZE})
set_tests_properties(samples/embed PROPERTIES TIMEOUT 600 LABELS samples)
