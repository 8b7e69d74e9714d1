"""attention(..., sinks=) on CUDA tensors: one learned logit per query head in each
row's softmax (gpt-oss), forward and backward, on the kernels kernel=auto picks and the
ones forced (mma.sync, portable, split-KV).

Each output is compared with a float64 reference from the definition (the sink as one
more score column, softmax, column dropped) of the same rounded inputs and must be
within twice the error of torch SDPA's own (plus 1e-3), SDPA computing the same thing:
one extra key of zeros whose score the float mask sets to the sink. The sinks are drawn
as values q's dtype holds, so SDPA's mask carries them exactly. Gradients (dq, dk, dv
and the sinks') are held to the same rule against SDPA's backward, the sinks' through
its mask. Run where the kernels are, or fill a cache folder here with
    python3 python/tests/test_sinks_gpu.py --prebuild DIR
and run with FLASH_MLIR_CACHE_DIR=DIR on the GPU machine."""
import math
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from reference import sinks_attention_ref  # noqa: E402
from test_attention_gpu import _compiler, _cuda  # noqa: E402


def _case(b, hq, hkv, lq, lk, d, dv=None, dtype="bfloat16", sinks="float32", **kw):
    dv = dv or d
    return (b, hq, lq, d), (b, hkv, lk, d), (b, hkv, lk, dv), dtype, sinks, kw


# name -> (q, k, v shapes, dtype, the sinks' dtype, attention() keywords). gpt-oss's
# layout at a small size: 64 query heads over 8 KV heads, alternating full causal and
# 128-key windows; decode rows (Lq = 1, 16) against 5000 keys; D = 64 and 128.
CASES = {
    "d64-causal": _case(2, 8, 8, 300, 300, 64, causal=True),
    "d64-gqa8-window128": _case(1, 64, 8, 200, 200, 64, window=128, align="bottom_right",
                                return_lse=True),
    "d64-gqa8-causal-sinks-bf16": _case(1, 64, 8, 200, 260, 64, sinks="bfloat16",
                                        causal=True, align="bottom_right"),
    "d128-full-f16": _case(2, 4, 2, 333, 517, 128, dtype="float16", sinks="float16"),
    "d128-causal-lse": _case(2, 8, 2, 257, 257, 128, causal=True, return_lse=True),
    "d128-window-tl-f16": _case(1, 8, 8, 400, 300, 128, dtype="float16", window=100),
    "decode-lq1-lk5000": _case(2, 64, 8, 1, 5000, 64, return_lse=True),
    "decode-lq16-lk5000-causal": _case(2, 64, 8, 16, 5000, 64, causal=True,
                                       align="bottom_right"),
    "decode-lq1-lk5000-d128-f16": _case(3, 16, 2, 1, 5000, 128, dtype="float16",
                                        sinks="float16"),
    # Every kernel, forced.
    "mma-d64-gqa8-window": _case(1, 64, 8, 200, 300, 64, window=128, align="bottom_right",
                                 kernel="mma"),
    "mma-d96-dv64-causal": _case(2, 4, 4, 129, 257, 96, dv=64, causal=True, kernel="mma"),
    "portable-d64-causal-lse": _case(2, 4, 2, 150, 200, 64, causal=True, return_lse=True,
                                     kernel="portable"),
    "portable-f32-d40-dv24": _case(1, 3, 3, 100, 120, 40, dv=24, dtype="float32",
                                   kernel="portable"),
    "splitkv-lq16-lk5000": _case(2, 16, 2, 16, 5000, 128, causal=True,
                                 align="bottom_right", kernel="splitkv"),
    "wgmma-d128-gqa8": _case(1, 64, 8, 128, 400, 128, causal=True, kernel="wgmma"),
    # The decode form merging its splits in its last CTA: the sink counted there, once
    # per row (two consumer warpgroups: 8 heads × 16 rows packed).
    "fused-combine-lq16-mqa8": _case(2, 8, 1, 16, 3000, 128, return_lse=True,
                                     fused_combine=1),
}

# Bottom-right causal with Lq > Lk: the first Lq - Lk rows see no key, only the sink.
DEAD_ROWS = _case(2, 8, 2, 300, 100, 64, causal=True, align="bottom_right",
                  return_lse=True)

# The backward: the sink-inclusive forward, flash.attention_grad for dq, dk, dv and the
# sinks' gradient from the output and the lse.
GRAD_CASES = {
    "d64-gqa8-causal": _case(1, 64, 8, 200, 260, 64, causal=True, align="bottom_right"),
    "d128-window-f16": _case(2, 4, 2, 333, 517, 128, dtype="float16", sinks="float16",
                             window=128),
    "d64-dead-rows": _case(2, 4, 4, 300, 100, 64, causal=True, align="bottom_right"),
    "d128-lq16-lk5000": _case(2, 16, 2, 16, 5000, 128),
}


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, (qs, ks, vs, dtype, sdt, kw) in list(CASES.items()) + [("dead", DEAD_ROWS)]:
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, sinks=((qs[1],), sdt), **kw))
    for name, (qs, ks, vs, dtype, sdt, kw) in GRAD_CASES.items():
        print("grad", name, flash_mlir.prebuild(qs, ks, vs, dtype, sinks=((qs[1],), sdt),
                                                grad=True, **kw))


