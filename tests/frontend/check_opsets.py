#!/usr/bin/env python3
"""runtime/ops/ops.def's opset range of every default-domain op (SINCE,
UNTIL) against the onnx package's schemas: SINCE is the first version's
since_version, UNTIL the version before a deprecating last one (0: none).
The importer refuses a node outside its range (check_refusals.py), so a
wrong row would refuse a valid model or accept one onnxruntime refuses.

Usage: check_opsets.py OPS_DEF
"""
import re
import sys

import onnx.defs

# Where onnxruntime accepts an op outside ONNX's range, kiln follows it:
# LayerNormalization has an onnxruntime kernel in the ONNX domain for
# opsets 1-16, and onnxruntime's transformer optimizer writes the op into
# models of those opsets.
ORT_RANGES = {"LayerNormalization": (1, 0)}


def main():
    text = open(sys.argv[1]).read()
    rows = re.findall(r'^KN_OP\((\w+), "", .*, (?:UNARY|BINARY|VARIADIC|OTHER), (\d+), (\d+), [^,]*\)$', text, re.M)
    history = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            history.setdefault(s.name, []).append((s.since_version, s.deprecated))
    bad = 0
    for name, since, until in rows:
        h = sorted(history.get(name, []))
        if not h:
            print(f"{name}: not an ONNX op of the default domain")
            bad += 1
            continue
        want = ORT_RANGES.get(name, (h[0][0], h[-1][0] - 1 if h[-1][1] else 0))
        if (int(since), int(until)) != want:
            print(f"{name}: ops.def says {since}..{until}, onnx {onnx.__version__} says {want[0]}..{want[1]}")
            bad += 1
    print(f"check_opsets: {len(rows)} default-domain ops, {bad} disagree with onnx {onnx.__version__}")
    if len(rows) < 150:
        print("check_opsets: too few rows: the ops.def parser broke")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
