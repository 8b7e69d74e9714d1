"""attention(..., sinks=) on the host: one learned logit per query head counted in each
row's softmax as a key of value zero (gpt-oss). Against a float64 reference that appends
the sink as one more score column, takes the softmax and drops that column again, on
fresh random inputs of non-square shapes (Lq != Lk != D != Dv), through the tiled
lowering (one tile and several) and the reference one; torch autograd (dq, dk, dv and
the sinks' gradient) against float64 autograd of the same definition; errors."""
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
from reference import sinks_attention_ref as sinks_ref  # noqa: E402

pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")

B, HQ, HKV, LQ, LK, D, DV = 2, 4, 2, 37, 53, 24, 20
F32_TOL = 1e-5

# The default tiles (64 rows) hold the whole sequence; 16 x 8 splits it into several,
# so the sink's start of the online softmax meets the rescaling between key tiles.
PIPELINES = {"tiled": {}, "small-tiles": {"block_q": 16, "block_kv": 8},
             "reference": {"reference": True}}


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def rand_sinks(rng, hq=HQ, dtype=np.float32):
    # exp(sink) against the row's sum of about Lk terms of exp(N(0, 1)): logits
    # around log(Lk) give the sink a share of the mass comparable to the keys'.
    return rng.uniform(1.0, 6.0, hq).astype(dtype)


def rel_err(got, want):
    return np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30)


def _visible(lq, lk, causal, window, align):
    i = np.arange(lq)[:, None]
    j = np.arange(lk)[None, :]
    diag = i + (lk - lq if align == "bottom_right" else 0)
    ok = np.ones((lq, lk), bool)
    if causal or window is not None:
        ok = j <= diag
    if window is not None:
        ok &= j > diag - window
    return ok


def _shapes(hkv=HKV, lq=LQ, lk=LK):
    return (B, HQ, lq, D), (B, hkv, lk, D), (B, hkv, lk, DV)


CASES = {
    "plain": ({}, {}),
    "causal-top-left": ({"causal": True}, {}),
    "causal-bottom-right": ({"causal": True, "align": "bottom_right"}, {}),
    "window-bottom-right": ({"window": 9, "align": "bottom_right"}, {}),
    "window-top-left-mqa": ({"window": 20}, {"hkv": 1}),
    "mha-lq-gt-lk": ({"causal": True}, {"hkv": HQ, "lq": 61, "lk": 29}),
}


@pytest.mark.parametrize("pipeline", list(PIPELINES))
@pytest.mark.parametrize("name", list(CASES))
def test_f32_matches_float64_reference(rng, name, pipeline):
    kw, shape_kw = CASES[name]
    qs, ks, vs = _shapes(**shape_kw)
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    sinks = rand_sinks(rng)
    out, lse = attention(q, k, v, sinks=sinks, return_lse=True, **kw, **PIPELINES[pipeline])
    want, want_lse = sinks_ref(q, k, v, sinks, **kw)
    assert out.shape == want.shape and out.dtype == np.float32
    assert lse.shape == qs[:-1] and lse.dtype == np.float32
    assert rel_err(out, want) <= F32_TOL
    assert np.abs(lse - want_lse).max() <= 1e-4
    # The sinks change the result well beyond the tolerance: the check above sees them.
    plain = attention(q, k, v, **kw, **PIPELINES[pipeline])
    assert rel_err(plain, want) > 100 * F32_TOL
    # Without return_lse, the same output.
    alone = attention(q, k, v, sinks=sinks, **kw, **PIPELINES[pipeline])
    assert rel_err(alone, want) <= F32_TOL


@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_rows_that_see_no_key_give_zero_and_the_sink(rng, pipeline):
    # Bottom-right causal with Lq > Lk: the first Lq - Lk rows see no key, so the
    # sink is all of their mass: output 0, lse = sinks[h].
    qs, ks, vs = _shapes(lq=LK, lk=LQ)
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    sinks = rand_sinks(rng)
    out, lse = attention(q, k, v, sinks=sinks, causal=True, align="bottom_right",
                         return_lse=True, **PIPELINES[pipeline])
    dead = LK - LQ
    assert np.all(out[:, :, :dead] == 0)
    np.testing.assert_array_equal(lse[:, :, :dead],
                                  np.broadcast_to(sinks[:, None], (B, HQ, dead)))
    want, want_lse = sinks_ref(q, k, v, sinks, causal=True, align="bottom_right")
    assert rel_err(out, want) <= F32_TOL
    assert np.abs(lse - want_lse).max() <= 1e-4


