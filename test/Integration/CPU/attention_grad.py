"""flash.attention_grad through flash-cpu-pipeline against torch's float64
autograd of attention written from its definition, on fresh random inputs.

Each case builds the gradient op for one configuration (mask, GQA, score_mod
with or without a bias capture, Lq != Lk != D != Dv, tails, fully masked
rows), feeds it the float64 forward's output and log-sum-exp (rounded to
f32) and a random cotangent, and compares dq, dk, dv (and the bias's
gradient) with torch.autograd in float64: relative error (max abs error over
the reference's max abs) <= 1e-5 for f32.

Usage: attention_grad.py FLASH_OPT
"""
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "lib"))
import flash_cpu_runner as fcr  # noqa: E402

TOL = 1e-5


class Case:
    def __init__(self, name, batch, hkv=None, lq=37, lk=53, d=24, dv=12, mask=None,
                 bottom_right=False, window=None, score_mod=None):
        self.name, self.batch, self.lq, self.lk, self.d, self.dv = name, batch, lq, lk, d, dv
        self.hkv = hkv if hkv is not None else (batch[-1] if batch else None)
        self.mask, self.bottom_right, self.window, self.score_mod = (
            mask, bottom_right, window, score_mod)
        self.scale = 1.0 / math.sqrt(d)

    def kv_batch(self):
        return self.batch[:-1] + (self.hkv,) if self.batch else ()

    def shapes(self):
        b, kb = self.batch, self.kv_batch()
        return {"q": b + (self.lq, self.d), "k": kb + (self.lk, self.d),
                "v": kb + (self.lk, self.dv), "o": b + (self.lq, self.dv),
                "lse": b + (self.lq,), "bias": (self.lq, self.lk)}

    def module(self):
        sh = self.shapes()
        t = lambda s: "tensor<%sxf32>" % "x".join(str(x) for x in s)
        names = ["q", "k", "v", "o", "do", "lse"]
        types = [t(sh["q"]), t(sh["k"]), t(sh["v"]), t(sh["o"]), t(sh["o"]), t(sh["lse"])]
        outs = [t(sh["q"]), t(sh["k"]), t(sh["v"])]
        args = ["%%%s: %s" % (n, ty) for n, ty in zip(names, types)]
        init_args = ["%%i%d: %s" % (k, ty) for k, ty in enumerate(outs)]
        caps, region = "", ""
        nb = len(self.batch)
        idx = ", ".join(["%%b%d: index" % k for k in range(nb)] + ["%i: index", "%j: index"])
        if self.score_mod == "bias":
            args.append("%%bias: %s" % t(sh["bias"]))
            outs.append(t(sh["bias"]))
            init_args.append("%%i3: %s" % t(sh["bias"]))
            caps = " captures(%%bias : %s)" % t(sh["bias"])
            region = """ score_mod {
      ^bb0(%%s: f32, %s, %%bt: %s):
        %%x = tensor.extract %%bt[%%i, %%j] : %s
        %%r = arith.addf %%s, %%x : f32
        flash.yield %%r : f32
      }""" % (idx, t(sh["bias"]), t(sh["bias"]))
        elif self.score_mod == "softcap":
            region = """ score_mod {
      ^bb0(%%s: f32, %s):
        %%c = arith.constant 2.5 : f32
        %%a = arith.divf %%s, %%c : f32
        %%h = math.tanh %%a : f32
        %%r = arith.mulf %%h, %%c : f32
        flash.yield %%r : f32
      }""" % idx
        elif self.score_mod == "alibi":
            h = "%%b%d" % (nb - 1)
            region = """ score_mod {
      ^bb0(%%s: f32, %s):
        %%hi = arith.index_cast %s : index to i64
        %%hf = arith.sitofp %%hi : i64 to f32
        %%two = arith.constant 2.0 : f32
        %%den = arith.addf %%hf, %%two : f32
        %%ii = arith.index_cast %%i : index to i64
        %%ji = arith.index_cast %%j : index to i64
        %%dd = arith.subi %%ii, %%ji : i64
        %%df = arith.sitofp %%dd : i64 to f32
        %%ad = math.absf %%df : f32
        %%pen = arith.divf %%ad, %%den : f32
        %%e = math.exp %%s : f32
        %%l = math.log %%e : f32
        %%r = arith.subf %%l, %%pen : f32
        flash.yield %%r : f32
      }""" % (idx, h)
        mask = ""
        if self.mask == "causal":
            mask = " mask(causal%s)" % (", bottom_right" if self.bottom_right else "")
        elif self.mask == "window":
            mask = " mask(sliding_window, %d%s)" % (
                self.window, ", bottom_right" if self.bottom_right else "")
        res = ", ".join(outs)
        lhs = "%%r:%d" % len(outs)
        rets = ", ".join("%%r#%d" % k for k in range(len(outs)))
        inits = ", ".join("%%i%d" % k for k in range(len(outs)))
        return """func.func @grad(%s, %s) -> (%s) attributes {llvm.emit_c_interface} {
  %s = flash.attention_grad ins(%%q, %%k, %%v, %%o, %%do, %%lse : %s)
      outs(%s : %s)%s scale(%r)%s%s -> %s
  return %s : %s
}
""" % (", ".join(args), ", ".join(init_args), res, lhs, ", ".join(types), inits, res, caps,
       float(np.float32(self.scale)), mask, region, res, rets, res)

    def reference(self, q, k, v, do, bias):
        """float64 forward (o, lse) and torch autograd gradients."""
        import torch
        tq, tk, tv = (torch.tensor(x, dtype=torch.float64, requires_grad=True)
                      for x in (q, k, v))
        tb = torch.tensor(bias, dtype=torch.float64, requires_grad=True) \
            if bias is not None else None
        kk, vv = tk, tv
        if self.batch and self.hkv != self.batch[-1]:
            g = self.batch[-1] // self.hkv
            kk = tk.repeat_interleave(g, dim=-3)
            vv = tv.repeat_interleave(g, dim=-3)
        s = torch.matmul(tq, kk.transpose(-1, -2)) * float(np.float32(self.scale))
        lq, lk = self.lq, self.lk
        i = torch.arange(lq).view(lq, 1)
        j = torch.arange(lk).view(1, lk)
        if self.score_mod == "bias":
            s = s + tb
        elif self.score_mod == "softcap":
            s = torch.tanh(s / 2.5) * 2.5
        elif self.score_mod == "alibi":
            h = torch.arange(self.batch[-1], dtype=torch.float64).view(-1, 1, 1)
            s = s - (i - j).abs().double() / (h + 2.0)
        off = lk - lq if self.bottom_right else 0
        allowed = torch.ones(lq, lk, dtype=torch.bool)
        if self.mask in ("causal", "window"):
            allowed = j <= i + off
            if self.mask == "window":
                allowed = allowed & (j > i + off - self.window)
        s = s.masked_fill(~allowed, float("-inf"))
        m = s.amax(-1, keepdim=True)
        live = torch.isfinite(m)
        p = torch.where(live, torch.exp(s - torch.where(live, m, torch.zeros_like(m))),
                        torch.zeros_like(s))
        l = p.sum(-1, keepdim=True)
        pn = torch.where(l > 0, p / torch.where(l > 0, l, torch.ones_like(l)), torch.zeros_like(p))
        o = torch.matmul(pn, vv)
        lse = torch.where(live.squeeze(-1), (m + torch.log(l)).squeeze(-1),
                          torch.full_like(l.squeeze(-1), float("-inf")))
        (o * torch.tensor(do, dtype=torch.float64)).sum().backward()
        grads = [tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()]
        if tb is not None:
            grads.append(tb.grad.numpy())
        return o.detach().numpy(), lse.detach().numpy(), grads


