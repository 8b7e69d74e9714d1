"""A paged KV cache on the GPU: flash.paged_attention through the split-KV kernel, which
reads every key row through the block table, and through the wgmma kernel's decode form
(kernel=auto for GQA without a mask on sm_90a), whose TMA boxes of a K/V tile each come
from the page the table names (page numbers clamped into the pool, each sequence's own
length, masks at its own diagonal), with score_mod / mask_mod and the score conveniences
read at each key's position in its sequence.

Same rules as test_decode_gpu.py: a float64 reference (reference.paged_attention_ref),
the error at most twice that of torch SDPA run on each sequence's gathered keys (plus
1e-3), the LSE within 1e-3; a paged cache that holds the same keys as a contiguous one
gives bit-identical results with the same split. Run where the kernels are, or fill a
cache folder here with
    python3 python/tests/test_paged_gpu.py --prebuild DIR
and run with FLASH_MLIR_CACHE_DIR=DIR on the GPU machine."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from reference import paged_attention_ref  # noqa: E402
from test_attention_gpu import _cuda  # noqa: E402


def _case(b, hq, hkv, lq, d, page, pages, max_pages, lens, dv=None, dtype="bfloat16", **kw):
    dv = dv or d
    return dict(q=(b, hq, lq, d), k=(pages, page, hkv, d), v=(pages, page, hkv, dv),
                table=(b, max_pages), lens=lens, dtype=dtype, kw=kw)


# Lengths are never multiples of the 64-key tile or of the page unless the case is
# about that; page sizes run from 16 to 256 and include ones that are no power of two.
CASES = {
    "gqa4-page16-lse": _case(4, 32, 8, 1, 128, 16, 2200, 520, [4097, 1, 0, 8000],
                             return_lse=True),
    "gqa8-page48-f16": _case(2, 16, 2, 1, 128, 48, 90, 40, [1000, 1919], dtype="float16"),
    "mqa-page256-d64": _case(3, 8, 1, 1, 64, 256, 40, 12, [2900, 700, 3072]),
    "page80-d96-dv64": _case(2, 8, 2, 1, 96, 80, 50, 20, [1555, 81], dv=64),
    "lq16-causal-page32": _case(2, 32, 8, 16, 128, 32, 200, 90, [2800, 16], causal=True,
                                return_lse=True),
    "lq2-window-page16": _case(2, 8, 2, 2, 64, 16, 300, 140, [2049, 500], window=300),
    # Fewer keys than query rows: the first rows see nothing (lse -inf, output 0).
    "lq16-shorter-than-lq": _case(2, 8, 8, 16, 64, 16, 8, 4, [5, 40], causal=True,
                                  return_lse=True),
    "split1": _case(2, 16, 4, 1, 128, 16, 300, 140, [2000, 1999], split_kv=1,
                    return_lse=True),
    "split-per-tile": _case(2, 16, 4, 1, 128, 16, 300, 140, [2000, 777], split_kv=1000,
                            return_lse=True),
    "long-64k": _case(1, 32, 8, 1, 128, 64, 1100, 1030, [65537], return_lse=True),
    # Lengths past the table's capacity are clamped to it.
    "past-capacity": _case(2, 8, 2, 1, 64, 16, 20, 8, [10 ** 6, 100]),
    # The wgmma kernel asked for where kernel=auto would take the split kernel: masks
    # over packed heads, one head per K/V head, several query blocks, D = 256.
    "wg-lq16-causal-page32": _case(2, 32, 8, 16, 128, 32, 200, 90, [2800, 16],
                                   causal=True, return_lse=True, kernel="wgmma"),
    "wg-lq2-window-page16": _case(2, 8, 2, 2, 64, 16, 300, 140, [2049, 500], window=300,
                                  kernel="wgmma"),
    "wg-mha-shorter-than-lq": _case(2, 8, 8, 16, 64, 16, 8, 4, [5, 40], causal=True,
                                    return_lse=True, kernel="wgmma"),
    "wg-lq64-g4-page112": _case(1, 8, 2, 64, 128, 112, 60, 30, [3000], causal=True,
                                return_lse=True, kernel="wgmma"),
    # MQA at Lq = 16 (kernel=auto): 128 packed rows as two 64-row blocks, each reading
    # every page of its sequence.
    "mqa-lq16-page64": _case(3, 8, 1, 16, 128, 64, 150, 50, [3001, 17, 0],
                             return_lse=True),
    "wg-page256-f16-empty": _case(3, 16, 2, 1, 128, 256, 40, 12, [0, 2900, 10 ** 6],
                                  dtype="float16", return_lse=True, kernel="wgmma"),
    "wg-page48-split-per-tile": _case(2, 16, 2, 1, 128, 48, 90, 40, [1000, 1919],
                                      split_kv=1000, kernel="wgmma"),
    "wg-d256-page64": _case(2, 16, 4, 1, 256, 64, 100, 40, [2000, 333], kernel="wgmma"),
}


# gpt-oss as it is served: sinks (float32, one per query head) on a paged cache, through
# the wgmma decode form's fused merge (kernel=auto), its combine kernel, and the split-KV
# kernel with a window (gpt-oss's local layers).
SINK_CASES = {
    "sinks-gqa4-auto": _case(4, 32, 8, 1, 128, 16, 2200, 520, [4097, 1, 0, 8000],
                             return_lse=True),
    "sinks-wg-combine-f16": _case(2, 16, 2, 1, 64, 48, 90, 40, [1000, 1919], dtype="float16",
                                  return_lse=True, kernel="wgmma", split_kv=3,
                                  fused_combine=0),
    "sinks-window-splitkv": _case(2, 8, 2, 2, 64, 16, 300, 140, [2049, 0], window=128,
                                  return_lse=True, kernel="splitkv"),
}


# score_mod / mask_mod and the score conveniences on a paged cache, in each kernel that
# reads pages: the wgmma decode form (kernel=auto: GQA, no mask) and the split-KV kernel
# (kernel=auto with a mask), plus the wgmma kernel asked for under a mask. kv_idx is the
# key's position in its sequence; the function reads a float bias along it and the
# lengths, for the query's own position.
def _paged_mod(lq):
    def fn(s, b, h, i, j, bias, lens):
        from flash_mlir import score as fs
        pos = i + lens[b] - lq
        return 8.0 * fs.tanh(s / 8.0) + bias[h, j] - 0.05 * abs(pos - j)
    return fn


MOD_CASES = {
    "mod-gqa4-auto": _case(3, 32, 8, 1, 128, 16, 900, 300, [4097, 1, 0], return_lse=True),
    "mod-lq16-causal-splitkv": _case(2, 32, 8, 16, 128, 32, 200, 90, [2800, 16], causal=True,
                                     return_lse=True),
    "mod-wg-lq16-causal-page48": _case(2, 16, 4, 16, 64, 48, 90, 40, [1000, 1919],
                                       causal=True, kernel="wgmma"),
    "mod-mha-d64-f16-splitkv": _case(2, 8, 8, 2, 64, 16, 300, 140, [2049, 500],
                                     dtype="float16", kernel="splitkv"),
}
# The conveniences (softcap=, bias= over the table's capacity, alibi_slopes= at each
# sequence's own diagonal) and a mask_mod (a strided mask: a score_mod on a paged cache).
CONVENIENCE_CASES = {
    "conv-gqa4-auto": _case(3, 32, 8, 1, 128, 16, 900, 300, [4097, 1, 0], return_lse=True),
    "conv-lq16-causal-splitkv": _case(2, 32, 8, 16, 128, 32, 200, 90, [2800, 16],
                                      causal=True),
}
def _strided_mask(b, h, i, j):
    return j % 3 != 1


# Index-only masks whose hidden tiles the kernels skip (a run of leading tiles; two runs
# with a hidden one between them): a sequence shorter than the first visible key sees
# nothing (output 0).
def _late_keys(b, h, i, j):
    return j >= 1500


def _two_runs(b, h, i, j):
    return (j < 700) | (j >= 2000)


MASK_MOD_CASES = {
    "maskmod-gqa4-auto": (_case(2, 32, 8, 1, 128, 16, 900, 300, [4097, 333]), _strided_mask),
    "maskmod-lq16-splitkv": (_case(2, 16, 4, 16, 64, 32, 200, 90, [2800, 16],
                                   kernel="splitkv"), _strided_mask),
    "maskmod-late-gqa4-auto": (_case(2, 32, 8, 1, 128, 16, 900, 300, [4097, 333]),
                               _late_keys),
    "maskmod-two-runs-splitkv": (_case(2, 16, 4, 16, 64, 32, 200, 90, [2800, 1000],
                                       kernel="splitkv"), _two_runs),
    "maskmod-two-runs-wg-lq16": (_case(2, 16, 4, 16, 64, 48, 90, 40, [1919, 2500],
                                       kernel="wgmma"), _two_runs),
}


def _mod_specs(c):
    cap = c["table"][1] * c["k"][1]
    return [((c["q"][1], cap), "float32"), ((c["q"][0],), "int32")]


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, c in CASES.items():
        print(name, flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"],
                                        block_table=c["table"], **c["kw"]))
    for name, c in SINK_CASES.items():
        print(name, flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"],
                                        block_table=c["table"], sinks=((c["q"][1],), "f32"),
                                        **c["kw"]))
    for name, c in MOD_CASES.items():
        print(name, flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"],
                                        block_table=c["table"], score_mod=_paged_mod(c["q"][2]),
                                        score_mod_args=_mod_specs(c), **c["kw"]))
    for name, c in CONVENIENCE_CASES.items():
        cap = c["table"][1] * c["k"][1]
        print(name, flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"],
                                        block_table=c["table"], softcap=20.0,
                                        bias=((c["q"][1], 1, cap), "float32"),
                                        alibi_slopes=(c["q"][1],), **c["kw"]))
    for name, (c, fn) in MASK_MOD_CASES.items():
        print(name, flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"],
                                        block_table=c["table"], mask_mod=fn, **c["kw"]))
    for name, (qs, ks, vs, table, kw) in _same_keys_cases().items():
        print(name, flash_mlir.prebuild(qs, ks, vs, "bf16", block_table=table, **kw))
        print(name, flash_mlir.prebuild(qs, SAME_KEYS_CONTIGUOUS[name], SAME_KEYS_CONTIGUOUS[name],
                                        "bf16", causal=kw.get("causal", False),
                                        align="bottom_right", split_kv=kw["split_kv"],
                                        **{o: kw[o] for o in ("kernel",) if o in kw}))


def _inputs(torch, c, seed=None):
    g = torch.Generator(device="cuda").manual_seed(
        seed if seed is not None else int.from_bytes(os.urandom(4), "little"))
    dt = getattr(torch, c["dtype"])
    q, k, v = (torch.randn(*c[n], device="cuda", dtype=dt, generator=g) for n in "qkv")
    b, max_pages = c["table"]
    pages = c["k"][0]
    # Distinct pages per sequence in a shuffled order, as an allocator leaves them; a
    # table longer than the pool wraps around.
    order = torch.randperm(max(pages, b * max_pages), generator=g, device="cuda")
    table = (order[:b * max_pages] % pages).reshape(b, max_pages).to(torch.int32)
    lens = torch.tensor(c["lens"], dtype=torch.int32, device="cuda")
    return q, k, v, table, lens


def _sdpa_error(torch, q, k, v, table, lens, ref, causal=False, window=None):
    """Max |SDPA - ref| with SDPA on each sequence's gathered keys (a sequence with no
    key has nothing to compare)."""
    import torch.nn.functional as F
    pages, page, hkv, d = k.shape
    worst = 0.0
    for b in range(q.shape[0]):
        n = min(max(int(lens[b]), 0), table.shape[1] * page)
        if n == 0:
            continue
        idx = table[b].long().clamp(0, pages - 1)
        kb = k[idx].reshape(-1, hkv, d)[:n].transpose(0, 1)
        vb = v[idx].reshape(-1, hkv, v.shape[-1])[:n].transpose(0, 1)
        lq = q.shape[2]
        mask = None
        if causal or window is not None:
            i = torch.arange(lq, device="cuda")[:, None]
            j = torch.arange(n, device="cuda")[None, :]
            mask = j <= i + n - lq
            if window is not None:
                mask &= j > i + n - lq - window
        g = q.shape[1] // hkv
        s = F.scaled_dot_product_attention(q[b], kb.repeat_interleave(g, 0),
                                           vb.repeat_interleave(g, 0), attn_mask=mask)
        r = torch.from_numpy(ref[b]).to("cuda")
        live = torch.isfinite(s).all(-1)  # rows SDPA leaves NaN (no visible key)
        if live.any():
            worst = max(worst, (s.double() - r).abs()[live].max().item())
    return worst


@pytest.mark.parametrize("name", list(CASES))
def test_matches_reference(name):
    torch = _cuda()
    c = CASES[name]
    kw = c["kw"]
    q, k, v, table, lens = _inputs(torch, c)
    out = torch.full(c["q"][:-1] + c["v"][-1:], float("nan"), dtype=q.dtype, device="cuda")
    res = flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens, out=out, **kw)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    masks = {key: kw[key] for key in ("causal", "window") if key in kw}
    ref, ref_lse = paged_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)),
                                       table.cpu().numpy(), lens.cpu().numpy(), **masks)
    err = (out.double() - torch.from_numpy(ref).to("cuda")).abs().max().item()
    err_sdpa = _sdpa_error(torch, q, k, v, table, lens, ref, **masks)
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)
    dead = ~torch.from_numpy(ref_lse > -float("inf")).to("cuda")
    assert (out[dead] == 0).all().item()
    if kw.get("return_lse"):
        lse = res[1].double().cpu().numpy()
        finite = ref_lse > -float("inf")
        assert abs(lse[finite] - ref_lse[finite]).max() <= 1e-3
        assert (lse[~finite] == -float("inf")).all()


@pytest.mark.parametrize("name", list(SINK_CASES))
def test_sinks_match_reference(name):
    """Each row counts sinks[h] as one more key of value zero: from the definition's
    (o, lse) without sinks, lse' = logaddexp(lse, sinks[h]), o' = o·exp(lse − lse'); an
    empty sequence's rows give 0 and lse = sinks[h]."""
    import numpy as np
    torch = _cuda()
    c = SINK_CASES[name]
    kw = c["kw"]
    q, k, v, table, lens = _inputs(torch, c)
    # Logits of 4..8 against rows of up to a few thousand keys (each exp(s) about
    # e^0.5): the sink takes a visible share of each row's mass, however long.
    sinks = torch.rand(c["q"][1], device="cuda") * 4.0 + 4.0
    out, lse = flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens, sinks=sinks,
                                    **kw)
    torch.cuda.synchronize()
    masks = {key: kw[key] for key in ("causal", "window") if key in kw}
    ref, ref_lse = paged_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)),
                                       table.cpu().numpy(), lens.cpu().numpy(), **masks)
    s = np.broadcast_to(sinks.double().cpu().numpy()[None, :, None], ref_lse.shape)
    want_lse = np.logaddexp(ref_lse, s)
    want = ref * np.exp(ref_lse - want_lse)[..., None]
    # bf16/f16 outputs: their rounding bounds the error.
    err = np.abs(out.double().cpu().numpy() - want).max()
    assert err < 1e-2, err
    assert np.abs(lse.double().cpu().numpy() - want_lse).max() <= 1e-3
    assert np.abs(want - ref).max() > 1e-2  # the sinks are seen