def test_very_negative_sinks_are_plain_attention_and_large_ones_take_the_mass(rng):
    qs, ks, vs = _shapes()
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    plain, plain_lse = attention(q, k, v, causal=True, return_lse=True)
    low = np.full(HQ, -1e4, np.float32)
    out, lse = attention(q, k, v, causal=True, sinks=low, return_lse=True)
    assert rel_err(out, plain) <= F32_TOL and np.abs(lse - plain_lse).max() <= 1e-5
    # A sink far above every score holds nearly all the mass: the output is the
    # plain one times exp(lse_keys - sink), about 1e-25, still a normal f32.
    high = np.full(HQ, 60.0, np.float32)
    out, lse = attention(q, k, v, causal=True, sinks=high, return_lse=True)
    want, want_lse = sinks_ref(q, k, v, high, causal=True)
    assert 0 < np.abs(out).max() < 1e-20
    assert rel_err(out, want) <= F32_TOL
    assert np.abs(lse - want_lse).max() <= 1e-4


def test_float16(rng):
    qs, ks, vs = _shapes()
    q, k, v = (rand(rng, s, np.float16) for s in (qs, ks, vs))
    for sinks in (rand_sinks(rng), rand_sinks(rng, dtype=np.float16)):
        out, lse = attention(q, k, v, sinks=sinks, causal=True, align="bottom_right",
                             return_lse=True)
        assert out.dtype == np.float16
        want, want_lse = sinks_ref(q, k, v, sinks, causal=True, align="bottom_right")
        # f32 accumulation; the error is that of rounding the result to f16.
        assert rel_err(out.astype(np.float64), want) <= 2e-3, sinks.dtype
        assert np.abs(lse - want_lse).max() <= 1e-4, sinks.dtype


@pytest.mark.parametrize("pipeline", ["tiled", "reference"])
def test_torch_cpu_bfloat16(rng, pipeline):
    torch = pytest.importorskip("torch")
    qs, ks, vs = _shapes()
    q, k, v = (torch.from_numpy(rand(rng, s)).to(torch.bfloat16) for s in (qs, ks, vs))
    for sinks in (torch.from_numpy(rand_sinks(rng)),
                  torch.from_numpy(rand_sinks(rng)).to(torch.bfloat16)):
        out, lse = attention(q, k, v, sinks=sinks, window=11, return_lse=True,
                             **PIPELINES[pipeline])
        assert out.dtype == torch.bfloat16 and isinstance(lse, torch.Tensor)
        want, want_lse = sinks_ref(*(x.float().numpy() for x in (q, k, v)),
                                   sinks.float().numpy(), window=11)
        # f32 accumulation; the error is that of rounding the result to bf16.
        assert rel_err(out.float().numpy(), want) <= 1e-2, sinks.dtype
        assert np.abs(lse.numpy() - want_lse).max() <= 1e-4, sinks.dtype


def test_torch_cpu_float32_and_out(rng):
    torch = pytest.importorskip("torch")
    qs, ks, vs = _shapes()
    q, k, v = (torch.from_numpy(rand(rng, s)) for s in (qs, ks, vs))
    sinks = torch.from_numpy(rand_sinks(rng))
    out = torch.full(qs[:-1] + (DV,), float("nan"))
    res = attention(q, k, v, sinks=sinks, causal=True, out=out)
    assert res is out
    want, _ = sinks_ref(q.numpy(), k.numpy(), v.numpy(), sinks.numpy(), causal=True)
    assert rel_err(out.numpy(), want) <= F32_TOL


def test_numpy_out(rng):
    qs, ks, vs = _shapes()
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    sinks = rand_sinks(rng)
    out = np.full(qs[:-1] + (DV,), np.nan, np.float32)
    assert attention(q, k, v, sinks=sinks, out=out) is out
    assert rel_err(out, sinks_ref(q, k, v, sinks)[0]) <= F32_TOL


