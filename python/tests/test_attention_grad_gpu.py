"""The backward on the GPU: flash_mlir.attention on CUDA tensors in autograd
(flash.attention_grad's key-block kernel and its row kernels).

Each of dq, dk and dv is compared with float64 gradients of the same (rounded)
inputs and cotangent, and must be within twice the error of torch SDPA's own
backward on those inputs (plus 1e-3 of the gradient's largest magnitude). Run
where the kernels are, or fill a cache folder here with
    python3 python/tests/test_attention_grad_gpu.py --prebuild DIR
and run with FLASH_MLIR_CACHE_DIR=DIR on the GPU machine."""
import math
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from test_attention_gpu import _compiler, _cuda, _keep_fn  # noqa: E402


def _case(b, hq, hkv, lq, lk, d, dv=None, dtype="bfloat16", **kw):
    dv = dv or d
    return (b, hq, lq, d), (b, hkv, lk, d), (b, hkv, lk, dv), dtype, kw


# name -> (q, k, v shapes, dtype, attention() keywords): D in {64, 128}, L from 1 to
# 4097, every mask kind and alignment, GQA 4:1, bf16 and f16, both kernels (wgmma takes
# D = Dv in {64, 128} and D = 128 / Dv = 64 by default on sm_90a; the block options,
# grad_dq="atomic", other head dims and grad_kernel="mma" take mma.sync).
CASES = {
    "d64-l1": _case(2, 4, 4, 1, 1, 64),
    "d128-l100-causal": _case(2, 4, 4, 100, 100, 128, causal=True),
    "d64-l1024-gqa4": _case(1, 8, 2, 1024, 1024, 64),
    "d128-l1024-gqa4-causal-f16": _case(1, 8, 2, 1024, 1024, 128, dtype="float16",
                                        causal=True),
    "d128-l4097-causal-br": _case(1, 4, 4, 3000, 4097, 128, causal=True,
                                  align="bottom_right"),
    "d64-l4097-f16": _case(1, 2, 2, 4097, 4097, 64, dtype="float16"),
    "d64-window-tl": _case(2, 4, 2, 1024, 1500, 64, window=200),
    "d128-window-br-f16": _case(1, 4, 1, 777, 1300, 128, dtype="float16", window=333,
                                align="bottom_right"),
    "d128-dv64": _case(2, 4, 4, 333, 777, 128, dv=64),
    "d64-dv128-causal": _case(2, 2, 2, 500, 300, 64, dv=128, causal=True),
    "d64-lq1-lk4097-gqa4": _case(3, 8, 2, 1, 4097, 64),
    "d64-block-k128": _case(2, 4, 4, 700, 900, 64, causal=True, grad_block_k=128),
    "d128-block-q64": _case(1, 4, 4, 700, 900, 128, grad_block_q=64),
    "d32-dv16": _case(2, 2, 2, 129, 65, 32, dv=16),
    # Heads wider than 128: two CTAs per key block, each owning half of dK, dV, dQ's columns.
    "d256-causal-gqa": _case(1, 4, 2, 1000, 1100, 256, causal=True),
    "d256-dv128-window-f16": _case(2, 2, 2, 333, 500, 256, dv=128, dtype="float16",
                                   window=100),
    "d192-dv128-causal-br": _case(1, 4, 4, 700, 600, 192, dv=128, causal=True,
                                  align="bottom_right"),
    "d256-l1": _case(2, 2, 2, 1, 1, 256),
    # The mma.sync kernel on shapes the wgmma kernel takes by default.
    "d128-l1024-gqa4-causal-mma": _case(1, 8, 2, 1024, 1000, 128, causal=True,
                                        grad_kernel="mma"),
    "d64-window-br-mma": _case(2, 4, 4, 900, 1300, 64, window=300, align="bottom_right",
                               grad_kernel="mma"),
    # dQ by per-element f32 atomics (the sm_80 path) instead of bulk reductions.
    "d128-atomic-dq-gqa4": _case(1, 8, 2, 700, 900, 128, causal=True, grad_dq="atomic"),
    "d64-atomic-dq-block-q32": _case(2, 4, 4, 333, 555, 64, grad_dq="atomic", grad_block_q=32),
}
# grad_deterministic: dQ's reductions in key-block order, so dq is bit-identical from run
# to run (GQA, both mask edges of a window, many key blocks per query block).
DETERMINISTIC = {
    "gqa4-causal": _case(2, 8, 2, 1000, 1500, 128, causal=True, align="bottom_right",
                         grad_deterministic=True),
    "window-d64": _case(1, 4, 4, 2000, 2100, 64, window=700, grad_deterministic=True),
}
# Bottom-right causal with Lq > Lk: the first Lq - Lk rows see no key.
DEAD_ROWS = _case(2, 4, 2, 300, 100, 64, causal=True, align="bottom_right")
EMPTY_KEYS = _case(1, 2, 2, 50, 0, 64)



