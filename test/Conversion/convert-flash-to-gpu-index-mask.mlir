// A score_mod that masks by indices alone (here chunks of 64 keys, a bias
// added before the mask) sorts tiles on the GPU too: each kernel trims its
// key loop to the tiles from the first to the last the mask may show (two
// scf.while bisections before the loop), and the tensor-core kernels give a
// tile the mask shows whole the mask-free softmax with the bias alone.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=portable | FileCheck %s --check-prefix=PORT
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=mma | FileCheck %s --check-prefix=MMA
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=wgmma | FileCheck %s --check-prefix=WGMMA
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa kernel=mma" | FileCheck %s --check-prefix=PTX
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=splitkv 2>&1 | FileCheck %s --check-prefix=SPLIT

// PORT-LABEL: gpu.func @kernel(
// PORT: scf.while
// PORT: scf.condition
// PORT: arith.floordivsi
// PORT: scf.yield
// PORT: scf.while
// PORT: scf.condition
// PORT: arith.floordivsi
// PORT: scf.yield
// PORT: scf.for
// MMA-LABEL: gpu.func @kernel(
// MMA: scf.while
// MMA: scf.while
// MMA: scf.for
// MMA: nvvm.mma.sync
// The whole-tile branch: the bias read, no chunk compare.
// MMA: scf.if
// MMA: } else {
// MMA: llvm.inline_asm {{.*}}ld.global.nc.b32
// MMA-NOT: arith.floordivsi
// MMA: scf.yield
// WGMMA-LABEL: gpu.func @kernel(
// WGMMA: scf.while
// WGMMA: scf.while
// WGMMA: nvvm.wgmma.mma_async
// PTX-LABEL: llvm.func @chunked(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: .target sm_90a
// PTX-NOT: .local
func.func @chunked(%q: memref<2x4x300x64xbf16>, %k: memref<2x2x500x64xbf16>,
                   %v: memref<2x2x500x64xbf16>, %o: memref<2x4x300x64xbf16>,
                   %bias: memref<300x500xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x500x64xbf16> to tensor<2x2x500x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x500x64xbf16> to tensor<2x2x500x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %bt = bufferization.to_tensor %bias restrict : memref<300x500xf32> to tensor<300x500xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x300x64xbf16>, tensor<2x2x500x64xbf16>, tensor<2x2x500x64xbf16>)
         outs(%ot : tensor<2x4x300x64xbf16>) captures(%bt : tensor<300x500xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %c: tensor<300x500xf32>):
           %x = tensor.extract %c[%i, %j] : tensor<300x500xf32>
           %sb = arith.addf %s, %x : f32
           %c64 = arith.constant 64 : index
           %ci = arith.floordivsi %i, %c64 : index
           %cj = arith.floordivsi %j, %c64 : index
           %same = arith.cmpi eq, %ci, %cj : index
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %same, %sb, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x4x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x300x64xbf16>, memref<2x4x300x64xbf16>) -> ()
  return
}

// -----

