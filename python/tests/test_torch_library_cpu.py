"""torch.ops.flash_mlir.attention: the operator torch's graph capture keeps as one node.
Forward, lse and autograd equal attention()'s (the same kernels), its fake (meta) kernel
gives shapes and dtypes without running, and where torch has torch.compile / torch.export
(torch 2) attention() inside a compiled function is that one node."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import flash_mlir  # noqa: E402
from flash_mlir import torch_library  # noqa: E402

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(1 << 31)))


def _inputs(gen, grad=False, device="cpu", dtype=torch.float32):
    shapes = ((2, 4, 19, 16), (2, 2, 27, 16), (2, 2, 27, 12))
    return [torch.randn(*s, generator=gen).to(device, dtype).requires_grad_(grad)
            for s in shapes]


def _ref(q, k, v, causal, window, align):
    q, k, v = (x.detach().double() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    lq, lk = s.shape[-2:]
    i = torch.arange(lq)[:, None] + (lk - lq if align == "bottom_right" else 0)
    j = torch.arange(lk)[None, :]
    vis = torch.ones(lq, lk, dtype=torch.bool)
    if causal or window:
        vis = j <= i
    if window:
        vis &= j > i - window
    s = s.masked_fill(~vis, float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


@pytest.mark.parametrize("causal, window, align, options", [
    (True, None, "bottom_right", {}),
    (False, 7, "top_left", {"block_q": 8}),
    (False, None, "top_left", {}),
])
def test_operator_matches_attention_and_float64(gen, causal, window, align, options):
    torch_library.register()
    q, k, v = _inputs(gen, grad=True)
    o, lse = torch.ops.flash_mlir.attention(q, k, v, None, causal, window, align,
                                            torch_library.options_string(options))
    o2, lse2 = flash_mlir.attention(q, k, v, causal=causal, window=window, align=align,
                                    return_lse=True, **options)
    assert torch.equal(o, o2) and torch.equal(lse, lse2)
    ref, ref_lse = _ref(q, k, v, causal, window, align)
    assert (o.double() - ref).abs().max().item() < 1e-5
    assert (lse.double() - ref_lse).abs().max().item() < 1e-5
    do = torch.randn(o.shape, generator=gen)
    got = torch.autograd.grad(o, (q, k, v), do)
    want = torch.autograd.grad(o2, (q, k, v), do)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_fake_kernel_gives_shapes_without_running():
    torch_library.register()
    q = torch.empty(3, 8, 33, 64, device="meta", dtype=torch.float16)
    k = torch.empty(3, 2, 70, 64, device="meta", dtype=torch.float16)
    v = torch.empty(3, 2, 70, 40, device="meta", dtype=torch.float16)
    o, lse = torch.ops.flash_mlir.attention(q, k, v, 0.1, True, None, "top_left", "")
    assert o.shape == (3, 8, 33, 40) and o.dtype == torch.float16 and o.device.type == "meta"
    assert lse.shape == (3, 8, 33) and lse.dtype == torch.float32


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile needs torch 2")
def test_torch_compile_keeps_one_node(gen):
    q, k, v = _inputs(gen)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(q, k, v):
        return flash_mlir.attention(q, k, v, causal=True, align="bottom_right") * 2.0

    got = torch.compile(f, backend=backend, fullgraph=True)(q, k, v)
    assert torch.equal(got, f(q, k, v))
    targets = [str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    assert any("flash_mlir.attention" in t for t in targets), targets


@pytest.mark.skipif(not hasattr(torch, "export"), reason="torch.export needs torch 2")
def test_torch_export(gen):
    q, k, v = _inputs(gen)

    class M(torch.nn.Module):
        def forward(self, q, k, v):
            return flash_mlir.attention(q, k, v, window=5)

    ep = torch.export.export(M(), (q, k, v))
    assert "flash_mlir.attention" in str(ep.graph)
    assert torch.equal(ep.module()(q, k, v), M()(q, k, v))
