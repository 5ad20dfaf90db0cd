#!/usr/bin/env python3
"""Generate models with onnxruntime's transformer contrib ops (com.microsoft)
and onnxruntime's outputs for them, for kiln's normalize-msft pass.

Two kinds of cases, each written to OUT_DIR/<case>/ as model.onnx,
input_<name>.npy, expected_<name>.npy and meta.json (what check_msft.py
asserts about `kiln compile --report`: how many Attention nodes, and that
no contrib op is left):

  * BERT-like models run through onnxruntime's transformer optimizer
    (onnxruntime.transformers.optimizer.optimize_model, model_type="bert")
    at opt_level 1 and 2: `bert_o1` from kiln's BERT-base (gen_models.py's
    model.onnx, given with --bert), `small_o1` / `small_o2` from a 2-layer
    BERT built here with batch 2 and padding. The optimizer's fusions are
    counted and the case fails to generate when the ops it is meant to
    test are not there, so a change in onnxruntime cannot make the test
    check nothing.
  * single-op models built with onnx.helper (domain "com.microsoft") for
    every op normalize-msft rewrites, in the forms that matter (masks of
    each rank, key lengths, unidirectional, qkv_hidden_sizes, bias, the
    optional outputs), and one it must refuse (`refuse_past`).

Usage: gen_msft_models.py OUT_DIR [--bert BERT_DIR/model.onnx] [--case NAME ...]
"""
import argparse
import collections
import json
import os
import sys
import types

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_models  # noqa: E402

MS = "com.microsoft"
F32, I32, I64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64
CONTRIB = ["SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "BiasGelu", "FastGelu", "Gelu",
           "Attention", "MultiHeadAttention", "EmbedLayerNormalization"]


def rng(seed):
    return np.random.default_rng(seed)


def save_case(out, name, model, feeds, meta):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, v in feeds.items():
        np.save(os.path.join(d, f"input_{k}.npy"), v)
    if not meta.get("refuse"):
        sess = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
        outs = sess.run(None, feeds)
        for o, v in zip(sess.get_outputs(), outs):
            np.save(os.path.join(d, f"expected_{o.name}.npy"), v)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{name}: {json.dumps(meta)}")


def single(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "msft_case", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)],
                          producer_name="kiln-tests-msft")
    m.ir_version = 8
    return m


def vi(name, dt, shape):
    return helper.make_tensor_value_info(name, dt, shape)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


# ------------------------------------------------------------ single ops --

def case_skip_ln(out):
    r = rng(1)
    B, S, H = 2, 8, 32
    n = helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"], ["y", "", "", "sum"],
                         domain=MS, epsilon=1e-5, name="sln")
    m = single([n], [vi("x", F32, [B, S, H]), vi("skip", F32, [B, S, H])],
               [vi("y", F32, [B, S, H]), vi("sum", F32, [B, S, H])],
               [init("gamma", (1 + 0.1 * r.standard_normal(H)).astype(np.float32)),
                init("beta", (0.1 * r.standard_normal(H)).astype(np.float32)),
                init("bias", (0.1 * r.standard_normal(H)).astype(np.float32))])
    feeds = {"x": r.standard_normal((B, S, H)).astype(np.float32), "skip": r.standard_normal((B, S, H)).astype(np.float32)}
    save_case(out, "skip_ln", m, feeds, {"attention": 0})


def case_skip_simplified_ln(out):
    r = rng(2)
    B, S, H = 2, 8, 32
    n = helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "gamma", "bias"], ["y", "", "", "sum"],
                         domain=MS, epsilon=1e-6, name="ssln")
    m = single([n], [vi("x", F32, [B, S, H]), vi("skip", F32, [B, S, H])],
               [vi("y", F32, [B, S, H]), vi("sum", F32, [B, S, H])],
               [init("gamma", (1 + 0.1 * r.standard_normal(H)).astype(np.float32)),
                init("bias", (0.1 * r.standard_normal(H)).astype(np.float32))])
    feeds = {"x": r.standard_normal((B, S, H)).astype(np.float32), "skip": r.standard_normal((B, S, H)).astype(np.float32)}
    save_case(out, "skip_simplified_ln", m, feeds, {"attention": 0})


def case_gelus(out):
    r = rng(3)
    B, S, H = 2, 8, 64
    nodes = [helper.make_node("BiasGelu", ["x", "b"], ["bg"], domain=MS, name="bias_gelu"),
             helper.make_node("FastGelu", ["x", "b"], ["fg"], domain=MS, name="fast_gelu"),
             helper.make_node("FastGelu", ["x"], ["fg0"], domain=MS, name="fast_gelu_nobias"),
             helper.make_node("Gelu", ["x"], ["g"], domain=MS, name="ms_gelu")]
    m = single(nodes, [vi("x", F32, [B, S, H])],
               [vi(o, F32, [B, S, H]) for o in ("bg", "fg", "fg0", "g")],
               [init("b", (0.5 * r.standard_normal(H)).astype(np.float32))])
    save_case(out, "gelus", m, {"x": (2 * r.standard_normal((B, S, H))).astype(np.float32)}, {"attention": 0})


