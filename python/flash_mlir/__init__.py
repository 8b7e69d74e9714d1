"""flash_mlir: flash-mlir from Python.

    compile(ir_or_path, pipeline=..., output=..., **options)  run a pipeline (C API)
    attention(q, k, v, *, scale=None, causal=False, ...)      fused attention on
        NumPy arrays (host) or torch tensors (CUDA tensors on the GPU)
    prebuild(q_shape, k_shape, v_shape, dtype, ...)           compile attention's kernel
        into the cache ahead of time (for a GPU machine without LLVM)
    tune(q, k, v, *, causal=False, ...)                       time the kernel options worth
        trying on these arrays and record the fastest for attention() (flash_mlir.tuning)
    merge_attention(outs, lses)                               the exact merge of partial
        results over disjoint key sets by their log-sum-exps (NumPy or torch)
    attention_backward(q, k, v, o, do, lse, ...)              dq, dk, dv from a forward's
        output and log-sum-exp (torch)
    distributed.ring_attention(q, k, v, group=..., ...)       context-parallel (ring)
        attention over torch.distributed, forward and backward
    compiler_available()                                      whether the compiler loads here
    FlashError                                                compilation errors,
        carrying the MLIR diagnostics
    gpu                                                       ctypes launcher for GPU
        kernel libraries (libflash_cuda_runtime)

Everything goes through libFlashCAPI with ctypes: no build-time Python
bindings. NumPy and torch are imported only when used. Nothing loads the compiler at
import: on a machine without LLVM, attention() runs GPU kernels from the cache.
"""
from ._version import __version__
from ._capi import FlashError, host_target, is_registered, library_path, version
from ._capi import available as compiler_available
from ._attention import AttentionKernel, attention, attention_grad_ir, attention_ir, prebuild
from .compiler import compile
from .merge import merge_attention
from . import tuning
from .tuning import tune

# attention_backward and distributed import torch, so they load on first use
# (and stay out of __all__: `import *` must not import torch).
__all__ = ["FlashError", "AttentionKernel", "attention", "attention_grad_ir", "attention_ir", "compile",
           "compiler_available", "host_target", "is_registered", "library_path",
           "merge_attention", "prebuild", "tune", "tuning", "version"]


def __getattr__(name):
    if name == "attention_backward":
        from ._autograd import attention_backward
        return attention_backward
    if name == "distributed":
        import importlib
        return importlib.import_module(".distributed", __name__)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


# With torch already imported, torch.ops.flash_mlir.attention exists from now on, so a
# torch.compile / torch.export capture finds it (registering cannot happen inside one).
import sys as _sys  # noqa: E402
if "torch" in _sys.modules:
    from . import torch_library as _torch_library
    _torch_library.register()
