// Executable twins of upstream tiling (transform.structured.tile_using_forall
// and tile_using_for through flash.attention's TilingInterface): the tiled
// function against the untiled one on fresh random inputs, lowered both
// through the reference decomposition and through flash-tile-attention, so
// that both honour a tile's offsets. Masks aligned bottom-right with
// Lq = 10 != Lk = 12 != D = 16 != Dv = 8, score_mods reading captures at
// their batch, row and column indices, grouped-query heads, log-sum-exp.
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--transform-preload-library=transform-library-paths=%S/Inputs/tile-using-forall-schedule.mlir \
// RUN:   --transform=--transform-interpreter --expect flash.attention | FileCheck %s
// RUN: %python %flash_src_root/test/lib/run_twin.py %s --opt flash-opt \
// RUN:   --mlir mlir-opt --runner mlir-runner --lib-dir %mlir_lib_dir \
// RUN:   --transform=--transform-preload-library=transform-library-paths=%S/Inputs/tile-using-forall-schedule.mlir \
// RUN:   --transform=--transform-interpreter --expect flash.attention \
// RUN:   '--lower=--flash-tile-attention=block-q=2 block-kv=4' | FileCheck %s

// CHECK: PASS gqa_causal_bias_lse
// CHECK: PASS single_heads
// CHECK: PASS half_group_sliding_window
// CHECK: PASS tile_using_for
// CHECK: PASS tiled_twice
// CHECK: PASS dynamic_lengths
// CHECK: 6 passed, 0 failed

// Per-row, per-column, per-head and per-batch terms: a tile that saw its own
// indices instead of the absolute ones would read the wrong entries.
func.func @gqa_causal_bias_lse(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>,
                               %bias: tensor<10x12xf32>, %slopes: tensor<6xf32>, %per_batch: tensor<2xf32>)
    -> (tensor<2x6x10x8xf32>, tensor<2x6x10xf32>) {
  %o = tensor.empty() : tensor<2x6x10x8xf32>
  %l = tensor.empty() : tensor<2x6x10xf32>
  %r:2 = flash.attention ins(%q, %k, %v : tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
         outs(%o, %l : tensor<2x6x10x8xf32>, tensor<2x6x10xf32>)
         captures(%bias, %slopes, %per_batch : tensor<10x12xf32>, tensor<6xf32>, tensor<2xf32>)
         scale(0.25) mask(causal, bottom_right) {tiling = "groups"}
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bt: tensor<10x12xf32>, %st: tensor<6xf32>, %pb: tensor<2xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<10x12xf32>
           %slope = tensor.extract %st[%h] : tensor<6xf32>
           %d = arith.subi %j, %i : index
           %di = arith.index_cast %d : index to i64
           %df = arith.sitofp %di : i64 to f32
           %alibi = arith.mulf %slope, %df : f32
           %y = tensor.extract %pb[%b] : tensor<2xf32>
           %s1 = arith.addf %s, %x : f32
           %s2 = arith.addf %s1, %alibi : f32
           %s3 = arith.addf %s2, %y : f32
           flash.yield %s3 : f32
         } -> tensor<2x6x10x8xf32>, tensor<2x6x10xf32>
  return %r#0, %r#1 : tensor<2x6x10x8xf32>, tensor<2x6x10xf32>
}

// -----

func.func @single_heads(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>,
                        %slopes: tensor<6xf32>) -> (tensor<2x6x10x8xf32>, tensor<2x6x10xf32>) {
  %o = tensor.empty() : tensor<2x6x10x8xf32>
  %l = tensor.empty() : tensor<2x6x10xf32>
  %r:2 = flash.attention ins(%q, %k, %v : tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
         outs(%o, %l : tensor<2x6x10x8xf32>, tensor<2x6x10xf32>) captures(%slopes : tensor<6xf32>)
         scale(0.25) mask(causal, bottom_right) {tiling = "heads"}
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %st: tensor<6xf32>):
           %slope = tensor.extract %st[%h] : tensor<6xf32>
           %d = arith.subi %j, %i : index
           %di = arith.index_cast %d : index to i64
           %df = arith.sitofp %di : i64 to f32
           %alibi = arith.mulf %slope, %df : f32
           %s1 = arith.addf %s, %alibi : f32
           flash.yield %s1 : f32
         } -> tensor<2x6x10x8xf32>, tensor<2x6x10xf32>
  return %r#0, %r#1 : tensor<2x6x10x8xf32>, tensor<2x6x10xf32>
}

// -----

