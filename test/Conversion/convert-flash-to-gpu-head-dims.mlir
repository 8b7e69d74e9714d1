// The wgmma kernel's head dims are whole 64-column panels up to 256: D, Dv in
// {64, 128, 192, 256}. Past 128 the key tile shrinks (block-n=0) until Q and a
// two-stage K/V ring fit in shared memory: 80 keys at D = Dv = 256, 128 at
// D = 192 / Dv = 128. A tile the user forces past that is refused.
// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu | FileCheck %s
// RUN: env -u CUDA_HOME flash-opt %s -split-input-file --flash-gpu-pipeline="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: not flash-opt %s -split-input-file -convert-flash-to-gpu="block-n=128" 2>&1 | FileCheck %s --check-prefix=SMEM

// SMEM: convert-flash-to-gpu: the wgmma kernel's shared memory (1 Q buffer of 128 rows, 2 stages of 128-key K/V tiles at D = 256, Dv = 256) is {{[0-9]+}} bytes, more than the 232448 a CTA may have: lower block-n, block-m, stages or q-buffers

// CHECK-LABEL: func.func @d256_causal
// CHECK: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<1x128x64xbf16, 3>
// CHECK: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<1x80x64xbf16, 3>
// CHECK: gpu.launch_func
// PTX-LABEL: .entry kernel(
// PTX: wgmma.mma_async.sync.aligned.m64n80k16.f32.bf16.bf16
// PTX: wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
func.func @d256_causal(%q: memref<2x8x1000x256xbf16>, %k: memref<2x8x1000x256xbf16>, %v: memref<2x8x1000x256xbf16>, %o: memref<2x8x1000x256xbf16>) attributes {llvm.emit_c_interface} {
  %q_t = bufferization.to_tensor %q restrict : memref<2x8x1000x256xbf16> to tensor<2x8x1000x256xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<2x8x1000x256xbf16> to tensor<2x8x1000x256xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<2x8x1000x256xbf16> to tensor<2x8x1000x256xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x8x1000x256xbf16> to tensor<2x8x1000x256xbf16>
  %r = flash.attention ins(%q_t, %k_t, %v_t : tensor<2x8x1000x256xbf16>, tensor<2x8x1000x256xbf16>, tensor<2x8x1000x256xbf16>) outs(%o_t : tensor<2x8x1000x256xbf16>) scale(6.250000000e-02) mask(causal, top_left) -> tensor<2x8x1000x256xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x8x1000x256xbf16>, memref<2x8x1000x256xbf16>) -> ()
  return
}

// -----

// CHECK-LABEL: func.func @d192_dv128_gqa
// CHECK: nvgpu.tma.create.descriptor {{.*}} -> <tensor = memref<1x128x64xbf16, 3>
// CHECK: gpu.launch_func
// PTX-LABEL: .entry kernel(
// PTX: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
func.func @d192_dv128_gqa(%q: memref<2x8x1000x192xbf16>, %k: memref<2x2x1000x192xbf16>, %v: memref<2x2x1000x128xbf16>, %o: memref<2x8x1000x128xbf16>) attributes {llvm.emit_c_interface} {
  %q_t = bufferization.to_tensor %q restrict : memref<2x8x1000x192xbf16> to tensor<2x8x1000x192xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<2x2x1000x192xbf16> to tensor<2x2x1000x192xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<2x2x1000x128xbf16> to tensor<2x2x1000x128xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<2x8x1000x128xbf16> to tensor<2x8x1000x128xbf16>
  %r = flash.attention ins(%q_t, %k_t, %v_t : tensor<2x8x1000x192xbf16>, tensor<2x2x1000x192xbf16>, tensor<2x2x1000x128xbf16>) outs(%o_t : tensor<2x8x1000x128xbf16>) scale(7.216878365e-02) -> tensor<2x8x1000x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<2x8x1000x128xbf16>, memref<2x8x1000x128xbf16>) -> ()
  return
}
