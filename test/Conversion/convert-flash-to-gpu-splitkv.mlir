// The split-KV decode kernel (kernel=splitkv; kernel=auto when the query rows
// of a K/V head, Lq · group, fit one CTA and the wgmma decode form does not
// take them): GQA rows packed into one tile, the key tiles split over grid.x,
// partials merged by LSE in a second kernel.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=splitkv | FileCheck %s --check-prefix=SPLIT
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=split-kv=3 | FileCheck %s --check-prefix=FIXED
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=splitkv chip=sm_75" 2>&1 | FileCheck %s --check-prefix=OLDCHIP
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="split-kv=-1" 2>&1 | FileCheck %s --check-prefix=BADSPLIT
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa kernel=splitkv" | FileCheck %s --check-prefix=PTX

// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="stages=1" 2>&1 | FileCheck %s --check-prefix=ONESTAGE
// OLDCHIP: the splitkv kernel needs sm_80 or newer, got 'sm_75'
// ONESTAGE: convert-flash-to-gpu: the split-KV kernel's ring needs stages >= 2, got 1
// BADSPLIT: split-kv must be >= 0 (0: automatic), got -1

// Decode, GQA 32 query heads on 8 K/V heads, Lq = 1: 4 packed rows, one
// 16-row slice, so the four warps split each 64-key tile (16 keys each).
// The split count comes from the runtime's SM count; the partials are
// allocated on the caller's stream, merged by the combine kernel only when
// there is more than one split, and freed on the stream.
// kernel=auto gives the same shape to the wgmma kernel's decode form (rows
// of the four query heads of a K/V head packed, see spec_decode_packs_on_wgmma
// below); kernel=splitkv keeps this kernel.
// CHECK-LABEL: func.func @decode_gqa
// CHECK: memref.expand_shape
// CHECK: gpu.launch_func async [%{{.+}}] @flash_attention_0::@kernel
// CHECK: gpu.func @kernel(
// CHECK-NOT: nvvm.mma.sync
// CHECK: nvvm.wgmma.mma_async
// The split count is the same answer on every call of a static shape, so
// each launch site keeps its last question and answer in one word, read and
// written atomically; the search runs only on a miss.
// SPLIT: llvm.mlir.global internal @__flash_split_memo_0(0 : i64) {{.*}}alignment = 8 : i64{{.*}} : i64
// SPLIT-LABEL: func.func @decode_gqa
// SPLIT: func.call @flashRuntimeMultiprocessorCount() : () -> i32
// SPLIT: %[[MEMOADDR:.*]] = llvm.mlir.addressof @__flash_split_memo_0 : !llvm.ptr
// SPLIT: %[[PACKED:.*]] = llvm.load %[[MEMOADDR]] atomic monotonic {alignment = 8 : i64} : !llvm.ptr -> i64
// SPLIT: %[[HIT:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// SPLIT: scf.if %[[HIT]] -> (index) {
// SPLIT: arith.shrui %[[PACKED]], %c56_i64
// SPLIT: } else {
// SPLIT: scf.for
// SPLIT: scf.for
// SPLIT: llvm.store %{{.*}}, %[[MEMOADDR]] atomic monotonic {alignment = 8 : i64} : i64, !llvm.ptr
// SPLIT: %[[MULTI:.*]] = arith.cmpi sgt, %[[SPLITS:.*]], %c1
// Both partials are views of one buffer: one allocation and one free.
// SPLIT: %[[P:.*]], %{{.*}} = gpu.alloc async [%[[TOK:.*]]] (%{{.*}}) : memref<?xi8>
// SPLIT: memref.view %[[P]][%c0{{.*}}][%{{.*}}, %{{.*}}] : memref<?xi8> to memref<?x?x128xf32>
// SPLIT: memref.view %[[P]][%{{.*}}][%{{.*}}, %{{.*}}] : memref<?xi8> to memref<?x?xf32>
// The batch·head axis continues in grid.z past grid.y's 65535, and the
// kernel ends CTAs past its end (batchHeadBlock).
// SPLIT: %[[GY:.*]] = arith.minsi %[[BH:.*]], %c65535
// SPLIT: %[[GZ:.*]] = arith.ceildivsi %[[BH]], %c65535
// SPLIT: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel blocks in (%[[SPLITS]], %[[GY]], %[[GZ]]) threads in (%c128{{.*}}, %{{.*}}, %{{.*}}) dynamic_shared_memory_size %c104448_i32
// SPLIT: scf.if %[[MULTI]]
// SPLIT: gpu.launch_func async [%{{.*}}] @flash_attention_0::@combine
// SPLIT: gpu.dealloc async [%[[TOK]]] %[[P]]
// SPLIT-NOT: gpu.dealloc
// SPLIT: gpu.func @kernel(
// SPLIT: gpu.dynamic_shared_memory
// SPLIT: memref.view {{.*}} to memref<3x64x136xbf16, #gpu.address_space<workgroup>>
// SPLIT: gpu.block_id  z
// SPLIT: cf.cond_br %{{.*}}, ^[[BODY:.*]], ^[[EXIT:[a-z0-9]+]]
// SPLIT: ^[[BODY]]:
// SPLIT: nvgpu.device_async_copy {{.*}} {bypassL1} : memref<?x?x128xbf16> to memref<3x64x136xbf16, #gpu.address_space<workgroup>>
// SPLIT: nvvm.cp.async.commit.group
// SPLIT: scf.for
// SPLIT: nvvm.cp.async.wait.group 1
// SPLIT: gpu.barrier
// SPLIT-COUNT-32: nvvm.mma.sync
// SPLIT-NOT: nvvm.mma.sync
// SPLIT: ^[[EXIT]]:
// SPLIT-NEXT: gpu.return
// SPLIT: gpu.func @combine(
// SPLIT: scf.for
// SPLIT: gpu.return

