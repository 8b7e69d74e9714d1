"""flash_mlir on the GPU path.

Code generation (PTX, cubin, the kernel library) needs the compiler and the
CUDA toolkit, no device. Execution needs torch with an sm_90 device and either
the compiler or the kernels in the cache: on a GPU machine without LLVM, fill a
cache folder first where the compiler is,
    python3 python/tests/test_attention_gpu.py --prebuild DIR
and run the tests there with FLASH_MLIR_CACHE_DIR=DIR. Results are checked
against a float64 reference with FlashAttention's rule: the error is at most
twice torch SDPA's own (plus 1e-3)."""
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from reference import attention_ref  # noqa: E402

SHAPES = ((1, 2, 200, 64), (1, 2, 200, 64), (1, 2, 200, 64))


def _has_ptxas():
    return os.path.exists(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                       "bin", "ptxas")) or bool(shutil.which("ptxas"))


def _compiler():
    if not flash_mlir.compiler_available():
        pytest.skip("no compiler here: " + flash_mlir._capi.unavailable_reason())
    if not flash_mlir.is_registered("flash-gpu-pipeline"):
        pytest.skip("flash-gpu-pipeline is not in this build")
    if not _has_ptxas():
        pytest.skip("no ptxas (CUDA toolkit)")
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")


def test_ptx_and_cubin_without_a_device():
    _compiler()
    ir = flash_mlir.attention_ir(*SHAPES, "bf16", causal=True)
    ptx = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa")
    assert ".entry" in ptx and "sm_90a" in ptx
    cubin = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="cubin", format="bin")
    assert cubin[:4] == b"\x7fELF"


def test_kernel_library_builds_and_loads_without_a_device():
    """Host code, cubin and the bundled runtime link and load; only the launch
    needs a GPU (the runtime loads the driver lazily)."""
    _compiler()
    from flash_mlir._attention import AttentionKernel
    if not os.path.exists(os.path.join(os.path.dirname(flash_mlir.library_path()),
                                       "libflash_cuda_runtime.so")):
        pytest.skip("libflash_cuda_runtime.so not built")
    ir = flash_mlir.attention_ir(*SHAPES, "bf16", causal=True, lse=True)
    kernel = AttentionKernel.build(ir, "cuda")
    assert kernel._lib.entry("flash_attention")
    bundled = os.path.join(os.path.dirname(kernel.path), "libflash_cuda_runtime.so")
    assert os.path.exists(bundled)


def test_prebuilt_kernels_run_without_the_compiler(monkeypatch, tmp_path):
    """A cache folder filled by prebuild serves attention() where the compiler
    does not load; a configuration missing from it is a FlashError naming it."""
    _compiler()
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path))
    import flash_mlir._attention as am
    import flash_mlir._capi as capi
    path = flash_mlir.prebuild((1, 4, 96, 64), (1, 2, 80, 64), (1, 2, 80, 64), "bfloat16",
                               causal=True)
    assert os.path.dirname(path) == str(tmp_path)
    monkeypatch.setattr(capi, "available", lambda: False)
    monkeypatch.setattr(capi, "unavailable_reason", lambda: "libMLIR is not installed")
    monkeypatch.setattr(am, "_compile_to_library",
                        lambda *a, **kw: pytest.fail("compiled without a compiler"))
    ir = flash_mlir.attention_ir((1, 4, 96, 64), (1, 2, 80, 64), (1, 2, 80, 64), "bf16",
                                 causal=True)
    assert am._library_for(ir, "cuda", None, "") == path
    other = flash_mlir.attention_ir((1, 4, 96, 64), (1, 2, 80, 64), (1, 2, 80, 64), "bf16")
    with pytest.raises(flash_mlir.FlashError, match="no compiler here.*libMLIR is not installed"):
        am._library_for(other, "cuda", None, "")


def test_a_rebuilt_compiler_does_not_reuse_stale_kernels(monkeypatch, tmp_path):
    _compiler()
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path))
    import flash_mlir._attention as am
    import flash_mlir.cache as cache
    args = ((1, 2, 64, 64), (1, 2, 64, 64), (1, 2, 64, 64), "f16")
    flash_mlir.prebuild(*args)
    compiles = []
    orig = am._compile_to_library
    monkeypatch.setattr(am, "_compile_to_library",
                        lambda *a, **kw: (compiles.append(a[0]), orig(*a, **kw))[1])
    flash_mlir.prebuild(*args)
    assert compiles == []
    real = cache.compiler_id()
    monkeypatch.setattr(cache, "compiler_id", lambda: dict(real, build="0" * 16))
    flash_mlir.prebuild(*args)
    assert len(compiles) == 1


# ---- execution on the GPU ----------------------------------------------------------------

