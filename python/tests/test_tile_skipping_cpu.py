"""Tile skipping for masks of the indices alone (lib/Dialect/Flash/IR/IndexMask.cpp): a
mask_mod that is not causal or a window masks the scores through the score_mod, and the
tiled lowering sorts every (query block, key tile) by interval arithmetic over its
predicate — empty tiles skipped, full ones run without the mask. A rule that is not sound
drops keys a row sees or keeps keys it must not, so each mask here is checked against
float64 attention on fresh random inputs, at small tiles (many tiles of every class),
non-square shapes (Lq != Lk != D != Dv), with grouped-query heads; then random predicates
over every operator the analysis has a rule for."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from flash_mlir import attention  # noqa: E402

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not flash_mlir.compiler_available(),
                                reason="no compiler in this build")

B, HQ, HKV, LQ, LK, D, DV = 2, 4, 2, 45, 61, 16, 12
TILES = dict(block_q=8, block_kv=8)


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(1 << 31)))


def _inputs(gen, lq=LQ, lk=LK):
    q = torch.randn(B, HQ, lq, D, generator=gen)
    k = torch.randn(B, HKV, lk, D, generator=gen)
    v = torch.randn(B, HKV, lk, DV, generator=gen)
    return q, k, v


def _ref(q, k, v, mask_mod):
    """float64 attention masked by mask_mod evaluated on index tensors; a row that sees
    no key gives 0."""
    q, k, v = (x.double() for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    b = torch.arange(q.shape[0])[:, None, None, None]
    h = torch.arange(q.shape[1])[None, :, None, None]
    i = torch.arange(q.shape[2])[None, None, :, None]
    j = torch.arange(k.shape[2])[None, None, None, :]
    visible = torch.broadcast_to(torch.as_tensor(mask_mod(b, h, i, j)), s.shape)
    s = torch.where(visible, s, torch.tensor(float("-inf"), dtype=s.dtype))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v


def _check(gen, mask_mod, lq=LQ, lk=LK, **options):
    q, k, v = _inputs(gen, lq, lk)
    out = attention(q, k, v, mask_mod=mask_mod, **{**TILES, **options})
    ref = _ref(q, k, v, mask_mod)
    err = (out.double() - ref).abs().max().item()
    assert err < 1e-5, err


MASKS = {
    # Chunked attention (Llama 4): a query sees the keys of its own chunk.
    "chunked": lambda b, h, i, j: (i // 16) == (j // 16),
    # Prefix-LM: the prefix is visible to all, the rest causally.
    "prefix_lm": lambda b, h, i, j: (j < 12) | (j <= i),
    # A symmetric window written with abs (no structured kind is symmetric).
    "symmetric_window": lambda b, h, i, j: abs(i - j) <= 9,
    # Causal with a window, written as two compares rather than window=.
    "causal_window_compares": lambda b, h, i, j: (j <= i + 16) & (j > i + 16 - 20),
    # Dilated: every third key of the causal past; tiles never empty nor full inside.
    "dilated": lambda b, h, i, j: ((i - j) % 3 == 0) & (j <= i),
    # Per-head chunks: the batch and head indices are exact per tile.
    "per_head_chunks": lambda b, h, i, j: (i // (8 * (h + 1))) == (j // (8 * (h + 1))),
    # Rows that see nothing at all (output 0) beside rows that see everything.
    "dead_rows": lambda b, h, i, j: (i >= 20) & (j >= 0),
    # A negated predicate (select(p, -inf, s)) and a per-batch shift.
    "negated": lambda b, h, i, j: ~((j > i + b * 7) | (j < i - 30)),
    # Strided blocks: tiles of 8 alternate between visible and hidden.
    "strided_blocks": lambda b, h, i, j: (j // 8) % 2 == (i // 8) % 2,
}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_mask(gen, name):
    _check(gen, MASKS[name])


@pytest.mark.parametrize("blocks", [(4, 16), (32, 32), (7, 5)])
def test_tile_sizes(gen, blocks):
    """Tiles that straddle the chunk edges differently, and ragged tails."""
    _check(gen, MASKS["chunked"], block_q=blocks[0], block_kv=blocks[1])
    _check(gen, MASKS["prefix_lm"], block_q=blocks[0], block_kv=blocks[1])


def test_long_rows_skip(gen):
    """Lq, Lk large enough that most tiles are empty (a chunk of 32 among 512 keys)."""
    _check(gen, lambda b, h, i, j: (i // 32) == (j // 32), lq=200, lk=513,
           block_q=16, block_kv=16)


def _random_predicate(r, depth):
    """A random predicate over (b, h, i, j) of the operators the analysis knows, as a
    function usable both traced and on torch index tensors."""
    def term(d):
        kind = r.integers(0, 9 if d > 0 else 3)
        if kind == 0 or kind == 8:
            name = ["b", "h", "i", "j", "i", "j"][r.integers(0, 6)]
            return lambda env, n=name: env[n]
        if kind <= 2:
            c = int(r.integers(-40, 41))
            return lambda env, c=c: c
        x, y = term(d - 1), term(d - 1)
        if kind == 3:
            return lambda env: x(env) + y(env)
        if kind == 4:
            return lambda env: x(env) - y(env)
        if kind == 5:
            c = int(r.integers(-3, 4))
            return lambda env: x(env) * c
        c = int(r.integers(1, 20))
        if kind == 6:
            return lambda env: x(env) // c
        if r.integers(0, 2):
            return lambda env: abs(x(env) + 0 * env["j"])
        return lambda env: x(env) % c

    def pred(d):
        kind = r.integers(0, 5 if d > 0 else 1)
        if kind == 0:
            x, y = term(2), term(2)
            op = ["<", "<=", ">", ">=", "==", "!="][r.integers(0, 6)]
            fns = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
                   ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
                   "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
            f = fns[op]
            # A bare constant on both sides compares Python ints: tie it to j.
            return lambda env: f(x(env) + 0 * env["j"], y(env))
        p, q = pred(d - 1), pred(d - 1)
        if kind == 1:
            return lambda env: p(env) & q(env)
        if kind == 2:
            return lambda env: p(env) | q(env)
        if kind == 3:
            return lambda env: p(env) ^ q(env)
        return lambda env: ~p(env)

    p = pred(depth)
    return lambda b, h, i, j: p({"b": b, "h": h, "i": i, "j": j})


@pytest.mark.parametrize("case", range(16))
def test_random_predicates(gen, rng, case):
    import numpy as np
    r = np.random.default_rng([int(rng.integers(1 << 31)), case])
    mask_mod = _random_predicate(r, depth=2)
    _check(gen, mask_mod)