// Eight query heads on two key/value heads; tiles of two heads lie inside
// one group and read one key/value head.
func.func @half_group_sliding_window(%q: tensor<2x8x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>,
                                     %bias: tensor<10x12xf32>) -> (tensor<2x8x10x8xf32>, tensor<2x8x10xf32>) {
  %o = tensor.empty() : tensor<2x8x10x8xf32>
  %l = tensor.empty() : tensor<2x8x10xf32>
  %r:2 = flash.attention ins(%q, %k, %v : tensor<2x8x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
         outs(%o, %l : tensor<2x8x10x8xf32>, tensor<2x8x10xf32>) captures(%bias : tensor<10x12xf32>)
         scale(0.25) mask(sliding_window, 4, bottom_right) {tiling = "half_group"}
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bt: tensor<10x12xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<10x12xf32>
           %s1 = arith.addf %s, %x : f32
           flash.yield %s1 : f32
         } -> tensor<2x8x10x8xf32>, tensor<2x8x10xf32>
  return %r#0, %r#1 : tensor<2x8x10x8xf32>, tensor<2x8x10xf32>
}

// -----

func.func @tile_using_for(%q: tensor<3x10x16xf32>, %k: tensor<3x12x16xf32>, %v: tensor<3x12x8xf32>,
                          %bias: tensor<10x12xf32>) -> tensor<3x10x8xf32> {
  %o = tensor.empty() : tensor<3x10x8xf32>
  %r = flash.attention ins(%q, %k, %v : tensor<3x10x16xf32>, tensor<3x12x16xf32>, tensor<3x12x8xf32>)
         outs(%o : tensor<3x10x8xf32>) captures(%bias : tensor<10x12xf32>)
         scale(0.25) mask(causal, bottom_right) {tiling = "for"}
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<10x12xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<10x12xf32>
           %s1 = arith.addf %s, %x : f32
           flash.yield %s1 : f32
         } -> tensor<3x10x8xf32>
  return %r : tensor<3x10x8xf32>
}

// -----

func.func @tiled_twice(%q: tensor<2x6x10x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x8xf32>,
                       %bias: tensor<10x12xf32>, %slopes: tensor<6xf32>) -> (tensor<2x6x10x8xf32>, tensor<2x6x10xf32>) {
  %o = tensor.empty() : tensor<2x6x10x8xf32>
  %l = tensor.empty() : tensor<2x6x10xf32>
  %r:2 = flash.attention ins(%q, %k, %v : tensor<2x6x10x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x8xf32>)
         outs(%o, %l : tensor<2x6x10x8xf32>, tensor<2x6x10xf32>) captures(%bias, %slopes : tensor<10x12xf32>, tensor<6xf32>)
         scale(0.25) mask(causal, bottom_right) {tiling = "twice"}
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bt: tensor<10x12xf32>, %st: tensor<6xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<10x12xf32>
           %slope = tensor.extract %st[%h] : tensor<6xf32>
           %s1 = arith.addf %s, %x : f32
           %s2 = arith.mulf %s1, %slope : f32
           flash.yield %s2 : f32
         } -> tensor<2x6x10x8xf32>, tensor<2x6x10xf32>
  return %r#0, %r#1 : tensor<2x6x10x8xf32>, tensor<2x6x10xf32>
}

// -----

// TWIN: arg0=shape=2x10x16 arg1=shape=2x12x16 arg2=shape=2x12x8 ret0=shape=2x10x8 ret1=shape=2x10
func.func @dynamic_lengths(%q: tensor<2x?x16xf32>, %k: tensor<2x?x16xf32>, %v: tensor<2x?x8xf32>,
                           %bias: tensor<10x12xf32>) -> (tensor<2x?x8xf32>, tensor<2x?xf32>) {
  %c1 = arith.constant 1 : index
  %lq = tensor.dim %q, %c1 : tensor<2x?x16xf32>
  %o = tensor.empty(%lq) : tensor<2x?x8xf32>
  %l = tensor.empty(%lq) : tensor<2x?xf32>
  %r:2 = flash.attention ins(%q, %k, %v : tensor<2x?x16xf32>, tensor<2x?x16xf32>, tensor<2x?x8xf32>)
         outs(%o, %l : tensor<2x?x8xf32>, tensor<2x?xf32>) captures(%bias : tensor<10x12xf32>)
         scale(0.25) mask(causal, bottom_right) {tiling = "dynamic"}
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bt: tensor<10x12xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<10x12xf32>
           %s1 = arith.addf %s, %x : f32
           flash.yield %s1 : f32
         } -> tensor<2x?x8xf32>, tensor<2x?xf32>
  return %r#0, %r#1 : tensor<2x?x8xf32>, tensor<2x?xf32>
}
