"""flash_mlir.attention in torch's autograd (CPU and CUDA tensors).

The forward runs the fused kernel and keeps only q, k, v, the output and the
row log-sum-exp; the backward runs flash.attention_grad, which recomputes the
probabilities from the log-sum-exp instead of reading a stored Lq x Lk
matrix. Attention sinks take no part in that kernel: their gradient comes
from the output and the log-sum-exp (sinks_grad). On CUDA tensors the
options named grad_* (grad_kernel, grad_block_q, grad_block_k, ...)
configure the backward kernel and the others the forward's; chip goes to
both.
"""
import os

import torch

from . import _attention as am
from .compiler import format_options


def split_options(options, cuda):
    """(forward options, backward options) of attention()'s **options."""
    if not cuda:
        return options, options
    fwd = {k: v for k, v in options.items() if not k.startswith("grad_")}
    # The chip and capture staging mean the same in both passes: both take them.
    shared = ("chip", "stage_captures")
    bwd = {k: v for k, v in options.items() if k.startswith("grad_") or k in shared}
    # The backward's kernel= is grad_kernel=, so each pass can pick its own.
    if "grad_kernel" in bwd:
        bwd["kernel"] = bwd.pop("grad_kernel")
    return fwd, bwd


def grad_library(q_shape, k_shape, v_shape, elt, device, scale, causal, window, align,
                 pipeline, options, use_cache=True, bias=None, softcap=None,
                 alibi_slopes=None, score_mod=None, capture_grads=None):
    """The path of the backward's library (built, or from the cache); bias,
    softcap, alibi_slopes, a traced score_mod and capture_grads as for
    attention_grad_ir."""
    ir = am.attention_grad_ir(q_shape, k_shape, v_shape, elt, scale=scale, causal=causal,
                              window=window, align=align, bias=bias, softcap=softcap,
                              alibi_slopes=alibi_slopes, score_mod=score_mod,
                              capture_grads=capture_grads)
    return ir, am._library_for(ir, device, pipeline, format_options(options), use_cache)


def _grad_kernel(q, k, v, elt, scale, causal, window, align, pipeline, options, bias=None,
                 softcap=None, alibi_slopes=None, score_mod=None, capture_grads=None):
    device = "cuda" if q.is_cuda else "cpu"
    traced_key = None if score_mod is None else (tuple(score_mod[0]), score_mod[1])
    key = ("grad", device, tuple(q.shape), tuple(k.shape), tuple(v.shape), elt, scale, causal,
           window, align, pipeline, tuple(options.items()), os.environ.get("FLASH_MLIR_CACHE_DIR"),
           bias, softcap, alibi_slopes, traced_key, capture_grads)
    with am._kernels_lock:
        kernel = am._kernels.get(key)
        if kernel is None:
            _, path = grad_library(q.shape, k.shape, v.shape, elt, device, scale, causal,
                                   window, align, pipeline, options, bias=bias,
                                   softcap=softcap, alibi_slopes=alibi_slopes,
                                   score_mod=score_mod, capture_grads=capture_grads)
            if device == "cpu":
                from .cpu import HostLibrary
                lib = HostLibrary(path)
                kernel = lambda args: lib.call(
                    am.FUNC_NAME + "_grad", *[am._host_view(x) for x in args])
            else:
                from .gpu import KernelLibrary, current_stream_handle
                lib = KernelLibrary(path)
                index = q.device.index
                launchers = []

                def kernel(args, lib=lib, index=index, launchers=launchers):
                    # The captures' ranks are the arguments'; bound on the first call.
                    if not launchers:
                        launchers.append(lib.launcher(am.FUNC_NAME + "_grad",
                                                      [a.dim() for a in args]))
                    launchers[0](args, current_stream_handle(index), index)
            am._kernels[key] = kernel
    return kernel