@pytest.mark.parametrize("kernel", ["auto", "mma", "portable", "splitkv"])
def test_ptx_without_a_device(kernel):
    """attention_ir's sinks (the last argument, after the lse and a bias capture) are
    what every GPU kernel takes."""
    _compiler()
    lq = 16 if kernel == "splitkv" else 200
    ir = flash_mlir.attention_ir((1, 8, lq, 64), (1, 2, 300, 64), (1, 2, 300, 64), "bf16",
                                 causal=True, align="bottom_right", lse=True,
                                 bias=((lq, 300), "f32"), sinks=((8,), "f32"))
    ptx = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa",
                             kernel=kernel)
    assert ".entry" in ptx


def _inputs(torch, qs, ks, vs, dtype, sinks_dtype, grad=False):
    """q, k, v (and do) of standard normals, and sinks around log(Lk), where a sink
    holds a share of a row's mass comparable to the keys', drawn in q's dtype."""
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(*s, device="cuda", dtype=dt, generator=g) for s in (qs, ks, vs))
    centre = max(math.log(max(ks[2], 1)), 1.0)
    sinks = (centre + 2 * torch.rand(qs[1], device="cuda", generator=g) - 1).to(dt)
    sinks = sinks.to(getattr(torch, sinks_dtype))
    do = torch.randn(*(qs[:-1] + vs[-1:]), device="cuda", dtype=dt, generator=g)
    return (q, k, v, sinks, do) if grad else (q, k, v, sinks)


def _allowed(torch, lq, lk, causal=False, window=None, align="top_left", **_):
    i = torch.arange(lq, device="cuda")[:, None]
    j = torch.arange(lk, device="cuda")[None, :]
    diag = i + (lk - lq if align == "bottom_right" else 0)
    allowed = torch.ones(lq, lk, dtype=torch.bool, device="cuda")
    if causal or window is not None:
        allowed = j <= diag
    if window is not None:
        allowed &= j > diag - window
    return allowed


def _sdpa(torch, q, k, v, sinks, allowed, scale):
    """SDPA on the same inputs with the sink as one more key of zeros whose score the
    float mask sets to sinks[h] (in q's dtype, like the mask's other entries)."""
    import torch.nn.functional as F
    b, hq, lq, _ = q.shape
    g = hq // k.shape[1]
    kk, vv = (torch.cat([x.repeat_interleave(g, 1), x.new_zeros(b, hq, 1, x.shape[-1])], 2)
              for x in (k, v))
    base = torch.zeros(allowed.shape, device="cuda", dtype=q.dtype).masked_fill(
        ~allowed, float("-inf"))
    column = sinks.to(q.dtype).reshape(1, hq, 1, 1).expand(b, hq, lq, 1)
    mask = torch.cat([base.expand(b, hq, *allowed.shape), column], -1)
    return F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, scale=scale)


def _rule(out, ref, sdpa, what):
    err = (out.double() - ref).abs().max().item()
    err_sdpa = (sdpa.double() - ref).abs().max().item()
    assert err <= 2 * err_sdpa + 1e-3, (what, err, err_sdpa)


@pytest.mark.parametrize("name", list(CASES))
def test_matches_float64_within_twice_sdpa(name):
    torch = _cuda()
    import numpy as np
    qs, ks, vs, dtype, sdt, kw = CASES[name]
    q, k, v, sinks = _inputs(torch, qs, ks, vs, dtype, sdt)
    out = torch.full(qs[:-1] + vs[-1:], float("nan"), dtype=q.dtype, device="cuda")
    res = flash_mlir.attention(q, k, v, sinks=sinks, out=out, **kw)
    torch.cuda.synchronize()
    lse = res[1] if kw.get("return_lse") else None
    assert not torch.isnan(out).any()
    mask_kw = {key: kw[key] for key in ("causal", "window", "align") if key in kw}
    ref, ref_lse = sinks_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v, sinks)),
                                       **mask_kw)
    ref_t = torch.from_numpy(np.ascontiguousarray(ref)).to("cuda")
    if dtype == "float32":
        # Same inputs, f32 throughout: only summation order and ex2.approx differ.
        assert (out.double() - ref_t).abs().max().item() <= 2e-5
    else:
        scale = 1.0 / qs[-1] ** 0.5
        sdpa = _sdpa(torch, q, k, v, sinks, _allowed(torch, qs[2], ks[2], **mask_kw), scale)
        _rule(out, ref_t, sdpa, "out")
    if lse is not None:
        assert lse.dtype == torch.float32 and tuple(lse.shape) == qs[:-1]
        # f32 accumulation of the same rounded inputs: far inside bf16's error.
        assert abs(lse.double().cpu().numpy() - ref_lse).max() <= 1e-3