# (name, q shape, k shape, v shape, dtype, attention() keywords). Shared by the tests
# and by --prebuild, so a prebuilt cache holds exactly the kernels the tests run.
def _run_cases():
    cases = []
    for dtype in ("bfloat16", "float16"):
        for causal in (False, True):
            for name, (b, hq, hkv, lq, lk, d) in (("mha", (2, 8, 8, 1000, 1000, 64)),
                                                  ("gqa_tail", (1, 4, 2, 333, 333, 128))):
                cases.append(("%s-%s-%s" % (name, dtype, "causal" if causal else "full"),
                              (b, hq, lq, d), (b, hkv, lk, d), (b, hkv, lk, d), dtype,
                              {"causal": causal}))
    cases.append(("stream", (1, 2, 256, 64), (1, 2, 256, 64), (1, 2, 256, 64), "bfloat16", {}))
    cases.append(("window-lse", (2, 4, 300, 64), (2, 4, 517, 64), (2, 4, 517, 64), "bfloat16",
                  {"window": 128, "align": "bottom_right", "return_lse": True}))
    cases.append(("dynamic", (1, 4, 100, 128), (1, 2, 130, 128), (1, 2, 130, 128), "bfloat16",
                  {"causal": True, "align": "bottom_right", "dynamic": True}))
    # No key at all (Lk = 0) and no query row: every kernel writes 0 and
    # lse = -inf, or nothing.
    for kernel in ("wgmma", "mma", "portable"):
        cases.append(("dynamic-empty-" + kernel, (2, 4, 70, 64), (2, 2, 90, 64),
                      (2, 2, 90, 64), "bfloat16",
                      {"return_lse": True, "dynamic": True, "kernel": kernel}))
    # More batch·heads than grid.y holds (65535): the launch continues in
    # grid.z, for every kernel.
    for kernel in ("wgmma", "mma", "portable", "splitkv"):
        cases.append(("grid-z-" + kernel, (33000, 2, 20, 64), (33000, 2, 24, 64),
                      (33000, 2, 24, 64), "bfloat16", {"kernel": kernel}))
    # The portable kernel: what no tensor-core kernel takes (f32, kernel=auto),
    # forced on shapes they do take, and PTX for an Ampere chip (JIT-compiled
    # by the driver for the device at hand).
    cases.append(("portable-d96-gqa-lse", (2, 8, 300, 96), (2, 2, 333, 96), (2, 2, 333, 96),
                  "bfloat16", {"causal": True, "align": "bottom_right", "return_lse": True,
                               "kernel": "portable"}))
    cases.append(("portable-f32-dv24-window", (1, 3, 200, 40), (1, 3, 150, 40),
                  (1, 3, 150, 24), "float32", {"window": 50}))
    cases.append(("portable-forced-f16", (2, 4, 257, 64), (2, 4, 257, 64), (2, 4, 257, 64),
                  "float16", {"causal": True, "kernel": "portable"}))
    cases.append(("portable-sm80-ptx", (1, 4, 128, 64), (1, 4, 190, 64), (1, 4, 190, 64),
                  "bfloat16", {"chip": "sm_80", "features": "+ptx70", "format": "isa",
                               "kernel": "portable"}))
    # The wgmma kernel past D = 128: 192 and 256 (a smaller key tile), Dv != D.
    cases.append(("wgmma-d256-causal", (2, 4, 333, 256), (2, 4, 333, 256), (2, 4, 333, 256),
                  "bfloat16", {"causal": True, "return_lse": True}))
    cases.append(("wgmma-d256-f16-gqa-br", (1, 8, 100, 256), (1, 2, 517, 256),
                  (1, 2, 517, 256), "float16", {"causal": True, "align": "bottom_right"}))
    cases.append(("wgmma-d192-dv128-window", (2, 4, 300, 192), (2, 4, 401, 192),
                  (2, 4, 401, 128), "bfloat16", {"window": 100, "kernel": "wgmma"}))
    # Head dims that are not whole 64-column panels: the tiles are padded and
    # TMA fills the columns past D with zeros (kernel=auto takes wgmma).
    cases.append(("wgmma-d96-gqa-lse", (2, 8, 300, 96), (2, 2, 333, 96), (2, 2, 333, 96),
                  "bfloat16", {"causal": True, "align": "bottom_right", "return_lse": True}))
    cases.append(("wgmma-d40-dv24-window", (2, 4, 257, 40), (2, 4, 190, 40), (2, 4, 190, 24),
                  "float16", {"window": 37}))
    cases.append(("wgmma-d80-dv152", (1, 4, 130, 80), (1, 4, 300, 80), (1, 4, 300, 152),
                  "bfloat16", {"causal": True, "align": "bottom_right"}))
    cases.append(("wgmma-d128-dv256", (1, 4, 257, 128), (1, 4, 300, 128), (1, 4, 300, 256),
                  "bfloat16", {"kernel": "wgmma"}))
    # The mma.sync kernel (forced: on sm_90a kernel=auto takes wgmma for every
    # head dim up to 256): Dv != D, f16 at D = 256, and PTX for sm_80.
    cases.append(("mma-d96-gqa-lse", (2, 8, 300, 96), (2, 2, 333, 96), (2, 2, 333, 96),
                  "bfloat16", {"causal": True, "align": "bottom_right", "return_lse": True,
                               "kernel": "mma"}))
    cases.append(("mma-d256-f16", (1, 4, 200, 256), (1, 4, 260, 256), (1, 4, 260, 256),
                  "float16", {"kernel": "mma"}))
    cases.append(("mma-d64-dv40-window", (2, 4, 257, 64), (2, 4, 190, 64), (2, 4, 190, 40),
                  "bfloat16", {"window": 37, "kernel": "mma"}))
    cases.append(("mma-sm80-ptx", (1, 4, 128, 128), (1, 4, 190, 128), (1, 4, 190, 128),
                  "bfloat16", {"causal": True, "kernel": "mma", "chip": "sm_80",
                               "features": "+ptx70", "format": "isa"}))
    return cases


CASES = {c[0]: c[1:] for c in _run_cases()}


# score_mod with a captured bias, which attention() does not build: the IR is
# written out and run through the kernel library directly. (kernel option,
# element type, D)
BIAS_CASES = {"bias-wgmma": ("auto", "bf16", 64), "bias-mma": ("mma", "bf16", 96),
              "bias-portable": ("portable", "f16", 80)}
BIAS_SHAPE = (2, 3, 150, 130)  # B, H, Lq, Lk


def _bias_ir(elt, d, q_shape=None, k_shape=None, bias_shape=None, read="%i, %j",
             mask="causal", scale="0.1"):
    """A flash.attention whose score_mod adds a captured f32 bias read at `read` (of
    %b, %h, %i, %j); shapes [B, H, L] without D (default: BIAS_SHAPE, bias [Lq, Lk])."""
    b, h, lq, lk = BIAS_SHAPE
    q_shape, k_shape = q_shape or (b, h, lq), k_shape or (b, h, lk)
    bias_shape = bias_shape or (lq, lk)
    qm = "memref<%sx%dx%s>" % ("x".join(map(str, q_shape)), d, elt)
    km = "memref<%sx%dx%s>" % ("x".join(map(str, k_shape)), d, elt)
    tq, tk = qm.replace("memref", "tensor"), km.replace("memref", "tensor")
    bm = "memref<%sxf32>" % "x".join(map(str, bias_shape))
    tb = bm.replace("memref", "tensor")
    return f"""func.func @flash_attention(%q: {qm}, %k: {km}, %v: {km}, %o: {qm}, %bias: {bm})
    attributes {{llvm.emit_c_interface}} {{
  %qt = bufferization.to_tensor %q restrict : {qm} to {tq}
  %kt = bufferization.to_tensor %k restrict : {km} to {tk}
  %vt = bufferization.to_tensor %v restrict : {km} to {tk}
  %ot = bufferization.to_tensor %o restrict writable : {qm} to {tq}
  %bt = bufferization.to_tensor %bias restrict : {bm} to {tb}
  %r = flash.attention ins(%qt, %kt, %vt : {tq}, {tk}, {tk}) outs(%ot : {tq})
      captures(%bt : {tb}) scale({scale}) mask({mask}) score_mod {{
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %x: {tb}):
    %e = tensor.extract %x[{read}] : {tb}
    %a = arith.addf %s, %e : f32
    flash.yield %a : f32
  }} -> {tq}
  bufferization.materialize_in_destination %r in restrict writable %o : ({tq}, {qm}) -> ()
  return
}}
"""


def _bias_library(name):
    import flash_mlir._attention as am
    kernel, elt, d = BIAS_CASES[name]
    return am._library_for(_bias_ir(elt, d), "cuda", None, "kernel=" + kernel)


# The wgmma kernel as a persistent grid (persistent=1) against the grid of one CTA
# per work item (persistent=0): more work items than resident CTAs (132 SMs × 1 or 2),
# so each CTA walks several and the K/V ring and Q's buffer carry over between them.
PERSISTENT_CASES = {
    "d64-causal-lse": ((4, 16, 1000, 64), (4, 16, 1000, 64), (4, 16, 1000, 64), "bfloat16",
                       {"causal": True, "return_lse": True}),
    "d64-192rows-f16": ((2, 16, 2000, 64), (2, 16, 1800, 64), (2, 16, 1800, 64), "float16", {}),
    "d64-window": ((2, 8, 1500, 64), (2, 8, 1700, 64), (2, 8, 1700, 64), "bfloat16",
                   {"window": 300, "align": "bottom_right"}),
    "d128-gqa-br-lse": ((3, 12, 777, 128), (3, 4, 1234, 128), (3, 4, 1234, 128), "bfloat16",
                        {"causal": True, "align": "bottom_right", "return_lse": True}),
    "d128-full-odd": ((2, 16, 1500, 128), (2, 16, 1300, 128), (2, 16, 1300, 128), "bfloat16",
                      {}),
    "d128-dynamic": ((2, 16, 1100, 128), (2, 16, 900, 128), (2, 16, 900, 128), "bfloat16",
                     {"causal": True, "dynamic": True, "return_lse": True}),
    "d256-causal": ((2, 8, 600, 256), (2, 8, 600, 256), (2, 8, 600, 256), "bfloat16",
                    {"causal": True}),
    "d96-dv64-serial": ((2, 8, 700, 96), (2, 8, 500, 96), (2, 8, 500, 64), "bfloat16",
                        {"causal": True, "defer_pv": 0, "pingpong": True}),
    # Two Q buffers (item i in buffer i mod 2, each with its own barriers and item
    # slot): where they fit (q_buffers=0), forced, and beside the serial loop's two
    # stages at D = 128 without a mask.
    "d128-causal-two-q-lse": ((4, 16, 1000, 128), (4, 16, 1000, 128), (4, 16, 1000, 128),
                              "bfloat16", {"causal": True, "return_lse": True,
                                           "q_buffers": 0}),
    "d64-causal-two-q-f16": ((4, 16, 900, 64), (4, 16, 1100, 64), (4, 16, 1100, 64),
                             "float16", {"causal": True, "align": "bottom_right",
                                         "q_buffers": 2}),
    "d128-full-serial-two-q": ((2, 16, 1500, 128), (2, 16, 1300, 128), (2, 16, 1300, 128),
                               "bfloat16", {"defer_pv": 0, "q_buffers": 2}),
}


