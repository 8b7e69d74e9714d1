"""Score modifications written in Python: attention(..., score_mod=fn) traces `fn` once into
the op's score_mod region, so every kernel fuses it and the compiler derives its gradient.

    def fn(score, b, h, q_idx, kv_idx, bias, lens):
        s = score + bias[h, q_idx, kv_idx]
        return flash_mlir.score.where(kv_idx < lens[b], s, -float("inf"))
    flash_mlir.attention(q, k, v, score_mod=fn, score_mod_args=(bias, lens))

`fn` receives the scaled score (f32), one index per batch dim of q (batch, heads...), the
query row and the key column, then one tensor per entry of score_mod_args, and returns the
new score. The values it sees are symbolic: + - * / // % (floor division and modulo on indices, as Python defines them) unary -, abs(), comparisons, & | ^ ~
on comparisons, Python numbers, indexing an argument tensor with indices, and the functions
here (where, exp, exp2, log, tanh, sqrt, maximum, minimum), or the NumPy ufuncs and torch
functions of the same names (np.tanh, torch.where, ...), so a FlexAttention score_mod runs
unchanged. Arrays the function reads from its closure or its module's globals are
captures too (FlexMods). Python's `and`, `or`, `if` on a traced value and anything else
raise TypeError naming the operation. Indices are 64-bit integers; an index meets a float
as its value (i converted to f32). mask_kind proves a FlexAttention mask_mod causal or a
window on given shapes.
"""
import math
import numbers
import re

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


def _floor_div(a, b):
    a, b, t = _pair(a, b)
    if t != "index":
        raise TypeError("score_mod: // takes integers (indices)")
    return a.trace.emit("arith.floordivsi %s, %s : index" % (a.name, b.name), "index")


def _floor_mod(a, b):
    """Python's a % b, whose sign is b's: a - (a // b) * b."""
    _, _, t = _pair(a, b)
    if t != "index":
        raise TypeError("score_mod: % takes integers (indices)")
    return _arith(None, "subi", a, _arith(None, "muli", _floor_div(a, b), b))


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
        return _floor_div(self, o)

    def __rfloordiv__(self, o):
        return _floor_div(o, self)

    def __neg__(self):
        if self.type == "i1":
            raise TypeError("score_mod: negation of a comparison; use ~")
        if self.type == "index" or self.type in _INT_TYPES:
            return _arith("subf", "subi", 0, self)
        return self.trace.emit("arith.negf %s : f32" % _to_f32(self).name, "f32")

    def __abs__(self):
        if self.type in _FLOAT_TYPES:
            return self.trace.emit("math.absf %s : f32" % _to_f32(self).name, "f32")
        # max(x, -x): every lowering has maxsi on index (math.absi on index has
        # no LLVM lowering in the GPU pipeline).
        x = _to_index(self)
        return _arith(None, "maxsi", x, _arith(None, "subi", 0, x))

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
        return _floor_mod(self, o)

    def __rmod__(self, o):
        return _floor_mod(o, self)

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


# --- Flex-style functions: NumPy ufuncs and torch functions on traced values, arrays read
# from a function's closure or globals, and mask_mod ---------------------------------------

_UFUNCS = {
    "tanh": lambda x: tanh(x), "exp": lambda x: exp(x), "exp2": lambda x: exp2(x),
    "log": lambda x: log(x), "sqrt": lambda x: sqrt(x), "absolute": abs,
    "negative": lambda x: -x, "maximum": lambda x, y: maximum(x, y),
    "minimum": lambda x, y: minimum(x, y), "add": lambda x, y: x + y,
    "subtract": lambda x, y: x - y, "multiply": lambda x, y: x * y,
    "true_divide": lambda x, y: x / y, "divide": lambda x, y: x / y,
    "floor_divide": lambda x, y: x // y, "less": lambda x, y: x < y,
    "less_equal": lambda x, y: x <= y, "greater": lambda x, y: x > y,
    "greater_equal": lambda x, y: x >= y, "equal": lambda x, y: x == y,
    "not_equal": lambda x, y: x != y, "logical_and": lambda x, y: x & y,
    "logical_or": lambda x, y: x | y, "logical_xor": lambda x, y: x ^ y,
    "bitwise_and": lambda x, y: x & y, "bitwise_or": lambda x, y: x | y,
    "logical_not": lambda x: ~x, "invert": lambda x: ~x,
}

# torch functions by name (torch.tanh, torch.where, ...; Tensor methods resolve to the same
# names through __torch_function__).
_TORCH = dict(_UFUNCS, where=lambda c, x, y: where(c, x, y), abs=abs,
              neg=lambda x: -x, sub=lambda x, y: x - y, mul=lambda x, y: x * y,
              div=lambda x, y: x / y, clamp=lambda x, min=None, max=None: _clamp(x, min, max),
              sigmoid=lambda x: 1.0 / (1.0 + exp(-x)), eq=lambda x, y: x == y,
              ne=lambda x, y: x != y, lt=lambda x, y: x < y, le=lambda x, y: x <= y,
              gt=lambda x, y: x > y, ge=lambda x, y: x >= y)


