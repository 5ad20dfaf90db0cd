#!/usr/bin/env python3
"""Every op with a lowering, compiled at size and checked for its path.

For each case of GROUP: writes a one-op ONNX model whose output is above the
parallel threshold (KN_PAR_MIN_WORK, 32768 elements, codegen/cpu/par.h) and
random inputs, runs `kiln compile --report`, and asserts from the report that
the op's node was generated, ran by oneDNN, or (for views) aliased: never
"runtime kernel" (the op's runtime kernel is the reference evaluator's own C
code, so a lowering that silently declines would otherwise still pass every
numeric check). Then runs the artifact and the reference evaluator on the
same inputs and compares: exactly where the op is exact (rounding, selection,
data movement, integers, bools), else element by element
|a - b| <= atol + rtol * |b|.

Why a script test and not the lowerings' unit tests: those call a lowering
through a JIT harness and cannot notice when `kiln compile` stops using it.

Usage: check_paths.py KILN OUT_DIR GROUP [--case NAME]...
       check_paths.py --coverage SRC_DIR
GROUP: elementwise, reduce, movement, dnnl, or all. Exit 1 on any failure.
--coverage reads the four lowering tables in SRC_DIR/codegen/cpu/lower_*.c
and fails if an op there has no case here (a new lowering needs one).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(1919)
ROWS, COLS = 64, 1024  # 65536 elements: twice the parallel threshold
SHAPE = [ROWS, COLS]
IMG = [2, 32, 32, 32]  # N, C, H, W: 65536 elements

# report labels that mean "not the runtime kernel" (codegen/cpu/compile.c)
COMPILED = {"generated", "generated, parallel", "generated, in rows", "oneDNN", "oneDNN, in rows"}
VIEW_OPS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"}

NP_OF = {TensorProto.FLOAT: np.float32, TensorProto.INT32: np.int32, TensorProto.INT64: np.int64,
         TensorProto.BOOL: np.bool_, TensorProto.UINT32: np.uint32, TensorProto.FLOAT16: np.float16}


class Case:
    def __init__(self, name, group, op, inputs, attrs=None, consts=None, opset=17, exact=False, tol=None,
                 n_out=1, domain_op=None, nodes=None, out_types=None):
        self.name, self.group, self.op = name, group, op
        self.inputs = inputs            # [(name, np.ndarray)] runtime inputs
        self.attrs = attrs or {}
        self.consts = consts or []      # [(name, np.ndarray)] initializers, in the op's input order after inputs
        self.opset, self.exact, self.n_out = opset, exact, n_out
        self.tol = tol or (1e-5, 1e-5)  # (atol, rtol)
        self.report_op = domain_op or op  # op_type the report shows (a fused op for chains)
        self.nodes = nodes                # explicit node list (chains), else one node of `op`
        self.out_types = out_types


def f32(shape=SHAPE, lo=-3.0, hi=3.0):
    return RNG.uniform(lo, hi, size=shape).astype(np.float32)


def ints(shape=SHAPE, lo=-100, hi=100, dt=np.int32):
    return RNG.integers(lo, hi, size=shape).astype(dt)


def u8(shape=SHAPE):
    return RNG.integers(0, 256, size=shape).astype(np.uint8)


def i8(shape):
    """7-bit weights: CPUs without VNNI multiply u8 x s8 in pairs summed in
    saturating 16-bit lanes (oneDNN's and onnxruntime's kernels alike), which
    |w| <= 63 keeps exact (2 * 255 * 63 < 32768); docs/quantization.md."""
    return RNG.integers(-63, 64, size=shape).astype(np.int8)


def bools(shape=SHAPE):
    return RNG.integers(0, 2, size=shape).astype(np.bool_)


def cases():
    c = []
    E, R, M, D = "elementwise", "reduce", "movement", "dnnl"
    # ---- elementwise: binary, variadic, unary
    for op in ["Add", "Sub", "Mul"]:
        c.append(Case(op, E, op, [("a", f32()), ("b", f32([COLS]))]))
    c.append(Case("Div", E, "Div", [("a", f32()), ("b", f32(lo=0.5, hi=3))]))
    c.append(Case("Pow", E, "Pow", [("a", f32(lo=0.1, hi=3)), ("b", f32(lo=-2, hi=2))], tol=(1e-5, 1e-4)))
    c.append(Case("Mod", E, "Mod", [("a", ints()), ("b", ints(lo=1, hi=17))], exact=True))
    c.append(Case("Mod_fmod", E, "Mod", [("a", f32(lo=-50, hi=50)), ("b", f32(lo=1, hi=7))], attrs={"fmod": 1},
                  exact=True))
    c.append(Case("BitShift", E, "BitShift", [("a", ints(lo=0, hi=1 << 20, dt=np.uint32)),
                                              ("b", ints(lo=0, hi=12, dt=np.uint32))],
                  attrs={"direction": "LEFT"}, exact=True))
    for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]:
        c.append(Case(op, E, op, [("a", ints(lo=-1000, hi=1000)), ("b", ints(lo=-1000, hi=1000))], opset=18,
                      exact=True))
    for op in ["And", "Or", "Xor"]:
        c.append(Case(op, E, op, [("a", bools()), ("b", bools())], exact=True))
    for op in ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"]:
        a = np.round(f32(lo=-3, hi=3))  # integral values so that Equal sees ties
        b = np.round(f32(lo=-3, hi=3))
        c.append(Case(op, E, op, [("a", a), ("b", b)], exact=True))
    c.append(Case("PRelu", E, "PRelu", [("x", f32()), ("slope", f32([COLS], lo=0, hi=0.5))]))
    for op in ["Sum", "Mean", "Max", "Min"]:
        c.append(Case(op, E, op, [("a", f32()), ("b", f32()), ("c", f32([COLS]))], exact=op in ("Max", "Min")))
    unary = {
        "Abs": (-3, 3), "Neg": (-3, 3), "Sign": (-3, 3), "Ceil": (-3, 3), "Floor": (-3, 3), "Sqrt": (0, 9),
        "Reciprocal": (0.5, 3), "Exp": (-10, 10), "Log": (0.01, 100), "Sin": (-6, 6), "Cos": (-6, 6),
        "Tan": (-1.5, 1.5), "Asin": (-1, 1), "Acos": (-1, 1), "Atan": (-5, 5), "Sinh": (-5, 5), "Cosh": (-5, 5),
        "Asinh": (-5, 5), "Acosh": (1, 9), "Atanh": (-0.99, 0.99), "Erf": (-3, 3), "Relu": (-3, 3),
        "LeakyRelu": (-3, 3), "Sigmoid": (-20, 20), "HardSigmoid": (-5, 5), "HardSwish": (-5, 5),
        "Tanh": (-5, 5), "Softplus": (-20, 20), "Softsign": (-5, 5), "Elu": (-4, 4), "Selu": (-4, 4),
        "Celu": (-4, 4), "Mish": (-8, 8), "ThresholdedRelu": (-3, 3), "Shrink": (-3, 3),
    }
    exact_unary = {"Abs", "Neg", "Sign", "Ceil", "Floor", "Relu", "ThresholdedRelu"}
    for op, (lo, hi) in unary.items():
        c.append(Case(op, E, op, [("x", f32(lo=lo, hi=hi))], exact=op in exact_unary, tol=(1e-5, 1e-4),
                      opset=18 if op == "Mish" else 17))  # Mish is ONNX's from opset 18
    # Round: halves (ties to even) among the values
    c.append(Case("Round", E, "Round", [("x", (RNG.integers(-40, 40, size=SHAPE) / 4).astype(np.float32))],
                  exact=True))
    c.append(Case("Gelu", E, "Gelu", [("x", f32(lo=-6, hi=6))], opset=20, tol=(1e-5, 1e-4)))
    c.append(Case("Swish", E, "Swish", [("x", f32(lo=-20, hi=20))], attrs={"alpha": 1.702}, opset=24,
                  tol=(1e-5, 1e-4)))
    x = f32()
    x.flat[::97] = np.nan
    x.flat[5::89] = np.inf
    c.append(Case("IsNaN", E, "IsNaN", [("x", x)], exact=True))
    c.append(Case("IsInf", E, "IsInf", [("x", x)], exact=True))
    c.append(Case("Not", E, "Not", [("x", bools())], exact=True))
    c.append(Case("BitwiseNot", E, "BitwiseNot", [("x", ints())], opset=18, exact=True))
    c.append(Case("Clip", E, "Clip", [("x", f32())], consts=[("lo", np.array(-1.25, np.float32)),
                                                             ("hi", np.array(0.75, np.float32))], exact=True))
    c.append(Case("Where", E, "Where", [("c", bools()), ("a", f32()), ("b", f32([COLS]))], exact=True))
    c.append(Case("Cast", E, "Cast", [("x", f32(lo=-1000, hi=1000))], attrs={"to": TensorProto.INT32},
                  exact=True))
    c.append(Case("CastLike", E, "CastLike", [("x", ints())], consts=[("like", np.zeros([1], np.float32))],
                  exact=True))
    # a chain the passes fuse into one FusedElementwise node
    c.append(Case("FusedElementwise", E, None, [("x", f32()), ("y", f32())], domain_op="FusedElementwise",
                  nodes=[helper.make_node("Add", ["x", "y"], ["t0"], name="n_add"),
                         helper.make_node("Relu", ["t0"], ["t1"], name="n_relu"),
                         helper.make_node("Mul", ["t1", "x"], ["out"], name="n_mul")]))

    # ---- reductions, normalizations, pooling
    axes = ("axes", np.array([1], np.int64))
    for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]:
        lo, hi = (0.9, 1.1) if op == "ReduceProd" else (0.01, 3) if op == "ReduceLogSum" else (-3, 3)
        x = f32([256, 256], lo=lo, hi=hi)
        c.append(Case(op, R, op, [("x", x)], consts=[axes], attrs={"keepdims": 1}, opset=18,
                      exact=op in ("ReduceMax", "ReduceMin"), tol=(1e-4, 1e-4)))
    for op in ["ArgMax", "ArgMin"]:
        c.append(Case(op, R, op, [("x", f32([256, 256]))], attrs={"axis": 1}, exact=True))
    for op in ["Softmax", "LogSoftmax"]:
        c.append(Case(op, R, op, [("x", f32(lo=-10, hi=10))], attrs={"axis": -1}, tol=(1e-6, 1e-4)))
        # over a non-last axis with more columns than fit on the stack at once
        # (YOLOv8's DFL: [N,16,4,8400] over axis 1): in blocks of columns
        c.append(Case(op + "_axis1", R, op, [("x", f32([2, 16, 4, 2100], lo=-10, hi=10))], attrs={"axis": 1},
                      tol=(1e-6, 1e-4)))
    c.append(Case("LayerNormalization", R, "LayerNormalization", [("x", f32())],
                  consts=[("g", f32([COLS])), ("bb", f32([COLS]))], attrs={"axis": -1}, tol=(1e-5, 1e-4)))
    ch = IMG[1]
    c.append(Case("BatchNormalization", R, "BatchNormalization", [("x", f32(IMG))],
                  consts=[("s", f32([ch])), ("bb", f32([ch])), ("mean", f32([ch])), ("var", f32([ch], lo=0.5, hi=2))],
                  tol=(1e-5, 1e-4)))
    c.append(Case("InstanceNormalization", R, "InstanceNormalization", [("x", f32(IMG))],
                  consts=[("s", f32([ch])), ("bb", f32([ch]))], tol=(1e-5, 1e-4)))
    c.append(Case("GroupNormalization", R, "GroupNormalization", [("x", f32(IMG))],
                  consts=[("s", f32([4])), ("bb", f32([4]))], attrs={"num_groups": 4}, opset=18, tol=(1e-5, 1e-4)))
    c.append(Case("LpNormalization", R, "LpNormalization", [("x", f32())], attrs={"axis": -1, "p": 2},
                  tol=(1e-6, 1e-4)))
    big = [2, 32, 64, 64]
    c.append(Case("GlobalAveragePool", R, "GlobalAveragePool", [("x", f32(big))], tol=(1e-5, 1e-4)))
    c.append(Case("GlobalMaxPool", R, "GlobalMaxPool", [("x", f32(big))], exact=True))
    c.append(Case("GlobalLpPool", R, "GlobalLpPool", [("x", f32(big))], attrs={"p": 2}, tol=(1e-5, 1e-4)))
    pool = {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]}
    c.append(Case("MaxPool", R, "MaxPool", [("x", f32(IMG))], attrs=pool, exact=True))
    c.append(Case("AveragePool", R, "AveragePool", [("x", f32(IMG))], attrs=dict(pool, count_include_pad=0),
                  tol=(1e-5, 1e-4)))
    # 1-D windows: oneDNN's records take 2-D only, so these are kiln's generated pooling
    c.append(Case("MaxPool_1d", R, "MaxPool", [("x", f32([32, 32, 64]))],
                  attrs={"kernel_shape": [3], "strides": [1], "pads": [1, 1]}, exact=True))
    c.append(Case("AveragePool_1d", R, "AveragePool", [("x", f32([32, 32, 64]))],
                  attrs={"kernel_shape": [3], "strides": [1], "pads": [1, 1]}, tol=(1e-6, 1e-5)))
    c.append(Case("GlobalAveragePool_1d", R, "GlobalAveragePool", [("x", f32([32, 64, 64]))], tol=(1e-5, 1e-4)))
    c.append(Case("LpPool", R, "LpPool", [("x", f32(IMG))], attrs=dict(pool, p=2), opset=18, tol=(1e-5, 1e-4)))

    # ---- data movement: exact
    x = f32([64, 32, 32])
    c.append(Case("Reshape", M, "Reshape", [("x", x)], consts=[("shape", np.array([64, 1024], np.int64))],
                  exact=True))
    c.append(Case("Flatten", M, "Flatten", [("x", x)], attrs={"axis": 1}, exact=True))
    c.append(Case("Squeeze", M, "Squeeze", [("x", f32([64, 1, 1024]))], consts=[("axes", np.array([1], np.int64))],
                  exact=True))
    c.append(Case("Unsqueeze", M, "Unsqueeze", [("x", f32())], consts=[("axes", np.array([1], np.int64))],
                  exact=True))
    c.append(Case("Identity", M, "Identity", [("x", f32())], exact=True))
    c.append(Case("Dropout", M, "Dropout", [("x", f32())], exact=True))
    c.append(Case("Transpose", M, "Transpose", [("x", x)], attrs={"perm": [2, 0, 1]}, exact=True))
    c.append(Case("Concat", M, "Concat", [("a", f32([64, 512])), ("b", f32([64, 512]))], attrs={"axis": 1},
                  exact=True))
    c.append(Case("Split", M, "Split", [("x", f32())], consts=[("split", np.array([256, 768], np.int64))],
                  attrs={"axis": 1}, n_out=2, exact=True))
    c.append(Case("Slice", M, "Slice", [("x", f32([64, 2048]))],
                  consts=[("starts", np.array([1], np.int64)), ("ends", np.array([2047], np.int64)),
                          ("axes", np.array([1], np.int64)), ("steps", np.array([2], np.int64))], exact=True))
    c.append(Case("Gather", M, "Gather", [("x", f32([512, 128])), ("idx", ints([512], lo=-512, hi=512, dt=np.int64))],
                  attrs={"axis": 0}, exact=True))
    c.append(Case("GatherElements", M, "GatherElements",
                  [("x", f32()), ("idx", ints(lo=-COLS, hi=COLS, dt=np.int64))], attrs={"axis": 1}, exact=True))
    c.append(Case("Expand", M, "Expand", [("x", f32([1, COLS]))], consts=[("shape", np.array(SHAPE, np.int64))],
                  exact=True))
    c.append(Case("Tile", M, "Tile", [("x", f32([32, 512]))], consts=[("reps", np.array([2, 2], np.int64))],
                  exact=True))
    c.append(Case("Pad", M, "Pad", [("x", f32([60, 1000]))],
                  consts=[("pads", np.array([2, 12, 2, 12], np.int64)), ("v", np.array(1.5, np.float32))],
                  exact=True))
    c.append(Case("Pad_reflect", M, "Pad", [("x", f32([60, 1000]))],
                  consts=[("pads", np.array([2, 12, 2, 12], np.int64))], attrs={"mode": "reflect"}, exact=True))
    c.append(Case("DepthToSpace", M, "DepthToSpace", [("x", f32([2, 128, 16, 16]))], attrs={"blocksize": 2},
                  exact=True))
    c.append(Case("SpaceToDepth", M, "SpaceToDepth", [("x", f32(IMG))], attrs={"blocksize": 2}, exact=True))
    c.append(Case("Resize", M, "Resize", [("x", f32([2, 32, 32, 16]))],
                  consts=[("roi", np.zeros([0], np.float32)), ("scales", np.array([1, 1, 2, 2], np.float32))],
                  attrs={"mode": "nearest"}, exact=True))
    # (mode "linear" is not lowered: it runs its runtime kernel, with a remark in the report)
    c.append(Case("Resize_asymmetric", M, "Resize", [("x", f32([2, 32, 32, 16]))],
                  consts=[("roi", np.zeros([0], np.float32)), ("scales", np.array([1, 1, 1.5, 2], np.float32))],
                  attrs={"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
                  exact=True))
    c.append(Case("Upsample", M, "Upsample", [("x", f32([2, 32, 32, 16]))],
                  consts=[("scales", np.array([1, 1, 2, 2], np.float32))], attrs={"mode": "nearest"}, opset=9,
                  exact=True))
    sidx = np.stack([RNG.permutation(COLS)[:256] for _ in range(ROWS)]).astype(np.int64)
    c.append(Case("ScatterElements", M, "ScatterElements", [("x", f32()), ("idx", sidx), ("u", f32([ROWS, 256]))],
                  attrs={"axis": 1}, exact=True))
    c.append(Case("Scatter", M, "Scatter", [("x", f32()), ("idx", sidx), ("u", f32([ROWS, 256]))],
                  attrs={"axis": 1}, opset=10, exact=True))
    nd = RNG.permutation(ROWS)[:16].astype(np.int64).reshape(16, 1)
    c.append(Case("ScatterND", M, "ScatterND", [("x", f32()), ("idx", nd), ("u", f32([16, COLS]))], exact=True))

    # ---- oneDNN: convolutions and matrix products (sums reordered: a looser tolerance)
    dtol = (1e-4, 1e-4)
    c.append(Case("Conv", D, "Conv", [("x", f32(IMG, lo=-1, hi=1))],
                  consts=[("w", f32([32, 32, 3, 3], lo=-0.2, hi=0.2)), ("bb", f32([32]))],
                  attrs={"pads": [1, 1, 1, 1]}, tol=dtol))
    c.append(Case("FusedConv", D, None, [("x", f32(IMG, lo=-1, hi=1))], domain_op="FusedConv",
                  consts=[("w", f32([32, 32, 3, 3], lo=-0.2, hi=0.2)), ("bb", f32([32]))],
                  nodes=[helper.make_node("Conv", ["x", "w", "bb"], ["t0"], name="n_conv", pads=[1, 1, 1, 1]),
                         helper.make_node("Relu", ["t0"], ["out"], name="n_relu")], tol=dtol))
    c.append(Case("ConvTranspose", D, "ConvTranspose", [("x", f32([2, 32, 16, 16], lo=-1, hi=1))],
                  consts=[("w", f32([32, 16, 3, 3], lo=-0.2, hi=0.2)), ("bb", f32([16]))],
                  attrs={"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, tol=dtol))
    c.append(Case("FusedConvTranspose", D, None, [("x", f32([2, 32, 16, 16], lo=-1, hi=1))],
                  domain_op="FusedConvTranspose",
                  consts=[("w", f32([32, 16, 2, 2], lo=-0.2, hi=0.2)), ("bb", f32([16]))],
                  nodes=[helper.make_node("ConvTranspose", ["x", "w", "bb"], ["t0"], name="n_convt", strides=[2, 2]),
                         helper.make_node("Relu", ["t0"], ["out"], name="n_relu")], tol=dtol))
    c.append(Case("MatMul", D, "MatMul", [("a", f32([256, 256], lo=-1, hi=1))],
                  consts=[("w", f32([256, 256], lo=-0.2, hi=0.2))], tol=dtol))
    c.append(Case("MatMul_runtime_b", D, "MatMul", [("a", f32([256, 256], lo=-1, hi=1)),
                                                    ("b", f32([256, 256], lo=-0.2, hi=0.2))], tol=dtol))
    # two clips with different bounds around a residual sum: oneDNN 2.x runs two post-ops of one algorithm
    # with the first one's bounds, so the second clip takes clip_v2_use_dst_for_bwd (runtime/ops/fused_int.h)
    c.append(Case("FusedMatMul_clip_sum_clip", D, None, [("a", f32([256, 256], lo=-1, hi=1)),
                                                         ("r", f32([256, 256], lo=-2, hi=2))],
                  domain_op="FusedMatMul",
                  consts=[("w", f32([256, 256], lo=-0.2, hi=0.2)), ("lo1", np.array(0, np.float32)),
                          ("hi1", np.array(0.5, np.float32)), ("lo2", np.array(-0.75, np.float32)),
                          ("hi2", np.array(1.5, np.float32))],
                  nodes=[helper.make_node("MatMul", ["a", "w"], ["t0"], name="n_mm"),
                         helper.make_node("Clip", ["t0", "lo1", "hi1"], ["t1"], name="n_clip1"),
                         helper.make_node("Add", ["t1", "r"], ["t2"], name="n_add"),
                         helper.make_node("Clip", ["t2", "lo2", "hi2"], ["out"], name="n_clip2")], tol=dtol))
    c.append(Case("FusedMatMul", D, None, [("a", f32([256, 256], lo=-1, hi=1))], domain_op="FusedMatMul",
                  consts=[("w", f32([256, 256], lo=-0.2, hi=0.2)), ("bb", f32([256]))],
                  nodes=[helper.make_node("MatMul", ["a", "w"], ["t0"], name="n_mm"),
                         helper.make_node("Add", ["t0", "bb"], ["t1"], name="n_add"),
                         helper.make_node("Relu", ["t1"], ["out"], name="n_relu")], tol=dtol))
    c.append(Case("Gemm", D, "Gemm", [("a", f32([256, 256], lo=-1, hi=1))],
                  consts=[("w", f32([256, 256], lo=-0.2, hi=0.2)), ("bb", f32([256]))],
                  attrs={"transB": 1, "alpha": 0.5}, tol=dtol))  # (beta != 1 with C is not lowered)

    # ---- quantized (passes/lower_qdq.c): per-tensor QuantizeLinear/DequantizeLinear as generated loops,
    # QDQ groups as oneDNN int8 primitives (one rounding at the end instead of the float ops' own: the
    # outputs, dequantized, may differ by one step)
    qs, qz = np.array(0.05, np.float32), np.array(128, np.uint8)
    c.append(Case("QuantizeLinear", E, "QuantizeLinear", [("x", f32(lo=-8, hi=8))],
                  consts=[("s", qs), ("z", qz)], exact=True))
    c.append(Case("DequantizeLinear", E, "DequantizeLinear", [("x", u8())], consts=[("s", qs), ("z", qz)],
                  exact=True))
    ws = (RNG.uniform(0.002, 0.01, 32)).astype(np.float32)
    ys = np.array(0.5, np.float32)
    c.append(Case("QConv", D, None, [("x", u8(IMG))], domain_op="QConv",
                  consts=[("xs", qs), ("xz", qz), ("wq", i8([32, 32, 3, 3])), ("ws", ws),
                          ("bq", ints([32], lo=-2000, hi=2000)), ("bs", (qs * ws).astype(np.float32)),
                          ("ys", ys), ("yz", np.array(0, np.uint8))],
                  nodes=[helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], name="n_dqx"),
                         helper.make_node("DequantizeLinear", ["wq", "ws"], ["wd"], name="n_dqw", axis=0),
                         helper.make_node("DequantizeLinear", ["bq", "bs"], ["bd"], name="n_dqb", axis=0),
                         helper.make_node("Conv", ["xd", "wd", "bd"], ["t0"], name="n_conv", pads=[1, 1, 1, 1]),
                         helper.make_node("Relu", ["t0"], ["t1"], name="n_relu"),
                         helper.make_node("QuantizeLinear", ["t1", "ys", "yz"], ["t2"], name="n_q"),
                         helper.make_node("DequantizeLinear", ["t2", "ys", "yz"], ["out"], name="n_dq")],
                  tol=(0.5 * 1.001, 0)))
    # the residual sum of a group: its own scale and zero point (oneDNN's sum post-op); with a Relu after
    # the Add (ResNet's blocks) the residual's zero point stays oneDNN's (runtime/src/dnnl/conv.c's zp_fold
    # moves it only after the last post-op that is not linear)
    def residual_case(name, relu):
        tail = [helper.make_node("Relu", ["t3"], ["t5"], name="n_relu")] if relu else []
        return Case(name, D, None, [("x", u8(IMG)), ("r", u8([2, 32, 32, 32]))], domain_op="QConv",
                    consts=[("xs", qs), ("xz", qz), ("wq", i8([32, 32, 3, 3])), ("ws", ws),
                            ("cs", np.array(0.25, np.float32)), ("cz", np.array(60, np.uint8)),
                            ("rs", np.array(0.03, np.float32)), ("rz", np.array(100, np.uint8)),
                            ("ys", ys), ("yz", np.array(20, np.uint8))],
                    nodes=[helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], name="n_dqx"),
                           helper.make_node("DequantizeLinear", ["wq", "ws"], ["wd"], name="n_dqw", axis=0),
                           helper.make_node("Conv", ["xd", "wd"], ["t0"], name="n_conv", pads=[1, 1, 1, 1]),
                           helper.make_node("QuantizeLinear", ["t0", "cs", "cz"], ["t1"], name="n_qc"),
                           helper.make_node("DequantizeLinear", ["t1", "cs", "cz"], ["t2"], name="n_dqc"),
                           helper.make_node("DequantizeLinear", ["r", "rs", "rz"], ["rd"], name="n_dqr"),
                           helper.make_node("Add", ["t2", "rd"], ["t3"], name="n_add")] + tail +
                          [helper.make_node("QuantizeLinear", ["t5" if relu else "t3", "ys", "yz"], ["t4"],
                                            name="n_q"),
                           helper.make_node("DequantizeLinear", ["t4", "ys", "yz"], ["out"], name="n_dq")],
                    tol=(0.5 * 1.001 + 0.25 * 0.5, 0))  # one output step, and half a step of the dropped inner rounding
    c.append(residual_case("QConv_residual", relu=False))
    c.append(residual_case("QConv_residual_relu", relu=True))
    c.append(Case("QMatMul", D, None, [("a", u8([64, 256]))], domain_op="QMatMul",
                  consts=[("xs", qs), ("xz", qz), ("wq", i8([256, 128])), ("ws", np.array(0.004, np.float32)),
                          ("ys", ys), ("yz", np.array(3, np.int8))],
                  nodes=[helper.make_node("DequantizeLinear", ["a", "xs", "xz"], ["xd"], name="n_dqx"),
                         helper.make_node("DequantizeLinear", ["wq", "ws"], ["wd"], name="n_dqw"),
                         helper.make_node("MatMul", ["xd", "wd"], ["t0"], name="n_mm"),
                         helper.make_node("QuantizeLinear", ["t0", "ys", "yz"], ["t1"], name="n_q"),
                         helper.make_node("DequantizeLinear", ["t1", "ys", "yz"], ["out"], name="n_dq")],
                  tol=(0.5 * 1.001, 0)))
    # DequantizeLinear -> float ops -> QuantizeLinear as one generated loop (a FusedElementwise with 8-bit
    # inputs and output, passes/fuse_elementwise.c): a residual Add of two 8-bit tensors with their own
    # parameters (one output step apart at most: a sum that lands near a rounding tie), and a Sigmoid
    # from s8 to u8, which has one varying 8-bit input and so runs as a 256-entry table the reference
    # kernel computed (exact)
    qadd = [("as", np.array(0.04, np.float32)), ("az", np.array(120, np.uint8)),
            ("bs", np.array(0.03, np.float32)), ("bz", np.array(90, np.uint8)),
            ("ys", np.array(0.05, np.float32)), ("yz", np.array(100, np.uint8))]
    c.append(Case("FusedElementwise_qadd", E, None, [("a", u8()), ("b", u8())], domain_op="FusedElementwise",
                  consts=qadd,
                  nodes=[helper.make_node("DequantizeLinear", ["a", "as", "az"], ["ad"], name="n_dqa"),
                         helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], name="n_dqb"),
                         helper.make_node("Add", ["ad", "bd"], ["t0"], name="n_add"),
                         helper.make_node("QuantizeLinear", ["t0", "ys", "yz"], ["out"], name="n_q")],
                  tol=(1.001, 0)))
    c.append(Case("FusedElementwise_qsigmoid", E, None, [("x", i8(SHAPE))], domain_op="FusedElementwise",
                  consts=[("xs", np.array(0.08, np.float32)), ("xz", np.array(-3, np.int8)),
                          ("ys", np.array(1 / 256, np.float32)), ("yz", np.array(0, np.uint8))],
                  nodes=[helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], name="n_dqx"),
                         helper.make_node("Sigmoid", ["xd"], ["t0"], name="n_sig"),
                         helper.make_node("QuantizeLinear", ["t0", "ys", "yz"], ["out"], name="n_q")],
                  exact=True))
    # DequantizeLinear -> GlobalAveragePool -> QuantizeLinear becomes com.microsoft QLinearGlobalAveragePool,
    # generated as an integer sum per channel (the reference computes in float: one step apart at most)
    c.append(Case("QLinearGlobalAveragePool", R, None, [("x", u8(IMG))], domain_op="QLinearGlobalAveragePool",
                  consts=[("xs", np.array(0.05, np.float32)), ("xz", np.array(120, np.uint8)),
                          ("ys", np.array(0.02, np.float32)), ("yz", np.array(100, np.uint8))],
                  nodes=[helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"], name="n_dqx"),
                         helper.make_node("GlobalAveragePool", ["xd"], ["t0"], name="n_gap"),
                         helper.make_node("QuantizeLinear", ["t0", "ys", "yz"], ["out"], name="n_q")],
                  tol=(1.001, 0)))
    # dynamic: x quantized at run time inside the op (runtime/src/dnnl/dynq.c), a bias and a residual
    c.append(Case("QMatMul_dynamic", D, None, [("a", f32([64, 256], lo=-2, hi=3))], domain_op="QMatMul",
                  consts=[("wq", i8([256, 256])), ("ws", RNG.uniform(0.002, 0.01, 256).astype(np.float32)),
                          ("bb", f32([256]))],
                  nodes=[helper.make_node("DynamicQuantizeLinear", ["a"], ["q", "qs", "qz"], name="n_dql"),
                         helper.make_node("DequantizeLinear", ["q", "qs", "qz"], ["xd"], name="n_dqx"),
                         helper.make_node("DequantizeLinear", ["wq", "ws"], ["wd"], name="n_dqw", axis=1),
                         helper.make_node("MatMul", ["xd", "wd"], ["t0"], name="n_mm"),
                         helper.make_node("Add", ["t0", "bb"], ["t1"], name="n_bias"),
                         helper.make_node("Add", ["t1", "a"], ["out"], name="n_res")],
                  tol=(1e-4, 1e-4)))
    return c


def onnx_type(a):
    return {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32,
            np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL,
            np.dtype(np.uint32): TensorProto.UINT32, np.dtype(np.uint8): TensorProto.UINT8,
            np.dtype(np.int8): TensorProto.INT8}[a.dtype]


def make_model(case, path):
    ins = [helper.make_tensor_value_info(n, onnx_type(a), list(a.shape)) for n, a in case.inputs]
    inits = [numpy_helper.from_array(a, n) for n, a in case.consts]
    if case.nodes:
        nodes, outs = case.nodes, ["out"]
    else:
        outs = ["out"] if case.n_out == 1 else [f"out{k}" for k in range(case.n_out)]
        names = [n for n, _ in case.inputs] + [n for n, _ in case.consts]
        nodes = [helper.make_node(case.op, names, outs, name="n0", **case.attrs)]
    g = helper.make_graph(nodes, case.name, ins, [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    ir = 9 if case.opset >= 20 else 8
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", case.opset)], ir_version=ir)
    onnx.save(m, path)
    for n, a in case.inputs:
        np.save(os.path.join(os.path.dirname(path), f"input_{n}.npy"), a)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def compare(name, ref_path, got_path, case):
    if not os.path.exists(got_path):
        return f"{name}: the artifact wrote no {os.path.basename(got_path)}"
    want, got = np.load(ref_path), np.load(got_path)
    if want.shape != got.shape or want.dtype != got.dtype:
        return f"{name}: {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
    if case.exact or want.dtype.kind not in "fc":
        same = (want == got) | (np.isnan(want) & np.isnan(got)) if want.dtype.kind == "f" else want == got
        bad = int(np.count_nonzero(~same))
        if bad:
            i = int(np.argmax(~same.reshape(-1)))
            return (f"{name}: {bad} of {want.size} elements differ from the reference (exact op; first at flat "
                    f"{i}: got {got.reshape(-1)[i]}, expected {want.reshape(-1)[i]})")
        return None
    atol, rtol = case.tol
    w, g = want.astype(np.float64), got.astype(np.float64)
    ok = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    bad = int(np.count_nonzero(~ok))
    if bad:
        i = int(np.argmax(~ok.reshape(-1)))
        return (f"{name}: {bad} of {want.size} elements off by more than {atol:g} + {rtol:g}*|ref| (first at flat "
                f"{i}: got {g.reshape(-1)[i]!r}, expected {w.reshape(-1)[i]!r})")
    return None


def check(kiln, out_dir, case):
    d = os.path.join(out_dir, case.name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    model = os.path.join(d, "model.onnx")
    make_model(case, model)
    args = []
    for n, _ in case.inputs:
        args += ["--input", f"{n}={os.path.join(d, f'input_{n}.npy')}"]
    rc, out = run([kiln, "compile", model, "-o", os.path.join(d, "case.so"), "--report"])
    if rc != 0:
        return f"kiln compile exited {rc}:\n{out}"
    rows = [ln for ln in out.splitlines() if re.match(r"^\S+\s+" + re.escape(case.report_op) + r"\s{2,}", ln)]
    if not rows:
        return f"the report has no {case.report_op} node:\n{out}"
    allowed = COMPILED | ({"alias"} if case.report_op in VIEW_OPS else set())
    for ln in rows:
        label = re.split(r"\s{2,}", ln.strip(), maxsplit=2)[-1]
        if label not in allowed:
            return f"{case.report_op} was not compiled (report: '{label}'):\n{out}"
    rc, rout = run([kiln, "run", model, "--reference", *args, "--output-dir", os.path.join(d, "ref")])
    if rc != 0:
        return f"kiln run --reference exited {rc}:\n{rout}"
    rc, aout = run([kiln, "run", os.path.join(d, "case.so"), *args, "--output-dir", os.path.join(d, "got")])
    if rc != 0:
        return f"kiln run (artifact) exited {rc}:\n{aout}"
    refs = sorted(os.listdir(os.path.join(d, "ref")))
    if not refs:
        return "the reference wrote no output"
    for f in refs:
        err = compare(f[:-4], os.path.join(d, "ref", f), os.path.join(d, "got", f), case)
        if err:
            return err
    label = re.split(r"\s{2,}", rows[0].strip(), maxsplit=2)[-1]
    return "ok:" + label


def lowered_ops(src):
    """The ops of the lowering tables (kn_cg_lower_* arrays), by name."""
    ops = set()
    for f in ["lower_dnnl.c", "lower_elementwise.c", "lower_reduce.c", "lower_movement.c"]:
        text = open(os.path.join(src, "codegen", "cpu", f)).read()
        table = text[text.index("const kn_cg_lowering kn_cg_lower_"):]
        table = table[:table.index("};")]
        ops |= set(re.findall(r"\{KN_OP_(\w+),", table)) | set(re.findall(r"\b(?:UN|BIN|VAR)\((\w+)\)", table))
        if "KN_CLASS_##cls" in table:  # the elementwise ops of ops.def's CLASS column
            defs = open(os.path.join(src, "runtime", "ops", "ops.def")).read()
            ops |= set(re.findall(r"^KN_OP\((\w+), .*, (?:UNARY|BINARY|VARIADIC), ", defs, re.M))
    ops.discard("UNKNOWN")
    return ops


def coverage(src):
    ops = lowered_ops(src)
    have = {c.report_op for c in cases()}
    missing = sorted(ops - have)
    print(f"check_paths: {len(ops)} ops have a lowering, {len(ops) - len(missing)} have a path case")
    if len(ops) < 100:
        sys.exit(f"check_paths: only {len(ops)} lowered ops found in {src}/codegen/cpu: the table parser broke")
    if missing:
        sys.exit("check_paths: ops with a lowering but no path case: " + " ".join(missing))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--coverage":
        return coverage(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kiln")
    ap.add_argument("out_dir")
    ap.add_argument("group", choices=["elementwise", "reduce", "movement", "dnnl", "all"])
    ap.add_argument("--case", action="append", default=[])
    a = ap.parse_args()
    todo = [c for c in cases() if (a.group == "all" or c.group == a.group) and (not a.case or c.name in a.case)]
    if not todo:
        sys.exit(f"check_paths: no case in group {a.group} {a.case}")
    failed = []
    for case in todo:
        res = check(a.kiln, a.out_dir, case)
        if res.startswith("ok:"):
            print(f"ok   {case.name:24s} {case.report_op:22s} {res[3:]}")
            shutil.rmtree(os.path.join(a.out_dir, case.name), ignore_errors=True)
        else:
            print(f"FAIL {case.name}: {res}")
            failed.append(case.name)
    print(f"check_paths {a.group}: {len(todo) - len(failed)} of {len(todo)} cases compiled and matched the reference")
    if failed:
        print("check_paths: failed: " + " ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
