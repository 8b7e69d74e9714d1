// RUN: flash-opt %s -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file | flash-opt -split-input-file | FileCheck %s
// RUN: flash-opt %s -split-input-file -mlir-print-op-generic | flash-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @prefill_gqa_lse
// CHECK: flash.varlen_attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4096x32x128xbf16>, tensor<3000x8x128xbf16>, tensor<3000x8x128xbf16>)
// CHECK-SAME: seqlens(%{{.*}}, %{{.*}} : tensor<9xi32>, tensor<9xi32>)
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<4096x32x128xbf16>, tensor<32x4096xf32>)
// CHECK-SAME: scale(0.0883883{{[0-9]*}}) mask(causal, bottom_right) -> tensor<4096x32x128xbf16>, tensor<32x4096xf32>
func.func @prefill_gqa_lse(%q: tensor<4096x32x128xbf16>, %k: tensor<3000x8x128xbf16>,
                           %v: tensor<3000x8x128xbf16>, %cq: tensor<9xi32>, %ck: tensor<9xi32>,
                           %o: tensor<4096x32x128xbf16>, %l: tensor<32x4096xf32>)
    -> (tensor<4096x32x128xbf16>, tensor<32x4096xf32>) {
  %r:2 = flash.varlen_attention ins(%q, %k, %v : tensor<4096x32x128xbf16>, tensor<3000x8x128xbf16>, tensor<3000x8x128xbf16>) seqlens(%cq, %ck : tensor<9xi32>, tensor<9xi32>) outs(%o, %l : tensor<4096x32x128xbf16>, tensor<32x4096xf32>) scale(0.0883883) mask(causal, bottom_right) -> tensor<4096x32x128xbf16>, tensor<32x4096xf32>
  return %r#0, %r#1 : tensor<4096x32x128xbf16>, tensor<32x4096xf32>
}

// -----

// CHECK-LABEL: func.func @dynamic_tokens
// CHECK: flash.varlen_attention {{.*}} seqlens(%{{.*}}, %{{.*}} : tensor<?xi32>, tensor<?xi32>)
// CHECK-SAME: scale(1.0) -> tensor<?x4x24xf32>
func.func @dynamic_tokens(%q: tensor<?x4x16xf32>, %k: tensor<?x2x16xf32>, %v: tensor<?x2x24xf32>,
                          %cq: tensor<?xi32>, %ck: tensor<?xi32>, %o: tensor<?x4x24xf32>) -> tensor<?x4x24xf32> {
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<?x4x16xf32>, tensor<?x2x16xf32>, tensor<?x2x24xf32>) seqlens(%cq, %ck : tensor<?xi32>, tensor<?xi32>) outs(%o : tensor<?x4x24xf32>) scale(1.0) -> tensor<?x4x24xf32>
  return %r : tensor<?x4x24xf32>
}

// -----

// Sinks (one logit per query head, gpt-oss) after the outs.
// CHECK-LABEL: func.func @sinks
// CHECK: flash.varlen_attention {{.*}} outs(%{{.*}} : tensor<?x4x24xf32>) sinks(%{{.*}} : tensor<4xbf16>) scale(0.25) mask(sliding_window, 3, bottom_right) -> tensor<?x4x24xf32>
func.func @sinks(%q: tensor<?x4x16xf32>, %k: tensor<?x2x16xf32>, %v: tensor<?x2x24xf32>,
                 %cq: tensor<?xi32>, %ck: tensor<?xi32>, %o: tensor<?x4x24xf32>, %s: tensor<4xbf16>) -> tensor<?x4x24xf32> {
  %r = flash.varlen_attention ins(%q, %k, %v : tensor<?x4x16xf32>, tensor<?x2x16xf32>, tensor<?x2x24xf32>) seqlens(%cq, %ck : tensor<?xi32>, tensor<?xi32>) outs(%o : tensor<?x4x24xf32>) sinks(%s : tensor<4xbf16>) scale(0.25) mask(sliding_window, 3, bottom_right) -> tensor<?x4x24xf32>
  return %r : tensor<?x4x24xf32>
}
