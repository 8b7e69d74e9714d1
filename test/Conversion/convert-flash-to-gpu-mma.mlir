// The mma.sync kernel (kernel=mma): sm_80 and newer, bf16/f16, D a multiple
// of 16 and Dv of 8.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=mma | FileCheck %s
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=mma chip=sm_75" 2>&1 | FileCheck %s --check-prefix=OLDCHIP
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="kernel=mma chip=sm_80 features=+ptx70 format=isa" | FileCheck %s --check-prefix=PTX

// OLDCHIP: the mma kernel needs sm_80 or newer, got 'sm_75'

// With kernel=auto on sm_90a the wgmma kernel takes these head dims too (its
// tiles are whole 64-column panels, TMA zero-fills the columns past D).
// AUTO-LABEL: func.func @odd_head_dims
// AUTO: gpu.func @kernel(
// AUTO: nvvm.wgmma.mma_async
// 50 query rows on 3 heads fill too few CTAs for a prefill kernel: the
// split-KV kernel (mma.sync) takes it.
// AUTO-LABEL: func.func @head_dim_256_f16
// AUTO: gpu.func @kernel(
// AUTO: nvvm.mma.sync

// Head dims 96 / 40, GQA 4:2, bottom-right causal, a bias capture and the LSE:
// 64 query rows per block of 4 warps, K/V tiles of 64 keys with rows padded
// by 8 elements; S is 8 key blocks × 6 k-steps of mma.sync, PV 5 × 4.
// CHECK-LABEL: func.func @odd_head_dims
// CHECK: %[[GX:.*]] = arith.ceildivsi %{{.*}}, %c64
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel blocks in (%[[GX]], %{{.*}}, %{{.*}}) threads in (%c128
// CHECK: gpu.func @kernel(
// CHECK-SAME: workgroup(%[[KT:.*]] : memref<64x104xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[VT:.*]] : memref<64x48xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-COUNT-68: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.return

// PTX-LABEL: llvm.func @odd_head_dims(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: .target sm_80
// PTX-NOT: __nv_
// PTX-NOT: .local
// PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-DAG: ldmatrix.sync.aligned.m8n8.x2.shared.b16
// PTX-DAG: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// PTX-DAG: ld.global.v4
// PTX-DAG: st.shared.v4
// PTX-DAG: .shared .align 16
// PTX-DAG: shfl.sync.bfly.b32
// PTX-DAG: ex2.approx.ftz.f32
// PTX-DAG: lg2.approx.f32
func.func @odd_head_dims(%q: memref<2x4x100x96xbf16>, %k: memref<2x2x70x96xbf16>,
                         %v: memref<2x2x70x40xbf16>, %o: memref<2x4x100x40xbf16>,
                         %lse: memref<2x4x100xf32>, %bias: memref<100x70xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x100x96xbf16> to tensor<2x4x100x96xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x70x96xbf16> to tensor<2x2x70x96xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x70x40xbf16> to tensor<2x2x70x40xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x100x40xbf16> to tensor<2x4x100x40xbf16>
  %lt = bufferization.to_tensor %lse restrict writable : memref<2x4x100xf32> to tensor<2x4x100xf32>
  %bt = bufferization.to_tensor %bias restrict : memref<100x70xf32> to tensor<100x70xf32>
  %r:2 = flash.attention ins(%qt, %kt, %vt : tensor<2x4x100x96xbf16>, tensor<2x2x70x96xbf16>, tensor<2x2x70x40xbf16>)
      outs(%ot, %lt : tensor<2x4x100x40xbf16>, tensor<2x4x100xf32>) captures(%bt : tensor<100x70xf32>)
      scale(0.1) mask(causal, bottom_right) score_mod {
  ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %x: tensor<100x70xf32>):
    %e = tensor.extract %x[%i, %j] : tensor<100x70xf32>
    %a = arith.addf %s, %e : f32
    flash.yield %a : f32
  } -> tensor<2x4x100x40xbf16>, tensor<2x4x100xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<2x4x100x40xbf16>, memref<2x4x100x40xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<2x4x100xf32>, memref<2x4x100xf32>) -> ()
  return
}

// -----

// D = 256: tiles of 32 keys keep K and V within static shared memory.
// CHECK-LABEL: func.func @head_dim_256_f16
// CHECK: gpu.func @kernel(
// CHECK-SAME: workgroup(%{{.*}} : memref<32x264xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %{{.*}} : memref<32x264xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-COUNT-128: nvvm.mma.sync
// PTX-LABEL: llvm.func @head_dim_256_f16(
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
func.func @head_dim_256_f16(%q: memref<3x50x256xf16>, %k: memref<3x77x256xf16>,
                            %v: memref<3x77x256xf16>, %o: memref<3x50x256xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<3x50x256xf16> to tensor<3x50x256xf16>
  %kt = bufferization.to_tensor %k restrict : memref<3x77x256xf16> to tensor<3x77x256xf16>
  %vt = bufferization.to_tensor %v restrict : memref<3x77x256xf16> to tensor<3x77x256xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x50x256xf16> to tensor<3x50x256xf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<3x50x256xf16>, tensor<3x77x256xf16>, tensor<3x77x256xf16>)
         outs(%ot : tensor<3x50x256xf16>) scale(0.0625) -> tensor<3x50x256xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<3x50x256xf16>, memref<3x50x256xf16>) -> ()
  return
}
