// RUN: flash-opt %s -split-input-file -flash-unpack-varlen-attention | FileCheck %s

// One flash.attention per sequence, in an scf.for carrying the output and
// the LSE: the sequence's rows [q0, q1) and [k0, k1) (offsets clamped into
// the token counts 20 and 25) sliced out, transposed to [heads, L, D], and
// the results inserted back into those rows.
// CHECK-LABEL: func.func @varlen_causal_lse
// CHECK-SAME: (%[[Q:.+]]: tensor<20x4x16xf32>, %[[K:.+]]: tensor<25x2x16xf32>, %[[V:.+]]: tensor<25x2x8xf32>, %[[CQ:.+]]: tensor<4xi32>, %[[CK:.+]]: tensor<4xi32>, %[[O:.+]]: tensor<20x4x8xf32>, %[[L:.+]]: tensor<4x20xf32>)
// CHECK: %[[R:.+]]:2 = scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[OA:.+]] = %[[O]], %[[LA:.+]] = %[[L]])
// CHECK:   tensor.extract %[[CQ]][%[[B]]] : tensor<4xi32>
// CHECK:   %[[Q0:.+]] = arith.minsi %{{.+}}, %c20
// CHECK:   %[[Q1:.+]] = arith.minsi %{{.+}}, %c20
// CHECK:   tensor.extract %[[CK]][%[[B]]] : tensor<4xi32>
// CHECK:   %[[K0:.+]] = arith.minsi %{{.+}}, %c25
// CHECK:   %[[LQ:.+]] = arith.subi %[[Q1]], %[[Q0]]
// CHECK:   %[[QS:.+]] = tensor.extract_slice %[[Q]][%[[Q0]], 0, 0] [%[[LQ]], 4, 16] [1, 1, 1] : tensor<20x4x16xf32> to tensor<?x4x16xf32>
// CHECK:   %[[QT:.+]] = linalg.transpose ins(%[[QS]] : tensor<?x4x16xf32>) outs(%{{.+}} : tensor<4x?x16xf32>) permutation = [1, 0, 2]
// CHECK:   tensor.extract_slice %[[K]][%[[K0]], 0, 0]
// CHECK:   tensor.extract_slice %[[V]][%[[K0]], 0, 0]
// CHECK:   %[[A:.+]]:2 = flash.attention ins(%[[QT]], %{{.+}}, %{{.+}} : tensor<4x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x8xf32>) outs(%{{.+}}, %{{.+}} : tensor<4x?x8xf32>, tensor<4x?xf32>) scale(0.25) mask(causal, bottom_right)
// CHECK:   %[[OT:.+]] = linalg.transpose ins(%[[A]]#0 : tensor<4x?x8xf32>) outs(%{{.+}} : tensor<?x4x8xf32>) permutation = [1, 0, 2]
// CHECK:   %[[ON:.+]] = tensor.insert_slice %[[OT]] into %[[OA]][%[[Q0]], 0, 0]
// CHECK:   %[[LN:.+]] = tensor.insert_slice %[[A]]#1 into %[[LA]][0, %[[Q0]]]
// CHECK:   scf.yield %[[ON]], %[[LN]]
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @varlen_causal_lse(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o0: tensor<20x4x8xf32>, %l0: tensor<4x20xf32>) -> (tensor<20x4x8xf32>, tensor<4x20xf32>) {
  %o, %l = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>)
      seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>)
      outs(%o0, %l0 : tensor<20x4x8xf32>, tensor<4x20xf32>) scale(0.25) mask(causal, bottom_right)
      -> tensor<20x4x8xf32>, tensor<4x20xf32>
  return %o, %l : tensor<20x4x8xf32>, tensor<4x20xf32>
}

// -----

// Sinks: every sequence's flash.attention takes the op's sinks (all the
// query heads are in each).
// CHECK-LABEL: func.func @varlen_sinks
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<4xbf16>
// CHECK: scf.for
// CHECK:   flash.attention ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<4x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x8xf32>) outs(%{{.+}} : tensor<4x?x8xf32>) sinks(%[[S]] : tensor<4xbf16>) scale(0.25) mask(sliding_window, 5, bottom_right)
func.func @varlen_sinks(%q: tensor<20x4x16xf32>, %k: tensor<25x2x16xf32>, %v: tensor<25x2x8xf32>, %cq: tensor<4xi32>, %ck: tensor<4xi32>, %o0: tensor<20x4x8xf32>, %s: tensor<4xbf16>) -> tensor<20x4x8xf32> {
  %o = flash.varlen_attention ins(%q, %k, %v : tensor<20x4x16xf32>, tensor<25x2x16xf32>, tensor<25x2x8xf32>)
      seqlens(%cq, %ck : tensor<4xi32>, tensor<4xi32>)
      outs(%o0 : tensor<20x4x8xf32>) sinks(%s : tensor<4xbf16>) scale(0.25) mask(sliding_window, 5, bottom_right)
      -> tensor<20x4x8xf32>
  return %o : tensor<20x4x8xf32>
}
