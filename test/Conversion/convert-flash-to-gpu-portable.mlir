// What the wgmma kernel does not take goes to the portable kernel (kernel=auto),
// is refused with kernel=wgmma, and other chips get the portable kernel only.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=wgmma -o /dev/null 2>&1 | FileCheck %s --check-prefix=WGMMA
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="chip=sm_80 kernel=portable" | FileCheck %s --check-prefix=SM80
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="chip=sm_80 kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=NOWGMMA
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="chip=gfx942" 2>&1 | FileCheck %s --check-prefix=BADCHIP
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=fast" 2>&1 | FileCheck %s --check-prefix=BADKERNEL

// WGMMA: error: 'flash.attention' op convert-flash-to-gpu: head dims must be multiples of 8 up to 256, got D = 96, Dv = 36
// WGMMA: error: 'flash.attention' op convert-flash-to-gpu: element type 'f32' is not supported (bf16 or f16)
// NOWGMMA: the wgmma kernel needs chip sm_90a, got 'sm_80'
// BADCHIP: chip 'gfx942' is not an NVIDIA chip this lowering knows
// BADKERNEL: kernel must be auto, splitkv, wgmma, mma or portable, got 'fast'

// Head dims 96 / 36 (Dv not a multiple of 8: no mma kernel either), GQA 4:2, bottom-right causal, a bias capture and the LSE.
// CHECK-LABEL: func.func @odd_head_dims
// CHECK-SAME: %[[STREAM:.*]]: !llvm.ptr {flash.stream}
// CHECK: %[[Q:.*]] = memref.cast %{{.*}} : memref<8x100x96xbf16> to memref<?x?x96xbf16>
// CHECK: %[[LSE:.*]] = memref.cast %{{.*}} : memref<8x100xf32> to memref<?x?xf32>
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel
// CHECK-SAME: dynamic_shared_memory_size %c0_i32
// CHECK-SAME: args(%[[Q]] : memref<?x?x96xbf16>, %{{.*}} : memref<?x?x96xbf16>, %{{.*}} : memref<?x?x36xbf16>, %{{.*}} : memref<?x?x36xbf16>, %[[LSE]] : memref<?x?xf32>, %{{.*}} : index, %{{.*}} : index, %{{.*}} : index, %{{.*}} : memref<100x70xf32>)
// CHECK-NOT: bufferization.materialize_in_destination
// CHECK: gpu.func @kernel(
// K and V tiles of 32 keys (f32) in shared memory, the query row, the
// accumulator and the tile's scores private to the thread.
// CHECK-SAME: workgroup(%[[KT:.*]] : memref<32x96xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[VT:.*]] : memref<32x36xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME: private(%{{.*}} : memref<96xf32, #gpu.address_space<private>>, %{{.*}} : memref<36xf32, #gpu.address_space<private>>, %{{.*}} : memref<32xf32, #gpu.address_space<private>>)
// CHECK-SAME: kernel attributes {nvvm.maxntid = array<i32: 128, 1, 1>}
// CHECK: scf.for
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[KT]]
// CHECK: memref.store %{{.*}}, %[[VT]]
// CHECK: gpu.barrier
// The score_mod's capture read becomes a load of the bias memref.
// CHECK: memref.load %{{.*}} : memref<100x70xf32>
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK-NOT: nvvm.wgmma
// SM80-LABEL: func.func @odd_head_dims
// SM80: gpu.func @kernel(
// SM80-SAME: workgroup(
func.func @odd_head_dims(%q: memref<2x4x100x96xbf16>, %k: memref<2x2x70x96xbf16>,
                         %v: memref<2x2x70x36xbf16>, %o: memref<2x4x100x36xbf16>,
                         %lse: memref<2x4x100xf32>, %bias: memref<100x70xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x100x96xbf16> to tensor<2x4x100x96xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x70x96xbf16> to tensor<2x2x70x96xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x70x36xbf16> to tensor<2x2x70x36xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x100x36xbf16> to tensor<2x4x100x36xbf16>
  %lt = bufferization.to_tensor %lse restrict writable : memref<2x4x100xf32> to tensor<2x4x100xf32>
  %bt = bufferization.to_tensor %bias restrict : memref<100x70xf32> to tensor<100x70xf32>
  %r:2 = flash.attention ins(%qt, %kt, %vt : tensor<2x4x100x96xbf16>, tensor<2x2x70x96xbf16>, tensor<2x2x70x36xbf16>)
      outs(%ot, %lt : tensor<2x4x100x36xbf16>, tensor<2x4x100xf32>) captures(%bt : tensor<100x70xf32>)
      scale(0.1) mask(causal, bottom_right) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<100x70xf32>):
    %e = tensor.extract %x[%i, %j] : tensor<100x70xf32>
    %a = arith.addf %s, %e : f32
    flash.yield %a : f32
  } -> tensor<2x4x100x36xbf16>, tensor<2x4x100xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<2x4x100x36xbf16>, memref<2x4x100x36xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<2x4x100xf32>, memref<2x4x100xf32>) -> ()
  return
}

// -----

// f32 without batch dims: rank-2 views get a unit batch dim; the output is
// stored as f32 without rounding.
// CHECK-LABEL: func.func @f32_no_batch
// CHECK: memref.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [1, 33, 64] : memref<33x64xf32> into memref<1x33x64xf32>
// CHECK: gpu.func @kernel(%{{.*}}: memref<?x?x64xf32>
// CHECK-SAME: workgroup(%{{.*}} : memref<64x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<64x64xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-NOT: arith.truncf
// CHECK: gpu.return
func.func @f32_no_batch(%q: memref<33x64xf32>, %k: memref<50x64xf32>, %v: memref<50x64xf32>,
                        %o: memref<33x64xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<33x64xf32> to tensor<33x64xf32>
  %kt = bufferization.to_tensor %k restrict : memref<50x64xf32> to tensor<50x64xf32>
  %vt = bufferization.to_tensor %v restrict : memref<50x64xf32> to tensor<50x64xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<33x64xf32> to tensor<33x64xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<33x64xf32>, tensor<50x64xf32>, tensor<50x64xf32>)
         outs(%ot : tensor<33x64xf32>) scale(0.125) -> tensor<33x64xf32>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<33x64xf32>, memref<33x64xf32>) -> ()
  return
}

