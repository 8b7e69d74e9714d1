"""attention() on a packed batch of variable-length sequences (cu_seqlens_q=,
cu_seqlens_k=) on the host: flash.varlen_attention through
flash-cpu-pipeline, against float64 from the definition on fresh random
inputs — sequences of different query and key lengths (Lq != Lk within a
sequence), GQA and MQA, causal with both alignments and sliding windows at
each sequence's own lengths, empty sequences, rows no sequence covers, bf16
— plus the merge of two partial results by their LSE and the diagnostics
for bad arguments."""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from flash_mlir import attention  # noqa: E402
from reference import attention_ref, varlen_attention_ref  # noqa: E402

pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")

F32_TOL = 2e-5


def rel_err(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    finite = np.isfinite(ref)
    assert np.array_equal(np.isfinite(x), finite), "finite patterns differ"
    return np.linalg.norm(x[finite] - ref[finite]) / max(np.linalg.norm(ref[finite]), 1e-30)


def offsets(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


def packed(rng, lq, lk, hq, hkv, d, dv, extra_q=0, dtype=np.float32):
    cq, ck = offsets(lq), offsets(lk)
    q = rng.standard_normal((int(cq[-1]) + extra_q, hq, d)).astype(dtype)
    k = rng.standard_normal((int(ck[-1]), hkv, d)).astype(dtype)
    v = rng.standard_normal((int(ck[-1]), hkv, dv)).astype(dtype)
    return q, k, v, cq, ck


# (query lengths, key lengths, Hq, Hkv, D, Dv, mask keywords)
CASES = {
    "gqa_no_mask": ([7, 19, 1, 33], [12, 5, 40, 33], 4, 2, 16, 24, {}),
    "causal_bottom_right": ([5, 16, 9], [21, 16, 3], 4, 4, 32, 16,
                            dict(causal=True, align="bottom_right")),
    "causal_top_left": ([13, 4, 30], [9, 17, 30], 2, 1, 24, 8, dict(causal=True)),
    "window_mqa": ([20, 11], [35, 11], 6, 1, 16, 40, dict(window=7, align="bottom_right")),
    "empty_sequences": ([0, 8, 6, 0], [10, 0, 14, 0], 4, 2, 16, 16, {}),
    "one_sequence": ([47], [66], 3, 3, 64, 32, dict(causal=True, align="bottom_right")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_float64_definition(rng, name):
    lq, lk, hq, hkv, d, dv, kw = CASES[name]
    q, k, v, cq, ck = packed(rng, lq, lk, hq, hkv, d, dv)
    out, lse = attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, return_lse=True, **kw)
    assert out.shape == (q.shape[0], hq, dv) and lse.shape == (hq, q.shape[0])
    want, want_lse = varlen_attention_ref(q, k, v, cq, ck, np.zeros(out.shape),
                                          np.full(lse.shape, -np.inf), **kw)
    assert rel_err(out, want) <= F32_TOL
    assert rel_err(lse, want_lse) <= F32_TOL
    # A sequence without keys (or without visible ones) gives 0 and -inf.
    dead = ~np.isfinite(want_lse)
    assert np.array_equal(~np.isfinite(lse), dead)
    assert np.all(out.transpose(1, 0, 2)[dead] == 0)


def test_sequences_never_see_each_other(rng):
    """Changing one sequence's keys changes only its own rows."""
    q, k, v, cq, ck = packed(rng, [6, 9, 4], [10, 3, 12], 4, 2, 16, 16)
    before = attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck)
    k2, v2 = k.copy(), v.copy()
    k2[ck[1]:ck[2]] = rng.standard_normal(k2[ck[1]:ck[2]].shape)
    v2[ck[1]:ck[2]] = rng.standard_normal(v2[ck[1]:ck[2]].shape)
    after = attention(q, k2, v2, cu_seqlens_q=cq, cu_seqlens_k=ck)
    changed = np.any(before != after, axis=(1, 2))
    assert not changed[:cq[1]].any() and not changed[cq[2]:].any()
    assert changed[cq[1]:cq[2]].all()


def test_rows_no_sequence_covers_keep_out(rng):
    """Padding tokens past cu_seqlens_q[-1] are never written."""
    q, k, v, cq, ck = packed(rng, [5, 12], [9, 7], 2, 2, 16, 8, extra_q=6)
    out = np.full((q.shape[0], 2, 8), 7.5, np.float32)
    attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, out=out)
    want, _ = varlen_attention_ref(q, k, v, cq, ck, np.full(out.shape, 7.5),
                                   np.zeros((2, q.shape[0])))
    assert np.all(out[cq[-1]:] == 7.5)
    assert rel_err(out, want) <= F32_TOL


def test_one_sequence_is_plain_attention(rng):
    q, k, v, cq, ck = packed(rng, [37], [53], 4, 2, 32, 16)
    out = attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, causal=True,
                    align="bottom_right")
    plain = attention(q.transpose(1, 0, 2).copy(), k.transpose(1, 0, 2).copy(),
                      v.transpose(1, 0, 2).copy(), causal=True, align="bottom_right")
    assert rel_err(out, plain.transpose(1, 0, 2)) <= 1e-6