def _row_temperature(s, b, h, i, j, t):
    """A traced score_mod whose capture is read per (head, query row): a per-query
    temperature (an additive per-row term would have no gradient at all)."""
    return s * t[h, i]


# Score modifications on the backward kernels: name -> (case, modification). Every
# read pattern of a float capture — per score (a full bias), per (query, key) shared by
# the batch and heads, per key, per (head, query) and per head (ALiBi's slopes) — so
# its gradient is summed over what the read leaves out; bf16 captures (rounded from the
# f32 accumulator) and f32 ones; both kernels.
SCORE_MODS = {
    "bias-full-gqa-d128": (_case(2, 4, 2, 300, 500, 128), dict(bias=((2, 4, 300, 500),
                                                                      "bfloat16"))),
    "bias-shared-causal-d64": (_case(2, 4, 4, 700, 650, 64, causal=True),
                               dict(bias=((700, 650), "float32"))),
    "bias-keys-d128-dv64": (_case(2, 4, 4, 257, 500, 128, dv=64),
                            dict(bias=((2, 1, 1, 500), "float32"))),
    "softcap-causal-gqa4-d128": (_case(1, 8, 2, 1000, 1100, 128, causal=True,
                                       align="bottom_right"), dict(softcap=2.0)),
    "alibi-window-d64-f16": (_case(2, 4, 2, 900, 1100, 64, dtype="float16", window=300,
                                   align="bottom_right"), dict(slopes=(4,))),
    "softcap-bias-d96-mma": (_case(1, 4, 4, 333, 555, 96, dv=64),
                             dict(softcap=3.0, bias=((1, 4, 333, 555), "bfloat16"))),
    "softcap-d256-gemma": (_case(1, 4, 2, 512, 600, 256, causal=True), dict(softcap=50.0)),
    "row-temperature-fn-mma": (_case(2, 4, 2, 400, 300, 64, causal=True, grad_kernel="mma"),
                               dict(fn=(_row_temperature, (4, 400)))),
    "row-temperature-fn-d128": (_case(1, 4, 4, 1000, 700, 128), dict(fn=(_row_temperature,
                                                                        (4, 1000)))),
}


# Captures read as cap[..., q_idx, kv_idx] whose rows are multiples of 16 bytes: the
# wgmma backward stages 64-key x 64-query boxes of them per step in the part of the
# dS slot each consumer warpgroup writes after reading them (16-bit elements by
# ldmatrix.trans, booleans as bytes), and reads the buffer in blocks that cross Lq,
# Lk or a mask edge. name -> (case, a bf16 bias of that shape, or a boolean [Lq, Lk]
# mask tensor through score_mod): tail rows and keys, GQA, a head index, causal
# bottom-right, D = 64 (128 query rows a step) and 128 (64).
GRAD_STAGED_CASES = {
    "bias-bf16-heads-gqa-d128": (_case(2, 4, 2, 300, 520, 128),
                                 dict(bias=(2, 4, 300, 520))),
    "bias-bf16-causal-br-d64": (_case(1, 4, 4, 648, 712, 64, causal=True,
                                      align="bottom_right"), dict(bias=(648, 712))),
    "mask-causal-br-d128": (_case(2, 4, 4, 300, 528, 128, causal=True,
                                  align="bottom_right"), dict(keep=(300, 528))),
    "mask-gqa-d64": (_case(2, 8, 2, 200, 336, 64), dict(keep=(200, 336))),
}


