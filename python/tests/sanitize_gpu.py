"""compute-sanitizer over every GPU kernel variant, through flash_mlir.attention: the
wgmma, mma.sync, portable and split-KV forward kernels (each forced with kernel=), every
mask kind and alignment, score_mod with captures (bias=, softcap=, alibi_slopes=), tails at
L = 1, 63, 65, 4097, rows that see no key, the LSE, packed varlen batches with offsets
outside the tokens, the paged split-KV and wgmma kernels with block
tables full of junk entries, the persistent wgmma grid, and the backward (prep, key blocks, both dQ paths,
deterministic; the wgmma and mma.sync key-block kernels). Each case also checks its output against float64, so a kernel that did not
run cannot pass.

Here (compiler):  python3 python/tests/sanitize_gpu.py --prebuild DIR
There (GPU):      FLASH_MLIR_CACHE_DIR=DIR compute-sanitizer --tool memcheck python3 \\
                      python/tests/sanitize_gpu.py [CASE...]   (and racecheck, synccheck,
                      initcheck; the named cases only, if any)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import flash_mlir  # noqa: E402


def _c(q, k, v, dtype="bfloat16", grad=False, table=None, lens=None, cu=None, **kw):
    return dict(q=q, k=k, v=v, dtype=dtype, grad=grad, table=table, lens=lens, cu=cu, kw=kw)


CASES = {
    # wgmma (sm_90a): D, Dv in {64, 128}
    "wgmma-l1": _c((2, 4, 1, 64), (2, 4, 1, 64), (2, 4, 1, 64), kernel="wgmma"),
    "wgmma-causal-l63": _c((2, 4, 63, 64), (2, 4, 63, 64), (2, 4, 63, 64), kernel="wgmma",
                           causal=True, return_lse=True),
    "wgmma-causal-br-65x4097": _c((1, 4, 65, 128), (1, 2, 4097, 128), (1, 2, 4097, 128),
                                  kernel="wgmma", causal=True, align="bottom_right"),
    "wgmma-window-l4097": _c((1, 2, 4097, 64), (1, 2, 4097, 64), (1, 2, 4097, 128),
                             kernel="wgmma", window=300, return_lse=True),
    "wgmma-no-key-rows": _c((1, 2, 200, 128), (1, 2, 65, 128), (1, 2, 65, 128),
                            kernel="wgmma", causal=True, align="bottom_right",
                            return_lse=True),
    "wgmma-softcap-alibi": _c((2, 4, 65, 128), (2, 2, 100, 128), (2, 2, 100, 128),
                              kernel="wgmma", softcap=30.0, alibi=(4,), causal=True),
    "wgmma-bias": _c((2, 4, 63, 64), (2, 4, 65, 64), (2, 4, 65, 64), kernel="wgmma",
                     bias=(4, 63, 65)),
    # mma.sync (sm_80+)
    "wgmma-d96-dv40-padded": _c((2, 4, 65, 96), (2, 2, 130, 96), (2, 2, 130, 40),
                                kernel="wgmma", causal=True, return_lse=True),
    # The persistent grid: more work items than resident CTAs, so each CTA walks several
    # (Q's buffer handed back, the K/V ring carried across items).
    "wgmma-persistent-causal": _c((4, 16, 700, 64), (4, 16, 700, 64), (4, 16, 700, 64),
                                  kernel="wgmma", persistent=1, causal=True,
                                  return_lse=True),
    "wgmma-persistent-d128-gqa": _c((3, 12, 333, 128), (3, 4, 517, 128), (3, 4, 517, 128),
                                    kernel="wgmma", persistent=1, causal=True,
                                    align="bottom_right"),
    "mma-d96-causal-l65": _c((2, 4, 65, 96), (2, 2, 65, 96), (2, 2, 65, 64), kernel="mma",
                             causal=True, return_lse=True),
    "mma-d256-window-l63": _c((1, 2, 63, 256), (1, 2, 63, 256), (1, 2, 63, 256),
                              kernel="mma", window=17),
    "mma-bias-f16": _c((1, 4, 129, 96), (1, 4, 257, 96), (1, 4, 257, 64), "float16",
                       kernel="mma", bias=(129, 257)),
    # portable (any chip, f32)
    "portable-l1": _c((2, 2, 1, 24), (2, 2, 1, 24), (2, 2, 1, 16), "float32",
                      kernel="portable"),
    "portable-causal-l63": _c((2, 2, 63, 24), (2, 2, 63, 24), (2, 2, 63, 16), "float32",
                              kernel="portable", causal=True, return_lse=True),
    "portable-window-br": _c((1, 2, 65, 40), (1, 1, 100, 40), (1, 1, 100, 8), "float32",
                             kernel="portable", window=9, align="bottom_right"),
    # split-KV decode
    "splitkv-gqa-4097": _c((2, 16, 1, 128), (2, 4, 4097, 128), (2, 4, 4097, 128),
                           return_lse=True),
    "splitkv-split3": _c((2, 16, 1, 128), (2, 4, 2000, 128), (2, 4, 2000, 128), split_kv=3),
    "splitkv-lq16-causal-br": _c((2, 32, 16, 128), (2, 8, 3000, 128), (2, 8, 3000, 128),
                                 causal=True, align="bottom_right", return_lse=True),
    "splitkv-rows160": _c((1, 8, 40, 64), (1, 2, 1500, 64), (1, 2, 1500, 64),
                          kernel="splitkv", causal=True, align="bottom_right"),
    # the wgmma kernel's decode form: packed GQA rows, split keys, the combine
    "wgmma-decode-split3": _c((2, 32, 16, 128), (2, 8, 3001, 128), (2, 8, 3001, 128),
                              kernel="wgmma", split_kv=3, return_lse=True),
    "wgmma-decode-causal-auto-split": _c((1, 8, 16, 64), (1, 2, 20000, 64),
                                         (1, 2, 20000, 64), kernel="wgmma", causal=True,
                                         align="bottom_right", return_lse=True),
    # MQA at Lq = 16: 128 packed rows as two 64-row blocks reading the same K/V tiles
    "wgmma-decode-mqa-lq16": _c((2, 8, 16, 128), (2, 1, 3001, 128), (2, 1, 3001, 128),
                                return_lse=True),
    # paged split-KV: tables with junk entries, a length past the capacity, an empty one
    "paged-page48-f16": _c((2, 16, 1, 128), (90, 48, 2, 128), (90, 48, 2, 128), "float16",
                           table=(2, 40), lens=[1000, 10 ** 6]),
    "paged-lq16-causal": _c((2, 32, 16, 128), (200, 32, 8, 128), (200, 32, 8, 128),
                            table=(2, 90), lens=[2800, 0], causal=True, return_lse=True),
    # paged wgmma: TMA boxes through the same junk tables, masks over packed heads
    "paged-wgmma-page48": _c((2, 16, 1, 128), (90, 48, 2, 128), (90, 48, 2, 128),
                             table=(2, 40), lens=[1000, 10 ** 6], kernel="wgmma"),
    "paged-wgmma-mqa-lq16": _c((2, 8, 16, 128), (120, 32, 1, 128), (120, 32, 1, 128),
                               table=(2, 60), lens=[1900, 7], return_lse=True),
    "paged-wgmma-lq16-causal": _c((2, 32, 16, 64), (200, 32, 8, 64), (200, 32, 8, 64),
                                  "float16", table=(2, 90), lens=[2800, 0], causal=True,
                                  return_lse=True, kernel="wgmma"),
    # packed varlen batches (wgmma, then mma.sync at D = 96): offsets past the tokens,
    # backwards, negative
    "varlen-junk-offsets": _c((300, 8, 128), (500, 2, 128), (500, 2, 128),
                              cu=([0, 17, 17, 200, 10 ** 6], [-7, 300, 12, 499, 600]),
                              causal=True, align="bottom_right", return_lse=True),
    "varlen-f16-window-d64": _c((333, 4, 64), (333, 4, 64), (333, 4, 64), "float16",
                                cu=([0, 1, 65, 200, 333], [0, 1, 65, 200, 333]), window=33),
    "varlen-mma-junk-offsets": _c((300, 8, 96), (500, 2, 96), (500, 2, 64),
                                  cu=([0, 17, 17, 200, 10 ** 6], [-7, 300, 12, 499, 600]),
                                  causal=True, return_lse=True),
    # the backward
    "grad-causal-l100": _c((2, 4, 100, 128), (2, 4, 100, 128), (2, 4, 100, 128), grad=True,
                           causal=True),
    "grad-mma-causal-l100": _c((2, 4, 100, 128), (2, 4, 100, 128), (2, 4, 100, 128),
                               grad=True, causal=True, grad_kernel="mma"),
    "grad-wgmma-gqa-tails": _c((1, 8, 130, 128), (1, 2, 70, 128), (1, 2, 70, 64), grad=True,
                               causal=True, align="bottom_right"),
    "grad-wgmma-d64-window": _c((2, 2, 65, 64), (2, 2, 200, 64), (2, 2, 200, 64), grad=True,
                                window=50),
    "grad-gqa-dv128": _c((2, 2, 500, 64), (2, 2, 300, 64), (2, 2, 300, 128), grad=True,
                         causal=True),
    "grad-no-key-rows": _c((2, 4, 300, 64), (2, 2, 100, 64), (2, 2, 100, 64), grad=True,
                           causal=True, align="bottom_right"),
    "grad-atomic-l65": _c((1, 4, 65, 64), (1, 4, 63, 64), (1, 4, 63, 64), grad=True,
                          grad_dq="atomic", window=20),
    "grad-wgmma-bias-alibi-tails": _c((1, 4, 130, 128), (1, 2, 70, 128), (1, 2, 70, 128),
                                      grad=True, bias=(4, 130, 70), alibi=(4,), causal=True,
                                      align="bottom_right"),
    "grad-mma-softcap-bias-d96": _c((2, 2, 65, 96), (2, 2, 100, 96), (2, 2, 100, 64),
                                    grad=True, bias=(2, 2, 65, 100), softcap=5.0),
    "grad-d256-gqa-tails": _c((1, 4, 70, 256), (1, 2, 130, 256), (1, 2, 130, 256),
                              grad=True, causal=True, align="bottom_right"),
    "grad-deterministic": _c((1, 4, 257, 128), (1, 2, 257, 128), (1, 2, 257, 128), grad=True,
                             grad_deterministic=True),
}


def _prebuild_kw(c):
    kw = dict(c["kw"])
    if "alibi" in kw:
        kw["alibi_slopes"] = kw.pop("alibi")
    if "bias" in kw:
        kw["bias"] = (kw["bias"], "float32")
    if c["grad"]:
        kw["grad"] = True
        kw.pop("return_lse", None)
    if c["table"] is not None:
        kw["block_table"] = c["table"]
    if c["cu"] is not None:
        kw["cu_seqlens"] = (len(c["cu"][0]),)
    return kw


def prebuild_all(cache_dir):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache_dir
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for name, c in CASES.items():
        print(name, flash_mlir.prebuild(c["q"], c["k"], c["v"], c["dtype"], **_prebuild_kw(c)))


def run(name, c):
    import numpy as np
    import torch
    from reference import attention_ref, paged_attention_ref, varlen_attention_ref
    g = torch.Generator(device="cuda").manual_seed(sum(map(ord, name)))
    dt = getattr(torch, c["dtype"])
    q, k, v = (torch.randn(*c[n], device="cuda", dtype=dt, generator=g) for n in "qkv")
    kw = dict(c["kw"])
    masks = {m: kw[m] for m in ("causal", "window", "align") if m in kw}
    extra = {}
    if "bias" in kw:
        extra["bias"] = torch.randn(*kw.pop("bias"), device="cuda", generator=g)
    if "alibi" in kw:
        extra["alibi_slopes"] = torch.rand(*kw.pop("alibi"), device="cuda", generator=g) * 0.2
    if c["table"] is not None:
        b, m = c["table"]
        table = torch.randint(0, c["k"][0], (b, m), device="cuda", generator=g,
                              dtype=torch.int32)
        junk = torch.randint(-(1 << 31), (1 << 31) - 1, (b, m), device="cuda", generator=g,
                             dtype=torch.int64).to(torch.int32)
        # Junk in 30 % of the slots: the clamps keep every read inside the pool, and the
        # reference clamps the same way.
        table = torch.where(torch.rand(b, m, device="cuda", generator=g) < 0.3, junk, table)
        lens = torch.tensor(c["lens"], device="cuda", dtype=torch.int32)
        out = flash_mlir.attention(q, k, v, block_table=table, seq_lens=lens, **kw)
        torch.cuda.synchronize()
        out = out[0] if isinstance(out, tuple) else out
        ref, _ = paged_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)),
                                     table.cpu().numpy(), lens.cpu().numpy(), **masks)
    elif c["cu"] is not None:
        cq, ck = (torch.tensor(x, device="cuda", dtype=torch.int64).clamp(
            -(1 << 31), (1 << 31) - 1).to(torch.int32) for x in c["cu"])
        out = torch.zeros(c["q"][:-1] + c["v"][-1:], device="cuda", dtype=dt)
        flash_mlir.attention(q, k, v, cu_seqlens_q=cq, cu_seqlens_k=ck, out=out, **kw)
        torch.cuda.synchronize()
        ref, _ = varlen_attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)),
                                      c["cu"][0], c["cu"][1], np.zeros(out.shape),
                                      np.zeros((c["q"][1], c["q"][0])), **masks)
    elif c["grad"]:
        leaves = [q, k, v] + list(extra.values())
        for x in leaves:
            x.requires_grad_()
        out = flash_mlir.attention(q, k, v, **kw, **extra)
        out.backward(torch.randn(out.shape, device="cuda", dtype=dt, generator=g))
        torch.cuda.synchronize()
        assert all(torch.isfinite(x.grad).all() for x in leaves), name
        ref = None
        if not extra:
            ref, _ = attention_ref(*(x.detach().double().cpu().numpy() for x in (q, k, v)),
                                   **masks)
        out = out.detach()
    else:
        out = flash_mlir.attention(q, k, v, **kw, **extra)
        torch.cuda.synchronize()
        out = out[0] if isinstance(out, tuple) else out
        ref = None
        if not extra:
            ref, _ = attention_ref(*(x.double().cpu().numpy() for x in (q, k, v)), **masks)
    assert torch.isfinite(out).all(), name
    if ref is not None:
        err = float(np.abs(out.double().cpu().numpy() - ref).max())
        assert err < (1e-4 if c["dtype"] == "float32" else 5e-2), (name, err)
    print(name, "ok", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--prebuild":
        prebuild_all(sys.argv[2])
    elif all(a in CASES for a in sys.argv[1:]):
        for name in sys.argv[1:] or CASES:
            run(name, CASES[name])
    else:
        sys.exit(__doc__)