def test_partials_merge_by_lse(rng):
    """Each sequence's keys split in two calls, merged with their LSE, give
    the one call over all keys: what the LSE output is for."""
    lq, lk = [9, 14, 3], [20, 8, 31]
    q, k, v, cq, ck = packed(rng, lq, lk, 4, 2, 16, 16)
    full, full_lse = attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, return_lse=True)
    cut = [int(ck[b]) + lk[b] // 3 for b in range(3)]
    first = np.concatenate([np.arange(ck[b], cut[b]) for b in range(3)])
    second = np.concatenate([np.arange(cut[b], ck[b + 1]) for b in range(3)])
    ck1 = offsets([cut[b] - ck[b] for b in range(3)])
    ck2 = offsets([ck[b + 1] - cut[b] for b in range(3)])
    o1, l1 = attention(q, k[first], v[first], cu_seqlens_q=cq, cu_seqlens_k=ck1,
                       return_lse=True)
    o2, l2 = attention(q, k[second], v[second], cu_seqlens_q=cq, cu_seqlens_k=ck2,
                       return_lse=True)
    # The varlen output is [Tq, Hq, Dv] and its lse [Hq, Tq]: merge per head.
    merged, merged_lse = flash_mlir.merge_attention(
        [o.transpose(1, 0, 2) for o in (o1, o2)], [l1, l2])
    assert rel_err(merged.transpose(1, 0, 2), full) <= F32_TOL
    assert rel_err(merged_lse, full_lse) <= F32_TOL


def test_torch_cpu_bf16(rng):
    torch = pytest.importorskip("torch")
    q, k, v, cq, ck = packed(rng, [11, 26, 2], [30, 26, 17], 4, 2, 32, 16)
    qt, kt, vt = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, k, v))
    out, lse = attention(qt, kt, vt, cu_seqlens_q=torch.from_numpy(cq),
                         cu_seqlens_k=torch.from_numpy(ck), causal=True, return_lse=True)
    assert out.dtype == torch.bfloat16 and out.shape == (q.shape[0], 4, 16)
    want, want_lse = varlen_attention_ref(qt.double().numpy(), kt.double().numpy(),
                                          vt.double().numpy(), cq, ck,
                                          np.zeros(out.shape), np.zeros(lse.shape),
                                          causal=True)
    assert rel_err(out.double().numpy(), want) <= 2e-2
    assert rel_err(lse.numpy(), want_lse) <= 1e-2


def test_bad_arguments(rng):
    q, k, v, cq, ck = packed(rng, [4, 6], [5, 7], 2, 2, 16, 16)
    with pytest.raises(ValueError, match="cu_seqlens_k= go together"):
        attention(q, k, v, cu_seqlens_q=cq)
    with pytest.raises(TypeError, match="cu_seqlens_k must be int32"):
        attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck.astype(np.int64))
    with pytest.raises(ValueError, match=r"cu_seqlens_k must have shape \[3\]"):
        attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck[:2])
    with pytest.raises(ValueError, match=r"q must be packed tokens \[Tq, Hq, D\]"):
        attention(q[None], k, v, cu_seqlens_q=cq, cu_seqlens_k=ck)
    with pytest.raises(ValueError, match="cu_seqlens_q must be non-decreasing"):
        attention(q, k, v, cu_seqlens_q=cq[::-1].copy(), cu_seqlens_k=ck)
    with pytest.raises(ValueError, match=r"cu_seqlens_k must be non-decreasing offsets in \[0, 12\]"):
        attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck + 1)
    with pytest.raises(ValueError, match="bias= is not supported with cu_seqlens_q="):
        attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, bias=np.zeros((10, 12), np.float32))
    with pytest.raises(ValueError, match="dynamic=True is not supported with cu_seqlens_q="):
        attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, dynamic=True)
    with pytest.raises(ValueError, match="cannot be combined with block_table="):
        attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, block_table=cq[None],
                  seq_lens=cq[:1])
    with pytest.raises(ValueError, match="score_mod= is not supported with cu_seqlens_q="):
        attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, score_mod=lambda s, h, i, j: s)


def test_gradients_raise(rng):
    torch = pytest.importorskip("torch")
    q, k, v, cq, ck = packed(rng, [4, 6], [5, 7], 2, 2, 16, 16)
    qt = torch.from_numpy(q).requires_grad_()
    with pytest.raises(NotImplementedError, match="cu_seqlens_q="):
        attention(qt, torch.from_numpy(k), torch.from_numpy(v),
                  cu_seqlens_q=torch.from_numpy(cq), cu_seqlens_k=torch.from_numpy(ck))


def test_prebuild_builds_the_kernel_attention_runs(rng, tmp_path, monkeypatch):
    monkeypatch.setenv("FLASH_MLIR_CACHE_DIR", str(tmp_path))
    path = flash_mlir.prebuild((12, 4, 16), (15, 2, 16), (15, 2, 8), "f32", device="cpu",
                               cu_seqlens=(4,), causal=True)
    assert os.path.exists(path)
    import flash_mlir._attention as am
    monkeypatch.setattr(am, "_compile_to_library",
                        lambda *a, **kw: pytest.fail("compiled again instead of the cache"))
    q, k, v, cq, ck = packed(rng, [3, 0, 9], [4, 6, 5], 4, 2, 16, 8)
    out = attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, causal=True, cache=True)
    want, _ = varlen_attention_ref(q, k, v, cq, ck, np.zeros(out.shape),
                                   np.zeros((4, 12)), causal=True)
    assert rel_err(out, want) <= F32_TOL
