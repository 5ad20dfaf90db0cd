#!/usr/bin/env python3
"""Benchmark models of the architectures real users bring, with random weights.

Built with onnx.helper in the layout PyTorch's exporter writes (un-fused
BatchNormalization, HardSwish/HardSigmoid as ops, LSTM/GRU with the
exporter's Transpose/Reshape around them, Constant nodes for literals), on
gen_models.py's Builder and driver (same files, same caching, same
onnxruntime references):

  dbnet        DBNet-style text detector: a light strided CNN backbone down
               to 1/32, an FPN (1x1 laterals, nearest x2 Resize top-down,
               3x3 smoothing, concatenation at 1/4), a head of Conv + BN +
               Relu and two ConvTranspose k2 s2 (+ BN + Relu) up to full
               size, Sigmoid; input f32[N,3,640,640]
  crnn         CRNN line recognizer: a VGG-style CNN collapsing the height
               (32 -> 1, MaxPool (2,1) late), then two bidirectional LSTMs
               (hidden 128) and a per-step classifier (97 classes); input
               f32[N,1,32,320], output f32[80,N,97]
  yolov8n      YOLOv8n-style detector: SiLU convs, C2f blocks (Split,
               bottlenecks, Concat), SPPF, a PAN neck with nearest Resize,
               decoupled heads, the DFL box decoding (Softmax over 16 bins
               and a 1x1 Conv), anchor points and strides as constants;
               input f32[N,3,640,640], output f32[N,84,8400]
  mobilenetv3  MobileNetV3-Large (torchvision layout): HardSwish,
               squeeze-excitation (GlobalAveragePool, 1x1 Convs, Relu,
               HardSigmoid, Mul); input f32[N,3,224,224]
  audio_rnn    a streaming audio model: features f32[100,N,64] and state
               inputs; an LSTM (hidden 128), then a GRU (hidden 128), a
               classifier per frame; outputs the logits and both states

With --dynamic, each model is written as torch.onnx.export writes it with
dynamic_axes (OUT_DIR/NAME_dyn.onnx, no inputs or references): dbnet and
yolov8n with dynamic height and width (multiples of 32; YOLOv8's anchor
points and strides computed in the graph from Shape with Range, as the
exporter does), crnn with a dynamic width (multiple of 4: T = width / 4),
mobilenetv3 with a dynamic batch, audio_rnn with a dynamic number of
frames T. Reshape targets are 0/-1, never a size.

Usage: gen_real_models.py --model NAME OUT_DIR [--batch N] [--force] [--dynamic]
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_models as gm  # noqa: E402
from gen_models import conv_bn  # noqa: E402

f32 = np.float32
DYNAMIC = False  # --dynamic: the exporter's dynamic_axes form (see above)


def i64(*v):
    return np.array(v, np.int64)


def conv_bn_act(b, x, cin, cout, k, stride=1, groups=1, act="Relu", base="conv"):
    y = conv_bn(b, x, cin, cout, k, stride=stride, groups=groups, base=base)
    if act == "SiLU":  # the exporter writes x * sigmoid(x)
        return b.node("Mul", [y, b.node("Sigmoid", [y], base + ".sig")], base + ".silu")
    return b.node(act, [y], base + "." + act.lower()) if act else y


def conv_bias(b, x, cin, cout, k, base, scale=1.0):
    w = b.rng.standard_normal((cout, cin, k, k)) * np.sqrt(1.0 / (cin * k * k)) * scale
    bias = 0.01 * b.rng.standard_normal(cout)
    return b.node("Conv", [x, b.init(base + ".weight", w.astype(f32)), b.init(base + ".bias", bias.astype(f32))],
                  base, kernel_shape=[k, k], pads=[k // 2] * 4, strides=[1, 1])


def upsample2(b, x, base):
    return b.node("Resize", [x, "", b.const(base + ".scales", np.array([1, 1, 2, 2], f32))], base,
                  mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")


def image(b, c, h, w, name="input"):
    return {name: b.rng.standard_normal((b.batch, c, h, w)).astype(f32)}


# ------------------------------------------------------------------ DBNet --

def build_dbnet(b):
    x = "input"
    feats, cin = [], 3
    for i, (c, n) in enumerate([(16, 1), (24, 2), (48, 2), (96, 2), (160, 1)]):
        x = conv_bn_act(b, x, cin, c, 3, stride=2, base=f"backbone.s{i}.down")
        for j in range(n):
            x = conv_bn_act(b, x, c, c, 3, base=f"backbone.s{i}.c{j}")
        cin = c
        if i >= 1:
            feats.append((x, c))  # 1/4, 1/8, 1/16, 1/32
    inner = 64
    lat = [conv_bias(b, f, c, inner, 1, f"neck.in{i}") for i, (f, c) in enumerate(feats)]
    td = [None] * 4
    td[3] = lat[3]
    for i in (2, 1, 0):
        td[i] = b.node("Add", [lat[i], upsample2(b, td[i + 1], f"neck.up{i}")], f"neck.add{i}")
    outs = []
    for i in range(4):
        p = conv_bias(b, td[i], inner, inner // 4, 3, f"neck.out{i}")
        for k in range(i):
            p = upsample2(b, p, f"neck.out{i}.up{k}")
        outs.append(p)
    fuse = b.node("Concat", outs, "neck.concat", axis=1)
    h = conv_bn_act(b, fuse, inner, inner // 4, 3, base="head.conv1")
    for k in range(2):
        cout = inner // 4 if k == 0 else 1
        w = b.rng.standard_normal((inner // 4, cout, 2, 2)) * np.sqrt(1.0 / (inner // 4))
        bias = 0.01 * b.rng.standard_normal(cout)
        h = b.node("ConvTranspose", [h, b.init(f"head.up{k}.weight", w.astype(f32)),
                                     b.init(f"head.up{k}.bias", bias.astype(f32))], f"head.up{k}",
                   kernel_shape=[2, 2], strides=[2, 2])
        if k == 0:
            g = (1 + 0.1 * b.rng.standard_normal(cout)).astype(f32)
            h = b.node("BatchNormalization", [h, b.init("head.bn2.weight", g),
                                              b.init("head.bn2.bias", (0.1 * b.rng.standard_normal(cout)).astype(f32)),
                                              b.init("head.bn2.running_mean", np.zeros(cout, f32)),
                                              b.init("head.bn2.running_var", np.ones(cout, f32))], "head.bn2")
            h = b.node("Relu", [h], "head.relu2")
    b.node("Sigmoid", [h], "head.sigmoid", out="maps")
    n = b.batch
    hw = ["height", "width"] if DYNAMIC else [640, 640]
    m = b.model("dbnet", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [n, 3, *hw])],
                [helper.make_tensor_value_info("maps", TensorProto.FLOAT, [n, 1, *hw])])
    return m, image(b, 3, 640, 640)


# ------------------------------------------------------------------- CRNN --

def lstm(b, x, t, n, cin, hid, base, bidir=True):
    """nn.LSTM as exported: LSTM, then Transpose+Reshape of Y to [T,N,dirs*hid]."""
    d = 2 if bidir else 1
    s = 1.0 / np.sqrt(hid)
    w = b.init(base + ".W", (b.rng.uniform(-s, s, (d, 4 * hid, cin))).astype(f32))
    r = b.init(base + ".R", (b.rng.uniform(-s, s, (d, 4 * hid, hid))).astype(f32))
    bias = b.init(base + ".B", (b.rng.uniform(-s, s, (d, 8 * hid))).astype(f32))
    y = b.node("LSTM", [x, w, r, bias], base, n_out=3, hidden_size=hid,
               direction="bidirectional" if bidir else "forward")[0]
    y = b.node("Transpose", [y], base + ".transpose", perm=[0, 2, 1, 3])
    shape = i64(0, 0, -1) if DYNAMIC else i64(t, n, d * hid)
    return b.node("Reshape", [y, b.const(base + ".shape", shape)], base + ".reshape")


def build_crnn(b):
    x, cin = "input", 1
    plan = [(64, (2, 2)), (128, (2, 2)), (256, None), (256, (2, 1)), (512, None), (512, (2, 1)), (512, (2, 1))]
    for i, (c, pool) in enumerate(plan):
        x = conv_bn_act(b, x, cin, c, 3, base=f"cnn.conv{i}")
        if pool:
            x = b.node("MaxPool", [x], f"cnn.pool{i}", kernel_shape=list(pool), strides=list(pool))
        cin = c
    # [N,512,1,80] -> [80,N,512]
    x = b.node("Squeeze", [x, b.const("cnn.squeeze_axes", i64(2))], "cnn.squeeze")
    x = b.node("Transpose", [x], "rnn.in", perm=[2, 0, 1])
    t, n = 80, b.batch
    x = lstm(b, x, t, n, 512, 128, "rnn.lstm0")
    x = lstm(b, x, t, n, 256, 128, "rnn.lstm1")
    w = (b.rng.standard_normal((256, 97)) * np.sqrt(1.0 / 256)).astype(f32)
    y = b.node("MatMul", [x, b.init("fc.weight", w)], "fc.matmul")
    b.node("Add", [y, b.init("fc.bias", (0.01 * b.rng.standard_normal(97)).astype(f32))], "fc", out="logits")
    m = b.model("crnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                       [n, 1, 32, "width" if DYNAMIC else 320])],
                [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["steps" if DYNAMIC else t, n, 97])])
    return m, image(b, 1, 32, 320)


# ---------------------------------------------------------------- YOLOv8n --

def c2f(b, x, cin, cout, n, shortcut, base):
    c = cout // 2
    y = conv_bn_act(b, x, cin, 2 * c, 1, act="SiLU", base=base + ".cv1")
    parts = b.node("Split", [y, b.const(base + ".split", i64(c, c))], base + ".split", n_out=2, axis=1)
    ys = list(parts)
    for i in range(n):
        h = conv_bn_act(b, ys[-1], c, c, 3, act="SiLU", base=f"{base}.m{i}.cv1")
        h = conv_bn_act(b, h, c, c, 3, act="SiLU", base=f"{base}.m{i}.cv2")
        if shortcut:
            h = b.node("Add", [ys[-1], h], f"{base}.m{i}.add")
        ys.append(h)
    cat = b.node("Concat", ys, base + ".concat", axis=1)
    return conv_bn_act(b, cat, (2 + n) * c, cout, 1, act="SiLU", base=base + ".cv2")


def sppf(b, x, cin, cout, base):
    c = cin // 2
    y = conv_bn_act(b, x, cin, c, 1, act="SiLU", base=base + ".cv1")
    p1 = b.node("MaxPool", [y], base + ".m1", kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    p2 = b.node("MaxPool", [p1], base + ".m2", kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    p3 = b.node("MaxPool", [p2], base + ".m3", kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    cat = b.node("Concat", [y, p1, p2, p3], base + ".concat", axis=1)
    return conv_bn_act(b, cat, 4 * c, cout, 1, act="SiLU", base=base + ".cv2")


def build_yolov8n(b):
    x = conv_bn_act(b, "input", 3, 16, 3, stride=2, act="SiLU", base="model.0")
    x = conv_bn_act(b, x, 16, 32, 3, stride=2, act="SiLU", base="model.1")
    x = c2f(b, x, 32, 32, 1, True, "model.2")
    x = conv_bn_act(b, x, 32, 64, 3, stride=2, act="SiLU", base="model.3")
    p3 = c2f(b, x, 64, 64, 2, True, "model.4")
    x = conv_bn_act(b, p3, 64, 128, 3, stride=2, act="SiLU", base="model.5")
    p4 = c2f(b, x, 128, 128, 2, True, "model.6")
    x = conv_bn_act(b, p4, 128, 256, 3, stride=2, act="SiLU", base="model.7")
    x = c2f(b, x, 256, 256, 1, True, "model.8")
    p5 = sppf(b, x, 256, 256, "model.9")
    x = b.node("Concat", [upsample2(b, p5, "model.10"), p4], "model.11", axis=1)
    n4 = c2f(b, x, 384, 128, 1, False, "model.12")
    x = b.node("Concat", [upsample2(b, n4, "model.13"), p3], "model.14", axis=1)
    o3 = c2f(b, x, 192, 64, 1, False, "model.15")
    x = conv_bn_act(b, o3, 64, 64, 3, stride=2, act="SiLU", base="model.16")
    o4 = c2f(b, b.node("Concat", [x, n4], "model.17", axis=1), 192, 128, 1, False, "model.18")
    x = conv_bn_act(b, o4, 128, 128, 3, stride=2, act="SiLU", base="model.19")
    o5 = c2f(b, b.node("Concat", [x, p5], "model.20", axis=1), 384, 256, 1, False, "model.21")
    n, nc, reg = b.batch, 80, 16
    heads = []
    for i, (o, c) in enumerate([(o3, 64), (o4, 128), (o5, 256)]):
        bx = conv_bn_act(b, o, c, 64, 3, act="SiLU", base=f"model.22.cv2.{i}.0")
        bx = conv_bn_act(b, bx, 64, 64, 3, act="SiLU", base=f"model.22.cv2.{i}.1")
        bx = conv_bias(b, bx, 64, 4 * reg, 1, f"model.22.cv2.{i}.2")
        cl = conv_bn_act(b, o, c, 80, 3, act="SiLU", base=f"model.22.cv3.{i}.0")
        cl = conv_bn_act(b, cl, 80, 80, 3, act="SiLU", base=f"model.22.cv3.{i}.1")
        cl = conv_bias(b, cl, 80, nc, 1, f"model.22.cv3.{i}.2")
        h = b.node("Concat", [bx, cl], f"model.22.cat{i}", axis=1)
        heads.append(b.node("Reshape", [h, b.const(f"model.22.view{i}", i64(0 if DYNAMIC else n, 4 * reg + nc, -1))],
                            f"model.22.view{i}"))
    x = b.node("Concat", heads, "model.22.cat", axis=2)  # [N,144,8400]
    box, cls = b.node("Split", [x, b.const("model.22.split", i64(4 * reg, nc))], "model.22.split", n_out=2, axis=1)
    # DFL: softmax over the 16 bins of each side, then their expectation (a 1x1 Conv of arange)
    d = b.node("Reshape", [box, b.const("dfl.view", i64(0, 4, reg, -1) if DYNAMIC else i64(n, 4, reg, 8400))],
               "dfl.view")
    d = b.node("Softmax", [b.node("Transpose", [d], "dfl.transpose", perm=[0, 2, 1, 3])], "dfl.softmax", axis=1)
    d = b.node("Conv", [d, b.init("dfl.conv.weight", np.arange(reg, dtype=f32).reshape(1, reg, 1, 1))], "dfl.conv",
               kernel_shape=[1, 1])
    d = b.node("Reshape", [d, b.const("dfl.out", i64(0, 4, -1) if DYNAMIC else i64(n, 4, 8400))], "dfl.reshape")
    lt, rb = b.node("Split", [d, b.const("dist.split", i64(2, 2))], "dist.split", n_out=2, axis=1)
    if DYNAMIC:
        anc, strd = dyn_anchors(b, [o3, o4, o5])
    else:
        anchors, strides = [], []
        for s in (8, 16, 32):
            g = 640 // s
            sx, sy = np.meshgrid(np.arange(g, dtype=f32) + 0.5, np.arange(g, dtype=f32) + 0.5)
            anchors.append(np.stack([sx.ravel(), sy.ravel()]))
            strides.append(np.full((1, g * g), s, f32))
        anc = b.init("anchors", np.concatenate(anchors, axis=1)[None])  # [1,2,8400]
        strd = b.init("strides", np.concatenate(strides, axis=1)[None])
    x1y1 = b.node("Sub", [anc, lt], "dist.x1y1")
    x2y2 = b.node("Add", [anc, rb], "dist.x2y2")
    cxy = b.node("Div", [b.node("Add", [x1y1, x2y2], "dist.sum"), b.const("two", np.array(2, f32))], "dist.cxy")
    wh = b.node("Sub", [x2y2, x1y1], "dist.wh")
    dbox = b.node("Mul", [b.node("Concat", [cxy, wh], "dist.cat", axis=1), strd], "dist.scale")
    b.node("Concat", [dbox, b.node("Sigmoid", [cls], "cls.sigmoid")], "output", out="output0", axis=1)
    hw = ["height", "width"] if DYNAMIC else [640, 640]
    m = b.model("yolov8n", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [n, 3, *hw])],
                [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [n, 84, "anchors" if DYNAMIC else 8400])])
    return m, image(b, 3, 640, 640)


def dyn_anchors(b, feats):
    """make_anchors as torch.onnx.export writes it: each level's grid from
    Shape of its feature map, Range, and broadcasting; [1,2,A] and [1,1,A]."""
    anchors, strides = [], []
    for i, (f, s) in enumerate(zip(feats, (8, 16, 32))):
        shp = b.node("Shape", [f], f"anchors.{i}.shape")
        hw = []
        for k in (2, 3):
            dim = b.node("Gather", [shp, b.const(f"anchors.{i}.idx{k}", np.array(k, np.int64))], f"anchors.{i}.dim{k}",
                         axis=0)
            r = b.node("Range", [b.const(f"anchors.{i}.zero{k}", np.array(0, np.int64)), dim,
                                 b.const(f"anchors.{i}.one{k}", np.array(1, np.int64))], f"anchors.{i}.range{k}")
            r = b.node("Cast", [r], f"anchors.{i}.cast{k}", to=TensorProto.FLOAT)
            hw.append(b.node("Add", [r, b.const(f"anchors.{i}.half{k}", np.array(0.5, f32))], f"anchors.{i}.off{k}"))
        sy, sx = hw
        sy = b.node("Unsqueeze", [sy, b.const(f"anchors.{i}.ax1", i64(1))], f"anchors.{i}.sy")  # [h,1]
        sx = b.node("Unsqueeze", [sx, b.const(f"anchors.{i}.ax0", i64(0))], f"anchors.{i}.sx")  # [1,w]
        gx = b.node("Add", [sx, b.node("Mul", [sy, b.const(f"anchors.{i}.zy", np.array(0, f32))], f"anchors.{i}.zy")],
                    f"anchors.{i}.gx")  # [h,w]
        gy = b.node("Add", [sy, b.node("Mul", [sx, b.const(f"anchors.{i}.zx", np.array(0, f32))], f"anchors.{i}.zx")],
                    f"anchors.{i}.gy")
        flat = b.const(f"anchors.{i}.flat", i64(1, -1))
        gx = b.node("Reshape", [gx, flat], f"anchors.{i}.fx")
        gy = b.node("Reshape", [gy, flat], f"anchors.{i}.fy")
        anchors.append(b.node("Concat", [gx, gy], f"anchors.{i}.xy", axis=0))  # [2,h*w]
        strides.append(b.node("Add", [b.node("Mul", [gx, b.const(f"anchors.{i}.z", np.array(0, f32))],
                                             f"anchors.{i}.zs"), b.const(f"anchors.{i}.s", np.array(s, f32))],
                              f"anchors.{i}.stride"))  # [1,h*w]
    anc = b.node("Concat", anchors, "anchors.cat", axis=1)
    anc = b.node("Unsqueeze", [anc, b.const("anchors.ax", i64(0))], "anchors")
    strd = b.node("Concat", strides, "strides.cat", axis=1)
    strd = b.node("Unsqueeze", [strd, b.const("strides.ax", i64(0))], "strides")
    return anc, strd


# ------------------------------------------------------------ MobileNetV3 --

def squeeze_excite(b, x, c, base):
    sq = max(8, (c // 4 + 4) // 8 * 8)
    s = b.node("GlobalAveragePool", [x], base + ".avgpool")
    s = b.node("Relu", [conv_bias(b, s, c, sq, 1, base + ".fc1")], base + ".relu")
    s = b.node("HardSigmoid", [conv_bias(b, s, sq, c, 1, base + ".fc2")], base + ".hsig", alpha=1 / 6, beta=0.5)
    return b.node("Mul", [s, x], base + ".scale")


def build_mobilenetv3(b):
    # kernel, expanded, out, SE, activation, stride (torchvision mobilenet_v3_large)
    cfg = [(3, 16, 16, 0, "RE", 1), (3, 64, 24, 0, "RE", 2), (3, 72, 24, 0, "RE", 1), (5, 72, 40, 1, "RE", 2),
           (5, 120, 40, 1, "RE", 1), (5, 120, 40, 1, "RE", 1), (3, 240, 80, 0, "HS", 2), (3, 200, 80, 0, "HS", 1),
           (3, 184, 80, 0, "HS", 1), (3, 184, 80, 0, "HS", 1), (3, 480, 112, 1, "HS", 1), (3, 672, 112, 1, "HS", 1),
           (5, 672, 160, 1, "HS", 2), (5, 960, 160, 1, "HS", 1), (5, 960, 160, 1, "HS", 1)]
    x = conv_bn_act(b, "input", 3, 16, 3, stride=2, act="HardSwish", base="features.0")
    cin = 16
    for i, (k, exp, out, se, act, s) in enumerate(cfg):
        a = "Relu" if act == "RE" else "HardSwish"
        base = f"features.{i + 1}"
        h = x if exp == cin else conv_bn_act(b, x, cin, exp, 1, act=a, base=base + ".expand")
        h = conv_bn_act(b, h, exp, exp, k, stride=s, groups=exp, act=a, base=base + ".dw")
        if se:
            h = squeeze_excite(b, h, exp, base + ".se")
        h = conv_bn_act(b, h, exp, out, 1, act=None, base=base + ".project")
        x = b.node("Add", [x, h], base + ".add") if s == 1 and cin == out else h
        cin = out
    x = conv_bn_act(b, x, 160, 960, 1, act="HardSwish", base="features.16")
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], "avgpool")], "flatten", axis=1)
    w1 = (b.rng.standard_normal((1280, 960)) * np.sqrt(2.0 / 960)).astype(f32)
    x = b.node("Gemm", [x, b.init("classifier.0.weight", w1), b.init("classifier.0.bias", np.zeros(1280, f32))],
               "classifier.0", transB=1)
    x = b.node("HardSwish", [x], "classifier.1")
    w2 = (b.rng.standard_normal((1000, 1280)) * np.sqrt(1.0 / 1280)).astype(f32)
    b.node("Gemm", [x, b.init("classifier.3.weight", w2), b.init("classifier.3.bias", np.zeros(1000, f32))],
           "classifier.3", out="output", transB=1)
    return b.model("mobilenetv3", *gm.image_io("batch" if DYNAMIC else b.batch)), gm.image_input(b)


# -------------------------------------------------------------- audio RNN --

def build_audio_rnn(b):
    t, n, feat, hid = "frames" if DYNAMIC else 100, b.batch, 64, 128
    s = 1.0 / np.sqrt(hid)

    def u(*shape):
        return b.rng.uniform(-s, s, shape).astype(f32)
    y, h1, c1 = b.node("LSTM", ["features", b.init("lstm.W", u(1, 4 * hid, feat)), b.init("lstm.R", u(1, 4 * hid, hid)),
                                b.init("lstm.B", u(1, 8 * hid)), "", "h0", "c0"], "lstm", n_out=3, hidden_size=hid)
    b.nodes[-1].output[1:] = ["lstm_h", "lstm_c"]
    x = b.node("Squeeze", [y, b.const("lstm.squeeze", i64(1))], "lstm.squeeze")  # [T,N,hid]
    y2, h2 = b.node("GRU", [x, b.init("gru.W", u(1, 3 * hid, hid)), b.init("gru.R", u(1, 3 * hid, hid)),
                            b.init("gru.B", u(1, 6 * hid)), "", "g0"], "gru", n_out=2, hidden_size=hid,
                    linear_before_reset=1)
    b.nodes[-1].output[1:] = ["gru_h"]
    x = b.node("Squeeze", [y2, b.const("gru.squeeze", i64(1))], "gru.squeeze")
    w = (b.rng.standard_normal((hid, 12)) * np.sqrt(1.0 / hid)).astype(f32)
    b.node("Add", [b.node("MatMul", [x, b.init("fc.weight", w)], "fc.matmul"),
                   b.init("fc.bias", np.zeros(12, f32))], "fc", out="logits")
    vi = helper.make_tensor_value_info
    m = b.model("audio_rnn", [vi("features", TensorProto.FLOAT, [t, n, feat]), vi("h0", TensorProto.FLOAT, [1, n, hid]),
                              vi("c0", TensorProto.FLOAT, [1, n, hid]), vi("g0", TensorProto.FLOAT, [1, n, hid])],
                [vi("logits", TensorProto.FLOAT, [t, n, 12]), vi("lstm_h", TensorProto.FLOAT, [1, n, hid]),
                 vi("lstm_c", TensorProto.FLOAT, [1, n, hid]), vi("gru_h", TensorProto.FLOAT, [1, n, hid])])
    feeds = {"features": b.rng.standard_normal((100, n, feat)).astype(f32)}
    for k in ("h0", "c0", "g0"):
        feeds[k] = (0.1 * b.rng.standard_normal((1, n, hid))).astype(f32)
    return m, feeds


REAL = {"dbnet": build_dbnet, "crnn": build_crnn, "yolov8n": build_yolov8n, "mobilenetv3": build_mobilenetv3,
        "audio_rnn": build_audio_rnn}

def write_dynamic(name, out_dir):
    """OUT_DIR/NAME_dyn.onnx in the dynamic_axes form; returns its path."""
    global DYNAMIC
    import onnx
    DYNAMIC = True
    try:
        b = gm.Builder({"dbnet": 640, "crnn": 32, "yolov8n": 8, "mobilenetv3": 3, "audio_rnn": 100}[name])
        m, _ = REAL[name](b)
    finally:
        DYNAMIC = False
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name + "_dyn.onnx")
    onnx.save(m, path)
    return path


if __name__ == "__main__":
    if "--dynamic" in sys.argv:
        args = [a for a in sys.argv[1:] if a != "--dynamic"]
        i = args.index("--model")
        print(write_dynamic(args[i + 1], [a for k, a in enumerate(args) if k not in (i, i + 1)][0]))
        sys.exit(0)
    gm.BUILDERS.update(REAL)
    gm.SEED.update({"dbnet": 640, "crnn": 32, "yolov8n": 8, "mobilenetv3": 3, "audio_rnn": 100})
    gm.STAMP_FILES.append(os.path.abspath(__file__))
    gm.main()