# FlexAttention-style: a score_mod and a mask_mod closing over a bias and document ids (the
# kernel reads them as captures), and a mask_mod proved causal (the causal kernel).
FLEX_SHAPE = (2, 4, 300, 517, 128)  # B, H, Lq, Lk, D


def _flex_fns(bias, doc):
    import torch

    def soft_bias(score, b, h, q_idx, kv_idx):
        return 20.0 * torch.tanh(score / 20.0) + bias[h, q_idx, kv_idx]

    def same_document(b, h, q_idx, kv_idx):
        return (doc[b, q_idx + (FLEX_SHAPE[3] - FLEX_SHAPE[2])] == doc[b, kv_idx]) | \
            (kv_idx < 8)

    return soft_bias, same_document


def _flex_standins(torch, device):
    b, h, lq, lk, _ = FLEX_SHAPE
    g = torch.Generator(device=device).manual_seed(int.from_bytes(os.urandom(4), "little"))
    bias = torch.randn(h, lq, lk, device=device, generator=g)
    doc = torch.randint(0, 4, (b, lk), device=device, generator=g)
    return bias, doc


def _causal_mask_mod(b, h, q_idx, kv_idx):
    return kv_idx <= q_idx + (FLEX_SHAPE[3] - FLEX_SHAPE[2])


TORCH_OP_SHAPES = ((2, 8, 300, 64), (2, 4, 517, 64), (2, 4, 517, 64))


def _persistent_kw(kw, on):
    return dict(kw, kernel="wgmma", persistent=1 if on else 0)


# The persistent grid under a score_mod: a per-key bias read from a capture and a chunked
# mask of the indices alone (its tiles classified at compile time: each block walks only
# its chunk's key tiles, the whole ones mask-free). 9 query blocks × 64 heads: more work
# items than resident CTAs, so each CTA walks several.
PERSISTENT_MOD_SHAPE = (4, 16, 1100, 1300, 128)  # B, H, Lq, Lk, D
PERSISTENT_CHUNK = 192


def _persistent_mods(bias):
    def key_bias(score, b, h, q_idx, kv_idx):
        return score + bias[h, kv_idx]

    def chunked(b, h, q_idx, kv_idx):
        return (q_idx // PERSISTENT_CHUNK) == (kv_idx // PERSISTENT_CHUNK)

    return {"score_mod": key_bias, "mask_mod": chunked}


# Shapes where persistent=-1 (the default) takes the persistent grid: rows of at most
# 1024 keys on average, and at least two work items per resident CTA.
AUTO_PERSISTENT_CASES = {
    "d64-causal-lse": ((4, 16, 1000, 64), (4, 16, 1000, 64), (4, 16, 1000, 64), "bfloat16",
                       {"causal": True, "return_lse": True}),
    "d128-gqa-short-keys": ((4, 32, 600, 128), (4, 8, 900, 128), (4, 8, 900, 96),
                            "bfloat16", {}),
}


# tensormap_params=True: the kernels take their TMA maps as grid-constant
# parameters (flash-tensormap-kernel-params) instead of device copies.
TENSORMAP_PARAM_CASES = {
    "gqa-causal-lse": ((2, 8, 300, 128), (2, 2, 517, 128), (2, 2, 517, 128), "bfloat16",
                       {"causal": True, "align": "bottom_right", "return_lse": True}),
    "d64-dynamic": ((2, 4, 333, 64), (2, 4, 250, 64), (2, 4, 250, 64), "float16",
                    {"dynamic": True, "return_lse": True}),
    "decode-split": ((4, 32, 1, 128), (4, 8, 3000, 128), (4, 8, 3000, 128), "bfloat16",
                     {"return_lse": True}),
}


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, (qs, ks, vs, dtype, kw) in CASES.items():
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, **kw))
    for name, (qs, ks, vs, dtype, kw) in PERSISTENT_CASES.items():
        for on in (False, True):
            print("persistent-%s-%d" % (name, on),
                  flash_mlir.prebuild(qs, ks, vs, dtype, **_persistent_kw(kw, on)))
    for name, (qs, ks, vs, dtype, kw) in AUTO_PERSISTENT_CASES.items():
        for extra in ({}, {"persistent": 0}):
            print("auto-persistent-%s" % name, extra,
                  flash_mlir.prebuild(qs, ks, vs, dtype, **kw, **extra))
    for name, (qs, ks, vs, dtype, kw) in TENSORMAP_PARAM_CASES.items():
        for on in (False, True):
            print("tensormap-%s-%d" % (name, on),
                  flash_mlir.prebuild(qs, ks, vs, dtype, tensormap_params=on, **kw))
    import torch
    b, h, lq, lk, d = FLEX_SHAPE
    sm, mm = _flex_fns(*_flex_standins(torch, "cpu"))
    for kw in ({"score_mod": sm, "mask_mod": mm}, {"mask_mod": _causal_mask_mod},
               {"causal": True, "align": "bottom_right"}):
        print("flex", flash_mlir.prebuild((b, h, lq, d), (b, h, lk, d), (b, h, lk, d),
                                          "bfloat16", **kw))
    for grad in (False, True):
        print("torch-op", flash_mlir.prebuild(*TORCH_OP_SHAPES, "bfloat16", causal=True,
                                              align="bottom_right", return_lse=True,
                                              grad=grad))
    b, h, lq, lk, d = PERSISTENT_MOD_SHAPE
    mods = _persistent_mods(torch.zeros(h, lk))
    for kw in (_persistent_kw(mods, False), _persistent_kw(mods, True), mods):
        print("persistent-mods", flash_mlir.prebuild(
            (b, h, lq, d), (b, h, lk, d), (b, h, lk, d), "bfloat16", **kw))
    print("persistent-empty", flash_mlir.prebuild(
        (2, 4, 70, 64), (2, 2, 90, 64), (2, 2, 90, 64), "bfloat16",
        **_persistent_kw({"return_lse": True, "dynamic": True}, True)))
    for name, (qs, ks, vs, dtype, kw) in SOFT_EXP2_CASES.items():
        mask_kw = {key: kw[key] for key in _MASK_KEYS if key in kw}
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, return_lse=True, **kw),
              flash_mlir.prebuild(qs, ks, vs, dtype, **mask_kw))
    for name in BIAS_CASES:
        print(name, _bias_library(name))
    for name, (qs, ks, vs, bs, dtype, kw) in BIAS_KEYWORD_CASES.items():
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, bias=(bs, "float32"), **kw))
    for name, (qs, ks, vs, kw) in MASK_STAGED_CASES.items():
        for on in (False, True):
            print(name, on, flash_mlir.prebuild(qs, ks, vs, "bfloat16", score_mod=_keep_fn,
                                                score_mod_args=[((qs[2], ks[2]), "bool")],
                                                **_staged_kw(kw, on)))
    for name, (qs, ks, vs, bs, bias_dtype, kw) in BIAS_STAGED_CASES.items():
        for on in (False, True):
            print(name, on, flash_mlir.prebuild(qs, ks, vs, "bfloat16",
                                                bias=(bs, bias_dtype),
                                                **_staged_kw(kw, on)))
    for name, (qs, ks, vs, dtype, kw, args) in SCORE_MOD_FN_CASES.items():
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, score_mod=_score_mod_fn,
                                        score_mod_args=[(sh, dt) for sh, dt, _ in args], **kw))
    for name, (qs, ks, vs, dtype, kw) in SCORE_MOD_KEYWORD_CASES.items():
        kw = dict(kw)
        if "alibi" in kw:
            kw["alibi_slopes"] = kw.pop("alibi")
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, **kw))


