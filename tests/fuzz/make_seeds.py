#!/usr/bin/env python3
"""Fills a libFuzzer seed corpus for fuzz_onnx or fuzz_npy.

Usage: make_seeds.py onnx|npy CORPUS_DIR

onnx seeds: small models of the ONNX backend node suite (copied from the onnx
package in the venv, never committed) chosen to cover every attribute kind,
subgraphs (If/Loop/Scan), raw and typed initializers, a few of their
test-data tensor files, plus the importer test models of
tests/frontend/gen_models.py.

npy seeds: numpy's own writer (np.save) for every dtype kiln reads, both
byte orders, Fortran order, 0-d, empty and 5-d arrays, and format versions
2.0 and 3.0 (np.lib.format.write_array with version=...), so that the
fuzzer mutates real headers rather than guessing the magic and the dict.
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


def npy_seeds(out):
    import numpy as np
    from numpy.lib import format as npf

    n = 0

    def save(name, arr, version=None):
        nonlocal n
        with open(os.path.join(out, name + ".npy"), "wb") as f:
            npf.write_array(f, arr, version=version, allow_pickle=False)
        n += 1

    rng = np.random.default_rng(0)
    for dt in ["f4", "f8", "f2", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1", "c8"]:
        a = (rng.standard_normal((2, 3)) * 10).astype(dt)
        save("le_" + dt, a.astype("<" + dt) if dt not in ("i1", "u1", "b1") else a)
        if dt not in ("i1", "u1", "b1"):
            save("be_" + dt, a.astype(">" + dt))
    save("scalar", np.array(3.5, dtype=np.float32))
    save("empty", np.zeros((0, 4), dtype=np.float32))
    save("rank5", np.arange(32, dtype=np.int32).reshape(2, 2, 2, 2, 2))
    save("fortran", np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    save("v2", np.arange(4, dtype=np.float32), version=(2, 0))
    save("v3", np.arange(4, dtype=np.int64), version=(3, 0))
    save("unicode", np.array(["ab", "c"]))
    return n


def onnx_seeds(out):
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
    return n


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("onnx", "npy"):
        sys.exit("usage: make_seeds.py onnx|npy CORPUS_DIR")
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    n = onnx_seeds(out) if kind == "onnx" else npy_seeds(out)
    print(f"make_seeds: {n} {kind} seeds in {out}")


if __name__ == "__main__":
    main()
