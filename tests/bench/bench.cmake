# The benchmark suite's plumbing (bench/run_bench.py, `make bench`) on the
# smallest case: one model, batch 1, one thread, two runs. It checks that
# every row and figure is there and well formed, never how fast anything is.
add_test(NAME bench/smoke
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/bench/check_bench.py
                 ${CMAKE_SOURCE_DIR}/bench/run_bench.py $<TARGET_FILE:kiln> ${CMAKE_BINARY_DIR}/bench-smoke)
set_tests_properties(bench/smoke PROPERTIES TIMEOUT 300 LABELS bench)
# scripts/ort_bench.py on its own: the one-shot JSON and the --serve protocol
# that `kiln bench --vs-ort` drives (tests/cli covers kiln's side of it).
add_test(NAME bench/ort_bench
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/bench/check_ort_bench.py
                 ${CMAKE_SOURCE_DIR}/scripts/ort_bench.py ${CMAKE_SOURCE_DIR}/samples/digits/digits.onnx
                 ${CMAKE_BINARY_DIR}/ort-bench-check)
set_tests_properties(bench/ort_bench PROPERTIES TIMEOUT 120 LABELS bench)
# bench/qaccuracy.py, the INT8 rows' accuracy figures (share within one
# quantization step, cosine), on synthetic arrays with known answers.
add_test(NAME bench/qaccuracy
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/bench/test_qaccuracy.py ${CMAKE_SOURCE_DIR}/bench)
set_tests_properties(bench/qaccuracy PROPERTIES TIMEOUT 60 LABELS bench)
