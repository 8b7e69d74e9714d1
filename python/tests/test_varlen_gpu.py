"""A packed varlen batch on the GPU: flash.varlen_attention through the wgmma kernel (D, Dv
in {64, 128}) or the mma.sync kernel (other head dims, or kernel="mma"), each block
finding its sequence through the offsets (clamped into the token counts),
masks at each sequence's own lengths, rows no sequence covers left as out= held them.

Rules as the other GPU tests: a float64 reference (reference.varlen_attention_ref), the
error at most twice that of torch SDPA run on each sequence alone (plus 1e-3), the LSE
within 1e-3; one sequence gives bit-identical results to the contiguous op on the same
kernel, for both kernels. Run where the kernels are, or fill a cache folder here with
    python3 python/tests/test_varlen_gpu.py --prebuild DIR
and run with FLASH_MLIR_CACHE_DIR=DIR on the GPU machine."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from reference import varlen_attention_ref  # noqa: E402
from test_attention_gpu import _cuda  # noqa: E402


def _case(hq, hkv, d, lq, lk=None, dv=None, dtype="bfloat16", extra_q=0, cu_q=None,
          cu_k=None, **kw):
    lk = lk if lk is not None else lq
    cq = cu_q if cu_q is not None else np.concatenate([[0], np.cumsum(lq)]).tolist()
    ck = cu_k if cu_k is not None else np.concatenate([[0], np.cumsum(lk)]).tolist()
    tq = (int(sum(lq)) if cu_q is None else int(lq)) + extra_q
    tk = int(sum(lk)) if cu_k is None else int(lk)
    dv = dv or d
    return dict(q=(tq, hq, d), k=(tk, hkv, d), v=(tk, hkv, dv), cu_q=cq, cu_k=ck,
                dtype=dtype, kw=kw)


# Lengths are rarely multiples of the 64-row block; 0-length sequences included.
CASES = {
    "prefill-gqa4-causal": _case(16, 4, 128, [1, 200, 64, 1000, 0, 37], causal=True),
    "lq-ne-lk-bottom-right-f16-lse": _case(8, 8, 64, [100, 3, 513], [300, 700, 513],
                                           dtype="float16", causal=True,
                                           align="bottom_right", return_lse=True),
    "window-d96-dv64": _case(8, 2, 96, [700, 129], [900, 129], dv=64, window=128,
                             align="bottom_right"),
    "d256-no-mask": _case(4, 1, 256, [300, 77], [450, 77]),
    "many-short-sequences": _case(8, 2, 64, list(range(1, 65)) * 3,
                                  list(range(64, 0, -1)) * 3, causal=True,
                                  align="bottom_right", return_lse=True),
    # Offsets outside the tokens are clamped: a key range past Tk, one that runs
    # backwards (empty), a query end past Tq; 60 padding rows no sequence covers.
    "clamped-offsets": _case(4, 2, 64, 400, 600, cu_q=[0, 140, 140, 1000],
                             cu_k=[-5, 900, 10, 350], extra_q=0, return_lse=True),
    "padding-rows": _case(4, 4, 128, [90, 150], [90, 150], extra_q=60, causal=True),
}


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, c in CASES.items():
        print(name, flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"],
                                        cu_seqlens=(len(c["cu_q"]),), **c["kw"]))
    qs, ks, kw = ONE_SEQUENCE
    for kernel in ONE_SEQUENCE_KERNELS:
        print("one-sequence", flash_mlir.prebuild(qs, ks, ks, "bf16", cu_seqlens=(2,),
                                                  kernel=kernel, **kw))
        print("one-sequence", flash_mlir.prebuild(
            (1, qs[1], qs[0], qs[2]), (1, ks[1], ks[0], ks[2]), (1, ks[1], ks[0], ks[2]),
            "bf16", kernel=kernel, **kw))
    qs, ks, cq, _ = NON_FINITE
    for kernel in NON_FINITE_KERNELS:
        print("non-finite", flash_mlir.prebuild(qs, ks, ks, "bf16", cu_seqlens=(len(cq),),
                                                causal=True, align="bottom_right",
                                                kernel=kernel))
    for name in ("prefill-gqa4-causal", "clamped-offsets"):
        c = CASES[name]
        print(name, "mma", flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"],
                                               cu_seqlens=(len(c["cu_q"]),), kernel="mma",
                                               **c["kw"]))
    for name, (base, kw) in SINK_CASES.items():
        c = CASES[base]
        print(name, flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"],
                                        cu_seqlens=(len(c["cu_q"]),),
                                        sinks=((c["q"][1],), "float32"),
                                        **dict(c["kw"], **kw, return_lse=True)))


def _inputs(torch, c):
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    dt = getattr(torch, c["dtype"])
    q, k, v = (torch.randn(*c[n], device="cuda", dtype=dt, generator=g) for n in "qkv")
    cq = torch.tensor(c["cu_q"], dtype=torch.int32, device="cuda")
    ck = torch.tensor(c["cu_k"], dtype=torch.int32, device="cuda")
    return q, k, v, cq, ck


def _ranges(cu, total):
    out = []
    for b in range(len(cu) - 1):
        lo = min(max(int(cu[b]), 0), total)
        out.append((lo, min(max(int(cu[b + 1]), lo), total)))
    return out


def _sdpa_error(torch, q, k, v, cq, ck, ref, causal=False, window=None, align="top_left"):
    """Max |SDPA - ref| with SDPA on each sequence alone, over rows that see a key."""
    import torch.nn.functional as F
    worst = 0.0
    g = q.shape[1] // k.shape[1]
    for (q0, q1), (k0, k1) in zip(_ranges(cq, q.shape[0]), _ranges(ck, k.shape[0])):
        lq, lk = q1 - q0, k1 - k0
        if lq == 0 or lk == 0:
            continue
        mask = None
        if causal or window is not None:
            i = torch.arange(lq, device="cuda")[:, None]
            j = torch.arange(lk, device="cuda")[None, :]
            diag = i + (lk - lq if align == "bottom_right" else 0)
            mask = j <= diag
            if window is not None:
                mask &= j > diag - window
        s = F.scaled_dot_product_attention(
            q[q0:q1].transpose(0, 1), k[k0:k1].transpose(0, 1).repeat_interleave(g, 0),
            v[k0:k1].transpose(0, 1).repeat_interleave(g, 0), attn_mask=mask)
        r = torch.from_numpy(ref[q0:q1]).to("cuda").transpose(0, 1)
        live = torch.isfinite(s).all(-1)
        if live.any():
            worst = max(worst, (s.double() - r).abs()[live].max().item())
    return worst


@pytest.mark.parametrize("name", list(CASES) + ["prefill-gqa4-causal/mma",
                                                "clamped-offsets/mma"])
def test_matches_reference(name):
    torch = _cuda()
    name, _, kernel = name.partition("/")
    c = CASES[name]
    kw = dict(c["kw"], **({"kernel": kernel} if kernel else {}))
    q, k, v, cq, ck = _inputs(torch, c)
    out = torch.full(c["q"][:-1] + c["v"][-1:], 7.0, dtype=q.dtype, device="cuda")
    res = flash_mlir.attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, out=out, **kw)
    torch.cuda.synchronize()
    masks = {key: kw[key] for key in ("causal", "window", "align") if key in kw}
    lse0 = np.full((c["q"][1], c["q"][0]), 3.0)
    ref, ref_lse = varlen_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)),
                                        c["cu_q"], c["cu_k"], np.full(out.shape, 7.0), lse0,
                                        **masks)
    err = (out.double() - torch.from_numpy(ref).to("cuda")).abs().max().item()
    err_sdpa = _sdpa_error(torch, q, k, v, c["cu_q"], c["cu_k"], ref, **masks)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)
    covered = np.zeros(c["q"][0], bool)
    for q0, q1 in _ranges(c["cu_q"], c["q"][0]):
        covered[q0:q1] = True
    assert (out[torch.from_numpy(~covered).to("cuda")] == 7.0).all().item()
    if kw.get("return_lse"):
        lse = res[1].double().cpu().numpy()
        finite = np.isfinite(ref_lse) & covered[None, :]
        assert abs(lse[finite] - ref_lse[finite]).max() <= 1e-3
        dead = ~np.isfinite(ref_lse) & covered[None, :]
        assert (lse[dead] == -np.inf).all()
        assert (ref[~np.isfinite(ref_lse).T & covered[:, None]] == 0).all()


# Sinks (gpt-oss) on a packed batch: (base case, extra options). The base cases hold empty
# sequences (no key: the rows give 0 and lse = the sink) and clamped offsets.
SINK_CASES = {
    "sinks-gqa4-causal-wgmma": ("prefill-gqa4-causal", {}),
    "sinks-gqa4-causal-mma": ("prefill-gqa4-causal", {"kernel": "mma"}),
    "sinks-window-d96": ("window-d96-dv64", {}),
    "sinks-clamped": ("clamped-offsets", {}),
    "sinks-f16-bottom-right": ("lq-ne-lk-bottom-right-f16-lse", {}),
}


@pytest.mark.parametrize("name", list(SINK_CASES))
def test_sinks_match_reference(name):
    """Each row counts sinks[h] as one more key of value zero: from the definition's
    (o, lse) without sinks, lse' = logaddexp(lse, sinks[h]), o' = o·exp(lse − lse')."""
    torch = _cuda()
    base, extra = SINK_CASES[name]
    c = CASES[base]
    kw = dict(c["kw"], **extra, return_lse=True)
    q, k, v, cq, ck = _inputs(torch, c)
    # Logits of 4..8 against rows of up to a few thousand keys (each exp(s) about
    # e^0.5): the sink takes a visible share of each row's mass, however long.
    sinks = torch.rand(c["q"][1], device="cuda") * 4.0 + 4.0
    out, lse = flash_mlir.attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, sinks=sinks,
                                    **kw)
    torch.cuda.synchronize()
    masks = {key: kw[key] for key in ("causal", "window", "align") if key in kw}
    ref, ref_lse = varlen_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)),
                                        c["cu_q"], c["cu_k"], np.zeros(out.shape),
                                        np.zeros(lse.shape), **masks)
    covered = np.zeros(c["q"][0], bool)
    for q0, q1 in _ranges(c["cu_q"], c["q"][0]):
        covered[q0:q1] = True
    s = np.broadcast_to(sinks.double().cpu().numpy()[:, None], ref_lse.shape)
    want_lse = np.logaddexp(ref_lse, s)
    want = ref * np.exp(ref_lse - want_lse).T[..., None]
    # bf16/f16 outputs: their rounding bounds the error.
    err = np.abs(out.double().cpu().numpy() - want)[covered].max()
    assert err < 1e-2, err
    assert np.abs(lse.double().cpu().numpy() - want_lse)[:, covered].max() <= 1e-3
    assert np.abs(want - ref)[covered].max() > 1e-2  # the sinks are seen