def _paged_mod_ref(torch, q, k, v, table, lens, mod, dtype, causal=False, window=None):
    """(out, lse) of each sequence's gathered keys in `dtype` (float64: the reference;
    float32: the anchor), mod(s, b, h, i, j, n) on the scaled scores before the mask."""
    pages, page, hkv, d = k.shape
    b_, hq, lq, _ = q.shape
    out = torch.zeros(b_, hq, lq, v.shape[-1], dtype=dtype, device="cuda")
    lse = torch.full((b_, hq, lq), float("-inf"), dtype=dtype, device="cuda")
    for b in range(b_):
        n = min(max(int(lens[b]), 0), table.shape[1] * page)
        if n == 0:
            continue
        idx = table[b].long().clamp(0, pages - 1)
        kb = k[idx].reshape(-1, hkv, d)[:n].transpose(0, 1).to(dtype)
        vb = v[idx].reshape(-1, hkv, v.shape[-1])[:n].transpose(0, 1).to(dtype)
        g = hq // hkv
        kb, vb = kb.repeat_interleave(g, 0), vb.repeat_interleave(g, 0)
        s = q[b].to(dtype) @ kb.transpose(-1, -2) / d ** 0.5
        h = torch.arange(hq, device="cuda")[:, None, None]
        i = torch.arange(lq, device="cuda")[:, None]
        j = torch.arange(n, device="cuda")[None, :]
        s = mod(s, b, h, i, j, n)
        if causal or window is not None:
            ok = j <= i + n - lq
            if window is not None:
                ok &= j > i + n - lq - window
            s = s.masked_fill(~ok, float("-inf"))
        dead = torch.isneginf(s).all(-1, keepdim=True)
        p = torch.softmax(s.masked_fill(dead, 0), -1).masked_fill(dead, 0)
        out[b] = p @ vb
        lse[b] = torch.logsumexp(s, -1)
    return out, lse


