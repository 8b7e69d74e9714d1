// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="persistent=0" | FileCheck %s --check-prefix=OFF

// persistent=-1 (the default) makes the wgmma prefill a persistent grid where
// the work items are short and many: static shapes whose query rows see at
// most 1024 keys on average (under a score_mod that masks by its indices
// alone: blocks that walk at most 3072 keys on average, from the
// classification of their tiles), and at least two items per resident CTA of
// a 132-SM part. The grid is then min(items, SMs x CTAs per SM) and the kernel
// takes the runtime's work counters.

// 1024 keys, no mask, 8 x 128 = 1024 items of 128 rows.
// CHECK-LABEL: func.func @short_keys
// CHECK: func.call @flashRuntimeMultiprocessorCount()
// CHECK: func.call @flashRuntimeSplitCounters(
// CHECK: gpu.launch_func
// OFF-LABEL: func.func @short_keys
// OFF-NOT: flashRuntimeMultiprocessorCount
// OFF: gpu.launch_func
func.func @short_keys(%q: memref<8x16x1024x128xbf16>, %k: memref<8x16x1024x128xbf16>,
                      %v: memref<8x16x1024x128xbf16>, %o: memref<8x16x1024x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>)
         outs(%ot : tensor<8x16x1024x128xbf16>) scale(0.088388) -> tensor<8x16x1024x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<8x16x1024x128xbf16>, memref<8x16x1024x128xbf16>) -> ()
  return
}

// -----

// Causal over 2000 keys: 1000.5 keys per row on average.
// CHECK-LABEL: func.func @causal_2000
// CHECK: func.call @flashRuntimeMultiprocessorCount()
// CHECK: gpu.launch_func
func.func @causal_2000(%q: memref<4x16x2000x64xbf16>, %k: memref<4x16x2000x64xbf16>,
                       %v: memref<4x16x2000x64xbf16>, %o: memref<4x16x2000x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<4x16x2000x64xbf16> to tensor<4x16x2000x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<4x16x2000x64xbf16> to tensor<4x16x2000x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<4x16x2000x64xbf16> to tensor<4x16x2000x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<4x16x2000x64xbf16> to tensor<4x16x2000x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<4x16x2000x64xbf16>, tensor<4x16x2000x64xbf16>, tensor<4x16x2000x64xbf16>)
         outs(%ot : tensor<4x16x2000x64xbf16>) scale(0.125) mask(causal) -> tensor<4x16x2000x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<4x16x2000x64xbf16>, memref<4x16x2000x64xbf16>) -> ()
  return
}

// -----

// Causal over 2100 keys: 1050.5 on average, past the bound.
// CHECK-LABEL: func.func @causal_2100
// CHECK-NOT: flashRuntimeMultiprocessorCount
// CHECK: gpu.launch_func
func.func @causal_2100(%q: memref<4x16x2100x64xbf16>, %k: memref<4x16x2100x64xbf16>,
                       %v: memref<4x16x2100x64xbf16>, %o: memref<4x16x2100x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<4x16x2100x64xbf16> to tensor<4x16x2100x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<4x16x2100x64xbf16> to tensor<4x16x2100x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<4x16x2100x64xbf16> to tensor<4x16x2100x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<4x16x2100x64xbf16> to tensor<4x16x2100x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<4x16x2100x64xbf16>, tensor<4x16x2100x64xbf16>, tensor<4x16x2100x64xbf16>)
         outs(%ot : tensor<4x16x2100x64xbf16>) scale(0.125) mask(causal) -> tensor<4x16x2100x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<4x16x2100x64xbf16>, memref<4x16x2100x64xbf16>) -> ()
  return
}

// -----

// A sliding window of 512 keys over 8192: short rows, however long the keys.
// CHECK-LABEL: func.func @window
// CHECK: func.call @flashRuntimeMultiprocessorCount()
// CHECK: gpu.launch_func
func.func @window(%q: memref<2x16x8192x128xbf16>, %k: memref<2x16x8192x128xbf16>,
                  %v: memref<2x16x8192x128xbf16>, %o: memref<2x16x8192x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x16x8192x128xbf16>, tensor<2x16x8192x128xbf16>, tensor<2x16x8192x128xbf16>)
         outs(%ot : tensor<2x16x8192x128xbf16>) scale(0.088388) mask(sliding_window, 512) -> tensor<2x16x8192x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x16x8192x128xbf16>, memref<2x16x8192x128xbf16>) -> ()
  return
}

