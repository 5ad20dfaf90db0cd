"""Makes the model for tests/profile/test_profile.sh and checks what
`kiln profile` wrote about it.

  check_profile.py make MODEL.onnx
  check_profile.py check MODEL.onnx TABLE.txt REPORT.json TRACE.json ARENA.svg RUNS
"""
import json
import sys
import xml.etree.ElementTree as ET

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

# Names with characters that JSON and XML must escape.
CONV1 = 'conv<&"1\'>'
RELU1_OUT = 'relu<out>&"1"'


def make(path):
    rng = np.random.default_rng(0)
    w = lambda *s: numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1)
    inits = []
    for name, arr in [("w1", w(16, 3, 3, 3)), ("w2", w(16, 16, 3, 3)), ("w3", w(16, 16, 1, 1)),
                      ("fc", w(16, 10))]:
        arr.name = name
        inits.append(arr)
    nodes = [
        helper.make_node("Conv", ["image", "w1"], ["c1"], name=CONV1, pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], [RELU1_OUT], name="relu1"),
        helper.make_node("Conv", [RELU1_OUT, "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3"),
        helper.make_node("Add", ["c3", RELU1_OUT], ["res"], name="residual"),
        helper.make_node("GlobalAveragePool", ["res"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "fc"], ["logits"], name="fc"),
    ]
    g = helper.make_graph(nodes, "prof", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 24, 24])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def expect(cond, msg):
    if not cond:
        print("check_profile.py: FAIL:", msg)
        sys.exit(1)


def conv_flops(model):
    """2 * MACs of every Conv, from ONNX's own shape inference."""
    m = shape_inference.infer_shapes(model)
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
              for vi in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input)}
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    out = {}
    for n in m.graph.node:
        if n.op_type == "Conv":
            w, y = shapes[n.input[1]], shapes[n.output[0]]
            out[n.name] = 2 * int(np.prod(y)) * int(np.prod(w[1:]))
    return out


def check_report(model, rep):
    steps = rep["steps"]
    names = [s["name"] for s in steps]
    # every node that emits code has a step; Flatten is a view (no step)
    for n in model.graph.node:
        if n.op_type != "Flatten":
            expect(n.name in names, f"node {n.name!r} has no step in {names}")
    expect("flatten" not in names, "the Flatten view got a step")
    expect(abs(sum(s["share"] for s in steps) - 100) < 0.01, "shares do not sum to 100%")
    expect(abs(sum(s["ms"] for s in steps) - rep["total_ms"]) < 1e-3, "step times do not sum to the total")
    by_name = {s["name"]: s for s in steps}
    for name, flops in conv_flops(model).items():
        expect(by_name[name]["flops"] == flops, f"{name}: {by_name[name]['flops']} FLOPs, expected {flops}")
        expect(by_name[name]["op"] == "Conv", f"{name}: op {by_name[name]['op']}")
        # a convolution is a oneDNN record (or kiln's Winograd): the kernel is named
        k = by_name[name].get("kernel")
        expect(isinstance(k, str) and k and not k.startswith("ref"), f"{name}: kernel {k!r}")
    # generated and runtime-kernel steps have none: the pooling between
    # plain tensors is generated code (docs/kernels.md), like the Relu
    expect(by_name["gap"].get("kernel", 0) is None, f"gap: kernel {by_name['gap'].get('kernel')!r}")
    expect(by_name["relu1"].get("kernel", 0) is None, f"relu1: kernel {by_name['relu1'].get('kernel')!r}")
    # conv1 reads the image and its weights, writes 16x24x24 floats
    c1 = by_name[CONV1]
    expect(c1["bytes_read"] == 4 * (3 * 24 * 24 + 16 * 3 * 3 * 3), f"conv1 reads {c1['bytes_read']}")
    expect(c1["bytes_written"] == 4 * 16 * 24 * 24, f"conv1 writes {c1['bytes_written']}")
    expect(rep["run_ms"] > 0, "no kn_session_run time")
    expect(0 < rep["arena_bytes"] <= rep["intermediate_bytes"], "arena peak exceeds the sum of intermediates")
    expect(max(s["bytes_live"] for s in steps) <= rep["arena_bytes"], "more bytes live than the arena holds")
    # relu1's output is live from relu1 through the residual Add
    i_relu, i_res = names.index("relu1"), names.index("residual")
    expect(all(s["bytes_live"] >= 4 * 16 * 24 * 24 for s in steps[i_relu:i_res + 1]), "relu1's output not live")
    expect(rep["weights_bytes"] >= 4 * (16 * 3 * 9 + 16 * 16 * 9 + 16 * 16 + 160), "weights too small")
    ops = {o["op"]: o for o in rep["ops"]}
    expect(ops["Conv"]["steps"] == 3 and ops["Conv"]["flops"] == sum(conv_flops(model).values()), "Conv summary")
    return names


