// flash.attention_grad with a score_mod on the GPU: both key-block kernels
// inline the region and its derivative per score, read the captures from
// their buffers, and add each float capture's gradient into an f32
// accumulator zeroed on the stream — the bf16 bias's a side buffer rounded
// into it by `round` after the key blocks, the f32 slopes' their destination.
// The per-(head, query, key) bias takes one atomic per score; the per-head
// slope is summed over the warp first.
// RUN: flash-opt %s -flash-attention-into-destination -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -flash-attention-into-destination -convert-flash-to-gpu="kernel=mma" | FileCheck %s --check-prefix=MMA
// RUN: env -u CUDA_HOME flash-opt %s --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: env -u CUDA_HOME flash-opt %s --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=IDX

// CHECK-LABEL: func.func @flash_attention_grad
// CHECK: %[[ACC:.*]], %{{.*}} = gpu.alloc async {{.*}} () : memref<8x100x70xf32>
// CHECK: gpu.memset async {{.*}} %[[ACC]], %{{.*}} : memref<8x100x70xf32>, f32
// CHECK: gpu.memset async {{.*}} %arg12, %{{.*}} : memref<8xf32>, f32
// CHECK: @flash_attention_0::@prep
// CHECK: @flash_attention_0::@kernel {{.*}} args({{.*}}, %arg6 : memref<8x100x70xbf16>, %arg7 : memref<8xf32>, %[[ACC]] : memref<8x100x70xf32>, %arg12 : memref<8xf32>, %{{.*}} : index, %{{.*}} : index)
// CHECK: @flash_attention_0::@dq
// CHECK: @flash_attention_0::@round {{.*}} args(%{{.*}} : memref<?xf32>, %{{.*}} : memref<?xbf16>)
// CHECK: gpu.dealloc async {{.*}} %[[ACC]]
// CHECK: gpu.func @kernel({{.*}}, %[[BIAS:.*]]: memref<8x100x70xbf16>, %[[SLOPES:.*]]: memref<8xf32>, %[[DBIAS:.*]]: memref<8x100x70xf32>, %[[DSLOPES:.*]]: memref<8xf32>, %{{.*}}: index, %{{.*}}: index)
// CHECK: nvvm.wgmma.mma_async
// CHECK: memref.load %[[BIAS]]
// CHECK: memref.load %[[SLOPES]]
// CHECK: memref.atomic_rmw addf %{{.*}}, %[[DBIAS]]
// CHECK: gpu.shuffle xor
// CHECK: memref.atomic_rmw addf %{{.*}}, %[[DSLOPES]]
// CHECK: gpu.func @round(

// MMA: gpu.func @kernel({{.*}}, %[[BIAS:.*]]: memref<8x100x70xbf16>, %[[SLOPES:.*]]: memref<8xf32>, %[[DBIAS:.*]]: memref<8x100x70xf32>, %[[DSLOPES:.*]]: memref<8xf32>, %{{.*}}: index, %{{.*}}: index)
// MMA: nvvm.mma.sync
// MMA: memref.load %[[BIAS]]
// MMA: memref.atomic_rmw addf %{{.*}}, %[[DBIAS]]
// MMA: gpu.shuffle xor
// MMA: memref.atomic_rmw addf %{{.*}}, %[[DSLOPES]]

// PTX-DAG: .entry round(
// PTX-DAG: .entry kernel(
// PTX-DAG: wgmma.mma_async
// PTX-DAG: atom.global.add.f32

// ALiBi's |i + Lk - Lq - j| is f32 arithmetic on exact copies of the indices (the
// lengths are static), not a conversion of a 64-bit integer per element.
// IDX-NOT: cvt.rn.f32.s64
// IDX: .entry kernel(
// IDX-NOT: cvt.rn.f32.s64

