# frontend/onnx/onnx_attr_schema.c is committed (kiln builds without Python);
# this checks it still says what the installed onnx's schemas say.
add_test(NAME frontend/attr_schema
         COMMAND ${KILN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/frontend/gen_attr_schema.py
                 --check ${CMAKE_SOURCE_DIR}/frontend/onnx/onnx_attr_schema.c)
