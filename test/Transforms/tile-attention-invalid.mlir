// RUN: flash-opt %s --flash-tile-attention="block-q=0 block-kv=16" -verify-diagnostics -split-input-file

func.func @zero_block(%q: tensor<4x100x64xf32>, %k: tensor<4x70x64xf32>, %v: tensor<4x70x48xf32>,
                      %init: tensor<4x100x48xf32>) -> tensor<4x100x48xf32> {
  // expected-error @+1 {{'flash.attention' op cannot be tiled: block-q and block-kv must be positive, got 0 and 16}}
  %o = flash.attention ins(%q, %k, %v : tensor<4x100x64xf32>, tensor<4x70x64xf32>, tensor<4x70x48xf32>)
         outs(%init : tensor<4x100x48xf32>) scale(0.125) -> tensor<4x100x48xf32>
  return %o : tensor<4x100x48xf32>
}
