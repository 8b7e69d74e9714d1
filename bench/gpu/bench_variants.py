"""Several builds of our kernel side by side with SDPA's flash and cuDNN backends, in one run.

Each variant is a directory from build_artifacts.py (e.g. the same kernels built with
different --pipeline-options); a variant without a kernel for a shape's (D, mask) is left
blank there. Shapes, inputs and timing are bench_attention.py's, so the columns compare
directly with bench/RESULTS.md.

    python3 bench/gpu/bench_variants.py --variant base=DIR --variant pingpong=DIR2 ...
        [--ds 64,128] [--ns 1024,...] [--md OUT.md] [--json OUT.json]
"""
import argparse
import json
import math

from common import OurKernels, FlashRuntimeError, device_line, time_ms, torch
from bench_attention import shapes

from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

ANCHORS = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]


def check(variants, ds, lengths):
    """Tails and causal rows on small shapes: ours vs a float32 reference, next to SDPA flash's
    error on the same inputs (the sweep's 2x rule); returns how many cases fail it."""
    bad = 0
    for d in sorted(ds):
        h = 32 if d == 64 else 16
        for causal in (False, True):
            for n in lengths:
                torch.manual_seed(1000 + n + d + causal)
                q, k, v = (torch.randn(2, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    err_sdpa = (F.scaled_dot_product_attention(q, k, v, is_causal=causal).float() - ref).abs().max().item()
                for name, ours in variants:
                    kern = ours.find("bf16", d, "causal_top_left" if causal else None, None, hq=h, hkv=h)
                    if not kern:
                        continue
                    o = torch.full_like(q, float("nan"))
                    ours.run(kern, q, k, v, o)
                    torch.cuda.synchronize()
                    err = (o.float() - ref).abs().max().item()
                    ok = err <= 2 * err_sdpa + 1e-6 and not torch.isnan(o).any().item()
                    bad += not ok
                    print(f"CHECK {'PASS' if ok else 'FAIL'} {name} D={d} causal={causal} L={n}: "
                          f"ours {err:.3g} sdpa {err_sdpa:.3g}", flush=True)
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", default=[], help="NAME=DIR (repeatable)")
    ap.add_argument("--ds", default="64,128")
    ap.add_argument("--ns", default="1024,2048,4096,8192,16384")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--md", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--check", default="1,100,1000,4097",
                    help="lengths of a quick correctness check per variant before timing ('' = none)")
    a = ap.parse_args()

    variants = []
    for spec in a.variant:
        name, _, path = spec.partition("=")
        variants.append((name, OurKernels(path)))
    ds = {int(x) for x in a.ds.split(",")}
    bad = check(variants, ds, [int(x) for x in a.check.split(",") if x])
    cols = [n for n, _ in ANCHORS] + [n for n, _ in variants]
    rows = []
    for d, causal, b, h, n in shapes([int(x) for x in a.ns.split(",")]):
        if d not in ds:
            continue
        torch.manual_seed(n * d + causal)
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        scale = 1.0 / math.sqrt(d)
        flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
        row = {"D": d, "causal": causal, "B": b, "H": h, "N": n}
        ref = None
        for name, backend in ANCHORS:
            with sdpa_kernel([backend]):
                f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
                out = f()
                row[name] = time_ms(f, a.warmup, a.iters)
            if ref is None:
                ref = out.float()
        mask = "causal_top_left" if causal else None
        for name, ours in variants:
            kern = ours.find("bf16", d, mask, None, hq=h, hkv=h, lq=n, lk=n, batch=b)
            if not kern:
                continue
            o = torch.full_like(q, float("nan"))
            try:
                ours.run(kern, q, k, v, o)
                torch.cuda.synchronize()
                row[name + "_maxdiff"] = (o.float() - ref).abs().max().item()
                row[name] = time_ms(lambda: ours.run(kern, q, k, v, o), a.warmup, a.iters)
            except FlashRuntimeError as e:
                row[name + "_error"] = str(e)[:200]
        for c in cols:
            if row.get(c):
                row[c + "_tflops"] = flops / (row[c] * 1e-3) / 1e12
        rows.append(row)
        print(" ".join(f"{c}={row[c + '_tflops']:.0f}" if row.get(c) else f"{c}=-" for c in cols),
              f"| D={d} causal={causal} B={b} H={h} N={n}", flush=True)
        del q, k, v, ref
        torch.cuda.empty_cache()

    header = "| D | causal | B×H×N | " + " | ".join(cols) + " | best/cudnn |"
    lines = [f"Device: {device_line()}. bf16, TFLOP/s (median of {a.iters} event-timed runs after "
             f"{a.warmup} warm-ups); best = fastest of our variants.", "",
             header, "|" + "---|" * (4 + len(cols))]
    for r in rows:
        cells = [f"{r[c + '_tflops']:.0f}" if r.get(c) else "-" for c in cols]
        ours = [r[n + "_tflops"] for n, _ in variants if r.get(n)]
        ratio = f"{max(ours) / r['cudnn_tflops']:.2f}" if ours and r.get("cudnn") else "-"
        lines.append(f"| {r['D']} | {'yes' if r['causal'] else 'no'} | {r['B']}×{r['H']}×{r['N']} | "
                     + " | ".join(cells) + f" | {ratio} |")
    table = "\n".join(lines)
    print(table)
    for r in rows:
        for n, _ in variants:
            if r.get(n + "_maxdiff", 0) > 0.05 or r.get(n + "_error"):
                print(f"WARNING: {n}: {r.get(n + '_maxdiff')} {r.get(n + '_error', '')} at D={r['D']} "
                      f"causal={r['causal']} N={r['N']}")
    print(f"check: {bad} variant/case(s) off (see CHECK lines)")
    if a.md:
        with open(a.md, "w") as f:
            f.write(table + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": device_line(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
