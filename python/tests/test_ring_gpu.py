"""Ring attention on one GPU: flash_mlir.distributed.simulate_ring runs the
steps of W ranks in one process (the same plans, kernel calls with LSE and
merges as ring_attention, without the transport), and ring_attention itself
runs on a NCCL group of one rank.

Rules as the other GPU tests: the whole sequence's output and dq, dk, dv
against float64 from the definition, within twice the error of torch SDPA
on the same (rounded) inputs plus 1e-3 of the largest magnitude; the lse
within 1e-3. A ring of one is bit-identical to flash_mlir.attention (with
deterministic dq). Run where the kernels are, or fill a cache folder here with
    python3 python/tests/test_ring_gpu.py --prebuild DIR
and run with FLASH_MLIR_CACHE_DIR=DIR on the GPU machine."""
import math
import os
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from test_attention_gpu import _compiler, _cuda  # noqa: E402
from test_attention_grad_gpu import _allowed, _check, _reference, _sdpa  # noqa: E402


def _case(world, b, hq, hkv, d, dv, lengths, causal, layout):
    return dict(world=world, b=b, hq=hq, hkv=hkv, d=d, dv=dv, lengths=lengths, causal=causal,
                layout=layout)


# Slice lengths are rarely multiples of a kernel's tiles; D, Dv within the GPU
# backward's (multiples of 16 up to 128).
CASES = {
    "zigzag-causal-w4": _case(4, 1, 8, 2, 64, 64, [256] * 4, True, "zigzag"),
    "zigzag-causal-w8-d128": _case(8, 1, 8, 8, 128, 128, [130] * 8, True, "zigzag"),
    "contiguous-causal-uneven-w3": _case(3, 2, 4, 1, 64, 64, [300, 77, 401], True,
                                         "contiguous"),
    "contiguous-full-w2-dv128": _case(2, 1, 8, 2, 64, 128, [333, 200], False, "contiguous"),
}
DTYPE = "bfloat16"
# A ring of one rank on NCCL: (shape of q, k/v heads, causal).
ONE_RANK = ((1, 8, 777, 64), 2, True)
ONE_RANK_OPTIONS = dict(grad_deterministic=True)


def _shapes(c, length):
    return ((c["b"], c["hq"], length, c["d"]), (c["b"], c["hkv"], length, c["d"]),
            (c["b"], c["hkv"], length, c["dv"]))


def prebuild_all(cache_dir):
    from flash_mlir import distributed as fd
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, c in CASES.items():
        print(name, fd.prebuild(*_shapes(c, c["lengths"][0]), DTYPE, world_size=c["world"],
                                causal=c["causal"], layout=c["layout"], lengths=c["lengths"],
                                grad=True))
    qs, hkv, causal = ONE_RANK
    ks = qs[:1] + (hkv,) + qs[2:]
    print("one-rank", fd.prebuild(qs, ks, ks, DTYPE, world_size=1, causal=causal, grad=True,
                                  **ONE_RANK_OPTIONS))


def _forward_reference(torch, q, k, v, scale, allowed):
    """float64 (o, lse) from the definition."""
    g = q.shape[1] // k.shape[1]
    s = scale * q.double() @ k.double().repeat_interleave(g, 1).transpose(-1, -2)
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    return torch.softmax(s, -1) @ v.double().repeat_interleave(g, 1), torch.logsumexp(s, -1)


