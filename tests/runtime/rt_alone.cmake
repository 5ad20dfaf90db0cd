# libkiln_rt alone: a program that links kiln_rt and nothing else of kiln
# loads and runs an artifact that the kiln binary compiles at test time.
add_executable(runtime_rt_alone ${CMAKE_CURRENT_SOURCE_DIR}/runtime/rt_alone.c)
target_link_libraries(runtime_rt_alone PRIVATE kiln_rt)
add_test(NAME runtime/rt_alone
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/runtime/rt_alone.sh $<TARGET_FILE:kiln> $<TARGET_FILE:runtime_rt_alone>
                 ${CMAKE_SOURCE_DIR}/samples/digits ${CMAKE_CURRENT_BINARY_DIR}/rt_alone)
set_tests_properties(runtime/rt_alone PROPERTIES TIMEOUT 300 LABELS "runtime")
