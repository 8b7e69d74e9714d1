// The wgmma kernel stages a capture read as cap[..., q_idx, kv_idx] in
// shared memory: the host describes it to TMA (boxes of the CTA's rows by
// one 128-byte panel of keys, 128-byte swizzle), the producer loads each
// K/V tile's panels into the ring slot beside K and V under the same full
// barrier, and a consumer thread reads its scores' element pairs there at
// immediate offsets (ld.shared.v2.b16), not from global memory.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="block-n=64" | FileCheck %s --check-prefix=BN64
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="stage-captures=0" | FileCheck %s --check-prefix=OFF
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="persistent=1 q-buffers=0" | FileCheck %s --check-prefix=PERS

// The persistent grid's second Q buffer where it fits (q-buffers=0) gives way
// to staged tiles:
// the bf16 bias's slots (2 · 48 KiB beside 8 KiB of Q, two CTAs per SM) leave
// no room for it; the f32 bias's tiles fit neither way, so it keeps the second
// buffer and reads the bias from global memory.
// PERS-LABEL: func.func @bias(
// PERS: dynamic_shared_memory_size %c107576_i32
// PERS: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c49152_i32
// PERS-LABEL: func.func @heads(
// PERS: dynamic_shared_memory_size %c83024_i32
// PERS: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32

// A bf16 [Lq, Lk] bias at D = 64 (64-row blocks): K, V and two 64-key
// panels of 64 bias rows per slot, 16 KiB each.
// CHECK-LABEL: func.func @bias(
// CHECK: nvgpu.tma.create.descriptor {{.*}} : memref<*xbf16> -> <tensor = memref<64x64xbf16, 3>, swizzle = swizzle_128b
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel({{.*}}, %[[BIAS:[a-z0-9]+]]: memref<300x200xbf16>, %[[MAP:[a-z0-9]+]]: !llvm.ptr)
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c49152_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]], %{{.*}}, box[%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] :
// CHECK: %[[K1:.*]] = arith.addi %{{.*}}, %c64{{(_[0-9]+)?}} : index
// CHECK: %[[P1:.*]] = arith.index_cast %[[K1]] : index to i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]], %{{.*}}, box[%[[P1]], %{{[a-z0-9_]+}}] :
// CHECK-NOT: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]]
// CHECK-NOT: memref.load %[[BIAS]]
// CHECK-NOT: ld.global.nc
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> bf16
// CHECK-NOT: memref.load %[[BIAS]]
// CHECK-NOT: ld.global.nc
// CHECK: gpu.return
// OFF-LABEL: gpu.module @flash_attention_0
// OFF: gpu.func @kernel({{.*}}, %{{[a-z0-9]+}}: memref<300x200xbf16>)
// OFF: ld.global.nc.b16
// PTX-LABEL: llvm.func @bias(
// PTX: gpu.binary @flash_attention_0
// PTX-NOT: ld.global.nc
// PTX-SAME: ld.shared.v2.b16 {{.*}}{%rs{{[0-9]+}}, %rs{{[0-9]+}}}, [%rd{{[0-9]+}}+{{[0-9]+}}];
func.func @bias(%q: memref<2x300x64xbf16>, %k: memref<2x200x64xbf16>, %v: memref<2x200x64xbf16>,
                %o: memref<2x300x64xbf16>, %bias: memref<300x200xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %bt = bufferization.to_tensor %bias restrict : memref<300x200xbf16> to tensor<300x200xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x300x64xbf16>, tensor<2x200x64xbf16>, tensor<2x200x64xbf16>)
         outs(%ot : tensor<2x300x64xbf16>) captures(%bt : tensor<300x200xbf16>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %bb: tensor<300x200xbf16>):
           %x = tensor.extract %bb[%i, %j] : tensor<300x200xbf16>
           %w = arith.extf %x : bf16 to f32
           %y = arith.addf %s, %w : f32
           flash.yield %y : f32
         } -> tensor<2x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x300x64xbf16>, memref<2x300x64xbf16>) -> ()
  return
}

// -----

// An f32 [H, Lq, Lk] bias read at the head index: four 32-key panels per
// 128-key tile would not fit two CTAs per SM at D = 64 (read from global
// memory); at 64-key tiles two panels do, and the head is the box's third
// coordinate.
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel({{.*}}, %{{[a-z0-9]+}}: memref<4x300x200xf32>)
// CHECK: ld.global.nc.b32
// BN64-LABEL: func.func @heads(
// BN64: nvgpu.tma.create.descriptor {{.*}} : memref<*xf32> -> <tensor = memref<1x64x32xf32, 3>, swizzle = swizzle_128b
// BN64-LABEL: gpu.module @flash_attention_0
// BN64: gpu.func @kernel({{.*}}, %{{[a-z0-9]+}}: memref<4x300x200xf32>, %[[MAP:[a-z0-9]+]]: !llvm.ptr)
// BN64: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32
// BN64: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]], %{{.*}}, box[%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] :
// BN64: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]], %{{.*}}, box[%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] :
// BN64-NOT: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]]
// BN64: llvm.load {{.*}} : !llvm.ptr<3> -> f32
func.func @heads(%q: memref<2x4x300x64xbf16>, %k: memref<2x4x200x64xbf16>, %v: memref<2x4x200x64xbf16>,
                 %o: memref<2x4x300x64xbf16>, %bias: memref<4x300x200xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x4x200x64xbf16> to tensor<2x4x200x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x300x64xbf16> to tensor<2x4x300x64xbf16>
  %bt = bufferization.to_tensor %bias restrict : memref<4x300x200xf32> to tensor<4x300x200xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x300x64xbf16>, tensor<2x4x200x64xbf16>, tensor<2x4x200x64xbf16>)
         outs(%ot : tensor<2x4x300x64xbf16>) captures(%bt : tensor<4x300x200xf32>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %bb: tensor<4x300x200xf32>):
           %x = tensor.extract %bb[%h, %i, %j] : tensor<4x300x200xf32>
           %y = arith.addf %s, %x : f32
           flash.yield %y : f32
         } -> tensor<2x4x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x300x64xbf16>, memref<2x4x300x64xbf16>) -> ()
  return
}