def _staged_call(mod, on):
    if "bias" in mod:
        return dict(bias=(mod["bias"], "bfloat16"), stage_captures=int(on))
    return dict(score_mod=_keep_fn, score_mod_args=[(mod["keep"], "bool")],
                stage_captures=int(on))


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, (qs, ks, vs, dtype, kw) in (list(CASES.items()) + list(DETERMINISTIC.items())
                                          + [("dead", DEAD_ROWS), ("empty", EMPTY_KEYS)]):
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, grad=True, **kw))
    for name, ((qs, ks, vs, dtype, kw), mod) in SCORE_MODS.items():
        extra = {}
        if "bias" in mod:
            extra["bias"] = mod["bias"]
        if "softcap" in mod:
            extra["softcap"] = mod["softcap"]
        if "slopes" in mod:
            extra["alibi_slopes"] = mod["slopes"]
        if "fn" in mod:
            extra["score_mod"] = mod["fn"][0]
            extra["score_mod_args"] = [(mod["fn"][1], "float32")]
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, grad=True, **kw, **extra))
    for name, ((qs, ks, vs, dtype, kw), mod) in GRAD_STAGED_CASES.items():
        for on in (True, False):
            print(name, on, flash_mlir.prebuild(qs, ks, vs, dtype, grad=True, **kw,
                                                **_staged_call(mod, on)))


def _allowed(torch, lq, lk, causal=False, window=None, align="top_left", **_):
    if not causal and window is None:
        return None
    i = torch.arange(lq, device="cuda")[:, None]
    j = torch.arange(lk, device="cuda")[None, :]
    diag = i + (lk - lq if align == "bottom_right" else 0)
    allowed = j <= diag
    if window is not None:
        allowed &= j > diag - window
    return allowed


def _inputs(torch, qs, ks, vs, dtype):
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(*s, device="cuda", dtype=dt, generator=g) for s in (qs, ks, vs))
    do = torch.randn(*(qs[:-1] + vs[-1:]), device="cuda", dtype=dt, generator=g)
    return q, k, v, do


def _reference(torch, q, k, v, do, scale, allowed):
    """float64 gradients from the definition; a row that sees no key has p = 0."""
    q, k, v = (x.double().detach().requires_grad_() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = scale * q @ kk.transpose(-1, -2)
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(-1, keepdim=True)
    live = torch.isfinite(m)
    p = torch.exp(s - torch.where(live, m, torch.zeros_like(m)))
    l = p.sum(-1, keepdim=True)
    p = p / torch.where(l > 0, l, torch.ones_like(l))
    (p @ vv).backward(do.double())
    return q.grad, k.grad, v.grad


def _sdpa(torch, q, k, v, do, scale, allowed):
    import torch.nn.functional as F
    q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    o = F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                       attn_mask=allowed, scale=scale)
    o.backward(do)
    return q.grad, k.grad, v.grad


def _check(torch, ours, ref, sdpa, names=("dq", "dk", "dv")):
    for name, x, r, s in zip(names, ours, ref, sdpa):
        assert x.dtype == s.dtype and x.shape == r.shape, name
        assert not torch.isnan(x).any(), name
        err = (x.double() - r).abs().max().item()
        err_sdpa = (s.double() - r).abs().max().item()
        # Relative to the gradient, plus an absolute 1e-5 for a gradient that is 0 in
        # exact arithmetic (dq with one key: dS = dP - rowsum(dO ∘ O) = 0), where both
        # errors are f32 rounding of a cancellation; bf16 errors are 1e-3 and up.
        floor = 1e-3 * r.abs().max().item() + 1e-5
        assert err <= 2 * err_sdpa + floor, (name, err, err_sdpa, floor)


