"""Masks of the indices alone (FlexAttention mask_mods that are not causal or a window):
flash_mlir.attention on CUDA tensors (static shapes, kernels from the cache; the mask's
tiles sorted at compile time by interval arithmetic: hidden ones skipped at the ends of
each block's key range, whole ones run mask-free) beside FlexAttention
(torch.compile(flex_attention) with the same mask_mod and its block mask, built once
outside the timing) and the same shape without a mask (ours and cuDNN's), in one process.

The claim to check: a mask runs at the speed its density predicts — kernel time ≈ the
unmasked kernel's × the fraction of (query, key) pairs the mask's visible tiles cover.
"density" is the fraction of pairs visible, "predicted µs" the unmasked kernel's time
× density. bf16, D = 128, 16 heads, B = 2, N = 8192 (Lq = Lk); kernel time from
torch.profiler, call time CUDA events around one call.

Here (compiler, no GPU):  python3 bench/gpu/bench_index_mask.py --prebuild DIR
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_index_mask.py

--decode-options KEY=VALUE[,KEY=VALUE...] adds, under each decode mask's row, the same call
with those kernel options (e.g. kernel=wgmma: the wgmma kernel's decode form, heads packed,
beside what kernel=auto takes); --prefill-options likewise under each prefill mask's row
(e.g. persistent=1: the persistent grid); to prebuild and to run alike.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402
from bench_call_cost import parse_options  # noqa: E402

B, H, N, D = 2, 16, 8192, 128


def chunked_512(b, h, q_idx, kv_idx):
    return (q_idx // 512) == (kv_idx // 512)


def chunked_2048(b, h, q_idx, kv_idx):
    return (q_idx // 2048) == (kv_idx // 2048)


def local_1024(b, h, q_idx, kv_idx):
    return abs(q_idx - kv_idx) <= 1024


def prefix_lm_1024(b, h, q_idx, kv_idx):
    return (kv_idx < 1024) | (kv_idx <= q_idx)


def chunked_causal_1024(b, h, q_idx, kv_idx):
    return ((q_idx // 1024) == (kv_idx // 1024)) & (kv_idx <= q_idx)


MASKS = [chunked_512, chunked_2048, local_1024, prefix_lm_1024, chunked_causal_1024]

# Decode: one query (the last position) of GQA 32/8 heads against a 32k cache, where a
# mask of the indices alone leaves a few of the cache's tiles (the split-KV kernel skips
# the rest and spreads its splits over what is left).
DBATCHES, DHQ, DHKV, DLK = (16, 1), 32, 8, 32768


def decode_chunked_8192(b, h, q_idx, kv_idx):
    return ((q_idx + DLK - 1) // 8192) == (kv_idx // 8192)


def decode_local_4096(b, h, q_idx, kv_idx):
    return (q_idx + DLK - 1) - kv_idx <= 4096


def decode_sink_local_2048(b, h, q_idx, kv_idx):
    return (kv_idx < 64) | ((q_idx + DLK - 1) - kv_idx <= 2048)


DECODE_MASKS = [decode_chunked_8192, decode_local_4096, decode_sink_local_2048]


def decode_shapes(db):
    return (db, DHQ, 1, D), (db, DHKV, DLK, D)


def prebuild(cache, decode_kw, prefill_kw=None):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    s = (B, H, N, D)
    print("none", flash_mlir.prebuild(s, s, s, "bf16"))
    for m in MASKS:
        print(m.__name__, flash_mlir.prebuild(s, s, s, "bf16", mask_mod=m))
        if prefill_kw:
            print(m.__name__, prefill_kw,
                  flash_mlir.prebuild(s, s, s, "bf16", mask_mod=m, **prefill_kw))
    for db in DBATCHES:
        qs, ks = decode_shapes(db)
        print("decode none", flash_mlir.prebuild(qs, ks, ks, "bf16"))
        for m in DECODE_MASKS:
            print(m.__name__, flash_mlir.prebuild(qs, ks, ks, "bf16", mask_mod=m))
            if decode_kw:
                print(m.__name__, decode_kw,
                      flash_mlir.prebuild(qs, ks, ks, "bf16", mask_mod=m, **decode_kw))


def run(out_md, decode_kw, decode_only=False, prefill_kw=None):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from common import device_line, measure

    flex = torch.compile(flex_attention)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    flops_dense = 4 * B * H * N * N * D
    base = measure(lambda: flash_mlir.attention(q, k, v))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        cudnn = measure(lambda: F.scaled_dot_product_attention(q, k, v))
    lines = ["# masks of the indices alone, " + device_line(), "",
             "B×H×N = %d×%d×%d, D = %d, bf16. Unmasked: ours %.0f µs (%.0f TFLOP/s), cuDNN "
             "%.0f µs." % (B, H, N, D, base[0], flops_dense / base[0] / 1e6, cudnn[0]), "",
             "| mask | density | ours kernel µs | ours call µs | predicted µs | ours / "
             "predicted | Flex kernel µs | ours / Flex (speed) | max |ours − Flex| |",
             "|---|---|---|---|---|---|---|---|---|"]
    i = torch.arange(N, device="cuda")[:, None]
    j = torch.arange(N, device="cuda")[None, :]
    for m in [] if decode_only else MASKS:
        for kw in [{}] + ([prefill_kw] if prefill_kw else []):
            lines.append(mask_row(flex, create_block_mask, measure, (q, k, v), m,
                                  m(0, 0, i, j).float().mean().item(), base[0], N, N,
                                  kernels="longest", digits=0, ours_kw=kw))
    for db in DBATCHES:
        lines += decode_rows(torch, flex, create_block_mask, measure, db, decode_kw)
    text = "\n".join(lines) + "\n"
    if out_md:
        with open(out_md, "w") as f:
            f.write(text)
    print(text)


def decode_rows(torch, flex, create_block_mask, measure, db, decode_kw):
    """The decode masks beside the unmasked decode (ours, cuDNN) and Flex's decode with
    the same mask_mod, each with a second row of ours under `decode_kw` when given; K + V
    read rate over the keys the mask leaves."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qs, ks = decode_shapes(db)
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(*qs, device="cuda", dtype=torch.bfloat16, generator=g)
    k, v = (torch.randn(*ks, device="cuda", dtype=torch.bfloat16, generator=g)
            for _ in range(2))
    kv_bytes = 2 * k.numel() * k.element_size()
    base = measure(lambda: flash_mlir.attention(q, k, v), kernels="all")
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        cudnn = measure(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                        kernels="all")
    lines = ["", "Decode: B = %d, GQA %d/%d, Lq = 1, Lk = %d, D = %d, bf16. Unmasked: ours "
             "%.1f µs (%.2f TB/s of K + V), cuDNN %.1f µs." % (
                 db, DHQ, DHKV, DLK, D, base[0], kv_bytes / base[0] / 1e6, cudnn[0]), "",
             "| mask | density | ours kernel µs | ours call µs | predicted µs | ours / "
             "predicted | Flex kernel µs | ours / Flex (speed) | max |ours − Flex| |",
             "|---|---|---|---|---|---|---|---|---|"]
    j = torch.arange(DLK, device="cuda")[None, :]
    i = torch.zeros(1, 1, dtype=torch.long, device="cuda")
    for m in DECODE_MASKS:
        for kw in [{}] + ([decode_kw] if decode_kw else []):
            lines.append(mask_row(flex, create_block_mask, measure, (q, k, v), m,
                                  m(0, 0, i, j).float().mean().item(), base[0], 1, DLK,
                                  kernels="all", digits=1, ours_kw=kw, enable_gqa=True))
    return lines


