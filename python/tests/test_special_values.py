"""NaN and ±inf inputs through flash_mlir.attention give the NaN / ±inf pattern of the
float64 reference, element by element, on every path: the host's tiled loop nest and, on
an sm_90 device, the wgmma, mma.sync, portable and split-KV kernels (each forced with
kernel=) and the paged split-KV kernel; rows that see no key give 0 and lse = -inf.

The injections: NaN in a query row (its row is NaN), NaN in a key (the rows that see it),
+inf in one element of a query row and -inf in one element of a key (scores of ±inf by the
signs of the other operand: +inf makes a row NaN, -inf drops the key), +inf and -inf in
two elements of value row 0 (a key every row sees: ±inf in that column of each row whose
weight on it is positive). A kernel multiplies P = 0 by the values of the masked keys of
the tiles it visits and skips the others, so no infinite value sits on a key that some
row does not see. GPU kernels come from a cache filled here with
    python3 python/tests/test_special_values.py --prebuild DIR"""
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402
from reference import attention_ref, paged_attention_ref  # noqa: E402


def _inject(q, k, v, values=True):
    """The special values, in place, on float arrays [B, H, L, D]; `values`: also the
    infinite values of key 0 (only where every row sees key 0)."""
    q[0, 0, 3, :] = np.nan
    k[0, 0, 5, 1] = np.nan
    q[0, -1, 7, 2] = np.inf
    k[-1, -1, 9, 0] = -np.inf
    if values:
        v[:, :, 0, 1] = np.inf
        v[:, :, 0, 2] = -np.inf


def _sees_key0(kw):
    """Whether every row sees key 0 under these mask keywords (Lq <= Lk)."""
    return kw.get("window") is None


def _assert_same_pattern(out, ref, lse=None, ref_lse=None, tol=2e-2):
    out = np.asarray(out, np.float64)
    for name, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        got, want = test(out), test(ref)
        assert np.array_equal(got, want), "%s pattern differs at %d places (%d expected)" % (
            name, int((got != want).sum()), int(want.sum()))
    finite = np.isfinite(ref)
    assert np.abs(out[finite] - ref[finite]).max() <= tol
    if lse is not None:
        lse = np.asarray(lse, np.float64)
        assert np.array_equal(np.isnan(lse), np.isnan(ref_lse))
        assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
        ok = np.isfinite(ref_lse)
        assert np.abs(lse[ok] - ref_lse[ok]).max() <= 1e-3


MASKS = {"none": {}, "causal": dict(causal=True), "window-br": dict(window=7, align="bottom_right")}


@pytest.mark.skipif(not flash_mlir.compiler_available(), reason="no compiler in this build")
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_host_pattern(rng, mask):
    q = rng.standard_normal((2, 4, 37, 24)).astype(np.float32)
    k = rng.standard_normal((2, 2, 45, 24)).astype(np.float32)
    v = rng.standard_normal((2, 2, 45, 12)).astype(np.float32)
    _inject(q, k, v, values=_sees_key0(MASKS[mask]))
    out, lse = flash_mlir.attention(q, k, v, return_lse=True, **MASKS[mask])
    ref, ref_lse = attention_ref(q, k, v, **MASKS[mask])
    assert np.isnan(ref).any()  # the injections took effect
    assert np.isinf(ref).any() == _sees_key0(MASKS[mask])
    _assert_same_pattern(out, ref, lse, ref_lse, tol=1e-4)


@pytest.mark.skipif(not flash_mlir.compiler_available(), reason="no compiler in this build")
def test_host_paged_pattern(rng):
    b, hq, hkv, lq, d, page = 2, 4, 2, 3, 16, 16
    q = rng.standard_normal((b, hq, lq, d)).astype(np.float32)
    kc = rng.standard_normal((6, page, hkv, d)).astype(np.float32)
    vc = rng.standard_normal((6, page, hkv, d)).astype(np.float32)
    table = np.array([[4, 1, 3], [0, 2, 5]], np.int32)
    lens = np.array([40, 17], np.int32)
    q[0, 0, 1, :] = np.nan
    kc[1, 3, 0, 2] = np.nan      # sequence 0, key 19
    vc[4, 0, :, 1] = np.inf      # sequence 0, key 0: seen by every row
    out = flash_mlir.attention(q, kc, vc, block_table=table, seq_lens=lens, causal=True)
    ref, _ = paged_attention_ref(q, kc, vc, table, lens, causal=True)
    assert np.isnan(ref).any() and np.isinf(ref).any()
    _assert_same_pattern(out, ref, tol=1e-4)


# name -> (q, k, v shapes, dtype, keywords): every GPU kernel, forced.
GPU_CASES = {
    "wgmma-d64-causal": ((2, 4, 130, 64), (2, 2, 200, 64), (2, 2, 200, 64), "bfloat16",
                         dict(kernel="wgmma", causal=True, return_lse=True)),
    "wgmma-d128-window": ((2, 4, 65, 128), (2, 4, 65, 128), (2, 4, 65, 128), "float16",
                          dict(kernel="wgmma", window=20)),
    "wgmma-d96-padded": ((2, 4, 63, 96), (2, 2, 99, 96), (2, 2, 99, 64), "bfloat16",
                         dict(kernel="wgmma", causal=True, return_lse=True)),
    "mma-d96": ((2, 4, 63, 96), (2, 2, 99, 96), (2, 2, 99, 64), "bfloat16",
                dict(kernel="mma", return_lse=True)),
    "portable-f32-causal-br": ((2, 2, 40, 24), (2, 2, 57, 24), (2, 2, 57, 16), "float32",
                               dict(kernel="portable", causal=True, align="bottom_right")),
    "splitkv-decode": ((2, 8, 10, 128), (2, 2, 3000, 128), (2, 2, 3000, 128), "bfloat16",
                       dict(kernel="splitkv", split_kv=4, return_lse=True)),
}


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, (qs, ks, vs, dtype, kw) in GPU_CASES.items():
        print(name, flash_mlir.prebuild(qs, ks, vs, dtype, **kw))


@pytest.mark.parametrize("name", list(GPU_CASES))
def test_gpu_pattern(name):
    from test_attention_gpu import _cuda, _inputs
    torch = _cuda()
    qs, ks, vs, dtype, kw = GPU_CASES[name]
    q, k, v = _inputs(torch, qs, ks, vs, dtype)
    host = [x.float().cpu().numpy() for x in (q, k, v)]
    _inject(*host, values=_sees_key0(kw))
    q, k, v = (torch.from_numpy(x).to("cuda", q.dtype) for x in host)
    res = flash_mlir.attention(q, k, v, **kw)
    torch.cuda.synchronize()
    out, lse = res if kw.get("return_lse") else (res, None)
    masks = {m: kw[m] for m in ("causal", "window", "align") if m in kw}
    ref, ref_lse = attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)), **masks)
    assert np.isnan(ref).any() and np.isinf(ref).any() == _sees_key0(kw)
    _assert_same_pattern(out.float().cpu().numpy(), ref,
                         None if lse is None else lse.cpu().numpy(), ref_lse,
                         tol=1e-4 if dtype == "float32" else 3e-2)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--prebuild":
        sys.exit("usage: test_special_values.py --prebuild CACHE_DIR")
    prebuild_all(sys.argv[2])
