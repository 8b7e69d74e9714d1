// flash.attention_grad on the GPU: the row kernel `prep` (delta, lse·log2 e,
// a zeroed f32 dQ accumulator), the key-block kernel (a CTA per 128 keys of
// a K/V head walking the query blocks of its group; mma.sync, cp.async, dQ
// by bulk reductions on sm_90, f32 atomics before), and `dq` (scale,
// round), on the caller's stream with the side buffers allocated and freed
// there.
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="grad-block-k=64 grad-block-q=32" | FileCheck %s --check-prefix=SMALL
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="chip=sm_80" | FileCheck %s --check-prefix=ATOMIC
// RUN: flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="grad-deterministic=true" | FileCheck %s --check-prefix=DET
// RUN: not flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="grad-deterministic=true grad-dq=atomic" 2>&1 | FileCheck %s --check-prefix=DETATOMIC
// RUN: not flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="grad-block-q=48" 2>&1 | FileCheck %s --check-prefix=BADBLOCK
// RUN: not flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="chip=sm_80 grad-dq=bulk" 2>&1 | FileCheck %s --check-prefix=BULK80
// RUN: not flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="grad-dq=red" 2>&1 | FileCheck %s --check-prefix=BADDQ
// RUN: not flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=WGMMA
// RUN: not flash-opt %s -split-input-file -flash-attention-into-destination -convert-flash-to-gpu="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=OLDCHIP
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX

// DETATOMIC: convert-flash-to-gpu: grad-deterministic needs dQ by bulk reductions (sm_90, grad-dq=auto or bulk)
// BULK80: convert-flash-to-gpu: grad-dq=bulk needs sm_90 (cp.reduce.async.bulk)
// BADDQ: grad-dq must be auto, bulk or atomic, got 'red'
// BADBLOCK: grad-block-q must be 32 or 64 and grad-block-k 64 or 128 (0: automatic), got 48 and 0
// WGMMA: convert-flash-to-gpu: the wgmma flash.attention_grad kernel takes D = Dv = 64, D = Dv = 128 or D = 128 with Dv = 64, got D = 64, Dv = 48
// OLDCHIP: convert-flash-to-gpu: the flash.attention_grad kernel needs sm_80 or newer

