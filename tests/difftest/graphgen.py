"""Random valid ONNX graphs for kiln's differential tester.

Like NNSmith, a graph is built op by op: each step picks an op whose type
and shape constraints some tensors of the current pool satisfy, draws its
attributes over their whole range, and adds the node with its output
types and shapes computed here (onnxruntime later confirms them: a graph
whose declared types it rejects is a generator bug, reported as such).

A graph is described by a JSON-able spec (`Spec`): inputs with the seed of
their values, initializers with their values, nodes, outputs and the
tolerance of each output. The spec is what a regression case stores
(tests/difftest/regress/*.json); `to_model` and `input_arrays` rebuild the
model and its inputs from it, bit for bit.

Each tensor in the pool carries what later ops need to stay in their
domain and to keep the comparison meaningful:
  exact  its value is computed without rounding (inputs, data movement,
         integer and selection ops on exact tensors): discontinuous ops
         (Floor, comparisons, ArgMax, Cast to int, ...) only read exact
         tensors, so a last-bit difference upstream cannot flip them;
  pos    every element is >= 0.25 (Log, Sqrt, divisors, Pow bases);
  unit   every element is in [-0.9, 0.9] (Asin, Atanh, ...);
  small  |x| <= 8 (Exp, Sinh, Cosh, Pow exponents).
The op table at the end (OPS) lists every op and its family; the family
gives the per-op tolerance (FAMILY_RTOL) used by `tolerances`.
"""

import json
import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F32, F16, I64, I32, I8, U8, BOOL = "float32", "float16", "int64", "int32", "int8", "uint8", "bool"
ONNX_TYPE = {F32: TensorProto.FLOAT, F16: TensorProto.FLOAT16, I64: TensorProto.INT64, I32: TensorProto.INT32,
             I8: TensorProto.INT8, U8: TensorProto.UINT8, BOOL: TensorProto.BOOL, "float64": TensorProto.DOUBLE}
INTS = (I64, I32, I8, U8)

# Relative error one op of each family may add (its ulp-level rounding,
# approximations of transcendental functions in either engine, summation
# order); `tolerances` sums them along the paths to an output.
FAMILY_RTOL = {"exact": 0.0, "arith": 4e-6, "transc": 4e-5, "reduce": 4e-5, "norm": 2e-4, "linalg": 1e-4,
               "resample": 5e-7}  # per element of the resized axis (linear, cubic Resize)


MAX_ELEMS = 2000000  # per tensor


class T:
    """A tensor of the pool."""

    def __init__(self, name, dtype, shape, exact=False, pos=False, unit=False, small=False):
        self.name, self.dtype, self.shape = name, dtype, tuple(int(d) for d in shape)
        self.exact, self.pos, self.unit, self.small = exact, pos, unit, small

    @property
    def numel(self):
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def rank(self):
        return len(self.shape)

    @property
    def is_float(self):
        return self.dtype in (F32, F16)


class Reject(Exception):
    """The op cannot be added to this pool (try another)."""


