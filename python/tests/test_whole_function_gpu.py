"""Whole functions on tensors through flash-gpu-pipeline, run on the GPU.

test/Integration/GPU/Inputs/whole-function.mlir holds functions as a frontend
writes them: tensors at the boundary, elementwise math and a transpose before
an attention spelled matmul -> softmax -> matmul, elementwise math and a row
reduction after it. The pipeline compiles each into host code that launches
the attention kernel and simple kernels for the rest, all on the caller's
stream. Checked against float64 on fresh random inputs with the 2x
SDPA-error rule. The library is prebuilt (this runs where there is no
LLVM): FLASH_GPU_ARTIFACTS names its directory, the build's
gpu-artifacts/runtime by default. Skipped without torch, a CUDA device or
the library.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from flash_mlir.gpu import KernelLibrary  # noqa: E402

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

ART = os.environ.get("FLASH_GPU_ARTIFACTS",
                     os.path.join(HERE, "..", "..", "build", "gpu-artifacts", "runtime"))
LIB = os.path.join(ART, "libwhole_function.so")
if not os.path.exists(LIB):
    pytest.skip(f"no {LIB}", allow_module_level=True)

_lib = []


def lib():
    if not _lib:
        _lib.append(KernelLibrary(LIB))
    return _lib[0]


def randn(shape, gen):
    return torch.randn(shape, device="cuda", generator=gen).to(torch.bfloat16)


def attention64(q, k, v, scale, causal=False):
    s = torch.einsum("bid,bjd->bij", q, k) * scale
    if causal:
        i = torch.arange(q.shape[1], device=q.device)[:, None]
        j = torch.arange(k.shape[1], device=q.device)[None, :]
        s = s.masked_fill(j > i, float("-inf"))
    return torch.einsum("bij,bjd->bid", torch.softmax(s, -1), v)


def sdpa_error(q, k, v, scale, want, causal=False):
    """What torch's own bf16 attention misses the float64 result by."""
    got = torch.nn.functional.scaled_dot_product_attention(
        q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), scale=scale,
        is_causal=causal).squeeze(0)
    return (got.double() - want).abs().max().item()


def test_elementwise_before_and_after_the_attention():
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    q, k, v = (randn((2, 4, L, 64), gen) for L in (100, 70, 70))
    out = torch.empty((2, 4, 100, 64), device="cuda", dtype=torch.bfloat16)
    sums = torch.empty((2, 4, 100), device="cuda", dtype=torch.float32)
    out.fill_(float("nan"))
    sums.fill_(float("nan"))
    inputs = [x.clone() for x in (q, k, v)]
    lib()("around", q, k, v, out, sums, pass_stream=True)
    torch.cuda.synchronize()
    # The kernels round sin(q) to bf16 before the attention, as the
    # function says.
    qs = torch.sin(q.float()).to(torch.bfloat16)
    o64 = attention64(qs.double().flatten(0, 1), k.double().flatten(0, 1),
                      v.double().flatten(0, 1), 0.125).view(2, 4, 100, 64)
    want = torch.tanh(2 * o64)
    tol = 2 * sdpa_error(qs.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), 0.125,
                         o64.flatten(0, 1))
    # tanh(2x) has slope <= 2, and the output is rounded to bf16.
    assert (out.double() - want).abs().max().item() <= 2 * tol + 2 ** -8
    assert (sums.double() - o64.sum(-1)).abs().max().item() <= 64 * tol
    assert all(torch.equal(a, b) for a, b in zip((q, k, v), inputs))


def test_causal_select_written_into_the_callers_buffer_on_a_side_stream():
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    q, k = randn((6, 90, 32), gen), randn((6, 130, 32), gen)
    v = randn((6, 130, 40), gen)
    out = torch.full((6, 90, 40), float("nan"), device="cuda", dtype=torch.bfloat16)
    scale = 0.17677669
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        lib()("causal_dv40", q, k, v, out, pass_stream=True)
    s.synchronize()
    # The mask is j <= i with the queries at the top left.
    want = attention64(q.double(), k.double(), v.double(), scale, causal=True)
    tol = 2 * sdpa_error(q, k, v, scale, want, causal=True) + 2 ** -8
    assert (out.double() - want).abs().max().item() <= tol