# attention(..., bias=) through the public API: the bias as the score_mod's capture,
# in the kernel kernel=auto picks (wgmma at D = 128, mma.sync at D = 96).
BIAS_KEYWORD_CASES = {
    "alibi-heads-d128": ((2, 8, 300, 128), (2, 2, 700, 128), (2, 2, 700, 128), (8, 1, 700),
                         "bfloat16", dict(causal=True, align="bottom_right")),
    "lq-lk-d96-f16": ((1, 4, 129, 96), (1, 4, 257, 96), (1, 4, 257, 64), (129, 257),
                      "float16", {}),
}


# A bias read as bias[..., q_idx, kv_idx] whose rows are multiples of 16 bytes: the wgmma
# kernel stages its tile in shared memory by TMA (stage_captures, on by default), with
# tail rows (Lq past the last block) and tail keys (Lk past the last tile) zero-filled,
# a head index from the grid, GQA, and 4-byte elements at 64-key tiles. Bit-identical to
# the read from global memory (stage_captures=0), and within the SDPA rule of float64.
BIAS_STAGED_CASES = {
    "d128-bf16-tails-causal": ((2, 4, 300, 128), (2, 4, 520, 128), (2, 4, 520, 96),
                               (300, 520), "bfloat16",
                               dict(causal=True, align="bottom_right")),
    "d64-bf16-heads-gqa": ((2, 8, 333, 64), (2, 2, 264, 64), (2, 2, 264, 64), (8, 333, 264),
                           "bfloat16", {}),
    "d128-f32-bn64": ((1, 4, 200, 128), (1, 4, 392, 128), (1, 4, 392, 128), (4, 200, 392),
                      "float32", dict(block_n=64)),
}


def _staged_kw(kw, on):
    return dict(kw, kernel="wgmma", stage_captures=1 if on else 0)


@pytest.mark.parametrize("name", list(BIAS_STAGED_CASES))
def test_staged_bias_matches_global_read_and_sdpa(name):
    torch = _cuda()
    qs, ks, vs, bs, bias_dtype, kw = BIAS_STAGED_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, "bfloat16")
    bias = torch.randn(*bs, device="cuda", dtype=getattr(torch, bias_dtype))
    staged = flash_mlir.attention(q, k, v, bias=bias, **_staged_kw(kw, True))
    loaded = flash_mlir.attention(q, k, v, bias=bias, **_staged_kw(kw, False))
    torch.cuda.synchronize()
    assert torch.equal(staged, loaded)
    _check_bias_output(torch, staged, q, k, v, bias.float(), kw)


# A boolean [Lq, Lk] mask tensor read as mask[q_idx, kv_idx] (rows a multiple of 16
# bytes): staged as bytes by the same TMA path; key 0 always kept, so no row is empty.
MASK_STAGED_CASES = {
    "d128-mask-tails-causal": ((2, 4, 300, 128), (2, 4, 528, 128), (2, 4, 528, 128),
                               dict(causal=True, align="bottom_right")),
    "d64-mask-gqa": ((2, 8, 200, 64), (2, 2, 336, 64), (2, 2, 336, 64), {}),
}


def _keep_fn(s, b, h, i, j, keep):
    from flash_mlir import score as fs
    return fs.where(keep[i, j], s, -float("inf"))


@pytest.mark.parametrize("name", list(MASK_STAGED_CASES))
def test_staged_mask_matches_global_read_and_reference(name):
    torch = _cuda()
    qs, ks, vs, kw = MASK_STAGED_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, "bfloat16")
    keep = torch.rand(qs[2], ks[2], device="cuda") < 0.5
    keep[:, 0] = True
    staged, loaded = (flash_mlir.attention(q, k, v, score_mod=_keep_fn, score_mod_args=(keep,),
                                           **_staged_kw(kw, on)) for on in (True, False))
    torch.cuda.synchronize()
    assert torch.equal(staged, loaded)
    bias = torch.zeros(qs[2], ks[2], device="cuda").masked_fill(~keep, float("-inf"))
    _check_bias_output(torch, staged, q, k, v, bias, kw)


@pytest.mark.parametrize("name", list(BIAS_KEYWORD_CASES))
def test_bias_keyword_matches_sdpa(name):
    torch = _cuda()
    qs, ks, vs, bs, dtype, kw = BIAS_KEYWORD_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    bias = torch.randn(*bs, device="cuda", dtype=torch.float32)
    out = flash_mlir.attention(q, k, v, bias=bias, **kw)
    torch.cuda.synchronize()
    _check_bias_output(torch, out, q, k, v, bias, kw)


def _check_bias_output(torch, out, q, k, v, bias, kw):
    """out against float64 with the additive `bias` (f32), at most twice SDPA's error."""
    import numpy as np
    import torch.nn.functional as F
    qs, ks = q.shape, k.shape
    kw = {key: val for key, val in kw.items() if key in ("causal", "align")}
    bias64 = bias.double().cpu().numpy()
    ref, _ = attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)),
                           score_mod=lambda s, i, j: s + bias64, **kw)
    lq, lk = qs[-2], ks[-2]
    mask = torch.zeros(lq, lk, device="cuda")
    if kw.get("causal"):
        i = torch.arange(lq, device="cuda")[:, None]
        j = torch.arange(lk, device="cuda")[None, :]
        mask = mask.masked_fill(j > i + (lk - lq), float("-inf"))
    g = qs[1] // ks[1]
    sdpa = F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1),
                                          v.repeat_interleave(g, 1),
                                          attn_mask=(bias + mask).to(q.dtype))
    ref_t = torch.from_numpy(np.ascontiguousarray(ref)).to("cuda")
    err = (out.double() - ref_t).abs().max().item()
    err_sdpa = (sdpa.double() - ref_t).abs().max().item()
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


