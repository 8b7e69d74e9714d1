"""bf16/f16 conversions of the CPU path, bit for bit, for this CPU and for
baseline x86-64 (where LLVM has no conversion instruction).

Each conversion is compiled through flash-cpu-pipeline and run on every
16-bit pattern (extensions) or on random bit patterns of every class —
normal, subnormal, zero, infinity, NaN with payloads — plus exact ties in
the normal and subnormal ranges (truncations). The references are NumPy's:
float16 casts, the round-to-nearest-even bf16 conversion of
flash_cpu_runner.to_bf16, and an exact rounding in float64 (rint of the
value in units of the destination's quantum); NaN by the rule every
IEEE conversion builtin follows (sign kept, quiet bit set, high payload
bits kept).

Usage: float_conversions.py FLASH_OPT
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "lib"))
import flash_cpu_runner as fcr  # noqa: E402

N_TRUNC = 1 << 18
N_EXT = 1 << 16
NARROW = {  # name: (significand bits incl. implicit, min exponent of the quantum, max finite)
    "bf16": (8, -133, float.fromhex("0x1.fep127")),
    "f16": (11, -24, 65504.0),
}
WIDE = {"f32": (np.float32, np.uint32, 23), "f64": (np.float64, np.uint64, 52)}


def module():
    fns = []
    for wide in WIDE:
        for narrow in NARROW:
            fns.append(_fn("trunc_%s_%s" % (wide, narrow), wide, narrow, N_TRUNC, "truncf"))
            fns.append(_fn("ext_%s_%s" % (narrow, wide), narrow, wide, N_EXT, "extf"))
    return "\n".join(fns)


def _fn(name, src, dst, n, op):
    return """func.func @%(name)s(%%x: tensor<%(n)dx%(src)s>) -> tensor<%(n)dx%(dst)s>
    attributes {llvm.emit_c_interface} {
  %%e = tensor.empty() : tensor<%(n)dx%(dst)s>
  %%r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%%x : tensor<%(n)dx%(src)s>) outs(%%e : tensor<%(n)dx%(dst)s>) {
  ^bb0(%%a: %(src)s, %%b: %(dst)s):
    %%c = arith.%(op)s %%a : %(src)s to %(dst)s
    linalg.yield %%c : %(dst)s
  } -> tensor<%(n)dx%(dst)s>
  return %%r : tensor<%(n)dx%(dst)s>
}""" % dict(name=name, src=src, dst=dst, n=n, op=op)


def nan_bits(bits, wide_sig, narrow):
    """Truncation of NaN patterns `bits` (wide integers): sign, all-ones
    exponent, quiet bit, and the payload's high bits."""
    nsig = NARROW[narrow][0] - 1
    nbits = 16
    sign = (bits >> np.uint64(bits.dtype.itemsize * 8 - 1)).astype(np.uint64)
    payload = (bits.astype(np.uint64) & np.uint64((1 << (wide_sig - 1)) - 1)) >> np.uint64(
        wide_sig - nsig)
    inf = ((1 << (nbits - 1 - nsig)) - 1) << nsig
    return ((sign << np.uint64(nbits - 1)) | np.uint64(inf | (1 << (nsig - 1))) | payload
            ).astype(np.uint16)


def exact_round(x, narrow):
    """x (float64, finite) rounded to nearest even in the narrow format, as
    float64 (inf on overflow): rint of x in units of its quantum is exact."""
    p, qmin, fmax = NARROW[narrow]
    _, e = np.frexp(x)
    quantum = np.ldexp(1.0, np.maximum(e - p, qmin))
    y = np.rint(x / quantum) * quantum
    return np.where(np.abs(y) > fmax, np.copysign(np.inf, x), y)


def narrow_bits(y, narrow):
    """Bits of values exactly representable in `narrow` (or ±inf)."""
    if narrow == "f16":
        return y.astype(np.float16).view(np.uint16)
    return (y.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)


