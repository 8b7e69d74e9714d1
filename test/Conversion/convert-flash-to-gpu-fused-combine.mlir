// The wgmma decode form with fused-combine=1: one launch. Each CTA stores its
// split's f32 partial rows and counts its arrival on its row block's counter
// (from the runtime, zero at launch); the last split to arrive merges every
// split's rows into the output by their LSE (the combine kernel's merge,
// mergeSplitRow, a warp per row), counts the sink once, writes the LSE and
// resets the counter. No combine kernel.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=fused-combine=1 | FileCheck %s
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa fused-combine=1" | FileCheck %s --check-prefix=PTX
// RUN: %if ptxas %{ env CUDA_HOME=%cuda_home flash-opt %s -split-input-file --flash-gpu-pipeline="format=bin fused-combine=1" | FileCheck %s --check-prefix=BIN %}
// Automatic (the default): fused at G·Lq <= 4 rows (one per consumer warp) with
// at least 8 K/V heads in all (B·Hkv), else the combine kernel.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s --check-prefix=AUTO
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu=fused-combine=2 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: fused-combine must be -1 (automatic), 0 or 1, got 2

// GQA 32/8, Lq = 1, with the LSE. The counters are one per (K/V batch·head,
// query block): grid.x · grid.y's items before the split factor.
// AUTO-LABEL: func.func @decode_gqa
// AUTO: func.call @flashRuntimeSplitCounters
// AUTO-NOT: gpu.func @combine
// CHECK-LABEL: func.func @decode_gqa
// CHECK: %[[PARTS:.*]], %{{.*}} = gpu.alloc async [%[[TOK:.*]]] (%{{.*}}) : memref<?xi8>
// CHECK: memref.view %[[PARTS]][%c0{{.*}}][%{{.*}}, %{{.*}}] : memref<?xi8> to memref<?x?x128xf32>
// CHECK: memref.view %[[PARTS]][%{{.*}}][%{{.*}}, %{{.*}}] : memref<?xi8> to memref<?x?xf32>
// CHECK-NOT: gpu.alloc
// CHECK: %[[ITEMS:.*]] = arith.muli %[[GX:.*]], %[[KBH:.*]] : index
// CHECK: %[[N:.*]] = arith.index_cast %[[ITEMS]] : index to i64
// CHECK: %[[CNT:.*]] = func.call @flashRuntimeSplitCounters(%{{.*}}, %[[N]]) : (!llvm.ptr, i64) -> !llvm.ptr
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}}, %[[CNT]] : !llvm.ptr)
// CHECK-NOT: gpu.launch_func
// CHECK: gpu.dealloc async [%[[TOK]]] %[[PARTS]]
// CHECK-NOT: gpu.dealloc
// CHECK-NOT: @combine
// CHECK: gpu.func @kernel(
// The arrival: partial stores fenced, the consumers met, one thread counts.
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c128_i32
// CHECK: llvm.atomicrmw add %{{.*}}, %{{.*}} acq_rel : !llvm.ptr, i32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr
// CHECK: nvvm.barrier id
// The last CTA reads the other CTAs' partials past its L1.
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: llvm.load volatile %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 2 : i64} : bf16, !llvm.ptr
// CHECK-NOT: gpu.func @combine
// PTX-LABEL: llvm.func @decode_gqa(
// PTX: gpu.binary @flash_attention_0
// PTX-NOT: .entry combine(
// The pipeline specialises the kernel on its launch's constant sizes (the
// split count, chosen at run time, stays an argument); the merge still rounds
// as the combine kernel's: each split's weight 2^(lse·log2e - max) is one FMA.
// PTX-NOT: ld.param.b64 {{.*}}[kernel_param_5];
// PTX: ld.param.b64 {{.*}}[kernel_param_12];
// PTX: membar.gl;
// PTX: atom.global.add.u32
// PTX: ld.volatile.global.b32
// PTX: fma.rn.f32 {{[^,]+}}, {{[^,]+}}, 0f3FB8AA3B, {{[^;]+}};
// BIN: gpu.binary @flash_attention_0
func.func @decode_gqa(%q: memref<2x32x1x128xbf16>, %k: memref<2x8x1000x128xbf16>,
                      %v: memref<2x8x1000x128xbf16>, %o: memref<2x32x1x128xbf16>,
                      %lse: memref<2x32x1xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x32x1x128xbf16> to tensor<2x32x1x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x8x1000x128xbf16> to tensor<2x8x1000x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x8x1000x128xbf16> to tensor<2x8x1000x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x32x1x128xbf16> to tensor<2x32x1x128xbf16>
  %lt = bufferization.to_tensor %lse restrict writable : memref<2x32x1xf32> to tensor<2x32x1xf32>
  %r:2 = flash.attention ins(%qt, %kt, %vt : tensor<2x32x1x128xbf16>, tensor<2x8x1000x128xbf16>, tensor<2x8x1000x128xbf16>)
      outs(%ot, %lt : tensor<2x32x1x128xbf16>, tensor<2x32x1xf32>) scale(0.088) -> tensor<2x32x1x128xbf16>, tensor<2x32x1xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<2x32x1x128xbf16>, memref<2x32x1x128xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<2x32x1xf32>, memref<2x32x1xf32>) -> ()
  return
}

// -----

