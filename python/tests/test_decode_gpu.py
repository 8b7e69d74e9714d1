"""Decode on the GPU: the split-KV kernel (kernel=splitkv, what kernel=auto takes when the
query rows of a K/V head, Lq · group, fit one CTA) and the wgmma kernel's decode form (its
key range split the same way, GQA rows packed; kernel=auto on sm_90a from 64 packed rows).

Same rules as test_attention_gpu.py: a float64 reference, the error at most twice torch
SDPA's own (plus 1e-3), the LSE within 1e-3; run where the kernels are, or fill a cache
folder here with
    python3 python/tests/test_decode_gpu.py --prebuild DIR
and run with FLASH_MLIR_CACHE_DIR=DIR on the GPU machine."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from reference import attention_ref  # noqa: E402
from test_attention_gpu import _bias_ir as _bias_ir_of  # noqa: E402
from test_attention_gpu import _compiler, _cuda, _errors, _inputs  # noqa: E402


def _case(b, hq, hkv, lq, lk, d, dv=None, dtype="bfloat16", **kw):
    dv = dv or d
    return (b, hq, lq, d), (b, hkv, lk, d), (b, hkv, lk, dv), dtype, kw


# name -> (q, k, v shapes, dtype, attention() keywords). Lk is never a multiple of the
# 64-key tile unless the case is about that; split counts run from 1 to one per tile.
CASES = {
    "gqa4-lse": _case(4, 32, 8, 1, 4097, 128, return_lse=True),
    "gqa8-f16": _case(2, 16, 2, 1, 1000, 128, dtype="float16"),
    "mqa-d64": _case(3, 8, 1, 1, 7777, 64),
    "mha": _case(2, 4, 4, 1, 100, 128),
    "one-key": _case(2, 8, 2, 1, 1, 64, return_lse=True),
    "long-128k": _case(1, 32, 8, 1, 131071, 128, return_lse=True),
    "lq16-causal-br": _case(2, 32, 8, 16, 3000, 128, causal=True, align="bottom_right",
                            return_lse=True),
    "lq2-window-br": _case(2, 8, 2, 2, 2049, 64, window=300, align="bottom_right"),
    # Top-left causal with Lk >> Lq: every split past the first tiles sees no key and
    # merges in with lse = -inf.
    "lq64-causal-tl-f16": _case(1, 4, 4, 64, 5000, 64, dtype="float16", causal=True,
                                return_lse=True),
    # More rows than one CTA holds (40 · 4 = 160: three row blocks), forced.
    "rows160-forced": _case(1, 8, 2, 40, 1500, 64, causal=True, align="bottom_right",
                            kernel="splitkv"),
    "split1": _case(2, 16, 4, 1, 2000, 128, split_kv=1, return_lse=True),
    "split3": _case(2, 16, 4, 1, 2000, 128, split_kv=3, return_lse=True),
    "split-per-tile": _case(2, 16, 4, 1, 2000, 128, split_kv=1000, return_lse=True),
    "d256": _case(1, 8, 2, 1, 999, 256),
    "d96-dv64": _case(2, 8, 2, 1, 1200, 96, dv=64),
    "lq1-group6": _case(1, 12, 2, 1, 3333, 64, dtype="float16"),
    # MQA with 16 query rows: 128 packed rows, which kernel=auto gives the wgmma
    # kernel's decode form (two consumer warpgroups of 64 rows).
    "lq16-mqa8": _case(2, 8, 1, 16, 2500, 128, return_lse=True),
    # The same 128 packed rows as two 64-row blocks that read the same K/V tiles, with
    # one split (each block writes its rows itself) and with several.
    "lq16-mqa8-m64-split1": _case(3, 8, 1, 16, 2500, 128, block_m=64, split_kv=1,
                                  return_lse=True),
    "lq16-mqa8-m64-split3": _case(2, 8, 1, 16, 3001, 128, dtype="float16", block_m=64,
                                  split_kv=3, return_lse=True),
    # The wgmma kernel's decode form: GQA rows packed as [B·Hkv, G·Lq] (no mask), the key
    # range split over CTAs and merged by the combine (kernel=auto for packed rows).
    "wg-lq16-gqa4-lse": _case(2, 32, 8, 16, 3001, 128, return_lse=True),
    "wg-lq1-split3": _case(2, 16, 4, 1, 2000, 128, kernel="wgmma", split_kv=3,
                           return_lse=True),
    "wg-lq8-g8-split-per-tile": _case(1, 16, 2, 8, 1000, 128, kernel="wgmma",
                                      split_kv=1000, return_lse=True),
    "wg-lq2-split1-f16": _case(3, 8, 2, 2, 777, 64, dtype="float16", kernel="wgmma",
                               split_kv=1),
    # 256 packed rows: two 192-row blocks (D = 64), rows past the packed 256 unstored.
    "wg-lq64-g4": _case(1, 8, 2, 64, 2500, 64, kernel="wgmma", return_lse=True),
    # Masks with packed heads: row r of a tile is query r mod Lq of its head.
    "wg-lq16-causal-br": _case(2, 8, 2, 16, 3000, 128, kernel="wgmma", causal=True,
                               align="bottom_right", return_lse=True),
    "wg-lq2-window-g4": _case(2, 16, 4, 2, 2049, 64, kernel="wgmma", window=300,
                              align="bottom_right"),
    # Top-left causal, Lk >> Lq: splits past the first tiles see no key at all.
    "wg-lq16-causal-tl-g4": _case(1, 8, 2, 16, 1000, 64, kernel="wgmma", causal=True,
                                  return_lse=True),
    "wg-lq32-mha": _case(1, 4, 4, 32, 10000, 128, kernel="wgmma", return_lse=True),
    "wg-one-key": _case(2, 8, 2, 16, 1, 64, kernel="wgmma", return_lse=True),
    "wg-long-f16-d64": _case(1, 32, 8, 16, 65537, 64, dtype="float16"),
    # fused_combine=1: the last CTA of each row block merges the splits (no combine
    # kernel): one warpgroup, two, several row blocks (a counter each), splits that see
    # no key, one split per tile (many splits per row), one split (no merge at all).
    "fc-gqa4-lse": _case(4, 32, 8, 1, 4097, 128, return_lse=True, fused_combine=1),
    "fc-lq16-mqa8": _case(2, 8, 1, 16, 2500, 128, return_lse=True, fused_combine=1),
    "fc-lq64-g4-rows256": _case(1, 8, 2, 64, 2500, 64, kernel="wgmma", return_lse=True,
                                fused_combine=1),
    "fc-lq16-causal-tl-g4": _case(1, 8, 2, 16, 1000, 64, kernel="wgmma", causal=True,
                                  return_lse=True, fused_combine=1),
    "fc-split-per-tile": _case(1, 16, 2, 8, 1000, 128, kernel="wgmma", split_kv=1000,
                               return_lse=True, fused_combine=1),
    "fc-split1-f16": _case(3, 8, 2, 2, 777, 64, dtype="float16", kernel="wgmma",
                           split_kv=1, fused_combine=1),
    "fc-long-f16-d64": _case(1, 32, 8, 16, 65537, 64, dtype="float16", fused_combine=1),
}
# fused_combine's twin without it, for test_fused_combine_matches_the_combine_kernel.
FUSED_TWINS = {
    "fc-split3": _case(2, 16, 4, 1, 2000, 128, kernel="wgmma", split_kv=3, return_lse=True,
                       fused_combine=1),
    "fc-split3-unfused": _case(2, 16, 4, 1, 2000, 128, kernel="wgmma", split_kv=3,
                               return_lse=True, fused_combine=0),
}
EMPTY = _case(2, 8, 2, 1, 0, 64, return_lse=True)
EMPTY_WGMMA = _case(2, 8, 2, 16, 0, 64, kernel="wgmma", return_lse=True)

# A per-head additive bias read at (head, key), ALiBi's shape: the rows of one tile
# belong to different query heads, so each row half must see its own head index.
BIAS = (2, 8, 2, 3, 777, 64)  # B, Hq, Hkv, Lq, Lk, D


def _bias_ir():
    b, hq, hkv, lq, lk, d = BIAS
    return _bias_ir_of("bf16", d, (b, hq, lq), (b, hkv, lk), (hq, lk), read="%h, %j",
                       mask="causal, bottom_right", scale="0.125")


# Both kernels that pack the heads: the split kernel (query-major rows) and the wgmma
# kernel's decode form (head-major rows, 12 of a 64-row block, the rest padding).
BIAS_KERNELS = ("splitkv", "wgmma")


def _bias_library(kernel):
    import flash_mlir._attention as am
    return am._library_for(_bias_ir(), "cuda", None, "kernel=" + kernel)


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, (qs, ks, vs, dtype, kw) in (list(CASES.items()) +
                                          list(FUSED_TWINS.items()) +
                                          [("empty", EMPTY), ("empty-wgmma", EMPTY_WGMMA)]):
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, **kw))
    for kernel in BIAS_KERNELS:
        print("bias", kernel, _bias_library(kernel))


_MASK_KEYS = ("causal", "window", "align")


@pytest.mark.parametrize("name", list(CASES))
def test_matches_sdpa(name):
    torch = _cuda()
    qs, ks, vs, dtype, kw = CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    out = torch.full(qs[:-1] + vs[-1:], float("nan"), dtype=q.dtype, device="cuda")
    res = flash_mlir.attention(q, k, v, out=out, **kw)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    err, err_sdpa, ref_lse = _errors(torch, out, q, k, v,
                                     **{key: kw[key] for key in _MASK_KEYS if key in kw})
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)
    if kw.get("return_lse"):
        lse = res[1].double().cpu().numpy()
        finite = ref_lse > -float("inf")
        assert abs(lse[finite] - ref_lse[finite]).max() <= 1e-3
        assert (lse[~finite] == -float("inf")).all()


def test_fused_combine_matches_the_combine_kernel():
    """The last CTA's merge is the combine kernel's (mergeSplitRow, one warp per row at
    three splits): the same bits, call after call on fresh inputs, on the default stream
    and on another one (each stream has its own arrival counters, which every launch
    leaves at zero). A one-ulp difference showed on about half the inputs when the
    two rounded a split's weight differently, so a dozen inputs."""
    torch = _cuda()
    qs, ks, vs, dtype, kw = FUSED_TWINS["fc-split3"]
    kw0 = FUSED_TWINS["fc-split3-unfused"][4]
    side = torch.cuda.Stream()
    for step in range(12):
        q, k, v = _inputs(torch, qs, ks, vs, dtype)
        stream = side if step % 2 else torch.cuda.current_stream()
        # The inputs are written on the current stream: the side stream waits for them.
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            out, lse = flash_mlir.attention(q, k, v, **kw)
            ref_out, ref_lse = flash_mlir.attention(q, k, v, **kw0)
        stream.synchronize()
        assert torch.equal(out, ref_out), step
        assert torch.equal(lse, ref_lse), step
        err, err_sdpa, _ = _errors(torch, out, q, k, v)
        assert err <= 2 * err_sdpa + 1e-3, (step, err, err_sdpa)


