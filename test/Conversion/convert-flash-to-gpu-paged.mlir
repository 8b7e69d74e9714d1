// A paged KV cache on the GPU: flash.paged_attention with kernel=splitkv
// lowers to the split-KV kernel, whose copies read each key row through the
// block table (convert-flash-to-gpu-paged-wgmma.mlir: the wgmma kernel,
// which kernel=auto takes for this op on sm_90a).
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=splitkv" | FileCheck %s
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=mma" 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="chip=sm_75" 2>&1 | FileCheck %s --check-prefix=OLDCHIP
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa kernel=splitkv" | FileCheck %s --check-prefix=PTX

// MMA: a paged KV cache is read by the split-KV kernel or the wgmma kernel (kernel=auto, kernel=splitkv or kernel=wgmma), got kernel=mma
// OLDCHIP: the split-KV kernel needs sm_80 or newer

// GQA 32/8 decode with pages of 48 keys (not a power of two). The host side
// sizes the split from the table's capacity (max_pages · 48); the kernel
// reads this sequence's length, clamps it to the capacity (0 for an empty
// pool), and turns key j into (table[b, j / 48] clamped into the pool,
// j mod 48, the K/V head, the column).
// CHECK-LABEL: func.func @decode_paged
// CHECK: %[[CAP:.*]] = arith.muli %{{.*}}, %c48 : index
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}} args({{.*}} : memref<?x?x128xbf16>, {{.*}} : memref<?x48x?x128xbf16>, {{.*}} : memref<?x48x?x128xbf16>, {{.*}} : memref<?x?x128xbf16>, {{.*}} : memref<?x?xf32>, {{.*}} : index, {{.*}} : index, {{.*}} : index, {{.*}} : memref<?x?xi32>, {{.*}} : memref<?xi32>,
// CHECK: gpu.func @kernel(%[[Q:.*]]: memref<?x?x128xbf16>, %[[K:.*]]: memref<?x48x?x128xbf16>, %[[V:.*]]: memref<?x48x?x128xbf16>, %{{.*}}: memref<?x?x128xbf16>, %{{.*}}: memref<?x?xf32>, %[[HKV:.*]]: index, %{{.*}}: index, %{{.*}}: index, %[[T:.*]]: memref<?x?xi32>, %[[N:.*]]: memref<?xi32>,
// CHECK: %[[B:.*]] = arith.divui %[[KVBH:.*]], %[[HKV]] : index
// CHECK: %[[H:.*]] = arith.remui %[[KVBH]], %[[HKV]] : index
// CHECK: %[[P:.*]] = memref.dim %[[K]], %c0
// CHECK: %[[LEN:.*]] = memref.load %[[N]][%[[B]]] : memref<?xi32>
// CHECK: scf.for
// CHECK: %[[SLOT:.*]] = arith.divui %[[J:.*]], %c48
// CHECK: %[[E:.*]] = memref.load %[[T]][%[[B]], %[[SLOT]]] : memref<?x?xi32>
// CHECK: %[[PG:.*]] = arith.index_cast %[[E]] : i32 to index
// CHECK: arith.maxsi %[[PG]], %c0
// CHECK: %[[ROW:.*]] = arith.remui %[[J]], %c48
// CHECK: nvgpu.device_async_copy %[[K]][%{{.*}}, %[[ROW]], %[[H]], %{{.*}}]
// CHECK: gpu.func @combine(
// PTX-LABEL: .entry kernel(
// PTX: cp.async.cg.shared.global
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// PTX-LABEL: .entry combine(
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

// Sinks and a window over a paged cache (gpt-oss's local layers): the sinks
// follow the batch sizes in the kernel's arguments, the partials leave them
// out and the combine counts each row's once.
// CHECK-LABEL: func.func @decode_paged_sinks_window
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@kernel {{.*}} : index, %{{.*}} : memref<?xf32>, %{{.*}} : memref<?x?xi32>, %{{.*}} : memref<?xi32>,
// CHECK: gpu.launch_func async [%{{.*}}] @flash_attention_0::@combine {{.*}}memref<?xf32>
// CHECK: gpu.func @kernel(
// CHECK-SAME: %{{.*}}: index, %{{.*}}: memref<?xf32>, %{{.*}}: memref<?x?xi32>, %{{.*}}: memref<?xi32>,
// CHECK: gpu.func @combine(
// CHECK-SAME: memref<?xf32>
// CHECK: memref.load %{{.+}}[%{{.+}}] : memref<?xf32>
// PTX-LABEL: llvm.func @decode_paged_sinks_window(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: .target sm_90a
func.func @decode_paged_sinks_window(%q: memref<2x8x1x64xbf16>, %kc: memref<40x32x2x64xbf16>,
                                     %vc: memref<40x32x2x64xbf16>, %o: memref<2x8x1x64xbf16>,
                                     %t: memref<2x20xi32>, %n: memref<2xi32>, %s: memref<8xf32>) {
  %q_t = bufferization.to_tensor %q restrict : memref<2x8x1x64xbf16> to tensor<2x8x1x64xbf16>
  %k_t = bufferization.to_tensor %kc restrict : memref<40x32x2x64xbf16> to tensor<40x32x2x64xbf16>
  %v_t = bufferization.to_tensor %vc restrict : memref<40x32x2x64xbf16> to tensor<40x32x2x64xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x8x1x64xbf16> to tensor<2x8x1x64xbf16>
  %t_t = bufferization.to_tensor %t restrict : memref<2x20xi32> to tensor<2x20xi32>
  %n_t = bufferization.to_tensor %n restrict : memref<2xi32> to tensor<2xi32>
  %s_t = bufferization.to_tensor %s restrict : memref<8xf32> to tensor<8xf32>
  %r = flash.paged_attention ins(%q_t, %k_t, %v_t : tensor<2x8x1x64xbf16>, tensor<40x32x2x64xbf16>, tensor<40x32x2x64xbf16>)
      pages(%t_t, %n_t : tensor<2x20xi32>, tensor<2xi32>)
      outs(%o_t : tensor<2x8x1x64xbf16>) sinks(%s_t : tensor<8xf32>)
      scale(0.125) mask(sliding_window, 128, bottom_right) -> tensor<2x8x1x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x8x1x64xbf16>, memref<2x8x1x64xbf16>) -> ()
  return
}