// Decode (GQA 4, one query at the end of 4096 keys) with chunked attention:
// the split-KV kernel packs the 4 query heads of a K/V head into its rows,
// so it bounds the mask's batch indices by the block's head range, trims
// the key range to the query's chunk, and spreads its splits over the
// tiles left (the split's chunk is a share of the trimmed range, not of Lk).
// SPLIT-LABEL: func.func @chunked_decode(
// SPLIT: gpu.func @kernel(
// SPLIT: scf.while
// SPLIT: scf.while
// SPLIT: %[[LEFT:.*]] = arith.subi %{{.*}}#1, %{{.*}}#0 : index
// SPLIT: %[[VIS:.*]] = arith.maxsi %[[LEFT]]
// SPLIT: arith.ceildivsi %[[VIS]], %grid_dim_x
// SPLIT: scf.for
// SPLIT: nvvm.mma.sync
// SPLIT: gpu.func @combine(
// The wgmma kernel's decode form packs the heads the same way (rows
// [G·Lq] of a K/V head, query r mod Lq of head bh·G + r / Lq): it trims by
// the same head range, and each row's score_mod reads its own head, the
// padding rows past G·Lq the group's last.
// WGMMA-LABEL: func.func @chunked_decode(
// WGMMA: memref.expand_shape {{.*}} into memref<?x?x64xbf16>
// WGMMA: gpu.func @kernel(
// WGMMA-COUNT-2: scf.while
// WGMMA: arith.remui %[[R0:[0-9]+]], %[[QLEN:[0-9]+]] : index
// WGMMA-NEXT: arith.remui %[[R1:[0-9]+]], %[[QLEN]] : index
// WGMMA: %[[H0:.*]] = arith.divui %[[R0]], %[[QLEN]] : index
// WGMMA-NEXT: arith.minui %[[H0]], %c3{{[_0-9]*}} : index
// WGMMA: %[[H1:.*]] = arith.divui %[[R1]], %[[QLEN]] : index
// WGMMA-NEXT: arith.minui %[[H1]], %c3{{[_0-9]*}} : index
// WGMMA: nvvm.wgmma.mma_async
// WGMMA: gpu.func @combine(
func.func @chunked_decode(%q: memref<2x8x1x64xbf16>, %k: memref<2x2x4096x64xbf16>,
                          %v: memref<2x2x4096x64xbf16>, %o: memref<2x8x1x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x8x1x64xbf16> to tensor<2x8x1x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x4096x64xbf16> to tensor<2x2x4096x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x4096x64xbf16> to tensor<2x2x4096x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x8x1x64xbf16> to tensor<2x8x1x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x8x1x64xbf16>, tensor<2x2x4096x64xbf16>, tensor<2x2x4096x64xbf16>)
         outs(%ot : tensor<2x8x1x64xbf16>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c1024 = arith.constant 1024 : index
           %c4095 = arith.constant 4095 : index
           %pos = arith.addi %i, %c4095 : index
           %ci = arith.floordivsi %pos, %c1024 : index
           %cj = arith.floordivsi %j, %c1024 : index
           %same = arith.cmpi eq, %ci, %cj : index
           %past = arith.cmpi sge, %j, %h : index
           %vis = arith.andi %same, %past : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %vis, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x8x1x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x8x1x64xbf16>, memref<2x8x1x64xbf16>) -> ()
  return
}

// -----

