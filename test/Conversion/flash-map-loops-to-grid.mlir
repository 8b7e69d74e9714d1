// RUN: flash-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(func.func(flash-map-loops-to-grid{block-size=128}))' | FileCheck %s

// A 3-D loop nest (with a sequential reduction inside) becomes one
// dimension tiled by the block size: blocks over the tiles, threads within.
// CHECK-LABEL: func.func @rows(
// CHECK: scf.parallel (%{{.+}}) = (%{{.+}}) to (%{{.+}}) step (%[[C128:.+]]) {
// CHECK: scf.parallel (%{{.+}}) = (%{{.+}}) to (%[[C128]]) step (%{{.+}}) {
// CHECK: scf.if
// CHECK: scf.for
// CHECK: {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
// CHECK: {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
func.func @rows(%a: memref<3x5x7x9xf32>, %o: memref<3x5x7xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c7 = arith.constant 7 : index
  %c9 = arith.constant 9 : index
  scf.parallel (%i, %j, %k) = (%c0, %c0, %c0) to (%c3, %c5, %c7) step (%c1, %c1, %c1) {
    scf.for %l = %c0 to %c9 step %c1 {
      %x = memref.load %a[%i, %j, %k, %l] : memref<3x5x7x9xf32>
      %y = memref.load %o[%i, %j, %k] : memref<3x5x7xf32>
      %z = arith.addf %x, %y : f32
      memref.store %z, %o[%i, %j, %k] : memref<3x5x7xf32>
    }
  }
  return
}

// -----

func.func @reduction(%a: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %init = arith.constant 0.0 : f32
  // expected-error @+1 {{a parallel loop with reduction results is not mapped to the GPU}}
  %r = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%init) -> f32 {
    %x = memref.load %a[%i] : memref<8xf32>
    scf.reduce(%x : f32) {
    ^bb0(%l: f32, %r: f32):
      %s = arith.addf %l, %r : f32
      scf.reduce.return %s : f32
    }
  }
  return %r : f32
}