def test_rows_that_see_no_key_give_zero_and_the_sink():
    torch = _cuda()
    import numpy as np
    qs, ks, vs, dtype, sdt, kw = DEAD_ROWS
    q, k, v, sinks = _inputs(torch, qs, ks, vs, dtype, sdt)
    out, lse = flash_mlir.attention(q, k, v, sinks=sinks, **kw)
    torch.cuda.synchronize()
    dead = qs[2] - ks[2]
    assert (out[:, :, :dead] == 0).all().item()
    # The kernels keep the row's maximum and sum in base 2: the sink comes back
    # through x·log2(e)·ln(2), within a few f32 roundings of itself.
    sink_err = (lse[:, :, :dead] - sinks.float()[None, :, None]).abs().max().item()
    assert sink_err <= 4 * torch.finfo(torch.float32).eps * sinks.float().abs().max().item(), \
        sink_err
    mask_kw = {key: kw[key] for key in ("causal", "align")}
    ref, ref_lse = sinks_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v, sinks)),
                                       **mask_kw)
    sdpa = _sdpa(torch, q, k, v, sinks, _allowed(torch, qs[2], ks[2], **mask_kw),
                 1.0 / qs[-1] ** 0.5)
    _rule(out, torch.from_numpy(np.ascontiguousarray(ref)).to("cuda"), sdpa, "out")
    assert abs(lse.double().cpu().numpy() - ref_lse).max() <= 1e-3


def _reference_grads(torch, q, k, v, sinks, do, allowed, scale):
    """float64 autograd of the definition: dq, dk, dv, dsinks."""
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v, sinks)]
    qq, kk, vv, ss = leaves
    g = q.shape[1] // k.shape[1]
    kk, vv = kk.repeat_interleave(g, 1), vv.repeat_interleave(g, 1)
    s = (scale * qq @ kk.transpose(-1, -2)).masked_fill(~allowed, float("-inf"))
    column = ss.reshape(1, -1, 1, 1).expand(*s.shape[:-1], 1)
    p = torch.softmax(torch.cat([s, column], -1), -1)[..., :-1]
    (p @ vv).backward(do.double())
    return [x.grad for x in leaves]


def _sdpa_grads(torch, q, k, v, sinks, do, allowed, scale):
    """SDPA's backward on the same inputs (_sdpa's extra key), the sinks' gradient
    through its float mask."""
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v, sinks)]
    _sdpa(torch, *leaves, allowed, scale).backward(do)
    return [x.grad for x in leaves]


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradients_within_twice_sdpa(name):
    torch = _cuda()
    qs, ks, vs, dtype, sdt, kw = GRAD_CASES[name]
    q, k, v, sinks, do = _inputs(torch, qs, ks, vs, dtype, sdt, grad=True)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, sinks)]
    out = flash_mlir.attention(*leaves[:3], sinks=leaves[3], **kw)
    out.backward(do)
    torch.cuda.synchronize()
    ours = [x.grad for x in leaves]
    scale = 1.0 / qs[-1] ** 0.5
    allowed = _allowed(torch, qs[2], ks[2], **kw)
    ref = _reference_grads(torch, q, k, v, sinks, do, allowed, scale)
    sdpa = _sdpa_grads(torch, q, k, v, sinks, do, allowed, scale)
    for n, x, r, s, leaf in zip(("dq", "dk", "dv", "dsinks"), ours, ref, sdpa, leaves):
        assert x is not None and x.dtype == leaf.dtype and x.shape == leaf.shape, n
        assert not torch.isnan(x).any(), n
        err = (x.double() - r).abs().max().item()
        err_sdpa = (s.double() - r).abs().max().item()
        # Relative to the gradient (bf16 errors are 1e-3 of it and up), as the other
        # backward tests hold it.
        floor = 1e-3 * r.abs().max().item() + 1e-5
        assert err <= 2 * err_sdpa + floor, (n, err, err_sdpa, floor)


def test_sinks_on_another_device_are_refused():
    torch = _cuda()
    qs, ks, vs, dtype, sdt, kw = CASES["d64-causal"]
    q, k, v, sinks = _inputs(torch, qs, ks, vs, dtype, sdt)
    with pytest.raises(TypeError, match="sinks must be the same kind of array as q"):
        flash_mlir.attention(q, k, v, sinks=sinks.cpu(), **kw)
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="sinks is on cuda:1"):
            flash_mlir.attention(q, k, v, sinks=sinks.to("cuda:1"), **kw)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_sinks_gpu.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