@pytest.mark.parametrize("name", list(CASES))
def test_simulated_ring_matches_reference(name):
    torch = _cuda()
    import torch.nn.functional as F
    from flash_mlir import distributed as fd
    c = CASES[name]
    w, layout, lengths = c["world"], c["layout"], c["lengths"]
    total = sum(lengths)
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    dt = getattr(torch, DTYPE)
    qs, ks, vs = _shapes(c, total)
    q, k, v = (torch.randn(*s, device="cuda", dtype=dt, generator=g) for s in (qs, ks, vs))
    do = torch.randn(*(qs[:-1] + vs[-1:]), device="cuda", dtype=dt, generator=g)

    def sh(x):
        return fd.shard(x, w, layout=layout, lengths=lengths)
    outs, grads = fd.simulate_ring(sh(q), sh(k), sh(v), causal=c["causal"], layout=layout,
                                   dos=sh(do))
    torch.cuda.synchronize()
    o = fd.unshard([x for x, _ in outs], layout=layout)
    lse = fd.unshard([x for _, x in outs], layout=layout, dim=-1)
    ours = [fd.unshard([x[i] for x in grads], layout=layout) for i in range(3)]

    scale = 1 / math.sqrt(c["d"])
    allowed = _allowed(torch, total, total, causal=c["causal"])
    ref_o, ref_lse = _forward_reference(torch, q, k, v, scale, allowed)
    grp = c["hq"] // c["hkv"]
    sdpa_o = F.scaled_dot_product_attention(q, k.repeat_interleave(grp, 1),
                                            v.repeat_interleave(grp, 1), attn_mask=allowed,
                                            scale=scale)
    _check(torch, [o], [ref_o], [sdpa_o], names=["o"])
    assert (lse.double() - ref_lse).abs().max().item() <= 1e-3
    _check(torch, ours, _reference(torch, q, k, v, do, scale, allowed),
           _sdpa(torch, q, k, v, do, scale, allowed))


def test_ring_of_one_on_nccl_is_attention():
    torch = _cuda()
    import torch.distributed as dist
    from flash_mlir import distributed as fd
    if not dist.is_available() or not dist.is_nccl_available():
        pytest.skip("torch.distributed without NCCL")
    if dist.is_initialized():
        pytest.skip("this process is in a process group already")
    torch.cuda.set_device(0)
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("nccl", init_method="file://" + os.path.join(d, "store"),
                                rank=0, world_size=1)
        try:
            qs, hkv, causal = ONE_RANK
            g = torch.Generator(device="cuda").manual_seed(
                int.from_bytes(os.urandom(4), "little"))
            dt = getattr(torch, DTYPE)
            q = torch.randn(*qs, device="cuda", dtype=dt, generator=g)
            k, v = (torch.randn(qs[0], hkv, qs[2], qs[3], device="cuda", dtype=dt,
                                generator=g) for _ in range(2))
            do = torch.randn(*qs, device="cuda", dtype=dt, generator=g)
            runs = []
            for fn in (fd.ring_attention, flash_mlir.attention):
                x = [t.clone().requires_grad_() for t in (q, k, v)]
                o, lse = fn(*x, causal=causal, return_lse=True, **ONE_RANK_OPTIONS)
                o.backward(do)
                runs.append([o.detach(), lse] + [t.grad for t in x])
            torch.cuda.synchronize()
            for name, a, b in zip(("o", "lse", "dq", "dk", "dv"), *runs):
                assert a.dtype == b.dtype and torch.equal(a, b), name
        finally:
            dist.destroy_process_group()


def test_ring_kernels_prebuild_without_a_device(tmp_path):
    """Every kernel of a ring compiles here (no GPU needed), once per distinct
    step shape: zigzag's diagonal slice causal, then half of each visiting one."""
    _compiler()
    from flash_mlir import distributed as fd
    old = os.environ.get("FLASH_MLIR_CACHE_DIR")
    os.environ["FLASH_MLIR_CACHE_DIR"] = str(tmp_path)
    try:
        paths = fd.prebuild((1, 4, 64, 64), (1, 2, 64, 64), (1, 2, 64, 64), "bf16",
                            world_size=4, causal=True, layout="zigzag")
    finally:
        if old is None:
            del os.environ["FLASH_MLIR_CACHE_DIR"]
        else:
            os.environ["FLASH_MLIR_CACHE_DIR"] = old
    assert len(paths) == 3 and all(os.path.exists(p) for p in paths)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_ring_gpu.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
