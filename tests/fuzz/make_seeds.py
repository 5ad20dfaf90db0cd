#!/usr/bin/env python3
"""Fills a libFuzzer seed corpus for fuzz_onnx_import.

Usage: make_seeds.py CORPUS_DIR

Seeds: small models of the ONNX backend node suite (copied from the onnx
package in the venv, never committed) chosen to cover every attribute kind,
subgraphs (If/Loop/Scan), raw and typed initializers, a few of their
test-data tensor files, plus the importer test models of
tests/frontend/gen_models.py.
"""
import glob
import os
import shutil
import subprocess
import sys

import onnx

MAX_SEED_BYTES = 16384
# node tests whose models exercise importer paths worth mutating
PICK = [
    "test_if", "test_if_seq", "test_loop11", "test_loop13_seq", "test_scan9_sum", "test_scan_sum",
    "test_constant", "test_constant_pad", "test_add", "test_add_bcast", "test_conv_with_strides_padding",
    "test_cast_FLOAT_to_FLOAT16", "test_castlike_FLOAT_to_BFLOAT16", "test_gather_0", "test_reshape_reduced_dims",
    "test_resize_downsample_scales_linear", "test_split_variable_parts_1d_opset18", "test_range_float_type_positive_delta_expanded",
    "test_softmax_example_expanded", "test_layer_normalization_2d_axis0_expanded", "test_dequantizelinear",
    "test_batchnorm_epsilon", "test_lstm_defaults", "test_einsum_sum", "test_string_concat", "test_optional_has_element_empty_optional_input",
    "test_sequence_map_add_2_sequences_expanded", "test_constantofshape_float_ones", "test_top_k", "test_nonzero_example",
]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    node_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    n = 0
    for name in PICK:
        src = os.path.join(node_dir, name, "model.onnx")
        if os.path.exists(src) and os.path.getsize(src) <= MAX_SEED_BYTES:
            shutil.copyfile(src, os.path.join(out, name + ".onnx"))
            n += 1
        # the target also reads its input as a TensorProto (test-data files)
        for pb in glob.glob(os.path.join(node_dir, name, "test_data_set_0", "input_*.pb"))[:2]:
            if os.path.getsize(pb) <= MAX_SEED_BYTES:
                shutil.copyfile(pb, os.path.join(out, name + "_" + os.path.basename(pb)))
                n += 1
    here = os.path.dirname(os.path.abspath(__file__))
    gen = os.path.join(here, "..", "frontend", "gen_models.py")
    tmp = os.path.join(out, "..", "fuzz-gen-models")
    subprocess.check_call([sys.executable, gen, tmp])
    for f in glob.glob(os.path.join(tmp, "*.onnx")):
        if os.path.getsize(f) <= MAX_SEED_BYTES:
            shutil.copyfile(f, os.path.join(out, "gen_" + os.path.basename(f)))
            n += 1
    print(f"make_seeds: {n} seeds in {out}")


if __name__ == "__main__":
    main()
