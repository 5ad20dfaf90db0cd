"""Accuracy figures of the INT8 rows of `make bench` (bench/run_bench.py).

- within_one_step(actual, expected, step): the percentage of elements of
  `actual` within one output quantization step of `expected`. Dequantized
  outputs lie on a grid of that step, so two outputs differ by a whole
  number of steps; a relative slack of 1e-3 step absorbs float32 rounding of
  (q - zero_point) * scale.
- cosine(a, b): the cosine of the two tensors, flattened, in float64.
- model_accuracy(model_dir, outputs): for a model folder written by
  tests/models/gen_quant_models.py (quant.json, expected_<name>.npy,
  ort_opt_<name>.npy, fp32_<name>.npy) and kiln's outputs {name: array}, the
  row's figure: for outputs with a quantization step (the QDQ models), the
  percentage within one step of onnxruntime's output of the quantized model
  (graph as written); for the others (BERT, whose last hidden state is
  float), the cosine against the FP32 model's output on the same input. The
  same figure for onnxruntime with its graph optimizations (what the bench
  times) comes with it, as the yardstick.
"""
import json
import os

import numpy as np

STEP_SLACK = 1e-3


def within_one_step(actual, expected, step):
    """Percentage (0-100) of elements with |actual - expected| <= step."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        raise ValueError(f"shape {list(actual.shape)} vs expected {list(expected.shape)}")
    if not step or not np.isfinite(step) or step <= 0:
        raise ValueError(f"quantization step must be a positive number, got {step!r}")
    if actual.size == 0:
        return 100.0
    diff = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    ok = diff <= step * (1 + STEP_SLACK)   # NaN compares False: never within
    return 100.0 * float(np.count_nonzero(ok)) / actual.size


def cosine(a, b):
    """Cosine of two same-shaped tensors (1.0 for two zero tensors, 0.0 if one is zero)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"shape {list(a.shape)} vs {list(b.shape)}")
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = float(np.linalg.norm(a64)), float(np.linalg.norm(b64))
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    return float(a64 @ b64 / (na * nb))


def model_accuracy(model_dir, outputs):
    """{"kind": "within_one_step"|"cosine_vs_fp32", "value": kiln's figure (the worst
    over the outputs), "ort_value": onnxruntime's (optimized) figure, "per_output": {...}}."""
    with open(os.path.join(model_dir, "quant.json")) as f:
        info = json.load(f)
    per, kinds = {}, set()
    for name, meta in info["outputs"].items():
        if name not in outputs:
            raise KeyError(f"kiln wrote no output {name!r}")
        expected = np.load(os.path.join(model_dir, f"expected_{name}.npy"))
        ort_opt = np.load(os.path.join(model_dir, f"ort_opt_{name}.npy"))
        if meta.get("step"):
            kind = "within_one_step"
            value = within_one_step(outputs[name], expected, meta["step"])
            ort_value = within_one_step(ort_opt, expected, meta["step"])
        else:
            kind = "cosine_vs_fp32"
            fp32 = np.load(os.path.join(model_dir, f"fp32_{name}.npy"))
            value, ort_value = cosine(outputs[name], fp32), cosine(ort_opt, fp32)
        kinds.add(kind)
        per[name] = {"kind": kind, "value": value, "ort_value": ort_value}
        fp32_path = os.path.join(model_dir, f"fp32_{name}.npy")
        if os.path.exists(fp32_path):  # for results.json: how far from FP32 either side is
            fp32 = np.load(fp32_path)
            per[name]["cosine_vs_fp32"] = cosine(outputs[name], fp32)
            per[name]["ort_cosine_vs_fp32"] = cosine(ort_opt, fp32)
    if len(kinds) != 1:
        raise ValueError(f"{model_dir}: outputs mix accuracy kinds {sorted(kinds)}")
    return {"kind": kinds.pop(), "value": min(p["value"] for p in per.values()),
            "ort_value": min(p["ort_value"] for p in per.values()), "per_output": per}


def fmt(kind, value):
    """How the bench table prints a figure."""
    if value is None:
        return "n/a"
    if kind == "within_one_step":
        return f"{value:.1f}% in 1 step"
    return f"cos {value:.5f}"
