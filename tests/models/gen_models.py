#!/usr/bin/env python3
"""Generate the model-test networks with random weights and onnxruntime references.

Builds real architectures with onnx.helper (no torch, nothing downloaded),
laid out the way PyTorch's exporter writes them (un-fused BatchNormalization,
Clip with min/max inputs, decomposed Gelu, ...):

  resnet50     ResNet-50 v1.5 (torchvision layout), input f32[N,3,224,224]
  mobilenetv2  MobileNetV2 (torchvision layout),    input f32[N,3,224,224]
  bert         BERT-base encoder (12 layers, hidden 768, 12 heads, seq 128),
               inputs input_ids/attention_mask i64[N,128]; sequence r of the batch
               has max(8, 100 - 11 r) real tokens, the rest padding
  bert-tiny    the same graph with 2 layers, hidden 64, 4 heads, seq 32
  vit          ViT-Tiny/16 (DeiT-Tiny, timm layout: 12 layers, dim 192,
               3 heads, 197 tokens), input f32[N,3,224,224]

N is the batch, 1 unless --batch says otherwise; it is static (written into
the inputs and the Reshape/Expand shapes, as an export with fixed shapes
does), so kiln and onnxruntime see the same fully static graph.

Weights are random with a fixed seed and scaled so activations stay O(1).
Writes into OUT_DIR: model.onnx, input_<name>.npy for every graph input and
expected_<name>.npy (onnxruntime's output) for every graph output. It does
nothing if OUT_DIR already holds them for the same version of this script.

Usage: gen_models.py --model {resnet50,mobilenetv2,bert,vit,bert-tiny} OUT_DIR [--batch N] [--force]
"""
import argparse
import hashlib
import os
import shutil
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
SEED = {"resnet50": 50, "mobilenetv2": 2, "bert": 768, "vit": 16, "bert-tiny": 64}


class Builder:
    """Accumulates nodes and initializers; names values uniquely."""

    def __init__(self, seed, batch=1):
        self.rng = np.random.default_rng(seed)
        self.batch = batch
        self.nodes, self.inits, self.count = [], [], {}

    def name(self, base):
        n = self.count.get(base, 0)
        self.count[base] = n + 1
        return f"{base}_{n}" if n else base

    def init(self, base, array):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, base=None, n_out=1, out=None, **attrs):
        """Appends a node; its output is named after the node unless `out`."""
        name = self.name(base or op.lower())
        outs = [name] if n_out == 1 else [f"{name}:{i}" for i in range(n_out)]
        if out is not None:
            outs[0] = out
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, base, array):
        """A Constant node, as PyTorch's exporter emits for literals."""
        value = numpy_helper.from_array(np.asarray(array), self.name(base + "_value"))
        return self.node("Constant", [], base, value=value)

    def model(self, graph_name, inputs, outputs):
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="kiln-tests-models")
        m.ir_version = 8
        return m


# ---------------------------------------------------------------- CNN parts --

def conv_bn(b, x, cin, cout, k, stride=1, groups=1, base="conv", gamma_scale=1.0):
    """Conv (no bias) + BatchNormalization with statistics near identity.

    He init keeps the second moment of activations constant through
    Conv+Relu; BN mean/var/gamma/beta get small perturbations so the
    normalization is not a no-op but does not blow activations up."""
    fan_in = cin // groups * k * k
    w = b.rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / fan_in)
    y = b.node("Conv", [x, b.init(base + ".weight", w.astype(np.float32))], base,
               kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
               group=groups, dilations=[1, 1])
    f32 = np.float32
    gamma = (gamma_scale * (1.0 + 0.1 * b.rng.standard_normal(cout))).astype(f32)
    beta = (0.1 * b.rng.standard_normal(cout)).astype(f32)
    mean = (0.1 * b.rng.standard_normal(cout)).astype(f32)
    var = (1.0 + 0.2 * b.rng.random(cout)).astype(f32)
    bn = base.replace("conv", "bn")
    return b.node("BatchNormalization",
                  [y, b.init(bn + ".weight", gamma), b.init(bn + ".bias", beta),
                   b.init(bn + ".running_mean", mean), b.init(bn + ".running_var", var)],
                  bn, epsilon=1e-5, momentum=0.9)


