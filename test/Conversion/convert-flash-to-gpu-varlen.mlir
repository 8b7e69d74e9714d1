// A packed varlen batch on the GPU: flash.varlen_attention runs the prefill
// kernels' tile program with another work decomposition. The grid holds
// ceil(Tq / block rows) + B query blocks (each sequence ends in at most one
// partial block) by the query heads; a block scans the offsets for its
// sequence and reads its rows at the sequence's token offsets. kernel=auto
// takes the wgmma kernel on sm_90a (TMA boxes rows x 1 x 64 of the packed
// [tokens, heads, D] tensors), the mma.sync kernel otherwise.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=mma" | FileCheck %s --check-prefix=MMA
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="chip=sm_80" | FileCheck %s --check-prefix=MMA
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=portable" 2>&1 | FileCheck %s --check-prefix=PORTABLE
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=OLDCHIP
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" 2>&1 | FileCheck %s --check-prefix=PTX
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa kernel=mma" 2>&1 | FileCheck %s --check-prefix=PTXMMA

// PORTABLE: a packed varlen batch is run by the wgmma or the mma kernel (kernel=auto, wgmma or mma), got kernel=portable
// OLDCHIP: the mma kernel needs sm_80 or newer

// CHECK-LABEL: func.func @prefill_varlen
// CHECK: %[[B:.*]] = arith.maxsi %{{.*}}, %c0
// CHECK: nvgpu.tma.create.descriptor %{{.*}} box[%c128, %c1{{.*}}, %c64] : memref<*xbf16> -> <tensor = memref<128x1x64xbf16, 3>
// CHECK: %[[BLK:.*]] = arith.ceildivsi %{{.*}}, %c128{{.*}} : index
// CHECK: %[[GX:.*]] = arith.addi %[[BLK]], %[[B]] : index
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel blocks in (%[[GX]], {{.*}} args({{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : index, {{.*}} : index, {{.*}} : index, {{.*}} : index, {{.*}} : memref<?xi32>, {{.*}} : memref<?xi32>)
// CHECK: gpu.func @kernel({{.*}}, %[[CQ:.*]]: memref<?xi32>, %[[CK:.*]]: memref<?xi32>)
// CHECK: %[[SCAN:.*]]:3 = scf.for {{.*}} iter_args(
// CHECK:   memref.load %[[CQ]][
// CHECK: arith.cmpi sge, %[[SCAN]]#1, %c0
// CHECK: memref.load %[[CQ]][%[[SCAN]]#1] : memref<?xi32>
// CHECK: memref.load %[[CK]][%[[SCAN]]#1] : memref<?xi32>
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, box[%c0_i32{{[_0-9]*}}, %{{.*}}, %{{.*}}]

// MMA-LABEL: func.func @prefill_varlen
// MMA: %[[CUQ:.*]] = memref.cast %{{.*}} : memref<5xi32> to memref<?xi32>
// MMA: %[[B:.*]] = arith.maxsi %{{.*}}, %c0
// MMA: %[[BLK:.*]] = arith.ceildivsi %{{.*}}, %c64 : index
// MMA: %[[GX:.*]] = arith.addi %[[BLK]], %[[B]] : index
// MMA: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel blocks in (%[[GX]], {{.*}} args({{.*}} : memref<?x?x128xbf16>, {{.*}} : memref<?x?x128xbf16>, {{.*}} : memref<?x?x64xbf16>, {{.*}} : memref<?x?x64xbf16>, {{.*}} : memref<?x?xf32>, {{.*}} : index, {{.*}} : index, %[[CUQ]] : memref<?xi32>, {{.*}} : memref<?xi32>)
// MMA: gpu.func @kernel(%[[Q:.*]]: memref<?x?x128xbf16>, %[[K:.*]]: memref<?x?x128xbf16>, %{{.*}}: memref<?x?x64xbf16>, %[[O:.*]]: memref<?x?x64xbf16>, %[[L:.*]]: memref<?x?xf32>, %{{.*}}: index, %{{.*}}: index, %[[CQ:.*]]: memref<?xi32>, %[[CK:.*]]: memref<?xi32>)
// MMA: %[[SCAN:.*]]:3 = scf.for {{.*}} iter_args(
// MMA:   memref.load %[[CQ]][
// MMA:   arith.ceildivsi %{{.*}}, %c64
// MMA: arith.cmpi sge, %[[SCAN]]#1, %c0
// MMA: cf.cond_br
// MMA: memref.load %[[CQ]][%[[SCAN]]#1] : memref<?xi32>
// MMA: memref.load %[[CK]][%[[SCAN]]#1] : memref<?xi32>
// MMA: memref.load %[[Q]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x128xbf16>
// MMA: vector.load %[[K]][%{{.*}}, %{{.*}}, %{{.*}}] {{.*}}: memref<?x?x128xbf16>, vector<8xbf16>
// MMA: memref.store %{{.*}}, %[[O]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<?x?x64xbf16>
// MMA: memref.store %{{.*}}, %[[L]][%{{.*}}, %{{.*}}] : memref<?x?xf32>
// PTX-LABEL: .entry kernel(
// PTX: cp.async.bulk.tensor.3d.shared::cluster.global
// PTX: wgmma.mma_async.sync.aligned
// PTXMMA-LABEL: .entry kernel(
// PTXMMA: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
func.func @prefill_varlen(%q: memref<100x8x128xbf16>, %k: memref<300x2x128xbf16>, %v: memref<300x2x64xbf16>, %o: memref<100x8x64xbf16>, %lse: memref<8x100xf32>, %cu_q: memref<5xi32>, %cu_k: memref<5xi32>) attributes {llvm.emit_c_interface} {
  %q_t = bufferization.to_tensor %q restrict : memref<100x8x128xbf16> to tensor<100x8x128xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<300x2x128xbf16> to tensor<300x2x128xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<300x2x64xbf16> to tensor<300x2x64xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<100x8x64xbf16> to tensor<100x8x64xbf16>
  %lse_t = bufferization.to_tensor %lse restrict writable : memref<8x100xf32> to tensor<8x100xf32>
  %cu_q_t = bufferization.to_tensor %cu_q restrict : memref<5xi32> to tensor<5xi32>
  %cu_k_t = bufferization.to_tensor %cu_k restrict : memref<5xi32> to tensor<5xi32>
  %r:2 = flash.varlen_attention ins(%q_t, %k_t, %v_t : tensor<100x8x128xbf16>, tensor<300x2x128xbf16>, tensor<300x2x64xbf16>) seqlens(%cu_q_t, %cu_k_t : tensor<5xi32>, tensor<5xi32>) outs(%o_t, %lse_t : tensor<100x8x64xbf16>, tensor<8x100xf32>) scale(8.838834765e-02) mask(causal, bottom_right) -> tensor<100x8x64xbf16>, tensor<8x100xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<100x8x64xbf16>, memref<100x8x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<8x100xf32>, memref<8x100xf32>) -> ()
  return
}


// -----

// Sinks (gpt-oss): the kernels take them after the head count and before the
// offsets, and each finished row counts its head's sink (the block's head,
// modulo the sinks' length, times log2 e).
// CHECK-LABEL: func.func @varlen_sinks
// CHECK: %[[S:.*]] = memref.cast %{{.*}} : memref<8xf32> to memref<?xf32>
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}} args({{.*}} : index, {{.*}} : index, {{.*}} : index, {{.*}} : index, %[[S]] : memref<?xf32>, {{.*}} : memref<?xi32>, {{.*}} : memref<?xi32>)
// CHECK: gpu.func @kernel({{.*}}: index, %[[KS:.*]]: memref<?xf32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>)
// CHECK: %[[N:.*]] = memref.dim %[[KS]], %c0
// CHECK: %[[H:.*]] = arith.remui %{{.*}}, %[[N]]
// CHECK: memref.load %[[KS]][%[[H]]] : memref<?xf32>
// CHECK: arith.mulf %{{.*}}, %cst{{.*}} : f32

