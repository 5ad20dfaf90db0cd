#!/usr/bin/env python3
"""Writes (or checks) frontend/onnx/onnx_attr_schema.c, the table of the
attributes each default-domain op that kiln declares may carry, with their
type and the opsets in which ONNX defines them.

Usage: gen_attr_schema.py OUT.c          write the table
       gen_attr_schema.py --check FILE.c  exit 1 if FILE.c differs from what
                                          the installed onnx's schemas give

The table is committed (kiln must build without Python); the ctest
frontend/attr_schema runs --check so that it cannot drift from ONNX.
"""
import collections
import os
import re
import sys

from onnx import AttributeProto, defs

HERE = os.path.dirname(os.path.abspath(__file__))
OPS_DEF = os.path.join(HERE, "..", "..", "runtime", "ops", "ops.def")


def kiln_ops():
    text = open(OPS_DEF).read()
    return sorted(m.group(1) for m in re.finditer(r'^KN_OP\((\w+), "", ', text, re.M))


def rules(op, schemas):
    """(attr, type, first, last) runs; last 0 means 'to the newest opset'."""
    schemas = sorted(schemas, key=lambda s: s.since_version)
    out = []
    open_runs = {}  # (attr, type) -> first
    for k, s in enumerate(schemas):
        here = {(a, int(at.type)) for a, at in s.attributes.items()}
        for key in list(open_runs):
            if key not in here:
                out.append((key[0], key[1], open_runs.pop(key), s.since_version - 1))
        for key in here:
            open_runs.setdefault(key, s.since_version if k else 1)
    for key, first in open_runs.items():
        out.append((key[0], key[1], first, 0))
    return sorted(out)


def render():
    by_name = collections.defaultdict(list)
    for s in defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            by_name[s.name].append(s)
    lines = []
    for op in kiln_ops():
        if op not in by_name:
            continue
        for attr, typ, first, last in rules(op, by_name[op]):
            tname = AttributeProto.AttributeType.Name(typ)
            lines.append(f'    {{"{op}", "{attr}", {typ} /* {tname} */, {first}, {last}}},')
    lines.sort(key=lambda l: tuple(x.encode() for x in re.match(r'    \{"(\w+)", "(\w+)"', l).groups()))
    body = "\n".join(lines)
    return f"""/*
 * frontend/onnx/onnx_attr_schema.c — the attributes each default-domain op
 * of runtime/ops/ops.def may carry: name, ONNX AttributeType, and the
 * opsets [first, last] that define it (last 0: still defined).
 *
 * Written from onnx {__import__('onnx').__version__}'s schemas by tests/frontend/gen_attr_schema.py;
 * the test frontend/attr_schema checks that it still matches them. Sorted
 * by (op, attribute) in strcmp order for binary search.
 */
#include "onnx_internal.h"

const kn_onnx_attr_rule kn_onnx_attr_rules[] = {{
{body}
}};

const int kn_onnx_n_attr_rules = (int)(sizeof kn_onnx_attr_rules / sizeof kn_onnx_attr_rules[0]);
"""


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        want = render()
        have = open(sys.argv[2]).read()
        if have != want:
            sys.stderr.write(f"{sys.argv[2]} differs from onnx's schemas: rerun gen_attr_schema.py\n")
            return 1
        return 0
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    with open(sys.argv[1], "w") as f:
        f.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
