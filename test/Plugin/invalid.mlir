// The verifier runs inside upstream mlir-opt through the dialect plugin.

// RUN: mlir-opt %s -split-input-file -verify-diagnostics \
// RUN:   --load-dialect-plugin=%flash_plugin

func.func @bad_head_dim(%q: tensor<100x64xf32>, %k: tensor<70x32xf32>,
                        %v: tensor<70x48xf32>, %o: tensor<100x48xf32>) -> tensor<100x48xf32> {
  // expected-error @+1 {{'key' head dim D = 32 does not match 'query' head dim D = 64}}
  %r = flash.attention ins(%q, %k, %v : tensor<100x64xf32>, tensor<70x32xf32>, tensor<70x48xf32>)
         outs(%o : tensor<100x48xf32>) scale(0.125) -> tensor<100x48xf32>
  return %r : tensor<100x48xf32>
}