def _check_mod(torch, c, out, lse, q, k, v, table, lens, mod):
    """At most twice the error of the same math in float32 from the same inputs, rounded
    like the output (no SDPA backend computes these); dead rows 0; the lse within 1e-3."""
    masks = {key: c["kw"][key] for key in ("causal", "window") if key in c["kw"]}
    want, want_lse = _paged_mod_ref(torch, q, k, v, table, lens, mod, torch.float64, **masks)
    anchor, _ = _paged_mod_ref(torch, q, k, v, table, lens, mod, torch.float32, **masks)
    assert not torch.isnan(out).any()
    err = (out.double() - want).abs().max().item()
    err_anchor = (anchor.to(q.dtype).double() - want).abs().max().item()
    assert err <= 2 * err_anchor + 1e-3, (err, err_anchor)
    dead = torch.isneginf(want_lse)
    assert (out[dead] == 0).all().item()
    if lse is not None:
        assert (lse[dead] == float("-inf")).all().item()
        assert (lse.double() - want_lse)[~dead].abs().max().item() <= 1e-3


@pytest.mark.parametrize("name", list(MOD_CASES))
def test_score_mod_matches_reference(name):
    torch = _cuda()
    c = MOD_CASES[name]
    q, k, v, table, lens = _inputs(torch, c)
    cap = c["table"][1] * c["k"][1]
    bias = torch.randn(c["q"][1], cap, device="cuda")
    res = flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens,
                               score_mod=_paged_mod(c["q"][2]), score_mod_args=(bias, lens),
                               **c["kw"])
    torch.cuda.synchronize()
    out, lse = res if c["kw"].get("return_lse") else (res, None)
    lq = c["q"][2]

    def mod(s, b, h, i, j, n):
        return 8.0 * torch.tanh(s / 8.0) + bias.to(s.dtype)[h, j] \
            - 0.05 * (i + n - lq - j).abs().to(s.dtype)
    _check_mod(torch, c, out, lse, q, k, v, table, lens, mod)