def _clamp(x, lo, hi):
    if lo is not None:
        x = maximum(x, lo)
    if hi is not None:
        x = minimum(x, hi)
    return x


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    impl = _UFUNCS.get(ufunc.__name__)
    if method != "__call__" or impl is None or kwargs:
        raise TypeError("score_mod: numpy.%s%s is not supported on traced values; use "
                        "flash_mlir.score's functions" % (
                            ufunc.__name__, "" if method == "__call__" else "." + method))
    return impl(*inputs)


def _array_function(self, func, types, args, kwargs):
    if func.__name__ == "where" and not kwargs and len(args) == 3:
        return where(*args)
    raise TypeError("score_mod: numpy.%s is not supported on traced values" % func.__name__)


def _torch_function(cls, func, types, args=(), kwargs=None):
    name = getattr(func, "__name__", str(func)).rstrip("_")
    impl = _TORCH.get(name)
    if impl is None:
        raise TypeError("score_mod: torch.%s is not supported on traced values; use "
                        "flash_mlir.score's functions" % name)
    return impl(*args, **(kwargs or {}))


Value.__array_ufunc__ = _array_ufunc
Value.__array_function__ = _array_function
Value.__torch_function__ = classmethod(_torch_function)
Tensor.__torch_function__ = classmethod(_torch_function)


def _is_array(x):
    mod = type(x).__module__
    return (mod.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "shape")) or \
        (mod == "numpy" and type(x).__name__ == "ndarray")


def free_arrays(fn):
    """The arrays `fn` reads from its closure cells and its module's globals, as
    [(("cell", index) | ("global", name), array)], in that order."""
    return function_scan(fn)[1]


def _cell_value(cell):
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (a name not bound yet)
        return None


def _array_sig(x):
    return (type(x), x.dtype, tuple(x.shape), getattr(x, "is_cuda", False))


def function_scan(fn):
    """(key, arrays) of `fn` in one pass over its closure and globals: the key is what
    tracing it depends on — its code, defaults, closed-over values (an array by its type,
    dtype and shape: it is read as a capture) and the global arrays it names —, None when
    one of them is not hashable (then it is traced on every call); the arrays are
    free_arrays(fn)."""
    if fn is None:
        return None, []
    found, cells, globs = [], [], []
    for n, c in enumerate(getattr(fn, "__closure__", None) or ()):
        v = _cell_value(c)
        if v is not None and _is_array(v):
            found.append((("cell", n), v))
            cells.append(_array_sig(v))
        else:
            cells.append(v)
    code = getattr(fn, "__code__", None)
    if code is None:
        found = []
    else:
        g = getattr(fn, "__globals__", {})
        for n in dict.fromkeys(code.co_names):
            if n in g and _is_array(g[n]):
                found.append((("global", n), g[n]))
                globs.append((n, _array_sig(g[n])))
    key = (getattr(fn, "__code__", fn), getattr(fn, "__defaults__", None), tuple(cells),
           tuple(globs))
    try:
        hash(key)
    except (TypeError, ValueError):
        key = None
    return key, found


def function_key(fn):
    """function_scan's key alone."""
    return function_scan(fn)[0]


def _rebind(fn, where_proxies):
    """`fn` with the arrays free_arrays found replaced by `where_proxies` [(where, proxy)]."""
    import types
    if not where_proxies:
        return fn
    cells = list(fn.__closure__ or ())
    g = None
    for (kind, at), proxy in where_proxies:
        if kind == "cell":
            cells[at] = types.CellType(proxy)
        else:
            if g is None:
                g = dict(fn.__globals__)
            g[at] = proxy
    new = types.FunctionType(fn.__code__, fn.__globals__ if g is None else g, fn.__name__,
                             fn.__defaults__, tuple(cells) if fn.__closure__ else None)
    new.__kwdefaults__ = fn.__kwdefaults__
    return new