def _run_grad(q, k, v, o, do, lse, scale, causal, window, align, pipeline, options,
              bias_ir=None, softcap=None, slopes_shape=None, traced=None, caps=(),
              wanted=None):
    """(dq, dk, dv, capture gradients) from flash.attention_grad; options are
    the backward's (split_options). wanted: per float capture, whether its
    gradient is needed (default all); an unneeded one comes back None and is
    not computed."""
    caps = [c.contiguous() for c in caps]
    # Float captures have gradients (in their dtype); integer and bool ones none.
    floats = [c for c in caps if c.is_floating_point()]
    wanted = (True,) * len(floats) if wanted is None else tuple(wanted)
    elt = am._TORCH_TYPES[str(q.dtype)]
    kernel = _grad_kernel(q, k, v, elt, scale, causal, window, align, pipeline, options,
                          bias_ir, softcap, slopes_shape, traced,
                          None if all(wanted) else wanted)
    do = do.to(q.dtype)
    dq, dk, dv = (torch.empty_like(x, memory_format=torch.contiguous_format)
                  for x in (q, k, v))
    ins = [x.detach().contiguous() for x in (q, k, v, o, do, lse)]
    dcaps = [torch.empty_like(c) if w else None for c, w in zip(floats, wanted)]
    kernel(ins + caps + [dq, dk, dv] + [x for x in dcaps if x is not None])
    return dq, dk, dv, dcaps


def attention_backward(q, k, v, o, do, lse, *, scale=None, causal=False, window=None,
                       align="top_left", pipeline=None, **options):
    """(dq, dk, dv) of o = attention(q, k, v, ...) for the cotangent do, from
    the forward's output o and row log-sum-exp lse (torch tensors, CPU or
    CUDA): flash.attention_grad, which recomputes the probabilities from lse.

    o and lse need not come from a call on these q, k, v: with the output and
    lse of attention over a larger key set (keys split over calls, or over the
    ranks of a ring), it gives this key subset's share of dq and its exact dk
    and dv, since P = exp(s - lse) and rowsum(do * o) are then the whole
    row's. Options as attention()'s (grad_* ones configure the GPU kernel)."""
    for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("do", do), ("lse", lse)):
        if not isinstance(x, torch.Tensor):
            raise TypeError("%s must be a torch tensor, got %s" % (name, type(x).__name__))
    for name, x in (("k", k), ("v", v), ("o", o)):
        if x.dtype != q.dtype:
            raise TypeError("%s is %s but q is %s: q, k, v and o take one dtype"
                            % (name, x.dtype, q.dtype))
    for name, x in (("k", k), ("v", v), ("o", o), ("do", do), ("lse", lse)):
        if x.device != q.device:
            raise ValueError("%s is on %s, q on %s" % (name, x.device, q.device))
    if lse.dtype != torch.float32:
        raise TypeError("lse must be float32 (attention()'s return_lse), got %s" % lse.dtype)
    am._check_scale(scale)
    am._check_window(window)
    _, options = split_options(options, q.is_cuda)
    dq, dk, dv, _ = _run_grad(q, k, v, o, do, lse, scale, causal, window, align, pipeline,
                              options)
    return dq, dk, dv


