"""Decode: one (or 16) query rows per head against a long K/V cache, through
flash_mlir.attention on torch CUDA tensors (static shapes, kernels from the cache), beside
torch SDPA's cuDNN and FlashAttention-2 backends and FlexAttention in the same process.

The work is reading K and V once, so each row reports the K+V read rate — bytes of the
K and V the caller passed (B · Hkv · Lk · (D + Dv) · 2) over the kernel time — and its
ratio to the card's device-to-device copy rate measured at the start of the run (bytes
read plus written). Kernel time is all kernels of one call (torch.profiler): a split
decode is two launches. Call time is CUDA events around one call. "ours-paged16" is the same call against the
same keys kept as a paged cache (pages of PAGE keys in a shuffled pool, a block table,
every sequence's length Lk), the layout vLLM and FlashInfer use.

Here (compiler, no GPU):  python3 bench/gpu/bench_decode.py --prebuild DIR
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_decode.py [--flex]
Variants of our kernel (VARIANTS, on the VARIANT_CASES subset), beside the default:
                          ... bench_decode.py --variants s2,s4
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402

D = 128
# (B, Hq, Hkv, Lq, Lk)
CASES = [(b, hq, hkv, lq, lk)
         for hq, hkv in ((32, 8), (8, 1))
         for lq in (1, 16)
         for b in (1, 16, 64)
         for lk in (4096, 32768, 131072)]
# FlexAttention compiles per shape (tens of seconds each): a subset.
FLEX = {(16, 32, 8, 1, 32768), (16, 32, 8, 16, 32768), (1, 32, 8, 1, 131072),
        (64, 8, 1, 1, 4096)}


# name -> flash_mlir.attention keywords: kernel options to compare against the default.
VARIANTS = {
    "s2": {"stages": 2},
    "s4": {"stages": 4},
    "split4": {"split_kv": 4},
    "split8": {"split_kv": 8},
    "split16": {"split_kv": 16},
    "wgmma": {"kernel": "wgmma"},
    "mma": {"kernel": "mma"},
}
VARIANT_CASES = [(16, 32, 8, 1, 32768), (64, 32, 8, 1, 32768), (1, 32, 8, 1, 131072),
                 (16, 32, 8, 16, 32768), (16, 8, 1, 1, 131072), (16, 8, 1, 16, 32768),
                 # Where kernel=auto's rule for the split kernel ends (64 rows, or 128
                 # from several heads): the prefill kernels beside it.
                 (8, 16, 16, 64, 8192), (4, 32, 8, 32, 8192), (2, 32, 32, 48, 2048),
                 (16, 16, 16, 64, 512), (2, 32, 8, 40, 4096)]


PAGE = 16


def shapes(case):
    b, hq, hkv, lq, lk = case
    return (b, hq, lq, D), (b, hkv, lk, D), (b, hkv, lk, D)


def paged_shapes(case):
    """q, the pools and the block table of the paged twin (Lk a multiple of PAGE)."""
    b, hq, hkv, lq, lk = case
    pages = b * lk // PAGE
    return (b, hq, lq, D), (pages, PAGE, hkv, D), (pages, PAGE, hkv, D), (b, lk // PAGE)


def prebuild(cache):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for case in CASES:
        print(case, flash_mlir.prebuild(*shapes(case), "bf16"))
        qs, ks, vs, table = paged_shapes(case)
        print(case, "paged", flash_mlir.prebuild(qs, ks, vs, "bf16", block_table=table))
    for name, kw in VARIANTS.items():
        for case in VARIANT_CASES:
            print(name, case, flash_mlir.prebuild(*shapes(case), "bf16", **kw))


def copy_rate_tbs(torch):
    """Device-to-device copy, bytes read plus written (METHOD.md's ceiling)."""
    from common import time_ms
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), warmup=3, iters=10)
    return 2 * x.numel() / ms / 1e9


def run(with_flex, variants):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from common import device_line, measure

    print(device_line())
    ceiling = copy_rate_tbs(torch)
    print(f"device-to-device copy: {ceiling:.2f} TB/s (read + write)")
    print()
    print("| B | Hq/Hkv | Lq | Lk | impl | kernel µs | K+V TB/s | of copy | call µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    flex = None
    if with_flex:
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention)
    for case in (VARIANT_CASES if variants else CASES):
        b, hq, hkv, lq, lk = case
        qs, ks, vs = shapes(case)
        q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(vs, device="cuda", dtype=torch.bfloat16)
        kv_bytes = 2 * k.numel() * k.element_size()
        impls = [("ours", lambda: flash_mlir.attention(q, k, v))]
        for name in variants:
            impls.append(("ours[%s]" % name,
                          lambda kw=VARIANTS[name]: flash_mlir.attention(q, k, v, **kw)))
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("fa2", SDPBackend.FLASH_ATTENTION)):
            def sdpa(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            impls.append((name, sdpa))
        if not variants:
            # The same keys as pages in a shuffled pool.
            perm = torch.randperm(b * lk // PAGE, device="cuda")

            def pool(x):
                p = torch.empty((b * lk // PAGE, PAGE, hkv, D), device="cuda",
                                dtype=x.dtype)
                p[perm] = x.transpose(1, 2).reshape(-1, PAGE, hkv, D)
                return p
            kp, vp = pool(k), pool(v)
            table = perm.reshape(b, lk // PAGE).to(torch.int32)
            lens = torch.full((b,), lk, dtype=torch.int32, device="cuda")
            impls.append(("ours-paged%d" % PAGE,
                          lambda: flash_mlir.attention(q, kp, vp, block_table=table,
                                                       seq_lens=lens)))
        if flex is not None and case in FLEX:
            impls.append(("flex", lambda: flex(q, k, v, enable_gqa=True)))
        ref = None
        for name, fn in impls:
            try:
                out = fn()
                torch.cuda.synchronize()
                if ref is None:
                    ref = out
                elif (out.float() - ref.float()).abs().max().item() > 0.05:
                    print(f"| {b} | {hq}/{hkv} | {lq} | {lk} | {name} | differs from ours | | | |")
                kern, call, _ = measure(fn, calls=20, kernels="all")
            except Exception as e:  # a backend that does not take the shape
                msg = str(e).strip().splitlines()[0][:60] if str(e).strip() else type(e).__name__
                print(f"| {b} | {hq}/{hkv} | {lq} | {lk} | {name} | failed: {msg} | | | |")
                continue
            rate = kv_bytes / kern / 1e6
            print(f"| {b} | {hq}/{hkv} | {lq} | {lk} | {name} | {kern:.1f} | {rate:.2f} | "
                  f"{rate / ceiling:.2f} | {call:.1f} |")
        del q, k, v, ref, impls
        kp = vp = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--flex", action="store_true")
    ap.add_argument("--variants", default="", help="comma-separated names from VARIANTS")
    a = ap.parse_args()
    if a.prebuild:
        prebuild(a.prebuild)
    else:
        names = [n for n in a.variants.split(",") if n]
        unknown = [n for n in names if n not in VARIANTS]
        if unknown:
            ap.error("unknown variant(s) %s; known: %s" % (unknown, ", ".join(VARIANTS)))
        run(a.flex, names)