def classifier(b, x, cin, classes=1000):
    """GlobalAveragePool + Flatten + Gemm(transB), as torchvision exports."""
    p = b.node("GlobalAveragePool", [x], "avgpool")
    f = b.node("Flatten", [p], "flatten", axis=1)
    w = b.rng.standard_normal((classes, cin)) * np.sqrt(1.0 / cin)
    bias = 0.01 * b.rng.standard_normal(classes)
    return b.node("Gemm", [f, b.init("fc.weight", w.astype(np.float32)),
                           b.init("fc.bias", bias.astype(np.float32))],
                  "fc", out="output", alpha=1.0, beta=1.0, transB=1)


def image_io(batch):
    return ([helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 1000])])


def image_input(b):
    # Roughly what an ImageNet-normalized photo looks like: N(0,1) per pixel.
    return {"input": b.rng.standard_normal((b.batch, 3, 224, 224)).astype(np.float32)}


def build_resnet50(b):
    x = conv_bn(b, "input", 3, 64, 7, stride=2, base="conv1")
    x = b.node("Relu", [x], "relu")
    x = b.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2],
               pads=[1, 1, 1, 1], ceil_mode=0)
    cin = 64
    for li, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2),
                                                 (256, 6, 2), (512, 3, 2)]):
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            pre = f"layer{li + 1}.{bi}."
            out = width * 4
            y = b.node("Relu", [conv_bn(b, x, cin, width, 1, base=pre + "conv1")], pre + "relu")
            # v1.5: the stride sits on the 3x3 conv, not the first 1x1.
            y = b.node("Relu", [conv_bn(b, y, width, width, 3, s, base=pre + "conv2")], pre + "relu")
            # A small last-BN gamma keeps the residual sum from doubling the
            # variance at every block (what zero_init_residual does, softer).
            y = conv_bn(b, y, width, out, 1, base=pre + "conv3", gamma_scale=0.3)
            short = x
            if bi == 0:
                short = conv_bn(b, x, cin, out, 1, s, base=pre + "downsample.conv")
            x = b.node("Relu", [b.node("Add", [y, short], pre + "add")], pre + "relu")
            cin = out
    classifier(b, x, 2048)
    return b.model("resnet50", *image_io(b.batch)), image_input(b)


def build_mobilenetv2(b):
    lo = b.init("clip_min", np.array(0.0, np.float32))
    hi = b.init("clip_max", np.array(6.0, np.float32))

    def relu6(x, base):
        return b.node("Clip", [x, lo, hi], base)

    x = relu6(conv_bn(b, "input", 3, 32, 3, stride=2, base="features.0.conv"), "features.0.clip")
    cin, idx = 32, 1
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    for t, c, n, s in settings:
        for i in range(n):
            stride = s if i == 0 else 1
            pre = f"features.{idx}."
            hidden = cin * t
            y = x
            if t != 1:
                y = relu6(conv_bn(b, y, cin, hidden, 1, base=pre + "conv.0"), pre + "clip")
            y = relu6(conv_bn(b, y, hidden, hidden, 3, stride, groups=hidden,
                              base=pre + "conv.1"), pre + "clip")
            residual = stride == 1 and cin == c
            # Linear bottleneck: no activation after the projection.
            y = conv_bn(b, y, hidden, c, 1, base=pre + "conv.2",
                        gamma_scale=0.5 if residual else 1.0)
            x = b.node("Add", [x, y], pre + "add") if residual else y
            cin, idx = c, idx + 1
    x = relu6(conv_bn(b, x, cin, 1280, 1, base=f"features.{idx}.conv"), f"features.{idx}.clip")
    classifier(b, x, 1280)
    return b.model("mobilenetv2", *image_io(b.batch)), image_input(b)


# --------------------------------------------------------------------- BERT --

BERT = dict(vocab=30522, hidden=768, heads=12, layers=12, ffn=3072, seq=128,
            max_pos=512, types=2, std=0.02)
# The same graph, small enough for tests (kiln compile --pack-tokens).
BERT_TINY = dict(vocab=1000, hidden=64, heads=4, layers=2, ffn=128, seq=32,
                 max_pos=64, types=2, std=0.02)


def linear(b, x, cin, cout, base):
    """nn.Linear on a 3-D input: MatMul by W^T (stored transposed) + Add bias."""
    w = (b.rng.standard_normal((cin, cout)) / np.sqrt(cin)).astype(np.float32)
    bias = (0.02 * b.rng.standard_normal(cout)).astype(np.float32)
    y = b.node("MatMul", [x, b.init(base + ".weight", w)], base + ".matmul")
    return b.node("Add", [b.init(base + ".bias", bias), y], base + ".add")


