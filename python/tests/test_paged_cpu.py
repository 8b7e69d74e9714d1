"""attention() against a paged KV cache (block_table=, seq_lens=) on the host:
flash.paged_attention through flash-cpu-pipeline, against float64 from the
definition on fresh random inputs — page sizes that are not powers of two,
GQA and MQA, Lq from 1 to 16, causal and window at each sequence's own
diagonal, empty sequences, lengths past the table's capacity and page
numbers outside the pool (clamped), score_mod / mask_mod and the score
conveniences with the key's position in its sequence — and the diagnostics
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
from reference import paged_attention_ref  # noqa: E402

pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")


def _case(rng, b, hq, hkv, lq, d, dv, page, pages, max_pages, lens):
    q = rng.standard_normal((b, hq, lq, d)).astype(np.float32)
    kc = rng.standard_normal((pages, page, hkv, d)).astype(np.float32)
    vc = rng.standard_normal((pages, page, hkv, dv)).astype(np.float32)
    # Each sequence owns distinct pages in a shuffled order, as an allocator
    # leaves them.
    order = rng.permutation(max(pages, b * max_pages))[:b * max_pages] % max(pages, 1)
    table = order.reshape(b, max_pages).astype(np.int32)
    return q, kc, vc, table, np.asarray(lens, np.int32)


# (B, Hq, Hkv, Lq, D, Dv, page size, pool pages, max pages per sequence, lengths, mask)
CASES = {
    "decode_gqa4_page16": (3, 8, 2, 1, 32, 24, 16, 40, 6, [37, 1, 96], {}),
    "mqa_page48": (2, 4, 1, 1, 16, 40, 48, 9, 3, [100, 144], {}),
    "spec_causal_page32": (2, 4, 2, 6, 24, 16, 32, 12, 4, [70, 6], dict(causal=True)),
    "lq16_window_page80": (2, 2, 2, 16, 16, 16, 80, 6, 2, [150, 33], dict(window=20)),
    "empty_and_short": (3, 2, 2, 3, 16, 8, 16, 8, 2, [0, 2, 17], dict(causal=True)),
    "past_capacity": (2, 3, 3, 2, 8, 12, 16, 6, 3, [48, 1000], {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_paged_matches_reference(name):
    b, hq, hkv, lq, d, dv, page, pages, max_pages, lens, mask = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    q, kc, vc, table, lens = _case(rng, b, hq, hkv, lq, d, dv, page, pages, max_pages, lens)
    o, lse = attention(q, kc, vc, block_table=table, seq_lens=lens, return_lse=True, **mask)
    ro, rl = paged_attention_ref(q, kc, vc, table, lens, **mask)
    assert o.shape == (b, hq, lq, dv)
    np.testing.assert_allclose(o, ro, atol=2e-5, rtol=1e-4)
    live = np.isfinite(rl)
    assert np.array_equal(np.isfinite(lse), live)
    np.testing.assert_allclose(lse[live], rl[live], atol=2e-5, rtol=1e-5)
    # Rows that see no key: zeros, never NaN.
    assert not np.isnan(o).any()
    assert np.all(o[~live] == 0)


# gpt-oss as it is served: a learned sink logit per query head, on a paged cache.
SINK_CASES = ("decode_gqa4_page16", "spec_causal_page32", "lq16_window_page80",
              "empty_and_short")


@pytest.mark.parametrize("name", SINK_CASES)
def test_sinks_match_reference(name):
    """Each row's softmax counts sinks[h] as one more key of value zero: from the
    definition's (o, lse) without sinks, lse' = logaddexp(lse, sinks[h]) and
    o' = o·exp(lse − lse'); a row that sees no key gives 0 and lse = sinks[h]."""
    b, hq, hkv, lq, d, dv, page, pages, max_pages, lens, mask = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)) + 1)
    q, kc, vc, table, lens = _case(rng, b, hq, hkv, lq, d, dv, page, pages, max_pages, lens)
    sinks = (rng.standard_normal(hq) * 2.0).astype(np.float32)
    o, lse = attention(q, kc, vc, block_table=table, seq_lens=lens, sinks=sinks,
                       return_lse=True, **mask)
    ro, rl = paged_attention_ref(q, kc, vc, table, lens, **mask)
    s = np.broadcast_to(sinks.astype(np.float64)[None, :, None], rl.shape)
    want_lse = np.logaddexp(rl, s)
    want = ro * np.exp(rl - want_lse)[..., None]
    np.testing.assert_allclose(o, want, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(lse, want_lse, atol=2e-5, rtol=1e-5)
    # The sinks move the result far past the tolerance: the check above sees them.
    assert np.abs(want - ro).max() > 1e-3


def test_table_outside_the_pool_is_clamped():
    rng = np.random.default_rng(7)
    q, kc, vc, table, lens = _case(rng, 2, 2, 1, 1, 16, 16, 16, 5, 3, [48, 40])
    table[0, 1] = 1 << 30
    table[1, 0] = -5
    o = attention(q, kc, vc, block_table=table, seq_lens=lens)
    ro, _ = paged_attention_ref(q, kc, vc, table, lens)
    np.testing.assert_allclose(o, ro, atol=2e-5, rtol=1e-4)


def test_torch_bf16_matches_reference():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    q, kc, vc, table, lens = _case(rng, 2, 4, 2, 2, 32, 16, 16, 16, 5, [77, 30])
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, kc, vc))
    o = attention(tq, tk, tv, block_table=torch.from_numpy(table),
                  seq_lens=torch.from_numpy(lens), causal=True)
    assert o.dtype == torch.bfloat16
    ro, _ = paged_attention_ref(*(x.float().numpy() for x in (tq, tk, tv)), table, lens,
                                causal=True)
    np.testing.assert_allclose(o.float().numpy(), ro, atol=2e-2, rtol=2e-2)


def test_paged_equals_contiguous_attention():
    """One page per sequence holding all of it is the contiguous attention."""
    rng = np.random.default_rng(3)
    b, hq, hkv, lq, lk, d = 2, 4, 2, 3, 48, 16
    q = rng.standard_normal((b, hq, lq, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, lk, d)).astype(np.float32)
    v = rng.standard_normal((b, hkv, lk, d)).astype(np.float32)
    kc = np.ascontiguousarray(k.transpose(0, 2, 1, 3))
    vc = np.ascontiguousarray(v.transpose(0, 2, 1, 3))
    table = np.arange(b, dtype=np.int32).reshape(b, 1)
    lens = np.full(b, lk, np.int32)
    paged = attention(q, kc, vc, block_table=table, seq_lens=lens, causal=True)
    contiguous = attention(q, k, v, causal=True, align="bottom_right")
    np.testing.assert_allclose(paged, contiguous, atol=1e-6, rtol=1e-5)


def _small(rng):
    return _case(rng, 2, 2, 1, 1, 16, 16, 16, 4, 2, [20, 5])


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(seq_lens=None), ValueError, "block_table= and seq_lens= go together"),
    (dict(table_dtype=np.int64), TypeError, "block_table must be int32"),
    (dict(lens_dtype=np.float32), TypeError, "seq_lens must be int32"),
    (dict(lens_shape=(3,)), ValueError, r"seq_lens must have shape \[2\]"),
    (dict(align="top_left"), ValueError, "align must be 'bottom_right'"),
    (dict(dynamic=True), ValueError, "dynamic=True is not supported with block_table="),
    # A bias spans the table's capacity (2 pages of 16 keys), not a sequence's length.
    (dict(bias=np.zeros((2, 1, 7), np.float32)), ValueError,
     r"bias must broadcast to the scores' shape \(2, 2, 1, 32\)"),
    (dict(alibi_slopes=np.zeros(3, np.float32)), ValueError,
     r"alibi_slopes must have shape \[heads\]"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    rng = np.random.default_rng(5)
    q, kc, vc, table, lens = _small(rng)
    kwargs = dict(kwargs)
    table = table.astype(kwargs.pop("table_dtype", np.int32))
    lens = lens.astype(kwargs.pop("lens_dtype", np.int32))
    if "lens_shape" in kwargs:
        lens = np.zeros(kwargs.pop("lens_shape"), np.int32)
    kwargs.setdefault("seq_lens", lens)
    with pytest.raises(error, match=match):
        attention(q, kc, vc, block_table=table, **kwargs)


def test_query_must_be_rank_4():
    rng = np.random.default_rng(6)
    q, kc, vc, table, lens = _small(rng)
    with pytest.raises(ValueError, match=r"q must be \[B, Hq, Lq, D\]"):
        attention(q[0], kc, vc, block_table=table, seq_lens=lens)


def test_gradients_refused():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    q, kc, vc, table, lens = _small(rng)
    tq = torch.from_numpy(q).requires_grad_()
    with pytest.raises(NotImplementedError, match="paged KV cache"):
        attention(tq, torch.from_numpy(kc), torch.from_numpy(vc),
                  block_table=torch.from_numpy(table), seq_lens=torch.from_numpy(lens))


def _paged_mod_case(name, seed):
    b, hq, hkv, lq, d, dv, page, pages, max_pages, lens, mask = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)) + seed)
    q, kc, vc, table, lens = _case(rng, b, hq, hkv, lq, d, dv, page, pages, max_pages, lens)
    return rng, q, kc, vc, table, lens, mask, max_pages * page


def _check(o, lse, ro, rl):
    live = np.isfinite(rl)
    assert np.array_equal(np.isfinite(lse), live)
    np.testing.assert_allclose(o, ro, atol=3e-5, rtol=1e-4)
    np.testing.assert_allclose(lse[live], rl[live], atol=3e-5, rtol=1e-5)
    assert np.all(o[~live] == 0)


# score_mod with its indices on a paged cache: kv_idx is the key's position in
# its sequence, q_idx the query's row; score_mod_args are read there.
MOD_CASES = ("decode_gqa4_page16", "spec_causal_page32", "lq16_window_page80",
             "empty_and_short", "mqa_page48")


@pytest.mark.parametrize("name", MOD_CASES)
def test_score_mod_matches_reference(name):
    rng, q, kc, vc, table, lens, mask, capacity = _paged_mod_case(name, 2)
    hq, lq = q.shape[1], q.shape[2]
    bias = rng.standard_normal((hq, capacity)).astype(np.float32)

    def mod(score, b, h, q_idx, kv_idx, bias_t, lens_t):
        # Soft-capped, a per-head bias along the key's position, and a pull
        # toward the query's own position q_idx + n - Lq.
        pos = q_idx + lens_t[b] - lq
        return np.tanh(score / 8.0) * 8.0 + bias_t[h, kv_idx] - 0.05 * abs(pos - kv_idx)

    o, lse = attention(q, kc, vc, block_table=table, seq_lens=lens, return_lse=True,
                       score_mod=mod, score_mod_args=(bias, lens), **mask)
    ro, rl = paged_attention_ref(
        q, kc, vc, table, lens, **mask,
        score_mod=lambda s, b, h, i, j, n: np.tanh(s / 8.0) * 8.0 + bias[h, j]
        - 0.05 * np.abs(i + n - lq - j))
    _check(o, lse, ro, rl)


@pytest.mark.parametrize("name", ("decode_gqa4_page16", "spec_causal_page32", "mqa_page48"))
def test_mask_mod_matches_reference(name):
    """A mask_mod on a paged cache masks the scores at the indices it is given
    (never a structured mask: that would sit at each sequence's end)."""
    rng, q, kc, vc, table, lens, mask, capacity = _paged_mod_case(name, 3)
    o, lse = attention(q, kc, vc, block_table=table, seq_lens=lens, return_lse=True,
                       mask_mod=lambda b, h, q_idx, kv_idx: kv_idx % 3 != 1)
    ro, rl = paged_attention_ref(
        q, kc, vc, table, lens,
        score_mod=lambda s, b, h, i, j, n: np.where(j % 3 != 1, s, -np.inf))
    _check(o, lse, ro, rl)


@pytest.mark.parametrize("name", MOD_CASES)
def test_conveniences_match_reference(name):
    """softcap=, bias= (over the table's capacity) and alibi_slopes= (at each
    sequence's own diagonal) on a paged cache."""
    rng, q, kc, vc, table, lens, mask, capacity = _paged_mod_case(name, 4)
    b, hq, lq = q.shape[:3]
    bias = rng.standard_normal((hq, 1, capacity)).astype(np.float32)
    slopes = (rng.random(hq) * 0.3).astype(np.float32)
    o, lse = attention(q, kc, vc, block_table=table, seq_lens=lens, return_lse=True,
                       softcap=5.0, bias=bias, alibi_slopes=slopes, **mask)
    ro, rl = paged_attention_ref(
        q, kc, vc, table, lens, **mask,
        score_mod=lambda s, bi, h, i, j, n: np.tanh(s / 5.0) * 5.0 + bias[:, :, :n]
        - slopes[h] * np.abs(i + n - lq - j))
    _check(o, lse, ro, rl)


def test_torch_bf16_score_mod_matches_reference():
    torch = pytest.importorskip("torch")
    rng, q, kc, vc, table, lens, mask, capacity = _paged_mod_case("decode_gqa4_page16", 5)
    q, kc, vc = (x.astype(np.float32) for x in (q, kc, vc))
    tq, tk, tv = (torch.from_numpy(x).to(torch.bfloat16) for x in (q, kc, vc))
    o = attention(tq, tk, tv, block_table=torch.from_numpy(table),
                  seq_lens=torch.from_numpy(lens),
                  score_mod=lambda s, b, h, i, j: s - 0.1 * j)
    rq, rk, rv = (x.to(torch.float64).numpy() for x in (tq, tk, tv))
    ro, _ = paged_attention_ref(rq, rk, rv, table, lens,
                                score_mod=lambda s, b, h, i, j, n: s - 0.1 * j)
    np.testing.assert_allclose(o.to(torch.float64).numpy(), ro, atol=2e-2, rtol=2e-2)