def attention_case(out, name, seed, mask=None, B=2, S=12, H=32, heads=4, qkv=None, **attrs):
    """com.microsoft Attention with packed weights; mask: None, "2d", "3d", "lens"."""
    r = rng(seed)
    sizes = qkv or [H, H, H]
    w = (r.standard_normal((H, sum(sizes))) / np.sqrt(H)).astype(np.float32)
    bias = (0.1 * r.standard_normal(sum(sizes))).astype(np.float32)
    lens = np.array([S, S - 5] + [S - 2] * (B - 2), np.int32)[:B]
    ins = ["x", "w", "bias"]
    inputs = [vi("x", F32, [B, S, H])]
    feeds = {"x": r.standard_normal((B, S, H)).astype(np.float32)}
    if mask == "2d":
        ins.append("mask")
        inputs.append(vi("mask", I32, [B, S]))
        feeds["mask"] = (np.arange(S)[None, :] < lens[:, None]).astype(np.int32)
    elif mask == "3d":
        ins.append("mask")
        inputs.append(vi("mask", I32, [B, S, S]))
        feeds["mask"] = (r.random((B, S, S)) > 0.3).astype(np.int32)
        feeds["mask"][:, :, 0] = 1
    elif mask == "lens":
        ins.append("mask")
        inputs.append(vi("mask", I32, [B]))
        feeds["mask"] = lens
    if qkv:
        attrs["qkv_hidden_sizes"] = qkv
    n = helper.make_node("Attention", ins, ["y"], domain=MS, num_heads=heads, name="attn", **attrs)
    m = single([n], inputs, [vi("y", F32, [B, S, sizes[2]])], [init("w", w), init("bias", bias)])
    save_case(out, name, m, feeds, {"attention": 1})


def case_attention(out):
    attention_case(out, "attention_mask2d", 10, mask="2d")
    attention_case(out, "attention_mask3d", 11, mask="3d", mask_filter_value=-1000.0)
    attention_case(out, "attention_lens", 12, mask="lens")
    attention_case(out, "attention_causal", 13, unidirectional=1, scale=0.3)
    attention_case(out, "attention_qkv_sizes", 14, mask="2d", qkv=[32, 32, 16])


def case_mha(out, name="mha", seed=20, mask="2d", bias=True, attn_bias=False):
    r = rng(seed)
    B, S, T, H, heads = 2, 6, 10, 32, 4
    ins = ["q", "k", "v", "bias" if bias else "", "mask" if mask else "", "ab" if attn_bias else ""]
    while ins and not ins[-1]:
        ins.pop()
    inputs = [vi("q", F32, [B, S, H]), vi("k", F32, [B, T, H]), vi("v", F32, [B, T, H])]
    feeds = {k: r.standard_normal((B, S if k == "q" else T, H)).astype(np.float32) for k in ("q", "k", "v")}
    inits = [init("bias", (0.1 * r.standard_normal(3 * H)).astype(np.float32))] if bias else []
    lens = np.array([T, T - 4], np.int32)
    if mask == "2d":
        inputs.append(vi("mask", I32, [B, T]))
        feeds["mask"] = (np.arange(T)[None, :] < lens[:, None]).astype(np.int32)
    elif mask == "lens":
        inputs.append(vi("mask", I32, [B]))
        feeds["mask"] = lens
    if attn_bias:
        inputs.append(vi("ab", F32, [1, heads, S, T]))
        feeds["ab"] = r.standard_normal((1, heads, S, T)).astype(np.float32)
    n = helper.make_node("MultiHeadAttention", ins, ["y"], domain=MS, num_heads=heads, name="mha")
    m = single([n], inputs, [vi("y", F32, [B, S, H])], inits)
    save_case(out, name, m, feeds, {"attention": 1})


def case_mhas(out):
    case_mha(out)
    case_mha(out, "mha_lens_bias", 21, mask="lens", bias=False, attn_bias=True)


def case_embed_ln(out, name="embed_ln", seed=30, pos_ids=False):
    r = rng(seed)
    B, S, H, V, P = 2, 10, 32, 50, 16
    lens = np.array([S, S - 3], np.int32)
    ins = ["ids", "" if pos_ids else "seg", "word", "pos", "" if pos_ids else "segemb", "gamma", "beta", "mask"]
    inputs = [vi("ids", I32, [B, S]), vi("mask", I32, [B, S])]
    feeds = {"ids": r.integers(0, V, (B, S)).astype(np.int32),
             "mask": (np.arange(S)[None, :] < lens[:, None]).astype(np.int32)}
    if pos_ids:
        ins.append("posids")
        inputs.append(vi("posids", I32, [1, S]))
        feeds["posids"] = r.permutation(P)[:S][None].astype(np.int32)
    else:
        inputs.append(vi("seg", I32, [B, S]))
        feeds["seg"] = r.integers(0, 2, (B, S)).astype(np.int32)
    inits = [init("word", r.standard_normal((V, H)).astype(np.float32)),
             init("pos", r.standard_normal((P, H)).astype(np.float32)),
             init("segemb", r.standard_normal((2, H)).astype(np.float32)),
             init("gamma", (1 + 0.1 * r.standard_normal(H)).astype(np.float32)),
             init("beta", (0.1 * r.standard_normal(H)).astype(np.float32))]
    if pos_ids:
        inits = [i for i in inits if i.name != "segemb"]
    n = helper.make_node("EmbedLayerNormalization", ins, ["y", "mask_index", "emb_sum"], domain=MS, epsilon=1e-5,
                         name="embed")
    m = single([n], inputs, [vi("y", F32, [B, S, H]), vi("mask_index", I32, [B]), vi("emb_sum", F32, [B, S, H])],
               inits)
    save_case(out, name, m, feeds, {"attention": 0})