def _run(torch, case):
    qs, ks, vs, dtype, kw = case
    q, k, v, do = _inputs(torch, qs, ks, vs, dtype)
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    o = flash_mlir.attention(qg, kg, vg, **kw)
    o.backward(do)
    torch.cuda.synchronize()
    return (q, k, v, do), (qg.grad, kg.grad, vg.grad), kw


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_match_sdpa(name):
    torch = _cuda()
    (q, k, v, do), ours, kw = _run(torch, CASES[name])
    scale = 1 / math.sqrt(q.shape[-1])
    allowed = _allowed(torch, q.shape[-2], k.shape[-2], **kw)
    _check(torch, ours, _reference(torch, q, k, v, do, scale, allowed),
           _sdpa(torch, q, k, v, do, scale, allowed))


def _modified(torch, s, mod, extras):
    """The scores after the modification (softcap, then the bias, then ALiBi's
    - slope·|i + Lk - Lq - j|, as attention() applies them; or the traced fn)."""
    lq, lk = s.shape[-2:]
    i = torch.arange(lq, device=s.device)[:, None]
    j = torch.arange(lk, device=s.device)[None, :]
    if "softcap" in mod:
        s = mod["softcap"] * torch.tanh(s / mod["softcap"])
    if "bias" in mod:
        s = s + extras["bias"].to(s.dtype)
    if "slopes" in mod:
        sl = extras["slopes"].to(s.dtype)
        s = s - sl.reshape(sl.shape + (1, 1)) * (i + lk - lq - j).abs().to(s.dtype)
    if "fn" in mod:
        s = s * extras["fn"].to(s.dtype)[None, :, :, None]
    return s


def _mod_gradients(torch, q, k, v, do, extras, mod, scale, allowed, exact):
    """Gradients of q, k, v and each extra: float64 autograd when exact; else the
    backward of a flash-style bf16 program done in f32 — P and dP rounded to q's dtype
    around their matmuls, and the softmax's term rowsum(dO ∘ O) taken from the output
    as the forward stores it, in q's dtype — the error any such backward has."""
    names = list(extras)
    wt = torch.float64 if exact else torch.float32
    leaves = [x.detach().to(wt).requires_grad_() for x in (q, k, v)]
    ex = {n: extras[n].detach().to(wt).requires_grad_() for n in names}
    qq, kk, vv = leaves
    g = q.shape[1] // k.shape[1]
    kk, vv = kk.repeat_interleave(g, 1), vv.repeat_interleave(g, 1)
    s = _modified(torch, scale * qq @ kk.transpose(-1, -2), mod, ex)
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, -1)
    if exact:
        (p @ vv).backward(do.to(wt))
        return [x.grad for x in leaves] + [ex[n].grad for n in names]
    low = lambda x: x.to(q.dtype).to(wt)
    dO = do.to(wt)
    p_low = low(p.detach())
    o = low(p_low @ vv.detach())
    dp = low(dO @ vv.detach().transpose(-1, -2))
    ds = p.detach() * (dp - (dO * o).sum(-1, keepdim=True))
    dv = torch.autograd.grad(p_low @ vv, leaves[2], dO)[0]
    dq, dk, *dcaps = torch.autograd.grad(s, [leaves[0], leaves[1]] + [ex[n] for n in names],
                                         ds.nan_to_num(0.0))
    return [dq, dk, dv] + dcaps


@pytest.mark.parametrize("name", list(SCORE_MODS))
def test_score_mod_gradients(name):
    """dq, dk, dv and the float captures' gradients of a modified score, the
    derivative compiled into the kernels, against float64 with the error of a
    flash-style bf16 backward in f32 as the yardstick (_mod_gradients)."""
    _score_mod_case(name, capture_grads=True)


@pytest.mark.parametrize("name", ["bias-full-gqa-d128", "alibi-window-d64-f16",
                                  "softcap-bias-d96-mma"])
def test_score_mod_without_capture_gradients(name):
    """Captures that do not require grad: the backward that computes none of their
    gradients gives the same dq, dk, dv, and the captures get no .grad."""
    _score_mod_case(name, capture_grads=False)