def test_one_batch_dim(rng):
    # q [Hq, Lq, D]: the only batch dim is the heads.
    q, k, v = rand(rng, (HQ, LQ, D)), rand(rng, (HKV, LK, D)), rand(rng, (HKV, LK, DV))
    sinks = rand_sinks(rng)
    out = attention(q, k, v, sinks=sinks, causal=True, align="bottom_right")
    want, _ = sinks_ref(q, k, v, sinks, causal=True, align="bottom_right")
    assert rel_err(out, want) <= F32_TOL


def test_score_modifications(rng):
    qs, ks, vs = _shapes()
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    sinks = rand_sinks(rng)
    bias = rand(rng, (HQ, 1, LK))
    slopes = rng.uniform(0.01, 0.3, HQ).astype(np.float32)
    cap = 4.0
    out, lse = attention(q, k, v, sinks=sinks, bias=bias, softcap=cap, alibi_slopes=slopes,
                         causal=True, align="bottom_right", return_lse=True, block_q=16,
                         block_kv=8)

    def mod(s, i, j):
        s = cap * np.tanh(s / cap) + bias.astype(np.float64)
        return s - slopes.astype(np.float64)[:, None, None] * np.abs(i + LK - LQ - j)

    want, want_lse = sinks_ref(q, k, v, sinks, causal=True, align="bottom_right",
                               score_mod=mod)
    assert rel_err(out, want) <= F32_TOL
    assert np.abs(lse - want_lse).max() <= 1e-4


def test_score_mod_and_mask_mod_functions(rng):
    qs, ks, vs = _shapes()
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    sinks = rand_sinks(rng)
    scale_q = rng.uniform(0.5, 1.5, (HQ, LQ)).astype(np.float32)

    def temperature(score, b, h, i, j, t):
        return score * t[h, i]

    out = attention(q, k, v, sinks=sinks, score_mod=temperature, score_mod_args=(scale_q,))
    want, _ = sinks_ref(q, k, v, sinks,
                        score_mod=lambda s, i, j: s * scale_q.astype(np.float64)[:, :, None])
    assert rel_err(out, want) <= F32_TOL
    # A mask_mod that is no structured mask (document ids from the closure): rows of
    # a document without keys get only the sink.
    doc_q = np.sort(rng.integers(0, 4, LQ)).astype(np.int32)
    doc_k = np.sort(rng.integers(1, 4, LK)).astype(np.int32)

    def same_document(b, h, i, j):
        return doc_q[i] == doc_k[j]

    out, lse = attention(q, k, v, sinks=sinks, mask_mod=same_document, return_lse=True)
    visible = doc_q[:, None] == doc_k[None, :]
    want, want_lse = sinks_ref(q, k, v, sinks, visible=visible)
    assert rel_err(out, want) <= F32_TOL
    assert np.abs(lse - want_lse).max() <= 1e-4
    # A mask_mod proved causal: the structured mask, sinks kept.
    out = attention(q, k, v, sinks=sinks, mask_mod=lambda b, h, i, j: j <= i)
    assert rel_err(out, sinks_ref(q, k, v, sinks, causal=True)[0]) <= F32_TOL


def test_dynamic_lengths_share_one_kernel(rng, monkeypatch, tmp_path):
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path))
    compiles = []
    orig = am._compile_to_library
    monkeypatch.setattr(am, "_compile_to_library",
                        lambda *a, **kw: (compiles.append(a[0]), orig(*a, **kw))[1])
    sinks = rand_sinks(rng)
    for b, lq, lk in ((3, 10, 7), (1, 33, 50), (2, 1, 1)):
        q, k, v = rand(rng, (b, HQ, lq, D)), rand(rng, (b, HKV, lk, D)), \
            rand(rng, (b, HKV, lk, DV))
        out, lse = attention(q, k, v, sinks=sinks, causal=True, align="bottom_right",
                             dynamic=True, return_lse=True)
        want, want_lse = sinks_ref(q, k, v, sinks, causal=True, align="bottom_right")
        assert rel_err(out, want) <= F32_TOL, (b, lq, lk)
        assert np.abs(lse - want_lse).max() <= 1e-4, (b, lq, lk)
    assert len(compiles) == 1 and "sinks(" in compiles[0] and "?x4x?x24" in compiles[0]