// -----

// 256 queries at the end of 4096 keys (bottom-right causal): ~3968 keys a row.
// CHECK-LABEL: func.func @bottom_right_long
// CHECK-NOT: flashRuntimeMultiprocessorCount
// CHECK: gpu.launch_func
func.func @bottom_right_long(%q: memref<16x16x256x128xbf16>, %k: memref<16x16x4096x128xbf16>,
                             %v: memref<16x16x4096x128xbf16>, %o: memref<16x16x256x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<16x16x256x128xbf16> to tensor<16x16x256x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<16x16x4096x128xbf16> to tensor<16x16x4096x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<16x16x4096x128xbf16> to tensor<16x16x4096x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<16x16x256x128xbf16> to tensor<16x16x256x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<16x16x256x128xbf16>, tensor<16x16x4096x128xbf16>, tensor<16x16x4096x128xbf16>)
         outs(%ot : tensor<16x16x256x128xbf16>) scale(0.088388) mask(causal, bottom_right) -> tensor<16x16x256x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<16x16x256x128xbf16>, memref<16x16x256x128xbf16>) -> ()
  return
}

// -----

// Short keys but few items (2 x 4 x 8 = 64 < 2 x 132): one CTA per item.
// CHECK-LABEL: func.func @few_items
// CHECK-NOT: flashRuntimeMultiprocessorCount
// CHECK: gpu.launch_func
func.func @few_items(%q: memref<2x4x1000x128xbf16>, %k: memref<2x4x1000x128xbf16>,
                     %v: memref<2x4x1000x128xbf16>, %o: memref<2x4x1000x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x1000x128xbf16> to tensor<2x4x1000x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x1000x128xbf16> to tensor<2x4x1000x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x1000x128xbf16> to tensor<2x4x1000x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x1000x128xbf16> to tensor<2x4x1000x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x1000x128xbf16>, tensor<2x4x1000x128xbf16>, tensor<2x4x1000x128xbf16>)
         outs(%ot : tensor<2x4x1000x128xbf16>) scale(0.088388) -> tensor<2x4x1000x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x1000x128xbf16>, memref<2x4x1000x128xbf16>) -> ()
  return
}

// -----

// Dynamic lengths: not known to be short.
// CHECK-LABEL: func.func @dynamic
// CHECK-NOT: flashRuntimeMultiprocessorCount
// CHECK: gpu.launch_func
func.func @dynamic(%q: memref<8x16x?x128xbf16>, %k: memref<8x16x?x128xbf16>,
                   %v: memref<8x16x?x128xbf16>, %o: memref<8x16x?x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<8x16x?x128xbf16> to tensor<8x16x?x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<8x16x?x128xbf16> to tensor<8x16x?x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<8x16x?x128xbf16> to tensor<8x16x?x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<8x16x?x128xbf16> to tensor<8x16x?x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<8x16x?x128xbf16>, tensor<8x16x?x128xbf16>, tensor<8x16x?x128xbf16>)
         outs(%ot : tensor<8x16x?x128xbf16>) scale(0.088388) -> tensor<8x16x?x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<8x16x?x128xbf16>, memref<8x16x?x128xbf16>) -> ()
  return
}

// -----

// A score_mod that is not a mask of the indices alone: not measured under the
// persistent grid, so not chosen.
// CHECK-LABEL: func.func @score_mod
// CHECK-NOT: flashRuntimeMultiprocessorCount
// CHECK: gpu.launch_func
func.func @score_mod(%q: memref<8x16x1024x128xbf16>, %k: memref<8x16x1024x128xbf16>,
                     %v: memref<8x16x1024x128xbf16>, %o: memref<8x16x1024x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<8x16x1024x128xbf16> to tensor<8x16x1024x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>, tensor<8x16x1024x128xbf16>)
         outs(%ot : tensor<8x16x1024x128xbf16>) scale(0.088388)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c = arith.constant 0.5 : f32
           %r = arith.mulf %s, %c : f32
           flash.yield %r : f32
         } -> tensor<8x16x1024x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<8x16x1024x128xbf16>, memref<8x16x1024x128xbf16>) -> ()
  return
}

// -----

