#!/usr/bin/env python3
"""Train the bundled digits CNN with plain numpy and export it to ONNX.

Data: scikit-learn's bundled 8x8 digits (1797 images, no download).
Net:  Conv3x3(1->8,pad1) Relu Conv3x3(8->16,pad1) Relu MaxPool2x2
      Flatten Gemm(256->10) Softmax.
Writes digits.onnx, heldout_images.npy (f32 [N,1,8,8]) and
heldout_labels.npy (int64 [N]) next to this script, after checking with
onnxruntime that the exported model predicts exactly what numpy predicts.

Usage: .venv/bin/python samples/digits/train.py [--out DIR] [--epochs E]
"""
import argparse
import os
import sys

import numpy as np

SEED = 1234
HELDOUT = 300


def im2col(x, k=3, pad=1):
    """[N,C,H,W] -> [N*H*W, C*k*k] for a stride-1 'same' convolution."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.empty((n, c, k, k, h, w), dtype=x.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = xp[:, :, i:i + h, j:j + w]
    return cols.transpose(0, 4, 5, 1, 2, 3).reshape(n * h * w, c * k * k)


def col2im(cols, shape, k=3, pad=1):
    """Adjoint of im2col: scatter-add column gradients back to [N,C,H,W]."""
    n, c, h, w = shape
    cols = cols.reshape(n, h, w, c, k, k).transpose(0, 3, 4, 5, 1, 2)
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=cols.dtype)
    for i in range(k):
        for j in range(k):
            xp[:, :, i:i + h, j:j + w] += cols[:, :, i, j]
    return xp[:, :, pad:pad + h, pad:pad + w]


def conv_fwd(x, w, b):
    n, _, h, wd = x.shape
    cols = im2col(x)
    y = cols @ w.reshape(w.shape[0], -1).T + b
    return y.reshape(n, h, wd, -1).transpose(0, 3, 1, 2), cols


def conv_bwd(dy, cols, x_shape, w):
    co = w.shape[0]
    dy2 = dy.transpose(0, 2, 3, 1).reshape(-1, co)
    dw = (dy2.T @ cols).reshape(w.shape)
    db = dy2.sum(0)
    dx = col2im(dy2 @ w.reshape(co, -1), x_shape)
    return dx, dw, db


def init_params(rng):
    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    return {
        "w1": he((8, 1, 3, 3), 9), "b1": np.zeros(8, np.float32),
        "w2": he((16, 8, 3, 3), 72), "b2": np.zeros(16, np.float32),
        "w3": he((10, 256), 256), "b3": np.zeros(10, np.float32),
    }


def forward(p, x, keep=False):
    a1, c1 = conv_fwd(x, p["w1"], p["b1"])
    r1 = np.maximum(a1, 0)
    a2, c2 = conv_fwd(r1, p["w2"], p["b2"])
    r2 = np.maximum(a2, 0)
    n = x.shape[0]
    blocks = r2.reshape(n, 16, 4, 2, 4, 2)
    pooled = blocks.max(axis=(3, 5))
    flat = pooled.reshape(n, 256)
    logits = flat @ p["w3"].T + p["b3"]
    if not keep:
        return logits
    return logits, dict(x=x, c1=c1, a1=a1, r1=r1, c2=c2, a2=a2, r2=r2,
                        blocks=blocks, pooled=pooled, flat=flat)


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def backward(p, cache, logits, y):
    n = logits.shape[0]
    d = softmax(logits)
    d[np.arange(n), y] -= 1
    d /= n
    g = {"w3": d.T @ cache["flat"], "b3": d.sum(0)}
    dpool = (d @ p["w3"]).reshape(n, 16, 4, 4)
    # Route the pooled gradient to the (first) max of each 2x2 window.
    blocks = cache["blocks"]
    mask = blocks == cache["pooled"][:, :, :, None, :, None]
    mask = mask & (np.cumsum(np.cumsum(mask, 3), 5) == 1)
    dr2 = (mask * dpool[:, :, :, None, :, None]).reshape(n, 16, 8, 8)
    da2 = dr2 * (cache["a2"] > 0)
    dr1, g["w2"], g["b2"] = conv_bwd(da2, cache["c2"], cache["r1"].shape, p["w2"])
    da1 = dr1 * (cache["a1"] > 0)
    _, g["w1"], g["b1"] = conv_bwd(da1, cache["c1"], cache["x"].shape, p["w1"])
    return g


def train(x, y, epochs, rng):
    p = init_params(rng)
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v) for k, v in p.items()}
    lr, b1, b2, eps, t = 2e-3, 0.9, 0.999, 1e-8, 0
    for ep in range(epochs):
        order = rng.permutation(len(x))
        for s in range(0, len(x), 32):
            idx = order[s:s + 32]
            logits, cache = forward(p, x[idx], keep=True)
            g = backward(p, cache, logits, y[idx])
            t += 1
            for k in p:
                m[k] = b1 * m[k] + (1 - b1) * g[k]
                v[k] = b2 * v[k] + (1 - b2) * g[k] ** 2
                mh = m[k] / (1 - b1 ** t)
                vh = v[k] / (1 - b2 ** t)
                p[k] = (p[k] - lr * mh / (np.sqrt(vh) + eps)).astype(np.float32)
        acc = (forward(p, x).argmax(1) == y).mean()
        print(f"epoch {ep + 1:2d}: train accuracy {acc:.4f}")
    return p


def export(p, path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(p[k], k) for k in ("w1", "b1", "w2", "b2", "w3", "b3")]
    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("Conv", ["relu1", "w2", "b2"], ["conv2"], name="conv2",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool"], name="pool",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="kiln-samples-digits")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--epochs", type=int, default=20)
    args = ap.parse_args()

    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]
    labels = digits.target.astype(np.int64)
    rng = np.random.default_rng(SEED)
    perm = rng.permutation(len(images))
    test_idx, train_idx = perm[:HELDOUT], perm[HELDOUT:]

    p = train(images[train_idx], labels[train_idx], args.epochs, rng)
    x_test, y_test = images[test_idx], labels[test_idx]
    pred = forward(p, x_test).argmax(1)
    print(f"held-out accuracy (numpy): {(pred == y_test).mean():.4f}")

    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, "digits.onnx")
    export(p, model_path)
    import onnxruntime as ort
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    probs = sess.run(None, {"image": x_test})[0]
    ref = softmax(forward(p, x_test))
    if not np.array_equal(probs.argmax(1), pred):
        sys.exit("onnxruntime predictions differ from the numpy model")
    print(f"onnxruntime agrees: max |probs diff| = {np.abs(probs - ref).max():.2e}")
    np.save(os.path.join(args.out, "heldout_images.npy"), np.ascontiguousarray(x_test))
    np.save(os.path.join(args.out, "heldout_labels.npy"), y_test)
    print(f"wrote {model_path} ({os.path.getsize(model_path)} bytes)")


if __name__ == "__main__":
    main()
