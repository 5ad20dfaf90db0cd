#!/usr/bin/python3
"""PyTorch-exported transformer models for the attention tests, random weights.

  /usr/bin/python3 gen_torch_models.py --model encoder OUT_DIR

Runs under the system python3 with Debian's python3-torch (1.13), not the
project's venv. Writes OUT_DIR/model.onnx, its inputs (input_<name>.npy) and
PyTorch's outputs (torch_<name>.npy). Models:

  encoder   nn.TransformerEncoder, batch_first, d_model 256, 4 heads, FFN
            1024, 4 layers, batch 2 x seq 64 with a key padding mask (the
            second sequence has 24 padding tokens): BERT-like, as
            torch.onnx.export writes it (packed in-projection, Where-built
            mask, [B*H, S, D] products)
  causal    nn.MultiheadAttention, sequence first, d_model 128, 8 heads,
            seq 48, batch 3, with a float causal mask
            (generate_square_subsequent_mask): a decoder's self-attention
  qat       a small MobileNetV2-like CNN (stem, an inverted residual block
            with its skip Add, global average pooling, a classifier)
            trained for a few steps with quantization-aware training
            (torch.ao.quantization, fbgemm: per-channel s8 weights, u8
            activations in [0, 127]), exported with its fake quantization
            as QuantizeLinear -> Clip -> DequantizeLinear and each fused
            Conv+BatchNorm as Conv -> Div -> Add -> BatchNormalization;
            torch_y is the QAT model's own (fake-quantized) output
  qat_int8  the same model after torch.ao.quantization.convert, exported
            with PyTorch's quantized kernels as QDQ; torch_y is the int8
            model's output (PyTorch's default quantized engine: onednn in
            Debian's build, which lacks fbgemm)

The export runs with autograd on: in eval mode under no_grad PyTorch takes
its BetterTransformer fast path (aten::_transformer_encoder_layer_fwd),
which torch.onnx cannot export.
"""
import argparse
import os
import sys

import numpy as np

try:
    import torch
except ImportError:
    print("SKIP: PyTorch is not installed for %s (Debian's python3-torch: scripts/install-deps)" % sys.executable)
    sys.exit(77)


class Causal(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(128, 8)

    def forward(self, x, mask):
        return self.mha(x, x, x, attn_mask=mask, need_weights=False)[0]


def encoder():
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).eval()
    x = torch.randn(2, 64, 256)
    pad = torch.zeros(2, 64, dtype=torch.bool)
    pad[1, 40:] = True
    return model, (x, None, pad), ["x", "src_key_padding_mask"], {"x": x, "src_key_padding_mask": pad}


def causal():
    model = Causal().eval()
    x = torch.randn(48, 3, 128)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(48)
    return model, (x, mask), ["x", "mask"], {"x": x, "mask": mask}


class QatNet(torch.nn.Module):
    """Stem, one inverted residual block (expand, depthwise, project, skip
    Add), pooling and a classifier, with PyTorch's quantization stubs."""

    def __init__(self):
        super().__init__()
        nn = torch.nn

        def cbr(cin, cout, k, stride=1, groups=1, relu=True):
            layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
            return nn.Sequential(*(layers + [nn.ReLU()] if relu else layers))

        self.quant = torch.ao.quantization.QuantStub()
        self.stem = cbr(3, 16, 3, stride=2)
        self.expand = cbr(16, 48, 1)
        self.dw = cbr(48, 48, 3, groups=48)
        self.project = cbr(48, 16, 1, relu=False)
        self.skip = torch.ao.nn.quantized.FloatFunctional()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        x = self.stem(self.quant(x))
        x = self.skip.add(self.project(self.dw(self.expand(x))), x)
        return self.dequant(self.fc(torch.flatten(self.pool(x), 1)))


def qat_model():
    """QatNet after prepare_qat and a few SGD steps on random data (so that
    BatchNorm statistics and the observers' ranges are those of training),
    then frozen: eval mode, observers off."""
    tq = torch.ao.quantization
    model = QatNet().train()
    with torch.no_grad():  # negative BatchNorm scales: a channel whose sign the conversion flips
        model.dw[1].weight[::3] *= -1
    # version 0: FakeQuantize modules that torch.onnx exports (the fused
    # observer of version 1 has no ONNX symbolic)
    model.qconfig = tq.get_default_qat_qconfig("fbgemm", version=0)
    fuse = [["stem.0", "stem.1", "stem.2"], ["expand.0", "expand.1", "expand.2"], ["dw.0", "dw.1", "dw.2"],
            ["project.0", "project.1"]]
    tq.fuse_modules_qat(model, fuse, inplace=True)
    tq.prepare_qat(model, inplace=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(8):
        x = torch.randn(8, 3, 32, 32)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.apply(tq.disable_observer)
    return model


def qat():
    model = qat_model()
    x = torch.randn(1, 3, 32, 32)
    return model, (x,), ["x"], {"x": x}


def qat_int8():
    model = torch.ao.quantization.convert(qat_model())
    x = torch.randn(1, 3, 32, 32)
    return model, (x,), ["x"], {"x": x}


MODELS = {"encoder": encoder, "causal": causal, "qat": qat, "qat_int8": qat_int8}
# the opset each is exported with (per-channel QuantizeLinear needs 13)
OPSET = {"qat": 13, "qat_int8": 13}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("out_dir")
    a = ap.parse_args()
    torch.manual_seed(0)
    model, args, names, feeds = MODELS[a.model]()
    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, "model.onnx")
    torch.onnx.export(model, args, path + ".tmp", input_names=names, output_names=["y"], opset_version=OPSET.get(a.model, 17),
                      do_constant_folding=True)
    with torch.no_grad():
        y = model(*args)
    for name, t in feeds.items():
        np.save(os.path.join(a.out_dir, "input_%s.npy" % name), t.numpy())
    np.save(os.path.join(a.out_dir, "torch_y.npy"), y.numpy())
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
