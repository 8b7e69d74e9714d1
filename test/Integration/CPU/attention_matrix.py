"""Fused flash-cpu-pipeline vs the unfused reference (reference=1) vs a float64
NumPy reference on fresh random inputs, across the shape matrix.

Usage: attention_matrix.py FLASH_OPT SUITE   (SUITE: f32 | lowp;
       FLASH_TEST_SEED=N replays a run)

Tolerances (max abs error / max |reference|):
  f32:  1e-5 against float64 and between the two lowerings; LSE 1e-5
        relative to max(1, |lse|), -inf exactly where the reference has it.
  bf16: 1e-2 and f16: 2e-3 against float64 evaluated on the same rounded
        inputs. Accumulation is f32 in both lowerings, so the error is the
        final rounding of the output to 8 (bf16) or 11 (f16) mantissa bits:
        half an ulp at the largest output is 2^-8 = 3.9e-3 (bf16) and
        2^-11 = 4.9e-4 (f16); the bounds leave room for an ulp plus the
        f32 accumulation error. LSE stays f32: 1e-5.
"""
import itertools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "lib"))
import flash_attention_cases as fac  # noqa: E402
import flash_cpu_runner as fcr  # noqa: E402

TOL = {"f32": 1e-5, "bf16": 1e-2, "f16": 2e-3}
LSE_TOL = 1e-5
LENS = [1, 17, 64, 127, 1000]
ALL_PAIRS = list(itertools.product(LENS, LENS))
# Big batches skip the 1000x1000 pair to keep CI time down.
SMALL_PAIRS = [p for p in ALL_PAIRS if p != (1000, 1000)]

C = fac.Case
F32_CASES = [
    (C("nobatch_d16", d=16, dv=24), ALL_PAIRS, ""),
    (C("heads_d64_causal_lse", d=64, dv=48, batch=(3,), mask="causal",
       lse=True), ALL_PAIRS, ""),
    (C("gqa_d80_causal_br_bias_lse", d=80, dv=64, batch=(2, 4), hkv=2,
       mask="causal", bottom_right=True, score_mod="bias", lse=True),
     SMALL_PAIRS, ""),
    (C("d128_window_br_softcap", d=128, dv=96, batch=(2,),
       mask="sliding_window", window=37, bottom_right=True,
       score_mod="softcap"), ALL_PAIRS, ""),
    (C("mqa_d64_window_alibi_lse", d=64, dv=32, batch=(1, 4), hkv=1,
       mask="sliding_window", window=100, score_mod="alibi", lse=True),
     SMALL_PAIRS, ""),
    (C("boolmask_dead_rows_lse", d=64, dv=48, batch=(2,), score_mod="boolmask",
       lse=True), [(1, 1), (17, 64), (127, 1000), (1000, 17), (64, 127)], ""),
    (C("small_blocks_causal_br_lse", d=64, dv=40, batch=(2,),
       mask="causal", bottom_right=True, lse=True), ALL_PAIRS,
     "block-q=16 block-kv=32"),
]

LOWP_PAIRS = [(1, 1), (17, 127), (127, 17), (64, 1000), (1000, 64), (127, 127)]
LOWP_CASES = [
    (C("bf16_gqa_causal_br_lse", elem="bf16", d=64, dv=48, batch=(2, 4), hkv=2,
       mask="causal", bottom_right=True, lse=True), LOWP_PAIRS, ""),
    (C("bf16_window_softcap", elem="bf16", d=128, dv=80, batch=(3,),
       mask="sliding_window", window=50, score_mod="softcap"), LOWP_PAIRS, ""),
    (C("f16_bias_causal_lse", elem="f16", d=80, dv=64, batch=(2,),
       mask="causal", score_mod="bias", lse=True), LOWP_PAIRS, ""),
    (C("f16_nobatch_d16", elem="f16", d=16, dv=40), LOWP_PAIRS, ""),
]

SUITES = {"f32": F32_CASES, "lowp": LOWP_CASES}


def main():
    tools = fcr.Tools(flash_opt=sys.argv[1])
    cases = SUITES[sys.argv[2]]
    seed = int(os.environ.get("FLASH_TEST_SEED",
                              np.random.SeedSequence().entropy % (2**31)))
    print("seed %d" % seed)
    rng = np.random.default_rng(seed)
    passed = failed = 0
    for case, pairs, opts in cases:
        tol = TOL[case.elem]
        text = case.module_text()
        fused = fcr.compile_module(text, opts, tools)
        unfused = fcr.compile_module(text, "reference=1", tools)
        for lq, lk in pairs:
            args, (q, k, v, extra) = case.inputs(rng, lq, lk)
            spec = case.result_spec()
            got = fused.call("attn", args, spec)
            base = unfused.call("attn", args, spec)
            ro, rl = case.reference(q, k, v, extra)
            errs = [fac.rel_err(case.to_f64(got[0]), ro),
                    fac.rel_err(case.to_f64(base[0]), ro),
                    fac.rel_err(case.to_f64(got[0]), case.to_f64(base[0]))]
            if case.lse:
                errs += [fac.lse_err(got[1], rl), fac.lse_err(got[1], base[1])]
            nan = np.isnan(case.to_f64(got[0])).any()
            ok = not nan and all(e <= tol for e in errs[:3]) and all(
                e <= LSE_TOL for e in errs[3:])
            status = "PASS" if ok else "FAIL"
            print("%s %s Lq=%d Lk=%d errs=%s%s" % (
                status, case.name, lq, lk,
                " ".join("%.2e" % e for e in errs), " NaN" if nan else ""))
            passed += ok
            failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