def _score_mod_case(name, capture_grads):
    torch = _cuda()
    (qs, ks, vs, dtype, kw), mod = SCORE_MODS[name]
    q, k, v, do = _inputs(torch, qs, ks, vs, dtype)
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    extras, call = {}, {}
    if "bias" in mod:
        shape, bdt = mod["bias"]
        extras["bias"] = torch.randn(*shape, device="cuda", generator=g).to(getattr(torch, bdt))
    if "slopes" in mod:
        extras["slopes"] = torch.rand(*mod["slopes"], device="cuda", generator=g) * 0.2
    if "fn" in mod:
        extras["fn"] = 1 + 0.2 * torch.randn(*mod["fn"][1], device="cuda", generator=g)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    ext = {n: x.clone().requires_grad_(capture_grads) for n, x in extras.items()}
    if "bias" in ext:
        call["bias"] = ext["bias"]
    if "slopes" in ext:
        call["alibi_slopes"] = ext["slopes"]
    if "softcap" in mod:
        call["softcap"] = mod["softcap"]
    if "fn" in ext:
        call["score_mod"], call["score_mod_args"] = mod["fn"][0], (ext["fn"],)
    o = flash_mlir.attention(*leaves, **kw, **call)
    o.backward(do)
    torch.cuda.synchronize()
    ours = [x.grad for x in leaves]
    names = ("dq", "dk", "dv")
    if capture_grads:
        ours += [ext[n].grad for n in extras]
        names += tuple("d" + n for n in extras)
    else:
        assert all(x.grad is None for x in ext.values())
    scale = 1 / math.sqrt(q.shape[-1])
    allowed = _allowed(torch, q.shape[-2], k.shape[-2], **kw)
    ref = _mod_gradients(torch, q, k, v, do, extras, mod, scale, allowed, exact=True)
    eager = _mod_gradients(torch, q, k, v, do, extras, mod, scale, allowed, exact=False)
    eager = [e.to(x.dtype) for e, x in zip(eager, ours)]
    _check(torch, ours, ref[:len(ours)], eager, names=names)


@pytest.mark.parametrize("name", list(GRAD_STAGED_CASES))
def test_staged_captures_match_global_reads(name):
    """dk and dv bit-identical to the backward that reads the capture from its buffer
    (stage_captures=0; dq and a bias's gradient are sums in no fixed order), and every
    gradient within the rule of test_score_mod_gradients."""
    torch = _cuda()
    (qs, ks, vs, dtype, kw), mod = GRAD_STAGED_CASES[name]
    q, k, v, do = _inputs(torch, qs, ks, vs, dtype)
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    if "bias" in mod:
        cap = torch.randn(*mod["bias"], device="cuda", generator=g).to(q.dtype)
        extras = {"bias": cap}
    else:
        keep = torch.rand(*mod["keep"], device="cuda", generator=g) < 0.5
        keep[:, 0] = True
        extras = {"bias": torch.zeros(*mod["keep"], device="cuda").masked_fill(
            ~keep, float("-inf"))}
    runs = []
    for on in (True, False):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        if "bias" in mod:
            c = cap.clone().requires_grad_()
            call = dict(bias=c)
        else:
            call = dict(score_mod=_keep_fn, score_mod_args=(keep,))
        o = flash_mlir.attention(*leaves, **kw, **call, stage_captures=int(on))
        o.backward(do)
        torch.cuda.synchronize()
        runs.append([x.grad for x in leaves] + ([c.grad] if "bias" in mod else []))
    staged, loaded = runs
    for x, y in zip(staged[1:3], loaded[1:3]):
        assert torch.equal(x.view(torch.int16), y.view(torch.int16))
    names = ("dq", "dk", "dv") + (("dbias",) if "bias" in mod else ())
    scale = 1 / math.sqrt(q.shape[-1])
    allowed = _allowed(torch, q.shape[-2], k.shape[-2], **kw)
    ref = _mod_gradients(torch, q, k, v, do, extras, {"bias": True}, scale, allowed,
                         exact=True)
    eager = _mod_gradients(torch, q, k, v, do, extras, {"bias": True}, scale, allowed,
                           exact=False)
    n = len(names)
    _check(torch, staged, ref[:n], [e.to(x.dtype) for e, x in zip(eager[:n], staged)],
           names=names)