def sinks_grad(sinks, o, do, lse):
    """The gradient of the sinks [Hq] from the forward's output o, its
    cotangent do and its (sink-inclusive) row log-sum-exp lse [batch..., Hq, Lq].

    Exact: a sink is a key of value zero whose probability in row r is
    p_sink = exp(sinks[h] - lse[r]). Its logit enters the row only through
    the softmax's denominator, so d p_j / d sink = -p_sink p_j for every real
    key j, and with o = sum_j p_j v_j, dL/d sink = -p_sink (do . o) for the
    row; the sink's own value is zero, so nothing else depends on it. A sink
    sums over every batch index and query row of its head."""
    lse = lse.float()
    delta = (do.float() * o.float()).sum(-1)
    logit = sinks.detach().float().reshape(-1, 1)
    # lse = -inf only where the row has no mass at all (a sink of -inf and no
    # visible key): its output is 0, and so is its share.
    p_sink = torch.where(torch.isneginf(lse), torch.zeros_like(lse), torch.exp(logit - lse))
    dims = [d for d in range(lse.dim()) if d != lse.dim() - 2]
    dsinks = -(p_sink * delta).double().sum(dim=dims)
    return dsinks.to(sinks.dtype)


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, slopes, sinks, cfg, *mod_args):
        scale, causal, window, align, dynamic, pipeline, cache, options, softcap, fn = cfg
        options, _ = split_options(options, q.is_cuda)
        mod_args = tuple(a.detach() for a in mod_args)
        with torch.no_grad():
            # The sinks' kernel: its lse counts the sinks, which is what makes
            # the backward below exact.
            o, lse = am.attention(q.detach(), k.detach(), v.detach(), scale=scale,
                                  causal=causal, window=window, align=align,
                                  return_lse=True, dynamic=dynamic, pipeline=pipeline,
                                  cache=cache, bias=None if bias is None else bias.detach(),
                                  softcap=softcap,
                                  alibi_slopes=None if slopes is None else slopes.detach(),
                                  score_mod=fn, score_mod_args=mod_args,
                                  sinks=sinks.detach() if isinstance(sinks, torch.Tensor)
                                  else sinks, **options)
        ctx.has_bias, ctx.has_slopes = bias is not None, slopes is not None
        ctx.has_sinks = sinks is not None
        ctx.num_mod_args = len(mod_args)
        # The backward differentiates the region the forward ran.
        ctx.traced = None if fn is None else am.traced_score_mod(
            fn, tuple(q.shape), am.score_mod_arg_specs(mod_args, am._classify(q)[0]))
        ctx.save_for_backward(q, k, v, o, lse,
                              *[x for x in (bias, slopes, sinks) if x is not None], *mod_args)
        ctx.cfg = cfg
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse = ctx.saved_tensors[:5]
        rest = list(ctx.saved_tensors[5:])
        bias = rest.pop(0) if ctx.has_bias else None
        slopes = rest.pop(0) if ctx.has_slopes else None
        sinks = rest.pop(0) if ctx.has_sinks else None
        mod_args = rest[:ctx.num_mod_args]
        scale, causal, window, align, _, pipeline, _, options, softcap, _ = ctx.cfg
        _, options = split_options(options, q.is_cuda)
        bias_ir = None
        if bias is not None:
            bias_ir = (tuple(bias.shape), am._TORCH_TYPES[str(bias.dtype)])
        # The bias enters as its capture (without its size-1 dims); so does
        # its gradient, summed over the broadcast dims by the op.
        caps = []
        if bias is not None:
            caps.append(am.bias_capture(q, k, bias.detach()))
        if slopes is not None:
            caps.append(slopes.detach())
        caps += list(mod_args)
        # Which float captures' gradients autograd asks for (forward's inputs:
        # q, k, v, bias, slopes, sinks, cfg, *mod_args); the others are not computed.
        need = ctx.needs_input_grad
        wanted = ([need[3]] if bias is not None else []) + \
            ([need[4]] if slopes is not None else []) + \
            [need[7 + i] for i, a in enumerate(mod_args) if a.is_floating_point()]
        if any(need[:3]) or any(wanted):
            # flash.attention_grad knows nothing of sinks and needs not: it
            # recomputes P = exp(s - lse) from the forward's lse, which counts
            # the sink, so P is the real keys' probabilities in the sinks'
            # softmax; and dS = P (dP - rowsum(do o)) is that softmax's
            # derivative too, since the sink's term p_sink (do . v_sink) in
            # sum_k p_k dP_k is zero (its value is zero), leaving do . o.
            dq, dk, dv, dcaps = _run_grad(q, k, v, o, do, lse, scale, causal, window, align,
                                          pipeline, options, bias_ir, softcap,
                                          None if slopes is None else tuple(slopes.shape),
                                          ctx.traced, caps, wanted)
        else:  # only the sinks' gradient is asked for
            dq = dk = dv = None
            dcaps = [None] * len(wanted)
        dbias = dcaps.pop(0) if bias is not None else None
        dbias = None if dbias is None else dbias.reshape(bias.shape)
        dslopes = dcaps.pop(0) if slopes is not None else None
        dargs = [dcaps.pop(0) if a.is_floating_point() else None for a in mod_args]
        dsinks = sinks_grad(sinks, o, do, lse) if sinks is not None and need[5] else None
        return (dq, dk, dv, dbias, dslopes, dsinks, None, *dargs)


def attention_with_grad(q, k, v, *, scale, causal, window, align, return_lse, dynamic,
                        pipeline, cache, options, bias=None, softcap=None,
                        alibi_slopes=None, score_mod=None, score_mod_args=(), sinks=None):
    """The forward honours every keyword of attention(); the backward kernel
    is built for the arrays' shapes (and cached like every kernel)."""
    o, lse = _Attention.apply(q, k, v, bias, alibi_slopes, sinks,
                              (scale, causal, window, align, dynamic, pipeline, cache, options,
                               softcap, score_mod), *score_mod_args)
    return (o, lse) if return_lse else o