// Sink keys plus a local window (StreamingLLM's pattern), written as a
// disjunction: the visible tiles of a block are the first and the few near
// its diagonal. Trimmed as a whole, the hidden middle would stay in the
// loop; each side of the `or` is trimmed alone (four bisections), and the
// loop steps over the gap between the two runs: step t is tile t before
// the gap's start, t + its length from there.
// PORT-LABEL: func.func @sinks_window(
// PORT: gpu.func @kernel(
// PORT-COUNT-4: scf.while
// PORT: %[[GAP:.*]] = arith.maxsi %{{.*}}, %c0{{[_0-9]*}} : index
// PORT: scf.for %[[STEP:.*]] = %{{.*}} to %{{.*}} step
// PORT: %[[PAST:.*]] = arith.cmpi sge, %[[STEP]], %{{.*}} : index
// PORT: %[[JUMP:.*]] = arith.select %[[PAST]], %[[GAP]], %{{.*}} : index
// PORT: %[[TILE:.*]] = arith.addi %[[STEP]], %[[JUMP]] : index
// PORT: arith.muli %[[TILE]], %{{.*}} : index
// MMA-LABEL: func.func @sinks_window(
// MMA: gpu.func @kernel(
// MMA-COUNT-4: scf.while
// MMA: scf.for %[[STEP:.*]] = %{{.*}} to %{{.*}} step
// MMA: %[[PAST:.*]] = arith.cmpi sge, %[[STEP]], %{{.*}} : index
// MMA: %[[JUMP:.*]] = arith.select %[[PAST]], %{{.*}}, %{{.*}} : index
// MMA: %[[TILE:.*]] = arith.addi %[[STEP]], %[[JUMP]] : index
// MMA: arith.muli %[[TILE]], %{{.*}} : index
// MMA: nvvm.mma.sync
// WGMMA-LABEL: func.func @sinks_window(
// WGMMA: gpu.func @kernel(
// WGMMA-COUNT-4: scf.while
// WGMMA: nvvm.wgmma.mma_async
// PTX-LABEL: llvm.func @sinks_window(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: .target sm_90a
// PTX-NOT: .local
func.func @sinks_window(%q: memref<2x4x300x64xbf16>, %k: memref<2x2x1000x64xbf16>,
                        %v: memref<2x2x1000x64xbf16>, %o: memref<2x4x300x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x1000x64xbf16> to tensor<2x2x1000x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x1000x64xbf16> to tensor<2x2x1000x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x300x64xbf16>, tensor<2x2x1000x64xbf16>, tensor<2x2x1000x64xbf16>)
         outs(%ot : tensor<2x4x300x64xbf16>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
           %c16 = arith.constant 16 : index
           %c128 = arith.constant 128 : index
           %c700 = arith.constant 700 : index
           %pos = arith.addi %i, %c700 : index
           %sink = arith.cmpi slt, %j, %c16 : index
           %past = arith.cmpi sle, %j, %pos : index
           %dist = arith.subi %pos, %j : index
           %near = arith.cmpi slt, %dist, %c128 : index
           %win = arith.andi %past, %near : i1
           %vis = arith.ori %sink, %win : i1
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %vis, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x4x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x300x64xbf16>, memref<2x4x300x64xbf16>) -> ()
  return
}

// -----

// The same pattern in decode, written with the mask negated (¬(a ∧ b) is
// a disjunction too): the split-KV kernel's splits divide the steps of the
// walk — the sink tiles and the window's, the gap's length taken off — and
// each step's tile jumps the gap for the copies and the scores alike.
// SPLIT-LABEL: func.func @sinks_window_decode(
// SPLIT: gpu.func @kernel(
// SPLIT-COUNT-4: scf.while
// SPLIT: %[[GAP:.*]] = arith.maxsi %{{.*}}, %c0{{[_0-9]*}} : index
// SPLIT: %[[STEPEND:.*]] = arith.subi %{{.*}}, %[[GAP]] : index
// SPLIT: %[[WALKEND:.*]] = arith.maxsi %[[STEPEND]], %[[WALKBEGIN:.*]] : index
// SPLIT: %[[STEPS:.*]] = arith.subi %[[WALKEND]], %[[WALKBEGIN]] : index
// SPLIT: %[[VIS:.*]] = arith.maxsi %[[STEPS]]
// SPLIT: arith.ceildivsi %[[VIS]], %grid_dim_x
// SPLIT: arith.select %{{.*}}, %[[GAP]], %{{.*}} : index
// SPLIT: scf.for
// SPLIT: arith.select %{{.*}}, %[[GAP]], %{{.*}} : index
// SPLIT: nvvm.mma.sync
// SPLIT: gpu.func @combine(
func.func @sinks_window_decode(%q: memref<2x8x1x64xbf16>, %k: memref<2x2x4096x64xbf16>,
                               %v: memref<2x2x4096x64xbf16>, %o: memref<2x8x1x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x8x1x64xbf16> to tensor<2x8x1x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x4096x64xbf16> to tensor<2x2x4096x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x4096x64xbf16> to tensor<2x2x4096x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x8x1x64xbf16> to tensor<2x8x1x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x8x1x64xbf16>, tensor<2x2x4096x64xbf16>, tensor<2x2x4096x64xbf16>)
         outs(%ot : tensor<2x8x1x64xbf16>) scale(0.125)
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
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %hidden, %ninf, %s : f32
           flash.yield %r : f32
         } -> tensor<2x8x1x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x8x1x64xbf16>, memref<2x8x1x64xbf16>) -> ()
  return
}