@pytest.mark.parametrize("name", list(DETERMINISTIC))
def test_deterministic_dq_is_bit_identical(name):
    """Ten backward calls on the same inputs give the same bits, and the gradients are
    as accurate as without the option."""
    torch = _cuda()
    qs, ks, vs, dtype, kw = DETERMINISTIC[name]
    q, k, v, do = _inputs(torch, qs, ks, vs, dtype)
    qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
    o = flash_mlir.attention(qg, kg, vg, **kw)
    runs = [torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True) for _ in range(10)]
    torch.cuda.synchronize()
    for grads in runs[1:]:
        for x, first in zip(grads, runs[0]):
            assert torch.equal(x.view(torch.int16), first.view(torch.int16))
    scale = 1 / math.sqrt(q.shape[-1])
    allowed = _allowed(torch, q.shape[-2], k.shape[-2], **kw)
    _check(torch, runs[0], _reference(torch, q, k, v, do, scale, allowed),
           _sdpa(torch, q, k, v, do, scale, allowed))


def test_rows_that_see_no_key_get_zero_gradients():
    torch = _cuda()
    (q, k, v, do), ours, kw = _run(torch, DEAD_ROWS)
    lq, lk = q.shape[-2], k.shape[-2]
    scale = 1 / math.sqrt(q.shape[-1])
    dq, dk, dv = ours
    assert (dq[..., : lq - lk, :] == 0).all().item()
    ref = _reference(torch, q, k, v, do, scale, _allowed(torch, lq, lk, **kw))
    # SDPA is NaN on rows without keys: its error is measured on the live rows,
    # which (bottom-right) are top-left causal attention of their own.
    live = slice(lq - lk, lq)
    sdpa = _sdpa(torch, q[..., live, :], k, v, do[..., live, :], scale,
                 _allowed(torch, lk, lk, causal=True))
    _check(torch, (dq[..., live, :], dk, dv), (ref[0][..., live, :], ref[1], ref[2]), sdpa)


def test_no_keys_gives_zero_dq():
    torch = _cuda()
    _, (dq, dk, dv), _ = _run(torch, EMPTY_KEYS)
    assert (dq == 0).all().item() and dk.numel() == 0 and dv.numel() == 0


def test_backward_runs_on_torch_current_stream():
    """The backward's launches are ordered on the stream autograd runs it on."""
    torch = _cuda()
    qs, ks, vs, dtype, kw = CASES["d64-l1024-gqa4"]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        (q, k, v, do), ours, _ = _run(torch, CASES["d64-l1024-gqa4"])
    s.synchronize()
    scale = 1 / math.sqrt(q.shape[-1])
    _check(torch, ours, _reference(torch, q, k, v, do, scale, None),
           _sdpa(torch, q, k, v, do, scale, None))


def test_grad_kernel_ptx_without_a_device():
    """The backward compiles to PTX here: the three kernels, with mma.sync, cp.async
    and dQ's bulk reductions (sm_90a) or f32 atomics (grad_dq="atomic")."""
    _compiler()
    ir = flash_mlir.attention_grad_ir((2, 4, 100, 64), (2, 2, 70, 64), (2, 2, 70, 48),
                                      "bf16", causal=True)
    ptx = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa")
    for entry in (".entry prep(", ".entry kernel(", ".entry dq("):
        assert entry in ptx, entry
    assert "mma.sync" in ptx and "cp.async" in ptx
    assert "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32" in ptx
    ptx = flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa",
                             grad_dq="atomic")
    assert "atom.global.add.f32" in ptx and "cp.reduce.async.bulk" not in ptx


def test_unsupported_grad_is_a_diagnostic():
    """An f32 backward has no GPU kernel yet: compiling it names why."""
    _compiler()
    ir = flash_mlir.attention_grad_ir((1, 2, 16, 64), (1, 2, 16, 64), (1, 2, 16, 64), "f32")
    with pytest.raises(flash_mlir.FlashError, match="bf16 or f16"):
        flash_mlir.compile(ir, pipeline="flash-gpu-pipeline", output="ptx", format="isa")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_attention_grad_gpu.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
