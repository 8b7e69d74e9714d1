"""What a call on buffers never seen before costs, by how a kernel takes its TMA maps.

The same 64×64 TMA + wgmma kernel (test/Integration/GPU/Inputs/tma_qk.mlir) built two
ways: libtma_qk (upstream gpu-lower-to-nvvm-pipeline: each map through a device copy,
uploaded synchronously when new) and libtma_qk_param (flash-lower-to-nvvm: each map a
grid-constant parameter carried by the launch). Each row queues a long GPU job first
(torch.cuda._sleep), then calls the kernel on N input buffers the process has never
passed before, and reports the host time per call; the GPU queue then drains. A call
that waits for the queue shows the job's length; one that does not, a few µs. Then the
same on N buffers already seen (a warm cache for the pointer kernel).

There (GPU): FLASH_GPU_ARTIFACTS=build/gpu-artifacts/runtime python3 bench/gpu/bench_tensormap.py
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402

from flash_mlir.gpu import KernelLibrary  # noqa: E402

ART = os.environ.get("FLASH_GPU_ARTIFACTS",
                     os.path.join(HERE, "..", "..", "build", "gpu-artifacts", "runtime"))
CALLS = 32


def host_us(lib, qs, k, s, busy_cycles):
    torch.cuda.synchronize()
    torch.cuda._sleep(busy_cycles)
    t0 = time.perf_counter()
    for q in qs:
        lib("tma_qk", q, k, s)
    dt = (time.perf_counter() - t0) / len(qs) * 1e6
    torch.cuda.synchronize()
    return dt


def main():
    busy = 20_000_000  # ~10 ms of GPU time on the H200's clock
    k = torch.randn(64, 64, device="cuda").half()
    s = torch.empty(64, 64, device="cuda")
    print("| kernel takes its maps | host µs/call, new buffers | host µs/call, buffers seen before |")
    print("|---|---|---|")
    keep = []  # never freed, so no address comes back
    for name, how in (("tma_qk", "through a device copy"), ("tma_qk_param", "by value")):
        lib = KernelLibrary(os.path.join(ART, f"lib{name}.so"))
        lib("tma_qk", torch.randn(64, 64, device="cuda").half(), k, s)  # load, warm up
        fresh = [torch.randn(64, 64, device="cuda").half() for _ in range(CALLS)]
        keep += fresh
        new = host_us(lib, fresh, k, s, busy)
        seen = host_us(lib, fresh, k, s, busy)
        # wgmma sums the 64 products in another order than cuBLAS: equal to rounding.
        ref = fresh[-1].double() @ k.double()
        err = (s.double() - ref).abs().max().item()
        assert err <= 1e-5 * ref.abs().max().item(), (name, err)
        print(f"| {how} ({name}) | {new:.1f} | {seen:.1f} |", flush=True)


if __name__ == "__main__":
    main()