def test_with_and_without_sinks_are_different_kernels(rng):
    # attention()'s fast path keys kernels by the arguments: a call with sinks after
    # one without (same q, k, v) must not reuse the kernel without them, nor one
    # with float32 sinks the kernel for float16 ones.
    qs, ks, vs = _shapes()
    q, k, v = (rand(rng, s, np.float16) for s in (qs, ks, vs))
    sinks = rand_sinks(rng)
    plain = attention(q, k, v, causal=True)
    with_f32 = attention(q, k, v, causal=True, sinks=sinks)
    with_f16 = attention(q, k, v, causal=True, sinks=sinks.astype(np.float16))
    again = attention(q, k, v, causal=True)
    want, _ = sinks_ref(q, k, v, sinks, causal=True)
    want16, _ = sinks_ref(q, k, v, sinks.astype(np.float16), causal=True)
    assert rel_err(with_f32.astype(np.float64), want) <= 2e-3
    assert rel_err(with_f16.astype(np.float64), want16) <= 2e-3
    assert rel_err(plain.astype(np.float64), want) > 0.05
    np.testing.assert_array_equal(plain, again)


def test_stays_out_of_the_torch_operator(rng, monkeypatch):
    # While torch captures a graph, attention() calls torch.ops.flash_mlir.attention,
    # whose schema has no sinks: a call with sinks must keep its own path.
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(am, "_capturing", lambda q: True)
    qs, ks, vs = _shapes()
    q, k, v = (torch.from_numpy(rand(rng, s)) for s in (qs, ks, vs))
    sinks = torch.from_numpy(rand_sinks(rng))
    out = attention(q, k, v, sinks=sinks, causal=True)
    want, _ = sinks_ref(q.numpy(), k.numpy(), v.numpy(), sinks.numpy(), causal=True)
    assert rel_err(out.numpy(), want) <= F32_TOL


def test_ir_puts_the_sinks_last():
    ir = flash_mlir.attention_ir((2, 4, 37, 24), (2, 2, 53, 24), (2, 2, 53, 20), "bf16",
                                 causal=True, lse=True, bias=((37, 53), "f32"),
                                 sinks=((4,), "f32"))
    signature = ir.split(" attributes", 1)[0]
    assert signature.endswith("%bias: memref<37x53xf32>, %sinks: memref<4xf32>)")
    assert "captures(%bias_t : tensor<37x53xf32>) sinks(%sinks_t : tensor<4xf32>) scale(" in ir
    text = flash_mlir.compile(ir, pipeline=None)  # the verifier takes it
    assert "sinks(" in text
    ir = flash_mlir.attention_ir((3, 37, 24), (1, 53, 24), (1, 53, 20), "f16",
                                 sinks=((3,), "float16"), dynamic=True)
    assert "%sinks: memref<3xf16>" in ir
    flash_mlir.compile(ir, pipeline=None)


def test_prebuild_fills_the_cache_attention_reads(rng, monkeypatch, tmp_path):
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path))
    qs, ks, vs = _shapes()
    path = flash_mlir.prebuild(qs, ks, vs, "float32", device="cpu", causal=True,
                               sinks=((HQ,), "float32"), return_lse=True)
    assert os.path.dirname(path) == str(tmp_path)
    monkeypatch.setattr(am, "_compile_to_library",
                        lambda *a, **kw: pytest.fail("compiled what prebuild built"))
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    sinks = rand_sinks(rng)
    out, lse = attention(q, k, v, sinks=sinks, causal=True, return_lse=True)
    want, want_lse = sinks_ref(q, k, v, sinks, causal=True)
    assert rel_err(out, want) <= F32_TOL and np.abs(lse - want_lse).max() <= 1e-4


# ---- torch autograd ----------------------------------------------------------------------

def _torch_ref(q, k, v, sinks, w, causal=False, window=None, align="top_left", bias=None):
    """float64 autograd of the definition: (out, lse, [dq, dk, dv, dsinks, dbias])."""
    import torch
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v, sinks)]
    qq, kk, vv, ss = leaves
    g = q.shape[-3] // k.shape[-3]
    kk, vv = kk.repeat_interleave(g, dim=-3), vv.repeat_interleave(g, dim=-3)
    s = qq @ kk.transpose(-1, -2) / q.shape[-1] ** 0.5
    if bias is not None:
        bb = bias.detach().double().requires_grad_()
        leaves.append(bb)
        s = s + bb
    lq, lk = s.shape[-2:]
    ok = torch.from_numpy(_visible(lq, lk, causal, window, align))
    s = s.masked_fill(~ok, float("-inf"))
    col = ss.reshape(-1, 1, 1).expand(s.shape[:-1] + (1,))
    t = torch.cat([s, col], -1)
    o = torch.softmax(t, -1)[..., :-1] @ vv
    lse = torch.logsumexp(t, -1)
    (o * w.double()).sum().backward()
    return o.detach(), lse.detach(), [x.grad for x in leaves]