def case_embed_lns(out):
    case_embed_ln(out)
    case_embed_ln(out, "embed_ln_posids", 31, pos_ids=True)


def case_refuse_past(out):
    B, S, H, heads = 1, 4, 16, 2
    r = rng(40)
    n = helper.make_node("Attention", ["x", "w", "", "", "past"], ["y", "present"], domain=MS, num_heads=heads,
                         name="attn_past")
    m = single([n], [vi("x", F32, [B, S, H]), vi("past", F32, [2, B, heads, 3, H // heads])],
               [vi("y", F32, [B, S, H]), vi("present", F32, [2, B, heads, S + 3, H // heads])],
               [init("w", r.standard_normal((H, 3 * H)).astype(np.float32))])
    save_case(out, "refuse_past", m, {"x": r.standard_normal((B, S, H)).astype(np.float32),
                                      "past": r.standard_normal((2, B, heads, 3, H // heads)).astype(np.float32)},
              {"refuse": "node 'attn_past' (Attention): input 4 (past) is not supported"})


# ------------------------------------------------- optimizer-written models --

def optimize(src, dst, heads, hidden, level):
    # optimize_model imports torch at opt_level 1 and 2 only to pick a GPU
    # provider (torch.version.hip); with use_gpu=False any value will do
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.modules["torch"] = types.SimpleNamespace(version=types.SimpleNamespace(hip=None))
    from onnxruntime.transformers.optimizer import optimize_model
    m = optimize_model(src, model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=level, use_gpu=False)
    m.save_model_to_file(dst)
    return collections.Counter(n.op_type for n in onnx.load(dst, load_external_data=False).graph.node
                               if n.domain == MS)


def optimized_case(out, name, src_model, feeds, heads, hidden, level, want, n_attention):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "source.onnx")
    onnx.save(src_model, src)
    counts = optimize(src, os.path.join(d, "fused.onnx"), heads, hidden, level)
    missing = {op: k for op, k in want.items() if counts.get(op, 0) != k}
    if missing:
        sys.exit(f"{name}: onnxruntime's optimizer (opt_level {level}) wrote {dict(counts)}; expected {want}")
    os.remove(src)
    model = onnx.load(os.path.join(d, "fused.onnx"))
    os.remove(os.path.join(d, "fused.onnx"))
    save_case(out, name, model, feeds, {"attention": n_attention, "fused": dict(counts)})


def small_bert(batch=2, layers=2):
    """gen_models.py's BERT at a small width (sequence 128, which its inputs
    need), batch 2 with two padding lengths (100 and 89 tokens)."""
    saved = dict(gen_models.BERT)
    gen_models.BERT.update(vocab=1200, hidden=64, heads=4, layers=layers, ffn=256)
    try:
        model, feeds = gen_models.build_bert(gen_models.Builder(7, batch))
    finally:
        gen_models.BERT.clear()
        gen_models.BERT.update(saved)
    return model, feeds


def case_small(out):
    model, feeds = small_bert()
    optimized_case(out, "small_o1", model, feeds, 4, 64, 1,
                   {"Attention": 2, "SkipLayerNormalization": 4, "Gelu": 2}, 2)
    optimized_case(out, "small_o2", model, feeds, 4, 64, 2, {"SkipLayerNormalization": 4, "BiasGelu": 2}, 2)


def case_bert_o1(out, bert):
    model = onnx.load(bert)
    d = os.path.dirname(bert)
    feeds = {k: np.load(os.path.join(d, f"input_{k}.npy")) for k in ("input_ids", "attention_mask")}
    optimized_case(out, "bert_o1", model, feeds, 12, 768, 1,
                   {"Attention": 12, "SkipLayerNormalization": 24, "Gelu": 12}, 12)


CASES = {"skip_ln": case_skip_ln, "skip_simplified_ln": case_skip_simplified_ln, "gelus": case_gelus,
         "attention": case_attention, "mha": case_mhas, "embed_ln": case_embed_lns, "refuse_past": case_refuse_past,
         "small": case_small}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--bert", help="gen_models.py's BERT model.onnx: also write the bert_o1 case")
    ap.add_argument("--case", action="append", choices=sorted(CASES), help="only these groups (default: all)")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    if args.bert:
        case_bert_o1(args.out_dir, args.bert)
        if not args.case:
            return
    for name in args.case or sorted(CASES):
        CASES[name](args.out_dir)


if __name__ == "__main__":
    main()
