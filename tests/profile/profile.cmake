# `kiln profile` end to end: table, JSON, Chrome trace and arena SVG of a
# compiled conv model whose names need escaping.
add_test(NAME profile/cli
         COMMAND ${CMAKE_SOURCE_DIR}/tests/profile/test_profile.sh $<TARGET_FILE:kiln> ${KILN_PYTHON})
set_tests_properties(profile/cli PROPERTIES TIMEOUT 180 LABELS "cli;profile")
