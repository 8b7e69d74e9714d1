"""Masks of the indices alone on CUDA tensors (a FlexAttention mask_mod that is not causal
or a window, a score_mod that masks): every GPU kernel starts and stops its key loop at the
first and last tile the mask may show, and the tensor-core kernels give a tile it shows
whole the mask-free softmax (lib/Dialect/Flash/IR/IndexMask.cpp, TileProgram's
trimHiddenTiles and ScoreContext::indexFull). A wrong classification drops keys a row sees
or keeps keys it must not, so each output is compared with a float64 reference of the same
rounded inputs and must be within twice the error of torch SDPA's own given the same mask
as a boolean tensor (plus 1e-3); rows that see no key must be exactly 0. Non-square
shapes, grouped-query heads, bf16 and f16, on the kernels kernel=auto picks (wgmma) and
the ones forced (mma.sync, portable). Run where the kernels are, or fill a cache folder
here with
    python3 python/tests/test_tile_skipping_gpu.py --prebuild DIR
and run with FLASH_MLIR_CACHE_DIR=DIR on the GPU machine."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from test_attention_gpu import _cuda  # noqa: E402


def chunked(b, h, i, j):
    return (i // 96) == (j // 96)


def chunked_aligned(b, h, i, j):
    return (i // 256) == (j // 256)


def prefix_lm(b, h, i, j):
    return (j < 200) | (j <= i + 300)


def symmetric_window(b, h, i, j):
    return abs(i + 300 - j) <= 150


def dilated(b, h, i, j):
    return ((i - j) % 4 == 0) & (j <= i + 300)


def negated(b, h, i, j):
    return ~((j > i + 100 * b + 50) | (j < i - 400))


def dead_rows(b, h, i, j):
    return (i >= 250) & (j < i)


# Sink keys and a local window (StreamingLLM): the visible tiles are the first and those
# near the diagonal, and the loops step over the hidden run between them.
def sinks_window(b, h, i, j):
    return (j < 32) | ((j <= i + 300) & (i + 300 - j < 128))


def per_head_chunks(b, h, i, j):
    return (i // (128 * (h // 2 + 1))) == (j // (128 * (h // 2 + 1)))


# Decode against 4000 or 9000 keys, the queries the last positions of the sequence
# (chunked attention as Llama 4 serves it): the split-KV kernel packs the query heads
# of a K/V head into its rows, bounds the mask's head index by the block's heads, and
# spreads its splits over the tiles of the query's chunk.
def decode_chunked(b, h, i, j):
    return ((i + 3998) // 1024) == (j // 1024)


def decode_chunked_per_head(b, h, i, j):
    return ((i + 3998) // (512 * (h % 4 + 1))) == (j // (512 * (h % 4 + 1)))


def decode_sink_and_chunk(b, h, i, j):
    return (j < 16) | ((i + 8999) // 2048 == j // 2048)


# The same written negated: not (past the sinks and out of the window).
def decode_sinks_window(b, h, i, j):
    return ~((j >= 64) & (i + 8999 - j >= 1024))


MASKS = {f.__name__: f for f in (chunked, chunked_aligned, prefix_lm, symmetric_window,
                                 dilated, negated, dead_rows, sinks_window, per_head_chunks,
                                 decode_chunked, decode_chunked_per_head,
                                 decode_sink_and_chunk, decode_sinks_window)}
DECODE = ("decode_chunked", "decode_chunked_per_head", "decode_sink_and_chunk",
          "decode_sinks_window")

# name -> (q, k, v shapes, dtype, mask, attention() keywords)
CASES = {}
for _name in MASKS:
    if _name not in DECODE:
        CASES["wgmma-" + _name] = ((2, 8, 700, 128), (2, 2, 1000, 128), (2, 2, 1000, 64),
                                   "bfloat16", _name, {})
CASES.update({
    "wgmma-d64-f16-chunked": ((1, 4, 999, 64), (1, 4, 1299, 64), (1, 4, 1299, 64),
                              "float16", "chunked", {}),
    "wgmma-d256-prefix": ((1, 4, 500, 256), (1, 2, 800, 256), (1, 2, 800, 256),
                          "bfloat16", "prefix_lm", {}),
    "mma-chunked": ((2, 8, 700, 128), (2, 2, 1000, 128), (2, 2, 1000, 64), "bfloat16",
                    "chunked", {"kernel": "mma"}),
    "mma-negated-f16": ((2, 4, 500, 64), (2, 4, 700, 64), (2, 4, 700, 64), "float16",
                        "negated", {"kernel": "mma"}),
    "mma-dead-rows": ((2, 4, 500, 64), (2, 4, 700, 64), (2, 4, 700, 64), "bfloat16",
                      "dead_rows", {"kernel": "mma"}),
    "mma-sinks-window-f16": ((2, 4, 700, 64), (2, 2, 1000, 64), (2, 2, 1000, 48), "float16",
                             "sinks_window", {"kernel": "mma"}),
    "portable-sinks-window": ((1, 4, 300, 64), (1, 2, 1000, 64), (1, 2, 1000, 48),
                              "float32", "sinks_window", {"kernel": "portable"}),
    "portable-prefix": ((1, 4, 300, 64), (1, 2, 500, 64), (1, 2, 500, 48), "bfloat16",
                        "prefix_lm", {"kernel": "portable"}),
    "portable-symmetric": ((1, 4, 300, 64), (1, 2, 500, 64), (1, 2, 500, 48), "float32",
                           "symmetric_window", {"kernel": "portable"}),
    "splitkv-decode-chunked": ((2, 8, 2, 128), (2, 2, 4000, 128), (2, 2, 4000, 64),
                               "bfloat16", "decode_chunked", {"kernel": "splitkv"}),
    "splitkv-decode-per-head": ((2, 8, 2, 128), (2, 2, 4000, 128), (2, 2, 4000, 64),
                                "bfloat16", "decode_chunked_per_head", {"kernel": "splitkv"}),
    "splitkv-decode-sinks-window": ((2, 8, 1, 128), (2, 2, 9000, 128), (2, 2, 9000, 64),
                                    "bfloat16", "decode_sinks_window", {"kernel": "splitkv"}),
    "wgmma-decode-sinks-window": ((2, 8, 1, 128), (2, 2, 9000, 128), (2, 2, 9000, 128),
                                  "bfloat16", "decode_sinks_window",
                                  {"kernel": "wgmma", "split_kv": 5}),
    # The wgmma decode form packs the query heads of a K/V head into its rows as the
    # split kernel does: a mask that reads the head sees each row's own, and the block's
    # key range is trimmed for all of its heads (G·Lq = 24 rows leave padding rows).
    "wgmma-decode-per-head": ((2, 8, 2, 128), (2, 2, 4000, 128), (2, 2, 4000, 64),
                              "bfloat16", "decode_chunked_per_head", {"kernel": "wgmma"}),
    "wgmma-decode-sink-chunk-mqa-lq3-f16": ((1, 8, 3, 64), (1, 1, 9000, 64),
                                            (1, 1, 9000, 64), "float16",
                                            "decode_sink_and_chunk", {"kernel": "wgmma"}),
    "auto-decode-sink-chunk-mqa-f16": ((1, 8, 1, 64), (1, 1, 9000, 64), (1, 1, 9000, 64),
                                       "float16", "decode_sink_and_chunk", {}),
})

# A bias under the mask: full tiles keep the bias and drop the mask.
BIAS_CASE = ((2, 4, 600, 128), (2, 4, 900, 128), (2, 4, 900, 128), "bfloat16")


def _bias_chunked(bias):
    def score_mod(score, b, h, q_idx, kv_idx):
        import torch
        return torch.where(chunked(b, h, q_idx, kv_idx), score + bias[h, q_idx, kv_idx],
                           -float("inf"))
    return score_mod


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, (qs, ks, vs, dtype, mask, kw) in CASES.items():
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, mask_mod=MASKS[mask], **kw))
    import torch
    qs, ks, vs, dtype = BIAS_CASE
    bias = torch.zeros(qs[1], qs[2], ks[2])
    print("bias", flash_mlir.prebuild(qs, ks, vs, dtype, score_mod=_bias_chunked(bias)))


def _visible(torch, mask, qs, ks):
    b = torch.arange(qs[0])[:, None, None, None]
    h = torch.arange(qs[1])[None, :, None, None]
    i = torch.arange(qs[2])[None, None, :, None]
    j = torch.arange(ks[2])[None, None, None, :]
    return torch.broadcast_to(mask(b, h, i, j), (qs[0], qs[1], qs[2], ks[2]))


def _check(torch, q, k, v, out, vis, bias=None):
    """out against float64 within twice SDPA's error (SDPA given `vis` as its mask);
    rows that see nothing exactly 0."""
    import torch.nn.functional as F
    g = q.shape[1] // k.shape[1]
    qd, kd, vd = (x.double().cpu() for x in (q, k, v))
    kd, vd = kd.repeat_interleave(g, 1), vd.repeat_interleave(g, 1)
    s = (qd @ kd.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if bias is not None:
        s = s + bias.double().cpu()
    s = torch.where(vis, s, torch.tensor(float("-inf"), dtype=s.dtype))
    ref = (torch.softmax(s, -1) @ vd).nan_to_num(0.0)
    kr, vr = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    amask = vis.cuda()
    if bias is not None:
        amask = torch.where(amask, bias.to(q.dtype).cuda(),
                            torch.tensor(float("-inf"), device="cuda", dtype=q.dtype))
    sdpa = F.scaled_dot_product_attention(q, kr, vr, attn_mask=amask).nan_to_num(0.0)
    torch.cuda.synchronize()
    dead = ~vis.any(-1)
    assert (out.cpu()[dead] == 0).all().item()
    err = (out.double().cpu() - ref).abs().max().item()
    err_sdpa = (sdpa.double().cpu() - ref).abs().max().item()
    assert err <= 2 * err_sdpa + 1e-3, (err, err_sdpa)


@pytest.mark.parametrize("name", sorted(CASES))
def test_mask(name):
    torch = _cuda()
    qs, ks, vs, dtype, mask, kw = CASES[name]
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(*s, device="cuda", dtype=dt) for s in (qs, ks, vs))
    out = flash_mlir.attention(q, k, v, mask_mod=MASKS[mask], **kw)
    _check(torch, q, k, v, out, _visible(torch, MASKS[mask], qs, ks))


def test_bias_under_the_mask():
    torch = _cuda()
    qs, ks, vs, dtype = BIAS_CASE
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn(*s, device="cuda", dtype=dt) for s in (qs, ks, vs))
    # bf16 values, so that SDPA's bf16 mask carries the bias exactly.
    bias = torch.randn(qs[1], qs[2], ks[2], device="cuda").to(dt).float()
    out = flash_mlir.attention(q, k, v, score_mod=_bias_chunked(bias))
    vis = _visible(torch, chunked, qs, ks)
    _check(torch, q, k, v, out, vis, bias=bias[None].expand(qs[0], -1, -1, -1))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_tile_skipping_gpu.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