// A mask of the indices alone, chunks of 512 keys: each 128-row block walks
// the 4 tiles of its chunk (the classification folded on constants).
// CHECK-LABEL: func.func @chunks_512
// CHECK: func.call @flashRuntimeMultiprocessorCount()
// CHECK: gpu.launch_func
func.func @chunks_512(%q: memref<2x16x8192x128xbf16>, %k: memref<2x16x8192x128xbf16>,
                  %v: memref<2x16x8192x128xbf16>, %o: memref<2x16x8192x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x16x8192x128xbf16>, tensor<2x16x8192x128xbf16>, tensor<2x16x8192x128xbf16>)
         outs(%ot : tensor<2x16x8192x128xbf16>) scale(0.088388)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c512 = arith.constant 512 : index
           %qc = arith.divsi %i, %c512 : index
           %kc = arith.divsi %j, %c512 : index
           %ok = arith.cmpi eq, %qc, %kc : index
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %ok, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x16x8192x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x16x8192x128xbf16>, memref<2x16x8192x128xbf16>) -> ()
  return
}

// -----

// |i - j| <= 1024: 17 tiles (2176 keys) a block, within the bound of 3072.
// CHECK-LABEL: func.func @local_1024
// CHECK: func.call @flashRuntimeMultiprocessorCount()
// CHECK: gpu.launch_func
func.func @local_1024(%q: memref<2x16x8192x128xbf16>, %k: memref<2x16x8192x128xbf16>,
                  %v: memref<2x16x8192x128xbf16>, %o: memref<2x16x8192x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x16x8192x128xbf16>, tensor<2x16x8192x128xbf16>, tensor<2x16x8192x128xbf16>)
         outs(%ot : tensor<2x16x8192x128xbf16>) scale(0.088388)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c1024 = arith.constant 1024 : index
           %d = arith.subi %i, %j : index
           %a = math.absi %d : index
           %ok = arith.cmpi sle, %a, %c1024 : index
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %ok, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x16x8192x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x16x8192x128xbf16>, memref<2x16x8192x128xbf16>) -> ()
  return
}

// -----

// Prefix-LM (the first 1024 keys, and causal): a block walks from tile 0 to
// its diagonal, ~4160 keys on average: past the bound.
// CHECK-LABEL: func.func @prefix_lm_1024
// CHECK-NOT: flashRuntimeMultiprocessorCount
// CHECK: gpu.launch_func
func.func @prefix_lm_1024(%q: memref<2x16x8192x128xbf16>, %k: memref<2x16x8192x128xbf16>,
                  %v: memref<2x16x8192x128xbf16>, %o: memref<2x16x8192x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x16x8192x128xbf16> to tensor<2x16x8192x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x16x8192x128xbf16>, tensor<2x16x8192x128xbf16>, tensor<2x16x8192x128xbf16>)
         outs(%ot : tensor<2x16x8192x128xbf16>) scale(0.088388)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c1024 = arith.constant 1024 : index
           %p = arith.cmpi slt, %j, %c1024 : index
           %c = arith.cmpi sle, %j, %i : index
           %ok = arith.ori %p, %c : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %ok, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x16x8192x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x16x8192x128xbf16>, memref<2x16x8192x128xbf16>) -> ()
  return
}

// -----

// The same prefix-LM over 1024 keys with a prefix of 256: ~576 keys a block.
// CHECK-LABEL: func.func @prefix_lm_short
// CHECK: func.call @flashRuntimeMultiprocessorCount()
// CHECK: gpu.launch_func
func.func @prefix_lm_short(%q: memref<4x16x1024x128xbf16>, %k: memref<4x16x1024x128xbf16>,
                           %v: memref<4x16x1024x128xbf16>, %o: memref<4x16x1024x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<4x16x1024x128xbf16> to tensor<4x16x1024x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<4x16x1024x128xbf16> to tensor<4x16x1024x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<4x16x1024x128xbf16> to tensor<4x16x1024x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<4x16x1024x128xbf16> to tensor<4x16x1024x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<4x16x1024x128xbf16>, tensor<4x16x1024x128xbf16>, tensor<4x16x1024x128xbf16>)
         outs(%ot : tensor<4x16x1024x128xbf16>) scale(0.088388)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c256 = arith.constant 256 : index
           %p = arith.cmpi slt, %j, %c256 : index
           %c = arith.cmpi sle, %j, %i : index
           %ok = arith.ori %p, %c : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %ok, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<4x16x1024x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<4x16x1024x128xbf16>, memref<4x16x1024x128xbf16>) -> ()
  return
}
