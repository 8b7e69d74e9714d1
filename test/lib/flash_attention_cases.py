"""flash.attention test cases: MLIR text, fresh random inputs, float64 reference.

A `Case` describes one configuration (element type, head dims, batch dims,
GQA, mask, score_mod, LSE); `module_text` emits a func.func `@attn` with
dynamic batch/Lq/Lk dims so one compiled module serves every length, and
`reference` computes the op's meaning with the shared float64 reference
(python/tests/reference.py).
"""
import os
import sys

import numpy as np

import flash_cpu_runner as fcr

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python", "tests"))
from reference import attention_ref  # noqa: E402

ELEM = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


class Case:
    def __init__(self, name, d=64, dv=48, batch=(), hkv=None, elem="f32",
                 mask=None, window=0, bottom_right=False, score_mod=None,
                 lse=False, scale=None, softcap=2.0):
        self.name = name
        self.d, self.dv = d, dv
        self.batch = tuple(batch)          # query batch dims (last = heads)
        self.hkv = hkv                     # key/value heads (GQA) or None
        self.elem = elem
        self.mask = mask                   # None | "causal" | "sliding_window"
        self.window = window
        self.bottom_right = bottom_right
        # None | "bias" | "softcap" | "alibi" | "boolmask" (an i1 [Lq, Lk]
        # capture; false -> -inf, with some rows entirely false)
        self.score_mod = score_mod
        self.lse = lse
        self.scale = scale if scale is not None else 1.0 / np.sqrt(d)
        self.softcap = softcap

    @property
    def nb(self):
        return len(self.batch)

    def kv_batch(self):
        b = list(self.batch)
        if self.hkv is not None:
            b[-1] = self.hkv
        return tuple(b)

    # -- MLIR -----------------------------------------------------------------
    def module_text(self):
        t = self.elem
        dyn = "?x" * (self.nb + 1)
        qt = "tensor<%s%dx%s>" % (dyn, self.d, t)
        kt = "tensor<%s%dx%s>" % (dyn, self.d, t)
        vt = "tensor<%s%dx%s>" % (dyn, self.dv, t)
        ot = "tensor<%s%dx%s>" % (dyn, self.dv, t)
        lt = "tensor<%sxf32>" % ("?x" * self.nb + "?")
        args = ["%%q: %s" % qt, "%%k: %s" % kt, "%%v: %s" % vt, "%%init: %s" % ot]
        outs, out_types = ["%init"], [ot]
        if self.lse:
            args.append("%%lse: %s" % lt)
            outs.append("%lse")
            out_types.append(lt)
        captures = ""
        cap_args = ""
        if self.score_mod == "bias":
            args.append("%bias: tensor<?x?xf32>")
            captures = " captures(%bias : tensor<?x?xf32>)"
            cap_args = ", %bt: tensor<?x?xf32>"
        elif self.score_mod == "boolmask":
            args.append("%keep: tensor<?x?xi1>")
            captures = " captures(%keep : tensor<?x?xi1>)"
            cap_args = ", %kt: tensor<?x?xi1>"
        mask = ""
        if self.mask == "causal":
            mask = " mask(causal%s)" % (", bottom_right" if self.bottom_right else "")
        elif self.mask == "sliding_window":
            mask = " mask(sliding_window, %d%s)" % (
                self.window, ", bottom_right" if self.bottom_right else "")
        region = ""
        if self.score_mod:
            idx = "".join(", %%b%d: index" % d for d in range(self.nb))
            head = "^bb0(%%s: f32%s, %%i: index, %%j: index%s):" % (idx, cap_args)
            if self.score_mod == "bias":
                body = ["%x = tensor.extract %bt[%i, %j] : tensor<?x?xf32>",
                        "%r = arith.addf %s, %x : f32"]
            elif self.score_mod == "boolmask":
                body = ["%x = tensor.extract %kt[%i, %j] : tensor<?x?xi1>",
                        "%ninf = arith.constant 0xFF800000 : f32",
                        "%r = arith.select %x, %s, %ninf : f32"]
            elif self.score_mod == "softcap":
                body = ["%%c = arith.constant %r : f32" % float(self.softcap),
                        "%x = arith.divf %s, %c : f32",
                        "%t = math.tanh %x : f32",
                        "%r = arith.mulf %t, %c : f32"]
            elif self.score_mod == "alibi":
                # s - slope(h) * |i - j| with slope(h) = 1 / (h + 2): reads the
                # head index and both positions.
                h = "%%b%d" % (self.nb - 1) if self.nb else "%i"
                body = ["%%hi = arith.index_cast %s : index to i64" % h,
                        "%hf = arith.sitofp %hi : i64 to f32",
                        "%two = arith.constant 2.0 : f32",
                        "%den = arith.addf %hf, %two : f32",
                        "%ii = arith.index_cast %i : index to i64",
                        "%ji = arith.index_cast %j : index to i64",
                        "%dd = arith.subi %ii, %ji : i64",
                        "%df = arith.sitofp %dd : i64 to f32",
                        "%ad = math.absf %df : f32",
                        "%pen = arith.divf %ad, %den : f32",
                        "%r = arith.subf %s, %pen : f32"]
            else:
                raise ValueError(self.score_mod)
            region = " score_mod {\n  %s\n    %s\n    flash.yield %%r : f32\n  }" % (
                head, "\n    ".join(body))
        res = ", ".join(out_types)
        names = ", ".join("%%o#%d" % i for i in range(len(outs))) if len(outs) > 1 else "%o"
        lhs = "%%o:%d" % len(outs) if len(outs) > 1 else "%o"
        return """func.func @attn(%s) -> (%s) attributes {llvm.emit_c_interface} {
  %s = flash.attention ins(%%q, %%k, %%v : %s, %s, %s)
         outs(%s : %s)%s scale(%r)%s%s -> %s
  return %s : %s
}
""" % (", ".join(args), res, lhs, qt, kt, vt, ", ".join(outs), res, captures,
       float(np.float32(self.scale)), mask, region, res, names, res)

    # -- inputs ---------------------------------------------------------------
    def inputs(self, rng, lq, lk):
        """Fresh random Q, K, V (in the element type), output inits poisoned
        with NaN, and the bias; returns (args, float64 views for the
        reference)."""
        qs = self.batch + (lq, self.d)
        ks = self.kv_batch() + (lk, self.d)
        vs = self.kv_batch() + (lk, self.dv)
        q, k, v = (rng.standard_normal(s).astype(np.float32) for s in (qs, ks, vs))
        # Spread the scores so softmax is neither flat nor one-hot.
        q *= 1.5
        if self.elem == "bf16":
            qa, ka, va = fcr.to_bf16(q), fcr.to_bf16(k), fcr.to_bf16(v)
            q64, k64, v64 = (fcr.from_bf16(x).astype(np.float64) for x in (qa, ka, va))
        else:
            dt = ELEM[self.elem]
            qa, ka, va = q.astype(dt), k.astype(dt), v.astype(dt)
            q64, k64, v64 = (x.astype(np.float64) for x in (qa, ka, va))
        init = np.full(self.batch + (lq, self.dv), np.nan, np.float32)
        if self.elem == "bf16":
            init = np.full(init.shape, 0x7FC0, np.uint16)
        else:
            init = init.astype(ELEM[self.elem])
        args = [qa, ka, va, init]
        extra = {}
        if self.lse:
            args.append(np.full(self.batch + (lq,), np.nan, np.float32))
        if self.score_mod == "bias":
            bias = rng.standard_normal((lq, lk)).astype(np.float32)
            args.append(bias)
            extra["bias"] = bias.astype(np.float64)
        elif self.score_mod == "boolmask":
            keep = rng.random((lq, lk)) < 0.5
            keep[rng.random(lq) < 0.3, :] = False  # fully masked rows
            args.append(keep)
            extra["keep"] = keep
        return args, (q64, k64, v64, extra)

    def result_spec(self):
        rank = self.nb + 2
        spec = [(rank, ELEM[self.elem])]
        if self.lse:
            spec.append((rank - 1, np.float32))
        return spec

    def to_f64(self, out):
        if self.elem == "bf16":
            return fcr.from_bf16(out).astype(np.float64)
        return out.astype(np.float64)

    # -- reference ------------------------------------------------------------
    def reference(self, q, k, v, extra):
        """The shared float64 attention (python/tests/reference.py) with this
        case's score_mod, mask and GQA; returns (out, lse)."""
        def score_mod(s, i, j):
            if self.score_mod == "bias":
                return s + extra["bias"]
            if self.score_mod == "boolmask":
                return np.where(extra["keep"], s, -np.inf)
            if self.score_mod == "softcap":
                return self.softcap * np.tanh(s / self.softcap)
            if self.score_mod == "alibi":
                # slope(h) = 1 / (h + 2) of the head index, or of the row
                # index when there are no batch dims (as module_text emits).
                if self.nb:
                    h = np.arange(self.batch[-1]).reshape(
                        (1,) * (self.nb - 1) + (-1, 1, 1)).astype(np.float64)
                else:
                    h = i.astype(np.float64)
                return s - np.abs(i - j) / (h + 2.0)
            return s

        # The op carries the scale as an f32 attribute.
        return attention_ref(
            q, k, v, scale=np.float64(np.float32(self.scale)),
            causal=self.mask == "causal",
            window=self.window if self.mask == "sliding_window" else None,
            align="bottom_right" if self.bottom_right else "top_left",
            score_mod=score_mod)


def rel_err(x, ref):
    scale = max(np.abs(ref).max() if ref.size else 0.0, 1e-30)
    return float(np.abs(x - ref).max() / scale) if ref.size else 0.0


def lse_err(x, ref):
    """Max error of finite entries relative to max(1, |ref|); infinite
    entries must match exactly (a fully masked row has lse = -inf)."""
    if ref.size == 0:
        return 0.0
    fin = np.isfinite(ref)
    if not np.array_equal(np.isneginf(x), np.isneginf(ref)) or np.isnan(x).any():
        return float("inf")
    if not fin.any():
        return 0.0
    return float((np.abs(x[fin] - ref[fin]) / np.maximum(1.0, np.abs(ref[fin]))).max())
