// RUN: flash-opt %s -split-input-file --flash-decompose-aggregated-ops | FileCheck %s

// linalg.softmax is expanded into the generics it stands for.
// CHECK-LABEL: func.func @softmax
// CHECK-NOT: linalg.softmax
// CHECK: math.exp
// CHECK: arith.divf
func.func @softmax(%x: tensor<4x70xf32>) -> tensor<4x70xf32> {
  %e = tensor.empty() : tensor<4x70xf32>
  %p = linalg.softmax dimension(1) ins(%x : tensor<4x70xf32>) outs(%e : tensor<4x70xf32>) -> tensor<4x70xf32>
  return %p : tensor<4x70xf32>
}

// -----

// flash.attention implements AggregatedOpInterface too, but only linalg's
// aggregates are expanded here: the op stays fused, next to an expanded
// softmax.
// CHECK-LABEL: func.func @attention_stays
// CHECK-NOT: linalg.softmax
// CHECK: math.exp
// CHECK: flash.attention
// CHECK-SAME: scale(0.125) mask(causal)
func.func @attention_stays(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x48xf32>, %o: tensor<4x100x48xf32>, %x: tensor<4x70xf32>) -> (tensor<4x100x48xf32>, tensor<4x70xf32>) {
  %e = tensor.empty() : tensor<4x70xf32>
  %p = linalg.softmax dimension(1) ins(%x : tensor<4x70xf32>) outs(%e : tensor<4x70xf32>) -> tensor<4x70xf32>
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x48xf32>)
         outs(%o : tensor<4x100x48xf32>) scale(0.125) mask(causal) -> tensor<4x100x48xf32>
  return %r, %p : tensor<4x100x48xf32>, tensor<4x70xf32>
}
