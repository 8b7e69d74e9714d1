"""Tunes attention()'s kernel options on a list of shapes (flash_mlir.tuning) and records
the winners, so that attention() on this chip runs them from then on.

For each shape (bf16 [B, H, L, D] tensors, causal and not), every candidate of
flash_mlir.tuning.candidates is checked against the heuristic's output and timed (CUDA
events around back-to-back calls, the median of a few repetitions); the table shows each
candidate's µs per call and its speed relative to the heuristic, the chosen one marked.
The winners go into $FLASH_MLIR_CACHE_DIR/tuning.json (per chip, per exact shape and per
shape class), next to the kernels.

Here (compiler, no GPU):  python3 bench/gpu/tune_shapes.py --prebuild DIR [--shape ...]
There (GPU, no LLVM):     FLASH_MLIR_CACHE_DIR=DIR python3 bench/gpu/tune_shapes.py [--shape ...]

Then keep DIR where the GPU work runs, or copy DIR/tuning.json into the cache folder it
uses; prebuilding again from a cache that holds the table also builds the tuned kernels.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))

import flash_mlir  # noqa: E402
from flash_mlir import tuning  # noqa: E402

# (B, Hq, Hkv, L, D) or (B, Hq, Hkv, Lq, Lk, D): each runs causal and not (decode
# rows, Lq <= 16 < Lk, not causal).
SHAPES = [
    (16, 16, 16, 1024, 64),
    (16, 16, 16, 1024, 128),
    (1, 32, 8, 4096, 128),
    (4, 16, 16, 3000, 128),
    (8, 16, 16, 1024, 64),
    # Decode whose heads pack: the split merge in the last CTA or a second kernel.
    (1, 8, 1, 1, 4096, 128),
    (16, 8, 1, 1, 32768, 128),
    (64, 32, 8, 1, 4096, 128),
    (16, 32, 8, 1, 8192, 128),
]


def parse_shape(text):
    """B,Hq,Hkv,L,D or B,Hq,Hkv,Lq,Lk,D -> (B, Hq, Hkv, Lq, Lk, D)."""
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("--shape needs integers, got %r" % text) from None
    if len(dims) == 5:
        b, hq, hkv, n, d = dims
        return b, hq, hkv, n, n, d
    if len(dims) == 6:
        return dims
    raise argparse.ArgumentTypeError("--shape needs B,Hq,Hkv,L,D or B,Hq,Hkv,Lq,Lk,D, got %r"
                                     % text)


def cases(args):
    shapes = [] if args.no_defaults else \
        [s if len(s) == 6 else s[:3] + (s[3],) + s[3:] for s in SHAPES]
    shapes += args.shape
    for b, hq, hkv, lq, lk, d in shapes:
        # A decode row under a top-left causal mask sees one key: not a case.
        for causal in (False,) if lq <= 16 < lk else (False, True):
            if args.causal is not None and causal != args.causal:
                continue
            n = "N=%d" % lq if lq == lk else "Lq=%d Lk=%d" % (lq, lk)
            label = "B=%d H=%d%s %s D=%d%s" % (b, hq, "/%d" % hkv if hkv != hq else "", n, d,
                                              " causal" if causal else "")
            yield label, (b, hq, lq, d), (b, hkv, lk, d), (b, hkv, lk, d), causal


def prebuild(args):
    os.environ["FLASH_MLIR_CACHE_DIR"] = args.prebuild
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    for label, qs, ks, vs, causal in cases(args):
        # The heuristic's kernel and the table's choices for these shapes, if any.
        flash_mlir.prebuild(qs, ks, vs, args.dtype, causal=causal)
        for opts, path, error in tuning.build_candidates(qs, ks, vs, args.dtype, causal=causal):
            what = ", ".join("%s=%s" % kv for kv in sorted(opts.items())) or "(heuristic)"
            print("%s | %s | %s" % (label, what, path or "does not compile: " + error))


def run(args):
    import torch
    from common import device_line

    print(device_line())
    print("chip %r, table %s" % (tuning.chip_id("cuda"), tuning.table_path()))
    print()
    print("| shape | options | µs | × heuristic | status |")
    print("|---|---|---|---|---|")
    dtype = getattr(torch, {"bf16": "bfloat16", "f16": "float16"}[args.dtype])
    summary = []
    for label, qs, ks, vs, causal in cases(args):
        q = torch.randn(qs, device="cuda", dtype=dtype)
        k = torch.randn(ks, device="cuda", dtype=dtype)
        v = torch.randn(vs, device="cuda", dtype=dtype)
        try:
            res = flash_mlir.tune(q, k, v, causal=causal, warmup=args.warmup, iters=args.iters,
                                  repeats=args.repeats, record=not args.no_record)
        except RuntimeError as e:
            print("| %s | failed: %s | | | |" % (label, str(e).splitlines()[0][:120]),
                  flush=True)
            continue
        print(res.markdown(label), flush=True)
        best = res.chosen
        summary.append((label, res.options, res.heuristic_us / best.us))
    print()
    print("| shape | chosen | × heuristic |")
    print("|---|---|---|")
    for label, opts, gain in summary:
        what = ", ".join("%s=%s" % kv for kv in sorted(opts.items())) or "(heuristic)"
        print("| %s | %s | %.3f |" % (label, what, gain))
    if not args.no_record:
        print("\nrecorded into %s" % tuning.table_path())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=parse_shape, action="append", default=[],
                    help="B,Hq,Hkv,L,D or B,Hq,Hkv,Lq,Lk,D to add (repeatable)")
    ap.add_argument("--no-defaults", action="store_true",
                    help="only the --shape shapes")
    causal = ap.add_mutually_exclusive_group()
    causal.add_argument("--causal", dest="causal", action="store_true", default=None,
                        help="causal only")
    causal.add_argument("--no-causal", dest="causal", action="store_false",
                        help="without a mask only")
    ap.add_argument("--dtype", choices=("bf16", "f16"), default="bf16")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-record", action="store_true",
                    help="time and print, but leave the table as it is")
    ap.add_argument("--prebuild", metavar="DIR",
                    help="compile every candidate's kernel into the cache DIR and exit")
    args = ap.parse_args()
    if args.prebuild:
        prebuild(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