@pytest.mark.parametrize("name", list(CONVENIENCE_CASES))
def test_conveniences_match_reference(name):
    torch = _cuda()
    c = CONVENIENCE_CASES[name]
    q, k, v, table, lens = _inputs(torch, c)
    hq, lq = c["q"][1], c["q"][2]
    cap = c["table"][1] * c["k"][1]
    bias = torch.randn(hq, 1, cap, device="cuda")
    slopes = torch.rand(hq, device="cuda") * 0.3
    res = flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens, softcap=20.0,
                               bias=bias, alibi_slopes=slopes, **c["kw"])
    torch.cuda.synchronize()
    out, lse = res if c["kw"].get("return_lse") else (res, None)

    def mod(s, b, h, i, j, n):
        return 20.0 * torch.tanh(s / 20.0) + bias.to(s.dtype)[:, :, :n] \
            - slopes.to(s.dtype)[:, None, None] * (i + n - lq - j).abs().to(s.dtype)
    _check_mod(torch, c, out, lse, q, k, v, table, lens, mod)


@pytest.mark.parametrize("name", list(MASK_MOD_CASES))
def test_mask_mod_matches_reference(name):
    torch = _cuda()
    c, fn = MASK_MOD_CASES[name]
    q, k, v, table, lens = _inputs(torch, c)
    out = flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens, mask_mod=fn,
                               **c["kw"])
    torch.cuda.synchronize()

    def mod(s, b, h, i, j, n):
        return s.masked_fill(~fn(b, h, i, j), float("-inf"))
    _check_mod(torch, c, out, None, q, k, v, table, lens, mod)