class Builder:
    def __init__(self, rng, opset):
        self.rng, self.opset = rng, opset
        self.nodes, self.inputs, self.inits, self.pool = [], [], [], []
        self.ops_used = []
        self.n = 0

    # ---- names, tensors ----
    def name(self, base):
        self.n += 1
        return "%s_%d" % (base, self.n)

    def rint(self, lo, hi):
        """An int in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def chance(self, p):
        return self.rng.random() < p

    def choice(self, seq):
        return seq[int(self.rng.integers(0, len(seq)))]

    def input(self, dtype, shape, kind):
        t = T(self.name("in"), dtype, shape, exact=True)
        t.pos, t.unit, t.small = kind == "pos", kind == "unit", kind in ("unit", "pos", "normal", "int", "bool")
        self.inputs.append({"name": t.name, "dtype": dtype, "shape": list(t.shape), "kind": kind,
                            "seed": self.rint(0, 2**31 - 1)})
        self.pool.append(t)
        return t

    def const(self, arr, flags=None):
        arr = np.asarray(arr)
        t = T(self.name("c"), str(arr.dtype), arr.shape, exact=True)
        if flags:
            for k, v in flags.items():
                setattr(t, k, v)
        self.inits.append({"name": t.name, "dtype": str(arr.dtype), "shape": list(arr.shape),
                           "values": arr.reshape(-1).tolist()})
        return t

    def const_i64(self, vals):
        return self.const(np.array(vals, dtype=np.int64))

    def rand_const(self, dtype, shape, kind):
        """A constant initializer drawn like an input of that kind."""
        return self.const(draw(np.random.default_rng(self.rint(0, 2**31 - 1)), dtype, shape, kind),
                          {"pos": kind == "pos", "unit": kind == "unit", "small": True})

    def usable(self):
        """The pool tensors a new node may read: not a terminal one (a quantized
        result, which feeds only its DequantizeLinear: g_qdq)."""
        return [t for t in self.pool if not getattr(t, "terminal", False)]

    def pick(self, pred=lambda t: True, recent=True):
        """A pool tensor satisfying pred, favouring recent ones (deeper graphs)."""
        cands = [t for t in self.usable() if pred(t)]
        if not cands:
            raise Reject()
        if recent and self.chance(0.6):
            cands = cands[-3:]
        return self.choice(cands)

    def node(self, op, ins, outs, family, domain="", **attrs):
        """Adds op(ins) -> outs (T objects with name None get one)."""
        if any(o.numel > MAX_ELEMS or o.numel == 0 for o in outs):
            raise Reject()  # keeps every case fast and its files small; empty tensors are a separate concern
        for o in outs:
            if o.name is None:
                o.name = self.name(op.lower())
        self.nodes.append({"op": op, "inputs": [i if isinstance(i, str) else (i.name if i else "") for i in ins],
                           "outputs": [o.name for o in outs], "attrs": attrs,
                           "family": list(family) if isinstance(family, tuple) else family, "domain": domain})
        self.pool.extend(outs)
        self.ops_used.append(op)
        return outs if len(outs) > 1 else outs[0]


def draw(rng, dtype, shape, kind):
    """Values of an input or constant: normal, pos [0.25, 2.5], unit
    [-0.9, 0.9], ints in a small range, bools; floats include exact zeros
    and a few repeated values (ties) but never NaN/Inf."""
    shape = tuple(shape)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype in INTS:
        lo, hi = (0, 16) if dtype == U8 or kind == "index" else (-16, 16)
        return rng.integers(lo, hi, size=shape).astype(dtype)
    if kind == "pos":
        a = rng.uniform(0.25, 2.5, size=shape)
    elif kind == "unit":
        a = rng.uniform(-0.9, 0.9, size=shape)
    elif kind == "quarter":  # multiples of 0.25: exact sums, ties for Round
        a = rng.integers(-16, 17, size=shape) * 0.25
    else:
        a = rng.standard_normal(size=shape)
    return a.astype(dtype)


# ---- shapes ------------------------------------------------------------------

# Sizes that cross the compiler's thresholds: vector widths (8, 16), odd
# and prime extents (tails), the parallel split (32768 elements of work,
# units of >= 4096), oneDNN's blocked layouts (channels 8/16 multiples).
DIMS_SMALL = [1, 1, 2, 3, 4, 5, 7, 8, 13, 16]
DIMS_LARGE = [16, 17, 24, 31, 32, 48, 64, 97, 128, 197]


def rand_shape(b, rank=None, large=None):
    if rank is None:
        rank = b.choice([1, 2, 3, 3, 4, 4, 4, 5])
    if large is None:
        large = b.chance(0.6)
    while True:
        dims = [b.choice(DIMS_SMALL) for _ in range(rank)]
        if large:
            # grow until over the parallel threshold, keeping < 1M elements
            for _ in range(12):
                if np.prod(dims) >= 40000:
                    break
                i = b.rint(0, rank - 1)
                dims[i] = b.choice(DIMS_LARGE) if dims[i] < 16 else dims[i] * 2
        if b.chance(0.3) and rank >= 2:
            dims[0] = 1  # the batch of 1 that real models have
        if np.prod(dims) <= 600000:
            return tuple(int(d) for d in dims)


def bcast_shape(b, shape):
    """A shape that numpy-broadcasts against `shape` (right-aligned, some
    dims 1, maybe fewer dims)."""
    r = len(shape)
    k = b.rint(max(0, r - 2), r) if r else 0
    s = list(shape[r - k:])
    for i in range(len(s)):
        if b.chance(0.4):
            s[i] = 1
    return tuple(s)


def bcast(a, c):
    return tuple(np.broadcast_shapes(a, c))


def norm_axis(ax, r):
    return ax + r if ax < 0 else ax


def rand_axis(b, r):
    a = b.rint(0, r - 1)
    return a - r if b.chance(0.3) else a


# ---- op generators ---------------------------------------------------------------
#
# Each takes the builder and adds one node (or a few), or raises Reject.

def flt(t):
    return t.dtype == F32


UNARY = {
    # op: (domain predicate, output flags, family, exact on exact input)
    "Abs": (flt, lambda t: dict(pos=False, unit=t.unit, small=t.small), "exact", True),
    "Neg": (flt, lambda t: dict(unit=t.unit, small=t.small), "exact", True),
    "Relu": (flt, lambda t: dict(unit=t.unit, small=t.small), "exact", True),
    "Ceil": (lambda t: flt(t) and t.exact, lambda t: dict(small=t.small), "exact", True),
    "Floor": (lambda t: flt(t) and t.exact, lambda t: dict(small=t.small), "exact", True),
    "Round": (lambda t: flt(t) and t.exact, lambda t: dict(small=t.small), "exact", True),
    "Sign": (lambda t: flt(t) and t.exact, lambda t: dict(small=True), "exact", True),
    "Sqrt": (lambda t: flt(t) and t.pos, lambda t: dict(pos=False, small=t.small), "arith", False),
    "Reciprocal": (lambda t: flt(t) and t.pos, lambda t: dict(pos=False, small=True), "arith", False),
    "Exp": (lambda t: flt(t) and t.small, lambda t: dict(pos=False), "transc", False),
    "Log": (lambda t: flt(t) and t.pos, lambda t: dict(small=t.small), "transc", False),
    "Sin": (lambda t: flt(t) and t.small, lambda t: dict(unit=False, small=True), "transc", False),
    "Cos": (lambda t: flt(t) and t.small, lambda t: dict(small=True), "transc", False),
    "Tan": (lambda t: flt(t) and t.unit, lambda t: dict(small=True), "transc", False),
    "Asin": (lambda t: flt(t) and t.unit, lambda t: dict(small=True), "transc", False),
    "Acos": (lambda t: flt(t) and t.unit, lambda t: dict(small=True), "transc", False),
    "Atan": (flt, lambda t: dict(small=True), "transc", False),
    "Sinh": (lambda t: flt(t) and t.small, lambda t: dict(), "transc", False),
    "Cosh": (lambda t: flt(t) and t.small, lambda t: dict(), "transc", False),
    "Asinh": (flt, lambda t: dict(small=True), "transc", False),
    "Atanh": (lambda t: flt(t) and t.unit, lambda t: dict(small=True), "transc", False),
    "Erf": (flt, lambda t: dict(small=True), "transc", False),
    "Sigmoid": (flt, lambda t: dict(small=True), "transc", False),
    "HardSigmoid": (flt, lambda t: dict(small=True), "arith", False),
    "HardSwish": (flt, lambda t: dict(small=t.small), "arith", False),
    "Tanh": (flt, lambda t: dict(small=True), "transc", False),
    "Softplus": (lambda t: flt(t) and t.small, lambda t: dict(small=t.small), "transc", False),
    "Softsign": (flt, lambda t: dict(small=True), "arith", False),
    "Elu": (flt, lambda t: dict(small=t.small), "transc", False),
    "Selu": (flt, lambda t: dict(small=t.small), "transc", False),
    "Celu": (flt, lambda t: dict(small=t.small), "transc", False),
    "LeakyRelu": (flt, lambda t: dict(small=t.small), "arith", False),
    "ThresholdedRelu": (lambda t: flt(t) and t.exact, lambda t: dict(small=t.small), "exact", True),
    "Shrink": (lambda t: flt(t) and t.exact, lambda t: dict(small=t.small), "arith", False),
    "Mish": (lambda t: flt(t) and t.small, lambda t: dict(small=t.small), "transc", False),
    "Gelu": (flt, lambda t: dict(small=t.small), "transc", False),
    "Swish": (flt, lambda t: dict(small=t.small), "transc", False),
    "IsNaN": (flt, lambda t: dict(), "exact", True),
    "IsInf": (flt, lambda t: dict(), "exact", True),
}


def g_unary(op):
    pred, flags, family, exact_op = UNARY[op]

    def gen(b):
        if op == "Mish" and b.opset < 18 or op == "Gelu" and b.opset < 20 or op == "HardSwish" and b.opset < 14 \
                or op == "Swish" and b.opset < 24:
            raise Reject()
        x = b.pick(pred)
        out = T(None, BOOL if op in ("IsNaN", "IsInf") else x.dtype, x.shape, exact=exact_op and x.exact, **flags(x))
        attrs = {}
        if op == "LeakyRelu" and b.chance(0.7):
            attrs["alpha"] = b.choice([0.01, 0.2, 1.5])
        if op in ("Elu", "Celu") and b.chance(0.7):
            attrs["alpha"] = b.choice([0.5, 1.0, 2.0])
        if op == "HardSigmoid" and b.chance(0.7):
            attrs.update(alpha=b.choice([0.2, 0.5]), beta=b.choice([0.5, 0.25]))
        if op == "ThresholdedRelu":
            attrs["alpha"] = b.choice([0.1, 1.0, 0.6])  # not a multiple of 0.25: no ties with exact inputs
        if op == "Shrink":
            attrs.update(lambd=b.choice([0.3, 0.6]), bias=b.choice([0.0, 0.5]))
        if op == "Gelu" and b.chance(0.5):
            attrs["approximate"] = "tanh"
        if op == "Swish" and b.chance(0.7):
            attrs["alpha"] = b.choice([0.5, 1.702, 2.0])
        if op == "IsInf" and b.chance(0.5):
            attrs[b.choice(["detect_positive", "detect_negative"])] = 0
        b.node(op, [x], [out], family, **attrs)
    return gen


def g_acosh(b):
    """Acosh needs x >= 1: 1 + a positive tensor."""
    x = b.pick(lambda t: flt(t) and t.pos)
    one = b.const(np.array(1.0, dtype=np.float32))
    y = b.node("Add", [x, one], [T(None, F32, x.shape, pos=True, small=x.small)], "arith")
    b.node("Acosh", [y], [T(None, F32, x.shape, small=True)], "transc")


def g_shape(b):
    """Shape of a static tensor: folded to a constant by the compiler, then
    used (cast to float and added) so that it stays in the graph."""
    x = b.pick()
    attrs = {}
    r = x.rank
    lo, hi = 0, r
    if b.opset >= 15 and b.chance(0.5) and r >= 2:
        lo, hi = b.rint(0, r - 1), b.rint(1, r)
        if hi <= lo:
            raise Reject()
        attrs = {"start": lo, "end": hi}
    b.node("Shape", [x], [T(None, I64, (hi - lo,), exact=True)], "exact", **attrs)


def g_int_unary(b):
    x = b.pick(lambda t: t.dtype in INTS or t.dtype == BOOL)
    op = "Not" if x.dtype == BOOL else "BitwiseNot"
    if op == "BitwiseNot" and b.opset < 18:
        raise Reject()
    b.node(op, [x], [T(None, x.dtype, x.shape, exact=True)], "exact")


def pick_pair(b, pred_a, pred_b=None, kind_b=None):
    """Two tensors of one dtype that broadcast together: a from the pool, c
    from the pool or a new constant of a broadcastable shape drawn as
    kind_b (default: like a's dtype)."""
    a = b.pick(pred_a)
    pred_b = pred_b or pred_a
    cands = [t for t in b.usable() if pred_b(t) and t is not a and t.dtype == a.dtype and _bcastable(t.shape, a.shape)]
    if cands and b.chance(0.6):
        return a, b.choice(cands)
    kind = kind_b or ("int" if a.dtype in INTS else "bool" if a.dtype == BOOL else "normal")
    return a, b.rand_const(a.dtype, bcast_shape(b, a.shape), kind)


def _bcastable(s, t):
    try:
        np.broadcast_shapes(s, t)
        return True
    except ValueError:
        return False


def g_arith(op):
    def gen(b):
        if op == "Div":
            a, c = pick_pair(b, lambda t: flt(t), lambda t: flt(t) and t.pos, "pos")
        elif op == "Pow":
            a, c = pick_pair(b, lambda t: flt(t) and t.pos, lambda t: flt(t) and t.unit, "unit")
        else:
            a, c = pick_pair(b, lambda t: flt(t) or t.dtype in (I32, I64))
        if b.chance(0.5) and op not in ("Div", "Pow"):
            a, c = c, a
        shape = bcast(a.shape, c.shape)
        if np.prod(shape) > 2000000:
            raise Reject()
        ex = a.exact and c.exact and a.dtype in INTS
        out = T(None, a.dtype, shape, exact=ex, small=a.small and c.small and op != "Pow", pos=False)
        if a.dtype in INTS and op in ("Div", "Pow"):
            raise Reject()
        b.node(op, [a, c], [out], "exact" if ex else "arith")
    return gen


def g_compare(op):
    def gen(b):
        a, c = pick_pair(b, lambda t: t.exact and t.dtype in (F32, I64, I32))
        shape = bcast(a.shape, c.shape)
        b.node(op, [a, c], [T(None, BOOL, shape, exact=True)], "exact")
    return gen


def g_logic(op):
    def gen(b):
        a, c = pick_pair(b, lambda t: t.dtype == BOOL)
        b.node(op, [a, c], [T(None, BOOL, bcast(a.shape, c.shape), exact=True)], "exact")
    return gen


def g_bitwise(op):
    def gen(b):
        if op.startswith("Bitwise") and b.opset < 18:
            raise Reject()
        if op == "BitShift":
            a = b.pick(lambda t: t.dtype == U8)
            c = b.rand_const(U8, bcast_shape(b, a.shape), "index")
            c_vals = b.inits[-1]
            c_vals["values"] = [v % 4 for v in c_vals["values"]]
            b.node(op, [a, c], [T(None, U8, bcast(a.shape, c.shape), exact=True)], "exact",
                   direction=b.choice(["LEFT", "RIGHT"]))
            return
        a, c = pick_pair(b, lambda t: t.dtype in INTS)
        b.node(op, [a, c], [T(None, a.dtype, bcast(a.shape, c.shape), exact=True)], "exact")
    return gen


def g_mod(b):
    a, c = pick_pair(b, lambda t: t.dtype in (I32, I64) and t.exact)
    # a divisor without zeros: a fresh constant
    c = b.rand_const(a.dtype, bcast_shape(b, a.shape), "int")
    vals = b.inits[-1]["values"]
    b.inits[-1]["values"] = [v if v != 0 else 3 for v in vals]
    b.node("Mod", [a, c], [T(None, a.dtype, bcast(a.shape, c.shape), exact=True)], "exact", fmod=0)


def g_prelu(b):
    x = b.pick(flt)
    if x.rank < 2:
        raise Reject()
    # slope: per channel [C,1,...] or broadcastable
    s = [1] * (x.rank - 1)
    s[0] = x.shape[1] if b.chance(0.7) else 1
    slope = b.rand_const(F32, tuple(s), "unit")
    b.node("PRelu", [x, slope], [T(None, F32, x.shape, small=x.small)], "arith")


def g_variadic(op):
    def gen(b):
        a = b.pick(lambda t: flt(t) and (t.exact or op not in ("Max", "Min")) or (op in ("Max", "Min") and flt(t)))
        k = b.rint(1, 4)
        ins, shape = [a], a.shape
        for _ in range(k - 1):
            cands = [t for t in b.usable() if t.dtype == a.dtype and _bcastable(t.shape, shape) and t not in ins]
            if cands and b.chance(0.6):
                c = b.choice(cands)
            else:
                c = b.rand_const(a.dtype, bcast_shape(b, a.shape), "normal")
            ins.append(c)
            shape = bcast(shape, c.shape)
        if np.prod(shape) > 2000000:
            raise Reject()
        ex = op in ("Max", "Min") and all(t.exact for t in ins)
        b.node(op, ins, [T(None, a.dtype, shape, exact=ex, small=all(t.small for t in ins))],
               "exact" if ex else "arith")
    return gen


def g_clip(b):
    x = b.pick(lambda t: t.dtype in (F32, I64, I32))
    ins = [x]
    lo = hi = None
    if b.chance(0.8):
        lo = b.choice([-0.5, 0.0, 0.25, 2.0]) if x.is_float else b.choice([-3, 0, 7])
    if b.chance(0.8):
        hi = b.choice([1.5, 6.0, -1.0]) if x.is_float else b.choice([5, -4])  # min > max: every value is max
    if lo is not None or hi is not None:
        ins.append(b.const(np.array(lo, dtype=x.dtype)) if lo is not None else "")
    if hi is not None:
        ins.append(b.const(np.array(hi, dtype=x.dtype)))
    b.node("Clip", ins, [T(None, x.dtype, x.shape, exact=x.exact, small=True)], "exact")


def g_where(b):
    c = b.pick(lambda t: t.dtype == BOOL)
    x = b.pick(lambda t: _bcastable(t.shape, c.shape) and t.dtype != BOOL)
    cands = [t for t in b.usable() if t.dtype == x.dtype and _bcastable(t.shape, bcast(c.shape, x.shape))]
    y = b.choice(cands) if cands and b.chance(0.5) else b.rand_const(x.dtype, bcast_shape(b, x.shape),
                                                                       "int" if x.dtype in INTS else "normal")
    shape = bcast(bcast(c.shape, x.shape), y.shape)
    if np.prod(shape) > 2000000:
        raise Reject()
    b.node("Where", [c, x, y], [T(None, x.dtype, shape, exact=x.exact and y.exact, small=x.small and y.small)],
           "exact")


def g_cast(b):
    x = b.pick(lambda t: t.dtype in (F32, I64, I32, I8, U8, BOOL, F16))
    if x.is_float and not x.exact:
        to = b.choice([F32, F16]) if x.dtype == F32 else F32
    else:
        to = b.choice([F32, I64, I32, I8, U8, BOOL, F16])
    if x.is_float and to in (I8, U8, I32, I64) and not x.small:
        raise Reject()  # out-of-range float -> int conversion is undefined
    if x.dtype in INTS and to in (I8, U8) and x.dtype not in (I8, U8):
        raise Reject()  # wrap-around on narrowing is not specified by ONNX
    if x.dtype == I8 and to == U8 or x.dtype == U8 and to == I8:
        raise Reject()
    if x.is_float and to == U8:
        raise Reject()  # negative floats to uint8: undefined
    ex = x.exact and (to != F16 or x.dtype != F32) or (x.dtype == F16 and to == F32)
    out = T(None, to, x.shape, exact=ex and (x.exact or to == F32), small=True if to == BOOL else x.small)
    if b.chance(0.3) and b.opset >= 15:
        like = b.const(np.zeros((1,), dtype=to))
        b.node("CastLike", [x, like], [out], "exact" if out.exact else "arith")
    else:
        b.node("Cast", [x], [out], "exact" if out.exact else "arith", to=ONNX_TYPE[to])


# ---- movement ----

def g_reshape(b):
    x = b.pick(lambda t: t.rank >= 1)
    n = x.numel
    # split or merge dims
    dims = list(x.shape)
    if b.chance(0.5) and len(dims) >= 2:
        i = b.rint(0, len(dims) - 2)
        dims[i:i + 2] = [dims[i] * dims[i + 1]]
    else:
        fac = [f for f in (2, 3, 4, 8) if any(d % f == 0 and d > f for d in dims)]
        if fac and len(dims) < 5:
            f = b.choice(fac)
            i = b.choice([k for k, d in enumerate(dims) if d % f == 0 and d > f])
            dims[i:i + 1] = [f, dims[i] // f]
    if int(np.prod(dims)) != n:
        raise Reject()
    spec = list(dims)
    if b.chance(0.3):
        spec[b.rint(0, len(spec) - 1)] = -1
    attrs = {}
    b.node("Reshape", [x, b.const_i64(spec)], [T(None, x.dtype, dims, **_keep(x))], "exact", **attrs)


def _keep(x):
    return dict(exact=x.exact, pos=x.pos, unit=x.unit, small=x.small)


def g_flatten(b):
    x = b.pick(lambda t: t.rank >= 1)
    ax = b.rint(-x.rank, x.rank)
    a = norm_axis(ax, x.rank)
    out = (int(np.prod(x.shape[:a], dtype=np.int64)), int(np.prod(x.shape[a:], dtype=np.int64)))
    b.node("Flatten", [x], [T(None, x.dtype, out, **_keep(x))], "exact", axis=ax)


def g_squeeze(b):
    x = b.pick(lambda t: 1 in t.shape)
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    ax = sorted(set(b.choice(ones) for _ in range(b.rint(1, len(ones)))))
    out = [d for i, d in enumerate(x.shape) if i not in ax]
    b.node("Squeeze", [x, b.const_i64([a - x.rank if b.chance(0.3) else a for a in ax])],
           [T(None, x.dtype, out, **_keep(x))], "exact")


def g_unsqueeze(b):
    x = b.pick(lambda t: t.rank <= 4)
    r = x.rank + 1
    a = b.rint(0, r - 1)
    out = list(x.shape)
    out.insert(a, 1)
    b.node("Unsqueeze", [x, b.const_i64([a - r if b.chance(0.3) else a])], [T(None, x.dtype, out, **_keep(x))],
           "exact")


def g_identity(b):
    x = b.pick()
    if b.chance(0.5):
        b.node("Identity", [x], [T(None, x.dtype, x.shape, **_keep(x))], "exact")
    else:
        x = b.pick(flt)
        b.node("Dropout", [x], [T(None, x.dtype, x.shape, **_keep(x))], "exact")


def g_transpose(b):
    x = b.pick(lambda t: t.rank >= 2)
    perm = list(b.rng.permutation(x.rank))
    b.node("Transpose", [x], [T(None, x.dtype, [x.shape[p] for p in perm], **_keep(x))], "exact",
           perm=[int(p) for p in perm])


def g_concat(b):
    x = b.pick(lambda t: t.rank >= 1)
    ax = rand_axis(b, x.rank)
    a = norm_axis(ax, x.rank)
    ins = [x]
    for _ in range(b.rint(1, 3)):
        cands = [t for t in b.usable() if t.dtype == x.dtype and t.rank == x.rank and t not in ins and all(
            t.shape[i] == x.shape[i] for i in range(x.rank) if i != a)]
        if cands and b.chance(0.5):
            ins.append(b.choice(cands))
        else:
            s = list(x.shape)
            s[a] = b.choice([1, 3, 16])
            ins.append(b.rand_const(x.dtype, s, "int" if x.dtype in INTS else "bool" if x.dtype == BOOL else "normal"))
    out = list(x.shape)
    out[a] = sum(t.shape[a] for t in ins)
    b.node("Concat", ins, [T(None, x.dtype, out, exact=all(t.exact for t in ins),
                                small=all(t.small for t in ins))], "exact", axis=ax)


def g_split(b):
    x = b.pick(lambda t: t.rank >= 1 and max(t.shape) >= 2)
    a = b.choice([i for i, d in enumerate(x.shape) if d >= 2])
    n = x.shape[a]
    k = b.rint(2, min(4, n))
    cuts = sorted(b.rng.choice(np.arange(1, n), size=k - 1, replace=False).tolist())
    parts = [e - s for s, e in zip([0] + cuts, cuts + [n])]
    ax = a - x.rank if b.chance(0.3) else a
    outs = []
    for p in parts:
        s = list(x.shape)
        s[a] = p
        outs.append(T(None, x.dtype, s, **_keep(x)))
    b.node("Split", [x, b.const_i64(parts)], outs, "exact", axis=ax)


def g_slice(b):
    x = b.pick(lambda t: t.rank >= 1)
    naxes = b.rint(1, x.rank)
    axes = sorted(b.rng.choice(x.rank, size=naxes, replace=False).tolist())
    starts, ends, steps, out = [], [], [], list(x.shape)
    for a in axes:
        d = x.shape[a]
        step = b.choice([1, 1, 2, 3, -1, -2])
        s0, e0 = b.rint(-d - 1, d + 1), b.rint(-d - 1, d + 1)
        if b.chance(0.2):
            e0 = 2**62 if step > 0 else -2**62
        starts.append(s0)
        ends.append(e0)
        steps.append(step)
        out[a] = len(range(*slice(s0, e0, step).indices(d)))
    if 0 in out:
        raise Reject()  # empty tensors are a separate concern
    ins = [x, b.const_i64(starts), b.const_i64(ends), b.const_i64([a - x.rank if b.chance(0.3) else a for a in axes])]
    if any(s != 1 for s in steps) or b.chance(0.5):
        ins.append(b.const_i64(steps))
    b.node("Slice", ins, [T(None, x.dtype, out, **_keep(x))], "exact")


def g_gather(b):
    x = b.pick(lambda t: t.rank >= 1)
    ax = rand_axis(b, x.rank)
    a = norm_axis(ax, x.rank)
    d = x.shape[a]
    ishape = b.choice([(), (b.rint(1, 12),), (2, b.rint(1, 6)), (b.rint(1, 40),)])
    vals = b.rng.integers(-d, d, size=ishape).astype(np.int64)
    if b.chance(0.5):
        idx = b.const(vals)
    else:
        idx = b.input(I64, ishape, "index")
        b.inputs[-1]["range"] = [-d, d]
    out = list(x.shape[:a]) + list(ishape) + list(x.shape[a + 1:])
    if np.prod(out) > 2000000:
        raise Reject()
    b.node("Gather", [x, idx], [T(None, x.dtype, out, **_keep(x))], "exact", axis=ax)


def g_gather_elements(b):
    x = b.pick(lambda t: t.rank >= 1)
    ax = rand_axis(b, x.rank)
    a = norm_axis(ax, x.rank)
    ishape = [b.rint(1, d) for d in x.shape]
    ishape[a] = b.rint(1, 2 * x.shape[a])
    idx = b.input(I64, ishape, "index")
    b.inputs[-1]["range"] = [-x.shape[a], x.shape[a]]
    b.node("GatherElements", [x, idx], [T(None, x.dtype, ishape, **_keep(x))], "exact", axis=ax)


def g_expand(b):
    x = b.pick(lambda t: t.numel <= 50000)
    target = list(bcast_shape(b, x.shape))
    # grow the 1-dims of x (or add leading dims)
    shape = list(x.shape)
    for i, d in enumerate(shape):
        if d == 1 and b.chance(0.6):
            shape[i] = b.choice([2, 3, 16, 64])
    if b.chance(0.3):
        shape = [b.choice([1, 2, 4])] + shape
    target = [s if b.chance(0.7) else 1 for s in shape]
    out = bcast(tuple(x.shape), tuple(target))
    if np.prod(out) > 1500000:
        raise Reject()
    b.node("Expand", [x, b.const_i64(target)], [T(None, x.dtype, out, **_keep(x))], "exact")


def g_tile(b):
    x = b.pick(lambda t: t.rank >= 1 and t.numel <= 100000)
    reps = [b.choice([1, 1, 2, 3]) for _ in x.shape]
    out = [d * r for d, r in zip(x.shape, reps)]
    if np.prod(out) > 1500000:
        raise Reject()
    b.node("Tile", [x, b.const_i64(reps)], [T(None, x.dtype, out, **_keep(x))], "exact")


def g_pad(b):
    x = b.pick(lambda t: t.rank >= 1 and t.dtype != BOOL)
    mode = b.choice(["constant", "constant", "reflect", "edge"])
    pads = []
    for d in x.shape:
        lim = d - 1 if mode == "reflect" else 3
        pads.append(b.rint(0, max(0, min(3, lim))))
    for d in x.shape:
        lim = d - 1 if mode == "reflect" else 3
        lo = -min(2, d - 1) if mode == "constant" and b.chance(0.2) else 0
        pads.append(b.rint(lo, max(0, min(3, lim))))
    out = [d + pads[i] + pads[i + x.rank] for i, d in enumerate(x.shape)]
    if min(out) <= 0 or np.prod(out) > 1500000:
        raise Reject()
    ins = [x, b.const_i64(pads)]
    if mode == "constant" and b.chance(0.5):
        ins.append(b.const(np.array(1.5 if x.is_float else 7, dtype=x.dtype)))
    b.node("Pad", ins, [T(None, x.dtype, out, exact=x.exact, small=x.small)], "exact", mode=mode)


def g_depth_space(b):
    op = b.choice(["DepthToSpace", "SpaceToDepth"])
    bs = b.choice([2, 3])
    # onnxruntime 1.18 has them for float tensors only
    if op == "DepthToSpace":
        try:
            x = b.pick(lambda t: t.rank == 4 and t.dtype == F32 and t.shape[1] % (bs * bs) == 0)
        except Reject:  # channel counts that are a multiple of bs^2 are rare in the pool
            x = b.input(F32, (1, bs * bs * b.choice([1, 2, 3]), b.rint(2, 40), b.rint(2, 40)), "normal")
    else:
        try:
            x = b.pick(lambda t: t.rank == 4 and t.dtype == F32 and t.shape[2] % bs == 0 and t.shape[3] % bs == 0)
        except Reject:  # odd images are the rule in the pool: bring an image that fits
            x = b.input(F32, (1, b.choice([3, 4, 8]), bs * b.rint(2, 40), bs * b.rint(2, 40)), "normal")
    n, c, h, w = x.shape
    if op == "DepthToSpace":
        if c % (bs * bs):
            raise Reject()
        out, attrs = (n, c // (bs * bs), h * bs, w * bs), {"mode": b.choice(["DCR", "CRD"])}
    else:
        if h % bs or w % bs:
            raise Reject()
        out, attrs = (n, c * bs * bs, h // bs, w // bs), {}
    b.node(op, [x], [T(None, x.dtype, out, **_keep(x))], "exact", blocksize=bs, **attrs)


def g_resize(b):
    x = b.pick(lambda t: t.rank in (3, 4, 5) and flt(t) and t.numel <= 300000)
    mode = b.choice(["nearest", "linear", "cubic"])
    r = x.rank
    if mode == "cubic" and r != 4:
        mode = "linear"
    scales = [1.0, 1.0] + [b.choice([0.5, 1.0, 2.0, 1.5, 3.0]) for _ in range(r - 2)]
    if r == 3:
        scales = [1.0, 1.0, scales[2]]
    out = [int(math.floor(d * s)) for d, s in zip(x.shape, scales)]
    if min(out) < 1 or np.prod(out) > 1500000:
        raise Reject()
    ctm = b.choice(["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]
                   if mode != "nearest" else ["half_pixel", "asymmetric", "align_corners"])
    # align_corners with a fractional output length (scale * in): the ONNX
    # spec and its test suite use the real length, onnxruntime (and
    # PyTorch) the integer one; kiln follows the spec (docs/testing.md)
    if ctm == "align_corners" and any(d * sc != math.floor(d * sc) for d, sc in zip(x.shape, scales)):
        ctm = "asymmetric"
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if mode == "nearest":
        attrs["nearest_mode"] = b.choice(["round_prefer_floor", "floor", "ceil", "round_prefer_ceil"])
        # a source coordinate landing on .5 picks by nearest_mode: exact inputs only via exact coordinates
    exact = mode == "nearest" and x.exact
    # linear/cubic: a source coordinate near the far end of a long axis
    # carries float32 rounding (onnxruntime computes it in float32), which
    # the interpolation turns into an error proportional to the axis length
    fam = "exact" if exact else ("resample", max(x.shape[2:]))
    b.node("Resize", [x, "", b.const(np.array(scales, dtype=np.float32))],
           [T(None, F32, out, exact=exact, small=x.small)], fam, **attrs)


def g_scatter(b):
    op = b.choice(["ScatterElements", "ScatterND"])
    x = b.pick(lambda t: t.rank >= 1 and t.dtype != BOOL)
    if op == "ScatterElements":
        ax = rand_axis(b, x.rank)
        a = norm_axis(ax, x.rank)
        ishape = [b.rint(1, d) for d in x.shape]
        # unique target positions along the axis (duplicates are order-dependent)
        ishape[a] = b.rint(1, x.shape[a])
        idx = np.empty(ishape, dtype=np.int64)
        for pos in np.ndindex(*[d for i, d in enumerate(ishape) if i != a]):
            perm = b.rng.permutation(x.shape[a])[:ishape[a]]
            full = list(pos)
            full.insert(a, slice(None))
            idx[tuple(full)] = perm - (x.shape[a] if b.chance(0.2) else 0)
        upd = b.rand_const(x.dtype, ishape, "int" if x.dtype in INTS else "normal")
        red = b.choice(["none", "none", "add", "mul", "max", "min"]) if b.opset >= 18 else "none"
        attrs = {"axis": ax}
        if red != "none":
            attrs["reduction"] = red
        ex = x.exact and (red in ("none", "max", "min") or x.dtype in INTS)
        b.node(op, [x, b.const(idx), upd], [T(None, x.dtype, x.shape, exact=ex)], "exact" if ex else "arith",
               **attrs)
    else:
        k = b.rint(1, x.rank)
        n_up = b.rint(1, 6)
        rows = set()
        for _ in range(20):
            rows.add(tuple(int(b.rint(0, d - 1)) for d in x.shape[:k]))
            if len(rows) >= n_up:
                break
        idx = np.array(sorted(rows), dtype=np.int64).reshape(len(rows), k)
        upd = b.rand_const(x.dtype, (len(rows),) + x.shape[k:], "int" if x.dtype in INTS else "normal")
        b.node(op, [x, b.const(idx), upd], [T(None, x.dtype, x.shape, exact=x.exact)], "exact")


# ---- reductions, normalizations, pooling ----

REDUCES = {"ReduceSum": "reduce", "ReduceMean": "reduce", "ReduceMax": "exact", "ReduceMin": "exact",
           "ReduceProd": "reduce", "ReduceL1": "reduce", "ReduceL2": "reduce", "ReduceLogSum": "reduce",
           "ReduceLogSumExp": "reduce", "ReduceSumSquare": "reduce"}


def g_reduce(op):
    def gen(b):
        pred = {"ReduceLogSum": lambda t: flt(t) and t.pos, "ReduceProd": lambda t: flt(t) and t.unit,
                "ReduceLogSumExp": lambda t: flt(t) and t.small}.get(op, lambda t: flt(t) and t.rank >= 1)
        x = b.pick(lambda t: pred(t) and t.rank >= 1)
        k = b.rint(1, x.rank)
        axes = sorted(b.rng.choice(x.rank, size=k, replace=False).tolist())
        if b.chance(0.15) or len(axes) == x.rank:
            axes = []  # all (or none, with noop_with_empty_axes); onnxruntime 1.18 fails on some all-axes lists
        keep = b.rint(0, 1)
        noop = False  # noop_with_empty_axes=1: onnxruntime 1.18 fails ("Reduction on all axes")
        red = axes if axes else ([] if noop else list(range(x.rank)))
        out = [1 if i in red else d for i, d in enumerate(x.shape)] if keep else \
            [d for i, d in enumerate(x.shape) if i not in red]
        n_red = int(np.prod([x.shape[i] for i in red])) if red else 1
        if op == "ReduceProd" and n_red > 64:
            raise Reject()
        family = REDUCES[op] if x.exact or REDUCES[op] != "exact" else "exact"
        ex = family == "exact" and x.exact
        attrs = {"keepdims": keep}
        sax = [a - x.rank if b.chance(0.3) else a for a in axes]
        ins = [x]
        if b.opset >= 18 or op == "ReduceSum":
            if axes:
                ins.append(b.const_i64(sax))
            if noop:
                attrs["noop_with_empty_axes"] = 1
        elif axes:
            attrs["axes"] = sax
        out_t = T(None, x.dtype, out, exact=ex, pos=op in ("ReduceL2", "ReduceL1", "ReduceSumSquare") and False,
                  small=op in ("ReduceMax", "ReduceMin", "ReduceMean") and x.small)
        b.node(op, ins, [out_t], "exact" if ex else ("reduce", n_red), **attrs)
    return gen


def g_argmax(b):
    op = b.choice(["ArgMax", "ArgMin"])
    x = b.pick(lambda t: t.exact and t.dtype in (F32, I32) and t.rank >= 1)  # onnxruntime: no int64 ArgMax
    ax = rand_axis(b, x.rank)
    a = norm_axis(ax, x.rank)
    keep = b.rint(0, 1)
    out = [1 if i == a else d for i, d in enumerate(x.shape)] if keep else [d for i, d in enumerate(x.shape) if i != a]
    attrs = {"axis": ax, "keepdims": keep}
    if b.chance(0.3):
        attrs["select_last_index"] = 1
    b.node(op, [x], [T(None, I64, out, exact=True)], "exact", **attrs)


def g_softmax(b):
    op = b.choice(["Softmax", "LogSoftmax"])
    x = b.pick(lambda t: flt(t) and t.rank >= 1 and t.small)
    ax = rand_axis(b, x.rank)
    n = x.shape[norm_axis(ax, x.rank)]
    b.node(op, [x], [T(None, F32, x.shape, small=op == "Softmax", unit=False)], ("reduce", n), axis=ax)


def g_layernorm(b):
    x = b.pick(lambda t: flt(t) and t.rank >= 1)
    ax = rand_axis(b, x.rank)
    a = norm_axis(ax, x.rank)
    nshape = x.shape[a:]
    if np.prod(nshape) < 2:
        raise Reject()
    ins = [x, b.rand_const(F32, nshape, "normal")]
    if b.chance(0.7):
        ins.append(b.rand_const(F32, nshape, "normal"))
    b.node("LayerNormalization", ins, [T(None, F32, x.shape, small=True)], ("norm", int(np.prod(nshape))),
           axis=ax, epsilon=b.choice([1e-5, 1e-3]))


def g_batchnorm(b):
    x = b.pick(lambda t: flt(t) and t.rank >= 2)
    c = x.shape[1]
    ins = [x, b.rand_const(F32, (c,), "normal"), b.rand_const(F32, (c,), "normal"),
           b.rand_const(F32, (c,), "normal"), b.rand_const(F32, (c,), "pos")]
    b.node("BatchNormalization", ins, [T(None, F32, x.shape, small=x.small)], "arith", epsilon=1e-5)


def g_instnorm(b):
    x = b.pick(lambda t: flt(t) and t.rank >= 3 and np.prod(t.shape[2:]) >= 2)
    c = x.shape[1]
    ins = [x, b.rand_const(F32, (c,), "normal"), b.rand_const(F32, (c,), "normal")]
    b.node("InstanceNormalization", ins, [T(None, F32, x.shape, small=True)],
           ("norm", int(np.prod(x.shape[2:]))), epsilon=1e-5)


def g_groupnorm(b):
    if b.opset < 18:
        raise Reject()
    x = b.pick(lambda t: flt(t) and t.rank >= 3 and t.shape[1] >= 2)
    c = x.shape[1]
    gs = [g for g in (1, 2, 4, c) if c % g == 0]
    g = b.choice(gs)
    n = c // g * int(np.prod(x.shape[2:]))
    if n < 2:
        raise Reject()
    # scale and bias per group in opset 18, per channel from opset 21
    k = c if b.opset >= 21 else g
    ins = [x, b.rand_const(F32, (k,), "normal"), b.rand_const(F32, (k,), "normal")]
    b.node("GroupNormalization", ins, [T(None, F32, x.shape, small=True)], ("norm", n), num_groups=g,
           epsilon=1e-5)


def g_lpnorm(b):
    x = b.pick(lambda t: flt(t) and t.rank >= 1 and t.pos)
    ax = rand_axis(b, x.rank)
    b.node("LpNormalization", [x], [T(None, F32, x.shape, small=True, unit=False)],
           ("norm", x.shape[norm_axis(ax, x.rank)]), axis=ax, p=b.choice([1, 2]))


def pool_out(d, k, s, pb, pe, dil, ceil):
    eff = (k - 1) * dil + 1
    num = d + pb + pe - eff
    if num < 0:
        return None
    o = (num + s - 1) // s + 1 if ceil else num // s + 1
    if ceil and (o - 1) * s >= d + pb:
        o -= 1  # the last window must start inside the input or left pad
    return o


def g_pool(op):
    def gen(b):
        x = b.pick(lambda t: flt(t) and t.rank in (3, 4, 5) and all(d >= 2 for d in t.shape[2:]))
        sp = x.rank - 2
        if op.startswith("Global"):
            out = list(x.shape[:2]) + [1] * sp
            attrs = {"p": 2} if op == "GlobalLpPool" and b.chance(0.5) else {}
            fam = "exact" if op == "GlobalMaxPool" and x.exact else ("reduce", int(np.prod(x.shape[2:])))
            if op == "GlobalLpPool" and not x.small:
                raise Reject()
            b.node(op, [x], [T(None, F32, out, exact=fam == "exact", small=x.small and op != "GlobalLpPool")],
                   fam, **attrs)
            return
        ks = [b.rint(1, min(4, d)) for d in x.shape[2:]]
        st = [b.rint(1, 3) for _ in ks]
        dil = [b.choice([1, 1, 2]) if op == "MaxPool" else 1 for _ in ks]
        attrs = {"kernel_shape": ks, "strides": st}
        ceil = b.opset >= 10 and b.chance(0.3) and op != "LpPool"
        auto = b.choice(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
        out = list(x.shape[:2])
        if auto == "NOTSET":
            pads = [b.rint(0, k - 1) for k in ks] + [b.rint(0, k - 1) for k in ks]
            if any(pads):
                attrs["pads"] = pads
            for i, d in enumerate(x.shape[2:]):
                o = pool_out(d, ks[i], st[i], pads[i], pads[i + sp], dil[i], ceil)
                if not o:
                    raise Reject()
                if ceil and o != (d + pads[i] + pads[i + sp] - (ks[i] - 1) * dil[i] - 1 + st[i] - 1) // st[i] + 1:
                    # onnxruntime 1.18 keeps a last window that starts in the right pad
                    # (AveragePool always, MaxPool at times); ONNX (and kiln) drop it: a
                    # known divergence (docs/testing.md)
                    raise Reject()
                out.append(o)
            if ceil:
                attrs["ceil_mode"] = 1
        else:
            if op == "MaxPool" and any(dd != 1 for dd in dil):
                raise Reject()
            # a window shorter than the stride by 2 or more gives a negative
            # total pad, which onnxruntime applies (windows start inside the
            # input) and kiln clamps to 0: a known divergence in a corner the
            # ONNX spec leaves open (docs/testing.md)
            if auto != "VALID" and any(k < s - 1 for k, s in zip(ks, st)):
                raise Reject()
            attrs["auto_pad"] = auto
            for i, d in enumerate(x.shape[2:]):
                out.append(-(-d // st[i]) if auto != "VALID" else (d - ks[i]) // st[i] + 1)
            if min(out) < 1:
                raise Reject()
        if any(dd != 1 for dd in dil):
            attrs["dilations"] = dil
        if op == "AveragePool" and b.chance(0.5) and "pads" in attrs:
            attrs["count_include_pad"] = 1
        if op == "LpPool":
            attrs["p"] = b.choice([1, 2])
            if not x.small:
                raise Reject()
        fam = "exact" if op == "MaxPool" and x.exact else ("reduce", int(np.prod(ks)))
        b.node(op, [x], [T(None, F32, out, exact=fam == "exact", small=x.small)], fam, **attrs)
    return gen


# ---- convolution, matrix products ----

def g_conv(b):
    x = b.pick(lambda t: flt(t) and t.rank in (3, 4) and t.numel <= 400000 and all(d >= 1 for d in t.shape))
    sp = x.rank - 2
    n, c = x.shape[:2]
    group = 1
    if c > 1 and b.chance(0.3):
        group = c if b.chance(0.5) else b.choice([g for g in (2, 4, 8) if c % g == 0] or [1])
    oc = b.choice([4, 8, 16, 24, 32, 64]) if group == 1 else group * b.choice([1, 1, 2])
    ks = [b.rint(1, min(5, d)) for d in x.shape[2:]]
    if b.chance(0.3):
        ks = [3] * sp if all(d >= 3 for d in x.shape[2:]) else ks
    st = [b.choice([1, 1, 2]) for _ in ks]
    dil = [b.choice([1, 1, 2]) for _ in ks]
    pads = [b.rint(0, k - 1) for k in ks] * 2
    out = [n, oc]
    for i, d in enumerate(x.shape[2:]):
        o = pool_out(d, ks[i], st[i], pads[i], pads[i + sp], dil[i], False)
        if not o:
            raise Reject()
        out.append(o)
    k_red = c // group * int(np.prod(ks))
    if np.prod(out) * k_red > 40e6:
        raise Reject()  # keep each case fast in the reference evaluator
    w = b.rand_const(F32, [oc, c // group] + ks, "normal")
    # scale the weights so outputs stay O(1)
    b.inits[-1]["values"] = [v / math.sqrt(k_red) for v in b.inits[-1]["values"]]
    ins = [x, w]
    if b.chance(0.7):
        ins.append(b.rand_const(F32, (oc,), "normal"))
    attrs = dict(kernel_shape=ks, strides=st, dilations=dil, pads=pads)
    if group > 1:
        attrs["group"] = group
    b.node("Conv", ins, [T(None, F32, out, small=x.small)], ("linalg", k_red), **attrs)
    _maybe_epilogue(b)


def g_conv_transpose(b):
    """ConvTranspose over its whole spec: strides, dilations, groups,
    explicit pads or auto_pad (SAME_UPPER, SAME_LOWER, VALID),
    output_padding, output_shape. Avoided (onnxruntime 1.18 places the
    output otherwise than the ONNX reference and kiln; docs/testing.md):
    output_shape with explicit pads or below the natural size without
    SAME, output_shape more than one past the natural size (2-D), or
    together with output_padding, and SAME with a negative total padding."""
    x = b.pick(lambda t: flt(t) and t.rank in (3, 4) and t.numel <= 100000 and all(d >= 1 for d in t.shape))
    sp = x.rank - 2
    n, c = x.shape[:2]
    group = 1
    if c > 1 and b.chance(0.3):
        group = c if b.chance(0.4) else b.choice([g for g in (2, 4, 8) if c % g == 0] or [1])
    oc = b.choice([4, 8, 16, 24, 32]) if group == 1 else group * b.choice([1, 1, 2])
    ks = [b.choice([1, 2, 2, 3, 3, 4, 5]) for _ in range(sp)]
    st = [b.choice([1, 2, 2, 3]) for _ in ks]
    dil = [b.choice([1, 1, 1, 2]) for _ in ks]
    attrs = dict(kernel_shape=ks, strides=st)
    if any(d != 1 for d in dil) or b.chance(0.3):
        attrs["dilations"] = dil
    ext = [(k - 1) * d + 1 for k, d in zip(ks, dil)]
    opad = [0] * sp
    if b.chance(0.3):
        opad = [b.rint(0, max(s, d) - 1) for s, d in zip(st, dil)]
        attrs["output_padding"] = opad
    mode = b.choice(["pads", "pads", "none", "SAME_UPPER", "SAME_LOWER", "VALID", "output_shape"])
    if mode == "output_shape" or (mode.startswith("SAME") and b.chance(0.4)):
        opad = [0] * sp  # onnxruntime 1.18 places output_shape with output_padding its own way
        attrs.pop("output_padding", None)
        attrs["output_shape"] = []
    full = [s * (i - 1) + op + e for s, i, op, e in zip(st, x.shape[2:], opad, ext)]
    if mode == "pads":
        pads = [b.rint(0, e - 1) for e in ext] * 2
        pads[sp:] = [b.rint(0, e - 1) for e in ext]
        attrs["pads"] = pads
        out = [f - pads[i] - pads[i + sp] for i, f in enumerate(full)]
    elif mode in ("SAME_UPPER", "SAME_LOWER"):
        o = [i * s for i, s in zip(x.shape[2:], st)]
        if "output_shape" in attrs:
            o = [max(1, f - b.rint(0, 2)) for f in full]  # output_shape at or below the natural size
            attrs["output_shape"] = o
        if any(f < oo for f, oo in zip(full, o)):
            raise Reject()
        attrs["auto_pad"] = mode
        out = o
    elif mode == "output_shape":
        out = [f + b.rint(0, min(1, s - 1)) for f, s in zip(full, st)]  # onnxruntime shifts 2 past it (2-D)
        attrs["output_shape"] = out
    else:
        if mode == "VALID":
            attrs["auto_pad"] = "VALID"
        out = list(full)
    if any(o < 1 for o in out):
        raise Reject()
    out = [n, oc] + out
    k_red = c // group * int(np.prod(ks))
    if np.prod(out) * max(1, k_red // int(np.prod(st))) > 20e6 or np.prod(out) > 600000:
        raise Reject()  # keep each case fast in the reference evaluator
    w = b.rand_const(F32, [c, oc // group] + ks, "normal")
    b.inits[-1]["values"] = [v / math.sqrt(k_red) for v in b.inits[-1]["values"]]
    ins = [x, w]
    if b.chance(0.7):
        ins.append(b.rand_const(F32, (oc,), "normal"))
    if group > 1:
        attrs["group"] = group
    b.node("ConvTranspose", ins, [T(None, F32, out, small=x.small)], ("linalg", k_red), **attrs)
    _maybe_epilogue(b)


def _maybe_epilogue(b):
    """Conv/MatMul + Add + Relu/Clip chains that the fusion passes fuse."""
    y = b.pool[-1]
    if b.chance(0.4):
        if y.rank >= 2 and b.chance(0.5):
            s = [1] * y.rank
            s[1 if y.rank >= 3 else -1] = y.shape[1 if y.rank >= 3 else -1]
            c = b.rand_const(F32, s, "normal")
        else:
            cands = [t for t in b.usable() if t.dtype == F32 and t.shape == y.shape and t is not y]
            c = b.choice(cands) if cands else b.rand_const(F32, y.shape, "normal")
        y = b.node("Add", [y, c], [T(None, F32, y.shape, small=y.small)], "arith")
    # one or two activations: two clamps in a row merge into one post-op, and
    # two of one oneDNN algorithm with different parameters must not reach it
    acts = b.choice([0, 1, 1, 2])
    for _ in range(acts):
        op = b.choice(["Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "SiLU"] +
                      (["HardSwish"] if b.opset >= 14 else []))
        out = [T(None, F32, y.shape, small=True)]
        if op == "SiLU":  # as exporters write it: one Swish post-op
            s = b.node("Sigmoid", [y], [T(None, F32, y.shape, small=True)], "transc")
            y = b.node("Mul", [y, s] if b.chance(0.5) else [s, y], out, "transc")
        elif op == "Clip":
            lo, hi = b.choice([(0.0, 6.0), (-0.5, 1.5), (-1.0, 0.25), (2.0, 1.0)])
            y = b.node("Clip", [y, b.const(np.array(lo, np.float32)), b.const(np.array(hi, np.float32))], out, "exact")
        elif op == "LeakyRelu":
            y = b.node(op, [y], out, "arith", alpha=b.choice([0.01, 0.1, 0.5]))
        else:
            y = b.node(op, [y], out, "exact" if op == "Relu" else "transc")
    # a residual after the activations (a CSP/C2f bottleneck's shortcut):
    # the fusion must leave it out of a convolution (oneDNN's reference kernel)
    if acts and b.chance(0.3):
        cands = [t for t in b.usable() if t.dtype == F32 and t.shape == y.shape and t is not y]
        if cands:
            y = b.node("Add", [y, b.choice(cands)], [T(None, F32, y.shape, small=y.small)], "arith")


def g_matmul(b):
    x = b.pick(lambda t: flt(t) and t.rank >= 1 and t.numel <= 400000)
    k = x.shape[-1]
    n = b.choice([1, 7, 16, 64, 96, 128])
    if x.rank >= 3 and b.chance(0.3):
        wshape = list(x.shape[:-2])[-1:] + [k, n]  # batched
        wshape = [x.shape[-3], k, n]
    else:
        wshape = [k, n]
    if x.rank == 1:
        out = [n]
    else:
        batch = bcast(tuple(x.shape[:-2]), tuple(wshape[:-2]))
        out = list(batch) + [x.shape[-2], n]
    if np.prod(out) * k > 40e6:
        raise Reject()
    w = b.rand_const(F32, wshape, "normal")
    b.inits[-1]["values"] = [v / math.sqrt(k) for v in b.inits[-1]["values"]]
    b.node("MatMul", [x, w], [T(None, F32, out, small=x.small)], ("linalg", k))
    _maybe_epilogue(b)


def g_gemm(b):
    x = b.pick(lambda t: flt(t) and t.rank == 2)
    ta = b.rint(0, 1)
    m, k = (x.shape[1], x.shape[0]) if ta else x.shape
    n = b.choice([1, 8, 16, 33, 64])
    tb = b.rint(0, 1)
    w = b.rand_const(F32, [n, k] if tb else [k, n], "normal")
    b.inits[-1]["values"] = [v / math.sqrt(k) for v in b.inits[-1]["values"]]
    ins = [x, w]
    if b.chance(0.7):
        ins.append(b.rand_const(F32, b.choice([(n,), (1, n), (m, n)]), "normal"))
    attrs = {"transA": ta, "transB": tb}
    if b.chance(0.3):
        attrs.update(alpha=0.5, beta=2.0)
    if m * n * k > 40e6:
        raise Reject()
    b.node("Gemm", ins, [T(None, F32, (m, n), small=x.small)], ("linalg", k), **attrs)


def _q(b, x, scale, zp, dt=U8, family="exact"):
    """QuantizeLinear(x) per tensor (exact: both engines divide in float and round to even)."""
    return b.node("QuantizeLinear", [x, b.const(np.array(scale, np.float32)), b.const(np.array(zp, dt))],
                  [T(None, dt, x.shape, exact=True)], family)


def _dq(b, q, scale, zp, family="exact"):
    return b.node("DequantizeLinear", [q, b.const(np.array(scale, np.float32)), b.const(np.array(zp, q.dtype))],
                  [T(None, F32, q.shape, small=True)], family)


def g_qdq(b):
    """A quantized group as onnxruntime's QDQ quantizer writes it (passes/
    lower_qdq.c turns it into one oneDNN int8 kernel): Q -> DQ of a float
    activation, DQ of s8 weights (7-bit: CPUs without VNNI sum u8 x s8 pairs
    in saturating 16-bit lanes, in onnxruntime's kernels and oneDNN's alike)
    and of an int32 bias, Conv or MatMul, maybe Relu, Q -> DQ. Or a plain
    Q -> DQ (the generated per-tensor loops). Or an elementwise op between
    quantizations: DQ -> Add/Mul of a second quantized tensor (its own
    parameters), or Sigmoid/HardSwish/LeakyRelu -> Q -> DQ (one
    FusedElementwise loop with 8-bit inputs and output; a lookup table for
    the unary ops: passes/fuse_elementwise.c), or GlobalAveragePool -> Q ->
    DQ (QLinearGlobalAveragePool, an integer sum). The group's result, which may
    differ from onnxruntime's by one output step (one rounding instead of
    two), feeds nothing else (terminal): its "quant" family allows the step."""
    # an exact input: a value within its tolerance could round to the next step
    x = b.pick(lambda t: flt(t) and t.exact and t.numel <= 200000 and all(d >= 1 for d in t.shape))
    xs, xz = b.choice([0.02, 0.05, 0.1]), b.choice([0, 128, 100])
    xd = _dq(b, _q(b, x, xs, xz), xs, xz)
    kind = "conv" if x.rank == 4 and b.chance(0.5) else b.choice(["matmul", "plain", "elementwise", "pool"])
    if kind == "plain" or (kind == "conv" and x.rank != 4):
        return
    if kind in ("elementwise", "pool"):
        op = "GlobalAveragePool" if kind == "pool" else b.choice(["Add", "Mul", "Sigmoid", "HardSwish", "LeakyRelu"])
        if op == "HardSwish" and b.opset < 14 or op == "GlobalAveragePool" and x.rank < 3:
            raise Reject()
        ins, attrs, out = [xd], {}, x.shape
        if op in ("Add", "Mul"):
            x2 = b.pick(lambda t: flt(t) and t.exact and t.shape == x.shape)
            s2, z2 = b.choice([0.03, 0.07]), b.choice([0, 90, 128])
            ins.append(_dq(b, _q(b, x2, s2, z2), s2, z2))
        if op == "LeakyRelu":
            attrs["alpha"] = b.choice([0.01, 0.2])
        family = "transc" if op == "Sigmoid" else "arith"
        if op == "GlobalAveragePool":  # an integer sum per channel (QLinearGlobalAveragePool)
            out = x.shape[:2] + (1,) * (x.rank - 2)
            family = ("reduce", x.numel // (x.shape[0] * x.shape[1]))
        y = b.node(op, ins, [T(None, F32, out, small=True)], family, **attrs)
        ys, yz = (1 / 256, 0) if op == "Sigmoid" else (b.choice([0.02, 0.05, 0.1]), b.choice([0, 128]))
        yq = _q(b, y, ys, yz, family=["quant", ys])
        yq.terminal = True
        r = _dq(b, yq, ys, yz)
        r.terminal = True
        return
    if kind == "conv":
        n, c, h, w_ = x.shape
        oc, k = b.choice([4, 8, 16]), b.choice([1, 3])
        if h < k or w_ < k or n * oc * h * w_ * c * k * k > 20e6:
            raise Reject()
        wshape, axis, out, red = [oc, c, k, k], 0, [n, oc, h, w_], c * k * k
    else:
        if x.rank < 2:
            raise Reject()
        oc = b.choice([8, 16, 33])
        red = x.shape[-1]
        if x.numel // red * oc * red > 20e6:
            raise Reject()
        wshape, axis, out = [red, oc], 1, list(x.shape[:-1]) + [oc]
    wq = np.random.default_rng(b.rint(0, 2**31 - 1)).integers(-63, 64, size=wshape).astype(np.int8)
    ws = (np.random.default_rng(b.rint(0, 2**31 - 1)).uniform(0.5, 1.5, oc) / (40 * math.sqrt(red))).astype(np.float32)
    wd = b.node("DequantizeLinear", [b.const(wq), b.const(ws)], [T(None, F32, wshape, small=True)], "exact",
                axis=axis)
    if kind == "conv":
        bq = np.random.default_rng(b.rint(0, 2**31 - 1)).integers(-500, 500, size=oc).astype(np.int32)
        bd = b.node("DequantizeLinear", [b.const(bq), b.const((xs * ws).astype(np.float32))],
                    [T(None, F32, (oc,), small=True)], "exact", axis=0)
        y = b.node("Conv", [xd, wd, bd], [T(None, F32, out, small=True)], ("linalg", red), kernel_shape=[k, k],
                   pads=[k // 2] * 4)
    else:
        y = b.node("MatMul", [xd, wd], [T(None, F32, out, small=True)], ("linalg", red))
    if b.chance(0.5):
        y = b.node("Relu", [y], [T(None, F32, out, small=True)], "exact")
    ys, yz = b.choice([0.02, 0.05]), b.choice([0, 128])
    yq = _q(b, y, ys, yz, family=["quant", ys])
    yq.terminal = True  # read by its DequantizeLinear only (a graph output at most: one unit off)
    r = _dq(b, yq, ys, yz)
    r.terminal = True


def g_cumsum(b):
    x = b.pick(lambda t: t.dtype in (F32, I64, I32) and t.rank >= 1)
    ax = rand_axis(b, x.rank)
    n = x.shape[norm_axis(ax, x.rank)]
    ex = x.dtype in INTS
    b.node("CumSum", [x, b.const(np.array(ax, dtype=np.int64))], [T(None, x.dtype, x.shape, exact=ex)],
           "exact" if ex else ("reduce", n), exclusive=b.rint(0, 1), reverse=b.rint(0, 1))


def g_topk(b):
    x = b.pick(lambda t: t.exact and t.dtype in (F32, I64) and t.rank >= 1)
    ax = rand_axis(b, x.rank)
    a = norm_axis(ax, x.rank)
    kk = b.rint(1, min(8, x.shape[a]))
    out = list(x.shape)
    out[a] = kk
    # ties make the index order implementation-defined: inputs are random
    # normals (no ties) unless quarter-valued; only the values are compared
    # for those (see tolerances)
    b.node("TopK", [x, b.const_i64([kk])], [T(None, x.dtype, out, exact=True), T(None, I64, out, exact=True)],
           "exact", axis=ax, largest=b.rint(0, 1), sorted=1)


OPS = {}
for _op in UNARY:
    OPS[_op] = g_unary(_op)
for _op in ("Add", "Sub", "Mul", "Div", "Pow"):
    OPS[_op] = g_arith(_op)
for _op in ("Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"):
    OPS[_op] = g_compare(_op)
for _op in ("And", "Or", "Xor"):
    OPS[_op] = g_logic(_op)
for _op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift"):
    OPS[_op] = g_bitwise(_op)
for _op in ("Sum", "Mean", "Max", "Min"):
    OPS[_op] = g_variadic(_op)
for _op in REDUCES:
    OPS[_op] = g_reduce(_op)
for _op in ("MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"):
    OPS[_op] = g_pool(_op)
OPS.update({
    "Not/BitwiseNot": g_int_unary, "Acosh": g_acosh, "Shape": g_shape, "Mod": g_mod, "PRelu": g_prelu, "Clip": g_clip, "Where": g_where,
    "Cast/CastLike": g_cast, "Reshape": g_reshape, "Flatten": g_flatten, "Squeeze": g_squeeze,
    "Unsqueeze": g_unsqueeze, "Identity/Dropout": g_identity, "Transpose": g_transpose, "Concat": g_concat,
    "Split": g_split, "Slice": g_slice, "Gather": g_gather, "GatherElements": g_gather_elements,
    "Expand": g_expand, "Tile": g_tile, "Pad": g_pad, "DepthToSpace/SpaceToDepth": g_depth_space,
    "Resize": g_resize, "Scatter*": g_scatter, "ArgMax/ArgMin": g_argmax, "Softmax/LogSoftmax": g_softmax,
    "LayerNormalization": g_layernorm, "BatchNormalization": g_batchnorm,
    "InstanceNormalization": g_instnorm, "GroupNormalization": g_groupnorm, "LpNormalization": g_lpnorm,
    "Conv": g_conv, "ConvTranspose": g_conv_transpose, "MatMul": g_matmul, "Gemm": g_gemm, "CumSum": g_cumsum, "TopK": g_topk,
    "QuantizeLinear/DequantizeLinear": g_qdq,
})


# ---- whole graphs ------------------------------------------------------------------

def generate(seed, max_nodes=30, only=None):
    """A random spec from seed. `only`: restrict the op choice to these
    OPS keys (for focused runs)."""
    rng = np.random.default_rng(seed)
    b = Builder(rng, int(rng.choice([13, 17, 18, 18, 24])))  # 24: Swish
    if rng.random() < 0.15 and b.opset < 20:
        b.opset = 20  # Gelu
    n_in = b.rint(1, 3)
    base = rand_shape(b)
    for i in range(n_in):
        kind = b.choice(["normal", "normal", "pos", "unit", "quarter"])
        if i == 0 or b.chance(0.5):
            shape = base
        else:
            shape = bcast_shape(b, base) or (1,)
        dtype = F32
        r = b.rng.random()
        if r < 0.08:
            dtype, kind = I64, "int"
        elif r < 0.12:
            dtype, kind = I32, "int"
        elif r < 0.15:
            dtype, kind = BOOL, "bool"
        elif r < 0.20:
            dtype, kind = U8, "int"
        b.input(dtype, shape, kind)
    # log-uniform in [1, max_nodes] (mean 8.5 of 30): most bugs need a few
    # nodes, a small graph minimizes fast, and an hour of testing sees three
    # times as many graphs as with uniform sizes; 1 in 4 still has 12 or more
    target = min(max_nodes, max(1, int(math.exp(b.rng.uniform(0.0, math.log(max_nodes + 1))))))
    keys = sorted(only or OPS)
    want_dyn = rng.random() < 0.12 and base[0] >= 2
    if want_dyn and rng.random() < 0.5 and len(base) >= 2 and b.opset >= 15:
        # the shape of a dynamic input past N is known at compile time, though
        # its node must stay: the report's "folded" path
        x = b.pool[0]
        b.node("Shape", [x], [T(None, I64, (x.rank - 1,), exact=True)], "exact", start=1)
    if want_dyn and rng.random() < 0.3 and not only:
        # a oneDNN node (a convolution, a transposed one, a product) over the
        # dynamic dim: the report's "oneDNN, in rows" path, otherwise rare
        # enough (1 graph in 400) that a fixed batch may miss it
        mark = (len(b.nodes), len(b.inits), len(b.inputs), len(b.pool))
        try:
            OPS[b.choice(["Conv", "ConvTranspose", "MatMul"])](b)
        except Reject:
            del b.nodes[mark[0]:], b.inits[mark[1]:], b.inputs[mark[2]:], b.pool[mark[3]:]
    tries = 0
    while len(b.nodes) < target and tries < target * 20:
        tries += 1
        gen = OPS[b.choice(keys)]
        mark = (len(b.nodes), len(b.inits), len(b.inputs), len(b.pool))
        try:
            gen(b)
        except Reject:
            del b.nodes[mark[0]:], b.inits[mark[1]:], b.inputs[mark[2]:], b.pool[mark[3]:]
    if not b.nodes:
        return None
    # outputs: every tensor no node reads, plus a few others
    read = {i for nd in b.nodes for i in nd["inputs"]}
    produced = [o for nd in b.nodes for o in nd["outputs"]]
    outs = [o for o in produced if o not in read]
    for o in produced:
        if o not in outs and rng.random() < 0.1:
            outs.append(o)
    spec = {"version": 1, "seed": int(seed), "opset": b.opset, "inputs": b.inputs, "inits": b.inits,
            "nodes": b.nodes, "outputs": outs, "types": {t.name: [t.dtype, list(t.shape)] for t in b.pool}}
    # Some graphs are compiled with a dynamic leading dim (kiln compile
    # --max N=...): the inputs that share the base shape's first dim declare
    # it as the symbol N. Graphs whose shapes do not follow N affinely are
    # refused by kiln as unsupported, which is not a failure.
    if want_dyn:
        dyn = [i["name"] for i in b.inputs if len(i["shape"]) >= 2 and i["shape"][0] == base[0]
               and "range" not in i]
        if dyn:
            # compiled for up to N, run at N or below: a value the compiler
            # took for a constant of this size would show
            spec["dynamic"] = {"N": int(base[0]) + b.rint(0, 3), "inputs": dyn}
    return spec


def input_arrays(spec):
    """The input values of spec, from their seeds."""
    res = {}
    for i in spec["inputs"]:
        rng = np.random.default_rng(i["seed"])
        if "range" in i:
            lo, hi = i["range"]
            res[i["name"]] = rng.integers(lo, hi, size=tuple(i["shape"])).astype(i["dtype"])
        else:
            res[i["name"]] = draw(rng, i["dtype"], i["shape"], i["kind"])
    return res


def to_model(spec, outputs=None, dynamic=True):
    """The ONNX model of spec, with `outputs` (default: the spec's) as graph
    outputs; with `dynamic`, the spec's dynamic inputs declare dim 0 as N."""
    types = spec["types"]
    dyn = spec.get("dynamic", {}).get("inputs", []) if dynamic else []
    nodes = []
    for nd in spec["nodes"]:
        nodes.append(helper.make_node(nd["op"], nd["inputs"], nd["outputs"], domain=nd.get("domain", ""),
                                      **nd["attrs"]))
    inits = [numpy_helper.from_array(np.array(c["values"], dtype=c["dtype"]).reshape(c["shape"]), c["name"])
             for c in spec["inits"]]
    ins = [helper.make_tensor_value_info(i["name"], ONNX_TYPE[i["dtype"]],
                                         ["N"] + i["shape"][1:] if i["name"] in dyn else i["shape"])
           for i in spec["inputs"]]
    outs = [helper.make_tensor_value_info(o, ONNX_TYPE[types[o][0]], None if dyn else types[o][1])
            for o in (outputs or spec["outputs"])]
    g = helper.make_graph(nodes, "difftest_%d" % spec["seed"], ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", spec["opset"])], producer_name="kiln-difftest")
    m.ir_version = 8
    return m


def ancestors(spec):
    """For each tensor name, the set of node indices it depends on."""
    anc = {}
    for k, nd in enumerate(spec["nodes"]):
        s = {k}
        for i in nd["inputs"]:
            s |= anc.get(i, set())
        for o in nd["outputs"]:
            anc[o] = s
    return anc


def norm_groups(nd, x):
    """x reshaped to [groups, elements normalized together] for node nd."""
    op, r = nd["op"], x.ndim
    if op == "LayerNormalization":
        a = nd["attrs"].get("axis", -1)
        a = a + r if a < 0 else a
        return x.reshape(int(np.prod(x.shape[:a], dtype=np.int64)), -1)
    if op == "InstanceNormalization":
        return x.reshape(x.shape[0] * x.shape[1], -1)
    if op == "GroupNormalization":
        return x.reshape(x.shape[0] * nd["attrs"]["num_groups"], -1)
    return x.reshape(1, -1)


def norm_condition(nd, x):
    """How much a normalization of x amplifies rounding, over its worst
    group: (mean / std)^2 + 1 (one-pass float32 variances, onnxruntime's
    LayerNormalization among them, lose that factor), and eps-sized
    variances (tiny groups of nearly equal values)."""
    if nd["op"] == "LpNormalization":
        return 1.0  # no subtraction
    g = norm_groups(nd, x.astype(np.float64))
    mean, var = g.mean(axis=1), g.var(axis=1)
    if np.any(var < 1e-4):
        return float("inf")
    return float(np.max(mean * mean / var)) + 1.0


def ill_conditioned(spec, values, limit=30.0):
    """True if a normalization in spec reads an input so far from zero mean
    that float32 engines may disagree by more than any useful tolerance."""
    for nd in spec["nodes"]:
        fam = nd["family"]
        if isinstance(fam, list) and fam[0] == "norm":
            x = values.get(nd["inputs"][0])
            if x is not None and norm_condition(nd, x) > limit:
                return True
    return False


def tolerances(spec, values):
    """(rtol, atol) of each output: 0, 0 when every op on its paths is exact;
    else the sum of the ops' family rtols (reductions and products scaled
    by the square root of their length), plus f16's rounding when an f16
    value is on its paths, as rtol, and that times the largest magnitude on
    its paths as atol (cancellation: a difference of two large values is
    checked against their size, not its own)."""
    anc = ancestors(spec)
    res = []
    for o in spec["outputs"]:
        r, mag, steps, narrow = 0.0, 0.0, 0.0, False
        for k in anc.get(o, ()):
            nd = spec["nodes"][k]
            fam = nd["family"]
            narrow |= any(spec["types"].get(t, ("",))[0] == F16 for t in nd["outputs"])
            if isinstance(fam, list) and fam[0] == "quant":
                steps += fam[1] * 1.001  # one output step (g_qdq)
            elif isinstance(fam, list) and fam[0] == "resample":
                r += FAMILY_RTOL["resample"] * fam[1]
            elif isinstance(fam, list):
                cond = norm_condition(nd, values[nd["inputs"][0]]) if fam[0] == "norm" else 1.0
                r += FAMILY_RTOL[fam[0]] * max(1.0, math.sqrt(fam[1])) * cond
            else:
                r += FAMILY_RTOL[fam]
            for t in nd["inputs"] + nd["outputs"]:
                v = values.get(t)
                if v is not None and v.dtype.kind == "f" and v.size:
                    mag = max(mag, float(np.max(np.abs(v))))
        if steps and spec["types"][o][0] in (U8, I8):
            steps = 1.0  # the 8-bit tensor itself: one unit
        if r == 0.0:
            res.append((0.0, steps))
        else:
            # f16 values round to 11 bits: an output in f16, or one computed
            # through an f16 value, may differ by one f16 step where an
            # approximate value before it lies at a rounding boundary (found:
            # Softsign -> Cast f16 -> Cast f32, seed 564704054)
            if spec["types"][o][0] == F16 or narrow:
                r += 2e-3
            res.append((r, r * max(mag, 1e-3) + steps))
    return res


def dump(spec, path):
    with open(path, "w") as f:
        json.dump(spec, f, indent=None, separators=(",", ":"))