AUTOGRAD_CASES = [
    # name, kwargs, shapes, dtype, sinks dtype, tolerance
    ("gqa-causal-bottom-right-dead-rows", dict(causal=True, align="bottom_right"),
     _shapes(lq=LK, lk=LQ), "float32", "float32", 1e-5),
    ("window-top-left", dict(window=9), _shapes(), "float32", "float32", 1e-5),
    ("plain-mqa", {}, _shapes(hkv=1), "float32", "float32", 1e-5),
    ("bf16-causal", dict(causal=True), _shapes(), "bfloat16", "float32", 2e-2),
    ("bf16-sinks-bf16", dict(window=20, align="bottom_right"), _shapes(), "bfloat16",
     "bfloat16", 2e-2),
]


@pytest.mark.parametrize("name,kw,shapes,dtype,sdtype,tol", AUTOGRAD_CASES,
                         ids=[c[0] for c in AUTOGRAD_CASES])
def test_torch_autograd_gradients(rng, name, kw, shapes, dtype, sdtype, tol):
    torch = pytest.importorskip("torch")
    dt, sdt = getattr(torch, dtype), getattr(torch, sdtype)
    q, k, v = (torch.from_numpy(rand(rng, s)).to(dt).requires_grad_() for s in shapes)
    sinks = torch.from_numpy(rand_sinks(rng)).to(sdt).requires_grad_()
    w = torch.from_numpy(rand(rng, shapes[0][:-1] + shapes[2][-1:])).to(dt)
    out, lse = attention(q, k, v, sinks=sinks, return_lse=True, **kw)
    assert out.requires_grad and out.dtype == dt
    (out * w).sum().backward()
    want_o, want_lse, want = _torch_ref(q, k, v, sinks, w, **kw)
    assert rel_err(out.detach().double().numpy(), want_o.numpy()) <= tol
    assert np.abs(lse.detach().double().numpy() - want_lse.numpy()).max() <= 1e-4
    for n, x, g in zip(("dq", "dk", "dv", "dsinks"), (q, k, v, sinks), want):
        assert x.grad is not None and x.grad.dtype == x.dtype and x.grad.shape == x.shape, n
        assert rel_err(x.grad.double().numpy(), g.numpy()) <= tol, n


def test_autograd_only_the_sinks_or_no_sinks_gradient(rng):
    torch = pytest.importorskip("torch")
    qs, ks, vs = _shapes()
    q, k, v = (torch.from_numpy(rand(rng, s)) for s in (qs, ks, vs))
    w = torch.from_numpy(rand(rng, qs[:-1] + (DV,)))
    sinks = torch.from_numpy(rand_sinks(rng)).requires_grad_()
    out = attention(q, k, v, sinks=sinks, causal=True)
    assert out.requires_grad
    (out * w).sum().backward()
    _, _, want = _torch_ref(q, k, v, sinks, w, causal=True)
    assert rel_err(sinks.grad.numpy(), want[3].numpy()) <= F32_TOL
    # Inputs that require grad with sinks that do not: dq, dk, dv, no sinks' gradient.
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    fixed = sinks.detach().clone()
    out = attention(qg, kg, vg, sinks=fixed, causal=True)
    (out * w).sum().backward()
    assert fixed.grad is None
    for x, g in zip((qg, kg, vg), want):
        assert rel_err(x.grad.numpy(), g.numpy()) <= F32_TOL


def test_autograd_with_a_bias(rng):
    torch = pytest.importorskip("torch")
    qs, ks, vs = _shapes()
    q, k, v = (torch.from_numpy(rand(rng, s)).requires_grad_() for s in (qs, ks, vs))
    sinks = torch.from_numpy(rand_sinks(rng)).requires_grad_()
    bias = torch.from_numpy(rand(rng, (LQ, LK))).requires_grad_()
    w = torch.from_numpy(rand(rng, qs[:-1] + (DV,)))
    out = attention(q, k, v, sinks=sinks, bias=bias, causal=True, align="bottom_right")
    (out * w).sum().backward()
    want_o, _, want = _torch_ref(q, k, v, sinks, w, causal=True, align="bottom_right",
                                 bias=bias)
    assert rel_err(out.detach().numpy(), want_o.numpy()) <= F32_TOL
    for n, x, g in zip(("dq", "dk", "dv", "dsinks", "dbias"), (q, k, v, sinks, bias), want):
        assert rel_err(x.grad.numpy(), g.numpy()) <= F32_TOL, n