// -----

// Read from global memory: rows of 402 and 200 bytes (TMA strides are
// multiples of 16 bytes), and a transposed read.
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel({{.*}}: memref<300x201xbf16>, %{{[a-z0-9]+}}: memref<200x300xf32>, %{{[a-z0-9]+}}: memref<300x200xi1>)
// CHECK: ld.global.nc.b16
func.func @unstaged(%q: memref<2x300x64xbf16>, %k: memref<2x200x64xbf16>, %v: memref<2x200x64xbf16>,
                    %o: memref<2x300x64xbf16>, %odd: memref<300x201xbf16>, %tr: memref<200x300xf32>,
                    %mask: memref<300x200xi1>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x200x64xbf16> to tensor<2x200x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %dt = bufferization.to_tensor %odd restrict : memref<300x201xbf16> to tensor<300x201xbf16>
  %tt = bufferization.to_tensor %tr restrict : memref<200x300xf32> to tensor<200x300xf32>
  %mt = bufferization.to_tensor %mask restrict : memref<300x200xi1> to tensor<300x200xi1>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x300x64xbf16>, tensor<2x200x64xbf16>, tensor<2x200x64xbf16>)
         outs(%ot : tensor<2x300x64xbf16>)
         captures(%dt, %tt, %mt : tensor<300x201xbf16>, tensor<200x300xf32>, tensor<300x200xi1>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %d: tensor<300x201xbf16>,
              %t: tensor<200x300xf32>, %m: tensor<300x200xi1>):
           %x = tensor.extract %d[%i, %j] : tensor<300x201xbf16>
           %w = arith.extf %x : bf16 to f32
           %u = tensor.extract %t[%j, %i] : tensor<200x300xf32>
           %y = arith.addf %s, %w : f32
           %z = arith.addf %y, %u : f32
           %keep = tensor.extract %m[%i, %j] : tensor<300x200xi1>
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %keep, %z, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x300x64xbf16>, memref<2x300x64xbf16>) -> ()
  return
}

// -----

// A boolean mask is staged as bytes: NVGPU's descriptor lowering has no
// 1-bit type, so the host calls the runtime's encoder with UINT8 (data type
// 0) itself; one 128-key panel per tile.
// CHECK-LABEL: func.func @mask(
// CHECK: %[[D:.*]] = builtin.unrealized_conversion_cast %{{.*}} : memref<*xi1> to !llvm.struct<(i64, ptr)>
// CHECK: llvm.call @mgpuTensorMapEncodeTiledMemref(%{{[0-9]+}}, %{{[0-9]+}}, %c0_i64{{(_[0-9]+)?}}, %c0_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}, %c3_i64{{(_[0-9]+)?}}, %c0_i64{{(_[0-9]+)?}}, %{{[0-9]+}})
// CHECK-LABEL: gpu.module @flash_attention_0
// CHECK: gpu.func @kernel({{.*}}, %{{[a-z0-9]+}}: memref<300x208xi1>, %[[MAP:[a-z0-9]+]]: !llvm.ptr)
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c40960_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]], %{{.*}}, box[%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}] :
// CHECK-NOT: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MAP]]
// CHECK: llvm.load {{.*}} {alignment = 2 : i64} : !llvm.ptr<3> -> i8
// CHECK-NOT: ld.global.nc
// CHECK: gpu.return
func.func @mask(%q: memref<2x300x64xbf16>, %k: memref<2x208x64xbf16>, %v: memref<2x208x64xbf16>,
                %o: memref<2x300x64xbf16>, %mask: memref<300x208xi1>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x208x64xbf16> to tensor<2x208x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x208x64xbf16> to tensor<2x208x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x300x64xbf16> to tensor<2x300x64xbf16>
  %mt = bufferization.to_tensor %mask restrict : memref<300x208xi1> to tensor<300x208xi1>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x300x64xbf16>, tensor<2x208x64xbf16>, tensor<2x208x64xbf16>)
         outs(%ot : tensor<2x300x64xbf16>) captures(%mt : tensor<300x208xi1>) scale(0.125)
         score_mod {
         ^bb0(%s: f32, %b: index, %i: index, %j: index, %m: tensor<300x208xi1>):
           %keep = tensor.extract %m[%i, %j] : tensor<300x208xi1>
           %ninf = arith.constant 0xFF800000 : f32
           %r = arith.select %keep, %s, %ninf : f32
           flash.yield %r : f32
         } -> tensor<2x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x300x64xbf16>, memref<2x300x64xbf16>) -> ()
  return
}