# softcap= and alibi_slopes= through the public API, in the kernels kernel=auto picks
# (wgmma at D = 128, mma.sync at D = 96, split-KV for a decode shape). alibi: the slopes'
# shape. No SDPA backend computes these, so the anchor is the same math in float32
# from the same bf16/f16 inputs, rounded like the output: at most twice its error.
SCORE_MOD_KEYWORD_CASES = {
    "softcap-d128-causal": ((2, 8, 333, 128), (2, 2, 555, 128), (2, 2, 555, 128), "bfloat16",
                            dict(softcap=30.0, causal=True, align="bottom_right")),
    "alibi-d96-f16": ((2, 4, 129, 96), (2, 4, 257, 96), (2, 4, 257, 64), "float16",
                      dict(alibi=(4,), causal=True, align="bottom_right")),
    "softcap-alibi-decode": ((3, 16, 1, 128), (3, 4, 3000, 128), (3, 4, 3000, 128),
                             "bfloat16", dict(softcap=20.0, alibi=(3, 16))),
}


# score_mod=fn from Python on the GPU kernels kernel=auto picks (wgmma, mma.sync,
# split-KV): a bias (float), the sequences' lengths (int32) and a boolean mask, read
# with the batch, head, query and key indices.
def _score_mod_fn(s, b, h, i, j, bias, lens, mask):
    from flash_mlir import score as fs
    t = 10.0 * fs.tanh(s / 10.0) + bias[h, j]
    return fs.where((j < lens[b]) & mask[i, j], t, -float("inf"))


SCORE_MOD_FN_CASES = {
    name: (qs, ks, vs, dtype, {}, [((qs[1], ks[2]), "float32", "randn"),
                                   ((qs[0],), "int32", "lens"),
                                   ((qs[2], ks[2]), "bool", "mask")])
    for name, qs, ks, vs, dtype in [
        ("fn-wgmma-d128", (2, 8, 200, 128), (2, 2, 333, 128), (2, 2, 333, 128), "bfloat16"),
        ("fn-wgmma-d96-f16", (2, 4, 65, 96), (2, 4, 129, 96), (2, 4, 129, 64), "float16"),
        ("fn-splitkv-decode", (2, 16, 1, 128), (2, 4, 3000, 128), (2, 4, 3000, 128),
         "bfloat16"),
    ]}


@pytest.mark.parametrize("name", list(SCORE_MOD_FN_CASES))
def test_score_mod_fn_matches_reference(name):
    torch = _cuda()
    qs, ks, vs, dtype, kw, specs = SCORE_MOD_FN_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    bias = torch.randn(*specs[0][0], device="cuda")
    lens = torch.tensor([ks[2] - 7, ks[2] // 3][:qs[0]], dtype=torch.int32, device="cuda")
    mask = torch.rand(*specs[2][0], device="cuda") < 0.8
    out = flash_mlir.attention(q, k, v, score_mod=_score_mod_fn,
                               score_mod_args=(bias, lens, mask), **kw)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()

    def ref(dt):
        g = qs[1] // ks[1]
        kk, vv = (x.to(dt).repeat_interleave(g, 1) for x in (k, v))
        s = q.to(dt) @ kk.transpose(-1, -2) / qs[-1] ** 0.5
        t = 10 * torch.tanh(s / 10) + bias.to(dt)[None, :, None, :]
        j = torch.arange(ks[2], device="cuda")
        ok = (j[None, None, None, :] < lens[:, None, None, None]) & mask[None, None]
        t = t.masked_fill(~ok, float("-inf"))
        dead = torch.isneginf(t).all(-1, keepdim=True)
        p = torch.softmax(t.masked_fill(dead, 0), -1).masked_fill(dead, 0)
        return p @ vv
    want = ref(torch.float64)
    anchor = ref(torch.float32).to(q.dtype)
    err = (out.double() - want).abs().max().item()
    err_anchor = (anchor.double() - want).abs().max().item()
    assert err <= 2 * err_anchor + 1e-3, (err, err_anchor)


def _mods_ref(torch, q, k, v, scale, softcap=None, slopes=None, causal=False, dtype=None):
    """(out, lse) of softcap, then ALiBi, then the bottom-right causal mask, in the
    dtype given (float64 for the reference, float32 for the anchor)."""
    q, k, v = (x.to(dtype) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = scale * q @ k.transpose(-1, -2)
    lq, lk = s.shape[-2:]
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(lq, device=q.device)[:, None]
    j = torch.arange(lk, device=q.device)[None, :]
    if slopes is not None:
        sl = slopes.to(dtype)
        sl = sl[None, :, None, None] if sl.dim() == 1 else sl[:, :, None, None]
        s = s - sl * (i + lk - lq - j).abs().to(dtype)
    if causal:
        s = s.masked_fill(j > i + lk - lq, float("-inf"))
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("name", list(SCORE_MOD_KEYWORD_CASES))
def test_score_mod_keywords_match_reference(name):
    torch = _cuda()
    qs, ks, vs, dtype, kw = SCORE_MOD_KEYWORD_CASES[name]
    kw = dict(kw)
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    slopes = None
    if "alibi" in kw:
        slopes = (torch.rand(*kw.pop("alibi"), device="cuda") * 0.3 + 0.01).float()
    out = flash_mlir.attention(q, k, v, alibi_slopes=slopes, **kw)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    scale = 1.0 / qs[-1] ** 0.5
    mods = dict(softcap=kw.get("softcap"), slopes=slopes, causal=kw.get("causal", False))
    ref = _mods_ref(torch, q, k, v, scale, dtype=torch.float64, **mods)
    anchor = _mods_ref(torch, q, k, v, scale, dtype=torch.float32, **mods).to(q.dtype)
    err = (out.double() - ref).abs().max().item()
    err_anchor = (anchor.double() - ref).abs().max().item()
    assert err <= 2 * err_anchor + 1e-3, (err, err_anchor)


def _cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) < (9, 0):
        pytest.skip("flash-gpu-pipeline targets sm_90a")
    return torch


def _inputs(torch, qs, ks, vs, dtype):
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    dt = getattr(torch, dtype)
    return [torch.randn(*s, device="cuda", dtype=dt, generator=g) for s in (qs, ks, vs)]


def _errors(torch, out, q, k, v, **kw):
    """(max |out - ref|, max |sdpa - ref|, ref lse) with ref in float64 from the
    same (rounded) inputs; SDPA gets the same mask as a boolean matrix."""
    import numpy as np
    import torch.nn.functional as F
    causal, window = kw.get("causal", False), kw.get("window")
    ref, ref_lse = attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)), causal=causal,
                                 window=window, align=kw.get("align", "top_left"))
    group = q.shape[1] // k.shape[1]
    mask = None
    if causal or window is not None:
        lq, lk = q.shape[-2], k.shape[-2]
        i = torch.arange(lq, device="cuda")[:, None]
        j = torch.arange(lk, device="cuda")[None, :]
        diag = i + (lk - lq if kw.get("align") == "bottom_right" else 0)
        mask = j <= diag
        if window is not None:
            mask &= j > diag - window
    sdpa = F.scaled_dot_product_attention(q, k.repeat_interleave(group, dim=1),
                                          v.repeat_interleave(group, dim=1), attn_mask=mask)
    ref_t = torch.from_numpy(np.ascontiguousarray(ref)).to("cuda")
    return ((out.double() - ref_t).abs().max().item(),
            (sdpa.double() - ref_t).abs().max().item(), ref_lse)


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith(("mha", "gqa"))])
def test_matches_sdpa(name):
    torch = _cuda()
    qs, ks, vs, dtype, kw = CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    out = torch.full_like(q, float("nan"))
    res = flash_mlir.attention(q, k, v, out=out, **kw)
    torch.cuda.synchronize()
    assert res is out and not torch.isnan(out).any()
    err, err_sdpa, _ = _errors(torch, out, q, k, v, **kw)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


