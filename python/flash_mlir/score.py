"""Score modifications written in Python: attention(..., score_mod=fn) traces `fn` once into
the op's score_mod region, so every kernel fuses it and the compiler derives its gradient.

    def fn(score, b, h, q_idx, kv_idx, bias, lens):
        s = score + bias[h, q_idx, kv_idx]
        return flash_mlir.score.where(kv_idx < lens[b], s, -float("inf"))
    flash_mlir.attention(q, k, v, score_mod=fn, score_mod_args=(bias, lens))

`fn` receives the scaled score (f32), one index per batch dim of q (batch, heads...), the
query row and the key column, then one tensor per entry of score_mod_args, and returns the
new score. The values it sees are symbolic: + - * / // unary -, abs(), comparisons, & | ^ ~
on comparisons, Python numbers, indexing an argument tensor with indices, and the functions
here (where, exp, exp2, log, tanh, sqrt, maximum, minimum). Python's `and`, `or`, `if` on a
traced value and anything else raise TypeError naming the operation. Indices are 64-bit
integers; an index meets a float as its value (i converted to f32).
"""
import math
import numbers

__all__ = ["where", "exp", "exp2", "log", "tanh", "sqrt", "maximum", "minimum"]

_FLOAT_TYPES = ("f32", "f16", "bf16")
_INT_TYPES = ("i64", "i32", "i8", "index")


class _Trace:
    """The SSA lines of one region being traced."""

    def __init__(self):
        self.lines = []
        self.count = 0

    def emit(self, rhs, type_):
        name = "%%t%d" % self.count
        self.count += 1
        self.lines.append("    %s = %s" % (name, rhs))
        return Value(self, name, type_)

    def const(self, x, type_):
        if type_ == "f32":
            x = float(x)
            if math.isnan(x):
                lit = "0x7FC00000"
            elif math.isinf(x):
                lit = "0x7F800000" if x > 0 else "0xFF800000"
            else:
                lit = "%.9e" % x
            return self.emit("arith.constant %s : f32" % lit, "f32")
        if type_ == "i1":
            return self.emit("arith.constant %s" % ("true" if x else "false"), "i1")
        return self.emit("arith.constant %d : %s" % (int(x), type_), type_)


def _trace_of(*xs):
    for x in xs:
        if isinstance(x, Value):
            return x.trace
    raise TypeError("score_mod: no traced value among the operands")


def _lift(trace, x, like):
    """x (a Value or a Python number) as a Value; numbers take the type
    `like` suggests (a float is always f32)."""
    if isinstance(x, Value):
        return x
    if isinstance(x, bool):
        return trace.const(x, "i1")
    if isinstance(x, numbers.Integral):
        return trace.const(x, like if like in _INT_TYPES or like == "f32" else "index")
    if isinstance(x, numbers.Real):
        return trace.const(x, "f32")
    raise TypeError("score_mod: cannot use a %s in a traced expression" % type(x).__name__)


def _to_f32(v):
    if v.type == "f32":
        return v
    if v.type in ("f16", "bf16"):
        return v.trace.emit("arith.extf %s : %s to f32" % (v.name, v.type), "f32")
    if v.type == "index":
        i = v.trace.emit("arith.index_cast %s : index to i64" % v.name, "i64")
        return v.trace.emit("arith.sitofp %s : i64 to f32" % i.name, "f32")
    if v.type in ("i64", "i32", "i8"):
        return v.trace.emit("arith.sitofp %s : %s to f32" % (v.name, v.type), "f32")
    raise TypeError("score_mod: a %s value cannot be used as a number" % v.type)


def _to_index(v):
    if v.type == "index":
        return v
    if v.type in ("i64", "i32", "i8"):
        return v.trace.emit("arith.index_cast %s : %s to index" % (v.name, v.type), "index")
    raise TypeError("score_mod: a %s value cannot be used as an integer" % v.type)


def _pair(a, b):
    """The two operands in one type: f32 if either is a float, else index."""
    trace = _trace_of(a, b)
    like = a.type if isinstance(a, Value) else b.type
    a, b = _lift(trace, a, like), _lift(trace, b, like)
    if "i1" in (a.type, b.type):
        raise TypeError("score_mod: arithmetic on a comparison; use where(cond, x, y)")
    if a.type in _FLOAT_TYPES or b.type in _FLOAT_TYPES:
        return _to_f32(a), _to_f32(b), "f32"
    return _to_index(a), _to_index(b), "index"