// MMA-LABEL: func.func @varlen_sinks
// MMA: %[[S:.*]] = memref.cast %{{.*}} : memref<8xf32> to memref<?xf32>
// MMA: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}} args({{.*}} : memref<?x?x64xbf16>, {{.*}} : index, {{.*}} : index, %[[S]] : memref<?xf32>, {{.*}} : memref<?xi32>, {{.*}} : memref<?xi32>)
// MMA: gpu.func @kernel({{.*}}: index, %[[KS:.*]]: memref<?xf32>, %{{.*}}: memref<?xi32>, %{{.*}}: memref<?xi32>)
// MMA: %[[N:.*]] = memref.dim %[[KS]], %c0
// MMA: %[[H:.*]] = arith.remui %{{.*}}, %[[N]]
// MMA: memref.load %[[KS]][%[[H]]] : memref<?xf32>
// PTX-LABEL: .entry kernel(
// PTX: wgmma.mma_async.sync.aligned
// PTXMMA-LABEL: .entry kernel(
// PTXMMA: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
func.func @varlen_sinks(%q: memref<100x8x128xbf16>, %k: memref<300x2x128xbf16>, %v: memref<300x2x64xbf16>, %o: memref<100x8x64xbf16>, %cu_q: memref<5xi32>, %cu_k: memref<5xi32>, %s: memref<8xf32>) attributes {llvm.emit_c_interface} {
  %q_t = bufferization.to_tensor %q restrict : memref<100x8x128xbf16> to tensor<100x8x128xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<300x2x128xbf16> to tensor<300x2x128xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<300x2x64xbf16> to tensor<300x2x64xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<100x8x64xbf16> to tensor<100x8x64xbf16>
  %cu_q_t = bufferization.to_tensor %cu_q restrict : memref<5xi32> to tensor<5xi32>
  %cu_k_t = bufferization.to_tensor %cu_k restrict : memref<5xi32> to tensor<5xi32>
  %s_t = bufferization.to_tensor %s restrict : memref<8xf32> to tensor<8xf32>
  %r = flash.varlen_attention ins(%q_t, %k_t, %v_t : tensor<100x8x128xbf16>, tensor<300x2x128xbf16>, tensor<300x2x64xbf16>) seqlens(%cu_q_t, %cu_k_t : tensor<5xi32>, tensor<5xi32>) outs(%o_t : tensor<100x8x64xbf16>) sinks(%s_t : tensor<8xf32>) scale(8.838834765e-02) mask(causal, bottom_right) -> tensor<100x8x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<100x8x64xbf16>, memref<100x8x64xbf16>) -> ()
  return
}
