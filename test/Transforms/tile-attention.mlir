// RUN: flash-opt %s -split-input-file --flash-tile-attention="block-q=32 block-kv=16" --canonicalize --cse | FileCheck %s
// RUN: flash-opt %s -split-input-file --flash-cpu-pipeline="block-q=32 block-kv=16" | FileCheck %s --check-prefix=LLVM
// The same functions through the unfused reference do build the Lq x Lk
// scores, so the NOT checks below are able to fail.
// RUN: flash-opt %s -split-input-file --flash-decompose-attention | FileCheck %s --check-prefix=REF

// No Lq x Lk (100 x 70) value exists anywhere: only 32 x 16 score tiles,
// carried state m, l (32) and acc (32 x 48); without a mask, whole tiles
// skip masking and only the Lk tail is masked.
// CHECK-LABEL: func.func @plain
// CHECK-NOT:     100x70
// CHECK:         scf.forall (%[[B:.+]], %[[QB:.+]]) in (4, 4) shared_outs(%[[O:.+]] = %{{.+}})
// CHECK:           linalg.generic {{.*}} outs(%{{.+}} : tensor<32x64xf32>)
// CHECK:           scf.for {{.*}} iter_args({{.*}}) -> (tensor<32xf32>, tensor<32xf32>, tensor<32x48xf32>)
// CHECK:             linalg.generic {{.*}} outs(%{{.+}} : tensor<64x16xf32>)
// CHECK:             linalg.generic {{.*}} ins(%{{.+}}, %{{.+}} : tensor<32x64xf32>, tensor<64x16xf32>) outs(%{{.+}} : tensor<32x16xf32>)
// CHECK:             math.exp
// CHECK:             scf.yield
// The tail loop has one trip here and is inlined by canonicalize.
// CHECK:           arith.cmpi slt
// CHECK:             arith.select {{.*}} : f32
// CHECK:           scf.forall.in_parallel
// CHECK:             tensor.parallel_insert_slice %{{.+}} into %[[O]][%[[B]], %{{.+}}, 0] [1, %{{.+}}, 48] [1, 1, 1] : tensor<?x48xf32> into tensor<4x100x48xf32>
// CHECK-NOT:     100x70
// LLVM-LABEL: llvm.func @plain
// LLVM:         omp.parallel
// LLVM-NOT:     llvm.mlir.constant(7000 : index)
// REF-LABEL: func.func @plain
// REF:         tensor<4x100x70xf32>
func.func @plain(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x48xf32>,
                 %init: tensor<4x100x48xf32>) -> tensor<4x100x48xf32> {
  %o = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x48xf32>)
         outs(%init : tensor<4x100x48xf32>) scale(0.125) -> tensor<4x100x48xf32>
  return %o : tensor<4x100x48xf32>
}

// -----

// Sliding window: masked loop for the lower edge, unmasked middle, masked
// diagonal/tail loop; the key range comes from the mask (j0 starts at
// i0 + off - W + 1, clamped), fully masked tiles are never visited. GQA maps
// query head h to key/value head h / 4. bf16 inputs widen to f32 once per
// tile; the output truncates back. LSE = m + log l, -inf for dead rows.
// CHECK-LABEL: func.func @window_gqa_lse
// CHECK-NOT:     100x70
// CHECK-DAG:     %[[G:.+]] = arith.constant 4 : index
// CHECK:         scf.forall (%[[B:.+]], %[[H:.+]], %[[QB:.+]]) in (2, 8, 4)
// CHECK:           %[[KVH:.+]] = arith.divui %[[H]], %[[G]] : index
// CHECK:           scf.for
// CHECK:             tensor.extract %{{.+}}[%[[B]], %[[KVH]], %{{.+}}, %{{.+}}] : tensor<2x2x70x64xbf16>
// CHECK:             arith.extf
// CHECK:           scf.for
// CHECK:           scf.for
// CHECK:           arith.truncf {{.*}} : f32 to bf16
// CHECK:           math.log
// CHECK:           scf.forall.in_parallel
// CHECK-COUNT-2:     tensor.parallel_insert_slice
// CHECK-NOT:     100x70
// REF-LABEL: func.func @window_gqa_lse
// REF:         100x70
func.func @window_gqa_lse(%q: tensor<2x8x100x64xbf16>, %k: tensor<2x2x70x64xbf16>,
                          %v: tensor<2x2x70x48xbf16>, %init: tensor<2x8x100x48xbf16>,
                          %lse: tensor<2x8x100xf32>) -> (tensor<2x8x100x48xbf16>, tensor<2x8x100xf32>) {
  %o:2 = flash.attention ins(%q, %k, %v : tensor<2x8x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x48xbf16>)
         outs(%init, %lse : tensor<2x8x100x48xbf16>, tensor<2x8x100xf32>)
         scale(0.125) mask(sliding_window, 20, bottom_right)
         -> tensor<2x8x100x48xbf16>, tensor<2x8x100xf32>
  return %o#0, %o#1 : tensor<2x8x100x48xbf16>, tensor<2x8x100xf32>
}

