// The dialect and passes through upstream mlir-opt with FlashPlugin loaded.
// Pass flags are parsed before plugins load, so passes go through
// --pass-pipeline.

// RUN: mlir-opt %s -split-input-file --load-dialect-plugin=%flash_plugin \
// RUN:   | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: mlir-opt %s -split-input-file --load-dialect-plugin=%flash_plugin \
// RUN:   --load-pass-plugin=%flash_plugin \
// RUN:   --pass-pipeline='builtin.module(flash-decompose-attention)' \
// RUN:   | FileCheck %s --check-prefix=DECOMPOSE
// flash-raise-attention at module level, on func.func and on another
// function-like op (the input and its checks are the raise test's).
// RUN: mlir-opt %S/../Transforms/raise-attention/function-like.mlir -split-input-file \
// RUN:   --load-dialect-plugin=%flash_plugin --load-pass-plugin=%flash_plugin \
// RUN:   --pass-pipeline='builtin.module(flash-raise-attention)' \
// RUN:   | FileCheck %S/../Transforms/raise-attention/function-like.mlir
// RUN: not mlir-opt %s -split-input-file 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NODIALECT
// RUN: not mlir-opt %s -split-input-file --load-dialect-plugin=%flash_plugin \
// RUN:   --pass-pipeline='builtin.module(flash-decompose-attention)' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOPASSES

// NODIALECT: Dialect `flash' not found for custom op 'flash.attention'
// NOPASSES: 'flash-decompose-attention' does not refer to a registered pass or pass pipeline

// ROUNDTRIP-LABEL: func.func @causal_gqa
// ROUNDTRIP:         flash.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x100x64xf32>, tensor<2x2x70x64xf32>, tensor<2x2x70x48xf32>)
// ROUNDTRIP-SAME:      scale(0.125) mask(causal, bottom_right)
// DECOMPOSE-LABEL: func.func @causal_gqa
// DECOMPOSE-NOT:     flash.attention
// DECOMPOSE:         linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x4x100x64xf32>, tensor<2x4x70x64xf32>)
// DECOMPOSE-SAME:      outs(%{{.*}} : tensor<2x4x100x70xf32>)
// DECOMPOSE:         return %{{.*}} : tensor<2x4x100x48xf32>
func.func @causal_gqa(%q: tensor<2x4x100x64xf32>, %k: tensor<2x2x70x64xf32>,
                      %v: tensor<2x2x70x48xf32>, %o: tensor<2x4x100x48xf32>)
    -> tensor<2x4x100x48xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<2x4x100x64xf32>, tensor<2x2x70x64xf32>, tensor<2x2x70x48xf32>)
         outs(%o : tensor<2x4x100x48xf32>) scale(0.125) mask(causal, bottom_right)
         -> tensor<2x4x100x48xf32>
  return %r : tensor<2x4x100x48xf32>
}

// -----

// ROUNDTRIP-LABEL: func.func @bias
// ROUNDTRIP:         captures(%{{.*}} : tensor<100x70xf32>)
// ROUNDTRIP:         score_mod
// ROUNDTRIP:           flash.yield
// DECOMPOSE-LABEL: func.func @bias
// DECOMPOSE-NOT:     flash.
// DECOMPOSE:         tensor.extract %{{.*}} : tensor<100x70xf32>
// DECOMPOSE:         return
func.func @bias(%q: tensor<100x64xf32>, %k: tensor<70x64xf32>,
                %v: tensor<70x48xf32>, %o: tensor<100x48xf32>,
                %bias: tensor<100x70xf32>) -> tensor<100x48xf32> {
  %r = flash.attention ins(%q, %k, %v : tensor<100x64xf32>, tensor<70x64xf32>, tensor<70x48xf32>)
         outs(%o : tensor<100x48xf32>) captures(%bias : tensor<100x70xf32>)
         scale(0.125) score_mod {
         ^bb0(%s: f32, %i: index, %j: index, %bt: tensor<100x70xf32>):
           %x = tensor.extract %bt[%i, %j] : tensor<100x70xf32>
           %y = arith.addf %s, %x : f32
           flash.yield %y : f32
         } -> tensor<100x48xf32>
  return %r : tensor<100x48xf32>
}
