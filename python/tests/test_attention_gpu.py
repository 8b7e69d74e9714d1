"""flash_mlir on the GPU path. Code generation (PTX, cubin) needs only the
CUDA toolkit and runs everywhere flash-gpu-pipeline is built; execution needs
torch with a CUDA device and is checked against torch SDPA with
FlashAttention's rule: error vs a float64 reference at most 2x SDPA's own."""
import os
import shutil

import pytest

import flash_mlir

pytestmark = pytest.mark.skipif(not flash_mlir.is_registered("flash-gpu-pipeline"),
                                reason="flash-gpu-pipeline is not in this build")

SHAPES = ((1, 2, 200, 64), (1, 2, 200, 64), (1, 2, 200, 64))


@pytest.mark.skipif(not os.path.exists(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                                    "bin", "ptxas")) and not shutil.which("ptxas"),
                    reason="no ptxas (CUDA toolkit)")
def test_ptx_and_cubin_without_a_device():
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    ir = flash_mlir.attention_ir(*SHAPES, "bf16", causal=True)
    ptx = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa")
    assert ".entry" in ptx and "sm_90a" in ptx
    cubin = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="cubin", format="bin")
    assert cubin[:4] == b"\x7fELF"


def test_kernel_library_builds_and_loads_without_a_device():
    """Host code, cubin and the bundled runtime link and load; only the launch
    needs a GPU (the runtime loads the driver lazily)."""
    if not os.path.exists(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                       "bin", "ptxas")):
        pytest.skip("no ptxas (CUDA toolkit)")
    from flash_mlir._attention import AttentionKernel
    if not os.path.exists(os.path.join(os.path.dirname(flash_mlir.library_path()),
                                       "libflash_cuda_runtime.so")):
        pytest.skip("libflash_cuda_runtime.so not built")
    ir = flash_mlir.attention_ir(*SHAPES, "bf16", causal=True, lse=True)
    kernel = AttentionKernel.build(ir, "cuda")
    assert kernel._lib.entry("flash_attention")
    bundled = os.path.join(os.path.dirname(kernel.path), "libflash_cuda_runtime.so")
    assert os.path.exists(bundled)


def _cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (9, 0):
        pytest.skip("flash-gpu-pipeline targets sm_90a")
    return torch


def _errors(torch, out, q, k, v, causal, scale):
    """(max |out - ref|, max |sdpa - ref|) with ref in float64."""
    import torch.nn.functional as F
    group = q.shape[1] // k.shape[1]
    k64 = k.double().repeat_interleave(group, dim=1)
    v64 = v.double().repeat_interleave(group, dim=1)
    ref = F.scaled_dot_product_attention(q.double(), k64, v64, is_causal=causal, scale=scale)
    sdpa = F.scaled_dot_product_attention(q, k.repeat_interleave(group, dim=1),
                                          v.repeat_interleave(group, dim=1),
                                          is_causal=causal, scale=scale)
    return (out.double() - ref).abs().max().item(), (sdpa.double() - ref).abs().max().item()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 8, 8, 1000, 1000, 64), (1, 4, 2, 333, 333, 128)],
                         ids=["mha", "gqa_tail"])
def test_matches_sdpa(dtype, causal, shape):
    torch = _cuda()
    b, hq, hkv, lq, lk, d = shape
    dt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    q = torch.randn(b, hq, lq, d, device="cuda", dtype=dt, generator=g)
    k = torch.randn(b, hkv, lk, d, device="cuda", dtype=dt, generator=g)
    v = torch.randn(b, hkv, lk, d, device="cuda", dtype=dt, generator=g)
    out = torch.full_like(q, float("nan"))
    res = flash_mlir.attention(q, k, v, causal=causal, out=out)
    torch.cuda.synchronize()
    assert res is out and not torch.isnan(out).any()
    err, err_sdpa = _errors(torch, out, q, k, v, causal, None)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


def test_runs_on_torch_current_stream():
    torch = _cuda()
    q = torch.randn(1, 2, 256, 64, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = flash_mlir.attention(q, q, q)
    s.synchronize()
    err, err_sdpa = _errors(torch, out, q, q, q, False, None)
    assert err <= 2 * err_sdpa + 1e-3
