"""flash_mlir.attention as a torch operator, `torch.ops.flash_mlir.attention`, so torch's
graph capture keeps it as one node (torch.compile, torch.export) instead of tracing into
its ctypes calls.

    o, lse = torch.ops.flash_mlir.attention(q, k, v, scale, causal, window, align, options)

scale: float or None (1/sqrt(D)); causal: bool; window: int or None; align: "top_left" or
"bottom_right"; options: the kernel options as "key=value;..." with Python literals as
values ("" for none; options_string makes it). It returns
the output and the f32 row log-sum-exp, has a fake (meta) implementation that gives their
shapes and dtypes without running anything, and a backward (flash.attention_grad, P
recomputed from the lse) for autograd. attention() calls it by itself while torch is
capturing a graph (torch.compiler.is_compiling()) for the arguments the schema carries (no
score_mod, mask_mod, bias, sinks, paged or packed batches, out=, dynamic). On torch older than 2.4
(no torch.library.custom_op) the operator is registered with torch.library.Library, its
CPU, CUDA, Meta and Autograd kernels given one by one.
"""
import ast

import torch

from . import _attention as am

NAME = "flash_mlir::attention"
_registered = False


def _shapes(q, v):
    return q.shape[:-1] + v.shape[-1:], q.shape[:-1]


def parse_options(text):
    """options_string's inverse."""
    items = (item.split("=", 1) for item in text.split(";") if item)
    return {key: ast.literal_eval(value) for key, value in items}


def _run(q, k, v, scale, causal, window, align, options):
    with torch.no_grad():
        o, lse = am.attention(q.detach(), k.detach(), v.detach(), scale=scale, causal=causal,
                              window=window, align=align, return_lse=True,
                              **parse_options(options))
    return o, lse


def _fake(q, k, v, scale, causal, window, align, options):
    o_shape, l_shape = _shapes(q, v)
    return q.new_empty(o_shape), q.new_empty(l_shape, dtype=torch.float32)


def _backward_of(saved, do, cfg):
    from ._autograd import attention_backward
    q, k, v, o, lse = saved
    scale, causal, window, align, options = cfg
    return attention_backward(q, k, v, o, do, lse, scale=scale, causal=causal, window=window,
                              align=align, **parse_options(options))


def register():
    """Registers torch.ops.flash_mlir.attention (once per process)."""
    global _registered
    if _registered:
        return
    _registered = True
    if hasattr(torch.library, "custom_op"):
        _register_custom_op()
    else:
        _register_library()
    am._torch_op_registered = True


def _register_custom_op():
    from typing import Optional, Tuple

    @torch.library.custom_op(NAME, mutates_args=(), device_types=("cpu", "cuda"))
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: Optional[float],
                  causal: bool, window: Optional[int], align: str,
                  options: str) -> Tuple[torch.Tensor, torch.Tensor]:
        return _run(q, k, v, scale, causal, window, align, options)

    attention.register_fake(_fake)

    def setup_context(ctx, inputs, output):
        q, k, v, scale, causal, window, align, options = inputs
        ctx.save_for_backward(q, k, v, output[0], output[1])
        ctx.cfg = (scale, causal, window, align, options)

    def backward(ctx, do, dlse):
        dq, dk, dv = _backward_of(ctx.saved_tensors, do, ctx.cfg)
        return dq, dk, dv, None, None, None, None, None

    attention.register_autograd(backward, setup_context=setup_context)


class _Function(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, scale, causal, window, align, options):
        o, lse = (_fake if q.device.type == "meta" else _run)(q, k, v, scale, causal, window,
                                                             align, options)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.cfg = (scale, causal, window, align, options)
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        dq, dk, dv = _backward_of(ctx.saved_tensors, do, ctx.cfg)
        return dq, dk, dv, None, None, None, None, None


_library = None


def _register_library():
    global _library
    _library = torch.library.Library("flash_mlir", "DEF")
    _library.define("attention(Tensor q, Tensor k, Tensor v, float? scale, bool causal, "
                    "int? window, str align, str options) -> (Tensor, Tensor)")
    for key in ("CPU", "CUDA"):
        _library.impl("attention", _run, key)
    _library.impl("attention", _fake, "Meta")
    _library.impl("attention", lambda *a: _Function.apply(*a), "Autograd")


def options_string(options):
    """attention()'s **options as the operator's `options` string, sorted (equal options,
    one string). Plain string formatting, which torch's graph capture traces through."""
    return ";".join("%s=%r" % (key, options[key]) for key in sorted(options))