// Sinks, f16, two consumer warpgroups (12 query heads × Lq = 16 = 192 packed
// rows, in 128-row blocks): the barrier counts both; the sink of each row's
// query head is read in the merge, not by the partials.
// 12 query heads per K/V head times Lq = 16: 192 rows, merged by the combine
// kernel unless fused-combine=1.
// AUTO-LABEL: func.func @decode_sinks
// AUTO-NOT: @flashRuntimeSplitCounters
// AUTO: gpu.launch_func async [%{{.*}}] @flash_attention_0::@combine
// AUTO: gpu.func @combine(
// CHECK-LABEL: func.func @decode_sinks
// CHECK: func.call @flashRuntimeSplitCounters
// CHECK-NOT: @combine
// CHECK: gpu.func @kernel({{.*}}memref<?xf32>
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: llvm.atomicrmw add
// CHECK: llvm.load volatile
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 2 : i64} : f16, !llvm.ptr
// PTX-LABEL: llvm.func @decode_sinks(
// PTX-NOT: .entry combine(
// PTX: atom.global.add.u32
// BIN: gpu.binary @flash_attention_0
func.func @decode_sinks(%q: memref<3x12x16x128xf16>, %k: memref<3x1x1000x128xf16>,
                        %v: memref<3x1x1000x128xf16>, %o: memref<3x12x16x128xf16>,
                        %s: memref<12xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<3x12x16x128xf16> to tensor<3x12x16x128xf16>
  %kt = bufferization.to_tensor %k restrict : memref<3x1x1000x128xf16> to tensor<3x1x1000x128xf16>
  %vt = bufferization.to_tensor %v restrict : memref<3x1x1000x128xf16> to tensor<3x1x1000x128xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x12x16x128xf16> to tensor<3x12x16x128xf16>
  %st = bufferization.to_tensor %s restrict : memref<12xf32> to tensor<12xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<3x12x16x128xf16>, tensor<3x1x1000x128xf16>, tensor<3x1x1000x128xf16>)
         outs(%ot : tensor<3x12x16x128xf16>) sinks(%st : tensor<12xf32>) scale(0.088)
         -> tensor<3x12x16x128xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<3x12x16x128xf16>, memref<3x12x16x128xf16>) -> ()
  return
}

// -----

// A paged cache takes the same merge.
// AUTO-LABEL: func.func @decode_paged
// AUTO: func.call @flashRuntimeSplitCounters
// AUTO-NOT: gpu.func @combine
// CHECK-LABEL: func.func @decode_paged
// CHECK: func.call @flashRuntimeSplitCounters
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel
// CHECK-NOT: gpu.launch_func
// CHECK-NOT: @combine
// CHECK: gpu.func @kernel(
// CHECK: llvm.atomicrmw add
// PTX-LABEL: llvm.func @decode_paged(
// PTX-NOT: .entry combine(
// PTX: atom.global.add.u32
// BIN: gpu.binary @flash_attention_0
func.func @decode_paged(%q: memref<4x32x1x128xbf16>, %kc: memref<300x48x8x128xbf16>,
                        %vc: memref<300x48x8x128xbf16>, %o: memref<4x32x1x128xbf16>,
                        %lse: memref<4x32x1xf32>, %t: memref<4x70xi32>, %n: memref<4xi32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<4x32x1x128xbf16> to tensor<4x32x1x128xbf16>
  %k_t = bufferization.to_tensor %kc restrict : memref<300x48x8x128xbf16> to tensor<300x48x8x128xbf16>
  %v_t = bufferization.to_tensor %vc restrict : memref<300x48x8x128xbf16> to tensor<300x48x8x128xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<4x32x1x128xbf16> to tensor<4x32x1x128xbf16>
  %l_t = bufferization.to_tensor %lse restrict writable : memref<4x32x1xf32> to tensor<4x32x1xf32>
  %t_t = bufferization.to_tensor %t restrict : memref<4x70xi32> to tensor<4x70xi32>
  %n_t = bufferization.to_tensor %n restrict : memref<4xi32> to tensor<4xi32>
  %r:2 = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<4x32x1x128xbf16>, tensor<300x48x8x128xbf16>, tensor<300x48x8x128xbf16>)
      pages(%t_t, %n_t : tensor<4x70xi32>, tensor<4xi32>)
      outs(%o_t, %l_t : tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>)
      scale(0.0883883) -> tensor<4x32x1x128xbf16>, tensor<4x32x1xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<4x32x1x128xbf16>, memref<4x32x1x128xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<4x32x1xf32>, memref<4x32x1xf32>) -> ()
  return
}

// -----

// 4 rows, but one K/V head in all: the split count may reach 128, too many
// for one warp per row to merge, so automatic takes the combine kernel.
// AUTO-LABEL: func.func @decode_one_kv_head
// AUTO-NOT: @flashRuntimeSplitCounters
// AUTO: gpu.launch_func async [%{{.*}}] @flash_attention_0::@combine
func.func @decode_one_kv_head(%q: memref<1x4x1x128xbf16>, %k: memref<1x1x20000x128xbf16>,
                              %v: memref<1x1x20000x128xbf16>, %o: memref<1x4x1x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x4x1x128xbf16> to tensor<1x4x1x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x20000x128xbf16> to tensor<1x1x20000x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x1x20000x128xbf16> to tensor<1x1x20000x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x4x1x128xbf16> to tensor<1x4x1x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<1x4x1x128xbf16>, tensor<1x1x20000x128xbf16>, tensor<1x1x20000x128xbf16>)
      outs(%ot : tensor<1x4x1x128xbf16>) scale(0.088) -> tensor<1x4x1x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x4x1x128xbf16>, memref<1x4x1x128xbf16>) -> ()
  return
}
