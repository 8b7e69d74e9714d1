// Index width on the GPU paths: the kernels compute indices in 64-bit
// `index`; the one narrowing is the wgmma kernel's TMA coordinates (32-bit
// signed), so a static length or batch·head count of 2^31 or more is refused
// there, and kernel=auto lowers the op with the mma.sync kernel instead.
// RUN: not flash-opt %s -convert-flash-to-gpu=kernel=wgmma 2>&1 | FileCheck %s --check-prefix=WGMMA
// RUN: flash-opt %s -convert-flash-to-gpu | FileCheck %s --check-prefix=AUTO
// WGMMA: convert-flash-to-gpu: the wgmma kernel's TMA coordinates are 32-bit: key tensor<1x2147483648x64xbf16> has a batch·head count or length of 2^31 or more
// AUTO: gpu.func @kernel
// AUTO-NOT: nvvm.wgmma
// AUTO: nvvm.mma.sync
func.func @huge_lk(%q: memref<1x64x64xbf16>, %k: memref<1x2147483648x64xbf16>, %v: memref<1x2147483648x64xbf16>, %o: memref<1x64x64xbf16>) {
  %q_t = bufferization.to_tensor %q restrict : memref<1x64x64xbf16> to tensor<1x64x64xbf16>
  %k_t = bufferization.to_tensor %k restrict : memref<1x2147483648x64xbf16> to tensor<1x2147483648x64xbf16>
  %v_t = bufferization.to_tensor %v restrict : memref<1x2147483648x64xbf16> to tensor<1x2147483648x64xbf16>
  %o_t = bufferization.to_tensor %o restrict writable : memref<1x64x64xbf16> to tensor<1x64x64xbf16>
  %r = flash.attention ins(%q_t, %k_t, %v_t : tensor<1x64x64xbf16>, tensor<1x2147483648x64xbf16>, tensor<1x2147483648x64xbf16>) outs(%o_t : tensor<1x64x64xbf16>) scale(0.125) -> tensor<1x64x64xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x64x64xbf16>, memref<1x64x64xbf16>) -> ()
  return
}