# ---- errors ------------------------------------------------------------------------------

def test_argument_errors(rng):
    qs, ks, vs = _shapes()
    q, k, v = rand(rng, qs), rand(rng, ks), rand(rng, vs)
    good = rand_sinks(rng)
    with pytest.raises(ValueError, match=r"sinks must have shape \[Hq\] = \(4,\)"):
        attention(q, k, v, sinks=rand_sinks(rng, HQ + 1))
    with pytest.raises(ValueError, match="sinks must have shape"):
        attention(q, k, v, sinks=good.reshape(1, HQ))
    with pytest.raises(ValueError, match="sinks must have shape"):
        attention(q, k, v, sinks=np.ones((), np.float32))
    with pytest.raises(ValueError, match="sinks are one logit per query head"):
        attention(q[0, 0], k[0, 0], v[0, 0], sinks=good)
    with pytest.raises(TypeError, match="sinks must be float32 or q's dtype"):
        attention(q, k, v, sinks=good.astype(np.float64))
    with pytest.raises(TypeError, match="sinks must be float32 or q's dtype"):
        attention(q, k, v, sinks=good.astype(np.float16))
    with pytest.raises(TypeError, match="sinks must be float32 or q's dtype"):
        attention(q, k, v, sinks=np.arange(HQ, dtype=np.int32))
    with pytest.raises(TypeError, match="sinks must be a NumPy array or a torch tensor"):
        attention(q, k, v, sinks=list(good))
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="sinks must be the same kind of array as q"):
        attention(q, k, v, sinks=torch.from_numpy(good))
    with pytest.raises(TypeError, match="sinks must be the same kind of array as q"):
        attention(q, k, v, sinks=torch.from_numpy(good).requires_grad_())
    with pytest.raises(TypeError, match="sinks must be the same kind of array as q"):
        attention(*(torch.from_numpy(x) for x in (q, k, v)), sinks=good)
    with pytest.raises(TypeError, match="sinks must be the same kind of array as q"):
        attention(torch.from_numpy(q).requires_grad_(), torch.from_numpy(k),
                  torch.from_numpy(v), sinks=good)
    # Under autograd the forward checks them just the same.
    with pytest.raises(ValueError, match="sinks must have shape"):
        attention(torch.from_numpy(q).requires_grad_(), torch.from_numpy(k),
                  torch.from_numpy(v), sinks=torch.from_numpy(rand_sinks(rng, 2)))