@pytest.mark.parametrize("name", ["mqa-page256-d64", "mod-gqa4-auto"])
def test_repeat_calls_read_tables_afresh(name):
    """A repeated call with the same shapes goes straight to its launch (no IR, no
    lookup by the general path) and reads the block table, the lengths and the
    score_mod's arrays of this call: new values give this call's result."""
    from flash_mlir import _attention
    torch = _cuda()
    c = CASES.get(name) or MOD_CASES[name]
    q, k, v, table, lens = _inputs(torch, c)
    kw = dict(c["kw"])
    cap = c["table"][1] * c["k"][1]
    mods = {}
    if name in MOD_CASES:
        mods = dict(score_mod=_paged_mod(c["q"][2]),
                    score_mod_args=(torch.randn(c["q"][1], cap, device="cuda"), lens))
    flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens, **mods, **kw)
    entries = len(_attention._plain_calls)
    assert entries > 0
    for _ in range(2):
        # New tables, lengths and bias in the same tensors' shapes: a fresh draw.
        q, k, v, table, lens = _inputs(torch, c)
        lens = (lens * 7 // 8).to(torch.int32)
        if mods:
            bias = torch.randn(c["q"][1], cap, device="cuda")
            mods["score_mod_args"] = (bias, lens)
        res = flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens, **mods, **kw)
        torch.cuda.synchronize()
        assert len(_attention._plain_calls) == entries  # no new entry: the fast path
        out = res[0] if kw.get("return_lse") else res
        if mods:
            lq = c["q"][2]

            def mod(s, b, h, i, j, n, bias=bias):
                return 8.0 * torch.tanh(s / 8.0) + bias.to(s.dtype)[h, j] \
                    - 0.05 * (i + n - lq - j).abs().to(s.dtype)
            _check_mod(torch, c, out, res[1] if kw.get("return_lse") else None,
                       q, k, v, table, lens, mod)
        else:
            ref, _ = paged_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)),
                                         table.cpu().numpy(), lens.cpu().numpy())
            err = (out.double() - torch.from_numpy(ref).to("cuda")).abs().max().item()
            assert err <= 2 * _sdpa_error(torch, q, k, v, table, lens, ref) + 1e-3


