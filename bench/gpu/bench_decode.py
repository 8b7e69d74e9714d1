"""Decode: one (or 16) query rows per head against a long K/V cache, through
flash_mlir.attention on torch CUDA tensors (static shapes, kernels from the cache), beside
torch SDPA's cuDNN and FlashAttention-2 backends and, with --flex, FlexAttention in the
same process.

The work is reading K and V once, so each row reports the K+V read rate — bytes of the
K and V the caller passed (B · Hkv · Lk · (D + Dv) · 2) over the kernel time — and its
ratio to the card's device-to-device copy rate measured at the start of the run (bytes
read plus written). Kernel time is all kernels of one call (torch.profiler): a split
decode is two launches. Call time is CUDA events around one call. "ours-paged16" is the same call against the
same keys kept as a paged cache (pages of PAGE keys in a shuffled pool, a block table,
every sequence's length Lk), the layout vLLM and FlashInfer use.

With --flex, on every case (every row's output is checked against ours):
  flex          torch.compile(flex_attention) on the contiguous K and V, enable_gqa=True.
  flex-paged16  flex_attention reading the pool ours-paged16 reads, through torch's
                PagedAttention (torch.nn.attention.experimental._paged_attention): the
                pool seen as Flex's physical cache [1, Hkv, pages · PAGE, D] (one copy,
                before timing), our block table as its page table, and a block mask of
                one page per KV block, every key live, converted by
                convert_logical_block_mask. Where Flex takes no 16-key block on the first
                case, the column is flex-paged128 from there on: the same keys in a pool
                of 128-key pages (the "failed" row of flex-paged16 says why); where
                neither runs there, the column is left out, said on stderr.
Flex is compiled by torch.compile once per (B, Hq/Hkv, Lq), contiguous and paged apart,
some 25 compiles in all: batch, heads and Lq stay static, because Flex's decode kernel
takes only static batch and heads (symbolic ones send it to its prefill kernel), and Lk
is dynamic. The first call of each Flex row, the compile when one happens, is timed on
stderr with the count of new Dynamo graphs, and the total at the end.

Here (compiler, no GPU):  python3 bench/gpu/bench_decode.py --prebuild DIR
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/bench_decode.py [--flex]
Variants of our kernel (VARIANTS, on the VARIANT_CASES subset, or every case with
--all-cases; prebuild with the same flags), beside the default:
                          ... bench_decode.py --variants s2,s4 [--all-cases]
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402

D = 128
# (B, Hq, Hkv, Lq, Lk)
CASES = [(b, hq, hkv, lq, lk)
         for hq, hkv in ((32, 8), (8, 1))
         for lq in (1, 16)
         for b in (1, 16, 64)
         for lk in (4096, 32768, 131072)]


# name -> flash_mlir.attention keywords: kernel options to compare against the default.
VARIANTS = {
    "s2": {"stages": 2},
    "s4": {"stages": 4},
    "split4": {"split_kv": 4},
    "split8": {"split_kv": 8},
    "split16": {"split_kv": 16},
    "split1": {"split_kv": 1},
    "split2": {"split_kv": 2},
    # 64-row query blocks (one consumer warpgroup, two CTAs per SM): 128 packed rows
    # per K/V head become two CTAs that read the same K/V tiles (the second from L2),
    # with or without a key split.
    "m64": {"block_m": 64},
    "m64-split1": {"block_m": 64, "split_kv": 1},
    "m64-split2": {"block_m": 64, "split_kv": 2},
    # 128-row query blocks (two consumer warpgroups), the default for 128 packed
    # rows before run 62.
    "m128": {"block_m": 128},
    "wgmma": {"kernel": "wgmma"},
    "splitkv": {"kernel": "splitkv"},
    # The wgmma decode form with a deeper ring of smaller tiles.
    "wg-n64-s4": {"kernel": "wgmma", "block_n": 64, "stages": 4},
    "mma": {"kernel": "mma"},
    # The decode form's splits merged by its last CTA per row block (one launch),
    # or by the combine kernel; by default the form's rows choose.
    "fc": {"fused_combine": 1},
    "cc": {"fused_combine": 0},
    # A score_mod (Gemma 2's soft-capping): measured contiguous and paged, beside the
    # same call without it.
    "softcap": {"softcap": 30.0},
}
# Variants that are a score modification rather than a kernel option: they run on the
# paged twin too.
SCORE_VARIANTS = ("softcap",)
VARIANT_CASES = [(16, 32, 8, 1, 32768), (64, 32, 8, 1, 32768), (1, 32, 8, 1, 131072),
                 (16, 32, 8, 16, 32768), (16, 8, 1, 1, 131072), (16, 8, 1, 16, 32768),
                 # Where kernel=auto's rule for the split kernel ends (64 rows, or 128
                 # from several heads): the prefill kernels beside it.
                 (8, 16, 16, 64, 8192), (4, 32, 8, 32, 8192), (2, 32, 32, 48, 2048),
                 (16, 16, 16, 64, 512), (2, 32, 8, 40, 4096),
                 # Small decode, where a second launch is a large share of the call.
                 (1, 8, 1, 1, 4096), (64, 8, 1, 1, 4096), (1, 32, 8, 1, 4096),
                 # MQA at Lq = 16 (128 rows per K/V head), the table's slowest rows.
                 (64, 8, 1, 16, 4096), (16, 8, 1, 1, 32768),
                 (16, 8, 1, 16, 4096), (64, 8, 1, 16, 32768), (1, 8, 1, 16, 131072),
                 # B = 64 at 4k keys, where the contiguous cache measured 16 % slower
                 # than the same kernel on a page pool (run 65).
                 (64, 32, 8, 1, 4096), (64, 32, 8, 16, 4096)]


PAGE = 16
# Pages of Flex's paged column where Flex takes no PAGE-key KV block: its decode kernel's
# default KV tile is 64 keys and a block must be whole tiles (releases that clamp the tile
# to the block do run 16). torch's own paged-attention tests use pages of 64, 128 and 256.
FLEX_FALLBACK_PAGE = 128


def shapes(case):
    b, hq, hkv, lq, lk = case
    return (b, hq, lq, D), (b, hkv, lk, D), (b, hkv, lk, D)


def paged_shapes(case, page=PAGE):
    """q, the pools and the block table of the paged twin (Lk a multiple of page)."""
    b, hq, hkv, lq, lk = case
    pages = b * lk // page
    return (b, hq, lq, D), (pages, page, hkv, D), (pages, page, hkv, D), (b, lk // page)


def variant_cases(all_cases):
    return CASES if all_cases else VARIANT_CASES


def prebuild(cache, names=None, all_cases=False, pages=(PAGE,)):
    os.environ["FLASH_MLIR_CACHE_DIR"] = cache
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    # With variants, the run takes their cases only; the paged twins only for score
    # variants.
    paged = not names or any(n in SCORE_VARIANTS for n in names)
    for case in (variant_cases(all_cases) if names else CASES):
        print(case, flash_mlir.prebuild(*shapes(case), "bf16"))
        for page in (pages if paged else ()):
            qs, ks, vs, table = paged_shapes(case, page)
            print(case, "paged", page,
                  flash_mlir.prebuild(qs, ks, vs, "bf16", block_table=table))
    for name, kw in VARIANTS.items():
        if name not in (names or ()):
            continue
        for case in variant_cases(all_cases):
            print(name, case, flash_mlir.prebuild(*shapes(case), "bf16", **kw))
            if name not in SCORE_VARIANTS:
                continue
            for page in pages:
                qs, ks, vs, table = paged_shapes(case, page)
                print(name, case, "paged", page,
                      flash_mlir.prebuild(qs, ks, vs, "bf16", block_table=table, **kw))


def copy_rate_tbs(torch):
    """Device-to-device copy, bytes read plus written (METHOD.md's ceiling)."""
    from common import time_ms
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), warmup=3, iters=10)
    return 2 * x.numel() / ms / 1e9


