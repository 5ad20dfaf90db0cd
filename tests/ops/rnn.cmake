# LSTM, GRU and RNN compiled (kiln's packed kernel, runtime/src/rnn.c) against
# onnxruntime through kiln difftest: kinds x directions x layouts x
# sequence_lens x initial states x clip x linear_before_reset, and that the
# kernel (or, with KILN_RNN=ref, the reference kernel) actually ran; see
# check_rnn.py. The kernels themselves: tests/runtime/test_rnn.c.
add_test(NAME ops/rnn_compiled
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/ops/check_rnn.py
                 $<TARGET_FILE:kiln> ${CMAKE_BINARY_DIR}/test_models/rnn)
set_tests_properties(ops/rnn_compiled PROPERTIES TIMEOUT 900 LABELS "ops")