// FIXED-LABEL: func.func @decode_gqa
// FIXED-NOT: flashRuntimeMultiprocessorCount
// FIXED: %[[TPS:.*]] = arith.ceildivsi %{{.*}}, %c3
// FIXED-LABEL: func.func @short_query_dynamic_keys

// PTX-LABEL: llvm.func @decode_gqa(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: .target sm_90a
// PTX-NOT: .local
// PTX-DAG: cp.async.cg.shared.global [%rd{{[0-9]+}}], [%rd{{[0-9]+}}], 16;
// PTX-DAG: cp.async.wait_group {{(\\09)?}}1;
// PTX-DAG: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-DAG: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// PTX-DAG: .entry combine(
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

// Speculative decode: 16 query rows, GQA 4:1 = 64 packed rows in four row
// slices (one warp each, whole 64-key tiles), causal bottom-right, the key
// length dynamic (the cache grows; one kernel serves every length).
// CHECK-LABEL: func.func @short_query_dynamic_keys
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel
// CHECK: gpu.func @kernel(
// CHECK-NOT: gpu.barrier
// CHECK: scf.for
// CHECK-COUNT-64: nvvm.mma.sync
// CHECK-NOT: nvvm.mma.sync
// CHECK: gpu.func @combine(
func.func @short_query_dynamic_keys(%q: memref<1x8x16x64xf16>, %k: memref<1x2x?x64xf16>,
                                    %v: memref<1x2x?x64xf16>, %o: memref<1x8x16x64xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x8x16x64xf16> to tensor<1x8x16x64xf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x?x64xf16> to tensor<1x2x?x64xf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x2x?x64xf16> to tensor<1x2x?x64xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x8x16x64xf16> to tensor<1x8x16x64xf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<1x8x16x64xf16>, tensor<1x2x?x64xf16>, tensor<1x2x?x64xf16>)
      outs(%ot : tensor<1x8x16x64xf16>) scale(0.125) mask(causal, bottom_right) -> tensor<1x8x16x64xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x8x16x64xf16>, memref<1x8x16x64xf16>) -> ()
  return
}

// -----

// Prefill (Lq · group = 1200 rows) stays on the wgmma kernel under auto.
// CHECK-LABEL: func.func @prefill_stays_on_wgmma
// CHECK-NOT: flashRuntimeMultiprocessorCount
// CHECK: nvvm.wgmma.mma_async
func.func @prefill_stays_on_wgmma(%q: memref<1x4x300x64xbf16>, %k: memref<1x1x300x64xbf16>,
                                  %o: memref<1x4x300x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x4x300x64xbf16> to tensor<1x4x300x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x300x64xbf16> to tensor<1x1x300x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x4x300x64xbf16> to tensor<1x4x300x64xbf16>
  %r = flash.attention ins(%qt, %kt, %kt : tensor<1x4x300x64xbf16>, tensor<1x1x300x64xbf16>, tensor<1x1x300x64xbf16>)
      outs(%ot : tensor<1x4x300x64xbf16>) scale(0.125) -> tensor<1x4x300x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x4x300x64xbf16>, memref<1x4x300x64xbf16>) -> ()
  return
}

// -----

