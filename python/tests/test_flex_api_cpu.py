"""FlexAttention-style Python on the host: score_mod written with torch functions and NumPy
ufuncs, arrays read from the function's closure or module globals as captures (forward and
autograd), and mask_mod — proved causal or a window on the call's shapes it becomes that
structured mask (the same kernel as causal= / window=), any other masks the scores. Against
float64 on fresh random inputs, non-square shapes."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
import flash_mlir._attention as am  # noqa: E402
from flash_mlir import attention  # noqa: E402
from flash_mlir import score as fs  # noqa: E402
from test_score_mod_fn_cpu import B, HQ, LQ, LK, _inputs, _ref  # noqa: E402

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")

GLOBAL_BIAS = None  # set by a test: a module global a score_mod reads


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(1 << 31)))


def _close(out, ref, tol=1e-5):
    assert (out.double() - ref).abs().max().item() < tol


def test_torch_functions_and_a_closure_bias(gen):
    """A FlexAttention score_mod as written for Flex: torch.tanh, torch.where and a bias
    tensor from the enclosing scope, indexed by the indices."""
    q, k, v = _inputs(gen)
    bias = torch.randn(B, HQ, LQ, LK, generator=gen)
    cap = 5.0

    def soft_bias(score, b, h, q_idx, kv_idx):
        s = cap * torch.tanh(score / cap) + bias[b, h, q_idx, kv_idx]
        return torch.where(kv_idx <= q_idx + (LK - LQ), s, -float("inf"))

    out = attention(q, k, v, score_mod=soft_bias)
    i = torch.arange(LQ)[:, None]
    j = torch.arange(LK)[None, :]
    ref = _ref(q, k, v, lambda s, b, h, i_, j_: torch.where(
        j <= i + (LK - LQ), cap * torch.tanh(s / cap) + bias.double(), float("-inf")), ())
    _close(out, ref)


def test_numpy_ufuncs_and_a_global_array(gen):
    global GLOBAL_BIAS
    q, k, v = (x.numpy() for x in _inputs(gen))
    GLOBAL_BIAS = np.random.default_rng(int(torch.randint(1 << 30, (1,), generator=gen)))\
        .standard_normal((HQ, LK)).astype(np.float32)

    def fn(score, b, h, q_idx, kv_idx):
        return np.where(q_idx >= kv_idx, 3.0 * np.tanh(score / 3.0), score) \
            + GLOBAL_BIAS[h, kv_idx]

    out = attention(q, k, v, score_mod=fn)
    i = torch.arange(LQ)[:, None]
    j = torch.arange(LK)[None, :]
    g = torch.from_numpy(GLOBAL_BIAS).double()[None, :, None, :]
    ref = _ref(*(torch.from_numpy(x) for x in (q, k, v)), lambda s, b, h, i_, j_: torch.where(
        i >= j, 3 * torch.tanh(s / 3), s) + g, ())
    assert np.abs(out - ref.numpy()).max() < 1e-5
    # Another global array of the same shape: the same kernel, the new values.
    GLOBAL_BIAS = GLOBAL_BIAS * -2.0
    out2 = attention(q, k, v, score_mod=fn)
    ref2 = _ref(*(torch.from_numpy(x) for x in (q, k, v)), lambda s, b, h, i_, j_: torch.where(
        i >= j, 3 * torch.tanh(s / 3), s) + g * -2.0, ())
    assert np.abs(out2 - ref2.numpy()).max() < 1e-5


def test_gradient_of_a_closure_bias(gen):
    q, k, v = _inputs(gen, grad=True)
    bias = torch.randn(HQ, LQ, LK, generator=gen).requires_grad_()
    out = attention(q, k, v, score_mod=lambda s, b, h, i, j: s + bias[h, i, j],
                    mask_mod=lambda b, h, i, j: (j // 4) != (i // 5))
    do = torch.randn(out.shape, generator=gen)
    got = torch.autograd.grad(out, (q, k, v, bias), do)
    xs = [x.detach().double().requires_grad_() for x in (q, k, v, bias)]
    i = torch.arange(LQ)[:, None]
    j = torch.arange(LK)[None, :]
    ref = _ref(*xs[:3], lambda s, b, h, i_, j_, bb: torch.where(
        (j // 4) != (i // 5), s + bb, float("-inf")), xs[3:])
    want = torch.autograd.grad(ref, xs, do.double())
    for name, g, w in zip(("dq", "dk", "dv", "dbias"), got, want):
        rel = (g.double() - w).abs().max().item() / w.abs().max().item()
        assert rel < 1e-5, (name, rel)


@pytest.mark.parametrize("mask_mod, kw", [
    (lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, dict(causal=True)),
    (lambda b, h, q_idx, kv_idx: kv_idx <= q_idx + (LK - LQ),
     dict(causal=True, align="bottom_right")),
    (lambda b, h, q_idx, kv_idx: (q_idx >= kv_idx) & (q_idx - kv_idx < 6), dict(window=6)),
    (lambda b, h, q_idx, kv_idx: torch.logical_and(kv_idx <= q_idx + (LK - LQ),
                                                   q_idx + (LK - LQ) - kv_idx < 9),
     dict(window=9, align="bottom_right")),
])
def test_structured_mask_mods_become_the_mask_kind(gen, mask_mod, kw):
    """Proved on every (q_idx, kv_idx): the kernel causal= / window= builds (the same
    library, bit-identical rows), not a score modification."""
    q, k, v = _inputs(gen)
    lq, lk = LQ, LK
    assert fs.mask_kind(mask_mod, 2, lq, lk)[0] in ("causal", "window")
    mod, args, causal, window, align = am._flex_mods(q, k, None, (), mask_mod, False, None,
                                                     None)
    assert mod is None and args == ()
    assert (causal, window, align) == (kw.get("causal", False), kw.get("window"),
                                       kw.get("align", "top_left"))
    before = set(am._kernels)
    out = attention(q, k, v, mask_mod=mask_mod)
    added = set(am._kernels) - before
    want = attention(q, k, v, **kw)
    assert torch.equal(out, want)
    # The structured kernel holds no score_mod region.
    assert all("score_mod" not in key[0] for key in added)


def test_other_mask_mods_mask_the_scores(gen):
    """A prefix-LM mask and a document mask over captured ids: where(visible, s, -inf)."""
    q, k, v = _inputs(gen)
    doc = torch.randint(0, 3, (B, LK), generator=gen)
    doc_q = doc[:, LK - LQ:].contiguous()

    def document(b, h, q_idx, kv_idx):
        return (doc_q[b, q_idx] == doc[b, kv_idx]) | (kv_idx < 3)

    assert fs.mask_kind(document, 2, LQ, LK) is None
    out = attention(q, k, v, mask_mod=document, score_mod=lambda s, b, h, i, j: s * 0.5)
    vis = (doc_q[:, None, :, None] == doc[:, None, None, :]) | \
        (torch.arange(LK)[None, None, None, :] < 3)
    ref = _ref(q, k, v, lambda s, b, h, i, j: torch.where(vis, s * 0.5, float("-inf")), ())
    _close(out, ref)
    prefix = lambda b, h, q_idx, kv_idx: (kv_idx < 7) | (q_idx >= kv_idx)  # noqa: E731
    assert fs.mask_kind(prefix, 2, LQ, LK) is None
    out = attention(q, k, v, mask_mod=prefix)
    i = torch.arange(LQ)[:, None]
    j = torch.arange(LK)[None, :]
    ref = _ref(q, k, v, lambda s, b, h, i_, j_: torch.where((j < 7) | (i >= j), s,
                                                           float("-inf")), ())
    _close(out, ref)


def test_mask_kind_reads_every_position():
    # Causal except one position: not causal.
    assert fs.mask_kind(lambda b, h, i, j: (i >= j) & ~((i == 40) & (j == 3)), 2, 64, 64) \
        is None
    assert fs.mask_kind(lambda b, h, i, j: i >= j, 2, 64, 64) == ("causal", "top_left")
    assert fs.mask_kind(lambda b, h, i, j: j >= 0, 2, 33, 70) == ("none",)
    # One that depends on the head is never structured.
    assert fs.mask_kind(lambda b, h, i, j: (i >= j) | (h > 100), 2, 16, 16) is None


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(mask_mod=lambda b, h, i, j: i >= j, causal=True), ValueError,
     "mask_mod= replaces causal="),
    (dict(mask_mod=lambda b, h, i, j: i * 1.0), TypeError, "must return a comparison"),
    (dict(mask_mod=5), TypeError, "mask_mod must be a function"),
    (dict(score_mod=lambda s, b, h, i, j: torch.erf(s)), TypeError, "torch.erf"),
    (dict(score_mod=lambda s, b, h, i, j: np.sinh(s)), TypeError, "numpy.sinh"),
    (dict(mask_mod=lambda b, h, i, j: i >= j, dynamic=True), ValueError,
     "mask_mod= needs static shapes"),
])
def test_bad_flex_arguments_are_named(gen, kwargs, error, match):
    q, k, v = _inputs(gen)
    with pytest.raises(error, match=match):
        attention(q, k, v, **kwargs)


def test_flex_call_keys():
    """The key that sends a repeated Flex-style CUDA call to its launch: one per function
    and array types, the arrays read afresh; none for autograd's own FlexMods (made anew
    per call), any other callable object, or arrays that are not CUDA tensors (here on the
    host, where the general path runs)."""
    bias = torch.zeros(HQ, LQ, LK)

    def make(b):
        def score_mod(s, bi, h, i, j):
            return s + b[h, i, j]
        return score_mod

    def mask_mod(bi, h, i, j):
        return j <= i

    plain = ("plain",)
    key, arrays = am._flex_call_key(plain, None, mask_mod, (), None)
    assert key == am._flex_call_key(plain, None, mask_mod, (), None)[0] and arrays == ()
    # A closure over a host tensor: no key (CUDA tensors only).
    assert am._flex_call_key(plain, make(bias), None, (), None) is None
    flex = fs.FlexMods(None, mask_mod, 0)
    assert am._flex_call_key(plain, flex, None, (), None) is None

    class Callable:
        def __call__(self, bi, h, i, j):
            return j <= i
    assert am._flex_call_key(plain, None, Callable(), (), None) is None
    # Another function body: another key.
    assert am._flex_call_key(plain, None, lambda bi, h, i, j: j < i, (), None)[0] != key