def check_table(text, names):
    lines = text.splitlines()
    expect(any(l.lstrip().startswith("#") and "GFLOP/s" in l and "live" in l and l.rstrip().endswith("kernel")
               for l in lines), "no table header")
    rows = [l for l in lines if l[:5].strip().isdigit()]
    expect(len(rows) == len(names), f"{len(rows)} table rows for {len(names)} steps")
    for n in names:
        expect(any(f" {n} " in r for r in rows), f"step {n!r} missing from the table")
    shares = [float(tok[:-1]) for r in rows for tok in r.split() if tok.endswith("%")]
    expect(abs(sum(shares) - 100) <= 0.01 * len(rows) + 0.01, f"table shares sum to {sum(shares)}")
    expect(any(l.startswith("Conv ") and l.rstrip().endswith("%") for l in lines), "no Conv summary with % peak")
    expect(any(l.startswith("arena:") and "intermediates" in l and "weights" in l for l in lines), "no arena line")
    expect(any(l.startswith("FP32 FMA peak:") for l in lines), "no peak line")
    expect(any(l.startswith("run: ") and "kn_session_run" in l for l in lines), "no uninstrumented run line")


def check_trace(path, names, runs):
    with open(path) as f:
        t = json.load(f)
    expect(t.get("displayTimeUnit") == "ms", "displayTimeUnit")
    ev = t["traceEvents"]
    xs = [e for e in ev if e["ph"] == "X"]
    expect(len(xs) == runs * len(names), f"{len(xs)} complete events for {runs} runs of {len(names)} steps")
    for e in xs:
        expect(isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0,
               f"bad times in {e}")
        expect(isinstance(e["pid"], int) and isinstance(e["tid"], int), f"pid/tid in {e}")
    expect({e["name"] for e in xs} == set(names), "trace names differ from the steps")
    expect([e["name"] for e in xs[:len(names)]] == names, "first run's events out of order")
    starts = [e["ts"] for e in xs]
    expect(starts == sorted(starts), "events not in time order")
    cs = [e for e in ev if e["ph"] == "C"]
    expect(cs and all(isinstance(e["args"]["bytes"], int) for e in cs), "no bytes-live counter events")


def check_svg(path):
    root = ET.parse(path).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    expect(root.tag == ns + "svg", f"root is {root.tag}")
    rects = [r for r in root.iter(ns + "rect") if r.find(ns + "title") is not None]
    expect(len(rects) >= 4, f"{len(rects)} buffer rectangles")
    titles = [r.find(ns + "title").text for r in rects]
    expect(any(t.startswith(RELU1_OUT + ":") for t in titles), f"{RELU1_OUT!r} not among {titles}")
    for r in rects:
        expect(float(r.get("width")) > 0 and float(r.get("height")) > 0, "empty rectangle")
    texts = " ".join(t.text or "" for t in root.iter(ns + "text"))
    expect("step" in texts and "arena offset" in texts, "axis labels missing")


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2])
        return
    model_path, table, report, trace, svg, runs = sys.argv[2:8]
    model = onnx.load(model_path)
    with open(report) as f:
        rep = json.load(f)
    names = check_report(model, rep)
    with open(table) as f:
        check_table(f.read(), names)
    check_trace(trace, names, int(runs))
    check_svg(svg)
    print(f"check_profile.py: {len(names)} steps checked")


if __name__ == "__main__":
    main()
