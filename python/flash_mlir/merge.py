"""Merging partial attention results by their log-sum-exps.

Attention over a key set that is split into disjoint parts is exactly the
merge of the attentions over the parts: part i, with output O_i and row
log-sum-exp L_i, holds the softmax normalised over its own keys, so its share
of the whole is exp(L_i - L) with L = log sum_i exp(L_i), and

    O = sum_i exp(L_i - L) O_i.

Split-KV decode, ring (context-parallel) attention and two calls over two
halves of a key range are all this one formula. The weights are taken
relative to the largest L_i, so no exp overflows; a part whose L_i is -inf
saw no key (attention() gives it output 0) and weighs exactly 0, whatever its
output holds; a row that no part saw gives output 0 and lse -inf, never NaN.
"""

__all__ = ["merge_attention"]


def merge_attention(outs, lses, *, out_dtype=None):
    """(out, lse) of attention over the union of disjoint key sets, from the
    partial results over each set.

    outs: a sequence of outputs [..., L, Dv], lses: their row log-sum-exps
    [..., L] (what attention(..., return_lse=True) returns), all NumPy arrays
    or all torch tensors (on one device) of matching shapes. The arithmetic is
    float32 (float64 when any input is), so bf16/f16 outputs are accumulated
    at full precision; out has out_dtype (default: the outputs' dtype), lse
    the working precision. Under torch autograd the merge is differentiable
    like any composition of torch operations."""
    outs, lses = list(outs), list(lses)
    if not outs:
        raise ValueError("merge_attention: outs is empty (nothing to merge)")
    if len(outs) != len(lses):
        raise ValueError("merge_attention: %d outputs but %d lses" % (len(outs), len(lses)))
    torch_inputs = [type(x).__module__.startswith("torch") for x in outs + lses]
    if all(torch_inputs):
        xp = _Torch()
    elif not any(torch_inputs):
        xp = _NumPy()
    else:
        raise TypeError("merge_attention: outs and lses must be all NumPy arrays or all torch "
                        "tensors, got %s" % sorted({type(x).__name__ for x in outs + lses}))
    shape = tuple(outs[0].shape)
    if len(shape) < 1:
        raise ValueError("merge_attention: outputs must be [..., L, Dv], got shape %s"
                         % (shape,))
    for name, xs, want in (("outs", outs, shape), ("lses", lses, shape[:-1])):
        for i, x in enumerate(xs):
            if tuple(x.shape) != want:
                raise ValueError("merge_attention: %s[%d] has shape %s, expected %s (outs[0] "
                                 "is %s)" % (name, i, tuple(x.shape), want, shape))
    xp.check_devices(outs + lses)
    work = xp.working_dtype(outs + lses)
    if out_dtype is None:
        out_dtype = xp.result_dtype(outs)
    lse = xp.stack([xp.cast(x, work) for x in lses])
    top = lse.max(0) if xp.is_numpy else lse.amax(0)
    # A row no part saw: weights exp(-inf - 0) = 0 instead of exp(-inf + inf) = NaN.
    top = xp.where(top == float("-inf"), 0.0, top)
    w = xp.exp(lse - top[None])
    total = w.sum(0)
    out = None
    for i, o in enumerate(outs):
        # A part that saw no key weighs 0; where() keeps a NaN it might hold out of the sum.
        term = xp.where(w[i][..., None] > 0, xp.cast(o, work), 0.0) * w[i][..., None]
        out = term if out is None else out + term
    live = total > 0
    out = xp.where(live[..., None], out / xp.where(live, total, 1.0)[..., None], 0.0)
    return xp.cast(out, out_dtype), top + xp.log(total)


class _NumPy:
    is_numpy = True

    def __init__(self):
        import numpy as np
        self.np = np

    def check_devices(self, xs):
        pass

    def working_dtype(self, xs):
        return self.np.float64 if any(x.dtype == self.np.float64 for x in xs) \
            else self.np.float32

    def result_dtype(self, xs):
        return self.np.result_type(*xs)

    def stack(self, xs):
        return self.np.stack(xs)

    def cast(self, x, dtype):
        return self.np.asarray(x, dtype=dtype)

    def where(self, c, a, b):
        return self.np.where(c, a, b)

    def exp(self, x):
        return self.np.exp(x)

    def log(self, x):
        with self.np.errstate(divide="ignore"):  # log(0) = -inf: the row saw no key
            return self.np.log(x)


class _Torch:
    is_numpy = False

    def __init__(self):
        import torch
        self.torch = torch

    def check_devices(self, xs):
        devices = {str(x.device) for x in xs}
        if len(devices) != 1:
            raise ValueError("merge_attention: outs and lses must be on one device, got %s"
                             % sorted(devices))

    def working_dtype(self, xs):
        return self.torch.float64 if any(x.dtype == self.torch.float64 for x in xs) \
            else self.torch.float32

    def result_dtype(self, xs):
        dtype = xs[0].dtype
        for x in xs[1:]:
            dtype = self.torch.promote_types(dtype, x.dtype)
        return dtype

    def stack(self, xs):
        return self.torch.stack(xs)

    def cast(self, x, dtype):
        return x.to(dtype)

    def where(self, c, a, b):
        if not isinstance(a, self.torch.Tensor):
            a = self.torch.tensor(a, dtype=b.dtype, device=b.device)
        if not isinstance(b, self.torch.Tensor):
            b = self.torch.tensor(b, dtype=a.dtype, device=a.device)
        return self.torch.where(c, a, b)

    def exp(self, x):
        return self.torch.exp(x)

    def log(self, x):
        return self.torch.log(x)
