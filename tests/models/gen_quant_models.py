#!/usr/bin/env python3
"""Generate the INT8 model-test networks: onnxruntime's quantizations of gen_models.py's models.

  resnet50-qdq     ResNet-50, static INT8 in QDQ form (QuantizeLinear/DequantizeLinear
                   around Conv, Gemm, Add, ...), per-channel s8 weights, u8 activations
  mobilenetv2-qdq  MobileNetV2, the same
  resnet50-qop     ResNet-50, static INT8 in QOperator form (QLinearConv, and the
                   com.microsoft QLinearAdd, QLinearGlobalAveragePool, QGemm, ...)
  mobilenetv2-qop  MobileNetV2, the same
  bert-dyn         BERT-base, onnxruntime's quantize_dynamic (s8 weights;
                   DynamicQuantizeLinear + MatMulInteger + float rescale)

The FP32 model comes from gen_models.py (run into FP32_DIR, by default
OUT_DIR/../<base> at batch 1 and OUT_DIR/../<base>-b<N> otherwise; it does
nothing there when that is up to date). Static models: onnxruntime's
quant_pre_process (shape inference and its basic graph optimizations, which
fold BatchNormalization into the convolutions), then quantize_static with
QuantFormat.QDQ or QOperator, per_channel=True, activation_type=QUInt8,
weight_type=QInt8, MinMax calibration on CALIB_IMAGES N(0,1) images drawn
with seed CALIB_SEED (not the test input). bert-dyn: quantize_dynamic with
weight_type=QInt8 on the FP32 model as written.

Writes into OUT_DIR: model.onnx (the quantized model), input_<name>.npy (the
FP32 model's inputs, copied), expected_<name>.npy (onnxruntime's output of the
quantized model, with graph optimizations disabled: the graph as written),
ort_opt_<name>.npy (the same with ORT_ENABLE_ALL: QDQ groups fused into
onnxruntime's integer kernels, what `kiln bench --vs-ort` times),
fp32_<name>.npy (the FP32 model's output on the same inputs), tolerance.json
(compare.py's bar for the model tests: cosine >= TEST_COSINE_MIN against
expected_<name>.npy) and quant.json:
  {"model", "format", "batch", "seconds": {...},
   "outputs": {NAME: {"step": S or null, "zero_point": Z, "from": NODE,
                      "ort_opt_within_one_step": F, "ort_opt_max_steps": M,
                      "cosine_vs_fp32": C, "ort_opt_cosine": C2}}}
where "step" is the output quantization step: the scale of the last
DequantizeLinear before the output (the tensor it reads is what a
QuantizeLinear, or a QOperator op, wrote with that scale), null if the output
is not dequantized from an 8-bit tensor (bert-dyn). "ort_opt_*" compare
onnxruntime with ORT_ENABLE_ALL (which fuses QDQ groups into integer
kernels, what `kiln bench --vs-ort` times) against the expected output: how
far two correct integer implementations drift apart.

It does nothing if OUT_DIR already holds them for the same version of this
script, the same FP32 model (its stamp) and the same libraries.

Usage: gen_quant_models.py --model NAME OUT_DIR [--batch N] [--fp32-dir DIR] [--force]
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
GEN_MODELS = os.path.join(HERE, "gen_models.py")
# name -> (FP32 model of gen_models.py, how it is quantized)
MODELS = {
    "resnet50-qdq": ("resnet50", "qdq"),
    "mobilenetv2-qdq": ("mobilenetv2", "qdq"),
    "resnet50-qop": ("resnet50", "qop"),
    "mobilenetv2-qop": ("mobilenetv2", "qop"),
    "bert-dyn": ("bert", "dynamic"),
}
CALIB_IMAGES = 8
CALIB_SEED = 8128
# the model tests' bar: cosine(kiln, onnxruntime as written) over each output
TEST_COSINE_MIN = 0.99


def base_of(name):
    return MODELS[name][0]


def default_fp32_dir(out, name, batch):
    base = base_of(name)
    return os.path.join(os.path.dirname(out), base if batch == 1 else f"{base}-b{batch}")


def stamp_of(name, batch, fp32_dir):
    import onnxruntime
    with open(os.path.abspath(__file__), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(fp32_dir, "stamp")) as f:
        fp32_stamp = f.read().strip()
    return (f"{name} batch={batch} {digest} onnx={onnx.__version__} "
            f"onnxruntime={onnxruntime.__version__} numpy={np.__version__} fp32=[{fp32_stamp}]\n")


def up_to_date(out, stamp):
    try:
        with open(os.path.join(out, "stamp")) as f:
            if f.read() != stamp:
                return False
    except OSError:
        return False
    return all(os.path.exists(os.path.join(out, f)) for f in ("model.onnx", "quant.json"))


def session(path, optimize, threads=0):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    if threads:
        so.intra_op_num_threads = threads
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run_ort(path, feeds, optimize=False):
    sess = session(path, optimize)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


class ImageReader:
    """CalibrationDataReader over CALIB_IMAGES N(0,1) images in batches of `batch`."""

    def __init__(self, input_name, batch):
        rng = np.random.default_rng(CALIB_SEED)
        images = rng.standard_normal((CALIB_IMAGES, 3, 224, 224)).astype(np.float32)
        n = max(1, CALIB_IMAGES // batch)
        # the model's batch is static: a batch larger than the set repeats it
        reps = -(-batch * n // CALIB_IMAGES)
        images = np.concatenate([images] * reps)[:batch * n]
        self.feeds = iter([{input_name: images[i * batch:(i + 1) * batch]} for i in range(n)])

    def get_next(self):
        return next(self.feeds, None)

    def rewind(self):  # pragma: no cover - not used by MinMax
        pass


def output_steps(model):
    """{output: (step, zero_point, node name)} from the DequantizeLinear nearest each output,
    looking back through ops that do not change values' scale (Reshape, Flatten, ...)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:  # Constant nodes too
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    inits[n.output[0]] = onnx.numpy_helper.to_array(a.t)
    passthrough = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"}
    found = {}
    for out in model.graph.output:
        name, step = out.name, None
        for _ in range(16):
            node = producer.get(name)
            if node is None:
                break
            if node.op_type == "DequantizeLinear":
                scale = inits.get(node.input[1])
                zp = inits.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
                if scale is not None and scale.size == 1:
                    step = (float(scale.reshape(())), int(zp.reshape(())) if zp is not None else 0,
                            node.name)
                break
            if node.op_type not in passthrough:
                break
            name = node.input[0]
        found[out.name] = step
    return found


def cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))


def generate(name, out, batch, fp32_dir, stamp):
    from onnxruntime.quantization import (CalibrationMethod, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    base, kind = MODELS[name]
    t0 = time.time()
    secs = {}
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    fp32 = os.path.join(fp32_dir, "model.onnx")
    model_path = os.path.join(tmp, "model.onnx")
    feeds = {}
    for f in sorted(os.listdir(fp32_dir)):
        if f.startswith("input_") and f.endswith(".npy"):
            feeds[f[len("input_"):-4]] = np.load(os.path.join(fp32_dir, f))
            shutil.copy(os.path.join(fp32_dir, f), os.path.join(tmp, f))
    fp32_out = {f[len("expected_"):-4]: np.load(os.path.join(fp32_dir, f))
                for f in os.listdir(fp32_dir) if f.startswith("expected_") and f.endswith(".npy")}
    if kind == "dynamic":
        t = time.time()
        quantize_dynamic(fp32, model_path, weight_type=QuantType.QInt8)
        secs["quantize_dynamic"] = round(time.time() - t, 1)
    else:
        t = time.time()
        pre = os.path.join(tmp, "pre.onnx")
        quant_pre_process(fp32, pre)
        secs["pre_process"] = round(time.time() - t, 1)
        t = time.time()
        quantize_static(pre, model_path, ImageReader(next(iter(feeds)), batch),
                        quant_format=QuantFormat.QDQ if kind == "qdq" else QuantFormat.QOperator,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)
        secs["quantize_static"] = round(time.time() - t, 1)
        os.remove(pre)
        for f in os.listdir(tmp):  # the calibrator's augmented model, if left behind
            if f.endswith(".onnx") and f != "model.onnx":
                os.remove(os.path.join(tmp, f))
    t = time.time()
    outputs = run_ort(model_path, feeds)
    opt = run_ort(model_path, feeds, optimize=True)
    secs["onnxruntime"] = round(time.time() - t, 1)
    model = onnx.load(model_path, load_external_data=False)
    steps = output_steps(model)
    ops = {}
    for n in model.graph.node:
        key = (n.domain + "." if n.domain not in ("", "ai.onnx") else "") + n.op_type
        ops[key] = ops.get(key, 0) + 1
    del model
    info = {"model": name, "fp32_model": base, "format": kind, "batch": batch,
            "calibration": None if kind == "dynamic" else
            {"images": CALIB_IMAGES, "seed": CALIB_SEED, "method": "MinMax"},
            "ops": dict(sorted(ops.items())), "outputs": {}}
    for oname, value in outputs.items():
        if not np.all(np.isfinite(value)):
            sys.exit(f"{name}: onnxruntime output {oname} is not finite")
        np.save(os.path.join(tmp, f"expected_{oname}.npy"), value)
        np.save(os.path.join(tmp, f"ort_opt_{oname}.npy"), opt[oname])
        entry = {"step": None, "zero_point": None, "from": None}
        s = steps.get(oname)
        if s:
            entry.update(step=s[0], zero_point=s[1], **{"from": s[2]})
            d = np.abs(opt[oname].astype(np.float64) - value.astype(np.float64)) / s[0]
            entry["ort_opt_within_one_step"] = float(np.mean(d <= 1.0 + 1e-3))
            entry["ort_opt_max_steps"] = float(d.max())
        entry["ort_opt_cosine"] = cosine(opt[oname], value)
        if oname in fp32_out:
            np.save(os.path.join(tmp, f"fp32_{oname}.npy"), fp32_out[oname])
            entry["cosine_vs_fp32"] = cosine(value, fp32_out[oname])
        info["outputs"][oname] = entry
        print(f"{name}: {oname} {value.dtype}{list(value.shape)} step {entry['step']} "
              f"cosine vs FP32 {entry.get('cosine_vs_fp32', float('nan')):.5f}; ORT optimized vs as "
              f"written: cosine {entry['ort_opt_cosine']:.6f}"
              + (f", {100 * entry['ort_opt_within_one_step']:.2f}% within one step, max "
                 f"{entry['ort_opt_max_steps']:.1f} steps" if s else ""))
    secs["total"] = round(time.time() - t0, 1)
    info["seconds"] = secs
    info["sizes"] = {"model_bytes": os.path.getsize(model_path), "fp32_model_bytes": os.path.getsize(fp32)}
    # What the model tests (compare.py) accept: rounding differences compound
    # through a whole network (onnxruntime's own fused integer kernels land
    # up to 12 output steps away from the graph as written on MobileNetV2), so
    # the tests judge the whole output by its cosine, not element by element.
    with open(os.path.join(tmp, "tolerance.json"), "w") as f:
        json.dump({o: {"cosine_min": TEST_COSINE_MIN,
                       "why": "quantized network: rounding differences compound; see quant.json"}
                   for o in outputs}, f, indent=1)
        f.write("\n")
    with open(os.path.join(tmp, "quant.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    with open(os.path.join(tmp, "stamp"), "w") as f:
        f.write(stamp)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print(f"{name}: {os.path.getsize(os.path.join(out, 'model.onnx')) / 1e6:.1f} MB "
          f"(FP32 {info['sizes']['fp32_model_bytes'] / 1e6:.1f} MB), ops {info['ops']}")
    print(f"{name}: wrote {out} in {secs['total']:.1f}s ({secs})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("out_dir")
    ap.add_argument("--batch", type=int, default=1, help="batch size N (default 1)")
    ap.add_argument("--fp32-dir", help="where gen_models.py puts the FP32 model "
                                       "(default OUT_DIR/../<base>, or <base>-b<N> for N > 1)")
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    args = ap.parse_args()
    if args.batch < 1:
        ap.error(f"--batch must be at least 1, got {args.batch}")
    out = os.path.abspath(args.out_dir)
    fp32_dir = os.path.abspath(args.fp32_dir or default_fp32_dir(out, args.model, args.batch))
    p = subprocess.run([sys.executable, GEN_MODELS, "--model", base_of(args.model), "--batch",
                        str(args.batch), fp32_dir])
    if p.returncode != 0:
        sys.exit(f"{args.model}: gen_models.py failed for {fp32_dir} (exit {p.returncode})")
    stamp = stamp_of(args.model, args.batch, fp32_dir)
    if not args.force and up_to_date(out, stamp):
        print(f"{args.model}: {out} is up to date")
        return
    generate(args.model, out, args.batch, fp32_dir, stamp)


if __name__ == "__main__":
    main()
