"""flash_mlir.attention in torch's autograd (CPU tensors).

The forward runs the fused kernel and keeps only q, k, v, the output and the
row log-sum-exp; the backward runs flash.attention_grad, which recomputes the
probabilities from the log-sum-exp instead of reading a stored Lq x Lk
matrix.
"""
import torch

from . import _attention as am
from .compiler import format_options


def _grad_kernel(q, k, v, elt, scale, causal, window, align, pipeline, options):
    ir = am.attention_grad_ir(q.shape, k.shape, v.shape, elt, scale=scale, causal=causal,
                              window=window, align=align)
    opts = format_options(options)
    key = ("grad", ir, pipeline, opts)
    with am._kernels_lock:
        kernel = am._kernels.get(key)
        if kernel is None:
            path = am._library_for(ir, "cpu", pipeline, opts)
            from .cpu import HostLibrary
            kernel = HostLibrary(path)
            am._kernels[key] = kernel
    return kernel


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, cfg):
        scale, causal, window, align, dynamic, pipeline, cache, options = cfg
        with torch.no_grad():
            o, lse = am.attention(q.detach(), k.detach(), v.detach(), scale=scale,
                                  causal=causal, window=window, align=align,
                                  return_lse=True, dynamic=dynamic, pipeline=pipeline,
                                  cache=cache, **options)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.cfg = cfg
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse = ctx.saved_tensors
        scale, causal, window, align, _, pipeline, _, options = ctx.cfg
        elt = am._TORCH_TYPES[str(q.dtype)]
        kernel = _grad_kernel(q, k, v, elt, scale, causal, window, align, pipeline, options)
        do = do.to(q.dtype).contiguous()
        dq, dk, dv = (torch.empty_like(x, memory_format=torch.contiguous_format)
                      for x in (q, k, v))
        args = [q, k, v, o, do, lse, dq, dk, dv]
        kernel.call(am.FUNC_NAME + "_grad",
                    *[am._host_view(x.contiguous()) for x in args[:6]],
                    *[am._host_view(x) for x in args[6:]])
        return dq, dk, dv, None


def attention_with_grad(q, k, v, *, scale, causal, window, align, return_lse, dynamic,
                        pipeline, cache, options):
    """The forward honours every keyword of attention(); the backward kernel
    is built for the arrays' shapes (and cached like every kernel)."""
    o, lse = _Attention.apply(q, k, v, (scale, causal, window, align, dynamic, pipeline,
                                        cache, options))
    return (o, lse) if return_lse else o