// -----

// score_mod is inlined per element with the element's indices, clamped to
// [0, Lq-1] x [0, Lk-1] so padded tile positions never read the capture out
// of bounds. Dynamic batch, Lq and Lk.
// CHECK-LABEL: func.func @dynamic_bias
// CHECK:         scf.forall
// CHECK:           scf.for
// CHECK:             linalg.generic
// CHECK:               %[[X:.+]] = tensor.extract %{{.+}}[%{{.+}}, %{{.+}}] : tensor<?x?xf32>
// CHECK:               arith.addf %{{.+}}, %[[X]] : f32
func.func @dynamic_bias(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x48xf32>,
                        %init: tensor<?x?x48xf32>, %bias: tensor<?x?xf32>) -> tensor<?x?x48xf32> {
  %o = flash.attention ins(%q, %k, %v : tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x48xf32>)
         outs(%init : tensor<?x?x48xf32>) captures(%bias : tensor<?x?xf32>) scale(0.125)
         mask(causal)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<?x?xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<?x?xf32>
           %r = arith.addf %s, %x : f32
           flash.yield %r : f32
         } -> tensor<?x?x48xf32>
  return %o : tensor<?x?x48xf32>
}

// -----

// A tile (offsets, query_len): the key range follows the absolute rows
// (bottom-right diagonal at j = i0 + %i0 - 30, so the block's last row
// reaches j < %i0 - 14), the score_mod reads the capture at the absolute
// batch and row (clamped row + %i0), and the per-element mask compares with
// the absolute row as well.
// CHECK-LABEL: func.func @tile_offsets
// CHECK-SAME: %[[BIAS:[^:]+]]: tensor<4x100x70xf32>, %[[B0:[^:]+]]: index, %[[I0:[^:]+]]: index
// CHECK-DAG:     %[[CM14:.+]] = arith.constant -14 : index
// CHECK-DAG:     %[[CM30:.+]] = arith.constant -30 : index
// CHECK-DAG:     %[[C15:.+]] = arith.constant 15 : index
// CHECK:         scf.forall (%[[B:.+]]) in (2)
// CHECK:           %[[BA:.+]] = arith.addi %[[B]], %[[B0]] : index
// CHECK:           arith.addi %[[I0]], %[[CM14]] : index
// The whole tiles: score_mod only.
// CHECK:           scf.for
// CHECK:             linalg.generic
// CHECK:               %[[IC:.+]] = arith.minsi %{{.+}}, %[[C15]] : index
// CHECK:               %[[IA:.+]] = arith.addi %[[IC]], %[[I0]] : index
// CHECK:               tensor.extract %[[BIAS]][%[[BA]], %[[IA]], %{{.+}}] : tensor<4x100x70xf32>
// CHECK-NEXT:          arith.addf
// CHECK-NEXT:          linalg.yield
// The diagonal tiles: score_mod, then the mask.
// CHECK:           scf.for
// CHECK:               tensor.extract %[[BIAS]][%[[BA]], %{{.+}}, %{{.+}}] : tensor<4x100x70xf32>
// CHECK-NEXT:          arith.addf
// CHECK-NEXT:          arith.cmpi slt
// CHECK-NEXT:          %[[ROW:.+]] = arith.addi %{{.+}}, %[[I0]] : index
// CHECK-NEXT:          %[[DIAG:.+]] = arith.addi %[[ROW]], %[[CM30]] : index
// CHECK-NEXT:          arith.cmpi sle, %{{.+}}, %[[DIAG]] : index
// LLVM-LABEL: llvm.func @tile_offsets
// REF-LABEL: func.func @tile_offsets
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
