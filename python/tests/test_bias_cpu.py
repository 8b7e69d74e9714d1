"""attention(..., bias=): an additive bias on the scores as the op's score_mod with the
bias as a capture, forward and (torch) autograd with the bias's gradient, on the host,
against float64 from the definition on fresh random inputs."""
import math
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from flash_mlir import attention  # noqa: E402
from reference import attention_ref  # noqa: E402

pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def _rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


# (q, k, v shapes, bias shape, keywords): Lq != Lk != D != Dv, GQA, every broadcast form.
CASES = {
    "lq_lk": ((2, 4, 37, 24), (2, 2, 53, 24), (2, 2, 53, 12), (37, 53), {}),
    "per_head_alibi": ((2, 4, 37, 24), (2, 2, 53, 24), (2, 2, 53, 12), (4, 1, 53),
                       dict(causal=True, align="bottom_right")),
    "full": ((2, 3, 29, 16), (2, 3, 41, 16), (2, 3, 41, 8), (2, 3, 29, 41), dict(window=11)),
    "per_key": ((3, 30, 16), (3, 45, 16), (3, 45, 20), (1, 45), dict(causal=True)),
    "per_batch_key": ((2, 2, 19, 16), (2, 2, 23, 16), (2, 2, 23, 8), (2, 1, 1, 23), {}),
}


def _score_mod(bias):
    return lambda s, i, j: s + bias


@pytest.mark.parametrize("name", list(CASES))
def test_forward_numpy(rng, name):
    qs, ks, vs, bs, kw = CASES[name]
    q, k, v, bias = (_rand(rng, s) for s in (qs, ks, vs, bs))
    out, lse = attention(q, k, v, bias=bias, return_lse=True, **kw)
    want, want_lse = attention_ref(q, k, v, score_mod=_score_mod(bias.astype(np.float64)), **kw)
    assert _rel(out, want) <= 1e-5
    assert np.abs(lse - want_lse).max() <= 1e-4


def _torch_reference(torch, q, k, v, bias, w, causal=False, window=None, align="top_left"):
    q, k, v, bias = (x.detach().double().requires_grad_() for x in (q, k, v, bias))
    g = q.shape[-3] // k.shape[-3] if q.dim() >= 3 else 1
    kk, vv = (k.repeat_interleave(g, -3), v.repeat_interleave(g, -3)) if g > 1 else (k, v)
    s = q @ kk.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
    lq, lk = s.shape[-2:]
    i, j = torch.arange(lq)[:, None], torch.arange(lk)[None, :]
    diag = i + (lk - lq if align == "bottom_right" else 0)
    allowed = torch.ones(lq, lk, dtype=torch.bool)
    if causal or window:
        allowed = j <= diag
    if window:
        allowed = allowed & (j > diag - window)
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)
    o = p @ vv
    (o * w.double()).sum().backward()
    return o.detach(), [x.grad for x in (q, k, v, bias)]


@pytest.mark.parametrize("name", list(CASES))
def test_autograd_gives_the_bias_gradient(rng, name):
    torch = pytest.importorskip("torch")
    qs, ks, vs, bs, kw = CASES[name]
    q, k, v, bias = (torch.from_numpy(_rand(rng, s)).requires_grad_() for s in (qs, ks, vs, bs))
    w = torch.from_numpy(_rand(rng, qs[:-1] + vs[-1:]))
    out = attention(q, k, v, bias=bias, **kw)
    (out * w).sum().backward()
    want_o, want = _torch_reference(torch, q, k, v, bias, w, **kw)
    assert _rel(out.detach().double().numpy(), want_o.numpy()) <= 1e-5
    for name_, x, g in zip("q k v bias".split(), (q, k, v, bias), want):
        assert x.grad is not None and x.grad.shape == x.shape, name_
        assert _rel(x.grad.double().numpy(), g.numpy()) <= 1e-5, name_


def test_a_bias_constant_along_each_row_has_no_gradient(rng):
    # softmax is invariant to adding a constant per row: d/dbias = sum_j dS = 0. The
    # kernel's value is rounding noise, small beside the other gradients.
    torch = pytest.importorskip("torch")
    qs, ks, vs = (2, 2, 19, 16), (2, 2, 23, 16), (2, 2, 23, 8)
    q, k, v = (torch.from_numpy(_rand(rng, s)).requires_grad_() for s in (qs, ks, vs))
    bias = torch.from_numpy(_rand(rng, (2, 1, 19, 1))).requires_grad_()
    w = torch.from_numpy(_rand(rng, qs[:-1] + vs[-1:]))
    (attention(q, k, v, bias=bias) * w).sum().backward()
    assert bias.grad.shape == bias.shape
    assert bias.grad.abs().max().item() <= 1e-5 * q.grad.abs().max().item()


