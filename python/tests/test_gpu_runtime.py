"""GPU tests of libflash_cuda_runtime through python/flash_mlir/gpu.py.

Kernel libraries come prebuilt (this runs where there is no LLVM): FLASH_GPU_ARTIFACTS
names their directory (the build's gpu-artifacts/runtime by default). Skipped without
torch, without a CUDA device or without the artifacts.
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from flash_mlir.gpu import FlashRuntimeError, KernelLibrary  # noqa: E402

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

ART = os.environ.get("FLASH_GPU_ARTIFACTS",
                     os.path.join(HERE, "..", "..", "build", "gpu-artifacts", "runtime"))
if not os.path.exists(os.path.join(ART, "libruntime_kernels.so")):
    pytest.skip(f"no kernel libraries in {ART}", allow_module_level=True)

_libs = {}


def lib(name, **kw):
    key = (name, tuple(sorted(kw.items())))
    if key not in _libs:
        _libs[key] = KernelLibrary(os.path.join(ART, f"lib{name}.so"), **kw)
    return _libs[key]


def counters(L):
    return {n: L.counter(n) for n in ("module_load", "stream_create", "stream_sync", "mem_alloc",
                                      "launch", "tensormap_upload", "tensormap_hit",
                                      "tensormap_param")}


def rand(n, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(n, device="cuda", generator=g)


def test_axpy_on_a_side_stream():
    L = lib("runtime_kernels")
    n = 100_003  # not a multiple of the block
    x, y = rand(n, 1), rand(n, 2)
    ref = 1.5 * x.double() + y.double()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        L("axpy", x, y, 1.5)
    s.synchronize()
    assert torch.allclose(y.double(), ref, rtol=1e-6, atol=1e-6)


def test_no_per_call_stream_sync_or_alloc_and_asynchronous():
    L = lib("runtime_kernels")
    x, y = rand(1 << 20, 3), rand(1 << 20, 4)
    L("axpy", x, y, 0.5)
    torch.cuda.synchronize()
    before = counters(L)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time queued ahead of our launches
    start.record()
    for _ in range(50):
        L("axpy", x, y, 0.5)
    end.record()
    # The host got here without waiting for the sleep: nothing synchronized.
    assert not end.query()
    torch.cuda.synchronize()
    after = counters(L)
    assert after["launch"] - before["launch"] == 50
    for k in ("module_load", "stream_create", "stream_sync", "mem_alloc"):
        assert after[k] == before[k], k
    assert start.elapsed_time(end) > 0


def test_cuda_graph_capture_and_replay():
    L = lib("runtime_kernels")
    x, y = rand(4096, 5), torch.zeros(4096, device="cuda")
    L("axpy", x, y, 2.0)  # warm up outside the capture (module load)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        L("axpy", x, y, 2.0)
    y.zero_()
    x.copy_(rand(4096, 6))
    g.replay()
    torch.cuda.synchronize()
    assert torch.allclose(y, 2.0 * x, rtol=1e-6, atol=0)
    g.replay()
    torch.cuda.synchronize()
    assert torch.allclose(y, 4.0 * x, rtol=1e-6, atol=0)


def test_dynamic_shared_memory_above_48k_and_over_the_limit():
    L = lib("runtime_kernels")
    n = 256 * 64
    x, y = rand(n, 7), torch.full((n,), float("nan"), device="cuda")
    L("smem_copy", x, y, ctypes_i32(100 * 1024))
    torch.cuda.synchronize()
    assert torch.equal(y.view(-1, 256), x.view(-1, 256).flip(1))
    with pytest.raises(FlashRuntimeError, match="dynamic shared memory") as e:
        L("smem_copy", x, y, ctypes_i32(300 * 1024))
    assert e.value.status == 5
    L("axpy", x, y, 1.0)  # the runtime and the context are still usable
    torch.cuda.synchronize()


def ctypes_i32(v):
    import ctypes
    return ctypes.c_int32(v)


def test_ptx_module_is_jit_compiled():
    L = lib("runtime_kernels_ptx")
    x, y = rand(1000, 8), rand(1000, 9)
    ref = 3.0 * x + y
    L("axpy", x, y, 3.0)
    torch.cuda.synchronize()
    assert torch.allclose(y, ref, rtol=1e-6, atol=1e-6)


def test_wrong_architecture_is_a_clear_error():
    major, _ = torch.cuda.get_device_capability()
    if major == 8:
        pytest.skip("the sm_80 library is the right one here")
    L = lib("runtime_kernels_sm80")
    x, y = rand(1000, 10), rand(1000, 11)
    with pytest.raises(FlashRuntimeError, match=r"sm_80.*(rebuild|architecture)") as e:
        L("axpy", x, y, 1.0)
    assert e.value.status == 3
    lib("runtime_kernels")("axpy", x, y, 1.0)
    torch.cuda.synchronize()


def test_bad_pointers_are_clear_errors():
    L = lib("runtime_kernels")
    x, y = rand(1000, 12), rand(1000, 13)
    with pytest.raises(FlashRuntimeError, match="CUDA tensor"):
        L("axpy", x.cpu(), y, 1.0)
    with pytest.raises(FlashRuntimeError, match="aligned"):
        L("axpy", x[1:], y[1:], 1.0)
    rt = L.lib
    host = torch.zeros(16)
    assert rt.flashRuntimeCheckPointer(host.data_ptr(), 16, b"q") == 4
    assert b"not device memory" in rt.flashRuntimeGetLastError()
    rt.flashRuntimeClearError()
    assert rt.flashRuntimeCheckPointer(None, 16, b"k") == 4
    assert b"null" in rt.flashRuntimeGetLastError()
    rt.flashRuntimeClearError()
    assert rt.flashRuntimeCheckPointer(x.data_ptr(), 16, b"v") == 0


def grid_f16(shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randint(-16, 17, shape, device="cuda", generator=g) / 16).half()


def test_tma_descriptors_are_cached_and_correct():
    L = lib("tma_qk")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma kernel needs sm_90a")
    q, k = grid_f16((64, 64), 14), grid_f16((64, 64), 15)
    s = torch.full((64, 64), float("nan"), device="cuda")
    before = counters(L)
    L("tma_qk", q, k, s)
    torch.cuda.synchronize()
    assert torch.equal(s, q.float() @ k.float())
    mid = counters(L)
    assert mid["tensormap_upload"] - before["tensormap_upload"] == 2
    s.fill_(float("nan"))
    L("tma_qk", q, k, s)
    torch.cuda.synchronize()
    after = counters(L)
    assert torch.equal(s, q.float() @ k.float())
    assert after["tensormap_upload"] == mid["tensormap_upload"]
    assert after["tensormap_hit"] - mid["tensormap_hit"] == 2
    assert after["mem_alloc"] == mid["mem_alloc"]


def test_tma_descriptor_first_built_inside_a_graph_capture():
    L = lib("tma_qk")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma kernel needs sm_90a")
    L("tma_qk", grid_f16((64, 64), 1), grid_f16((64, 64), 2), torch.empty(64, 64, device="cuda"))
    q, k = grid_f16((64, 64), 16), grid_f16((64, 64), 17)  # new addresses: new maps
    s = torch.full((64, 64), float("nan"), device="cuda")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        L("tma_qk", q, k, s)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(s, q.float() @ k.float())
    s.fill_(float("nan"))
    L("tma_qk", q, k, s)  # eager use of maps so far written only by the graph
    torch.cuda.synchronize()
    assert torch.equal(s, q.float() @ k.float())


def test_tma_descriptors_by_value_never_touch_device_memory():
    # The kernel of tma_qk, lowered by flash-lower-to-nvvm: its maps are
    # grid-constant parameters. Every call, on buffers old or new, passes
    # them in the launch: no upload, no allocation, no synchronization, and
    # a CUDA graph keeps the bytes it captured.
    L = lib("tma_qk_param")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma kernel needs sm_90a")
    before = counters(L)
    for seed in range(3):  # new q, k and s each time: new maps
        q, k = grid_f16((64, 64), 30 + seed), grid_f16((64, 64), 40 + seed)
        s = torch.full((64, 64), float("nan"), device="cuda")
        L("tma_qk", q, k, s)
        torch.cuda.synchronize()
        assert torch.equal(s, q.float() @ k.float())
    after = counters(L)
    assert after["tensormap_param"] - before["tensormap_param"] == 6
    for n in ("tensormap_upload", "tensormap_hit", "mem_alloc", "stream_sync"):
        assert after[n] == before[n], n
    q, k = grid_f16((64, 64), 50), grid_f16((64, 64), 51)
    s = torch.full((64, 64), float("nan"), device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        L("tma_qk", q, k, s)
    q.copy_(grid_f16((64, 64), 52))  # same buffer, new contents
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(s, q.float() @ k.float())


def test_tma_misaligned_base_is_refused_before_launch():
    L = lib("tma_qk", alignment=2)  # let the runtime, not Python, catch it
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma kernel needs sm_90a")
    big = grid_f16((64 * 64 + 4,), 18)
    q = big[4:].view(64, 64)  # 8 bytes past a 16-byte boundary
    k = grid_f16((64, 64), 19)
    s = torch.empty(64, 64, device="cuda")
    before = counters(L)
    with pytest.raises(FlashRuntimeError, match="not 16-byte aligned") as e:
        L("tma_qk", q, k, s)
    assert e.value.status == 4
    assert counters(L)["launch"] == before["launch"]
    torch.cuda.synchronize()
