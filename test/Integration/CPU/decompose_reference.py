"""Runs flash.attention through the reference decomposition on the CPU (mlir-runner)
and compares it with an independent float64 NumPy computation of attention.

Usage: decompose_reference.py FLASH_OPT MLIR_RUNNER LIB_DIR
Fresh random inputs on every run; prints the seed so a failure can be replayed.
"""
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "python", "tests"))
from reference import attention_ref  # noqa: E402

FLASH_OPT, MLIR_RUNNER, LIB_DIR = sys.argv[1:4]
SEED = int(os.environ.get("FLASH_TEST_SEED", np.random.SeedSequence().entropy % (2**31)))
rng = np.random.default_rng(SEED)

LOWER = [
    "--flash-decompose-attention",
    "--one-shot-bufferize=bufferize-function-boundaries",
    "--convert-linalg-to-loops", "--lower-affine", "--convert-scf-to-cf",
    "--expand-strided-metadata", "--finalize-memref-to-llvm", "--convert-math-to-llvm",
    "--convert-arith-to-llvm", "--convert-index-to-llvm", "--convert-func-to-llvm",
    "--convert-cf-to-llvm", "--reconcile-unrealized-casts",
]


def ttype(shape):
    return "tensor<" + "x".join(str(s) for s in shape) + "xf32>"


def dense(a):
    return "dense<" + np.array2string(
        a, separator=", ", threshold=1 << 30, floatmode="unique", max_line_width=1 << 30
    ).replace("\n", "") + ">"


def reference(q, k, v, scale, mask, bias, softcap):
    """The float64 attention of python/tests/reference.py with this case's score_mod."""
    def score_mod(s, i, j):
        if softcap:
            s = softcap * np.tanh(s / softcap)
        return s if bias is None else s + bias

    kind, window, align = mask if mask else (None, None, "top_left")
    return attention_ref(q, k, v, scale=scale, causal=kind == "causal",
                         window=window if kind == "sliding_window" else None, align=align,
                         score_mod=score_mod)


