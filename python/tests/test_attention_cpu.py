"""flash_mlir.attention on NumPy arrays (host path): numerics against a float64
reference on fresh random inputs, the compile cache, and errors."""
import os
import sys

import numpy as np
import pytest

import flash_mlir
from flash_mlir import FlashError, attention, attention_ir, prebuild
from reference import attention_ref

F32_TOL = 1e-5


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def rel_err(got, want):
    return np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)


CASES = [
    # name, q shape, k shape, v shape, kwargs
    ("plain_3d", (3, 37, 24), (3, 29, 24), (3, 29, 12), {}),
    ("no_batch", (33, 16), (45, 16), (45, 20), {"scale": 0.3}),
    ("gqa_causal_top_left", (2, 4, 70, 32), (2, 2, 50, 32), (2, 2, 50, 24), {"causal": True}),
    ("causal_bottom_right", (2, 3, 40, 16), (2, 3, 90, 16), (2, 3, 90, 8),
     {"causal": True, "align": "bottom_right"}),
    ("sliding_window", (1, 2, 80, 16), (1, 2, 80, 16), (1, 2, 80, 16),
     {"window": 17, "align": "bottom_right"}),
]


@pytest.mark.parametrize("name,qs,ks,vs,kw", CASES, ids=[c[0] for c in CASES])
def test_f32_matches_float64_reference(rng, name, qs, ks, vs, kw):
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    out = attention(q, k, v, **kw)
    want, _ = attention_ref(q, k, v, **kw)
    assert out.shape == want.shape and out.dtype == np.float32
    assert rel_err(out, want) <= F32_TOL


def test_lse_and_fully_masked_rows(rng):
    # top-left causal with Lq > Lk would see every row; bottom-right with
    # Lq > Lk leaves the first Lq - Lk rows without any visible key.
    q, k, v = rand(rng, (2, 30, 8)), rand(rng, (2, 20, 8)), rand(rng, (2, 20, 6))
    out, lse = attention(q, k, v, causal=True, align="bottom_right", return_lse=True)
    want, want_lse = attention_ref(q, k, v, causal=True, align="bottom_right")
    assert rel_err(out, want) <= F32_TOL
    assert np.all(out[:, :10] == 0) and not np.isnan(out).any()
    assert np.all(np.isneginf(lse[:, :10]))
    finite = np.isfinite(want_lse)
    assert np.array_equal(np.isfinite(lse), finite)
    assert np.max(np.abs(lse[finite] - want_lse[finite])) <= 1e-4


def test_writes_into_out_and_overwrites_poison(rng):
    q, k, v = rand(rng, (2, 19, 8)), rand(rng, (2, 23, 8)), rand(rng, (2, 23, 5))
    out = np.full((2, 19, 5), np.nan, np.float32)
    res = attention(q, k, v, out=out)
    assert res is out
    assert rel_err(out, attention_ref(q, k, v)[0]) <= F32_TOL


def test_bad_out_is_rejected_before_running(rng):
    q, k, v = rand(rng, (2, 19, 8)), rand(rng, (2, 23, 8)), rand(rng, (2, 23, 5))
    for bad in (np.empty((2, 19, 8), np.float32), np.empty((2, 19, 5), np.float16),
                np.empty((2, 5, 19), np.float32).transpose(0, 2, 1)):
        with pytest.raises(ValueError, match="out must be"):
            attention(q, k, v, out=bad)


def test_float16(rng):
    q, k, v = (rand(rng, s, np.float16) for s in ((2, 2, 24, 16), (2, 1, 31, 16), (2, 1, 31, 8)))
    out = attention(q, k, v, causal=True)
    assert out.dtype == np.float16
    want, _ = attention_ref(q, k, v, causal=True)
    # f32 accumulation; the error is that of rounding the result to f16.
    assert rel_err(out.astype(np.float64), want) <= 2e-3


def test_pipeline_options_and_reference_agree(rng):
    q, k, v = rand(rng, (2, 45, 16)), rand(rng, (2, 38, 16)), rand(rng, (2, 38, 16))
    tiled = attention(q, k, v, causal=True, block_q=16, block_kv=8, parallel=False)
    unfused = attention(q, k, v, causal=True, reference=True)
    want, _ = attention_ref(q, k, v, causal=True)
    assert rel_err(tiled, want) <= F32_TOL and rel_err(unfused, want) <= F32_TOL