def test_bias_without_grad_leaves_inputs_differentiable(rng):
    # A constant bias (no requires_grad) still shapes q, k, v's gradients.
    torch = pytest.importorskip("torch")
    qs, ks, vs, bs, kw = CASES["per_head_alibi"]
    q, k, v = (torch.from_numpy(_rand(rng, s)).requires_grad_() for s in (qs, ks, vs))
    bias = torch.from_numpy(_rand(rng, bs))
    w = torch.from_numpy(_rand(rng, qs[:-1] + vs[-1:]))
    (attention(q, k, v, bias=bias, **kw) * w).sum().backward()
    _, want = _torch_reference(torch, q, k, v, bias, w, **kw)
    for x, g in zip((q, k, v), want[:3]):
        assert _rel(x.grad.double().numpy(), g.numpy()) <= 1e-5
    assert bias.grad is None


def test_bf16_forward_with_a_f32_bias(rng):
    torch = pytest.importorskip("torch")
    qs, ks, vs, bs, kw = CASES["lq_lk"]
    q, k, v = (torch.from_numpy(_rand(rng, s)).to(torch.bfloat16) for s in (qs, ks, vs))
    bias = torch.from_numpy(_rand(rng, bs))
    out = attention(q, k, v, bias=bias, **kw)
    assert out.dtype == torch.bfloat16
    want, _ = attention_ref(*(x.double().numpy() for x in (q, k, v)),
                            score_mod=_score_mod(bias.double().numpy()))
    assert _rel(out.double().numpy(), want) <= 2e-2


def test_bias_ir_is_a_score_mod_on_the_reduced_capture():
    ir = flash_mlir.attention_ir((2, 4, 10, 16), (2, 2, 12, 16), (2, 2, 12, 8), "f32",
                                 bias=((4, 1, 12), "f32"))
    assert "captures(%bias_t : tensor<4x12xf32>)" in ir
    assert "tensor.extract %c[%x1, %x3] : tensor<4x12xf32>" in ir


@pytest.mark.parametrize("bias_shape,error,match", [
    ((3, 37, 53), ValueError, "bias must broadcast to the scores' shape"),
    ((1, 1, 2, 4, 37, 53), ValueError, "bias must broadcast"),
    ((37, 52), ValueError, "bias must broadcast"),
])
def test_bad_bias_shapes_are_refused(rng, bias_shape, error, match):
    qs, ks, vs, _, _ = CASES["lq_lk"]
    q, k, v, bias = (_rand(rng, s) for s in (qs, ks, vs, bias_shape))
    with pytest.raises(error, match=match):
        attention(q, k, v, bias=bias)


def test_bias_dtype_and_kind_are_checked(rng):
    torch = pytest.importorskip("torch")
    qs, ks, vs, bs, _ = CASES["lq_lk"]
    q, k, v, bias = (_rand(rng, s) for s in (qs, ks, vs, bs))
    with pytest.raises(TypeError, match="bias must be the same kind of array as q"):
        attention(q, k, v, bias=torch.from_numpy(bias))
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
    with pytest.raises(TypeError, match="bias must be float32 or q's dtype"):
        attention(tq, tk, tv, bias=torch.from_numpy(bias).to(torch.float16))
    with pytest.raises(ValueError, match="bias= needs static shapes"):
        attention(q, k, v, bias=bias, dynamic=True)


def test_prebuild_with_bias_fills_the_cache_attention_reads(rng, tmp_path, monkeypatch):
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path))
    qs, ks, vs, bs, kw = CASES["per_head_alibi"]
    path = flash_mlir.prebuild(qs, ks, vs, "float32", device="cpu", bias=(bs, "float32"), **kw)
    assert os.path.exists(path)
    q, k, v, bias = (_rand(rng, s) for s in (qs, ks, vs, bs))
    import flash_mlir._attention as am
    am._forget_kernels()
    built = []
    monkeypatch.setattr(am, "_compile_to_library", lambda *a: built.append(a))
    out = attention(q, k, v, bias=bias, **kw)
    assert not built  # served from the cache
    want, _ = attention_ref(q, k, v, score_mod=_score_mod(bias.astype(np.float64)), **kw)
    assert _rel(out, want) <= 1e-5