def test_runs_on_torch_current_stream():
    torch = _cuda()
    qs, ks, vs, dtype, kw = CASES["stream"]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = flash_mlir.attention(q, k, v, **kw)
    s.synchronize()
    err, err_sdpa, _ = _errors(torch, out, q, k, v, **kw)
    assert err <= 2 * err_sdpa + 1e-3


def test_sliding_window_bottom_right_with_lse():
    torch = _cuda()
    qs, ks, vs, dtype, kw = CASES["window-lse"]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    out, lse = flash_mlir.attention(q, k, v, **kw)
    torch.cuda.synchronize()
    err, err_sdpa, ref_lse = _errors(torch, out, q, k, v, **kw)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)
    assert lse.dtype == torch.float32 and tuple(lse.shape) == qs[:-1]
    # f32 accumulation of the same rounded inputs: far inside bf16's error.
    assert abs(lse.double().cpu().numpy() - ref_lse).max() <= 1e-3


_MASK_KEYS = ("causal", "window", "align")


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith(("portable", "mma"))])
def test_portable_and_mma_kernels(name):
    torch = _cuda()
    qs, ks, vs, dtype, kw = CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    out = torch.full(qs[:-1] + vs[-1:], float("nan"), dtype=q.dtype, device="cuda")
    res = flash_mlir.attention(q, k, v, out=out, **kw)
    torch.cuda.synchronize()
    lse = res[1] if kw.get("return_lse") else None
    assert not torch.isnan(out).any()
    mask_kw = {key: kw[key] for key in _MASK_KEYS if key in kw}
    err, err_sdpa, ref_lse = _errors(torch, out, q, k, v, **mask_kw)
    if dtype == "float32":
        # Same inputs, f32 throughout: only summation order and ex2.approx differ.
        assert err <= 2e-5, (err, err_sdpa)
    else:
        assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)
    if lse is not None:
        assert abs(lse.double().cpu().numpy() - ref_lse).max() <= 1e-3


@pytest.mark.parametrize("name", list(BIAS_CASES))
def test_score_mod_bias_capture(name):
    """Every kernel inlines score_mod per element and reads its captures."""
    torch = _cuda()
    import numpy as np
    from flash_mlir.gpu import KernelLibrary
    _, elt, d = BIAS_CASES[name]
    b, h, lq, lk = BIAS_SHAPE
    dtype = {"bf16": "bfloat16", "f16": "float16"}[elt]
    q, k, v = _inputs(torch, (b, h, lq, d), (b, h, lk, d), (b, h, lk, d), dtype)
    bias = torch.randn(lq, lk, device="cuda", dtype=torch.float32)
    out = torch.full_like(q, float("nan"))
    lib = KernelLibrary(_bias_library(name))
    lib("flash_attention", q, k, v, out, bias, pass_stream=True)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    bias64 = bias.double().cpu().numpy()
    ref, _ = attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)), scale=0.1,
                           causal=True, score_mod=lambda s, i, j: s + bias64)
    import torch.nn.functional as F
    allowed = torch.ones(lq, lk, dtype=torch.bool, device="cuda").tril()
    sdpa_mask = torch.where(allowed, bias, torch.tensor(float("-inf"), device="cuda"))
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask.to(q.dtype), scale=0.1)
    ref_t = torch.from_numpy(np.ascontiguousarray(ref)).to("cuda")
    err = (out.double() - ref_t).abs().max().item()
    err_sdpa = (sdpa.double() - ref_t).abs().max().item()
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


def test_dynamic_lengths_share_one_kernel():
    torch = _cuda()
    import flash_mlir._attention as am
    _, ks, _, dtype, kw = CASES["dynamic"]
    before = len(am._kernels)
    for b, lq, lk in ((1, 100, 130), (2, 257, 300), (3, 64, 64)):
        q, k, v = _inputs(torch, (b, 4, lq, 128), (b, 2, lk, 128), (b, 2, lk, 128), dtype)
        out = flash_mlir.attention(q, k, v, **kw)
        torch.cuda.synchronize()
        err, err_sdpa, _ = _errors(torch, out, q, k, v, **kw)
        assert err <= 2 * err_sdpa + 1e-3, ((b, lq, lk), err, err_sdpa)
    assert len(am._kernels) == before + 1


@pytest.mark.parametrize("kernel", ["wgmma", "mma", "portable", "splitkv"])
def test_more_batch_heads_than_grid_y(kernel):
    torch = _cuda()
    qs, ks, vs, dtype, kw = CASES["grid-z-" + kernel]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    out = torch.full_like(q, float("nan"))
    flash_mlir.attention(q, k, v, out=out, **kw)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    err, err_sdpa, _ = _errors(torch, out, q, k, v)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


@pytest.mark.parametrize("kernel", ["wgmma", "mma", "portable"])
def test_no_keys_gives_zero_rows_and_minus_inf_lse(kernel):
    torch = _cuda()
    _, _, _, dtype, kw = CASES["dynamic-empty-" + kernel]
    q, k, v = _inputs(torch, (2, 4, 70, 64), (2, 2, 0, 64), (2, 2, 0, 64), dtype)
    out = torch.full((2, 4, 70, 64), float("nan"), dtype=q.dtype, device="cuda")
    out, lse = flash_mlir.attention(q, k, v, out=out, **kw)
    torch.cuda.synchronize()
    assert (out == 0).all().item()
    assert torch.isneginf(lse).all().item()
    # And a query of no rows is a no-op, not an error.
    q0 = q[:, :, :0].contiguous()
    k1, v1 = _inputs(torch, (2, 4, 1, 64), (2, 2, 90, 64), (2, 2, 90, 64), dtype)[1:]
    out0, lse0 = flash_mlir.attention(q0, k1, v1, **kw)
    torch.cuda.synchronize()
    assert out0.shape == (2, 4, 0, 64) and lse0.shape == (2, 4, 0)


@pytest.mark.parametrize("name", list(PERSISTENT_CASES))
def test_persistent_grid_matches_one_cta_per_item(name):
    """The same rows in the same order of tiles: bit-identical to the grid of one CTA
    per work item, and within the SDPA-error rule of the float64 reference. Launched
    twice back to back: the work counter the first launch used is zero again for the
    second (its last CTA out resets it), so the second hands out every item too."""
    torch = _cuda()
    qs, ks, vs, dtype, kw = PERSISTENT_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    res = []
    for on in (False, True, True):
        out = torch.full(qs[:-1] + vs[-1:], float("nan"), dtype=q.dtype, device="cuda")
        r = flash_mlir.attention(q, k, v, out=out, **_persistent_kw(kw, on))
        res.append(r if kw.get("return_lse") else (r, None))
    torch.cuda.synchronize()
    (o0, l0), (o1, l1), (o2, l2) = res
    assert not torch.isnan(o1).any() and not torch.isnan(o2).any()
    assert torch.equal(o1, o0), (o1.double() - o0.double()).abs().max().item()
    assert torch.equal(o2, o0), (o2.double() - o0.double()).abs().max().item()
    err, err_sdpa, ref_lse = _errors(torch, o1, q, k, v, **kw)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)
    if l1 is not None:
        assert torch.equal(l1, l0) and torch.equal(l2, l0)
        lse_err = (l1.double().cpu() - torch.from_numpy(ref_lse)).abs().max().item()
        assert lse_err <= 1e-3, lse_err


