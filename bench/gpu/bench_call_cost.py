"""Kernel time and what a caller sees, through flash_mlir.attention, beside torch SDPA's
cuDNN and FlashAttention-2 backends in the same process.

For each shape, three numbers per implementation:
  kernel  — device time of the attention kernel alone (torch.profiler, median over calls);
  call    — CUDA events around one call, median: host overhead + launch + kernel, what a
            caller that waits on the result sees;
  host    — host time per call over back-to-back calls that do not wait (the Python and
            launch cost a caller pays even when the GPU is not the bottleneck);
  idle    — wall time from call to return with the GPU idle before it (median over
            calls): the latency a caller that waits on every call pays before its
            kernel can start.
"sdpa" is torch's default dispatch (no sdpa_kernel context, whose entry and exit cost
~20 µs of their own); "cudnn" / "fa2" pin the backend inside the context.

Here (compiler, no GPU):  python3 bench/gpu/bench_call_cost.py --prebuild DIR [--variant ...]
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_call_cost.py [--variant ...]

--variant NAME=KEY=VALUE[,KEY=VALUE...] (repeatable) adds a row "ours-NAME" per shape:
flash_mlir.attention with those kernel options (e.g. pers=persistent=1), to prebuild and
to run alike.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402

# (label, B, Hq, Hkv, Lq, Lk, D, causal)
CASES = [
    ("B·H=64 N=2k D=64", 4, 16, 16, 2048, 2048, 64, False),
    ("B·H=64 N=2k D=64 causal", 4, 16, 16, 2048, 2048, 64, True),
    ("B·H=64 N=2k D=128 causal", 4, 16, 16, 2048, 2048, 128, True),
    ("B·H=128 N=1k D=64 causal", 8, 16, 16, 1024, 1024, 64, True),
    ("B·H=128 N=1k D=128", 8, 16, 16, 1024, 1024, 128, False),
    ("B·H=128 N=1k D=128 causal", 8, 16, 16, 1024, 1024, 128, True),
    ("B=1 GQA 32/8 N=4k D=128 causal", 1, 32, 8, 4096, 4096, 128, True),
    ("N=3000 D=128 causal", 2, 16, 16, 3000, 3000, 128, True),
    ("Lq=700 Lk=3000 D=64", 2, 16, 16, 700, 3000, 64, False),
    # Decode (the split-KV kernel: two launches and the partials' allocation).
    ("decode B=1 8/1 Lk=4k D=128", 1, 8, 1, 1, 4096, 128, False),
    ("decode B=16 32/8 Lk=8k D=128", 16, 32, 8, 1, 8192, 128, False),
]


# The breakdown's rows, and the FlexAttention-style calls it times beside the plain one.
BREAKDOWN_ROWS = ("B·H=128 N=1k D=64 causal", "decode B=1 8/1 Lk=4k D=128",
                  "decode B=16 32/8 Lk=8k D=128")


def softcap(score, b, h, q_idx, kv_idx):
    return 30.0 * flash_mlir.score.tanh(score / 30.0)


def sinks_window(lq, lk):
    """64 sink keys and the 2048 keys up to the query (queries the last Lq keys)."""
    off = lk - lq

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx < 64) | ((kv_idx <= q_idx + off) & (q_idx + off - kv_idx < 2048))
    return mask_mod


def flex_calls(case):
    """(label, attention() keywords) of the Flex-style calls on a breakdown row; one
    function object per row, as a caller keeps it."""
    _, _, _, _, lq, lk, _, causal = case
    return [("score_mod=softcap", dict(causal=causal, score_mod=softcap)),
            ("mask_mod=sinks|window", dict(mask_mod=sinks_window(lq, lk)))]


def shapes(case):
    _, b, hq, hkv, lq, lk, d, causal = case
    return (b, hq, lq, d), (b, hkv, lk, d), (b, hkv, lk, d), causal


def parse_options(text):
    """KEY=VALUE,... -> {KEY: int or str} (attention()'s kernel option keywords)."""
    kw = {}
    for item in filter(None, (text or "").split(",")):
        key, _, value = item.partition("=")
        kw[key] = int(value) if value.lstrip("-").isdigit() else value
    return kw


def parse_variant(text):
    """NAME=KEY=VALUE,... -> (NAME, {KEY: int or str})."""
    name, _, opts = text.partition("=")
    return name, parse_options(opts)


def prebuild(cache, variants):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for case in CASES:
        qs, ks, vs, causal = shapes(case)
        for _, kw in [("", {})] + variants:
            print(flash_mlir.prebuild(qs, ks, vs, "bf16", causal=causal, **kw))
        if case[0] in BREAKDOWN_ROWS:
            for _, fkw in flex_calls(case):
                for _, kw in [("", {})] + variants:
                    print(flash_mlir.prebuild(qs, ks, vs, "bf16", **dict(fkw, **kw)))


def run(variants):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from common import device_line, measure, time_ms

    print(device_line())
    import statistics
    import time

    def idle_us(fn, calls=50):
        ts = []
        for _ in range(calls):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        return statistics.median(ts) * 1e6

    print("| shape | impl | kernel µs | TFLOP/s (kernel) | call µs | TFLOP/s (call) | host µs/call | idle µs |")
    print("|---|---|---|---|---|---|---|---|")
    # Host-side numbers first, for every shape and implementation, then the
    # kernel times: a torch.profiler session leaves the launch path slower for
    # the rest of the process (host time per call doubled after the first
    # profiled shape, bench/NOTES.md run 43).
    rows = []
    for case in CASES:
        label = case[0]
        qs, ks, vs, causal = shapes(case)
        q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(vs, device="cuda", dtype=torch.bfloat16)
        b, hq, lq, d = qs
        lk = ks[2]
        pairs = lq * lk / 2 if causal else lq * lk  # causal cases are square
        flops = 4 * b * hq * pairs * d
        gqa = hq != ks[1]
        impls = [("ours", lambda q=q, k=k, v=v, causal=causal:
                  flash_mlir.attention(q, k, v, causal=causal))]
        for vname, kw in variants:
            impls.append(("ours-" + vname,
                          lambda kw=kw, q=q, k=k, v=v, causal=causal:
                          flash_mlir.attention(q, k, v, causal=causal, **kw)))
        # The Flex-style calls of a breakdown row, alone and under each variant.
        if label in BREAKDOWN_ROWS:
            for flabel, fkw in flex_calls(case):
                for vname, kw in [("", {})] + variants:
                    impls.append(("ours %s%s" % (flabel, "-" + vname if vname else ""),
                                  lambda kw=dict(fkw, **kw), q=q, k=k, v=v:
                                  flash_mlir.attention(q, k, v, **kw)))
        impls += [("sdpa", lambda q=q, k=k, v=v, causal=causal, gqa=gqa:
                   F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa))]
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("fa2", SDPBackend.FLASH_ATTENTION)):
            def sdpa(backend=backend, q=q, k=k, v=v, causal=causal, gqa=gqa):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                          enable_gqa=gqa)
            impls.append((name, sdpa))
        for name, fn in impls:
            try:
                call = time_ms(fn, warmup=3, iters=30) * 1e3
                t0 = time.perf_counter()
                for _ in range(30):
                    fn()
                host = (time.perf_counter() - t0) / 30 * 1e6
                torch.cuda.synchronize()
                idle = idle_us(fn)
            except RuntimeError as e:
                rows.append((label, name, None, str(e).splitlines()[0][:60]))
                continue
            rows.append((label, name, fn, (call, host, idle, flops, lq)))
    for label, name, fn, data in rows:
        if fn is None:
            print(f"| {label} | {name} | failed: {data} | | | | | |")
            continue
        call, host, idle, flops, lq = data
        kern = measure(fn, kernels="all" if lq == 1 else "longest")[0]
        print(f"| {label} | {name} | {kern:.1f} | {flops / kern / 1e6:.0f} | {call:.1f} | "
              f"{flops / call / 1e6:.0f} | {host:.1f} | {idle:.1f} |", flush=True)