def test_non_contiguous_inputs(rng):
    q = rand(rng, (2, 16, 24)).transpose(0, 2, 1)  # [2, 24, 16], strided
    k, v = rand(rng, (2, 13, 16)), rand(rng, (2, 13, 7))
    assert not q.flags.c_contiguous
    assert rel_err(attention(q, k, v), attention_ref(q, k, v)[0]) <= F32_TOL


def test_compiles_once_then_reuses_the_disk_cache(rng, monkeypatch, tmp_path):
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path))
    compiles = []
    import flash_mlir._attention as am
    orig = am._compile_to_library

    def counting(*args, **kw):
        compiles.append(args[0])
        return orig(*args, **kw)

    monkeypatch.setattr(am, "_compile_to_library", counting)
    q, k, v = rand(rng, (1, 21, 8)), rand(rng, (1, 17, 8)), rand(rng, (1, 17, 8))
    a = attention(q, k, v, scale=0.7)
    b = attention(rand(rng, (1, 21, 8)), k, v, scale=0.7)  # same shapes: no compile
    assert len(compiles) == 1
    libs = [f for f in os.listdir(tmp_path) if f.endswith(".so")]
    assert len(libs) == 1
    # A new process (simulated by dropping the in-memory table) loads from disk.
    am._forget_kernels()
    c = attention(q, k, v, scale=0.7)
    assert len(compiles) == 1
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)
    # Anything that changes the code changes the key.
    attention(q, k, v, scale=0.5)
    attention(q, k, v, scale=0.7, causal=True)
    assert len(compiles) == 3


def test_bad_shapes_raise_with_the_verifier_message(rng):
    q, k, v = rand(rng, (2, 10, 16)), rand(rng, (2, 12, 8)), rand(rng, (2, 12, 8))
    with pytest.raises(FlashError, match="'key' head dim D = 8 does not match 'query' head dim D = 16"):
        attention(q, k, v)


def test_argument_errors(rng):
    q = rand(rng, (4, 8))
    with pytest.raises(TypeError, match="float64"):
        attention(q.astype(np.float64), q, q)
    with pytest.raises(TypeError):
        attention(q, q.astype(np.float16), q)
    with pytest.raises(ValueError, match="align"):
        attention(q, q, q, causal=True, align="middle")
    with pytest.raises(FlashError, match="no such option"):
        attention(q, q, q, no_such_option=3)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"window": 2.7}, TypeError, "window must be an integer"),
    ({"window": 2.0}, TypeError, "window must be an integer"),
    ({"window": True}, TypeError, "window must be an integer"),
    ({"window": "3"}, TypeError, "window must be an integer"),
    ({"window": 0}, ValueError, "window must be a positive"),
    ({"window": 1 << 62}, ValueError, "window must be a positive"),
    ({"scale": True}, TypeError, "scale must be a real number"),
    ({"scale": "0.5"}, TypeError, "scale must be a real number"),
    ({"scale": float("nan")}, ValueError, "scale must be finite"),
    ({"scale": float("-inf")}, ValueError, "scale must be finite"),
])
def test_argument_kinds(rng, kwargs, error, match):
    q = rand(rng, (4, 8))
    # A first call with the value they would alias (1, 2) fills the kernel
    # cache that a bad argument must not reach.
    attention(q, q, q, window=2, scale=1)
    with pytest.raises(error, match=match):
        attention(q, q, q, **kwargs)
    with pytest.raises(error, match=match):
        attention_ir((4, 8), (4, 8), (4, 8), **kwargs)
    with pytest.raises(error, match=match):
        prebuild((4, 8), (4, 8), (4, 8), "f32", device="cpu", **kwargs)


@pytest.mark.parametrize("scale", [-0.5, -0.0, 1e-30])
def test_negative_and_extreme_scales_compile_and_run(rng, scale):
    # The IR carries scale(-5.000000000e-01): it must read back.
    q, k, v = rand(rng, (2, 9, 8)), rand(rng, (2, 11, 8)), rand(rng, (2, 11, 4))
    out = attention(q, k, v, scale=scale, causal=True)
    want, _ = attention_ref(q, k, v, scale=scale, causal=True)
    assert rel_err(out, want) <= F32_TOL


def test_shape_arguments_are_integers():
    with pytest.raises(TypeError, match="q_shape must hold integer sizes"):
        attention_ir((4, 8.5), (4, 8), (4, 8))
    with pytest.raises(TypeError, match="k_shape must hold integer sizes"):
        attention_ir((4, 8), (True, 8), (4, 8))
    with pytest.raises(ValueError, match="v_shape must hold sizes >= 0"):
        attention_ir((4, 8), (4, 8), (4, -8))
    # NumPy integers are integers.
    assert "tensor<4x8xf32>" in attention_ir((np.int64(4), 8), (4, 8), (4, 8))


