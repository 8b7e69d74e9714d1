// Attention sinks on the GPU: every kernel takes the [Hq] sinks after the
// captures and merges its head's sink into each finished row (finishRow:
// one more key of value zero, its logit read once per row, times log2 e);
// a split-KV decode leaves it out of the partials and the combine counts it
// once.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=portable | FileCheck %s --check-prefix=PORT
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=mma | FileCheck %s --check-prefix=MMA
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=wgmma | FileCheck %s --check-prefix=WGMMA
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=splitkv split-kv=3" | FileCheck %s --check-prefix=SPLIT
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu="kernel=wgmma split-kv=3 fused-combine=0" | FileCheck %s --check-prefix=WDEC
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa fused-combine=0" | FileCheck %s --check-prefix=PTX
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa kernel=splitkv" | FileCheck %s --check-prefix=PTX

// PORT-LABEL: func.func @prefill
// PORT: gpu.launch_func async [%{{.+}}] @flash_attention_0::@kernel {{.*}}memref<?xbf16>
// PORT: gpu.func @kernel(
// PORT-SAME: memref<?xbf16>
// PORT: memref.load %{{.+}}[%{{.+}}] : memref<?xbf16>
// PORT: arith.extf %{{.+}} : bf16 to f32
// MMA-LABEL: func.func @prefill
// MMA: gpu.func @kernel(
// MMA-SAME: memref<?xbf16>
// MMA: nvvm.mma.sync
// MMA: memref.load %{{.+}}[%{{.+}}] : memref<?xbf16>
// WGMMA-LABEL: func.func @prefill
// WGMMA: gpu.func @kernel(
// WGMMA-SAME: memref<?xbf16>
// WGMMA: nvvm.wgmma.mma_async
// WGMMA: memref.load %{{.+}}[%{{.+}}] : memref<?xbf16>
// PTX-LABEL: llvm.func @prefill(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: .target sm_90a
// PTX-NOT: .local
func.func @prefill(%q: memref<2x4x100x64xbf16>, %k: memref<2x2x70x64xbf16>,
                   %v: memref<2x2x70x64xbf16>, %o: memref<2x4x100x64xbf16>,
                   %lse: memref<2x4x100xf32>, %s: memref<4xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<2x4x100x64xbf16> to tensor<2x4x100x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<2x2x70x64xbf16> to tensor<2x2x70x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x4x100x64xbf16> to tensor<2x4x100x64xbf16>
  %lt = bufferization.to_tensor %lse restrict writable : memref<2x4x100xf32> to tensor<2x4x100xf32>
  %st = bufferization.to_tensor %s restrict : memref<4xbf16> to tensor<4xbf16>
  %r:2 = flash.attention ins(%qt, %kt, %vt : tensor<2x4x100x64xbf16>, tensor<2x2x70x64xbf16>, tensor<2x2x70x64xbf16>)
           outs(%ot, %lt : tensor<2x4x100x64xbf16>, tensor<2x4x100xf32>) sinks(%st : tensor<4xbf16>)
           scale(0.125) mask(sliding_window, 32)
           -> tensor<2x4x100x64xbf16>, tensor<2x4x100xf32>
  bufferization.materialize_in_destination %r#0 in restrict writable %o : (tensor<2x4x100x64xbf16>, memref<2x4x100x64xbf16>) -> ()
  bufferization.materialize_in_destination %r#1 in restrict writable %lse : (tensor<2x4x100xf32>, memref<2x4x100xf32>) -> ()
  return
}

// -----

// Decode, GQA 8 query heads on 2 K/V heads, Lq = 2: the key range split in
// three; the partials do not see the sink, the combine reads it per row.
// SPLIT-LABEL: func.func @decode
// SPLIT: gpu.launch_func async [%{{.+}}] @flash_attention_0::@kernel
// SPLIT: gpu.launch_func async [%{{.+}}] @flash_attention_0::@combine {{.*}}memref<?xf32>
// SPLIT: gpu.func @kernel(
// SPLIT-SAME: memref<?xf32>
// SPLIT: gpu.func @combine(
// SPLIT-SAME: memref<?xf32>
// SPLIT: memref.load %{{.+}}[%{{.+}}] : memref<?xf32>
// WDEC-LABEL: func.func @decode
// WDEC: gpu.launch_func async [%{{.+}}] @flash_attention_0::@kernel
// WDEC: gpu.launch_func async [%{{.+}}] @flash_attention_0::@combine {{.*}}memref<?xf32>
// WDEC: gpu.func @kernel(
// WDEC-SAME: memref<?xf32>
// WDEC: nvvm.wgmma.mma_async
// WDEC: gpu.func @combine(
// WDEC-SAME: memref<?xf32>
// WDEC: memref.load %{{.+}}[%{{.+}}] : memref<?xf32>
// PTX-LABEL: llvm.func @decode(
// PTX: gpu.binary @flash_attention_0
// PTX-SAME: .target sm_90a
// PTX-NOT: .local
// PTX: .entry combine(
func.func @decode(%q: memref<3x8x2x128xf16>, %k: memref<3x2x1000x128xf16>,
                  %v: memref<3x2x1000x128xf16>, %o: memref<3x8x2x128xf16>,
                  %s: memref<8xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<3x8x2x128xf16> to tensor<3x8x2x128xf16>
  %kt = bufferization.to_tensor %k restrict : memref<3x2x1000x128xf16> to tensor<3x2x1000x128xf16>
  %vt = bufferization.to_tensor %v restrict : memref<3x2x1000x128xf16> to tensor<3x2x1000x128xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<3x8x2x128xf16> to tensor<3x8x2x128xf16>
  %st = bufferization.to_tensor %s restrict : memref<8xf32> to tensor<8xf32>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<3x8x2x128xf16>, tensor<3x2x1000x128xf16>, tensor<3x2x1000x128xf16>)
         outs(%ot : tensor<3x8x2x128xf16>) sinks(%st : tensor<8xf32>) scale(0.088)
         -> tensor<3x8x2x128xf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<3x8x2x128xf16>, memref<3x8x2x128xf16>) -> ()
  return
}