def paged_pool(x, page, perm):
    """x (B, Hkv, Lk, D) as pages of `page` keys in a pool (pages, page, Hkv, D): logical
    page j (sequence j // (Lk/page), keys from (j % (Lk/page)) · page on) at pool[perm[j]]."""
    b, hkv, lk, d = x.shape
    pool = x.new_empty((b * lk // page, page, hkv, d))
    pool[perm] = x.transpose(1, 2).reshape(-1, page, hkv, d)
    return pool


def flex_cache(pool):
    """A pool as the physical cache PagedAttention gives Flex, [1, Hkv, pages · page, D]:
    page p's keys at rows p · page on."""
    pages, page, hkv, d = pool.shape
    return pool.permute(2, 0, 1, 3).reshape(1, hkv, pages * page, d)


def compile_flex(torch):
    import torch._dynamo
    from torch.nn.attention.flex_attention import flex_attention
    # Past its recompile limit (8 by default) Dynamo runs the function eagerly, and eager
    # flex_attention is the unfused reference: the rows would time something else. The
    # sweep compiles ~25 times; past a limit that leaves room, fail the row instead.
    cfg = torch._dynamo.config
    for name, value in (("recompile_limit", 64), ("cache_size_limit", 64),
                        ("accumulated_recompile_limit", 1024),
                        ("accumulated_cache_size_limit", 1024),
                        ("fail_on_recompile_limit_hit", True)):
        if hasattr(cfg, name):
            setattr(cfg, name, value)
    return torch.compile(flex_attention)


def pin_flex_dims(torch, q, kv, dynamic_len):
    """Batch, heads and Lq static for Flex, and Lk dynamic where dynamic_len.

    Flex's decode kernel (torch/_inductor/kernel/flex/flex_decoding.py: _use_flex_decoding,
    get_split_k) takes only static batch and heads; symbolic ones, as dynamic=True or
    automatic dynamic shapes would make them after the first change of B, send it to the
    prefill kernel. So one compile per (B, Hq/Hkv, Lq), and Lk is what varies within one."""
    for i in range(3):
        torch._dynamo.mark_static(q, i)
    for t in kv:
        torch._dynamo.mark_static(t, 0)
        torch._dynamo.mark_static(t, 1)
        # maybe_: where Flex does specialize Lk, that compile is static instead of an error.
        if dynamic_len and hasattr(torch._dynamo, "maybe_mark_dynamic"):
            torch._dynamo.maybe_mark_dynamic(t, 2)


def flex_paged(torch, flex, q, k, v, page, pools=None):
    """The Flex call on a paged cache of k and v, after its setup (all of it here, none
    in the call): pools = (kp, vp, table), the pool and table ours-paged reads, or None
    for a fresh shuffled pool of `page`-key pages."""
    from torch.nn.attention.experimental._paged_attention import PagedAttention
    from torch.nn.attention.flex_attention import create_block_mask, noop_mask
    b, hkv, lk, d = k.shape
    if pools is None:
        perm = torch.randperm(b * lk // page, device="cuda")
        table = perm.reshape(b, lk // page).to(torch.int32)
        kc = flex_cache(paged_pool(k, page, perm))
        vc = flex_cache(paged_pool(v, page, perm))
    else:
        kp, vp, table = pools
        kc, vc = flex_cache(kp), flex_cache(vp)
    pa = PagedAttention(table.numel(), page, b, device="cuda")
    # reserve() hands a sequence the pages at the end of empty_pages, in logical order,
    # and fills the page table and its inverse (and, in some releases, the lengths the
    # converted mask_mod reads): so lined up, sequence i gets row i of our table.
    pa.empty_pages = [p for row in reversed(table.tolist()) for p in row]
    lens = torch.full((b,), lk, dtype=torch.int64, device="cuda")
    for i in range(b):
        pa.reserve(torch.tensor(i), lens[i])
    if not torch.equal(pa.page_table[:, :lk // page], table.to(pa.page_table.dtype)):
        raise RuntimeError("PagedAttention.reserve did not follow the block table")
    # KV blocks of one page, as convert_logical_block_mask requires. Q blocks of 128 rows:
    # the decode kernel needs the Q block to be whole row tiles, and its tile holds
    # Lq · Hq/Hkv rows (up to 128 here), rounded up to a power of two.
    logical = create_block_mask(noop_mask, b, None, q.shape[2], lk, device="cuda",
                                BLOCK_SIZE=(128, page))
    # No score_mod: the converted mask_mod already maps physical keys to logical ones and
    # drops what is not live; get_score_mod would add the same lookup again for a score
    # that reads no position.
    mask = pa.convert_logical_block_mask(logical)
    # The cache length (pages · page) is left to automatic dynamic shapes: Flex checks it
    # against the block mask's length, a plain int, so a mark would be specialized away.
    pin_flex_dims(torch, q, (kc, vc), dynamic_len=False)
    return lambda: flex(q, kc, vc, block_mask=mask, enable_gqa=True)


def failing(e):
    """A call that raises what setting it up raised, for its row (the text only: the
    traceback would keep the setup's tensors alive)."""
    msg = f"{type(e).__name__}: {e}"

    def fn():
        raise RuntimeError(msg)
    return fn


def short(e):
    """The first telling line of an exception, for a table cell."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    # torch.compile puts the backend's error under "backend='inductor' raised:".
    lines = [ln for ln in lines if not ln.endswith("raised:")] or lines
    return lines[0][:60].replace("|", "/") if lines else type(e).__name__


def dynamo_graphs():
    """Graphs Dynamo has compiled so far, or None where its counters moved."""
    try:
        from torch._dynamo.utils import counters
        return counters["stats"]["unique_graphs"]
    except Exception:
        return None


def run(with_flex, variants, only_lq=None, all_cases=False, pages=(PAGE,), breakdown=False):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from common import device_line, kernel_breakdown, measure

    start = time.perf_counter()
    print(device_line())
    ceiling = copy_rate_tbs(torch)
    print(f"device-to-device copy: {ceiling:.2f} TB/s (read + write)")
    print()
    print("| B | Hq/Hkv | Lq | Lk | impl | kernel µs | K+V TB/s | of copy | call µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    flex = compile_flex(torch) if with_flex else None
    # Page sizes Flex's paged column may use: settled on the first case, to the first that
    # runs there (none: the column is dropped, rather than failing a compile per case).
    flex_pages = [PAGE, FLEX_FALLBACK_PAGE]
    flex_first_s = []

    def bench(case, kv_bytes, name, fn, ref):
        """Prints the row of one impl; returns its output, None where it failed."""
        b, hq, hkv, lq, lk = case
        is_flex = name.startswith("flex")
        graphs = dynamo_graphs() if is_flex else None
        try:
            t0 = time.perf_counter()
            try:
                out = fn()
                torch.cuda.synchronize()
            finally:
                if is_flex:
                    first = time.perf_counter() - t0
                    flex_first_s.append(first)
                    now = dynamo_graphs()
                    new = ("" if graphs is None or now is None
                           else f", {now - graphs} new graph(s)")
                    print(f"{name} {case}: first call {first:.1f} s{new}", file=sys.stderr)
            if ref is not None and (out.float() - ref.float()).abs().max().item() > 0.05:
                print(f"| {b} | {hq}/{hkv} | {lq} | {lk} | {name} | differs from ours | | | |")
            kern, call, _ = measure(fn, calls=20, kernels="all")
        except Exception as e:  # a backend that does not take the shape
            print(f"| {b} | {hq}/{hkv} | {lq} | {lk} | {name} | failed: {short(e)} | | | |")
            if is_flex:
                print(f"{name} {case} failed: {type(e).__name__}: {e}"[:3000], file=sys.stderr)
            return None
        rate = kv_bytes / kern / 1e6
        print(f"| {b} | {hq}/{hkv} | {lq} | {lk} | {name} | {kern:.1f} | {rate:.2f} | "
              f"{rate / ceiling:.2f} | {call:.1f} |")
        if breakdown and name.startswith("ours"):
            print(f"{name} {case} kernels: " + ", ".join(
                f"{n[:40]} {t:.1f} µs" for n, t in kernel_breakdown(fn)), file=sys.stderr)
        return out

    for case in (variant_cases(all_cases) if variants else CASES):
        b, hq, hkv, lq, lk = case
        if only_lq is not None and lq != only_lq:
            continue
        qs, ks, vs = shapes(case)
        q = torch.randn(qs, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(ks, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(vs, device="cuda", dtype=torch.bfloat16)
        kv_bytes = 2 * k.numel() * k.element_size()
        impls = [("ours", lambda: flash_mlir.attention(q, k, v))]
        for name in variants:
            impls.append(("ours[%s]" % name,
                          lambda kw=VARIANTS[name]: flash_mlir.attention(q, k, v, **kw)))
        for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                              ("fa2", SDPBackend.FLASH_ATTENTION)):
            def sdpa(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            impls.append((name, sdpa))
        if flex is not None:
            pin_flex_dims(torch, q, (k, v), dynamic_len=True)
            impls.append(("flex", lambda: flex(q, k, v, enable_gqa=True)))
        ref = None
        for name, fn in impls:
            out = bench(case, kv_bytes, name, fn, ref)
            if ref is None:
                ref = out
        kp = vp = table = None
        # The same keys as pages in a shuffled pool, one page size at a time (a pool
        # is as large as the cache); PAGE's pool is kept for Flex's paged column.
        score_variants = [n for n in variants if n in SCORE_VARIANTS]
        for page in (pages if not variants or score_variants else []):
            perm = torch.randperm(b * lk // page, device="cuda")
            try:
                pk, pv = paged_pool(k, page, perm), paged_pool(v, page, perm)
            except torch.OutOfMemoryError:  # a copy of the cache beside it: 80 GB cards
                pk = pv = None
                torch.cuda.empty_cache()
                print(f"| {b} | {hq}/{hkv} | {lq} | {lk} | ours-paged{page} | "
                      "failed: the pool does not fit beside the cache | | | |")
                continue
            pt = perm.reshape(b, lk // page).to(torch.int32)
            lens = torch.full((b,), lk, dtype=torch.int32, device="cuda")
            bench(case, kv_bytes, "ours-paged%d" % page,
                  lambda: flash_mlir.attention(q, pk, pv, block_table=pt, seq_lens=lens),
                  ref)
            for name in score_variants:
                bench(case, kv_bytes, "ours-paged%d[%s]" % (page, name),
                      lambda kw=VARIANTS[name]: flash_mlir.attention(
                          q, pk, pv, block_table=pt, seq_lens=lens, **kw), ref)
            if page == PAGE:
                kp, vp, table = pk, pv, pt
            pk = pv = pt = None
            torch.cuda.empty_cache()
        if flex is not None and not variants and flex_pages:
            ok = False
            for page in flex_pages:
                try:
                    fn = flex_paged(torch, flex, q, k, v, page,
                                    (kp, vp, table) if page == PAGE else None)
                except Exception as e:  # no PagedAttention, or not the one read here
                    fn = failing(e)
                ok = bench(case, kv_bytes, "flex-paged%d" % page, fn, ref) is not None
                fn = None
                torch.cuda.empty_cache()
                if ok:
                    break
            if len(flex_pages) > 1:
                flex_pages = [page] if ok else []
                if not ok:
                    print("flex-paged: no page size ran on the first case; "
                          "the column is left out from here on", file=sys.stderr)
        del q, k, v, ref, impls
        out = kp = vp = table = None
        torch.cuda.empty_cache()
    if flex is not None:
        print(f"Flex first calls (compiles included): {sum(flex_first_s):.0f} s over "
              f"{len(flex_first_s)} rows; the run: {time.perf_counter() - start:.0f} s",
              file=sys.stderr)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prebuild", metavar="DIR")
    ap.add_argument("--flex", action="store_true")
    ap.add_argument("--variants", default="", help="comma-separated names from VARIANTS")
    ap.add_argument("--all-cases", action="store_true",
                    help="variants on every case of the table, not VARIANT_CASES")
    ap.add_argument("--lq", type=int, default=None,
                    help="only the cases of this Lq (the table in two device calls)")
    ap.add_argument("--kernels", action="store_true",
                    help="each of our rows' kernels and their µs per call, on stderr")
    ap.add_argument("--pages", default=str(PAGE),
                    help="comma-separated page sizes of the ours-paged columns "
                         "(the first %d keeps Flex's paged column beside it)" % PAGE)
    a = ap.parse_args()
    pages = tuple(int(p) for p in a.pages.split(",") if p)
    names = [n for n in a.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error("unknown variant(s) %s; known: %s" % (unknown, ", ".join(VARIANTS)))
    if a.prebuild:
        prebuild(a.prebuild, names, a.all_cases, pages)
    else:
        run(a.flex, names, a.lq, a.all_cases, pages, a.kernels)