def test_persistent_grid_with_a_score_mod_and_an_index_mask():
    """A capture read and a classified mask on the persistent grid, forced and as the
    default's choice: bit-identical to the grid of one CTA per item (twice: the work
    counter is zero again), and within the
    SDPA-error rule of the float64 reference (SDPA given the same bias and mask as one
    additive matrix; the bias is bf16-exact, so that matrix is exact)."""
    import torch.nn.functional as F
    torch = _cuda()
    b, h, lq, lk, d = PERSISTENT_MOD_SHAPE
    q, k, v = _inputs(torch, (b, h, lq, d), (b, h, lk, d), (b, h, lk, d), "bfloat16")
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    bias = torch.randn(h, lk, device="cuda", generator=g).bfloat16().float()
    mods = _persistent_mods(bias)
    outs = [flash_mlir.attention(q, k, v, **_persistent_kw(mods, on))
            for on in (False, True, True)]
    # The default takes the persistent grid here (blocks walk 2-3 key tiles).
    outs.append(flash_mlir.attention(q, k, v, **mods))
    torch.cuda.synchronize()
    assert not torch.isnan(outs[1]).any()
    assert torch.equal(outs[1], outs[0]), (outs[1].double() - outs[0].double()).abs().max()
    assert torch.equal(outs[2], outs[0])
    assert torch.equal(outs[3], outs[0])
    i = torch.arange(lq, device="cuda")[:, None]
    j = torch.arange(lk, device="cuda")[None, :]
    visible = (i // PERSISTENT_CHUNK) == (j // PERSISTENT_CHUNK)
    add = torch.where(visible[None], bias[:, None, :],
                      torch.tensor(float("-inf"), device="cuda"))  # [h, lq, lk]
    qd, kd, vd = (x.double() for x in (q, k, v))
    s = (qd @ kd.transpose(-1, -2)) * d ** -0.5 + add.double()
    ref = torch.softmax(s, -1) @ vd
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=add.bfloat16())
    err = (outs[1].double() - ref).abs().max().item()
    err_sdpa = (sdpa.double() - ref).abs().max().item()
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


def test_default_takes_the_persistent_grid_for_short_rows():
    """persistent=-1 compiles the persistent grid for these shapes (the host code asks
    the device's SM count for its grid) and not with persistent=0."""
    _compiler()
    for name, (qs, ks, vs, dtype, kw) in AUTO_PERSISTENT_CASES.items():
        elt = {"bfloat16": "bf16", "float16": "f16"}[dtype]
        for options, expect in (({}, True), ({"persistent": 0}, False)):
            ir = flash_mlir.attention_ir(qs, ks, vs, elt, causal=kw.get("causal", False),
                                         lse=kw.get("return_lse", False))
            host = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", format="isa",
                                      **options)
            assert ("flashRuntimeMultiprocessorCount" in host) == expect, (name, options)


@pytest.mark.parametrize("name", sorted(AUTO_PERSISTENT_CASES))
def test_default_persistent_grid_matches_one_cta_per_item(name):
    """The default call where it is a persistent grid: bit-identical to persistent=0
    (the same tiles in the same order) and within the SDPA-error rule."""
    torch = _cuda()
    qs, ks, vs, dtype, kw = AUTO_PERSISTENT_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    r = flash_mlir.attention(q, k, v, **kw)
    r0 = flash_mlir.attention(q, k, v, persistent=0, **kw)
    torch.cuda.synchronize()
    (o, l), (o0, l0) = (r, r0) if kw.get("return_lse") else ((r, None), (r0, None))
    assert torch.equal(o, o0), (o.double() - o0.double()).abs().max().item()
    if l is not None:
        assert torch.equal(l, l0)
    err, err_sdpa, _ = _errors(torch, o, q, k, v, **kw)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


@pytest.mark.parametrize("name", sorted(TENSORMAP_PARAM_CASES))
def test_tensormaps_by_value_match_device_copies(name):
    """The same kernel taking its TMA maps by value: bit-identical results, and calls
    on inputs never seen before upload nothing (each map rides in its launch)."""
    import ctypes
    torch = _cuda()
    qs, ks, vs, dtype, kw = TENSORMAP_PARAM_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    ref = flash_mlir.attention(q, k, v, tensormap_params=False, **kw)
    # By soname: kernel libraries bind the first libflash_cuda_runtime.so this
    # process loaded (another test's artifacts may have come first), which need
    # not be the cache's copy.
    rt = ctypes.CDLL("libflash_cuda_runtime.so")
    rt.flashRuntimeGetCounter.restype = ctypes.c_int64
    count = lambda n: rt.flashRuntimeGetCounter(n.encode())  # noqa: E731
    got = flash_mlir.attention(q, k, v, tensormap_params=True, **kw)
    torch.cuda.synchronize()
    for a, b in zip(ref, got):
        assert torch.equal(a, b), (a.double() - b.double()).abs().max().item()
    uploads, params = count("tensormap_upload"), count("tensormap_param")
    for seed in range(3):
        q2, k2, v2 = (x.clone() for x in (q, k, v))  # new addresses: new maps
        again = flash_mlir.attention(q2, k2, v2, tensormap_params=True, **kw)
        torch.cuda.synchronize()
        assert torch.equal(again[0], ref[0])
    assert count("tensormap_upload") == uploads
    assert count("tensormap_param") > params


# soft_exp2=N: N of every 8 exponentials of the softmax on the FMA pipes (a polynomial,
# 7.5e-5 relative) instead of the multi-function unit.
SOFT_EXP2_CASES = {
    "d64-causal-f16-all": ((2, 8, 300, 64), (2, 4, 517, 64), (2, 4, 517, 64), "float16",
                           {"causal": True, "align": "bottom_right", "soft_exp2": 8}),
    "d128-dv96-bf16-half": ((2, 4, 260, 128), (2, 4, 700, 128), (2, 4, 700, 96), "bfloat16",
                            {"soft_exp2": 4}),
}


@pytest.mark.parametrize("name", list(SOFT_EXP2_CASES))
def test_soft_exp2_matches_reference(name):
    """Within the SDPA-error rule of the float64 reference, output and LSE, and not
    bit-identical to the call without the option (which would mean it was dropped)."""
    torch = _cuda()
    qs, ks, vs, dtype, kw = SOFT_EXP2_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    mask_kw = {key: kw[key] for key in _MASK_KEYS if key in kw}
    out, lse = flash_mlir.attention(q, k, v, return_lse=True, **kw)
    plain = flash_mlir.attention(q, k, v, **mask_kw)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    assert not torch.equal(out, plain)
    err, err_sdpa, ref_lse = _errors(torch, out, q, k, v, **mask_kw)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)
    lse_err = (lse.double().cpu() - torch.from_numpy(ref_lse)).abs().max().item()
    assert lse_err <= 1e-3, lse_err


def test_persistent_grid_without_keys_writes_zero_rows():
    torch = _cuda()
    kw = _persistent_kw({"return_lse": True, "dynamic": True}, True)
    q, k, v = _inputs(torch, (2, 4, 70, 64), (2, 2, 0, 64), (2, 2, 0, 64), "bfloat16")
    out = torch.full((2, 4, 70, 64), float("nan"), dtype=q.dtype, device="cuda")
    out, lse = flash_mlir.attention(q, k, v, out=out, **kw)
    torch.cuda.synchronize()
    assert (out == 0).all().item() and torch.isneginf(lse).all().item()


