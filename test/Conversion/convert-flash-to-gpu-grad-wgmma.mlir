// flash.attention_grad on sm_90a: the wgmma key-block kernel between the same
// `prep` and `dq` kernels as the mma.sync one. A producer warpgroup loads the
// CTA's K/V block once and streams Q, dO (TMA) and the row statistics (bulk
// copies) through two slots; two consumer warpgroups of 64 keys compute Sᵀ,
// dPᵀ from shared memory, dV and dK from registers, and dQ from the dSᵀ tile
// read transposed, added to the f32 accumulator by bulk reductions.
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="kernel=mma" | FileCheck %s --check-prefix=MMA
// RUN: not flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="kernel=wgmma grad-deterministic=true" 2>&1 | FileCheck %s --check-prefix=DET
// RUN: not flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="kernel=wgmma chip=sm_90" 2>&1 | FileCheck %s --check-prefix=CHIP
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu | FileCheck %s --check-prefix=KEYS

// The masked branch's element mask: each thread works out once per step the
// queries its key sees past the step's first (keyQueries: from key - (Lk -
// Lq) on, none for a key past Lk), then compares each element's constant
// query offset.
// KEYS-LABEL: gpu.func @kernel
// KEYS: %[[IN:.+]] = arith.cmpi slt, %[[KEY:.+]], %{{.+}} : index
// KEYS: %[[REL:.+]] = arith.index_cast %{{.+}} : index to i32
// KEYS-NEXT: %[[NONE:.+]] = arith.constant 1073741824 : i32
// KEYS-NEXT: %[[LO:.+]] = arith.select %[[IN]], %[[REL]], %[[NONE]] : i32
// KEYS-NEXT: %[[K:.+]] = arith.constant 0 : i32
// KEYS-NEXT: %[[OK:.+]] = arith.cmpi sge, %[[K]], %[[LO]] : i32
// KEYS-NEXT: %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// KEYS-NEXT: arith.select %[[OK]], %{{.+}}, %[[ZERO]] : f32

// DET: the wgmma flash.attention_grad kernel has no grad-deterministic order yet (kernel=mma has)
// CHIP: convert-flash-to-gpu: the wgmma kernel needs chip sm_90a, got 'sm_90'

