// RUN: flash-opt %s -split-input-file --flash-tile-attention="block-q=32 block-kv=16" --canonicalize --cse | FileCheck %s

// A score_mod that masks by indices alone (chunks of 32 keys) sorts each
// tile: the chunk predicate over the tile's row and key ranges gives
// "possibly visible" (else the tile is skipped: its K/V are never read) and
// "certainly visible" (then the score_mod, here the mask alone, is dropped).
// CHECK-LABEL: func.func @chunked
// CHECK-DAG:     %[[NINF:.+]] = arith.constant 0xFF800000 : f32
// CHECK:         scf.forall
// CHECK:           scf.for
// CHECK:             arith.divsi %{{.+}}, %c32 : index
// CHECK:             scf.if %{{.+}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x8xf32>) {
// CHECK-NEXT:          scf.if %{{.+}} -> (tensor<32xf32>, tensor<32xf32>, tensor<32x8xf32>) {
// The full tile: K and V loaded, no -inf on the scores.
// CHECK:                 tensor.extract %arg1
// CHECK-NOT:             arith.select %{{.+}}, %{{.+}}, %[[NINF]]
// CHECK:               } else {
// The partial tile: the region's select per element.
// CHECK:                 arith.divsi
// CHECK:                 arith.cmpi eq
// CHECK:                 arith.select %{{.+}}, %{{.+}}, %[[NINF]] : f32
// A tile the mask hides: the state passes through.
// CHECK:             } else {
// CHECK-NEXT:          scf.yield %{{.+}}, %{{.+}}, %{{.+}} :
func.func @chunked(%q: tensor<2x100x16xf32>, %k: tensor<2x70x16xf32>, %v: tensor<2x70x8xf32>,
                   %init: tensor<2x100x8xf32>) -> tensor<2x100x8xf32> {
  %o = flash.attention ins(%q, %k, %v : tensor<2x100x16xf32>, tensor<2x70x16xf32>, tensor<2x70x8xf32>)
         outs(%init : tensor<2x100x8xf32>) scale(0.25)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index):
           %c32 = arith.constant 32 : index
           %ci = arith.divsi %i, %c32 : index
           %cj = arith.divsi %j, %c32 : index
           %same = arith.cmpi eq, %ci, %cj : index
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %same, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x100x8xf32>
  return %o : tensor<2x100x8xf32>
}

// -----

// A bias added under an additive mask (x + select(p, 0, -inf)) on a
// symmetric window |i - j| <= 8: full tiles keep the bias and lose the
// mask, partial ones run the whole region.
// CHECK-LABEL: func.func @additive_mask_with_bias
// CHECK:           scf.for
// CHECK:             scf.if
// CHECK-NEXT:          scf.if
// CHECK:                 linalg.generic
// CHECK:                   tensor.extract %arg4
// CHECK-NEXT:              arith.addf
// CHECK-NEXT:              linalg.yield
// CHECK:               } else {
// CHECK:                   math.absi
// CHECK:                   arith.select
// CHECK:                   arith.addf
// CHECK:                   arith.addf
func.func @additive_mask_with_bias(%q: tensor<2x100x16xf32>, %k: tensor<2x70x16xf32>,
                                   %v: tensor<2x70x8xf32>, %init: tensor<2x100x8xf32>,
                                   %bias: tensor<100x70xf32>) -> tensor<2x100x8xf32> {
  %o = flash.attention ins(%q, %k, %v : tensor<2x100x16xf32>, tensor<2x70x16xf32>, tensor<2x70x8xf32>)
         outs(%init : tensor<2x100x8xf32>) captures(%bias : tensor<100x70xf32>) scale(0.25)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<100x70xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<100x70xf32>
           %sb = arith.addf %s, %x : f32
           %d = arith.subi %i, %j : index
           %a = math.absi %d : index
           %c8 = arith.constant 8 : index
           %near = arith.cmpi sle, %a, %c8 : index
           %zero = arith.constant 0.0 : f32
           %ninf = arith.constant 0xFF800000 : f32
           %m = arith.select %near, %zero, %ninf : f32
           %r = arith.addf %sb, %m : f32
           flash.yield %r : f32
         } -> tensor<2x100x8xf32>
  return %o : tensor<2x100x8xf32>
}

// -----

// A predicate that reads a capture is not an index mask: no tile is
// sorted, every tile runs the region.
// CHECK-LABEL: func.func @data_mask
// CHECK:           scf.for
// CHECK-NOT:         scf.if
// CHECK:             linalg.generic
// CHECK:               tensor.extract %arg4
// CHECK:               arith.select
func.func @data_mask(%q: tensor<2x100x16xf32>, %k: tensor<2x70x16xf32>,
                     %v: tensor<2x70x8xf32>, %init: tensor<2x100x8xf32>,
                     %doc: tensor<70xindex>) -> tensor<2x100x8xf32> {
  %o = flash.attention ins(%q, %k, %v : tensor<2x100x16xf32>, tensor<2x70x16xf32>, tensor<2x70x8xf32>)
         outs(%init : tensor<2x100x8xf32>) captures(%doc : tensor<70xindex>) scale(0.25)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %dt: tensor<70xindex>):
           %dj = tensor.extract %dt[%j] : tensor<70xindex>
           %ok = arith.cmpi sle, %dj, %i : index
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %ok, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x100x8xf32>
  return %o : tensor<2x100x8xf32>
}
