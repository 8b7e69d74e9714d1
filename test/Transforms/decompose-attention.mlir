// RUN: flash-opt %s -split-input-file --flash-decompose-attention | FileCheck %s

// CHECK-LABEL: func.func @plain
// CHECK-SAME: (%[[Q:.+]]: tensor<4x100x64xf32>, %[[K:.+]]: tensor<4x70x64xf32>, %[[V:.+]]: tensor<4x70x48xf32>, %[[O:.+]]: tensor<4x100x48xf32>)
// CHECK-NOT: flash.attention
// Scores are materialised: this is the O(L^2) reference.
// CHECK: %[[S0:.+]] = linalg.fill {{.*}} -> tensor<4x100x70xf32>
// CHECK: %[[S:.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[Q]], %[[K]] : tensor<4x100x64xf32>, tensor<4x70x64xf32>) outs(%[[S0]] : tensor<4x100x70xf32>)
// CHECK: %[[SC:.+]] = linalg.generic {{.*}} outs(%[[S]] : tensor<4x100x70xf32>)
// CHECK:   arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK: %[[M:.+]] = linalg.generic {{.*}} ins(%[[SC]] : tensor<4x100x70xf32>) outs(%{{.*}} : tensor<4x100xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[P:.+]] = linalg.generic {{.*}} ins(%[[M]] : tensor<4x100xf32>) outs(%[[SC]] : tensor<4x100x70xf32>)
// CHECK:   math.exp
// CHECK: %[[L:.+]] = linalg.generic {{.*}} ins(%[[P]] : tensor<4x100x70xf32>) outs(%{{.*}} : tensor<4x100xf32>)
// CHECK: %[[ACC:.+]] = linalg.generic {{.*}} ins(%[[P]], %[[V]] : tensor<4x100x70xf32>, tensor<4x70x48xf32>)
// CHECK: %[[R:.+]] = linalg.generic {{.*}} ins(%[[ACC]], %[[L]] : tensor<4x100x48xf32>, tensor<4x100xf32>) outs(%[[O]] : tensor<4x100x48xf32>)
// CHECK:   arith.divf
// CHECK: return %[[R]]
func.func @plain(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x48xf32>, %o: tensor<4x100x48xf32>) -> tensor<4x100x48xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x48xf32>)
         outs(%o : tensor<4x100x48xf32>) scale(0.125) -> tensor<4x100x48xf32>
  return %r : tensor<4x100x48xf32>
}

// -----

// Grouped-query K/V are broadcast to the query heads: head h reads h / 4.
// CHECK-LABEL: func.func @gqa_bf16
// CHECK-DAG: %[[G:.+]] = arith.constant 4 : index
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x70x64xbf16>)
// CHECK:   %[[H:.+]] = linalg.index 1 : index
// CHECK:   %[[KVH:.+]] = arith.divui %[[H]], %[[G]] : index
// CHECK:   tensor.extract %{{.*}}[%{{.*}}, %[[KVH]], %{{.*}}, %{{.*}}] : tensor<2x2x70x64xbf16>
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x70x48xbf16>)
// bf16 inputs accumulate in f32 and the output is truncated at the end.
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @gqa_bf16(%q: tensor<2x8x100x64xbf16>, %k: tensor<2x2x70x64xbf16>, %v: tensor<2x2x70x48xbf16>, %o: tensor<2x8x100x48xbf16>) -> tensor<2x8x100x48xbf16> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x8x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x48xbf16>)
         outs(%o : tensor<2x8x100x48xbf16>) scale(0.125) -> tensor<2x8x100x48xbf16>
  return %r : tensor<2x8x100x48xbf16>
}

// -----

// The score_mod body is inlined with its indices and captures, then the mask
// (bottom-right: diagonal at j = i + Lk - Lq = i - 30) sets -inf.
// CHECK-LABEL: func.func @bias_causal_bottom_right
// CHECK-SAME: %[[BIAS:[^:]+]]: tensor<100x70xf32>
// CHECK-DAG: %[[OFF:.+]] = arith.constant -30 : index
// CHECK-DAG: %[[NINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.generic
// CHECK:   %[[I:.+]] = linalg.index 1 : index
// CHECK:   %[[J:.+]] = linalg.index 2 : index
// CHECK:   %[[X:.+]] = tensor.extract %[[BIAS]][%[[I]], %[[J]]]
// CHECK:   %[[SB:.+]] = arith.addf %{{.*}}, %[[X]] : f32
// CHECK:   %[[DIAG:.+]] = arith.addi %[[I]], %[[OFF]] : index
// CHECK:   %[[OK:.+]] = arith.cmpi sle, %[[J]], %[[DIAG]] : index
// CHECK:   arith.select %[[OK]], %[[SB]], %[[NINF]] : f32
func.func @bias_causal_bottom_right(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x48xf32>, %o: tensor<4x100x48xf32>, %bias: tensor<100x70xf32>) -> tensor<4x100x48xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x48xf32>)
         outs(%o : tensor<4x100x48xf32>) captures(%bias : tensor<100x70xf32>) scale(0.125) mask(causal, bottom_right)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<100x70xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<100x70xf32>
           %y = arith.addf %s, %x : f32
           flash.yield %y : f32
         } -> tensor<4x100x48xf32>
  return %r : tensor<4x100x48xf32>
}