def test_auto_takes_the_split_kernel_for_masked_decode():
    """kernel=auto gives a masked decode to the split kernel (the wgmma kernel's packed
    masked form is not measured ahead of it): mma.sync and cp.async, its combine kernel,
    no wgmma."""
    _compiler()
    qs, ks, vs, dtype, kw = CASES["lq16-causal-br"]
    ir = flash_mlir.attention_ir(qs, ks, vs, "bf16", causal=True, align="bottom_right",
                                 lse=True)
    ptx = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa")
    assert ".entry combine(" in ptx and "cp.async.cg" in ptx and "mma.sync" in ptx
    assert "wgmma" not in ptx


def test_auto_takes_wgmma_for_packed_rows_with_a_score_mod():
    """A decode with a score_mod (soft-capping) whose heads pack: kernel=auto compiles the
    wgmma kernel's decode form, each packed row reading its own head (no mma.sync, no
    cp.async of the split kernel)."""
    _compiler()
    qs, ks, vs, dtype, kw = CASES["gqa4-lse"]
    ir = flash_mlir.attention_ir(qs, ks, vs, "bf16", lse=True, softcap=30.0)
    ptx = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa")
    assert "wgmma.mma_async" in ptx and "mma.sync" not in ptx


@pytest.mark.parametrize("name,fused", [("gqa4-lse", True), ("wg-lq16-gqa4-lse", False)])
def test_auto_takes_wgmma_for_packed_rows(name, fused):
    """Rows of several heads and no mask (Lq = 1 and 16): kernel=auto compiles the wgmma
    kernel's decode form (wgmma, no mma.sync). Its splits are merged by its last CTA at
    4 rows over 32 K/V heads (arrival counted atomically, no combine kernel), by the
    combine kernel at 64 rows."""
    _compiler()
    qs, ks, vs, dtype, kw = CASES[name]
    ir = flash_mlir.attention_ir(qs, ks, vs, "bf16", lse=True)
    ptx = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa")
    assert "wgmma.mma_async" in ptx and "mma.sync" not in ptx
    assert (".entry combine(" in ptx) == (not fused)
    assert ("atom.global.add" in ptx) == fused


