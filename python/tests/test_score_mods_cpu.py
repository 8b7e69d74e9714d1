"""attention()'s score conveniences — bias= (an additive bias, a capture), softcap=
(c·tanh(s/c)) and alibi_slopes= (ALiBi, the slopes a capture) — as one score_mod
region: forward and torch autograd with the gradients of the bias and the slopes, on the
host, against float64 from the definition on fresh random inputs."""
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
    assert "tensor.extract %c0[%x1, %x3] : tensor<4x12xf32>" in ir


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


def _torch_mods_reference(torch, q, k, v, w, bias=None, softcap=None, slopes=None,
                          causal=False, align="top_left"):
    """float64 autograd of softcap, bias and ALiBi (FlashAttention's definition:
    - slope·|i + Lk - Lq - j|) applied in that order."""
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    extra = [x.detach().double().requires_grad_() if x is not None else None
             for x in (bias, slopes)]
    q, k, v = leaves
    g = q.shape[-3] // k.shape[-3]
    kk, vv = (k.repeat_interleave(g, -3), v.repeat_interleave(g, -3)) if g > 1 else (k, v)
    s = q @ kk.transpose(-1, -2) / math.sqrt(q.shape[-1])
    lq, lk = s.shape[-2:]
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if extra[0] is not None:
        s = s + extra[0]
    i, j = torch.arange(lq)[:, None], torch.arange(lk)[None, :]
    if extra[1] is not None:
        dist = (i + lk - lq - j).abs().double()
        sl = extra[1]
        s = s - sl.reshape(sl.shape + (1, 1)) * dist
    if causal:
        diag = i + (lk - lq if align == "bottom_right" else 0)
        s = s.masked_fill(~(j <= diag), float("-inf"))
    o = torch.softmax(s, -1).nan_to_num(0.0) @ vv
    (o * w.double()).sum().backward()
    grads = [x.grad for x in leaves] + [x.grad if x is not None else None for x in extra]
    return o.detach(), grads


# (q, k, v shapes, keywords) with softcap and ALiBi: per-head and per-(batch, head)
# slopes, GQA, Lq != Lk (ALiBi's distance is bottom-right aligned).
MODS = {
    "softcap": ((2, 4, 33, 16), (2, 2, 47, 16), (2, 2, 47, 8), dict(softcap=2.5)),
    "alibi_heads": ((2, 4, 33, 16), (2, 2, 47, 16), (2, 2, 47, 8),
                    dict(alibi_shape=(4,), causal=True, align="bottom_right")),
    "alibi_batch_heads_softcap_bias": ((2, 3, 21, 24), (2, 3, 29, 24), (2, 3, 29, 12),
                                       dict(alibi_shape=(2, 3), softcap=1.5,
                                            bias_shape=(21, 29))),
}


def _mods_inputs(torch, rng, case):
    qs, ks, vs, kw = case
    kw = dict(kw)
    q, k, v = (torch.from_numpy(_rand(rng, s)).requires_grad_() for s in (qs, ks, vs))
    bias = slopes = None
    if "bias_shape" in kw:
        bias = torch.from_numpy(_rand(rng, kw.pop("bias_shape"))).requires_grad_()
    if "alibi_shape" in kw:
        # ALiBi's slopes are positive and small; random ones test the gradient.
        slopes = torch.from_numpy(
            np.abs(_rand(rng, kw.pop("alibi_shape"))) * 0.2).requires_grad_()
    w = torch.from_numpy(_rand(rng, qs[:-1] + vs[-1:]))
    return q, k, v, bias, slopes, w, kw


@pytest.mark.parametrize("name", list(MODS))
def test_softcap_and_alibi_with_gradients(rng, name):
    torch = pytest.importorskip("torch")
    q, k, v, bias, slopes, w, kw = _mods_inputs(torch, rng, MODS[name])
    out = attention(q, k, v, bias=bias, alibi_slopes=slopes, **kw)
    (out * w).sum().backward()
    want_o, want = _torch_mods_reference(torch, q, k, v, w, bias=bias, slopes=slopes, **kw)
    assert _rel(out.detach().double().numpy(), want_o.numpy()) <= 1e-5
    for label, x, g in zip(("q", "k", "v", "bias", "alibi_slopes"),
                           (q, k, v, bias, slopes), want):
        if x is None:
            continue
        assert x.grad is not None and x.grad.shape == x.shape, label
        assert _rel(x.grad.double().numpy(), g.numpy()) <= 1e-5, label


def test_softcap_and_alibi_on_numpy(rng):
    q, k, v = (_rand(rng, s) for s in ((2, 4, 33, 16), (2, 2, 47, 16), (2, 2, 47, 8)))
    slopes = np.abs(_rand(rng, (4,))) * 0.2
    out = attention(q, k, v, softcap=3.0, alibi_slopes=slopes)
    i, j = np.arange(33)[:, None], np.arange(47)[None, :]
    dist = np.abs(i + 47 - 33 - j)
    mod = lambda s, i_, j_: 3.0 * np.tanh(s / 3.0) - slopes.astype(np.float64)[:, None, None] * dist
    want, _ = attention_ref(q, k, v, score_mod=mod)
    assert _rel(out, want) <= 1e-5


@pytest.mark.parametrize("kw,error,match", [
    (dict(softcap=0.0), ValueError, "softcap must be positive and finite"),
    (dict(softcap=float("inf")), ValueError, "softcap must be positive and finite"),
    (dict(softcap=True), TypeError, "softcap must be a real number"),
    (dict(alibi_slopes=np.ones(3, np.float32)), ValueError, "alibi_slopes must have shape"),
    (dict(alibi_slopes=np.ones(4, np.float16)), TypeError, "alibi_slopes must be float32"),
    (dict(softcap=2.0, dynamic=True), ValueError, "softcap= needs static shapes"),
])
def test_bad_score_conveniences_are_refused(rng, kw, error, match):
    q, k, v = (_rand(rng, s) for s in ((2, 4, 33, 16), (2, 2, 47, 16), (2, 2, 47, 8)))
    with pytest.raises(error, match=match):
        attention(q, k, v, **kw)
