"""Score modifications, forward and backward: flash_mlir.attention on CUDA tensors (static
shapes, kernels from the cache; the score_mod fused into the kernels, and its derivative
compiled into the backward's) beside FlexAttention (torch.compile(flex_attention) with the
same score_mod and causal block mask) in one process, and each beside the same shape without
a modification (ours and cuDNN's).

Modifications: soft-capping 30·tanh(s/30), ALiBi (per-head slopes, -slope·|i - j|), an
additive [N, N] bias shared by the batch and heads (a relative-position table), and a
boolean [N, N] mask tensor (half its entries true, drawn at random: no tile is skippable).
The slopes and the bias do not require grad (Flex differentiates q, k, v only), so neither
computes their gradients. bf16, B·N = 16k tokens.

forward rows time one call; backward rows one backward call (torch.autograd.grad of the
forward's output with a fixed cotangent; the forward runs once, outside the timing).
Kernel time from torch.profiler (the attention kernel forward, every kernel of the call
backward), call time CUDA events around one call. TFLOP/s counts the forward's 4·B·H·N²·D
(2.5 × that backward), halved when causal.

Here (compiler, no GPU):  python3 bench/gpu/bench_score_mod.py --prebuild DIR [--variant ...]
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_score_mod.py
                          [--variant ...] [--forward-only] [--no-flex]

--variant NAME=KEY=VALUE[,KEY=VALUE...] (repeatable) adds a forward row "mod[NAME]" per
modification: flash_mlir.attention with those kernel options (e.g. dpv=defer_pv=1), to
prebuild and to run alike; its "ours / ours without mod" is against the default plain call.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402

TOKENS = 16384
SOFTCAP = 30.0
# (D, heads, causal, N)
CASES = [(128, 16, False, 2048), (64, 32, True, 1024), (128, 16, True, 4096)]
MODS = ("none", "softcap", "alibi", "bias", "mask")


def _shape(d, h, n):
    return (TOKENS // n, h, n, d)


def _ours_kw(mod, h, n):
    """attention() keywords of a modification, for prebuild (shapes) or a call."""
    if mod == "softcap":
        return {"softcap": SOFTCAP}
    if mod == "alibi":
        return {"alibi_slopes": (h,)}
    if mod == "bias":
        return {"bias": ((n, n), "bfloat16")}
    if mod == "mask":
        return {"score_mod": _keep, "score_mod_args": [((n, n), "bool")]}
    return {}


def _keep(s, b, h, i, j, keep):
    """A boolean mask tensor as a score_mod (flash_mlir.score's where)."""
    from flash_mlir import score
    return score.where(keep[i, j], s, -float("inf"))


def prebuild(cache, variants=(), forward_only=False):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for d, h, causal, n in CASES:
        s = _shape(d, h, n)
        for mod in MODS:
            for grad in (False,) if forward_only else (False, True):
                print(d, causal, n, mod, flash_mlir.prebuild(
                    s, s, s, "bf16", causal=causal, grad=grad, **_ours_kw(mod, h, n)))
            for name, kw in variants:
                print(d, causal, n, mod, name, flash_mlir.prebuild(
                    s, s, s, "bf16", causal=causal, **dict(_ours_kw(mod, h, n), **kw)))


def run(out_md, variants=(), forward_only=False, with_flex=True):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from common import device_line, measure

    # The timing replays one compiled backward on a retained graph.
    import torch._functorch.config
    torch._functorch.config.donated_buffer = False
    flex = torch.compile(flex_attention)

    def backward_of(forward, q, k, v, do):
        qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
        o = forward(qg, kg, vg)
        return lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)

    lines = ["# score_mod, " + device_line(), "",
             "| pass | D | causal | B×H×N | mod | ours kernel µs | ours call µs | ours TFLOP/s | "
             "Flex TFLOP/s | ours / Flex | ours / ours without mod | cuDNN without mod "
             "TFLOP/s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for d, h, causal, n in CASES:
        b = TOKENS // n
        g = torch.Generator(device="cuda").manual_seed(n + d)
        q, k, v, do = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
                       for _ in range(4))
        slopes = torch.rand(h, device="cuda", generator=g) * 0.2
        bias = torch.randn(n, n, device="cuda", generator=g).to(torch.bfloat16)
        keep = torch.rand(n, n, device="cuda", generator=g) < 0.5
        fwd_flops = 4 * b * h * n * n * d / (2 if causal else 1)
        block_mask = None
        if causal:
            block_mask = create_block_mask(lambda b_, h_, i, j: i >= j, None, None, n, n,
                                           device="cuda")
        plain = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            cudnn = {"forward": measure(lambda: plain(q, k, v)),
                     "backward": measure(backward_of(plain, q, k, v, do), kernels="all")}
        passes = (("forward", 1.0),) if forward_only else (("forward", 1.0), ("backward", 2.5))
        for pas, scale_flops in passes:
            flops = scale_flops * fwd_flops
            base = None
            for mod in MODS:
                call = {"softcap": {"softcap": SOFTCAP}, "alibi": {"alibi_slopes": slopes},
                        "bias": {"bias": bias},
                        "mask": {"score_mod": _keep, "score_mod_args": (keep,)}}.get(mod, {})
                fn = lambda q, k, v, call=call: flash_mlir.attention(q, k, v, causal=causal,
                                                                     **call)

                def score_mod(s, b_, h_, i, j, mod=mod):
                    if mod == "softcap":
                        return SOFTCAP * torch.tanh(s / SOFTCAP)
                    if mod == "alibi":
                        return s - slopes[h_] * (i - j).abs()
                    if mod == "bias":
                        return s + bias[i, j]
                    if mod == "mask":
                        return torch.where(keep[i, j], s, -float("inf"))
                    return s
                fx_fn = lambda q, k, v, sm=score_mod: flex(q, k, v, score_mod=sm,
                                                           block_mask=block_mask)
                if pas == "forward":
                    ours = measure(lambda fn=fn: fn(q, k, v))
                else:
                    ours = measure(backward_of(fn, q, k, v, do), kernels="all")
                base = base or ours
                try:
                    if not with_flex:
                        raise RuntimeError("not run (--no-flex)")
                    if pas == "forward":
                        fx = measure(lambda fx_fn=fx_fn: fx_fn(q, k, v))
                    else:
                        fx = measure(backward_of(fx_fn, q, k, v, do), kernels="all")
                    fx_tf = flops / fx[0] / 1e6
                except Exception as e:  # noqa: BLE001 - report and go on
                    print("flex", pas, mod, "failed:", str(e).splitlines()[0])
                    fx_tf = float("nan")
                tf = flops / ours[0] / 1e6
                lines.append("| %s | %d | %s | %d×%d×%d | %s | %.0f | %.0f | %.0f | %.0f | %.2f | "
                             "%.2f | %.0f |" % (pas, d, "yes" if causal else "no", b, h, n, mod,
                                                ours[0], ours[1], tf, fx_tf, tf / fx_tf,
                                                base[0] / ours[0],
                                                flops / cudnn[pas][0] / 1e6))
                print(lines[-1], flush=True)
                if pas != "forward":
                    continue
                for name, kw in variants:
                    vfn = lambda q, k, v, call=call, kw=kw: flash_mlir.attention(
                        q, k, v, causal=causal, **dict(call, **kw))
                    vo = measure(lambda vfn=vfn: vfn(q, k, v))
                    vtf = flops / vo[0] / 1e6
                    lines.append("| %s | %d | %s | %d×%d×%d | %s[%s] | %.0f | %.0f | %.0f | | "
                                 "| %.2f | |" % (pas, d, "yes" if causal else "no", b, h, n,
                                                 mod, name, vo[0], vo[1], vtf,
                                                 base[0] / vo[0]))
                    print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if out_md:
        with open(out_md, "w") as f:
            f.write(text)
    print(text)


def main():
    from bench_call_cost import parse_variant
    ap = argparse.ArgumentParser()
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--md", default=None)
    ap.add_argument("--variant", action="append", default=[], type=parse_variant)
    ap.add_argument("--forward-only", action="store_true")
    ap.add_argument("--no-flex", action="store_true")
    a = ap.parse_args()
    if a.prebuild:
        prebuild(a.prebuild, a.variant, a.forward_only)
        return
    run(a.md, a.variant, a.forward_only, not a.no_flex)


if __name__ == "__main__":
    main()
