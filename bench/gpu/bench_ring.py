"""Ring (context-parallel) attention's compute on one GPU: the steps of every rank of a
ring of W, run in turn (flash_mlir.distributed's own plans, kernel calls with LSE and
merges — simulate_ring's arithmetic, without the transport), beside one full-length
flash_mlir.attention call (with its LSE, as training runs it) and its backward.

Per case, CUDA events (median of 10 after 3 warm-ups) time:
  full       the whole sequence on one GPU, forward (and backward: attention_backward);
  rank       each rank's W steps into its running result (the slowest and the fastest
             rank): the ring's time per layer when the exchange is hidden, whose ideal
             is full / W; efficiency = (full / W) / slowest rank;
  step       one visiting step of the slowest rank: the kernel alone, and the merge of
             its partial into the running (out, lse) alone;
  exchange   the bytes each rank sends per step (K and V; in the backward also the f32
             dK and dV accumulators) and the link bandwidth that moves them within one
             step's compute — what an NVLink/InfiniBand ring must sustain to hide it.
             This is derived from the measured step time, not a measured transfer
             (one GPU has no ring).

Here (compiler, no GPU):  python3 bench/gpu/bench_ring.py --prebuild DIR
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_ring.py [--no-backward]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402

B, HQ, HKV, D = 1, 32, 8, 128
# (total length, ranks, layout, causal)
CASES = [(n, w, "zigzag", True) for n in (16384, 65536) for w in (2, 4, 8)] + [
    (65536, 4, "contiguous", True),
    (65536, 4, "contiguous", False),
]


def _shape(heads, n):
    return (B, heads, n, D)


def prebuild(cache):
    from flash_mlir import distributed as fd
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for n, w, layout, causal in CASES:
        lengths = fd.split_lengths(n, w, layout)
        print(n, w, layout, causal, "ring",
              fd.prebuild(_shape(HQ, lengths[0]), _shape(HKV, lengths[0]),
                          _shape(HKV, lengths[0]), "bf16", world_size=w, causal=causal,
                          layout=layout, lengths=lengths, grad=True))
        print(n, w, layout, causal, "full",
              flash_mlir.prebuild(_shape(HQ, n), _shape(HKV, n), _shape(HKV, n), "bf16",
                                  causal=causal, grad=True))


def run(backward):
    import torch
    from common import device_line, time_ms
    from flash_mlir import distributed as fd
    from flash_mlir.merge import merge_attention

    print(device_line())
    print()
    cols = ["L", "W", "layout", "mask", "fwd full ms", "fwd rank ms slowest (fastest)",
            "fwd full/W ms", "fwd eff.", "step kernel µs", "step merge µs",
            "K/V MB/step", "GB/s to hide"]
    if backward:
        cols += ["bwd full ms", "bwd rank ms slowest (fastest)", "bwd eff.",
                 "bwd MB/step", "bwd GB/s to hide"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    dt = torch.bfloat16

    def rand(*s):
        return torch.randn(*s, device="cuda", dtype=dt)
    for n, w, layout, causal in CASES:
        lengths = fd.split_lengths(n, w, layout)
        plan = fd._Plan(lengths, lengths, causal, layout, None, None, {}, True)
        # Values do not change the time: one K/V pair per slice length serves every rank.
        kv = {m: (rand(*_shape(HKV, m)), rand(*_shape(HKV, m))) for m in set(lengths)}
        qs = {m: rand(*_shape(HQ, m)) for m in set(lengths)}
        q, k, v = rand(*_shape(HQ, n)), rand(*_shape(HKV, n)), rand(*_shape(HKV, n))
        full_o, full_lse = flash_mlir.attention(q, k, v, causal=causal, return_lse=True)
        full_f = time_ms(lambda: flash_mlir.attention(q, k, v, causal=causal,
                                                      return_lse=True))

        def rank_forward(r):
            acc = fd._new_acc(qs[lengths[r]], D)
            for t in range(w):
                c = (r - t) % w
                fd._forward_step(qs[lengths[r]], *kv[lengths[c]], plan.calls(r, c), acc,
                                 plan)
            return acc
        fwd = [time_ms(lambda r=r: rank_forward(r)) for r in range(w)]
        slow = max(range(w), key=lambda r: fwd[r])
        # One visiting step of the slowest rank (its first, if it has any).
        calls = plan.calls(slow, (slow - 1) % w) if w > 1 else plan.calls(slow, slow)
        ql, kl = lengths[slow], lengths[(slow - 1) % w]
        qa, qb, ka, kb, mask = calls[0] if calls else (0, ql, 0, kl, causal)
        qr, (kr, vr) = qs[ql][..., qa:qb, :], (x[..., ka:kb, :] for x in kv[kl])
        step_kernel = time_ms(lambda: flash_mlir.attention(qr, kr, vr, causal=mask,
                                                           return_lse=True))
        o, lse = flash_mlir.attention(qr, kr, vr, causal=mask, return_lse=True)
        acc_o = torch.randn(o.shape, device="cuda")
        acc_l = torch.randn(lse.shape, device="cuda")
        step_merge = time_ms(lambda: merge_attention([acc_o, o], [acc_l, lse],
                                                     out_dtype=torch.float32))
        mb = 2 * B * HKV * max(lengths) * D * 2 / 1e6
        row = [n, w, layout, "causal" if causal else "none", "%.2f" % full_f,
               "%.2f (%.2f)" % (fwd[slow], min(fwd)), "%.2f" % (full_f / w),
               "%.0f %%" % (100 * full_f / w / fwd[slow]), "%.0f" % (step_kernel * 1e3),
               "%.0f" % (step_merge * 1e3), "%.1f" % mb,
               "%.0f" % (mb / 1e3 / (fwd[slow] / w / 1e3))]
        if backward:
            do = rand(*full_o.shape)
            full_b = time_ms(lambda: flash_mlir.attention_backward(
                q, k, v, full_o, do, full_lse, causal=causal))
            outs = {}
            for r in range(w):
                a = rank_forward(r)
                outs[r] = (a[0].to(dt), a[1], rand(*a[0].shape))

            def rank_backward(r):
                qq = qs[lengths[r]]
                o_r, lse_r, do_r = outs[r]
                dq = torch.zeros(qq.shape, dtype=torch.float32, device="cuda")
                for t in range(w):
                    c = (r - t) % w
                    kk, vv = kv[lengths[c]]
                    share = (fd._zeros_f32(kk, lengths[c]), fd._zeros_f32(vv, lengths[c]))
                    fd._backward_step(qq, kk, vv, o_r, do_r, lse_r, plan.calls(r, c),
                                      (dq,) + share, plan)
            bwd = [time_ms(lambda r=r: rank_backward(r)) for r in range(w)]
            bslow = max(bwd)
            # K and V in bf16 plus the dK, dV accumulators in f32.
            bmb = mb + 2 * B * HKV * max(lengths) * D * 4 / 1e6
            row += ["%.2f" % full_b, "%.2f (%.2f)" % (bslow, min(bwd)),
                    "%.0f %%" % (100 * full_b / w / bslow), "%.1f" % bmb,
                    "%.0f" % (bmb / 1e3 / (bslow / w / 1e3))]
        print("| " + " | ".join(str(x) for x in row) + " |", flush=True)
        q = k = v = full_o = full_lse = kv = qs = None  # free them before the next case
        torch.cuda.empty_cache()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--no-backward", action="store_true")
    a = ap.parse_args()
    if a.prebuild:
        prebuild(a.prebuild)
    else:
        run(not a.no_backward)
