// The key tiles a GPU kernel's block visits under a mask of the indices
// alone, computed by the kernels' own walk (visibleTileRange, then
// trimHiddenTiles: bisections, and a step over the hidden run between the
// two sides of a disjunction) and run on the CPU: 64 query rows at q0,
// tiles of 64 keys; each line one visited tile, then "end". The expected
// tiles follow from the masks by hand.
// RUN: flash-opt %s --test-flash-tile-walk="block-rows=64 tile-rows=64" \
// RUN:   | mlir-opt --convert-scf-to-cf --convert-vector-to-llvm \
// RUN:       --convert-arith-to-llvm --convert-index-to-llvm --convert-func-to-llvm \
// RUN:       --convert-cf-to-llvm --reconcile-unrealized-casts \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_lib_dir/libmlir_c_runner_utils%shlibext \
// RUN:   | FileCheck %s --match-full-lines

// Sinks (j < 16) and a window of 128 keys ending 300 past the query.
func.func @sinks_window(%q: tensor<1x1x700x64xf32>, %k: tensor<1x1x1000x64xf32>,
                        %v: tensor<1x1x1000x64xf32>, %o: tensor<1x1x700x64xf32>)
    -> tensor<1x1x700x64xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<1x1x700x64xf32>, tensor<1x1x1000x64xf32>, tensor<1x1x1000x64xf32>)
         outs(%o : tensor<1x1x700x64xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c16 = arith.constant 16 : index
           %c128 = arith.constant 128 : index
           %c300 = arith.constant 300 : index
           %pos = arith.addi %i, %c300 : index
           %sink = arith.cmpi slt, %j, %c16 : index
           %past = arith.cmpi sle, %j, %pos : index
           %dist = arith.subi %pos, %j : index
           %near = arith.cmpi slt, %dist, %c128 : index
           %win = arith.andi %past, %near : i1
           %vis = arith.ori %sink, %win : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %vis, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<1x1x700x64xf32>
  return %r : tensor<1x1x700x64xf32>
}
func.func private @walk_sinks_window(index, index, index) attributes {flash.tile_walk_of = @sinks_window}

// The sinks reach into the window's first tile: one run, no gap.
func.func @wide_sinks(%q: tensor<1x1x700x64xf32>, %k: tensor<1x1x1000x64xf32>,
                      %v: tensor<1x1x1000x64xf32>, %o: tensor<1x1x700x64xf32>)
    -> tensor<1x1x700x64xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<1x1x700x64xf32>, tensor<1x1x1000x64xf32>, tensor<1x1x1000x64xf32>)
         outs(%o : tensor<1x1x700x64xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c150 = arith.constant 150 : index
           %c128 = arith.constant 128 : index
           %c300 = arith.constant 300 : index
           %pos = arith.addi %i, %c300 : index
           %sink = arith.cmpi slt, %j, %c150 : index
           %past = arith.cmpi sle, %j, %pos : index
           %dist = arith.subi %pos, %j : index
           %near = arith.cmpi slt, %dist, %c128 : index
           %win = arith.andi %past, %near : i1
           %vis = arith.ori %win, %sink : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %vis, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<1x1x700x64xf32>
  return %r : tensor<1x1x700x64xf32>
}
func.func private @walk_wide_sinks(index, index, index) attributes {flash.tile_walk_of = @wide_sinks}

// Decode against 4096 keys written negated, as Python's `~` traces it:
// not (past 64 sinks and 1024 or more keys back).
func.func @decode(%q: tensor<1x1x1x64xf32>, %k: tensor<1x1x4096x64xf32>,
                  %v: tensor<1x1x4096x64xf32>, %o: tensor<1x1x1x64xf32>)
    -> tensor<1x1x1x64xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<1x1x1x64xf32>, tensor<1x1x4096x64xf32>, tensor<1x1x4096x64xf32>)
         outs(%o : tensor<1x1x1x64xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c64 = arith.constant 64 : index
           %c1024 = arith.constant 1024 : index
           %c4095 = arith.constant 4095 : index
           %pos = arith.addi %i, %c4095 : index
           %later = arith.cmpi sge, %j, %c64 : index
           %dist = arith.subi %pos, %j : index
           %far = arith.cmpi sge, %dist, %c1024 : index
           %hidden = arith.andi %later, %far : i1
           %true = arith.constant true
           %vis = arith.xori %hidden, %true : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %vis, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<1x1x1x64xf32>
  return %r : tensor<1x1x1x64xf32>
}
func.func private @walk_decode(index, index, index) attributes {flash.tile_walk_of = @decode}

// Under a causal mask (the structured range first), sinks and 100 keys back.
func.func @causal_sinks(%q: tensor<1x1x700x64xf32>, %k: tensor<1x1x700x64xf32>,
                        %v: tensor<1x1x700x64xf32>, %o: tensor<1x1x700x64xf32>)
    -> tensor<1x1x700x64xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<1x1x700x64xf32>, tensor<1x1x700x64xf32>, tensor<1x1x700x64xf32>)
         outs(%o : tensor<1x1x700x64xf32>) scale(0.125) mask(causal)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c16 = arith.constant 16 : index
           %c100 = arith.constant 100 : index
           %sink = arith.cmpi slt, %j, %c16 : index
           %dist = arith.subi %i, %j : index
           %near = arith.cmpi slt, %dist, %c100 : index
           %vis = arith.ori %sink, %near : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %vis, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<1x1x700x64xf32>
  return %r : tensor<1x1x700x64xf32>
}
func.func private @walk_causal_sinks(index, index, index) attributes {flash.tile_walk_of = @causal_sinks}

