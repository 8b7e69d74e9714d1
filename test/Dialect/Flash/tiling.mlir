// RUN: flash-opt %s -split-input-file --transform-interpreter --canonicalize --cse | FileCheck %s

// flash.attention through upstream tiling (TilingInterface): each tile is a
// flash.attention on slices of Q, K/V and the inits that carries its absolute
// position (offsets, query_len). Shapes: Lq = 10, Lk = 12, D = 16, Dv = 8;
// 6 query heads on 2 key/value heads (G = 3).

// Whole groups of 3 heads read one K/V head (%h / 3); rows in tiles of 4,
// the last one partial. The capture is passed whole; the bottom-right mask
// aligns to query_len = 10.
// CHECK-DAG: #[[$MUL3:.+]] = affine_map<(d0) -> (d0 * 3)>
// CHECK-DAG: #[[$MUL4:.+]] = affine_map<(d0) -> (d0 * 4)>
// CHECK-DAG: #[[$ROWS:.+]] = affine_map<(d0) -> (d0 * -4 + 10, 4)>
// CHECK-LABEL: func.func @gqa_causal_bias_lse
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x6x10x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x2x12x16xf32>, %[[V:[a-z0-9]+]]: tensor<2x2x12x8xf32>, %[[O:[a-z0-9]+]]: tensor<2x6x10x8xf32>, %[[L:[a-z0-9]+]]: tensor<2x6x10xf32>, %[[BIAS:[a-z0-9]+]]: tensor<10x12xf32>)
// CHECK-DAG: %[[C3:.+]] = arith.constant 3 : index
// CHECK-DAG: %[[C10:.+]] = arith.constant 10 : index
// CHECK: %[[R:.+]]:2 = scf.forall (%[[B:.+]], %[[HT:.+]], %[[IT:.+]]) in (2, 2, 3) shared_outs(%[[OO:.+]] = %[[O]], %[[LL:.+]] = %[[L]])
// CHECK: %[[H:.+]] = affine.apply #[[$MUL3]](%[[HT]])
// CHECK: %[[I:.+]] = affine.apply #[[$MUL4]](%[[IT]])
// CHECK: %[[N:.+]] = affine.min #[[$ROWS]](%[[IT]])
// CHECK: %[[HKV:.+]] = arith.divui %[[H]], %[[C3]]
// CHECK: %[[QT:.+]] = tensor.extract_slice %[[Q]][%[[B]], %[[H]], %[[I]], 0] [1, 3, %[[N]], 16] [1, 1, 1, 1] : tensor<2x6x10x16xf32> to tensor<1x3x?x16xf32>
// CHECK: %[[KT:.+]] = tensor.extract_slice %[[K]][%[[B]], %[[HKV]], 0, 0] [1, 1, 12, 16] [1, 1, 1, 1] : tensor<2x2x12x16xf32> to tensor<1x1x12x16xf32>
// CHECK: %[[VT:.+]] = tensor.extract_slice %[[V]][%[[B]], %[[HKV]], 0, 0] [1, 1, 12, 8] [1, 1, 1, 1] : tensor<2x2x12x8xf32> to tensor<1x1x12x8xf32>
// CHECK: %[[OT:.+]] = tensor.extract_slice %[[OO]][%[[B]], %[[H]], %[[I]], 0] [1, 3, %[[N]], 8] [1, 1, 1, 1]
// CHECK: %[[LT:.+]] = tensor.extract_slice %[[LL]][%[[B]], %[[H]], %[[I]]] [1, 3, %[[N]]] [1, 1, 1]
// CHECK: %[[T:.+]]:2 = flash.attention ins(%[[QT]], %[[KT]], %[[VT]] : tensor<1x3x?x16xf32>, tensor<1x1x12x16xf32>, tensor<1x1x12x8xf32>)
// CHECK-SAME: outs(%[[OT]], %[[LT]] : tensor<1x3x?x8xf32>, tensor<1x3x?xf32>) captures(%[[BIAS]] : tensor<10x12xf32>)
// CHECK-SAME: offsets(%[[B]], %[[H]], %[[I]]) query_len(%[[C10]]) scale(0.25) mask(causal, bottom_right) score_mod
// CHECK: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<10x12xf32>
// CHECK: scf.forall.in_parallel
// CHECK-NEXT: tensor.parallel_insert_slice %[[T]]#0 into %[[OO]][%[[B]], %[[H]], %[[I]], 0] [1, 3, %[[N]], 8] [1, 1, 1, 1] : tensor<1x3x?x8xf32> into tensor<2x6x10x8xf32>
// CHECK-NEXT: tensor.parallel_insert_slice %[[T]]#1 into %[[LL]][%[[B]], %[[H]], %[[I]]] [1, 3, %[[N]]] [1, 1, 1] : tensor<1x3x?xf32> into tensor<2x6x10xf32>
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @gqa_causal_bias_lse(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>, %o: tensor<2x6x10x8xf32>, %l: tensor<2x6x10xf32>, %bias: tensor<10x12xf32>) -> (tensor<2x6x10x8xf32>, tensor<2x6x10xf32>) {
  %r:2 = flash.attention ins(%q, %k, %v : tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
         outs(%o, %l : tensor<2x6x10x8xf32>, tensor<2x6x10xf32>) captures(%bias : tensor<10x12xf32>) scale(0.25) mask(causal, bottom_right)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bt: tensor<10x12xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<10x12xf32>
           %y = arith.addf %s, %x : f32
           flash.yield %y : f32
         } -> tensor<2x6x10x8xf32>, tensor<2x6x10xf32>
  return %r#0, %r#1 : tensor<2x6x10x8xf32>, tensor<2x6x10xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [1, 3, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Single query heads: head %h reads K/V head %h / 3 whatever the tile.
// CHECK-LABEL: func.func @single_heads
// CHECK-SAME: (%[[Q:[a-z0-9]+]]: tensor<2x6x10x16xf32>, %[[K:[a-z0-9]+]]: tensor<2x2x12x16xf32>
// CHECK: scf.forall (%[[H:.+]], %[[IT:.+]]) in (6, 2)
// CHECK: %[[HKV:.+]] = arith.divui %[[H]], %{{.+}} : index
// CHECK: tensor.extract_slice %[[Q]][0, %[[H]], %{{.+}}, 0] [2, 1, 5, 16]
// CHECK: tensor.extract_slice %[[K]][0, %[[HKV]], 0, 0] [2, 1, 12, 16]
// CHECK: flash.attention {{.+}} : tensor<2x1x5x16xf32>, tensor<2x1x12x16xf32>, tensor<2x1x12x8xf32>)
// CHECK-SAME: offsets(%{{.+}}, %[[H]], %{{.+}}) query_len(%{{.+}}) scale(0.25) mask(causal) -> tensor<2x1x5x8xf32>
func.func @single_heads(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>, %o: tensor<2x6x10x8xf32>) -> tensor<2x6x10x8xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
         outs(%o : tensor<2x6x10x8xf32>) scale(0.25) mask(causal) -> tensor<2x6x10x8xf32>
  return %r : tensor<2x6x10x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [0, 1, 5] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Without mask and score_mod a tile needs no offsets: it is an ordinary op.
// CHECK-LABEL: func.func @plain_no_offsets
// CHECK: scf.forall
// CHECK: flash.attention
// CHECK-NOT: offsets
// CHECK-SAME: scale(0.25) -> tensor<1x?x8xf32>
func.func @plain_no_offsets(%q: tensor<3x10x16xf32>, %k: tensor<3x12x16xf32>, %v: tensor<3x12x8xf32>, %o: tensor<3x10x8xf32>) -> tensor<3x10x8xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<3x10x16xf32>, tensor<3x12x16xf32>, tensor<3x12x8xf32>)
         outs(%o : tensor<3x10x8xf32>) scale(0.25) -> tensor<3x10x8xf32>
  return %r : tensor<3x10x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [1, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// scf.for tiling: tensor.insert_slice into the loop-carried output. A tile
// of a tile adds its offsets to the outer ones.
// CHECK-LABEL: func.func @tile_using_for_of_a_tile
// CHECK-SAME: %[[B0:[a-z0-9]+]]: index, %[[I0:[a-z0-9]+]]: index)
// CHECK-DAG: %[[C100:.+]] = arith.constant 100 : index
// CHECK: scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[OB:.+]] = %{{.+}})
// CHECK: scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[OI:.+]] = %[[OB]])
// CHECK-DAG: %[[BA:.+]] = arith.addi %[[B0]], %[[B]] : index
// CHECK-DAG: %[[IA:.+]] = arith.addi %[[I0]], %[[I]] : index
// CHECK: %[[T:.+]] = flash.attention
// CHECK-SAME: offsets(%[[BA]], %[[IA]]) query_len(%[[C100]]) scale(0.25) mask(sliding_window, 4, bottom_right)
// CHECK: tensor.insert_slice %[[T]] into %[[OI]][%[[B]], %[[I]], 0]
func.func @tile_using_for_of_a_tile(%q: tensor<3x10x16xf32>, %k: tensor<3x12x16xf32>, %v: tensor<3x12x8xf32>, %o: tensor<3x10x8xf32>, %b0: index, %i0: index) -> tensor<3x10x8xf32> {
  %c100 = arith.constant 100 : index
  %r = flash.attention ins(%q, %k, %v : tensor<3x10x16xf32>, tensor<3x12x16xf32>, tensor<3x12x8xf32>)
         outs(%o : tensor<3x10x8xf32>) offsets(%b0, %i0) query_len(%c100) scale(0.25) mask(sliding_window, 4, bottom_right) -> tensor<3x10x8xf32>
  return %r : tensor<3x10x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %l:2 = transform.structured.tile_using_for %a tile_sizes [1, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// AggregatedOpInterface: decompose_interface gives the unfused reference of
// a tile, its mask reading the absolute row (local row + offset) and
// query_len.
// CHECK-LABEL: func.func @decompose_a_tile
// CHECK: scf.forall (%[[IT:.+]]) in (3)
// CHECK: %[[I:.+]] = affine.apply #{{.+}}(%[[IT]])
// CHECK-NOT: flash.attention
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: %[[ROW:.+]] = linalg.index 0 : index
// CHECK: %[[ABS:.+]] = arith.addi %[[ROW]], %[[I]] : index
// CHECK: %[[COL:.+]] = linalg.index 1 : index
// CHECK: %[[DIAG:.+]] = arith.addi %[[ABS]], %{{.+}} : index
// CHECK: arith.cmpi sle, %[[COL]], %[[DIAG]] : index
// CHECK-NOT: flash.attention
// CHECK: scf.forall.in_parallel
func.func @decompose_a_tile(%q: tensor<10x16xf32>, %k: tensor<12x16xf32>, %v: tensor<12x8xf32>, %o: tensor<10x8xf32>) -> tensor<10x8xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<10x16xf32>, tensor<12x16xf32>, tensor<12x8xf32>)
         outs(%o : tensor<10x8xf32>) scale(0.25) mask(causal, bottom_right) -> tensor<10x8xf32>
  return %r : tensor<10x8xf32>
}
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %a = transform.structured.match ops{["flash.attention"]} in %root : (!transform.any_op) -> !transform.any_op
    %t, %f = transform.structured.tile_using_forall %a tile_sizes [4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    %d = transform.structured.decompose_interface %t : (!transform.any_op) -> !transform.any_op
    transform.yield
  }
}
