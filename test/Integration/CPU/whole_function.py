"""A function as a frontend hands it over — tensors at the boundary, TOSA and
elementwise math on tensors before and after an attention written as
matmul -> softmax -> matmul — through flash-cpu-pipeline, fused (raise=1) and
unfused (raise=0), executed against a float64 NumPy computation of the same
function on fresh random inputs.

Usage: whole_function.py FLASH_OPT
"""
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TEST, "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(TEST), "python", "tests"))

import flash_cpu_runner as fcr  # noqa: E402
from reference import attention_ref  # noqa: E402

B, H, LQ, LK, D, DV = 2, 4, 37, 53, 24, 20

MODULE = """
func.func @f(%q: tensor<{B}x{H}x{LQ}x{D}xf32>, %k: tensor<{B}x{H}x{LK}x{D}xf32>,
             %v: tensor<{B}x{H}x{LK}x{DV}xf32>) -> tensor<{B}x{H}x{LQ}x{DV}xf32>
    attributes {{llvm.emit_c_interface}} {{
  // Before the attention: elementwise math on a tensor, and a TOSA op.
  %qe = math.sin %q : tensor<{B}x{H}x{LQ}x{D}xf32>
  %vt = tosa.tanh %v : (tensor<{B}x{H}x{LK}x{DV}xf32>) -> tensor<{B}x{H}x{LK}x{DV}xf32>
  %z = arith.constant 0.0 : f32
  %kt0 = tensor.empty() : tensor<{B}x{H}x{D}x{LK}xf32>
  %kt = linalg.transpose ins(%k : tensor<{B}x{H}x{LK}x{D}xf32>) outs(%kt0 : tensor<{B}x{H}x{D}x{LK}xf32>) permutation = [0, 1, 3, 2]
  %qc = tensor.collapse_shape %qe [[0, 1], [2], [3]] : tensor<{B}x{H}x{LQ}x{D}xf32> into tensor<{BH}x{LQ}x{D}xf32>
  %kc = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<{B}x{H}x{D}x{LK}xf32> into tensor<{BH}x{D}x{LK}xf32>
  %vc = tensor.collapse_shape %vt [[0, 1], [2], [3]] : tensor<{B}x{H}x{LK}x{DV}xf32> into tensor<{BH}x{LK}x{DV}xf32>
  %s0 = tensor.empty() : tensor<{BH}x{LQ}x{LK}xf32>
  %s1 = linalg.fill ins(%z : f32) outs(%s0 : tensor<{BH}x{LQ}x{LK}xf32>) -> tensor<{BH}x{LQ}x{LK}xf32>
  %s = linalg.batch_matmul ins(%qc, %kc : tensor<{BH}x{LQ}x{D}xf32>, tensor<{BH}x{D}x{LK}xf32>) outs(%s1 : tensor<{BH}x{LQ}x{LK}xf32>) -> tensor<{BH}x{LQ}x{LK}xf32>
  %p0 = tensor.empty() : tensor<{BH}x{LQ}x{LK}xf32>
  %p = linalg.softmax dimension(2) ins(%s : tensor<{BH}x{LQ}x{LK}xf32>) outs(%p0 : tensor<{BH}x{LQ}x{LK}xf32>) -> tensor<{BH}x{LQ}x{LK}xf32>
  %o0 = tensor.empty() : tensor<{BH}x{LQ}x{DV}xf32>
  %o1 = linalg.fill ins(%z : f32) outs(%o0 : tensor<{BH}x{LQ}x{DV}xf32>) -> tensor<{BH}x{LQ}x{DV}xf32>
  %o = linalg.batch_matmul ins(%p, %vc : tensor<{BH}x{LQ}x{LK}xf32>, tensor<{BH}x{LK}x{DV}xf32>) outs(%o1 : tensor<{BH}x{LQ}x{DV}xf32>) -> tensor<{BH}x{LQ}x{DV}xf32>
  %r = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [{B}, {H}, {LQ}, {DV}] : tensor<{BH}x{LQ}x{DV}xf32> into tensor<{B}x{H}x{LQ}x{DV}xf32>
  // After it: elementwise arith on tensors.
  %two = arith.constant dense<2.0> : tensor<{B}x{H}x{LQ}x{DV}xf32>
  %y = arith.mulf %r, %two : tensor<{B}x{H}x{LQ}x{DV}xf32>
  %e = math.exp %y : tensor<{B}x{H}x{LQ}x{DV}xf32>
  return %e : tensor<{B}x{H}x{LQ}x{DV}xf32>
}}
""".format(B=B, H=H, LQ=LQ, LK=LK, D=D, DV=DV, BH=B * H)


def main():
    tools = fcr.Tools(flash_opt=sys.argv[1])
    seed = int(np.random.SeedSequence().entropy % (2**31))
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, H, LQ, D)).astype(np.float32)
    k = rng.standard_normal((B, H, LK, D)).astype(np.float32)
    v = rng.standard_normal((B, H, LK, DV)).astype(np.float32)
    want = np.exp(2.0 * attention_ref(np.sin(q.astype(np.float64)), k,
                                      np.tanh(v.astype(np.float64)), scale=1.0)[0])
    inputs = [x.copy() for x in (q, k, v)]
    failed = 0
    for label, opts in (("fused", "raise=1"), ("unfused", "raise=0")):
        with tempfile.TemporaryDirectory(prefix="flash-whole-") as tmp:
            lib = fcr.compile_module(MODULE, opts, tools, workdir=tmp)
            (got,) = lib.call("f", [q, k, v], [(4, np.float32)])
        err = float(np.abs(got - want).max() / np.abs(want).max())
        # Tensor arguments are inputs: the sin and tanh lowered in place must
        # not have written into the caller's arrays.
        intact = all(np.array_equal(a, b) for a, b in zip((q, k, v), inputs))
        ok = got.shape == want.shape and err < 1e-5 and intact
        if not intact:
            print("inputs overwritten")
        failed += not ok
        print("%s %s: relative error %.2e (seed %d)" % ("PASS" if ok else "FAIL", label, err,
                                                          seed))
    print("%d failed" % failed)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
