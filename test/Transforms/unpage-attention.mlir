// RUN: flash-opt %s -split-input-file -flash-unpage-attention | FileCheck %s

// Each cache is gathered through the block table (page clamped into the
// pool, read only when the pool has pages); the lengths, clamped to the
// table's capacity (4 pages of 16), and the diagonals n - Lq are captures of
// a score_mod that masks past each sequence's end and above its diagonal.
// CHECK-LABEL: func.func @spec_causal
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x3x32xf32>, %[[KC:.+]]: tensor<9x16x2x32xf32>, %[[VC:.+]]: tensor<9x16x2x24xf32>, %[[T:.+]]: tensor<2x4xi32>, %[[N:.+]]: tensor<2xi32>
// CHECK: %[[K:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x2x64x32xf32>)
// CHECK:   %[[SLOT:.+]] = arith.divui %{{.*}}, %c16
// CHECK:   %[[ROW:.+]] = arith.remui %{{.*}}, %c16
// CHECK:   %[[E:.+]] = tensor.extract %[[T]][%{{.*}}, %[[SLOT]]] : tensor<2x4xi32>
// CHECK:   arith.minsi
// CHECK:   scf.if
// CHECK:     tensor.extract %[[KC]][%{{.*}}, %[[ROW]], %{{.*}}, %{{.*}}] : tensor<9x16x2x32xf32>
// CHECK: %[[V:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x2x64x24xf32>)
// CHECK: %[[LEN:.+]] = linalg.generic {{.*}} ins(%[[N]] : tensor<2xi32>) outs(%{{.*}} : tensor<2xi64>)
// CHECK:   arith.maxsi
// CHECK:   arith.minsi
// CHECK: %[[OFF:.+]] = linalg.generic {{.*}} ins(%[[N]] : tensor<2xi32>) outs(%{{.*}} : tensor<2xi64>)
// CHECK:   arith.subi
// CHECK: flash.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x4x3x32xf32>, tensor<2x2x64x32xf32>, tensor<2x2x64x24xf32>)
// CHECK-SAME: captures(%[[LEN]], %[[OFF]] : tensor<2xi64>, tensor<2xi64>) scale(0.125) score_mod
// CHECK-NOT: mask(
// CHECK: ^bb0(%[[S:.+]]: f32, %[[B:.+]]: index, %{{.+}}: index, %[[I:.+]]: index, %[[J:.+]]: index,
// CHECK:   %[[NB:.+]] = tensor.extract %{{.*}}[%[[B]]]
// CHECK:   %[[OB:.+]] = tensor.extract %{{.*}}[%[[B]]]
// CHECK:   %[[DIAG:.+]] = arith.addi %{{.*}}, %[[OB]]
// CHECK:   %[[IN:.+]] = arith.cmpi slt, %{{.*}}, %[[NB]]
// CHECK:   %[[VIS:.+]] = arith.cmpi sle, %{{.*}}, %[[DIAG]]
// CHECK:   %[[OK:.+]] = arith.andi %[[IN]], %[[VIS]]
// CHECK:   arith.select %[[OK]], %[[S]], %cst
// CHECK-NOT: flash.paged_attention
func.func @spec_causal(%q: tensor<2x4x3x32xf32>, %kc: tensor<9x16x2x32xf32>, %vc: tensor<9x16x2x24xf32>,
                       %t: tensor<2x4xi32>, %n: tensor<2xi32>, %o: tensor<2x4x3x24xf32>) -> tensor<2x4x3x24xf32> {
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<2x4x3x32xf32>, tensor<9x16x2x32xf32>, tensor<9x16x2x24xf32>)
      pages(%t, %n : tensor<2x4xi32>, tensor<2xi32>) outs(%o : tensor<2x4x3x24xf32>)
      scale(0.125) mask(causal, bottom_right) -> tensor<2x4x3x24xf32>
  return %r : tensor<2x4x3x24xf32>
}

// -----