def trunc_inputs(rng, wide):
    ftype, itype, sig = WIDE[wide]
    width = np.dtype(itype).itemsize * 8
    n4 = N_TRUNC // 4
    # Random patterns of every class.
    a = rng.integers(0, 1 << width, size=n4, dtype=np.uint64 if width == 64 else np.int64)
    a = a.astype(itype)
    # Values spread over the narrow types' ranges (normal, subnormal, overflow).
    b = np.ldexp(rng.uniform(1, 2, n4) * rng.choice([-1.0, 1.0], n4),
                 rng.integers(-160, 140, n4)).astype(ftype).view(itype)
    # Exact ties and their neighbours in both narrow formats: a narrow value
    # plus half its quantum (also in the subnormal ranges).
    ties = []
    for narrow, (p, qmin, _) in NARROW.items():
        m = rng.integers(1 << (p - 1), 1 << p, n4 // 4).astype(np.float64)
        e = rng.integers(qmin - 4, 16 if narrow == "f16" else 120, n4 // 4)
        t = np.ldexp(m + 0.5, e) * rng.choice([-1.0, 1.0], n4 // 4)
        ties.append(t)
        sub = (2 * rng.integers(0, 1 << (p - 1), n4 // 4) + 1) * np.ldexp(1.0, qmin - 1)
        ties.append(sub)
    c = np.concatenate(ties).astype(ftype).view(itype)
    c = np.concatenate([c, np.nextafter(c.view(ftype), ftype(np.inf)).view(itype)])
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan,
                         float.fromhex("0x1.fep127"), 65504.0, 65520.0, 65519.99,
                         np.ldexp(1.0, -24), np.ldexp(1.0, -25), np.ldexp(1.0, -133),
                         np.ldexp(1.0, -134), np.ldexp(3.0, -135)], dtype=ftype).view(itype)
    out = np.concatenate([specials, a, b, c])[:N_TRUNC]
    out = np.concatenate([out, a[: N_TRUNC - len(out)]])
    # NaNs with assorted payloads, signalling ones included.
    k = rng.integers(0, N_TRUNC, 512)
    payload = rng.integers(1, 1 << min(sig, 62), 512).astype(np.uint64).astype(itype)
    sign = (rng.integers(0, 2, 512).astype(np.uint64) << np.uint64(width - 1)).astype(itype)
    exp_all = itype(((1 << (width - 1 - sig)) - 1) << sig)
    out[k] = sign | exp_all | payload
    return out


def expected_trunc(bits, wide, narrow):
    ftype, _, sig = WIDE[wide]
    x = bits.view(ftype).astype(np.float64)
    isnan = np.isnan(x)
    finite = np.where(isnan | np.isinf(x), 0.0, x)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = narrow_bits(np.where(np.isinf(x), x, exact_round(finite, narrow)), narrow)
    exact = np.where(isnan, nan_bits(bits, sig, narrow), exact)
    # NumPy's own conversions must agree with the exact rounding.
    with np.errstate(over="ignore", invalid="ignore"):
        if narrow == "f16":
            numpy_bits = bits.view(ftype).astype(np.float16).view(np.uint16)
        elif wide == "f32":
            numpy_bits = fcr.to_bf16(bits.view(ftype))
        else:
            numpy_bits = exact
    return exact, np.where(isnan, exact, numpy_bits)


def expected_ext(bits16, narrow, wide):
    ftype, itype, sig = WIDE[wide]
    if narrow == "f16":
        vals = bits16.view(np.float16)
    else:
        vals = (bits16.astype(np.uint32) << np.uint32(16)).view(np.float32)
    out = vals.astype(ftype).view(itype).copy()
    nsig = NARROW[narrow][0] - 1
    h = bits16.astype(np.uint64)
    nan = ((h & np.uint64(0x7FFF)) >> np.uint64(nsig)) == np.uint64((1 << (15 - nsig)) - 1)
    nan &= (h & np.uint64((1 << nsig) - 1)) != 0
    width = np.dtype(itype).itemsize * 8
    expo = ((1 << (width - 1 - sig)) - 1) << sig
    nanbits = ((h >> np.uint64(15)) << np.uint64(width - 1)) | np.uint64(expo) | (
        (h & np.uint64((1 << nsig) - 1)) << np.uint64(sig - nsig))
    out[nan] = nanbits[nan].astype(itype)
    return out


def main():
    np.seterr(all="ignore")  # casts of NaN/overflowing inputs are the point
    tools = fcr.Tools(flash_opt=sys.argv[1])
    seed = int(os.environ.get("FLASH_TEST_SEED", np.random.SeedSequence().entropy % (2**31)))
    print("seed %d" % seed)
    rng = np.random.default_rng(seed)
    text = module()
    passed = failed = 0
    for cpu in ["native", "x86-64"]:
        lib = fcr.compile_module(text, "parallel=0", tools, cpu=cpu)
        for wide, (ftype, itype, _) in WIDE.items():
            for narrow in NARROW:
                bits = trunc_inputs(rng, wide)
                (got,) = lib.call("trunc_%s_%s" % (wide, narrow), [bits.view(ftype)],
                                  [(1, np.uint16)])
                exact, numpy_ref = expected_trunc(bits, wide, narrow)
                bad = np.flatnonzero((got != exact) | (got != numpy_ref))
                report("trunc %s->%s -mcpu=%s" % (wide, narrow, cpu), bad, bits, got, exact)
                passed += not len(bad)
                failed += bool(len(bad))

                all16 = np.arange(N_EXT, dtype=np.uint32).astype(np.uint16)
                arg = all16.view(np.float16) if narrow == "f16" else all16
                (got,) = lib.call("ext_%s_%s" % (narrow, wide), [arg], [(1, ftype)])
                want = expected_ext(all16, narrow, wide)
                bad = np.flatnonzero(got.view(itype) != want)
                report("ext %s->%s -mcpu=%s" % (narrow, wide, cpu), bad, all16,
                       got.view(itype), want)
                passed += not len(bad)
                failed += bool(len(bad))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


def report(label, bad, inputs, got, want):
    print("%s %s (%d values)" % ("FAIL" if len(bad) else "PASS", label, len(inputs)))
    for i in bad[:8]:
        print("    input %#x: got %#x, want %#x" % (int(inputs[i]), int(got[i]), int(want[i])))


if __name__ == "__main__":
    sys.exit(main())
