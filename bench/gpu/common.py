"""Shared pieces of bench/gpu: finding our compiled kernels, calling them, timing.

Our kernels come as a directory of kernel libraries plus manifest.json (see
/work/notes/gpu-interface.md and bench/gpu/build_artifacts.py); when the directory or a
matching kernel is absent, callers skip "ours" and still measure everything else.
"""
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import torch  # noqa: E402

from flash_mlir.gpu import FlashRuntimeError, KernelLibrary  # noqa: E402,F401


class OurKernels:
    """Kernels listed in <dir>/manifest.json, selected by configuration."""

    def __init__(self, directory):
        self.dir = directory
        self.kernels = []
        self._libs = {}
        path = os.path.join(directory, "manifest.json") if directory else None
        if path and os.path.exists(path):
            with open(path) as f:
                self.kernels = json.load(f)["kernels"]

    def __bool__(self):
        return bool(self.kernels)

    def find(self, dtype, head_dim, mask=None, score_mod=None, hq=None, hkv=None, lq=None, lk=None,
             batch=None):
        for k in self.kernels:
            if (k["dtype"], k["head_dim"], k.get("mask"), k.get("score_mod")) != (dtype, head_dim, mask, score_mod):
                continue
            shape = k.get("shape") or {}
            want = {"B": batch, "Hq": hq, "Hkv": hkv, "Lq": lq, "Lk": lk}
            if any(shape.get(n) is not None and v is not None and shape[n] != v for n, v in want.items()):
                continue
            return k
        return None

    def library(self, entry):
        lib = self._libs.get(entry["lib"])
        if lib is None:
            lib = self._libs[entry["lib"]] = KernelLibrary(os.path.join(self.dir, entry["lib"]))
        return lib

    def run(self, entry, q, k, v, out, *captures):
        """out <- attention(q, k, v) on torch's current stream (asynchronous)."""
        self.library(entry)(entry["entry"], q, k, v, out, *captures,
                            pass_stream=entry.get("pass_stream", True))


def time_ms(fn, warmup=3, iters=10):
    """Median of `iters` event-timed calls of fn() after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        times.append((s, e))
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in times)


def device_line():
    p = torch.cuda.get_device_properties(0)
    return (f"{p.name}, {p.multi_processor_count} SMs, torch {torch.__version__}, "
            f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")


def kernel_breakdown(fn, calls=20):
    """[(kernel name, device µs per call)] of fn()'s kernels, longest first
    (torch.profiler): where a multi-kernel call spends its time."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total = {}
    for e in prof.events():
        if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type) \
                and e.device_time > 0:
            total[e.name] = total.get(e.name, 0.0) + e.device_time
    return sorted(((n, t / calls) for n, t in total.items()), key=lambda x: -x[1])


def measure(fn, calls=30, kernels="longest"):
    """(kernel µs, call µs, host µs per call) of fn():
      kernel — device time from torch.profiler: the longest kernel of each call
               (kernels="longest": the attention kernel, not a backend's small
               preparatory ones), or all kernels of a call together ("all": a
               split decode is two launches);
      call   — CUDA events around one call, median;
      host   — host time per call over back-to-back calls that do not wait."""
    from torch.profiler import ProfilerActivity, profile
    call_us = time_ms(fn, warmup=3, iters=calls) * 1e3
    # host: back-to-back calls, no waiting.
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    host_us = (time.perf_counter() - t0) / calls * 1e6
    torch.cuda.synchronize()
    # kernel: the longest kernel of each call (the attention kernel; the rest are
    # small preparatory kernels of some backends).
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    durs = [e.device_time for e in prof.events()
            if getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type)
            and e.device_time > 0]
    durs.sort(reverse=True)
    if kernels == "all":
        kernel_us = sum(durs) / calls if durs else float("nan")
    else:
        kernel_us = statistics.median(durs[:calls]) if durs else float("nan")
    return kernel_us, call_us, host_us
