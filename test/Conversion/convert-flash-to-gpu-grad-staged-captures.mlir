// The wgmma backward stages a capture read as cap[lead..., q_idx, kv_idx] (rows a
// multiple of 16 bytes, 16-bit or 8-bit elements): per step the producer loads, with
// TMA under the step's full barrier, a 64-key x 64-query box per consumer warpgroup
// and 64 query rows into the part of the step's dSᵀ slot that warpgroup writes after
// it has read them (128-byte swizzle for bf16, 64-byte for booleans, described as
// UINT8 through the runtime's encoder). The mask-free blocks read the box — a bf16
// pair of 8 queries per ldmatrix.trans, a boolean as its byte — and the blocks that
// cross Lq, Lk or the mask's edge read the buffer; a named barrier per warpgroup
// orders the reads before its dSᵀ stores. stage-captures=0 reads the buffer
// everywhere.
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="stage-captures=0" | FileCheck %s --check-prefix=OFF
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa specialize-constants=true" | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @grad_bias
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%{{.*}}, %c64{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<1x64x64xbf16, 3>, swizzle = swizzle_128b
// CHECK: gpu.launch_func {{.*}} @flash_attention_0::@kernel {{.*}} %arg6 : memref<8x300x200xbf16>, %{{.*}} : memref<8x300x200xf32>, %{{.*}} : index, %{{.*}} : index, %[[MAP:.*]] : !llvm.ptr)
// CHECK: gpu.func @kernel({{.*}}, %[[BIAS:.*]]: memref<8x300x200xbf16>, %{{.*}}: memref<8x300x200xf32>, %{{.*}}: index, %{{.*}}: index, %[[BMAP:.*]]: !llvm.ptr)
// Q and dO (16 KiB each at D = 64, 128 rows), lse and delta, and the bias's 128 x 128 bf16.
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c66560_i32
// Four boxes: warpgroups at keys k0 and k0 + 64, query rows q0 and q0 + 64, the dSᵀ
// slot at 98304 with its query panels 16 KiB apart.
// CHECK: %[[C0:.*]] = llvm.getelementptr %{{.*}}[%c98304_i64]
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[BMAP]], %{{.*}}, box[
// CHECK: %c114688_i64
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[BMAP]], %{{.*}}, box[
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[BMAP]], %{{.*}}, box[
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[BMAP]], %{{.*}}, box[
// CHECK: memref.load %[[BIAS]]
// CHECK: nvvm.ldmatrix %{{.*}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<col>, num = 4 : i32
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: nvvm.barrier id = %c1_i32 number_of_threads = %c256_i32

// OFF-LABEL: func.func @grad_bias
// OFF-NOT: memref<1x64x64xbf16
// OFF: gpu.func @kernel({{.*}}, %[[BIAS:.*]]: memref<8x300x200xbf16>, %{{.*}}: memref<8x300x200xf32>, %{{.*}}: index, %{{.*}}: index)
// OFF: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c33792_i32
// OFF: memref.load %[[BIAS]]
// OFF-NOT: nvvm.ldmatrix
// OFF: gpu.func @dq

// PTX-LABEL: .entry kernel(
// PTX: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16

// 8 query heads on 2 K/V heads, Lq = 300, Lk = 200, D = 64, causal bottom-right (the
// second query block sees the first key block whole: the staged read is live once the
// kernel is specialised on these sizes); a bf16 bias [H, Lq, Lk] (400-byte rows) whose
// gradient is read.
func.func @grad_bias(%q: memref<2x8x300x64xbf16>, %k: memref<2x2x200x64xbf16>, %v: memref<2x2x200x64xbf16>, %o: memref<2x8x300x64xbf16>, %do: memref<2x8x300x64xbf16>, %lse: memref<2x8x300xf32>, %bias: memref<8x300x200xbf16>, %dq: memref<2x8x300x64xbf16>, %dk: memref<2x2x200x64xbf16>, %dv: memref<2x2x200x64xbf16>, %dbias: memref<8x300x200xbf16>) attributes {llvm.emit_c_interface} {
  %q_t = bufferization.to_tensor %q restrict : memref<2x8x300x64xbf16> to tensor<2x8x300x64xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<2x2x200x64xbf16> to tensor<2x2x200x64xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<2x2x200x64xbf16> to tensor<2x2x200x64xbf16>
  %o_t = bufferization.to_tensor %o restrict : memref<2x8x300x64xbf16> to tensor<2x8x300x64xbf16>
  %do_t = bufferization.to_tensor %do restrict : memref<2x8x300x64xbf16> to tensor<2x8x300x64xbf16>
  %lse_t = bufferization.to_tensor %lse restrict : memref<2x8x300xf32> to tensor<2x8x300xf32>
  %bias_t = bufferization.to_tensor %bias restrict : memref<8x300x200xbf16> to tensor<8x300x200xbf16>
  %dq_t = bufferization.to_tensor %dq restrict writable : memref<2x8x300x64xbf16> to tensor<2x8x300x64xbf16>
  %dk_t = bufferization.to_tensor %dk restrict writable : memref<2x2x200x64xbf16> to tensor<2x2x200x64xbf16>
  %dv_t = bufferization.to_tensor %dv restrict writable : memref<2x2x200x64xbf16> to tensor<2x2x200x64xbf16>
  %dbias_t = bufferization.to_tensor %dbias restrict writable : memref<8x300x200xbf16> to tensor<8x300x200xbf16>
  %r:4 = flash.attention_grad ins(%q_t, %k_t, %v_t, %o_t, %do_t, %lse_t : tensor<2x8x300x64xbf16>, tensor<2x2x200x64xbf16>, tensor<2x2x200x64xbf16>, tensor<2x8x300x64xbf16>, tensor<2x8x300x64xbf16>, tensor<2x8x300xf32>) outs(%dq_t, %dk_t, %dv_t, %dbias_t : tensor<2x8x300x64xbf16>, tensor<2x2x200x64xbf16>, tensor<2x2x200x64xbf16>, tensor<8x300x200xbf16>) captures(%bias_t : tensor<8x300x200xbf16>) scale(1.250000000e-01) mask(causal, bottom_right) score_mod {
  ^bb0(%s: f32, %x0: index, %x1: index, %x2: index, %x3: index, %c0: tensor<8x300x200xbf16>):
    %e0 = tensor.extract %c0[%x1, %x2, %x3] : tensor<8x300x200xbf16>
    %w0 = arith.extf %e0 : bf16 to f32
    %b0 = arith.addf %s, %w0 : f32
    flash.yield %b0 : f32
  } -> tensor<2x8x300x64xbf16>, tensor<2x2x200x64xbf16>, tensor<2x2x200x64xbf16>, tensor<8x300x200xbf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<2x8x300x64xbf16>, memref<2x8x300x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<2x2x200x64xbf16>, memref<2x2x200x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<2x2x200x64xbf16>, memref<2x2x200x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#3 in restrict writable %dbias : (tensor<8x300x200xbf16>, memref<8x300x200xbf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @grad_mask
// CHECK: llvm.call @mgpuTensorMapEncodeTiledMemref(%{{.*}}, %{{.*}}, %c0_i64{{.*}}, %c0_i64{{.*}}, %c2_i64{{.*}}, %c3_i64
// CHECK: gpu.func @kernel({{.*}}, %[[MASK:.*]]: memref<150x208xi1>, %{{.*}}: index, %{{.*}}: index, %[[MMAP:.*]]: !llvm.ptr)
// Q and dO (16 KiB each at D = 128, 64 rows), lse and delta, and the mask's 64 x 128 bytes.
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c41472_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MMAP]], %{{.*}}, box[
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MMAP]], %{{.*}}, box[
// CHECK-NOT: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[MMAP]]
// CHECK: memref.load %[[MASK]]
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> i8
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32

// OFF-LABEL: func.func @grad_mask
// OFF-NOT: mgpuTensorMapEncodeTiledMemref
// OFF: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c33280_i32

// PTX-LABEL: .entry kernel(
// PTX: ld.shared.b8

// 8 query heads on 2 K/V heads, Lq = 150, Lk = 200, D = 128, no structured mask; a
// boolean [Lq, 208] mask tensor.
func.func @grad_mask(%q: memref<2x8x150x128xbf16>, %k: memref<2x2x200x128xbf16>, %v: memref<2x2x200x128xbf16>, %o: memref<2x8x150x128xbf16>, %do: memref<2x8x150x128xbf16>, %lse: memref<2x8x150xf32>, %mask: memref<150x208xi1>, %dq: memref<2x8x150x128xbf16>, %dk: memref<2x2x200x128xbf16>, %dv: memref<2x2x200x128xbf16>) attributes {llvm.emit_c_interface} {
  %q_t = bufferization.to_tensor %q restrict : memref<2x8x150x128xbf16> to tensor<2x8x150x128xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<2x2x200x128xbf16> to tensor<2x2x200x128xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<2x2x200x128xbf16> to tensor<2x2x200x128xbf16>
  %o_t = bufferization.to_tensor %o restrict : memref<2x8x150x128xbf16> to tensor<2x8x150x128xbf16>
  %do_t = bufferization.to_tensor %do restrict : memref<2x8x150x128xbf16> to tensor<2x8x150x128xbf16>
  %lse_t = bufferization.to_tensor %lse restrict : memref<2x8x150xf32> to tensor<2x8x150xf32>
  %mask_t = bufferization.to_tensor %mask restrict : memref<150x208xi1> to tensor<150x208xi1>
  %dq_t = bufferization.to_tensor %dq restrict writable : memref<2x8x150x128xbf16> to tensor<2x8x150x128xbf16>
  %dk_t = bufferization.to_tensor %dk restrict writable : memref<2x2x200x128xbf16> to tensor<2x2x200x128xbf16>
  %dv_t = bufferization.to_tensor %dv restrict writable : memref<2x2x200x128xbf16> to tensor<2x2x200x128xbf16>
  %r:3 = flash.attention_grad ins(%q_t, %k_t, %v_t, %o_t, %do_t, %lse_t : tensor<2x8x150x128xbf16>, tensor<2x2x200x128xbf16>, tensor<2x2x200x128xbf16>, tensor<2x8x150x128xbf16>, tensor<2x8x150x128xbf16>, tensor<2x8x150xf32>) outs(%dq_t, %dk_t, %dv_t : tensor<2x8x150x128xbf16>, tensor<2x2x200x128xbf16>, tensor<2x2x200x128xbf16>) captures(%mask_t : tensor<150x208xi1>) scale(8.838834764e-02) score_mod {
  ^bb0(%s: f32, %x0: index, %x1: index, %x2: index, %x3: index, %c0: tensor<150x208xi1>):
    %m = tensor.extract %c0[%x2, %x3] : tensor<150x208xi1>
    %ninf = arith.constant 0xFF800000 : f32
    %r = arith.select %m, %s, %ninf : f32
    flash.yield %r : f32
  } -> tensor<2x8x150x128xbf16>, tensor<2x2x200x128xbf16>, tensor<2x2x200x128xbf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<2x8x150x128xbf16>, memref<2x8x150x128xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<2x2x200x128xbf16>, memref<2x2x200x128xbf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<2x2x200x128xbf16>, memref<2x2x200x128xbf16>) -> ()
  return
}