def layer_norm(b, x, n, base, out=None, eps=1e-12):
    g = (1.0 + 0.05 * b.rng.standard_normal(n)).astype(np.float32)
    beta = (0.05 * b.rng.standard_normal(n)).astype(np.float32)
    return b.node("LayerNormalization", [x, b.init(base + ".weight", g),
                                         b.init(base + ".bias", beta)],
                  base, out=out, axis=-1, epsilon=eps)


def gelu(b, x, base, const_prefix):
    """Gelu as exported: x * 0.5 * (1 + erf(x / sqrt(2))). Its literals are
    Constant nodes named const_prefix + sqrt2/one/half."""
    c = const_prefix
    g = b.node("Div", [x, b.const(c + "sqrt2", np.array(np.sqrt(2.0), np.float32))], base + ".div")
    g = b.node("Erf", [g], base + ".erf")
    g = b.node("Add", [g, b.const(c + "one", np.array(1.0, np.float32))], base + ".add")
    g = b.node("Mul", [x, g], base + ".mul")
    return b.node("Mul", [g, b.const(c + "half", np.array(0.5, np.float32))], base + ".mul_half")


def bert_layer(b, x, mask, i, c, last=False):
    h, nh, seq = c["hidden"], c["heads"], c["seq"]
    d = h // nh
    pre = f"encoder.layer.{i}."
    heads_shape = b.const(pre + "shape_heads", np.array([b.batch, seq, nh, d], np.int64))

    def split_heads(t, perm, base):
        r = b.node("Reshape", [t, heads_shape], base + ".reshape")
        return b.node("Transpose", [r], base + ".transpose", perm=perm)

    q = split_heads(linear(b, x, h, h, pre + "attention.self.query"), [0, 2, 1, 3], pre + "q")
    # key.transpose(-1, -2) after the head permute: the exporter folds both
    # into one Transpose.
    k = split_heads(linear(b, x, h, h, pre + "attention.self.key"), [0, 2, 3, 1], pre + "k")
    v = split_heads(linear(b, x, h, h, pre + "attention.self.value"), [0, 2, 1, 3], pre + "v")
    scores = b.node("MatMul", [q, k], pre + "scores")
    scores = b.node("Div", [scores, b.const(pre + "sqrt_d", np.array(np.sqrt(d), np.float32))],
                    pre + "scale")
    scores = b.node("Add", [scores, mask], pre + "mask_add")
    probs = b.node("Softmax", [scores], pre + "softmax", axis=-1)
    ctx = b.node("MatMul", [probs, v], pre + "context")
    ctx = b.node("Transpose", [ctx], pre + "context.transpose", perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, b.const(pre + "shape_hidden", np.array([b.batch, seq, h], np.int64))],
                 pre + "context.reshape")
    att = linear(b, ctx, h, h, pre + "attention.output.dense")
    att = b.node("Add", [att, x], pre + "attention.residual")
    att = layer_norm(b, att, h, pre + "attention.output.LayerNorm")

    ff = linear(b, att, h, c["ffn"], pre + "intermediate.dense")
    g = gelu(b, ff, pre + "gelu", pre)
    out = linear(b, g, c["ffn"], h, pre + "output.dense")
    out = b.node("Add", [out, att], pre + "output.residual")
    return layer_norm(b, out, h, pre + "output.LayerNorm",
                      out="last_hidden_state" if last else None)