// A window adds the lower bound diag - W + 1; dynamic sizes stay dynamic.
// CHECK-LABEL: func.func @window_dynamic
// CHECK: flash.attention {{.*}} tensor<?x2x?x16xf32>
// CHECK: %[[DIAG:.+]] = arith.addi %{{.+}}, %{{.+}} : i64
// CHECK-NEXT: %[[C:.+]] = arith.constant -4 : i64
// CHECK-NEXT: %[[LO:.+]] = arith.addi %[[DIAG]], %[[C]] : i64
// CHECK: arith.cmpi sge, %{{.+}}, %[[LO]] : i64
func.func @window_dynamic(%q: tensor<?x2x1x16xf32>, %kc: tensor<?x32x2x16xf32>, %vc: tensor<?x32x2x16xf32>,
                          %t: tensor<?x?xi32>, %n: tensor<?xi32>, %o: tensor<?x2x1x16xf32>) -> tensor<?x2x1x16xf32> {
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<?x2x1x16xf32>, tensor<?x32x2x16xf32>, tensor<?x32x2x16xf32>)
      pages(%t, %n : tensor<?x?xi32>, tensor<?xi32>) outs(%o : tensor<?x2x1x16xf32>)
      scale(0.25) mask(sliding_window, 5, bottom_right) -> tensor<?x2x1x16xf32>
  return %r : tensor<?x2x1x16xf32>
}

// -----

// The sinks carry over to the flash.attention of the gathered pages.
// CHECK-LABEL: func.func @sinks
// CHECK-SAME: %[[S:[^:]+]]: tensor<4xf32>)
// CHECK: flash.attention
// CHECK-SAME: sinks(%[[S]] : tensor<4xf32>) scale(0.125)
// CHECK-NOT: flash.paged_attention
func.func @sinks(%q: tensor<2x4x1x32xf32>, %kc: tensor<9x16x2x32xf32>, %vc: tensor<9x16x2x24xf32>,
                 %t: tensor<2x4xi32>, %n: tensor<2xi32>, %o: tensor<2x4x1x24xf32>,
                 %s: tensor<4xf32>) -> tensor<2x4x1x24xf32> {
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<2x4x1x32xf32>, tensor<9x16x2x32xf32>, tensor<9x16x2x24xf32>)
      pages(%t, %n : tensor<2x4xi32>, tensor<2xi32>) outs(%o : tensor<2x4x1x24xf32>) sinks(%s : tensor<4xf32>)
      scale(0.125) -> tensor<2x4x1x24xf32>
  return %r : tensor<2x4x1x24xf32>
}

// -----

// The op's own score_mod runs first, on the same indices and its own
// captures (which come before n and off); the length and mask select after it.
// CHECK-LABEL: func.func @score_mod
// CHECK-SAME: %[[SL:[^:]+]]: tensor<4xf32>)
// CHECK: flash.attention
// CHECK-SAME: captures(%[[SL]], %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<2xi64>, tensor<2xi64>) scale(0.125) score_mod
// CHECK: ^bb0(%[[S:.+]]: f32, %[[B:.+]]: index, %[[H:.+]]: index, %[[I:.+]]: index, %[[J:.+]]: index, %[[C:.+]]: tensor<4xf32>, %[[NS:.+]]: tensor<2xi64>, %[[OS:.+]]: tensor<2xi64>):
// CHECK:   %[[X:.+]] = tensor.extract %[[C]][%[[H]]] : tensor<4xf32>
// CHECK:   %[[JF:.+]] = arith.index_cast %[[J]] : index to i64
// CHECK:   %[[M:.+]] = arith.addf %[[S]], %{{.*}} : f32
// CHECK:   tensor.extract %[[NS]][%[[B]]]
// CHECK:   tensor.extract %[[OS]][%[[B]]]
// CHECK:   arith.cmpi slt
// CHECK:   arith.select %{{.*}}, %[[M]], %cst
// CHECK-NOT: flash.paged_attention
func.func @score_mod(%q: tensor<2x4x1x32xf32>, %kc: tensor<9x16x2x32xf32>, %vc: tensor<9x16x2x24xf32>,
                     %t: tensor<2x4xi32>, %n: tensor<2xi32>, %o: tensor<2x4x1x24xf32>,
                     %slopes: tensor<4xf32>) -> tensor<2x4x1x24xf32> {
  %r = flash.paged_attention ins(%q, %kc, %vc : tensor<2x4x1x32xf32>, tensor<9x16x2x32xf32>, tensor<9x16x2x24xf32>)
      pages(%t, %n : tensor<2x4xi32>, tensor<2xi32>) outs(%o : tensor<2x4x1x24xf32>)
      captures(%slopes : tensor<4xf32>) scale(0.125)
      score_mod {
      ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %sl: tensor<4xf32>):
        %x = tensor.extract %sl[%h] : tensor<4xf32>
        %ji = arith.index_cast %j : index to i64
        %jf = arith.sitofp %ji : i64 to f32
        %p = arith.mulf %x, %jf : f32
        %r = arith.addf %s, %p : f32
        flash.yield %r : f32
      } -> tensor<2x4x1x24xf32>
  return %r : tensor<2x4x1x24xf32>
}
