// RUN: flash-opt %s -split-input-file -resolve-ranked-shaped-type-result-dims -cse -canonicalize | FileCheck %s

// ReifyRankedShapedTypeOpInterface: the size of a result is the size of its init.
// CHECK-LABEL: func.func @reify_dynamic_lq
// CHECK-SAME: (%{{.*}}: tensor<?x64xf32>, %{{.*}}: tensor<?x64xf32>, %{{.*}}: tensor<?x48xf32>, %[[O:.+]]: tensor<?x48xf32>)
// CHECK: %[[D:.+]] = tensor.dim %[[O]], %c0
// CHECK: return %[[D]]
func.func @reify_dynamic_lq(%q: tensor<?x64xf32>, %k: tensor<?x64xf32>, %v: tensor<?x48xf32>, %o: tensor<?x48xf32>) -> index {
  %r = flash.attention ins(%q, %k, %v : tensor<?x64xf32>, tensor<?x64xf32>, tensor<?x48xf32>)
         outs(%o : tensor<?x48xf32>) scale(0.125) -> tensor<?x48xf32>
  %c0 = arith.constant 0 : index
  %d = tensor.dim %r, %c0 : tensor<?x48xf32>
  return %d : index
}

// -----

// No memory effects on tensors: identical ops are merged, unused ones removed.
// CHECK-LABEL: func.func @cse_and_dce
// CHECK-COUNT-1: flash.attention
// CHECK-NOT: flash.attention
func.func @cse_and_dce(%q: tensor<100x64xf32>, %k: tensor<70x64xf32>, %v: tensor<70x48xf32>, %o: tensor<100x48xf32>) -> (tensor<100x48xf32>, tensor<100x48xf32>) {
  %a = flash.attention ins(%q, %k, %v : tensor<100x64xf32>, tensor<70x64xf32>, tensor<70x48xf32>)
         outs(%o : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>
  %b = flash.attention ins(%q, %k, %v : tensor<100x64xf32>, tensor<70x64xf32>, tensor<70x48xf32>)
         outs(%o : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>
  %unused = flash.attention ins(%q, %k, %v : tensor<100x64xf32>, tensor<70x64xf32>, tensor<70x48xf32>)
         outs(%o : tensor<100x48xf32>) scale(0.5) mask(causal) -> tensor<100x48xf32>
  return %a, %b : tensor<100x48xf32>, tensor<100x48xf32>
}