def test_scale_window_kinds_accepted():
    ir = attention_ir((4, 8), (4, 8), (4, 8), scale=np.float32(-0.5), window=np.int32(3))
    assert "scale(-5.000000000e-01)" in ir and "mask(sliding_window, 3, top_left)" in ir
    assert "scale(0.000000000e+00)" in attention_ir((4, 8), (4, 8), (4, 8), scale=0)


def test_torch_cpu_tensors(rng):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(rand(rng, s)) for s in ((2, 9, 8), (2, 11, 8), (2, 11, 4)))
    out = attention(q, k, v, causal=True)
    assert isinstance(out, torch.Tensor)
    want, _ = attention_ref(q.numpy(), k.numpy(), v.numpy(), causal=True)
    assert rel_err(out.numpy(), want) <= F32_TOL


def test_torch_cpu_bfloat16(rng):
    torch = pytest.importorskip("torch")
    shapes = ((2, 3, 21, 24), (2, 1, 37, 24), (2, 1, 37, 16))
    q, k, v = (torch.from_numpy(rand(rng, s)).to(torch.bfloat16) for s in shapes)
    out, lse = attention(q, k, v, causal=True, align="bottom_right", return_lse=True)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 3, 21, 16)
    want, want_lse = attention_ref(*(x.float().numpy() for x in (q, k, v)), causal=True,
                                   align="bottom_right")
    # f32 accumulation; the error is that of rounding the result to bf16.
    assert rel_err(out.float().numpy(), want) <= 1e-2
    assert np.abs(lse.numpy() - want_lse).max() <= 1e-4


def test_cpu_kernels_need_no_compiler_runtime():
    # A bf16 kernel is where LLVM would call __truncsfbf2, which Debian 12's
    # libgcc does not define; the library must only need libc, libm, libomp.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "test", "lib"))
    import host_symbols
    for dtype in ("bf16", "f16"):
        path = flash_mlir.prebuild((2, 4, 33, 32), (2, 2, 40, 32), (2, 2, 40, 24), dtype,
                                   device="cpu", causal=True)
        assert host_symbols.check_library(path) == []


def test_attention_ir_is_inspectable():
    ir = flash_mlir.attention_ir((2, 8, 100, 64), (2, 2, 70, 64), (2, 2, 70, 32), "bf16",
                                 causal=True, align="bottom_right", lse=True)
    text = flash_mlir.compile(ir, pipeline=None)
    assert "mask(causal, bottom_right)" in text
    assert "tensor<2x8x100xf32>" in text and "llvm.emit_c_interface" in text


def test_dynamic_lengths_share_one_kernel(rng, monkeypatch, tmp_path):
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path))
    import flash_mlir._attention as am
    compiles = []
    orig = am._compile_to_library
    monkeypatch.setattr(am, "_compile_to_library",
                        lambda *a, **kw: (compiles.append(a[0]), orig(*a, **kw))[1])
    for b, lq, lk in [(3, 10, 7), (1, 33, 50), (2, 1, 1), (3, 64, 129)]:
        q, k, v = rand(rng, (b, 4, lq, 16)), rand(rng, (b, 2, lk, 16)), rand(rng, (b, 2, lk, 8))
        out, lse = attention(q, k, v, causal=True, align="bottom_right", dynamic=True,
                             return_lse=True)
        want, want_lse = attention_ref(q, k, v, causal=True, align="bottom_right")
        assert rel_err(out, want) <= F32_TOL
        finite = np.isfinite(want_lse)
        assert np.array_equal(np.isfinite(lse), finite)
    assert len(compiles) == 1 and "memref<?x4x?x16xf32>" in compiles[0]