# One sequence is the contiguous op's work on the same kernel, in the same order.
ONE_SEQUENCE = ((777, 8, 128), (1500, 2, 128), dict(causal=True, align="bottom_right"))
ONE_SEQUENCE_KERNELS = ("wgmma", "mma")


@pytest.mark.parametrize("kernel", ONE_SEQUENCE_KERNELS)
def test_one_sequence_is_bit_identical_to_contiguous(kernel):
    torch = _cuda()
    (tq, hq, d), (tk, hkv, _), kw = ONE_SEQUENCE
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    q = torch.randn(tq, hq, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(tk, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(tk, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
    cq = torch.tensor([0, tq], dtype=torch.int32, device="cuda")
    ck = torch.tensor([0, tk], dtype=torch.int32, device="cuda")
    packed = flash_mlir.attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, kernel=kernel,
                                  **kw)
    bhld = lambda x: x.transpose(0, 1).unsqueeze(0).contiguous()
    contiguous = flash_mlir.attention(bhld(q), bhld(k), bhld(v), kernel=kernel, **kw)
    torch.cuda.synchronize()
    assert torch.equal(packed, contiguous[0].transpose(0, 1))


# Non-finite values stay in their sequence: A and C are clean, B's values hold NaN and
# inf, and the tokens past the last offset (padding a caller never filled) are NaN. The
# key tiles at A's and C's ends run into B's rows and the padding.
NON_FINITE = ((400, 8, 128), (600, 2, 128), [0, 100, 230, 333], [0, 150, 300, 520])
NON_FINITE_KERNELS = ("wgmma", "mma")


@pytest.mark.parametrize("kernel", NON_FINITE_KERNELS)
def test_non_finite_values_stay_in_their_sequence(kernel):
    torch = _cuda()
    qs, ks, cq, ck = NON_FINITE
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    q = torch.randn(qs, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(ks, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(ks, device="cuda", dtype=torch.bfloat16, generator=g)
    v[ck[1]:ck[2]:7] = float("nan")
    v[ck[1] + 3:ck[2]:11] = float("inf")
    k[ck[1]:ck[2]:13] = float("nan")
    k[ck[3]:], v[ck[3]:] = float("nan"), float("nan")
    out = flash_mlir.attention(q, k, v, cu_seqlens_q=torch.tensor(cq, dtype=torch.int32,
                                                                   device="cuda"),
                               cu_seqlens_k=torch.tensor(ck, dtype=torch.int32, device="cuda"),
                               causal=True, align="bottom_right", kernel=kernel)
    torch.cuda.synchronize()
    ref, _ = varlen_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)), cq, ck,
                                  np.zeros(out.shape), np.zeros((qs[1], qs[0])),
                                  causal=True, align="bottom_right")
    for lo, hi in ((cq[0], cq[1]), (cq[2], cq[3])):
        o = out[lo:hi].double()
        assert torch.isfinite(o).all(), (kernel, lo, hi)
        assert (o - torch.from_numpy(ref[lo:hi]).to("cuda")).abs().max().item() < 2e-2


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_varlen_gpu.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
