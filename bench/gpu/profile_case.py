"""One attention call, repeated, inside a profiler range: the driver for Nsight Compute.

Runs one shape through one implementation (ours through flash_mlir.attention, or torch
SDPA's cuDNN / FlashAttention-2 backend) a few times to warm up, then --calls more between
cudaProfilerStart and cudaProfilerStop, so that

    ncu --profile-from-start off --clock-control none --set full -o REPORT \\
        python3 bench/gpu/profile_case.py --impl cudnn --shape 4,16,16,2048,2048,128 --causal

profiles the attention kernels alone (no input generation, no warm-up compilation).
With --timeline N it instead times N back-to-back calls one by one (CUDA events) and prints
each, to see a sustained run settle (clocks, power) where a single profiled call does not.

Here (compiler, no GPU):  python3 bench/gpu/profile_case.py --prebuild DIR --shape ... [--options ...]
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR ncu ... python3 bench/gpu/profile_case.py ...
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402
from bench_call_cost import parse_options  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", choices=("ours", "cudnn", "fa2"), default="ours")
    ap.add_argument("--shape", required=True,
                    help="B,Hq,Hkv,Lq,Lk,D[,Dv] (bf16, [B, H, L, D] tensors)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--options", default="",
                    help="KEY=VALUE,... kernel options of ours (e.g. persistent=1)")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--timeline", type=int, default=0, metavar="N",
                    help="time N back-to-back calls one by one instead of profiling")
    ap.add_argument("--prebuild", metavar="DIR",
                    help="compile ours' kernel into the cache DIR and exit")
    args = ap.parse_args()

    dims = [int(x) for x in args.shape.split(",")]
    if len(dims) not in (6, 7):
        ap.error("--shape needs B,Hq,Hkv,Lq,Lk,D[,Dv], got %r" % args.shape)
    b, hq, hkv, lq, lk, d = dims[:6]
    dv = dims[6] if len(dims) == 7 else d
    qs, ks, vs = (b, hq, lq, d), (b, hkv, lk, d), (b, hkv, lk, dv)
    kw = parse_options(args.options)
    if args.prebuild:
        if args.impl != "ours":
            ap.error("--prebuild compiles ours' kernel only")
        os.environ["FLASH_MLIR_CACHE_DIR"] = args.prebuild
        os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
        print(flash_mlir.prebuild(qs, ks, vs, "bf16", causal=args.causal, **kw))
        return

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(vs, device="cuda", dtype=torch.bfloat16)
    if args.impl == "ours":
        def call():
            return flash_mlir.attention(q, k, v, causal=args.causal, **kw)
    else:
        if kw:
            ap.error("--options applies to --impl ours only")
        backend = {"cudnn": SDPBackend.CUDNN_ATTENTION,
                   "fa2": SDPBackend.FLASH_ATTENTION}[args.impl]

        def call():
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=args.causal,
                                                      enable_gqa=hq != hkv)
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    if args.timeline:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(args.timeline + 1)]
        events[0].record()
        for e in events[1:]:
            call()
            e.record()
        torch.cuda.synchronize()
        ms = [a.elapsed_time(b) for a, b in zip(events, events[1:])]
        print("%s %s: per-call ms %s" % (args.impl, args.shape,
                                        " ".join("%.3f" % m for m in ms)))
        return
    torch.cuda.profiler.start()
    for _ in range(args.calls):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