def _arith(op_f, op_i, a, b):
    a, b, t = _pair(a, b)
    if t == "f32":
        return a.trace.emit("arith.%s %s, %s : f32" % (op_f, a.name, b.name), "f32")
    if op_i is None:
        return a.trace.emit("arith.%s %s, %s : f32" % (op_f, _to_f32(a).name,
                                                        _to_f32(b).name), "f32")
    return a.trace.emit("arith.%s %s, %s : index" % (op_i, a.name, b.name), "index")


_CMP = {"lt": ("olt", "slt"), "le": ("ole", "sle"), "gt": ("ogt", "sgt"),
        "ge": ("oge", "sge"), "eq": ("oeq", "eq"), "ne": ("une", "ne")}


def _compare(kind, a, b):
    a, b, t = _pair(a, b)
    pf, pi = _CMP[kind]
    if t == "f32":
        return a.trace.emit("arith.cmpf %s, %s, %s : f32" % (pf, a.name, b.name), "i1")
    return a.trace.emit("arith.cmpi %s, %s, %s : index" % (pi, a.name, b.name), "i1")


def _logic(op, a, b):
    trace = _trace_of(a, b)
    a, b = _lift(trace, a, "i1"), _lift(trace, b, "i1")
    if a.type != "i1" or b.type != "i1":
        raise TypeError("score_mod: & | ^ combine comparisons, got %s and %s" % (a.type, b.type))
    return trace.emit("arith.%s %s, %s : i1" % (op, a.name, b.name), "i1")


class Value:
    """A traced scalar: an SSA name in the region and its type (f32, index, i1, or the
    element type of a tensor it was read from)."""

    def __init__(self, trace, name, type_):
        self.trace, self.name, self.type = trace, name, type_

    def __add__(self, o): return _arith("addf", "addi", self, o)
    def __radd__(self, o): return _arith("addf", "addi", o, self)
    def __sub__(self, o): return _arith("subf", "subi", self, o)
    def __rsub__(self, o): return _arith("subf", "subi", o, self)
    def __mul__(self, o): return _arith("mulf", "muli", self, o)
    def __rmul__(self, o): return _arith("mulf", "muli", o, self)
    def __truediv__(self, o): return _arith("divf", None, self, o)
    def __rtruediv__(self, o): return _arith("divf", None, o, self)

    def __floordiv__(self, o):
        a, b, t = _pair(self, o)
        if t != "index":
            raise TypeError("score_mod: // takes integers (indices)")
        return a.trace.emit("arith.floordivsi %s, %s : index" % (a.name, b.name), "index")

    def __neg__(self):
        if self.type == "i1":
            raise TypeError("score_mod: negation of a comparison; use ~")
        if self.type == "index" or self.type in _INT_TYPES:
            return _arith("subf", "subi", 0, self)
        return self.trace.emit("arith.negf %s : f32" % _to_f32(self).name, "f32")

    def __abs__(self):
        if self.type in _FLOAT_TYPES:
            return self.trace.emit("math.absf %s : f32" % _to_f32(self).name, "f32")
        x = _to_index(self)
        return self.trace.emit("math.absi %s : index" % x.name, "index")

    def __lt__(self, o): return _compare("lt", self, o)
    def __le__(self, o): return _compare("le", self, o)
    def __gt__(self, o): return _compare("gt", self, o)
    def __ge__(self, o): return _compare("ge", self, o)
    def __eq__(self, o): return _compare("eq", self, o)
    def __ne__(self, o): return _compare("ne", self, o)
    def __and__(self, o): return _logic("andi", self, o)
    def __rand__(self, o): return _logic("andi", o, self)
    def __or__(self, o): return _logic("ori", self, o)
    def __ror__(self, o): return _logic("ori", o, self)
    def __xor__(self, o): return _logic("xori", self, o)
    def __rxor__(self, o): return _logic("xori", o, self)

    def __invert__(self):
        if self.type != "i1":
            raise TypeError("score_mod: ~ takes a comparison, got %s" % self.type)
        return _logic("xori", self, True)

    __hash__ = None

    def __bool__(self):
        raise TypeError("score_mod: a traced value has no truth value at trace time (Python "
                        "`if`, `and`, `or`, `not`); use where(cond, x, y), &, |, ~")

    def __mod__(self, o):
        raise TypeError("score_mod: % is not supported; use // and -")

    __rmod__ = __mod__

    def __pow__(self, o):
        raise TypeError("score_mod: ** is not supported; use * or exp/log")

    __rpow__ = __pow__

    def __float__(self):
        raise TypeError("score_mod: a traced value is not a Python number")

    __int__ = __index__ = __float__


