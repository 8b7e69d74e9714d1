"""flash_mlir: flash-mlir from Python.

    compile(ir_or_path, pipeline=..., output=..., **options)  run a pipeline (C API)
    attention(q, k, v, *, scale=None, causal=False, ...)      fused attention on
        NumPy arrays (host) or torch tensors (CUDA tensors on the GPU)
    FlashError                                                compilation errors,
        carrying the MLIR diagnostics
    gpu                                                       ctypes launcher for GPU
        kernel libraries (libflash_cuda_runtime)

Everything goes through libFlashCAPI with ctypes: no build-time Python
bindings. NumPy and torch are imported only when used.
"""
from ._capi import FlashError, host_target, is_registered, library_path, version
from ._attention import AttentionKernel, attention, attention_ir
from .compiler import compile

__all__ = ["FlashError", "AttentionKernel", "attention", "attention_ir", "compile",
           "host_target", "is_registered", "library_path", "version"]
