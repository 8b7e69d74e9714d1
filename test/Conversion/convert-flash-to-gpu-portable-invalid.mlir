// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu -verify-diagnostics -o /dev/null

// Head dims whose tiles cannot fit even one key are refused, not mis-tiled.
func.func @huge_head_dim(%q: memref<4x8192xf16>, %o: memref<4x8192xf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<4x8192xf16> to tensor<4x8192xf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<4x8192xf16> to tensor<4x8192xf16>
  // expected-error @+1 {{convert-flash-to-gpu: head dims D = 8192, Dv = 8192 are too large for a shared-memory tile of one key}}
  %r = flash.attention ins(%qt, %qt, %qt : tensor<4x8192xf16>, tensor<4x8192xf16>, tensor<4x8192xf16>)
         outs(%ot : tensor<4x8192xf16>) scale(0.125) -> tensor<4x8192xf16>
  return
}