def mask_row(flex, create_block_mask, measure, qkv, m, density, base_us, lq, lk, kernels,
             digits, ours_kw=None, **flex_kw):
    """One table row: ours with mask_mod=m (and `ours_kw`'s kernel options, named in the
    row) beside Flex with its block mask (built outside the timing), the density's
    prediction from the unmasked time, and the largest difference of the two outputs.
    Times printed with `digits` decimals."""
    q, k, v = qkv
    ours_kw = ours_kw or {}
    ours = measure(lambda: flash_mlir.attention(q, k, v, mask_mod=m, **ours_kw),
                   kernels=kernels)
    try:
        bm = create_block_mask(m, None, None, lq, lk, device="cuda")
        fx = measure(lambda: flex(q, k, v, block_mask=bm, **flex_kw), kernels=kernels)
        diff = (flex(q, k, v, block_mask=bm, **flex_kw).float()
                - flash_mlir.attention(q, k, v, mask_mod=m, **ours_kw).float()
                ).abs().max().item()
    except Exception as e:  # noqa: BLE001 - report and go on
        print("flex", m.__name__, "failed:", str(e).splitlines()[0])
        fx, diff = (float("nan"),) * 3, float("nan")
    predicted = base_us * density
    t = "%%.%df" % digits
    line = ("| %s | %.3f | " + " | ".join([t] * 3) + " | %.2f | " + t + " | %.2f | %.3f |") % (
        m.__name__ + "".join(" [%s=%s]" % kv for kv in ours_kw.items()), density, ours[0], ours[1], predicted, ours[0] / predicted, fx[0],
        fx[0] / ours[0], diff)
    print(line, flush=True)
    return line


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--md", default=None)
    ap.add_argument("--decode-options", default=None, metavar="KEY=VALUE,...")
    ap.add_argument("--prefill-options", default=None, metavar="KEY=VALUE,...")
    ap.add_argument("--decode-only", action="store_true",
                    help="only the decode tables (and the unmasked prefill line)")
    a = ap.parse_args()
    decode_kw = parse_options(a.decode_options)
    prefill_kw = parse_options(a.prefill_options)
    if a.prebuild:
        prebuild(a.prebuild, decode_kw, prefill_kw)
        return
    run(a.md, decode_kw, a.decode_only, prefill_kw)


if __name__ == "__main__":
    main()
