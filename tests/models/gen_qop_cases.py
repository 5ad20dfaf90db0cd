#!/usr/bin/env python3
"""Generate single-op test cases for every quantized op kiln must support.

Each case is a folder OUT_DIR/<case>/ in the layout of the model tests
(run_model_test.sh, compare.py): model.onnx (one node, built with
onnx.helper, fixed seed, under 100 KB), input_<name>.npy for every graph
input, expected_<name>.npy (onnxruntime 1.18's output, graph optimizations
disabled) and tolerance.json, which compare.py reads:
  {OUTPUT: {"exact": true}}                 integer outputs of exact ops
                                            (ConvInteger, MatMulInteger, ...)
  {OUTPUT: {"atol": A, "rtol": R, "why": ...}}  |kiln - ort| <= A + R*|ort|:
      8-bit outputs: A = 1 (one quantization step, for a rounding tie
      resolved the other way or a requantization in another order);
      float outputs of quantized ops: A = one step of the quantized value
      they come from, times what it multiplies (see each case).
Constants (scales, zero points, weights) are initializers, as quantizers
write them; the 8-bit activations are graph inputs. s8 weights multiplied
by u8 activations use 7 bits (Case.w7: onnxruntime's u8s8 kernels saturate
otherwise on CPUs without VNNI, and its answer would be the wrong oracle).

Standard-domain ops: QuantizeLinear, DequantizeLinear (per tensor, per
axis, u8 and s8, DequantizeLinear of int32), QLinearConv, QLinearMatMul,
ConvInteger, MatMulInteger, DynamicQuantizeLinear. com.microsoft ops:
QLinearAdd, QLinearMul, QLinearConcat, QLinearGlobalAveragePool,
QLinearSigmoid, QLinearLeakyRelu, QGemm, DynamicQuantizeMatMul,
MatMulIntegerToFloat, DynamicQuantizeLSTM.

Opset 21 blocked quantization (QuantizeLinear/DequantizeLinear with
block_size: a scale and zero point per block of block_size elements
along the axis) is written at opset 21 (Case.opset); onnxruntime 1.32 is
its reference (1.18 ignored block_size).

Does nothing if OUT_DIR holds the cases of this version of the script and
the same libraries (OUT_DIR/stamp). --list prints the case names (CMake
reads it to register one test per case).

Usage: gen_qop_cases.py OUT_DIR [--force] [--only CASE,...]
       gen_qop_cases.py --list
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

OPSET = 17   # the opset the standard ops are written at (kiln's models use 17)
MS = "com.microsoft"
NP2TP = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.uint8): TP.UINT8, np.dtype(np.int8): TP.INT8,
         np.dtype(np.int32): TP.INT32, np.dtype(np.int64): TP.INT64}
CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


class Case:
    """One node: inputs (graph inputs with values), constants, outputs and their tolerances."""

    def __init__(self, name):
        self.name = name
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.inputs, self.inits, self.tol, self.consts = {}, [], {}, {}
        self.node = None
        self.domain_ms = False
        self.opset = OPSET

    def input(self, name, value):
        self.inputs[name] = np.asarray(value)
        return name

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        self.consts[name] = np.asarray(value)
        return name

    def op(self, op_type, inputs, outputs, **attrs):
        domain = MS if op_type in MS_OPS else ""
        self.domain_ms |= domain == MS
        self.node = helper.make_node(op_type, inputs, outputs, name=op_type.lower(), domain=domain, **attrs)

    def u8(self, shape, lo=0, hi=256):
        return self.rng.integers(lo, hi, size=shape).astype(np.uint8)

    def s8(self, shape, lo=-128, hi=128):
        return self.rng.integers(lo, hi, size=shape).astype(np.int8)

    def w7(self, shape):
        """s8 weights for a u8 x s8 product, in [-64, 63] (7 bits). onnxruntime's x86
        u8s8 kernels on CPUs without VNNI (AVX2, AVX-512 before VNNI) add pairs of
        u8*s8 products in int16 with saturation (vpmaddubsw): 255*127*2 overflows and
        onnxruntime's answer is wrong (by up to 15,000 in MatMulInteger; seen on an
        AVX2 EPYC), while 255*64*2 fits. quantize_static's reduce_range=True is the
        same workaround."""
        return self.rng.integers(-64, 64, size=shape).astype(np.int8)

    def f32(self, shape, scale=1.0):
        return (scale * self.rng.standard_normal(shape)).astype(np.float32)

    def step(self, out, why="one quantization step (rounding of a tie, or requantization order)"):
        self.tol[out] = {"atol": 1, "rtol": 0, "why": why}

    def exact(self, out):
        self.tol[out] = {"exact": True}

    def floattol(self, out, atol, why, rtol=1e-6):
        self.tol[out] = {"atol": float(atol), "rtol": rtol, "why": why}

    def model(self):
        ins = [helper.make_tensor_value_info(n, NP2TP[v.dtype], list(v.shape)) for n, v in self.inputs.items()]
        outs = [helper.make_tensor_value_info(n, t, None) for n, t in zip(self.node.output, self.out_types()) if n]
        graph = helper.make_graph([self.node], self.name, ins, outs, self.inits)
        opsets = [helper.make_opsetid("", self.opset)] + ([helper.make_opsetid(MS, 1)] if self.domain_ms else [])
        m = helper.make_model(graph, opset_imports=opsets, producer_name="kiln-tests-qop")
        m.ir_version = 8 if self.opset < 21 else 10
        return m

    def out_types(self):
        """The outputs' element types (onnxruntime wants them declared; shapes it computes)."""
        op = self.node.op_type
        if op in ("ConvInteger", "MatMulInteger"):
            return [TP.INT32]
        if op in ("DequantizeLinear", "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "DynamicQuantizeLSTM"):
            return [TP.FLOAT] * 3
        if op == "DynamicQuantizeLinear":
            return [TP.UINT8, TP.FLOAT, TP.UINT8]
        zp = [n for n in ("y_zero_point", "c_zero_point") if n in self.consts]
        if zp:
            return [NP2TP[self.consts[zp[0]].dtype]]
        return [TP.FLOAT if op == "QGemm" else TP.UINT8]


MS_OPS = {"QLinearAdd", "QLinearMul", "QLinearConcat", "QLinearGlobalAveragePool", "QLinearSigmoid",
          "QLinearLeakyRelu", "QGemm", "DynamicQuantizeMatMul", "MatMulIntegerToFloat",
          "DynamicQuantizeLSTM"}


# ------------------------------------------------ QuantizeLinear / Dequantize --

@case
def quantizelinear_u8_tensor(c):
    # wide enough to saturate at both ends; some values sit exactly on ties
    x = c.f32((2, 3, 6, 6), 3.0)
    x.flat[:8] = np.array([0.25, 0.75, -0.25, 1.25, 12.0, -12.0, 0.0, 2.5], np.float32) * 0.5
    c.input("x", x)
    c.op("QuantizeLinear", ["x", c.const("y_scale", np.float32(0.025)), c.const("y_zero_point", np.uint8(128))], ["y"])
    c.step("y")


@case
def quantizelinear_s8_axis(c):
    c.input("x", c.f32((2, 4, 5, 5), 2.0))
    scale = np.array([0.01, 0.02, 0.05, 0.1], np.float32)
    c.op("QuantizeLinear", ["x", c.const("y_scale", scale), c.const("y_zero_point", np.array([0, -3, 5, 10], np.int8))],
         ["y"], axis=1)
    c.step("y")


@case
def quantizelinear_u8_noszp(c):
    # no zero point: uint8 with zero point 0, negatives saturate to 0
    c.input("x", c.f32((3, 17), 1.0))
    c.op("QuantizeLinear", ["x", c.const("y_scale", np.float32(0.01))], ["y"])
    c.step("y")


@case
def dequantizelinear_u8_tensor(c):
    c.input("x", c.u8((2, 3, 6, 6)))
    c.op("DequantizeLinear", ["x", c.const("x_scale", np.float32(0.0375)), c.const("x_zero_point", np.uint8(131))], ["y"])
    c.floattol("y", 0, "one float multiply: (x - zp) * scale", rtol=1e-6)


@case
def dequantizelinear_s8_axis(c):
    c.input("x", c.s8((3, 5, 4)))
    c.op("DequantizeLinear", ["x", c.const("x_scale", np.array([0.1, 0.02, 0.003, 0.5, 1.5], np.float32)),
                              c.const("x_zero_point", np.array([0, 1, -2, 3, -128], np.int8))], ["y"], axis=-2)
    c.floattol("y", 0, "one float multiply: (x - zp) * scale", rtol=1e-6)


@case
def dequantizelinear_i32_bias(c):
    # int32 bias as QDQ models carry it (zero point 0, scale = x_scale * w_scale)
    c.input("x", c.rng.integers(-100000, 100000, size=(64,)).astype(np.int32))
    c.op("DequantizeLinear", ["x", c.const("x_scale", np.float32(0.0003))], ["y"])
    c.floattol("y", 0, "one float multiply", rtol=1e-6)


@case
def dequantizelinear_s8_blocked(c):
    # opset 21: one scale and zero point per 16 elements along axis 1 (weights with block scales); the
    # last block of 40 is short (8 elements)
    c.opset = 21
    c.input("x", c.s8((3, 40)))
    c.op("DequantizeLinear", ["x", c.const("x_scale", c.rng.uniform(0.01, 0.2, (3, 3)).astype(np.float32)),
                              c.const("x_zero_point", c.s8((3, 3), -6, 6))], ["y"], axis=1, block_size=16)
    c.floattol("y", 0, "one float multiply: (x - zp) * scale", rtol=1e-6)


@case
def quantizelinear_u8_blocked(c):
    # opset 21: blocks of 3 rows along axis 0, u8 with a zero point per block and column
    c.opset = 21
    c.input("x", c.f32((6, 8), 2.0))
    c.op("QuantizeLinear", ["x", c.const("y_scale", c.rng.uniform(0.01, 0.05, (2, 8)).astype(np.float32)),
                            c.const("y_zero_point", c.u8((2, 8), 100, 150))], ["y"], axis=0, block_size=3)
    c.step("y")


# ----------------------------------------------------------------- QLinearConv --

def qlinearconv(c, x_dtype, w_dtype, cin=8, cout=8, hw=10, k=3, stride=1, group=1, per_channel=False,
                bias=True, pad=1):
    sx, sy = np.float32(0.02), np.float32(0.05)
    if x_dtype == np.uint8:
        x, zx, zy = c.u8((1, cin, hw, hw)), np.uint8(120), np.uint8(100)
    else:
        x, zx, zy = c.s8((1, cin, hw, hw)), np.int8(-5), np.int8(3)
    wshape = (cout, cin // group, k, k)
    if w_dtype == np.uint8:
        w = c.u8(wshape)
    else:
        w = c.w7(wshape) if x_dtype == np.uint8 else c.s8(wshape, -127, 128)
    if per_channel:
        sw = (0.002 + 0.006 * c.rng.random(cout)).astype(np.float32)
        zw = np.zeros(cout, w_dtype) if w_dtype == np.int8 else np.full(cout, 128, np.uint8)
    else:
        sw = np.float32(0.004)
        zw = w_dtype(0) if w_dtype == np.int8 else np.uint8(128)
    ins = [c.input("x", x), c.const("x_scale", sx), c.const("x_zero_point", zx), c.const("w", w),
           c.const("w_scale", sw), c.const("w_zero_point", zw), c.const("y_scale", sy), c.const("y_zero_point", zy)]
    if bias:
        ins.append(c.const("B", c.rng.integers(-2000, 2000, size=cout).astype(np.int32)))
    c.op("QLinearConv", ins, ["y"], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group)
    c.step("y")


@case
def qlinearconv_u8_tensor_bias(c):
    qlinearconv(c, np.uint8, np.int8)


@case
def qlinearconv_u8_channel_nobias_stride2(c):
    qlinearconv(c, np.uint8, np.int8, cout=12, stride=2, per_channel=True, bias=False)


@case
def qlinearconv_u8_group2(c):
    qlinearconv(c, np.uint8, np.int8, cin=8, cout=6, group=2, per_channel=True)


@case
def qlinearconv_u8_depthwise(c):
    qlinearconv(c, np.uint8, np.int8, cin=16, cout=16, group=16, per_channel=True, hw=12)


@case
def qlinearconv_u8_1x1(c):
    qlinearconv(c, np.uint8, np.int8, cin=32, cout=16, k=1, pad=0, per_channel=True)


@case
def qlinearconv_s8_channel_bias(c):
    qlinearconv(c, np.int8, np.int8, cout=10, per_channel=True)


@case
def qlinearconv_u8_u8weights(c):
    qlinearconv(c, np.uint8, np.uint8)


# ---------------------------------------------------------------- QLinearMatMul --

@case
def qlinearmatmul_u8s8(c):
    ins = [c.input("a", c.u8((2, 7, 32))), c.const("a_scale", np.float32(0.02)), c.const("a_zero_point", np.uint8(125)),
           c.const("b", c.w7((32, 9))), c.const("b_scale", np.float32(0.006)),
           c.const("b_zero_point", np.int8(0)), c.const("y_scale", np.float32(0.04)), c.const("y_zero_point", np.uint8(128))]
    c.op("QLinearMatMul", ins, ["y"])
    c.step("y")


@case
def qlinearmatmul_u8u8(c):
    ins = [c.input("a", c.u8((5, 16))), c.const("a_scale", np.float32(0.02)), c.const("a_zero_point", np.uint8(100)),
           c.input("b", c.u8((16, 6))), c.const("b_scale", np.float32(0.01)), c.const("b_zero_point", np.uint8(140)),
           c.const("y_scale", np.float32(0.15)), c.const("y_zero_point", np.uint8(110))]
    c.op("QLinearMatMul", ins, ["y"])
    c.step("y")


@case
def qlinearmatmul_s8s8(c):
    ins = [c.input("a", c.s8((3, 4, 24))), c.const("a_scale", np.float32(0.03)), c.const("a_zero_point", np.int8(-2)),
           c.const("b", c.s8((24, 8), -127, 128)), c.const("b_scale", np.float32(0.004)),
           c.const("b_zero_point", np.int8(0)), c.const("y_scale", np.float32(0.06)), c.const("y_zero_point", np.int8(-1))]
    c.op("QLinearMatMul", ins, ["y"])
    c.step("y")


# ----------------------------------------------------- ConvInteger / MatMulInteger --

@case
def convinteger_u8(c):
    ins = [c.input("x", c.u8((1, 4, 9, 9))), c.const("w", c.u8((6, 4, 3, 3))),
           c.const("x_zero_point", np.uint8(127)), c.const("w_zero_point", np.uint8(130))]
    c.op("ConvInteger", ins, ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    c.exact("y")


@case
def matmulinteger_u8s8(c):
    ins = [c.input("a", c.u8((2, 6, 20))), c.const("b", c.w7((20, 10))),
           c.const("a_zero_point", np.uint8(128)), c.const("b_zero_point", np.int8(0))]
    c.op("MatMulInteger", ins, ["y"])
    c.exact("y")


@case
def matmulinteger_u8u8_zp(c):
    ins = [c.input("a", c.u8((7, 12))), c.input("b", c.u8((12, 5))),
           c.const("a_zero_point", np.uint8(3)), c.const("b_zero_point", np.uint8(250))]
    c.op("MatMulInteger", ins, ["y"])
    c.exact("y")


@case
def matmulinteger_s8s8_nozp(c):
    c.op("MatMulInteger", [c.input("a", c.s8((4, 16))), c.const("b", c.s8((16, 3)))], ["y"])
    c.exact("y")


@case
def dynamicquantizelinear(c):
    x = c.f32((3, 40), 2.0)
    x[0, 0] = 5.0   # asymmetric range
    c.input("x", x)
    c.op("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zero_point"])
    c.step("y")
    c.floattol("y_scale", 0, "(max(0, max x) - min(0, min x)) / 255", rtol=1e-6)
    c.step("y_zero_point", "round(-min/scale): a tie may round the other way")


# ------------------------------------------------------------- com.microsoft --

@case
def qlinearadd_u8_broadcast(c):
    ins = [c.input("a", c.u8((2, 8, 5, 5))), c.const("a_scale", np.float32(0.05)), c.const("a_zero_point", np.uint8(120)),
           c.input("b", c.u8((8, 1, 1))), c.const("b_scale", np.float32(0.03)), c.const("b_zero_point", np.uint8(130)),
           c.const("c_scale", np.float32(0.07)), c.const("c_zero_point", np.uint8(125))]
    c.op("QLinearAdd", ins, ["c"])
    c.step("c")


@case
def qlinearadd_s8(c):
    ins = [c.input("a", c.s8((4, 33))), c.const("a_scale", np.float32(0.02)), c.const("a_zero_point", np.int8(-3)),
           c.input("b", c.s8((4, 33))), c.const("b_scale", np.float32(0.025)), c.const("b_zero_point", np.int8(4)),
           c.const("c_scale", np.float32(0.05)), c.const("c_zero_point", np.int8(0))]
    c.op("QLinearAdd", ins, ["c"])
    c.step("c")


@case
def qlinearmul_u8(c):
    ins = [c.input("a", c.u8((3, 6, 7))), c.const("a_scale", np.float32(0.02)), c.const("a_zero_point", np.uint8(128)),
           c.input("b", c.u8((6, 7))), c.const("b_scale", np.float32(0.03)), c.const("b_zero_point", np.uint8(120)),
           c.const("c_scale", np.float32(0.05)), c.const("c_zero_point", np.uint8(128))]
    c.op("QLinearMul", ins, ["c"])
    c.step("c")


@case
def qlinearconcat_u8(c):
    ins = [c.const("y_scale", np.float32(0.05)), c.const("y_zero_point", np.uint8(128)),
           c.input("x0", c.u8((1, 3, 4, 4))), c.const("x0_scale", np.float32(0.05)), c.const("x0_zero_point", np.uint8(128)),
           c.input("x1", c.u8((1, 5, 4, 4))), c.const("x1_scale", np.float32(0.02)), c.const("x1_zero_point", np.uint8(100)),
           c.input("x2", c.u8((1, 2, 4, 4))), c.const("x2_scale", np.float32(0.1)), c.const("x2_zero_point", np.uint8(140))]
    c.op("QLinearConcat", ins, ["y"], axis=1)
    c.step("y")


def qlinear_gap(c, channels_last):
    shape = (2, 5, 6, 8) if channels_last else (2, 8, 5, 6)
    ins = [c.input("x", c.u8(shape)), c.const("x_scale", np.float32(0.04)), c.const("x_zero_point", np.uint8(110)),
           c.const("y_scale", np.float32(0.02)), c.const("y_zero_point", np.uint8(120))]
    c.op("QLinearGlobalAveragePool", ins, ["y"], channels_last=channels_last)
    c.step("y")


@case
def qlinearglobalaveragepool_nchw(c):
    qlinear_gap(c, 0)


@case
def qlinearglobalaveragepool_nhwc(c):
    qlinear_gap(c, 1)


@case
def qlinearsigmoid_u8(c):
    ins = [c.input("x", c.u8((4, 50))), c.const("x_scale", np.float32(0.05)), c.const("x_zero_point", np.uint8(128)),
           c.const("y_scale", np.float32(1.0 / 256)), c.const("y_zero_point", np.uint8(0))]
    c.op("QLinearSigmoid", ins, ["y"])
    c.step("y")


@case
def qlinearleakyrelu_u8(c):
    ins = [c.input("x", c.u8((4, 50))), c.const("x_scale", np.float32(0.05)), c.const("x_zero_point", np.uint8(128)),
           c.const("y_scale", np.float32(0.04)), c.const("y_zero_point", np.uint8(30))]
    c.op("QLinearLeakyRelu", ins, ["y"], alpha=0.1)
    c.step("y")


@case
def qlinearleakyrelu_s8(c):
    ins = [c.input("x", c.s8((3, 40))), c.const("x_scale", np.float32(0.05)), c.const("x_zero_point", np.int8(0)),
           c.const("y_scale", np.float32(0.05)), c.const("y_zero_point", np.int8(-100))]
    c.op("QLinearLeakyRelu", ins, ["y"], alpha=0.2)
    c.step("y")


def qgemm_inputs(c, m=6, k=24, n=10, trans_b=1):
    b = c.w7((n, k) if trans_b else (k, n))
    return [c.input("a", c.u8((m, k))), c.const("a_scale", np.float32(0.02)), c.const("a_zero_point", np.uint8(128)),
            c.const("b", b), c.const("b_scale", (0.002 + 0.004 * c.rng.random(n)).astype(np.float32)),
            c.const("b_zero_point", np.zeros(n, np.int8)),
            c.const("c", c.rng.integers(-3000, 3000, size=n).astype(np.int32))]


@case
def qgemm_u8_out(c):
    ins = qgemm_inputs(c) + [c.const("y_scale", np.float32(0.05)), c.const("y_zero_point", np.uint8(128))]
    c.op("QGemm", ins, ["y"], transB=1, alpha=1.0)
    c.step("y")


@case
def qgemm_float_out(c):
    ins = qgemm_inputs(c, trans_b=0)
    c.op("QGemm", ins, ["y"], transB=0, alpha=1.0)
    # exact int32 accumulation, then one multiply by a_scale*b_scale[n]
    c.floattol("y", 0, "int32 sum times a_scale * b_scale", rtol=1e-5)


@case
def matmulintegertofloat_u8s8(c):
    n = 12
    ins = [c.input("a", c.u8((2, 5, 16))), c.const("b", c.w7((16, n))),
           c.const("a_scale", np.float32(0.02)), c.const("b_scale", (0.001 + 0.003 * c.rng.random(n)).astype(np.float32)),
           c.const("a_zero_point", np.uint8(128)), c.const("b_zero_point", np.zeros(n, np.int8)),
           c.const("bias", c.f32((n,), 0.1))]
    c.op("MatMulIntegerToFloat", ins, ["y"])
    c.floattol("y", 1e-6, "int32 sum times a_scale * b_scale[n], plus bias", rtol=1e-5)


@case
def dynamicquantizematmul(c):
    k, n = 32, 16
    a = c.f32((3, 7, k))
    b = c.w7((k, n))   # A becomes u8 at run time
    bs = (0.004 + 0.004 * c.rng.random(n)).astype(np.float32)
    ins = [c.input("a", a), c.const("b", b), c.const("b_scale", bs), c.const("b_zero_point", np.zeros(n, np.int8)),
           c.const("bias", c.f32((n,), 0.1))]
    c.op("DynamicQuantizeMatMul", ins, ["y"])
    # A is quantized to u8 at run time with scale (max(0,max a)-min(0,min a))/255; one
    # step of one element of A moves an output by a_scale * b_scale[n] * |b[k, n]|
    a_scale = (max(0.0, float(a.max())) - min(0.0, float(a.min()))) / 255
    c.floattol("y", a_scale * float((bs * np.abs(b.astype(np.float32))).max()),
               "one step of the run-time quantization of one element of A", rtol=1e-5)


@case
def dynamicquantizelstm(c):
    seq, batch, inp, hidden = 5, 2, 8, 6
    wq = c.w7((1, inp, 4 * hidden))         # note: [dirs, input, 4*hidden], unlike LSTM's W
    rq = c.w7((1, hidden, 4 * hidden))      # X and h become u8 at run time
    ws = np.full((1, 4 * hidden), 0.008, np.float32)  # per output channel
    rs = np.full((1, 4 * hidden), 0.006, np.float32)
    ins = [c.input("X", c.f32((seq, batch, inp))), c.const("W", wq), c.const("R", rq),
           c.const("B", c.f32((1, 8 * hidden), 0.1)), "", c.input("initial_h", c.f32((1, batch, hidden), 0.5)),
           c.input("initial_c", c.f32((1, batch, hidden), 0.5)), "",
           c.const("W_scale", ws), c.const("W_zero_point", np.zeros((1, 4 * hidden), np.int8)),
           c.const("R_scale", rs), c.const("R_zero_point", np.zeros((1, 4 * hidden), np.int8))]
    c.op("DynamicQuantizeLSTM", ins, ["Y", "Y_h", "Y_c"], hidden_size=hidden)
    why = "X and h are quantized at every step: a step of one element moves gates by ~1e-3, and it compounds"
    for out in ("Y", "Y_h", "Y_c"):
        c.floattol(out, 2e-3, why, rtol=1e-3)


# ---------------------------------------------------------------------- driver --

def stamp_of():
    import onnxruntime
    with open(os.path.abspath(__file__), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return f"qop-cases {digest} onnx={onnx.__version__} onnxruntime={onnxruntime.__version__} numpy={np.__version__}\n"


def build(name):
    c = Case(name)
    CASES[name](c)
    return c


def write_case(name, out):
    import onnxruntime as ort
    c = build(name)
    m = c.model()
    data = m.SerializeToString()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        values = sess.run(names, c.inputs)
    except Exception as e:  # onnxruntime refusing a case is a bug in this script
        raise SystemExit(f"gen_qop_cases: onnxruntime fails on {name}: {e}")
    # the outputs' types as onnxruntime computed them, so the model is complete
    m.graph.ClearField("output")
    for n, v in zip(names, values):
        m.graph.output.append(helper.make_tensor_value_info(n, NP2TP[v.dtype], list(v.shape)))
    if not c.domain_ms:
        onnx.checker.check_model(m, full_check=True)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for n, v in c.inputs.items():
        np.save(os.path.join(d, f"input_{n}.npy"), v)
    for n, v in zip(names, values):
        np.save(os.path.join(d, f"expected_{n}.npy"), v)
    with open(os.path.join(d, "tolerance.json"), "w") as f:
        json.dump(c.tol, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    if size > 100_000:
        raise SystemExit(f"gen_qop_cases: {name} is {size} bytes, over 100 KB")
    missing = set(names) - set(c.tol)
    if missing:
        raise SystemExit(f"gen_qop_cases: {name}: no tolerance for {sorted(missing)}")
    return names, values, size


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--list", action="store_true", help="print the case names, one a line")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    ap.add_argument("--only", help="comma-separated cases (implies --force; no stamp written)")
    a = ap.parse_args()
    if a.list:
        print("\n".join(CASES))
        return
    if not a.out_dir:
        ap.error("OUT_DIR is required (or --list)")
    out = os.path.abspath(a.out_dir)
    names = list(CASES)
    if a.only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        bad = [n for n in names if n not in CASES]
        if bad:
            ap.error(f"unknown case(s) {bad}")
    stamp = stamp_of()
    stamp_path = os.path.join(out, "stamp")
    if not (a.force or a.only) and os.path.exists(stamp_path) and open(stamp_path).read() == stamp \
            and all(os.path.exists(os.path.join(out, n, "model.onnx")) for n in names):
        print(f"gen_qop_cases: {out} is up to date ({len(names)} cases)")
        return
    if not a.only:
        shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out, exist_ok=True)
    for n in names:
        outs, values, size = write_case(n, out)
        desc = ", ".join(f"{o} {v.dtype}{list(v.shape)}" for o, v in zip(outs, values))
        print(f"{n}: {desc} ({size} bytes)")
    if not a.only:
        with open(stamp_path, "w") as f:
            f.write(stamp)
    print(f"gen_qop_cases: wrote {len(names)} cases to {out}")


if __name__ == "__main__":
    main()