def breakdown():
    """Where a plain call's host time goes, step by step, on three rows (a prefill
    and two decodes): each step timed alone in bursts of 200 calls after a sync
    (the launch queue never fills), the minimum per call over 30 bursts. The
    launch is split into its Python part (the foreign call replaced by a no-op)
    and the foreign call (the host function: maps, allocation, launches). Beside
    them, the FlexAttention-style calls of flex_calls (a score_mod, a mask_mod
    that stays one) on the same row."""
    import torch
    import torch.nn.functional as F
    from flash_mlir import _attention as A
    from common import device_line
    import time

    print(device_line())

    def per_call(fn, n=200, bursts=30):
        best = float("inf")
        for _ in range(bursts):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best = min(best, (time.perf_counter() - t0) / n)
        torch.cuda.synchronize()
        return best * 1e6

    print("| shape | step | µs/call |")
    print("|---|---|---|")
    for case in [c for c in CASES if c[0] in BREAKDOWN_ROWS]:
        qs, ks, vs, causal = shapes(case)
        q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(vs, device="cuda", dtype=torch.bfloat16)
        gqa = qs[1] != ks[1]
        flash_mlir.attention(q, k, v, causal=causal)
        key = A._plain_key(q, k, v, None, causal, None, None, False)
        launch, stream, o_shape, _ = A._plain_calls[key]
        out = q.new_empty(o_shape)
        dev = q.get_device()
        cells = dict(zip(launch.__code__.co_freevars, launch.__closure__))
        steps = [
            ("attention()", lambda: flash_mlir.attention(q, k, v, causal=causal)),
            ("sdpa (default dispatch)", lambda: F.scaled_dot_product_attention(
                q, k, v, is_causal=causal, enable_gqa=gqa)),
            ("_plain_key", lambda: A._plain_key(q, k, v, None, causal, None, None, False)),
            ("3 × contiguous()", lambda: (q.contiguous(), k.contiguous(), v.contiguous())),
            ("q.new_empty(out)", lambda: q.new_empty(o_shape)),
            ("stream handle", lambda: stream(dev)),
            ("launch (all)", lambda: launch((q, k, v, out), stream(dev), dev)),
        ]
        for label, kw in flex_calls(case):
            flash_mlir.attention(q, k, v, **kw)
            steps.append(("attention(%s)" % label,
                          lambda kw=kw: flash_mlir.attention(q, k, v, **kw)))
        for name, fn in steps:
            print(f"| {case[0]} | {name} | {per_call(fn):.2f} |", flush=True)
        real = cells["call"].cell_contents
        cells["call"].cell_contents = lambda *a: 0
        try:
            py = per_call(lambda: launch((q, k, v, out), stream(dev), dev))
        finally:
            cells["call"].cell_contents = real
        print(f"| {case[0]} | launch: Python part | {py:.2f} |")
        descs, argv = cells["local"].cell_contents.state
        function, nargs = cells["function"].cell_contents, cells["nargs"].cell_contents
        argv[nargs - 1] = stream(dev)
        print(f"| {case[0]} | launch: foreign call | "
              f"{per_call(lambda: real(dev, function, nargs, argv)):.2f} |", flush=True)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--breakdown", action="store_true",
                    help="time a plain call's host steps one by one (GPU)")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="only the shapes whose label contains TEXT (repeatable)")
    a = ap.parse_args()
    if a.only:
        CASES[:] = [c for c in CASES if any(t in c[0] for t in a.only)]
    vs = [parse_variant(v) for v in a.variant]
    if a.prebuild:
        prebuild(a.prebuild, vs)
    elif a.breakdown:
        breakdown()
    else:
        run(vs)