def run_case(name, qs, ks, vs, scale, mask=None, bias=False, softcap=None):
    q = rng.standard_normal(qs).astype(np.float32)
    k = rng.standard_normal(ks).astype(np.float32)
    v = rng.standard_normal(vs).astype(np.float32)
    lq, lk = qs[-2], ks[-2]
    b = rng.standard_normal((lq, lk)).astype(np.float32) if bias else None
    os_ = qs[:-1] + (vs[-1],)
    ls = qs[:-1]
    nb = len(qs) - 2
    idx = ", ".join([f"%b{d}: index" for d in range(nb)] + ["%i: index", "%j: index"])
    body = []
    cur = "%s"
    if softcap:
        body += [f"%cap = arith.constant {softcap:.1f} : f32", f"%sd = arith.divf {cur}, %cap : f32",
                 "%st = math.tanh %sd : f32", "%sc = arith.mulf %st, %cap : f32"]
        cur = "%sc"
    caps = ""
    if bias:
        idx += f", %bt: {ttype((lq, lk))}"
        body += [f"%x = tensor.extract %bt[%i, %j] : {ttype((lq, lk))}", f"%sb = arith.addf {cur}, %x : f32"]
        cur = "%sb"
        caps = f" captures(%bias : {ttype((lq, lk))})"
    region = ""
    if body:
        region = " score_mod {\n ^bb0(%s: f32, " + idx + "):\n  " + "\n  ".join(body) + f"\n  flash.yield {cur} : f32\n }}"
    mask_clause = ""
    if mask:
        kind, window, align = mask
        parts = [kind] + ([str(window)] if kind == "sliding_window" else []) + [align]
        mask_clause = f" mask({', '.join(parts)})"
    ir = f"""
func.func private @printMemrefF32(memref<*xf32>)
func.func @main() {{
  %q = arith.constant {dense(q)} : {ttype(qs)}
  %k = arith.constant {dense(k)} : {ttype(ks)}
  %v = arith.constant {dense(v)} : {ttype(vs)}
  {"%bias = arith.constant " + dense(b) + " : " + ttype((lq, lk)) if bias else ""}
  %o0 = tensor.empty() : {ttype(os_)}
  %l0 = tensor.empty() : {ttype(ls)}
  %r:2 = flash.attention ins(%q, %k, %v : {ttype(qs)}, {ttype(ks)}, {ttype(vs)})
           outs(%o0, %l0 : {ttype(os_)}, {ttype(ls)}){caps} scale({scale!r}){mask_clause}{region}
           -> {ttype(os_)}, {ttype(ls)}
  %ob = bufferization.to_buffer %r#0 : {ttype(os_)} to memref<{'x'.join(map(str, os_))}xf32>
  %lb = bufferization.to_buffer %r#1 : {ttype(ls)} to memref<{'x'.join(map(str, ls))}xf32>
  %ou = memref.cast %ob : memref<{'x'.join(map(str, os_))}xf32> to memref<*xf32>
  %lu = memref.cast %lb : memref<{'x'.join(map(str, ls))}xf32> to memref<*xf32>
  call @printMemrefF32(%ou) : (memref<*xf32>) -> ()
  call @printMemrefF32(%lu) : (memref<*xf32>) -> ()
  return
}}
"""
    lowered = subprocess.run([FLASH_OPT, *LOWER], input=ir, capture_output=True, text=True)
    if lowered.returncode:
        sys.exit(f"{name}: flash-opt failed:\n{lowered.stderr}")
    ran = subprocess.run(
        [MLIR_RUNNER, "-e", "main", "-entry-point-result=void",
         f"-shared-libs={LIB_DIR}/libmlir_runner_utils.so",
         f"-shared-libs={LIB_DIR}/libmlir_c_runner_utils.so"],
        input=lowered.stdout, capture_output=True, text=True)
    if ran.returncode:
        sys.exit(f"{name}: mlir-runner failed:\n{ran.stderr}")
    blocks = re.split(r"Unranked Memref[^\n]*\n", ran.stdout)[1:]
    nums = [np.array([float(x) for x in re.findall(r"-?inf|nan|-?[0-9.]+(?:e[-+]?[0-9]+)?", blk)])
            for blk in blocks]
    got_o, got_l = nums[0].reshape(os_), nums[1].reshape(ls)
    want_o, want_l = reference(q, k, v, scale, mask, b, softcap)
    err_o = np.max(np.abs(got_o - want_o)) / max(np.max(np.abs(want_o)), 1e-30)
    finite = np.isfinite(want_l)
    same_inf = np.array_equal(np.isfinite(got_l), finite)
    err_l = np.max(np.abs(got_l[finite] - want_l[finite]), initial=0.0)
    ok = err_o <= 1e-5 and err_l <= 1e-4 and same_inf and not np.isnan(got_o).any()
    print(f"{name}: out rel err {err_o:.2e}, lse abs err {err_l:.2e} {'ok' if ok else 'FAIL'}")
    return ok


print(f"seed {SEED}")
results = [
    run_case("plain_3d", (3, 5, 6), (3, 7, 6), (3, 7, 4), 0.4),
    run_case("no_batch_causal_top_left", (5, 3), (7, 3), (7, 2), 0.7, mask=("causal", 0, "top_left")),
    run_case("gqa_causal_bottom_right_bias", (2, 4, 5, 3), (2, 2, 7, 3), (2, 2, 7, 4), 0.5,
             mask=("causal", 0, "bottom_right"), bias=True),
    run_case("fully_masked_rows", (2, 6, 3), (2, 4, 3), (2, 4, 5), 0.5, mask=("causal", 0, "bottom_right")),
    run_case("sliding_window_softcap", (2, 6, 3), (2, 9, 3), (2, 9, 2), 1.5,
             mask=("sliding_window", 3, "bottom_right"), softcap=2.0),
]
print("ALL OK" if all(results) else "SOME FAILED")
sys.exit(0 if all(results) else 1)