// GQA 8 query heads on 2 K/V heads, Lq = 100, Lk = 70, D = 64, Dv = 48,
// written on tensors and materialised in the caller's buffers: the kernels
// write dq, dk and dv in place (flash-attention-into-destination).
// CHECK-LABEL: func.func @grad_gqa
// CHECK-SAME: %{{.*}}: !llvm.ptr {flash.stream}
// The query heads per K/V head, and the rows padded to whole 128-row blocks.
// CHECK: %[[BH:.*]] = memref.dim %{{.*}}, %c0{{.*}} : memref<?x?x64xbf16>
// CHECK: %[[KVBH:.*]] = memref.dim %{{.*}}, %c0{{.*}} : memref<?x?x64xbf16>
// CHECK: %[[KVBH1:.*]] = arith.maxui %[[KVBH]], %c1
// CHECK: %[[GROUP:.*]] = arith.divui %[[BH]], %[[KVBH1]] : index
// CHECK: %[[PAD:.*]] = arith.muli %{{.*}}, %c128 : index
// CHECK: %[[LSE2:.*]], %{{.*}} = gpu.alloc async [%[[TOK:.*]]] (%[[BH]], %[[PAD]]) : memref<?x?xf32>
// CHECK: %[[DELTA:.*]], %{{.*}} = gpu.alloc async [%[[TOK]]] (%[[BH]], %[[PAD]]) : memref<?x?xf32>
// CHECK: %[[ACC:.*]], %{{.*}} = gpu.alloc async [%[[TOK]]] (%[[BH]], %[[PAD]]) : memref<?x?x64xf32>
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@prep blocks in ({{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c0_i32 args({{.*}} : memref<?x?x48xbf16>, {{.*}} : memref<?x?x48xbf16>, {{.*}} : memref<?x?xf32>, %[[LSE2]] : memref<?x?xf32>, %[[DELTA]] : memref<?x?xf32>, %[[ACC]] : memref<?x?x64xf32>, %[[BH]] : index)
// CHECK: %[[KB:.*]] = arith.ceildivsi %{{.*}}, %c128{{.*}} : index
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel blocks in (%[[KB]], {{.*}}) threads in (%c256{{.*}}) dynamic_shared_memory_size %c103424_i32 args({{.*}}, %[[LSE2]] : memref<?x?xf32>, %[[DELTA]] : memref<?x?xf32>, %[[ACC]] : memref<?x?x64xf32>, {{.*}}, %[[GROUP]] : index, %[[KVBH]] : index)
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@dq blocks in ({{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c0_i32 args(%[[ACC]] : memref<?x?x64xf32>, {{.*}} : memref<?x?x64xbf16>, %[[BH]] : index)
// CHECK: gpu.dealloc async [%[[TOK]]] %[[LSE2]]
// CHECK: gpu.dealloc async [%[[TOK]]] %[[DELTA]]
// CHECK: gpu.dealloc async [%[[TOK]]] %[[ACC]]
// CHECK-NOT: flash.attention_grad
// CHECK-NOT: materialize_in_destination
// CHECK: return
// CHECK: gpu.func @prep(
// CHECK: gpu.shuffle  xor
// CHECK: gpu.func @kernel(
// The K/V block, two Q/dO buffers, dSᵀ, two row-statistics buffers.
// CHECK: memref.view {{.*}} to memref<128x72xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<128x56xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<2x64x72xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<2x64x56xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<128x72xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<2x64xf32, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<2x64xf32, #gpu.address_space<workgroup>>
// CHECK: memref.view {{.*}} to memref<64x72xf32, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy {{.*}} {bypassL1} : memref<?x?x64xbf16> to memref<128x72xbf16
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 0
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = false} : memref<128x72xbf16
// CHECK: nvvm.mma.sync
// The element mask only in tiles that cross it; P = 2^(s·scale·log2 e − lse2).
// CHECK: scf.if %{{.*}} -> (f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: arith.select
// CHECK: } else {
// CHECK-NOT: arith.select
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK: nvgpu.ldmatrix {{.*}} {numTiles = 4 : i32, transpose = true} : memref<128x72xbf16
// The block's dQ through the staging tile: stored, fenced for the async
// proxy, added to the accumulator row by row at the next step's top, and
// read before the tile is written again; the last block's after the loop.
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x72xf32, #gpu.address_space<workgroup>>, vector<2xf32>
// CHECK: "fence.proxy.async.shared::cta;"
// CHECK: scf.yield
// CHECK: gpu.barrier
// CHECK: "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;\0A\09cp.async.bulk.commit_group;", "l,r,r" %{{.*}}, %{{.*}}, %c256_i32
// CHECK: "cp.async.bulk.wait_group 0;"
// CHECK-NOT: memref.atomic_rmw
// CHECK: gpu.func @dq(
// CHECK: vector.load {{.*}} : memref<?x?x64xf32>, vector<4xf32>
// CHECK: arith.truncf {{.*}} : vector<4xf32> to vector<4xbf16>

// ATOMIC: gpu.func @kernel(
// ATOMIC-NOT: cp.reduce.async.bulk
// ATOMIC: memref.atomic_rmw addf %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : (f32, memref<?x?x64xf32>) -> f32
// ATOMIC-NOT: cp.reduce.async.bulk
// ATOMIC: gpu.func @dq(

// Deterministic: one turn counter per (batch·head, query block), zeroed by
// prep; lane 0 of warp 0 waits for the block's turn (acquire), the warp adds
// the rows of the staging tile (two per lane), each lane waits for its adds,
// and after a warp barrier lane 0 passes the turn on (release). Only warp 0
// waits on the turn, so no barrier of a part of the CTA is needed.
// DET: %[[LOCKS:.*]], %{{.*}} = gpu.alloc async [%{{.*}}] (%{{.*}}, %{{.*}}) : memref<?x?xi32>
// DET: @flash_attention_0::@prep {{.*}} %[[LOCKS]] : memref<?x?xi32>)
// DET: @flash_attention_0::@kernel {{.*}} %[[LOCKS]] : memref<?x?xi32>)
// DET: gpu.dealloc async [%{{.*}}] %[[LOCKS]]
// DET: gpu.func @prep(
// DET: memref.store %c0_i32, %{{.*}} : memref<?x?xi32>
// DET: gpu.func @kernel(
// DET: scf.while
// DET: "ld.acquire.gpu.global.b32 $0, [$1];"
// DET-NOT: barrier.sync
// DET: "bar.warp.sync -1;"
// DET: cp.reduce.async.bulk
// DET: cp.reduce.async.bulk
// DET: "cp.async.bulk.wait_group 0;"
// DET: "bar.warp.sync -1;"
// DET: red.release.gpu.global.add.s32

// SMALL: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel blocks in ({{.*}}) threads in (%c128{{.*}}) dynamic_shared_memory_size %c{{[0-9]+}}_i32
// SMALL: memref.view {{.*}} to memref<2x32x72xbf16, #gpu.address_space<workgroup>>

// The whole backward compiles to PTX without ptxas, with nothing spilled
// to local memory.
// PTX-LABEL: llvm.func @grad_gqa(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: .target sm_90a
// PTX-NOT: .local
// PTX-DAG: .entry prep(
// PTX-DAG: .entry kernel(
// PTX-DAG: .entry dq(
// PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-DAG: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX-DAG: cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32
// PTX-DAG: cp.async.ca.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16;
func.func @grad_gqa(%q: memref<2x8x100x64xbf16>, %k: memref<2x2x70x64xbf16>, %v: memref<2x2x70x48xbf16>, %o: memref<2x8x100x48xbf16>, %do: memref<2x8x100x48xbf16>, %lse: memref<2x8x100xf32>, %dq: memref<2x8x100x64xbf16>, %dk: memref<2x2x70x64xbf16>, %dv: memref<2x2x70x48xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x8x100x64xbf16> to tensor<2x8x100x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x70x48xbf16> to tensor<2x2x70x48xbf16>
  %ot = bufferization.to_tensor %o restrict : memref<2x8x100x48xbf16> to tensor<2x8x100x48xbf16>
  %dot = bufferization.to_tensor %do restrict : memref<2x8x100x48xbf16> to tensor<2x8x100x48xbf16>
  %lt = bufferization.to_tensor %lse restrict : memref<2x8x100xf32> to tensor<2x8x100xf32>
  %dq0 = tensor.empty() : tensor<2x8x100x64xbf16>
  %dk0 = tensor.empty() : tensor<2x2x70x64xbf16>
  %dv0 = tensor.empty() : tensor<2x2x70x48xbf16>
  %r:3 = flash.attention_grad ins(%qt, %kt, %vt, %ot, %dot, %lt : tensor<2x8x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x48xbf16>, tensor<2x8x100x48xbf16>, tensor<2x8x100x48xbf16>, tensor<2x8x100xf32>) outs(%dq0, %dk0, %dv0 : tensor<2x8x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x48xbf16>) scale(0.125) mask(causal, bottom_right) -> tensor<2x8x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x48xbf16>
  bufferization.materialize_in_destination %r#0 in restrict writable %dq : (tensor<2x8x100x64xbf16>, memref<2x8x100x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %dk : (tensor<2x2x70x64xbf16>, memref<2x2x70x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#2 in restrict writable %dv : (tensor<2x2x70x48xbf16>, memref<2x2x70x48xbf16>) -> ()
  return
}

