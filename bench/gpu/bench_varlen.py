"""Packed variable-length prefill: several documents of different lengths in one call,
through flash_mlir.attention(q, k, v, cu_seqlens_q=, cu_seqlens_k=) on torch CUDA
tensors (static shapes, kernels from the cache; "ours[mma]" forces the mma.sync kernel),
beside, in the same process:
  fa2-varlen   FlashAttention-2's varlen kernel as torch ships it
               (aten._flash_attention_forward with cumulative offsets);
  cudnn-pad    cuDNN SDPA on the documents padded to the longest, [B, H, Lmax, D]: what
               a caller without varlen runs (the padding is computed and thrown away);
  flex-doc     FlexAttention on the packed tokens with a document mask (block-sparse:
               tiles across documents are skipped), torch.compile'd (--flex).
TFLOP/s counts the useful work only (4 · D · visible (query, key) pairs · Hq), the same
for every row. Kernel time is all kernels of one call (torch.profiler); call time is
CUDA events around one call.

Here (compiler, no GPU):  python3 bench/gpu/bench_varlen.py --prebuild DIR
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_varlen.py [--flex]
"""
import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402


def _docs(seed, n, lo, hi):
    r = random.Random(seed)
    return [r.randint(lo, hi) for _ in range(n)]


# (name, document lengths, Hq, Hkv, D, causal)
CASES = [
    ("8 docs 77-5000", [4096, 256, 1500, 3000, 77, 2048, 900, 5000], 32, 8, 128, True),
    ("64 docs 64-1024", _docs(1, 64, 64, 1024), 16, 16, 64, True),
    ("4 docs 100-8192", [8192, 8192, 100, 4000], 32, 8, 128, True),
    ("16 docs 200-3000 no mask", _docs(2, 16, 200, 3000), 16, 4, 128, False),
]


def _shapes(lens, hq, hkv, d):
    t = sum(lens)
    return (t, hq, d), (t, hkv, d), (t, hkv, d)


def prebuild(cache):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, lens, hq, hkv, d, causal in CASES:
        for kw in ({}, {"kernel": "mma"}):
            print(name, kw, flash_mlir.prebuild(*_shapes(lens, hq, hkv, d), "bf16",
                                                cu_seqlens=(len(lens) + 1,), causal=causal,
                                                **kw))


def run(with_flex):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from common import device_line, measure

    print(device_line())
    print()
    print("| case | tokens | Hq/Hkv | D | impl | kernel µs | TFLOP/s | call µs |")
    print("|---|---|---|---|---|---|---|---|")
    flex = None
    if with_flex:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = torch.compile(flex_attention)
    for name, lens, hq, hkv, d, causal in CASES:
        qs, ks, vs = _shapes(lens, hq, hkv, d)
        t = qs[0]
        q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(vs, device="cuda", dtype=torch.bfloat16)
        offs = [0]
        for n in lens:
            offs.append(offs[-1] + n)
        cu = torch.tensor(offs, dtype=torch.int32, device="cuda")
        pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lens)
        flops = 4 * d * pairs * hq
        lmax, g = max(lens), hq // hkv
        impls = [("ours", lambda: flash_mlir.attention(q, k, v, cu_seqlens_q=cu,
                                                       cu_seqlens_k=cu, causal=causal)),
                 ("ours[mma]", lambda: flash_mlir.attention(q, k, v, cu_seqlens_q=cu,
                                                            cu_seqlens_k=cu, causal=causal,
                                                            kernel="mma"))]

        def fa2():
            return torch.ops.aten._flash_attention_forward(
                q, k, v, cu, cu, lmax, lmax, 0.0, causal, False)[0]
        impls.append(("fa2-varlen", fa2))
        # Padded batch [B, H, Lmax, D]; padding keys masked by a boolean mask when the
        # lengths differ (cuDNN takes is_causal or a mask, so causal + padding = a mask).
        qp = torch.zeros(len(lens), hq, lmax, d, device="cuda", dtype=torch.bfloat16)
        kp = torch.zeros(len(lens), hkv, lmax, d, device="cuda", dtype=torch.bfloat16)
        vp = torch.zeros_like(kp)
        for b, n in enumerate(lens):
            qp[b, :, :n] = q[offs[b]:offs[b + 1]].transpose(0, 1)
            kp[b, :, :n] = k[offs[b]:offs[b + 1]].transpose(0, 1)
            vp[b, :, :n] = v[offs[b]:offs[b + 1]].transpose(0, 1)
        kr, vr = kp.repeat_interleave(g, 1), vp.repeat_interleave(g, 1)

        def cudnn_pad():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(qp, kr, vr, is_causal=causal)
        impls.append(("cudnn-pad", cudnn_pad))
        if flex is not None:
            doc = torch.repeat_interleave(torch.arange(len(lens), device="cuda"),
                                          torch.tensor(lens, device="cuda"))

            def doc_mask(b, h, qi, ki):
                same = doc[qi] == doc[ki]
                return same & (qi >= ki) if causal else same
            bm = create_block_mask(doc_mask, 1, 1, t, t, device="cuda")
            q1, k1, v1 = (x.transpose(0, 1).unsqueeze(0) for x in (q, k, v))
            impls.append(("flex-doc", lambda: flex(q1, k1, v1, block_mask=bm,
                                                   enable_gqa=True)[0].transpose(0, 1)))
        ref = None
        for iname, fn in impls:
            try:
                out = fn()
                torch.cuda.synchronize()
                if iname == "ours":
                    ref = out
                elif iname != "cudnn-pad" and (out.float() - ref.float()).abs().max() > 0.05:
                    print(f"| {name} | {t} | {hq}/{hkv} | {d} | {iname} | differs from ours "
                          f"| | |")
                kern, call, _ = measure(fn, calls=20, kernels="all")
            except Exception as e:  # a backend that does not take the shape
                msg = str(e).strip().splitlines()[0][:60] if str(e).strip() else type(e).__name__
                print(f"| {name} | {t} | {hq}/{hkv} | {d} | {iname} | failed: {msg} | | |")
                continue
            print(f"| {name} | {t} | {hq}/{hkv} | {d} | {iname} | {kern:.1f} | "
                  f"{flops / kern / 1e6:.0f} | {call:.1f} |")
        del q, k, v, qp, kp, vp, kr, vr, impls, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--flex", action="store_true")
    a = ap.parse_args()
    if a.prebuild:
        prebuild(a.prebuild)
    else:
        run(a.flex)