# The same keys as a contiguous cache [B, Hkv, Lk, D] and as pages of 16 in a shuffled
# pool, every length Lk, the same forced split: the kernel does the same arithmetic in
# the same order, so the outputs are bit-identical. kernel=auto takes the wgmma kernel
# for the first, the split kernel for the second (a mask), both paged and contiguous.
SAME_KEYS = {"same-keys": (2, 16, 4, 1, 128, 2048, dict(split_kv=4)),
             "same-keys-causal-lq16": (2, 32, 8, 16, 64, 1024, dict(split_kv=2, causal=True)),
             "same-keys-causal-lq16-wgmma": (2, 32, 8, 16, 64, 1024,
                                             dict(split_kv=2, causal=True, kernel="wgmma"))}
SAME_KEYS_CONTIGUOUS = {name: (b, hkv, lk, d) for name, (b, hq, hkv, lq, d, lk, _) in
                        SAME_KEYS.items()}


def _same_keys_cases():
    out = {}
    for name, (b, hq, hkv, lq, d, lk, kw) in SAME_KEYS.items():
        out[name] = ((b, hq, lq, d), (b * lk // 16, 16, hkv, d), (b * lk // 16, 16, hkv, d),
                     (b, lk // 16), kw)
    return out


@pytest.mark.parametrize("name", list(SAME_KEYS))
def test_paged_is_bit_identical_to_contiguous(name):
    torch = _cuda()
    b, hq, hkv, lq, d, lk, kw = SAME_KEYS[name]
    g = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(4), "little"))
    q = torch.randn(b, hq, lq, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(b, hkv, lk, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, hkv, lk, d, device="cuda", dtype=torch.bfloat16, generator=g)
    m = lk // 16
    perm = torch.randperm(b * m, generator=g, device="cuda")

    def pool(x):
        pages = x.transpose(1, 2).reshape(b * m, 16, hkv, d)
        p = torch.empty_like(pages)
        p[perm] = pages
        return p
    table = perm.reshape(b, m).to(torch.int32)
    lens = torch.full((b,), lk, dtype=torch.int32, device="cuda")
    paged = flash_mlir.attention(q, pool(k), pool(v), block_table=table, seq_lens=lens, **kw)
    contiguous = flash_mlir.attention(q, k, v, align="bottom_right", **kw)
    torch.cuda.synchronize()
    assert torch.equal(paged, contiguous)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_paged_gpu.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
