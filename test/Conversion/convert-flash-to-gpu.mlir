// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu -verify-diagnostics | FileCheck %s

// Causal, GQA 2:1, Lq != Lk, bf16, D = Dv = 64: by default one consumer
// warpgroup of 64 rows and two CTAs per SM.
// CHECK-LABEL: func.func @causal_gqa
// CHECK-SAME: %[[STREAM:[a-z0-9]+]]: !llvm.ptr {flash.stream}
// CHECK: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<1x64x64xbf16, 3>, swizzle = swizzle_128b
// CHECK-COUNT-2: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<1x128x64xbf16, 3>, swizzle = swizzle_128b
// CHECK: %[[TOK:.+]] = builtin.unrealized_conversion_cast %[[STREAM]] : !llvm.ptr to !gpu.async.token
// CHECK: gpu.launch_func async [%[[TOK]]] @flash_attention_0::@kernel blocks in
// CHECK-SAME: threads in (%c256
// CHECK-NOT: bufferization.materialize_in_destination
// CHECK: return
// CHECK: gpu.module @flash_attention_0
// CHECK: llvm.mlir.global external @flash_smem() {addr_space = 3 : i32, alignment = 1024 : i64}
// CHECK: gpu.func @kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index) kernel
// CHECK-SAME: nvvm.maxntid = array<i32: 256, 1, 1>, nvvm.minctasm = 2 : i32
// CHECK: nvvm.mbarrier.init
// CHECK: nvvm.setmaxregister decrease 24
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: nvvm.setmaxregister increase 232
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// CHECK: llvm.nvvm.ex2.approx.ftz.f32
// CHECK: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// CHECK: nvvm.mbarrier.arrive
func.func @causal_gqa(%q: memref<2x4x100x64xbf16>, %k: memref<2x2x70x64xbf16>,
                      %v: memref<2x2x70x64xbf16>, %o: memref<2x4x100x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x100x64xbf16> to tensor<2x4x100x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x100x64xbf16> to tensor<2x4x100x64xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<2x4x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x64xbf16>)
         outs(%ot : tensor<2x4x100x64xbf16>) scale(0.125) mask(causal, bottom_right) -> tensor<2x4x100x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x4x100x64xbf16>, memref<2x4x100x64xbf16>) -> ()
  return
}

// -----

// f16, D = 128 != Dv = 64, dynamic lengths, bias score_mod and LSE. The bias
// is read per score along the keys (prefetched, predicated), and the key
// tile stays 128 wide.
// CHECK-LABEL: func.func @bias_lse
// CHECK-SAME: %[[STREAM:[a-z0-9]+]]: !llvm.ptr {flash.stream}
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%{{.*}}, %{{.*}}, %{{.*}}] : memref<*xf16>
// CHECK: gpu.launch_func async
// CHECK-SAME: %{{.*}} : memref<?x?xf32>)
// CHECK: gpu.func @kernel({{.*}}, %[[BIAS:[a-z0-9]+]]: memref<?x?xf32>) kernel
// CHECK-COUNT-8: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, {{.*}}], A[<f16>
// CHECK: memref.extract_strided_metadata %[[BIAS]]
// CHECK: llvm.inline_asm {{.*}}ld.global.nc.b32
// CHECK: llvm.nvvm.lg2.approx.f
func.func @bias_lse(%q: memref<3x?x128xf16>, %k: memref<3x?x128xf16>, %v: memref<3x?x64xf16>,
                    %o: memref<3x?x64xf16>, %lse: memref<3x?xf32>, %bias: memref<?x?xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<3x?x128xf16> to tensor<3x?x128xf16>
  %kt = bufferization.to_tensor %k restrict : memref<3x?x128xf16> to tensor<3x?x128xf16>
  %vt = bufferization.to_tensor %v restrict : memref<3x?x64xf16> to tensor<3x?x64xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x?x64xf16> to tensor<3x?x64xf16>
  %lt = bufferization.to_tensor %lse restrict writable : memref<3x?xf32> to tensor<3x?xf32>
  %bt = bufferization.to_tensor %bias restrict : memref<?x?xf32> to tensor<?x?xf32>
  %r:2 = flash.attention ins(%qt, %kt, %vt : tensor<3x?x128xf16>, tensor<3x?x128xf16>, tensor<3x?x64xf16>)
           outs(%ot, %lt : tensor<3x?x64xf16>, tensor<3x?xf32>)
           captures(%bt : tensor<?x?xf32>) scale(0.0883883)
           score_mod {
           ^bb0(%s: f32, %b: index, %i: index, %j: index, %bb: tensor<?x?xf32>):
             %x = tensor.extract %bb[%i, %j] : tensor<?x?xf32>
             %y = arith.addf %s, %x : f32
             flash.yield %y : f32
           } -> tensor<3x?x64xf16>, tensor<3x?xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<3x?x64xf16>, memref<3x?x64xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<3x?xf32>, memref<3x?xf32>) -> ()
  return
}

// -----

func.func @not_dps(%q: tensor<4x64xbf16>, %o: memref<4x64xbf16>) {
  %ot = bufferization.to_tensor %o restrict writable : memref<4x64xbf16> to tensor<4x64xbf16>
  // expected-error @+1 {{convert-flash-to-gpu: query must be a bufferization.to_tensor of a device memref}}
  %r = flash.attention ins(%q, %q, %q : tensor<4x64xbf16>, tensor<4x64xbf16>, tensor<4x64xbf16>)
         outs(%ot : tensor<4x64xbf16>) scale(0.125) -> tensor<4x64xbf16>
  return
}

