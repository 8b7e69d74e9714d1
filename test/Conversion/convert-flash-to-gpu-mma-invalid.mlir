// RUN: flash-opt %s -split-input-file -convert-flash-to-gpu=kernel=mma -verify-diagnostics -o /dev/null

func.func @d_not_multiple_of_16(%q: memref<4x40xbf16>, %o: memref<4x40xbf16>) {
  %qt = bufferization.to_tensor %q restrict : memref<4x40xbf16> to tensor<4x40xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<4x40xbf16> to tensor<4x40xbf16>
  // expected-error @+1 {{convert-flash-to-gpu: head dims must be D a multiple of 16 and Dv of 8, both up to 256, got D = 40, Dv = 40}}
  %r = flash.attention ins(%qt, %qt, %qt : tensor<4x40xbf16>, tensor<4x40xbf16>, tensor<4x40xbf16>)
         outs(%ot : tensor<4x40xbf16>) scale(0.125) -> tensor<4x40xbf16>
  return
}

// -----

func.func @f32(%q: memref<4x64xf32>, %o: memref<4x64xf32>) {
  %qt = bufferization.to_tensor %q restrict : memref<4x64xf32> to tensor<4x64xf32>
  %ot = bufferization.to_tensor %o restrict writable : memref<4x64xf32> to tensor<4x64xf32>
  // expected-error @+1 {{convert-flash-to-gpu: query, key and value must all be bf16 or all f16}}
  %r = flash.attention ins(%qt, %qt, %qt : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>)
         outs(%ot : tensor<4x64xf32>) scale(0.125) -> tensor<4x64xf32>
  return
}
