"""Attention forward on one GPU: our kernels next to the anchors, in one run.

Anchors: torch SDPA's FlashAttention-2, cuDNN and memory-efficient backends, and the
naive three-kernel path (scaled QK^T GEMM with the causal mask folded in, softmax, PV
GEMM). Shapes (issue 5): D in {64, 128}, causal no/yes, N in 1k..16k, batch*N = 32k
tokens, 32 heads at D = 64 and 16 at D = 128, bf16. TFLOP/s = 4*B*H*N^2*D, halved when
causal; each time is the median of event-timed runs.

    python3 bench/gpu/bench_attention.py [--artifacts DIR] [--api] [--md OUT.md] [--json OUT.json]

Without --artifacts (or without a matching kernel in it) our column says "-" and the
anchors are still measured. `ours` runs the artifacts' dynamic-shape kernels; --api adds
a column `api`: `flash_mlir.attention` on the same tensors, the static-shape kernel a user
gets (every automatic choice made for that shape) from the cache in FLASH_MLIR_CACHE_DIR,
filled here with

    python3 bench/gpu/bench_attention.py --prebuild DIR [--ns ...]
"""
import argparse
import json
import math

from common import OurKernels, FlashRuntimeError, device_line, time_ms, torch

import flash_mlir


def shapes(ns):
    for d in (64, 128):
        for causal in (False, True):
            for n in ns:
                yield d, causal, 32768 // n, 32 if d == 64 else 16, n


def naive(q, k, v, causal, scale, mask_cache):
    b, h, n, d = q.shape
    q3, k3, v3 = q.view(b * h, n, d), k.view(b * h, n, d), v.view(b * h, n, d)
    if causal:
        m = mask_cache.get(n)
        if m is None:
            m = mask_cache[n] = torch.full((n, n), float("-inf"), device=q.device, dtype=q.dtype).triu_(1)
        # beta=1: the mask is copied into the result, then the GEMM accumulates onto it.
        s = torch.baddbmm(m, q3, k3.transpose(1, 2), alpha=scale)
    else:
        zero = torch.zeros(1, 1, 1, device=q.device, dtype=q.dtype).expand(b * h, n, n)
        s = torch.baddbmm(zero, q3, k3.transpose(1, 2), beta=0, alpha=scale)
    p = torch.softmax(s, dim=-1)
    del s
    return torch.bmm(p, v3).view(b, h, n, d)


def prebuild(cache, ns):
    import os
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for d, causal, b, h, n in shapes(ns):
        s = (b, h, n, d)
        print(flash_mlir.prebuild(s, s, s, "bf16", causal=causal, scale=1.0 / math.sqrt(d)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", action="store_true",
                    help="add flash_mlir.attention's static-shape kernels (column api)")
    ap.add_argument("--prebuild", metavar="DIR",
                    help="compile the --api column's kernels into DIR (here, no GPU)")
    ap.add_argument("--artifacts", default=None, help="directory with our kernels and manifest.json")
    ap.add_argument("--ns", default="1024,2048,4096,8192,16384")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--md", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.prebuild:
        prebuild(a.prebuild, [int(x) for x in a.ns.split(",")])
        return

    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    ours = OurKernels(a.artifacts)
    cols = (["ours"] + (["api"] if a.api else []) + [n for n, _ in backends]
            + ([] if a.no_naive else ["naive"]))
    rows, mask_cache = [], {}
    for d, causal, b, h, n in shapes([int(x) for x in a.ns.split(",")]):
        torch.manual_seed(n * d + causal)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        scale = 1.0 / math.sqrt(d)
        flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
        row = {"D": d, "causal": causal, "B": b, "H": h, "N": n}
        ref = None
        for name, backend in backends:
            try:
                with sdpa_kernel([backend]):
                    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
                    out = f()
                    row[name] = time_ms(f, a.warmup, a.iters)
                if ref is None:
                    ref = out.float()
            except RuntimeError as e:
                row[name] = None
                row[name + "_error"] = str(e).splitlines()[0][:120]
        if not a.no_naive:
            f = lambda: naive(q, k, v, causal, scale, mask_cache)
            out = f()
            row["naive_maxdiff"] = (out.float() - ref).abs().max().item()
            del out
            row["naive"] = time_ms(f, a.warmup, a.iters)
        kern = ours.find("bf16", d, "causal_top_left" if causal else None, None, hq=h, hkv=h, lq=n, lk=n, batch=b)
        if kern:
            o = torch.full_like(q, float("nan"))
            try:
                ours.run(kern, q, k, v, o)
                torch.cuda.synchronize()
                row["ours_maxdiff"] = (o.float() - ref).abs().max().item()
                row["ours"] = time_ms(lambda: ours.run(kern, q, k, v, o), a.warmup, a.iters)
            except FlashRuntimeError as e:
                row["ours"] = None
                row["ours_error"] = str(e)[:200]
        else:
            row["ours"] = None
        if a.api:
            f = lambda: flash_mlir.attention(q, k, v, causal=causal, scale=scale)
            row["api_maxdiff"] = (f().float() - ref).abs().max().item()
            row["api"] = time_ms(f, a.warmup, a.iters)
        for c in cols:
            if row.get(c):
                row[c + "_tflops"] = flops / (row[c] * 1e-3) / 1e12
        rows.append(row)
        print(" ".join(f"{c}={row[c + '_tflops']:.0f}" if row.get(c) else f"{c}=-" for c in cols),
              f"| D={d} causal={causal} B={b} H={h} N={n}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()

    header = "| D | causal | B×H×N | " + " | ".join(cols) + " |"
    lines = [f"Device: {device_line()}. bf16, TFLOP/s (median of {a.iters} event-timed runs after "
             f"{a.warmup} warm-ups); '-' = not run or unsupported.", "",
             header, "|" + "---|" * (3 + len(cols))]
    for r in rows:
        cells = [f"{r[c + '_tflops']:.0f}" if r.get(c) else "-" for c in cols]
        lines.append(f"| {r['D']} | {'yes' if r['causal'] else 'no'} | {r['B']}×{r['H']}×{r['N']} | "
                     + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    for c in ("ours", "api"):
        for r in rows:
            if r.get(c + "_maxdiff", 0) > 0.05:
                print(f"WARNING: {c} differs from SDPA by {r[c + '_maxdiff']:.3g} at {r}")
    if a.md:
        with open(a.md, "w") as f:
            f.write(table + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": device_line(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
