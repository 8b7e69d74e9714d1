//===- Passes.td - flash transformation passes -------------*- tablegen -*-===//
#ifndef FLASH_TRANSFORMS_PASSES
#define FLASH_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FlashDecomposeAttentionPass : Pass<"flash-decompose-attention"> {
  let summary = "Lower flash.attention to unfused linalg (the reference)";
  let description = [{
    Rewrites every `flash.attention` into the computation it stands for,
    materialising the full score matrix: a contraction for `scale * Q Kᵀ`,
    one elementwise generic applying `score_mod` and the mask, a softmax
    (max, exp, sum, guarded so that a fully masked row gives zeros), and a
    contraction with V. It defines the op's meaning executably: every fused
    lowering is checked against it. It is O(L²) in memory by construction.

    Grouped-query K/V are broadcast to the query's heads first.

    Before:
    ```mlir
    %o = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>,
             tensor<4x70x64xf32>, tensor<4x70x48xf32>)
           outs(%init : tensor<4x100x48xf32>) scale(0.125)
           -> tensor<4x100x48xf32>
    ```
    After: `linalg.generic` contractions and reductions over a
    `tensor<4x100x70xf32>` score matrix.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // FLASH_TRANSFORMS_PASSES
