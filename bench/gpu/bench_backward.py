"""The backward: flash_mlir.attention in torch autograd on CUDA tensors (static shapes,
kernels from the cache) beside torch SDPA's FlashAttention-2, cuDNN and memory-efficient
backwards, in one process, on the forward bench's shapes: B·N = 32k tokens, 32 heads
at D = 64 and 16 at D = 128, bf16, causal no/yes.

Each row times one backward call — torch.autograd.grad of the forward's output with a
fixed cotangent (the forward is run once, outside the timing). Kernel time is all
kernels of the call (torch.profiler; ours: prep, key blocks, dq; SDPA's: its
preprocessing, the backward and the dQ conversion); call time is CUDA events around
the call. TFLOP/s counts 2.5 × the forward's 2·B·H·N²·(D + Dv), halved when causal.

Here (compiler, no GPU):  python3 bench/gpu/bench_backward.py --prebuild DIR
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_backward.py
Variants of our kernel (VARIANTS on VARIANT_CASES) beside the default:
                          ... bench_backward.py --variants q32k128,q64k64
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402

TOKENS = 32768
# (D, causal, N)
CASES = [(d, causal, n) for d in (64, 128) for causal in (False, True)
         for n in (1024, 2048, 4096, 8192, 16384)]
VARIANTS = {
    "mma": {"grad_kernel": "mma"},
    "atomic": {"grad_dq": "atomic"},
    "det": {"grad_deterministic": True},
    "q32k64": {"grad_block_q": 32, "grad_block_k": 64},
    "q64k64": {"grad_block_q": 64, "grad_block_k": 64},
    "q32k128": {"grad_block_q": 32, "grad_block_k": 128},
    "q64k128": {"grad_block_q": 64, "grad_block_k": 128},
}
VARIANT_CASES = [(64, False, 4096), (64, True, 4096), (128, False, 4096), (128, True, 4096)]
# Heads wider than 128 (--wide): D = 256 (Gemma) and D = 192 / Dv = 128, 8 heads.
WIDE_CASES = [(256, False, 4096), (256, True, 4096), (256, True, 8192), (192, True, 4096)]


def shape(d, n):
    heads = 32 if d == 64 else 16 if d == 128 else 8
    return (TOKENS // n, heads, n, d)


def value_dim(d):
    return 128 if d == 192 else d


def prebuild(cache):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for d, causal, n in CASES:
        s = shape(d, n)
        print(d, causal, n, flash_mlir.prebuild(s, s, s, "bf16", causal=causal, grad=True))
    for d, causal, n in WIDE_CASES:
        s = shape(d, n)
        vs = s[:-1] + (value_dim(d),)
        print(d, causal, n, flash_mlir.prebuild(s, s, vs, "bf16", causal=causal, grad=True))
    for name, kw in VARIANTS.items():
        for d, causal, n in VARIANT_CASES:
            s = shape(d, n)
            print(name, d, causal, n,
                  flash_mlir.prebuild(s, s, s, "bf16", causal=causal, grad=True, **kw))


def run(variants, out_md, subset=False, wide=False):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from common import device_line, measure

    def backward_of(forward, q, k, v, do):
        qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
        o = forward(qg, kg, vg)
        return lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)

    def sdpa(backend, causal):
        def f(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return f

    rows = []
    lines = ["# backward, " + device_line(), "",
             "| D | causal | B×H×N | ours kernel µs | ours call µs | ours TFLOP/s | "
             "FA2 TFLOP/s | cuDNN TFLOP/s | efficient TFLOP/s | ours / FA2 | ours / cuDNN |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    cases = [(c, "default", {}) for c in (VARIANT_CASES if subset else CASES)]
    if wide:
        cases = [(c, "default", {}) for c in WIDE_CASES]
    for name in variants:
        cases += [(c, name, VARIANTS[name]) for c in VARIANT_CASES]
    for (d, causal, n), vname, kw in cases:
        b, h, _, _ = shape(d, n)
        g = torch.Generator(device="cuda").manual_seed(n + d)
        dv = value_dim(d)
        q, k = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16, generator=g)
                for _ in range(2))
        v, do = (torch.randn(b, h, n, dv, device="cuda", dtype=torch.bfloat16, generator=g)
                 for _ in range(2))
        flops = 2.5 * 2 * b * h * n * n * (d + dv) / (2 if causal else 1)
        res = {}
        ours = backward_of(lambda q, k, v: flash_mlir.attention(q, k, v, causal=causal, **kw),
                           q, k, v, do)
        res["ours"] = measure(ours, kernels="all")
        if vname == "default":
            for name, backend in (("fa2", SDPBackend.FLASH_ATTENTION),
                                  ("cudnn", SDPBackend.CUDNN_ATTENTION),
                                  ("eff", SDPBackend.EFFICIENT_ATTENTION)):
                try:
                    res[name] = measure(backward_of(sdpa(backend, causal), q, k, v, do),
                                        kernels="all")
                except RuntimeError as e:
                    print(name, "failed:", str(e).splitlines()[0])
        tf = {key: flops / r[0] / 1e6 for key, r in res.items()}
        fmt = lambda key: "%.0f" % tf[key] if key in tf else "—"
        ratio = lambda key: "%.2f" % (tf["ours"] / tf[key]) if key in tf else "—"
        label = "%d%s" % (d, "" if vname == "default" else " (%s)" % vname)
        lines.append("| %s | %s | %d×%d×%d | %.0f | %.0f | %s | %s | %s | %s | %s | %s |" % (
            label, "yes" if causal else "no", b, h, n, res["ours"][0], res["ours"][1],
            fmt("ours"), fmt("fa2"), fmt("cudnn"), fmt("eff"), ratio("fa2"), ratio("cudnn")))
        print(lines[-1], flush=True)
        rows.append(lines[-1])
    text = "\n".join(lines) + "\n"
    if out_md:
        with open(out_md, "w") as f:
            f.write(text)
    print(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--variants", default="", help="comma-separated names of VARIANTS")
    ap.add_argument("--md", default=None)
    ap.add_argument("--subset", action="store_true",
                    help="the default rows only at VARIANT_CASES' shapes")
    ap.add_argument("--wide", action="store_true",
                    help="the default rows only at WIDE_CASES' shapes (D > 128)")
    a = ap.parse_args()
    if a.prebuild:
        prebuild(a.prebuild)
        return
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            sys.exit("unknown variant %r (%s)" % (v, ", ".join(VARIANTS)))
    run(variants, a.md, a.subset, a.wide)


if __name__ == "__main__":
    main()