// GQA 8 query heads on 2 K/V heads, Lq = 100, Lk = 70 (tails in both),
// D = Dv = 128, causal bottom-right.
// CHECK-LABEL: func.func @grad_d128
// CHECK: gpu.alloc async {{.*}} : memref<?x?xf32>
// CHECK: gpu.alloc async {{.*}} : memref<?x?xf32>
// CHECK: gpu.alloc async {{.*}} : memref<?x?x128xf32>
// CHECK: @flash_attention_0::@prep
// Q and dO in boxes of 64 rows, K and V of 128.
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c1{{.*}}, %c64{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<1x64x64xbf16, 3>, swizzle = swizzle_128b
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c1{{.*}}, %c128{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<1x128x64xbf16, 3>
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c1{{.*}}, %c128{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<1x128x64xbf16, 3>
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c1{{.*}}, %c64{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<1x64x64xbf16, 3>
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel blocks in ({{.*}}) threads in (%c384{{.*}}) dynamic_shared_memory_size %c202792_i32 args({{.*}} : !llvm.ptr, {{.*}} : index)
// CHECK: @flash_attention_0::@dq
// CHECK: gpu.func @kernel(
// CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>
// The producer: K and V once, then per step Q, dO and the two row buffers
// (33 280 bytes) into a slot, after the consumers released its previous fill.
// CHECK: nvvm.setmaxregister decrease 24
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c65536_i32
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c33280_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];", "r,l,r,r" %{{.*}}, %{{.*}}, %c256_i32
// CHECK: "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];", "r,l,r,r" %{{.*}}, %{{.*}}, %c256_i32
// The consumers: Sᵀ and dPᵀ with K-major operands, Pᵀ masked only in the
// tiles that cross an edge, dV and dK from registers (B transposed).
// CHECK: nvvm.setmaxregister increase 240
// CHECK: scf.for
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.if %{{.*}} -> (f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: arith.select
// CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// dSᵀ stored, fenced for the async proxy, both warpgroups meet, and dQ reads
// it transposed with K as an MN-major B.
// CHECK: "cp.async.bulk.wait_group.read 0;"
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK: nvvm.barrier id = %c1_i32 number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <row>]
// CHECK: nvvm.mbarrier.arrive
// The warpgroup's half of dQ (64 columns) through its staging tile: one bulk
// add of 256 bytes per row.
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK: nvvm.barrier id
// CHECK: "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;\0A\09cp.async.bulk.commit_group;", "l,r,r" %{{.*}}, %{{.*}}, %c256_i32
// CHECK: "cp.async.bulk.wait_group 0;"
// MMA-LABEL: func.func @grad_d128
// MMA: threads in (%c256
// MMA-NOT: nvgpu.tma.create.descriptor
// MMA: gpu.func @kernel(
// MMA: nvvm.mma.sync

// PTX-LABEL: llvm.func @grad_d128(
// PTX: .target sm_90a
// PTX-DAG: .entry kernel(
// PTX-DAG: setmaxnreg.inc.sync.aligned.u32 {{.*}}240;
// dQ = dS K: both operands transposed (imm-trans-a = imm-trans-b = 1).
// PTX-DAG: p, 1,  1, 1,  1;
// PTX-DAG: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
func.func @grad_d128(%q: memref<2x8x100x128xbf16>, %k: memref<2x2x70x128xbf16>, %v: memref<2x2x70x128xbf16>, %o: memref<2x8x100x128xbf16>, %do: memref<2x8x100x128xbf16>, %lse: memref<2x8x100xf32>, %dq: memref<2x8x100x128xbf16>, %dk: memref<2x2x70x128xbf16>, %dv: memref<2x2x70x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x8x100x128xbf16> to tensor<2x8x100x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x70x128xbf16> to tensor<2x2x70x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x70x128xbf16> to tensor<2x2x70x128xbf16>
  %ot = bufferization.to_tensor %o restrict : memref<2x8x100x128xbf16> to tensor<2x8x100x128xbf16>
  %dot = bufferization.to_tensor %do restrict : memref<2x8x100x128xbf16> to tensor<2x8x100x128xbf16>
  %lt = bufferization.to_tensor %lse restrict : memref<2x8x100xf32> to tensor<2x8x100xf32>
  %dq0 = tensor.empty() : tensor<2x8x100x128xbf16>
  %dk0 = tensor.empty() : tensor<2x2x70x128xbf16>
  %dv0 = tensor.empty() : tensor<2x2x70x128xbf16>
  %r:3 = flash.attention_grad ins(%qt, %kt, %vt, %ot, %dot, %lt : tensor<2x8x100x128xbf16>, tensor<2x2x70x128xbf16>, tensor<2x2x70x128xbf16>, tensor<2x8x100x128xbf16>, tensor<2x8x100x128xbf16>, tensor<2x8x100xf32>) outs(%dq0, %dk0, %dv0 : tensor<2x8x100x128xbf16>, tensor<2x2x70x128xbf16>, tensor<2x2x70x128xbf16>) scale(0.125) mask(causal, bottom_right) -> tensor<2x8x100x128xbf16>, tensor<2x2x70x128xbf16>, tensor<2x2x70x128xbf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<2x8x100x128xbf16>, memref<2x8x100x128xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<2x2x70x128xbf16>, memref<2x2x70x128xbf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<2x2x70x128xbf16>, memref<2x2x70x128xbf16>) -> ()
  return
}

// -----

// D = Dv = 64: 128 query rows per step; the warpgroups split dQ's rows.
// CHECK-LABEL: func.func @grad_d64
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c1{{.*}}, %c128{{.*}}, %c64{{.*}}] : memref<*xf16> -> <tensor = memref<1x128x64xf16, 3>
// CHECK: @flash_attention_0::@kernel blocks in ({{.*}}) threads in (%c384
// CHECK: gpu.func @kernel(
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 64, k = 16>, D[<f32>, <zero>], A[<f16>, <one>, <col>], B[<f16>, <one>, <row>]
func.func @grad_d64(%q: memref<2x8x100x64xf16>, %k: memref<2x2x70x64xf16>, %v: memref<2x2x70x64xf16>, %o: memref<2x8x100x64xf16>, %do: memref<2x8x100x64xf16>, %lse: memref<2x8x100xf32>, %dq: memref<2x8x100x64xf16>, %dk: memref<2x2x70x64xf16>, %dv: memref<2x2x70x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x8x100x64xf16> to tensor<2x8x100x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x70x64xf16> to tensor<2x2x70x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x70x64xf16> to tensor<2x2x70x64xf16>
  %ot = bufferization.to_tensor %o restrict : memref<2x8x100x64xf16> to tensor<2x8x100x64xf16>
  %dot = bufferization.to_tensor %do restrict : memref<2x8x100x64xf16> to tensor<2x8x100x64xf16>
  %lt = bufferization.to_tensor %lse restrict : memref<2x8x100xf32> to tensor<2x8x100xf32>
  %dq0 = tensor.empty() : tensor<2x8x100x64xf16>
  %dk0 = tensor.empty() : tensor<2x2x70x64xf16>
  %dv0 = tensor.empty() : tensor<2x2x70x64xf16>
  %r:3 = flash.attention_grad ins(%qt, %kt, %vt, %ot, %dot, %lt : tensor<2x8x100x64xf16>, tensor<2x2x70x64xf16>, tensor<2x2x70x64xf16>, tensor<2x8x100x64xf16>, tensor<2x8x100x64xf16>, tensor<2x8x100xf32>) outs(%dq0, %dk0, %dv0 : tensor<2x8x100x64xf16>, tensor<2x2x70x64xf16>, tensor<2x2x70x64xf16>) scale(0.125)  -> tensor<2x8x100x64xf16>, tensor<2x2x70x64xf16>, tensor<2x2x70x64xf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<2x8x100x64xf16>, memref<2x8x100x64xf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<2x2x70x64xf16>, memref<2x2x70x64xf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<2x2x70x64xf16>, memref<2x2x70x64xf16>) -> ()
  return
}
