// A paged KV cache on the wgmma kernel: kernel=auto takes it on sm_90a for
// GQA without a mask. The query heads of a K/V head are the rows of one
// tile (Q viewed as [B·Hkv, G·Lq, D]), the pools are [pages·page_size, Hkv,
// D] token rows for TMA, and each K/V tile is loaded as boxes of
// gcd(block-n, page size) keys, each from the page the table names.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=wgmma" 2>&1 | FileCheck %s --check-prefix=PAGE24
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX

// GQA 32/8 decode, pages of 48 keys: 32 · 4 = 128 packed rows of 4 query
// heads per K/V head; the split count from the table's capacity (70 · 48).
// CHECK-LABEL: func.func @decode_paged
// CHECK-DAG: memref.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : memref<300x48x8x128xbf16> into memref<14400x8x128xbf16>
// CHECK-DAG: memref.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [%{{.*}}, %c4, 128] : memref<?x128xbf16> into memref<?x?x128xbf16>
// CHECK-DAG: %[[CAP:.*]] = arith.muli %{{.*}}, %c48 : index
// CHECK: nvgpu.tma.create.descriptor {{.*}} box[%c16, %c1{{.*}}, %c64{{.*}}] : memref<*xbf16> -> <tensor = memref<16x1x64xbf16, 3>
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}} args({{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, {{.*}} : !llvm.ptr, %c4 : index, %[[CAP]] : index, %c8 : index, {{.*}} : index, %c8 : index, {{.*}} : memref<?x?xi32>, {{.*}} : memref<?xi32>, {{.*}} : index,
// CHECK-NOT: @combine
// The kernel: this sequence's length clamped to the capacity, and for every
// 16-key box of a tile the table entry of its page, clamped into the pool.
// CHECK: gpu.func @kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: index, %[[LK:.*]]: index, %[[HKV:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[T:.*]]: memref<?x?xi32>, %[[N:.*]]: memref<?xi32>, %[[NP:.*]]: index,
// CHECK: memref.load %[[N]][%[[B:.*]]] : memref<?xi32>
// CHECK: arith.minsi %{{.*}}, %[[LK]] : index
// CHECK: scf.for
// CHECK: %[[SLOT:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK: %[[E:.*]] = memref.load %[[T]][%[[B]], %[[SLOT]]] : memref<?x?xi32>
// CHECK: %[[PG:.*]] = arith.index_cast %[[E]] : i32 to index
// CHECK: arith.maxsi %[[PG]], %c0
// CHECK: arith.remui %{{.*}}, %c48
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// The splits are merged by the last CTA of each row block.
// CHECK: llvm.atomicrmw add
// CHECK-NOT: gpu.func @combine(
// PTX-LABEL: .entry kernel(
// The consumers' branch comes first, then the producer's.
// PTX: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
// PTX-COUNT-34: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-NOT: mma.sync
// PTX-NOT: .entry combine(
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

// Pages of 24 keys: a TMA box that divides both the tile and the page would
// be 8 rows, so kernel=auto keeps the split-KV kernel, and kernel=wgmma says
// why not.
// CHECK-LABEL: func.func @page24
// CHECK: gpu.launch_func async
// CHECK: nvgpu.device_async_copy
// PAGE24: the wgmma kernel reads pages of a multiple of 16 keys (whole swizzle atoms per TMA box), got page size 24
// PTX-LABEL: .entry kernel(
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
func.func @page24(%q: memref<2x8x1x64xbf16>, %kc: memref<40x24x2x64xbf16>, %vc: memref<40x24x2x64xbf16>,
                  %o: memref<2x8x1x64xbf16>, %t: memref<2x20xi32>, %n: memref<2xi32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<2x8x1x64xbf16> to tensor<2x8x1x64xbf16>
  %k_t = bufferization.to_tensor %kc restrict : memref<40x24x2x64xbf16> to tensor<40x24x2x64xbf16>
  %v_t = bufferization.to_tensor %vc restrict : memref<40x24x2x64xbf16> to tensor<40x24x2x64xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x8x1x64xbf16> to tensor<2x8x1x64xbf16>
  %t_t = bufferization.to_tensor %t restrict : memref<2x20xi32> to tensor<2x20xi32>
  %n_t = bufferization.to_tensor %n restrict : memref<2xi32> to tensor<2xi32>
  %r = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<2x8x1x64xbf16>, tensor<40x24x2x64xbf16>, tensor<40x24x2x64xbf16>) pages(%t_t, %n_t : tensor<2x20xi32>, tensor<2xi32>) outs(%o_t : tensor<2x8x1x64xbf16>) scale(0.125) -> tensor<2x8x1x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x8x1x64xbf16>, memref<2x8x1x64xbf16>) -> ()
  return
}

// -----

// gpt-oss from a paged cache: the sinks are the kernel's argument after the
// batch sizes (before the pages), and the last CTA of a row block counts
// each row's sink once when it merges the splits.
// CHECK-LABEL: func.func @decode_paged_sinks
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}} : index, %{{.*}} : memref<?xbf16>, %{{.*}} : memref<?x?xi32>, %{{.*}} : memref<?xi32>,
// CHECK: gpu.func @kernel(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[S:.*]]: memref<?xbf16>, %{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?xi32>,
// CHECK: llvm.atomicrmw add
// CHECK: memref.load %[[S]][%{{.*}}] : memref<?xbf16>
// CHECK-NOT: gpu.func @combine(
func.func @decode_paged_sinks(%q: memref<4x8x1x64xbf16>, %kc: memref<40x16x2x64xbf16>,
                              %vc: memref<40x16x2x64xbf16>, %o: memref<4x8x1x64xbf16>,
                              %t: memref<4x10xi32>, %n: memref<4xi32>, %s: memref<8xbf16>) {
  %q_t = bufferization.to_tensor %q restrict : memref<4x8x1x64xbf16> to tensor<4x8x1x64xbf16>
  %k_t = bufferization.to_tensor %kc restrict : memref<40x16x2x64xbf16> to tensor<40x16x2x64xbf16>
  %v_t = bufferization.to_tensor %vc restrict : memref<40x16x2x64xbf16> to tensor<40x16x2x64xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<4x8x1x64xbf16> to tensor<4x8x1x64xbf16>
  %t_t = bufferization.to_tensor %t restrict : memref<4x10xi32> to tensor<4x10xi32>
  %n_t = bufferization.to_tensor %n restrict : memref<4xi32> to tensor<4xi32>
  %s_t = bufferization.to_tensor %s restrict : memref<8xbf16> to tensor<8xbf16>
  %r = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<4x8x1x64xbf16>, tensor<40x16x2x64xbf16>, tensor<40x16x2x64xbf16>)
      pages(%t_t, %n_t : tensor<4x10xi32>, tensor<4xi32>)
      outs(%o_t : tensor<4x8x1x64xbf16>) sinks(%s_t : tensor<8xbf16>)
      scale(0.125) -> tensor<4x8x1x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<4x8x1x64xbf16>, memref<4x8x1x64xbf16>) -> ()
  return
}
