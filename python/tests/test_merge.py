"""flash_mlir.merge_attention: partial attention results over disjoint key
sets merged by their log-sum-exps equal attention over the union — random
splits (empty parts and rows that see no key of a part included) in float64
against the definition, the kernel's own partials (f32, NumPy and torch)
against one call over every key, parts with lse -inf whatever their output
holds, rows no part saw (0 and -inf, never NaN), lses far past exp's range,
bf16 outputs accumulated in f32, torch autograd through the merge, and the
errors for bad arguments."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from flash_mlir import merge_attention  # noqa: E402
from reference import attention_ref  # noqa: E402

F32_TOL = 2e-5


def rel_err(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)


def _split(rng, n, parts):
    """A random partition of range(n) into `parts` index sets (some may be empty)."""
    owner = rng.integers(0, parts, n)
    return [np.flatnonzero(owner == p) for p in range(parts)]


@pytest.mark.parametrize("parts", [1, 2, 3, 5])
@pytest.mark.parametrize("causal", [False, True])
def test_random_splits_merge_to_the_whole(rng, parts, causal):
    """Keys dealt at random to the parts (not contiguous ranges); with the
    causal mask of the whole, many rows see no key of some part."""
    lq, lk, d, dv = 13, 17, 8, 5
    q = rng.standard_normal((2, 3, lq, d))
    k = rng.standard_normal((2, 3, lk, d))
    v = rng.standard_normal((2, 3, lk, dv))
    want, want_lse = attention_ref(q, k, v, causal=causal)
    outs, lses = [], []
    for keys in _split(rng, lk, parts):
        def global_mask(s, i, j, keys=keys):
            return np.where(keys[j] <= i, s, -np.inf) if causal else s
        o, l = attention_ref(q, k[..., keys, :], v[..., keys, :], score_mod=global_mask)
        outs.append(o)
        lses.append(l)
    with np.errstate(all="raise"):
        out, lse = merge_attention(outs, lses)
    assert out.dtype == np.float64 and lse.dtype == np.float64
    assert rel_err(out, want) <= 1e-12
    assert np.array_equal(np.isfinite(lse), np.isfinite(want_lse))
    assert np.max(np.abs(lse - want_lse)[np.isfinite(want_lse)]) <= 1e-12


def test_kernel_partials_numpy(rng):
    """Two calls of the kernel over the first a keys and the rest, the second
    bottom-right aligned so that it is the whole sequence's causal mask: rows
    before a see none of its keys (lse -inf)."""
    l, a = 29, 11
    q = rng.standard_normal((2, 4, l, 16)).astype(np.float32)
    k = rng.standard_normal((2, 2, l, 16)).astype(np.float32)
    v = rng.standard_normal((2, 2, l, 12)).astype(np.float32)
    o1, l1 = flash_mlir.attention(q, k[..., :a, :], v[..., :a, :], causal=True,
                                  return_lse=True)
    o2, l2 = flash_mlir.attention(q, k[..., a:, :], v[..., a:, :], causal=True,
                                  align="bottom_right", return_lse=True)
    assert np.all(l2[..., :a] == -np.inf)
    out, lse = merge_attention([o1, o2], [l1, l2])
    assert out.dtype == np.float32
    want, want_lse = attention_ref(q, k, v, causal=True)
    assert rel_err(out, want) <= F32_TOL
    assert rel_err(lse, want_lse) <= F32_TOL
    full, full_lse = flash_mlir.attention(q, k, v, causal=True, return_lse=True)
    assert rel_err(out, full) <= F32_TOL
    assert rel_err(lse, full_lse) <= F32_TOL


def test_kernel_partials_torch(rng):
    torch = pytest.importorskip("torch")
    lq, lk, cuts = 10, 40, [0, 7, 8, 25, 40]
    q = torch.from_numpy(rng.standard_normal((1, 3, lq, 8)).astype(np.float32))
    k = torch.from_numpy(rng.standard_normal((1, 3, lk, 8)).astype(np.float32))
    v = torch.from_numpy(rng.standard_normal((1, 3, lk, 24)).astype(np.float32))
    parts = [flash_mlir.attention(q, k[..., a:b, :], v[..., a:b, :], return_lse=True)
             for a, b in zip(cuts, cuts[1:])]
    out, lse = merge_attention([o for o, _ in parts], [l for _, l in parts])
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    want, want_lse = attention_ref(q.numpy(), k.numpy(), v.numpy())
    assert rel_err(out.numpy(), want) <= F32_TOL
    assert rel_err(lse.numpy(), want_lse) <= F32_TOL


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_parts_that_saw_no_key(rng, kind):
    """A part with lse -inf weighs 0, even when its output holds NaN or inf;
    a row every part missed is 0 with lse -inf."""
    o1 = rng.standard_normal((3, 4, 6)).astype(np.float32)
    l1 = rng.standard_normal((3, 4)).astype(np.float32)
    l1[1] = -np.inf  # row 1 of every batch sees nothing in part 1 either
    o2 = np.full((3, 4, 6), np.nan, np.float32)
    o2[0, 0] = np.inf
    l2 = np.full((3, 4), -np.inf, np.float32)
    want_out = np.where(np.isfinite(l1)[..., None], o1, 0.0)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        out, lse = merge_attention([torch.from_numpy(o1), torch.from_numpy(o2)],
                                   [torch.from_numpy(l1), torch.from_numpy(l2)])
        out, lse = out.numpy(), lse.numpy()
    else:
        with np.errstate(all="raise"):
            out, lse = merge_attention([o1, o2], [l1, l2])
    assert not np.any(np.isnan(out)) and not np.any(np.isnan(lse))
    assert np.array_equal(out, want_out)
    assert np.array_equal(lse, l1)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_all_parts_empty(kind):
    outs = [np.zeros((2, 5, 3), np.float32) for _ in range(3)]
    lses = [np.full((2, 5), -np.inf, np.float32) for _ in range(3)]
    if kind == "torch":
        torch = pytest.importorskip("torch")
        out, lse = merge_attention([torch.from_numpy(o) for o in outs],
                                   [torch.from_numpy(x) for x in lses])
        out, lse = out.numpy(), lse.numpy()
    else:
        with np.errstate(all="raise"):
            out, lse = merge_attention(outs, lses)
    assert np.array_equal(out, np.zeros((2, 5, 3))) and np.all(lse == -np.inf)


def test_lses_past_exp_range(rng):
    """exp(±3000) over- and underflows even in float64: only the differences
    of the lses may be exponentiated."""
    o = [rng.standard_normal((4, 3)) for _ in range(3)]
    l = [np.full(4, 3000.0), np.full(4, 3000.0 + np.log(3.0)), np.full(4, -3000.0)]
    out, lse = merge_attention(o, l)
    assert rel_err(out, 0.25 * o[0] + 0.75 * o[1]) <= 1e-12
    assert rel_err(lse, np.full(4, 3000.0 + np.log(4.0))) <= 1e-12


def test_bf16_outputs_accumulate_in_f32(rng):
    torch = pytest.importorskip("torch")
    outs = [torch.randn(2, 7, 4, dtype=torch.bfloat16) for _ in range(4)]
    lses = [torch.randn(2, 7) for _ in range(4)]
    out, lse = merge_attention(outs, lses)
    wide, wide_lse = merge_attention([o.double() for o in outs], [x.double() for x in lses])
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert torch.equal(out, wide.to(torch.bfloat16))
    full, _ = merge_attention(outs, lses, out_dtype=torch.float32)
    assert full.dtype == torch.float32
    assert (full.double() - wide).abs().max() <= 1e-6
    assert (lse.double() - wide_lse).abs().max() <= 1e-6


def test_autograd_through_the_merge(rng):
    torch = pytest.importorskip("torch")
    outs = [torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    lses = [torch.randn(2, 3, dtype=torch.float64, requires_grad=True) for _ in range(3)]

    def f(*xs):
        out, lse = merge_attention(xs[:3], xs[3:])
        return out, lse
    assert torch.autograd.gradcheck(f, (*outs, *lses))
    # A part without keys in some rows: gradients stay finite (0 for that part).
    dead = torch.randn(2, 3, dtype=torch.float64)
    dead[0] = -float("inf")
    dead.requires_grad_(True)
    out, lse = merge_attention(outs[:2] + [outs[2]], lses[:2] + [dead])
    (out.sum() + lse.sum()).backward()
    assert torch.isfinite(dead.grad).all() and torch.all(dead.grad[0] == 0)
    assert torch.isfinite(outs[2].grad).all() and torch.all(outs[2].grad[0] == 0)


def test_errors():
    o, l = np.zeros((2, 3, 4), np.float32), np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="outs is empty"):
        merge_attention([], [])
    with pytest.raises(ValueError, match="2 outputs but 1 lses"):
        merge_attention([o, o], [l])
    with pytest.raises(ValueError, match=r"lses\[1\] has shape \(2, 4\)"):
        merge_attention([o, o], [l, np.zeros((2, 4), np.float32)])
    with pytest.raises(ValueError, match=r"outs\[1\] has shape \(2, 3, 5\)"):
        merge_attention([o, np.zeros((2, 3, 5), np.float32)], [l, l])
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="all NumPy arrays or all torch tensors"):
        merge_attention([o, torch.zeros(2, 3, 4)], [l, torch.zeros(2, 3)])