def _flex_setup(torch):
    """Fresh q, k, v of FLEX_SHAPE, the closures' arrays and the functions over them."""
    b, h, lq, lk, d = FLEX_SHAPE
    q, k, v = _inputs(torch, (b, h, lq, d), (b, h, lk, d), (b, h, lk, d), "bfloat16")
    bias, doc = _flex_standins(torch, "cuda")
    return (q, k, v, bias, doc) + tuple(_flex_fns(bias, doc))


def _check_flex(torch, out, q, k, v, bias, doc):
    """out against float64 for _flex_fns(bias, doc)."""
    torch.cuda.synchronize()
    _, _, lq, lk, d = FLEX_SHAPE
    qd, kd, vd = (x.double().cpu() for x in (q, k, v))
    s = 20.0 * torch.tanh((qd @ kd.transpose(-1, -2)) * d ** -0.5 / 20.0) + bias.double().cpu()
    dc = doc.cpu()
    vis = (dc[:, None, lk - lq:, None] == dc[:, None, None, :]) | \
        (torch.arange(lk)[None, None, None, :] < 8)
    ref = torch.softmax(torch.where(vis, s, torch.tensor(float("-inf"), dtype=s.dtype)), -1) @ vd
    # bf16 inputs and output: the output's rounding bounds the error.
    err = (out.double().cpu() - ref).abs().max().item()
    assert err < 2e-2, err


def test_flex_style_score_and_mask_mods():
    """Closure arrays read in the kernel, against float64; a mask_mod proved causal runs
    the causal kernel (bit-identical to causal=True)."""
    torch = _cuda()
    q, k, v, bias, doc, sm, mm = _flex_setup(torch)
    out = flash_mlir.attention(q, k, v, score_mod=sm, mask_mod=mm)
    _check_flex(torch, out, q, k, v, bias, doc)
    causal = flash_mlir.attention(q, k, v, mask_mod=_causal_mask_mod)
    want = flash_mlir.attention(q, k, v, causal=True, align="bottom_right")
    torch.cuda.synchronize()
    assert torch.equal(causal, want)


def test_repeated_plain_call_launches_directly():
    """The second plain call with the same shapes and arguments goes straight to the
    kernel's launch (attention()'s _plain_calls): the same output and lse bit for bit,
    from non-contiguous inputs too; inputs that require grad, a different scale and
    out= still take the general path."""
    from flash_mlir import _attention as am
    torch = _cuda()
    q, k, v = _inputs(torch, *TORCH_OP_SHAPES, "bfloat16")
    kw = dict(causal=True, align="bottom_right", return_lse=True)
    o1, l1 = flash_mlir.attention(q, k, v, **kw)
    key = am._plain_key(q, k, v, None, True, None, "bottom_right", True)
    assert key in am._plain_calls
    o2, l2 = flash_mlir.attention(q, k, v, **kw)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)
    o3, l3 = flash_mlir.attention(qt, k, v, **kw)
    torch.cuda.synchronize()
    for a, b in ((o1, o2), (l1, l2), (o1, o3), (l1, l3)):
        assert torch.equal(a, b)
    # o2 is a new tensor, not o1 reused.
    assert o2.data_ptr() != o1.data_ptr()
    err, err_sdpa, _ = _errors(torch, o2, q, k, v, **kw)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)
    qg = q.clone().requires_grad_()
    og, _ = flash_mlir.attention(qg, k, v, **kw)
    assert og.grad_fn is not None
    assert am._plain_key(qg, k, v, None, True, None, "bottom_right", True) is None
    assert am._plain_key(q, k, v, True, True, None, "bottom_right", True) != \
        am._plain_key(q, k, v, 1, True, None, "bottom_right", True)
    with pytest.raises(TypeError):
        flash_mlir.attention(q, k, v, scale=True, **kw)


def test_repeated_flex_call_launches_directly():
    """A Flex-style call made before with the same shapes, functions and array types goes
    straight to the kernel's launch, reading the closures' arrays afresh: new values in
    place, and another closure of the same functions over other arrays, give their own
    results; an array that requires grad takes the general path."""
    from flash_mlir import _attention as am
    torch = _cuda()
    q, k, v, bias, doc, sm, mm = _flex_setup(torch)
    o1 = flash_mlir.attention(q, k, v, score_mod=sm, mask_mod=mm)
    base = am._plain_key(q, k, v, None, False, None, None, False)
    key, arrays = am._flex_call_key(base, sm, mm, (), None)
    assert key in am._plain_calls
    assert [a.data_ptr() for a in arrays] == [bias.data_ptr(), doc.data_ptr()]
    o2 = flash_mlir.attention(q, k, v, score_mod=sm, mask_mod=mm)
    torch.cuda.synchronize()
    assert torch.equal(o1, o2) and o2.data_ptr() != o1.data_ptr()
    bias.mul_(-1.0)
    doc.copy_(torch.randint_like(doc, 0, 4))
    o3 = flash_mlir.attention(q, k, v, score_mod=sm, mask_mod=mm)
    _check_flex(torch, o3, q, k, v, bias, doc)
    bias2, doc2 = _flex_standins(torch, "cuda")
    sm2, mm2 = _flex_fns(bias2, doc2)
    assert am._flex_call_key(base, sm2, mm2, (), None)[0] == key
    o4 = flash_mlir.attention(q, k, v, score_mod=sm2, mask_mod=mm2)
    _check_flex(torch, o4, q, k, v, bias2, doc2)
    bias2.requires_grad_()
    assert am._flex_call_key(base, sm2, mm2, (), None) is None


def test_torch_compile_and_export_keep_one_node():
    """torch 2 on CUDA: attention() in a compiled function and in an exported module is
    torch.ops.flash_mlir.attention, the same kernel as the eager call; the operator's
    autograd gives attention()'s gradients (up to the order of dq's additions)."""
    torch = _cuda()
    if not hasattr(torch, "compile"):
        pytest.skip("torch.compile needs torch 2")
    q, k, v = _inputs(torch, *TORCH_OP_SHAPES, "bfloat16")
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(q, k, v):
        return flash_mlir.attention(q, k, v, causal=True, align="bottom_right",
                                    return_lse=True)

    # Eager first: it registers the operator (as importing torch before flash_mlir does).
    want, want_lse = f(q, k, v)
    got, got_lse = torch.compile(f, backend=backend, fullgraph=True)(q, k, v)
    torch.cuda.synchronize()
    assert torch.equal(got, want) and torch.equal(got_lse, want_lse)
    targets = [str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    assert any("flash_mlir.attention" in t for t in targets), targets

    class M(torch.nn.Module):
        def forward(self, q, k, v):
            return f(q, k, v)[0]

    ep = torch.export.export(M(), (q, k, v))
    assert "flash_mlir.attention" in str(ep.graph)
    assert torch.equal(ep.module()(q, k, v), want)

    qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
    o, _ = torch.ops.flash_mlir.attention(qg, kg, vg, None, True, None, "bottom_right", "")
    do = torch.randn_like(o)
    got_g = torch.autograd.grad(o, (qg, kg, vg), do)
    o2 = flash_mlir.attention(qg, kg, vg, causal=True, align="bottom_right")
    want_g = torch.autograd.grad(o2, (qg, kg, vg), do)
    torch.cuda.synchronize()
    # The same kernels; dq's f32 additions land in either order (grad_deterministic=False).
    for a, b in zip(got_g, want_g):
        assert (a.float() - b.float()).abs().max().item() <= \
            1e-2 * b.float().abs().max().item()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_attention_gpu.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