// Both sides hide every key: an empty walk.
func.func @nothing(%q: tensor<1x1x700x64xf32>, %k: tensor<1x1x1000x64xf32>,
                   %v: tensor<1x1x1000x64xf32>, %o: tensor<1x1x700x64xf32>)
    -> tensor<1x1x700x64xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<1x1x700x64xf32>, tensor<1x1x1000x64xf32>, tensor<1x1x1000x64xf32>)
         outs(%o : tensor<1x1x700x64xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c0 = arith.constant 0 : index
           %c5000 = arith.constant 5000 : index
           %below = arith.cmpi slt, %j, %c0 : index
           %above = arith.cmpi sgt, %j, %c5000 : index
           %vis = arith.ori %below, %above : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %vis, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<1x1x700x64xf32>
  return %r : tensor<1x1x700x64xf32>
}
func.func private @walk_nothing(index, index, index) attributes {flash.tile_walk_of = @nothing}

// Chunks of 256, no disjunction: the two bisections alone.
func.func @chunked(%q: tensor<1x1x700x64xf32>, %k: tensor<1x1x1000x64xf32>,
                   %v: tensor<1x1x1000x64xf32>, %o: tensor<1x1x700x64xf32>)
    -> tensor<1x1x700x64xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<1x1x700x64xf32>, tensor<1x1x1000x64xf32>, tensor<1x1x1000x64xf32>)
         outs(%o : tensor<1x1x700x64xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c256 = arith.constant 256 : index
           %ci = arith.floordivsi %i, %c256 : index
           %cj = arith.floordivsi %j, %c256 : index
           %vis = arith.cmpi eq, %ci, %cj : index
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %vis, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<1x1x700x64xf32>
  return %r : tensor<1x1x700x64xf32>
}
func.func private @walk_chunked(index, index, index) attributes {flash.tile_walk_of = @chunked}

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c128 = arith.constant 128 : index
  %c256 = arith.constant 256 : index
  %c512 = arith.constant 512 : index
  %c640 = arith.constant 640 : index
  %c700 = arith.constant 700 : index
  %c1000 = arith.constant 1000 : index
  %c4096 = arith.constant 4096 : index
  // Rows 0-63 see keys 173-363 (tiles 2-5) and the sinks (tile 0).
  // CHECK: 0
  // CHECK-NEXT: 2
  // CHECK-NEXT: 3
  // CHECK-NEXT: 4
  // CHECK-NEXT: 5
  // CHECK-NEXT: end
  func.call @walk_sinks_window(%c0, %c700, %c1000) : (index, index, index) -> ()
  // Rows 512-575: keys 685-875, tiles 10-13.
  // CHECK-NEXT: 0
  // CHECK-NEXT: 10
  // CHECK-NEXT: 11
  // CHECK-NEXT: 12
  // CHECK-NEXT: 13
  // CHECK-NEXT: end
  func.call @walk_sinks_window(%c512, %c700, %c1000) : (index, index, index) -> ()
  // Rows 640-699: keys 813-999 (the window clipped by Lk), tiles 12-15.
  // CHECK-NEXT: 0
  // CHECK-NEXT: 12
  // CHECK-NEXT: 13
  // CHECK-NEXT: 14
  // CHECK-NEXT: 15
  // CHECK-NEXT: end
  func.call @walk_sinks_window(%c640, %c700, %c1000) : (index, index, index) -> ()
  // Sinks 0-149 (tiles 0-2) and keys 173-363 (tiles 2-5): one run.
  // CHECK-NEXT: 0
  // CHECK-NEXT: 1
  // CHECK-NEXT: 2
  // CHECK-NEXT: 3
  // CHECK-NEXT: 4
  // CHECK-NEXT: 5
  // CHECK-NEXT: end
  func.call @walk_wide_sinks(%c0, %c700, %c1000) : (index, index, index) -> ()
  // The last query of 4096 keys: the sinks' tile and keys 3072-4095.
  // CHECK-NEXT: 0
  // CHECK-NEXT: 48
  // CHECK-NEXT: 49
  // CHECK-NEXT: 50
  // CHECK-NEXT: 51
  // CHECK-NEXT: 52
  // CHECK-NEXT: 53
  // CHECK-NEXT: 54
  // CHECK-NEXT: 55
  // CHECK-NEXT: 56
  // CHECK-NEXT: 57
  // CHECK-NEXT: 58
  // CHECK-NEXT: 59
  // CHECK-NEXT: 60
  // CHECK-NEXT: 61
  // CHECK-NEXT: 62
  // CHECK-NEXT: 63
  // CHECK-NEXT: end
  func.call @walk_decode(%c0, %c1, %c4096) : (index, index, index) -> ()
  // Rows 512-575 under causal: keys up to 575 (tiles 0-8); 100 back from
  // row 512 is key 413 (tile 6).
  // CHECK-NEXT: 0
  // CHECK-NEXT: 6
  // CHECK-NEXT: 7
  // CHECK-NEXT: 8
  // CHECK-NEXT: end
  func.call @walk_causal_sinks(%c512, %c700, %c700) : (index, index, index) -> ()
  // Rows 128-191: keys up to 191 (tiles 0-2), the window from key 29.
  // CHECK-NEXT: 0
  // CHECK-NEXT: 1
  // CHECK-NEXT: 2
  // CHECK-NEXT: end
  func.call @walk_causal_sinks(%c128, %c700, %c700) : (index, index, index) -> ()
  // CHECK-NEXT: end
  func.call @walk_nothing(%c0, %c700, %c1000) : (index, index, index) -> ()
  // Rows 256-319 are chunk 1: keys 256-511, tiles 4-7.
  // CHECK-NEXT: 4
  // CHECK-NEXT: 5
  // CHECK-NEXT: 6
  // CHECK-NEXT: 7
  // CHECK-NEXT: end
  func.call @walk_chunked(%c256, %c700, %c1000) : (index, index, index) -> ()
  return
}