@pytest.mark.parametrize("empty", [EMPTY, EMPTY_WGMMA], ids=["splitkv", "wgmma"])
def test_no_keys_gives_zero_rows_and_minus_inf_lse(empty):
    torch = _cuda()
    qs, ks, vs, dtype, kw = empty
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    out = torch.full(qs, float("nan"), dtype=q.dtype, device="cuda")
    out, lse = flash_mlir.attention(q, k, v, out=out, **kw)
    torch.cuda.synchronize()
    assert (out == 0).all().item()
    assert torch.isneginf(lse).all().item()


@pytest.mark.parametrize("kernel", BIAS_KERNELS)
def test_per_head_bias_on_packed_rows(kernel):
    torch = _cuda()
    import numpy as np
    import torch.nn.functional as F
    from flash_mlir.gpu import KernelLibrary
    b, hq, hkv, lq, lk, d = BIAS
    q, k, v = _inputs(torch, (b, hq, lq, d), (b, hkv, lk, d), (b, hkv, lk, d), "bfloat16")
    bias = torch.randn(hq, lk, device="cuda", dtype=torch.float32)
    out = torch.full_like(q, float("nan"))
    KernelLibrary(_bias_library(kernel))("flash_attention", q, k, v, out, bias, pass_stream=True)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    bias64 = bias.double().cpu().numpy()
    ref, _ = attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)), scale=0.125,
                           causal=True, align="bottom_right",
                           score_mod=lambda s, i, j: s + bias64[None, :, None, :])
    g = hq // hkv
    i = torch.arange(lq, device="cuda")[:, None]
    j = torch.arange(lk, device="cuda")[None, :]
    allowed = j <= i + (lk - lq)
    mask = torch.where(allowed, bias[None, :, None, :], torch.tensor(float("-inf"),
                                                                     device="cuda"))
    sdpa = F.scaled_dot_product_attention(q, k.repeat_interleave(g, dim=1),
                                          v.repeat_interleave(g, dim=1),
                                          attn_mask=mask.to(q.dtype), scale=0.125)
    ref_t = torch.from_numpy(np.ascontiguousarray(ref)).to("cuda")
    err = (out.double() - ref_t).abs().max().item()
    err_sdpa = (sdpa.double() - ref_t).abs().max().item()
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_decode_gpu.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
