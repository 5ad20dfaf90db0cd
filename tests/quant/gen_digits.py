#!/usr/bin/env python3
"""A small CNN trained on scikit-learn's bundled digits (8x8 images, 1797
samples, no download), in numpy, deterministically, for the quantization
accuracy test (test_digits.py).

  x f32[N,1,8,8] (pixels / 16) -> Conv 3x3 8ch pad 1 -> Relu
    -> Conv 3x3 16ch stride 2 pad 1 -> Relu -> Flatten -> Gemm 10 -> logits

Split: 75% train / 25% test (stratified, seed 0). Training: Adam, 40
epochs of 32-sample batches, seed 0, float64; about 96-99% on the test split.

Writes into OUT_DIR:
  digits.onnx      the trained model (opset 17, symbolic batch dim N)
  calib.npy        f32[200,1,1,8,8]: the first 200 training images, one
                   sample of the model's [1,1,8,8] input each (kiln calibrate)
  test_x.npy       f32[T,1,8,8], test_y.npy i64[T]: the held-out split
  train_acc.txt    numpy's own train/test accuracy
  stamp            this script's hash: with it unchanged, nothing is redone

Usage: gen_digits.py OUT_DIR
"""
import hashlib
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 0
EPOCHS = 40
BATCH = 32
LR = 0.005
N_CALIB = 200


def conv_fwd(x, w, b, stride):
    """3x3 convolution, pad 1: returns y [B,O,Ho,Wo] and the im2col matrix."""
    B, C, H, W = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))[:, :, ::stride, ::stride]
    Ho, Wo = win.shape[2], win.shape[3]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(B * Ho * Wo, C * 9)
    y = cols @ w.reshape(w.shape[0], -1).T + b
    return y.reshape(B, Ho, Wo, -1).transpose(0, 3, 1, 2), cols


def conv_bwd(dy, cols, x_shape, w, stride):
    B, C, H, W = x_shape
    O, Ho, Wo = dy.shape[1], dy.shape[2], dy.shape[3]
    d = dy.transpose(0, 2, 3, 1).reshape(-1, O)
    dw = (d.T @ cols).reshape(w.shape)
    db = d.sum(0)
    dcols = (d @ w.reshape(O, -1)).reshape(B, Ho, Wo, C, 3, 3)
    dxp = np.zeros((B, C, H + 2, W + 2))
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + stride * Ho:stride, j:j + stride * Wo:stride] += dcols[..., i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, 1:-1, 1:-1], dw, db


def init(rng):
    he = lambda shape, fan: rng.standard_normal(shape) * np.sqrt(2.0 / fan)  # noqa: E731
    return {"w1": he((8, 1, 3, 3), 9), "b1": np.zeros(8), "w2": he((16, 8, 3, 3), 72), "b2": np.zeros(16),
            "wf": he((10, 256), 256) * 0.5, "bf": np.zeros(10)}


def forward(p, x):
    h1, c1 = conv_fwd(x, p["w1"], p["b1"], 1)
    r1 = np.maximum(h1, 0)
    h2, c2 = conv_fwd(r1, p["w2"], p["b2"], 2)
    r2 = np.maximum(h2, 0)
    f = r2.reshape(len(x), -1)
    return f @ p["wf"].T + p["bf"], (x, h1, c1, r1, h2, c2, f)


def grads(p, x, y):
    logits, (x, h1, c1, r1, h2, c2, f) = forward(p, x)
    z = logits - logits.max(1, keepdims=True)
    prob = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    dl = prob
    dl[np.arange(len(y)), y] -= 1
    dl /= len(y)
    g = {"wf": dl.T @ f, "bf": dl.sum(0)}
    dr2 = (dl @ p["wf"]).reshape(h2.shape) * (h2 > 0)
    dr1, g["w2"], g["b2"] = conv_bwd(dr2, c2, r1.shape, p["w2"], 2)
    dh1 = dr1 * (h1 > 0)
    _, g["w1"], g["b1"] = conv_bwd(dh1, c1, x.shape, p["w1"], 1)
    return g


def train(xtr, ytr):
    rng = np.random.default_rng(SEED)
    p = init(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v_) for k, v_ in p.items()}
    t = 0
    for _ in range(EPOCHS):
        order = rng.permutation(len(xtr))
        for s in range(0, len(order), BATCH):
            idx = order[s:s + BATCH]
            g = grads(p, xtr[idx], ytr[idx])
            t += 1
            for k in p:
                m[k] = 0.9 * m[k] + 0.1 * g[k]
                v[k] = 0.999 * v[k] + 0.001 * g[k] ** 2
                p[k] -= LR * (m[k] / (1 - 0.9 ** t)) / (np.sqrt(v[k] / (1 - 0.999 ** t)) + 1e-8)
    return p


def to_onnx(p):
    f32 = lambda a: a.astype(np.float32)  # noqa: E731
    inits = [numpy_helper.from_array(f32(p[k]), k) for k in ("w1", "b1", "w2", "b2", "wf", "bf")]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Flatten", ["r2"], ["flat"], name="flat"),
        helper.make_node("Gemm", ["flat", "wf", "bf"], ["logits"], name="fc", transB=1),
    ]
    g = helper.make_graph(nodes, "digits", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="gen_digits.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    out = sys.argv[1]
    stamp = hashlib.sha256(open(__file__, "rb").read()).hexdigest()
    stamp_path = os.path.join(out, "stamp")
    names = ("digits.onnx", "calib.npy", "test_x.npy", "test_y.npy", "train_acc.txt")
    if os.path.exists(stamp_path) and open(stamp_path).read() == stamp and \
            all(os.path.exists(os.path.join(out, n)) for n in names):
        print(f"gen_digits: {out} is up to date")
        return 0
    os.makedirs(out, exist_ok=True)
    d = load_digits()
    x = (d.images / 16.0).reshape(-1, 1, 8, 8)
    xtr, xte, ytr, yte = train_test_split(x, d.target, test_size=0.25, random_state=SEED, stratify=d.target)
    t0 = time.time()
    p = train(xtr, ytr)
    acc_tr = float((forward(p, xtr)[0].argmax(1) == ytr).mean())
    acc_te = float((forward(p, xte)[0].argmax(1) == yte).mean())
    print(f"gen_digits: trained in {time.time() - t0:.1f} s: train {100 * acc_tr:.2f}%, test {100 * acc_te:.2f}% "
          f"({len(xtr)} / {len(xte)} samples)")
    onnx.save(to_onnx(p), os.path.join(out, "digits.onnx"))
    np.save(os.path.join(out, "calib.npy"), xtr[:N_CALIB].astype(np.float32).reshape(N_CALIB, 1, 1, 8, 8))
    np.save(os.path.join(out, "test_x.npy"), xte.astype(np.float32))
    np.save(os.path.join(out, "test_y.npy"), yte.astype(np.int64))
    with open(os.path.join(out, "train_acc.txt"), "w") as f:
        f.write(f"train {acc_tr:.6f}\ntest {acc_te:.6f}\n")
    with open(stamp_path, "w") as f:  # last: a run cut short redoes everything
        f.write(stamp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