// -----

// The log-sum-exp result is m + log(l), kept at -inf for fully masked rows.
// CHECK-LABEL: func.func @lse
// CHECK: %[[LSE:.+]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<4x100xf32>, tensor<4x100xf32>) outs(%{{.*}} : tensor<4x100xf32>)
// CHECK:   math.log
// CHECK: return %{{.*}}, %[[LSE]]
func.func @lse(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x48xf32>, %o: tensor<4x100x48xf32>, %l: tensor<4x100xf32>) -> (tensor<4x100x48xf32>, tensor<4x100xf32>) {
  %r:2 = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x48xf32>)
         outs(%o, %l : tensor<4x100x48xf32>, tensor<4x100xf32>) scale(0.125) mask(sliding_window, 8) -> tensor<4x100x48xf32>, tensor<4x100xf32>
  return %r#0, %r#1 : tensor<4x100x48xf32>, tensor<4x100xf32>
}

// -----

// Dynamic lengths read their sizes at run time.
// CHECK-LABEL: func.func @dynamic
// CHECK-DAG: %[[LQ:.+]] = tensor.dim %{{.*}}, %c1{{.*}} : tensor<?x?x64xf32>
// CHECK: tensor.empty(%{{.*}}, %[[LQ]], %{{.*}}) : tensor<?x?x?xf32>
func.func @dynamic(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x48xf32>, %o: tensor<?x?x48xf32>) -> tensor<?x?x48xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x48xf32>)
         outs(%o : tensor<?x?x48xf32>) scale(0.125) mask(causal, bottom_right) -> tensor<?x?x48xf32>
  return %r : tensor<?x?x48xf32>
}

// -----

// A tile (offsets, query_len): the score_mod and the mask see the batch and
// row indices plus the offsets, and the bottom-right diagonal sits at
// j = i + Lk - query_len = i - 30, not at the tile's own i + 70 - 16.
// CHECK-LABEL: func.func @tile_offsets
// CHECK-SAME: %[[BIAS:[^:]+]]: tensor<4x100x70xf32>, %[[B0:[^:]+]]: index, %[[I0:[^:]+]]: index
// CHECK-DAG: %[[OFF:.+]] = arith.constant -30 : index
// CHECK: linalg.generic
// CHECK:   %[[B:.+]] = linalg.index 0 : index
// CHECK:   %[[I:.+]] = linalg.index 1 : index
// CHECK:   %[[BA:.+]] = arith.addi %[[B]], %[[B0]] : index
// CHECK:   %[[IA:.+]] = arith.addi %[[I]], %[[I0]] : index
// CHECK:   %[[J:.+]] = linalg.index 2 : index
// CHECK:   tensor.extract %[[BIAS]][%[[BA]], %[[IA]], %[[J]]]
// CHECK:   %[[DIAG:.+]] = arith.addi %[[IA]], %[[OFF]] : index
// CHECK:   arith.cmpi sle, %[[J]], %[[DIAG]] : index
func.func @tile_offsets(%q: tensor<2x16x64xf32>, %k: tensor<2x70x64xf32>, %v: tensor<2x70x48xf32>, %o: tensor<2x16x48xf32>, %bias: tensor<4x100x70xf32>, %b0: index, %i0: index) -> tensor<2x16x48xf32> {
  %c100 = arith.constant 100 : index
  %r = flash.attention ins(%q, %k, %v : tensor<2x16x64xf32>, tensor<2x70x64xf32>, tensor<2x70x48xf32>)
         outs(%o : tensor<2x16x48xf32>) captures(%bias : tensor<4x100x70xf32>) offsets(%b0, %i0) query_len(%c100) scale(0.125) mask(causal, bottom_right)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<4x100x70xf32>):
           %x = tensor.extract %bt[%b, %i, %j] : tensor<4x100x70xf32>
           %y = arith.addf %s, %x : f32
           flash.yield %y : f32
         } -> tensor<2x16x48xf32>
  return %r : tensor<2x16x48xf32>
}