def test_back_to_back_calls_stay_ordered_on_the_stream():
    # Buffers of one call are freed in stream order while the next call's
    # kernels are queued: results must not depend on timing.
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    outs, refs = [], []
    for _ in range(4):
        q, k, v = (randn((2, 4, L, 64), gen) for L in (100, 70, 70))
        out = torch.empty((2, 4, 100, 64), device="cuda", dtype=torch.bfloat16)
        sums = torch.empty((2, 4, 100), device="cuda", dtype=torch.float32)
        torch.cuda._sleep(1_000_000)
        lib()("around", q, k, v, out, sums, pass_stream=True)
        outs.append((out, sums))
        refs.append((q, k, v))
    torch.cuda.synchronize()
    for (out, sums), (q, k, v) in zip(outs, refs):
        again = torch.empty_like(out)
        again_sums = torch.empty_like(sums)
        lib()("around", q, k, v, again, again_sums, pass_stream=True)
        torch.cuda.synchronize()
        assert torch.equal(out, again) and torch.equal(sums, again_sums)


def test_tosa_grouped_query_attention():
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    q = torch.randn((2, 6, 10, 16), device="cuda", generator=gen)
    k = torch.randn((2, 2, 12, 16), device="cuda", generator=gen)
    v = torch.randn((2, 2, 12, 8), device="cuda", generator=gen)
    out = torch.full((2, 6, 10, 8), float("nan"), device="cuda")
    lib()("tosa_gqa", q, k, v, out, pass_stream=True)
    torch.cuda.synchronize()
    # Query head h of a batch reads KV head h // 3 (the zeros broadcast).
    k6, v6 = k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1)
    o64 = attention64(q.double().flatten(0, 1), k6.double().flatten(0, 1),
                      v6.double().flatten(0, 1), 0.25).view(2, 6, 10, 8)
    want = torch.tanh(o64)
    tol = max(2 * sdpa_error(q.flatten(0, 1), k6.flatten(0, 1), v6.flatten(0, 1), 0.25,
                             o64.flatten(0, 1)), 1e-5)
    assert (out.double() - want).abs().max().item() <= tol


@pytest.mark.parametrize("name,shape", [
    # (B, Hq, Hkv, Lq): 4 rows over 8 K/V heads merge in the kernel's last
    # CTA, 8 rows over 4 in the combine kernel (test/Conversion's
    # flash-gpu-pipeline-whole-function.mlir checks which).
    ("decode_f32_fused", (4, 8, 2, 1)),
    ("decode_f32_combine", (2, 8, 2, 2)),
])
def test_decode_with_an_f32_output(name, shape):
    b, hq, hkv, lq = shape
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    q = randn((b, hq, lq, 64), gen)
    k, v = randn((b, hkv, 3000, 64), gen), randn((b, hkv, 3000, 48), gen)
    out = torch.full((b, hq, lq, 48), float("nan"), device="cuda", dtype=torch.float32)
    lib()(name, q, k, v, out, pass_stream=True)
    torch.cuda.synchronize()
    g = hq // hkv
    k6, v6 = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    want = attention64(q.double().flatten(0, 1), k6.double().flatten(0, 1),
                       v6.double().flatten(0, 1), 0.125).view(b, hq, lq, 48)
    # An f32 output keeps what a bf16 one would round away: the bound is the
    # error of torch's bf16 attention, whose output is rounded to bf16.
    tol = 2 * sdpa_error(q.flatten(0, 1), k6.flatten(0, 1), v6.flatten(0, 1), 0.125,
                         want.flatten(0, 1))
    err = (out.double() - want).abs().max().item()
    assert err <= tol, (err, tol)
    # Finer than bf16's rounding of the output: the f32 store is not a bf16
    # value widened.
    assert not torch.equal(out, out.to(torch.bfloat16).float())