// One head per K/V head and 48 query rows: with 64 heads the prefill grid
// fills the chip and the wgmma kernel is faster (its decode form, which
// splits the keys only when the heads leave SMs idle); with 2 heads the
// split kernel.
// CHECK-LABEL: func.func @mha_48_rows_many_heads
// CHECK-NOT: nvvm.mma.sync
// CHECK: nvvm.wgmma.mma_async
// CHECK-NOT: nvvm.mma.sync
func.func @mha_48_rows_many_heads(%q: memref<2x32x48x64xbf16>, %k: memref<2x32x2048x64xbf16>,
                                  %o: memref<2x32x48x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x32x48x64xbf16> to tensor<2x32x48x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x32x2048x64xbf16> to tensor<2x32x2048x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x32x48x64xbf16> to tensor<2x32x48x64xbf16>
  %r = flash.attention ins(%qt, %kt, %kt : tensor<2x32x48x64xbf16>, tensor<2x32x2048x64xbf16>, tensor<2x32x2048x64xbf16>)
      outs(%ot : tensor<2x32x48x64xbf16>) scale(0.125) -> tensor<2x32x48x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x32x48x64xbf16>, memref<2x32x48x64xbf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @mha_48_rows_few_heads
// CHECK: func.call @flashRuntimeMultiprocessorCount
// CHECK: gpu.func @combine(
func.func @mha_48_rows_few_heads(%q: memref<1x2x48x64xbf16>, %k: memref<1x2x65536x64xbf16>,
                                 %o: memref<1x2x48x64xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<1x2x48x64xbf16> to tensor<1x2x48x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x2x65536x64xbf16> to tensor<1x2x65536x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x2x48x64xbf16> to tensor<1x2x48x64xbf16>
  %r = flash.attention ins(%qt, %kt, %kt : tensor<1x2x48x64xbf16>, tensor<1x2x65536x64xbf16>, tensor<1x2x65536x64xbf16>)
      outs(%ot : tensor<1x2x48x64xbf16>) scale(0.125) -> tensor<1x2x48x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x2x48x64xbf16>, memref<1x2x48x64xbf16>) -> ()
  return
}

// -----

// Speculative decode, GQA 32/8 with 16 query rows: the 64 rows of a K/V head
// pack into one wgmma tile ([2, 32, 16, 128] viewed as [16, 64, 128]), so
// kernel=auto takes the wgmma kernel's decode form: one warpgroup of 64 rows,
// the split count from the SM count, partials and the combine (64 rows are
// too many for the kernel's last CTA to merge, see fused-combine).
// CHECK-LABEL: func.func @spec_decode_packs_on_wgmma
// CHECK: memref.collapse_shape %{{.+}} {{\[}}[0, 1, 2], [3]] : memref<2x32x16x128xbf16> into memref<1024x128xbf16>
// CHECK: memref.expand_shape %{{.+}} {{\[}}[0, 1], [2]] output_shape [%{{.+}}, %{{.+}}, 128] : memref<?x128xbf16> into memref<?x?x128xbf16>
// CHECK: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<1x64x64xbf16, 3>
// CHECK: func.call @flashRuntimeMultiprocessorCount
// CHECK: gpu.alloc async
// CHECK-NOT: @flashRuntimeSplitCounters
// CHECK: gpu.launch_func async [%{{.+}}] @flash_attention_0::@kernel
// CHECK-SAME: threads in (%c256
// CHECK: gpu.launch_func async [%{{.+}}] @flash_attention_0::@combine
// CHECK: gpu.dealloc async
// CHECK: gpu.func @kernel({{.*}}: !llvm.ptr, {{.*}}: !llvm.ptr, {{.*}}: index, {{.*}}: index) kernel
// CHECK-NOT: nvvm.mma.sync
// CHECK: nvvm.wgmma.mma_async
// CHECK: gpu.func @combine(
func.func @spec_decode_packs_on_wgmma(%q: memref<2x32x16x128xbf16>, %k: memref<2x8x4096x128xbf16>,
                                      %o: memref<2x32x16x128xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x32x16x128xbf16> to tensor<2x32x16x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x8x4096x128xbf16> to tensor<2x8x4096x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x32x16x128xbf16> to tensor<2x32x16x128xbf16>
  %r = flash.attention ins(%qt, %kt, %kt : tensor<2x32x16x128xbf16>, tensor<2x8x4096x128xbf16>, tensor<2x8x4096x128xbf16>)
      outs(%ot : tensor<2x32x16x128xbf16>) scale(0.125) -> tensor<2x32x16x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x32x16x128xbf16>, memref<2x32x16x128xbf16>) -> ()
  return
}
