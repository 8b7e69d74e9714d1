"""attention(..., score_mod=fn, score_mod_args=...): a score modification written in Python,
traced into the op's score_mod region (flash_mlir.score), forward and torch autograd on the
host against float64 on fresh random inputs; the compiler derives the region's gradient,
including those of float arguments (a bias, ALiBi slopes). Non-square shapes, GQA,
integer and boolean arguments (lengths, document ids, a mask), rows that see no key, and the
diagnostics of what cannot be traced."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from flash_mlir import attention  # noqa: E402
from flash_mlir import score as fs  # noqa: E402

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")

B, HQ, HKV, LQ, LK, D, DV = 2, 4, 2, 19, 27, 16, 12


def _ref(q, k, v, mod, args, scale=None):
    """float64 attention with `mod(s, b, h, i, j, *args)` on torch tensors whose index
    arguments broadcast over [B, Hq, Lq, Lk]; rows without a finite score give 0."""
    q, k, v = (x.double() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)) * (scale or q.shape[-1] ** -0.5)
    b = torch.arange(q.shape[0])[:, None, None, None]
    h = torch.arange(q.shape[1])[None, :, None, None]
    i = torch.arange(q.shape[2])[None, None, :, None]
    j = torch.arange(k.shape[2])[None, None, None, :]
    t = mod(s, b, h, i, j, *args)
    dead = torch.isneginf(t).all(-1, keepdim=True)
    p = torch.softmax(torch.where(dead, torch.zeros_like(t), t), -1)
    return torch.where(dead, torch.zeros_like(p), p) @ v


def _inputs(gen, grad=False):
    q = torch.randn(B, HQ, LQ, D, generator=gen)
    k = torch.randn(B, HKV, LK, D, generator=gen)
    v = torch.randn(B, HKV, LK, DV, generator=gen)
    return [x.requires_grad_(grad) for x in (q, k, v)]


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(1 << 31)))


def test_softcap_bias_and_distance(gen):
    q, k, v = _inputs(gen)
    bias = torch.randn(HQ, LQ, LK, generator=gen)

    def fn(s, b, h, i, j, bias):
        return 7.0 * fs.tanh(s / 7.0) + bias[h, i, j] - 0.05 * abs(i + (LK - LQ) - j)

    out = attention(q, k, v, score_mod=fn, score_mod_args=(bias,))
    ref = _ref(q, k, v, lambda s, b, h, i, j, bias: 7 * torch.tanh(s / 7) + bias
               - 0.05 * (i + (LK - LQ) - j).abs(), (bias.double(),))
    assert (out.double() - ref).abs().max().item() < 1e-5


def test_lengths_and_documents(gen):
    """Integer arguments: each sequence's length and per-token document ids (a query sees
    the keys of its own document only); rows of an empty sequence give 0."""
    q, k, v = _inputs(gen)
    lens = torch.tensor([LK - 4, 0], dtype=torch.int32)
    qdoc = torch.randint(0, 3, (B, LQ), generator=gen, dtype=torch.int64)
    kdoc = torch.randint(0, 3, (B, LK), generator=gen, dtype=torch.int64)

    def fn(s, b, h, i, j, lens, qdoc, kdoc):
        return fs.where((j < lens[b]) & (qdoc[b, i] == kdoc[b, j]), s, -float("inf"))

    out = attention(q, k, v, score_mod=fn, score_mod_args=(lens, qdoc, kdoc))
    ok = lambda b, i, j: (j < lens.long()[:, None, None, None]) & \
        (qdoc[:, None, :, None] == kdoc[:, None, None, :])
    ref = _ref(q, k, v, lambda s, b, h, i, j: torch.where(ok(b, i, j), s, float("-inf")), ())
    assert (out.double() - ref).abs().max().item() < 1e-5
    assert (out[1] == 0).all()


def test_boolean_mask_argument(gen):
    q, k, v = _inputs(gen)
    mask = torch.rand(LQ, LK, generator=gen) < 0.6

    out = attention(q, k, v, score_mod=lambda s, b, h, i, j, m:
                    fs.where(m[i, j], s, -float("inf")), score_mod_args=(mask,))
    ref = _ref(q, k, v, lambda s, b, h, i, j: torch.where(mask, s, float("-inf")), ())
    assert (out.double() - ref).abs().max().item() < 1e-5


def test_gradients_of_inputs_bias_and_slopes(gen):
    """The compiler-derived gradient of the traced region, through autograd: dq, dk, dv,
    the bias's and the per-head slopes', against float64 autograd of the same function."""
    q, k, v = _inputs(gen, grad=True)
    bias = torch.randn(LQ, LK, generator=gen).requires_grad_()
    slopes = (torch.rand(HQ, generator=gen) * 0.3).requires_grad_()
    lens = torch.tensor([LK, LK - 9], dtype=torch.int32)

    def fn(s, b, h, i, j, bias, slopes, lens):
        t = 4.0 * fs.tanh(s / 4.0) + bias[i, j] - slopes[h] * abs(i - j)
        return fs.where(j < lens[b], t, -float("inf"))

    out = attention(q, k, v, score_mod=fn, score_mod_args=(bias, slopes, lens))
    do = torch.randn(out.shape, generator=gen)
    got = torch.autograd.grad(out, (q, k, v, bias, slopes), do)
    xs = [x.detach().double().requires_grad_() for x in (q, k, v, bias, slopes)]
    live = torch.arange(LK)[None, None, None, :] < lens.long()[:, None, None, None]
    ref = _ref(*xs[:3], lambda s, b, h, i, j, bb, sl: torch.where(
        live, 4 * torch.tanh(s / 4) + bb - sl[None, :, None, None] * (i - j).abs(),
        float("-inf")), xs[3:])
    want = torch.autograd.grad(ref, xs, do.double())
    for name, g, w in zip(("dq", "dk", "dv", "dbias", "dslopes"), got, want):
        rel = (g.double() - w).abs().max().item() / w.abs().max().item()
        assert rel < 1e-5, (name, rel)


def test_closure_values_are_part_of_the_kernel(gen):
    """A function closing over a Python number is traced again when the number changes."""
    q, k, v = _inputs(gen)
    outs = []
    for cap in (2.0, 20.0):
        outs.append(attention(q, k, v, score_mod=lambda s, b, h, i, j: cap * fs.tanh(s / cap)))
        ref = _ref(q, k, v, lambda s, b, h, i, j: cap * torch.tanh(s / cap), ())
        assert (outs[-1].double() - ref).abs().max().item() < 1e-5
    assert (outs[0] - outs[1]).abs().max().item() > 1e-3


def test_numpy_arrays(gen):
    q, k, v = (x.numpy() for x in _inputs(gen))
    bias = np.random.default_rng(1).standard_normal((B, HQ, LQ, LK)).astype(np.float32)
    out = attention(q, k, v, score_mod=lambda s, b, h, i, j, bb: s + bb[b, h, i, j],
                    score_mod_args=(bias,))
    ref = _ref(*(torch.from_numpy(x) for x in (q, k, v)),
               lambda s, b, h, i, j: s + torch.from_numpy(bias).double(), ())
    assert np.abs(out - ref.numpy()).max() < 1e-5


@pytest.mark.parametrize("fn, args, error, match", [
    (lambda s, b, h, i, j: s if i < j else -s, (), TypeError, "no truth value"),
    (lambda s, b, h, i, j: s % 2.0, (), TypeError, "% takes integers"),
    (lambda s, b, h, i, j: i < j, (), TypeError, "must return a score"),
    (lambda s, b, h, i, j, m: s + m[i], ("bias2d",), TypeError, "takes 2 indices, got 1"),
    (lambda s, b, h, i, j: s + np.float32(1).item() + len(s), (), TypeError, "tracing"),
])
def test_untraceable_functions_are_named(gen, fn, args, error, match):
    q, k, v = _inputs(gen)
    arrays = tuple(torch.randn(LQ, LK) for _ in args)
    with pytest.raises(error, match=match):
        attention(q, k, v, score_mod=fn, score_mod_args=arrays)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(score_mod=3), TypeError, "score_mod must be a function"),
    (dict(score_mod=lambda s, b, h, i, j: s, softcap=2.0), ValueError,
     "score_mod= replaces softcap="),
    (dict(score_mod_args=(1,)), ValueError, "score_mod_args= without score_mod="),
    (dict(score_mod=lambda s, b, h, i, j, x: s, score_mod_args=(np.zeros(3),)), TypeError,
     r"score_mod_args\[0\] must be the same kind of array as q"),
    (dict(score_mod=lambda s, b, h, i, j, x: s,
          score_mod_args=(torch.zeros(3, dtype=torch.float64),)), TypeError,
     r"score_mod_args\[0\] has dtype float64"),
    (dict(score_mod=lambda s, b, h, i, j: s, dynamic=True), ValueError, "static shapes"),
])
def test_bad_arguments_are_named(gen, kwargs, error, match):
    q, k, v = _inputs(gen)
    with pytest.raises(error, match=match):
        attention(q, k, v, **kwargs)