// 8 query heads on 2 K/V heads, Lq = 100, Lk = 70, D = 64, causal; a bf16
// bias [H, Lq, Lk] and ALiBi's f32 slopes [H] (the region attention_grad_ir
// writes for bias= and alibi_slopes=).
func.func @flash_attention_grad(%q: memref<2x8x100x64xbf16>, %k: memref<2x2x70x64xbf16>, %v: memref<2x2x70x64xbf16>, %o: memref<2x8x100x64xbf16>, %do: memref<2x8x100x64xbf16>, %lse: memref<2x8x100xf32>, %bias: memref<8x100x70xbf16>, %slopes: memref<8xf32>, %dq: memref<2x8x100x64xbf16>, %dk: memref<2x2x70x64xbf16>, %dv: memref<2x2x70x64xbf16>, %dbias: memref<8x100x70xbf16>, %dslopes: memref<8xf32>) attributes {llvm.emit_c_interface} {
  %q_t = bufferization.to_tensor %q restrict : memref<2x8x100x64xbf16> to tensor<2x8x100x64xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %o_t = bufferization.to_tensor %o restrict : memref<2x8x100x64xbf16> to tensor<2x8x100x64xbf16>
  %do_t = bufferization.to_tensor %do restrict : memref<2x8x100x64xbf16> to tensor<2x8x100x64xbf16>
  %lse_t = bufferization.to_tensor %lse restrict : memref<2x8x100xf32> to tensor<2x8x100xf32>
  %bias_t = bufferization.to_tensor %bias restrict : memref<8x100x70xbf16> to tensor<8x100x70xbf16>
  %slopes_t = bufferization.to_tensor %slopes restrict : memref<8xf32> to tensor<8xf32>
  %dq_t = bufferization.to_tensor %dq restrict writable : memref<2x8x100x64xbf16> to tensor<2x8x100x64xbf16>
  %dk_t = bufferization.to_tensor %dk restrict writable : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %dv_t = bufferization.to_tensor %dv restrict writable : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %dbias_t = bufferization.to_tensor %dbias restrict writable : memref<8x100x70xbf16> to tensor<8x100x70xbf16>
  %dslopes_t = bufferization.to_tensor %dslopes restrict writable : memref<8xf32> to tensor<8xf32>
  %r:5 = flash.attention_grad ins(%q_t, %k_t, %v_t, %o_t, %do_t, %lse_t : tensor<2x8x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x8x100x64xbf16>, tensor<2x8x100x64xbf16>, tensor<2x8x100xf32>) outs(%dq_t, %dk_t, %dv_t, %dbias_t, %dslopes_t : tensor<2x8x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x64xbf16>, tensor<8x100x70xbf16>, tensor<8xf32>) captures(%bias_t, %slopes_t : tensor<8x100x70xbf16>, tensor<8xf32>) scale(1.250000000e-01) mask(causal, top_left) score_mod {
  ^bb0(%s: f32, %x0: index, %x1: index, %x2: index, %x3: index, %c0: tensor<8x100x70xbf16>, %c1: tensor<8xf32>):
    %e0 = tensor.extract %c0[%x1, %x2, %x3] : tensor<8x100x70xbf16>
    %w0 = arith.extf %e0 : bf16 to f32
    %b0 = arith.addf %s, %w0 : f32
    %e1 = tensor.extract %c1[%x1] : tensor<8xf32>
    %ii = arith.index_cast %x2 : index to i64
    %ji = arith.index_cast %x3 : index to i64
    %if = arith.sitofp %ii : i64 to f32
    %jf = arith.sitofp %ji : i64 to f32
    %off = arith.constant -30.0 : f32
    %id = arith.addf %if, %off : f32
    %dist = arith.subf %id, %jf : f32
    %adist = math.absf %dist : f32
    %pen = arith.mulf %e1, %adist : f32
    %a1 = arith.subf %b0, %pen : f32
    flash.yield %a1 : f32
  } -> tensor<2x8x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x64xbf16>, tensor<8x100x70xbf16>, tensor<8xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<2x8x100x64xbf16>, memref<2x8x100x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<2x2x70x64xbf16>, memref<2x2x70x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<2x2x70x64xbf16>, memref<2x2x70x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#3 in restrict writable %dbias : (tensor<8x100x70xbf16>, memref<8x100x70xbf16>) -> ()
  bufferization.materialize_in_destination %r#4 in restrict writable %dslopes : (tensor<8xf32>, memref<8xf32>) -> ()
  return
}