def test_paged_sinks_equal_contiguous(rng):
    """A paged cache whose pages hold each sequence in order is the contiguous
    attention (bottom-right), sinks included."""
    sinks = rand_sinks(rng)
    b, lq, lk = 2, 3, 48
    q = rand(rng, (b, HQ, lq, D))
    k, v = rand(rng, (b, HKV, lk, D)), rand(rng, (b, HKV, lk, DV))
    # Pages of 16 keys: sequence s owns pages 3s, 3s + 1, 3s + 2.
    pool_k = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).reshape(b * 3, 16, HKV, D)
    pool_v = np.ascontiguousarray(v.transpose(0, 2, 1, 3)).reshape(b * 3, 16, HKV, DV)
    table = np.arange(b * 3, dtype=np.int32).reshape(b, 3)
    lens = np.full(b, lk, np.int32)
    paged, plse = attention(q, pool_k, pool_v, block_table=table, seq_lens=lens, sinks=sinks,
                            causal=True, return_lse=True)
    want, wlse = attention(q, k, v, sinks=sinks, causal=True, align="bottom_right",
                           return_lse=True)
    np.testing.assert_allclose(paged, want, atol=1e-6, rtol=1e-5)
    np.testing.assert_allclose(plse, wlse, atol=1e-6, rtol=1e-6)
    ref, ref_lse = sinks_ref(q, k, v, sinks, causal=True, align="bottom_right")
    np.testing.assert_allclose(paged, ref, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(plse, ref_lse, atol=2e-5, rtol=1e-5)


# Packed varlen batches: (query lengths, key lengths, mask keywords). The second
# holds a sequence with no key (its rows give 0 and lse = the sink) and one with
# no query.
VARLEN_CASES = {
    "causal-bottom-right": ([5, 17, 9], [21, 17, 40], {"causal": True, "align": "bottom_right"}),
    "window-empty-seqs": ([6, 0, 11, 3], [0, 7, 30, 19], {"window": 8, "align": "bottom_right"}),
    "plain-lq-gt-lk": ([23, 4], [9, 31], {}),
}


@pytest.mark.parametrize("name", list(VARLEN_CASES))
def test_varlen_sinks_match_reference(rng, name):
    """A packed batch with sinks: each sequence is its own attention with the
    sinks of its heads, against float64 per sequence (out and lse)."""
    lqs, lks, kw = VARLEN_CASES[name]
    cu_q = np.concatenate([[0], np.cumsum(lqs)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lks)]).astype(np.int32)
    q = rand(rng, (cu_q[-1], HQ, D))
    k, v = rand(rng, (cu_k[-1], HKV, D)), rand(rng, (cu_k[-1], HKV, DV))
    sinks = rand_sinks(rng)
    out, lse = attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, sinks=sinks,
                         return_lse=True, **kw)
    assert out.shape == (cu_q[-1], HQ, DV) and lse.shape == (HQ, cu_q[-1])
    for b in range(len(lqs)):
        q0, q1, k0, k1 = cu_q[b], cu_q[b + 1], cu_k[b], cu_k[b + 1]
        if q1 == q0:
            continue
        heads = lambda x: x.transpose(1, 0, 2)
        ref, ref_lse = sinks_ref(heads(q[q0:q1]), heads(k[k0:k1]), heads(v[k0:k1]), sinks, **kw)
        np.testing.assert_allclose(heads(out[q0:q1]), ref, atol=2e-5, rtol=1e-4)
        np.testing.assert_allclose(lse[:, q0:q1], ref_lse, atol=2e-5, rtol=1e-5)
        if k1 == k0:
            np.testing.assert_array_equal(out[q0:q1], 0)
            np.testing.assert_allclose(lse[:, q0:q1], np.repeat(sinks[:, None], q1 - q0, 1),
                                       rtol=1e-6)


def test_varlen_sinks_errors(rng):
    q, k, v = rand(rng, (30, HQ, D)), rand(rng, (40, HKV, D)), rand(rng, (40, HKV, DV))
    cu_q, cu_k = np.array([0, 12, 30], np.int32), np.array([0, 25, 40], np.int32)
    # One per query head: q.shape[1], not the tokens.
    with pytest.raises(ValueError, match=r"sinks must have shape \[Hq\] = \(4,\) \(q's heads, q.shape\[1\]\)"):
        attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, sinks=rand_sinks(rng, hq=30))
    with pytest.raises(ValueError, match="sinks must have shape"):
        flash_mlir.prebuild((30, HQ, D), (40, HKV, D), (40, HKV, DV), "f32", device="cpu",
                            cu_seqlens=(3,), sinks=((30,), "f32"))


def test_ir_and_prebuild_errors():
    qs, ks, vs = _shapes()
    with pytest.raises(ValueError, match="sinks must have shape"):
        flash_mlir.attention_ir(qs, ks, vs, "f32", sinks=((HQ, 1), "f32"))
    with pytest.raises(TypeError, match="sinks must be float32 or q's dtype"):
        flash_mlir.attention_ir(qs, ks, vs, "bf16", sinks=((HQ,), "f16"))
    with pytest.raises(ValueError, match="sinks are one logit per query head"):
        flash_mlir.attention_ir((LQ, D), (LK, D), (LK, DV), "f32", sinks=((1,), "f32"))
    with pytest.raises(ValueError, match="sinks must have shape"):
        flash_mlir.prebuild((2, HQ, 1, D), (6, 16, HKV, D), (6, 16, HKV, DV), "f32",
                            device="cpu", block_table=(2, 3), sinks=((HKV,), "f32"))
    with pytest.raises(ValueError, match="sinks must have shape"):
        flash_mlir.prebuild(qs, ks, vs, "f32", device="cpu", sinks=((HQ + 1,), "float32"))
