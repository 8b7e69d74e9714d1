"""Head dims beyond 128: flash_mlir.attention on torch CUDA tensors (bf16, static shapes,
kernels from the prebuilt cache) at D = Dv ∈ {64, 96, 128, 192, 256} and D = 192 / Dv = 128,
beside torch SDPA restricted to cuDNN and to FlashAttention-2 in the same process. kernel=auto
takes the wgmma kernel for every head dim (tiles padded to 64-column panels, 96 as 128);
"ours[mma]" forces mma.sync, and VARIANTS are other key tiles of the wgmma kernel.
B·N = 16k tokens, 16 heads; TFLOP/s = 2·B·H·N²·(D + Dv), halved when causal; kernel µs from
torch.profiler, call µs from CUDA events around one call.

Here (compiler, no GPU):  python3 bench/gpu/bench_head_dims.py --prebuild DIR
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_head_dims.py [--variants]
                          [--short-causal: D = 64, 128 causal N <= 2k, tiles and schedules]
                          [--softcap: Gemma 2's D = 256 softcapped causal GQA, beside Flex]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402

H = 16
TOKENS = 16384
# (D, Dv)
DIMS = [(64, 64), (96, 96), (128, 128), (192, 192), (192, 128), (256, 256)]
NS = (1024, 4096, 16384)
VARIANTS = {"bn64": {"block_n": 64}, "bn48-s3": {"block_n": 48, "stages": 3},
            "bn64-pp": {"block_n": 64, "pingpong": True}}
# --short-causal: the causal short sequences where cuDNN leads, with other tiles and
# schedules of the wgmma kernel beside the default.
SHORT_CAUSAL = [(d, n) for d in (64, 128) for n in (512, 1024, 2048)]
# --softcap: Gemma 2's attention (D = 256, GQA 16/8, causal, tanh softcap 50 on the scores),
# which only FlexAttention among the anchors runs (a score_mod); our key tiles beside.
SOFTCAP = 50.0
SOFTCAP_NS = (1024, 4096, 8192)
SOFTCAP_VARIANTS = {"bn64": {"block_n": 64}, "bn48": {"block_n": 48},
                    "mma": {"kernel": "mma"}}
SHORT_VARIANTS = {"bm64": {"block_m": 64}, "bm128": {"block_m": 128},
                  "bn64": {"block_n": 64}, "pp": {"pingpong": True},
                  "dpv0": {"defer_pv": 0}, "bm192": {"block_m": 192}}


def cases():
    for d, dv in DIMS:
        for causal in (False, True):
            for n in NS:
                yield d, dv, causal, TOKENS // n, n


def _shapes(d, dv, b, n):
    return (b, H, n, d), (b, H, n, d), (b, H, n, dv)


def prebuild(cache):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for d, dv, causal, b, n in cases():
        kws = [{}]
        if max(d, dv) > 128 or d == 96:
            kws.append({"kernel": "mma"})
        if d == dv == 256:
            kws += list(VARIANTS.values())
        for kw in kws:
            print(d, dv, causal, n, kw, flash_mlir.prebuild(*_shapes(d, dv, b, n), "bf16",
                                                          causal=causal, **kw))
    for n in SOFTCAP_NS:
        for kw in [{}] + list(SOFTCAP_VARIANTS.values()):
            print("softcap", n, kw, flash_mlir.prebuild(
                (TOKENS // n, 16, n, 256), (TOKENS // n, 8, n, 256), (TOKENS // n, 8, n, 256),
                "bf16", causal=True, softcap=SOFTCAP, **kw))
    for d, n in SHORT_CAUSAL:
        for kw in [{}] + list(SHORT_VARIANTS.values()):
            print("short", d, n, kw, flash_mlir.prebuild(*_shapes(d, d, TOKENS // n, n),
                                                         "bf16", causal=True, **kw))


def run_softcap():
    import torch
    from torch.nn.attention.flex_attention import flex_attention
    from common import device_line, measure

    flex = torch.compile(flex_attention)
    print(device_line())
    print()
    print("| D | Hq/Hkv | causal | softcap | B×N | impl | kernel µs | TFLOP/s | call µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in SOFTCAP_NS:
        b = TOKENS // n
        q = torch.randn(b, 16, n, 256, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, 8, n, 256, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, 8, n, 256, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * b * 16 * n * n * 512 / 2

        def softcap_mod(score, bi, h, qi, ki):
            s = SOFTCAP * torch.tanh(score / SOFTCAP)
            return torch.where(qi >= ki, s, -float("inf"))
        fns = [("ours", lambda: flash_mlir.attention(q, k, v, causal=True, softcap=SOFTCAP))]
        fns += [("ours[%s]" % name, lambda kw=kw: flash_mlir.attention(
            q, k, v, causal=True, softcap=SOFTCAP, **kw)) for name, kw in SOFTCAP_VARIANTS.items()]
        fns.append(("flex", lambda: flex(q, k, v, score_mod=softcap_mod, enable_gqa=True)))
        ref = None
        for name, fn in fns:
            try:
                out = fn()
                torch.cuda.synchronize()
                if ref is None:
                    ref = out
                elif (out.float() - ref.float()).abs().max().item() > 0.05:
                    print(f"| 256 | 16/8 | yes | {SOFTCAP} | {b}×{n} | {name} | differs | | |")
                kern, call, _ = measure(fn, calls=20, kernels="all")
            except Exception as e:
                msg = str(e).strip().splitlines()[0][:60] if str(e).strip() else type(e).__name__
                print(f"| 256 | 16/8 | yes | {SOFTCAP} | {b}×{n} | {name} | failed: {msg} | | |")
                continue
            print(f"| 256 | 16/8 | yes | {SOFTCAP} | {b}×{n} | {name} | {kern:.1f} | "
                  f"{flops / kern / 1e6:.0f} | {call:.1f} |", flush=True)


def run(with_variants, short_causal=False):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from common import device_line, measure

    print(device_line())
    print()
    print("| D/Dv | causal | B×N | impl | kernel µs | TFLOP/s | call µs |")
    print("|---|---|---|---|---|---|---|")
    todo = list(cases())
    if short_causal:
        todo = [(d, d, True, TOKENS // n, n) for d, n in SHORT_CAUSAL]
    for d, dv, causal, b, n in todo:
        qs, ks, vs = _shapes(d, dv, b, n)
        q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(vs, device="cuda", dtype=torch.bfloat16)
        flops = 2.0 * b * H * n * n * (d + dv) / (2 if causal else 1)
        impls = [("ours", {})]
        if max(d, dv) > 128 or d == 96:
            impls.append(("ours[mma]", {"kernel": "mma"}))
        if with_variants and d == dv == 256:
            impls += [("ours[%s]" % name, kw) for name, kw in VARIANTS.items()]
        if short_causal:
            impls = [("ours", {})] + [("ours[%s]" % name, kw)
                                      for name, kw in SHORT_VARIANTS.items()]
        fns = [(name, lambda kw=kw: flash_mlir.attention(q, k, v, causal=causal, **kw))
               for name, kw in impls]
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("fa2", SDPBackend.FLASH_ATTENTION)):
            def sdpa(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            fns.append((name, sdpa))
        ref = None
        for name, fn in fns:
            try:
                out = fn()
                torch.cuda.synchronize()
                if ref is None:
                    ref = out
                elif (out.float() - ref.float()).abs().max().item() > 0.05:
                    print(f"| {d}/{dv} | {causal} | {b}×{n} | {name} | differs from ours | | |")
                kern, call, _ = measure(fn, calls=20, kernels="all")
            except Exception as e:  # a backend that does not take the shape
                msg = str(e).strip().splitlines()[0][:60] if str(e).strip() else type(e).__name__
                print(f"| {d}/{dv} | {causal} | {b}×{n} | {name} | failed: {msg} | | |")
                continue
            print(f"| {d}/{dv} | {'yes' if causal else 'no'} | {b}×{n} | {name} | {kern:.1f} | "
                  f"{flops / kern / 1e6:.0f} | {call:.1f} |", flush=True)
        del q, k, v, ref, fns
        torch.cuda.empty_cache()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--short-causal", action="store_true")
    ap.add_argument("--softcap", action="store_true")
    a = ap.parse_args()
    if a.prebuild:
        prebuild(a.prebuild)
    else:
        run_softcap() if a.softcap else run(a.variants, a.short_causal)