class FlexMods:
    """attention()'s score_mod= and mask_mod= as one traceable score function.

    score_mod(score, *batch_indices, q_idx, kv_idx, *score_mod_args) returns the new score;
    mask_mod(*batch_indices, q_idx, kv_idx) returns whether the key is visible (a
    comparison), FlexAttention's signatures. The arrays either reads from its closure or
    its module's globals (a bias, per-head slopes, document ids) are its captures, read in
    the kernel: `arrays` lists them, to be passed after score_mod_args. Calling the
    object traces score_mod(...) masked by mask_mod: where(mask, score, -inf)."""

    def __init__(self, score_mod, mask_mod, num_args, with_mask=True):
        self.score_mod, self.num_args = score_mod, num_args
        self.mask_mod = mask_mod if with_mask else None
        scans = [function_scan(f) for f in (score_mod, self.mask_mod)]
        self._found = [found for _, found in scans]
        self.arrays = tuple(a for found in self._found for _, a in found)
        self.key = None
        keys = tuple(key for key, _ in scans)
        if all(k is not None or f is None for k, f in zip(keys, (score_mod, self.mask_mod))):
            self.key = (keys, num_args)
        self.__name__ = getattr(score_mod or mask_mod, "__name__", "score_mod")

    def __call__(self, score, *rest):
        n_caps = len(self.arrays)
        caps = rest[len(rest) - n_caps:] if n_caps else ()
        rest = rest[:len(rest) - n_caps]
        indices, args = rest[:len(rest) - self.num_args], rest[len(rest) - self.num_args:]
        n_s = len(self._found[0])
        out = score
        if self.score_mod is not None:
            fn = _rebind(self.score_mod, [(w, c) for (w, _), c in zip(self._found[0], caps)])
            out = fn(score, *indices, *args)
        if self.mask_mod is not None:
            fn = _rebind(self.mask_mod,
                         [(w, c) for (w, _), c in zip(self._found[1], caps[n_s:])])
            visible = fn(*indices)
            if not isinstance(visible, Value) or visible.type != "i1":
                raise TypeError("mask_mod must return a comparison of its indices, got %r"
                                % (visible,))
            out = where(visible, out, -float("inf"))
        return out


def mask_kind(mask_mod, num_batch_dims, lq, lk):
    """What `mask_mod` is on an Lq x Lk score matrix, proved by evaluating it on every
    (q_idx, kv_idx): ("none",), ("causal", align) or ("window", W, align) — the structured
    masks every kernel skips tiles of —, or None (anything else, or one that reads the
    batch indices or an array: it stays a score modification)."""
    import numpy as np
    if free_arrays(mask_mod):
        return None
    tr = _Trace()
    idx = [Value(tr, "%%x%d" % i, "index") for i in range(num_batch_dims + 2)]
    try:
        out = mask_mod(*idx)
    except TypeError:
        return None
    if not isinstance(out, Value) or out.type != "i1":
        return None
    body = "\n".join(tr.lines)
    if any(re.search(r"%%x%d\b" % i, body) for i in range(num_batch_dims)):
        return None
    try:
        import torch
        arange = lambda n: torch.arange(n, dtype=torch.int64)  # noqa: E731
        as_np = lambda m: m.numpy() if hasattr(m, "numpy") else np.asarray(m)  # noqa: E731
    except ImportError:
        arange = lambda n: np.arange(n, dtype=np.int64)  # noqa: E731
        as_np = np.asarray
    jj = arange(lk)[None, :]
    first = np.full(lq, -1, np.int64)
    last = np.full(lq, -2, np.int64)
    rows = max(1, (1 << 22) // max(lk, 1))
    for r0 in range(0, lq, rows):
        ii = arange(min(lq, r0 + rows))[r0:, None]
        try:
            m = np.broadcast_to(as_np(mask_mod(*([0] * num_batch_dims), ii, jj)),
                                (len(ii), lk)).astype(bool)
        except Exception:  # written for symbolic values only: keep it a score_mod
            return None
        count = m.sum(axis=1)
        lo = np.where(count > 0, m.argmax(axis=1), -1)
        hi = np.where(count > 0, lk - 1 - m[:, ::-1].argmax(axis=1), -2)
        if np.any((count > 0) & (hi - lo + 1 != count)):
            return None  # not one interval per row
        first[r0:r0 + len(ii)], last[r0:r0 + len(ii)] = lo, hi
    if lq == 0 or lk == 0:
        return None
    if np.all(first == 0) and np.all(last == lk - 1):
        return ("none",)
    i = np.arange(lq)
    for align, off in (("top_left", 0), ("bottom_right", lk - lq)):
        diag = i + off
        hi = np.minimum(diag, lk - 1)
        empty = diag < 0
        if not np.array_equal(np.where(empty, -2, hi), last):
            continue
        lo = np.where(empty, -1, 0)
        if np.array_equal(lo, first):
            return ("causal", align)
        starts = first[(~empty) & (first > 0)]
        if starts.size == 0:
            continue
        w = int((diag - first)[(~empty) & (first > 0)][0]) + 1
        lo_w = np.where(empty | (diag - w + 1 > lk - 1), -1, np.maximum(diag - w + 1, 0))
        if w > 0 and np.array_equal(lo_w, first):
            return ("window", w, align)
    return None