def build_bert(b, c=BERT):
    h, seq, std = c["hidden"], c["seq"], c["std"]
    f32 = np.float32
    word = b.init("embeddings.word_embeddings.weight",
                  (std * b.rng.standard_normal((c["vocab"], h))).astype(f32))
    pos = b.init("embeddings.position_embeddings.weight",
                 (std * b.rng.standard_normal((c["max_pos"], h))).astype(f32))
    typ = b.init("embeddings.token_type_embeddings.weight",
                 (std * b.rng.standard_normal((c["types"], h))).astype(f32))
    pos_ids = b.init("embeddings.position_ids", np.arange(seq, dtype=np.int64)[None])
    type_ids = b.init("embeddings.token_type_ids", np.zeros((1, seq), np.int64))
    e = b.node("Gather", [word, "input_ids"], "embeddings.word", axis=0)
    e = b.node("Add", [e, b.node("Gather", [typ, type_ids], "embeddings.type", axis=0)],
               "embeddings.add_type")
    e = b.node("Add", [e, b.node("Gather", [pos, pos_ids], "embeddings.position", axis=0)],
               "embeddings.add_position")
    x = layer_norm(b, e, h, "embeddings.LayerNorm")

    # Extended attention mask: (1 - mask[:, None, None, :]) * -10000.
    m = b.node("Unsqueeze", ["attention_mask", b.const("mask_axis1", np.array([1], np.int64))],
               "mask.unsqueeze1")
    m = b.node("Unsqueeze", [m, b.const("mask_axis2", np.array([2], np.int64))], "mask.unsqueeze2")
    m = b.node("Cast", [m], "mask.cast", to=TensorProto.FLOAT)
    m = b.node("Sub", [b.const("mask_one", np.array(1.0, f32)), m], "mask.sub")
    mask = b.node("Mul", [m, b.const("mask_min", np.array(-10000.0, f32))], "mask.mul")

    for i in range(c["layers"]):
        x = bert_layer(b, x, mask, i, c, last=i == c["layers"] - 1)

    n = b.batch
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [n, seq]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [n, seq])]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [n, seq, h])]
    ids = b.rng.integers(min(1000, c["vocab"] // 2), c["vocab"], size=(n, seq), dtype=np.int64)
    mask_in = np.zeros((n, seq), np.int64)
    for r in range(n):
        # 100 real tokens in the first sentence, fewer in later ones, so a
        # batch mixes padding lengths as real batches do.
        length = max(8, 100 - 11 * r) * seq // 128
        ids[r, 0], ids[r, length - 1] = 101, 102   # [CLS] ... [SEP]
        ids[r, length:] = 0                         # padding
        mask_in[r, :length] = 1
    return b.model("bert_base", inputs, outputs), {"input_ids": ids, "attention_mask": mask_in}


# ---------------------------------------------------------------------- ViT --

VIT = dict(image=224, patch=16, dim=192, heads=3, layers=12, mlp=768, classes=1000)


def vit_attention(b, x, tokens, pre):
    """timm's Attention: one qkv Linear, split into heads by Reshape +
    5-D Transpose, q/k/v taken out with Gather (torch's unbind)."""
    c = VIT
    dim, nh = c["dim"], c["heads"]
    d = dim // nh
    qkv = linear(b, x, dim, 3 * dim, pre + "qkv")
    qkv = b.node("Reshape", [qkv, b.const(pre + "qkv_shape", np.array([b.batch, tokens, 3, nh, d], np.int64))],
                 pre + "qkv.reshape")
    qkv = b.node("Transpose", [qkv], pre + "qkv.permute", perm=[2, 0, 3, 1, 4])
    q, k, v = (b.node("Gather", [qkv, b.const(pre + f"index{i}", np.array(i, np.int64))],
                      pre + "unbind", axis=0) for i in range(3))
    kt = b.node("Transpose", [k], pre + "k.transpose", perm=[0, 1, 3, 2])
    scores = b.node("MatMul", [q, kt], pre + "scores")
    scores = b.node("Mul", [scores, b.const(pre + "scale", np.array(d ** -0.5, np.float32))], pre + "scale")
    probs = b.node("Softmax", [scores], pre + "softmax", axis=-1)
    ctx = b.node("MatMul", [probs, v], pre + "context")
    ctx = b.node("Transpose", [ctx], pre + "context.transpose", perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, b.const(pre + "ctx_shape", np.array([b.batch, tokens, dim], np.int64))],
                 pre + "context.reshape")
    return linear(b, ctx, dim, dim, pre + "proj")


def build_vit(b):
    """ViT-Tiny/16 as timm exports it (pre-norm blocks, class token, learned
    position embedding, head on the class token)."""
    c = VIT
    dim, n = c["dim"], b.batch
    grid = c["image"] // c["patch"]
    tokens = grid * grid + 1
    f32 = np.float32
    w = b.rng.standard_normal((dim, 3, c["patch"], c["patch"])) * np.sqrt(1.0 / (3 * c["patch"] ** 2))
    x = b.node("Conv", ["input", b.init("patch_embed.proj.weight", w.astype(f32)),
                        b.init("patch_embed.proj.bias", (0.02 * b.rng.standard_normal(dim)).astype(f32))],
               "patch_embed.proj", kernel_shape=[c["patch"]] * 2, strides=[c["patch"]] * 2)
    x = b.node("Reshape", [x, b.const("patch_embed.flat_shape", np.array([n, dim, grid * grid], np.int64))],
               "patch_embed.flatten")
    x = b.node("Transpose", [x], "patch_embed.transpose", perm=[0, 2, 1])
    cls = b.init("cls_token", (0.02 * b.rng.standard_normal((1, 1, dim))).astype(f32))
    cls = b.node("Expand", [cls, b.const("cls_shape", np.array([n, 1, dim], np.int64))], "cls_token.expand")
    x = b.node("Concat", [cls, x], "cat", axis=1)
    pos = b.init("pos_embed", (0.02 * b.rng.standard_normal((1, tokens, dim))).astype(f32))
    x = b.node("Add", [x, pos], "pos_embed.add")
    for i in range(c["layers"]):
        pre = f"blocks.{i}."
        y = layer_norm(b, x, dim, pre + "norm1", eps=1e-6)
        x = b.node("Add", [x, vit_attention(b, y, tokens, pre + "attn.")], pre + "attn.residual")
        y = layer_norm(b, x, dim, pre + "norm2", eps=1e-6)
        y = linear(b, gelu(b, linear(b, y, dim, c["mlp"], pre + "mlp.fc1"), pre + "mlp.gelu", pre + "mlp.gelu."),
                   c["mlp"], dim, pre + "mlp.fc2")
        x = b.node("Add", [x, y], pre + "mlp.residual")
    x = layer_norm(b, x, dim, "norm", eps=1e-6)
    x = b.node("Gather", [x, b.const("cls_index", np.array(0, np.int64))], "pool", axis=1)
    hw = b.rng.standard_normal((c["classes"], dim)) * np.sqrt(1.0 / dim)
    b.node("Gemm", [x, b.init("head.weight", hw.astype(f32)),
                    b.init("head.bias", (0.01 * b.rng.standard_normal(c["classes"])).astype(f32))],
           "head", out="output", alpha=1.0, beta=1.0, transB=1)
    return b.model("vit_tiny", *image_io(n)), image_input(b)


BUILDERS = {"resnet50": build_resnet50, "mobilenetv2": build_mobilenetv2, "bert": build_bert,
            "vit": build_vit, "bert-tiny": lambda b: build_bert(b, BERT_TINY)}


# ------------------------------------------------------------------- driver --

# The scripts the generated files depend on (gen_real_models.py adds itself).
STAMP_FILES = [os.path.abspath(__file__)]


def stamp_of(model_name, batch):
    """What the generated files depend on: the scripts and the library versions."""
    import onnxruntime
    h = hashlib.sha256()
    for path in STAMP_FILES:
        with open(path, "rb") as f:
            h.update(f.read())
    digest = h.hexdigest()
    return (f"{model_name} batch={batch} {digest} onnx={onnx.__version__} "
            f"onnxruntime={onnxruntime.__version__} numpy={np.__version__}\n")


def up_to_date(out, model_name, batch):
    try:
        with open(os.path.join(out, "stamp")) as f:
            if f.read() != stamp_of(model_name, batch):
                return False
    except OSError:
        return False
    return os.path.exists(os.path.join(out, "model.onnx"))


def run_ort(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    # The reference is the graph as written: no fusions that reorder math.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def generate(model_name, out, batch):
    t0 = time.time()
    model, feeds = BUILDERS[model_name](Builder(SEED[model_name], batch))
    onnx.checker.check_model(model)
    # PyTorch's exporter records intermediate shapes as value_info; so do we,
    # so the importer sees what a real export gives it.
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    path = os.path.join(tmp, "model.onnx")
    onnx.save(model, path)
    n_params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    del model
    outputs = run_ort(path, feeds)
    for name, value in feeds.items():
        np.save(os.path.join(tmp, f"input_{name}.npy"), value)
    for name, value in outputs.items():
        if not np.all(np.isfinite(value)):
            sys.exit(f"{model_name}: onnxruntime output {name} is not finite")
        np.save(os.path.join(tmp, f"expected_{name}.npy"), value)
        print(f"{model_name}: {name} {value.dtype}{list(value.shape)} "
              f"mean {value.mean():.4g} std {value.std():.4g} max|x| {np.abs(value).max():.4g}")
    with open(os.path.join(tmp, "stamp"), "w") as f:
        f.write(stamp_of(model_name, batch))
    # Replace the old directory only once the new one is complete.
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print(f"{model_name}: {n_params / 1e6:.1f}M parameters, wrote {out} in {time.time() - t0:.1f}s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=sorted(BUILDERS))
    ap.add_argument("out_dir")
    ap.add_argument("--batch", type=int, default=1, help="batch size N (default 1)")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    args = ap.parse_args()
    if args.batch < 1:
        ap.error(f"--batch must be at least 1, got {args.batch}")
    out = os.path.abspath(args.out_dir)
    if not args.force and up_to_date(out, args.model, args.batch):
        print(f"{args.model}: {out} is up to date")
        return
    generate(args.model, out, args.batch)


if __name__ == "__main__":
    main()