def _torch_reference_grads(q, k, v, w, causal, window, align):
    """float64 autograd of attention written from its definition."""
    import torch
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    kk, vv = k, v
    if k.shape[-3] != q.shape[-3]:
        g = q.shape[-3] // k.shape[-3]
        kk, vv = k.repeat_interleave(g, dim=-3), v.repeat_interleave(g, dim=-3)
    lq, lk = q.shape[-2], k.shape[-2]
    s = torch.matmul(q, kk.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
    i, j = torch.arange(lq).view(-1, 1), torch.arange(lk).view(1, -1)
    off = lk - lq if align == "bottom_right" else 0
    allowed = torch.ones(lq, lk, dtype=torch.bool)
    if causal or window:
        allowed = j <= i + off
    if window:
        allowed = allowed & (j > i + off - window)
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    o = torch.matmul(p, vv)
    (o * w.double()).sum().backward()
    return o.detach(), [x.grad for x in (q, k, v)]


@pytest.mark.parametrize("name,qs,ks,vs,kw,dtype,tol", [
    ("gqa_causal_br", (2, 4, 37, 24), (2, 2, 53, 24), (2, 2, 53, 12),
     dict(causal=True, align="bottom_right"), "float32", 1e-5),
    ("window_lq_gt_lk", (3, 61, 16), (3, 40, 16), (3, 40, 8),
     dict(window=9, align="bottom_right"), "float32", 1e-5),
    ("plain_bf16", (2, 3, 29, 32), (2, 3, 45, 32), (2, 3, 45, 16), {}, "bfloat16", 2e-2),
])
def test_torch_autograd_gradients(rng, name, qs, ks, vs, kw, dtype, tol):
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    q, k, v = (torch.from_numpy(rand(rng, s)).to(dt).requires_grad_() for s in (qs, ks, vs))
    w = torch.from_numpy(rand(rng, qs[:-1] + vs[-1:])).to(dt)
    out = attention(q, k, v, **kw)
    assert out.requires_grad and out.dtype == dt
    (out * w).sum().backward()
    want_o, want = _torch_reference_grads(q, k, v, w, kw.get("causal", False),
                                          kw.get("window"), kw.get("align", "top_left"))
    assert rel_err(out.detach().double().numpy(), want_o.numpy()) <= tol
    for x, g in zip((q, k, v), want):
        assert x.grad is not None and x.grad.dtype == dt and x.grad.shape == x.shape
        assert rel_err(x.grad.double().numpy(), g.numpy()) <= tol, name


def test_autograd_saves_no_score_matrix(rng):
    # The backward's kernel is flash.attention_grad, fed the forward's LSE:
    # the graph holds q, k, v, o and lse, nothing of size Lq x Lk.
    torch = pytest.importorskip("torch")
    q = torch.from_numpy(rand(rng, (2, 70, 16))).requires_grad_()
    k = torch.from_numpy(rand(rng, (2, 90, 16))).requires_grad_()
    v = torch.from_numpy(rand(rng, (2, 90, 8))).requires_grad_()
    out = attention(q, k, v, causal=True)
    saved = out.grad_fn.saved_tensors
    assert sorted(tuple(t.shape) for t in saved) == sorted(
        [(2, 70, 16), (2, 90, 16), (2, 90, 8), (2, 70, 8), (2, 70)])
    ir = flash_mlir.attention_grad_ir((2, 70, 16), (2, 90, 16), (2, 90, 8), "f32", causal=True)
    assert "flash.attention_grad" in ir and "mask(causal, top_left)" in ir


def test_no_grad_and_detached_inputs_skip_autograd(rng):
    torch = pytest.importorskip("torch")
    q = torch.from_numpy(rand(rng, (2, 9, 8))).requires_grad_()
    with torch.no_grad():
        assert not attention(q, q, q).requires_grad
    assert not attention(q.detach(), q.detach(), q.detach()).requires_grad


def test_autograd_keeps_the_forward_keywords(rng):
    # dynamic= and the pipeline options reach the forward kernel under
    # autograd too (one dynamic kernel for two lengths), not silently dropped.
    torch = pytest.importorskip("torch")
    import flash_mlir._attention as am
    before = len(am._kernels)
    for lq, lk in ((21, 30), (33, 47)):
        q = torch.from_numpy(rand(rng, (2, lq, 16))).requires_grad_()
        k = torch.from_numpy(rand(rng, (2, lk, 16))).requires_grad_()
        v = torch.from_numpy(rand(rng, (2, lk, 8))).requires_grad_()
        w = torch.from_numpy(rand(rng, (2, lq, 8)))
        out = attention(q, k, v, causal=True, dynamic=True, block_q=8, block_kv=16)
        (out * w).sum().backward()
        want_o, want = _torch_reference_grads(q, k, v, w, True, None, "top_left")
        assert rel_err(out.detach().numpy(), want_o.numpy()) <= 1e-5
        for x, g in zip((q, k, v), want):
            assert rel_err(x.grad.numpy(), g.numpy()) <= 1e-5
    forward_kernels = [key for key in am._kernels if key[0] != "grad"]
    assert len(am._kernels) - before == 3  # one dynamic forward, two gradients
    assert any("?x" in key[0] for key in forward_kernels)