CASES = [
    Case("plain_nobatch", (), lq=29, lk=41, d=16, dv=8),
    Case("causal_tl", (2, 3)),
    Case("causal_br_lq_gt_lk", (2, 3), lq=61, lk=40, mask="causal", bottom_right=True),
    Case("window_br", (3,), mask="window", window=9, bottom_right=True),
    Case("gqa_6_2_causal", (2, 6), hkv=2, mask="causal"),
    Case("mqa_4_1", (4,), hkv=1),
    Case("bias_causal", (2, 2), mask="causal", score_mod="bias"),
    Case("softcap_gqa", (1, 4), hkv=2, score_mod="softcap"),
    Case("alibi_window", (2, 3), mask="window", window=7, score_mod="alibi"),
]
CASES[1].mask = "causal"


def main():
    tools = fcr.Tools(flash_opt=sys.argv[1])
    seed = int(os.environ.get("FLASH_TEST_SEED", np.random.SeedSequence().entropy % (2**31)))
    print("seed %d" % seed)
    rng = np.random.default_rng(seed)
    passed = failed = 0
    # The reference decomposition, the tiled lowering with one tile per
    # length, and with many small tiles (tails, skipped and partial tiles),
    # the last one on OpenMP threads.
    pipelines = [("reference", "reference=1 parallel=0"), ("tiled", "parallel=0"),
                 ("small-tiles", "block-q=8 block-kv=16")]
    for case, (label, options) in [(c, p) for c in CASES for p in pipelines]:
        sh = case.shapes()
        lib = fcr.compile_module(case.module(), options, tools)
        q = rng.standard_normal(sh["q"]) * 1.5
        k = rng.standard_normal(sh["k"]) * 1.5
        v = rng.standard_normal(sh["v"])
        do = rng.standard_normal(sh["o"])
        bias = rng.standard_normal(sh["bias"]) if case.score_mod == "bias" else None
        o, lse, want = case.reference(q, k, v, do, bias)
        f32 = lambda x: np.ascontiguousarray(x, dtype=np.float32)
        args = [f32(q), f32(k), f32(v), f32(o), f32(do), f32(lse)]
        if bias is not None:
            args.append(f32(bias))
        # Poisoned inits: every element must be written.
        inits = [np.full(sh[n], np.nan, np.float32) for n in ("q", "k", "v")]
        if bias is not None:
            inits.append(np.full(sh["bias"], np.nan, np.float32))
        spec = [(x.ndim, np.float32) for x in inits]
        got = lib.call("grad", args + inits, spec)
        errs = []
        for g, w in zip(got, want):
            scale = max(np.abs(w).max(), 1e-30)
            errs.append(float(np.abs(g.astype(np.float64) - w).max() / scale)
                        if not np.isnan(g).any() else float("nan"))
        ok = all(e <= TOL for e in errs)
        print("%s %s %s errs=%s" % ("PASS" if ok else "FAIL", case.name, label,
                                    " ".join("%.1e" % e for e in errs)))
        passed += ok
        failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