class Tensor:
    """A score_mod argument: indexing it with one index (or Python int) per dim reads an
    element (tensor.extract); float elements are read as f32."""

    def __init__(self, trace, name, shape, elt):
        self.trace, self.name, self.shape, self.elt = trace, name, tuple(shape), elt

    @property
    def type(self):
        dims = "x".join(str(d) for d in self.shape)
        return "tensor<%sx%s>" % (dims, self.elt) if self.shape else "tensor<%s>" % self.elt

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != len(self.shape):
            raise TypeError("score_mod: an argument of shape %s takes %d indices, got %d"
                            % (self.shape, len(self.shape), len(idx)))
        names = []
        for i in idx:
            if isinstance(i, bool) or not isinstance(i, (Value, numbers.Integral)):
                raise TypeError("score_mod: tensor indices are indices or Python ints, got %r"
                                % (i,))
            names.append(_to_index(_lift(self.trace, i, "index")).name)
        elt = "i1" if self.elt == "i1" else self.elt
        v = self.trace.emit("tensor.extract %s[%s] : %s" % (self.name, ", ".join(names),
                                                            self.type), elt)
        return _to_f32(v) if elt in ("f16", "bf16") else v

    def __bool__(self):
        raise TypeError("score_mod: index a score_mod argument with [...] to read it")


def where(cond, x, y):
    """cond ? x : y, elementwise (arith.select)."""
    trace = _trace_of(cond, x, y)
    cond = _lift(trace, cond, "i1")
    if cond.type != "i1":
        raise TypeError("score_mod: where() takes a comparison as its condition, got %s"
                        % cond.type)
    if not isinstance(x, Value) and not isinstance(y, Value):
        x = _lift(trace, x, "f32")
    a, b, t = _pair(x, y)
    return trace.emit("arith.select %s, %s, %s : %s" % (cond.name, a.name, b.name, t), t)


def _unary(op):
    def fn(x):
        trace = _trace_of(x)
        x = _to_f32(_lift(trace, x, "f32"))
        return trace.emit("math.%s %s : f32" % (op, x.name), "f32")
    fn.__name__ = op
    fn.__doc__ = "math.%s on a traced f32 value." % op
    return fn


exp, exp2, log, tanh, sqrt = (_unary(op) for op in ("exp", "exp2", "log", "tanh", "sqrt"))


def _extremum(float_op, int_op, doc):
    def fn(x, y):
        a, b, t = _pair(x, y)
        op = float_op if t == "f32" else int_op
        return a.trace.emit("arith.%s %s, %s : %s" % (op, a.name, b.name, t), t)
    fn.__doc__ = doc
    return fn


maximum = _extremum("maximumf", "maxsi",
                    "max(x, y) (arith.maximumf on floats, arith.maxsi on indices).")
minimum = _extremum("minimumf", "minsi",
                    "min(x, y) (arith.minimumf on floats, arith.minsi on indices).")


def trace(fn, num_batch_dims, args):
    """(region text, captures) of `fn` traced with score, indices and one Tensor per
    (shape, element type) in args: the `score_mod {...}` clause for arguments named
    %s, %x0..., %c0..., and the capture types."""
    tr = _Trace()
    score = Value(tr, "%s", "f32")
    indices = [Value(tr, "%%x%d" % i, "index") for i in range(num_batch_dims + 2)]
    tensors = [Tensor(tr, "%%c%d" % n, shape, elt) for n, (shape, elt) in enumerate(args)]
    try:
        out = fn(score, *indices, *tensors)
    except TypeError as e:
        if str(e).startswith("score_mod:"):
            raise
        raise TypeError("score_mod: tracing %s failed: %s (the function sees symbolic "
                        "values; see flash_mlir.score)" % (getattr(fn, "__name__", fn), e)) \
            from e
    if isinstance(out, Tensor) or (isinstance(out, Value) and out.type == "i1"):
        raise TypeError("score_mod must return a score (a number), got a %s"
                        % ("tensor" if isinstance(out, Tensor) else "comparison"))
    out = _to_f32(_lift(tr, out, "f32") if not isinstance(out, Value) else out)
    lines = tr.lines + ["    flash.yield %s : f32" % out.name]
    decl = ", ".join(["%s: f32"] + ["%s: index" % i.name for i in indices] +
                     ["%s: %s" % (t.name, t.type) for t in tensors])
    return " score_mod {\n  ^bb0(%s):\n%s\n  }" % (decl, "\n".join(lines))
