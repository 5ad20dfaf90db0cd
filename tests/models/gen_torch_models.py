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


MODELS = {"encoder": encoder, "causal": causal}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("out_dir")
    a = ap.parse_args()
    torch.manual_seed(0)
    model, args, names, feeds = MODELS[a.model]()
    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, "model.onnx")
    torch.onnx.export(model, args, path + ".tmp", input_names=names, output_names=["y"], opset_version=17,
                      do_constant_folding=True)
    with torch.no_grad():
        y = model(*args)
    for name, t in feeds.items():
        np.save(os.path.join(a.out_dir, "input_%s.npy" % name), t.numpy())
    np.save(os.path.join(a.out_dir, "torch_y.npy"), y.numpy())
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
