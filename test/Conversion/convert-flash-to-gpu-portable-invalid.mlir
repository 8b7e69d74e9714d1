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


// -----

// A tile of a larger attention (what TilingInterface produces) is refused:
// the kernels would apply the causal mask at relative rows.
func.func @tile_with_offsets(%q: memref<2x16x64xbf16>, %k: memref<2x40x64xbf16>,
                             %o: memref<2x16x64xbf16>, %i: index) {
  %qt = bufferization.to_tensor %q restrict : memref<2x16x64xbf16> to tensor<2x16x64xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<2x40x64xbf16> to tensor<2x40x64xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<2x16x64xbf16> to tensor<2x16x64xbf16>
  %c0 = arith.constant 0 : index
  %n = arith.constant 40 : index
  // expected-error @+1 {{convert-flash-to-gpu: a tile of a larger attention (offsets / query_len) is not supported by the GPU kernels}}
  %r = flash.attention ins(%qt, %kt, %kt : tensor<2x16x64xbf16>, tensor<2x40x64xbf16>, tensor<2x40x64xbf16>)
         outs(%ot : tensor<2x16x64xbf16>) offsets(%c0, %i) query_len(%n) scale(0.125) mask(causal)
         -> tensor<2x16x64xbf16>
  return
}
